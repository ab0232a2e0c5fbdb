//! `reasoning-ledger-bench`: the benchmark harness. A binary target of its own, so the
//! `reasoning-ledger` binary a user installs carries none of it. It measures our stdio
//! MCP server side by side with the Node reference server ([`servers`]) and the ledger
//! itself ([`ledger`]), or — with `--baseline` — side by side with another build of
//! itself ([`servers::run_compare`]), and prints the figures as Markdown tables or JSON.
//!
//! Owns: the bench's command line, finding the `reasoning-ledger` binary it measures
//! (`--server`, else the sibling of this executable in the same cargo target
//! directory) and the baseline's (`--baseline`), the scratch directory, and the printed
//! report. Must not: judge the figures (targets are shown beside them, never enforced),
//! or drive our server other than as a child process behind its argv (what is measured
//! is the binary users run).

mod durability;
mod host;
mod http;
mod ledger;
mod postgres;
mod search;
mod servers;

use anyhow::{Context, bail};
use clap::Parser;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Name of the binary target that serves MCP (the one users install), without the
/// platform's executable suffix.
const SERVER_BIN_NAME: &str = "reasoning-ledger";

/// The directory cargo puts test and build-script executables in, below the profile
/// directory that holds the binaries.
const CARGO_DEPS_DIR: &str = "deps";

#[derive(Parser, Debug)]
#[command(
    name = "reasoning-ledger-bench",
    version,
    about = "Measure reasoning-ledger: side by side with the Node reference server, and the ledger itself",
    long_about = "Measure reasoning-ledger: side by side with the Node reference server, and the ledger itself.\n\nBuild both binaries first (`cargo build --release`), then run target/release/reasoning-ledger-bench from the repository root (the reference server is looked up in bench/reference/ there)."
)]
struct BenchArgs {
    /// The server binary to measure [default: reasoning-ledger beside this executable]
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,
    /// Another build's reasoning-ledger binary: measure it and this one side by side
    /// (start on an empty and on a filled ledger, one caller's p50, 8 and 64 calls in
    /// flight, server CPU per call, memory), their runs interleaved over --rounds rounds,
    /// and print each figure's medians and ratio. Nothing else is measured then.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["no_servers", "host", "search", "http", "semantic"])]
    baseline: Option<PathBuf>,
    /// Rounds of the side-by-side run (--baseline); every figure is the median of its rounds
    #[arg(long, default_value_t = servers::DEFAULT_COMPARE_ROUNDS, requires = "baseline")]
    rounds: usize,
    /// Scratch directory for the benchmark ledgers [default: a new temporary directory]
    #[arg(long)]
    scratch: Option<PathBuf>,
    /// Calls for the one-caller and the in-flight runs
    #[arg(long, default_value_t = servers::DEFAULT_CALLS)]
    calls: usize,
    /// Spawn → initialize runs per server
    #[arg(long, default_value_t = servers::DEFAULT_SPAWN_RUNS)]
    spawn_runs: usize,
    /// Thought counts at which RSS is read (comma-separated) [default: 10000; with
    /// --baseline 6000]
    #[arg(long, value_delimiter = ',')]
    rss_at: Option<Vec<usize>>,
    /// Thoughts in the ledger whose start (spawn → initialize) is measured beside the
    /// empty ledger's, written once per run and copied for every spawn; 0 skips it
    #[arg(long, default_value_t = servers::DEFAULT_FILLED_THOUGHTS)]
    filled_thoughts: usize,
    /// Record the server's CPU profile over each 64-in-flight run with `perf record`
    /// (call graphs from DWARF), one file per server and round in this directory: for
    /// flame graphs of the request path (measure a build with symbols: `cargo build
    /// --profile profiling`). The CPU per call of a profiled run includes perf's cost
    #[arg(long, value_name = "DIR")]
    perf_wide: Option<PathBuf>,
    /// Skip the MCP server benchmarks
    #[arg(long)]
    no_servers: bool,
    /// Skip the Node reference server even if installed (bench/reference)
    #[arg(long)]
    no_reference: bool,
    /// Skip the ledger benchmarks
    #[arg(long)]
    no_ledger: bool,
    /// Events in the session rebuilt
    #[arg(long, default_value_t = ledger::DEFAULT_REBUILD_EVENTS)]
    rebuild_events: u64,
    /// Thoughts in the tree exported as Mermaid
    #[arg(long, default_value_t = ledger::DEFAULT_MERMAID_THOUGHTS)]
    mermaid_thoughts: u64,
    /// Events in the ledger opened
    #[arg(long, default_value_t = ledger::DEFAULT_OPEN_EVENTS)]
    open_events: u64,
    /// Skip the store benchmark (redb beside PostgreSQL)
    #[arg(long)]
    no_postgres: bool,
    /// The PostgreSQL to measure [default: a throwaway one started with tools/pg]
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// Also measure search (issue 20): recall's index beside the previous build's scan,
    /// on a generated ledger of --search-events events (markdown only)
    #[arg(long)]
    search: bool,
    /// Events in the ledger searched
    #[arg(long, default_value_t = search::DEFAULT_SEARCH_EVENTS)]
    search_events: u64,
    /// The ledger --search generates: varied text (issue 20's), or one session whose every
    /// thought says the same sentence (issue 45's: phrases every event holds)
    #[arg(long, value_enum, default_value_t = search::SearchFixture::Varied)]
    search_fixture: search::SearchFixture,
    /// Also measure `serve --http` (issue 22): one client's latency, then 16 clients (each
    /// its own MCP session) at once, on redb beside PostgreSQL
    #[arg(long)]
    http: bool,
    /// Also measure the ledger host (issue 23): 64 in flight over one connection and over
    /// 8 processes on one ledger, and a CLI `show` while a server holds the ledger
    #[arg(long)]
    host: bool,
    /// Also measure durability (issue 47): one append made durable by redb alone (one
    /// process; every process writing) and by our store (redb beside the redo log), beside
    /// one `fdatasync` (--calls appends each)
    #[arg(long)]
    durability: bool,
    /// Events in our store's two ledgers before the durability bench's appends (a used
    /// ledger's deeper trees)
    #[arg(long, default_value_t = 0, requires = "durability")]
    durability_events: u64,
    /// Also measure semantic recall (issue 21): every event embedded through a stub
    /// endpoint, then lexical, semantic and hybrid search on a warm server (markdown only)
    #[arg(long)]
    semantic: bool,
    /// Events in the ledgers of the semantic bench (comma-separated sizes)
    #[arg(long, value_delimiter = ',', default_values_t = search::DEFAULT_SEMANTIC_EVENTS.to_vec())]
    semantic_events: Vec<u64>,
    /// Print the figures as JSON
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    if let Some(code) = search::measure_child_if_asked() {
        return code;
    }
    let args = BenchArgs::parse();
    init_logging();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// The store's warnings and errors go to stderr, as they would from the server.
fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .try_init();
}

/// The `reasoning-ledger` binary to measure: `--server`, else the file of that name in
/// this executable's directory, where cargo builds both binaries of the package
/// (`target/<profile>/`; from a test harness in `target/<profile>/deps/`, its parent).
/// Missing, it is an error naming the command that builds it.
fn server_binary(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(path) = flag {
        if !path.is_file() {
            bail!("--server {}: no such file", path.display());
        }
        return Ok(path);
    }
    let exe = std::env::current_exe().context("locating this executable")?;
    let dir = exe
        .parent()
        .with_context(|| format!("{} has no parent directory", exe.display()))?;
    let file_name = format!("{SERVER_BIN_NAME}{}", std::env::consts::EXE_SUFFIX);
    let sibling = dir.join(&file_name);
    let candidates = match dir.file_name() {
        Some(name) if name == CARGO_DEPS_DIR => {
            vec![sibling, dir.with_file_name(&file_name)]
        }
        _ => vec![sibling],
    };
    if let Some(found) = candidates.iter().find(|path| path.is_file()) {
        return Ok(found.clone());
    }
    let profile = if cfg!(debug_assertions) {
        ""
    } else {
        " --release"
    };
    bail!(
        "the server binary to measure is missing: no {} beside this bench at {}.\nBuild it first: `cargo build{profile}` (builds both binaries), or pass --server PATH",
        file_name,
        dir.display()
    )
}

/// Our binary's path and build time, so a report can be matched to a build (a stale
/// binary is measured as it is; rebuild with `cargo build` first).
fn describe_binary(path: &Path) -> String {
    let built = std::fs::metadata(path)
        .and_then(|meta| meta.modified())
        .map(|time| format!(", built {}", humantime::format_rfc3339_seconds(time)))
        .unwrap_or_default();
    format!("{}{built}", path.display())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// The server benchmarks' options from the command line (no servers selected yet).
fn server_options(
    args: &BenchArgs,
    scratch: &Path,
    default_rss_at: usize,
) -> servers::ServerBenchOptions {
    let mut options = servers::ServerBenchOptions::new(scratch.join("servers"));
    options.calls = args.calls;
    options.spawn_runs = args.spawn_runs;
    options.filled_thoughts = args.filled_thoughts;
    options.perf_wide = args.perf_wide.clone();
    options.rss_checkpoints = args.rss_at.clone().unwrap_or_else(|| vec![default_rss_at]);
    options
}

/// Writes the report to stdout.
fn print(out: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// `--baseline`: the two builds side by side, nothing else. The report is printed
/// whatever happened; a build whose measurement failed then makes the run fail.
fn run_compare(args: &BenchArgs, baseline: &Path) -> anyhow::Result<()> {
    if !baseline.is_file() {
        bail!("--baseline {}: no such file", baseline.display());
    }
    let this = server_binary(args.server.clone())?;
    let temp;
    let scratch = match &args.scratch {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::tempdir().context("creating a scratch directory")?;
            temp.path().to_path_buf()
        }
    };
    eprintln!("bench: baseline {}", describe_binary(baseline));
    eprintln!("bench: this     {}", describe_binary(&this));
    let mut options = server_options(args, &scratch, servers::DEFAULT_COMPARE_RSS_THOUGHTS);
    options.rounds = args.rounds;
    let report = runtime()?.block_on(servers::run_compare(baseline, &this, options))?;
    let out = if args.json {
        let value = serde_json::json!({ "side_by_side": report.report_json() });
        format!("{}\n", serde_json::to_string_pretty(&value)?)
    } else {
        report.to_string()
    };
    print(&out)?;
    match report.failure() {
        Some(failure) => bail!("the side-by-side run failed: {failure}"),
        None => Ok(()),
    }
}

fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(baseline) = &args.baseline {
        return run_compare(&args, baseline);
    }
    // Found before anything is measured: a missing binary fails at once, not after the
    // ledger fixtures.
    let server = if args.no_servers && args.no_postgres {
        None
    } else {
        Some(server_binary(args.server.clone())?)
    };
    let temp;
    let scratch = match args.scratch.clone() {
        Some(dir) => dir,
        None => {
            temp = tempfile::tempdir().context("creating a scratch directory")?;
            temp.path().to_path_buf()
        }
    };
    let mut report = serde_json::Map::new();
    let mut text = String::new();
    // One step per part measured (stores, servers, ledger), on a terminal only.
    let parts = [
        server.is_some() && !args.no_postgres,
        server.is_some() && !args.no_servers,
        !args.no_ledger,
    ];
    let bar = reasoning_ledger::testing::Progress::bar(
        "bench",
        parts.iter().filter(|on| **on).count() as u64,
        "parts",
    );
    if let Some(server) = server.as_ref().filter(|_| !args.no_postgres) {
        bar.set_message("bench: stores (redb beside PostgreSQL)");
        let figures = runtime()?.block_on(postgres::run(
            server,
            &scratch,
            args.postgres.clone(),
            args.calls,
        ))?;
        text.push_str(&format!("{figures}\n"));
        report.insert("stores".into(), serde_json::to_value(&figures)?);
        bar.inc(1);
    }
    if let Some(server) = server.filter(|_| !args.no_servers) {
        bar.set_message("bench: MCP servers");
        bar.say(&format!("bench: measuring {}", describe_binary(&server)));
        let mut options = server_options(&args, &scratch, servers::DEFAULT_RSS_THOUGHTS);
        let ours = servers::ours_command(&server);
        options.filled_writer = Some(ours.clone());
        options
            .servers
            .push(servers::ServerUnderTest::new(servers::OURS, ours));
        if !args.no_reference {
            let root = std::env::current_dir()?;
            match servers::reference_command(&root) {
                Some(reference) => options
                    .servers
                    .push(servers::ServerUnderTest::new(servers::REFERENCE, reference)),
                None => bar.say(&format!(
                    "bench: the Node reference server is not installed; run `npm ci --prefix {}` to compare side by side",
                    servers::REFERENCE_PROJECT_DIR
                )),
            }
        }
        let figures = runtime()?.block_on(servers::run_server_bench(options))?;
        text.push_str(&format!("{figures}\n"));
        report.insert("servers".into(), figures.report_json());
        bar.inc(1);
    }
    if args.durability {
        bar.set_message("bench: durability (redb alone beside our store)");
        let figures = durability::run(&scratch, args.calls, args.durability_events)?;
        text.push_str(&format!("{figures}\n"));
        report.insert("durability".into(), serde_json::to_value(&figures)?);
    }
    if args.host {
        let server = server_binary(args.server.clone())?;
        let figures = runtime()?.block_on(host::run(&server, &scratch, args.calls))?;
        text.push_str(&format!("{figures}\n"));
        report.insert("host".into(), serde_json::to_value(&figures)?);
    }
    if args.search {
        let server = server_binary(args.server.clone())?;
        let figures = runtime()?.block_on(search::run(
            &server,
            &scratch,
            args.search_events,
            args.search_fixture,
        ))?;
        text.push_str(&format!("{figures}\n"));
        report.insert("search".into(), serde_json::Value::String(figures));
    }
    if args.http {
        let server = server_binary(args.server.clone())?;
        let figures = runtime()?.block_on(http::run(
            &server,
            &scratch,
            args.postgres.clone(),
            args.calls,
        ))?;
        text.push_str(&format!("{figures}\n"));
        report.insert("http".into(), serde_json::to_value(&figures)?);
    }
    if args.semantic {
        let server = server_binary(args.server.clone())?;
        let figures = runtime()?.block_on(search::run_semantic(
            &server,
            &scratch,
            &args.semantic_events,
        ))?;
        text.push_str(&format!("{figures}\n"));
        report.insert("semantic".into(), serde_json::Value::String(figures));
    }
    if !args.no_ledger {
        bar.set_message("bench: the ledger");
        bar.say(&format!(
            "bench: building ledger fixtures ({} + {} + {} events)…",
            args.rebuild_events, args.mermaid_thoughts, args.open_events
        ));
        let figures = ledger::run(
            &scratch.join("ledger"),
            args.rebuild_events,
            args.mermaid_thoughts,
            args.open_events,
        )?;
        text.push_str(&figures.to_string());
        report.insert("ledger".into(), serde_json::to_value(&figures)?);
        bar.inc(1);
    }
    bar.finish();
    let out = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&report)?)
    } else {
        text
    };
    print(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_server_flag_names_the_path() {
        let error = server_binary(Some(PathBuf::from("/nonexistent/reasoning-ledger")))
            .expect_err("no such file");
        assert!(error.to_string().contains("/nonexistent/reasoning-ledger"));
    }

    #[test]
    fn the_arguments_parse_with_their_defaults() {
        let args = BenchArgs::try_parse_from(["reasoning-ledger-bench"]).expect("no arguments");
        assert_eq!(args.calls, servers::DEFAULT_CALLS);
        assert_eq!(args.rss_at, None);
        assert_eq!(args.filled_thoughts, servers::DEFAULT_FILLED_THOUGHTS);
        assert_eq!(args.open_events, ledger::DEFAULT_OPEN_EVENTS);
        let options = server_options(&args, Path::new("/s"), servers::DEFAULT_RSS_THOUGHTS);
        assert_eq!(options.rss_checkpoints, [servers::DEFAULT_RSS_THOUGHTS]);
    }

    #[test]
    fn the_side_by_side_run_takes_its_own_defaults_and_no_other_part() {
        let args = BenchArgs::try_parse_from(["reasoning-ledger-bench", "--baseline", "/b/rl"])
            .expect("--baseline alone");
        assert_eq!(args.rounds, servers::DEFAULT_COMPARE_ROUNDS);
        let options = server_options(
            &args,
            Path::new("/s"),
            servers::DEFAULT_COMPARE_RSS_THOUGHTS,
        );
        assert_eq!(
            options.rss_checkpoints,
            [servers::DEFAULT_COMPARE_RSS_THOUGHTS]
        );
        assert!(
            BenchArgs::try_parse_from(["reasoning-ledger-bench", "--baseline", "/b/rl", "--host"])
                .is_err()
        );
        assert!(BenchArgs::try_parse_from(["reasoning-ledger-bench", "--rounds", "3"]).is_err());
    }
}
