//! Semantic recall (issue 21) through the built binary, against a stub OpenAI-compatible
//! embeddings server started here: deterministic vectors where synonyms share a
//! dimension, so a paraphrase with no shared word lands near its target. A paraphrase is
//! found in semantic and hybrid mode and not in lexical; hybrid keeps exact-word hits on
//! top, and a rare word beside a common one (issue 45); the server down → lexical with a
//! note, back up → the missed events embedded; kill -9 while embedding → nothing lost or
//! doubled, `verify` passes; a canary key reaches nothing but the `Authorization` header.

use crate::common::{self, Client, bin, call, data_dir, is_error, structured, thought};
use rmcp::ServiceExt;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Dimensions of the stub's vectors.
const DIMS: usize = 64;
/// Words that mean the same, by concept (a concept's words share its dimension).
const CONCEPTS: &[&[&str]] = &[
    &["faster", "accelerating", "speed", "quicker", "sped"],
    &["postgres", "sql", "database", "db"],
    &["queries", "lookups", "query"],
    &["garden", "plants", "watering"],
];
/// The longest a test waits for the embedder (the bound is 30 s after return).
const EMBED_DEADLINE: Duration = Duration::from_secs(40);
const CANARY: &str = "sk-canary-embeddings-5f3a9c";

/// The stub's vector of `text`: a word of a concept adds to the concept's dimension,
/// any other word to one hashed among the rest.
fn vector(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; DIMS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        let dim = match CONCEPTS.iter().position(|c| c.contains(&word.as_str())) {
            Some(concept) => concept,
            None => {
                let hash = word.bytes().fold(1469598103934665603u64, |h, b| {
                    (h ^ b as u64).wrapping_mul(1099511628211)
                });
                CONCEPTS.len() + (hash % (DIMS - CONCEPTS.len()) as u64) as usize
            }
        };
        v[dim] += 1.0;
    }
    v
}

/// The stub server: `/embeddings` answers with [`vector`]s; while `down` it answers 503
/// (its body holding the key it was sent, which must come out redacted); while `hang` it
/// does not answer.
struct Stub {
    base_url: String,
    down: Arc<AtomicBool>,
    hang: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
    authorizations: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Stub {
    async fn start() -> Stub {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let down = Arc::new(AtomicBool::new(false));
        let hang = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let (d, h, r, a) = (
            down.clone(),
            hang.clone(),
            requests.clone(),
            authorizations.clone(),
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (d, h, r, a) = (d.clone(), h.clone(), r.clone(), a.clone());
                tokio::spawn(async move {
                    let Some((head, body)) = read_request(&mut stream).await else {
                        return;
                    };
                    r.fetch_add(1, Ordering::SeqCst);
                    let auth = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .starts_with("authorization:")
                                .then(|| l.to_string())
                        })
                        .unwrap_or_default();
                    a.lock().unwrap().push(auth.clone());
                    // Held open, unanswered, while it hangs (a search gives up at 2 s).
                    while h.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    let (status, reply) = if d.load(Ordering::SeqCst) {
                        (
                            503,
                            format!("{{\"error\":\"overloaded; you sent {auth}\"}}"),
                        )
                    } else {
                        let request: Value = serde_json::from_str(&body).unwrap();
                        let data: Vec<Value> = request["input"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .enumerate()
                            .map(|(i, t)| json!({"index": i, "embedding": vector(t.as_str().unwrap())}))
                            .collect();
                        (
                            200,
                            json!({"data": data, "model": request["model"]}).to_string(),
                        )
                    };
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        reply.len()
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(reply.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Stub {
            base_url,
            down,
            hang,
            requests,
            authorizations,
            task,
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "REASONING_LEDGER_EMBEDDINGS_BASE_URL",
                self.base_url.clone(),
            ),
            ("REASONING_LEDGER_EMBEDDINGS_MODEL", "stub-concepts".into()),
            ("REASONING_LEDGER_EMBEDDINGS_API_KEY", CANARY.into()),
            ("REASONING_LEDGER_EMBEDDINGS_BACKOFF_MS", "20".into()),
        ]
    }
}

async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<(String, String)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = text[..end].to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                let body = String::from_utf8_lossy(&data[end + 4..end + 4 + length]).into_owned();
                return Some((head, body));
            }
        }
    }
}

/// `serve` on `dir` with the stub's settings, its stderr written to `dir/stderr.log`;
/// returns the client and the server's pid.
async fn serve(dir: &Path, env: &[(&'static str, String)]) -> (Client, u32) {
    serve_with(dir, env, &[]).await
}

/// [`serve`] with extra arguments.
async fn serve_with(dir: &Path, env: &[(&'static str, String)], extra: &[&str]) -> (Client, u32) {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let dir = dir.to_path_buf();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("stderr.log"))
        .unwrap();
    let env = env.to_vec();
    let (transport, _) =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            cmd.arg("serve")
                .arg("--data-dir")
                .arg(&dir)
                .args(["--toolsets", "thinking,ledger"])
                .args(&extra);
            cmd.env("DISABLE_THOUGHT_LOGGING", "true");
            cmd.env("RUST_LOG", "info");
            cmd.env_remove("REASONING_LEDGER_TOOLSETS");
            cmd.env_remove("REASONING_LEDGER_STORE");
            for (k, v) in &env {
                cmd.env(k, v);
            }
        }))
        .stderr(std::process::Stdio::from(log))
        .spawn()
        .expect("spawn server");
    let pid = transport.id().expect("a pid");
    (().serve(transport).await.expect("initialize"), pid)
}

/// The CLI on `dir` with `env`.
fn cli(dir: &Path, args: &[&str], env: &[(&'static str, String)]) -> std::process::Output {
    let mut cmd = std::process::Command::new(bin());
    cmd.arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("REASONING_LEDGER_DIR")
        .env_remove("REASONING_LEDGER_STORE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run cli")
}

/// Waits until `verify` says the vectors reach the ledger's end; returns that line.
fn wait_embedded(dir: &Path, env: &[(&'static str, String)]) -> String {
    let started = Instant::now();
    loop {
        let out = cli(dir, &["verify"], env);
        assert!(out.status.success(), "{}", common::stderr(&out));
        let text = common::stdout(&out);
        if let Some(line) = text.lines().find(|l| l.contains("reach the ledger's end")) {
            return line.to_string();
        }
        assert!(
            started.elapsed() < EMBED_DEADLINE,
            "not embedded within {EMBED_DEADLINE:?}: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

const TARGET: &str = "Made the Postgres queries faster with a covering index";
const PARAPHRASE: &str = "accelerating sql lookups";
const DISTRACTORS: &[&str] = &[
    "Tuned the garden watering schedule for the plants",
    "Wrote release notes for the linker",
    "Fixed a flaky network test in the retry loop",
    "Reviewed the budget of the cloud account",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paraphrase_is_found_by_meaning_and_hybrid_keeps_exact_words_on_top() {
    let stub = Stub::start().await;
    let env = stub.env();
    let dir = data_dir();
    let (client, _) = serve(dir.path(), &env).await;
    let target = common::one_thought_session(&client, TARGET).await;
    let mut others = Vec::new();
    for text in DISTRACTORS {
        others.push(common::one_thought_session(&client, text).await);
    }
    let reach = tokio::task::block_in_place(|| wait_embedded(dir.path(), &env));
    assert!(reach.contains("5 vector(s)"), "{reach}");

    let lexical = common::search_history(&client, PARAPHRASE, "lexical").await;
    assert!(
        common::matched_sessions(&lexical).is_empty(),
        "shares no word: {lexical}"
    );
    let semantic = common::search_history(&client, PARAPHRASE, "semantic").await;
    assert_eq!(
        common::matched_sessions(&semantic).first(),
        Some(&target),
        "{semantic}"
    );
    assert_eq!(semantic["matches"][0]["rankers"], json!(["semantic"]));
    let hybrid = common::search_history(&client, PARAPHRASE, "hybrid").await;
    assert_eq!(
        common::matched_sessions(&hybrid).first(),
        Some(&target),
        "{hybrid}"
    );
    // The default with embeddings configured is hybrid.
    let default = structured(&call(&client, "search_history", json!({"query": PARAPHRASE})).await);
    assert_eq!(
        common::matched_sessions(&default).first(),
        Some(&target),
        "{default}"
    );

    let exact = common::search_history(&client, "linker release", "hybrid").await;
    assert_eq!(
        common::matched_sessions(&exact).first(),
        Some(&others[1]),
        "{exact}"
    );
    assert_eq!(
        exact["matches"][0]["rankers"],
        json!(["lexical", "semantic"]),
        "{exact}"
    );
    assert!(
        exact["matches"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("**")
    );
    assert!(exact.get("nextCursor").is_none() || exact["matches"].as_array().unwrap().len() == 10);

    let refused = call(
        &client,
        "search_history",
        json!({"query": "x", "mode": "fuzzy"}),
    )
    .await;
    assert!(is_error(&refused));
    assert!(common::text(&refused).contains("lexical, semantic or hybrid"));

    // The CLI: the same modes; reindex --embeddings embeds everything again.
    let out = cli(
        dir.path(),
        &["search", PARAPHRASE, "--mode", "semantic", "--json"],
        &env,
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let answer: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    assert_eq!(
        common::matched_sessions(&answer).first(),
        Some(&target),
        "{answer}"
    );
    let out = cli(dir.path(), &["reindex", "--embeddings"], &env);
    assert!(out.status.success(), "{}", common::stderr(&out));
    assert!(
        common::stdout(&out).contains("embedded 5 event(s) with stub-concepts"),
        "{}",
        common::stdout(&out)
    );
    // Without embeddings configured: as before (no rankers, no note), and --embeddings
    // says what is missing.
    let out = cli(dir.path(), &["search", "linker", "--json"], &[]);
    let answer: Value = serde_json::from_str(&common::stdout(&out)).unwrap();
    assert!(answer.get("note").is_none() && answer["matches"][0].get("rankers").is_none());
    let out = cli(dir.path(), &["reindex", "--embeddings"], &[]);
    assert!(!out.status.success());
    client.cancel().await.unwrap();

    // serve --related: a first thought sharing no word with the target is answered with
    // it (hybrid, through its meaning).
    let (client, _) = serve_with(dir.path(), &env, &["--related", "3"]).await;
    let answer = structured(
        &call(
            &client,
            "sequentialthinking",
            thought(1, 2, true, PARAPHRASE),
        )
        .await,
    );
    let related: Vec<&str> = answer["related"]
        .as_array()
        .unwrap_or_else(|| panic!("no related sessions: {answer}"))
        .iter()
        .map(|r| r["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(related.first(), Some(&target.as_str()), "{answer}");
    client.cancel().await.unwrap();
}

/// Issue 45: a session holding a rare word ("zanzibar") among sessions that say "speed"
/// or mean it. The semantic ranker guesses the sessions about speed first; lexical puts
/// the rare word's session first, and so must hybrid: a match of a word one session
/// holds is evidence, one of a word most sessions hold is not.
const RARE_TARGET: &str = "Booked the ferry to Zanzibar for the team offsite";
const RARE_QUERY: &str = "zanzibar speed";
const SPEED_SESSIONS: &[&str] = &[
    "Improved the speed of the build cache",
    "Measured page speed after the redesign",
    "The speed of the test suite doubled",
    "Network speed dropped during the nightly backup",
    "Raised the speed of log shipping",
    "Compared the speed of two JSON parsers",
    "Made the deploys faster",
    "Quicker reviews with smaller pull requests",
    "Sped up the importer",
    "Tuned the garden watering schedule for the plants",
    "Wrote release notes for the linker",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rare_word_beside_a_common_one_is_found_first_in_hybrid() {
    let stub = Stub::start().await;
    let env = stub.env();
    let dir = data_dir();
    let (client, _) = serve(dir.path(), &env).await;
    let target = common::one_thought_session(&client, RARE_TARGET).await;
    for text in SPEED_SESSIONS {
        common::one_thought_session(&client, text).await;
    }
    tokio::task::block_in_place(|| wait_embedded(dir.path(), &env));
    let lexical = common::search_history(&client, RARE_QUERY, "lexical").await;
    assert_eq!(
        common::matched_sessions(&lexical).first(),
        Some(&target),
        "{lexical}"
    );
    // The semantic ranker alone guesses the sessions about speed first.
    let semantic = common::search_history(&client, RARE_QUERY, "semantic").await;
    let semantic_rank = common::matched_sessions(&semantic)
        .iter()
        .position(|s| *s == target);
    assert!(semantic_rank.is_none_or(|r| r >= 3), "{semantic}");
    let hybrid = common::search_history(&client, RARE_QUERY, "hybrid").await;
    assert_eq!(
        common::matched_sessions(&hybrid).first(),
        Some(&target),
        "{hybrid}"
    );
    assert_eq!(
        hybrid["matches"][0]["rankers"][0],
        json!("lexical"),
        "{hybrid}"
    );
    // A prefix of the rare word is the same evidence: "Zanzibar" holds `zanzib*` (while
    // a match had to hold the prefix as a word, it weighed nothing and the semantic
    // ranker's guesses came first).
    // (30 deep: the stub's semantic ranking of "zanzib speed" holds the target below
    // the first 11.)
    let prefixed = structured(
        &call(
            &client,
            "search_history",
            json!({"query": RARE_PREFIX_QUERY, "mode": "hybrid", "limit": 30}),
        )
        .await,
    );
    assert_eq!(
        common::matched_sessions(&prefixed).first(),
        Some(&target),
        "{prefixed}"
    );
    client.cancel().await.unwrap();
}

/// [`RARE_QUERY`] with the rare word as a prefix.
const RARE_PREFIX_QUERY: &str = "zanzib* speed";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_down_or_hanging_answers_lexically_and_missed_events_are_embedded_on_return() {
    let stub = Stub::start().await;
    let env = stub.env();
    let dir = data_dir();
    let (client, _) = serve(dir.path(), &env).await;
    stub.down.store(true, Ordering::SeqCst);
    let target = common::one_thought_session(&client, TARGET).await;
    let started = Instant::now();
    let answer = common::search_history(&client, "postgres", "hybrid").await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        common::matched_sessions(&answer),
        vec![target.clone()],
        "{answer}"
    );
    assert_eq!(answer["matches"][0]["rankers"], json!(["lexical"]));
    let note = answer["note"].as_str().unwrap();
    assert!(note.contains("these are lexical matches"), "{note}");
    assert!(!note.contains("canary"), "{note}");

    stub.down.store(false, Ordering::SeqCst);
    stub.hang.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let answer = common::search_history(&client, "postgres speed", "semantic").await;
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
    assert!(
        answer["note"]
            .as_str()
            .unwrap()
            .contains("did not answer within 2 s"),
        "{answer}"
    );

    // Back up: the missed event is embedded without another write.
    stub.hang.store(false, Ordering::SeqCst);
    let back = Instant::now();
    tokio::task::block_in_place(|| wait_embedded(dir.path(), &env));
    assert!(
        back.elapsed() < Duration::from_secs(30),
        "{:?}",
        back.elapsed()
    );
    let semantic = common::search_history(&client, PARAPHRASE, "semantic").await;
    assert_eq!(
        common::matched_sessions(&semantic),
        vec![target],
        "{semantic}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_embedding_loses_and_doubles_nothing() {
    let stub = Stub::start().await;
    let env = stub.env();
    let dir = data_dir();
    // Written without embeddings, so the whole ledger is behind when the embedder starts.
    let (client, _) = serve(dir.path(), &[]).await;
    const SESSIONS: usize = 150;
    for i in 0..SESSIONS {
        common::one_thought_session(
            &client,
            &format!("killtest thought number {i} about postgres"),
        )
        .await;
    }
    client.cancel().await.unwrap();
    let (client, pid) = serve(dir.path(), &env).await;
    // Killed once the embedder has sent a few batches (and is likely inside one).
    let started = Instant::now();
    while stub.requests.load(Ordering::SeqCst) < 2 {
        assert!(
            started.elapsed() < EMBED_DEADLINE,
            "the embedder never called"
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    drop(client);
    let (client, _) = serve(dir.path(), &env).await;
    let reach = tokio::task::block_in_place(|| wait_embedded(dir.path(), &env));
    assert!(reach.contains(&format!("{SESSIONS} vector(s)")), "{reach}");
    let out = cli(dir.path(), &["verify"], &env);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let found = common::search_history(&client, "killtest", "semantic").await;
    assert_eq!(found["matches"].as_array().unwrap().len(), 10, "{found}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_key_reaches_only_the_authorization_header() {
    let stub = Stub::start().await;
    let env = stub.env();
    let dir = data_dir();
    // The first calls fail with a body that echoes the key (logged, redacted).
    stub.down.store(true, Ordering::SeqCst);
    let (client, _) = serve(dir.path(), &env).await;
    let target = common::one_thought_session(&client, TARGET).await;
    let answer = common::search_history(&client, PARAPHRASE, "hybrid").await;
    stub.down.store(false, Ordering::SeqCst);
    tokio::task::block_in_place(|| wait_embedded(dir.path(), &env));
    let found = common::search_history(&client, PARAPHRASE, "hybrid").await;
    assert_eq!(common::matched_sessions(&found), vec![target], "{found}");
    client.cancel().await.unwrap();
    assert!(
        stub.authorizations
            .lock()
            .unwrap()
            .iter()
            .all(|a| a.ends_with(&format!("Bearer {CANARY}"))),
        "the key is sent as a bearer token"
    );
    let export = cli(dir.path(), &["export", "--all", "--format", "jsonl"], &env);
    let verify = cli(dir.path(), &["verify"], &env);
    let mut seen = vec![
        ("answer", answer.to_string()),
        ("answer", found.to_string()),
        ("export", common::stdout(&export)),
        ("verify", common::stdout(&verify) + &common::stderr(&verify)),
    ];
    for entry in walk(dir.path()) {
        let bytes = std::fs::read(&entry).unwrap();
        seen.push((
            "a file of the data directory",
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    let log = std::fs::read_to_string(dir.path().join("stderr.log")).unwrap();
    assert!(
        log.contains("embedding"),
        "the server logged nothing of embedding: {log}"
    );
    for (what, text) in seen {
        assert!(!text.contains(CANARY), "the key reached {what}");
        assert!(
            !text.contains("canary-embeddings"),
            "part of the key reached {what}"
        );
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
