//! The thinking toolset against the real binary: every case the reference server's tests
//! pin (specs/thinking.md, cases 1–10), the coercion policy, sessions, the tool
//! definitions (their sizes: `context`), toolset selection, `think`, and the stderr box.

use crate::common::{
    self, Client, call, is_error, spawn, spawn_with, spawn_with_stderr, structured, text, thought,
    try_call,
};
use rmcp::model::Tool;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

const SEQ: &str = "sequentialthinking";
const PREFIX: &str = "Input validation error: Invalid arguments for tool sequentialthinking: ";

/// A successful sequentialthinking call's structured answer.
async fn seq(client: &Client, args: Value) -> Value {
    structured(&call(client, SEQ, args).await)
}

/// A rejected sequentialthinking call's text (checked to be a validation error).
async fn seq_err(client: &Client, args: Value) -> String {
    let result = call(client, SEQ, args).await;
    assert!(
        is_error(&result),
        "expected an error, got {}",
        text(&result)
    );
    assert!(
        result.structured_content.is_none(),
        "an error carries no structuredContent"
    );
    let message = text(&result);
    assert!(
        message.starts_with(PREFIX),
        "unexpected error text: {message}"
    );
    message
}

/// `base` with `key` set to `value`.
fn with(mut base: Value, key: &str, value: Value) -> Value {
    base[key] = value;
    base
}

/// `base` without `key`.
fn without(mut base: Value, key: &str) -> Value {
    base.as_object_mut().unwrap().remove(key);
    base
}

fn names(tools: &[Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

async fn listed(client: &Client) -> Vec<Tool> {
    client.list_tools(None).await.expect("tools/list").tools
}

/// The session's events as get_history shows them.
async fn history(client: &Client, session: &Value) -> Vec<Value> {
    let result = call(
        client,
        "get_history",
        json!({"sessionId": session, "limit": 500}),
    )
    .await;
    structured(&result)["events"].as_array().unwrap().clone()
}

/// Payloads of the session's recorded thoughts, in order.
async fn thought_payloads(client: &Client, session: &Value) -> Vec<Value> {
    history(client, session)
        .await
        .into_iter()
        .filter(|e| e["type"] == "thought_recorded")
        .map(|e| e["payload"].clone())
        .collect()
}

// ---- the reference's cases ----

#[tokio::test]
async fn reference_case_1_basic_thought_answers_the_reference_fields() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let result = call(&client, SEQ, thought(1, 3, true, "t")).await;
    let answer = structured(&result);
    assert_eq!(answer["thoughtNumber"], 1);
    assert_eq!(answer["totalThoughts"], 3);
    assert_eq!(answer["nextThoughtNeeded"], true);
    assert_eq!(answer["branches"], json!([]));
    assert_eq!(answer["thoughtHistoryLength"], 1);
    assert!(answer["sessionId"].is_string());
    assert!(answer["eventSeq"].as_u64().unwrap() >= 1);
    // The text content is the same object as pretty JSON.
    let from_text: Value = serde_json::from_str(&text(&result)).expect("text is JSON");
    assert_eq!(from_text, answer);
    assert!(
        text(&result).contains("\n  \"thoughtNumber\": 1"),
        "pretty JSON"
    );
}

#[tokio::test]
async fn reference_case_2_total_thoughts_is_raised_to_thought_number_and_can_be_lowered_again() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let answer = seq(&client, thought(5, 3, true, "past the estimate")).await;
    assert_eq!(answer["thoughtNumber"], 5);
    assert_eq!(answer["totalThoughts"], 5);
    let answer = seq(&client, thought(6, 10, true, "raise")).await;
    assert_eq!(answer["totalThoughts"], 10);
    let answer = seq(&client, thought(7, 8, false, "lower again")).await;
    assert_eq!(answer["totalThoughts"], 8);
}

#[tokio::test]
async fn reference_case_3_two_branches_from_one_thought_are_both_listed() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    seq(&client, thought(1, 3, true, "Main thought")).await;
    let a = with(
        with(
            thought(2, 3, true, "Branch A thought"),
            "branchFromThought",
            json!(1),
        ),
        "branchId",
        json!("branch-a"),
    );
    seq(&client, a).await;
    let b = with(
        with(
            thought(2, 3, false, "Branch B thought"),
            "branchFromThought",
            json!(1),
        ),
        "branchId",
        json!("branch-b"),
    );
    let answer = seq(&client, b).await;
    assert_eq!(answer["branches"], json!(["branch-a", "branch-b"]));
    assert_eq!(answer["thoughtHistoryLength"], 3);
}

#[tokio::test]
async fn reference_case_4_two_thoughts_on_one_branch_list_it_once() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    seq(&client, thought(1, 3, true, "main")).await;
    for n in [2, 3] {
        let args = with(
            with(
                thought(n, 3, true, "on branch a"),
                "branchFromThought",
                json!(1),
            ),
            "branchId",
            json!("branch-a"),
        );
        let answer = seq(&client, args).await;
        assert_eq!(answer["branches"], json!(["branch-a"]));
    }
}

#[tokio::test]
async fn reference_case_5_branch_ids_are_listed_once_in_first_seen_order_and_need_both_fields() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    seq(&client, thought(1, 5, true, "main")).await;
    let mut answer = Value::Null;
    for (n, id) in [(2, "b"), (3, "a"), (4, "b")] {
        let args = with(
            with(thought(n, 5, true, "branch"), "branchFromThought", json!(1)),
            "branchId",
            json!(id),
        );
        answer = seq(&client, args).await;
    }
    assert_eq!(answer["branches"], json!(["b", "a"]));
    assert_eq!(answer["thoughtHistoryLength"], 4);

    // Each incomplete branch in a session of its own: nothing is recorded as a branch.
    let incomplete = [
        json!({"branchId": "only-id"}),
        json!({"branchFromThought": 1}),
        json!({"branchFromThought": 1, "branchId": ""}),
    ];
    for extra in incomplete {
        let first = seq(&client, thought(1, 2, true, "fresh main")).await;
        assert_eq!(first["thoughtHistoryLength"], 1, "a new session");
        let mut args = thought(2, 2, false, "half a branch");
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        let answer = seq(&client, args).await;
        assert_eq!(answer["branches"], json!([]), "{extra}");
        assert_eq!(answer["thoughtHistoryLength"], 2, "{extra}");
        assert_eq!(answer["sessionId"], first["sessionId"]);
    }
}

#[tokio::test]
async fn reference_case_6_a_10000_character_thought_is_accepted_whole() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let long = "x".repeat(10_000);
    let answer = seq(&client, thought(1, 1, false, &long)).await;
    assert_eq!(answer["thoughtHistoryLength"], 1);
    let payloads = thought_payloads(&client, &answer["sessionId"]).await;
    assert_eq!(payloads[0]["thought"].as_str().unwrap().len(), 10_000);
}

#[tokio::test]
async fn empty_thought_is_accepted_like_the_reference() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let answer = seq(&client, thought(1, 2, true, "")).await;
    assert_eq!(answer["thoughtHistoryLength"], 1);
    let answer = seq(&client, thought(2, 2, false, "")).await;
    assert_eq!(answer["thoughtHistoryLength"], 2);
}

#[tokio::test]
async fn reference_case_7_boolean_strings_in_any_case_and_nothing_else() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let base = thought(1, 3, true, "t");
    let answer = seq(
        &client,
        with(base.clone(), "nextThoughtNeeded", json!("True")),
    )
    .await;
    assert_eq!(answer["nextThoughtNeeded"], true);
    let answer = seq(
        &client,
        with(base.clone(), "nextThoughtNeeded", json!("FALSE")),
    )
    .await;
    assert_eq!(answer["nextThoughtNeeded"], false);

    for (value, shown) in [
        (json!("yes"), r#"received string "yes""#),
        (json!(""), r#"received string """#),
        (json!("1"), r#"received string "1""#),
        (json!(1), "received number 1"),
        (json!(0), "received number 0"),
        (json!(null), "received null"),
    ] {
        let message = seq_err(
            &client,
            with(base.clone(), "nextThoughtNeeded", value.clone()),
        )
        .await;
        assert!(
            message.contains("nextThoughtNeeded: ") && message.contains(shown),
            "{value}: {message}"
        );
        assert!(message.contains("expected boolean"), "{value}: {message}");
    }
    // The server keeps serving.
    seq(&client, base).await;
}

#[tokio::test]
async fn reference_case_8_integer_strings_are_coerced_and_bad_numbers_name_field_and_value() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let args = json!({"thought": "t", "thoughtNumber": "2", "totalThoughts": "4", "nextThoughtNeeded": true});
    let answer = seq(&client, args).await;
    assert_eq!(answer["thoughtNumber"], 2);
    assert_eq!(answer["totalThoughts"], 4);
    let args = json!({"thought": "t", "thoughtNumber": " 3 ", "totalThoughts": "4", "nextThoughtNeeded": true});
    assert_eq!(seq(&client, args).await["thoughtNumber"], 3);

    let base = thought(1, 3, true, "t");
    for field in ["thoughtNumber", "totalThoughts"] {
        for (value, shown) in [
            (json!(0), "received 0"),
            (json!(-1), "received -1"),
            (json!(""), "received an empty string"),
            (json!(null), "received null"),
        ] {
            let message = seq_err(&client, with(base.clone(), field, value.clone())).await;
            assert!(
                message.contains(&format!("{field}: Too small")) && message.contains(shown),
                "{field}={value}: {message}"
            );
        }
        let message = seq_err(&client, with(base.clone(), field, json!(1.5))).await;
        assert!(
            message.contains(&format!("{field}: Invalid input: expected int"))
                && message.contains("1.5"),
            "{message}"
        );
        let message = seq_err(&client, with(base.clone(), field, json!("abc"))).await;
        assert!(
            message.contains(&format!("{field}: Invalid input: expected number"))
                && message.contains(r#""abc""#),
            "{message}"
        );
    }
    let message = seq_err(&client, with(base.clone(), "branchId", json!(7))).await;
    assert!(
        message.contains("branchId: Invalid input: expected string") && message.contains("7"),
        "{message}"
    );
    seq(&client, base).await;
}

#[tokio::test]
async fn reference_case_9_missing_required_fields_are_each_named() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let message = seq_err(
        &client,
        without(thought(1, 1, true, "t"), "nextThoughtNeeded"),
    )
    .await;
    assert_eq!(
        message,
        format!("{PREFIX}nextThoughtNeeded: Invalid input: expected boolean, received undefined")
    );
    let message = seq_err(&client, json!({"thought": "only the thought"})).await;
    for field in ["nextThoughtNeeded", "thoughtNumber", "totalThoughts"] {
        assert!(
            message.contains(&format!("{field}: Invalid input: expected")),
            "{field} not named: {message}"
        );
    }
    assert!(
        !message.contains("thought: "),
        "thought was given: {message}"
    );
    let message = seq_err(&client, json!({})).await;
    assert!(message.contains("thought: Invalid input: expected string, received undefined"));
}

#[tokio::test]
async fn reference_case_10_a_rejected_call_is_not_counted() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    assert_eq!(
        seq(&client, thought(1, 3, true, "one")).await["thoughtHistoryLength"],
        1
    );
    seq_err(
        &client,
        with(thought(2, 3, true, "bad"), "thoughtNumber", json!(0)),
    )
    .await;
    seq_err(&client, json!({"thought": "missing the rest"})).await;
    let answer = seq(&client, thought(2, 3, true, "two")).await;
    assert_eq!(answer["thoughtHistoryLength"], 2);
    let payloads = thought_payloads(&client, &answer["sessionId"]).await;
    let texts: Vec<&str> = payloads
        .iter()
        .map(|p| p["thought"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["one", "two"]);
}

// ---- spellings and coercion ----

#[tokio::test]
async fn alias_sequential_thinking_and_snake_case_arguments_are_accepted() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let args = json!({"thought": "snake", "thought_number": 1, "total_thoughts": 3, "next_thought_needed": true});
    let answer = structured(&call(&client, "sequential_thinking", args).await);
    assert_eq!(answer["thoughtNumber"], 1);
    assert_eq!(answer["totalThoughts"], 3);
    let args = json!({
        "thought": "revise", "thought_number": 2, "total_thoughts": 3, "next_thought_needed": true,
        "is_revision": true, "revises_thought": 1, "needs_more_thoughts": "false"
    });
    structured(&call(&client, "sequential_thinking", args).await);
    let args = json!({
        "thought": "branch", "thought_number": 3, "total_thoughts": 3, "next_thought_needed": false,
        "branch_from_thought": 1, "branch_id": "snake-branch"
    });
    let answer = structured(&call(&client, SEQ, args).await);
    assert_eq!(answer["branches"], json!(["snake-branch"]));
    assert_eq!(answer["thoughtHistoryLength"], 3);

    let payloads = thought_payloads(&client, &answer["sessionId"]).await;
    assert_eq!(payloads[1]["is_revision"], true);
    assert_eq!(payloads[1]["revises_thought"], 1);
    assert_eq!(payloads[1]["needs_more_thoughts"], false);
    // The call record keeps the name as called.
    assert_eq!(payloads[0]["call"]["tool"], "sequential_thinking");
    assert_eq!(payloads[2]["call"]["tool"], SEQ);
}

#[tokio::test]
async fn false_strings_never_become_true() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let mut session = Value::Null;
    for (n, text) in [(1, "false"), (2, "FALSE"), (3, "False"), (4, "fAlSe")] {
        let args = json!({
            "thought": "t", "thoughtNumber": n, "totalThoughts": 4, "nextThoughtNeeded": text,
            "isRevision": text, "needsMoreThoughts": text
        });
        let answer = seq(&client, args).await;
        assert_eq!(answer["nextThoughtNeeded"], false, "{text}");
        session = answer["sessionId"].clone();
    }
    for payload in thought_payloads(&client, &session).await {
        assert_eq!(payload["next_thought_needed"], false);
        assert_eq!(payload["is_revision"], false);
        assert_eq!(payload["needs_more_thoughts"], false);
    }
}

#[tokio::test]
async fn prototype_property_names_are_ordinary_branch_ids() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    seq(&client, thought(1, 4, true, "main")).await;
    let mut answer = Value::Null;
    for (n, id) in [(2, "constructor"), (3, "__proto__"), (4, "toString")] {
        let args = with(
            with(thought(n, 4, n < 4, id), "branchFromThought", json!(1)),
            "branchId",
            json!(id),
        );
        answer = seq(&client, args).await;
    }
    assert_eq!(
        answer["branches"],
        json!(["constructor", "__proto__", "toString"])
    );
    assert_eq!(answer["thoughtHistoryLength"], 4);
    let result = call(
        &client,
        "get_history",
        json!({"sessionId": answer["sessionId"], "branchId": "__proto__"}),
    )
    .await;
    let events = structured(&result)["events"].as_array().unwrap().clone();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["payload"]["thought"], "__proto__");
}

// ---- sessions ----

#[tokio::test]
async fn thought_history_length_counts_per_session() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let first = seq(&client, thought(1, 3, true, "first session")).await;
    assert_eq!(
        seq(&client, thought(2, 3, true, "more")).await["thoughtHistoryLength"],
        2
    );

    // thoughtNumber 1, not a revision: a new session.
    let second = seq(&client, thought(1, 2, true, "second session")).await;
    assert_ne!(second["sessionId"], first["sessionId"]);
    assert_eq!(second["thoughtHistoryLength"], 1);
    assert_eq!(second["eventSeq"], 2, "session_started, then the thought");

    // A revision of thought 1 does not start a new session.
    let revision = with(
        with(
            thought(1, 2, true, "revised first"),
            "isRevision",
            json!(true),
        ),
        "revisesThought",
        json!(1),
    );
    let answer = seq(&client, revision).await;
    assert_eq!(answer["sessionId"], second["sessionId"]);
    assert_eq!(answer["thoughtHistoryLength"], 2);

    // sessionId continues the old one.
    let old = with(
        thought(3, 3, false, "back to the first"),
        "sessionId",
        first["sessionId"].clone(),
    );
    let answer = seq(&client, old).await;
    assert_eq!(answer["sessionId"], first["sessionId"]);
    assert_eq!(answer["thoughtHistoryLength"], 3);
    assert_eq!(answer["eventSeq"], 4);
    // sessionId wins over thoughtNumber 1: the named session continues.
    let named_first = with(
        thought(1, 3, true, "a first thought, in the named session"),
        "sessionId",
        second["sessionId"].clone(),
    );
    let answer = seq(&client, named_first).await;
    assert_eq!(answer["sessionId"], second["sessionId"]);
    assert_eq!(answer["thoughtHistoryLength"], 3);
    let old = with(
        thought(3, 3, false, "first again"),
        "sessionId",
        first["sessionId"].clone(),
    );
    seq(&client, old).await;
    // ... and it is now the current one.
    let answer = seq(&client, thought(4, 4, false, "still first")).await;
    assert_eq!(answer["sessionId"], first["sessionId"]);
    assert_eq!(answer["thoughtHistoryLength"], 5);

    // An unknown sessionId is an error naming it, and nothing is recorded.
    for unknown in ["01ARZ3NDEKTSV4RRFFQ69G5FAV", "no-such-session"] {
        let message = seq_err(
            &client,
            with(thought(5, 5, true, "lost"), "sessionId", json!(unknown)),
        )
        .await;
        assert!(
            message.contains("sessionId: ") && message.contains(unknown),
            "{message}"
        );
    }
    let answer = seq(&client, thought(5, 5, false, "after the errors")).await;
    assert_eq!(answer["sessionId"], first["sessionId"]);
    assert_eq!(answer["thoughtHistoryLength"], 6);
}

#[tokio::test]
async fn sessions_continue_after_a_restart_by_session_id() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let first = seq(&client, thought(1, 3, true, "before restart")).await;
    client.cancel().await.expect("close");
    let client = spawn(dir.path()).await;
    let args = with(
        thought(2, 3, true, "after restart"),
        "sessionId",
        first["sessionId"].clone(),
    );
    let answer = seq(&client, args).await;
    assert_eq!(answer["sessionId"], first["sessionId"]);
    assert_eq!(answer["thoughtHistoryLength"], 2);
}

// ---- definitions ----

#[tokio::test]
async fn sequentialthinking_output_schema_and_answer_share_the_reference_key_order() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let tools = listed(&client).await;
    let tool = tools.iter().find(|t| t.name == SEQ).expect("listed");
    let schema = Value::Object((*tool.output_schema.clone().expect("outputSchema")).clone());
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        required[..5],
        [
            "thoughtNumber",
            "totalThoughts",
            "nextThoughtNeeded",
            "branches",
            "thoughtHistoryLength"
        ]
    );
    assert_eq!(required[5..], ["sessionId", "eventSeq"]);
    let properties: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(properties, required, "every field declared, in order");
    assert_eq!(schema["properties"]["branches"]["items"]["type"], "string");

    let answer = seq(&client, thought(1, 1, false, "t")).await;
    let keys: Vec<&String> = answer.as_object().unwrap().keys().collect();
    assert_eq!(keys, required);

    // Booleans and integers declare their string forms, one rule for both
    // (tools::args::boolean_schema, count_schema); that counts start at 1 is the server
    // instructions'.
    let input = Value::Object((*tool.input_schema).clone());
    assert_eq!(
        input["properties"]["nextThoughtNeeded"],
        json!({"type": ["boolean", "string"]})
    );
    assert_eq!(
        input["properties"]["thoughtNumber"],
        json!({"type": ["integer", "string"]})
    );
    assert_eq!(
        input["required"],
        json!([
            "thought",
            "nextThoughtNeeded",
            "thoughtNumber",
            "totalThoughts"
        ])
    );
}

#[tokio::test]
async fn thinking_tools_are_annotated_as_writing_closed_world_tools() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let tools = listed(&client).await;
    // The reference's title; `think`'s original has none (one would repeat the name).
    for (name, title) in [(SEQ, json!("Sequential Thinking")), ("think", Value::Null)] {
        let tool = tools.iter().find(|t| t.name == name).expect("listed");
        let json = serde_json::to_value(tool).unwrap();
        assert_eq!(json["title"], title);
        // Not read-only and not idempotent are MCP's defaults (absent hints); the title
        // is the tool's own, not repeated in the annotations.
        let annotations = tool.annotations.as_ref().expect("annotated");
        assert!(!annotations.read_only_hint.unwrap_or(false), "{name}");
        assert!(!annotations.idempotent_hint.unwrap_or(false), "{name}");
        assert_eq!(annotations.destructive_hint, Some(false), "{name}");
        assert_eq!(annotations.open_world_hint, Some(false), "{name}");
    }
    for tool in tools.iter().filter(|t| t.name != SEQ && t.name != "think") {
        let json = serde_json::to_value(tool).unwrap();
        assert_eq!(json["annotations"]["readOnlyHint"], true, "{}", tool.name);
        assert_eq!(json["annotations"]["openWorldHint"], false, "{}", tool.name);
        assert!(
            tool.output_schema.is_none(),
            "{}: ledger answers' rows are open objects",
            tool.name
        );
    }
}

#[tokio::test]
async fn every_tool_description_fits_in_1024_characters() {
    let dir = common::data_dir();
    let client = spawn_with(dir.path(), &["--toolsets", "all"], &[]).await;
    let tools = listed(&client).await;
    assert!(!tools.is_empty());
    for tool in &tools {
        let description = tool.description.as_deref().expect("described");
        let chars = description.chars().count();
        assert!(
            chars <= 1024,
            "{}: description is {chars} characters",
            tool.name
        );
        assert!(!description.trim().is_empty(), "{}", tool.name);
    }
}

// ---- toolsets ----

#[tokio::test]
async fn toolsets_flag_thinking_lists_only_thinking_tools() {
    let dir = common::data_dir();
    let client = spawn_with(dir.path(), &["--toolsets", "thinking"], &[]).await;
    assert_eq!(names(&listed(&client).await), [SEQ, "think"]);
    let error = try_call(&client, "list_sessions", json!({}))
        .await
        .unwrap_err();
    match error {
        rmcp::ServiceError::McpError(e) => {
            assert_eq!(e.code.0, -32602);
            // A tool of a toolset this server does not list: where it is, how to enable it.
            assert!(
                e.message
                    .starts_with("Tool list_sessions not found: it is in the ledger toolset"),
                "{}",
                e.message
            );
            assert!(e.message.contains("`--toolsets "), "{}", e.message);
            assert!(
                e.message.contains("REASONING_LEDGER_TOOLSETS="),
                "{}",
                e.message
            );
        }
        other => panic!("expected a JSON-RPC error, got {other}"),
    }
    seq(&client, thought(1, 1, false, "still serving")).await;
}

#[tokio::test]
async fn toolsets_all_lists_every_tool_and_the_default_thinking_and_ledger() {
    let dir = common::data_dir();
    let expected = [
        SEQ,
        "think",
        "list_sessions",
        "get_history",
        "search_history",
    ];
    let export = ["export_session", "replay_session"];
    let planning = [
        "deep_planning",
        "list_plans",
        "get_plan",
        "evaluate_branch",
        "compare_branches",
        "close_branch",
        "merge_branch",
    ];
    let client = spawn_with(dir.path(), &["--toolsets", "all"], &[]).await;
    // `all` adds the toolsets that are off by default (export, planning, qa, agent,
    // booster).
    let mut all: Vec<&str> = expected
        .iter()
        .chain(&export)
        .chain(&planning)
        .copied()
        .collect();
    all.push("sequentialthinking_qa");
    all.extend(["chat_agent", "create_branch", "get_branch_details"]);
    all.extend([
        "usage",
        "start",
        "step",
        "multi-step",
        "get-state",
        "summarize",
        "solve",
        "solve-text",
    ]);
    assert_eq!(names(&listed(&client).await), all);
    client.cancel().await.expect("close");
    let client = spawn(dir.path()).await;
    assert_eq!(names(&listed(&client).await), expected);
}

#[tokio::test]
async fn toolsets_env_variable_selects_the_ledger_toolset() {
    let dir = common::data_dir();
    let client = spawn_with(dir.path(), &[], &[("REASONING_LEDGER_TOOLSETS", "ledger")]).await;
    assert_eq!(
        names(&listed(&client).await),
        ["list_sessions", "get_history", "search_history"]
    );
    for name in [SEQ, "sequential_thinking", "think"] {
        match try_call(&client, name, thought(1, 1, false, "t")).await {
            Err(rmcp::ServiceError::McpError(e)) => {
                assert_eq!(e.code.0, -32602);
                assert!(
                    e.message.starts_with(&format!(
                        "Tool {name} not found: it is in the thinking toolset"
                    )),
                    "{}",
                    e.message
                );
            }
            other => panic!("{name}: expected a JSON-RPC error, got {other:?}"),
        }
    }
    structured(&call(&client, "list_sessions", json!({})).await);
}

/// `export_session` and `replay_session` are the export toolset's, off by default (every
/// description is paid for in every model request; a session's renderings are for people
/// and tools more than for a model thinking): not listed by default, listed with
/// `--toolsets export`, and called without it, the usual "not found" naming the toolset.
#[tokio::test]
async fn export_and_replay_are_listed_only_with_the_export_toolset() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let default = names(&listed(&client).await);
    let answer = structured(&call(&client, SEQ, thought(1, 1, false, "t")).await);
    let session = answer["sessionId"].clone();
    for (name, arguments) in [
        (
            "export_session",
            json!({"sessionId": session, "format": "markdown"}),
        ),
        ("replay_session", json!({"sessionId": session, "atSeq": 1})),
    ] {
        assert!(!default.iter().any(|tool| tool == name), "{default:?}");
        match try_call(&client, name, arguments).await {
            Err(rmcp::ServiceError::McpError(e)) => {
                assert_eq!(e.code.0, -32602);
                assert!(
                    e.message.starts_with(&format!(
                        "Tool {name} not found: it is in the export toolset"
                    )),
                    "{}",
                    e.message
                );
            }
            other => panic!("{name}: expected a JSON-RPC error, got {other:?}"),
        }
    }
    client.cancel().await.expect("close");
    let client = spawn_with(dir.path(), &["--toolsets", "export"], &[]).await;
    assert_eq!(
        names(&listed(&client).await),
        ["export_session", "replay_session"]
    );
    let exported = call(
        &client,
        "export_session",
        json!({"sessionId": session, "format": "markdown"}),
    )
    .await;
    assert!(!is_error(&exported), "{}", text(&exported));
    let replayed = structured(
        &call(
            &client,
            "replay_session",
            json!({"sessionId": session, "atSeq": 1}),
        )
        .await,
    );
    assert_eq!(replayed["atSeq"], 1, "{replayed}");
}

#[tokio::test]
async fn unknown_tool_is_a_json_rpc_invalid_params_error() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    for name in ["nope", "sequentialThinking", "Think"] {
        match try_call(&client, name, json!({})).await {
            Err(rmcp::ServiceError::McpError(e)) => {
                assert_eq!(e.code.0, -32602, "{name}");
                assert_eq!(e.message, format!("Tool {name} not found"));
            }
            other => panic!("{name}: expected a JSON-RPC error, got {other:?}"),
        }
    }
    seq(&client, thought(1, 1, false, "still serving")).await;
}

// ---- think ----

fn think(purpose: &str, index: u64) -> Value {
    json!({"thread_purpose": purpose, "thought": format!("thought {index}"), "thought_index": index})
}

#[tokio::test]
async fn think_answer_text_is_exact_and_mentions_a_tool_only_when_one_is_named() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let result = call(&client, "think", think("Plan the trip", 1)).await;
    assert!(!is_error(&result));
    assert_eq!(
        text(&result),
        "Thread purpose: Plan the trip\nThought 1 logged."
    );

    let args = with(
        think("Plan the trip", 2),
        "tool_recommendation",
        json!("web_search"),
    );
    let result = call(&client, "think", args).await;
    assert_eq!(
        text(&result),
        "Thread purpose: Plan the trip\nThought 2 logged. Recommended tool: web_search."
    );
    assert_eq!(structured(&result)["recommendedTool"], "web_search");

    for (index, none) in [(3, "None"), (4, "none"), (5, "NONE"), (6, "nOnE")] {
        let args = with(
            think("Plan the trip", index),
            "tool_recommendation",
            json!(none),
        );
        let result = call(&client, "think", args).await;
        assert_eq!(
            text(&result),
            format!("Thread purpose: Plan the trip\nThought {index} logged."),
            "{none}"
        );
        assert_eq!(structured(&result)["recommendedTool"], Value::Null);
    }
}

#[tokio::test]
async fn think_structured_content_splits_left_to_be_done_into_open_items() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let cases = [
        (
            json!("- book flights\n- reserve hotel\n3. pack"),
            json!(["book flights", "reserve hotel", "pack"]),
        ),
        (
            json!("compare prices; ask Ana"),
            json!(["compare prices", "ask Ana"]),
        ),
        (json!("None"), json!([])),
        (json!(""), json!([])),
    ];
    let mut session = Value::Null;
    for (i, (left, items)) in cases.into_iter().enumerate() {
        let index = i as u64 + 1;
        let args = with(think("Trip", index), "left_to_be_done", left.clone());
        let answer = structured(&call(&client, "think", args).await);
        assert_eq!(answer["openItems"], items, "{left}");
        assert_eq!(answer["threadPurpose"], "Trip");
        assert_eq!(answer["thoughtIndex"], index);
        if index == 1 {
            session = answer["sessionId"].clone();
        }
        assert_eq!(
            answer["sessionId"], session,
            "the same purpose continues the thread"
        );
        let keys: Vec<&String> = answer.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "sessionId",
                "eventSeq",
                "threadPurpose",
                "thoughtIndex",
                "recommendedTool",
                "openItems"
            ]
        );
    }
    // Without left_to_be_done: no open items.
    let answer = structured(&call(&client, "think", think("Trip", 5)).await);
    assert_eq!(answer["openItems"], json!([]));
}

#[tokio::test]
async fn think_threads_start_with_a_new_purpose_or_index_one() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let a1 = structured(&call(&client, "think", think("A", 1)).await);
    let a2 = structured(&call(&client, "think", think("A", 2)).await);
    assert_eq!(a1["sessionId"], a2["sessionId"]);
    let b2 = structured(&call(&client, "think", think("B", 2)).await);
    assert_ne!(
        b2["sessionId"], a1["sessionId"],
        "a new purpose starts a new thread"
    );
    let b1 = structured(&call(&client, "think", think("B", 1)).await);
    assert_ne!(
        b1["sessionId"], b2["sessionId"],
        "index 1 starts a new thread"
    );
    // session_id continues the named thread.
    let args = with(think("A", 3), "session_id", a1["sessionId"].clone());
    let a3 = structured(&call(&client, "think", args).await);
    assert_eq!(a3["sessionId"], a1["sessionId"]);
    assert_eq!(a3["eventSeq"], 4);
    // think's own validation names the field.
    let result = call(
        &client,
        "think",
        json!({"thread_purpose": "A", "thought": "x", "thought_index": 0}),
    )
    .await;
    assert!(is_error(&result));
    assert!(
        text(&result).contains("thought_index: Too small"),
        "{}",
        text(&result)
    );
}

// ---- the stderr box ----

async fn read_stderr(client: Client, mut stderr: tokio::process::ChildStderr) -> String {
    client.cancel().await.expect("close");
    let mut out = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stderr.read_to_string(&mut out),
    )
    .await
    .expect("server exits after stdin closes")
    .expect("read stderr");
    out
}

#[tokio::test]
async fn stderr_box_is_drawn_for_each_thought_unless_disabled() {
    let dir = common::data_dir();
    let (client, stderr) = spawn_with_stderr(dir.path(), None).await;
    seq(&client, thought(1, 3, true, "first")).await;
    let revision = with(
        with(thought(2, 3, true, "second"), "isRevision", json!(true)),
        "revisesThought",
        json!(1),
    );
    seq(&client, revision).await;
    let branch = with(
        with(thought(3, 3, false, "third"), "branchFromThought", json!(1)),
        "branchId",
        json!("alt"),
    );
    seq(&client, branch).await;
    let bare_revision = with(thought(4, 4, false, "fourth"), "isRevision", json!(true));
    seq(&client, bare_revision).await;
    let drawn = read_stderr(client, stderr).await;

    // Width: the longer of header and thought (UTF-16 units) plus 4.
    let border = "─".repeat(18);
    let expected = format!(
        "┌{border}┐\n│ 💭 Thought 1/3 │\n├{border}┤\n│ first{} │\n└{border}┘",
        " ".repeat(11)
    );
    assert!(
        drawn.contains(&expected),
        "box not found in stderr:\n{drawn}"
    );
    assert!(
        drawn.contains("│ 🔄 Revision 2/3 (revising thought 1) │"),
        "{drawn}"
    );
    assert!(
        drawn.contains("│ 🌿 Branch 3/3 (from thought 1, ID: alt) │"),
        "{drawn}"
    );
    assert!(drawn.contains("│ 🔄 Revision 4/4 │"), "{drawn}");
    assert!(!drawn.contains("undefined"), "{drawn}");

    for value in ["TRUE", "true", "True"] {
        let dir = common::data_dir();
        let (client, stderr) = spawn_with_stderr(dir.path(), Some(value)).await;
        seq(&client, thought(1, 3, true, "first")).await;
        let drawn = read_stderr(client, stderr).await;
        assert!(!drawn.contains("💭"), "{value}: box drawn anyway:\n{drawn}");
        assert!(!drawn.contains('┌'), "{value}: box drawn anyway:\n{drawn}");
    }
}

#[tokio::test]
async fn concurrent_calls_each_get_their_own_count_and_seq() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let first = seq(&client, thought(1, 9, true, "start")).await;
    let calls = (2..=9).map(|n| {
        let client = &client;
        async move { seq(client, thought(n, 9, true, &format!("parallel {n}"))).await }
    });
    let answers = futures_join_all(calls).await;
    let mut lengths: Vec<u64> = answers
        .iter()
        .map(|a| a["thoughtHistoryLength"].as_u64().unwrap())
        .collect();
    let mut seqs: Vec<u64> = answers
        .iter()
        .map(|a| a["eventSeq"].as_u64().unwrap())
        .collect();
    lengths.sort_unstable();
    seqs.sort_unstable();
    assert_eq!(lengths, (2..=9).collect::<Vec<_>>());
    assert_eq!(seqs, (3..=10).collect::<Vec<_>>());
    for answer in &answers {
        assert_eq!(answer["sessionId"], first["sessionId"]);
        // Each answer's count matches its seq: answered after its own commit.
        assert_eq!(
            answer["eventSeq"].as_u64().unwrap(),
            answer["thoughtHistoryLength"].as_u64().unwrap() + 1
        );
    }
}

/// Runs the futures concurrently on this task and collects their outputs in order.
async fn futures_join_all<F: std::future::Future>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output> {
    let mut set = Vec::new();
    for f in futures {
        set.push(Box::pin(f));
    }
    let mut outputs: Vec<Option<F::Output>> = set.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in set.iter_mut().enumerate() {
            if outputs[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => outputs[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().map(Option::unwrap).collect()
}

#[tokio::test]
async fn validation_errors_name_the_listed_tool_even_through_the_alias() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let result = call(&client, "sequential_thinking", json!({"thought": "x"})).await;
    assert!(is_error(&result));
    assert!(
        text(&result)
            .starts_with("Input validation error: Invalid arguments for tool sequentialthinking: "),
        "{}",
        text(&result)
    );
}

/// Issue 35: a stdio server says on stderr which ledger it records into (and that it is
/// new), and a client's mistake answered as an error is not logged again as a warning.
#[tokio::test]
async fn stdio_serve_names_its_ledger_and_logs_no_warning_for_an_answered_mistake() {
    let dir = common::data_dir();
    let (client, stderr) = spawn_with_stderr(dir.path(), Some("true")).await;
    // A JSON-RPC error answer (rmcp logs those as a "response error" warning).
    let refused = try_call(&client, "no_such_tool", json!({})).await;
    assert!(refused.is_err());
    let said = read_stderr(client, stderr).await;
    let ledger = dir.path().join("ledger.redb");
    assert!(
        said.contains(&format!(
            "serving MCP over stdio on {} (a new ledger)",
            ledger.display()
        )),
        "{said}"
    );
    assert!(!said.contains("response error"), "{said}");

    let (client, stderr) = spawn_with_stderr(dir.path(), Some("true")).await;
    let said = read_stderr(client, stderr).await;
    assert!(
        said.contains(&format!("serving MCP over stdio on {}\n", ledger.display())),
        "an existing ledger is not called new: {said}"
    );
}

/// Issue 35: a tool of a toolset this server does not list is named with its toolset and
/// how to enable it.
#[tokio::test]
async fn a_tool_of_a_disabled_toolset_says_how_to_enable_it() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    match try_call(&client, "deep_planning", json!({})).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(e.code.0, -32602);
            assert!(
                e.message.contains("in the planning toolset"),
                "{}",
                e.message
            );
            assert!(e.message.contains(",planning`"), "{}", e.message);
            assert!(e.message.contains("--toolsets all"), "{}", e.message);
            assert!(
                e.message.contains("REASONING_LEDGER_TOOLSETS="),
                "{}",
                e.message
            );
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_misspelt_argument_is_named_in_the_answer_with_the_name_meant() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let first = seq(&client, thought(1, 3, true, "t")).await;
    // `sesionId` is not read (the call goes to the connection's current session, not
    // necessarily the one named), and the answer says so.
    let result = call(
        &client,
        SEQ,
        with(
            thought(2, 3, true, "t"),
            "sesionId",
            first["sessionId"].clone(),
        ),
    )
    .await;
    let notes: Vec<String> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .filter(|t| t.starts_with("note: "))
        .collect();
    assert_eq!(
        notes,
        ["note: ignored argument `sesionId` (did you mean `sessionId`?)"],
        "{result:?}"
    );
    // The answer itself is unchanged: its first block is still the JSON.
    let from_text: Value = serde_json::from_str(&text(&result)).expect("text is JSON");
    assert_eq!(from_text, structured(&result));
    // Case and `_` count as close; a key read under another spelling is not reported.
    let result = call(
        &client,
        SEQ,
        with(
            with(thought(1, 1, false, "t"), "NextThoughtNeeded", json!(true)),
            "session_id",
            first["sessionId"].clone(),
        ),
    )
    .await;
    let last = result
        .content
        .last()
        .and_then(|c| c.as_text())
        .unwrap()
        .text
        .clone();
    assert_eq!(
        last,
        "note: ignored argument `NextThoughtNeeded` (did you mean `nextThoughtNeeded`?)"
    );
    // A validation error carries the note too: the misspelling is often its cause.
    let mut args = thought(1, 1, false, "t");
    args.as_object_mut().unwrap().remove("thought");
    let result = call(&client, SEQ, with(args, "thougth", json!("t"))).await;
    assert!(is_error(&result));
    let last = result
        .content
        .last()
        .and_then(|c| c.as_text())
        .unwrap()
        .text
        .clone();
    assert_eq!(
        last,
        "note: ignored argument `thougth` (did you mean `thought`?)"
    );
}

/// `serve --http` draws no thought on stderr unless `DISABLE_THOUGHT_LOGGING=false` asks
/// for it: a team server's log must not hold every user's thoughts (issue 48).
#[tokio::test]
async fn http_draws_no_thought_on_stderr_unless_asked() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    const TOKEN: &str = "thinking-http-token-of-at-least-32-chars";
    let _ = rustls::crypto::ring::default_provider().install_default();
    for (setting, drawn) in [(None, false), (Some("false"), true), (Some("true"), false)] {
        let dir = common::data_dir();
        let mut command = tokio::process::Command::new(common::bin());
        command
            .args(["serve", "--http", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .env("REASONING_LEDGER_TOKEN", TOKEN)
            .env_remove("REASONING_LEDGER_TOOLSETS")
            .env_remove("REASONING_LEDGER_STORE")
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        match setting {
            Some(value) => command.env("DISABLE_THOUGHT_LOGGING", value),
            None => command.env_remove("DISABLE_THOUGHT_LOGGING"),
        };
        let mut child = command.spawn().expect("spawn http server");
        let (url, stderr) =
            common::http_url_and_stderr(&mut child, std::time::Duration::from_secs(30)).await;
        let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(TOKEN);
        let client =
            ().serve(StreamableHttpClientTransport::from_config(config))
                .await
                .expect("initialize over HTTP");
        seq(&client, thought(1, 1, false, "a private thought")).await;
        client.cancel().await.ok();
        child.start_kill().unwrap();
        let said = stderr.await.unwrap();
        assert_eq!(
            said.contains("💭 Thought 1/1") && said.contains("a private thought"),
            drawn,
            "DISABLE_THOUGHT_LOGGING={setting:?}:\n{said}"
        );
    }
}
