//! The redb write transaction ([`RedbWrite`]): appends and heads written through tables it
//! opens once, the rows it wrote kept for the redo log, and its commit.
//!
//! Opening a table is a lookup of its definition in redb's table tree, and its close at
//! the end of each use a write of its root back there: a group's jobs would pay both for
//! the same four tables on every append and every idempotency lookup (about a fifth of a
//! call's instructions). So the transaction opens `events`, `event_ids`, `positions` and
//! `heads` at their first use and holds them until it commits ([`HeldTables`], owned
//! beside the transaction through `self_cell`); every read and write of the view goes
//! through them. `aliases` and `meta` are opened where they are used (rarely).
//!
//! Must not: reach a held table while it is in use further up the same call (a visitor
//! that reads the table it is visiting gets [`StoreError::Backend`], not a second handle).

use super::read;
use super::tables::{self, ALIASES, EVENT_IDS, EVENTS, HEADS, POSITIONS, session_key};
use super::wal::{Log, Put};
use super::{codec, store_error};
use crate::event::{Event, EventId, Families, SessionId};
use crate::store::contract::{
    AppendPlan, Decode, PositionVisitor, ReadView, RowVisitor, WriteView,
};
use crate::store::{SessionHead, StoreError};
use ::redb::{
    Durability, ReadableTableMetadata, Table, TableDefinition, TableHandle, WriteTransaction,
};
use std::cell::{RefCell, RefMut};
use std::collections::HashMap;
use std::sync::Arc;

type EventsTable<'t> = Table<'t, (u128, u64), &'static [u8]>;
type EventIdsTable<'t> = Table<'t, u128, (u128, u64)>;
type PositionsTable<'t> = Table<'t, u64, (u128, u64)>;
type HeadsTable<'t> = Table<'t, u128, &'static [u8]>;

/// The tables a write transaction opened, each at its first use.
pub(super) struct HeldTables<'t> {
    events: RefCell<Option<EventsTable<'t>>>,
    event_ids: RefCell<Option<EventIdsTable<'t>>>,
    positions: RefCell<Option<PositionsTable<'t>>>,
    heads: RefCell<Option<HeadsTable<'t>>>,
}

self_cell::self_cell!(
    /// A write transaction and the tables it holds open.
    struct HeldTxn {
        owner: WriteTransaction,
        #[not_covariant]
        dependent: HeldTables,
    }
);

/// The slot of a held table, opened in it if it is empty. A slot already borrowed (a
/// visitor reaching the table it visits) is an error, never a second handle.
fn held<'s, 't, K: ::redb::Key + 'static, V: ::redb::Value + 'static>(
    txn: &'t WriteTransaction,
    slot: &'s RefCell<Option<Table<'t, K, V>>>,
    table: TableDefinition<K, V>,
) -> Result<RefMut<'s, Table<'t, K, V>>, StoreError> {
    let mut slot = slot.try_borrow_mut().map_err(|_| {
        StoreError::backend(std::io::Error::other(format!(
            "the {} table is in use further up this call",
            table.name()
        )))
    })?;
    if slot.is_none() {
        *slot = Some(txn.open_table(table).map_err(store_error)?);
    }
    Ok(RefMut::map(slot, |slot| {
        slot.as_mut().expect("opened above")
    }))
}

/// The redb write transaction.
pub(super) struct RedbWrite {
    cell: HeldTxn,
    /// Something was written (rows, a head, positions assigned at the start).
    changed: bool,
    /// Every row written, in order: the commit's redo log record.
    redo: Vec<Put>,
    log: Arc<Log>,
    /// What this transaction has read or written of the heads and the last position, so a
    /// group's jobs (each reads its head twice, and appends after the last position) do not
    /// decode the same head row or walk to the last position again.
    seen: RefCell<Seen>,
    /// What its rows decode with.
    families: Families,
}

/// [`RedbWrite`]'s memory of its own reads and writes; it lives as long as the transaction.
#[derive(Default)]
struct Seen {
    heads: HashMap<u128, Option<SessionHead>>,
    last_position: Option<u64>,
}

impl RedbWrite {
    /// The view over `txn`, which has already written `redo` (`changed`: positions assigned).
    pub(super) fn new(
        txn: WriteTransaction,
        changed: bool,
        redo: Vec<Put>,
        log: Arc<Log>,
        families: Families,
    ) -> RedbWrite {
        RedbWrite {
            cell: HeldTxn::new(txn, |_| HeldTables {
                events: RefCell::new(None),
                event_ids: RefCell::new(None),
                positions: RefCell::new(None),
                heads: RefCell::new(None),
            }),
            changed,
            redo,
            log,
            seen: RefCell::default(),
            families,
        }
    }

    fn with_events<R>(
        &self,
        f: impl FnOnce(&mut EventsTable<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        self.cell
            .with_dependent(|txn, tables| f(&mut *held(txn, &tables.events, EVENTS)?))
    }

    fn with_heads<R>(
        &self,
        f: impl FnOnce(&mut HeadsTable<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        self.cell
            .with_dependent(|txn, tables| f(&mut *held(txn, &tables.heads, HEADS)?))
    }

    fn with_positions<R>(
        &self,
        f: impl FnOnce(&mut PositionsTable<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        self.cell
            .with_dependent(|txn, tables| f(&mut *held(txn, &tables.positions, POSITIONS)?))
    }

    fn with_event_ids<R>(
        &self,
        f: impl FnOnce(&mut EventIdsTable<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        self.cell
            .with_dependent(|txn, tables| f(&mut *held(txn, &tables.event_ids, EVENT_IDS)?))
    }
}

impl ReadView for RedbWrite {
    fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        let key = session_key(session);
        if let Some(head) = self.seen.borrow().heads.get(&key) {
            return Ok(head.clone());
        }
        let head = self.with_heads(|heads| tables::read_head(&*heads, session, &self.families))?;
        self.seen.borrow_mut().heads.insert(key, head.clone());
        Ok(head)
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        self.with_heads(|heads| read::heads(&*heads, &self.families))
    }

    fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError> {
        let aliases = self
            .cell
            .borrow_owner()
            .open_table(ALIASES)
            .map_err(store_error)?;
        read::alias(&aliases, alias)
    }

    fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        let locations = self.with_event_ids(|index| read::event_locations(&*index, ids))?;
        if locations.iter().all(Option::is_none) {
            return Ok(vec![None; ids.len()]);
        }
        self.with_events(|events| read::events_at(&*events, ids, &locations, &self.families))
    }

    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: Decode,
        visit: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.with_events(|events| {
            read::scan_session(
                &*events,
                session,
                from_seq,
                to_seq,
                decode,
                &self.families,
                visit,
            )
        })
    }

    fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
        self.with_events(|events| read::scan_all(&*events, &self.families, visit))
    }

    fn event_count(&self) -> Result<u64, StoreError> {
        self.with_events(|events| events.len().map_err(store_error))
    }

    fn last_position(&self) -> Result<u64, StoreError> {
        if let Some(position) = self.seen.borrow().last_position {
            return Ok(position);
        }
        let position = self.with_positions(|positions| read::last_position(&*positions))?;
        self.seen.borrow_mut().last_position = Some(position);
        Ok(position)
    }

    fn scan_positions(&self, from: u64, visit: &mut PositionVisitor<'_>) -> Result<(), StoreError> {
        self.with_positions(|positions| {
            self.with_events(|events| {
                read::scan_positions(&*positions, &*events, from, &self.families, visit)
            })
        })
    }
}

impl WriteView for RedbWrite {
    fn append(&mut self, plan: &AppendPlan) -> Result<u64, StoreError> {
        self.changed = true;
        let key = session_key(plan.head.session);
        let first = self.last_position()?;
        let mut redo = Vec::with_capacity(plan.events.len() * 3);
        let position = self.with_events(|rows| {
            self.with_event_ids(|ids| {
                self.with_positions(|positions| {
                    let mut position = first;
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
                        redo.push(Put::Event {
                            session: key,
                            seq: event.seq,
                            row: bytes,
                        });
                        redo.push(Put::EventId {
                            id: event.id.0.0,
                            session: key,
                            seq: event.seq,
                        });
                        redo.push(Put::Position {
                            position,
                            session: key,
                            seq: event.seq,
                        });
                    }
                    Ok(position)
                })
            })
        })?;
        self.redo.append(&mut redo);
        self.seen.get_mut().last_position = Some(position);
        let head = SessionHead {
            position,
            ..plan.head.clone()
        };
        self.put_head(&head)?;
        if plan.aliases.is_empty() {
            return Ok(position);
        }
        let mut aliases = self
            .cell
            .borrow_owner()
            .open_table(ALIASES)
            .map_err(store_error)?;
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
        let row = tables::encode_head(head);
        self.with_heads(|heads| {
            heads
                .insert(session_key(head.session), row.as_slice())
                .map(|_| ())
                .map_err(store_error)
        })?;
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
            cell, redo, log, ..
        } = *self;
        // The held tables close here (each writes its root back), before the commit.
        let mut txn = cell.into_owner();
        let mut wal = log.lock();
        let lsn = wal.last_lsn() + 1;
        let record = wal.encode(lsn, &redo);
        if !wal.fits(&record) {
            return super::commit_checkpoint(txn, &log, &mut wal, lsn);
        }
        if let Err(error) = wal.write(&record) {
            let _ = txn.abort();
            return Err(error);
        }
        txn.set_durability(Durability::None).map_err(store_error)?;
        match txn.commit() {
            Ok(()) => {
                wal.advance(lsn, record.len());
                Ok(())
            }
            Err(error) => {
                log.set_must_recover(true);
                Err(store_error(error))
            }
        }
    }

    fn abort(self: Box<Self>) -> Result<(), StoreError> {
        self.cell.into_owner().abort().map_err(store_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{NewEvent, Payload, SessionKind};
    use crate::store::Ledger;

    /// A visitor that reaches the table it is visiting gets an error, not a panic or a
    /// second handle, and the transaction goes on.
    #[test]
    fn a_visitor_reaching_the_table_it_visits_gets_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path(), crate::tools::families()).unwrap();
        let session = SessionId::generate();
        let start = NewEvent::new(Payload::SessionStarted {
            kind: SessionKind::THINKING,
            title: "t".into(),
            aliases: Vec::new(),
        });
        ledger
            .write_blocking(move |txn| txn.append(session, 0, vec![start]))
            .unwrap()
            .unwrap();
        let (nested, after) = ledger
            .write_blocking(move |txn| {
                let view = txn.backend();
                let mut nested = None;
                view.scan_session(session, 0, u64::MAX, Decode::Full, &mut |_, _| {
                    nested = Some(view.event_count());
                    false
                })
                .unwrap();
                (nested, view.event_count())
            })
            .unwrap();
        let error = nested.expect("the visitor ran").unwrap_err();
        assert!(error.to_string().contains("events"), "{error}");
        assert_eq!(after.unwrap(), 1);
    }
}
