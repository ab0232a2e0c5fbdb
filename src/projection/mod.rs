//! Projections: pure folds of the event log into the shapes tools and exports read.
//!
//! Owns: [`summary`] (counts kept beside each session head), [`tree`] (the petgraph
//! thought tree with branches, revisions and anomalies) and [`family`] (what the tool
//! families keep in both: their folded state in the tree, their data on a thought, their
//! fields of the summary). Must not: write anything, do I/O, loop on a crafted log (every
//! fold walks each event once), or name a family: a family's shapes and folds live in its
//! own folder.

pub mod family;
#[cfg(test)]
pub mod fixtures;
pub mod summary;
pub mod tree;
