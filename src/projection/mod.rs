//! Projections: pure folds of the event log into the shapes tools and exports read.
//!
//! Owns: [`tree`] (the petgraph thought tree with branches, revisions and anomalies, and
//! the hook the families' payloads fold through, [`tree::FoldTree`]) and [`family`] (what
//! the tool families keep in it: their folded state, their data on a thought). The session
//! summary kept beside each head is stored data, the event layer's
//! ([`crate::event::summary`]): the tree carries one and reads it. Must not: write anything, do I/O, loop on a crafted log (every
//! fold walks each event once), or name a family: a family's shapes and folds live in its
//! own folder.

pub(crate) mod family;
#[cfg(test)]
pub(crate) mod fixtures;
pub(crate) mod tree;
