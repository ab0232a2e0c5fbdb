//! The stdio transport: newline-delimited JSON-RPC with a bounded line reader that
//! answers what it refuses.
//!
//! Owns: reading lines from the client (at most a cap's worth of bytes buffered, the
//! rest of an over-long line skipped without keeping it), decoding them into rmcp
//! messages, and the JSON-RPC error answers for lines no handler ever sees: an over-long
//! line (-32600), a line that is not UTF-8 JSON (-32700), well-formed JSON that is not a
//! message (-32600), and a known method whose params do not decode (-32602, where rmcp
//! alone would answer -32601 naming the method). Each answer carries the request's id
//! when the start of the line gives it away, else `null`, and tells the client how to
//! fix the call. Also owns the single writer of stdout ([`stdout`]: every line written is
//! one JSON-RPC message), the reader of stdin ([`stdin`]), neither of which blocks the
//! runtime (each falls back on a thread of its own), and the plain tool calls it runs
//! itself instead of handing them to rmcp ([`direct`]).
//!
//! Must not: answer a notification or anything shaped like a response (two peers that
//! answer each other's garbage never stop), buffer more than the cap of any line, write
//! anything to stdout that is not a JSON-RPC message, or exit on bad input.

mod direct;
mod stdin;
mod stdout;
mod tool_call;

pub(crate) use direct::{DirectAnswer, DirectCalls};
pub(crate) use stdin::StdinReader;
use stdout::LineSink;

use crate::request::arrival::Arrival;
use rmcp::RoleServer;
use rmcp::model::{ClientNotification, ClientRequest, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Bytes kept from the start of an over-long line to recover its id from.
pub(crate) const ID_PROBE_BYTES: usize = 4096;

/// Read buffer size: big enough that skipping a huge line takes few reads.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// A line buffer grown past this is freed after its line, so one big call does not
/// keep its memory for the life of the process.
const KEEP_LINE_CAPACITY_BYTES: usize = 1024 * 1024;

/// JSON-RPC error codes this module answers with.
pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const INVALID_PARAMS: i64 = -32602;

/// Request methods the server implements: a request for one of these that rmcp could
/// not decode had bad params (rmcp would call it an unknown method).
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
];

/// Where answers go: stdout in the server.
type Output = Box<dyn std::io::Write + Send>;

/// Newline-delimited JSON-RPC over a reader and a writer (stdin and stdout in the
/// server), for rmcp's service loop.
pub(crate) struct LineTransport<R> {
    read: BufReader<R>,
    max_line_bytes: usize,
    /// The line read so far (kept across cancelled `receive` calls).
    line: Vec<u8>,
    /// Skipping the rest of an over-long line until its newline.
    discarding: bool,
    /// The start of the over-long line being skipped, to find its id in.
    probe: Vec<u8>,
    /// Length of the over-long line so far.
    skipped: usize,
    /// Answers, written in the order they are sent; `None` once closed (the calls still
    /// running here hold it until they are answered).
    outgoing: Option<Arc<LineSink<Output>>>,
    /// Closed when the writer thread has ended (its queue written, or writing failed).
    writer_ended: Option<oneshot::Receiver<()>>,
    /// `tools/call` requests read so far: the next one's [`Arrival`].
    calls_received: u64,
    /// Ends the input as end of file does once cancelled (SIGTERM or SIGINT in the
    /// server: [`LineTransport::stop_on`]).
    stop: Option<CancellationToken>,
    /// The plain tool calls answered here, not by rmcp ([`direct`]), once set.
    direct: Option<direct::Direct>,
}

/// What one bounded read produced.
enum LineRead {
    Line,
    /// A line over the cap ended; its first [`ID_PROBE_BYTES`] are in `probe`.
    Oversized {
        length: usize,
    },
    Eof,
    Io(std::io::Error),
}

impl<R: AsyncRead + Send + Unpin> LineTransport<R> {
    /// Starts the writer of `write` (stdout in the server; `write_fd`, its descriptor,
    /// lets short answers be written without a hand-off, see [`stdout`]).
    pub(crate) fn new<W: std::io::Write + Send + 'static>(
        read: R,
        write: W,
        write_fd: Option<std::os::fd::RawFd>,
        max_line_bytes: usize,
    ) -> std::io::Result<Self> {
        let (sink, writer_ended) = LineSink::spawn(Box::new(write) as Output, write_fd)?;
        Ok(LineTransport {
            read: BufReader::with_capacity(READ_BUFFER_BYTES, read),
            max_line_bytes,
            line: Vec::new(),
            discarding: false,
            probe: Vec::new(),
            skipped: 0,
            outgoing: Some(Arc::new(sink)),
            writer_ended: Some(writer_ended),
            calls_received: 0,
            stop: None,
            direct: None,
        })
    }

    /// Answers the plain tool calls `calls` takes without rmcp's request handling
    /// ([`direct`]).
    pub(crate) fn answer_directly(mut self, calls: Arc<dyn DirectCalls>) -> Self {
        self.direct = Some(direct::Direct::new(calls));
        self
    }

    /// Ends the input once `stop` is cancelled, as if the reader were at end of file:
    /// the service answers the calls it has read and returns, so the process ends as it
    /// does when stdin is closed (the ledger checkpointed on the way out).
    pub(crate) fn stop_on(mut self, stop: CancellationToken) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The next line read, or end of input once stopped. `read_line` is cancel-safe, so a
    /// line half read when the stop comes is simply not taken (nor is one a cancelled
    /// `receive` left: the token is not consumed by waiting on it).
    async fn next_line(&mut self) -> LineRead {
        let Some(stop) = self.stop.clone() else {
            return self.read_line().await;
        };
        tokio::select! {
            biased;
            () = stop.cancelled() => LineRead::Eof,
            read = self.read_line() => read,
        }
    }

    /// Numbers each `tools/call` request in the order its line was read, so the server can
    /// apply a connection's writes in that order ([`crate::request::arrival`]).
    fn stamp_arrival(&mut self, message: &mut RxJsonRpcMessage<RoleServer>) {
        if let JsonRpcMessage::Request(request) = message
            && let ClientRequest::CallToolRequest(call) = &mut request.request
        {
            call.extensions
                .insert(next_arrival(&mut self.calls_received));
        }
    }

    /// Waits for the calls running here to be answered (the end of input).
    async fn drain_direct(&mut self) {
        if let Some(direct) = &mut self.direct {
            direct.drain().await;
        }
    }

    /// Runs `message` here when it is a plain tool call [`direct`] takes (`None`), else
    /// hands it on for rmcp; notes the notifications that concern the calls run here.
    fn run_directly(
        &mut self,
        message: RxJsonRpcMessage<RoleServer>,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        let Some(direct) = &mut self.direct else {
            return Some(message);
        };
        direct.reap();
        let mut request = match message {
            JsonRpcMessage::Notification(notification) => {
                match &notification.notification {
                    ClientNotification::InitializedNotification(_) => direct.initialized = true,
                    ClientNotification::CancelledNotification(cancelled) => {
                        // rmcp is told too: it knows no call of that id and lets it be.
                        if let Some(id) = &cancelled.params.request_id {
                            direct.cancel(id);
                        }
                    }
                    _ => {}
                }
                return Some(JsonRpcMessage::Notification(notification));
            }
            JsonRpcMessage::Request(request) => request,
            other => return Some(other),
        };
        let call = match request.request {
            ClientRequest::CallToolRequest(call)
                if direct.initialized
                    && call.params.meta.is_none()
                    && call.extensions.is_empty()
                    && direct.calls.takes(&call.params.name) =>
            {
                call
            }
            other => {
                request.request = other;
                return Some(JsonRpcMessage::Request(request));
            }
        };
        let id = request.id;
        let cancel = CancellationToken::new();
        direct::lock(&direct.running).insert(id.clone(), cancel.clone());
        let arrival = next_arrival(&mut self.calls_received);
        let answer = direct
            .calls
            .answer(call.params, id.clone(), arrival, cancel);
        let running = direct.running.clone();
        let outgoing = self.outgoing.clone();
        direct.tasks.spawn(async move {
            let message = answer.await;
            // Gone from `running`: the client cancelled the call, which gets no answer.
            if direct::lock(&running).remove(&id).is_none() {
                tracing::debug!(%id, "dropping the answer of a cancelled call");
                return;
            }
            if let Err(error) = send_message(outgoing.as_deref(), &message) {
                tracing::error!(%error, "failed to send an answer");
            }
        });
        None
    }

    /// Reads one `\n`-terminated line into `self.line`, never holding more than
    /// `max_line_bytes` of it. Cancel-safe: the state lives in `self`, and bytes are
    /// consumed from the reader only together with the copy.
    async fn read_line(&mut self) -> LineRead {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(error) => return LineRead::Io(error),
            };
            if available.is_empty() {
                return LineRead::Eof;
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if !self.discarding && self.line.len() + take > self.max_line_bytes {
                // Keep the start for the id, drop the rest from here on.
                self.probe.clear();
                let head = self.line.len().min(ID_PROBE_BYTES);
                self.probe.extend_from_slice(&self.line[..head]);
                let more = (ID_PROBE_BYTES - head).min(take);
                self.probe.extend_from_slice(&available[..more]);
                self.skipped = self.line.len();
                self.line = Vec::new();
                self.discarding = true;
            }
            if self.discarding {
                self.skipped += take;
            } else {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if newline.is_some() {
                if self.discarding {
                    self.discarding = false;
                    return LineRead::Oversized {
                        // Without its newline, like any line's length.
                        length: self.skipped - 1,
                    };
                }
                return LineRead::Line;
            }
        }
    }

    /// Queues an answer of our own (sent in order with rmcp's).
    fn answer(&self, message: Value) {
        if let Some(outgoing) = &self.outgoing {
            let mut line = message.to_string().into_bytes();
            line.push(b'\n');
            let _ = outgoing.send(line);
        }
    }

    /// Decodes one whole line: a message for rmcp, or `None` after answering or
    /// ignoring it.
    fn decode(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        if let Err(error) = std::str::from_utf8(line) {
            return self.refuse(
                line,
                PARSE_ERROR,
                format!(
                    "Parse error: the line is not valid UTF-8 (bad byte at offset {}); send each JSON-RPC message as one line of UTF-8 JSON",
                    error.valid_up_to()
                ),
            );
        }
        if let Some(call) = tool_call::decode(line) {
            return Some(call);
        }
        match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
            Ok(JsonRpcMessage::Request(request)) => match &request.request {
                ClientRequest::CustomRequest(custom)
                    if KNOWN_METHODS.contains(&custom.method.as_str()) =>
                {
                    let message = params_problem(&custom.method, custom.params.as_ref());
                    tracing::warn!(method = %custom.method, "refused a request: {message}");
                    self.answer(error_answer(Some(&request.id), INVALID_PARAMS, &message));
                    None
                }
                _ => Some(JsonRpcMessage::Request(request)),
            },
            Ok(message) => Some(message),
            Err(error) if error.is_syntax() || error.is_eof() => {
                let hint = parse_error_hint(&error.to_string());
                self.refuse(line, PARSE_ERROR, format!("Parse error: {error}{hint}"))
            }
            Err(error) => {
                // Well-formed JSON that rmcp cannot take. Notifications it does not
                // know are dropped the way rmcp drops them.
                let value: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
                if let Some(method) = value.get("method").and_then(Value::as_str)
                    && value.get("id").is_none()
                {
                    tracing::debug!(
                        method,
                        "ignored a notification that does not decode: {error}"
                    );
                    return None;
                }
                let method = value.get("method").and_then(Value::as_str);
                if let Some(method) = method.filter(|m| KNOWN_METHODS.contains(m))
                    && value["jsonrpc"] == "2.0"
                    && (value["id"].is_string() || value["id"].is_i64() || value["id"].is_u64())
                {
                    // A sound envelope around params rmcp cannot take.
                    let message = params_problem(method, value.get("params"));
                    return self.refuse(line, INVALID_PARAMS, message);
                }
                let message = if value.is_array() {
                    "Invalid Request: batches are not supported; send one JSON-RPC message per line"
                        .to_string()
                } else {
                    format!(
                        "Invalid Request: {error}; a request is {{\"jsonrpc\": \"2.0\", \"id\": <number or string>, \"method\": <string>, \"params\": <object>}}"
                    )
                };
                self.refuse(line, INVALID_REQUEST, message)
            }
        }
    }

    /// Answers a refused line unless it was a notification or a response; always `None`.
    fn refuse(
        &self,
        line: &[u8],
        code: i64,
        message: String,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        let probe = probe_line(line);
        if probe.must_not_be_answered() {
            tracing::warn!(code, "ignored a line that is not a request: {message}");
            return None;
        }
        tracing::warn!(code, "refused a line: {message}");
        self.answer(error_answer_value(probe.id, code, &message));
        None
    }
}

impl<R: AsyncRead + Send + Unpin> Transport<RoleServer> for LineTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Written or queued now, so lines go out in the order rmcp sends them. A line that
        // cannot be written is logged once; later sends fail.
        std::future::ready(send_message(self.outgoing.as_deref(), &item))
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.next_line().await {
                LineRead::Line => {}
                LineRead::Oversized { length } => {
                    let message = format!(
                        "Invalid Request: the line has {length} bytes, more than the {} this server reads; send smaller requests (a thought over {} bytes is refused anyway: split it into several calls)",
                        self.max_line_bytes,
                        crate::tools::args::MAX_TEXT_BYTES
                    );
                    let probe = std::mem::take(&mut self.probe);
                    self.refuse(&probe, INVALID_REQUEST, message);
                    continue;
                }
                LineRead::Eof => {
                    self.drain_direct().await;
                    return None;
                }
                LineRead::Io(error) => {
                    tracing::error!("reading stdin failed: {error}");
                    self.drain_direct().await;
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let decoded = self.decode(&line);
            if line.capacity() <= KEEP_LINE_CAPACITY_BYTES {
                self.line = line;
                self.line.clear();
            }
            if let Some(message) = decoded
                && let Some(mut message) = self.run_directly(message)
            {
                self.stamp_arrival(&mut message);
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.outgoing.take());
        if let Some(ended) = self.writer_ended.take() {
            let _ = ended.await;
        }
        Ok(())
    }
}

/// The [`Arrival`] of the next `tools/call` read, counting it in `calls_received`.
fn next_arrival(calls_received: &mut u64) -> Arrival {
    *calls_received += 1;
    Arrival(*calls_received - 1)
}

/// Writes or queues `message` as one line on `outgoing` (`None`: the transport is closed).
fn send_message(
    outgoing: Option<&LineSink<Output>>,
    message: &TxJsonRpcMessage<RoleServer>,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    match outgoing {
        Some(outgoing) => outgoing.send(line),
        None => Err(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "transport is closed",
        )),
    }
}

/// How to fix a line that is not JSON, from serde_json's description of the problem.
fn parse_error_hint(error: &str) -> &'static str {
    if error.contains("surrogate") || error.contains("hex escape") {
        "; strings must be valid Unicode: a \\u escape has four hex digits, and \\uD800-\\uDFFF escapes come only in surrogate pairs (replace a lone one, e.g. with \\uFFFD)"
    } else if error.contains("number out of range") {
        "; numbers must be finite JSON numbers (integer fields take 1 to 9007199254740991)"
    } else if error.contains("recursion limit") {
        "; the message is nested too deeply (at most 127 levels): flatten the arguments"
    } else {
        "; send each JSON-RPC message as one line of JSON"
    }
}

/// The text of a -32602 answer for a known method whose params rmcp could not decode.
fn params_problem(method: &str, params: Option<&Value>) -> String {
    let shape = match method {
        "tools/call" => {
            if let Some(arguments) = params.and_then(|p| p.get("arguments"))
                && !arguments.is_object()
                && !arguments.is_null()
            {
                return format!(
                    "Invalid params for tools/call: \"arguments\" must be a JSON object of the tool's arguments (e.g. {{\"thought\": \"...\", \"thoughtNumber\": 1}}), not {}; pass the arguments as an object, not as a string of JSON",
                    crate::tools::args::describe(arguments)
                );
            }
            "{\"name\": <tool name>, \"arguments\": {<argument>: <value>, ...}}"
        }
        "resources/read" => "{\"uri\": <resource uri>}",
        "prompts/get" => "{\"name\": <prompt name>, \"arguments\": {<argument>: <string>, ...}}",
        "completion/complete" => {
            "{\"ref\": {\"type\": \"ref/prompt\", \"name\": <prompt>} or {\"type\": \"ref/resource\", \"uri\": <template>}, \"argument\": {\"name\": <string>, \"value\": <string>}}"
        }
        "logging/setLevel" => {
            "{\"level\": one of debug, info, notice, warning, error, critical, alert, emergency}"
        }
        "initialize" => {
            "{\"protocolVersion\": <string>, \"capabilities\": {}, \"clientInfo\": {\"name\": <string>, \"version\": <string>}}"
        }
        _ => "an object (or nothing)",
    };
    let got = params.map_or_else(|| "nothing".to_string(), crate::tools::args::describe);
    format!("Invalid params for {method}: expected params {shape}, received {got}")
}

fn error_answer(id: Option<&RequestId>, code: i64, message: &str) -> Value {
    let id = id.map_or(Value::Null, |id| {
        serde_json::to_value(id).unwrap_or(Value::Null)
    });
    error_answer_value(id, code, message)
}

fn error_answer_value(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// What the start of a line says about the message it holds.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct LineProbe {
    /// The top-level `id`, when it is a number or a string; else null.
    pub id: Value,
    pub has_id: bool,
    pub has_method: bool,
    /// A top-level `result` or `error` key: the line is (meant as) a response.
    pub has_outcome: bool,
}

impl LineProbe {
    /// Notifications and responses are never answered, even when malformed.
    pub(crate) fn must_not_be_answered(&self) -> bool {
        (self.has_method && !self.has_id) || (self.has_outcome && !self.has_method)
    }
}

/// Scans the top-level keys of a (possibly cut or malformed) JSON object without
/// building it: no recursion, no allocation beyond the id, stops at the first byte that
/// does not fit.
pub(crate) fn probe_line(line: &[u8]) -> LineProbe {
    let mut probe = LineProbe::default();
    let mut at = skip_space(line, 0);
    if line.get(at) != Some(&b'{') {
        return probe;
    }
    at += 1;
    loop {
        at = skip_space(line, at);
        if line.get(at) != Some(&b'"') {
            return probe;
        }
        let Some(key_end) = string_end(line, at) else {
            return probe;
        };
        let key = &line[at + 1..key_end - 1];
        at = skip_space(line, key_end);
        if line.get(at) != Some(&b':') {
            return probe;
        }
        at = skip_space(line, at + 1);
        match key {
            b"id" => probe.has_id = true,
            b"method" => probe.has_method = true,
            b"result" | b"error" => probe.has_outcome = true,
            _ => {}
        }
        let Some(value_end) = value_end(line, at) else {
            return probe;
        };
        if key == b"id" {
            probe.id = match serde_json::from_slice::<Value>(&line[at..value_end]) {
                Ok(id @ (Value::String(_) | Value::Number(_))) => id,
                _ => Value::Null,
            };
        }
        at = skip_space(line, value_end);
        match line.get(at) {
            Some(b',') => at += 1,
            _ => return probe,
        }
    }
}

fn skip_space(line: &[u8], mut at: usize) -> usize {
    while line
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        at += 1;
    }
    at
}

/// End (exclusive) of the string starting with the quote at `at`.
fn string_end(line: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < line.len() {
        match line[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// End (exclusive) of the value starting at `at`: a string, a nested object or array
/// (by counting brackets outside strings), or a scalar.
fn value_end(line: &[u8], at: usize) -> Option<usize> {
    match line.get(at)? {
        b'"' => string_end(line, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < line.len() {
                match line[i] {
                    b'"' => {
                        i = string_end(line, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let end = line[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))?;
            (end > 0).then_some(at + end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_finds_the_id_at_the_start_of_a_cut_line() {
        let probe = probe_line(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"thought":"xxxx"#);
        assert_eq!(probe.id, json!(7));
        assert!(probe.has_method && probe.has_id && !probe.must_not_be_answered());
        let probe = probe_line(br#" { "id" : "a\"b" , "method": "x"}"#);
        assert_eq!(probe.id, json!("a\"b"));
    }

    #[test]
    fn probe_skips_nested_values_before_the_id() {
        let probe = probe_line(br#"{"params":{"a":[1,{"b":"}]"}]},"method":"m","id":-3}"#);
        assert_eq!(probe.id, json!(-3));
        let deep = format!(
            "{{\"params\":{}1{},\"id\":1}}",
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert_eq!(probe_line(deep.as_bytes()).id, json!(1));
    }

    #[test]
    fn probe_tells_notifications_and_responses_apart() {
        assert!(
            probe_line(br#"{"jsonrpc":"2.0","method":"notifications/x","params":{"#)
                .must_not_be_answered()
        );
        assert!(
            probe_line(br#"{"jsonrpc":"2.0","id":null,"error":{"code":1"#).must_not_be_answered()
        );
        assert!(probe_line(br#"{"jsonrpc":"2.0","id":3,"result":{}"#).must_not_be_answered());
        // No id found: answered with id null.
        let garbage = probe_line(b"not json at all");
        assert_eq!(garbage.id, Value::Null);
        assert!(!garbage.must_not_be_answered());
        // Ids that are neither number nor string are not echoed.
        assert_eq!(
            probe_line(br#"{"id":{"x":1},"method":"m"}"#).id,
            Value::Null
        );
        assert_eq!(probe_line(br#"{"id":[1],"method":"m"}"#).id, Value::Null);
    }

    #[test]
    fn probe_survives_any_prefix_of_a_message() {
        let line = br#"{"jsonrpc":"2.0","id":"x\\y","method":"tools/call","params":{"name":"n","arguments":{"t":"a\"}b"}}}"#;
        for end in 0..=line.len() {
            let _ = probe_line(&line[..end]);
        }
        assert_eq!(probe_line(line).id, json!("x\\y"));
    }
}
