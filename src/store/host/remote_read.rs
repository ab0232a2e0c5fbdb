//! A client's read snapshot on the host, and the contract's read calls over one
//! connection that both remote views share.
//!
//! Owns: [`RemoteRead`] (a snapshot on the host, or on this process's own file after a
//! takeover; a connection that fails before a call visited anything is replaced and the
//! call asked again on a fresh snapshot) and `Ops` (each read call as a request and its
//! answer, the connection's error kept apart so the caller can reach the ledger again).
//! Must not: write, or decide anything the rules decide.

use super::connection::{Conn, unexpected};
use super::wire::{Request, Response, WireError};
use super::{HostError, Mode, Shared};
use crate::event::{Event, EventId, Families, SessionId};
use crate::store::contract::{Decode, PositionVisitor, ReadView, RowVisitor};
use crate::store::{SessionHead, StoreError, codec};
use std::cell::{Cell, RefCell};
use std::io;
use std::sync::Arc;

fn session_key(session: SessionId) -> u128 {
    session.0.0
}

fn head_of(bytes: Option<Vec<u8>>, families: &Families) -> Result<Option<SessionHead>, StoreError> {
    bytes
        .map(|b| super::serve::decode_head(&b, families))
        .transpose()
}

fn events_of(
    rows: Vec<Option<Vec<u8>>>,
    families: &Families,
) -> Result<Vec<Option<Event>>, StoreError> {
    rows.into_iter()
        .map(|row| row.map(|r| codec::decode_event(&r, families)).transpose())
        .collect()
}

fn ids_of(ids: &[EventId]) -> Vec<u128> {
    ids.iter().map(|id| id.0.0).collect()
}

fn decoded(
    row: Result<Vec<u8>, WireError>,
    decode: Decode,
    families: &Families,
) -> Result<Event, StoreError> {
    decode.decoder()(&row.map_err(StoreError::from)?, families)
}

/// The store's error for an answer the host should not have given.
pub(super) fn protocol(response: Response) -> StoreError {
    match response {
        Response::Failed(error) => error.into(),
        other => StoreError::backend(unexpected(&other)),
    }
}

/// The store's error for a connection that failed for good.
pub(super) fn gone(error: io::Error) -> StoreError {
    StoreError::backend(HostError::Lost { source: error })
}

/// The read side over one connection, shared by [`RemoteRead`] and [`RemoteWrite`]: each
/// returns the connection's error apart (outer) so the caller can reach the ledger again.
/// The rows it gets decode with the families it is given.
pub(super) struct Ops<'c>(pub(super) &'c mut Conn, pub(super) &'c Families);

pub(super) type Remote<T> = io::Result<Result<T, StoreError>>;

impl Ops<'_> {
    pub(super) fn ask<T>(
        &mut self,
        request: &Request,
        answer: impl FnOnce(Response) -> Result<T, StoreError>,
    ) -> Remote<T> {
        let response = self.0.ask(request)?;
        if let Response::Rows { .. } = response {
            return Err(unexpected(&response));
        }
        Ok(answer(response))
    }

    pub(super) fn head(&mut self, session: SessionId) -> Remote<Option<SessionHead>> {
        let request = Request::Head {
            session: session_key(session),
        };
        self.ask(&request, |r| match r {
            Response::Head(head) => head_of(head, self.1),
            other => Err(protocol(other)),
        })
    }

    pub(super) fn check_structure(&mut self) -> Remote<Vec<String>> {
        self.ask(&Request::CheckStructure, |r| match r {
            Response::Findings(found) => Ok(found),
            other => Err(protocol(other)),
        })
    }

    pub(super) fn undecodable_heads(&mut self) -> Remote<Vec<(SessionId, String)>> {
        self.ask(&Request::UndecodableHeads, |r| match r {
            Response::Undecodable(found) => Ok(found
                .into_iter()
                .map(|(s, why)| (SessionId(ulid::Ulid(s)), why))
                .collect()),
            other => Err(protocol(other)),
        })
    }

    pub(super) fn heads(&mut self) -> Remote<Vec<SessionHead>> {
        self.ask(&Request::Heads, |r| match r {
            Response::Heads(heads) => heads
                .iter()
                .map(|h| super::serve::decode_head(h, self.1))
                .collect(),
            other => Err(protocol(other)),
        })
    }

    pub(super) fn alias(&mut self, alias: &str) -> Remote<Option<SessionId>> {
        let request = Request::Alias {
            alias: alias.to_string(),
        };
        self.ask(&request, |r| match r {
            Response::Alias(found) => Ok(found.map(|s| SessionId(ulid::Ulid(s)))),
            other => Err(protocol(other)),
        })
    }

    pub(super) fn events_by_id(&mut self, ids: &[EventId]) -> Remote<Vec<Option<Event>>> {
        let request = Request::EventsById { ids: ids_of(ids) };
        self.ask(&request, |r| match r {
            Response::Events(rows) => events_of(rows, self.1),
            other => Err(protocol(other)),
        })
    }

    #[allow(clippy::type_complexity)]
    pub(super) fn head_and_events_by_id(
        &mut self,
        session: SessionId,
        ids: &[EventId],
    ) -> Remote<(Option<SessionHead>, Vec<Option<Event>>)> {
        let request = Request::HeadAndEventsById {
            session: session_key(session),
            ids: ids_of(ids),
        };
        self.ask(&request, |r| match r {
            Response::HeadAndEvents(head, rows) => {
                Ok((head_of(head, self.1)?, events_of(rows, self.1)?))
            }
            other => Err(protocol(other)),
        })
    }

    pub(super) fn count(&mut self, request: &Request) -> Remote<u64> {
        self.ask(request, |r| match r {
            Response::Count(n) | Response::Position(n) => Ok(n),
            other => Err(protocol(other)),
        })
    }

    pub(super) fn scan_session(
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
        let families = self.1;
        self.0.scan(&request, &mut |row| {
            visit(row.key, decoded(row.row, decode, families))
        })
    }

    pub(super) fn scan_all(&mut self, visit: &mut dyn FnMut(Event) -> bool) -> Remote<()> {
        let mut failed = None;
        let families = self.1;
        let scanned = self.0.scan(&Request::ScanAll, &mut |row| match decoded(
            row.row,
            Decode::Full,
            families,
        ) {
            Ok(event) => visit(event),
            Err(error) => {
                failed = Some(error);
                false
            }
        })?;
        Ok(failed.map_or(scanned, Err))
    }

    pub(super) fn scan_positions(
        &mut self,
        from: u64,
        visit: &mut PositionVisitor<'_>,
    ) -> Remote<()> {
        let mut failed = None;
        let families = self.1;
        let scanned = self
            .0
            .scan(&Request::ScanPositions { from }, &mut |row| match decoded(
                row.row,
                Decode::Full,
                families,
            ) {
                Ok(event) => visit(row.key, event),
                Err(error) => {
                    failed = Some(error);
                    false
                }
            })?;
        Ok(failed.map_or(scanned, Err))
    }
}

/// Where a view's calls go.
enum ReadSide {
    /// Not begun yet (or to begin again on the ledger as reached now).
    Fresh,
    Remote {
        mode: Arc<Mode>,
        conn: Conn,
    },
    /// This process took the ledger over: its own snapshot.
    Local(Box<dyn ReadView>),
}

/// A read snapshot on the host (or, after a takeover, on this process's own file).
pub(crate) struct RemoteRead {
    shared: Arc<Shared>,
    side: RefCell<ReadSide>,
    /// What its rows decode with.
    families: Families,
}

impl RemoteRead {
    pub(crate) fn new(shared: Arc<Shared>, mode: Arc<Mode>, families: &Families) -> RemoteRead {
        let side = RemoteRead::begin(&mode, families);
        RemoteRead {
            shared,
            families: families.clone(),
            side: RefCell::new(match side {
                Ok(side) => side,
                Err(()) => ReadSide::Fresh,
            }),
        }
    }

    fn begin(mode: &Arc<Mode>, families: &Families) -> Result<ReadSide, ()> {
        match &**mode {
            Mode::Host { local, .. } => local
                .read_owned(families)
                .map(ReadSide::Local)
                .map_err(|_| ()),
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
                *side = match RemoteRead::begin(&mode, &self.families) {
                    Ok(begun) => begun,
                    Err(()) => {
                        self.shared.reach(Some(&mode))?;
                        continue;
                    }
                };
            }
            match &mut *side {
                ReadSide::Local(view) => return local(&**view),
                ReadSide::Remote { conn, mode } => match remote(&mut Ops(conn, &self.families)) {
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
        Err(gone(
            last_error.unwrap_or_else(|| io::ErrorKind::NotConnected.into()),
        ))
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

    fn check_structure(&self) -> Result<Vec<String>, StoreError> {
        self.call(&mut |v| v.check_structure(), &mut |ops| {
            ops.check_structure()
        })
    }

    fn undecodable_heads(&self) -> Result<Vec<(SessionId, String)>, StoreError> {
        self.call(&mut |v| v.undecodable_heads(), &mut |ops| {
            ops.undecodable_heads()
        })
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        self.call(&mut |v| v.heads(), &mut |ops| ops.heads())
    }

    fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError> {
        self.call(&mut |v| v.alias(alias), &mut |ops| ops.alias(alias))
    }

    fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        self.call(&mut |v| v.events_by_id(ids), &mut |ops| {
            ops.events_by_id(ids)
        })
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
                    next.set(seq.saturating_add(1));
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
        self.call(&mut |v| v.event_count(), &mut |ops| {
            ops.count(&Request::EventCount)
        })
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
            &mut |v| {
                v.scan_positions(next.get(), &mut |position, event| {
                    (visit.borrow_mut())(position, event)
                })
            },
            &mut |ops| {
                ops.scan_positions(next.get(), &mut |position, event| {
                    next.set(position + 1);
                    (visit.borrow_mut())(position, event)
                })
            },
        )
    }
}
