//! The lasting damage verdicts of a team's ledger: the table `ledger_damage` (DESIGN §15).
//!
//! Owns: [`PgVerdicts`] (the [`VerdictStore`] over the table: load, record, clear, each in
//! a statement of its own on a pooled connection, committed at once whatever transaction
//! found the damage) and [`VERDICTS_SQL`] / [`verdicts_of`], the statement every write
//! transaction sends with its `BEGIN` and how its rows are read: a write sees every
//! verdict recorded before it took the ledger's lock, at no extra round trip. Must not:
//! decide what is damage.

use super::connect::{Pool, blocking};
use super::database::{session_key, session_of};
use super::error::query_error;
use crate::store::StoreError;
use crate::store::verdict::{MAX_VERDICTS, Verdict, VerdictStore};
use std::sync::{Arc, Weak};

/// The verdicts as a write transaction reads them with its `BEGIN` (session as hex, or
/// NULL for the whole ledger; detail; time): a macro, so that the `BEGIN` message is one
/// literal (`concat!`).
macro_rules! verdicts_sql {
    () => {
        "SELECT encode(session,'hex'), detail, at FROM ledger_damage ORDER BY at LIMIT 4096;"
    };
}
pub(super) use verdicts_sql;

/// [`verdicts_sql!`] as a statement of its own.
const VERDICTS_SQL: &str = verdicts_sql!();

// The statement's limit is the store's.
const _: () = assert!(MAX_VERDICTS == 4096);

/// The verdicts in the rows [`VERDICTS_SQL`] answered; a row that cannot be read is a
/// verdict on the whole ledger (the record of damage is itself damaged).
pub(super) fn verdicts_of(rows: &[postgres::SimpleQueryRow]) -> Vec<Verdict> {
    rows.iter()
        .map(|row| {
            let session = match row.get(0) {
                None => Ok(None),
                Some(text) => hex::decode(text)
                    .map_err(|_| StoreError::Corrupt("not hex".into()))
                    .and_then(|bytes| session_of(&bytes))
                    .map(Some),
            };
            let at = row.get(2).and_then(|at| at.parse::<u64>().ok());
            match (session, row.get(1), at) {
                (Ok(session), Some(detail), Some(at)) => Verdict {
                    session,
                    detail: detail.to_string(),
                    at,
                },
                _ => Verdict::now(None, "a row of ledger_damage cannot be read"),
            }
        })
        .collect()
}

/// The table `ledger_damage` as a [`VerdictStore`].
pub(crate) struct PgVerdicts {
    /// The backend's pool, not kept alive by this: a connection must be dropped off the
    /// async workers, where the writer thread drops the backend (the ledger's record of
    /// damage may be dropped last, anywhere).
    pool: Weak<Pool>,
}

impl PgVerdicts {
    pub(super) fn new(pool: &Arc<Pool>) -> PgVerdicts {
        PgVerdicts {
            pool: Arc::downgrade(pool),
        }
    }

    fn run<T>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let pool = self.pool.upgrade().ok_or(StoreError::WriterGone)?;
        let mut pooled = pool.client()?;
        match blocking(|| f(pooled.get())) {
            Ok(value) => Ok(value),
            Err(error) => {
                pooled.discard();
                Err(query_error(what)(error))
            }
        }
    }
}

impl VerdictStore for PgVerdicts {
    fn load(&self) -> Result<Vec<Verdict>, StoreError> {
        let messages = self.run("reading the damage verdicts", |client| {
            client.simple_query(VERDICTS_SQL)
        })?;
        let rows: Vec<postgres::SimpleQueryRow> = messages
            .into_iter()
            .filter_map(|message| match message {
                postgres::SimpleQueryMessage::Row(row) => Some(row),
                _ => None,
            })
            .collect();
        Ok(verdicts_of(&rows))
    }

    fn record(&self, verdict: &Verdict) -> Result<(), StoreError> {
        let session: Option<Vec<u8>> = verdict.session.map(|s| session_key(s).to_vec());
        let at = i64::try_from(verdict.at).unwrap_or(i64::MAX);
        let detail = verdict.detail.as_str();
        self.run("recording a damage verdict", |client| {
            client.execute(
                "INSERT INTO ledger_damage (session, detail, at) SELECT $1, $2, $3 \
                 WHERE NOT EXISTS (SELECT 1 FROM ledger_damage WHERE session IS NOT DISTINCT FROM $1) \
                 AND (SELECT count(*) FROM ledger_damage) < 4096",
                &[&session, &detail, &at],
            )
        })?;
        Ok(())
    }

    fn clear(&self) -> Result<(), StoreError> {
        self.run("clearing the damage verdicts", |client| {
            client.batch_execute("DELETE FROM ledger_damage")
        })
    }
}
