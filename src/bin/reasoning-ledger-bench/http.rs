//! The HTTP benchmark (`--http`): `serve --http` measured as a team would use it, on redb
//! and on PostgreSQL in one run: one client's call latency, then many clients (each its
//! own MCP session over streamable HTTP) at once: their latency and throughput.
//!
//! Owns: spawning `serve --http 127.0.0.1:0` (a token of its own, in a scratch data
//! directory), a minimal streamable-HTTP MCP client (initialize, initialized, tools/call;
//! answers read from the SSE stream of each POST), and the figures. Must not: judge the
//! figures, or leave a server running (children are killed on drop).

use crate::postgres::{Database, fresh_schema};
use crate::servers::stats::{LatencySummary, fmt_duration};
use anyhow::Context;
use serde::Serialize;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;

/// Clients at once in the many-clients run, each its own MCP session.
pub(crate) const CLIENTS: usize = 16;

/// Calls made before the measured ones, per server.
const WARMUP_CALLS: usize = 20;

/// The bearer token of the measured servers.
const TOKEN: &str = "bench-token";

/// `totalThoughts` of every call (more than any run makes).
const TOTAL_THOUGHTS: u64 = 1_000_000;

/// One store's figures over HTTP.
#[derive(Serialize)]
pub(crate) struct HttpFigures {
    pub store: String,
    pub one_client_p50_us: f64,
    pub one_client_p99_us: f64,
    pub clients_p50_us: f64,
    pub clients_p99_us: f64,
    pub clients_calls_per_s: f64,
}

/// The report: redb beside PostgreSQL.
#[derive(Serialize)]
pub(crate) struct HttpReport {
    pub calls: usize,
    pub clients: usize,
    pub redb: HttpFigures,
    pub postgres: HttpFigures,
}

impl std::fmt::Display for HttpReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let us = |v: f64| fmt_duration(Duration::from_secs_f64(v / 1e6));
        writeln!(
            f,
            "## serve --http: redb and PostgreSQL ({} calls; {} clients at once)\n",
            self.calls, self.clients
        )?;
        writeln!(f, "| figure | redb | PostgreSQL |")?;
        writeln!(f, "|---|---|---|")?;
        let (r, p) = (&self.redb, &self.postgres);
        writeln!(
            f,
            "| one client: sequentialthinking p50 / p99 | {} / {} | {} / {} |",
            us(r.one_client_p50_us),
            us(r.one_client_p99_us),
            us(p.one_client_p50_us),
            us(p.one_client_p99_us)
        )?;
        writeln!(
            f,
            "| {} clients: p50 / p99 | {} / {} | {} / {} |",
            self.clients,
            us(r.clients_p50_us),
            us(r.clients_p99_us),
            us(p.clients_p50_us),
            us(p.clients_p99_us)
        )?;
        writeln!(
            f,
            "| {} clients: calls per second | {:.0} | {:.0} |",
            self.clients, r.clients_calls_per_s, p.clients_calls_per_s
        )
    }
}

/// A `serve --http` child.
struct HttpServer {
    _child: tokio::process::Child,
    url: String,
}

impl HttpServer {
    async fn start(exe: &Path, data_dir: &Path, store: Option<&str>) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir)?;
        let mut command = tokio::process::Command::new(exe);
        command
            .arg("--data-dir")
            .arg(data_dir)
            .args(["serve", "--http", "127.0.0.1:0"])
            .env("REASONING_LEDGER_TOKEN", TOKEN)
            .env("DISABLE_THOUGHT_LOGGING", "true")
            .env_remove("REASONING_LEDGER_STORE")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        if let Some(url) = store {
            command.args(["--store", url]);
        }
        let mut child = command.spawn().context("spawning serve --http")?;
        let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("piped")).lines();
        let url = loop {
            let line = lines
                .next_line()
                .await?
                .context("serve --http exited before saying where it listens")?;
            if let Some(start) = line.find("http://") {
                break line[start..]
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(HttpServer { _child: child, url })
    }
}

/// One MCP session over streamable HTTP, and the ledger session its thoughts go to.
struct Client {
    http: reqwest::Client,
    url: String,
    mcp_session: String,
    ledger_session: Option<String>,
    next_id: u64,
}

impl Client {
    async fn connect(url: &str) -> anyhow::Result<Client> {
        let http = reqwest::Client::new();
        let mut client = Client {
            http,
            url: url.to_string(),
            mcp_session: String::new(),
            ledger_session: None,
            next_id: 1,
        };
        let response = client
            .post(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params":
                {"protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "reasoning-ledger-bench", "version": "1"}}}),
            )
            .send()
            .await?
            .error_for_status()?;
        client.mcp_session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .context("no mcp-session-id in the initialize answer")?
            .to_string();
        response.text().await?;
        client
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await?
            .error_for_status()?;
        Ok(client)
    }

    fn post(&self, message: Value) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(message.to_string());
        if !self.mcp_session.is_empty() {
            request = request
                .header("mcp-session-id", &self.mcp_session)
                .header("mcp-protocol-version", "2025-06-18");
        }
        request
    }

    /// One `sequentialthinking` call; its latency.
    async fn thought(&mut self) -> anyhow::Result<Duration> {
        let id = self.next_id;
        self.next_id += 1;
        let mut arguments = json!({"thought": format!("bench thought {id}"), "thoughtNumber": id,
            "totalThoughts": TOTAL_THOUGHTS, "nextThoughtNeeded": true});
        if let Some(session) = &self.ledger_session {
            arguments["sessionId"] = json!(session);
        }
        let started = Instant::now();
        let body = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "sequentialthinking", "arguments": arguments}}))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await?;
        let took = started.elapsed();
        let answer = body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message["id"] == json!(id))
            .with_context(|| format!("no answer to call {id} in {body:?}"))?;
        let result = &answer["result"];
        anyhow::ensure!(
            result["isError"] != json!(true) && answer.get("error").is_none(),
            "call {id} failed: {answer}"
        );
        if self.ledger_session.is_none() {
            self.ledger_session = result["structuredContent"]["sessionId"]
                .as_str()
                .map(str::to_string);
        }
        Ok(took)
    }
}

async fn measure(
    label: &str,
    exe: &Path,
    data_dir: &Path,
    store: Option<&str>,
    calls: usize,
) -> anyhow::Result<HttpFigures> {
    let server = HttpServer::start(exe, data_dir, store).await?;
    let mut one = Client::connect(&server.url).await?;
    for _ in 0..WARMUP_CALLS {
        one.thought().await?;
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        samples.push(one.thought().await?);
    }
    let one_client = LatencySummary::from_samples(samples).context("no calls")?;
    let mut clients = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        clients.push(Client::connect(&server.url).await?);
    }
    let each = calls.div_ceil(CLIENTS);
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|mut client| {
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(each);
                for _ in 0..each {
                    samples.push(client.thought().await?);
                }
                anyhow::Ok(samples)
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(each * CLIENTS);
    for task in tasks {
        samples.extend(task.await??);
    }
    let wall = started.elapsed();
    let count = samples.len();
    let many = LatencySummary::from_samples(samples).context("no calls")?;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    Ok(HttpFigures {
        store: label.to_string(),
        one_client_p50_us: us(one_client.p50),
        one_client_p99_us: us(one_client.p99),
        clients_p50_us: us(many.p50),
        clients_p99_us: us(many.p99),
        clients_calls_per_s: count as f64 / wall.as_secs_f64(),
    })
}

/// Runs the HTTP benchmark with our server `exe`.
pub(crate) async fn run(
    exe: &Path,
    scratch: &Path,
    url: Option<String>,
    calls: usize,
) -> anyhow::Result<HttpReport> {
    // reqwest is built without a TLS provider of its own: even plain HTTP needs one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let database = Database::find(url, scratch)?;
    let base = database.url.clone();
    let (store_url, schema) = tokio::task::spawn_blocking(move || fresh_schema(&base)).await??;
    let redb = measure("redb", exe, &scratch.join("http/redb"), None, calls).await?;
    let postgres = measure(
        "PostgreSQL",
        exe,
        &scratch.join("http/pg"),
        Some(&store_url),
        calls,
    )
    .await?;
    let base = database.url.clone();
    let _ = tokio::task::spawn_blocking(move || {
        postgres::Client::connect(&base, postgres::NoTls)
            .and_then(|mut c| c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")))
    })
    .await;
    drop(database);
    Ok(HttpReport {
        calls,
        clients: CLIENTS,
        redb,
        postgres,
    })
}
