//! The filled ledger whose start is measured: written once per bench run by driving a
//! server over stdio with the same `sequentialthinking` calls every run makes, then
//! copied whole for each spawn, so every spawn — of either build, in every round —
//! opens the same bytes.
//!
//! Owns: the fixture directory it is given to write and the copies it makes. Must not:
//! write the ledger through the library (a build measured as the baseline may be older
//! than this harness and unable to read what the library writes today; the fixture is
//! written by the binary the caller names, in the side-by-side run the baseline's, whose
//! ledger every later build opens), or time anything.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use reasoning_ledger::testing::LEDGER_FILE_NAME;

use super::session::{self, Session};

/// A ledger of `thoughts` recorded thoughts in one directory, closed by its server.
#[derive(Debug, Clone)]
pub(crate) struct FilledLedger {
    /// The directory holding the ledger's files.
    pub dir: PathBuf,
    /// Thoughts recorded in it (one session).
    pub thoughts: usize,
    /// Bytes of all its files (the ledger and its redo log).
    pub bytes: u64,
    /// Bytes of the ledger file itself (`ledger.redb`), if the writer named it so.
    pub ledger_file_bytes: Option<u64>,
}

/// Spawns `argv` on the empty directory `dir`, records `thoughts` thoughts with
/// `in_flight` calls in flight, and closes the server (which checkpoints the ledger).
pub(crate) async fn write(
    argv: &[String],
    dir: &Path,
    thoughts: usize,
    in_flight: usize,
) -> anyhow::Result<FilledLedger> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let server = Session::start(argv, dir).await?;
    let recorded = session::call_concurrent(&server.peer(), 1, thoughts, thoughts, in_flight)
        .await
        .with_context(|| format!("recording {thoughts} thoughts"));
    let closed = server.close().await;
    recorded?;
    closed?;
    Ok(FilledLedger {
        dir: dir.to_path_buf(),
        thoughts,
        bytes: tree_bytes(dir)?,
        ledger_file_bytes: std::fs::metadata(dir.join(LEDGER_FILE_NAME))
            .ok()
            .map(|meta| meta.len()),
    })
}

impl FilledLedger {
    /// Copies the ledger's files (regular files and directories; a socket or lock a server
    /// left is not the ledger) into `to`, which must not exist, and syncs every file and
    /// directory copied. The sync is the point: both builds sync the ledger file before
    /// answering `initialize`, and a copy left dirty in the page cache would make that
    /// sync write the whole copy out — the start would time the bench's copy, not the
    /// server. Synced, the copy is what a ledger at rest is: on disk, and in the page cache.
    pub(crate) fn copy_to(&self, to: &Path) -> anyhow::Result<()> {
        copy_tree(&self.dir, to)
    }
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {}", entry.path().display()))?;
            sync_path(&target)?;
        }
    }
    sync_path(to)
}

/// `fsync` of a file or directory by path.
fn sync_path(path: &Path) -> anyhow::Result<()> {
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .with_context(|| format!("syncing {}", path.display()))
}

/// Bytes of every regular file under `dir`.
fn tree_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            bytes += tree_bytes(&entry.path())?;
        } else if kind.is_file() {
            bytes += entry.metadata()?.len();
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_holds_the_same_bytes_and_skips_what_is_not_a_file() {
        let scratch = tempfile::tempdir().expect("scratch");
        let from = scratch.path().join("from");
        std::fs::create_dir_all(from.join("index")).expect("fixture dirs");
        std::fs::write(from.join("ledger.redb"), b"ledger bytes").expect("ledger");
        std::fs::write(from.join("index").join("meta"), b"index").expect("index");
        let _socket = std::os::unix::net::UnixListener::bind(from.join("ledger.sock"))
            .expect("a socket like a server's");
        let filled = FilledLedger {
            dir: from.clone(),
            thoughts: 1,
            bytes: tree_bytes(&from).expect("size"),
            ledger_file_bytes: None,
        };
        assert_eq!(filled.bytes, 17);
        let to = scratch.path().join("to");
        filled.copy_to(&to).expect("copy");
        assert_eq!(
            std::fs::read(to.join("ledger.redb")).expect("copied"),
            b"ledger bytes"
        );
        assert_eq!(
            std::fs::read(to.join("index").join("meta")).expect("copied"),
            b"index"
        );
        assert!(!to.join("ledger.sock").exists());
        assert!(filled.copy_to(&to).is_err(), "the target must be new");
    }
}
