//! The planning family's events: a plan's phases, and the evaluations, closes and merges
//! of branches; their one codec, how they fold into the summary and the tree, and the
//! span each is in a trace (`trace_step`).
//!
//! Owns: [`PlanningEvent`] (a [`Body`] and the call that recorded it), the tags, schema
//! [`PLANNING_SCHEMA`] and [`PLANNING_CODEC`]. Written as one JSON object: the tag, the
//! body's camelCase fields, then `call` (what the hash covers). The binary row holds the
//! body's JSON text and the call. Must not: change a body's JSON field names without a
//! new schema and a reader of the old one.

use crate::event::family::{StoredCall, TraceStep, TraceValue, postcard_decode, postcard_encode};
use crate::event::summary::SessionSummary;
use crate::event::summary::SummaryPart;
use crate::event::{
    CallRecord, CodecError, DecodeFields, FamilyEvent, FamilyPayload, PayloadCodec,
};
use crate::projection::tree::FoldTree;
use crate::projection::tree::{ThoughtNode, ThoughtTree};
use crate::tools::planning::state::{
    Approach, BranchClose, BranchMerge, Clarification, Evaluation, FinalPlan, Folded, PlanInit,
    PlanState, Planning, PlanningSummary,
};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

/// Schema of the planning family's payloads written by this build.
pub(crate) const PLANNING_SCHEMA: u32 = 1;

pub(crate) const PLAN_INITIALIZED: &str = "plan_initialized";
pub(crate) const PLAN_CLARIFIED: &str = "plan_clarified";
pub(crate) const APPROACH_EXPLORED: &str = "approach_explored";
pub(crate) const BRANCH_EVALUATED: &str = "branch_evaluated";
pub(crate) const PLAN_FINALIZED: &str = "plan_finalized";
pub(crate) const BRANCH_CLOSED: &str = "branch_closed";
pub(crate) const BRANCH_MERGED: &str = "branch_merged";

/// Phases as stored in the summary and shown in answers.
pub(crate) const PHASE_INIT: &str = "init";
pub(crate) const PHASE_CLARIFY: &str = "clarify";
pub(crate) const PHASE_EXPLORE: &str = "explore";
pub(crate) const PHASE_EVALUATE: &str = "evaluate";
pub(crate) const PHASE_DONE: &str = "done";

/// What a planning event records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Body {
    PlanInitialized(PlanInit),
    PlanClarified(Clarification),
    ApproachExplored(Approach),
    BranchEvaluated(Evaluation),
    PlanFinalized(FinalPlan),
    BranchClosed(BranchClose),
    BranchMerged(BranchMerge),
}

/// One planning event: its body and the call that recorded it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlanningEvent {
    pub body: Body,
    pub call: CallRecord,
}

impl Serialize for PlanningEvent {
    /// The body's object (tag first), then `call`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let body = serde_json::to_value(&self.body).map_err(serde::ser::Error::custom)?;
        let serde_json::Value::Object(fields) = body else {
            return Err(serde::ser::Error::custom("a planning body is an object"));
        };
        let mut map = s.serialize_map(Some(fields.len() + 1))?;
        for (key, value) in &fields {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("call", &self.call)?;
        map.end()
    }
}

/// The `type` tag of a body.
pub(crate) fn tag_of(body: &Body) -> &'static str {
    match body {
        Body::PlanInitialized(_) => PLAN_INITIALIZED,
        Body::PlanClarified(_) => PLAN_CLARIFIED,
        Body::ApproachExplored(_) => APPROACH_EXPLORED,
        Body::BranchEvaluated(_) => BRANCH_EVALUATED,
        Body::PlanFinalized(_) => PLAN_FINALIZED,
        Body::BranchClosed(_) => BRANCH_CLOSED,
        Body::BranchMerged(_) => BRANCH_MERGED,
    }
}

/// A plan's phase after `body` (for the summary and the tree).
fn phase_after(body: &Body) -> Option<&'static str> {
    match body {
        Body::PlanInitialized(_) => Some(PHASE_INIT),
        Body::PlanClarified(_) => Some(PHASE_CLARIFY),
        Body::ApproachExplored(_) => Some(PHASE_EXPLORE),
        Body::BranchEvaluated(_) => Some(PHASE_EVALUATE),
        Body::PlanFinalized(_) => Some(PHASE_DONE),
        Body::BranchClosed(_) | Body::BranchMerged(_) => None,
    }
}

impl FamilyEvent for PlanningEvent {
    fn codec(&self) -> &'static dyn PayloadCodec {
        &PLANNING_CODEC
    }

    fn type_name(&self) -> &'static str {
        tag_of(&self.body)
    }

    fn text(&self) -> Option<&str> {
        match &self.body {
            Body::PlanInitialized(init) => Some(&init.problem),
            Body::PlanClarified(c) => Some(&c.question),
            Body::ApproachExplored(a) => Some(&a.name),
            Body::BranchEvaluated(e) => e.rationale.as_deref(),
            Body::PlanFinalized(_) => None,
            Body::BranchClosed(c) => Some(&c.conclusion),
            Body::BranchMerged(m) => Some(&m.thought),
        }
    }

    fn search_texts(&self) -> Vec<&str> {
        let mut texts: Vec<&str> = Vec::new();
        match &self.body {
            Body::PlanInitialized(init) => {
                texts.push(&init.problem);
                texts.extend(init.context.as_deref());
                texts.extend(init.constraints.iter().map(String::as_str));
            }
            Body::PlanClarified(c) => {
                texts.push(&c.question);
                texts.extend(c.answer.as_deref());
            }
            Body::ApproachExplored(a) => {
                texts.push(&a.name);
                texts.extend(a.description.as_deref());
                texts.extend(a.pros.iter().chain(&a.cons).map(String::as_str));
            }
            Body::BranchEvaluated(e) => {
                texts.extend(e.rationale.as_deref());
                texts.extend(e.recommendation.as_deref());
            }
            Body::PlanFinalized(plan) => {
                for step in &plan.steps {
                    texts.push(&step.title);
                    texts.push(&step.description);
                }
                for risk in &plan.risks {
                    texts.push(&risk.description);
                    texts.push(&risk.mitigation);
                }
                texts.extend(plan.assumptions.iter().map(String::as_str));
                texts.extend(plan.success_criteria.iter().map(String::as_str));
            }
            Body::BranchClosed(c) => texts.push(&c.conclusion),
            Body::BranchMerged(m) => texts.push(&m.thought),
        }
        texts
    }

    fn call(&self) -> Option<&CallRecord> {
        Some(&self.call)
    }

    fn branch(&self) -> Option<&str> {
        match &self.body {
            Body::ApproachExplored(a) => Some(&a.branch_id),
            _ => None,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let body = serde_json::to_string(&self.body).expect("a planning body serializes");
        postcard_encode(
            &StoredPlanning {
                body: &body,
                call: StoredCall::of(&self.call),
            },
            out,
        );
    }

    fn summarize(&self, summary: &mut SessionSummary, new_branch: bool) {
        // A plan's phase moves only in a planning session (an evaluation of a thinking
        // branch has no phase).
        let in_plan = summary
            .part::<PlanningSummary>()
            .is_some_and(|p| p.phase.is_some());
        if let Some(phase) = phase_after(&self.body)
            && (in_plan || matches!(self.body, Body::PlanInitialized(_)))
        {
            summary.part_mut::<PlanningSummary>().phase = Some(phase.to_string());
        }
        match &self.body {
            Body::PlanInitialized(_) | Body::BranchClosed(_) => {}
            Body::PlanClarified(_) => summary.part_mut::<PlanningSummary>().clarifications += 1,
            Body::ApproachExplored(a) => {
                // The summary's own list decides (a tree's fold indexes only thought
                // branches, so its `new_branch` does not know approaches).
                let _ = new_branch;
                if !summary.branches.contains(&a.branch_id) {
                    summary.branches.push(a.branch_id.clone());
                }
            }
            Body::BranchEvaluated(e) => {
                let part = summary.part_mut::<PlanningSummary>();
                if !part.evaluated.contains(&e.branch_id) {
                    part.evaluated.push(e.branch_id.clone());
                }
            }
            Body::PlanFinalized(f) => {
                summary.part_mut::<PlanningSummary>().selected_branch =
                    Some(f.selected_branch.clone())
            }
            Body::BranchMerged(_) => summary.thoughts += 1,
        }
        if let Body::BranchClosed(c) = &self.body
            && !summary.branch_closed(&c.branch_id)
        {
            let part = summary.part_mut::<PlanningSummary>();
            part.closed_branches.push(c.branch_id.clone());
        }
    }

    fn trace_step(&self) -> Option<TraceStep> {
        Some(trace_step(&self.body))
    }
}

impl FoldTree for PlanningEvent {
    fn fold_tree(self, seq: u64, at: u64, tree: &mut ThoughtTree) {
        let PlanningEvent { body, call } = self;
        let planning = tree.family_or_default::<Planning>();
        if let (Some(plan), Some(phase)) = (planning.plan.as_mut(), phase_after(&body)) {
            plan.phase = phase;
        }
        match body {
            Body::PlanInitialized(init) => {
                planning.plan = Some(PlanState {
                    phase: PHASE_INIT,
                    init_seq: seq,
                    init,
                    clarifications: Vec::new(),
                    approaches: Vec::new(),
                    finalized: None,
                });
            }
            Body::PlanClarified(item) => {
                if let Some(plan) = planning.plan.as_mut() {
                    plan.clarifications.push(Folded { seq, item });
                }
            }
            Body::ApproachExplored(item) => {
                if let Some(plan) = planning.plan.as_mut() {
                    plan.approaches.push(Folded { seq, item });
                }
            }
            Body::PlanFinalized(item) => {
                if let Some(plan) = planning.plan.as_mut() {
                    plan.finalized = Some(Folded { seq, item });
                }
            }
            Body::BranchEvaluated(item) => planning.evaluations.push(Folded { seq, item }),
            Body::BranchClosed(item) => planning.closes.push(Folded { seq, item }),
            Body::BranchMerged(item) => {
                // On a sequentialthinking main line it reads as one more thought of it.
                planning.merges.push(Folded {
                    seq,
                    item: item.clone(),
                });
                let total_thoughts = tree.summary.as_ref().and_then(|s| s.total_thoughts);
                let mut node =
                    ThoughtNode::new(seq, at, call.tool, item.thought_number, item.thought);
                node.total_thoughts = total_thoughts.map(|total| total.max(item.thought_number));
                tree.add_thought(node);
            }
        }
    }
}

/// A planning row: the body's JSON text and the call.
#[derive(Serialize, Deserialize)]
struct StoredPlanning<'a> {
    body: &'a str,
    #[serde(borrow)]
    call: StoredCall<'a>,
}

/// The planning family's codec.
pub(crate) struct PlanningCodec;

/// The one instance, registered with the family.
pub(crate) static PLANNING_CODEC: PlanningCodec = PlanningCodec;

impl PayloadCodec for PlanningCodec {
    fn family(&self) -> &'static str {
        crate::tools::planning::state::FAMILY
    }

    fn schema(&self) -> u32 {
        PLANNING_SCHEMA
    }

    fn types(&self) -> &'static [&'static str] {
        &[
            PLAN_INITIALIZED,
            PLAN_CLARIFIED,
            APPROACH_EXPLORED,
            BRANCH_EVALUATED,
            PLAN_FINALIZED,
            BRANCH_CLOSED,
            BRANCH_MERGED,
        ]
    }

    fn summary_keys(&self) -> &'static [&'static str] {
        crate::tools::planning::state::SUMMARY_KEYS
    }

    fn read_summary(
        &self,
        fields: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Box<dyn SummaryPart>, serde_json::Error> {
        crate::event::family::read_part::<PlanningSummary>(fields)
    }

    fn decode(
        &self,
        tag: &str,
        schema: u32,
        bytes: &[u8],
        fields: DecodeFields,
    ) -> Result<FamilyPayload, CodecError> {
        self.refuse_newer(schema)?;
        let stored: StoredPlanning<'_> = postcard_decode(bytes)?;
        let body = crate::event::family::tagged_body(tag, stored.body, tag_of)?;
        Ok(FamilyPayload::new(PlanningEvent {
            body,
            call: stored.call.build(fields)?,
        }))
    }

    fn decode_json(&self, tag: &str, schema: u32, json: &str) -> Result<FamilyPayload, CodecError> {
        self.refuse_newer(schema)?;
        let (body, call) = crate::event::family::split_call(json)?;
        let call = call.ok_or(CodecError::MissingField("call"))?;
        let call = crate::event::family::call_from_json(&call)?;
        let body = crate::event::family::tagged_body(tag, &body, tag_of)?;
        Ok(FamilyPayload::new(PlanningEvent { body, call }))
    }
}

/// The step a planning event is: always one.
///
/// How deep planning shows in a trace: each planning event is a `plan {phase}` span under
/// the call that recorded it ([`crate::event::family::TraceStep`]), with its phase and, for
/// an evaluation or a final plan, its score and counts. Must not: put a text a person or a
/// model wrote in an attribute (branch names and plan text stay in the span events, and
/// only on opt-in).
fn trace_step(body: &Body) -> TraceStep {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::planning::state::Criterion;
    use serde_json::json;

    fn call() -> CallRecord {
        CallRecord {
            tool: "deep_planning".into(),
            raw_arguments: json!({"phase": "evaluate", "x": 1.50}).into(),
            duration_us: 7,
        }
    }

    fn samples() -> Vec<PlanningEvent> {
        let bodies = vec![
            Body::PlanInitialized(PlanInit {
                problem: "p".into(),
                context: None,
                constraints: vec!["c".into()],
            }),
            Body::BranchEvaluated(Evaluation {
                branch_id: "a".into(),
                criteria: vec![Criterion {
                    name: "risk".into(),
                    score: 3.0,
                    weight: 0.2,
                    inverted: true,
                }],
                score: 1.4,
                rationale: Some("why".into()),
                recommendation: Some("pursue".into()),
            }),
            Body::BranchMerged(BranchMerge {
                branch_id: "a".into(),
                strategy: "summary".into(),
                thought_number: 3,
                thought: "merged".into(),
            }),
        ];
        bodies
            .into_iter()
            .map(|body| PlanningEvent { body, call: call() })
            .collect()
    }

    #[test]
    fn the_tree_and_the_store_fold_the_same_summary_and_replay_is_a_prefix() {
        use crate::event::{Event, Payload, SessionId, SessionKind};
        use crate::projection::fixtures::session_event;
        use crate::tools::planning::state::Approach;
        let session = SessionId::generate();
        let approach = |id: &str| {
            Body::ApproachExplored(Approach {
                branch_id: id.into(),
                name: id.into(),
                description: None,
                pros: Vec::new(),
                cons: Vec::new(),
            })
        };
        let mut payloads = vec![Payload::SessionStarted {
            kind: SessionKind::PLANNING,
            title: "p".into(),
            aliases: vec!["dp-00000000".into()],
        }];
        payloads.extend(
            [approach("a"), approach("b")]
                .into_iter()
                .chain(samples().into_iter().map(|e| e.body))
                .map(|body| Payload::from(PlanningEvent { body, call: call() })),
        );
        let events: Vec<Event> = payloads
            .into_iter()
            .enumerate()
            .map(|(i, p)| session_event(session, i as u64 + 1, p))
            .collect();
        let tree = ThoughtTree::build(session, events.clone(), &crate::tools::folds());
        let mut stored = SessionSummary::start(&events[0]).unwrap();
        for event in &events[1..] {
            stored.apply(event);
        }
        assert_eq!(tree.summary.as_ref(), Some(&stored));
        assert_eq!(stored.branches, ["a", "b"]);
        assert_eq!(PlanningSummary::of(&stored).evaluated, ["a"]);
        assert_eq!(
            PlanningSummary::of(&stored).phase.as_deref(),
            Some("evaluate"),
            "a merge leaves the phase"
        );
        assert_eq!(stored.thoughts, 1, "the merge");
        let prefix =
            ThoughtTree::build(session, events.into_iter().take(3), &crate::tools::folds());
        assert_eq!(
            Planning::of(&prefix).plan,
            None,
            "no init yet in the prefix"
        );
        assert_eq!(Planning::of(&tree).merges.len(), 1);
        assert_eq!(tree.thoughts().count(), 1);
    }

    #[test]
    fn json_and_binary_round_trip_tag_first() {
        for event in samples() {
            let json = serde_json::to_string(&event).unwrap();
            assert!(
                json.starts_with(&format!("{{\"type\":\"{}\"", tag_of(&event.body))),
                "{json}"
            );
            assert!(json.ends_with("\"duration_us\":7}}"), "{json}");
            let back = PLANNING_CODEC
                .decode_json(tag_of(&event.body), 1, &json)
                .unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), json);
            let mut bytes = Vec::new();
            event.encode(&mut bytes);
            let back = PLANNING_CODEC
                .decode(tag_of(&event.body), 1, &bytes, DecodeFields::All)
                .unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), json);
            assert!(
                PLANNING_CODEC
                    .decode("plan_clarified", 1, &bytes, DecodeFields::All)
                    .is_err()
            );
        }
        assert!(
            PLANNING_CODEC
                .decode_json(PLAN_INITIALIZED, 2, "{}")
                .is_err()
        );
    }
}
