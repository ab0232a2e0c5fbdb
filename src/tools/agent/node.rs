//! The agent projection: a session's branch nodes (`create_branch`) as folded from the
//! agent family's events, each with its parent (the trunk or an earlier node).
//!
//! Owns: [`AgentNode`] (also the body of `branch_node_created` as written),
//! [`CallType`], [`AgentNodes`] (the family's state in the tree) and [`AgentSummary`] (its
//! field of the session summary). Must not: do I/O, or know how an event is stored.

use crate::event::summary::SessionSummary;
use crate::event::summary::SummaryPart;
use crate::projection::family::FamilyState;
use crate::projection::tree::ThoughtTree;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The family's name, as its codec and its parts of the projections give it.
pub(crate) const FAMILY: &str = "agent";

/// The parent of a node hanging off the session's trunk.
pub(crate) const TRUNK: &str = "trunk";

/// What a branch is for; decides the sampling strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CallType {
    DrillDown,
    Verify,
    Explore,
    Stash,
}

impl CallType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CallType::DrillDown => "drill_down",
            CallType::Verify => "verify",
            CallType::Explore => "explore",
            CallType::Stash => "stash",
        }
    }

    /// The named type; anything else falls back to drill_down (the original's rule).
    pub(crate) fn parse_or_default(text: &str) -> Self {
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
pub(crate) struct AgentNode {
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
pub(crate) struct FoldedNode {
    pub seq: u64,
    #[serde(skip)]
    pub at: u64,
    #[serde(flatten)]
    pub node: AgentNode,
}

/// Branch nodes of an agent session, in seq order: the family's state in the tree.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct AgentNodes(pub Vec<FoldedNode>);

impl AgentNodes {
    /// The branch nodes of `tree` (none when it has none).
    pub(crate) fn of(tree: &ThoughtTree) -> &[FoldedNode] {
        tree.family::<AgentNodes>().map_or(&[], |nodes| &nodes.0)
    }
}

impl FamilyState for AgentNodes {
    fn family(&self) -> &'static str {
        FAMILY
    }

    fn json(&self) -> Option<(&'static str, Value)> {
        (!self.0.is_empty()).then(|| {
            (
                "agentNodes",
                serde_json::to_value(&self.0).expect("nodes serialize"),
            )
        })
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What the agent family keeps in a session's summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct AgentSummary {
    /// Branch nodes of an agent session (`create_branch`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub agent_nodes: u64,
}

/// The JSON keys of [`AgentSummary`].
pub(crate) const SUMMARY_KEYS: &[&str] = &["agent_nodes"];

impl AgentSummary {
    /// Branch nodes the session holds.
    pub(crate) fn nodes(summary: &SessionSummary) -> u64 {
        summary.part::<AgentSummary>().map_or(0, |p| p.agent_nodes)
    }
}

impl SummaryPart for AgentSummary {
    fn family(&self) -> &'static str {
        FAMILY
    }

    fn position(&self) -> u8 {
        3
    }

    fn list_row(&self, row: &mut Map<String, Value>) {
        if self.agent_nodes > 0 {
            row.insert("branchNodes".into(), json!(self.agent_nodes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head's summary as every earlier build wrote it (the provider's fields, then the
    /// agent's).
    const STORED: &str = r#"{"version":1,"kind":"agent","title":"t","created_at":1,"updated_at":2,"events":4,"thoughts":0,"branches":[],"closed":false,"model_calls":2,"prompt_tokens":10,"completion_tokens":5,"cost":0.25,"agent_nodes":1}"#;

    #[test]
    fn a_stored_summary_reads_back_and_is_written_byte_for_byte() {
        let summary: SessionSummary = crate::tools::families()
            .read_summary(serde_json::from_str(STORED).unwrap())
            .unwrap();
        assert_eq!(AgentSummary::nodes(&summary), 1);
        assert_eq!(serde_json::to_string(&summary).unwrap(), STORED);
        // A backend handing the fields back in another order reads the same summary,
        // written in the same order.
        let reordered = STORED
            .replace(r#","agent_nodes":1"#, "")
            .replace(r#""closed":false,"#, r#""closed":false,"agent_nodes":1,"#);
        let read: SessionSummary = crate::tools::families()
            .read_summary(serde_json::from_str(&reordered).unwrap())
            .unwrap();
        assert_eq!(read, summary);
        assert_eq!(serde_json::to_string(&read).unwrap(), STORED);
        let mut row = serde_json::json!({});
        summary.add_list_row_fields(&mut row);
        assert_eq!(
            row.to_string(),
            r#"{"modelCalls":2,"promptTokens":10,"completionTokens":5,"cost":0.25,"branchNodes":1}"#
        );
    }
}
