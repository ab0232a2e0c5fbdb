//! `completion/complete`: session ids for the `ledger://sessions/{id}` templates and for
//! every prompt argument that names a session.
//!
//! Owns: [`SessionIndex`] (the sessions' ids, aliases and titles, newest first, kept until
//! the ledger's last position moves) and [`complete`] (which references and arguments take
//! session ids; matching by id, alias, title or title word prefix; at most
//! [`MAX_VALUES`] with `total` and `hasMore`). Must not: fail on a reference it does not
//! know (that gets an empty list), or read the ledger when nothing was written since the
//! last completion.

use super::reads;
use crate::event::SessionId;
use crate::store::{Ledger, SessionHead, StoreError};
use rmcp::model::{CompleteRequestParams, CompletionInfo, Reference};
use std::sync::Mutex;

/// Most values in one completion (the protocol's limit).
pub(crate) const MAX_VALUES: usize = CompletionInfo::MAX_VALUES;

/// Events since the snapshot above which it is read whole again rather than patched.
pub(crate) const MAX_PATCHED_EVENTS: u64 = 1_024;

/// Prefix of the resource templates whose `{id}` names a session.
const SESSION_TEMPLATE_PREFIX: &str = "ledger://sessions/{id}";

/// One session as completion matches it.
struct Row {
    /// Newest first by this ([`reads::newest_key`]).
    order: (u64, u64, SessionId),
    id: String,
    /// Lowercased.
    id_lower: String,
    /// As recorded, and lowercased.
    aliases: Vec<(String, String)>,
    title_lower: String,
    /// The title's words, lowercased (split once, when the row is made).
    title_words: Vec<String>,
}

impl Row {
    fn of(head: &SessionHead) -> Row {
        Row::from_parts(
            reads::newest_key(head),
            head.session.to_string(),
            &head.summary.aliases,
            &head.summary.title,
        )
    }

    fn from_parts(
        order: (u64, u64, SessionId),
        id: String,
        aliases: &[String],
        title: &str,
    ) -> Row {
        let title_lower = title.to_lowercase();
        Row {
            order,
            id_lower: id.to_lowercase(),
            id,
            aliases: aliases
                .iter()
                .map(|a| (a.clone(), a.to_lowercase()))
                .collect(),
            title_words: title_lower
                .split(|c: char| !c.is_alphanumeric())
                .filter(|word| !word.is_empty())
                .map(str::to_string)
                .collect(),
            title_lower,
        }
    }
}

/// The sessions, newest first, as of a ledger position.
struct Snapshot {
    position: u64,
    rows: Vec<Row>,
}

impl Snapshot {
    fn read(ledger: &Ledger, position: u64) -> Result<Snapshot, StoreError> {
        Ok(Snapshot {
            position,
            rows: reads::heads_newest_first(ledger)?
                .iter()
                .map(Row::of)
                .collect(),
        })
    }

    /// Brings the snapshot to `position`: the sessions written since are read again.
    fn patch(&mut self, ledger: &Ledger, position: u64) -> Result<(), StoreError> {
        for session in reads::sessions_written_since(ledger, self.position + 1)? {
            self.rows.retain(|row| row.order.2 != session);
            if let Some(head) = reads::head(ledger, session)? {
                self.rows.push(Row::of(&head));
            }
        }
        self.rows.sort_by_key(|row| std::cmp::Reverse(row.order));
        self.position = position;
        Ok(())
    }
}

/// Sessions for completion, kept between completions and brought up to date from the
/// events written since (read whole again after [`MAX_PATCHED_EVENTS`]). One per process
/// (the HTTP server shares it between its connections).
#[derive(Default)]
pub(crate) struct SessionIndex {
    snapshot: Mutex<Option<Snapshot>>,
}

impl SessionIndex {
    /// Session ids (or aliases) matching `prefix`, newest first.
    pub(crate) fn complete(
        &self,
        ledger: &Ledger,
        prefix: &str,
    ) -> Result<CompletionInfo, StoreError> {
        let position = reads::last_position(ledger)?;
        let mut kept = self
            .snapshot
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        // Position 0: empty, or a ledger of an earlier build whose events carry no
        // positions yet; it cannot tell a change, so it is read every time.
        match kept.as_mut() {
            Some(snapshot) if position > 0 && snapshot.position == position => {}
            Some(snapshot)
                if snapshot.position > 0
                    && position > snapshot.position
                    && position - snapshot.position <= MAX_PATCHED_EVENTS =>
            {
                snapshot.patch(ledger, position)?;
            }
            _ => *kept = Some(Snapshot::read(ledger, position)?),
        }
        let rows = &kept.as_ref().expect("just set").rows;
        Ok(matching(rows, prefix))
    }
}

/// What a row offers for `lower_prefix`: its id when the id or the title (or a word of
/// it) starts so, the alias when an alias does and the id does not.
fn value_for(row: &Row, lower_prefix: &str) -> Option<String> {
    if row.id_lower.starts_with(lower_prefix) {
        return Some(row.id.clone());
    }
    if let Some((alias, _)) = row
        .aliases
        .iter()
        .find(|(_, lower)| lower.starts_with(lower_prefix))
    {
        return Some(alias.clone());
    }
    let title_matches = row.title_lower.starts_with(lower_prefix)
        || row
            .title_words
            .iter()
            .any(|word| word.starts_with(lower_prefix));
    title_matches.then(|| row.id.clone())
}

fn matching(rows: &[Row], prefix: &str) -> CompletionInfo {
    let lower = prefix.trim().to_lowercase();
    let mut values = Vec::new();
    let mut total: usize = 0;
    for row in rows {
        if let Some(value) = value_for(row, &lower) {
            total += 1;
            if values.len() < MAX_VALUES {
                values.push(value);
            }
        }
    }
    let has_more = total > values.len();
    CompletionInfo::with_pagination(values, Some(total.min(u32::MAX as usize) as u32), has_more)
        .expect("at most MAX_VALUES")
}

/// Whether the completion asked for names a session: `sessionId` of a prompt that takes
/// one, or `{id}` of a session resource template.
pub(crate) fn wants_session(request: &CompleteRequestParams) -> bool {
    match &request.r#ref {
        Reference::Prompt(prompt) => {
            matches!(prompt.name.as_str(), super::CONTINUE | super::REVIEW)
                && request.argument.name == super::SESSION_ARGUMENT
        }
        Reference::Resource(template) => {
            template.uri.starts_with(SESSION_TEMPLATE_PREFIX) && request.argument.name == "id"
        }
        // A reference kind of a later protocol: nothing to offer.
        _ => false,
    }
}

/// The answer to `request`: session ids where it names a session, else nothing.
pub(crate) fn complete(
    index: &SessionIndex,
    ledger: &Ledger,
    request: &CompleteRequestParams,
) -> Result<CompletionInfo, StoreError> {
    if !wants_session(request) {
        return Ok(CompletionInfo::with_all_values(Vec::new()).expect("empty"));
    }
    index.complete(ledger, &request.argument.value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ArgumentInfo;

    fn row(id: &str, alias: Option<&str>, title: &str) -> Row {
        let aliases: Vec<String> = alias.map(str::to_string).into_iter().collect();
        Row::from_parts((0, 0, SessionId::generate()), id.into(), &aliases, title)
    }

    #[test]
    fn ids_aliases_titles_and_title_words_match_their_prefix() {
        let rows = vec![
            row("01AAA", None, "Cache invalidation strategy"),
            row("01BBB", Some("dp-Xy12abcd"), "Plan the migration"),
            row("02CCC", None, "Why is the build slow?"),
        ];
        assert_eq!(matching(&rows, "01").values, ["01AAA", "01BBB"]);
        assert_eq!(matching(&rows, "DP-x").values, ["dp-Xy12abcd"]);
        assert_eq!(matching(&rows, "cache").values, ["01AAA"]);
        assert_eq!(matching(&rows, "migr").values, ["01BBB"]);
        assert_eq!(matching(&rows, "slow").values, ["02CCC"]);
        let all = matching(&rows, "");
        assert_eq!((all.total, all.has_more), (Some(3), Some(false)));
        assert!(matching(&rows, "zzz").values.is_empty());
    }

    #[test]
    fn at_most_a_hundred_values_with_the_total() {
        let rows: Vec<Row> = (0..250)
            .map(|i| row(&format!("01K{i:05}"), None, "t"))
            .collect();
        let info = matching(&rows, "01k");
        assert_eq!(info.values.len(), MAX_VALUES);
        assert_eq!((info.total, info.has_more), (Some(250), Some(true)));
        assert_eq!(info.values[0], "01K00000");
    }

    #[test]
    fn only_session_arguments_complete() {
        let ask = |r: Reference, name: &str| {
            wants_session(&CompleteRequestParams::new(
                r,
                ArgumentInfo::new(name, "01"),
            ))
        };
        assert!(ask(Reference::for_prompt("continue"), "sessionId"));
        assert!(ask(Reference::for_prompt("review"), "sessionId"));
        assert!(!ask(Reference::for_prompt("recall"), "topic"));
        assert!(!ask(Reference::for_prompt("nope"), "sessionId"));
        assert!(ask(Reference::for_resource("ledger://sessions/{id}"), "id"));
        assert!(ask(
            Reference::for_resource("ledger://sessions/{id}/markdown"),
            "id"
        ));
        assert!(!ask(Reference::for_resource("file:///{id}"), "id"));
    }
}
