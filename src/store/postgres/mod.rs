//! The PostgreSQL backend: one shared ledger for a team, reached by many servers at once
//! (DESIGN §12).
//!
//! Owns: [`PgBackend`] (the [`Backend`] over a small pool of connections) and opening a
//! [`Ledger`] on it. Its parts, by what changes together: [`connect`] (the URL, the one
//! connect path, the pool), [`tls`] (libpq's `sslmode` and `sslrootcert` over rustls),
//! [`read`] (the read view and its queries), [`structure`] (what `verify` checks of the
//! tables beyond each session's chain), [`salvage`] (every row's bytes for `recover`),
//! [`append`] (the
//! write view: the group commit's SQL), [`schema`] (the tables and their versions),
//! [`listen`] (LISTEN/NOTIFY: waking this process's watches when another server commits),
//! [`error`] (turning a driver error into a message a user can act on: [`PgError`]) and
//! [`database`] (the one capability handed out: the database of this ledger, for recall's
//! search and vectors in `crate::recall::postgres`). Must not: hold an append rule or a
//! verify check (they live once in the store's facade), or let a `postgres` type out of
//! this module other than through [`Database`].
//!
//! Tables (every name starts with `ledger_`, in the connection's current schema):
//! - `ledger_events`: (session, seq) primary key, `id` unique, `position` unique, `row`
//!   (the bytes of [`super::codec::encode_event`], as redb stores them: hashes, verify and
//!   every export cannot tell the backends apart).
//! - `ledger_heads`: session → head (JSON, as redb stores it).
//! - `ledger_aliases`: alias → session.
//! - `ledger_counter`: one row, the last position; every write transaction locks it first
//!   (`SELECT … FOR UPDATE`), which makes write transactions exclusive across servers and
//!   commit order position order. The unique keys are the second line.
//! - `ledger_meta`: `schema_version`.
//! - `ledger_damage`: the lasting damage verdicts ([`verdicts`], schema version 4), read
//!   by every write transaction with its `BEGIN`.
//! - `ledger_search`, `ledger_search_state`: the full-text index of the ledger's text, a
//!   projection kept by recall (`crate::recall::postgres::search`, schema version 2; the
//!   state's count of rows, `documents`, since version 5).
//! - `ledger_vectors`, `ledger_vector_checkpoints` (and `ledger_vectors_hnsw` where
//!   pgvector is): the vectors of semantic recall (`crate::recall::postgres::vectors`,
//!   schema version 3).
//!
//! One write transaction per group commit of the writer thread; a connection that fails
//! is dropped and the next transaction connects again, so a restarted database or a cut
//! connection costs the calls in flight (they fail with a clear error) and nothing else.

mod append;
pub(crate) mod connect;
pub(crate) mod database;
pub(crate) mod error;
pub(crate) mod listen;
mod read;
pub(crate) mod salvage;
pub(crate) mod schema;
mod structure;
mod tls;
mod verdicts;

pub(crate) use connect::{TlsState, is_postgres_url, redact_url, tls_state};
pub(crate) use database::Database;
pub(crate) use error::PgError;

use super::contract::{Backend, CommitSignal, ReadView, WriteView};
use super::{Ledger, OpenError, OpenMode, StoreError};
use crate::event::Families;
use append::PgWrite;
use connect::{Pool, Target, blocking};
use read::PgRead;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How often a watch re-reads the ledger when no notification came (NOTIFY wakes it at
/// once; this bounds how long a notification lost with a connection can be missed).
pub(crate) const PG_WATCH_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// The ledger in a PostgreSQL database.
pub(crate) struct PgBackend {
    pool: Arc<Pool>,
    /// The NOTIFY channel of this ledger (its schema's name in it).
    channel: Arc<str>,
    listener: listen::Listener,
    /// The ledger's record of damage, once it is built over this backend: each write
    /// transaction hands it the verdicts it read with its `BEGIN`.
    damage: std::sync::OnceLock<crate::store::damage::Damage>,
}

impl PgBackend {
    /// Connects, applies the schema (creating the tables when `create`), and refuses a
    /// schema newer than this build's.
    pub(crate) fn open(url: &str, create: bool) -> Result<PgBackend, OpenError> {
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
        let pool = Arc::new(Pool::new(target.clone(), client));
        Ok(PgBackend {
            listener: listen::Listener::new(target, channel.clone()),
            pool,
            channel,
            damage: std::sync::OnceLock::new(),
        })
    }
}

/// Opens the ledger in the PostgreSQL database at `url` (its line in
/// [`super::open::URL_BACKENDS`]): with [`OpenMode::Create`] its tables are created when
/// missing (the commands that record); else only a ledger whose tables are there
/// ([`OpenError::NoLedger`] otherwise).
pub(crate) fn open(url: &str, mode: OpenMode, families: Families) -> Result<Ledger, OpenError> {
    let backend = blocking(|| PgBackend::open(url, mode == OpenMode::Create))?;
    let label = redact_url(url);
    Ok(Ledger::with_backend(backend, Path::new(&label), families))
}

impl Ledger {
    /// Opens the ledger in the PostgreSQL database at `url`, creating its tables when
    /// missing (the commands that record).
    pub fn open_postgres(url: &str, families: Families) -> Result<Ledger, OpenError> {
        open(url, OpenMode::Create, families)
    }

    /// Opens the ledger at `url` only if its tables are there ([`OpenError::NoLedger`]
    /// otherwise): the read-only commands.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn open_postgres_existing(
        url: &str,
        families: Families,
    ) -> Result<Ledger, OpenError> {
        open(url, OpenMode::Existing, families)
    }
}

impl Backend for PgBackend {
    /// PostgreSQL checks its own pages: a row that does not decode or verify is that
    /// session's damage, and the rest of the team's ledger goes on taking writes.
    #[allow(private_interfaces)]
    fn damage_scope(&self) -> crate::store::damage::DamageScope {
        crate::store::damage::DamageScope::Session
    }

    fn read(&self, families: &Families) -> Result<Box<dyn ReadView + '_>, StoreError> {
        let (pooled, _) = self.pool.begin(
            "beginning a read",
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        )?;
        Ok(Box::new(PgRead::new(pooled, true, families)))
    }

    fn write(&self, families: &Families) -> Result<Box<dyn WriteView + '_>, StoreError> {
        // Begun by its first message (see `PgWrite`): BEGIN and the counter lock travel
        // with the first reads.
        Ok(Box::new(PgWrite::new(
            self.pool.client()?,
            self.channel.clone(),
            self.damage.get().cloned(),
            families,
        )))
    }

    fn poll_interval(&self) -> Duration {
        PG_WATCH_POLL_INTERVAL
    }

    #[allow(private_interfaces)]
    fn on_damage(&self, damage: crate::store::damage::Damage) {
        let _ = self.damage.set(damage);
    }

    #[allow(private_interfaces)]
    fn verdicts(&self, _label: &Path) -> Arc<dyn crate::store::verdict::VerdictStore> {
        Arc::new(verdicts::PgVerdicts::new(&self.pool))
    }

    fn on_commits(&self, signal: CommitSignal) {
        self.listener.start(signal);
    }

    #[allow(private_interfaces)]
    fn database(&self) -> Option<Database> {
        Some(Database::new(self.pool.clone()))
    }
}

#[cfg(test)]
pub(crate) mod testdb;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SessionId;

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
        drop(Ledger::open_postgres(&db.url, crate::tools::families()).unwrap());
        let mut client = db.client();
        client
            .execute(
                "UPDATE ledger_meta SET value = $1 WHERE key = 'schema_version'",
                &[&(schema::SCHEMA_VERSION + 1)],
            )
            .unwrap();
        let error = Ledger::open_postgres(&db.url, crate::tools::families())
            .err()
            .expect("refused");
        let text = format!("{error}");
        assert!(
            text.contains("newer than this build knows") && text.contains("upgrade"),
            "{text}"
        );
    }

    #[test]
    fn another_servers_commit_is_heard_through_notify() {
        let db = testdb::TestDb::new();
        let here = Ledger::open_postgres(&db.url, crate::tools::families()).unwrap();
        let there = Ledger::open_postgres(&db.url, crate::tools::families()).unwrap();
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
        let ledger = Ledger::open_postgres(&db.url, crate::tools::families()).unwrap();
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
        let ledger = Ledger::open_postgres(&url.1, crate::tools::families()).unwrap();
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
            Ledger::open_postgres_existing(&db.url, crate::tools::families()),
            Err(OpenError::NoLedger { .. })
        ));
        drop(Ledger::open_postgres(&db.url, crate::tools::families()).unwrap());
        assert!(Ledger::open_postgres_existing(&db.url, crate::tools::families()).is_ok());
    }
}
