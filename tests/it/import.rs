//! Issue 46's `import` that a person can use, over the real binary: a file holding the
//! same export twice imports once (the repeats skipped and counted); a damaged line costs
//! only its own session from there (every intact session imported, each line and session
//! left out named, exit 1); `--strict` imports all of a file or nothing; every import
//! records in each session where its events came from (the file, its sha256, who ran it,
//! the seqs), and `sessions`, `show`, the exports and `verify` say so.

use crate::common::{cli, data_dir, ledger_id, stderr, stdout};
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
        .map(|row| (ledger_id(row), row["events"].as_u64().unwrap()))
        .collect()
}

/// The fixture's events per session after one import: each with its record of the import.
fn expected() -> BTreeMap<String, u64> {
    let mut counts = in_file();
    counts.values_mut().for_each(|n| *n += 1);
    counts
}

/// The fixture's events per session, counted from the file.
fn in_file() -> BTreeMap<String, u64> {
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
    // The session left out part-way has no record of the import yet: it would stand
    // where its next event must go.
    let mut want = expected();
    want.insert(session.clone(), seq - 1);
    assert_eq!(events_per_session(dir.path()), want);
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", stdout(&verify));

    // The repaired file completes that session, and skips what is there; the session's
    // record covers all of its events, those of the first import included.
    let repaired = cli(dir.path(), &["import", "--strict", EXPORT]);
    assert!(repaired.status.success(), "{}", stderr(&repaired));
    assert!(
        stdout(&repaired).contains("skipped"),
        "{}",
        stdout(&repaired)
    );
    assert_eq!(events_per_session(dir.path()), expected());
    let records = records(dir.path(), &session);
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        (records[0]["fromSeq"].as_u64(), records[0]["toSeq"].as_u64()),
        (Some(1), Some(in_file()[&session]))
    );
}

/// The records of imports in a session (the JSON export's `imports`).
fn records(dir: &Path, session: &str) -> Vec<Value> {
    let out = cli(dir, &["export", session, "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let tree: Value = serde_json::from_str(&stdout(&out)).unwrap();
    tree["imports"].as_array().cloned().unwrap_or_default()
}

/// Issue 46: imported history says where it came from. Every session an import brings
/// events into records the file, its sha256, who ran it and the seqs, through the
/// ordinary hash-chained write; `sessions`, `show`, the exports and `verify` say which
/// events came from a file and that their times and actors are its claims; the record
/// travels with `export --all`; importing the same file again records nothing more.
#[test]
fn every_import_records_where_its_events_came_from_and_every_view_says_so() {
    use sha2::Digest;
    let dir = data_dir();
    let bytes = std::fs::read(EXPORT).unwrap();
    let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
    let out = cli(dir.path(), &["import", EXPORT]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&sha256), "{}", stdout(&out));
    assert_eq!(events_per_session(dir.path()), expected());

    let listed: Value = serde_json::from_str(&stdout(&cli(
        dir.path(),
        &["sessions", "--json", "--limit", "1000"],
    )))
    .unwrap();
    for row in listed["sessions"].as_array().unwrap() {
        assert_eq!(
            row["importedEvents"].as_u64(),
            Some(in_file()[&ledger_id(row)]),
            "{row}"
        );
    }
    let text = stdout(&cli(dir.path(), &["sessions"]));
    assert!(
        text.contains("* holds events imported from a file"),
        "{text}"
    );

    let session = in_file().keys().next().unwrap().clone();
    let records_of = records;
    let records = records_of(dir.path(), &session);
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(record["file"], EXPORT);
    assert_eq!(record["sha256"], sha256.as_str());
    assert!(!record["by"].as_str().unwrap().is_empty());
    assert_eq!(
        (record["fromSeq"].as_u64(), record["toSeq"].as_u64()),
        (Some(1), Some(in_file()[&session]))
    );
    assert_eq!(record["seq"].as_u64(), Some(in_file()[&session] + 1));

    let show = stdout(&cli(dir.path(), &["show", &session]));
    assert!(
        show.contains("## Imported")
            && show.contains(&sha256)
            && show.contains("the file's claims"),
        "{show}"
    );
    let html = stdout(&cli(dir.path(), &["export", &session, "--format", "html"]));
    assert!(
        html.contains("<div class=\"meta\">Imported: events 1–") && html.contains("s claims"),
        "the page's header says it"
    );
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", stdout(&verify));
    assert_eq!(
        stdout(&verify)
            .lines()
            .filter(|l| l.contains("came from 1 imported file(s)"))
            .count(),
        in_file().len(),
        "{}",
        stdout(&verify)
    );

    // Again: everything skipped, nothing recorded.
    let again = cli(dir.path(), &["import", EXPORT]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(events_per_session(dir.path()), expected());

    // The records travel with the whole-ledger export, and a second import adds its own.
    let all = dir.path().join("all.jsonl");
    let exported = cli(
        dir.path(),
        &[
            "export",
            "--all",
            "--format",
            "jsonl",
            "-o",
            all.to_str().unwrap(),
        ],
    );
    assert!(exported.status.success(), "{}", stderr(&exported));
    let other = data_dir();
    let out = cli(other.path(), &["import", all.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let records = records_of(other.path(), &session);
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["sha256"], sha256.as_str());
    assert_eq!(records[1]["toSeq"].as_u64(), Some(in_file()[&session] + 1));
    let verify = cli(other.path(), &["verify"]);
    assert!(
        verify.status.success() && stdout(&verify).contains("came from 2 imported file(s)"),
        "{}",
        stdout(&verify)
    );
}

/// Issue 46: a forged event dated 1970 appended to a session through `import` (its chain
/// consistent, its hash recomputed) is refused, said so, and nothing of it is written:
/// within a session time never goes back.
#[test]
fn an_imported_event_dated_before_the_one_it_follows_is_refused() {
    let dir = data_dir();
    let imported = cli(dir.path(), &["import", EXPORT]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    // The first session's last event in the ledger (the record of the import),
    // continued by a forged one dated 1970.
    let session = in_file().keys().next().unwrap().clone();
    let exported = cli(dir.path(), &["export", &session, "--format", "jsonl"]);
    assert!(exported.status.success(), "{}", stderr(&exported));
    let last: Value = serde_json::from_str(stdout(&exported).lines().last().unwrap()).unwrap();
    assert_eq!(last["payload"]["type"], "events_imported");
    let mut forged = last.clone();
    // A fresh id: the last one's with its random part changed.
    let id = last["id"].as_str().unwrap();
    let flipped = if id.ends_with('Z') { 'Y' } else { 'Z' };
    forged["id"] = Value::from(format!("{}{flipped}", &id[..id.len() - 1]));
    forged["seq"] = Value::from(last["seq"].as_u64().unwrap() + 1);
    forged["prev"] = last["hash"].clone();
    forged["at"] = Value::from(0);
    let event = reasoning_ledger::testing::Event::from_json(
        &serde_json::to_vec(&forged).unwrap(),
        &reasoning_ledger::testing::families(),
    )
    .unwrap();
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
    // Sound, and no event dated back: the only notes are of where the events came from.
    let verify = cli(dir.path(), &["verify"]);
    assert!(
        verify.status.success()
            && stdout(&verify)
                .lines()
                .filter(|l| l.starts_with("note:"))
                .all(|l| l.contains("imported file")),
        "{}",
        stdout(&verify)
    );
}

/// Issue 46, as an insider would try it: a session with edited text, times a year back
/// and a made-up actor, its chain recomputed, imports (a consistent chain is all a file
/// can prove), and then nothing presents it as recorded here: `verify` notes that its
/// events came from a file whose times and actors are claims, `sessions` marks it, `show`
/// names the file and who imported it.
#[test]
fn a_forged_session_imports_but_every_view_says_it_came_from_a_file() {
    const YEAR_MS: u64 = 365 * 24 * 3600 * 1000;
    let dir = data_dir();
    let export = std::fs::read_to_string(EXPORT).unwrap();
    let first: Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    let mut prev = None::<String>;
    let mut forged = String::new();
    for line in export.lines() {
        let mut event: Value = serde_json::from_str(line).unwrap();
        if event["session"] != first["session"] {
            continue;
        }
        event["at"] = Value::from(event["at"].as_u64().unwrap() - YEAR_MS);
        event["actor"] = Value::from("mallory");
        if let Some(text) = event["payload"].get("thought").and_then(Value::as_str) {
            event["payload"]["thought"] = Value::from(format!("{text} (edited)"));
        }
        if let Some(prev) = &prev {
            event["prev"] = Value::from(prev.as_str());
        }
        let sealed = reasoning_ledger::testing::Event::from_json(
            &serde_json::to_vec(&event).unwrap(),
            &reasoning_ledger::testing::families(),
        )
        .unwrap();
        event["hash"] = Value::from(sealed.computed_hash());
        prev = Some(event["hash"].as_str().unwrap().to_string());
        forged.push_str(&format!("{event}\n"));
    }
    assert!(forged.contains("(edited)"));
    let file = dir.path().join("forged.jsonl");
    std::fs::write(&file, &forged).unwrap();
    let out = cli(dir.path(), &["import", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("mallory"), "{}", stderr(&out));

    let session = first["session"].as_str().unwrap();
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    assert!(
        stdout(&verify).contains(&format!(
            "note: session {session}: {} event(s) came from 1 imported file(s)",
            forged.lines().count()
        )),
        "{}",
        stdout(&verify)
    );
    let listed = stdout(&cli(dir.path(), &["sessions"]));
    assert!(
        listed.contains("* holds events imported from a file")
            && listed.lines().any(|l| ["open*", "complete*", "closed*"]
                .iter()
                .any(|s| l.contains(s))),
        "{listed}"
    );
    assert!(
        listed
            .lines()
            .any(|l| l.contains('*') && l.contains("open*") || l.contains("complete*")),
        "{listed}"
    );
    let show = stdout(&cli(dir.path(), &["show", session]));
    assert!(
        show.contains("forged.jsonl") && show.contains("imported by"),
        "{show}"
    );
}
