//! The relevance set of recall (issue 20), shared by `tests/it/recall.rs` (redb's Tantivy
//! index) and `tests/services/recall_pg.rs` (PostgreSQL's full-text search): its sessions,
//! its queries and what each must find first.

use crate::common::{Client, call, is_error, structured, text, thought};
use serde_json::{Value, json};

/// Every toolset whose sessions the relevance set holds.
pub(crate) const TOOLSETS: &str = "thinking,ledger,planning,qa";

/// A thinking session of `thoughts`; returns its id.
pub(crate) async fn thinking(client: &Client, thoughts: &[&str]) -> String {
    let total = thoughts.len() as u64;
    let mut session = String::new();
    for (i, text) in thoughts.iter().enumerate() {
        let n = i as u64 + 1;
        let mut args = thought(n, total, n < total, text);
        if n > 1 {
            args["sessionId"] = json!(session);
        }
        session = structured(&call(client, "sequentialthinking", args).await)["sessionId"]
            .as_str()
            .unwrap()
            .to_string();
    }
    session
}

/// The sessions of the relevance set, by name → id.
pub(crate) struct Fixture {
    pub(crate) cache: String,
    pub(crate) linker: String,
    pub(crate) migrations: String,
    pub(crate) cafe: String,
    pub(crate) scripts: String,
    pub(crate) zeppelin: String,
    pub(crate) plan: String,
}

pub(crate) async fn relevance_fixture(client: &Client) -> Fixture {
    let cache = thinking(
        client,
        &[
            "Cache invalidation is hard when the TTL is long",
            "Purge the cache keys on every write",
        ],
    )
    .await;
    let linker = thinking(
        client,
        &[
            "The linker fails with undefined symbols on macOS",
            "Switching linkers to lld fixed the build",
        ],
    )
    .await;
    let think = structured(
        &call(
            client,
            "think",
            json!({"thread_purpose": "Database migrations", "thought": "Run each schema change in a transaction so it can roll back", "thought_index": 1}),
        )
        .await,
    );
    let migrations = think["sessionId"].as_str().unwrap().to_string();
    let cafe = thinking(client, &["A café in Zürich serves naïve espresso"]).await;
    let scripts = thinking(
        client,
        &["Привет мир: запуск сервера", "日本語のテキストを検索する"],
    )
    .await;
    // A common word in many events, a rare one in a single event.
    let mut common_sessions = Vec::new();
    for i in 0..6 {
        common_sessions.push(
            thinking(
                client,
                &[&format!(
                    "rust rust everywhere in module {i} of the rust code"
                )],
            )
            .await,
        );
    }
    let zeppelin = thinking(client, &["The zeppelin landed at dawn"]).await;
    let init = structured(
        &call(
            client,
            "deep_planning",
            json!({"phase": "init", "problem": "Speed up the search page", "context": "p99 is 800 ms"}),
        )
        .await,
    );
    let plan = init["sessionId"].as_str().unwrap().to_string();
    for args in [
        json!({"phase": "explore", "branchId": "redis", "name": "Redis cache", "description": "Shared cache in front of the store", "pros": ["fast"], "cons": ["one more server"]}),
        json!({"phase": "evaluate", "branchId": "redis", "feasibility": 8, "completeness": 7, "coherence": 9, "risk": 3, "rationale": "Covers both endpoints"}),
        json!({"phase": "finalize", "selectedBranch": "redis", "format": "json",
            "steps": [{"title": "Add the client", "description": "Wire redis-rs"}],
            "risks": [{"description": "Stale results after a deploy", "mitigation": "Short TTL"}]}),
    ] {
        let mut args = args;
        args["sessionId"] = json!(plan);
        let result = call(client, "deep_planning", args).await;
        assert!(!is_error(&result), "{}", text(&result));
    }
    // deep_planning answers with the session's alias, and lists it so; search names a
    // session by its ledger id, listed beside.
    let listed = structured(&call(client, "list_sessions", json!({"kind": "planning"})).await);
    assert_eq!(listed["sessions"][0]["sessionId"], json!(plan), "{listed}");
    let plan = listed["sessions"][0]["ledgerId"]
        .as_str()
        .unwrap()
        .to_string();
    let qa = call(
        client,
        "sequentialthinking_qa",
        json!({"thought": "Is the espresso machine calibrated?", "thought_number": 1, "total_thoughts": 1, "next_thought_needed": false}),
    )
    .await;
    assert!(!is_error(&qa), "{}", text(&qa));
    Fixture {
        cache,
        linker,
        migrations,
        cafe,
        scripts,
        zeppelin,
        plan,
    }
}

/// `search --json` through the CLI of one backend.
pub(crate) type Search<'a> = dyn Fn(&[&str]) -> Value + 'a;

pub(crate) fn matches(answer: &Value) -> Vec<(String, u64)> {
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

pub(crate) fn first_session(answer: &Value) -> String {
    answer["matches"][0]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no match in {answer}"))
        .to_string()
}

/// The relevance set: each query and what must come first (or be all there is).
/// `rare_words_rank_first` is false on PostgreSQL (`ts_rank_cd` has no rare-word weight).
pub(crate) fn relevance_set(
    search: &Search<'_>,
    f: &Fixture,
    rare_words_rank_first: bool,
    cjk: bool,
) {
    // Stemming and plurals: "caching" finds "Cache", "linkers" finds "linker".
    let found = search(&["caching"]);
    let hits = matches(&found);
    assert!(
        hits.contains(&(f.cache.clone(), 2)) && hits.contains(&(f.cache.clone(), 3)),
        "caching: {found}"
    );
    let found = search(&["linkers"]);
    let hits = matches(&found);
    assert_eq!(hits.len(), 2, "linkers: {found}");
    assert!(hits.iter().all(|(s, _)| *s == f.linker), "{found}");
    assert!(
        found["matches"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("**"),
        "matched words are marked: {found}"
    );
    // Phrases: in this order only.
    let found = search(&["\"linker fails\""]);
    assert_eq!(matches(&found), vec![(f.linker.clone(), 2)], "{found}");
    assert!(matches(&search(&["\"fails linker\""])).is_empty());
    // Prefixes: the words that start with it.
    let found = search(&["linke*"]);
    let hits = matches(&found);
    assert_eq!(hits.len(), 2, "linke*: {found}");
    assert!(hits.iter().all(|(s, _)| *s == f.linker), "{found}");
    assert!(matches(&search(&["-linke* linker"])).is_empty());
    // A typo: retried one edit away, said in the note.
    let found = search(&["zepelin"]);
    assert_eq!(first_session(&found), f.zeppelin, "{found}");
    assert_eq!(
        found["note"], "no match for zepelin; showing zeppelin",
        "{found}"
    );
    assert!(matches(&search(&["rsut"])).is_empty());
    // Exclusion.
    let found = search(&["cache", "--limit", "20"]);
    assert!(matches(&found).contains(&(f.cache.clone(), 3)), "{found}");
    let found = search(&["cache -purge", "--limit", "20"]);
    let hits = matches(&found);
    assert!(hits.contains(&(f.cache.clone(), 2)), "{found}");
    assert!(!hits.contains(&(f.cache.clone(), 3)), "{found}");
    // Every-word matches first, any-word matches still returned.
    let found = search(&["linker macos zeppelin", "--limit", "20"]);
    let hits = matches(&found);
    assert_eq!(hits[0], (f.linker.clone(), 2), "{found}");
    assert!(hits.iter().any(|(s, _)| *s == f.zeppelin), "{found}");
    // Rare words weigh more than common ones.
    let found = search(&["rust zeppelin", "--limit", "20"]);
    if rare_words_rank_first {
        assert_eq!(first_session(&found), f.zeppelin, "{found}");
    }
    assert_eq!(matches(&found).len(), 7, "{found}");
    // Case and diacritics fold.
    assert_eq!(first_session(&search(&["CAFE zurich"])), f.cafe);
    assert_eq!(first_session(&search(&["naive"])), f.cafe);
    // Other scripts are found by their own words.
    assert_eq!(first_session(&search(&["привет"])), f.scripts);
    if cjk {
        assert_eq!(first_session(&search(&["検索"])), f.scripts);
    }
    // A title is a field of its own: a think thread's purpose is found, once.
    let found = search(&["database"]);
    assert_eq!(matches(&found), vec![(f.migrations.clone(), 1)], "{found}");
    assert_eq!(found["matches"][0]["eventType"], "session_started");
    assert_eq!(found["matches"][0]["title"], "Database migrations");
    // A thinking session's title repeats its first thought: found once, through it.
    let found = search(&["undefined symbols"]);
    assert_eq!(matches(&found), vec![(f.linker.clone(), 2)], "{found}");
    // Plans: steps and risks.
    let found = search(&["stale deploy"]);
    assert_eq!(first_session(&found), f.plan, "{found}");
    assert_eq!(found["matches"][0]["eventType"], "plan_finalized");
    assert_eq!(found["matches"][0]["kind"], "planning");
    // Filters: kinds, session, time.
    let found = search(&["espresso", "--kind", "qa"]);
    assert_eq!(matches(&found).len(), 1, "{found}");
    assert_eq!(found["matches"][0]["kind"], "qa");
    let found = search(&["espresso", "--kind", "thinking,think"]);
    assert_eq!(first_session(&found), f.cafe);
    assert_eq!(matches(&found).len(), 1, "{found}");
    let found = search(&["cache", "--kind", "planning", "--kind", "think"]);
    assert!(matches(&found).iter().all(|(s, _)| *s == f.plan), "{found}");
    let found = search(&["cache", "--session", &f.cache]);
    assert_eq!(matches(&found).len(), 2, "{found}");
    assert!(matches(&search(&["cache", "--since", "2999-01-01T00:00:00Z"])).is_empty());
    assert!(matches(&search(&["cache", "--until", "1000"])).is_empty());
    assert!(
        !matches(&search(&[
            "cache",
            "--since",
            "0",
            "--until",
            "99999999999999"
        ]))
        .is_empty()
    );
    // Pagination: pages of 2 cover every match once, in order.
    let all = matches(&search(&["rust", "--limit", "50"]));
    assert_eq!(all.len(), 6);
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["rust", "--limit", "2"];
        if let Some(cursor) = &cursor {
            args.extend(["--cursor", cursor.as_str()]);
        }
        let page = search(&args);
        paged.extend(matches(&page));
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(paged, all);
}

pub(crate) fn cli_json(output: std::process::Output, what: &str) -> Value {
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{what}: {e}"))
}
