//! Both protocol generations over raw stdio: `initialize` (2024-11-05 … 2025-11-25) and
//! `server/discover` with per-request metadata (2026-07-28).

use crate::common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

struct RawServer {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl RawServer {
    fn start(dir: &std::path::Path) -> Self {
        let mut child = tokio::process::Command::new(bin())
            .args(["serve", "--data-dir"])
            .arg(dir)
            .env("DISABLE_THOUGHT_LOGGING", "true")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        RawServer {
            child,
            stdin,
            lines,
        }
    }

    async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
    }

    /// The responses with `ids`, in that order, whatever order they come in (skipping
    /// notifications).
    async fn responses<const N: usize>(&mut self, ids: [u64; N]) -> [Value; N] {
        let mut found: [Option<Value>; N] = std::array::from_fn(|_| None);
        while found.iter().any(Option::is_none) {
            let line =
                tokio::time::timeout(std::time::Duration::from_secs(10), self.lines.next_line())
                    .await
                    .expect("server answered in time")
                    .unwrap()
                    .expect("server still running");
            let message: Value = serde_json::from_str(&line).expect("stdout carries JSON only");
            if let Some(at) = ids.iter().position(|id| message["id"] == json!(id)) {
                found[at] = Some(message);
            }
        }
        found.map(Option::unwrap)
    }

    /// The response with `id`, skipping notifications.
    async fn response(&mut self, id: u64) -> Value {
        let [message] = self.responses([id]).await;
        message
    }
}

fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

#[tokio::test]
async fn server_discover_then_a_tool_call_with_request_metadata() {
    let dir = data_dir();
    let mut server = RawServer::start(dir.path());
    server
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta_2026()}}))
        .await;
    let discovered = server.response(1).await;
    let versions = discovered["result"]["supportedVersions"]
        .as_array()
        .expect("supportedVersions");
    assert!(
        versions.contains(&json!("2026-07-28")) && versions.contains(&json!("2025-11-25")),
        "{discovered}"
    );
    assert_eq!(
        discovered["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        json!("reasoning-ledger"),
        "{discovered}"
    );

    server
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "_meta": meta_2026(),
            "name": "sequentialthinking",
            "arguments": {"thought": "new generation", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": false}
        }}))
        .await;
    let answer = server.response(2).await;
    assert_eq!(
        answer["result"]["structuredContent"]["thoughtHistoryLength"],
        json!(1),
        "{answer}"
    );
    server.child.kill().await.unwrap();
}

#[tokio::test]
async fn initialize_negotiates_older_protocol_versions() {
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let dir = data_dir();
        let mut server = RawServer::start(dir.path());
        server
            .send(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "it", "version": "1"}
                }}),
            )
            .await;
        let init = server.response(1).await;
        assert_eq!(init["result"]["protocolVersion"], json!(version), "{init}");
        assert!(
            init["result"]["instructions"]
                .as_str()
                .unwrap()
                .contains("sessionId")
        );
        server
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        server
            .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
            .await;
        let tools = server.response(2).await;
        assert!(
            tools["result"]["tools"].as_array().unwrap().len() >= 2,
            "{tools}"
        );
        server.child.kill().await.unwrap();
    }
}

/// A plain `tools/call` is answered by the stdio transport itself (`transport::direct`),
/// one with `_meta` by rmcp's request handling: the client must not tell them apart. The
/// same session is continued both ways, and a refused call and an unknown tool are
/// compared too.
#[tokio::test]
async fn a_plain_tool_call_and_one_with_meta_are_answered_alike() {
    let dir = data_dir();
    let mut server = RawServer::start(dir.path());
    server
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "it", "version": "1"}
            }}),
        )
        .await;
    server.response(1).await;
    server
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let thought = |number: u64, session: Option<&str>| {
        let mut arguments = json!({"thought": format!("step {number}"), "thoughtNumber": number,
            "totalThoughts": 4, "nextThoughtNeeded": true});
        if let Some(session) = session {
            arguments["sessionId"] = json!(session);
        }
        arguments
    };
    let call = |id: u64, arguments: Value, meta: bool| {
        let mut params = json!({"name": "sequentialthinking", "arguments": arguments});
        if meta {
            params["_meta"] = json!({"note": "takes rmcp's way"});
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    };
    server.send(call(2, thought(1, None), false)).await;
    let first = server.response(2).await;
    let session = first["result"]["structuredContent"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string();
    server.send(call(3, thought(2, Some(&session)), true)).await;
    let by_rmcp = server.response(3).await;
    server
        .send(call(4, thought(3, Some(&session)), false))
        .await;
    let direct = server.response(4).await;
    // The same answer but for the counts that moved on.
    let normalized = |mut answer: Value| {
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .expect("text");
        let text: Value = serde_json::from_str(text).expect("the text is the JSON");
        assert_eq!(text, answer["result"]["structuredContent"], "{answer}");
        answer["result"]["content"][0]["text"] = json!("");
        answer["id"] = json!(0);
        let content = &mut answer["result"]["structuredContent"];
        for field in ["thoughtNumber", "thoughtHistoryLength", "eventSeq"] {
            assert!(content[field].is_u64(), "{field}: {content}");
            content[field] = json!(0);
        }
        answer
    };
    assert_eq!(normalized(by_rmcp.clone()), normalized(direct.clone()));
    assert_eq!(by_rmcp["result"]["structuredContent"]["eventSeq"], json!(3));
    assert_eq!(direct["result"]["structuredContent"]["eventSeq"], json!(4));
    // A refused call and an unknown tool: the same error both ways.
    let bad =
        json!({"thought": "x", "thoughtNumber": 0, "totalThoughts": 1, "nextThoughtNeeded": true});
    server.send(call(5, bad.clone(), true)).await;
    server.send(call(6, bad, false)).await;
    // Answered in either order: the direct one may overtake rmcp's.
    let [refused_rmcp, refused_direct] = server.responses([5, 6]).await;
    assert_eq!(refused_rmcp["result"], refused_direct["result"]);
    assert_eq!(
        refused_direct["result"]["isError"],
        json!(true),
        "{refused_direct}"
    );
    let unknown = |id: u64, meta: bool| {
        let mut message = call(id, json!({}), meta);
        message["params"]["name"] = json!("no_such_tool");
        message
    };
    server.send(unknown(7, true)).await;
    server.send(unknown(8, false)).await;
    let [unknown_rmcp, unknown_direct] = server.responses([7, 8]).await;
    assert_eq!(unknown_rmcp["error"], unknown_direct["error"]);
    assert!(unknown_direct["error"]["code"].is_i64(), "{unknown_direct}");
    server.child.kill().await.unwrap();
}

#[test]
fn stdout_carries_only_json_rpc_even_with_trace_logging() {
    use std::io::Write;
    let dir = data_dir();
    let mut child = std::process::Command::new(bin())
        .args(["serve", "--data-dir"])
        .arg(dir.path())
        .env("RUST_LOG", "trace")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for message in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sequentialthinking", "arguments": {"thought": "traced", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": false}}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    for line in stdout.lines() {
        let message: Value = serde_json::from_str(line).expect("stdout line is JSON");
        assert_eq!(message["jsonrpc"], json!("2.0"));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("TRACE") && stderr.contains("Thought 1/1"),
        "{stderr}"
    );
}
