//! Opening a ledger: the one place that turns where a ledger is kept ([`Location`]: a data
//! directory, or a URL one of [`URL_BACKENDS`] claims) into a [`Ledger`], for every command.
//!
//! Owns: [`Location`], [`URL_BACKENDS`] (the
//! backends reached by URL: a new one is its module under `store/` and one line there) and
//! the open of a redb file that chooses between holding it and reaching the process that
//! does ([`super::host`]): it sits above both, so `redb` knows nothing of the host. Must
//! not: hold a backend's own rules (a backend's module opens its storage; this chooses
//! which).

use super::host::HostBackend;
use super::redb::open::write_denied;
use super::{LEDGER_FILE_NAME, Ledger, OpenError, OpenMode};
use crate::event::Families;
use std::path::{Path, PathBuf};

/// A backend reached by URL: whether it claims a URL, and how it opens one.
pub(crate) struct UrlBackend {
    /// Whether `url` names a ledger of this backend (its scheme).
    pub(crate) claims: fn(url: &str) -> bool,
    /// Opens (or, with [`OpenMode::Create`], creates) the ledger at `url`, decoding with
    /// `families`.
    pub(crate) open: fn(url: &str, mode: OpenMode, families: Families) -> Result<Ledger, OpenError>,
}

/// The backends reached by URL, in the order they are asked; a data directory is redb's.
pub(crate) const URL_BACKENDS: &[UrlBackend] = &[UrlBackend {
    claims: super::postgres::is_postgres_url,
    open: super::postgres::open,
}];

/// Where a ledger is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Location {
    /// `ledger.redb` in this data directory.
    DataDir(PathBuf),
    /// A URL one of [`URL_BACKENDS`] claims.
    Url(String),
}

impl Location {
    /// `text` as a URL one of [`URL_BACKENDS`] claims, if it is one.
    pub(crate) fn url(text: &str) -> Option<Location> {
        URL_BACKENDS
            .iter()
            .any(|backend| (backend.claims)(text))
            .then(|| Location::Url(text.to_string()))
    }

    /// `text` as a URL a backend claims, else as a data directory.
    pub(crate) fn parse(text: &str) -> Location {
        Location::url(text).unwrap_or_else(|| Location::DataDir(PathBuf::from(text)))
    }
}

impl Ledger {
    /// Opens the ledger at `location`, decoding with `families`: the one open every command
    /// goes through.
    pub(crate) fn open_at(
        location: &Location,
        mode: OpenMode,
        families: Families,
    ) -> Result<Ledger, OpenError> {
        match (location, mode) {
            (Location::DataDir(dir), OpenMode::Create) => Ledger::open(dir, families),
            (Location::DataDir(dir), OpenMode::Existing) => Ledger::open_existing(dir, families),
            (Location::Url(url), mode) => match URL_BACKENDS.iter().find(|b| (b.claims)(url)) {
                Some(backend) => (backend.open)(url, mode, families),
                None => Err(OpenError::NoLedger {
                    path: PathBuf::from(url),
                }),
            },
        }
    }

    /// Opens (or creates) `ledger.redb` inside `data_dir`: holds it (this process becomes
    /// its host) or reaches the process that does ([`super::host`]).
    ///
    /// A file that exists is only ever opened, never initialised: an empty, truncated or
    /// foreign file is an error naming its path.
    pub fn open(data_dir: &Path, families: Families) -> Result<Ledger, OpenError> {
        if data_dir.is_file() {
            return Err(OpenError::DataDirIsAFile {
                path: data_dir.to_path_buf(),
            });
        }
        crate::private::create_dir_all(data_dir).map_err(|source| OpenError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let path = data_dir.join(LEDGER_FILE_NAME);
        Self::open_file(&path, families)
    }

    /// Opens `ledger.redb` inside `data_dir` only if it is there: never creates the
    /// directory or the file ([`OpenError::NoLedger`] when nothing is at the path). What is
    /// there is opened and checked as [`Ledger::open`] does; for the commands that only
    /// read: a ledger this process may not write is opened for reading only
    /// ([`Ledger::read_only`] says so).
    pub(crate) fn open_existing(data_dir: &Path, families: Families) -> Result<Ledger, OpenError> {
        if data_dir.is_file() {
            return Err(OpenError::DataDirIsAFile {
                path: data_dir.to_path_buf(),
            });
        }
        let path = data_dir.join(LEDGER_FILE_NAME);
        match std::fs::symlink_metadata(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                Err(OpenError::NoLedger { path })
            }
            _ => Self::open_file_for_reading(&path, families),
        }
    }

    /// Opens the ledger at an exact file path: a new ledger appears there complete or not
    /// at all (built beside it, then linked into place); an existing file is checked
    /// read-only first and refused, untouched, unless it is our ledger.
    ///
    /// The process that holds the file is its host (see [`crate::store::host`]); another
    /// one reaches it through that host, with the same answers.
    ///
    /// A ledger this process may not write (permission denied, a read-only file system)
    /// is [`OpenError::NotWritable`], which says the read-only commands still read it.
    pub(crate) fn open_file(path: &Path, families: Families) -> Result<Ledger, OpenError> {
        Ledger::open_file_writable(path, families).map_err(|error| match write_denied(&error) {
            Some(denied) => {
                let readable = std::fs::File::open(path).is_ok();
                OpenError::NotWritable {
                    path: path.to_path_buf(),
                    why: if readable {
                        denied.why
                    } else {
                        "this user may neither read nor write it".to_string()
                    },
                    cause: denied.io,
                    advice: if readable {
                        "Recording needs write access; the read-only commands (sessions, show, \
                         export, replay, search, verify, ui) still read it"
                            .to_string()
                    } else {
                        "Run as the user who owns it, or ask for access".to_string()
                    },
                }
            }
            None => error,
        })
    }

    /// Holds the file at `path`, or reaches the process that does.
    fn open_file_writable(path: &Path, families: Families) -> Result<Ledger, OpenError> {
        let backend = HostBackend::open(path, families.clone())?;
        Ok(Ledger::serving(
            backend,
            path,
            families,
            HostBackend::serve_with,
        ))
    }

    /// [`Ledger::open_file`] for a command that only reads: when the ledger may not be
    /// written here (permission denied, a read-only file system), it is opened for reading
    /// only instead ([`Ledger::open_file_read_only`]; [`Ledger::read_only`] says so).
    pub(crate) fn open_file_for_reading(
        path: &Path,
        families: Families,
    ) -> Result<Ledger, OpenError> {
        match Ledger::open_file_writable(path, families.clone()) {
            Err(error) => match write_denied(&error) {
                Some(denied) => Ledger::open_file_read_only(path, &denied.why, families),
                None => Err(error),
            },
            opened => opened,
        }
    }
}
