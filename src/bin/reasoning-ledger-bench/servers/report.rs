//! The benchmark's figures and their two renderings: a side-by-side Markdown
//! table (`Display`) and JSON ([`ServerBenchReport::report_json`]).
//!
//! Owns: how figures are laid out and the one derived figure, the
//! durability budget. Must not: measure, or turn a figure into a pass/fail
//! verdict (the budget is shown next to the measurement, not enforced).

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use super::filled::FilledLedger;
use super::fsync::{FSYNC_WRITE_BYTES, FsyncFigures};
use super::session::{ConcurrentRun, MemoryReading};
use super::stats::{self, LatencySummary, fmt_count, fmt_duration, fmt_kib, micros};
use super::{Measured, OURS, REFERENCE, ServerBenchOptions};

/// DESIGN's durability budget: our one-caller p50 should be at most this
/// factor times (reference one-caller p50 + one `fdatasync` p50).
pub(super) const DURABILITY_BUDGET_FACTOR: f64 = 1.3;

/// Everything one `run_server_bench` measured.
#[derive(Debug, Clone)]
pub(crate) struct ServerBenchReport {
    /// Spawn → `initialize` runs per server, per ledger.
    pub spawn_runs: usize,
    /// Measured calls per run (one caller; each in-flight run).
    pub calls: usize,
    /// Unmeasured calls before the one-caller run.
    pub warmup_calls: usize,
    /// Requests in flight during the throughput run.
    pub in_flight: usize,
    /// Requests in flight during the wide throughput run (CPU per call read over it).
    pub wide_in_flight: usize,
    /// The filled ledger whose start was measured, if it was written.
    pub filled: Option<FilledLedger>,
    /// Thought counts at which RSS was read (ascending).
    pub rss_checkpoints: Vec<usize>,
    /// The durability baseline.
    pub fdatasync: FsyncFigures,
    /// Our server, if selected.
    pub ours: Option<ServerOutcome>,
    /// The reference server, if selected.
    pub reference: Option<ServerOutcome>,
}

/// One selected server: its command and either its figures or why not.
#[derive(Debug, Clone)]
pub(crate) struct ServerOutcome {
    /// The argv that was run (with the data-dir placeholder unexpanded).
    pub command: Vec<String>,
    /// The figures, or the error that stopped the measurement.
    pub figures: Result<ServerFigures, String>,
}

/// Figures for one server, from one round.
#[derive(Debug, Clone)]
pub(crate) struct ServerFigures {
    /// `serverInfo` name and version from `initialize`.
    pub server: Option<String>,
    /// Negotiated MCP protocol version.
    pub protocol_version: Option<String>,
    /// Spawn → `initialize` answered, on an empty data directory.
    pub start_empty: StartTimes,
    /// The same on a copy of the filled ledger; `None` when not measured (no filled
    /// ledger, or a server that keeps none).
    pub start_filled: Option<StartTimes>,
    /// Round trips with one caller.
    pub one_caller: LatencySummary,
    /// The throughput run.
    pub in_flight: Throughput,
    /// The wide throughput run.
    pub wide_in_flight: Throughput,
    /// The server's CPU time (user + system, all threads) over the wide run, per call.
    pub cpu_per_call: Duration,
    /// Memory right after `initialize` (when memory was read).
    pub rss_idle: Option<MemoryReading>,
    /// (thoughts recorded, memory) at each checkpoint.
    pub rss: Vec<(usize, MemoryReading)>,
}

/// Spawn → `initialize` answered over several spawns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StartTimes {
    /// Their conventional median.
    pub median: Duration,
    /// All of them summarised.
    pub summary: LatencySummary,
}

impl StartTimes {
    /// `None` without samples.
    pub(crate) fn from_samples(mut samples: Vec<Duration>) -> Option<Self> {
        samples.sort_unstable();
        let median = (!samples.is_empty()).then(|| stats::median(&samples))?;
        Some(Self {
            median,
            summary: LatencySummary::from_samples(samples)?,
        })
    }

    fn to_json(self) -> Value {
        json!({ "median_us": micros(self.median), "spawns": self.summary.to_json() })
    }
}

/// Calls from several callers sharing one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Throughput {
    /// Requests kept in flight.
    pub in_flight: usize,
    /// Round trips under that load.
    pub latency: LatencySummary,
    /// Wall time from the first call sent to the last answer.
    pub elapsed: Duration,
    /// Calls answered per second.
    pub calls_per_sec: f64,
}

impl Throughput {
    /// `None` for a run without calls.
    pub(crate) fn from_run(in_flight: usize, run: ConcurrentRun) -> Option<Self> {
        let calls = run.samples.len();
        Some(Self {
            in_flight,
            latency: LatencySummary::from_samples(run.samples)?,
            elapsed: run.elapsed,
            calls_per_sec: calls as f64 / run.elapsed.as_secs_f64(),
        })
    }
}

/// One server's figures as JSON; durations in microseconds, sizes in KiB.
pub(crate) fn figures_json(f: &ServerFigures) -> Value {
    json!({
        "server": f.server,
        "protocol_version": f.protocol_version,
        "spawn_to_initialize_median_us": micros(f.start_empty.median),
        "spawn_to_initialize": f.start_empty.summary.to_json(),
        "filled_spawn_to_initialize": f.start_filled.map(StartTimes::to_json),
        "one_caller": f.one_caller.to_json(),
        "in_flight": f.in_flight.latency.to_json(),
        "in_flight_elapsed_us": micros(f.in_flight.elapsed),
        "calls_per_sec": f.in_flight.calls_per_sec,
        "wide_in_flight": {
            "in_flight": f.wide_in_flight.in_flight,
            "latency": f.wide_in_flight.latency.to_json(),
            "elapsed_us": micros(f.wide_in_flight.elapsed),
            "calls_per_sec": f.wide_in_flight.calls_per_sec,
        },
        "cpu_per_call_us": micros(f.cpu_per_call),
        "rss_idle_kib": f.rss_idle.map(|reading| reading.vm_rss_kib),
        "rss_anon_idle_kib": f.rss_idle.map(|reading| reading.rss_anon_kib),
        "rss_kib": f.rss.iter()
            .map(|(thoughts, reading)| json!({
                "thoughts": thoughts,
                "kib": reading.vm_rss_kib,
                "anon_kib": reading.rss_anon_kib,
            }))
            .collect::<Vec<_>>(),
    })
}

/// The budget for our one-caller p50 and how the measurement compares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DurabilityBudget {
    /// `DURABILITY_BUDGET_FACTOR × (reference p50 + fdatasync p50)`.
    pub budget: Duration,
    /// Our one-caller p50.
    pub ours_p50: Duration,
}

impl DurabilityBudget {
    /// Our p50 as a fraction of the budget (≤ 1 is within it).
    pub(crate) fn ratio(&self) -> f64 {
        self.ours_p50.as_secs_f64() / self.budget.as_secs_f64()
    }
}

impl ServerBenchReport {
    /// The report of a one-round [`super::measure`] of [`OURS`] and [`REFERENCE`].
    pub(crate) fn new(opts: &ServerBenchOptions, measured: Measured) -> Self {
        let mut ours = None;
        let mut reference = None;
        for server in measured.servers {
            let slot = match server.label.as_str() {
                OURS => &mut ours,
                REFERENCE => &mut reference,
                _ => continue,
            };
            *slot = Some(ServerOutcome {
                command: server.command,
                figures: server.rounds.and_then(|rounds| {
                    rounds
                        .into_iter()
                        .next()
                        .ok_or_else(|| "no round was measured".to_owned())
                }),
            });
        }
        Self {
            spawn_runs: opts.spawn_runs,
            calls: opts.calls,
            warmup_calls: opts.warmup_calls,
            in_flight: opts.in_flight,
            wide_in_flight: opts.wide_in_flight,
            filled: measured.filled,
            rss_checkpoints: measured.rss_checkpoints,
            fdatasync: measured.fdatasync,
            ours,
            reference,
        }
    }

    /// The durability budget, when both servers were measured.
    pub(crate) fn durability_budget(&self) -> Option<DurabilityBudget> {
        let ours = self.ours.as_ref()?.figures.as_ref().ok()?;
        let reference = self.reference.as_ref()?.figures.as_ref().ok()?;
        let base = reference.one_caller.p50 + self.fdatasync.latency.p50;
        Some(DurabilityBudget {
            budget: base.mul_f64(DURABILITY_BUDGET_FACTOR),
            ours_p50: ours.one_caller.p50,
        })
    }

    /// The report as JSON; durations in microseconds, sizes in KiB.
    pub(crate) fn report_json(&self) -> Value {
        let server_json = |outcome: &Option<ServerOutcome>| match outcome {
            None => Value::Null,
            Some(ServerOutcome { command, figures }) => match figures {
                Err(error) => json!({ "command": command, "error": error }),
                Ok(f) => {
                    let mut value = figures_json(f);
                    value["command"] = json!(command);
                    value
                }
            },
        };
        json!({
            "settings": {
                "spawn_runs": self.spawn_runs,
                "calls": self.calls,
                "warmup_calls": self.warmup_calls,
                "in_flight": self.in_flight,
                "wide_in_flight": self.wide_in_flight,
                "filled_thoughts": self.filled.as_ref().map(|filled| filled.thoughts),
                "filled_bytes": self.filled.as_ref().map(|filled| filled.bytes),
                "filled_ledger_file_bytes": self.filled.as_ref().and_then(|filled| filled.ledger_file_bytes),
                "rss_checkpoints": self.rss_checkpoints,
            },
            "fdatasync": {
                "dir": self.fdatasync.dir.to_string_lossy(),
                "filesystem": self.fdatasync.filesystem,
                "write_bytes": FSYNC_WRITE_BYTES,
                "latency": self.fdatasync.latency.to_json(),
            },
            "servers": {
                "ours": server_json(&self.ours),
                "reference": server_json(&self.reference),
            },
            "durability_budget": self.durability_budget().map(|b| json!({
                "factor": DURABILITY_BUDGET_FACTOR,
                "budget_us": micros(b.budget),
                "ours_p50_us": micros(b.ours_p50),
                "ratio": b.ratio(),
            })),
        })
    }
}

/// One table row: a label and a cell function applied to each server.
type Cell<'a> = Box<dyn Fn(&ServerFigures) -> String + 'a>;

impl fmt::Display for ServerBenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "## MCP server benchmark")?;
        writeln!(f)?;
        let columns: Vec<(&str, &ServerOutcome)> =
            [("ours", &self.ours), ("reference", &self.reference)]
                .into_iter()
                .filter_map(|(name, outcome)| outcome.as_ref().map(|o| (name, o)))
                .collect();

        if !columns.is_empty() {
            write!(f, "| figure |")?;
            for (name, _) in &columns {
                write!(f, " {name} |")?;
            }
            writeln!(f)?;
            write!(f, "| --- |")?;
            for _ in &columns {
                write!(f, " ---: |")?;
            }
            writeln!(f)?;

            let mut rows: Vec<(String, Cell<'_>)> = vec![
                (
                    "server".into(),
                    Box::new(|s| s.server.clone().unwrap_or_else(|| "?".into())),
                ),
                (
                    "protocol version".into(),
                    Box::new(|s| s.protocol_version.clone().unwrap_or_else(|| "?".into())),
                ),
                (
                    format!("spawn → initialize answered, median of {}", self.spawn_runs),
                    Box::new(|s| fmt_duration(s.start_empty.median)),
                ),
                (
                    "spawn → initialize, min / max".into(),
                    Box::new(|s| {
                        format!(
                            "{} / {}",
                            fmt_duration(s.start_empty.summary.min),
                            fmt_duration(s.start_empty.summary.max)
                        )
                    }),
                ),
            ];
            if let Some(filled) = &self.filled {
                rows.push((
                    format!(
                        "{}, median of {}",
                        filled_start_label(filled),
                        self.spawn_runs
                    ),
                    Box::new(|s| {
                        s.start_filled
                            .map_or_else(|| "—".into(), |start| fmt_duration(start.median))
                    }),
                ));
            }
            rows.extend::<[(String, Cell<'_>); 7]>([
                (
                    format!("one caller, p50 of {} calls", fmt_count(self.calls)),
                    Box::new(|s| fmt_duration(s.one_caller.p50)),
                ),
                (
                    "one caller, p99".into(),
                    Box::new(|s| fmt_duration(s.one_caller.p99)),
                ),
                (
                    format!(
                        "{} in flight, calls/s over {} calls",
                        self.in_flight,
                        fmt_count(self.calls)
                    ),
                    Box::new(|s| format!("{:.0}", s.in_flight.calls_per_sec)),
                ),
                (
                    format!("{} in flight, p50 / p99", self.in_flight),
                    Box::new(|s| latency_pair(&s.in_flight.latency)),
                ),
                (
                    format!(
                        "{} in flight, calls/s over {} calls",
                        self.wide_in_flight,
                        fmt_count(self.calls)
                    ),
                    Box::new(|s| format!("{:.0}", s.wide_in_flight.calls_per_sec)),
                ),
                (
                    format!("{} in flight, p50 / p99", self.wide_in_flight),
                    Box::new(|s| latency_pair(&s.wide_in_flight.latency)),
                ),
                (
                    cpu_per_call_label(self.wide_in_flight),
                    Box::new(|s| fmt_duration(s.cpu_per_call)),
                ),
            ]);
            if !self.rss_checkpoints.is_empty() {
                rows.push((
                    "RSS after initialize".into(),
                    Box::new(|s| {
                        s.rss_idle
                            .map_or_else(|| "—".into(), |reading| fmt_kib(reading.vm_rss_kib))
                    }),
                ));
                rows.push((
                    "private (RssAnon) after initialize".into(),
                    Box::new(|s| {
                        s.rss_idle
                            .map_or_else(|| "—".into(), |reading| fmt_kib(reading.rss_anon_kib))
                    }),
                ));
            }
            for &checkpoint in &self.rss_checkpoints {
                rows.push((
                    format!("RSS after {} thoughts", fmt_count(checkpoint)),
                    Box::new(move |s| {
                        memory_at(s, checkpoint)
                            .map_or_else(|| "—".into(), |reading| fmt_kib(reading.vm_rss_kib))
                    }),
                ));
                rows.push((
                    format!("private (RssAnon) after {} thoughts", fmt_count(checkpoint)),
                    Box::new(move |s| {
                        memory_at(s, checkpoint)
                            .map_or_else(|| "—".into(), |reading| fmt_kib(reading.rss_anon_kib))
                    }),
                ));
            }
            for (label, cell) in &rows {
                write!(f, "| {label} |")?;
                for (_, outcome) in &columns {
                    let text = match &outcome.figures {
                        Ok(figures) => cell(figures),
                        Err(_) => "failed".into(),
                    };
                    write!(f, " {} |", escape_cell(&text))?;
                }
                writeln!(f)?;
            }
            writeln!(f)?;
        }

        let fsync = &self.fdatasync;
        writeln!(
            f,
            "fdatasync after a {FSYNC_WRITE_BYTES}-byte write in `{}`{}: p50 {}, p99 {} over {} samples.",
            fsync.dir.display(),
            fsync
                .filesystem
                .as_ref()
                .map(|fs| format!(" ({fs})"))
                .unwrap_or_default(),
            fmt_duration(fsync.latency.p50),
            fmt_duration(fsync.latency.p99),
            fsync.latency.samples,
        )?;

        if let Some(budget) = self.durability_budget() {
            let reference_p50 = self
                .reference
                .as_ref()
                .and_then(|r| r.figures.as_ref().ok())
                .map(|r| r.one_caller.p50)
                .unwrap_or_default();
            writeln!(f)?;
            writeln!(
                f,
                "Durability budget: ours one-caller p50 ≤ {DURABILITY_BUDGET_FACTOR} × (reference p50 {} + fdatasync p50 {}) = {}; measured {} ({:.2} × budget).",
                fmt_duration(reference_p50),
                fmt_duration(fsync.latency.p50),
                fmt_duration(budget.budget),
                fmt_duration(budget.ours_p50),
                budget.ratio(),
            )?;
        }

        if !columns.is_empty() {
            writeln!(f)?;
            for (name, outcome) in &columns {
                writeln!(f, "- {name}: `{}`", outcome.command.join(" "))?;
                if let Err(error) = &outcome.figures {
                    writeln!(f, "  - failed: {error}")?;
                }
            }
        }
        Ok(())
    }
}

/// The memory reading taken after `thoughts` thoughts, if one was.
pub(crate) fn memory_at(figures: &ServerFigures, thoughts: usize) -> Option<MemoryReading> {
    figures
        .rss
        .iter()
        .find(|&&(n, _)| n == thoughts)
        .map(|&(_, reading)| reading)
}

/// The row name of the start on the filled ledger (without the spawn count): its
/// size is the ledger file's, its redo log aside.
pub(crate) fn filled_start_label(filled: &FilledLedger) -> String {
    format!(
        "spawn → initialize answered, a ledger of {} thoughts ({})",
        fmt_count(filled.thoughts),
        fmt_kib(filled.ledger_file_bytes.unwrap_or(filled.bytes) / 1024)
    )
}

/// The row name of the server's CPU time per call.
pub(crate) fn cpu_per_call_label(in_flight: usize) -> String {
    format!("server CPU per durable call, {in_flight} in flight (user + system)")
}

/// `p50 / p99` of a summary.
fn latency_pair(latency: &LatencySummary) -> String {
    format!(
        "{} / {}",
        fmt_duration(latency.p50),
        fmt_duration(latency.p99)
    )
}

/// Keeps a cell from breaking the Markdown table.
fn escape_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::path::PathBuf;

    pub(in super::super) fn summary(p50_us: u64) -> LatencySummary {
        let d = Duration::from_micros(p50_us);
        LatencySummary {
            samples: 10,
            p50: d,
            p99: d * 2,
            mean: d,
            min: d / 2,
            max: d * 3,
        }
    }

    /// Figures of a server whose one-caller p50 is `p50_us`, with everything measured.
    pub(in super::super) fn figures(p50_us: u64) -> ServerFigures {
        let start = |ms| StartTimes {
            median: Duration::from_millis(ms),
            summary: summary(ms * 1_000),
        };
        let throughput = |in_flight, calls_per_sec| Throughput {
            in_flight,
            latency: summary(p50_us * 4),
            elapsed: Duration::from_secs(1),
            calls_per_sec,
        };
        ServerFigures {
            server: Some("demo 1.0".into()),
            protocol_version: Some("2025-11-25".into()),
            start_empty: start(150),
            start_filled: Some(start(160)),
            one_caller: summary(p50_us),
            in_flight: throughput(8, 2000.0),
            wide_in_flight: throughput(64, 4000.0),
            cpu_per_call: Duration::from_micros(50),
            rss_idle: Some(MemoryReading {
                vm_rss_kib: 40_960,
                rss_anon_kib: 1_024,
            }),
            rss: vec![(
                10_000,
                MemoryReading {
                    vm_rss_kib: 81_920,
                    rss_anon_kib: 2_048,
                },
            )],
        }
    }

    fn report() -> ServerBenchReport {
        ServerBenchReport {
            spawn_runs: 20,
            calls: 2000,
            warmup_calls: 50,
            in_flight: 8,
            wide_in_flight: 64,
            filled: Some(FilledLedger {
                dir: PathBuf::from("/data/filled-ledger"),
                thoughts: 20_000,
                bytes: 25 * 1024 * 1024,
                ledger_file_bytes: Some(17 * 1024 * 1024),
            }),
            rss_checkpoints: vec![10_000],
            fdatasync: FsyncFigures {
                dir: PathBuf::from("/data"),
                filesystem: Some("ext4".into()),
                latency: summary(1_000),
            },
            ours: Some(ServerOutcome {
                command: vec!["rl".into(), "serve".into()],
                figures: Ok(figures(1_500)),
            }),
            reference: Some(ServerOutcome {
                command: vec!["node".into(), "index.js".into()],
                figures: Ok(ServerFigures {
                    start_filled: None,
                    ..figures(100)
                }),
            }),
        }
    }

    #[test]
    fn budget_is_factor_times_reference_plus_fsync() {
        let budget = report().durability_budget().expect("both measured");
        assert_eq!(budget.budget, Duration::from_micros(1_430));
        assert!((budget.ratio() - 1_500.0 / 1_430.0).abs() < 1e-9);
    }

    #[test]
    fn table_has_both_columns_and_rows() {
        let text = report().to_string();
        assert!(text.contains("| figure | ours | reference |"), "{text}");
        assert!(
            text.contains("| one caller, p50 of 2,000 calls | 1.50 ms | 100 µs |"),
            "{text}"
        );
        assert!(
            text.contains("| RSS after 10,000 thoughts | 80.0 MiB | 80.0 MiB |"),
            "{text}"
        );
        assert!(text.contains("Durability budget"), "{text}");
        assert!(
            text.contains("| spawn → initialize answered, a ledger of 20,000 thoughts (17.0 MiB), median of 20 | 160 ms | — |"),
            "{text}"
        );
        assert!(
            text.contains(
                "| server CPU per durable call, 64 in flight (user + system) | 50.0 µs | 50.0 µs |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| 64 in flight, calls/s over 2,000 calls | 4000 | 4000 |"),
            "{text}"
        );
        assert!(
            text.contains("| private (RssAnon) after 10,000 thoughts | 2.00 MiB | 2.00 MiB |"),
            "{text}"
        );
    }

    #[test]
    fn json_shape() {
        let value = report().report_json();
        assert_eq!(value["servers"]["reference"]["one_caller"]["p50_us"], 100.0);
        assert_eq!(value["servers"]["ours"]["rss_kib"][0]["thoughts"], 10_000);
        assert_eq!(value["servers"]["ours"]["rss_kib"][0]["anon_kib"], 2_048);
        assert_eq!(value["servers"]["ours"]["cpu_per_call_us"], 50.0);
        assert_eq!(
            value["servers"]["ours"]["filled_spawn_to_initialize"]["median_us"],
            160_000.0
        );
        assert_eq!(
            value["servers"]["reference"]["filled_spawn_to_initialize"],
            Value::Null
        );
        assert_eq!(
            value["servers"]["ours"]["wide_in_flight"]["calls_per_sec"],
            4000.0
        );
        assert_eq!(value["settings"]["filled_thoughts"], 20_000);
        assert_eq!(value["fdatasync"]["filesystem"], "ext4");
        assert_eq!(value["durability_budget"]["budget_us"], 1_430.0);
    }

    #[test]
    fn failed_server_and_missing_budget() {
        let mut r = report();
        r.ours = Some(ServerOutcome {
            command: vec!["rl".into()],
            figures: Err("boom | bang".into()),
        });
        assert!(r.durability_budget().is_none());
        let text = r.to_string();
        assert!(text.contains("| failed |"), "{text}");
        assert!(text.contains("failed: boom | bang"), "{text}");
        assert_eq!(r.report_json()["servers"]["ours"]["error"], "boom | bang");
    }
}
