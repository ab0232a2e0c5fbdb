//! `recover --to DIR` (issue 32, salvage): a damaged ledger's verified events into a new
//! ledger. The page sweep damages each 4 KiB page of the checked-in fixture
//! (`tests/fixtures/ledger-v2`, every family) in turn and checks what comes back: never a
//! panic, a new ledger that verifies, every event in it byte for byte the original's, and
//! at least [`MIN_SALVAGED`] of the events kept on average. The redo-log test kills a
//! server with acknowledged records still in `ledger.wal` and damages one of them.

use crate::common::{call, cli, data_dir, stderr, stdout, structured, thought};
use crate::faults_process::{kill_9, spawn_with_pid};
use serde_json::json;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// The checked-in ledger of every family.
const FIXTURE_DIR: &str = "tests/fixtures/ledger-v2";
/// redb's page size: the sweep damages each page of this size in turn.
const PAGE_BYTES: usize = 4096;
/// Bytes damaged (inverted) at the start of each page.
const DAMAGED_BYTES: usize = 64;
/// Pages the sweep damages at most (evenly spread when the file has more).
const MAX_SWEEP_PAGES: usize = 64;
/// The fraction of events the sweep must keep in the new ledger, on average over pages.
const MIN_SALVAGED: f64 = 0.95;
/// The salvage's files beside the new ledger.
const BEYOND_GAPS_FILE: &str = "salvage-beyond-gaps.jsonl";
const REPORT_FILE: &str = "salvage-report.txt";

fn fixture() -> (Vec<u8>, BTreeSet<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE_DIR);
    let ledger = std::fs::read(root.join("ledger.redb")).unwrap();
    let lines = std::fs::read_to_string(root.join("ledger.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    (ledger, lines)
}

/// What one `recover` run gave: its exit code, the new ledger's events as exported
/// (JSONL lines) and the lines of the beyond-gaps file.
struct Recovered {
    code: i32,
    report: String,
    kept: Vec<String>,
    beyond: Vec<String>,
    took: Duration,
}

/// Runs `recover --to <new>` on `damaged` and checks what every run must hold: no panic,
/// exit 0 or 1, the damaged files untouched, a new ledger that verifies, the report
/// beside it.
fn recover(damaged: &Path, new: &Path, context: &str) -> Recovered {
    let before: Vec<(String, Vec<u8>)> = files(damaged);
    let started = Instant::now();
    let out = cli(damaged, &["recover", "--to", new.to_str().unwrap()]);
    let took = started.elapsed();
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "{context}: exit {code}: {}",
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("panicked"),
        "{context}: {}",
        stderr(&out)
    );
    assert_eq!(
        files(damaged),
        before,
        "{context}: the damaged ledger was written"
    );
    let report = stdout(&out);
    assert!(
        report.contains("the damaged ledger was only read, and left untouched"),
        "{context}: {report}"
    );
    assert_eq!(
        std::fs::read_to_string(new.join(REPORT_FILE)).unwrap(),
        report,
        "{context}"
    );
    let verify = cli(new, &["verify"]);
    assert!(
        verify.status.success(),
        "{context}: verify of the new ledger: {}",
        stderr(&verify)
    );
    let export = cli(new, &["export", "--all", "-f", "jsonl"]);
    assert!(export.status.success(), "{context}: {}", stderr(&export));
    let lines = |text: String| text.lines().map(str::to_string).collect::<Vec<_>>();
    Recovered {
        code,
        report,
        kept: lines(stdout(&export)),
        beyond: lines(std::fs::read_to_string(new.join(BEYOND_GAPS_FILE)).unwrap()),
        took,
    }
}

/// The files of a directory and their bytes, by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn an_undamaged_ledger_is_recovered_whole_and_byte_for_byte() {
    let (ledger, lines) = fixture();
    let dir = data_dir();
    std::fs::write(dir.path().join("ledger.redb"), &ledger).unwrap();
    let new = data_dir();
    let target = new.path().join("new");
    let recovered = recover(dir.path(), &target, "undamaged");
    assert_eq!(recovered.code, 0, "{}", recovered.report);
    assert!(recovered.beyond.is_empty());
    // Sessions in id order, each in seq order: the fixture's own ledger.jsonl.
    let want: Vec<String> = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(FIXTURE_DIR)
            .join("ledger.jsonl"),
    )
    .unwrap()
    .lines()
    .map(str::to_string)
    .collect();
    assert_eq!(recovered.kept, want);
    assert_eq!(recovered.kept.len(), lines.len());
    assert!(
        recovered
            .report
            .contains(&format!("kept: 6 session(s), {} event(s)", lines.len())),
        "{}",
        recovered.report
    );

    // Never into a directory holding a ledger (the one just made), nor the data directory.
    for to in [&target, &dir.path().to_path_buf()] {
        let before = files(to);
        let refused = cli(dir.path(), &["recover", "--to", to.to_str().unwrap()]);
        assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
        assert!(
            stderr(&refused).contains("recover --to"),
            "{}",
            stderr(&refused)
        );
        assert_eq!(files(to), before);
    }
    // Nothing to salvage where there is no ledger.
    let empty = data_dir();
    let nothing = cli(
        empty.path(),
        &["recover", "--to", new.path().join("n2").to_str().unwrap()],
    );
    assert_eq!(nothing.status.code(), Some(1));
    assert!(
        stderr(&nothing).contains("nothing to salvage"),
        "{}",
        stderr(&nothing)
    );
}

#[test]
fn each_damaged_page_of_the_fixture_loses_little_and_changes_nothing_it_keeps() {
    let (ledger, lines) = fixture();
    let pages = ledger.len() / PAGE_BYTES;
    let step = pages.div_ceil(MAX_SWEEP_PAGES).max(1);
    let mut fractions: Vec<f64> = Vec::new();
    let mut took = Duration::ZERO;
    for page in (0..pages).step_by(step) {
        let context = format!("page {page}");
        let dir = data_dir();
        let mut damaged = ledger.clone();
        let start = page * PAGE_BYTES;
        for byte in &mut damaged[start..start + DAMAGED_BYTES] {
            *byte ^= 0xff;
        }
        std::fs::write(dir.path().join("ledger.redb"), &damaged).unwrap();
        let new = data_dir();
        let recovered = recover(dir.path(), new.path(), &context);
        took += recovered.took;
        for line in recovered.kept.iter().chain(&recovered.beyond) {
            assert!(
                lines.contains(line),
                "{context}: an event that is not the original's: {line}"
            );
        }
        let kept = recovered.kept.len();
        let complete = recovered.beyond.is_empty() && kept == lines.len();
        if complete {
            assert_eq!(recovered.code, 0, "{context}: {}", recovered.report);
        } else {
            // Something was cut or lost: the report says so and the exit code is 1
            // (every event lost here is named by a gap or by its session's head row).
            assert_eq!(recovered.code, 1, "{context}: {}", recovered.report);
        }
        println!(
            "{context}: {kept}/{} kept, {} beyond gaps, exit {}",
            lines.len(),
            recovered.beyond.len(),
            recovered.code
        );
        fractions.push(kept as f64 / lines.len() as f64);
    }
    let average = fractions.iter().sum::<f64>() / fractions.len() as f64;
    println!(
        "salvaged on average {:.2} % of {} events over {} damaged pages ({DAMAGED_BYTES} bytes \
         each); {:.0} ms per recover",
        average * 100.0,
        lines.len(),
        fractions.len(),
        took.as_secs_f64() * 1000.0 / fractions.len() as f64
    );
    assert!(
        average >= MIN_SALVAGED,
        "salvaged {:.2} % on average",
        average * 100.0
    );
}

/// The byte offsets of `ledger.wal`'s records (its format: a 4 KiB header, then
/// `[len u32][checksum 8][lsn u64][payload]`), each as (offset of its payload, length).
fn wal_records(log: &[u8]) -> Vec<(usize, usize)> {
    let mut records = Vec::new();
    let mut at = 4096;
    while at + 20 <= log.len() {
        let len = u32::from_le_bytes(log[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 || at + 20 + len > log.len() {
            break;
        }
        records.push((at + 20, len));
        at += 20 + len;
    }
    records
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Acknowledged thoughts still only in `ledger.wal` (the server killed before its
/// checkpoint), one of its early records damaged: outside its event row, every thought
/// comes back whole; inside it, that thought alone is lost (its only copy) and every one
/// after it comes back into the beyond-gaps file.
#[tokio::test]
async fn acknowledged_records_in_the_redo_log_are_salvaged_past_a_damaged_one() {
    const THOUGHTS: u64 = 8;
    let dir = data_dir();
    let (client, pid) = spawn_with_pid(dir.path()).await;
    let mut session = String::new();
    for n in 1..=THOUGHTS {
        let mut args = thought(n, THOUGHTS, n < THOUGHTS, &format!("salvaged thought {n}"));
        if n > 1 {
            args["sessionId"] = json!(session);
        }
        let answer = structured(&call(&client, "sequentialthinking", args).await);
        session = answer["sessionId"].as_str().unwrap().to_string();
        assert_eq!(answer["eventSeq"], json!(n + 1));
    }
    // Before the writer's idle checkpoint (1 s): the records are acknowledged, in the log.
    kill_9(pid);
    drop(client);
    let log = std::fs::read(dir.path().join("ledger.wal")).unwrap();
    let redb = std::fs::read(dir.path().join("ledger.redb")).unwrap();
    let records = wal_records(&log);
    assert!(!records.is_empty(), "no record in the redo log");
    // The first record that holds a thought (the first commit may go to redb instead).
    let (first, len) = *records
        .iter()
        .find(|(at, len)| find(&log[*at..at + len], b"salvaged thought ").is_some())
        .expect("a thought in the log");
    let record = &log[first..first + len];
    let head_at = find(record, b"{\"session\":\"").expect("a head row in the record");
    let damaged_thought: u64 = {
        let at = find(&record[..head_at], b"salvaged thought ").expect("the event row first");
        u64::from(record[at + b"salvaged thought ".len()] - b'0')
    };
    let texts = |lines: &[String]| -> BTreeSet<u64> {
        (1..=THOUGHTS)
            .filter(|n| {
                let text = format!("\"salvaged thought {n}\"");
                lines.iter().any(|l| l.contains(&text))
            })
            .collect()
    };
    let every: BTreeSet<u64> = (1..=THOUGHTS).collect();

    // 1. Outside the event row (in the record's session head row): the record's checksum
    //    fails (a replay would stop there), yet every thought comes back, kept whole.
    let case = data_dir();
    let mut damaged = log.clone();
    for byte in &mut damaged[first + head_at + 40..first + head_at + 56] {
        *byte ^= 0xff;
    }
    std::fs::write(case.path().join("ledger.wal"), &damaged).unwrap();
    std::fs::write(case.path().join("ledger.redb"), &redb).unwrap();
    let new = data_dir();
    let recovered = recover(case.path(), new.path(), "head row damaged");
    assert_eq!(texts(&recovered.kept), every, "{}", recovered.report);
    assert_eq!(recovered.code, 0, "{}", recovered.report);
    assert_eq!(recovered.kept.len() as u64, THOUGHTS + 1);

    // 2. Inside the event row: that thought's only copy is gone; every later one comes
    //    back (past the gap: in the beyond-gaps file), and the report names the gap.
    let row_at = find(&record[..head_at], b"salvaged thought ").expect("the event row first");
    let case = data_dir();
    let mut damaged = log.clone();
    for byte in &mut damaged[first + row_at..first + row_at + 16] {
        *byte ^= 0xff;
    }
    std::fs::write(case.path().join("ledger.wal"), &damaged).unwrap();
    std::fs::write(case.path().join("ledger.redb"), &redb).unwrap();
    let new = data_dir();
    let recovered = recover(case.path(), new.path(), "event row damaged");
    println!("{}", recovered.report);
    let mut found = texts(&recovered.kept);
    found.extend(texts(&recovered.beyond));
    let mut others = every.clone();
    others.remove(&damaged_thought);
    assert!(
        others.is_subset(&found),
        "found {found:?}: {}",
        recovered.report
    );
    if !found.contains(&damaged_thought) {
        // Only the log held it (redb had not written it when the server was killed).
        let seq = damaged_thought + 1;
        assert_eq!(recovered.code, 1);
        assert!(
            recovered.report.contains(&format!(
                "first gap at seq {seq} (no verified event at seq {seq})"
            )),
            "{}",
            recovered.report
        );
        let after: BTreeSet<u64> = (damaged_thought + 1..=THOUGHTS).collect();
        assert_eq!(texts(&recovered.beyond), after, "{}", recovered.report);
    }
}
