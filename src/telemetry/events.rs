//! How a recorded event appears in a trace: a span event carrying its seq, kind, id and
//! hash (and its text, only on opt-in), a step of the reasoning its family names as an
//! INTERNAL span, and a model call's record as a `chat {model}` CLIENT span; the ids a past session's trace derives from its session and event ids.

use crate::event::{Event, EventId, SessionId};
use crate::provider::record::ModelCallEvent;
use opentelemetry::KeyValue;
use opentelemetry::trace::{SpanId, TraceId};
use std::time::{Duration, SystemTime};

/// The span event's attribute names.
pub(crate) const SEQ: &str = "reasoning_ledger.event.seq";
pub(crate) const KIND: &str = "reasoning_ledger.event.kind";
pub(crate) const ID: &str = "reasoning_ledger.event.id";
pub(crate) const HASH: &str = "reasoning_ledger.event.hash";
pub(crate) const TEXT: &str = "reasoning_ledger.event.text";
/// The session a call recorded into (a trace's "conversation").
pub(crate) const CONVERSATION: &str = "gen_ai.conversation.id";
/// Who sent the call: a token's name or `oauth:<sub>`.
pub(crate) const ACTOR: &str = "enduser.id";

/// The time of a ledger timestamp (ms since the epoch).
pub(crate) fn time_of(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

/// The attributes of `event`'s span event.
pub(crate) fn attributes(event: &Event, capture_content: bool) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new(SEQ, event.seq as i64),
        KeyValue::new(KIND, event.payload.type_name()),
        KeyValue::new(ID, event.id.to_string()),
        KeyValue::new(HASH, event.hash.clone()),
    ];
    if capture_content && let Some(text) = event.payload.text() {
        attributes.push(KeyValue::new(TEXT, text.to_string()));
    }
    attributes
}

/// A step of the reasoning (a plan's phase, a booster's round: what its family says,
/// [`crate::event::family::FamilyEvent::trace_step`]) as an INTERNAL span at its commit
/// time.
pub(crate) struct StepSpan {
    pub name: String,
    pub at: SystemTime,
    pub attributes: Vec<KeyValue>,
}

/// The step of the reasoning `event` is, as a span (none for most events).
pub(crate) fn step_span(event: &Event) -> Option<StepSpan> {
    use crate::event::family::TraceValue;
    let crate::event::Payload::Family(family) = &event.payload else {
        return None;
    };
    let step = family.event().trace_step()?;
    let mut attributes = vec![
        KeyValue::new(SEQ, event.seq as i64),
        KeyValue::new(ID, event.id.to_string()),
        KeyValue::new(CONVERSATION, event.session.to_string()),
    ];
    if let Some(operation) = step.operation {
        attributes.push(KeyValue::new("gen_ai.operation.name", operation));
    }
    attributes.extend(step.attributes.into_iter().map(|(key, value)| match value {
        TraceValue::Int(n) => KeyValue::new(key, n),
        TraceValue::Float(x) => KeyValue::new(key, x),
        TraceValue::Text(text) => KeyValue::new(key, text),
    }));
    Some(StepSpan {
        name: step.name,
        at: time_of(event.at),
        attributes,
    })
}

/// A model call as a span: `chat {model}`, CLIENT, from its first attempt to its answer.
pub(crate) struct ChatSpan {
    pub name: String,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<KeyValue>,
    /// The error's type, when it failed.
    pub error: Option<String>,
}

/// The model call `event` records, as a span (none for any other event).
pub(crate) fn chat_span(event: &Event, capture_content: bool) -> Option<ChatSpan> {
    let call = &event.payload.family::<ModelCallEvent>()?.0;
    let record = &call.record;
    let end = time_of(event.at);
    let start = end
        .checked_sub(Duration::from_millis(record.latency_ms))
        .unwrap_or(end);
    let model = if record.model.is_empty() {
        "unknown"
    } else {
        &record.model
    };
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.provider.name", record.provider.clone()),
        KeyValue::new("gen_ai.request.model", model.to_string()),
        KeyValue::new(
            "reasoning_ledger.model_call.transport",
            record.transport.clone(),
        ),
        KeyValue::new(
            "reasoning_ledger.model_call.attempts",
            record.attempts.len() as i64,
        ),
        KeyValue::new(SEQ, event.seq as i64),
        KeyValue::new(ID, event.id.to_string()),
        KeyValue::new(CONVERSATION, event.session.to_string()),
    ];
    if let Some(usage) = &record.usage {
        attributes.push(KeyValue::new(
            "gen_ai.usage.input_tokens",
            usage.prompt_tokens as i64,
        ));
        attributes.push(KeyValue::new(
            "gen_ai.usage.output_tokens",
            usage.completion_tokens as i64,
        ));
    }
    if let Some(response) = &record.response
        && capture_content
    {
        attributes.push(KeyValue::new(
            "gen_ai.output.messages",
            serde_json::to_string(response).unwrap_or_default(),
        ));
    }
    if capture_content {
        attributes.push(KeyValue::new(
            "gen_ai.input.messages",
            serde_json::to_string(&record.request).unwrap_or_default(),
        ));
    }
    let error = record
        .failure()
        .map(|(error_type, _)| format!("{error_type:?}"));
    Some(ChatSpan {
        name: format!("chat {model}"),
        start,
        end,
        attributes,
        error,
    })
}

/// A past session's trace id: derived from the session id alone, so sending it twice
/// gives the same trace.
pub(crate) fn trace_id_of(session: SessionId) -> TraceId {
    let hash = blake3::hash(format!("reasoning-ledger trace {session}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&hash.as_bytes()[..16]);
    TraceId::from_bytes(bytes)
}

/// The span id `what` of a past session derives from `id` (an event's id, or the session's
/// own for its root span).
pub(crate) fn span_id_of(what: &str, id: &str) -> SpanId {
    let hash = blake3::hash(format!("reasoning-ledger span {what} {id}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash.as_bytes()[..8]);
    // An all-zero id is invalid; a hash giving one is astronomically unlikely, but cheap
    // to rule out.
    if bytes == [0; 8] {
        bytes[7] = 1;
    }
    SpanId::from_bytes(bytes)
}

/// The span id of the span an event begins (its call's, or its model call's).
pub(crate) fn event_span_id(what: &str, id: &EventId) -> SpanId {
    span_id_of(what, &id.to_string())
}
