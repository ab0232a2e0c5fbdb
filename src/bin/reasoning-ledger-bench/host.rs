//! The ledger host's figures (issue 23): throughput with 64 calls in flight, over one
//! connection and over 8 server processes sharing one ledger (one holds the file, the
//! others reach it over its socket), and the wall time of a CLI command while a server
//! holds the ledger.
//!
//! Owns: those three measurements of our binary, run only with `--host`. Must not:
//! judge the figures (the targets are printed beside them) or link to the store (the
//! servers and the CLI are black boxes behind their argv).

use crate::servers::session::{self, QUIET_ENV, Session, TOOL_NAME};
use crate::servers::stats;
use anyhow::Context as _;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// Calls in flight in the throughput runs.
pub(crate) const IN_FLIGHT: usize = 64;

/// Server processes sharing one ledger in the many-connections run.
pub(crate) const PROCESSES: usize = 8;

/// Thoughts in the session the CLI shows.
pub(crate) const SHOWN_THOUGHTS: usize = 100;

/// Runs of the CLI `show`, per setting.
pub(crate) const SHOW_RUNS: usize = 20;

/// The host's figures.
#[derive(Debug, serde::Serialize)]
pub(crate) struct HostFigures {
    pub calls: usize,
    /// 64 in flight on one connection (one server): durable thoughts per second.
    pub one_connection_per_sec: f64,
    /// 64 in flight over 8 processes (8 each) on one ledger: durable thoughts per second.
    pub processes_per_sec: f64,
    /// CLI `show` of a 100-thought session while a server holds the ledger: median, max.
    pub show_while_served: (Duration, Duration),
    /// The same with no server running (the CLI holds the file itself).
    pub show_alone: (Duration, Duration),
}

impl std::fmt::Display for HostFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1000.0);
        writeln!(f, "### The ledger host\n")?;
        writeln!(f, "| figure | measured | target |")?;
        writeln!(f, "|---|---|---|")?;
        writeln!(
            f,
            "| {IN_FLIGHT} in flight, one connection ({} calls) | {:.0} thoughts/s | ≥ 20,000 |",
            self.calls, self.one_connection_per_sec
        )?;
        writeln!(
            f,
            "| {IN_FLIGHT} in flight over {PROCESSES} processes on one ledger ({} calls) | {:.0} thoughts/s | ≥ 20,000 |",
            self.calls, self.processes_per_sec
        )?;
        writeln!(
            f,
            "| CLI `show` of {SHOWN_THOUGHTS} thoughts, a server holding the ledger (median / max of {SHOW_RUNS}) | {} / {} | ≤ 20 ms |",
            ms(self.show_while_served.0),
            ms(self.show_while_served.1)
        )?;
        writeln!(
            f,
            "| the same, no server running | {} / {} | — |",
            ms(self.show_alone.0),
            ms(self.show_alone.1)
        )
    }
}

/// Measures `server` (our binary) in fresh directories under `scratch`.
pub(crate) async fn run(
    server: &Path,
    scratch: &Path,
    calls: usize,
) -> anyhow::Result<HostFigures> {
    let argv = crate::servers::ours_command(server);
    let base = scratch.join("host");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base)?;
    let figures = measure(server, &argv, &base, calls).await;
    let _ = std::fs::remove_dir_all(&base);
    figures
}

async fn measure(
    server: &Path,
    argv: &[String],
    base: &Path,
    calls: usize,
) -> anyhow::Result<HostFigures> {
    // 64 in flight over one connection.
    let dir = base.join("one");
    std::fs::create_dir_all(&dir)?;
    let one = Session::start(argv, &dir).await?;
    let run = session::call_concurrent(&one.peer(), 1, calls, calls, IN_FLIGHT).await;
    one.close().await?;
    let run = run.context("64 in flight over one connection")?;
    let one_connection_per_sec = run.samples.len() as f64 / run.elapsed.as_secs_f64();

    // 64 in flight over 8 processes on one ledger: the first holds it.
    let dir = base.join("processes");
    std::fs::create_dir_all(&dir)?;
    let mut sessions = Vec::with_capacity(PROCESSES);
    for _ in 0..PROCESSES {
        let session = Session::start(argv, &dir).await?;
        // A first thought, so the process has reached the ledger before the next starts.
        session::call_concurrent(&session.peer(), 1, 1, 1, 1).await?;
        sessions.push(session);
    }
    let per_process = calls.div_ceil(PROCESSES);
    let started = Instant::now();
    let mut runs = tokio::task::JoinSet::new();
    for session in &sessions {
        let peer = session.peer();
        runs.spawn(async move {
            session::call_concurrent(
                &peer,
                2,
                per_process,
                per_process + 1,
                IN_FLIGHT / PROCESSES,
            )
            .await
        });
    }
    let mut done = 0;
    while let Some(run) = runs.join_next().await {
        done += run??.samples.len();
    }
    let processes_per_sec = done as f64 / started.elapsed().as_secs_f64();
    for session in sessions {
        session.close().await?;
    }

    // CLI `show` of a 100-thought session, with a server holding the ledger and without.
    let dir = base.join("show");
    std::fs::create_dir_all(&dir)?;
    let holder = Session::start(argv, &dir).await?;
    let session_id = record_session(&holder, SHOWN_THOUGHTS).await?;
    let show_while_served = time_show(server, &dir, &session_id)?;
    holder.close().await?;
    let show_alone = time_show(server, &dir, &session_id)?;
    Ok(HostFigures {
        calls,
        one_connection_per_sec,
        processes_per_sec,
        show_while_served,
        show_alone,
    })
}

/// Records `thoughts` thoughts in one session; returns its id.
async fn record_session(session: &Session, thoughts: usize) -> anyhow::Result<String> {
    let peer = session.peer();
    let mut id: Option<String> = None;
    for number in 1..=thoughts {
        let mut arguments: Map<String, Value> = json!({
            "thought": format!("thought {number} of a session the CLI shows while a server holds the ledger"),
            "thoughtNumber": number,
            "totalThoughts": thoughts,
            "nextThoughtNeeded": number < thoughts,
        })
        .as_object()
        .cloned()
        .unwrap_or_default();
        if let Some(id) = &id {
            arguments.insert("sessionId".into(), json!(id));
        }
        let result = peer.call_tool(TOOL_NAME, arguments).await?;
        anyhow::ensure!(result["isError"] != json!(true), "{}", result["content"]);
        if id.is_none() {
            id = result["structuredContent"]["sessionId"]
                .as_str()
                .map(String::from);
        }
    }
    id.context("no sessionId in the answers")
}

/// Median and max wall time of `show SESSION` over [`SHOW_RUNS`] runs.
fn time_show(server: &Path, dir: &Path, session: &str) -> anyhow::Result<(Duration, Duration)> {
    let mut samples = Vec::with_capacity(SHOW_RUNS);
    for _ in 0..SHOW_RUNS {
        let started = Instant::now();
        let output = std::process::Command::new(server)
            .arg("--data-dir")
            .arg(dir)
            .args(["show", session])
            .env(QUIET_ENV.0, QUIET_ENV.1)
            .env_remove("REASONING_LEDGER_STORE")
            .output()
            .context("running show")?;
        samples.push(started.elapsed());
        anyhow::ensure!(
            output.status.success(),
            "show failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    samples.sort_unstable();
    let max = *samples.last().context("no show runs")?;
    Ok((stats::median(&samples), max))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_placeholder_is_in_our_command() {
        let argv = crate::servers::ours_command(std::path::Path::new("rl"));
        assert!(
            argv.iter()
                .any(|a| a == crate::servers::DATA_DIR_PLACEHOLDER)
        );
    }
}
