//! `search QUERY`: every session's events searched through the index, ranked; the same
//! query language, filters and JSON as `search_history`.

use super::*;
use crate::recall::{Cursor, SearchMode, SearchRequest, parse_time};

/// What `search` was asked, as parsed by clap.
pub(super) struct SearchArgs {
    pub query: String,
    pub json: bool,
    pub limit: usize,
    pub session: Option<String>,
    pub kinds: Vec<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub cursor: Option<String>,
    pub mode: Option<String>,
    pub by_session: bool,
}

/// The session kinds of `--kind` flags, each repeatable or comma-separated (`search` and
/// `sessions` read them alike); none means every kind.
pub(super) fn kinds_arg(
    flags: &[String],
    families: &crate::event::Families,
) -> anyhow::Result<Vec<SessionKind>> {
    let mut kinds = Vec::new();
    for name in flags.iter().flat_map(|k| k.split(',')) {
        let name = name.trim();
        if name.is_empty() {
            continue;
        }
        kinds.push(families.kind_named(name).with_context(|| {
            format!(
                "--kind {name:?}: unknown kind; use {}",
                crate::tools::kind_names()
            )
        })?);
    }
    Ok(kinds)
}

pub(super) fn search(settings: &Settings, args: SearchArgs) -> anyhow::Result<()> {
    if args.limit == 0 || args.limit > crate::recall::MAX_LIMIT {
        bail!(
            "--limit {}: expected 1..={}",
            args.limit,
            crate::recall::MAX_LIMIT
        );
    }
    let kinds = kinds_arg(&args.kinds, &families())?;
    let time = |flag: &str, text: &Option<String>| -> anyhow::Result<Option<u64>> {
        text.as_deref()
            .map(|t| parse_time(t).map_err(|e| anyhow::anyhow!("--{flag}: {e}")))
            .transpose()
    };
    let since = time("since", &args.since)?;
    let until = time("until", &args.until)?;
    let cursor = args
        .cursor
        .as_deref()
        .map(Cursor::parse)
        .transpose()
        .context("--cursor")?;
    let mode = args
        .mode
        .as_deref()
        .map(|text| {
            SearchMode::parse(text)
                .with_context(|| format!("--mode {text:?}: use {}", SearchMode::NAMES))
        })
        .transpose()?;
    let ledger = open_existing(settings)?;
    let session = match &args.session {
        Some(id) => Some(find_session(&ledger, id)?.session),
        None => None,
    };
    let request = SearchRequest {
        query: args.query.clone(),
        limit: args.limit,
        session,
        kinds,
        since,
        until,
        cursor,
        mode,
        by_session: args.by_session,
    };
    if let Some(note) = crate::recall::Recall::for_ledger(&ledger).index_note() {
        eprintln!("note: {note}");
    }
    let ranked = query::search::search_ranked(&ledger, &request)?;
    if args.json {
        let answer = ranked.to_json(&args.query);
        return stdout_write(&format!("{}\n", serde_json::to_string_pretty(&answer)?));
    }
    if let Some(note) = &ranked.note {
        eprintln!("note: {note}");
    }
    let answer = &ranked.answer;
    let mut text = String::new();
    for (at, found) in answer.matches.iter().enumerate() {
        let rankers = match ranked.rankers.get(at) {
            Some(rankers) if !rankers.is_empty() => format!(" [{}]", rankers.join("+")),
            _ => String::new(),
        };
        text.push_str(&format!(
            "{} #{:<5} {:<8} {:>7.3}{rankers}  {}\n",
            found.session_id,
            found.seq,
            found.kind,
            found.score,
            export::markdown::terminal_line(&found.snippet)
        ));
    }
    if answer.matches.is_empty() {
        text.push_str("no matches\n");
    }
    if let Some(cursor) = answer.next_cursor {
        text.push_str(&format!("more: --cursor {cursor}\n"));
    }
    stdout_write(&text)
}
