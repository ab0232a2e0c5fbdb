//! The event log on redb: the only module that touches the database file.
//!
//! Owns: opening the ledger file ([`Ledger::open`]), the tables, the append contract
//! ([`AppendTxn::append`]: expected seq, all-or-nothing, idempotent by event id, hash
//! chain), the group-commit writer thread ([`writer`]), reads for projections and the CLI,
//! and `verify`. Must not: decide what to record (tools do), fold anything beyond the
//! [`SessionSummary`] kept beside each head, write to stdout, or rewrite a committed event.
//!
//! Several processes share one file through redb's multi-writer mode (DESIGN §3): a write
//! transaction is exclusive across processes, so reading the head inside it and checking
//! the expected seq is what keeps two writers from both taking seq N.

pub(crate) mod backend;
mod codec;
mod error;
#[cfg(test)]
mod fault;
mod tables;
pub mod writer;

pub use error::{AppendError, OpenError, StoreError, VerifyError};
pub use writer::{AppendTxn, Appended};

use crate::event::{Event, SessionId};
use crate::projection::summary::SessionSummary;
use redb::{ReadableTable, ReadableTableMetadata, StorageBackend};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tables::{ALIASES, EVENTS, HEADS, session_key};

/// File name of the ledger inside the data directory.
pub const LEDGER_FILE_NAME: &str = "ledger.redb";

/// Bytes of page cache redb may hold. Small on purpose: the log is append-mostly and reads
/// go through the OS page cache; redb's default (1 GiB) would dominate the server's RSS.
pub const CACHE_SIZE_BYTES: usize = 1024 * 1024;

/// The head of a session: its last seq and hash, and the summary folded up to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionHead {
    pub session: SessionId,
    pub seq: u64,
    pub hash: String,
    pub summary: SessionSummary,
}

/// What `verify` found for one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VerifiedSession {
    pub session: SessionId,
    pub events: u64,
}

/// A handle on the ledger file, shared by every tool of a process.
#[derive(Clone)]
pub struct Ledger {
    db: Arc<backend::Handle>,
    writer: writer::WriterHandle,
    path: Arc<PathBuf>,
    /// Dropped last, with the last clone: waits for the database to close.
    _closed_on_drop: Arc<CloseOnDrop>,
}

/// Longest the last [`Ledger`] handle waits, when dropped, for the writer thread to let go
/// of the database so redb closes it cleanly.
pub const CLOSE_WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Makes dropping the last [`Ledger`] close the database before the process may exit.
///
/// Regression (`a_truncated_ledger_is_refused_untouched`): the writer thread holds the
/// database and ends only after the last handle is dropped; a CLI command that returned
/// from `main` at once killed it first, so redb never closed the file and every run left
/// it marked "not shut down cleanly". The next open then had to recover it (a full repair
/// of a big ledger), and a damaged file could no longer be told from a crashed one.
struct CloseOnDrop {
    db: std::sync::Weak<backend::Handle>,
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        let deadline = std::time::Instant::now() + CLOSE_WAIT_LIMIT;
        while self.db.strong_count() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

impl Ledger {
    /// Opens (or creates) `ledger.redb` inside `data_dir`, in multi-writer mode.
    ///
    /// A file that exists is only ever opened, never initialised: an empty, truncated or
    /// foreign file is an error naming its path.
    pub fn open(data_dir: &Path) -> Result<Ledger, OpenError> {
        std::fs::create_dir_all(data_dir).map_err(|source| OpenError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let path = data_dir.join(LEDGER_FILE_NAME);
        Self::open_file(&path)
    }

    /// Opens the ledger at an exact file path (see [`backend::open_file`]: a new ledger
    /// appears there complete or not at all; an existing file is checked read-only first).
    pub fn open_file(path: &Path) -> Result<Ledger, OpenError> {
        Ok(Self::with_handle(backend::open_file(path)?, path))
    }

    /// Opens the ledger over any redb storage backend, with the same settings and rules as
    /// a file (empty storage becomes a new ledger). `make` builds a fresh backend over the
    /// same storage for every open; `label` names it in errors. The fault-injection tests
    /// run the real writer and reads through this.
    pub fn open_backend<B: StorageBackend>(
        label: &Path,
        make: impl Fn() -> B + Send + Sync + 'static,
    ) -> Result<Ledger, OpenError> {
        Ok(Self::with_handle(
            backend::open_backend(label, make)?,
            label,
        ))
    }

    fn with_handle(handle: backend::Handle, path: &Path) -> Ledger {
        let db = Arc::new(handle);
        let writer = writer::WriterHandle::spawn(db.clone());
        let close = Arc::new(CloseOnDrop {
            db: Arc::downgrade(&db),
        });
        Ledger {
            db,
            writer,
            path: Arc::new(path.to_path_buf()),
            _closed_on_drop: close,
        }
    }

    /// Path of the ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `job` inside the next group-commit write transaction and returns its result
    /// once that transaction is durably committed. See [`writer`].
    pub async fn write<R, F>(&self, job: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        self.writer.submit(job).await
    }

    /// Queues `job` for the next group commit now and returns what waits for its result:
    /// jobs queued one after another run in that order (a connection's arrival order).
    pub fn queue_write<R, F>(
        &self,
        job: F,
    ) -> Result<impl std::future::Future<Output = Result<R, StoreError>> + use<R, F>, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        let answer = self.writer.enqueue(job)?;
        Ok(async move { answer.await.map_err(|_| StoreError::WriterGone)? })
    }

    /// Blocking form of [`Ledger::write`] for threads outside the async runtime.
    pub fn write_blocking<R, F>(&self, job: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        self.writer.submit_blocking(job)
    }

    fn read_txn(&self) -> Result<redb::ReadTransaction, StoreError> {
        self.db.begin_read()
    }

    /// The head of one session, if it exists.
    pub fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        let txn = self.read_txn()?;
        let heads = txn.open_table(HEADS).map_err(StoreError::from_redb)?;
        tables::read_head(&heads, session)
    }

    /// Every session head, in no particular order.
    pub fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        let txn = self.read_txn()?;
        let heads = txn.open_table(HEADS).map_err(StoreError::from_redb)?;
        let mut out = Vec::new();
        for row in heads.iter().map_err(StoreError::from_redb)? {
            let (_, value) = row.map_err(StoreError::from_redb)?;
            out.push(tables::decode_head(value.value())?);
        }
        Ok(out)
    }

    /// Finds a session by its id or by an alias recorded when it started.
    pub fn resolve(&self, text: &str) -> Result<Option<SessionId>, StoreError> {
        let txn = self.read_txn()?;
        let heads = txn.open_table(HEADS).map_err(StoreError::from_redb)?;
        let aliases = txn.open_table(ALIASES).map_err(StoreError::from_redb)?;
        tables::resolve(&heads, &aliases, text)
    }

    /// Events of `session` with seq in `from_seq..=to_seq`, in order.
    pub fn events(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
    ) -> Result<Vec<Event>, StoreError> {
        let mut out = Vec::new();
        self.for_each_event(session, from_seq, to_seq, |event| {
            out.push(event);
            true
        })?;
        Ok(out)
    }

    /// Calls `visit` with each event of `session` in `from_seq..=to_seq`, in order, until
    /// it returns false. Streams: memory stays flat however long the session is.
    pub fn for_each_event(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        visit: impl FnMut(Event) -> bool,
    ) -> Result<(), StoreError> {
        self.scan_session(session, from_seq, to_seq, tables::decode_event, visit)
    }

    /// [`Ledger::for_each_event`] for projections: leaves out what a fold never reads, so
    /// a rebuild does not pay for it. Each event's `prev` and `hash` are empty and its
    /// call's arguments are `null`; never export, verify or compare these events.
    pub fn for_each_event_to_fold(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        visit: impl FnMut(Event) -> bool,
    ) -> Result<(), StoreError> {
        self.scan_session(
            session,
            from_seq,
            to_seq,
            codec::decode_event_to_fold,
            visit,
        )
    }

    /// Streams the rows of `session` in `from_seq..=to_seq`, decoded by `decode`.
    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: fn(&[u8]) -> Result<Event, StoreError>,
        mut visit: impl FnMut(Event) -> bool,
    ) -> Result<(), StoreError> {
        if from_seq > to_seq {
            return Ok(());
        }
        let txn = self.read_txn()?;
        let events = txn.open_table(EVENTS).map_err(StoreError::from_redb)?;
        let key = session_key(session);
        for row in events
            .range((key, from_seq)..=(key, to_seq))
            .map_err(StoreError::from_redb)?
        {
            let (_, value) = row.map_err(StoreError::from_redb)?;
            if !visit(decode(value.value())?) {
                break;
            }
        }
        Ok(())
    }

    /// Calls `visit` with every event of every session (sessions in id order, events in
    /// seq order) until it returns false.
    pub fn for_each_event_everywhere(
        &self,
        mut visit: impl FnMut(Event) -> bool,
    ) -> Result<(), StoreError> {
        let txn = self.read_txn()?;
        let events = txn.open_table(EVENTS).map_err(StoreError::from_redb)?;
        for row in events.iter().map_err(StoreError::from_redb)? {
            let (_, value) = row.map_err(StoreError::from_redb)?;
            if !visit(tables::decode_event(value.value())?) {
                break;
            }
        }
        Ok(())
    }

    /// Checks one session: seqs gapless from 1, every `prev` equal to the previous `hash`,
    /// every hash recomputed from the content, the head equal to the last event and its
    /// summary equal to a fold of the log. Stops at the first bad event.
    pub fn verify_session(&self, session: SessionId) -> Result<VerifiedSession, VerifyError> {
        let txn = self.read_txn()?;
        let heads = txn.open_table(HEADS).map_err(StoreError::from_redb)?;
        let events = txn.open_table(EVENTS).map_err(StoreError::from_redb)?;
        let head = tables::read_head(&heads, session)?.ok_or(VerifyError::NoHead { session })?;
        let key = session_key(session);
        let mut expected_seq = 1;
        let mut prev = crate::event::GENESIS_HASH.to_string();
        let mut summary: Option<SessionSummary> = None;
        for row in events
            .range((key, 0)..=(key, u64::MAX))
            .map_err(StoreError::from_redb)?
        {
            let (stored_key, value) = row.map_err(StoreError::from_redb)?;
            let (_, stored_seq) = stored_key.value();
            let event =
                tables::decode_event(value.value()).map_err(|_| VerifyError::Undecodable {
                    session,
                    seq: stored_seq,
                })?;
            if stored_seq != expected_seq || event.seq != expected_seq {
                return Err(VerifyError::Gap {
                    session,
                    expected: expected_seq,
                    found: stored_seq,
                });
            }
            if event.session != session {
                return Err(VerifyError::WrongSession {
                    session,
                    seq: stored_seq,
                    found: event.session,
                });
            }
            if event.prev != prev {
                return Err(VerifyError::BrokenChain {
                    session,
                    seq: stored_seq,
                    expected: prev,
                    found: event.prev,
                });
            }
            let computed = event.computed_hash();
            if computed != event.hash {
                return Err(VerifyError::HashMismatch {
                    session,
                    seq: stored_seq,
                    expected: computed,
                    found: event.hash,
                });
            }
            match summary.as_mut() {
                None => {
                    summary = Some(SessionSummary::start(&event).ok_or(
                        VerifyError::FirstEventNotStart {
                            session,
                            found: event.payload.type_name().to_string(),
                        },
                    )?)
                }
                Some(summary) => summary.apply(&event),
            }
            prev = event.hash;
            expected_seq += 1;
        }
        let last = expected_seq - 1;
        if head.seq != last || head.hash != prev {
            return Err(VerifyError::HeadMismatch {
                session,
                expected: head.seq,
                found: last,
            });
        }
        if summary.as_ref() != Some(&head.summary) {
            return Err(VerifyError::SummaryMismatch { session });
        }
        Ok(VerifiedSession {
            session,
            events: last,
        })
    }

    /// Verifies every session (see [`Ledger::verify_session`]), stopping at the first bad
    /// one. Also reports events stored under a session that has no head.
    pub fn verify_all(&self) -> Result<Vec<VerifiedSession>, VerifyError> {
        let mut heads: Vec<SessionId> = self.heads()?.into_iter().map(|h| h.session).collect();
        heads.sort();
        let mut out = Vec::new();
        for session in &heads {
            out.push(self.verify_session(*session)?);
        }
        let txn = self.read_txn()?;
        let events = txn.open_table(EVENTS).map_err(StoreError::from_redb)?;
        let total = events.len().map_err(StoreError::from_redb)?;
        let counted: u64 = out.iter().map(|v| v.events).sum();
        if total != counted {
            return Err(VerifyError::OrphanEvents {
                expected: counted,
                found: total,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    //! The append contract, against a real ledger file.

    use super::*;
    use crate::event::{NewEvent, Payload, SessionKind};

    fn start(aliases: &[&str]) -> NewEvent {
        NewEvent::new(Payload::SessionStarted {
            kind: SessionKind::THINKING,
            title: "t".into(),
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
        })
    }

    fn closed(reason: &str) -> NewEvent {
        NewEvent::new(Payload::SessionClosed {
            reason: reason.into(),
        })
    }

    fn append(
        ledger: &Ledger,
        session: SessionId,
        expected: u64,
        events: Vec<NewEvent>,
    ) -> Result<Appended, AppendError> {
        ledger
            .write_blocking(move |txn| txn.append(session, expected, events))
            .expect("commit")
    }

    #[test]
    fn append_checks_the_expected_seq_and_writes_nothing_on_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path()).unwrap();
        let session = SessionId::generate();
        let first = append(&ledger, session, 0, vec![start(&[]), closed("a")]).unwrap();
        assert_eq!(first.head.seq, 2);
        match append(&ledger, session, 1, vec![closed("b")]) {
            Err(AppendError::Conflict {
                expected: 1,
                actual: 2,
                ..
            }) => {}
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(ledger.head(session).unwrap().unwrap().seq, 2);
        assert_eq!(ledger.verify_all().unwrap().len(), 1);
    }

    #[test]
    fn append_is_idempotent_by_event_id_and_refuses_a_reused_id() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path()).unwrap();
        let session = SessionId::generate();
        let batch = vec![start(&[]), closed("a")];
        let first = append(&ledger, session, 0, batch.clone()).unwrap();
        // The same batch again (a retried call) is acknowledged with the stored events.
        let again = append(&ledger, session, 0, batch.clone()).unwrap();
        assert_eq!(again.events, first.events);
        assert_eq!(ledger.head(session).unwrap().unwrap().seq, 2);
        let mut reused = closed("different");
        reused.id = batch[1].id;
        assert!(matches!(
            append(&ledger, session, 2, vec![reused]),
            Err(AppendError::IdReused { .. })
        ));
    }

    #[test]
    fn a_session_starts_with_session_started_once_and_aliases_are_unique() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path()).unwrap();
        let session = SessionId::generate();
        assert!(matches!(
            append(&ledger, session, 0, vec![closed("x")]),
            Err(AppendError::FirstEventNotStart { .. })
        ));
        append(&ledger, session, 0, vec![start(&["dp-1"])]).unwrap();
        assert!(matches!(
            append(&ledger, session, 1, vec![start(&[])]),
            Err(AppendError::StartInsideSession)
        ));
        assert_eq!(ledger.resolve("dp-1").unwrap(), Some(session));
        let other = SessionId::generate();
        assert!(matches!(
            append(&ledger, other, 0, vec![start(&["dp-1"])]),
            Err(AppendError::AliasTaken { .. })
        ));
        assert!(
            ledger.head(other).unwrap().is_none(),
            "nothing of a refused batch"
        );
    }

    #[test]
    fn a_panicking_job_answers_an_error_and_the_writer_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path()).unwrap();
        let outcome = ledger.write_blocking(|_txn| -> u8 { panic!("boom") });
        assert!(matches!(outcome, Err(StoreError::JobPanicked(m)) if m == "boom"));
        let session = SessionId::generate();
        append(&ledger, session, 0, vec![start(&[])]).unwrap();
        assert_eq!(ledger.verify_all().unwrap().len(), 1);
    }
}
