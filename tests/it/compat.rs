//! A ledger written by a build before tool families (binary rows of format 1, the thinking
//! payloads in one closed enum) opens, verifies, exports exactly what that build exported,
//! and takes new events (format 2 rows) beside the old ones.

use crate::common::*;
use serde_json::json;

/// A ledger made by the previous build (`demo` plus a think thread), and the JSONL that
/// build exported for each of its sessions.
const FIXTURE_LEDGER: &str = "tests/fixtures/ledger-v1-rows.redb";
const FIXTURE_JSONL: &str = "tests/fixtures/ledger-v1-rows.jsonl";

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[tokio::test]
async fn a_ledger_from_before_families_verifies_exports_as_written_and_grows() {
    let dir = data_dir();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join(FIXTURE_LEDGER), dir.path().join("ledger.redb")).unwrap();
    let expected = std::fs::read_to_string(root.join(FIXTURE_JSONL)).unwrap();

    let verified = cli(dir.path(), &["verify"]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    assert!(
        stdout(&verified).contains("3 session(s), 10 event(s)"),
        "{}",
        stdout(&verified)
    );

    let listed: serde_json::Value =
        serde_json::from_str(&stdout(&cli(dir.path(), &["sessions", "--json"]))).unwrap();
    let sessions = listed["sessions"].as_array().unwrap();
    let ids: Vec<String> = sessions
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect();
    let mut exported = String::new();
    for id in &ids {
        let out = cli(dir.path(), &["export", id, "--format", "jsonl"]);
        assert!(out.status.success(), "{}", stderr(&out));
        exported.push_str(&stdout(&out));
    }
    assert_eq!(sorted_lines(&exported), sorted_lines(&expected));

    let thinking = sessions
        .iter()
        .find(|s| s["kind"] == "thinking")
        .expect("the demo session")["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let client = spawn(dir.path()).await;
    let mut next = thought(6, 6, false, "a thought written by this build");
    next["sessionId"] = json!(thinking);
    let answer = structured(&call(&client, "sequentialthinking", next).await);
    assert_eq!(answer["eventSeq"], 7, "{answer}");
    assert_eq!(answer["thoughtHistoryLength"], 6, "{answer}");
    drop(client);

    let verified = cli(dir.path(), &["verify"]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    let old_part = stdout(&cli(
        dir.path(),
        &["export", &thinking, "--format", "jsonl"],
    ));
    let expected_part: Vec<&str> = expected.lines().filter(|l| l.contains(&thinking)).collect();
    assert_eq!(old_part.lines().take(6).collect::<Vec<_>>(), expected_part);
}
