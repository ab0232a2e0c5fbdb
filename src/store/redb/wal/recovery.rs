//! Recovery: bringing redb up to date with the redo log on every open by the process
//! holding the ledger ([`recover`]: the records after redb's `WAL_LSN`, in one commit with
//! a sync; a log that is not the ledger's or does not continue it gets a new key; damage
//! stops the replay before it), and the same in memory for a ledger this process may only
//! read ([`replay_in_memory`], never writing the log).
//!
//! Must not: apply a record past a damaged one or past the bound a reopen gives (a record
//! whose commit failed), or write a log that holds records it did not apply.

use super::record::{LogDamage, Put, Scan, Scanned};
use super::writer::{Log, Wal, log_error};
use crate::store::StoreError;
use crate::store::redb::store_error;
use crate::store::redb::tables::{
    ALIASES, EVENT_IDS, EVENTS, HEADS, META, POSITIONS, WAL_ID, WAL_LSN,
};
use redb::{Database, Durability, ReadableTable, WriteTransaction};

/// Writes `puts` into `txn`'s tables.
pub(super) fn apply(txn: &WriteTransaction, puts: &[Put]) -> Result<(), StoreError> {
    let mut events = txn.open_table(EVENTS).map_err(store_error)?;
    let mut ids = txn.open_table(EVENT_IDS).map_err(store_error)?;
    let mut positions = txn.open_table(POSITIONS).map_err(store_error)?;
    let mut heads = txn.open_table(HEADS).map_err(store_error)?;
    let mut aliases = txn.open_table(ALIASES).map_err(store_error)?;
    let mut meta = txn.open_table(META).map_err(store_error)?;
    for put in puts {
        match put {
            Put::Event { session, seq, row } => {
                events.insert((*session, *seq), row.as_slice()).map(drop)
            }
            Put::EventId { id, session, seq } => ids.insert(*id, (*session, *seq)).map(drop),
            Put::Position {
                position,
                session,
                seq,
            } => positions.insert(*position, (*session, *seq)).map(drop),
            Put::Head { session, row } => heads.insert(*session, row.as_slice()).map(drop),
            Put::Alias { alias, session } => aliases.insert(alias.as_str(), *session).map(drop),
            Put::Meta { key, value } => meta.insert(key.as_str(), *value).map(drop),
        }
        .map_err(store_error)?;
    }
    Ok(())
}

/// redb's name for its log ([`WAL_ID`]) and the last record it holds ([`WAL_LSN`]).
fn stored_position(txn: &WriteTransaction) -> Result<(Option<u64>, u64), StoreError> {
    let meta = txn.open_table(META).map_err(store_error)?;
    let get = |key: &str| -> Result<Option<u64>, StoreError> {
        Ok(meta.get(key).map_err(store_error)?.map(|v| v.value()))
    };
    Ok((get(WAL_ID)?, get(WAL_LSN)?.unwrap_or(0)))
}

/// What a look at the log found for a database whose meta says (`stored_id`,
/// `stored_lsn`).
struct Survey {
    /// The log is the one the ledger writes to.
    ours: bool,
    scan: Scan,
    damage: Option<LogDamage>,
}

impl Survey {
    fn of(wal: &Wal, stored_id: Option<u64>, stored_lsn: u64) -> Result<Survey, StoreError> {
        let ours = stored_id == Some(wal.id()) && !(wal.read_only && wal.created);
        if !ours {
            return Ok(Survey {
                ours,
                scan: Scan::default(),
                damage: None,
            });
        }
        let scan = wal.scan().map_err(log_error)?;
        let damage = wal.damage_after(&scan, stored_lsn).map_err(log_error)?;
        Ok(Survey { ours, scan, damage })
    }

    /// The records redb lacks (after `stored_lsn`, up to `bound`), and whether they
    /// continue it (the first is `stored_lsn + 1`).
    fn pending(&self, stored_lsn: u64, bound: Option<u64>) -> (Vec<&Scanned>, bool) {
        let pending: Vec<&Scanned> = self
            .scan
            .records
            .iter()
            .filter(|r| r.lsn > stored_lsn && bound.is_none_or(|bound| r.lsn <= bound))
            .collect();
        let continues = pending.first().is_none_or(|r| r.lsn == stored_lsn + 1);
        (pending, continues)
    }
}

/// Brings `db` up to date with the log, then starts the log again; run on every open of
/// the database by the process holding it. With `bound` (a reopen in the same process),
/// only records up to that lsn (the last one acknowledged) are applied: a record whose
/// commit failed is not.
///
/// Replays the records after redb's [`WAL_LSN`] in one transaction committed with a sync.
/// A log that is not this ledger's ([`WAL_ID`]), or whose records do not continue it, is
/// not replayed and gets a new key. A damaged record with acknowledged records beyond it
/// ([`LogDamage`], returned): only the records before it are replayed, and the log is
/// left exactly as it is and never written again by this handle.
pub(crate) fn recover(
    db: &Database,
    log: &Log,
    bound: Option<u64>,
) -> Result<Option<LogDamage>, StoreError> {
    let mut wal = log.lock();
    let mut txn = db.begin_write().map_err(store_error)?;
    let (stored_id, stored_lsn) = stored_position(&txn)?;
    let survey = Survey::of(&wal, stored_id, stored_lsn)?;
    let ours = survey.ours;
    let (pending, continues) = survey.pending(stored_lsn, bound);
    if let Some(damage) = &survey.damage {
        let mut last = stored_lsn;
        if continues && !pending.is_empty() {
            for record in &pending {
                apply(&txn, &record.puts)?;
                last = record.lsn;
            }
            {
                let mut meta = txn.open_table(META).map_err(store_error)?;
                meta.insert(WAL_LSN, last).map_err(store_error)?;
            }
            txn.set_durability(Durability::Immediate)
                .map_err(store_error)?;
            txn.commit().map_err(store_error)?;
        } else {
            txn.abort().map_err(store_error)?;
        }
        let (first, highest) = damage.lsn_range();
        // The open reports it (the handle's damage at open, said once by the ledger).
        tracing::debug!(
            log = %wal.path().display(),
            offset = damage.offset,
            lsn = damage.lsn,
            beyond = damage.beyond.len(),
            first,
            last = highest,
            replayed = if continues { pending.len() } else { 0 },
            "the redo log is damaged: a record does not read back and acknowledged records \
             follow it; only the records before it were replayed, and the log is kept as it is"
        );
        wal.last_lsn = last;
        wal.holds_records = true;
        wal.damage = Some(damage.clone());
        return Ok(Some(damage.clone()));
    }
    let records = &survey.scan.records;
    if ours && records.is_empty() {
        // An empty log: nothing to replay and nothing a new record could overwrite.
        txn.abort().map_err(store_error)?;
        wal.reset(stored_lsn);
        return Ok(None);
    }
    wal.holds_records = !records.is_empty();
    let mut last = stored_lsn;
    let replayed = ours && continues;
    if !replayed {
        if !continues {
            tracing::warn!(
                log = %wal.path().display(),
                ledger_lsn = stored_lsn,
                "the redo log does not continue this ledger (was the ledger file put back \
                 from a copy?): its records are not replayed"
            );
        }
        if !std::mem::take(&mut wal.created) {
            wal.rekey().map_err(log_error)?;
        }
        if let Some(record) = records.last() {
            last = last.max(record.lsn);
        }
    } else {
        for record in &pending {
            apply(&txn, &record.puts)?;
            last = record.lsn;
        }
        tracing::info!(
            records = pending.len(),
            last_lsn = last,
            "replayed the redo log into the ledger"
        );
    }
    {
        let mut meta = txn.open_table(META).map_err(store_error)?;
        meta.insert(WAL_ID, wal.id()).map_err(store_error)?;
        meta.insert(WAL_LSN, last).map_err(store_error)?;
    }
    // A replay commits with a sync even when it applied nothing: redb may have read commits
    // that are in the page cache only (the process was killed, the system was not), and the
    // records that hold them are about to be overwritten. A new name for the log commits
    // without one (an open pays no sync for it): the first commit after it syncs instead.
    let durability = if replayed {
        Durability::Immediate
    } else {
        Durability::None
    };
    txn.set_durability(durability).map_err(store_error)?;
    txn.commit().map_err(store_error)?;
    wal.reset(last);
    wal.id_pending = !replayed;
    Ok(None)
}

/// What [`replay_in_memory`] applied and found.
#[derive(Debug, Default)]
pub(crate) struct Replayed {
    /// Records applied.
    pub(crate) records: usize,
    /// A damaged record with acknowledged records beyond it (only those before it were
    /// applied).
    pub(crate) damage: Option<LogDamage>,
    /// Why the log's records were not applied, when they were not.
    pub(crate) skipped: Option<String>,
}

/// Applies the records redb lacks to `db`, a database whose writes stay in memory (the
/// read-only view of [`super::super::overlay`]), as [`recover`] would, without ever writing the
/// log: no new key, no reset, no clear, no `meta` row. A log that is not the ledger's or
/// does not continue it is not applied (said in [`Replayed::skipped`]); a damaged record
/// ends what is applied ([`Replayed::damage`]).
pub(crate) fn replay_in_memory(db: &Database, log: &Log) -> Result<Replayed, StoreError> {
    let mut wal = log.lock();
    let mut txn = db.begin_write().map_err(store_error)?;
    let (stored_id, stored_lsn) = stored_position(&txn)?;
    let survey = Survey::of(&wal, stored_id, stored_lsn)?;
    let (pending, continues) = survey.pending(stored_lsn, None);
    let mut replayed = Replayed {
        damage: survey.damage.clone(),
        ..Replayed::default()
    };
    if !survey.ours && !wal.created {
        replayed.skipped = Some(format!(
            "{} is not the log this ledger writes to: its records are not read",
            wal.path().display()
        ));
    } else if !continues {
        replayed.skipped = Some(format!(
            "{} does not continue this ledger (its first record is {}, the ledger holds up to \
             {stored_lsn}): its records are not read",
            wal.path().display(),
            pending.first().map_or(0, |r| r.lsn)
        ));
    }
    if replayed.skipped.is_some() || pending.is_empty() {
        txn.abort().map_err(store_error)?;
    } else {
        for record in &pending {
            apply(&txn, &record.puts)?;
            wal.last_lsn = record.lsn;
        }
        replayed.records = pending.len();
        txn.set_durability(Durability::None).map_err(store_error)?;
        txn.commit().map_err(store_error)?;
    }
    wal.damage = replayed.damage.clone();
    Ok(replayed)
}

#[cfg(test)]
mod tests {
    //! Replay: damage, a torn tail, older rounds, in memory.

    use super::*;
    use crate::store::redb::wal::memory::{
        MemoryFile, database, meta, open, pending_records, put, write_records,
    };
    use crate::store::redb::wal::record::HEADER_BYTES;
    use crate::store::redb::wal::writer::LedgerState;
    use std::path::Path;

    #[test]
    fn a_damaged_record_with_acknowledged_ones_after_it_is_damage_replayed_only_before_it_and_the_log_is_never_written()
     {
        let file = MemoryFile::default();
        let (db, offsets) = pending_records(&file, 6);
        // Sixteen bytes flipped a third of the way in: inside record 2's payload.
        file.edit(|bytes| {
            for b in &mut bytes[offsets[1] as usize + 20..offsets[1] as usize + 36] {
                *b ^= 0x5a;
            }
        });
        let before = file.bytes();
        let log = Log::new(open(&file));
        let damage = recover(&db, &log, None)
            .unwrap()
            .expect("damage, not a torn tail");
        assert_eq!(damage.offset, offsets[1]);
        assert_eq!(damage.lsn, 2);
        // The records are small: the flip reached into record 3's head too.
        assert_eq!(damage.beyond.len(), 3, "records 4 to 6 lie beyond it");
        assert_eq!(damage.lsn_range(), (4, 6));
        assert_eq!(damage.beyond[0].0, offsets[3]);
        let text = damage.describe(Path::new("d/ledger.wal"));
        assert!(text.contains("3 acknowledged record(s)"), "{text}");
        assert!(text.contains("lsn 4 to 6"), "{text}");
        // Only record 1 is in redb; nothing past the damage.
        assert_eq!(meta(&db, "k1"), Some(1));
        assert_eq!(meta(&db, "k3"), None);
        assert_eq!(meta(&db, WAL_LSN), Some(1));
        assert_eq!(file.bytes(), before, "the log is left byte for byte");
        // The log refuses every write, clear and new key while it holds them.
        {
            let mut wal = log.lock();
            let record = wal.encode(2, &put(2));
            assert!(wal.write(&record).is_err());
            assert!(wal.clear().is_err());
            assert!(wal.rekey().is_err());
            let read = wal.read_record(damage.beyond[0].0).unwrap();
            assert_eq!(read, Some((4, put(4))), "recover can read what lies beyond");
        }
        assert_eq!(file.bytes(), before);
        // Opened again: the same damage, still nothing written.
        let log = Log::new(open(&file));
        assert_eq!(recover(&db, &log, None).unwrap(), Some(damage));
        assert_eq!(meta(&db, "k3"), None);
        assert_eq!(file.bytes(), before);
    }

    #[test]
    fn a_damaged_first_record_with_acknowledged_ones_after_it_is_damage_too() {
        let file = MemoryFile::default();
        let (db, offsets) = pending_records(&file, 3);
        // Its length field: the scan cannot even tell where it ends.
        file.edit(|bytes| bytes[offsets[0] as usize] ^= 0xff);
        let before = file.bytes();
        let log = Log::new(open(&file));
        let damage = recover(&db, &log, None).unwrap().expect("damage");
        assert_eq!((damage.offset, damage.lsn), (HEADER_BYTES, 1));
        assert_eq!(damage.lsn_range(), (2, 3));
        assert_eq!(meta(&db, "k1"), None);
        assert_eq!(file.bytes(), before);
    }

    #[test]
    fn a_torn_tail_is_dropped_without_a_word_as_before() {
        let file = MemoryFile::default();
        let (db, offsets) = pending_records(&file, 4);
        // The last record was being written when the machine stopped: half of it is zeros.
        let end = file.bytes().len();
        file.edit(|bytes| {
            let torn = offsets[3] as usize + 24;
            bytes[torn..end].fill(0);
        });
        let log = Log::new(open(&file));
        assert_eq!(recover(&db, &log, None).unwrap(), None);
        assert_eq!(meta(&db, "k3"), Some(3));
        assert_eq!(meta(&db, "k4"), None);
        assert_eq!(meta(&db, WAL_LSN), Some(3));
        // The log starts again and takes records.
        let mut wal = log.lock();
        assert_eq!(wal.tail, HEADER_BYTES);
        let record = wal.encode(4, &put(4));
        wal.write(&record).unwrap();
    }

    #[test]
    fn a_torn_record_before_older_rounds_and_a_record_begun_again_at_its_lsn_is_not_damage() {
        let file = MemoryFile::default();
        let (db, _) = pending_records(&file, 5);
        let log = Log::new(open(&file));
        assert_eq!(recover(&db, &log, None).unwrap(), None, "replays 1 to 5");
        let mut wal = log.lock();
        write_records(&mut wal, 6..=7);
        // Record 8 synced, its redb commit failed: not acknowledged, the tail stays.
        let stale = wal.encode(8, &put(80));
        wal.write(&stale).unwrap();
        drop(wal);
        // The reopen's recovery applies up to the last acknowledged record and starts a
        // new round, whose first record (8 again) is torn by a crash.
        assert_eq!(recover(&db, &log, Some(7)).unwrap(), None);
        assert_eq!((meta(&db, "k7"), meta(&db, "k8")), (Some(7), None));
        let mut wal = log.lock();
        let again = wal.encode(8, &put(8));
        wal.write(&again).unwrap();
        drop(wal);
        file.edit(|bytes| bytes[HEADER_BYTES as usize + 25] ^= 1);
        let log = Log::new(open(&file));
        assert_eq!(
            recover(&db, &log, None).unwrap(),
            None,
            "older rounds and a record of the same lsn are a torn tail's neighbours"
        );
        assert_eq!(meta(&db, "k8"), None);
    }

    #[test]
    fn replaying_in_memory_applies_what_redb_lacks_and_never_writes_the_log() {
        let file = MemoryFile::default();
        let (db, offsets) = pending_records(&file, 4);
        let before = file.bytes();
        let writes = file.ops().len();
        let read_only = |file: &MemoryFile| {
            Log::new(
                Wal::open_read_only(
                    Some(Box::new(file.clone())),
                    Path::new("t.wal"),
                    LedgerState::Unclean,
                )
                .unwrap(),
            )
        };
        let replayed = replay_in_memory(&db, &read_only(&file)).unwrap();
        assert_eq!(replayed.records, 4);
        assert!(replayed.damage.is_none() && replayed.skipped.is_none());
        assert_eq!(meta(&db, "k4"), Some(4));
        assert_eq!(meta(&db, WAL_LSN), Some(0), "no meta row is written");

        // Damaged: the records before it only.
        let db = database();
        {
            let mut txn = db.begin_write().unwrap();
            txn.open_table(META)
                .unwrap()
                .insert(WAL_ID, read_only(&file).lock().id())
                .unwrap();
            txn.set_durability(Durability::None).unwrap();
            txn.commit().unwrap();
        }
        file.edit(|bytes| bytes[offsets[2] as usize + 22] ^= 1);
        let damaged = file.bytes();
        let log = read_only(&file);
        let replayed = replay_in_memory(&db, &log).unwrap();
        assert_eq!(replayed.records, 2);
        assert_eq!(replayed.damage.as_ref().unwrap().lsn_range(), (4, 4));
        assert_eq!(meta(&db, "k2"), Some(2));
        assert_eq!(meta(&db, "k4"), None);
        let mut wal = log.lock();
        let record = wal.encode(3, &put(3));
        assert!(
            wal.write(&record).is_err(),
            "a read-only log is never written"
        );
        assert_eq!(file.ops().len(), writes, "nothing was written or synced");
        assert_ne!(before, damaged);
        assert_eq!(file.bytes(), damaged);

        // A missing log: nothing to replay, nothing said.
        let missing =
            Log::new(Wal::open_read_only(None, Path::new("t.wal"), LedgerState::Unclean).unwrap());
        let replayed = replay_in_memory(&database(), &missing).unwrap();
        assert!(replayed.records == 0 && replayed.skipped.is_none());
    }
}
