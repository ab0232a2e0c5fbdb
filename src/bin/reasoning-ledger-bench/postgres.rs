//! The store benchmark: the same server, the same calls, on redb and on PostgreSQL in one
//! run, beside PostgreSQL's own floor (one autocommitted `INSERT` of an event-sized row on
//! the same server).
//!
//! Owns: finding a PostgreSQL (`--postgres URL`, else a throwaway one started with
//! `tools/pg` under the scratch directory and stopped afterwards), a schema of its own
//! for the run, and the figures: one caller's `sequentialthinking` p50 and 8 calls in
//! flight's durable thoughts per second, per store. Must not: judge the figures (targets
//! are printed beside them, never enforced).

use crate::servers::session::{DATA_DIR_PLACEHOLDER, Session, call_concurrent, call_sequential};
use crate::servers::stats::{fmt_duration, median};
use anyhow::Context;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Calls in flight for the throughput figure.
pub(crate) const IN_FLIGHT: usize = 8;

/// Calls before the measured ones, per server.
const WARMUP_CALLS: usize = 50;

/// `totalThoughts` of every call (more than any run makes).
const TOTAL_THOUGHTS: usize = 1_000_000;

/// Bytes of the row the floor's `INSERT` writes (about one stored thought event).
const FLOOR_ROW_BYTES: usize = 400;

/// The figures of one store.
#[derive(Serialize)]
pub(crate) struct StoreFigures {
    pub store: String,
    /// One event appended through the store alone (`Ledger::write_blocking`), p50.
    pub store_append_p50_us: f64,
    pub one_caller_p50_us: f64,
    pub in_flight_thoughts_per_s: f64,
}

/// The report: both stores and PostgreSQL's floor.
#[derive(Serialize)]
pub(crate) struct StoreReport {
    pub calls: usize,
    pub in_flight: usize,
    pub insert_commit_p50_us: f64,
    pub redb: StoreFigures,
    pub postgres: StoreFigures,
}

impl std::fmt::Display for StoreReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let us = |v: f64| fmt_duration(Duration::from_secs_f64(v / 1e6));
        writeln!(
            f,
            "## Stores: redb and PostgreSQL ({} calls, {} in flight)\n",
            self.calls, self.in_flight
        )?;
        writeln!(f, "| figure | redb | PostgreSQL | target |")?;
        writeln!(f, "|---|---|---|---|")?;
        writeln!(
            f,
            "| append through the store, one caller, p50 | {} | {} | PostgreSQL ≤ 1.5 × one INSERT+COMMIT ({}): {:.2} × |",
            us(self.redb.store_append_p50_us),
            us(self.postgres.store_append_p50_us),
            us(self.insert_commit_p50_us),
            self.postgres.store_append_p50_us / self.insert_commit_p50_us
        )?;
        writeln!(
            f,
            "| sequentialthinking over stdio, one caller, p50 | {} | {} | — |",
            us(self.redb.one_caller_p50_us),
            us(self.postgres.one_caller_p50_us),
        )?;
        writeln!(
            f,
            "| durable thoughts/s, {} in flight | {:.0} | {:.0} | PostgreSQL ≥ 0.5 × redb: {:.2} × |",
            self.in_flight,
            self.redb.in_flight_thoughts_per_s,
            self.postgres.in_flight_thoughts_per_s,
            self.postgres.in_flight_thoughts_per_s / self.redb.in_flight_thoughts_per_s
        )
    }
}

/// A PostgreSQL for the run: the given URL, or a throwaway cluster stopped on drop.
pub(crate) struct Database {
    pub(crate) url: String,
    started: Option<PathBuf>,
}

impl Database {
    pub(crate) fn find(url: Option<String>, scratch: &Path) -> anyhow::Result<Database> {
        if let Some(url) = url {
            return Ok(Database { url, started: None });
        }
        let script = std::env::current_dir()?.join("tools/pg");
        anyhow::ensure!(
            script.is_file(),
            "no PostgreSQL to measure: pass --postgres URL, or run from the repository root \
             (tools/pg starts a throwaway one), or --no-postgres"
        );
        let dir = scratch.join("pg");
        eprintln!(
            "bench: starting a throwaway PostgreSQL in {}",
            dir.display()
        );
        let output = std::process::Command::new(&script)
            .arg("start")
            .arg(&dir)
            .output()?;
        anyhow::ensure!(
            output.status.success(),
            "tools/pg could not start PostgreSQL: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(Database {
            url: String::from_utf8(output.stdout)?.trim().to_string(),
            started: Some(dir),
        })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Some(dir) = &self.started
            && let Ok(root) = std::env::current_dir()
        {
            let _ = std::process::Command::new(root.join("tools/pg"))
                .arg("stop")
                .arg(dir)
                .output();
        }
    }
}

/// A schema of its own on `url`; returns the URL that uses it.
pub(crate) fn fresh_schema(url: &str) -> anyhow::Result<(String, String)> {
    let schema = format!(
        "bench_{}",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    let mut client = postgres::Client::connect(url, postgres::NoTls)
        .with_context(|| format!("connecting to {url}"))?;
    client.batch_execute(&format!("CREATE SCHEMA {schema}"))?;
    let joint = if url.contains('?') { '&' } else { '?' };
    Ok((
        format!("{url}{joint}options=-csearch_path%3D{schema}"),
        schema,
    ))
}

/// p50 of one autocommitted INSERT of an event-sized row (the floor of any durable append).
fn insert_commit_p50(url: &str, calls: usize) -> anyhow::Result<Duration> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    client.batch_execute(
        "CREATE TABLE floor_rows (session bytea, seq bigint, id bytea UNIQUE, row bytea, \
         PRIMARY KEY (session, seq))",
    )?;
    let row = vec![7u8; FLOOR_ROW_BYTES];
    let session = vec![1u8; 16];
    let insert = client.prepare("INSERT INTO floor_rows VALUES ($1, $2, $3, $4)")?;
    let mut samples = Vec::with_capacity(calls);
    for n in 0..(calls + WARMUP_CALLS) as i64 {
        let id = n.to_be_bytes().to_vec();
        let start = Instant::now();
        client.execute(&insert, &[&session, &n, &id, &row])?;
        if n as usize >= WARMUP_CALLS {
            samples.push(start.elapsed());
        }
    }
    samples.sort_unstable();
    Ok(median(&samples))
}

/// p50 of appending one event through the store alone (the writer thread, one commit
/// each), in this process.
fn store_append_p50(
    ledger: &reasoning_ledger::testing::Ledger,
    calls: usize,
) -> anyhow::Result<Duration> {
    let mut appends = StoreAppends::start(ledger)?;
    let mut samples = Vec::with_capacity(calls);
    for n in 0..calls + WARMUP_CALLS {
        let start = Instant::now();
        appends.append()?;
        if n >= WARMUP_CALLS {
            samples.push(start.elapsed());
        }
    }
    samples.sort_unstable();
    Ok(median(&samples))
}

/// One session of a ledger that events are appended to one at a time, each its own
/// commit through the writer thread, as a lone caller's would be.
pub(crate) struct StoreAppends<'a> {
    ledger: &'a reasoning_ledger::testing::Ledger,
    session: reasoning_ledger::testing::SessionId,
    seq: u64,
}

impl<'a> StoreAppends<'a> {
    /// Starts the session (its first event).
    pub(crate) fn start(ledger: &'a reasoning_ledger::testing::Ledger) -> anyhow::Result<Self> {
        use reasoning_ledger::testing::{Payload, SessionId, SessionKind};
        let mut appends = StoreAppends {
            ledger,
            session: SessionId::generate(),
            seq: 0,
        };
        appends.append_payload(Payload::SessionStarted {
            kind: SessionKind::THINKING,
            title: "bench".into(),
            aliases: Vec::new(),
        })?;
        Ok(appends)
    }

    /// Appends one short event and waits for its commit.
    pub(crate) fn append(&mut self) -> anyhow::Result<()> {
        let n = self.seq;
        self.append_payload(reasoning_ledger::testing::Payload::SessionClosed {
            reason: format!("append {n}: about as long as a short thought's text"),
        })
    }

    fn append_payload(
        &mut self,
        payload: reasoning_ledger::testing::Payload,
    ) -> anyhow::Result<()> {
        use reasoning_ledger::testing::NewEvent;
        let (session, seq) = (self.session, self.seq);
        self.ledger
            .write_blocking(move |txn| txn.append(session, seq, vec![NewEvent::new(payload)]))
            .map_err(anyhow::Error::from)
            .and_then(|appended| appended.map_err(anyhow::Error::from))?;
        self.seq += 1;
        Ok(())
    }
}

async fn measure(
    label: &str,
    argv: &[String],
    data_dir: &Path,
    calls: usize,
    store: Option<&str>,
) -> anyhow::Result<StoreFigures> {
    std::fs::create_dir_all(data_dir)?;
    eprintln!(
        "bench: {label}: {calls} appends through the store, {calls} calls one at a time, then {calls} with {IN_FLIGHT} in flight"
    );
    let store = store.map(str::to_string);
    let dir = data_dir.join("store");
    let store_append = tokio::task::spawn_blocking(move || -> anyhow::Result<Duration> {
        let ledger = match &store {
            Some(url) => reasoning_ledger::testing::Ledger::open_postgres(
                url,
                reasoning_ledger::testing::families(),
            )?,
            None => reasoning_ledger::testing::Ledger::open(
                &dir,
                reasoning_ledger::testing::families(),
            )?,
        };
        store_append_p50(&ledger, calls)
    })
    .await??;
    let session = Session::start(argv, data_dir).await?;
    let peer = session.peer();
    call_sequential(&peer, 1, WARMUP_CALLS, TOTAL_THOUGHTS).await?;
    let mut samples = call_sequential(&peer, WARMUP_CALLS + 1, calls, TOTAL_THOUGHTS).await?;
    samples.sort_unstable();
    let run = call_concurrent(
        &peer,
        WARMUP_CALLS + calls + 1,
        calls,
        TOTAL_THOUGHTS,
        IN_FLIGHT,
    )
    .await?;
    session.close().await?;
    Ok(StoreFigures {
        store: label.to_string(),
        store_append_p50_us: store_append.as_secs_f64() * 1e6,
        one_caller_p50_us: median(&samples).as_secs_f64() * 1e6,
        in_flight_thoughts_per_s: calls as f64 / run.elapsed.as_secs_f64(),
    })
}

/// Runs the store benchmark with our server `exe`.
pub(crate) async fn run(
    exe: &Path,
    scratch: &Path,
    url: Option<String>,
    calls: usize,
) -> anyhow::Result<StoreReport> {
    let database = Database::find(url, scratch)?;
    let base = database.url.clone();
    let (store_url, schema) = tokio::task::spawn_blocking(move || fresh_schema(&base)).await??;
    let floor_url = store_url.clone();
    let insert_commit =
        tokio::task::spawn_blocking(move || insert_commit_p50(&floor_url, calls)).await??;
    let exe = exe.to_string_lossy().into_owned();
    let argv = |store: Option<&str>| {
        let mut argv = vec![
            exe.clone(),
            "serve".into(),
            "--data-dir".into(),
            DATA_DIR_PLACEHOLDER.into(),
        ];
        if let Some(url) = store {
            argv.extend(["--store".to_string(), url.to_string()]);
        }
        argv
    };
    let redb = measure(
        "redb",
        &argv(None),
        &scratch.join("stores/redb"),
        calls,
        None,
    )
    .await?;
    let postgres = measure(
        "PostgreSQL",
        &argv(Some(&store_url)),
        &scratch.join("stores/pg"),
        calls,
        Some(&store_url),
    )
    .await?;
    let base = database.url.clone();
    let _ = tokio::task::spawn_blocking(move || {
        postgres::Client::connect(&base, postgres::NoTls)
            .and_then(|mut c| c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")))
    })
    .await;
    drop(database);
    Ok(StoreReport {
        calls,
        in_flight: IN_FLIGHT,
        insert_commit_p50_us: insert_commit.as_secs_f64() * 1e6,
        redb,
        postgres,
    })
}
