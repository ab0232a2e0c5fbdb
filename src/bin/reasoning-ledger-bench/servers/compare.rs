//! The side-by-side run of two builds (`--baseline`): another build's `reasoning-ledger`
//! binary and this one, measured in one run by the same client, every part of a round
//! run for both in turn (A B A B …) over several rounds; each figure is the median of
//! its rounds, shown with the ratio this ÷ baseline. It is the guard a change to the
//! request path, the store or the start runs before it is called done (the book's
//! Testing and Benchmarks chapters).
//!
//! Owns: which figures are compared, their medians and ratios, and their two
//! renderings (Markdown, JSON). Must not: judge a ratio (no threshold: how much a
//! figure moves between rounds is in the JSON, and the reader weighs it), or measure
//! other than through [`super::measure`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::filled::FilledLedger;
use super::fsync::{FSYNC_WRITE_BYTES, FsyncFigures};
use super::report::{
    ServerFigures, cpu_per_call_label, figures_json, filled_start_label, memory_at,
};
use super::stats::{fmt_count, fmt_duration, fmt_kib, micros};
use super::{Measured, ServerBenchOptions, ServerUnderTest, measure, ours_command};

/// The column of the other build, the one compared against.
pub(crate) const BASELINE: &str = "baseline";

/// The column of the build measured (`--server`, else the binary beside the bench).
pub(crate) const THIS: &str = "this";

/// Rounds of the side-by-side run: every figure is the median of this many
/// measurements of each build.
pub(crate) const DEFAULT_COMPARE_ROUNDS: usize = 5;

/// Thoughts a fresh server records before its memory is read in the side-by-side run
/// (issue 41's memory goal is stated after 6,000 thoughts).
pub(crate) const DEFAULT_COMPARE_RSS_THOUGHTS: usize = 6_000;

/// Measures the binary `baseline` and the binary `this` side by side with the counts of
/// `opts` (its servers and filled-ledger writer are set here). The filled ledger is
/// written by the baseline: a build opens what an earlier one wrote, not always the
/// reverse, and the baseline is usually the earlier build.
pub(crate) async fn run_compare(
    baseline: &Path,
    this: &Path,
    mut opts: ServerBenchOptions,
) -> anyhow::Result<CompareReport> {
    let baseline_argv = ours_command(baseline);
    opts.servers = vec![
        ServerUnderTest::new(BASELINE, baseline_argv.clone()),
        ServerUnderTest::new(THIS, ours_command(this)),
    ];
    opts.filled_writer = Some(baseline_argv);
    let measured = measure(&opts).await?;
    Ok(CompareReport::new(&opts, baseline, this, measured))
}

/// What the side-by-side run measured.
#[derive(Debug)]
pub(crate) struct CompareReport {
    /// Rounds run.
    pub rounds: usize,
    /// Spawn → `initialize` runs per build, per ledger, per round.
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
    /// Thought counts at which memory was read (ascending).
    pub rss_checkpoints: Vec<usize>,
    /// The durability baseline of the scratch directory's disk.
    pub fdatasync: FsyncFigures,
    /// The other build.
    pub baseline: Build,
    /// This build.
    pub this: Build,
}

/// One of the two builds and what was measured of it.
#[derive(Debug)]
pub(crate) struct Build {
    /// Its binary.
    pub binary: PathBuf,
    /// The binary's size in bytes and modification time, when they could be read.
    pub file: Option<(u64, String)>,
    /// The argv that was run (with the data-dir placeholder unexpanded).
    pub command: Vec<String>,
    /// One set of figures per round, or what stopped the measurement.
    pub rounds: Result<Vec<ServerFigures>, String>,
}

impl Build {
    fn new(
        binary: &Path,
        command: Vec<String>,
        rounds: Result<Vec<ServerFigures>, String>,
    ) -> Self {
        let file = std::fs::metadata(binary).ok().and_then(|meta| {
            let modified = meta.modified().ok()?;
            Some((
                meta.len(),
                humantime::format_rfc3339_seconds(modified).to_string(),
            ))
        });
        Self {
            binary: binary.to_path_buf(),
            file,
            command,
            rounds,
        }
    }

    /// The figure `read` of every round (`None` where that round did not measure it;
    /// no rounds when the build failed).
    fn values(&self, read: &Read<'_>) -> Vec<Option<f64>> {
        match &self.rounds {
            Ok(rounds) => rounds.iter().map(read).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn to_json(&self) -> Value {
        let mut value = json!({
            "binary": self.binary.to_string_lossy(),
            "bytes": self.file.as_ref().map(|(bytes, _)| bytes),
            "modified": self.file.as_ref().map(|(_, modified)| modified),
            "command": self.command,
        });
        match &self.rounds {
            Ok(rounds) => value["rounds"] = rounds.iter().map(figures_json).collect(),
            Err(error) => value["error"] = json!(error),
        }
        value
    }
}

/// How a compared figure's values are expressed and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// A duration, in microseconds.
    Micros,
    /// Calls answered per second.
    PerSecond,
    /// Memory, in KiB.
    KiB,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Micros => "us",
            Unit::PerSecond => "calls_per_s",
            Unit::KiB => "kib",
        }
    }

    fn show(self, value: f64) -> String {
        match self {
            Unit::Micros => fmt_duration(Duration::from_secs_f64(value.max(0.0) / 1e6)),
            Unit::PerSecond => format!("{}/s", fmt_count(value.round() as usize)),
            Unit::KiB => fmt_kib(value.round() as u64),
        }
    }
}

/// Reads one figure of one round, `None` when that round did not measure it.
type Read<'a> = Box<dyn Fn(&ServerFigures) -> Option<f64> + 'a>;

/// One compared figure: its JSON key, its row name, its unit and how it is read.
struct Compared<'a> {
    key: String,
    label: String,
    unit: Unit,
    read: Read<'a>,
}

/// One compared figure's medians and ratio.
struct Row {
    key: String,
    label: String,
    unit: Unit,
    /// The baseline's value in each round that measured it.
    baseline_rounds: Vec<f64>,
    /// This build's value in each round that measured it.
    this_rounds: Vec<f64>,
    /// this ÷ baseline of each round that measured both: the two values of a round were
    /// taken one right after the other, so load that changes over the run cancels.
    round_ratios: Vec<f64>,
}

impl Row {
    fn baseline(&self) -> Option<f64> {
        median(&self.baseline_rounds)
    }

    fn this(&self) -> Option<f64> {
        median(&self.this_rounds)
    }

    /// The median of the rounds' ratios.
    fn ratio(&self) -> Option<f64> {
        median(&self.round_ratios)
    }

    /// The smallest and the largest of the rounds' ratios.
    fn ratio_range(&self) -> Option<(f64, f64)> {
        let low = self.round_ratios.iter().copied().reduce(f64::min)?;
        let high = self.round_ratios.iter().copied().reduce(f64::max)?;
        Some((low, high))
    }
}

impl CompareReport {
    fn new(opts: &ServerBenchOptions, baseline: &Path, this: &Path, measured: Measured) -> Self {
        let mut builds = measured.servers.into_iter();
        let mut next = |binary: &Path| {
            let rounds = builds.next();
            let (command, rounds) = match rounds {
                Some(server) => (server.command, server.rounds),
                None => (Vec::new(), Err("not measured".to_owned())),
            };
            Build::new(binary, command, rounds)
        };
        let baseline = next(baseline);
        let this = next(this);
        Self {
            rounds: opts.rounds,
            spawn_runs: opts.spawn_runs,
            calls: opts.calls,
            warmup_calls: opts.warmup_calls,
            in_flight: opts.in_flight,
            wide_in_flight: opts.wide_in_flight,
            filled: measured.filled,
            rss_checkpoints: measured.rss_checkpoints,
            fdatasync: measured.fdatasync,
            baseline,
            this,
        }
    }

    /// What stopped either build's measurement, if anything did.
    pub(crate) fn failure(&self) -> Option<String> {
        let failures: Vec<String> = [(BASELINE, &self.baseline), (THIS, &self.this)]
            .into_iter()
            .filter_map(|(name, build)| {
                build
                    .rounds
                    .as_ref()
                    .err()
                    .map(|error| format!("{name}: {error}"))
            })
            .collect();
        (!failures.is_empty()).then(|| failures.join("; "))
    }

    /// The figures compared, in the table's order.
    fn compared(&self) -> Vec<Compared<'static>> {
        let mut compared = vec![Compared {
            key: "start_empty_us".into(),
            label: format!(
                "spawn → initialize answered, empty ledger, median of {}",
                self.spawn_runs
            ),
            unit: Unit::Micros,
            read: Box::new(|f| Some(micros(f.start_empty.median))),
        }];
        if let Some(filled) = &self.filled {
            compared.push(Compared {
                key: "start_filled_us".into(),
                label: format!(
                    "{}, median of {}",
                    filled_start_label(filled),
                    self.spawn_runs
                ),
                unit: Unit::Micros,
                read: Box::new(|f| f.start_filled.map(|start| micros(start.median))),
            });
        }
        compared.extend([
            Compared {
                key: "one_caller_p50_us".into(),
                label: format!("one caller, p50 of {} calls", fmt_count(self.calls)),
                unit: Unit::Micros,
                read: Box::new(|f| Some(micros(f.one_caller.p50))),
            },
            Compared {
                key: "in_flight_calls_per_sec".into(),
                label: format!("{} in flight on one connection", self.in_flight),
                unit: Unit::PerSecond,
                read: Box::new(|f| Some(f.in_flight.calls_per_sec)),
            },
            Compared {
                key: "wide_in_flight_calls_per_sec".into(),
                label: format!("{} in flight on one connection", self.wide_in_flight),
                unit: Unit::PerSecond,
                read: Box::new(|f| Some(f.wide_in_flight.calls_per_sec)),
            },
            Compared {
                key: "cpu_per_call_us".into(),
                label: cpu_per_call_label(self.wide_in_flight),
                unit: Unit::Micros,
                read: Box::new(|f| Some(micros(f.cpu_per_call))),
            },
        ]);
        for &thoughts in &self.rss_checkpoints {
            compared.push(Compared {
                key: format!("vm_rss_kib_after_{thoughts}"),
                label: format!("VmRSS after {} thoughts", fmt_count(thoughts)),
                unit: Unit::KiB,
                read: Box::new(move |f| memory_at(f, thoughts).map(|m| m.vm_rss_kib as f64)),
            });
            compared.push(Compared {
                key: format!("rss_anon_kib_after_{thoughts}"),
                label: format!(
                    "private memory (RssAnon) after {} thoughts",
                    fmt_count(thoughts)
                ),
                unit: Unit::KiB,
                read: Box::new(move |f| memory_at(f, thoughts).map(|m| m.rss_anon_kib as f64)),
            });
        }
        compared
    }

    fn rows(&self) -> Vec<Row> {
        self.compared()
            .into_iter()
            .map(|figure| {
                let baseline = self.baseline.values(&figure.read);
                let this = self.this.values(&figure.read);
                let round_ratios = baseline
                    .iter()
                    .zip(&this)
                    .filter_map(|pair| match pair {
                        (Some(baseline), Some(this)) if *baseline > 0.0 => Some(this / baseline),
                        _ => None,
                    })
                    .collect();
                Row {
                    baseline_rounds: baseline.into_iter().flatten().collect(),
                    this_rounds: this.into_iter().flatten().collect(),
                    round_ratios,
                    key: figure.key,
                    label: figure.label,
                    unit: figure.unit,
                }
            })
            .collect()
    }

    /// The report as JSON: every figure's medians, ratio and per-round values, and every
    /// round's full figures per build; durations in microseconds, sizes in KiB.
    pub(crate) fn report_json(&self) -> Value {
        json!({
            "settings": {
                "rounds": self.rounds,
                "order": [BASELINE, THIS],
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
            "figures": self.rows().iter().map(|row| json!({
                "key": row.key,
                "label": row.label,
                "unit": row.unit.name(),
                "baseline": row.baseline(),
                "this": row.this(),
                "ratio": row.ratio(),
                "baseline_rounds": row.baseline_rounds,
                "this_rounds": row.this_rounds,
                "round_ratios": row.round_ratios,
            })).collect::<Vec<_>>(),
            BASELINE: self.baseline.to_json(),
            THIS: self.this.to_json(),
        })
    }
}

/// The conventional median (the mean of the two middle values of an even count).
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

impl fmt::Display for CompareReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "## Side by side: {BASELINE} and {THIS} build")?;
        writeln!(f)?;
        writeln!(
            f,
            "| figure | {BASELINE} | {THIS} | ratio | ratio's range over the rounds |"
        )?;
        writeln!(f, "| --- | ---: | ---: | ---: | ---: |")?;
        for row in self.rows() {
            let cell = |value: Option<f64>, build: &Build| match (value, &build.rounds) {
                (_, Err(_)) => "failed".to_owned(),
                (Some(value), _) => row.unit.show(value),
                (None, _) => "—".to_owned(),
            };
            let ratio = row
                .ratio()
                .map_or_else(|| "—".to_owned(), |ratio| format!("{ratio:.2} ×"));
            let range = row.ratio_range().map_or_else(
                || "—".to_owned(),
                |(low, high)| format!("{low:.2}–{high:.2}"),
            );
            writeln!(
                f,
                "| {} | {} | {} | {ratio} | {range} |",
                row.label,
                cell(row.baseline(), &self.baseline),
                cell(row.this(), &self.this),
            )?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "Medians of {} rounds; each round ran every part (start on an empty ledger, start on the filled one, calls, memory) for {BASELINE}, then {THIS}, with the same client. The {BASELINE} and {THIS} columns are the median of each build's rounds; the ratio is the median of the rounds' own {THIS} ÷ {BASELINE} (a round measures both one right after the other, so load that comes and goes cancels): below 1 is better for times, CPU and memory, above 1 for calls/s. A ratio whose range over the rounds holds 1 is not a difference this run can tell. Every round's figures: `--json`.",
            self.rounds
        )?;
        writeln!(f)?;
        for (name, build) in [(BASELINE, &self.baseline), (THIS, &self.this)] {
            let file = build
                .file
                .as_ref()
                .map(|(bytes, modified)| {
                    format!(
                        " ({} bytes, modified {modified})",
                        fmt_count(*bytes as usize)
                    )
                })
                .unwrap_or_default();
            writeln!(f, "- {name}: `{}`{file}", build.command.join(" "))?;
            if let Err(error) = &build.rounds {
                writeln!(f, "  - failed: {error}")?;
            }
        }
        if let Some(filled) = &self.filled {
            writeln!(
                f,
                "- filled ledger: {} thoughts in one session, {} of files (the ledger and its redo log), written by {BASELINE}; every spawn on it opens a fresh copy, synced before the spawn",
                fmt_count(filled.thoughts),
                fmt_kib(filled.bytes / 1024)
            )?;
        }
        let fsync = &self.fdatasync;
        writeln!(
            f,
            "- fdatasync after a {FSYNC_WRITE_BYTES}-byte write in `{}`{}: p50 {} over {} samples",
            fsync.dir.display(),
            fsync
                .filesystem
                .as_ref()
                .map(|fs| format!(" ({fs})"))
                .unwrap_or_default(),
            fmt_duration(fsync.latency.p50),
            fsync.latency.samples,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::{figures, summary};
    use super::*;

    fn build(rounds: Result<Vec<ServerFigures>, String>) -> Build {
        Build {
            binary: PathBuf::from("/b/reasoning-ledger"),
            file: Some((12_345, "2026-11-28T00:00:00Z".into())),
            command: vec!["/b/reasoning-ledger".into(), "serve".into()],
            rounds,
        }
    }

    fn report(this_p50s: &[u64]) -> CompareReport {
        CompareReport {
            rounds: this_p50s.len(),
            spawn_runs: 20,
            calls: 2000,
            warmup_calls: 50,
            in_flight: 8,
            wide_in_flight: 64,
            filled: Some(FilledLedger {
                dir: PathBuf::from("/s/filled-ledger"),
                thoughts: 20_000,
                bytes: 25 * 1024 * 1024,
                ledger_file_bytes: Some(17 * 1024 * 1024),
            }),
            rss_checkpoints: vec![6_000],
            fdatasync: FsyncFigures {
                dir: PathBuf::from("/s"),
                filesystem: Some("ext4".into()),
                latency: summary(100),
            },
            baseline: build(Ok(this_p50s.iter().map(|_| figures(200)).collect())),
            this: build(Ok(this_p50s.iter().map(|&p50| figures(p50)).collect())),
        }
    }

    #[test]
    fn every_figure_is_a_median_of_its_rounds_with_its_ratio() {
        let report = report(&[100, 900, 150]);
        let text = report.to_string();
        assert!(
            text.contains("| figure | baseline | this | ratio |"),
            "{text}"
        );
        assert!(
            text.contains("| one caller, p50 of 2,000 calls | 200 µs | 150 µs | 0.75 × |"),
            "{text}"
        );
        for row in [
            "| spawn → initialize answered, empty ledger, median of 20 | 150 ms | 150 ms | 1.00 × | 1.00–1.00 |",
            "| spawn → initialize answered, a ledger of 20,000 thoughts (17.0 MiB), median of 20 | 160 ms | 160 ms | 1.00 × |",
            "| 8 in flight on one connection | 2,000/s | 2,000/s | 1.00 × |",
            "| 64 in flight on one connection | 4,000/s | 4,000/s | 1.00 × |",
            "| server CPU per durable call, 64 in flight (user + system) | 50.0 µs | 50.0 µs | 1.00 × |",
            "| VmRSS after 6,000 thoughts | — | — | — | — |",
        ] {
            assert!(text.contains(row), "{row} missing from {text}");
        }
        assert!(text.contains("Medians of 3 rounds"), "{text}");
        let value = report.report_json();
        let p50 = value["figures"]
            .as_array()
            .expect("figures")
            .iter()
            .find(|figure| figure["key"] == "one_caller_p50_us")
            .expect("the one-caller figure");
        assert_eq!(p50["this"], 150.0);
        assert_eq!(p50["ratio"], 0.75);
        assert_eq!(p50["this_rounds"], json!([100.0, 900.0, 150.0]));
        assert_eq!(p50["round_ratios"], json!([0.5, 4.5, 0.75]));
        assert_eq!(value["this"]["rounds"].as_array().map(Vec::len), Some(3));
        assert_eq!(value["settings"]["order"], json!(["baseline", "this"]));
        assert!(report.failure().is_none());
    }

    #[test]
    fn memory_rows_read_their_checkpoint() {
        let mut report = report(&[100]);
        report.rss_checkpoints = vec![10_000];
        let text = report.to_string();
        assert!(
            text.contains(
                "| VmRSS after 10,000 thoughts | 80.0 MiB | 80.0 MiB | 1.00 × | 1.00–1.00 |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "| private memory (RssAnon) after 10,000 thoughts | 2.00 MiB | 2.00 MiB | 1.00 × |"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_failed_build_is_named_and_has_no_ratio() {
        let mut report = report(&[100, 200]);
        report.baseline.rounds = Err("spawning: no such file | at all".into());
        let text = report.to_string();
        assert!(
            text.contains("| one caller, p50 of 2,000 calls | failed | 150 µs | — | — |"),
            "{text}"
        );
        assert!(text.contains("failed: spawning"), "{text}");
        assert!(
            report
                .failure()
                .is_some_and(|f| f.starts_with("baseline: spawning"))
        );
        assert_eq!(
            report.report_json()["baseline"]["error"],
            "spawning: no such file | at all"
        );
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
    }
}
