//! Every ledger read the prompts and completions make, in one place (the read side is
//! being moved; this is the one module to re-point).
//!
//! Owns: thin blocking wrappers over the store and the shared read helpers: heads, a
//! session by id or alias, its folded tree, its Markdown, a search ranked as
//! `search_history` ranks, and the planning facts the `plan` prompt needs. Must not:
//! write, or shape anything for a client (that is [`super::render`]'s job).

use crate::event::{SessionId, SessionKind};
use crate::export::{self, Format};
use crate::projection::tree::ThoughtTree;
use crate::store::{Ledger, SessionHead, StoreError};
use crate::tools::ledger::SearchHit;

/// Every session head, newest first (by [`newest_key`]: the order of `list_sessions`).
pub fn heads_newest_first(ledger: &Ledger) -> Result<Vec<SessionHead>, StoreError> {
    let mut heads = ledger.heads()?;
    heads.sort_by_key(|h| std::cmp::Reverse(newest_key(h)));
    Ok(heads)
}

/// What orders sessions newest first: the position of the last event, then the last
/// update, then the id.
pub fn newest_key(head: &SessionHead) -> (u64, u64, SessionId) {
    (head.position, head.summary.updated_at, head.session)
}

/// The ledger's last position (0 for an empty ledger, or one of an earlier build not
/// yet written to).
pub fn last_position(ledger: &Ledger) -> Result<u64, StoreError> {
    ledger.last_position()
}

/// The sessions with an event at position `from` or later, each once.
pub fn sessions_written_since(ledger: &Ledger, from: u64) -> Result<Vec<SessionId>, StoreError> {
    let mut sessions: Vec<SessionId> = Vec::new();
    ledger.for_each_event_from_position(from, |positioned| {
        if !sessions.contains(&positioned.event.session) {
            sessions.push(positioned.event.session);
        }
        true
    })?;
    Ok(sessions)
}

/// The head of `session`.
pub fn head(ledger: &Ledger, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
    ledger.head(session)
}

/// The head of the session named by `id_or_alias`, if there is one.
pub fn session(ledger: &Ledger, id_or_alias: &str) -> Result<Option<SessionHead>, StoreError> {
    match ledger.resolve(id_or_alias)? {
        Some(session) => ledger.head(session),
        None => Ok(None),
    }
}

/// The session folded up to its head.
pub fn tree(ledger: &Ledger, head: &SessionHead) -> Result<ThoughtTree, StoreError> {
    crate::tools::ledger::load_tree(ledger, head, None)
}

/// The session's Markdown export (as `ledger://sessions/{id}/markdown` serves it).
pub fn markdown(tree: &ThoughtTree) -> String {
    export::render(Format::Markdown, tree, &[])
}

/// The best `limit` matches for `query`, ranked as `search_history` ranks them.
pub fn search(ledger: &Ledger, query: &str, limit: usize) -> Result<Vec<SearchHit>, StoreError> {
    crate::tools::ledger::search(ledger, query, None, limit)
}

/// The kind of a `deep_planning` session.
pub fn planning_kind() -> SessionKind {
    SessionKind::PLANNING
}

/// The `deep_planning` phases that may follow `phase`.
pub fn next_phases(phase: Option<&str>) -> &'static [&'static str] {
    crate::tools::planning::valid_next(phase)
}

/// A session's title as the tools make it from `text` (the first line, clipped).
pub fn title_of(text: &str) -> String {
    crate::tools::write::title_of(text)
}
