//! The booster family's events, their one codec, how they fold, and the spans they are in
//! a trace (`trace_step`).
//!
//! Owns: [`BoosterEvent`] (a [`Body`] and, on the first event a call records, that
//! call), the tags, [`BOOSTER_SCHEMA`] and [`BOOSTER_CODEC`]. Written as one JSON
//! object: the tag, the body's camelCase fields, then `call` when present (what the hash
//! covers). The binary row holds the body's JSON text and the call. Must not: change a
//! body's JSON field names without a new schema and a reader of the old one.

use super::state::HEURISTIC_PROVIDER;
use crate::event::family::{StoredCall, TraceStep, TraceValue, postcard_decode, postcard_encode};
use crate::event::summary::SessionSummary;
use crate::event::{
    CallRecord, CodecError, DecodeFields, FamilyEvent, FamilyPayload, PayloadCodec,
};
use crate::projection::tree::FoldTree;
use crate::projection::tree::{ThoughtNode, ThoughtTree};
pub(crate) use crate::tools::booster::state::{
    Applied, Beam, BoosterState, CandidateSet, Hints, LoopCheck, Proposal, Score, Started,
    StepCount,
};
use crate::tools::booster::state::{LoopKind, Via};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

/// Schema of the booster family's payloads written by this build.
pub(crate) const BOOSTER_SCHEMA: u32 = 1;

pub(crate) const BOOSTER_STARTED: &str = "booster_started";
pub(crate) const HINTS_ADDED: &str = "hints_added";
pub(crate) const CANDIDATES_SCORED: &str = "candidates_scored";
pub(crate) const BEAM_ROLLED_OUT: &str = "beam_rolled_out";
pub(crate) const STEP_APPLIED: &str = "step_applied";
pub(crate) const BACKTRACKED: &str = "backtracked";
pub(crate) const LOOP_DETECTED: &str = "loop_detected";

/// What a booster event records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Body {
    BoosterStarted(Started),
    HintsAdded(Hints),
    CandidatesScored(CandidateSet),
    BeamRolledOut(Beam),
    StepApplied(Applied),
    /// The loop check dropped the last step from the scratchpad (the step's event stays).
    Backtracked(LoopCheck),
    /// The loop check fired with backtracking off.
    LoopDetected(LoopCheck),
}

/// The `type` tag of a body.
pub(crate) fn tag_of(body: &Body) -> &'static str {
    match body {
        Body::BoosterStarted(_) => BOOSTER_STARTED,
        Body::HintsAdded(_) => HINTS_ADDED,
        Body::CandidatesScored(_) => CANDIDATES_SCORED,
        Body::BeamRolledOut(_) => BEAM_ROLLED_OUT,
        Body::StepApplied(_) => STEP_APPLIED,
        Body::Backtracked(_) => BACKTRACKED,
        Body::LoopDetected(_) => LOOP_DETECTED,
    }
}

/// One booster event: its body and, on a call's first event, the call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BoosterEvent {
    pub body: Body,
    pub call: Option<CallRecord>,
}

impl Serialize for BoosterEvent {
    /// The body's object (tag first), then `call` when present.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let body = serde_json::to_value(&self.body).map_err(serde::ser::Error::custom)?;
        let serde_json::Value::Object(fields) = body else {
            return Err(serde::ser::Error::custom("a booster body is an object"));
        };
        let mut map = s.serialize_map(Some(fields.len() + 1))?;
        for (key, value) in &fields {
            map.serialize_entry(key, value)?;
        }
        if let Some(call) = &self.call {
            map.serialize_entry("call", call)?;
        }
        map.end()
    }
}

impl FamilyEvent for BoosterEvent {
    fn codec(&self) -> &'static dyn PayloadCodec {
        &BOOSTER_CODEC
    }

    fn type_name(&self) -> &'static str {
        tag_of(&self.body)
    }

    fn text(&self) -> Option<&str> {
        match &self.body {
            Body::BoosterStarted(s) => Some(&s.task),
            Body::StepApplied(a) => Some(&a.proposal.text),
            Body::Backtracked(c) | Body::LoopDetected(c) => Some(&c.text),
            Body::HintsAdded(h) => h.hints.first().map(String::as_str),
            Body::CandidatesScored(_) | Body::BeamRolledOut(_) => None,
        }
    }

    fn search_texts(&self) -> Vec<&str> {
        fn proposal(p: &Proposal) -> impl Iterator<Item = &str> {
            [p.text.as_str(), p.rationale.as_str()]
                .into_iter()
                .chain(p.how_to_verify.as_deref())
                .chain(p.expected_outcomes.iter().map(String::as_str))
        }
        match &self.body {
            Body::BoosterStarted(s) => std::iter::once(s.task.as_str())
                .chain(s.seed_hints.iter().map(String::as_str))
                .collect(),
            Body::HintsAdded(h) => h.hints.iter().map(String::as_str).collect(),
            // Heuristic candidates are the server's templates around the task (indexed
            // where it was given): only a model's candidates are someone's words.
            Body::CandidatesScored(set) if set.source.provider == HEURISTIC_PROVIDER => Vec::new(),
            Body::CandidatesScored(set) => set
                .candidates
                .iter()
                .flat_map(|c| proposal(&c.proposal))
                .collect(),
            Body::BeamRolledOut(beam) => beam
                .heads
                .iter()
                .flat_map(|h| {
                    std::iter::once(h.text.as_str()).chain(h.path.iter().map(|p| p.text.as_str()))
                })
                .collect(),
            Body::StepApplied(a) => proposal(&a.proposal).collect(),
            Body::Backtracked(c) | Body::LoopDetected(c) => vec![c.text.as_str()],
        }
    }

    fn call(&self) -> Option<&CallRecord> {
        self.call.as_ref()
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let body = serde_json::to_string(&self.body).expect("a booster body serializes");
        postcard_encode(
            &StoredBooster {
                body: &body,
                call: self.call.as_ref().map(StoredCall::of),
            },
            out,
        );
    }

    fn summarize(&self, summary: &mut SessionSummary, _new_branch: bool) {
        if let Body::StepApplied(_) = self.body {
            summary.thoughts += 1;
        }
    }

    fn trace_step(&self) -> Option<TraceStep> {
        trace_step(&self.body)
    }
}

impl FoldTree for BoosterEvent {
    fn fold_tree(self, seq: u64, at: u64, tree: &mut ThoughtTree) {
        let BoosterEvent { body, call } = self;
        if let Body::BoosterStarted(started) = body {
            let mut state = BoosterState::new(started);
            state.started_seq = seq;
            if let Some(call) = call {
                state.last_tool = call.tool;
            }
            tree.set_family(state);
            return;
        }
        let Some(state) = tree.family_mut::<BoosterState>() else {
            return;
        };
        if let Some(call) = call {
            state.last_tool = call.tool;
        }
        match body {
            Body::BoosterStarted(_) => unreachable!("handled above"),
            Body::HintsAdded(h) => {
                state.hint_events.push((seq, h.hints.clone()));
                state.hints_added(h.hints);
            }
            Body::CandidatesScored(set) => state.candidates_scored(seq, at, set),
            Body::BeamRolledOut(beam) => state.beam_rolled_out(seq, beam),
            Body::StepApplied(applied) => {
                let mut node = ThoughtNode::new(
                    seq,
                    at,
                    state.last_tool.clone(),
                    applied.iteration,
                    applied.proposal.text.clone(),
                );
                let total =
                    StepCount::total(state.step_count, applied.iteration, state.config.max_steps);
                node.total_thoughts = Some(total);
                state.step_applied(seq, applied);
                tree.add_thought(node);
                tree.raise_totals(total);
            }
            Body::Backtracked(check) => state.loop_checked(seq, check, true),
            Body::LoopDetected(check) => state.loop_checked(seq, check, false),
        }
    }
}

/// A booster row: the body's JSON text and the call, if any.
#[derive(Serialize, Deserialize)]
struct StoredBooster<'a> {
    body: &'a str,
    #[serde(borrow)]
    call: Option<StoredCall<'a>>,
}

/// The booster family's codec.
pub(crate) struct BoosterCodec;

/// The one instance, registered with the family.
pub(crate) static BOOSTER_CODEC: BoosterCodec = BoosterCodec;

impl PayloadCodec for BoosterCodec {
    fn family(&self) -> &'static str {
        "booster"
    }

    fn schema(&self) -> u32 {
        BOOSTER_SCHEMA
    }

    fn types(&self) -> &'static [&'static str] {
        &[
            BOOSTER_STARTED,
            HINTS_ADDED,
            CANDIDATES_SCORED,
            BEAM_ROLLED_OUT,
            STEP_APPLIED,
            BACKTRACKED,
            LOOP_DETECTED,
        ]
    }

    fn decode(
        &self,
        tag: &str,
        schema: u32,
        bytes: &[u8],
        fields: DecodeFields,
    ) -> Result<FamilyPayload, CodecError> {
        self.refuse_newer(schema)?;
        let stored: StoredBooster<'_> = postcard_decode(bytes)?;
        let body = crate::event::family::tagged_body(tag, stored.body, tag_of)?;
        let call = match stored.call {
            Some(call) => Some(call.build(fields)?),
            None => None,
        };
        Ok(FamilyPayload::new(BoosterEvent { body, call }))
    }

    fn decode_json(&self, tag: &str, schema: u32, json: &str) -> Result<FamilyPayload, CodecError> {
        self.refuse_newer(schema)?;
        let (body, call) = crate::event::family::split_call(json)?;
        let call = match call {
            Some(call) => Some(crate::event::family::call_from_json(&call)?),
            None => None,
        };
        let body = crate::event::family::tagged_body(tag, &body, tag_of)?;
        Ok(FamilyPayload::new(BoosterEvent { body, call }))
    }
}

/// The step a booster event is (none for the start and the hints).
///
/// How the booster shows in a trace: each round's candidates, a beam rollout, the step
/// applied and a loop check are spans of their own (`booster round N`, `booster beam N`,
/// `booster step N`, `booster backtrack N` / `booster loop N`) under the call that recorded
/// them ([`crate::event::family::TraceStep`]), with counts and scores. Must not: put a
/// candidate's or a model's text in an attribute (span events carry it, only on opt-in).
fn trace_step(body: &Body) -> Option<TraceStep> {
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
