//! `search TEXT`: every session's events searched, phrase hits first.

use super::*;

pub(super) fn search(
    settings: &Settings,
    query: &str,
    json: bool,
    limit: usize,
) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let hits = ledger_tools::search(&ledger, query, None, limit)?;
    if json {
        let answer = ledger_tools::search_answer(query, &hits);
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
