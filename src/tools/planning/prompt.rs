//! The planning family's pieces of the MCP prompts (`crate::prompts`): a plan's state for
//! `continue` and `plan`, the `deep_planning` call that resumes it, its merged branches
//! (not open any more) and its evaluations for `review`.
//!
//! Owns: [`plan_state`], [`resume`], [`merged`], [`evaluations`], reached through the
//! family's renderer ([`super::document::RENDER`]). Must not: read the store, or quote
//! anything outside the prompts' data blocks (the prompts place these values).

use super::payload::PHASE_DONE;
use super::state::Planning;
use super::{GET_PLAN, valid_next};
use crate::event::summary::SessionSummary;
use crate::export::family::{PromptResume, resumable_id};
use crate::projection::tree::ThoughtTree;
use serde_json::{Value, json};

/// The tool that resumes a plan.
const DEEP_PLANNING: &str = "deep_planning";

/// A plan's phase, problem and approaches (with their evaluated scores).
pub(crate) fn plan_state(tree: &ThoughtTree) -> Option<Value> {
    let planning = Planning::of(tree);
    let plan = planning.plan.as_ref()?;
    let approaches: Vec<Value> = plan
        .approaches
        .iter()
        .map(|a| {
            let mut row = json!({"seq": a.seq, "branchId": a.item.branch_id, "name": a.item.name});
            if let Some(evaluation) = planning.evaluation(&a.item.branch_id) {
                row["score"] = json!(evaluation.item.score);
            }
            row
        })
        .collect();
    let mut state = json!({
        "seq": plan.init_seq,
        "phase": plan.phase,
        "problem": plan.init.problem,
        "clarifications": plan.clarifications.len(),
        "approaches": approaches,
        "validNextPhases": continuing_phases(plan.phase),
    });
    if let Some(done) = &plan.finalized {
        state["selectedBranch"] = json!(done.item.selected_branch);
    }
    Some(state)
}

/// The `deep_planning` call in the plan's next phase; `get_plan` for a finalized plan.
pub(crate) fn resume(
    tree: &ThoughtTree,
    summary: &SessionSummary,
    session: &str,
) -> Option<PromptResume> {
    let plan = Planning::of(tree).plan.as_ref()?;
    let id = resumable_id(summary, session);
    if plan.phase == PHASE_DONE {
        // Nothing continues a finalized plan: offer reading it, never a new plan's init.
        return Some(PromptResume {
            tool: GET_PLAN,
            arguments: json!({"sessionId": id}),
            fill: &[],
            note: Some(
                "the plan is finalized and takes no more phases: read it (get_plan) and \
                 report where it stands"
                    .to_string(),
            ),
        });
    }
    let next = continuing_phases(plan.phase);
    Some(PromptResume {
        tool: DEEP_PLANNING,
        arguments: json!({
            "sessionId": id,
            "phase": next.first().copied().unwrap_or("explore"),
        }),
        fill: &["phase (any of plan.validNextPhases) and that phase's fields"],
        note: None,
    })
}

/// The phases that continue a plan in `phase` (`init` starts another plan: never one).
fn continuing_phases(phase: &str) -> Vec<&'static str> {
    valid_next(Some(phase))
        .iter()
        .copied()
        .filter(|p| *p != "init")
        .collect()
}

/// Whether the plan merged `branch`.
pub(crate) fn merged(tree: &ThoughtTree, branch: &str) -> bool {
    Planning::of(tree)
        .merges
        .iter()
        .any(|m| m.item.branch_id == branch)
}

/// Every evaluation with its criteria, rationale and recommendation (`None`: none).
pub(crate) fn evaluations(tree: &ThoughtTree) -> Option<Value> {
    let evaluations: Vec<Value> = Planning::of(tree)
        .evaluations
        .iter()
        .map(|e| {
            json!({
                "seq": e.seq,
                "branchId": e.item.branch_id,
                "score": e.item.score,
                "criteria": e.item.criteria.iter().map(|c| json!({"name": c.name, "score": c.score, "weight": c.weight})).collect::<Vec<_>>(),
                "rationale": e.item.rationale,
                "recommendation": e.item.recommendation,
            })
        })
        .collect();
    (!evaluations.is_empty()).then(|| json!(evaluations))
}
