//! The official MCP conformance suite's generic server scenarios, reproduced over
//! `serve --http` as the suite drives them (raw streamable HTTP, an `initialize` session):
//! server-initialize, ping, tools-list, resources-list, logging-set-level,
//! completion-complete, prompts-list, server-sse-multiple-streams. The suite itself
//! (npm, Node 22) runs in `.ci/conformance`; these keep the same checks inside
//! `cargo test`.

use crate::common::data_dir;
use crate::surface::{HttpServer, TOKEN, http_messages};
use serde_json::{Value, json};

/// The protocol version the suite's client speaks.
const SUITE_VERSION: &str = "2025-11-25";

async fn post(
    url: &str,
    session: Option<&str>,
    version: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream, application/json")
        .header("authorization", format!("Bearer {TOKEN}"));
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    if let Some(version) = version {
        request = request.header("mcp-protocol-version", version);
    }
    request.body(body.to_string()).send().await.expect("http")
}

/// An `initialize` session of the suite's client.
struct Session {
    url: String,
    id: String,
    next_id: u64,
}

impl Session {
    /// server-initialize: a valid answer and a session id; then `initialized`.
    async fn open(url: &str) -> Session {
        let response = post(
            url,
            None,
            None,
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": SUITE_VERSION,
                "capabilities": {"sampling": {}, "elicitation": {}},
                "clientInfo": {"name": "conformance-test-client", "version": "1.0.0"}
            }}),
        )
        .await;
        assert_eq!(response.status(), 200);
        let id = response
            .headers()
            .get("mcp-session-id")
            .expect("a session id")
            .to_str()
            .unwrap()
            .to_string();
        let messages = http_messages(&response.text().await.unwrap());
        let result = &messages.last().expect("an answer")["result"];
        assert_eq!(result["protocolVersion"], SUITE_VERSION, "{result}");
        assert_eq!(result["serverInfo"]["name"], "reasoning-ledger", "{result}");
        assert!(result["serverInfo"]["version"].is_string(), "{result}");
        for capability in ["tools", "resources", "prompts", "completions", "logging"] {
            assert!(
                result["capabilities"][capability].is_object(),
                "{capability}: {result}"
            );
        }
        let initialized = post(
            url,
            Some(&id),
            Some(SUITE_VERSION),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        assert_eq!(initialized.status(), 202);
        Session {
            url: url.to_string(),
            id,
            next_id: 1,
        }
    }

    /// One request's result (its error fails the scenario).
    async fn result(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let response = post(
            &self.url,
            Some(&self.id),
            Some(SUITE_VERSION),
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .await;
        assert_eq!(response.status(), 200, "{method}");
        let messages = http_messages(&response.text().await.unwrap());
        let answer = messages
            .into_iter()
            .find(|m| m["id"] == json!(id))
            .unwrap_or_else(|| panic!("{method}: no answer"));
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        answer["result"].clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suites_generic_server_scenarios_pass_over_http() {
    let dir = data_dir();
    let server = HttpServer::start(dir.path(), &[]).await;
    let mut session = Session::open(&server.url).await;

    // ping
    assert_eq!(session.result("ping", json!({})).await, json!({}));

    // tools-list
    let tools = session.result("tools/list", json!({})).await;
    let tools = tools["tools"].as_array().expect("a tools array");
    assert!(!tools.is_empty());
    for tool in tools {
        assert!(
            tool["name"].is_string() && tool["description"].is_string(),
            "{tool}"
        );
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    }

    // resources-list
    let resources = session.result("resources/list", json!({})).await;
    for resource in resources["resources"]
        .as_array()
        .expect("a resources array")
    {
        assert!(
            resource["uri"].is_string() && resource["name"].is_string(),
            "{resource}"
        );
    }

    // logging-set-level: an empty object.
    assert_eq!(
        session
            .result("logging/setLevel", json!({"level": "info"}))
            .await,
        json!({})
    );

    // completion-complete: the suite asks about its own fixture prompt; an unknown
    // reference gets an empty list, not an error.
    let completion = session
        .result(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "test"}}),
        )
        .await;
    assert_eq!(
        completion["completion"]["values"],
        json!([]),
        "{completion}"
    );

    // prompts-list: each with a name and a description.
    let prompts = session.result("prompts/list", json!({})).await;
    let prompts = prompts["prompts"].as_array().expect("a prompts array");
    assert!(!prompts.is_empty());
    for prompt in prompts {
        assert!(prompt["name"].is_string(), "{prompt}");
        assert!(
            prompt["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty()),
            "{prompt}"
        );
    }

    // server-sse-multiple-streams: three concurrent POST streams on one session, each
    // accepted and each carrying its answer.
    let mut streams = tokio::task::JoinSet::new();
    for n in 0..3u64 {
        let url = server.url.clone();
        let id = session.id.clone();
        streams.spawn(async move {
            let body =
                json!({"jsonrpc": "2.0", "id": 1000 + n, "method": "tools/list", "params": {}});
            let response = post(&url, Some(&id), Some("2025-03-26"), &body).await;
            let status = response.status();
            let kind = response
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            (
                n,
                status,
                kind,
                http_messages(&response.text().await.unwrap()),
            )
        });
    }
    while let Some(done) = streams.join_next().await {
        let (n, status, kind, messages) = done.unwrap();
        assert_eq!(status, 200, "stream {n}");
        assert!(
            kind.contains("text/event-stream") || kind.contains("application/json"),
            "{kind}"
        );
        assert!(
            messages
                .iter()
                .any(|m| m["id"] == json!(1000 + n) && m["result"]["tools"].is_array()),
            "stream {n}: {messages:?}"
        );
    }
}
