//! MCP Apps (SEP-1865, the extension `io.modelcontextprotocol/ui`): the session drawn
//! inside the client, beside the tool call that recorded it.
//!
//! Owns: whether a client declared the extension ([`declared`]: its capabilities, from
//! `initialize` or, under 2026-07-28, from the request's own), the one app resource
//! ([`APP_URI`]: [`page`], a self-contained document around the `ui`'s content, drawn by
//! [`crate::export::html::content_into`] and [`crate::export::svg`] — one drawing code),
//! the `_meta.ui` links on the tools whose answer is a session's state ([`app_tools`]),
//! and the app-only tool [`DRAW_TOOL`] the app calls through the host ([`call_draw`]:
//! the session's content at its head or at a seq, and a bounded wait for the next
//! commit, which keeps an open app live).
//!
//! Must not: change anything a client that did not declare the extension receives
//! (`tools/list`, `resources/list`, every answer and error stay byte for byte as they
//! are without this module); write to the ledger; put ledger text anywhere but through
//! the export's escaping; or give the app anything to load (its document references no
//! URL and works under the host's default policy, which forbids every connection).

mod page;

use crate::export::family::Exports;
use crate::query;
use crate::store::{Ledger, StoreError};
use crate::tools::args::{Args, MAX_ID_BYTES, count_schema, finish};
use crate::tools::export::REPLAY_SESSION;
use crate::tools::ledger::GET_HISTORY;
use crate::tools::{ToolError, reading_annotations, structured_result, tool_definition};
use rmcp::model::{
    CallToolResult, ClientCapabilities, ContentBlock as Content, MetaObject, ReadResourceResult,
    Resource, ResourceContents, Tool,
};
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};

/// The extension's identifier, the key of `capabilities.extensions` (SEP-1724).
pub(crate) const EXTENSION_ID: &str = "io.modelcontextprotocol/ui";

/// The app's MIME type: a client must list it in the extension's `mimeTypes` to get the
/// app.
pub(crate) const MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The one app resource: a session drawn live.
pub(crate) const APP_URI: &str = "ui://reasoning-ledger/session.html";

/// The app resource's name in `resources/list`.
const APP_NAME: &str = "session-app";

/// The app-only tool: what a result does not carry (the whole session after a restart,
/// the picture at a seq, the next commit), for the app to ask through the host. Listed
/// with `_meta.ui.visibility: ["app"]`, so hosts keep it from the model.
pub(crate) const DRAW_TOOL: &str = "draw_session";

/// Longest a [`DRAW_TOOL`] call with `afterSeq` waits for the session to move past it:
/// well under the tool-call timeouts hosts use, so an open app polls about this often
/// when nothing happens.
pub(crate) const DRAW_WAIT: Duration = Duration::from_secs(20);

/// Why a draw failed (the answer's error text; nothing is ever written).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AppsError {
    /// Reading the ledger failed.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The blocking read could not run.
    #[error("the read of the session did not finish: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl From<AppsError> for ToolError {
    fn from(error: AppsError) -> Self {
        match error {
            AppsError::Store(error) => ToolError::Store(error),
            AppsError::Join(error) => ToolError::Store(StoreError::JobPanicked(error.to_string())),
        }
    }
}

/// Whether `capabilities` declare the extension with [`MIME_TYPE`]
/// (`extensions["io.modelcontextprotocol/ui"].mimeTypes`).
pub(crate) fn declared(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities
        .and_then(|capabilities| capabilities.extensions.as_ref())
        .and_then(|extensions| extensions.get(EXTENSION_ID))
        .and_then(|settings| settings.get("mimeTypes"))
        .and_then(Value::as_array)
        .is_some_and(|types| types.iter().any(|t| t.as_str() == Some(MIME_TYPE)))
}

/// Whether tool `tool`'s answer is a session's state, drawn by the app: every tool that
/// records (not read-only), `get_history` and `replay_session`.
fn linked(tool: &Tool) -> bool {
    let read_only = tool
        .annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false);
    !read_only || tool.name == GET_HISTORY || tool.name == REPLAY_SESSION
}

/// `_meta` naming the app, with `visibility` when given.
fn ui_meta(visibility: Option<&[&str]>) -> MetaObject {
    let mut ui = json!({"resourceUri": APP_URI});
    if let Some(visibility) = visibility {
        ui["visibility"] = json!(visibility);
    }
    let mut meta = Map::new();
    meta.insert("ui".into(), ui);
    MetaObject(meta)
}

/// The tools as a client that declared the extension gets them: `tools` in their order,
/// each [`linked`] one naming the app in `_meta.ui.resourceUri`, then [`DRAW_TOOL`]
/// (visible to the app only).
pub(crate) fn app_tools(tools: &[Tool]) -> Vec<Tool> {
    let mut listed: Vec<Tool> = tools
        .iter()
        .cloned()
        .map(|mut tool| {
            if linked(&tool) {
                tool.meta = Some(ui_meta(None));
            }
            tool
        })
        .collect();
    listed.push(draw_tool());
    listed
}

/// [`DRAW_TOOL`]'s definition.
fn draw_tool() -> Tool {
    let mut tool = tool_definition(
        DRAW_TOOL,
        None,
        "The session drawn for the reasoning-ledger app (HTML of its picture and events), \
         at atSeq if given; with afterSeq, waits (up to 20 s) for an event after it.",
        json!({"type": "object", "properties": {
            "sessionId": {"type": "string"},
            "atSeq": count_schema(),
            "afterSeq": {"type": "integer", "minimum": 0}
        }, "required": ["sessionId"]}),
        None,
        reading_annotations(),
    );
    tool.meta = Some(ui_meta(Some(&["app"])));
    tool
}

/// The app resource as `resources/list` shows it to a client that declared the extension.
pub(crate) fn resource() -> Resource {
    Resource::new(APP_URI, APP_NAME)
        .with_description("The session drawn live where you chat (MCP Apps)")
        .with_mime_type(MIME_TYPE)
}

/// The answer to `resources/read` of `uri` when it is the app resource, for a client
/// that declared the extension; `None` otherwise (the server answers as without it). The
/// document's stylesheet holds the kinds of `exports` (the served ledger's families'),
/// so every read of one server answers the same bytes.
pub(crate) fn read(
    uri: &str,
    capabilities: Option<&ClientCapabilities>,
    exports: &Exports,
) -> Option<ReadResourceResult> {
    if uri != APP_URI || !declared(capabilities) {
        return None;
    }
    let mut ui = Map::new();
    ui.insert("ui".into(), json!({"prefersBorder": true}));
    Some(ReadResourceResult::new(vec![
        ResourceContents::text(page::document(exports), APP_URI)
            .with_mime_type(MIME_TYPE)
            .with_meta(MetaObject(ui)),
    ]))
}

/// Whether a call of `name` is the app's, from a client that declared the extension.
pub(crate) fn offered(name: &str, capabilities: Option<&ClientCapabilities>) -> bool {
    name == DRAW_TOOL && declared(capabilities)
}

/// What a [`DRAW_TOOL`] call asks.
struct Draw {
    session: String,
    at_seq: Option<u64>,
    after_seq: Option<u64>,
}

fn parse(raw: &Map<String, Value>) -> Result<Draw, ToolError> {
    let mut args = Args::new(raw);
    let session = args.string_limited(&["sessionId"], true, MAX_ID_BYTES);
    let at_seq = args.integer(&["atSeq"], false, 1);
    let after_seq = args.integer(&["afterSeq"], false, 0);
    finish(DRAW_TOOL, args)?;
    Ok(Draw {
        session: session.expect("checked"),
        at_seq,
        after_seq,
    })
}

/// Runs a [`DRAW_TOOL`] call: the session's content (`structuredContent.html`, the
/// `ui`'s content of the session: header, replay slider, picture, events), its title
/// and last seq. With `afterSeq`, first waits up to [`DRAW_WAIT`] for the session to
/// move past it; still at it then, the answer says `unchanged` and carries no HTML.
pub(crate) async fn call_draw(ledger: Ledger, raw: Map<String, Value>) -> CallToolResult {
    let outcome = async {
        let draw = parse(&raw)?;
        Ok::<_, ToolError>(draw_waiting(ledger, draw).await?)
    };
    outcome.await.unwrap_or_else(ToolError::into_result)
}

async fn draw_waiting(ledger: Ledger, draw: Draw) -> Result<CallToolResult, AppsError> {
    let deadline = Instant::now() + DRAW_WAIT;
    loop {
        // The watch starts before the head is read: no commit between them is missed.
        let reader = ledger.clone();
        let from = tokio::task::spawn_blocking(move || reader.last_position()).await??;
        let mut watch = ledger.watch(from + 1);
        let reader = ledger.clone();
        let id = draw.session.clone();
        let head = tokio::task::spawn_blocking(move || query::find_session(&reader, &id)).await??;
        let Some(head) = head else {
            return Ok(ToolError::validation(
                DRAW_TOOL,
                vec![format!("sessionId: no session {:?}", draw.session)],
            )
            .into_result());
        };
        let waiting = draw.after_seq.is_some_and(|after| head.seq <= after);
        let left = deadline.saturating_duration_since(Instant::now());
        if !waiting {
            let reader = ledger.clone();
            let at_seq = draw.at_seq;
            let id = draw.session.clone();
            return tokio::task::spawn_blocking(move || {
                let tree = query::load_tree(&reader, &head, at_seq)?;
                let exports = Exports::of_families(reader.families());
                let mut html = String::new();
                crate::export::html::content_into(&mut html, &tree, false, &exports);
                Ok(drawn(json!({
                    "sessionId": id,
                    "title": tree.title(),
                    "lastSeq": head.seq,
                    "atSeq": tree.at_seq,
                    "html": html,
                })))
            })
            .await?;
        }
        if left.is_zero() {
            return Ok(drawn(json!({
                "sessionId": draw.session,
                "lastSeq": head.seq,
                "unchanged": true,
            })));
        }
        let _ = tokio::time::timeout(left, watch.next()).await;
    }
}

/// A draw's answer: a short text for the model's side, the drawing in structured content.
fn drawn(value: Value) -> CallToolResult {
    let text = match (&value["unchanged"], &value["atSeq"]) {
        (Value::Bool(true), _) => format!(
            "session {} unchanged at seq {}",
            value["sessionId"].as_str().unwrap_or_default(),
            value["lastSeq"]
        ),
        (_, at) => format!(
            "session {} drawn at seq {at} of {}",
            value["sessionId"].as_str().unwrap_or_default(),
            value["lastSeq"]
        ),
    };
    let mut result = structured_result(value);
    result.content = vec![Content::text(text)];
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ExtensionCapabilities;

    fn with_extension(settings: Value) -> ClientCapabilities {
        let mut extensions = ExtensionCapabilities::new();
        extensions.insert(
            EXTENSION_ID.to_string(),
            serde_json::from_value(settings).unwrap(),
        );
        let mut capabilities = ClientCapabilities::default();
        capabilities.extensions = Some(extensions);
        capabilities
    }

    #[test]
    fn only_the_extension_with_the_mime_type_is_declared() {
        assert!(declared(Some(&with_extension(
            json!({"mimeTypes": ["text/plain", MIME_TYPE]})
        ))));
        assert!(!declared(Some(&with_extension(
            json!({"mimeTypes": ["text/html"]})
        ))));
        assert!(!declared(Some(&with_extension(json!({})))));
        assert!(!declared(Some(&ClientCapabilities::default())));
        assert!(!declared(None));
        assert!(read(APP_URI, None, &crate::tools::exports()).is_none());
        assert!(!offered(DRAW_TOOL, None));
    }

    #[test]
    fn app_tools_link_the_recording_tools_and_add_the_app_only_tool() {
        let tools: Vec<Tool> = crate::tools::Toolset::available()
            .into_iter()
            .flat_map(|set| set.tools())
            .collect();
        let listed = app_tools(&tools);
        assert_eq!(listed.len(), tools.len() + 1);
        let meta = |name: &str| {
            let tool = listed.iter().find(|t| t.name == name).unwrap();
            serde_json::to_value(&tool.meta).unwrap()
        };
        for name in [
            "sequentialthinking",
            "think",
            "deep_planning",
            GET_HISTORY,
            REPLAY_SESSION,
        ] {
            assert_eq!(
                meta(name),
                json!({"ui": {"resourceUri": APP_URI}}),
                "{name}"
            );
        }
        assert_eq!(meta("list_sessions"), Value::Null);
        assert_eq!(
            meta(DRAW_TOOL),
            json!({"ui": {"resourceUri": APP_URI, "visibility": ["app"]}})
        );
        // The tools as listed to everyone else are untouched.
        assert!(tools.iter().all(|tool| tool.meta.is_none()));
    }
}
