//! The span of one MCP request (the MCP semantic conventions' server span): made only when
//! [`super::enabled`], parented by the `traceparent`/`tracestate` the client put in
//! `params._meta` (SEP-414), given a span event per event the call committed and a
//! `chat {model}` child per model call it recorded, ended with the answer.

use super::events;
use crate::event::Event;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status, TraceContextExt, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use serde_json::{Map, Value};
use std::sync::Mutex;

/// What a request's span is started with.
pub(crate) struct Start<'a> {
    /// `tools/call`, `prompts/get`, …
    pub method: &'a str,
    /// The tool (or prompt) named, when there is one.
    pub target: Option<&'a str>,
    pub request_id: Option<String>,
    pub protocol_version: Option<String>,
    /// `pipe` (stdio) or `tcp` (HTTP).
    pub transport: &'static str,
    /// The request's `params._meta`, where a `traceparent` may be.
    pub meta: Option<&'a Map<String, Value>>,
    /// A token's name or `oauth:<sub>`.
    pub actor: Option<&'a str>,
    /// The HTTP transport's `Mcp-Session-Id`.
    pub mcp_session: Option<&'a str>,
}

/// The span of one request, shared with the write path that reports its events.
pub(crate) struct CallTrace {
    span: Mutex<Option<opentelemetry_sdk::trace::Span>>,
    context: SpanContext,
    capture_content: bool,
}

impl std::fmt::Debug for CallTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallTrace")
            .field("context", &self.context)
            .finish()
    }
}

/// `params._meta`'s string values, as the W3C propagator reads headers.
struct Meta<'a>(&'a Map<String, Value>);

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

impl CallTrace {
    /// The span of a request, when telemetry is on (`None`, and nothing built, when not).
    pub(crate) fn start(start: Start<'_>) -> Option<std::sync::Arc<CallTrace>> {
        let exporting = super::exporting()?;
        let parent = match start.meta {
            Some(meta) => TraceContextPropagator::new().extract(&Meta(meta)),
            None => Context::new(),
        };
        let name = match start.target {
            Some(target) => format!("{} {target}", start.method),
            None => start.method.to_string(),
        };
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", start.method.to_string()),
            KeyValue::new("network.transport", start.transport),
        ];
        if start.method == "tools/call" {
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
            if let Some(tool) = start.target {
                attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_string()));
            }
        } else if start.method == "prompts/get"
            && let Some(prompt) = start.target
        {
            attributes.push(KeyValue::new("gen_ai.prompt.name", prompt.to_string()));
        }
        if let Some(id) = start.request_id {
            attributes.push(KeyValue::new("jsonrpc.request.id", id));
        }
        if let Some(version) = start.protocol_version {
            attributes.push(KeyValue::new("mcp.protocol.version", version));
        }
        if let Some(actor) = start.actor {
            attributes.push(KeyValue::new(events::ACTOR, actor.to_string()));
        }
        if let Some(session) = start.mcp_session {
            attributes.push(KeyValue::new("mcp.session.id", session.to_string()));
        }
        let span = exporting
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(&exporting.tracer, &parent);
        let context = span.span_context().clone();
        Some(std::sync::Arc::new(CallTrace {
            span: Mutex::new(Some(span)),
            context,
            capture_content: exporting.capture_content,
        }))
    }

    fn with_span(&self, work: impl FnOnce(&mut opentelemetry_sdk::trace::Span)) {
        let mut span = self.span.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(span) = span.as_mut() {
            work(span);
        }
    }

    /// The events the call committed: a span event each (at its commit time), the
    /// session as `gen_ai.conversation.id`, a `chat {model}` child per model call, an
    /// INTERNAL child per step of the reasoning (a plan's phase, a booster's round).
    pub(crate) fn recorded(&self, committed: &[Event]) {
        let Some(exporting) = super::exporting() else {
            return;
        };
        if !self.context.is_sampled() {
            return;
        }
        let capture = self.capture_content;
        self.with_span(|span| {
            if let Some(first) = committed.first() {
                span.set_attribute(KeyValue::new(
                    events::CONVERSATION,
                    first.session.to_string(),
                ));
            }
            for event in committed {
                span.add_event_with_timestamp(
                    event.payload.type_name(),
                    events::time_of(event.at),
                    events::attributes(event, capture),
                );
            }
        });
        let parent = Context::new().with_remote_span_context(self.context.clone());
        for chat in committed
            .iter()
            .filter_map(|event| events::chat_span(event, capture))
        {
            let mut span = exporting
                .tracer
                .span_builder(chat.name)
                .with_kind(SpanKind::Client)
                .with_start_time(chat.start)
                .with_attributes(chat.attributes)
                .start_with_context(&exporting.tracer, &parent);
            if let Some(error) = chat.error {
                span.set_attribute(KeyValue::new("error.type", error.clone()));
                span.set_status(Status::error(error));
            }
            span.end_with_timestamp(chat.end);
        }
        for step in committed.iter().filter_map(events::step_span) {
            exporting
                .tracer
                .span_builder(step.name)
                .with_kind(SpanKind::Internal)
                .with_start_time(step.at)
                .with_attributes(step.attributes)
                .start_with_context(&exporting.tracer, &parent)
                .end_with_timestamp(step.at);
        }
    }

    /// Ends the span with the request's outcome: `error.type` is `tool_error` for a result
    /// flagged as an error, the JSON-RPC code for an error answer.
    pub(crate) fn finish(&self, error: Option<String>) {
        let mut span = self.span.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(mut span) = span.take() {
            if let Some(error) = error {
                span.set_attribute(KeyValue::new("error.type", error.clone()));
                span.set_status(Status::error(error));
            }
            span.end();
        }
    }
}

impl Drop for CallTrace {
    fn drop(&mut self) {
        // A request dropped before its answer (cancelled, its connection gone) still ends.
        if let Some(mut span) = self.span.get_mut().ok().and_then(Option::take) {
            span.set_attribute(KeyValue::new("error.type", "cancelled"));
            span.end();
        }
    }
}

/// The `error.type` of a tool call's answer: `tool_error` for a result flagged as an
/// error, the JSON-RPC error code for an error answer, none for a success.
pub(crate) fn error_type(
    answer: &Result<rmcp::model::CallToolResponse, rmcp::ErrorData>,
) -> Option<String> {
    match answer {
        Ok(rmcp::model::CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
            Some("tool_error".to_string())
        }
        Ok(_) => None,
        Err(error) => Some(error.code.0.to_string()),
    }
}
