//! What both backends' indexes hold of the ledger and what a page of matches reads back
//! from it: [`Documents`] (an event → its [`Searchable`] text and kind, the session's kind
//! read once per session; what of an event is indexed: [`texts`], a title only where it
//! does not repeat the first event) and [`Heads`] (a match's session title and kind, read
//! once per session). Must not: know a backend.

use super::{Match, round_score};
use crate::event::{Event, Payload, SessionId, SessionKind};
use crate::store::{Ledger, StoreError};
use std::collections::HashMap;

/// Texts of a payload the index holds.
pub(crate) fn texts(payload: &Payload) -> Vec<&str> {
    match payload {
        Payload::SessionStarted { title, .. } => vec![title.as_str()],
        Payload::SessionClosed { reason } => vec![reason.as_str()],
        Payload::Family(family) => family.event().search_texts(),
    }
    .into_iter()
    .filter(|t| !t.trim().is_empty())
    .collect()
}

/// Whether a session's title only repeats its first event's text (a thinking session's
/// title is its first thought, cut): then the title is not indexed apart.
pub(crate) fn title_repeats_first_event(
    ledger: &Ledger,
    session: SessionId,
    title: &str,
) -> Result<bool, crate::store::StoreError> {
    let stem = title.trim_end_matches('…').trim();
    let mut repeats = false;
    let read = ledger.for_each_event_to_fold(session, 2, 2, |event| {
        repeats = texts(&event.payload).iter().any(|t| t.contains(stem));
        false
    });
    read.map(Some)
        .or_else(crate::store::StoreError::skip_damage)?;
    Ok(repeats)
}

/// What the index holds of one event: its session's kind and its texts, joined.
pub(crate) struct Searchable {
    pub kind: SessionKind,
    pub text: String,
}

/// Turns events into what the index holds (for both backends): an event's texts
/// ([`texts`]), a title only where it does not repeat the session's first event,
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
            if title_repeats_first_event(self.ledger, event.session, title)? {
                return Ok(None);
            }
        }
        let texts = texts(&event.payload);
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
    /// How many sessions it has read.
    pub(crate) fn sessions(&self) -> usize {
        self.seen.len()
    }

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
