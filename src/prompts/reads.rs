//! Every ledger read the prompts and completions make, in one place: thin blocking
//! wrappers over [`crate::query`] (the read side every front end shares) and the store.
//!
//! Owns: which reads: sessions newest first, a session by id or alias, its folded tree,
//! the renderers the ledger's families carry, its Markdown, a search ranked as
//! `search_history` ranks, the sessions written since a position. Must not: write, or
//! shape anything for a client (that is [`super::render`]'s job).

use super::PromptError;
use crate::event::SessionId;
use crate::export::family::Exports;
use crate::export::{self, Format};
use crate::projection::tree::ThoughtTree;
use crate::query::{self, RecallError, SearchRequest};
use crate::store::{Ledger, SessionHead, StoreError};

/// Every session head, newest first (the order of `list_sessions`: [`newest_key`]).
pub(crate) fn heads_newest_first(ledger: &Ledger) -> Result<Vec<SessionHead>, StoreError> {
    query::all_sessions(ledger)
}

/// What orders sessions newest first, as [`query::list_sessions`] orders them: the
/// position of the last event, then the last update, then the id.
pub(crate) fn newest_key(head: &SessionHead) -> (u64, u64, SessionId) {
    (head.position, head.summary.updated_at, head.session)
}

/// The ledger's last position (0 for an empty ledger, or one of an earlier build not
/// yet written to).
pub(crate) fn last_position(ledger: &Ledger) -> Result<u64, StoreError> {
    ledger.last_position()
}

/// The sessions with an event at position `from` or later, each once.
pub(crate) fn sessions_written_since(
    ledger: &Ledger,
    from: u64,
) -> Result<Vec<SessionId>, StoreError> {
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
pub(crate) fn head(ledger: &Ledger, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
    ledger.head(session)
}

/// The head of the session named by `id_or_alias`, if there is one.
pub(crate) fn session(
    ledger: &Ledger,
    id_or_alias: &str,
) -> Result<Option<SessionHead>, StoreError> {
    query::find_session(ledger, id_or_alias)
}

/// The session folded up to its head.
pub(crate) fn tree(ledger: &Ledger, head: &SessionHead) -> Result<ThoughtTree, StoreError> {
    query::load_tree(ledger, head, None)
}

/// The renderers of the families `ledger` was opened with (what the families add to a
/// prompt, and to a session's Markdown).
pub(crate) fn exports(ledger: &Ledger) -> Exports {
    Exports::of_families(ledger.families())
}

/// The session's Markdown export (as `ledger://sessions/{id}/markdown` serves it).
pub(crate) fn markdown(tree: &ThoughtTree, exports: &Exports) -> String {
    export::render(Format::Markdown, tree, &[], exports)
}

/// The best `limit` matches for `text`, ranked as `search_history` ranks them (the same
/// seam, [`query::search`]).
pub(crate) fn search(
    ledger: &Ledger,
    text: &str,
    limit: usize,
) -> Result<Vec<query::search::Match>, PromptError> {
    let request = SearchRequest {
        query: text.to_string(),
        limit,
        ..SearchRequest::default()
    };
    match query::search(ledger, &request) {
        Ok(answer) => Ok(answer.matches),
        Err(RecallError::Query(error)) => Err(PromptError::Topic(error)),
        Err(RecallError::Store(error)) => Err(PromptError::Store(error)),
        Err(other) => Err(PromptError::Search(other)),
    }
}

/// A session's title as the tools make it from `text` (the first line, clipped).
pub(crate) fn title_of(text: &str) -> String {
    crate::tools::write::title_of(text)
}
