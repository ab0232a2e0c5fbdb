//! Files a model names (`solve`'s `outputPath`): written only inside the export
//! directory (DESIGN §8), private (0600, directories 0700).
//!
//! Owns: [`export_dir`] (`REASONING_LEDGER_EXPORT_DIR`, else `exports/` beside the
//! ledger), [`resolve`] (the checks: no `..`, absolute paths only inside the directory,
//! compared by components after canonicalising the nearest existing ancestor, so a
//! sibling with the same prefix or a symlinked parent cannot escape; an existing file only
//! with `overwrite`; then the file's directory opened from the export directory's handle
//! one component at a time without following symlinks, and held: a [`Target`]) and
//! [`write`] (through that handle, after checking that the path still leads to it:
//! create-new, or with `overwrite` a temporary file renamed over a regular file; never
//! through a symlink). Must not: write anywhere else, or leave a partial file at the path.

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

/// The environment variable naming the export directory.
pub(crate) const EXPORT_DIR_ENV: &str = "REASONING_LEDGER_EXPORT_DIR";
/// The export directory's name beside the ledger when the variable is unset.
pub(crate) const DEFAULT_EXPORT_DIR: &str = "exports";
/// Longest `outputPath` accepted, in bytes.
pub(crate) const MAX_OUTPUT_PATH_BYTES: usize = 1024;

/// The export directory for a ledger at `ledger_path`.
pub(crate) fn export_dir(ledger_path: &Path) -> PathBuf {
    match std::env::var_os(EXPORT_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => ledger_path
            .parent()
            .unwrap_or(Path::new("."))
            .join(DEFAULT_EXPORT_DIR),
    }
}

/// The nearest ancestor of `path` that exists, canonicalised, and the components below it.
fn existing_ancestor(path: &Path) -> Result<(PathBuf, Vec<std::ffi::OsString>), String> {
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    loop {
        match fs::canonicalize(&at) {
            Ok(real) => {
                rest.reverse();
                return Ok((real, rest));
            }
            Err(_) => {
                let Some(name) = at.file_name() else {
                    return Err(format!("no existing directory above {}", path.display()));
                };
                rest.push(name.to_os_string());
                if !at.pop() {
                    return Err(format!("no existing directory above {}", path.display()));
                }
            }
        }
    }
}

/// A checked `outputPath`: the export directory and the file's directory, both held open
/// (what [`write`] writes through), and the file's name.
#[derive(Debug)]
pub(crate) struct Target {
    /// The export directory, canonical, and its handle.
    root: PathBuf,
    root_fd: OwnedFd,
    /// The components from the export directory to the file's directory.
    below: Vec<OsString>,
    /// The file's directory: its handle, opened at check time.
    dir_fd: OwnedFd,
    name: OsString,
    path: PathBuf,
}

impl Target {
    /// Where the file is written (for answers).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Flags of a directory opened as a handle: never through a symlink.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// `below`, opened one component at a time from `root_fd` without following symlinks
/// (each created 0700 first when `create`).
fn walk(root_fd: &OwnedFd, below: &[OsString], create: bool) -> std::io::Result<OwnedFd> {
    let mut at = rustix::io::dup(root_fd)?;
    for part in below {
        if create {
            match rustix::fs::mkdirat(&at, part.as_os_str(), Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        at = rustix::fs::openat(&at, part.as_os_str(), dir_flags(), Mode::empty())?;
    }
    Ok(at)
}

/// The same directory (device and inode)?
fn same(a: &OwnedFd, b: &OwnedFd) -> bool {
    match (rustix::fs::fstat(a), rustix::fs::fstat(b)) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => false,
    }
}

/// Checks `requested` against the export directory `root` and returns the file's
/// [`Target`] (its parent directories created inside `root`, 0700). Errors say how to fix
/// the argument.
pub(crate) fn resolve(root: &Path, requested: &str, overwrite: bool) -> Result<Target, String> {
    if requested.trim().is_empty() {
        return Err("outputPath is empty; give a file name such as summary.json".into());
    }
    if requested.len() > MAX_OUTPUT_PATH_BYTES || requested.contains('\0') {
        return Err(format!(
            "outputPath must be a file name under {MAX_OUTPUT_PATH_BYTES} bytes without NUL; give one such as summary.json"
        ));
    }
    crate::private::create_dir_all(root)
        .map_err(|e| format!("cannot create the export directory {}: {e}", root.display()))?;
    let root = fs::canonicalize(root)
        .map_err(|e| format!("cannot open the export directory {}: {e}", root.display()))?;
    let requested_path = Path::new(requested);
    if requested_path
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(format!(
            "outputPath {requested:?} climbs out with '..'; files are written only inside the export directory {}: give a path relative to it such as summary.json",
            root.display()
        ));
    }
    let path = if requested_path.is_absolute() {
        requested_path.to_path_buf()
    } else {
        root.join(requested_path)
    };
    let outside = || {
        format!(
            "outputPath {requested:?} is outside the export directory {}; files are written only there: give a path relative to it such as summary.json",
            root.display()
        )
    };
    let name = match path.file_name() {
        Some(name) if !requested.ends_with('/') => name.to_os_string(),
        _ => {
            return Err(format!(
                "outputPath {requested:?} names a directory; give a file name such as summary.json"
            ));
        }
    };
    let parent = path.parent().ok_or_else(outside)?;
    let (real, missing) = existing_ancestor(parent)?;
    let Ok(inside) = real.strip_prefix(&root) else {
        return Err(outside());
    };
    let below: Vec<OsString> = inside
        .components()
        .map(|c| c.as_os_str().to_os_string())
        .chain(missing)
        .collect();
    let dir_path = below.iter().fold(root.clone(), |at, part| at.join(part));
    // The handles: the export directory, then each component from it without following
    // a symlink, so a directory swapped for a symlink meanwhile is refused here and
    // anything swapped later is not where the file goes.
    let root_fd = rustix::fs::open(&root, dir_flags(), Mode::empty())
        .map_err(|e| format!("cannot open the export directory {}: {e}", root.display()))?;
    let dir_fd = walk(&root_fd, &below, true).map_err(|e| {
        format!(
            "outputPath {requested:?}: {} is not a directory inside the export directory ({e}); files are written only there: choose another path",
            dir_path.display()
        )
    })?;
    match rustix::fs::statat(&dir_fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => {
                return Err(format!(
                    "outputPath {requested:?} is a symbolic link; it is never written through: choose another name"
                ));
            }
            FileType::RegularFile if !overwrite => {
                return Err(format!(
                    "outputPath {requested:?} already exists; pass overwrite: true to replace it, or choose another name"
                ));
            }
            FileType::RegularFile => {}
            _ => {
                return Err(format!(
                    "outputPath {requested:?} exists and is not a regular file; choose another name"
                ));
            }
        },
        Err(rustix::io::Errno::NOENT) => {}
        Err(e) => {
            return Err(format!(
                "cannot look at {}: {e}",
                dir_path.join(&name).display()
            ));
        }
    }
    Ok(Target {
        path: dir_path.join(&name),
        root,
        root_fd,
        below,
        dir_fd,
        name,
    })
}

/// Writes `contents` at `target` (from [`resolve`]), through the directory handle checked
/// there, once the path is found to lead to that same directory still (without following
/// symlinks): a new file, or with `overwrite` a complete temporary file renamed over the
/// old one; 0600. A failure leaves nothing at the path that was not there before.
pub(crate) fn write(target: &Target, contents: &[u8], overwrite: bool) -> Result<(), String> {
    let shown = target.path.display();
    let moved = || {
        let dir = target.path.parent().unwrap_or(&target.root);
        format!(
            "the directory {} was moved or replaced (by a symbolic link?) after outputPath was checked; nothing was written",
            dir.display()
        )
    };
    let root_now =
        rustix::fs::open(&target.root, dir_flags(), Mode::empty()).map_err(|_| moved())?;
    if !same(&root_now, &target.root_fd) {
        return Err(moved());
    }
    let dir_now = walk(&target.root_fd, &target.below, false).map_err(|_| moved())?;
    if !same(&dir_now, &target.dir_fd) {
        return Err(moved());
    }
    let dir = &target.dir_fd;
    let name = target.name.as_os_str();
    let new_file = |name: &OsStr| {
        rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(crate::private::PRIVATE_FILE_MODE),
        )
        .map(fs::File::from)
    };
    if !overwrite {
        let mut file = new_file(name).map_err(|e| format!("cannot create {shown}: {e}"))?;
        if let Err(e) = file.write_all(contents).and_then(|()| file.sync_all()) {
            let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
            return Err(format!("cannot write {shown}: {e}"));
        }
        let _ = rustix::fs::fsync(dir);
        return Ok(());
    }
    let temp = OsString::from(format!(".reasoning-ledger-{:016x}.tmp", fastrand::u64(..)));
    let mut file = new_file(&temp).map_err(|e| format!("cannot write beside {shown}: {e}"))?;
    let written = file.write_all(contents).and_then(|()| file.sync_all());
    drop(file);
    let placed = written
        .map_err(|e| format!("cannot write {shown}: {e}"))
        .and_then(
            |()| match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink => {
                    Err(format!("{shown} became a symbolic link; not written"))
                }
                _ => rustix::fs::renameat(dir, &temp, dir, name)
                    .map_err(|e| format!("cannot replace {shown}: {e}")),
            },
        );
    if placed.is_err() {
        let _ = rustix::fs::unlinkat(dir, &temp, AtFlags::empty());
    }
    let _ = rustix::fs::fsync(dir);
    placed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_is_written_and_every_escape_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("exports");
        let ok = resolve(&root, "runs/summary.json", false).unwrap();
        write(&ok, b"{}", false).unwrap();
        assert_eq!(fs::read(ok.path()).unwrap(), b"{}");
        let again = resolve(&root, "runs/summary.json", false).unwrap_err();
        assert!(again.contains("already exists"), "{again}");
        let replace = resolve(&root, "runs/summary.json", true).unwrap();
        write(&replace, b"[]", true).unwrap();
        assert_eq!(fs::read(ok.path()).unwrap(), b"[]");

        let sibling = base.path().join("exports-evil");
        fs::create_dir(&sibling).unwrap();
        for bad in [
            "../x.json".to_string(),
            "runs/../../x.json".to_string(),
            "/etc/x.json".to_string(),
            sibling.join("x.json").display().to_string(),
            "".to_string(),
            "runs/".to_string(),
        ] {
            assert!(resolve(&root, &bad, false).is_err(), "{bad} accepted");
        }
        let absolute_inside = root.canonicalize().unwrap().join("abs.json");
        assert!(resolve(&root, &absolute_inside.display().to_string(), false).is_ok());

        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&sibling, root.join("link")).unwrap();
            let err = resolve(&root, "link/x.json", false).unwrap_err();
            assert!(err.contains("outside"), "{err}");
            std::os::unix::fs::symlink(sibling.join("t.json"), root.join("t.json")).unwrap();
            let err = resolve(&root, "t.json", true).unwrap_err();
            assert!(err.contains("symbolic link"), "{err}");
        }
        assert!(
            fs::read_dir(&sibling).unwrap().next().is_none(),
            "nothing written outside"
        );
    }

    /// Issue 36: a parent swapped for a symlink between the check and the write (a solve
    /// runs minutes of model calls in between) is not followed: nothing is written outside,
    /// and the error names the directory.
    #[test]
    fn a_parent_swapped_for_a_symlink_after_resolve_is_not_written_through() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("exports");
        let elsewhere = base.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        for overwrite in [false, true] {
            let target = resolve(&root, "runs/summary.json", overwrite).unwrap();
            let runs = root.join("runs");
            fs::rename(&runs, root.join("runs-checked")).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &runs).unwrap();
            let err = write(&target, b"secret", overwrite).unwrap_err();
            assert!(err.contains("moved or replaced"), "{err}");
            let named = root.canonicalize().unwrap().join("runs");
            assert!(err.contains(&named.display().to_string()), "{err}");
            assert!(
                fs::read_dir(&elsewhere).unwrap().next().is_none(),
                "written outside"
            );
            assert!(
                fs::read_dir(root.join("runs-checked"))
                    .unwrap()
                    .next()
                    .is_none()
            );
            fs::remove_file(&runs).unwrap();
            fs::remove_dir(root.join("runs-checked")).unwrap();
        }
    }

    /// Issue 36: what `write` makes is private whatever the umask: the file 0600, the
    /// directories it created 0700, also a file it replaced.
    #[test]
    fn written_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("exports");
        let target = resolve(&root, "a/b/out.json", false).unwrap();
        write(&target, b"1", false).unwrap();
        assert_eq!(mode(target.path()), 0o600);
        for dir in [root.clone(), root.join("a"), root.join("a/b")] {
            assert_eq!(mode(&dir) & 0o077, 0, "{}", dir.display());
        }
        fs::set_permissions(target.path(), fs::Permissions::from_mode(0o644)).unwrap();
        let again = resolve(&root, "a/b/out.json", true).unwrap();
        write(&again, b"2", true).unwrap();
        assert_eq!(mode(again.path()), 0o600);
        assert_eq!(fs::read(again.path()).unwrap(), b"2");
    }
}
