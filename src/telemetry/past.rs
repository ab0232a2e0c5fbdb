//! A recorded session sent as a trace (`export ID --format otlp`, `export --all --format
//! otlp`): one trace per session, its ids derived from the session and event ids, so
//! sending it again gives the same trace and the same spans.
//!
//! The trace: a root span `session {kind}` from the first event to the last; under it one
//! `tools/call {tool}` span per call (the events one call committed together: same commit
//! time, same call record), from the call's arrival (its recorded duration before the
//! commit) to its commit, holding a span event per event; under a call, a `chat {model}`
//! CLIENT span per model call it recorded.

use super::events::{self, CONVERSATION};
use super::{MAX_EXPORT_BATCH, Settings, TelemetryError};
use crate::event::{CallRecord, Event, Payload};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
use std::time::{Duration, SystemTime};

/// The call record an event carries, if its family records one.
fn call_of(event: &Event) -> Option<&CallRecord> {
    match &event.payload {
        Payload::Family(family) => family.event().call(),
        _ => None,
    }
}

fn context(trace: TraceId, span: SpanId) -> SpanContext {
    SpanContext::new(
        trace,
        span,
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    )
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("reasoning-ledger")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

/// A span with everything a past session's spans share.
struct Draft {
    trace: TraceId,
    id: SpanId,
    parent: SpanId,
    kind: SpanKind,
    name: String,
    start: SystemTime,
    end: SystemTime,
    attributes: Vec<KeyValue>,
    events: Vec<opentelemetry::trace::Event>,
    error: Option<String>,
}

impl Draft {
    fn build(self) -> SpanData {
        let mut span_events = SpanEvents::default();
        span_events.events = self.events;
        let mut attributes = self.attributes;
        let status = match self.error {
            Some(error) => {
                attributes.push(KeyValue::new("error.type", error.clone()));
                Status::error(error)
            }
            None => Status::Unset,
        };
        SpanData {
            span_context: context(self.trace, self.id),
            parent_span_id: self.parent,
            parent_span_is_remote: false,
            span_kind: self.kind,
            name: self.name.into(),
            start_time: self.start,
            end_time: self.end,
            attributes,
            dropped_attributes_count: 0,
            events: span_events,
            links: SpanLinks::default(),
            status,
            instrumentation_scope: scope(),
        }
    }
}

/// The spans of one session's `events` (in seq order, as read).
pub(crate) fn session_spans(events: &[Event], capture_content: bool) -> Vec<SpanData> {
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Vec::new();
    };
    let session = first.session;
    let trace = events::trace_id_of(session);
    let root = events::span_id_of("session", &session.to_string());
    let kind = match &first.payload {
        Payload::SessionStarted { kind, .. } => kind.as_str().to_string(),
        _ => "session".to_string(),
    };
    let mut root_attributes = vec![
        KeyValue::new(CONVERSATION, session.to_string()),
        KeyValue::new("reasoning_ledger.session.kind", kind.clone()),
        KeyValue::new("reasoning_ledger.session.events", events.len() as i64),
    ];
    if capture_content && let Payload::SessionStarted { title, .. } = &first.payload {
        root_attributes.push(KeyValue::new(
            "reasoning_ledger.session.title",
            title.clone(),
        ));
    }
    let mut spans = Vec::new();
    let mut start_of_all = events::time_of(first.at);
    let mut index = 0;
    while index < events.len() {
        // One call: the events committed together with the same call record (or none).
        let head = &events[index];
        let call = events[index..].iter().find_map(call_of);
        let mut end = index + 1;
        while end < events.len()
            && events[end].at == head.at
            && events[end].actor == head.actor
            && call_of(&events[end]).is_none_or(|c| Some(c) == call)
        {
            end += 1;
        }
        let group = &events[index..end];
        let call = group.iter().find_map(call_of);
        let id = events::event_span_id("call", &head.id);
        let committed = events::time_of(head.at);
        let started = call
            .and_then(|c| committed.checked_sub(Duration::from_micros(c.duration_us)))
            .unwrap_or(committed);
        start_of_all = start_of_all.min(started);
        let mut attributes = vec![KeyValue::new(CONVERSATION, session.to_string())];
        let name = match call {
            Some(call) => {
                attributes.extend([
                    KeyValue::new("mcp.method.name", "tools/call"),
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("gen_ai.tool.name", call.tool.clone()),
                ]);
                format!("tools/call {}", call.tool)
            }
            None => head.payload.type_name().to_string(),
        };
        if let Some(actor) = &head.actor {
            attributes.push(KeyValue::new(events::ACTOR, actor.clone()));
        }
        let span_events = group
            .iter()
            .map(|event| {
                opentelemetry::trace::Event::new(
                    event.payload.type_name(),
                    events::time_of(event.at),
                    events::attributes(event, capture_content),
                    0,
                )
            })
            .collect();
        for event in group {
            if let Some(step) = events::step_span(event) {
                spans.push(
                    Draft {
                        trace,
                        id: events::event_span_id("step", &event.id),
                        parent: id,
                        kind: SpanKind::Internal,
                        name: step.name,
                        start: step.at,
                        end: step.at,
                        attributes: step.attributes,
                        events: Vec::new(),
                        error: None,
                    }
                    .build(),
                );
            }
            if let Some(chat) = events::chat_span(event, capture_content) {
                spans.push(
                    Draft {
                        trace,
                        id: events::event_span_id("chat", &event.id),
                        parent: id,
                        kind: SpanKind::Client,
                        name: chat.name,
                        start: chat.start.max(started),
                        end: chat.end,
                        attributes: chat.attributes,
                        events: Vec::new(),
                        error: chat.error,
                    }
                    .build(),
                );
            }
        }
        spans.push(
            Draft {
                trace,
                id,
                parent: root,
                kind: if call.is_some() {
                    SpanKind::Server
                } else {
                    SpanKind::Internal
                },
                name,
                start: started,
                end: committed,
                attributes,
                events: span_events,
                error: None,
            }
            .build(),
        );
        index = end;
    }
    spans.push(
        Draft {
            trace,
            id: root,
            parent: SpanId::INVALID,
            kind: SpanKind::Internal,
            name: format!("session {kind}"),
            start: start_of_all,
            end: events::time_of(last.at),
            attributes: root_attributes,
            events: Vec::new(),
            error: None,
        }
        .build(),
    );
    spans
}

/// Sends `spans` to the collector the environment names, in batches of
/// [`MAX_EXPORT_BATCH`]; the number sent.
pub(crate) fn send(spans: Vec<SpanData>) -> Result<usize, TelemetryError> {
    let settings = Settings::from_env()?;
    let mut exporter = settings.exporter()?;
    exporter.set_resource(&settings.resource());
    let mut sent = 0;
    let mut spans = spans;
    while !spans.is_empty() {
        let rest = spans.split_off(spans.len().min(MAX_EXPORT_BATCH));
        let batch = std::mem::replace(&mut spans, rest);
        let count = batch.len();
        super::block_on(exporter.export(batch))
            .map_err(|e| TelemetryError::Export(e.to_string()))?;
        sent += count;
    }
    let _ = exporter.shutdown();
    Ok(sent)
}

/// The content setting `export --format otlp` uses ([`super::CAPTURE_CONTENT_ENV`]).
pub(crate) fn capture_content() -> bool {
    super::is_true(super::CAPTURE_CONTENT_ENV)
}
