//! The redo log as the host writes it: opening it (a new log's header and key, or an
//! existing one's, refused in words when it cannot be read), writing a group's record at
//! the tail and syncing it, moving the tail once redb committed, starting again after a
//! checkpoint, clearing it on close, a new key, and opening the file again after a failed
//! write or sync ([`Wal`]); what the writer and a reopen share ([`Log`]).
//!
//! Must not: let a record count as written before its sync returned, write a log that
//! holds records not applied (damage) or opened read-only, sync a handle whose write or
//! sync failed, or apply a record to redb (`super::recovery` does).

use super::file::{LogFile, LogSize, NoLogFile, read_only_log};
use super::record::{
    self, FORMAT_VERSION, HEADER_BYTES, HEADER_FIELDS_BYTES, LogDamage, MAGIC,
    MAX_DAMAGE_SEARCH_BYTES, Put, RECORD_HEAD_BYTES, Scan,
};
use crate::store::StoreError;
use crate::store::redb::store_error;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes of zeros written per call while growing the log.
const ZERO_CHUNK_BYTES: usize = 64 * 1024;

/// How the open of the ledger file found it left: what a log that cannot be read may
/// have held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LedgerState {
    /// Closed cleanly: its last close checkpointed the log into it and cleared the log.
    Clean,
    /// Not closed cleanly (a process holding it was killed or crashed), or not known.
    Unclean,
}

/// Why the log could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WalError {
    /// The log's header cannot be read as this build's.
    #[error("{path}, the ledger's redo log, cannot be used: {problem} (left as it is; {advice})")]
    Unreadable {
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
        /// What it may hold, and what to do.
        advice: String,
    },
    #[error("cannot use the redo log {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// The redo log as the host writes it. What a recovery finds (`super::recovery`: the last
/// lsn, damage, a new name pending) it sets in the fields it shares with this file.
pub(crate) struct Wal {
    file: Box<dyn LogFile>,
    path: PathBuf,
    size: LogSize,
    /// Keys the records' checksums; new with every new log (and every [`Wal::rekey`]).
    key: [u8; 32],
    /// How far the file is written (zeros ahead of the tail).
    written: u64,
    /// Where the next record goes.
    pub(super) tail: u64,
    /// The lsn of the last record (or checkpoint) redb holds.
    pub(super) last_lsn: u64,
    /// Whether the log may hold records (it was not cleared since).
    pub(super) holds_records: bool,
    /// Whether this open created the log (its key is new: no record checks out under it),
    /// or found none to read (a read-only open of a missing or blank log).
    pub(super) created: bool,
    /// Whether redb's `WAL_ID` naming this log is committed without a sync yet: until a
    /// commit with a sync, no record may be written (a crash would lose the name, and with
    /// it the records).
    pub(super) id_pending: bool,
    /// A write or sync of `file` failed: it is opened again, and what it holds read back,
    /// before the next write.
    failed: bool,
    /// Opened read-only (a ledger this process may only read): never written.
    pub(super) read_only: bool,
    /// Damage found by the last recovery: the log holds records that were not applied,
    /// and is never written while it does.
    pub(super) damage: Option<LogDamage>,
}

fn new_key() -> io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(io::Error::other)?;
    Ok(key)
}

/// How many bytes after the header of `file` (`len` bytes) are not zeros, searched up to
/// [`MAX_DAMAGE_SEARCH_BYTES`].
fn bytes_after_header(file: &dyn LogFile, len: u64) -> io::Result<u64> {
    let end = len.min(HEADER_BYTES + MAX_DAMAGE_SEARCH_BYTES);
    let mut at = HEADER_BYTES;
    let mut chunk = vec![0u8; ZERO_CHUNK_BYTES];
    let mut nonzero = 0u64;
    while at < end {
        let step = (end - at).min(ZERO_CHUNK_BYTES as u64) as usize;
        file.read_at(at, &mut chunk[..step])?;
        nonzero += chunk[..step].iter().filter(|b| **b != 0).count() as u64;
        at += step as u64;
    }
    Ok(nonzero)
}

/// What an unreadable log may hold and what to do, from the bytes after its header that
/// are not zeros and how the ledger file was left.
fn unreadable_advice(nonzero_after_header: u64, ledger: LedgerState) -> String {
    if nonzero_after_header > 0 {
        format!(
            "{nonzero_after_header} byte(s) after its header are not zeros, so it may hold \
             acknowledged commits the ledger file lacks: do not delete or move it; \
             `reasoning-ledger recover --to NEW_DIR` copies the ledger and every record \
             that can still be read into a new ledger"
        )
    } else if ledger == LedgerState::Clean {
        "it holds no record, and the ledger file was closed cleanly (its last close wrote \
         every commit into it), so the log holds nothing the ledger lacks: move ledger.wal \
         aside and the next open starts a new log for the same ledger"
            .to_string()
    } else {
        "it holds no record, but the ledger file was not closed cleanly, so the commits \
         since its last checkpoint were only in this log and cannot be read back from it; \
         `reasoning-ledger recover --to NEW_DIR` copies every intact event into a new ledger"
            .to_string()
    }
}

impl Wal {
    /// Opens the log in `file`. An empty file, or one whose header was never written (all
    /// zeros, and nothing after it: a creation cut short, before any record could be),
    /// becomes a new log. `path` names it in errors; `ledger` says how the ledger file was
    /// left (what a log that cannot be read may have held).
    pub(crate) fn open(
        file: Box<dyn LogFile>,
        path: &Path,
        size: LogSize,
        ledger: LedgerState,
    ) -> Result<Wal, WalError> {
        Wal::open_with(file, path, size, ledger, false)
    }

    /// Opens the log in `file` without ever writing it (a ledger this process may only
    /// read): a missing (`None`), empty or blank log holds nothing to replay.
    pub(crate) fn open_read_only(
        file: Option<Box<dyn LogFile>>,
        path: &Path,
        ledger: LedgerState,
    ) -> Result<Wal, WalError> {
        let file = file.unwrap_or_else(|| Box::new(NoLogFile));
        Wal::open_with(file, path, LogSize::PRODUCT, ledger, true)
    }

    fn open_with(
        file: Box<dyn LogFile>,
        path: &Path,
        size: LogSize,
        ledger: LedgerState,
        read_only: bool,
    ) -> Result<Wal, WalError> {
        let io_error = |source| WalError::Io {
            path: path.to_path_buf(),
            source,
        };
        let len = file.len().map_err(io_error)?;
        let mut header = [0u8; HEADER_FIELDS_BYTES];
        let readable = (len as usize).min(header.len());
        file.read_at(0, &mut header[..readable]).map_err(io_error)?;
        let blank = header.iter().all(|b| *b == 0);
        let unreadable = |problem: String, advice: String| WalError::Unreadable {
            path: path.to_path_buf(),
            problem,
            advice,
        };
        // Read only when the header is not usable: a good log is not read whole on open.
        let after = |file: &dyn LogFile| -> Result<u64, WalError> {
            if len > HEADER_BYTES {
                bytes_after_header(file, len).map_err(io_error)
            } else {
                Ok(0)
            }
        };
        if blank && len > HEADER_BYTES && after(&*file)? > 0 {
            let after = after(&*file)?;
            return Err(unreadable(
                "its header is zeros, yet bytes follow it (a new log writes its header before \
                 any record)"
                    .into(),
                unreadable_advice(after, ledger),
            ));
        }
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
            failed: false,
            read_only,
            damage: None,
        };
        if blank {
            if read_only {
                return Ok(wal);
            }
            wal.key = new_key().map_err(io_error)?;
            wal.write_header().map_err(io_error)?;
            // Only the header is synced: the first record grows the file (a new ledger's
            // spawn does not wait for zeros it may never need).
            wal.written = wal.written.max(HEADER_BYTES);
            wal.file.sync().map_err(io_error)?;
            return Ok(wal);
        }
        if len < HEADER_BYTES {
            return Err(unreadable(
                format!(
                    "it is shorter than its header ({len} of {HEADER_BYTES} bytes; its records \
                     would start after it)"
                ),
                unreadable_advice(0, ledger),
            ));
        }
        if header[..8] != MAGIC {
            return Err(unreadable(
                "its header does not start with the redo log's magic number".into(),
                unreadable_advice(after(&*wal.file)?, ledger),
            ));
        }
        let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(unreadable(
                format!(
                    "another build wrote it (record format {version}; this build reads \
                     {FORMAT_VERSION})"
                ),
                "it may hold acknowledged commits: open the ledger with the build that wrote \
                 it, which replays them; do not delete or move it"
                    .into(),
            ));
        }
        wal.key.copy_from_slice(&header[12..44]);
        Ok(wal)
    }

    /// The log's name for `meta` (`WAL_ID`): taken from its key.
    pub(crate) fn id(&self) -> u64 {
        u64::from_le_bytes(self.key[..8].try_into().expect("8 bytes"))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn last_lsn(&self) -> u64 {
        self.last_lsn
    }

    /// The damage the last recovery found, if any: while there is, the log is never
    /// written. (For `recover --to`, with [`Wal::read_record`].)
    #[allow(dead_code)]
    pub(crate) fn damage(&self) -> Option<&LogDamage> {
        self.damage.as_ref()
    }

    /// Whether a checkpoint has something to do: records written since the last one, or
    /// the log's name not yet synced in redb.
    pub(crate) fn needs_checkpoint(&self) -> bool {
        self.tail > HEADER_BYTES || self.id_pending
    }

    /// Why the log may not be written now, if it may not: it holds records not applied
    /// (damage), or it is opened read-only.
    fn check_writable(&self) -> io::Result<()> {
        if self.read_only {
            return Err(read_only_log());
        }
        if let Some(damage) = &self.damage {
            return Err(io::Error::other(format!(
                "the redo log holds {} record(s) past a damaged one that were not applied: \
                 it is not written",
                damage.beyond.len()
            )));
        }
        Ok(())
    }

    /// Runs `step`, a write or sync of the file; a failure marks the handle failed (never
    /// written or synced again).
    fn io<T>(&mut self, step: impl FnOnce(&mut Wal) -> io::Result<T>) -> io::Result<T> {
        let result = step(self);
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    fn write_header(&mut self) -> io::Result<()> {
        self.check_writable()?;
        let mut page = vec![0u8; HEADER_BYTES as usize];
        page[..8].copy_from_slice(&MAGIC);
        page[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        page[12..44].copy_from_slice(&self.key);
        self.io(|wal| wal.file.write_at(0, &page))
    }

    /// Gives the log a new key: every record in it stops checking out. Synced.
    pub(super) fn rekey(&mut self) -> io::Result<()> {
        self.check_writable()?;
        self.reopen_if_failed()?;
        self.key = new_key()?;
        self.write_header()?;
        self.io(|wal| wal.file.sync())
    }

    /// After a failed write or sync: a new handle on the file, and the header and the
    /// acknowledged records (up to the tail) read back from it. The failed handle is let
    /// go of; if they do not read back, the log is damaged.
    fn reopen_if_failed(&mut self) -> io::Result<()> {
        if !self.failed {
            return Ok(());
        }
        let file = self.file.reopen()?;
        let mut header = [0u8; HEADER_FIELDS_BYTES];
        file.read_at(0, &mut header)?;
        let header_back = header[..8] == MAGIC && header[12..44] == self.key;
        let previous = std::mem::replace(&mut self.file, file);
        let records_back = !header_back || self.tail == HEADER_BYTES || {
            let scan = self.scan()?;
            scan.records
                .iter()
                .any(|r| r.end == self.tail && r.lsn == self.last_lsn)
        };
        if !header_back || !records_back {
            // Keep the failed handle out of use: the new one stays, still marked failed.
            drop(previous);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "after a failed write or sync, its redo log {} no longer reads back from disk \
                 what it acknowledged ({}); the log is not written again",
                    self.path.display(),
                    if header_back {
                        "its records up to the last acknowledged one"
                    } else {
                        "its header"
                    }
                ),
            ));
        }
        drop(previous);
        self.written = self.file.len()?;
        self.failed = false;
        tracing::warn!(
            log = %self.path.display(),
            "the redo log was opened again after a failed write or sync; what it acknowledged reads back"
        );
        Ok(())
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
            self.io(|wal| wal.file.write_at(at, &zeros[..step]))?;
            at += step as u64;
        }
        self.written = target;
        Ok(())
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
    ///
    /// A failure leaves the handle failed: the next write first opens the file again and
    /// reads back what was acknowledged ([`LogFile::reopen`]), and never syncs the failed
    /// handle again.
    pub(crate) fn write(&mut self, record: &[u8]) -> Result<(), StoreError> {
        self.check_writable().map_err(log_error)?;
        self.reopen_if_failed().map_err(|error| {
            // What it acknowledged is gone from the disk: damage, not a passing failure.
            if error.kind() == io::ErrorKind::InvalidData {
                StoreError::Damaged {
                    ledger: self.path.with_extension("redb").display().to_string(),
                    detail: error.to_string(),
                }
            } else {
                log_error(error)
            }
        })?;
        let end = self.tail + record.len() as u64;
        self.holds_records = true;
        self.grow_to(end).map_err(log_error)?;
        let tail = self.tail;
        self.io(|wal| wal.file.write_at(tail, record))
            .map_err(log_error)?;
        self.io(|wal| wal.file.sync()).map_err(log_error)
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

    /// Makes the log hold no record (its first record's head becomes an end mark: no
    /// payload, the last lsn, checksummed; synced). Only after a checkpoint, when the
    /// ledger closes: a ledger file put back from a copy then never meets records of a
    /// later history, and the records left after the mark are not taken for damage.
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        if !self.holds_records {
            return Ok(());
        }
        self.check_writable()?;
        self.reopen_if_failed()?;
        let mut mark = [0u8; RECORD_HEAD_BYTES];
        mark[4..12].copy_from_slice(&record::checksum(&self.key, 0, self.last_lsn, &[]));
        mark[12..20].copy_from_slice(&self.last_lsn.to_le_bytes());
        self.io(|wal| wal.file.write_at(HEADER_BYTES, &mark))?;
        self.io(|wal| wal.file.sync())?;
        self.tail = HEADER_BYTES;
        self.holds_records = false;
        Ok(())
    }

    /// The record of `puts` under `lsn` ([`record::encode`] under this log's key).
    pub(crate) fn encode(&self, lsn: u64, puts: &[Put]) -> Vec<u8> {
        record::encode(&self.key, lsn, puts)
    }

    /// The records from the log's start while each checks out and the lsns follow each
    /// other, and where that stopped ([`record::scan`]).
    pub(super) fn scan(&self) -> io::Result<Scan> {
        record::scan(&self.key, &*self.file)
    }

    /// Whether the scan's stop is damage rather than a torn tail
    /// ([`record::damage_after`]); `floor` is the last lsn redb holds.
    pub(super) fn damage_after(&self, scan: &Scan, floor: u64) -> io::Result<Option<LogDamage>> {
        record::damage_after(&self.key, &*self.file, scan, floor)
    }

    /// The rows of the record at `offset` if it checks out under this log's key: its lsn
    /// and puts (for `recover`, which reads the records past a damaged one).
    #[allow(dead_code)]
    pub(crate) fn read_record(&self, offset: u64) -> io::Result<Option<(u64, Vec<Put>)>> {
        record::read_record(&self.key, &*self.file, offset)
    }
}

/// A failed log write or sync, as the callers of the group see it (like a redb I/O error).
pub(super) fn log_error(error: io::Error) -> StoreError {
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

#[cfg(test)]
mod tests {
    //! Writing the log: its capacity, a header that cannot be read, a failed sync.

    use super::*;
    use crate::store::redb::wal::memory::{MemoryFile, SIZE, lsns, open, put, write_records};

    #[test]
    fn a_record_too_big_for_the_log_does_not_fit_and_the_log_never_grows_past_its_capacity() {
        let file = MemoryFile::default();
        let mut wal = open(&file);
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

    /// The message of opening `bytes` as a log, the ledger file left as `ledger` says.
    fn refusal(bytes: Vec<u8>, ledger: LedgerState) -> String {
        let file = MemoryFile::default();
        file.edit(|b| *b = bytes);
        let error = Wal::open(
            Box::new(file.clone()),
            Path::new("d/ledger.wal"),
            SIZE,
            ledger,
        )
        .err()
        .expect("refused");
        assert!(matches!(error, WalError::Unreadable { .. }), "{error:?}");
        let message = error.to_string();
        assert!(
            message.starts_with("d/ledger.wal, the ledger's redo log, cannot be used"),
            "named as the log: {message}"
        );
        assert!(!message.contains("redb"), "{message}");
        message
    }

    #[test]
    fn a_log_whose_header_cannot_be_read_is_named_as_the_log_with_what_it_may_hold() {
        // Not a log at all, with bytes after where its header would end: it may hold
        // commits, so it is never to be moved away.
        let message = refusal(vec![1u8; 8192], LedgerState::Clean);
        assert!(message.contains("magic number"), "{message}");
        assert!(
            message.contains("may hold acknowledged commits"),
            "{message}"
        );
        assert!(message.contains("recover --to NEW_DIR"), "{message}");
        assert!(!message.contains("move it away"), "{message}");
        assert!(!message.contains("aside"), "{message}");

        // A valid log whose header page was zeroed, its records still there.
        let file = MemoryFile::default();
        let mut wal = open(&file);
        write_records(&mut wal, 1..=3);
        let mut zeroed = file.bytes();
        zeroed[..HEADER_BYTES as usize].fill(0);
        let message = refusal(zeroed, LedgerState::Unclean);
        assert!(message.contains("its header is zeros"), "{message}");
        assert!(
            message.contains("may hold acknowledged commits"),
            "{message}"
        );
        assert!(!message.contains("aside"), "{message}");

        // Another build's format.
        let mut other = file.bytes();
        other[8..12].copy_from_slice(&2u32.to_le_bytes());
        let message = refusal(other, LedgerState::Clean);
        assert!(message.contains("another build"), "{message}");
        assert!(!message.contains("aside"), "{message}");

        // Shorter than its header: it holds no record. After a clean close that loses
        // nothing; after a crash the commits since the checkpoint are gone with it.
        let short = file.bytes()[..100].to_vec();
        let message = refusal(short.clone(), LedgerState::Clean);
        assert!(
            message.contains("shorter than its header (100 of 4096 bytes"),
            "{message}"
        );
        assert!(message.contains("holds no record"), "{message}");
        assert!(message.contains("closed cleanly"), "{message}");
        assert!(message.contains("move ledger.wal aside"), "{message}");
        let message = refusal(short, LedgerState::Unclean);
        assert!(message.contains("not closed cleanly"), "{message}");
        assert!(message.contains("recover --to NEW_DIR"), "{message}");
        assert!(!message.contains("aside"), "{message}");
    }

    #[test]
    fn a_failed_sync_is_never_retried_on_its_handle_the_log_is_opened_again_and_read_back() {
        let file = MemoryFile::default();
        let mut wal = open(&file);
        write_records(&mut wal, 1..=2);
        file.shared.failing_syncs.store(1, Ordering::Release);
        let record = wal.encode(3, &put(3));
        assert!(
            wal.write(&record).is_err(),
            "the failed sync fails the group"
        );
        // The group was answered with the error; the next one writes the same lsn again.
        let record = wal.encode(3, &put(33));
        wal.write(&record).unwrap();
        wal.advance(3, record.len());
        let ops = file.ops();
        let failed = ops
            .iter()
            .position(|(_, op, failed)| *op == "sync" && *failed)
            .unwrap();
        assert!(
            ops[failed + 1..].iter().all(|(handle, _, _)| *handle == 1),
            "after the failed sync only the reopened handle writes and syncs: {ops:?}"
        );
        assert_eq!(lsns(&wal), [1, 2, 3]);
        assert_eq!(wal.scan().unwrap().records[2].puts, put(33));

        // A failed sync after which an acknowledged record no longer reads back (the
        // pages were lost): the log says so instead of writing on.
        file.shared.failing_syncs.store(1, Ordering::Release);
        let record = wal.encode(4, &put(4));
        assert!(wal.write(&record).is_err());
        let second = wal.scan().unwrap().records[0].end as usize;
        file.edit(|bytes| bytes[second + RECORD_HEAD_BYTES] ^= 1);
        let refused = wal.write(&record).unwrap_err();
        assert!(matches!(refused, StoreError::Damaged { .. }), "{refused}");
        assert!(
            refused.to_string().contains("no longer reads back"),
            "{refused}"
        );
    }
}
