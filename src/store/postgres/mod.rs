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
//!
//! One write transaction per group commit of the writer thread; a connection that fails
//! is dropped and the next transaction connects again, so a restarted database or a cut
//! connection costs the calls in flight (they fail with a clear error) and nothing else.

pub(crate) mod listen;
pub(crate) mod schema;

use super::contract::{
    AppendPlan, Backend, CommitSignal, Decode, PositionVisitor, ReadView, RowVisitor, WriteView,
};
use super::{Ledger, OpenError, SessionHead, StoreError, codec};
use crate::event::{Event, EventId, SessionId};
use postgres::{Client, NoTls};
use std::cell::RefCell;
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
            open: true,
        }))
    }

    fn write(&self) -> Result<Box<dyn WriteView + '_>, StoreError> {
        let (mut pooled, messages) = self.begin(
            "beginning the write transaction",
            "BEGIN; SELECT last_position FROM ledger_counter WHERE id = 1 FOR UPDATE",
        )?;
        let last = messages.iter().find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(row) => {
                row.get(0).and_then(|v| v.parse::<u64>().ok())
            }
            _ => None,
        });
        let Some(last) = last else {
            pooled.discard();
            return Err(StoreError::Corrupt(
                "the ledger_counter row is missing".into(),
            ));
        };
        Ok(Box::new(PgWrite {
            read: PgRead {
                conn: RefCell::new(pooled),
                failed: Default::default(),
                open: true,
            },
            last,
            counted: last,
            changed: false,
            channel: self.channel.clone(),
            heads: Default::default(),
        }))
    }

    fn poll_interval(&self) -> Duration {
        PG_WATCH_POLL_INTERVAL
    }

    fn on_commits(&self, signal: CommitSignal) {
        self.listener.start(signal);
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
    open: bool,
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
        if !self.open {
            return Ok(());
        }
        self.open = false;
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
struct PgWrite<'b> {
    read: PgRead<'b>,
    /// The last position at the start of the transaction.
    last: u64,
    /// The last position including this transaction's appends.
    counted: u64,
    changed: bool,
    channel: Arc<str>,
    /// Heads read or written in this transaction. It holds the ledger's write lock, so
    /// no one else changes a head meanwhile: a job's second look at a head (its target,
    /// then the append rules) costs no round trip.
    heads: RefCell<std::collections::HashMap<SessionId, Option<SessionHead>>>,
}

macro_rules! forward_reads {
    () => {
        fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
            if let Some(head) = self.heads.borrow().get(&session) {
                return Ok(head.clone());
            }
            let head = self.read.head(session)?;
            self.heads.borrow_mut().insert(session, head.clone());
            Ok(head)
        }
        fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
            self.read.heads()
        }
        fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError> {
            self.read.alias(alias)
        }
        fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
            self.read.events_by_id(ids)
        }
        fn scan_session(
            &self,
            session: SessionId,
            from_seq: u64,
            to_seq: u64,
            decode: Decode,
            visit: &mut RowVisitor<'_>,
        ) -> Result<(), StoreError> {
            self.read
                .scan_session(session, from_seq, to_seq, decode, visit)
        }
        fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
            self.read.scan_all(visit)
        }
        fn event_count(&self) -> Result<u64, StoreError> {
            self.read.event_count()
        }
        fn scan_positions(
            &self,
            from: u64,
            visit: &mut PositionVisitor<'_>,
        ) -> Result<(), StoreError> {
            self.read.scan_positions(from, visit)
        }
    };
}

impl ReadView for PgWrite<'_> {
    forward_reads!();

    fn last_position(&self) -> Result<u64, StoreError> {
        Ok(self.counted)
    }
}

impl WriteView for PgWrite<'_> {
    fn append(&mut self, plan: &AppendPlan) -> Result<u64, StoreError> {
        self.changed = true;
        let session = session_key(plan.head.session).to_vec();
        let n = plan.events.len();
        let mut sessions = Vec::with_capacity(n);
        let mut seqs = Vec::with_capacity(n);
        let mut ids = Vec::with_capacity(n);
        let mut positions = Vec::with_capacity(n);
        let mut rows = Vec::with_capacity(n);
        let mut position = self.counted;
        for event in &plan.events {
            position += 1;
            sessions.push(session.clone());
            seqs.push(to_i64(event.seq));
            ids.push(key(event.id.0.0).to_vec());
            positions.push(to_i64(position));
            rows.push(codec::encode_event(event));
        }
        let head = SessionHead {
            position,
            ..plan.head.clone()
        };
        let head_bytes = encode_head(&head);
        let aliases: Vec<&str> = plan.aliases.iter().map(String::as_str).collect();
        // The unique keys are the second line behind the counter lock: a duplicate
        // (session, seq) or id fails the whole group, which writes nothing.
        let key_conflict = |error: &StoreError| {
            let db = error
                .source_error()
                .and_then(|e| e.downcast_ref::<PgError>())
                .and_then(|e| match e {
                    PgError::Query { source, .. } => source.as_db_error(),
                    _ => None,
                })?;
            (db.code().code() == "23505")
                .then(|| db.constraint().unwrap_or("a unique key").to_string())
        };
        // One round trip: the events, the aliases and the head in one statement.
        let written = self.read.with("writing events", |c| {
            c.execute(
                "WITH events AS (\
                    INSERT INTO ledger_events (session, seq, id, position, row) \
                    SELECT * FROM unnest($1::bytea[], $2::int8[], $3::bytea[], $4::int8[], $5::bytea[])), \
                 aliases AS (\
                    INSERT INTO ledger_aliases (alias, session) SELECT a, $6 FROM unnest($8::text[]) AS a) \
                 INSERT INTO ledger_heads (session, head) VALUES ($6, $7) \
                 ON CONFLICT (session) DO UPDATE SET head = excluded.head",
                &[&sessions, &seqs, &ids, &positions, &rows, &session, &head_bytes, &aliases],
            )
            .map(|_| ())
        });
        if let Err(error) = written {
            return Err(match key_conflict(&error) {
                Some(constraint) => StoreError::backend(PgError::KeyConflict { constraint }),
                None => error,
            });
        }
        self.counted = position;
        self.heads.borrow_mut().insert(head.session, Some(head));
        Ok(position)
    }

    fn put_head(&mut self, head: &SessionHead) -> Result<(), StoreError> {
        self.changed = true;
        let session = session_key(head.session).to_vec();
        let bytes = encode_head(head);
        self.read.with("writing a session head", |c| {
            c.execute(
                "INSERT INTO ledger_heads (session, head) VALUES ($1, $2) \
                 ON CONFLICT (session) DO UPDATE SET head = excluded.head",
                &[&session, &bytes],
            )
        })?;
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
            return Err(StoreError::backend(PgError::FailedEarlier));
        }
        // One round trip: the counter, the wake-up of other servers (delivered at commit),
        // the commit. The values are numbers and our own channel name, never caller text.
        let mut sql = String::new();
        if self.counted != self.last {
            sql.push_str(&format!(
                "UPDATE ledger_counter SET last_position = {} WHERE id = 1; SELECT pg_notify({}, '{}'); ",
                self.counted,
                schema::quote_literal(&self.channel),
                self.counted
            ));
        }
        sql.push_str("COMMIT");
        self.read
            .end(&sql)
            .map_err(|source| StoreError::backend(PgError::Commit { source }))
    }

    fn abort(mut self: Box<Self>) -> Result<(), StoreError> {
        self.read
            .end("ROLLBACK")
            .map_err(query_error("aborting the write transaction"))
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
        let (tx, rx) = std::sync::mpsc::channel();
        let refused = ledger.write_blocking(move |txn| {
            let _ = tx.send(txn.backend().append(&stale).map(|_| ()));
        });
        let error = rx.recv().unwrap().expect_err("the key refuses a taken seq");
        assert!(
            error
                .to_string()
                .contains("another writer stored that event first"),
            "{error}"
        );
        // And the group's commit says so instead of quietly rolling back.
        let group = refused.expect_err("the group fails");
        assert!(group.to_string().contains("failed earlier"), "{group}");
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
