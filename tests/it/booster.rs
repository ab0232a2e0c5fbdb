//! The booster toolset over the real binary: every answer shape (snapshots), heuristic
//! runs that are deterministic and keep progressing, a beam triggered by a stall, loop
//! detection and backtracking, a loopback model answering JSON, fenced JSON, prose,
//! garbage and `<think>` blocks, MCP sampling in both protocol generations, progress
//! notifications, cancellation, a restart mid-solve, `outputPath` attacks, replay and
//! the Mermaid export, and a solve against the real local model.
#![allow(deprecated)] // rmcp marks sampling deprecated (SEP-2577); the protocol has it.

use crate::common::PROVIDER_VARS;
use crate::common::{
    self, Client, call, check, check_json, cli, is_error, stdout, structured, text,
};
use crate::llm::{LlmServer, Reply};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientInfo, CreateMessageRequestParams,
    CreateMessageResult, ErrorData, Implementation, ProtocolVersion, SamplingMessage,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const TASK: &str = "Find the counterfeit among 12 coins using a balance scale in as few steps as possible (3 weighings).";

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
            .arg("booster,ledger,export");
        cmd.env("DISABLE_THOUGHT_LOGGING", "true");
        cmd.env_remove("REASONING_LEDGER_EXPORT_DIR");
        for var in PROVIDER_VARS {
            cmd.env_remove(var);
        }
        for (k, v) in &env {
            cmd.env(k, v);
        }
    })
}

/// The server with the booster, ledger and export toolsets, no provider unless `env` sets
/// one.
async fn spawn(dir: &Path, env: &[(&str, &str)]) -> Client {
    let transport = TokioChildProcess::builder(command(dir, env))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn server")
        .0;
    ().serve(transport).await.expect("initialize")
}

/// Environment pointing the provider layer at a loopback server.
fn model_env(server: &LlmServer) -> Vec<(&'static str, String)> {
    vec![
        ("REASONING_LEDGER_LLM_BASE_URL", server.base_url.clone()),
        ("REASONING_LEDGER_LLM_MODEL", "loopback-model".into()),
        ("REASONING_LEDGER_LLM_BACKOFF_MS", "5".into()),
    ]
}

fn pairs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn step_texts(state: &Value) -> Vec<String> {
    state["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap().to_string())
        .collect()
}

/// The answer of `solve` with everything that differs between runs replaced.
fn normalized(answer: &Value) -> String {
    common::normalize(&serde_json::to_string_pretty(answer).unwrap())
}

#[tokio::test]
async fn a_heuristic_solve_gives_eight_distinct_task_steps_and_is_deterministic() {
    let mut answers = Vec::new();
    for _ in 0..2 {
        let dir = common::data_dir();
        let client = spawn(dir.path(), &[]).await;
        let result = call(&client, "solve", json!({"task": TASK})).await;
        assert!(!is_error(&result), "{}", text(&result));
        answers.push(structured(&result));
        client.cancel().await.unwrap();
    }
    let answer = &answers[0];
    let steps = step_texts(answer);
    assert_eq!(steps.len(), 8, "{steps:#?}");
    let mut unique = steps.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 8, "eight distinct steps: {steps:#?}");
    for step in &steps {
        let lower = step.to_lowercase();
        assert!(
            [
                "counterfeit",
                "coins",
                "balance",
                "scale",
                "weighings",
                "steps"
            ]
            .iter()
            .any(|k| lower.contains(k)),
            "a step about the task: {step}"
        );
    }
    assert!(
        answer["summary"]
            .as_str()
            .unwrap()
            .starts_with("Summary:\nTask: Find the counterfeit")
    );
    assert_eq!(answer["diagnostics"]["provider"], "heuristic");
    assert_eq!(answer["diagnostics"]["totalCalls"], 0);
    assert_eq!(
        normalized(&answers[0]),
        normalized(&answers[1]),
        "deterministic"
    );
    check_json("booster_solve_heuristic", answer);
}

/// The "Thought n/N" headings of a session's Markdown export.
async fn step_headings(client: &Client, id: &str) -> Vec<String> {
    let markdown = text(
        &call(
            client,
            "export_session",
            json!({"sessionId": id, "format": "markdown"}),
        )
        .await,
    );
    markdown
        .lines()
        .filter_map(|line| line.split_once("Thought ").map(|(_, n)| n.to_string()))
        .collect()
}

/// A solve numbers its steps against the iterations it set out to run, a stepped session
/// against its steps so far; never against `maxSteps`, which is a cap, not a plan.
#[tokio::test]
async fn steps_are_numbered_against_the_plan_not_the_cap() {
    let dir = common::data_dir();
    let client = spawn(dir.path(), &[]).await;
    let solved = structured(&call(&client, "solve", json!({"task": TASK, "iterations": 4})).await);
    let id = solved["sessionId"].as_str().unwrap();
    assert_eq!(
        step_headings(&client, id).await,
        ["1/4", "2/4", "3/4", "4/4"]
    );

    let started = structured(&call(&client, "start", json!({"task": TASK})).await);
    let id = started["sessionId"].as_str().unwrap();
    for _ in 0..2 {
        let stepped = call(&client, "step", json!({"sessionId": id})).await;
        assert!(!is_error(&stepped), "{}", text(&stepped));
    }
    assert_eq!(step_headings(&client, id).await, ["1/2", "2/2"]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_answer_shape() {
    let dir = common::data_dir();
    let client = spawn(dir.path(), &[]).await;
    let usage = structured(&call(&client, "usage", json!({})).await);
    assert_eq!(usage["recommended"], "solve");
    check_json(
        "booster_usage",
        &structured(&call(&client, "usage", json!({"topic": "config"})).await),
    );
    let started = structured(
        &call(
            &client,
            "start",
            json!({"task": TASK, "config": {"numCandidates": "3", "topM": 2}, "seedHints": ["Weigh 1,2,3,4 vs 5,6,7,8."]}),
        )
        .await,
    );
    check_json("booster_start", &started);
    let id = started["sessionId"].as_str().unwrap().to_string();
    let step = call(&client, "step", json!({"sessionId": id})).await;
    assert_eq!(step.content.len(), 2, "JSON then `chosen: …`");
    let chosen = structured(&step)["chosen"]["proposal"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(text_block(&step, 1), format!("chosen: {chosen}"));
    check_json("booster_step", &structured(&step));
    let multi = structured(
        &call(
            &client,
            "multi-step",
            json!({"sessionId": id, "iterations": "2", "addHints": "Record each weighing"}),
        )
        .await,
    );
    check_json("booster_multi_step", &multi);
    check_json(
        "booster_get_state",
        &structured(&call(&client, "get-state", json!({"sessionId": id})).await),
    );
    check_json(
        "booster_summarize",
        &structured(&call(&client, "summarize", json!({"sessionId": id})).await),
    );
    let solved = call(&client, "solve-text", json!({"task": "Plan a 3-step experiment to test whether caffeine improves typing speed.", "iterations": 3})).await;
    let summary = text_block(&solved, 0);
    assert!(
        summary.starts_with("Summary:\nTask: Plan a 3-step experiment"),
        "{summary}"
    );
    assert_eq!(structured(&solved)["summary"], summary.as_str());

    // Refusals: clear, nothing written.
    for (tool, args, wanted) in [
        (
            "step",
            json!({"sessionId": "nope"}),
            "no booster session \"nope\"",
        ),
        ("start", json!({"task": " "}), "non-empty task"),
        (
            "start",
            json!({"task": "x", "config": {"numCandidate": 3}}),
            "unknown key \"numCandidate\"",
        ),
        (
            "solve",
            json!({"task": "x", "iterations": 20}),
            "more than config.maxSteps 16",
        ),
        (
            "multi-step",
            json!({"sessionId": id, "iterations": 14}),
            "at most 13 more",
        ),
        ("usage", json!({"topic": "weather"}), "unknown topic"),
        (
            "solve",
            json!({"task": "x", "outputFormat": "xml"}),
            "use json or text",
        ),
    ] {
        let result = call(&client, tool, args).await;
        assert!(is_error(&result), "{tool} accepted");
        assert!(text(&result).contains(wanted), "{tool}: {}", text(&result));
    }
    let sessions = structured(&call(&client, "list_sessions", json!({"kind": "booster"})).await);
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        2,
        "{sessions}"
    );
    client.cancel().await.unwrap();
}

fn text_block(result: &rmcp::model::CallToolResult, index: usize) -> String {
    result.content[index]
        .as_text()
        .map(|t| t.text.clone())
        .expect("a text block")
}

#[tokio::test]
async fn a_stall_runs_the_beam_and_a_repeat_backtracks_as_events() {
    let dir = common::data_dir();
    let client = spawn(dir.path(), &[]).await;
    // minImprovement above any gain: every iteration after the first stalls.
    let started = structured(
        &call(
            &client,
            "start",
            json!({"task": TASK, "config": {"beamWidth": 2, "beamDepth": 3, "minImprovement": 5}}),
        )
        .await,
    );
    let id = started["sessionId"].as_str().unwrap().to_string();
    let first = structured(&call(&client, "step", json!({"sessionId": id})).await);
    assert!(first.get("beam").is_none(), "no last step, no stall");
    let second = structured(&call(&client, "step", json!({"sessionId": id})).await);
    let beam = &second["beam"];
    assert_eq!(beam["heads"].as_array().unwrap().len(), 2, "{second:#}");
    assert_eq!(beam["heads"][0]["path"].as_array().unwrap().len(), 2);
    let state = structured(&call(&client, "get-state", json!({"sessionId": id})).await);
    assert_eq!(state["history"][1]["chosen"]["via"], "beam");
    let history = structured(
        &call(
            &client,
            "get_history",
            json!({"sessionId": id, "kinds": ["beam_rolled_out"]}),
        )
        .await,
    );
    assert_eq!(
        history["events"].as_array().unwrap().len(),
        1,
        "{history:#}"
    );

    // One candidate per iteration, a hint offered twice: the second is a loop.
    let started = structured(
        &call(&client, "start", json!({"task": TASK, "config": {"numCandidates": 1, "topM": 1}, "seedHints": ["Weigh coins 1,2,3,4 against 5,6,7,8."]})).await,
    );
    let id = started["sessionId"].as_str().unwrap().to_string();
    call(
        &client,
        "multi-step",
        json!({"sessionId": id, "iterations": 2}),
    )
    .await;
    let looped = structured(
        &call(
            &client,
            "step",
            json!({"sessionId": id, "addHints": ["Weigh coins 1,2,3,4 against 5,6,7,8."]}),
        )
        .await,
    );
    assert_eq!(looped["backtracked"]["kind"], "loop", "{looped:#}");
    assert_eq!(looped["backtracked"]["repeatsStep"], 1);
    assert_eq!(
        looped["state"]["steps"].as_array().unwrap().len(),
        2,
        "the repeat left the scratchpad"
    );
    assert_eq!(looped["state"]["backtracks"], 1);
    // Nothing deleted: the step and the backtrack are both events.
    let history = structured(
        &call(
            &client,
            "get_history",
            json!({"sessionId": id, "kinds": ["step_applied", "backtracked"]}),
        )
        .await,
    );
    let kinds: Vec<&str> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "step_applied",
            "step_applied",
            "step_applied",
            "backtracked"
        ]
    );

    // Backtracking off: detected, kept.
    let started = structured(
        &call(&client, "start", json!({"task": TASK, "config": {"numCandidates": 1, "topM": 1, "allowBacktrack": false}, "seedHints": ["Weigh coins 1 and 2."]})).await,
    );
    let id = started["sessionId"].as_str().unwrap().to_string();
    call(&client, "step", json!({"sessionId": id})).await;
    let kept = structured(
        &call(
            &client,
            "step",
            json!({"sessionId": id, "addHints": ["Weigh coins 1 and 2."]}),
        )
        .await,
    );
    assert_eq!(kept["loopDetected"]["kind"], "stagnation", "{kept:#}");
    assert_eq!(kept["state"]["steps"].as_array().unwrap().len(), 2);
    client.cancel().await.unwrap();
    let verify = cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", common::stderr(&verify));
}

const JSON_ANSWER: &str = r#"[{"text": "Weigh coins 1,2,3,4 against 5,6,7,8 on the balance scale", "rationale": "thirds", "how_to_verify": "If balanced then 9-12; left tilt or right tilt", "expected_outcomes": ["balanced", "left", "right"]}, {"text": "Label the coins 1 to 12"}]"#;

#[tokio::test]
async fn model_answers_in_every_shape_are_parsed_and_garbage_falls_back() {
    let fenced = format!("Here are the steps:\n```json\n{JSON_ANSWER}\n```\nGood luck.");
    let prose = "1. Weigh coins 9, 10, 11 against 1, 2, 3 on the scale\n   How to verify: see which pan tilts\n2. Record which side tilted\n- Final step: name the counterfeit coin";
    let think = format!("<think>[{{\"text\": \"hidden thought\"}}]</think>\n{JSON_ANSWER}");
    let server = LlmServer::start(vec![
        Reply::completion(JSON_ANSWER),
        Reply::completion(&fenced),
        Reply::completion(prose),
        Reply::completion(
            "I am just a small model and I like turtles.\nFinal answer: coin 7 is light.",
        ),
        Reply::completion(&think),
    ])
    .await;
    let dir = common::data_dir();
    let env = model_env(&server);
    let client = spawn(dir.path(), &pairs(&env)).await;
    let started = structured(
        &call(
            &client,
            "start",
            json!({"task": TASK, "config": {"numCandidates": 3}}),
        )
        .await,
    );
    let id = started["sessionId"].as_str().unwrap().to_string();
    let multi = call(
        &client,
        "multi-step",
        json!({"sessionId": id, "iterations": 5}),
    )
    .await;
    assert!(!is_error(&multi), "{}", text(&multi));
    let state = structured(&call(&client, "get-state", json!({"sessionId": id})).await);
    let history = state["history"].as_array().unwrap();
    let parsers: Vec<&str> = history
        .iter()
        .map(|h| h["model"]["parser"].as_str().unwrap())
        .collect();
    assert_eq!(
        parsers,
        vec!["json", "fenced", "prose", "none", "json"],
        "{state:#}"
    );
    assert!(
        history[3]["source"]["fallback"]
            .as_str()
            .unwrap()
            .contains("no usable step")
    );
    for h in history {
        assert_eq!(
            h["candidates"].as_array().unwrap().len(),
            2,
            "top M of a full set"
        );
        assert_eq!(h["source"]["provider"], "custom", "{h:#}");
    }
    // The <think> block never became a candidate (its text is only in the raw sample).
    let candidates =
        serde_json::to_string(&history.iter().map(|h| &h["candidates"]).collect::<Vec<_>>())
            .unwrap();
    assert!(!candidates.contains("hidden thought"));
    assert_eq!(state["diagnostics"]["totalCalls"], 5);
    assert_eq!(
        state["diagnostics"]["rawSamples"].as_array().unwrap().len(),
        5
    );
    assert_eq!(
        state["arbiterPicks"],
        json!(["Final answer: coin 7 is light."])
    );
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
        5,
        "every model call recorded"
    );
    assert_eq!(server.received().len(), 5);

    // llmMaxCalls: two calls, then heuristics.
    let started = structured(
        &call(
            &client,
            "start",
            json!({"task": TASK, "config": {"llmMaxCalls": 2}}),
        )
        .await,
    );
    let capped = started["sessionId"].as_str().unwrap().to_string();
    call(
        &client,
        "multi-step",
        json!({"sessionId": capped, "iterations": 3}),
    )
    .await;
    let state = structured(&call(&client, "get-state", json!({"sessionId": capped})).await);
    assert_eq!(state["diagnostics"]["totalCalls"], 2);
    assert_eq!(state["history"][2]["source"]["provider"], "heuristic");
    assert!(
        state["history"][2]["source"]["fallback"]
            .as_str()
            .unwrap()
            .contains("llmMaxCalls (2) reached")
    );
    assert_eq!(server.received().len(), 7);
    client.cancel().await.unwrap();
}

/// A client whose model answers every sampling request.
#[derive(Clone)]
struct SamplingClient {
    answer: String,
    seen: Arc<Mutex<usize>>,
}

impl ClientHandler for SamplingClient {
    fn get_info(&self) -> ClientInfo {
        ClientInfo::new(
            ClientCapabilities::builder().enable_sampling().build(),
            Implementation::new("booster-sampling-client", "1"),
        )
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        *self.seen.lock().unwrap() += 1;
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(self.answer.clone()),
            "client-model".into(),
        )
        .with_stop_reason(CreateMessageResult::STOP_REASON_END_TURN))
    }
}

fn params(tool: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool.to_string()).with_arguments(common::object(arguments))
}

#[tokio::test]
async fn mcp_sampling_in_both_protocol_generations() {
    // initialize: sampling/createMessage for every iteration.
    let dir = common::data_dir();
    let handler = SamplingClient {
        answer: JSON_ANSWER.into(),
        seen: Arc::default(),
    };
    let seen = handler.seen.clone();
    let transport = TokioChildProcess::builder(command(dir.path(), &[]))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
        .0;
    let client: RunningService<RoleClient, SamplingClient> =
        handler.serve(transport).await.unwrap();
    let solved = client
        .call_tool(params("solve", json!({"task": TASK, "iterations": 2})))
        .await
        .unwrap();
    let answer = structured(&solved);
    assert_eq!(
        answer["diagnostics"]["provider"], "mcp-sampling",
        "{answer:#}"
    );
    assert_eq!(answer["diagnostics"]["totalCalls"], 2);
    assert_eq!(
        answer["steps"][0]["text"],
        "Weigh coins 1,2,3,4 against 5,6,7,8 on the balance scale"
    );
    assert_eq!(*seen.lock().unwrap(), 2);
    client.cancel().await.unwrap();

    // 2026-07-28: step samples through an input-required round; multi-iteration tools
    // use heuristics (one model call per tool call there).
    let dir = common::data_dir();
    let handler = SamplingClient {
        answer: JSON_ANSWER.into(),
        seen: Arc::default(),
    };
    let seen = handler.seen.clone();
    let transport = TokioChildProcess::builder(command(dir.path(), &[]))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
        .0;
    let client = handler
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover");
    let started = structured(
        &client
            .call_tool(params("start", json!({"task": TASK})))
            .await
            .unwrap(),
    );
    let id = started["sessionId"].as_str().unwrap().to_string();
    let step = structured(
        &client
            .call_tool(params("step", json!({"sessionId": id})))
            .await
            .unwrap(),
    );
    assert_eq!(
        step["chosen"]["proposal"]["text"],
        "Weigh coins 1,2,3,4 against 5,6,7,8 on the balance scale",
        "{step:#}"
    );
    assert_eq!(*seen.lock().unwrap(), 1);
    let solved = structured(
        &client
            .call_tool(params("solve", json!({"task": TASK, "iterations": 2})))
            .await
            .unwrap(),
    );
    assert_eq!(solved["diagnostics"]["provider"], "heuristic");
    let state = structured(
        &client
            .call_tool(params("get-state", json!({"sessionId": id})))
            .await
            .unwrap(),
    );
    assert_eq!(
        state["history"][0]["model"]["transport"], "sampling-input-required",
        "{state:#}"
    );
    assert_eq!(
        state["history"].as_array().unwrap().len(),
        1,
        "the round recorded once"
    );
    client.cancel().await.unwrap();
}

/// The server on raw pipes, for progress tokens, cancellation and kill -9.
struct Raw {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: BufReader<tokio::process::ChildStdout>,
    /// The server's stderr lines, read as they come (only from `start_logging`).
    stderr: Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
}

impl Raw {
    async fn start(dir: &Path, env: &[(&str, &str)]) -> Raw {
        Raw::started(dir, env, None).await
    }

    /// `start`, with `RUST_LOG` set to `log` and the server's stderr kept for
    /// `stderr_line`.
    async fn start_logging(dir: &Path, env: &[(&str, &str)], log: &str) -> Raw {
        Raw::started(dir, env, Some(log)).await
    }

    async fn started(dir: &Path, env: &[(&str, &str)], log: Option<&str>) -> Raw {
        let mut command = command(dir, env);
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        match log {
            Some(log) => command
                .env("RUST_LOG", log)
                .stderr(std::process::Stdio::piped()),
            None => command.stderr(std::process::Stdio::null()),
        };
        let mut child = command.spawn().unwrap();
        // Drained all along, so the server never blocks on a full pipe.
        let stderr = child.stderr.take().map(|pipe| {
            let (lines_tx, lines_rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(async move {
                let mut lines = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if lines_tx.send(line).is_err() {
                        break;
                    }
                }
            });
            lines_rx
        });
        let mut raw = Raw {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            stderr,
        };
        raw.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "booster-raw", "version": "1"}}}),
        )
        .await;
        let answer = raw.next().await;
        assert_eq!(answer["id"], 0, "{answer}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        raw
    }

    /// Waits (at most 60 s) for a line on the server's stderr containing `needle`.
    async fn stderr_line(&mut self, needle: &str) -> String {
        let lines = self.stderr.as_mut().expect("started with start_logging");
        tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let line = lines.recv().await.expect("the server closed stderr");
                if line.contains(needle) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no stderr line with {needle:?} within 60 s"))
    }

    async fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let mut line = String::new();
        let read = tokio::time::timeout(Duration::from_secs(60), self.stdout.read_line(&mut line))
            .await
            .expect("a message within 60 s")
            .unwrap();
        assert!(read > 0, "the server closed stdout");
        serde_json::from_str(&line).expect("JSON-RPC on stdout")
    }

    async fn call(&mut self, id: u64, tool: &str, arguments: Value, token: Option<&str>) {
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(token) = token {
            params["_meta"] = json!({"progressToken": token});
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
            .await;
    }

    /// Messages until the answer to `id`: (progress notifications, the answer).
    async fn until_answer(&mut self, id: u64) -> (Vec<Value>, Value) {
        let mut progress = Vec::new();
        loop {
            let message = self.next().await;
            if message["method"] == "notifications/progress" {
                progress.push(message["params"].clone());
            } else if message["id"] == id {
                return (progress, message);
            }
        }
    }
}

#[tokio::test]
async fn progress_notifications_per_iteration_only_when_asked() {
    let dir = common::data_dir();
    let mut raw = Raw::start(dir.path(), &[]).await;
    raw.call(
        1,
        "solve",
        json!({"task": TASK, "iterations": 4}),
        Some("solve-1"),
    )
    .await;
    let (progress, answer) = raw.until_answer(1).await;
    let id = answer["result"]["structuredContent"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let counts: Vec<(f64, f64)> = progress
        .iter()
        .map(|p| {
            (
                p["progress"].as_f64().unwrap(),
                p["total"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counts, vec![(1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (4.0, 4.0)]);
    assert!(progress.iter().all(|p| p["progressToken"] == "solve-1"));
    assert!(
        progress[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("iteration 1/4: ")
    );
    raw.call(
        2,
        "multi-step",
        json!({"sessionId": id, "iterations": 2}),
        Some(" ms"),
    )
    .await;
    let (progress, _) = raw.until_answer(2).await;
    assert_eq!(progress.len(), 2);
    raw.call(
        3,
        "multi-step",
        json!({"sessionId": id, "iterations": 2}),
        None,
    )
    .await;
    let (progress, answer) = raw.until_answer(3).await;
    assert!(progress.is_empty(), "no token, no progress");
    assert_eq!(
        answer["result"]["structuredContent"]["state"]["iterations"],
        8
    );
}

/// Iterations a booster session recorded, read by another process.
fn iterations_in(dir: &Path) -> (String, Value) {
    let out = cli(dir, &["sessions", "--json"]);
    let listed: Value =
        serde_json::from_str(&stdout(&out)).unwrap_or_else(|_| panic!("{}", stdout(&out)));
    let sessions = listed
        .as_array()
        .cloned()
        .or_else(|| listed["sessions"].as_array().cloned())
        .unwrap();
    let id = sessions
        .iter()
        .find(|s| s["kind"] == "booster")
        .and_then(|s| s["id"].as_str().or(s["sessionId"].as_str()))
        .expect("a booster session")
        .to_string();
    let replay = cli(dir, &["export", &id, "--format", "json"]);
    let tree: Value = serde_json::from_str(&stdout(&replay)).unwrap();
    (id, tree["booster"].clone())
}

#[tokio::test]
async fn a_cancelled_solve_stops_at_the_next_iteration_with_its_record_intact() {
    let server = LlmServer::start(vec![
        Reply::completion(JSON_ANSWER).delayed(Duration::from_millis(300)),
    ])
    .await;
    let env = model_env(&server);
    let dir = common::data_dir();
    // rmcp logs (at debug) when the handler of a cancelled request has answered and its
    // answer is dropped: the solve has returned, so nothing more can be recorded.
    let mut raw = Raw::start_logging(dir.path(), &pairs(&env), "rmcp::service=debug").await;
    raw.call(
        1,
        "solve",
        json!({"task": TASK, "iterations": 12, "config": {"llmMaxCalls": 12}}),
        Some("c"),
    )
    .await;
    loop {
        let message = raw.next().await;
        if message["method"] == "notifications/progress" {
            break;
        }
    }
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "enough"}}))
        .await;
    // The solve stops within an iteration or two and returns; then the record is read
    // elsewhere.
    raw.stderr_line("dropping response for cancelled request")
        .await;
    let (_, state) = iterations_in(dir.path());
    let done = state["iterations"].as_array().unwrap().len();
    assert!((1..12).contains(&done), "stopped early: {done}");
    for iteration in state["iterations"].as_array().unwrap() {
        assert!(
            iteration["chosen"].is_object(),
            "each iteration whole: {iteration:#}"
        );
    }
    // Nothing after the stop: the model was asked at most once more than the iterations
    // recorded (the call in flight when the cancel came), and a later call on the same
    // server (the fence: answered after anything the solve could still have done) reads
    // the same record.
    assert!(
        server.received().len() <= done + 1,
        "{} model calls for {done} iterations",
        server.received().len()
    );
    let (id, _) = iterations_in(dir.path());
    raw.call(2, "get-state", json!({"sessionId": id}), None)
        .await;
    let (_, answer) = raw.until_answer(2).await;
    assert_eq!(
        answer["result"]["structuredContent"]["history"]
            .as_array()
            .map(Vec::len),
        Some(done),
        "nothing after the stop: {answer}"
    );
    let (_, later) = iterations_in(dir.path());
    assert_eq!(
        later["iterations"].as_array().unwrap().len(),
        done,
        "nothing after the stop"
    );
    raw.child.kill().await.unwrap();
    assert!(cli(dir.path(), &["verify"]).status.success());
}

#[tokio::test]
async fn a_solve_killed_mid_way_is_read_and_continued_after_a_restart() {
    let server = LlmServer::start(vec![
        Reply::completion(JSON_ANSWER).delayed(Duration::from_millis(200)),
    ])
    .await;
    let env = model_env(&server);
    let dir = common::data_dir();
    let mut raw = Raw::start(dir.path(), &pairs(&env)).await;
    raw.call(
        1,
        "solve",
        json!({"task": TASK, "iterations": 10, "config": {"llmMaxCalls": 10}}),
        Some("k"),
    )
    .await;
    let mut seen = 0;
    while seen < 2 {
        if raw.next().await["method"] == "notifications/progress" {
            seen += 1;
        }
    }
    raw.child.start_kill().unwrap();
    raw.child.wait().await.unwrap();
    assert!(
        cli(dir.path(), &["verify"]).status.success(),
        "the chain is whole"
    );
    let (id, state) = iterations_in(dir.path());
    let done = state["iterations"].as_array().unwrap().len();
    assert!((2..10).contains(&done), "{done}");
    let client = spawn(dir.path(), &[]).await;
    let got = structured(&call(&client, "get-state", json!({"sessionId": id})).await);
    assert_eq!(got["history"].as_array().unwrap().len(), done);
    let more = structured(
        &call(
            &client,
            "multi-step",
            json!({"sessionId": id, "iterations": 2}),
        )
        .await,
    );
    assert_eq!(more["state"]["iterations"], done as u64 + 2);
    let summary = structured(&call(&client, "summarize", json!({"sessionId": id})).await);
    assert!(
        summary["summary"]
            .as_str()
            .unwrap()
            .starts_with("Summary:\nTask: Find")
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn output_path_writes_only_inside_the_export_directory() {
    let base = common::data_dir();
    let exports = base.path().join("exports");
    let outside = base.path().join("outside");
    let sibling = base.path().join("exports-evil");
    std::fs::create_dir_all(&exports).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(&sibling).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, exports.join("link")).unwrap();
    std::fs::write(exports.join("taken.json"), "keep me").unwrap();
    let data = base.path().join("data");
    let export_env = exports.display().to_string();
    let client = spawn(&data, &[("REASONING_LEDGER_EXPORT_DIR", &export_env)]).await;
    let attacks = [
        ("../outside/a.json".to_string(), "climbs out"),
        ("runs/../../outside/a.json".to_string(), "climbs out"),
        (
            outside.join("a.json").display().to_string(),
            "outside the export directory",
        ),
        (
            sibling.join("a.json").display().to_string(),
            "outside the export directory",
        ),
        ("link/a.json".to_string(), "outside the export directory"),
        ("taken.json".to_string(), "already exists"),
        ("runs/".to_string(), "names a directory"),
    ];
    for (path, wanted) in &attacks {
        let result = call(
            &client,
            "solve",
            json!({"task": TASK, "iterations": 1, "outputPath": path}),
        )
        .await;
        assert!(is_error(&result), "{path} accepted");
        assert!(text(&result).contains(wanted), "{path}: {}", text(&result));
    }
    assert_eq!(
        std::fs::read_to_string(exports.join("taken.json")).unwrap(),
        "keep me"
    );
    assert!(
        std::fs::read_dir(&outside).unwrap().next().is_none(),
        "nothing outside"
    );
    assert!(
        std::fs::read_dir(&sibling).unwrap().next().is_none(),
        "nothing in the sibling"
    );
    let listed = structured(&call(&client, "list_sessions", json!({"kind": "booster"})).await);
    assert!(
        listed["sessions"].as_array().unwrap().is_empty(),
        "a refused call records nothing"
    );

    let written = structured(
        &call(
            &client,
            "solve",
            json!({"task": TASK, "iterations": 2, "outputPath": "runs/summary.json"}),
        )
        .await,
    );
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(exports.join("runs/summary.json")).unwrap())
            .unwrap();
    assert_eq!(file["sessionId"], written["sessionId"]);
    assert_eq!(file["summary"], written["summary"]);
    let replaced = call(&client, "solve", json!({"task": TASK, "iterations": 1, "outputPath": "taken.json", "outputFormat": "text", "overwrite": "true"})).await;
    assert!(!is_error(&replaced), "{}", text(&replaced));
    let summary = std::fs::read_to_string(exports.join("taken.json")).unwrap();
    assert!(
        summary.starts_with("Summary:\nTask: Find the counterfeit"),
        "{summary}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_solve_replays_step_by_step_and_exports_as_mermaid() {
    let dir = common::data_dir();
    let client = spawn(dir.path(), &[]).await;
    let solved = structured(
        &call(&client, "solve", json!({"task": "Find the counterfeit \"]:::x among 12 coins <b>", "iterations": 3, "config": {"numCandidates": 3}})).await,
    );
    let id = solved["sessionId"].as_str().unwrap().to_string();
    let mermaid = text(
        &call(
            &client,
            "export_session",
            json!({"sessionId": id, "format": "mermaid"}),
        )
        .await,
    );
    assert!(
        mermaid.contains("task ==> t4")
            && mermaid.contains("t4 ==> t6")
            && mermaid.contains("t6 ==> t8"),
        "{mermaid}"
    );
    assert_eq!(mermaid.matches(":::rejected").count(), 6, "{mermaid}");
    assert!(
        !mermaid.contains(":::x") && !mermaid.contains("<b>"),
        "{mermaid}"
    );
    check("booster_mermaid", &mermaid);
    let history = structured(&call(&client, "get_history", json!({"sessionId": id})).await);
    let events = history["events"].as_array().unwrap();
    let second_step = events
        .iter()
        .filter(|e| e["type"] == "step_applied")
        .nth(1)
        .unwrap()["seq"]
        .as_u64()
        .unwrap();
    let replay = structured(
        &call(
            &client,
            "replay_session",
            json!({"sessionId": id, "atSeq": second_step}),
        )
        .await,
    );
    assert_eq!(
        replay["booster"]["steps"].as_array().unwrap().len(),
        2,
        "{replay:#}"
    );
    assert_eq!(replay["thoughtCount"], 2);
    client.cancel().await.unwrap();
    // From another process, read-only.
    let out = cli(dir.path(), &["export", &id, "--format", "mermaid"]);
    assert_eq!(stdout(&out), mermaid);
}

#[tokio::test]
async fn two_processes_stepping_one_session_at_once_never_both_decide_from_the_same_state() {
    let server = LlmServer::start(vec![
        Reply::completion(JSON_ANSWER).delayed(Duration::from_millis(400)),
    ])
    .await;
    let env = model_env(&server);
    let dir = common::data_dir();
    let a = spawn(dir.path(), &pairs(&env)).await;
    let b = spawn(dir.path(), &pairs(&env)).await;
    let started = structured(&call(&a, "start", json!({"task": TASK})).await);
    let id = started["sessionId"].as_str().unwrap().to_string();
    let (first, second) = tokio::join!(
        call(&a, "step", json!({"sessionId": id})),
        call(&b, "step", json!({"sessionId": id}))
    );
    let refused: Vec<String> = [&first, &second]
        .iter()
        .filter(|r| is_error(r))
        .map(|r| text(r))
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "one decided over a state the other had moved: {refused:?}"
    );
    assert!(
        refused[0].contains("moved on while this call ran"),
        "{}",
        refused[0]
    );
    let state = structured(&call(&a, "get-state", json!({"sessionId": id})).await);
    assert_eq!(
        state["history"].as_array().unwrap().len(),
        1,
        "one iteration recorded"
    );
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
    assert!(cli(dir.path(), &["verify"]).status.success());
}
