//! A session's events in order, filtered and paged: what `get_history` shows.
//!
//! Owns: [`HistoryFilter`], [`HistoryPage`], [`history`] and [`event_row`] (an event as
//! the history shows it: its `actor` only when it has one). Must not: bound the page size (the caller's argument limits
//! do) or add the provenance note (the tool's answer does).

use crate::event::Event;
use crate::store::{Ledger, SessionHead, StoreError};
use serde_json::{Value, json};

/// Which events of a session a history page holds.
#[derive(Clone, Debug)]
pub(crate) struct HistoryFilter {
    /// Only events on this branch.
    pub branch: Option<String>,
    /// Only events of these types (`thought_recorded`, …).
    pub kinds: Option<Vec<String>>,
    /// The first seq looked at.
    pub from_seq: u64,
    /// Most events on the page.
    pub limit: u64,
}

/// One page of a session's history.
#[derive(Clone, Debug)]
pub(crate) struct HistoryPage {
    /// The events wanted, in order.
    pub events: Vec<Event>,
    /// The seq of the first wanted event past the page, when there is one.
    pub next_from_seq: Option<u64>,
    /// The seq of the last event read (sound), wanted or not.
    pub read_to: u64,
}

/// The events of `head`'s session from `filter.from_seq` that pass the filter, at most
/// `filter.limit` of them; a damaged session's up to its damage.
pub(crate) fn history(
    ledger: &Ledger,
    head: &SessionHead,
    filter: &HistoryFilter,
) -> Result<super::UpToDamage<HistoryPage>, StoreError> {
    let mut events = Vec::new();
    let mut next_from_seq = None;
    let mut read_to = filter.from_seq.saturating_sub(1);
    let result = ledger.for_each_event(head.session, filter.from_seq, head.seq, |event| {
        read_to = event.seq;
        let wanted = filter
            .branch
            .as_deref()
            .is_none_or(|b| event.payload.branch() == Some(b))
            && filter
                .kinds
                .as_ref()
                .is_none_or(|k| k.iter().any(|k| k == event.payload.type_name()));
        if wanted {
            if events.len() as u64 == filter.limit {
                next_from_seq = Some(event.seq);
                return false;
            }
            events.push(event);
        }
        true
    });
    let page = HistoryPage {
        events,
        next_from_seq,
        read_to,
    };
    match result {
        Ok(()) => Ok(super::UpToDamage {
            read: page,
            damage: None,
        }),
        Err(damage) if damage.is_damage() => Ok(super::UpToDamage {
            read: page,
            damage: Some(damage),
        }),
        Err(error) => Err(error),
    }
}

/// Every event type name a history of a ledger with `families` can hold
/// (`session_started`, `session_closed` and each family's tags), in registration order.
pub(crate) fn event_type_names(families: &crate::event::Families) -> Vec<&'static str> {
    let mut names = vec![crate::event::SESSION_STARTED, crate::event::SESSION_CLOSED];
    for codec in families.codecs() {
        names.extend(codec.types().iter().copied());
    }
    names
}

/// Whether `head`'s session has an event on `branch`; when it has none, the branches it
/// has (in first-seen order; a damaged session's up to its damage).
pub(crate) fn branches_without(
    ledger: &Ledger,
    head: &SessionHead,
    branch: &str,
) -> Result<Option<Vec<String>>, StoreError> {
    let mut found = false;
    let mut branches: Vec<String> = Vec::new();
    let result = ledger.for_each_event(head.session, 1, head.seq, |event| {
        match event.payload.branch() {
            Some(b) if b == branch => {
                found = true;
                return false;
            }
            Some(b) if !branches.iter().any(|known| known == b) => branches.push(b.to_string()),
            _ => {}
        }
        true
    });
    match result {
        Ok(()) => {}
        Err(damage) if damage.is_damage() => {}
        Err(error) => return Err(error),
    }
    Ok((!found).then_some(branches))
}

/// An event as `get_history` shows it.
pub(crate) fn event_row(event: &Event) -> Value {
    let mut payload = serde_json::to_value(&event.payload).expect("payload serializes");
    let kind = payload
        .as_object_mut()
        .and_then(|o| o.remove("type"))
        .unwrap_or(Value::Null);
    match &event.actor {
        None => {
            json!({"seq": event.seq, "at": event.at_rfc3339(), "type": kind, "payload": payload})
        }
        Some(actor) => json!({
            "seq": event.seq,
            "at": event.at_rfc3339(),
            "actor": actor,
            "type": kind,
            "payload": payload
        }),
    }
}
