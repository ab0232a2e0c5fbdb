//! The ledger host (issue 23): the first process on a ledger holds the file, every other
//! one (a second server, the CLI, the `ui`) reaches it over `ledger.sock` in the data
//! directory and gets the same answers; when the host exits or is killed, the next process
//! takes over. Conditions, never fixed waits: an answer, an exit, a file.

use crate::common::*;
use crate::faults_process::{kill_9, spawn_with_pid};
use serde_json::{Value, json};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex};

const SOCKET: &str = "ledger.sock";

/// One acknowledged thought: its session and seq.
#[derive(Clone, Debug)]
struct Ack {
    session: String,
    seq: u64,
    text: String,
}

async fn record(client: &Client, arguments: Value) -> Ack {
    let text = arguments["thought"].as_str().unwrap().to_string();
    let result = call(client, "sequentialthinking", arguments).await;
    assert!(!is_error(&result), "{}", crate::common::text(&result));
    let answer = structured(&result);
    Ack {
        session: answer["sessionId"].as_str().unwrap().to_string(),
        seq: answer["eventSeq"].as_u64().unwrap(),
        text,
    }
}

/// The stored events of `session`, from the CLI (which reaches the ledger however it is
/// held at the moment).
fn stored(dir: &Path, session: &str) -> Vec<Value> {
    let output = cli(dir, &["export", session, "--format", "jsonl"]);
    assert!(output.status.success(), "export: {}", stderr(&output));
    stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Every acknowledged thought is stored at its seq, and `verify` passes.
fn assert_stored(dir: &Path, acks: &[Ack]) {
    let mut sessions = std::collections::BTreeMap::new();
    for ack in acks {
        let events = sessions
            .entry(ack.session.clone())
            .or_insert_with(|| stored(dir, &ack.session));
        let event = events
            .get(ack.seq as usize - 1)
            .unwrap_or_else(|| panic!("acknowledged {ack:?} is missing"));
        assert_eq!(event["seq"], json!(ack.seq));
        assert!(
            event.to_string().contains(&ack.text),
            "{ack:?} stored as {event}"
        );
    }
    let verify = cli(dir, &["verify"]);
    assert!(verify.status.success(), "verify: {}", stderr(&verify));
}

#[tokio::test]
async fn two_servers_and_the_cli_share_one_ledger_through_its_host() {
    let dir = data_dir();
    let a = spawn(dir.path()).await;
    let first = record(&a, thought(1, 4, true, "the host's first thought")).await;
    let socket = dir.path().join(SOCKET);
    let meta = std::fs::symlink_metadata(&socket).expect("the host listens on ledger.sock");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "owner only");

    // A second server continues the host's session, and the host sees it.
    let b = spawn(dir.path()).await;
    let mut arguments = thought(2, 4, true, "the second server's thought");
    arguments["sessionId"] = json!(first.session);
    let second = record(&b, arguments).await;
    assert_eq!(second.seq, first.seq + 1);
    let mut arguments = thought(3, 4, true, "the host again");
    arguments["sessionId"] = json!(first.session);
    let third = record(&a, arguments).await;
    assert_eq!(third.seq, second.seq + 1);

    // The CLI, while both run: reads and verify through the host.
    let show = cli(dir.path(), &["show", &first.session]);
    assert!(show.status.success(), "show: {}", stderr(&show));
    for ack in [&first, &second, &third] {
        assert!(stdout(&show).contains(&ack.text), "{}", stdout(&show));
    }
    assert_stored(dir.path(), &[first, second, third]);
    drop(b);
    drop(a);
}

#[tokio::test]
async fn the_next_process_takes_over_when_the_host_exits() {
    let dir = data_dir();
    let (a, _) = spawn_with_pid(dir.path()).await;
    let first = record(&a, thought(1, 9, true, "before the host exits")).await;
    let (b, _) = spawn_with_pid(dir.path()).await;
    let mut arguments = thought(2, 9, true, "from the client");
    arguments["sessionId"] = json!(first.session);
    let second = record(&b, arguments).await;
    // The host exits cleanly (its stdin closed): the client takes the file over.
    a.cancel().await.unwrap();
    let mut arguments = thought(3, 9, true, "after the host exited");
    arguments["sessionId"] = json!(first.session);
    let third = record(&b, arguments).await;
    assert_eq!(third.seq, second.seq + 1);
    // The new host serves a third process.
    let c = spawn(dir.path()).await;
    let mut arguments = thought(4, 9, false, "from a third process");
    arguments["sessionId"] = json!(first.session);
    let fourth = record(&c, arguments).await;
    assert_stored(dir.path(), &[first, second, third, fourth]);
}

#[tokio::test]
async fn kill_9_of_the_host_with_clients_writing_loses_nothing_acknowledged() {
    const CALLERS_PER_CLIENT: usize = 3;
    const ACKS_BEFORE_KILL: usize = 30;
    const ACKS_AFTER_KILL: usize = 30;
    let dir = data_dir();
    let (host, host_pid) = spawn_with_pid(dir.path()).await;
    record(&host, thought(1, 2, false, "the host holds the ledger")).await;
    let clients = [
        Arc::new(spawn(dir.path()).await),
        Arc::new(spawn(dir.path()).await),
    ];
    let acks = Arc::new(Mutex::new(Vec::<Ack>::new()));
    let (progress_tx, mut progress) = tokio::sync::watch::channel(0usize);
    let progress_tx = Arc::new(progress_tx);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut callers = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for index in 0..CALLERS_PER_CLIENT {
            let (client, acks, stop, progress_tx) = (
                client.clone(),
                acks.clone(),
                stop.clone(),
                progress_tx.clone(),
            );
            callers.push(tokio::spawn(async move {
                let mut session: Option<String> = None;
                let mut n = 1;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let mut arguments = thought(
                        n,
                        1000,
                        true,
                        &format!("client {c} caller {index} step {n}"),
                    );
                    if let Some(session) = &session {
                        arguments["sessionId"] = json!(session);
                    }
                    // Every call must be answered, and not with an error: the takeover is
                    // invisible to a client's callers.
                    let ack = record(&client, arguments).await;
                    session.get_or_insert(ack.session.clone());
                    let mut acks = acks.lock().unwrap();
                    acks.push(ack);
                    progress_tx.send_replace(acks.len());
                    n += 1;
                }
            }));
        }
    }
    progress
        .wait_for(|acked| *acked >= ACKS_BEFORE_KILL)
        .await
        .unwrap();
    kill_9(host_pid);
    drop(host);
    let at_kill = acks.lock().unwrap().len();
    progress
        .wait_for(|acked| *acked >= at_kill + ACKS_AFTER_KILL)
        .await
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for caller in callers {
        caller.await.expect("a caller failed");
    }
    drop(clients);
    let acks = acks.lock().unwrap().clone();
    assert_stored(dir.path(), &acks);
}

#[tokio::test]
async fn a_stale_socket_from_a_dead_host_is_replaced() {
    let dir = data_dir();
    let socket = dir.path().join(SOCKET);
    // A socket file nobody listens on, as a killed host leaves it.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_err());
    let a = spawn(dir.path()).await;
    let first = record(&a, thought(1, 2, true, "a new host")).await;
    assert!(
        std::os::unix::net::UnixStream::connect(&socket).is_ok(),
        "the new host listens there"
    );
    // And serves another process through it.
    let show = cli(dir.path(), &["show", &first.session]);
    assert!(show.status.success(), "{}", stderr(&show));
    assert!(stdout(&show).contains("a new host"));
}

#[tokio::test]
async fn a_socket_owned_by_another_user_is_refused() {
    let dir = data_dir();
    let a = spawn(dir.path()).await;
    let first = record(&a, thought(1, 2, true, "held by the host")).await;
    let socket = dir.path().join(SOCKET);
    // As root (the test machine), hand the socket to `nobody`: a process that finds the
    // ledger held must not talk to it.
    let chown = std::process::Command::new("chown")
        .args(["nobody"])
        .arg(&socket)
        .status()
        .expect("run chown");
    assert!(
        chown.success(),
        "chown nobody {} (this test needs root)",
        socket.display()
    );
    assert_ne!(std::fs::symlink_metadata(&socket).unwrap().uid(), 0);
    let show = cli(dir.path(), &["show", &first.session]);
    assert_eq!(show.status.code(), Some(1), "{}", stdout(&show));
    assert!(
        stderr(&show).contains("owned by another user"),
        "{}",
        stderr(&show)
    );
    assert!(stdout(&show).is_empty());
    drop(a);
}
