//! Traces in a real trace UI (issue 44): Arize Phoenix from PyPI, installed and started by
//! `tools/phoenix/run` (a cached venv; loud when it cannot start, never skipped), receives
//! the spans of `demo` as it runs, of a call made under a client's `traceparent`, and of
//! every past session sent by `export --all --format otlp`; the test reads them back
//! through Phoenix's REST API (`/v1/projects/{name}/spans`).

use crate::common::{self, cli, data_dir, stderr};
use rmcp::model::{CallToolRequestParams, MetaObject, RequestMetaObject};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long Phoenix may take to install (the first time) and start.
const START_WAIT: Duration = Duration::from_secs(600);
/// How long spans may take to show in its API after the process that sent them ended.
const SPANS_WAIT: Duration = Duration::from_secs(60);

/// The client's trace and span the traced call is made under.
const PARENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/phoenix/run")
}

/// `tools/phoenix/run serve DIR 0` once it said "ready URL"; stopped when dropped.
struct Phoenix {
    _server: tokio::process::Child,
    _dir: tempfile::TempDir,
    url: String,
}

impl Phoenix {
    async fn start() -> Phoenix {
        let dir = tempfile::tempdir().unwrap();
        let mut server = tokio::process::Command::new(script())
            .arg("serve")
            .arg(dir.path())
            .arg("0")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{} could not start: {e}", script().display()));
        let started = Instant::now();
        let url = common::ready_url(&mut server, START_WAIT, "tools/phoenix/run serve").await;
        eprintln!("phoenix up at {url} after {:?}", started.elapsed());
        Phoenix {
            _server: server,
            _dir: dir,
            url,
        }
    }

    /// Every span of `project` Phoenix holds (its REST API, page by page).
    async fn spans(&self, project: &str) -> Vec<Value> {
        let client = reqwest::Client::new();
        let mut spans = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{}/v1/projects/{project}/spans?limit=1000", self.url);
            if let Some(cursor) = &cursor {
                url.push_str(&format!("&cursor={cursor}"));
            }
            let response = client.get(&url).send().await.expect("phoenix answers");
            if response.status() == 404 {
                return spans;
            }
            let page: Value = response.json().await.expect("a JSON page of spans");
            spans.extend(page["data"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return spans,
            }
        }
    }

    /// The spans of `project` once `done` holds of them, or a failure naming `what`.
    async fn wait_for(
        &self,
        project: &str,
        what: &str,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let spans = self.spans(project).await;
            if done(&spans) {
                return spans;
            }
            assert!(
                started.elapsed() < SPANS_WAIT,
                "{what}: not in phoenix within {SPANS_WAIT:?}; it holds {} span(s) of {project}: {}",
                spans.len(),
                names(&spans).join(", ")
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

fn names(spans: &[Value]) -> Vec<String> {
    spans
        .iter()
        .map(|s| s["name"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn trace_id(span: &Value) -> &str {
    span["context"]["trace_id"].as_str().unwrap_or("")
}

/// The environment that sends a process's spans to `phoenix`, into `project`.
fn exporting(phoenix: &Phoenix, project: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url.clone()),
        ("OTEL_SERVICE_NAME", "reasoning-ledger".to_string()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("openinference.project.name={project}"),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_a_traced_call_and_past_sessions_reach_phoenix() {
    // reqwest is built without a TLS provider of its own: every client needs one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let phoenix = Phoenix::start().await;
    let dir = data_dir();

    // `demo` with export on: its server's calls as they happen.
    let live = exporting(&phoenix, "ledger-live");
    let mut demo = std::process::Command::new(common::bin());
    demo.arg("--data-dir").arg(dir.path()).arg("demo");
    for (name, value) in &live {
        demo.env(name, value);
    }
    let demo = demo.output().unwrap();
    assert!(demo.status.success(), "{}", stderr(&demo));
    let spans = phoenix
        // Phoenix stores what it receives in batches: wait for the whole demo (its
        // thinking and its planning), not for the first ten calls.
        .wait_for("ledger-live", "the demo's tool calls", |spans| {
            let calls: Vec<&str> = spans
                .iter()
                .filter_map(|s| s["name"].as_str())
                .filter(|n| n.starts_with("tools/call "))
                .collect();
            calls.len() >= 10
                && calls.contains(&"tools/call sequentialthinking")
                && calls.contains(&"tools/call deep_planning")
        })
        .await;
    let calls: Vec<&Value> = spans
        .iter()
        .filter(|s| {
            s["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("tools/call "))
        })
        .collect();
    for call in &calls {
        let attributes = &call["attributes"];
        assert_eq!(attributes["mcp.method.name"], "tools/call", "{call}");
        assert_eq!(attributes["network.transport"], "pipe", "{call}");
        assert_eq!(
            attributes["gen_ai.operation.name"], "execute_tool",
            "{call}"
        );
        // Phoenix reads `execute_tool` as a tool span.
        assert_eq!(call["span_kind"], "TOOL", "{call}");
        let tool = attributes["gen_ai.tool.name"].as_str().unwrap();
        assert_eq!(call["name"], format!("tools/call {tool}"));
        // A call that recorded something names its session, and carries its events.
        if tool != "export_session" {
            assert!(attributes["gen_ai.conversation.id"].is_string(), "{call}");
            assert!(!call["events"].as_array().unwrap().is_empty(), "{call}");
        }
    }
    let tools: BTreeSet<&str> = calls
        .iter()
        .filter_map(|c| c["attributes"]["gen_ai.tool.name"].as_str())
        .collect();
    assert!(
        tools.contains("sequentialthinking") && tools.contains("deep_planning"),
        "{tools:?}"
    );

    // A call under the client's trace: its span is the child of the client's span.
    let env: Vec<(&str, &str)> = live.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let client = common::spawn_with(dir.path(), &[], &env).await;
    let mut params = CallToolRequestParams::new("sequentialthinking").with_arguments(
        json!({"thought": "traced from the client", "thoughtNumber": 1, "totalThoughts": 1,
               "nextThoughtNeeded": false})
        .as_object()
        .unwrap()
        .clone(),
    );
    let mut meta = MetaObject::new();
    meta.set_traceparent(format!("00-{PARENT_TRACE}-{PARENT_SPAN}-01"));
    params.meta = Some(RequestMetaObject(meta));
    client.call_tool(params).await.expect("tools/call answered");
    client.cancel().await.ok();
    let spans = phoenix
        .wait_for(
            "ledger-live",
            "the call under the client's traceparent",
            |spans| spans.iter().any(|s| trace_id(s) == PARENT_TRACE),
        )
        .await;
    let traced: Vec<&Value> = spans
        .iter()
        .filter(|s| trace_id(s) == PARENT_TRACE)
        .collect();
    assert_eq!(traced.len(), 1, "{traced:?}");
    assert_eq!(traced[0]["name"], "tools/call sequentialthinking");
    assert_eq!(traced[0]["parent_id"], PARENT_SPAN, "{}", traced[0]);

    // Every past session as one trace: a root `session {kind}` span, the calls under it.
    let listed: Value = serde_json::from_str(&common::stdout(&cli(
        dir.path(),
        &["sessions", "--json", "--limit", "1000"],
    )))
    .unwrap();
    let sessions = listed["sessions"].as_array().unwrap().len();
    let past = exporting(&phoenix, "ledger-past");
    let mut export = std::process::Command::new(common::bin());
    export
        .arg("--data-dir")
        .arg(dir.path())
        .args(["export", "--all", "--format", "otlp"]);
    for (name, value) in &past {
        export.env(name, value);
    }
    let export = export.output().unwrap();
    assert!(export.status.success(), "{}", stderr(&export));
    // "sent N span(s) of M session(s)": wait for all N, not for the roots alone.
    let sent: usize = stderr(&export)
        .split_whitespace()
        .skip_while(|word| *word != "sent")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no span count in: {}", stderr(&export)));
    let spans = phoenix
        .wait_for("ledger-past", "every span the export sent", |spans| {
            spans.len() >= sent
        })
        .await;
    let mut traces: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for span in &spans {
        traces.entry(trace_id(span)).or_default().push(span);
    }
    assert_eq!(traces.len(), sessions, "{:?}", names(&spans));
    for (trace, spans) in &traces {
        let roots: Vec<&&Value> = spans.iter().filter(|s| s["parent_id"].is_null()).collect();
        assert_eq!(roots.len(), 1, "trace {trace}: {:?}", roots);
        assert!(
            roots[0]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("session ")),
            "{}",
            roots[0]
        );
        // The calls under the session's span; the reasoning's steps (`plan explore`,
        // `booster round 1`) under the span of the events they were committed with.
        let root_id = roots[0]["context"]["span_id"].as_str().unwrap();
        let parent_name = |span: &Value| {
            spans
                .iter()
                .find(|p| p["context"]["span_id"] == span["parent_id"])
                .and_then(|p| p["name"].as_str())
                .unwrap_or("(not in the trace)")
                .to_string()
        };
        for span in spans.iter().filter(|s| !s["parent_id"].is_null()) {
            let name = span["name"].as_str().unwrap();
            if name.starts_with("plan ") || name.starts_with("booster ") {
                let parent = parent_name(span);
                assert!(
                    span["parent_id"] != root_id && parent != "(not in the trace)",
                    "trace {trace}: {name} under {parent}"
                );
            } else {
                assert_eq!(span["parent_id"], root_id, "trace {trace}: {name}");
            }
        }
    }
    let steps: Vec<String> = spans
        .iter()
        .filter_map(|s| s["name"].as_str())
        .filter(|n| n.starts_with("plan ") || n.starts_with("booster "))
        .map(str::to_string)
        .collect();
    assert!(
        steps.iter().any(|n| n == "plan done") && steps.iter().any(|n| n == "booster round 1"),
        "the reasoning's steps: {steps:?}"
    );
    eprintln!(
        "phoenix: {} live call span(s) of the demo, the traced call under {PARENT_TRACE}, {} past session trace(s)",
        calls.len(),
        traces.len()
    );
}
