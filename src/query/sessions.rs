//! The sessions of a ledger, newest first: the list every front end shows (`list_sessions`,
//! `sessions`, the `ledger://sessions` resource, the ui's list page) and its rows.
//!
//! Owns: the newest-first order and its cursor, the title/text filter, [`session_row`]
//! and [`sessions_answer`] (the one JSON shape of a list of sessions), and naming the
//! sessions a list could not show ([`SessionList::damaged`]: a head row that cannot be
//! read, events a text filter could not read): one damaged session never fails the list.
//! Must not: parse a tool's arguments (a cursor the caller did not check lets every
//! session through).

use crate::event::{SessionId, SessionKind, format_time};
use crate::store::{Ledger, SessionHead, StoreError};
use serde_json::{Value, json};

/// One row of `list_sessions`: a session by the id its tools give and take back (a plan's
/// `dp-` id, an agent session's name), with its ledger id beside as `ledgerId` when that
/// differs.
pub(crate) fn session_row(head: &SessionHead) -> Value {
    let s = &head.summary;
    let ledger_id = head.session.to_string();
    let id = crate::export::family::resumable_id(s, &ledger_id);
    let mut row = json!({
        "sessionId": id,
        "kind": s.kind.as_str(),
        "title": s.title,
        "events": head.seq,
        "thoughts": s.thoughts,
        "branches": s.branches.len(),
        "createdAt": format_time(s.created_at),
        "updatedAt": format_time(s.updated_at),
        "status": s.status(),
    });
    if id != ledger_id {
        row["ledgerId"] = json!(ledger_id);
    }
    // Sessions with model calls (any family) say what they cost; agent sessions, their
    // branch nodes.
    s.add_list_row_fields(&mut row);
    row
}

/// The one shape of a list of sessions, for `list_sessions`, `sessions --json` and the
/// `ledger://sessions` resource: `{"sessions": [...], "nextCursor"?, "damaged"?}`.
pub(crate) fn sessions_answer(rows: &[SessionHead], next: Option<String>) -> Value {
    let mut answer = json!({"sessions": rows.iter().map(session_row).collect::<Vec<_>>()});
    if let Some(next) = next {
        answer["nextCursor"] = json!(next);
    }
    answer
}

/// [`sessions_answer`] of a [`SessionList`]: its damaged sessions, when there are any, as
/// `"damaged": [{"sessionId", "error"}]`.
pub(crate) fn session_list_answer(list: &SessionList) -> Value {
    let mut answer = sessions_answer(&list.rows, list.next.clone());
    if !list.damaged.is_empty() {
        answer["damaged"] = list
            .damaged
            .iter()
            .map(|(session, error)| json!({"sessionId": session.to_string(), "error": error}))
            .collect();
    }
    answer
}

/// One page of sessions, and the sessions it could not show.
#[derive(Debug, Default)]
pub(crate) struct SessionList {
    /// The sessions, newest first.
    pub(crate) rows: Vec<SessionHead>,
    /// The cursor of the next page, when there is one.
    pub(crate) next: Option<String>,
    /// Damaged sessions, with what is wrong (said in full, what to do included): on the
    /// first page those whose head row cannot be read, on every page those a text filter
    /// could not read. Never in `rows`.
    pub(crate) damaged: Vec<(SessionId, String)>,
}

fn cursor_of(head: &SessionHead) -> String {
    format!("{}.{}", head.position, head.session)
}

/// A `nextCursor` taken apart: the last row's position and session id (`None`: not a
/// cursor).
pub(crate) fn parse_cursor(cursor: &str) -> Option<(u64, SessionId)> {
    let (position, id) = cursor.split_once('.')?;
    Some((position.parse().ok()?, id.parse().ok()?))
}

/// Newest-first order: the ledger position of the session's last event (commit order,
/// across processes); in a ledger of an earlier build not yet written to every position
/// is 0, and the last update time decides as it used to. Then the id.
fn newest_key(head: &SessionHead) -> (u64, u64, SessionId) {
    (head.position, head.summary.updated_at, head.session)
}

/// Every session, newest first.
pub(crate) fn all_sessions(ledger: &Ledger) -> Result<Vec<SessionHead>, StoreError> {
    Ok(list_sessions(ledger, &[], None, None, usize::MAX)?.rows)
}

/// What a list says of a session it cannot show, and what to do.
fn damaged_text(what: &str) -> String {
    format!("damaged: {what}; `reasoning-ledger verify` lists the damage")
}

/// Sessions newest first (by the position of their last event, then id), filtered, after
/// `before`; at most `limit`, with the cursor of the next page when there is one. A
/// session whose head row cannot be read, or whose events a text filter cannot read, is
/// left out and named in [`SessionList::damaged`]; the others are listed.
pub(crate) fn list_sessions(
    ledger: &Ledger,
    kinds: &[SessionKind],
    query: Option<&str>,
    before: Option<&str>,
    limit: usize,
) -> Result<SessionList, StoreError> {
    let mut damaged: Vec<(SessionId, String)> = Vec::new();
    if before.is_none() {
        for (session, detail) in ledger.undecodable_heads()? {
            damaged.push((
                session,
                damaged_text(&format!("its head row cannot be read ({detail})")),
            ));
        }
    }
    let mut heads = ledger.heads()?;
    heads.sort_by_key(|h| std::cmp::Reverse(newest_key(h)));
    // Where the cursor's session stands in that order (an unreadable cursor, refused by
    // the tool, lets every session through).
    let past = before.and_then(parse_cursor).map(|(position, session)| {
        heads
            .iter()
            .find(|h| h.session == session)
            .map_or((position, u64::MAX, session), newest_key)
    });
    let query = query.map(str::to_lowercase);
    let mut rows: Vec<SessionHead> = Vec::new();
    for h in heads
        .into_iter()
        .filter(|h| kinds.is_empty() || kinds.contains(&h.summary.kind))
        .filter(|h| past.is_none_or(|cursor| newest_key(h) < cursor))
    {
        let wanted = match &query {
            None => true,
            Some(q) => {
                h.summary.title.to_lowercase().contains(q)
                    || h.session.to_string().to_lowercase().contains(q)
                    || h.summary
                        .aliases
                        .iter()
                        .any(|a| a.to_lowercase().contains(q))
                    || match session_text_contains(ledger, &h, q) {
                        Ok(found) => found,
                        Err(error) if error.is_damage() => {
                            damaged.push((
                                h.session,
                                damaged_text(&format!("its events cannot be read ({error})")),
                            ));
                            false
                        }
                        Err(error) => return Err(error),
                    }
            }
        };
        if wanted {
            rows.push(h);
        }
    }
    let next = (rows.len() > limit).then(|| cursor_of(&rows[limit - 1]));
    rows.truncate(limit);
    Ok(SessionList {
        rows,
        next,
        damaged,
    })
}

/// Whether any event of the session carries `lower_query` in its text (a think
/// thread's purpose beyond the title's 80 characters, a plan's problem and approach
/// names, thoughts).
fn session_text_contains(
    ledger: &Ledger,
    head: &SessionHead,
    lower_query: &str,
) -> Result<bool, StoreError> {
    let mut found = false;
    ledger.for_each_event_to_fold(head.session, 1, head.seq, |event| {
        found = event
            .payload
            .text()
            .is_some_and(|text| text.to_lowercase().contains(lower_query));
        !found
    })?;
    Ok(found)
}
