//! The agent projection: a session's branch nodes (`create_branch`) as folded from the
//! agent family's events, each with its parent (the trunk or an earlier node).
//!
//! Owns: [`AgentNode`] (also the body of `branch_node_created` as written) and
//! [`CallType`]. Must not: do I/O, or know how an event is stored.

use serde::{Deserialize, Serialize};

/// The parent of a node hanging off the session's trunk.
pub const TRUNK: &str = "trunk";

/// What a branch is for; decides the sampling strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallType {
    DrillDown,
    Verify,
    Explore,
    Stash,
}

impl CallType {
    pub fn as_str(self) -> &'static str {
        match self {
            CallType::DrillDown => "drill_down",
            CallType::Verify => "verify",
            CallType::Explore => "explore",
            CallType::Stash => "stash",
        }
    }

    /// The named type; anything else falls back to drill_down (the original's rule).
    pub fn parse_or_default(text: &str) -> Self {
        match text.trim().to_ascii_lowercase().as_str() {
            "verify" => CallType::Verify,
            "explore" => CallType::Explore,
            "stash" => CallType::Stash,
            _ => CallType::DrillDown,
        }
    }
}

/// One branch node: the sub-question, the model's full answer and what was read from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentNode {
    /// "n_" + 8 hex digits.
    pub node_id: String,
    /// [`TRUNK`] or an earlier node of the session.
    pub parent_node_id: String,
    pub call_type: CallType,
    pub input_text: String,
    /// The model's full output (`get_branch_details`' `raw_process`).
    pub raw_process: String,
    pub conclusion: String,
    /// 0–1, as the model stated it; `None` when it gave none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// The model that answered.
    pub model: String,
}

/// A node as folded: with the seq and time of the event that recorded it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FoldedNode {
    pub seq: u64,
    #[serde(skip)]
    pub at: u64,
    #[serde(flatten)]
    pub node: AgentNode,
}
