//! Issue 32: read-only media and an honest redo log, through the built binary.
//!
//! - A ledger its reader may read but not write (owned by root, 0755 directories, 0644
//!   files, read as user 65534 through `setpriv`; root ignores permission bits, hence
//!   another user), with records still pending in `ledger.wal` after a kill -9: every
//!   read-only command works, shows the pending thoughts, and changes no byte, mtime or
//!   name in the data directory. Run by another user as root (CI), by the tests' own
//!   user otherwise (its permission bits then hold: directories 0555, files 0444).
//! - A damaged record in the middle of `ledger.wal` with acknowledged ones after it: the
//!   server refuses writes naming the damage and the count; the log is left as it is.
//! - A log cut below its header after a clean close: named as the redo log, never as a
//!   redb database.

use crate::common::*;
use crate::faults_process::{kill_9, spawn_with_pid};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

/// The user the read-only commands run as (`nobody` on most systems).
const READER_UID: u32 = 65534;

/// Size of the redo log's header: its first record starts here.
const LOG_HEADER_BYTES: usize = 4096;

/// What is compared of one entry of the data directory: its bytes (none for what is not a
/// regular file), mtime in nanoseconds, mode and owner.
type Entry = (Option<Vec<u8>>, i128, u32, u32);

/// Every entry under `dir`, `dir` included.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Entry> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let bytes = meta.is_file().then(|| std::fs::read(&path).unwrap());
        let mtime = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
        out.insert(path.clone(), (bytes, mtime, meta.mode(), meta.uid()));
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                pending.push(entry.unwrap().path());
            }
        }
    }
    out
}

/// Whether the tests run as root (who ignores permission bits: the reader is then
/// another user).
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Makes `dir` and everything under it unwritable by the reader: as root, given to root
/// with directories 0755 and files 0644 (the reader is another user); otherwise
/// directories 0555 and files 0444 (the reader is this user).
fn make_read_only(dir: &Path) {
    let (dirs, files) = if is_root() {
        (0o755, 0o644)
    } else {
        (0o555, 0o444)
    };
    let mut paths: Vec<PathBuf> = snapshot(dir).keys().cloned().collect();
    // Files before the folders holding them (a folder made 0555 first would refuse nothing
    // here, but keep the order the undo needs).
    paths.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for path in paths {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if is_root() {
            std::os::unix::fs::lchown(&path, Some(0), Some(0)).unwrap();
        }
        let mode = if meta.is_dir() { dirs } else { files };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// Makes `dir` writable again, so its temporary folder can be removed.
fn make_writable(dir: &Path) {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let mode = if meta.is_dir() { 0o755 } else { 0o644 };
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            pending.extend(entries.flatten().map(|e| e.path()));
        }
    }
}

/// Whether every ancestor of `path` lets any user through (o+x).
fn traversable(path: &Path) -> bool {
    path.ancestors()
        .skip(1)
        .all(|dir| std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 != 0))
}

/// The binary as the reader can run it: itself when every folder above it is open to all,
/// else a copy in a 0755 temporary folder.
fn reader_binary(keep: &mut Vec<tempfile::TempDir>) -> PathBuf {
    let binary = bin();
    if !is_root()
        || traversable(&binary) && std::fs::metadata(&binary).unwrap().mode() & 0o005 == 0o005
    {
        return binary;
    }
    let folder = tempfile::tempdir().unwrap();
    std::fs::set_permissions(folder.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = folder.path().join("reasoning-ledger");
    std::fs::copy(&binary, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(
        traversable(&copy),
        "{} is not reachable by others",
        copy.display()
    );
    keep.push(folder);
    copy
}

/// Runs the CLI on `data` as the reader: [`READER_UID`] through `setpriv` as root, this
/// user otherwise.
fn cli_as_reader(binary: &Path, data: &Path, args: &[&str]) -> Output {
    let uid = READER_UID.to_string();
    let mut command = if is_root() {
        let mut command = std::process::Command::new("setpriv");
        command
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .arg("--clear-groups")
            .arg(binary);
        command
    } else {
        std::process::Command::new(binary)
    };
    command
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("REASONING_LEDGER_DIR")
        .env_remove("REASONING_LEDGER_STORE")
        .env_remove("REASONING_LEDGER_EMBEDDINGS_BASE_URL")
        .env_remove("REASONING_LEDGER_EMBEDDINGS_MODEL")
        .env("HOME", "/tmp")
        .env_remove("RUST_LOG")
        .output()
        .expect("run the reader (as root: setpriv, from util-linux, must be installed)")
}

/// Records `per_session` thoughts in each of two sessions on a server, then kills it with
/// SIGKILL right after the last answer (before its checkpoint a second later): every
/// thought is acknowledged, and the ledger file lacks them (they are in `ledger.wal`).
/// Returns the sessions' ids and the thoughts' texts.
async fn pending_thoughts(data: &Path, per_session: u64) -> (Vec<String>, Vec<String>) {
    let (client, pid) = spawn_with_pid(data).await;
    let mut sessions = Vec::new();
    let mut texts = Vec::new();
    for s in 0..2 {
        let mut session: Option<String> = None;
        for n in 1..=per_session {
            let text = format!("pending thought s{s}n{n} zanzibar");
            let mut arguments = thought(n, per_session, n < per_session, &text);
            if let Some(id) = &session {
                arguments["sessionId"] = serde_json::json!(id);
            }
            let answer = structured(&call(&client, "sequentialthinking", arguments).await);
            session.get_or_insert_with(|| answer["sessionId"].as_str().unwrap().to_string());
            texts.push(text);
        }
        sessions.push(session.unwrap());
    }
    kill_9(pid);
    drop(client);
    (sessions, texts)
}

/// The offsets of the records in a redo log, in order (while lengths hold).
fn record_offsets(log: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = LOG_HEADER_BYTES;
    while at + 20 <= log.len() {
        let len = u32::from_le_bytes(log[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 || at + 20 + len > log.len() {
            break;
        }
        offsets.push(at);
        at += 20 + len;
    }
    offsets
}

#[tokio::test]
async fn read_only_commands_read_a_ledger_this_user_may_not_write_with_its_pending_records_and_change_nothing()
 {
    let root = data_dir();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = root.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let (sessions, texts) = pending_thoughts(&data, 3).await;
    // A new ledger's first commit syncs the ledger file itself (the log's name in it is
    // new); the five after it are only in the redo log.
    let log = std::fs::read(data.join("ledger.wal")).unwrap();
    assert_eq!(
        record_offsets(&log).len(),
        5,
        "five commits are only in the redo log"
    );
    make_read_only(&data);
    let before = snapshot(&data);
    let mut keep = Vec::new();
    let binary = reader_binary(&mut keep);
    let run = |args: &[&str]| {
        let output = cli_as_reader(&binary, &data, args);
        assert!(
            output.status.success(),
            "{args:?} failed as user {READER_UID}: {}",
            stderr(&output)
        );
        output
    };

    let listed = run(&["sessions"]);
    for session in &sessions {
        assert!(
            stdout(&listed).contains(session.as_str()),
            "{}",
            stdout(&listed)
        );
    }
    let note = stderr(&listed);
    assert!(note.contains("is read-only here"), "{note}");
    assert!(note.contains("5 commit(s) pending"), "{note}");
    assert!(note.contains("applied in memory"), "{note}");
    assert_eq!(note.matches("note:").count(), 1, "said once: {note}");

    let shown = stdout(&run(&["show", &sessions[0]]));
    let exported = stdout(&run(&["export", &sessions[1], "--format", "jsonl"]));
    let replayed = stdout(&run(&["replay", &sessions[0]]));
    for text in &texts[..3] {
        assert!(shown.contains(text.as_str()), "show: {shown}");
        assert!(replayed.contains(text.as_str()), "replay: {replayed}");
    }
    for text in &texts[3..] {
        assert!(exported.contains(text.as_str()), "export: {exported}");
    }
    let all = stdout(&run(&["export", "--all", "--format", "jsonl"]));
    assert_eq!(
        all.matches("\"type\":\"thought_recorded\"").count(),
        6,
        "{all}"
    );

    let searched = run(&["search", "zanzibar", "--limit", "10"]);
    let found = stdout(&searched);
    assert_eq!(found.lines().count(), 6, "one line a thought: {found}");
    for s in 0..2 {
        for n in 1..=3 {
            assert!(found.contains(&format!("s{s}n{n}")), "{found}");
        }
    }
    let said = stderr(&searched);
    assert!(said.contains("search index is built in"), "{said}");
    assert!(said.contains("not beside the ledger"), "{said}");

    let verified = run(&["verify"]);
    assert!(
        stdout(&verified).contains("ok: 2 session(s), 8 event(s)"),
        "{}",
        stdout(&verified)
    );

    assert_eq!(
        snapshot(&data),
        before,
        "no byte, mtime, mode or name in the data directory changed"
    );

    // The log unreadable by the reader: the ledger was not closed cleanly, so its last
    // commits may be only there; the command says so instead of showing less.
    std::fs::set_permissions(
        data.join("ledger.wal"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let refused = cli_as_reader(&binary, &data, &["sessions"]);
    make_writable(&data);
    assert!(!refused.status.success());
    let said = stderr(&refused);
    assert!(said.contains("not closed cleanly"), "{said}");
    assert!(said.contains("ledger.wal"), "{said}");
    assert!(!said.contains("move it away"), "{said}");
}

#[tokio::test]
async fn a_damaged_record_in_the_redo_log_with_acknowledged_ones_after_it_stops_writes_and_is_kept()
{
    let dir = data_dir();
    let (sessions, texts) = pending_thoughts(dir.path(), 6).await;
    let log_path = dir.path().join("ledger.wal");
    let mut log = std::fs::read(&log_path).unwrap();
    let offsets = record_offsets(&log);
    // The first commit synced the ledger file (the log's name in it was new); the eleven
    // after it are only in the log.
    assert_eq!(offsets.len(), 11);
    // Sixteen bytes flipped a third of the way in: inside the fourth record's payload (the
    // fifth commit). Four commits lie before it, seven records after it.
    let at = offsets[3] + 30;
    for byte in &mut log[at..at + 16] {
        *byte ^= 0x5a;
    }
    std::fs::write(&log_path, &log).unwrap();

    let (client, pid) = spawn_with_pid(dir.path()).await;
    let refused = call(
        &client,
        "sequentialthinking",
        thought(7, 7, false, "after the damage"),
    )
    .await;
    assert!(is_error(&refused), "{}", text(&refused));
    let message = text(&refused);
    assert!(message.contains("is damaged"), "{message}");
    assert!(message.contains("ledger.wal"), "{message}");
    assert!(
        message.contains("7 acknowledged record(s)"),
        "the records after the damaged one are counted: {message}"
    );
    assert!(message.contains("recover --to"), "{message}");
    kill_9(pid);
    drop(client);

    // The reads show the commits before the damage; the log is left byte for byte.
    let listed = cli(dir.path(), &["export", "--all", "--format", "jsonl"]);
    assert_eq!(listed.status.code(), Some(1), "{}", stderr(&listed));
    let all = stdout(&listed);
    for text in &texts[..4] {
        assert!(all.contains(text.as_str()), "{all}");
    }
    for text in &texts[4..] {
        assert!(!all.contains(text.as_str()), "past the damage: {all}");
    }
    assert!(
        stderr(&listed).contains("damaged"),
        "the open says so: {}",
        stderr(&listed)
    );
    let verified = cli(dir.path(), &["verify"]);
    assert_eq!(verified.status.code(), Some(1), "{}", stdout(&verified));
    assert!(
        stderr(&verified).contains("ledger.wal"),
        "{}",
        stderr(&verified)
    );
    assert_eq!(std::fs::read(&log_path).unwrap(), log, "the log is kept");
    let _ = sessions;
}

#[tokio::test]
async fn a_redo_log_cut_below_its_header_after_a_clean_close_is_named_as_the_log() {
    let dir = data_dir();
    pending_thoughts(dir.path(), 1).await;
    // A command opens the ledger, replays its log, and closes it cleanly (a checkpoint,
    // then the log cleared).
    let listed = cli(dir.path(), &["sessions"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let log_path = dir.path().join("ledger.wal");
    let log = std::fs::read(&log_path).unwrap();
    std::fs::write(&log_path, &log[..100]).unwrap();
    let output = cli(dir.path(), &["sessions"]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.contains("the ledger's redo log, cannot be used"),
        "{message}"
    );
    assert!(message.contains("shorter than its header"), "{message}");
    assert!(!message.contains("redb database"), "{message}");
    assert!(!message.contains("start a new ledger"), "{message}");
    assert!(message.contains("closed cleanly"), "{message}");
    assert_eq!(
        std::fs::read(&log_path).unwrap(),
        &log[..100],
        "left as it is"
    );
}

/// Unmounts a bind mount when dropped (also when the test fails).
struct BindMount(PathBuf);

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).output();
    }
}

/// A ledger on a read-only file system (a read-only bind mount; as root, which CI is: a
/// mount needs it): every read-only command reads it, with its pending records, and the
/// mount is left as it was. Not run as another user: nobody may write there.
#[tokio::test]
async fn read_only_commands_read_a_ledger_on_a_read_only_mount() {
    if !is_root() {
        eprintln!("not root: a read-only mount needs root (CI runs this as root)");
        return;
    }
    let source = data_dir();
    let (sessions, texts) = pending_thoughts(source.path(), 2).await;
    let target = tempfile::tempdir().unwrap();
    let mount = |args: &[&str]| {
        let out = std::process::Command::new("mount")
            .args(args)
            .output()
            .expect("run mount");
        assert!(out.status.success(), "mount {args:?}: {}", stderr(&out));
    };
    let (from, to) = (
        source.path().to_str().unwrap(),
        target.path().to_str().unwrap(),
    );
    mount(&["--bind", from, to]);
    let _mounted = BindMount(target.path().to_path_buf());
    mount(&["-o", "remount,ro,bind", to]);
    assert!(std::fs::write(target.path().join("probe"), b"x").is_err());
    let before = snapshot(target.path());
    for args in [
        vec!["sessions"],
        vec!["show", sessions[0].as_str()],
        vec!["replay", sessions[1].as_str()],
        vec!["export", "--all", "--format", "jsonl"],
        vec!["search", "zanzibar"],
        vec!["verify"],
    ] {
        let out = cli(target.path(), &args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        if args[0] == "export" {
            for text in &texts {
                assert!(stdout(&out).contains(text.as_str()), "{}", stdout(&out));
            }
        }
        assert!(
            stderr(&out).contains("its file system is read-only"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(
        snapshot(target.path()),
        before,
        "nothing on the mount changed"
    );
}
