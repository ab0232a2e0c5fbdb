//! The planning toolset against the real binary: deep_planning's phases, messages,
//! scores, step normalisation and finalize documents (`specs/planning.md`), resume
//! across restarts and from another process, list_plans and get_plan, and the branch
//! tools of `specs/ledger.md` on plans and on sequentialthinking branches.

use crate::common::{
    self, Client, call, check, check_json, data_dir, is_error, spawn_with, structured, text,
};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use std::path::Path;

async fn spawn_planning(dir: &Path) -> Client {
    spawn_with(dir, &["--toolsets", "thinking,ledger,export,planning"], &[]).await
}

async fn dp(client: &Client, args: Value) -> CallToolResult {
    call(client, "deep_planning", args).await
}

/// The answer object of a deep_planning call (error or not).
fn answer(result: &CallToolResult) -> Value {
    let value: Value = serde_json::from_str(&text(result)).expect("deep_planning answers JSON");
    assert_eq!(
        result.structured_content.as_ref(),
        Some(&value),
        "structured content is the same object"
    );
    value
}

fn ok(result: &CallToolResult) -> Value {
    assert!(!is_error(result), "deep_planning failed: {}", text(result));
    let value = answer(result);
    assert_ne!(value["status"], "error", "{value}");
    value
}

fn refused(result: &CallToolResult, needle: &str) -> Value {
    assert!(is_error(result), "expected an error: {}", text(result));
    let value = answer(result);
    assert_eq!(value["status"], "error", "{value}");
    let message = value["message"].as_str().unwrap();
    assert!(message.contains(needle), "{needle:?} not in {message:?}");
    value
}

/// dp- ids vary from run to run.
fn plan_ids(text: &str) -> String {
    regex::Regex::new(r"dp-[0-9A-Za-z]{8}")
        .unwrap()
        .replace_all(text, "dp-<plan>")
        .into_owned()
}

fn check_plan(name: &str, text: &str) {
    check(name, &plan_ids(text));
}

fn check_plan_json(name: &str, value: &Value) {
    check(
        name,
        &plan_ids(&serde_json::to_string_pretty(value).unwrap()),
    );
}

/// How many events the session holds (to prove a refusal recorded nothing).
async fn events_of(client: &Client, session: &str) -> usize {
    let result = call(
        client,
        "get_plan",
        json!({"sessionId": session, "format": "jsonl"}),
    )
    .await;
    text(&result).lines().count()
}

/// init → clarify ×2 → explore ×2 → evaluate ×2, returning the session id.
async fn plan_to_evaluate(client: &Client) -> String {
    let init = ok(&dp(
        client,
        json!({"phase": "init", "problem": "Pick a cache for the API", "context": "p99 is 800 ms", "constraints": "[\"no new servers\", \"ship in a week\"]"}),
    )
    .await);
    let session = init["sessionId"].as_str().unwrap().to_string();
    ok(&dp(client, json!({"phase": "clarify", "question": "Which endpoints are slow?", "answer": "Search and list"})).await);
    ok(&dp(
        client,
        json!({"phase": "clarify", "question": "Can data be stale?"}),
    )
    .await);
    ok(&dp(
        client,
        json!({"phase": "explore", "branchId": "redis", "name": "Redis cache", "description": "A shared cache", "pros": ["fast", "shared"], "cons": "[\"one more service\"]"}),
    )
    .await);
    ok(&dp(
        client,
        json!({"phase": "explore", "branchId": "memo", "name": "In-process memo", "pros": ["simple"]}),
    )
    .await);
    ok(&dp(
        client,
        json!({"phase": "evaluate", "branchId": "redis", "feasibility": 8, "completeness": "7", "coherence": 9, "risk": "3", "rationale": "Covers both endpoints", "recommendation": "pursue"}),
    )
    .await);
    ok(&dp(
        client,
        json!({"phase": "evaluate", "branchId": "memo", "feasibility": 7, "completeness": 6, "coherence": 8, "risk": 4, "rationale": "Per instance only"}),
    )
    .await);
    session
}

fn finalize_args(format: &str) -> Value {
    json!({
        "phase": "finalize",
        "selectedBranch": "redis",
        "format": format,
        "steps": [
            {"title": "Add the client", "description": "Wire redis-rs", "files": ["src/cache.rs"], "complexity": "low"},
            {"action": "Cache search", "detail": "TTL 60 s", "dependencies": [1]},
            {"name": 7, "info": "Measure p99"}
        ],
        "risks": "[{\"description\": \"Stale results\", \"mitigation\": \"Short TTL\"}]",
        "assumptions": ["Redis is allowed"],
        "successCriteria": ["p99 under 200 ms"]
    })
}

#[tokio::test]
async fn a_plan_goes_through_every_phase_with_the_spec_messages_scores_and_documents() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let first = ok(&dp(&client, json!({"phase": "init", "problem": "Pick a cache for the API", "context": "p99 is 800 ms", "constraints": "[\"no new servers\", \"ship in a week\"]"})).await);
    assert!(first["sessionId"].as_str().unwrap().starts_with("dp-"));
    assert_eq!(first["validNextPhases"], json!(["clarify", "explore"]));
    check_plan_json("planning_answer_init", &first);
    let clarified = ok(&dp(&client, json!({"phase": "clarify", "question": "Which endpoints are slow?", "answer": "Search and list"})).await);
    assert_eq!(clarified["validNextPhases"], json!(["clarify", "explore"]));
    let second = ok(&dp(
        &client,
        json!({"phase": "clarify", "question": "Can data be stale?"}),
    )
    .await);
    assert!(
        second["message"].as_str().unwrap().contains("2 total"),
        "{second}"
    );
    let explored = ok(&dp(&client, json!({"phase": "explore", "branchId": "redis", "name": "Redis cache", "description": "A shared cache", "pros": ["fast", "shared"], "cons": "[\"one more service\"]"})).await);
    assert_eq!(
        explored["validNextPhases"],
        json!(["explore", "evaluate", "clarify"])
    );
    assert_eq!(explored["approachCount"], 1);
    check_plan_json("planning_answer_explore", &explored);
    ok(&dp(&client, json!({"phase": "explore", "branchId": "memo", "name": "In-process memo", "pros": ["simple"]})).await);
    let evaluated = ok(&dp(&client, json!({"phase": "evaluate", "branchId": "redis", "feasibility": 8, "completeness": "7", "coherence": 9, "risk": "3", "rationale": "Covers both endpoints", "recommendation": "pursue"})).await);
    assert!(
        evaluated["message"]
            .as_str()
            .unwrap()
            .contains("score: 7.80"),
        "{evaluated}"
    );
    assert_eq!(
        evaluated["validNextPhases"],
        json!(["evaluate", "explore", "finalize"])
    );
    check_plan_json("planning_answer_evaluate", &evaluated);
    let other = ok(&dp(&client, json!({"phase": "evaluate", "branchId": "memo", "feasibility": 7, "completeness": 6, "coherence": 8, "risk": 4, "rationale": "Per instance only"})).await);
    assert!(
        other["message"].as_str().unwrap().contains("score: 6.80"),
        "{other}"
    );
    assert!(
        other["message"].as_str().unwrap().contains("refine"),
        "default recommendation"
    );
    assert_eq!(other["evaluationCount"], 2);

    let done = ok(&dp(&client, finalize_args("markdown")).await);
    assert_eq!(done["status"], "complete");
    assert_eq!(done["phase"], "done");
    assert_eq!(done["validNextPhases"], json!(["init"]));
    let markdown = done["plan"].as_str().unwrap().to_string();
    // The spec's sections in its order.
    let order = [
        "# Plan: Redis cache",
        "## Problem",
        "## Context",
        "## Constraints",
        "## Clarifications",
        "| Question | Answer |",
        "Pending",
        "## Selected Approach: Redis cache",
        "**Score:** 7.80/10",
        "| Feasibility | 8/10 |",
        "**Pros:**",
        "**Cons:**",
        "## Rejected Approaches",
        "### In-process memo",
        "**Score:** 6.80/10",
        "## Implementation Steps",
        "### Step 1: Add the client",
        "**Files:** src/cache.rs",
        "**Complexity:** low",
        "### Step 2: Cache search",
        "**Depends on:** 1",
        "### Step 3: Step 3",
        "## Risks",
        "| Stale results | Short TTL |",
        "## Assumptions",
        "## Success Criteria",
        "- [ ] p99 under 200 ms",
    ];
    let mut at = 0;
    for needle in order {
        let found = markdown[at..]
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing or out of order in\n{markdown}"));
        at += found;
    }
    for word in ["undefined", "null"] {
        assert!(!markdown.contains(word), "{markdown}");
    }
    check_plan("planning_finalize_markdown", &markdown);
    check_plan_json(
        "planning_answer_finalize",
        &json!({"status": done["status"], "phase": done["phase"], "validNextPhases": done["validNextPhases"], "approachCount": done["approachCount"], "evaluationCount": done["evaluationCount"], "message": done["message"]}),
    );

    // After done: only init; init from any state starts a new plan.
    refused(
        &dp(&client, json!({"phase": "clarify", "question": "more?"})).await,
        "Cannot transition",
    );
    let json_plan = {
        plan_to_evaluate(&client).await;
        ok(&dp(&client, finalize_args("json")).await)
    };
    let plan = &json_plan["plan"];
    assert_eq!(plan["selectedApproach"]["score"], 7.8);
    assert_eq!(plan["rejectedApproaches"][0]["branchId"], "memo");
    assert_eq!(plan["steps"][1]["title"], "Cache search");
    assert_eq!(plan["steps"][2]["title"], "Step 3");
    assert!(!plan.to_string().contains("null"), "{plan}");
    check_plan_json("planning_finalize_json", plan);
}

#[tokio::test]
async fn every_refusal_names_its_cause_and_records_nothing() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let none = refused(
        &dp(
            &client,
            json!({"phase": "explore", "branchId": "a", "name": "A"}),
        )
        .await,
        "No active planning session",
    );
    assert_eq!(none["validNextPhases"], json!(["init"]));
    check_plan_json("planning_answer_error", &none);
    refused(
        &dp(&client, json!({"phase": "init"})).await,
        "requires a \"problem\" field",
    );
    refused(
        &dp(&client, json!({"phase": "plan"})).await,
        "Unknown phase",
    );
    refused(&dp(&client, json!({})).await, "requires a \"phase\"");

    let init = ok(&dp(&client, json!({"phase": "init", "problem": "P"})).await);
    let session = init["sessionId"].as_str().unwrap().to_string();
    let before = events_of(&client, &session).await;
    refused(
        &dp(&client, json!({"phase": "evaluate", "branchId": "a"})).await,
        "Cannot transition",
    );
    refused(
        &dp(&client, json!({"phase": "clarify"})).await,
        "requires a \"question\" field",
    );
    refused(
        &dp(&client, json!({"phase": "explore", "name": "A"})).await,
        "requires \"branchId\" and \"name\"",
    );
    ok(&dp(
        &client,
        json!({"phase": "explore", "branchId": "a", "name": "A"}),
    )
    .await);
    refused(
        &dp(
            &client,
            json!({"phase": "explore", "branchId": "a", "name": "again"}),
        )
        .await,
        "already exists",
    );
    refused(
        &dp(
            &client,
            json!({"phase": "explore", "branchId": "b", "name": "B", "pros": "not json"}),
        )
        .await,
        "not valid JSON",
    );
    refused(
        &dp(
            &client,
            json!({"phase": "explore", "branchId": "b", "name": "B", "pros": "{\"a\": 1}"}),
        )
        .await,
        "expected an array",
    );
    let long = "x".repeat(10_000);
    refused(
        &dp(
            &client,
            json!({"phase": "explore", "branchId": long, "name": "B"}),
        )
        .await,
        "branchId",
    );
    refused(
        &dp(&client, json!({"phase": "evaluate"})).await,
        "requires a \"branchId\"",
    );
    refused(
        &dp(&client, json!({"phase": "evaluate", "branchId": "zzz"})).await,
        "No approach found",
    );
    refused(
        &dp(
            &client,
            json!({"phase": "evaluate", "branchId": "a", "risk": 11}),
        )
        .await,
        "from 0 to 10",
    );
    refused(
        &dp(
            &client,
            json!({"phase": "evaluate", "branchId": "a", "feasibility": -1}),
        )
        .await,
        "from 0 to 10",
    );
    refused(
        &dp(
            &client,
            json!({"phase": "evaluate", "branchId": "a", "feasibility": "abc"}),
        )
        .await,
        "string \"abc\"",
    );
    refused(
        &dp(
            &client,
            json!({"phase": "evaluate", "branchId": "a", "recommendation": "maybe"}),
        )
        .await,
        "Invalid recommendation",
    );
    assert_eq!(
        events_of(&client, &session).await,
        before + 1,
        "only the one explore"
    );
    ok(&dp(&client, json!({"phase": "evaluate", "branchId": "a", "feasibility": "10", "completeness": 10, "coherence": 10, "risk": 0})).await);
    refused(
        &dp(&client, json!({"phase": "evaluate", "branchId": "a"})).await,
        "already exists",
    );
    refused(
        &dp(&client, json!({"phase": "finalize"})).await,
        "requires a \"selectedBranch\"",
    );
    refused(
        &dp(
            &client,
            json!({"phase": "finalize", "selectedBranch": "zzz"}),
        )
        .await,
        "No approach found",
    );
    // Finalize is atomic: a bad steps or risks value changes nothing.
    let before = events_of(&client, &session).await;
    refused(
        &dp(
            &client,
            json!({"phase": "finalize", "selectedBranch": "a", "steps": "[{\"title\": 1"}),
        )
        .await,
        "steps",
    );
    refused(
        &dp(
            &client,
            json!({"phase": "finalize", "selectedBranch": "a", "risks": [{"mitigation": "m"}]}),
        )
        .await,
        "risks",
    );
    refused(
        &dp(
            &client,
            json!({"phase": "finalize", "selectedBranch": "a", "steps": ["not an object"]}),
        )
        .await,
        "expected an object",
    );
    assert_eq!(events_of(&client, &session).await, before);
    let state = refused(
        &dp(
            &client,
            json!({"phase": "finalize", "selectedBranch": "a", "format": "pdf"}),
        )
        .await,
        "format",
    );
    assert_eq!(
        state["phase"], "evaluate",
        "the plan is where it was: {state}"
    );
    let done = ok(&dp(&client, json!({"phase": "finalize", "selectedBranch": "a"})).await);
    let markdown = done["plan"].as_str().unwrap();
    assert!(markdown.contains("**Score:** 10.00/10"), "{markdown}");
    assert!(
        !markdown.contains("## Implementation Steps"),
        "empty sections are left out: {markdown}"
    );
    assert!(!markdown.contains("## Risks"), "{markdown}");
}

#[tokio::test]
async fn a_plan_resumes_after_a_restart_and_from_another_process() {
    let dir = data_dir();
    let session = {
        let client = spawn_planning(dir.path()).await;
        let init = ok(&dp(
            &client,
            json!({"phase": "init", "problem": "Survive restarts"}),
        )
        .await);
        ok(&dp(
            &client,
            json!({"phase": "explore", "branchId": "a", "name": "A"}),
        )
        .await);
        client.cancel().await.unwrap();
        init["sessionId"].as_str().unwrap().to_string()
    };
    let client = spawn_planning(dir.path()).await;
    // A new process has no current plan; the id resumes it.
    refused(
        &dp(
            &client,
            json!({"phase": "explore", "branchId": "b", "name": "B"}),
        )
        .await,
        "No active planning session",
    );
    let resumed = ok(&dp(
        &client,
        json!({"phase": "explore", "branchId": "b", "name": "B", "sessionId": session}),
    )
    .await);
    assert_eq!(resumed["sessionId"], session.as_str());
    assert_eq!(resumed["approachCount"], 2);
    // init with a plan's sessionId never starts another plan silently (issue 42).
    let other = refused(
        &dp(
            &client,
            json!({"phase": "init", "problem": "Q", "sessionId": session}),
        )
        .await,
        "init starts a new plan",
    );
    assert_eq!(other["sessionId"], session.as_str());
    let unknown = refused(
        &dp(
            &client,
            json!({"phase": "clarify", "question": "q", "sessionId": "dp-nothere1"}),
        )
        .await,
        "dp-nothere1",
    );
    let message = unknown["message"].as_str().unwrap();
    assert!(
        message.contains("not found") && message.contains("list_plans"),
        "{message}"
    );

    // Two processes writing one plan: each sees the other's phase at once.
    let second = spawn_planning(dir.path()).await;
    ok(&dp(
        &second,
        json!({"phase": "evaluate", "branchId": "a", "sessionId": session, "feasibility": 9}),
    )
    .await);
    let listed = structured(
        &call(
            &client,
            "list_plans",
            json!({"status": "in-progress", "keyword": "restarts"}),
        )
        .await,
    );
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(listed["plans"][0]["phase"], "evaluate");
    refused(
        &dp(
            &client,
            json!({"phase": "evaluate", "branchId": "a", "sessionId": session}),
        )
        .await,
        "already exists",
    );
    ok(&dp(
        &client,
        json!({"phase": "finalize", "selectedBranch": "a", "sessionId": session}),
    )
    .await);
    let complete = structured(&call(&second, "list_plans", json!({"status": "complete"})).await);
    assert_eq!(complete["count"], 1, "{complete}");
    assert_eq!(complete["plans"][0]["selectedBranch"], "a");
    assert_eq!(complete["plans"][0]["sessionId"], session.as_str());
    let out = common::cli(dir.path(), &["verify"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
}

#[tokio::test]
async fn list_plans_and_get_plan_answer_every_format() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let session = plan_to_evaluate(&client).await;
    let other = ok(&dp(
        &client,
        json!({"phase": "init", "problem": "Another problem"}),
    )
    .await);
    let all = structured(&call(&client, "list_plans", json!({})).await);
    assert_eq!(all["count"], 2);
    assert_eq!(
        all["plans"][0]["sessionId"], other["sessionId"],
        "newest first"
    );
    let by_approach = structured(&call(&client, "list_plans", json!({"keyword": "MEMO"})).await);
    assert_eq!(by_approach["count"], 1);
    assert_eq!(by_approach["plans"][0]["sessionId"], session.as_str());
    check_plan_json("planning_list_plans", &by_approach);
    let bad = call(&client, "list_plans", json!({"status": "finished"})).await;
    assert!(is_error(&bad));

    let markdown = call(&client, "get_plan", json!({"sessionId": session})).await;
    check_plan("planning_get_plan_in_progress_markdown", &text(&markdown));
    let json_plan = structured(
        &call(
            &client,
            "get_plan",
            json!({"sessionId": session, "format": "json"}),
        )
        .await,
    );
    assert_eq!(json_plan["plan"]["approaches"][0]["score"], 7.8);
    let mermaid = text(
        &call(
            &client,
            "get_plan",
            json!({"sessionId": session, "format": "mermaid"}),
        )
        .await,
    );
    ok(&dp(&client, json!({"phase": "explore", "branchId": "x", "name": "Other", "sessionId": other["sessionId"]})).await);
    ok(&dp(
        &client,
        finalize_args("markdown")
            .as_object()
            .cloned()
            .map(|mut m| {
                m.insert("sessionId".into(), json!(session));
                Value::Object(m)
            })
            .unwrap(),
    )
    .await);
    let mermaid_done = text(
        &call(
            &client,
            "get_plan",
            json!({"sessionId": session, "format": "mermaid"}),
        )
        .await,
    );
    assert!(
        mermaid.contains(":::approach") && !mermaid.contains(":::selected"),
        "{mermaid}"
    );
    assert!(
        mermaid_done.contains("score 7.80 · pursue\"]:::selected"),
        "{mermaid_done}"
    );
    check_plan("planning_get_plan_mermaid", &mermaid_done);
    let jsonl = text(
        &call(
            &client,
            "get_plan",
            json!({"sessionId": session, "format": "jsonl"}),
        )
        .await,
    );
    assert_eq!(
        jsonl.lines().count(),
        9,
        "start, init, 2 clarify, 2 explore, 2 evaluate, finalize"
    );
    assert!(
        jsonl
            .lines()
            .nth(1)
            .unwrap()
            .contains("\"type\":\"plan_initialized\""),
        "{jsonl}"
    );
    let missing = structured(&call(&client, "get_plan", json!({"sessionId": "dp-missing0"})).await);
    assert_eq!(missing["found"], false);
    assert!(missing["message"].as_str().unwrap().contains("not found"));

    // The session exports show the plan, and search finds problems and approach names.
    let exported = text(
        &call(
            &client,
            "export_session",
            json!({"sessionId": session, "format": "json"}),
        )
        .await,
    );
    assert!(exported.contains("\"planning\""), "{exported}");
    let hits = structured(
        &call(
            &client,
            "search_history",
            json!({"query": "in-process memo"}),
        )
        .await,
    );
    assert_eq!(
        hits["matches"][0]["eventType"], "approach_explored",
        "{hits}"
    );
    let listed = structured(&call(&client, "list_sessions", json!({"query": "redis cache"})).await);
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");
}

#[tokio::test]
async fn search_and_list_sessions_find_a_think_thread_by_its_purpose() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let thread = structured(
        &call(
            &client,
            "think",
            json!({"thread_purpose": "Explain Central Banks", "thought": "They set rates", "thought_index": 1}),
        )
        .await,
    );
    let hits =
        structured(&call(&client, "search_history", json!({"query": "central banks"})).await);
    let matches = hits["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 1, "{hits}");
    assert_eq!(matches[0]["sessionId"], thread["sessionId"]);
    assert_eq!(matches[0]["kind"], "think");
    let listed =
        structured(&call(&client, "list_sessions", json!({"query": "central banks"})).await);
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1);
    // A thought matching as well is found once, through the thought.
    let hits = structured(&call(&client, "search_history", json!({"query": "rates"})).await);
    assert_eq!(hits["matches"].as_array().unwrap().len(), 1);
}

fn branch_thought(n: u64, text: &str, branch: &str) -> Value {
    json!({"thought": text, "thoughtNumber": n, "totalThoughts": 5, "nextThoughtNeeded": true, "branchFromThought": 1, "branchId": branch})
}

#[tokio::test]
async fn branches_of_a_thinking_session_are_evaluated_compared_closed_and_merged() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let first = structured(
        &call(
            &client,
            "sequentialthinking",
            common::thought(1, 5, true, "Root"),
        )
        .await,
    );
    let session = first["sessionId"].as_str().unwrap().to_string();
    call(
        &client,
        "sequentialthinking",
        branch_thought(2, "Try A", "a"),
    )
    .await;
    call(
        &client,
        "sequentialthinking",
        branch_thought(2, "Try B", "b"),
    )
    .await;
    call(
        &client,
        "sequentialthinking",
        branch_thought(3, "A works", "a"),
    )
    .await;

    let a = structured(&call(&client, "evaluate_branch", json!({"sessionId": session, "branchId": "a", "feasibility": 9, "completeness": 8, "coherence": 8, "novelty": 6, "convergence": 9, "risk": 2, "recommendation": "pursue"})).await);
    // .25×9 + .2×8 + .2×8 + .15×6 + .1×9 + .1×(10−2) = 8.05
    assert_eq!(a["score"], 8.05, "{a}");
    assert_eq!(
        a["criteria"][5],
        json!({"name": "risk", "score": 2.0, "weight": 0.1, "inverted": true})
    );
    let b = structured(
        &call(
            &client,
            "evaluate_branch",
            json!({"sessionId": session, "branchId": "b", "feasibility": "6", "risk": 9}),
        )
        .await,
    );
    assert_eq!(b["score"], 4.85, "{b}");
    for bad in [
        json!({"sessionId": session, "branchId": "zzz"}),
        json!({"sessionId": session, "branchId": "a", "risk": "abc"}),
        json!({"sessionId": session, "branchId": "a", "novelty": 10.5}),
        json!({"sessionId": "nope", "branchId": "a"}),
    ] {
        assert!(is_error(&call(&client, "evaluate_branch", bad).await));
    }
    let mut rankings = serde_json::Map::new();
    for method in ["max_score", "weighted_voting", "risk_adjusted", "consensus"] {
        let ranked = structured(
            &call(
                &client,
                "compare_branches",
                json!({"sessionId": session, "method": method}),
            )
            .await,
        );
        assert_eq!(ranked["ranking"][0]["branchId"], "a", "{ranked}");
        assert!(
            ranked["explanation"]
                .as_str()
                .unwrap()
                .contains("ranks first"),
            "{ranked}"
        );
        rankings.insert(method.into(), ranked);
    }
    check_json("planning_compare_branches", &Value::Object(rankings));

    let closed = structured(
        &call(
            &client,
            "close_branch",
            json!({"sessionId": session, "branchId": "b", "conclusion": "B is too risky"}),
        )
        .await,
    );
    assert_eq!(closed["closed"], true);
    assert!(is_error(
        &call(
            &client,
            "close_branch",
            json!({"sessionId": session, "branchId": "b", "conclusion": "again"})
        )
        .await
    ));
    let refused = call(&client, "sequentialthinking", json!({"thought": "More B", "thoughtNumber": 3, "totalThoughts": 5, "nextThoughtNeeded": true, "branchFromThought": 1, "branchId": "b", "sessionId": session})).await;
    assert!(is_error(&refused));
    assert!(text(&refused).contains("closed"), "{}", text(&refused));

    let merged = structured(
        &call(
            &client,
            "merge_branch",
            json!({"sessionId": session, "branchId": "b"}),
        )
        .await,
    );
    assert_eq!(merged["thought"], "Merged branch b: B is too risky");
    assert_eq!(merged["thoughtNumber"], 2);
    let appended = structured(
        &call(
            &client,
            "merge_branch",
            json!({"sessionId": session, "branchId": "a", "strategy": "append"}),
        )
        .await,
    );
    assert_eq!(
        appended["thought"],
        "Merged branch a: A works\n- Try A\n- A works"
    );
    let before =
        structured(&call(&client, "get_history", json!({"sessionId": session})).await)["headSeq"]
            .clone();
    let unknown = call(
        &client,
        "merge_branch",
        json!({"sessionId": session, "branchId": "ghost"}),
    )
    .await;
    assert!(
        is_error(&unknown) && text(&unknown).contains("ghost"),
        "{}",
        text(&unknown)
    );
    assert!(is_error(
        &call(
            &client,
            "merge_branch",
            json!({"sessionId": session, "branchId": "a", "strategy": "squash"})
        )
        .await
    ));
    let after =
        structured(&call(&client, "get_history", json!({"sessionId": session})).await)["headSeq"]
            .clone();
    assert_eq!(before, after, "refusals record nothing");

    let markdown = text(
        &call(
            &client,
            "export_session",
            json!({"sessionId": session, "format": "markdown"}),
        )
        .await,
    );
    assert!(
        markdown.contains("Merged branch b: B is too risky"),
        "{markdown}"
    );
    let replay = structured(
        &call(
            &client,
            "replay_session",
            json!({"sessionId": session, "atSeq": after}),
        )
        .await,
    );
    assert_eq!(
        replay["planning"]["evaluations"].as_array().unwrap().len(),
        2
    );
    assert_eq!(
        replay["planning"]["closes"][0]["conclusion"],
        "B is too risky"
    );
    assert_eq!(replay["planning"]["merges"].as_array().unwrap().len(), 2);
    let out = common::cli(dir.path(), &["verify"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
}

#[tokio::test]
async fn branch_tools_work_on_a_plans_approaches() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let session = plan_to_evaluate(&client).await;
    let ranked =
        structured(&call(&client, "compare_branches", json!({"sessionId": session})).await);
    assert_eq!(ranked["ranking"][0]["branchId"], "redis");
    assert_eq!(ranked["ranking"][0]["name"], "Redis cache");
    assert_eq!(ranked["ranking"][1]["score"], 6.8);
    // One evaluation per approach, whichever tool records it.
    assert!(is_error(
        &call(
            &client,
            "evaluate_branch",
            json!({"sessionId": session, "branchId": "memo"})
        )
        .await
    ));
    structured(
        &call(
            &client,
            "close_branch",
            json!({"sessionId": session, "branchId": "memo", "conclusion": "Not shared"}),
        )
        .await,
    );
    let merged = structured(
        &call(
            &client,
            "merge_branch",
            json!({"sessionId": session, "branchId": "memo"}),
        )
        .await,
    );
    assert_eq!(merged["thought"], "Merged branch memo: Not shared");
    let done = ok(&dp(&client, finalize_args("json")).await);
    assert_eq!(
        done["plan"]["rejectedApproaches"][0]["name"],
        "In-process memo"
    );
}

#[tokio::test]
async fn session_exports_show_the_plan_and_the_branch_events_and_survive_an_import() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let plan = plan_to_evaluate(&client).await;
    structured(
        &call(
            &client,
            "close_branch",
            json!({"sessionId": plan, "branchId": "memo", "conclusion": "Not | shared"}),
        )
        .await,
    );
    ok(&dp(&client, finalize_args("markdown")).await);
    let first = structured(
        &call(
            &client,
            "sequentialthinking",
            common::thought(1, 3, true, "Root"),
        )
        .await,
    );
    let thinking = first["sessionId"].as_str().unwrap().to_string();
    call(
        &client,
        "sequentialthinking",
        branch_thought(2, "Try \"A\" --> end", "a"),
    )
    .await;
    structured(
        &call(
            &client,
            "evaluate_branch",
            json!({"sessionId": thinking, "branchId": "a", "feasibility": 9}),
        )
        .await,
    );
    structured(
        &call(
            &client,
            "close_branch",
            json!({"sessionId": thinking, "branchId": "a", "conclusion": "A [works]"}),
        )
        .await,
    );
    structured(
        &call(
            &client,
            "merge_branch",
            json!({"sessionId": thinking, "branchId": "a"}),
        )
        .await,
    );

    for (name, session) in [("plan", &plan), ("branches", &thinking)] {
        for format in ["markdown", "mermaid"] {
            let exported = text(
                &call(
                    &client,
                    "export_session",
                    json!({"sessionId": session, "format": format}),
                )
                .await,
            );
            check_plan(&format!("planning_export_{name}_{format}"), &exported);
        }
        let json_export = text(
            &call(
                &client,
                "export_session",
                json!({"sessionId": session, "format": "json"}),
            )
            .await,
        );
        let tree: Value = serde_json::from_str(&json_export).unwrap();
        check_plan_json(
            &format!("planning_export_{name}_json_planning"),
            &tree["planning"],
        );
        // JSONL → import into another ledger → verify → the same JSONL, byte for byte.
        let out = common::cli(dir.path(), &["export", session, "--format", "jsonl"]);
        assert!(out.status.success(), "{}", common::stderr(&out));
        let jsonl = common::stdout(&out);
        let other = data_dir();
        let file = other.path().join("export.jsonl");
        std::fs::write(&file, &jsonl).unwrap();
        let import = common::cli(other.path(), &["import", file.to_str().unwrap()]);
        assert!(import.status.success(), "{}", common::stderr(&import));
        let verify = common::cli(other.path(), &["verify"]);
        assert!(verify.status.success(), "{}", common::stderr(&verify));
        let again = common::cli(other.path(), &["export", session, "--format", "jsonl"]);
        assert_eq!(
            common::as_imported(&common::stdout(&again)),
            jsonl,
            "{name}"
        );
    }
}

/// Brings a new plan to `state` (init, clarify, explore, evaluate or done).
async fn plan_in(client: &Client, state: &str) {
    ok(&dp(
        client,
        json!({"phase": "init", "problem": format!("to {state}")}),
    )
    .await);
    let steps: &[Value] = &[
        json!({"phase": "clarify", "question": "q"}),
        json!({"phase": "explore", "branchId": "a", "name": "A"}),
        json!({"phase": "evaluate", "branchId": "a"}),
        json!({"phase": "finalize", "selectedBranch": "a"}),
    ];
    let upto = match state {
        "init" => 0,
        "clarify" => 1,
        "explore" => 2,
        "evaluate" => 3,
        _ => 4,
    };
    for step in &steps[..upto] {
        ok(&dp(client, step.clone()).await);
    }
}

/// A call of `phase` that is valid once the plan allows it (branch "b" is new; "a"
/// exists, and is not yet evaluated until the evaluate state).
fn call_of(phase: &str) -> Value {
    match phase {
        "init" => json!({"phase": "init", "problem": "again"}),
        "clarify" => json!({"phase": "clarify", "question": "q2"}),
        "explore" => json!({"phase": "explore", "branchId": "b", "name": "B"}),
        "evaluate" => json!({"phase": "evaluate", "branchId": "a"}),
        _ => json!({"phase": "finalize", "selectedBranch": "a"}),
    }
}

#[tokio::test]
async fn every_transition_of_the_phase_machine() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let allowed: [(&str, &[&str]); 5] = [
        ("init", &["clarify", "explore"]),
        ("clarify", &["clarify", "explore"]),
        ("explore", &["explore", "evaluate", "clarify"]),
        ("evaluate", &["evaluate", "explore", "finalize"]),
        ("done", &["init"]),
    ];
    for (state, next) in allowed {
        plan_in(&client, state).await;
        for phase in ["clarify", "explore", "evaluate", "finalize"] {
            if next.contains(&phase) {
                continue;
            }
            let refusal = refused(&dp(&client, call_of(phase)).await, "Cannot transition");
            assert_eq!(refusal["phase"], state, "{refusal}");
            assert_eq!(refusal["validNextPhases"], json!(next), "{refusal}");
        }
        for phase in next.iter().copied().chain(["init"]) {
            plan_in(&client, state).await;
            // In evaluate, "a" is evaluated already: evaluate the new "b" instead.
            let mut args = call_of(phase);
            if state == "evaluate" && phase == "evaluate" {
                ok(&dp(&client, call_of("explore")).await);
                args["branchId"] = json!("b");
            }
            let answer = ok(&dp(&client, args).await);
            let expected = if phase == "finalize" { "done" } else { phase };
            assert_eq!(answer["phase"], expected, "{state} → {phase}: {answer}");
        }
    }
}

#[tokio::test]
async fn the_spec_score_vectors_and_step_normalisation_over_the_binary() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    ok(&dp(&client, json!({"phase": "init", "problem": "scores"})).await);
    let vectors = [
        ([10, 10, 10, 0], "10.00"),
        ([0, 0, 0, 10], "0.00"),
        ([8, 7, 9, 3], "7.80"),
        ([7, 6, 8, 4], "6.80"),
    ];
    for (i, ([f, c, h, r], shown)) in vectors.into_iter().enumerate() {
        let branch = format!("v{i}");
        ok(&dp(
            &client,
            json!({"phase": "explore", "branchId": branch, "name": branch}),
        )
        .await);
        let answer = ok(&dp(&client, json!({"phase": "evaluate", "branchId": branch, "feasibility": f, "completeness": c.to_string(), "coherence": h, "risk": r})).await);
        let message = answer["message"].as_str().unwrap();
        assert!(message.contains(&format!("score: {shown}/10")), "{message}");
    }
    let steps = json!([
        {"title": "canonical", "action": "alias", "description": "canon", "detail": "alias"},
        {"action": "from action", "details": "from details"},
        {"name": "from name", "info": "from info"},
        {"step": "from step"},
        {"title": 42, "name": "first string wins", "description": ["no"], "detail": "detail"},
        {"files": "one.rs", "dependencies": [1, "two"], "complexity": 3}
    ]);
    let done = ok(&dp(&client, json!({"phase": "finalize", "selectedBranch": "v2", "format": "json", "steps": steps.to_string()})).await);
    let got: Vec<(String, String)> = done["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["title"].as_str().unwrap().to_string(),
                s["description"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        ("canonical", "canon"),
        ("from action", "from details"),
        ("from name", "from info"),
        ("from step", ""),
        ("first string wins", "detail"),
        ("Step 6", ""),
    ];
    assert_eq!(got.len(), want.len());
    for ((title, description), (t, d)) in got.iter().zip(want) {
        assert_eq!((title.as_str(), description.as_str()), (t, d));
    }
    let last = &done["plan"]["steps"][5];
    assert_eq!(last["files"], json!(["one.rs"]));
    assert_eq!(last["dependencies"], json!(["1", "two"]));
    assert_eq!(last["complexity"], "3");
    assert_eq!(done["plan"]["selectedApproach"]["score"], 7.8);
}

#[tokio::test]
async fn branch_tool_answers_and_their_refusals() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let first = structured(
        &call(
            &client,
            "sequentialthinking",
            common::thought(1, 3, true, "Root"),
        )
        .await,
    );
    let session = first["sessionId"].as_str().unwrap().to_string();
    call(
        &client,
        "sequentialthinking",
        branch_thought(2, "Try A", "a"),
    )
    .await;
    let head = |v: &Value| v["eventSeq"].as_u64().unwrap();
    let evaluated = structured(&call(&client, "evaluate_branch", json!({"sessionId": session, "branchId": "a", "feasibility": "9.5", "rationale": "good", "recommendation": "pursue"})).await);
    let closed = structured(
        &call(
            &client,
            "close_branch",
            json!({"sessionId": session, "branchId": "a", "conclusion": "done"}),
        )
        .await,
    );
    let merged = structured(
        &call(
            &client,
            "merge_branch",
            json!({"sessionId": session, "branchId": "a", "strategy": "append"}),
        )
        .await,
    );
    assert_eq!((head(&evaluated), head(&closed), head(&merged)), (4, 5, 6));
    check_json(
        "planning_branch_answers",
        &json!({"evaluate_branch": evaluated, "close_branch": closed, "merge_branch": merged}),
    );
    let long = "b".repeat(10_000);
    for (tool, args) in [
        (
            "evaluate_branch",
            json!({"sessionId": session, "branchId": long}),
        ),
        (
            "close_branch",
            json!({"sessionId": session, "branchId": long, "conclusion": "c"}),
        ),
        (
            "merge_branch",
            json!({"sessionId": session, "branchId": long}),
        ),
        (
            "close_branch",
            json!({"sessionId": session, "branchId": "a"}),
        ),
        (
            "close_branch",
            json!({"sessionId": session, "branchId": "a", "conclusion": "  "}),
        ),
        ("merge_branch", json!({"sessionId": session})),
        (
            "merge_branch",
            json!({"sessionId": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "branchId": "a"}),
        ),
        (
            "compare_branches",
            json!({"sessionId": session, "method": "vibes"}),
        ),
        (
            "evaluate_branch",
            json!({"sessionId": session, "branchId": "a", "convergence": {"x": 1}}),
        ),
    ] {
        let result = call(&client, tool, args.clone()).await;
        assert!(is_error(&result), "{tool} {args}: {}", text(&result));
        assert!(
            text(&result).starts_with("Input validation error"),
            "{}",
            text(&result)
        );
    }
    let history = structured(&call(&client, "get_history", json!({"sessionId": session})).await);
    assert_eq!(history["headSeq"], 6, "refusals record nothing");
    let not_found = structured(&call(&client, "get_plan", json!({"sessionId": session})).await);
    assert_eq!(
        not_found["found"], false,
        "a thinking session is not a plan"
    );
    check_json("planning_get_plan_not_found", &not_found);
    // A plan's id given to a thinking tool, and a thinking id given to deep_planning.
    let wrong = refused(
        &dp(
            &client,
            json!({"phase": "clarify", "question": "q", "sessionId": session}),
        )
        .await,
        "thinking session",
    );
    assert_eq!(wrong["sessionId"], "", "{wrong}");
}

#[tokio::test]
async fn two_processes_write_one_plan_at_the_same_time() {
    let dir = data_dir();
    let one = spawn_planning(dir.path()).await;
    let two = spawn_planning(dir.path()).await;
    let init = ok(&dp(&one, json!({"phase": "init", "problem": "Shared plan"})).await);
    let session = init["sessionId"].as_str().unwrap().to_string();
    let explore = |branch: &str| json!({"phase": "explore", "branchId": branch, "name": "N", "sessionId": session});
    // Six approaches from both processes at once, and the same branch from both: exactly
    // one of those two records it.
    let (a, b, c, d, e, f, same_one, same_two) = tokio::join!(
        dp(&one, explore("b0")),
        dp(&two, explore("b1")),
        dp(&one, explore("b2")),
        dp(&two, explore("b3")),
        dp(&one, explore("b4")),
        dp(&two, explore("b5")),
        dp(&one, explore("same")),
        dp(&two, explore("same")),
    );
    let results = [a, b, c, d, e, f, same_one, same_two];
    let refusals = results.iter().filter(|r| is_error(r)).count();
    assert_eq!(refusals, 1, "only the second \"same\" is refused");
    for result in results.iter().filter(|r| is_error(r)) {
        refused(result, "already exists");
    }
    let counts: Vec<u64> = results
        .iter()
        .filter(|r| !is_error(r))
        .map(|r| answer(r)["approachCount"].as_u64().unwrap())
        .collect();
    let mut sorted = counts.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (1..=7).collect::<Vec<u64>>(),
        "each write saw every earlier one"
    );
    let plan = structured(
        &call(
            &two,
            "get_plan",
            json!({"sessionId": session, "format": "json"}),
        )
        .await,
    );
    assert_eq!(plan["plan"]["approaches"].as_array().unwrap().len(), 7);
    let out = common::cli(dir.path(), &["verify"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
}

/// A risk given as a plain string is drawn as that string: the page's detail line is
/// `risk: <text>`, never `risk: <text> →` with nothing after the arrow; a risk with a
/// mitigation keeps its arrow.
#[tokio::test]
async fn a_plain_string_risk_renders_without_a_dangling_arrow() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let plan = plan_to_evaluate(&client).await;
    let mut args = finalize_args("markdown");
    args["sessionId"] = json!(plan);
    args["risks"] = json!([
        "Redis goes down at night",
        {"description": "Stale results", "mitigation": "Short TTL"}
    ]);
    ok(&dp(&client, args).await);
    client.cancel().await.unwrap();
    let out = common::cli(dir.path(), &["export", &plan, "--format", "html"]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let page = common::stdout(&out);
    assert!(
        page.contains("<div class=\"meta\">risk: Redis goes down at night</div>"),
        "{page}"
    );
    assert!(
        page.contains("<div class=\"meta\">risk: Stale results → Short TTL</div>"),
        "{page}"
    );
    assert!(
        !page.contains("→ </div>") && !page.contains("→</div>"),
        "{page}"
    );
}

/// The `continue` prompt on a finalized plan offers only what continues it (reading it),
/// never `init` (a new plan; issue 42); on an open plan, only its next phases.
#[tokio::test]
async fn the_continue_prompt_never_offers_init() {
    let dir = data_dir();
    let client = spawn_planning(dir.path()).await;
    let plan = plan_to_evaluate(&client).await;
    let open = continue_data(&client, &plan).await;
    assert_eq!(open["resume"]["tool"], "deep_planning", "{open}");
    assert_eq!(
        open["plan"]["validNextPhases"],
        json!(["evaluate", "explore", "finalize"])
    );
    ok(&dp(&client, finalize_args("markdown")).await);
    let done = continue_data(&client, &plan).await;
    assert_eq!(done["plan"]["phase"], "done", "{done}");
    assert_eq!(done["plan"]["validNextPhases"], json!([]), "{done}");
    assert_eq!(done["resume"]["tool"], "get_plan", "{done}");
    assert_eq!(
        done["resume"]["arguments"],
        json!({"sessionId": plan}),
        "{done}"
    );
    assert_eq!(done["resume"]["available"], true, "{done}");
    assert!(!done.to_string().contains("init"), "{done}");
}

/// The data block of the `continue` prompt for `session`.
async fn continue_data(client: &Client, session: &str) -> Value {
    let arguments = json!({"sessionId": session}).as_object().unwrap().clone();
    let result = client
        .get_prompt(rmcp::model::GetPromptRequestParams::new("continue").with_arguments(arguments))
        .await
        .expect("prompts/get");
    crate::surface::data_of(&serde_json::to_value(result).unwrap())
}
