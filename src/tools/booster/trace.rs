//! How the booster shows in a trace: each round's candidates, a beam rollout, the step
//! applied and a loop check are spans of their own (`booster round N`, `booster beam N`,
//! `booster step N`, `booster backtrack N` / `booster loop N`) under the call that recorded
//! them ([`crate::event::family::TraceStep`]), with counts and scores. Must not: put a
//! candidate's or a model's text in an attribute (span events carry it, only on opt-in).

use crate::event::family::{TraceStep, TraceValue};
use crate::tools::booster::payload::Body;
use crate::tools::booster::state::{LoopKind, Via};

/// The step a booster event is (none for the start and the hints).
pub(super) fn step(body: &Body) -> Option<TraceStep> {
    let int = |n: u64| TraceValue::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let (what, iteration, mut attributes) = match body {
        Body::BoosterStarted(_) | Body::HintsAdded(_) => return None,
        Body::CandidatesScored(set) => {
            let best = set
                .candidates
                .iter()
                .map(|c| c.score.total_score)
                .fold(f64::NEG_INFINITY, f64::max);
            let mut attributes = vec![
                (
                    "reasoning_ledger.booster.candidates",
                    int(set.candidates.len() as u64),
                ),
                (
                    "reasoning_ledger.booster.source",
                    TraceValue::Text(if set.source.model.is_some() {
                        "model"
                    } else {
                        "heuristic"
                    }),
                ),
            ];
            if best.is_finite() {
                attributes.push((
                    "reasoning_ledger.booster.best_score",
                    TraceValue::Float(best),
                ));
            }
            ("round", set.iteration, attributes)
        }
        Body::BeamRolledOut(beam) => (
            "beam",
            beam.iteration,
            vec![
                (
                    "reasoning_ledger.booster.heads",
                    int(beam.heads.len() as u64),
                ),
                (
                    "reasoning_ledger.booster.best_score",
                    TraceValue::Float(beam.best_total),
                ),
            ],
        ),
        Body::StepApplied(applied) => (
            "step",
            applied.iteration,
            vec![
                (
                    "reasoning_ledger.booster.candidate",
                    int(applied.candidate + 1),
                ),
                (
                    "reasoning_ledger.booster.via",
                    TraceValue::Text(match applied.via {
                        Via::Best => "best_of_n",
                        Via::Beam => "beam",
                    }),
                ),
                (
                    "reasoning_ledger.booster.score",
                    TraceValue::Float(applied.score.total_score),
                ),
            ],
        ),
        Body::Backtracked(check) | Body::LoopDetected(check) => (
            if matches!(body, Body::Backtracked(_)) {
                "backtrack"
            } else {
                "loop"
            },
            check.iteration,
            vec![(
                "reasoning_ledger.booster.loop",
                TraceValue::Text(match check.kind {
                    LoopKind::Stagnation => "stagnation",
                    LoopKind::Loop => "loop",
                }),
            )],
        ),
    };
    attributes.insert(0, ("reasoning_ledger.booster.iteration", int(iteration)));
    Some(TraceStep {
        name: format!("booster {what} {iteration}"),
        operation: None,
        attributes,
    })
}
