//! The redb backend: the ledger in one embedded file, held by one process at a time in
//! redb's single-process mode (DESIGN §3); the others reach it through that process
//! ([`super::host`]).
//!
//! Owns: [`RedbBackend`] (the [`Backend`] over an [`open::Handle`]), its read and write
//! views, the tables ([`tables`]), opening a file or a test storage ([`open`]), assigning
//! positions to the events of a ledger an earlier build wrote, and the fault suites
//! (`fault`, test builds only). Must not: hold an append rule or a verify check (those
//! live once in the store's facade), or let a `redb` type out of this module.
//!
//! A write transaction is exclusive (one process holds the file, one writer thread writes
//! it), so reading the last position inside it and numbering the batch's events after it
//! makes commit order position order.
//!
//! A write view records every row it writes ([`wal::Put`]); its commit writes them as one
//! redo log record, syncs it, and commits redb without a sync ([`wal`]); a record that
//! does not fit in the log commits with a sync instead (a checkpoint), as does
//! [`Backend::idle`].

#[cfg(test)]
mod fault;
pub(crate) mod open;
mod tables;
pub(crate) mod wal;

use super::contract::{
    AppendPlan, Backend, Decode, PositionVisitor, ReadView, RowVisitor, WriteView,
};
use super::error::is_disk_full;
use super::{Ledger, OpenError, SessionHead, StoreError, codec};
use crate::event::{Event, EventId, SessionId};
use ::redb::{
    Durability, ReadTransaction, ReadableTable, ReadableTableMetadata, TableDefinition, TableError,
    WriteTransaction,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use tables::{
    ALIASES, EVENT_IDS, EVENTS, HEADS, META, POSITIONS, POSITIONS_ASSIGNED, WAL_LSN, session_key,
    session_of,
};
use wal::{Log, Put};

/// Maps a redb error to the store's: an I/O error saying the disk is full becomes
/// [`StoreError::DiskFull`]; anything else [`StoreError::Backend`] with it as the source.
pub(crate) fn store_error(error: impl Into<::redb::Error>) -> StoreError {
    let error = error.into();
    if let ::redb::Error::Io(io) = &error
        && is_disk_full(io)
    {
        return StoreError::DiskFull(Arc::new(error));
    }
    StoreError::backend(error)
}

impl Ledger {
    /// Opens the ledger at an exact file path: a new ledger appears there complete or not
    /// at all (built beside it, then linked into place); an existing file is checked
    /// read-only first and refused, untouched, unless it is our ledger.
    ///
    /// The process that holds the file is its host (see [`crate::store::host`]); another
    /// one reaches it through that host, with the same answers.
    pub fn open_file(path: &Path) -> Result<Ledger, OpenError> {
        let backend = super::host::HostBackend::open(path)?;
        Ok(Ledger::with_backend(backend, path))
    }

    /// Opens the ledger over any redb storage backend, with the same settings and rules as
    /// a file (empty storage becomes a new ledger). `make` builds a fresh backend over the
    /// same storage for every open; `label` names it in errors. The fault-injection tests
    /// run the real writer and reads through this.
    #[cfg(test)]
    pub(crate) fn open_backend<B: ::redb::StorageBackend>(
        label: &Path,
        make: impl Fn() -> B + Send + Sync + 'static,
        log: Box<dyn wal::LogFile>,
        log_size: wal::LogSize,
    ) -> Result<Ledger, OpenError> {
        let handle = open::open_backend(label, make, log, log_size)?;
        Ok(Ledger::with_backend(RedbBackend { handle }, label))
    }
}

/// The ledger in a redb database.
pub(crate) struct RedbBackend {
    handle: open::Handle,
}

impl RedbBackend {
    pub(crate) fn new(handle: open::Handle) -> RedbBackend {
        RedbBackend { handle }
    }

    /// A read snapshot that owns its transaction (it outlives any borrow of `self`).
    pub(crate) fn read_owned(&self) -> Result<Box<dyn ReadView>, StoreError> {
        Ok(Box::new(RedbRead {
            txn: self.handle.begin_read()?,
        }))
    }

    /// A write transaction that owns itself.
    pub(crate) fn write_owned(&self) -> Result<Box<dyn WriteView>, StoreError> {
        let txn = self.handle.begin_write()?;
        let mut redo = Vec::new();
        let changed = assign_positions(&txn, &mut redo)?;
        Ok(Box::new(RedbWrite {
            txn,
            changed,
            redo,
            log: self.handle.log().clone(),
            seen: RefCell::default(),
        }))
    }

    /// Commits with a sync if records were written to the log since the last one, so the
    /// log starts again at its beginning (a checkpoint).
    pub(crate) fn checkpoint(&self) -> Result<(), StoreError> {
        if !self.handle.log().lock().needs_checkpoint() {
            return Ok(());
        }
        let txn = self.handle.begin_write()?;
        let log = self.handle.log().clone();
        let mut wal = log.lock();
        let lsn = wal.last_lsn();
        {
            let mut meta = txn.open_table(META).map_err(store_error)?;
            meta.insert(WAL_LSN, lsn).map_err(store_error)?;
        }
        match txn.commit() {
            Ok(()) => {
                wal.reset(lsn);
                Ok(())
            }
            Err(error) => {
                log.set_must_recover(true);
                Err(store_error(error))
            }
        }
    }
}

impl Drop for RedbBackend {
    /// The ledger closes: a last checkpoint, then the log is cleared, so it holds nothing
    /// to replay (a failure leaves it as it is: the next open replays it).
    fn drop(&mut self) {
        let closed = self.checkpoint().and_then(|()| {
            let mut wal = self.handle.log().lock();
            wal.clear()
                .map_err(|error| store_error(::redb::StorageError::Io(error)))
        });
        if let Err(error) = closed {
            tracing::warn!(%error, "closing the ledger's redo log failed; the next open replays it");
        }
    }
}

impl Backend for RedbBackend {
    fn read(&self) -> Result<Box<dyn ReadView + '_>, StoreError> {
        self.read_owned()
    }

    fn write(&self) -> Result<Box<dyn WriteView + '_>, StoreError> {
        self.write_owned()
    }

    fn idle(&self) {
        if let Err(error) = self.checkpoint() {
            tracing::warn!(%error, "the ledger's checkpoint failed; the redo log still holds every commit");
        }
    }
}

/// A redb read transaction.
struct RedbRead {
    txn: ReadTransaction,
}

impl RedbRead {
    /// A table, or `None` when the file has no such table (a ledger of an earlier build
    /// before its first write: no `positions` yet).
    fn open<K: ::redb::Key + 'static, V: ::redb::Value + 'static>(
        &self,
        table: TableDefinition<K, V>,
    ) -> Result<Option<::redb::ReadOnlyTable<K, V>>, StoreError> {
        match self.txn.open_table(table) {
            Ok(table) => Ok(Some(table)),
            Err(TableError::TableDoesNotExist(_)) => Ok(None),
            Err(error) => Err(store_error(error)),
        }
    }
}

/// The redb write transaction.
struct RedbWrite {
    txn: WriteTransaction,
    /// Something was written (rows, a head, positions assigned at the start).
    changed: bool,
    /// Every row written, in order: the commit's redo log record.
    redo: Vec<Put>,
    log: Arc<Log>,
    /// What this transaction has read or written of the heads and the last position, so a
    /// group's jobs (each reads its head twice, and appends after the last position) do not
    /// decode the same head row or walk to the last position again.
    seen: RefCell<Seen>,
}

/// [`RedbWrite`]'s memory of its own reads and writes; it lives as long as the transaction.
#[derive(Default)]
struct Seen {
    heads: HashMap<u128, Option<SessionHead>>,
    last_position: Option<u64>,
}

impl RedbWrite {
    /// A table (a write transaction creates one that is missing).
    fn open<K: ::redb::Key + 'static, V: ::redb::Value + 'static>(
        &self,
        table: TableDefinition<K, V>,
    ) -> Result<Option<::redb::Table<'_, K, V>>, StoreError> {
        self.txn.open_table(table).map(Some).map_err(store_error)
    }

    fn remember_head(
        &self,
        session: SessionId,
        read: impl FnOnce() -> Result<Option<SessionHead>, StoreError>,
    ) -> Result<Option<SessionHead>, StoreError> {
        let key = session_key(session);
        if let Some(head) = self.seen.borrow().heads.get(&key) {
            return Ok(head.clone());
        }
        let head = read()?;
        self.seen.borrow_mut().heads.insert(key, head.clone());
        Ok(head)
    }

    fn remember_last_position(
        &self,
        read: impl FnOnce() -> Result<u64, StoreError>,
    ) -> Result<u64, StoreError> {
        if let Some(position) = self.seen.borrow().last_position {
            return Ok(position);
        }
        let position = read()?;
        self.seen.borrow_mut().last_position = Some(position);
        Ok(position)
    }
}

impl RedbRead {
    fn remember_head(
        &self,
        _: SessionId,
        read: impl FnOnce() -> Result<Option<SessionHead>, StoreError>,
    ) -> Result<Option<SessionHead>, StoreError> {
        read()
    }

    fn remember_last_position(
        &self,
        read: impl FnOnce() -> Result<u64, StoreError>,
    ) -> Result<u64, StoreError> {
        read()
    }
}

/// The read side, written once for both transaction kinds (their table types differ).
macro_rules! read_view {
    ($view:ty) => {
        impl ReadView for $view {
            fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
                self.remember_head(session, || match self.open(HEADS)? {
                    Some(heads) => tables::read_head(&heads, session),
                    None => Ok(None),
                })
            }

            fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
                let mut out = Vec::new();
                if let Some(heads) = self.open(HEADS)? {
                    for row in heads.iter().map_err(store_error)? {
                        let (_, value) = row.map_err(store_error)?;
                        out.push(tables::decode_head(value.value())?);
                    }
                }
                Ok(out)
            }

            fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError> {
                let Some(aliases) = self.open(ALIASES)? else {
                    return Ok(None);
                };
                Ok(aliases
                    .get(alias)
                    .map_err(store_error)?
                    .map(|v| session_of(v.value())))
            }

            fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
                let (Some(index), Some(events)) = (self.open(EVENT_IDS)?, self.open(EVENTS)?)
                else {
                    return Ok(vec![None; ids.len()]);
                };
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    let Some(location) = index.get(id.0.0).map_err(store_error)? else {
                        out.push(None);
                        continue;
                    };
                    let row = events
                        .get(location.value())
                        .map_err(store_error)?
                        .ok_or_else(|| StoreError::Corrupt(format!("event id {id} has no row")))?;
                    out.push(Some(tables::decode_event(row.value())?));
                }
                Ok(out)
            }

            fn scan_session(
                &self,
                session: SessionId,
                from_seq: u64,
                to_seq: u64,
                decode: Decode,
                visit: &mut RowVisitor<'_>,
            ) -> Result<(), StoreError> {
                if from_seq > to_seq {
                    return Ok(());
                }
                let Some(events) = self.open(EVENTS)? else {
                    return Ok(());
                };
                let decode = match decode {
                    Decode::Full => codec::decode_event,
                    Decode::ToFold => codec::decode_event_to_fold,
                };
                let key = session_key(session);
                for row in events
                    .range((key, from_seq)..=(key, to_seq))
                    .map_err(store_error)?
                {
                    let (stored_key, value) = row.map_err(store_error)?;
                    if !visit(stored_key.value().1, decode(value.value())) {
                        break;
                    }
                }
                Ok(())
            }

            fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
                let Some(events) = self.open(EVENTS)? else {
                    return Ok(());
                };
                for row in events.iter().map_err(store_error)? {
                    let (_, value) = row.map_err(store_error)?;
                    if !visit(tables::decode_event(value.value())?) {
                        break;
                    }
                }
                Ok(())
            }

            fn event_count(&self) -> Result<u64, StoreError> {
                match self.open(EVENTS)? {
                    Some(events) => events.len().map_err(store_error),
                    None => Ok(0),
                }
            }

            fn last_position(&self) -> Result<u64, StoreError> {
                self.remember_last_position(|| {
                    let Some(positions) = self.open(POSITIONS)? else {
                        return Ok(0);
                    };
                    Ok(positions
                        .last()
                        .map_err(store_error)?
                        .map_or(0, |(position, _)| position.value()))
                })
            }

            fn scan_positions(
                &self,
                from: u64,
                visit: &mut PositionVisitor<'_>,
            ) -> Result<(), StoreError> {
                let (Some(positions), Some(events)) = (self.open(POSITIONS)?, self.open(EVENTS)?)
                else {
                    return Ok(());
                };
                for row in positions.range(from..).map_err(store_error)? {
                    let (position, location) = row.map_err(store_error)?;
                    let (position, location) = (position.value(), location.value());
                    let row = events.get(location).map_err(store_error)?.ok_or_else(|| {
                        StoreError::Corrupt(format!("position {position} has no event row"))
                    })?;
                    if !visit(position, tables::decode_event(row.value())?) {
                        break;
                    }
                }
                Ok(())
            }
        }
    };
}

read_view!(RedbRead);
read_view!(RedbWrite);

impl WriteView for RedbWrite {
    fn append(&mut self, plan: &AppendPlan) -> Result<u64, StoreError> {
        self.changed = true;
        let key = session_key(plan.head.session);
        let mut position = self.last_position()?;
        {
            let mut rows = self.txn.open_table(EVENTS).map_err(store_error)?;
            let mut ids = self.txn.open_table(EVENT_IDS).map_err(store_error)?;
            let mut positions = self.txn.open_table(POSITIONS).map_err(store_error)?;
            for event in &plan.events {
                position += 1;
                let bytes = codec::encode_event(event);
                rows.insert((key, event.seq), bytes.as_slice())
                    .map_err(store_error)?;
                ids.insert(event.id.0.0, (key, event.seq))
                    .map_err(store_error)?;
                positions
                    .insert(position, (key, event.seq))
                    .map_err(store_error)?;
                self.redo.push(Put::Event {
                    session: key,
                    seq: event.seq,
                    row: bytes,
                });
                self.redo.push(Put::EventId {
                    id: event.id.0.0,
                    session: key,
                    seq: event.seq,
                });
                self.redo.push(Put::Position {
                    position,
                    session: key,
                    seq: event.seq,
                });
            }
        }
        self.seen.get_mut().last_position = Some(position);
        let head = SessionHead {
            position,
            ..plan.head.clone()
        };
        self.put_head(&head)?;
        if plan.aliases.is_empty() {
            return Ok(position);
        }
        let mut aliases = self.txn.open_table(ALIASES).map_err(store_error)?;
        for alias in &plan.aliases {
            aliases.insert(alias.as_str(), key).map_err(store_error)?;
            self.redo.push(Put::Alias {
                alias: alias.clone(),
                session: key,
            });
        }
        Ok(position)
    }

    fn put_head(&mut self, head: &SessionHead) -> Result<(), StoreError> {
        self.changed = true;
        let mut heads = self.txn.open_table(HEADS).map_err(store_error)?;
        let row = tables::encode_head(head);
        heads
            .insert(session_key(head.session), row.as_slice())
            .map_err(store_error)?;
        self.seen
            .get_mut()
            .heads
            .insert(session_key(head.session), Some(head.clone()));
        self.redo.push(Put::Head {
            session: session_key(head.session),
            row,
        });
        Ok(())
    }

    fn has_changes(&self) -> bool {
        self.changed
    }

    /// The group's rows as one log record, synced, then redb's commit without a sync; or,
    /// when the record does not fit in the log, redb's commit with a sync (a checkpoint).
    ///
    /// If the log write or sync fails, the transaction is aborted and the tail stays where it
    /// was, so the next record overwrites this one (until then a crash may replay it: the
    /// callers were told the write failed, which allows it). If redb's commit fails after
    /// the record was synced, the callers are told it failed and the database is opened
    /// again before the next write, with the log replayed only up to the last acknowledged
    /// record: redb then holds what the callers were told.
    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        let RedbWrite {
            mut txn, redo, log, ..
        } = *self;
        let mut wal = log.lock();
        let lsn = wal.last_lsn() + 1;
        {
            let mut meta = txn.open_table(META).map_err(store_error)?;
            meta.insert(WAL_LSN, lsn).map_err(store_error)?;
        }
        let record = wal.encode(lsn, &redo);
        let logged = wal.fits(&record);
        if logged {
            if let Err(error) = wal.write(&record) {
                let _ = txn.abort();
                return Err(error);
            }
            txn.set_durability(Durability::None).map_err(store_error)?;
        }
        match txn.commit() {
            Ok(()) if logged => {
                wal.advance(lsn, record.len());
                Ok(())
            }
            Ok(()) => {
                wal.reset(lsn);
                Ok(())
            }
            Err(error) => {
                log.set_must_recover(true);
                Err(store_error(error))
            }
        }
    }

    fn abort(self: Box<Self>) -> Result<(), StoreError> {
        self.txn.abort().map_err(store_error)
    }
}

/// Gives every event of a ledger written by an earlier build (which kept no positions) a
/// position, once: ordered by time, then session, then seq, the closest to commit order
/// those rows still tell. Runs in the first write transaction that finds
/// [`POSITIONS_ASSIGNED`] missing, so the scan is paid once per ledger, never on an open;
/// every later transaction only reads that one key. Returns whether it wrote anything.
fn assign_positions(txn: &WriteTransaction, redo: &mut Vec<Put>) -> Result<bool, StoreError> {
    let mut meta = txn.open_table(META).map_err(store_error)?;
    if meta.get(POSITIONS_ASSIGNED).map_err(store_error)?.is_some() {
        return Ok(false);
    }
    let events = txn.open_table(EVENTS).map_err(store_error)?;
    let mut order: Vec<(u64, u128, u64)> = Vec::new();
    for row in events.iter().map_err(store_error)? {
        let (key, value) = row.map_err(store_error)?;
        let (session, seq) = key.value();
        // An undecodable row still gets a position (last); verify reports the row.
        let at = codec::decode_event_to_fold(value.value()).map_or(u64::MAX, |e| e.at);
        order.push((at, session, seq));
    }
    order.sort_unstable();
    let mut positions = txn.open_table(POSITIONS).map_err(store_error)?;
    let mut start = positions
        .last()
        .map_err(store_error)?
        .map_or(0, |(p, _)| p.value());
    let mut last_of: HashMap<u128, u64> = HashMap::new();
    for (_, session, seq) in order {
        start += 1;
        positions
            .insert(start, (session, seq))
            .map_err(store_error)?;
        redo.push(Put::Position {
            position: start,
            session,
            seq,
        });
        last_of.insert(session, start);
    }
    let mut heads = txn.open_table(HEADS).map_err(store_error)?;
    let mut rewritten = Vec::new();
    for row in heads.iter().map_err(store_error)? {
        let (key, value) = row.map_err(store_error)?;
        let mut head = tables::decode_head(value.value())?;
        if let Some(position) = last_of.get(&key.value()) {
            head.position = *position;
            rewritten.push((key.value(), tables::encode_head(&head)));
        }
    }
    for (key, bytes) in rewritten {
        heads.insert(key, bytes.as_slice()).map_err(store_error)?;
        redo.push(Put::Head {
            session: key,
            row: bytes,
        });
    }
    meta.insert(POSITIONS_ASSIGNED, 1).map_err(store_error)?;
    redo.push(Put::Meta {
        key: POSITIONS_ASSIGNED.to_string(),
        value: 1,
    });
    tracing::info!(
        events = start,
        "assigned ledger positions to the events of an earlier build"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    //! What only redb has: ledgers written by an earlier build.

    use super::*;
    use crate::event::{NewEvent, Payload, SessionKind};
    use crate::store::rules::{self, Batch, Plan};

    /// Builds, with redb alone, a ledger as the build before positions wrote it: four
    /// tables, heads without a position and summaries without a version. Each session is
    /// (id, [(at, thoughts)]): one batch per entry, the first starting it.
    fn earlier_build_ledger(path: &Path, sessions: &[(SessionId, Vec<u64>)]) {
        let db = open::builder().create(path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut events = txn.open_table(EVENTS).unwrap();
            let mut heads = txn.open_table(HEADS).unwrap();
            let mut ids = txn.open_table(EVENT_IDS).unwrap();
            txn.open_table(ALIASES).unwrap();
            for (session, batches) in sessions {
                let mut head: Option<SessionHead> = None;
                for (index, at) in batches.iter().enumerate() {
                    let payload = if index == 0 {
                        Payload::SessionStarted {
                            kind: SessionKind::THINKING,
                            title: "old".into(),
                            aliases: Vec::new(),
                        }
                    } else {
                        Payload::SessionClosed {
                            reason: format!("{index}"),
                        }
                    };
                    let batch = Batch::New {
                        session: *session,
                        expected_seq: head.as_ref().map_or(0, |h| h.seq),
                        at: *at,
                        events: vec![NewEvent::new(payload)],
                    };
                    let Plan::Write(plan) =
                        rules::plan_append(head.as_ref(), &Default::default(), batch).unwrap()
                    else {
                        panic!("a write")
                    };
                    for event in &plan.events {
                        let key = (session_key(*session), event.seq);
                        events
                            .insert(key, codec::encode_event(event).as_slice())
                            .unwrap();
                        ids.insert(event.id.0.0, key).unwrap();
                    }
                    head = Some(plan.head);
                }
                let mut json = serde_json::to_value(head.unwrap()).unwrap();
                json.as_object_mut().unwrap().remove("position");
                json["summary"].as_object_mut().unwrap().remove("version");
                heads
                    .insert(
                        session_key(*session),
                        serde_json::to_vec(&json).unwrap().as_slice(),
                    )
                    .unwrap();
            }
        }
        txn.commit().unwrap();
    }

    #[test]
    fn an_earlier_builds_ledger_opens_verifies_and_gets_positions_on_its_first_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.redb");
        let (a, b) = (SessionId::generate(), SessionId::generate());
        // Interleaved in time: a@10, b@20, a@30, b@40.
        earlier_build_ledger(&path, &[(a, vec![10, 30]), (b, vec![20, 40])]);
        let ledger = Ledger::open_file(&path).unwrap();
        assert_eq!(
            ledger.last_position().unwrap(),
            0,
            "no position before a write"
        );
        assert!(ledger.heads().unwrap().iter().all(|h| h.position == 0));
        assert!(ledger.events_from_position(0, 10).unwrap().is_empty());
        assert_eq!(ledger.verify_all().unwrap().len(), 2, "old rows verify");
        assert_eq!(ledger.head(a).unwrap().unwrap().summary.version, 1);

        // The first write assigns positions by time, then numbers its own after them.
        let appended = ledger
            .write_blocking(move |txn| {
                txn.append(
                    a,
                    2,
                    vec![NewEvent::new(Payload::SessionClosed {
                        reason: "new".into(),
                    })],
                )
            })
            .unwrap()
            .unwrap();
        assert_eq!(appended.head.position, 5);
        let order: Vec<(u64, SessionId, u64)> = ledger
            .events_from_position(0, 10)
            .unwrap()
            .into_iter()
            .map(|e| (e.position, e.event.session, e.event.seq))
            .collect();
        assert_eq!(
            order,
            [(1, a, 1), (2, b, 1), (3, a, 2), (4, b, 2), (5, a, 3)]
        );
        assert_eq!(ledger.head(b).unwrap().unwrap().position, 4);
        assert_eq!(ledger.verify_all().unwrap().len(), 2);
        drop(ledger);
        // Once: a second handle finds the positions there.
        let again = Ledger::open_file(&path).unwrap();
        assert_eq!(again.last_position().unwrap(), 5);
    }

    #[test]
    fn a_write_transaction_that_only_assigns_positions_commits_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.redb");
        let a = SessionId::generate();
        earlier_build_ledger(&path, &[(a, vec![10, 20, 30])]);
        let ledger = Ledger::open_file(&path).unwrap();
        // A job that appends nothing (a refused append) still carries the upkeep.
        let refused = ledger
            .write_blocking(move |txn| txn.append(a, 0, Vec::new()))
            .unwrap();
        assert!(refused.is_err());
        assert_eq!(ledger.last_position().unwrap(), 3);
        assert_eq!(ledger.head(a).unwrap().unwrap().position, 3);
    }

    /// One thought appended to `session` (started by its first call).
    fn append_one(ledger: &Ledger, session: SessionId, text: &str) {
        let text = text.to_string();
        ledger
            .write_blocking(move |txn| {
                let expected = txn.head(session)?.map_or(0, |h| h.seq);
                let mut batch = Vec::new();
                if expected == 0 {
                    batch.push(NewEvent::new(Payload::SessionStarted {
                        kind: SessionKind::THINKING,
                        title: "wal".into(),
                        aliases: Vec::new(),
                    }));
                }
                batch.push(NewEvent::new(Payload::SessionClosed { reason: text }));
                txn.append(session, expected, batch)
            })
            .unwrap()
            .unwrap();
    }

    #[test]
    fn a_ledger_of_the_build_before_the_redo_log_opens_and_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.redb");
        // As the previous build created it: the tables, no log, no log keys in meta.
        tables::create_all(&open::builder().create(&path).unwrap()).unwrap();
        let session = SessionId::generate();
        {
            let ledger = Ledger::open_file(&path).unwrap();
            append_one(&ledger, session, "first");
        }
        assert!(
            wal::log_path(&path).exists(),
            "the log appears beside the ledger"
        );
        let ledger = Ledger::open_file(&path).unwrap();
        append_one(&ledger, session, "second");
        assert_eq!(ledger.head(session).unwrap().unwrap().seq, 3);
        assert_eq!(ledger.verify_all().unwrap().len(), 1);
    }

    #[test]
    fn a_foreign_file_where_the_log_goes_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.redb");
        drop(Ledger::open_file(&path).unwrap());
        let log = wal::log_path(&path);
        std::fs::write(&log, vec![7u8; 8192]).unwrap();
        let error = Ledger::open_file(&path).err().expect("refused");
        assert!(error.to_string().contains("ledger.wal"), "{error}");
        assert_eq!(std::fs::read(&log).unwrap(), vec![7u8; 8192]);
    }
}
