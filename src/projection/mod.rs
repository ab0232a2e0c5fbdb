//! Projections: pure folds of the event log into the shapes tools and exports read.
//!
//! Owns: [`summary`] (counts kept beside each session head), [`tree`] (the petgraph
//! thought tree with branches, revisions and anomalies) [`plan`] (plans,
//! evaluations, closes and merges, folded into the tree) and [`booster`] (a booster
//! session's scratchpad, iterations and diagnostics, folded into the tree). Must not: write anything, do
//! I/O, or loop on a crafted log: every fold walks each event once.

pub mod agent;
pub mod booster;
#[cfg(test)]
pub mod fixtures;
pub mod plan;
pub mod summary;
pub mod tree;
