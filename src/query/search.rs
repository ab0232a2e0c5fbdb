//! Search over every session's text: the query, its filters and a limit in, ranked hits
//! out.
//!
//! Owns: the seam [`search`] ([`SearchQuery`] in, [`SearchHit`]s out, best first), the
//! engine behind it (today a case-insensitive scan of every event: the exact phrase
//! ranks 0, all the words rank 1, newest first within a rank; a title hit counts only for
//! a session nothing else matched in), snippets, and [`search_answer`] (the one JSON
//! shape of results). Replacing the engine (an index, issue 20) changes this file only:
//! callers see [`search`] and its two types. Must not: parse a tool's arguments or add
//! the provenance note (the tool's answer does).

use crate::event::{Event, Payload, SessionId, SessionKind};
use crate::store::{Ledger, StoreError};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};

/// Characters of context on each side of a search hit in its snippet.
pub const SNIPPET_CONTEXT_CHARS: usize = 60;

/// What a search asks.
#[derive(Clone, Copy, Debug)]
pub struct SearchQuery<'a> {
    /// The text to find, as the person or model typed it.
    pub text: &'a str,
    /// Only sessions of this kind.
    pub kind: Option<SessionKind>,
    /// Most hits returned.
    pub limit: usize,
}

/// A search hit.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub session_id: String,
    pub seq: u64,
    pub kind: &'static str,
    #[serde(rename = "type")]
    pub event_type: &'static str,
    /// 0: the exact phrase; 1: all the words.
    pub rank: u8,
    pub at: String,
    pub snippet: String,
}

/// The one shape of search results, for `search_history` (which adds its provenance note)
/// and `search --json`: `{"query", "matches": [...]}`.
pub fn search_answer(query: &str, hits: &[SearchHit]) -> Value {
    json!({"query": query, "matches": hits})
}

/// The hits for `query`, best first: the seam every caller searches through.
pub fn search(ledger: &Ledger, query: &SearchQuery<'_>) -> Result<Vec<SearchHit>, StoreError> {
    scan(ledger, query)
}

/// Case-insensitive search over every event's text: phrase hits first, then all-words
/// hits, newest first within a rank.
fn scan(ledger: &Ledger, query: &SearchQuery<'_>) -> Result<Vec<SearchHit>, StoreError> {
    let kind = query.kind;
    let phrase = query.text.trim().to_lowercase();
    let words: Vec<&str> = phrase.split_whitespace().collect();
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let kinds: HashMap<SessionId, SessionKind> = ledger
        .heads()?
        .into_iter()
        .map(|h| (h.session, h.summary.kind))
        .collect();
    let mut hits: Vec<(SearchHit, u64)> = Vec::new();
    // Hits on a session's title (a think thread's purpose, a plan's problem), kept for
    // the sessions nothing else matched in: a title repeating a first thought that
    // matches is found once, through the thought.
    let mut title_hits: Vec<(SearchHit, u64)> = Vec::new();
    // `order` is the event's ledger position (commit order); a ledger of an earlier build
    // not yet written to has none, and its events' times stand in.
    let mut consider = |order: u64, event: Event| {
        let session_kind = kinds
            .get(&event.session)
            .copied()
            .unwrap_or(SessionKind::THINKING);
        if kind.is_some_and(|k| k != session_kind) {
            return true;
        }
        let is_title = matches!(event.payload, Payload::SessionStarted { .. });
        let texts = [event.payload.text(), event.payload.search_extra()];
        // The first text that matches (best rank), and that rank.
        let mut found: Option<(&str, String, u8)> = None;
        for text in texts.into_iter().flatten() {
            let lower = text.to_lowercase();
            let rank = if lower.contains(&phrase) {
                0
            } else if words.iter().all(|w| lower.contains(w)) {
                1
            } else {
                continue;
            };
            if found.as_ref().is_none_or(|(_, _, best)| rank < *best) {
                found = Some((text, lower, rank));
            }
        }
        let Some((text, lower, rank)) = found else {
            return true;
        };
        let anchor = lower.find(words[0]).unwrap_or(0);
        let found = if is_title { &mut title_hits } else { &mut hits };
        found.push((
            SearchHit {
                session_id: event.session.to_string(),
                seq: event.seq,
                kind: session_kind.as_str(),
                event_type: event.payload.type_name(),
                rank,
                at: event.at_rfc3339(),
                snippet: snippet(text, anchor),
            },
            order,
        ));
        true
    };
    if ledger.last_position()? > 0 {
        ledger.for_each_event_from_position(1, |e| consider(e.position, e.event))?;
    } else {
        ledger.for_each_event_everywhere(|event| consider(event.at, event))?;
    }
    let matched: HashSet<String> = hits.iter().map(|(hit, _)| hit.session_id.clone()).collect();
    hits.extend(
        title_hits
            .into_iter()
            .filter(|(hit, _)| !matched.contains(&hit.session_id)),
    );
    hits.sort_by_key(|(hit, order)| (hit.rank, std::cmp::Reverse(*order)));
    hits.truncate(query.limit);
    Ok(hits.into_iter().map(|(hit, _)| hit).collect())
}

/// Up to [`SNIPPET_CONTEXT_CHARS`] characters each side of the hit at `anchor` (a byte
/// offset in the lowercased text, mapped back by character count).
fn snippet(text: &str, anchor: usize) -> String {
    let anchor_chars = original_char_index(text, anchor);
    let total = text.chars().count();
    let start = anchor_chars.saturating_sub(SNIPPET_CONTEXT_CHARS);
    let end = (anchor_chars + SNIPPET_CONTEXT_CHARS * 2).min(total);
    let mut out: String = text.chars().skip(start).take(end - start).collect();
    if start > 0 {
        out.insert(0, '…');
    }
    if end < total {
        out.push('…');
    }
    out
}

/// The character index in `text` of byte offset `lower_offset` in `text.to_lowercase()`.
/// Lowercasing can change lengths ("İ" becomes two characters), so walk the original and
/// add up each character's lowercased length until the offset is reached.
fn original_char_index(text: &str, lower_offset: usize) -> usize {
    let mut lower_bytes = 0;
    for (index, c) in text.chars().enumerate() {
        if lower_bytes >= lower_offset {
            return index;
        }
        lower_bytes += c.to_lowercase().map(char::len_utf8).sum::<usize>();
    }
    text.chars().count()
}
