//! A client's side of the socket: connections to the host (checked, pooled) and the read
//! and write views that carry the contract's calls over them.
//!
//! Owns: [`Pool`] (connect: the socket file must be this user's, the peer too, and speak
//! this protocol version), [`Conn`] (one request, one answer; scans page by page),
//! [`RemoteRead`] (a snapshot on the host) and [`RemoteWrite`] (a write transaction inside
//! the host's group commit, logged so that it can be replayed on the next host if this one
//! goes away before answering the commit). Must not: decide anything the rules decide (the
//! writer of this process plans appends as it would locally), or acknowledge a commit the
//! host did not confirm.

use super::wire::{self, Request, Response, Row, WireError};
use super::{HostError, Mode, Shared};
use crate::event::{Event, EventId, SessionId};
use crate::store::contract::{
    AppendPlan, Decode, PositionVisitor, ReadView, RowVisitor, WriteView,
};
use crate::store::{SessionHead, StoreError, codec};
use std::cell::{Cell, RefCell};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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

    fn send(&mut self, request: &Request) -> io::Result<()> {
        wire::write_frame(&mut self.stream, request)
    }

    fn receive(&mut self) -> io::Result<Response> {
        wire::read_frame(&mut self.stream, Some(ANSWER_LIMIT), ANSWER_LIMIT)
    }

    /// One request, one answer.
    fn ask(&mut self, request: &Request) -> io::Result<Response> {
        self.send(request)?;
        self.receive()
    }

    /// A scan: visits rows page by page until `visit` says stop or the rows end. The outer
    /// error is the connection's, the inner the store's.
    fn scan(
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

fn unexpected(response: &Response) -> io::Error {
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

    fn take(&self) -> Result<Conn, ConnectError> {
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

    fn give_back(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|poison| poison.into_inner());
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

fn session_key(session: SessionId) -> u128 {
    session.0.0
}

fn head_of(bytes: Option<Vec<u8>>) -> Result<Option<SessionHead>, StoreError> {
    bytes.map(|b| super::serve::decode_head(&b)).transpose()
}

fn events_of(rows: Vec<Option<Vec<u8>>>) -> Result<Vec<Option<Event>>, StoreError> {
    rows.into_iter()
        .map(|row| row.map(|r| codec::decode_event(&r)).transpose())
        .collect()
}

fn ids_of(ids: &[EventId]) -> Vec<u128> {
    ids.iter().map(|id| id.0.0).collect()
}

fn decoded(row: Result<Vec<u8>, WireError>, decode: Decode) -> Result<Event, StoreError> {
    let row = row.map_err(StoreError::from)?;
    match decode {
        Decode::Full => codec::decode_event(&row),
        Decode::ToFold => codec::decode_event_to_fold(&row),
    }
}

/// The store's error for an answer the host should not have given.
fn protocol(response: Response) -> StoreError {
    match response {
        Response::Failed(error) => error.into(),
        other => StoreError::backend(unexpected(&other)),
    }
}

/// The store's error for a connection that failed for good.
fn gone(error: io::Error) -> StoreError {
    StoreError::backend(HostError::Lost { source: error })
}

/// The read side over one connection, shared by [`RemoteRead`] and [`RemoteWrite`]: each
/// returns the connection's error apart (outer) so the caller can reach the ledger again.
struct Ops<'c>(&'c mut Conn);

type Remote<T> = io::Result<Result<T, StoreError>>;

impl Ops<'_> {
    fn ask<T>(&mut self, request: &Request, answer: impl FnOnce(Response) -> Result<T, StoreError>) -> Remote<T> {
        let response = self.0.ask(request)?;
        if let Response::Rows { .. } = response {
            return Err(unexpected(&response));
        }
        Ok(answer(response))
    }

    fn head(&mut self, session: SessionId) -> Remote<Option<SessionHead>> {
        let request = Request::Head {
            session: session_key(session),
        };
        self.ask(&request, |r| match r {
            Response::Head(head) => head_of(head),
            other => Err(protocol(other)),
        })
    }

    fn heads(&mut self) -> Remote<Vec<SessionHead>> {
        self.ask(&Request::Heads, |r| match r {
            Response::Heads(heads) => heads
                .iter()
                .map(|h| super::serve::decode_head(h))
                .collect(),
            other => Err(protocol(other)),
        })
    }

    fn alias(&mut self, alias: &str) -> Remote<Option<SessionId>> {
        let request = Request::Alias {
            alias: alias.to_string(),
        };
        self.ask(&request, |r| match r {
            Response::Alias(found) => Ok(found.map(|s| SessionId(ulid::Ulid(s)))),
            other => Err(protocol(other)),
        })
    }

    fn events_by_id(&mut self, ids: &[EventId]) -> Remote<Vec<Option<Event>>> {
        let request = Request::EventsById { ids: ids_of(ids) };
        self.ask(&request, |r| match r {
            Response::Events(rows) => events_of(rows),
            other => Err(protocol(other)),
        })
    }

    #[allow(clippy::type_complexity)]
    fn head_and_events_by_id(
        &mut self,
        session: SessionId,
        ids: &[EventId],
    ) -> Remote<(Option<SessionHead>, Vec<Option<Event>>)> {
        let request = Request::HeadAndEventsById {
            session: session_key(session),
            ids: ids_of(ids),
        };
        self.ask(&request, |r| match r {
            Response::HeadAndEvents(head, rows) => Ok((head_of(head)?, events_of(rows)?)),
            other => Err(protocol(other)),
        })
    }

    fn count(&mut self, request: &Request) -> Remote<u64> {
        self.ask(request, |r| match r {
            Response::Count(n) | Response::Position(n) => Ok(n),
            other => Err(protocol(other)),
        })
    }

    fn scan_session(
        &mut self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: Decode,
        visit: &mut RowVisitor<'_>,
    ) -> Remote<()> {
        let request = Request::ScanSession {
            session: session_key(session),
            from_seq,
            to_seq,
        };
        self.0
            .scan(&request, &mut |row| visit(row.key, decoded(row.row, decode)))
    }

    fn scan_all(&mut self, visit: &mut dyn FnMut(Event) -> bool) -> Remote<()> {
        let mut failed = None;
        let scanned = self.0.scan(&Request::ScanAll, &mut |row| {
            match decoded(row.row, Decode::Full) {
                Ok(event) => visit(event),
                Err(error) => {
                    failed = Some(error);
                    false
                }
            }
        })?;
        Ok(failed.map_or(scanned, Err))
    }

    fn scan_positions(&mut self, from: u64, visit: &mut PositionVisitor<'_>) -> Remote<()> {
        let mut failed = None;
        let scanned = self.0.scan(&Request::ScanPositions { from }, &mut |row| {
            match decoded(row.row, Decode::Full) {
                Ok(event) => visit(row.key, event),
                Err(error) => {
                    failed = Some(error);
                    false
                }
            }
        })?;
        Ok(failed.map_or(scanned, Err))
    }
}

/// Where a view's calls go.
enum ReadSide {
    /// Not begun yet (or to begin again on the ledger as reached now).
    Fresh,
    Remote { mode: Arc<Mode>, conn: Conn },
    /// This process took the ledger over: its own snapshot.
    Local(Box<dyn ReadView>),
}

/// A read snapshot on the host (or, after a takeover, on this process's own file).
pub(crate) struct RemoteRead {
    shared: Arc<Shared>,
    side: RefCell<ReadSide>,
}

impl RemoteRead {
    pub(crate) fn new(shared: Arc<Shared>, mode: Arc<Mode>) -> RemoteRead {
        let side = RemoteRead::begin(&mode);
        RemoteRead {
            shared,
            side: RefCell::new(match side {
                Ok(side) => side,
                Err(()) => ReadSide::Fresh,
            }),
        }
    }

    fn begin(mode: &Arc<Mode>) -> Result<ReadSide, ()> {
        match &**mode {
            Mode::Host { local, .. } => local.read_owned().map(ReadSide::Local).map_err(|_| ()),
            Mode::Client { pool } => {
                let mut conn = pool.take().map_err(|_| ())?;
                conn.send(&Request::Snapshot).map_err(|_| ())?;
                Ok(ReadSide::Remote {
                    mode: mode.clone(),
                    conn,
                })
            }
        }
    }

    /// Runs a call on the local view, or on the host; a connection that fails before the
    /// call visited anything is replaced (the ledger reached again) and the call asked once
    /// more on a fresh snapshot.
    fn call<T>(
        &self,
        local: &mut dyn FnMut(&dyn ReadView) -> Result<T, StoreError>,
        remote: &mut dyn FnMut(&mut Ops<'_>) -> Remote<T>,
    ) -> Result<T, StoreError> {
        let mut side = self.side.borrow_mut();
        let mut last_error = None;
        for _ in 0..super::REACH_ATTEMPTS {
            if let ReadSide::Fresh = &*side {
                let mode = self.shared.reach(None)?;
                *side = match RemoteRead::begin(&mode) {
                    Ok(begun) => begun,
                    Err(()) => {
                        self.shared.reach(Some(&mode))?;
                        continue;
                    }
                };
            }
            match &mut *side {
                ReadSide::Local(view) => return local(&**view),
                ReadSide::Remote { conn, mode } => match remote(&mut Ops(conn)) {
                    Ok(result) => return result,
                    Err(error) => {
                        let mode = mode.clone();
                        *side = ReadSide::Fresh;
                        last_error = Some(error);
                        self.shared.reach(Some(&mode))?;
                    }
                },
                ReadSide::Fresh => {}
            }
        }
        Err(gone(last_error.unwrap_or_else(|| io::ErrorKind::NotConnected.into())))
    }
}

impl Drop for RemoteRead {
    fn drop(&mut self) {
        if let ReadSide::Remote { mode, mut conn } =
            std::mem::replace(self.side.get_mut(), ReadSide::Fresh)
            && conn.send(&Request::EndSnapshot).is_ok()
            && let Mode::Client { pool } = &*mode
        {
            pool.give_back(conn);
        }
    }
}

impl ReadView for RemoteRead {
    fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        self.call(&mut |v| v.head(session), &mut |ops| ops.head(session))
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        self.call(&mut |v| v.heads(), &mut |ops| ops.heads())
    }

    fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError> {
        self.call(&mut |v| v.alias(alias), &mut |ops| ops.alias(alias))
    }

    fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        self.call(&mut |v| v.events_by_id(ids), &mut |ops| ops.events_by_id(ids))
    }

    fn head_and_events_by_id(
        &self,
        session: SessionId,
        ids: &[EventId],
    ) -> Result<(Option<SessionHead>, Vec<Option<Event>>), StoreError> {
        self.call(&mut |v| v.head_and_events_by_id(session, ids), &mut |ops| {
            ops.head_and_events_by_id(session, ids)
        })
    }

    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: Decode,
        visit: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        // A scan is retried from where it broke: rows already visited are not visited again.
        let next = Cell::new(from_seq);
        let visit = RefCell::new(visit);
        self.call(
            &mut |v| {
                v.scan_session(session, next.get(), to_seq, decode, &mut |seq, row| {
                    (visit.borrow_mut())(seq, row)
                })
            },
            &mut |ops| {
                ops.scan_session(session, next.get(), to_seq, decode, &mut |seq, row| {
                    next.set(seq + 1);
                    (visit.borrow_mut())(seq, row)
                })
            },
        )
    }

    fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
        let visited = Cell::new(false);
        let visit = RefCell::new(visit);
        self.call(
            &mut |v| v.scan_all(&mut |event| (visit.borrow_mut())(event)),
            &mut |ops| {
                if visited.get() {
                    return Ok(Err(gone(io::ErrorKind::ConnectionReset.into())));
                }
                ops.scan_all(&mut |event| {
                    visited.set(true);
                    (visit.borrow_mut())(event)
                })
            },
        )
    }

    fn event_count(&self) -> Result<u64, StoreError> {
        self.call(&mut |v| v.event_count(), &mut |ops| ops.count(&Request::EventCount))
    }

    fn last_position(&self) -> Result<u64, StoreError> {
        self.call(&mut |v| v.last_position(), &mut |ops| {
            ops.count(&Request::LastPosition)
        })
    }

    fn scan_positions(&self, from: u64, visit: &mut PositionVisitor<'_>) -> Result<(), StoreError> {
        let next = Cell::new(from);
        let visit = RefCell::new(visit);
        self.call(
            &mut |v| v.scan_positions(next.get(), &mut |position, event| (visit.borrow_mut())(position, event)),
            &mut |ops| {
                ops.scan_positions(next.get(), &mut |position, event| {
                    next.set(position + 1);
                    (visit.borrow_mut())(position, event)
                })
            },
        )
    }
}

/// What a remote write did, to do again on the next host if this one goes away first.
enum Logged {
    Append(AppendPlan),
    PutHead(SessionHead),
}

/// Where a write's calls go.
enum WriteSide {
    Remote { mode: Arc<Mode>, conn: Conn },
    Local(Box<dyn WriteView>),
}

/// A write transaction inside the host's group commit (or, after a takeover, this
/// process's own).
pub(crate) struct RemoteWrite {
    shared: Arc<Shared>,
    side: RefCell<WriteSide>,
    log: Vec<Logged>,
    /// Something was written (or the host's transaction had changes of its own).
    changed: bool,
}

impl RemoteWrite {
    /// Begins a write on the ledger as reached now.
    pub(crate) fn begin(shared: Arc<Shared>, mode: Arc<Mode>) -> Result<RemoteWrite, StoreError> {
        let mut mode = mode;
        let mut last_error = None;
        for _ in 0..super::REACH_ATTEMPTS {
            match RemoteWrite::begin_on(&mode) {
                Ok((side, changed)) => {
                    return Ok(RemoteWrite {
                        shared,
                        side: RefCell::new(side),
                        log: Vec::new(),
                        changed,
                    });
                }
                Err(Begin::Store(error)) => return Err(error),
                Err(Begin::Io(error)) => {
                    last_error = Some(error);
                    mode = shared.reach(Some(&mode))?;
                }
            }
        }
        Err(gone(last_error.unwrap_or_else(|| io::ErrorKind::NotConnected.into())))
    }

    fn begin_on(mode: &Arc<Mode>) -> Result<(WriteSide, bool), Begin> {
        match &**mode {
            Mode::Host { local, .. } => {
                let view = local.write_owned().map_err(Begin::Store)?;
                let changed = view.has_changes();
                Ok((WriteSide::Local(view), changed))
            }
            Mode::Client { pool } => {
                let mut conn = pool.take().map_err(|error| match error {
                    ConnectError::NoHost(error) => Begin::Io(error),
                    ConnectError::Refused(error) => Begin::Store(StoreError::backend(error)),
                })?;
                match conn.ask(&Request::BeginWrite).map_err(Begin::Io)? {
                    Response::Begun { has_changes } => Ok((
                        WriteSide::Remote {
                            mode: mode.clone(),
                            conn,
                        },
                        has_changes,
                    )),
                    Response::Failed(WireError::HostClosing) => Err(Begin::Io(
                        io::Error::new(io::ErrorKind::ConnectionAborted, "the ledger host is closing"),
                    )),
                    other => Err(Begin::Store(protocol(other))),
                }
            }
        }
    }

    /// The connection failed: reach the ledger again, begin there, and do again what this
    /// write did so far. What the lost host may have committed already (its answer to
    /// `Commit` lost) is found by id and not written twice; a session that moved in the
    /// meantime fails the write as "may or may not be recorded".
    fn recover(&self, error: io::Error) -> Result<(), StoreError> {
        let mode = match &*self.side.borrow() {
            WriteSide::Remote { mode, .. } => mode.clone(),
            WriteSide::Local(_) => return Err(gone(error)),
        };
        let mut mode = self.shared.reach(Some(&mode))?;
        for _ in 0..super::REACH_ATTEMPTS {
            let side = match RemoteWrite::begin_on(&mode) {
                Ok((side, _)) => side,
                Err(Begin::Store(error)) => return Err(error),
                Err(Begin::Io(_)) => {
                    mode = self.shared.reach(Some(&mode))?;
                    continue;
                }
            };
            *self.side.borrow_mut() = side;
            match self.replay() {
                Ok(result) => return result,
                Err(_) => mode = self.shared.reach(Some(&mode))?,
            }
        }
        Err(gone(error))
    }

    /// Replays the log on the side just begun. Outer error: the new connection failed too.
    fn replay(&self) -> Remote<()> {
        for logged in &self.log {
            let done = match logged {
                Logged::Append(plan) => self.replay_append(plan)?,
                Logged::PutHead(head) => self.put_on_side(head)?,
            };
            if let Err(error) = done {
                return Ok(Err(error));
            }
        }
        Ok(Ok(()))
    }

    fn replay_append(&self, plan: &AppendPlan) -> Remote<()> {
        let Some(first) = plan.events.first() else {
            return Ok(Ok(()));
        };
        let session = plan.head.session;
        let ids: Vec<EventId> = plan.events.iter().map(|e| e.id).collect();
        let (head, stored) = match self.read_op(
            &mut |v| v.head_and_events_by_id(session, &ids),
            &mut |ops| ops.head_and_events_by_id(session, &ids),
        )? {
            Ok(found) => found,
            Err(error) => return Ok(Err(error)),
        };
        let moved = Ok(Err(StoreError::WriterGone));
        if stored.iter().all(Option::is_some) {
            let same = stored
                .iter()
                .zip(&plan.events)
                .all(|(stored, event)| stored.as_ref().is_some_and(|s| s.hash == event.hash));
            return if same { Ok(Ok(())) } else { moved };
        }
        let continues = match &head {
            None => first.seq == 1,
            Some(head) => head.seq + 1 == first.seq && head.hash == first.prev,
        };
        if !continues || stored.iter().any(Option::is_some) {
            return moved;
        }
        for alias in &plan.aliases {
            match self.read_op(&mut |v| v.alias(alias), &mut |ops| ops.alias(alias))? {
                Ok(None) => {}
                Ok(Some(owner)) if owner == session => {}
                Ok(Some(_)) => return moved,
                Err(error) => return Ok(Err(error)),
            }
        }
        self.append_on_side(plan).map(|r| r.map(|_| ()))
    }

    fn read_op<T>(
        &self,
        local: &mut dyn FnMut(&dyn ReadView) -> Result<T, StoreError>,
        remote: &mut dyn FnMut(&mut Ops<'_>) -> Remote<T>,
    ) -> Remote<T> {
        match &mut *self.side.borrow_mut() {
            WriteSide::Local(view) => Ok(local(&**view)),
            WriteSide::Remote { conn, .. } => remote(&mut Ops(conn)),
        }
    }

    fn append_on_side(&self, plan: &AppendPlan) -> Remote<u64> {
        match &mut *self.side.borrow_mut() {
            WriteSide::Local(view) => Ok(view.append(plan)),
            WriteSide::Remote { conn, .. } => {
                let request = Request::Append {
                    events: plan.events.iter().map(codec::encode_event).collect(),
                    head: serde_json::to_vec(&plan.head).expect("heads always serialize"),
                    aliases: plan.aliases.clone(),
                };
                Ops(conn).ask(&request, |r| match r {
                    Response::Appended { position } => Ok(position),
                    other => Err(protocol(other)),
                })
            }
        }
    }

    fn put_on_side(&self, head: &SessionHead) -> Remote<()> {
        match &mut *self.side.borrow_mut() {
            WriteSide::Local(view) => Ok(view.put_head(head)),
            WriteSide::Remote { conn, .. } => {
                let request = Request::PutHead {
                    head: serde_json::to_vec(head).expect("heads always serialize"),
                };
                Ops(conn).ask(&request, |r| match r {
                    Response::Done => Ok(()),
                    other => Err(protocol(other)),
                })
            }
        }
    }

    /// A call, recovered (and asked again) when the connection fails.
    fn retried<T>(&self, mut call: impl FnMut(&Self) -> Remote<T>) -> Result<T, StoreError> {
        let mut last = None;
        for _ in 0..super::REACH_ATTEMPTS {
            match call(self) {
                Ok(result) => return result,
                Err(error) => {
                    last = Some(error.kind());
                    self.recover(error)?;
                }
            }
        }
        Err(gone(last.unwrap_or(io::ErrorKind::NotConnected).into()))
    }

    fn finish(self, request: Request) -> Result<(), StoreError> {
        let commit = matches!(request, Request::Commit);
        let this = self;
        let result = this.retried(|this| match &mut *this.side.borrow_mut() {
            WriteSide::Local(_) => Ok(Ok(())),
            WriteSide::Remote { conn, .. } => match conn.ask(&request)? {
                Response::Done => Ok(Ok(())),
                other => Ok(Err(protocol(other))),
            },
        });
        match this.side.into_inner() {
            WriteSide::Local(view) => {
                result?;
                if commit { view.commit() } else { view.abort() }
            }
            WriteSide::Remote { mode, conn } => {
                if let Mode::Client { pool } = &*mode {
                    pool.give_back(conn);
                }
                result
            }
        }
    }
}

enum Begin {
    Io(io::Error),
    Store(StoreError),
}

macro_rules! write_reads {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {
        $(
            fn $name(&self, $($arg: $ty),*) -> Result<$out, StoreError> {
                self.retried(|this| this.read_op(&mut |v| v.$name($($arg),*), &mut |ops| ops.$name($($arg),*)))
            }
        )*
    };
}

impl ReadView for RemoteWrite {
    write_reads! {
        head(session: SessionId) -> Option<SessionHead>;
        heads() -> Vec<SessionHead>;
        alias(alias: &str) -> Option<SessionId>;
        events_by_id(ids: &[EventId]) -> Vec<Option<Event>>;
        head_and_events_by_id(session: SessionId, ids: &[EventId]) -> (Option<SessionHead>, Vec<Option<Event>>);
    }

    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: Decode,
        visit: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        let next = Cell::new(from_seq);
        let visit = RefCell::new(visit);
        self.retried(|this| {
            this.read_op(
                &mut |v| v.scan_session(session, next.get(), to_seq, decode, &mut |s, r| (visit.borrow_mut())(s, r)),
                &mut |ops| {
                    ops.scan_session(session, next.get(), to_seq, decode, &mut |seq, row| {
                        next.set(seq + 1);
                        (visit.borrow_mut())(seq, row)
                    })
                },
            )
        })
    }

    fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
        let visited = Cell::new(false);
        let visit = RefCell::new(visit);
        self.retried(|this| {
            if visited.get() {
                return Ok(Err(gone(io::ErrorKind::ConnectionReset.into())));
            }
            this.read_op(&mut |v| v.scan_all(&mut |e| (visit.borrow_mut())(e)), &mut |ops| {
                ops.scan_all(&mut |event| {
                    visited.set(true);
                    (visit.borrow_mut())(event)
                })
            })
        })
    }

    fn event_count(&self) -> Result<u64, StoreError> {
        self.retried(|this| {
            this.read_op(&mut |v| v.event_count(), &mut |ops| ops.count(&Request::EventCount))
        })
    }

    fn last_position(&self) -> Result<u64, StoreError> {
        self.retried(|this| {
            this.read_op(&mut |v| v.last_position(), &mut |ops| {
                ops.count(&Request::LastPosition)
            })
        })
    }

    fn scan_positions(&self, from: u64, visit: &mut PositionVisitor<'_>) -> Result<(), StoreError> {
        let next = Cell::new(from);
        let visit = RefCell::new(visit);
        self.retried(|this| {
            this.read_op(
                &mut |v| v.scan_positions(next.get(), &mut |p, e| (visit.borrow_mut())(p, e)),
                &mut |ops| {
                    ops.scan_positions(next.get(), &mut |position, event| {
                        next.set(position + 1);
                        (visit.borrow_mut())(position, event)
                    })
                },
            )
        })
    }
}

impl WriteView for RemoteWrite {
    fn append(&mut self, plan: &AppendPlan) -> Result<u64, StoreError> {
        self.changed = true;
        let position = self.retried(|this| this.append_on_side(plan))?;
        self.log.push(Logged::Append(plan.clone()));
        Ok(position)
    }

    fn put_head(&mut self, head: &SessionHead) -> Result<(), StoreError> {
        self.changed = true;
        self.retried(|this| this.put_on_side(head))?;
        self.log.push(Logged::PutHead(head.clone()));
        Ok(())
    }

    fn has_changes(&self) -> bool {
        self.changed
    }

    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        (*self).finish(Request::Commit)
    }

    fn abort(self: Box<Self>) -> Result<(), StoreError> {
        (*self).finish(Request::Abort)
    }
}
