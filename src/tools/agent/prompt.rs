//! The agent family's pieces of the MCP prompts (`crate::prompts`): its last branch
//! nodes for `continue`, the `create_branch` call that resumes it, its nodes'
//! confidences for `review`.
//!
//! Owns: [`nodes`], [`resume`], [`confidences`], reached through the family's renderer
//! ([`super::render::RENDER`]). Must not: read the store.

use super::ALIAS_PREFIX;
use super::node::AgentNodes;
use crate::event::summary::SessionSummary;
use crate::export::family::PromptResume;
use crate::projection::tree::ThoughtTree;
use serde_json::{Value, json};

/// The last `last` branch nodes (`None`: the session has none).
pub(crate) fn nodes(tree: &ThoughtTree, last: usize) -> Option<Value> {
    let all = AgentNodes::of(tree);
    if all.is_empty() {
        return None;
    }
    let skip = all.len().saturating_sub(last);
    let nodes: Vec<Value> = all[skip..]
        .iter()
        .map(|n| {
            json!({
                "seq": n.seq,
                "nodeId": n.node.node_id,
                "parentNodeId": n.node.parent_node_id,
                "inputText": n.node.input_text,
                "conclusion": n.node.conclusion,
                "confidence": n.node.confidence,
            })
        })
        .collect();
    Some(json!(nodes))
}

/// The next `create_branch`, under the caller's session id (the `agent:` alias).
pub(crate) fn resume(
    tree: &ThoughtTree,
    summary: &SessionSummary,
    session: &str,
) -> Option<PromptResume> {
    if AgentNodes::of(tree).is_empty() {
        return None;
    }
    let caller = summary
        .aliases
        .iter()
        .find_map(|a| a.strip_prefix(ALIAS_PREFIX))
        .unwrap_or(session);
    Some(PromptResume {
        tool: "create_branch",
        arguments: json!({"session_id": caller}),
        fill: &["input_text (the next self-contained sub-question)"],
        note: None,
    })
}

/// Every branch node's confidence (`None`: the session has none).
pub(crate) fn confidences(tree: &ThoughtTree) -> Option<Value> {
    let all = AgentNodes::of(tree);
    if all.is_empty() {
        return None;
    }
    let nodes: Vec<Value> = all
        .iter()
        .map(|n| json!({"seq": n.seq, "nodeId": n.node.node_id, "confidence": n.node.confidence}))
        .collect();
    Some(json!(nodes))
}
