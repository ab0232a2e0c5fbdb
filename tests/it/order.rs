//! Calls of one connection take effect in the order they arrived: pipelined writes reach
//! the ledger in arrival order, so the "continue the current session" rule sees the
//! session the previous call (in arrival order) left current.

use crate::bad_input::Raw;
use crate::common;
use serde_json::{Value, json};

/// Rounds of (new session, named old session, session-less follow-up) sent at once.
const PIPELINED_ROUNDS: u64 = 40;

fn thought_call(id: u64, number: u64, text: &str, session: Option<&str>) -> Vec<u8> {
    let mut arguments = json!({
        "thought": text, "thoughtNumber": number, "totalThoughts": number.max(2),
        "nextThoughtNeeded": true
    });
    if let Some(session) = session {
        arguments["sessionId"] = json!(session);
    }
    let mut line = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "sequentialthinking", "arguments": arguments}
    })
    .to_string()
    .into_bytes();
    line.push(b'\n');
    line
}

fn answer_of(answer: &Value) -> (String, u64) {
    let content = &answer["result"]["structuredContent"];
    assert!(content.is_object(), "{answer}");
    (
        content["sessionId"].as_str().unwrap().to_string(),
        content["eventSeq"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn pipelined_writes_of_one_connection_take_effect_in_arrival_order() {
    let dir = common::data_dir();
    let mut raw = Raw::spawn(dir.path()).await;
    raw.initialize().await;
    let first = thought_call(2, 1, "the old session", None);
    raw.send(first.strip_suffix(b"\n").unwrap()).await;
    let (old, _) = answer_of(&raw.answer(2).await);

    // Everything in one write: the server reads the lines faster than it runs the calls.
    let mut batch = Vec::new();
    for round in 0..PIPELINED_ROUNDS {
        let id = 10 + round * 3;
        batch.extend(thought_call(id, 1, &format!("new {round}"), None));
        batch.extend(thought_call(
            id + 1,
            round + 2,
            &format!("named {round}"),
            Some(&old),
        ));
        batch.extend(thought_call(
            id + 2,
            round + 3,
            &format!("follow-up {round}"),
            None,
        ));
    }
    use tokio::io::AsyncWriteExt;
    raw.stdin.write_all(&batch).await.unwrap();
    raw.stdin.flush().await.unwrap();

    // Answers come in any order: collect them all first.
    let last_id = 10 + PIPELINED_ROUNDS * 3 - 1;
    let mut answers = std::collections::HashMap::new();
    while let Some(id) = (10..=last_id).find(|id| !answers.contains_key(id)) {
        raw.answer(id).await;
        for line in &raw.lines {
            if let Ok(value) = serde_json::from_slice::<Value>(line)
                && let Some(id) = value["id"].as_u64()
            {
                answers.insert(id, value);
            }
        }
    }
    let mut last_old_seq = 1;
    for round in 0..PIPELINED_ROUNDS {
        let id = 10 + round * 3;
        let (fresh, fresh_seq) = answer_of(&answers[&id]);
        let (named, named_seq) = answer_of(&answers[&(id + 1)]);
        let (follow, follow_seq) = answer_of(&answers[&(id + 2)]);
        assert_ne!(fresh, old, "round {round}: thought 1 starts a new session");
        assert_eq!(fresh_seq, 2, "round {round}");
        assert_eq!(named, old, "round {round}");
        assert_eq!(
            follow, old,
            "round {round}: the follow-up continues the session the call before it named"
        );
        assert!(
            last_old_seq < named_seq && named_seq < follow_seq,
            "round {round}: seqs {last_old_seq}, {named_seq}, {follow_seq} out of arrival order"
        );
        last_old_seq = follow_seq;
    }
    assert_eq!(last_old_seq, 2 + 2 * PIPELINED_ROUNDS);
}
