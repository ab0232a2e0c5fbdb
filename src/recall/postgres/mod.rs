//! Recall in a PostgreSQL ledger's own database: its full-text search ([`search`]) and
//! its vectors ([`vectors`]), reached through the one capability the store hands out
//! ([`Database`](crate::store::postgres::Database): the ledger's pool of connections). The tables are created by the
//! store's schema (one version for the database); only what is done with them lives here.
//!
//! Must not: write a ledger table, or reach PostgreSQL other than through that capability.

pub(crate) mod search;
pub(crate) mod vectors;

use crate::store::Ledger;

/// The full-text search of `ledger`'s own database, if it is kept in PostgreSQL (`None`:
/// the Tantivy index beside the ledger file serves).
pub(crate) fn text_search(ledger: &Ledger) -> Option<search::PgSearch> {
    ledger.database().map(search::PgSearch::new)
}

/// The vectors of `ledger` in its own database, if it is kept in PostgreSQL.
pub(crate) fn vector_store(ledger: &Ledger) -> Option<vectors::PgVectors> {
    ledger
        .database()
        .map(|database| vectors::PgVectors::new(database, ledger.families().clone()))
}
