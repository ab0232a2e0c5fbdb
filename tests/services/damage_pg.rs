//! Issue 32 on a team's PostgreSQL ledger: the ledger of every family imported, then the
//! middle of one event's row overwritten and another row cut short, as a disk or a hand
//! would. `verify` names both damaged sessions (exit 1); `export --all` exports every
//! other event and exits 1 naming both; searches still answer; a server that read the
//! damaged session refuses writes to it and goes on taking writes to the others.

use crate::common::{call, data_dir, is_error, spawn_with, stderr, stdout, text, thought};
use crate::pg::{Schema, cli};
use serde_json::{Value, json};

/// The checked-in ledger of every family, as JSONL.
const FIXTURE_JSONL: &str = "tests/fixtures/ledger-v2/ledger.jsonl";

/// Runs SQL on the schema of `url`, off the async runtime (the blocking client).
pub(crate) fn sql(url: &str, statement: String) {
    let url = url.to_string();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
        client.batch_execute(&statement).expect("damage the rows");
    })
    .join()
    .unwrap();
}

pub(crate) fn hex(session: &str) -> String {
    let id: ulid::Ulid = session.parse().unwrap();
    id.0.to_be_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_row_is_named_left_out_and_stops_writes_to_its_session_only() {
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
    let sessions: Vec<(String, String, u64)> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                crate::common::ledger_id(s),
                s["kind"].as_str().unwrap().to_string(),
                s["events"].as_u64().unwrap(),
            )
        })
        .collect();
    let thinking = sessions.iter().find(|s| s.1 == "thinking").unwrap().clone();
    let planning = sessions.iter().find(|s| s.1 == "planning").unwrap().clone();
    let intact = sessions.iter().find(|s| s.1 == "think").unwrap().clone();
    let total: u64 = sessions.iter().map(|s| s.2).sum();

    // The middle of thinking's seq 2 overwritten; planning's seq 3 cut short.
    sql(
        &schema.url,
        format!(
            "UPDATE ledger_events SET row = overlay(row placing '\\xffffffffffffffffffffffffffffffff'::bytea from 12) \
             WHERE session = '\\x{}'::bytea AND seq = 2;
             UPDATE ledger_events SET row = substring(row from 1 for 9) \
             WHERE session = '\\x{}'::bytea AND seq = 3;",
            hex(&thinking.0),
            hex(&planning.0)
        ),
    );

    let verify = cli(&schema.url, dir.path(), &["verify"]);
    assert_eq!(verify.status.code(), Some(1), "{}", stderr(&verify));
    let report = stderr(&verify);
    for damaged in [&thinking.0, &planning.0] {
        assert!(
            report.contains(damaged.as_str()),
            "verify names {damaged}: {report}"
        );
    }
    assert!(report.contains("recover --to"), "{report}");

    let export = cli(&schema.url, dir.path(), &["export", "--all", "-f", "jsonl"]);
    assert_eq!(export.status.code(), Some(1), "{}", stderr(&export));
    let complaint = stderr(&export);
    for damaged in [&thinking.0, &planning.0] {
        assert!(complaint.contains(damaged.as_str()), "{complaint}");
    }
    let exported = stdout(&export).lines().count() as u64;
    // Everything but the damaged events and those after them in their sessions.
    let left_out = (thinking.2 - 1) + (planning.2 - 2);
    assert_eq!(exported, total - left_out);

    let search = cli(&schema.url, dir.path(), &["search", "the"]);
    assert!(search.status.success(), "{}", stderr(&search));

    let client = spawn_with(dir.path(), &["--store", &schema.url], &[]).await;
    let history = call(&client, "get_history", json!({"sessionId": thinking.0})).await;
    assert!(is_error(&history), "{}", text(&history));
    assert!(text(&history).contains("damaged") || text(&history).contains("decoded"));
    let refused = call(
        &client,
        "sequentialthinking",
        json!({"thought": "more", "thoughtNumber": 9, "totalThoughts": 9,
               "nextThoughtNeeded": false, "sessionId": thinking.0}),
    )
    .await;
    assert!(
        is_error(&refused) && text(&refused).contains("damaged"),
        "a write to the damaged session: {}",
        text(&refused)
    );
    let other = call(
        &client,
        "think",
        json!({"thought": "still writing", "thread_purpose": "damage test",
               "thought_index": 9, "sessionId": intact.0}),
    )
    .await;
    assert!(!is_error(&other), "{}", text(&other));
    let fresh = call(
        &client,
        "sequentialthinking",
        thought(1, 1, false, "a new one"),
    )
    .await;
    assert!(!is_error(&fresh), "{}", text(&fresh));
    let found = call(&client, "search_history", json!({"query": "the"})).await;
    assert!(!is_error(&found), "{}", text(&found));
    client.cancel().await.ok();
}
