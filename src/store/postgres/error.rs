//! What goes wrong talking to PostgreSQL, said so that a user can act on it.
//!
//! Owns: [`PgError`] (every failure of this backend, each saying what happened to the
//! call: not recorded, maybe recorded, call again), how a driver error is described
//! (its own `Display` is only "db error") and classified (the connection is gone, or a
//! statement was refused: a unique key means another writer was first). Must not: retry
//! or reconnect (the pool does, in [`super::connect`]) or let a `postgres` type out of
//! this backend other than as an error's source. Why a TLS handshake failed is said by
//! [`super::tls`].

use crate::store::StoreError;

/// What went wrong talking to PostgreSQL, said so that a user knows what happened to the
/// call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PgError {
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
    /// The position key refused a new event: no other writer can have taken its position
    /// (every writer holds the counter's lock), so the counter is behind the stored
    /// positions, which is damage.
    #[error(
        "the ledger's position counter (ledger_counter) is behind the positions its events \
         hold, so a new event's position is already taken: damage, not a conflict. Nothing of \
         this call was recorded and calling again fails the same way; `reasoning-ledger \
         verify` says how to set the counter right"
    )]
    PositionTaken,
    #[error("a statement of this write transaction failed earlier: nothing of it was recorded")]
    FailedEarlier,
    #[error(
        "the database holds a ledger of schema version {found}, newer than this build knows \
         ({known}): upgrade reasoning-ledger to use it"
    )]
    SchemaTooNew { found: i64, known: i64 },
    #[error("not a PostgreSQL URL: {0}")]
    BadUrl(String),
    #[error("the PostgreSQL URL's TLS settings: {0}")]
    BadTls(String),
    #[error("cannot read the root certificates of {roots}: {reason}")]
    RootCerts { roots: String, reason: String },
    #[error("cannot connect to PostgreSQL at {target} over TLS: {cause}")]
    Tls { target: String, cause: String },
    #[error(
        "PostgreSQL at {target} refused the connection: {}{hint}",
        describe(source)
    )]
    Refused {
        target: String,
        source: postgres::Error,
        /// What to try, when the mode asked for explains it (empty otherwise).
        hint: &'static str,
    },
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
pub(super) fn connection_lost(error: &postgres::Error) -> bool {
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

/// Turns a failed statement into the store's error, saying what was being done.
pub(crate) fn query_error(what: &'static str) -> impl Fn(postgres::Error) -> StoreError {
    move |source| StoreError::backend(PgError::Query { what, source })
}

/// Whether `error` came from a statement the server refused (an aborted transaction:
/// nothing committed), as opposed to a connection lost with the outcome unknown.
pub(super) fn refused(error: &postgres::Error) -> bool {
    !error.is_closed() && !connection_lost(error)
}

/// The unique key on `ledger_events.position` (PostgreSQL's name for it).
const POSITION_KEY: &str = "ledger_events_position_key";

/// The error of a refused statement: a unique key says another writer was first, except
/// the position key, which says the counter is behind ([`PgError::PositionTaken`]).
pub(super) fn refusal(what: &'static str, source: postgres::Error) -> StoreError {
    if let Some(db) = source.as_db_error()
        && db.code().code() == "23505"
    {
        if db.constraint() == Some(POSITION_KEY) {
            return StoreError::backend(PgError::PositionTaken);
        }
        return StoreError::backend(PgError::KeyConflict {
            constraint: db.constraint().unwrap_or("a unique key").to_string(),
        });
    }
    query_error(what)(source)
}
