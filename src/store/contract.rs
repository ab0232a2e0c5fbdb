//! The storage contract: what a backend (redb today, a network database later) must do
//! for the [`super::Ledger`] facade, and nothing more.
//!
//! Owns: [`Backend`] (begin a read snapshot or a write transaction, how often a watch
//! polls), [`ReadView`] (a consistent snapshot: heads, aliases, event ids, a session's
//! rows from a seq, every row, the ledger-wide position index), [`WriteView`] (the same
//! inside the exclusive write transaction, plus writing an [`AppendPlan`] and a head,
//! commit, abort), [`Decode`] and [`OpenMode`] (whether a backend's open may create the
//! ledger; which backend opens is `super::open`'s choice, above them). Must not: hold a rule. Which batch may be appended
//! ([`super::rules::plan_append`]), what `verify` checks and how a summary is folded live
//! once in the facade; a backend stores and returns what it is given.
//!
//! Every method blocks; the facade calls them on the writer thread or off the async
//! workers. A backend maps its own errors with [`StoreError::backend`] (so a full disk
//! keeps its message) and reports a missing head row for stored events as
//! [`StoreError::MissingHead`].
//!
//! What a backend guarantees:
//! - A [`WriteView`] is exclusive across every process sharing the ledger (redb: one
//!   process holds the file and other processes' writes run in its group commit; a
//!   database: a row lock on a counter or `SERIALIZABLE`), and sees every commit before it. Reading a head inside it and comparing the expected seq
//!   is then enough to keep two writers from taking one seq; a network database should
//!   still make `(session, seq)` and the event id unique keys, as a second line.
//! - [`WriteView::append`] gives each event the next ledger-wide position (1, 2, 3 … in
//!   the order the events are given, continuing after [`ReadView::last_position`]), and
//!   commit order is position order: a reader never sees position P+1 without P.
//! - Nothing written in a write view is visible to anyone before [`WriteView::commit`]
//!   returns, and all of it after; [`WriteView::abort`] (or dropping the view) leaves no
//!   trace. Commit is durable when it returns.
//! - Positions are not part of an event: not hashed, not exported.

use super::{SessionHead, StoreError};
use crate::event::{Event, EventId, Families, SessionId};
use std::time::Duration;

/// Whether an open may create the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpenMode {
    /// Create it when missing: the commands that record (`serve`, `demo`, `import`,
    /// `copy --to`, `recover --to`).
    Create,
    /// Only open one that is there ([`super::OpenError::NoLedger`] otherwise): the commands that
    /// only read; a redb ledger this process may not write is opened for reading only.
    Existing,
}

/// How much of a stored event a scan builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decode {
    /// The whole event (exports, verify, history).
    Full,
    /// What a projection's fold reads: `prev` and `hash` empty, the call's arguments
    /// `null` (see [`super::Ledger::for_each_event_to_fold`]).
    ToFold,
}

/// Builds an event of a stored row's bytes with a ledger's families (the codec's, as much
/// as a [`Decode`] asks).
pub(crate) type RowDecoder = fn(&[u8], &Families) -> Result<Event, StoreError>;

impl Decode {
    /// What every backend's session scan does first: `None` when `from_seq..=to_seq` is
    /// empty or reversed (nothing is visited), else the codec that builds this much of a
    /// stored row.
    pub(crate) fn scan(self, from_seq: u64, to_seq: u64) -> Option<RowDecoder> {
        (from_seq <= to_seq).then_some(self.decoder())
    }

    /// The codec that builds this much of a stored row.
    pub(crate) fn decoder(self) -> RowDecoder {
        match self {
            Decode::Full => super::codec::decode_event,
            Decode::ToFold => super::codec::decode_event_to_fold,
        }
    }
}

/// Visits one stored row of a session scan: the seq it is stored under and the event it
/// decodes to (or why it does not). Returns false to stop the scan.
pub(crate) type RowVisitor<'v> = dyn FnMut(u64, Result<Event, StoreError>) -> bool + 'v;

/// Visits one event in position order with its position. Returns false to stop.
pub(crate) type PositionVisitor<'v> = dyn FnMut(u64, Event) -> bool + 'v;

/// A backend: something that hands out read snapshots and exclusive write transactions.
pub(crate) trait Backend: Send + Sync + 'static {
    /// A consistent snapshot of the ledger as of now, whose rows decode with `families`.
    fn read(&self, families: &Families) -> Result<Box<dyn ReadView + '_>, StoreError>;

    /// Begins the write transaction (blocks while another process holds it); what it
    /// reads decodes with `families`.
    fn write(&self, families: &Families) -> Result<Box<dyn WriteView + '_>, StoreError>;

    /// How often a [`super::watch::Watch`] looks for commits of other processes. A backend
    /// that is told about them (LISTEN/NOTIFY) can return a long interval; this process's
    /// own commits always wake a watch at once.
    fn poll_interval(&self) -> Duration {
        super::watch::WATCH_POLL_INTERVAL
    }

    /// Called once, when the ledger is built over this backend, with the signal that wakes
    /// its watches. A backend that hears of other processes' commits (a LISTEN/NOTIFY
    /// listener) keeps it and calls [`CommitSignal::committed`]; the default ignores it.
    fn on_commits(&self, signal: CommitSignal) {
        let _ = signal;
    }

    /// What one damaged event or page stops in this backend: every write (a file, the
    /// default) or writes to its session only (a database that checks its own rows).
    #[allow(private_interfaces)]
    fn damage_scope(&self) -> super::damage::DamageScope {
        super::damage::DamageScope::Ledger
    }

    /// Called once, when the ledger is built over this backend, with the record of damage
    /// its facade keeps: a backend that found damage while opening (a redo log record that
    /// cannot be replayed) reports it there, and one whose engine may panic on damaged
    /// bytes contains its views with it ([`super::contained::Contained`]). The default
    /// ignores it.
    #[allow(private_interfaces)]
    fn on_damage(&self, damage: super::damage::Damage) {
        let _ = damage;
    }

    /// Where this ledger's lasting damage verdicts are kept ([`super::verdict`]); `label`
    /// is the ledger's name (a file's path). The default keeps none: what a process finds
    /// stops its own writes only.
    #[allow(private_interfaces)]
    fn verdicts(
        &self,
        label: &std::path::Path,
    ) -> std::sync::Arc<dyn super::verdict::VerdictStore> {
        let _ = label;
        std::sync::Arc::new(super::verdict::Unrecorded)
    }

    /// Called when the last handle on the ledger is dropped, before the writer thread is
    /// joined: let go of the writer and of everything serving other processes.
    fn close(&self) {}

    /// Called on the writer thread when it has had no job for
    /// [`super::writer::IDLE_AFTER`], and once more as it ends (the ledger closing): a
    /// backend that defers work from its commits (redb's checkpoint of its redo log) does
    /// it now. The default does nothing.
    fn idle(&self) {}

    /// The PostgreSQL database the ledger is kept in, if it is (see
    /// [`super::postgres::Database`]): recall keeps its search and vectors there
    /// (`crate::recall::postgres`); `None`: beside the ledger file.
    #[allow(private_interfaces)]
    fn database(&self) -> Option<super::postgres::Database> {
        None
    }
}

/// Wakes every [`super::Watch`] of one ledger: the writer thread raises it after each
/// commit of this process, and a backend may raise it for commits it hears of.
#[derive(Clone)]
pub(crate) struct CommitSignal(pub(super) std::sync::Arc<tokio::sync::watch::Sender<u64>>);

impl CommitSignal {
    /// Says that the ledger's events up to `position` are committed (a lower position than
    /// one already signalled wakes no one).
    pub(crate) fn committed(&self, position: u64) {
        self.0.send_if_modified(|last| {
            let newer = position > *last;
            if newer {
                *last = position;
            }
            newer
        });
    }
}

/// A consistent snapshot of the ledger (a read transaction, or the write transaction
/// seeing its own writes).
pub(crate) trait ReadView {
    /// The head of one session.
    fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError>;

    /// Every head, in no particular order. A head row that does not decode is left out
    /// (and named by [`ReadView::heads_and_undecodable`]).
    fn heads(&self) -> Result<Vec<SessionHead>, StoreError>;

    /// [`ReadView::heads`], and the sessions whose head row does not decode (with why), in
    /// one pass. The default (a backend whose `heads` fails on such a row instead) finds
    /// none.
    #[allow(clippy::type_complexity)]
    fn heads_and_undecodable(
        &self,
    ) -> Result<(Vec<SessionHead>, Vec<(SessionId, String)>), StoreError> {
        Ok((self.heads()?, Vec::new()))
    }

    /// The sessions whose head row does not decode, with why.
    fn undecodable_heads(&self) -> Result<Vec<(SessionId, String)>, StoreError> {
        Ok(self.heads_and_undecodable()?.1)
    }

    /// The session an alias names (aliases are recorded by `session_started`).
    fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError>;

    /// For each id, in order, the stored event with that id, whole (one question for the
    /// whole batch: a network database answers it in one round trip).
    fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError>;

    /// [`ReadView::head`] of `session` and [`ReadView::events_by_id`] of `ids`, as one
    /// question: what an append's rules read before planning (a network database answers
    /// it in one round trip). Answers exactly as the two methods would.
    #[allow(clippy::type_complexity)]
    fn head_and_events_by_id(
        &self,
        session: SessionId,
        ids: &[EventId],
    ) -> Result<(Option<SessionHead>, Vec<Option<Event>>), StoreError> {
        Ok((self.head(session)?, self.events_by_id(ids)?))
    }

    /// The rows of `session` with seq in `from_seq..=to_seq`, in seq order, decoded as
    /// `decode` says, until `visit` returns false. Streams: no row is held after its visit.
    /// A row that does not decode is visited with the error (verify reports it by seq).
    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: Decode,
        visit: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError>;

    /// Every event of every session (sessions in id order, events in seq order), whole,
    /// until `visit` returns false.
    fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError>;

    /// How many event rows the ledger holds.
    fn event_count(&self) -> Result<u64, StoreError>;

    /// The position of the last committed event, 0 when none has one yet.
    fn last_position(&self) -> Result<u64, StoreError>;

    /// Events with a position `>= from`, in position order, whole, until `visit` returns
    /// false.
    fn scan_positions(&self, from: u64, visit: &mut PositionVisitor<'_>) -> Result<(), StoreError>;

    /// Walks the storage's own structure (every table, every row) and says what cannot be
    /// read or does not agree, one finding a line; empty when it is sound. The default (a
    /// database that checks its own pages) finds nothing.
    fn check_structure(&self) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }
}

/// The exclusive write transaction. Dropping it without [`WriteView::commit`] aborts it.
pub(crate) trait WriteView: ReadView {
    /// Writes a planned batch exactly as given (the rules ran in
    /// [`super::rules::plan_append`]; a backend does not check them again): each event
    /// under (`plan.head.session`, its seq) with the next position, its id in the id index, each alias,
    /// and `plan.head` with `position` set to the last event's. Returns that position.
    fn append(&mut self, plan: &AppendPlan) -> Result<u64, StoreError>;

    /// Replaces a session's head row (a rebuilt summary). Writes no event.
    fn put_head(&mut self, head: &SessionHead) -> Result<(), StoreError>;

    /// Whether this transaction holds anything to commit (appended rows, a head, or a
    /// backend's own upkeep such as assigning positions to an older ledger's events).
    fn has_changes(&self) -> bool;

    /// Makes every write of this transaction durable and visible.
    fn commit(self: Box<Self>) -> Result<(), StoreError>;

    /// Discards every write of this transaction.
    fn abort(self: Box<Self>) -> Result<(), StoreError>;
}

/// A batch the rules accepted, ready to be written as it is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AppendPlan {
    /// The events, seqs following the head, hashes chained.
    pub events: Vec<Event>,
    /// The session's new head (its `position` is set by [`WriteView::append`]).
    pub head: SessionHead,
    /// Aliases the batch's `session_started` claims; none is taken.
    pub aliases: Vec<String>,
}
