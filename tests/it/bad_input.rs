//! Hostile and malformed input: wrong types, strings for numbers, oversized text, unknown
//! session ids, bad formats and seqs, and malformed JSON-RPC lines. After every error the
//! server must keep serving, so each test ends with (or interleaves) a successful call.

use crate::common::{self, Client, call, is_error, spawn, structured, text, thought};
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const SEQ: &str = "sequentialthinking";
const UNKNOWN_ULID: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

/// Calls `tool` and returns its validation error text (checked to be one).
async fn rejected(client: &Client, tool: &str, args: Value) -> String {
    let result = call(client, tool, args.clone()).await;
    assert!(
        is_error(&result),
        "{tool} {args} was accepted: {}",
        text(&result)
    );
    assert!(result.structured_content.is_none());
    let message = text(&result);
    assert!(
        message.starts_with(&format!(
            "Input validation error: Invalid arguments for tool {tool}: "
        )),
        "{tool}: {message}"
    );
    message
}

/// A call that must succeed, proving the server still serves.
async fn still_serving(client: &Client) {
    structured(&call(client, "list_sessions", json!({})).await);
}

/// The thought count of the only session, through `list_sessions`.
async fn sessions(client: &Client) -> Vec<Value> {
    let answer = structured(&call(client, "list_sessions", json!({})).await);
    answer["sessions"].as_array().unwrap().clone()
}

#[tokio::test]
async fn wrong_types_are_rejected_naming_field_and_type() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let cases = [
        (
            SEQ,
            "thought",
            json!(42),
            "expected string, received number 42",
        ),
        (
            SEQ,
            "thought",
            json!(["a"]),
            "expected string, received array",
        ),
        (
            SEQ,
            "thought",
            json!(null),
            "expected string, received null",
        ),
        (
            SEQ,
            "nextThoughtNeeded",
            json!({"v": true}),
            "expected boolean, received object",
        ),
        (
            SEQ,
            "nextThoughtNeeded",
            json!([true]),
            "expected boolean, received array",
        ),
        (
            SEQ,
            "thoughtNumber",
            json!(true),
            "expected number, received boolean true",
        ),
        (
            SEQ,
            "thoughtNumber",
            json!({"n": 1}),
            "expected number, received object",
        ),
        (
            SEQ,
            "totalThoughts",
            json!([3]),
            "expected number, received array",
        ),
        (
            SEQ,
            "isRevision",
            json!("yes"),
            r#"expected boolean, received string "yes""#,
        ),
        (
            SEQ,
            "revisesThought",
            json!("first"),
            r#"expected number, received string "first""#,
        ),
        (
            SEQ,
            "branchId",
            json!(false),
            "expected string, received boolean false",
        ),
        (
            SEQ,
            "sessionId",
            json!(12),
            "expected string, received number 12",
        ),
    ];
    for (tool, field, value, expected) in cases {
        let mut args = thought(1, 3, true, "t");
        args[field] = value.clone();
        let message = rejected(&client, tool, args).await;
        assert!(
            message.contains(&format!("{field}: Invalid input: {expected}")),
            "{field}={value}: {message}"
        );
        still_serving(&client).await;
    }
    let think = json!({"thread_purpose": 7, "thought": ["x"], "thought_index": "one"});
    let message = rejected(&client, "think", think).await;
    assert!(message.contains("thread_purpose: Invalid input: expected string, received number 7"));
    assert!(message.contains("thought: Invalid input: expected string, received array"));
    assert!(
        message.contains(r#"thought_index: Invalid input: expected number, received string "one""#)
    );

    let message = rejected(
        &client,
        "list_sessions",
        json!({"kind": 5, "limit": "many"}),
    )
    .await;
    assert!(
        message.contains("kind: Invalid input: expected string"),
        "{message}"
    );
    assert!(message.contains(r#"limit: Invalid input: expected number, received string "many""#));
    let message = rejected(&client, "list_sessions", json!({"kind": "poem"})).await;
    assert!(
        message.contains(r#"kind: unknown kind "poem""#),
        "{message}"
    );
    // A page larger than the most one page returns is clamped, not refused (no schema
    // `maximum` to pay for in every request).
    let listed = call(&client, "list_sessions", json!({"limit": 201})).await;
    assert!(!is_error(&listed), "{}", text(&listed));
    let message = rejected(&client, "list_sessions", json!({"limit": 0})).await;
    assert!(message.contains("limit: Too small"), "{message}");
    let message = rejected(&client, "search_history", json!({"query": 3})).await;
    assert!(message.contains("query: Invalid input: expected string, received number 3"));
    let message = rejected(&client, "search_history", json!({"query": "  "})).await;
    assert!(message.contains("query: Too small"), "{message}");
    let answer = structured(&call(&client, SEQ, thought(1, 1, false, "t")).await);
    let message = rejected(
        &client,
        "get_history",
        json!({"sessionId": answer["sessionId"], "kinds": [1, 2]}),
    )
    .await;
    assert!(
        message.contains("kinds: Invalid input: expected array of strings"),
        "{message}"
    );
    let page = call(
        &client,
        "get_history",
        json!({"sessionId": answer["sessionId"], "limit": 501}),
    )
    .await;
    assert!(!is_error(&page), "{}", text(&page));
    // Nothing rejected was recorded.
    let rows = sessions(&client).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["thoughts"], 1);
}

#[tokio::test]
async fn decimal_strings_are_accepted_where_numbers_belong() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let args = json!({"thought": "t", "thoughtNumber": "1", "totalThoughts": " 3 ", "nextThoughtNeeded": "true", "revisesThought": "1", "isRevision": "false"});
    let answer = structured(&call(&client, SEQ, args).await);
    assert_eq!(answer["totalThoughts"], 3);
    for n in 2..=3 {
        structured(&call(&client, SEQ, thought(n, 3, n < 3, "more")).await);
    }
    let session = answer["sessionId"].clone();
    let page = structured(
        &call(
            &client,
            "get_history",
            json!({"sessionId": session, "fromSeq": "2", "limit": " 2 "}),
        )
        .await,
    );
    let seqs: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [2, 3]);
    assert_eq!(page["nextFromSeq"], 4);
    let listed = structured(&call(&client, "list_sessions", json!({"limit": "1"})).await);
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1);
    let result = call(
        &client,
        "export_session",
        json!({"sessionId": session, "format": "json", "atSeq": "2"}),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    let tree: Value = serde_json::from_str(&text(&result)).unwrap();
    assert_eq!(tree["atSeq"], 2);
    // Strings that are not decimal integers are still errors.
    for bad in ["1e3", "0x10", "2.0", "two"] {
        let message = rejected(
            &client,
            "replay_session",
            json!({"sessionId": session, "atSeq": bad}),
        )
        .await;
        assert!(message.contains("atSeq: Invalid input"), "{bad}: {message}");
        assert!(message.contains(bad), "{bad}: {message}");
    }
    still_serving(&client).await;
}

#[tokio::test]
async fn ten_megabyte_thought_is_refused_as_too_big_and_nothing_is_stored() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let huge = "y".repeat(10 * 1024 * 1024);

    // As the first thought: no session is created.
    let message = rejected(&client, SEQ, thought(1, 2, true, &huge)).await;
    assert!(
        message.contains("thought: Too big"),
        "{}",
        &message[..message.len().min(500)]
    );
    assert!(message.len() < 1_000, "the error does not echo the thought");
    assert!(sessions(&client).await.is_empty(), "nothing stored");

    // In a running session: the session is unchanged.
    let first = structured(&call(&client, SEQ, thought(1, 3, true, "small")).await);
    let message = rejected(&client, SEQ, thought(2, 3, true, &huge)).await;
    assert!(message.contains("thought: Too big"));
    let history = structured(
        &call(
            &client,
            "get_history",
            json!({"sessionId": first["sessionId"]}),
        )
        .await,
    );
    assert_eq!(history["headSeq"], 2, "session_started and one thought");
    assert_eq!(history["events"].as_array().unwrap().len(), 2);
    let next = structured(&call(&client, SEQ, thought(2, 3, true, "small again")).await);
    assert_eq!(next["thoughtHistoryLength"], 2);
    assert_eq!(next["sessionId"], first["sessionId"]);

    // think refuses it too.
    let args = json!({"thread_purpose": "p", "thought": huge, "thought_index": 1});
    let message = rejected(&client, "think", args).await;
    assert!(message.contains("thought: Too big"));
    let rows = sessions(&client).await;
    assert_eq!(rows.len(), 1, "no think thread was created");
    assert_eq!(rows[0]["thoughts"], 2);
}

#[tokio::test]
async fn unknown_session_ids_are_named_by_every_tool_that_takes_one() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let thinking = structured(&call(&client, SEQ, thought(1, 1, false, "known")).await);
    for unknown in [UNKNOWN_ULID, "not-a-session", ""] {
        let calls = [
            (SEQ, "sessionId", {
                let mut a = thought(2, 2, false, "t");
                a["sessionId"] = json!(unknown);
                a
            }),
            (
                "think",
                "session_id",
                json!({"thread_purpose": "p", "thought": "t", "thought_index": 2, "session_id": unknown}),
            ),
            ("get_history", "sessionId", json!({"sessionId": unknown})),
            (
                "export_session",
                "sessionId",
                json!({"sessionId": unknown, "format": "json"}),
            ),
            (
                "replay_session",
                "sessionId",
                json!({"sessionId": unknown, "atSeq": 1}),
            ),
        ];
        for (tool, field, args) in calls {
            let message = rejected(&client, tool, args).await;
            assert!(
                message.contains(&format!("{field}: no session {unknown:?}")),
                "{tool} {unknown:?}: {message}"
            );
            still_serving(&client).await;
        }
    }
    // A session of the other kind is refused by name too.
    let args = json!({"thread_purpose": "p", "thought": "t", "thought_index": 2, "session_id": thinking["sessionId"]});
    let message = rejected(&client, "think", args).await;
    assert!(
        message.contains(thinking["sessionId"].as_str().unwrap())
            && message.contains("thinking session"),
        "{message}"
    );
    let rows = sessions(&client).await;
    assert_eq!(rows.len(), 1, "nothing was created by the rejected calls");
    assert_eq!(rows[0]["thoughts"], 1);
}

#[tokio::test]
async fn export_session_rejects_an_unknown_or_missing_format() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let answer = structured(&call(&client, SEQ, thought(1, 1, false, "t")).await);
    let session = answer["sessionId"].clone();
    for bad in ["pdf", "", "mermaid;drop"] {
        let message = rejected(
            &client,
            "export_session",
            json!({"sessionId": session, "format": bad}),
        )
        .await;
        assert!(
            message.contains(&format!("format: unknown format {bad:?}"))
                && message.contains("mermaid, markdown, json, jsonl, svg, html"),
            "{message}"
        );
    }
    let message = rejected(
        &client,
        "export_session",
        json!({"sessionId": session, "format": 3}),
    )
    .await;
    assert!(
        message.contains("format: Invalid input: expected string"),
        "{message}"
    );
    let message = rejected(&client, "export_session", json!({"sessionId": session})).await;
    assert!(message.contains("format: Invalid input: expected string, received undefined"));
    // Any case of a known name works.
    let result = call(
        &client,
        "export_session",
        json!({"sessionId": session, "format": "JSONL"}),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(text(&result).lines().count(), 2);
}

#[tokio::test]
async fn at_seq_out_of_range_is_rejected_by_export_and_replay() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    structured(&call(&client, SEQ, thought(1, 2, true, "a")).await);
    let answer = structured(&call(&client, SEQ, thought(2, 2, false, "b")).await);
    let session = answer["sessionId"].clone();
    assert_eq!(answer["eventSeq"], 3);
    for tool in ["export_session", "replay_session"] {
        for (at, expected) in [
            (json!(4), "atSeq: Too big"),
            (json!(1_000_000), "atSeq: Too big"),
            (json!(0), "atSeq: Too small"),
            (json!(-3), "atSeq: Too small"),
            (json!(9_007_199_254_740_992_u64), "atSeq: Too big"),
        ] {
            let message = rejected(
                &client,
                tool,
                json!({"sessionId": session, "format": "json", "atSeq": at}),
            )
            .await;
            assert!(message.contains(expected), "{tool} atSeq={at}: {message}");
        }
        let ok = call(
            &client,
            tool,
            json!({"sessionId": session, "format": "json", "atSeq": 3}),
        )
        .await;
        assert!(!is_error(&ok), "{tool}: {}", text(&ok));
    }
    let message = rejected(&client, "replay_session", json!({"sessionId": session})).await;
    assert!(message.contains("atSeq: Invalid input: expected number, received undefined"));
    let message = rejected(
        &client,
        "get_history",
        json!({"sessionId": session, "fromSeq": 0}),
    )
    .await;
    assert!(message.contains("fromSeq: Too small"), "{message}");
    still_serving(&client).await;
}

// ---- raw JSON-RPC ----

/// A server spoken to line by line, without an MCP client in between (also used by
/// `hostile`).
pub(crate) struct Raw {
    pub(crate) child: tokio::process::Child,
    pub(crate) stdin: tokio::process::ChildStdin,
    pub(crate) stdout: BufReader<tokio::process::ChildStdout>,
    /// Every line the server wrote so far.
    pub(crate) lines: Vec<Vec<u8>>,
}

impl Raw {
    pub(crate) async fn spawn(dir: &std::path::Path) -> Raw {
        Raw::spawn_with(dir, &[], Stdio::null()).await
    }

    /// Spawns with extra environment variables and stderr going to `stderr`.
    pub(crate) async fn spawn_with(
        dir: &std::path::Path,
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> Raw {
        let mut child = tokio::process::Command::new(common::bin())
            .arg("serve")
            .arg("--data-dir")
            .arg(dir)
            .env("DISABLE_THOUGHT_LOGGING", "true")
            .env_remove("REASONING_LEDGER_TOOLSETS")
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn server");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Raw {
            child,
            stdin,
            stdout,
            lines: Vec::new(),
        }
    }

    pub(crate) async fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).await.expect("write");
        self.stdin.write_all(b"\n").await.expect("write");
        self.stdin.flush().await.expect("flush");
    }

    pub(crate) async fn send_json(&mut self, value: Value) {
        self.send(value.to_string().as_bytes()).await;
    }

    /// Reads lines until the answer to `id` arrives, and returns it.
    pub(crate) async fn answer(&mut self, id: u64) -> Value {
        let wait = async {
            loop {
                let mut line = Vec::new();
                let n = self
                    .stdout
                    .read_until(b'\n', &mut line)
                    .await
                    .expect("read");
                assert!(n > 0, "server closed stdout before answering {id}");
                self.lines.push(line.clone());
                if let Ok(value) = serde_json::from_slice::<Value>(&line)
                    && value["id"] == id
                {
                    return value;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(15), wait)
            .await
            .unwrap_or_else(|_| panic!("no answer to request {id}"))
    }

    pub(crate) async fn initialize(&mut self) {
        self.send_json(json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        }))
        .await;
        let answer = self.answer(1).await;
        assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
        self.send_json(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// Closes stdin, reads what is left, and returns every line the server wrote.
    pub(crate) async fn finish(mut self) -> Vec<Vec<u8>> {
        drop(self.stdin);
        let rest = async {
            loop {
                let mut line = Vec::new();
                if self
                    .stdout
                    .read_until(b'\n', &mut line)
                    .await
                    .expect("read")
                    == 0
                {
                    break;
                }
                self.lines.push(line);
            }
        };
        tokio::time::timeout(Duration::from_secs(15), rest)
            .await
            .expect("server exits when stdin closes");
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        self.lines
    }
}

pub(crate) fn tool_call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

#[tokio::test]
async fn malformed_json_rpc_lines_are_survived_and_stdout_stays_pure_json_rpc() {
    let dir = common::data_dir();
    let mut raw = Raw::spawn(dir.path()).await;
    raw.initialize().await;
    raw.send(b"{not json").await;
    raw.send(b"[]").await;
    raw.send(b"\xff\xfe\x80 not utf-8 \xc3\x28").await;
    raw.send(br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sequentialthinking","arguments":"oops"}}"#)
        .await;
    raw.send(b"").await;
    raw.send(br#"{"jsonrpc":"2.0","id":55,"method":"no/such/method"}"#)
        .await;

    raw.send_json(tool_call(6, SEQ, thought(1, 1, false, "after the garbage")))
        .await;
    let answer = raw.answer(6).await;
    assert_eq!(answer["jsonrpc"], "2.0");
    let result = &answer["result"];
    assert_ne!(result["isError"], true, "{answer}");
    assert_eq!(
        result["structuredContent"]["thoughtHistoryLength"], 1,
        "{answer}"
    );

    // It keeps serving: a second call after everything.
    raw.send(b"{still not json").await;
    raw.send_json(tool_call(7, "list_sessions", json!({})))
        .await;
    let answer = raw.answer(7).await;
    assert_eq!(
        answer["result"]["structuredContent"]["sessions"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{answer}"
    );

    let lines = raw.finish().await;
    assert!(lines.len() >= 3);
    for line in &lines {
        let value: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
            panic!(
                "stdout line is not JSON ({e}): {}",
                String::from_utf8_lossy(line)
            )
        });
        assert_eq!(value["jsonrpc"], "2.0", "{value}");
    }
    // The bad requests with an id are answered with an error, never a result.
    let values: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    for id in [5, 55] {
        let answer = values
            .iter()
            .find(|v| v["id"] == id)
            .unwrap_or_else(|| panic!("request {id} was never answered"));
        assert!(answer["error"]["code"].is_i64(), "{answer}");
        assert!(answer.get("result").is_none(), "{answer}");
    }
    // `[]` is well-formed JSON but no message: an Invalid Request error with id null.
    assert!(
        values.iter().any(|v| v["error"]["code"] == -32600),
        "no Invalid Request answer"
    );
}

#[tokio::test]
async fn oversized_json_rpc_line_with_a_huge_thought_gets_the_size_error() {
    // A raw line bigger than the text limit but under the line limit: answered with the
    // clear size error, not dropped.
    let dir = common::data_dir();
    let mut raw = Raw::spawn(dir.path()).await;
    raw.initialize().await;
    let huge = "z".repeat(2 * 1024 * 1024);
    raw.send_json(tool_call(2, SEQ, thought(1, 1, false, &huge)))
        .await;
    let answer = raw.answer(2).await;
    assert_eq!(
        answer["result"]["isError"],
        true,
        "{}",
        &answer.to_string()[..300]
    );
    let message = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(message.contains("thought: Too big"), "{message}");
    raw.send_json(tool_call(3, SEQ, thought(1, 1, false, "small")))
        .await;
    let answer = raw.answer(3).await;
    assert_eq!(
        answer["result"]["structuredContent"]["thoughtHistoryLength"],
        1
    );
    raw.finish().await;
}

/// `get_history` refuses an event type no family writes and a branch the session lacks,
/// naming the value and what there is, where it used to answer an empty page (issue 42).
#[tokio::test]
async fn get_history_refuses_an_unknown_kind_or_branch() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let answer = structured(&call(&client, SEQ, thought(1, 3, true, "root")).await);
    let session = answer["sessionId"].clone();
    let mut branch = thought(2, 3, true, "side");
    branch["branchFromThought"] = json!(1);
    branch["branchId"] = json!("alt");
    branch["sessionId"] = session.clone();
    structured(&call(&client, SEQ, branch).await);

    let message = rejected(
        &client,
        "get_history",
        json!({"sessionId": session, "kinds": ["thought_recorded", "thoughts"]}),
    )
    .await;
    assert!(
        message.contains(r#"kinds: unknown event type "thoughts""#),
        "{message}"
    );
    assert!(message.contains("session_started"), "{message}");
    assert!(!message.contains(r#"unknown event type "thought_recorded""#));

    let message = rejected(
        &client,
        "get_history",
        json!({"sessionId": session, "branchId": "main"}),
    )
    .await;
    assert!(
        message.contains(r#"has no branch "main"; its branches are alt"#),
        "{message}"
    );

    // The branch it has, and a known type, still page.
    let page = structured(
        &call(
            &client,
            "get_history",
            json!({"sessionId": session, "branchId": "alt"}),
        )
        .await,
    );
    assert_eq!(page["events"].as_array().unwrap().len(), 1, "{page}");
    let page = structured(
        &call(
            &client,
            "get_history",
            json!({"sessionId": session, "kinds": ["session_started"]}),
        )
        .await,
    );
    assert_eq!(page["events"].as_array().unwrap().len(), 1, "{page}");
}
