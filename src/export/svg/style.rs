//! The picture's look: the thoughts' kinds ([`KINDS`], [`node_kind`]) and the stylesheet
//! every picture and page carries (the core's classes, then the kinds, links and classes
//! of every family of the [`Exports`] it is handed: [`Exports::pictures`]).
//!
//! Owns: constant CSS only. Must not: take a style, a class or a kind from content.

use crate::export::family::Exports;
use crate::export::mermaid::is_revision;
pub(crate) use crate::export::picture::{Glyph, NodeKind};
use crate::projection::tree::ThoughtNode;
use std::fmt::Write as _;

/// An anomaly's outline colour: red, over any kind's stroke ([`super::write_node`] draws
/// it as the node's own outline, so no kind's style can override it).
pub(crate) const ANOMALY_STROKE: &str = "#e03131";
/// An anomaly's outline width, in px.
pub(crate) const ANOMALY_STROKE_WIDTH: u32 = 3;

/// The kinds of thought the core draws (a family's thoughts may be drawn as one of its
/// own kinds through a [`Mark`]).
pub(crate) const KINDS: &[NodeKind] = &[
    NodeKind {
        name: "thought",
        marker: "💭",
        glyph: Glyph::Circle,
        style: "fill:#f8f9fa;stroke:#495057",
    },
    NodeKind {
        name: "revision",
        marker: "🔄",
        glyph: Glyph::Diamond,
        style: "fill:#fff4e6;stroke:#e8590c;stroke-dasharray:5 3",
    },
    NodeKind {
        name: "branch",
        marker: "🌿",
        glyph: Glyph::Triangle,
        style: "fill:#ebfbee;stroke:#2f9e44",
    },
    NodeKind {
        name: "think",
        marker: "🤔",
        glyph: Glyph::Hexagon,
        style: "fill:#e7f5ff;stroke:#1c7ed6",
    },
];

/// The kind of a thought: a revision on a branch is a revision; a node without a total is
/// a `think` thought.
pub(crate) fn node_kind(node: &ThoughtNode) -> &'static NodeKind {
    let name = if node.total_thoughts.is_none() {
        "think"
    } else if is_revision(node) {
        "revision"
    } else if node.branch_id.is_some() {
        "branch"
    } else {
        "thought"
    };
    KINDS
        .iter()
        .find(|kind| kind.name == name)
        .expect("every kind node_kind names is in KINDS")
}

/// The stylesheet of the picture: constant text (kinds, the kinds and links of the
/// families of `exports`, edges, anomalies, replay and filter classes), shared with the
/// HTML page.
pub(crate) fn stylesheet(exports: &Exports) -> String {
    let mut css = format!(
        ".node rect{{stroke-width:1.5}}\
         .node text{{font:12px sans-serif;fill:#212529}}\
         .node .head{{font-weight:bold}}\
         .node text.empty{{fill:#868e96;font-style:italic}}\
         .node .by{{fill:#1c7ed6}}\
         .anomaly rect{{stroke:{ANOMALY_STROKE};stroke-width:{ANOMALY_STROKE_WIDTH}}}\
         .edge{{fill:none;stroke:#495057;stroke-width:1.5}}\
         .e-revises{{stroke:#e8590c;stroke-dasharray:6 4}}\
         .e-branches_from{{stroke:#2f9e44}}\
         .lane,.heading{{font:bold 13px sans-serif;fill:#343a40}}\
         .sub{{font:12px sans-serif;fill:#868e96}}\
         .later,.was{{display:none}}\
         .dim{{opacity:.2}}",
    );
    for kind in KINDS {
        let _ = write!(css, ".k-{} rect{{{}}}", kind.name, kind.style);
        push_glyph_rule(&mut css, kind);
    }
    for hooks in exports.pictures() {
        for kind in hooks.kinds {
            let _ = write!(css, ".k-{} rect{{{}}}", kind.name, kind.style);
            push_glyph_rule(&mut css, kind);
        }
        for link in hooks.links {
            let _ = write!(css, ".e-{}{{{}}}", link.name, link.style);
        }
        css.push_str(hooks.css);
    }
    css
}

/// The fill of a kind's glyph: its box's stroke colour (its style's `stroke:`), so the
/// glyph and the box read as one kind.
fn push_glyph_rule(css: &mut String, kind: &NodeKind) {
    let stroke = kind
        .style
        .split(';')
        .find_map(|declaration| declaration.strip_prefix("stroke:"));
    if let Some(colour) = stroke {
        let _ = write!(css, ".k-{} .glyph{{fill:{colour}}}", kind.name);
    }
}
