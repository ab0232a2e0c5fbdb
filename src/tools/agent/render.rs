//! An agent session's branch nodes in the Mermaid and Markdown exports.
//!
//! Owns: [`agent_edges`], [`write_agent_nodes`] (the trunk `r0` and one node `g<n>` per
//! branch node, each linked from its parent, labelled with call type, confidence and
//! conclusion), [`session_markdown`] and [`RENDER`] (registered as the family's `render`). Every model-written text goes through the
//! Mermaid label escaper or the Markdown escaper, so any model output keeps the diagram
//! and the document valid. Must not: read the store.

use crate::event::summary::SessionSummary;
use crate::export::family::{FamilyRender, PromptResume};
use crate::export::markdown::escape_inline;
use crate::export::mermaid::escape_label;
use crate::export::{Ellipsis, truncate};
use crate::projection::tree::ThoughtTree;
use crate::tools::agent::node::{AgentNodes, TRUNK};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write as _;

const INDENT: &str = "    ";

/// Mermaid id of the trunk (thought ids are `t<seq>`, so not `t0`).
pub(crate) const TRUNK_ID: &str = "r0";

/// Characters of a conclusion or title shown in a node label.
pub(crate) const AGENT_LABEL_MAX_CHARS: usize = 80;

pub(crate) const AGENT_CLASS_DEFS: [(&str, &str); 3] = [
    ("trunk", "fill:#e7f5ff,stroke:#1c7ed6,color:#1864ab"),
    ("node", "fill:#f3f0ff,stroke:#7048e8,color:#5f3dc4"),
    ("lowconf", "fill:#fff4e6,stroke:#f76707,color:#d9480f"),
];

/// Whitespace collapsed, then cut to [`AGENT_LABEL_MAX_CHARS`] (the ellipsis after).
fn cut(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate(&flat, AGENT_LABEL_MAX_CHARS, Ellipsis::After)
}

/// The agent family's pieces of a session's Markdown and Mermaid.
pub(crate) struct AgentRender;

/// The one instance, registered with the family.
pub(crate) static RENDER: AgentRender = AgentRender;

impl FamilyRender for AgentRender {
    fn markdown_sections(&self, tree: &ThoughtTree, out: &mut String) {
        out.push_str(&session_markdown(tree));
    }

    fn mermaid_edges(&self, tree: &ThoughtTree) -> usize {
        agent_edges(tree)
    }

    /// An agent session: its trunk and branch nodes (`r0`, `g<n>`).
    fn mermaid_nodes(&self, tree: &ThoughtTree, out: &mut String) -> bool {
        if !has_agent_tree(tree) {
            return false;
        }
        write_agent_nodes(out, tree);
        true
    }

    fn mermaid_classes(&self) -> &'static [(&'static str, &'static str)] {
        &AGENT_CLASS_DEFS
    }

    fn prompt_state(&self, tree: &ThoughtTree, last: usize) -> Option<(&'static str, Value)> {
        super::prompt::nodes(tree, last).map(|nodes| ("agentNodes", nodes))
    }

    fn prompt_resume(
        &self,
        tree: &ThoughtTree,
        summary: &SessionSummary,
        session: &str,
    ) -> Option<PromptResume> {
        super::prompt::resume(tree, summary, session)
    }

    fn prompt_review(&self, tree: &ThoughtTree) -> Option<(&'static str, Value)> {
        super::prompt::confidences(tree).map(|rows| ("nodeConfidences", rows))
    }
}

/// Edges [`write_agent_nodes`] draws: one per node (from its parent).
pub(crate) fn agent_edges(tree: &ThoughtTree) -> usize {
    AgentNodes::of(tree).len()
}

/// Whether the session has an agent tree to draw.
pub(crate) fn has_agent_tree(tree: &ThoughtTree) -> bool {
    tree.kind() == Some(crate::event::SessionKind::AGENT) || !AgentNodes::of(tree).is_empty()
}

/// The trunk, the nodes and their edges.
pub(crate) fn write_agent_nodes(out: &mut String, tree: &ThoughtTree) {
    for (class, style) in AGENT_CLASS_DEFS {
        let _ = writeln!(out, "{INDENT}classDef {class} {style}");
    }
    let _ = writeln!(
        out,
        "{INDENT}{TRUNK_ID}[\"🌳 {}\"]:::trunk",
        escape_label(&cut(&format!("{TRUNK} · {}", tree.title())))
    );
    let mut ids: HashMap<&str, String> = HashMap::new();
    for (i, folded) in AgentNodes::of(tree).iter().enumerate() {
        let node = &folded.node;
        let confidence = node.confidence.map_or("confidence —".to_string(), |c| {
            format!("confidence {c:.2}")
        });
        let label = format!(
            "{} · {} · {}",
            cut(&node.node_id),
            node.call_type.as_str(),
            confidence
        );
        let class = if node
            .confidence
            .is_some_and(|c| c < crate::tools::agent::read::LOW_CONFIDENCE)
        {
            "lowconf"
        } else {
            "node"
        };
        let id = format!("g{}", i + 1);
        let _ = writeln!(
            out,
            "{INDENT}{id}[\"{}<br/>{}\"]:::{class}",
            escape_label(&label),
            escape_label(&cut(&node.conclusion))
        );
        // A parent the fold has not seen (only a crafted log) hangs off the trunk.
        let parent = ids
            .get(node.parent_node_id.as_str())
            .cloned()
            .unwrap_or_else(|| TRUNK_ID.to_string());
        let _ = writeln!(out, "{INDENT}{parent} --> {id}");
        ids.entry(node.node_id.as_str()).or_insert(id);
    }
}

/// What a session's Markdown export adds: its branch nodes (empty when it has none).
pub(crate) fn session_markdown(tree: &ThoughtTree) -> String {
    let mut out = String::new();
    if !AgentNodes::of(tree).is_empty() {
        out.push_str("## Branch nodes\n\n");
        for folded in AgentNodes::of(tree) {
            let node = &folded.node;
            let _ = writeln!(
                out,
                "### {} ({}, from {})\n",
                escape_inline(&node.node_id),
                node.call_type.as_str(),
                escape_inline(&node.parent_node_id)
            );
            let _ = writeln!(out, "- **Question:** {}", escape_inline(&node.input_text));
            let _ = writeln!(out, "- **Conclusion:** {}", escape_inline(&node.conclusion));
            let _ = writeln!(
                out,
                "- **Confidence:** {}",
                node.confidence
                    .map_or("not stated".to_string(), |c| format!("{c:.2}"))
            );
            let _ = writeln!(out, "- **Model:** {}\n", escape_inline(&node.model));
        }
    }
    out
}
