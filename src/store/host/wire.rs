//! The ledger host's wire protocol: one request enum, one response enum, each a frame of
//! postcard bytes behind a 4-byte little-endian length.
//!
//! Owns: [`Request`], [`Response`], [`WireError`] (a [`StoreError`] as it crosses the
//! socket, keeping its kind and message), reading and writing frames with a bound on their
//! size ([`MAX_FRAME_BYTES`]) and on how long the rest of a started frame may take, and the
//! peer-credential check. Must not: spell out an event's or a head's fields: events travel
//! as rows of the store's codec ([`super::super::codec`]) and heads as the JSON a head row
//! holds, whole values, so a field added to either rides along unchanged.

use crate::store::StoreError;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write as _};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Version of this protocol, exchanged first on every connection: a client and a host of
/// different builds refuse each other instead of misreading frames.
pub(crate) const PROTOCOL_VERSION: u32 = 2;

/// Largest frame either side accepts (a batch of events, a page of rows): a larger length
/// prefix is a broken or hostile peer, and the connection is closed.
pub(crate) const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// Rows of a scan the host puts in one frame before it waits for the client to ask for
/// more (or to stop).
pub(crate) const ROWS_PER_FRAME: usize = 512;

/// Bytes of rows after which the host ends a frame early, whatever [`ROWS_PER_FRAME`] says.
pub(crate) const ROW_BYTES_PER_FRAME: usize = 1024 * 1024;

/// A client's request. Reads answer from the connection's snapshot (opened by
/// [`Request::Snapshot`]) or, inside a write, from the write transaction.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Request {
    /// First frame of a connection; answered [`Response::Hello`].
    Hello {
        version: u32,
    },
    /// Opens a new read snapshot for the reads that follow (no answer).
    Snapshot,
    /// Drops the connection's snapshot (no answer).
    EndSnapshot,
    Head {
        session: u128,
    },
    Heads,
    Alias {
        alias: String,
    },
    EventsById {
        ids: Vec<u128>,
    },
    HeadAndEventsById {
        session: u128,
        ids: Vec<u128>,
    },
    /// Answered by [`Response::Rows`] pages: after each page with `more`, the client sends
    /// [`Request::Continue`] or [`Request::Stop`].
    ScanSession {
        session: u128,
        from_seq: u64,
        to_seq: u64,
    },
    ScanAll,
    ScanPositions {
        from: u64,
    },
    Continue,
    Stop,
    EventCount,
    LastPosition,
    /// Begins a write: the host queues a job for its writer, which answers
    /// [`Response::Begun`] once the group's transaction is this client's.
    BeginWrite,
    /// Ends the write with everything it writes, in order; answered [`Response::Done`]
    /// only after the host's group committed them.
    Commit {
        writes: Vec<Write>,
    },
    /// Ends the write, writing nothing; answered once the group is over.
    Abort,
    /// The storage's structure check ([`crate::store::contract::ReadView::check_structure`]):
    /// answered [`Response::Findings`].
    CheckStructure,
    /// The sessions whose head row does not decode: answered [`Response::Undecodable`].
    UndecodableHeads,
}

/// One write of a client's transaction, sent with its commit.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Write {
    /// An append plan: its events as codec rows, its head as JSON, its aliases.
    Append {
        events: Vec<Vec<u8>>,
        head: Vec<u8>,
        aliases: Vec<String>,
    },
    /// A head row (a rebuilt summary), as JSON.
    PutHead { head: Vec<u8> },
}

/// One stored row of a scan: its seq (session scans) or position, and its codec bytes or
/// why it could not be read.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Row {
    pub key: u64,
    pub row: Result<Vec<u8>, WireError>,
}

/// The host's answer.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Response {
    Hello {
        version: u32,
    },
    /// A head as JSON, if there is one.
    Head(Option<Vec<u8>>),
    Heads(Vec<Vec<u8>>),
    Alias(Option<u128>),
    Events(Vec<Option<Vec<u8>>>),
    HeadAndEvents(Option<Vec<u8>>, Vec<Option<Vec<u8>>>),
    /// A page of rows; `more`: the host waits for [`Request::Continue`] or [`Request::Stop`].
    Rows {
        rows: Vec<Row>,
        more: bool,
    },
    Count(u64),
    Position(u64),
    /// The write's turn came: whether the host's transaction has changes of its own, and
    /// its last position (the client numbers its events after it).
    Begun {
        has_changes: bool,
        last_position: u64,
    },
    Done,
    Failed(WireError),
    /// What a structure check found, one finding a line.
    Findings(Vec<String>),
    /// Sessions whose head row does not decode, with why.
    Undecodable(Vec<(u128, String)>),
}

/// A [`StoreError`] on the wire: its kind and its message.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum WireError {
    DiskFull(String),
    Backend(String),
    Corrupt(String),
    MissingHead(u128),
    WriterGone,
    JobPanicked(String),
    /// The host is closing (or its writer is gone): reach the ledger again.
    HostClosing,
    /// A request the protocol does not allow here.
    Protocol(String),
    /// The host found the ledger damaged: (the ledger, what is damaged).
    Damaged(String, String),
}

/// A backend error that came over the socket: its message, as the host printed it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct RemoteError(pub String);

impl From<&StoreError> for WireError {
    fn from(error: &StoreError) -> Self {
        match error {
            StoreError::DiskFull(source) => WireError::DiskFull(source.to_string()),
            StoreError::Backend(source) => WireError::Backend(source.to_string()),
            StoreError::Corrupt(text) => WireError::Corrupt(text.clone()),
            StoreError::MissingHead { session } => WireError::MissingHead(session.0.0),
            StoreError::WriterGone => WireError::WriterGone,
            StoreError::JobPanicked(text) => WireError::JobPanicked(text.clone()),
            StoreError::Damaged { ledger, detail } => {
                WireError::Damaged(ledger.clone(), detail.clone())
            }
            // A read-only ledger serves no one; its message travels whole all the same.
            StoreError::ReadOnly { .. } => WireError::Backend(error.to_string()),
        }
    }
}

impl From<WireError> for StoreError {
    fn from(error: WireError) -> Self {
        let remote =
            |text: String| -> crate::store::BackendError { std::sync::Arc::new(RemoteError(text)) };
        match error {
            WireError::DiskFull(text) => StoreError::DiskFull(remote(text)),
            WireError::Backend(text) => StoreError::Backend(remote(text)),
            WireError::Corrupt(text) => StoreError::Corrupt(text),
            WireError::MissingHead(session) => StoreError::MissingHead {
                session: crate::event::SessionId(ulid::Ulid(session)),
            },
            WireError::WriterGone | WireError::HostClosing => StoreError::WriterGone,
            WireError::JobPanicked(text) => StoreError::JobPanicked(text),
            WireError::Protocol(text) => {
                StoreError::Backend(remote(format!("ledger host protocol: {text}")))
            }
            WireError::Damaged(ledger, detail) => StoreError::Damaged { ledger, detail },
        }
    }
}

/// Writes one frame.
pub(crate) fn write_frame<T: Serialize>(stream: &mut UnixStream, message: &T) -> io::Result<()> {
    let body = postcard::to_stdvec(message).map_err(io::Error::other)?;
    if body.len() > MAX_FRAME_BYTES {
        return Err(io::Error::other("frame over MAX_FRAME_BYTES"));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    stream.write_all(&frame)
}

/// Reads one frame. `first` bounds the wait for its first byte (`None`: wait as long as it
/// takes, an idle connection), `rest` the wait for each later read of the frame.
pub(crate) fn read_frame<T: for<'de> Deserialize<'de>>(
    stream: &mut UnixStream,
    first: Option<Duration>,
    rest: Duration,
) -> io::Result<T> {
    let mut length = [0u8; 4];
    stream.set_read_timeout(first)?;
    let got = stream.read(&mut length)?;
    if got == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    if first != Some(rest) {
        stream.set_read_timeout(Some(rest))?;
    }
    stream.read_exact(&mut length[got..])?;
    let length = u32::from_le_bytes(length) as usize;
    if length > MAX_FRAME_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame over MAX_FRAME_BYTES",
        ));
    }
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body)?;
    postcard::from_bytes(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The user id of the process at the other end of `stream` (`SO_PEERCRED`).
#[cfg(target_os = "linux")]
pub(crate) fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut credentials = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut length = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `credentials` and `length` are valid for writes of the sizes given.
    let status = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut credentials as *mut libc::ucred).cast(),
            &mut length,
        )
    };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(credentials.uid)
}

/// The user id of the process at the other end of `stream` (`getpeereid`).
#[cfg(not(target_os = "linux"))]
pub(crate) fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    let (mut uid, mut gid) = (0, 0);
    // SAFETY: `uid` and `gid` are valid for writes.
    if unsafe { libc::getpeereid(stream.as_raw_fd(), &mut uid, &mut gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(uid)
}

/// This process's effective user id.
pub(crate) fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
