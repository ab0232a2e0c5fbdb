//! SVG picture of a thought tree, laid out in Rust (no viewer needed).
//!
//! Owns: the layout (one row per thought in seq order, the main line in the first
//! column, each branch in a column beside it, reusing a column once its branches ended;
//! a layered layout of our own: `layout-rs` drew the main line crooked at revisions and
//! did not finish 1,000 thoughts in two minutes, this one is linear) and the
//! SVG text, with [`escape_xml`], the one escaper every piece of model-written text in it
//! goes through. Every node is a `<g class="node k-KIND" data-seq data-kind>`, every edge
//! a `<path class="edge e-KIND" data-edge data-from data-to data-seq>` (`data-seq` of an
//! edge: the event that made it, the later of its ends), so tests, the HTML replay
//! slider and users' scripts find them.
//!
//! Node kinds are keyed: [`node_kind`] classifies a node and [`KINDS`] styles each kind,
//! so another family's nodes get a row in that table and a case in `node_kind`.
//!
//! Must not: take an id, a class name, an attribute name or a style from content, put
//! model-written text anywhere but escaped inside `<text>`, `<title>` or a quoted
//! attribute, or add or drop a thought or an edge (tests compare the counts with the
//! projection's).

use crate::export::mermaid::{anomaly_seq, cut_into, is_revision};
use crate::projection::tree::{EdgeKind, ThoughtNode, ThoughtTree};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Width and height of a node box.
pub const NODE_W: u32 = 240;
pub const NODE_H: u32 = 46;
/// Distance between the left edges of two columns.
pub const COL_W: u32 = 290;
/// Distance between the tops of two rows.
pub const ROW_H: u32 = 66;
/// Room left of the first column for revision arcs.
const GUTTER: u32 = 70;
/// Room above the first row for the title and the column headings.
const TOP: u32 = 76;
const MARGIN: u32 = 16;

/// Most characters of thought text drawn in a node (the full text is in its `<title>`).
pub const TEXT_MAX_CHARS: usize = 34;
/// Most characters of thought text in a node's `<title>` tooltip.
pub const TITLE_MAX_CHARS: usize = 600;
/// Most characters of a branch id or a session title drawn.
const NAME_MAX_CHARS: usize = 30;
const SESSION_TITLE_MAX_CHARS: usize = 90;

/// A kind of node and its style (constant CSS, never content).
pub struct NodeKind {
    /// `data-kind` and the class `k-<name>`.
    pub name: &'static str,
    /// Marker drawn before the number.
    pub marker: &'static str,
    /// CSS declarations of its box.
    pub style: &'static str,
}

/// Every kind of node this build draws. Another family's nodes (plan approaches,
/// evaluations, agent nodes…) add a row here and a case in [`node_kind`].
pub const KINDS: &[NodeKind] = &[
    NodeKind {
        name: "thought",
        marker: "💭",
        style: "fill:#f8f9fa;stroke:#495057",
    },
    NodeKind {
        name: "revision",
        marker: "🔄",
        style: "fill:#fff4e6;stroke:#e8590c;stroke-dasharray:5 3",
    },
    NodeKind {
        name: "branch",
        marker: "🌿",
        style: "fill:#ebfbee;stroke:#2f9e44",
    },
    NodeKind {
        name: "think",
        marker: "🤔",
        style: "fill:#e7f5ff;stroke:#1c7ed6",
    },
];

/// The kind of a node: a revision on a branch is a revision; a node without a total is
/// a `think` thought.
pub fn node_kind(node: &ThoughtNode) -> &'static NodeKind {
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

/// The stylesheet of the picture: constant text (kinds, edges, anomalies, replay and
/// filter classes), shared with the HTML page.
pub fn stylesheet() -> String {
    let mut css = String::from(
        ".node rect{stroke-width:1.5}\
         .node text{font:12px sans-serif;fill:#212529}\
         .node .head{font-weight:bold}\
         .anomaly rect{stroke:#e03131;stroke-width:3}\
         .edge{fill:none;stroke:#495057;stroke-width:1.5}\
         .e-revises{stroke:#e8590c;stroke-dasharray:6 4}\
         .e-branches_from{stroke:#2f9e44}\
         .lane,.heading{font:bold 13px sans-serif;fill:#343a40}\
         .sub{font:12px sans-serif;fill:#868e96}\
         .later{display:none}\
         .dim{opacity:.2}",
    );
    for kind in KINDS {
        let _ = write!(css, ".k-{} rect{{{}}}", kind.name, kind.style);
    }
    css
}

/// How the picture is written.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Inside an HTML page: no XML declaration and no own stylesheet (the page carries
    /// it), and each node links to its thought (`#thought-<seq>`).
    pub embedded: bool,
}

/// Where each node stands: its column and its row.
struct Layout {
    columns: usize,
    /// Column of each node, by seq.
    column: HashMap<u64, usize>,
    /// Row of each node, by seq.
    row: HashMap<u64, usize>,
    /// Column and first row of each branch, in first-seen order.
    branch_column: Vec<usize>,
    branch_first_row: Vec<usize>,
}

/// One row per thought in seq order; column 0 for the main line; each branch, in
/// first-seen order, in the leftmost other column that is free from its first row to its
/// last (a column is reused once the branches in it have ended, so a long session with
/// many short branches stays a few columns wide).
fn layout(tree: &ThoughtTree) -> Layout {
    let branch_at: HashMap<&str, usize> = tree
        .branches
        .iter()
        .enumerate()
        .map(|(index, branch)| (branch.id.as_str(), index))
        .collect();
    // First and last row of each branch.
    let mut span: Vec<(usize, usize)> = vec![(usize::MAX, 0); tree.branches.len()];
    for (row, node) in tree.thoughts().enumerate() {
        if let Some(&at) = node.branch_id.as_deref().and_then(|id| branch_at.get(id)) {
            span[at].0 = span[at].0.min(row);
            span[at].1 = span[at].1.max(row);
        }
    }
    // Last row taken in each branch column (column 1 + i).
    let mut taken_until: Vec<usize> = Vec::new();
    let mut branch_column = Vec::with_capacity(span.len());
    for &(first, last) in &span {
        let free = taken_until.iter().position(|&until| until < first);
        let at = free.unwrap_or_else(|| {
            taken_until.push(0);
            taken_until.len() - 1
        });
        taken_until[at] = last;
        branch_column.push(at + 1);
    }
    let mut column = HashMap::with_capacity(tree.order.len());
    let mut row = HashMap::with_capacity(tree.order.len());
    for (index, node) in tree.thoughts().enumerate() {
        let col = node
            .branch_id
            .as_deref()
            .and_then(|id| branch_at.get(id))
            .map_or(0, |&at| branch_column[at]);
        column.insert(node.seq, col);
        row.insert(node.seq, index);
    }
    Layout {
        columns: 1 + taken_until.len(),
        column,
        row,
        branch_column,
        branch_first_row: span.iter().map(|&(first, _)| first).collect(),
    }
}

fn node_x(column: usize) -> u32 {
    MARGIN + GUTTER + column as u32 * COL_W
}

fn node_y(row: usize) -> u32 {
    TOP + row as u32 * ROW_H
}

/// Renders the tree as a standalone SVG document.
pub fn render(tree: &ThoughtTree) -> String {
    let mut out = String::new();
    render_into(&mut out, tree, Options::default());
    out
}

/// Appends the picture of `tree` to `out`.
pub fn render_into(out: &mut String, tree: &ThoughtTree, options: Options) {
    let layout = layout(tree);
    let edges = tree.edges();
    let rows = tree.order.len().max(1);
    let width = node_x(layout.columns) - COL_W + NODE_W + MARGIN;
    let width = width.max(560);
    let height = node_y(rows) + MARGIN;
    out.reserve(1024 + tree.order.len() * 700);
    if !options.embedded {
        out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    }
    // Generated values only: sizes, a ULID, an enum name and counts.
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"picture\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\" data-session=\"{}\" \
         data-kind-of-session=\"{}\" data-at-seq=\"{}\" data-thoughts=\"{}\" data-edges=\"{}\" \
         data-branches=\"{}\" data-anomalies=\"{}\">",
        tree.session,
        tree.kind().map_or("unknown", |kind| kind.as_str()),
        tree.at_seq,
        tree.order.len(),
        edges.len(),
        tree.branches.len(),
        tree.anomalies.len(),
    );
    if !options.embedded {
        let _ = writeln!(out, "<style>{}</style>", stylesheet());
    }
    out.push_str(
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" \
         markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
         <path d=\"M0 0L10 5L0 10z\" fill=\"#495057\"/></marker></defs>\n",
    );
    let mut scratch = String::new();
    out.push_str("<text class=\"heading\" x=\"16\" y=\"22\">");
    push_cut(out, &mut scratch, tree.title(), SESSION_TITLE_MAX_CHARS);
    out.push_str("</text>\n");
    let _ = writeln!(
        out,
        "<text class=\"sub\" x=\"16\" y=\"40\">{} · at event {} · {} thoughts · {} edges · {} \
         branches</text>",
        tree.kind().map_or("unknown", |kind| kind.as_str()),
        tree.at_seq,
        tree.order.len(),
        edges.len(),
        tree.branches.len(),
    );

    // Headings: the main line's above its column, each branch's above its first
    // thought (shown from that thought on).
    let _ = writeln!(
        out,
        "<text class=\"lane\" x=\"{}\" y=\"{}\">main line</text>",
        node_x(0),
        TOP - 12
    );
    for (index, branch) in tree.branches.iter().enumerate() {
        let first_row = layout.branch_first_row[index];
        if first_row == usize::MAX {
            continue;
        }
        let _ = write!(
            out,
            "<text class=\"lane\" data-seq=\"{}\" x=\"{}\" y=\"{}\">🌿 ",
            branch.first_seq,
            node_x(layout.branch_column[index]),
            node_y(first_row) - 5
        );
        push_cut(out, &mut scratch, &branch.id, NAME_MAX_CHARS);
        let _ = writeln!(out, " · from {}</text>", branch.from_thought);
    }

    if tree.order.is_empty() {
        let _ = writeln!(
            out,
            "<text class=\"sub\" x=\"{}\" y=\"{}\">This session has no thoughts yet.</text>",
            node_x(0),
            TOP + 20
        );
        out.push_str("</svg>\n");
        return;
    }

    // Edges first, so nodes are drawn over them.
    out.push_str("<g class=\"edges\">\n");
    for edge in &edges {
        let (Some(&from_col), Some(&from_row), Some(&to_col), Some(&to_row)) = (
            layout.column.get(&edge.from),
            layout.row.get(&edge.from),
            layout.column.get(&edge.to),
            layout.row.get(&edge.to),
        ) else {
            continue;
        };
        let (kind, d) = match edge.kind {
            EdgeKind::Next => ("next", down_path(from_col, from_row, to_col, to_row)),
            EdgeKind::BranchesFrom => (
                "branches_from",
                down_path(from_col, from_row, to_col, to_row),
            ),
            EdgeKind::Revises => ("revises", back_path(from_col, from_row, to_col, to_row)),
        };
        let _ = writeln!(
            out,
            "<path class=\"edge e-{kind}\" data-edge=\"{kind}\" data-from=\"{}\" data-to=\"{}\" \
             data-seq=\"{}\" d=\"{d}\" marker-end=\"url(#arrow)\"/>",
            edge.from,
            edge.to,
            edge.from.max(edge.to),
        );
    }
    out.push_str("</g>\n");

    let mut flagged: Vec<u64> = tree.anomalies.iter().filter_map(anomaly_seq).collect();
    flagged.sort_unstable();
    flagged.dedup();
    out.push_str("<g class=\"nodes\">\n");
    for node in tree.thoughts() {
        let (column, row) = (layout.column[&node.seq], layout.row[&node.seq]);
        let anomaly = flagged.binary_search(&node.seq).is_ok();
        write_node(out, &mut scratch, node, column, row, anomaly, options);
    }
    out.push_str("</g>\n</svg>\n");
}

/// An edge from an earlier row down to a later one: straight within a column, else a
/// curve between the facing sides of the two nodes that runs down the gap between
/// columns (never down a column, whose other nodes it would cross).
fn down_path(from_col: usize, from_row: usize, to_col: usize, to_row: usize) -> String {
    let (x1, y1) = (node_x(from_col), node_y(from_row));
    let (x2, y2) = (node_x(to_col), node_y(to_row));
    if from_col == to_col {
        let x = x1 + NODE_W / 2;
        format!("M{x} {}L{x} {}", y1 + NODE_H, y2)
    } else {
        let (sy, ey) = (y1 + NODE_H / 2, y2 + NODE_H / 2);
        let (sx, ex, gap) = if to_col > from_col {
            (x1 + NODE_W, x2, x1 + NODE_W + (COL_W - NODE_W) / 2)
        } else {
            (x1, x2 + NODE_W, x1 - (COL_W - NODE_W) / 2)
        };
        format!("M{sx} {sy}C{gap} {sy} {gap} {ey} {ex} {ey}")
    }
}

/// An edge from a later row back up to an earlier one (a revision to what it revises):
/// an arc left of the column when both are in one column, else a curve between their
/// facing sides.
fn back_path(from_col: usize, from_row: usize, to_col: usize, to_row: usize) -> String {
    let (x1, y1) = (node_x(from_col), node_y(from_row) + NODE_H / 2);
    let (x2, y2) = (node_x(to_col), node_y(to_row) + NODE_H / 2);
    if from_col == to_col {
        // Farther rows bulge farther, so arcs of one column do not lie on each other.
        let span = from_row.abs_diff(to_row) as u32;
        let bulge = (18 + span.min(50)).min(GUTTER - 4);
        let bx = x1.saturating_sub(bulge);
        format!("M{x1} {y1}C{bx} {y1} {bx} {y2} {x2} {y2}")
    } else if from_col > to_col {
        let ex = x2 + NODE_W;
        format!("M{x1} {y1}C{ex} {y1} {ex} {y2} {ex} {y2}")
    } else {
        let sx = x1 + NODE_W;
        format!("M{sx} {y1}C{x2} {y1} {x2} {y2} {x2} {y2}")
    }
}

fn write_node(
    out: &mut String,
    scratch: &mut String,
    node: &ThoughtNode,
    column: usize,
    row: usize,
    anomaly: bool,
    options: Options,
) {
    let kind = node_kind(node);
    let (x, y) = (node_x(column), node_y(row));
    let seq = node.seq;
    if options.embedded {
        let _ = write!(out, "<a href=\"#thought-{seq}\">");
    }
    let _ = write!(
        out,
        "<g class=\"node k-{}{}\" id=\"n{seq}\" data-seq=\"{seq}\" data-kind=\"{}\">",
        kind.name,
        if anomaly { " anomaly" } else { "" },
        kind.name,
    );
    out.push_str("<title>");
    push_escaped_cut(out, scratch, &node.thought, TITLE_MAX_CHARS);
    out.push_str("</title>");
    let _ = write!(
        out,
        "<rect x=\"{x}\" y=\"{y}\" width=\"{NODE_W}\" height=\"{NODE_H}\" rx=\"6\"/>\
         <text x=\"{}\" y=\"{}\"><tspan class=\"head\">{} {}",
        x + 8,
        y + 18,
        kind.marker,
        node.thought_number,
    );
    if let Some(total) = node.total_thoughts {
        let _ = write!(out, "/{total}");
    }
    let _ = write!(out, "</tspan> · #{seq}");
    if let Some(target) = node.revises_thought.filter(|_| is_revision(node)) {
        let _ = write!(out, " · revises {target}");
    }
    if let Some(tool) = &node.tool_recommendation {
        out.push_str(" · ");
        push_cut(out, scratch, tool, 16);
    }
    let _ = write!(out, "</text><text x=\"{}\" y=\"{}\">", x + 8, y + 36);
    push_cut(out, scratch, &node.thought, TEXT_MAX_CHARS);
    out.push_str("</text></g>");
    if options.embedded {
        out.push_str("</a>");
    }
    out.push('\n');
}

/// `text` with whitespace collapsed, cut to `max_chars`, escaped, appended to `out`.
fn push_cut(out: &mut String, scratch: &mut String, text: &str, max_chars: usize) {
    scratch.clear();
    cut_into(scratch, text, max_chars);
    escape_xml_into(out, scratch);
}

/// `text` (line breaks kept) cut to `max_chars` chars, escaped, appended to `out`.
fn push_escaped_cut(out: &mut String, scratch: &mut String, text: &str, max_chars: usize) {
    scratch.clear();
    let mut chars = text.chars();
    scratch.extend(chars.by_ref().take(max_chars));
    if chars.next().is_some() {
        scratch.push('…');
    }
    escape_xml_into(out, scratch);
}

/// Escapes text for XML and HTML text and quoted attribute values: `&` `<` `>` `"` `'`
/// as entities; tab, newline and carriage return stay; every other control character,
/// bidi override, embedding or isolate and the non-characters U+FFFE/U+FFFF (none of
/// which XML 1.0 allows, or which would reorder what is drawn) become U+FFFD.
pub fn escape_xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    escape_xml_into(&mut out, text);
    out
}

/// [`escape_xml`], appending to `out`.
pub fn escape_xml_into(out: &mut String, text: &str) {
    let mut kept_from = 0;
    for (index, c) in text.char_indices() {
        let replacement: Option<&str> = match c {
            '&' => Some("&amp;"),
            '<' => Some("&lt;"),
            '>' => Some("&gt;"),
            '"' => Some("&quot;"),
            '\'' => Some("&#39;"),
            '\t' | '\n' | '\r' => None,
            c if c.is_ascii_alphanumeric() || c == ' ' => None,
            c if crate::export::mermaid::is_unsafe_char(c) => Some("\u{FFFD}"),
            _ => None,
        };
        if let Some(replacement) = replacement {
            out.push_str(&text[kept_from..index]);
            out.push_str(replacement);
            kept_from = index + c.len_utf8();
        }
    }
    out.push_str(&text[kept_from..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SessionId;
    use crate::event::SessionKind;
    use crate::export::mermaid::tests::{HOSTILE, hostile_tree, think_tree};
    use crate::projection::fixtures::{recorded, seq_thought, tree_with_aliases};
    use crate::tools::thinking::SequentialThought;

    /// Nodes as (seq, kind) and edges as (from, to, kind).
    type Drawn = (Vec<(u64, String)>, Vec<(u64, u64, String)>);

    /// Parses `svg` as XML and returns (nodes, edges) as (seq, kind) and (from, to, kind).
    pub(crate) fn parse(svg: &str) -> Drawn {
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}: {svg}"));
        let mut nodes = Vec::new();
        let mut edges = Vec::new();
        for element in doc.descendants().filter(|n| n.is_element()) {
            if let (Some(seq), Some(kind)) = (
                element.attribute("data-seq"),
                element.attribute("data-kind"),
            ) {
                nodes.push((seq.parse().unwrap(), kind.to_string()));
            }
            if let Some(kind) = element.attribute("data-edge") {
                edges.push((
                    element.attribute("data-from").unwrap().parse().unwrap(),
                    element.attribute("data-to").unwrap().parse().unwrap(),
                    kind.to_string(),
                ));
            }
        }
        (nodes, edges)
    }

    fn assert_matches_projection(tree: &ThoughtTree, svg: &str) {
        let (nodes, edges) = parse(svg);
        let seqs: Vec<u64> = nodes.iter().map(|(seq, _)| *seq).collect();
        let expected: Vec<u64> = tree.thoughts().map(|node| node.seq).collect();
        assert_eq!(seqs, expected, "{svg}");
        let expected_edges: Vec<(u64, u64, String)> = tree
            .edges()
            .iter()
            .map(|e| {
                let kind = serde_json::to_value(e.kind).unwrap();
                (e.from, e.to, kind.as_str().unwrap().to_string())
            })
            .collect();
        let mut edges = edges;
        edges.sort();
        let mut expected_edges = expected_edges;
        expected_edges.sort();
        assert_eq!(edges, expected_edges);
    }

    #[test]
    fn hostile_trees_parse_as_xml_with_one_element_per_thought_and_edge() {
        let all: String = HOSTILE.concat();
        for text in HOSTILE.iter().copied().chain([all.as_str()]) {
            for tree in [hostile_tree(text), think_tree(text)] {
                for options in [Options::default(), Options { embedded: true }] {
                    let mut svg = String::new();
                    render_into(&mut svg, &tree, options);
                    assert_matches_projection(&tree, &svg);
                    for raw in ["<script", "<img", "\u{202E}", "\u{0}", "\u{1b}"] {
                        assert!(!svg.contains(raw), "{raw:?} reached the picture");
                    }
                }
            }
        }
    }

    #[test]
    fn kinds_are_drawn_by_kind() {
        let tree = hostile_tree("x");
        let (nodes, _) = parse(&render(&tree));
        let kinds: Vec<&str> = nodes.iter().map(|(_, kind)| kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "thought", "thought", "revision", "branch", "branch", "revision", "revision",
                "branch", "thought"
            ]
        );
        let (nodes, _) = parse(&render(&think_tree("x")));
        assert!(nodes.iter().all(|(_, kind)| kind == "think"));
        for kind in KINDS {
            assert!(stylesheet().contains(&format!(".k-{} rect{{", kind.name)));
        }
    }

    #[test]
    fn a_branch_column_is_reused_once_its_branches_have_ended() {
        // 20 two-thought branches, one after another: one branch column in all.
        let tree = crate::export::html::tests::big_tree(1000);
        let drawn = layout(&tree);
        assert_eq!((tree.branches.len(), drawn.columns), (20, 2));
        // Rows are the thoughts' order: no two nodes share a place.
        let mut places: Vec<(usize, usize)> = tree
            .thoughts()
            .map(|node| (drawn.column[&node.seq], drawn.row[&node.seq]))
            .collect();
        places.sort_unstable();
        places.dedup();
        assert_eq!(places.len(), 1000);
        // Branches that overlap in time get columns of their own.
        let payloads = (1..=6u64)
            .map(|n| {
                recorded(SequentialThought {
                    branch_from_thought: Some(1),
                    branch_id: Some(if n % 2 == 0 { "a" } else { "b" }.to_string()),
                    ..seq_thought("x", n, 6)
                })
            })
            .collect();
        let interleaved = tree_with_aliases("t", SessionKind::THINKING, Vec::new(), payloads);
        let drawn = layout(&interleaved);
        assert_eq!(drawn.columns, 3);
        assert_eq!(drawn.branch_column, [1, 2]);
    }

    #[test]
    fn an_empty_tree_is_still_a_picture() {
        let svg = render(&ThoughtTree::new(SessionId::generate()));
        let (nodes, edges) = parse(&svg);
        assert!(nodes.is_empty() && edges.is_empty());
        assert!(svg.contains("no thoughts yet"));
    }

    #[test]
    fn escape_xml_examples() {
        assert_eq!(
            escape_xml("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(
            escape_xml("nul\u{0}rlo\u{202E}\nok"),
            "nul\u{FFFD}rlo\u{FFFD}\nok"
        );
        assert_eq!(escape_xml("🧠 ünï"), "🧠 ünï");
    }
}
