//! Errors of the store, one enum per operation: open, append, verify, and the storage
//! failures they share.
//!
//! Owns: the backend-neutral error types every backend reports through. Must not: name a
//! backend's own error type in a public variant (a backend wraps its error as a
//! [`BackendError`], keeping it as the `source` so logs and tests can still look inside).

use crate::event::{EventId, SessionId};
use std::path::PathBuf;
use std::sync::Arc;

/// A backend's own error (redb's, a database driver's), kept as the source of a
/// [`StoreError`] or [`OpenError`].
pub(crate) type BackendError = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// A storage failure: the file could not be read or written. Cloneable so one failed
/// group commit can be reported to every caller in the group.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the disk holding the ledger is full: nothing was recorded (free some space and retry; \
         reading and exporting still work)"
    )]
    DiskFull(BackendError),
    #[error("ledger storage error: {0}")]
    Backend(BackendError),
    /// Stored bytes that do not decode, or events that do not verify where they are
    /// stored (an altered hash, a broken chain, a gap): damage, named where it is.
    #[error("the ledger holds damaged data: {0}")]
    Corrupt(String),
    #[error("ledger holds events of session {session} but no head for it")]
    MissingHead { session: SessionId },
    #[error(
        "the ledger writer stopped before confirming this write; it may or may not be recorded (check with get_history)"
    )]
    WriterGone,
    #[error("a tool failed inside the write transaction: {0}")]
    JobPanicked(String),
    /// Damage found in the ledger (a page the storage engine cannot read, an event that
    /// does not decode or verify, a damaged redo log): the process takes no more writes
    /// to what it stops (see [`super::damage`]).
    #[error(
        "the ledger {ledger} is damaged: {detail}. Nothing more is written to it; intact \
         sessions can still be read. `reasoning-ledger verify` lists what is damaged, and \
         `reasoning-ledger recover --to NEW_DIR` copies every intact event into a new ledger"
    )]
    Damaged { ledger: String, detail: String },
    /// The ledger is opened for reading only: this process may not write it.
    #[error(
        "the ledger {ledger} is read-only here ({why}): nothing was recorded. Reading, \
         searching and exporting work; to record, run as a user who may write it"
    )]
    ReadOnly { ledger: String, why: String },
}

impl StoreError {
    /// Wraps a backend's error; an I/O error (anywhere in its source chain) that says the
    /// disk is full becomes [`StoreError::DiskFull`], whose message a model or user can act
    /// on.
    pub(crate) fn backend(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        let error: BackendError = Arc::new(error);
        if is_disk_full(&*error) {
            StoreError::DiskFull(error)
        } else {
            StoreError::Backend(error)
        }
    }

    /// Whether this says the ledger is damaged (an event that does not decode, bytes the
    /// storage engine cannot read): a reader that can go on without the one thing it
    /// asked for (a search hit, a title) skips it instead of failing.
    pub(crate) fn is_damage(&self) -> bool {
        matches!(self, StoreError::Corrupt(_) | StoreError::Damaged { .. })
    }

    /// `Ok(None)` for damage (see [`StoreError::is_damage`], logged), any other error as
    /// it is: for a read that may be left out.
    pub(crate) fn skip_damage<T>(self) -> Result<Option<T>, StoreError> {
        if self.is_damage() {
            tracing::warn!(error = %self, "left out: it cannot be read");
            Ok(None)
        } else {
            Err(self)
        }
    }

    /// The backend's error underneath, if any.
    pub(crate) fn source_error(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self {
            StoreError::DiskFull(error) | StoreError::Backend(error) => Some(&**error),
            _ => None,
        }
    }
}

/// Whether `error` (or any error it wraps) is the operating system's "no space left".
pub(crate) fn is_disk_full(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = next {
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && (io.kind() == std::io::ErrorKind::StorageFull
                || io.raw_os_error() == Some(ENOSPC)
                || io.get_ref().is_some_and(|inner| is_disk_full(inner)))
        {
            return true;
        }
        next = error.source();
    }
    false
}

/// `ENOSPC` on Linux and macOS ("No space left on device").
const ENOSPC: i32 = 28;

/// Why the ledger file could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("no ledger at {path}")]
    NoLedger { path: PathBuf },
    #[error("the data directory {path} is a file, not a directory")]
    DataDirIsAFile { path: PathBuf },
    #[error("cannot create the data directory {path}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is a directory, not a ledger file")]
    NotAFile { path: PathBuf },
    #[error(
        "cannot open the ledger {path} (left as it is; if it holds your events, \
         `reasoning-ledger recover --to NEW_DIR` salvages every one that verifies; move it \
         away only to start a new, empty ledger)"
    )]
    Database { path: PathBuf, source: BackendError },
    #[error(
        "{path} is a redb database but not a reasoning-ledger ledger: {detail} (left as it is; \
         move it away to start a new ledger)"
    )]
    NotALedger { path: PathBuf, detail: String },
    /// The ledger's redo log (`ledger.wal`) cannot be used: named as the log, saying what
    /// it may hold and what to do.
    #[error("{path}, the ledger's redo log, cannot be used: {problem} (left as it is; {advice})")]
    RedoLog {
        path: PathBuf,
        problem: String,
        advice: String,
    },
    /// A command that records was given a ledger this process may not write.
    #[error("the ledger {path} may not be written here: {why} ({cause}). {advice}")]
    NotWritable {
        path: PathBuf,
        why: String,
        /// The system's error.
        cause: String,
        /// What still works, and what to do.
        advice: String,
    },
    /// A ledger this process may not write cannot be read either: why.
    #[error("cannot read the ledger {path} here: {why}")]
    ReadOnly { path: PathBuf, why: String },
    #[error("cannot read {path}")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the ledger at {label}: {source}")]
    Store { label: String, source: BackendError },
    /// The storage engine stopped on damaged bytes while opening the file.
    #[error(
        "the ledger {path} is damaged: {detail}. It was left as it is; `reasoning-ledger \
         recover --to NEW_DIR` copies every intact event (of the file and of the redo log \
         beside it) into a new ledger"
    )]
    Damaged { path: PathBuf, detail: String },
    #[error("cannot create the ledger {path}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Why an append was refused. Nothing of the refused batch is written.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("session {session} moved: expected head seq {expected}, found {actual}")]
    Conflict {
        session: SessionId,
        expected: u64,
        actual: u64,
    },
    #[error("event id {id} was already used for a different event")]
    IdReused { id: EventId },
    #[error("a new session's first event must be session_started, found {found}")]
    FirstEventNotStart { found: String },
    #[error("an append needs at least one event")]
    EmptyBatch,
    #[error("session_started may only be the first event of a session")]
    StartInsideSession,
    #[error("alias {alias:?} already names session {existing}")]
    AliasTaken { alias: String, existing: SessionId },
    #[error(
        "imported event {seq} of session {session} does not chain: expected {expected}, found {found}"
    )]
    ImportMismatch {
        session: SessionId,
        seq: u64,
        expected: String,
        found: String,
    },
    #[error(
        "imported event {seq} of session {session} is dated {at} ms, before the event it follows ({previous} ms): within a session time never goes back"
    )]
    TimeGoesBack {
        session: SessionId,
        seq: u64,
        at: u64,
        previous: u64,
    },
    #[error(transparent)]
    Storage(#[from] StoreError),
}

/// The first problem `verify` found; names the session and event.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VerifyError {
    #[error("session {session}: no head record")]
    NoHead { session: SessionId },
    #[error("session {session}: its head row cannot be read ({detail})")]
    UnreadableHead { session: SessionId, detail: String },
    #[error("session {session}: event seq {seq} cannot be decoded ({detail})")]
    Undecodable {
        session: SessionId,
        seq: u64,
        detail: String,
    },
    #[error(
        "session {session}: events are missing: seq {expected} was due, the next stored is seq {found}"
    )]
    Gap {
        session: SessionId,
        expected: u64,
        found: u64,
    },
    #[error("session {session}: event seq {seq} is stored twice")]
    Duplicate { session: SessionId, seq: u64 },
    #[error("session {session}: event seq {seq} is stored out of order, after seq {after}")]
    OutOfOrder {
        session: SessionId,
        seq: u64,
        after: u64,
    },
    #[error("session {session}: the row stored as seq {seq} holds event seq {found} (renumbered)")]
    Renumbered {
        session: SessionId,
        seq: u64,
        found: u64,
    },
    #[error(
        "session {session}: events seq {from} to {to} are missing (the log ends before its head)"
    )]
    Missing {
        session: SessionId,
        from: u64,
        to: u64,
    },
    #[error("session {session}: event seq {seq} claims session {found}")]
    WrongSession {
        session: SessionId,
        seq: u64,
        found: SessionId,
    },
    #[error(
        "session {session}: event seq {seq} breaks the chain: prev should be {expected}, is {found}"
    )]
    BrokenChain {
        session: SessionId,
        seq: u64,
        expected: String,
        found: String,
    },
    #[error(
        "session {session}: event seq {seq} was altered: its content hashes to {expected}, recorded {found}"
    )]
    HashMismatch {
        session: SessionId,
        seq: u64,
        expected: String,
        found: String,
    },
    #[error("session {session}: first event is {found}, expected session_started")]
    FirstEventNotStart { session: SessionId, found: String },
    #[error("session {session}: its head says seq {expected} but the log ends at seq {found}")]
    HeadMismatch {
        session: SessionId,
        expected: u64,
        found: u64,
    },
    #[error(
        "session {session}: its head row names seq {seq} with a hash that is not the stored event's (the head row was altered)"
    )]
    HeadHashMismatch { session: SessionId, seq: u64 },
    #[error(
        "session {session}: events are stored after its head (the head says seq {head}, the log goes on to seq {last})"
    )]
    AfterHead {
        session: SessionId,
        head: u64,
        last: u64,
    },
    #[error(
        "session {session}: {count} events are stored from seq {first} on, but the session has no head row"
    )]
    NoHeadForEvents {
        session: SessionId,
        first: u64,
        count: u64,
    },
    #[error("session {session}: its head names seq {seq}, but no event is stored there")]
    NoEventAtHead { session: SessionId, seq: u64 },
    #[error("session {session}: seq {seq} is the largest there is; no event can follow it")]
    SeqOverflow { session: SessionId, seq: u64 },
    #[error("session {session}: the stored summary differs from a fold of the log")]
    SummaryMismatch { session: SessionId },
    #[error(
        "session {session}: the stored summary is version {found}, this build folds version \
         {current}: stale, not damaged (`verify --rebuild` rewrites it)"
    )]
    StaleSummary {
        session: SessionId,
        found: u32,
        current: u32,
    },
    #[error("the ledger holds {found} events but its sessions account for {expected}")]
    OrphanEvents { expected: u64, found: u64 },
    #[error(transparent)]
    Storage(#[from] StoreError),
}

impl VerifyError {
    /// Whether a rebuild ([`super::Ledger::rebuild_summaries`]) fixes this without touching
    /// an event: derived state that is out of date, as opposed to damage to the log.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn is_fixable(&self) -> bool {
        matches!(self, VerifyError::StaleSummary { .. })
    }

    /// Whether this finding stops writes (see [`super::damage`]): not derived state that
    /// a rebuild mends, which is itself a write (a stale or differing summary).
    pub(crate) fn stops_writes(&self) -> bool {
        !matches!(
            self,
            VerifyError::StaleSummary { .. } | VerifyError::SummaryMismatch { .. }
        )
    }

    /// The first seq this finding says cannot be trusted, where it names one.
    pub(crate) fn first_bad_seq(&self) -> Option<u64> {
        match self {
            VerifyError::Undecodable { seq, .. }
            | VerifyError::Renumbered { seq, .. }
            | VerifyError::WrongSession { seq, .. }
            | VerifyError::BrokenChain { seq, .. }
            | VerifyError::HashMismatch { seq, .. } => Some(*seq),
            VerifyError::Gap { expected, .. } => Some(*expected),
            VerifyError::Duplicate { seq, .. } | VerifyError::OutOfOrder { seq, .. } => Some(*seq),
            VerifyError::Missing { from, .. } => Some(*from),
            VerifyError::AfterHead { head, .. } => head.checked_add(1),
            VerifyError::FirstEventNotStart { .. } => Some(1),
            _ => None,
        }
    }

    /// The session this finding is about, if it is one session's.
    pub(crate) fn session(&self) -> Option<SessionId> {
        if let VerifyError::Storage(StoreError::Damaged { .. }) = self {
            return None;
        }
        match self {
            VerifyError::NoHead { session }
            | VerifyError::UnreadableHead { session, .. }
            | VerifyError::Undecodable { session, .. }
            | VerifyError::Gap { session, .. }
            | VerifyError::Duplicate { session, .. }
            | VerifyError::OutOfOrder { session, .. }
            | VerifyError::Renumbered { session, .. }
            | VerifyError::Missing { session, .. }
            | VerifyError::HeadHashMismatch { session, .. }
            | VerifyError::AfterHead { session, .. }
            | VerifyError::NoHeadForEvents { session, .. }
            | VerifyError::SeqOverflow { session, .. }
            | VerifyError::NoEventAtHead { session, .. }
            | VerifyError::WrongSession { session, .. }
            | VerifyError::BrokenChain { session, .. }
            | VerifyError::HashMismatch { session, .. }
            | VerifyError::FirstEventNotStart { session, .. }
            | VerifyError::HeadMismatch { session, .. }
            | VerifyError::SummaryMismatch { session }
            | VerifyError::StaleSummary { session, .. } => Some(*session),
            VerifyError::OrphanEvents { .. } | VerifyError::Storage(_) => None,
        }
    }
}
