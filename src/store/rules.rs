//! The append rules, written once for every backend: which batch may follow a head, and
//! what exactly gets written.
//!
//! Owns: [`plan_append`], a pure function of (the session's head, what the ledger already
//! holds for the batch's ids and aliases, the batch) that either plans the rows to write,
//! acknowledges a batch stored before (idempotency by event id), or refuses with an
//! [`AppendError`]; and [`lookups`], which reads those inputs through the contract. Must
//! not: do I/O in [`plan_append`], or let a refused batch reach a backend (every check
//! runs before anything is planned).
//!
//! The rules: the expected seq must equal the head's (0 for a new session); an id stored
//! with the same payload in the same session acknowledges again, otherwise is refused,
//! and a batch whose ids are only partly stored is refused; a new session starts with
//! `session_started`, which appears nowhere else; an alias names one session only; an
//! imported event must continue the stored chain (seq, `prev`, recomputed `hash`).

use super::contract::{AppendPlan, ReadView};
use super::{AppendError, SessionHead, StoreError};
use crate::event::summary::SessionSummary;
use crate::event::{Event, GENESIS_HASH, NewEvent, Payload, SessionId};

/// What an append wrote (or found already written): the events and the session's new head.
#[derive(Clone, Debug, PartialEq)]
pub struct Appended {
    pub events: Vec<Event>,
    pub head: SessionHead,
}

/// A batch to append.
#[derive(Clone, Debug)]
pub(crate) enum Batch {
    /// New events for `session` after seq `expected_seq`, recorded at `at` (ms).
    New {
        session: SessionId,
        expected_seq: u64,
        at: u64,
        events: Vec<NewEvent>,
    },
    /// Events exactly as exported (ids, times and hashes kept), all of one session.
    Import { events: Vec<Event> },
}

impl Batch {
    /// The session the batch is for (an import's first event's).
    pub(crate) fn session(&self) -> Option<SessionId> {
        match self {
            Batch::New { session, .. } => Some(*session),
            Batch::Import { events } => events.first().map(|e| e.session),
        }
    }

    fn ids_and_payloads(&self) -> Vec<(crate::event::EventId, &Payload)> {
        match self {
            Batch::New { events, .. } => events.iter().map(|e| (e.id, &e.payload)).collect(),
            Batch::Import { events } => events.iter().map(|e| (e.id, &e.payload)).collect(),
        }
    }

    /// Every alias a `session_started` of the batch claims.
    fn aliases(&self) -> Vec<&str> {
        self.ids_and_payloads()
            .into_iter()
            .filter_map(|(_, payload)| match payload {
                Payload::SessionStarted { aliases, .. } => Some(aliases),
                _ => None,
            })
            .flatten()
            .map(String::as_str)
            .collect()
    }
}

/// What the ledger already holds that the rules need: for each event of the batch (in
/// order) the stored event with its id, and which of the batch's aliases are taken.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stored {
    pub by_id: Vec<Option<Event>>,
    pub taken_aliases: Vec<(String, SessionId)>,
}

/// What to do with a batch.
#[derive(Clone, Debug)]
pub(crate) enum Plan {
    /// Every event was stored before with the same payload: answer with the stored events
    /// and the current head, write nothing.
    Again(Appended),
    /// Write these rows.
    Write(AppendPlan),
}

/// Reads what [`plan_append`] needs for `batch` through any backend's view: the head of
/// `session` and the stored events of the batch's ids in one question
/// ([`ReadView::head_and_events_by_id`]), then the batch's aliases (a new session's).
pub(crate) fn lookups(
    view: &dyn ReadView,
    session: SessionId,
    batch: &Batch,
) -> Result<(Option<SessionHead>, Stored), StoreError> {
    let ids: Vec<crate::event::EventId> = batch
        .ids_and_payloads()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    let (head, by_id) = view.head_and_events_by_id(session, &ids)?;
    let mut stored = Stored {
        by_id,
        taken_aliases: Vec::new(),
    };
    for alias in batch.aliases() {
        if let Some(owner) = view.alias(alias)? {
            stored.taken_aliases.push((alias.to_string(), owner));
        }
    }
    Ok((head, stored))
}

/// The append rules (see the module doc). `head` is the head of the batch's session as of
/// the write transaction, `stored` what [`lookups`] found.
pub(crate) fn plan_append(
    head: Option<&SessionHead>,
    stored: &Stored,
    batch: Batch,
) -> Result<Plan, AppendError> {
    let session = batch.session();
    if let Some(events) = already_stored(&batch, stored)? {
        let session = session.expect("a stored batch is not empty");
        let head = head.cloned().ok_or(StoreError::MissingHead { session })?;
        return Ok(Plan::Again(Appended { events, head }));
    }
    let events = match batch {
        Batch::New {
            session,
            expected_seq,
            at,
            events,
        } => build(head, session, expected_seq, at, events)?,
        Batch::Import { events } => check_import(head, events)?,
    };
    check_and_plan(head, stored, events).map(Plan::Write)
}

/// `Some(stored events)` when every id is already stored with the same payload, in the
/// batch's session.
fn already_stored(batch: &Batch, stored: &Stored) -> Result<Option<Vec<Event>>, AppendError> {
    let session = batch.session();
    let mut found: Vec<Event> = Vec::new();
    for ((id, payload), known) in batch.ids_and_payloads().into_iter().zip(&stored.by_id) {
        let Some(known) = known else { continue };
        // Stored in another session, the id was reused even if the payload is the same.
        if known.payload != *payload || Some(known.session) != session {
            return Err(AppendError::IdReused { id });
        }
        found.push(known.clone());
    }
    let wanted = batch.ids_and_payloads().len();
    match found.len() {
        0 => Ok(None),
        n if n == wanted => Ok(Some(found)),
        _ => Err(AppendError::IdReused { id: found[0].id }),
    }
}

/// New events after the head: seqs, time, schema and the hash chain.
fn build(
    head: Option<&SessionHead>,
    session: SessionId,
    expected_seq: u64,
    at: u64,
    events: Vec<NewEvent>,
) -> Result<Vec<Event>, AppendError> {
    let actual = head.map_or(0, |h| h.seq);
    if actual != expected_seq {
        return Err(AppendError::Conflict {
            session,
            expected: expected_seq,
            actual,
        });
    }
    let mut prev = head.map_or_else(|| GENESIS_HASH.to_string(), |h| h.hash.clone());
    // Within a session time never goes back: a clock stepped back (or another server's
    // behind it) dates the events at their predecessor's time.
    let at = head.map_or(at, |h| at.max(h.summary.updated_at));
    let mut built = Vec::with_capacity(events.len());
    for (offset, new) in events.into_iter().enumerate() {
        let seq = next_seq(session, actual, offset)?;
        let schema = new.payload.schema();
        let mut event = Event {
            id: new.id,
            session,
            seq,
            at,
            schema,
            actor: new.actor,
            payload: new.payload,
            prev: std::mem::take(&mut prev),
            hash: String::new(),
        };
        event.hash = event.computed_hash();
        prev = event.hash.clone();
        built.push(event);
    }
    Ok(built)
}

/// The seq of the batch's event at `offset` after a head at `after`: checked, never
/// wrapping (a head at the largest seq is damage, found before this by the write's check
/// of what it chains onto).
fn next_seq(session: SessionId, after: u64, offset: usize) -> Result<u64, AppendError> {
    after
        .checked_add(1)
        .and_then(|first| first.checked_add(offset as u64))
        .ok_or_else(|| {
            AppendError::Storage(StoreError::Corrupt(format!(
                "session {session}: seq {after} is the largest there is; no event can follow it"
            )))
        })
}

/// Where a session's chain ends: its last event's seq, hash and time (seq 0, no hash: no
/// session yet). What imported events must continue.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ChainEnd {
    pub seq: u64,
    pub hash: Option<String>,
    pub at: u64,
}

impl ChainEnd {
    /// Where the session of `head` ends (`None`: no session yet).
    pub(crate) fn of(head: Option<&SessionHead>) -> ChainEnd {
        head.map_or_else(ChainEnd::default, |h| ChainEnd {
            seq: h.seq,
            hash: Some(h.hash.clone()),
            at: h.summary.updated_at,
        })
    }
}

/// Imported events must continue the stored chain: same session, next seq, `prev` the
/// previous hash, `hash` what the content hashes to, and a time not before the previous
/// event's.
fn check_import(head: Option<&SessionHead>, events: Vec<Event>) -> Result<Vec<Event>, AppendError> {
    check_continues(&ChainEnd::of(head), &events)?;
    Ok(events)
}

/// That `events` continue a chain ending at `end` (the rules of [`check_import`], also
/// what `import` checks a file against before writing); where they leave it.
pub(crate) fn check_continues(end: &ChainEnd, events: &[Event]) -> Result<ChainEnd, AppendError> {
    let Some(first) = events.first() else {
        return Ok(end.clone());
    };
    let session = first.session;
    let after = end.seq;
    let mut prev = end.hash.clone().unwrap_or_else(|| GENESIS_HASH.to_string());
    let mut previous_at = end.at;
    for (offset, event) in events.iter().enumerate() {
        let seq = next_seq(session, after, offset)?;
        let mismatch = |expected: String, found: String| AppendError::ImportMismatch {
            session,
            seq: event.seq,
            expected,
            found,
        };
        if event.session != session {
            return Err(mismatch(session.to_string(), event.session.to_string()));
        }
        // Inside the batch, a seq out of place is the data's own damage, not a session
        // that moved on.
        if event.seq != seq && offset > 0 {
            return Err(mismatch(format!("seq {seq}"), format!("seq {}", event.seq)));
        }
        if event.seq != seq {
            return Err(AppendError::Conflict {
                session,
                expected: event.seq.saturating_sub(1),
                actual: seq - 1,
            });
        }
        if event.prev != prev {
            return Err(mismatch(prev, event.prev.clone()));
        }
        let computed = event.computed_hash();
        if computed != event.hash {
            return Err(mismatch(computed, event.hash.clone()));
        }
        if event.at < previous_at {
            return Err(AppendError::TimeGoesBack {
                session,
                seq: event.seq,
                at: event.at,
                previous: previous_at,
            });
        }
        previous_at = event.at;
        prev = event.hash.clone();
    }
    Ok(ChainEnd {
        seq: after + events.len() as u64,
        hash: Some(prev),
        at: previous_at,
    })
}

/// The start rule and the aliases, then the new head with its folded summary.
fn check_and_plan(
    head: Option<&SessionHead>,
    stored: &Stored,
    events: Vec<Event>,
) -> Result<AppendPlan, AppendError> {
    let Some(first) = events.first() else {
        return Err(AppendError::EmptyBatch);
    };
    let session = first.session;
    let mut summary = match head {
        Some(head) => head.summary.clone(),
        None => SessionSummary::start(first).ok_or_else(|| AppendError::FirstEventNotStart {
            found: first.payload.type_name().to_string(),
        })?,
    };
    let is_new = first.seq == 1;
    let mut aliases: Vec<String> = Vec::new();
    for (index, event) in events.iter().enumerate() {
        if let Payload::SessionStarted { aliases: named, .. } = &event.payload {
            if !(is_new && index == 0) {
                return Err(AppendError::StartInsideSession);
            }
            aliases.extend(named.iter().cloned());
        }
    }
    for alias in &aliases {
        if let Some((_, existing)) = stored.taken_aliases.iter().find(|(a, _)| a == alias) {
            return Err(AppendError::AliasTaken {
                alias: alias.clone(),
                existing: *existing,
            });
        }
    }
    for (index, event) in events.iter().enumerate() {
        if !(is_new && index == 0) {
            summary.apply(event);
        }
    }
    let last = events.last().expect("non-empty");
    let head = SessionHead {
        session,
        seq: last.seq,
        hash: last.hash.clone(),
        summary,
        position: 0,
    };
    Ok(AppendPlan {
        events,
        head,
        aliases,
    })
}

#[cfg(test)]
mod tests {
    //! The rules alone, without a backend.

    use super::*;
    use crate::event::SessionKind;

    fn start(aliases: &[&str]) -> NewEvent {
        NewEvent::new(Payload::SessionStarted {
            kind: SessionKind::THINKING,
            title: "t".into(),
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
        })
    }

    fn new_batch(session: SessionId, expected_seq: u64, events: Vec<NewEvent>) -> Batch {
        Batch::New {
            session,
            expected_seq,
            at: 7,
            events,
        }
    }

    #[test]
    fn a_new_session_is_planned_with_a_chained_head_and_its_aliases() {
        let session = SessionId::generate();
        let batch = new_batch(session, 0, vec![start(&["a"])]);
        let stored = Stored {
            by_id: vec![None],
            taken_aliases: vec![],
        };
        let Plan::Write(plan) = plan_append(None, &stored, batch).unwrap() else {
            panic!("a write")
        };
        assert_eq!(plan.head.seq, 1);
        assert_eq!(plan.events[0].prev, GENESIS_HASH);
        assert_eq!(plan.events[0].computed_hash(), plan.head.hash);
        assert_eq!(plan.aliases, ["a"]);
    }

    #[test]
    fn a_taken_alias_and_a_conflict_are_refused_without_a_plan() {
        let session = SessionId::generate();
        let other = SessionId::generate();
        let stored = Stored {
            by_id: vec![None],
            taken_aliases: vec![("a".into(), other)],
        };
        let refused = plan_append(None, &stored, new_batch(session, 0, vec![start(&["a"])]));
        assert!(
            matches!(refused, Err(AppendError::AliasTaken { existing, .. }) if existing == other)
        );
        let refused = plan_append(None, &stored, new_batch(session, 3, vec![start(&[])]));
        assert!(matches!(
            refused,
            Err(AppendError::Conflict {
                expected: 3,
                actual: 0,
                ..
            })
        ));
    }
}
