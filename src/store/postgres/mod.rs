//! The PostgreSQL backend: one shared ledger for a team, reached by many servers at once
//! (DESIGN §12).
//!
//! Owns: [`PgBackend`] (the [`Backend`] over a small pool of connections), its read and
//! write views, the schema and its versions ([`schema`]), the LISTEN/NOTIFY listener that
//! wakes this process's watches when another server commits ([`listen`]), and turning a
//! driver error into a message a user can act on ([`PgError`]). Must not: hold an append
//! rule or a verify check (they live once in the store's facade), or let a `postgres`
//! type out of this module.
//!
//! Tables (every name starts with `ledger_`, in the connection's current schema):
//! - `ledger_events`: (session, seq) primary key, `id` unique, `position` unique, `row`
//!   (the bytes of [`codec::encode_event`], as redb stores them: hashes, verify and
//!   every export cannot tell the backends apart).
//! - `ledger_heads`: session → head (JSON, as redb stores it).
//! - `ledger_aliases`: alias → session.
//! - `ledger_counter`: one row, the last position; every write transaction locks it first
//!   (`SELECT … FOR UPDATE`), which makes write transactions exclusive across servers and
//!   commit order position order. The unique keys are the second line.
//! - `ledger_meta`: `schema_version`.
//! - `ledger_search`, `ledger_search_state`: the full-text index of the ledger's text, a
//!   projection kept by [`search`] (schema version 2).
//!
//! One write transaction per group commit of the writer thread; a connection that fails
//! is dropped and the next transaction connects again, so a restarted database or a cut
//! connection costs the calls in flight (they fail with a clear error) and nothing else.

pub(crate) mod listen;
pub(crate) mod schema;
mod search;

use super::contract::{
    AppendPlan, Backend, CommitSignal, Decode, PositionVisitor, ReadView, RowVisitor, WriteView,
};
use super::{Ledger, OpenError, SessionHead, StoreError, codec};
use crate::event::{Event, EventId, SessionId};
use postgres::{Client, NoTls};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest a connection attempt waits for the server before the call fails.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Idle connections kept for reads and the writer; more are opened when needed and
/// closed when returned past this many.
pub const POOL_IDLE_LIMIT: usize = 8;

/// Rows one query of a scan fetches: scans stream in chunks of this many, so memory stays
/// flat however long a session is.
pub const SCAN_CHUNK_ROWS: i64 = 512;

/// How often a watch re-reads the ledger when no notification came (NOTIFY wakes it at
/// once; this bounds how long a notification lost with a connection can be missed).
pub const PG_WATCH_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Whether `text` names a PostgreSQL store (`postgres://…` or `postgresql://…`).
pub fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// The URL without its password, to name the ledger in messages and logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    let tail = redact_query_password(tail);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => format!("{scheme}://{userinfo}@{host}{tail}"),
        },
        None => format!("{scheme}://{authority}{tail}"),
    }
}

fn redact_query_password(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// What went wrong talking to PostgreSQL, said so that a user knows what happened to the
/// call.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "cannot reach PostgreSQL at {target} (is it running? the server reconnects on its own): {}",
        describe(source)
    )]
    Connect {
        target: String,
        source: postgres::Error,
    },
    #[error(
        "PostgreSQL failed ({what}; nothing of this call was recorded; the server reconnects on its own): {}",
        describe(source)
    )]
    Query {
        what: &'static str,
        source: postgres::Error,
    },
    #[error(
        "the PostgreSQL connection failed while committing: the call may or may not be \
         recorded (get_history shows what is stored): {}",
        describe(source)
    )]
    Commit { source: postgres::Error },
    #[error(
        "another writer stored that event first ({constraint}): nothing of this call was \
         recorded; call again"
    )]
    KeyConflict { constraint: String },
    #[error("a statement of this write transaction failed earlier: nothing of it was recorded")]
    FailedEarlier,
    #[error(
        "the database holds a ledger of schema version {found}, newer than this build knows \
         ({known}): upgrade reasoning-ledger to use it"
    )]
    SchemaTooNew { found: i64, known: i64 },
    #[error("not a PostgreSQL URL: {0}")]
    BadUrl(String),
    #[error(
        "no schema to hold the ledger: the first schema of search_path does not exist \
         (create it, or name another with ?options=-csearch_path%3DNAME)"
    )]
    NoSchema,
}

/// The driver's error with what the server said (its own `Display` is only "db error").
fn describe(error: &postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{}: {} ({})", db.severity(), db.message(), db.code().code());
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Whether `error` means the connection is gone (closed, cut by the server, the server
/// shutting down), as opposed to a statement the server refused.
fn connection_lost(error: &postgres::Error) -> bool {
    match error.as_db_error() {
        None => true,
        // Class 08: connection exception; 57: operator intervention (shutdown,
        // pg_terminate_backend).
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") || code.starts_with("57")
        }
    }
}

fn query_error(what: &'static str) -> impl Fn(postgres::Error) -> StoreError {
    move |source| StoreError::backend(PgError::Query { what, source })
}

/// Runs a blocking driver call. The `postgres` client drives its connection on a runtime
/// of its own, which panics on a thread already running async tasks: the store's callers
/// keep reads off the async workers (`spawn_blocking`, the writer thread), and this steps
/// aside with `block_in_place` should one still run on a multi-threaded runtime's worker.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

fn key(id: u128) -> [u8; 16] {
    id.to_be_bytes()
}

fn session_key(session: SessionId) -> [u8; 16] {
    key(session.0.0)
}

fn session_of(bytes: &[u8]) -> Result<SessionId, StoreError> {
    let bytes: [u8; 16] = bytes
        .try_into()
        .map_err(|_| StoreError::Corrupt("a session key is not 16 bytes".into()))?;
    Ok(SessionId(ulid::Ulid(u128::from_be_bytes(bytes))))
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn decode_head(bytes: &[u8]) -> Result<SessionHead, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("session head: {e}")))
}

fn encode_head(head: &SessionHead) -> Vec<u8> {
    serde_json::to_vec(head).expect("heads always serialize")
}

/// How to reach the database, shared by the pool and the listener.
pub(crate) struct Target {
    config: postgres::Config,
    /// The URL without its password.
    label: String,
}

impl Target {
    pub(crate) fn parse(url: &str) -> Result<Target, PgError> {
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e: postgres::Error| PgError::BadUrl(format!("{}: {e}", redact_url(url))))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("reasoning-ledger");
        }
        Ok(Target {
            config,
            label: redact_url(url),
        })
    }

    pub(crate) fn connect(&self) -> Result<Client, PgError> {
        self.config
            .connect(NoTls)
            .map_err(|source| PgError::Connect {
                target: self.label.clone(),
                source,
            })
    }
}

/// The ledger in a PostgreSQL database.
pub struct PgBackend {
    target: Arc<Target>,
    idle: Mutex<Vec<Client>>,
    /// The NOTIFY channel of this ledger (its schema's name in it).
    channel: Arc<str>,
    listener: listen::Listener,
}

impl PgBackend {
    /// Connects, applies the schema (creating the tables when `create`), and refuses a
    /// schema newer than this build's.
    pub fn open(url: &str, create: bool) -> Result<PgBackend, OpenError> {
        let label = redact_url(url);
        let open_error = |source: PgError| OpenError::Store {
            label: label.clone(),
            source: Arc::new(source),
        };
        let target = Arc::new(Target::parse(url).map_err(open_error)?);
        let mut client = target.connect().map_err(open_error)?;
        let channel = match schema::prepare(&mut client, create).map_err(open_error)? {
            Some(channel) => channel,
            None => {
                return Err(OpenError::NoLedger {
                    path: label.clone().into(),
                });
            }
        };
        let channel: Arc<str> = channel.into();
        Ok(PgBackend {
            listener: listen::Listener::new(target.clone(), channel.clone()),
            target,
            idle: Mutex::new(vec![client]),
            channel,
        })
    }

    fn client(&self) -> Result<Pooled<'_>, StoreError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .pop();
        let client = match idle {
            Some(client) if !client.is_closed() => client,
            _ => blocking(|| self.target.connect()).map_err(StoreError::backend)?,
        };
        Ok(Pooled {
            client: Some(client),
            backend: self,
        })
    }
}

impl PgBackend {
    /// Takes a connection and begins a transaction with `sql`. A pooled connection that
    /// turns out dead (the server restarted, the connection was cut) is replaced by a new
    /// one and the transaction begun again: nothing had been done on it yet.
    fn begin(
        &self,
        what: &'static str,
        sql: &str,
    ) -> Result<(Pooled<'_>, Vec<postgres::SimpleQueryMessage>), StoreError> {
        let mut retried = false;
        loop {
            let mut pooled = self.client()?;
            match blocking(|| pooled.get().simple_query(sql)) {
                Ok(messages) => return Ok((pooled, messages)),
                Err(error) => {
                    pooled.discard();
                    let dead = error.is_closed() || connection_lost(&error);
                    if dead && !retried {
                        tracing::info!(%error, "a pooled PostgreSQL connection was dead; reconnecting");
                        // The others were opened to the same server: likely dead too.
                        self.idle
                            .lock()
                            .unwrap_or_else(|poison| poison.into_inner())
                            .clear();
                        retried = true;
                        continue;
                    }
                    return Err(query_error(what)(error));
                }
            }
        }
    }
}

impl Ledger {
    /// Opens the ledger in the PostgreSQL database at `url`, creating its tables when
    /// missing (the commands that record).
    pub fn open_postgres(url: &str) -> Result<Ledger, OpenError> {
        let backend = blocking(|| PgBackend::open(url, true))?;
        let label = redact_url(url);
        Ok(Ledger::with_backend(backend, Path::new(&label)))
    }

    /// Opens the ledger at `url` only if its tables are there ([`OpenError::NoLedger`]
    /// otherwise): the read-only commands.
    pub fn open_postgres_existing(url: &str) -> Result<Ledger, OpenError> {
        let backend = blocking(|| PgBackend::open(url, false))?;
        let label = redact_url(url);
        Ok(Ledger::with_backend(backend, Path::new(&label)))
    }
}

/// A connection out of the pool; goes back when dropped unless it failed.
struct Pooled<'b> {
    client: Option<Client>,
    backend: &'b PgBackend,
}

impl Pooled<'_> {
    fn get(&mut self) -> &mut Client {
        self.client.as_mut().expect("held until dropped")
    }

    /// Drops the connection instead of pooling it (its state is unknown).
    fn discard(&mut self) {
        self.client = None;
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !client.is_closed()
        {
            let mut idle = self
                .backend
                .idle
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            if idle.len() < POOL_IDLE_LIMIT {
                idle.push(client);
            }
        }
    }
}

impl Backend for PgBackend {
    fn read(&self) -> Result<Box<dyn ReadView + '_>, StoreError> {
        let (pooled, _) = self.begin(
            "beginning a read",
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        )?;
        Ok(Box::new(PgRead {
            conn: RefCell::new(pooled),
            failed: Default::default(),
            open: Cell::new(true),
        }))
    }

    fn write(&self) -> Result<Box<dyn WriteView + '_>, StoreError> {
        // Begun by its first message (see `PgWrite`): BEGIN and the counter lock travel
        // with the first reads.
        Ok(Box::new(PgWrite {
            read: PgRead {
                conn: RefCell::new(self.client()?),
                failed: Default::default(),
                open: Cell::new(false),
            },
            last: Cell::new(0),
            counted: Cell::new(0),
            changed: false,
            channel: self.channel.clone(),
            pending: Default::default(),
            error: Default::default(),
            heads: Default::default(),
        }))
    }

    fn poll_interval(&self) -> Duration {
        PG_WATCH_POLL_INTERVAL
    }

    fn on_commits(&self, signal: CommitSignal) {
        self.listener.start(signal);
    }

    fn text_search(&self) -> Option<&dyn crate::recall::TextSearch> {
        Some(self)
    }
}

/// A read transaction (REPEATABLE READ: one snapshot for every query of the view), or the
/// read side of the write transaction.
struct PgRead<'b> {
    conn: RefCell<Pooled<'b>>,
    /// A statement failed: PostgreSQL has aborted the transaction, so a COMMIT would
    /// quietly roll it back; commit reports it instead.
    failed: std::cell::Cell<bool>,
    /// A transaction is open on the connection (ended by commit/abort/drop).
    open: Cell<bool>,
}

impl PgRead<'_> {
    /// Runs `f` on the connection; a failure drops the connection from the pool (its
    /// transaction is gone) and becomes a [`StoreError`] saying what failed.
    fn with<T>(
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

    fn end(&mut self, sql: &str) -> Result<(), postgres::Error> {
        if !self.open.replace(false) {
            return Ok(());
        }
        let conn = self.conn.get_mut();
        if conn.client.is_none() {
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

impl ReadView for PgRead<'_> {
    fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        let row = self.with("reading a session head", |c| {
            c.query_opt(
                "SELECT head FROM ledger_heads WHERE session = $1",
                &[&&session_key(session)[..]],
            )
        })?;
        row.map(|row| decode_head(row.get::<_, &[u8]>(0)))
            .transpose()
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        let rows = self.with("reading session heads", |c| {
            c.query("SELECT head FROM ledger_heads", &[])
        })?;
        rows.iter()
            .map(|row| decode_head(row.get::<_, &[u8]>(0)))
            .collect()
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
                codec::decode_event(row.get::<_, &[u8]>(1))?,
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
        if from_seq > to_seq {
            return Ok(());
        }
        let decode = match decode {
            Decode::Full => codec::decode_event,
            Decode::ToFold => codec::decode_event_to_fold,
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
                if !visit(seq as u64, decode(row.get::<_, &[u8]>(1))) {
                    return Ok(());
                }
                from = seq + 1;
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
                if !visit(codec::decode_event(row.get::<_, &[u8]>(2))?) {
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
                    codec::decode_event(row.get::<_, &[u8]>(1))?,
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
struct PgWrite<'b> {
    read: PgRead<'b>,
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
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(DIGITS[(byte >> 4) as usize] as char);
        text.push(DIGITS[(byte & 15) as usize] as char);
    }
    text
}

/// The bytes of hex `text` (what `encode(…, 'hex')` answers).
fn unhex(text: &str) -> Result<Vec<u8>, StoreError> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return Err(StoreError::Corrupt("a hex value of odd length".into()));
    }
    bytes
        .chunks(2)
        .map(|pair| match (digit(pair[0]), digit(pair[1])) {
            (Some(high), Some(low)) => Ok(high << 4 | low),
            _ => Err(StoreError::Corrupt("a value that is not hex".into())),
        })
        .collect()
}

/// A bytea literal of `bytes`.
fn bytea(bytes: &[u8]) -> String {
    format!("decode('{}','hex')", hex(bytes))
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

/// Whether `error` came from a statement the server refused (an aborted transaction:
/// nothing committed), as opposed to a connection lost with the outcome unknown.
fn refused(error: &postgres::Error) -> bool {
    !error.is_closed() && !connection_lost(error)
}

/// The error of a refused statement: a unique key says another writer was first.
fn refusal(what: &'static str, source: postgres::Error) -> StoreError {
    if let Some(db) = source.as_db_error()
        && db.code().code() == "23505"
    {
        return StoreError::backend(PgError::KeyConflict {
            constraint: db.constraint().unwrap_or("a unique key").to_string(),
        });
    }
    query_error(what)(source)
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
        const BEGIN: &str =
            "BEGIN;SELECT last_position FROM ledger_counter WHERE id = 1 FOR UPDATE;";
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
                        let backend = conn.backend;
                        backend
                            .idle
                            .lock()
                            .unwrap_or_else(|poison| poison.into_inner())
                            .clear();
                        match blocking(|| backend.target.connect()) {
                            Ok(client) => {
                                conn.client = Some(client);
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
                    .map(|row| decode_head(&hex_column(row, 0)?))
                    .transpose()?;
                self.heads.borrow_mut().insert(session, head.clone());
                head
            }
        };
        let mut found = std::collections::HashMap::new();
        for row in answers.next().unwrap_or_default() {
            found.insert(
                hex_column(&row, 0)?,
                codec::decode_event(&hex_column(&row, 1)?)?,
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
        if conn.client.is_none() {
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

#[cfg(test)]
pub(crate) mod testdb;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_named_without_their_password() {
        assert_eq!(
            redact_url("postgres://alice:s3cret@db.example:5432/ledger"),
            "postgres://alice:***@db.example:5432/ledger"
        );
        assert_eq!(
            redact_url("postgresql://alice@db/ledger?password=x&sslmode=disable"),
            "postgresql://alice@db/ledger?password=***&sslmode=disable"
        );
        assert_eq!(
            redact_url("postgresql://postgres@%2Ftmp%2Fpg/postgres"),
            "postgresql://postgres@%2Ftmp%2Fpg/postgres"
        );
        assert!(is_postgres_url("postgres://x"));
        assert!(!is_postgres_url("/var/lib/ledger"));
    }

    #[test]
    fn a_newer_schema_is_refused_with_a_clear_error() {
        let db = testdb::TestDb::new();
        drop(Ledger::open_postgres(&db.url).unwrap());
        let mut client = db.client();
        client
            .execute(
                "UPDATE ledger_meta SET value = $1 WHERE key = 'schema_version'",
                &[&(schema::SCHEMA_VERSION + 1)],
            )
            .unwrap();
        let error = Ledger::open_postgres(&db.url).err().expect("refused");
        let text = format!("{error}");
        assert!(
            text.contains("newer than this build knows") && text.contains("upgrade"),
            "{text}"
        );
    }

    #[test]
    fn another_servers_commit_is_heard_through_notify() {
        let db = testdb::TestDb::new();
        let here = Ledger::open_postgres(&db.url).unwrap();
        let there = Ledger::open_postgres(&db.url).unwrap();
        // Only a commit of this process or the listener raises the signal (a watch's poll
        // does not), so seeing it raised proves the NOTIFY path.
        let mut raised = here.commits.0.subscribe();
        raised.borrow_and_update();
        let session = SessionId::generate();
        there
            .write_blocking(move |txn| {
                txn.append(
                    session,
                    0,
                    vec![crate::event::NewEvent::new(
                        crate::event::Payload::SessionStarted {
                            kind: crate::event::SessionKind::THINKING,
                            title: "t".into(),
                            aliases: Vec::new(),
                        },
                    )],
                )
            })
            .unwrap()
            .unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(10), raised.changed()).await
            })
            .expect("the listener heard the other handle's commit")
            .unwrap();
        assert_eq!(*raised.borrow(), 1);
    }

    #[test]
    fn a_stale_seq_fails_on_the_key_writes_nothing_and_a_retry_appends_once() {
        use crate::event::{NewEvent, Payload, SessionKind};
        use crate::store::rules::{self, Batch, Plan};
        let db = testdb::TestDb::new();
        let ledger = Ledger::open_postgres(&db.url).unwrap();
        let session = SessionId::generate();
        let start = || {
            NewEvent::new(Payload::SessionStarted {
                kind: SessionKind::THINKING,
                title: "t".into(),
                aliases: Vec::new(),
            })
        };
        let closed = |reason: &str| {
            NewEvent::new(Payload::SessionClosed {
                reason: reason.into(),
            })
        };
        ledger
            .write_blocking(move |txn| txn.append(session, 0, vec![start()]))
            .unwrap()
            .unwrap();
        let stale_head = ledger.head(session).unwrap();
        ledger
            .write_blocking(move |txn| txn.append(session, 1, vec![closed("first")]))
            .unwrap()
            .unwrap();
        // A writer that planned from the stale head (as if the lock were not there):
        // seq 2 is taken, the key refuses it, and its whole group writes nothing.
        let Plan::Write(stale) = rules::plan_append(
            stale_head.as_ref(),
            &Default::default(),
            Batch::New {
                session,
                expected_seq: 1,
                at: 1,
                events: vec![closed("stale")],
            },
        )
        .unwrap() else {
            panic!("a plan to write")
        };
        let position = ledger.last_position().unwrap();
        // The write waits for the commit's message, where the key refuses it: PostgreSQL
        // skips the COMMIT after it, and the group's commit says so instead of quietly
        // rolling back.
        let plan = stale.clone();
        let refused = ledger.write_blocking(move |txn| txn.backend().append(&plan).map(|_| ()));
        let group = refused.expect_err("the group fails");
        assert!(
            group
                .to_string()
                .contains("another writer stored that event first"),
            "{group}"
        );
        assert_eq!(ledger.last_position().unwrap(), position, "nothing written");
        // A read after it in the same transaction sends it first: the read answers the
        // refusal, and the group fails with it.
        let (tx, rx) = std::sync::mpsc::channel();
        let refused = ledger.write_blocking(move |txn| {
            txn.backend().append(&stale).expect("queued");
            let _ = tx.send(txn.backend().event_count().map(|_| ()));
        });
        let error = rx.recv().unwrap().expect_err("the key refuses a taken seq");
        assert!(
            error
                .to_string()
                .contains("another writer stored that event first"),
            "{error}"
        );
        let group = refused.expect_err("the group fails");
        assert!(
            group
                .to_string()
                .contains("another writer stored that event first"),
            "{group}"
        );
        assert_eq!(ledger.last_position().unwrap(), position, "nothing written");
        // Retried the normal way (the head read inside the transaction): appended once.
        let retried = ledger
            .write_blocking(move |txn| {
                let head = txn.head(session)?.map_or(0, |h| h.seq);
                txn.append(session, head, vec![closed("stale")])
            })
            .unwrap()
            .unwrap();
        assert_eq!(retried.head.seq, 3);
        assert_eq!(ledger.verify_all().unwrap().len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_on_an_async_worker_steps_aside_instead_of_panicking() {
        let url = tokio::task::spawn_blocking(|| {
            let db = testdb::TestDb::new();
            let url = db.url.clone();
            (db, url)
        })
        .await
        .unwrap();
        let ledger = Ledger::open_postgres(&url.1).unwrap();
        assert!(ledger.heads().unwrap().is_empty());
        assert_eq!(ledger.last_position().unwrap(), 0);
        drop(ledger);
        tokio::task::spawn_blocking(move || drop(url))
            .await
            .unwrap();
    }

    #[test]
    fn a_read_only_open_finds_no_ledger_in_an_empty_schema() {
        let db = testdb::TestDb::new();
        assert!(matches!(
            Ledger::open_postgres_existing(&db.url),
            Err(OpenError::NoLedger { .. })
        ));
        drop(Ledger::open_postgres(&db.url).unwrap());
        assert!(Ledger::open_postgres_existing(&db.url).is_ok());
    }
}
