//! Issue 44: OpenTelemetry traces against an OTLP/HTTP receiver run here (protobuf
//! decoded with `opentelemetry-proto`, JSON with serde): exact span names, parentage from
//! a `traceparent` in `_meta`, attributes, a span event per recorded event, `error.type` on
//! a tool error, thought text only on opt-in, no exporter without the variables, a hung
//! collector costing no call, and `export --format otlp` sending the same ids twice.

use crate::common::{self, Client, object, structured, thought};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use rmcp::model::{CallToolRequestParams, MetaObject, RequestMetaObject};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Longest a span may take to reach the receiver (the export delay is half a second).
const ARRIVAL: Duration = Duration::from_secs(20);

/// A received span with its resource's `service.name`.
#[derive(Clone, Debug)]
struct Got {
    service: String,
    span: Span,
}

/// An OTLP/HTTP receiver on loopback: POST /v1/traces, protobuf or JSON.
struct Receiver {
    url: String,
    spans: Arc<Mutex<Vec<Got>>>,
    connections: Arc<AtomicUsize>,
}

fn string_value(kv: &KeyValue) -> Option<String> {
    match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        any_value::Value::BoolValue(b) => Some(b.to_string()),
        other => Some(format!("{other:?}")),
    }
}

fn attr(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(string_value)
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let content_type = head
        .lines()
        .find_map(|l| l.strip_prefix("content-type:"))
        .unwrap_or("")
        .trim()
        .to_string();
    let mut body = buf[header_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((content_type, body))
}

impl Receiver {
    /// A receiver that answers every export with 200; `hang`: one that accepts and never
    /// answers.
    async fn start(hang: bool) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let spans: Arc<Mutex<Vec<Got>>> = Arc::default();
        let connections: Arc<AtomicUsize> = Arc::default();
        let (kept, counted) = (spans.clone(), connections.clone());
        tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                if hang {
                    held.push(stream);
                    continue;
                }
                let kept = kept.clone();
                tokio::spawn(async move {
                    while let Some((content_type, body)) = read_request(&mut stream).await {
                        let request: ExportTraceServiceRequest = if content_type.contains("json") {
                            serde_json::from_slice(&body).expect("OTLP JSON")
                        } else {
                            prost::Message::decode(body.as_slice()).expect("OTLP protobuf")
                        };
                        let mut got = Vec::new();
                        for resource in request.resource_spans {
                            let service = resource
                                .resource
                                .as_ref()
                                .and_then(|r| attr(&r.attributes, "service.name"))
                                .unwrap_or_default();
                            for scope in resource.scope_spans {
                                for span in scope.spans {
                                    got.push(Got {
                                        service: service.clone(),
                                        span,
                                    });
                                }
                            }
                        }
                        kept.lock().unwrap().extend(got);
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Receiver {
            url,
            spans,
            connections,
        }
    }

    /// The spans received once `done` holds of them (panics after [`ARRIVAL`]).
    async fn wait_for(&self, what: &str, done: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        let deadline = Instant::now() + ARRIVAL;
        loop {
            let spans = self.spans.lock().unwrap().clone();
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not received in {ARRIVAL:?}; got {:#?}",
                spans
                    .iter()
                    .map(|g| g.span.name.clone())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn named<'a>(spans: &'a [Got], name: &str) -> Vec<&'a Got> {
    spans.iter().filter(|g| g.span.name == name).collect()
}

async fn call_with_meta(
    client: &Client,
    tool: &str,
    arguments: Value,
    traceparent: Option<&str>,
) -> rmcp::model::CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(object(arguments));
    if let Some(traceparent) = traceparent {
        let mut meta = MetaObject::new();
        meta.set_traceparent(traceparent);
        meta.set_tracestate("vendor=1");
        params.meta = Some(RequestMetaObject(meta));
    }
    client.call_tool(params).await.expect("tools/call answered")
}

async fn spawn_exporting(dir: &std::path::Path, url: &str, extra: &[(&str, &str)]) -> Client {
    let mut env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url),
        ("OTEL_SERVICE_NAME", "ledger-under-test"),
    ];
    env.extend_from_slice(extra);
    common::spawn_with(dir, &[], &env).await
}

const PARENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

#[tokio::test]
async fn every_tool_call_is_a_server_span_with_its_events_under_the_clients_traceparent() {
    let receiver = Receiver::start(false).await;
    let dir = common::data_dir();
    let client = spawn_exporting(dir.path(), &receiver.url, &[]).await;
    let first = call_with_meta(
        &client,
        "sequentialthinking",
        thought(1, 2, true, "the secret first thought"),
        None,
    )
    .await;
    let session = structured(&first)["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let traceparent = format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01");
    let mut second = thought(2, 2, false, "the secret second thought");
    second["sessionId"] = json!(session);
    call_with_meta(&client, "sequentialthinking", second, Some(&traceparent)).await;
    // A call the tool refuses: its result is an error.
    let refused = call_with_meta(
        &client,
        "sequentialthinking",
        json!({"thought": "x", "thoughtNumber": 0, "totalThoughts": 1, "nextThoughtNeeded": false}),
        None,
    )
    .await;
    assert_eq!(refused.is_error, Some(true));

    let spans = receiver
        .wait_for("three tool-call spans", |spans| {
            named(spans, "tools/call sequentialthinking").len() >= 3
        })
        .await;
    let calls = named(&spans, "tools/call sequentialthinking");
    assert_eq!(calls.len(), 3, "one span per call");
    for got in &calls {
        let span = &got.span;
        assert_eq!(got.service, "ledger-under-test");
        assert_eq!(span.kind, 2, "SERVER");
        let a = |key| attr(&span.attributes, key);
        assert_eq!(a("mcp.method.name").as_deref(), Some("tools/call"));
        assert_eq!(a("gen_ai.tool.name").as_deref(), Some("sequentialthinking"));
        assert_eq!(a("gen_ai.operation.name").as_deref(), Some("execute_tool"));
        assert_eq!(a("network.transport").as_deref(), Some("pipe"));
        assert!(a("jsonrpc.request.id").is_some(), "{span:?}");
        assert!(a("mcp.protocol.version").is_some(), "{span:?}");
    }
    // In call order: the spans' start times.
    let mut calls = calls;
    calls.sort_by_key(|g| g.span.start_time_unix_nano);
    let (one, two, three) = (&calls[0].span, &calls[1].span, &calls[2].span);

    // The first call: a new trace, no parent; its events are session_started and the
    // thought, each with seq, kind, id and hash, and no text.
    assert!(one.parent_span_id.is_empty(), "{one:?}");
    assert_ne!(hex(&one.trace_id), PARENT_TRACE);
    assert_eq!(
        attr(&one.attributes, "gen_ai.conversation.id").as_deref(),
        Some(session.as_str())
    );
    let kinds: Vec<&str> = one.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert_eq!(kinds[0], "session_started");
    for (seq, event) in one.events.iter().enumerate() {
        let a = |key| attr(&event.attributes, key);
        assert_eq!(a("reasoning_ledger.event.seq"), Some((seq + 1).to_string()));
        assert_eq!(
            a("reasoning_ledger.event.kind").as_deref(),
            Some(event.name.as_str())
        );
        assert_eq!(a("reasoning_ledger.event.id").map(|id| id.len()), Some(26));
        assert_eq!(a("reasoning_ledger.event.hash").map(|h| h.len()), Some(64));
        assert_eq!(
            a("reasoning_ledger.event.text"),
            None,
            "no text without opt-in"
        );
    }

    // The second: under the client's traceparent.
    assert_eq!(hex(&two.trace_id), PARENT_TRACE);
    assert_eq!(hex(&two.parent_span_id), PARENT_SPAN);
    assert_eq!(two.trace_state, "vendor=1");
    assert_eq!(two.events.len(), 1);
    assert_eq!(
        attr(&two.events[0].attributes, "reasoning_ledger.event.seq").as_deref(),
        Some("3")
    );

    // The refused call: error.type, nothing recorded.
    assert_eq!(
        attr(&three.attributes, "error.type").as_deref(),
        Some("tool_error")
    );
    assert!(three.events.is_empty());

    // Thought text appears nowhere in any span without the opt-in.
    let everything = format!("{spans:?}");
    assert!(!everything.contains("secret"), "text leaked into a span");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn thought_text_is_in_spans_only_when_the_user_opts_in() {
    let receiver = Receiver::start(false).await;
    let dir = common::data_dir();
    let client = spawn_exporting(
        dir.path(),
        &receiver.url,
        &[
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    )
    .await;
    call_with_meta(
        &client,
        "sequentialthinking",
        thought(1, 1, false, "a thought the user shares"),
        None,
    )
    .await;
    let spans = receiver
        .wait_for("a tool-call span", |spans| {
            !named(spans, "tools/call sequentialthinking").is_empty()
        })
        .await;
    let span = &named(&spans, "tools/call sequentialthinking")[0].span;
    let texts: Vec<String> = span
        .events
        .iter()
        .filter_map(|e| attr(&e.attributes, "reasoning_ledger.event.text"))
        .collect();
    assert!(
        texts.iter().any(|t| t == "a thought the user shares"),
        "{texts:?}"
    );
    client.cancel().await.unwrap();
}

/// The names of the threads of process `pid`.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_string())
        .collect()
}

/// `serve` on stdio by hand (its pid known), answering one tool call.
async fn serve_one_call(dir: &std::path::Path, env: &[(&str, &str)]) -> Vec<String> {
    let mut command = tokio::process::Command::new(common::bin());
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .env("DISABLE_THOUGHT_LOGGING", "true")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "sequentialthinking", "arguments": thought(1, 1, false, "t"),
        "_meta": {"traceparent": format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01")}}});
    for line in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call,
    ] {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut answered = 0;
    while answered < 2 {
        let line = lines.next_line().await.unwrap().expect("an answer");
        if line.contains("\"id\":") {
            answered += 1;
        }
    }
    let names = thread_names(child.id().unwrap());
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server stops once stdin closes")
        .unwrap();
    assert!(status.success());
    names
}

#[tokio::test]
async fn without_the_variables_nothing_starts_and_with_them_one_exporter_thread_does() {
    let receiver = Receiver::start(false).await;
    let dir = common::data_dir();
    let threads = serve_one_call(dir.path(), &[]).await;
    assert!(
        !threads.iter().any(|t| t.starts_with("OpenTelemetry")),
        "{threads:?}"
    );
    // Disabled by OTEL_SDK_DISABLED, endpoint or not.
    let threads = serve_one_call(
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
            ("OTEL_SDK_DISABLED", "true"),
        ],
    )
    .await;
    assert!(
        !threads.iter().any(|t| t.starts_with("OpenTelemetry")),
        "{threads:?}"
    );
    assert_eq!(receiver.connections.load(Ordering::SeqCst), 0);
    let threads = serve_one_call(
        dir.path(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)],
    )
    .await;
    assert!(
        threads.iter().any(|t| t.starts_with("OpenTelemetry")),
        "{threads:?}"
    );
    // The span of the call was flushed at shutdown.
    receiver
        .wait_for("the flushed span", |spans| {
            !named(spans, "tools/call sequentialthinking").is_empty()
        })
        .await;
}

#[tokio::test]
async fn a_hung_collector_fails_and_stalls_no_call() {
    let hung = Receiver::start(true).await;
    let dir = common::data_dir();
    let client = spawn_exporting(dir.path(), &hung.url, &[]).await;
    let mut session: Option<String> = None;
    for n in 1..=40u64 {
        let mut arguments = thought(n, 40, n < 40, "thinking while the collector hangs");
        if let Some(session) = &session {
            arguments["sessionId"] = json!(session);
        }
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            call_with_meta(&client, "sequentialthinking", arguments, None),
        )
        .await
        .expect("a call does not wait on the collector");
        assert_ne!(answer.is_error, Some(true), "{answer:?}");
        session = structured(&answer)["sessionId"]
            .as_str()
            .map(str::to_string);
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn export_otlp_sends_a_session_as_one_trace_with_the_same_ids_every_time() {
    let dir = common::data_dir();
    let client = common::spawn(dir.path()).await;
    let first = common::call(&client, "sequentialthinking", thought(1, 2, true, "one")).await;
    let session = structured(&first)["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut second = thought(2, 2, false, "two");
    second["sessionId"] = json!(session);
    common::call(&client, "sequentialthinking", second).await;
    client.cancel().await.unwrap();

    // No endpoint: a clear error, nothing sent.
    let receiver = Receiver::start(false).await;
    let output = common::cli(dir.path(), &["export", &session, "--format", "otlp"]);
    assert!(!output.status.success());
    assert!(
        common::stderr(&output).contains("OTEL_EXPORTER_OTLP_ENDPOINT"),
        "{}",
        common::stderr(&output)
    );
    assert_eq!(receiver.connections.load(Ordering::SeqCst), 0);

    let (url, data, id) = (
        receiver.url.clone(),
        dir.path().to_path_buf(),
        session.clone(),
    );
    let export = move |all: bool| {
        let (dir, session, url) = (&data, &id, &url);
        let mut command = std::process::Command::new(common::bin());
        command
            .arg("--data-dir")
            .arg(dir)
            .arg("export")
            .args(if all {
                vec!["--all"]
            } else {
                vec![session.as_str()]
            })
            .args(["--format", "otlp"])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", url)
            .env_remove("REASONING_LEDGER_STORE");
        let output = command.output().unwrap();
        assert!(output.status.success(), "{}", common::stderr(&output));
        common::stdout(&output)
    };
    let printed = tokio::task::spawn_blocking({
        let export = export.clone();
        move || export(false)
    })
    .await
    .unwrap();
    let once = receiver
        .wait_for("the first export", |s| !s.is_empty())
        .await;
    let ids = |spans: &[Got]| -> BTreeSet<(String, String, String, String)> {
        spans
            .iter()
            .map(|g| {
                (
                    hex(&g.span.trace_id),
                    hex(&g.span.span_id),
                    hex(&g.span.parent_span_id),
                    g.span.name.clone(),
                )
            })
            .collect()
    };
    let first_ids = ids(&once);
    // One trace: a root `session thinking`, one span per call under it.
    let traces: BTreeSet<&String> = first_ids.iter().map(|(t, ..)| t).collect();
    assert_eq!(traces.len(), 1);
    assert!(
        printed.contains(traces.iter().next().unwrap().as_str()),
        "{printed}"
    );
    let root = once
        .iter()
        .find(|g| g.span.parent_span_id.is_empty())
        .expect("a root span");
    assert_eq!(root.span.name, "session thinking");
    assert_eq!(
        attr(&root.span.attributes, "gen_ai.conversation.id").as_deref(),
        Some(session.as_str())
    );
    let calls = named(&once, "tools/call sequentialthinking");
    assert_eq!(calls.len(), 2, "{first_ids:?}");
    assert!(
        calls
            .iter()
            .all(|g| g.span.parent_span_id == root.span.span_id)
    );
    let events: usize = calls.iter().map(|g| g.span.events.len()).sum();
    assert_eq!(events, 3, "session_started and two thoughts");

    let count = once.len();
    tokio::task::spawn_blocking(move || export(true))
        .await
        .unwrap();
    let twice = receiver
        .wait_for("the second export", |s| s.len() >= 2 * count)
        .await;
    assert_eq!(ids(&twice[count..]), first_ids, "the same ids again");
}

#[tokio::test]
async fn a_model_call_is_a_chat_client_span_under_its_tool_call() {
    let llm =
        crate::llm::LlmServer::start(vec![crate::llm::Reply::completion("Caches go stale.")]).await;
    let receiver = Receiver::start(false).await;
    let dir = common::data_dir();
    let client = common::spawn_agent(
        dir.path(),
        &[
            ("REASONING_LEDGER_LLM_BASE_URL", &llm.base_url),
            ("REASONING_LEDGER_LLM_MODEL", "loopback-model"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url),
        ],
        None,
    )
    .await;
    common::call(
        &client,
        "chat_agent",
        json!({"input_text": "Summarise: caches go stale.", "session_id": "traced"}),
    )
    .await;
    let spans = receiver
        .wait_for("the chat span", |spans| {
            !named(spans, "chat loopback-model").is_empty()
                && !named(spans, "tools/call chat_agent").is_empty()
        })
        .await;
    let chat = &named(&spans, "chat loopback-model")[0].span;
    let tool = &named(&spans, "tools/call chat_agent")[0].span;
    assert_eq!(chat.kind, 3, "CLIENT");
    assert_eq!(chat.trace_id, tool.trace_id);
    assert_eq!(chat.parent_span_id, tool.span_id);
    let a = |key| attr(&chat.attributes, key);
    assert_eq!(a("gen_ai.request.model").as_deref(), Some("loopback-model"));
    assert_eq!(a("gen_ai.usage.input_tokens").as_deref(), Some("12"));
    assert_eq!(a("gen_ai.usage.output_tokens").as_deref(), Some("7"));
    assert!(a("gen_ai.provider.name").is_some());
    assert_eq!(
        a("gen_ai.input.messages"),
        None,
        "no content without opt-in"
    );
    assert!(
        tool.events.iter().any(|e| e.name == "model_call_recorded"),
        "{:?}",
        tool.events
    );
    client.cancel().await.unwrap();
}

/// Every request is a SERVER span, not only a tool call (issue 44): `initialize`,
/// `tools/list`, `prompts/list`, `prompts/get NAME` (with `gen_ai.prompt.name`),
/// `resources/list`, `resources/read` and `completion/complete`; a refused request's
/// `error.type` is its JSON-RPC error code.
#[tokio::test]
async fn every_request_is_a_server_span_and_a_refused_one_says_its_code() {
    use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
    let receiver = Receiver::start(false).await;
    let dir = common::data_dir();
    let client = spawn_exporting(dir.path(), &receiver.url, &[]).await;
    client.list_tools(None).await.expect("tools/list");
    client.list_prompts(None).await.expect("prompts/list");
    client.list_resources(None).await.expect("resources/list");
    client
        .read_resource(ReadResourceRequestParams::new("ledger://sessions"))
        .await
        .expect("resources/read");
    client
        .get_prompt(GetPromptRequestParams::new("no-such-prompt"))
        .await
        .expect_err("an unknown prompt is refused");
    let spans = receiver
        .wait_for("a span per request", |spans| {
            [
                "initialize",
                "tools/list",
                "prompts/list",
                "resources/list",
                "resources/read",
            ]
            .iter()
            .all(|name| !named(spans, name).is_empty())
                && !named(spans, "prompts/get no-such-prompt").is_empty()
        })
        .await;
    for name in [
        "initialize",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/read",
        "prompts/get no-such-prompt",
    ] {
        let span = &named(&spans, name)[0].span;
        assert_eq!(span.kind, 2, "{name}: a SERVER span");
        let method = name.split(' ').next().unwrap();
        assert_eq!(
            attr(&span.attributes, "mcp.method.name").as_deref(),
            Some(method),
            "{name}"
        );
        assert_eq!(
            attr(&span.attributes, "network.transport").as_deref(),
            Some("pipe")
        );
        let refused = name.starts_with("prompts/get");
        assert_eq!(
            attr(&span.attributes, "error.type").as_deref(),
            refused.then_some("-32602"),
            "{name}"
        );
    }
    let prompt = &named(&spans, "prompts/get no-such-prompt")[0].span;
    assert_eq!(
        attr(&prompt.attributes, "gen_ai.prompt.name").as_deref(),
        Some("no-such-prompt")
    );
}

/// The reasoning's own steps are spans (issue 44): each deep-planning event a `plan
/// {phase}` INTERNAL span under its call's span, and the booster's rounds and applied
/// steps `booster round N` / `booster step N`, with counts and scores but no text.
#[tokio::test]
async fn plan_phases_and_booster_rounds_are_spans_under_their_calls() {
    let receiver = Receiver::start(false).await;
    let dir = common::data_dir();
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
        ("OTEL_SERVICE_NAME", "ledger-under-test"),
    ];
    let client = common::spawn_with(dir.path(), &["--toolsets", "planning,booster"], &env).await;
    call_with_meta(
        &client,
        "deep_planning",
        json!({"phase": "init", "problem": "the secret problem"}),
        None,
    )
    .await;
    call_with_meta(
        &client,
        "deep_planning",
        json!({"phase": "clarify", "question": "the secret question", "answer": "yes"}),
        None,
    )
    .await;
    let solved = call_with_meta(
        &client,
        "solve",
        json!({"task": "the secret task", "iterations": 2}),
        None,
    )
    .await;
    assert_ne!(solved.is_error, Some(true), "{solved:?}");
    let spans = receiver
        .wait_for("the steps' spans", |spans| {
            !named(spans, "plan clarify").is_empty() && !named(spans, "booster step 2").is_empty()
        })
        .await;
    let parent_of = |name: &str| {
        let step = &named(&spans, name)[0].span;
        assert_eq!(step.kind, 1, "{name}: an INTERNAL span");
        spans
            .iter()
            .find(|g| g.span.span_id == step.parent_span_id)
            .unwrap_or_else(|| panic!("{name}: its parent was not sent"))
            .span
            .name
            .clone()
    };
    assert_eq!(parent_of("plan init"), "tools/call deep_planning");
    assert_eq!(parent_of("plan clarify"), "tools/call deep_planning");
    assert_eq!(parent_of("booster round 1"), "tools/call solve");
    assert_eq!(parent_of("booster step 1"), "tools/call solve");
    let clarify = &named(&spans, "plan clarify")[0].span;
    assert_eq!(
        attr(&clarify.attributes, "reasoning_ledger.plan.phase").as_deref(),
        Some("clarify")
    );
    let round = &named(&spans, "booster round 1")[0].span;
    assert_eq!(
        attr(&round.attributes, "reasoning_ledger.booster.source").as_deref(),
        Some("heuristic")
    );
    assert!(
        round
            .attributes
            .iter()
            .any(|kv| kv.key == "reasoning_ledger.booster.candidates"),
        "{round:?}"
    );
    // No text a person wrote, by default.
    let all = format!("{spans:?}");
    assert!(!all.contains("secret"), "text reached a span");
}
