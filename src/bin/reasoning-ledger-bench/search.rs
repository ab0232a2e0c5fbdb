//! Search benchmarks (issue 20): recall's index against the scan of every event that
//! search was before it, on a generated ledger of a million events.
//!
//! Owns: the search fixture (sessions of varied generated text: a few words in nearly
//! every event, a long tail of rare ones, one word in ten events), the previous build's
//! scan (kept here, verbatim in what it does, to be measured beside the index), and the
//! figures: `search_history` latency on a warm server (p50/p95), the CLI's wall time and
//! peak RSS, the rebuild time and index size, and one-caller append p50 with the index
//! open and never opened. Issue 34's cases come after issue 20's: two- and four-word
//! phrases of common words, filters (kinds, since, sessionId, read from the fixture's
//! middle event) around one common word, a prefix and a typo; the previous scan is not
//! measured for them. `--search-fixture uniform` measures issue 45's cases instead, on
//! the ledger benchmarks' fixture (every event the same sentence but for its number):
//! phrases every event holds, stop words, a prefix, a common word and a rare number, a
//! kind filter. Must not: judge the figures (targets are shown beside them).

use crate::ledger::FIXTURE_BATCH;
use anyhow::Context;
use reasoning_ledger::testing::Ledger;
use reasoning_ledger::testing::McpClient;
use reasoning_ledger::testing::{CallRecord, Event, NewEvent, Payload, SessionId, SessionKind};
use reasoning_ledger::testing::{SequentialThought, ThinkingEvent};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Events per session of the uniform fixture (as the ledger benchmarks' open fixture).
const UNIFORM_SESSION_EVENTS: u64 = 100_000;

/// Which generated ledger the search bench measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SearchFixture {
    /// Sessions of 100 events of varied text (issue 20's): common words, a long tail of
    /// rare ones, one word in ten events.
    Varied,
    /// Sessions whose every thought says the same sentence but for its number (the
    /// ledger benchmarks' fixture, issue 45's measurements): every event holds the same
    /// phrases, stop words included.
    Uniform,
}

/// Events in the searched ledger, by default.
pub(crate) const DEFAULT_SEARCH_EVENTS: u64 = 1_000_000;
/// Events per generated session.
const EVENTS_PER_SESSION: u64 = 100;
/// Every this many events, one holds the rare word.
const RARE_EVERY: u64 = 100_000;
/// The rare word.
const RARE_WORD: &str = "zeppelin";
/// `search_history` calls per query on the warm server.
const SERVER_CALLS: usize = 40;
/// CLI runs per query.
const CLI_RUNS: usize = 7;
/// Appends per run of the append comparison.
const APPEND_CALLS: usize = 300;

/// Common English words: most events hold several.
const COMMON: &[&str] = &[
    "check", "evidence", "cache", "build", "deploy", "latency", "error", "request", "retry",
    "session", "schema", "index", "query", "thread", "memory", "disk", "network", "plan", "risk",
    "test", "review", "commit", "branch", "merge", "linker", "compile", "release", "config",
    "server", "client", "token", "budget", "timeout", "queue", "worker", "lock",
];

/// xorshift64*, seeded: the fixture is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The text of generated event `n`: "Thought n:" then 12–28 words, half common, half
/// from a long Zipf-like tail of 50,000 generated words; event `RARE_EVERY × k` holds
/// the rare word.
fn text_of(n: u64, rng: &mut Rng) -> String {
    let mut text = format!("Thought {n}:");
    let words = 12 + rng.next() % 17;
    for _ in 0..words {
        text.push(' ');
        if rng.next().is_multiple_of(2) {
            text.push_str(COMMON[(rng.next() % COMMON.len() as u64) as usize]);
        } else {
            let rank = (50_000.0 * rng.unit().powi(4)) as u64;
            let _ = write!(text, "w{rank:x}");
        }
    }
    if n.is_multiple_of(RARE_EVERY) {
        text.push_str(" near the ");
        text.push_str(RARE_WORD);
    }
    text.push('.');
    text
}

fn thought_event(n: u64, number: u64, total: u64, text: String) -> Payload {
    let raw = json!({"thought": text, "thoughtNumber": number, "totalThoughts": total,
        "nextThoughtNeeded": number < total});
    ThinkingEvent::ThoughtRecorded {
        thought: SequentialThought {
            thought: text,
            thought_number: number,
            total_thoughts: total,
            next_thought_needed: number < total,
            is_revision: None,
            revises_thought: None,
            branch_from_thought: None,
            branch_id: None,
            needs_more_thoughts: None,
        },
        call: CallRecord {
            tool: "sequentialthinking".into(),
            raw_arguments: raw.into(),
            duration_us: n % 100,
        },
    }
    .into()
}

/// Builds the fixture: sessions of [`EVENTS_PER_SESSION`] events (every 10th a `think`
/// session), `events` in all.
fn build_fixture(ledger: &Ledger, events: u64) -> anyhow::Result<()> {
    let mut rng = Rng(0x5eed_1e55);
    let mut written = 0u64;
    let mut session_number = 0u64;
    while written < events {
        let session = SessionId::generate();
        let size = EVENTS_PER_SESSION.min(events - written);
        let kind = if session_number.is_multiple_of(10) {
            SessionKind::THINK
        } else {
            SessionKind::THINKING
        };
        let mut seq = 0u64;
        while seq < size {
            let upto = (seq + FIXTURE_BATCH).min(size);
            let mut batch = Vec::new();
            for s in seq + 1..=upto {
                let n = written + s;
                batch.push(NewEvent::new(if s == 1 {
                    Payload::SessionStarted {
                        kind,
                        title: format!("Generated session {session_number}"),
                        aliases: Vec::new(),
                    }
                } else {
                    thought_event(n, s - 1, size - 1, text_of(n, &mut rng))
                }));
            }
            let expected = seq;
            ledger
                .write_blocking(move |txn| txn.append(session, expected, batch))?
                .context("appending fixture events")?;
            seq = upto;
        }
        written += size;
        session_number += 1;
    }
    Ok(())
}

/// The search of the previous build, as it was: every event scanned, lowercase
/// substring, every match collected, then sorted and cut to `limit`.
fn previous_scan(ledger: &Ledger, query: &str, limit: usize) -> anyhow::Result<usize> {
    let phrase = query.trim().to_lowercase();
    let words: Vec<&str> = phrase.split_whitespace().collect();
    let kinds: std::collections::HashMap<SessionId, SessionKind> = ledger
        .heads()?
        .into_iter()
        .map(|h| (h.session, h.kind()))
        .collect();
    let mut hits: Vec<(u8, u64, String, u64, String)> = Vec::new();
    let mut consider = |order: u64, event: Event| {
        let _kind = kinds.get(&event.session).copied();
        let texts = [event.payload.text(), event.payload.search_extra()];
        let mut found: Option<(String, u8)> = None;
        for text in texts.into_iter().flatten() {
            let lower = text.to_lowercase();
            let rank = if lower.contains(&phrase) {
                0
            } else if words.iter().all(|w| lower.contains(w)) {
                1
            } else {
                continue;
            };
            if found.as_ref().is_none_or(|(_, best)| rank < *best) {
                found = Some((text.chars().take(180).collect(), rank));
            }
        }
        if let Some((snippet, rank)) = found {
            hits.push((rank, order, event.session.to_string(), event.seq, snippet));
        }
        true
    };
    ledger.for_each_event_from_position(1, |e| consider(e.position, e.event))?;
    hits.sort_by_key(|(rank, order, ..)| (*rank, std::cmp::Reverse(*order)));
    hits.truncate(limit);
    Ok(hits.len())
}

/// One measured query: its label, `search_history` arguments, CLI arguments, and whether
/// the previous build's scan is measured beside it (the cases of issue 20 only).
struct Case {
    label: &'static str,
    arguments: Value,
    cli: Vec<String>,
    scan: bool,
}

/// What the filter cases (issue 34) filter on, read from the fixture: the commit time of
/// its middle event (`since`: the newer half) and that event's session (`sessionId`).
struct Probe {
    middle_at: u64,
    middle_session: String,
}

impl Probe {
    fn read(ledger: &Ledger, events: u64) -> anyhow::Result<Probe> {
        let middle = ledger
            .events_from_position((events / 2).max(1), 1)?
            .into_iter()
            .next()
            .context("the fixture has no middle event")?;
        Ok(Probe {
            middle_at: middle.event.at,
            middle_session: middle.event.session.to_string(),
        })
    }
}

/// The two-word phrase of the phrase cases: two common words.
const PHRASE_TWO: &str = "cache latency";
/// The four-word phrase: four common words.
const PHRASE_FOUR: &str = "check evidence cache build";

/// Issue 45's cases, on the uniform fixture (every event: "Thought n: weigh the evidence,
/// note what is uncertain, and decide what to check next.").
fn uniform_cases() -> Vec<Case> {
    let case = |label, query: &str| Case {
        label,
        arguments: json!({"query": query}),
        cli: vec![query.to_string()],
        scan: false,
    };
    let kind = Case {
        label: "1 common word + a kind filter (`evidence`, kinds thinking)",
        arguments: json!({"query": "evidence", "kinds": ["thinking"]}),
        cli: ["evidence", "--kind", "thinking"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        scan: false,
    };
    vec![
        case("1 word every event holds (`evidence`)", "evidence"),
        case(
            "a phrase every event holds (`\"check next\"`)",
            "\"check next\"",
        ),
        case(
            "a 4-word phrase every event holds (`\"decide what to check\"`)",
            "\"decide what to check\"",
        ),
        case("a phrase of stop words (`\"what is\"`)", "\"what is\""),
        case(
            "a phrase of stop words, 3 words (`\"and decide what\"`)",
            "\"and decide what\"",
        ),
        case("a phrase with a prefix (`\"check ne*\"`)", "\"check ne*\""),
        case("a word and a prefix (`check ne*`)", "check ne*"),
        case(
            "a common word and a rare number (`thought 777`)",
            "thought 777",
        ),
        kind,
    ]
}

fn cases(fixture: SearchFixture, probe: &Probe) -> Vec<Case> {
    if fixture == SearchFixture::Uniform {
        return uniform_cases();
    }
    let case = |label, arguments: Value, cli: &[&str]| Case {
        label,
        arguments,
        cli: cli.iter().map(|s| s.to_string()).collect(),
        scan: true,
    };
    let new = |label, arguments: Value, cli: &[&str]| Case {
        scan: false,
        ..case(label, arguments, cli)
    };
    let since = probe.middle_at.to_string();
    let two = format!("\"{PHRASE_TWO}\"");
    let four = format!("\"{PHRASE_FOUR}\"");
    vec![
        case(
            "selective (1 word in 10 events)",
            json!({"query": RARE_WORD}),
            &[RARE_WORD],
        ),
        case(
            "broad (1 word in every event)",
            json!({"query": "thought"}),
            &["thought"],
        ),
        case(
            "broad, 2 common words",
            json!({"query": "cache latency"}),
            &["cache latency"],
        ),
        case(
            "broad + kind + time filters",
            json!({"query": "cache latency", "kinds": ["think"], "since": 1, "until": "2999-01-01T00:00:00Z"}),
            &[
                "cache latency",
                "--kind",
                "think",
                "--since",
                "1",
                "--until",
                "2999-01-01",
            ],
        ),
        case("no match", json!({"query": "qqqxyzzy"}), &["qqqxyzzy"]),
        new(
            "phrase, 2 common words",
            json!({"query": two}),
            &[two.as_str()],
        ),
        new(
            "phrase, 4 common words",
            json!({"query": four}),
            &[four.as_str()],
        ),
        new(
            "1 common word + kinds (1 session in 10)",
            json!({"query": "cache", "kinds": ["think"]}),
            &["cache", "--kind", "think"],
        ),
        new(
            "1 common word + since (newer half)",
            json!({"query": "cache", "since": probe.middle_at}),
            &["cache", "--since", since.as_str()],
        ),
        new(
            "1 common word + sessionId",
            json!({"query": "cache", "sessionId": probe.middle_session}),
            &["cache", "--session", probe.middle_session.as_str()],
        ),
        new(
            "phrase + kinds + since",
            json!({"query": two, "kinds": ["think"], "since": probe.middle_at}),
            &[two.as_str(), "--kind", "think", "--since", since.as_str()],
        ),
        new("prefix (laten*)", json!({"query": "laten*"}), &["laten*"]),
        new(
            "typo, retried (latencyy)",
            json!({"query": "latencyy"}),
            &["latencyy"],
        ),
    ]
}

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let at = ((samples.len() as f64 * p).ceil() as usize).clamp(1, samples.len()) - 1;
    samples[at].as_secs_f64() * 1000.0
}

/// Peak RSS of this process so far (VmHWM), in KiB.
fn own_peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Environment variable that makes this bench measure one command and exit (see
/// [`run_measured`]).
const MEASURE_ENV: &str = "REASONING_LEDGER_BENCH_MEASURE";

/// When this process was started by [`run_measured`] to measure a command (its
/// arguments): runs it, prints "wall-ns peak-KiB", and exits with its success.
pub(crate) fn measure_child_if_asked() -> Option<std::process::ExitCode> {
    std::env::var_os(MEASURE_ENV)?;
    let mut args = std::env::args_os().skip(1);
    let program = args.next()?;
    let mut command = std::process::Command::new(program);
    command.args(args).env_remove(MEASURE_ENV);
    Some(match wait_measured(&mut command) {
        Ok((wall, kib)) => {
            println!("{} {kib}", wall.as_nanos());
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    })
}

/// Runs `command` to its end; returns its wall time and peak RSS (KiB). Measured by a
/// fresh, small copy of this bench that spawns it: Linux carries a parent's peak RSS
/// into a child it forks (`ru_maxrss` would report this bench's peak, not the CLI's).
fn run_measured(command: &mut std::process::Command) -> anyhow::Result<(Duration, u64)> {
    let mut measure = std::process::Command::new(std::env::current_exe()?);
    measure
        .arg(command.get_program())
        .args(command.get_args())
        .env(MEASURE_ENV, "1");
    // The command's own variables reach it through the measuring copy's environment.
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => measure.env(name, value),
            None => measure.env_remove(name),
        };
    }
    let output = measure.output().context("running the measuring copy")?;
    anyhow::ensure!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>());
    match (fields.next(), fields.next()) {
        (Some(Ok(nanos)), Some(Ok(kib))) => Ok((Duration::from_nanos(nanos), kib)),
        _ => anyhow::bail!("the measuring copy said {text:?}"),
    }
}

/// Spawns `command`, waits for it with `wait4`: its wall time and peak RSS (KiB).
fn wait_measured(command: &mut std::process::Command) -> anyhow::Result<(Duration, u64)> {
    let started = Instant::now();
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("spawning the CLI")?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for the child it reaps.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, reaped here once (the `Child` is never waited).
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed();
    anyhow::ensure!(reaped == pid, "wait4 failed");
    anyhow::ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the CLI failed: {command:?}"
    );
    drop(child);
    Ok((elapsed, usage.ru_maxrss as u64))
}

fn dir_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map(|m| m.len()).unwrap_or(0),
        })
        .sum()
}

async fn serve(server: &Path, dir: &Path) -> anyhow::Result<McpClient> {
    let mut command = tokio::process::Command::new(server);
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .env("DISABLE_THOUGHT_LOGGING", "true")
        .env_remove("REASONING_LEDGER_STORE")
        .env_remove("REASONING_LEDGER_TOOLSETS");
    let client = McpClient::spawn(command)?;
    client.initialize("reasoning-ledger-bench").await?;
    Ok(client)
}

fn arguments(value: &Value) -> serde_json::Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// One-caller append p50 (ms) on a fresh ledger in `dir`; with `index_open`, the server
/// searched first (its index open, applied after each append by the next search).
async fn append_p50(server: &Path, dir: &Path, index_open: bool) -> anyhow::Result<f64> {
    let client = serve(server, dir).await?;
    if index_open {
        client
            .call_tool("search_history", arguments(&json!({"query": "warm"})))
            .await?;
    }
    let mut samples = Vec::new();
    let mut session: Option<String> = None;
    for n in 1..=APPEND_CALLS as u64 {
        let mut args = json!({"thought": format!("append {n}: check the cache latency"),
            "thoughtNumber": n, "totalThoughts": APPEND_CALLS, "nextThoughtNeeded": true});
        if let Some(session) = &session {
            args["sessionId"] = json!(session);
        }
        let started = Instant::now();
        let answer = client
            .call_tool("sequentialthinking", arguments(&args))
            .await?;
        samples.push(started.elapsed());
        session = answer["structuredContent"]["sessionId"]
            .as_str()
            .map(String::from);
    }
    client.close().await?;
    Ok(percentile(&mut samples, 0.5))
}

/// Runs the search benchmarks in `dir` with `server` (the fixture is built there).
pub(crate) async fn run(
    server: &Path,
    dir: &Path,
    events: u64,
    fixture: SearchFixture,
) -> anyhow::Result<String> {
    let ledger_dir = dir.join(match fixture {
        SearchFixture::Varied => "search",
        SearchFixture::Uniform => "search-uniform",
    });
    eprintln!("bench: building the search fixture ({events} events)…");
    // The blocking parts step off the async workers (the store blocks on its writer).
    let probe = tokio::task::block_in_place(|| -> anyhow::Result<Probe> {
        let ledger = Ledger::open(&ledger_dir, reasoning_ledger::testing::families())?;
        if ledger.last_position()? < events {
            match fixture {
                SearchFixture::Varied => build_fixture(&ledger, events)?,
                SearchFixture::Uniform => {
                    // As the ledger benchmarks' open fixture: sessions of 100,000 events.
                    let mut total = 0;
                    while total < events {
                        let n = UNIFORM_SESSION_EVENTS.min(events - total);
                        crate::ledger::build_session(&ledger, n)?;
                        total += n;
                    }
                }
            }
        }
        Probe::read(&ledger, events)
    })?;
    let ledger_bytes =
        std::fs::metadata(ledger_dir.join(reasoning_ledger::testing::LEDGER_FILE_NAME))?.len();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "search over {events} events ({:.0} MiB ledger)\n",
        ledger_bytes as f64 / 1048576.0
    );

    // Rebuild from scratch, through the CLI.
    let _ = std::fs::remove_dir_all(ledger_dir.join("index"));
    let (rebuild, rebuild_kib) = tokio::task::block_in_place(|| {
        run_measured(
            std::process::Command::new(server)
                .arg("--data-dir")
                .arg(&ledger_dir)
                .arg("reindex"),
        )
    })?;
    let index_bytes = dir_bytes(&ledger_dir.join("index"));
    let _ = writeln!(
        out,
        "| index figure | measured | target |\n|---|---|---|\n| rebuild from scratch (`reindex`) | {:.1} s (peak RSS {:.0} MiB) | ≤ 60 s |\n| index size | {:.0} MiB = {:.2} × the ledger file | ≤ 1.0 × |\n",
        rebuild.as_secs_f64(),
        rebuild_kib as f64 / 1024.0,
        index_bytes as f64 / 1048576.0,
        index_bytes as f64 / ledger_bytes as f64
    );

    // The previous build's scan, in this process (what its server ran per call).
    let scans = tokio::task::block_in_place(|| -> anyhow::Result<Vec<(Duration, u64)>> {
        let ledger = Ledger::open(&ledger_dir, reasoning_ledger::testing::families())?;
        let mut scans = Vec::new();
        for case in cases(fixture, &probe).into_iter().filter(|c| c.scan) {
            let query = case.arguments["query"].as_str().unwrap_or_default();
            let before = own_peak_kib();
            let started = Instant::now();
            previous_scan(&ledger, query, 20)?;
            scans.push((started.elapsed(), own_peak_kib().saturating_sub(before)));
        }
        Ok(scans)
    })?;

    // The warm server.
    let client = serve(server, &ledger_dir).await?;
    let mut server_rows = Vec::new();
    for case in cases(fixture, &probe) {
        let args = arguments(&case.arguments);
        let first = client.call_tool("search_history", args.clone()).await?;
        anyhow::ensure!(first["isError"] != json!(true), "{}: {first}", case.label);
        let found = first["structuredContent"]["matches"]
            .as_array()
            .map_or(0, Vec::len);
        let mut samples = Vec::new();
        for _ in 0..SERVER_CALLS {
            let started = Instant::now();
            client.call_tool("search_history", args.clone()).await?;
            samples.push(started.elapsed());
        }
        server_rows.push((
            found,
            percentile(&mut samples, 0.5),
            percentile(&mut samples, 0.95),
        ));
    }
    client.close().await?;

    // The CLI, process start included.
    let mut cli_rows = Vec::new();
    for case in cases(fixture, &probe) {
        let mut walls = Vec::new();
        let mut peak = 0;
        for _ in 0..CLI_RUNS {
            let (wall, kib) = tokio::task::block_in_place(|| {
                run_measured(
                    std::process::Command::new(server)
                        .arg("--data-dir")
                        .arg(&ledger_dir)
                        .arg("search")
                        .args(&case.cli)
                        .arg("--json"),
                )
            })?;
            walls.push(wall);
            peak = peak.max(kib);
        }
        cli_rows.push((percentile(&mut walls, 0.5), peak));
    }

    let _ = writeln!(
        out,
        "| query (top 10) | matches | warm server p50 / p95 | target p95 | CLI wall (median) / peak RSS | targets | previous scan: time / RSS growth |\n|---|---|---|---|---|---|---|"
    );
    let mut scans = scans.into_iter();
    for ((case, (found, p50, p95)), (wall, peak)) in cases(fixture, &probe)
        .iter()
        .zip(&server_rows)
        .zip(&cli_rows)
    {
        let scan = match case.scan.then(|| scans.next()).flatten() {
            Some((scan, scan_kib)) => format!(
                "{:.0} ms / {:.0} MiB",
                scan.as_secs_f64() * 1000.0,
                scan_kib as f64 / 1024.0
            ),
            None => "—".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {found} | {p50:.2} / {p95:.2} ms | ≤ 10 ms | {wall:.1} ms / {:.1} MiB | ≤ 50 ms / ≤ 64 MiB | {scan} |",
            case.label,
            *peak as f64 / 1024.0,
        );
    }

    // Appends with the index open and never opened.
    let off = append_p50(server, &dir.join("append-off"), false).await?;
    let on = append_p50(server, &dir.join("append-on"), true).await?;
    let _ = writeln!(
        out,
        "\n| one-caller append ({APPEND_CALLS} calls) | p50 |\n|---|---|\n| index never opened | {off:.3} ms |\n| index open (searched first) | {on:.3} ms ({:+.1} %; target ≤ +10 %) |",
        (on / off - 1.0) * 100.0
    );
    Ok(out)
}

// ---- semantic recall (issue 21) ----

/// Dimensions of the bench's stub embeddings (bge-small's and MiniLM's).
const STUB_DIMENSIONS: usize = 384;
/// The stub's model name.
const STUB_MODEL: &str = "bench-hashed-384";
/// Ledger sizes of the semantic bench, by default.
pub(crate) const DEFAULT_SEMANTIC_EVENTS: &[u64] = &[100_000];

/// The stub embeddings endpoint's vector of `text`: each word adds ±1 to a dimension
/// chosen by its hash (feature hashing), so texts sharing words land close.
fn stub_vector(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; STUB_DIMENSIONS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let hash = word
            .to_lowercase()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
            });
        let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
        v[(hash % STUB_DIMENSIONS as u64) as usize] += sign;
    }
    v
}

/// Starts an OpenAI-compatible `/embeddings` stub on 127.0.0.1 on its own thread;
/// returns its base URL.
fn start_stub_embeddings() -> anyhow::Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let base = format!("http://{}/v1", listener.local_addr()?);
    std::thread::Builder::new()
        .name("bench-embeddings-stub".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the stub's runtime");
            runtime.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).expect("the stub's listener");
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    tokio::spawn(serve_stub_connection(stream));
                }
            });
        })?;
    Ok(base)
}

/// Answers the request of one connection.
async fn serve_stub_connection(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut data: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => data.extend_from_slice(&buf[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while data.len() < end + 4 + length {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => data.extend_from_slice(&buf[..n]),
            }
        }
        let body: Value =
            serde_json::from_slice(&data[end + 4..end + 4 + length]).unwrap_or_default();
        data.drain(..end + 4 + length);
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        let vectors: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"index": i, "embedding": stub_vector(t.as_str().unwrap_or(""))}))
            .collect();
        let reply = json!({"data": vectors, "model": STUB_MODEL}).to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            reply.len()
        );
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.write_all(reply.as_bytes()).await;
        let _ = stream.shutdown().await;
        return;
    }
}

/// Resident and peak memory of a process (VmRSS, VmHWM), in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Semantic recall on generated ledgers of each size in `sizes`: embedding every event
/// through a stub endpoint (`reindex --embeddings`), the vectors' size on disk, then a
/// warm server's `search_history` per mode (each call a query not asked before, so its
/// embedding is a round trip), its memory, and the CLI's hybrid search (cold).
pub(crate) async fn run_semantic(
    server: &Path,
    dir: &Path,
    sizes: &[u64],
) -> anyhow::Result<String> {
    let base = start_stub_embeddings()?;
    let env = [
        ("REASONING_LEDGER_EMBEDDINGS_BASE_URL", base.as_str()),
        ("REASONING_LEDGER_EMBEDDINGS_MODEL", STUB_MODEL),
    ];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "semantic recall: {STUB_DIMENSIONS}-dimension vectors from a stub endpoint on 127.0.0.1\n\n| events | embed all (`reindex --embeddings`) | vectors on disk | mode | warm p50 / p95 | target p95 | server RSS | CLI hybrid wall / peak RSS |\n|---|---|---|---|---|---|---|---|"
    );
    for &events in sizes {
        let ledger_dir = dir.join(format!("semantic-{events}"));
        eprintln!("bench: building the semantic fixture ({events} events)…");
        tokio::task::block_in_place(|| -> anyhow::Result<()> {
            let ledger = Ledger::open(&ledger_dir, reasoning_ledger::testing::families())?;
            if ledger.last_position()? < events {
                build_fixture(&ledger, events)?;
            }
            Ok(())
        })?;
        eprintln!("bench: embedding {events} events…");
        let (embed, embed_kib) = tokio::task::block_in_place(|| {
            let mut command = std::process::Command::new(server);
            command
                .arg("--data-dir")
                .arg(&ledger_dir)
                .args(["reindex", "--embeddings"]);
            for (k, v) in env {
                command.env(k, v);
            }
            run_measured(&mut command)
        })?;
        let vector_bytes = dir_bytes(&ledger_dir.join("vectors"));
        let mut command = tokio::process::Command::new(server);
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(&ledger_dir)
            .env("DISABLE_THOUGHT_LOGGING", "true")
            .env_remove("REASONING_LEDGER_STORE")
            .env_remove("REASONING_LEDGER_TOOLSETS");
        for (k, v) in env {
            command.env(k, v);
        }
        let client = McpClient::spawn(command)?;
        client.initialize("reasoning-ledger-bench").await?;
        let pid = client.pid().unwrap_or(0);
        let mut rows = Vec::new();
        for mode in ["lexical", "semantic", "hybrid"] {
            let mut samples = Vec::new();
            for i in 0..=SERVER_CALLS {
                let query = format!(
                    "{} {} {mode}{i}",
                    COMMON[i % COMMON.len()],
                    COMMON[(i * 7 + 3) % COMMON.len()]
                );
                let args = arguments(&json!({"query": query, "mode": mode}));
                let started = Instant::now();
                let answer = client.call_tool("search_history", args).await?;
                let took = started.elapsed();
                anyhow::ensure!(answer["isError"] != json!(true), "{mode}: {answer}");
                anyhow::ensure!(
                    answer["structuredContent"]["note"]
                        .as_str()
                        .is_none_or(|n| !n.contains("lexical matches")),
                    "{mode} answered lexically: {answer}"
                );
                if i > 0 {
                    samples.push(took); // the first call loads the vectors' codes
                }
            }
            rows.push((
                mode,
                percentile(&mut samples, 0.5),
                percentile(&mut samples, 0.95),
            ));
        }
        let (rss, peak) = rss_kib(pid);
        client.close().await?;
        let (cli_wall, cli_kib) = tokio::task::block_in_place(|| {
            let mut command = std::process::Command::new(server);
            command.arg("--data-dir").arg(&ledger_dir).args([
                "search",
                "cache latency",
                "--mode",
                "hybrid",
                "--json",
            ]);
            for (k, v) in env {
                command.env(k, v);
            }
            run_measured(&mut command)
        })?;
        for (mode, p50, p95) in rows {
            let _ = writeln!(
                out,
                "| {events} | {:.1} s (peak RSS {:.0} MiB) | {:.0} MiB | {mode} | {p50:.2} / {p95:.2} ms | ≤ 30 ms (hybrid, 100k) | {:.0} MiB (peak {:.0}) | {:.0} ms / {:.0} MiB |",
                embed.as_secs_f64(),
                embed_kib as f64 / 1024.0,
                vector_bytes as f64 / 1048576.0,
                rss as f64 / 1024.0,
                peak as f64 / 1024.0,
                cli_wall.as_secs_f64() * 1000.0,
                cli_kib as f64 / 1024.0
            );
        }
    }
    Ok(out)
}
