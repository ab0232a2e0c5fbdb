//! The planning family's read-only tools: `list_plans` (every plan, newest first, with
//! its phase and status) and `get_plan` (one plan as JSON, Markdown, Mermaid or JSONL).
//!
//! Owns: the two answers. Must not: write.

use super::*;

/// Folds every planning session (newest first) with its head.
pub(super) fn plans(ledger: &Ledger) -> Result<Vec<(SessionHead, ThoughtTree)>, ToolError> {
    let mut heads: Vec<SessionHead> = ledger
        .heads()?
        .into_iter()
        .filter(|h| h.summary.kind == SessionKind::PLANNING)
        .collect();
    heads.sort_by_key(|h| std::cmp::Reverse((h.position, h.summary.updated_at, h.session)));
    heads
        .into_iter()
        .map(|head| {
            let tree = crate::tools::ledger::load_tree(ledger, &head, None)?;
            Ok((head, tree))
        })
        .collect()
}

/// `list_plans {status?, keyword?}` → `{count, plans: [...]}` newest first.
pub(super) fn list_plans(
    ledger: &Ledger,
    raw: &Map<String, Value>,
) -> Result<CallToolResult, ToolError> {
    let mut args = Args::new(raw);
    let status = args.string_limited(&["status"], false, MAX_ID_BYTES);
    if let Some(s) = &status
        && s != "complete"
        && s != "in-progress"
    {
        args.problem(
            "status",
            format!(
                "unknown status {}; use complete or in-progress",
                describe_short(s)
            ),
        );
    }
    let keyword = args.string_limited(&["keyword"], false, MAX_ID_BYTES);
    finish(LIST_PLANS, args)?;
    let keyword = keyword
        .map(|k| k.trim().to_lowercase())
        .filter(|k| !k.is_empty());
    let mut rows = Vec::new();
    for (head, tree) in plans(ledger)? {
        let summary = &head.summary;
        let planned = PlanningSummary::of(summary);
        let done = planned.phase.as_deref() == Some(PHASE_DONE);
        match status.as_deref() {
            Some("complete") if !done => continue,
            Some("in-progress") if done => continue,
            _ => {}
        }
        let Some(plan) = &Planning::of(&tree).plan else {
            continue;
        };
        if let Some(keyword) = &keyword {
            let hit = plan.init.problem.to_lowercase().contains(keyword)
                || plan
                    .approaches
                    .iter()
                    .any(|a| a.item.name.to_lowercase().contains(keyword));
            if !hit {
                continue;
            }
        }
        let mut row = json!({
            "sessionId": plan_id(head.session, summary),
            "problem": plan.init.problem,
            "phase": planned.phase.as_deref().unwrap_or("init"),
            "createdAt": format_time(summary.created_at),
            "updatedAt": format_time(summary.updated_at),
        });
        if let Some(selected) = &planned.selected_branch {
            row["selectedBranch"] = json!(selected);
        }
        rows.push(row);
    }
    Ok(structured_result(
        json!({"count": rows.len(), "plans": rows}),
    ))
}

/// `get_plan {sessionId, format?}` → the plan's document, or `found: false`.
pub(super) fn get_plan(
    ledger: &Ledger,
    raw: &Map<String, Value>,
) -> Result<CallToolResult, ToolError> {
    let mut args = Args::new(raw);
    let id = args.string_limited(&["sessionId", "session_id"], true, MAX_ID_BYTES);
    let format = args.string_limited(&["format"], false, MAX_ID_BYTES);
    let format = match format.as_deref().map(str::trim) {
        None | Some("markdown") => "markdown",
        Some("json") => "json",
        Some("jsonl") => "jsonl",
        Some("mermaid") => "mermaid",
        Some(other) => {
            args.problem(
                "format",
                format!(
                    "unknown format {}; use markdown, json, jsonl or mermaid",
                    describe_short(other)
                ),
            );
            "markdown"
        }
    };
    finish(GET_PLAN, args)?;
    let id = id.expect("required");
    let head = match ledger.resolve(&id)? {
        Some(session) => ledger.head(session)?,
        None => None,
    };
    let Some(head) = head.filter(|h| h.summary.kind == SessionKind::PLANNING) else {
        return Ok(structured_result(json!({
            "found": false,
            "sessionId": id,
            "message": format!("Plan \"{}\" not found; call list_plans to see stored plans", describe_short(&id)),
        })));
    };
    let session_id = plan_id(head.session, &head.summary);
    let phase = PlanningSummary::of(&head.summary)
        .phase
        .clone()
        .unwrap_or_default();
    let (text, plan) = match format {
        "jsonl" => {
            let events = ledger.events(head.session, 1, head.seq)?;
            (export::jsonl(&events), None)
        }
        _ => {
            let tree = crate::tools::ledger::load_tree(ledger, &head, None)?;
            match format {
                "json" => {
                    let plan = document::json(Planning::of(&tree)).unwrap_or(Value::Null);
                    (
                        serde_json::to_string_pretty(&plan).expect("json"),
                        Some(plan),
                    )
                }
                "mermaid" => (document::mermaid(&tree), None),
                _ => (
                    document::markdown(Planning::of(&tree)).unwrap_or_default(),
                    None,
                ),
            }
        }
    };
    let mut value = json!({
        "found": true,
        "sessionId": session_id,
        "phase": phase,
        "format": format,
    });
    match plan {
        Some(plan) => value["plan"] = plan,
        None => value["text"] = json!(text),
    }
    let mut result = CallToolResult::success(vec![Content::text(text)]);
    result.structured_content = Some(value);
    Ok(result)
}
