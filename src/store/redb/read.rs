//! The read side of the redb backend: each read written once over any redb table kind
//! (a read transaction's, or a write transaction's held tables, see [`super::write`]), and
//! [`RedbRead`], the read snapshot.
//!
//! Owns: how each [`ReadView`] read walks the tables. Must not: write, or decide anything a
//! rule decides (a missing head is `None` here; what it means is the store facade's).

use super::store_error;
use super::tables::{
    self, ALIASES, EVENT_IDS, EVENTS, HEADS, META, POSITIONS, session_key, session_of,
};
use crate::event::{Event, EventId, Families, SessionId};
use crate::store::contract::{Decode, PositionVisitor, ReadView, RowVisitor};
use crate::store::damage::catch_quietly;
use crate::store::{SessionHead, StoreError};
use ::redb::{ReadTransaction, ReadableTable, ReadableTableMetadata, TableDefinition, TableError};

/// `events`: (session, seq) → row.
pub(super) trait EventRows:
    ReadableTable<(u128, u64), &'static [u8]> + ReadableTableMetadata
{
}
impl<T: ReadableTable<(u128, u64), &'static [u8]> + ReadableTableMetadata> EventRows for T {}

/// `heads`: session → head row.
pub(super) trait HeadRows: ReadableTable<u128, &'static [u8]> {}
impl<T: ReadableTable<u128, &'static [u8]>> HeadRows for T {}

/// `event_ids` (id → where) and `positions` (position → where).
pub(super) trait Locations<K: ::redb::Key + 'static>: ReadableTable<K, (u128, u64)> {}
impl<K: ::redb::Key + 'static, T: ReadableTable<K, (u128, u64)>> Locations<K> for T {}

/// Every head row that decodes (one that does not is left out here and named by
/// [`heads_and_undecodable`], so one damaged row does not hide every session).
pub(super) fn heads(
    heads: &impl HeadRows,
    families: &Families,
) -> Result<Vec<SessionHead>, StoreError> {
    Ok(heads_and_undecodable(heads, families)?.0)
}

/// Every head row that decodes, and the sessions whose head row does not, with why: one
/// pass over the table.
#[allow(clippy::type_complexity)]
pub(super) fn heads_and_undecodable(
    heads: &impl HeadRows,
    families: &Families,
) -> Result<(Vec<SessionHead>, Vec<(SessionId, String)>), StoreError> {
    let mut decoded = Vec::new();
    let mut undecodable = Vec::new();
    for row in heads.iter().map_err(store_error)? {
        let (key, value) = row.map_err(store_error)?;
        match tables::decode_head(value.value(), families) {
            Ok(head) => decoded.push(head),
            Err(error) => undecodable.push((session_of(key.value()), error.to_string())),
        }
    }
    Ok((decoded, undecodable))
}

pub(super) fn alias(
    aliases: &impl ReadableTable<&'static str, u128>,
    alias: &str,
) -> Result<Option<SessionId>, StoreError> {
    Ok(aliases
        .get(alias)
        .map_err(store_error)?
        .map(|v| session_of(v.value())))
}

/// Where each id's event is stored (`None` where it is not).
pub(super) fn event_locations(
    index: &impl Locations<u128>,
    ids: &[EventId],
) -> Result<Vec<Option<(u128, u64)>>, StoreError> {
    ids.iter()
        .map(|id| Ok(index.get(id.0.0).map_err(store_error)?.map(|l| l.value())))
        .collect()
}

/// The events at `locations` (`None` stays `None`).
pub(super) fn events_at(
    events: &impl EventRows,
    ids: &[EventId],
    locations: &[Option<(u128, u64)>],
    families: &Families,
) -> Result<Vec<Option<Event>>, StoreError> {
    ids.iter()
        .zip(locations)
        .map(|(id, location)| {
            let Some(location) = location else {
                return Ok(None);
            };
            let row = events
                .get(*location)
                .map_err(store_error)?
                .ok_or_else(|| StoreError::Corrupt(format!("event id {id} has no row")))?;
            Ok(Some(tables::decode_event(row.value(), families)?))
        })
        .collect()
}

pub(super) fn scan_session(
    events: &impl EventRows,
    session: SessionId,
    from_seq: u64,
    to_seq: u64,
    decode: Decode,
    families: &Families,
    visit: &mut RowVisitor<'_>,
) -> Result<(), StoreError> {
    // An empty range visits nothing (and a reversed one is not a range redb takes).
    let Some(decode) = decode.scan(from_seq, to_seq) else {
        return Ok(());
    };
    let key = session_key(session);
    for row in events
        .range((key, from_seq)..=(key, to_seq))
        .map_err(store_error)?
    {
        let (stored_key, value) = row.map_err(store_error)?;
        if !visit(stored_key.value().1, decode(value.value(), families)) {
            break;
        }
    }
    Ok(())
}

pub(super) fn scan_all(
    events: &impl EventRows,
    families: &Families,
    visit: &mut dyn FnMut(Event) -> bool,
) -> Result<(), StoreError> {
    for row in events.iter().map_err(store_error)? {
        let (_, value) = row.map_err(store_error)?;
        if !visit(tables::decode_event(value.value(), families)?) {
            break;
        }
    }
    Ok(())
}

pub(super) fn last_position(positions: &impl Locations<u64>) -> Result<u64, StoreError> {
    Ok(positions
        .last()
        .map_err(store_error)?
        .map_or(0, |(position, _)| position.value()))
}

pub(super) fn scan_positions(
    positions: &impl Locations<u64>,
    events: &impl EventRows,
    from: u64,
    families: &Families,
    visit: &mut PositionVisitor<'_>,
) -> Result<(), StoreError> {
    for row in positions.range(from..).map_err(store_error)? {
        let (position, location) = row.map_err(store_error)?;
        let (position, location) = (position.value(), location.value());
        let row = events
            .get(location)
            .map_err(store_error)?
            .ok_or_else(|| StoreError::Corrupt(format!("position {position} has no event row")))?;
        if !visit(position, tables::decode_event(row.value(), families)?) {
            break;
        }
    }
    Ok(())
}

/// A redb read transaction.
pub(super) struct RedbRead {
    pub(super) txn: ReadTransaction,
    /// What its rows decode with.
    pub(super) families: Families,
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

impl ReadView for RedbRead {
    fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        match self.open(HEADS)? {
            Some(heads) => tables::read_head(&heads, session, &self.families),
            None => Ok(None),
        }
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        match self.open(HEADS)? {
            Some(rows) => heads(&rows, &self.families),
            None => Ok(Vec::new()),
        }
    }

    fn heads_and_undecodable(
        &self,
    ) -> Result<(Vec<SessionHead>, Vec<(SessionId, String)>), StoreError> {
        match self.open(HEADS)? {
            Some(rows) => heads_and_undecodable(&rows, &self.families),
            None => Ok((Vec::new(), Vec::new())),
        }
    }

    fn alias(&self, text: &str) -> Result<Option<SessionId>, StoreError> {
        match self.open(ALIASES)? {
            Some(aliases) => alias(&aliases, text),
            None => Ok(None),
        }
    }

    fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        let Some(index) = self.open(EVENT_IDS)? else {
            return Ok(vec![None; ids.len()]);
        };
        let locations = event_locations(&index, ids)?;
        if locations.iter().all(Option::is_none) {
            return Ok(vec![None; ids.len()]);
        }
        match self.open(EVENTS)? {
            Some(events) => events_at(&events, ids, &locations, &self.families),
            None => Ok(vec![None; ids.len()]),
        }
    }

    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: Decode,
        visit: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        match self.open(EVENTS)? {
            Some(events) => scan_session(
                &events,
                session,
                from_seq,
                to_seq,
                decode,
                &self.families,
                visit,
            ),
            None => Ok(()),
        }
    }

    fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
        match self.open(EVENTS)? {
            Some(events) => scan_all(&events, &self.families, visit),
            None => Ok(()),
        }
    }

    fn event_count(&self) -> Result<u64, StoreError> {
        match self.open(EVENTS)? {
            Some(events) => events.len().map_err(store_error),
            None => Ok(0),
        }
    }

    fn last_position(&self) -> Result<u64, StoreError> {
        match self.open(POSITIONS)? {
            Some(positions) => last_position(&positions),
            None => Ok(0),
        }
    }

    fn scan_positions(&self, from: u64, visit: &mut PositionVisitor<'_>) -> Result<(), StoreError> {
        let (Some(positions), Some(events)) = (self.open(POSITIONS)?, self.open(EVENTS)?) else {
            return Ok(());
        };
        scan_positions(&positions, &events, from, &self.families, visit)
    }

    /// Reads every row of every table, each table on its own (a table whose pages cannot
    /// be read is one finding, and the others are still walked), then compares the
    /// indexes' sizes with the events table's.
    fn check_structure(&self) -> Result<Vec<String>, StoreError> {
        let mut findings = Vec::new();
        let mut rows = std::collections::BTreeMap::new();
        let mut walk =
            |name: &'static str, count: &dyn Fn() -> Result<u64, StoreError>| match catch_quietly(
                count,
            ) {
                Ok(Ok(n)) => {
                    rows.insert(name, n);
                }
                Ok(Err(error)) => findings.push(format!("table {name}: {error}")),
                Err(message) => {
                    findings.push(format!("table {name}: a page cannot be read ({message})"))
                }
            };
        walk("events", &|| self.walk(EVENTS));
        walk("heads", &|| self.walk(HEADS));
        walk("event_ids", &|| self.walk(EVENT_IDS));
        walk("aliases", &|| self.walk(ALIASES));
        walk("positions", &|| self.walk(POSITIONS));
        walk("meta", &|| self.walk(META));
        if let (Some(events), Some(ids)) = (rows.get("events"), rows.get("event_ids"))
            && events != ids
        {
            findings.push(format!(
                "table event_ids holds {ids} row(s) for {events} event(s)"
            ));
        }
        if let (Some(events), Some(positions)) = (rows.get("events"), rows.get("positions"))
            && *positions > *events
        {
            findings.push(format!(
                "table positions holds {positions} row(s) for {events} event(s)"
            ));
        }
        Ok(findings)
    }
}

impl RedbRead {
    /// Reads every key and value of `table` (their bytes, decoding nothing of ours); the
    /// rows it holds.
    fn walk<K: ::redb::Key + 'static, V: ::redb::Value + 'static>(
        &self,
        table: TableDefinition<K, V>,
    ) -> Result<u64, StoreError> {
        let Some(table) = self.open(table)? else {
            return Ok(0);
        };
        let mut rows = 0;
        for row in table.iter().map_err(store_error)? {
            let (key, value) = row.map_err(store_error)?;
            std::hint::black_box((
                K::as_bytes(&key.value()).as_ref().len(),
                V::as_bytes(&value.value()).as_ref().len(),
            ));
            rows += 1;
        }
        Ok(rows)
    }
}
