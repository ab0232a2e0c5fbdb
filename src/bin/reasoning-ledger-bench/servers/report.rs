//! The benchmark's figures and their two renderings: a side-by-side Markdown
//! table (`Display`) and JSON ([`ServerBenchReport::report_json`]).
//!
//! Owns: how figures are laid out and the one derived figure, the
//! durability budget. Must not: measure, or turn a figure into a pass/fail
//! verdict (the budget is shown next to the measurement, not enforced).

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use super::fsync::{FSYNC_WRITE_BYTES, FsyncFigures};
use super::stats::{LatencySummary, fmt_count, fmt_duration, fmt_kib, micros};

/// DESIGN's durability budget: our one-caller p50 should be at most this
/// factor times (reference one-caller p50 + one `fdatasync` p50).
pub(super) const DURABILITY_BUDGET_FACTOR: f64 = 1.3;

/// Everything one `run_server_bench` measured.
#[derive(Debug, Clone)]
pub(crate) struct ServerBenchReport {
    /// Spawn → `initialize` runs per server.
    pub spawn_runs: usize,
    /// Measured calls per run (one caller; in flight).
    pub calls: usize,
    /// Unmeasured calls before the one-caller run.
    pub warmup_calls: usize,
    /// Requests in flight during the throughput run.
    pub in_flight: usize,
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

/// Figures for one server.
#[derive(Debug, Clone)]
pub(crate) struct ServerFigures {
    /// `serverInfo` name and version from `initialize`.
    pub server: Option<String>,
    /// Negotiated MCP protocol version.
    pub protocol_version: Option<String>,
    /// Median time from spawn to `initialize` answered.
    pub spawn_to_initialize_median: Duration,
    /// All spawn → `initialize` samples summarised.
    pub spawn_to_initialize: LatencySummary,
    /// Round trips with one caller.
    pub one_caller: LatencySummary,
    /// Round trips while `in_flight` calls were outstanding.
    pub in_flight: LatencySummary,
    /// Wall time of the in-flight run.
    pub in_flight_elapsed: Duration,
    /// Calls answered per second during the in-flight run.
    pub calls_per_sec: f64,
    /// VmRSS right after `initialize`, in KiB.
    pub rss_idle_kib: Option<u64>,
    /// (thoughts recorded, VmRSS in KiB) at each checkpoint.
    pub rss_kib: Vec<(usize, u64)>,
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
                Ok(f) => json!({
                    "command": command,
                    "server": f.server,
                    "protocol_version": f.protocol_version,
                    "spawn_to_initialize_median_us": micros(f.spawn_to_initialize_median),
                    "spawn_to_initialize": f.spawn_to_initialize.to_json(),
                    "one_caller": f.one_caller.to_json(),
                    "in_flight": f.in_flight.to_json(),
                    "in_flight_elapsed_us": micros(f.in_flight_elapsed),
                    "calls_per_sec": f.calls_per_sec,
                    "rss_idle_kib": f.rss_idle_kib,
                    "rss_kib": f.rss_kib.iter()
                        .map(|&(thoughts, kib)| json!({ "thoughts": thoughts, "kib": kib }))
                        .collect::<Vec<_>>(),
                }),
            },
        };
        json!({
            "settings": {
                "spawn_runs": self.spawn_runs,
                "calls": self.calls,
                "warmup_calls": self.warmup_calls,
                "in_flight": self.in_flight,
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
                    Box::new(|s| fmt_duration(s.spawn_to_initialize_median)),
                ),
                (
                    "spawn → initialize, min / max".into(),
                    Box::new(|s| {
                        format!(
                            "{} / {}",
                            fmt_duration(s.spawn_to_initialize.min),
                            fmt_duration(s.spawn_to_initialize.max)
                        )
                    }),
                ),
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
                    Box::new(|s| format!("{:.0}", s.calls_per_sec)),
                ),
                (
                    format!("{} in flight, p50 / p99", self.in_flight),
                    Box::new(|s| {
                        format!(
                            "{} / {}",
                            fmt_duration(s.in_flight.p50),
                            fmt_duration(s.in_flight.p99)
                        )
                    }),
                ),
            ];
            if !self.rss_checkpoints.is_empty() {
                rows.push((
                    "RSS after initialize".into(),
                    Box::new(|s| s.rss_idle_kib.map_or_else(|| "—".into(), fmt_kib)),
                ));
            }
            for &checkpoint in &self.rss_checkpoints {
                rows.push((
                    format!("RSS after {} thoughts", fmt_count(checkpoint)),
                    Box::new(move |s| {
                        s.rss_kib
                            .iter()
                            .find(|&&(n, _)| n == checkpoint)
                            .map_or_else(|| "—".into(), |&(_, kib)| fmt_kib(kib))
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

/// Keeps a cell from breaking the Markdown table.
fn escape_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn summary(p50_us: u64) -> LatencySummary {
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

    fn figures(p50_us: u64) -> ServerFigures {
        ServerFigures {
            server: Some("demo 1.0".into()),
            protocol_version: Some("2025-11-25".into()),
            spawn_to_initialize_median: Duration::from_millis(150),
            spawn_to_initialize: summary(150_000),
            one_caller: summary(p50_us),
            in_flight: summary(p50_us * 4),
            in_flight_elapsed: Duration::from_secs(1),
            calls_per_sec: 2000.0,
            rss_idle_kib: Some(40_960),
            rss_kib: vec![(10_000, 81_920)],
        }
    }

    fn report() -> ServerBenchReport {
        ServerBenchReport {
            spawn_runs: 20,
            calls: 2000,
            warmup_calls: 50,
            in_flight: 8,
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
                figures: Ok(figures(100)),
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
    }

    #[test]
    fn json_shape() {
        let value = report().report_json();
        assert_eq!(value["servers"]["reference"]["one_caller"]["p50_us"], 100.0);
        assert_eq!(value["servers"]["ours"]["rss_kib"][0]["thoughts"], 10_000);
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
