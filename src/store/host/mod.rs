//! The ledger host (DESIGN §3): one process holds a redb ledger, every other reaches it
//! through that process.
//!
//! Owns: [`HostBackend`], the [`Backend`] every redb file open gets. Opening the file in
//! redb's single-process mode either succeeds (this process is the host: it reads and
//! writes the file itself, one-phase commits with one sync per group, and listens on an
//! owner-only Unix socket beside the file, [`serve`]) or finds the file held (this process
//! is a client: its reads and writes go over the socket ([`connection`], `remote_read`,
//! `remote_write`), and its own writer
//! still groups its jobs, planned by the same rules, into one remote transaction that runs
//! inside the host's group commit). When the host goes away, the next call reaches the
//! ledger again: it takes the file over (and listens in its turn) or finds the new host
//! ([`Shared::reach`]). Must not: acknowledge a write before the host's commit returned,
//! talk to a socket or a peer of another user, or hold an append rule (the writer of the
//! process that calls plans, as it would on a local file).
//!
//! Trade-offs (ARCHITECTURE.md): a lone process pays nothing but a listening thread; a
//! client pays one round trip per read and a few per write on top of the host's commit;
//! a client's write holds the host's group for its round trips (each bounded by
//! [`serve::STEP_LIMIT`]); its writes travel with its commit, so one that goes away first
//! has written nothing.

pub(crate) mod connection;
mod remote_read;
mod remote_write;
pub(crate) mod serve;
#[cfg(test)]
mod tests;
pub(crate) mod wire;

use super::contract::{Backend, ReadView, WriteView};
use super::damage::{Damage, DamageScope, contain};
use super::redb::RedbBackend;
use super::redb::open::{self, Opened};
use super::writer::WriterHandle;
use super::{OpenError, StoreError};
use crate::event::Families;
use connection::{Conn, ConnectError, Pool};
use remote_read::RemoteRead;
use remote_write::RemoteWrite;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

/// Longest reaching a ledger keeps trying when its file is held but nobody answers on the
/// socket yet (a host starting, or one that just died and whose lock the system is
/// releasing).
pub(crate) const REACH_LIMIT: Duration = Duration::from_secs(10);

/// Longest pause between two tries while reaching a ledger.
const REACH_PAUSE_LIMIT: Duration = Duration::from_millis(20);

/// Times a call reaches the ledger again after its connection failed before it gives up.
pub(crate) const REACH_ATTEMPTS: usize = 4;

/// Why the host could not be reached.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HostError {
    #[error("the ledger host's socket {path} is owned by another user: refusing it")]
    ForeignSocket { path: PathBuf },
    #[error("the ledger host at {path} speaks another protocol version (another build)")]
    Protocol { path: PathBuf },
    #[error("the ledger is held by another process that does not answer on {path}: {source}")]
    Unreachable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("lost the connection to the ledger host: {source}")]
    Lost { source: std::io::Error },
}

/// How this process reaches the ledger now.
pub(crate) enum Mode {
    /// It holds the file.
    Host {
        local: Arc<RedbBackend>,
        server: Mutex<Option<serve::Server>>,
    },
    /// Another process holds it.
    Client { pool: Pool },
}

/// What a [`HostBackend`] and its views share.
pub(crate) struct Shared {
    path: PathBuf,
    socket: PathBuf,
    mode: RwLock<Arc<Mode>>,
    /// Held while the ledger is reached again, so one thread does it at a time.
    reaching: Mutex<()>,
    /// This process's writer (once the ledger is built), for serving other processes;
    /// `None` again once the ledger closes.
    writer: Mutex<Option<WriterHandle>>,
    /// The ledger's record of damage (once it is built): handed to the file's backend
    /// whenever this process takes the file over.
    damage: OnceLock<Damage>,
    /// The families of the ledger it was opened for: what serving other processes decodes
    /// their rows with.
    families: Families,
}

/// The socket of the ledger file at `path`: `ledger.sock` beside `ledger.redb`.
pub(crate) fn socket_path(path: &Path) -> PathBuf {
    path.with_extension("sock")
}

/// The backend of a redb ledger file: the file itself when this process holds it, its host
/// otherwise.
pub(crate) struct HostBackend {
    shared: Arc<Shared>,
}

impl HostBackend {
    /// Called once, when the ledger is built over this backend, with its writer (see
    /// [`Ledger::serving`]): other processes' writes run in this process's group commit.
    /// The contract knows no writer, so this is the host's own, not a hook of `Backend`.
    pub(crate) fn serve_with(&self, writer: WriterHandle) {
        *lock(&self.shared.writer) = Some(writer.clone());
        if let Mode::Host { local, server } = &*self.shared.current() {
            let mut server = lock(server);
            if server.is_none() {
                *server = listen(&self.shared.socket, local, writer, &self.shared.families);
            }
        }
    }

    /// Reaches the ledger file at `path`: holds it, or connects to the process that does.
    pub(crate) fn open(path: &Path, families: Families) -> Result<HostBackend, OpenError> {
        let socket = socket_path(path);
        let mode = acquire(path, &socket, None, &families).map_err(|error| match error {
            Acquire::Open(error) => error,
            Acquire::Host(error) => OpenError::Store {
                label: path.display().to_string(),
                source: Arc::new(error),
            },
        })?;
        Ok(HostBackend {
            shared: Arc::new(Shared {
                path: path.to_path_buf(),
                socket,
                mode: RwLock::new(Arc::new(mode)),
                reaching: Mutex::new(()),
                writer: Mutex::new(None),
                damage: OnceLock::new(),
                families,
            }),
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl Shared {
    fn current(&self) -> Arc<Mode> {
        self.mode
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }

    /// The ledger as reached now; with `broken`, the mode a call just failed on: unless
    /// another thread already replaced it, reach the ledger again (a fresh connection to
    /// the same host, else take the file over or find the new host).
    pub(crate) fn reach(&self, broken: Option<&Arc<Mode>>) -> Result<Arc<Mode>, StoreError> {
        let Some(broken) = broken else {
            return Ok(self.current());
        };
        let _reaching = lock(&self.reaching);
        let current = self.current();
        if !Arc::ptr_eq(&current, broken) {
            return Ok(current);
        }
        if let Mode::Client { pool } = &*current {
            pool.forget_idle();
        }
        let writer = lock(&self.writer).clone();
        let mode =
            acquire(&self.path, &self.socket, writer, &self.families).map_err(
                |error| match error {
                    Acquire::Open(error) => StoreError::backend(error),
                    Acquire::Host(error) => StoreError::backend(error),
                },
            )?;
        if let Mode::Host { local, .. } = &mode {
            tracing::info!(path = %self.path.display(), "took the ledger over as its host");
            if let Some(damage) = self.damage.get() {
                local.on_damage(damage.clone());
            }
        }
        let mode = Arc::new(mode);
        *self
            .mode
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = mode.clone();
        Ok(mode)
    }
}

enum Acquire {
    Open(OpenError),
    Host(HostError),
}

/// Holds the file, or connects to its host; waits (bounded by [`REACH_LIMIT`]) while the
/// file is held and nobody answers yet.
fn acquire(
    path: &Path,
    socket: &Path,
    writer: Option<WriterHandle>,
    families: &Families,
) -> Result<Mode, Acquire> {
    let deadline = Instant::now() + REACH_LIMIT;
    let mut pause = Duration::from_micros(100);
    loop {
        match open_contained(path).map_err(Acquire::Open)? {
            Opened::Held(handle) => {
                let local = Arc::new(RedbBackend::new(handle));
                let server = writer.map(|writer| listen(socket, &local, writer, families));
                return Ok(Mode::Host {
                    local,
                    server: Mutex::new(server.flatten()),
                });
            }
            Opened::HeldElsewhere => match Conn::connect(socket) {
                Ok(conn) => {
                    return Ok(Mode::Client {
                        pool: Pool::new(socket.to_path_buf(), conn),
                    });
                }
                Err(ConnectError::Refused(error)) => return Err(Acquire::Host(error)),
                Err(ConnectError::NoHost(source)) => {
                    if Instant::now() >= deadline {
                        return Err(Acquire::Host(HostError::Unreachable {
                            path: socket.to_path_buf(),
                            source,
                        }));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(REACH_PAUSE_LIMIT);
                }
            },
        }
    }
}

/// [`open::open_file`], with a panic of redb on a damaged file (while it checks, opens or
/// recovers it) contained: an error naming the file, which is left as it is.
fn open_contained(path: &Path) -> Result<Opened, OpenError> {
    let damage = Damage::new(DamageScope::Ledger, path.display().to_string());
    let mut refused = None;
    let opened = contain(
        &damage,
        || "opening it".into(),
        || match open::open_file(path) {
            Ok(opened) => Ok(opened),
            Err(error) => {
                refused = Some(error);
                Err(StoreError::WriterGone)
            }
        },
    );
    match (opened, refused) {
        (Ok(opened), _) => Ok(opened),
        (Err(_), Some(error)) => Err(error),
        (Err(StoreError::Damaged { detail, .. }), None) => Err(OpenError::Damaged {
            path: path.to_path_buf(),
            detail,
        }),
        (Err(error), None) => Err(OpenError::Store {
            label: path.display().to_string(),
            source: Arc::new(error),
        }),
    }
}

/// Starts serving other processes; a host that cannot listen still serves itself.
fn listen(
    socket: &Path,
    local: &Arc<RedbBackend>,
    writer: WriterHandle,
    families: &Families,
) -> Option<serve::Server> {
    match serve::Server::start(socket, local.clone(), writer, families.clone()) {
        Ok(server) => Some(server),
        Err(error) => {
            tracing::warn!(%error, "the ledger host serves no other process");
            None
        }
    }
}

impl Backend for HostBackend {
    /// A file's verdicts: `ledger.damage` beside it.
    #[allow(private_interfaces)]
    fn verdicts(
        &self,
        label: &std::path::Path,
    ) -> std::sync::Arc<dyn crate::store::verdict::VerdictStore> {
        crate::store::verdict::VerdictFile::store_beside(label)
    }

    fn read(&self, families: &Families) -> Result<Box<dyn ReadView + '_>, StoreError> {
        let mode = self.shared.current();
        match &*mode {
            Mode::Host { local, .. } => local.read_owned(families),
            Mode::Client { .. } => Ok(Box::new(RemoteRead::new(
                self.shared.clone(),
                mode,
                families,
            ))),
        }
    }

    fn write(&self, families: &Families) -> Result<Box<dyn WriteView + '_>, StoreError> {
        let mode = self.shared.current();
        match &*mode {
            Mode::Host { local, .. } => local.write_owned(families),
            Mode::Client { .. } => Ok(Box::new(RemoteWrite::begin(
                self.shared.clone(),
                mode,
                families,
            )?)),
        }
    }

    fn on_damage(&self, damage: Damage) {
        if let Mode::Host { local, .. } = &*self.shared.current() {
            local.on_damage(damage.clone());
        }
        let _ = self.shared.damage.set(damage);
    }

    fn idle(&self) {
        if let Mode::Host { local, .. } = &*self.shared.current() {
            local.idle();
        }
    }

    fn close(&self) {
        lock(&self.shared.writer).take();
        if let Mode::Host { server, .. } = &*self.shared.current()
            && let Some(mut server) = lock(server).take()
        {
            server.close();
        }
    }
}
