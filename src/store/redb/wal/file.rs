//! The redo log's file: what the log needs of one ([`LogFile`]), the file on disk
//! ([`DiskLog`]), none at all (a ledger read-only here without a log), how big the log may
//! grow ([`LogSize`]) and where it lies ([`log_path`]).
//!
//! Must not: know the log's format (`super::record`) or create a file (the open does:
//! `super::super::open`).

use std::io;
use std::path::{Path, PathBuf};

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
pub(super) struct NoLogFile;

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

pub(super) fn read_only_log() -> io::Error {
    io::Error::new(
        io::ErrorKind::ReadOnlyFilesystem,
        "the redo log is opened read-only here",
    )
}

/// The log file of the ledger file at `path`: `ledger.wal` beside `ledger.redb`.
pub(crate) fn log_path(path: &Path) -> PathBuf {
    path.with_extension("wal")
}
