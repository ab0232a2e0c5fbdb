//! One session: found by id or alias, folded into its tree as of any event (replay), and
//! rendered in an export format.
//!
//! Owns: [`find_session`], [`load_tree`] (the fold through the store's projection read
//! path), [`load_for_export`] and [`export_session`]. Must not: check an `atSeq` against
//! the head for the caller (a seq past the head reads to the head; each front end words
//! its own range error).

use crate::event::Event;
use crate::export::{self, Format};
use crate::projection::tree::ThoughtTree;
use crate::store::{Ledger, SessionHead, StoreError};

/// The head of the session `id` names (an id or an alias), if the ledger has it.
pub(crate) fn find_session(ledger: &Ledger, id: &str) -> Result<Option<SessionHead>, StoreError> {
    match ledger.resolve(id)? {
        Some(session) => ledger.head(session),
        None => Ok(None),
    }
}

/// Folds a session up to `at_seq` (its head when `None`) through the store's projection
/// read path ([`Ledger::for_each_event_to_fold`]).
pub fn load_tree(
    ledger: &Ledger,
    head: &SessionHead,
    at_seq: Option<u64>,
) -> Result<ThoughtTree, StoreError> {
    let upto = at_seq.unwrap_or(head.seq).min(head.seq);
    let mut tree = ThoughtTree::with_capacity(head.session, upto as usize);
    ledger.for_each_event_to_fold(head.session, 1, upto, |event| {
        tree.fold(event);
        true
    })?;
    tree.finish();
    Ok(tree)
}

/// What [`export::render`] needs for `format`: the tree, and the whole events for JSONL
/// (the events up to `at_seq`: what a replay shows).
pub(crate) fn load_for_export(
    ledger: &Ledger,
    head: &SessionHead,
    at_seq: Option<u64>,
    format: Format,
) -> Result<(ThoughtTree, Vec<Event>), StoreError> {
    if format != Format::Jsonl {
        return Ok((load_tree(ledger, head, at_seq)?, Vec::new()));
    }
    let upto = at_seq.unwrap_or(head.seq).min(head.seq);
    let events = ledger.events(head.session, 1, upto)?;
    let tree = ThoughtTree::build(head.session, events.iter().cloned());
    Ok((tree, events))
}

/// A session as of `at_seq` (its head when `None`) in `format`.
pub(crate) fn export_session(
    ledger: &Ledger,
    head: &SessionHead,
    at_seq: Option<u64>,
    format: Format,
) -> Result<String, StoreError> {
    let (tree, events) = load_for_export(ledger, head, at_seq, format)?;
    Ok(export::render(format, &tree, &events))
}
