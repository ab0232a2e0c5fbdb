//! The durability baseline: what one `fdatasync` of a small write costs on
//! the filesystem that holds the data directory, measured in the same run as
//! the servers.
//!
//! Owns: the scratch file it writes (created and removed here) and reading
//! `/proc/self/mounts` to name the filesystem. Must not: touch any other file
//! in the data directory.

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::stats::LatencySummary;

/// Size of the write that precedes each `fdatasync`: one page.
pub(crate) const FSYNC_WRITE_BYTES: usize = 4096;

/// Name of the scratch file written inside the data directory.
const SCRATCH_FILE_NAME: &str = ".bench-fdatasync.tmp";

/// The measured baseline.
#[derive(Debug, Clone)]
pub(crate) struct FsyncFigures {
    /// Directory the scratch file was written in.
    pub dir: PathBuf,
    /// Filesystem type of that directory per `/proc/self/mounts`, if known.
    pub filesystem: Option<String>,
    /// Latency of one 4 KiB overwrite followed by `File::sync_data`.
    pub latency: LatencySummary,
}

/// Writes 4 KiB at offset 0 of a scratch file in `dir` and calls
/// `sync_data` (fdatasync), `samples` times, timing each write + sync;
/// removes the file afterwards. Blocking: call it from `spawn_blocking`.
pub(super) fn sample_fdatasync(dir: &Path, samples: usize) -> anyhow::Result<Vec<Duration>> {
    let path = dir.join(SCRATCH_FILE_NAME);
    let result = time_syncs(&path, samples);
    // Best effort: a leftover scratch file is harmless, the error is not.
    let _ = fs::remove_file(&path);
    result
}

impl FsyncFigures {
    /// Summarises samples taken in `dir` (possibly in several batches).
    pub(crate) fn from_samples(dir: &Path, samples: Vec<Duration>) -> anyhow::Result<Self> {
        let latency =
            LatencySummary::from_samples(samples).context("no fdatasync samples were taken")?;
        Ok(Self {
            dir: dir.to_path_buf(),
            filesystem: filesystem_of(dir),
            latency,
        })
    }
}

fn time_syncs(path: &Path, samples: usize) -> anyhow::Result<Vec<Duration>> {
    let mut page = PageSync::create(path)?;
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        page.sync_one()
            .with_context(|| format!("writing and syncing {}", path.display()))?;
        out.push(start.elapsed());
    }
    Ok(out)
}

/// A scratch file whose one page is overwritten in place and `fdatasync`ed, as a log tail
/// the allocator already extended is (no size change, so no metadata to journal).
pub(crate) struct PageSync {
    file: File,
}

impl PageSync {
    /// Creates the file at `path` with its page allocated and synced.
    pub(crate) fn create(path: &Path) -> anyhow::Result<Self> {
        let mut file: File = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?;
        file.write_all(&[0x5a_u8; FSYNC_WRITE_BYTES])
            .and_then(|()| file.sync_all())
            .with_context(|| format!("preparing {}", path.display()))?;
        Ok(PageSync { file })
    }

    /// Overwrites the page and syncs it.
    pub(crate) fn sync_one(&mut self) -> anyhow::Result<()> {
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(&[0x5a_u8; FSYNC_WRITE_BYTES])?;
        self.file.sync_data()?;
        Ok(())
    }
}

/// Filesystem type of the mount that holds `dir`: the longest mount point in
/// `/proc/self/mounts` that is an ancestor of its canonical path.
pub(crate) fn filesystem_of(dir: &Path) -> Option<String> {
    let canonical = dir.canonicalize().ok()?;
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let _device = fields.next()?;
            let mount_point = unescape_mount_field(fields.next()?);
            let fs_type = fields.next()?;
            Some((PathBuf::from(mount_point), fs_type.to_owned()))
        })
        .filter(|(mount_point, _)| canonical.starts_with(mount_point))
        .max_by_key(|(mount_point, _)| mount_point.components().count())
        .map(|(_, fs_type)| fs_type)
}

/// `/proc/self/mounts` escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mount_field(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && let Some(value) = bytes.get(i + 1..i + 4).and_then(octal_byte)
        {
            out.push(value);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Three octal digits as one byte, if they are that.
fn octal_byte(digits: &[u8]) -> Option<u8> {
    digits.iter().try_fold(0_u8, |acc, &d| {
        let digit = (d as char).to_digit(8)?;
        acc.checked_mul(8)?.checked_add(u8::try_from(digit).ok()?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_octal_mount_points() {
        assert_eq!(unescape_mount_field(r"/mnt/my\040disk"), "/mnt/my disk");
        assert_eq!(unescape_mount_field("/plain"), "/plain");
        assert_eq!(unescape_mount_field(r"/trailing\04"), r"/trailing\04");
    }

    #[test]
    fn measures_in_a_directory_and_cleans_up() {
        let dir = std::env::temp_dir().join(format!("rl-bench-fsync-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("create scratch dir");
        let samples = sample_fdatasync(&dir, 3).expect("measure");
        let figures = FsyncFigures::from_samples(&dir, samples).expect("summarise");
        assert_eq!(figures.latency.samples, 3);
        assert!(FsyncFigures::from_samples(&dir, Vec::new()).is_err());
        assert!(!dir.join(SCRATCH_FILE_NAME).exists());
        fs::remove_dir(&dir).expect("scratch dir is empty again");
    }
}
