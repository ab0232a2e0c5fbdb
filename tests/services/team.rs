//! A team's ledger: PostgreSQL as the store (every command, byte-identical exports and
//! copies both ways, two servers writing one session, live updates across servers, the
//! faults of a network database) and the server over streamable HTTP (token, Origin,
//! rmcp's HTTP client).

use crate::common::{self, Client, bin, call, data_dir, is_error, spawn_with, structured, thought};
use crate::pg::{self, Cluster, Schema};
use rmcp::model::{ResourceUpdatedNotificationParam, SubscribeRequestParams};
use rmcp::service::NotificationContext;
use rmcp::transport::ConfigureCommandExt;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

fn ok(output: &std::process::Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what}: {}",
        common::stderr(output)
    );
    common::stdout(output)
}

fn session_ids(listing: &str) -> Vec<String> {
    let listed: Value = serde_json::from_str(listing).expect("sessions json");
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["sessionId"].as_str().unwrap().to_string())
        .collect()
}

/// Every read of `sessions` on redb `dir` and PostgreSQL `url` prints the same bytes
/// (except the line naming where the ledger is).
fn assert_same_reads(dir: &Path, url: &str, other_dir: &Path) {
    let redb = |args: &[&str]| ok(&common::cli(dir, args), &format!("redb {args:?}"));
    let postgres = |args: &[&str]| ok(&pg::cli(url, other_dir, args), &format!("pg {args:?}"));
    let sessions = session_ids(&redb(&["sessions", "--json"]));
    assert!(!sessions.is_empty());
    assert_eq!(
        redb(&["sessions", "--json"]),
        postgres(&["sessions", "--json"])
    );
    assert_eq!(redb(&["sessions"]), postgres(&["sessions"]));
    for id in &sessions {
        for format in ["jsonl", "json", "mermaid", "markdown"] {
            assert_eq!(
                redb(&["export", id, "--format", format]),
                postgres(&["export", id, "--format", format]),
                "export {id} --format {format}"
            );
        }
        assert_eq!(redb(&["show", id]), postgres(&["show", id]));
        assert_eq!(
            redb(&["replay", id, "--at", "3"]),
            postgres(&["replay", id, "--at", "3"])
        );
    }
    // Search finds the same events on both (ranking may differ: BM25 against ts_rank_cd).
    let found = |text: String| {
        let answer: Value = serde_json::from_str(&text).expect("search json");
        let mut hits: Vec<(String, u64)> = answer["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["sessionId"].to_string(), m["seq"].as_u64().unwrap()))
            .collect();
        hits.sort();
        hits
    };
    let on_redb = found(redb(&["search", "export", "--json", "--limit", "100"]));
    assert!(!on_redb.is_empty());
    assert_eq!(
        on_redb,
        found(postgres(&["search", "export", "--json", "--limit", "100"]))
    );
    assert!(postgres(&["verify"]).starts_with("ok: "));
}

#[test]
fn every_command_works_on_postgres_and_copies_are_byte_identical_both_ways() {
    let (a, b, scratch) = (data_dir(), data_dir(), data_dir());
    let schema = Schema::new();
    // demo on each backend.
    ok(&common::cli(a.path(), &["demo"]), "demo on redb");
    let demo = ok(
        &pg::cli(&schema.url, scratch.path(), &["demo"]),
        "demo on pg",
    );
    assert!(demo.contains("--store "), "{demo}");
    // Everything of redb into PostgreSQL (beside the sessions demo wrote there: its tour
    // records 31 events in 5 sessions).
    let copied = ok(
        &common::cli(a.path(), &["copy", "--to", &schema.url]),
        "copy",
    );
    assert!(
        copied.starts_with("copied 31 event(s) (0 already there) of 5 session(s)"),
        "{copied}"
    );
    // ... and all of PostgreSQL back into a new redb ledger.
    let back = ok(
        &pg::cli(
            &schema.url,
            scratch.path(),
            &["copy", "--to", b.path().to_str().unwrap()],
        ),
        "copy back",
    );
    assert!(back.starts_with("copied 62 event(s)"), "{back}");
    // redb → PostgreSQL → redb: the original's sessions read byte-identically everywhere.
    for id in session_ids(&ok(
        &common::cli(a.path(), &["sessions", "--json"]),
        "sessions",
    )) {
        let original = ok(&common::cli(a.path(), &["export", &id, "-f", "jsonl"]), "a");
        let via_pg = ok(
            &pg::cli(&schema.url, scratch.path(), &["export", &id, "-f", "jsonl"]),
            "pg",
        );
        let round_trip = ok(&common::cli(b.path(), &["export", &id, "-f", "jsonl"]), "b");
        assert_eq!(original, via_pg);
        assert_eq!(original, round_trip);
    }
    assert_same_reads(b.path(), &schema.url, scratch.path());
    // import into PostgreSQL: the same bytes come out again.
    let other = Schema::new();
    let id = session_ids(&ok(
        &common::cli(a.path(), &["sessions", "--json"]),
        "sessions",
    ))[0]
        .clone();
    let file = scratch.path().join("one.jsonl");
    ok(
        &common::cli(
            a.path(),
            &["export", &id, "-f", "jsonl", "-o", file.to_str().unwrap()],
        ),
        "export -o",
    );
    let imported = ok(
        &pg::cli(
            &other.url,
            scratch.path(),
            &["import", file.to_str().unwrap()],
        ),
        "import",
    );
    assert!(
        imported.starts_with("imported 10 event(s) into 1 session(s)"),
        "{imported}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        common::as_imported(&ok(
            &pg::cli(&other.url, scratch.path(), &["export", &id, "-f", "jsonl"]),
            "export"
        ))
    );
    // Read-only commands never create a ledger in an empty schema.
    let empty = Schema::new();
    let refused = pg::cli(&empty.url, scratch.path(), &["sessions"]);
    assert!(!refused.status.success());
    assert!(
        common::stderr(&refused).contains("no ledger in"),
        "{}",
        common::stderr(&refused)
    );
    // A --store that is not a PostgreSQL URL is refused, naming what is expected.
    let bad = common::cli(a.path(), &["--store", "mysql://x", "sessions"]);
    assert!(!bad.status.success());
    assert!(common::stderr(&bad).contains("expected a PostgreSQL URL"));
}

#[test]
fn copy_is_idempotent_and_resumes_where_it_stopped() {
    let (a, scratch) = (data_dir(), data_dir());
    let schema = Schema::new();
    ok(&common::cli(a.path(), &["demo"]), "demo");
    let first = ok(
        &common::cli(a.path(), &["copy", "--to", &schema.url]),
        "copy",
    );
    assert!(
        first.starts_with("copied 31 event(s) (0 already there)"),
        "{first}"
    );
    let again = ok(
        &common::cli(a.path(), &["copy", "--to", &schema.url]),
        "copy again",
    );
    assert!(
        again.starts_with("copied 0 event(s) (31 already there)"),
        "{again}"
    );
    // More written at the source: the next copy brings only that. (Without its record of
    // the first tour, `demo` records the tour anew.)
    std::fs::remove_file(a.path().join("demo").join("tour.json")).unwrap();
    ok(&common::cli(a.path(), &["demo"]), "demo");
    let more = ok(
        &common::cli(a.path(), &["copy", "--to", &schema.url]),
        "copy more",
    );
    assert!(
        more.starts_with("copied 31 event(s) (31 already there) of 10 session(s)"),
        "{more}"
    );
    assert_same_reads(a.path(), &schema.url, scratch.path());
}

/// Two "machines": servers on two data directories sharing one PostgreSQL, writing one
/// session at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_on_one_database_write_one_session_gaplessly() {
    let schema = Schema::new();
    let (one_dir, two_dir) = (data_dir(), data_dir());
    let store = ["--store", schema.url.as_str()];
    let one = spawn_with(one_dir.path(), &store, &[]).await;
    let two = spawn_with(two_dir.path(), &store, &[]).await;
    let first = call(&one, "sequentialthinking", thought(1, 50, true, "start")).await;
    let session = structured(&first)["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    const PER_SERVER: u64 = 20;
    let run = |client: Client, label: &'static str| {
        let session = session.clone();
        tokio::spawn(async move {
            let mut seqs = Vec::new();
            for n in 0..PER_SERVER {
                let mut args = thought(n + 2, 50, true, &format!("{label} {n}"));
                args["sessionId"] = json!(session);
                let result = call(&client, "sequentialthinking", args).await;
                assert!(!is_error(&result), "{}", common::text(&result));
                seqs.push(structured(&result)["eventSeq"].as_u64().unwrap());
            }
            (client, seqs)
        })
    };
    let (a, b) = (run(one, "one"), run(two, "two"));
    let (one, mut seqs) = a.await.unwrap();
    let (two, other) = b.await.unwrap();
    seqs.extend(other);
    let acked: BTreeSet<u64> = seqs.iter().copied().collect();
    assert_eq!(
        acked.len(),
        seqs.len(),
        "two calls acknowledged at one seq: {seqs:?}"
    );
    one.cancel().await.unwrap();
    two.cancel().await.unwrap();
    let jsonl = ok(
        &pg::cli(
            &schema.url,
            one_dir.path(),
            &["export", &session, "-f", "jsonl"],
        ),
        "export",
    );
    let events: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stored: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        stored,
        (1..=2 + 2 * PER_SERVER).collect::<Vec<_>>(),
        "gapless"
    );
    let ids: BTreeSet<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), events.len(), "no event twice");
    for seq in &acked {
        assert!(stored.contains(seq));
    }
    let texts: BTreeSet<String> = events[2..]
        .iter()
        .map(|e| {
            e["payload"]["thought"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(texts.len() as u64, 2 * PER_SERVER, "every call stored once");
    ok(&pg::cli(&schema.url, two_dir.path(), &["verify"]), "verify");
}

/// A client that forwards every `resources/updated` it gets.
#[derive(Clone)]
struct Updates(tokio::sync::mpsc::UnboundedSender<String>);

impl ClientHandler for Updates {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params.uri);
    }
}

async fn spawn_following(
    dir: &Path,
    extra: &[&str],
) -> (
    rmcp::service::RunningService<RoleClient, Updates>,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let dir = dir.to_path_buf();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let transport =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            cmd.arg("serve").arg("--data-dir").arg(&dir).args(&extra);
            cmd.env("DISABLE_THOUGHT_LOGGING", "true");
            cmd.env_remove("REASONING_LEDGER_STORE");
        }))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn")
        .0;
    (Updates(tx).serve(transport).await.expect("initialize"), rx)
}

/// A client subscribed to a session hears of another process's append to it.
#[allow(deprecated)] // resources/subscribe: the `initialize` generation this client speaks
async fn live_updates_cross_processes(dirs: (&Path, &Path), extra: &[&str]) {
    let (follower, mut updates) = spawn_following(dirs.0, extra).await;
    let writer = spawn_with(dirs.1, extra, &[]).await;
    let started = call(&writer, "sequentialthinking", thought(1, 3, true, "first")).await;
    let session = structured(&started)["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let uri = format!("ledger://sessions/{session}/mermaid");
    follower
        .peer()
        .subscribe(SubscribeRequestParams::new(uri.clone()))
        .await
        .expect("subscribe");
    // Another session's commit is not announced for this one.
    call(
        &writer,
        "sequentialthinking",
        thought(1, 1, false, "elsewhere"),
    )
    .await;
    let mut args = thought(2, 3, true, "second");
    args["sessionId"] = json!(session);
    call(&writer, "sequentialthinking", args).await;
    let heard = tokio::time::timeout(Duration::from_secs(15), updates.recv())
        .await
        .expect("a resources/updated within 15 s")
        .unwrap();
    assert_eq!(heard, uri);
    // Unknown sessions cannot be subscribed to.
    let refused = follower
        .peer()
        .subscribe(SubscribeRequestParams::new("ledger://sessions/nope"))
        .await;
    assert!(refused.is_err());
    follower.cancel().await.unwrap();
    writer.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_resource_updates_on_redb_across_processes() {
    let dir = data_dir();
    live_updates_cross_processes((dir.path(), dir.path()), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_resource_updates_on_postgres_across_servers() {
    let schema = Schema::new();
    let (one, two) = (data_dir(), data_dir());
    live_updates_cross_processes((one.path(), two.path()), &["--store", &schema.url]).await;
}

/// Spawns a server on `url`, returning its client and pid.
async fn spawn_pg_with_pid(dir: &Path, url: &str) -> (Client, u32) {
    let dir = dir.to_path_buf();
    let url = url.to_string();
    let (transport, _) =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            cmd.arg("serve")
                .arg("--data-dir")
                .arg(&dir)
                .arg("--store")
                .arg(&url);
            cmd.env("DISABLE_THOUGHT_LOGGING", "true");
        }))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn server");
    let pid = transport.id().expect("pid");
    (().serve(transport).await.expect("initialize"), pid)
}

/// (session, seq, text) of every acknowledged thought.
type Acked = Vec<(String, u64, String)>;

/// Acknowledged calls (of 1,200) before the kill -9 of the fault test: some, not all.
const KILL_AFTER_ACKS: usize = 30;

fn assert_acked_stored(url: &str, dir: &Path, acked: &Acked) {
    for (session, seq, text) in acked {
        let jsonl = ok(
            &pg::cli(url, dir, &["export", session, "-f", "jsonl"]),
            "export",
        );
        let event: Value = serde_json::from_str(
            jsonl
                .lines()
                .nth(*seq as usize - 1)
                .unwrap_or_else(|| panic!("acked {session}#{seq} lost")),
        )
        .unwrap();
        assert_eq!(event["payload"]["thought"], json!(text), "{session}#{seq}");
    }
    let verified = ok(&pg::cli(url, dir, &["verify"]), "verify");
    assert!(verified.starts_with("ok: "), "{verified}");
}

async fn thoughts(client: &Client, label: &str, count: u64, acked: &mut Acked) -> Vec<String> {
    thoughts_reporting(client, label, count, &mut |item| acked.push(item)).await
}

/// `thoughts`, handing each acknowledged thought to `ack` as it comes.
async fn thoughts_reporting(
    client: &Client,
    label: &str,
    count: u64,
    ack: &mut (dyn FnMut((String, u64, String)) + Send),
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut session: Option<String> = None;
    for n in 1..=count {
        let text = format!("{label} {n}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_faults_kill_9_restart_and_cut_connections_lose_nothing_acknowledged() {
    let cluster = Cluster::start();
    let dir = data_dir();
    let url = cluster.url.clone();
    let mut acked: Acked = Vec::new();

    // 1. kill -9 mid-append: callers in flight when the server dies.
    let (client, pid) = spawn_pg_with_pid(dir.path(), &url).await;
    let client = std::sync::Arc::new(client);
    let shared = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    // How many calls were acknowledged so far, across the callers.
    let (progress, mut acknowledged) = tokio::sync::watch::channel(0usize);
    let progress = std::sync::Arc::new(progress);
    let mut callers = Vec::new();
    for caller in 0..3 {
        let (client, shared, progress) = (client.clone(), shared.clone(), progress.clone());
        callers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            thoughts_reporting(&client, &format!("caller {caller}"), 400, &mut |item| {
                mine.push(item);
                progress.send_modify(|n| *n += 1);
            })
            .await;
            shared.lock().unwrap().extend(mine);
        }));
    }
    // Mid-run: once the callers have had KILL_AFTER_ACKS calls acknowledged.
    tokio::time::timeout(
        Duration::from_secs(120),
        acknowledged.wait_for(|n| *n >= KILL_AFTER_ACKS),
    )
    .await
    .expect("the callers' first calls were acknowledged within 120 s")
    .unwrap();
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    for caller in callers {
        caller.await.unwrap();
    }
    acked.extend(shared.lock().unwrap().drain(..));
    assert!(
        !acked.is_empty(),
        "some calls were acknowledged before the kill"
    );
    assert!(acked.len() < 1200, "the kill came mid-run");
    assert_acked_stored(&url, dir.path(), &acked);

    // 2. PostgreSQL stops (as a crash: no shutdown checkpoint) and comes back while one
    //    server keeps running: calls fail with a clear error, then work again.
    let (client, _) = spawn_pg_with_pid(dir.path(), &url).await;
    assert!(thoughts(&client, "before", 3, &mut acked).await.is_empty());
    cluster.kill();
    let errors = thoughts(&client, "during", 2, &mut acked).await;
    assert_eq!(errors.len(), 2, "calls fail while the database is down");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("PostgreSQL") && e.contains("reconnects on its own")),
        "{errors:?}"
    );
    cluster.up();
    let errors = thoughts(&client, "after restart", 3, &mut acked).await;
    assert!(
        errors.is_empty(),
        "the server reconnected on its own: {errors:?}"
    );

    // 3. Connections cut under the running server.
    assert!(cluster.cut_connections() > 0);
    let errors = thoughts(&client, "after cut", 3, &mut acked).await;
    assert!(errors.is_empty(), "reconnected after a cut: {errors:?}");
    client.cancel().await.unwrap();
    assert_acked_stored(&url, dir.path(), &acked);
}

// ---------------------------------------------------------------------------------------
// Streamable HTTP

/// A `serve --http 127.0.0.1:0` server; its stderr told where it listens.
struct HttpServer {
    child: tokio::process::Child,
    url: String,
    stderr_lines: Vec<String>,
}

impl HttpServer {
    async fn start(dir: &Path, extra: &[&str], token: Option<&str>) -> HttpServer {
        Self::start_with(dir, extra, token, &[]).await
    }

    async fn start_with(
        dir: &Path,
        extra: &[&str],
        token: Option<&str>,
        env: &[(&str, &str)],
    ) -> HttpServer {
        // reqwest is built without a TLS provider of its own (see Cargo.toml): every
        // client, plain HTTP included, needs one installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        use tokio::io::AsyncBufReadExt;
        let mut command = tokio::process::Command::new(bin());
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(dir)
            .args(["--http", "127.0.0.1:0"])
            .args(extra)
            .env("DISABLE_THOUGHT_LOGGING", "true")
            .env_remove("REASONING_LEDGER_STORE")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        match token {
            Some(token) => command.env("REASONING_LEDGER_TOKEN", token),
            None => command.env_remove("REASONING_LEDGER_TOKEN"),
        };
        for var in crate::common::PROVIDER_VARS {
            command.env_remove(var);
        }
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("spawn http server");
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut stderr_lines = Vec::new();
        let url = loop {
            let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                .await
                .expect("the server says where it listens")
                .unwrap()
                .unwrap_or_else(|| panic!("server exited: {stderr_lines:?}"));
            stderr_lines.push(line.clone());
            if let Some(start) = line.find("http://") {
                let url = line[start..].split_whitespace().next().unwrap().to_string();
                break url;
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        HttpServer {
            child,
            url,
            stderr_lines,
        }
    }

    fn transport(
        &self,
        token: Option<&str>,
    ) -> rmcp::transport::StreamableHttpClientTransport<reqwest::Client> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.clone());
        if let Some(token) = token {
            config = config.auth_header(token.to_string());
        }
        StreamableHttpClientTransport::from_config(config)
    }

    async fn client(&self, token: Option<&str>) -> Result<Client, String> {
        ().serve(self.transport(token))
            .await
            .map_err(|e| e.to_string())
    }
}

async fn post(
    url: &str,
    token: Option<&str>,
    origin: Option<&str>,
    body: Value,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.expect("http")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_needs_the_bearer_token_and_writes_nothing_without_it() {
    let dir = data_dir();
    let server = HttpServer::start(
        dir.path(),
        &[],
        Some("s3cret-token-of-at-least-32-characters"),
    )
    .await;
    assert!(server.url.starts_with("http://127.0.0.1:") && server.url.ends_with("/mcp"));
    // rmcp's client with the token: the whole protocol works.
    let client = server
        .client(Some("s3cret-token-of-at-least-32-characters"))
        .await
        .expect("initialize with token");
    let result = call(
        &client,
        "sequentialthinking",
        thought(1, 1, false, "over http"),
    )
    .await;
    assert!(!is_error(&result));
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "sequentialthinking"));
    client.cancel().await.unwrap();
    // Without it, or with a wrong one: refused before MCP.
    assert!(server.client(None).await.is_err());
    assert!(server.client(Some("wrong")).await.is_err());
    let write = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params":
        {"name": "sequentialthinking", "arguments": thought(1, 1, false, "sneaked in")}});
    for token in [
        None,
        Some("wrong"),
        Some("s3cret-token-of-at-least-32-characters-but-longer"),
    ] {
        let response = post(&server.url, token, None, write.clone()).await;
        assert_eq!(response.status(), 401, "token {token:?}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
    }
    // A foreign browser origin is refused even with the token (DNS rebinding).
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params":
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let response = post(
        &server.url,
        Some("s3cret-token-of-at-least-32-characters"),
        Some("http://evil.example"),
        initialize.clone(),
    )
    .await;
    assert_eq!(response.status(), 403);
    let port = server
        .url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp");
    let response = post(
        &server.url,
        Some("s3cret-token-of-at-least-32-characters"),
        Some(&format!("http://localhost:{port}")),
        initialize,
    )
    .await;
    assert_eq!(response.status(), 200);
    drop(server);
    // Only the call made with the token is stored.
    let listing = ok(
        &common::cli(dir.path(), &["sessions", "--json"]),
        "sessions",
    );
    let sessions = session_ids(&listing);
    assert_eq!(sessions.len(), 1, "{listing}");
    let jsonl = ok(
        &common::cli(dir.path(), &["export", &sessions[0], "-f", "jsonl"]),
        "export",
    );
    assert!(jsonl.contains("over http") && !jsonl.contains("sneaked in"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_generates_a_token_file_and_serves_a_postgres_ledger() {
    let dir = data_dir();
    let schema = Schema::new();
    let server = HttpServer::start(dir.path(), &["--store", &schema.url], None).await;
    let path = dir.path().join("http-token");
    assert!(
        server
            .stderr_lines
            .iter()
            .any(|l| l.contains(path.to_str().unwrap())),
        "the token file's path is printed: {:?}",
        server.stderr_lines
    );
    let token = std::fs::read_to_string(&path).unwrap().trim().to_string();
    assert_eq!(token.len(), 64);
    let client = server.client(Some(&token)).await.expect("initialize");
    let result = call(
        &client,
        "sequentialthinking",
        thought(1, 1, false, "shared"),
    )
    .await;
    let session = structured(&result)["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    client.cancel().await.unwrap();
    let jsonl = ok(
        &pg::cli(
            &schema.url,
            dir.path(),
            &["export", &session, "-f", "jsonl"],
        ),
        "export",
    );
    assert!(jsonl.contains("shared"));
    // The same token next time.
    drop(server);
    let again = HttpServer::start(dir.path(), &["--store", &schema.url], None).await;
    assert!(again.client(Some(&token)).await.is_ok());
    let _ = again.child.id();
}

/// A client whose model answers every sampling request with one text.
#[derive(Clone)]
struct Sampler {
    answer: &'static str,
    asked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

#[allow(deprecated)] // rmcp marks sampling deprecated (SEP-2577); the protocol has it.
impl ClientHandler for Sampler {
    fn get_info(&self) -> rmcp::model::ClientInfo {
        rmcp::model::ClientInfo::new(
            rmcp::model::ClientCapabilities::builder()
                .enable_sampling()
                .build(),
            rmcp::model::Implementation::new("http-sampling-test", "1"),
        )
    }

    async fn create_message(
        &self,
        _params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text(self.answer),
            "client-model".into(),
        )
        .with_stop_reason(rmcp::model::CreateMessageResult::STOP_REASON_END_TURN))
    }
}

const SAMPLED: &str = "[Final Conclusion]\nSampled over HTTP.\nConfidence: 0.8";

/// Sampling reaches a client connected over streamable HTTP, in both generations: a
/// `sampling/createMessage` on the `initialize` session's stream, and the input-required
/// round trip of 2026-07-28 (served statelessly, the state sealed by the process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_reaches_an_http_client_in_both_protocol_generations() {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let dir = data_dir();
    let server = HttpServer::start(
        dir.path(),
        &["--toolsets", "agent,ledger"],
        Some("sampling-token-of-at-least-32-characters"),
    )
    .await;
    for (generation, session) in [("initialize", "h1"), ("2026-07-28", "h2")] {
        let sampler = Sampler {
            answer: SAMPLED,
            asked: Default::default(),
        };
        let asked = sampler.asked.clone();
        let transport = server.transport(Some("sampling-token-of-at-least-32-characters"));
        let client = if generation == "initialize" {
            sampler.serve(transport).await.expect("initialize")
        } else {
            sampler
                .serve_with_lifecycle(
                    transport,
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                    },
                )
                .await
                .expect("discover")
        };
        let result = client
            .call_tool(
                rmcp::model::CallToolRequestParams::new("create_branch").with_arguments(
                    common::object(json!({"session_id": session, "input_text": "Does the client model answer when the server is reached over HTTP?"})),
                ),
            )
            .await
            .unwrap_or_else(|e| panic!("{generation}: {e}"));
        let answer = structured(&result);
        assert_eq!(
            answer["conclusion"], "Sampled over HTTP.",
            "{generation}: {answer}"
        );
        assert_eq!(
            asked.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "{generation}"
        );
        let history = structured(
            &client
                .call_tool(
                    rmcp::model::CallToolRequestParams::new("get_history").with_arguments(
                        common::object(json!({"sessionId": format!("agent:{session}")})),
                    ),
                )
                .await
                .unwrap(),
        );
        let transport = &history["events"][1]["payload"]["model_call"]["transport"];
        let expected = if generation == "initialize" {
            "sampling"
        } else {
            "sampling-input-required"
        };
        assert_eq!(transport, expected, "{generation}: {history}");
        client.cancel().await.unwrap();
    }
}
