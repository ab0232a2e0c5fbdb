//! Logs to MCP clients: `logging/setLevel` (the `initialize` generation) and the
//! per-request `io.modelcontextprotocol/logLevel` of 2026-07-28, as `notifications/message`.
//!
//! Owns: [`client_layer`], the `tracing` layer (with its own filter) that forwards this
//! crate's log events (store reconnects, provider retries, index rebuilds, slow calls: what
//! goes to stderr) to every client that asked for that level; [`LogSink`], one client's
//! level and queue, drained by a task that sends the notifications; scopes
//! ([`in_scope`]): an event raised while a connection's (or a 2026-07-28 request's) call
//! runs goes to that client only, an event outside any call (the store, the listener) to
//! every client; [`to_clients`] for records that must never reach stderr (a call's
//! arguments at `debug`).
//!
//! Must not: slow anything down when no client set a level (the filter then says "never"
//! to every call site, as if the layer were absent), block the thread that logs (queues
//! are bounded and full ones drop), send a thought's text to a client below `debug`
//! ([`THOUGHT_FIELDS`]), send anything key-like ([`crate::provider::redact`] runs over
//! every string), or forward other crates' events (rmcp logs its own sends: forwarding
//! them would loop).

#![allow(deprecated)] // rmcp marks logging deprecated (SEP-2577); the protocol has it.

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value, json};
use std::future::Future;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, Filter};

/// Notifications queued for one client; when its queue is full (a client that does not
/// read), further records for it are dropped rather than held.
pub(crate) const LOG_QUEUE_LEN: usize = 256;

/// Characters kept of one forwarded string field.
pub(crate) const MAX_FIELD_CHARS: usize = 2_000;

/// Field names that carry thought text (or a call's arguments): forwarded only to a
/// client whose level is `debug`.
pub(crate) const THOUGHT_FIELDS: &[&str] = &["thought", "text", "arguments"];

/// Events forwarded: this crate's own (targets under this prefix).
const FORWARDED_TARGET: &str = "reasoning_ledger";

/// A sink's rank when it wants nothing.
const OFF: u8 = u8::MAX;

/// The rank of an MCP level: debug 0 … emergency 7 (a sink receives records of its rank
/// or higher).
pub(crate) fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The MCP level of a `tracing` level (trace is not forwarded: see [`level_filter`]).
fn mcp_level(level: &Level) -> LoggingLevel {
    match *level {
        Level::ERROR => LoggingLevel::Error,
        Level::WARN => LoggingLevel::Warning,
        Level::INFO => LoggingLevel::Info,
        _ => LoggingLevel::Debug,
    }
}

/// The `tracing` filter that lets through what a sink of `rank` wants.
fn level_filter(rank: u8) -> LevelFilter {
    match rank {
        0 => LevelFilter::DEBUG,
        1 | 2 => LevelFilter::INFO,
        3 => LevelFilter::WARN,
        OFF => LevelFilter::OFF,
        _ => LevelFilter::ERROR,
    }
}

/// Every live sink of the process, and the lowest rank any of them wants.
struct Hub {
    sinks: Mutex<Vec<Weak<SinkShared>>>,
    floor: AtomicU8,
}

static HUB: Hub = Hub {
    sinks: Mutex::new(Vec::new()),
    floor: AtomicU8::new(OFF),
};

/// Scope ids: one per connection, one per 2026-07-28 request that asked for logs.
static NEXT_SCOPE: AtomicU64 = AtomicU64::new(1);

tokio::task_local! {
    static SCOPE: u64;
}

impl Hub {
    fn level_filter(&self) -> LevelFilter {
        level_filter(self.floor.load(Ordering::Relaxed))
    }

    fn live(&self) -> Vec<Arc<SinkShared>> {
        self.sinks
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    fn add(&self, sink: &Arc<SinkShared>) {
        self.sinks
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push(Arc::downgrade(sink));
        self.recompute();
    }

    /// Drops dead sinks, recomputes the floor and, when it moved, tells `tracing` to ask
    /// the filter again about every call site.
    fn recompute(&self) {
        let floor = {
            let mut sinks = self
                .sinks
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            sinks.retain(|sink| sink.strong_count() > 0);
            sinks
                .iter()
                .filter_map(Weak::upgrade)
                .map(|sink| sink.rank.load(Ordering::Relaxed))
                .min()
                .unwrap_or(OFF)
        };
        let before = self.floor.swap(floor, Ordering::Relaxed);
        if level_filter(before) != level_filter(floor) {
            tracing::callsite::rebuild_interest_cache();
        }
    }
}

/// What the hub sees of a sink.
struct SinkShared {
    /// Events raised in this scope reach this sink; events outside any scope reach every
    /// sink.
    scope: u64,
    rank: AtomicU8,
    queue: mpsc::Sender<LoggingMessageNotificationParam>,
}

/// One client's log level and queue. Dropping it stops the records (and the task
/// sending them once the queue is drained).
pub(crate) struct LogSink {
    /// The hub holds a weak reference: dropping this one closes the queue.
    shared: Option<Arc<SinkShared>>,
    sender: Option<tokio::task::JoinHandle<()>>,
}

impl LogSink {
    /// A sink for `scope`, sending to `peer` (must run inside a tokio runtime).
    pub(crate) fn new(scope: u64, peer: Peer<RoleServer>, level: LoggingLevel) -> LogSink {
        let (queue, mut records) = mpsc::channel(LOG_QUEUE_LEN);
        let shared = Arc::new(SinkShared {
            scope,
            rank: AtomicU8::new(rank(level)),
            queue,
        });
        let sender = tokio::spawn(async move {
            while let Some(record) = records.recv().await {
                if peer.notify_logging_message(record).await.is_err() {
                    break;
                }
            }
        });
        HUB.add(&shared);
        LogSink {
            shared: Some(shared),
            sender: Some(sender),
        }
    }

    /// The scope whose events this sink receives.
    pub(crate) fn scope(&self) -> u64 {
        self.shared.as_ref().map_or(0, |shared| shared.scope)
    }

    /// Changes the level.
    pub(crate) fn set_level(&self, level: LoggingLevel) {
        if let Some(shared) = &self.shared {
            shared.rank.store(rank(level), Ordering::Relaxed);
        }
        HUB.recompute();
    }

    /// Stops taking records and waits until the queued ones are sent (a 2026-07-28
    /// request's records go out before its answer).
    pub(crate) async fn finish(mut self) {
        let sender = self.sender.take();
        drop(self);
        if let Some(sender) = sender {
            let _ = sender.await;
        }
    }
}

impl Drop for LogSink {
    fn drop(&mut self) {
        drop(self.shared.take());
        HUB.recompute();
    }
}

/// A new scope id (a connection, or a request that brings its own level).
pub(crate) fn new_scope() -> u64 {
    NEXT_SCOPE.fetch_add(1, Ordering::Relaxed)
}

/// The scope of the call running on this task, if any.
pub(crate) fn current_scope() -> Option<u64> {
    SCOPE.try_with(|scope| *scope).ok()
}

/// Runs `future` in `scope` (its log events go to that scope's client only). The future
/// returned holds `future` once (an `async fn` would hold it twice: as its argument and
/// inside the scope it awaits), which is a request's size for every call.
pub(crate) fn in_scope<F: Future>(
    scope: u64,
    future: F,
) -> tokio::task::futures::TaskLocalFuture<u64, F> {
    SCOPE.scope(scope, future)
}

/// Whether any client wants records at `level` (cheap: one atomic load).
pub(crate) fn wanted(level: LoggingLevel) -> bool {
    HUB.floor.load(Ordering::Relaxed) <= rank(level)
}

/// Sends a record straight to the clients of the current scope (or every client outside
/// one), never to stderr: for what only a client at that level may see.
pub(crate) fn to_clients(level: LoggingLevel, logger: &str, data: Map<String, Value>) {
    if !wanted(level) {
        return;
    }
    route(level, logger, &data, current_scope());
}

/// At `debug` only, and to clients only: a tool call's name and arguments (thought text).
pub(crate) fn tool_call(tool: &str, arguments: &Map<String, Value>) {
    if !wanted(LoggingLevel::Debug) {
        return;
    }
    let mut data = Map::new();
    data.insert("message".into(), json!("tool call"));
    data.insert("tool".into(), json!(tool));
    data.insert("arguments".into(), Value::Object(arguments.clone()));
    to_clients(LoggingLevel::Debug, "reasoning_ledger::server", data);
}

/// Queues the record for every sink that wants it: `data` as given to a sink at `debug`,
/// without [`THOUGHT_FIELDS`] to the others; strings clipped and redacted.
fn route(level: LoggingLevel, logger: &str, data: &Map<String, Value>, scope: Option<u64>) {
    let event_rank = rank(level);
    let mut full: Option<Value> = None;
    let mut plain: Option<Value> = None;
    for sink in HUB.live() {
        if sink.rank.load(Ordering::Relaxed) > event_rank
            || scope.is_some_and(|scope| scope != sink.scope)
        {
            continue;
        }
        let debug = sink.rank.load(Ordering::Relaxed) == 0;
        let chosen = if debug { &mut full } else { &mut plain };
        let value = chosen
            .get_or_insert_with(|| Value::Object(cleaned(data, debug)))
            .clone();
        let record = LoggingMessageNotificationParam::new(level, value).with_logger(logger);
        // A full queue drops the record: the logging thread never waits for a client.
        let _ = sink.queue.try_send(record);
    }
}

/// `data` with every string clipped and redacted, and (unless `debug`) without thought
/// fields.
fn cleaned(data: &Map<String, Value>, debug: bool) -> Map<String, Value> {
    data.iter()
        .filter(|(key, _)| debug || !THOUGHT_FIELDS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), clean_value(value)))
        .collect()
}

fn clean_value(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(clean_text(text)),
        Value::Array(items) => Value::Array(items.iter().map(clean_value).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), clean_value(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn clean_text(text: &str) -> String {
    let mut clipped: String = text.chars().take(MAX_FIELD_CHARS).collect();
    if clipped.len() < text.len() {
        clipped.push('…');
    }
    crate::provider::redact::redact(&clipped, &[])
}

/// Whether `metadata` is an event of this crate (the only ones forwarded).
fn forwarded(metadata: &Metadata<'_>) -> bool {
    metadata.is_event() && metadata.target().starts_with(FORWARDED_TARGET)
}

/// The layer forwarding log events to clients, with its filter: install it beside the
/// stderr layer (each with its own filter).
pub(crate) fn client_layer<S>() -> impl Layer<S>
where
    S: Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    ClientLayer.with_filter(ClientFilter)
}

/// Lets through this crate's events at the level the most verbose client wants; says
/// "never" to every call site while no client wants anything.
struct ClientFilter;

impl<S> Filter<S> for ClientFilter {
    fn enabled(&self, metadata: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        forwarded(metadata) && *metadata.level() <= HUB.level_filter()
    }

    fn callsite_enabled(&self, metadata: &'static Metadata<'static>) -> Interest {
        if forwarded(metadata) && *metadata.level() <= HUB.level_filter() {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(HUB.level_filter())
    }
}

struct ClientLayer;

thread_local! {
    /// Set while this thread forwards a record: an event raised meanwhile is not
    /// forwarded again.
    static FORWARDING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl<S: Subscriber> Layer<S> for ClientLayer {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if FORWARDING.with(|busy| busy.replace(true)) {
            return;
        }
        let metadata = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        route(
            mcp_level(metadata.level()),
            metadata.target(),
            &fields.0,
            current_scope(),
        );
        FORWARDING.with(|busy| busy.set(false));
    }
}

/// An event's fields as JSON (`message` for the message).
#[derive(Default)]
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), json!(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), json!(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), json!(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), json!(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_string(), json!(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_string(), json!(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().to_string(), json!(value.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thought_fields_reach_only_debug_and_keys_never() {
        let data = json!({
            "message": "model call failed: key sk-canary-0123456789abcdef",
            "thought": "a private thought",
            "tool": "sequentialthinking"
        });
        let data = data.as_object().unwrap();
        let plain = Value::Object(cleaned(data, false)).to_string();
        assert!(!plain.contains("private thought"), "{plain}");
        assert!(!plain.contains("sk-canary"), "{plain}");
        assert!(plain.contains("sequentialthinking"), "{plain}");
        let full = Value::Object(cleaned(data, true)).to_string();
        assert!(full.contains("private thought"), "{full}");
        assert!(!full.contains("sk-canary"), "{full}");
    }

    #[test]
    fn levels_rank_as_syslog_and_map_to_tracing_filters() {
        assert!(rank(LoggingLevel::Debug) < rank(LoggingLevel::Emergency));
        assert_eq!(level_filter(rank(LoggingLevel::Debug)), LevelFilter::DEBUG);
        assert_eq!(level_filter(rank(LoggingLevel::Notice)), LevelFilter::INFO);
        assert_eq!(level_filter(rank(LoggingLevel::Warning)), LevelFilter::WARN);
        assert_eq!(level_filter(rank(LoggingLevel::Alert)), LevelFilter::ERROR);
        assert_eq!(level_filter(OFF), LevelFilter::OFF);
        assert_eq!(rank(mcp_level(&Level::WARN)), rank(LoggingLevel::Warning));
    }

    #[test]
    fn long_fields_are_clipped() {
        let long = "x".repeat(MAX_FIELD_CHARS * 2);
        assert_eq!(clean_text(&long).chars().count(), MAX_FIELD_CHARS + 1);
    }
}
