//! What both backends' indexes hold of the ledger and what a page of matches reads back
//! from it: [`Documents`] (an event → its [`Searchable`] text and kind, the session's kind
//! read once per session) and [`Heads`] (a match's session title and kind, read once per
//! session). Must not: know a backend.

use super::{Match, index, round_score};
use crate::event::{Event, SessionId, SessionKind};
use crate::store::{Ledger, StoreError};
use std::collections::HashMap;

/// What the index holds of one event: its session's kind and its texts, joined.
pub(crate) struct Searchable {
    pub kind: SessionKind,
    pub text: String,
}

/// Turns events into what the index holds (for both backends): an event's texts
/// ([`index::texts`]), a title only where it does not repeat the session's first event,
/// the session's kind (read once per session).
pub(crate) struct Documents<'l> {
    ledger: &'l Ledger,
    kinds: HashMap<SessionId, SessionKind>,
}

impl<'l> Documents<'l> {
    pub(crate) fn new(ledger: &'l Ledger) -> Self {
        Documents {
            ledger,
            kinds: HashMap::new(),
        }
    }

    /// What the index holds of `event`, `None` when nothing (no text).
    pub(crate) fn searchable(&mut self, event: &Event) -> Result<Option<Searchable>, StoreError> {
        if let crate::event::Payload::SessionStarted { kind, title, .. } = &event.payload {
            self.kinds.insert(event.session, *kind);
            if index::title_repeats_first_event(self.ledger, event.session, title)? {
                return Ok(None);
            }
        }
        let texts = index::texts(&event.payload);
        if texts.is_empty() {
            return Ok(None);
        }
        let kind = match self.kinds.get(&event.session) {
            Some(kind) => *kind,
            None => {
                let kind = self
                    .ledger
                    .head(event.session)
                    .or_else(StoreError::skip_damage)?
                    .map_or(SessionKind::THINKING, |h| h.summary.kind);
                self.kinds.insert(event.session, kind);
                kind
            }
        };
        Ok(Some(Searchable {
            kind,
            text: texts.join("\n"),
        }))
    }
}

/// The sessions' heads a page of matches needs, read once per session.
#[derive(Default)]
pub(crate) struct Heads {
    seen: HashMap<SessionId, Option<(String, SessionKind)>>,
}

impl Heads {
    /// The title and kind of `session` (`None` when it has no head).
    pub(crate) fn title_and_kind(
        &mut self,
        ledger: &Ledger,
        session: SessionId,
    ) -> Result<Option<(String, SessionKind)>, StoreError> {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.seen.entry(session) {
            slot.insert(
                ledger
                    .head(session)
                    .or_else(StoreError::skip_damage)?
                    .map(|h| (h.summary.title, h.summary.kind)),
            );
        }
        Ok(self.seen[&session].clone())
    }

    /// The match of `event` (`None` when its session has no head).
    pub(crate) fn describe(
        &mut self,
        ledger: &Ledger,
        event: &Event,
        score: f32,
        snippet: String,
    ) -> Result<Option<Match>, StoreError> {
        let Some((title, kind)) = self.title_and_kind(ledger, event.session)? else {
            return Ok(None);
        };
        Ok(Some(Match {
            session_id: event.session.to_string(),
            seq: event.seq,
            kind: kind.as_str(),
            event_type: event.payload.type_name(),
            at: event.at_rfc3339(),
            score: round_score(score as f64),
            title,
            snippet,
        }))
    }
}
