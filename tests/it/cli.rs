//! The command line: sessions, show, export (-o, --at; Mermaid compared with the
//! server's own export and the session's tree), replay, search, verify, import, demo,
//! usage errors and a broken pipe.

use crate::common::*;
use serde_json::{Value, json};

async fn one_session(dir: &std::path::Path) -> String {
    let client = spawn(dir).await;
    let first = structured(
        &call(
            &client,
            "sequentialthinking",
            thought(1, 2, true, "the needle is here"),
        )
        .await,
    );
    let session = first["sessionId"].as_str().unwrap().to_string();
    let mut second = thought(2, 2, false, "second thought");
    second["sessionId"] = json!(session);
    call(&client, "sequentialthinking", second).await;
    client.cancel().await.unwrap();
    session
}

#[tokio::test]
async fn sessions_show_search_and_replay_read_the_ledger() {
    let dir = data_dir();
    let session = one_session(dir.path()).await;
    let list = cli(dir.path(), &["sessions", "--json"]);
    assert!(list.status.success());
    let listed: serde_json::Value = serde_json::from_str(&stdout(&list)).unwrap();
    // The shape list_sessions answers.
    let rows = &listed["sessions"];
    assert_eq!(rows[0]["sessionId"], json!(session));
    assert_eq!(rows[0]["thoughts"], json!(2));
    let table = stdout(&cli(dir.path(), &["sessions"]));
    assert!(table.contains(&session));
    // The column says what it counts (branch ids: a plan's approaches too, which `show`'s
    // "branches" leave out).
    assert!(
        table.lines().next().unwrap().contains(" BRANCH IDS "),
        "{table}"
    );
    // `--kind` as `search` takes it: repeatable, comma-separated; an unknown kind refused.
    let count = |args: &[&str]| -> usize {
        let listed: serde_json::Value =
            serde_json::from_str(&stdout(&cli(dir.path(), args))).unwrap();
        listed["sessions"].as_array().unwrap().len()
    };
    assert_eq!(
        count(&["sessions", "--json", "--kind", "thinking,think"]),
        1
    );
    assert_eq!(
        count(&["sessions", "--json", "--kind", "qa", "--kind", "thinking"]),
        1
    );
    assert_eq!(count(&["sessions", "--json", "--kind", "qa,planning"]), 0);
    let unknown = cli(dir.path(), &["sessions", "--kind", "thinking,nope"]);
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("--kind \"nope\": unknown kind"),
        "{unknown:?}"
    );
    assert!(stdout(&cli(dir.path(), &["show", &session])).contains("second thought"));
    let found = stdout(&cli(dir.path(), &["search", "NEEDLE", "--json"]));
    assert!(
        found.contains(&session) && found.contains("\"seq\": 2"),
        "{found}"
    );
    // The shape search_history answers (without its note).
    let found: serde_json::Value = serde_json::from_str(&found).unwrap();
    assert_eq!(found["query"], json!("NEEDLE"));
    assert_eq!(found["matches"][0]["sessionId"], json!(session));
    let replay = stdout(&cli(dir.path(), &["replay", &session, "--at", "2"]));
    assert!(
        replay.contains("the needle is here") && !replay.contains("second thought"),
        "{replay}"
    );
    let out_of_range = cli(dir.path(), &["replay", &session, "--at", "9"]);
    assert_eq!(out_of_range.status.code(), Some(1));
    assert!(stderr(&out_of_range).contains("1..=3"));
}

#[tokio::test]
async fn export_to_a_file_refuses_to_overwrite_and_import_round_trips() {
    let dir = data_dir();
    let session = one_session(dir.path()).await;
    let file = dir.path().join("session.jsonl");
    let file_arg = file.to_str().unwrap();
    let export = cli(
        dir.path(),
        &["export", &session, "--format", "jsonl", "-o", file_arg],
    );
    assert!(export.status.success(), "{}", stderr(&export));
    let again = cli(
        dir.path(),
        &["export", &session, "--format", "jsonl", "-o", file_arg],
    );
    assert_eq!(again.status.code(), Some(1), "must not overwrite");
    let exported = std::fs::read_to_string(&file).unwrap();
    let first: serde_json::Value = serde_json::from_str(exported.lines().next().unwrap()).unwrap();
    for field in [
        "id", "session", "seq", "at", "schema", "payload", "prev", "hash",
    ] {
        assert!(first.get(field).is_some(), "jsonl line lacks {field}");
    }

    let other = data_dir();
    let import = cli(other.path(), &["import", file_arg]);
    assert!(import.status.success(), "{}", stderr(&import));
    assert!(stdout(&import).contains("imported 3 event(s)"));
    let reexported = stdout(&cli(
        other.path(),
        &["export", &session, "--format", "jsonl"],
    ));
    assert_eq!(
        as_imported(&reexported),
        exported,
        "import keeps events byte-identical"
    );
    assert!(cli(other.path(), &["verify"]).status.success());
    // Importing again is idempotent.
    let twice = cli(other.path(), &["import", file_arg]);
    assert!(twice.status.success(), "{}", stderr(&twice));
    assert!(stdout(&twice).contains("imported 0 event(s)"));
}

/// The MCP `export_session` text of `session` in `format`, optionally at `at`.
async fn mcp_export(client: &Client, session: &str, format: &str, at: Option<u64>) -> String {
    let mut arguments = json!({"sessionId": session, "format": format});
    if let Some(at) = at {
        arguments["atSeq"] = json!(at);
    }
    let result = call(client, "export_session", arguments).await;
    assert!(!is_error(&result), "{format}: {}", text(&result));
    text(&result)
}

/// What a Mermaid diagram holds: thought node ids (`t<seq>`), edge lines, subgraphs.
fn mermaid_parts(diagram: &str) -> (Vec<u64>, usize, usize) {
    let mut nodes = Vec::new();
    let (mut edges, mut subgraphs) = (0, 0);
    for line in diagram.lines().map(str::trim_start) {
        if line.starts_with("subgraph ") {
            subgraphs += 1;
        } else if line
            .split_whitespace()
            .nth(1)
            .is_some_and(|arrow| arrow.starts_with("-->") || arrow.starts_with("-.->"))
        {
            edges += 1;
        } else if let Some(rest) = line.strip_prefix('t')
            && let Some((id, _)) = rest.split_once('[')
            && let Ok(seq) = id.parse()
        {
            nodes.push(seq);
        }
    }
    (nodes, edges, subgraphs)
}

#[tokio::test]
async fn the_cli_mermaid_export_is_the_session_the_server_holds() {
    let dir = data_dir();
    let client = spawn_with_export(dir.path()).await;
    let first = structured(
        &call(
            &client,
            "sequentialthinking",
            thought(1, 4, true, "root idea"),
        )
        .await,
    );
    let session = first["sessionId"].as_str().unwrap().to_string();
    let mut steps = vec![
        thought(2, 4, true, "second step"),
        thought(2, 4, true, "second, revised"),
    ];
    steps[1]["isRevision"] = json!(true);
    steps[1]["revisesThought"] = json!(2);
    let mut branch = thought(3, 4, false, "another way");
    branch["branchFromThought"] = json!(1);
    branch["branchId"] = json!("alt");
    steps.push(branch);
    for mut step in steps {
        step["sessionId"] = json!(session);
        call(&client, "sequentialthinking", step).await;
    }
    let served = mcp_export(&client, &session, "mermaid", None).await;
    let served_at_3 = mcp_export(&client, &session, "mermaid", Some(3)).await;
    let tree: serde_json::Value =
        serde_json::from_str(&mcp_export(&client, &session, "json", None).await).unwrap();
    client.cancel().await.unwrap();

    // The command line prints and writes the very diagram the server exports.
    let printed = cli(dir.path(), &["export", &session, "--format", "mermaid"]);
    assert!(printed.status.success(), "{}", stderr(&printed));
    assert_eq!(stdout(&printed), served);
    let file = dir.path().join("session.mmd");
    let written = cli(
        dir.path(),
        &[
            "export",
            &session,
            "-f",
            "mermaid",
            "-o",
            file.to_str().unwrap(),
        ],
    );
    assert!(written.status.success(), "{}", stderr(&written));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), served);
    let at_3 = stdout(&cli(
        dir.path(),
        &["export", &session, "--format", "mermaid", "--at", "3"],
    ));
    assert_eq!(at_3, served_at_3);
    assert_ne!(at_3, served, "--at 3 shows the session as it stood then");

    // And that diagram is the session: one node per thought (with its text), one edge
    // line per edge of the tree, one subgraph per branch.
    let (nodes, edges, subgraphs) = mermaid_parts(&served);
    let seqs: Vec<u64> = tree["thoughts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(nodes, seqs, "{served}");
    assert_eq!(edges, tree["edges"].as_array().unwrap().len(), "{served}");
    assert_eq!(
        subgraphs,
        tree["branches"].as_array().unwrap().len(),
        "{served}"
    );
    for text in ["root idea", "second step", "second, revised", "another way"] {
        assert!(served.contains(text), "{text:?} missing:\n{served}");
    }
    assert_eq!(mermaid_parts(&at_3).0, [2, 3], "{at_3}");
    // Counted nouns agree with their counts.
    assert!(
        served.contains(": 4 thoughts, 4 edges, 1 branch, 0 anomalies\n"),
        "{served}"
    );
    assert!(at_3.contains(": 2 thoughts, 1 edge, 0 branches,"), "{at_3}");
    // Thought times are ISO 8601 like every other time in answers.
    let at = tree["thoughts"][0]["at"].as_str().expect("at is a string");
    assert!(
        at.len() == 24 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
        "{at}"
    );
}

#[test]
fn usage_errors_exit_2_and_unknown_sessions_exit_1() {
    let dir = data_dir();
    assert_eq!(cli(dir.path(), &["export"]).status.code(), Some(2));
    assert_eq!(
        cli(dir.path(), &["export", "x", "--format", "pdf"])
            .status
            .code(),
        Some(2)
    );
    // The benchmark harness is its own binary (`reasoning-ledger-bench`), not a command.
    assert_eq!(cli(dir.path(), &["bench"]).status.code(), Some(2));
    // An empty import creates the ledger (read-only commands never do).
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let created = cli(dir.path(), &["import", empty.to_str().unwrap()]);
    assert!(created.status.success(), "{}", stderr(&created));
    let missing = cli(dir.path(), &["show", "01ARZ3NDEKTSV4RRFFQ69G5FAV"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("no session"));
}

#[test]
fn demo_runs_a_session_through_the_real_server_and_its_follow_ups_run_as_printed() {
    let root = data_dir();
    // A data dir the shell would split, in a folder that does not exist yet.
    let dir = root.path().join("my ledger's dir");
    let demo = cli(&dir, &["demo"]);
    assert!(demo.status.success(), "{}", stderr(&demo));
    let out = stdout(&demo);
    assert!(
        out.contains("flowchart TD") && out.contains("late-load"),
        "{out}"
    );
    assert!(cli(&dir, &["verify"]).status.success());

    // Every suggested command runs as printed, from elsewhere, with no
    // REASONING_LEDGER_DIR and the binary not on PATH, on the ledger demo used.
    let follow_ups: Vec<&str> = out
        .split_once("\nTry:\n")
        .expect("follow-ups")
        .1
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    assert_eq!(follow_ups.len(), 4, "{out}");
    let session = out
        .split("\nSession ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("session id");
    for command in follow_ups {
        assert!(command.contains("--data-dir"), "{command}");
        let run = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(root.path())
            .env_remove("REASONING_LEDGER_DIR")
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        assert!(run.status.success(), "{command}: {}", stderr(&run));
        assert!(
            stdout(&run).contains(session),
            "{command}: {}",
            stdout(&run)
        );
    }
}

// ---- a missing or misnamed data directory ----

/// Every command that only reads, with arguments that would otherwise be valid.
const READ_ONLY: &[&[&str]] = &[
    &["sessions"],
    &["sessions", "--json"],
    &["show", "01ARZ3NDEKTSV4RRFFQ69G5FAV"],
    &["export", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--format", "json"],
    &["replay", "01ARZ3NDEKTSV4RRFFQ69G5FAV"],
    &["search", "anything"],
    &["verify"],
    &["verify", "--rebuild"],
];

#[test]
fn read_only_commands_never_create_a_ledger_and_say_there_is_none() {
    let root = data_dir();
    let default = root.path().join("the default");
    let typo = root.path().join("ledgr");
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for dir in [&typo, &empty] {
        for args in READ_ONLY {
            let output = std::process::Command::new(bin())
                .arg("--data-dir")
                .arg(dir)
                .args(*args)
                .env("REASONING_LEDGER_DIR", &default)
                .output()
                .unwrap();
            let message = stderr(&output);
            assert_eq!(output.status.code(), Some(1), "{args:?}: {message}");
            assert!(stdout(&output).is_empty(), "{args:?}: stdout is for data");
            let path = dir.join("ledger.redb");
            assert!(
                message.contains(&format!("no ledger at {}", path.display())),
                "{args:?}: {message}"
            );
            assert!(
                message.contains(&format!(
                    "the default ledger is {}",
                    default.join("ledger.redb").display()
                )),
                "{args:?}: {message}"
            );
            assert!(!path.exists(), "{args:?} created {}", path.display());
        }
    }
    assert!(!typo.exists(), "no directory is created either");
    assert!(!default.exists());
    // The default data directory itself, when it holds no ledger.
    let output = std::process::Command::new(bin())
        .arg("sessions")
        .env("REASONING_LEDGER_DIR", &default)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("this is the default data directory"),
        "{}",
        stderr(&output)
    );

    // import creates one; then the same commands answer from it.
    let file = root.path().join("nothing.jsonl");
    std::fs::write(&file, "").unwrap();
    let import = cli(&typo, &["import", file.to_str().unwrap()]);
    assert!(import.status.success(), "{}", stderr(&import));
    let sessions = cli(&typo, &["sessions"]);
    assert!(sessions.status.success(), "{}", stderr(&sessions));
    assert!(stdout(&sessions).starts_with("no sessions in "));
    assert!(cli(&typo, &["verify"]).status.success());
}

#[test]
fn a_data_dir_that_is_a_file_is_named_as_a_file() {
    let root = data_dir();
    let file = root.path().join("notes.txt");
    std::fs::write(&file, "my notes\n").unwrap();
    let nothing = root.path().join("nothing.jsonl");
    std::fs::write(&nothing, "").unwrap();
    for args in [
        &["sessions"][..],
        &["import", nothing.to_str().unwrap()],
        &["serve"],
    ] {
        let output = cli(&file, args);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {message}");
        assert!(
            message.contains(&format!(
                "the data directory {} is a file, not a directory",
                file.display()
            )),
            "{args:?}: {message}"
        );
        assert!(!message.contains("File exists"), "{args:?}: {message}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "my notes\n");
}

#[tokio::test]
async fn export_to_a_missing_folder_or_an_existing_file_says_which() {
    let dir = data_dir();
    let session = one_session(dir.path()).await;
    let missing = dir.path().join("no such folder").join("out.md");
    let output = cli(
        dir.path(),
        &[
            "export",
            &session,
            "-f",
            "markdown",
            "-o",
            missing.to_str().unwrap(),
        ],
    );
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(
        message.contains(&format!(
            "the folder {} does not exist",
            missing.parent().unwrap().display()
        )),
        "{message}"
    );
    assert!(!message.contains("must not exist yet"), "{message}");
    assert!(!missing.parent().unwrap().exists());

    let existing = dir.path().join("kept.md");
    std::fs::write(&existing, "mine\n").unwrap();
    let output = cli(
        dir.path(),
        &[
            "export",
            &session,
            "-f",
            "markdown",
            "-o",
            existing.to_str().unwrap(),
        ],
    );
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{message}");
    assert!(
        message.contains("already exists: export never overwrites"),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "mine\n");
}

#[test]
fn every_export_and_replay_option_has_help() {
    let dir = data_dir();
    let export = stdout(&cli(dir.path(), &["export", "--help"]));
    for needle in [
        "--format <FORMAT>",
        "mermaid (flowchart), markdown, json",
        "--at <SEQ>",
        "as it stood right after this event seq",
        "never overwrites",
    ] {
        assert!(export.contains(needle), "{needle:?} missing:\n{export}");
    }
    let replay = stdout(&cli(dir.path(), &["replay", "--help"]));
    assert!(
        replay.contains("--at <SEQ>") && replay.contains("up to and including this event seq"),
        "{replay}"
    );
    assert!(
        !dir.path().join("ledger.redb").exists(),
        "--help opens nothing"
    );
}

#[tokio::test]
async fn a_closed_pipe_ends_the_cli_quietly() {
    let dir = data_dir();
    let session = one_session(dir.path()).await;
    let mut child = std::process::Command::new(bin())
        .args([
            "--data-dir",
            dir.path().to_str().unwrap(),
            "export",
            &session,
            "--format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert!(output.status.code() == Some(0), "{}", stderr(&output));
    assert!(!stderr(&output).contains("panicked"));
}

#[tokio::test]
async fn the_data_dir_comes_from_the_environment_when_no_flag_is_given() {
    let dir = data_dir();
    let session = one_session(dir.path()).await;
    let output = std::process::Command::new(bin())
        .args(["sessions", "--json"])
        .env("REASONING_LEDGER_DIR", dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains(&session));
}

#[test]
fn a_foreign_file_at_the_ledger_path_is_an_error_naming_it_and_left_untouched() {
    let dir = data_dir();
    let path = dir.path().join("ledger.redb");
    let foreign = b"not a ledger, somebody's notes\n".repeat(100);
    std::fs::write(&path, &foreign).unwrap();
    let output = cli(dir.path(), &["sessions"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains(path.to_str().unwrap()) && message.contains("Not a redb database"),
        "{message}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        foreign,
        "the file must not be touched"
    );
}

#[tokio::test]
async fn import_refuses_a_file_that_disagrees_with_stored_events() {
    let dir = data_dir();
    let session = one_session(dir.path()).await;
    let exported = stdout(&cli(dir.path(), &["export", &session, "--format", "jsonl"]));
    let altered = exported.replacen("the needle is here", "the needle was moved", 1);
    let file = dir.path().join("altered.jsonl");
    std::fs::write(&file, altered).unwrap();
    let import = cli(dir.path(), &["import", file.to_str().unwrap()]);
    assert_eq!(import.status.code(), Some(1));
    assert!(
        stderr(&import).contains("differs from the one already in the ledger"),
        "{}",
        stderr(&import)
    );
    assert!(cli(dir.path(), &["verify"]).status.success());
}

/// Rewrites every head of the ledger in `dir` with its summary's version set to `version`,
/// as a build that folded summaries differently would have left them.
fn set_summary_versions(dir: &std::path::Path, version: u64) {
    let heads: redb::TableDefinition<u128, &[u8]> = redb::TableDefinition::new("heads");
    let mut builder = redb::Database::builder();
    builder.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
    let db = builder
        .open(dir.join("ledger.redb"))
        .expect("open the ledger");
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn.open_table(heads).unwrap();
        let rows: Vec<(u128, Vec<u8>)> = redb::ReadableTable::iter(&table)
            .unwrap()
            .map(|row| {
                let (key, value) = row.unwrap();
                (key.value(), value.value().to_vec())
            })
            .collect();
        for (key, bytes) in rows {
            let mut head: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            head["summary"]["version"] = json!(version);
            table
                .insert(key, serde_json::to_vec(&head).unwrap().as_slice())
                .unwrap();
        }
    }
    txn.commit().unwrap();
}

#[tokio::test]
async fn verify_reports_a_stale_summary_apart_from_damage_and_rebuild_fixes_it() {
    let dir = data_dir();
    let session = one_session(dir.path()).await;
    set_summary_versions(dir.path(), 0);
    let refused = cli(dir.path(), &["verify"]);
    assert!(!refused.status.success());
    let message = stderr(&refused);
    assert!(message.contains("stale, not damaged"), "{message}");
    assert!(message.contains("verify --rebuild"), "{message}");

    let rebuilt = cli(dir.path(), &["verify", "--rebuild"]);
    assert!(rebuilt.status.success(), "{}", stderr(&rebuilt));
    let text = stdout(&rebuilt);
    assert!(text.contains("rebuilt 1 session summary(ies)"), "{text}");
    assert!(text.contains(&session), "{text}");
    assert!(text.contains("ok: 1 session(s), 3 event(s)"), "{text}");

    let again = cli(dir.path(), &["verify"]);
    assert!(again.status.success(), "{}", stderr(&again));
    let text = stdout(&cli(dir.path(), &["verify", "--rebuild"]));
    assert!(text.contains("rebuilt 0 session summary(ies)"), "{text}");
}

// ---- toolsets, as README tells them ----

/// README's toolset table: (toolset, on by default, its tools as listed).
fn readme_toolsets() -> Vec<(String, bool, Vec<String>)> {
    let readme = include_str!("../../README.md");
    let table = readme
        .split_once("| toolset | on by default | tools |")
        .expect("README has the toolset table")
        .1;
    table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let tools = cells[3]
                .split(", ")
                .map(|tool| {
                    // "`sequentialthinking` (alias `sequential_thinking`)": the listed name.
                    tool.split('`')
                        .nth(1)
                        .expect("a tool in backticks")
                        .to_string()
                })
                .collect();
            (
                cells[1].trim_matches('`').to_string(),
                cells[2] == "yes",
                tools,
            )
        })
        .collect()
}

async fn listed_names(dir: &std::path::Path, toolsets: Option<&str>) -> Vec<String> {
    let client = match toolsets {
        Some(sets) => spawn_with(dir, &["--toolsets", sets], &[]).await,
        None => spawn(dir).await,
    };
    let tools = client.list_tools(None).await.expect("tools/list").tools;
    client.cancel().await.unwrap();
    tools.iter().map(|tool| tool.name.to_string()).collect()
}

#[tokio::test]
async fn the_readme_toolset_table_is_what_toolsets_list_and_all_is_every_toolset() {
    let dir = data_dir();
    let table = readme_toolsets();
    assert!(!table.is_empty());
    let mut every = Vec::new();
    let mut default = Vec::new();
    for (name, on_by_default, tools) in &table {
        assert_eq!(&listed_names(dir.path(), Some(name)).await, tools, "{name}");
        every.extend(tools.clone());
        if *on_by_default {
            default.extend(tools.clone());
        }
    }
    assert_eq!(listed_names(dir.path(), Some("all")).await, every);
    assert_eq!(listed_names(dir.path(), None).await, default);
    // serve --help names every toolset the table names.
    let help = stdout(&cli(dir.path(), &["serve", "--help"]));
    for (name, _, _) in &table {
        assert!(help.contains(name.as_str()), "{name} missing:\n{help}");
    }
    // An unknown toolset is refused naming the real ones (exit 1, nothing served).
    let refused = cli(dir.path(), &["serve", "--toolsets", "nonesuch"]);
    assert_eq!(refused.status.code(), Some(1));
    let names: Vec<&str> = table.iter().map(|(name, _, _)| name.as_str()).collect();
    assert!(
        stderr(&refused).contains(&names.join(", ")),
        "{}",
        stderr(&refused)
    );
}

/// Issue 35: a query the CLI cannot run is explained once, not once per error in its chain.
#[test]
fn a_query_error_is_said_once() {
    let dir = data_dir();
    let out = cli(
        dir.path(),
        &["import", "tests/fixtures/ledger-v2/ledger.jsonl"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    for (query, says) in [
        ("", "the query is empty"),
        ("-only -exclusions", "the query only excludes"),
        ("\"unclosed", "quote"),
    ] {
        let out = cli(dir.path(), &["search", "--", query]);
        assert_eq!(out.status.code(), Some(1), "{query:?}");
        let said = stderr(&out);
        assert!(said.contains(says), "{query:?}: {said}");
        assert_eq!(
            said.matches("-word to exclude").count(),
            1,
            "{query:?}: {said}"
        );
    }
}

/// Issue 35: a query that starts with `-word` works as written; `replay` marks a cut line
/// with `…`; `import` of a `json` export says it reads the JSONL export.
#[test]
fn a_leading_exclusion_a_cut_replay_line_and_a_json_import_say_what_they_do() {
    let dir = data_dir();
    let out = cli(
        dir.path(),
        &["import", "tests/fixtures/ledger-v2/ledger.jsonl"],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    let excluded = cli(dir.path(), &["search", "-zebra the"]);
    assert!(excluded.status.success(), "{}", stderr(&excluded));
    let plain = cli(dir.path(), &["search", "the"]);
    assert_eq!(stdout(&excluded), stdout(&plain), "nothing says zebra");

    let listed: serde_json::Value =
        serde_json::from_str(&stdout(&cli(dir.path(), &["sessions", "--json"]))).unwrap();
    let mut cut = 0;
    for session in listed["sessions"].as_array().unwrap() {
        let id = session["sessionId"].as_str().unwrap();
        let replayed = stdout(&cli(dir.path(), &["replay", id]));
        // After the header and a blank line: `{seq:>5}  {time}  {type:<16}  {text}`.
        for line in replayed.lines().skip(2).take_while(|l| !l.is_empty()) {
            let mut parts = line.trim_start().splitn(3, "  ");
            let (_seq, _time) = (parts.next(), parts.next());
            let rest = parts.next().unwrap_or("");
            let text = rest
                .split_once(' ')
                .map_or("", |(_type, text)| text.trim_start());
            assert!(text.chars().count() <= 100, "{line}");
            if text.chars().count() == 100 {
                assert!(text.ends_with('…'), "a cut line says so: {line}");
                cut += 1;
            }
        }
    }
    assert!(cut > 0, "the fixture has thoughts over 100 characters");

    let json = dir.path().join("one.json");
    let id = listed["sessions"][0]["sessionId"].as_str().unwrap();
    let exported = cli(
        dir.path(),
        &["export", id, "-f", "json", "-o", json.to_str().unwrap()],
    );
    assert!(exported.status.success(), "{}", stderr(&exported));
    let refused = cli(dir.path(), &["import", json.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("import reads the JSONL export"),
        "{}",
        stderr(&refused)
    );
}

/// `export --all` needs no `--format` (jsonl is the one it writes); one session's export
/// still asks for one (issue 48).
#[test]
fn export_all_defaults_to_jsonl_and_one_session_needs_a_format() {
    let dir = data_dir();
    let demo = cli(dir.path(), &["demo"]);
    assert!(demo.status.success(), "{}", stderr(&demo));
    let all = cli(dir.path(), &["export", "--all"]);
    assert!(all.status.success(), "{}", stderr(&all));
    let with_format = cli(dir.path(), &["export", "--all", "-f", "jsonl"]);
    assert_eq!(stdout(&all), stdout(&with_format));
    assert!(stdout(&all).lines().count() > 10);
    let listed: Value =
        serde_json::from_str(&stdout(&cli(dir.path(), &["sessions", "--json"]))).unwrap();
    let id = ledger_id(&listed["sessions"][0]);
    let one = cli(dir.path(), &["export", &id]);
    assert_eq!(one.status.code(), Some(2), "{}", stderr(&one));
    assert!(stderr(&one).contains("--format"), "{}", stderr(&one));
}

/// The bare command on a terminal says what it is and what to run, and makes no ledger
/// (issue 48); its input a pipe, it serves MCP as clients expect.
#[test]
fn the_bare_command_on_a_terminal_says_what_it_is_and_makes_nothing() {
    let dir = data_dir();
    let (_leader, follower) = pseudo_terminal();
    let out = std::process::Command::new(bin())
        .arg("--data-dir")
        .arg(dir.path())
        .stdin(follower)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("is an MCP server") && said.contains("reasoning-ledger demo"),
        "{said}"
    );
    assert!(stdout(&out).is_empty(), "stdout carries only MCP messages");
    assert!(
        !dir.path().join("ledger.redb").exists(),
        "a ledger was made"
    );
}

/// A PostgreSQL that cannot be reached is said once, not once per error wrapping it
/// (issue 48: the text came three times).
#[test]
fn an_unreachable_postgres_is_said_once() {
    let dir = data_dir();
    let out = cli(
        dir.path(),
        &[
            "--store",
            "postgresql://nobody@127.0.0.1:1/nothing",
            "sessions",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let said = stderr(&out);
    assert_eq!(said.matches("cannot reach PostgreSQL").count(), 1, "{said}");
    assert_eq!(said.matches("Connection refused").count(), 1, "{said}");
}
