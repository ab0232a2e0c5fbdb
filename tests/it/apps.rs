//! MCP Apps (issue 43) negotiated over the built binary, as raw JSON-RPC so every byte
//! is seen: a client that declares `io.modelcontextprotocol/ui` with the app's MIME type
//! (in `initialize`, or per request under 2026-07-28, over stdio and HTTP) gets `_meta.ui`
//! on the tools whose answer is a session's state, the app-only `draw_session` tool, the
//! `ui://` resource listed and readable; every other client (no capabilities, another
//! extension, the extension without that MIME type) gets byte for byte what a client
//! without it gets, answers included. The app's drawing is the export's: its nodes are the
//! SVG export's, by `data-seq`; a draw with `afterSeq` waits for the next commit. The
//! headless-browser host is `tools/apps-check` (tests/services/apps.rs).

use crate::common::{WITH_EXPORT, bin, data_dir};
use crate::surface::{HttpServer, TOKEN, http_messages};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const APP_URI: &str = "ui://reasoning-ledger/session.html";
const MIME: &str = "text/html;profile=mcp-app";
const PATIENCE: Duration = Duration::from_secs(30);

/// Client capabilities declaring the extension with the app's MIME type.
fn with_apps() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME]}}})
}

/// Capabilities that must change nothing.
fn without_apps() -> Vec<Value> {
    vec![
        json!({}),
        json!({"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html"]}}}),
        json!({"extensions": {"io.modelcontextprotocol/ui": {}}}),
        json!({"extensions": {"io.example/other": {"mimeTypes": [MIME]}}}),
    ]
}

/// A server over stdio spoken to in raw lines.
struct Raw {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
}

impl Raw {
    fn spawn(dir: &Path, extra: &[&str]) -> Raw {
        let mut child = tokio::process::Command::new(bin())
            .arg("serve")
            .arg("--data-dir")
            .arg(dir)
            .args(extra)
            .env("DISABLE_THOUGHT_LOGGING", "true")
            .env_remove("REASONING_LEDGER_TOOLSETS")
            .env_remove("REASONING_LEDGER_STORE")
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Raw {
            _child: child,
            stdin,
            lines,
            next_id: 1,
        }
    }

    /// `initialize` with `capabilities`, then `notifications/initialized`.
    async fn initialize(dir: &Path, extra: &[&str], capabilities: Value) -> Raw {
        let mut raw = Raw::spawn(dir, extra);
        let answer = raw
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                       "clientInfo": {"name": "apps-test", "version": "1"}}),
            )
            .await;
        assert!(answer.get("result").is_some(), "{answer}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        raw
    }

    async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
    }

    /// Sends a request; returns its id.
    async fn start(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The next answer's line (notifications skipped), as sent.
    async fn answer_line(&mut self) -> String {
        loop {
            let line = tokio::time::timeout(PATIENCE, self.lines.next_line())
                .await
                .expect("an answer in time")
                .unwrap()
                .expect("the server is running");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id").is_some() {
                return line;
            }
        }
    }

    async fn request_line(&mut self, method: &str, params: Value) -> String {
        let id = self.start(method, params).await;
        let line = self.answer_line().await;
        let message: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(message["id"], json!(id), "{line}");
        line
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        serde_json::from_str(&self.request_line(method, params).await).unwrap()
    }
}

/// The 2026-07-28 request metadata with `capabilities`.
fn meta_2026(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "apps-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities
    })
}

fn thought(text: &str, n: u64, session: Option<&str>) -> Value {
    let mut arguments = json!({"thought": text, "thoughtNumber": n, "totalThoughts": 3,
                               "nextThoughtNeeded": true});
    if let Some(session) = session {
        arguments["sessionId"] = json!(session);
    }
    json!({"name": "sequentialthinking", "arguments": arguments})
}

/// The `data-seq` of every node (`<g class="node…`) of an SVG or HTML text, in order.
fn node_seqs(text: &str) -> Vec<u64> {
    text.match_indices("<g class=\"node")
        .filter(|(at, _)| matches!(text.as_bytes().get(at + 14), Some(b'"' | b' ')))
        .map(|(at, _)| {
            let rest = &text[at..];
            let start = rest.find("data-seq=\"").unwrap() + "data-seq=\"".len();
            let end = start + rest[start..].find('"').unwrap();
            rest[start..end].parse().unwrap()
        })
        .collect()
}

/// The listed tools' names and `_meta`.
fn metas(list: &Value) -> Vec<(String, Value)> {
    list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| {
            (
                tool["name"].as_str().unwrap().to_string(),
                tool.get("_meta").cloned().unwrap_or(Value::Null),
            )
        })
        .collect()
}

/// Bytes of the compact JSON of a `tools/list` answer's result.
fn listing_bytes(list: &Value) -> usize {
    serde_json::to_string(&list["result"]).unwrap().len()
}

#[tokio::test]
async fn only_a_client_declaring_the_extension_gets_the_app_in_the_initialize_generation() {
    let dir = data_dir();
    // The default toolsets, as most clients run them.
    let mut plain = Raw::initialize(dir.path(), &[], json!({})).await;
    let tools_plain = plain.request_line("tools/list", json!({})).await;
    let resources_plain = plain.request_line("resources/list", json!({})).await;
    let read_plain = plain
        .request_line("resources/read", json!({"uri": APP_URI}))
        .await;
    let draw_plain = plain
        .request_line(
            "tools/call",
            json!({"name": "draw_session", "arguments": {"sessionId": "x"}}),
        )
        .await;
    assert!(read_plain.contains("\"error\""), "{read_plain}");
    assert!(
        draw_plain.contains("Tool draw_session not found"),
        "{draw_plain}"
    );
    for capabilities in without_apps().into_iter().skip(1) {
        let mut other = Raw::initialize(dir.path(), &[], capabilities.clone()).await;
        assert_eq!(
            other.request_line("tools/list", json!({})).await,
            tools_plain,
            "{capabilities}"
        );
        assert_eq!(
            other.request_line("resources/list", json!({})).await,
            resources_plain
        );
        assert_eq!(
            other
                .request_line("resources/read", json!({"uri": APP_URI}))
                .await,
            read_plain
        );
    }

    let mut app = Raw::initialize(dir.path(), &[], with_apps()).await;
    let tools_app: Value = app.request("tools/list", json!({})).await;
    let tools_plain: Value = serde_json::from_str(&tools_plain).unwrap();
    let linked = json!({"ui": {"resourceUri": APP_URI}});
    let listed = metas(&tools_app);
    assert_eq!(listed.len(), metas(&tools_plain).len() + 1);
    for (name, meta) in &listed {
        let expected = match name.as_str() {
            "draw_session" => json!({"ui": {"resourceUri": APP_URI, "visibility": ["app"]}}),
            "sequentialthinking" | "think" | "get_history" => linked.clone(),
            "list_sessions" | "search_history" => Value::Null,
            other => panic!("unexpected tool {other}"),
        };
        assert_eq!(meta, &expected, "{name}");
    }
    // Apart from `_meta` and the app-only tool, the same tools byte for byte.
    let mut stripped = tools_app["result"]["tools"].as_array().unwrap().clone();
    stripped.retain(|tool| tool["name"] != "draw_session");
    for tool in &mut stripped {
        tool.as_object_mut().unwrap().remove("_meta");
    }
    assert_eq!(
        serde_json::to_string(&stripped).unwrap(),
        serde_json::to_string(&tools_plain["result"]["tools"]).unwrap()
    );
    let resources = app.request("resources/list", json!({})).await;
    let app_resource = resources["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["uri"] == APP_URI)
        .cloned()
        .expect("the app listed");
    assert_eq!(app_resource["mimeType"], MIME);
    let read = app.request("resources/read", json!({"uri": APP_URI})).await;
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["mimeType"], MIME);
    assert_eq!(contents["_meta"]["ui"]["prefersBorder"], json!(true));
    let document = contents["text"].as_str().unwrap();
    assert!(document.starts_with("<!DOCTYPE html>"));
    assert!(!document.contains("http://") && !document.contains("https://"));
    println!(
        "tools/list (default toolsets): {} bytes without the extension, {} with it; \
         the app resource: {} bytes",
        listing_bytes(&tools_plain),
        listing_bytes(&tools_app),
        document.len()
    );

    // A recording answer is the same for both clients (the session id and times aside).
    let first = app.request("tools/call", thought("first", 1, None)).await;
    let session = first["result"]["structuredContent"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let second = plain
        .request("tools/call", thought("second", 2, Some(&session)))
        .await;
    let third = app
        .request("tools/call", thought("third", 3, Some(&session)))
        .await;
    for answer in [&first, &second, &third] {
        assert!(answer["result"].get("_meta").is_none(), "{answer}");
        let keys: Vec<&String> = answer["result"]["structuredContent"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(
            keys,
            [
                "thoughtNumber",
                "totalThoughts",
                "nextThoughtNeeded",
                "branches",
                "thoughtHistoryLength",
                "sessionId",
                "eventSeq"
            ]
        );
    }

    // The app's drawing is the export's picture, node for node (export_session: the
    // export toolset, off by default).
    let mut exporter = Raw::initialize(dir.path(), &["--toolsets", WITH_EXPORT], json!({})).await;
    let drawn = app
        .request(
            "tools/call",
            json!({"name": "draw_session", "arguments": {"sessionId": session}}),
        )
        .await;
    let drawn = &drawn["result"]["structuredContent"];
    let svg = exporter
        .request(
            "tools/call",
            json!({"name": "export_session", "arguments": {"sessionId": session, "format": "svg"}}),
        )
        .await;
    let svg = svg["result"]["content"][0]["text"].as_str().unwrap();
    let html = drawn["html"].as_str().unwrap();
    assert_eq!(node_seqs(html), node_seqs(svg));
    assert!(!node_seqs(html).is_empty());
    assert_eq!(drawn["lastSeq"], json!(4));
    assert!(html.contains("id=\"replay\""));
    // At an earlier seq.
    let early = app
        .request(
            "tools/call",
            json!({"name": "draw_session", "arguments": {"sessionId": session, "atSeq": 2}}),
        )
        .await;
    assert_eq!(early["result"]["structuredContent"]["atSeq"], json!(2));
    let svg_early = exporter
        .request(
            "tools/call",
            json!({"name": "export_session",
                   "arguments": {"sessionId": session, "format": "svg", "atSeq": 2}}),
        )
        .await;
    assert_eq!(
        node_seqs(
            early["result"]["structuredContent"]["html"]
                .as_str()
                .unwrap()
        ),
        node_seqs(svg_early["result"]["content"][0]["text"].as_str().unwrap())
    );
    // An unknown session: an error answer.
    let unknown = app
        .request(
            "tools/call",
            json!({"name": "draw_session", "arguments": {"sessionId": "nope"}}),
        )
        .await;
    assert_eq!(unknown["result"]["isError"], json!(true));

    // Live: a draw after the last seq waits for the next commit.
    let waiting = app
        .start(
            "tools/call",
            json!({"name": "draw_session", "arguments": {"sessionId": session, "afterSeq": 4}}),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    plain
        .request("tools/call", thought("fourth", 4, Some(&session)))
        .await;
    let woken: Value = serde_json::from_str(&app.answer_line().await).unwrap();
    assert_eq!(woken["id"], json!(waiting));
    assert_eq!(woken["result"]["structuredContent"]["lastSeq"], json!(5));
    assert!(
        woken["result"]["structuredContent"]["html"]
            .as_str()
            .unwrap()
            .contains("fourth")
    );
}

#[tokio::test]
async fn per_request_capabilities_decide_under_2026_07_28_over_stdio_and_http() {
    let dir = data_dir();
    let mut stdio = Raw::spawn(dir.path(), &[]);
    let mut lists = Vec::new();
    for capabilities in without_apps() {
        let answer = stdio
            .request("tools/list", json!({"_meta": meta_2026(capabilities)}))
            .await;
        lists.push(serde_json::to_string(&answer["result"]).unwrap());
    }
    assert!(lists.windows(2).all(|pair| pair[0] == pair[1]));
    assert!(!lists[0].contains("_meta\":{\"ui\""));
    let app = stdio
        .request("tools/list", json!({"_meta": meta_2026(with_apps())}))
        .await;
    assert!(
        metas(&app).iter().any(
            |(name, meta)| name == "draw_session" && meta["ui"]["visibility"] == json!(["app"])
        )
    );
    let read = stdio
        .request(
            "resources/read",
            json!({"uri": APP_URI, "_meta": meta_2026(with_apps())}),
        )
        .await;
    assert_eq!(read["result"]["contents"][0]["mimeType"], MIME);
    let refused = stdio
        .request(
            "resources/read",
            json!({"uri": APP_URI, "_meta": meta_2026(json!({}))}),
        )
        .await;
    assert!(refused.get("error").is_some(), "{refused}");

    // Streamable HTTP, stateless: each request's own capabilities.
    let http_dir = data_dir();
    let server = HttpServer::start(http_dir.path(), &[]).await;
    let post = |method: &'static str, params: Value| {
        let url = server.url.clone();
        async move {
            let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
            let mut request = reqwest::Client::new()
                .post(url.as_str())
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("authorization", format!("Bearer {TOKEN}"))
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", method);
            if let Some(name) = params["name"].as_str() {
                request = request.header("mcp-name", name);
            }
            let body = request
                .body(message.to_string())
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            http_messages(&body).pop().expect("an answer")
        }
    };
    let plain = post("tools/list", json!({"_meta": meta_2026(json!({}))})).await;
    let app = post("tools/list", json!({"_meta": meta_2026(with_apps())})).await;
    assert!(metas(&plain).iter().all(|(_, meta)| meta.is_null()));
    assert_eq!(metas(&app).len(), metas(&plain).len() + 1);
    let started = post(
        "tools/call",
        json!({"name": "sequentialthinking", "_meta": meta_2026(with_apps()),
               "arguments": {"thought": "over http", "thoughtNumber": 1, "totalThoughts": 1,
                             "nextThoughtNeeded": false}}),
    )
    .await;
    let session = started["result"]["structuredContent"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let drawn = post(
        "tools/call",
        json!({"name": "draw_session", "_meta": meta_2026(with_apps()),
               "arguments": {"sessionId": session}}),
    )
    .await;
    assert!(
        drawn["result"]["structuredContent"]["html"]
            .as_str()
            .unwrap()
            .contains("over http")
    );
    let refused = post(
        "tools/call",
        json!({"name": "draw_session", "_meta": meta_2026(json!({})),
               "arguments": {"sessionId": session}}),
    )
    .await;
    assert!(refused.to_string().contains("not found"), "{refused}");
}
