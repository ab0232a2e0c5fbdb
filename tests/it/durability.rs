//! Durability: restart, several processes on one ledger, and `verify` catching
//! tampering. kill -9 mid-stream is
//! `faults_process::kill_9_randomized_two_servers_lose_no_acknowledged_event`.

use crate::common::*;
use redb::ReadableTable;
use serde_json::{Value, json};

#[tokio::test]
async fn session_continues_after_restart_with_its_branches_and_counts() {
    let dir = data_dir();
    let session = {
        let client = spawn(dir.path()).await;
        let first =
            structured(&call(&client, "sequentialthinking", thought(1, 3, true, "root")).await);
        let mut branch = thought(2, 3, true, "alternative");
        branch["branchFromThought"] = json!(1);
        branch["branchId"] = json!("alt");
        call(&client, "sequentialthinking", branch).await;
        client.cancel().await.unwrap();
        first["sessionId"].as_str().unwrap().to_string()
    };
    let client = spawn(dir.path()).await;
    let mut next = thought(3, 3, false, "after the restart");
    next["sessionId"] = json!(session);
    let answer = structured(&call(&client, "sequentialthinking", next).await);
    assert_eq!(answer["sessionId"], json!(session));
    assert_eq!(answer["thoughtHistoryLength"], json!(3));
    assert_eq!(answer["branches"], json!(["alt"]));
    assert_eq!(answer["eventSeq"], json!(4));
    client.cancel().await.unwrap();
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
}

fn jsonl_events(dir: &std::path::Path, session: &str) -> Vec<Value> {
    let output = cli(dir, &["export", session, "--format", "jsonl"]);
    assert!(
        output.status.success(),
        "export failed: {}",
        stderr(&output)
    );
    stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("jsonl line"))
        .collect()
}

#[tokio::test]
async fn two_servers_and_a_cli_export_share_one_ledger() {
    let dir = data_dir();
    let a = spawn(dir.path()).await;
    let b = spawn(dir.path()).await;
    let first = structured(&call(&a, "sequentialthinking", thought(1, 40, true, "a-1")).await);
    let session = first["sessionId"].as_str().unwrap().to_string();
    let rounds = 15;
    let mut exports_seen = 0;
    for round in 0..rounds {
        let mut from_a = thought(2 + round * 2, 40, true, &format!("a-{round}"));
        from_a["sessionId"] = json!(session);
        let mut from_b = thought(3 + round * 2, 40, true, &format!("b-{round}"));
        from_b["sessionId"] = json!(session);
        let (ra, rb) = tokio::join!(
            call(&a, "sequentialthinking", from_a),
            call(&b, "sequentialthinking", from_b)
        );
        let (ra, rb) = (structured(&ra), structured(&rb));
        assert_ne!(
            ra["eventSeq"], rb["eventSeq"],
            "two writers took the same seq"
        );
        if round % 5 == 0 {
            // The CLI reads while both servers hold the file open.
            exports_seen = jsonl_events(dir.path(), &session).len();
        }
    }
    assert!(exports_seen > 0);
    // Each process sees the other's thoughts in its counts.
    let mut last = thought(40, 40, false, "done");
    last["sessionId"] = json!(session);
    let answer = structured(&call(&b, "sequentialthinking", last).await);
    assert_eq!(answer["thoughtHistoryLength"], json!(2 + rounds * 2));
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    let events = jsonl_events(dir.path(), &session);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "gapless"
    );
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
}

/// The events table as the store defines it, opened directly to tamper with the file.
const EVENTS: redb::TableDefinition<(u128, u64), &[u8]> = redb::TableDefinition::new("events");

async fn ledger_with_one_session(dir: &std::path::Path) -> String {
    let client = spawn(dir).await;
    let first =
        structured(&call(&client, "sequentialthinking", thought(1, 3, true, "alpha")).await);
    let session = first["sessionId"].as_str().unwrap().to_string();
    for n in 2..=3 {
        let mut args = thought(n, 3, n < 3, &format!("thought {n}"));
        args["sessionId"] = json!(session);
        call(&client, "sequentialthinking", args).await;
    }
    client.cancel().await.unwrap();
    session
}

fn tamper(dir: &std::path::Path, edit: impl FnOnce(&mut redb::Table<(u128, u64), &[u8]>, u128)) {
    let db = redb::Database::builder()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(dir.join("ledger.redb"))
        .unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn.open_table(EVENTS).unwrap();
        let key = table.first().unwrap().unwrap().0.value().0;
        edit(&mut table, key);
    }
    txn.commit().unwrap();
}

#[tokio::test]
async fn verify_catches_a_flipped_byte_in_an_event() {
    let dir = data_dir();
    let session = ledger_with_one_session(dir.path()).await;
    assert!(cli(dir.path(), &["verify"]).status.success());
    tamper(dir.path(), |table, key| {
        let mut bytes = table.get((key, 3)).unwrap().unwrap().value().to_vec();
        // Rows are binary: look for the text's bytes, not a lossy string's char offsets.
        let at = bytes
            .windows(b"thought 2".len())
            .position(|window| window == b"thought 2")
            .expect("text in event 3");
        bytes[at] ^= 0x01; // 't' becomes 'u'
        table.insert((key, 3), bytes.as_slice()).unwrap();
    });
    let output = cli(dir.path(), &["verify"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains(&session) && message.contains("seq 3") && message.contains("altered"),
        "{message}"
    );
}

#[tokio::test]
async fn verify_catches_a_removed_event() {
    let dir = data_dir();
    let session = ledger_with_one_session(dir.path()).await;
    tamper(dir.path(), |table, key| {
        table.remove((key, 2)).unwrap();
    });
    let output = cli(dir.path(), &["verify", &session]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("events are missing: seq 2 was due, the next stored is seq 3"),
        "{message}"
    );
}

/// SIGTERM and SIGINT end a stdio server as a closed stdin does: the calls it read are
/// answered, the ledger is checkpointed (its redo log left with nothing to replay), and
/// it exits 0. Before, it died by the signal and the next start replayed the log.
#[tokio::test]
async fn sigterm_and_sigint_end_a_stdio_server_cleanly_with_nothing_left_to_replay() {
    use crate::bad_input::Raw;
    use std::process::Stdio;
    use tokio::io::AsyncReadExt;
    for signal in ["TERM", "INT"] {
        let dir = data_dir();
        let mut raw = Raw::spawn_with(
            dir.path(),
            &[("RUST_LOG", "reasoning_ledger=info")],
            Stdio::piped(),
        )
        .await;
        raw.initialize().await;
        // Sent at once; the last answer read means every one was.
        let calls = 10..50u64;
        for id in calls.clone() {
            raw.send_json(json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "sequentialthinking", "arguments": thought(1, 1, false, "before the signal")}
            }))
            .await;
        }
        let last = raw.answer(calls.end - 1).await;
        assert_eq!(last["result"]["isError"], json!(false), "{last}");
        let pid = raw.child.id().unwrap().to_string();
        let sent = std::process::Command::new("kill")
            .args([format!("-{signal}"), pid])
            .status()
            .unwrap();
        assert!(sent.success());
        // stdin stays open: the signal alone ends the server.
        let status = tokio::time::timeout(std::time::Duration::from_secs(30), raw.child.wait())
            .await
            .unwrap_or_else(|_| panic!("SIG{signal}: the server did not exit"))
            .unwrap();
        let mut stderr = String::new();
        raw.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .await
            .unwrap();
        assert_eq!(status.code(), Some(0), "SIG{signal}: {status:?}\n{stderr}");
        assert!(
            stderr.contains(&format!("SIG{signal}: answering the calls already read")),
            "{stderr}"
        );
        // Every call was answered, in the answers read before and after the signal.
        let answered = raw
            .lines
            .iter()
            .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
            .filter(|answer| answer["result"]["structuredContent"]["sessionId"].is_string())
            .count();
        assert_eq!(answered as u64, calls.end - calls.start, "SIG{signal}");
        // The next start has nothing to replay (a killed server's log is replayed here).
        let mut next = Raw::spawn_with(
            dir.path(),
            &[("RUST_LOG", "reasoning_ledger=info")],
            Stdio::piped(),
        )
        .await;
        next.initialize().await;
        let mut stderr = next.child.stderr.take().unwrap();
        next.finish().await;
        let mut log = String::new();
        stderr.read_to_string(&mut log).await.unwrap();
        assert!(log.contains("serving MCP"), "{log}");
        assert!(!log.contains("replayed the redo log"), "SIG{signal}: {log}");
        let listed = cli(dir.path(), &["sessions", "--json"]);
        let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
        assert_eq!(listed["sessions"].as_array().unwrap().len(), 40);
    }
}
