//! The current session (issue 42), one rule on every transport: stdio, HTTP with a
//! transport session (`initialize`, 2025-11-25) and stateless HTTP (2026-07-28). A call
//! without a session id continues its caller's own open session of that family (where
//! the thought number or index fits), else starts one and says so; `think` keeps one
//! thread per purpose however purposes interleave; `evaluate_branch` never scores a
//! misspelt criterion by default and says what it replaced; `deep_planning`'s errors
//! name only the plan they are about.

use crate::common::data_dir;
use crate::surface::{HttpServer, LogClient, Raw2026, TOKEN, http_messages, stdio_client};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

/// The three ways a client reaches the server.
#[derive(Clone, Copy, Debug)]
enum Transport {
    Stdio,
    /// HTTP, `initialize` generation (rmcp's client: 2025-11-25, a transport session).
    HttpSession,
    /// HTTP, 2026-07-28: every request stands alone.
    HttpStateless,
}

const TRANSPORTS: [Transport; 3] = [
    Transport::Stdio,
    Transport::HttpSession,
    Transport::HttpStateless,
];

/// A server and one client of it.
struct Conn {
    _dir: tempfile::TempDir,
    _server: Option<HttpServer>,
    client: Client,
}

enum Client {
    Initialize(LogClient),
    Discover(Raw2026),
}

impl Conn {
    async fn start(transport: Transport) -> Conn {
        let dir = data_dir();
        let (server, client) = match transport {
            Transport::Stdio => (
                None,
                Client::Initialize(stdio_client(dir.path(), &[]).await.0),
            ),
            Transport::HttpSession => {
                let server = HttpServer::start(dir.path(), &[]).await;
                let client = Client::Initialize(server.client().await.0);
                (Some(server), client)
            }
            Transport::HttpStateless => {
                let server = HttpServer::start(dir.path(), &[]).await;
                let client = Client::Discover(Raw2026::http(&server));
                (Some(server), client)
            }
        };
        Conn {
            _dir: dir,
            _server: server,
            client,
        }
    }

    /// One `tools/call`: its result (`content`, `structuredContent`, `isError`).
    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        match &mut self.client {
            Client::Initialize(client) => {
                let Value::Object(arguments) = arguments else {
                    panic!("arguments are an object")
                };
                let result = client
                    .call_tool(
                        CallToolRequestParams::new(tool.to_string()).with_arguments(arguments),
                    )
                    .await
                    .expect("tools/call");
                serde_json::to_value(result).unwrap()
            }
            Client::Discover(raw) => {
                let (answer, _) = raw
                    .request(
                        "tools/call",
                        json!({"name": tool, "arguments": arguments}),
                        None,
                    )
                    .await;
                answer["result"].clone()
            }
        }
    }

    /// A call that must succeed: its structured content.
    async fn ok(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments.clone()).await;
        assert_ne!(
            result["isError"],
            json!(true),
            "{tool} {arguments}: {result}"
        );
        result["structuredContent"].clone()
    }

    /// A call that must fail: its text.
    async fn refused(&mut self, tool: &str, arguments: Value) -> (String, Value) {
        let result = self.call(tool, arguments.clone()).await;
        assert_eq!(
            result["isError"],
            json!(true),
            "{tool} {arguments}: {result}"
        );
        (text_of(&result), result["structuredContent"].clone())
    }
}

/// The text blocks of a result, joined.
fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn seq_thought(n: u64, total: u64) -> Value {
    json!({"thought": format!("step {n}"), "thoughtNumber": n, "totalThoughts": total, "nextThoughtNeeded": n < total})
}

fn qa_thought(n: u64, total: u64) -> Value {
    json!({"thought": format!("qa {n}"), "thought_number": n, "total_thoughts": total, "next_thought_needed": n < total})
}

fn think(purpose: &str, index: u64) -> Value {
    json!({"thread_purpose": purpose, "thought": format!("{purpose} {index}"), "thought_index": index})
}

#[tokio::test]
async fn calls_without_a_session_id_continue_the_callers_session_on_every_transport() {
    for transport in TRANSPORTS {
        let mut conn = Conn::start(transport).await;
        // sequentialthinking: 1/3, 2/3, 3/3 without sessionId are one session.
        let first = conn.ok("sequentialthinking", seq_thought(1, 3)).await;
        let session = first["sessionId"].clone();
        assert!(first.get("started").is_none(), "{transport:?}: {first}");
        for n in [2, 3] {
            let next = conn.ok("sequentialthinking", seq_thought(n, 3)).await;
            assert_eq!(
                next["sessionId"], session,
                "{transport:?}: thought {n}: {next}"
            );
            assert_eq!(next["thoughtHistoryLength"], n, "{transport:?}: {next}");
            assert!(next.get("started").is_none(), "{transport:?}: {next}");
        }
        // sequentialthinking_qa: thought 2 continues thought 1's session.
        let qa = conn.ok("sequentialthinking_qa", qa_thought(1, 2)).await;
        let qa_next = conn.ok("sequentialthinking_qa", qa_thought(2, 2)).await;
        assert_eq!(
            qa_next["session_id"], qa["session_id"],
            "{transport:?}: {qa_next}"
        );
        assert_eq!(qa_next["thought_history_length"], 2, "{transport:?}");
        // deep_planning: clarify after init continues the plan.
        let init = conn
            .ok(
                "deep_planning",
                json!({"phase": "init", "problem": "Ship it"}),
            )
            .await;
        let clarified = conn
            .ok(
                "deep_planning",
                json!({"phase": "clarify", "question": "When?"}),
            )
            .await;
        assert_eq!(
            clarified["sessionId"], init["sessionId"],
            "{transport:?}: {clarified}"
        );
        assert_eq!(clarified["phase"], "clarify", "{transport:?}");
    }
}

#[tokio::test]
async fn a_call_that_continues_nothing_says_it_started_a_session() {
    for transport in TRANSPORTS {
        let mut conn = Conn::start(transport).await;
        // Thought 3 in a fresh server: a new session, and the answer says so.
        let result = conn.call("sequentialthinking", seq_thought(3, 5)).await;
        let answer = &result["structuredContent"];
        assert_eq!(answer["started"], true, "{transport:?}: {answer}");
        let session = answer["sessionId"].as_str().unwrap();
        let hint = answer["sessionHint"].as_str().unwrap();
        assert!(
            hint.contains(session) && hint.contains("sessionId"),
            "{hint}"
        );
        let said = format!("Started a new session {session}");
        assert!(
            text_of(&result).contains(&said),
            "the text says it too: {result}"
        );
        // The next thought continues it: nothing started.
        let next = conn.ok("sequentialthinking", seq_thought(4, 5)).await;
        assert_eq!(next["sessionId"], session, "{transport:?}");
        assert!(next.get("started").is_none(), "{transport:?}: {next}");
        // think index 2 of a purpose never started: text and structured content say so.
        let result = conn.call("think", think("orphan", 2)).await;
        let answer = &result["structuredContent"];
        assert_eq!(answer["started"], true, "{transport:?}: {answer}");
        let hint = answer["sessionHint"].as_str().unwrap();
        assert!(hint.contains("session_id"), "{hint}");
        assert!(
            text_of(&result).contains("Started a new session"),
            "{result}"
        );
        // A first thought asked for a new session: nothing to say.
        let asked = conn.ok("think", think("fresh", 1)).await;
        assert!(asked.get("started").is_none(), "{transport:?}: {asked}");
    }
}

#[tokio::test]
async fn think_keeps_one_thread_per_purpose_however_purposes_interleave() {
    for transport in TRANSPORTS {
        let mut conn = Conn::start(transport).await;
        let a1 = conn.ok("think", think("A", 1)).await;
        let a2 = conn.ok("think", think("A", 2)).await;
        let b1 = conn.ok("think", think("B", 1)).await;
        let a3 = conn.ok("think", think("A", 3)).await;
        let b2 = conn.ok("think", think("B", 2)).await;
        assert_eq!(a2["sessionId"], a1["sessionId"], "{transport:?}");
        assert_ne!(b1["sessionId"], a1["sessionId"], "{transport:?}");
        assert_eq!(
            a3["sessionId"], a1["sessionId"],
            "{transport:?}: A#3 joins A: {a3}"
        );
        assert_eq!(
            b2["sessionId"], b1["sessionId"],
            "{transport:?}: B#2 joins B: {b2}"
        );
        assert!(a3.get("started").is_none() && b2.get("started").is_none());
    }
}

#[tokio::test]
async fn evaluate_branch_refuses_a_misspelt_criterion_and_says_what_it_replaced() {
    for transport in TRANSPORTS {
        let mut conn = Conn::start(transport).await;
        let first = conn.ok("sequentialthinking", seq_thought(1, 3)).await;
        let session = first["sessionId"].as_str().unwrap().to_string();
        conn.ok(
            "sequentialthinking",
            json!({"thought": "duck", "thoughtNumber": 2, "totalThoughts": 3, "nextThoughtNeeded": true, "branchFromThought": 1, "branchId": "duck", "sessionId": session}),
        )
        .await;
        let scored = conn
            .ok(
                "evaluate_branch",
                json!({"sessionId": session, "branchId": "duck", "feasibility": 8, "completeness": 7, "coherence": 7, "novelty": 6, "convergence": 7, "risk": 3}),
            )
            .await;
        let earlier = scored["score"].as_f64().unwrap();
        assert!(scored.get("replaces").is_none(), "{scored}");
        // Both names misspelt: refused, each named with the near name; nothing recorded.
        let (text, _) = conn
            .refused(
                "evaluate_branch",
                json!({"sessionId": session, "branchId": "duck", "feasability": 9, "completness": 9}),
            )
            .await;
        for (meant, given) in [
            ("feasibility", "feasability"),
            ("completeness", "completness"),
        ] {
            assert!(
                text.contains(meant) && text.contains(given),
                "{transport:?}: {meant}/{given} in {text}"
            );
        }
        // Without any score: refused, never 5 across the board.
        let (text, _) = conn
            .refused(
                "evaluate_branch",
                json!({"sessionId": session, "branchId": "duck"}),
            )
            .await;
        assert!(text.contains("at least one score"), "{text}");
        // Still ranked by the first evaluation.
        let ranked = conn
            .ok("compare_branches", json!({"sessionId": session}))
            .await;
        assert_eq!(
            ranked["ranking"][0]["score"].as_f64(),
            Some(earlier),
            "{ranked}"
        );
        // A second evaluation says what it replaces and which criteria it filled.
        let again = conn
            .ok(
                "evaluate_branch",
                json!({"sessionId": session, "branchId": "duck", "feasibility": 9}),
            )
            .await;
        assert_eq!(
            again["replaces"]["score"].as_f64(),
            Some(earlier),
            "{again}"
        );
        let message = again["message"].as_str().unwrap();
        assert!(
            message.contains("Replaces") && message.contains("novelty"),
            "{message}"
        );
        assert_eq!(
            again["defaulted"].as_array().map(Vec::len),
            Some(5),
            "{again}"
        );
    }
}

#[tokio::test]
async fn deep_planning_errors_name_only_the_plan_they_are_about() {
    for transport in TRANSPORTS {
        let mut conn = Conn::start(transport).await;
        let init = conn
            .ok(
                "deep_planning",
                json!({"phase": "init", "problem": "First"}),
            )
            .await;
        let plan = init["sessionId"].as_str().unwrap().to_string();
        conn.ok(
            "deep_planning",
            json!({"phase": "explore", "branchId": "a", "name": "A"}),
        )
        .await;
        // An unknown id: named, and no other plan's id or phase.
        let (text, answer) = conn
            .refused(
                "deep_planning",
                json!({"phase": "clarify", "question": "q", "sessionId": "dp-00000000"}),
            )
            .await;
        assert!(
            text.contains("dp-00000000") && text.contains("not found"),
            "{text}"
        );
        assert!(
            !text.contains(&plan),
            "{transport:?}: another plan named: {text}"
        );
        assert_eq!(answer["sessionId"], "", "{answer}");
        assert_eq!(answer["phase"], "none", "{answer}");
        // init without a problem: about no plan.
        let (text, answer) = conn
            .refused("deep_planning", json!({"phase": "init"}))
            .await;
        let message = answer["message"].as_str().unwrap();
        assert!(
            message.contains("requires a \"problem\" field"),
            "{message}"
        );
        assert!(!text.contains(&plan), "{transport:?}: {text}");
        assert_eq!(answer["phase"], "none", "{answer}");
        // init with an existing sessionId: refused, not a silent new plan.
        let (text, answer) = conn
            .refused(
                "deep_planning",
                json!({"phase": "init", "problem": "Again", "sessionId": plan}),
            )
            .await;
        assert!(text.contains("init starts a new plan"), "{text}");
        assert_eq!(answer["sessionId"], plan.as_str(), "{answer}");
        let listed = conn.ok("list_plans", json!({})).await;
        assert_eq!(listed["count"], 1, "{transport:?}: no new plan: {listed}");
        // The plan continues as before.
        let explored = conn
            .ok(
                "deep_planning",
                json!({"phase": "explore", "branchId": "b", "name": "B"}),
            )
            .await;
        assert_eq!(explored["sessionId"], plan.as_str(), "{explored}");
    }
}

/// A stateless (2026-07-28) `tools/call` from the client named `client`: its structured
/// content.
async fn stateless_call(url: &str, client: &str, tool: &str, arguments: Value) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }
    }});
    let body = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(message.to_string())
        .send()
        .await
        .expect("http")
        .text()
        .await
        .unwrap();
    let answer = http_messages(&body)
        .into_iter()
        .find(|m| m["id"] == json!(1))
        .expect("an answer");
    assert_ne!(answer["result"]["isError"], json!(true), "{answer}");
    answer["result"]["structuredContent"].clone()
}

#[tokio::test]
async fn two_clients_over_stateless_http_each_continue_their_own_session() {
    let dir = data_dir();
    let server = HttpServer::start(dir.path(), &[]).await;
    let url = server.url.as_str();
    let alpha = stateless_call(url, "alpha", "sequentialthinking", seq_thought(1, 3)).await;
    let beta = stateless_call(url, "beta", "sequentialthinking", seq_thought(1, 3)).await;
    assert_ne!(alpha["sessionId"], beta["sessionId"]);
    // Interleaved, each client's thought 2 joins its own thought 1.
    let alpha2 = stateless_call(url, "alpha", "sequentialthinking", seq_thought(2, 3)).await;
    let beta2 = stateless_call(url, "beta", "sequentialthinking", seq_thought(2, 3)).await;
    assert_eq!(alpha2["sessionId"], alpha["sessionId"], "{alpha2}");
    assert_eq!(beta2["sessionId"], beta["sessionId"], "{beta2}");
    // A client that wrote nothing yet continues nobody's session: it starts one.
    let gamma = stateless_call(url, "gamma", "sequentialthinking", seq_thought(2, 3)).await;
    assert_eq!(gamma["started"], true, "{gamma}");
    assert_ne!(gamma["sessionId"], alpha["sessionId"]);
    assert_ne!(gamma["sessionId"], beta["sessionId"]);
}
