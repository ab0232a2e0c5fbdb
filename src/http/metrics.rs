//! `/metrics` of `serve --http`: Prometheus (OpenMetrics) text from `prometheus-client`,
//! and the one line per tool call of `--log-format json`.
//!
//! Owns: the process's [`Metrics`] (created by `serve --http` only: a stdio server never
//! builds them, and every hook is one `OnceLock` read that finds nothing), the hooks tool
//! routing ([`call_finished`]) and the store's writer (its commit observer) call, and the
//! rendering. Metrics: tool calls by tool and outcome, tool-call latency, group-commit
//! latency, open connections, store reconnects, live MCP sessions, refused sessions and
//! connections, trace spans dropped and exported. Must not: take a label from anything a
//! client chose (a tool name is a listed tool's or `unknown`), or block a call.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The `tracing` target of the one line logged per tool call (at `info`; `--log-format
/// json` lets it through by default). Not under the crate's name: MCP clients that set a
/// log level are not sent it.
pub(crate) const CALL_LOG_TARGET: &str = "calls";

/// Content type of the `/metrics` answer.
pub(crate) const METRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Latency buckets, in seconds: 0.5 ms doubling to about 16 s.
fn latency_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScopeLabel {
    scope: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

/// The metrics of one `serve --http` process.
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_seconds: Family<ToolLabel, Histogram, fn() -> Histogram>,
    commit_seconds: Histogram,
    open_connections: Gauge,
    store_reconnects: Counter,
    live_sessions: Gauge,
    sessions_refused: Family<ScopeLabel, Counter>,
    connections_refused: Counter,
    connections_evicted: Counter,
    /// Spans the trace exporter dropped ([`crate::telemetry::dropped_spans`]), and sent.
    spans_dropped: Counter,
    spans_sent: Counter,
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

/// Creates the process's metrics (once) and has the store's writer report its commits.
pub(super) fn install() -> &'static Metrics {
    let metrics = METRICS.get_or_init(|| {
        let mut registry = Registry::with_prefix("reasoning_ledger");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls answered, by tool and outcome (ok, tool_error, error, input_required)",
            calls.clone(),
        );
        let call_seconds = Family::<ToolLabel, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_buckets,
        );
        registry.register(
            "tool_call_seconds",
            "Tool-call latency, from the call's arrival to its answer",
            call_seconds.clone(),
        );
        let commit_seconds = latency_buckets();
        registry.register(
            "commit_seconds",
            "Group-commit latency: one write transaction appending every queued call's events",
            commit_seconds.clone(),
        );
        let open_connections = Gauge::default();
        registry.register(
            "open_connections",
            "HTTP connections held open",
            open_connections.clone(),
        );
        let store_reconnects = Counter::default();
        registry.register(
            "store_reconnects",
            "Dead store connections replaced by new ones (PostgreSQL)",
            store_reconnects.clone(),
        );
        let live_sessions = Gauge::default();
        registry.register(
            "live_sessions",
            "MCP sessions held (created by initialize, not yet closed or expired)",
            live_sessions.clone(),
        );
        let sessions_refused = Family::<ScopeLabel, Counter>::default();
        registry.register(
            "sessions_refused",
            "initialize requests refused at a session cap, by scope (overall: --max-sessions, \
             actor: --max-sessions-per-actor)",
            sessions_refused.clone(),
        );
        let connections_refused = Counter::default();
        registry.register(
            "connections_refused",
            "Connections closed at once: their peer address held --max-connections-per-peer, \
             each with a valid token",
            connections_refused.clone(),
        );
        let connections_evicted = Counter::default();
        registry.register(
            "connections_evicted",
            "Connections that had shown no valid token, closed to make room for a new one (a \
             full --max-connections, or their address's --max-connections-per-peer)",
            connections_evicted.clone(),
        );
        let spans_dropped = Counter::default();
        registry.register(
            "trace_spans_dropped",
            "Trace spans dropped (the export queue full, or the collector failed or timed \
             out); 0 without OTEL_EXPORTER_OTLP_ENDPOINT",
            spans_dropped.clone(),
        );
        let spans_sent = Counter::default();
        registry.register(
            "trace_spans_exported",
            "Trace spans the collector accepted",
            spans_sent.clone(),
        );
        Metrics {
            spans_dropped,
            spans_sent,
            registry,
            live_sessions,
            sessions_refused,
            connections_refused,
            connections_evicted,
            calls,
            call_seconds,
            commit_seconds,
            open_connections,
            store_reconnects,
        }
    });
    let _ = crate::store::writer::COMMIT_OBSERVER.set(observe_commit);
    metrics
}

fn observe_commit(took: Duration) {
    if let Some(metrics) = METRICS.get() {
        metrics.commit_seconds.observe(took.as_secs_f64());
    }
}

/// The live MCP sessions are now `live`.
pub(crate) fn sessions_live(live: usize) {
    if let Some(metrics) = METRICS.get() {
        metrics
            .live_sessions
            .set(i64::try_from(live).unwrap_or(i64::MAX));
    }
}

/// An `initialize` was refused at a session cap (`scope`: the cap's label, `overall` or
/// `actor`).
pub(crate) fn session_refused(scope: &'static str) {
    if let Some(metrics) = METRICS.get() {
        metrics
            .sessions_refused
            .get_or_create(&ScopeLabel { scope })
            .inc();
    }
}

/// A connection was closed at once: its peer held its share of connections.
pub(crate) fn connection_refused() {
    if let Some(metrics) = METRICS.get() {
        metrics.connections_refused.inc();
    }
}

/// A connection without a valid token was closed to make room for a new one.
pub(crate) fn connection_evicted() {
    if let Some(metrics) = METRICS.get() {
        metrics.connections_evicted.inc();
    }
}

/// What became of a tool call, as a label.
pub(crate) fn outcome_label(
    answer: &Result<rmcp::model::CallToolResponse, rmcp::ErrorData>,
) -> &'static str {
    use rmcp::model::CallToolResponse;
    match answer {
        Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => "tool_error",
        Ok(CallToolResponse::Complete(_)) => "ok",
        Ok(CallToolResponse::InputRequired(_)) => "input_required",
        Ok(_) => "task",
        Err(_) => "error",
    }
}

/// A tool call was answered: counted (when metrics exist) and logged at `info` under
/// [`CALL_LOG_TARGET`]. `tool` is a listed tool's name or `unknown`.
pub(crate) fn call_finished(request_id: &str, tool: &str, outcome: &'static str, took: Duration) {
    tracing::info!(
        target: CALL_LOG_TARGET,
        request_id,
        tool,
        outcome,
        duration_ms = took.as_secs_f64() * 1000.0,
        "tool call"
    );
    if let Some(metrics) = METRICS.get() {
        metrics
            .calls
            .get_or_create(&CallLabels {
                tool: tool.to_string(),
                outcome,
            })
            .inc();
        metrics
            .call_seconds
            .get_or_create(&ToolLabel {
                tool: tool.to_string(),
            })
            .observe(took.as_secs_f64());
    }
}

impl Metrics {
    /// The text answer of `/metrics`, with `open_connections` as of now.
    pub(super) fn render(&self, open_connections: usize) -> String {
        self.open_connections
            .set(i64::try_from(open_connections).unwrap_or(i64::MAX));
        let reconnects = crate::store::health::STORE_RECONNECTS.load(Ordering::Relaxed);
        let counted = self.store_reconnects.get();
        if reconnects > counted {
            self.store_reconnects.inc_by(reconnects - counted);
        }
        for (counter, now) in [
            (&self.spans_dropped, crate::telemetry::dropped_spans()),
            (&self.spans_sent, crate::telemetry::sent_spans()),
        ] {
            let counted = counter.get();
            if now > counted {
                counter.inc_by(now - counted);
            }
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_commits_show_in_the_text() {
        let metrics = install();
        call_finished("r1", "sequentialthinking", "ok", Duration::from_millis(3));
        observe_commit(Duration::from_millis(1));
        let text = metrics.render(7);
        assert!(
            text.contains(
                "reasoning_ledger_tool_calls_total{tool=\"sequentialthinking\",outcome=\"ok\"}"
            ),
            "{text}"
        );
        assert!(
            text.contains("reasoning_ledger_open_connections 7"),
            "{text}"
        );
        assert!(
            text.contains("reasoning_ledger_commit_seconds_count"),
            "{text}"
        );
        assert!(
            text.contains("reasoning_ledger_store_reconnects_total"),
            "{text}"
        );
        sessions_live(3);
        session_refused(super::super::sessions::Scope::Actor.label());
        let text = metrics.render(7);
        assert!(text.contains("reasoning_ledger_live_sessions 3"), "{text}");
        assert!(
            text.contains("reasoning_ledger_sessions_refused_total{scope=\"actor\"} 1"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
