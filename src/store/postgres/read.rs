//! The read view: one REPEATABLE READ transaction answering the store's queries.
//!
//! Owns: [`PgRead`] (the [`ReadView`] of a read transaction, and the read side of the
//! write transaction in [`super::append`]), the queries behind it (heads, aliases,
//! events by id, scans streamed in chunks of [`SCAN_CHUNK_ROWS`]; the keys rows are
//! stored under are [`super::database`]'s). One damaged row is one damaged session: a head row that does not decode
//! (or names another session), and events stored under a session without a head row, are
//! named by [`ReadView::heads_and_undecodable`] and left out of [`ReadView::heads`]; the
//! table-wide checks are `check_structure`'s. Must not: write, or end a transaction
//! other than by its `end`.

use super::connect::{Pooled, blocking};
use super::database::{key, session_key, session_of, to_i64};
use super::error::{connection_lost, query_error};
use crate::event::{Event, EventId, Families, SessionId};
use crate::store::contract::{Decode, PositionVisitor, ReadView, RowVisitor};
use crate::store::{SessionHead, StoreError, codec};
use postgres::Client;
use std::cell::{Cell, RefCell};

/// Rows one query of a scan fetches: scans stream in chunks of this many, so memory stays
/// flat however long a session is.
pub(crate) const SCAN_CHUNK_ROWS: i64 = 512;

/// A session head as stored (JSON, as redb stores it).
pub(super) fn decode_head(bytes: &[u8], families: &Families) -> Result<SessionHead, StoreError> {
    crate::store::decode_head_json(bytes, families)
        .map_err(|e| StoreError::Corrupt(format!("session head: {e}")))
}

/// The head row stored under `session`, or why it cannot be used (said to follow "its
/// head row cannot be read"): it does not decode, or it is another session's head (a row
/// copied over another).
fn head_of(session: SessionId, bytes: &[u8], families: &Families) -> Result<SessionHead, String> {
    let head = crate::store::decode_head_json(bytes, families)
        .map_err(|e| format!("it does not decode: {e}"))?;
    if head.session != session {
        return Err(format!(
            "it is the head of session {}, copied over this one's",
            head.session
        ));
    }
    Ok(head)
}

/// The sessions that hold events but have no head row, with how many events each holds:
/// one index probe per session (a loose index scan of the primary key), not a pass over
/// every event.
const HEADLESS_SQL: &str = "WITH RECURSIVE s(session) AS ( \
     (SELECT session FROM ledger_events ORDER BY session LIMIT 1) \
     UNION ALL \
     SELECT (SELECT e.session FROM ledger_events e WHERE e.session > s.session \
             ORDER BY e.session LIMIT 1) FROM s WHERE s.session IS NOT NULL) \
     SELECT s.session, (SELECT count(*) FROM ledger_events e WHERE e.session = s.session) \
     FROM s WHERE s.session IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM ledger_heads h WHERE h.session = s.session)";

/// A read transaction (REPEATABLE READ: one snapshot for every query of the view), or the
/// read side of the write transaction.
pub(super) struct PgRead<'p> {
    pub(super) conn: RefCell<Pooled<'p>>,
    /// A statement failed: PostgreSQL has aborted the transaction, so a COMMIT would
    /// quietly roll it back; commit reports it instead.
    pub(super) failed: Cell<bool>,
    /// A transaction is open on the connection (ended by commit/abort/drop).
    pub(super) open: Cell<bool>,
    /// What its rows decode with.
    pub(super) families: Families,
}

impl<'p> PgRead<'p> {
    /// A view over `conn`; `open`: a transaction is already begun on it.
    pub(super) fn new(conn: Pooled<'p>, open: bool, families: &Families) -> PgRead<'p> {
        PgRead {
            conn: RefCell::new(conn),
            failed: Cell::new(false),
            open: Cell::new(open),
            families: families.clone(),
        }
    }

    /// Runs `f` on the connection; a failure drops the connection from the pool (its
    /// transaction is gone) and becomes a [`StoreError`] saying what failed.
    pub(super) fn with<T>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.borrow_mut();
        match blocking(|| f(conn.get())) {
            Ok(value) => Ok(value),
            Err(error) => {
                self.failed.set(true);
                if error.is_closed() || connection_lost(&error) {
                    conn.discard();
                }
                Err(query_error(what)(error))
            }
        }
    }

    /// Ends the transaction (if one is open) with `sql` (`COMMIT` or `ROLLBACK`).
    pub(super) fn end(&mut self, sql: &str) -> Result<(), postgres::Error> {
        if !self.open.replace(false) {
            return Ok(());
        }
        let conn = self.conn.get_mut();
        if !conn.is_held() {
            return Ok(());
        }
        let result = blocking(|| conn.get().batch_execute(sql));
        if result.is_err() {
            conn.discard();
        }
        result
    }
}

impl Drop for PgRead<'_> {
    fn drop(&mut self) {
        let _ = self.end("ROLLBACK");
    }
}

impl PgRead<'_> {
    /// Every head row: those that decode, and the sessions of those that do not (a row
    /// whose key is not a session's is left to `check_structure`).
    #[allow(clippy::type_complexity)]
    pub(super) fn decoded_heads(
        &self,
    ) -> Result<(Vec<SessionHead>, Vec<(SessionId, String)>), StoreError> {
        let rows = self.with("reading session heads", |c| {
            c.query("SELECT session, head FROM ledger_heads", &[])
        })?;
        let mut heads = Vec::with_capacity(rows.len());
        let mut undecodable = Vec::new();
        for row in &rows {
            let Ok(session) = session_of(row.get::<_, &[u8]>(0)) else {
                continue;
            };
            match head_of(session, row.get::<_, &[u8]>(1), &self.families) {
                Ok(head) => heads.push(head),
                Err(why) => undecodable.push((session, why)),
            }
        }
        Ok((heads, undecodable))
    }
}

impl ReadView for PgRead<'_> {
    fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        let row = self.with("reading a session head", |c| {
            c.query_opt(
                "SELECT head FROM ledger_heads WHERE session = $1",
                &[&&session_key(session)[..]],
            )
        })?;
        row.map(|row| {
            head_of(session, row.get::<_, &[u8]>(0), &self.families).map_err(|why| {
                StoreError::Corrupt(format!("the head row of session {session}: {why}"))
            })
        })
        .transpose()
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        Ok(self.decoded_heads()?.0)
    }

    /// Every head row that decodes; then the sessions whose head row does not, and those
    /// whose events have no head row at all (a deleted head row: without this their events
    /// would be left out of every listing and export without a word).
    fn heads_and_undecodable(
        &self,
    ) -> Result<(Vec<SessionHead>, Vec<(SessionId, String)>), StoreError> {
        let (heads, mut undecodable) = self.decoded_heads()?;
        let rows = self.with("looking for events without a session head", |c| {
            c.query(HEADLESS_SQL, &[])
        })?;
        for row in &rows {
            // A session key that is not 16 bytes is named by `check_structure`.
            if let Ok(session) = session_of(row.get::<_, &[u8]>(0)) {
                let events: i64 = row.get(1);
                undecodable.push((
                    session,
                    format!("there is none, though {events} event(s) are stored under it"),
                ));
            }
        }
        Ok((heads, undecodable))
    }

    fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError> {
        let row = self.with("reading an alias", |c| {
            c.query_opt(
                "SELECT session FROM ledger_aliases WHERE alias = $1",
                &[&alias],
            )
        })?;
        row.map(|row| session_of(row.get::<_, &[u8]>(0)))
            .transpose()
    }

    fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<Vec<u8>> = ids.iter().map(|id| key(id.0.0).to_vec()).collect();
        let rows = self.with("reading events by id", |c| {
            c.query(
                "SELECT id, row FROM ledger_events WHERE id = ANY($1)",
                &[&keys],
            )
        })?;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            found.insert(
                row.get::<_, Vec<u8>>(0),
                codec::decode_event(row.get::<_, &[u8]>(1), &self.families)?,
            );
        }
        Ok(keys.iter().map(|k| found.remove(k)).collect())
    }

    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: Decode,
        visit: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        let Some(decode) = decode.scan(from_seq, to_seq) else {
            return Ok(());
        };
        let key = session_key(session);
        let mut from = to_i64(from_seq);
        let to = to_i64(to_seq);
        loop {
            let rows = self.with("reading a session's events", |c| {
                c.query(
                    "SELECT seq, row FROM ledger_events WHERE session = $1 AND seq >= $2 \
                     AND seq <= $3 ORDER BY seq LIMIT $4",
                    &[&&key[..], &from, &to, &SCAN_CHUNK_ROWS],
                )
            })?;
            let full = rows.len() as i64 == SCAN_CHUNK_ROWS;
            for row in &rows {
                let seq: i64 = row.get(0);
                if !visit(seq as u64, decode(row.get::<_, &[u8]>(1), &self.families)) {
                    return Ok(());
                }
                match seq.checked_add(1) {
                    Some(next) => from = next,
                    None => return Ok(()),
                }
            }
            if !full || from > to {
                return Ok(());
            }
        }
    }

    fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
        let mut after: Option<(Vec<u8>, i64)> = None;
        loop {
            let rows = self.with("reading every event", |c| match &after {
                None => c.query(
                    "SELECT session, seq, row FROM ledger_events ORDER BY session, seq LIMIT $1",
                    &[&SCAN_CHUNK_ROWS],
                ),
                Some((session, seq)) => c.query(
                    "SELECT session, seq, row FROM ledger_events WHERE (session, seq) > ($1, $2) \
                     ORDER BY session, seq LIMIT $3",
                    &[session, seq, &SCAN_CHUNK_ROWS],
                ),
            })?;
            let full = rows.len() as i64 == SCAN_CHUNK_ROWS;
            for row in &rows {
                if !visit(codec::decode_event(row.get::<_, &[u8]>(2), &self.families)?) {
                    return Ok(());
                }
                after = Some((row.get(0), row.get(1)));
            }
            if !full {
                return Ok(());
            }
        }
    }

    fn event_count(&self) -> Result<u64, StoreError> {
        let row = self.with("counting events", |c| {
            c.query_one("SELECT count(*) FROM ledger_events", &[])
        })?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    fn last_position(&self) -> Result<u64, StoreError> {
        let row = self.with("reading the last position", |c| {
            c.query_one("SELECT last_position FROM ledger_counter WHERE id = 1", &[])
        })?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    fn scan_positions(&self, from: u64, visit: &mut PositionVisitor<'_>) -> Result<(), StoreError> {
        let mut from = to_i64(from);
        loop {
            let rows = self.with("reading events by position", |c| {
                c.query(
                    "SELECT position, row FROM ledger_events WHERE position >= $1 \
                     ORDER BY position LIMIT $2",
                    &[&from, &SCAN_CHUNK_ROWS],
                )
            })?;
            let full = rows.len() as i64 == SCAN_CHUNK_ROWS;
            for row in &rows {
                let position: i64 = row.get(0);
                if !visit(
                    position as u64,
                    codec::decode_event(row.get::<_, &[u8]>(1), &self.families)?,
                ) {
                    return Ok(());
                }
                from = position + 1;
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// The tables' agreement beyond each session's chain ([`super::structure`]).
    fn check_structure(&self) -> Result<Vec<String>, StoreError> {
        self.structure()
    }
}
