//! What `verify` checks of a PostgreSQL ledger beyond its sessions' chains: the tables'
//! own agreement ([`ReadView::check_structure`] of [`PgRead`]).
//!
//! Owns: the checks of what no session's chain shows, each finding one line saying what is
//! wrong, where, and what to do: the position counter against the positions stored (set
//! back, every write fails on the position key), the position column (every event has
//! one, none twice, in seq order within each session), the key columns' shape, and the id
//! column against the event each row holds (a lookup by id, the idempotency of a retried
//! call, reads that column). Must not: report a session's own damage (a row that does not
//! decode or verify, a renumbered, moved or copied row, a row after the head, a head that
//! does not match its log, events without a head): the session checks name those, per
//! session, so that they stop writes to that session only; what is found here stops every
//! write. So the position and id checks look only at rows "in place": stored under the
//! session and seq the row itself holds, at or below its session's head.
//!
//! [`ReadView::check_structure`]: crate::store::contract::ReadView::check_structure

use super::database::session_of;
use super::read::{PgRead, SCAN_CHUNK_ROWS};
use crate::event::{Event, Families, SessionId};
use crate::store::{StoreError, codec};
use std::collections::HashMap;

/// Rows a finding names at most (the rest are counted): a table damaged throughout says
/// so in a few lines.
pub(crate) const NAMED_ROWS_PER_FINDING: usize = 5;

/// Rows out of position order the check reads at most (a position column damaged
/// throughout is named by its first ones).
pub(crate) const POSITION_ROWS_READ: i64 = 10_000;

/// What to do about damage to the tables' indexes, whose events are intact.
const REBUILD_ADVICE: &str = "every event is intact: `reasoning-ledger copy --to NEW_DIR|URL` \
     writes a new ledger with every column rebuilt from the events (or restore a backup)";

/// The rows of a finding, at most [`NAMED_ROWS_PER_FINDING`], and how many more.
fn listed(rows: &[String], total: usize) -> String {
    let mut text = rows.join(", ");
    if total > rows.len() {
        text.push_str(&format!(" and {} more", total - rows.len()));
    }
    text
}

/// `(session, seq)` of a row, as a finding names it.
fn row_name(session: &[u8], seq: i64) -> String {
    match session_of(session) {
        Ok(session) => format!("session {session} seq {seq}"),
        Err(_) => format!("a row with a malformed session key, seq {seq}"),
    }
}

/// The last seq of each session whose head row reads.
type HeadSeqs = HashMap<SessionId, u64>;

/// The event a row stored under (`session`, `seq`) holds, if the row is in place: it holds
/// that session's event of that seq, at or below the session's head. A row that is not is
/// its session's damage, which the session's chain check names.
fn in_place(
    heads: &HeadSeqs,
    session: &[u8],
    seq: i64,
    row: Option<&[u8]>,
    families: &Families,
) -> Option<Event> {
    let session = session_of(session).ok()?;
    let event = codec::decode_event_to_fold(row?, families).ok()?;
    let placed = event.session == session
        && i64::try_from(event.seq) == Ok(seq)
        && heads.get(&session).is_some_and(|head| event.seq <= *head);
    placed.then_some(event)
}

impl PgRead<'_> {
    /// Every check of this module, in order; empty when the tables agree.
    pub(super) fn structure(&self) -> Result<Vec<String>, StoreError> {
        let heads: HeadSeqs = self
            .decoded_heads()?
            .0
            .into_iter()
            .map(|head| (head.session, head.seq))
            .collect();
        let mut findings = Vec::new();
        self.counter(&mut findings)?;
        self.positions(&heads, &mut findings)?;
        self.keys(&mut findings)?;
        self.ids(&heads, &mut findings)?;
        Ok(findings)
    }

    /// The counter every write takes its positions after: below the highest stored
    /// position, every write fails on the position key.
    fn counter(&self, findings: &mut Vec<String>) -> Result<(), StoreError> {
        let row = self.with("checking the position counter", |c| {
            c.query_one(
                "WITH counter AS (SELECT last_position FROM ledger_counter WHERE id = 1) \
                 SELECT (SELECT last_position FROM counter), \
                        (SELECT max(position) FROM ledger_events), \
                        EXISTS (SELECT 1 FROM ledger_events \
                                WHERE position = (SELECT last_position FROM counter) + 1)",
                &[],
            )
        })?;
        let counter: Option<i64> = row.get(0);
        let highest: i64 = row.get::<_, Option<i64>>(1).unwrap_or(0);
        let next_held: bool = row.get(2);
        let fails = if next_held {
            "every write fails on the position key"
        } else {
            "a write fails on the position key once it reaches a position already held"
        };
        match counter {
            None => findings.push(format!(
                "table ledger_counter has no row: every write fails. Put it back (INSERT INTO \
                 ledger_counter (id, last_position) VALUES (1, {highest})); no event changes"
            )),
            Some(counter) if counter < highest => findings.push(format!(
                "ledger_counter.last_position is {counter} but events hold positions up to \
                 {highest}: {fails} (damage, not a conflict to retry). Set it to the highest \
                 (UPDATE ledger_counter SET last_position = {highest} WHERE id = 1); no event \
                 changes"
            )),
            Some(_) => {}
        }
        Ok(())
    }

    /// Every event has a position, none shares one, and within a session positions grow
    /// with seq (commit order): copies, cross-session history and search read events in
    /// position order.
    fn positions(&self, heads: &HeadSeqs, findings: &mut Vec<String>) -> Result<(), StoreError> {
        let row = self.with("checking the position column", |c| {
            c.query_one(
                "SELECT count(*) - count(position), count(position) - count(DISTINCT position) \
                 FROM ledger_events",
                &[],
            )
        })?;
        let (without, shared): (i64, i64) = (row.get(0), row.get(1));
        if without > 0 {
            findings.push(format!(
                "table ledger_events: {without} event row(s) have no position: copies, \
                 search and cross-session history do not see them; {REBUILD_ADVICE}"
            ));
        }
        if shared > 0 {
            findings.push(format!(
                "table ledger_events: {shared} position(s) are held by more than one event: \
                 copies, search and cross-session history see one of them; {REBUILD_ADVICE}"
            ));
        }
        let rows = self.with("checking the order of positions", |c| {
            c.query(
                "SELECT session, seq, position, before, row, before_row, before_seq FROM ( \
                   SELECT session, seq, position, row, \
                     lag(position) OVER (PARTITION BY session ORDER BY seq) AS before, \
                     lag(row) OVER (PARTITION BY session ORDER BY seq) AS before_row, \
                     lag(seq) OVER (PARTITION BY session ORDER BY seq) AS before_seq \
                   FROM ledger_events) AS x \
                 WHERE position <= before ORDER BY session, seq LIMIT $1",
                &[&POSITION_ROWS_READ],
            )
        })?;
        let mut named = Vec::new();
        let mut total = 0usize;
        for row in &rows {
            let (session, seq): (&[u8], i64) = (row.get(0), row.get(1));
            // Both rows in place: the positions were changed, not the rows.
            let before_seq: i64 = row.get(6);
            if in_place(heads, session, seq, row.get(4), &self.families).is_none()
                || in_place(heads, session, before_seq, row.get(5), &self.families).is_none()
            {
                continue;
            }
            total += 1;
            if named.len() < NAMED_ROWS_PER_FINDING {
                let (position, before): (i64, i64) = (row.get(2), row.get(3));
                named.push(format!(
                    "{} at position {position}, after {before}",
                    row_name(session, seq)
                ));
            }
        }
        if total > 0 {
            findings.push(format!(
                "table ledger_events: positions out of seq order ({}): a copy or search reads \
                 those events out of order; {REBUILD_ADVICE}",
                listed(&named, total)
            ));
        }
        Ok(())
    }

    /// Key columns of the shape every read expects (16 bytes).
    fn keys(&self, findings: &mut Vec<String>) -> Result<(), StoreError> {
        let row = self.with("checking the key columns", |c| {
            c.query_one(
                "SELECT (SELECT count(*) FROM ledger_events \
                         WHERE length(session) <> 16 OR length(id) <> 16), \
                        (SELECT count(*) FROM ledger_heads WHERE length(session) <> 16)",
                &[],
            )
        })?;
        let (events, heads): (i64, i64) = (row.get(0), row.get(1));
        if events > 0 {
            findings.push(format!(
                "table ledger_events: {events} row(s) with a session or id key that is not 16 \
                 bytes: no session reads them; `reasoning-ledger recover --to NEW_DIR|URL` \
                 salvages every event whose hash verifies, wherever it is stored"
            ));
        }
        if heads > 0 {
            findings.push(format!(
                "table ledger_heads: {heads} row(s) with a session key that is not 16 bytes: \
                 no session has them as its head; `reasoning-ledger recover --to NEW_DIR|URL` \
                 salvages every event whose hash verifies"
            ));
        }
        Ok(())
    }

    /// The id column of every row in place against the event the row holds (a row that
    /// does not decode or is not in place is its session's damage, left to the session
    /// check).
    fn ids(&self, heads: &HeadSeqs, findings: &mut Vec<String>) -> Result<(), StoreError> {
        let mut named = Vec::new();
        let mut total = 0usize;
        let mut after: Option<(Vec<u8>, i64)> = None;
        loop {
            let rows = self.with("checking the id column", |c| match &after {
                None => c.query(
                    "SELECT session, seq, id, row FROM ledger_events ORDER BY session, seq \
                     LIMIT $1",
                    &[&SCAN_CHUNK_ROWS],
                ),
                Some((session, seq)) => c.query(
                    "SELECT session, seq, id, row FROM ledger_events \
                     WHERE (session, seq) > ($1, $2) ORDER BY session, seq LIMIT $3",
                    &[session, seq, &SCAN_CHUNK_ROWS],
                ),
            })?;
            let full = rows.len() as i64 == SCAN_CHUNK_ROWS;
            for row in &rows {
                let (session, seq, id): (&[u8], i64, &[u8]) = (row.get(0), row.get(1), row.get(2));
                let bytes: &[u8] = row.get(3);
                if let Some(event) = in_place(heads, session, seq, Some(bytes), &self.families)
                    && id != event.id.0.0.to_be_bytes()
                {
                    total += 1;
                    if named.len() < NAMED_ROWS_PER_FINDING {
                        named.push(format!("{} is event {}", row_name(session, seq), event.id));
                    }
                }
                after = Some((session.to_vec(), seq));
            }
            if !full {
                break;
            }
        }
        if total > 0 {
            findings.push(format!(
                "table ledger_events: the id column does not name the event its row holds ({}): \
                 a lookup by id (a retried call's idempotency) misses or finds the wrong event; \
                 {REBUILD_ADVICE}",
                listed(&named, total)
            ));
        }
        Ok(())
    }
}
