//! SVG picture of a thought tree, laid out in Rust (no viewer needed).
//!
//! Owns: the layout (one row per thought in seq order, the main line in the first
//! column, each branch in a column beside it, reusing a column once its branches ended;
//! a layered layout of our own: `layout-rs` drew the main line crooked at revisions and
//! did not finish 1,000 thoughts in two minutes, this one is linear) and the
//! SVG text, with [`escape_xml`], the one escaper every piece of model-written text in it
//! goes through. Every node is a `<g class="node k-KIND" data-seq data-kind [data-actor]>`
//! (`data-actor`, and `by NAME:` in its tooltip, when its event names who wrote it), every edge
//! a `<path class="edge e-KIND" data-edge data-from data-to data-seq>` (`data-seq` of an
//! edge: the event that made it, the later of its ends), so tests, the HTML replay
//! slider and users' scripts find them.
//!
//! The thoughts' kinds are [`KINDS`] ([`node_kind`] classifies a thought). Every other
//! node, link and mark comes from the families ([`crate::export::picture`]): a node in a
//! row of its own (in event order among the thoughts: on the main line, on a branch's
//! column, in a lane of the family's) or beside a thought or node (columns right of every
//! line); its kind's style comes with its registration. A family's node is a
//! `<g class="node extra k-KIND" id="p<i>" data-seq data-kind>`; a part of its label that
//! changes later is a `<tspan data-seq [data-until]>`.
//!
//! Must not: take an id, a class name, an attribute name or a style from content, put
//! model-written text anywhere but escaped inside `<text>`, `<title>` or a quoted
//! attribute, or add or drop a thought, an edge, a family's node or link (tests compare
//! the counts with the projection's).

//!
//! Split by what changes together: [`layout`] (rows, columns, edge paths), [`style`]
//! (kinds and the stylesheet) and this module (the SVG text of nodes, edges and labels).

mod layout;
mod style;

use crate::export::counted;
use crate::export::family::Exports;
use crate::export::mermaid::{anomaly_seq, cut_into, is_revision};
use crate::export::picture::{At, Mark, Picture, Span};
use crate::projection::tree::{EdgeKind, ThoughtNode, ThoughtTree};
use layout::{
    COL_W, Heading, MARGIN, NODE_RADIUS, TOP, back_path, blocked, detour_path, down_path, layout,
    node_x, node_y, occupancy,
};
pub(crate) use layout::{NODE_H, NODE_W};
use std::collections::HashMap;
use std::fmt::Write as _;
#[cfg(test)]
pub(crate) use style::KINDS;
use style::{ANOMALY_STROKE, ANOMALY_STROKE_WIDTH};
pub(crate) use style::{node_kind, stylesheet};

/// Most characters of one line of text drawn in a node (the full text is in its
/// `<title>`).
pub(crate) const TEXT_MAX_CHARS: usize = 34;
/// Lines a thought's text is wrapped to in its node before the last is cut.
pub(crate) const TEXT_LINES: usize = 3;
/// Distance between two lines of a node's text, in px.
const LINE_H: u32 = 15;
/// The space a label's span starts or ends with, drawn: no renderer strips it.
const SPAN_SPACE: char = '\u{a0}';
/// Length and width of an arrowhead, in px: well within the gap between two rows
/// (`ROW_H - NODE_H`), whatever the width of the line it ends.
const ARROW_PX: u32 = 8;
// Checked when built: a head fits twice in the gap between two rows, and every line of
// a node's text inside its box (the heading line at 18 px, then the text lines).
const _: () = assert!(ARROW_PX * 2 <= layout::ROW_H - NODE_H);
const _: () = assert!(NODE_H >= 18 + TEXT_LINES as u32 * LINE_H);
/// Most characters of thought text in a node's `<title>` tooltip.
pub(crate) const TITLE_MAX_CHARS: usize = 600;
/// Most characters of a branch id or a session title drawn.
const NAME_MAX_CHARS: usize = 30;
const SESSION_TITLE_MAX_CHARS: usize = 90;

/// How the picture is written.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Options {
    /// Inside an HTML page: no XML declaration and no own stylesheet (the page carries
    /// it), each node links to its item in the page's list (`#thought-<seq>`), and the
    /// parts of labels replaced before the last event are kept (hidden) for the replay
    /// slider.
    pub embedded: bool,
}

/// Renders the tree as a standalone SVG document, with what the families of `exports`
/// draw of it.
pub fn render(tree: &ThoughtTree, exports: &Exports) -> String {
    let mut out = String::new();
    render_into(
        &mut out,
        tree,
        &Picture::of(tree, exports.pictures()),
        Options::default(),
        exports,
    );
    out
}

/// Appends the picture of `tree` and what the families draw of it (`picture`,
/// [`Picture::of`] the same tree and `exports`) to `out`; a standalone picture carries
/// the stylesheet of `exports`' kinds.
pub(crate) fn render_into(
    out: &mut String,
    tree: &ThoughtTree,
    picture: &Picture,
    options: Options,
    exports: &Exports,
) {
    let layout = layout(tree, picture);
    let edges = tree.edges();
    let rows = layout.rows.max(1);
    // The gap right of the last column too: an edge detoured around the boxes between
    // its ends in that column runs through it ([`layout::detour_path`]), and was cut.
    let width = node_x(layout.columns) - COL_W + NODE_W + (COL_W - NODE_W) / 2 + MARGIN;
    let width = width.max(560);
    let height = node_y(rows) + MARGIN;
    out.reserve(1024 + tree.order.len() * 700 + picture.nodes.len() * 900);
    if !options.embedded {
        out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    }
    // Generated values only: sizes, a ULID, an enum name and counts.
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"picture\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\" data-session=\"{}\" \
         data-kind-of-session=\"{}\" data-at-seq=\"{}\" data-thoughts=\"{}\" data-edges=\"{}\" \
         data-branches=\"{}\" data-anomalies=\"{}\" data-nodes=\"{}\" data-links=\"{}\">",
        tree.session,
        tree.kind().map_or("unknown", |kind| kind.as_str()),
        tree.at_seq,
        tree.order.len(),
        edges.len(),
        tree.branches.len(),
        tree.anomalies.len(),
        picture.nodes.len(),
        picture.links.len(),
    );
    if !options.embedded {
        let _ = writeln!(out, "<style>{}</style>", stylesheet(exports));
    }
    // In px of the picture, not of the line's width: a link drawn 3 px wide would
    // otherwise get a head three times as big, taller than the gap between two rows.
    let _ = writeln!(
        out,
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" \
         markerUnits=\"userSpaceOnUse\" markerWidth=\"{ARROW_PX}\" markerHeight=\"{ARROW_PX}\" \
         orient=\"auto-start-reverse\"><path d=\"M0 0L10 5L0 10z\" fill=\"#495057\"/></marker></defs>",
    );
    let mut scratch = String::new();
    out.push_str("<text class=\"heading\" x=\"16\" y=\"22\">");
    push_cut(out, &mut scratch, tree.title(), SESSION_TITLE_MAX_CHARS);
    out.push_str("</text>\n");
    // The caption: what the picture shows. The HTML page's script writes it again for the
    // slider's event from the attributes (which parts, the kind, the anomalies' text).
    let with_thoughts = !tree.order.is_empty() || picture.nodes.is_empty();
    let kind = tree.kind().map_or("unknown", |kind| kind.as_str());
    let anomalies = match tree.anomalies.len() {
        0 => String::new(),
        n => format!(
            " · {} (outlined in red)",
            counted(n, "anomaly", "anomalies")
        ),
    };
    let _ = write!(
        out,
        "<text class=\"sub caption\" x=\"16\" y=\"40\" data-session-kind=\"{kind}\"{}{} \
         data-anomalies=\"{anomalies}\">{kind} · at event {}",
        if with_thoughts {
            " data-thoughts=\"1\""
        } else {
            ""
        },
        match (picture.nodes.is_empty(), tree.order.is_empty()) {
            (true, _) => "",
            (false, true) => " data-nodes=\"node\"",
            (false, false) => " data-nodes=\"other node\"",
        },
        tree.at_seq,
    );
    // What the session has: thoughts, and the families' nodes (a plan has no thoughts).
    if with_thoughts {
        let _ = write!(
            out,
            " · {} · {} · {}",
            counted(tree.order.len(), "thought", "thoughts"),
            counted(edges.len(), "edge", "edges"),
            counted(tree.branches.len(), "branch", "branches"),
        );
    }
    if !picture.nodes.is_empty() {
        let other = if tree.order.is_empty() { "" } else { "other " };
        let _ = write!(
            out,
            " · {} · {}",
            counted(
                picture.nodes.len(),
                &format!("{other}node"),
                &format!("{other}nodes")
            ),
            counted(picture.links.len(), "link", "links"),
        );
    }
    out.push_str(&anomalies);
    out.push_str("</text>\n");

    // Headings: the main line's above its column, each branch's and lane's above its
    // first row (shown from that event on).
    let _ = writeln!(
        out,
        "<text class=\"lane\" x=\"{}\" y=\"{}\">main line</text>",
        node_x(0),
        TOP - 12
    );
    for lane in &layout.lanes {
        let _ = write!(
            out,
            "<text class=\"lane\" data-seq=\"{}\" x=\"{}\" y=\"{}\">",
            lane.seq,
            node_x(lane.column),
            node_y(lane.first_row) - 5
        );
        match lane.heading {
            Heading::Branch(index) => {
                let branch = &tree.branches[index];
                out.push_str("branch ");
                push_cut(out, &mut scratch, &branch.id, NAME_MAX_CHARS);
                let _ = write!(out, " · from {}", branch.from_thought);
            }
            Heading::Lane(name) => push_cut(out, &mut scratch, name, NAME_MAX_CHARS),
        }
        out.push_str("</text>\n");
    }

    if tree.order.is_empty() && picture.nodes.is_empty() {
        let _ = writeln!(
            out,
            "<text class=\"sub\" x=\"{}\" y=\"{}\">This session has no thoughts yet.</text>",
            node_x(0),
            TOP + 20
        );
        out.push_str("</svg>\n");
        return;
    }

    // Edges first, so nodes are drawn over them. Only the families' nodes can stand in
    // a straight edge's way (a column's thoughts between two of one line are that line's).
    let taken = if picture.nodes.is_empty() {
        Vec::new()
    } else {
        occupancy(&layout)
    };
    out.push_str("<g class=\"edges\">\n");
    for edge in &edges {
        let (Some(from), Some(to)) = (
            layout.place(picture, At::Thought(edge.from)),
            layout.place(picture, At::Thought(edge.to)),
        ) else {
            continue;
        };
        let kind = match edge.kind {
            EdgeKind::Next => "next",
            EdgeKind::BranchesFrom => "branches_from",
            EdgeKind::Revises => "revises",
        };
        let blocked = blocked(&taken, from, to);
        write_edge(out, kind, (edge.from, edge.to), from, to, blocked);
    }
    for link in &picture.links {
        let (Some(from), Some(to)) = (
            layout.place(picture, link.from),
            layout.place(picture, link.to),
        ) else {
            continue;
        };
        let (from_seq, to_seq) = (picture.seq_of(link.from), picture.seq_of(link.to));
        let blocked = blocked(&taken, from, to);
        write_edge(out, link.kind.name, (from_seq, to_seq), from, to, blocked);
    }
    out.push_str("</g>\n");

    let mut flagged: Vec<u64> = tree.anomalies.iter().filter_map(anomaly_seq).collect();
    flagged.sort_unstable();
    flagged.dedup();
    let mut marks: HashMap<u64, Vec<&Mark>> = HashMap::new();
    for mark in &picture.marks {
        marks.entry(mark.seq).or_default().push(mark);
    }
    out.push_str("<g class=\"nodes\">\n");
    for node in tree.thoughts() {
        let place = (layout.column[&node.seq], layout.row[&node.seq]);
        let anomaly = flagged.binary_search(&node.seq).is_ok();
        let marks = marks.get(&node.seq).map_or(&[][..], Vec::as_slice);
        write_node(out, &mut scratch, node, marks, place, anomaly, options);
    }
    for (index, node) in picture.nodes.iter().enumerate() {
        let (column, row) = layout.extra[index];
        let (x, y) = (node_x(column), node_y(row));
        let seq = node.seq;
        if options.embedded {
            let _ = write!(out, "<a href=\"#thought-{seq}\">");
        }
        let _ = write!(
            out,
            "<g class=\"node extra k-{kind}\" id=\"p{index}\" data-seq=\"{seq}\" \
             data-kind=\"{kind}\"",
            kind = node.kind.name,
        );
        push_actor(out, tree.actor_at(seq));
        out.push_str("<title>");
        push_by(out, tree.actor_at(seq));
        push_escaped_cut(out, &mut scratch, &node.title, TITLE_MAX_CHARS);
        let _ = write!(
            out,
            "</title><rect x=\"{x}\" y=\"{y}\" width=\"{NODE_W}\" height=\"{NODE_H}\" rx=\"{NODE_RADIUS}\"/>"
        );
        push_glyph(out, node.kind.glyph, x, y);
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\"><tspan class=\"head\">#{seq}</tspan> ",
            x + GLYPH_TEXT_X,
            y + 18,
        );
        push_spans(out, &mut scratch, &node.head, seq, options);
        push_by_shown(out, &mut scratch, tree.actor_at(seq));
        out.push_str("</text>");
        match node.text.as_slice() {
            // One text for the node's whole life: wrapped as a thought's is, in the lines
            // the box has room for.
            [span] if span.from <= seq && span.until.is_none() && span.class.is_none() => {
                push_wrapped(out, &mut scratch, &span.text, x + 8, y + 36);
            }
            spans => {
                let _ = write!(out, "<text x=\"{}\" y=\"{}\">", x + 8, y + 36);
                push_spans(out, &mut scratch, spans, seq, options);
                out.push_str("</text>");
            }
        }
        out.push_str("</g>");
        if options.embedded {
            out.push_str("</a>");
        }
        out.push('\n');
    }
    out.push_str("</g>\n</svg>\n");
}

/// One edge or link between two placed nodes (a later row: down; an earlier one: back;
/// past a node in its way: around it, see [`detour_path`]).
fn write_edge(
    out: &mut String,
    kind: &str,
    (from_seq, to_seq): (u64, u64),
    (from_col, from_row): (usize, usize),
    (to_col, to_row): (usize, usize),
    blocked: bool,
) {
    let d = if blocked {
        detour_path(from_col, from_row, to_col, to_row)
    } else if to_row >= from_row && (to_row > from_row || to_col != from_col) {
        down_path(from_col, from_row, to_col, to_row)
    } else {
        back_path(from_col, from_row, to_col, to_row)
    };
    let _ = writeln!(
        out,
        "<path class=\"edge e-{kind}\" data-edge=\"{kind}\" data-from=\"{from_seq}\" \
         data-to=\"{to_seq}\" data-seq=\"{}\" d=\"{d}\" marker-end=\"url(#arrow)\"/>",
        from_seq.max(to_seq),
    );
}

/// A label's spans: text shown with the node as is; a span that appears later or is
/// replaced as a `<tspan>` with its `data-seq` (and `data-until`, class `was`: replaced
/// by the last event, so hidden until the slider goes back). A standalone picture has no
/// slider: it leaves replaced spans out.
fn push_spans(
    out: &mut String,
    scratch: &mut String,
    spans: &[Span],
    node_seq: u64,
    options: Options,
) {
    for span in spans {
        if span.until.is_some() && !options.embedded {
            continue;
        }
        let timed = span.from > node_seq;
        let tagged = timed || span.until.is_some() || span.class.is_some();
        // The one space a span starts or ends with is a no-break space: renderers that
        // strip a `<tspan>`'s leading space (rsvg) drew "0.78· ✓ chosen"; it stays inside
        // the span, so a span the replay hides takes its space with it.
        let lead = span.text.starts_with(char::is_whitespace);
        let trail = span.text.ends_with(char::is_whitespace) && !span.text.trim().is_empty();
        if tagged {
            out.push_str("<tspan");
            let classes: Vec<&str> = span
                .class
                .into_iter()
                .chain(span.until.map(|_| "was"))
                .collect();
            if !classes.is_empty() {
                let _ = write!(out, " class=\"{}\"", classes.join(" "));
            }
            // The page's script reads `data-until` only on elements with a `data-seq`.
            if timed || span.until.is_some() {
                let _ = write!(out, " data-seq=\"{}\"", span.from.max(node_seq));
            }
            if let Some(until) = span.until {
                let _ = write!(out, " data-until=\"{until}\"");
            }
            out.push('>');
        }
        if lead {
            out.push(SPAN_SPACE);
        }
        push_cut(out, scratch, &span.text, TEXT_MAX_CHARS);
        if trail {
            out.push(SPAN_SPACE);
        }
        if tagged {
            out.push_str("</tspan>");
        }
    }
}

fn write_node(
    out: &mut String,
    scratch: &mut String,
    node: &ThoughtNode,
    marks: &[&Mark],
    (column, row): (usize, usize),
    anomaly: bool,
    options: Options,
) {
    let kind = marks
        .iter()
        .rev()
        .find_map(|mark| mark.kind)
        .unwrap_or_else(|| node_kind(node));
    let (x, y) = (node_x(column), node_y(row));
    let seq = node.seq;
    if options.embedded {
        let _ = write!(out, "<a href=\"#thought-{seq}\">");
    }
    let _ = write!(
        out,
        "<g class=\"node k-{}{}\" id=\"n{seq}\" data-seq=\"{seq}\" data-kind=\"{}\"",
        kind.name,
        if anomaly { " anomaly" } else { "" },
        kind.name,
    );
    push_actor(out, node.actor.as_deref());
    out.push_str("<title>");
    push_by(out, node.actor.as_deref());
    push_escaped_cut(out, scratch, &node.thought, TITLE_MAX_CHARS);
    out.push_str("</title>");
    let _ = write!(
        out,
        "<rect x=\"{x}\" y=\"{y}\" width=\"{NODE_W}\" height=\"{NODE_H}\" rx=\"{NODE_RADIUS}\"/>"
    );
    if anomaly {
        push_anomaly_outline(out, x, y);
    }
    push_glyph(out, kind.glyph, x, y);
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\"><tspan class=\"head\">{}",
        x + GLYPH_TEXT_X,
        y + 18,
        node.thought_number,
    );
    match marks.iter().rev().find(|mark| !mark.total.is_empty()) {
        Some(mark) => push_spans(out, scratch, &mark.total, seq, options),
        None => {
            if let Some(total) = node.total_thoughts {
                let _ = write!(out, "/{total}");
            }
        }
    }
    let _ = write!(out, "</tspan> · #{seq}");
    if let Some(target) = node.revises_thought.filter(|_| is_revision(node)) {
        let _ = write!(out, " · revises {target}");
    }
    if let Some(tool) = &node.tool_recommendation {
        out.push_str(" · ");
        push_cut(out, scratch, tool, 16);
    }
    for mark in marks {
        push_spans(out, scratch, &mark.head, seq, options);
    }
    push_by_shown(out, scratch, node.actor.as_deref());
    out.push_str("</text>");
    if node.thought.trim().is_empty() {
        // As the Markdown export says it: a blank box reads as a drawing fault.
        let _ = write!(
            out,
            "<text class=\"empty\" x=\"{}\" y=\"{}\">(empty)</text>",
            x + 8,
            y + 36
        );
    } else {
        push_wrapped(out, scratch, &node.thought, x + 8, y + 36);
    }
    out.push_str("</g>");
    if options.embedded {
        out.push_str("</a>");
    }
    out.push('\n');
}

/// The red outline of an anomaly, drawn over the node's box whatever its kind's style
/// (a revision's orange dashes, a branch's green): a `<path>` with the outline's own
/// stroke, which no kind's `.k-… rect` rule reaches. The stylesheet's `.anomaly rect`
/// rule comes before the kinds' and loses to them; reordering it would change the bytes
/// of every picture, the `ledger-v2` fixture's included (tests/it/fixture_ledger.rs).
fn push_anomaly_outline(out: &mut String, x: u32, y: u32) {
    let r = NODE_RADIUS;
    let (right, bottom) = (x + NODE_W, y + NODE_H);
    let _ = write!(
        out,
        "<path class=\"anomaly-outline\" d=\"M{} {y}H{}A{r} {r} 0 0 1 {right} {}V{}A{r} {r} 0 0 1 {} {bottom}\
         H{}A{r} {r} 0 0 1 {x} {}V{}A{r} {r} 0 0 1 {} {y}Z\" fill=\"none\" stroke=\"{ANOMALY_STROKE}\" \
         stroke-width=\"{ANOMALY_STROKE_WIDTH}\"/>",
        x + r,
        right - r,
        y + r,
        bottom - r,
        right - r,
        x + r,
        bottom - r,
        y + r,
        x + r,
    );
}

/// Ends a node's (or the HTML page's item's) opening tag: with ` data-actor="NAME"`
/// (escaped) when the event that drew it names who wrote it.
pub(crate) fn push_actor(out: &mut String, actor: Option<&str>) {
    if let Some(actor) = actor {
        out.push_str(" data-actor=\"");
        escape_xml_into(out, actor);
        out.push('"');
    }
    out.push('>');
}

/// `by NAME: ` at the start of a node's tooltip, when the event names who wrote it.
fn push_by(out: &mut String, actor: Option<&str>) {
    if let Some(actor) = actor {
        out.push_str("by ");
        escape_xml_into(out, actor);
        out.push_str(": ");
    }
}

/// Where a node's head line starts, from the box's left edge: after its glyph.
const GLYPH_TEXT_X: u32 = 26;

/// A node's glyph ([`crate::export::picture::Glyph`]), 12 × 12 px at the start of its head
/// line, filled by its kind's rule (`.k-NAME .glyph`).
fn push_glyph(out: &mut String, glyph: crate::export::picture::Glyph, x: u32, y: u32) {
    let _ = write!(
        out,
        "<path class=\"glyph\" transform=\"translate({} {})\" d=\"{}\"/>",
        x + 8,
        y + 8,
        glyph.path()
    );
}

/// The most characters of a writer's name drawn in a node's head line (the whole name is
/// in its tooltip and `data-actor`).
const ACTOR_LABEL_CHARS: usize = 16;

/// ` · by NAME` at the end of a node's head line, when its event names who wrote it.
fn push_by_shown(out: &mut String, scratch: &mut String, actor: Option<&str>) {
    if let Some(actor) = actor {
        out.push_str("<tspan class=\"by\"> · by ");
        push_cut(out, scratch, actor, ACTOR_LABEL_CHARS);
        out.push_str("</tspan>");
    }
}

/// `text` as up to [`TEXT_LINES`] `<text>` lines from (`x`, `y`) down, wrapped between
/// words at [`TEXT_MAX_CHARS`], the last cut (`…`) when the text goes on.
fn push_wrapped(out: &mut String, scratch: &mut String, text: &str, x: u32, y: u32) {
    let mut rest = text.trim_start();
    for line in 0..TEXT_LINES {
        let _ = write!(out, "<text x=\"{x}\" y=\"{}\">", y + line as u32 * LINE_H);
        if line + 1 == TEXT_LINES {
            push_cut(out, scratch, rest, TEXT_MAX_CHARS);
            rest = "";
        } else {
            let (head, tail) = wrap_at(rest, TEXT_MAX_CHARS);
            push_cut(out, scratch, head, TEXT_MAX_CHARS);
            rest = tail.trim_start();
        }
        out.push_str("</text>");
        if rest.is_empty() {
            break;
        }
    }
}

/// `text` split after the last whole word that fits in `max_chars` (whitespace counted
/// as one space); a first word longer than that is the whole line (cut when drawn).
fn wrap_at(text: &str, max_chars: usize) -> (&str, &str) {
    let mut count = 0;
    let mut end = 0;
    for word in text.split_whitespace() {
        let needed = usize::from(count > 0) + word.chars().count();
        if count > 0 && count + needed > max_chars {
            break;
        }
        count += needed;
        // The word's end in `text`.
        end = word.as_ptr() as usize - text.as_ptr() as usize + word.len();
        if count >= max_chars {
            break;
        }
    }
    text.split_at(end)
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
    crate::export::truncate_into(scratch, text, max_chars, crate::export::Ellipsis::After);
    escape_xml_into(out, scratch);
}

/// Escapes text for XML and HTML text and quoted attribute values: `&` `<` `>` `"` `'`
/// as entities; tab, newline and carriage return stay; every other control character,
/// bidi override, embedding or isolate and the non-characters U+FFFE/U+FFFF (none of
/// which XML 1.0 allows, or which would reorder what is drawn) become U+FFFD. The code
/// appends with [`escape_xml_into`]; this form is the tests'.
#[cfg(test)]
pub(crate) fn escape_xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    escape_xml_into(&mut out, text);
    out
}

/// [`escape_xml`], appending to `out`.
pub(crate) fn escape_xml_into(out: &mut String, text: &str) {
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
pub(crate) mod tests {
    use super::*;
    use crate::event::{Event, Payload, SessionId, SessionKind};
    use crate::export::mermaid::tests::{HOSTILE, hostile_tree, think_tree};
    use crate::export::picture::Picture;
    use crate::projection::fixtures::{
        call, recorded, seq_thought, session_event, tree_with_aliases,
    };
    use crate::tools::planning::payload::{Body, PlanningEvent};
    use crate::tools::planning::state::{
        Approach, BranchClose, BranchMerge, Clarification, Criterion, Evaluation, FinalPlan,
        PlanInit, Planning, Risk, Step,
    };
    use crate::tools::qa::payload::{
        QaStep, QaStepRecorded, Step as QaPlanStep, ToolRecommendation,
    };
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

    /// Whether `element` is shown with the slider at event `k` (`None`: the picture as
    /// drawn, no slider), as the page's script decides: it and every ancestor are not of
    /// class `was` as drawn, or, where they carry a `data-seq` (the only elements the
    /// script touches), have none after k and no `data-until` at or before it.
    fn shown_at(element: roxmltree::Node, k: Option<u64>) -> bool {
        element.ancestors().filter(|n| n.is_element()).all(|n| {
            let number = |name| n.attribute(name).map(|v: &str| v.parse::<u64>().unwrap());
            let was = n
                .attribute("class")
                .unwrap_or("")
                .split(' ')
                .any(|c| c == "was");
            match (k, number("data-seq")) {
                (Some(k), Some(seq)) => {
                    seq <= k && number("data-until").is_none_or(|until| until > k)
                }
                _ => !was,
            }
        })
    }

    /// (seq, kind, text drawn in its `<text>`s) of every node shown at event `k`, in
    /// document order.
    pub(crate) fn shown_nodes(svg: &str, k: Option<u64>) -> Vec<(u64, String, String)> {
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}: {svg}"));
        doc.descendants()
            .filter(|n| n.is_element() && n.attribute("data-kind").is_some())
            .filter(|n| shown_at(*n, k))
            .map(|node| {
                let text: String = node
                    .descendants()
                    .filter(|t| t.is_text())
                    .filter(|t| t.ancestors().any(|a| a.has_tag_name("text")))
                    .filter(|t| shown_at(t.parent().unwrap(), k))
                    .map(|t| t.text().unwrap())
                    .collect();
                let seq = node.attribute("data-seq").unwrap().parse().unwrap();
                (seq, node.attribute("data-kind").unwrap().to_string(), text)
            })
            .collect()
    }

    /// What the picture must hold: every thought (seq, kind) then every family node, and
    /// every edge and link.
    pub(crate) fn expected(tree: &ThoughtTree) -> Drawn {
        let picture = Picture::of(tree, crate::tools::exports().pictures());
        let mut nodes: Vec<(u64, String)> = tree
            .thoughts()
            .map(|node| {
                let kind = picture
                    .marks
                    .iter()
                    .rev()
                    .filter(|m| m.seq == node.seq)
                    .find_map(|m| m.kind)
                    .unwrap_or_else(|| node_kind(node));
                (node.seq, kind.name.to_string())
            })
            .collect();
        nodes.extend(
            picture
                .nodes
                .iter()
                .map(|n| (n.seq, n.kind.name.to_string())),
        );
        let mut edges: Vec<(u64, u64, String)> = tree
            .edges()
            .iter()
            .map(|e| {
                let kind = serde_json::to_value(e.kind).unwrap();
                (e.from, e.to, kind.as_str().unwrap().to_string())
            })
            .collect();
        edges.extend(picture.links.iter().map(|l| {
            (
                picture.seq_of(l.from),
                picture.seq_of(l.to),
                l.kind.name.to_string(),
            )
        }));
        edges.sort();
        (nodes, edges)
    }

    fn assert_matches_projection(tree: &ThoughtTree, svg: &str) {
        let (nodes, mut edges) = parse(svg);
        let (expected_nodes, expected_edges) = expected(tree);
        assert_eq!(nodes, expected_nodes, "{svg}");
        edges.sort();
        assert_eq!(edges, expected_edges);
    }

    fn render_with(tree: &ThoughtTree, options: Options) -> String {
        let exports = crate::tools::exports();
        let mut svg = String::new();
        render_into(
            &mut svg,
            tree,
            &Picture::of(tree, exports.pictures()),
            options,
            &exports,
        );
        svg
    }

    /// The events of one session: `session_started`, then `payloads`.
    pub(crate) fn events_of(kind: SessionKind, payloads: Vec<Payload>) -> (SessionId, Vec<Event>) {
        let session = SessionId::generate();
        let mut events = vec![session_event(
            session,
            1,
            Payload::SessionStarted {
                kind,
                title: "pictured".into(),
                aliases: Vec::new(),
            },
        )];
        for (i, payload) in payloads.into_iter().enumerate() {
            events.push(session_event(session, i as u64 + 2, payload));
        }
        (session, events)
    }

    fn planning(tool: &str, body: Body) -> Payload {
        PlanningEvent {
            body,
            call: call(tool),
        }
        .into()
    }

    /// A finalized plan whose every text holds `text`: two clarifications, three
    /// approaches (x evaluated twice, y evaluated and closed, z merged), steps and risks.
    pub(crate) fn plan_events(text: &str) -> (SessionId, Vec<Event>) {
        let branch = |id: &str| format!("{id} {text}");
        let approach = |id: &str| {
            planning(
                "deep_planning",
                Body::ApproachExplored(Approach {
                    branch_id: branch(id),
                    name: format!("name {text}"),
                    description: Some(text.to_string()),
                    pros: vec![text.to_string()],
                    cons: vec![text.to_string()],
                }),
            )
        };
        let evaluation = |id: &str, score: f64| {
            planning(
                "evaluate_branch",
                Body::BranchEvaluated(Evaluation {
                    branch_id: branch(id),
                    criteria: vec![Criterion {
                        name: text.to_string(),
                        score: score / 0.3,
                        weight: 0.3,
                        inverted: false,
                    }],
                    score,
                    rationale: Some(text.to_string()),
                    recommendation: Some(text.to_string()),
                }),
            )
        };
        let payloads = vec![
            planning(
                "deep_planning",
                Body::PlanInitialized(PlanInit {
                    problem: text.to_string(),
                    context: Some(text.to_string()),
                    constraints: vec![text.to_string()],
                }),
            ),
            planning(
                "deep_planning",
                Body::PlanClarified(Clarification {
                    question: text.to_string(),
                    answer: Some(text.to_string()),
                }),
            ),
            planning(
                "deep_planning",
                Body::PlanClarified(Clarification {
                    question: text.to_string(),
                    answer: None,
                }),
            ),
            approach("x"),
            approach("y"),
            approach("z"),
            evaluation("x", 7.8),
            evaluation("y", 6.8),
            evaluation("x", 8.25),
            planning(
                "close_branch",
                Body::BranchClosed(BranchClose {
                    branch_id: branch("y"),
                    conclusion: text.to_string(),
                }),
            ),
            planning(
                "merge_branch",
                Body::BranchMerged(BranchMerge {
                    branch_id: branch("z"),
                    strategy: "summary".into(),
                    thought_number: 1,
                    thought: text.to_string(),
                }),
            ),
            planning(
                "deep_planning",
                Body::PlanFinalized(FinalPlan {
                    selected_branch: branch("x"),
                    steps: vec![Step {
                        title: text.to_string(),
                        description: text.to_string(),
                        files: vec![text.to_string()],
                        dependencies: Vec::new(),
                        complexity: Some(text.to_string()),
                    }],
                    risks: vec![Risk {
                        description: text.to_string(),
                        mitigation: text.to_string(),
                    }],
                    assumptions: vec![text.to_string()],
                    success_criteria: vec![text.to_string()],
                }),
            ),
        ];
        events_of(SessionKind::PLANNING, payloads)
    }

    /// A `sequentialthinking` session whose branch `text` is evaluated, closed and merged,
    /// and an evaluation of a branch it does not have.
    pub(crate) fn evaluated_branch_events(text: &str) -> (SessionId, Vec<Event>) {
        let on_branch = |n: u64| {
            recorded(SequentialThought {
                branch_from_thought: Some(1),
                branch_id: Some(text.to_string()),
                ..seq_thought(text, n, 5)
            })
        };
        let evaluation = |branch: &str| {
            planning(
                "evaluate_branch",
                Body::BranchEvaluated(Evaluation {
                    branch_id: branch.to_string(),
                    criteria: Vec::new(),
                    score: 5.5,
                    rationale: Some(text.to_string()),
                    recommendation: Some(text.to_string()),
                }),
            )
        };
        let payloads = vec![
            recorded(seq_thought(text, 1, 5)),
            on_branch(2),
            on_branch(3),
            evaluation(text),
            recorded(seq_thought(text, 2, 5)),
            planning(
                "close_branch",
                Body::BranchClosed(BranchClose {
                    branch_id: text.to_string(),
                    conclusion: text.to_string(),
                }),
            ),
            planning(
                "merge_branch",
                Body::BranchMerged(BranchMerge {
                    branch_id: text.to_string(),
                    strategy: "append".into(),
                    thought_number: 3,
                    thought: text.to_string(),
                }),
            ),
            evaluation("no such branch"),
        ];
        events_of(SessionKind::THINKING, payloads)
    }

    fn tool(name: &str, rationale: String, confidence: f64) -> ToolRecommendation {
        ToolRecommendation {
            tool_name: name.to_string(),
            confidence,
            rationale,
            priority: 1,
            alternatives: Vec::new(),
            suggested_inputs: None,
        }
    }

    /// Three verification steps whose every text holds `text`: tools used, recommended
    /// tools (one a stand-in), a branch, and a last step with no tools.
    pub(crate) fn qa_events(text: &str) -> (SessionId, Vec<Event>) {
        let step = |tools: Vec<ToolRecommendation>| QaPlanStep {
            step_description: text.to_string(),
            expected_outcome: text.to_string(),
            recommended_tools: tools,
            next_step_conditions: vec![text.to_string()],
            revise_when: Vec::new(),
            branch_when: Vec::new(),
        };
        let qa = |n: u64, branch: bool, tools: bool| -> Payload {
            let mut thought = seq_thought(text, n, 3);
            if branch {
                thought.branch_from_thought = Some(1);
                thought.branch_id = Some(text.to_string());
            }
            thought.next_thought_needed = n < 3;
            QaStepRecorded {
                step: QaStep {
                    thought,
                    verification_target: Some(text.to_string()),
                    workflow: text.to_string(),
                    current_step: tools
                        .then(|| step(vec![tool(&format!("used {text}"), text.to_string(), 0.9)])),
                    recommended_next_step: tools.then(|| {
                        step(vec![
                            tool(
                                &format!("next {text}"),
                                format!("{text} (confidence 0.9: as the workflow gives it)"),
                                0.9,
                            ),
                            tool(
                                &format!("stand-in {text}"),
                                format!(
                                    "{text} (confidence 0.56: the workflow's 0.7; ×0.8: stands in \
                                     for lacking {text}, which you do not have)"
                                ),
                                0.56,
                            ),
                        ])
                    }),
                    invalid_recommendations: Vec::new(),
                    remaining_steps: vec![text.to_string()],
                },
                call: call("sequentialthinking_qa"),
            }
            .into()
        };
        events_of(
            SessionKind::THINKING,
            vec![qa(1, false, true), qa(2, true, true), qa(3, false, false)],
        )
    }

    fn build((session, events): (SessionId, Vec<Event>)) -> ThoughtTree {
        ThoughtTree::build(session, events, &crate::tools::folds())
    }

    /// Every family's fixture for `text`.
    pub(crate) fn family_trees(text: &str) -> Vec<ThoughtTree> {
        vec![
            build(plan_events(text)),
            build(evaluated_branch_events(text)),
            build(qa_events(text)),
            build(agent_events(text)),
            build(booster_events(text)),
        ]
    }

    /// A booster session whose every text holds `text`: task (a seed hint), hints added,
    /// iteration 1 best-of-3, iteration 2 chosen by a beam and backtracked (a loop),
    /// iteration 3 with backtracking off: a stagnation detected, the step kept.
    pub(crate) fn booster_events(text: &str) -> (SessionId, Vec<Event>) {
        booster_events_counted(text, None)
    }

    /// [`booster_events`] with its steps numbered against `step_count`.
    pub(crate) fn booster_events_counted(
        text: &str,
        step_count: Option<crate::tools::booster::state::StepCount>,
    ) -> (SessionId, Vec<Event>) {
        use crate::tools::booster::config::Config;
        use crate::tools::booster::payload::{Body, BoosterEvent};
        use crate::tools::booster::state::{
            Applied, Beam, BeamHead, CandidateSet, Hints, LoopCheck, LoopKind, ModelOutput,
            PathStep, Proposal, Score, Scored, Source, Started, Via,
        };
        let event = |body: Body, tool: Option<&str>| -> Payload {
            BoosterEvent {
                body,
                call: tool.map(call),
            }
            .into()
        };
        let proposal = |n: u64| Proposal {
            text: format!("{n} {text}"),
            rationale: text.to_string(),
            how_to_verify: Some(text.to_string()),
            expected_outcomes: vec![text.to_string()],
        };
        let score = |total: f64| Score {
            rules_score: total,
            redundancy_score: 0.5,
            consistency_score: 0.25,
            total_score: total,
        };
        let set = |iteration: u64, model: bool| {
            Body::CandidatesScored(CandidateSet {
                iteration,
                source: Source {
                    provider: if model {
                        text.to_string()
                    } else {
                        "heuristic".into()
                    },
                    model: model.then(|| text.to_string()),
                    fallback: model.then(|| text.to_string()),
                },
                scorer: "reference-1".into(),
                candidates: (1..=3)
                    .map(|n| Scored {
                        proposal: proposal(n),
                        score: score(1.0 - n as f64 / 10.0),
                    })
                    .collect(),
                model_output: model.then(|| ModelOutput {
                    provider: text.to_string(),
                    model: Some(text.to_string()),
                    transport: "http".into(),
                    prompt_chars: 10,
                    response_chars: 20,
                    error: Some(text.to_string()),
                    parsed: 0,
                    parser: "none".into(),
                }),
            })
        };
        let applied = |iteration: u64, candidate: u64, via: Via| {
            Body::StepApplied(Applied {
                iteration,
                candidate,
                via,
                proposal: proposal(candidate + 1),
                score: score(1.0 - (candidate + 1) as f64 / 10.0),
            })
        };
        let check = |iteration: u64, kind: LoopKind| LoopCheck {
            iteration,
            kind,
            text: proposal(1).text,
            repeats_step: 1,
        };
        events_of(
            SessionKind::BOOSTER,
            vec![
                event(
                    Body::BoosterStarted(Started {
                        task: text.to_string(),
                        config: Config::default(),
                        seed_hints: vec![text.to_string()],
                        step_count,
                    }),
                    Some("start"),
                ),
                event(
                    Body::HintsAdded(Hints {
                        hints: vec![text.to_string(), format!("2 {text}")],
                    }),
                    Some("step"),
                ),
                event(set(1, false), None),
                event(applied(1, 0, Via::Best), None),
                event(set(2, true), Some("solve")),
                event(
                    Body::BeamRolledOut(Beam {
                        iteration: 2,
                        last_total: 0.9,
                        best_total: 0.9,
                        heads: (0..2)
                            .map(|n| BeamHead {
                                candidate: n,
                                text: proposal(n + 1).text,
                                path: vec![PathStep {
                                    text: text.to_string(),
                                    total_score: 0.5,
                                }],
                                value: 0.6 + n as f64 / 10.0,
                            })
                            .collect(),
                        chosen: 1,
                    }),
                    None,
                ),
                event(applied(2, 1, Via::Beam), None),
                event(Body::Backtracked(check(2, LoopKind::Loop)), None),
                event(set(3, false), Some("step")),
                event(applied(3, 0, Via::Best), None),
                event(Body::LoopDetected(check(3, LoopKind::Stagnation)), None),
            ],
        )
    }

    /// An agent session whose every text is `text`: a chat_agent call (answered), a
    /// failed one, and three branch nodes, one nested, one under an unknown parent.
    pub(crate) fn agent_events(text: &str) -> (SessionId, Vec<Event>) {
        use crate::provider::{ChatRequest, ChatResponse, ModelCallRecord, ModelCallRecorded};
        use crate::tools::agent::node::{AgentNode, CallType};
        use crate::tools::agent::payload::BranchNodeCreated;
        let call = |tool: &str| crate::event::CallRecord {
            tool: tool.to_string(),
            raw_arguments: serde_json::json!({"input_text": text}).into(),
            duration_us: 1,
        };
        let mut record = ModelCallRecord::not_called(
            &ChatRequest::single(Some(text.to_string()), text),
            crate::provider::ProviderError::Config {
                message: text.to_string(),
            },
        );
        let failed = record.clone();
        record.error = None;
        record.response = Some(ChatResponse {
            content: text.to_string(),
            reasoning: None,
            finish_reason: None,
            usage: None,
            model: text.to_string(),
        });
        let node = |id: &str, parent: &str| -> Payload {
            BranchNodeCreated {
                node: AgentNode {
                    node_id: id.to_string(),
                    parent_node_id: parent.to_string(),
                    call_type: CallType::Verify,
                    input_text: text.to_string(),
                    raw_process: text.to_string(),
                    conclusion: text.to_string(),
                    confidence: Some(0.5),
                    model: text.to_string(),
                },
                call: call("create_branch"),
            }
            .into()
        };
        events_of(
            SessionKind::AGENT,
            vec![
                ModelCallRecorded {
                    record,
                    call: call("chat_agent"),
                }
                .into(),
                ModelCallRecorded {
                    record: failed,
                    call: call("chat_agent"),
                }
                .into(),
                node("n_00000001", "trunk"),
                node(text, "n_00000001"),
                node("n_00000003", "n_elsewhere"),
            ],
        )
    }

    #[test]
    fn hostile_trees_parse_as_xml_with_one_element_per_thought_and_edge() {
        let all: String = HOSTILE.concat();
        for text in HOSTILE.iter().copied().chain([all.as_str()]) {
            let mut trees = vec![hostile_tree(text), think_tree(text)];
            trees.extend(family_trees(text));
            for tree in trees {
                for options in [Options::default(), Options { embedded: true }] {
                    let svg = render_with(&tree, options);
                    assert_matches_projection(&tree, &svg);
                    for raw in ["<script", "<img", "\u{202E}", "\u{0}", "\u{1b}"] {
                        assert!(!svg.contains(raw), "{raw:?} reached the picture");
                    }
                }
            }
        }
    }

    /// The families' nodes are what their folds hold: counted from the projection, not
    /// from the picture's own list.
    #[test]
    fn planning_and_qa_nodes_are_the_projection_s() {
        let tree = build(plan_events("p"));
        let plan = Planning::of(&tree).plan.as_ref().unwrap();
        let (nodes, edges) = parse(&render(&tree, &crate::tools::exports()));
        let count = |kind: &str| nodes.iter().filter(|(_, k)| k == kind).count();
        assert_eq!(count("plan"), 1);
        assert_eq!(count("clarification"), plan.clarifications.len());
        assert_eq!(count("approach"), plan.approaches.len());
        assert_eq!(count("evaluation"), Planning::of(&tree).evaluations.len());
        assert_eq!(count("close"), Planning::of(&tree).closes.len());
        assert_eq!(count("final-plan"), 1);
        assert_eq!(count("merge"), Planning::of(&tree).merges.len());
        assert_eq!(nodes.len(), 1 + 2 + 3 + 3 + 1 + 1 + 1);
        let links = |kind: &str| edges.iter().filter(|(_, _, k)| k == kind).count();
        assert_eq!(
            (links("explores"), links("clarifies"), links("evaluates")),
            (3, 2, 3)
        );
        assert_eq!(
            (links("closes"), links("merges"), links("selects")),
            (1, 1, 1)
        );
        // The selected approach is marked, with its latest score; the closed one too.
        let shown = shown_nodes(&render(&tree, &crate::tools::exports()), None);
        let approaches: Vec<&str> = shown
            .iter()
            .filter(|(_, kind, _)| kind == "approach")
            .map(|(_, _, text)| text.as_str())
            .collect();
        assert_eq!(
            approaches,
            [
                "#5 x p\u{a0}· 8.25\u{a0}· ★ selectedname p",
                "#6 y p\u{a0}· 6.80\u{a0}· closedname p",
                "#7 z pname p"
            ]
        );

        // A thinking branch's evaluation and close go on the branch's column, linked from
        // its last thought; one of a branch the session lacks goes on the main line.
        let tree = build(evaluated_branch_events("b"));
        let drawn = layout(
            &tree,
            &Picture::of(&tree, crate::tools::exports().pictures()),
        );
        let branch_column = drawn.column[&3];
        assert_ne!(branch_column, 0);
        assert_eq!(
            drawn.extra[0],
            (branch_column, 3),
            "after the branch's 2 thoughts"
        );
        assert_eq!(drawn.extra[1].0, 0, "no such branch: main line");
        assert_eq!(
            drawn.extra[2].0, branch_column,
            "the close on the branch too"
        );
        let (nodes, edges) = parse(&render(&tree, &crate::tools::exports()));
        assert!(nodes.contains(&(8, "merge".to_string())), "{nodes:?}");
        for edge in [(4, 5, "evaluates"), (4, 7, "closes"), (4, 8, "merges")] {
            assert!(
                edges.contains(&(edge.0, edge.1, edge.2.to_string())),
                "{edge:?} in {edges:?}"
            );
        }

        // QA: a tools node beside each step that has tools, stand-ins marked.
        let tree = build(qa_events("q"));
        let svg = render(&tree, &crate::tools::exports());
        let (nodes, edges) = parse(&svg);
        let with_tools = tree
            .thoughts()
            .filter(|n| {
                n.data::<crate::tools::qa::node::QaNode>()
                    .is_some_and(|qa| !qa.used_tools.is_empty())
            })
            .count();
        assert_eq!(with_tools, 2);
        assert_eq!(
            nodes.iter().filter(|(_, k)| k == "qa-tools").count(),
            with_tools
        );
        assert_eq!(
            edges.iter().filter(|(_, _, k)| k == "recommends").count(),
            with_tools
        );
        assert!(
            svg.contains("<tspan class=\"stand-in\">, stand-in q⇄</tspan>"),
            "{svg}"
        );
        let drawn = layout(
            &tree,
            &Picture::of(&tree, crate::tools::exports().pictures()),
        );
        assert_eq!(
            drawn.extra[0],
            (2, 0),
            "beside step 1, right of the branch column"
        );
        assert_eq!(drawn.extra[1], (2, 1));
    }

    /// With the slider at event k, every node shows what a fold of the first k events
    /// draws: the same nodes, kinds and label texts.
    #[test]
    fn the_replay_at_k_shows_the_picture_of_the_first_k_events() {
        for text in ["r", HOSTILE[3], HOSTILE[7]] {
            for (session, events) in [
                plan_events(text),
                evaluated_branch_events(text),
                qa_events(text),
                booster_events(text),
            ] {
                let whole = ThoughtTree::build(session, events.clone(), &crate::tools::folds());
                let page = render_with(&whole, Options { embedded: true });
                for k in 1..=events.len() as u64 {
                    let prefix = ThoughtTree::build(
                        session,
                        events[..k as usize].to_vec(),
                        &crate::tools::folds(),
                    );
                    assert_eq!(
                        shown_nodes(&page, Some(k)),
                        shown_nodes(&render(&prefix, &crate::tools::exports()), None),
                        "at event {k}"
                    );
                }
                assert_eq!(
                    shown_nodes(&page, None),
                    shown_nodes(&render(&whole, &crate::tools::exports()), None)
                );
            }
        }
    }

    #[test]
    fn kinds_are_drawn_by_kind() {
        let tree = hostile_tree("x");
        let (nodes, _) = parse(&render(&tree, &crate::tools::exports()));
        let kinds: Vec<&str> = nodes.iter().map(|(_, kind)| kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "thought", "thought", "revision", "branch", "branch", "revision", "revision",
                "branch", "thought"
            ]
        );
        let (nodes, _) = parse(&render(&think_tree("x"), &crate::tools::exports()));
        assert!(nodes.iter().all(|(_, kind)| kind == "think"));
        let exports = crate::tools::exports();
        let css = stylesheet(&exports);
        for kind in KINDS
            .iter()
            .chain(exports.pictures().iter().flat_map(|h| h.kinds))
        {
            assert!(css.contains(&format!(".k-{} rect{{", kind.name)));
        }
        for link in exports.pictures().iter().flat_map(|h| h.links) {
            assert!(css.contains(&format!(".e-{}{{", link.name)));
        }
    }

    #[test]
    fn a_branch_column_is_reused_once_its_branches_have_ended() {
        // 20 two-thought branches, one after another: one branch column in all.
        let tree = crate::export::html::tests::big_tree(1000);
        let drawn = layout(&tree, &Picture::default());
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
        let drawn = layout(&interleaved, &Picture::default());
        assert_eq!(drawn.columns, 3);
        let columns: Vec<usize> = drawn.lanes.iter().map(|lane| lane.column).collect();
        assert_eq!(columns, [1, 2]);
    }

    #[test]
    fn no_two_nodes_share_a_place() {
        for tree in family_trees("x") {
            let picture = Picture::of(&tree, crate::tools::exports().pictures());
            let drawn = layout(&tree, &picture);
            let mut places: Vec<(usize, usize)> = tree
                .thoughts()
                .map(|node| (drawn.column[&node.seq], drawn.row[&node.seq]))
                .chain(drawn.extra.iter().copied())
                .collect();
            let count = places.len();
            places.sort_unstable();
            places.dedup();
            assert_eq!(places.len(), count, "{places:?}");
            assert!(
                places
                    .iter()
                    .all(|&(c, r)| c < drawn.columns && r < drawn.rows)
            );
        }
    }

    /// A straight edge or link (down a column, or flat along a row) never runs over a
    /// node it does not join.
    #[test]
    fn straight_edges_pass_over_no_node() {
        for tree in family_trees("x") {
            let svg = render(&tree, &crate::tools::exports());
            let doc = roxmltree::Document::parse(&svg).unwrap();
            let number = |n: roxmltree::Node, name: &str| -> u32 {
                n.attribute(name).unwrap().parse().unwrap()
            };
            let boxes: Vec<(u32, u32)> = doc
                .descendants()
                .filter(|n| n.has_tag_name("rect"))
                .map(|r| (number(r, "x"), number(r, "y")))
                .collect();
            let mut straight = 0;
            for path in doc
                .descendants()
                .filter(|n| n.attribute("data-edge").is_some())
            {
                let d = path.attribute("d").unwrap();
                let numbers: Vec<u32> = d
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().unwrap())
                    .collect();
                if d.contains('L') {
                    straight += 1;
                    let (x, y1, y2) = (numbers[0], numbers[1], numbers[3]);
                    for &(bx, by) in &boxes {
                        let crosses = bx < x && x < bx + NODE_W && y1 < by + NODE_H && by < y2;
                        assert!(!crosses, "{d} crosses the node at {bx},{by}");
                    }
                } else if numbers.iter().skip(1).step_by(2).all(|&y| y == numbers[1]) {
                    // Flat along one row: no box between its ends.
                    straight += 1;
                    let (y, x1, x2) = (numbers[1], numbers[0], numbers[numbers.len() - 2]);
                    let (low, high) = (x1.min(x2), x1.max(x2));
                    for &(bx, by) in &boxes {
                        let crosses = by < y && y < by + NODE_H && low < bx && bx + NODE_W < high;
                        assert!(!crosses, "{d} crosses the node at {bx},{by}");
                    }
                }
            }
            assert!(straight > 0);
        }
    }

    /// An anomaly that is also a revision keeps the revision's fill but is outlined in red
    /// (docs/src/pictures.md): the outline is drawn over the box, after it, with the
    /// anomaly's own stroke, which no kind's `.k-… rect` rule reaches (a `<path>`).
    #[test]
    fn an_anomalous_revision_is_outlined_in_red_over_its_revision_style() {
        let tree = tree_with_aliases(
            "anomalies",
            SessionKind::THINKING,
            Vec::new(),
            vec![
                recorded(seq_thought("first", 1, 3)),
                recorded(SequentialThought {
                    is_revision: Some(true),
                    revises_thought: Some(42),
                    ..seq_thought("revises a thought that is not there", 2, 3)
                }),
                recorded(seq_thought("plain", 3, 3)),
            ],
        );
        let svg = render(&tree, &crate::tools::exports());
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let nodes: Vec<roxmltree::Node> = doc
            .descendants()
            .filter(|n| n.attribute("data-seq").is_some() && n.has_tag_name("g"))
            .collect();
        fn outline<'a, 'i>(g: roxmltree::Node<'a, 'i>) -> Option<roxmltree::Node<'a, 'i>> {
            g.children()
                .find(|c| c.attribute("class") == Some("anomaly-outline"))
        }
        let flagged: Vec<roxmltree::Node> = nodes
            .iter()
            .copied()
            .filter(|g| outline(*g).is_some())
            .collect();
        assert_eq!(flagged.len(), 1, "{svg}");
        let g = flagged[0];
        let classes: Vec<&str> = g.attribute("class").unwrap().split(' ').collect();
        assert!(
            classes.contains(&"k-revision") && classes.contains(&"anomaly"),
            "{classes:?}"
        );
        let path = outline(g).unwrap();
        assert_eq!(path.attribute("stroke"), Some(ANOMALY_STROKE));
        assert_eq!(path.attribute("fill"), Some("none"));
        assert_eq!(
            path.attribute("stroke-width"),
            Some(ANOMALY_STROKE_WIDTH.to_string().as_str())
        );
        // Drawn after (over) the box, which keeps the revision's fill.
        let order: Vec<&str> = g
            .children()
            .filter(|c| c.is_element())
            .map(|c| c.tag_name().name())
            .collect();
        let rect = order.iter().position(|t| *t == "rect").unwrap();
        let over = order.iter().position(|t| *t == "path").unwrap();
        assert!(rect < over, "{order:?}");
        // No kind's rule can reach the outline: every kind styles `rect`s only.
        assert!(
            !stylesheet(&crate::tools::exports()).contains(" path{")
                && !stylesheet(&crate::tools::exports()).contains(" path,")
        );
        // The other thoughts have no outline.
        assert!(nodes.iter().filter(|g| outline(**g).is_none()).count() >= 2);
    }

    /// Issue 35's geometry: arrowheads fit the gap between rows at any line width, a
    /// thought's text wraps to a few lines before it is cut, a span's space stays outside
    /// its `<tspan>`, and the header counts in the singular for one.
    #[test]
    fn arrowheads_fit_the_gap_text_wraps_spaces_survive_and_counts_agree() {
        let long = "Question: why does our nightly export write an empty file on some nights, \
                    and only before the deadline of six in the morning, never after it?";
        let tree = build(events_of(
            SessionKind::THINKING,
            vec![recorded(seq_thought(long, 1, 1))],
        ));
        let svg = render(&tree, &crate::tools::exports());
        assert!(svg.contains("markerUnits=\"userSpaceOnUse\""), "{svg}");
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let node = doc
            .descendants()
            .find(|n| n.attribute("data-kind").is_some())
            .unwrap();
        let lines: Vec<&str> = node
            .children()
            .filter(|n| n.has_tag_name("text"))
            .skip(1)
            .map(|t| t.text().unwrap_or(""))
            .collect();
        assert_eq!(lines.len(), TEXT_LINES, "{lines:?}");
        assert_eq!(lines[0], "Question: why does our nightly");
        assert!(lines.iter().all(|l| l.chars().count() <= TEXT_MAX_CHARS));
        assert!(lines[TEXT_LINES - 1].ends_with('…'), "{lines:?}");
        assert!(svg.contains("1 thought · 0 edges · 0 branches"), "{svg}");
        // A short thought is one line.
        let tree = build(events_of(
            SessionKind::THINKING,
            vec![recorded(seq_thought("short", 1, 1))],
        ));
        let svg = render(&tree, &crate::tools::exports());
        assert_eq!(svg.matches("<text x=").count(), 2, "{svg}");

        let mut out = String::new();
        let spans = [
            Span::during("0.78", 1, None),
            Span::during(" · ✓ chosen", 1, None).with_class("booster-chosen"),
        ];
        push_spans(&mut out, &mut String::new(), &spans, 1, Options::default());
        assert_eq!(
            out,
            "0.78<tspan class=\"booster-chosen\">\u{a0}· ✓ chosen</tspan>"
        );
    }

    #[test]
    fn an_empty_tree_is_still_a_picture() {
        let svg = render(
            &ThoughtTree::new(SessionId::generate(), &crate::tools::folds()),
            &crate::tools::exports(),
        );
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
