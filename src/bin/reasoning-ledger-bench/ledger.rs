//! Ledger-side benchmarks (no MCP): rebuild of a long session, Mermaid, SVG and HTML
//! exports of a big tree, and opening a ledger holding a million events.
//!
//! Owns: building the fixture ledgers (batched appends through the real store) and timing
//! the operations DESIGN §10 sets targets for, and the table of their figures. Must not:
//! judge the figures; it measures and reports (the targets are shown beside them).

use anyhow::Context;
use reasoning_ledger::testing::Ledger;
use reasoning_ledger::testing::ThoughtTree;
use reasoning_ledger::testing::{CallRecord, NewEvent, Payload, SessionId, SessionKind};
use reasoning_ledger::testing::{SequentialThought, ThinkingEvent};
use std::path::Path;
use std::time::{Duration, Instant};

/// Events in the session whose rebuild (a tool's own fold) is timed, by default.
pub(crate) const DEFAULT_REBUILD_EVENTS: u64 = 100_000;

/// Thoughts in the tree whose Mermaid export is timed, by default.
pub(crate) const DEFAULT_MERMAID_THOUGHTS: u64 = 10_000;

/// Events in the ledger whose open is timed, by default.
pub(crate) const DEFAULT_OPEN_EVENTS: u64 = 1_000_000;

/// Events appended per transaction while building fixtures (fixtures are not the
/// measured part; one commit per event would take minutes for a million).
pub(crate) const FIXTURE_BATCH: u64 = 2_000;

/// Figures of the ledger benchmarks, in milliseconds.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct LedgerFigures {
    pub rebuild_events: u64,
    /// Median of several folds of the whole session from the file.
    pub rebuild_ms: f64,
    pub mermaid_thoughts: u64,
    /// Median Mermaid render of the tree (already folded).
    pub mermaid_ms: f64,
    /// Median SVG render of the same tree (layout included).
    pub svg_ms: f64,
    /// Median HTML render of the same tree (the SVG inside it included).
    pub html_ms: f64,
    /// That HTML page, written for the browser benchmark (`tools/browser-check/check.mjs
    /// paint FILE`); kept when `--scratch` names the directory.
    pub html_file: std::path::PathBuf,
    pub html_bytes: u64,
    pub open_events: u64,
    /// Median time of `Ledger::open` on the big ledger (a fresh process would pay this).
    pub open_ms: f64,
    pub open_file_bytes: u64,
}

impl std::fmt::Display for LedgerFigures {
    /// A Markdown table: figure, measurement, DESIGN §10 target.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "| ledger figure | measured | target |\n|---|---|---|\n| rebuild a {}-event session | {:.1} ms | ≤ 150 ms |\n| Mermaid export of {} thoughts | {:.1} ms | ≤ 50 ms |\n| SVG export of {} thoughts | {:.1} ms | ≤ 200 ms |\n| HTML export of {} thoughts ({:.1} MiB) | {:.1} ms | — |\n| open a ledger of {} events ({:.0} MiB) | {:.2} ms | ≤ 50 ms |\n",
            self.rebuild_events,
            self.rebuild_ms,
            self.mermaid_thoughts,
            self.mermaid_ms,
            self.mermaid_thoughts,
            self.svg_ms,
            self.mermaid_thoughts,
            self.html_bytes as f64 / 1048576.0,
            self.html_ms,
            self.open_events,
            self.open_file_bytes as f64 / 1048576.0,
            self.open_ms
        )
    }
}

fn thought_payload(n: u64, total: u64) -> Payload {
    // A realistic mix: every 10th thought revises, every 25th starts a branch.
    let branch = n.is_multiple_of(25).then(|| format!("b{}", n / 25));
    let thought = SequentialThought {
        thought: format!(
            "Thought {n}: weigh the evidence, note what is uncertain, and decide what to check next."
        ),
        thought_number: n,
        total_thoughts: total,
        next_thought_needed: n < total,
        is_revision: n.is_multiple_of(10).then_some(true),
        revises_thought: n.is_multiple_of(10).then(|| n - 1),
        branch_from_thought: branch.as_ref().map(|_| n - 1),
        branch_id: branch,
        needs_more_thoughts: None,
    };
    // The arguments as a client sends them: the whole call, thought text included.
    let mut raw = serde_json::json!({
        "thought": thought.thought,
        "thoughtNumber": n,
        "totalThoughts": total,
        "nextThoughtNeeded": n < total,
    });
    if let Some(revises) = thought.revises_thought {
        raw["isRevision"] = true.into();
        raw["revisesThought"] = revises.into();
    }
    if let Some(branch) = &thought.branch_id {
        raw["branchFromThought"] = (n - 1).into();
        raw["branchId"] = branch.as_str().into();
    }
    ThinkingEvent::ThoughtRecorded {
        thought,
        call: CallRecord {
            tool: "sequentialthinking".into(),
            raw_arguments: raw.into(),
            duration_us: 10,
        },
    }
    .into()
}

/// Appends a thinking session of `events` events (one start + thoughts) in batches.
pub(crate) fn build_session(ledger: &Ledger, events: u64) -> anyhow::Result<SessionId> {
    let session = SessionId::generate();
    let thoughts = events.saturating_sub(1);
    let mut seq = 0u64;
    while seq < events {
        let upto = (seq + FIXTURE_BATCH).min(events);
        let mut batch = Vec::new();
        for s in seq + 1..=upto {
            batch.push(NewEvent::new(if s == 1 {
                Payload::SessionStarted {
                    kind: SessionKind::THINKING,
                    title: "benchmark".into(),
                    aliases: Vec::new(),
                }
            } else {
                thought_payload(s - 1, thoughts)
            }));
        }
        let expected = seq;
        ledger
            .write_blocking(move |txn| txn.append(session, expected, batch))?
            .context("appending fixture events")?;
        seq = upto;
    }
    Ok(session)
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1000.0
}

/// Runs the three ledger benchmarks in `dir` (fixtures are built there and kept).
pub(crate) fn run(
    dir: &Path,
    rebuild_events: u64,
    mermaid_thoughts: u64,
    open_events: u64,
) -> anyhow::Result<LedgerFigures> {
    let rebuild_dir = dir.join("rebuild");
    let ledger = Ledger::open(&rebuild_dir, reasoning_ledger::testing::families())?;
    let session = build_session(&ledger, rebuild_events)?;
    let mut samples = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        // What a ledger tool or export does: read the head, fold the session.
        let head = ledger.head(session)?.context("fixture head")?;
        let tree = reasoning_ledger::testing::load_tree(&ledger, &head, None)?;
        samples.push(started.elapsed());
        assert_eq!(tree.at_seq, rebuild_events);
    }
    let rebuild_ms = median(samples);
    drop(ledger);

    let mermaid_dir = dir.join("mermaid");
    let ledger = Ledger::open(&mermaid_dir, reasoning_ledger::testing::families())?;
    let session = build_session(&ledger, mermaid_thoughts + 1)?;
    let events = ledger.events(session, 1, mermaid_thoughts + 1)?;
    let families = reasoning_ledger::testing::families();
    let folds = reasoning_ledger::testing::Folds::of_families(&families);
    let exports = reasoning_ledger::testing::Exports::of_families(&families);
    let tree = ThoughtTree::build(session, events, &folds);
    let mut samples = Vec::new();
    for _ in 0..9 {
        let started = Instant::now();
        let text = reasoning_ledger::testing::render_mermaid(&tree, &exports);
        samples.push(started.elapsed());
        std::hint::black_box(text);
    }
    let mermaid_ms = median(samples);
    let mut samples = Vec::new();
    for _ in 0..9 {
        let started = Instant::now();
        let text = reasoning_ledger::testing::render_svg(&tree, &exports);
        samples.push(started.elapsed());
        std::hint::black_box(text);
    }
    let svg_ms = median(samples);
    let mut samples = Vec::new();
    let mut page = String::new();
    for _ in 0..9 {
        let started = Instant::now();
        page = reasoning_ledger::testing::render_html(&tree, &exports);
        samples.push(started.elapsed());
    }
    let html_ms = median(samples);
    let html_file = mermaid_dir.join(format!("session-{mermaid_thoughts}.html"));
    std::fs::write(&html_file, &page)?;
    drop(ledger);

    let open_dir = dir.join("open");
    {
        let ledger = Ledger::open(&open_dir, reasoning_ledger::testing::families())?;
        let per_session = 100_000u64.min(open_events);
        let mut total = 0;
        while total < open_events {
            let n = per_session.min(open_events - total);
            build_session(&ledger, n)?;
            total += n;
        }
    }
    let mut samples = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        let ledger = Ledger::open(&open_dir, reasoning_ledger::testing::families())?;
        samples.push(started.elapsed());
        drop(ledger);
    }
    let open_file_bytes =
        std::fs::metadata(open_dir.join(reasoning_ledger::testing::LEDGER_FILE_NAME))?.len();
    Ok(LedgerFigures {
        rebuild_events,
        rebuild_ms,
        mermaid_thoughts,
        mermaid_ms,
        svg_ms,
        html_ms,
        html_file,
        html_bytes: page.len() as u64,
        open_events,
        open_ms: median(samples),
        open_file_bytes,
    })
}
