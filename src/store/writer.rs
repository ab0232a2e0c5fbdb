//! The writer thread: group commit for every append of the process.
//!
//! Tools submit jobs (closures over an [`AppendTxn`]); the thread takes the job waiting
//! longest plus every job queued behind it (up to [`MAX_JOBS_PER_COMMIT`]), runs them in
//! order inside one redb write transaction, commits once with immediate durability, and
//! only then hands each job's result back. Concurrent callers thus share one fsync. If the
//! commit fails, every job in the group gets the error: nothing is acknowledged that is
//! not durable. A job runs on this thread, never on an async worker.
//!
//! Must not: hand out a result before the commit returned, or keep a half-applied job in
//! a transaction that commits.

use super::backend::Handle;
use super::tables::{self, ALIASES, EVENT_IDS, EVENTS, HEADS, session_key};
use super::{AppendError, SessionHead, StoreError};
use crate::event::{Event, GENESIS_HASH, NewEvent, Payload, SessionId, event_hash, now_ms};
use crate::projection::summary::SessionSummary;
use redb::{ReadableTable, WriteTransaction};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc;

/// Most jobs one transaction takes; bounds the latency a long queue adds to its first job.
pub const MAX_JOBS_PER_COMMIT: usize = 128;

type Completion = Box<dyn FnOnce(Result<(), StoreError>) + Send>;
/// A job runs with the group's transaction, or with `None` when none could be begun (its
/// completion then carries that error).
type Job = Box<dyn FnOnce(Option<&mut AppendTxn<'_>>) -> Completion + Send>;

/// Sends jobs to the writer thread. The thread ends when the last handle is dropped.
#[derive(Clone)]
pub struct WriterHandle {
    jobs: mpsc::Sender<Job>,
}

impl WriterHandle {
    pub(crate) fn spawn(db: Arc<Handle>) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || run(db, queue))
            .expect("spawning the ledger writer thread");
        WriterHandle { jobs }
    }

    pub(crate) fn enqueue<R, F>(
        &self,
        job: F,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<R, StoreError>>, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |txn: Option<&mut AppendTxn<'_>>| {
            let Some(txn) = txn else {
                return Box::new(move |committed: Result<(), StoreError>| {
                    let _ = reply.send(committed.and(Err(StoreError::WriterGone)));
                }) as Completion;
            };
            let appended_before = txn.appended;
            let outcome = catch_unwind(AssertUnwindSafe(|| job(txn)));
            let outcome = match outcome {
                Ok(value) => Ok(value),
                Err(panic) => {
                    let message = panic_message(&panic);
                    tracing::error!(%message, "a job panicked inside the write transaction");
                    if txn.appended != appended_before {
                        // It may have left part of its events: the whole group must abort.
                        txn.poisoned = Some(StoreError::JobPanicked(message.clone()));
                    }
                    Err(StoreError::JobPanicked(message))
                }
            };
            Box::new(move |committed: Result<(), StoreError>| {
                let _ = reply.send(committed.and(outcome));
            })
        });
        self.jobs.send(job).map_err(|_| StoreError::WriterGone)?;
        Ok(answer)
    }

    pub async fn submit<R, F>(&self, job: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        self.enqueue(job)?
            .await
            .map_err(|_| StoreError::WriterGone)?
    }

    pub fn submit_blocking<R, F>(&self, job: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        self.enqueue(job)?
            .blocking_recv()
            .map_err(|_| StoreError::WriterGone)?
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic".to_string()
    }
}

fn run(db: Arc<Handle>, queue: mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut group = vec![first];
        while group.len() < MAX_JOBS_PER_COMMIT {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        // A panic outside any job (in redb, or after the commit) must not stop every later
        // write: the group's callers get `WriterGone` (their replies are dropped), the
        // uncommitted transaction is aborted by its drop, and the thread goes on.
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| commit_group(&db, group))) {
            tracing::error!(message = %panic_message(&panic), "the writer panicked outside a job");
        }
    }
}

fn commit_group(db: &Handle, group: Vec<Job>) {
    let txn = match db.begin_write() {
        Ok(txn) => txn,
        Err(error) => {
            tracing::error!(%error, "cannot begin a write transaction");
            for job in group {
                job(None)(Err(error.clone()));
            }
            return;
        }
    };
    let mut append = AppendTxn {
        txn: &txn,
        appended: 0,
        poisoned: None,
    };
    let mut completions = Vec::with_capacity(group.len());
    for job in group {
        completions.push(job(Some(&mut append)));
    }
    let result = match append.poisoned.take() {
        Some(error) => {
            let _ = txn.abort();
            Err(error)
        }
        None if append.appended == 0 => txn.abort().map_err(StoreError::from_redb),
        None => txn.commit().map_err(StoreError::from_redb),
    };
    crate::fault::hit(crate::fault::FaultPoint::AfterCommit);
    if let Err(error) = &result {
        tracing::error!(%error, "group commit failed; every call in the group gets the error");
    }
    for completion in completions {
        completion(result.clone());
    }
}

/// What an append wrote (or found already written): the events and the session's new head.
#[derive(Clone, Debug)]
pub struct Appended {
    pub events: Vec<Event>,
    pub head: SessionHead,
}

/// The write transaction as a job sees it: read heads, append events.
pub struct AppendTxn<'a> {
    txn: &'a WriteTransaction,
    /// Events appended in this transaction so far (by every job of the group).
    appended: usize,
    /// Set when a storage error or a panic may have left part of a job's writes behind.
    poisoned: Option<StoreError>,
}

impl AppendTxn<'_> {
    /// The session's head as of this transaction (including earlier jobs of the group).
    pub fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        let heads = self.txn.open_table(HEADS).map_err(StoreError::from_redb)?;
        tables::read_head(&heads, session)
    }

    /// Finds a session by id or alias, as [`super::Ledger::resolve`] does.
    pub fn resolve(&self, text: &str) -> Result<Option<SessionId>, StoreError> {
        let heads = self.txn.open_table(HEADS).map_err(StoreError::from_redb)?;
        let aliases = self
            .txn
            .open_table(ALIASES)
            .map_err(StoreError::from_redb)?;
        tables::resolve(&heads, &aliases, text)
    }

    /// Appends `events` to `session` after seq `expected_seq` (0 for a new session).
    ///
    /// All or nothing; refused with [`AppendError::Conflict`] if the head is elsewhere.
    /// Idempotent by event id: a batch whose ids are all stored with the same payloads is
    /// acknowledged again with the stored events; an id stored with another payload is
    /// refused.
    pub fn append(
        &mut self,
        session: SessionId,
        expected_seq: u64,
        events: Vec<NewEvent>,
    ) -> Result<Appended, AppendError> {
        if let Some(stored) = self.already_stored(&events)? {
            return self.acknowledged_again(session, stored);
        }
        let head = self.head(session)?;
        let actual = head.as_ref().map_or(0, |h| h.seq);
        if actual != expected_seq {
            return Err(AppendError::Conflict {
                session,
                expected: expected_seq,
                actual,
            });
        }
        let at = now_ms();
        let mut prev = head
            .as_ref()
            .map_or_else(|| GENESIS_HASH.to_string(), |h| h.hash.clone());
        let mut built = Vec::with_capacity(events.len());
        for (offset, new) in events.into_iter().enumerate() {
            let seq = actual + 1 + offset as u64;
            let schema = new.payload.schema();
            let hash = event_hash(&prev, &new.id, &session, seq, at, schema, &new.payload);
            let event = Event {
                id: new.id,
                session,
                seq,
                at,
                schema,
                payload: new.payload,
                prev: std::mem::replace(&mut prev, hash.clone()),
                hash,
            };
            built.push(event);
        }
        self.insert_checked(head, built)
    }

    /// Appends events exactly as exported (ids, times and hashes kept), after checking
    /// that each one continues the stored chain. Idempotent like [`AppendTxn::append`].
    pub fn import(&mut self, events: Vec<Event>) -> Result<Option<Appended>, AppendError> {
        let Some(first) = events.first() else {
            return Ok(None);
        };
        let session = first.session;
        let as_new: Vec<NewEvent> = events
            .iter()
            .map(|e| NewEvent {
                id: e.id,
                payload: e.payload.clone(),
            })
            .collect();
        if let Some(stored) = self.already_stored(&as_new)? {
            return self.acknowledged_again(session, stored).map(Some);
        }
        let head = self.head(session)?;
        let mut seq = head.as_ref().map_or(0, |h| h.seq);
        let mut prev = head
            .as_ref()
            .map_or_else(|| GENESIS_HASH.to_string(), |h| h.hash.clone());
        for event in &events {
            seq += 1;
            let mismatch = |expected: String, found: String| AppendError::ImportMismatch {
                session,
                seq: event.seq,
                expected,
                found,
            };
            if event.session != session {
                return Err(mismatch(session.to_string(), event.session.to_string()));
            }
            if event.seq != seq {
                return Err(AppendError::Conflict {
                    session,
                    expected: event.seq.saturating_sub(1),
                    actual: seq - 1,
                });
            }
            if event.prev != prev {
                return Err(mismatch(prev, event.prev.clone()));
            }
            let computed = event.computed_hash();
            if computed != event.hash {
                return Err(mismatch(computed, event.hash.clone()));
            }
            prev = event.hash.clone();
        }
        self.insert_checked(head, events).map(Some)
    }

    /// The answer to a batch that was already stored: its events and the current head.
    fn acknowledged_again(
        &self,
        session: SessionId,
        events: Vec<Event>,
    ) -> Result<Appended, AppendError> {
        let head = self.head(session)?.ok_or_else(|| {
            StoreError::Corrupt(format!("session {session} has events but no head"))
        })?;
        Ok(Appended { events, head })
    }

    /// `Some(stored events)` when every id is already stored with the same payload.
    fn already_stored(&self, events: &[NewEvent]) -> Result<Option<Vec<Event>>, AppendError> {
        let ids = self
            .txn
            .open_table(EVENT_IDS)
            .map_err(StoreError::from_redb)?;
        let stored_rows = self.txn.open_table(EVENTS).map_err(StoreError::from_redb)?;
        let mut found = Vec::new();
        for new in events {
            let Some(location) = ids.get(new.id.0.0).map_err(StoreError::from_redb)? else {
                continue;
            };
            let (session, seq) = location.value();
            let row = stored_rows
                .get((session, seq))
                .map_err(StoreError::from_redb)?
                .ok_or_else(|| StoreError::Corrupt(format!("event id {} has no row", new.id)))?;
            let stored = tables::decode_event(row.value())?;
            if stored.payload != new.payload {
                return Err(AppendError::IdReused { id: new.id });
            }
            found.push(stored);
        }
        match found.len() {
            0 => Ok(None),
            n if n == events.len() => Ok(Some(found)),
            _ => Err(AppendError::IdReused { id: found[0].id }),
        }
    }

    /// Checks the batch against the head (start event, aliases), then writes every row.
    /// Checks come first so a refused batch writes nothing; a storage error while writing
    /// poisons the transaction so the group aborts.
    fn insert_checked(
        &mut self,
        head: Option<SessionHead>,
        events: Vec<Event>,
    ) -> Result<Appended, AppendError> {
        let Some(first) = events.first() else {
            return Err(AppendError::EmptyBatch);
        };
        let session = first.session;
        let mut summary = match head {
            Some(head) => head.summary,
            None => {
                SessionSummary::start(first).ok_or_else(|| AppendError::FirstEventNotStart {
                    found: first.payload.type_name().to_string(),
                })?
            }
        };
        let is_new = first.seq == 1;
        let mut new_aliases: Vec<&str> = Vec::new();
        for (index, event) in events.iter().enumerate() {
            if let Payload::SessionStarted { aliases, .. } = &event.payload {
                if !(is_new && index == 0) {
                    return Err(AppendError::StartInsideSession);
                }
                new_aliases.extend(aliases.iter().map(String::as_str));
            }
        }
        {
            let alias_table = self
                .txn
                .open_table(ALIASES)
                .map_err(StoreError::from_redb)?;
            for alias in &new_aliases {
                if let Some(existing) = alias_table.get(*alias).map_err(StoreError::from_redb)? {
                    return Err(AppendError::AliasTaken {
                        alias: alias.to_string(),
                        existing: SessionId(ulid::Ulid(existing.value())),
                    });
                }
            }
        }
        for (index, event) in events.iter().enumerate() {
            if !(is_new && index == 0) {
                summary.apply(event);
            }
        }
        let last = events.last().expect("non-empty");
        let head = SessionHead {
            session,
            seq: last.seq,
            hash: last.hash.clone(),
            summary,
        };
        if let Err(error) = self.write_rows(&events, &head, &new_aliases) {
            self.poisoned = Some(error.clone());
            return Err(error.into());
        }
        Ok(Appended { events, head })
    }

    fn write_rows(
        &mut self,
        events: &[Event],
        head: &SessionHead,
        aliases: &[&str],
    ) -> Result<(), StoreError> {
        let key = session_key(head.session);
        {
            let mut rows = self.txn.open_table(EVENTS).map_err(StoreError::from_redb)?;
            let mut ids = self
                .txn
                .open_table(EVENT_IDS)
                .map_err(StoreError::from_redb)?;
            for event in events {
                let bytes = super::codec::encode_event(event);
                rows.insert((key, event.seq), bytes.as_slice())
                    .map_err(StoreError::from_redb)?;
                ids.insert(event.id.0.0, (key, event.seq))
                    .map_err(StoreError::from_redb)?;
                self.appended += 1;
            }
        }
        let mut heads = self.txn.open_table(HEADS).map_err(StoreError::from_redb)?;
        let head_bytes = serde_json::to_vec(head).expect("heads always serialize");
        heads
            .insert(key, head_bytes.as_slice())
            .map_err(StoreError::from_redb)?;
        let mut alias_table = self
            .txn
            .open_table(ALIASES)
            .map_err(StoreError::from_redb)?;
        for alias in aliases {
            alias_table
                .insert(*alias, key)
                .map_err(StoreError::from_redb)?;
        }
        Ok(())
    }
}
