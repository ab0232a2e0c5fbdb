//! The host's side of the socket: accept connections of other processes (and of other
//! handles of this one) and answer their reads and writes from the ledger this process
//! holds.
//!
//! Owns: [`Server`] (the socket file, the accept thread, one thread per connection, closing
//! them all), answering reads from a snapshot, and the remote write: a job queued on this
//! process's writer that, once its group's transaction is running, answers the client's
//! reads and writes inside it until the client commits or aborts; the client's answer to
//! `Commit` waits for the group's commit. Must not: let one connection stall the others
//! or the writer (a started frame or a step of a write must arrive within
//! [`STEP_LIMIT`]), serve a peer of another user, or remove a socket file it did not make
//! unless it is its own user's (a stale one: this process holds the ledger, so nobody
//! listens there).

use super::wire::{self, Request, Response, Row, WireError, Write};
use crate::event::{EventId, Families, SessionId};
use crate::store::contract::{AppendPlan, Decode, ReadView, WriteView};
use crate::store::redb::RedbBackend;
use crate::store::writer::{AppendTxn, WriterHandle};
use crate::store::{SessionHead, StoreError, codec};
use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Longest the host waits for the rest of a frame a client started, and for each next step
/// of a client's write transaction (its next request while the group waits on it): what
/// a client that hangs mid-write can cost the host's writer. It then loses its connection;
/// its write had written nothing yet (writes travel with the commit), and a live client
/// begins it again on a new connection.
pub(crate) const STEP_LIMIT: Duration = Duration::from_secs(1);

/// Most connections the host serves at once; more are closed at once (the clients retry).
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// Longest closing the host waits for its connection threads to end.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);

/// What the accept thread and the connection threads share.
struct State {
    local: Arc<RedbBackend>,
    /// What the rows it reads and the rows its clients send decode with (the host
    /// ledger's families).
    families: Families,
    /// The writer of this process's ledger; `None` once the host closes.
    writer: Mutex<Option<WriterHandle>>,
    /// Every open connection, to shut them down on close.
    connections: Mutex<HashMap<u64, UnixStream>>,
    next_id: AtomicU64,
    closing: AtomicBool,
    /// Connections being served (bounded by [`MAX_CONNECTIONS`]).
    serving: AtomicUsize,
    /// Each connection thread holds a clone; all dropped = every thread has ended.
    alive: Mutex<Option<mpsc::Sender<()>>>,
}

/// The listening socket of a host.
pub(crate) struct Server {
    state: Arc<State>,
    socket: PathBuf,
    listener: Option<UnixListener>,
    accept: Option<std::thread::JoinHandle<()>>,
    /// Disconnected once every connection thread has ended.
    ended: mpsc::Receiver<()>,
}

/// Why the host does not listen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListenError {
    #[error("{path} is owned by another user: refusing it")]
    ForeignSocket { path: PathBuf },
    #[error("cannot listen on {path}: {source}")]
    Bind { path: PathBuf, source: io::Error },
}

impl Server {
    /// Listens on `socket` (owner only), replacing a stale socket file of this user.
    pub(crate) fn start(
        socket: &Path,
        local: Arc<RedbBackend>,
        writer: WriterHandle,
        families: Families,
    ) -> Result<Server, ListenError> {
        let bind_error = |source| ListenError::Bind {
            path: socket.to_path_buf(),
            source,
        };
        match std::fs::symlink_metadata(socket) {
            Ok(meta) if meta.uid() != wire::own_uid() => {
                return Err(ListenError::ForeignSocket {
                    path: socket.to_path_buf(),
                });
            }
            // This process holds the ledger: whatever listened there is gone.
            Ok(_) => std::fs::remove_file(socket).map_err(bind_error)?,
            Err(_) => {}
        }
        let listener = UnixListener::bind(socket).map_err(bind_error)?;
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
            .map_err(bind_error)?;
        let (alive, ended) = mpsc::channel();
        let state = Arc::new(State {
            local,
            families,
            writer: Mutex::new(Some(writer)),
            connections: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            serving: AtomicUsize::new(0),
            alive: Mutex::new(Some(alive)),
        });
        let accepting = listener.try_clone().map_err(bind_error)?;
        let accept_state = state.clone();
        let accept = std::thread::Builder::new()
            .name("ledger-host".into())
            .spawn(move || accept_loop(accept_state, accepting))
            .map_err(bind_error)?;
        Ok(Server {
            state,
            socket: socket.to_path_buf(),
            listener: Some(listener),
            accept: Some(accept),
            ended,
        })
    }

    /// Stops listening, removes the socket file, ends every connection (their clients take
    /// over or reach the next host) and lets go of the writer.
    pub(crate) fn close(&mut self) {
        use std::os::fd::AsRawFd;
        if self.state.closing.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = std::fs::remove_file(&self.socket);
        if let Some(listener) = self.listener.take() {
            // SAFETY: shutting down a socket this struct owns; wakes the blocked accept.
            unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
        }
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        lock(&self.state.writer).take();
        for stream in lock(&self.state.connections).values() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        lock(&self.state.alive).take();
        if let Ok(()) | Err(mpsc::RecvTimeoutError::Timeout) = self.ended.recv_timeout(CLOSE_LIMIT)
        {
            tracing::warn!("a ledger host connection did not end in time");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.close();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

fn accept_loop(state: Arc<State>, listener: UnixListener) {
    for stream in listener.incoming() {
        if state.closing.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let Some(alive) = lock(&state.alive).clone() else {
            break;
        };
        if state.serving.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            state.serving.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!("the ledger host has too many connections; closing a new one");
            continue;
        }
        let id = state.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(copy) = stream.try_clone() {
            lock(&state.connections).insert(id, copy);
        }
        let connection_state = state.clone();
        let spawned = std::thread::Builder::new()
            .name("ledger-host-conn".into())
            .spawn(move || {
                serve_connection(&connection_state, stream);
                lock(&connection_state.connections).remove(&id);
                connection_state.serving.fetch_sub(1, Ordering::SeqCst);
                drop(alive);
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start a ledger host connection thread");
            lock(&state.connections).remove(&id);
            state.serving.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Answers one connection until it closes, breaks or breaks the protocol.
fn serve_connection(state: &State, mut stream: UnixStream) {
    match wire::peer_uid(&stream) {
        Ok(uid) if uid == wire::own_uid() => {}
        _ => {
            tracing::warn!("refused a ledger host connection of another user");
            return;
        }
    }
    match wire::read_frame::<Request>(&mut stream, Some(STEP_LIMIT), STEP_LIMIT) {
        Ok(Request::Hello { version }) if version == wire::PROTOCOL_VERSION => {
            let hello = Response::Hello {
                version: wire::PROTOCOL_VERSION,
            };
            if wire::write_frame(&mut stream, &hello).is_err() {
                return;
            }
        }
        _ => {
            let _ = wire::write_frame(
                &mut stream,
                &Response::Failed(WireError::Protocol("expected Hello of this version".into())),
            );
            return;
        }
    }
    let mut snapshot: Option<Result<Box<dyn ReadView>, StoreError>> = None;
    loop {
        let Ok(request) = wire::read_frame::<Request>(&mut stream, None, STEP_LIMIT) else {
            return;
        };
        if state.closing.load(Ordering::SeqCst) {
            return;
        }
        let outcome = match request {
            Request::Snapshot => {
                snapshot = Some(state.local.read_owned(&state.families));
                Ok(())
            }
            Request::EndSnapshot => {
                snapshot = None;
                Ok(())
            }
            Request::BeginWrite => {
                snapshot = None;
                remote_write(state, &mut stream)
            }
            read => {
                let view =
                    match snapshot.get_or_insert_with(|| state.local.read_owned(&state.families)) {
                        Ok(view) => Ok(&**view),
                        Err(error) => Err(error.clone()),
                    };
                match view {
                    Ok(view) => answer_read(view, read, &mut stream),
                    Err(error) => wire::write_frame(&mut stream, &failed(&error)),
                }
            }
        };
        if outcome.is_err() {
            return;
        }
    }
}

fn failed(error: &StoreError) -> Response {
    Response::Failed(WireError::from(error))
}

fn head_bytes(head: &SessionHead) -> Vec<u8> {
    serde_json::to_vec(head).expect("heads always serialize")
}

fn ids_of(ids: Vec<u128>) -> Vec<EventId> {
    ids.into_iter().map(|id| EventId(ulid::Ulid(id))).collect()
}

fn rows_of(events: Vec<Option<crate::event::Event>>) -> Vec<Option<Vec<u8>>> {
    events
        .into_iter()
        .map(|event| event.map(|e| codec::encode_event(&e)))
        .collect()
}

/// Answers one read request from `view`. Errors are I/O errors of the connection: a
/// storage error is answered as [`Response::Failed`].
fn answer_read(view: &dyn ReadView, request: Request, stream: &mut UnixStream) -> io::Result<()> {
    let session_of = |key: u128| SessionId(ulid::Ulid(key));
    let answer = match request {
        Request::Head { session } => view
            .head(session_of(session))
            .map(|head| Response::Head(head.as_ref().map(head_bytes))),
        Request::Heads => view
            .heads()
            .map(|heads| Response::Heads(heads.iter().map(head_bytes).collect())),
        Request::Alias { alias } => view
            .alias(&alias)
            .map(|found| Response::Alias(found.map(|s| s.0.0))),
        Request::EventsById { ids } => view
            .events_by_id(&ids_of(ids))
            .map(|events| Response::Events(rows_of(events))),
        Request::HeadAndEventsById { session, ids } => view
            .head_and_events_by_id(session_of(session), &ids_of(ids))
            .map(|(head, events)| {
                Response::HeadAndEvents(head.as_ref().map(head_bytes), rows_of(events))
            }),
        Request::EventCount => view.event_count().map(Response::Count),
        Request::CheckStructure => view.check_structure().map(Response::Findings),
        Request::UndecodableHeads => view.undecodable_heads().map(|found| {
            Response::Undecodable(found.into_iter().map(|(s, why)| (s.0.0, why)).collect())
        }),
        Request::LastPosition => view.last_position().map(Response::Position),
        Request::ScanSession {
            session,
            from_seq,
            to_seq,
        } => {
            let mut pages = Pages::new(stream);
            let scanned = view.scan_session(
                session_of(session),
                from_seq,
                to_seq,
                Decode::Full,
                &mut |seq, decoded| {
                    pages.push(Row {
                        key: seq,
                        row: decoded
                            .map(|event| codec::encode_event(&event))
                            .map_err(|e| WireError::from(&e)),
                    })
                },
            );
            return pages.finish(scanned);
        }
        Request::ScanAll => {
            let mut pages = Pages::new(stream);
            let scanned = view.scan_all(&mut |event| {
                pages.push(Row {
                    key: 0,
                    row: Ok(codec::encode_event(&event)),
                })
            });
            return pages.finish(scanned);
        }
        Request::ScanPositions { from } => {
            let mut pages = Pages::new(stream);
            let scanned = view.scan_positions(from, &mut |position, event| {
                pages.push(Row {
                    key: position,
                    row: Ok(codec::encode_event(&event)),
                })
            });
            return pages.finish(scanned);
        }
        other => Ok(Response::Failed(WireError::Protocol(format!(
            "{other:?} is not a read"
        )))),
    };
    let response = answer.unwrap_or_else(|error| failed(&error));
    wire::write_frame(stream, &response)
}

/// Sends a scan's rows a page at a time, waiting for the client between pages.
struct Pages<'s> {
    stream: &'s mut UnixStream,
    rows: Vec<Row>,
    bytes: usize,
    /// The connection failed or the client said stop: the scan must end.
    stopped: bool,
    broken: Option<io::Error>,
}

impl<'s> Pages<'s> {
    fn new(stream: &'s mut UnixStream) -> Self {
        Pages {
            stream,
            rows: Vec::new(),
            bytes: 0,
            stopped: false,
            broken: None,
        }
    }

    /// Adds a row; returns whether the scan goes on.
    fn push(&mut self, row: Row) -> bool {
        self.bytes += row.row.as_ref().map_or(64, |bytes| bytes.len() + 16);
        self.rows.push(row);
        if self.rows.len() < wire::ROWS_PER_FRAME && self.bytes < wire::ROW_BYTES_PER_FRAME {
            return true;
        }
        let page = Response::Rows {
            rows: std::mem::take(&mut self.rows),
            more: true,
        };
        self.bytes = 0;
        let asked = wire::write_frame(self.stream, &page)
            .and_then(|()| wire::read_frame::<Request>(self.stream, Some(STEP_LIMIT), STEP_LIMIT));
        match asked {
            Ok(Request::Continue) => true,
            Ok(_) => {
                self.stopped = true;
                false
            }
            Err(error) => {
                self.broken = Some(error);
                false
            }
        }
    }

    fn finish(self, scanned: Result<(), StoreError>) -> io::Result<()> {
        if let Some(error) = self.broken {
            return Err(error);
        }
        if self.stopped {
            return Ok(());
        }
        let last = match scanned {
            Ok(()) => Response::Rows {
                rows: self.rows,
                more: false,
            },
            Err(error) => failed(&error),
        };
        wire::write_frame(self.stream, &last)
    }
}

/// How a remote write's job ended.
enum WriteEnd {
    Commit,
    Abort,
    /// The connection broke or broke the protocol: it is closed.
    Broken,
}

/// Runs a client's write inside this process's next group commit.
fn remote_write(state: &State, stream: &mut UnixStream) -> io::Result<()> {
    let writer = lock(&state.writer).clone();
    let Some(writer) = writer else {
        return wire::write_frame(stream, &Response::Failed(WireError::HostClosing));
    };
    let job_stream = stream.try_clone()?;
    let families = state.families.clone();
    let answer =
        writer.enqueue(move |txn: &mut AppendTxn<'_>| write_job(txn, job_stream, &families));
    drop(writer);
    let outcome = match answer {
        Err(error) => Err(error),
        Ok(answer) => answer
            .blocking_recv()
            .unwrap_or(Err(StoreError::WriterGone)),
    };
    match outcome {
        Ok(WriteEnd::Broken) => Err(io::ErrorKind::BrokenPipe.into()),
        Ok(WriteEnd::Commit | WriteEnd::Abort) => wire::write_frame(stream, &Response::Done),
        Err(error) => wire::write_frame(stream, &failed(&error)),
    }
}

/// The job on the writer thread: the client's reads inside the group's transaction, then
/// its writes, all at once, with its commit. A client that goes away before it has written
/// nothing, so the group (this process's own calls among them) goes on.
fn write_job(txn: &mut AppendTxn<'_>, mut stream: UnixStream, families: &Families) -> WriteEnd {
    let begun = {
        let view = txn.backend();
        match view.last_position() {
            Ok(last_position) => Response::Begun {
                has_changes: view.has_changes(),
                last_position,
            },
            Err(error) => failed(&error),
        }
    };
    let failed_to_begin = matches!(begun, Response::Failed(_));
    if wire::write_frame(&mut stream, &begun).is_err() || failed_to_begin {
        return WriteEnd::Broken;
    }
    loop {
        let Ok(request) = wire::read_frame::<Request>(&mut stream, Some(STEP_LIMIT), STEP_LIMIT)
        else {
            return WriteEnd::Broken;
        };
        match request {
            Request::Commit { writes } => {
                for write in writes {
                    if let Err(error) = apply(txn.backend(), write, families) {
                        // Part of it may be written: the group must not commit.
                        txn.poison(error);
                        break;
                    }
                }
                return WriteEnd::Commit;
            }
            Request::Abort => return WriteEnd::Abort,
            read => {
                if answer_read(txn.backend(), read, &mut stream).is_err() {
                    return WriteEnd::Broken;
                }
            }
        }
    }
}

fn apply(view: &mut dyn WriteView, write: Write, families: &Families) -> Result<(), StoreError> {
    match write {
        Write::Append {
            events,
            head,
            aliases,
        } => view
            .append(&decode_plan(events, &head, aliases, families)?)
            .map(|_| ()),
        Write::PutHead { head } => view.put_head(&decode_head(&head, families)?),
    }
}

pub(crate) fn decode_head(bytes: &[u8], families: &Families) -> Result<SessionHead, StoreError> {
    crate::store::decode_head_json(bytes, families)
        .map_err(|e| StoreError::Corrupt(format!("session head: {e}")))
}

fn decode_plan(
    events: Vec<Vec<u8>>,
    head: &[u8],
    aliases: Vec<String>,
    families: &Families,
) -> Result<AppendPlan, StoreError> {
    Ok(AppendPlan {
        events: events
            .iter()
            .map(|row| codec::decode_event(row, families))
            .collect::<Result<_, _>>()?,
        head: decode_head(head, families)?,
        aliases,
    })
}
