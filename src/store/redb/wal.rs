//! The redo log in front of redb (DESIGN §3): one small sync per group commit.
//!
//! A redb commit dirties a dozen scattered pages (four tables per append, redb's own trees
//! and header), and a sync costs by the pages it flushes. So the host writes each group's
//! table writes as one record at the tail of `ledger.wal` (beside `ledger.redb`, 0600),
//! syncs that (one or two pages), and then commits the redb transaction without a sync
//! (`Durability::None`: visible to this process at once). Every [`LogSize::capacity`] bytes
//! of records, when the writer has been idle a while, and when the ledger closes, one redb
//! commit with a sync (a checkpoint) makes everything before it durable in redb itself and
//! the log starts again at its beginning.
//!
//! Owns: the log file's format ([`Wal`]: a header page naming the file and its checksum key,
//! then records `[len u32][checksum 8][lsn u64][payload]`, payload = postcard of the
//! [`Put`]s, i.e. the exact rows the commit wrote), [`LogFile`] (what the log needs of a
//! file, so the fault model can stand in for it), and [`recover`] (replaying the records
//! redb lacks). Must not: hold an append rule, or let a record count as written before its
//! sync returned.
//!
//! Invariants:
//! - The `meta` row [`WAL_LSN`] is written by the commits with a sync only (a checkpoint, a
//!   replay, a record too big for the log), so it names the last record redb holds
//!   durably: replay applies every record after it (lsn `WAL_LSN + 1`, `+ 2` …, read from
//!   the log's start while each checksum holds and the lsns follow each other). redb may
//!   also hold some of them (commits without a sync that reached the file before a kill):
//!   a record is the rows its commit wrote, each put whole, so applying it again over
//!   them leaves the same tables. A commit without a sync thus touches only the tables
//!   its rows are in (each table a commit touches costs redb a root update).
//! - The log starts again at its beginning only after a commit with a sync; a record of an
//!   older round fails the lsn test (smaller lsn) and ends the scan.
//! - [`WAL_ID`] in `meta` names the log this ledger writes to; a log with another id (a
//!   ledger file put back from a copy, a log of another file) is never replayed: it gets a
//!   new key (which invalidates every record in it) before the ledger writes to it.
//! - A record is written only while redb's `WAL_ID` naming the log is synced (a new name is
//!   committed without a sync; the commit after it syncs redb instead of writing a record).
//! - A clean close checkpoints, then clears the log: it then holds nothing to replay.
//! - The file is written with zeros ahead of the tail ([`LogSize::growth`] at a time, up to
//!   the capacity), so a record's sync flushes its own pages and no file-size change.

use super::store_error;
use super::tables::{ALIASES, EVENT_IDS, EVENTS, HEADS, META, POSITIONS, WAL_ID, WAL_LSN};
use crate::store::StoreError;
use redb::{Database, Durability, ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Size of the header page at the start of the log (magic, format version, key).
pub(crate) const HEADER_BYTES: u64 = 4096;

/// The first bytes of every redo log.
const MAGIC: [u8; 8] = *b"RLDGWAL\0";

/// The record format this build writes and reads.
const FORMAT_VERSION: u32 = 1;

/// Bytes before a record's payload: length (u32), checksum (8 bytes), lsn (u64).
const RECORD_HEAD_BYTES: usize = 20;

/// Bytes of zeros written per call while growing the log.
const ZERO_CHUNK_BYTES: usize = 64 * 1024;

/// How big the log may grow, and by how much at a time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LogSize {
    /// The log's largest size, header included: records beyond it wait for a checkpoint.
    pub(crate) capacity: u64,
    /// Zeros written ahead of the tail at a time (one file-size change per step).
    pub(crate) growth: u64,
}

impl LogSize {
    /// The product's log: 8 MiB (about 10,000 one-thought commits between checkpoints),
    /// grown 256 KiB at a time so a new ledger does not write 8 MiB before its first call.
    pub(crate) const PRODUCT: LogSize = LogSize {
        capacity: 8 << 20,
        growth: 256 << 10,
    };
}

/// What the log needs of a file. A real file, or the fault model's disk in tests.
pub(crate) trait LogFile: Send + Sync {
    fn len(&self) -> io::Result<u64>;
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()>;
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes every write before it durable (`fdatasync`).
    fn sync(&self) -> io::Result<()>;
}

impl LogFile for std::fs::File {
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, out, offset)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self, data, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.sync_data()
    }
}

/// One row a commit wrote, as written (replay writes the same bytes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum Put {
    Event {
        session: u128,
        seq: u64,
        #[serde(serialize_with = "crate::store::codec::bytes_whole")]
        row: Vec<u8>,
    },
    EventId {
        id: u128,
        session: u128,
        seq: u64,
    },
    Position {
        position: u64,
        session: u128,
        seq: u64,
    },
    Head {
        session: u128,
        #[serde(serialize_with = "crate::store::codec::bytes_whole")]
        row: Vec<u8>,
    },
    Alias {
        alias: String,
        session: u128,
    },
    Meta {
        key: String,
        value: u64,
    },
}

/// Why the log could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WalError {
    #[error("{path} is not this build's redo log ({detail}): left as it is")]
    NotALog { path: PathBuf, detail: String },
    #[error("cannot use the redo log {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// The redo log as the host writes it.
pub(crate) struct Wal {
    file: Box<dyn LogFile>,
    path: PathBuf,
    size: LogSize,
    /// Keys the records' checksums; new with every new log (and every [`Wal::rekey`]).
    key: [u8; 32],
    /// How far the file is written (zeros ahead of the tail).
    written: u64,
    /// Where the next record goes.
    tail: u64,
    /// The lsn of the last record (or checkpoint) redb holds.
    last_lsn: u64,
    /// Whether the log may hold records (it was not cleared since).
    holds_records: bool,
    /// Whether this open created the log (its key is new: no record checks out under it).
    created: bool,
    /// Whether redb's [`WAL_ID`] naming this log is committed without a sync yet: until a
    /// commit with a sync, no record may be written (a crash would lose the name, and with
    /// it the records).
    id_pending: bool,
}

fn new_key() -> io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(io::Error::other)?;
    Ok(key)
}

impl Wal {
    /// Opens the log in `file`. An empty file, or one whose header was never written (all
    /// zeros: a creation cut short, before any record could be), becomes a new log. `path`
    /// names it in errors.
    pub(crate) fn open(
        file: Box<dyn LogFile>,
        path: &Path,
        size: LogSize,
    ) -> Result<Wal, WalError> {
        let io_error = |source| WalError::Io {
            path: path.to_path_buf(),
            source,
        };
        let len = file.len().map_err(io_error)?;
        let mut header = [0u8; 44];
        let readable = (len as usize).min(header.len());
        file.read_at(0, &mut header[..readable]).map_err(io_error)?;
        let blank = header.iter().all(|b| *b == 0);
        let mut wal = Wal {
            file,
            path: path.to_path_buf(),
            size,
            key: [0; 32],
            written: len,
            tail: HEADER_BYTES,
            last_lsn: 0,
            holds_records: false,
            created: blank,
            id_pending: false,
        };
        if blank {
            wal.key = new_key().map_err(io_error)?;
            wal.write_header().map_err(io_error)?;
            // Only the header is synced: the first record grows the file (a new ledger's
            // spawn does not wait for zeros it may never need).
            wal.written = wal.written.max(HEADER_BYTES);
            wal.file.sync().map_err(io_error)?;
            return Ok(wal);
        }
        let not_a_log = |detail: &str| WalError::NotALog {
            path: path.to_path_buf(),
            detail: detail.to_string(),
        };
        if len < HEADER_BYTES {
            return Err(not_a_log("shorter than its header"));
        }
        if header[..8] != MAGIC {
            return Err(not_a_log("no redo log magic"));
        }
        let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(not_a_log(&format!("format version {version}")));
        }
        wal.key.copy_from_slice(&header[12..44]);
        Ok(wal)
    }

    /// The log's name for `meta` ([`WAL_ID`]): taken from its key.
    pub(crate) fn id(&self) -> u64 {
        u64::from_le_bytes(self.key[..8].try_into().expect("8 bytes"))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn last_lsn(&self) -> u64 {
        self.last_lsn
    }

    /// Whether a checkpoint has something to do: records written since the last one, or
    /// the log's name not yet synced in redb.
    pub(crate) fn needs_checkpoint(&self) -> bool {
        self.tail > HEADER_BYTES || self.id_pending
    }

    fn write_header(&self) -> io::Result<()> {
        let mut page = vec![0u8; HEADER_BYTES as usize];
        page[..8].copy_from_slice(&MAGIC);
        page[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        page[12..44].copy_from_slice(&self.key);
        self.file.write_at(0, &page)
    }

    /// Gives the log a new key: every record in it stops checking out. Synced.
    fn rekey(&mut self) -> io::Result<()> {
        self.key = new_key()?;
        self.write_header()?;
        self.file.sync()
    }

    /// Writes zeros so the file reaches at least `end` (by whole growth steps, never past
    /// the capacity unless `end` is).
    fn grow_to(&mut self, end: u64) -> io::Result<()> {
        if end <= self.written {
            return Ok(());
        }
        let target = (self.written.max(HEADER_BYTES) + self.size.growth)
            .min(self.size.capacity)
            .max(end);
        let zeros = vec![0u8; ZERO_CHUNK_BYTES];
        let mut at = self.written;
        while at < target {
            let step = (target - at).min(ZERO_CHUNK_BYTES as u64) as usize;
            self.file.write_at(at, &zeros[..step])?;
            at += step as u64;
        }
        self.written = target;
        Ok(())
    }

    fn checksum(&self, len: u32, lsn: u64, payload: &[u8]) -> [u8; 8] {
        let mut hasher = blake3::Hasher::new_keyed(&self.key);
        hasher.update(&len.to_le_bytes());
        hasher.update(&lsn.to_le_bytes());
        hasher.update(payload);
        let hash = hasher.finalize();
        hash.as_bytes()[..8].try_into().expect("8 bytes")
    }

    /// The record of `puts` under `lsn`.
    pub(crate) fn encode(&self, lsn: u64, puts: &[Put]) -> Vec<u8> {
        let payload = postcard::to_stdvec(puts).expect("puts always serialize");
        let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        let mut record = Vec::with_capacity(RECORD_HEAD_BYTES + payload.len());
        record.extend_from_slice(&len.to_le_bytes());
        record.extend_from_slice(&self.checksum(len, lsn, &payload));
        record.extend_from_slice(&lsn.to_le_bytes());
        record.extend_from_slice(&payload);
        record
    }

    /// Whether `record` may be written at the tail: it fits, and redb's name for the log
    /// is synced.
    pub(crate) fn fits(&self, record: &[u8]) -> bool {
        !self.id_pending
            && u32::try_from(record.len() - RECORD_HEAD_BYTES).is_ok()
            && self.tail + record.len() as u64 <= self.size.capacity
    }

    /// Writes `record` at the tail and syncs it. The tail stays: [`Wal::advance`] moves it
    /// once redb committed, so a record whose commit failed is overwritten by the next.
    pub(crate) fn write(&mut self, record: &[u8]) -> Result<(), StoreError> {
        let end = self.tail + record.len() as u64;
        self.holds_records = true;
        self.grow_to(end).map_err(log_error)?;
        self.file.write_at(self.tail, record).map_err(log_error)?;
        self.file.sync().map_err(log_error)
    }

    /// The record just written is committed in redb.
    pub(crate) fn advance(&mut self, lsn: u64, record_bytes: usize) {
        self.tail += record_bytes as u64;
        self.last_lsn = lsn;
        self.holds_records = true;
    }

    /// A commit with a sync made everything up to `lsn` durable in redb: start again.
    pub(crate) fn reset(&mut self, lsn: u64) {
        self.tail = HEADER_BYTES;
        self.last_lsn = lsn;
        self.id_pending = false;
    }

    /// Makes the log hold no record (its first record's head is zeroed, synced). Only after
    /// a checkpoint, when the ledger closes: a ledger file put back from a copy then never
    /// meets records of a later history.
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        if !self.holds_records {
            return Ok(());
        }
        self.file
            .write_at(HEADER_BYTES, &[0u8; RECORD_HEAD_BYTES])?;
        self.file.sync()?;
        self.tail = HEADER_BYTES;
        self.holds_records = false;
        Ok(())
    }

    /// The records from the log's start while each checks out and the lsns follow each
    /// other: (lsn, puts).
    fn scan(&self) -> io::Result<Vec<(u64, Vec<Put>)>> {
        let len = self.file.len()?;
        let mut out: Vec<(u64, Vec<Put>)> = Vec::new();
        let mut at = HEADER_BYTES;
        let mut head = [0u8; RECORD_HEAD_BYTES];
        while at + RECORD_HEAD_BYTES as u64 <= len {
            self.file.read_at(at, &mut head)?;
            let payload_len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
            let lsn = u64::from_le_bytes(head[12..20].try_into().expect("8 bytes"));
            let end = at + RECORD_HEAD_BYTES as u64 + u64::from(payload_len);
            let follows = out.last().is_none_or(|(last, _)| lsn == last + 1);
            if payload_len == 0 || end > len || !follows {
                break;
            }
            let mut payload = vec![0u8; payload_len as usize];
            self.file
                .read_at(at + RECORD_HEAD_BYTES as u64, &mut payload)?;
            if head[4..12] != self.checksum(payload_len, lsn, &payload) {
                break;
            }
            let Ok(puts) = postcard::from_bytes::<Vec<Put>>(&payload) else {
                tracing::warn!(lsn, "a redo log record checks out but does not decode");
                break;
            };
            out.push((lsn, puts));
            at = end;
        }
        Ok(out)
    }
}

/// A failed log write or sync, as the callers of the group see it (like a redb I/O error).
fn log_error(error: io::Error) -> StoreError {
    store_error(redb::StorageError::Io(error))
}

/// The log and what the writer and a reopen share about it.
pub(crate) struct Log {
    pub(crate) wal: Mutex<Wal>,
    /// Set when a commit failed after its record was synced (or a checkpoint failed): the
    /// database must be opened again and the log replayed before the next write, so redb
    /// holds exactly what the log says.
    pub(crate) needs_recovery: AtomicBool,
}

impl Log {
    pub(crate) fn new(wal: Wal) -> Log {
        Log {
            wal: Mutex::new(wal),
            needs_recovery: AtomicBool::new(false),
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Wal> {
        self.wal.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn must_recover(&self) -> bool {
        self.needs_recovery.load(Ordering::Acquire)
    }

    pub(crate) fn set_must_recover(&self, value: bool) {
        self.needs_recovery.store(value, Ordering::Release);
    }
}

/// Writes `puts` into `txn`'s tables.
pub(crate) fn apply(txn: &WriteTransaction, puts: &[Put]) -> Result<(), StoreError> {
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

/// Brings `db` up to date with the log, then starts the log again; run on every open of
/// the database by the process holding it. With `bound` (a reopen in the same process),
/// only records up to that lsn (the last one acknowledged) are applied: a record whose
/// commit failed is not.
///
/// Replays the records after redb's [`WAL_LSN`] in one transaction committed with a sync.
/// A log that is not this ledger's ([`WAL_ID`]), or whose records do not continue it, is
/// not replayed and gets a new key.
pub(crate) fn recover(db: &Database, log: &Log, bound: Option<u64>) -> Result<(), StoreError> {
    let mut wal = log.lock();
    let mut txn = db.begin_write().map_err(store_error)?;
    let (stored_id, stored_lsn) = {
        let meta = txn.open_table(META).map_err(store_error)?;
        let get = |key: &str| -> Result<Option<u64>, StoreError> {
            Ok(meta.get(key).map_err(store_error)?.map(|v| v.value()))
        };
        (get(WAL_ID)?, get(WAL_LSN)?.unwrap_or(0))
    };
    let ours = stored_id == Some(wal.id());
    let records = if ours {
        wal.scan().map_err(log_error)?
    } else {
        Vec::new()
    };
    let pending: Vec<&(u64, Vec<Put>)> = records
        .iter()
        .filter(|(lsn, _)| *lsn > stored_lsn && bound.is_none_or(|bound| *lsn <= bound))
        .collect();
    let continues = pending
        .first()
        .is_none_or(|(lsn, _)| *lsn == stored_lsn + 1);
    if ours && records.is_empty() {
        // An empty log: nothing to replay and nothing a new record could overwrite.
        txn.abort().map_err(store_error)?;
        wal.reset(stored_lsn);
        return Ok(());
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
        if let Some((lsn, _)) = records.last() {
            last = last.max(*lsn);
        }
    } else {
        for (lsn, puts) in &pending {
            apply(&txn, puts)?;
            last = *lsn;
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
    Ok(())
}

/// The log file of the ledger file at `path`: `ledger.wal` beside `ledger.redb`.
pub(crate) fn log_path(path: &Path) -> PathBuf {
    path.with_extension("wal")
}

/// Opens the log of the ledger file at `path`, creating it (complete, under a temporary
/// name, then moved into place) if there is none. The directory is synced after a log is
/// created, and always when `ledger_linked` (the ledger file's own name is new there).
pub(crate) fn open_path(path: &Path, ledger_linked: bool) -> Result<Wal, WalError> {
    let log = log_path(path);
    let io_error = |source| WalError::Io {
        path: log.clone(),
        source,
    };
    let sync_dir = || {
        if let Ok(dir) = std::fs::File::open(log.parent().unwrap_or(Path::new("."))) {
            let _ = dir.sync_all();
        }
    };
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&log)
    {
        Ok(file) => {
            let wal = Wal::open(Box::new(file), &log, LogSize::PRODUCT)?;
            if ledger_linked {
                sync_dir();
            }
            return Ok(wal);
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(io_error(error)),
    }
    let temp = super::open::temp_beside(&log).map_err(io_error)?;
    let file = temp.as_file().try_clone().map_err(io_error)?;
    let wal = Wal::open(Box::new(file), &log, LogSize::PRODUCT)?;
    match temp.persist_noclobber(&log) {
        Ok(_) => {}
        Err(error) if error.error.kind() == io::ErrorKind::AlreadyExists => {
            // Only the process holding the ledger file gets here; someone else's file.
            return Err(WalError::NotALog {
                path: log.clone(),
                detail: "it appeared while it was being created".into(),
            });
        }
        Err(error) => return Err(io_error(error.error)),
    }
    sync_dir();
    Ok(wal)
}

#[cfg(test)]
mod tests {
    //! The log's own format; the crash and fault suites run it under the ledger (`fault`).

    use super::*;
    use std::sync::Arc;

    /// A file in memory (clones share it).
    #[derive(Clone, Default)]
    struct MemoryFile(Arc<Mutex<Vec<u8>>>);

    impl LogFile for MemoryFile {
        fn len(&self) -> io::Result<u64> {
            Ok(self.0.lock().unwrap().len() as u64)
        }

        fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
            let bytes = self.0.lock().unwrap();
            let start = offset as usize;
            out.copy_from_slice(&bytes[start..start + out.len()]);
            Ok(())
        }

        fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            let mut bytes = self.0.lock().unwrap();
            let end = offset as usize + data.len();
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[offset as usize..end].copy_from_slice(data);
            Ok(())
        }

        fn sync(&self) -> io::Result<()> {
            Ok(())
        }
    }

    const SIZE: LogSize = LogSize {
        capacity: HEADER_BYTES + 8192,
        growth: 1024,
    };

    fn put(n: u64) -> Vec<Put> {
        vec![Put::Meta {
            key: format!("k{n}"),
            value: n,
        }]
    }

    #[test]
    fn records_read_back_in_lsn_order_until_one_does_not_follow_or_check_out() {
        let file = MemoryFile::default();
        let path = Path::new("test.wal");
        let mut wal = Wal::open(Box::new(file.clone()), path, SIZE).unwrap();
        assert_eq!(file.len().unwrap(), HEADER_BYTES, "a new log is its header");
        for lsn in 1..=3 {
            let record = wal.encode(lsn, &put(lsn));
            wal.write(&record).unwrap();
            wal.advance(lsn, record.len());
            assert_eq!(
                file.len().unwrap(),
                HEADER_BYTES + SIZE.growth,
                "grown ahead by the first record"
            );
        }
        // Opened again: the same key, the same records.
        let again = Wal::open(Box::new(file.clone()), path, SIZE).unwrap();
        assert_eq!(again.id(), wal.id());
        let lsns: Vec<u64> = again.scan().unwrap().iter().map(|(l, _)| *l).collect();
        assert_eq!(lsns, [1, 2, 3]);
        assert_eq!(again.scan().unwrap()[1].1, put(2));

        // A new round from the start: the old round's records after it do not follow.
        wal.reset(3);
        let record = wal.encode(4, &put(4));
        wal.write(&record).unwrap();
        wal.advance(4, record.len());
        let lsns: Vec<u64> = wal.scan().unwrap().iter().map(|(l, _)| *l).collect();
        assert_eq!(lsns, [4]);

        // A flipped byte ends the scan before its record.
        let second = HEADER_BYTES as usize + record.len();
        let record = wal.encode(5, &put(5));
        wal.write(&record).unwrap();
        file.0.lock().unwrap()[second + RECORD_HEAD_BYTES + 1] ^= 1;
        assert_eq!(wal.scan().unwrap().len(), 1);

        // A new key: nothing checks out any more.
        wal.rekey().unwrap();
        assert!(wal.scan().unwrap().is_empty());
    }

    #[test]
    fn a_record_too_big_for_the_log_does_not_fit_and_the_log_never_grows_past_its_capacity() {
        let file = MemoryFile::default();
        let mut wal = Wal::open(Box::new(file.clone()), Path::new("t.wal"), SIZE).unwrap();
        let big = vec![Put::Head {
            session: 1,
            row: vec![7; 9000],
        }];
        assert!(!wal.fits(&wal.encode(1, &big)));
        let mut lsn = 0;
        loop {
            let record = wal.encode(lsn + 1, &put(lsn + 1));
            if !wal.fits(&record) {
                break;
            }
            wal.write(&record).unwrap();
            lsn += 1;
            wal.advance(lsn, record.len());
        }
        assert!(lsn > 100, "{lsn} records fit");
        assert!(file.len().unwrap() <= SIZE.capacity);
    }

    #[test]
    fn a_file_that_is_not_a_log_is_refused() {
        let file = MemoryFile::default();
        file.write_at(0, &[1u8; 8192]).unwrap();
        let refused = Wal::open(Box::new(file), Path::new("t.wal"), SIZE);
        assert!(matches!(refused, Err(WalError::NotALog { .. })));
    }
}
