//! MCP sampling over the real binary with no HTTP provider: rmcp's client answers the
//! server's `sampling/createMessage` on an `initialize` session, and fulfils the
//! input-required round trip on a 2026-07-28 (`server/discover`) session. Also: a client
//! that never answers fails the call at the timeout, a tampered request state is
//! refused, and a replayed round records nothing twice.
#![allow(deprecated)] // rmcp marks sampling deprecated (SEP-2577); the protocol has it.

use crate::common;
use crate::common::PROVIDER_VARS;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientInfo,
    CreateMessageRequestParams, CreateMessageResult, ErrorData, Implementation, InputResponses,
    ProtocolVersion, SamplingMessage,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A client whose model answers every sampling request (or never answers).
#[derive(Clone)]
struct SamplingClient {
    answer: String,
    /// Never answer (a client that hangs).
    silent: bool,
    seen: Arc<Mutex<Vec<CreateMessageRequestParams>>>,
}

impl SamplingClient {
    fn new(answer: &str) -> Self {
        SamplingClient {
            answer: answer.to_string(),
            silent: false,
            seen: Arc::default(),
        }
    }
}

impl ClientHandler for SamplingClient {
    fn get_info(&self) -> ClientInfo {
        ClientInfo::new(
            ClientCapabilities::builder().enable_sampling().build(),
            Implementation::new("sampling-test-client", "1"),
        )
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.seen.lock().unwrap().push(params);
        if self.silent {
            std::future::pending::<()>().await;
        }
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(self.answer.clone()),
            "client-model".into(),
        )
        .with_stop_reason(CreateMessageResult::STOP_REASON_END_TURN))
    }
}

fn command(dir: &Path, env: &[(&str, &str)]) -> tokio::process::Command {
    let dir = dir.to_path_buf();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::process::Command::new(common::bin()).configure(|cmd| {
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(&dir)
            .arg("--toolsets")
            .arg("agent,ledger");
        for var in PROVIDER_VARS {
            cmd.env_remove(var);
        }
        for (k, v) in &env {
            cmd.env(k, v);
        }
    })
}

async fn legacy(
    dir: &Path,
    client: SamplingClient,
    env: &[(&str, &str)],
) -> RunningService<RoleClient, SamplingClient> {
    let transport = TokioChildProcess::builder(command(dir, env))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
        .0;
    client.serve(transport).await.expect("initialize")
}

async fn modern(dir: &Path, client: SamplingClient) -> RunningService<RoleClient, SamplingClient> {
    let transport = TokioChildProcess::builder(command(dir, &[]))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
        .0;
    client
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover")
}

fn params(tool: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string()).with_arguments(common::object(arguments))
}

const BRANCH_ANSWER: &str = "[Final Conclusion]\nSampling works.\nConfidence: 0.9";
const QUESTION: &str = "Does the client's own model answer a branch of this session?";

#[tokio::test]
async fn an_initialize_session_samples_through_create_message() {
    let dir = common::data_dir();
    let handler = SamplingClient::new(BRANCH_ANSWER);
    let seen = handler.seen.clone();
    let client = legacy(dir.path(), handler, &[]).await;
    let result = client
        .call_tool(params(
            "create_branch",
            json!({"session_id": "s1", "input_text": QUESTION, "call_type": "verify"}),
        ))
        .await
        .unwrap();
    let answer = common::structured(&result);
    assert_eq!(answer["conclusion"], "Sampling works.");
    assert_eq!(answer["confidence"], 0.9);
    let request = seen.lock().unwrap()[0].clone();
    assert_eq!(request.temperature, Some(0.0));
    assert_eq!(request.max_tokens, 2048);
    assert!(
        request
            .system_prompt
            .unwrap()
            .contains("[Final Conclusion]")
    );
    let chat = common::structured(
        &client
            .call_tool(params(
                "chat_agent",
                json!({"input_text": "hi", "session_id": "s1"}),
            ))
            .await
            .unwrap(),
    );
    assert_eq!(chat["model"], "client-model");
    let history = common::structured(
        &client
            .call_tool(params("get_history", json!({"sessionId": "agent:s1"})))
            .await
            .unwrap(),
    );
    let call = &history["events"][1]["payload"]["model_call"];
    assert_eq!(
        (call["provider"].as_str(), call["transport"].as_str()),
        (Some("mcp-sampling"), Some("sampling"))
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_client_that_never_answers_fails_the_call_at_the_timeout() {
    let dir = common::data_dir();
    let mut handler = SamplingClient::new("never");
    handler.silent = true;
    let client = legacy(
        dir.path(),
        handler,
        &[("REASONING_LEDGER_SAMPLING_TIMEOUT_SECS", "1")],
    )
    .await;
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        client.call_tool(params("chat_agent", json!({"input_text": "hi"}))),
    )
    .await
    .expect("the call ends")
    .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    let envelope: Value = serde_json::from_str(&common::text(&result)).unwrap();
    assert_eq!(envelope["type"], "unknown");
    assert!(
        envelope["message"]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{envelope}"
    );
    // The server still serves.
    let list = client
        .call_tool(params("list_sessions", json!({})))
        .await
        .unwrap();
    assert!(!common::is_error(&list));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_2026_session_samples_through_input_required_rounds() {
    let dir = common::data_dir();
    let handler = SamplingClient::new(BRANCH_ANSWER);
    let seen = handler.seen.clone();
    let client = modern(dir.path(), handler).await;
    // rmcp's client drives the rounds itself.
    let result = client
        .call_tool(params(
            "create_branch",
            json!({"session_id": "m1", "input_text": QUESTION}),
        ))
        .await
        .unwrap();
    let answer = common::structured(&result);
    assert_eq!(answer["conclusion"], "Sampling works.");
    assert_eq!(seen.lock().unwrap().len(), 1);
    let history = common::structured(
        &client
            .call_tool(params("get_history", json!({"sessionId": "agent:m1"})))
            .await
            .unwrap(),
    );
    let call = &history["events"][1]["payload"]["model_call"];
    assert_eq!(call["transport"], "sampling-input-required");
    assert_eq!(history["events"].as_array().unwrap().len(), 3);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn request_states_are_sealed_rounds_repeat_the_request_and_replays_record_once() {
    let dir = common::data_dir();
    let client = modern(dir.path(), SamplingClient::new(BRANCH_ANSWER)).await;
    let arguments = json!({"session_id": "m2", "input_text": QUESTION});
    let round = |state: Option<String>, responses: Option<InputResponses>| {
        let mut p = params("create_branch", arguments.clone());
        p.request_state = state;
        p.input_responses = responses;
        p
    };
    let first = match client.call_tool_once(round(None, None)).await.unwrap() {
        CallToolResponse::InputRequired(required) => required,
        other => panic!("expected input required, got {other:?}"),
    };
    let state = first.request_state.clone().unwrap();
    let asked = serde_json::to_value(&first.input_requests).unwrap();
    // Without an answer, the same request again (same state).
    let again = match client
        .call_tool_once(round(Some(state.clone()), None))
        .await
        .unwrap()
    {
        CallToolResponse::InputRequired(required) => required,
        other => panic!("{other:?}"),
    };
    assert_eq!(serde_json::to_value(&again.input_requests).unwrap(), asked);
    let answer: InputResponses = [(
        "sampling".to_string(),
        serde_json::to_value(CreateMessageResult::new(
            SamplingMessage::assistant_text(BRANCH_ANSWER),
            "m".into(),
        ))
        .unwrap(),
    )]
    .into();
    // A tampered state is refused and records nothing.
    let mut tampered = state.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let refused = client
        .call_tool_once(round(Some(tampered), Some(answer.clone())))
        .await
        .unwrap();
    let CallToolResponse::Complete(refused) = refused else {
        panic!("{refused:?}")
    };
    assert!(
        common::text(&refused).contains("requestState"),
        "{}",
        common::text(&refused)
    );
    // The state with other arguments is refused too.
    let mut other = params(
        "create_branch",
        json!({"session_id": "m2", "input_text": format!("{QUESTION} Other.")}),
    );
    other.request_state = Some(state.clone());
    other.input_responses = Some(answer.clone());
    let CallToolResponse::Complete(other) = client.call_tool_once(other).await.unwrap() else {
        panic!()
    };
    assert!(common::is_error(&other));
    // The real answer records the node; sent again, it records nothing more.
    let CallToolResponse::Complete(done) = client
        .call_tool_once(round(Some(state.clone()), Some(answer.clone())))
        .await
        .unwrap()
    else {
        panic!()
    };
    let done = common::structured(&done);
    let CallToolResponse::Complete(replay) = client
        .call_tool_once(round(Some(state), Some(answer)))
        .await
        .unwrap()
    else {
        panic!()
    };
    let replay = common::structured(&replay);
    assert_eq!(replay["node_id"], done["node_id"]);
    let history = common::structured(
        &client
            .call_tool(params("get_history", json!({"sessionId": "agent:m2"})))
            .await
            .unwrap(),
    );
    let types: Vec<&str> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    // The two refused rounds are recorded as failed model calls (no quota used), the
    // answered round once.
    assert_eq!(
        types,
        [
            "session_started",
            "model_call_recorded",
            "model_call_recorded",
            "model_call_recorded",
            "branch_node_created"
        ]
    );
    for refused in &history["events"].as_array().unwrap()[1..3] {
        assert_eq!(
            refused["payload"]["model_call"]["error"]["kind"], "sampling",
            "{refused}"
        );
    }
    client.cancel().await.unwrap();
}
