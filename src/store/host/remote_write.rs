//! A client's write transaction inside the host's group commit: its writes held until the
//! commit carries them in one frame, and a commit whose answer was lost begun again on the
//! ledger as reached then (the next host, or this process after a takeover) and its events
//! found by id, never written twice.
//!
//! Owns: [`RemoteWrite`]. Must not: decide anything the rules decide (the writer of this
//! process plans appends as it would locally), or acknowledge a commit the host did not
//! confirm.

use super::connection::{Conn, ConnectError};
use super::remote_read::{Ops, Remote, gone, protocol};
use super::wire::{Request, Response, WireError, Write};
use super::{Mode, Shared};
use crate::event::{Event, EventId, Families, SessionId};
use crate::store::contract::{
    AppendPlan, Decode, PositionVisitor, ReadView, RowVisitor, WriteView,
};
use crate::store::{SessionHead, StoreError, codec};
use std::cell::{Cell, RefCell};
use std::io;
use std::sync::Arc;

/// A write of this transaction, kept here until the commit sends them all at once.
#[derive(Clone)]
enum Pending {
    Append(AppendPlan),
    PutHead(SessionHead),
}

/// Where a write's calls go.
enum WriteSide {
    Remote {
        mode: Arc<Mode>,
        conn: Conn,
    },
    /// This process took the ledger over: its own transaction.
    Local(Box<dyn WriteView>),
}

/// A write transaction inside the host's group commit (or, after a takeover, this
/// process's own).
///
/// The host's job holds its writer for this transaction from `BeginWrite` to `Commit`, so
/// what this transaction reads is what it would read locally. Its writes stay here until
/// the commit, which carries them in one frame; reads see them (the host's answer
/// overlaid with them) and positions follow the host's last one. A client that goes away
/// before its commit has therefore written nothing, and the host's group (its own calls
/// among them) goes on unharmed.
pub(crate) struct RemoteWrite {
    shared: Arc<Shared>,
    side: RefCell<WriteSide>,
    pending: Vec<Pending>,
    /// The last position on the host when this transaction began there.
    base_position: Cell<u64>,
    /// Something was written (or the host's transaction had changes of its own).
    changed: bool,
    /// The first connection failed and the transaction began again on the ledger reached
    /// then: the pending writes are checked against it before they are committed.
    recovered: Cell<bool>,
    /// What its rows decode with.
    families: Families,
}

enum Begin {
    Io(io::Error),
    Store(StoreError),
}

impl RemoteWrite {
    /// Begins a write on the ledger as reached now.
    pub(crate) fn begin(
        shared: Arc<Shared>,
        mode: Arc<Mode>,
        families: &Families,
    ) -> Result<RemoteWrite, StoreError> {
        let mut mode = mode;
        let mut last_error = None;
        for _ in 0..super::REACH_ATTEMPTS {
            match RemoteWrite::begin_on(&mode, families) {
                Ok((side, changed, base)) => {
                    return Ok(RemoteWrite {
                        shared,
                        side: RefCell::new(side),
                        pending: Vec::new(),
                        base_position: Cell::new(base),
                        changed,
                        recovered: Cell::new(false),
                        families: families.clone(),
                    });
                }
                Err(Begin::Store(error)) => return Err(error),
                Err(Begin::Io(error)) => {
                    last_error = Some(error);
                    mode = shared.reach(Some(&mode))?;
                }
            }
        }
        Err(gone(
            last_error.unwrap_or_else(|| io::ErrorKind::NotConnected.into()),
        ))
    }

    fn begin_on(mode: &Arc<Mode>, families: &Families) -> Result<(WriteSide, bool, u64), Begin> {
        match &**mode {
            Mode::Host { local, .. } => {
                let view = local.write_owned(families).map_err(Begin::Store)?;
                let changed = view.has_changes();
                let base = view.last_position().map_err(Begin::Store)?;
                Ok((WriteSide::Local(view), changed, base))
            }
            Mode::Client { pool } => {
                let mut conn = pool.take().map_err(|error| match error {
                    ConnectError::NoHost(error) => Begin::Io(error),
                    ConnectError::Refused(error) => Begin::Store(StoreError::backend(error)),
                })?;
                match conn.ask(&Request::BeginWrite).map_err(Begin::Io)? {
                    Response::Begun {
                        has_changes,
                        last_position,
                    } => Ok((
                        WriteSide::Remote {
                            mode: mode.clone(),
                            conn,
                        },
                        has_changes,
                        last_position,
                    )),
                    Response::Failed(WireError::HostClosing) => Err(Begin::Io(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the ledger host is closing",
                    ))),
                    other => Err(Begin::Store(protocol(other))),
                }
            }
        }
    }

    /// The connection failed: reach the ledger again and begin there. The pending writes
    /// are checked against it at the commit ([`RemoteWrite::still_to_write`]).
    fn recover(&self, error: io::Error) -> Result<(), StoreError> {
        let mode = match &*self.side.borrow() {
            WriteSide::Remote { mode, .. } => mode.clone(),
            WriteSide::Local(_) => return Err(gone(error)),
        };
        let mut mode = self.shared.reach(Some(&mode))?;
        for _ in 0..super::REACH_ATTEMPTS {
            match RemoteWrite::begin_on(&mode, &self.families) {
                Ok((side, _, base)) => {
                    *self.side.borrow_mut() = side;
                    self.base_position.set(base);
                    self.recovered.set(true);
                    return Ok(());
                }
                Err(Begin::Store(error)) => return Err(error),
                Err(Begin::Io(_)) => mode = self.shared.reach(Some(&mode))?,
            }
        }
        Err(gone(error))
    }

    /// A read of the side (never of the pending writes). Outer error: the connection's.
    fn read_op<T>(
        &self,
        local: &mut dyn FnMut(&dyn ReadView) -> Result<T, StoreError>,
        remote: &mut dyn FnMut(&mut Ops<'_>) -> Remote<T>,
    ) -> Remote<T> {
        match &mut *self.side.borrow_mut() {
            WriteSide::Local(view) => Ok(local(&**view)),
            WriteSide::Remote { conn, .. } => remote(&mut Ops(conn, &self.families)),
        }
    }

    /// A read of the side, the connection recovered (and the read asked again) if it fails.
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

    /// The pending appends' events in order, with the position each will get.
    fn pending_events(&self) -> impl Iterator<Item = (u64, &Event)> {
        let base = self.base_position.get();
        self.pending
            .iter()
            .filter_map(|p| match p {
                Pending::Append(plan) => Some(plan.events.iter()),
                Pending::PutHead(_) => None,
            })
            .flatten()
            .enumerate()
            .map(move |(index, event)| (base + 1 + index as u64, event))
    }

    fn pending_count(&self) -> u64 {
        self.pending_events().count() as u64
    }

    /// The head a pending write gives `session` (the last one), with its position.
    fn pending_head(&self, session: SessionId) -> Option<SessionHead> {
        let mut position = self.base_position.get();
        let mut found = None;
        for pending in &self.pending {
            match pending {
                Pending::Append(plan) => {
                    position += plan.events.len() as u64;
                    if plan.head.session == session {
                        found = Some(SessionHead {
                            position,
                            ..plan.head.clone()
                        });
                    }
                }
                Pending::PutHead(head) if head.session == session => found = Some(head.clone()),
                Pending::PutHead(_) => {}
            }
        }
        found
    }

    fn pending_sessions(&self) -> Vec<SessionId> {
        let mut sessions: Vec<SessionId> = self
            .pending
            .iter()
            .map(|p| match p {
                Pending::Append(plan) => plan.head.session,
                Pending::PutHead(head) => head.session,
            })
            .collect();
        sessions.sort();
        sessions.dedup();
        sessions
    }

    fn pending_event(&self, id: EventId) -> Option<Event> {
        self.pending_events()
            .find(|(_, event)| event.id == id)
            .map(|(_, event)| event.clone())
    }

    fn pending_alias(&self, alias: &str) -> Option<SessionId> {
        self.pending.iter().find_map(|p| match p {
            Pending::Append(plan) if plan.aliases.iter().any(|a| a == alias) => {
                Some(plan.head.session)
            }
            _ => None,
        })
    }

    /// Events by id: the pending ones from here, the rest from the side in one question.
    fn events_by_id_overlaid(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        let mut out: Vec<Option<Event>> = ids.iter().map(|id| self.pending_event(*id)).collect();
        let missing: Vec<EventId> = ids
            .iter()
            .zip(&out)
            .filter(|(_, found)| found.is_none())
            .map(|(id, _)| *id)
            .collect();
        if missing.is_empty() {
            return Ok(out);
        }
        let mut stored = self
            .retried(|this| {
                this.read_op(&mut |v| v.events_by_id(&missing), &mut |ops| {
                    ops.events_by_id(&missing)
                })
            })?
            .into_iter();
        for slot in out.iter_mut().filter(|slot| slot.is_none()) {
            *slot = stored.next().flatten();
        }
        Ok(out)
    }

    /// After a recovery: the pending writes checked against the ledger as it is now. An
    /// append whose events are all stored already (the lost host committed it before its
    /// answer was lost) is dropped; one that no longer continues its session's chain, or
    /// whose ids or aliases another write took, fails the commit as "may or may not be
    /// recorded". The rest is written as planned.
    fn still_to_write(&self) -> Result<Vec<Pending>, StoreError> {
        let moved = || Err(StoreError::WriterGone);
        let mut kept: Vec<Pending> = Vec::new();
        for pending in &self.pending {
            let Pending::Append(plan) = pending else {
                kept.push(pending.clone());
                continue;
            };
            let Some(first) = plan.events.first() else {
                continue;
            };
            let session = plan.head.session;
            let ids: Vec<EventId> = plan.events.iter().map(|e| e.id).collect();
            let (stored_head, stored) = self.retried(|this| {
                this.read_op(
                    &mut |v| v.head_and_events_by_id(session, &ids),
                    &mut |ops| ops.head_and_events_by_id(session, &ids),
                )
            })?;
            if stored.iter().all(Option::is_some) {
                let same = stored
                    .iter()
                    .zip(&plan.events)
                    .all(|(s, e)| s.as_ref().is_some_and(|s| s.hash == e.hash));
                if same {
                    continue;
                }
                return moved();
            }
            if stored.iter().any(Option::is_some) {
                return moved();
            }
            let head = kept
                .iter()
                .rev()
                .find_map(|p| match p {
                    Pending::Append(p) if p.head.session == session => Some(p.head.clone()),
                    _ => None,
                })
                .or(stored_head);
            let continues = match &head {
                None => first.seq == 1,
                Some(head) => head.seq.checked_add(1) == Some(first.seq) && head.hash == first.prev,
            };
            if !continues {
                return moved();
            }
            for alias in &plan.aliases {
                let owner = self.retried(|this| {
                    this.read_op(&mut |v| v.alias(alias), &mut |ops| ops.alias(alias))
                })?;
                if owner.is_some_and(|owner| owner != session) {
                    return moved();
                }
            }
            kept.push(pending.clone());
        }
        Ok(kept)
    }

    fn finish(self, commit: bool) -> Result<(), StoreError> {
        let mut result = Ok(());
        for _ in 0..super::REACH_ATTEMPTS {
            let writes = if !commit {
                Vec::new()
            } else if self.recovered.get() {
                match self.still_to_write() {
                    Ok(writes) => writes,
                    Err(error) => {
                        result = Err(error);
                        break;
                    }
                }
            } else {
                self.pending.clone()
            };
            let sent = match &mut *self.side.borrow_mut() {
                WriteSide::Local(view) => {
                    result = writes.iter().try_for_each(|pending| match pending {
                        Pending::Append(plan) => view.append(plan).map(|_| ()),
                        Pending::PutHead(head) => view.put_head(head),
                    });
                    Ok(())
                }
                WriteSide::Remote { conn, .. } => {
                    let request = if commit {
                        Request::Commit {
                            writes: writes.iter().map(to_wire).collect(),
                        }
                    } else {
                        Request::Abort
                    };
                    conn.ask(&request).map(|answer| {
                        result = match answer {
                            Response::Done => Ok(()),
                            other => Err(protocol(other)),
                        }
                    })
                }
            };
            match sent {
                Ok(()) => break,
                Err(error) if commit => {
                    // Lost before the answer: the write may be committed there; begin
                    // again and check (the next round only writes what is missing).
                    if let Err(error) = self.recover(error) {
                        result = Err(error);
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        match self.side.into_inner() {
            WriteSide::Local(view) => match result {
                Ok(()) if commit => view.commit(),
                Ok(()) => view.abort(),
                Err(error) => {
                    let _ = view.abort();
                    Err(error)
                }
            },
            WriteSide::Remote { mode, conn } => {
                if let Mode::Client { pool } = &*mode {
                    pool.give_back(conn);
                }
                if commit { result } else { Ok(()) }
            }
        }
    }
}

fn to_wire(pending: &Pending) -> Write {
    match pending {
        Pending::Append(plan) => Write::Append {
            events: plan.events.iter().map(codec::encode_event).collect(),
            head: serde_json::to_vec(&plan.head).expect("heads always serialize"),
            aliases: plan.aliases.clone(),
        },
        Pending::PutHead(head) => Write::PutHead {
            head: serde_json::to_vec(head).expect("heads always serialize"),
        },
    }
}

impl ReadView for RemoteWrite {
    fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        if let Some(head) = self.pending_head(session) {
            return Ok(Some(head));
        }
        self.retried(|this| this.read_op(&mut |v| v.head(session), &mut |ops| ops.head(session)))
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        let mut heads =
            self.retried(|this| this.read_op(&mut |v| v.heads(), &mut |ops| ops.heads()))?;
        for session in self.pending_sessions() {
            let head = self
                .pending_head(session)
                .expect("a pending session has a head");
            match heads.iter_mut().find(|h| h.session == session) {
                Some(stored) => *stored = head,
                None => heads.push(head),
            }
        }
        Ok(heads)
    }

    fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError> {
        if let Some(session) = self.pending_alias(alias) {
            return Ok(Some(session));
        }
        self.retried(|this| this.read_op(&mut |v| v.alias(alias), &mut |ops| ops.alias(alias)))
    }

    fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        self.events_by_id_overlaid(ids)
    }

    fn head_and_events_by_id(
        &self,
        session: SessionId,
        ids: &[EventId],
    ) -> Result<(Option<SessionHead>, Vec<Option<Event>>), StoreError> {
        if self.pending.is_empty() {
            return self.retried(|this| {
                this.read_op(&mut |v| v.head_and_events_by_id(session, ids), &mut |ops| {
                    ops.head_and_events_by_id(session, ids)
                })
            });
        }
        Ok((self.head(session)?, self.events_by_id_overlaid(ids)?))
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
        let going = Cell::new(true);
        let visit = RefCell::new(visit);
        // One step for either side: a retried scan goes on from the row after the last.
        let step = |seq: u64, row| {
            next.set(seq.saturating_add(1));
            let more = (visit.borrow_mut())(seq, row);
            going.set(more);
            more
        };
        self.retried(|this| {
            this.read_op(
                &mut |v| {
                    v.scan_session(session, next.get(), to_seq, decode, &mut |q, r| step(q, r))
                },
                &mut |ops| {
                    ops.scan_session(session, next.get(), to_seq, decode, &mut |q, r| step(q, r))
                },
            )
        })?;
        if !going.get() {
            return Ok(());
        }
        let visit = visit.into_inner();
        for (_, event) in self.pending_events() {
            if event.session == session && (next.get()..=to_seq).contains(&event.seq) {
                let row = match decode {
                    Decode::Full => Ok(event.clone()),
                    Decode::ToFold => {
                        codec::decode_event_to_fold(&codec::encode_event(event), &self.families)
                    }
                };
                if !visit(event.seq, row) {
                    break;
                }
            }
        }
        Ok(())
    }

    fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
        let all = RefCell::new(Vec::new());
        let keep = |e| {
            all.borrow_mut().push(e);
            true
        };
        self.retried(|this| {
            all.borrow_mut().clear();
            this.read_op(&mut |v| v.scan_all(&mut |e| keep(e)), &mut |ops| {
                ops.scan_all(&mut |e| keep(e))
            })
        })?;
        let mut all = all.into_inner();
        all.extend(self.pending_events().map(|(_, e)| e.clone()));
        all.sort_by_key(|e| (e.session, e.seq));
        for event in all {
            if !visit(event) {
                break;
            }
        }
        Ok(())
    }

    fn event_count(&self) -> Result<u64, StoreError> {
        let stored = self.retried(|this| {
            this.read_op(&mut |v| v.event_count(), &mut |ops| {
                ops.count(&Request::EventCount)
            })
        })?;
        Ok(stored + self.pending_count())
    }

    fn last_position(&self) -> Result<u64, StoreError> {
        Ok(self.base_position.get() + self.pending_count())
    }

    fn scan_positions(&self, from: u64, visit: &mut PositionVisitor<'_>) -> Result<(), StoreError> {
        let next = Cell::new(from);
        let going = Cell::new(true);
        let visit = RefCell::new(visit);
        let step = |position: u64, event| {
            next.set(position + 1);
            let more = (visit.borrow_mut())(position, event);
            going.set(more);
            more
        };
        self.retried(|this| {
            this.read_op(
                &mut |v| v.scan_positions(next.get(), &mut |p, e| step(p, e)),
                &mut |ops| ops.scan_positions(next.get(), &mut |p, e| step(p, e)),
            )
        })?;
        if !going.get() {
            return Ok(());
        }
        let visit = visit.into_inner();
        for (position, event) in self.pending_events() {
            if position >= next.get() && !visit(position, event.clone()) {
                break;
            }
        }
        Ok(())
    }
}

impl WriteView for RemoteWrite {
    fn append(&mut self, plan: &AppendPlan) -> Result<u64, StoreError> {
        self.changed = true;
        self.pending.push(Pending::Append(plan.clone()));
        Ok(self.base_position.get() + self.pending_count())
    }

    fn put_head(&mut self, head: &SessionHead) -> Result<(), StoreError> {
        self.changed = true;
        self.pending.push(Pending::PutHead(head.clone()));
        Ok(())
    }

    fn has_changes(&self) -> bool {
        self.changed
    }

    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        (*self).finish(true)
    }

    fn abort(self: Box<Self>) -> Result<(), StoreError> {
        (*self).finish(false)
    }
}
