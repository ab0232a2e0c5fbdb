//! The ledger's tables in PostgreSQL and their versions.
//!
//! Owns: [`SCHEMA_VERSION`], the migrations that reach it (applied at start, in one
//! transaction, under an advisory lock so two servers starting at once do not race), and
//! the refusal of a schema newer than this build's. Every table is created here, also the
//! ones recall keeps in the same database (`crate::recall::postgres`): one version for
//! the whole schema. Must not: change a table a released
//! version created other than by a new migration.

use super::error::PgError;
use postgres::Client;

/// The schema version this build writes and reads.
pub(crate) const SCHEMA_VERSION: i64 = 5;

/// Advisory lock key held while the schema is checked and migrated ("rledger" in ASCII).
const MIGRATION_LOCK: i64 = 0x0072_6c65_6467_6572;

/// Migration `n` (1-based) takes the schema from version `n - 1` to `n`.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE ledger_events (
        session bytea NOT NULL,
        seq bigint NOT NULL,
        id bytea NOT NULL UNIQUE,
        position bigint NOT NULL UNIQUE,
        row bytea NOT NULL,
        PRIMARY KEY (session, seq)
    );
    CREATE TABLE ledger_heads (session bytea PRIMARY KEY, head bytea NOT NULL);
    CREATE TABLE ledger_aliases (alias text PRIMARY KEY, session bytea NOT NULL);
    CREATE TABLE ledger_counter (
        id int PRIMARY KEY CHECK (id = 1),
        last_position bigint NOT NULL
    );
    INSERT INTO ledger_counter (id, last_position) VALUES (1, 0);
",
    SEARCH_MIGRATION,
    VECTORS_MIGRATION,
    DAMAGE_MIGRATION,
    SEARCH_DOCUMENTS_MIGRATION,
];

/// Migration 5: how many rows `ledger_search` holds, kept with its position by
/// `crate::recall::postgres::search` (the document count hybrid fusion's IDF needs, read
/// without counting the rows). Renumber if another migration lands first.
const SEARCH_DOCUMENTS_MIGRATION: &str = "
    ALTER TABLE ledger_search_state ADD COLUMN documents bigint NOT NULL DEFAULT 0;
    UPDATE ledger_search_state SET documents = (SELECT count(*) FROM ledger_search);
";

/// Migration 4: the lasting damage verdicts (`super::verdicts`): a session's (`session`
/// its key) or the whole ledger's (`session` NULL).
const DAMAGE_MIGRATION: &str = "
    CREATE TABLE ledger_damage (
        session bytea,
        detail text NOT NULL,
        at bigint NOT NULL
    );
";

/// Migration 2: the search projection (kept by `crate::recall::postgres::search`).
const SEARCH_MIGRATION: &str = "
    CREATE TABLE ledger_search (
        position bigint PRIMARY KEY,
        session bytea NOT NULL,
        seq bigint NOT NULL,
        kind text NOT NULL,
        event_type text NOT NULL,
        at bigint NOT NULL,
        body text NOT NULL,
        doc tsvector NOT NULL
    );
    CREATE INDEX ledger_search_doc ON ledger_search USING GIN (doc);
    CREATE INDEX ledger_search_session ON ledger_search (session);
    CREATE TABLE ledger_search_state (
        id int PRIMARY KEY CHECK (id = 1),
        position bigint NOT NULL
    );
    INSERT INTO ledger_search_state (id, position) VALUES (1, 0);
    CREATE FUNCTION ledger_search_unit(words text) RETURNS tsquery
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT CASE WHEN numnode(phraseto_tsquery('english', words)) > 0
                        THEN phraseto_tsquery('english', words)
                        ELSE phraseto_tsquery('simple', words) END
        $$;
";

/// Migration 3: the vectors of semantic recall (kept by `crate::recall::postgres::vectors`). Renumber if another migration lands first.
const VECTORS_MIGRATION: &str = "
    CREATE TABLE ledger_vectors (
        model text NOT NULL,
        position bigint NOT NULL,
        session bytea NOT NULL,
        seq bigint NOT NULL,
        at bigint NOT NULL,
        kind text NOT NULL,
        vector bytea NOT NULL,
        PRIMARY KEY (model, position)
    );
    CREATE TABLE ledger_vector_checkpoints (model text PRIMARY KEY, checkpoint text NOT NULL);
";

/// A SQL identifier of `text` (a channel name for LISTEN).
pub(crate) fn quote_ident(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// A SQL string literal of `text`.
pub(crate) fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn failed(what: &'static str) -> impl Fn(postgres::Error) -> PgError {
    move |source| PgError::Query { what, source }
}

/// Checks the schema and brings it to [`SCHEMA_VERSION`] (creating it when `create`).
/// Returns this ledger's NOTIFY channel, or `None` when there is no ledger and `create`
/// is false.
pub(crate) fn prepare(client: &mut Client, create: bool) -> Result<Option<String>, PgError> {
    let mut txn = client
        .transaction()
        .map_err(failed("beginning the schema check"))?;
    txn.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(failed("locking the schema"))?;
    let schema: Option<String> = txn
        .query_one("SELECT current_schema()", &[])
        .map_err(failed("reading the current schema"))?
        .get(0);
    let Some(schema) = schema else {
        return Err(PgError::NoSchema);
    };
    let has_meta: bool = txn
        .query_one("SELECT to_regclass('ledger_meta') IS NOT NULL", &[])
        .map_err(failed("looking for the ledger's tables"))?
        .get(0);
    let found: i64 = if has_meta {
        txn.query_opt(
            "SELECT value FROM ledger_meta WHERE key = 'schema_version'",
            &[],
        )
        .map_err(failed("reading the schema version"))?
        .map_or(0, |row| row.get(0))
    } else {
        0
    };
    if found > SCHEMA_VERSION {
        return Err(PgError::SchemaTooNew {
            found,
            known: SCHEMA_VERSION,
        });
    }
    if found == 0 && !create {
        return Ok(None);
    }
    if found < SCHEMA_VERSION {
        if !has_meta {
            txn.batch_execute(
                "CREATE TABLE ledger_meta (key text PRIMARY KEY, value bigint NOT NULL)",
            )
            .map_err(failed("creating ledger_meta"))?;
        }
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            txn.batch_execute(migration)
                .map_err(failed("applying a schema migration"))?;
            tracing::info!(version = index + 1, "applied a ledger schema migration");
        }
        txn.execute(
            "INSERT INTO ledger_meta (key, value) VALUES ('schema_version', $1) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&SCHEMA_VERSION],
        )
        .map_err(failed("recording the schema version"))?;
    }
    txn.commit().map_err(failed("committing the schema"))?;
    // PostgreSQL's identifiers (and so channel names) hold at most 63 bytes.
    let mut channel = format!("reasoning_ledger:{schema}");
    while channel.len() > 63 {
        channel.pop();
    }
    Ok(Some(channel))
}
