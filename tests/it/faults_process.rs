//! Process faults: a panic inside a tool (the debug build's fault points, `src/fault.rs`,
//! armed by `REASONING_LEDGER_FAULT`), stdin closed or calls cancelled while they run, and
//! a randomized kill -9 loop with two servers on one ledger
//! (`REASONING_LEDGER_KILL_ROUNDS`, `REASONING_LEDGER_KILL_SEED`).
//!
//! Every test ends by reading the ledger back through the CLI (`export --format jsonl`,
//! `verify`): each answered call's events are there, complete and byte-identical to what
//! was sent, and nothing else of a failed call is.

use crate::common::*;
use rmcp::ServiceExt;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Arms a fault point in the server under test (debug builds only; see `src/fault.rs`).
const FAULT_ENV: &str = "REASONING_LEDGER_FAULT";
/// Rounds of the kill -9 loop; small by default so CI stays fast.
const KILL_ROUNDS_ENV: &str = "REASONING_LEDGER_KILL_ROUNDS";
const DEFAULT_KILL_ROUNDS: u64 = 4;
/// Seed of the kill -9 loop (printed on every run; set it to repeat a failing run).
const KILL_SEED_ENV: &str = "REASONING_LEDGER_KILL_SEED";
/// Longest a server may take to answer and exit once its stdin is closed.
const EXIT_DEADLINE: Duration = Duration::from_secs(20);
/// Longest the kill -9 loop waits for the calls it kills after.
const STALL_DEADLINE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------
// Reading the ledger back through the CLI

/// Every stored session id (`sessions --json`).
fn stored_sessions(dir: &Path) -> Vec<String> {
    let output = cli(dir, &["sessions", "--json", "--limit", "100000"]);
    assert!(output.status.success(), "sessions: {}", stderr(&output));
    let listed: Value = serde_json::from_str(&stdout(&output)).expect("sessions json");
    listed["sessions"]
        .as_array()
        .expect("{\"sessions\": [...]}")
        .iter()
        .map(|row| row["sessionId"].as_str().unwrap().to_string())
        .collect()
}

/// The session's events from `export --format jsonl`, checked gapless from seq 1.
fn stored_events(dir: &Path, session: &str, context: &str) -> Vec<Value> {
    let output = cli(dir, &["export", session, "--format", "jsonl"]);
    assert!(
        output.status.success(),
        "{context}: export {session}: {}",
        stderr(&output)
    );
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("jsonl line"))
        .collect();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "{context}: seqs of {session} not gapless"
    );
    assert_eq!(
        events.first().map(|e| e["payload"]["type"].clone()),
        Some(json!("session_started")),
        "{context}: {session} does not begin with session_started"
    );
    events
}

fn assert_verified(dir: &Path, context: &str) {
    let output = cli(dir, &["verify"]);
    assert!(
        output.status.success(),
        "{context}: verify failed: {}",
        stderr(&output)
    );
}

/// The raw arguments an event recorded, as compact JSON text (key order kept).
fn recorded_arguments(event: &Value) -> String {
    serde_json::to_string(&event["payload"]["call"]["raw_arguments"]).unwrap()
}

/// An acknowledged writing call: where the server said its event is, and what was sent.
#[derive(Clone, Debug)]
struct Acked {
    session: String,
    seq: u64,
    arguments: Value,
}

impl Acked {
    fn from_answer(result: &rmcp::model::CallToolResult, arguments: Value) -> Self {
        let answer = structured(result);
        Acked {
            session: answer["sessionId"].as_str().unwrap().to_string(),
            seq: answer["eventSeq"].as_u64().unwrap(),
            arguments,
        }
    }
}

/// Every acknowledged event is stored at the answered seq with byte-identical raw
/// arguments; every stored session is gapless. Returns the stored events by session.
fn assert_acked_stored(dir: &Path, acked: &[Acked], context: &str) -> BTreeMap<String, Vec<Value>> {
    let mut stored = BTreeMap::new();
    for call in acked {
        let events = stored
            .entry(call.session.clone())
            .or_insert_with(|| stored_events(dir, &call.session, context));
        let event = events
            .get(call.seq as usize - 1)
            .unwrap_or_else(|| panic!("{context}: acknowledged {call:?} is missing"));
        assert_eq!(
            recorded_arguments(event),
            serde_json::to_string(&call.arguments).unwrap(),
            "{context}: acknowledged {call:?} stored with other arguments"
        );
    }
    stored
}

// ---------------------------------------------------------------------------------------
// A panic inside a tool

/// A server with `point` armed, and the call that will hit it.
async fn spawn_armed(dir: &Path, fault: &str) -> Client {
    spawn_with(dir, &[], &[(FAULT_ENV, fault)]).await
}

#[tokio::test]
async fn panic_in_a_tool_before_its_write_answers_an_error_and_stores_nothing() {
    let dir = data_dir();
    let client = spawn_armed(dir.path(), "tool-before-write").await;
    let failed = call(
        &client,
        "sequentialthinking",
        thought(1, 2, true, "never stored"),
    )
    .await;
    assert!(is_error(&failed), "a panicking tool must answer an error");
    let message = text(&failed);
    assert!(
        message.contains("internal error in tool sequentialthinking")
            && message.contains("injected fault at tool-before-write"),
        "unclear error: {message}"
    );
    assert!(failed.structured_content.is_none());
    assert!(
        stored_sessions(dir.path()).is_empty(),
        "the failed call wrote"
    );

    // The same process goes on serving, both tools.
    let args = thought(1, 2, true, "after the panic");
    let ok = call(&client, "sequentialthinking", args.clone()).await;
    let acked = vec![Acked::from_answer(&ok, args)];
    assert_eq!(acked[0].seq, 2, "session_started + this thought");
    let think = json!({"thread_purpose": "p", "thought": "t", "thought_index": 1});
    let ok = call(&client, "think", think.clone()).await;
    let acked = [acked, vec![Acked::from_answer(&ok, think)]].concat();
    client.cancel().await.unwrap();
    let stored = assert_acked_stored(dir.path(), &acked, "tool-before-write");
    assert_eq!(stored.len(), 2);
    assert_eq!(stored_sessions(dir.path()).len(), 2);
    assert!(!format!("{stored:?}").contains("never stored"));
    assert_verified(dir.path(), "tool-before-write");
}

/// Calls started together in one process share group commits; the armed job panics
/// after writing its rows. The panicking call, and every call that shared its
/// transaction, answers an error naming the fault and stores nothing; every other call
/// commits, earlier sessions are untouched, and the server goes on serving.
#[tokio::test]
async fn panic_in_a_write_job_after_its_rows_aborts_its_group_and_only_its_group() {
    /// Calls started at once; the 6th job hit (the 5th of the burst) panics.
    const BURST: u64 = 16;
    let dir = data_dir();
    let client = Arc::new(spawn_armed(dir.path(), "job-after-append:6").await);
    // Hit 1: an earlier session that must survive untouched.
    let earlier = thought(1, 3, true, "earlier session");
    let ok = call(&client, "sequentialthinking", earlier.clone()).await;
    let mut acked = vec![Acked::from_answer(&ok, earlier)];

    let mut calls = Vec::new();
    for i in 0..BURST {
        let client = client.clone();
        calls.push(tokio::spawn(async move {
            // Each call starts its own session (thought 1), so no call depends on another.
            let arguments = if i % 2 == 0 {
                thought(1, 1, false, &format!("burst {i}"))
            } else {
                json!({"thread_purpose": format!("burst {i}"), "thought": format!("burst {i}"), "thought_index": 1})
            };
            let tool = if i % 2 == 0 {
                "sequentialthinking"
            } else {
                "think"
            };
            let result = call(&client, tool, arguments.clone()).await;
            (arguments, result)
        }));
    }
    let mut failed = Vec::new();
    for handle in calls {
        let (arguments, result) = handle.await.unwrap();
        if is_error(&result) {
            let message = text(&result);
            assert!(
                message.contains("a tool failed inside the write transaction")
                    && message.contains("injected fault at job-after-append (hit 6)"),
                "unclear error: {message}"
            );
            failed.push(arguments);
        } else {
            acked.push(Acked::from_answer(&result, arguments));
        }
    }
    assert!(!failed.is_empty(), "the armed job did not fail its call");
    println!(
        "calls failed with the panicking job's group: {} of {BURST}",
        failed.len()
    );

    // The same server answers the next call correctly.
    let mut next = thought(2, 3, true, "earlier session goes on");
    next["sessionId"] = json!(acked[0].session);
    let ok = call(&client, "sequentialthinking", next.clone()).await;
    let answer = structured(&ok);
    assert_eq!(answer["eventSeq"], json!(3));
    assert_eq!(answer["thoughtHistoryLength"], json!(2));
    acked.push(Acked::from_answer(&ok, next));
    Arc::into_inner(client)
        .expect("every call finished")
        .cancel()
        .await
        .unwrap();

    let stored = assert_acked_stored(dir.path(), &acked, "job-after-append");
    let sessions = stored_sessions(dir.path());
    assert_eq!(
        sessions.len() as u64,
        1 + BURST - failed.len() as u64,
        "a failed call left a session behind"
    );
    let all_text: String = sessions
        .iter()
        .flat_map(|s| stored_events(dir.path(), s, "job-after-append"))
        .map(|e| e.to_string())
        .collect();
    for arguments in &failed {
        let marker = format!("\"{}\"", arguments["thought"].as_str().unwrap());
        assert!(
            !all_text.contains(&marker),
            "failed call {arguments} was stored"
        );
    }
    assert_eq!(stored[&acked[0].session].len(), 3);
    assert_verified(dir.path(), "job-after-append");
}

/// The writer thread panics after the commit returned, before any caller heard of it:
/// the call answers a clear error saying it may or may not be recorded, its events are
/// there and complete, and the writer goes on (before the fix every later write failed
/// with "the ledger writer has stopped").
#[tokio::test]
async fn panic_on_the_writer_after_commit_keeps_the_events_whole_and_the_writer_alive() {
    let dir = data_dir();
    let client = spawn_armed(dir.path(), "after-commit").await;
    let first = thought(1, 3, true, "committed but unconfirmed");
    let failed = call(&client, "sequentialthinking", first.clone()).await;
    assert!(is_error(&failed));
    let message = text(&failed);
    assert!(
        message.contains("stopped before confirming this write")
            && message.contains("may or may not be recorded"),
        "unclear error: {message}"
    );
    // The events of the unconfirmed call are whole: start and thought, nothing else.
    let sessions = stored_sessions(dir.path());
    assert_eq!(sessions.len(), 1);
    let events = stored_events(dir.path(), &sessions[0], "after-commit");
    assert_eq!(events.len(), 2);
    assert_eq!(
        recorded_arguments(&events[1]),
        serde_json::to_string(&first).unwrap()
    );
    // The writer goes on: the process continues the same session.
    let second = thought(2, 3, true, "confirmed");
    let ok = call(&client, "sequentialthinking", second.clone()).await;
    let acked = Acked::from_answer(&ok, second);
    assert_eq!(
        (acked.session.as_str(), acked.seq),
        (sessions[0].as_str(), 3)
    );
    client.cancel().await.unwrap();
    assert_acked_stored(dir.path(), &[acked], "after-commit");
    assert_verified(dir.path(), "after-commit");
}

// ---------------------------------------------------------------------------------------
// stdin closed, calls cancelled

/// The server spawned on raw pipes: a burst of lines in, every stdout line out.
struct RawServer {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: BufReader<tokio::process::ChildStdout>,
}

impl RawServer {
    async fn start(dir: &Path) -> Self {
        let mut child = tokio::process::Command::new(bin())
            .args(["serve", "--data-dir"])
            .arg(dir)
            .env("DISABLE_THOUGHT_LOGGING", "true")
            .env_remove("REASONING_LEDGER_TOOLSETS")
            .env_remove(FAULT_ENV)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut server = RawServer {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        };
        server
            .send(&[
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "faults", "version": "1"}}}),
            ])
            .await;
        let mut line = String::new();
        server.stdout.read_line(&mut line).await.unwrap();
        let answer: Value = serde_json::from_str(&line).expect("initialize answered");
        assert_eq!(answer["id"], json!(0), "{line}");
        server
            .send(&[json!({"jsonrpc": "2.0", "method": "notifications/initialized"})])
            .await;
        server
    }

    /// Writes `messages` as one burst of lines.
    async fn send(&mut self, messages: &[Value]) {
        let mut bytes = Vec::new();
        for message in messages {
            serde_json::to_writer(&mut bytes, message).unwrap();
            bytes.push(b'\n');
        }
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(&bytes).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Closes stdin, reads stdout to its end and waits for the exit, all within
    /// [`EXIT_DEADLINE`]. Returns the answers by request id.
    async fn close_and_collect(mut self) -> HashMap<u64, Value> {
        drop(self.stdin.take());
        let started = Instant::now();
        let mut answers = HashMap::new();
        let reading = async {
            let mut line = String::new();
            while self.stdout.read_line(&mut line).await.unwrap() > 0 {
                let message: Value =
                    serde_json::from_str(&line).expect("stdout carries JSON-RPC only");
                if let Some(id) = message["id"].as_u64() {
                    assert!(answers.insert(id, message).is_none(), "two answers to {id}");
                }
                line.clear();
            }
            self.child.wait().await.unwrap()
        };
        let status = tokio::time::timeout(EXIT_DEADLINE, reading)
            .await
            .expect("the server exits once stdin is closed");
        assert!(status.success(), "server exit status {status}");
        println!("stdin closed → exit in {:?}", started.elapsed());
        answers
    }
}

/// A burst of writing calls on one process: thoughts 1..n with no session id (so they
/// continue the process's current session) and think calls, ids from 1.
fn writing_burst(count: u64, label: &str) -> Vec<(u64, Value)> {
    (1..=count)
        .map(|id| {
            let arguments = if id % 3 == 0 {
                json!({"thread_purpose": format!("{label} thread"), "thought": format!("{label} think {id}"), "thought_index": id / 3})
            } else {
                thought(id, count, id < count, &format!("{label} thought {id}"))
            };
            let tool = if id % 3 == 0 {
                "think"
            } else {
                "sequentialthinking"
            };
            let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}});
            (id, request)
        })
        .collect()
}

/// Checks the ledger after a burst: every answered call is stored where it said with its
/// exact arguments; every stored event belongs to a call of the burst and is whole (one
/// thought or think event per call, each session starting with session_started, gapless,
/// verify passes). Returns how many calls are stored.
fn assert_burst_outcome(
    dir: &Path,
    burst: &[(u64, Value)],
    answers: &HashMap<u64, Value>,
    context: &str,
) -> usize {
    let sent: HashMap<String, u64> = burst
        .iter()
        .map(|(id, request)| {
            (
                serde_json::to_string(&request["params"]["arguments"]).unwrap(),
                *id,
            )
        })
        .collect();
    let mut acked = Vec::new();
    for (id, request) in burst {
        let Some(answer) = answers.get(id) else {
            continue;
        };
        let result = &answer["result"];
        assert_eq!(
            result["isError"],
            json!(false),
            "{context}: call {id} failed: {answer}"
        );
        acked.push(Acked {
            session: result["structuredContent"]["sessionId"]
                .as_str()
                .unwrap()
                .to_string(),
            seq: result["structuredContent"]["eventSeq"].as_u64().unwrap(),
            arguments: request["params"]["arguments"].clone(),
        });
    }
    assert_acked_stored(dir, &acked, context);
    let mut stored_calls = BTreeSet::new();
    for session in stored_sessions(dir) {
        for event in stored_events(dir, &session, context).iter().skip(1) {
            let arguments = recorded_arguments(event);
            let id = sent.get(&arguments).unwrap_or_else(|| {
                panic!("{context}: stored event {event} is no call of the burst")
            });
            assert!(
                stored_calls.insert(*id),
                "{context}: call {id} stored twice"
            );
        }
    }
    assert_verified(dir, context);
    stored_calls.len()
}

#[tokio::test]
async fn stdin_closed_with_calls_in_flight_answers_them_all_and_stores_each_whole() {
    const CALLS: u64 = 40;
    let dir = data_dir();
    let mut server = RawServer::start(dir.path()).await;
    let burst = writing_burst(CALLS, "eof");
    let requests: Vec<Value> = burst.iter().map(|(_, r)| r.clone()).collect();
    server.send(&requests).await;
    let answers = server.close_and_collect().await;
    // rmcp drains in-flight handlers on EOF, and our answers follow their commits: a
    // client that closes stdin right after sending still hears about every call.
    let missing: Vec<u64> = (1..=CALLS).filter(|id| !answers.contains_key(id)).collect();
    assert!(missing.is_empty(), "calls never answered: {missing:?}");
    let stored = assert_burst_outcome(dir.path(), &burst, &answers, "stdin closed");
    assert_eq!(stored as u64, CALLS);
}

#[tokio::test]
async fn cancelled_calls_are_either_stored_whole_or_absent() {
    const CALLS: u64 = 40;
    let dir = data_dir();
    let mut server = RawServer::start(dir.path()).await;
    let burst = writing_burst(CALLS, "cancel");
    let requests: Vec<Value> = burst.iter().map(|(_, r)| r.clone()).collect();
    server.send(&requests).await;
    // Cancel every other call while they are in flight, then hang up.
    let cancels: Vec<Value> = (1..=CALLS)
        .filter(|id| id % 2 == 0)
        .map(|id| {
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "test"}})
        })
        .collect();
    server.send(&cancels).await;
    let answers = server.close_and_collect().await;
    let unanswered: Vec<u64> = (1..=CALLS)
        .filter(|id| id % 2 == 1 && !answers.contains_key(id))
        .collect();
    assert!(
        unanswered.is_empty(),
        "calls that were not cancelled went unanswered: {unanswered:?}"
    );
    let stored = assert_burst_outcome(dir.path(), &burst, &answers, "cancelled");
    println!(
        "cancelled: {} of {CALLS} calls answered, {stored} stored",
        answers.len()
    );
    assert!(stored >= answers.len());
}

// ---------------------------------------------------------------------------------------
// kill -9, randomized

/// xorshift64*: a tiny seeded generator, so a failing run can be repeated by its seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Spawns a server on `dir` (the default toolsets and export) and returns its client and
/// pid.
pub(crate) async fn spawn_with_pid(dir: &Path) -> (Client, u32) {
    let dir = dir.to_path_buf();
    let (transport, _) =
        TokioChildProcess::builder(tokio::process::Command::new(bin()).configure(|cmd| {
            // The default toolsets and export (the crash test compares exports).
            cmd.arg("serve")
                .arg("--data-dir")
                .arg(&dir)
                .args(["--toolsets", crate::common::WITH_EXPORT]);
            cmd.env("DISABLE_THOUGHT_LOGGING", "true");
            cmd.env_remove("REASONING_LEDGER_TOOLSETS");
            cmd.env_remove(FAULT_ENV);
        }))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn server");
    let pid = transport.id().expect("server pid");
    (().serve(transport).await.expect("initialize"), pid)
}

pub(crate) fn kill_9(pid: u32) {
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -9 {pid}");
}

/// One caller's next call: (tool, arguments). `shared` is the session every caller of
/// both servers writes to; `own` the caller's own session of each tool, once it exists.
fn random_call(
    rng: &mut Rng,
    label: &str,
    shared: &str,
    own_thinking: Option<&str>,
    own_think: Option<&str>,
    step: u64,
) -> (&'static str, Value) {
    let text = format!("{label} step {step} {}", rng.next());
    let number = 1 + rng.below(30);
    let mut sequential = thought(number, 30, rng.below(4) != 0, &text);
    match rng.below(5) {
        0 => {
            sequential["isRevision"] = json!(true);
            sequential["revisesThought"] = json!(1 + rng.below(number));
        }
        1 => {
            sequential["branchFromThought"] = json!(1 + rng.below(number));
            sequential["branchId"] = json!(format!("b{}", rng.below(3)));
        }
        2 => sequential["needsMoreThoughts"] = json!("true"),
        _ => {}
    }
    match rng.below(10) {
        0..4 => {
            sequential["sessionId"] = json!(shared);
            ("sequentialthinking", sequential)
        }
        4..7 => match own_thinking {
            Some(session) => {
                sequential["sessionId"] = json!(session);
                ("sequentialthinking", sequential)
            }
            None => ("sequentialthinking", thought(1, 30, true, &text)),
        },
        _ => {
            let mut think = json!({"thread_purpose": format!("{label} thread"), "thought": text,
                "thought_index": step + 1, "left_to_be_done": "- a\n- b"});
            match own_think {
                Some(session) => think["session_id"] = json!(session),
                None => think["thought_index"] = json!(1),
            }
            ("think", think)
        }
    }
}

/// A caller: random calls on its server until the server dies. Returns what was
/// acknowledged, and any call the live server refused (there must be none).
async fn caller(
    client: Arc<Client>,
    mut rng: Rng,
    label: String,
    shared: String,
    acked: Arc<Mutex<Vec<Acked>>>,
) -> Vec<String> {
    let mut own_thinking: Option<String> = None;
    let mut own_think: Option<String> = None;
    let mut refused = Vec::new();
    for step in 0.. {
        let (tool, arguments) = random_call(
            &mut rng,
            &label,
            &shared,
            own_thinking.as_deref(),
            own_think.as_deref(),
            step,
        );
        match try_call(&client, tool, arguments.clone()).await {
            Ok(result) if !is_error(&result) => {
                let call = Acked::from_answer(&result, arguments.clone());
                if arguments.get("sessionId").is_none() && tool == "sequentialthinking" {
                    own_thinking = Some(call.session.clone());
                }
                if arguments.get("session_id").is_none() && tool == "think" {
                    own_think = Some(call.session.clone());
                }
                acked.lock().unwrap().push(call);
            }
            // An error answer from a live server; after the kill, calls fail to send.
            Ok(result) => refused.push(format!("{tool} {arguments}: {}", text(&result))),
            Err(_) => break,
        }
    }
    refused
}

/// Two servers on one ledger, three callers each, a random mix of calls; both killed
/// with SIGKILL at random moments. After each round: every acknowledged event is stored
/// at its answered seq with byte-identical arguments, seqs are gapless, `verify` passes,
/// and the shared session's projection rebuilt by the CLI equals the one the live server
/// exported just before the kill.
#[tokio::test]
async fn kill_9_randomized_two_servers_lose_no_acknowledged_event() {
    const CALLERS_PER_SERVER: u64 = 3;
    let rounds: u64 = std::env::var(KILL_ROUNDS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_KILL_ROUNDS);
    let seed: u64 = std::env::var(KILL_SEED_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    // Printed with the test's output when it fails; every assertion names it too.
    println!("kill -9 loop: {rounds} rounds, {KILL_SEED_ENV}={seed}");
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    let dir = data_dir();
    let mut shared: Option<String> = None;
    let mut total_acked = 0;
    for round in 0..rounds {
        let context = format!("{KILL_SEED_ENV}={seed} round {round}");
        let (a, pid_a) = spawn_with_pid(dir.path()).await;
        let (b, pid_b) = spawn_with_pid(dir.path()).await;
        let (a, b) = (Arc::new(a), Arc::new(b));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let shared_session = match &shared {
            Some(session) => session.clone(),
            None => {
                let arguments = thought(1, 30, true, "shared session");
                let result = call(&a, "sequentialthinking", arguments.clone()).await;
                let first = Acked::from_answer(&result, arguments);
                acked.lock().unwrap().push(first.clone());
                shared = Some(first.session.clone());
                first.session
            }
        };
        let mut callers = Vec::new();
        for (server, client) in [("a", &a), ("b", &b)] {
            for index in 0..CALLERS_PER_SERVER {
                callers.push(tokio::spawn(caller(
                    client.clone(),
                    Rng::new(rng.next()),
                    format!("r{round}{server}{index}"),
                    shared_session.clone(),
                    acked.clone(),
                )));
            }
        }
        // Kill once a random number of calls were acknowledged (so a slow, loaded machine
        // still gets writes in), then after a random extra delay, mid-commit or not.
        let kill_after_acks = 4 + rng.below(40) as usize;
        let deadline = Instant::now() + STALL_DEADLINE;
        while acked.lock().unwrap().len() < kill_after_acks {
            assert!(
                Instant::now() < deadline,
                "{context}: fewer than {kill_after_acks} calls acknowledged in {STALL_DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let kill_after = Duration::from_millis(rng.below(30));
        tokio::time::sleep(kill_after).await;
        // The live server's projection of the shared session at a known seq.
        let at_seq = acked
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.session == shared_session)
            .map(|c| c.seq)
            .max();
        let live_export = match at_seq {
            Some(at) => {
                let result = call(
                    &a,
                    "export_session",
                    json!({"sessionId": shared_session, "format": "json", "atSeq": at}),
                )
                .await;
                assert!(!is_error(&result), "{context}: {}", text(&result));
                Some((at, text(&result)))
            }
            None => None,
        };
        let (first, second) = if rng.below(2) == 0 {
            (pid_a, pid_b)
        } else {
            (pid_b, pid_a)
        };
        kill_9(first);
        tokio::time::sleep(Duration::from_millis(rng.below(60))).await;
        kill_9(second);
        for handle in callers {
            let refused = tokio::time::timeout(Duration::from_secs(30), handle)
                .await
                .unwrap_or_else(|_| panic!("{context}: a caller hung after the kill"))
                .unwrap();
            assert!(
                refused.is_empty(),
                "{context}: a live server refused calls: {refused:?}"
            );
        }
        drop((a, b));
        let acked = acked.lock().unwrap().clone();
        assert!(
            acked.len() >= kill_after_acks,
            "{context}: acks went missing"
        );
        total_acked += acked.len();
        println!(
            "round {round}: killed {kill_after:?} after the {kill_after_acks}th ack, {} acknowledged",
            acked.len()
        );
        assert_acked_stored(dir.path(), &acked, &context);
        if let Some((at, live)) = live_export {
            let at = at.to_string();
            let rebuilt = cli(
                dir.path(),
                &["export", &shared_session, "--format", "json", "--at", &at],
            );
            assert!(rebuilt.status.success(), "{context}: {}", stderr(&rebuilt));
            assert_eq!(
                stdout(&rebuilt).trim_end(),
                live.trim_end(),
                "{context}: the rebuilt projection at seq {at} differs from the live server's"
            );
        }
        assert_verified(dir.path(), &context);
    }
    println!(
        "kill -9 loop: {rounds} rounds, {total_acked} acknowledged events checked in {:?}",
        started.elapsed()
    );
}

/// One stdio server (the ledger's host: its commits sync only its redo log, `ledger.wal`)
/// killed with SIGKILL while three callers write. The next process to open the ledger
/// replays the log: every acknowledged event is there, `verify` passes, and opening it
/// again (the replay already done) changes nothing.
#[tokio::test]
async fn kill_9_of_a_lone_server_mid_run_loses_nothing_its_redo_log_acknowledged() {
    let dir = data_dir();
    let (client, pid) = spawn_with_pid(dir.path()).await;
    let client = Arc::new(client);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let arguments = thought(1, 30, true, "lone server");
    let result = call(&client, "sequentialthinking", arguments.clone()).await;
    let first = Acked::from_answer(&result, arguments);
    acked.lock().unwrap().push(first.clone());
    let callers: Vec<_> = (0..3u64)
        .map(|index| {
            tokio::spawn(caller(
                client.clone(),
                Rng::new(index + 1),
                format!("lone{index}"),
                first.session.clone(),
                acked.clone(),
            ))
        })
        .collect();
    let deadline = Instant::now() + STALL_DEADLINE;
    while acked.lock().unwrap().len() < 30 {
        assert!(
            Instant::now() < deadline,
            "fewer than 30 calls acknowledged"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    kill_9(pid);
    for handle in callers {
        let refused = tokio::time::timeout(Duration::from_secs(30), handle)
            .await
            .expect("a caller hung after the kill")
            .unwrap();
        assert!(
            refused.is_empty(),
            "the live server refused calls: {refused:?}"
        );
    }
    drop(client);
    let log = dir.path().join("ledger.wal");
    let mode = std::fs::metadata(&log)
        .expect("the redo log beside the ledger")
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600,
        "the redo log is the owner's only"
    );
    let acked = acked.lock().unwrap().clone();
    let first_read = assert_acked_stored(dir.path(), &acked, "after kill -9");
    assert_verified(dir.path(), "after kill -9");
    let second_read = assert_acked_stored(dir.path(), &acked, "opened again");
    assert_eq!(first_read, second_read, "a second open changed the ledger");
    assert_verified(dir.path(), "opened again");
}
