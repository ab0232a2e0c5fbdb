//! Issue 36 (what one token holder or one local account can do), the files and text part:
//! terminal escapes in the CLI's text output, private modes of everything the server
//! writes, token files and tokens `serve --http` refuses, redirects from providers,
//! `outputPath` swapped for a symlink, OAuth subjects that cannot pass for a bearer name.

use crate::common::*;
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use std::path::Path;

/// A thought holding what a terminal would act on: colours (CSI), a window title and an
/// OSC 8 link ended by BEL, a C1 CSI (U+009B), DEL and a carriage return.
const HOSTILE: &str = "escape \x1b[31mred\x1b[0m \x1b]0;owned title\x07 \x1b]8;;https://evil.example/\x07click\x1b]8;;\x07 c1\u{9b}31m del\x7f cr\rend";

/// Bytes a terminal could act on: C0 other than newline and tab, DEL, C1 (as UTF-8).
fn terminal_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c < ' ' && c != '\n' && c != '\t') || c == '\x7f' || ('\u{80}'..='\u{9f}').contains(&c)
        })
        .collect()
}

#[tokio::test]
async fn cli_text_output_carries_no_terminal_controls() {
    let dir = data_dir();
    let client = spawn(dir.path()).await;
    let session = one_thought_session(&client, HOSTILE).await;
    client.cancel().await.unwrap();
    let commands: [&[&str]; 5] = [
        &["sessions"],
        &["search", "escape"],
        &["replay", &session],
        &["show", &session],
        &["replay", &session, "--at", "1"],
    ];
    for args in commands {
        let output = cli(dir.path(), args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let text = stdout(&output);
        // The command printed the thought (it was not left out to pass the test).
        assert!(text.contains("escape"), "{args:?}: {text}");
        assert_eq!(
            terminal_controls(&text),
            Vec::<char>::new(),
            "{args:?}: {text:?}"
        );
    }
    // JSON stays exact: the escapes are there, as JSON escapes.
    let output = cli(dir.path(), &["sessions", "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let title = value["sessions"][0]["title"].as_str().unwrap().to_string();
    assert!(title.contains('\x1b'), "{title:?}");
    let output = cli(dir.path(), &["export", &session, "-f", "jsonl"]);
    assert!(stdout(&output).contains("\\u001b]8;;https://evil.example/\\u0007"));
}

// ---- private by default ----

/// `reasoning-ledger ARGS` under `umask 000` (the most permissive a user could have).
fn permissive(dir: &Path, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg("umask 000; exec \"$0\" \"$@\"")
        .arg(bin())
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env("DISABLE_THOUGHT_LOGGING", "true")
        .env_remove("REASONING_LEDGER_TOOLSETS")
        .env_remove("REASONING_LEDGER_STORE")
        .env_remove("REASONING_LEDGER_EXPORT_DIR")
        .env_remove("REASONING_LEDGER_TOKEN")
        .env_remove("REASONING_LEDGER_TOKENS");
    for var in PROVIDER_VARS {
        command.env_remove(var);
    }
    command
}

/// Every directory and file under `root` (itself included) with its mode.
fn modes(root: &Path) -> Vec<(std::path::PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = vec![(
        root.to_path_buf(),
        std::fs::metadata(root).unwrap().permissions().mode() & 0o777,
    )];
    for entry in std::fs::read_dir(root).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            found.extend(modes(&entry.path()));
        } else {
            found.push((entry.path(), meta.permissions().mode() & 0o777));
        }
    }
    found
}

#[tokio::test]
async fn everything_the_server_writes_is_private_under_a_permissive_umask() {
    let base = data_dir();
    let dir = base.path().join("ledger");
    let transport = TokioChildProcess::builder(permissive(
        &dir,
        &["serve", "--toolsets", "thinking,booster,ledger"],
    ))
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("spawn server")
    .0;
    let client = ().serve(transport).await.expect("initialize");
    one_thought_session(&client, "private thoughts about the index").await;
    let found = search_history(&client, "private", "lexical").await;
    assert_eq!(matched_sessions(&found).len(), 1, "{found}");
    let task = "Find the counterfeit among 12 coins using a balance scale in 3 weighings.";
    for (path, overwrite) in [("runs/out.json", false), ("runs/out.json", true)] {
        let solved = call(
            &client,
            "solve",
            serde_json::json!({"task": task, "iterations": 1, "outputPath": path, "overwrite": overwrite}),
        )
        .await;
        assert!(!is_error(&solved), "{}", text(&solved));
    }
    client.cancel().await.unwrap();
    // The CLI's writers too: the named tokens file (and its lock), the index caught up by
    // a search, an export.
    for args in [
        &["token", "add", "alice"][..],
        &["search", "private"],
        &["export", "--all", "-f", "jsonl", "-o"],
    ] {
        let mut args = args.to_vec();
        let out = dir.join("all.jsonl").display().to_string();
        if args.last() == Some(&"-o") {
            args.push(&out);
        }
        let output = permissive(&dir, &args).output().await.unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
    }
    let all = modes(&dir);
    for wanted in [
        "index",
        "exports/runs/out.json",
        "tokens.toml",
        "ledger.redb",
    ] {
        assert!(
            all.iter().any(|(p, _)| p.ends_with(wanted)),
            "{wanted} not written: {all:?}"
        );
    }
    let open: Vec<_> = all.iter().filter(|(_, mode)| mode & 0o077 != 0).collect();
    assert!(open.is_empty(), "readable or writable by others: {open:?}");
}

/// Starts `serve --http` on `dir` and returns its exit status and stderr (it must stop by
/// itself within 20 s).
async fn serve_http_refused(dir: &Path, token: Option<&str>) -> (Option<i32>, String) {
    let mut command = permissive(dir, &["serve", "--http", "127.0.0.1:0"]);
    if let Some(token) = token {
        command.env("REASONING_LEDGER_TOKEN", token);
    }
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(std::time::Duration::from_secs(20), command.output())
        .await
        .expect("serve --http kept running")
        .unwrap();
    (output.status.code(), stderr(&output))
}

#[cfg(unix)]
fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test]
async fn serve_http_refuses_token_files_others_may_read_and_short_tokens() {
    // The shared token's file, 0644.
    let dir = data_dir();
    let token_file = dir.path().join("http-token");
    std::fs::write(&token_file, format!("{}\n", "ab".repeat(32))).unwrap();
    chmod(&token_file, 0o644);
    let (code, said) = serve_http_refused(dir.path(), None).await;
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("chmod 600 {}", token_file.display())),
        "{said}"
    );
    // Group-writable is as bad.
    chmod(&token_file, 0o620);
    let (code, said) = serve_http_refused(dir.path(), None).await;
    assert_eq!(code, Some(1), "{said}");

    // The named tokens file, 0644.
    let dir = data_dir();
    let output = cli(dir.path(), &["token", "add", "alice"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let tokens = dir.path().join("tokens.toml");
    chmod(&tokens, 0o644);
    let (code, said) = serve_http_refused(dir.path(), None).await;
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("chmod 600 {}", tokens.display())),
        "{said}"
    );

    // A shared token shorter than 32 characters.
    let dir = data_dir();
    let (code, said) = serve_http_refused(dir.path(), Some("short-token")).await;
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("REASONING_LEDGER_TOKEN is 11 characters long")
            && said.contains("at least 32"),
        "{said}"
    );
}

// ---- no redirects from providers ----

#[tokio::test]
async fn a_provider_redirect_is_an_error_naming_it_and_nothing_reaches_the_target() {
    use crate::llm::{LlmServer, Reply};
    let target = LlmServer::start(vec![Reply::completion("from the redirect target")]).await;
    let redirect = |path: &str| {
        Reply::status(307, "").header("location", &format!("{}{path}", target.base_url))
    };
    let provider = LlmServer::start(vec![redirect("/chat/completions")]).await;
    let dir = data_dir();
    let client = spawn_agent(
        dir.path(),
        &[
            ("REASONING_LEDGER_LLM_BASE_URL", provider.base_url.as_str()),
            ("REASONING_LEDGER_LLM_MODEL", "loopback-model"),
            ("REASONING_LEDGER_LLM_BACKOFF_MS", "5"),
        ],
        None,
    )
    .await;
    let answer = call(
        &client,
        "chat_agent",
        serde_json::json!({"input_text": "a prompt that must not travel"}),
    )
    .await;
    let said = format!("{answer:?}");
    let host = target
        .base_url
        .trim_start_matches("http://")
        .trim_end_matches("/v1");
    assert!(
        said.contains(&format!("the provider answered a redirect (307) to {host}"))
            && said.contains("redirects are not followed"),
        "{said}"
    );
    assert!(!said.contains("from the redirect target"), "{said}");
    assert_eq!(provider.received().len(), 1, "a redirect is not retried");
    assert!(
        target.received().is_empty(),
        "the prompt was re-sent to the redirect's target"
    );
    client.cancel().await.unwrap();

    // The embeddings endpoint: the same.
    let embeddings = LlmServer::start(vec![redirect("/embeddings")]).await;
    // (tokio's Command: the stub servers run on this test's one thread.)
    let output = tokio::process::Command::new(bin())
        .arg("--data-dir")
        .arg(dir.path())
        .args(["reindex", "--embeddings"])
        .env_remove("REASONING_LEDGER_STORE")
        .env("REASONING_LEDGER_EMBEDDINGS_BASE_URL", &embeddings.base_url)
        .env("REASONING_LEDGER_EMBEDDINGS_MODEL", "stub")
        .env("REASONING_LEDGER_EMBEDDINGS_BACKOFF_MS", "5")
        .output()
        .await
        .unwrap();
    let said = format!("{}{}", stdout(&output), stderr(&output));
    assert!(!output.status.success(), "{said}");
    assert!(
        said.contains(&format!("the provider answered a redirect (307) to {host}")),
        "{said}"
    );
    assert!(
        target.received().is_empty(),
        "texts were re-sent to the redirect's target"
    );
}

// ---- import ----

#[tokio::test]
async fn import_applies_the_tool_call_text_limit_to_each_event() {
    let dir = data_dir();
    let client = spawn(dir.path()).await;
    let session = one_thought_session(&client, "a short thought").await;
    client.cancel().await.unwrap();
    let exported = stdout(&cli(dir.path(), &["export", &session, "-f", "jsonl"]));
    // A crafted file: the thought (and so the title) grown past what a tool call may
    // record (1 MiB): refused at the first event holding it, before any hash check.
    let huge = "x".repeat(1024 * 1024 + 1);
    let crafted = exported.replace("a short thought", &huge);
    let file = dir.path().join("crafted.jsonl");
    std::fs::write(&file, crafted).unwrap();
    let other = data_dir();
    let output = cli(other.path(), &["import", file.to_str().unwrap()]);
    assert!(!output.status.success());
    let said = stderr(&output);
    assert!(
        said.contains(":1: event seq 1 of session")
            && said
                .contains("holds a text of 1048577 bytes, over the 1048576 a tool call may record"),
        "{said}"
    );
}
