//! The server benchmarks of `reasoning-ledger-bench`: measures stdio MCP
//! servers given as command lines — our own binary and the Node reference
//! server `@modelcontextprotocol/server-sequential-thinking` — side by side,
//! plus the cost of one `fdatasync` on the data directory's filesystem.
//!
//! Owns: spawning and ending the server processes under test, the
//! per-session subdirectories it creates under [`ServerBenchOptions::data_dir`]
//! (removed again after each session), and the report. Must not: assert on
//! targets (it measures and reports; judging is the reader's job), link to
//! the store or server modules (servers are black boxes behind their argv),
//! or reach the network (the reference server is installed by npm into
//! `bench/reference/` ahead of time, never fetched here).

mod fsync;
mod report;
pub(crate) mod session;
pub(crate) mod stats;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;

pub(crate) use fsync::{FSYNC_WRITE_BYTES, FsyncFigures};
pub(crate) use report::{ServerBenchReport, ServerFigures, ServerOutcome};
pub(crate) use session::DATA_DIR_PLACEHOLDER;
pub(crate) use stats::LatencySummary;

use session::Session;

/// Spawn → `initialize` runs per server; the report gives their median.
pub(crate) const DEFAULT_SPAWN_RUNS: usize = 20;

/// Calls measured one at a time, and again with [`DEFAULT_IN_FLIGHT`] in flight.
pub(crate) const DEFAULT_CALLS: usize = 2000;

/// Calls made before the one-caller measurement and not counted.
pub(crate) const DEFAULT_WARMUP_CALLS: usize = 50;

/// Requests kept in flight by the throughput measurement (one task each,
/// sharing one client connection).
pub(crate) const DEFAULT_IN_FLIGHT: usize = 8;

/// Thoughts recorded in a fresh server before its RSS is read.
pub(crate) const DEFAULT_RSS_THOUGHTS: usize = 10_000;

/// `fdatasync` samples for the durability baseline.
pub(crate) const DEFAULT_FSYNC_SAMPLES: usize = 200;

/// Path of the reference server's npm project, relative to the repo root.
pub(crate) const REFERENCE_PROJECT_DIR: &str = "bench/reference";

/// npm package of the reference server (pinned in `bench/reference/package.json`).
pub(crate) const REFERENCE_PACKAGE: &str = "@modelcontextprotocol/server-sequential-thinking";

/// Binary name the reference package installs under `node_modules/.bin`.
const REFERENCE_BIN: &str = "mcp-server-sequential-thinking";

/// What to measure and how much.
#[derive(Debug, Clone)]
pub(crate) struct ServerBenchOptions {
    /// Our server's argv, e.g. from [`ours_command`]; `None` skips it. Any
    /// argument containing [`DATA_DIR_PLACEHOLDER`] gets a fresh, empty
    /// directory per session.
    pub ours: Option<Vec<String>>,
    /// The reference server's argv, e.g. from [`reference_command`]; `None`
    /// skips it.
    pub reference: Option<Vec<String>>,
    /// Spawn → `initialize` runs per server.
    pub spawn_runs: usize,
    /// Measured calls, for one caller and again for the in-flight run.
    pub calls: usize,
    /// Unmeasured calls before the one-caller run.
    pub warmup_calls: usize,
    /// Requests in flight during the throughput run.
    pub in_flight: usize,
    /// Thought counts at which a fresh server's RSS is read, ascending;
    /// empty skips the RSS session.
    pub rss_checkpoints: Vec<usize>,
    /// `fdatasync` samples for the durability baseline.
    pub fsync_samples: usize,
    /// Scratch directory: holds the per-session data directories and the
    /// `fdatasync` scratch file. Created if missing; put it on the disk the
    /// real data directory would live on, since the baseline depends on it.
    pub data_dir: PathBuf,
    /// Print one progress line per phase to stderr.
    pub progress: bool,
}

impl ServerBenchOptions {
    /// Default counts, no servers selected, scratch space under `data_dir`.
    pub(crate) fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            ours: None,
            reference: None,
            spawn_runs: DEFAULT_SPAWN_RUNS,
            calls: DEFAULT_CALLS,
            warmup_calls: DEFAULT_WARMUP_CALLS,
            in_flight: DEFAULT_IN_FLIGHT,
            rss_checkpoints: vec![DEFAULT_RSS_THOUGHTS],
            fsync_samples: DEFAULT_FSYNC_SAMPLES,
            data_dir: data_dir.into(),
            progress: true,
        }
    }
}

/// Our binary's argv for the harness: `<exe> serve --data-dir {data_dir}`.
pub(crate) fn ours_command(exe: &Path) -> Vec<String> {
    vec![
        exe.to_string_lossy().into_owned(),
        "serve".to_owned(),
        "--data-dir".to_owned(),
        DATA_DIR_PLACEHOLDER.to_owned(),
    ]
}

/// The installed reference server's argv, if `npm install --prefix
/// bench/reference` has been run under `repo_root`: the package's
/// `node_modules/.bin` shim, else its `dist/index.js` run with `node`.
pub(crate) fn reference_command(repo_root: &Path) -> Option<Vec<String>> {
    let modules = repo_root.join(REFERENCE_PROJECT_DIR).join("node_modules");
    let shim = modules.join(".bin").join(REFERENCE_BIN);
    if shim.is_file() {
        return Some(vec![shim.to_string_lossy().into_owned()]);
    }
    let entry = modules
        .join(REFERENCE_PACKAGE)
        .join("dist")
        .join("index.js");
    entry
        .is_file()
        .then(|| vec!["node".to_owned(), entry.to_string_lossy().into_owned()])
}

/// Runs every selected measurement and returns the figures. A server that
/// fails is reported as failed (with the error) rather than aborting the
/// other; only scratch-directory and `fdatasync` failures are errors here.
pub(crate) async fn run_server_bench(
    opts: ServerBenchOptions,
) -> anyhow::Result<ServerBenchReport> {
    anyhow::ensure!(opts.spawn_runs > 0, "spawn runs must be positive");
    anyhow::ensure!(opts.calls > 0, "call count must be positive");
    anyhow::ensure!(opts.in_flight > 0, "requests in flight must be positive");
    anyhow::ensure!(opts.fsync_samples > 0, "fdatasync samples must be positive");
    let created_data_dir = !opts.data_dir.exists();
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("creating bench data dir {}", opts.data_dir.display()))?;
    let mut rss_checkpoints = opts.rss_checkpoints.clone();
    rss_checkpoints.sort_unstable();
    rss_checkpoints.dedup();
    rss_checkpoints.retain(|&n| n > 0);

    // The baseline brackets the servers: half its samples before, half after,
    // so a disk that gets busier or quieter during the run shows in both.
    let progress = Progress(opts.progress);
    let first_half = opts.fsync_samples.div_ceil(2);
    progress.say(format_args!(
        "fdatasync: {first_half} × {FSYNC_WRITE_BYTES} B in {}",
        opts.data_dir.display()
    ));
    let mut fsync_samples = sample_fdatasync(&opts.data_dir, first_half).await?;

    let plan = Plan {
        opts: &opts,
        rss_checkpoints: &rss_checkpoints,
        progress,
    };
    let mut ours = None;
    let mut reference = None;
    for (label, argv, slot) in [
        ("ours", &opts.ours, &mut ours),
        ("reference", &opts.reference, &mut reference),
    ] {
        let Some(argv) = argv else { continue };
        let outcome = plan.measure_server(label, argv).await;
        if let Err(error) = &outcome {
            progress.say(format_args!("{label}: FAILED: {error:#}"));
        }
        *slot = Some(ServerOutcome {
            command: argv.clone(),
            figures: outcome.map_err(|e| format!("{e:#}")),
        });
    }

    let second_half = opts.fsync_samples - first_half;
    progress.say(format_args!(
        "fdatasync: {second_half} more × {FSYNC_WRITE_BYTES} B"
    ));
    fsync_samples.extend(sample_fdatasync(&opts.data_dir, second_half).await?);
    let fdatasync = FsyncFigures::from_samples(&opts.data_dir, fsync_samples)?;

    if created_data_dir {
        // Only succeeds if the sessions left nothing behind, which is the point.
        let _ = std::fs::remove_dir(&opts.data_dir);
    }
    Ok(ServerBenchReport {
        spawn_runs: opts.spawn_runs,
        calls: opts.calls,
        warmup_calls: opts.warmup_calls,
        in_flight: opts.in_flight,
        rss_checkpoints,
        fdatasync,
        ours,
        reference,
    })
}

/// Progress lines to stderr, when enabled.
#[derive(Clone, Copy)]
struct Progress(bool);

impl Progress {
    fn say(self, line: std::fmt::Arguments<'_>) {
        if self.0 {
            eprintln!("bench: {line}");
        }
    }
}

/// The settings shared by every server's measurement.
struct Plan<'a> {
    opts: &'a ServerBenchOptions,
    rss_checkpoints: &'a [usize],
    progress: Progress,
}

impl Plan<'_> {
    /// All figures for one server. Its sessions live in `data_dir/<label>/`,
    /// which is removed afterwards whether or not the measurement succeeded.
    async fn measure_server(&self, label: &str, argv: &[String]) -> anyhow::Result<ServerFigures> {
        let server_dir = self.opts.data_dir.join(label);
        if server_dir.exists() {
            remove_dir(&server_dir)?;
        }
        let figures = self.measure_in(label, argv, &server_dir).await;
        let cleanup = if server_dir.exists() {
            remove_dir(&server_dir)
        } else {
            Ok(())
        };
        let figures = figures?;
        cleanup?;
        Ok(figures)
    }

    async fn measure_in(
        &self,
        label: &str,
        argv: &[String],
        server_dir: &Path,
    ) -> anyhow::Result<ServerFigures> {
        let opts = self.opts;

        // 1. Spawn → initialize answered, one fresh process (and data dir) per run.
        self.progress.say(format_args!(
            "{label}: spawn → initialize × {} ({})",
            opts.spawn_runs,
            argv.join(" ")
        ));
        let mut spawn_samples = Vec::with_capacity(opts.spawn_runs);
        let mut identity = None;
        for run in 0..opts.spawn_runs {
            let dir = fresh_dir(server_dir, &format!("spawn-{run}"))?;
            let session = Session::start(argv, &dir)
                .await
                .with_context(|| format!("spawn run {}", run + 1))?;
            spawn_samples.push(session.spawn_to_initialize);
            identity.get_or_insert_with(|| session.identity());
            session.close().await?;
        }
        spawn_samples.sort_unstable();
        let spawn_median = stats::median(&spawn_samples);

        // 2 + 3. One caller, then `in_flight` callers, on one session.
        self.progress.say(format_args!(
            "{label}: {} warmup + {} calls with one caller, {} with {} in flight",
            opts.warmup_calls, opts.calls, opts.calls, opts.in_flight
        ));
        let session = Session::start(argv, &fresh_dir(server_dir, "latency")?).await?;
        let peer = session.peer();
        let total = opts.warmup_calls + 2 * opts.calls;
        let calls = async {
            session::call_sequential(&peer, 1, opts.warmup_calls, total)
                .await
                .context("warmup calls")?;
            let one_caller =
                session::call_sequential(&peer, opts.warmup_calls + 1, opts.calls, total)
                    .await
                    .context("one-caller calls")?;
            let loaded = session::call_concurrent(
                &peer,
                opts.warmup_calls + opts.calls + 1,
                opts.calls,
                total,
                opts.in_flight,
            )
            .await
            .context("in-flight calls")?;
            anyhow::Ok((one_caller, loaded))
        }
        .await;
        let closed = session.close().await;
        let (one_caller, loaded) = calls?;
        closed?;

        // 4. RSS of a fresh server after N recorded thoughts.
        let (rss_idle_kib, rss_kib) = match self.rss_checkpoints.last() {
            None => (None, Vec::new()),
            Some(&last) => {
                self.progress.say(format_args!(
                    "{label}: RSS at {} thoughts",
                    self.rss_checkpoints
                        .iter()
                        .map(|&n| stats::fmt_count(n))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                let session = Session::start(argv, &fresh_dir(server_dir, "rss")?).await?;
                let readings = self.record_and_read_rss(&session, last).await;
                let closed = session.close().await;
                let readings = readings?;
                closed?;
                (Some(readings.0), readings.1)
            }
        };

        let identity = identity.unwrap_or_default();
        let calls_per_sec = loaded.samples.len() as f64 / loaded.elapsed.as_secs_f64();
        Ok(ServerFigures {
            server: identity.name_version,
            protocol_version: identity.protocol_version,
            spawn_to_initialize_median: spawn_median,
            spawn_to_initialize: LatencySummary::from_samples(spawn_samples)
                .context("no spawn samples")?,
            one_caller: LatencySummary::from_samples(one_caller)
                .context("no one-caller samples")?,
            in_flight: LatencySummary::from_samples(loaded.samples)
                .context("no in-flight samples")?,
            in_flight_elapsed: loaded.elapsed,
            calls_per_sec,
            rss_idle_kib,
            rss_kib,
        })
    }

    /// Reads RSS right after `initialize`, then records thoughts (with
    /// `in_flight` callers, to keep it quick) up to each checkpoint and reads
    /// RSS there.
    async fn record_and_read_rss(
        &self,
        session: &Session,
        last: usize,
    ) -> anyhow::Result<(u64, Vec<(usize, u64)>)> {
        let idle = session.rss_kib()?;
        let peer = session.peer();
        let mut readings = Vec::with_capacity(self.rss_checkpoints.len());
        let mut recorded = 0;
        for &checkpoint in self.rss_checkpoints {
            session::call_concurrent(
                &peer,
                recorded + 1,
                checkpoint - recorded,
                last,
                self.opts.in_flight,
            )
            .await
            .with_context(|| format!("recording {checkpoint} thoughts"))?;
            recorded = checkpoint;
            readings.push((checkpoint, session.rss_kib()?));
        }
        Ok((idle, readings))
    }
}

/// A new, empty directory `parent/name` for one session.
fn fresh_dir(parent: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// [`fsync::sample_fdatasync`] off the async runtime's worker threads.
async fn sample_fdatasync(dir: &Path, samples: usize) -> anyhow::Result<Vec<Duration>> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || fsync::sample_fdatasync(&dir, samples))
        .await
        .context("fdatasync measurement panicked")?
}

fn remove_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_command_has_placeholder() {
        let argv = ours_command(Path::new("/x/reasoning-ledger"));
        assert_eq!(
            argv,
            ["/x/reasoning-ledger", "serve", "--data-dir", "{data_dir}"]
        );
    }

    #[test]
    fn reference_command_absent_without_install() {
        assert!(reference_command(Path::new("/nonexistent-repo-root")).is_none());
    }

    #[tokio::test]
    async fn failing_server_is_reported_not_fatal() {
        let data_dir =
            std::env::temp_dir().join(format!("rl-bench-failing-{}", std::process::id()));
        let mut opts = ServerBenchOptions::new(&data_dir);
        opts.ours = Some(vec!["/nonexistent/reasoning-ledger".to_owned()]);
        opts.spawn_runs = 1;
        opts.calls = 1;
        opts.warmup_calls = 0;
        opts.fsync_samples = 2;
        opts.progress = false;
        let report = run_server_bench(opts).await.expect("bench itself runs");
        let ours = report.ours.as_ref().expect("ours was selected");
        assert!(ours.figures.as_ref().is_err_and(|e| e.contains("spawning")));
        assert!(report.reference.is_none());
        assert!(report.to_string().contains("failed"));
        assert_eq!(
            report.report_json()["servers"]["reference"],
            serde_json::Value::Null
        );
        assert!(
            !data_dir.exists(),
            "scratch dir created by the bench is removed"
        );
    }
}
