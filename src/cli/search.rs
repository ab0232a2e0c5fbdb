//! `search TEXT`: every session's events searched, phrase hits first.

use super::*;

pub(super) fn search(
    settings: &Settings,
    text: &str,
    json: bool,
    limit: usize,
) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let hits = query::search(
        &ledger,
        &query::SearchQuery {
            text,
            kind: None,
            limit,
        },
    )?;
    if json {
        let answer = query::search_answer(text, &hits);
        return stdout_write(&format!("{}\n", serde_json::to_string_pretty(&answer)?));
    }
    let mut text = String::new();
    for hit in &hits {
        text.push_str(&format!(
            "{} #{:<5} {:<8} {}\n",
            hit.session_id,
            hit.seq,
            hit.kind,
            hit.snippet.replace(['\n', '\r'], " ")
        ));
    }
    if hits.is_empty() {
        text.push_str("no matches\n");
    }
    stdout_write(&text)
}
