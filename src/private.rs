//! Private by default (issue 36): the modes of what this process creates.
//!
//! Owns: [`PRIVATE_UMASK`] (set by [`restrict_umask`] at the start of every command that
//! writes a data directory, so files written by libraries, Tantivy's and redb's included,
//! are at most 0600 and directories 0700 whatever the user's umask), [`create_dir_all`]
//! (directories created [`PRIVATE_DIR_MODE`]), [`own_dir`] (a directory only the server
//! writes, `index/` and `vectors/`: created 0700 and narrowed to 0700 when found wider)
//! and [`check_secret_file`] (a token file readable or writable by group or others is
//! refused). Must not: change the mode of a directory the user made (the data directory,
//! an export directory) beyond creating it.

use std::path::Path;

/// Mode of every directory this process creates (before the umask narrows it further).
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;
/// Mode of every file this process creates (before the umask narrows it further).
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;
/// The umask of the commands that write a data directory: nothing for group or others.
pub(crate) const PRIVATE_UMASK: u32 = 0o077;

/// Sets the process umask to [`PRIVATE_UMASK`] (keeping any bits the user's umask already
/// clears): every file and directory created from here on, by this crate or a library,
/// is readable only by this user.
pub(crate) fn restrict_umask() {
    use rustix::fs::Mode;
    let old = rustix::process::umask(Mode::from_raw_mode(PRIVATE_UMASK));
    rustix::process::umask(Mode::from_raw_mode(PRIVATE_UMASK | old.as_raw_mode()));
}

/// `create_dir_all` whose new directories are [`PRIVATE_DIR_MODE`]; existing ones are left
/// as they are.
pub(crate) fn create_dir_all(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(path)
}

/// A directory only this server writes (derived data: `index/`, `vectors/`): created
/// [`PRIVATE_DIR_MODE`], and narrowed to it when an earlier build left it wider, so what
/// libraries write inside is unreachable for other users. One this user does not own (a
/// data directory shared on purpose) is left as it is.
pub(crate) fn own_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    create_dir_all(path)?;
    let meta = std::fs::metadata(path)?;
    let mine = meta.uid() == rustix::process::geteuid().as_raw();
    if mine && meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(PRIVATE_DIR_MODE))?;
    }
    Ok(())
}

/// The open options of a new private file ([`PRIVATE_FILE_MODE`]).
pub(crate) fn file_options() -> std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.mode(PRIVATE_FILE_MODE);
    options
}

/// A secret (a token file) readable or writable by group or others: what to run.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path} is readable or writable by other users (mode {mode:o}): a token file must be private; run `chmod 600 {path}`"
)]
pub(crate) struct OpenSecret {
    pub(crate) path: String,
    pub(crate) mode: u32,
}

/// Refuses `file` (already opened) when group or others may read or write it.
pub(crate) fn check_secret_file(path: &Path, file: &std::fs::File) -> Result<(), OpenSecret> {
    use std::os::unix::fs::PermissionsExt;
    let mode = file.metadata().map_or(0, |m| m.permissions().mode()) & 0o777;
    if mode & 0o066 != 0 {
        return Err(OpenSecret {
            path: path.display().to_string(),
            mode,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn own_dir_narrows_and_create_dir_all_creates_private() {
        let base = tempfile::tempdir().unwrap();
        let wide = base.path().join("index");
        std::fs::create_dir(&wide).unwrap();
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o755)).unwrap();
        own_dir(&wide).unwrap();
        let mode = std::fs::metadata(&wide).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let deep = base.path().join("a/b");
        create_dir_all(&deep).unwrap();
        for dir in [base.path().join("a"), deep] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode & 0o077, 0, "{}", dir.display());
        }
    }

    #[test]
    fn a_token_file_others_may_read_is_refused_naming_chmod() {
        let base = tempfile::tempdir().unwrap();
        let path = base.path().join("http-token");
        std::fs::write(&path, "x").unwrap();
        for (mode, refused) in [
            (0o644, true),
            (0o620, true),
            (0o604, true),
            (0o600, false),
            (0o400, false),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            let answer = check_secret_file(&path, &file);
            assert_eq!(answer.is_err(), refused, "{mode:o}");
            if let Err(error) = answer {
                assert!(
                    error
                        .to_string()
                        .contains(&format!("chmod 600 {}", path.display()))
                );
            }
        }
    }
}
