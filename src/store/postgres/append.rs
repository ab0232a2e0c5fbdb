//! The write view: one write transaction per group commit of the writer thread.
//!
//! Owns: [`PgWrite`] (the [`WriteView`], and the reads a write transaction makes), the
//! literal SQL it sends (numbers and hex only, never caller text), the writes waiting for
//! the next message ([`Pending`]), and what a failed statement means for the commit.
//! Must not: hold an append rule (the store's facade plans every append) or open a
//! connection other than through the pool.

use super::connect::{Pooled, blocking};
use super::database::{key, session_key, to_i64};
use super::error::{PgError, connection_lost, query_error, refusal, refused};
use super::read::{PgRead, decode_head};
use super::schema;
use super::verdicts::{verdicts_of, verdicts_sql};
use crate::event::{Event, EventId, Families, SessionId};
use crate::store::contract::{
    AppendPlan, Decode, PositionVisitor, ReadView, RowVisitor, WriteView,
};
use crate::store::damage::Damage;
use crate::store::{SessionHead, StoreError, codec};
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// A session head as stored (JSON, as redb stores it).
fn encode_head(head: &SessionHead) -> Vec<u8> {
    serde_json::to_vec(head).expect("heads always serialize")
}

/// The write transaction: READ COMMITTED after taking the counter's row lock, so every
/// statement sees every commit before it and no other server writes until this one ends.
///
/// Round trips: an append group costs two when its jobs read only what an append needs
/// (`BEGIN`, the counter lock and the first reads in one simple-query message; the
/// writes, the counter, `pg_notify` and `COMMIT` in another). The transaction is begun
/// with the first statement it sends, and writes wait in `pending` until the next
/// message goes: a read sends them first (so it sees them), the commit sends them with
/// the `COMMIT`. Statements are literal SQL whose only values are numbers and hex
/// (`decode('…', 'hex')`): never caller text. A statement that fails makes PostgreSQL
/// skip the rest of its message, `COMMIT` included, and fails the transaction
/// (`failed`): the commit then reports that error instead of committing anything.
pub(super) struct PgWrite<'p> {
    read: PgRead<'p>,
    /// The last position at the start of the transaction (known once begun).
    last: Cell<u64>,
    /// The last position including this transaction's appends.
    counted: Cell<u64>,
    changed: bool,
    channel: Arc<str>,
    /// Written statements not sent yet, each ending with `;`.
    pending: RefCell<Pending>,
    /// The first error of a statement of this transaction (what commit reports).
    error: RefCell<Option<StoreError>>,
    /// Heads read or written in this transaction. It holds the ledger's write lock, so
    /// no one else changes a head meanwhile: a job's second look at a head (its target,
    /// then the append rules) costs no round trip.
    heads: RefCell<std::collections::HashMap<SessionId, Option<SessionHead>>>,
    /// Told the lasting damage verdicts read with the `BEGIN`.
    damage: Option<Damage>,
}

/// The bytes of hex `text` (what `encode(…, 'hex')` answers).
fn unhex(text: &str) -> Result<Vec<u8>, StoreError> {
    hex::decode(text).map_err(|error| {
        StoreError::Corrupt(match error {
            hex::FromHexError::OddLength => "a hex value of odd length".into(),
            _ => "a value that is not hex".into(),
        })
    })
}

/// A bytea literal of `bytes`.
fn bytea(bytes: &[u8]) -> String {
    format!("decode('{}','hex')", hex::encode(bytes))
}

/// The rows of each statement of a simple-query message, in order.
fn statements(messages: Vec<postgres::SimpleQueryMessage>) -> Vec<Vec<postgres::SimpleQueryRow>> {
    let mut all = Vec::new();
    let mut rows = Vec::new();
    for message in messages {
        match message {
            postgres::SimpleQueryMessage::Row(row) => rows.push(row),
            postgres::SimpleQueryMessage::CommandComplete(_) => all.push(std::mem::take(&mut rows)),
            _ => {}
        }
    }
    all
}

/// Column `index` of `row` as bytes (the query selected it with `encode(…, 'hex')`).
fn hex_column(row: &postgres::SimpleQueryRow, index: usize) -> Result<Vec<u8>, StoreError> {
    unhex(
        row.get(index)
            .ok_or_else(|| StoreError::Corrupt("a NULL where a value is stored".into()))?,
    )
}

impl<'p> PgWrite<'p> {
    /// A write transaction on `conn`, not begun yet (its first message begins it);
    /// `channel`: the NOTIFY channel its commit wakes other servers on.
    pub(super) fn new(
        conn: Pooled<'p>,
        channel: Arc<str>,
        damage: Option<Damage>,
        families: &Families,
    ) -> PgWrite<'p> {
        PgWrite {
            read: PgRead::new(conn, false, families),
            last: Cell::new(0),
            counted: Cell::new(0),
            changed: false,
            channel,
            pending: Default::default(),
            error: Default::default(),
            heads: Default::default(),
            damage,
        }
    }
}

impl PgWrite<'_> {
    fn begun(&self) -> bool {
        self.read.open.get()
    }

    /// Sends one message: `BEGIN` and the counter lock when the transaction is not begun
    /// yet, the pending writes, then `tail` (statements, each ending with `;`, of which
    /// `tail_statements` answer). Returns the rows of the tail's statements.
    fn send(
        &self,
        what: &'static str,
        tail: &str,
        tail_statements: usize,
    ) -> Result<Vec<Vec<postgres::SimpleQueryRow>>, StoreError> {
        if self.read.failed.get() {
            return Err(StoreError::backend(PgError::FailedEarlier));
        }
        const BEGIN: &str = concat!(
            "BEGIN;SELECT last_position FROM ledger_counter WHERE id = 1 FOR UPDATE;",
            verdicts_sql!(),
            "SELECT coalesce(max(position), 0) FROM ledger_events;"
        );
        let beginning = !self.begun();
        let mut sql = String::new();
        if beginning {
            sql.push_str(BEGIN);
        }
        let pending = std::mem::take(&mut *self.pending.borrow_mut());
        let pending_statements = match pending.statement(None) {
            Some(statement) => {
                sql.push_str(&statement);
                sql.push(';');
                1
            }
            None => 0,
        };
        sql.push_str(tail);
        let mut retried = false;
        let messages = loop {
            let mut conn = self.read.conn.borrow_mut();
            match blocking(|| conn.get().simple_query(&sql)) {
                Ok(messages) => break messages,
                Err(error) => {
                    let dead = error.is_closed() || connection_lost(&error);
                    if dead {
                        conn.discard();
                    }
                    // A pooled connection found dead before this transaction sent
                    // anything (the server restarted): nothing was done, connect again.
                    if dead && beginning && pending.is_empty() && !retried {
                        tracing::info!(%error, "a pooled PostgreSQL connection was dead; reconnecting");
                        match conn.reconnect() {
                            Ok(()) => {
                                retried = true;
                                continue;
                            }
                            Err(error) => return Err(self.fail(StoreError::backend(error))),
                        }
                    }
                    if beginning && !dead {
                        // The transaction began, then a statement failed.
                        drop(conn);
                        self.opened();
                    }
                    return Err(self.fail(refusal(what, error)));
                }
            }
        };
        let mut all = statements(messages).into_iter();
        if beginning {
            self.opened();
            let _begin = all.next();
            let last = all
                .next()
                .and_then(|rows| rows.first().and_then(|r| r.get(0)?.parse::<u64>().ok()));
            let Some(last) = last else {
                return Err(self.fail(StoreError::Corrupt(
                    "the ledger_counter row is missing".into(),
                )));
            };
            self.last.set(last);
            self.counted.set(last);
            let verdicts = all.next().unwrap_or_default();
            if let Some(damage) = &self.damage {
                damage.absorb(verdicts_of(&verdicts));
            }
            let stored = all
                .next()
                .and_then(|rows| rows.first().and_then(|r| r.get(0)?.parse::<u64>().ok()))
                .unwrap_or(0);
            if stored > last {
                // Numbering after the counter would take positions events hold: damage to
                // the whole ledger, never a conflict to retry.
                let detail = format!(
                    "ledger_counter.last_position is {last} but events are stored up to \
                     position {stored}: every write would collide with a stored event"
                );
                let ledger = match &self.damage {
                    Some(damage) => {
                        damage.found(detail.clone());
                        damage.label().to_string()
                    }
                    None => "the PostgreSQL ledger".to_string(),
                };
                return Err(self.fail(StoreError::Damaged { ledger, detail }));
            }
        }
        let answers: Vec<_> = all.skip(pending_statements).collect();
        if answers.len() != tail_statements {
            return Err(self.fail(StoreError::Corrupt(format!(
                "PostgreSQL answered {} statements, not {tail_statements} ({what})",
                answers.len()
            ))));
        }
        Ok(answers)
    }

    /// Marks the transaction begun (a ROLLBACK ends it when dropped).
    fn opened(&self) {
        self.read.open.set(true);
    }

    /// Records `error` as this transaction's first (what commit reports) and returns it.
    fn fail(&self, error: StoreError) -> StoreError {
        self.read.failed.set(true);
        self.error.borrow_mut().get_or_insert_with(|| error.clone());
        error
    }

    /// Begins the transaction and sends the pending writes, so that a read through the
    /// read side sees them.
    fn flush(&self) -> Result<(), StoreError> {
        if self.begun() && self.pending.borrow().is_empty() {
            return Ok(());
        }
        self.send("writing events", "", 0).map(|_| ())
    }
}

const HEAD_SQL: &str = "SELECT encode(head,'hex') FROM ledger_heads WHERE session = ";

impl ReadView for PgWrite<'_> {
    fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        Ok(self.head_and_events_by_id(session, &[])?.0)
    }

    fn head_and_events_by_id(
        &self,
        session: SessionId,
        ids: &[EventId],
    ) -> Result<(Option<SessionHead>, Vec<Option<Event>>), StoreError> {
        let cached = self.heads.borrow().get(&session).cloned();
        let mut tail = String::new();
        let mut count = 0;
        if cached.is_none() {
            tail.push_str(HEAD_SQL);
            tail.push_str(&bytea(&session_key(session)));
            tail.push(';');
            count += 1;
        }
        if !ids.is_empty() {
            tail.push_str(
                "SELECT encode(id,'hex'), encode(row,'hex') FROM ledger_events WHERE id IN (",
            );
            for (index, id) in ids.iter().enumerate() {
                if index > 0 {
                    tail.push(',');
                }
                tail.push_str(&bytea(&key(id.0.0)));
            }
            tail.push_str(");");
            count += 1;
        }
        if count == 0 {
            return Ok((cached.flatten(), Vec::new()));
        }
        let mut answers = self
            .send("reading a head and events by id", &tail, count)?
            .into_iter();
        let head = match cached {
            Some(head) => head,
            None => {
                let rows = answers.next().unwrap_or_default();
                let head = rows
                    .first()
                    .map(|row| decode_head(&hex_column(row, 0)?, &self.read.families))
                    .transpose()?;
                self.heads.borrow_mut().insert(session, head.clone());
                head
            }
        };
        let mut found = std::collections::HashMap::new();
        for row in answers.next().unwrap_or_default() {
            found.insert(
                hex_column(&row, 0)?,
                codec::decode_event(&hex_column(&row, 1)?, &self.read.families)?,
            );
        }
        let events = ids
            .iter()
            .map(|id| found.remove(&key(id.0.0)[..]))
            .collect();
        Ok((head, events))
    }

    fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.flush()?;
        self.read.events_by_id(ids)
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        self.flush()?;
        self.read.heads()
    }

    fn heads_and_undecodable(
        &self,
    ) -> Result<(Vec<SessionHead>, Vec<(SessionId, String)>), StoreError> {
        self.flush()?;
        self.read.heads_and_undecodable()
    }

    fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError> {
        self.flush()?;
        self.read.alias(alias)
    }

    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: Decode,
        visit: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.flush()?;
        self.read
            .scan_session(session, from_seq, to_seq, decode, visit)
    }

    fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
        self.flush()?;
        self.read.scan_all(visit)
    }

    fn event_count(&self) -> Result<u64, StoreError> {
        self.flush()?;
        self.read.event_count()
    }

    fn scan_positions(&self, from: u64, visit: &mut PositionVisitor<'_>) -> Result<(), StoreError> {
        self.flush()?;
        self.read.scan_positions(from, visit)
    }

    fn last_position(&self) -> Result<u64, StoreError> {
        if !self.begun() {
            self.flush()?;
        }
        Ok(self.counted.get())
    }
}

impl WriteView for PgWrite<'_> {
    fn append(&mut self, plan: &AppendPlan) -> Result<u64, StoreError> {
        if !self.begun() {
            // Positions follow the counter, read under its lock.
            self.send("beginning the write transaction", "", 0)?;
        }
        if self.read.failed.get() {
            return Err(StoreError::backend(PgError::FailedEarlier));
        }
        self.changed = true;
        let session = bytea(&session_key(plan.head.session));
        let mut position = self.counted.get();
        let mut pending = self.pending.borrow_mut();
        for event in &plan.events {
            position += 1;
            pending.events.push(format!(
                "({session},{},{},{},{})",
                to_i64(event.seq),
                bytea(&key(event.id.0.0)),
                to_i64(position),
                bytea(&codec::encode_event(event)),
            ));
        }
        // The unique keys are the second line behind the counter lock: a duplicate
        // (session, seq), id or alias fails the whole group, which writes nothing.
        for alias in &plan.aliases {
            pending.aliases.push(format!(
                "(convert_from({},'UTF8'),{session})",
                bytea(alias.as_bytes())
            ));
        }
        let head = SessionHead {
            position,
            ..plan.head.clone()
        };
        pending.put_head(&head);
        drop(pending);
        self.counted.set(position);
        self.heads.borrow_mut().insert(head.session, Some(head));
        Ok(position)
    }

    fn put_head(&mut self, head: &SessionHead) -> Result<(), StoreError> {
        if !self.begun() {
            self.send("beginning the write transaction", "", 0)?;
        }
        self.changed = true;
        self.pending.borrow_mut().put_head(head);
        self.heads
            .borrow_mut()
            .insert(head.session, Some(head.clone()));
        Ok(())
    }

    fn has_changes(&self) -> bool {
        self.changed
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        if self.read.failed.get() {
            let _ = self.read.end("ROLLBACK");
            let error = self.error.borrow_mut().take();
            return Err(error.unwrap_or_else(|| StoreError::backend(PgError::FailedEarlier)));
        }
        if !self.begun() {
            // Nothing was sent: there is no transaction to end.
            return Ok(());
        }
        // One round trip: the pending writes, the counter, the wake-up of other servers
        // (delivered at commit), the commit. The values are numbers, hex and our own
        // channel name, never caller text.
        let pending = std::mem::take(&mut *self.pending.borrow_mut());
        let (last, counted) = (self.last.get(), self.counted.get());
        let counter = (counted != last).then(|| (counted, &*self.channel));
        let mut sql = pending.statement(counter).unwrap_or_default();
        if !sql.is_empty() {
            sql.push(';');
        }
        sql.push_str("COMMIT");
        self.read.open.set(false);
        let conn = self.read.conn.get_mut();
        if !conn.is_held() {
            return Err(StoreError::backend(PgError::FailedEarlier));
        }
        let result = blocking(|| conn.get().batch_execute(&sql));
        match result {
            Ok(()) => Ok(()),
            Err(source) => {
                conn.discard();
                // A statement refused: PostgreSQL skipped the rest, COMMIT included.
                if refused(&source) {
                    Err(refusal("writing events", source))
                } else {
                    Err(StoreError::backend(PgError::Commit { source }))
                }
            }
        }
    }

    fn abort(mut self: Box<Self>) -> Result<(), StoreError> {
        self.read
            .end("ROLLBACK")
            .map_err(query_error("aborting the write transaction"))
    }
}

/// Writes of the write transaction not sent yet: the rows of one multi-row `INSERT` per
/// table, each a literal tuple of numbers and hex.
#[derive(Default)]
struct Pending {
    events: Vec<String>,
    aliases: Vec<String>,
    /// The last head written per session (one statement may not write a row twice).
    heads: Vec<(SessionId, String)>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.aliases.is_empty() && self.heads.is_empty()
    }

    fn put_head(&mut self, head: &SessionHead) {
        let tuple = format!(
            "({},{})",
            bytea(&session_key(head.session)),
            bytea(&encode_head(head))
        );
        match self.heads.iter_mut().find(|(s, _)| *s == head.session) {
            Some(slot) => slot.1 = tuple,
            None => self.heads.push((head.session, tuple)),
        }
    }

    /// One statement writing everything pending (none when nothing is), and with
    /// `counter` (the new last position and the NOTIFY channel) the counter's update and
    /// the wake-up of other servers (delivered at commit) too. Data-modifying `WITH`
    /// parts all run, once, whatever the main query reads.
    fn statement(&self, counter: Option<(u64, &str)>) -> Option<String> {
        let mut parts = Vec::new();
        if !self.events.is_empty() {
            parts.push(format!(
                "INSERT INTO ledger_events (session, seq, id, position, row) VALUES {}",
                self.events.join(",")
            ));
        }
        if !self.aliases.is_empty() {
            parts.push(format!(
                "INSERT INTO ledger_aliases (alias, session) VALUES {}",
                self.aliases.join(",")
            ));
        }
        if !self.heads.is_empty() {
            let tuples: Vec<&str> = self.heads.iter().map(|(_, t)| t.as_str()).collect();
            parts.push(format!(
                "INSERT INTO ledger_heads (session, head) VALUES {} \
                 ON CONFLICT (session) DO UPDATE SET head = excluded.head",
                tuples.join(",")
            ));
        }
        let main = match counter {
            Some((last, channel)) => {
                parts.push(format!(
                    "UPDATE ledger_counter SET last_position = {last} WHERE id = 1"
                ));
                format!(
                    "SELECT pg_notify({}, '{last}')",
                    schema::quote_literal(channel)
                )
            }
            None => parts.pop()?,
        };
        if parts.is_empty() {
            return Some(main);
        }
        let with: Vec<String> = parts
            .iter()
            .enumerate()
            .map(|(index, part)| format!("w{index} AS ({part})"))
            .collect();
        Some(format!("WITH {} {main}", with.join(",")))
    }
}
