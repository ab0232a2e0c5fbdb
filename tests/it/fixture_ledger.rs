//! A ledger written by the build before issue 19's redesign (one family threaded through
//! the core), checked in under `tests/fixtures/ledger-v2/` with everything that build
//! printed for it: `verify`, `sessions --json`, every session in every export format, and
//! the whole ledger as JSONL. The test copies the ledger to a temp dir and asks the
//! *current* binary for the same, byte for byte: a change of format or encoding shows here.
//!
//! The fixture is fixed data: never regenerate it to make this test pass. A deliberate
//! format change makes a *new* fixture beside it (and keeps testing the old one), as
//! issue 35's pictures did: `ledger-v3` is compared byte for byte, `ledger-v2` byte for
//! byte but for its pictures (SVG, HTML), which must render and draw every id they drew:
//!
//! ```text
//! REASONING_LEDGER_NEW_FIXTURE=tests/fixtures/ledger-v3 \
//!     cargo test --test it fixture_ledger::generate -- --ignored --exact
//! ```
//!
//! The generator writes one session of every family through the real server (thinking
//! with a branch and a revision, think, qa, planning init → finalize plus
//! evaluate/close/merge on a thinking branch, agent through the loopback model of `llm`,
//! booster's heuristic solve with no model), then the files above, and refuses a
//! directory that exists.

use crate::common::spawn_agent;
use crate::common::{self, call, cli, is_error, spawn_with, stderr, structured, text};
use crate::llm::{LlmServer, Reply};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The checked-in fixture of the build before issue 19.
const FIXTURE_DIR: &str = "tests/fixtures/ledger-v2";
/// The checked-in fixture of the build of issue 35 (its pictures drawn anew).
const PICTURES_FIXTURE_DIR: &str = "tests/fixtures/ledger-v3";
/// The fixture of issue 42's build: booster steps numbered against their plan.
const STEP_COUNT_FIXTURE_DIR: &str = "tests/fixtures/ledger-v4";
/// Where `generate` writes a new fixture (a directory that must not exist yet).
const NEW_FIXTURE_ENV: &str = "REASONING_LEDGER_NEW_FIXTURE";
/// Every session export format, with the file extension it is kept under.
const FORMATS: [(&str, &str); 6] = [
    ("markdown", "md"),
    ("mermaid", "mmd"),
    ("json", "json"),
    ("jsonl", "jsonl"),
    ("svg", "svg"),
    ("html", "html"),
];
/// The families the generator writes, as `sessions --json` names their kind: the
/// fixture must hold each.
const KINDS: [&str; 6] = ["thinking", "think", "qa", "planning", "agent", "booster"];

fn run_ok(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = cli(dir, args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    out.stdout
}

fn session_ids(dir: &Path) -> Vec<(String, String)> {
    let listed: Value =
        serde_json::from_slice(&run_ok(dir, &["sessions", "--json", "--limit", "1000"])).unwrap();
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                // Listed by its alias since issue 42 (a plan's `dp-` id), its ledger id beside.
                crate::common::ledger_id(s),
                s["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// What `verify` prints, with the data directory (a temp dir) written `<data-dir>`, less
/// its search-index line: the index (issue 20) came after this build, is derived data
/// (never a failure of `verify`) and is checked by `recall::`.
fn verify(dir: &Path) -> Vec<u8> {
    String::from_utf8(run_ok(dir, &["verify"]))
        .unwrap()
        .replace(dir.to_str().unwrap(), "<data-dir>")
        .lines()
        .filter(|line| !line.starts_with("search index: "))
        .flat_map(|line| [line, "\n"])
        .collect::<String>()
        .into_bytes()
}

/// Everything the build prints for the ledger in `dir`, as (file name, bytes).
fn outputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = vec![
        ("verify.txt".to_string(), verify(dir)),
        (
            "sessions.json".to_string(),
            run_ok(dir, &["sessions", "--json", "--limit", "1000"]),
        ),
    ];
    let mut sessions = session_ids(dir);
    sessions.sort();
    let mut whole = Vec::new();
    for (id, _) in &sessions {
        for (format, ext) in FORMATS {
            let bytes = run_ok(dir, &["export", id, "--format", format]);
            if format == "jsonl" {
                whole.extend_from_slice(&bytes);
            }
            files.push((format!("{id}.{ext}"), bytes));
        }
    }
    // The whole ledger as JSONL: every session's events, sessions in id order (what
    // `import` takes back).
    files.push(("ledger.jsonl".to_string(), whole));
    files
}

#[tokio::test]
async fn a_ledger_of_the_build_before_issue_19_verifies_and_exports_byte_identically() {
    check_fixture(FIXTURE_DIR, Listing::ByLedgerId);
}

/// The fixture made after issue 35's picture changes (arrowheads, wrapped text, counts):
/// everything byte for byte but the pictures, drawn since with their counts in the
/// singular where there is one (issue 48's "1 step · 1 risk").
#[tokio::test]
async fn a_ledger_of_the_build_of_issue_35_verifies_and_exports_byte_identically() {
    check_fixture(PICTURES_FIXTURE_DIR, Listing::ByLedgerId);
}

/// The fixture made after issue 42 (a booster session records what its steps are
/// numbered against): everything byte for byte but the pictures, as issue 35's.
#[tokio::test]
async fn a_ledger_of_the_build_of_issue_42_verifies_and_exports_byte_identically() {
    check_fixture(STEP_COUNT_FIXTURE_DIR, Listing::Bytes);
}

/// How a fixture's `sessions.json` is compared.
#[derive(Clone, Copy, PartialEq)]
enum Listing {
    /// Byte for byte, as every other file.
    Bytes,
    /// Printed before issue 42 listed a session by the id its tools give (a plan's `dp-`
    /// id, an agent session's name; its ledger id beside, as `ledgerId`): compared as
    /// JSON with that undone, so everything else still counts.
    ByLedgerId,
}

/// `sessions --json` as a build before issue 42 printed it: every row by its ledger id.
fn listed_by_ledger_id(listing: &[u8]) -> Value {
    let mut listed: Value = serde_json::from_slice(listing).unwrap();
    for row in listed["sessions"].as_array_mut().unwrap() {
        let row = row.as_object_mut().unwrap();
        if let Some(ledger_id) = row.remove("ledgerId") {
            row.insert("sessionId".into(), ledger_id);
        }
    }
    listed
}

/// The `id="…"` and `data-seq="…"` attributes of a picture, each as written.
fn picture_ids(picture: &str) -> std::collections::BTreeSet<String> {
    let mut ids = std::collections::BTreeSet::new();
    for attribute in [" id=\"", " data-seq=\""] {
        for (at, _) in picture.match_indices(attribute) {
            let rest = &picture[at + 1..];
            let end = rest[attribute.len() - 1..].find('"').unwrap() + attribute.len();
            ids.insert(rest[..end].to_string());
        }
    }
    ids
}

/// Checks that this build verifies, lists and exports the fixture's ledger as its build
/// did. Pictures are renderings, not a data format: drawn since (issues 35 and 48) with
/// other geometry and text, they are checked to render and to hold every element id and
/// event seq the fixture's picture held. A rendering changed on purpose shows byte for
/// byte in the picture snapshots (`snapshots/export_svg_*.snap`); the data exports (JSON,
/// JSONL, Markdown, Mermaid), the listing and `verify` stay byte-identical.
fn check_fixture(fixture: &str, listing: Listing) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture);
    let dir = common::data_dir();
    std::fs::copy(root.join("ledger.redb"), dir.path().join("ledger.redb")).unwrap();
    let kinds: Vec<String> = session_ids(dir.path())
        .into_iter()
        .map(|(_, k)| k)
        .collect();
    for kind in KINDS {
        assert!(
            kinds.iter().any(|k| k == kind),
            "no {kind} session in {kinds:?}"
        );
    }
    let produced = outputs(dir.path());
    let mut expected: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name != "ledger.redb" && name != "README.md")
        .collect();
    expected.sort();
    let mut names: Vec<String> = produced.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    assert_eq!(
        names, expected,
        "the files this build prints differ from the fixture's"
    );
    let mut pictures_checked = 0;
    for (name, bytes) in &produced {
        let want = std::fs::read(root.join(name)).unwrap();
        let is_picture = name.ends_with(".svg") || name.ends_with(".html");
        if name == "sessions.json" && listing == Listing::ByLedgerId {
            let then: Value = serde_json::from_slice(&want).unwrap();
            assert_eq!(listed_by_ledger_id(bytes), then, "{name}");
            continue;
        }
        if is_picture {
            // Rendered (outputs() checked the exit status); every id still drawn.
            let (now, then) = (
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(&want),
            );
            let (now_ids, then_ids) = (picture_ids(&now), picture_ids(&then));
            assert!(then_ids.len() > 3, "{name}: {then_ids:?}");
            let missing: Vec<&String> = then_ids.difference(&now_ids).collect();
            assert!(missing.is_empty(), "{name} no longer draws {missing:?}");
            pictures_checked += 1;
            continue;
        }
        assert!(
            *bytes == want,
            "{name} differs from {fixture}/{name}:\n--- now ---\n{}\n--- then ---\n{}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&want)
        );
    }
    assert_eq!(pictures_checked, 2 * KINDS.len());
    // The ledger was only read: it verifies the same afterwards.
    assert_eq!(verify(dir.path()), produced[0].1);
}

/// Writes a new fixture into `$REASONING_LEDGER_NEW_FIXTURE` (see the module doc).
#[tokio::test]
#[ignore = "writes a new fixture: run by hand with REASONING_LEDGER_NEW_FIXTURE set"]
async fn generate() {
    let target = PathBuf::from(std::env::var(NEW_FIXTURE_ENV).unwrap_or_else(|_| {
        panic!("set {NEW_FIXTURE_ENV} to the new fixture's directory (it must not exist)")
    }));
    let target = if target.is_relative() {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(target)
    } else {
        target
    };
    assert!(
        !target.exists(),
        "{} exists: a fixture is never regenerated, make a new one",
        target.display()
    );
    let dir = common::data_dir();
    write_every_family(dir.path()).await;
    let verified = String::from_utf8(verify(dir.path())).unwrap();
    assert!(verified.starts_with("ok: 6 session(s)"), "{verified}");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::copy(dir.path().join("ledger.redb"), target.join("ledger.redb")).unwrap();
    for (name, bytes) in outputs(dir.path()) {
        std::fs::write(target.join(name), bytes).unwrap();
    }
    eprintln!("wrote {}", target.display());
}

/// Asserts a tool call succeeded and returns its structured answer (or its text as JSON).
fn ok(result: &rmcp::model::CallToolResult) -> Value {
    assert!(!is_error(result), "{}", text(result));
    result
        .structured_content
        .clone()
        .unwrap_or_else(|| serde_json::from_str(&text(result)).unwrap_or(Value::Null))
}

/// One session of every family, through the real server.
async fn write_every_family(dir: &Path) {
    let client = spawn_with(
        dir,
        &["--toolsets", "thinking,ledger,planning,qa,booster"],
        &[],
    )
    .await;

    // thinking: a main line, a branch from thought 1, a revision of thought 2, and the
    // branch evaluated, closed and merged.
    let first = structured(
        &call(
            &client,
            "sequentialthinking",
            common::thought(1, 4, true, "The build is slow: where does the time go?"),
        )
        .await,
    );
    let session = first["sessionId"].as_str().unwrap().to_string();
    let mut args = common::thought(2, 4, true, "Linking takes most of it.");
    args["sessionId"] = json!(session);
    ok(&call(&client, "sequentialthinking", args).await);
    let branch = json!({"sessionId": session, "thought": "Or the proc macros?", "thoughtNumber": 2, "totalThoughts": 4, "nextThoughtNeeded": true, "branchFromThought": 1, "branchId": "macros"});
    ok(&call(&client, "sequentialthinking", branch).await);
    let revision = json!({"sessionId": session, "thought": "Linking and codegen, measured with -Ztimings.", "thoughtNumber": 3, "totalThoughts": 4, "nextThoughtNeeded": true, "isRevision": true, "revisesThought": 2});
    ok(&call(&client, "sequentialthinking", revision).await);
    ok(&call(&client, "evaluate_branch", json!({"sessionId": session, "branchId": "macros", "feasibility": 6, "completeness": 5, "coherence": 7, "risk": 3, "rationale": "one crate only", "recommendation": "refine"})).await);
    ok(&call(
        &client,
        "close_branch",
        json!({"sessionId": session, "branchId": "macros", "conclusion": "macros cost 8 %"}),
    )
    .await);
    ok(&call(
        &client,
        "merge_branch",
        json!({"sessionId": session, "branchId": "macros", "strategy": "append"}),
    )
    .await);
    let mut last = common::thought(4, 4, false, "Use a faster linker; keep the macros.");
    last["sessionId"] = json!(session);
    ok(&call(&client, "sequentialthinking", last).await);

    // think: a thread of two thoughts.
    let think = ok(&call(&client, "think", json!({"thread_purpose": "Plan the release", "thought": "Tag after CI passes.", "thought_index": 1, "tool_recommendation": "git", "left_to_be_done": "changelog, tag"})).await);
    ok(&call(&client, "think", json!({"thread_purpose": "Plan the release", "thought": "Write the changelog first.", "thought_index": 2, "left_to_be_done": "tag", "session_id": think["sessionId"]})).await);

    // qa: two verification steps, the second a revision.
    let qa = ok(&call(&client, "sequentialthinking_qa", json!({"thought": "Verify the login form rejects an empty password", "thought_number": 1, "total_thoughts": 2, "next_thought_needed": true, "verification_target": "login form"})).await);
    ok(&call(&client, "sequentialthinking_qa", json!({"thought": "Check the error message is shown", "thought_number": 2, "total_thoughts": 2, "next_thought_needed": false, "session_id": qa["session_id"]})).await);

    // planning: init → clarify → explore ×2 → evaluate ×2 → finalize.
    let init = ok(&call(&client, "deep_planning", json!({"phase": "init", "problem": "Pick a cache for the API", "context": "p99 is 800 ms", "constraints": ["no new servers"]})).await);
    let plan = init["sessionId"].clone();
    for args in [
        json!({"phase": "clarify", "question": "Which endpoints are slow?", "answer": "Search"}),
        json!({"phase": "explore", "branchId": "redis", "name": "Redis cache", "description": "A shared cache", "pros": ["fast"], "cons": ["one more service"]}),
        json!({"phase": "explore", "branchId": "memo", "name": "In-process memo", "pros": ["simple"]}),
        json!({"phase": "evaluate", "branchId": "redis", "feasibility": 8, "completeness": 7, "coherence": 9, "risk": 3, "rationale": "Covers search", "recommendation": "pursue"}),
        json!({"phase": "evaluate", "branchId": "memo", "feasibility": 7, "completeness": 6, "coherence": 8, "risk": 4, "rationale": "Per instance only"}),
        json!({"phase": "finalize", "selectedBranch": "redis", "steps": [{"title": "Add the client", "description": "Wire redis-rs"}, {"title": "Cache search", "description": "TTL 60 s"}], "risks": [{"description": "Stale results", "mitigation": "Short TTL"}], "assumptions": ["Redis is allowed"], "successCriteria": ["p99 under 200 ms"]}),
    ] {
        let mut args = args;
        args["sessionId"] = plan.clone();
        ok(&call(&client, "deep_planning", args).await);
    }

    // booster: a heuristic solve (no provider configured).
    ok(&call(&client, "solve", json!({"task": "Find the counterfeit among 12 coins with a balance scale in 3 weighings.", "iterations": 3})).await);
    client.cancel().await.unwrap();

    // agent: chat_agent and two create_branch calls against the loopback model.
    let llm = LlmServer::start(vec![Reply::completion(
        "[Analysis]\nThe delete path never touches the cache.\n\n[Final Conclusion]\nThe cache is stale after a delete.\nConfidence: 0.62",
    )])
    .await;
    let agent = spawn_agent(
        dir,
        &[
            ("REASONING_LEDGER_LLM_BASE_URL", &llm.base_url),
            ("REASONING_LEDGER_LLM_MODEL", "loopback-model"),
        ],
        None,
    )
    .await;
    ok(&call(
        &agent,
        "chat_agent",
        json!({"input_text": "Summarise: caches go stale.", "session_id": "fixture"}),
    )
    .await);
    let node = ok(&call(
        &agent,
        "create_branch",
        json!({"session_id": "fixture", "input_text": "Does invalidation cover the delete path?"}),
    )
    .await);
    ok(&call(&agent, "create_branch", json!({"session_id": "fixture", "input_text": "Verify that deleting a row also evicts its cached search results.", "call_type": "verify", "parent_node_id": node["node_id"]})).await);
    agent.cancel().await.unwrap();
}
