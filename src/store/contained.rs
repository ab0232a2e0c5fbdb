//! The backend's edge: a read or write view whose every call is [`contain`]ed, wrapped
//! once ([`Contained`]), so a panic of the storage engine under it (redb assumes a sound
//! file and panics on a damaged page) is an error naming what was read, recorded in the
//! ledger's [`Damage`].
//!
//! Owns: [`Contained`] and its [`ReadView`]/[`WriteView`]. Must not: decide what is
//! damaged (its [`Damage`] does), or change what a call of the view it wraps answers.

use super::contract::{AppendPlan, Decode, PositionVisitor, ReadView, RowVisitor, WriteView};
use super::damage::{Damage, contain};
use super::{SessionHead, StoreError};
use crate::event::{Event, EventId, SessionId};
use std::cell::Cell;

/// A view whose every call is [`contain`]ed: a panic of the storage engine under it is an
/// error naming what was read, and the damage is recorded. The one wrapper every view of
/// a file backend goes out in.
pub(crate) struct Contained<V> {
    view: V,
    damage: Damage,
}

impl<V> Contained<V> {
    pub(crate) fn new(view: V, damage: Damage) -> Contained<V> {
        Contained { view, damage }
    }
}

impl<V: ReadView> ReadView for Contained<V> {
    fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        contain(
            &self.damage,
            || format!("reading the head of session {session}"),
            || self.view.head(session),
        )
    }

    /// Every head that decodes; a head row that does not is recorded as its session's
    /// damage on the way (a listing meets it; nothing is hidden silently).
    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        Ok(self.heads_and_undecodable()?.0)
    }

    fn heads_and_undecodable(
        &self,
    ) -> Result<(Vec<SessionHead>, Vec<(SessionId, String)>), StoreError> {
        let (heads, undecodable) = contain(
            &self.damage,
            || "listing the sessions".into(),
            || self.view.heads_and_undecodable(),
        )?;
        for (session, detail) in &undecodable {
            self.damage
                .found_in(*session, format!("its head row cannot be read ({detail})"));
        }
        Ok((heads, undecodable))
    }

    fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError> {
        contain(
            &self.damage,
            || format!("looking up the alias {alias:?}"),
            || self.view.alias(alias),
        )
    }

    fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        contain(
            &self.damage,
            || "looking up events by id".into(),
            || self.view.events_by_id(ids),
        )
    }

    fn head_and_events_by_id(
        &self,
        session: SessionId,
        ids: &[EventId],
    ) -> Result<(Option<SessionHead>, Vec<Option<Event>>), StoreError> {
        contain(
            &self.damage,
            || format!("reading the head of session {session}"),
            || self.view.head_and_events_by_id(session, ids),
        )
    }

    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: Decode,
        visit: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        let last_seq = Cell::new(from_seq.saturating_sub(1));
        let result = contain(
            &self.damage,
            || format!("reading session {session} after seq {}", last_seq.get()),
            || {
                self.view
                    .scan_session(session, from_seq, to_seq, decode, &mut |seq, row| {
                        last_seq.set(seq);
                        visit(seq, row)
                    })
            },
        );
        if let Err(StoreError::Damaged { detail, .. }) = &result {
            self.damage.found_in(session, detail.clone());
        }
        result
    }

    fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
        contain(
            &self.damage,
            || "reading every event".into(),
            || self.view.scan_all(visit),
        )
    }

    fn event_count(&self) -> Result<u64, StoreError> {
        contain(
            &self.damage,
            || "counting events".into(),
            || self.view.event_count(),
        )
    }

    fn last_position(&self) -> Result<u64, StoreError> {
        contain(
            &self.damage,
            || "reading the last position".into(),
            || self.view.last_position(),
        )
    }

    fn scan_positions(&self, from: u64, visit: &mut PositionVisitor<'_>) -> Result<(), StoreError> {
        contain(
            &self.damage,
            || format!("reading events from position {from}"),
            || self.view.scan_positions(from, visit),
        )
    }

    /// The walk's findings, after the damage this process found before it (the open's: a
    /// redo log record that cannot be replayed), which no walk of the tables shows.
    fn check_structure(&self) -> Result<Vec<String>, StoreError> {
        let mut found: Vec<String> = self.damage.ledger_damage().into_iter().collect();
        found.extend(contain(
            &self.damage,
            || "walking its tables".into(),
            || self.view.check_structure(),
        )?);
        Ok(found)
    }
}

impl<V: WriteView> WriteView for Contained<V> {
    fn append(&mut self, plan: &AppendPlan) -> Result<u64, StoreError> {
        let damage = self.damage.clone();
        let session = plan.head.session;
        contain(
            &damage,
            || format!("appending to session {session}"),
            || self.view.append(plan),
        )
    }

    fn put_head(&mut self, head: &SessionHead) -> Result<(), StoreError> {
        let damage = self.damage.clone();
        contain(
            &damage,
            || format!("writing the head of session {}", head.session),
            || self.view.put_head(head),
        )
    }

    fn has_changes(&self) -> bool {
        self.view.has_changes()
    }

    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        let Contained { view, damage } = *self;
        let view: Box<V> = Box::new(view);
        contain(&damage, || "committing".into(), || view.commit())
    }

    fn abort(self: Box<Self>) -> Result<(), StoreError> {
        let Contained { view, damage } = *self;
        let view: Box<V> = Box::new(view);
        contain(&damage, || "aborting a write".into(), || view.abort())
    }
}
