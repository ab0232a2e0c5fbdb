//! Issue 46's `import` that a person can use, over the real binary: a file holding the
//! same export twice imports once (the repeats skipped and counted); a damaged line costs
//! only its own session from there (every intact session imported, each line and session
//! left out named, exit 1); `--strict` imports all of a file or nothing.

use crate::common::{cli, data_dir, stderr, stdout};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The fixture's whole-ledger export: 37 events in six sessions, sessions in id order.
const EXPORT: &str = "tests/fixtures/ledger-v2/ledger.jsonl";

/// Events per session, as `sessions --json` lists them (by ledger id).
fn events_per_session(dir: &Path) -> BTreeMap<String, u64> {
    let out = cli(dir, &["sessions", "--json", "--limit", "1000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let id = row.get("ledgerId").unwrap_or(&row["sessionId"]);
            (
                id.as_str().unwrap().to_string(),
                row["events"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The fixture's events per session, counted from the file.
fn expected() -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in std::fs::read_to_string(EXPORT).unwrap().lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        *counts
            .entry(event["session"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    counts
}

#[test]
fn a_file_holding_the_export_twice_imports_it_once() {
    let dir = data_dir();
    let whole = std::fs::read_to_string(EXPORT).unwrap();
    let twice = dir.path().join("twice.jsonl");
    std::fs::write(&twice, format!("{whole}{whole}")).unwrap();
    let out = cli(dir.path(), &["import", twice.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("imported 37 event(s) into 6 session(s)")
            && stdout(&out).contains("skipped 37 event(s)"),
        "{}",
        stdout(&out)
    );
    assert_eq!(events_per_session(dir.path()), expected());
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", stdout(&verify));
}

#[test]
fn a_damaged_line_costs_only_its_own_session_from_there_and_strict_imports_nothing() {
    let dir = data_dir();
    let mut lines: Vec<String> = std::fs::read_to_string(EXPORT)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    // Line 14: inside the third session (the first two hold 12 events), its seq 2.
    let damaged: Value = serde_json::from_str(&lines[13]).unwrap();
    let session = damaged["session"].as_str().unwrap().to_string();
    let seq = damaged["seq"].as_u64().unwrap();
    assert!(seq > 1);
    lines[13] = lines[13][..lines[13].len() / 2].to_string();
    let file = dir.path().join("damaged.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();

    // --strict: nothing at all.
    let strict = cli(dir.path(), &["import", "--strict", file.to_str().unwrap()]);
    assert_eq!(strict.status.code(), Some(1), "{}", stderr(&strict));
    assert!(
        stderr(&strict).contains("damaged.jsonl:14: not an exported event")
            && stderr(&strict).contains("nothing imported (--strict)"),
        "{}",
        stderr(&strict)
    );
    assert!(events_per_session(dir.path()).is_empty());

    // Without: every intact session whole, the damaged one up to the line before.
    let out = cli(dir.path(), &["import", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("damaged.jsonl:14: not an exported event"),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "session {session} goes on at seq {} in the file",
            seq + 1
        )),
        "{said}"
    );
    let mut want = expected();
    want.insert(session.clone(), seq - 1);
    assert_eq!(events_per_session(dir.path()), want);
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", stdout(&verify));

    // The repaired file completes that session, and skips what is there.
    let repaired = cli(dir.path(), &["import", "--strict", EXPORT]);
    assert!(repaired.status.success(), "{}", stderr(&repaired));
    assert!(
        stdout(&repaired).contains("skipped"),
        "{}",
        stdout(&repaired)
    );
    assert_eq!(events_per_session(dir.path()), expected());
}

/// Issue 46: a forged event dated 1970 appended to a session through `import` (its chain
/// consistent, its hash recomputed) is refused, said so, and nothing of it is written:
/// within a session time never goes back.
#[test]
fn an_imported_event_dated_before_the_one_it_follows_is_refused() {
    let dir = data_dir();
    let imported = cli(dir.path(), &["import", EXPORT]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    let export = std::fs::read_to_string(EXPORT).unwrap();
    let lines: Vec<&str> = export.lines().collect();
    // The first session's last event, continued by a forged one dated 1970.
    let first: Value = serde_json::from_str(lines[0]).unwrap();
    let last = lines
        .iter()
        .rev()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|event| event["session"] == first["session"])
        .unwrap();
    let mut forged = last.clone();
    // A fresh id: the last one's with its random part changed.
    let id = last["id"].as_str().unwrap();
    let flipped = if id.ends_with('Z') { 'Y' } else { 'Z' };
    forged["id"] = Value::from(format!("{}{flipped}", &id[..id.len() - 1]));
    forged["seq"] = Value::from(last["seq"].as_u64().unwrap() + 1);
    forged["prev"] = last["hash"].clone();
    forged["at"] = Value::from(0);
    let event: reasoning_ledger::testing::Event = serde_json::from_value(forged.clone()).unwrap();
    forged["hash"] = Value::from(event.computed_hash());
    let file = dir.path().join("forged.jsonl");
    std::fs::write(&file, format!("{forged}\n")).unwrap();
    let before = events_per_session(dir.path());
    for strict in [false, true] {
        let mut args = vec!["import", file.to_str().unwrap()];
        if strict {
            args.insert(1, "--strict");
        }
        let out = cli(dir.path(), &args);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("within a session time never goes back"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(events_per_session(dir.path()), before);
    let verify = cli(dir.path(), &["verify"]);
    assert!(
        verify.status.success() && !stdout(&verify).contains("note:"),
        "{}",
        stdout(&verify)
    );
}
