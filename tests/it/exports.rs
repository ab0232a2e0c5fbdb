//! Snapshots (normalized by `common::check`) of every export format of one fixed,
//! hostile session, and of every answer shape the tools give.
//!
//! Regenerate with `INSTA_UPDATE=always cargo test --test it exports`, then read the
//! `.snap` files under `snapshots/` before committing them.

use crate::common::{self, Client, call, check, check_json, spawn, structured, text, thought};
use serde_json::{Value, json};

const SEQ: &str = "sequentialthinking";

fn with(mut args: Value, extra: Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        args[k] = v.clone();
    }
    args
}

/// The fixed session: a main line, a revision, two branches (one with a hostile id), a
/// dangling revisesThought, and thoughts full of characters that break diagrams and
/// documents. Returns its session id.
async fn scripted(client: &Client) -> String {
    let calls = [
        thought(
            1,
            5,
            true,
            r#"Plan: "quotes" and 'single', [brackets] {braces} (parens) <angle>"#,
        ),
        thought(
            2,
            5,
            true,
            "pipes | and `backticks` --> fake edge %% fake comment ;semicolon",
        ),
        with(
            thought(
                2,
                5,
                true,
                "end\nsubgraph evil\n# heading\n<script>alert(1)</script>\n\n- [ ] item",
            ),
            json!({"isRevision": true, "revisesThought": 2}),
        ),
        with(
            thought(
                3,
                5,
                true,
                "NUL:\u{0}: RLO:\u{202E}txet reversed: tab\there & #35; &amp; end",
            ),
            json!({"branchFromThought": 1, "branchId": "alt"}),
        ),
        with(
            thought(
                4,
                5,
                true,
                "second on alt ```code fence``` | table | cell |",
            ),
            json!({"branchFromThought": 1, "branchId": "alt"}),
        ),
        with(
            thought(3, 5, true, "click t1 call alert() style t1 fill:#f00"),
            json!({"branchFromThought": 2, "branchId": "evil\"]; end --> x %% |y|"}),
        ),
        with(
            thought(4, 5, true, "revises a thought that does not exist"),
            json!({"isRevision": true, "revisesThought": 9}),
        ),
        thought(5, 5, false, "Conclusion: done. **bold** _it_ \\ backslash"),
    ];
    let mut session = None;
    for args in calls {
        let answer = structured(&call(client, SEQ, args).await);
        session.get_or_insert(answer["sessionId"].as_str().unwrap().to_string());
    }
    session.unwrap()
}

async fn export(client: &Client, session: &str, format: &str) -> String {
    let result = call(
        client,
        "export_session",
        json!({"sessionId": session, "format": format}),
    )
    .await;
    assert!(!common::is_error(&result), "{format}: {}", text(&result));
    text(&result)
}

#[tokio::test]
async fn export_mermaid_of_the_hostile_session() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let session = scripted(&client).await;
    let mermaid = export(&client, &session, "mermaid").await;
    // Nothing a model wrote reaches the diagram raw.
    for raw in [
        "<script>", "\u{0}", "\u{202E}", "--> fake", "%% fake", "\nend\n", "`",
    ] {
        assert!(
            !mermaid.contains(raw),
            "{raw:?} reached the diagram:\n{mermaid}"
        );
    }
    check("export_mermaid", &mermaid);
}

#[tokio::test]
async fn export_markdown_of_the_hostile_session() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let session = scripted(&client).await;
    check(
        "export_markdown",
        &export(&client, &session, "markdown").await,
    );
}

#[tokio::test]
async fn export_json_of_the_hostile_session() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let session = scripted(&client).await;
    let json = export(&client, &session, "json").await;
    let tree: Value = serde_json::from_str(&json).expect("json export parses");
    // The full text is kept, NUL and U+202E included.
    assert!(
        tree["thoughts"][3]["thought"]
            .as_str()
            .unwrap()
            .contains("NUL:\u{0}: RLO:\u{202E}")
    );
    // The one anomaly is the dangling revision (a same-line revision is not a cycle).
    assert_eq!(
        tree["anomalies"],
        json!([{"kind": "dangling_revision", "seq": 8, "revises_thought": 9}])
    );
    check("export_json", &json);
}

#[tokio::test]
async fn export_jsonl_of_the_hostile_session() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let session = scripted(&client).await;
    let jsonl = export(&client, &session, "jsonl").await;
    assert_eq!(jsonl.lines().count(), 9);
    check("export_jsonl", &jsonl);
}

// ---- answer shapes ----

#[tokio::test]
async fn answer_shape_sequentialthinking() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    call(&client, SEQ, thought(1, 3, true, "first")).await;
    let result = call(
        &client,
        SEQ,
        with(
            thought(2, 3, true, "a branch"),
            json!({"branchFromThought": 1, "branchId": "alt"}),
        ),
    )
    .await;
    check_json(
        "answer_sequentialthinking",
        &serde_json::to_value(&result).unwrap(),
    );
}

#[tokio::test]
async fn answer_shape_think() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let result = call(
        &client,
        "think",
        json!({
            "thread_purpose": "Plan the release",
            "thought": "Tests first, then the changelog.",
            "thought_index": 1,
            "tool_recommendation": "run_tests",
            "left_to_be_done": "- write tests\n- update changelog\n- tag"
        }),
    )
    .await;
    check_json("answer_think", &serde_json::to_value(&result).unwrap());
}

#[tokio::test]
async fn answer_shape_validation_error() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let result = call(&client, SEQ, json!({"thought": "only the thought"})).await;
    check_json(
        "answer_validation_error_missing_fields",
        &serde_json::to_value(&result).unwrap(),
    );
    let result = call(
        &client,
        SEQ,
        json!({"thought": 5, "thoughtNumber": "abc", "totalThoughts": 0, "nextThoughtNeeded": "yes", "branchId": 7}),
    )
    .await;
    check("answer_validation_error_every_kind", &text(&result));
}

/// The scripted session plus a think thread, for the ledger answers.
async fn ledger_fixture(client: &Client) -> String {
    let session = scripted(client).await;
    call(
        client,
        "think",
        json!({"thread_purpose": "Review the plan", "thought": "Check the conclusion again", "thought_index": 1}),
    )
    .await;
    session
}

#[tokio::test]
async fn answer_shape_list_sessions() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    ledger_fixture(&client).await;
    let answer = structured(&call(&client, "list_sessions", json!({})).await);
    check_json("answer_list_sessions", &answer);
    let mut answer = structured(&call(&client, "list_sessions", json!({"limit": 1})).await);
    // The cursor is `<position>.<session id>`: shown as `<ms>` in the snapshot, where it
    // was once the update time.
    let cursor = answer["nextCursor"]
        .as_str()
        .expect("a next page")
        .to_string();
    let (time, id) = cursor.split_once('.').expect("time.id");
    assert!(time.bytes().all(|b| b.is_ascii_digit()), "{cursor}");
    answer["nextCursor"] = json!(format!("<ms>.{id}"));
    check_json("answer_list_sessions_paged", &answer);
}

#[tokio::test]
async fn answer_shape_get_history() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let session = ledger_fixture(&client).await;
    let answer = structured(
        &call(
            &client,
            "get_history",
            json!({"sessionId": session, "fromSeq": 3, "limit": 3}),
        )
        .await,
    );
    check_json("answer_get_history", &answer);
}

#[tokio::test]
async fn answer_shape_search_history() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    ledger_fixture(&client).await;
    let answer = structured(
        &call(
            &client,
            "search_history",
            json!({"query": "the conclusion"}),
        )
        .await,
    );
    check_json("answer_search_history", &answer);
}

#[tokio::test]
async fn answer_shape_replay_session() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let session = ledger_fixture(&client).await;
    let answer = structured(
        &call(
            &client,
            "replay_session",
            json!({"sessionId": session, "atSeq": 5}),
        )
        .await,
    );
    check_json("answer_replay_session", &answer);
}

#[tokio::test]
async fn answer_shape_tools_list() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let list = client.list_tools(None).await.expect("tools/list");
    check_json("tools_list", &serde_json::to_value(&list).unwrap());
}

/// Nodes as (seq, kind) and edges as (from, to, kind).
type Drawn = (Vec<(u64, String)>, Vec<(u64, u64, String)>);

/// (seq, kind) of every node and (from, to, kind) of every edge of an SVG picture, which
/// must parse as XML.
fn picture(svg: &str) -> Drawn {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}:\n{svg}"));
    let number = |node: roxmltree::Node, name: &str| -> u64 {
        node.attribute(name).unwrap().parse().unwrap()
    };
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for element in doc.descendants().filter(|n| n.is_element()) {
        if let Some(kind) = element.attribute("data-kind") {
            nodes.push((number(element, "data-seq"), kind.to_string()));
        }
        if let Some(kind) = element.attribute("data-edge") {
            edges.push((
                number(element, "data-from"),
                number(element, "data-to"),
                kind.to_string(),
            ));
        }
    }
    edges.sort();
    (nodes, edges)
}

/// The projection's thoughts (seqs) and edges, from the json export.
fn projection(json: &str) -> (Vec<u64>, Vec<(u64, u64, String)>) {
    let tree: Value = serde_json::from_str(json).unwrap();
    let seqs = tree["thoughts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["seq"].as_u64().unwrap())
        .collect();
    let mut edges: Vec<(u64, u64, String)> = tree["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"].as_u64().unwrap(),
                e["to"].as_u64().unwrap(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    edges.sort();
    (seqs, edges)
}

#[tokio::test]
async fn export_svg_of_the_hostile_session() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let session = scripted(&client).await;
    let svg = export(&client, &session, "svg").await;
    let (nodes, edges) = picture(&svg);
    let (seqs, expected_edges) = projection(&export(&client, &session, "json").await);
    assert_eq!(
        nodes.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(),
        seqs,
        "one node per thought, carrying the seq that recorded it"
    );
    assert_eq!(edges, expected_edges, "one edge per graph edge");
    let kinds: Vec<&str> = nodes.iter().map(|(_, kind)| kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "thought", "thought", "revision", "branch", "branch", "branch", "revision", "thought"
        ]
    );
    for raw in ["<script", "\u{0}", "\u{202E}", "<img"] {
        assert!(!svg.contains(raw), "{raw:?} reached the picture");
    }
    // The same picture from the command line, and as of an earlier event.
    drop(client);
    let from_cli = common::cli(dir.path(), &["export", &session, "--format", "svg"]);
    assert!(from_cli.status.success(), "{}", common::stderr(&from_cli));
    assert_eq!(common::stdout(&from_cli), svg);
    let earlier = common::cli(
        dir.path(),
        &["export", &session, "--format", "svg", "--at", "4"],
    );
    let (nodes, edges) = picture(&common::stdout(&earlier));
    assert_eq!(
        nodes.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(),
        [2, 3, 4]
    );
    assert_eq!(edges.len(), 3);
    check("export_svg", &svg);
}

#[tokio::test]
async fn export_html_of_the_hostile_session() {
    let dir = common::data_dir();
    let client = common::spawn_with_export(dir.path()).await;
    let session = scripted(&client).await;
    let html = export(&client, &session, "html").await;
    let (seqs, expected_edges) = projection(&export(&client, &session, "json").await);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'sha256-"));
    // One script and one stylesheet (the page's own), no handler attribute, nothing fetched.
    assert_eq!(html.matches("<script").count(), 1);
    assert_eq!(html.matches("<style").count(), 1);
    for raw in [
        "<script>alert",
        "<img",
        " onerror=",
        " onload=",
        " src=",
        "href=\"http",
        "href=\"javascript",
        "\u{0}",
        "\u{202E}",
    ] {
        assert!(!html.contains(raw), "{raw:?} reached the page");
    }
    // The picture inside it is the SVG export's, its nodes linked to their thoughts.
    let start = html.find("<svg").unwrap();
    let end = html.find("</svg>").unwrap() + "</svg>".len();
    let (nodes, edges) = picture(&html[start..end]);
    assert_eq!(nodes.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), seqs);
    assert_eq!(edges, expected_edges);
    for seq in &seqs {
        assert!(html.contains(&format!("<a href=\"#thought-{seq}\">")));
        assert!(html.contains(&format!("<li id=\"thought-{seq}\" ")));
    }
    // The replay slider spans the events.
    assert!(html.contains("<input id=\"replay\" type=\"range\" min=\"1\" max=\"9\" value=\"9\""));
    // The full text is there, escaped (the NUL and the override replaced).
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));

    // For the browser check (.ci/browser-check): this page as the binary wrote it.
    write_browser_fixture(&client, &session, "binary-hostile", &html).await;
}

/// Texts that break diagrams and pages or would run if they reached one as markup; every
/// field of the family sessions below holds one (the browser check fails if
/// `window.__pwned` is ever set).
const HOSTILE_FIELDS: [&str; 5] = [
    r#"<img src=x onerror="window.__pwned=1;document.title='PWNED'"> "quotes" 'single' [brackets] {braces}"#,
    "end\nsubgraph evil\n# heading\n<script>window.__pwned=2</script>\n\n- [ ] item",
    "NUL:\u{0}: RLO:\u{202E}txet & #35; &amp; ]]><!-- x --><![CDATA[ y ]]>",
    "</svg><svg onload=\"window.__pwned=4\"></svg></pre></li></ol></main><script>window.__pwned=5</script>",
    "<a href=\"javascript:window.__pwned=3\">click</a> --> fake %% |y| ' onfocus='window.__pwned=8' autofocus '",
];

/// Branch ids: what a model may name a branch.
const HOSTILE_BRANCHES: [&str; 3] = ["x\"]<b>&", "y' onmouseover='window.__pwned=7", "z</text>"];

fn answered(result: &rmcp::model::CallToolResult) -> Value {
    assert!(!common::is_error(result), "{}", text(result));
    structured(result)
}

/// A finalized plan whose every text is hostile: two clarifications, three approaches
/// (two evaluated, one of them by `evaluate_branch`), one closed, one merged.
async fn hostile_plan(client: &Client) -> String {
    let h = HOSTILE_FIELDS;
    let b = HOSTILE_BRANCHES;
    let dp = |args: Value| call(client, "deep_planning", args);
    let init = answered(
        &dp(
            json!({"phase": "init", "problem": h[0], "context": h[1], "constraints": [h[2], h[3]]}),
        )
        .await,
    );
    let session = init["sessionId"].as_str().unwrap().to_string();
    answered(&dp(json!({"phase": "clarify", "question": h[4], "answer": h[0]})).await);
    answered(&dp(json!({"phase": "clarify", "question": h[1]})).await);
    answered(&dp(json!({"phase": "explore", "branchId": b[0], "name": h[3], "description": h[2], "pros": [h[1]], "cons": [h[4]]})).await);
    answered(&dp(json!({"phase": "explore", "branchId": b[1], "name": h[0]})).await);
    answered(&dp(json!({"phase": "explore", "branchId": b[2], "name": h[2]})).await);
    answered(&dp(json!({"phase": "evaluate", "branchId": b[0], "feasibility": 8, "completeness": 7, "coherence": 9, "risk": 3, "rationale": h[1], "recommendation": "pursue"})).await);
    answered(
        &call(
            client,
            "evaluate_branch",
            json!({"sessionId": session, "branchId": b[1], "feasibility": 6, "risk": 7, "rationale": h[3], "recommendation": "abandon"}),
        )
        .await,
    );
    answered(
        &call(
            client,
            "close_branch",
            json!({"sessionId": session, "branchId": b[1], "conclusion": h[2]}),
        )
        .await,
    );
    answered(
        &call(
            client,
            "merge_branch",
            json!({"sessionId": session, "branchId": b[2]}),
        )
        .await,
    );
    answered(
        &dp(json!({"phase": "finalize", "selectedBranch": b[0],
        "steps": [{"title": h[0], "description": h[1], "files": [h[2]]}],
        "risks": [{"description": h[3], "mitigation": h[4]}],
        "assumptions": [h[0]], "successCriteria": [h[1]]}))
        .await,
    );
    session
}

/// A `sequentialthinking` session with two branches: one evaluated, closed and merged,
/// the other evaluated; every text hostile.
async fn hostile_branch_events(client: &Client) -> String {
    let h = HOSTILE_FIELDS;
    let b = HOSTILE_BRANCHES;
    let first = answered(&call(client, SEQ, thought(1, 4, true, h[0])).await);
    let session = first["sessionId"].as_str().unwrap().to_string();
    let on = |n: u64, text: &str, branch: &str| {
        with(
            thought(n, 4, true, text),
            json!({"sessionId": session, "branchFromThought": 1, "branchId": branch}),
        )
    };
    answered(&call(client, SEQ, on(2, h[1], b[0])).await);
    answered(&call(client, SEQ, on(3, h[2], b[0])).await);
    answered(&call(client, SEQ, on(2, h[3], b[1])).await);
    answered(&call(client, "evaluate_branch", json!({"sessionId": session, "branchId": b[0], "feasibility": 9, "risk": 2, "rationale": h[4], "recommendation": "refine"})).await);
    // Evaluated again, without a rationale: this one counts from here on.
    answered(
        &call(
            client,
            "evaluate_branch",
            json!({"sessionId": session, "branchId": b[0], "feasibility": 5, "risk": 4}),
        )
        .await,
    );
    answered(
        &call(
            client,
            SEQ,
            with(thought(2, 4, true, h[4]), json!({"sessionId": session})),
        )
        .await,
    );
    answered(
        &call(
            client,
            "evaluate_branch",
            json!({"sessionId": session, "branchId": b[1], "feasibility": 3, "rationale": h[1]}),
        )
        .await,
    );
    // Again, in the last column: its link from the branch detours around the first
    // evaluation, right of the column, inside the picture.
    answered(
        &call(
            client,
            "evaluate_branch",
            json!({"sessionId": session, "branchId": b[1], "feasibility": 4, "rationale": h[2]}),
        )
        .await,
    );
    answered(
        &call(
            client,
            "close_branch",
            json!({"sessionId": session, "branchId": b[0], "conclusion": h[3]}),
        )
        .await,
    );
    answered(
        &call(
            client,
            "merge_branch",
            json!({"sessionId": session, "branchId": b[0], "strategy": "append"}),
        )
        .await,
    );
    session
}

/// Verification steps whose every text is hostile: tools used (one named by hostile
/// text), tools recommended (a stand-in among them), a branch, a revision.
async fn hostile_qa(client: &Client) -> String {
    let h = HOSTILE_FIELDS;
    let qa = |n: u64, text: &str, extra: Value| {
        let mut args = json!({"thought": text, "thought_number": n, "total_thoughts": 4, "next_thought_needed": n < 4});
        for (key, value) in extra.as_object().unwrap() {
            args[key] = value.clone();
        }
        call(client, "sequentialthinking_qa", args)
    };
    let tools = json!(["read_file", {"name": "brave_search", "description": "Search the web"}, "run_command"]);
    let used = |tool: &str| {
        json!({"step_description": h[1], "expected_outcome": h[2], "next_step_conditions": [h[3]],
               "recommended_tools": [{"tool_name": tool, "confidence": 0.9, "rationale": h[4], "priority": 1}]})
    };
    let first = answered(
        &qa(
            1,
            &format!("Need to verify the Tailwind CSS version {}", h[0]),
            json!({"available_client_tools": tools, "verification_target": h[3]}),
        )
        .await,
    );
    let session = first["session_id"].as_str().unwrap().to_string();
    answered(&qa(2, h[1], json!({"session_id": session, "available_client_tools": tools, "current_step": used("read_file")})).await);
    answered(&qa(3, h[2], json!({"session_id": session, "branch_from_thought": 1, "branch_id": HOSTILE_BRANCHES[0],
        "current_step": used("x\"] --> end <script>window.__pwned=9</script>")})).await);
    answered(
        &qa(
            4,
            h[4],
            json!({"session_id": session, "is_revision": true, "revises_thought": 2,
        "available_client_tools": tools}),
        )
        .await,
    );
    session
}

/// What the picture must hold, from the projection (the `json` export) and the log (the
/// `jsonl` export, for the event that initialized a plan): (seq, kind) of every node,
/// sorted, and (from, to, kind) of every edge and link, sorted. Computed here, apart
/// from the picture code: thoughts by their shape, a merge's thought as a merge; the
/// plan, its clarifications (chained under it), approaches (explored from it), final plan
/// (selecting its approach); evaluations and closes (linked from their approach, else
/// from the branch's last thought before them); merges (linked the same way); a tools
/// node beside each verification step that used or was recommended tools.
fn drawn_from_projection(json: &str, jsonl: &str) -> Drawn {
    let tree: Value = serde_json::from_str(json).unwrap();
    let planning = &tree["planning"];
    let seq = |v: &Value| v["seq"].as_u64().unwrap();
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let merges: Vec<u64> = list(&planning["merges"]).iter().map(seq).collect();
    let thoughts = list(&tree["thoughts"]);
    let mut nodes: Vec<(u64, String)> = Vec::new();
    let mut edges: Vec<(u64, u64, String)> = list(&tree["edges"])
        .iter()
        .map(|e| {
            (
                e["from"].as_u64().unwrap(),
                e["to"].as_u64().unwrap(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for t in &thoughts {
        let kind = if merges.contains(&seq(t)) {
            "merge"
        } else if t.get("totalThoughts").is_none() {
            "think"
        } else if t["isRevision"] == true || t.get("revisesThought").is_some() {
            "revision"
        } else if t.get("branchId").is_some() {
            "branch"
        } else {
            "thought"
        };
        nodes.push((seq(t), kind.to_string()));
        let tools = |key: &str| {
            t.get(key)
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
        };
        if tools("usedTools") || tools("recommendedTools") {
            nodes.push((seq(t), "qa-tools".into()));
            edges.push((seq(t), seq(t), "recommends".into()));
        }
    }
    let plan = &planning["plan"];
    let approaches: Vec<(String, u64)> = list(&plan["approaches"])
        .iter()
        .map(|a| (a["branchId"].as_str().unwrap().to_string(), seq(a)))
        .collect();
    let from_branch = |branch: &str, before: u64| -> Option<u64> {
        approaches
            .iter()
            .find(|(b, _)| b == branch)
            .map(|(_, s)| *s)
            .or_else(|| {
                thoughts
                    .iter()
                    .rev()
                    .find(|t| t["branchId"] == branch && seq(t) < before)
                    .map(seq)
            })
    };
    if !plan.is_null() {
        let init = jsonl
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|event| event["payload"]["type"] == "plan_initialized")
            .map(|event| seq(&event))
            .next_back()
            .unwrap();
        nodes.push((init, "plan".into()));
        let mut previous = init;
        for c in list(&plan["clarifications"]) {
            nodes.push((seq(&c), "clarification".into()));
            edges.push((previous, seq(&c), "clarifies".into()));
            previous = seq(&c);
        }
        for (_, s) in &approaches {
            nodes.push((*s, "approach".into()));
            edges.push((init, *s, "explores".into()));
        }
        if let Some(f) = plan.get("finalized") {
            nodes.push((seq(f), "final-plan".into()));
            let selected = f["selectedBranch"].as_str().unwrap();
            if let Some((_, s)) = approaches.iter().find(|(b, _)| b == selected) {
                edges.push((seq(f), *s, "selects".into()));
            }
        }
    }
    for (key, kind, link) in [
        ("evaluations", "evaluation", "evaluates"),
        ("closes", "close", "closes"),
    ] {
        for item in list(&planning[key]) {
            nodes.push((seq(&item), kind.into()));
            if let Some(from) = from_branch(item["branchId"].as_str().unwrap(), seq(&item)) {
                edges.push((from, seq(&item), link.into()));
            }
        }
    }
    for m in list(&planning["merges"]) {
        if let Some(from) = from_branch(m["branchId"].as_str().unwrap(), seq(&m)) {
            edges.push((from, seq(&m), "merges".into()));
        }
    }
    nodes.sort();
    edges.sort();
    (nodes, edges)
}

/// (seq, kind, label text drawn) of every node of a picture as it stands at its end, in document
/// order (the text of its `<text>` elements, not its tooltip).
fn shown(svg: &str) -> Vec<(u64, String, String)> {
    // A label's part replaced by a later event (class `was`): the page keeps it for its
    // slider, hidden at the end.
    let replaced = |n: roxmltree::Node| {
        n.attribute("class")
            .is_some_and(|c| c.split(' ').any(|c| c == "was"))
    };
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}:\n{svg}"));
    doc.descendants()
        .filter(|n| n.is_element() && n.attribute("data-kind").is_some())
        .map(|node| {
            let text: String = node
                .descendants()
                .filter(|t| t.is_text() && t.ancestors().any(|a| a.has_tag_name("text")))
                .filter(|t| !t.ancestors().any(replaced))
                .map(|t| t.text().unwrap())
                .collect();
            (
                node.attribute("data-seq").unwrap().parse().unwrap(),
                node.attribute("data-kind").unwrap().to_string(),
                text,
            )
        })
        .collect()
}

/// Writes the session's HTML page as the binary exports it to `browser-fixtures/` (for
/// .ci/browser-check) with what the page must show: its nodes (seq, kind) and edges as
/// the SVG export draws them, its thoughts, its listed events (one per event that drew a
/// node), and at each event k the nodes (with their label texts) of the server's own
/// picture of the first k events (`atSeq`), not the page's data-seq attributes.
async fn write_browser_fixture(client: &Client, session: &str, name: &str, html: &str) {
    let svg = export(client, session, "svg").await;
    let doc_nodes: Vec<(u64, String)> = shown(&svg).into_iter().map(|(s, k, _)| (s, k)).collect();
    let (_, edges) = picture(&svg);
    let (thoughts, _) = projection(&export(client, session, "json").await);
    let listed = |nodes: &[(u64, String)]| {
        let mut seqs: Vec<u64> = nodes.iter().map(|(s, _)| *s).collect();
        seqs.sort_unstable();
        seqs.dedup();
        seqs
    };
    let last: u64 = roxmltree::Document::parse(&svg)
        .unwrap()
        .root_element()
        .attribute("data-at-seq")
        .unwrap()
        .parse()
        .unwrap();
    let mut at = serde_json::Map::new();
    for k in 1..=last {
        let result = call(
            client,
            "export_session",
            json!({"sessionId": session, "format": "svg", "atSeq": k}),
        )
        .await;
        let nodes = shown(&text(&result));
        let kinds: Vec<(u64, String)> = nodes.iter().map(|(s, k, _)| (*s, k.clone())).collect();
        at.insert(
            k.to_string(),
            json!({"nodes": nodes, "items": listed(&kinds)}),
        );
    }
    // What the fixture promises holds for the page as written: its picture is the SVG
    // export's (nodes with their labels, edges), it lists exactly the events that drew a
    // node, in order, its slider ends at the session's last event, and the replay states
    // show nothing from after their event and end at the whole picture.
    let start = html.find("<svg").expect("a picture in the page");
    let end = html.find("</svg>").unwrap() + "</svg>".len();
    assert_eq!(
        shown(&html[start..end]),
        shown(&svg),
        "{name}: the page's nodes"
    );
    assert_eq!(
        picture(&html[start..end]).1,
        edges,
        "{name}: the page's edges"
    );
    let item = regex::Regex::new(r#"<li id="thought-(\d+)""#).unwrap();
    let items: Vec<u64> = item
        .captures_iter(html)
        .map(|c| c[1].parse().unwrap())
        .collect();
    assert_eq!(
        items,
        listed(&doc_nodes),
        "{name}: the events the page lists"
    );
    let events = export(client, session, "jsonl").await.lines().count() as u64;
    assert_eq!(last, events, "{name}: the slider ends at the last event");
    assert!(
        html.contains(&format!("max=\"{last}\" value=\"{last}\"")),
        "{name}: the slider's range"
    );
    for (k, state) in &at {
        let k: u64 = k.parse().unwrap();
        let seqs = state["items"].as_array().unwrap();
        assert!(
            seqs.iter().all(|s| s.as_u64().unwrap() <= k),
            "{name}: at event {k} the picture shows a later event: {state}"
        );
    }
    assert_eq!(
        at[&last.to_string()]["nodes"],
        json!(shown(&svg)),
        "{name}: the replay's last state is the whole picture"
    );
    let edges: Vec<Value> = edges
        .iter()
        .map(|(from, to, kind)| json!({"from": from, "to": to, "kind": kind}))
        .collect();
    let expect = json!({"nodes": doc_nodes, "thoughts": thoughts, "items": listed(&doc_nodes),
                        "edges": edges, "lastSeq": last, "at": at});
    // CARGO_TARGET_TMPDIR is `tmp/` in cargo's target directory.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("browser-fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.html")), html).unwrap();
    std::fs::write(
        dir.join(format!("{name}.expect.json")),
        serde_json::to_string(&expect).unwrap(),
    )
    .unwrap();
}

/// What every picture keeps, whatever its family: each edge's points (control points
/// included) inside the picture, and each node's marker a drawn shape, never a character
/// a font must have (one glyph per node; no head line starts with an emoji).
fn check_drawing(name: &str, svg: &str) {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let width: f64 = doc
        .root_element()
        .attribute("width")
        .unwrap()
        .parse()
        .unwrap();
    for edge in doc
        .descendants()
        .filter(|n| n.has_tag_name("path") && n.attribute("data-edge").is_some())
    {
        let d = edge.attribute("d").unwrap();
        let numbers: Vec<f64> = d
            .split(|c: char| c.is_ascii_alphabetic() || c == ' ' || c == ',')
            .filter(|part| !part.is_empty())
            .map(|part| part.parse().unwrap())
            .collect();
        for x in numbers.chunks(2).map(|pair| pair[0]) {
            assert!(
                (0.0..=width).contains(&x),
                "{name}: an edge leaves the picture: {d} (width {width})"
            );
        }
    }
    for node in doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("data-kind").is_some())
    {
        let glyphs = node
            .children()
            .filter(|c| c.has_tag_name("path") && c.attribute("class") == Some("glyph"))
            .count();
        assert_eq!(glyphs, 1, "{name}: {node:?}");
        let head: String = node
            .children()
            .find(|c| c.has_tag_name("text"))
            .unwrap()
            .descendants()
            .filter(|t| t.is_text())
            .filter_map(|t| t.text())
            .collect();
        let first = head.chars().next().unwrap_or(' ');
        assert!(
            first.is_ascii(),
            "{name}: a head line starts with {first:?}: {head}"
        );
    }
}

/// The SVG and HTML of a session of the planning or qa family, recorded through the real
/// binary: one node per thought and per thing the family recorded, with the kind the
/// projection says; one edge per graph edge and per link; nothing hostile raw; the page
/// lists every event that drew a node, with its metadata.
async fn check_family_pictures(client: &Client, session: &str, name: &str) -> (String, String) {
    let svg = export(client, session, "svg").await;
    let (mut nodes, edges) = picture(&svg);
    nodes.sort();
    let expected = drawn_from_projection(
        &export(client, session, "json").await,
        &export(client, session, "jsonl").await,
    );
    assert_eq!(
        (nodes, edges),
        expected,
        "{name}: the picture is the projection's"
    );
    check_drawing(name, &svg);
    let html = export(client, session, "html").await;
    for out in [&svg, &html] {
        for raw in [
            "<script>window",
            "<img",
            "onerror=\"",
            "onload=\"",
            "onmouseover='",
            "onfocus='",
            "href=\"javascript",
            "<svg onload",
            "<!-- x",
            "\u{0}",
            "\u{202E}",
        ] {
            assert!(!out.contains(raw), "{name}: {raw:?} reached the output");
        }
    }
    assert_eq!(html.matches("<script").count(), 1, "{name}");
    // The picture in the page is the SVG export's.
    let start = html.find("<svg").unwrap();
    let end = html.find("</svg>").unwrap() + "</svg>".len();
    let (mut in_page, in_page_edges) = picture(&html[start..end]);
    in_page.sort();
    assert_eq!(
        (in_page, in_page_edges),
        expected,
        "{name}: the page's picture"
    );
    write_browser_fixture(client, session, &format!("binary-{name}"), &html).await;
    (svg, html)
}

#[tokio::test]
async fn svg_and_html_of_a_hostile_plan_draw_its_approaches_scores_and_branch_events() {
    let dir = common::data_dir();
    let client = common::spawn_with(dir.path(), &["--toolsets", "all"], &[]).await;
    let session = hostile_plan(&client).await;
    let (svg, html) = check_family_pictures(&client, &session, "plan").await;
    // The selected approach is marked, with its score; the closed one too.
    let approaches: Vec<String> = shown(&svg)
        .into_iter()
        .filter(|(_, kind, _)| kind == "approach")
        .map(|(_, _, text)| text)
        .collect();
    assert_eq!(approaches.len(), 3);
    assert!(
        approaches[0].contains("\u{a0}· 7.80\u{a0}· ★ selected"),
        "{approaches:?}"
    );
    assert!(approaches[1].contains("\u{a0}· closed"), "{approaches:?}");
    // Every planning event is listed with its metadata.
    for meta in [
        "deep_planning · init · problem",
        "deep_planning · clarify",
        "deep_planning · explore · branch x&quot;]&lt;b&gt;&amp;",
        "evaluation · branch y&#39; onmouseover=&#39;window.__pwned=7 · score 5.05",
        "close_branch · branch y&#39;",
        "deep_planning · finalize · selected x&quot;]&lt;b&gt;&amp;",
        "merged: branch z&lt;/text&gt; (summary)",
    ] {
        assert!(html.contains(meta), "{meta:?} is not listed");
    }
    check("export_svg_plan", &svg);
}

#[tokio::test]
async fn svg_and_html_show_evaluations_closes_and_merges_on_thinking_branches() {
    let dir = common::data_dir();
    let client = common::spawn_with(dir.path(), &["--toolsets", "all"], &[]).await;
    let session = hostile_branch_events(&client).await;
    let (svg, html) = check_family_pictures(&client, &session, "branch-events").await;
    // Every branch event is listed with its metadata.
    for meta in [
        "evaluation · branch x&quot;]&lt;b&gt;&amp; · score 6.30",
        "evaluation · branch y&#39; onmouseover=&#39;window.__pwned=7 · score",
        "close_branch · branch x&quot;]&lt;b&gt;&amp;",
        "merged: branch x&quot;]&lt;b&gt;&amp; (append)",
    ] {
        assert!(html.contains(meta), "{meta:?} is not listed");
    }
    // Each branch evaluated twice: the first is replaced by the second, which counts; a
    // second without a rationale shows what it scored.
    assert_eq!(svg.matches("· replaced by #").count(), 2, "{svg}");
    assert_eq!(svg.matches("· counts").count(), 2, "{svg}");
    assert_eq!(html.matches("· counts</tspan>").count(), 2, "{html}");
    assert!(svg.contains(": feasibility 5 ×"), "{svg}");
    check("export_svg_branch_events", &svg);
}

#[tokio::test]
async fn svg_and_html_of_a_hostile_qa_session_show_each_steps_tools() {
    let dir = common::data_dir();
    let client = common::spawn_with(dir.path(), &["--toolsets", "all"], &[]).await;
    let session = hostile_qa(&client).await;
    let (svg, html) = check_family_pictures(&client, &session, "qa").await;
    // The stand-in is marked in the picture and named in the list.
    assert!(svg.contains("<tspan class=\"stand-in\">"), "{svg}");
    assert!(html.contains("(stands in for web_search)"), "{html}");
    assert!(html.contains("tools used: read_file"));
    assert!(html.contains("verification target: "));
    check("export_svg_qa", &svg);
}

/// What a booster session's picture must hold, from the log (the `jsonl` export) and the
/// projection's edges (the `json` export), computed apart from the picture code: the task
/// and each `hints_added`; every candidate of every candidate set (at the set's seq); each
/// step as a step, linked from its set's chosen candidate and on the chosen path (from
/// the task, or the last step no backtrack dropped); each beam, linked to the candidate it
/// picked; each backtrack and loop check.
fn booster_drawn(json: &str, jsonl: &str) -> Drawn {
    let tree: Value = serde_json::from_str(json).unwrap();
    let mut nodes: Vec<(u64, String)> = Vec::new();
    let mut edges: Vec<(u64, u64, String)> = tree["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["from"].as_u64().unwrap(),
                e["to"].as_u64().unwrap(),
                e["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let (mut set, mut path, mut before) = (0, 0, 0);
    for line in jsonl.lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        let seq = event["seq"].as_u64().unwrap();
        let payload = &event["payload"];
        let mut node = |kind: &str| nodes.push((seq, kind.to_string()));
        match payload["type"].as_str().unwrap() {
            "booster_started" => {
                node("booster-task");
                path = seq;
            }
            "hints_added" => node("booster-hints"),
            "candidates_scored" => {
                for _ in payload["candidates"].as_array().unwrap() {
                    node("booster-candidate");
                }
                set = seq;
            }
            "beam_rolled_out" => {
                node("booster-beam");
                edges.push((seq, set, "beam_picks".into()));
            }
            "step_applied" => {
                node("booster-step");
                edges.push((set, seq, "chooses".into()));
                edges.push((path, seq, "booster_path".into()));
                (before, path) = (path, seq);
            }
            "backtracked" => {
                node("booster-backtrack");
                path = before;
            }
            "loop_detected" => node("booster-loop"),
            _ => {}
        }
    }
    nodes.sort();
    edges.sort();
    (nodes, edges)
}

/// The SVG and HTML of a booster session recorded through the binary: the picture is the
/// log's (every candidate, step, beam and loop check), nothing hostile raw, and the page
/// lists every booster event; the browser check gets the page.
async fn check_booster_pictures(client: &Client, session: &str, name: &str) -> (String, String) {
    let svg = export(client, session, "svg").await;
    let (mut nodes, edges) = picture(&svg);
    nodes.sort();
    let expected = booster_drawn(
        &export(client, session, "json").await,
        &export(client, session, "jsonl").await,
    );
    assert_eq!((nodes, edges), expected, "{name}: the picture is the log's");
    check_drawing(name, &svg);
    let html = export(client, session, "html").await;
    for out in [&svg, &html] {
        for raw in [
            "<script>window",
            "<img",
            "onerror=\"",
            "onload=\"",
            "onfocus='",
            "href=\"javascript",
            "<svg onload",
            "<!-- x",
            "\u{0}",
            "\u{202E}",
        ] {
            assert!(!out.contains(raw), "{name}: {raw:?} reached the output");
        }
    }
    assert_eq!(html.matches("<script").count(), 1, "{name}");
    let start = html.find("<svg").unwrap();
    let end = html.find("</svg>").unwrap() + "</svg>".len();
    let (mut in_page, in_page_edges) = picture(&html[start..end]);
    in_page.sort();
    assert_eq!(
        (in_page, in_page_edges),
        expected,
        "{name}: the page's picture"
    );
    write_browser_fixture(client, session, &format!("binary-{name}"), &html).await;
    (svg, html)
}

#[tokio::test]
async fn svg_and_html_of_a_heuristic_solve_draw_candidates_scores_beam_and_backtracks() {
    let dir = common::data_dir();
    let client = common::spawn_with(dir.path(), &["--toolsets", "all"], &[]).await;
    let h = HOSTILE_FIELDS;
    // A hostile task and hints (offered as candidates); every iteration after the first
    // stalls (minImprovement above any gain), so a beam chooses.
    let solved = answered(
        &call(
            &client,
            "solve",
            json!({"task": format!("Find the counterfeit among 12 coins {}", h[0]),
                   "iterations": 3, "seedHints": [h[1]],
                   "config": {"numCandidates": 3, "beamWidth": 2, "minImprovement": 5}}),
        )
        .await,
    );
    let session = solved["sessionId"].as_str().unwrap().to_string();
    let (svg, html) = check_booster_pictures(&client, &session, "booster").await;
    let (nodes, _) = picture(&svg);
    let count = |kind: &str| nodes.iter().filter(|(_, k)| k == kind).count();
    assert_eq!(
        (
            count("booster-step"),
            count("booster-candidate"),
            count("booster-beam")
        ),
        (3, 9, 2)
    );
    let steps: Vec<String> = shown(&svg)
        .into_iter()
        .filter(|(_, kind, _)| kind == "booster-step")
        .map(|(_, _, text)| text)
        .collect();
    assert!(steps[1].contains("\u{a0}· beam"), "{steps:?}");
    let chosen = shown(&svg)
        .into_iter()
        .filter(|(_, kind, text)| kind == "booster-candidate" && text.contains("✓ chosen"))
        .count();
    assert_eq!(chosen, 3);
    for meta in [
        "booster_started · task",
        "candidates_scored · iteration 1 · 3 candidates · heuristic · scorer",
        "beam_rolled_out · iteration 2 · 2 heads",
    ] {
        assert!(html.contains(meta), "{meta:?} is not listed");
    }
    check("export_svg_booster", &svg);

    // One candidate per iteration, a hostile hint offered twice: the second backtracks;
    // then with backtracking off a repeat is only detected.
    let started = answered(
        &call(
            &client,
            "start",
            json!({"task": h[3], "config": {"numCandidates": 1, "topM": 1}, "seedHints": [h[4]]}),
        )
        .await,
    );
    let id = started["sessionId"].as_str().unwrap().to_string();
    answered(
        &call(
            &client,
            "multi-step",
            json!({"sessionId": id, "iterations": 2}),
        )
        .await,
    );
    let looped = answered(
        &call(
            &client,
            "step",
            json!({"sessionId": id, "addHints": [h[4]]}),
        )
        .await,
    );
    assert_eq!(looped["backtracked"]["kind"], "loop", "{looped:#}");
    let (svg, html) = check_booster_pictures(&client, &id, "booster-loop").await;
    let (nodes, _) = picture(&svg);
    assert_eq!(
        nodes
            .iter()
            .filter(|(_, k)| k == "booster-backtrack")
            .count(),
        1
    );
    assert_eq!(
        nodes.iter().filter(|(_, k)| k == "booster-hints").count(),
        1
    );
    assert!(svg.contains("<tspan class=\"booster-dropped\""), "{svg}");
    assert!(html.contains("backtracked · iteration 3 · loop · repeats step 1"));

    let started = answered(
        &call(&client, "start", json!({"task": h[2], "config": {"numCandidates": 1, "topM": 1, "allowBacktrack": false}, "seedHints": [h[2]]})).await,
    );
    let id = started["sessionId"].as_str().unwrap().to_string();
    answered(&call(&client, "step", json!({"sessionId": id})).await);
    answered(
        &call(
            &client,
            "step",
            json!({"sessionId": id, "addHints": [h[2]]}),
        )
        .await,
    );
    let (svg, _) = check_booster_pictures(&client, &id, "booster-kept").await;
    let (nodes, _) = picture(&svg);
    assert_eq!(nodes.iter().filter(|(_, k)| k == "booster-loop").count(), 1);
}
