//! The model-call event: what any family records for each model call its tool made.
//!
//! Owns: [`ModelCallRecord`] (provider, model, the request sent, the answer, every
//! attempt with its latency, status, usage, cost and error), [`AttemptRecord`], the
//! payload [`ModelCallRecorded`] (tag `model_call_recorded`, schema
//! [`MODEL_CALL_SCHEMA`], with the [`CallRecord`] of the tool call that caused it) and
//! its codec [`MODEL_CALL_CODEC`] (registered in [`crate::tools::SHARED_CODECS`], so every
//! family's sessions can hold it). Folds into the summary's [`ModelCallTotals`] (counts,
//! tokens and cost) and the tree's [`ModelCalls`]; its Markdown section
//! ([`ModelCallsRender`]). Must not: hold a key (nothing here is ever built from one;
//! error texts are redacted before they get here).

use super::{ChatRequest, ChatResponse, ErrorAction, ErrorType, ProviderError, Usage};
use crate::event::family::{JsonCodec, SummaryFields, json_encode, read_part};
use crate::event::summary::SessionSummary;
use crate::event::summary::SummaryPart;
use crate::event::{CallRecord, FamilyEvent, FamilyPayload, PayloadCodec};
use crate::export::family::FamilyRender;
use crate::export::markdown::escape_inline;
use crate::projection::family::FamilyState;
use crate::projection::tree::FoldTree;
use crate::projection::tree::ThoughtTree;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;

/// The name the model-call event's codec and its parts of the projections go by.
pub(crate) const PROVIDER: &str = "provider";

/// A model call as folded: the event's seq and time, the tool that caused it, the record.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ModelCallView {
    pub seq: u64,
    pub at: u64,
    pub tool: String,
    pub record: ModelCallRecord,
}

/// The model calls recorded in a session (any family), in seq order: their state in the
/// tree.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ModelCalls(pub Vec<ModelCallView>);

impl ModelCalls {
    /// The model calls of `tree` (none when it has none).
    pub(crate) fn of(tree: &ThoughtTree) -> &[ModelCallView] {
        tree.family::<ModelCalls>().map_or(&[], |calls| &calls.0)
    }
}

impl FamilyState for ModelCalls {
    fn family(&self) -> &'static str {
        PROVIDER
    }

    fn json(&self) -> Option<(&'static str, Value)> {
        if self.0.is_empty() {
            return None;
        }
        let rows = self
            .0
            .iter()
            .map(|call| {
                let mut row = serde_json::to_value(&call.record).expect("a record serializes");
                row["seq"] = json!(call.seq);
                row["at"] = json!(crate::event::format_time(call.at));
                row["tool"] = json!(call.tool);
                row
            })
            .collect();
        Some(("modelCalls", rows))
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Model calls recorded in a session, and the tokens and cost they reported: the
/// provider's part of the summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelCallTotals {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model_calls: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prompt_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub completion_tokens: u64,
    /// Sum of the calls' costs, when a price table was configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// The JSON keys of [`ModelCallTotals`].
const SUMMARY_KEYS: &[&str] = &["model_calls", "prompt_tokens", "completion_tokens", "cost"];

impl SummaryPart for ModelCallTotals {
    fn family(&self) -> &'static str {
        PROVIDER
    }

    fn position(&self) -> u8 {
        2
    }

    /// Sessions with model calls (any family) say what they cost.
    fn list_row(&self, row: &mut Map<String, Value>) {
        if self.model_calls > 0 {
            row.insert("modelCalls".into(), json!(self.model_calls));
            row.insert("promptTokens".into(), json!(self.prompt_tokens));
            row.insert("completionTokens".into(), json!(self.completion_tokens));
            if let Some(cost) = self.cost {
                row.insert("cost".into(), json!(cost));
            }
        }
    }
}

/// Schema of `model_call_recorded` written by this build.
pub(crate) const MODEL_CALL_SCHEMA: u32 = 1;
/// Its tag.
pub(crate) const MODEL_CALL_RECORDED: &str = "model_call_recorded";

/// One attempt of a model call (an HTTP request, or one sampling request).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct AttemptRecord {
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Waited before this attempt (backoff or Retry-After), in milliseconds.
    pub waited_ms: u64,
    pub latency_ms: u64,
    /// The HTTP status, when one came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Cost of this attempt, when a price table is configured and usage was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Why it failed (redacted), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ProviderError>,
    /// What the provider asked to wait before the next attempt, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

/// Everything about one model call, as recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelCallRecord {
    /// "deepseek", "siliconflow", "cerebras", "openai", "custom", a config file's name,
    /// "mcp-sampling", or "none" when nothing could be called.
    pub provider: String,
    /// The model asked for (sampling: the model the client said answered).
    pub model: String,
    /// How it was reached: "http", "sampling" (`sampling/createMessage`),
    /// "sampling-input-required" (a 2026-07-28 round trip) or "none".
    pub transport: String,
    pub request: ChatRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ChatResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ProviderError>,
    pub attempts: Vec<AttemptRecord>,
    /// From the first attempt's start to the answer, in milliseconds.
    pub latency_ms: u64,
    /// Usage of the answer (the successful attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Cost of all attempts, when a price table is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

impl ModelCallRecord {
    /// A call that never reached a model (nothing configured, cancelled first).
    pub(crate) fn not_called(request: &ChatRequest, error: ProviderError) -> Self {
        ModelCallRecord {
            provider: "none".into(),
            model: String::new(),
            transport: "none".into(),
            request: request.clone(),
            response: None,
            error: Some(error),
            attempts: Vec::new(),
            latency_ms: 0,
            usage: None,
            cost: None,
        }
    }

    /// The error's envelope type and action, when it failed.
    pub(crate) fn failure(&self) -> Option<(ErrorType, ErrorAction)> {
        self.error.as_ref().map(|e| (e.error_type(), e.action()))
    }
}

/// The `model_call_recorded` payload: the record and the tool call that caused it.
/// Written as `{"type": "model_call_recorded", "model_call": {…}, "call": {…}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelCallRecorded {
    #[serde(rename = "model_call")]
    pub record: ModelCallRecord,
    pub call: CallRecord,
}

/// Written form: tag first (the hashed JSON).
#[derive(Serialize)]
struct Tagged<'a> {
    #[serde(rename = "type")]
    tag: &'static str,
    model_call: &'a ModelCallRecord,
    call: &'a CallRecord,
}

impl Serialize for ModelCallEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Tagged {
            tag: MODEL_CALL_RECORDED,
            model_call: &self.0.record,
            call: &self.0.call,
        }
        .serialize(s)
    }
}

/// [`ModelCallRecorded`] as a family payload.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ModelCallEvent(pub ModelCallRecorded);

impl From<ModelCallRecorded> for crate::event::Payload {
    fn from(event: ModelCallRecorded) -> Self {
        crate::event::Payload::Family(FamilyPayload::new(ModelCallEvent(event)))
    }
}

impl FamilyEvent for ModelCallEvent {
    fn codec(&self) -> &'static dyn PayloadCodec {
        &MODEL_CALL_CODEC
    }

    fn type_name(&self) -> &'static str {
        MODEL_CALL_RECORDED
    }

    fn text(&self) -> Option<&str> {
        self.0.record.response.as_ref().map(|r| r.content.as_str())
    }

    // No `search_extra`: the request is the server's own prompt (a family's template
    // around text the session already holds, searchable where it was said), and our
    // templates' words would fill every search for an ordinary word.

    fn call(&self) -> Option<&CallRecord> {
        Some(&self.0.call)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        // Model calls are few and mostly text: their JSON is their row.
        json_encode(self, out);
    }

    fn summarize(&self, summary: &mut SessionSummary, _new_branch: bool) {
        let totals = summary.part_mut::<ModelCallTotals>();
        totals.model_calls += 1;
        if let Some(usage) = &self.0.record.usage {
            totals.prompt_tokens += usage.prompt_tokens;
            totals.completion_tokens += usage.completion_tokens;
        }
        if let Some(cost) = self.0.record.cost {
            totals.cost = Some(totals.cost.unwrap_or(0.0) + cost);
        }
    }
}

impl FoldTree for ModelCallEvent {
    fn fold_tree(self, seq: u64, at: u64, tree: &mut ThoughtTree) {
        tree.family_or_default::<ModelCalls>()
            .0
            .push(ModelCallView {
                seq,
                at,
                tool: self.0.call.tool.clone(),
                record: self.0.record,
            });
    }
}

/// The model calls' piece of a session's Markdown (any family's sessions).
pub(crate) struct ModelCallsRender;

/// The one instance, registered among the renderers no family owns.
pub(crate) static MODEL_CALLS_RENDER: ModelCallsRender = ModelCallsRender;

impl FamilyRender for ModelCallsRender {
    /// Its model calls: totals, then one line per call (empty when it has none).
    fn markdown_sections(&self, tree: &ThoughtTree, out: &mut String) {
        let calls = ModelCalls::of(tree);
        if !calls.is_empty() {
            out.push_str("## Model calls\n\n");
            if let Some(summary) = &tree.summary {
                let totals = summary
                    .part::<ModelCallTotals>()
                    .cloned()
                    .unwrap_or_default();
                let summary = &totals;
                let _ = write!(
                    out,
                    "{} call{} · {} prompt + {} completion tokens",
                    summary.model_calls,
                    if summary.model_calls == 1 { "" } else { "s" },
                    summary.prompt_tokens,
                    summary.completion_tokens
                );
                if let Some(cost) = summary.cost {
                    let _ = write!(out, " · cost {cost:.6}");
                }
                out.push_str("\n\n");
            }
            for call in calls {
                let r = &call.record;
                let outcome = match &r.error {
                    None => "ok".to_string(),
                    Some(e) => format!(
                        "{} / {}",
                        serde_json::to_value(e.error_type())
                            .expect("enum")
                            .as_str()
                            .unwrap_or(""),
                        serde_json::to_value(e.action())
                            .expect("enum")
                            .as_str()
                            .unwrap_or("")
                    ),
                };
                let _ = write!(
                    out,
                    "- seq {} · {} · {} {} · {} · {} attempt{} · {} ms",
                    call.seq,
                    escape_inline(&call.tool),
                    escape_inline(&r.provider),
                    escape_inline(&r.model),
                    outcome,
                    r.attempts.len(),
                    if r.attempts.len() == 1 { "" } else { "s" },
                    r.latency_ms
                );
                if let Some(u) = &r.usage {
                    let _ = write!(
                        out,
                        " · {} + {} tokens",
                        u.prompt_tokens, u.completion_tokens
                    );
                }
                if let Some(cost) = r.cost {
                    let _ = write!(out, " · cost {cost:.6}");
                }
                out.push('\n');
            }
            out.push('\n');
        }
    }
}

/// The codec of `model_call_recorded` (not a toolset's: any family records it): its JSON
/// is its row.
pub(crate) static MODEL_CALL_CODEC: JsonCodec = JsonCodec {
    family: PROVIDER,
    types: &[MODEL_CALL_RECORDED],
    schema: MODEL_CALL_SCHEMA,
    owner: "the provider codec",
    row: "model call",
    read: read_model_call,
    summary: Some(SummaryFields {
        keys: SUMMARY_KEYS,
        read: read_part::<ModelCallTotals>,
    }),
};

fn read_model_call(json: &str) -> Result<FamilyPayload, serde_json::Error> {
    #[derive(Deserialize)]
    struct Wire {
        #[serde(rename = "type")]
        _tag: String,
        model_call: ModelCallRecord,
        call: CallRecord,
    }
    let wire: Wire = serde_json::from_str(json)?;
    Ok(FamilyPayload::new(ModelCallEvent(ModelCallRecorded {
        record: wire.model_call,
        call: wire.call,
    })))
}
