//! Salvage's reading of a PostgreSQL ledger (`recover --to`): the bytes of every row of
//! `ledger_events` and `ledger_heads`, handed to the same scan that reads a redb file's
//! bytes ([`Scan`]), so that what is kept is only what verifies itself.
//!
//! Owns: [`salvage_url`] (what `recover` calls) and [`scan_tables`] (one read-only REPEATABLE READ transaction; each table read
//! through a cursor, [`SALVAGE_FETCH_ROWS`] rows a fetch, in the order the table is
//! stored: no index, no key column and no position is trusted or needed). Must not: write
//! anything, migrate or lock the schema (the ledger may be damaged; other servers may be
//! running on it), or decide what an event is (the scan does).

use super::connect::{Target, blocking, redact_url};
use super::error::PgError;
use crate::event::Families;
use crate::store::salvage::{Found, SalvageError, Scan, SourceReport};

/// Rows one `FETCH` reads: memory stays flat however big the tables are.
pub(crate) const SALVAGE_FETCH_ROWS: usize = 512;

/// The tables read, each with the column that holds a row's bytes.
const TABLES: [(&str, &str); 2] = [("ledger_events", "row"), ("ledger_heads", "head")];

fn failed(what: &'static str) -> impl Fn(postgres::Error) -> PgError {
    move |source| PgError::Query { what, source }
}

/// Reads every row of the PostgreSQL ledger at `url` (`ledger_events` and `ledger_heads`,
/// with plain queries in one read-only transaction: nothing is written, no key column or
/// index is trusted) and keeps each event whose hash verifies, as `store::salvage::salvage_dir` does
/// with a file's bytes.
pub(crate) fn salvage_url(url: &str, families: Families) -> Result<Found, SalvageError> {
    let label = redact_url(url);
    let mut scan = Scan::new(families);
    let sources = scan_tables(url, &mut scan)
        .map_err(|source| SalvageError::Database {
            label: label.clone(),
            source,
        })?
        .ok_or(SalvageError::NoTables { label })?;
    let (events, heads) = scan.finish();
    Ok(Found {
        events,
        heads,
        sources,
    })
}

/// Feeds every row of the ledger at `url` to `scan`; a report per table, named as
/// `<url without password> table <name>`. `None` when the schema holds no ledger (neither
/// table is there).
pub(crate) fn scan_tables(
    url: &str,
    scan: &mut Scan,
) -> Result<Option<Vec<SourceReport>>, PgError> {
    blocking(|| {
        let label = redact_url(url);
        let mut client = Target::parse(url)?.connect()?;
        let mut txn = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(failed("beginning the salvage read"))?;
        let mut reports = Vec::new();
        for (index, (table, column)) in TABLES.iter().enumerate() {
            let mut report = SourceReport {
                name: format!("{label} table {table}"),
                ..SourceReport::default()
            };
            let there: bool = txn
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[table])
                .map_err(failed("looking for the ledger's tables"))?
                .get(0);
            if there {
                let cursor = format!("salvage_{index}");
                txn.batch_execute(&format!(
                    "DECLARE {cursor} NO SCROLL CURSOR FOR SELECT {column} FROM {table}"
                ))
                .map_err(failed("reading the ledger's rows"))?;
                let fetch = format!("FETCH {SALVAGE_FETCH_ROWS} FROM {cursor}");
                let mut bytes = 0u64;
                loop {
                    let rows = txn
                        .query(&fetch, &[])
                        .map_err(failed("reading the ledger's rows"))?;
                    for row in &rows {
                        // NULL (a damaged table without its NOT NULL) holds nothing.
                        if let Some(value) = row.get::<_, Option<&[u8]>>(0) {
                            bytes += value.len() as u64;
                            scan.bytes(value, &mut report);
                        }
                    }
                    if rows.len() < SALVAGE_FETCH_ROWS {
                        break;
                    }
                }
                report.bytes = Some(bytes);
            }
            reports.push(report);
        }
        // Read only: nothing to keep.
        let _ = txn.rollback();
        if reports.iter().all(|r| r.bytes.is_none()) {
            return Ok(None);
        }
        Ok(Some(reports))
    })
}
