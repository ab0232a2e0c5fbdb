//! Files a model names (`solve`'s `outputPath`): written only inside the export
//! directory (DESIGN §8).
//!
//! Owns: [`export_dir`] (`REASONING_LEDGER_EXPORT_DIR`, else `exports/` beside the
//! ledger), [`resolve`] (the checks: no `..`, absolute paths only inside the directory,
//! compared by components after canonicalising the nearest existing ancestor, so a
//! sibling with the same prefix or a symlinked parent cannot escape; an existing file only
//! with `overwrite`) and [`write`] (create-new, or with `overwrite` a temporary file
//! renamed over a regular file; never through a symlink). Must not: write anywhere else,
//! or leave a partial file at the path.

use std::fs;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

/// The environment variable naming the export directory.
pub const EXPORT_DIR_ENV: &str = "REASONING_LEDGER_EXPORT_DIR";
/// The export directory's name beside the ledger when the variable is unset.
pub const DEFAULT_EXPORT_DIR: &str = "exports";
/// Longest `outputPath` accepted, in bytes.
pub const MAX_OUTPUT_PATH_BYTES: usize = 1024;

/// The export directory for a ledger at `ledger_path`.
pub fn export_dir(ledger_path: &Path) -> PathBuf {
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

/// Checks `requested` against the export directory `root` and returns the file's path
/// (its parent directories created inside `root`). Errors say how to fix the argument.
pub fn resolve(root: &Path, requested: &str, overwrite: bool) -> Result<PathBuf, String> {
    if requested.trim().is_empty() {
        return Err("outputPath is empty; give a file name such as summary.json".into());
    }
    if requested.len() > MAX_OUTPUT_PATH_BYTES || requested.contains('\0') {
        return Err(format!(
            "outputPath must be a file name under {MAX_OUTPUT_PATH_BYTES} bytes without NUL; give one such as summary.json"
        ));
    }
    fs::create_dir_all(root)
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
    if !real.starts_with(&root) {
        return Err(outside());
    }
    let mut dir = real;
    for part in missing {
        dir.push(part);
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
    }
    // Canonical again: a directory swapped for a symlink meanwhile is caught here.
    let dir = fs::canonicalize(&dir).map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    if !dir.starts_with(&root) {
        return Err(outside());
    }
    let target = dir.join(name);
    match fs::symlink_metadata(&target) {
        Ok(meta) if meta.file_type().is_symlink() => Err(format!(
            "outputPath {requested:?} is a symbolic link; it is never written through: choose another name"
        )),
        Ok(meta) if !meta.is_file() => Err(format!(
            "outputPath {requested:?} exists and is not a regular file; choose another name"
        )),
        Ok(_) if !overwrite => Err(format!(
            "outputPath {requested:?} already exists; pass overwrite: true to replace it, or choose another name"
        )),
        _ => Ok(target),
    }
}

/// Writes `contents` at `path` (from [`resolve`]): a new file, or with `overwrite` a
/// complete temporary file renamed over the old one. A failure leaves nothing at `path`
/// that was not there before.
pub fn write(path: &Path, contents: &[u8], overwrite: bool) -> Result<(), String> {
    let shown = path.display();
    if !overwrite {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| format!("cannot create {shown}: {e}"))?;
        if let Err(e) = file.write_all(contents).and_then(|()| file.sync_all()) {
            let _ = fs::remove_file(path);
            return Err(format!("cannot write {shown}: {e}"));
        }
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("cannot write beside {shown}: {e}"))?;
    temp.write_all(contents)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| format!("cannot write {shown}: {e}"))?;
    if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(format!("{shown} became a symbolic link; not written"));
    }
    temp.persist(path)
        .map_err(|e| format!("cannot replace {shown}: {}", e.error))?;
    Ok(())
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
        assert_eq!(fs::read(&ok).unwrap(), b"{}");
        let again = resolve(&root, "runs/summary.json", false).unwrap_err();
        assert!(again.contains("already exists"), "{again}");
        let replace = resolve(&root, "runs/summary.json", true).unwrap();
        write(&replace, b"[]", true).unwrap();
        assert_eq!(fs::read(&ok).unwrap(), b"[]");

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
}
