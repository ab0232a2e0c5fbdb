//! redb's tables and the byte encoding of their rows.
//!
//! - `events`: (session, seq) → the event envelope ([`crate::store::codec`]: binary, or
//!   JSON for rows written by earlier builds).
//! - `heads`: session → [`SessionHead`] as JSON (last seq, hash, position, folded summary).
//! - `event_ids`: event id → (session, seq), for idempotent appends.
//! - `aliases`: alias text → session, for ids a caller chose.
//! - `positions`: ledger-wide position → (session, seq), in commit order.
//! - `meta`: named numbers; [`POSITIONS_ASSIGNED`] says every event has a position,
//!   [`WAL_ID`] and [`WAL_LSN`] which redo log this ledger writes to and the last record of
//!   it the tables hold ([`super::wal`]).
//!
//! `positions` and `meta` are newer than the other four: a ledger written by an earlier
//! build lacks them until its first write transaction creates them (and assigns positions
//! to the events already there, see [`super::RedbWrite`]).

use crate::event::{Event, Families, SessionId};
use crate::store::{SessionHead, StoreError};
use redb::{Database, ReadableTable, TableDefinition};

pub(super) const EVENTS: TableDefinition<(u128, u64), &[u8]> = TableDefinition::new("events");
pub(super) const HEADS: TableDefinition<u128, &[u8]> = TableDefinition::new("heads");
pub(super) const EVENT_IDS: TableDefinition<u128, (u128, u64)> = TableDefinition::new("event_ids");
pub(super) const ALIASES: TableDefinition<&str, u128> = TableDefinition::new("aliases");
pub(super) const POSITIONS: TableDefinition<u64, (u128, u64)> = TableDefinition::new("positions");
pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// `meta` key: present (value 1) once every event of the ledger has a position.
pub(super) const POSITIONS_ASSIGNED: &str = "positions_assigned";

/// `meta` key: the id of the redo log ([`super::wal::Wal::id`]) this ledger writes to.
pub(super) const WAL_ID: &str = "wal_id";

/// `meta` key: the lsn of the last redo log record whose writes the tables hold.
pub(super) const WAL_LSN: &str = "wal_lsn";

pub(super) fn session_key(session: SessionId) -> u128 {
    session.0.0
}

pub(super) fn session_of(key: u128) -> SessionId {
    SessionId(ulid::Ulid(key))
}

/// Creates every table so readers never meet a missing one, and marks the new ledger's
/// positions as assigned (it has no event without one).
pub(super) fn create_all(db: &Database) -> Result<(), redb::Error> {
    let txn = db.begin_write()?;
    txn.open_table(EVENTS)?;
    txn.open_table(HEADS)?;
    txn.open_table(EVENT_IDS)?;
    txn.open_table(ALIASES)?;
    txn.open_table(POSITIONS)?;
    txn.open_table(META)?.insert(POSITIONS_ASSIGNED, 1)?;
    txn.commit()?;
    Ok(())
}

pub(super) fn decode_event(bytes: &[u8], families: &Families) -> Result<Event, StoreError> {
    crate::store::codec::decode_event(bytes, families)
}

pub(super) fn decode_head(bytes: &[u8], families: &Families) -> Result<SessionHead, StoreError> {
    crate::store::decode_head_json(bytes, families)
        .map_err(|e| StoreError::Corrupt(format!("session head: {e}")))
}

/// Room a head row starts with (a thinking session's is ~300 bytes): grown at most once.
const HEAD_ROW_BYTES: usize = 512;

pub(super) fn encode_head(head: &SessionHead) -> Vec<u8> {
    let mut row = Vec::with_capacity(HEAD_ROW_BYTES);
    serde_json::to_writer(&mut row, head).expect("heads always serialize");
    row
}

pub(super) fn read_head(
    heads: &impl ReadableTable<u128, &'static [u8]>,
    session: SessionId,
    families: &Families,
) -> Result<Option<SessionHead>, StoreError> {
    match heads
        .get(session_key(session))
        .map_err(super::store_error)?
    {
        Some(value) => Ok(Some(decode_head(value.value(), families)?)),
        None => Ok(None),
    }
}
