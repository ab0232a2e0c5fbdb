//! The event log: the only module that touches storage.
//!
//! Owns: the [`Ledger`] facade every caller uses (open, reads for projections and the CLI,
//! the ledger-wide position, watches, `verify`, rebuilding summaries), the storage
//! contract ([`contract`]: what a backend must do), the append rules written once
//! ([`rules::plan_append`]: expected seq, all-or-nothing, idempotent by event id, start
//! event, aliases, hash chain), the group-commit writer thread ([`writer`]), redb as one
//! backend (`redb`, private: nothing outside this module names a redb type) and the
//! ledger host that shares a redb file between processes ([`host`]), and salvage: the
//! events of a damaged file found by their own hashes in its bytes (`salvage`). A ledger
//! is opened with the families it decodes with (`Families`, from the composition root):
//! it hands them to every read view and write transaction of its backend, and the codec
//! and the head reader take them as an argument. Must not: decide what to record (tools
//! do), fold anything beyond the [`SessionSummary`] kept beside each head, write to
//! stdout, rewrite a committed event, or decode with families it was not handed.
//!
//! Several processes share one ledger (DESIGN §3): a backend's write transaction is
//! exclusive across processes, so reading the head inside it and checking the expected seq
//! is what keeps two writers from both taking seq N, and numbering events after the last
//! position inside it makes commit order position order.

mod chain;
pub(crate) mod codec;
#[cfg(test)]
mod conformance;
mod contained;
pub(crate) mod contract;
pub(crate) mod damage;
mod error;
pub(crate) mod health;
pub(crate) mod host;
mod open;
pub(crate) mod postgres;
mod redb;
pub(crate) mod rules;
pub(crate) mod salvage;
#[cfg(test)]
mod toy_family;
pub(crate) mod verdict;
pub(crate) mod watch;
pub(crate) mod writer;

pub(crate) use contract::OpenMode;
pub(crate) use error::{AppendError, BackendError, OpenError, StoreError, VerifyError};
pub(crate) use open::Location;
#[cfg(test)]
pub(crate) use rules::Appended;
pub(crate) use watch::Watch;
pub(crate) use writer::AppendTxn;

use crate::event::family::Families;
use crate::event::summary::{SUMMARY_VERSION, SessionSummary};
use crate::event::{Event, SessionId};
use contract::{Backend, CommitSignal, Decode, ReadView};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// File name of the ledger inside the data directory.
pub const LEDGER_FILE_NAME: &str = "ledger.redb";

/// Bytes of page cache redb may hold. Small on purpose: the log is append-mostly and reads
/// go through the OS page cache; redb's default (1 GiB) would dominate the server's RSS.
pub(crate) const CACHE_SIZE_BYTES: usize = 1024 * 1024;

/// The head of a session: its last seq and hash, the ledger-wide position of its last
/// event, and the summary folded up to it. Read back with a ledger's families
/// ([`HeadSeed`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionHead {
    pub session: SessionId,
    pub seq: u64,
    pub hash: String,
    pub(crate) summary: SessionSummary,
    /// Position of the session's last event (see [`Ledger::last_position`]); 0 in a
    /// ledger of an earlier build until its first write assigns positions.
    #[serde(default)]
    pub position: u64,
}

impl SessionHead {
    /// The session's kind (its summary's).
    pub fn kind(&self) -> crate::event::SessionKind {
        self.summary.kind
    }
}

/// A head as stored (JSON), before its summary is read with a ledger's families.
#[derive(Deserialize)]
struct StoredHead {
    session: SessionId,
    seq: u64,
    hash: String,
    summary: crate::event::summary::StoredSummary,
    #[serde(default)]
    position: u64,
}

/// Reads a [`SessionHead`]'s JSON with the families given (its summary's kind and parts
/// are theirs to read).
#[derive(Clone, Copy)]
pub(crate) struct HeadSeed<'a>(pub(crate) &'a Families);

impl<'de> serde::de::DeserializeSeed<'de> for HeadSeed<'_> {
    type Value = SessionHead;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<SessionHead, D::Error> {
        let stored = StoredHead::deserialize(d)?;
        Ok(SessionHead {
            session: stored.session,
            seq: stored.seq,
            hash: stored.hash,
            summary: self
                .0
                .read_summary(stored.summary)
                .map_err(serde::de::Error::custom)?,
            position: stored.position,
        })
    }
}

/// A head row's JSON, read with `families`.
pub(crate) fn decode_head_json(
    bytes: &[u8],
    families: &Families,
) -> Result<SessionHead, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let head = HeadSeed(families).deserialize(&mut reader)?;
    reader.end()?;
    Ok(head)
}

/// What `verify` found for one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct VerifiedSession {
    pub session: SessionId,
    pub events: u64,
    /// The first event dated before the event it follows, if any: sound as a chain, but
    /// its time is a claim (written before appends kept time from going back, or by a
    /// clock that stepped back); `verify` says so.
    pub time_goes_back: Option<u64>,
}

/// Events that cannot be read which one catch-up of a search index skips before it stops
/// ([`Ledger::for_each_readable_event_from_position`]; a damaged page of the positions
/// index can make every later one unreadable).
pub(crate) const MAX_UNREADABLE_EVENTS: usize = 64;

/// The events [`Ledger::for_each_readable_event_from_position`] could not read.
#[derive(Debug, Default)]
pub(crate) struct Unreadable {
    /// Their positions, in order.
    pub positions: Vec<u64>,
    /// Whether the walk ended at its limit of them (the rest is left for later).
    pub ended_early: bool,
}

/// What [`Ledger::check_all`] found.
#[derive(Debug, Default)]
pub(crate) struct LedgerCheck {
    /// What the storage's own structure check found (a table that cannot be read).
    pub structure: Vec<String>,
    /// The sessions that verified.
    pub verified: Vec<VerifiedSession>,
    /// The sessions that did not, each with its first problem.
    pub findings: Vec<SessionFinding>,
    /// Events stored under no session (checked when every session verified).
    pub orphans: Option<VerifyError>,
}

impl LedgerCheck {
    /// Whether anything is damaged: what stops writes. A summary that is stale or differs
    /// from its log is derived state, mended by `verify --rebuild`, not damage.
    pub(crate) fn is_damaged(&self) -> bool {
        !self.structure.is_empty()
            || self.orphans.is_some()
            || self.findings.iter().any(|f| f.error.stops_writes())
    }
}

/// One session that did not verify: its first problem, and its head's last seq (the events
/// from the problem on cannot be trusted).
#[derive(Debug)]
pub(crate) struct SessionFinding {
    pub session: SessionId,
    pub last_seq: u64,
    pub error: VerifyError,
}

/// An event with its ledger-wide position.
#[derive(Clone, Debug, PartialEq)]
pub struct PositionedEvent {
    pub position: u64,
    pub event: Event,
}

/// A handle on the ledger, shared by every tool of a process.
#[derive(Clone)]
pub struct Ledger {
    backend: Arc<dyn Backend>,
    writer: writer::WriterHandle,
    /// Raised on each commit this process makes (or its backend hears of); watches wait
    /// on it.
    commits: CommitSignal,
    path: Arc<PathBuf>,
    /// What this process found damaged in the ledger (stops writes, see [`damage`]).
    damage: damage::Damage,
    /// Set when the ledger is opened for reading only: what that open did (see
    /// [`Ledger::open_file_read_only`]).
    read_only: Option<Arc<str>>,
    /// The families this ledger decodes its rows with: handed to every read view and to
    /// the writer's transactions, never looked up.
    families: Families,
    /// Dropped last, with the last clone: waits for the writer thread to end.
    _closed_on_drop: Arc<CloseOnDrop>,
}

/// Longest the last [`Ledger`] handle waits, when dropped, for the writer thread to let go
/// of the database so it closes cleanly.
pub(crate) const CLOSE_WAIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Makes dropping the last [`Ledger`] close the database before the process may exit: it
/// joins the writer thread (which holds the backend until its queue closes), waiting at
/// most [`CLOSE_WAIT_LIMIT`].
///
/// Regression (`a_truncated_ledger_is_refused_untouched`): the writer thread holds the
/// database and ends only after the last handle is dropped; a CLI command that returned
/// from `main` at once killed it first, so redb never closed the file and every run left
/// it marked "not shut down cleanly". The next open then had to recover it (a full repair
/// of a big ledger), and a damaged file could no longer be told from a crashed one.
struct CloseOnDrop {
    writer: Mutex<writer::WriterThread>,
    /// Told to close (stop serving other processes, let go of the writer) first. Weak: the
    /// writer thread holds the last strong handle and drops the backend off the async
    /// workers (a PostgreSQL client must not be dropped on one).
    backend: std::sync::Weak<dyn Backend>,
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        if let Some(backend) = self.backend.upgrade() {
            backend.close();
        }
        let writer = self
            .writer
            .get_mut()
            .unwrap_or_else(|poison| poison.into_inner());
        if !writer.join_within(CLOSE_WAIT_LIMIT) {
            tracing::warn!("the ledger writer did not stop in time; the file may need recovery");
        }
    }
}

/// Finds a session by its id (if it has a head) or by an alias recorded when it started.
pub(crate) fn resolve_in(view: &dyn ReadView, text: &str) -> Result<Option<SessionId>, StoreError> {
    if let Ok(id) = text.parse::<SessionId>()
        && view.head(id)?.is_some()
    {
        return Ok(Some(id));
    }
    view.alias(text)
}

impl Ledger {
    /// A ledger over any [`Backend`] whose rows decode with `families`; `label` names it
    /// (its path, or a URL without credentials). Starts the writer thread.
    pub(crate) fn with_backend(backend: impl Backend, label: &Path, families: Families) -> Ledger {
        Ledger::serving(backend, label, families, |_, _| {})
    }

    /// [`Ledger::with_backend`], handing `serve` the backend and the ledger's writer as soon
    /// as the writer runs: a backend that serves other processes (the ledger host,
    /// [`host`]) runs their writes in this process's group commit.
    pub(crate) fn serving<B: Backend>(
        backend: B,
        label: &Path,
        families: Families,
        serve: impl FnOnce(&B, writer::WriterHandle),
    ) -> Ledger {
        let commits = CommitSignal(Arc::new(tokio::sync::watch::Sender::new(0)));
        backend.on_commits(commits.clone());
        let damage = damage::Damage::recorded_in(
            backend.damage_scope(),
            label.display().to_string(),
            backend.verdicts(label),
        );
        backend.on_damage(damage.clone());
        let backend = Arc::new(backend);
        let (writer, thread) = writer::WriterHandle::spawn(
            backend.clone(),
            commits.clone(),
            damage.clone(),
            families.clone(),
        );
        serve(&backend, writer.clone());
        let backend: Arc<dyn Backend> = backend;
        let closing = Arc::downgrade(&backend);
        Ledger {
            backend,
            writer,
            commits,
            path: Arc::new(label.to_path_buf()),
            damage,
            read_only: None,
            families,
            _closed_on_drop: Arc::new(CloseOnDrop {
                writer: Mutex::new(thread),
                backend: closing,
            }),
        }
    }

    /// The families this ledger decodes with (handed to it when it was opened).
    pub(crate) fn families(&self) -> &Families {
        &self.families
    }

    /// Path of the ledger file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// What this process found damaged in the ledger so far (see [`damage`]).
    pub(crate) fn damage(&self) -> &damage::Damage {
        &self.damage
    }

    /// Whether the ledger is opened for reading only (it may not be written here), and
    /// then what its open did, in a sentence or two: every write is refused, and nothing
    /// is written beside it (a search builds its index elsewhere).
    pub(crate) fn read_only(&self) -> Option<&str> {
        self.read_only.as_deref()
    }

    /// The PostgreSQL database this ledger is kept in, if it is: the one capability the
    /// store hands to recall's PostgreSQL search and vectors (`crate::recall::postgres`).
    pub(crate) fn database(&self) -> Option<postgres::Database> {
        self.backend.database()
    }

    /// Runs `job` inside the next group-commit write transaction and returns its result
    /// once that transaction is durably committed. See [`writer`].
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) async fn write<R, F>(&self, job: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        self.writer.submit(job).await
    }

    /// Queues `job` for the next group commit now and returns what waits for its result:
    /// jobs queued one after another run in that order (a connection's arrival order).
    pub(crate) fn queue_write<R, F>(
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

    /// Called on the one thread of a single-threaded runtime that serves for as long as
    /// this ledger is written (a stdio server): the answers of the writes queued from it
    /// reach it with one wake per group commit instead of one per answer.
    pub(crate) fn deliver_answers_on_this_thread(&self) {
        self.writer.deliver_on_this_thread();
    }

    /// Blocking form of [`Ledger::write`] for threads outside the async runtime.
    pub fn write_blocking<R, F>(&self, job: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut AppendTxn<'_>) -> R + Send + 'static,
    {
        self.writer.submit_blocking(job)
    }

    /// A read view that decodes with this ledger's families.
    fn read(&self) -> Result<Box<dyn ReadView + '_>, StoreError> {
        self.backend.read(&self.families)
    }

    /// The head of one session, if it exists.
    pub fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        self.read()?.head(session)
    }

    /// Every session head, in no particular order.
    pub fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        self.read()?.heads()
    }

    /// The sessions whose head row cannot be read (left out of [`Ledger::heads`]), with why.
    pub(crate) fn undecodable_heads(&self) -> Result<Vec<(SessionId, String)>, StoreError> {
        self.read()?.undecodable_heads()
    }

    /// Finds a session by its id or by an alias recorded when it started.
    pub(crate) fn resolve(&self, text: &str) -> Result<Option<SessionId>, StoreError> {
        resolve_in(&*self.read()?, text)
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
    pub(crate) fn for_each_event(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        visit: impl FnMut(Event) -> bool,
    ) -> Result<(), StoreError> {
        self.scan_session(session, from_seq, to_seq, visit)
    }

    /// [`Ledger::for_each_event`] for projections. Every event handed out is read whole and
    /// checked (its hash included), as every read is; the name keeps the projections' call
    /// sites apart for a cheaper check later (issue 41).
    pub(crate) fn for_each_event_to_fold(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        visit: impl FnMut(Event) -> bool,
    ) -> Result<(), StoreError> {
        self.scan_session(session, from_seq, to_seq, visit)
    }

    /// Streams the events of `session` in `from_seq..=to_seq`, each checked as it is read
    /// ([`chain::ChainCheck`]: where it is stored, its hash, its place in the chain; read
    /// whole for that), and, when the scan reads to its end, that
    /// the log ends where the session's head says. The first row that does not check ends
    /// the scan with [`StoreError::Corrupt`] naming it, after every sound event before it
    /// was visited; the damage is recorded.
    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        mut visit: impl FnMut(Event) -> bool,
    ) -> Result<(), StoreError> {
        let view = self.read()?;
        // A head row that does not decode is the session's damage, said after the events
        // that verify (read as far as the caller asked).
        let (head, unreadable_head) = match view.head(session) {
            Ok(head) => (head, None),
            Err(error) if error.is_damage() => (None, Some(error)),
            Err(error) => return Err(error),
        };
        // A read to the head reads on past it: an event stored after the head is damage.
        let scan_to = match &head {
            Some(head) if to_seq >= head.seq => u64::MAX,
            _ => to_seq,
        };
        let mut chain = chain::ChainCheck::from(session, from_seq, Decode::Full);
        let mut finding: Option<VerifyError> = None;
        let mut stopped = false;
        view.scan_session(
            session,
            from_seq,
            scan_to,
            Decode::Full,
            &mut |seq, decoded| match chain.check(seq, decoded) {
                Ok(event) if head.as_ref().is_some_and(|h| event.seq > h.seq) => {
                    finding = Some(VerifyError::AfterHead {
                        session,
                        head: head.as_ref().map_or(0, |h| h.seq),
                        last: event.seq,
                    });
                    false
                }
                Ok(event) => {
                    stopped = !visit(event);
                    !stopped
                }
                Err(error) => {
                    finding = Some(error);
                    false
                }
            },
        )?;
        if finding.is_none()
            && let Some(error) = unreadable_head
        {
            self.damage.note(Some(session), &error);
            return Err(error);
        }
        if finding.is_none() && !stopped && from_seq <= to_seq {
            finding = match &head {
                Some(head) => chain.check_ends_at(head, to_seq).err(),
                None if chain.last_seq() >= from_seq.max(1) => Some(VerifyError::NoHeadForEvents {
                    session,
                    first: from_seq.max(1),
                    count: chain.last_seq() + 1 - from_seq.max(1),
                }),
                None => None,
            };
        }
        // What a read cannot see again (a row after the head it did not read, damage
        // `verify` found elsewhere in the session) lasts in the session's verdict.
        if finding.is_none()
            && let Some(detail) = self.damage.verdict_on(session)
        {
            return Err(StoreError::Corrupt(format!(
                "session {session} was found damaged and not yet verified sound again: {detail}"
            )));
        }
        match finding {
            Some(finding) => {
                self.note_verify_error(&finding);
                Err(StoreError::Corrupt(finding.to_string()))
            }
            None => Ok(()),
        }
    }

    /// Calls `visit` with every event of every session (sessions in id order, events in
    /// seq order) until it returns false.
    pub(crate) fn for_each_event_everywhere(
        &self,
        mut visit: impl FnMut(Event) -> bool,
    ) -> Result<(), StoreError> {
        self.read()?.scan_all(&mut visit)
    }

    /// The position of the last committed event: every event gets the next one when its
    /// transaction commits, so positions follow commit order across sessions and
    /// processes. 0 when the ledger is empty (or was written by an earlier build and has
    /// not been written since: positions are assigned by its first write).
    pub fn last_position(&self) -> Result<u64, StoreError> {
        self.read()?.last_position()
    }

    /// Calls `visit` with each event at position `from` or later, in position order (the
    /// order of commit, across every session), until it returns false.
    pub fn for_each_event_from_position(
        &self,
        from: u64,
        mut visit: impl FnMut(PositionedEvent) -> bool,
    ) -> Result<(), StoreError> {
        let mut altered = None;
        self.read()?.scan_positions(from, &mut |position, event| {
            let session = event.session;
            match verified(Decode::Full, event) {
                Ok(event) => visit(PositionedEvent { position, event }),
                Err(error) => {
                    altered = Some((session, error));
                    false
                }
            }
        })?;
        match altered {
            // The session's damage: on a database that checks its own pages, it stops
            // writes to that session only.
            Some((session, error)) => {
                self.damage.note(Some(session), &error);
                Err(error)
            }
            None => Ok(()),
        }
    }

    /// [`Ledger::for_each_event_from_position`] that goes on past damage: an event that
    /// cannot be read (its row does not decode, or the storage engine cannot read it; the
    /// damage is recorded) is skipped, and the walk goes on at the next position. After
    /// `max_unreadable` of them the walk ends there (a damaged page of the positions
    /// index can make every later one unreadable). Returns the positions skipped, and
    /// whether it ended early. For derived data (search indexes) that must not stop at
    /// one damaged event; other errors end the walk with the error.
    pub(crate) fn for_each_readable_event_from_position(
        &self,
        from: u64,
        max_unreadable: usize,
        mut visit: impl FnMut(PositionedEvent) -> bool,
    ) -> Result<Unreadable, StoreError> {
        let mut unreadable = Unreadable::default();
        let mut from = from;
        loop {
            let mut last_read = from.saturating_sub(1);
            let mut stopped = false;
            let walked = self.for_each_event_from_position(from, |positioned| {
                last_read = positioned.position;
                let go_on = visit(positioned);
                stopped = !go_on;
                go_on
            });
            match walked {
                Err(error) if error.is_damage() && !stopped => {
                    let position = last_read + 1;
                    if unreadable.positions.len() >= max_unreadable {
                        tracing::warn!(position, %error, "the ledger is damaged here: left for later");
                        unreadable.ended_early = true;
                        return Ok(unreadable);
                    }
                    tracing::warn!(position, %error, "an event that cannot be read is left out");
                    unreadable.positions.push(position);
                    from = position + 1;
                }
                other => return other.map(|()| unreadable),
            }
        }
    }

    /// Up to `limit` events at position `from` or later, in position order: cross-session
    /// history, or "what happened since P" for a caller that remembers P.
    pub fn events_from_position(
        &self,
        from: u64,
        limit: usize,
    ) -> Result<Vec<PositionedEvent>, StoreError> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.for_each_event_from_position(from, |event| {
            out.push(event);
            out.len() < limit
        })?;
        Ok(out)
    }

    /// Events as they are committed, starting at position `from` (pass
    /// [`Ledger::last_position`] + 1 for only new ones). See [`Watch`].
    pub(crate) fn watch(&self, from: u64) -> Watch {
        Watch::new(self.clone(), from)
    }

    /// Checks one session: seqs gapless from 1, every `prev` equal to the previous `hash`,
    /// every hash recomputed from the content, the head equal to the last event and its
    /// summary equal to a fold of the log (a summary folded by another
    /// [`SUMMARY_VERSION`] is reported as [`VerifyError::StaleSummary`], fixable, apart
    /// from damage). Stops at the first bad event.
    pub(crate) fn verify_session(
        &self,
        session: SessionId,
    ) -> Result<VerifiedSession, VerifyError> {
        let verified = chain::verify_in(&*self.read()?, session);
        if let Err(error) = &verified {
            self.note_verify_error(error);
        }
        verified
    }

    /// Records what a failed check says is damaged (derived state out of date is not).
    fn note_verify_error(&self, error: &VerifyError) {
        if !error.stops_writes() {
            return;
        }
        match (error.session(), error) {
            (_, VerifyError::Storage(error)) => self.damage.note(None, error),
            (Some(session), error) => self.damage.found_in(session, error.to_string()),
            (None, error) => self.damage.found(error.to_string()),
        }
    }

    /// Verifies every session (see [`Ledger::verify_session`]), stopping at the first bad
    /// one. Also reports events stored under a session that has no head.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn verify_all(&self) -> Result<Vec<VerifiedSession>, VerifyError> {
        self.verify_all_reporting(|_, _| {})
    }

    /// [`Ledger::verify_all`], calling `progress(sessions done, sessions in all)` after
    /// each session (for a progress bar).
    pub(crate) fn verify_all_reporting(
        &self,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Vec<VerifiedSession>, VerifyError> {
        let view = self.read()?;
        let mut heads: Vec<SessionId> = view.heads()?.into_iter().map(|h| h.session).collect();
        heads.sort();
        let mut out = Vec::new();
        for session in &heads {
            out.push(chain::verify_in(&*view, *session)?);
            progress(out.len(), heads.len());
        }
        let total = view.event_count()?;
        let counted: u64 = out.iter().map(|v| v.events).sum();
        if total != counted {
            return Err(VerifyError::OrphanEvents {
                expected: counted,
                found: total,
            });
        }
        Ok(out)
    }

    /// Checks the whole ledger and goes on past damage: the storage's own structure
    /// ([`ReadView::check_structure`]), then every session it can reach (each in a read of
    /// its own, so one that cannot be read does not stop the others), then whether the
    /// sessions account for every event. Every finding is recorded as damage (fixable
    /// ones, a stale summary, aside). `Err` only when the sessions cannot even be listed.
    pub(crate) fn check_all(
        &self,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<LedgerCheck, StoreError> {
        let mut check = LedgerCheck::default();
        match self.read().and_then(|view| view.check_structure()) {
            Ok(found) => check.structure = found,
            Err(error) => check.structure.push(error.to_string()),
        }
        let heads = self.read()?.heads()?;
        for (session, detail) in self.undecodable_heads()? {
            let error = VerifyError::UnreadableHead { session, detail };
            self.note_verify_error(&error);
            check.findings.push(SessionFinding {
                session,
                last_seq: 0,
                error,
            });
        }
        let mut sessions: Vec<(SessionId, u64)> =
            heads.iter().map(|h| (h.session, h.seq)).collect();
        sessions.sort();
        for (done, (session, last_seq)) in sessions.iter().enumerate() {
            let verified = self
                .read()
                .map_err(VerifyError::from)
                .and_then(|view| chain::verify_in(&*view, *session));
            match verified {
                Ok(verified) => check.verified.push(verified),
                Err(error) => {
                    self.note_verify_error(&error);
                    check.findings.push(SessionFinding {
                        session: *session,
                        last_seq: *last_seq,
                        error,
                    });
                }
            }
            progress(done + 1, sessions.len());
        }
        if check.findings.is_empty() {
            let total = self.read()?.event_count()?;
            let counted: u64 = check.verified.iter().map(|v| v.events).sum();
            if total != counted {
                check.orphans = Some(VerifyError::OrphanEvents {
                    expected: counted,
                    found: total,
                });
            }
        }
        for finding in &check.structure {
            self.damage.found(finding.clone());
        }
        if let Some(orphans) = &check.orphans {
            self.damage.found(orphans.to_string());
        }
        Ok(check)
    }

    /// Folds every session again and rewrites each head whose stored summary differs from
    /// the fold (a stale [`SUMMARY_VERSION`], or a summary that does not match its log),
    /// in one write transaction. Never touches an event, a seq or a hash: a session whose
    /// log is damaged (it does not fold) is left as it is for `verify` to report. Returns
    /// the sessions whose summary was rewritten. Blocks (it runs on the writer thread):
    /// call it off the async workers.
    pub(crate) fn rebuild_summaries(&self) -> Result<Vec<SessionId>, StoreError> {
        self.write_blocking(|txn| -> Result<Vec<SessionId>, StoreError> {
            let view = txn.backend();
            let mut fixed = Vec::new();
            let mut heads = view.heads()?;
            heads.sort_by_key(|h| h.session);
            for head in heads {
                let Some(summary) = fold_summary(&*view, &head)? else {
                    continue;
                };
                if summary != head.summary {
                    view.put_head(&SessionHead {
                        summary,
                        ..head.clone()
                    })?;
                    fixed.push(head.session);
                }
            }
            Ok(fixed)
        })?
    }
}

/// The summary a fold of `head`'s log gives, `None` when the log does not fold (a row
/// that does not decode, or no `session_started` first).
fn fold_summary(
    view: &dyn ReadView,
    head: &SessionHead,
) -> Result<Option<SessionSummary>, StoreError> {
    let mut summary: Option<SessionSummary> = None;
    let mut folds = true;
    view.scan_session(
        head.session,
        1,
        head.seq,
        Decode::ToFold,
        &mut |_, decoded| {
            let Ok(event) = decoded else {
                folds = false;
                return false;
            };
            match summary.as_mut() {
                None => match SessionSummary::start(&event) {
                    Some(started) => summary = Some(started),
                    None => folds = false,
                },
                Some(summary) => summary.apply(&event),
            }
            folds
        },
    )?;
    Ok(summary.filter(|_| folds))
}

/// `event` as read whole, if it is what its hash says: a whole event whose content does
/// not match its hash (bytes altered on disk into something that still decodes) is never
/// handed out as sound. A fold's events (`Decode::ToFold`) carry no hash to check.
fn verified(decode: Decode, event: Event) -> Result<Event, StoreError> {
    if decode == Decode::Full && !event.hash_matches() {
        return Err(StoreError::Corrupt(format!(
            "event seq {} of session {} does not match its hash: its bytes were altered",
            event.seq, event.session
        )));
    }
    Ok(event)
}
