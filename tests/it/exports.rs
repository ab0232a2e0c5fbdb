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
    let client = spawn(dir.path()).await;
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
    let client = spawn(dir.path()).await;
    let session = scripted(&client).await;
    check(
        "export_markdown",
        &export(&client, &session, "markdown").await,
    );
}

#[tokio::test]
async fn export_json_of_the_hostile_session() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
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
    let client = spawn(dir.path()).await;
    let session = scripted(&client).await;
    let jsonl = export(&client, &session, "jsonl").await;
    assert_eq!(jsonl.lines().count(), 9);
    check("export_jsonl", &jsonl);
}

// ---- answer shapes ----

#[tokio::test]
async fn answer_shape_sequentialthinking() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
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
    let client = spawn(dir.path()).await;
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
    let client = spawn(dir.path()).await;
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
    let client = spawn(dir.path()).await;
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
    let client = spawn(dir.path()).await;
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
    let client = spawn(dir.path()).await;
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
    let client = spawn(dir.path()).await;
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
    let client = spawn(dir.path()).await;
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
    let client = spawn(dir.path()).await;
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

    // For the browser check (.ci/browser-check): this page as the binary wrote it, and
    // what the slider must show at each event: the thoughts of the server's own fold of
    // that prefix (`atSeq`), not the page's data-seq attributes.
    let mut at = serde_json::Map::new();
    for k in 1..=9u64 {
        let result = call(
            &client,
            "export_session",
            json!({"sessionId": session, "format": "json", "atSeq": k}),
        )
        .await;
        at.insert(k.to_string(), json!(projection(&text(&result)).0));
    }
    let edges: Vec<Value> = expected_edges
        .iter()
        .map(|(from, to, kind)| json!({"from": from, "to": to, "kind": kind}))
        .collect();
    let expect = json!({"thoughts": seqs, "edges": edges, "lastSeq": 9, "at": at});
    // CARGO_TARGET_TMPDIR is `tmp/` in cargo's target directory.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("browser-fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("binary-hostile.html"), &html).unwrap();
    std::fs::write(
        dir.join("binary-hostile.expect.json"),
        serde_json::to_string(&expect).unwrap(),
    )
    .unwrap();
}
