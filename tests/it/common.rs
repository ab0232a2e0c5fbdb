//! Shared helpers: spawn the server, call tools, run the CLI, and `check` snapshots.

#![allow(dead_code)]

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Output;

pub(crate) type Client = RunningService<RoleClient, ()>;

/// The binary under test, built by cargo for this test run.
pub(crate) fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_reasoning-ledger"))
}

/// A new pseudo-terminal: (its leader, its follower), for a child that must see a
/// terminal on one of its standard streams.
pub(crate) fn pseudo_terminal() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let (mut leader, mut follower) = (-1, -1);
    // SAFETY: openpty writes two new descriptors into the pointers given; the others may
    // be null.
    let opened = unsafe {
        libc::openpty(
            &mut leader,
            &mut follower,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "openpty");
    // SAFETY: both descriptors are ours alone from here.
    unsafe {
        (
            std::fs::File::from_raw_fd(leader),
            std::fs::File::from_raw_fd(follower),
        )
    }
}

/// A fresh data directory, removed when dropped.
pub(crate) fn data_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// Spawns `reasoning-ledger serve` on `dir` with extra arguments and connects a client.
pub(crate) async fn spawn_with(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Client {
    let dir = dir.to_path_buf();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let transport =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            cmd.arg("serve").arg("--data-dir").arg(&dir).args(&extra);
            cmd.env("DISABLE_THOUGHT_LOGGING", "true");
            cmd.env_remove("REASONING_LEDGER_TOOLSETS");
            cmd.env_remove("REASONING_LEDGER_STORE");
            for (k, v) in &env {
                cmd.env(k, v);
            }
        }))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn server")
        .0;
    ().serve(transport).await.expect("initialize")
}

/// Spawns the server with its defaults on `dir`.
pub(crate) async fn spawn(dir: &Path) -> Client {
    spawn_with(dir, &[], &[]).await
}

/// The default toolsets and `export` (`export_session`, `replay_session`, off by
/// default): what a test that exports or replays a session serves.
pub(crate) const WITH_EXPORT: &str = "thinking,ledger,export";

/// Spawns the server with [`WITH_EXPORT`] on `dir`.
pub(crate) async fn spawn_with_export(dir: &Path) -> Client {
    spawn_with(dir, &["--toolsets", WITH_EXPORT], &[]).await
}

pub(crate) fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, got {other}"),
    }
}

/// Calls a tool; panics on a JSON-RPC error (use `try_call` to see those).
pub(crate) async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    try_call(client, tool, arguments)
        .await
        .expect("tools/call answered")
}

pub(crate) async fn try_call(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, rmcp::ServiceError> {
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(object(arguments)))
        .await
}

/// The first text content of a result.
pub(crate) fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// The structured content of a successful result.
pub(crate) fn structured(result: &CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "tool failed: {}", text(result));
    result
        .structured_content
        .clone()
        .expect("structured content")
}

pub(crate) fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// A sequentialthinking call's arguments.
pub(crate) fn thought(n: u64, total: u64, next: bool, text: &str) -> Value {
    serde_json::json!({"thought": text, "thoughtNumber": n, "totalThoughts": total, "nextThoughtNeeded": next})
}

/// Runs the CLI on `dir` and waits for it.
pub(crate) fn cli(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(bin())
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("REASONING_LEDGER_DIR")
        .env_remove("REASONING_LEDGER_STORE")
        .output()
        .expect("run cli")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A listed session's ledger id: `ledgerId`, beside the id its tool gave (a plan's `dp-`
/// id, an agent session's name), else `sessionId` (the two are one).
pub(crate) fn ledger_id(listed: &Value) -> String {
    listed
        .get("ledgerId")
        .unwrap_or(&listed["sessionId"])
        .as_str()
        .unwrap_or_else(|| panic!("no session id in {listed}"))
        .to_string()
}

/// A JSONL export from a ledger it was imported into, as the file it came from: without
/// the records of imports (`events_imported`), and how many there were.
pub(crate) fn without_import_records(jsonl: &str) -> (String, usize) {
    let mut records = 0;
    let mut file = String::new();
    for line in jsonl.lines() {
        let event: Value = serde_json::from_str(line).expect("an exported event");
        if event["payload"]["type"] == "events_imported" {
            records += 1;
        } else {
            file.push_str(line);
            file.push('\n');
        }
    }
    (file, records)
}

/// A session's JSONL export from a ledger it was imported into, as the file it came from:
/// without the record of the import (`events_imported`, its last line), which must be
/// there.
pub(crate) fn as_imported(jsonl: &str) -> String {
    let is_record = |line: &str| {
        serde_json::from_str::<Value>(line).is_ok_and(|e| e["payload"]["type"] == "events_imported")
    };
    let lines: Vec<&str> = jsonl.lines().collect();
    assert!(
        lines.last().is_some_and(|l| is_record(l)),
        "no record of the import at the end of {jsonl}"
    );
    let mut file: String = lines[..lines.len() - 1]
        .iter()
        .map(|line| format!("{line}\n"))
        .collect();
    if !jsonl.ends_with('\n') {
        file.pop();
    }
    file
}

/// Replaces what changes from run to run (ULIDs, hashes, times, durations) with stable
/// placeholders, numbering each distinct id in order of appearance.
pub(crate) fn normalize(text: &str) -> String {
    let ulid = regex::Regex::new(r"\b[0-7][0-9A-HJKMNP-TV-Z]{25}\b").unwrap();
    let mut seen: Vec<String> = Vec::new();
    let text = ulid.replace_all(text, |caps: &regex::Captures| {
        let id = caps[0].to_string();
        let index = match seen.iter().position(|s| *s == id) {
            Some(i) => i,
            None => {
                seen.push(id);
                seen.len() - 1
            }
        };
        format!("<id{index}>")
    });
    let hash = regex::Regex::new(r"\b[0-9a-f]{64}\b").unwrap();
    let text = hash.replace_all(&text, |caps: &regex::Captures| {
        if caps[0].bytes().all(|b| b == b'0') {
            caps[0].to_string()
        } else {
            "<hash>".to_string()
        }
    });
    let time = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").unwrap();
    let text = time.replace_all(&text, "<time>");
    let at = regex::Regex::new(r#""(at|createdAt|updatedAt)":\s*\d+"#).unwrap();
    let text = at.replace_all(&text, "\"$1\":<ms>");
    let duration = regex::Regex::new(r#""duration_us":\s*\d+"#).unwrap();
    duration
        .replace_all(&text, "\"duration_us\":<us>")
        .into_owned()
}

/// The one snapshot helper: normalizes `text` and compares it with `snapshots/<name>.snap`.
pub(crate) fn check(name: &str, text: &str) {
    let normalized = normalize(text);
    insta::with_settings!({snapshot_path => "../../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(name, normalized);
    });
}

/// `check` for a JSON value, pretty-printed.
pub(crate) fn check_json(name: &str, value: &Value) {
    check(name, &serde_json::to_string_pretty(value).unwrap());
}

/// Spawns `reasoning-ledger serve` on `dir` with stderr piped, so a test can read what the
/// server draws there. `disable_logging`: the value of `DISABLE_THOUGHT_LOGGING`, or
/// `None` to leave it unset.
pub(crate) async fn spawn_with_stderr(
    dir: &Path,
    disable_logging: Option<&str>,
) -> (Client, tokio::process::ChildStderr) {
    let dir = dir.to_path_buf();
    let disable = disable_logging.map(str::to_string);
    let (transport, stderr) =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            cmd.arg("serve").arg("--data-dir").arg(&dir);
            cmd.env_remove("REASONING_LEDGER_TOOLSETS");
            cmd.env_remove("RUST_LOG");
            match &disable {
                Some(value) => cmd.env("DISABLE_THOUGHT_LOGGING", value),
                None => cmd.env_remove("DISABLE_THOUGHT_LOGGING"),
            };
        }))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn server");
    let client = ().serve(transport).await.expect("initialize");
    (client, stderr.expect("stderr piped"))
}

/// A Mermaid flowchart's structure as `.ci/mermaid-check` counts it: (thought nodes — ids
/// `t<digits>` —, edges, subgraphs), read from the renderer's one-statement-per-line
/// output. The fixture generators assert these against the session before writing a
/// diagram for the real parser.
pub(crate) fn mermaid_structure(diagram: &str) -> (usize, usize, usize) {
    let node = regex::Regex::new(r#"^(t\d+)\["#).unwrap();
    let edge = regex::Regex::new(r"^\w+ (-->|-\.->|==>|-\.-x)(\|.*\|)? \w+$").unwrap();
    let mut thoughts: Vec<&str> = Vec::new();
    let (mut edges, mut subgraphs) = (0, 0);
    for line in diagram.lines().map(str::trim) {
        if let Some(id) = node.captures(line).and_then(|c| c.get(1)) {
            if !thoughts.contains(&id.as_str()) {
                thoughts.push(id.as_str());
            }
        } else if edge.is_match(line) {
            edges += 1;
        } else if line.starts_with("subgraph ") {
            subgraphs += 1;
        }
    }
    (thoughts.len(), edges, subgraphs)
}

/// The counts a diagram's header line states (`%% reasoning-ledger session … N thoughts,
/// E edges, B branches`).
pub(crate) fn mermaid_header_counts(diagram: &str) -> (usize, usize, usize) {
    let header = regex::Regex::new(
        r"%% reasoning-ledger session .*?(\d+) thoughts?, (\d+) edges?, (\d+) branch(?:es)?\b",
    )
    .unwrap();
    let caps = header
        .captures(diagram)
        .unwrap_or_else(|| panic!("no count header in {diagram}"));
    let n = |i: usize| caps[i].parse::<usize>().unwrap();
    (n(1), n(2), n(3))
}

/// Every variable the provider layer reads: cleared so a developer's own keys never
/// reach a test.
pub(crate) const PROVIDER_VARS: [&str; 19] = [
    "DEEPSEEK_API_KEY",
    "DEEPSEEK_BASE_URL",
    "DEEPSEEK_MODEL",
    "SILICONFLOW_API_KEY",
    "SILICONFLOW_BASE_URL",
    "SILICONFLOW_MODEL",
    "CEREBRAS_API_KEY",
    "CEREBRAS_BASE_URL",
    "CEREBRAS_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "REASONING_LEDGER_LLM_BASE_URL",
    "REASONING_LEDGER_LLM_MODEL",
    "REASONING_LEDGER_LLM_API_KEY",
    "REASONING_LEDGER_LLM_TIMEOUT_SECS",
    "REASONING_LEDGER_LLM_BACKOFF_MS",
    "REASONING_LEDGER_AGENT_NODE_QUOTA",
    "REASONING_LEDGER_AGENT_LANGUAGE",
];

/// Spawns the server with the agent and ledger toolsets, `env` on top of a clean
/// provider environment, stderr into `stderr` (or nowhere).
pub(crate) async fn spawn_agent(dir: &Path, env: &[(&str, &str)], stderr: Option<&Path>) -> Client {
    let dir = dir.to_path_buf();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let sink = match stderr {
        Some(path) => std::process::Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap(),
        ),
        None => std::process::Stdio::null(),
    };
    let transport =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            cmd.arg("serve")
                .arg("--data-dir")
                .arg(&dir)
                .arg("--toolsets")
                .arg("agent,ledger");
            cmd.env("DISABLE_THOUGHT_LOGGING", "true");
            cmd.env("RUST_LOG", "debug");
            for var in PROVIDER_VARS {
                cmd.env_remove(var);
            }
            for (k, v) in &env {
                cmd.env(k, v);
            }
        }))
        .stderr(sink)
        .spawn()
        .expect("spawn server")
        .0;
    ().serve(transport).await.expect("initialize")
}

/// Records a one-thought `sequentialthinking` session with `text`; its session id.
pub(crate) async fn one_thought_session(client: &Client, text: &str) -> String {
    let answer = structured(&call(client, "sequentialthinking", thought(1, 1, false, text)).await);
    answer["sessionId"].as_str().unwrap().to_string()
}

/// `search_history` for `query` in `mode` (lexical, semantic or hybrid); its structured
/// answer (the call must succeed).
pub(crate) async fn search_history(client: &Client, query: &str, mode: &str) -> Value {
    let result = call(
        client,
        "search_history",
        serde_json::json!({"query": query, "mode": mode}),
    )
    .await;
    assert!(!is_error(&result), "{result:?}");
    structured(&result)
}

/// The session ids of a `search_history` answer's matches, best first.
pub(crate) fn matched_sessions(answer: &Value) -> Vec<String> {
    answer["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["sessionId"].as_str().unwrap().to_string())
        .collect()
}

/// The MCP address a `serve --http` child prints on stderr (the first `http://…` word), read
/// within `patience`; the rest of its stderr is drained in the background.
pub(crate) async fn http_url_from_stderr(
    child: &mut tokio::process::Child,
    patience: std::time::Duration,
) -> String {
    let (url, mut lines) = http_url_line(child, patience).await;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    url
}

/// [`http_url_from_stderr`], and the rest of the child's stderr (after the address's
/// line), whole once the child has closed it.
pub(crate) async fn http_url_and_stderr(
    child: &mut tokio::process::Child,
    patience: std::time::Duration,
) -> (String, tokio::task::JoinHandle<String>) {
    let (url, mut lines) = http_url_line(child, patience).await;
    let rest = tokio::spawn(async move {
        let mut rest = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            rest.push_str(&line);
            rest.push('\n');
        }
        rest
    });
    (url, rest)
}

/// The child's stderr read up to the line with its MCP address: the address, and the
/// lines after it.
async fn http_url_line(
    child: &mut tokio::process::Child,
    patience: std::time::Duration,
) -> (
    String,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
) {
    use tokio::io::AsyncBufReadExt;
    let stderr = child.stderr.take().expect("stderr piped");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    loop {
        let line = tokio::time::timeout(patience, lines.next_line())
            .await
            .expect("the server says where it listens")
            .unwrap()
            .expect("the server is running");
        if let Some(start) = line.find("http://") {
            let url = line[start..].split_whitespace().next().unwrap().to_string();
            return (url, lines);
        }
    }
}

/// The base URL a service script (`tools/*/run serve …`) prints as its first stdout line,
/// `ready URL`, once it answers; read within `patience`, `what` naming it in a failure.
pub(crate) async fn ready_url(
    server: &mut tokio::process::Child,
    patience: std::time::Duration,
    what: &str,
) -> String {
    use tokio::io::AsyncBufReadExt;
    let stdout = server.stdout.take().expect("stdout piped");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(patience, lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("{what} did not start within {patience:?}"))
        .unwrap()
        .unwrap_or_else(|| {
            panic!("{what} ended before it was ready (its reason is on stderr above)")
        });
    line.strip_prefix("ready ")
        .unwrap_or_else(|| panic!("unexpected first line from {what}: {line:?}"))
        .to_string()
}
