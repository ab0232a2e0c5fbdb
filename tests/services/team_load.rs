//! `serve --http` under load and faults: 64 MCP clients on one server and on two servers
//! of one PostgreSQL database; 1,000 half-open connections beside 20 working clients;
//! SIGTERM during a load run (a call whose body is still arriving included); PostgreSQL
//! stopped and started again under load (`/readyz` follows it). Every test waits for
//! conditions (lines on stderr, acknowledgements, exits, a port's answers), never for a
//! fixed time; timeouts are shrunk with the server's own flags.

use crate::common::{self, bin, data_dir, is_error, structured, thought};
use crate::pg::{self, Cluster, Schema};
use rmcp::ServiceExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "load-test-token-of-at-least-32-characters";

/// Concurrent clients of the load run, each its own MCP session.
const CLIENTS: usize = 64;
/// Thoughts each client records.
const THOUGHTS_EACH: u64 = 50;

/// A `serve --http 127.0.0.1:0` child; its stderr lines arrive on `lines`.
struct Server {
    child: tokio::process::Child,
    url: String,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Server {
    async fn start(dir: &Path, extra: &[&str]) -> Server {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut command = tokio::process::Command::new(bin());
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(dir)
            .args(["--http", "127.0.0.1:0"])
            .args(extra)
            .env("DISABLE_THOUGHT_LOGGING", "true")
            .env("REASONING_LEDGER_TOKEN", TOKEN)
            .env_remove("REASONING_LEDGER_STORE")
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for var in common::PROVIDER_VARS {
            command.env_remove(var);
        }
        let mut child = command.spawn().expect("spawn http server");
        let mut stderr = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let (send, mut lines) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr.next_line().await {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let url = loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.recv())
                .await
                .expect("the server says where it listens")
                .expect("the server exited before listening");
            if let Some(start) = line.find("http://") {
                break line[start..].split_whitespace().next().unwrap().to_string();
            }
        };
        Server { child, url, lines }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    }

    fn base(&self) -> String {
        self.url.trim_end_matches("/mcp").to_string()
    }

    async fn client(&self) -> common::Client {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let config =
            StreamableHttpClientTransportConfig::with_uri(self.url.clone()).auth_header(TOKEN);
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("initialize over HTTP")
    }

    /// Open file descriptors of the server process.
    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .expect("/proc/PID/fd")
            .count()
    }

    /// Waits for a stderr line containing `text`.
    async fn line_with(&mut self, text: &str, within: Duration) -> String {
        tokio::time::timeout(within, async {
            loop {
                let line = self.lines.recv().await.expect("the server's stderr ended");
                if line.contains(text) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no line with {text:?} within {within:?}"))
    }
}

/// GETs a path of the server without a token: (status, body).
async fn get(server: &Server, path: &str) -> Result<(u16, String), reqwest::Error> {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", server.base()))
        .timeout(Duration::from_secs(10))
        .send()
        .await?;
    let status = response.status().as_u16();
    Ok((status, response.text().await?))
}

/// Waits until `GET path` answers `status`.
async fn wait_for_status(server: &Server, path: &str, status: u16, within: Duration) {
    let deadline = Instant::now() + within;
    let mut interval = tokio::time::interval(Duration::from_millis(50));
    loop {
        interval.tick().await;
        if let Ok((seen, _)) = get(server, path).await
            && seen == status
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never answered {status} within {within:?}"
        );
    }
}

/// One acknowledged thought: (session, seq, text).
type Ack = (String, u64, String);

/// Records `count` thoughts in one session of `client`; hands each acknowledgement to
/// `ack`; returns the errors.
async fn record(
    client: &common::Client,
    label: &str,
    count: u64,
    ack: &mut (dyn FnMut(Ack) + Send),
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut session: Option<String> = None;
    for n in 1..=count {
        let text = format!("{label} thought {n}");
        let mut args = thought(n, count, n < count, &text);
        if let Some(id) = &session {
            args["sessionId"] = json!(id);
        }
        match common::try_call(client, "sequentialthinking", args).await {
            Ok(result) if !is_error(&result) => {
                let answer = structured(&result);
                let id = answer["sessionId"].as_str().unwrap().to_string();
                ack((id.clone(), answer["eventSeq"].as_u64().unwrap(), text));
                session = Some(id);
            }
            Ok(result) => errors.push(common::text(&result)),
            Err(error) => errors.push(error.to_string()),
        }
    }
    errors
}

/// Runs `clients` clients × `count` thoughts, spread over `servers` round-robin; returns
/// the acknowledgements and the errors.
async fn load(servers: &[&Server], clients: usize, count: u64) -> (Vec<Ack>, Vec<String>) {
    let mut tasks = Vec::new();
    for n in 0..clients {
        let client = servers[n % servers.len()].client().await;
        tasks.push(tokio::spawn(async move {
            let mut acks = Vec::new();
            let errors = record(&client, &format!("client {n}"), count, &mut |ack| {
                acks.push(ack)
            })
            .await;
            client.cancel().await.unwrap();
            (acks, errors)
        }));
    }
    let mut acks = Vec::new();
    let mut errors = Vec::new();
    for task in tasks {
        let (mine, failed) = task.await.unwrap();
        acks.extend(mine);
        errors.extend(failed);
    }
    (acks, errors)
}

/// Every thought event of the ledger at `url`: its text → how many times it is stored.
fn stored_thoughts(url: &str, dir: &Path) -> HashMap<String, usize> {
    let output = pg::cli(url, dir, &["export", "--all", "-f", "jsonl"]);
    assert!(
        output.status.success(),
        "export --all: {}",
        common::stderr(&output)
    );
    let mut counts = HashMap::new();
    for line in common::stdout(&output).lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        if let Some(text) = event["payload"]["thought"].as_str() {
            *counts.entry(text.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

/// Every acknowledged thought is stored exactly once, at its seq; `verify` passes.
fn assert_stored_once(url: &str, dir: &Path, acks: &[Ack]) -> HashMap<String, usize> {
    let stored = stored_thoughts(url, dir);
    for (session, seq, text) in acks {
        assert_eq!(
            stored.get(text),
            Some(&1),
            "{session}#{seq} {text:?} stored exactly once"
        );
    }
    let verified = pg::cli(url, dir, &["verify"]);
    assert!(
        verified.status.success() && common::stdout(&verified).starts_with("ok: "),
        "verify: {}{}",
        common::stdout(&verified),
        common::stderr(&verified)
    );
    stored
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_clients_on_one_server_and_on_two_store_every_thought_once() {
    let total = CLIENTS * THOUGHTS_EACH as usize;
    // One server.
    let dir = data_dir();
    let schema = Schema::new();
    let server = Server::start(dir.path(), &["--store", &schema.url]).await;
    let (acks, errors) = load(&[&server], CLIENTS, THOUGHTS_EACH).await;
    assert!(
        errors.is_empty(),
        "no errors: {:?}",
        &errors[..errors.len().min(5)]
    );
    assert_eq!(acks.len(), total);
    let stored = assert_stored_once(&schema.url, dir.path(), &acks);
    assert_eq!(stored.len(), total, "nothing else stored");
    drop(server);

    // Two servers on one database, the clients split between them.
    let schema = Schema::new();
    let (first_dir, second_dir) = (data_dir(), data_dir());
    let first = Server::start(first_dir.path(), &["--store", &schema.url]).await;
    let second = Server::start(second_dir.path(), &["--store", &schema.url]).await;
    let (acks, errors) = load(&[&first, &second], CLIENTS, THOUGHTS_EACH).await;
    assert!(
        errors.is_empty(),
        "no errors: {:?}",
        &errors[..errors.len().min(5)]
    );
    assert_eq!(acks.len(), total);
    let stored = assert_stored_once(&schema.url, first_dir.path(), &acks);
    assert_eq!(stored.len(), total, "nothing else stored");
}

/// Half-open connections of the abuse test.
const HALF_OPEN: usize = 1_000;
/// The shrunk header timeout of the abuse test.
const TEST_HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// How much later than its header timeout a connection may be closed on this (shared,
/// loaded) machine.
const CLOSE_SLACK: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn half_open_connections_are_closed_within_the_header_timeout_while_clients_work() {
    let dir = data_dir();
    let server = Server::start(
        dir.path(),
        // Every connection of this test comes from 127.0.0.1: the per-peer cap (which would
        // close most half-open ones at once) is lifted to time the header timeout alone.
        &[
            "--header-timeout",
            "2s",
            "--max-connections",
            "1200",
            "--max-connections-per-peer",
            "1200",
        ],
    )
    .await;
    wait_for_status(&server, "/healthz", 200, Duration::from_secs(10)).await;
    let fds_at_start = server.open_fds();

    // 20 legitimate clients keep working meanwhile, until every half-open one is closed.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    for n in 0..20 {
        let client = server.client().await;
        let stopped = stopped.clone();
        workers.push(tokio::spawn(async move {
            let (mut acks, mut errors, mut round) = (0, Vec::new(), 0);
            while !*stopped.borrow() {
                round += 1;
                let label = format!("worker {n} round {round}");
                errors.extend(record(&client, &label, 5, &mut |_| acks += 1).await);
            }
            client.cancel().await.unwrap();
            (acks, errors)
        }));
    }
    let addr = server.addr();

    // 1,000 connections that send half a request head and then nothing.
    let mut half_open = Vec::new();
    for _ in 0..HALF_OPEN {
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        stream
            .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
            .await
            .unwrap();
        let sent = Instant::now();
        half_open.push(tokio::spawn(async move {
            let mut buf = [0u8; 64];
            let read = stream.read(&mut buf).await;
            (sent.elapsed(), read.map(|n| n == 0).unwrap_or(true))
        }));
    }
    let mut slowest = Duration::ZERO;
    for connection in half_open {
        let (after, closed) = tokio::time::timeout(TEST_HEADER_TIMEOUT * 10, connection)
            .await
            .expect("every half-open connection is closed")
            .unwrap();
        assert!(closed, "closed without an answer");
        slowest = slowest.max(after);
    }
    assert!(
        slowest <= TEST_HEADER_TIMEOUT + CLOSE_SLACK,
        "the slowest half-open connection was closed after {slowest:?}"
    );
    stop.send(true).unwrap();
    for worker in workers {
        let (acks, errors) = worker.await.unwrap();
        assert!(
            errors.is_empty(),
            "legitimate clients kept working: {errors:?}"
        );
        assert!(
            acks >= 5,
            "each worker recorded while the half-open ones were held"
        );
    }
    // Every connection gone: the server holds as many descriptors as at the start.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut interval = tokio::time::interval(Duration::from_millis(50));
    loop {
        interval.tick().await;
        let now = server.open_fds();
        if now <= fds_at_start {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "open descriptors stay at {now}, {fds_at_start} at the start"
        );
    }
}

/// The drain bound of the SIGTERM test.
const TEST_DRAIN: Duration = Duration::from_secs(15);

fn sigterm(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Opens an MCP session by hand (initialize + initialized): its `mcp-session-id`.
async fn raw_session(server: &Server) -> String {
    let client = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params":
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let response = client
        .post(&server.url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialize.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let _ = response.text().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = client
        .post(&server.url)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialized.to_string())
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_during_load_drains_calls_in_flight_and_exits_zero() {
    let dir = data_dir();
    let schema = Schema::new();
    let mut server = Server::start(
        dir.path(),
        &["--store", &schema.url, "--drain-timeout", "15s"],
    )
    .await;

    // A call whose head has arrived and whose body is still arriving when SIGTERM comes.
    let session = raw_session(&server).await;
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params":
        {"name": "sequentialthinking", "arguments": thought(1, 1, false, "slow body")}})
    .to_string();
    let (first, rest) = body.split_at(body.len() / 2);
    let mut slow = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
         Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: 2025-06-18\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n{first}",
        body.len()
    );
    slow.write_all(head.as_bytes()).await.unwrap();

    // Load: 16 clients, acknowledgements counted as they come.
    let acks = Arc::new(Mutex::new(Vec::<Ack>::new()));
    let (progress, mut acknowledged) = tokio::sync::watch::channel(0usize);
    let progress = Arc::new(progress);
    let mut tasks = Vec::new();
    for n in 0..16 {
        let client = server.client().await;
        let (acks, progress) = (acks.clone(), progress.clone());
        tasks.push(tokio::spawn(async move {
            record(&client, &format!("client {n}"), 200, &mut |ack| {
                acks.lock().unwrap().push(ack);
                progress.send_modify(|n| *n += 1);
            })
            .await;
        }));
    }
    tokio::time::timeout(
        Duration::from_secs(120),
        acknowledged.wait_for(|n| *n >= 100),
    )
    .await
    .expect("100 calls acknowledged within 120 s")
    .unwrap();
    let signalled = Instant::now();
    sigterm(server.pid());
    server
        .line_with("shutting down", Duration::from_secs(30))
        .await;
    // The slow call's body completes after the signal: it is still answered.
    slow.write_all(rest.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(TEST_DRAIN, slow.read_to_end(&mut answer))
        .await
        .expect("the slow call is answered within the drain bound")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("\"result\""),
        "the call was answered: {answer}"
    );

    let status = tokio::time::timeout(TEST_DRAIN + Duration::from_secs(10), server.child.wait())
        .await
        .expect("the server exits within the drain bound")
        .unwrap();
    assert_eq!(status.code(), Some(0), "exit 0 after SIGTERM");
    assert!(signalled.elapsed() <= TEST_DRAIN + Duration::from_secs(10));
    for task in tasks {
        task.await.unwrap();
    }
    let acks = acks.lock().unwrap().clone();
    assert!(acks.len() >= 100);
    let stored = assert_stored_once(&schema.url, dir.path(), &acks);
    assert_eq!(stored.get("slow body"), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restarted_under_load_readyz_follows_and_nothing_acknowledged_is_lost() {
    let cluster = Cluster::start();
    let dir = data_dir();
    let server = Server::start(dir.path(), &["--store", &cluster.url]).await;
    wait_for_status(&server, "/readyz", 200, Duration::from_secs(20)).await;
    let (status, body) = get(&server, "/healthz").await.unwrap();
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    // Clients keep recording until told to stop.
    let acks = Arc::new(Mutex::new(Vec::<Ack>::new()));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let (progress, mut acknowledged) = tokio::sync::watch::channel(0usize);
    let progress = Arc::new(progress);
    let mut tasks = Vec::new();
    for n in 0..8 {
        let client = server.client().await;
        let (acks, errors, progress, stopped) = (
            acks.clone(),
            errors.clone(),
            progress.clone(),
            stopped.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut round = 0;
            while !*stopped.borrow() {
                round += 1;
                let failed = record(
                    &client,
                    &format!("client {n} round {round}"),
                    5,
                    &mut |ack| {
                        acks.lock().unwrap().push(ack);
                        progress.send_modify(|n| *n += 1);
                    },
                )
                .await;
                errors.lock().unwrap().extend(failed);
            }
            client.cancel().await.unwrap();
        }));
    }
    tokio::time::timeout(
        Duration::from_secs(120),
        acknowledged.wait_for(|n| *n >= 40),
    )
    .await
    .expect("calls acknowledged before the stop")
    .unwrap();

    // PostgreSQL stops: /readyz says 503, calls fail with a clear error.
    cluster.kill();
    wait_for_status(&server, "/readyz", 503, Duration::from_secs(30)).await;
    let (_, body) = get(&server, "/readyz").await.unwrap();
    assert_eq!(body, "not ready\n", "nothing revealed");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut interval = tokio::time::interval(Duration::from_millis(50));
    while errors.lock().unwrap().is_empty() {
        interval.tick().await;
        assert!(
            Instant::now() < deadline,
            "calls fail while the database is down"
        );
    }
    let unclear: Vec<String> = errors
        .lock()
        .unwrap()
        .iter()
        // The call whose statement failed names PostgreSQL; the others of its group
        // commit are told that nothing of theirs was recorded.
        .filter(|e| !e.contains("PostgreSQL") && !e.contains("nothing of it was recorded"))
        .cloned()
        .collect();
    assert!(
        unclear.is_empty(),
        "clear errors: {:?}",
        &unclear[..unclear.len().min(3)]
    );

    // It comes back: /readyz says 200, calls are acknowledged again.
    cluster.up();
    wait_for_status(&server, "/readyz", 200, Duration::from_secs(60)).await;
    let before = *acknowledged.borrow();
    tokio::time::timeout(
        Duration::from_secs(120),
        acknowledged.wait_for(|n| *n >= before + 40),
    )
    .await
    .expect("calls acknowledged after the restart")
    .unwrap();
    stop.send(true).unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    let acks = acks.lock().unwrap().clone();
    assert_stored_once(&cluster.url, dir.path(), &acks);
    // The metrics saw the reconnect.
    let metrics = reqwest::Client::new()
        .get(format!("{}/metrics", server.base()))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let reconnects: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("reasoning_ledger_store_reconnects_total "))
        .expect("the reconnect counter")
        .trim()
        .parse()
        .unwrap();
    assert!(reconnects > 0, "{metrics}");
    assert!(
        metrics.contains(
            "reasoning_ledger_tool_calls_total{tool=\"sequentialthinking\",outcome=\"ok\"}"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_need_no_token_metrics_do_and_json_logs_have_one_line_per_call() {
    let dir = data_dir();
    let mut server = Server::start(dir.path(), &["--log-format", "json"]).await;
    assert_eq!(
        get(&server, "/healthz").await.unwrap(),
        (200, "ok\n".into())
    );
    assert_eq!(
        get(&server, "/readyz").await.unwrap(),
        (200, "ready\n".into())
    );
    assert_eq!(
        get(&server, "/metrics").await.unwrap().0,
        401,
        "behind the token"
    );
    let client = server.client().await;
    let mut acks = Vec::new();
    let errors = record(&client, "logged", 3, &mut |ack| acks.push(ack)).await;
    assert!(errors.is_empty(), "{errors:?}");
    client.cancel().await.unwrap();
    // One JSON line per call: request_id, tool, outcome, duration_ms.
    let mut ids = std::collections::BTreeSet::new();
    for _ in 0..3 {
        let line = server
            .line_with("\"tool call\"", Duration::from_secs(10))
            .await;
        let record: Value = serde_json::from_str(&line).expect("a JSON line");
        assert_eq!(record["level"], "INFO", "{line}");
        assert_eq!(record["tool"], "sequentialthinking", "{line}");
        assert_eq!(record["outcome"], "ok", "{line}");
        assert!(record["duration_ms"].as_f64().unwrap() >= 0.0, "{line}");
        ids.insert(record["request_id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids.len(), 3, "each call has its own request id");
    let metrics = reqwest::Client::new()
        .get(format!("{}/metrics", server.base()))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    assert!(
        text.contains(
            "reasoning_ledger_tool_calls_total{tool=\"sequentialthinking\",outcome=\"ok\"} 3"
        ),
        "{text}"
    );
    assert!(
        text.contains("reasoning_ledger_commit_seconds_count"),
        "{text}"
    );
    assert!(
        text.contains("reasoning_ledger_open_connections "),
        "{text}"
    );
    drop(server);
    let public = Server::start(dir.path(), &["--metrics-public"]).await;
    assert_eq!(get(&public, "/metrics").await.unwrap().0, 200);
}

/// Sends `GET path` on a kept-alive connection (with `TOKEN` when `token`) and reads its
/// whole answer: the head, then as many body bytes as its `content-length` says.
async fn request_on(stream: &mut tokio::net::TcpStream, path: &str, token: bool) -> String {
    let authorization = if token {
        format!("Authorization: Bearer {TOKEN}\r\n")
    } else {
        String::new()
    };
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{authorization}\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(head_end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&answer[..head_end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map(|value| value.trim().parse().unwrap())
                .unwrap_or(0);
            if answer.len() >= head_end + 4 + length {
                break;
            }
        }
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before answering: {answer:?}");
        answer.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(answer).unwrap()
}

/// Sends `GET /healthz` (no token) on a kept-alive connection and reads its answer.
async fn health_on(stream: &mut tokio::net::TcpStream) -> String {
    request_on(stream, "/healthz", false).await
}

/// Whether the server closed `stream` (a read sees its end, or a reset).
async fn closed_by_server(stream: &mut tokio::net::TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_connection_cap_new_connections_wait_and_those_inside_are_served() {
    let dir = data_dir();
    let server = Server::start(dir.path(), &["--max-connections", "2"]).await;
    let addr = server.addr();
    let mut first = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut second = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // Both show a valid token: neither may be closed to make room for a newcomer.
    assert!(
        request_on(&mut first, "/metrics", true)
            .await
            .starts_with("HTTP/1.1 200")
    );
    assert!(
        request_on(&mut second, "/metrics", true)
            .await
            .starts_with("HTTP/1.1 200")
    );
    // A third connection: the kernel completes it, the server does not take it yet.
    let mut third = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let waiting = tokio::spawn(async move { health_on(&mut third).await });
    // Those inside are still served meanwhile, and the third still waits.
    assert!(health_on(&mut first).await.starts_with("HTTP/1.1 200"));
    assert!(health_on(&mut second).await.starts_with("HTTP/1.1 200"));
    assert!(!waiting.is_finished(), "the cap let a third connection in");
    drop(first);
    let answer = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("served once a slot was free")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_server_closes_its_oldest_connection_without_a_token_for_a_new_one() {
    let dir = data_dir();
    let server = Server::start(dir.path(), &["--max-connections", "2"]).await;
    let addr = server.addr();
    let mut first = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut second = tokio::net::TcpStream::connect(&addr).await.unwrap();
    // The first never shows a token (a probe); the second does.
    assert!(health_on(&mut first).await.starts_with("HTTP/1.1 200"));
    assert!(
        request_on(&mut second, "/metrics", true)
            .await
            .starts_with("HTTP/1.1 200")
    );
    // A third: the first makes room for it, the second is kept.
    let mut third = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(20), health_on(&mut third))
        .await
        .expect("the newcomer is served at once, not left waiting");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        closed_by_server(&mut first).await,
        "the oldest connection without a token was kept"
    );
    assert!(health_on(&mut second).await.starts_with("HTTP/1.1 200"));
    let metrics = request_on(&mut second, "/metrics", true).await;
    assert!(
        metrics.contains("reasoning_ledger_connections_evicted_total 1"),
        "{metrics}"
    );
}
