//! The tool families, one module each, and what they share.
//!
//! Owns: [`Toolset`] selection, [`ToolContext`] (the ledger handle and the process's
//! current sessions), [`ToolError`] and how each error reaches the model. Each family
//! module owns its tools' definitions (schema, description, annotations), argument
//! parsing, a pure `decide`, and the job it hands to the store. Must not: write stdout,
//! open redb tables, or answer before the store acknowledged the events.

pub mod args;
pub mod ledger;
pub mod thinking;

use crate::event::SessionId;
use crate::store::{AppendError, Ledger, StoreError};
use rmcp::model::{CallToolResult, ContentBlock as Content, Tool};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

/// A family of tools that can be switched on as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Toolset {
    /// sequentialthinking (alias sequential_thinking) and think.
    Thinking,
    /// list_sessions, get_history, search_history, export_session, replay_session.
    Ledger,
}

impl Toolset {
    /// Every toolset this build provides.
    pub const AVAILABLE: [Toolset; 2] = [Toolset::Thinking, Toolset::Ledger];

    /// Toolsets on when nothing is chosen: both fit in the context budget of DESIGN §5
    /// (3 × the reference server's `tools/list`), measured by a test.
    pub const DEFAULT: [Toolset; 2] = [Toolset::Thinking, Toolset::Ledger];

    /// Families DESIGN names that this build does not have yet.
    pub const PLANNED: [&'static str; 4] = ["qa", "planning", "agent", "booster"];

    pub fn as_str(self) -> &'static str {
        match self {
            Toolset::Thinking => "thinking",
            Toolset::Ledger => "ledger",
        }
    }

    /// The tools this set lists.
    pub fn tools(self) -> Vec<Tool> {
        match self {
            Toolset::Thinking => thinking::tools(),
            Toolset::Ledger => ledger::tools(),
        }
    }

    /// Parses `a,b` (or `all`) into a sorted, de-duplicated list.
    pub fn parse_list(text: &str) -> Result<Vec<Toolset>, String> {
        let mut out = Vec::new();
        for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if name.eq_ignore_ascii_case("all") {
                out.extend(Toolset::AVAILABLE);
            } else {
                out.push(name.parse()?);
            }
        }
        if out.is_empty() {
            return Err("no toolset named: use thinking, ledger or all".into());
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

impl fmt::Display for Toolset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Toolset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        if let Some(found) = Toolset::AVAILABLE.into_iter().find(|t| t.as_str() == lower) {
            return Ok(found);
        }
        if Toolset::PLANNED.contains(&lower.as_str()) {
            return Err(format!(
                "toolset {lower:?} is not in this build yet; available: thinking, ledger, all"
            ));
        }
        Err(format!(
            "unknown toolset {s:?}; available: thinking, ledger, all"
        ))
    }
}

/// The sessions a process continues when a call names none.
#[derive(Debug, Default)]
pub struct CurrentSessions {
    /// The sequentialthinking session.
    pub thinking: Option<SessionId>,
    /// The think thread and its purpose.
    pub think: Option<(SessionId, String)>,
}

/// What every tool call can reach.
pub struct ToolContext {
    pub ledger: Ledger,
    /// Updated inside write jobs (on the writer thread, in commit order).
    pub current: Arc<Mutex<CurrentSessions>>,
    /// Draw the stderr box for each thought (off with DISABLE_THOUGHT_LOGGING=true).
    pub log_thoughts: bool,
}

/// Why a tool call failed, and how the model is told.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Arguments the model can fix: the reference server's validation text.
    #[error("Input validation error: Invalid arguments for tool {tool}: {}", problems.join(", "))]
    Validation { tool: String, problems: Vec<String> },
    /// A storage failure: nothing was recorded.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The store refused the events: nothing was recorded.
    #[error("{0}")]
    Append(#[from] AppendError),
    /// The tool panicked: nothing was recorded.
    #[error("internal error in tool {tool}: {message}")]
    Panicked { tool: String, message: String },
}

impl ToolError {
    pub fn validation(tool: &str, problems: Vec<String>) -> Self {
        ToolError::Validation {
            tool: tool.to_string(),
            problems,
        }
    }

    /// The tool result the model sees: `isError: true`, no structured content.
    pub fn into_result(self) -> CallToolResult {
        let text = match &self {
            ToolError::Validation { .. } => self.to_string(),
            _ => serde_json::to_string_pretty(&serde_json::json!({
                "error": self.to_string(),
                "status": "failed",
            }))
            .expect("json"),
        };
        CallToolResult::error(vec![Content::text(text)])
    }
}

/// A successful answer: pretty JSON text plus the same object as structured content.
pub fn structured_result(value: Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(&value).expect("json");
    let mut result = CallToolResult::success(vec![Content::text(text)]);
    result.structured_content = Some(value);
    result
}

/// Builds a tool definition from JSON schemas.
pub fn tool_definition(
    name: &'static str,
    title: &'static str,
    description: &'static str,
    input_schema: Value,
    output_schema: Option<Value>,
    annotations: rmcp::model::ToolAnnotations,
) -> Tool {
    let Value::Object(input) = input_schema else {
        panic!("input schema of {name} must be an object");
    };
    let mut tool = Tool::new(name, description, Arc::new(input))
        .with_title(title)
        .with_annotations(annotations);
    if let Some(Value::Object(output)) = output_schema {
        tool = tool.with_raw_output_schema(Arc::new(output));
    }
    tool
}

/// Annotations of a tool that appends to the ledger: not read-only, not idempotent (a
/// repeated call records a second event), not destructive, closed world.
pub fn writing_annotations(title: &str) -> rmcp::model::ToolAnnotations {
    rmcp::model::ToolAnnotations::with_title(title)
        .read_only(false)
        .destructive(false)
        .idempotent(false)
        .open_world(false)
}

/// Annotations of a tool that only reads the ledger.
pub fn reading_annotations(title: &str) -> rmcp::model::ToolAnnotations {
    rmcp::model::ToolAnnotations::with_title(title)
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}
