//! Test support for the redo log's own tests: a log file in memory whose syncs can be
//! made to fail ([`MemoryFile`]), and the records, logs and databases the tests build. The
//! crash and fault suites run the log under the ledger (`super::super::fault`).

use super::file::{LogFile, LogSize};
use super::record::{HEADER_BYTES, Put};
use super::recovery::recover;
use super::writer::{LedgerState, Log, Wal};
use crate::store::redb::tables::META;
use redb::{Database, ReadableDatabase};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What the handles of one [`MemoryFile`] share: the bytes, the syncs still to fail,
/// and every write and sync by handle.
#[derive(Default)]
pub(super) struct Shared {
    bytes: Mutex<Vec<u8>>,
    /// The next this many syncs fail (EIO).
    pub(super) failing_syncs: AtomicUsize,
    /// Handles opened so far (the first is 0).
    handles: AtomicUsize,
    /// (handle, "write" | "sync", failed) for every write and sync, in order.
    ops: Mutex<Vec<(usize, &'static str, bool)>>,
}

/// A file in memory: clones are the same handle; [`LogFile::reopen`] makes a new one.
#[derive(Clone, Default)]
pub(super) struct MemoryFile {
    pub(super) shared: Arc<Shared>,
    handle: usize,
}

impl MemoryFile {
    pub(super) fn bytes(&self) -> Vec<u8> {
        self.shared.bytes.lock().unwrap().clone()
    }

    pub(super) fn edit(&self, edit: impl FnOnce(&mut Vec<u8>)) {
        edit(&mut self.shared.bytes.lock().unwrap());
    }

    pub(super) fn ops(&self) -> Vec<(usize, &'static str, bool)> {
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

pub(super) const SIZE: LogSize = LogSize {
    capacity: HEADER_BYTES + 8192,
    growth: 1024,
};

pub(super) fn put(n: u64) -> Vec<Put> {
    vec![Put::Meta {
        key: format!("k{n}"),
        value: n,
    }]
}

pub(super) fn open(file: &MemoryFile) -> Wal {
    Wal::open(
        Box::new(file.clone()),
        Path::new("t.wal"),
        SIZE,
        LedgerState::Unclean,
    )
    .unwrap()
}

pub(super) fn lsns(wal: &Wal) -> Vec<u64> {
    wal.scan().unwrap().records.iter().map(|r| r.lsn).collect()
}

/// Writes records `lsns` at the tail, each acknowledged (the tail advances).
pub(super) fn write_records(wal: &mut Wal, lsns: std::ops::RangeInclusive<u64>) -> Vec<u64> {
    let mut offsets = Vec::new();
    for lsn in lsns {
        let record = wal.encode(lsn, &put(lsn));
        offsets.push(wal.tail);
        wal.write(&record).unwrap();
        wal.advance(lsn, record.len());
    }
    offsets
}

/// A database with the ledger's tables, in memory.
pub(super) fn database() -> Database {
    let db = redb::Database::builder()
        .create_with_backend(redb::backends::InMemoryBackend::new())
        .unwrap();
    super::super::tables::create_all(&db).unwrap();
    db
}

pub(super) fn meta(db: &Database, key: &str) -> Option<u64> {
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(META).unwrap();
    table.get(key).unwrap().map(|v| v.value())
}

/// A database naming `file`'s new log, and records `1..=count` written to the log only
/// (acknowledged; redb lacks them, as after a kill before a checkpoint): their offsets.
pub(super) fn pending_records(file: &MemoryFile, count: u64) -> (Database, Vec<u64>) {
    let db = database();
    let log = Log::new(open(file));
    assert_eq!(recover(&db, &log, None).unwrap(), None);
    let mut wal = log.lock();
    // redb's name for the log is synced by the next commit with a sync.
    wal.id_pending = false;
    let offsets = write_records(&mut wal, 1..=count);
    (db, offsets)
}
