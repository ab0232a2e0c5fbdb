//! Fault injection under the real ledger (test builds only): a disk holding the ledger's
//! two files (redb's and its redo log), and the tests that crash it at every sync point,
//! fail its I/O and fill it.
//!
//! Owns: [`Disk`] (per file: the bytes reads see and the durable image as of that file's
//! last `sync_data`; the log of every write / set_len / sync of either file since recording
//! began, in order; an injected failure counted over both files; a space budget for both;
//! and an in-memory byte-range lock table, which redb's single-process mode locks whole),
//! [`DiskFile`] (one open instance of one of its files: redb's `StorageBackend`, or the
//! redo log's [`LogFile`]), and the crash models. Must not: reach the store through anything but [`Ledger::open_backend`] and the
//! writer thread (the code path tools use), or hold a lock the tests cannot bound: a
//! blocking lock gives up after [`LOCK_WAIT_LIMIT`].

use super::open as backend;
use super::wal::{HEADER_BYTES, LogFile, LogSize};
use crate::event::{Event, NewEvent, Payload, SessionId, SessionKind};
use crate::projection::fixtures;
use crate::projection::tree::ThoughtTree;
use crate::store::{AppendError, Appended, Ledger, StoreError};
use redb::{BackendError, StorageBackend};
use std::collections::{HashMap, HashSet};
use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Longest a blocking lock waits before failing: a lock bug fails a test, never hangs it.
const LOCK_WAIT_LIMIT: Duration = Duration::from_secs(10);

/// Granularity at which the torn crash model keeps or drops unsynced writes.
const TORN_PAGE_BYTES: usize = 4096;

/// The redb file's index in [`Images`].
const REDB: usize = 0;

/// The redo log's index in [`Images`].
const LOG: usize = 1;

/// The bytes of each file of the disk: redb's, then the redo log's.
type Images = [Vec<u8>; 2];

/// The log most tests use: room for a few dozen small commits, grown a page at a time.
const TEST_LOG: LogSize = LogSize {
    capacity: HEADER_BYTES + 64 * 1024,
    growth: 4096,
};

/// A log that fills after a few commits: the crash sweep crosses checkpoints with it.
const SMALL_LOG: LogSize = LogSize {
    capacity: HEADER_BYTES + 2048,
    growth: 1024,
};

/// A write, truncate/extend or flush of one file that reached the disk, in order.
#[derive(Clone, Debug)]
enum Op {
    Write {
        file: usize,
        offset: u64,
        data: Vec<u8>,
    },
    SetLen {
        file: usize,
        len: u64,
    },
    Sync {
        file: usize,
    },
}

impl Op {
    fn file(&self) -> usize {
        match self {
            Op::Write { file, .. } | Op::SetLen { file, .. } | Op::Sync { file } => *file,
        }
    }
}

/// How an injected I/O failure behaves once it fires.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Failure {
    /// Only the chosen operation fails (a transient EIO).
    Once,
    /// The chosen operation and every read, write, set_len and sync after it fail.
    Forever,
}

#[derive(Clone, Copy, Debug)]
struct Lock {
    owner: u64,
    start: u64,
    /// Inclusive; `u64::MAX` for "all future growth".
    end: u64,
    exclusive: bool,
}

#[derive(Default)]
struct State {
    /// What reads see: each file as the OS page cache holds it.
    image: Images,
    /// What survives a crash that loses every unsynced write.
    durable: Images,
    /// Every successful write / set_len / sync, in order.
    ops: Vec<Op>,
    /// Reads, writes, set_lens and syncs attempted so far (the count failures are aimed at).
    io_ops: u64,
    fail_at: Option<(u64, Failure)>,
    /// The kind of operation the injected failure first hit.
    fired: Option<&'static str>,
    /// Bytes both files together may grow to; beyond it a write or set_len fails with
    /// ENOSPC.
    space: Option<u64>,
    locks: Vec<Lock>,
    next_owner: u64,
    /// Instances of the redo log an operation failed on: never to be written or synced
    /// again (a failed `fdatasync` is not retried on its file descriptor).
    failed_log_handles: HashSet<u64>,
    /// Writes and syncs made on such an instance after its failure: (instance, kind).
    used_after_failure: Vec<(u64, &'static str)>,
    /// Instances of the redo log opened so far.
    log_opens: usize,
    /// The next sync of the redo log fails (EIO), once.
    fail_next_log_sync: bool,
}

/// A simulated disk holding a ledger's two files. Clones share the disk.
#[derive(Clone, Default)]
struct Disk {
    shared: Arc<(Mutex<State>, Condvar)>,
}

impl Disk {
    fn with_image(image: Images) -> Disk {
        let disk = Disk::default();
        {
            let mut state = disk.state();
            state.durable = image.clone();
            state.image = image;
        }
        disk
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new open instance of the redb file (its own locks, as a separate process would
    /// have).
    fn file(&self) -> DiskFile {
        self.open(REDB)
    }

    fn open(&self, file: usize) -> DiskFile {
        let owner = {
            let mut state = self.state();
            state.next_owner += 1;
            if file == LOG {
                state.log_opens += 1;
            }
            state.next_owner
        };
        DiskFile {
            disk: self.clone(),
            owner,
            file,
        }
    }

    /// Opens the ledger on this disk the way the product opens a file.
    fn open_ledger(&self) -> Result<Ledger, crate::store::OpenError> {
        self.open_ledger_with(TEST_LOG)
    }

    /// [`Disk::open_ledger`] with a redo log of `size`.
    fn open_ledger_with(&self, size: LogSize) -> Result<Ledger, crate::store::OpenError> {
        let disk = self.clone();
        Ledger::open_backend(
            Path::new("simulated-disk/ledger.redb"),
            move || disk.file(),
            Box::new(self.open(LOG)),
            size,
            crate::tools::families(),
        )
    }

    fn ops(&self) -> Vec<Op> {
        self.state().ops.clone()
    }

    fn op_count(&self) -> usize {
        self.state().ops.len()
    }

    fn io_ops(&self) -> u64 {
        self.state().io_ops
    }

    fn durable(&self) -> Images {
        self.state().durable.clone()
    }

    fn image(&self) -> Images {
        self.state().image.clone()
    }

    /// Bytes both files hold.
    fn used(&self) -> u64 {
        self.state().image.iter().map(|i| i.len() as u64).sum()
    }

    fn fail_at(&self, io_op: u64, failure: Failure) {
        self.state().fail_at = Some((io_op, failure));
    }

    fn fired(&self) -> Option<&'static str> {
        self.state().fired
    }

    fn set_space(&self, bytes: Option<u64>) {
        self.state().space = bytes;
    }

    /// Writes and syncs of the redo log made on an instance after an operation on it failed.
    fn log_used_after_failure(&self) -> Vec<(u64, &'static str)> {
        self.state().used_after_failure.clone()
    }

    fn log_opens(&self) -> usize {
        self.state().log_opens
    }

    fn fail_next_log_sync(&self) {
        self.state().fail_next_log_sync = true;
    }
}

/// Counts an I/O operation and fails it if an injected failure says so.
fn count_io(state: &mut State, kind: &'static str) -> io::Result<()> {
    let index = state.io_ops;
    state.io_ops += 1;
    match state.fail_at {
        Some((at, Failure::Once)) if at == index => {}
        Some((at, Failure::Forever)) if index >= at => {}
        _ => return Ok(()),
    }
    state.fired.get_or_insert(kind);
    Err(io::Error::from_raw_os_error(5)) // EIO
}

fn enospc() -> io::Error {
    io::Error::from_raw_os_error(28)
}

/// Applies `op` to the image of its file.
fn apply(images: &mut Images, op: &Op) {
    apply_to(&mut images[op.file()], op);
}

/// Applies `op` to `image` (the image of the op's file).
fn apply_to(image: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write { offset, data, .. } => {
            let start = *offset as usize;
            let end = start + data.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[start..end].copy_from_slice(data);
        }
        Op::SetLen { len, .. } => image.resize(*len as usize, 0),
        Op::Sync { .. } => {}
    }
}

/// Whether `state` lets `file` grow to `end` bytes.
fn has_room(state: &State, file: usize, end: u64) -> bool {
    let len = state.image[file].len() as u64;
    if end <= len {
        return true;
    }
    let used: u64 = state.image.iter().map(|i| i.len() as u64).sum();
    state.space.is_none_or(|space| used - len + end <= space)
}

fn range(start: Bound<u64>, end: Bound<u64>) -> (u64, u64) {
    let start = match start {
        Bound::Unbounded => 0,
        Bound::Included(s) => s,
        Bound::Excluded(s) => s.saturating_add(1),
    };
    let end = match end {
        Bound::Unbounded => u64::MAX,
        Bound::Included(e) => e,
        Bound::Excluded(e) => e.saturating_sub(1),
    };
    (start, end)
}

/// One open instance of one of a [`Disk`]'s files.
struct DiskFile {
    disk: Disk,
    owner: u64,
    /// [`REDB`] or [`LOG`].
    file: usize,
}

impl std::fmt::Debug for DiskFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DiskFile#{}", self.owner)
    }
}

impl DiskFile {
    /// Counts an I/O operation of this instance (see [`count_io`]); for the redo log, a
    /// failure marks the instance failed, and a write or sync on a failed instance is
    /// noted.
    fn count(&self, state: &mut State, kind: &'static str) -> io::Result<()> {
        if self.file == LOG
            && matches!(kind, "write" | "sync_data")
            && state.failed_log_handles.contains(&self.owner)
        {
            state.used_after_failure.push((self.owner, kind));
        }
        let counted = count_io(state, kind);
        if counted.is_err() && self.file == LOG {
            state.failed_log_handles.insert(self.owner);
        }
        counted
    }

    fn conflicts(&self, state: &State, (start, end): (u64, u64), exclusive: bool) -> bool {
        state.locks.iter().any(|l| {
            l.owner != self.owner && l.start <= end && start <= l.end && (exclusive || l.exclusive)
        })
    }

    fn lock(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
        exclusive: bool,
        wait: bool,
    ) -> Result<bool, BackendError> {
        let span = range(start, end);
        let deadline = Instant::now() + LOCK_WAIT_LIMIT;
        let mut state = self.disk.state();
        while self.conflicts(&state, span, exclusive) {
            if !wait {
                return Ok(false);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(BackendError::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "simulated lock wait limit",
                )));
            }
            state = self
                .disk
                .shared
                .1
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        state.locks.push(Lock {
            owner: self.owner,
            start: span.0,
            end: span.1,
            exclusive,
        });
        Ok(true)
    }

    fn release_all(&self) {
        self.disk.state().locks.retain(|l| l.owner != self.owner);
        self.disk.shared.1.notify_all();
    }
}

impl Drop for DiskFile {
    fn drop(&mut self) {
        self.release_all();
    }
}

impl LogFile for DiskFile {
    fn len(&self) -> io::Result<u64> {
        StorageBackend::len(self)
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        StorageBackend::read(self, offset, out)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        StorageBackend::write(self, offset, data)
    }

    fn sync(&self) -> io::Result<()> {
        StorageBackend::sync_data(self)
    }

    fn reopen(&self) -> io::Result<Box<dyn LogFile>> {
        Ok(Box::new(self.disk.open(self.file)))
    }
}

impl StorageBackend for DiskFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.disk.state().image[self.file].len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let mut state = self.disk.state();
        self.count(&mut state, "read")?;
        let image = &state.image[self.file];
        let start = offset as usize;
        let end = start + out.len();
        if end > image.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the simulated file",
            ));
        }
        out.copy_from_slice(&image[start..end]);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.disk.state();
        self.count(&mut state, "set_len")?;
        if !has_room(&state, self.file, len) {
            return Err(enospc());
        }
        let op = Op::SetLen {
            file: self.file,
            len,
        };
        apply(&mut state.image, &op);
        state.ops.push(op);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut state = self.disk.state();
        self.count(&mut state, "sync_data")?;
        if self.file == LOG && std::mem::take(&mut state.fail_next_log_sync) {
            state.failed_log_handles.insert(self.owner);
            return Err(io::Error::from_raw_os_error(5)); // EIO
        }
        state.durable[self.file] = state.image[self.file].clone();
        state.ops.push(Op::Sync { file: self.file });
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut state = self.disk.state();
        self.count(&mut state, "write")?;
        let end = offset + data.len() as u64;
        if !has_room(&state, self.file, end) {
            return Err(enospc());
        }
        let op = Op::Write {
            file: self.file,
            offset,
            data: data.to_vec(),
        };
        apply(&mut state.image, &op);
        state.ops.push(op);
        Ok(())
    }

    fn close(&self) -> io::Result<()> {
        self.release_all();
        Ok(())
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.lock(start, end, true, false)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.lock(start, end, false, false)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.lock(start, end, true, true).map(|_| ())
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.lock(start, end, false, true).map(|_| ())
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        let (start, end) = range(start, end);
        let mut state = self.disk.state();
        let found = state
            .locks
            .iter()
            .position(|l| l.owner == self.owner && l.start == start && l.end == end);
        match found {
            Some(index) => {
                state.locks.swap_remove(index);
                drop(state);
                self.disk.shared.1.notify_all();
                Ok(())
            }
            None => Err(BackendError::Io(io::Error::other(
                "unlock of a range this instance does not hold",
            ))),
        }
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        let state = self.disk.state();
        Ok(self.conflicts(&state, range(start, end), true))
    }
}

/// What a crash keeps of the writes made since the last `sync_data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum CrashModel {
    /// None of them.
    Lost,
    /// All of them.
    Kept,
    /// A deterministic pseudo-random subset of their 4 KiB pages (set_len always kept).
    Torn,
}

/// splitmix64: a fixed, seedable choice of which torn pages survive.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// One file after a crash, starting from `durable` (its image at its last sync) with
/// `pending` its ops since it.
fn crashed_image(durable: &[u8], pending: &[&Op], model: CrashModel, seed: u64) -> Vec<u8> {
    let mut image = durable.to_vec();
    match model {
        CrashModel::Lost => {}
        CrashModel::Kept => pending.iter().for_each(|op| apply_to(&mut image, op)),
        CrashModel::Torn => {
            for (index, op) in pending.iter().enumerate() {
                let Op::Write { file, offset, data } = op else {
                    apply_to(&mut image, op);
                    continue;
                };
                let mut at = 0usize;
                while at < data.len() {
                    let page_end = ((*offset as usize + at) / TORN_PAGE_BYTES + 1)
                        * TORN_PAGE_BYTES
                        - *offset as usize;
                    let end = page_end.min(data.len());
                    let keep = mix(seed ^ ((index as u64) << 32) ^ at as u64) & 1 == 1;
                    if keep {
                        let piece = Op::Write {
                            file: *file,
                            offset: offset + at as u64,
                            data: data[at..end].to_vec(),
                        };
                        apply_to(&mut image, &piece);
                    }
                    at = end;
                }
            }
        }
    }
    image
}

/// One append of the workload, as the tools make it: inside the writer's transaction, read
/// the head, decide the batch (a start event first for a new session), append it.
struct Step {
    session: SessionId,
    start: NewEvent,
    thought: NewEvent,
}

impl Step {
    fn new(session: SessionId, number: u64, text: &str) -> Step {
        Step {
            session,
            start: NewEvent::new(Payload::SessionStarted {
                kind: SessionKind::THINKING,
                title: format!("session {session}"),
                aliases: Vec::new(),
            }),
            thought: NewEvent::new(fixtures::recorded(fixtures::seq_thought(text, number, 9))),
        }
    }

    fn run(&self, ledger: &Ledger) -> Result<Result<Appended, AppendError>, StoreError> {
        let (session, start, thought) = (self.session, self.start.clone(), self.thought.clone());
        ledger.write_blocking(move |txn| {
            let expected = txn.head(session)?.map_or(0, |h| h.seq);
            let batch = if expected == 0 {
                vec![start, thought]
            } else {
                vec![thought]
            };
            txn.append(session, expected, batch)
        })
    }
}

/// `sessions` sessions of `per_session` appends each, interleaved round-robin.
fn workload(sessions: usize, per_session: u64, text_bytes: usize) -> Vec<Step> {
    let ids: Vec<SessionId> = (0..sessions).map(|_| SessionId::generate()).collect();
    let mut steps = Vec::new();
    for number in 1..=per_session {
        for (index, session) in ids.iter().enumerate() {
            let text = format!("s{index} t{number} ")
                .repeat(text_bytes / 8 + 1)
                .chars()
                .take(text_bytes.max(8))
                .collect::<String>();
            steps.push(Step::new(*session, number, &text));
        }
    }
    steps
}

/// Every event of the ledger, by session, in seq order.
fn stored_events(ledger: &Ledger) -> Result<HashMap<SessionId, Vec<Event>>, StoreError> {
    let mut out: HashMap<SessionId, Vec<Event>> = HashMap::new();
    ledger.for_each_event_everywhere(|event| {
        out.entry(event.session).or_default().push(event);
        true
    })?;
    Ok(out)
}

/// The events the first `count` acknowledged appends produced, by session.
fn expected_after(acked: &[Appended], count: usize) -> HashMap<SessionId, Vec<Event>> {
    let mut out: HashMap<SessionId, Vec<Event>> = HashMap::new();
    for appended in &acked[..count] {
        out.entry(appended.head.session)
            .or_default()
            .extend(appended.events.iter().cloned());
    }
    out
}

/// A fresh ledger on a new disk: its image once created, ready to record from.
fn new_ledger_image() -> Images {
    new_ledger_image_with(TEST_LOG)
}

/// [`new_ledger_image`] with a redo log of `size`.
fn new_ledger_image_with(size: LogSize) -> Images {
    let disk = Disk::default();
    let ledger = disk
        .open_ledger_with(size)
        .expect("create a ledger on the simulated disk");
    drop(ledger);
    // The writer thread holds the database until it sees its queue closed.
    wait_until_closed(&disk);
    disk.image()
}

/// Reopens `image` as the product would after a crash and checks it: the open succeeds,
/// redb's integrity check passes, `verify_all` passes, the log equals the first `m`
/// appends of `acked` for some `m` (returned), and the ledger takes a new append.
fn reopen_and_check(image: &Images, acked: &[Appended], size: LogSize) -> Result<usize, String> {
    let disk = Disk::with_image(image.clone());
    let ledger = disk
        .open_ledger_with(size)
        .map_err(|e| format!("reopen: {e:#?}"))?;
    ledger.verify_all().map_err(|e| format!("verify: {e}"))?;
    let stored = stored_events(&ledger).map_err(|e| format!("read: {e}"))?;
    let matched = (0..=acked.len())
        .find(|&count| expected_after(acked, count) == stored)
        .ok_or_else(|| {
            let counts: Vec<usize> = stored.values().map(Vec::len).collect();
            format!("the log is not a prefix of the appends (events per session {counts:?})")
        })?;
    if let Some(first) = acked.first() {
        let session = first.head.session;
        let step = Step::new(session, 99, "after the crash");
        match step.run(&ledger) {
            Ok(Ok(_)) => {}
            other => return Err(format!("append after reopen: {other:?}")),
        }
    }
    drop(ledger);
    let check = Disk::with_image(image.clone());
    let mut db = backend::builder()
        .create_with_backend(check.file())
        .map_err(|e| format!("redb open for the integrity check: {e}"))?;
    match db.check_integrity() {
        Ok(true) => {}
        other => return Err(format!("redb integrity check: {other:?}")),
    }
    Ok(matched)
}

fn image_key(image: &Images) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    image.hash(&mut hasher);
    hasher.finish()
}

#[test]
fn every_crash_point_of_an_append_sequence_reopens_to_a_prefix_holding_every_acknowledged_append() {
    // A log with room for every commit (each commit's record synced, redb not), then one
    // that fills every few commits (checkpoints: redb synced, the log started again).
    let roomy = crash_sweep(TEST_LOG, false);
    let small = crash_sweep(SMALL_LOG, false);
    // A ledger without its log (an earlier build's, or a log deleted after a clean close):
    // the log is created and named in redb, and the first commit syncs redb.
    crash_sweep(TEST_LOG, true);
    assert_eq!(
        roomy.log_starts, 1,
        "a roomy log is written from its start once"
    );
    assert!(
        small.log_starts >= 2,
        "the small log started again {} times",
        small.log_starts - 1
    );
}

/// What a crash sweep went through.
struct Sweep {
    /// Records written at the log's start: the first, and one after each checkpoint.
    log_starts: usize,
}

/// Runs a workload on a ledger with a log of `size`, then reopens the ledger as a crash
/// right after each of its disk operations would leave it (three crash models), and
/// checks each reopens to a prefix of the appends holding every acknowledged one.
fn crash_sweep(size: LogSize, without_log: bool) -> Sweep {
    let started = Instant::now();
    let mut start = new_ledger_image_with(size);
    if without_log {
        start[LOG] = Vec::new();
    }
    let disk = Disk::with_image(start.clone());
    let ledger = disk.open_ledger_with(size).unwrap();
    // The ops of the open itself (it marks the file as open for writing) are crash points
    // too: recording began with the disk; so are the close's (its checkpoint).
    let mut acked: Vec<Appended> = Vec::new();
    let mut acked_after: Vec<usize> = Vec::new();
    for step in workload(3, 2, 40) {
        let appended = step.run(&ledger).expect("commit").expect("append");
        acked.push(appended);
        acked_after.push(disk.op_count());
    }
    drop(ledger);
    wait_until_closed(&disk);
    let ops = disk.ops();

    let mut outcomes: HashMap<u64, Result<usize, String>> = HashMap::new();
    let mut durable = start.clone();
    let mut current = start.clone();
    // Per file: ops[..last_sync[file]] of that file are durable.
    let mut last_sync = [0usize; 2];
    let mut points = 0usize;
    let mut checked_images = 0usize;
    let mut failures = Vec::new();
    for applied in 0..=ops.len() {
        if applied > 0 {
            let op = &ops[applied - 1];
            apply(&mut current, op);
            if let Op::Sync { file } = op {
                durable[*file] = current[*file].clone();
                last_sync[*file] = applied;
            }
        }
        let must_hold = acked_after.iter().filter(|&&at| at <= applied).count();
        for model in [CrashModel::Lost, CrashModel::Kept, CrashModel::Torn] {
            points += 1;
            let image: Images = std::array::from_fn(|file| {
                let pending: Vec<&Op> = ops[last_sync[file]..applied]
                    .iter()
                    .filter(|op| op.file() == file)
                    .collect();
                crashed_image(&durable[file], &pending, model, applied as u64)
            });
            let outcome = outcomes.entry(image_key(&image)).or_insert_with(|| {
                checked_images += 1;
                reopen_and_check(&image, &acked, size)
            });
            match outcome {
                Ok(matched) if *matched >= must_hold => {}
                Ok(matched) => failures.push(format!(
                    "crash after op {applied} ({model:?}): {matched} appends survived, \
                     {must_hold} were acknowledged"
                )),
                Err(error) => {
                    failures.push(format!("crash after op {applied} ({model:?}): {error}"))
                }
            }
        }
    }
    let syncs = |file: usize| {
        ops.iter()
            .filter(|op| matches!(op, Op::Sync { file: f } if *f == file))
            .count()
    };
    eprintln!(
        "crash sweep, log of {} bytes: {} ops ({} redb syncs, {} log syncs) over {} appends, \
         {points} crash points (3 models), {checked_images} distinct images reopened, files \
         {} + {} bytes, {:?}",
        size.capacity,
        ops.len(),
        syncs(REDB),
        syncs(LOG),
        acked.len(),
        current[REDB].len(),
        current[LOG].len(),
        started.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        syncs(REDB) + syncs(LOG) >= acked.len(),
        "every commit syncs: {} ops",
        ops.len()
    );
    Sweep {
        log_starts: ops.iter().filter(|op| is_record_at_log_start(op)).count(),
    }
}

/// Whether `op` writes a record at the log's start (not the zeros of a clear).
fn is_record_at_log_start(op: &Op) -> bool {
    // A record's length is not zero (a clear's end mark has none).
    matches!(op, Op::Write { file: LOG, offset: HEADER_BYTES, data } if data.len() >= 4 && data[..4] != [0; 4])
}

/// Waits until the ledger on `disk` let go of its files (the writer thread ended).
fn wait_until_closed(disk: &Disk) {
    let deadline = Instant::now() + LOCK_WAIT_LIMIT;
    while !disk.state().locks.is_empty() {
        assert!(Instant::now() < deadline, "the database was never closed");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What one append of a faulted run answered: its events, or the error's message.
type Outcome = Result<Appended, String>;

fn outcome(answer: Result<Result<Appended, AppendError>, StoreError>) -> Outcome {
    match answer {
        Ok(Ok(appended)) => Ok(appended),
        Ok(Err(error)) => Err(error.to_string()),
        Err(error) => Err(error.to_string()),
    }
}

/// Checks a ledger image left by a faulted run: it opens, verifies, holds every event of
/// every acknowledged append byte for byte, and any other event belongs, with its whole
/// batch, to an append that reported an error (an outcome the caller could not know).
fn check_after_fault(
    image: &Images,
    steps: &[Step],
    outcomes: &[Outcome],
    size: LogSize,
) -> Result<(), String> {
    let disk = Disk::with_image(image.clone());
    let ledger = disk
        .open_ledger_with(size)
        .map_err(|e| format!("reopen: {e:#?}"))?;
    ledger.verify_all().map_err(|e| format!("verify: {e}"))?;
    let stored = stored_events(&ledger).map_err(|e| format!("read: {e}"))?;
    let by_id: HashMap<_, &Event> = stored.values().flatten().map(|e| (e.id, e)).collect();
    let mut explained = HashSet::new();
    for (step, outcome) in steps.iter().zip(outcomes) {
        match outcome {
            Ok(appended) => {
                for event in &appended.events {
                    if by_id.get(&event.id) != Some(&event) {
                        return Err(format!("acknowledged event {} is missing", event.id));
                    }
                    explained.insert(event.id);
                }
            }
            Err(_) => {
                let start = by_id.contains_key(&step.start.id);
                let thought = by_id.contains_key(&step.thought.id);
                if start && !thought {
                    return Err(format!(
                        "half a batch of a failed append: {}",
                        step.start.id
                    ));
                }
                explained.insert(step.start.id);
                explained.insert(step.thought.id);
            }
        }
    }
    if let Some(stray) = by_id.keys().find(|id| !explained.contains(*id)) {
        return Err(format!("event {stray} belongs to no append"));
    }
    Ok(())
}

#[test]
fn an_io_error_at_any_operation_of_an_append_sequence_is_reported_and_leaves_no_partial_event() {
    // A roomy log (the commits write the log only) and a small one (checkpoints: redb's own
    // writes and syncs fail too, and a failed checkpoint reopens the database).
    io_error_sweep(TEST_LOG);
    io_error_sweep(SMALL_LOG);
}

/// Fails each I/O operation of an append sequence on a ledger with a log of `size`, once
/// and for good, and checks what the appends answered and what a crash then leaves.
fn io_error_sweep(size: LogSize) {
    let started = Instant::now();
    let start = new_ledger_image_with(size);
    let (sessions, per_session, text_bytes) = (2, 2, 40);
    let io_ops_of_the_sequence = {
        let disk = Disk::with_image(start.clone());
        let ledger = disk.open_ledger_with(size).unwrap();
        let before = disk.io_ops();
        for step in workload(sessions, per_session, text_bytes) {
            step.run(&ledger).unwrap().unwrap();
        }
        disk.io_ops() - before
    };
    let mut failures = Vec::new();
    let mut tolerated: HashMap<&str, usize> = HashMap::new();
    let mut runs = 0;
    for failure in [Failure::Once, Failure::Forever] {
        for n in 0..io_ops_of_the_sequence {
            runs += 1;
            let disk = Disk::with_image(start.clone());
            let ledger = disk.open_ledger_with(size).unwrap();
            let mut steps = workload(sessions, per_session, text_bytes);
            disk.fail_at(disk.io_ops() + n, failure);
            let mut outcomes: Vec<Outcome> =
                steps.iter().map(|s| outcome(s.run(&ledger))).collect();
            // One more append once the sequence is over: after a transient failure the
            // writer must be usable again; after a lasting one it must still refuse.
            let after = Step::new(steps[0].session, 50, "after the failure");
            let after_outcome = outcome(after.run(&ledger));
            let at = format!("{failure:?} failure at I/O op {n}");
            let first_error = outcomes.iter().position(Result::is_err);
            match (failure, first_error) {
                // A failed read at the start of a write transaction: the handle is opened
                // again and the transaction begun on it, so the append genuinely succeeds;
                // the checks below prove its events durable like any other.
                (_, None) => {
                    *tolerated
                        .entry(disk.fired().unwrap_or("nothing"))
                        .or_default() += 1
                }
                (Failure::Forever, Some(first)) => {
                    if let Some(late) = outcomes[first..].iter().position(Result::is_ok) {
                        failures.push(format!(
                            "{at}: append {} succeeded on a dead disk",
                            first + late
                        ));
                    }
                    match &after_outcome {
                        Ok(_) => {
                            failures.push(format!("{at}: a later append succeeded on a dead disk"))
                        }
                        Err(message) if !message.contains("I/O error") => {
                            failures.push(format!("{at}: unclear error {message:?}"))
                        }
                        Err(_) => {}
                    }
                }
                (Failure::Once, Some(_)) => {
                    if let Err(message) = &after_outcome {
                        failures.push(format!(
                            "{at}: no append works after a transient failure: {message}"
                        ));
                    }
                }
            }
            for outcome in outcomes.iter().filter_map(|o| o.as_ref().err()) {
                if !outcome.contains("storage error") && !outcome.contains("full") {
                    failures.push(format!("{at}: unclear error {outcome:?}"));
                }
            }
            let reused = disk.log_used_after_failure();
            if !reused.is_empty() {
                failures.push(format!(
                    "{at}: the redo log was written or synced on a handle after it failed: {reused:?}"
                ));
            }
            steps.push(after);
            outcomes.push(after_outcome);
            // A crash right now, losing or keeping what was not synced.
            for (model, image) in [("lost", disk.durable()), ("kept", disk.image())] {
                if let Err(error) = check_after_fault(&image, &steps, &outcomes, size) {
                    failures.push(format!("{at}, unsynced writes {model}: {error}"));
                }
            }
            drop(ledger);
        }
    }
    eprintln!(
        "I/O errors, log of {} bytes: {io_ops_of_the_sequence} I/O ops in the sequence, {runs} faulted runs \
         (once and forever); failures recovered from with every append succeeding (by op): \
         {tolerated:?}; {:?}",
        size.capacity,
        started.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_full_disk_fails_the_append_with_a_disk_full_error_and_reads_and_exports_still_work() {
    use crate::export::{Format, render};
    use crate::tools::ToolError;

    let disk = Disk::with_image(new_ledger_image());
    let ledger = disk.open_ledger().unwrap();
    let session = SessionId::generate();
    let small = Step::new(session, 1, "before the disk filled up");
    small.run(&ledger).unwrap().unwrap();
    disk.set_space(Some(disk.used()));
    let big_text = "a long thought that will not fit ".repeat(2000);
    let mut refused = None;
    for number in 2..40 {
        match Step::new(session, number, &big_text).run(&ledger) {
            Ok(Ok(_)) => continue,
            Ok(Err(error)) => panic!("the append was refused, not failed: {error}"),
            Err(error) => {
                refused = Some(error);
                break;
            }
        }
    }
    let error = refused.expect("the disk filled up");
    assert!(matches!(error, StoreError::DiskFull(_)), "{error:?}");
    let shown = ToolError::Store(error).into_result();
    let text = shown.content[0].as_text().expect("text").text.clone();
    assert!(
        text.contains("the disk holding the ledger is full: nothing was recorded"),
        "{text}"
    );

    // Reads and every export still work on the same Ledger.
    let head = ledger.head(session).unwrap().expect("the session is there");
    let events = ledger.events(session, 1, head.seq).unwrap();
    assert_eq!(events.len() as u64, head.seq);
    let tree = ThoughtTree::build(session, events.clone(), &crate::tools::folds());
    let exports = crate::export::family::Exports::of_families(ledger.families());
    for format in [
        Format::Mermaid,
        Format::Markdown,
        Format::Json,
        Format::Jsonl,
    ] {
        let text = render(format, &tree, &events, &exports);
        assert!(
            text.contains("before the disk filled up"),
            "{format:?}: {text}"
        );
    }
    ledger.verify_all().unwrap();

    // Room again: the next append goes through.
    disk.set_space(None);
    Step::new(session, 90, "after space was freed")
        .run(&ledger)
        .unwrap()
        .unwrap();
    ledger.verify_all().unwrap();
}

/// The number of event rows redb itself holds in `image` (without the redo log).
fn redb_event_count(image: &Images) -> u64 {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let disk = Disk::with_image(image.clone());
    let db = backend::builder()
        .create_with_backend(disk.file())
        .expect("redb opens the image");
    let txn = db.begin_read().unwrap();
    txn.open_table(super::tables::EVENTS)
        .unwrap()
        .len()
        .unwrap()
}

#[test]
fn appends_whose_redb_commit_never_reached_the_disk_are_replayed_and_replaying_again_changes_nothing()
 {
    let disk = Disk::with_image(new_ledger_image());
    let ledger = disk.open_ledger().unwrap();
    let acked: Vec<Appended> = workload(2, 2, 40)
        .iter()
        .map(|step| step.run(&ledger).unwrap().unwrap())
        .collect();
    // A crash now: what was synced survives; redb's commits were not synced.
    let crashed = disk.durable();
    drop(ledger);
    assert_eq!(redb_event_count(&crashed), 0, "redb alone has none of them");
    assert_eq!(
        reopen_and_check(&crashed, &acked, TEST_LOG),
        Ok(acked.len())
    );

    // The replay itself, crashed after each of its operations (and once more after it),
    // still reopens to every acknowledged append: replaying is idempotent.
    let replaying = Disk::with_image(crashed.clone());
    let recovered = replaying.open_ledger().unwrap();
    let ops = replaying.ops();
    assert!(
        ops.iter().any(|op| matches!(op, Op::Sync { file: REDB })),
        "the replay commits with a sync"
    );
    drop(recovered);
    wait_until_closed(&replaying);
    let mut current = crashed.clone();
    let mut durable = crashed.clone();
    for op in &ops {
        apply(&mut current, op);
        if let Op::Sync { file } = op {
            durable[*file] = current[*file].clone();
        }
        for image in [&durable, &current] {
            assert_eq!(
                reopen_and_check(image, &acked, TEST_LOG),
                Ok(acked.len()),
                "crash during the replay, after {op:?}"
            );
        }
    }
    let replayed = replaying.durable();
    assert_eq!(
        redb_event_count(&replayed),
        stored_events(&Disk::with_image(replayed.clone()).open_ledger().unwrap())
            .unwrap()
            .values()
            .map(|events| events.len() as u64)
            .sum::<u64>(),
        "after the replay redb holds every event itself"
    );
}

#[test]
fn an_idle_writer_checkpoints_so_redb_holds_the_commits_without_the_log() {
    let disk = Disk::with_image(new_ledger_image());
    let ledger = disk.open_ledger().unwrap();
    let appended = Step::new(SessionId::generate(), 1, "then nothing for a while")
        .run(&ledger)
        .unwrap()
        .unwrap();
    let want = appended.events.len() as u64;
    // The commit synced its record only (the checkpoint comes after `IDLE_AFTER`).
    assert_eq!(redb_event_count(&disk.durable()), 0);
    // Waits for the condition (redb's synced file holds the append), bounded.
    let deadline = Instant::now() + LOCK_WAIT_LIMIT;
    let mut image = disk.durable();
    while redb_event_count(&image) != want {
        assert!(
            Instant::now() < deadline,
            "the idle writer never checkpointed"
        );
        std::thread::sleep(Duration::from_millis(20));
        image = disk.durable();
    }
    // The log's records are all in redb now: a log wiped clean loses nothing.
    image[LOG] = Vec::new();
    assert_eq!(
        reopen_and_check(&image, std::slice::from_ref(&appended), TEST_LOG),
        Ok(1)
    );
    drop(ledger);
}

#[test]
fn a_full_log_checkpoints_and_starts_again_and_a_record_bigger_than_the_log_commits_with_a_sync() {
    let disk = Disk::with_image(new_ledger_image_with(SMALL_LOG));
    let ledger = disk.open_ledger_with(SMALL_LOG).unwrap();
    let session = SessionId::generate();
    let mut acked = Vec::new();
    for number in 1..=12 {
        let text = if number == 6 {
            "a thought bigger than the whole log ".repeat(200)
        } else {
            format!("thought {number}")
        };
        acked.push(
            Step::new(session, number, &text)
                .run(&ledger)
                .unwrap()
                .unwrap(),
        );
    }
    let ops = disk.ops();
    let starts = ops.iter().filter(|op| is_record_at_log_start(op)).count();
    assert!(
        starts >= 3,
        "the log started again only {} times",
        starts - 1
    );
    let biggest_record = ops
        .iter()
        .filter_map(|op| match op {
            Op::Write {
                file: LOG, data, ..
            } => Some(data.len() as u64),
            _ => None,
        })
        .max()
        .unwrap();
    assert!(biggest_record <= SMALL_LOG.capacity, "{biggest_record}");
    assert!(
        disk.image()[LOG].len() as u64 <= SMALL_LOG.capacity,
        "the log grew past its capacity"
    );
    // A crash now loses nothing acknowledged.
    assert_eq!(
        reopen_and_check(&disk.durable(), &acked, SMALL_LOG),
        Ok(acked.len())
    );
    drop(ledger);
}

#[test]
fn a_ledger_file_put_back_from_a_copy_never_gets_the_records_of_a_later_history() {
    let disk = Disk::with_image(new_ledger_image_with(SMALL_LOG));
    let session = SessionId::generate();
    let first = {
        let ledger = disk.open_ledger_with(SMALL_LOG).unwrap();
        let first = Step::new(session, 1, "in the copy")
            .run(&ledger)
            .unwrap()
            .unwrap();
        drop(ledger);
        wait_until_closed(&disk);
        first
    };
    let copy = disk.image()[REDB].clone();
    // A later history: a clean close clears the log; a crash leaves records in it, after
    // checkpoints (the small log fills).
    let later = Disk::with_image(disk.image());
    {
        let ledger = later.open_ledger_with(SMALL_LOG).unwrap();
        for number in 2..6 {
            Step::new(session, number, "later")
                .run(&ledger)
                .unwrap()
                .unwrap();
        }
        drop(ledger);
        wait_until_closed(&later);
    }
    let closed_log = later.image()[LOG].clone();
    let ledger = later.open_ledger_with(SMALL_LOG).unwrap();
    for number in 6..12 {
        Step::new(session, number, "later still")
            .run(&ledger)
            .unwrap()
            .unwrap();
    }
    let crashed_log = later.durable()[LOG].clone();
    drop(ledger);
    for (when, log) in [("closed", closed_log), ("crashed", crashed_log)] {
        let restored = [copy.clone(), log];
        assert_eq!(
            reopen_and_check(&restored, std::slice::from_ref(&first), SMALL_LOG),
            Ok(1),
            "the copy put back beside the log of a later history that {when}"
        );
    }
}

#[test]
fn a_failed_log_sync_fails_its_group_and_the_next_write_reopens_the_log_and_reads_it_back() {
    let disk = Disk::with_image(new_ledger_image());
    let ledger = disk.open_ledger().unwrap();
    let session = SessionId::generate();
    let first = Step::new(session, 1, "before the failed sync")
        .run(&ledger)
        .unwrap()
        .unwrap();
    let opens = disk.log_opens();
    disk.fail_next_log_sync();
    let failed = Step::new(session, 2, "its sync fails").run(&ledger);
    let error = failed.expect_err("a failed sync is never acknowledged");
    assert!(error.to_string().contains("I/O error"), "{error}");
    // The next group: the log is opened again (a new handle), what it acknowledged read
    // back, and the record written and synced on the new handle only.
    let after = Step::new(session, 2, "after the failed sync")
        .run(&ledger)
        .unwrap()
        .unwrap();
    assert_eq!(disk.log_opens(), opens + 1, "the log was opened again once");
    assert_eq!(disk.log_used_after_failure(), Vec::new());
    assert_eq!(after.head.seq, 3, "the failed append took no seq");
    // A crash now keeps both acknowledged appends.
    assert_eq!(
        reopen_and_check(&disk.durable(), &[first, after], TEST_LOG),
        Ok(2)
    );
    drop(ledger);
}

#[test]
fn a_damaged_log_record_with_acknowledged_ones_after_it_stops_writes_and_the_log_is_kept() {
    let disk = Disk::with_image(new_ledger_image());
    let ledger = disk.open_ledger().unwrap();
    let session = SessionId::generate();
    let acked: Vec<Appended> = (1..=6)
        .map(|n| {
            Step::new(session, n, &format!("thought {n}"))
                .run(&ledger)
                .unwrap()
                .unwrap()
        })
        .collect();
    // Killed before a checkpoint: redb holds none of it, the log all of it.
    let mut image = disk.durable();
    drop(ledger);
    assert_eq!(redb_event_count(&image), 0);
    // The third record's payload damaged.
    let mut at = HEADER_BYTES as usize;
    for _ in 0..2 {
        let len = u32::from_le_bytes(image[LOG][at..at + 4].try_into().unwrap()) as usize;
        at += 20 + len;
    }
    for byte in &mut image[LOG][at + 20..at + 36] {
        *byte ^= 0xa5;
    }
    let log_before = image[LOG].clone();
    let damaged = Disk::with_image(image);
    let ledger = damaged.open_ledger().unwrap();
    // Reads show the two appends before the damage.
    let stored = stored_events(&ledger).unwrap();
    assert_eq!(stored, expected_after(&acked, 2));
    // Every write is refused, naming the damage and how many records lie beyond it.
    let refused = Step::new(session, 7, "refused").run(&ledger).unwrap_err();
    let message = refused.to_string();
    assert!(matches!(refused, StoreError::Damaged { .. }), "{message}");
    assert!(message.contains("3 acknowledged record(s)"), "{message}");
    assert!(message.contains("recover --to"), "{message}");
    drop(ledger);
    wait_until_closed(&damaged);
    assert_eq!(damaged.image()[LOG], log_before, "the log is never written");
    // Opened again: still damaged, still nothing written to the log.
    let ledger = damaged.open_ledger().unwrap();
    assert!(Step::new(session, 7, "refused").run(&ledger).is_err());
    drop(ledger);
    wait_until_closed(&damaged);
    assert_eq!(damaged.image()[LOG], log_before);
}
