//! Issue 40 on a team's PostgreSQL ledger: the ledger of every family imported, then one
//! SQL change to the thinking session "B" (9 events) of six, as a disk, a restore or a hand
//! would make it. For every kind of damage: `verify` exits 1 naming B; a server started
//! afterwards refuses its first write into B (never "call again", never a seq that wraps)
//! and takes a new session's; `show B`, `export B` and `get_history` never hand out the
//! damage as sound (exit 1, an error result); `export --all` exits 1 naming B and exports
//! every other session whole.

use crate::common::{call, data_dir, is_error, spawn_with, stderr, stdout, text, thought};
use crate::damage_pg::{hex, sql};
use crate::pg::{Schema, cli};
use serde_json::json;

/// The checked-in ledger of every family, as JSONL.
const FIXTURE_JSONL: &str = "tests/fixtures/ledger-v2/ledger.jsonl";
/// The thinking session of the fixture: 9 events.
const B: &str = "01M8A0VY6G2SCG2C0FCZ64HXQV";
/// Another session of the fixture (the planning one, 8 events), the source of a foreign row.
const OTHER: &str = "01M8A0VYBT49JVTZPQ8B1V8WFX";
/// Events in the fixture.
const FIXTURE_EVENTS: usize = 37;
/// Its sessions: the import appends a record of itself to each.
const FIXTURE_SESSIONS: usize = 6;

/// One kind of damage: its name, and the SQL that makes it (`{b}`: B's key as hex,
/// `{o}`: the other session's). B holds seqs 1–10: the file's 9 events and the record of
/// their import.
const CASES: &[(&str, &str)] = &[
    (
        "a text byte flipped",
        "UPDATE ledger_events SET row = set_byte(row, position('\\x6275696c64'::bytea in row) - 1, 99) \
         WHERE session = '\\x{b}'::bytea AND seq = 2",
    ),
    (
        "a row that does not decode",
        "UPDATE ledger_events SET row = substring(row from 1 for 9) \
         WHERE session = '\\x{b}'::bytea AND seq = 5",
    ),
    (
        "the last event's hash altered",
        "UPDATE ledger_events SET row = overlay(row placing '\\x0000000000000000'::bytea from length(row) - 7) \
         WHERE session = '\\x{b}'::bytea AND seq = 10",
    ),
    (
        "a prev altered",
        "UPDATE ledger_events SET row = overlay(row placing '\\x0000000000000000'::bytea from length(row) - 64) \
         WHERE session = '\\x{b}'::bytea AND seq = 4",
    ),
    (
        "a row deleted",
        "DELETE FROM ledger_events WHERE session = '\\x{b}'::bytea AND seq = 4",
    ),
    (
        "the last row deleted",
        "DELETE FROM ledger_events WHERE session = '\\x{b}'::bytea AND seq = 10",
    ),
    (
        "a row duplicated after the head",
        "INSERT INTO ledger_events (session, seq, id, position, row) \
         SELECT session, 11, '\\x00000000000000000000000000000001'::bytea, 0, row \
         FROM ledger_events WHERE session = '\\x{b}'::bytea AND seq = 4",
    ),
    (
        "a row renumbered",
        "UPDATE ledger_events SET seq = 40 WHERE session = '\\x{b}'::bytea AND seq = 4",
    ),
    (
        "two rows swapped",
        "UPDATE ledger_events SET seq = -3 WHERE session = '\\x{b}'::bytea AND seq = 3; \
         UPDATE ledger_events SET seq = 3 WHERE session = '\\x{b}'::bytea AND seq = 4; \
         UPDATE ledger_events SET seq = 4 WHERE session = '\\x{b}'::bytea AND seq = -3",
    ),
    (
        "a foreign row copied in",
        "UPDATE ledger_events SET row = (SELECT row FROM ledger_events \
         WHERE session = '\\x{o}'::bytea AND seq = 4) \
         WHERE session = '\\x{b}'::bytea AND seq = 4",
    ),
    (
        "the head's hash altered",
        "UPDATE ledger_heads SET head = convert_to(regexp_replace(convert_from(head, 'UTF8'), \
         '\"hash\":\"[0-9a-f]+\"', '\"hash\":\"00000000000000000000000000000000\"'), 'UTF8') \
         WHERE session = '\\x{b}'::bytea",
    ),
    (
        "the head's seq set back",
        "UPDATE ledger_heads SET head = convert_to(regexp_replace(convert_from(head, 'UTF8'), \
         '\"seq\":10', '\"seq\":2'), 'UTF8') WHERE session = '\\x{b}'::bytea",
    ),
    (
        "the head's seq at the largest there is",
        "UPDATE ledger_heads SET head = convert_to(regexp_replace(convert_from(head, 'UTF8'), \
         '\"seq\":10', '\"seq\":18446744073709551615'), 'UTF8') WHERE session = '\\x{b}'::bytea",
    ),
];

/// B's events as `export --all` writes them from the intact ledger, and everything else.
fn lines_of_b(export: &str) -> (usize, usize) {
    let of_b = export.lines().filter(|l| l.contains(B)).count();
    (of_b, export.lines().count() - of_b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_damage_to_one_session_is_found_contained_and_never_served_as_sound() {
    let mut table = Vec::new();
    for (name, statement) in CASES {
        let schema = Schema::new();
        let dir = data_dir();
        let imported = cli(&schema.url, dir.path(), &["import", FIXTURE_JSONL]);
        assert!(imported.status.success(), "{}", stderr(&imported));
        sql(
            &schema.url,
            statement
                .replace("{b}", &hex(B))
                .replace("{o}", &hex(OTHER)),
        );

        let verify = cli(&schema.url, dir.path(), &["verify"]);
        assert_eq!(verify.status.code(), Some(1), "{name}: {}", stderr(&verify));
        assert!(stderr(&verify).contains(B), "{name}: {}", stderr(&verify));

        // A server started afterwards: B refuses its first write; a new session goes on.
        let client = spawn_with(dir.path(), &["--store", &schema.url], &[]).await;
        let into_b = call(
            &client,
            "sequentialthinking",
            json!({"thought": "more", "thoughtNumber": 10, "totalThoughts": 10,
                   "nextThoughtNeeded": false, "sessionId": B}),
        )
        .await;
        let refusal = text(&into_b);
        assert!(
            is_error(&into_b) && refusal.contains("damaged"),
            "{name}: a write into B after verify: {refusal}"
        );
        assert!(!refusal.contains("call again"), "{name}: {refusal}");
        let history = call(
            &client,
            "get_history",
            json!({"sessionId": B, "limit": 100}),
        )
        .await;
        assert!(
            is_error(&history),
            "{name}: get_history: {}",
            text(&history)
        );
        let elsewhere = call(
            &client,
            "sequentialthinking",
            thought(1, 1, false, "a new session beside the damage"),
        )
        .await;
        assert!(!is_error(&elsewhere), "{name}: {}", text(&elsewhere));
        client.cancel().await.ok();

        let show = cli(&schema.url, dir.path(), &["show", B]);
        let export = cli(&schema.url, dir.path(), &["export", B, "-f", "markdown"]);
        let all = cli(&schema.url, dir.path(), &["export", "--all", "-f", "jsonl"]);
        let (_, others) = lines_of_b(&stdout(&all));
        assert_eq!(show.status.code(), Some(1), "{name}: show B");
        assert!(
            stderr(&show).contains("damaged"),
            "{name}: {}",
            stderr(&show)
        );
        assert_eq!(export.status.code(), Some(1), "{name}: export B");
        assert_eq!(all.status.code(), Some(1), "{name}: export --all");
        assert!(stderr(&all).contains(B), "{name}: {}", stderr(&all));
        // Every other session whole, each with the record of its import (and the new one).
        assert_eq!(
            others,
            FIXTURE_EVENTS - 9 + (FIXTURE_SESSIONS - 1) + 2,
            "{name}: the other sessions' events"
        );
        table.push(format!(
            "{name:<40} verify {:?} · write into B refused · show {:?} · export {:?} · export --all {:?}",
            verify.status.code().unwrap(),
            show.status.code().unwrap(),
            export.status.code().unwrap(),
            all.status.code().unwrap(),
        ));
    }
    eprintln!("{}", table.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_set_back_is_damage_to_the_whole_ledger_not_a_conflict_to_retry() {
    let schema = Schema::new();
    let dir = data_dir();
    let imported = cli(&schema.url, dir.path(), &["import", FIXTURE_JSONL]);
    assert!(imported.status.success(), "{}", stderr(&imported));
    sql(
        &schema.url,
        "UPDATE ledger_counter SET last_position = 3".to_string(),
    );
    let client = spawn_with(dir.path(), &["--store", &schema.url], &[]).await;
    let refused = call(&client, "sequentialthinking", thought(1, 1, false, "new")).await;
    let message = text(&refused);
    assert!(is_error(&refused), "{message}");
    assert!(
        message.contains("damaged") && message.contains("ledger_counter"),
        "{message}"
    );
    assert!(!message.contains("call again"), "{message}");
    client.cancel().await.ok();
}
