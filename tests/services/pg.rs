//! PostgreSQL for the integration tests: the server of `REASONING_LEDGER_TEST_PG` (a URL;
//! `.ci/run` starts one with `tools/pg` and sets it), else a throwaway cluster this test
//! process starts once with `tools/pg start-for <pid>` (stopped and removed when the
//! process exits). Each test gets its own schema; the fault tests their own cluster. A
//! test that cannot reach its server fails; none skips.

#![allow(dead_code)]

use postgres::{Client, NoTls};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

pub(crate) const TEST_PG_ENV: &str = "REASONING_LEDGER_TEST_PG";

fn script() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tools/pg")
}

/// Runs `tools/pg` with `args`; panics with its stderr when it fails.
pub(crate) fn tools_pg(args: &[&str]) -> String {
    let output = std::process::Command::new(script())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run tools/pg: {e}"));
    assert!(
        output.status.success(),
        "tools/pg {args:?} failed (set {TEST_PG_ENV} to a server's URL): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

/// The tests' shared server.
pub(crate) fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| match std::env::var(TEST_PG_ENV) {
        Ok(url) if !url.trim().is_empty() => url.trim().to_string(),
        _ => tools_pg(&["start-for", &std::process::id().to_string()]),
    })
}

/// Runs `f` on a thread of its own: the blocking `postgres` client starts a runtime of its
/// own, which it may not do on a thread of the async tests' runtime.
fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f)
        .join()
        .expect("postgres helper thread")
}

fn with_schema(url: &str, schema: &str) -> String {
    let joint = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joint}options=-csearch_path%3D{schema}")
}

fn new_schema(server: &str) -> (String, String) {
    let server = server.to_string();
    off_runtime(move || new_schema_here(&server))
}

fn new_schema_here(server: &str) -> (String, String) {
    let schema = format!("it_{}", ulid::Ulid::generate().to_string().to_lowercase());
    let mut admin = Client::connect(server, NoTls)
        .unwrap_or_else(|e| panic!("cannot reach the tests' PostgreSQL at {server}: {e}"));
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .expect("create schema");
    (with_schema(server, &schema), schema)
}

/// An empty schema on the shared server: one ledger.
pub(crate) struct Schema {
    pub url: String,
    name: String,
    server: String,
}

impl Schema {
    pub(crate) fn new() -> Schema {
        let server = server_url().to_string();
        let (url, name) = new_schema(&server);
        Schema { url, name, server }
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        off_runtime(move || {
            if let Ok(mut admin) = Client::connect(&server, NoTls) {
                let _ = admin.batch_execute(&format!("DROP SCHEMA {name} CASCADE"));
            }
        });
    }
}

/// A PostgreSQL cluster of one test's own (to restart or kill without disturbing others).
pub(crate) struct Cluster {
    pub dir: PathBuf,
    pub url: String,
}

impl Cluster {
    pub(crate) fn start() -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("reasoning-ledger-pg-test.")
            .tempdir_in("/tmp")
            .unwrap()
            .keep();
        let url = tools_pg(&["start", dir.to_str().unwrap()]);
        Cluster { dir, url }
    }

    /// A cluster of a PostgreSQL with pgvector (`tools/pg start-vector`: installed once
    /// into a cache).
    pub(crate) fn start_with_pgvector() -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("reasoning-ledger-pgvector-test.")
            .tempdir_in("/tmp")
            .unwrap()
            .keep();
        let url = tools_pg(&["start-vector", dir.to_str().unwrap()]);
        Cluster { dir, url }
    }

    fn dir(&self) -> &str {
        self.dir.to_str().unwrap()
    }

    /// Stops it at once (no shutdown checkpoint), as a crash would.
    pub(crate) fn kill(&self) {
        tools_pg(&["kill", self.dir()]);
    }

    pub(crate) fn up(&self) {
        tools_pg(&["up", self.dir()]);
    }

    /// Closes every connection of reasoning-ledger servers (a cut connection).
    pub(crate) fn cut_connections(&self) -> i64 {
        let url = self.url.clone();
        off_runtime(move || {
            let mut admin = Client::connect(&url, NoTls).expect("admin connection");
            admin
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE application_name = 'reasoning-ledger'",
                    &[],
                )
                .unwrap()
                .get(0)
        })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(script())
            .args(["stop", self.dir()])
            .output();
    }
}

/// Runs the CLI on the ledger at `url` (with a data directory of its own).
pub(crate) fn cli(url: &str, dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(crate::common::bin())
        .arg("--data-dir")
        .arg(dir)
        .arg("--store")
        .arg(url)
        .args(args)
        .env_remove("REASONING_LEDGER_DIR")
        .env_remove("REASONING_LEDGER_STORE")
        .output()
        .expect("run cli")
}
