//! The one capability the PostgreSQL backend hands out: this ledger's database, for what
//! keeps derived data in it beside the ledger's tables (recall's full-text search and
//! vectors, `crate::recall::postgres`).
//!
//! Owns: [`Database`] (the backend's pool: a pooled connection, or one of its own for a
//! session-level lock) and the column encodings the ledger's tables use, so derived
//! tables key rows the same way ([`session_key`], [`session_of`], [`to_i64`]). Must not:
//! run a query, or hand out a way to write a ledger table other than by SQL its holder
//! writes (the holder keeps to its own tables; the schema's versions stay in
//! [`super::schema`]).

use super::connect::Pool;
use crate::event::SessionId;
use crate::store::StoreError;
use std::sync::Arc;

pub(crate) use super::connect::{Pooled, blocking};
pub(crate) use super::error::query_error;
pub(crate) use super::schema::{quote_ident, quote_literal};

/// The key of an id (event or session): its 16 bytes, big-endian.
pub(super) fn key(id: u128) -> [u8; 16] {
    id.to_be_bytes()
}

/// The key of a session.
pub(crate) fn session_key(session: SessionId) -> [u8; 16] {
    key(session.0.0)
}

pub(crate) fn session_of(bytes: &[u8]) -> Result<SessionId, StoreError> {
    let bytes: [u8; 16] = bytes
        .try_into()
        .map_err(|_| StoreError::Corrupt("a session key is not 16 bytes".into()))?;
    Ok(SessionId(ulid::Ulid(u128::from_be_bytes(bytes))))
}

/// `n` as a `bigint` (positions and seqs never come near its limit).
pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// This ledger's PostgreSQL database: its backend's pool of connections.
#[derive(Clone)]
pub(crate) struct Database {
    pool: Arc<Pool>,
}

impl Database {
    pub(super) fn new(pool: Arc<Pool>) -> Database {
        Database { pool }
    }

    /// An idle connection of the pool, or a new one; back in the pool when dropped
    /// (unless [`Pooled::discard`]ed).
    pub(crate) fn client(&self) -> Result<Pooled<'_>, StoreError> {
        self.pool.client()
    }

    /// A new connection outside the pool (one that holds a session-level lock).
    pub(crate) fn connect(&self) -> Result<postgres::Client, super::PgError> {
        blocking(|| self.pool.target.connect())
    }

    /// The database at `url` with a pool of its own (nothing shared with a ledger open on
    /// it: a new server's view).
    #[cfg(test)]
    pub(crate) fn open_for_tests(url: &str) -> Database {
        let target = Arc::new(super::connect::Target::parse(url).unwrap());
        let first = target.connect().unwrap();
        Database::new(Arc::new(Pool::new(target, first)))
    }
}
