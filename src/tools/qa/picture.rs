//! What the qa family draws in a session's picture ([`crate::export::picture`]): beside
//! each verification step, a tools node with the tools the step used and the tools
//! recommended for the next one (a stand-in for a tool the caller lacks marked `⇄`), and
//! in the step's item of the page's list its workflow, target and tools.
//!
//! Owns: [`PICTURES`] (registered as the family's `picture`). Must not: change the
//! projection, or put text anywhere but in a [`Span`], a title or a detail (the renderers
//! escape them).

use crate::export::picture::{
    At, Glyph, LinkKind, Mark, Node, NodeKind, Picture, Pictures, Place, Span,
};
use crate::projection::tree::ThoughtTree;
use crate::tools::qa::node::QaNode;

/// The qa family's registration with the pictures.
pub(crate) static PICTURES: Pictures = Pictures {
    kinds: &[TOOLS],
    links: &[RECOMMENDS],
    draw,
    css: ".stand-in{fill:#c2255c;font-style:italic}",
};

const TOOLS: NodeKind = NodeKind {
    name: "qa-tools",
    marker: "🧰",
    glyph: Glyph::Square,
    style: "fill:#fff0f6;stroke:#c2255c",
};

const RECOMMENDS: LinkKind = LinkKind {
    name: "recommends",
    style: "stroke:#c2255c;stroke-dasharray:2 3",
};

/// A tool name, with what it stands in for.
fn recommended(qa: &QaNode, tool: &str) -> String {
    match qa.stand_ins.iter().find(|s| s.tool == tool) {
        Some(s) => format!("{tool} (stands in for {})", s.stands_in_for),
        None => tool.to_string(),
    }
}

fn draw(tree: &ThoughtTree, picture: &mut Picture) {
    for node in tree.thoughts() {
        let Some(qa) = node.data::<QaNode>() else {
            continue;
        };
        let used = if qa.used_tools.is_empty() {
            "none".to_string()
        } else {
            qa.used_tools.join(", ")
        };
        let next: Vec<String> = qa
            .recommended_tools
            .iter()
            .map(|tool| recommended(qa, tool))
            .collect();
        let next = if next.is_empty() {
            "none".to_string()
        } else {
            next.join(", ")
        };
        let mut details = vec![("workflow", qa.workflow.clone())];
        if let Some(target) = &qa.verification_target {
            details.push(("verification target", target.clone()));
        }
        details.push(("tools used", used.clone()));
        details.push(("recommended next", next.clone()));
        picture.mark(Mark {
            seq: node.seq,
            kind: None,
            head: Vec::new(),
            total: Vec::new(),
            details,
        });
        if qa.used_tools.is_empty() && qa.recommended_tools.is_empty() {
            continue;
        }
        let mut text = vec![Span::text("next:")];
        for (i, tool) in qa.recommended_tools.iter().enumerate() {
            let name = format!("{} {tool}", if i == 0 { "" } else { "," });
            if qa.stand_ins.iter().any(|s| &s.tool == tool) {
                text.push(Span::text(format!("{name}⇄")).with_class("stand-in"));
            } else {
                text.push(Span::text(name));
            }
        }
        if qa.recommended_tools.is_empty() {
            text.push(Span::text(" none"));
        }
        let tools = picture.add(Node {
            seq: node.seq,
            kind: &TOOLS,
            place: Place::Beside(At::Thought(node.seq)),
            head: vec![Span::text(format!("used: {used}"))],
            text,
            title: format!(
                "workflow {}\ntools used: {used}\nrecommended next: {next}",
                qa.workflow
            ),
            entry: None,
        });
        picture.link(At::Thought(node.seq), At::Node(tools), &RECOMMENDS);
    }
}
