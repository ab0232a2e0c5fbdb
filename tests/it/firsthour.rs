//! The first hour of a new user (issue 24): `demo` tours every family and writes their
//! pictures (the agent with a model, else one line on how to see it), `deep_planning`
//! takes risks as plain strings, `doctor` finds each misconfiguration and says how to fix
//! it, `completions` and `man`, progress bars only on a terminal, `export --all` round
//! trips through `import`, and an interrupted `copy` or `import` resumes.

use crate::common::*;
use crate::llm::{LlmServer, Reply, closed_port_url};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};

/// Environment a provider could leak in from the machine running the tests.
const PROVIDER_ENV: &[&str] = &[
    "REASONING_LEDGER_LLM_BASE_URL",
    "REASONING_LEDGER_LLM_MODEL",
    "REASONING_LEDGER_LLM_API_KEY",
    "DEEPSEEK_API_KEY",
    "SILICONFLOW_API_KEY",
    "CEREBRAS_API_KEY",
    "OPENAI_API_KEY",
    "REASONING_LEDGER_TOKEN",
    "REASONING_LEDGER_FAULT",
    "REASONING_LEDGER_EMBEDDINGS_BASE_URL",
    "REASONING_LEDGER_EMBEDDINGS_MODEL",
    "REASONING_LEDGER_EMBEDDINGS_API_KEY",
];

/// The CLI on `dir` with no provider from the environment, plus `env`.
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(bin());
    command
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("REASONING_LEDGER_DIR")
        .env_remove("REASONING_LEDGER_STORE");
    for name in PROVIDER_ENV {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run the cli")
}

fn ok(output: &Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what}: {}\n{}",
        stderr(output),
        stdout(output)
    );
    stdout(output)
}

/// The kinds of the ledger's sessions, sorted.
fn kinds(dir: &Path) -> Vec<String> {
    let listed: Value = serde_json::from_str(&ok(
        &run(dir, &["sessions", "--json"], &[]),
        "sessions --json",
    ))
    .unwrap();
    let mut kinds: Vec<String> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap().to_string())
        .collect();
    kinds.sort();
    kinds
}

/// The picture paths `demo` printed (the indented lines under "Pictures").
fn pictures(out: &str) -> Vec<String> {
    out.split_once("Pictures of these sessions")
        .expect("a pictures section")
        .1
        .lines()
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .map(|line| line.trim().to_string())
        .collect()
}

#[test]
fn demo_tours_every_family_without_a_model_and_says_where_the_pictures_are() {
    let root = data_dir();
    let dir = root.path().join("ledger");
    let started = std::time::Instant::now();
    let out = ok(&run(&dir, &["demo"], &[]), "demo");
    eprintln!("demo without a model took {:?}", started.elapsed());
    for heading in [
        "## thinking:",
        "## think:",
        "## planning:",
        "## qa:",
        "## booster:",
        "## agent:",
    ] {
        assert!(out.contains(heading), "{heading} missing:\n{out}");
    }
    // The thinking session keeps its branch and revision; the plan its evaluation and the
    // risk sent as a plain string; the QA run its workflow; the booster its steps.
    for shown in [
        "late-load",
        "revises 2",
        "**Score:** 8.55/10",
        "| a load that never finishes |  |",
        "**Workflow:** test",
        "# Booster session:",
    ] {
        assert!(out.contains(shown), "{shown} missing:\n{out}");
    }
    // No model: the agent is one line on how to see it.
    let agent = out.split_once("## agent:").unwrap().1;
    assert!(
        agent.contains("Not run: needs a model") && agent.contains("tools/local-model/run serve"),
        "{agent}"
    );
    assert_eq!(
        kinds(&dir),
        ["booster", "planning", "qa", "think", "thinking"]
    );
    assert!(
        ok(&run(&dir, &["verify"], &[]), "verify").starts_with("ok: 5 session(s), 31 event(s)")
    );

    // Two pictures per session, each a new file where it was said to be.
    let files = pictures(&out);
    assert_eq!(files.len(), 10, "{out}");
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        if file.ends_with(".svg") {
            roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        } else {
            assert!(file.ends_with(".html"), "{file}");
            assert!(text.starts_with("<!DOCTYPE html>"), "{file}");
        }
    }
    let ui = out
        .split_once("in the web view:\n")
        .expect("the ui line")
        .1
        .lines()
        .next()
        .unwrap();
    assert!(
        ui.trim().ends_with(" ui") && ui.contains("--data-dir"),
        "{ui}"
    );

    // A second run shows the first run's sessions again: nothing recorded twice, the same
    // pictures written again, no new files.
    let again = ok(&run(&dir, &["demo"], &[]), "demo again");
    assert_eq!(pictures(&again), files, "{again}");
    assert!(again.contains("not recorded twice"), "{again}");
    assert!(
        ok(&run(&dir, &["verify"], &[]), "verify").starts_with("ok: 5 session(s), 31 event(s)")
    );
    let folder = std::fs::read_dir(dir.join("demo")).unwrap().count();
    assert_eq!(folder, 11, "ten pictures and the tour's record");
    // Its record removed, the tour is recorded anew and the old pictures go.
    std::fs::remove_file(dir.join("demo").join("tour.json")).unwrap();
    let anew = ok(&run(&dir, &["demo"], &[]), "demo anew");
    assert!(pictures(&anew).iter().all(|file| !files.contains(file)));
    assert!(
        ok(&run(&dir, &["verify"], &[]), "verify").starts_with("ok: 10 session(s), 62 event(s)")
    );
}

/// On a terminal, `demo` says what it does, one line per family, the pages to open, and
/// what to try, without the sessions' Markdown; and its progress is a line per call, not
/// the answers' JSON.
#[test]
fn demo_on_a_terminal_reads_as_a_tour() {
    use std::io::Read;
    let root = data_dir();
    let (mut leader, follower) = pseudo_terminal();
    let mut child = std::process::Command::new(bin())
        .arg("--data-dir")
        .arg(root.path())
        .arg("demo")
        .stdin(std::process::Stdio::null())
        .stdout(follower)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The follower's last copy is the child's: reading ends (EIO) when the child exits.
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let _ = leader.read_to_end(&mut seen);
        String::from_utf8_lossy(&seen).replace('\r', "")
    });
    let mut progress = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut progress)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{progress}");
    let shown = reader.join().unwrap();
    assert!(shown.starts_with("A tour of reasoning-ledger"), "{shown}");
    let order = ["  thinking  ", "  agent     not run", "Pictures", "Try:"];
    let at: Vec<usize> = order
        .iter()
        .map(|part| {
            shown
                .find(part)
                .unwrap_or_else(|| panic!("{part}: {shown}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{shown}");
    assert!(shown.contains("5 calls · session "), "{shown}");
    assert!(
        !shown.contains("# Thinking session"),
        "no Markdown: {shown}"
    );
    let pages: Vec<&str> = shown
        .lines()
        .filter(|line| line.trim_end().ends_with(".html"))
        .collect();
    assert_eq!(pages.len(), 5, "{shown}");
    assert!(
        progress.contains("demo: thinking: sequentialthinking (1 of 5)"),
        "{progress}"
    );
    assert!(!progress.contains('{'), "no JSON: {progress}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_shows_the_agent_when_a_model_is_configured_and_says_so_when_it_does_not_answer() {
    let llm = LlmServer::start(vec![Reply::completion(
        "## Analysis\nPoll the status table, or subscribe to the load's event.\n\n[Final Conclusion]\nWait for the completion marker.\nConfidence: 0.8",
    )])
    .await;
    let root = data_dir();
    let dir = root.path().to_path_buf();
    let base = llm.base_url.clone();
    let output = tokio::task::spawn_blocking(move || {
        run(
            &dir,
            &["demo"],
            &[
                ("REASONING_LEDGER_LLM_BASE_URL", &base),
                ("REASONING_LEDGER_LLM_MODEL", "loopback-model"),
            ],
        )
    })
    .await
    .unwrap();
    let out = ok(&output, "demo with a model");
    let agent = out.split_once("## agent:").unwrap().1;
    assert!(
        agent.contains("Wait for the completion marker") && !agent.contains("Not run"),
        "{agent}"
    );
    assert!(
        llm.received()
            .iter()
            .any(|r| r.head.starts_with("POST") && r.body.contains("two ways")),
        "the model was asked the tour's question"
    );
    assert_eq!(
        kinds(root.path()),
        ["agent", "booster", "planning", "qa", "think", "thinking"]
    );
    assert_eq!(pictures(&out).len(), 12, "{out}");

    // A model that does not answer: the demo still runs, and says what happened.
    let other = data_dir();
    let out = ok(
        &run(
            other.path(),
            &["demo"],
            &[
                ("REASONING_LEDGER_LLM_BASE_URL", &closed_port_url()),
                ("REASONING_LEDGER_LLM_MODEL", "m"),
                ("REASONING_LEDGER_LLM_BACKOFF_MS", "1"),
            ],
        ),
        "demo with a model that is down",
    );
    let agent = out.split_once("## agent:").unwrap().1;
    assert!(
        agent.contains("Not run: the model") && agent.contains("Connection refused"),
        "{agent}"
    );
    // Its failed call is recorded, as every model call is.
    assert_eq!(
        kinds(other.path()),
        ["agent", "booster", "planning", "qa", "think", "thinking"]
    );
}

// ---- forgiving input ----

#[tokio::test]
async fn deep_planning_takes_risks_as_plain_strings_and_echoes_what_it_stored() {
    let dir = data_dir();
    let client = spawn_with(dir.path(), &["--toolsets", "planning"], &[]).await;
    let answer = |result: rmcp::model::CallToolResult| {
        assert_ne!(result.is_error, Some(true), "{}", text(&result));
        structured(&result)
    };
    let first = answer(
        call(
            &client,
            "deep_planning",
            json!({"phase": "init", "problem": "Pick a queue"}),
        )
        .await,
    );
    let session = first["sessionId"].clone();
    for arguments in [
        json!({"phase": "explore", "branchId": "a", "name": "Postgres as a queue"}),
        json!({"phase": "evaluate", "branchId": "a", "feasibility": 8}),
    ] {
        let mut arguments = arguments;
        arguments["sessionId"] = session.clone();
        answer(call(&client, "deep_planning", arguments).await);
    }
    // A number is neither a risk object nor its description: refused, nothing recorded.
    let refused = call(
        &client,
        "deep_planning",
        json!({"phase": "finalize", "sessionId": session, "selectedBranch": "a", "risks": [7]}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("expected an object or a string"),
        "{}",
        text(&refused)
    );
    let done = answer(
        call(
            &client,
            "deep_planning",
            json!({
                "phase": "finalize", "sessionId": session, "selectedBranch": "a", "format": "json",
                "risks": ["vendor lock-in", {"description": "table bloat", "mitigation": "vacuum"}]
            }),
        )
        .await,
    );
    assert_eq!(
        done["plan"]["risks"],
        json!([
            {"description": "vendor lock-in", "mitigation": ""},
            {"description": "table bloat", "mitigation": "vacuum"}
        ]),
        "{done}"
    );
    // As a JSON-encoded string too, and as stored (get_plan reads the ledger).
    let plan = call(
        &client,
        "get_plan",
        json!({"sessionId": session, "format": "json"}),
    )
    .await;
    assert!(text(&plan).contains("vendor lock-in"), "{}", text(&plan));
    client.cancel().await.unwrap();
}

// ---- doctor ----

/// `doctor` embeds one text with the configured embedding endpoint: a dead one is a FAIL
/// with its fix (issue 48: it said "Nothing is wrong"), one that answers is OK with the
/// vectors' size, none configured a note.
#[test]
fn doctor_checks_the_embedding_endpoint() {
    let dir = data_dir();
    let none = ok(&run(dir.path(), &["doctor"], &[]), "doctor");
    assert!(none.contains("search ranks by words only"), "{none}");
    let dead = run(
        dir.path(),
        &["doctor"],
        &[
            ("REASONING_LEDGER_EMBEDDINGS_BASE_URL", &closed_port_url()),
            ("REASONING_LEDGER_EMBEDDINGS_MODEL", "e"),
        ],
    );
    let report = stdout(&dead);
    assert_eq!(dead.status.code(), Some(1), "{report}");
    let failed: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        failed.len() == 1 && failed[0].contains("embeddings"),
        "{report}"
    );
    assert!(!report.contains("Nothing is wrong"), "{report}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(LlmServer::start(vec![Reply::status(
        200,
        "{\"data\": [{\"index\": 0, \"embedding\": [0.6, 0.8, 0.0]}]}",
    )]));
    let alive = ok(
        &run(
            dir.path(),
            &["doctor"],
            &[
                ("REASONING_LEDGER_EMBEDDINGS_BASE_URL", &server.base_url),
                ("REASONING_LEDGER_EMBEDDINGS_MODEL", "e"),
            ],
        ),
        "doctor with a live endpoint",
    );
    assert!(
        alive.contains("a text embedded (3 dimensions)") && alive.contains("Nothing is wrong"),
        "{alive}"
    );
    let asked = runtime.block_on(async { server.received() });
    assert!(
        asked[0].head.starts_with("POST /v1/embeddings"),
        "{}",
        asked[0].head
    );
}

#[cfg(unix)]
fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[cfg(unix)]
#[test]
fn doctor_passes_a_healthy_setup_and_names_each_problem_with_its_fix() {
    let root = data_dir();
    // Nothing there yet: nothing is wrong (the first write creates it).
    let fresh = run(&root.path().join("new"), &["doctor"], &[]);
    assert_eq!(fresh.status.code(), Some(0), "{}", stdout(&fresh));
    assert!(stdout(&fresh).contains("does not exist yet"));

    let dir = root.path().join("ledger");
    ok(&run(&dir, &["demo"], &[]), "demo");
    chmod(&dir, 0o700);
    let healthy = ok(&run(&dir, &["doctor"], &[]), "doctor");
    assert!(
        healthy.contains("5 session(s), 31 event(s)") && healthy.contains("Nothing is wrong"),
        "{healthy}"
    );
    // Readable by others: a warning with its fix, not a failure.
    chmod(&dir, 0o755);
    let warned = ok(&run(&dir, &["doctor"], &[]), "doctor");
    assert!(
        warned.contains("warn") && warned.contains(&format!("chmod 700 {}", dir.display())),
        "{warned}"
    );

    // Each problem: FAIL, its fix, exit 1.
    let token = dir.join("http-token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").unwrap();
    chmod(&token, 0o644);
    std::fs::create_dir(dir.join("workflows")).unwrap();
    std::fs::write(dir.join("workflows/broken.json"), "{\"name\": ").unwrap();
    let broken = run(
        &dir,
        &["doctor"],
        &[
            ("REASONING_LEDGER_LLM_BASE_URL", &closed_port_url()),
            ("REASONING_LEDGER_LLM_MODEL", "m"),
        ],
    );
    let report = stdout(&broken);
    assert_eq!(broken.status.code(), Some(1), "{report}");
    assert!(
        stderr(&broken).contains("doctor found 3 problem(s)"),
        "{report}"
    );
    for expected in [
        format!("chmod 600 {}", token.display()),
        "not reachable".to_string(),
        "broken.json".to_string(),
    ] {
        assert!(report.contains(&expected), "{expected}: {report}");
    }
    assert_eq!(
        report.lines().filter(|l| l.starts_with("FAIL")).count(),
        3,
        "{report}"
    );
    assert_eq!(report.matches("fix:").count(), 4, "{report}");

    // Fixed, and a model that answers: nothing is wrong again.
    chmod(&token, 0o600);
    std::fs::remove_file(dir.join("workflows/broken.json")).unwrap();
    chmod(&dir, 0o700);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let llm = runtime.block_on(LlmServer::start(vec![Reply::status(200, "{\"data\": []}")]));
    let fixed = ok(
        &run(
            &dir,
            &["doctor"],
            &[
                ("REASONING_LEDGER_LLM_BASE_URL", &llm.base_url),
                ("REASONING_LEDGER_LLM_MODEL", "m"),
                ("REASONING_LEDGER_LLM_API_KEY", "sk-secret-key-1234567890"),
            ],
        ),
        "doctor, fixed",
    );
    assert!(
        fixed.contains("GET /models answered 200") && fixed.contains("Nothing is wrong"),
        "{fixed}"
    );
    assert!(!fixed.contains("sk-secret"), "never a key: {fixed}");
    let asked = runtime.block_on(async { llm.received() });
    assert!(
        asked[0].head.starts_with("GET /v1/models"),
        "{}",
        asked[0].head
    );
    assert!(
        asked[0]
            .head
            .to_ascii_lowercase()
            .contains("authorization: bearer sk-secret")
    );

    // A world-writable data directory, and a damaged ledger, fail.
    chmod(&dir, 0o777);
    std::fs::write(dir.join("ledger.redb"), b"not a ledger").unwrap();
    let damaged = run(&dir, &["doctor"], &[]);
    let report = stdout(&damaged);
    assert_eq!(damaged.status.code(), Some(1), "{report}");
    assert!(report.contains("writable by every user"), "{report}");
    assert!(report.contains("FAIL  ledger"), "{report}");
    chmod(&dir, 0o700);
}

// ---- completions and man ----

#[test]
fn completions_for_each_shell_and_the_man_page_come_from_the_command_line() {
    let dir = data_dir();
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let script = ok(&run(dir.path(), &["completions", shell], &[]), shell);
        assert!(
            script.contains("reasoning-ledger") && script.contains("doctor"),
            "{shell}: {script}"
        );
    }
    // A flag that takes named values completes to them, not to file names.
    let bash = ok(&run(dir.path(), &["completions", "bash"], &[]), "bash");
    for (flag, values) in [
        ("--format", "mermaid markdown json jsonl svg html otlp"),
        ("--kind", "thinking think planning qa agent booster"),
        ("--mode", "lexical semantic hybrid"),
        (
            "--toolsets",
            "thinking ledger export planning qa agent booster all",
        ),
    ] {
        let cases: Vec<&str> = bash
            .split(&format!("{flag})"))
            .skip(1)
            .map(|case| case.lines().nth(1).unwrap_or_default())
            .collect();
        assert!(!cases.is_empty(), "{flag}: no case in {bash}");
        for case in cases {
            assert!(
                case.contains(&format!("compgen -W \"{values}\"")),
                "{flag}: {case}"
            );
        }
    }
    let unknown = run(dir.path(), &["completions", "cmd.exe"], &[]);
    assert_eq!(unknown.status.code(), Some(2));
    let page = ok(&run(dir.path(), &["man"], &[]), "man");
    assert!(
        page.starts_with(".ie") || page.contains(".TH reasoning-ledger 1"),
        "{page}"
    );
    assert!(page.contains("doctor") && page.contains("REASONING_LEDGER_DIR"));
    let pages = dir.path().join("man1");
    let listed = ok(
        &run(dir.path(), &["man", "--dir", pages.to_str().unwrap()], &[]),
        "man --dir",
    );
    for name in [
        "reasoning-ledger.1",
        "reasoning-ledger-doctor.1",
        "reasoning-ledger-serve.1",
    ] {
        assert!(pages.join(name).is_file(), "{name}: {listed}");
    }
    // Nothing was recorded.
    assert!(!dir.path().join("ledger.redb").exists());
}

// ---- progress, export --all, resuming ----

#[test]
fn long_commands_are_silent_when_piped_and_export_all_round_trips_through_import() {
    let root = data_dir();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    ok(&run(&a, &["demo"], &[]), "demo");
    let backup = root.path().join("all.jsonl");
    let backup_arg = backup.to_str().unwrap();
    let copy_to = root.path().join("c");
    let commands: [(&Path, Vec<&str>); 5] = [
        (&a, vec!["verify"]),
        (&a, vec!["export", "--all", "-f", "jsonl", "-o", backup_arg]),
        (&b, vec!["import", backup_arg]),
        (&b, vec!["copy", "--to", copy_to.to_str().unwrap()]),
        (&a, vec!["verify", "--rebuild"]),
    ];
    for (dir, args) in &commands {
        let output = run(dir, args, &[]);
        ok(&output, &args.join(" "));
        let noise = stderr(&output);
        // Only the export's one line about the file it wrote; no bar, no control codes.
        assert!(
            noise.is_empty() || (args[0] == "export" && noise.lines().count() == 1),
            "{args:?}: {noise:?}"
        );
        assert!(
            !noise.contains('\r') && !noise.contains('\u{1b}'),
            "{args:?}"
        );
    }
    // Every session, each event byte for byte, in both ledgers.
    let from_a = ok(&run(&a, &["export", "--all", "-f", "jsonl"], &[]), "a");
    assert_eq!(from_a, std::fs::read_to_string(&backup).unwrap());
    assert_eq!(from_a.lines().count(), 31);
    // b holds the same, and in each of its 5 sessions the record of the import.
    assert_eq!(
        without_import_records(&ok(&run(&b, &["export", "--all", "-f", "jsonl"], &[]), "b")),
        (from_a.clone(), 5)
    );
    // Never over a file; no partial file left beside it; other formats refused.
    let again = run(
        &a,
        &["export", "--all", "-f", "jsonl", "-o", backup_arg],
        &[],
    );
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("never overwrites"));
    let leftovers: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let svg = run(&a, &["export", "--all", "-f", "svg"], &[]);
    assert_eq!(svg.status.code(), Some(1));
    assert!(stderr(&svg).contains("jsonl only"));
}

#[cfg(target_os = "linux")]
#[test]
fn on_a_terminal_long_commands_draw_a_bar_on_stderr_and_stdout_stays_clean() {
    let root = data_dir();
    let a = root.path().join("a");
    ok(&run(&a, &["demo"], &[]), "demo");
    // util-linux `script` gives the command a pseudo-terminal; its output is the terminal's.
    let command = format!("{} --data-dir {} verify 2>&1", bin().display(), a.display());
    let on_terminal = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env_remove("REASONING_LEDGER_NO_PROGRESS")
        .output()
        .expect("util-linux script");
    let shown = stdout(&on_terminal);
    assert!(on_terminal.status.success(), "{shown}");
    assert!(shown.contains("verifying ["), "a bar: {shown:?}");
    assert!(shown.contains("ok: 5 session(s)"), "{shown:?}");
    // REASONING_LEDGER_NO_PROGRESS turns it off even there.
    let quiet = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("REASONING_LEDGER_NO_PROGRESS", "1")
        .output()
        .expect("util-linux script");
    assert!(
        !stdout(&quiet).contains("verifying ["),
        "{}",
        stdout(&quiet)
    );
}

/// An interruption between two of the copy's transactions (a fault after the third
/// commit, in debug builds): the copy stops, what it wrote is whole, and the next run
/// copies only the rest. Import the same.
#[test]
fn an_interrupted_copy_or_import_resumes_where_it_stopped() {
    let root = data_dir();
    let (a, b, c) = (
        root.path().join("a"),
        root.path().join("b"),
        root.path().join("c"),
    );
    ok(&run(&a, &["demo"], &[]), "demo");
    let all = ok(&run(&a, &["export", "--all", "-f", "jsonl"], &[]), "export");
    let backup = root.path().join("all.jsonl");
    std::fs::write(&backup, &all).unwrap();

    let stopped = run(
        &a,
        &["copy", "--to", b.to_str().unwrap()],
        &[("REASONING_LEDGER_FAULT", "after-commit:3")],
    );
    assert!(!stopped.status.success(), "the fault fired");
    let partial = ok(&run(&b, &["verify"], &[]), "verify the partial copy");
    assert!(partial.starts_with("ok: 3 session(s)"), "{partial}");
    let resumed = ok(
        &run(&a, &["copy", "--to", b.to_str().unwrap()], &[]),
        "copy again",
    );
    let already: u64 = resumed
        .split_once(" event(s) (")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("already there");
    assert!(
        already > 0 && resumed.contains("of 5 session(s)"),
        "{resumed}"
    );
    assert!(
        resumed.starts_with(&format!("copied {} event(s)", 31 - already)),
        "{resumed}"
    );
    assert_eq!(
        all,
        ok(&run(&b, &["export", "--all", "-f", "jsonl"], &[]), "b")
    );

    let stopped = run(
        &c,
        &["import", backup.to_str().unwrap()],
        &[("REASONING_LEDGER_FAULT", "after-commit:2")],
    );
    assert!(!stopped.status.success(), "the fault fired");
    let resumed = ok(
        &run(&c, &["import", backup.to_str().unwrap()], &[]),
        "import again",
    );
    assert!(resumed.starts_with("imported "), "{resumed}");
    assert!(
        !resumed.starts_with("imported 31 "),
        "it resumed: {resumed}"
    );
    // Each session once, with one record of the import: the interrupted run's sessions
    // carry theirs, written with their events.
    assert_eq!(
        without_import_records(&ok(&run(&c, &["export", "--all", "-f", "jsonl"], &[]), "c")),
        (all.clone(), 5)
    );
}
