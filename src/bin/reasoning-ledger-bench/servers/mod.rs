//! The server benchmarks of `reasoning-ledger-bench`: measures stdio MCP servers given
//! as command lines side by side — our own binary beside the Node reference server
//! `@modelcontextprotocol/server-sequential-thinking` ([`run_server_bench`]), or beside
//! another build of itself (`--baseline`: [`run_compare`]) — plus the cost of one
//! `fdatasync` on the data directory's filesystem.
//!
//! Owns: spawning and ending the server processes under test and the order they run in
//! (each part of a round — start on an empty ledger, start on a filled one, calls,
//! memory — runs for every server in turn, A B A B …), the per-session subdirectories it
//! creates under [`ServerBenchOptions::data_dir`] (removed again after each session),
//! the filled ledger ([`filled`]), and the reports. Must not: assert on targets (it
//! measures and reports; judging is the reader's job), link to the store or server
//! modules (servers are black boxes behind their argv), or reach the network (the
//! reference server is installed by npm into `bench/reference/` ahead of time, never
//! fetched here).

mod compare;
mod filled;
mod fsync;
mod profile;
mod report;
pub(crate) mod session;
pub(crate) mod stats;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};

pub(crate) use compare::{DEFAULT_COMPARE_ROUNDS, DEFAULT_COMPARE_RSS_THOUGHTS, run_compare};
pub(crate) use filled::FilledLedger;
pub(crate) use fsync::{FSYNC_WRITE_BYTES, FsyncFigures, PageSync, filesystem_of};
pub(crate) use report::{ServerBenchReport, ServerFigures, StartTimes, Throughput};
pub(crate) use session::{DATA_DIR_PLACEHOLDER, MemoryReading};
pub(crate) use stats::LatencySummary;

use session::{ConcurrentRun, ServerIdentity, Session};

/// Spawn → `initialize` runs per server, on each ledger; the report gives their median.
pub(crate) const DEFAULT_SPAWN_RUNS: usize = 20;

/// Calls measured one at a time, and again with [`DEFAULT_IN_FLIGHT`] and with
/// [`DEFAULT_WIDE_IN_FLIGHT`] in flight.
pub(crate) const DEFAULT_CALLS: usize = 2000;

/// Calls made before the one-caller measurement and not counted.
pub(crate) const DEFAULT_WARMUP_CALLS: usize = 50;

/// Requests kept in flight by the throughput measurement (one task each,
/// sharing one client connection).
pub(crate) const DEFAULT_IN_FLIGHT: usize = 8;

/// Requests kept in flight by the wide throughput measurement, on the same one
/// connection; the server's CPU time per call is read over this run (what a durable
/// call costs when the writer's groups are full).
pub(crate) const DEFAULT_WIDE_IN_FLIGHT: usize = 64;

/// Thoughts recorded in a fresh server before its RSS is read.
pub(crate) const DEFAULT_RSS_THOUGHTS: usize = 10_000;

/// Thoughts in the ledger whose start is measured beside the empty ledger's: one
/// session of 20,000 of the bench's ~100-byte thoughts, about 17 MiB of ledger.
pub(crate) const DEFAULT_FILLED_THOUGHTS: usize = 20_000;

/// `fdatasync` samples for the durability baseline.
pub(crate) const DEFAULT_FSYNC_SAMPLES: usize = 200;

/// Path of the reference server's npm project, relative to the repo root.
pub(crate) const REFERENCE_PROJECT_DIR: &str = "bench/reference";

/// npm package of the reference server (pinned in `bench/reference/package.json`).
pub(crate) const REFERENCE_PACKAGE: &str = "@modelcontextprotocol/server-sequential-thinking";

/// Binary name the reference package installs under `node_modules/.bin`.
const REFERENCE_BIN: &str = "mcp-server-sequential-thinking";

/// The column of our binary in the report beside the reference.
pub(crate) const OURS: &str = "ours";

/// The column of the Node reference server.
pub(crate) const REFERENCE: &str = "reference";

/// Name of the directory under [`ServerBenchOptions::data_dir`] that holds the filled
/// ledger (a server's label is never this: labels are [`OURS`], [`REFERENCE`],
/// [`compare::BASELINE`] and [`compare::THIS`]).
const FILLED_DIR_NAME: &str = "filled-ledger";

/// One server to measure: the name of its column and its argv.
#[derive(Debug, Clone)]
pub(crate) struct ServerUnderTest {
    /// Its column in the report, and the name of its directory under the data directory.
    pub label: String,
    /// The command line. Any argument containing [`DATA_DIR_PLACEHOLDER`] gets a fresh
    /// directory per session; a server without one keeps no ledger, and its start on a
    /// filled ledger is not measured.
    pub argv: Vec<String>,
}

impl ServerUnderTest {
    pub(crate) fn new(label: &str, argv: Vec<String>) -> Self {
        Self {
            label: label.to_owned(),
            argv,
        }
    }

    fn keeps_a_ledger(&self) -> bool {
        self.argv
            .iter()
            .any(|arg| arg.contains(DATA_DIR_PLACEHOLDER))
    }
}

/// What to measure and how much.
#[derive(Debug, Clone)]
pub(crate) struct ServerBenchOptions {
    /// The servers measured, e.g. from [`ours_command`] and [`reference_command`]; every
    /// part of a round runs them in this order.
    pub servers: Vec<ServerUnderTest>,
    /// Rounds of the whole measurement: each round runs every part for every server in
    /// turn, so a machine that gets busier or quieter during the run weighs on all of
    /// them alike. The report beside the reference is of one round.
    pub rounds: usize,
    /// Spawn → `initialize` runs per server, per ledger (empty, filled), per round.
    pub spawn_runs: usize,
    /// Measured calls, for one caller and again for each in-flight run.
    pub calls: usize,
    /// Unmeasured calls before the one-caller run.
    pub warmup_calls: usize,
    /// Requests in flight during the throughput run.
    pub in_flight: usize,
    /// Requests in flight during the wide throughput run, over which the server's CPU
    /// time per call is read.
    pub wide_in_flight: usize,
    /// Thoughts in the filled ledger; 0 skips the start on a filled ledger.
    pub filled_thoughts: usize,
    /// The argv of the server that writes the filled ledger, once, before the first
    /// round (with [`DATA_DIR_PLACEHOLDER`]); `None` skips the start on a filled ledger.
    pub filled_writer: Option<Vec<String>>,
    /// Thought counts at which a fresh server's RSS is read, ascending;
    /// empty skips the RSS session.
    pub rss_checkpoints: Vec<usize>,
    /// `fdatasync` samples for the durability baseline.
    pub fsync_samples: usize,
    /// Scratch directory: holds the per-session data directories, the filled ledger and
    /// the `fdatasync` scratch file. Created if missing; put it on the disk the real
    /// data directory would live on, since the baseline depends on it.
    pub data_dir: PathBuf,
    /// Print one progress line per phase to stderr.
    pub progress: bool,
    /// Where `perf record` writes the server's profile of each wide run, when set.
    pub perf_wide: Option<PathBuf>,
}

impl ServerBenchOptions {
    /// Default counts, one round, no servers selected, scratch space under `data_dir`.
    pub(crate) fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            servers: Vec::new(),
            rounds: 1,
            spawn_runs: DEFAULT_SPAWN_RUNS,
            calls: DEFAULT_CALLS,
            warmup_calls: DEFAULT_WARMUP_CALLS,
            in_flight: DEFAULT_IN_FLIGHT,
            wide_in_flight: DEFAULT_WIDE_IN_FLIGHT,
            filled_thoughts: DEFAULT_FILLED_THOUGHTS,
            filled_writer: None,
            rss_checkpoints: vec![DEFAULT_RSS_THOUGHTS],
            fsync_samples: DEFAULT_FSYNC_SAMPLES,
            data_dir: data_dir.into(),
            progress: true,
            perf_wide: None,
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

/// Measures our server beside the reference (whichever of [`OURS`] and [`REFERENCE`]
/// `opts.servers` holds), one round. A server that fails is reported as failed (with
/// the error) rather than aborting the other; only scratch-directory and `fdatasync`
/// failures are errors here.
pub(crate) async fn run_server_bench(
    opts: ServerBenchOptions,
) -> anyhow::Result<ServerBenchReport> {
    let measured = measure(&opts).await?;
    Ok(ServerBenchReport::new(&opts, measured))
}

/// Everything [`measure`] found.
#[derive(Debug)]
pub(crate) struct Measured {
    /// The durability baseline.
    pub fdatasync: FsyncFigures,
    /// The filled ledger, when it was written (its directory is gone by now).
    pub filled: Option<FilledLedger>,
    /// Thought counts at which RSS was read (ascending, no zero).
    pub rss_checkpoints: Vec<usize>,
    /// Every server's figures, in the order of [`ServerBenchOptions::servers`].
    pub servers: Vec<ServerRounds>,
}

/// One server's figures, one per round, or what stopped its measurement.
#[derive(Debug)]
pub(crate) struct ServerRounds {
    /// Its column.
    pub label: String,
    /// The argv that was run (with the data-dir placeholder unexpanded).
    pub command: Vec<String>,
    /// One set of figures per round, or the error that stopped the measurement (the
    /// rounds before it are dropped: a server that fails is not compared).
    pub rounds: Result<Vec<ServerFigures>, String>,
}

/// Runs every round of every part for every server of `opts` and returns the figures.
/// A server that fails is recorded as failed and left out of the rest of the run; only
/// scratch-directory and `fdatasync` failures are errors here.
pub(crate) async fn measure(opts: &ServerBenchOptions) -> anyhow::Result<Measured> {
    anyhow::ensure!(opts.rounds > 0, "rounds must be positive");
    anyhow::ensure!(opts.spawn_runs > 0, "spawn runs must be positive");
    anyhow::ensure!(opts.calls > 0, "call count must be positive");
    anyhow::ensure!(
        opts.in_flight > 0 && opts.wide_in_flight > 0,
        "requests in flight must be positive"
    );
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

    // Whatever an earlier run left behind (a `--scratch` directory is kept) goes first.
    let filled_dir = opts.data_dir.join(FILLED_DIR_NAME);
    let run_dirs: Vec<PathBuf> = opts
        .servers
        .iter()
        .map(|server| opts.data_dir.join(&server.label))
        .chain([filled_dir.clone()])
        .collect();
    for dir in &run_dirs {
        if dir.exists() {
            remove_dir(dir)?;
        }
    }

    let filled = match &opts.filled_writer {
        Some(argv) if opts.filled_thoughts > 0 => {
            progress.say(format_args!(
                "filled ledger: {} thoughts, {} in flight ({})",
                stats::fmt_count(opts.filled_thoughts),
                opts.wide_in_flight,
                argv.join(" ")
            ));
            let written =
                filled::write(argv, &filled_dir, opts.filled_thoughts, opts.wide_in_flight)
                    .await
                    .map_err(|error| format!("{error:#}"));
            if let Err(error) = &written {
                progress.say(format_args!("filled ledger: FAILED: {error}"));
            }
            Some(written)
        }
        _ => None,
    };

    let plan = Plan {
        opts,
        rss_checkpoints: &rss_checkpoints,
        progress,
        filled: filled.as_ref(),
    };
    let mut runs: Vec<ServerRun<'_>> = opts
        .servers
        .iter()
        .map(|server| ServerRun {
            server,
            rounds: Vec::with_capacity(opts.rounds),
            error: None,
        })
        .collect();
    for round in 0..opts.rounds {
        let mut parts: Vec<RoundParts> = runs.iter().map(|_| RoundParts::default()).collect();
        for part in Part::IN_ORDER {
            for (run, parts) in runs.iter_mut().zip(&mut parts) {
                if run.error.is_some() {
                    continue;
                }
                let name = plan.name(run.server, round);
                if let Err(error) = plan.run_part(part, &name, run.server, parts).await {
                    progress.say(format_args!("{name}: FAILED: {error:#}"));
                    run.error = Some(format!("{error:#}"));
                }
            }
        }
        for (run, parts) in runs.iter_mut().zip(parts) {
            if run.error.is_none() {
                match parts.finish(opts) {
                    Ok(figures) => run.rounds.push(figures),
                    Err(error) => run.error = Some(format!("{error:#}")),
                }
            }
        }
    }
    let mut cleanup = Ok(());
    for dir in &run_dirs {
        if dir.exists() && cleanup.is_ok() {
            cleanup = remove_dir(dir);
        }
    }

    let second_half = opts.fsync_samples - first_half;
    progress.say(format_args!(
        "fdatasync: {second_half} more × {FSYNC_WRITE_BYTES} B"
    ));
    fsync_samples.extend(sample_fdatasync(&opts.data_dir, second_half).await?);
    let fdatasync = FsyncFigures::from_samples(&opts.data_dir, fsync_samples)?;
    cleanup?;

    if created_data_dir {
        // Only succeeds if the sessions left nothing behind, which is the point.
        let _ = std::fs::remove_dir(&opts.data_dir);
    }
    Ok(Measured {
        fdatasync,
        filled: filled.and_then(Result::ok),
        rss_checkpoints,
        servers: runs
            .into_iter()
            .map(|run| ServerRounds {
                label: run.server.label.clone(),
                command: run.server.argv.clone(),
                rounds: match run.error {
                    Some(error) => Err(error),
                    None => Ok(run.rounds),
                },
            })
            .collect(),
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

/// The parts of one server's measurement in one round, in the order they run. Each
/// part runs for every server before the next begins.
#[derive(Debug, Clone, Copy)]
enum Part {
    /// Spawn → `initialize` answered on an empty data directory.
    StartEmpty,
    /// Spawn → `initialize` answered on a copy of the filled ledger.
    StartFilled,
    /// One caller, then [`ServerBenchOptions::in_flight`], then
    /// [`ServerBenchOptions::wide_in_flight`] callers on one session, with the server's
    /// CPU time read over the last.
    Calls,
    /// RSS of a fresh server at each checkpoint.
    Memory,
}

impl Part {
    const IN_ORDER: [Part; 4] = [
        Part::StartEmpty,
        Part::StartFilled,
        Part::Calls,
        Part::Memory,
    ];
}

/// One server's progress through the rounds.
struct ServerRun<'a> {
    server: &'a ServerUnderTest,
    rounds: Vec<ServerFigures>,
    error: Option<String>,
}

/// What the parts of one round measured for one server, until [`RoundParts::finish`].
#[derive(Default)]
struct RoundParts {
    identity: Option<ServerIdentity>,
    start_empty: Vec<Duration>,
    start_filled: Option<Vec<Duration>>,
    calls: Option<CallRuns>,
    memory: Option<MemoryReadings>,
}

/// The runs of [`Part::Calls`].
struct CallRuns {
    one_caller: Vec<Duration>,
    in_flight: ConcurrentRun,
    wide: ConcurrentRun,
    /// The server's CPU time over the wide run.
    wide_cpu: Duration,
}

/// The readings of [`Part::Memory`].
struct MemoryReadings {
    idle: MemoryReading,
    at: Vec<(usize, MemoryReading)>,
}

impl RoundParts {
    fn finish(self, opts: &ServerBenchOptions) -> anyhow::Result<ServerFigures> {
        let identity = self.identity.unwrap_or_default();
        let calls = self.calls.context("the calls were not measured")?;
        let wide_calls = u32::try_from(calls.wide.samples.len()).context("too many calls")?;
        anyhow::ensure!(wide_calls > 0, "no calls in the wide run");
        Ok(ServerFigures {
            server: identity.name_version,
            protocol_version: identity.protocol_version,
            start_empty: StartTimes::from_samples(self.start_empty).context("no spawn samples")?,
            start_filled: match self.start_filled {
                None => None,
                Some(samples) => {
                    Some(StartTimes::from_samples(samples).context("no filled spawn samples")?)
                }
            },
            one_caller: LatencySummary::from_samples(calls.one_caller)
                .context("no one-caller samples")?,
            in_flight: Throughput::from_run(opts.in_flight, calls.in_flight)
                .context("no in-flight samples")?,
            wide_in_flight: Throughput::from_run(opts.wide_in_flight, calls.wide)
                .context("no wide in-flight samples")?,
            cpu_per_call: calls.wide_cpu / wide_calls,
            rss_idle: self.memory.as_ref().map(|memory| memory.idle),
            rss: self.memory.map(|memory| memory.at).unwrap_or_default(),
        })
    }
}

/// The settings shared by every server's measurement.
struct Plan<'a> {
    opts: &'a ServerBenchOptions,
    rss_checkpoints: &'a [usize],
    progress: Progress,
    filled: Option<&'a Result<FilledLedger, String>>,
}

impl Plan<'_> {
    /// A server's name in progress lines: its label, and the round when there are several.
    fn name(&self, server: &ServerUnderTest, round: usize) -> String {
        if self.opts.rounds > 1 {
            format!(
                "{} (round {} of {})",
                server.label,
                round + 1,
                self.opts.rounds
            )
        } else {
            server.label.clone()
        }
    }

    /// Runs `part` for `server`, in sessions under `data_dir/<label>/`, each removed
    /// when it has closed.
    async fn run_part(
        &self,
        part: Part,
        name: &str,
        server: &ServerUnderTest,
        parts: &mut RoundParts,
    ) -> anyhow::Result<()> {
        let dir = self.opts.data_dir.join(&server.label);
        let argv = &server.argv;
        match part {
            Part::StartEmpty => {
                let (samples, identity) = self.start_empty(name, argv, &dir).await?;
                parts.start_empty = samples;
                parts.identity = Some(identity);
            }
            Part::StartFilled => match self.filled {
                _ if !server.keeps_a_ledger() => {}
                None => {}
                Some(Err(error)) => bail!("the filled ledger could not be written: {error}"),
                Some(Ok(filled)) => {
                    parts.start_filled = Some(self.start_filled(name, argv, &dir, filled).await?);
                }
            },
            Part::Calls => parts.calls = Some(self.calls(name, argv, &dir).await?),
            Part::Memory => {
                if !self.rss_checkpoints.is_empty() {
                    parts.memory = Some(self.memory(name, argv, &dir).await?);
                }
            }
        }
        Ok(())
    }

    /// Spawn → initialize answered, one fresh process and empty data dir per run; the
    /// server's identity from the first.
    async fn start_empty(
        &self,
        name: &str,
        argv: &[String],
        dir: &Path,
    ) -> anyhow::Result<(Vec<Duration>, ServerIdentity)> {
        let runs = self.opts.spawn_runs;
        self.progress.say(format_args!(
            "{name}: spawn → initialize × {runs}, empty ledger ({})",
            argv.join(" ")
        ));
        let mut samples = Vec::with_capacity(runs);
        let mut identity = None;
        for run in 0..runs {
            let session_dir = fresh_dir(dir, "start-empty")?;
            let session = Session::start(argv, &session_dir)
                .await
                .with_context(|| format!("spawn run {}", run + 1))?;
            samples.push(session.spawn_to_initialize);
            identity.get_or_insert_with(|| session.identity());
            session.close().await?;
            remove_dir(&session_dir)?;
        }
        Ok((samples, identity.unwrap_or_default()))
    }

    /// Spawn → initialize answered on a fresh copy of the filled ledger per run (the
    /// copy, made and synced before the spawn, is not timed).
    async fn start_filled(
        &self,
        name: &str,
        argv: &[String],
        dir: &Path,
        filled: &FilledLedger,
    ) -> anyhow::Result<Vec<Duration>> {
        let runs = self.opts.spawn_runs;
        self.progress.say(format_args!(
            "{name}: spawn → initialize × {runs}, a ledger of {} thoughts",
            stats::fmt_count(filled.thoughts)
        ));
        let mut samples = Vec::with_capacity(runs);
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for run in 0..runs {
            let session_dir = dir.join("start-filled");
            let (source, target) = (filled.clone(), session_dir.clone());
            tokio::task::spawn_blocking(move || source.copy_to(&target))
                .await
                .context("copying the filled ledger panicked")??;
            let session = Session::start(argv, &session_dir)
                .await
                .with_context(|| format!("spawn run {} on the filled ledger", run + 1))?;
            samples.push(session.spawn_to_initialize);
            session.close().await?;
            remove_dir(&session_dir)?;
        }
        Ok(samples)
    }

    /// One caller, then `in_flight`, then `wide_in_flight` callers, on one session; the
    /// server's CPU clock is read before and after the wide run.
    async fn calls(&self, name: &str, argv: &[String], dir: &Path) -> anyhow::Result<CallRuns> {
        let opts = self.opts;
        self.progress.say(format_args!(
            "{name}: {} warmup + {} calls with one caller, {} with {} in flight, {} with {} in flight",
            opts.warmup_calls, opts.calls, opts.calls, opts.in_flight, opts.calls, opts.wide_in_flight
        ));
        let session_dir = fresh_dir(dir, "calls")?;
        let session = Session::start(argv, &session_dir).await?;
        let peer = session.peer();
        let total = opts.warmup_calls + 3 * opts.calls;
        let runs = async {
            session::call_sequential(&peer, 1, opts.warmup_calls, total)
                .await
                .context("warmup calls")?;
            let mut next = opts.warmup_calls + 1;
            let one_caller = session::call_sequential(&peer, next, opts.calls, total)
                .await
                .context("one-caller calls")?;
            next += opts.calls;
            let in_flight =
                session::call_concurrent(&peer, next, opts.calls, total, opts.in_flight)
                    .await
                    .context("in-flight calls")?;
            next += opts.calls;
            let profile = match &opts.perf_wide {
                Some(dir) => Some(profile::Recording::start(dir, name, session.pid()?).await?),
                None => None,
            };
            let cpu_before = session.cpu_time()?;
            let wide =
                session::call_concurrent(&peer, next, opts.calls, total, opts.wide_in_flight)
                    .await
                    .context("wide in-flight calls")?;
            let wide_cpu = session.cpu_time()?.saturating_sub(cpu_before);
            if let Some(profile) = profile {
                let file = profile.stop().await?;
                self.progress.say(format_args!(
                    "{name}: the wide run's profile is in {}",
                    file.display()
                ));
            }
            anyhow::Ok(CallRuns {
                one_caller,
                in_flight,
                wide,
                wide_cpu,
            })
        }
        .await;
        let closed = session.close().await;
        let runs = runs?;
        closed?;
        remove_dir(&session_dir)?;
        Ok(runs)
    }

    /// RSS of a fresh server right after `initialize`, then after recording thoughts
    /// (with `in_flight` callers, to keep it quick) up to each checkpoint.
    async fn memory(
        &self,
        name: &str,
        argv: &[String],
        dir: &Path,
    ) -> anyhow::Result<MemoryReadings> {
        self.progress.say(format_args!(
            "{name}: RSS at {} thoughts",
            self.rss_checkpoints
                .iter()
                .map(|&n| stats::fmt_count(n))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let session_dir = fresh_dir(dir, "rss")?;
        let session = Session::start(argv, &session_dir).await?;
        let readings = self.record_and_read_memory(&session).await;
        let closed = session.close().await;
        let readings = readings?;
        closed?;
        remove_dir(&session_dir)?;
        Ok(readings)
    }

    async fn record_and_read_memory(&self, session: &Session) -> anyhow::Result<MemoryReadings> {
        let idle = session.memory()?;
        let peer = session.peer();
        let last = self.rss_checkpoints.last().copied().unwrap_or_default();
        let mut at = Vec::with_capacity(self.rss_checkpoints.len());
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
            at.push((checkpoint, session.memory()?));
        }
        Ok(MemoryReadings { idle, at })
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
        let argv = ours_command(Path::new("/nonexistent/reasoning-ledger"));
        opts.servers = vec![ServerUnderTest::new(OURS, argv.clone())];
        // The filled ledger's writer fails too: a failure of its own, not the bench's.
        opts.filled_writer = Some(argv);
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
