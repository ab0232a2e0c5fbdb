//! Issue 32, trust under damage: the checked-in ledger of every family
//! (`tests/fixtures/ledger-v2`), damaged one page at a time (64 bytes flipped at the page's
//! start, and inside it) and cut short at several lengths. For every copy: every CLI read
//! command and `serve` end without a panic; an `export --all` that lacks or differs from
//! the original is flagged by `verify` (exit 1); a server that found damage accepts no
//! write. Deterministic: the same bytes are damaged on every run.

use crate::common::{bin, cli, stderr, thought};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;

/// The checked-in ledger of every family.
const FIXTURE: &str = "tests/fixtures/ledger-v2/ledger.redb";
/// redb's page size: the unit of damage.
const PAGE_BYTES: usize = 4096;
/// Bytes flipped per damaged copy (a bad sector's worth of a page).
const FLIPPED_BYTES: usize = 64;
/// Where inside a page the second damage of each page goes.
const INSIDE_OFFSET: usize = 2048;

/// One damaged copy: a name for messages and the file's bytes.
struct Damaged {
    name: String,
    bytes: Vec<u8>,
}

fn damaged_copies() -> Vec<Damaged> {
    let original = std::fs::read(FIXTURE).unwrap();
    let mut copies = Vec::new();
    for page in 0..original.len() / PAGE_BYTES {
        for (place, offset) in [("start", 0), ("inside", INSIDE_OFFSET)] {
            let mut bytes = original.clone();
            let at = page * PAGE_BYTES + offset;
            for byte in &mut bytes[at..at + FLIPPED_BYTES] {
                *byte ^= 0xFF;
            }
            copies.push(Damaged {
                name: format!("page {page} {place}"),
                bytes,
            });
        }
    }
    for len in [
        0,
        PAGE_BYTES,
        original.len() / 2,
        original.len() - PAGE_BYTES,
        original.len() - 1,
    ] {
        copies.push(Damaged {
            name: format!("cut to {len} bytes"),
            bytes: original[..len].to_vec(),
        });
    }
    copies
}

/// The command ended with an answer: exit 0 or 1, and no panic on stderr.
fn assert_answered(case: &str, args: &[&str], out: &Output) {
    let code = out.status.code();
    let err = stderr(out);
    assert!(
        matches!(code, Some(0) | Some(1)) && !err.contains("panicked"),
        "{case}: `{}` ended with {code:?}: {err}",
        args.join(" ")
    );
}

fn session_ids(export: &[u8]) -> Vec<String> {
    let mut ids: Vec<String> = String::from_utf8_lossy(export)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|event| event["session"].as_str().map(str::to_string))
        .collect();
    ids.dedup();
    ids
}

#[test]
fn a_damaged_page_never_panics_a_command_and_every_damaged_export_is_flagged_by_verify() {
    let original_dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIXTURE, original_dir.path().join("ledger.redb")).unwrap();
    let whole = cli(original_dir.path(), &["export", "--all", "-f", "jsonl"]);
    assert!(whole.status.success(), "{}", stderr(&whole));
    let sessions = session_ids(&whole.stdout);
    assert_eq!(
        sessions.len(),
        6,
        "the fixture holds a session of every family"
    );

    let mut unflagged = Vec::new();
    let mut damaged_exports = 0;
    let copies = damaged_copies();
    for copy in &copies {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ledger.redb"), &copy.bytes).unwrap();
        let run = |args: &[&str]| {
            let out = cli(dir.path(), args);
            assert_answered(&copy.name, args, &out);
            out
        };
        run(&["sessions"]);
        run(&["sessions", "--json"]);
        run(&["search", "the"]);
        for session in &sessions {
            run(&["show", session]);
            run(&["replay", session]);
            run(&["export", session, "-f", "json"]);
        }
        let export = run(&["export", "--all", "-f", "jsonl"]);
        let verify = run(&["verify"]);
        if export.stdout != whole.stdout || !export.status.success() {
            damaged_exports += 1;
            if verify.status.code() != Some(1) {
                unflagged.push(copy.name.clone());
            }
        }
        if export.stdout != whole.stdout && export.status.success() {
            // What export --all wrote must then at least be a prefix-faithful backup: every
            // line it wrote is a line of the original.
            let original: std::collections::HashSet<&[u8]> =
                whole.stdout.split(|b| *b == b'\n').collect();
            for line in export.stdout.split(|b| *b == b'\n') {
                assert!(
                    original.contains(line),
                    "{}: export --all wrote an event that is not the original's",
                    copy.name
                );
            }
        }
    }
    eprintln!(
        "{} damaged copies: {damaged_exports} exports lack or differ from the original, \
         {} of them not flagged by verify",
        copies.len(),
        unflagged.len()
    );
    assert!(
        unflagged.is_empty(),
        "export --all differed but verify passed: {unflagged:?}"
    );
    assert!(
        damaged_exports > copies.len() / 4,
        "the sweep damaged what matters ({damaged_exports} of {} exports differ)",
        copies.len()
    );
}

/// Starts `serve` on `dir`; `None` when it refuses to start (a damaged file it cannot
/// open: its error is on stderr, and it did not panic).
async fn try_serve(dir: &Path) -> Option<crate::common::Client> {
    let dir = dir.to_path_buf();
    let (transport, _) =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            // The default toolsets and export: the sweep reads through export_session too.
            cmd.arg("serve")
                .arg("--data-dir")
                .arg(&dir)
                .args(["--toolsets", crate::common::WITH_EXPORT]);
            cmd.env("DISABLE_THOUGHT_LOGGING", "true");
            cmd.env_remove("REASONING_LEDGER_TOOLSETS");
            cmd.env_remove("REASONING_LEDGER_STORE");
        }))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    ().serve(transport).await.ok()
}

async fn call(client: &crate::common::Client, tool: &str, arguments: Value) -> CallToolResult {
    client
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(crate::common::object(arguments)),
        )
        .await
        .expect("every call is answered, damaged ledger or not")
}

fn says_damaged(result: &CallToolResult) -> bool {
    result.is_error == Some(true) && crate::common::text(result).contains("damaged")
}

/// A read's answer that met damage: an error naming it, or an event that does not decode.
fn read_met_damage(result: &CallToolResult) -> bool {
    let text = crate::common::text(result);
    result.is_error == Some(true)
        && (text.contains("damaged") || text.contains("cannot be decoded"))
}

#[tokio::test]
async fn a_server_that_found_damage_accepts_no_write() {
    let original_dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIXTURE, original_dir.path().join("ledger.redb")).unwrap();
    let sessions =
        session_ids(&cli(original_dir.path(), &["export", "--all", "-f", "jsonl"]).stdout);
    let mut found = 0;
    let mut refused_to_start = 0;
    // Damaged copies whose damage no read of the server met (a head row that does not
    // decode, met by a listing, is recorded without failing it).
    let mut unseen = Vec::new();
    let copies = damaged_copies();
    let cases = copies.len();
    for copy in copies {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ledger.redb"), &copy.bytes).unwrap();
        let verify = cli(dir.path(), &["verify"]);
        assert_answered(&copy.name, &["verify"], &verify);
        let structure_damaged = stderr(&verify).contains("structure:");
        // The file as verify left it (verify writes nothing to a damaged ledger).
        let Some(client) = try_serve(dir.path()).await else {
            refused_to_start += 1;
            continue;
        };
        let mut damage_seen = false;
        damage_seen |= read_met_damage(&call(&client, "list_sessions", json!({})).await);
        for session in &sessions {
            for tool in ["get_history", "export_session"] {
                let args = json!({"sessionId": session, "format": "json"});
                damage_seen |= read_met_damage(&call(&client, tool, args).await);
            }
        }
        let new_session = call(
            &client,
            "sequentialthinking",
            thought(1, 1, false, "after damage"),
        )
        .await;
        let continued = call(
            &client,
            "sequentialthinking",
            json!({"thought": "more", "thoughtNumber": 2, "totalThoughts": 2,
                   "nextThoughtNeeded": false, "sessionId": sessions[0]}),
        )
        .await;
        if !(damage_seen || structure_damaged) && verify.status.code() == Some(1) {
            unseen.push(copy.name.clone());
        }
        if damage_seen || structure_damaged {
            found += 1;
            for (what, answer) in [
                ("a new session", &new_session),
                ("a continued one", &continued),
            ] {
                assert!(
                    says_damaged(answer),
                    "{}: the server found damage but accepted {what}: {}",
                    copy.name,
                    crate::common::text(answer)
                );
            }
        }
        client.cancel().await.ok();
    }
    eprintln!(
        "{cases} damaged copies: {refused_to_start} servers refused to start, {found} found \
         damage and refused every write; damage no read met: {unseen:?}"
    );
    assert!(found > 0, "some damage was found by a server");
    assert!(
        unseen.is_empty(),
        "verify found damage that a server reading every session did not: {unseen:?}"
    );
}

/// Issue 40: what `verify` finds lasts. For every damaged copy that `verify` flags (exit
/// 1), a server started afterwards refuses a new session's thought as its very first call
/// (before it reads anything), and says what to do; a `verify` after it still lists the
/// recorded verdict. Nothing of the refused call is recorded.
#[tokio::test]
async fn what_verify_found_a_server_started_afterwards_refuses_from_its_first_call() {
    let mut flagged = 0;
    let mut refused = 0;
    for copy in damaged_copies() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.redb");
        std::fs::write(&ledger, &copy.bytes).unwrap();
        let verify = cli(dir.path(), &["verify"]);
        assert_answered(&copy.name, &["verify"], &verify);
        if verify.status.code() != Some(1) {
            continue;
        }
        flagged += 1;
        let before = cli(dir.path(), &["export", "--all", "-f", "jsonl"]).stdout;
        let Some(client) = try_serve(dir.path()).await else {
            continue;
        };
        let first = call(
            &client,
            "sequentialthinking",
            thought(1, 1, false, "after verify found damage"),
        )
        .await;
        assert!(
            says_damaged(&first),
            "{}: verify exited 1, yet a server started afterwards took a write: {}",
            copy.name,
            crate::common::text(&first)
        );
        assert!(
            crate::common::text(&first).contains("recover --to"),
            "{}: says what to do: {}",
            copy.name,
            crate::common::text(&first)
        );
        client.cancel().await.ok();
        refused += 1;
        let after = cli(dir.path(), &["export", "--all", "-f", "jsonl"]).stdout;
        assert!(
            after == before,
            "{}: the refused server recorded something: {} lines before, {} after; first: {}",
            copy.name,
            before.split(|b| *b == b'\n').count(),
            after.split(|b| *b == b'\n').count(),
            crate::common::text(&first)
        );
        let again = cli(dir.path(), &["verify"]);
        assert_eq!(again.status.code(), Some(1), "{}", copy.name);
        assert!(
            stderr(&again).contains("recorded earlier"),
            "{}: verify lists the lasting verdict: {}",
            copy.name,
            stderr(&again)
        );
    }
    eprintln!(
        "{flagged} copies flagged by verify; {refused} servers started on them, every one refusing writes"
    );
    assert!(refused > 0, "some flagged copy could be served");
}

/// Issue 40: a verdict outlasts the damage only until a whole `verify` finds the ledger
/// sound (a restore from a backup): until then every server refuses writes and says
/// what to do; `verify` clears it, and the next server writes again.
#[tokio::test]
async fn a_restored_ledger_takes_writes_again_once_verify_finds_it_sound() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(FIXTURE, dir.path().join("ledger.redb")).unwrap();
    // What a server recorded before the file was restored from a backup.
    std::fs::write(
        dir.path().join("ledger.damage"),
        r#"{"verdicts":[{"detail":"table events: a page cannot be read","at":1795632789712}]}"#,
    )
    .unwrap();
    let client = try_serve(dir.path()).await.expect("serves");
    let refused = call(
        &client,
        "sequentialthinking",
        thought(1, 1, false, "before"),
    )
    .await;
    assert!(says_damaged(&refused), "{}", crate::common::text(&refused));
    client.cancel().await.ok();

    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", stderr(&verify));
    let report = String::from_utf8_lossy(&verify.stdout).to_string();
    assert!(report.contains("cleared 1 damage verdict"), "{report}");
    assert!(!dir.path().join("ledger.damage").exists());

    let client = try_serve(dir.path()).await.expect("serves");
    let taken = call(&client, "sequentialthinking", thought(1, 1, false, "after")).await;
    assert_ne!(
        taken.is_error,
        Some(true),
        "{}",
        crate::common::text(&taken)
    );
    client.cancel().await.ok();
}
