//! Hostile and malformed input over the MCP wire, table-driven: raw lines no client
//! library would send (not JSON, not UTF-8, lone surrogates, 5,000-deep nesting, numbers
//! JSON cannot hold, wrong shapes), a 200 MB line, characters that try to spoof an
//! export, and every integer and boolean field of every listed tool fed out-of-range
//! numbers and look-alike strings, generated from the tools' own input schemas.
//!
//! Every case checks three things: the answer (a JSON-RPC error with the request's id
//! when the line gives it away, or a tool error naming the field, in both cases saying
//! what to send instead — or no answer at all for notifications and responses), that
//! nothing was written for a refused call, and that the server still serves. Every line
//! the server writes to stdout must be one JSON-RPC message.

use crate::bad_input::{Raw, tool_call};
use crate::common::{self, call, structured, text};
use serde_json::{Map, Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

const SEQ: &str = "sequentialthinking";

/// Upper bound asserted on the server's peak RSS while it skips a 200 MB line: the line
/// cap (32 MiB) plus the server's own ~10 MiB, with room for allocator slack. A server
/// that buffered the line would need over 200 MiB.
const PEAK_RSS_BOUND_KIB: u64 = 96 * 1024;

/// Parses one stdout line and checks it is a JSON-RPC 2.0 message: a response (id with
/// exactly one of result and error), a request or a notification.
fn json_rpc(line: &[u8]) -> Value {
    let value: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
        panic!(
            "stdout line is not JSON ({e}): {:?}",
            String::from_utf8_lossy(&line[..line.len().min(300)])
        )
    });
    assert_eq!(value["jsonrpc"], "2.0", "{value}");
    let object = value.as_object().expect("a message is an object");
    if object.contains_key("method") {
        assert!(value["method"].is_string(), "{value}");
    } else {
        assert!(object.contains_key("id"), "a response has an id: {value}");
        assert!(
            object.contains_key("result") != object.contains_key("error"),
            "exactly one of result and error: {value}"
        );
        if let Some(error) = object.get("error") {
            assert!(error["code"].is_i64(), "{value}");
            assert!(error["message"].is_string(), "{value}");
        }
    }
    value
}

/// The next message the server writes, checked to be JSON-RPC.
async fn next_message(raw: &mut Raw) -> Value {
    let mut line = Vec::new();
    let n = tokio::time::timeout(
        Duration::from_secs(30),
        raw.stdout.read_until(b'\n', &mut line),
    )
    .await
    .expect("server wrote in time")
    .expect("read stdout");
    assert!(n > 0, "server closed stdout");
    raw.lines.push(line.clone());
    json_rpc(&line)
}

/// Sends a ping with `id` and returns every message the server wrote before its answer
/// (answers come out in the order the lines went in: one writer, one reader).
async fn written_before_ping(raw: &mut Raw, id: u64) -> Vec<Value> {
    raw.send_json(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
        .await;
    let mut before = Vec::new();
    loop {
        let message = next_message(raw).await;
        if message["id"] == id {
            assert_eq!(message["result"], json!({}), "{message}");
            return before;
        }
        before.push(message);
    }
}

/// Sessions and their head seqs, to show that a refused call wrote nothing.
async fn ledger_state(raw: &mut Raw, id: u64) -> Vec<(String, u64)> {
    raw.send_json(tool_call(id, "list_sessions", json!({"limit": 200})))
        .await;
    let answer = raw.answer(id).await;
    answer["result"]["structuredContent"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|s| {
            (
                s["sessionId"].as_str().unwrap().to_string(),
                s["events"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A raw tools/call line whose `arguments` object is given as JSON text.
fn call_line(id: u64, tool: &str, arguments: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
    )
    .into_bytes()
}

/// A sequentialthinking call line with `thought` spliced in as raw JSON string content.
fn thought_line(id: u64, thought_json_content: &[u8]) -> Vec<u8> {
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sequentialthinking","arguments":{{"thoughtNumber":1,"totalThoughts":1,"nextThoughtNeeded":false,"thought":""#
    )
    .into_bytes();
    line.extend_from_slice(thought_json_content);
    line.extend_from_slice(br#""}}}"#);
    line
}

/// One raw line and what the server must answer: `(code, id, words of the message)`, or
/// nothing.
struct LineCase {
    name: &'static str,
    line: Vec<u8>,
    answer: Option<(i64, Value, &'static str)>,
}

fn answered(name: &'static str, line: &[u8], code: i64, id: Value, says: &'static str) -> LineCase {
    LineCase {
        name,
        line: line.to_vec(),
        answer: Some((code, id, says)),
    }
}

fn silent(name: &'static str, line: &[u8]) -> LineCase {
    LineCase {
        name,
        line: line.to_vec(),
        answer: None,
    }
}

fn line_cases() -> Vec<LineCase> {
    let deep = |id: u64, field: &str| {
        call_line(
            id,
            SEQ,
            &format!(
                r#"{{"thought":"t","thoughtNumber":1,"totalThoughts":1,"nextThoughtNeeded":false,"{field}":{}1{}}}"#,
                "[".repeat(5000),
                "]".repeat(5000)
            ),
        )
    };
    vec![
        answered("not JSON", b"{not json", -32700, Value::Null, "Parse error"),
        answered("plain text", b"hello server", -32700, Value::Null, "one line of JSON"),
        answered(
            "invalid UTF-8 in a thought",
            &thought_line(101, b"bad \xff\xfe \xc3\x28 bytes"),
            -32700,
            json!(101),
            "not valid UTF-8",
        ),
        answered(
            "invalid UTF-8 before anything",
            b"\xff{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}",
            -32700,
            Value::Null,
            "UTF-8",
        ),
        answered(
            "lone high surrogate",
            &thought_line(102, br"lone \ud800 high"),
            -32700,
            json!(102),
            "surrogate pairs",
        ),
        answered(
            "lone low surrogate",
            &thought_line(103, br"lone \udc00 low"),
            -32700,
            json!(103),
            "surrogate pairs",
        ),
        answered(
            "high surrogate then another escape",
            &thought_line(104, br"\ud800\u0041"),
            -32700,
            json!(104),
            "surrogate pairs",
        ),
        answered(
            "truncated message",
            br#"{"jsonrpc":"2.0","id":105,"method":"tools/call","params":{"name":"sequentialthinking""#,
            -32700,
            json!(105),
            "Parse error",
        ),
        answered(
            "5,000-deep nesting in a known field",
            &deep(106, "thought"),
            -32700,
            json!(106),
            "nested too deeply",
        ),
        answered(
            "5,000-deep nesting in an unknown field",
            &deep(107, "extra"),
            -32700,
            json!(107),
            "nested too deeply",
        ),
        answered(
            "number out of range (1e400)",
            &call_line(108, "list_sessions", r#"{"limit":1e400}"#),
            -32700,
            json!(108),
            "finite",
        ),
        answered(
            "arguments as a string",
            &call_line(109, SEQ, r#""{\"thought\":\"t\"}""#),
            -32602,
            json!(109),
            "must be a JSON object",
        ),
        answered(
            "arguments as an array",
            &call_line(110, SEQ, r#"["t",1,1,false]"#),
            -32602,
            json!(110),
            "must be a JSON object",
        ),
        answered(
            "params as a string",
            br#"{"jsonrpc":"2.0","id":111,"method":"tools/call","params":"sequentialthinking"}"#,
            -32602,
            json!(111),
            "expected params {\"name\"",
        ),
        answered(
            "wrong jsonrpc version",
            br#"{"jsonrpc":"1.0","id":112,"method":"ping"}"#,
            -32600,
            json!(112),
            "Invalid Request",
        ),
        answered(
            "no method",
            br#"{"jsonrpc":"2.0","id":113}"#,
            -32600,
            json!(113),
            "\"method\": <string>",
        ),
        answered(
            "string id, cut short",
            br#"{"id":"abc","jsonrpc":"2.0","method":"#,
            -32700,
            json!("abc"),
            "Parse error",
        ),
        answered(
            "object as id",
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            -32600,
            Value::Null,
            "Invalid Request",
        ),
        answered("empty batch", b"[]", -32600, Value::Null, "batches are not supported"),
        answered(
            "batch",
            br#"[{"jsonrpc":"2.0","id":114,"method":"ping"}]"#,
            -32600,
            Value::Null,
            "one JSON-RPC message per line",
        ),
        answered("a bare number", b"42", -32600, Value::Null, "Invalid Request"),
        answered(
            "unknown method",
            br#"{"jsonrpc":"2.0","id":115,"method":"no/such/method"}"#,
            -32601,
            json!(115),
            "no/such/method",
        ),
        answered(
            "unknown session resource",
            br#"{"jsonrpc":"2.0","id":116,"method":"resources/read","params":{"uri":"ledger://sessions/01ARZ3NDEKTSV4RRFFQ69G5FAV"}}"#,
            -32002,
            json!(116),
            "use ledger://sessions",
        ),
        answered(
            "unknown tool",
            &call_line(117, "no_such_tool", "{}"),
            -32602,
            json!(117),
            "Tool no_such_tool not found",
        ),
        silent("empty line", b""),
        silent("blank line", b"  \t \r"),
        silent(
            "a response",
            br#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
        ),
        silent(
            "an error with id null",
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        ),
        silent("a cut response", br#"{"jsonrpc":"2.0","id":8,"result":{"#),
        silent(
            "an unknown notification",
            br#"{"jsonrpc":"2.0","method":"notifications/nope","params":{"x":1}}"#,
        ),
        silent(
            "a cut notification",
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"#,
        ),
        silent(
            "a notification with invalid UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"x\":\"\xff\"}}",
        ),
    ]
}

#[tokio::test]
async fn malformed_lines_are_answered_per_json_rpc_under_trace_logging_and_write_nothing() {
    let dir = common::data_dir();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut raw = Raw::spawn_with(
        dir.path(),
        &[("RUST_LOG", "trace")],
        Stdio::from(log.reopen().unwrap()),
    )
    .await;
    raw.initialize().await;
    for (index, case) in line_cases().into_iter().enumerate() {
        raw.send(&case.line).await;
        let mut written = written_before_ping(&mut raw, 1000 + index as u64).await;
        if let Some((_, id, _)) = &case.answer
            && !id.is_null()
            && written.is_empty()
        {
            // Answered by a handler task rather than the transport: it may come after
            // the ping's answer.
            written.push(next_message(&mut raw).await);
        }
        match &case.answer {
            None => assert!(written.is_empty(), "{}: answered {written:?}", case.name),
            Some((code, id, says)) => {
                assert_eq!(written.len(), 1, "{}: {written:?}", case.name);
                let answer = &written[0];
                assert_eq!(answer["id"], *id, "{}: {answer}", case.name);
                assert_eq!(answer["error"]["code"], *code, "{}: {answer}", case.name);
                let message = answer["error"]["message"].as_str().unwrap();
                assert!(message.contains(says), "{}: {message}", case.name);
            }
        }
    }
    assert!(
        ledger_state(&mut raw, 2000).await.is_empty(),
        "no refused line wrote anything"
    );
    raw.send_json(tool_call(
        2001,
        SEQ,
        common::thought(1, 1, false, "still serving"),
    ))
    .await;
    let answer = raw.answer(2001).await;
    assert_eq!(
        answer["result"]["structuredContent"]["thoughtHistoryLength"], 1,
        "{answer}"
    );
    for line in raw.finish().await {
        json_rpc(&line);
    }
    let log = std::fs::read_to_string(log.path()).unwrap();
    assert!(log.contains("TRACE"), "trace logging was on");
}

/// VmHWM (peak resident set) of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[tokio::test]
async fn a_200_megabyte_line_is_answered_with_its_id_and_memory_stays_bounded() {
    const LINE_MIB: usize = 200;
    let dir = common::data_dir();
    let mut raw = Raw::spawn(dir.path()).await;
    raw.initialize().await;
    let pid = raw.child.id().expect("running");
    let before = peak_rss_kib(pid);
    let started = Instant::now();
    let chunk = vec![b'x'; 1024 * 1024];
    let head = br#"{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"sequentialthinking","arguments":{"thoughtNumber":1,"totalThoughts":1,"nextThoughtNeeded":false,"thought":""#;
    raw.stdin.write_all(head).await.unwrap();
    let mut peak = before;
    for _ in 0..LINE_MIB {
        raw.stdin.write_all(&chunk).await.unwrap();
        peak = peak.max(peak_rss_kib(pid));
    }
    raw.send(br#""}}}"#).await;
    let answer = raw.answer(77).await;
    let elapsed = started.elapsed();
    peak = peak.max(peak_rss_kib(pid));
    eprintln!(
        "200 MB line: peak RSS {before} KiB before, {peak} KiB while skipping it; answered in {elapsed:?}"
    );
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "the line has {} bytes",
            head.len() + LINE_MIB * 1024 * 1024 + 4
        )) && message.contains("split it into several calls"),
        "{message}"
    );
    assert!(
        peak < PEAK_RSS_BOUND_KIB,
        "peak RSS {peak} KiB while skipping a {LINE_MIB} MiB line"
    );
    // Nothing of it was stored, and the next call is served as usual.
    raw.send_json(tool_call(
        78,
        SEQ,
        common::thought(1, 1, false, "after the flood"),
    ))
    .await;
    let answer = raw.answer(78).await;
    assert_eq!(
        answer["result"]["structuredContent"]["thoughtHistoryLength"], 1,
        "{answer}"
    );
    assert_eq!(ledger_state(&mut raw, 79).await.len(), 1);
    for line in raw.finish().await {
        json_rpc(&line);
    }
}

/// Texts that try to hide, reorder or break what a reader sees.
const SPOOFING_TEXTS: &[&str] = &[
    "nul \0 bell \u{7} esc \u{1b}[31mred\u{1b}[0m del \u{7f} c1 \u{85}\u{9b}",
    "bidi \u{202E}gnp.exe\u{202C} \u{2066}isolate\u{2069} \u{200F}rlm\u{200E} \u{061C}alm",
    "zero\u{200B}width\u{200C}non\u{200D}joiner\u{2060}wj\u{FEFF}bom",
    "emoji 🧠💭 👨‍👩‍👧 🇺🇳 ✔️ 🏳️‍🌈",
    "crlf one\r\ntwo\rthree\n\u{2028}four\u{2029}five\tsix",
    "noncharacters \u{FFFE}\u{FFFF} and \u{FFFD} itself",
    "\"]; t9[\"end\" %%{init: {}}%% <b>x</b> #quot; `code`",
];

/// A control (other than `\n` and tab) or bidi formatting character: what a rendering
/// must not show raw.
fn is_spoofing_char(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
        )
}

/// The `thought` of each thought event in a list of events (JSONL envelopes, or
/// `get_history` rows with the type beside the payload).
fn event_thoughts(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "thought_recorded" || e["payload"]["type"] == "thought_recorded")
        .map(|e| e["payload"]["thought"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn control_bidi_and_zero_width_characters_are_stored_byte_exact_and_shown_escaped() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let total = SPOOFING_TEXTS.len() as u64 + 1;
    let mut session = Value::Null;
    let mut sent = Vec::new();
    for (index, text) in SPOOFING_TEXTS.iter().enumerate() {
        let mut args = common::thought(index as u64 + 1, total, true, text);
        if index == 2 {
            args["branchFromThought"] = json!(1);
            args["branchId"] = json!(SPOOFING_TEXTS[1]);
        }
        let answer = structured(&call(&client, SEQ, args).await);
        session = answer["sessionId"].clone();
        sent.push(text.to_string());
    }
    let think = json!({"thread_purpose": SPOOFING_TEXTS[1], "thought": SPOOFING_TEXTS[0], "thought_index": 1, "left_to_be_done": SPOOFING_TEXTS[4]});
    let thread = structured(&call(&client, "think", think).await)["sessionId"].clone();

    // Byte-exact through get_history, the JSONL and the JSON export.
    let history = structured(
        &call(
            &client,
            "get_history",
            json!({"sessionId": session, "limit": 500}),
        )
        .await,
    );
    assert_eq!(event_thoughts(history["events"].as_array().unwrap()), sent);
    let export = |format: &'static str, id: Value| {
        let client = &client;
        async move {
            let result = call(
                client,
                "export_session",
                json!({"sessionId": id, "format": format}),
            )
            .await;
            assert_ne!(result.is_error, Some(true), "{format}: {}", text(&result));
            text(&result)
        }
    };
    let jsonl: Vec<Value> = export("jsonl", session.clone())
        .await
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSONL line is JSON"))
        .collect();
    assert_eq!(event_thoughts(&jsonl), sent);
    let tree: Value = serde_json::from_str(&export("json", session.clone()).await).unwrap();
    let thoughts: Vec<&str> = tree["thoughts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["thought"].as_str().unwrap())
        .collect();
    assert_eq!(thoughts, SPOOFING_TEXTS);
    assert_eq!(tree["branches"][0]["id"], SPOOFING_TEXTS[1]);
    let think_tree: Value = serde_json::from_str(&export("json", thread.clone()).await).unwrap();
    assert_eq!(think_tree["thoughts"][0]["thought"], SPOOFING_TEXTS[0]);

    // Markdown and Mermaid show each control or bidi character as U+FFFD, never raw.
    for (format, id) in [
        ("markdown", session.clone()),
        ("markdown", thread.clone()),
        ("mermaid", session.clone()),
        ("mermaid", thread.clone()),
    ] {
        let rendered = export(format, id.clone()).await;
        let raw: Vec<String> = rendered
            .chars()
            .filter(|c| is_spoofing_char(*c))
            .map(|c| format!("U+{:04X}", c as u32))
            .collect();
        assert!(raw.is_empty(), "{format} shows {raw:?} raw:\n{rendered}");
        assert!(rendered.contains('\u{FFFD}'), "{format}");
        if id == session {
            assert!(rendered.contains("👨‍👩‍👧"), "{format} keeps emoji sequences");
        }
    }
    let mermaid = export("mermaid", session.clone()).await;
    let thought_nodes = mermaid
        .lines()
        .filter(|line| {
            let line = line.trim_start();
            line.starts_with('t')
                && line[1..]
                    .split('[')
                    .next()
                    .is_some_and(|d| d.parse::<u64>().is_ok())
        })
        .count();
    assert_eq!(thought_nodes, SPOOFING_TEXTS.len(), "{mermaid}");
    // Handed to the real Mermaid parser by `.ci/mermaid-check`, with the projection's counts.
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mermaid-fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::write(fixtures.join("wire-spoofing.mmd"), &mermaid).unwrap();
    std::fs::write(
        fixtures.join("wire-spoofing.counts"),
        format!(
            "{} {} {}\n",
            tree["thoughts"].as_array().unwrap().len(),
            tree["edges"].as_array().unwrap().len(),
            tree["branches"].as_array().unwrap().len()
        ),
    )
    .unwrap();
}

// ---- integer and boolean fields, from the tools' own schemas ----

/// Whether a property schema admits JSON type `name` (`type: name`, or a type union
/// with it, as the coerced fields declare: `["integer", "string"]`).
fn admits(schema: &Value, name: &str) -> bool {
    schema["type"] == name
        || schema["type"]
            .as_array()
            .is_some_and(|types| types.iter().any(|t| t == name))
}

/// Whether a property schema is an integer.
fn is_integer(schema: &Value) -> bool {
    admits(schema, "integer")
}

/// Whether a property schema is a boolean.
fn is_boolean(schema: &Value) -> bool {
    admits(schema, "boolean")
}

/// Valid arguments for every listed tool, on a session with three thoughts (head seq 4).
/// A new tool fails the test here until it gets its base arguments.
pub(crate) fn base_arguments(tool: &str, session: &str) -> Map<String, Value> {
    let value = match tool {
        SEQ | "sequential_thinking" => {
            json!({"thought": "t", "thoughtNumber": 2, "totalThoughts": 3, "nextThoughtNeeded": true, "sessionId": session})
        }
        "think" => json!({"thread_purpose": "p", "thought": "t", "thought_index": 2}),
        "list_sessions" => json!({}),
        "get_history" => json!({"sessionId": session}),
        "search_history" => json!({"query": "t"}),
        "export_session" => json!({"sessionId": session, "format": "json"}),
        "replay_session" => json!({"sessionId": session, "atSeq": 2}),
        "deep_planning" => json!({"phase": "init", "problem": "p", "constraints": ["c"]}),
        "list_plans" => json!({}),
        "get_plan" => json!({"sessionId": session}),
        "evaluate_branch" => json!({"sessionId": session, "branchId": "b", "feasibility": 5}),
        "compare_branches" => json!({"sessionId": session}),
        "close_branch" => json!({"sessionId": session, "branchId": "b", "conclusion": "c"}),
        "merge_branch" => json!({"sessionId": session, "branchId": "b"}),
        // A thinking session is not a QA session: the QA call continues its own.
        "sequentialthinking_qa" => {
            json!({"thought": "t", "thought_number": 2, "total_thoughts": 3, "next_thought_needed": true})
        }
        // The agent tools: valid arguments (with no model configured, a valid call is
        // answered with the `config` envelope, not a validation error).
        "chat_agent" => json!({"input_text": "t", "max_tokens": 2, "seed": 2, "session_id": "s"}),
        "create_branch" => {
            json!({"session_id": "s", "input_text": "a self-contained question of thirty characters"})
        }
        "get_branch_details" => json!({"session_id": "s", "node_id": "n_00000000"}),
        // The booster tools: `session` is a booster session ([`booster_session_for`]).
        "usage" => json!({"topic": "config"}),
        "start" => json!({"task": "t"}),
        "step" => json!({"sessionId": session}),
        "multi-step" => json!({"sessionId": session, "iterations": 1}),
        "get-state" | "summarize" => json!({"sessionId": session}),
        "solve" | "solve-text" => json!({"task": "t", "iterations": 2}),
        other => panic!("no base arguments for tool {other}: add them to base_arguments"),
    };
    common::object(value)
}

/// The booster tools that name a session: they need a booster session of their own
/// (`multi-step` one, the others another, each with room for 64 iterations).
pub(crate) fn booster_session_for<'a>(
    tool: &str,
    step: &'a str,
    multi: &'a str,
) -> Option<&'a str> {
    match tool {
        "step" | "get-state" | "summarize" => Some(step),
        "multi-step" => Some(multi),
        _ => None,
    }
}

/// Arguments of `start` for the booster sessions of the suites.
pub(crate) fn booster_start() -> Value {
    json!({"task": "t", "config": {"maxSteps": 64}})
}

/// The arguments with `field` set to `literal` (raw JSON text, so `1e400` and `-0` go
/// through as written).
fn with_literal(base: &Map<String, Value>, field: &str, literal: &str) -> String {
    let mut base = base.clone();
    base.remove(field);
    let rest = Value::Object(base).to_string();
    let rest = rest.trim_start_matches('{');
    let comma = if rest == "}" { "" } else { "," };
    format!("{{\"{field}\":{literal}{comma}{rest}")
}

fn snake_case(field: &str) -> String {
    let mut out = String::new();
    for c in field.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The refusal text of an error result: the text itself, or the `message` of a
/// structured error envelope (the agent tools answer `{success: false, type, action,
/// message, errors}`).
fn refusal_message(result: &Value) -> String {
    let text = result["content"][0]["text"].as_str().unwrap();
    match serde_json::from_str::<Value>(text) {
        Ok(envelope) if envelope["message"].is_string() => {
            envelope["message"].as_str().unwrap().to_string()
        }
        _ => text.to_string(),
    }
}

/// Whether the arguments were taken: a success, or an error envelope that is not a
/// validation error (an agent tool with no model configured answers `config`; a
/// missing node answers `not_found`).
fn passed_validation(result: &Value) -> bool {
    if result["isError"] != true {
        return true;
    }
    let text = result["content"][0]["text"].as_str().unwrap_or("");
    serde_json::from_str::<Value>(text)
        .is_ok_and(|envelope| envelope["type"].is_string() && envelope["type"] != "validation")
}

/// The `note:` blocks of an answer (arguments it ignored), joined.
fn notes_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .filter(|text| text.starts_with("note: "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Calls `tool` with raw argument text and returns the answer.
async fn raw_call(raw: &mut Raw, id: u64, tool: &str, arguments: &str) -> Value {
    raw.send(&call_line(id, tool, arguments)).await;
    raw.answer(id).await
}

#[tokio::test]
async fn every_integer_and_boolean_field_refuses_out_of_range_numbers_and_lookalike_strings() {
    let dir = common::data_dir();
    // Every toolset, so every listed tool's fields are covered.
    let mut raw = Raw::spawn_with(
        dir.path(),
        &[("REASONING_LEDGER_TOOLSETS", "all")],
        std::process::Stdio::null(),
    )
    .await;
    raw.initialize().await;
    let mut id = 10;
    let mut next_id = || {
        id += 1;
        id
    };
    let first = raw_call(
        &mut raw,
        next_id(),
        SEQ,
        &common::thought(1, 3, true, "t").to_string(),
    )
    .await;
    let session = first["result"]["structuredContent"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    for n in 2..=3 {
        raw_call(
            &mut raw,
            next_id(),
            SEQ,
            &common::thought(n, 3, true, "t").to_string(),
        )
        .await;
    }
    // Branch "b", which the branch tools' base arguments name.
    raw_call(
        &mut raw,
        next_id(),
        SEQ,
        &json!({"thought": "t", "thoughtNumber": 4, "totalThoughts": 4, "nextThoughtNeeded": true,
            "branchFromThought": 1, "branchId": "b", "sessionId": session})
        .to_string(),
    )
    .await;
    let mut boosters = Vec::new();
    for _ in 0..2 {
        let started = raw_call(&mut raw, next_id(), "start", &booster_start().to_string()).await;
        boosters.push(
            started["result"]["structuredContent"]["sessionId"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    raw.send_json(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}))
        .await;
    let tools = raw.answer(5).await["result"]["tools"]
        .as_array()
        .unwrap()
        .clone();

    // (literal, words the refusal must contain)
    let bad_integers: &[(&str, &str)] = &[
        ("-1", "Too small"),
        ("0", "Too small"),
        ("-0", "Too small"),
        ("9007199254740992", "Too big"),
        ("1.5", "expected int"),
        ("true", "expected number"),
        ("null", "Too small"),
        ("[2]", "expected number"),
        (r#""1e3""#, "expected int"),
        (r#""0x10""#, "expected number"),
        (r#""1.5""#, "expected int"),
        (r#""-1""#, "Too small"),
        (r#""""#, "Too small"),
        (r#""two""#, "expected number"),
    ];
    let good_integers = ["2", r#"" 2 ""#, r#""+2""#, r#""02""#, "2.0"];
    let bad_booleans = [
        r#""0""#,
        r#""no""#,
        r#""""#,
        r#""yes""#,
        r#""1""#,
        r#"" false ""#,
        "0",
        "1",
        "null",
    ];
    let false_booleans = [r#""false""#, r#""False""#, r#""FALSE""#, "false"];

    let (mut integer_fields, mut boolean_fields, mut refused) = (0, 0, 0);
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        let base = base_arguments(
            name,
            booster_session_for(name, &boosters[0], &boosters[1]).unwrap_or(&session),
        );
        let properties = tool["inputSchema"]["properties"].as_object().unwrap();
        for (field, schema) in properties {
            let mut refusals: Vec<(String, String)> = Vec::new();
            let mut accepted: Vec<String> = Vec::new();
            if is_integer(schema) {
                integer_fields += 1;
                // Every integer counts from 1: said once, in the server instructions
                // (context.rs checks it there), not as a `minimum` on each field; the
                // refusals below hold the server to it.
                assert!(
                    schema.get("minimum").is_none_or(|minimum| minimum == 1),
                    "{name}.{field}: every integer counts from 1"
                );
                for (literal, says) in bad_integers {
                    refusals.push((literal.to_string(), says.to_string()));
                }
                if let Some(maximum) = schema["maximum"].as_u64() {
                    refusals.push(((maximum + 1).to_string(), "Too big".into()));
                    accepted.push(maximum.to_string());
                }
                accepted.extend(good_integers.iter().map(|s| s.to_string()));
            } else if is_boolean(schema) {
                boolean_fields += 1;
                for literal in bad_booleans {
                    refusals.push((literal.to_string(), "expected boolean".into()));
                }
                accepted.extend(false_booleans.iter().map(|s| s.to_string()));
            } else {
                continue;
            }
            for (literal, says) in &refusals {
                let before = ledger_state(&mut raw, next_id()).await;
                let answer = raw_call(
                    &mut raw,
                    next_id(),
                    name,
                    &with_literal(&base, field, literal),
                )
                .await;
                let result = &answer["result"];
                assert_eq!(
                    result["isError"], true,
                    "{name}.{field}={literal} accepted: {answer}"
                );
                let message = refusal_message(result);
                let message = message.as_str();
                assert!(
                    message.starts_with(&format!(
                        "Input validation error: Invalid arguments for tool {name}: "
                    )) && message.contains(&format!("{field}: "))
                        && message.contains(says.as_str()),
                    "{name}.{field}={literal}: {message}"
                );
                assert!(message.contains("expected"), "says what to send: {message}");
                assert_eq!(
                    ledger_state(&mut raw, next_id()).await,
                    before,
                    "{name}.{field}={literal} wrote"
                );
                refused += 1;
            }
            for literal in &accepted {
                let answer = raw_call(
                    &mut raw,
                    next_id(),
                    name,
                    &with_literal(&base, field, literal),
                )
                .await;
                assert!(
                    passed_validation(&answer["result"]),
                    "{name}.{field}={literal}: {answer}"
                );
                if is_boolean(schema) && name == SEQ {
                    // "false" in any case is stored as false, never true.
                    let history = raw_call(
                        &mut raw,
                        next_id(),
                        "get_history",
                        &json!({"sessionId": session, "fromSeq": answer["result"]["structuredContent"]["eventSeq"]}).to_string(),
                    )
                    .await;
                    let payload = &history["result"]["structuredContent"]["events"][0]["payload"];
                    assert_eq!(
                        payload[snake_case(field)],
                        false,
                        "{field}={literal}: {payload}"
                    );
                }
            }
        }
        // Unknown fields are ignored.
        let mut extra = base.clone();
        extra.insert(
            "unknownField".into(),
            json!({"nested": [1, {"deep": true}]}),
        );
        let answer = raw_call(&mut raw, next_id(), name, &Value::Object(extra).to_string()).await;
        assert!(
            passed_validation(&answer["result"]),
            "{name} with an unknown field: {answer}"
        );
        // ... and the answer says so, in a block of its own after the answer.
        let notes = notes_of(&answer["result"]);
        assert!(
            notes.contains("ignored argument `unknownField` (this tool does not read it)"),
            "{name}: {answer}"
        );
        // The base arguments (aliases among them) are all read: no note.
        let answer = raw_call(
            &mut raw,
            next_id(),
            name,
            &Value::Object(base.clone()).to_string(),
        )
        .await;
        assert_eq!(
            notes_of(&answer["result"]),
            "",
            "{name} with its base arguments: {answer}"
        );
    }
    assert!(
        integer_fields >= 11 && boolean_fields >= 3,
        "{integer_fields} integer, {boolean_fields} boolean fields"
    );
    eprintln!(
        "{refused} refused calls over {integer_fields} integer and {boolean_fields} boolean fields"
    );
    // 1e400 cannot be held by any JSON number: a parse error naming the fix, for any field.
    let answer = {
        raw.send(&call_line(
            9999,
            SEQ,
            r#"{"thought":"t","thoughtNumber":1e400,"totalThoughts":1,"nextThoughtNeeded":false}"#,
        ))
        .await;
        raw.answer(9999).await
    };
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("integer fields take 1 to 9007199254740991")
    );
    for line in raw.finish().await {
        json_rpc(&line);
    }
}
