//! What a tool family adds to the SVG picture and the HTML page of a session, beside the
//! thoughts the core draws: the seam between the families and [`super::svg`] /
//! [`super::html`].
//!
//! Owns: [`Pictures`] (what a family registers as `Family::picture`: its node and link
//! kinds, with their constant styles, and a `draw` function), [`Picture`] (what the
//! families' `draw`s build for one tree: extra [`Node`]s, [`Link`]s and [`Mark`]s on
//! thoughts), and [`Picture::of`], which asks every registration it is handed (those of
//! the renderer's [`super::family::Exports`]). Must not: know any family, or carry
//! anything but text: the renderers escape every text, and ids, classes and styles are
//! the generated ones or the `&'static` ones declared here.
//!
//! Replay: a node appears at its `seq` (the event that recorded it). A part of its label
//! that changes later (an approach's score, the selected mark) is a [`Span`] with the
//! event it appears at (`from`) and the event that replaces it (`until`), so the HTML
//! slider shows each node as it stood at event k, the same as a fold of the first k
//! events would draw it.

use crate::projection::tree::ThoughtTree;

/// A kind of node and its style (constant CSS, never content).
#[derive(Debug, PartialEq)]
pub(crate) struct NodeKind {
    /// `data-kind` and the class `k-<name>`: lowercase ASCII letters and `-` only.
    pub name: &'static str,
    /// Marker written before the label in text (Markdown, Mermaid, the HTML page's list).
    pub marker: &'static str,
    /// Marker drawn before the label in the picture: a shape, in the colour of the kind's
    /// stroke, so the picture never depends on an emoji font.
    pub glyph: Glyph,
    /// CSS declarations of its box.
    pub style: &'static str,
}

/// A node's marker as a shape: SVG path data in a 12 × 12 box (drawn at the start of the
/// node's head line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Glyph {
    Circle,
    Square,
    Diamond,
    Triangle,
    Hexagon,
    Arrow,
    Cross,
    Flag,
}

impl Glyph {
    /// Its outline in the 12 × 12 box, as path data.
    pub(crate) fn path(self) -> &'static str {
        match self {
            Glyph::Circle => "M6 0a6 6 0 1 0 .01 0z",
            Glyph::Square => "M1 1h10v10h-10z",
            Glyph::Diamond => "M6 0l6 6-6 6-6-6z",
            Glyph::Triangle => "M6 0l6 11h-12z",
            Glyph::Hexagon => "M3 0h6l3 6-3 6h-6l-3-6z",
            Glyph::Arrow => "M1 0l10 6-10 6z",
            Glyph::Cross => "M4 0h4v4h4v4h-4v4h-4v-4h-4v-4h4z",
            Glyph::Flag => "M1 0h2v12h-2zM3 0h8l-2 3 2 3h-8z",
        }
    }
}

/// A kind of link between two nodes and its style (constant CSS).
#[derive(Debug, PartialEq)]
pub(crate) struct LinkKind {
    /// `data-edge` and the class `e-<name>`: lowercase ASCII letters and `_` only.
    pub name: &'static str,
    /// CSS declarations of its path.
    pub style: &'static str,
}

/// What a family registers to be drawn (`Family::picture`).
pub(crate) struct Pictures {
    /// The kinds of node it draws (or gives its thoughts): their styles are in every
    /// picture's stylesheet, so a page the `ui` updates live already has them.
    pub kinds: &'static [NodeKind],
    /// The kinds of link it draws.
    pub links: &'static [LinkKind],
    /// Adds what it draws of `tree` to `picture` (called for every picture, so it must
    /// be cheap when the tree holds nothing of the family's).
    pub draw: fn(&ThoughtTree, &mut Picture),
    /// Extra CSS rules (classes of its [`Span`]s), constant text.
    pub css: &'static str,
}

/// A node of a [`Picture`], as [`Picture::add`] returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeId(pub(crate) usize);

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum At {
    /// The thought recorded by event `seq`.
    Thought(u64),
    /// A family's node.
    Node(NodeId),
}

/// Where a family's node stands.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Place {
    /// A row of its own (among the thoughts, in event order) in the main line's column.
    Main,
    /// A row of its own in the column of the thoughts' branch with this id (the branch's
    /// column is kept for it); the main line's column when the tree has no such branch.
    Branch(String),
    /// A row of its own in a column of the family's, headed with this name (rows of one
    /// lane share a column, like a branch).
    Lane(&'static str),
    /// In the row of `At`, in a column right of every line (a note on a thought or node).
    Beside(At),
}

/// A piece of a label: text, shown from event `from` (0: with its node) until event
/// `until` (replaced then; `None`: still shown at the end).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Span {
    pub text: String,
    pub from: u64,
    pub until: Option<u64>,
    /// A class of the family's [`Pictures::css`] (constant), if any.
    pub class: Option<&'static str>,
}

impl Span {
    /// Text shown as long as its node.
    pub(crate) fn text(text: impl Into<String>) -> Span {
        Span {
            text: text.into(),
            from: 0,
            until: None,
            class: None,
        }
    }

    /// Text shown from event `from` until event `until`.
    pub(crate) fn during(text: impl Into<String>, from: u64, until: Option<u64>) -> Span {
        Span {
            text: text.into(),
            from,
            until,
            class: None,
        }
    }

    pub(crate) fn with_class(mut self, class: &'static str) -> Span {
        self.class = Some(class);
        self
    }
}

/// An item of the page's list of events, for a node whose event is no thought.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Entry {
    /// The line under the number: tool, branch, score… (plain text).
    pub meta: String,
    /// The event's main text (shown whole, line breaks kept).
    pub text: String,
    /// Labelled details, one line each.
    pub details: Vec<(&'static str, String)>,
}

/// A node a family draws.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    /// The event that recorded it (`data-seq`).
    pub seq: u64,
    pub kind: &'static NodeKind,
    pub place: Place,
    /// First line, after the marker.
    pub head: Vec<Span>,
    /// Second line.
    pub text: Vec<Span>,
    /// Its tooltip: the full text.
    pub title: String,
    /// Its item in the page's list, when its event is no thought (each event is listed
    /// once: a note beside a thought recorded by the same event has none).
    pub entry: Option<Entry>,
}

/// What a family adds to a thought the core draws.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Mark {
    /// The thought's event.
    pub seq: u64,
    /// Drawn as this kind instead of the core's.
    pub kind: Option<&'static NodeKind>,
    /// Appended to the node's first line.
    pub head: Vec<Span>,
    /// The thought's count as it grew, drawn after its number in place of `/total`
    /// (each span shown while that count stood); empty: the node's own total.
    pub total: Vec<Span>,
    /// Appended to the thought's item in the page's list.
    pub details: Vec<(&'static str, String)>,
}

/// A link a family draws (`data-seq`: the later of its ends').
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Link {
    pub from: At,
    pub to: At,
    pub kind: &'static LinkKind,
}

/// Everything the families draw of one tree, besides its thoughts and edges.
#[derive(Clone, Debug, Default)]
pub(crate) struct Picture {
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
    pub marks: Vec<Mark>,
}

impl Picture {
    /// What every registration of `pictures` (the families', in registry order) draws of
    /// `tree`.
    pub(crate) fn of(tree: &ThoughtTree, pictures: &[&'static Pictures]) -> Picture {
        let mut picture = Picture::default();
        for hooks in pictures {
            (hooks.draw)(tree, &mut picture);
        }
        picture
    }

    /// Adds a node; links can then point at it.
    pub(crate) fn add(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        NodeId(self.nodes.len() - 1)
    }

    /// Links `from` to `to`.
    pub(crate) fn link(&mut self, from: At, to: At, kind: &'static LinkKind) {
        self.links.push(Link { from, to, kind });
    }

    pub(crate) fn mark(&mut self, mark: Mark) {
        self.marks.push(mark);
    }

    /// The event an end stands for.
    pub(crate) fn seq_of(&self, at: At) -> u64 {
        match at {
            At::Thought(seq) => seq,
            At::Node(id) => self.nodes[id.0].seq,
        }
    }
}

/// The seq of the last thought of branch `branch` recorded before event `before`, if
/// any (where a note on the branch as it stood then attaches).
pub(crate) fn branch_tail(tree: &ThoughtTree, branch: &str, before: u64) -> Option<u64> {
    tree.thoughts()
        .take_while(|node| node.seq < before)
        .filter(|node| node.branch_id.as_deref() == Some(branch))
        .map(|node| node.seq)
        .last()
}

/// `text` with whitespace collapsed, cut to `max_chars` (an ellipsis marks the cut): for
/// names inside a label.
pub(crate) fn short(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    super::cut_into(&mut out, text, max_chars);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn kind_names_are_safe_as_classes_and_unique() {
        let mut names: Vec<&str> = Vec::new();
        for hooks in crate::tools::exports().pictures() {
            for kind in hooks.kinds {
                assert!(
                    kind.name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '-'),
                    "{}",
                    kind.name
                );
                names.push(kind.name);
            }
            for link in hooks.links {
                assert!(
                    link.name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c == '_'),
                    "{}",
                    link.name
                );
            }
        }
        names.extend(crate::export::svg::KINDS.iter().map(|k| k.name));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a node kind is declared twice");
    }
}
