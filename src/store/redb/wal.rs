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
//! file, so the fault model can stand in for it; [`DiskLog`] on disk), [`recover`]
//! (replaying the records redb lacks), [`replay_in_memory`] (the same for a ledger this
//! process may only read, [`super::overlay`]), and telling a torn tail from damage
//! ([`LogDamage`]). Must not: hold an append rule, let a record count as written before
//! its sync returned, or write a log that holds records it did not apply.
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
//! - A clean close checkpoints, then clears the log (an end mark at its start): it then
//!   holds nothing to replay.
//! - The file is written with zeros ahead of the tail ([`LogSize::growth`] at a time, up to
//!   the capacity), so a record's sync flushes its own pages and no file-size change.
//!
//! A torn tail and damage. The scan stops at the first record that fails (its length, its
//! checksum, or an lsn that does not follow). After a crash that is the record being
//! written when the machine stopped (a torn tail): nothing acknowledged lies beyond it,
//! only zeros or records of an older round (smaller lsns), and it is dropped without a
//! word, as its commit was never acknowledged. So the scan then looks further
//! ([`MAX_DAMAGE_SEARCH_BYTES`], at every byte): a record beyond the stop that checks out
//! under this log's key with an lsn past the failed one's (greater than the last good lsn
//! plus one: a record of a failed write, begun again at the same lsn, is not one) was
//! acknowledged after it, so the stop is damage, not a tail ([`LogDamage`]: where, which
//! lsn, how many records lie beyond). The choice made then:
//! - The open replays the intact records before the damage, exactly as any open does
//!   (they are checksummed and were acknowledged), committed with a sync, and nothing past
//!   the damage: redb then holds a consistent prefix of the history.
//! - The log is never reset, re-keyed, cleared or written while it holds records that were
//!   not applied ([`Wal::damage`] refuses every write): `recover --to` reads them.
//! - The open reports the damage ([`super::open::Handle::damage_at_open`]), so every write
//!   of the ledger is refused with [`StoreError::Damaged`] naming it; reads show the prefix.
//!
//! A header that cannot be read (too short, not the log's magic number, zeros before
//! records, another build's format) is [`WalError::Unreadable`]: named as the redo log,
//! saying whether it may hold acknowledged commits (bytes after its header that are not
//! zeros; the ledger file not closed cleanly) and never advising to move it away when that
//! could drop them.
//!
//! A failed write or sync of the log fails its group (the callers are answered with the
//! error, never acknowledged) and marks the handle failed: it is never written or synced
//! again. Linux may mark the pages of a failed `fdatasync` clean, so a later sync on the
//! same file descriptor can succeed without them (PostgreSQL's lesson). Before the next
//! record the file is opened again ([`LogFile::reopen`]) and its header and acknowledged
//! records read back from it; if they do not read back, the log is damaged.

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

/// Bytes of the header that are read: magic (8), format version (4), key (32).
const HEADER_FIELDS_BYTES: usize = 44;

/// Bytes before a record's payload: length (u32), checksum (8 bytes), lsn (u64).
const RECORD_HEAD_BYTES: usize = 20;

/// Bytes of zeros written per call while growing the log.
const ZERO_CHUNK_BYTES: usize = 64 * 1024;

/// Most bytes after a failed record that are searched for records acknowledged after it
/// (and, for an unreadable header, for bytes that are not zeros): the product's log is
/// 8 MiB; a file longer than this is searched this far.
pub(crate) const MAX_DAMAGE_SEARCH_BYTES: u64 = 64 << 20;

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

/// What the log needs of a file. A real file ([`DiskLog`]), or the fault model's disk in
/// tests.
pub(crate) trait LogFile: Send + Sync {
    fn len(&self) -> io::Result<u64>;
    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()>;
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Makes every write before it durable (`fdatasync`).
    fn sync(&self) -> io::Result<()>;
    /// A new handle on the same file (a new file descriptor), for after a write or sync of
    /// this one failed: a handle whose sync failed is never synced again.
    fn reopen(&self) -> io::Result<Box<dyn LogFile>>;
}

/// The log file on disk: its handle, and the path it is opened again from.
pub(crate) struct DiskLog {
    file: std::fs::File,
    path: PathBuf,
    /// Opened for writing (a read-only open is opened again read-only).
    writable: bool,
}

impl DiskLog {
    pub(crate) fn new(file: std::fs::File, path: &Path, writable: bool) -> DiskLog {
        DiskLog {
            file,
            path: path.to_path_buf(),
            writable,
        }
    }
}

impl LogFile for DiskLog {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.file, out, offset)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.file, data, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn reopen(&self) -> io::Result<Box<dyn LogFile>> {
        use std::os::unix::fs::MetadataExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(self.writable)
            .open(&self.path)?;
        let (was, is) = (self.file.metadata()?, file.metadata()?);
        if (was.dev(), was.ino()) != (is.dev(), is.ino()) {
            return Err(io::Error::other(format!(
                "{} was replaced by another file while the ledger was open",
                self.path.display()
            )));
        }
        Ok(Box::new(DiskLog::new(file, &self.path, self.writable)))
    }
}

/// No log file at all (a ledger this process may only read, with no `ledger.wal`): reads
/// as empty, refuses writes.
struct NoLogFile;

impl LogFile for NoLogFile {
    fn len(&self) -> io::Result<u64> {
        Ok(0)
    }

    fn read_at(&self, _offset: u64, out: &mut [u8]) -> io::Result<()> {
        if out.is_empty() {
            Ok(())
        } else {
            Err(io::Error::from(io::ErrorKind::UnexpectedEof))
        }
    }

    fn write_at(&self, _offset: u64, _data: &[u8]) -> io::Result<()> {
        Err(read_only_log())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn reopen(&self) -> io::Result<Box<dyn LogFile>> {
        Ok(Box::new(NoLogFile))
    }
}

fn read_only_log() -> io::Error {
    io::Error::new(
        io::ErrorKind::ReadOnlyFilesystem,
        "the redo log is opened read-only here",
    )
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

/// A record that does not read back with records acknowledged after it: damage, not a
/// torn tail (see the module's doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogDamage {
    /// Byte offset of the first record that does not read back.
    pub(crate) offset: u64,
    /// The lsn it should have had.
    pub(crate) lsn: u64,
    /// The records beyond it that check out under the log's key, each (offset, lsn), in
    /// file order: acknowledged commits the ledger file does not hold.
    pub(crate) beyond: Vec<(u64, u64)>,
}

impl LogDamage {
    /// The lsns of the records beyond the damage: (lowest, highest).
    pub(crate) fn lsn_range(&self) -> (u64, u64) {
        let lsns = self.beyond.iter().map(|(_, lsn)| *lsn);
        (
            lsns.clone().min().unwrap_or(self.lsn),
            lsns.max().unwrap_or(self.lsn),
        )
    }

    /// The damage in words, naming the log at `path`.
    pub(crate) fn describe(&self, path: &Path) -> String {
        let (first, last) = self.lsn_range();
        format!(
            "its redo log {} is damaged at byte {}: record {} does not read back, and {} \
             acknowledged record(s) after it (lsn {first} to {last}) do. Nothing past the \
             damage was replayed (the ledger shows the commits before it) and the log is \
             kept as it is",
            path.display(),
            self.offset,
            self.lsn,
            self.beyond.len(),
        )
    }
}

/// One record the scan read: its lsn, its rows, and where it ends in the file.
struct Scanned {
    lsn: u64,
    puts: Vec<Put>,
    end: u64,
}

/// What a scan of the log from its start read.
#[derive(Default)]
struct Scan {
    records: Vec<Scanned>,
    /// The first byte that is not part of a record read: where a failed record begins.
    stop: u64,
    /// The scan stopped at the end mark of a clear ([`Wal::clear`]): what follows it is
    /// of an earlier history, never damage.
    cleared: bool,
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
    /// Whether this open created the log (its key is new: no record checks out under it),
    /// or found none to read (a read-only open of a missing or blank log).
    created: bool,
    /// Whether redb's [`WAL_ID`] naming this log is committed without a sync yet: until a
    /// commit with a sync, no record may be written (a crash would lose the name, and with
    /// it the records).
    id_pending: bool,
    /// A write or sync of `file` failed: it is opened again, and what it holds read back,
    /// before the next write.
    failed: bool,
    /// Opened read-only (a ledger this process may only read): never written.
    read_only: bool,
    /// Damage found by the last recovery: the log holds records that were not applied,
    /// and is never written while it does.
    damage: Option<LogDamage>,
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
    fn rekey(&mut self) -> io::Result<()> {
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
        mark[4..12].copy_from_slice(&self.checksum(0, self.last_lsn, &[]));
        mark[12..20].copy_from_slice(&self.last_lsn.to_le_bytes());
        self.io(|wal| wal.file.write_at(HEADER_BYTES, &mark))?;
        self.io(|wal| wal.file.sync())?;
        self.tail = HEADER_BYTES;
        self.holds_records = false;
        Ok(())
    }

    /// The record at `at` if it checks out under this log's key (`len` bytes in the file
    /// from `at` on are in `bytes`): its lsn and payload length.
    fn record_in(&self, bytes: &[u8], at: usize) -> Option<(u64, usize)> {
        let head = bytes.get(at..at + RECORD_HEAD_BYTES)?;
        let payload_len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
        let lsn = u64::from_le_bytes(head[12..20].try_into().expect("8 bytes"));
        let payload =
            bytes.get(at + RECORD_HEAD_BYTES..at + RECORD_HEAD_BYTES + payload_len as usize)?;
        (payload_len > 0 && head[4..12] == self.checksum(payload_len, lsn, payload))
            .then_some((lsn, payload_len as usize))
    }

    /// The records from the log's start while each checks out and the lsns follow each
    /// other, and where that stopped.
    fn scan(&self) -> io::Result<Scan> {
        let len = self.file.len()?;
        let mut scan = Scan {
            records: Vec::new(),
            stop: HEADER_BYTES,
            cleared: false,
        };
        let mut at = HEADER_BYTES;
        let mut head = [0u8; RECORD_HEAD_BYTES];
        while at + RECORD_HEAD_BYTES as u64 <= len {
            self.file.read_at(at, &mut head)?;
            let payload_len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
            let lsn = u64::from_le_bytes(head[12..20].try_into().expect("8 bytes"));
            let end = at + RECORD_HEAD_BYTES as u64 + u64::from(payload_len);
            let follows = scan.records.last().is_none_or(|last| lsn == last.lsn + 1);
            if payload_len == 0 {
                // Zeros ahead of the tail, or the end mark of a clear.
                scan.cleared = head[4..12] == self.checksum(0, lsn, &[]);
                break;
            }
            if end > len || !follows {
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
            scan.records.push(Scanned { lsn, puts, end });
            at = end;
            scan.stop = end;
        }
        Ok(scan)
    }

    /// Whether the scan's stop is damage rather than a torn tail: the records beyond it
    /// (searched byte by byte, up to [`MAX_DAMAGE_SEARCH_BYTES`]) that check out under this
    /// log's key with an lsn past the failed record's. `floor` is the last lsn redb holds;
    /// the failed record's lsn is the one after the last good one (or after `floor`).
    fn damage_after(&self, scan: &Scan, floor: u64) -> io::Result<Option<LogDamage>> {
        if scan.cleared {
            return Ok(None);
        }
        let last_good = scan.records.last().map_or(floor, |r| r.lsn.max(floor));
        let failed_lsn = last_good + 1;
        let len = self.file.len()?;
        let end = len.min(scan.stop.saturating_add(MAX_DAMAGE_SEARCH_BYTES));
        if scan.stop + RECORD_HEAD_BYTES as u64 > end {
            return Ok(None);
        }
        let mut bytes = vec![0u8; (end - scan.stop) as usize];
        self.file.read_at(scan.stop, &mut bytes)?;
        // An lsn past the failed one, and no further than the records these bytes could
        // hold: cheap tests that leave the checksum for the few candidates that pass.
        let highest = failed_lsn + bytes.len() as u64;
        let mut beyond = Vec::new();
        let mut at = 0usize;
        while at + RECORD_HEAD_BYTES <= bytes.len() {
            let lsn = u64::from_le_bytes(bytes[at + 12..at + 20].try_into().expect("8 bytes"));
            let plausible = lsn > failed_lsn
                && lsn <= highest
                && u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) > 0;
            if plausible && let Some((lsn, payload_len)) = self.record_in(&bytes, at) {
                beyond.push((scan.stop + at as u64, lsn));
                at += RECORD_HEAD_BYTES + payload_len;
                continue;
            }
            at += 1;
        }
        Ok((!beyond.is_empty()).then_some(LogDamage {
            offset: scan.stop,
            lsn: failed_lsn,
            beyond,
        }))
    }

    /// The rows of the record at `offset` if it checks out under this log's key: its lsn
    /// and puts (for `recover`, which reads the records past a damaged one).
    #[allow(dead_code)]
    pub(crate) fn read_record(&self, offset: u64) -> io::Result<Option<(u64, Vec<Put>)>> {
        let len = self.file.len()?;
        if offset + RECORD_HEAD_BYTES as u64 > len {
            return Ok(None);
        }
        let mut head = [0u8; RECORD_HEAD_BYTES];
        self.file.read_at(offset, &mut head)?;
        let payload_len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as u64;
        let end = offset + RECORD_HEAD_BYTES as u64 + payload_len;
        if end > len {
            return Ok(None);
        }
        let mut bytes = vec![0u8; (end - offset) as usize];
        self.file.read_at(offset, &mut bytes)?;
        let Some((lsn, _)) = self.record_in(&bytes, 0) else {
            return Ok(None);
        };
        Ok(
            postcard::from_bytes::<Vec<Put>>(&bytes[RECORD_HEAD_BYTES..])
                .ok()
                .map(|puts| (lsn, puts)),
        )
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
/// read-only view of [`super::overlay`]), as [`recover`] would, without ever writing the
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

/// The log file of the ledger file at `path`: `ledger.wal` beside `ledger.redb`.
pub(crate) fn log_path(path: &Path) -> PathBuf {
    path.with_extension("wal")
}

#[cfg(test)]
mod tests {
    //! The log's own format, its damage and its failed syncs; the crash and fault suites
    //! run it under the ledger (`fault`).

    use super::*;
    use redb::ReadableDatabase;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    /// What the handles of one [`MemoryFile`] share: the bytes, the syncs still to fail,
    /// and every write and sync by handle.
    #[derive(Default)]
    struct Shared {
        bytes: Mutex<Vec<u8>>,
        /// The next this many syncs fail (EIO).
        failing_syncs: AtomicUsize,
        /// Handles opened so far (the first is 0).
        handles: AtomicUsize,
        /// (handle, "write" | "sync", failed) for every write and sync, in order.
        ops: Mutex<Vec<(usize, &'static str, bool)>>,
    }

    /// A file in memory: clones are the same handle; [`LogFile::reopen`] makes a new one.
    #[derive(Clone, Default)]
    struct MemoryFile {
        shared: Arc<Shared>,
        handle: usize,
    }

    impl MemoryFile {
        fn bytes(&self) -> Vec<u8> {
            self.shared.bytes.lock().unwrap().clone()
        }

        fn edit(&self, edit: impl FnOnce(&mut Vec<u8>)) {
            edit(&mut self.shared.bytes.lock().unwrap());
        }

        fn ops(&self) -> Vec<(usize, &'static str, bool)> {
            self.shared.ops.lock().unwrap().clone()
        }
    }

    impl LogFile for MemoryFile {
        fn len(&self) -> io::Result<u64> {
            Ok(self.shared.bytes.lock().unwrap().len() as u64)
        }

        fn read_at(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
            let bytes = self.shared.bytes.lock().unwrap();
            let start = offset as usize;
            out.copy_from_slice(&bytes[start..start + out.len()]);
            Ok(())
        }

        fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            let mut bytes = self.shared.bytes.lock().unwrap();
            let end = offset as usize + data.len();
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[offset as usize..end].copy_from_slice(data);
            self.shared
                .ops
                .lock()
                .unwrap()
                .push((self.handle, "write", false));
            Ok(())
        }

        fn sync(&self) -> io::Result<()> {
            let fails = self
                .shared
                .failing_syncs
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok();
            self.shared
                .ops
                .lock()
                .unwrap()
                .push((self.handle, "sync", fails));
            if fails {
                Err(io::Error::from_raw_os_error(5))
            } else {
                Ok(())
            }
        }

        fn reopen(&self) -> io::Result<Box<dyn LogFile>> {
            let handle = self.shared.handles.fetch_add(1, Ordering::AcqRel) + 1;
            Ok(Box::new(MemoryFile {
                shared: self.shared.clone(),
                handle,
            }))
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

    fn open(file: &MemoryFile) -> Wal {
        Wal::open(
            Box::new(file.clone()),
            Path::new("t.wal"),
            SIZE,
            LedgerState::Unclean,
        )
        .unwrap()
    }

    fn lsns(wal: &Wal) -> Vec<u64> {
        wal.scan().unwrap().records.iter().map(|r| r.lsn).collect()
    }

    /// Writes records `lsns` at the tail, each acknowledged (the tail advances).
    fn write_records(wal: &mut Wal, lsns: std::ops::RangeInclusive<u64>) -> Vec<u64> {
        let mut offsets = Vec::new();
        for lsn in lsns {
            let record = wal.encode(lsn, &put(lsn));
            offsets.push(wal.tail);
            wal.write(&record).unwrap();
            wal.advance(lsn, record.len());
        }
        offsets
    }

    #[test]
    fn records_read_back_in_lsn_order_until_one_does_not_follow_or_check_out() {
        let file = MemoryFile::default();
        let mut wal = open(&file);
        assert_eq!(file.len().unwrap(), HEADER_BYTES, "a new log is its header");
        write_records(&mut wal, 1..=3);
        assert_eq!(
            file.len().unwrap(),
            HEADER_BYTES + SIZE.growth,
            "grown ahead by the first record"
        );
        // Opened again: the same key, the same records.
        let again = open(&file);
        assert_eq!(again.id(), wal.id());
        assert_eq!(lsns(&again), [1, 2, 3]);
        assert_eq!(again.scan().unwrap().records[1].puts, put(2));

        // A new round from the start: the old round's records after it do not follow.
        wal.reset(3);
        let offsets = write_records(&mut wal, 4..=4);
        assert_eq!(offsets, [HEADER_BYTES]);
        assert_eq!(lsns(&wal), [4]);

        // A flipped byte ends the scan before its record.
        let second = wal.tail as usize;
        let record = wal.encode(5, &put(5));
        wal.write(&record).unwrap();
        file.edit(|bytes| bytes[second + RECORD_HEAD_BYTES + 1] ^= 1);
        assert_eq!(lsns(&wal), [4]);
        assert_eq!(wal.scan().unwrap().stop, second as u64);

        // A new key: nothing checks out any more.
        wal.rekey().unwrap();
        assert!(lsns(&wal).is_empty());
    }

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

    /// A database with the ledger's tables, in memory.
    fn database() -> Database {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .unwrap();
        super::super::tables::create_all(&db).unwrap();
        db
    }

    fn meta(db: &Database, key: &str) -> Option<u64> {
        let txn = db.begin_read().unwrap();
        let table = txn.open_table(META).unwrap();
        table.get(key).unwrap().map(|v| v.value())
    }

    /// A database naming `file`'s new log, and records `1..=count` written to the log only
    /// (acknowledged; redb lacks them, as after a kill before a checkpoint): their offsets.
    fn pending_records(file: &MemoryFile, count: u64) -> (Database, Vec<u64>) {
        let db = database();
        let log = Log::new(open(file));
        assert_eq!(recover(&db, &log, None).unwrap(), None);
        let mut wal = log.lock();
        // redb's name for the log is synced by the next commit with a sync.
        wal.id_pending = false;
        let offsets = write_records(&mut wal, 1..=count);
        (db, offsets)
    }

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
    fn a_cleared_log_holds_nothing_and_what_follows_its_end_mark_is_never_damage() {
        let file = MemoryFile::default();
        let (_, _) = pending_records(&file, 4);
        let mut wal = open(&file);
        wal.holds_records = true;
        wal.last_lsn = 4;
        wal.clear().unwrap();
        let scan = wal.scan().unwrap();
        assert!(scan.records.is_empty() && scan.cleared);
        // A ledger file put back from a copy (it holds less than the log's history).
        assert_eq!(wal.damage_after(&scan, 0).unwrap(), None);
        // A zeroed head instead of the mark (damage, or a build before the mark): the
        // acknowledged records after it are damage for a ledger that lacks them.
        file.edit(|bytes| bytes[HEADER_BYTES as usize..][..RECORD_HEAD_BYTES].fill(0));
        let scan = wal.scan().unwrap();
        assert!(!scan.cleared);
        assert_eq!(
            wal.damage_after(&scan, 0).unwrap().unwrap().lsn_range(),
            (2, 4)
        );
        assert_eq!(
            wal.damage_after(&scan, 4).unwrap(),
            None,
            "a ledger that holds them"
        );
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
