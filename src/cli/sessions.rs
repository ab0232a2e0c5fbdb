//! `sessions`: the sessions, newest first (text or `--json`).

use super::*;

pub(super) fn sessions(
    settings: &Settings,
    json: bool,
    kind: Vec<String>,
    limit: usize,
) -> anyhow::Result<()> {
    let kinds = super::search::kinds_arg(&kind, &families())?;
    let ledger = open_existing(settings)?;
    let list = query::list_sessions(&ledger, &kinds, None, None, limit)?;
    // Sessions this process found damaged: a head row that cannot be read is not in
    // `rows` (the list names it); one whose events were found damaged is marked in them.
    let damaged = ledger.damage().damaged_sessions();
    if json {
        let mut answer = query::session_list_answer(&list);
        // Listed sessions known damaged (found here, or a lasting verdict).
        let named: Vec<serde_json::Value> = list
            .rows
            .iter()
            .filter_map(|head| damaged.get(&head.session).map(|detail| (head.session, detail)))
            .map(|(session, detail)| {
                serde_json::json!({"sessionId": session.to_string(), "error": detail})
            })
            .collect();
        if !named.is_empty() {
            let mut all = answer["damaged"].as_array().cloned().unwrap_or_default();
            all.extend(named);
            answer["damaged"] = all.into();
        }
        return stdout_write(&format!("{}\n", serde_json::to_string_pretty(&answer)?));
    }
    let rows = &list.rows;
    let mut text = String::new();
    let mut imported_any = false;
    if rows.is_empty() {
        text.push_str(&format!("no sessions in {}\n", ledger.path().display()));
    } else {
        text.push_str(&format!(
            "{:<26}  {:<8}  {:>6}  {:>8}  {:>10}  {:<8}  {:<24}  {}\n",
            "SESSION", "KIND", "EVENTS", "THOUGHTS", "BRANCH IDS", "STATUS", "UPDATED", "TITLE"
        ));
        for head in rows {
            let s = &head.summary;
            let status = if damaged.contains_key(&head.session) {
                "damaged".to_string()
            } else if crate::provenance::ImportedEvents::of(s).is_some() {
                imported_any = true;
                format!("{}*", s.status())
            } else {
                s.status().to_string()
            };
            // BRANCH IDS: the summary's branch ids (a thinking or qa branch, a plan's
            // approach: every id `evaluate_branch`/`compare_branches` take), the JSON's
            // `branches`. `show`'s "branches" are the thought tree's branches only, so a
            // plan with two approaches lists 2 here and "No branches." there.
            text.push_str(&format!(
                "{:<26}  {:<8}  {:>6}  {:>8}  {:>10}  {:<8}  {:<24}  {}\n",
                export::family::resumable_id(s, &head.session.to_string()),
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
    if imported_any {
        text.push_str(
            "* holds events imported from a file (`show ID` names it): their times and actors are the file's claims\n",
        );
    }
    for (session, what) in &list.damaged {
        text.push_str(&format!("{session}  {what}\n"));
    }
    stdout_write(&text)
}
