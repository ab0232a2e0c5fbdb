//! Issue 40 on a team's PostgreSQL ledger: one bad row is one bad session. The ledger of
//! every family is imported, then one SQL change damages one session ("B", the planning
//! session, in the middle of the id order) and every other session stays intact:
//! listing, `export --all`, `verify`, MCP `list_sessions`, `copy --to` and `recover --to`
//! name B and go on for the others.

use crate::common::{
    call, data_dir, is_error, ledger_id, spawn_with, stderr, stdout, structured, text,
};
use crate::pg::{Schema, cli};
use serde_json::{Value, json};
use std::process::Output;

/// The checked-in ledger of every family, as JSONL.
const FIXTURE_JSONL: &str = "tests/fixtures/ledger-v2/ledger.jsonl";
/// Events after the fixture is imported: its 37, and the record of the import in each of
/// its 6 sessions (the last event of each; position 43 is the last).
const IMPORTED_EVENTS: u64 = 43;
/// B's events after the import: its 8 and the record.
const B_EVENTS: u64 = 9;

use crate::damage_pg::{hex, sql};

/// A session id as its key in PostgreSQL, as a SQL literal.
pub(crate) fn key(session: &str) -> String {
    format!("'\\x{}'::bytea", hex(session))
}

/// One session as `sessions --json` lists it.
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    /// The ledger id.
    pub(crate) id: String,
    /// The id the lists show (a plan's `dp-` id, an agent session's name; else the ledger
    /// id).
    pub(crate) shown: String,
    pub(crate) kind: String,
    pub(crate) events: u64,
}

/// The fixture imported into a schema of its own, then damaged by `damage` (SQL in which
/// `{B}` is B's session key).
pub(crate) struct Ledger {
    pub(crate) schema: Schema,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) sessions: Vec<Listed>,
    /// The damaged session.
    pub(crate) b: Listed,
}

impl Ledger {
    pub(crate) fn damaged(damage: &str) -> Ledger {
        let schema = Schema::new();
        let dir = data_dir();
        let imported = cli(&schema.url, dir.path(), &["import", FIXTURE_JSONL]);
        assert!(imported.status.success(), "{}", stderr(&imported));
        let listed: Value = serde_json::from_str(&stdout(&cli(
            &schema.url,
            dir.path(),
            &["sessions", "--json"],
        )))
        .unwrap();
        let mut sessions: Vec<Listed> = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| Listed {
                id: ledger_id(s),
                shown: s["sessionId"].as_str().unwrap().to_string(),
                kind: s["kind"].as_str().unwrap().to_string(),
                events: s["events"].as_u64().unwrap(),
            })
            .collect();
        sessions.sort_by(|a, b| a.id.cmp(&b.id));
        let b = sessions
            .iter()
            .find(|s| s.kind == "planning")
            .unwrap()
            .clone();
        let position = sessions.iter().position(|s| s.id == b.id).unwrap();
        assert!(
            position > 0 && position + 1 < sessions.len(),
            "B has intact sessions on both sides"
        );
        sql(&schema.url, damage.replace("{B}", &key(&b.id)));
        Ledger {
            schema,
            dir,
            sessions,
            b,
        }
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        cli(&self.schema.url, self.dir.path(), args)
    }

    /// Every event of the fixture.
    pub(crate) fn total(&self) -> u64 {
        self.sessions.iter().map(|s| s.events).sum()
    }

    /// The intact sessions.
    pub(crate) fn others(&self) -> impl Iterator<Item = &Listed> {
        self.sessions.iter().filter(|s| s.id != self.b.id)
    }

    /// The events of the intact sessions.
    pub(crate) fn others_total(&self) -> u64 {
        self.total() - self.b.events
    }
}

/// What `sessions`, `sessions --json`, `export --all`, `verify` and MCP `list_sessions`
/// (with and without a text filter) say: each names B and goes on for the others.
async fn one_bad_session(ledger: &Ledger, export_lines: u64) {
    let b = &ledger.b.id;
    let listed = ledger.run(&["sessions"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text_list = stdout(&listed);
    for other in ledger.others() {
        assert!(text_list.contains(&other.shown), "{text_list}");
    }
    assert!(
        text_list
            .lines()
            .any(
                |l| (l.starts_with(ledger.b.shown.as_str()) || l.starts_with(b.as_str()))
                    && l.contains("damaged")
            ),
        "{text_list}"
    );

    let json_list: Value =
        serde_json::from_str(&stdout(&ledger.run(&["sessions", "--json"]))).unwrap();
    assert_eq!(
        json_list["sessions"].as_array().unwrap().len(),
        ledger.sessions.len() - 1,
        "{json_list}"
    );
    assert_eq!(
        json_list["damaged"][0]["sessionId"],
        json!(b),
        "{json_list}"
    );

    let export = ledger.run(&["export", "--all", "-f", "jsonl"]);
    assert_eq!(export.status.code(), Some(1), "{}", stderr(&export));
    assert!(stderr(&export).contains(b.as_str()), "{}", stderr(&export));
    let exported = stdout(&export);
    assert_eq!(exported.lines().count() as u64, export_lines, "{exported}");
    for other in ledger.others() {
        let lines = exported.lines().filter(|l| l.contains(&other.id)).count() as u64;
        assert_eq!(lines, other.events, "every event of {}", other.id);
    }

    let verify = ledger.run(&["verify"]);
    assert_eq!(verify.status.code(), Some(1), "{}", stderr(&verify));
    let report = stderr(&verify);
    assert!(report.contains(b.as_str()), "{report}");
    assert!(
        report.contains(&format!(
            "intact: {} session(s), {} event(s) verified",
            ledger.sessions.len() - 1,
            ledger.others_total()
        )),
        "{report}"
    );

    let client = spawn_with(ledger.dir.path(), &["--store", &ledger.schema.url], &[]).await;
    for arguments in [json!({}), json!({"query": "no such words anywhere"})] {
        let answer = call(&client, "list_sessions", arguments.clone()).await;
        assert!(!is_error(&answer), "{arguments}: {}", text(&answer));
        let answer = structured(&answer);
        let damaged: Vec<&str> = answer["damaged"]
            .as_array()
            .unwrap_or_else(|| panic!("{arguments}: B is named: {answer}"))
            .iter()
            .map(|d| d["sessionId"].as_str().unwrap())
            .collect();
        assert_eq!(damaged, [b.as_str()], "{arguments}: {answer}");
    }
    let all = structured(&call(&client, "list_sessions", json!({})).await);
    assert_eq!(
        all["sessions"].as_array().unwrap().len(),
        ledger.sessions.len() - 1,
        "{all}"
    );
    client.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_row_that_does_not_decode_is_one_bad_session() {
    let ledger = Ledger::damaged("UPDATE ledger_heads SET head = 'garbage' WHERE session = {B}");
    // B's events verify: the export keeps them and names B (its head cannot tell whether
    // it held more).
    one_bad_session(&ledger, ledger.total()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_head_row_is_one_bad_session_never_a_silent_loss() {
    let ledger = Ledger::damaged("DELETE FROM ledger_heads WHERE session = {B}");
    one_bad_session(&ledger, ledger.total()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_event_row_fails_no_listing_and_no_text_filter() {
    let ledger = Ledger::damaged(
        "UPDATE ledger_events SET row = substring(row from 1 for 9) \
         WHERE session = {B} AND seq = 3",
    );
    let b = &ledger.b.id;
    let client = spawn_with(ledger.dir.path(), &["--store", &ledger.schema.url], &[]).await;
    let plain = structured(&call(&client, "list_sessions", json!({})).await);
    assert_eq!(
        plain["sessions"].as_array().unwrap().len(),
        ledger.sessions.len(),
        "B's head is sound: it is listed: {plain}"
    );
    let filtered = call(
        &client,
        "list_sessions",
        json!({"query": "no such words anywhere"}),
    )
    .await;
    assert!(!is_error(&filtered), "{}", text(&filtered));
    let filtered = structured(&filtered);
    assert_eq!(filtered["sessions"], json!([]), "{filtered}");
    assert_eq!(
        filtered["damaged"][0]["sessionId"],
        json!(b),
        "the session the filter could not read is named: {filtered}"
    );
    client.cancel().await.ok();

    let export = ledger.run(&["export", "--all", "-f", "jsonl"]);
    assert_eq!(export.status.code(), Some(1), "{}", stderr(&export));
    assert_eq!(
        stdout(&export).lines().count() as u64,
        ledger.others_total() + 2,
        "B up to its damaged seq 3"
    );
}

#[test]
fn a_head_set_back_is_named_by_export_all() {
    // The head's seq alone set back, and seq and hash both (a head that matches seq 2).
    let ledger = Ledger::damaged("SELECT 1");
    let b = ledger.b.id.clone();
    let export_b = stdout(&ledger.run(&["export", &b, "-f", "jsonl"]));
    let second: Value = serde_json::from_str(export_b.lines().nth(1).unwrap()).unwrap();
    let seq = "regexp_replace(convert_from(head, 'UTF8'), '\"seq\":[0-9]+', '\"seq\":2')";
    for head in [
        seq.to_string(),
        format!(
            "regexp_replace({seq}, '\"hash\":\"[0-9a-f]+\"', '\"hash\":\"{}\"')",
            second["hash"].as_str().unwrap()
        ),
    ] {
        sql(
            &ledger.schema.url,
            format!(
                "UPDATE ledger_heads SET head = convert_to({head}, 'UTF8') WHERE session = {}",
                key(&b)
            ),
        );
        let export = ledger.run(&["export", "--all", "-f", "jsonl"]);
        assert_eq!(export.status.code(), Some(1), "{head}: {}", stderr(&export));
        let complaint = stderr(&export);
        assert!(complaint.contains(b.as_str()), "{complaint}");
        assert_eq!(
            stdout(&export).lines().count() as u64,
            ledger.others_total() + 2
        );
    }
    let verify = ledger.run(&["verify"]);
    assert_eq!(verify.status.code(), Some(1), "{}", stderr(&verify));
}

/// `verify`'s report of `ledger` (it must fail), checked to hold each of `says`.
fn verify_says(ledger: &Ledger, says: &[&str]) -> String {
    let verify = ledger.run(&["verify"]);
    assert_eq!(verify.status.code(), Some(1), "{}", stderr(&verify));
    let report = stderr(&verify);
    for said in says {
        assert!(report.contains(said), "verify says {said:?}: {report}");
    }
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_counter_set_back_is_damage_said_by_writes_and_by_verify() {
    let ledger = Ledger::damaged("UPDATE ledger_counter SET last_position = 3");
    let client = spawn_with(ledger.dir.path(), &["--store", &ledger.schema.url], &[]).await;
    let refused = call(
        &client,
        "sequentialthinking",
        crate::common::thought(1, 1, false, "a new session"),
    )
    .await;
    assert!(is_error(&refused), "{}", text(&refused));
    let said = text(&refused);
    assert!(
        said.contains("ledger_counter") && !said.contains("call again"),
        "damage, not a conflict to retry: {said}"
    );
    client.cancel().await.ok();
    verify_says(
        &ledger,
        &[
            &format!(
                "ledger_counter.last_position is 3 but events hold positions up to {IMPORTED_EVENTS}"
            ),
            &format!("UPDATE ledger_counter SET last_position = {IMPORTED_EVENTS}"),
        ],
    );
}

#[test]
fn an_id_column_that_names_another_event_is_found_by_verify() {
    let ledger = Ledger::damaged(
        "UPDATE ledger_events SET id = '\\x0000000000000000000000000000002a'::bytea \
         WHERE session = {B} AND seq = 4",
    );
    verify_says(
        &ledger,
        &[
            "the id column does not name the event its row holds",
            &format!("session {} seq 4", ledger.b.id),
            "copy --to",
        ],
    );
}

#[test]
fn positions_out_of_order_or_shared_are_found_by_verify() {
    let moved =
        Ledger::damaged("UPDATE ledger_events SET position = 1000 WHERE session = {B} AND seq = 4");
    verify_says(
        &moved,
        &[
            "positions out of seq order",
            &format!("session {} seq 5", moved.b.id),
            &format!(
                "ledger_counter.last_position is {IMPORTED_EVENTS} but events hold positions up to 1000"
            ),
        ],
    );
    let shared = Ledger::damaged(
        "ALTER TABLE ledger_events DROP CONSTRAINT ledger_events_position_key; \
         UPDATE ledger_events SET position = (SELECT min(position) FROM ledger_events) \
         WHERE session = {B} AND seq = 4",
    );
    verify_says(&shared, &["position(s) are held by more than one event"]);
}

#[test]
fn a_head_without_events_is_named_by_verify() {
    let ledger = Ledger::damaged("DELETE FROM ledger_events WHERE session = {B}");
    let report = verify_says(&ledger, &[ledger.b.id.as_str()]);
    assert!(
        report.contains(&format!(
            "intact: {} session(s), {} event(s) verified",
            ledger.sessions.len() - 1,
            ledger.others_total()
        )),
        "{report}"
    );
}

/// `recover --to DIR` of `ledger` into a new directory: its exit code, the report, and
/// what `sessions --json` lists in the new ledger (session → events).
fn recover_into_dir(
    ledger: &Ledger,
) -> (
    Option<i32>,
    String,
    std::collections::BTreeMap<String, u64>,
    tempfile::TempDir,
) {
    let new = data_dir();
    let to = new.path().join("salvaged");
    let recover = ledger.run(&["recover", "--to", to.to_str().unwrap()]);
    let report = std::fs::read_to_string(to.join("salvage-report.txt"))
        .unwrap_or_else(|e| panic!("{e}: {}", stderr(&recover)));
    assert_eq!(report, stdout(&recover));
    let listed = crate::common::cli(&to, &["sessions", "--json"]);
    let listed: Value = serde_json::from_str(&stdout(&listed)).unwrap();
    let sessions = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (ledger_id(s), s["events"].as_u64().unwrap()))
        .collect();
    let verify = crate::common::cli(&to, &["verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    (recover.status.code(), report, sessions, new)
}

#[test]
fn recover_salvages_a_postgresql_ledger_past_damage_inside_a_chain() {
    // B's seq 3 altered (it no longer verifies), or deleted: B is kept up to seq 2, its
    // later events beside the new ledger, every other session whole.
    for damage in [
        "UPDATE ledger_events SET row = overlay(row placing '\\xffffffffffffffff'::bytea \
         from 20) WHERE session = {B} AND seq = 3",
        "DELETE FROM ledger_events WHERE session = {B} AND seq = 3",
    ] {
        let ledger = Ledger::damaged(damage);
        let b = &ledger.b;
        let (code, report, sessions, new) = recover_into_dir(&ledger);
        assert_eq!(code, Some(1), "{damage}: {report}");
        for other in ledger.others() {
            assert_eq!(sessions.get(&other.id), Some(&other.events), "{report}");
        }
        assert_eq!(sessions.get(&b.id), Some(&2), "{report}");
        assert!(
            report.contains(&format!("cut: session {}", b.id))
                && report.contains("kept seqs 1..=2; first gap at seq 3")
                && report.contains(&format!("{} event(s) beyond it", b.events - 3)),
            "{damage}: {report}"
        );
        assert!(report.contains("table ledger_events"), "{report}");
        let beyond =
            std::fs::read_to_string(new.path().join("salvaged/salvage-beyond-gaps.jsonl")).unwrap();
        assert_eq!(beyond.lines().count() as u64, b.events - 3, "{beyond}");
    }
    // Rows renumbered (seqs 3 and 4 swapped), a row copied in as another seq, a head row
    // that does not decode: every event still verifies itself, and is kept in its place.
    let ledger = Ledger::damaged(
        "UPDATE ledger_events SET seq = 1000 WHERE session = {B} AND seq = 3; \
         UPDATE ledger_events SET seq = 3 WHERE session = {B} AND seq = 4; \
         UPDATE ledger_events SET seq = 4 WHERE session = {B} AND seq = 1000; \
         INSERT INTO ledger_events (session, seq, id, position, row) \
           SELECT session, 99, '\\x0000000000000000000000000000002a'::bytea, 1000, row \
           FROM ledger_events WHERE session = {B} AND seq = 2; \
         UPDATE ledger_heads SET head = 'garbage' WHERE session = {B}",
    );
    let (code, report, sessions, _new) = recover_into_dir(&ledger);
    assert_eq!(code, Some(0), "{report}");
    for listed in &ledger.sessions {
        assert_eq!(sessions.get(&listed.id), Some(&listed.events), "{report}");
    }
    assert!(
        report.contains("1 copy(ies) of events already found"),
        "{report}"
    );
}

#[test]
fn recover_writes_into_a_new_postgresql_schema_and_refuses_one_that_holds_a_ledger() {
    let ledger = Ledger::damaged(
        "UPDATE ledger_events SET row = substring(row from 1 for 9) \
         WHERE session = {B} AND seq = 3",
    );
    let refused = ledger.run(&["recover", "--to", &ledger.schema.url]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("that is the damaged ledger"),
        "{}",
        stderr(&refused)
    );
    let target = Schema::new();
    let recover = ledger.run(&["recover", "--to", &target.url]);
    assert_eq!(recover.status.code(), Some(1), "{}", stderr(&recover));
    let report = stdout(&recover);
    assert!(
        report.contains(&format!("cut: session {}", ledger.b.id)),
        "{report}"
    );
    // The report and the events beyond the cut are in the data directory.
    assert_eq!(
        std::fs::read_to_string(ledger.dir.path().join("salvage-report.txt")).unwrap(),
        report
    );
    assert!(ledger.dir.path().join("salvage-beyond-gaps.jsonl").exists());
    let verify = cli(&target.url, ledger.dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    assert!(
        stdout(&verify).contains(&format!(
            "ok: {} session(s), {} event(s)",
            ledger.sessions.len(),
            ledger.others_total() + 2
        )),
        "{}",
        stdout(&verify)
    );
    // Again: the new schema holds a ledger now.
    let again = ledger.run(&["recover", "--to", &target.url]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("already holds a ledger"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn verify_advises_what_applies_to_a_postgresql_ledger() {
    let damaged = Ledger::damaged("DELETE FROM ledger_events WHERE session = {B} AND seq = 3");
    let report = verify_says(
        &damaged,
        &["recover --to NEW_DIR|URL", "copy --to NEW_DIR|URL"],
    );
    assert!(!report.contains("ledger.wal"), "{report}");
    // Every session intact, the counter set back: set it right, no salvage.
    let structural = Ledger::damaged("UPDATE ledger_counter SET last_position = 3");
    let report = verify_says(&structural, &["every session verified"]);
    assert!(!report.contains("recover --to"), "{report}");
    let doctor = structural.run(&["doctor"]);
    let said = format!("{}{}", stdout(&doctor), stderr(&doctor));
    assert!(
        said.contains("how to set it right") && !said.contains("recover --to"),
        "{said}"
    );
}

/// `copy --to DIR` of `ledger` into a new directory: the command's output, and what the
/// copy's `sessions --json` lists (session → events), after its `verify` passed.
fn copy_into_dir(
    ledger: &Ledger,
    to: &std::path::Path,
) -> (Output, std::collections::BTreeMap<String, u64>) {
    let copy = ledger.run(&["copy", "--to", to.to_str().unwrap()]);
    let verify = crate::common::cli(to, &["verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    let listed: Value =
        serde_json::from_str(&stdout(&crate::common::cli(to, &["sessions", "--json"]))).unwrap();
    let sessions = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (ledger_id(s), s["events"].as_u64().unwrap()))
        .collect();
    (copy, sessions)
}

#[test]
fn copy_copies_every_intact_session_and_names_the_damaged_one() {
    // (damage of B, how many of B's events verify before it, whether B is named)
    let cases: [(&str, u64, bool); 6] = [
        (
            "UPDATE ledger_events SET row = substring(row from 1 for 9) \
             WHERE session = {B} AND seq = 3",
            2,
            true,
        ),
        (
            "UPDATE ledger_events SET row = substring(row from 1 for 9) \
             WHERE session = {B} AND seq = 1",
            0,
            true,
        ),
        (
            "DELETE FROM ledger_events WHERE session = {B} AND seq = 3",
            2,
            true,
        ),
        (
            "UPDATE ledger_heads SET head = 'garbage' WHERE session = {B}",
            B_EVENTS,
            true,
        ),
        // Positions out of seq order, or the counter set back: every event is intact and
        // the copy is whole (its columns rebuilt).
        (
            "UPDATE ledger_events SET position = 1000 WHERE session = {B} AND seq = 4",
            B_EVENTS,
            false,
        ),
        (
            "UPDATE ledger_counter SET last_position = 3",
            B_EVENTS,
            false,
        ),
    ];
    for (damage, kept, named) in cases {
        let ledger = Ledger::damaged(damage);
        let b = &ledger.b.id;
        let new = data_dir();
        let to = new.path().join("copy");
        let (copy, sessions) = copy_into_dir(&ledger, &to);
        let said = stderr(&copy);
        assert_eq!(
            copy.status.code(),
            Some(if named { 1 } else { 0 }),
            "{damage}: {said}"
        );
        for other in ledger.others() {
            assert_eq!(
                sessions.get(&other.id),
                Some(&other.events),
                "{damage}: {said}"
            );
        }
        assert_eq!(
            sessions.get(b).copied().unwrap_or(0),
            kept,
            "{damage}: {said}"
        );
        assert_eq!(said.contains(b.as_str()), named, "{damage}: {said}");
        assert!(!said.contains("moved"), "damage is said as damage: {said}");
        if named {
            // Resumed: nothing more to copy, B named again.
            let again = ledger.run(&["copy", "--to", to.to_str().unwrap()]);
            assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
            assert!(
                stdout(&again).starts_with("copied 0 event(s)"),
                "{}",
                stdout(&again)
            );
        }
    }
}

#[test]
fn copy_into_postgresql_goes_on_past_a_damaged_session() {
    let ledger = Ledger::damaged("DELETE FROM ledger_events WHERE session = {B} AND seq = 3");
    let target = Schema::new();
    let copy = ledger.run(&["copy", "--to", &target.url]);
    assert_eq!(copy.status.code(), Some(1), "{}", stderr(&copy));
    assert!(stderr(&copy).contains(ledger.b.id.as_str()));
    let verify = cli(&target.url, ledger.dir.path(), &["verify"]);
    assert!(
        stdout(&verify).contains(&format!(
            "ok: {} session(s), {} event(s)",
            ledger.sessions.len(),
            ledger.others_total() + 2
        )),
        "{}",
        stdout(&verify)
    );
}

#[test]
fn an_import_file_missing_a_sessions_first_events_says_so_not_moved() {
    let ledger = Ledger::damaged("SELECT 1");
    let b = &ledger.b.id;
    let all = stdout(&ledger.run(&["export", "--all", "-f", "jsonl"]));
    let file = ledger.dir.path().join("part.jsonl");
    let kept: Vec<&str> = all
        .lines()
        .filter(|line| {
            let event: Value = serde_json::from_str(line).unwrap();
            event["session"] != json!(b) || event["seq"].as_u64().unwrap() > 3
        })
        .collect();
    std::fs::write(&file, kept.join("\n") + "\n").unwrap();
    let target = Schema::new();
    let import = cli(
        &target.url,
        ledger.dir.path(),
        &["import", file.to_str().unwrap()],
    );
    assert_eq!(import.status.code(), Some(1), "{}", stderr(&import));
    let said = stderr(&import);
    assert!(
        said.contains("seq 1 is missing from the file") && !said.contains("moved"),
        "{said}"
    );
}
