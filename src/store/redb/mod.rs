//! The redb backend: the ledger in one embedded file, held by one process at a time in
//! redb's single-process mode (DESIGN §3); the others reach it through that process (the
//! ledger host, built over this backend; the open that chooses is above both, in
//! `store/open.rs`).
//!
//! Owns: [`RedbBackend`] (the [`Backend`] over an [`open::Handle`]), its read and write
//! views ([`read`], [`write`]), the tables ([`tables`]), opening a file or a test storage
//! ([`open`]), assigning
//! positions to the events of a ledger an earlier build wrote, and the fault suites
//! (`fault`, test builds only). Must not: hold an append rule or a verify check (those
//! live once in the store's facade), or let a `redb` type out of this module.
//!
//! A write transaction is exclusive (one process holds the file, one writer thread writes
//! it), so reading the last position inside it and numbering the batch's events after it
//! makes commit order position order.
//!
//! A write view records every row it writes ([`wal::Put`]); its commit writes them as one
//! redo log record, syncs it, and commits redb without a sync ([`wal`]); a record that
//! does not fit in the log commits with a sync instead (a checkpoint), as does
//! [`Backend::idle`].
//!
//! A ledger this process may read but not write (permission denied, a read-only file
//! system) is opened by the read-only commands over [`overlay`] ([`open::open_read_only`]):
//! its backend refuses every write ([`StoreError::ReadOnly`]), never checkpoints and
//! never touches its log.

#[cfg(test)]
mod fault;
pub(crate) mod open;
mod overlay;
mod read;
mod tables;
pub(crate) mod wal;
mod write;

use super::contained::Contained;
use super::contract::{Backend, ReadView, WriteView};
use super::damage::{Damage, DamageScope, contain};
use super::error::is_disk_full;
use super::{Ledger, OpenError, StoreError, codec};
use crate::event::Families;
use ::redb::{ReadableTable, WriteTransaction};
use read::RedbRead;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use tables::{EVENTS, HEADS, META, POSITIONS, POSITIONS_ASSIGNED, WAL_LSN};
use wal::{Log, Put, Wal};
use write::RedbWrite;

/// Maps a redb error to the store's: an I/O error saying the disk is full becomes
/// [`StoreError::DiskFull`]; anything else [`StoreError::Backend`] with it as the source.
pub(crate) fn store_error(error: impl Into<::redb::Error>) -> StoreError {
    let error = error.into();
    if let ::redb::Error::Io(io) = &error
        && is_disk_full(io)
    {
        return StoreError::DiskFull(Arc::new(error));
    }
    StoreError::backend(error)
}

impl Ledger {
    /// Opens the ledger file at `path` for reading only, writing nothing to disk (no
    /// checkpoint, no lock, no socket, no file beside it): its redo log's pending records
    /// are applied in memory. Every write is refused ([`StoreError::ReadOnly`]). `why`
    /// says why it may not be written here.
    pub(crate) fn open_file_read_only(
        path: &Path,
        why: &str,
        families: Families,
    ) -> Result<Ledger, OpenError> {
        let handle = open::open_read_only(path, why)?;
        let note = handle.read_only().map(|r| r.note.clone());
        let mut ledger = Ledger::with_backend(RedbBackend::new(handle), path, families);
        ledger.read_only = note.map(Arc::from);
        Ok(ledger)
    }

    /// Opens a new ledger at the file `path` whose redo log never holds a record: every
    /// group is committed by redb alone, with its own sync (each commit a checkpoint). No
    /// host: this process holds the file alone. What the store would cost without its
    /// log, for the durability bench; never the product's ledger.
    pub(crate) fn open_redb_alone(path: &Path, families: Families) -> Result<Ledger, OpenError> {
        let io_error = |source| OpenError::Unreadable {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_error)?;
        let log_path = wal::log_path(path);
        let log = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&log_path)
            .map_err(io_error)?;
        let no_record_fits = wal::LogSize {
            capacity: wal::HEADER_BYTES,
            growth: wal::HEADER_BYTES,
        };
        Ledger::open_backend(
            path,
            move || {
                ::redb::backends::FileBackend::new(file.try_clone().expect("a second descriptor"))
                    .expect("the file was locked")
            },
            Box::new(wal::DiskLog::new(log, &log_path, true)),
            no_record_fits,
            families,
        )
    }

    /// Opens the ledger over any redb storage backend, with the same settings and rules as
    /// a file (empty storage becomes a new ledger). `make` builds a fresh backend over the
    /// same storage for every open; `label` names it in errors. The fault-injection tests
    /// run the real writer and reads through this, the durability bench redb alone.
    pub(crate) fn open_backend<B: ::redb::StorageBackend>(
        label: &Path,
        make: impl Fn() -> B + Send + Sync + 'static,
        log: Box<dyn wal::LogFile>,
        log_size: wal::LogSize,
        families: Families,
    ) -> Result<Ledger, OpenError> {
        let handle = open::open_backend(label, make, log, log_size)?;
        Ok(Ledger::with_backend(
            RedbBackend::new(handle),
            label,
            families,
        ))
    }
}

/// The ledger in a redb database.
pub(crate) struct RedbBackend {
    handle: open::Handle,
    /// A committed transaction showed [`POSITIONS_ASSIGNED`]: later ones need not look.
    positions_assigned: std::sync::atomic::AtomicBool,
    /// The ledger's record of damage, once it is built over this backend: every view is
    /// [`Contained`] in it (redb panics on a damaged page).
    damage: OnceLock<Damage>,
}

impl RedbBackend {
    pub(crate) fn new(handle: open::Handle) -> RedbBackend {
        RedbBackend {
            handle,
            positions_assigned: std::sync::atomic::AtomicBool::new(false),
            damage: OnceLock::new(),
        }
    }

    /// The record of damage this backend's views are contained in. Before the ledger is
    /// built over it (a test opening the backend alone), one of its own.
    fn damage(&self) -> &Damage {
        self.damage
            .get_or_init(|| Damage::new(DamageScope::Ledger, self.handle.label()))
    }

    /// A read snapshot that owns its transaction (it outlives any borrow of `self`), whose
    /// rows decode with `families`.
    pub(crate) fn read_owned(&self, families: &Families) -> Result<Box<dyn ReadView>, StoreError> {
        let damage = self.damage();
        let txn = contain(
            damage,
            || "beginning a read".into(),
            || self.handle.begin_read(),
        )?;
        let families = families.clone();
        Ok(Box::new(Contained::new(
            RedbRead { txn, families },
            damage.clone(),
        )))
    }

    /// A write transaction that owns itself.
    pub(crate) fn write_owned(
        &self,
        families: &Families,
    ) -> Result<Box<dyn WriteView>, StoreError> {
        let damage = self.damage();
        damage.check_write(None)?;
        if let Some(read_only) = self.handle.read_only() {
            return Err(StoreError::ReadOnly {
                ledger: self.handle.label().to_string(),
                why: read_only.why.clone(),
            });
        }
        contain(
            damage,
            || "beginning a write".into(),
            || self.begin_write_view(families),
        )
    }

    fn begin_write_view(&self, families: &Families) -> Result<Box<dyn WriteView>, StoreError> {
        let txn = self.handle.begin_write()?;
        let mut redo = Vec::new();
        let changed = if self.positions_assigned.load(Ordering::Relaxed) {
            false
        } else {
            let assigned = assign_positions(&txn, &mut redo, families)?;
            // Only what an earlier commit left counts: this transaction may yet abort.
            if !assigned {
                self.positions_assigned.store(true, Ordering::Relaxed);
            }
            assigned
        };
        Ok(Box::new(Contained::new(
            RedbWrite::new(
                txn,
                changed,
                redo,
                self.handle.log().clone(),
                families.clone(),
            ),
            self.damage().clone(),
        )))
    }

    /// Commits with a sync if records were written to the log since the last one, so the
    /// log starts again at its beginning (a checkpoint).
    pub(crate) fn checkpoint(&self) -> Result<(), StoreError> {
        if self.handle.read_only().is_some() || !self.handle.log().lock().needs_checkpoint() {
            return Ok(());
        }
        let txn = self.handle.begin_write()?;
        let log = self.handle.log();
        let mut wal = log.lock();
        let lsn = wal.last_lsn();
        commit_checkpoint(txn, log, &mut wal, lsn)
    }
}

/// Commits `txn` with a sync as a checkpoint at `lsn`: `meta.wal_lsn` says redb holds every
/// record up to it, and the log starts again at its beginning. A failed commit makes the
/// next write transaction reopen redb and replay the log first.
fn commit_checkpoint(
    txn: WriteTransaction,
    log: &Log,
    wal: &mut Wal,
    lsn: u64,
) -> Result<(), StoreError> {
    {
        let mut meta = txn.open_table(META).map_err(store_error)?;
        meta.insert(WAL_LSN, lsn).map_err(store_error)?;
    }
    match txn.commit() {
        Ok(()) => {
            wal.reset(lsn);
            Ok(())
        }
        Err(error) => {
            log.set_must_recover(true);
            Err(store_error(error))
        }
    }
}

impl Drop for RedbBackend {
    /// The ledger closes: a last checkpoint, then the log is cleared, so it holds nothing
    /// to replay (a failure leaves it as it is: the next open replays it).
    fn drop(&mut self) {
        // A damaged ledger is left exactly as it is: no checkpoint, and its log keeps every
        // record (`recover` reads them). A read-only one is never written.
        if self.damage().stops_every_write().is_some() || self.handle.read_only().is_some() {
            self.handle.close_quietly();
            return;
        }
        let damage = self.damage().clone();
        let closed = contain(
            &damage,
            || "closing the ledger".into(),
            || {
                self.checkpoint().and_then(|()| {
                    let mut wal = self.handle.log().lock();
                    wal.clear()
                        .map_err(|error| store_error(::redb::StorageError::Io(error)))
                })
            },
        );
        if let Err(error) = closed {
            tracing::warn!(%error, "closing the ledger's redo log failed; the next open replays it");
        }
    }
}

impl Backend for RedbBackend {
    /// A file's verdicts: `ledger.damage` beside it.
    #[allow(private_interfaces)]
    fn verdicts(
        &self,
        label: &std::path::Path,
    ) -> std::sync::Arc<dyn crate::store::verdict::VerdictStore> {
        crate::store::verdict::VerdictFile::store_beside(label)
    }

    fn read(&self, families: &Families) -> Result<Box<dyn ReadView + '_>, StoreError> {
        self.read_owned(families)
    }

    fn write(&self, families: &Families) -> Result<Box<dyn WriteView + '_>, StoreError> {
        self.write_owned(families)
    }

    fn on_damage(&self, damage: Damage) {
        if let Some(detail) = self.handle.damage_at_open() {
            damage.found(detail);
        }
        let _ = self.damage.set(damage);
    }

    fn idle(&self) {
        if self.damage().stops_every_write().is_some() || self.handle.read_only().is_some() {
            return;
        }
        let damage = self.damage().clone();
        if let Err(error) = contain(&damage, || "a checkpoint".into(), || self.checkpoint()) {
            tracing::warn!(%error, "the ledger's checkpoint failed; the redo log still holds every commit");
        }
    }
}

/// Gives every event of a ledger written by an earlier build (which kept no positions) a
/// position, once: ordered by time, then session, then seq, the closest to commit order
/// those rows still tell. Runs in the first write transaction that finds
/// [`POSITIONS_ASSIGNED`] missing, so the scan is paid once per ledger, never on an open;
/// every later transaction only reads that one key. Returns whether it wrote anything.
fn assign_positions(
    txn: &WriteTransaction,
    redo: &mut Vec<Put>,
    families: &Families,
) -> Result<bool, StoreError> {
    let mut meta = txn.open_table(META).map_err(store_error)?;
    if meta.get(POSITIONS_ASSIGNED).map_err(store_error)?.is_some() {
        return Ok(false);
    }
    let events = txn.open_table(EVENTS).map_err(store_error)?;
    let mut order: Vec<(u64, u128, u64)> = Vec::new();
    for row in events.iter().map_err(store_error)? {
        let (key, value) = row.map_err(store_error)?;
        let (session, seq) = key.value();
        // An undecodable row still gets a position (last); verify reports the row.
        let at = codec::decode_event_to_fold(value.value(), families).map_or(u64::MAX, |e| e.at);
        order.push((at, session, seq));
    }
    order.sort_unstable();
    let mut positions = txn.open_table(POSITIONS).map_err(store_error)?;
    let mut start = positions
        .last()
        .map_err(store_error)?
        .map_or(0, |(p, _)| p.value());
    let mut last_of: HashMap<u128, u64> = HashMap::new();
    for (_, session, seq) in order {
        start += 1;
        positions
            .insert(start, (session, seq))
            .map_err(store_error)?;
        redo.push(Put::Position {
            position: start,
            session,
            seq,
        });
        last_of.insert(session, start);
    }
    let mut heads = txn.open_table(HEADS).map_err(store_error)?;
    let mut rewritten = Vec::new();
    for row in heads.iter().map_err(store_error)? {
        let (key, value) = row.map_err(store_error)?;
        let mut head = tables::decode_head(value.value(), families)?;
        if let Some(position) = last_of.get(&key.value()) {
            head.position = *position;
            rewritten.push((key.value(), tables::encode_head(&head)));
        }
    }
    for (key, bytes) in rewritten {
        heads.insert(key, bytes.as_slice()).map_err(store_error)?;
        redo.push(Put::Head {
            session: key,
            row: bytes,
        });
    }
    meta.insert(POSITIONS_ASSIGNED, 1).map_err(store_error)?;
    redo.push(Put::Meta {
        key: POSITIONS_ASSIGNED.to_string(),
        value: 1,
    });
    tracing::info!(
        events = start,
        "assigned ledger positions to the events of an earlier build"
    );
    Ok(true)
}

#[cfg(test)]
mod tests {
    //! What only redb has: ledgers written by an earlier build.

    use super::*;
    use crate::event::{NewEvent, Payload, SessionId, SessionKind};
    use crate::store::SessionHead;
    use crate::store::rules::{self, Batch, Plan};
    use tables::{ALIASES, EVENT_IDS, session_key};

    /// Builds, with redb alone, a ledger as the build before positions wrote it: four
    /// tables, heads without a position and summaries without a version. Each session is
    /// (id, [(at, thoughts)]): one batch per entry, the first starting it.
    fn earlier_build_ledger(path: &Path, sessions: &[(SessionId, Vec<u64>)]) {
        let db = open::builder().create(path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut events = txn.open_table(EVENTS).unwrap();
            let mut heads = txn.open_table(HEADS).unwrap();
            let mut ids = txn.open_table(EVENT_IDS).unwrap();
            txn.open_table(ALIASES).unwrap();
            for (session, batches) in sessions {
                let mut head: Option<SessionHead> = None;
                for (index, at) in batches.iter().enumerate() {
                    let payload = if index == 0 {
                        Payload::SessionStarted {
                            kind: SessionKind::THINKING,
                            title: "old".into(),
                            aliases: Vec::new(),
                        }
                    } else {
                        Payload::SessionClosed {
                            reason: format!("{index}"),
                        }
                    };
                    let batch = Batch::New {
                        session: *session,
                        expected_seq: head.as_ref().map_or(0, |h| h.seq),
                        at: *at,
                        events: vec![NewEvent::new(payload)],
                    };
                    let Plan::Write(plan) =
                        rules::plan_append(head.as_ref(), &Default::default(), batch).unwrap()
                    else {
                        panic!("a write")
                    };
                    for event in &plan.events {
                        let key = (session_key(*session), event.seq);
                        events
                            .insert(key, codec::encode_event(event).as_slice())
                            .unwrap();
                        ids.insert(event.id.0.0, key).unwrap();
                    }
                    head = Some(plan.head);
                }
                let mut json = serde_json::to_value(head.unwrap()).unwrap();
                json.as_object_mut().unwrap().remove("position");
                json["summary"].as_object_mut().unwrap().remove("version");
                heads
                    .insert(
                        session_key(*session),
                        serde_json::to_vec(&json).unwrap().as_slice(),
                    )
                    .unwrap();
            }
        }
        txn.commit().unwrap();
    }

    #[test]
    fn an_earlier_builds_ledger_opens_verifies_and_gets_positions_on_its_first_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.redb");
        let (a, b) = (SessionId::generate(), SessionId::generate());
        // Interleaved in time: a@10, b@20, a@30, b@40.
        earlier_build_ledger(&path, &[(a, vec![10, 30]), (b, vec![20, 40])]);
        let ledger = Ledger::open_file(&path, crate::tools::families()).unwrap();
        assert_eq!(
            ledger.last_position().unwrap(),
            0,
            "no position before a write"
        );
        assert!(ledger.heads().unwrap().iter().all(|h| h.position == 0));
        assert!(ledger.events_from_position(0, 10).unwrap().is_empty());
        assert_eq!(ledger.verify_all().unwrap().len(), 2, "old rows verify");
        assert_eq!(ledger.head(a).unwrap().unwrap().summary.version, 1);

        // The first write assigns positions by time, then numbers its own after them.
        let appended = ledger
            .write_blocking(move |txn| {
                txn.append(
                    a,
                    2,
                    vec![NewEvent::new(Payload::SessionClosed {
                        reason: "new".into(),
                    })],
                )
            })
            .unwrap()
            .unwrap();
        assert_eq!(appended.head.position, 5);
        let order: Vec<(u64, SessionId, u64)> = ledger
            .events_from_position(0, 10)
            .unwrap()
            .into_iter()
            .map(|e| (e.position, e.event.session, e.event.seq))
            .collect();
        assert_eq!(
            order,
            [(1, a, 1), (2, b, 1), (3, a, 2), (4, b, 2), (5, a, 3)]
        );
        assert_eq!(ledger.head(b).unwrap().unwrap().position, 4);
        assert_eq!(ledger.verify_all().unwrap().len(), 2);
        drop(ledger);
        // Once: a second handle finds the positions there.
        let again = Ledger::open_file(&path, crate::tools::families()).unwrap();
        assert_eq!(again.last_position().unwrap(), 5);
    }

    #[test]
    fn a_write_transaction_that_only_assigns_positions_commits_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.redb");
        let a = SessionId::generate();
        earlier_build_ledger(&path, &[(a, vec![10, 20, 30])]);
        let ledger = Ledger::open_file(&path, crate::tools::families()).unwrap();
        // A job that appends nothing (a refused append) still carries the upkeep.
        let refused = ledger
            .write_blocking(move |txn| txn.append(a, 0, Vec::new()))
            .unwrap();
        assert!(refused.is_err());
        assert_eq!(ledger.last_position().unwrap(), 3);
        assert_eq!(ledger.head(a).unwrap().unwrap().position, 3);
    }

    /// One thought appended to `session` (started by its first call).
    fn append_one(ledger: &Ledger, session: SessionId, text: &str) {
        let text = text.to_string();
        ledger
            .write_blocking(move |txn| {
                let expected = txn.head(session)?.map_or(0, |h| h.seq);
                let mut batch = Vec::new();
                if expected == 0 {
                    batch.push(NewEvent::new(Payload::SessionStarted {
                        kind: SessionKind::THINKING,
                        title: "wal".into(),
                        aliases: Vec::new(),
                    }));
                }
                batch.push(NewEvent::new(Payload::SessionClosed { reason: text }));
                txn.append(session, expected, batch)
            })
            .unwrap()
            .unwrap();
    }

    #[test]
    fn a_ledger_of_the_build_before_the_redo_log_opens_and_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.redb");
        // As the previous build created it: the tables, no log, no log keys in meta.
        tables::create_all(&open::builder().create(&path).unwrap()).unwrap();
        let session = SessionId::generate();
        {
            let ledger = Ledger::open_file(&path, crate::tools::families()).unwrap();
            append_one(&ledger, session, "first");
        }
        assert!(
            wal::log_path(&path).exists(),
            "the log appears beside the ledger"
        );
        let ledger = Ledger::open_file(&path, crate::tools::families()).unwrap();
        append_one(&ledger, session, "second");
        assert_eq!(ledger.head(session).unwrap().unwrap().seq, 3);
        assert_eq!(ledger.verify_all().unwrap().len(), 1);
    }

    #[test]
    fn a_ledger_opened_read_only_applies_its_log_in_memory_refuses_writes_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.redb");
        let session = SessionId::generate();
        let ledger = Ledger::open_file(&path, crate::tools::families()).unwrap();
        for text in ["one", "two", "three"] {
            append_one(&ledger, session, text);
        }
        // A crash image taken now: the commits after the first are in the log only.
        let copy = tempfile::tempdir().unwrap();
        let copied = copy.path().join("ledger.redb");
        std::fs::copy(&path, &copied).unwrap();
        std::fs::copy(wal::log_path(&path), wal::log_path(&copied)).unwrap();
        drop(ledger);
        let files = |dir: &Path| -> Vec<(std::ffi::OsString, Vec<u8>)> {
            let mut files: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (e.file_name(), std::fs::read(e.path()).unwrap())
                })
                .collect();
            files.sort();
            files
        };
        let before = files(copy.path());
        {
            let ledger =
                Ledger::open_file_read_only(&copied, "a test says so", crate::tools::families())
                    .unwrap();
            let note = ledger.read_only().expect("read-only");
            assert!(note.contains("a test says so"), "{note}");
            assert!(note.contains("applied in memory"), "{note}");
            assert_eq!(ledger.head(session).unwrap().unwrap().seq, 4);
            assert_eq!(ledger.verify_all().unwrap().len(), 1);
            let refused = ledger
                .write_blocking(move |txn| txn.append(session, 4, Vec::new()))
                .unwrap_err();
            assert!(matches!(refused, StoreError::ReadOnly { .. }), "{refused}");
        }
        assert_eq!(files(copy.path()), before, "nothing was written or created");
    }

    #[test]
    fn a_foreign_file_where_the_log_goes_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.redb");
        drop(Ledger::open_file(&path, crate::tools::families()).unwrap());
        let log = wal::log_path(&path);
        std::fs::write(&log, vec![7u8; 8192]).unwrap();
        let error = Ledger::open_file(&path, crate::tools::families())
            .err()
            .expect("refused");
        assert!(error.to_string().contains("ledger.wal"), "{error}");
        assert_eq!(std::fs::read(&log).unwrap(), vec![7u8; 8192]);
    }
}
