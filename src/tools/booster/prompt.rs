//! The booster family's pieces of the MCP prompts (`crate::prompts`): its search's state
//! and last steps for `continue`, the `step` call that resumes it, its step scores for
//! `review`.
//!
//! Owns: [`state`], [`resume`], [`step_scores`], reached through the family's renderer
//! ([`super::mermaid::RENDER`]). Must not: read the store.

use super::state::BoosterState;
use crate::event::summary::SessionSummary;
use crate::export::family::{PromptResume, resumable_id};
use crate::projection::tree::ThoughtTree;
use serde_json::{Value, json};

/// The task, hints, counts and the last `last` steps with their scores.
pub(crate) fn state(tree: &ThoughtTree, last: usize) -> Option<Value> {
    let booster = tree.family::<BoosterState>()?;
    let skip = booster.steps.len().saturating_sub(last);
    let steps: Vec<Value> = booster.steps[skip..]
        .iter()
        .map(|step| {
            json!({
                "seq": step.seq,
                "index": step.index,
                "text": step.proposal.text,
                "totalScore": step.score.total_score,
            })
        })
        .collect();
    Some(json!({
        "task": booster.task,
        "hints": booster.hints,
        "pendingHints": booster.pending_hints,
        "iterations": booster.iterations.len(),
        "backtracks": booster.backtracks,
        "lastSteps": steps,
    }))
}

/// The next `step` of the search.
pub(crate) fn resume(
    tree: &ThoughtTree,
    summary: &SessionSummary,
    session: &str,
) -> Option<PromptResume> {
    tree.family::<BoosterState>()?;
    Some(PromptResume {
        tool: "step",
        arguments: json!({"sessionId": resumable_id(summary, session)}),
        fill: &[],
        note: None,
    })
}

/// Every step's scores.
pub(crate) fn step_scores(tree: &ThoughtTree) -> Option<Value> {
    let booster = tree.family::<BoosterState>()?;
    let steps: Vec<Value> = booster
        .steps
        .iter()
        .map(|s| {
            json!({
                "seq": s.seq,
                "index": s.index,
                "rulesScore": s.score.rules_score,
                "redundancyScore": s.score.redundancy_score,
                "consistencyScore": s.score.consistency_score,
                "totalScore": s.score.total_score,
            })
        })
        .collect();
    Some(json!(steps))
}
