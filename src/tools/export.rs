//! The export toolset: a stored session rendered, or as it stood at an earlier event.
//!
//! Owns: `export_session` and `replay_session`: their definitions, argument parsing and
//! answers. Off by default: every listed description is paid for in every model request,
//! and these two serve people and tools (a picture, a file, a step-through) more than a
//! model thinking. The same are reachable without them: the resources
//! (`ledger://sessions/{id}` and its exports), the CLI (`export`, `replay`) and the MCP
//! App. The reading is [`crate::query`]'s, through the ledger family's session
//! resolution. Must not: write anything (these tools are read-only), or present stored
//! text as instructions: answers carry it as data with its session and seq.

use super::args::{Args, MAX_ID_BYTES, count_schema, finish};
use super::ledger::{PROVENANCE_NOTE, blocking, marked, session_arg};
use super::{CallFuture, Family, ToolCall, ToolError, reading_annotations, tool_definition};
use crate::export::Format;
use crate::query;
use crate::store::{Ledger, SessionHead};
use rmcp::model::{CallToolResult, ContentBlock as Content, Tool};
use serde_json::{Map, Value, json};

/// The export family, as registered in [`super::FAMILIES`]: read-only, records nothing.
pub(crate) static FAMILY: Family = Family {
    name: "export",
    instructions: "export (a session as Mermaid, Markdown, JSON, SVG or HTML, or at an earlier event)",
    default_on: false,
    listing_budget_bytes: 700,
    tools,
    aliases: &[],
    call,
    asks_the_client: false,
    kinds: &[],
    codec: None,
    folds: &[],
    picture: None,
    render: None,
    prompts: &[],
    doctor: None,
};

pub(crate) const EXPORT_SESSION: &str = "export_session";
pub(crate) const REPLAY_SESSION: &str = "replay_session";

/// The tools of this family, as listed. No output schemas: an export is text in its
/// format, a replay the open tree object.
pub(crate) fn tools() -> Vec<Tool> {
    let text = json!({"type": "string"});
    vec![
        tool_definition(
            EXPORT_SESSION,
            None,
            "A session rendered, as of atSeq if given.",
            json!({"type": "object", "properties": {
                "sessionId": text,
                "format": {"type": "string", "enum": Format::ALL.map(Format::as_str)},
                "atSeq": count_schema()
            }, "required": ["sessionId", "format"]}),
            None,
            reading_annotations(),
        ),
        tool_definition(
            REPLAY_SESSION,
            None,
            "A session at atSeq: thoughts, branches, edges, anomalies.",
            json!({"type": "object", "properties": {
                "sessionId": text,
                "atSeq": count_schema()
            }, "required": ["sessionId", "atSeq"]}),
            None,
            reading_annotations(),
        ),
    ]
}

/// Dispatches one export tool call.
fn call(call: ToolCall) -> CallFuture {
    let ledger = call.ctx.ledger.clone();
    let tool = call.name;
    let raw = call.arguments;
    Box::pin(blocking(move || {
        match tool.as_str() {
            EXPORT_SESSION => call_export(&ledger, &tool, &raw),
            REPLAY_SESSION => call_replay(&ledger, &tool, &raw),
            other => unreachable!("export::call dispatched {other}"),
        }
        .map(Into::into)
    }))
}

fn at_seq_arg(args: &mut Args<'_>, head: Option<&SessionHead>, required: bool) -> Option<u64> {
    let at = args.integer(&["atSeq", "at_seq"], required, 1)?;
    if let Some(head) = head
        && at > head.seq
    {
        args.problem(
            "atSeq",
            format!(
                "Too big: session {} has events 1..={}",
                head.session, head.seq
            ),
        );
        return None;
    }
    Some(at)
}

fn call_export(
    ledger: &Ledger,
    tool: &str,
    raw: &Map<String, Value>,
) -> Result<CallToolResult, ToolError> {
    let mut args = Args::new(raw);
    let head = session_arg(ledger, &mut args)?;
    let format = args
        .string_limited(&["format"], true, MAX_ID_BYTES)
        .and_then(|text| match text.parse::<Format>() {
            Ok(format) => Some(format),
            Err(message) => {
                args.problem("format", message);
                None
            }
        });
    let at_seq = at_seq_arg(&mut args, head.as_ref(), false);
    finish(tool, args)?;
    let head = head.expect("checked");
    let format = format.expect("checked");
    let exported = query::export_session_up_to_damage(ledger, &head, at_seq, format)?;
    let (text, shown_to) = &exported.read;
    Ok(match exported.damage_note(&head, *shown_to) {
        // What verified, marked: never a damaged session passed off as whole.
        Some(note) => CallToolResult::error(vec![Content::text(note), Content::text(text.clone())]),
        None => CallToolResult::success(vec![Content::text(text.clone())]),
    })
}

fn call_replay(
    ledger: &Ledger,
    tool: &str,
    raw: &Map<String, Value>,
) -> Result<CallToolResult, ToolError> {
    let mut args = Args::new(raw);
    let head = session_arg(ledger, &mut args)?;
    let at_seq = at_seq_arg(&mut args, head.as_ref(), true);
    finish(tool, args)?;
    let head = head.expect("checked");
    let loaded = query::load_tree_up_to_damage(ledger, &head, at_seq)?;
    let mut answer = loaded.read.to_json();
    answer["headSeq"] = json!(head.seq);
    answer["note"] = json!(PROVENANCE_NOTE);
    Ok(marked(
        answer,
        loaded.damage_note(&head, loaded.read.at_seq),
    ))
}
