//! Who wrote it on a team's PostgreSQL ledger (issue 22): two named tokens write one
//! session through `serve --http --store postgres://…` (rmcp's own HTTP client, the
//! `initialize` generation); the rows keep each event's actor, `verify` passes, and a
//! copy into redb exports byte for byte the same.

use crate::common::{Client, bin, call, cli, data_dir, stderr, stdout, structured, thought};
use crate::pg::{self, Schema};
use rmcp::ServiceExt;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// How long the server may take to say where it listens.
const START_LIMIT: Duration = Duration::from_secs(30);

async fn start(dir: &Path, url: &str) -> (tokio::process::Child, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut command = tokio::process::Command::new(bin());
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .args(["--http", "127.0.0.1:0", "--store", url])
        .env("DISABLE_THOUGHT_LOGGING", "true")
        .env_remove("REASONING_LEDGER_STORE")
        .env_remove("REASONING_LEDGER_TOKEN")
        .env_remove("REASONING_LEDGER_TOKENS")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for var in crate::common::PROVIDER_VARS {
        command.env_remove(var);
    }
    let mut child = command.spawn().expect("spawn http server");
    let url = crate::common::http_url_from_stderr(&mut child, START_LIMIT).await;
    (child, url)
}

async fn client(url: &str, token: &str) -> Client {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .auth_header(token.to_string());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize over HTTP")
}

fn ok(output: std::process::Output, what: &str) -> String {
    assert!(output.status.success(), "{what}: {}", stderr(&output));
    stdout(&output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_tokens_on_postgres_keep_each_event_s_actor_through_verify_and_copy() {
    let dir = data_dir();
    let schema = Schema::new();
    let alice = ok(cli(dir.path(), &["token", "add", "alice"]), "token add");
    let bob = ok(cli(dir.path(), &["token", "add", "bob"]), "token add");
    let (_server, url) = start(dir.path(), &schema.url).await;

    let by_alice = client(&url, alice.trim()).await;
    let first = structured(
        &call(
            &by_alice,
            "sequentialthinking",
            thought(1, 2, true, "alice on postgres"),
        )
        .await,
    );
    let session = first["sessionId"].as_str().unwrap().to_string();
    let by_bob = client(&url, bob.trim()).await;
    let mut second = thought(2, 2, false, "bob on postgres");
    second["sessionId"] = json!(session);
    structured(&call(&by_bob, "sequentialthinking", second).await);
    by_alice.cancel().await.unwrap();
    by_bob.cancel().await.unwrap();

    let jsonl = ok(
        pg::cli(
            &schema.url,
            dir.path(),
            &["export", &session, "-f", "jsonl"],
        ),
        "export",
    );
    let actors: Vec<Value> = jsonl
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["actor"].clone())
        .collect();
    assert_eq!(actors, [json!("alice"), json!("alice"), json!("bob")]);
    ok(pg::cli(&schema.url, dir.path(), &["verify"]), "verify");

    // Copied into redb: the same events, byte for byte, and they verify there.
    let copy = data_dir();
    ok(
        pg::cli(
            &schema.url,
            dir.path(),
            &["copy", "--to", copy.path().to_str().unwrap()],
        ),
        "copy",
    );
    assert_eq!(
        ok(
            cli(copy.path(), &["export", &session, "-f", "jsonl"]),
            "export"
        ),
        jsonl
    );
    ok(cli(copy.path(), &["verify"]), "verify the copy");
}
