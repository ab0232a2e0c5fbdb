//! Test builds only: a PostgreSQL for the unit tests, and one empty schema per case.
//!
//! The server is `REASONING_LEDGER_TEST_PG` (a URL; `.ci/run` starts one with `tools/pg`
//! and sets it), else a throwaway cluster this test process starts once with
//! `tools/pg start-for <pid>` (stopped and removed when the process exits). A test that
//! cannot reach its server fails; none skips.

use postgres::{Client, NoTls};
use std::sync::OnceLock;

/// Environment variable naming the PostgreSQL server the tests use.
pub(crate) const TEST_PG_ENV: &str = "REASONING_LEDGER_TEST_PG";

/// The URL of the tests' server, starting a throwaway one the first time if none is given.
pub(crate) fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var(TEST_PG_ENV)
            && !url.trim().is_empty()
        {
            return url.trim().to_string();
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/pg");
        let output = std::process::Command::new(script)
            .arg("start-for")
            .arg(std::process::id().to_string())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
        assert!(
            output.status.success(),
            "{script} could not start PostgreSQL (set {TEST_PG_ENV} to a server's URL): {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .expect("a URL")
            .trim()
            .to_string()
    })
}

/// `url` with its connections' `search_path` set to `schema`.
pub(crate) fn with_schema(url: &str, schema: &str) -> String {
    let joint = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joint}options=-csearch_path%3D{schema}")
}

/// One empty schema on the tests' server, dropped with the value.
pub(crate) struct TestDb {
    pub url: String,
    pub schema: String,
}

impl TestDb {
    pub(crate) fn new() -> TestDb {
        let server = server_url();
        let schema = format!("t_{}", ulid::Ulid::generate().to_string().to_lowercase());
        let mut admin = Client::connect(server, NoTls)
            .unwrap_or_else(|e| panic!("cannot reach the tests' PostgreSQL at {server}: {e}"));
        admin
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .expect("create a schema");
        TestDb {
            url: with_schema(server, &schema),
            schema,
        }
    }

    /// A plain connection into the schema (to inspect or damage tables).
    pub(crate) fn client(&self) -> Client {
        Client::connect(&self.url, NoTls).expect("connect")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut admin) = Client::connect(server_url(), NoTls) {
            let _ = admin.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema));
        }
    }
}
