//! A client's connections to the ledger host: connect (the socket file must be this
//! user's, the peer too, and speak this protocol version), one request and one answer
//! (scans page by page), and the pool of idle connections.
//!
//! Owns: [`Conn`], [`ConnectError`], [`Pool`] and [`ANSWER_LIMIT`]. Must not: talk to a
//! socket or a peer of another user, or know what a call means (the remote views do:
//! [`super::remote_read`], [`super::remote_write`]).

use super::HostError;
use super::wire::{self, Request, Response, Row};
use crate::store::StoreError;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Longest a client waits for one answer of the host (a write's answers wait for the
/// host's group, which waits at most its step limit for each other client): past it the
/// host is taken for gone and the ledger is reached again.
pub(crate) const ANSWER_LIMIT: Duration = Duration::from_secs(60);

/// Idle connections a client keeps for its next calls.
const IDLE_CONNECTIONS: usize = 8;

/// One connection to the host.
pub(crate) struct Conn {
    stream: UnixStream,
}

/// Why connecting to the host failed.
pub(crate) enum ConnectError {
    /// Nobody listens (no socket file, or a stale one): the ledger may be free to take.
    NoHost(io::Error),
    /// Refused for good (a socket or a peer of another user, another protocol).
    Refused(HostError),
}

impl Conn {
    pub(crate) fn connect(socket: &Path) -> Result<Conn, ConnectError> {
        let foreign = || {
            ConnectError::Refused(HostError::ForeignSocket {
                path: socket.to_path_buf(),
            })
        };
        match std::fs::symlink_metadata(socket) {
            Ok(meta) if meta.uid() != wire::own_uid() => return Err(foreign()),
            Ok(_) => {}
            Err(error) => return Err(ConnectError::NoHost(error)),
        }
        let stream = UnixStream::connect(socket).map_err(ConnectError::NoHost)?;
        match wire::peer_uid(&stream) {
            Ok(uid) if uid == wire::own_uid() => {}
            _ => return Err(foreign()),
        }
        let mut conn = Conn { stream };
        let hello = Request::Hello {
            version: wire::PROTOCOL_VERSION,
        };
        match conn.ask(&hello) {
            Ok(Response::Hello { version }) if version == wire::PROTOCOL_VERSION => Ok(conn),
            Ok(_) => Err(ConnectError::Refused(HostError::Protocol {
                path: socket.to_path_buf(),
            })),
            Err(error) => Err(ConnectError::NoHost(error)),
        }
    }

    pub(super) fn send(&mut self, request: &Request) -> io::Result<()> {
        wire::write_frame(&mut self.stream, request)
    }

    pub(super) fn receive(&mut self) -> io::Result<Response> {
        wire::read_frame(&mut self.stream, Some(ANSWER_LIMIT), ANSWER_LIMIT)
    }

    /// One request, one answer.
    pub(super) fn ask(&mut self, request: &Request) -> io::Result<Response> {
        self.send(request)?;
        self.receive()
    }

    /// A scan: visits rows page by page until `visit` says stop or the rows end. The outer
    /// error is the connection's, the inner the store's.
    pub(super) fn scan(
        &mut self,
        request: &Request,
        visit: &mut dyn FnMut(Row) -> bool,
    ) -> io::Result<Result<(), StoreError>> {
        self.send(request)?;
        loop {
            match self.receive()? {
                Response::Rows { rows, more } => {
                    let mut going = true;
                    for row in rows {
                        if !visit(row) {
                            going = false;
                            break;
                        }
                    }
                    if !more {
                        return Ok(Ok(()));
                    }
                    self.send(if going {
                        &Request::Continue
                    } else {
                        &Request::Stop
                    })?;
                    if !going {
                        return Ok(Ok(()));
                    }
                }
                Response::Failed(error) => return Ok(Err(error.into())),
                other => return Err(unexpected(&other)),
            }
        }
    }
}

pub(super) fn unexpected(response: &Response) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected answer of the ledger host: {response:?}"),
    )
}

/// Idle connections to one host.
pub(crate) struct Pool {
    pub(crate) socket: PathBuf,
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    pub(crate) fn new(socket: PathBuf, first: Conn) -> Pool {
        Pool {
            socket,
            idle: Mutex::new(vec![first]),
        }
    }

    pub(super) fn take(&self) -> Result<Conn, ConnectError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .pop();
        match idle {
            Some(conn) => Ok(conn),
            None => Conn::connect(&self.socket),
        }
    }

    pub(super) fn give_back(&self, conn: Conn) {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if idle.len() < IDLE_CONNECTIONS {
            idle.push(conn);
        }
    }

    /// Forgets every idle connection (after one failed: the host may be gone).
    pub(crate) fn forget_idle(&self) {
        self.idle
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clear();
    }
}
