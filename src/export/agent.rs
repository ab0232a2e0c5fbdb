//! An agent session's branch nodes in the Mermaid and Markdown exports, and the model
//! calls of any session in the Markdown export.
//!
//! Owns: [`agent_edges`], [`write_agent_nodes`] (the trunk `r0` and one node `g<n>` per
//! branch node, each linked from its parent, labelled with call type, confidence and
//! conclusion) and [`session_markdown`]. Every model-written text goes through the
//! Mermaid label escaper or the Markdown escaper, so any model output keeps the diagram
//! and the document valid. Must not: read the store.

use crate::export::markdown::escape_inline;
use crate::export::mermaid::escape_label;
use crate::projection::agent::TRUNK;
use crate::projection::tree::ThoughtTree;
use std::collections::HashMap;
use std::fmt::Write as _;

const INDENT: &str = "    ";

/// Mermaid id of the trunk (thought ids are `t<seq>`, so not `t0`).
pub const TRUNK_ID: &str = "r0";

/// Characters of a conclusion or title shown in a node label.
pub const AGENT_LABEL_MAX_CHARS: usize = 80;

pub(crate) const AGENT_CLASS_DEFS: [(&str, &str); 3] = [
    ("trunk", "fill:#e7f5ff,stroke:#1c7ed6,color:#1864ab"),
    ("node", "fill:#f3f0ff,stroke:#7048e8,color:#5f3dc4"),
    ("lowconf", "fill:#fff4e6,stroke:#f76707,color:#d9480f"),
];

fn cut(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = flat.chars().take(AGENT_LABEL_MAX_CHARS).collect();
    if out.len() < flat.len() {
        out.push('…');
    }
    out
}

/// Edges [`write_agent_nodes`] draws: one per node (from its parent).
pub fn agent_edges(tree: &ThoughtTree) -> usize {
    tree.agent_nodes.len()
}

/// Whether the session has an agent tree to draw.
pub fn has_agent_tree(tree: &ThoughtTree) -> bool {
    tree.kind() == Some(crate::event::SessionKind::AGENT) || !tree.agent_nodes.is_empty()
}

/// The trunk, the nodes and their edges.
pub fn write_agent_nodes(out: &mut String, tree: &ThoughtTree) {
    for (class, style) in AGENT_CLASS_DEFS {
        let _ = writeln!(out, "{INDENT}classDef {class} {style}");
    }
    let _ = writeln!(
        out,
        "{INDENT}{TRUNK_ID}[\"🌳 {}\"]:::trunk",
        escape_label(&cut(&format!("{TRUNK} · {}", tree.title())))
    );
    let mut ids: HashMap<&str, String> = HashMap::new();
    for (i, folded) in tree.agent_nodes.iter().enumerate() {
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

/// What a session's Markdown export adds: its branch nodes and its model calls (empty
/// when it has neither).
pub fn session_markdown(tree: &ThoughtTree) -> String {
    let mut out = String::new();
    if !tree.agent_nodes.is_empty() {
        out.push_str("## Branch nodes\n\n");
        for folded in &tree.agent_nodes {
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
    if !tree.model_calls.is_empty() {
        out.push_str("## Model calls\n\n");
        if let Some(summary) = &tree.summary {
            let _ = write!(
                out,
                "{} call{} · {} prompt + {} completion tokens",
                summary.model_calls,
                if summary.model_calls == 1 { "" } else { "s" },
                summary.prompt_tokens,
                summary.completion_tokens
            );
            if let Some(cost) = summary.cost {
                let _ = write!(out, " · cost {cost:.6}");
            }
            out.push_str("\n\n");
        }
        for call in &tree.model_calls {
            let r = &call.record;
            let outcome = match &r.error {
                None => "ok".to_string(),
                Some(e) => format!(
                    "{} / {}",
                    serde_json::to_value(e.error_type())
                        .expect("enum")
                        .as_str()
                        .unwrap_or(""),
                    serde_json::to_value(e.action())
                        .expect("enum")
                        .as_str()
                        .unwrap_or("")
                ),
            };
            let _ = write!(
                out,
                "- seq {} · {} · {} {} · {} · {} attempt{} · {} ms",
                call.seq,
                escape_inline(&call.tool),
                escape_inline(&r.provider),
                escape_inline(&r.model),
                outcome,
                r.attempts.len(),
                if r.attempts.len() == 1 { "" } else { "s" },
                r.latency_ms
            );
            if let Some(u) = &r.usage {
                let _ = write!(
                    out,
                    " · {} + {} tokens",
                    u.prompt_tokens, u.completion_tokens
                );
            }
            if let Some(cost) = r.cost {
                let _ = write!(out, " · cost {cost:.6}");
            }
            out.push('\n');
        }
        out.push('\n');
    }
    out
}
