//! `sessions`: the sessions, newest first (text or `--json`).

use super::*;

pub(super) fn sessions(
    settings: &Settings,
    json: bool,
    kind: Vec<String>,
    limit: usize,
) -> anyhow::Result<()> {
    let kinds = super::search::kinds_arg(&kind)?;
    let ledger = open_existing(settings)?;
    let (rows, next) = query::list_sessions(&ledger, &kinds, None, None, limit)?;
    // Sessions this process found damaged: a head row that does not decode is not in
    // `rows`; one whose events were found damaged is marked in them.
    let unreadable = ledger.undecodable_heads()?;
    let damaged = ledger.damage().damaged_sessions();
    if json {
        let mut answer = query::sessions_answer(&rows, next);
        let mut named: Vec<serde_json::Value> = unreadable
            .iter()
            .map(|(session, detail)| {
                serde_json::json!({"sessionId": session.to_string(), "error": format!("its head row cannot be read ({detail})")})
            })
            .collect();
        // Listed sessions known damaged (found here, or a lasting verdict).
        named.extend(
            rows.iter()
                .filter_map(|head| damaged.get(&head.session).map(|detail| (head.session, detail)))
                .map(|(session, detail)| {
                    serde_json::json!({"sessionId": session.to_string(), "error": detail})
                }),
        );
        if !named.is_empty() {
            answer["damaged"] = named.into();
        }
        return stdout_write(&format!("{}\n", serde_json::to_string_pretty(&answer)?));
    }
    let mut text = String::new();
    if rows.is_empty() {
        text.push_str(&format!("no sessions in {}\n", ledger.path().display()));
    } else {
        text.push_str(&format!(
            "{:<26}  {:<8}  {:>6}  {:>8}  {:>10}  {:<8}  {:<24}  {}\n",
            "SESSION", "KIND", "EVENTS", "THOUGHTS", "BRANCH IDS", "STATUS", "UPDATED", "TITLE"
        ));
        for head in &rows {
            let s = &head.summary;
            let status = if damaged.contains_key(&head.session) {
                "damaged"
            } else {
                s.status()
            };
            // BRANCH IDS: the summary's branch ids (a thinking or qa branch, a plan's
            // approach: every id `evaluate_branch`/`compare_branches` take), the JSON's
            // `branches`. `show`'s "branches" are the thought tree's branches only, so a
            // plan with two approaches lists 2 here and "No branches." there.
            text.push_str(&format!(
                "{:<26}  {:<8}  {:>6}  {:>8}  {:>10}  {:<8}  {:<24}  {}\n",
                head.session.to_string(),
                s.kind.as_str(),
                head.seq,
                s.thoughts,
                s.branches.len(),
                status,
                crate::event::format_time(s.updated_at),
                export::markdown::terminal_line(&s.title)
            ));
        }
    }
    for (session, detail) in &unreadable {
        text.push_str(&format!(
            "{session}  damaged: its head row cannot be read ({detail}); `reasoning-ledger verify` lists the damage\n"
        ));
    }
    stdout_write(&text)
}
