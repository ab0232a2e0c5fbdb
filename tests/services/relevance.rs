//! Recall's relevance set with a real embedding model (issues 34 and 45): 52 hand-written
//! sessions (a problem and its fix) across the thinking, think, qa and planning families,
//! recorded by the built binary over MCP and embedded by `serve`'s background embedder
//! through `tools/local-embed` (e5-small); 95 queries in five kinds — keyword (the
//! session's rare words), rare identifier (an error code, a host name, a ticket number or
//! a person's name the session holds, beside a common word it mostly does not: `E4021
//! users`), prefix (the start of such a word as `word*`: `kestr* database`), paraphrase (no content word of its session: "people kept getting signed
//! out" for a refresh-cookie fix), mixed (a few of its words, the rest in other words) —
//! each with its right session. `search_history` answers each in lexical, semantic and
//! hybrid mode; the test prints top-1, MRR@10 and nDCG@10 per mode and kind and fails if
//! hybrid falls below the better single mode on any kind by any of the three (no slack
//! beyond float rounding). The same on PostgreSQL (its full-text search, the sign bits in
//! memory): the fusion is the same code.
//!
//! Agent and booster sessions are left out: their text comes from a model's calls, and
//! the families above already cover every kind of searchable event these sessions hold
//! (thoughts, a thread's purpose, a plan's problem and context).
//!
//! This set is not the 20-session example (kept apart for acceptance).

use crate::common::{self, Client, call, is_error, structured, text};
use crate::local_embed::{LocalEmbed, Store};
use crate::pg;
use serde_json::{Value, json};
use std::collections::HashMap;

/// The toolsets the sessions need.
const TOOLSETS: &str = "thinking,ledger,planning,qa";

/// Matches asked for per query (the metrics are @10).
const DEPTH: usize = 10;

/// The float rounding hybrid may fall below the better single mode by, and no more.
const ROUNDING: f64 = 1e-9;

/// One hand-written session: its name (what queries point at) and what it records.
enum Session {
    /// Two `sequentialthinking` thoughts: the problem, its fix.
    Thinking(&'static str, [&'static str; 2]),
    /// A `think` thread: its purpose and one thought.
    Think(&'static str, &'static str, &'static str),
    /// One `sequentialthinking_qa` thought: the question and what was found.
    Qa(&'static str, &'static str),
    /// `deep_planning` init: the problem and its context.
    Planning(&'static str, &'static str, &'static str),
}

use Session::{Planning, Qa, Think, Thinking};

impl Session {
    fn name(&self) -> &'static str {
        match self {
            Thinking(name, _) | Think(name, _, _) | Qa(name, _) | Planning(name, _, _) => name,
        }
    }
}

const SESSIONS: &[Session] = &[
    Thinking(
        "refresh",
        [
            "Users were logged out every hour because the refresh token cookie had SameSite=Strict",
            "We set SameSite=Lax on the refresh cookie and extended its lifetime to 30 days",
        ],
    ),
    Thinking(
        "covering",
        [
            "The orders report query took 9 seconds on Postgres",
            "Added a covering index on (customer_id, created_at) including total; it now runs in 40 ms",
        ],
    ),
    Thinking(
        "leapday",
        [
            "A payment test failed only on February 29th",
            "The billing helper added 365 days; switched to chrono's checked_add_months",
        ],
    ),
    Thinking(
        "oom",
        [
            "The import worker was killed by the kernel's OOM killer on large CSV files",
            "It read the whole file into a Vec; streaming rows with csv::Reader keeps memory flat",
        ],
    ),
    Thinking(
        "dns",
        [
            "Builds in CI timed out resolving crates.io",
            "The runner's resolv.conf pointed at a dead resolver; we pinned 1.1.1.1 in the container config",
        ],
    ),
    Thinking(
        "port",
        [
            "Integration tests failed with address already in use",
            "Each test now binds port 0 and reads the assigned port back instead of a fixed 8080",
        ],
    ),
    Thinking(
        "timezone",
        [
            "Daily digest emails arrived at 3 am for customers in Sydney",
            "The scheduler used UTC midnight; we now store each customer's IANA zone and schedule at local 8 am",
        ],
    ),
    Thinking(
        "deadlock",
        [
            "Two transfers between the same accounts hung forever",
            "Both transactions locked rows in opposite order; locking the lower account id first removed the deadlock",
        ],
    ),
    Thinking(
        "glyphs",
        [
            "Customer names with accents showed as garbled characters in the PDF invoice",
            "The font lacked those glyphs; embedding Noto Sans fixed the rendering",
        ],
    ),
    Thinking(
        "cors",
        [
            "The browser blocked requests from the new dashboard domain",
            "The API's CORS allow-list was missing the origin; we added it along with credentials support",
        ],
    ),
    Thinking(
        "bundle",
        [
            "The web app's JavaScript bundle grew to 4 MB and first paint took 6 seconds",
            "Code splitting by route and dropping moment.js cut it to 900 KB",
        ],
    ),
    Thinking(
        "storm",
        [
            "After the outage, clients hammered the API and took it down again",
            "We added exponential backoff with jitter to the SDK retry loop",
        ],
    ),
    Thinking(
        "diskfull",
        [
            "The database stopped accepting writes at 2 am",
            "WAL archives filled the volume; a retention job now deletes archives older than 7 days",
        ],
    ),
    Thinking(
        "cert",
        [
            "Mobile apps could not connect on Monday morning",
            "The TLS certificate expired over the weekend; certbot renewal now runs from a systemd timer with an alert",
        ],
    ),
    Thinking(
        "nplusone",
        [
            "The project list page issued 300 SQL queries per request",
            "Eager loading the owners with a single join removed the N+1 pattern",
        ],
    ),
    Thinking(
        "listener",
        [
            "The Node service's heap grew until it restarted every few hours",
            "An event listener was registered on every request and never removed",
        ],
    ),
    Thinking(
        "lfs",
        [
            "Cloning the repository took 20 minutes",
            "We moved the training images to Git LFS and rewrote history to drop the binaries",
        ],
    ),
    Thinking(
        "cents",
        [
            "Invoice totals were off by a cent",
            "Floating point sums were the cause; storing amounts as integer cents made totals exact",
        ],
    ),
    Thinking(
        "stampede",
        [
            "When the homepage cache expired, hundreds of requests rebuilt it at once",
            "A lock around regeneration plus serving stale content stopped the stampede",
        ],
    ),
    Thinking(
        "docker",
        [
            "Docker image builds took 15 minutes on every commit",
            "We reordered the Dockerfile so dependencies install before the source is copied, so layers are cached",
        ],
    ),
    Think(
        "ngram",
        "Search relevance",
        "Users could not find documents by partial product codes; an n-gram analyzer on the sku field fixes it",
    ),
    Think(
        "confirm",
        "Onboarding emails",
        "Half the signups never confirmed their address; the confirmation link expired after 10 minutes, raised to 48 hours",
    ),
    Think(
        "logbill",
        "Log volume",
        "The logging bill tripled; debug level was left on in production after an incident",
    ),
    Think(
        "ratelimit",
        "Rate limiting",
        "One tenant's batch job starved everyone else; a token bucket per tenant keeps usage fair",
    ),
    Think(
        "backups",
        "Backups",
        "Nightly dumps were never tested; a restore drill showed the dump was missing the uploads bucket",
    ),
    Think(
        "flags",
        "Feature flags",
        "Old flags accumulated in the code; each flag now has an owner and an expiry date checked in CI",
    ),
    Think(
        "a11y",
        "Accessibility",
        "Screen reader users could not submit the form because the button was a div without a role",
    ),
    Think(
        "resets",
        "Password resets",
        "Reset links were sent twice because the queue consumer acknowledged after the handler timed out",
    ),
    Qa(
        "cron",
        "Is the cron job running twice after the daylight saving change? Yes: the host clock follows local time, so 02:30 happened twice",
    ),
    Qa(
        "retina",
        "Why are thumbnails blurry on retina screens? They were generated at 1x; we now render 2x sources with srcset",
    ),
    Qa(
        "safari",
        "Why does the checkout button do nothing in Safari? Optional chaining broke the old Safari parser; transpiling for an older target fixed it",
    ),
    Qa(
        "kafka",
        "Why did the Kafka consumer lag keep climbing? A single partition received every message because the key was a constant",
    ),
    Qa(
        "nginx",
        "Why were uploads over 1 MB rejected? It was nginx's client_max_body_size default; we raised it to 50m",
    ),
    Qa(
        "prices",
        "Why did search return stale prices? The indexer skipped updates from the bulk price import endpoint",
    ),
    Qa(
        "template",
        "Why is the test suite slow on laptops? Each test recreated the database schema; a template database cloned per test is ten times faster",
    ),
    Qa(
        "ioscrash",
        "Why did the iOS app crash at launch for some users? A migration assumed the preferences file existed on fresh installs",
    ),
    Planning(
        "jobs",
        "Move the monolith's background jobs to a queue",
        "Cron scripts on one VM overlap and nobody knows which ones failed",
    ),
    Planning(
        "cloudbill",
        "Cut the cloud bill by a third",
        "Idle staging clusters run all weekend and volumes stay after instances are deleted",
    ),
    Planning(
        "passkeys",
        "Replace passwords with passkeys for admin accounts",
        "Phishing attempts target the admin portal",
    ),
    Planning(
        "i18n",
        "Translate the product into German and Japanese",
        "Strings are concatenated in code and dates are formatted by hand",
    ),
    Planning(
        "mysql",
        "Migrate from MySQL 5.7 before its end of support",
        "Replication lag, and a few queries use deprecated syntax",
    ),
    Planning(
        "offline",
        "Offline mode for the field app",
        "Technicians lose signal in basements and their notes disappear",
    ),
    Planning(
        "oncall",
        "Shrink on-call pages",
        "Most alerts fire on CPU spikes that recover by themselves",
    ),
    Planning(
        "deploys",
        "Zero-downtime deploys",
        "Each release restarts all pods at once and users see 502 errors",
    ),
    // Sessions holding a rare identifier (issue 45): an error code, a host name, a ticket
    // number, a person's name, each said once among words about something else (and
    // common words: users, customers, a job, a database, a request, a test).
    Thinking(
        "refundcap",
        [
            "Finance reported that large refunds kept bouncing for enterprise accounts; the processor answered each request with E4021 and nothing else useful",
            "The processor caps refunds per merchant per day; their support raised our limit and a nightly job now splits big refunds across two days",
        ],
    ),
    Qa(
        "snapshot",
        "Why did the nightly warehouse export die halfway through? The Oracle database raised ORA-01555 because undo retention was shorter than the export's runtime; we raised undo_retention and split the export by month",
    ),
    Thinking(
        "replica",
        [
            "Reports for customers built from kestrel07 ran their queries against a copy several minutes behind the primary, so the finance dashboard disagreed with the invoices",
            "Replay on that replica had been paused during a maintenance window and never resumed; a test now alerts when replay lag passes a minute",
        ],
    ),
    Think(
        "bastion",
        "SSH access",
        "After the quarterly key rotation nobody could open a shell on bastion-eu2: its authorized_keys file still listed the retired key and the config management job skipped that host",
    ),
    Planning(
        "audit",
        "Archive the audit trail for OPS-4471",
        "Auditors asked for seven years of sign-in history for all users and our log database keeps ninety days",
    ),
    Thinking(
        "pagination",
        [
            "Ticket 8812 says the monthly export to accounting always lacks its final row for some customers",
            "The pagination loop stopped one page early because of an off-by-one in the range; the end bound is now inclusive for every request",
        ],
    ),
    Qa(
        "signoff",
        "Who approved skipping the load test before the spring sale? Tomasz did, since the staging database was being rebuilt that week and the app could not wait",
    ),
    Think(
        "handover",
        "Release handover",
        "While the release lead is on leave, Marguerite owns the checklist, the go or no-go call and the changelog; questions from users go to her",
    ),
];

/// What kind of query: how it shares words with its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// The session's rare words.
    Keyword,
    /// A rare identifier the session holds (an error code, a host name, a ticket number,
    /// a person's name) beside a common word, mostly one the session does not hold.
    RareIdentifier,
    /// The start of a rare word of the session written `word*`, beside a common word.
    Prefix,
    /// No content word of its session.
    Paraphrase,
    /// Some of its words, the rest said otherwise.
    Mixed,
}

const KINDS: [Kind; 5] = [
    Kind::Keyword,
    Kind::RareIdentifier,
    Kind::Prefix,
    Kind::Paraphrase,
    Kind::Mixed,
];

use Kind::{Keyword, Mixed, Paraphrase, Prefix, RareIdentifier};

impl Kind {
    /// Its name in the printed table.
    fn name(self) -> &'static str {
        match self {
            Keyword => "keyword",
            RareIdentifier => "rare identifier",
            Prefix => "prefix",
            Paraphrase => "paraphrase",
            Mixed => "mixed",
        }
    }
}

/// Each query, its kind and its right session(s).
const QUERIES: &[(Kind, &str, &[&str])] = &[
    (Keyword, "SameSite cookie", &["refresh"]),
    (Keyword, "covering index", &["covering"]),
    (Keyword, "checked_add_months", &["leapday"]),
    (Keyword, "OOM killer CSV", &["oom"]),
    (Keyword, "resolv.conf", &["dns"]),
    (Keyword, "deadlock", &["deadlock"]),
    (Keyword, "Noto Sans glyphs", &["glyphs"]),
    (Keyword, "CORS allow-list", &["cors"]),
    (Keyword, "moment.js bundle", &["bundle"]),
    (Keyword, "exponential backoff jitter", &["storm"]),
    (Keyword, "WAL archives", &["diskfull"]),
    (Keyword, "certbot systemd timer", &["cert"]),
    (Keyword, "N+1 eager loading", &["nplusone"]),
    (Keyword, "event listener heap", &["listener"]),
    (Keyword, "Git LFS", &["lfs"]),
    (Keyword, "Dockerfile layers", &["docker"]),
    (Keyword, "n-gram sku", &["ngram"]),
    (Keyword, "token bucket tenant", &["ratelimit"]),
    (Keyword, "srcset", &["retina"]),
    (Keyword, "client_max_body_size", &["nginx"]),
    (Keyword, "passkeys", &["passkeys"]),
    (Keyword, "MySQL replication", &["mysql"]),
    (Keyword, "1.1.1.1", &["dns"]),
    (Keyword, "8080", &["port"]),
    (Keyword, "IANA zone", &["timezone"]),
    (Keyword, "50m", &["nginx"]),
    (Keyword, "02:30", &["cron"]),
    (Keyword, "csv::Reader", &["oom"]),
    (Keyword, "48 hours", &["confirm"]),
    (Keyword, "systemd", &["cert"]),
    (Keyword, "pods 502", &["deploys"]),
    (Keyword, "SameSite=Lax", &["refresh"]),
    // The common word mostly one the session does not hold, said by several others.
    (RareIdentifier, "E4021 users", &["refundcap"]),
    (RareIdentifier, "E4021 customers", &["refundcap"]),
    (RareIdentifier, "ORA-01555 job", &["snapshot"]),
    (RareIdentifier, "ORA-01555 queries", &["snapshot"]),
    (RareIdentifier, "kestrel07 database", &["replica"]),
    (RareIdentifier, "kestrel07 requests", &["replica"]),
    (RareIdentifier, "bastion-eu2 users", &["bastion"]),
    (RareIdentifier, "OPS-4471 logs", &["audit"]),
    (RareIdentifier, "8812 test", &["pagination"]),
    (RareIdentifier, "8812 customers", &["pagination"]),
    (RareIdentifier, "Tomasz release", &["signoff"]),
    (RareIdentifier, "Marguerite app", &["handover"]),
    (Prefix, "kestr* database", &["replica"]),
    (Prefix, "Tomas* release", &["signoff"]),
    (Prefix, "Margue* app", &["handover"]),
    (Prefix, "refun* customers", &["refundcap"]),
    (Prefix, "retent* job", &["snapshot"]),
    (Prefix, "pagin* customers", &["pagination"]),
    (Prefix, "authoriz* users", &["bastion"]),
    (Paraphrase, "people kept getting signed out", &["refresh"]),
    (
        Paraphrase,
        "how did we speed up that sluggish database lookup",
        &["covering"],
    ),
    (
        Paraphrase,
        "subscription renewals broke in leap years",
        &["leapday"],
    ),
    (
        Paraphrase,
        "the uploader ran out of RAM on big spreadsheets",
        &["oom"],
    ),
    (
        Paraphrase,
        "pipeline couldn't look up the package registry hostname",
        &["dns"],
    ),
    (
        Paraphrase,
        "our harness servers collided on one socket number",
        &["port"],
    ),
    (
        Paraphrase,
        "newsletters landed in the middle of the night for Australians",
        &["timezone"],
    ),
    (
        Paraphrase,
        "money movements across a pair of wallets froze",
        &["deadlock"],
    ),
    (
        Paraphrase,
        "the website loaded slowly because the script was huge",
        &["bundle"],
    ),
    (
        Paraphrase,
        "once things came back, all the apps reconnected together and crushed the server",
        &["storm"],
    ),
    (
        Paraphrase,
        "handsets lost access because an encryption credential ran out",
        &["cert"],
    ),
    (
        Paraphrase,
        "an overview screen fired hundreds of database calls",
        &["nplusone"],
    ),
    (Paraphrase, "bills were a penny wrong", &["cents"]),
    (
        Paraphrase,
        "new accounts stayed unverified because the verification URL timed out quickly",
        &["confirm"],
    ),
    (
        Paraphrase,
        "pictures look fuzzy on high density displays",
        &["retina"],
    ),
    (
        Paraphrase,
        "one shard of the stream got all the traffic",
        &["kafka"],
    ),
    (
        Paraphrase,
        "get rid of secret words for privileged logins",
        &["passkeys"],
    ),
    (
        Paraphrase,
        "crews lose what they typed when there is no reception underground",
        &["offline"],
    ),
    (
        Paraphrase,
        "fewer night-time wake ups for the duty engineer",
        &["oncall"],
    ),
    (
        Mixed,
        "what fixed the cache rebuild rush on the homepage",
        &["stampede"],
    ),
    (
        Mixed,
        "cookie problem that signed everyone out",
        &["refresh"],
    ),
    (Mixed, "Postgres report that was too slow", &["covering"]),
    (Mixed, "the cron duplicate around clock changes", &["cron"]),
    (Mixed, "Safari checkout bug", &["safari"]),
    (Mixed, "why were the logs so expensive", &["logbill"]),
    (Mixed, "restore test of the backups", &["backups"]),
    (Mixed, "kafka topic with one hot spot", &["kafka"]),
    (Mixed, "iOS crash for new installs", &["ioscrash"]),
    (Mixed, "schema per test made the suite slow", &["template"]),
    (Mixed, "cloud costs from idle machines", &["cloudbill"]),
    (Mixed, "German translation of the UI strings", &["i18n"]),
    (Mixed, "502 errors during releases", &["deploys"]),
    (Mixed, "queue for the cron scripts", &["jobs"]),
    (Mixed, "stale prices in search results", &["prices"]),
    (Mixed, "password reset emails arrived twice", &["resets"]),
    (Mixed, "accessibility of the submit button", &["a11y"]),
    (Mixed, "feature flag cleanup", &["flags"]),
    (Mixed, "database writes stopped in the night", &["diskfull"]),
    (Mixed, "emails sent at the wrong hour", &["timezone"]),
    (Mixed, "slow builds in CI", &["docker"]),
    (Mixed, "memory blowup on CSV imports", &["oom"]),
    (Mixed, "admin login security", &["passkeys"]),
    (Mixed, "tests failing because a port was taken", &["port"]),
    (Mixed, "queries were slow on the orders page", &["covering"]),
];

/// The id of the session recorded last (each session is recorded whole before the next).
async fn newest_session(client: &Client) -> String {
    let listed = structured(&call(client, "list_sessions", json!({"limit": 1})).await);
    // Search names a session by its ledger id, listed beside the id its tool gave.
    crate::common::ledger_id(&listed["sessions"][0])
}

async fn ok(client: &Client, tool: &str, args: Value) {
    let result = call(client, tool, args).await;
    assert!(!is_error(&result), "{tool}: {}", text(&result));
}

/// Records every session; their ids by name.
async fn record(client: &Client) -> HashMap<&'static str, String> {
    let mut ids = HashMap::new();
    for session in SESSIONS {
        match session {
            Thinking(_, [problem, fix]) => {
                let first = structured(
                    &call(
                        client,
                        "sequentialthinking",
                        common::thought(1, 2, true, problem),
                    )
                    .await,
                );
                let mut args = common::thought(2, 2, false, fix);
                args["sessionId"] = first["sessionId"].clone();
                ok(client, "sequentialthinking", args).await;
            }
            Think(_, purpose, thought) => {
                ok(
                    client,
                    "think",
                    json!({"thread_purpose": purpose, "thought": thought, "thought_index": 1}),
                )
                .await;
            }
            Qa(_, thought) => {
                ok(
                    client,
                    "sequentialthinking_qa",
                    json!({"thought": thought, "thought_number": 1, "total_thoughts": 1, "next_thought_needed": false}),
                )
                .await;
            }
            Planning(_, problem, context) => {
                ok(
                    client,
                    "deep_planning",
                    json!({"phase": "init", "problem": problem, "context": context}),
                )
                .await;
            }
        }
        ids.insert(session.name(), newest_session(client).await);
    }
    ids
}

/// One mode's figures on one kind of query, summed over its queries.
#[derive(Default, Clone, Copy)]
struct Figures {
    queries: usize,
    top1: usize,
    reciprocal_ranks: f64,
    ndcg: f64,
}

impl Figures {
    fn mrr(&self) -> f64 {
        self.reciprocal_ranks / self.queries as f64
    }

    fn ndcg(&self) -> f64 {
        self.ndcg / self.queries as f64
    }

    /// Adds one query's ranking (its matches' sessions, best first) against `right`.
    fn add(&mut self, ranked: &[String], right: &[String]) {
        self.queries += 1;
        // A session counts once, at its best match (several events may match).
        let mut seen: Vec<&String> = Vec::new();
        let mut dcg = 0.0;
        let mut first: Option<usize> = None;
        for session in ranked.iter().take(DEPTH) {
            if seen.contains(&session) {
                continue;
            }
            let rank = seen.len() + 1;
            seen.push(session);
            if right.contains(session) {
                first.get_or_insert(rank);
                dcg += 1.0 / (rank as f64 + 1.0).log2();
            }
        }
        let ideal: f64 = (1..=right.len().min(DEPTH))
            .map(|rank| 1.0 / (rank as f64 + 1.0).log2())
            .sum();
        if let Some(rank) = first {
            self.reciprocal_ranks += 1.0 / rank as f64;
            if rank == 1 {
                self.top1 += 1;
            }
        }
        self.ndcg += dcg / ideal;
    }
}

const MODES: [&str; 3] = ["lexical", "semantic", "hybrid"];

/// One figure of a mode on a kind of query (top-1 as a count).
type Metric = fn(&Figures) -> f64;

/// The set on `store`: records it, waits for the vectors, asks every query in every mode,
/// prints the table, checks hybrid against the better single mode per kind.
async fn relevance_set(store: Store<'_>, backend: &str) {
    let model = LocalEmbed::start().await;
    let env = model.env();
    let client = store.serve_with(&env, TOOLSETS).await;
    let ids = record(&client).await;
    tokio::task::block_in_place(|| store.wait_embedded(&env));

    let mut figures: HashMap<(&str, Kind), Figures> = HashMap::new();
    let mut misses = String::new();
    for (kind, query, right) in QUERIES {
        let right: Vec<String> = right.iter().map(|name| ids[name].clone()).collect();
        let mut ranks = Vec::new();
        for mode in MODES {
            let result = call(
                &client,
                "search_history",
                json!({"query": query, "mode": mode, "limit": DEPTH}),
            )
            .await;
            assert!(!is_error(&result), "{query} ({mode}): {}", text(&result));
            let answer = structured(&result);
            // Never a lexical answer in place of a semantic one (the endpoint is up).
            assert!(
                !answer["note"]
                    .as_str()
                    .is_some_and(|n| n.contains("lexical matches")),
                "{query} ({mode}): {answer}"
            );
            let ranked = common::matched_sessions(&answer);
            figures
                .entry((mode, *kind))
                .or_default()
                .add(&ranked, &right);
            let rank = ranked.iter().position(|s| right.contains(s));
            ranks.push(rank.map_or("-".to_string(), |r| (r + 1).to_string()));
        }
        misses.push_str(&format!(
            "{:<15} {:>3} {:>3} {:>3}  {query}\n",
            kind.name(),
            ranks[0],
            ranks[1],
            ranks[2]
        ));
    }
    // Grouped by session, hybrid names each session once, in the order its best match
    // has (sessions that score alike: newest first), each with its rankers.
    let query = "people kept getting signed out";
    let ask = |args: Value| {
        let client = &client;
        async move { structured(&call(client, "search_history", args).await) }
    };
    let grouped = ask(json!({"query": query, "mode": "hybrid", "bySession": true})).await;
    let ungrouped = ask(json!({"query": query, "mode": "hybrid", "limit": 100})).await;
    let sessions = common::matched_sessions(&grouped);
    let mut unique = sessions.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), sessions.len(), "{grouped}");
    assert_eq!(sessions.len(), DEPTH, "{grouped}");
    let all = common::matched_sessions(&ungrouped);
    assert_eq!(sessions[0], all[0], "{grouped}");
    assert!(sessions.iter().all(|s| all.contains(s)), "{grouped}");
    for found in grouped["matches"].as_array().unwrap() {
        assert!(
            found["rankers"].as_array().is_some_and(|r| !r.is_empty()),
            "{grouped}"
        );
    }
    client.cancel().await.unwrap();

    let mut table = format!(
        "relevance set on {backend}: {} sessions, {} queries\nranks (lexical semantic hybrid):\n{misses}\n| kind | mode | top-1 | MRR@10 | nDCG@10 |\n|---|---|---|---|---|\n",
        SESSIONS.len(),
        QUERIES.len()
    );
    let mut worse = Vec::new();
    for kind in KINDS {
        for mode in MODES {
            let f = figures[&(mode, kind)];
            table.push_str(&format!(
                "| {} | {mode} | {}/{} | {:.3} | {:.3} |\n",
                kind.name(),
                f.top1,
                f.queries,
                f.mrr(),
                f.ndcg()
            ));
        }
        let [lexical, semantic, hybrid] = MODES.map(|mode| figures[&(mode, kind)]);
        let metrics: [(&str, Metric); 3] = [
            ("top-1", |f| f.top1 as f64),
            ("MRR@10", Figures::mrr),
            ("nDCG@10", Figures::ndcg),
        ];
        for (metric, of) in metrics {
            let best = of(&lexical).max(of(&semantic));
            if of(&hybrid) < best - ROUNDING {
                worse.push(format!(
                    "{} {metric}: hybrid {:.3} < {best:.3}",
                    kind.name(),
                    of(&hybrid)
                ));
            }
        }
    }
    eprintln!("{table}");
    assert!(
        worse.is_empty(),
        "hybrid falls below the better single mode: {worse:?}\n{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_is_never_worse_than_its_better_ranker() {
    let dir = common::data_dir();
    relevance_set(
        Store {
            dir: dir.path(),
            url: None,
        },
        "redb",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_too() {
    let schema = pg::Schema::new();
    let dir = common::data_dir();
    relevance_set(
        Store {
            dir: dir.path(),
            url: Some(&schema.url),
        },
        "PostgreSQL",
    )
    .await;
}
