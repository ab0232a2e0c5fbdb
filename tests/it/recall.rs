//! Recall (issue 20) through the built binary: the relevance set on redb's Tantivy index
//! (PostgreSQL's full-text search runs it in `tests/services/recall_pg.rs`), read-your-writes across
//! processes, kill -9 during appends with the index open, a deleted, truncated or newer
//! index rebuilt and never served, hostile queries, `serve --related N`.

use crate::common::{
    self, Client, bin, call, cli, data_dir, is_error, spawn_with, stderr, stdout, structured, text,
    thought,
};
use crate::recall_set::{TOOLSETS, cli_json, matches, relevance_fixture, relevance_set, thinking};
use rmcp::ServiceExt;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};

#[tokio::test]
async fn the_relevance_set_passes_on_redb() {
    let dir = data_dir();
    let client = spawn_with(dir.path(), &["--toolsets", TOOLSETS], &[]).await;
    let fixture = relevance_fixture(&client).await;
    client.cancel().await.unwrap();
    let redb = |args: &[&str]| {
        let mut full = vec!["search"];
        full.extend_from_slice(args);
        full.push("--json");
        cli_json(cli(dir.path(), &full), &format!("redb search {args:?}"))
    };
    relevance_set(&redb, &fixture, true, true);
}

#[tokio::test]
async fn search_history_takes_the_same_filters_and_refuses_what_it_cannot_run() {
    let dir = data_dir();
    let client = spawn_with(dir.path(), &["--toolsets", TOOLSETS], &[]).await;
    let fixture = relevance_fixture(&client).await;
    let answer = structured(
        &call(
            &client,
            "search_history",
            json!({"query": "cache", "kinds": ["thinking"], "sessionId": fixture.cache, "since": 0, "until": "2999-01-01T00:00:00Z", "limit": "1"}),
        )
        .await,
    );
    assert_eq!(answer["matches"].as_array().unwrap().len(), 1, "{answer}");
    let first = &answer["matches"][0];
    for key in [
        "sessionId",
        "seq",
        "kind",
        "eventType",
        "at",
        "score",
        "title",
        "snippet",
    ] {
        assert!(first.get(key).is_some(), "{key} missing: {answer}");
    }
    let next = answer["nextCursor"].as_str().unwrap().to_string();
    let second = structured(
        &call(
            &client,
            "search_history",
            json!({"query": "cache", "kinds": "thinking", "sessionId": fixture.cache, "limit": 1, "cursor": next}),
        )
        .await,
    );
    assert_eq!(second["matches"].as_array().unwrap().len(), 1, "{second}");
    assert_ne!(second["matches"][0]["seq"], first["seq"]);
    assert!(second.get("nextCursor").is_none(), "{second}");

    let refused = |args: Value, expected: &'static str| {
        let client = &client;
        async move {
            let result = call(client, "search_history", args.clone()).await;
            assert!(is_error(&result), "{args} was accepted");
            assert!(
                text(&result).contains(expected),
                "{args}: {} lacks {expected:?}",
                text(&result)
            );
        }
    };
    refused(json!({"query": "x", "limit": 0}), "limit: Too small").await;
    // Over the most one page holds: clamped to it (the next page by the cursor).
    let clamped = call(
        &client,
        "search_history",
        json!({"query": "cache", "limit": 101}),
    )
    .await;
    assert!(!is_error(&clamped), "{}", text(&clamped));
    refused(json!({"query": "x", "since": "yesterday"}), "RFC 3339").await;
    refused(json!({"query": "x", "cursor": "next"}), "not a cursor").await;
    refused(json!({"query": "x", "sessionId": "missing"}), "no session").await;
    // Hostile queries: a clear error, or an empty answer; never a crash.
    refused(json!({"query": "\"unbalanced"}), "\"a quoted phrase\"").await;
    refused(json!({"query": "-only -minus"}), "needs a word").await;
    refused(json!({"query": "\u{1}\u{2}\u{7f}"}), "empty").await;
    refused(json!({"query": "x".repeat(100 * 1024)}), "4096").await;
    for query in [
        "the of and a",
        "!!! ???",
        "\u{202e}\u{200b}",
        "a\u{0}b \"c\u{1}d\"",
    ] {
        let result = call(&client, "search_history", json!({"query": query})).await;
        assert!(!is_error(&result), "{query:?}: {}", text(&result));
    }
    // A kind no family registers matches nothing (as get_history's event kinds).
    let none = structured(
        &call(
            &client,
            "search_history",
            json!({"query": "cache", "kinds": ["nope"]}),
        )
        .await,
    );
    assert!(none["matches"].as_array().unwrap().is_empty(), "{none}");
    // The server is still there.
    assert!(!is_error(
        &call(&client, "search_history", json!({"query": "cache"})).await
    ));
}

/// `search_history` over MCP, its structured answer.
async fn search(client: &Client, args: Value) -> Value {
    let result = call(client, "search_history", args.clone()).await;
    assert!(!is_error(&result), "{args}: {}", text(&result));
    structured(&result)
}

#[tokio::test]
async fn prefixes_typos_phrases_and_filters_answer_over_mcp() {
    let dir = data_dir();
    let client = spawn_with(dir.path(), &["--toolsets", TOOLSETS], &[]).await;
    let f = relevance_fixture(&client).await;
    // Enough other events that a session's few are walked, not checked one by one.
    let filler: Vec<String> = (0..40)
        .map(|i| format!("filler {i}: the cache was warm and the build was uncertain"))
        .collect();
    let filler: Vec<&str> = filler.iter().map(String::as_str).collect();
    let filler_session = thinking(&client, &filler).await;

    // `word*`: the words that start with it, marked in the snippet.
    let found = search(&client, json!({"query": "linke*"})).await;
    assert_eq!(matches(&found).len(), 2, "{found}");
    assert!(
        matches(&found).iter().all(|(s, _)| *s == f.linker),
        "{found}"
    );
    assert!(
        found["matches"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("**linker"),
        "{found}"
    );
    let found = search(&client, json!({"query": "uncert*", "limit": 100})).await;
    assert_eq!(matches(&found).len(), 40, "{found}");
    assert!(matches(&search(&client, json!({"query": "qqq*"})).await).is_empty());
    // Without the star, the same letters are a word of their own: nothing.
    assert!(matches(&search(&client, json!({"query": "uncert"})).await).is_empty());

    // A typo: nothing found, retried one edit away, and the note says so.
    let found = search(&client, json!({"query": "zepelin"})).await;
    assert_eq!(matches(&found), vec![(f.zeppelin.clone(), 2)], "{found}");
    let note = found["note"].as_str().unwrap();
    assert!(
        note.starts_with("no match for zepelin; showing zeppelin"),
        "{found}"
    );
    // Words shorter than five letters are not corrected; a found word is not either.
    let found = search(&client, json!({"query": "rsut"})).await;
    assert!(matches(&found).is_empty(), "{found}");
    assert!(
        !found["note"].as_str().unwrap().contains("no match"),
        "{found}"
    );
    let found = search(&client, json!({"query": "zeppelin"})).await;
    assert!(
        !found["note"].as_str().unwrap().contains("no match"),
        "{found}"
    );

    // Phrases: two words and four, in this order only.
    let found = search(&client, json!({"query": "\"linker fails\""})).await;
    assert_eq!(matches(&found), vec![(f.linker.clone(), 2)], "{found}");
    assert!(matches(&search(&client, json!({"query": "\"fails linker\""})).await).is_empty());
    let found = search(&client, json!({"query": "\"purge the cache keys\""})).await;
    assert_eq!(matches(&found), vec![(f.cache.clone(), 3)], "{found}");
    let found = search(&client, json!({"query": "\"purge cache the keys\""})).await;
    assert!(matches(&found).is_empty(), "{found}");
    let found = search(
        &client,
        json!({"query": "\"the cache was warm\"", "limit": 100}),
    )
    .await;
    assert_eq!(matches(&found).len(), 40, "{found}");

    // Filters inside the collection: a session's few events, kinds, time.
    let found = search(&client, json!({"query": "cache", "sessionId": f.cache})).await;
    assert_eq!(matches(&found).len(), 2, "{found}");
    assert!(
        matches(&found).iter().all(|(s, _)| *s == f.cache),
        "{found}"
    );
    let found = search(
        &client,
        json!({"query": "\"the cache\"", "sessionId": filler_session, "limit": 100}),
    )
    .await;
    assert_eq!(matches(&found).len(), 40, "{found}");
    let found = search(&client, json!({"query": "cache", "kinds": ["planning"]})).await;
    assert!(!matches(&found).is_empty(), "{found}");
    assert!(matches(&found).iter().all(|(s, _)| *s == f.plan), "{found}");
    let found = search(
        &client,
        json!({"query": "cache", "since": "2999-01-01T00:00:00Z"}),
    )
    .await;
    assert!(matches(&found).is_empty(), "{found}");
    let found = search(&client, json!({"query": "cache", "until": 1000})).await;
    assert!(matches(&found).is_empty(), "{found}");
    let all = search(&client, json!({"query": "cache", "limit": 100})).await;
    let found = search(
        &client,
        json!({"query": "cache", "since": 0, "until": "2999-01-01T00:00:00Z", "limit": 100}),
    )
    .await;
    assert_eq!(matches(&found), matches(&all), "{found}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_write_from_one_process_is_found_by_the_next_search_of_another() {
    let dir = data_dir();
    let a = spawn_with(dir.path(), &[], &[]).await;
    let b = spawn_with(dir.path(), &[], &[]).await;
    // B opens its index first, so A's writes arrive after B's checkpoint.
    call(
        &a,
        "sequentialthinking",
        thought(1, 3, true, "opening thought"),
    )
    .await;
    let none = structured(&call(&b, "search_history", json!({"query": "quokka"})).await);
    assert!(none["matches"].as_array().unwrap().is_empty());
    for round in 0..3 {
        let word = format!("quokka{round}");
        let written = structured(
            &call(
                &a,
                "sequentialthinking",
                thought(1, 1, false, &format!("a {word} appears")),
            )
            .await,
        );
        let found = structured(&call(&b, "search_history", json!({"query": word})).await);
        assert_eq!(
            found["matches"][0]["sessionId"], written["sessionId"],
            "server B, round {round}: {found}"
        );
        let cli_found = cli_json(cli(dir.path(), &["search", &word, "--json"]), "cli search");
        assert_eq!(
            cli_found["matches"][0]["sessionId"], written["sessionId"],
            "the CLI, round {round}"
        );
    }
    // And the other way round: the CLI's index update is read by the servers.
    let written =
        structured(&call(&b, "sequentialthinking", thought(1, 1, false, "a wombat")).await);
    let found = structured(&call(&a, "search_history", json!({"query": "wombat"})).await);
    assert_eq!(found["matches"][0]["sessionId"], written["sessionId"]);
}

/// Spawns a server on `dir` and returns its client and pid.
async fn spawn_with_pid(dir: &Path) -> (Client, u32) {
    let dir = dir.to_path_buf();
    let (transport, _) =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            cmd.arg("serve").arg("--data-dir").arg(&dir);
            cmd.env("DISABLE_THOUGHT_LOGGING", "true");
            cmd.env_remove("REASONING_LEDGER_TOOLSETS");
            cmd.env_remove("REASONING_LEDGER_STORE");
        }))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn server");
    let pid = transport.id().expect("server pid");
    (().serve(transport).await.expect("initialize"), pid)
}

#[tokio::test]
async fn kill_9_during_appends_with_the_index_open_loses_no_acknowledged_thought() {
    let dir = data_dir();
    let (client, pid) = spawn_with_pid(dir.path()).await;
    let client = Arc::new(client);
    // The index is open and being updated while the writes go on.
    call(&client, "search_history", json!({"query": "nothing"})).await;
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let (tx, mut enough) = tokio::sync::mpsc::channel::<()>(1);
    let writer = {
        let (client, acked) = (client.clone(), acked.clone());
        tokio::spawn(async move {
            for i in 0.. {
                let args = thought(1, 1, false, &format!("killtest marker{i}"));
                match common::try_call(&client, "sequentialthinking", args).await {
                    Ok(result) if !is_error(&result) => {
                        let session = structured(&result)["sessionId"]
                            .as_str()
                            .unwrap()
                            .to_string();
                        let mut acked = acked.lock().unwrap();
                        acked.push(session);
                        if acked.len() == 25 {
                            let _ = tx.try_send(());
                        }
                    }
                    _ => break,
                }
            }
        })
    };
    let searcher = {
        let client = client.clone();
        tokio::spawn(async move {
            while common::try_call(&client, "search_history", json!({"query": "killtest"}))
                .await
                .is_ok()
            {}
        })
    };
    enough.recv().await.expect("25 acknowledged writes");
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    writer.await.unwrap();
    searcher.await.unwrap();
    let acked = acked.lock().unwrap().clone();
    let verified = cli(dir.path(), &["verify"]);
    assert!(verified.status.success(), "{}", stderr(&verified));
    let found = cli_json(
        cli(
            dir.path(),
            &["search", "killtest", "--limit", "100", "--json"],
        ),
        "search after kill -9",
    );
    let found: Vec<String> = matches(&found).into_iter().map(|(s, _)| s).collect();
    for session in &acked {
        assert!(found.contains(session), "acknowledged {session} not found");
    }
    let verified = stdout(&cli(dir.path(), &["verify"]));
    assert!(
        verified.contains("search index: agrees with the ledger"),
        "{verified}"
    );
}

/// The largest file of the Tantivy index in `dir`.
fn largest_index_file(dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(dir.join("index/tantivy"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap()
}

#[tokio::test]
async fn a_deleted_truncated_or_newer_index_is_rebuilt_never_served() {
    let dir = data_dir();
    let client = spawn_with(dir.path(), &[], &[]).await;
    let mut sessions = Vec::new();
    for i in 0..30 {
        let written = structured(
            &call(
                &client,
                "sequentialthinking",
                thought(1, 1, false, &format!("platypus number {i}")),
            )
            .await,
        );
        sessions.push(written["sessionId"].as_str().unwrap().to_string());
    }
    client.cancel().await.unwrap();
    let all_found = |what: &str| {
        let output = cli(
            dir.path(),
            &["search", "platypus", "--limit", "100", "--json"],
        );
        let found = cli_json(output, what);
        assert_eq!(matches(&found).len(), 30, "{what}: {found}");
    };
    all_found("first build");
    assert!(stdout(&cli(dir.path(), &["verify"])).contains("agrees with the ledger"));

    // Deleted.
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    assert!(stdout(&cli(dir.path(), &["verify"])).contains("search index: none yet"));
    all_found("deleted");

    // Truncated.
    let file = largest_index_file(dir.path());
    let length = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(length / 2)
        .unwrap();
    let output = cli(
        dir.path(),
        &["search", "platypus", "--limit", "100", "--json"],
    );
    assert!(
        stderr(&output).contains("rebuilding the search index"),
        "{}",
        stderr(&output)
    );
    let found = cli_json(output, "truncated");
    assert_eq!(matches(&found).len(), 30);

    // Made by a newer schema.
    let meta = dir.path().join("index/tantivy/meta.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    // The schema version this build wrote, whatever it is, made 999.
    let key = "\\\"recall\\\":";
    let at = text.find(key).map(|at| at + key.len()).unwrap_or(0);
    let digits = text[at..].bytes().take_while(u8::is_ascii_digit).count();
    let newer = format!("{}999{}", &text[..at], &text[at + digits..]);
    assert_ne!(text, newer, "the checkpoint names its schema: {text}");
    std::fs::write(&meta, newer).unwrap();
    assert!(stdout(&cli(dir.path(), &["verify"])).contains("unusable"));
    let output = cli(
        dir.path(),
        &["search", "platypus", "--limit", "100", "--json"],
    );
    assert!(
        stderr(&output).contains("index schema 999"),
        "{}",
        stderr(&output)
    );
    assert_eq!(matches(&cli_json(output, "newer")).len(), 30);

    // `reindex` rebuilds it on demand.
    let reindexed = cli(dir.path(), &["reindex"]);
    assert!(reindexed.status.success(), "{}", stderr(&reindexed));
    assert!(stdout(&reindexed).contains("reindexed"));
    all_found("reindexed");
}

#[tokio::test]
async fn related_sessions_answer_a_first_thought_only_when_asked() {
    let dir = data_dir();
    let plain = spawn_with(dir.path(), &[], &[]).await;
    let earlier = thinking(
        &plain,
        &["Tuning the garbage collector pauses of the JVM service"],
    )
    .await;
    let answer = structured(
        &call(
            &plain,
            "sequentialthinking",
            thought(1, 2, true, "garbage collector pauses again"),
        )
        .await,
    );
    assert!(answer.get("related").is_none(), "off by default: {answer}");
    plain.cancel().await.unwrap();

    let related = spawn_with(dir.path(), &["--related", "3"], &[]).await;
    let answer = structured(
        &call(
            &related,
            "sequentialthinking",
            thought(1, 2, true, "Why are the garbage collector pauses so long?"),
        )
        .await,
    );
    let found = answer["related"].as_array().expect("related sessions");
    assert!(found.len() <= 3 && !found.is_empty(), "{answer}");
    assert!(
        found.iter().any(|r| r["sessionId"] == json!(earlier)),
        "{answer}"
    );
    assert!(found.iter().all(|r| r["sessionId"] != answer["sessionId"]));
    for key in ["sessionId", "title", "score", "snippet"] {
        assert!(found[0].get(key).is_some(), "{key}: {answer}");
    }
    // Nothing like it: the key is left out.
    let answer = structured(
        &call(
            &related,
            "sequentialthinking",
            thought(1, 1, false, "xylophone quintessence"),
        )
        .await,
    );
    assert!(answer.get("related").is_none(), "{answer}");
    // Not on later thoughts.
    let mut later = thought(2, 2, false, "garbage collector pauses");
    later["sessionId"] = answer["sessionId"].clone();
    let later = structured(&call(&related, "sequentialthinking", later).await);
    assert!(later.get("related").is_none());
}

/// The index holds what a person or a model said, not the server's own templates: a
/// heuristic booster's candidate sets (its templates around the task) match no search, and
/// a CJK word's characters are marked as one run in a snippet (issue 48).
#[tokio::test]
async fn search_finds_words_people_said_not_our_templates() {
    let dir = data_dir();
    let demo = cli(dir.path(), &["demo"]);
    assert!(demo.status.success(), "{}", stderr(&demo));
    let found = cli_json(
        cli(
            dir.path(),
            &[
                "search", "the", "--kind", "booster", "--limit", "100", "--json",
            ],
        ),
        "search the",
    );
    let types: Vec<&str> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["eventType"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"step_applied"), "{found}");
    assert!(
        !types.contains(&"candidates_scored"),
        "a heuristic candidate set was indexed: {types:?}"
    );

    let client = spawn_with(dir.path(), &["--toolsets", TOOLSETS], &[]).await;
    thinking(&client, &["今日は日本語のテキストを検索する"]).await;
    client.cancel().await.unwrap();
    let found = cli_json(
        cli(dir.path(), &["search", "日本語", "--json"]),
        "search 日本語",
    );
    let snippet = found["matches"][0]["snippet"].as_str().unwrap_or_default();
    assert!(snippet.contains("**日本語**"), "{found}");
    assert!(!snippet.contains("****"), "{found}");
}
