//! `completion/complete`: session ids for the `ledger://sessions/{id}` templates and for
//! every prompt argument that names a session.
//!
//! Owns: [`SessionIndex`] (the sessions' ids, aliases and titles, newest first, kept until
//! the ledger's last position moves) and [`complete`] (which references and arguments take
//! session ids; matching by id, alias, title or title word prefix; a session offered by
//! the id its tools give, a plan's `dp-` id, and for a prompt's argument with its title
//! beside it, [`TITLE_SEPARATOR`]; at most [`MAX_VALUES`] with `total` and `hasMore`).
//! Must not: fail on a reference it does not know (that gets an empty list), or read the
//! ledger when nothing was written since the last completion.

use super::reads;
use crate::event::SessionId;
use crate::store::{Ledger, SessionHead, StoreError};
use rmcp::model::{CompleteRequestParams, CompletionInfo, Reference};
use std::sync::Mutex;

/// Most values in one completion (the protocol's limit).
pub(crate) const MAX_VALUES: usize = CompletionInfo::MAX_VALUES;

/// Events since the snapshot above which it is read whole again rather than patched.
pub(crate) const MAX_PATCHED_EVENTS: u64 = 1_024;

/// Most characters of a title shown beside an id in a prompt argument's completion.
pub(crate) const COMPLETION_TITLE_CHARS: usize = 60;

/// Between an id and its title in a prompt argument's completion; the prompt reads the id
/// before it ([`session_id_of`]).
pub(crate) const TITLE_SEPARATOR: &str = " · ";

/// Prefix of the resource templates whose `{id}` names a session.
const SESSION_TEMPLATE_PREFIX: &str = "ledger://sessions/{id}";

/// One session as completion matches it.
struct Row {
    /// Newest first by this ([`reads::newest_key`]).
    order: (u64, u64, SessionId),
    id: String,
    /// Lowercased.
    id_lower: String,
    /// The title, cut to [`COMPLETION_TITLE_CHARS`] on one line.
    title: String,
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
        let one_line = title.split_whitespace().collect::<Vec<_>>().join(" ");
        Row {
            title: crate::export::truncate(
                &one_line,
                COMPLETION_TITLE_CHARS,
                crate::export::Ellipsis::After,
            ),
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
    /// Session ids (or aliases) matching `prefix`, newest first; each with its title
    /// beside it when `titled`.
    pub(crate) fn complete(
        &self,
        ledger: &Ledger,
        prefix: &str,
        titled: bool,
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
        Ok(matching(rows, prefix, titled))
    }
}

/// The id a row offers for `lower_prefix`: an alias (a plan's `dp-` id, what its tool
/// gives) when one starts so, its id when that does, and when the title (or a word of it)
/// does, the alias if it has one, else the id.
fn id_for<'r>(row: &'r Row, lower_prefix: &str) -> Option<&'r str> {
    if let Some((alias, _)) = row
        .aliases
        .iter()
        .find(|(_, lower)| lower.starts_with(lower_prefix))
    {
        return Some(alias);
    }
    if row.id_lower.starts_with(lower_prefix) {
        return Some(&row.id);
    }
    let title_matches = row.title_lower.starts_with(lower_prefix)
        || row
            .title_words
            .iter()
            .any(|word| word.starts_with(lower_prefix));
    title_matches.then(|| row.aliases.first().map_or(row.id.as_str(), |(a, _)| a))
}

/// The value a row offers: the id, with the title beside it when `titled`.
fn value_for(row: &Row, lower_prefix: &str, titled: bool) -> Option<String> {
    let id = id_for(row, lower_prefix)?;
    Some(if titled && !row.title.is_empty() {
        format!("{id}{TITLE_SEPARATOR}{}", row.title)
    } else {
        id.to_string()
    })
}

/// The session id in a prompt's argument: all of it, or what comes before the title a
/// completion put beside the id.
pub(crate) fn session_id_of(argument: &str) -> &str {
    argument
        .split_once(TITLE_SEPARATOR.trim())
        .map_or(argument, |(id, _)| id)
        .trim()
}

fn matching(rows: &[Row], prefix: &str, titled: bool) -> CompletionInfo {
    // A completed value typed on from: its id.
    let lower = session_id_of(prefix).to_lowercase();
    let mut values = Vec::new();
    let mut total: usize = 0;
    for row in rows {
        if let Some(value) = value_for(row, &lower, titled) {
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
    // A prompt's argument shows each id's title beside it; a URI takes the id alone.
    let titled = matches!(request.r#ref, Reference::Prompt(_));
    index.complete(ledger, &request.argument.value, titled)
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
        assert_eq!(matching(&rows, "01", false).values, ["01AAA", "01BBB"]);
        assert_eq!(matching(&rows, "DP-x", false).values, ["dp-Xy12abcd"]);
        assert_eq!(matching(&rows, "cache", false).values, ["01AAA"]);
        // A plan is offered by the id deep_planning gives.
        assert_eq!(matching(&rows, "migr", false).values, ["dp-Xy12abcd"]);
        assert_eq!(matching(&rows, "slow", false).values, ["02CCC"]);
        let all = matching(&rows, "", false);
        assert_eq!(all.values, ["01AAA", "dp-Xy12abcd", "02CCC"]);
        assert_eq!((all.total, all.has_more), (Some(3), Some(false)));
        assert!(matching(&rows, "zzz", false).values.is_empty());
    }

    #[test]
    fn a_prompt_argument_shows_each_title_and_takes_the_id_back() {
        let long = "word ".repeat(40);
        let rows = vec![
            row("01AAA", None, "Cache\ninvalidation"),
            row("01BBB", Some("dp-Xy12abcd"), "Plan the migration"),
            row("01CCC", None, ""),
            row("01DDD", None, &long),
        ];
        let values = matching(&rows, "", true).values;
        assert_eq!(
            values[..3],
            [
                "01AAA · Cache invalidation",
                "dp-Xy12abcd · Plan the migration",
                "01CCC"
            ]
        );
        assert!(values[3].chars().count() <= "01DDD · ".len() + COMPLETION_TITLE_CHARS);
        for value in &values {
            let id = session_id_of(value);
            assert!(
                rows.iter()
                    .any(|r| r.id == id || r.aliases.iter().any(|(a, _)| a == id)),
                "{value}"
            );
        }
        // A chosen value typed on from completes to itself.
        assert_eq!(
            matching(&rows, "dp-Xy12abcd · Plan", true).values,
            ["dp-Xy12abcd · Plan the migration"]
        );
        assert_eq!(session_id_of("  01AAA  "), "01AAA");
    }

    #[test]
    fn at_most_a_hundred_values_with_the_total() {
        let rows: Vec<Row> = (0..250)
            .map(|i| row(&format!("01K{i:05}"), None, "t"))
            .collect();
        let info = matching(&rows, "01k", false);
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
