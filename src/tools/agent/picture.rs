//! What the agent family draws in a session's picture ([`crate::export::picture`]): each
//! branch node in a lane of its own, linked from its parent node (a node under the trunk
//! starts the lane's tree), and each `chat_agent` call; every one listed on the page with
//! its question, conclusion, confidence and model.
//!
//! Owns: [`PICTURES`] (registered as the family's `picture`). Must not: change the
//! projection, or put text anywhere but in a [`Span`], a title or a detail (the renderers
//! escape them).

use crate::export::picture::{
    At, Entry, Glyph, LinkKind, Node, NodeId, NodeKind, Picture, Pictures, Place, Span,
};
use crate::projection::tree::ThoughtTree;
use crate::provider::record::ModelCalls;
use crate::tools::agent::node::{AgentNodes, TRUNK};
use std::collections::HashMap;

/// The agent family's registration with the pictures.
pub(crate) static PICTURES: Pictures = Pictures {
    kinds: &[BRANCH_NODE, CHAT],
    links: &[NESTS],
    draw,
    css: "",
};

const BRANCH_NODE: NodeKind = NodeKind {
    name: "agent-node",
    marker: "🌳",
    glyph: Glyph::Triangle,
    style: "fill:#f3f0ff;stroke:#7048e8",
};

const CHAT: NodeKind = NodeKind {
    name: "agent-chat",
    marker: "💬",
    glyph: Glyph::Circle,
    style: "fill:#e7f5ff;stroke:#1c7ed6",
};

const NESTS: LinkKind = LinkKind {
    name: "nests",
    style: "stroke:#7048e8",
};

/// The lane the branch nodes stand in.
const LANE: &str = "branch nodes";

fn confidence(value: Option<f64>) -> String {
    value.map_or("not stated".to_string(), |c| format!("{c:.2}"))
}

fn draw(tree: &ThoughtTree, picture: &mut Picture) {
    let mut ids: HashMap<&str, NodeId> = HashMap::new();
    for folded in AgentNodes::of(tree) {
        let node = &folded.node;
        let head = format!(
            "{} · {} · confidence {}",
            node.node_id,
            node.call_type.as_str(),
            confidence(node.confidence)
        );
        let id = picture.add(Node {
            seq: folded.seq,
            kind: &BRANCH_NODE,
            place: Place::Lane(LANE),
            head: vec![Span::text(head)],
            text: vec![Span::text(node.conclusion.clone())],
            title: format!("{}\n\n{}", node.input_text, node.conclusion),
            entry: Some(Entry {
                meta: format!(
                    "create_branch · {} · from {}",
                    node.call_type.as_str(),
                    node.parent_node_id
                ),
                text: node.input_text.clone(),
                details: vec![
                    ("conclusion", node.conclusion.clone()),
                    ("confidence", confidence(node.confidence)),
                    ("model", node.model.clone()),
                ],
            }),
        });
        if node.parent_node_id != TRUNK
            && let Some(parent) = ids.get(node.parent_node_id.as_str())
        {
            picture.link(At::Node(*parent), At::Node(id), &NESTS);
        }
        ids.entry(node.node_id.as_str()).or_insert(id);
    }
    for call in ModelCalls::of(tree)
        .iter()
        .filter(|c| c.tool == "chat_agent")
    {
        let record = &call.record;
        let (outcome, text) = match (&record.response, &record.error) {
            (Some(response), _) => ("ok".to_string(), response.content.clone()),
            (None, Some(error)) => ("failed".to_string(), error.to_string()),
            (None, None) => ("failed".to_string(), String::new()),
        };
        let question = record
            .request
            .messages
            .last()
            .map(|m| m.content.clone())
            .unwrap_or_default();
        picture.add(Node {
            seq: call.seq,
            kind: &CHAT,
            place: Place::Main,
            head: vec![Span::text(format!(
                "chat_agent · {} · {outcome}",
                record.model
            ))],
            text: vec![Span::text(text.clone())],
            title: format!("{question}\n\n{text}"),
            entry: Some(Entry {
                meta: format!("chat_agent · {} · {}", record.provider, outcome),
                text: question,
                details: vec![
                    ("answer", text),
                    ("attempts", record.attempts.len().to_string()),
                    ("latency", format!("{} ms", record.latency_ms)),
                ],
            }),
        });
    }
}
