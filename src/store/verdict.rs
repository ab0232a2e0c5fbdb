//! The lasting damage verdict (DESIGN §15): what any process found damaged in a ledger,
//! kept in the ledger's own store so that every process, now and later, acts on it.
//!
//! Owns: [`Verdict`] (one finding: the session it is about, or the whole ledger), the
//! [`VerdictStore`] trait (load, record, clear, and a cheap look for what other processes
//! recorded) and its file form [`VerdictFile`] (`ledger.damage` beside `ledger.redb`,
//! replaced atomically). PostgreSQL keeps its verdicts in a table of its own
//! (`super::postgres::verdicts`). Must not: decide what is damage (callers do, through
//! [`super::damage::Damage`]) or clear a verdict on its own: only a `verify` that finds the
//! whole ledger sound clears them (after a restore, or on a ledger `recover` rebuilt).
//!
//! Assumptions: verdicts are few (one per damaged session at most, per process that found
//! it) and small; a store that cannot be written (a read-only directory) keeps them in the
//! finding process only, which still refuses its own writes.

use super::StoreError;
use crate::event::SessionId;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Extension of the verdict file beside a ledger file (`ledger.redb` → `ledger.damage`).
pub(crate) const VERDICT_FILE_EXTENSION: &str = "damage";

/// Most verdicts a store keeps: enough to name every damaged session of a big ledger,
/// bounded so a runaway finder cannot grow the file (or the table) without end.
pub(crate) const MAX_VERDICTS: usize = 4096;

/// One damage finding that outlives the process that made it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Verdict {
    /// The damaged session; `None`: the ledger as a whole (its structure, its counter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) session: Option<SessionId>,
    /// What was found, where, in a sentence.
    pub(crate) detail: String,
    /// When it was found (ms since the epoch).
    pub(crate) at: u64,
}

impl Verdict {
    /// A verdict found now.
    pub(crate) fn now(session: Option<SessionId>, detail: impl Into<String>) -> Verdict {
        Verdict {
            session,
            detail: detail.into(),
            at: crate::event::now_ms(),
        }
    }
}

/// Where a ledger's verdicts are kept. Every method blocks.
pub(crate) trait VerdictStore: Send + Sync + 'static {
    /// Every recorded verdict.
    fn load(&self) -> Result<Vec<Verdict>, StoreError>;

    /// Every recorded verdict if they may have changed since the last look (another
    /// process recorded or cleared one), `None` when they have not: called before every
    /// group commit, so it must cost next to nothing when nothing changed. A store whose
    /// write transaction reads its verdicts anyway (PostgreSQL) answers `None`.
    fn reload_if_changed(&self) -> Option<Vec<Verdict>> {
        None
    }

    /// Adds `verdict` (a verdict already recorded for its session, or the ledger, is kept
    /// as it is).
    fn record(&self, verdict: &Verdict) -> Result<(), StoreError>;

    /// Removes every verdict: the ledger verified sound as a whole.
    fn clear(&self) -> Result<(), StoreError>;
}

/// Keeps nothing: a ledger without a store of its own for verdicts (a test's in-memory
/// storage). What a process finds still stops its own writes.
pub(crate) struct Unrecorded;

impl VerdictStore for Unrecorded {
    fn load(&self) -> Result<Vec<Verdict>, StoreError> {
        Ok(Vec::new())
    }
    fn record(&self, _: &Verdict) -> Result<(), StoreError> {
        Ok(())
    }
    fn clear(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The verdict file's content.
#[derive(Default, Serialize, Deserialize)]
struct VerdictDocument {
    verdicts: Vec<Verdict>,
}

/// What identifies one version of the verdict file: a rename gives a new inode, and a
/// write a new length or time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    len: u64,
    modified_ns: i128,
}

impl FileStamp {
    fn of(path: &Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            inode: meta.ino(),
            len: meta.len(),
            modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        })
    }
}

/// Verdicts in a JSON file beside the ledger file, replaced whole and atomically (written
/// beside it, synced, renamed over it, the directory synced): a reader sees the old list
/// or the new one, never half of one.
pub(crate) struct VerdictFile {
    path: PathBuf,
    /// The version of the file last loaded (`None`: there was none).
    seen: Mutex<Option<FileStamp>>,
}

impl VerdictFile {
    /// The verdict file of the ledger file at `ledger` (`ledger.redb` → `ledger.damage`).
    pub(crate) fn beside(ledger: &Path) -> VerdictFile {
        VerdictFile {
            path: ledger.with_extension(VERDICT_FILE_EXTENSION),
            seen: Mutex::new(None),
        }
    }

    /// [`VerdictFile::beside`] as a ledger's store (a file backend's
    /// [`super::contract::Backend::verdicts`]).
    pub(crate) fn store_beside(ledger: &Path) -> std::sync::Arc<dyn VerdictStore> {
        std::sync::Arc::new(VerdictFile::beside(ledger))
    }

    fn read(&self) -> Result<Vec<Verdict>, StoreError> {
        let stamp = FileStamp::of(&self.path);
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = stamp;
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(StoreError::backend(error)),
        };
        match serde_json::from_slice::<VerdictDocument>(&bytes) {
            Ok(document) => Ok(document.verdicts),
            // The record of damage is itself damaged: the ledger is not known sound.
            Err(error) => Ok(vec![Verdict::now(
                None,
                format!(
                    "its damage record {} cannot be read ({error}); a `verify` that finds the \
                     ledger sound writes it anew",
                    self.path.display()
                ),
            )]),
        }
    }

    fn write(&self, verdicts: &[Verdict]) -> Result<(), StoreError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let document = VerdictDocument {
            verdicts: verdicts.to_vec(),
        };
        let bytes = serde_json::to_vec_pretty(&document).map_err(StoreError::backend)?;
        let mut file = tempfile::Builder::new()
            .prefix(".ledger.damage.")
            .tempfile_in(dir)
            .map_err(StoreError::backend)?;
        use std::io::Write;
        file.write_all(&bytes).map_err(StoreError::backend)?;
        file.as_file().sync_all().map_err(StoreError::backend)?;
        file.persist(&self.path)
            .map_err(|error| StoreError::backend(error.error))?;
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = FileStamp::of(&self.path);
        Ok(())
    }
}

impl VerdictStore for VerdictFile {
    fn load(&self) -> Result<Vec<Verdict>, StoreError> {
        self.read()
    }

    fn reload_if_changed(&self) -> Option<Vec<Verdict>> {
        let now = FileStamp::of(&self.path);
        let seen = *self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if now == seen {
            return None;
        }
        match self.read() {
            Ok(verdicts) => Some(verdicts),
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "cannot read the ledger's damage record");
                None
            }
        }
    }

    fn record(&self, verdict: &Verdict) -> Result<(), StoreError> {
        let mut verdicts = self.read()?;
        let known = verdicts.iter().any(|v| v.session == verdict.session);
        if known || verdicts.len() >= MAX_VERDICTS {
            return Ok(());
        }
        verdicts.push(verdict.clone());
        self.write(&verdicts)
    }

    fn clear(&self) -> Result<(), StoreError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(StoreError::backend(error)),
        }
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_file_is_shared_by_two_handles_and_cleared_whole() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.redb");
        let here = VerdictFile::beside(&ledger);
        let there = VerdictFile::beside(&ledger);
        assert!(here.load().unwrap().is_empty());
        assert_eq!(
            there.reload_if_changed(),
            None,
            "nothing there, nothing changed"
        );
        let session = SessionId::generate();
        here.record(&Verdict::now(Some(session), "event seq 2 was altered"))
            .unwrap();
        here.record(&Verdict::now(Some(session), "found again"))
            .unwrap();
        let seen = there.reload_if_changed().expect("the other handle sees it");
        assert_eq!(seen.len(), 1, "one verdict per session");
        assert_eq!(seen[0].session, Some(session));
        assert_eq!(there.reload_if_changed(), None, "unchanged since");
        assert!(dir.path().join("ledger.damage").exists());
        there.clear().unwrap();
        assert_eq!(here.reload_if_changed(), Some(Vec::new()));
    }

    #[test]
    fn a_damaged_verdict_file_is_itself_a_verdict_on_the_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.redb");
        std::fs::write(dir.path().join("ledger.damage"), b"{not json").unwrap();
        let verdicts = VerdictFile::beside(&ledger).load().unwrap();
        assert_eq!(verdicts.len(), 1);
        assert_eq!(verdicts[0].session, None);
        assert!(
            verdicts[0].detail.contains("cannot be read"),
            "{verdicts:?}"
        );
    }
}
