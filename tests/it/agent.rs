//! The agent toolset over the real binary, against a loopback OpenAI-compatible server
//! (`llm`): every answer shape, every error class of specs/agent.md, retries with
//! Retry-After, the gatekeeper, the node tree across restarts and processes, model calls
//! in the ledger tools and exports, and a canary key that must never be written.

use crate::common::{
    self, Client, call, check_json, cli, is_error, spawn_agent, stdout, structured, text,
};
use crate::llm::{LlmServer, Reply, closed_port_url};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// A canary key: it must reach the provider's Authorization header and nothing else.
pub(crate) const CANARY: &str = "sk-canary-4f1c9e7a2b3d5e6f";

/// The environment pointing the server at `url`, with a short backoff.
fn provider_env(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("REASONING_LEDGER_LLM_BASE_URL", url.to_string()),
        ("REASONING_LEDGER_LLM_MODEL", "loopback-model".to_string()),
        ("REASONING_LEDGER_LLM_BACKOFF_MS", "20".to_string()),
    ]
}

async fn spawn_at(dir: &Path, url: &str, extra: &[(&str, &str)]) -> Client {
    let mut env: Vec<(&str, String)> = provider_env(url);
    env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    spawn_agent(dir, &env, None).await
}

/// Replaces what changes between runs in an answer: node ids, latencies.
fn scrub(value: &Value) -> Value {
    let text = value.to_string();
    let node = regex::Regex::new(r"n_[0-9a-f]{8}").unwrap();
    let text = node.replace_all(&text, "n_<node>");
    let ms = regex::Regex::new(r#""(latency_ms|waited_ms|duration_us)":\d+"#).unwrap();
    let text = ms.replace_all(&text, "\"$1\":0");
    serde_json::from_str(&text).unwrap()
}

/// The error envelope of an error answer.
fn envelope(result: &rmcp::model::CallToolResult) -> Value {
    assert!(is_error(result), "expected an error: {}", text(result));
    serde_json::from_str(&text(result)).expect("the error text is JSON")
}

const ANSWER: &str = "[Analysis]\nThe delete path never touches the cache.\n\n[Final Conclusion]\nThe cache is stale after a delete.\nConfidence: 0.62";

fn branch(session: &str, input: &str) -> Value {
    json!({"session_id": session, "input_text": input})
}

const QUESTION: &str = "Does the cache invalidation cover the delete path of the API?";

#[tokio::test]
async fn chat_agent_and_branches_answer_record_and_survive_a_restart() {
    let llm = LlmServer::start(vec![Reply::completion(ANSWER)]).await;
    let dir = common::data_dir();
    let client = spawn_at(dir.path(), &llm.base_url, &[]).await;

    let chat = call(
        &client,
        "chat_agent",
        json!({"input_text": "Summarise: caches go stale.", "temperature": "0.1", "top_p": 0.1, "max_tokens": 2048, "seed": 42, "stop": ["END"], "session_id": "review-1"}),
    )
    .await;
    let chat = structured(&chat);
    check_json("agent_chat_agent_answer", &scrub(&chat));
    // The request the provider received: the arguments as sent, stop only when given.
    let sent = llm.received()[0].json();
    assert_eq!(sent["model"], "loopback-model");
    assert_eq!(sent["temperature"], 0.1);
    assert_eq!(sent["seed"], 42);
    assert_eq!(sent["stop"], json!(["END"]));

    let first = structured(&call(&client, "create_branch", branch("review-1", QUESTION)).await);
    check_json("agent_create_branch_answer", &scrub(&first));
    assert_eq!(first["conclusion"], "The cache is stale after a delete.");
    assert_eq!(first["confidence"], 0.62);
    assert_eq!(first["remaining_quota"], 15);
    let node = first["node_id"].as_str().unwrap().to_string();
    assert!(
        regex::Regex::new(r"^n_[0-9a-f]{8}$")
            .unwrap()
            .is_match(&node)
    );
    // The branch strategy of drill_down, and the fixed system prompt first.
    let sent = llm.received()[1].json();
    assert_eq!(
        (
            sent["temperature"].clone(),
            sent["top_p"].clone(),
            sent["max_tokens"].clone()
        ),
        (json!(0.2), json!(0.2), json!(2048))
    );
    assert_eq!(sent["messages"][0]["role"], "system");
    assert!(sent.get("stop").is_none());

    let nested = structured(
        &call(
            &client,
            "create_branch",
            json!({"session_id": "review-1", "input_text": "Verify that deletes skip the cache invalidation hook entirely.", "call_type": "verify", "parent_node_id": node}),
        )
        .await,
    );
    assert_eq!(nested["parent_node_id"], json!(node));
    let sent = llm.received()[2].json();
    assert_eq!(
        (sent["temperature"].clone(), sent["top_p"].clone()),
        (json!(0.0), json!(0.1))
    );
    // An unknown call type falls back to drill_down.
    let odd = structured(
        &call(
            &client,
            "create_branch",
            json!({"session_id": "review-1", "input_text": "Look at the eviction policy under heavy write load please.", "call_type": "sideways"}),
        )
        .await,
    );
    assert_eq!(odd["remaining_quota"], 13);
    assert_eq!(llm.received()[3].json()["temperature"], 0.2);

    let details = structured(
        &call(
            &client,
            "get_branch_details",
            json!({"session_id": "review-1", "node_id": node}),
        )
        .await,
    );
    check_json("agent_get_branch_details_answer", &scrub(&details));
    assert_eq!(details["raw_process"], ANSWER);

    // From another process while this one runs, and after a restart.
    let other = spawn_agent(dir.path(), &[], None).await;
    let again = structured(
        &call(
            &other,
            "get_branch_details",
            json!({"session_id": "review-1", "node_id": node}),
        )
        .await,
    );
    assert_eq!(again["raw_process"], ANSWER);
    other.cancel().await.unwrap();
    client.cancel().await.unwrap();
    let client = spawn_agent(dir.path(), &[], None).await;
    let after = structured(
        &call(
            &client,
            "get_branch_details",
            json!({"session_id": "review-1", "node_id": node}),
        )
        .await,
    );
    assert_eq!(after["raw_process"], ANSWER);
    let missing = call(
        &client,
        "get_branch_details",
        json!({"session_id": "review-1", "node_id": "n_00000000"}),
    )
    .await;
    check_json("agent_not_found_envelope", &envelope(&missing));

    // The ledger tools see the session, its nodes and its model calls.
    let sessions = structured(&call(&client, "list_sessions", json!({"kind": "agent"})).await);
    let row = &sessions["sessions"][0];
    assert_eq!(row["modelCalls"], 4);
    assert_eq!(row["branchNodes"], 3);
    assert_eq!(row["promptTokens"], 48);
    let ledger_session = chat["ledger_session_id"].as_str().unwrap();
    let history =
        structured(&call(&client, "get_history", json!({"sessionId": ledger_session})).await);
    let types: Vec<&str> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "session_started",
            "model_call_recorded",
            "model_call_recorded",
            "branch_node_created",
            "model_call_recorded",
            "branch_node_created",
            "model_call_recorded",
            "branch_node_created"
        ]
    );
    let model_call = &history["events"][1]["payload"];
    assert_eq!(model_call["call"]["tool"], "chat_agent");
    assert_eq!(model_call["model_call"]["attempts"][0]["status"], 200);
    let found = structured(
        &call(
            &client,
            "search_history",
            json!({"query": "stale after a delete"}),
        )
        .await,
    );
    assert!(
        found["matches"].as_array().is_some_and(|m| !m.is_empty()),
        "{found}"
    );
    client.cancel().await.unwrap();

    // The Mermaid export draws the tree: trunk, three nodes, each from its parent.
    let mermaid = stdout(&cli(
        dir.path(),
        &["export", ledger_session, "--format", "mermaid"],
    ));
    assert!(
        mermaid.contains("r0 --> g1")
            && mermaid.contains("g1 --> g2")
            && mermaid.contains("r0 --> g3"),
        "{mermaid}"
    );
    assert!(mermaid.contains("verify · confidence 0.62"), "{mermaid}");
    let markdown = stdout(&cli(
        dir.path(),
        &["export", ledger_session, "--format", "markdown"],
    ));
    assert!(
        markdown.contains("## Branch nodes")
            && markdown.contains("## Model calls")
            && markdown.contains("4 calls · 48 prompt + 28 completion tokens"),
        "{markdown}"
    );
    let node_ids = regex::Regex::new(r"n\\?_[0-9a-f]{8}").unwrap();
    let millis = regex::Regex::new(r"\d+ ms\b").unwrap();
    let stable = |text: &str| {
        let text = node_ids.replace_all(text, "n_node");
        millis.replace_all(&text, "<n> ms").into_owned()
    };
    common::check("agent_export_mermaid", &stable(&mermaid));
    common::check("agent_export_markdown", &stable(&markdown));
    // The SVG picture and the HTML page draw the nodes, the nesting and the chat call.
    let svg = stdout(&cli(
        dir.path(),
        &["export", ledger_session, "--format", "svg"],
    ));
    assert_eq!(svg.matches("data-kind=\"agent-node\"").count(), 3, "{svg}");
    assert_eq!(svg.matches("data-kind=\"agent-chat\"").count(), 1, "{svg}");
    assert_eq!(svg.matches("data-edge=\"nests\"").count(), 1, "{svg}");
    let html = stdout(&cli(
        dir.path(),
        &["export", ledger_session, "--format", "html"],
    ));
    assert!(
        html.contains("create_branch · verify · from n_"),
        "the page lists the nodes"
    );
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", common::stderr(&verify));
}

/// Runs one chat_agent call against `script` and returns its error envelope and the
/// recorded model call.
async fn failing_call(script: Vec<Reply>, extra: &[(&str, &str)]) -> (Value, Value, LlmServer) {
    let llm = LlmServer::start(script).await;
    let dir = common::data_dir();
    let client = spawn_at(dir.path(), &llm.base_url, extra).await;
    let result = call(
        &client,
        "chat_agent",
        json!({"input_text": "Say hello.", "session_id": "errors"}),
    )
    .await;
    let envelope = envelope(&result);
    let history =
        structured(&call(&client, "get_history", json!({"sessionId": "agent:errors"})).await);
    let recorded = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "model_call_recorded")
        .expect("the failed call is recorded")["payload"]["model_call"]
        .clone();
    client.cancel().await.unwrap();
    (envelope, recorded, llm)
}

#[tokio::test]
async fn a_429_is_retried_once_after_its_retry_after() {
    let llm = LlmServer::start(vec![
        Reply::status(429, r#"{"error":{"message":"rate limited"}}"#).header("retry-after", "1"),
        Reply::completion("hello"),
    ])
    .await;
    let dir = common::data_dir();
    let client = spawn_at(dir.path(), &llm.base_url, &[]).await;
    let answer = structured(
        &call(
            &client,
            "chat_agent",
            json!({"input_text": "Say hello.", "session_id": "retry"}),
        )
        .await,
    );
    assert_eq!(answer["content"], "hello");
    let received = llm.received();
    assert_eq!(received.len(), 2);
    let gap = received[1].at - received[0].at;
    assert!(gap >= Duration::from_millis(950), "retried after {gap:?}");
    let history =
        structured(&call(&client, "get_history", json!({"sessionId": "agent:retry"})).await);
    let attempts = &history["events"][1]["payload"]["model_call"]["attempts"];
    assert_eq!(attempts.as_array().unwrap().len(), 2);
    assert_eq!(attempts[0]["status"], 429);
    assert_eq!(attempts[0]["retry_after_ms"], 1000);
    assert_eq!(attempts[1]["waited_ms"], 1000);
    check_json(
        "agent_model_call_event_retried",
        &scrub(&history["events"][1]["payload"]),
    );
}

#[tokio::test]
async fn a_retry_after_in_the_body_is_honoured_too() {
    let llm = LlmServer::start(vec![
        Reply::status(429, r#"{"error":{"message":"later","retry_after":0.5}}"#),
        Reply::completion("ok"),
    ])
    .await;
    let dir = common::data_dir();
    let client = spawn_at(dir.path(), &llm.base_url, &[]).await;
    structured(&call(&client, "chat_agent", json!({"input_text": "Say ok."})).await);
    let received = llm.received();
    assert!(received[1].at - received[0].at >= Duration::from_millis(450));
}

#[tokio::test]
async fn five_hundreds_are_retried_three_times_then_reported() {
    let (envelope, recorded, llm) = failing_call(vec![Reply::status(503, "overloaded")], &[]).await;
    assert_eq!(llm.received().len(), 4, "one call and three retries");
    assert_eq!(
        (envelope["type"].as_str(), envelope["action"].as_str()),
        (Some("api"), Some("retry"))
    );
    assert_eq!(envelope["status_code"], 503);
    assert_eq!(recorded["attempts"].as_array().unwrap().len(), 4);
    check_json("agent_error_503", &envelope);
}

#[tokio::test]
async fn a_401_is_reported_without_a_retry() {
    let (envelope, recorded, llm) = failing_call(
        vec![Reply::status(
            401,
            r#"{"error":{"message":"Invalid API key"}}"#,
        )],
        &[],
    )
    .await;
    assert_eq!(llm.received().len(), 1);
    assert_eq!(
        (envelope["type"].as_str(), envelope["action"].as_str()),
        (Some("api"), Some("report"))
    );
    assert_eq!(recorded["attempts"].as_array().unwrap().len(), 1);
    check_json("agent_error_401", &envelope);
}

#[tokio::test]
async fn a_400_asks_to_fix_the_input() {
    let (envelope, _, llm) = failing_call(
        vec![Reply::status(
            400,
            r#"{"error":{"message":"max_tokens is too large"}}"#,
        )],
        &[],
    )
    .await;
    assert_eq!(llm.received().len(), 1);
    assert_eq!(
        (envelope["type"].as_str(), envelope["action"].as_str()),
        (Some("api"), Some("fix_input"))
    );
    assert_eq!(envelope["error"], "max_tokens is too large");
    check_json("agent_error_400", &envelope);
}

#[tokio::test]
async fn a_refused_connection_is_a_network_error() {
    let dir = common::data_dir();
    let client = spawn_at(dir.path(), &closed_port_url(), &[]).await;
    let result = call(&client, "chat_agent", json!({"input_text": "Say hello."})).await;
    let envelope = envelope(&result);
    assert_eq!(
        (envelope["type"].as_str(), envelope["action"].as_str()),
        (Some("network"), Some("retry"))
    );
    assert!(
        envelope["message"].as_str().unwrap().contains("Refused"),
        "{envelope}"
    );
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let (envelope, recorded, _llm) = failing_call(
        vec![Reply::completion("late").delayed(Duration::from_secs(5))],
        &[("REASONING_LEDGER_LLM_TIMEOUT_SECS", "1")],
    )
    .await;
    assert_eq!(
        (envelope["type"].as_str(), envelope["action"].as_str()),
        (Some("network"), Some("retry"))
    );
    assert!(
        envelope["message"].as_str().unwrap().contains("timeout"),
        "{envelope}"
    );
    assert_eq!(recorded["error"]["network"], "timeout");
}

#[tokio::test]
async fn a_body_that_is_not_json_is_reported() {
    let mut reply = Reply::status(200, "<html>gateway</html>");
    reply.headers = vec![("content-type".into(), "text/html".into())];
    let (envelope, _, _llm) = failing_call(vec![reply], &[]).await;
    assert_eq!(envelope["type"], "unknown");
    assert!(
        envelope["message"].as_str().unwrap().contains("not JSON"),
        "{envelope}"
    );
    check_json("agent_error_not_json", &envelope);
}

#[tokio::test]
async fn without_a_provider_or_sampling_the_answer_is_a_config_error() {
    let dir = common::data_dir();
    let client = spawn_agent(dir.path(), &[], None).await;
    let result = call(&client, "create_branch", branch("cfg", QUESTION)).await;
    let envelope = envelope(&result);
    assert_eq!(
        (envelope["type"].as_str(), envelope["action"].as_str()),
        (Some("config"), Some("report"))
    );
    check_json("agent_error_config", &envelope);
    assert!(
        envelope["message"]
            .as_str()
            .unwrap()
            .contains("Set REASONING_LEDGER_LLM_BASE_URL and REASONING_LEDGER_LLM_MODEL"),
        "{envelope}"
    );
    // Nothing is written: no empty agent session per failed call (issue 42), however
    // often it is tried, by either tool.
    let again = call(&client, "create_branch", branch("cfg", QUESTION)).await;
    assert_eq!(self::envelope(&again)["type"], "config");
    let chat = call(&client, "chat_agent", json!({"input_text": QUESTION})).await;
    let chat = self::envelope(&chat);
    assert_eq!(chat["type"], "config", "{chat}");
    assert!(chat.get("session_id").is_none(), "{chat}");
    let sessions = structured(&call(&client, "list_sessions", json!({})).await);
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");
}

#[tokio::test]
async fn the_gatekeeper_refuses_short_input_whole_tasks_and_unknown_parents() {
    let llm = LlmServer::start(vec![Reply::completion(ANSWER)]).await;
    let dir = common::data_dir();
    let client = spawn_at(dir.path(), &llm.base_url, &[]).await;
    let short = envelope(&call(&client, "create_branch", branch("gate", "too short")).await);
    check_json("agent_validation_short", &short);
    for whole in [
        "Please complete the whole task and write every part of the report.",
        "Just output the final answer for the entire migration plan now.",
        "请完成整个任务，包括所有的步骤和细节，最后把结果整理成一份完整的报告给我。",
        "请直接输出最终答案，不需要任何解释，也不需要分析过程，只要一个结论就好。",
        "请从头到尾设计这个系统的架构，包括数据库、缓存、接口和部署的全部方案。",
    ] {
        let refused = envelope(&call(&client, "create_branch", branch("gate", whole)).await);
        assert_eq!(refused["type"], "validation", "{whole}");
        assert!(
            refused["errors"][0]
                .as_str()
                .unwrap()
                .contains("whole task"),
            "{refused}"
        );
    }
    let orphan = envelope(
        &call(
            &client,
            "create_branch",
            json!({"session_id": "gate", "input_text": QUESTION, "parent_node_id": "n_deadbeef"}),
        )
        .await,
    );
    assert!(
        orphan["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("parent_node_id:"),
        "{orphan}"
    );
    let missing = envelope(&call(&client, "chat_agent", json!({"input_text": ""})).await);
    assert_eq!(missing["action"], "fix_input");
    let range = envelope(
        &call(
            &client,
            "chat_agent",
            json!({"input_text": "x", "temperature": 3}),
        )
        .await,
    );
    assert!(
        range["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("temperature:"),
        "{range}"
    );
    assert!(
        llm.received().is_empty(),
        "nothing refused reached the model"
    );
}

#[tokio::test]
async fn the_quota_is_sixteen_nodes_and_failed_calls_do_not_use_it() {
    let llm = LlmServer::start(vec![
        Reply::completion("one"),
        Reply::status(400, r#"{"error":{"message":"bad"}}"#),
        Reply::completion("Final conclusion: fine\nConfidence: 90%"),
    ])
    .await;
    let dir = common::data_dir();
    let client = spawn_at(dir.path(), &llm.base_url, &[]).await;
    let mut remaining = Vec::new();
    let mut failures = 0;
    while remaining.len() < 16 {
        let result = call(&client, "create_branch", branch("quota", QUESTION)).await;
        if is_error(&result) {
            failures += 1;
            continue;
        }
        remaining.push(structured(&result)["remaining_quota"].as_u64().unwrap());
    }
    assert_eq!(failures, 1);
    assert_eq!(remaining, (0..16).rev().collect::<Vec<u64>>());
    let full = envelope(&call(&client, "create_branch", branch("quota", QUESTION)).await);
    assert!(
        full["errors"][0].as_str().unwrap().contains("quota of 16"),
        "{full}"
    );
    check_json("agent_validation_quota", &full);
    assert_eq!(
        llm.received().len(),
        17,
        "the refused call reached no model"
    );
}

#[tokio::test]
async fn a_canary_key_reaches_the_provider_and_nothing_else() {
    let llm = LlmServer::start(vec![
        // A provider that echoes the key back in its error body.
        Reply::status(
            401,
            &format!(r#"{{"error":{{"message":"Incorrect API key provided: {CANARY}"}}}}"#),
        ),
        Reply::status(500, &format!("internal error for Bearer {CANARY}")),
        Reply::completion("fine"),
    ])
    .await;
    let dir = common::data_dir();
    let log = dir.path().join("server-stderr.log");
    let mut env = provider_env(&llm.base_url);
    env.push(("REASONING_LEDGER_LLM_API_KEY", CANARY.to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let client = spawn_agent(dir.path(), &env, Some(&log)).await;
    let mut answers = String::new();
    for _ in 0..3 {
        let result = call(
            &client,
            "chat_agent",
            json!({"input_text": "hello", "session_id": "canary"}),
        )
        .await;
        answers.push_str(&text(&result));
    }
    let session =
        structured(&call(&client, "list_sessions", json!({})).await)["sessions"][0]["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
    client.cancel().await.unwrap();
    // The key was sent where it belongs.
    assert!(
        llm.received()[0]
            .head
            .contains(&format!("authorization: Bearer {CANARY}"))
    );
    // Not in the answers: the provider's error bodies were redacted.
    assert!(answers.contains("[redacted]"), "{answers}");
    assert!(!answers.contains(CANARY), "{answers}");
    for format in ["jsonl", "json", "markdown", "mermaid"] {
        let out = cli(dir.path(), &["export", &session, "--format", format]);
        assert!(out.status.success());
        assert!(
            !stdout(&out).contains(CANARY),
            "{format} export holds the key"
        );
    }
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(
        stderr.contains("DEBUG") || stderr.contains("INFO"),
        "the log was written"
    );
    assert!(!stderr.contains(CANARY), "stderr holds the key");
    // No file of the data directory holds it (nor a part of it long enough to matter).
    let part = &CANARY[CANARY.len() - 12..];
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path == log {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let holds = bytes.windows(part.len()).any(|w| w == part.as_bytes());
        assert!(!holds, "{} holds the key", path.display());
    }
}

#[tokio::test]
async fn parallel_branches_never_pass_the_quota() {
    let llm = LlmServer::start(vec![
        Reply::completion("Final conclusion: yes").delayed(Duration::from_millis(400)),
    ])
    .await;
    let dir = common::data_dir();
    let client = spawn_at(
        dir.path(),
        &llm.base_url,
        &[("REASONING_LEDGER_AGENT_NODE_QUOTA", "2")],
    )
    .await;
    // Four calls at once: all pass the gatekeeper (no node yet), two may be recorded.
    let (a, b, c, d) = tokio::join!(
        call(&client, "create_branch", branch("par", QUESTION)),
        call(&client, "create_branch", branch("par", QUESTION)),
        call(&client, "create_branch", branch("par", QUESTION)),
        call(&client, "create_branch", branch("par", QUESTION)),
    );
    let refused: Vec<Value> = [a, b, c, d]
        .iter()
        .filter(|r| is_error(r))
        .map(envelope)
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    for envelope in &refused {
        assert!(
            envelope["errors"][0]
                .as_str()
                .unwrap()
                .contains("quota of 2"),
            "{envelope}"
        );
    }
    let sessions = structured(&call(&client, "list_sessions", json!({"kind": "agent"})).await);
    assert_eq!(sessions["sessions"][0]["branchNodes"], 2);
    assert_eq!(sessions["sessions"][0]["modelCalls"], 4);
}

#[tokio::test]
async fn suggestions_can_be_the_original_chinese_texts() {
    let llm = LlmServer::start(vec![Reply::completion("[最终结论] 成立。\n置信度：0.9")]).await;
    let dir = common::data_dir();
    let client = spawn_at(
        dir.path(),
        &llm.base_url,
        &[("REASONING_LEDGER_AGENT_LANGUAGE", "zh")],
    )
    .await;
    let node = structured(
        &call(
            &client,
            "create_branch",
            json!({"session_id": "zh", "input_text": QUESTION, "call_type": "explore"}),
        )
        .await,
    );
    assert_eq!(node["conclusion"], "成立。");
    assert_eq!(node["confidence"], 0.9);
    assert_eq!(
        node["suggestions"],
        json!([
            "发散探索完成，可对有价值的方向用 drill_down 深入",
            "还可创建 15 个分支，建议继续多角度探索"
        ])
    );
}

#[tokio::test]
async fn a_providers_file_with_prices_gives_each_call_its_cost() {
    let llm = LlmServer::start(vec![Reply::completion("priced")]).await;
    let dir = common::data_dir();
    std::fs::write(
        dir.path().join("secrets.txt"),
        format!("MY_LOCAL_KEY={CANARY}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("providers.json"),
        json!({
            "name": "priced-local",
            "base_url": llm.base_url,
            "model": "loopback-model",
            "api_key_env": "MY_LOCAL_KEY",
            "prices": {"input_per_million": 1.0, "output_per_million": 2.0}
        })
        .to_string(),
    )
    .unwrap();
    let client = spawn_agent(dir.path(), &[], None).await;
    let answer = structured(
        &call(
            &client,
            "chat_agent",
            json!({"input_text": "Say priced.", "session_id": "cost"}),
        )
        .await,
    );
    assert_eq!(answer["content"], "priced");
    // The key came from secrets.txt; the provider's name from the file.
    assert!(
        llm.received()[0]
            .head
            .contains(&format!("authorization: Bearer {CANARY}"))
    );
    let sessions = structured(&call(&client, "list_sessions", json!({"kind": "agent"})).await);
    let row = &sessions["sessions"][0];
    let expected = (12.0 * 1.0 + 7.0 * 2.0) / 1_000_000.0;
    assert!(
        (row["cost"].as_f64().unwrap() - expected).abs() < 1e-12,
        "{row}"
    );
    let history =
        structured(&call(&client, "get_history", json!({"sessionId": "agent:cost"})).await);
    let model_call = &history["events"][1]["payload"]["model_call"];
    assert_eq!(model_call["provider"], "priced-local");
    assert!(!history.to_string().contains(CANARY));
}
