//! The qa family's event: one verification step as `sequentialthinking_qa` recorded it,
//! its codec, and how it folds into the summary and the thought tree.
//!
//! Owns: [`Step`], [`ToolRecommendation`], [`QaStep`] (the recorded fields),
//! [`QaStepRecorded`] (tag `qa_step_recorded`, schema [`QA_SCHEMA`]) and [`QA_CODEC`].
//! Must not: change a field name or the row layout without bumping the schema and
//! reading the old one.

use crate::event::family::{StoredCall, postcard_decode, postcard_encode};
use crate::event::summary::SessionSummary;
use crate::event::{
    CallRecord, CodecError, DecodeFields, FamilyEvent, FamilyPayload, PayloadCodec,
};
use crate::projection::family::NodeExtension;
use crate::projection::tree::FoldTree;
use crate::projection::tree::ThoughtTree;
use crate::tools::qa::node::{QaNode, StandIn};
use crate::tools::thinking::SequentialThought;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Schema of the qa family's payloads written by this build.
pub(crate) const QA_SCHEMA: u32 = 1;
/// Tag of a `sequentialthinking_qa` step.
pub(crate) const QA_STEP_RECORDED: &str = "qa_step_recorded";

/// A tool recommended for a step, with how sure and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolRecommendation {
    pub tool_name: String,
    /// 0..1.
    pub confidence: f64,
    pub rationale: String,
    /// From 1 (first).
    pub priority: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggested_inputs: Option<Value>,
}

/// Multiplier of a tool's confidence when it stands in for the one the template names
/// (`workflow::recommend_step`); its value is written into the rationale, where
/// [`stands_in_for`] reads it back.
pub(crate) const SUBSTITUTE_FACTOR: f64 = 0.8;

/// The tool a recommendation stands in for, when the workflow's `recommend_step` substituted it: read
/// back from the reason it wrote into the rationale (the one record of it), so it must
/// follow that text.
pub(crate) fn stands_in_for(tool: &ToolRecommendation) -> Option<&str> {
    let reason = format!(" (confidence {}: the workflow's ", tool.confidence);
    let rest = &tool.rationale[tool.rationale.rfind(&reason)? + reason.len()..];
    let marker = format!("; ×{SUBSTITUTE_FACTOR}: stands in for ");
    let rest = &rest[rest.find("; ")?..];
    let rest = rest.strip_prefix(marker.as_str())?;
    Some(&rest[..rest.find(", which you do not have")?])
}

/// A verification step: the caller's (`current_step`) or the one recommended next.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Step {
    pub step_description: String,
    pub expected_outcome: String,
    pub recommended_tools: Vec<ToolRecommendation>,
    pub next_step_conditions: Vec<String>,
    /// Outcomes that call for revising an earlier step (recommended steps only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revise_when: Vec<String>,
    /// Outcomes that call for a branch (recommended steps only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branch_when: Vec<String>,
}

/// Everything one `sequentialthinking_qa` call records besides its call: the thought as
/// `sequentialthinking` records it, the caller's step as given, and what the server
/// recommended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct QaStep {
    #[serde(flatten)]
    pub thought: SequentialThought,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_target: Option<String>,
    /// Name of the workflow the step was routed to.
    pub workflow: String,
    /// The caller's `current_step`, as given (never rewritten).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<Step>,
    /// The server's recommendation (none when no next thought is needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommended_next_step: Option<Step>,
    /// Tools the caller's own step names that it does not have.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_recommendations: Vec<String>,
    /// The caller's `remaining_steps`, as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remaining_steps: Vec<String>,
}

/// What `sequentialthinking_qa` records: tag first, the step's fields flat, then the call.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename = "qa_step_recorded")]
pub(crate) struct QaStepRecorded {
    #[serde(flatten)]
    pub step: QaStep,
    pub call: CallRecord,
}

impl QaStep {
    /// Tool names of the caller's own step.
    pub(crate) fn used_tools(&self) -> Vec<String> {
        self.current_step
            .iter()
            .flat_map(|s| s.recommended_tools.iter().map(|t| t.tool_name.clone()))
            .collect()
    }
}

impl FamilyEvent for QaStepRecorded {
    fn codec(&self) -> &'static dyn PayloadCodec {
        &QA_CODEC
    }

    fn type_name(&self) -> &'static str {
        QA_STEP_RECORDED
    }

    fn text(&self) -> Option<&str> {
        Some(&self.step.thought.thought)
    }

    fn search_extra(&self) -> Option<&str> {
        self.step.verification_target.as_deref()
    }

    fn call(&self) -> Option<&CallRecord> {
        Some(&self.call)
    }

    fn branch(&self) -> Option<&str> {
        self.step.thought.branch().map(|(id, _)| id)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let body = serde_json::to_string(&self.step).expect("a qa step always serializes");
        postcard_encode(
            &StoredQa {
                body: &body,
                call: StoredCall::of(&self.call),
            },
            out,
        );
    }

    fn summarize(&self, summary: &mut SessionSummary, new_branch: bool) {
        let thought = &self.step.thought;
        summary.thoughts += 1;
        summary.total_thoughts = Some(thought.total_thoughts);
        summary.next_thought_needed = Some(thought.next_thought_needed);
        if let Some((id, _)) = thought.branch()
            && new_branch
        {
            summary.branches.push(id.to_string());
        }
    }
}

impl FoldTree for QaStepRecorded {
    fn fold_tree(self, seq: u64, at: u64, tree: &mut ThoughtTree) {
        let used_tools = self.step.used_tools();
        let QaStepRecorded { step, call } = self;
        let mut node = step.thought.into_node(seq, at, call.tool);
        node.data = Some(NodeExtension::new(QaNode {
            verification_target: step.verification_target,
            workflow: step.workflow,
            used_tools,
            stand_ins: step
                .recommended_next_step
                .iter()
                .flat_map(|s| &s.recommended_tools)
                .filter_map(|t| {
                    Some(StandIn {
                        tool: t.tool_name.clone(),
                        stands_in_for: stands_in_for(t)?.to_string(),
                    })
                })
                .collect(),
            recommended_tools: step
                .recommended_next_step
                .map(|s| {
                    s.recommended_tools
                        .into_iter()
                        .map(|t| t.tool_name)
                        .collect()
                })
                .unwrap_or_default(),
        }));
        tree.add_thought(node);
    }
}

/// A `qa_step_recorded` row: the step as compact JSON (it holds free-form suggested
/// inputs, which a binary format without a schema cannot carry), then the call.
#[derive(Serialize, Deserialize)]
struct StoredQa<'a> {
    body: &'a str,
    #[serde(borrow)]
    call: StoredCall<'a>,
}

/// Just the call of a payload's JSON (read without the flattened fields, so its raw
/// arguments stay verbatim).
#[derive(Deserialize)]
struct CallOnly {
    call: CallRecord,
}

/// The tag and the step of a payload's JSON.
#[derive(Deserialize)]
struct StepOnly {
    #[serde(rename = "type")]
    tag: String,
    #[serde(flatten)]
    step: QaStep,
}

/// The qa family's codec.
pub(crate) struct QaCodec;

/// The one instance, registered with the family.
pub(crate) static QA_CODEC: QaCodec = QaCodec;

impl PayloadCodec for QaCodec {
    fn family(&self) -> &'static str {
        "qa"
    }

    fn schema(&self) -> u32 {
        QA_SCHEMA
    }

    fn types(&self) -> &'static [&'static str] {
        &[QA_STEP_RECORDED]
    }

    fn decode(
        &self,
        tag: &str,
        schema: u32,
        bytes: &[u8],
        fields: DecodeFields,
    ) -> Result<FamilyPayload, CodecError> {
        self.refuse_newer(schema)?;
        if tag != QA_STEP_RECORDED {
            return Err(CodecError::Refused(format!(
                "the qa family has no event {tag:?}"
            )));
        }
        let stored: StoredQa<'_> = postcard_decode(bytes)?;
        let step: QaStep = serde_json::from_str(stored.body).map_err(CodecError::payload)?;
        Ok(FamilyPayload::new(QaStepRecorded {
            step,
            call: stored.call.build(fields)?,
        }))
    }

    fn decode_json(&self, tag: &str, schema: u32, json: &str) -> Result<FamilyPayload, CodecError> {
        self.refuse_newer(schema)?;
        let StepOnly { tag: found, step } =
            serde_json::from_str(json).map_err(CodecError::payload)?;
        if found != tag || tag != QA_STEP_RECORDED {
            return Err(CodecError::TagMismatch {
                found,
                expected: tag.to_string(),
            });
        }
        let CallOnly { call } = serde_json::from_str(json).map_err(CodecError::payload)?;
        Ok(FamilyPayload::new(QaStepRecorded { step, call }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, NewEvent, Payload, SessionId, SessionKind};
    use crate::store::Ledger;
    use serde_json::json;

    fn sample() -> QaStepRecorded {
        QaStepRecorded {
            step: QaStep {
                thought: crate::projection::fixtures::seq_thought("check the version", 1, 3),
                verification_target: Some("tailwind".into()),
                workflow: "version_verification".into(),
                current_step: Some(Step {
                    step_description: "read".into(),
                    expected_outcome: "known".into(),
                    recommended_tools: vec![ToolRecommendation {
                        tool_name: "read_file".into(),
                        confidence: 0.9,
                        rationale: "r".into(),
                        priority: 1,
                        alternatives: vec![],
                        suggested_inputs: Some(json!({"path": "package.json", "n": [1, 2.5]})),
                    }],
                    next_step_conditions: vec!["done".into()],
                    revise_when: vec![],
                    branch_when: vec![],
                }),
                recommended_next_step: None,
                invalid_recommendations: vec!["ghost".into()],
                remaining_steps: vec![],
            },
            call: CallRecord {
                tool: "sequentialthinking_qa".into(),
                raw_arguments: json!({"thought": "check the version", "x": 1.0}).into(),
                duration_us: 5,
            },
        }
    }

    #[test]
    fn a_step_round_trips_through_rows_and_json_and_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path(), crate::tools::families()).unwrap();
        let session = SessionId::generate();
        let event = sample();
        let events = vec![
            NewEvent::new(Payload::SessionStarted {
                kind: SessionKind::QA,
                title: "t".into(),
                aliases: Vec::new(),
            }),
            NewEvent::new(Payload::from(event.clone())),
        ];
        ledger
            .write_blocking(move |txn| txn.append(session, 0, events))
            .unwrap()
            .unwrap();
        let stored = ledger.events(session, 1, 2).unwrap();
        assert_eq!(stored[1].payload.family::<QaStepRecorded>(), Some(&event));
        ledger.verify_all().unwrap();
        let line = serde_json::to_string(&stored[1]).unwrap();
        assert!(
            line.contains(r#""payload":{"type":"qa_step_recorded","thought":"check the version""#),
            "{line}"
        );
        let back = Event::from_json(line.as_bytes(), ledger.families()).unwrap();
        assert_eq!(back, stored[1]);
        assert_eq!(back.computed_hash(), stored[1].hash);
    }
}
