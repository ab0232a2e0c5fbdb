//! How deep planning shows in a trace: each planning event is a `plan {phase}` span under
//! the call that recorded it ([`crate::event::family::TraceStep`]), with its phase and, for
//! an evaluation or a final plan, its score and counts. Must not: put a text a person or a
//! model wrote in an attribute (branch names and plan text stay in the span events, and
//! only on opt-in).

use crate::event::family::{TraceStep, TraceValue};
use crate::tools::planning::payload::{
    Body, PHASE_CLARIFY, PHASE_DONE, PHASE_EVALUATE, PHASE_EXPLORE, PHASE_INIT,
};

/// The step a planning event is: always one.
pub(super) fn step(body: &Body) -> TraceStep {
    let count = |n: usize| TraceValue::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let (phase, mut attributes) = match body {
        Body::PlanInitialized(_) => (PHASE_INIT, Vec::new()),
        Body::PlanClarified(_) => (PHASE_CLARIFY, Vec::new()),
        Body::ApproachExplored(_) => (PHASE_EXPLORE, Vec::new()),
        Body::BranchEvaluated(evaluation) => (
            PHASE_EVALUATE,
            vec![
                (
                    "reasoning_ledger.plan.score",
                    TraceValue::Float(evaluation.score),
                ),
                (
                    "reasoning_ledger.plan.criteria",
                    count(evaluation.criteria.len()),
                ),
            ],
        ),
        Body::PlanFinalized(plan) => (
            PHASE_DONE,
            vec![
                ("reasoning_ledger.plan.steps", count(plan.steps.len())),
                ("reasoning_ledger.plan.risks", count(plan.risks.len())),
            ],
        ),
        Body::BranchClosed(_) => ("close", Vec::new()),
        Body::BranchMerged(_) => ("merge", Vec::new()),
    };
    attributes.insert(0, ("reasoning_ledger.plan.phase", TraceValue::Text(phase)));
    TraceStep {
        name: format!("plan {phase}"),
        operation: None,
        attributes,
    }
}
