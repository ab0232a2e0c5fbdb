//! Search results per session (issue 34): `search_history` with `bySession` and `search
//! --by-session` answer one match per session — its best, in the place the ungrouped
//! ranking gives it — sessions whose best matches score alike newest first, and pages
//! that count sessions.

use crate::common::{call, cli, data_dir, is_error, spawn_with, structured, text};
use crate::recall_set::{TOOLSETS, cli_json, thinking};
use serde_json::{Value, json};

/// `search_history` with `args`; its structured answer (the call must succeed).
async fn search(client: &crate::common::Client, args: Value) -> Value {
    let result = call(client, "search_history", args).await;
    assert!(!is_error(&result), "{}", text(&result));
    structured(&result)
}

fn pairs(answer: &Value) -> Vec<(String, u64)> {
    answer["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("no matches in {answer}"))
        .iter()
        .map(|m| {
            (
                m["sessionId"].as_str().unwrap().to_string(),
                m["seq"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn matches_group_by_session_best_first_newest_among_equals() {
    let dir = data_dir();
    let client = spawn_with(dir.path(), &["--toolsets", TOOLSETS], &[]).await;
    let lag = thinking(
        &client,
        &[
            "Kafka consumer lag grew all morning",
            "A constant kafka key sent every kafka message to one kafka partition",
        ],
    )
    .await;
    let restart = thinking(&client, &["Restarted the kafka consumer after a deploy"]).await;
    let older = thinking(&client, &["Vacuum tuning for the orders table"]).await;
    let newer = thinking(&client, &["Vacuum tuning for the orders table"]).await;

    // Ungrouped, "kafka" matches the lag session twice; grouped, once, at its best match.
    let all = pairs(&search(&client, json!({"query": "kafka", "limit": 10})).await);
    assert_eq!(all.iter().filter(|(s, _)| *s == lag).count(), 2, "{all:?}");
    let mut firsts: Vec<(String, u64)> = Vec::new();
    for found in &all {
        if !firsts.iter().any(|(s, _)| *s == found.0) {
            firsts.push(found.clone());
        }
    }
    let grouped = search(&client, json!({"query": "kafka", "bySession": true})).await;
    assert_eq!(pairs(&grouped), firsts, "{grouped}");
    assert!(grouped.get("nextCursor").is_none(), "{grouped}");
    let sessions: Vec<&String> = firsts.iter().map(|(s, _)| s).collect();
    assert_eq!(sessions.len(), 2);
    assert!(sessions.contains(&&lag) && sessions.contains(&&restart));

    // Equal scores: the newer session first.
    let tied = search(&client, json!({"query": "vacuum", "bySession": "true"})).await;
    let order: Vec<String> = pairs(&tied).into_iter().map(|(s, _)| s).collect();
    assert_eq!(order, vec![newer.clone(), older.clone()], "{tied}");
    assert_eq!(tied["matches"][0]["score"], tied["matches"][1]["score"]);

    // Pages count sessions: one a page, each session once.
    let first = search(
        &client,
        json!({"query": "kafka", "bySession": true, "limit": 1}),
    )
    .await;
    let cursor = first["nextCursor"]
        .as_str()
        .expect("a second page")
        .to_string();
    let second = search(
        &client,
        json!({"query": "kafka", "bySession": true, "limit": 1, "cursor": cursor}),
    )
    .await;
    let mut paged = pairs(&first);
    paged.extend(pairs(&second));
    assert_eq!(paged, firsts);
    assert!(second.get("nextCursor").is_none(), "{second}");

    // A value that is not a boolean is refused, naming the argument.
    let refused = call(
        &client,
        "search_history",
        json!({"query": "kafka", "bySession": "sometimes"}),
    )
    .await;
    assert!(is_error(&refused));
    assert!(text(&refused).contains("bySession"), "{}", text(&refused));
    client.cancel().await.unwrap();

    // The CLI groups the same way.
    let out = cli_json(
        cli(dir.path(), &["search", "kafka", "--by-session", "--json"]),
        "search --by-session",
    );
    assert_eq!(pairs(&out), firsts);
    let out = cli_json(
        cli(dir.path(), &["search", "vacuum", "--by-session", "--json"]),
        "search --by-session",
    );
    let order: Vec<String> = pairs(&out).into_iter().map(|(s, _)| s).collect();
    assert_eq!(order, vec![newer, older]);
}
