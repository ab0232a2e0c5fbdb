//! `sequentialthinking_qa` over the real binary (`specs/qa.md`): routing by keywords,
//! recommendations filtered by the caller's tools, invalid recommendations, revisions and
//! branches, history across restarts and processes, user templates, exports, bad input.

use crate::common::{self, Client, call, check_json, is_error, spawn_with, structured, text};
use serde_json::{Value, json};
use std::path::Path;

const QA: &str = "sequentialthinking_qa";

async fn spawn_qa(dir: &Path) -> Client {
    spawn_with(dir, &["--toolsets", "qa,ledger,export"], &[]).await
}

fn step(n: u64, total: u64, next: bool, thought: &str) -> Value {
    json!({"thought": thought, "thought_number": n, "total_thoughts": total, "next_thought_needed": next})
}

fn with(mut base: Value, extra: Value) -> Value {
    for (key, value) in extra.as_object().unwrap() {
        base[key] = value.clone();
    }
    base
}

fn tool_names(step: &Value) -> Vec<String> {
    step["recommended_tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {step}"))
        .iter()
        .map(|t| t["tool_name"].as_str().unwrap().to_string())
        .collect()
}

/// Events of every session, for "nothing was recorded" checks.
async fn ledger_state(client: &Client) -> Vec<(String, u64)> {
    let listed = structured(&call(client, "list_sessions", json!({"limit": 200})).await);
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["sessionId"].as_str().unwrap().to_string(),
                s["events"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn qa_is_off_by_default_and_listed_when_chosen() {
    let dir = common::data_dir();
    let default = common::spawn(dir.path()).await;
    let names: Vec<String> = default
        .list_tools(None)
        .await
        .unwrap()
        .tools
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(!names.iter().any(|n| n == QA), "{names:?}");
    default.cancel().await.unwrap();
    let client = spawn_qa(dir.path()).await;
    let tools = client.list_tools(None).await.unwrap().tools;
    let qa = tools.iter().find(|t| t.name == QA).expect("listed");
    assert!(qa.description.as_ref().unwrap().len() <= 1024);
}

#[tokio::test]
async fn each_workflow_is_chosen_by_its_keywords() {
    let dir = common::data_dir();
    let client = spawn_qa(dir.path()).await;
    let cases = [
        (
            "Check which version of tailwind is installed",
            None,
            "version_verification",
        ),
        ("Is the PACKAGE pinned?", None, "version_verification"),
        (
            "Validate the syntax of the config",
            None,
            "syntax_validation",
        ),
        ("Look at the code style", None, "syntax_validation"),
        ("Look at it", Some("src/main.rs code"), "syntax_validation"),
        (
            "Any Breaking Changes between 3 and 4?",
            None,
            "compatibility_check",
        ),
        (
            "Check compatibility with node 22",
            None,
            "compatibility_check",
        ),
        ("Run the testing suite", None, "test"),
        ("Think about the deploy", None, "generic"),
    ];
    for (thought, target, workflow) in cases {
        let mut args = step(1, 3, true, thought);
        if let Some(target) = target {
            args["verification_target"] = json!(target);
        }
        let answer = structured(&call(&client, QA, args).await);
        assert_eq!(answer["workflow"]["name"], workflow, "{thought}: {answer}");
        assert_eq!(answer["thought_history_length"], 1, "a new session each");
        assert!(
            !answer["recommended_next_step"]["recommended_tools"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{answer}"
        );
    }
    // A later step without a keyword stays in the session's workflow.
    let first =
        structured(&call(&client, QA, step(1, 4, true, "verify the package version")).await);
    let second = structured(
        &call(
            &client,
            QA,
            with(
                step(2, 4, true, "now look it up"),
                json!({"session_id": first["session_id"]}),
            ),
        )
        .await,
    );
    assert_eq!(
        second["workflow"]["name"], "version_verification",
        "{second}"
    );
    assert!(
        second["workflow"]["why"]
            .as_str()
            .unwrap()
            .contains("first step"),
        "{second}"
    );
}

#[tokio::test]
async fn recommendations_are_filtered_and_ranked_by_the_callers_tools() {
    let dir = common::data_dir();
    let client = spawn_qa(dir.path()).await;
    let thought = "Need to verify Tailwind CSS version before configuring";
    // Without available tools: the template's tools, said to be unchecked.
    let open = structured(&call(&client, QA, step(1, 4, true, thought)).await);
    check_json("qa_answer_without_available_tools", &open);
    let next = &open["recommended_next_step"];
    assert_eq!(tool_names(next), vec!["web_search"]);
    assert_eq!(next["recommended_tools"][0]["confidence"], 0.9);
    assert!(
        next["recommended_tools"][0]["rationale"]
            .as_str()
            .unwrap()
            .contains("not checked against your tools")
    );
    assert_eq!(
        tool_names(&open["current_step"]),
        vec!["read_file", "execute_command"]
    );

    // With them: a search tool of the caller's stands in, with lower confidence and why.
    let tools = json!([
        "fs:read_file",
        {"name": "brave_search", "description": "Search the web"},
        "run_command"
    ]);
    let filtered = structured(
        &call(
            &client,
            QA,
            with(
                step(1, 4, true, thought),
                json!({"available_client_tools": tools}),
            ),
        )
        .await,
    );
    check_json("qa_answer_with_available_tools", &filtered);
    let next = &filtered["recommended_next_step"]["recommended_tools"][0];
    assert_eq!(next["tool_name"], "brave_search");
    assert_eq!(next["confidence"], 0.72);
    assert!(
        next["rationale"]
            .as_str()
            .unwrap()
            .contains("stands in for web_search"),
        "{next}"
    );
    assert_eq!(
        tool_names(&filtered["current_step"]),
        vec!["fs:read_file", "run_command"]
    );
    assert_eq!(
        filtered["current_step"]["recommended_tools"][1]["confidence"],
        0.56
    );
    assert!(filtered.get("invalid_recommendations").is_none());

    // The other accepted spelling; nothing usable: the tools are dropped, the step stays.
    let nothing = structured(
        &call(
            &client,
            QA,
            with(
                step(1, 4, true, thought),
                json!({"available_mcp_tools": ["draw_picture"]}),
            ),
        )
        .await,
    );
    assert!(
        tool_names(&nothing["recommended_next_step"]).is_empty(),
        "{nothing}"
    );
    assert!(nothing["recommended_next_step"]["step_description"].is_string());
    // An empty list says nothing about the caller's tools: nothing is filtered.
    let empty = structured(
        &call(
            &client,
            QA,
            with(step(1, 4, true, thought), json!({"available_tools": []})),
        )
        .await,
    );
    assert_eq!(
        tool_names(&empty["recommended_next_step"]),
        vec!["web_search"]
    );
    // A target that names none of the workflow's keywords lowers the confidence.
    let off_target = structured(
        &call(
            &client,
            QA,
            with(
                step(1, 4, true, thought),
                json!({"verification_target": "the landing page"}),
            ),
        )
        .await,
    );
    let tool = &off_target["recommended_next_step"]["recommended_tools"][0];
    assert_eq!(tool["confidence"], 0.77, "{tool}");
    assert!(
        tool["rationale"].as_str().unwrap().contains("target"),
        "{tool}"
    );
}

#[tokio::test]
async fn the_callers_missing_tools_are_invalid_recommendations_and_the_step_is_still_recorded() {
    let dir = common::data_dir();
    let client = spawn_qa(dir.path()).await;
    let current = json!({
        "step_description": "Check installed Tailwind version",
        "expected_outcome": "Confirmed version",
        "recommended_tools": [
            {"tool_name": "read_file", "confidence": 0.9, "rationale": "package.json", "priority": 1},
            {"tool_name": "tavily_search", "confidence": 0.7, "rationale": "search", "priority": "2",
             "alternatives": ["execute_command (yarn list)"], "suggested_inputs": {"query": "tailwind"}}
        ],
        "next_step_conditions": ["Version identified"]
    });
    let answer = structured(
        &call(
            &client,
            QA,
            with(
                step(1, 4, true, "Need to verify Tailwind CSS version"),
                json!({"current_step": current, "available_client_tools": ["read_file", "execute_command"],
                       "verification_target": "Tailwind CSS version", "remaining_steps": ["docs", "implement", "validate"]}),
            ),
        )
        .await,
    );
    check_json("qa_answer_invalid_recommendations", &answer);
    assert_eq!(answer["invalid_recommendations"], json!(["tavily_search"]));
    // The caller's step comes back as given, never rewritten.
    assert_eq!(
        answer["current_step"]["recommended_tools"][1]["tool_name"],
        "tavily_search"
    );
    assert_eq!(
        answer["current_step"]["recommended_tools"][1]["priority"],
        2
    );
    assert_eq!(
        answer["remaining_steps"],
        json!(["docs", "implement", "validate"])
    );
    let history = structured(
        &call(
            &client,
            "get_history",
            json!({"sessionId": answer["session_id"]}),
        )
        .await,
    );
    assert_eq!(history["events"][1]["type"], "qa_step_recorded");
    let payload = &history["events"][1]["payload"];
    assert_eq!(payload["thought"], "Need to verify Tailwind CSS version");
    assert_eq!(payload["invalid_recommendations"], json!(["tavily_search"]));
    assert_eq!(
        payload["current_step"]["recommended_tools"][1]["tool_name"],
        "tavily_search"
    );
}

#[tokio::test]
async fn revisions_and_branches_inside_a_qa_session_fold_search_and_export() {
    let dir = common::data_dir();
    let client = spawn_qa(dir.path()).await;
    let tools = json!([
        "read_file",
        "execute_command",
        "web_search",
        "write_to_file",
        "replace_in_file"
    ]);
    let first = structured(
        &call(
            &client,
            QA,
            with(
                step(1, 4, true, "Check the tailwind version"),
                json!({"available_client_tools": tools, "verification_target": "tailwind <v4> \"config\""}),
            ),
        )
        .await,
    );
    let session = first["session_id"].clone();
    let used = |tool: &str| {
        json!({"step_description": "s", "expected_outcome": "o", "next_step_conditions": [],
               "recommended_tools": [{"tool_name": tool, "confidence": 0.9, "rationale": "r", "priority": 1}]})
    };
    for (n, thought, tool) in [
        (2, "Read the docs of that version", "web_search"),
        (3, "Write the config", "write_to_file"),
        (4, "Build failed --> end; syntax error", "execute_command"),
    ] {
        call(
            &client,
            QA,
            with(
                step(n, 4, true, thought),
                json!({"session_id": session, "available_client_tools": tools, "current_step": used(tool)}),
            ),
        )
        .await;
    }
    let revision = structured(
        &call(
            &client,
            QA,
            with(
                step(5, 5, true, "Build failed. Revising the version config step"),
                json!({"session_id": session, "is_revision": true, "revises_thought": 3,
                       "available_client_tools": tools}),
            ),
        )
        .await,
    );
    check_json("qa_answer_revision", &revision);
    assert_eq!(revision["workflow"]["position"], 3);
    let tool = &revision["recommended_next_step"]["recommended_tools"][0];
    assert_eq!(tool["tool_name"], "execute_command");
    assert_eq!(tool["confidence"], 0.81, "a revision lowers it: {tool}");
    assert!(
        tool["rationale"]
            .as_str()
            .unwrap()
            .contains("revises thought 3")
    );
    let branch = structured(
        &call(
            &client,
            QA,
            with(
                step(
                    3,
                    5,
                    true,
                    "Several configurations found: try the CSS-first version",
                ),
                // A tool name is the model's text too: it must stay inside its label.
                json!({"session_id": session, "branch_from_thought": 2, "branch_id": "css-first",
                       "current_step": used("x\"] --> end %%{init} |y| click t2 call z()")}),
            ),
        )
        .await,
    );
    assert_eq!(branch["branches"], json!(["css-first"]));
    assert_eq!(branch["thought_history_length"], 6);
    assert_eq!(branch["previous_steps_count"], 5);

    let listed = structured(&call(&client, "list_sessions", json!({"kind": "qa"})).await);
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");
    let found = structured(
        &call(
            &client,
            "search_history",
            json!({"query": "css-first version"}),
        )
        .await,
    );
    assert_eq!(found["matches"][0]["kind"], "qa", "{found}");
    let found =
        structured(&call(&client, "search_history", json!({"query": "tailwind <v4>"})).await);
    assert!(
        !found["matches"].as_array().unwrap().is_empty(),
        "searchable by target: {found}"
    );

    let export = |format: &'static str| {
        let client = &client;
        let session = session.clone();
        async move {
            text(
                &call(
                    client,
                    "export_session",
                    json!({"sessionId": session, "format": format}),
                )
                .await,
            )
        }
    };
    let tree: Value = serde_json::from_str(&export("json").await).unwrap();
    let kinds: Vec<&str> = tree["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"revises") && kinds.contains(&"branches_from"),
        "{kinds:?}"
    );
    assert_eq!(tree["thoughts"][1]["usedTools"], json!(["web_search"]));
    assert_eq!(tree["thoughts"][1]["workflow"], "version_verification");
    let mermaid = export("mermaid").await;
    common::check("qa_export_mermaid", &mermaid);
    assert!(mermaid.contains("🔧 used web_search"), "{mermaid}");
    assert!(mermaid.contains("👉 next "), "{mermaid}");
    assert!(!mermaid.contains("-->  end"), "{mermaid}");
    let node = regex::Regex::new(r"^t\d+\[").unwrap();
    let edge = regex::Regex::new(r"^t\d+ -.* t\d+$").unwrap();
    let lines: Vec<&str> = mermaid.lines().map(str::trim_start).collect();
    let nodes = lines.iter().filter(|l| node.is_match(l)).count();
    let edges = lines.iter().filter(|l| edge.is_match(l)).count();
    let subgraphs = lines.iter().filter(|l| l.starts_with("subgraph ")).count();
    assert_eq!(
        (nodes, edges, subgraphs),
        (
            tree["thoughts"].as_array().unwrap().len(),
            tree["edges"].as_array().unwrap().len(),
            tree["branches"].as_array().unwrap().len()
        )
    );
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mermaid-fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::write(fixtures.join("qa-session.mmd"), &mermaid).unwrap();
    std::fs::write(
        fixtures.join("qa-session.counts"),
        format!("{nodes} {edges} {subgraphs}\n"),
    )
    .unwrap();
    let markdown = export("markdown").await;
    common::check("qa_export_markdown", &markdown);
    assert!(markdown.starts_with("# QA session: "), "{markdown}");
    assert!(
        markdown.contains("- **Workflow:** version\\_verification")
            || markdown.contains("- **Workflow:** version_verification"),
        "{markdown}"
    );
    assert!(markdown.contains("- **Used tools:** "), "{markdown}");
    let verify = common::cli(dir.path(), &["verify"]);
    assert!(verify.status.success(), "{}", common::stderr(&verify));
    // The JSONL export imports into another ledger, verifies and exports the same.
    let jsonl = export("jsonl").await;
    let copy = common::data_dir();
    let file = copy.path().join("qa.jsonl");
    std::fs::write(&file, &jsonl).unwrap();
    let imported = common::cli(copy.path(), &["import", file.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", common::stderr(&imported));
    let verify = common::cli(copy.path(), &["verify"]);
    assert!(verify.status.success(), "{}", common::stderr(&verify));
    let id = session.as_str().unwrap();
    let again = common::cli(copy.path(), &["export", id, "--format", "jsonl"]);
    assert_eq!(
        common::as_imported(&common::stdout(&again)).trim_end(),
        jsonl.trim_end()
    );
}

#[tokio::test]
async fn history_comes_from_the_ledger_across_restarts_and_processes() {
    let dir = common::data_dir();
    let client = spawn_qa(dir.path()).await;
    let first = structured(&call(&client, QA, step(1, 4, true, "check the package version")).await);
    let session = first["session_id"].clone();
    assert_eq!(first["previous_steps_count"], 0);
    let second = structured(&call(&client, QA, step(2, 4, true, "read its docs")).await);
    assert_eq!(
        second["session_id"], session,
        "continues the current session"
    );
    assert_eq!(second["previous_steps_count"], 1);

    // Another process on the same ledger while the first still serves, then a restart:
    // the ledger has the steps.
    let other = spawn_qa(dir.path()).await;
    let third = structured(
        &call(
            &other,
            QA,
            with(
                step(3, 4, true, "write the config"),
                json!({"session_id": session}),
            ),
        )
        .await,
    );
    assert_eq!(third["previous_steps_count"], 2);
    assert_eq!(third["workflow"]["name"], "version_verification", "{third}");
    let back = structured(
        &call(
            &client,
            QA,
            with(
                step(3, 4, true, "write the config, again"),
                json!({"session_id": session, "is_revision": true, "revises_thought": 3}),
            ),
        )
        .await,
    );
    assert_eq!(
        back["previous_steps_count"], 3,
        "the first process sees the other's step"
    );
    client.cancel().await.unwrap();
    other.cancel().await.unwrap();
    let restarted = spawn_qa(dir.path()).await;
    let fourth = structured(
        &call(
            &restarted,
            QA,
            with(step(4, 4, false, "build it"), json!({"sessionId": session})),
        )
        .await,
    );
    assert_eq!(fourth["previous_steps_count"], 4);
    assert_eq!(fourth["thought_history_length"], 5);
    assert!(fourth["recommended_next_step"].is_null(), "done: {fourth}");
    check_json("qa_answer_last_step", &fourth);
    // A thinking session is not a QA session.
    let thinking = spawn_with(dir.path(), &["--toolsets", "all"], &[]).await;
    let thought = structured(
        &call(
            &thinking,
            "sequentialthinking",
            common::thought(1, 2, true, "t"),
        )
        .await,
    );
    let wrong = call(
        &thinking,
        QA,
        with(
            step(2, 4, true, "x"),
            json!({"session_id": thought["sessionId"]}),
        ),
    )
    .await;
    assert!(
        is_error(&wrong) && text(&wrong).contains("is a thinking session"),
        "{}",
        text(&wrong)
    );
}

const USER_TEMPLATE: &str = r#"{
  "name": "deployment",
  "description": "Check a deployment",
  "keywords": ["deploy"],
  "steps": [
    {"step_description": "Read the manifest", "expected_outcome": "Known",
     "tools": [{"tool_name": "kubectl_get", "confidence": 0.95, "priority": 1, "rationale": "The cluster's view"}]},
    {"step_description": "Roll out", "expected_outcome": "Rolled out",
     "tools": [{"tool_name": "kubectl_apply", "confidence": 0.8, "priority": 1, "rationale": "Apply it",
                "substitutes": ["helm_upgrade"]}],
     "revise_when": ["Rollout failed: revise the manifest step"]}
  ]
}"#;

#[tokio::test]
async fn a_user_template_in_the_data_directory_routes_and_a_broken_one_is_reported() {
    let dir = common::data_dir();
    let workflows = dir.path().join("workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    std::fs::write(workflows.join("deployment.json"), USER_TEMPLATE).unwrap();
    std::fs::write(
        workflows.join("broken.json"),
        "{\n  \"name\": \"broken\",\n  \"keywords\": [\"version\"],\n  \"steps\": [\n",
    )
    .unwrap();
    std::fs::write(
        workflows.join("bad_confidence.json"),
        USER_TEMPLATE
            .replace("deployment", "other")
            .replace("0.95", "1.5"),
    )
    .unwrap();
    let client = spawn_qa(dir.path()).await;
    let answer = structured(
        &call(
            &client,
            QA,
            with(
                step(1, 3, true, "Verify the deploy of the API"),
                json!({"available_client_tools": ["kubectl_get", "helm_upgrade"]}),
            ),
        )
        .await,
    );
    assert_eq!(answer["workflow"]["name"], "deployment", "{answer}");
    assert_eq!(tool_names(&answer["current_step"]), vec!["kubectl_get"]);
    let next = &answer["recommended_next_step"];
    assert_eq!(tool_names(next), vec!["helm_upgrade"]);
    assert_eq!(
        next["revise_when"],
        json!(["Rollout failed: revise the manifest step"])
    );
    let errors: Vec<String> = answer["template_errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("bad_confidence.json")
            && errors[0].contains("confidence 1.5")
            && errors[0].contains("line 7"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("broken.json") && errors[1].contains("line 5"),
        "{errors:?}"
    );
    // The built-ins still work beside them.
    let builtin = structured(&call(&client, QA, step(1, 3, true, "check the version")).await);
    assert_eq!(builtin["workflow"]["name"], "version_verification");
}

#[tokio::test]
async fn bad_input_is_refused_whole_or_answered_bounded_and_the_server_keeps_serving() {
    let dir = common::data_dir();
    let client = spawn_qa(dir.path()).await;
    structured(&call(&client, QA, step(1, 3, true, "check the version")).await);
    let before = ledger_state(&client).await;
    let tool = |extra: Value| {
        json!({"step_description": "s", "expected_outcome": "o", "next_step_conditions": [],
               "recommended_tools": [with(json!({"tool_name": "read_file", "confidence": 0.5, "rationale": "r", "priority": 1}), extra)]})
    };
    let long_name = "x".repeat(100_000);
    let refusals = [
        (
            json!({"current_step": tool(json!({"confidence": 1.5}))}),
            "current_step.recommended_tools[0].confidence: Too big",
        ),
        (
            json!({"current_step": tool(json!({"confidence": "0.5"}))}),
            "confidence: Invalid input: expected number",
        ),
        (
            json!({"current_step": tool(json!({"priority": 0}))}),
            "current_step.recommended_tools[0].priority: Too small",
        ),
        (
            json!({"previous_steps": [tool(json!({"priority": -1}))]}),
            "previous_steps[0].recommended_tools[0].priority: Too small",
        ),
        (
            json!({"available_client_tools": [long_name]}),
            "available_client_tools[0]: Too big",
        ),
        (
            json!({"current_step": tool(json!({"tool_name": long_name}))}),
            "tool_name: Too big",
        ),
        (
            json!({"available_client_tools": [{"description": "no name"}]}),
            "available_client_tools[0].name",
        ),
        (
            json!({"available_client_tools": "read_file"}),
            "available_client_tools: Invalid input",
        ),
        (
            json!({"available_client_tools": vec!["t"; 10_001]}),
            "at most 10000 tools",
        ),
        (
            json!({"current_step": [1]}),
            "current_step: Invalid input: expected object",
        ),
        (
            json!({"remaining_steps": "a,b"}),
            "remaining_steps: Invalid input",
        ),
        (json!({"thought_number": 0}), "thought_number: Too small"),
    ];
    // Every problem of a call at once, each naming its field, in one error.
    let several = call(
        &client,
        QA,
        json!({"thought": "t", "thought_number": "two", "total_thoughts": 3,
               "current_step": tool(json!({"confidence": 1.5, "priority": 0})),
               "available_client_tools": [7, {"name": ""}]}),
    )
    .await;
    assert!(is_error(&several) && several.structured_content.is_none());
    common::check("qa_validation_error", &text(&several));
    for (extra, says) in refusals {
        let answer = call(&client, QA, with(step(2, 3, true, "t"), extra.clone())).await;
        let message = text(&answer);
        assert!(is_error(&answer), "accepted {extra}");
        assert!(
            message.starts_with(
                "Input validation error: Invalid arguments for tool sequentialthinking_qa: "
            ) && message.contains(says),
            "{says}: {}",
            &message[..message.len().min(400)]
        );
        assert!(
            message.len() < 4_000,
            "a bounded message: {} bytes",
            message.len()
        );
        assert_eq!(
            ledger_state(&client).await,
            before,
            "nothing recorded for {says}"
        );
    }
    // 5,000 available tools: taken, and the answer stays small.
    let many: Vec<String> = (0..5_000).map(|i| format!("tool_{i}")).collect();
    let mut many = json!(many);
    many.as_array_mut().unwrap().push(json!("read_file"));
    let answer = call(
        &client,
        QA,
        with(
            step(2, 3, true, "check the version"),
            json!({"available_client_tools": many}),
        ),
    )
    .await;
    let value = structured(&answer);
    assert!(text(&answer).len() < 8_000, "{} bytes", text(&answer).len());
    assert_eq!(value["previous_steps_count"], 1);
    // Still serving.
    let after = structured(&call(&client, QA, step(3, 3, false, "done")).await);
    assert_eq!(after["thought_history_length"], 3);
}
