//! Why the store has the pieces it has: one append made durable by redb alone (its own
//! commit with a sync, in the mode that lets only this process open the file and in the
//! mode that lets every process write it), by our store (redb beside the redo log), by our
//! store with every commit redb's own (no log), and the floor (one 4 KiB overwrite and
//! `fdatasync`), interleaved in one run on one filesystem.
//!
//! Owns: the scratch redb files it creates (a copy of an append's shape: the four tables an
//! append writes, with keys of the same types and an event-sized value) and the figures.
//! Must not: judge them, or open the ledger's own tables (the store's append goes through
//! the library like any caller's).

use crate::postgres::StoreAppends;
use crate::servers::PageSync;
use crate::servers::stats::{fmt_duration, median};
use anyhow::Context;
use reasoning_ledger::testing::{LEDGER_FILE_NAME, Ledger, families, open_ledger_redb_alone};
use redb::{ConcurrencyMode, Database, Durability, TableDefinition};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

/// Appends before the measured ones, per way.
const WARMUP_APPENDS: usize = 50;

/// Bytes of the event row each append writes (about one stored thought event).
const EVENT_ROW_BYTES: usize = 400;

/// The four tables one append writes, keyed as the store keys them (`store/redb/tables.rs`).
const EVENTS: TableDefinition<(u128, u64), &[u8]> = TableDefinition::new("events");
const HEADS: TableDefinition<u128, &[u8]> = TableDefinition::new("heads");
const EVENT_IDS: TableDefinition<u128, (u128, u64)> = TableDefinition::new("event_ids");
const POSITIONS: TableDefinition<u64, (u128, u64)> = TableDefinition::new("positions");

/// p50 of one durable append, each way.
#[derive(Serialize)]
pub(crate) struct DurabilityFigures {
    pub appends: usize,
    /// Events in our store's two ledgers before the measured appends.
    pub filled_events: u64,
    /// The filesystem of the scratch directory, per `/proc/self/mounts`.
    pub filesystem: Option<String>,
    /// One 4 KiB overwrite and `fdatasync`: the floor of any durable append.
    pub floor_p50_us: f64,
    /// redb alone, one process holds the file: a commit with `Durability::Immediate`.
    pub redb_exclusive_p50_us: f64,
    /// redb alone, every process may write (`ConcurrencyMode::MultiWriter`): what letting
    /// a CLI or a second server write without a host would cost each commit.
    pub redb_multi_writer_p50_us: f64,
    /// Our store: the group's rows as one synced record of the redo log, redb unsynced.
    pub store_p50_us: f64,
    /// Our store without its log: every commit redb's own, synced (a checkpoint each).
    pub store_redb_alone_p50_us: f64,
}

impl std::fmt::Display for DurabilityFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let us = |v: f64| fmt_duration(Duration::from_secs_f64(v / 1e6));
        let row = |f: &mut std::fmt::Formatter<'_>, what: &str, v: f64| {
            writeln!(f, "| {what} | {} | {:.2} × |", us(v), v / self.floor_p50_us)
        };
        writeln!(
            f,
            "## Durability: one append, p50 of {} ({}; our store's ledgers hold {} events first)\n",
            self.appends,
            self.filesystem.as_deref().unwrap_or("filesystem unknown"),
            self.filled_events
        )?;
        writeln!(f, "| way | p50 | × the floor |")?;
        writeln!(f, "|---|---|---|")?;
        row(f, "floor: 4 KiB overwrite + fdatasync", self.floor_p50_us)?;
        row(
            f,
            "redb alone, one process (Durability::Immediate)",
            self.redb_exclusive_p50_us,
        )?;
        row(
            f,
            "redb alone, every process writes (MultiWriter)",
            self.redb_multi_writer_p50_us,
        )?;
        row(
            f,
            "our store (redo log synced, redb not)",
            self.store_p50_us,
        )?;
        row(
            f,
            "our store on redb alone (every commit redb's, synced)",
            self.store_redb_alone_p50_us,
        )
    }
}

/// Measures the five ways in `scratch` (created if missing), `appends` each, interleaved:
/// each round appends once each way, so the disk's other writers weigh on all alike. Our
/// store's two ledgers first get a session of `filled_events` events (in batches), so a
/// commit meets trees as deep as a used ledger's; redb alone's files start empty.
pub(crate) fn run(
    scratch: &Path,
    appends: usize,
    filled_events: u64,
) -> anyhow::Result<DurabilityFigures> {
    let dir = scratch.join("durability");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut floor = PageSync::create(&dir.join(FLOOR_FILE_NAME))?;
    let mut exclusive = RedbAlone::create(
        &dir.join("exclusive.redb"),
        ConcurrencyMode::ExclusiveWriter,
    )?;
    let mut multi_writer =
        RedbAlone::create(&dir.join("multi-writer.redb"), ConcurrencyMode::MultiWriter)?;
    let store_dir = dir.join("store");
    let alone_dir = dir.join("store-redb-alone");
    for old in [&store_dir, &alone_dir] {
        let _ = std::fs::remove_dir_all(old);
    }
    let ledger = Ledger::open(&store_dir, families())?;
    std::fs::create_dir_all(&alone_dir)?;
    let ledger_alone = open_ledger_redb_alone(&alone_dir.join(LEDGER_FILE_NAME), families())?;
    if filled_events > 0 {
        crate::ledger::build_session(&ledger, filled_events)?;
        crate::ledger::build_session(&ledger_alone, filled_events)?;
    }
    let mut store = StoreAppends::start(&ledger)?;
    let mut store_alone = StoreAppends::start(&ledger_alone)?;
    let mut samples: [Vec<Duration>; 5] = Default::default();
    for round in 0..appends + WARMUP_APPENDS {
        let times = [
            timed(|| floor.sync_one())?,
            timed(|| exclusive.append())?,
            timed(|| multi_writer.append())?,
            timed(|| store.append())?,
            timed(|| store_alone.append())?,
        ];
        if round >= WARMUP_APPENDS {
            for (way, time) in samples.iter_mut().zip(times) {
                way.push(time);
            }
        }
    }
    drop((ledger, ledger_alone));
    for path in [
        dir.join(FLOOR_FILE_NAME),
        dir.join("exclusive.redb"),
        dir.join("multi-writer.redb"),
    ] {
        let _ = std::fs::remove_file(path);
    }
    let [floor, exclusive, multi_writer, store, store_alone] = samples.map(|mut way| {
        way.sort_unstable();
        median(&way).as_secs_f64() * 1e6
    });
    Ok(DurabilityFigures {
        appends,
        filled_events,
        filesystem: crate::servers::filesystem_of(&dir),
        floor_p50_us: floor,
        redb_exclusive_p50_us: exclusive,
        redb_multi_writer_p50_us: multi_writer,
        store_p50_us: store,
        store_redb_alone_p50_us: store_alone,
    })
}

/// How long `append` took.
fn timed(append: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<Duration> {
    let start = Instant::now();
    append()?;
    Ok(start.elapsed())
}

/// Name of the floor's scratch file in the durability directory.
const FLOOR_FILE_NAME: &str = "floor.tmp";

/// redb on its own: an append's rows in one transaction committed with
/// `Durability::Immediate`, on a new file in one concurrency mode.
struct RedbAlone {
    db: Database,
    row: Vec<u8>,
    seq: u64,
}

/// The session every scratch row belongs to.
const SESSION: u128 = 0x0193_0000_0000_0000_0000_0000_0000_0001;

impl RedbAlone {
    fn create(path: &Path, mode: ConcurrencyMode) -> anyhow::Result<Self> {
        let _ = std::fs::remove_file(path);
        let db = Database::builder()
            .set_concurrency_mode(mode)
            .create(path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(RedbAlone {
            db,
            row: vec![0x5a; EVENT_ROW_BYTES],
            seq: 0,
        })
    }

    fn append(&mut self) -> anyhow::Result<()> {
        let seq = self.seq;
        self.seq += 1;
        let mut txn = self.db.begin_write()?;
        txn.set_durability(Durability::Immediate)?;
        {
            let mut events = txn.open_table(EVENTS)?;
            events.insert((SESSION, seq), self.row.as_slice())?;
            let mut heads = txn.open_table(HEADS)?;
            heads.insert(SESSION, &self.row[..EVENT_ROW_BYTES / 4])?;
            let mut ids = txn.open_table(EVENT_IDS)?;
            ids.insert(u128::from(seq) << 64 | 0xe1, (SESSION, seq))?;
            let mut positions = txn.open_table(POSITIONS)?;
            positions.insert(seq, (SESSION, seq))?;
        }
        txn.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_each_way_and_leaves_only_the_two_ledgers() {
        let scratch = tempfile::tempdir().unwrap();
        let figures = run(scratch.path(), 3, 10).unwrap();
        for p50 in [
            figures.floor_p50_us,
            figures.redb_exclusive_p50_us,
            figures.redb_multi_writer_p50_us,
            figures.store_p50_us,
            figures.store_redb_alone_p50_us,
        ] {
            assert!(p50 > 0.0, "{p50}");
        }
        assert_eq!(figures.to_string().matches("\n| ").count(), 6);
        let mut left: Vec<String> = std::fs::read_dir(scratch.path().join("durability"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["store", "store-redb-alone"]);
        // Redb alone's ledger never put a record in its log: only the header is there.
        let log = scratch
            .path()
            .join("durability/store-redb-alone/ledger.wal");
        assert!(std::fs::metadata(log).unwrap().len() <= 4096);
    }
}
