//! The seam between the ledger and its storage: the one redb configuration every open uses,
//! the atomic creation of a new ledger file, the check that an existing file is our ledger,
//! and reopening the database after an I/O failure.
//!
//! Every open of the database by the process holding it (the first, and every reopen)
//! replays the redo log into it first ([`super::wal::recover`]).
//!
//! Owns: [`Handle`] (the open database, its redo log, and how to open it again), [`open_file`] and
//! `open_backend` (tests and the durability bench: the same rules over a file path or any redb `StorageBackend`, which
//! the fault-injection tests use), [`open_read_only`] (a ledger this process may read but not
//! write: the database over [`super::overlay`], the log replayed into it in memory) and
//! [`write_denied`] (whether an open failed only because the ledger may not be written
//! here). Must not: initialise, "repair" or write to an existing
//! file that is not our ledger (an empty, truncated or foreign file, or a redb file of
//! another program, is refused before it is opened for writing), write anything at all
//! for a read-only open, or hand out a database
//! handle that redb has latched as failed when a fresh open would work.

use super::overlay::Overlay;
use super::store_error;
use super::tables::{self, ALIASES, EVENT_IDS, EVENTS, HEADS};
use super::wal::{self, LedgerState, Log, Wal, WalError};
use crate::store::{CACHE_SIZE_BYTES, OpenError, StoreError};
use redb::backends::FileBackend;
use redb::{
    BackendError, Builder, ConcurrencyMode, Database, DatabaseError, ReadOnlyDatabase,
    ReadTransaction, ReadableDatabase, StorageBackend, StorageError, TableDefinition, TableError,
    TransactionError, WriteTransaction,
};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// The redb configuration of every open, for files and test backends alike: single-process
/// mode (the process holding the file is the ledger's host, DESIGN §3: a commit is one
/// phase, checksummed, with one sync) and a capped cache.
pub(crate) fn builder() -> Builder {
    let mut builder = Database::builder();
    builder
        .set_concurrency_mode(ConcurrencyMode::ExclusiveWriter)
        .set_cache_size(CACHE_SIZE_BYTES);
    builder
}

/// What opening the ledger file found.
pub(crate) enum Opened {
    /// This process holds the file now: it is the ledger's host.
    Held(Handle),
    /// Another process (or another handle of this one) holds the file: reach it through
    /// its host.
    HeldElsewhere,
}

type Reopen = Box<dyn Fn() -> Result<Database, DatabaseError> + Send + Sync>;

/// The open database, and how to open it again.
///
/// redb latches the first I/O error of a handle: every later operation of that handle,
/// reads included, fails with [`StorageError::PreviousIo`]. A transient failure (one EIO,
/// a disk that was full and has room again) would otherwise leave the process unable to
/// read or write until restarted. So when beginning a transaction finds the handle failed,
/// the database is opened again (redb recovers the file as after a crash) and the
/// transaction is begun once more on the new handle. If that open fails too, its error is
/// returned and the next transaction tries again.
///
/// The same goes when a commit failed after its redo log record was synced
/// ([`Log::must_recover`]): the next write transaction is begun on a reopened database,
/// into which the log was replayed, so redb holds exactly what was acknowledged.
pub(crate) struct Handle {
    /// `None` only after a reopen failed (the next transaction tries again).
    current: RwLock<Option<Arc<Database>>>,
    reopen: Reopen,
    log: Arc<Log>,
    /// The file's name in messages.
    label: String,
    /// Damage the open found that leaves the ledger readable but must stop its writes
    /// (redo log records that cannot be replayed).
    damage_at_open: Option<String>,
    /// Set when the ledger is opened for reading only ([`open_read_only`]): why (this user
    /// may not write it, a read-only file system). Nothing is ever written to disk.
    read_only: Option<ReadOnly>,
}

/// Why a handle is read-only, and what its open did.
#[derive(Clone, Debug)]
pub(crate) struct ReadOnly {
    /// Why the ledger may not be written here.
    pub(crate) why: String,
    /// What the open did instead, in a sentence or two (said once on stderr).
    pub(crate) note: String,
}

impl Handle {
    /// Closes the database now, containing a panic of its close: redb commits its
    /// allocator state when the last handle on a database drops, which reads pages a
    /// damaged file may not hold soundly. For a ledger known to be damaged.
    pub(crate) fn close_quietly(&self) {
        let taken = self
            .current
            .write()
            .unwrap_or_else(|poison| poison.into_inner())
            .take();
        if let Err(message) = crate::store::damage::catch_quietly(move || drop(taken)) {
            tracing::debug!(%message, "closing a damaged ledger stopped on its bytes");
        }
    }

    /// The handle over `db` once the log is replayed into it.
    fn recovered(
        label: &Path,
        db: Database,
        reopen: Reopen,
        wal: Wal,
    ) -> Result<Handle, OpenError> {
        let log = Arc::new(Log::new(wal));
        let damage = wal::recover(&db, &log, None).map_err(|source| OpenError::Store {
            label: label.display().to_string(),
            source: Arc::new(source),
        })?;
        let damage_at_open = damage.map(|damage| damage.describe(log.lock().path()));
        Ok(Handle {
            current: RwLock::new(Some(Arc::new(db))),
            reopen,
            log,
            label: label.display().to_string(),
            damage_at_open,
            read_only: None,
        })
    }

    /// The file's name in messages.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Why the ledger is opened for reading only, if it is.
    pub(crate) fn read_only(&self) -> Option<&ReadOnly> {
        self.read_only.as_ref()
    }

    /// Damage the open found that must stop every write (the ledger stays readable).
    pub(crate) fn damage_at_open(&self) -> Option<String> {
        self.damage_at_open.clone()
    }

    /// The redo log the commits of this database write first.
    pub(crate) fn log(&self) -> &Arc<Log> {
        &self.log
    }

    fn current(&self) -> Result<Arc<Database>, StoreError> {
        let current = self
            .current
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone();
        match current {
            Some(db) => Ok(db),
            None => self.reopen_after(None),
        }
    }

    /// Replaces `failed` with a freshly opened database, unless another thread already did.
    /// In single-process mode the file is locked by the handle that holds it, so the failed
    /// handle is let go of first (transactions still running on it fail and end).
    fn reopen_after(&self, failed: Option<Arc<Database>>) -> Result<Arc<Database>, StoreError> {
        let mut current = self
            .current
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        match (&*current, &failed) {
            (Some(db), Some(failed)) if !Arc::ptr_eq(db, failed) => return Ok(db.clone()),
            (Some(db), None) => return Ok(db.clone()),
            _ => {}
        }
        tracing::warn!("the ledger's database handle failed an I/O operation; opening it again");
        *current = None;
        drop(failed);
        let db = (self.reopen)().map_err(store_error)?;
        if self.read_only.is_some() {
            // The database's writes were in memory: the log is applied to it again.
            wal::replay_in_memory(&db, &self.log)?;
        } else {
            // Only what was acknowledged: a record whose commit failed is not replayed.
            let acknowledged = self.log.lock().last_lsn();
            if let Some(damage) = wal::recover(&db, &self.log, Some(acknowledged))? {
                let detail = damage.describe(self.log.lock().path());
                *current = Some(Arc::new(db));
                return Err(StoreError::Damaged {
                    ledger: self.label.clone(),
                    detail,
                });
            }
        }
        self.log.set_must_recover(false);
        let db = Arc::new(db);
        *current = Some(db.clone());
        Ok(db)
    }

    /// Runs `begin` on the current handle, and once more on a reopened one if the current
    /// handle has latched an I/O failure.
    fn begin<T>(
        &self,
        begin: impl Fn(&Database) -> Result<T, TransactionError>,
    ) -> Result<T, StoreError> {
        let db = self.current()?;
        match begin(&db) {
            Err(TransactionError::Storage(StorageError::PreviousIo | StorageError::Io(_))) => {
                let db = self.reopen_after(Some(db))?;
                begin(&db).map_err(store_error)
            }
            other => other.map_err(store_error),
        }
    }

    pub(crate) fn begin_read(&self) -> Result<ReadTransaction, StoreError> {
        self.begin(|db| db.begin_read())
    }

    pub(crate) fn begin_write(&self) -> Result<WriteTransaction, StoreError> {
        if self.log.must_recover() {
            let db = self.current()?;
            self.reopen_after(Some(db))?;
        }
        self.begin(|db| db.begin_write())
    }
}

/// Opens the ledger file at `path`, creating it if nothing is there.
///
/// A new ledger is built under a temporary name beside `path` (tables created, committed)
/// and then hard-linked to `path`, which fails if `path` appeared meanwhile: a file at
/// `path` is therefore always a complete ledger, a crash during creation leaves nothing
/// there, and two processes creating at once end up sharing one ledger. An existing file
/// is checked read-only first ([`check_existing`]) and only opened for writing when it is
/// a redb database holding our tables.
pub(crate) fn open_file(path: &Path) -> Result<Opened, OpenError> {
    let database_error = |source: DatabaseError| OpenError::Database {
        path: path.to_path_buf(),
        source: Arc::new(redb::Error::from(source)),
    };
    let reopen_path = path.to_path_buf();
    let reopen: Reopen = Box::new(move || builder().open(&reopen_path));
    loop {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => {
                return Err(OpenError::NotAFile {
                    path: path.to_path_buf(),
                });
            }
            Ok(_) => {
                let state = match builder().open_read_only(path) {
                    Err(DatabaseError::DatabaseAlreadyOpen) => return Ok(Opened::HeldElsewhere),
                    checked => check_existing(path, checked)?,
                };
                let db = match builder().open(path) {
                    Err(DatabaseError::DatabaseAlreadyOpen) => return Ok(Opened::HeldElsewhere),
                    opened => opened.map_err(database_error)?,
                };
                check_tables(path, &db)?;
                let wal = open_log(path, false, state).map_err(open_error)?;
                return Ok(Opened::Held(Handle::recovered(path, db, reopen, wal)?));
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                if let Some(db) = create_file(path)? {
                    let wal = open_log(path, true, LedgerState::Clean).map_err(open_error)?;
                    return Ok(Opened::Held(Handle::recovered(path, db, reopen, wal)?));
                }
                // Another process created it first: open theirs.
            }
            Err(source) => {
                return Err(OpenError::Unreadable {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
}

/// A redo log that cannot be opened, as the open of its ledger reports it: named as the
/// log, never as a database.
fn open_error(error: WalError) -> OpenError {
    match error {
        WalError::Unreadable {
            path,
            problem,
            advice,
        } => OpenError::RedoLog {
            path,
            problem,
            advice,
        },
        WalError::Io { path, source } => OpenError::Unreadable { path, source },
    }
}

/// Why an open failed only because the ledger may not be written here.
pub(crate) struct WriteDenied {
    /// In words: "this user may not write it", "its file system is read-only".
    pub(crate) why: String,
    /// The system's error.
    pub(crate) io: String,
}

/// Why an open failed only because the ledger may not be written here, if it did: an
/// I/O error anywhere in its chain saying permission denied (`EACCES`, `EPERM`) or a
/// read-only file system (`EROFS`). A read-only command then opens it with
/// [`open_read_only`].
pub(crate) fn write_denied(error: &OpenError) -> Option<WriteDenied> {
    fn io_cause(error: &std::io::Error) -> Option<WriteDenied> {
        let why = match (error.kind(), error.raw_os_error()) {
            (std::io::ErrorKind::ReadOnlyFilesystem, _) | (_, Some(libc::EROFS)) => {
                "its file system is read-only"
            }
            (std::io::ErrorKind::PermissionDenied, _) | (_, Some(libc::EACCES | libc::EPERM)) => {
                "this user may not write it"
            }
            _ => return None,
        };
        Some(WriteDenied {
            why: why.to_string(),
            io: error.to_string(),
        })
    }
    /// The chain under a backend's error (an `Arc`, which `source()` looks through).
    fn in_chain(error: &(dyn std::error::Error + 'static)) -> Option<WriteDenied> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(io) = error.downcast_ref::<std::io::Error>() {
                return io_cause(io);
            }
            if let Some(redb::Error::Io(io)) = error.downcast_ref::<redb::Error>() {
                return io_cause(io);
            }
            if let Some(store) = error.downcast_ref::<StoreError>() {
                return store.source_error().and_then(|e| in_chain(e));
            }
            next = error.source();
        }
        None
    }
    match error {
        OpenError::Database { source, .. } | OpenError::Store { source, .. } => in_chain(&**source),
        OpenError::Unreadable { source, .. }
        | OpenError::Create { source, .. }
        | OpenError::DataDir { source, .. } => io_cause(source),
        _ => None,
    }
}

/// Opens the ledger file at `path` for reading only, writing nothing to disk: `why` says
/// why it may not be written here (see [`write_denied`]).
///
/// The database is opened over an [`Overlay`] of the file: redb may recover a file a
/// crashed writer left (in memory), and the records of the redo log it lacks are applied
/// to it in memory ([`wal::replay_in_memory`]; the log is opened read-only). No lock is
/// taken on the file beyond redb's read-only look at it first (which finds a live writer),
/// no socket, no checkpoint, nothing created beside it. A log that cannot be read is
/// reported precisely: after a clean close it holds nothing the ledger lacks (the ledger
/// is read without it); otherwise the open fails saying why.
pub(crate) fn open_read_only(path: &Path, why: &str) -> Result<Handle, OpenError> {
    let database_error = |source: redb::Error| OpenError::Database {
        path: path.to_path_buf(),
        source: Arc::new(source),
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(OpenError::NotAFile {
                path: path.to_path_buf(),
            });
        }
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(OpenError::NoLedger {
                path: path.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(OpenError::Unreadable {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    let probed = builder().open_read_only(path);
    if let Err(DatabaseError::Storage(StorageError::Io(error))) = &probed
        && error.kind() == std::io::ErrorKind::PermissionDenied
    {
        return Err(OpenError::ReadOnly {
            path: path.to_path_buf(),
            why: format!("this user may not read it either ({error})"),
        });
    }
    let state = match probed {
        Err(DatabaseError::DatabaseAlreadyOpen) => {
            return Err(OpenError::ReadOnly {
                path: path.to_path_buf(),
                why: format!(
                    "{why}, and a running server holds it and writes it: it cannot be read \
                     consistently from here while that server writes (stop the server, or \
                     read it as the user the server runs as)"
                ),
            });
        }
        checked => check_existing(path, checked)?,
    };
    let file = path.to_path_buf();
    let make = move || -> Result<Database, DatabaseError> {
        builder().create_with_backend(Overlay::open(&file)?)
    };
    let db = make().map_err(|e| database_error(e.into()))?;
    check_tables(path, &db)?;
    let log_file = wal::log_path(path);
    let (wal, unread) = match open_log_read_only(path, state) {
        Ok(wal) => (wal, None),
        Err(WalError::Io { path: log, source }) if state == LedgerState::Clean => {
            let wal = Wal::open_read_only(None, &log, state).map_err(open_error)?;
            let unread = format!(
                "{} cannot be read here ({source}); the ledger was closed cleanly, so it holds \
                 nothing the ledger lacks",
                log.display()
            );
            (wal, Some(unread))
        }
        Err(WalError::Io { path: log, source }) => {
            return Err(OpenError::ReadOnly {
                path: path.to_path_buf(),
                why: format!(
                    "{why}, and it was not closed cleanly (a server holding it was stopped or \
                     killed), so its last commits may be only in its redo log {}, which cannot \
                     be read here ({source}). Its owner can open it once (any command, e.g. \
                     `reasoning-ledger sessions`), which writes them into the ledger file, or \
                     make {} readable",
                    log.display(),
                    log.display()
                ),
            });
        }
        Err(error) => return Err(open_error(error)),
    };
    let log = Arc::new(Log::new(wal));
    let store_open_error = |source: StoreError| OpenError::Store {
        label: path.display().to_string(),
        source: Arc::new(source),
    };
    let replayed = wal::replay_in_memory(&db, &log).map_err(store_open_error)?;
    let mut note = format!(
        "the ledger {} is read-only here ({why}): it is read without writing anything (no \
         checkpoint, no lock, no socket, nothing created beside it)",
        path.display()
    );
    if replayed.records > 0 {
        note.push_str(&format!(
            "; {} commit(s) pending in {} were applied in memory",
            replayed.records,
            log_file.display()
        ));
    }
    for more in [replayed.skipped.clone(), unread].into_iter().flatten() {
        note.push_str("; ");
        note.push_str(&more);
    }
    let damage_at_open = replayed.damage.map(|damage| damage.describe(&log_file));
    Ok(Handle {
        current: RwLock::new(Some(Arc::new(db))),
        reopen: Box::new(make),
        log,
        label: path.display().to_string(),
        damage_at_open,
        read_only: Some(ReadOnly {
            why: why.to_string(),
            note,
        }),
    })
}

/// Opens the log of the ledger file at `path`, creating it (complete, under a temporary
/// name, then moved into place) if there is none. The directory is synced after a log is
/// created, and always when `ledger_linked` (the ledger file's own name is new there).
/// `ledger` says how the ledger file was left (what a log that cannot be read may hold).
fn open_log(path: &Path, ledger_linked: bool, ledger: LedgerState) -> Result<Wal, WalError> {
    let log = wal::log_path(path);
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
            let file = wal::DiskLog::new(file, &log, true);
            let wal = Wal::open(Box::new(file), &log, wal::LogSize::PRODUCT, ledger)?;
            if ledger_linked {
                sync_dir();
            }
            return Ok(wal);
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(io_error(error)),
    }
    let temp = temp_beside(&log).map_err(io_error)?;
    let file = temp.as_file().try_clone().map_err(io_error)?;
    // Opened again by its final name after a failed write (the temporary one is gone).
    let file = wal::DiskLog::new(file, &log, true);
    let wal = Wal::open(Box::new(file), &log, wal::LogSize::PRODUCT, ledger)?;
    match temp.persist_noclobber(&log) {
        Ok(_) => {}
        Err(error) if error.error.kind() == std::io::ErrorKind::AlreadyExists => {
            // Only the process holding the ledger file gets here; someone else's file.
            return Err(WalError::Unreadable {
                path: log.clone(),
                problem: "it appeared while this process was creating it".into(),
                advice: "another program wrote it; the ledger is not opened beside it".into(),
            });
        }
        Err(error) => return Err(io_error(error.error)),
    }
    sync_dir();
    Ok(wal)
}

/// Opens the log of the ledger file at `path` read-only, never writing or creating it (a
/// ledger this process may only read): a missing log holds nothing to replay. An error
/// opening it (permission denied) is the caller's to judge.
fn open_log_read_only(path: &Path, ledger: LedgerState) -> Result<Wal, WalError> {
    let log = wal::log_path(path);
    let file: Option<Box<dyn wal::LogFile>> = match std::fs::File::open(&log) {
        Ok(file) => Some(Box::new(wal::DiskLog::new(file, &log, false))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(WalError::Io { path: log, source }),
    };
    Wal::open_read_only(file, &log, ledger)
}

/// A new temporary file in `path`'s directory, named after it (`.NAME.creating-…`): where a
/// file is built complete before it is moved or linked to `path`.
pub(super) fn temp_beside(path: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    tempfile::Builder::new()
        .prefix(&format!(".{name}.creating-"))
        .tempfile_in(dir)
}

/// Builds a new ledger beside `path` and links it into place. `None` when a file appeared
/// at `path` first (the temporary file is removed).
///
/// Nothing reaches the file under `path` before it is complete, so redb's own crash-safe
/// steps of creating a database (a sync before its magic number is written, another after)
/// and of its first commit guard a name no one opens: they run without syncing
/// ([`SyncsLater`]), and one sync of the whole file comes before the link. The directory
/// entry is synced by the redo log's creation, which follows (see [`open_file`]).
fn create_file(path: &Path) -> Result<Option<Database>, OpenError> {
    let create_error = |source| OpenError::Create {
        path: path.to_path_buf(),
        source,
    };
    let temp = temp_beside(path).map_err(create_error)?;
    let database_error = |source: redb::Error| OpenError::Database {
        path: path.to_path_buf(),
        source: Arc::new(source),
    };
    let syncs = Arc::new(AtomicBool::new(false));
    let backend = SyncsLater {
        file: FileBackend::new(temp.reopen().map_err(create_error)?)
            .map_err(|e| database_error(e.into()))?,
        syncs: syncs.clone(),
    };
    let db = builder()
        .create_with_backend(backend)
        .map_err(|e| database_error(e.into()))?;
    tables::create_all(&db).map_err(database_error)?;
    syncs.store(true, Ordering::Release);
    temp.as_file().sync_data().map_err(create_error)?;
    let linked = std::fs::hard_link(temp.path(), path);
    let link_error = match linked {
        Ok(()) => None,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            drop(db);
            return Ok(None);
        }
        Err(error) => Some(error),
    };
    if let Some(error) = link_error {
        // A file system without hard links: fall back to a rename, which cannot refuse to
        // replace a file that appeared meanwhile, so look first.
        tracing::debug!(%error, "hard link refused; creating the ledger by rename");
        if path.exists() {
            drop(db);
            return Ok(None);
        }
        temp.persist(path).map_err(|e| OpenError::Create {
            path: path.to_path_buf(),
            source: e.error,
        })?;
        return Ok(Some(db));
    }
    // `temp` removes its name on drop; the ledger lives on under `path`.
    drop(temp);
    Ok(Some(db))
}

/// redb's file backend whose syncs do nothing until `syncs` is set: a new ledger's file
/// while it is built under its temporary name ([`create_file`]), and the same as redb's
/// own from then on (the database built stays the one the process serves).
#[derive(Debug)]
struct SyncsLater {
    file: FileBackend,
    syncs: Arc<AtomicBool>,
}

impl StorageBackend for SyncsLater {
    fn len(&self) -> std::io::Result<u64> {
        self.file.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.file.read(offset, out)
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)
    }

    fn sync_data(&self) -> std::io::Result<()> {
        if self.syncs.load(Ordering::Acquire) {
            self.file.sync_data()
        } else {
            Ok(())
        }
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.file.write(offset, data)
    }

    fn close(&self) -> std::io::Result<()> {
        self.file.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.file.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.query_lock_range(start, end)
    }
}

/// Opens the ledger over a redb storage backend, with the rules [`open_file`] applies to a
/// file: empty storage becomes a new ledger; anything else must already be one. `make`
/// builds a fresh backend over the same storage for every open (the read-only check, the
/// open, reopens after an I/O failure); `label` names it in errors.
pub(crate) fn open_backend<B: redb::StorageBackend>(
    label: &Path,
    make: impl Fn() -> B + Send + Sync + 'static,
    log: Box<dyn wal::LogFile>,
    log_size: wal::LogSize,
) -> Result<Handle, OpenError> {
    let database_error = |source: redb::Error| OpenError::Database {
        path: label.to_path_buf(),
        source: Arc::new(source),
    };
    let probe = make();
    let empty = probe
        .len()
        .map_err(|e| database_error(redb::Error::Io(e)))?
        == 0;
    drop(probe);
    let state = if empty {
        LedgerState::Clean
    } else {
        check_existing(label, builder().open_read_only_with_backend(make()))?
    };
    let db = builder()
        .create_with_backend(make())
        .map_err(|e| database_error(e.into()))?;
    if empty {
        tables::create_all(&db).map_err(database_error)?;
    } else {
        check_tables(label, &db)?;
    }
    let reopen: Reopen = Box::new(move || builder().create_with_backend(make()));
    let wal = wal::Wal::open(log, &wal::log_path(label), log_size, state).map_err(open_error)?;
    Handle::recovered(label, db, reopen, wal)
}

/// The read-only look at an existing file before it is opened for writing. A read-only
/// open writes nothing, so whatever is refused here is left byte for byte as it was: not a
/// redb file (empty, random, another format), a truncated one, or a redb file without our
/// tables. A file a crashed writer left unclean cannot be opened read-only (redb wants to
/// recover it first); it passes on to the writable open, where redb recovers it as after
/// any crash and its tables are checked then. Returns how the file was left: closed
/// cleanly, or not (what its redo log may hold).
fn check_existing(
    path: &Path,
    opened: Result<ReadOnlyDatabase, DatabaseError>,
) -> Result<LedgerState, OpenError> {
    match opened {
        Ok(db) => check_tables(path, &db).map(|()| LedgerState::Clean),
        Err(DatabaseError::RepairAborted) => Ok(LedgerState::Unclean),
        Err(source) => Err(OpenError::Database {
            path: path.to_path_buf(),
            source: Arc::new(redb::Error::from(source)),
        }),
    }
}

/// Refuses a redb database that lacks one of our tables or holds it with other types. Only
/// the four tables every build has created are required: `positions` and `meta` appear in
/// an earlier build's ledger with its first write here.
fn check_tables(path: &Path, db: &impl ReadableDatabase) -> Result<(), OpenError> {
    let not_ours = |detail: String| OpenError::NotALedger {
        path: path.to_path_buf(),
        detail,
    };
    let txn = db.begin_read().map_err(|source| OpenError::Database {
        path: path.to_path_buf(),
        source: Arc::new(redb::Error::from(source)),
    })?;
    fn probe<K: redb::Key + 'static, V: redb::Value + 'static>(
        txn: &ReadTransaction,
        table: TableDefinition<K, V>,
    ) -> Result<(), String> {
        match txn.open_table(table) {
            Ok(_) => Ok(()),
            Err(TableError::TableDoesNotExist(name)) => Err(format!("it has no table {name:?}")),
            Err(error) => Err(error.to_string()),
        }
    }
    probe(&txn, EVENTS)
        .and_then(|()| probe(&txn, HEADS))
        .and_then(|()| probe(&txn, EVENT_IDS))
        .and_then(|()| probe(&txn, ALIASES))
        .map_err(not_ours)
}
