//! Table definitions and the byte encoding of rows.
//!
//! - `events`: (session, seq) → the event envelope ([`super::codec`]: binary, or JSON for
//!   rows written by earlier builds).
//! - `heads`: session → [`SessionHead`] as JSON (last seq, hash, folded summary).
//! - `event_ids`: event id → (session, seq), for idempotent appends.
//! - `aliases`: alias text → session, for ids a caller chose.

use super::{SessionHead, StoreError};
use crate::event::{Event, SessionId};
use redb::{Database, ReadableTable, TableDefinition};

pub const EVENTS: TableDefinition<(u128, u64), &[u8]> = TableDefinition::new("events");
pub const HEADS: TableDefinition<u128, &[u8]> = TableDefinition::new("heads");
pub const EVENT_IDS: TableDefinition<u128, (u128, u64)> = TableDefinition::new("event_ids");
pub const ALIASES: TableDefinition<&str, u128> = TableDefinition::new("aliases");

pub fn session_key(session: SessionId) -> u128 {
    session.0.0
}

/// Creates every table so readers never meet a missing one.
pub fn create_all(db: &Database) -> Result<(), redb::Error> {
    let txn = db.begin_write()?;
    txn.open_table(EVENTS)?;
    txn.open_table(HEADS)?;
    txn.open_table(EVENT_IDS)?;
    txn.open_table(ALIASES)?;
    txn.commit()?;
    Ok(())
}

pub fn decode_event(bytes: &[u8]) -> Result<Event, StoreError> {
    super::codec::decode_event(bytes)
}

pub fn decode_head(bytes: &[u8]) -> Result<SessionHead, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("session head: {e}")))
}

pub fn read_head(
    heads: &impl ReadableTable<u128, &'static [u8]>,
    session: SessionId,
) -> Result<Option<SessionHead>, StoreError> {
    match heads
        .get(session_key(session))
        .map_err(StoreError::from_redb)?
    {
        Some(value) => Ok(Some(decode_head(value.value())?)),
        None => Ok(None),
    }
}

/// Finds a session by its id (if it has a head) or by an alias recorded when it started.
pub fn resolve(
    heads: &impl ReadableTable<u128, &'static [u8]>,
    aliases: &impl ReadableTable<&'static str, u128>,
    text: &str,
) -> Result<Option<SessionId>, StoreError> {
    if let Ok(id) = text.parse::<SessionId>()
        && heads
            .get(session_key(id))
            .map_err(StoreError::from_redb)?
            .is_some()
    {
        return Ok(Some(id));
    }
    Ok(aliases
        .get(text)
        .map_err(StoreError::from_redb)?
        .map(|v| SessionId(ulid::Ulid(v.value()))))
}
