//! Who wrote it (issue 22): named tokens over `serve --http`, the actor on every event a
//! request writes, in `get_history`, every export and `verify`; revocation without a
//! restart; `REASONING_LEDGER_TOKEN` as `default`; stdio writes no actor.

use crate::common::{bin, cli, data_dir, stderr, stdout, structured, thought};
use crate::surface::{ALL_TOOLSETS, http_messages, meta_2026};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long any one awaited thing may take.
const PATIENCE: Duration = Duration::from_secs(30);

/// The most a revocation may take to be seen by a running server (it looks every second).
const REVOCATION_LIMIT: Duration = Duration::from_secs(10);

/// The shared token of these servers.
const SHARED: &str = "actor-shared-token-of-at-least-32-characters";

/// A `serve --http` server on `dir` with every toolset.
struct Server {
    _child: tokio::process::Child,
    url: String,
}

impl Server {
    async fn start(dir: &Path, shared: Option<&str>) -> Server {
        let mut command = tokio::process::Command::new(bin());
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(dir)
            .args(["--toolsets", ALL_TOOLSETS, "--http", "127.0.0.1:0"])
            .env("DISABLE_THOUGHT_LOGGING", "true")
            .env_remove("REASONING_LEDGER_TOOLSETS")
            .env_remove("REASONING_LEDGER_STORE")
            .env_remove("REASONING_LEDGER_TOKENS")
            .env_remove("REASONING_LEDGER_TOKEN")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        if let Some(token) = shared {
            command.env("REASONING_LEDGER_TOKEN", token);
        }
        let mut child = command.spawn().expect("spawn http server");
        let url = crate::common::http_url_from_stderr(&mut child, PATIENCE).await;
        Server { _child: child, url }
    }

    /// A 2026-07-28 `tools/call` with `token`: the HTTP status and, when answered, the
    /// call's result.
    async fn call(&self, token: &str, tool: &str, arguments: Value) -> (u16, Option<Value>) {
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments, "_meta": meta_2026(None)
        }});
        let response = tokio::time::timeout(
            PATIENCE,
            reqwest::Client::new()
                .post(self.url.as_str())
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("authorization", format!("Bearer {token}"))
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", tool)
                .body(message.to_string())
                .send(),
        )
        .await
        .expect("an answer in time")
        .expect("http");
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        let result = http_messages(&body)
            .into_iter()
            .find(|m| m["id"] == json!(1))
            .map(|m| m["result"].clone());
        (status, result)
    }

    /// [`Server::call`] that must succeed: its structured content.
    async fn ok(&self, token: &str, tool: &str, arguments: Value) -> Value {
        let (status, result) = self.call(token, tool, arguments).await;
        assert_eq!(status, 200, "{tool} with a valid token");
        let result = result.expect("a result");
        assert_ne!(result["isError"], json!(true), "{result}");
        result["structuredContent"].clone()
    }
}

fn add_token(dir: &Path, name: &str) -> String {
    let output = cli(dir, &["token", "add", name]);
    assert!(output.status.success(), "{}", stderr(&output));
    let token = stdout(&output);
    assert_eq!(
        token.lines().count(),
        1,
        "only the token on stdout: {token}"
    );
    assert!(stderr(&output).contains("Authorization: Bearer"));
    token.trim().to_string()
}

fn export(dir: &Path, session: &str, format: &str) -> String {
    let output = cli(dir, &["export", session, "--format", format]);
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_named_tokens_and_the_shared_one_write_and_every_view_says_who() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = data_dir();
    let alice = add_token(dir.path(), "alice");
    let bob = add_token(dir.path(), "bob.b@example.com");

    // The file holds digests, never a token; mode 0600.
    let file = std::fs::read_to_string(dir.path().join("tokens.toml")).unwrap();
    assert!(!file.contains(&alice) && !file.contains(&bob), "{file}");
    assert!(file.contains("[tokens.alice]") && file.contains("sha256 = "));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("tokens.toml"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let listed = stdout(&cli(dir.path(), &["token", "list"]));
    assert!(listed.contains("alice") && listed.contains("bob.b@example.com"));
    assert!(!listed.contains(&alice) && !listed.contains(&bob));
    let output = cli(dir.path(), &["token", "add", "alice"]);
    assert!(!output.status.success(), "a second active alice");
    let output = cli(dir.path(), &["token", "add", "default"]);
    assert!(
        !output.status.success(),
        "the shared token's name is reserved"
    );

    let server = Server::start(dir.path(), Some(SHARED)).await;
    // A wrong token is refused and writes nothing.
    assert_eq!(
        server
            .call(
                "not-a-token",
                "sequentialthinking",
                thought(1, 3, true, "x")
            )
            .await
            .0,
        401
    );

    let first = server
        .ok(
            &alice,
            "sequentialthinking",
            thought(1, 3, true, "alice opens"),
        )
        .await;
    let session = first["sessionId"].as_str().unwrap().to_string();
    let mut second = thought(2, 3, true, "bob continues");
    second["sessionId"] = json!(session);
    server.ok(&bob, "sequentialthinking", second).await;
    let mut third = thought(3, 3, false, "the shared token ends");
    third["sessionId"] = json!(session);
    server.ok(SHARED, "sequentialthinking", third).await;

    // get_history: the actor of every event.
    let history = server
        .ok(&bob, "get_history", json!({"sessionId": session}))
        .await;
    let actors: Vec<(&str, &str)> = history["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["actor"].as_str().unwrap()))
        .collect();
    assert_eq!(
        actors,
        [
            ("session_started", "alice"),
            ("thought_recorded", "alice"),
            ("thought_recorded", "bob.b@example.com"),
            ("thought_recorded", "default"),
        ]
    );

    // Every export says who wrote which thought.
    let markdown = export(dir.path(), &session, "markdown");
    for (text, by) in [
        ("alice opens", "by alice"),
        ("bob continues", "by bob.b@example.com"),
        ("the shared token ends", "by default"),
    ] {
        let at = markdown.rfind(text).expect(text);
        let heading = markdown[..at].rfind("### ").unwrap();
        assert!(markdown[heading..at].contains(by), "{by}: {markdown}");
    }
    let tree: Value = serde_json::from_str(&export(dir.path(), &session, "json")).unwrap();
    let by: Vec<&str> = tree["thoughts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["actor"].as_str().unwrap())
        .collect();
    assert_eq!(by, ["alice", "bob.b@example.com", "default"]);
    assert_eq!(tree["actors"]["1"], json!("alice"));
    let jsonl = export(dir.path(), &session, "jsonl");
    let by: Vec<String> = jsonl
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["actor"].to_string())
        .collect();
    assert_eq!(
        by,
        [
            "\"alice\"",
            "\"alice\"",
            "\"bob.b@example.com\"",
            "\"default\""
        ]
    );
    let svg = export(dir.path(), &session, "svg");
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is XML");
    let drawn: Vec<(String, String)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("data-actor").is_some())
        .map(|n| {
            let title = n
                .children()
                .find(|c| c.has_tag_name("title"))
                .and_then(|t| t.text())
                .unwrap_or_default();
            (
                n.attribute("data-actor").unwrap().to_string(),
                title.to_string(),
            )
        })
        .collect();
    assert_eq!(drawn.len(), 3, "{svg}");
    // The writer is drawn in the node's head line, not only in its tooltip (cut to 16
    // characters there).
    let heads: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("data-actor").is_some())
        .map(|n| {
            let head = n.children().find(|c| c.has_tag_name("text")).unwrap();
            head.descendants()
                .filter(|t| t.is_text())
                .filter_map(|t| t.text())
                .collect()
        })
        .collect();
    assert!(heads[0].ends_with(" · by alice"), "{heads:?}");
    assert!(heads[1].ends_with(" · by bob.b@example.c…"), "{heads:?}");
    assert!(heads[2].ends_with(" · by default"), "{heads:?}");
    assert_eq!(drawn[0], ("alice".into(), "by alice: alice opens".into()));
    assert_eq!(drawn[1].0, "bob.b@example.com");
    assert!(drawn[2].1.starts_with("by default: "));
    let html = export(dir.path(), &session, "html");
    assert!(html.contains("data-actor=\"bob.b@example.com\""));
    assert!(html.contains(" · by bob.b@example.com"));

    let output = cli(dir.path(), &["verify"]);
    assert!(output.status.success(), "{}", stderr(&output));

    // An export with an altered actor does not import: its hash no longer matches.
    let altered = jsonl.replacen("\"actor\":\"bob.b@example.com\"", "\"actor\":\"alice\"", 1);
    assert_ne!(altered, jsonl);
    let other = data_dir();
    let file = other.path().join("altered.jsonl");
    std::fs::write(&file, altered).unwrap();
    let output = cli(other.path(), &["import", file.to_str().unwrap()]);
    assert!(!output.status.success(), "an altered actor imported");
    let file = other.path().join("as-exported.jsonl");
    std::fs::write(&file, &jsonl).unwrap();
    let output = cli(other.path(), &["import", file.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        crate::common::as_imported(&export(other.path(), &session, "jsonl")),
        jsonl
    );

    // Revoking bob: his next call is refused within seconds, without a restart; alice
    // and the shared token keep working.
    let output = cli(dir.path(), &["token", "revoke", "bob.b@example.com"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let revoked = Instant::now();
    loop {
        let (status, _) = server.call(&bob, "list_sessions", json!({})).await;
        if status == 401 {
            break;
        }
        assert_eq!(status, 200);
        assert!(
            revoked.elapsed() < REVOCATION_LIMIT,
            "bob still let in {:?} after the revocation",
            revoked.elapsed()
        );
        tokio::task::yield_now().await;
    }
    server.ok(&alice, "list_sessions", json!({})).await;
    server.ok(SHARED, "list_sessions", json!({})).await;
    let listed = stdout(&cli(dir.path(), &["token", "list", "--json"]));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let bob_row = listed["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == json!("bob.b@example.com"))
        .unwrap()
        .clone();
    assert!(bob_row["revoked"].is_string(), "{listed}");

    // A token added while the server runs is let in without a restart.
    let carol = add_token(dir.path(), "carol");
    let added = Instant::now();
    while server.call(&carol, "list_sessions", json!({})).await.0 != 200 {
        assert!(added.elapsed() < REVOCATION_LIMIT, "carol never let in");
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn named_tokens_alone_make_no_shared_token_and_stdio_writes_no_actor() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = data_dir();
    let alice = add_token(dir.path(), "alice");
    let server = Server::start(dir.path(), None).await;
    assert!(
        !dir.path().join("http-token").exists(),
        "no shared token is generated beside named tokens"
    );
    let answer = server
        .ok(
            &alice,
            "think",
            json!({"thought": "by alice", "thread_purpose": "p", "thought_index": 1}),
        )
        .await;
    let by_alice = answer["sessionId"].as_str().unwrap().to_string();
    drop(server);

    // Over stdio: no actor anywhere, the export as before.
    let client = crate::common::spawn(dir.path()).await;
    let answer = structured(
        &crate::common::call(
            &client,
            "sequentialthinking",
            thought(1, 1, false, "over stdio"),
        )
        .await,
    );
    client.cancel().await.unwrap();
    let session = answer["sessionId"].as_str().unwrap();
    let jsonl = export(dir.path(), session, "jsonl");
    assert!(!jsonl.contains("actor"), "{jsonl}");
    for format in ["markdown", "json", "svg", "html"] {
        let text = export(dir.path(), session, format);
        assert!(
            !text.contains("actor") && !text.contains("· by "),
            "{format}: {text}"
        );
    }
    assert!(export(dir.path(), &by_alice, "jsonl").contains("\"actor\":\"alice\""));
    let output = cli(dir.path(), &["verify"]);
    assert!(output.status.success(), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tokens_file_named_but_missing_stops_the_server_with_its_path() {
    let dir = data_dir();
    let missing = dir.path().join("nowhere.toml");
    let output = std::process::Command::new(bin())
        .arg("--data-dir")
        .arg(dir.path())
        .args(["serve", "--http", "127.0.0.1:0", "--tokens"])
        .arg(&missing)
        .env_remove("REASONING_LEDGER_TOKENS")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(
        text.contains("nowhere.toml") && text.contains("token add"),
        "{text}"
    );
}
