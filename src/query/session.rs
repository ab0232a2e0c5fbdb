//! One session: found by id or alias, folded into its tree as of any event (replay), and
//! rendered in an export format.
//!
//! Owns: [`find_session`], [`load_tree`] (the fold through the store's projection read
//! path), [`load_for_export`] and [`export_session`], and their forms that read a damaged
//! session up to its damage ([`UpToDamage`]: what verified, and what ended it). Must not: check an `atSeq` against
//! the head for the caller (a seq past the head reads to the head; each front end words
//! its own range error).

use crate::event::Event;
use crate::export::family::Exports;
use crate::export::{self, Format};
use crate::projection::tree::{Folds, ThoughtTree};
use crate::store::{Ledger, SessionHead, StoreError};

/// The head of the session `id` names (an id or an alias), if the ledger has it.
pub(crate) fn find_session(ledger: &Ledger, id: &str) -> Result<Option<SessionHead>, StoreError> {
    match ledger.resolve(id)? {
        Some(session) => ledger.head(session),
        None => Ok(None),
    }
}

/// Folds a session up to `at_seq` (its head when `None`) through the store's projection
/// read path ([`Ledger::for_each_event_to_fold`]); damage is an error.
pub fn load_tree(
    ledger: &Ledger,
    head: &SessionHead,
    at_seq: Option<u64>,
) -> Result<ThoughtTree, StoreError> {
    load_tree_up_to_damage(ledger, head, at_seq)?.whole()
}

/// What a read of a session gave when it may be damaged: everything that verified before
/// the damage (all of it when there is none), and the damage that ended it.
pub(crate) struct UpToDamage<T> {
    pub(crate) read: T,
    /// Why the read ended early (the damage is recorded); `None`: the session is sound.
    pub(crate) damage: Option<StoreError>,
}

impl<T> UpToDamage<T> {
    /// What was read if the session is sound; its damage as the error otherwise.
    pub(crate) fn whole(self) -> Result<T, StoreError> {
        match self.damage {
            Some(damage) => Err(damage),
            None => Ok(self.read),
        }
    }

    /// The damage as a sentence for an answer: the session, how far it was read, what.
    pub(crate) fn damage_note(&self, head: &SessionHead, shown_to: u64) -> Option<String> {
        self.damage.as_ref().map(|damage| {
            format!(
                "session {} is damaged: shown up to seq {shown_to} of {}, the last event that \
                 verifies ({damage})",
                head.session, head.seq
            )
        })
    }
}

/// `result` of a scan that visited what verified: the damage it ended on is kept beside
/// what was read, any other error returned.
fn up_to_damage<T>(read: T, result: Result<(), StoreError>) -> Result<UpToDamage<T>, StoreError> {
    match result {
        Ok(()) => Ok(UpToDamage { read, damage: None }),
        Err(damage) if damage.is_damage() => Ok(UpToDamage {
            read,
            damage: Some(damage),
        }),
        Err(error) => Err(error),
    }
}

/// [`load_tree`] of a session that may be damaged: the tree of every event before the
/// damage, and the damage.
pub(crate) fn load_tree_up_to_damage(
    ledger: &Ledger,
    head: &SessionHead,
    at_seq: Option<u64>,
) -> Result<UpToDamage<ThoughtTree>, StoreError> {
    let upto = at_seq.unwrap_or(head.seq).min(head.seq);
    let folds = Folds::of_families(ledger.families());
    let mut tree = ThoughtTree::with_capacity(head.session, upto as usize, &folds);
    let result = ledger.for_each_event_to_fold(head.session, 1, upto, |event| {
        tree.fold(event);
        true
    });
    tree.finish();
    up_to_damage(tree, result)
}

/// [`load_for_export`] of a session that may be damaged (see [`load_tree_up_to_damage`]).
pub(crate) fn load_for_export_up_to_damage(
    ledger: &Ledger,
    head: &SessionHead,
    at_seq: Option<u64>,
    format: Format,
) -> Result<UpToDamage<(ThoughtTree, Vec<Event>)>, StoreError> {
    if format != Format::Jsonl {
        let loaded = load_tree_up_to_damage(ledger, head, at_seq)?;
        return Ok(UpToDamage {
            read: (loaded.read, Vec::new()),
            damage: loaded.damage,
        });
    }
    let upto = at_seq.unwrap_or(head.seq).min(head.seq);
    let mut events = Vec::new();
    let result = ledger.for_each_event(head.session, 1, upto, |event| {
        events.push(event);
        true
    });
    let folds = Folds::of_families(ledger.families());
    let tree = ThoughtTree::build(head.session, events.iter().cloned(), &folds);
    up_to_damage((tree, events), result)
}

/// [`export_session`] of a session that may be damaged: the export of every event before
/// the damage, and the damage.
pub(crate) fn export_session_up_to_damage(
    ledger: &Ledger,
    head: &SessionHead,
    at_seq: Option<u64>,
    format: Format,
) -> Result<UpToDamage<(String, u64)>, StoreError> {
    let loaded = load_for_export_up_to_damage(ledger, head, at_seq, format)?;
    let (tree, events) = &loaded.read;
    let exports = Exports::of_families(ledger.families());
    let text = export::render(format, tree, events, &exports);
    let shown_to = tree.at_seq;
    Ok(UpToDamage {
        read: (text, shown_to),
        damage: loaded.damage,
    })
}

/// What [`export::render`] needs for `format`: the tree, and the whole events for JSONL
/// (the events up to `at_seq`: what a replay shows); damage is an error.
#[cfg(test)]
pub(crate) fn load_for_export(
    ledger: &Ledger,
    head: &SessionHead,
    at_seq: Option<u64>,
    format: Format,
) -> Result<(ThoughtTree, Vec<Event>), StoreError> {
    load_for_export_up_to_damage(ledger, head, at_seq, format)?.whole()
}

/// A session as of `at_seq` (its head when `None`) in `format`; damage is an error.
pub(crate) fn export_session(
    ledger: &Ledger,
    head: &SessionHead,
    at_seq: Option<u64>,
    format: Format,
) -> Result<String, StoreError> {
    Ok(export_session_up_to_damage(ledger, head, at_seq, format)?
        .whole()?
        .0)
}
