//! Mermaid flowchart of a thought tree.
//!
//! Owns: the `flowchart TD` text of a [`ThoughtTree`] and [`escape_label`], the one
//! escaper every piece of model-written text in it goes through. One node per thought
//! (id `t<seq>`), one edge per graph edge (`next` solid, `revises` dashed, `branches_from`
//! labelled with the branch id), one subgraph per branch (id `b<n>`, in first-seen order).
//!
//! The families add their pieces through [`super::family::FamilyRender`], the renderers
//! of the [`Exports`] a render is handed: a diagram of their own instead, their nodes and
//! edges after the class definitions (counted in the header), a branch title's suffix, a
//! thought label's extra lines.
//!
//! Must not: take an id, a class name or a `%%` comment from content (ids are generated,
//! the comment holds counts only), put model-written text anywhere but inside a quoted,
//! escaped label, add or drop a thought or an edge (callers compare the diagram's node
//! and edge counts with the projection's), or name a family. The only extra node is the
//! placeholder of a tree without thoughts or family nodes, id [`EMPTY_NODE_ID`].

use crate::export::counted;
/// Text cut to fit a label is `export`'s (the SVG's labels take it from here too).
pub(crate) use crate::export::cut_into;
use crate::export::family::{Exports, FamilyRender};
use crate::projection::tree::{Anomaly, EdgeKind, ThoughtNode, ThoughtTree};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Most characters of thought text shown in a node label (the full text is in the JSON
/// export). Counted in chars, before escaping, ellipsis included.
pub(crate) const LABEL_MAX_CHARS: usize = 80;

/// Most characters of a branch id shown in a node prefix or an edge label.
pub(crate) const BRANCH_ID_MAX_CHARS: usize = 24;

/// Most characters of a branch id shown in its subgraph title.
pub(crate) const BRANCH_TITLE_MAX_CHARS: usize = 60;

/// Id of the one node of a tree without thoughts (never `t<digits>`, so it is not
/// counted as a thought).
pub(crate) const EMPTY_NODE_ID: &str = "empty";

/// Stands in for control, bidi and other characters that must not reach the diagram.
const REPLACEMENT: &str = "\u{FFFD}";

/// Our own line break between a label's prefix and its text (never taken from content).
pub(crate) const LABEL_BREAK: &str = "<br/>";

/// Indentation of statements.
const INDENT: &str = "    ";

/// Class of a node, in precedence order: a revision on a branch is a revision.
const CLASS_REVISION: &str = "revision";
const CLASS_BRANCH: &str = "branch";
const CLASS_THINK: &str = "think";
/// Added to the nodes an anomaly names.
pub(crate) const CLASS_ANOMALY: &str = "anomaly";
const CLASS_EMPTY: &str = "empty";

/// Style of each class, as `classDef` lines (constant text, no content).
pub(crate) const CLASS_DEFS: [(&str, &str); 5] = [
    (
        CLASS_REVISION,
        "fill:#fff4e6,stroke:#e8590c,stroke-dasharray:4 3",
    ),
    (CLASS_BRANCH, "fill:#ebfbee,stroke:#2f9e44"),
    (CLASS_THINK, "fill:#e7f5ff,stroke:#1c7ed6"),
    (CLASS_ANOMALY, "stroke:#e03131,stroke-width:3px"),
    (CLASS_EMPTY, "fill:#f8f9fa,stroke:#adb5bd,color:#868e96"),
];

/// Renders the tree as a Mermaid flowchart, with the families' pieces `exports` hold.
pub fn render(tree: &ThoughtTree, exports: &Exports) -> String {
    let renders = exports.renders();
    // A family may draw its sessions its own way (a search's chosen path and candidates).
    if let Some(diagram) = renders.iter().find_map(|r| r.mermaid_instead(tree)) {
        return diagram;
    }
    let edges = tree.edges();
    let mut out = String::with_capacity(256 + tree.order.len() * (LABEL_MAX_CHARS + 64));
    out.push_str("flowchart TD\n");
    // Generated values only: a ULID, an enum name and counts.
    let _ = writeln!(
        out,
        "{INDENT}%% reasoning-ledger session {} ({}), at seq {}: {}, {}, {}, {}",
        tree.session,
        tree.kind().map_or("unknown", |kind| kind.as_str()),
        tree.at_seq,
        counted(tree.order.len(), "thought", "thoughts"),
        counted(
            edges.len() + renders.iter().map(|r| r.mermaid_edges(tree)).sum::<usize>(),
            "edge",
            "edges"
        ),
        counted(tree.branches.len(), "branch", "branches"),
        counted(tree.anomalies.len(), "anomaly", "anomalies"),
    );
    for (class, style) in CLASS_DEFS {
        let _ = writeln!(out, "{INDENT}classDef {class} {style}");
    }
    // The families' own nodes (a plan's problem and approaches, an agent's trunk and
    // branch nodes), each with its class definitions: every renderer draws.
    let mut family_nodes = false;
    for render in renders {
        family_nodes |= render.mermaid_nodes(tree, &mut out);
    }

    if tree.order.is_empty() {
        if !family_nodes {
            let _ = writeln!(
                out,
                "{INDENT}{EMPTY_NODE_ID}[\"{}\"]:::{CLASS_EMPTY}",
                escape_label("This session has no thoughts yet.")
            );
        }
        return out;
    }

    // Main line (and any thought whose branch is unknown) first, then one subgraph per branch.
    let branch_index: HashMap<&str, usize> = tree
        .branches
        .iter()
        .enumerate()
        .map(|(index, branch)| (branch.id.as_str(), index))
        .collect();
    let mut scratch = String::new();
    let mut by_branch: Vec<Vec<&ThoughtNode>> = vec![Vec::new(); tree.branches.len()];
    for node in tree.thoughts() {
        match node
            .branch_id
            .as_deref()
            .and_then(|id| branch_index.get(id).copied())
        {
            Some(index) => by_branch[index].push(node),
            None => write_node(&mut out, &mut scratch, INDENT, node, renders),
        }
    }
    let nested = format!("{INDENT}{INDENT}");
    for (index, (branch, nodes)) in tree.branches.iter().zip(&by_branch).enumerate() {
        let _ = write!(out, "{INDENT}subgraph b{} [\"🌿 ", index + 1);
        push_label(&mut out, &mut scratch, &branch.id, BRANCH_TITLE_MAX_CHARS);
        let _ = write!(out, " · from thought {}", branch.from_thought);
        // What the families know of it (an evaluation's score, a close: generated text).
        for render in renders {
            render.mermaid_branch_title(tree, &branch.id, &mut out);
        }
        out.push_str("\"]\n");
        for node in nodes {
            write_node(&mut out, &mut scratch, &nested, node, renders);
        }
        let _ = writeln!(out, "{INDENT}end");
    }

    for edge in &edges {
        let (from, to) = (edge.from, edge.to);
        match edge.kind {
            EdgeKind::Next => {
                let _ = writeln!(out, "{INDENT}t{from} --> t{to}");
            }
            EdgeKind::Revises => {
                let _ = writeln!(out, "{INDENT}t{from} -.->|revises| t{to}");
            }
            EdgeKind::BranchesFrom => {
                // `order` is in seq order: find the branch's first thought by its seq.
                let branch = tree
                    .order
                    .binary_search_by_key(&to, |index| tree.graph[*index].seq)
                    .ok()
                    .and_then(|at| tree.graph[tree.order[at]].branch_id.as_deref())
                    .unwrap_or("branch");
                let _ = write!(out, "{INDENT}t{from} -->|\"🌿 ");
                push_label(&mut out, &mut scratch, branch, BRANCH_ID_MAX_CHARS);
                let _ = writeln!(out, "\"| t{to}");
            }
        }
    }

    let mut flagged: Vec<u64> = tree.anomalies.iter().filter_map(anomaly_seq).collect();
    flagged.sort_unstable();
    flagged.dedup();
    if !flagged.is_empty() {
        let ids: Vec<String> = flagged.iter().map(|seq| format!("t{seq}")).collect();
        let _ = writeln!(out, "{INDENT}class {} {CLASS_ANOMALY}", ids.join(","));
    }
    out
}

/// Seq of the thought an anomaly is about (always a node of the tree).
pub(crate) fn anomaly_seq(anomaly: &Anomaly) -> Option<u64> {
    match anomaly {
        Anomaly::DanglingRevision { seq, .. }
        | Anomaly::DanglingBranchPoint { seq, .. }
        | Anomaly::SelfReference { seq, .. } => Some(*seq),
        Anomaly::Cycle => None,
    }
}

/// One node statement: `t<seq>["prefix<br/>text"]:::class`, with what `renders` add to a
/// thought carrying their data; `scratch` is reused for cutting text.
fn write_node(
    out: &mut String,
    scratch: &mut String,
    indent: &str,
    node: &ThoughtNode,
    renders: &[&'static dyn FamilyRender],
) {
    let _ = write!(out, "{indent}t{}[\"", node.seq);
    write_prefix(out, scratch, node);
    out.push_str(LABEL_BREAK);
    push_label(out, scratch, &node.thought, LABEL_MAX_CHARS);
    if node.data.is_some() {
        for render in renders {
            render.mermaid_thought(node, out, scratch);
        }
    }
    out.push_str("\"]");
    if let Some(class) = class_of(node) {
        out.push_str(":::");
        out.push_str(class);
    }
    out.push('\n');
}

/// The short heading of a node label (kind marker, number/total, branch, revision),
/// escaped.
fn write_prefix(out: &mut String, scratch: &mut String, node: &ThoughtNode) {
    let revision = is_revision(node);
    let number = node.thought_number;
    let _ = match (node.total_thoughts, revision, node.branch_id.is_some()) {
        (None, _, _) => write!(out, "🤔 {number}"),
        (Some(total), true, _) => write!(out, "🔄 {number}/{total}"),
        (Some(total), false, true) => write!(out, "🌿 {number}/{total}"),
        (Some(total), false, false) => write!(out, "💭 {number}/{total}"),
    };
    if let Some(branch) = &node.branch_id {
        out.push_str(" · ");
        push_label(out, scratch, branch, BRANCH_ID_MAX_CHARS);
    }
    if revision {
        let _ = match node.revises_thought {
            Some(target) => write!(out, " · revises {target}"),
            None => write!(out, " · revision"),
        };
    }
}

/// The tree's rule: a thought is a revision when it says so or names what it revises.
pub(crate) fn is_revision(node: &ThoughtNode) -> bool {
    node.is_revision == Some(true) || node.revises_thought.is_some()
}

fn class_of(node: &ThoughtNode) -> Option<&'static str> {
    if is_revision(node) {
        Some(CLASS_REVISION)
    } else if node.branch_id.is_some() {
        Some(CLASS_BRANCH)
    } else if node.total_thoughts.is_none() {
        Some(CLASS_THINK)
    } else {
        None
    }
}

/// Text for inside `"…"`, appended to `out`: whitespace collapsed, cut to `max_chars`
/// (into `scratch`), then escaped (cut first, so no entity is ever split).
pub(crate) fn push_label(out: &mut String, scratch: &mut String, text: &str, max_chars: usize) {
    scratch.clear();
    cut_into(scratch, text, max_chars);
    escape_into(out, scratch);
}

/// Escapes text for a quoted Mermaid label (`["…"]`, `|"…"|`, a subgraph title) in one
/// pass over its chars, so nothing a model wrote can end the string, start a directive
/// or comment, or become markup:
///
/// - `#` → `#35;` (so a literal `#` never starts an entity), `"` → `#quot;`, `<` `>` `&`
///   → `#lt;` `#gt;` `#amp;` (no HTML, and `-->` loses its `>`);
/// - brackets, braces, parentheses, `|`, backtick, `%` (so no `%%` comment or `%%{init}`
///   directive), `;`, `:` (so Mermaid's `style…:…#…;` rewrite never matches), `\`, and
///   the halves of Mermaid's own entity placeholders (`ﬂ`, `¶`) → `#NNN;`;
/// - the word `end` (any case) gets its first letter as `#NNN;`;
/// - newlines, carriage returns, tabs and other line or paragraph separators → a space;
/// - control characters, bidi overrides, embeddings and isolates, and XML
///   non-characters → U+FFFD.
///
/// Mermaid turns `#NNN;` and `#name;` back into the character when it draws the label.
pub(crate) fn escape_label(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4 + 8);
    escape_into(&mut out, text);
    out
}

/// [`escape_label`], appending to `out`: characters that stay are copied in runs.
fn escape_into(out: &mut String, text: &str) {
    let mut previous: Option<char> = None;
    let mut kept_from = 0;
    for (index, c) in text.char_indices() {
        let replacement = match c {
            'e' if starts_word_end(text, index, previous) => Some("#101;"),
            'E' if starts_word_end(text, index, previous) => Some("#69;"),
            // Fast path: letters, digits and spaces (but a word `end`) stay.
            c if c.is_ascii_alphanumeric() || c == ' ' => None,
            c => entity(c).or_else(|| match c {
                '\n' | '\r' | '\t' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
                    Some(" ")
                }
                c if is_unsafe_char(c) => Some(REPLACEMENT),
                _ => None,
            }),
        };
        if let Some(replacement) = replacement {
            out.push_str(&text[kept_from..index]);
            out.push_str(replacement);
            kept_from = index + c.len_utf8();
        }
        previous = Some(c);
    }
    out.push_str(&text[kept_from..]);
}

/// The Mermaid entity that stands for `c` in a label, for the characters that always
/// get one.
fn entity(c: char) -> Option<&'static str> {
    Some(match c {
        '#' => "#35;",
        '"' => "#quot;",
        '<' => "#lt;",
        '>' => "#gt;",
        '&' => "#amp;",
        '[' => "#91;",
        ']' => "#93;",
        '{' => "#123;",
        '}' => "#125;",
        '(' => "#40;",
        ')' => "#41;",
        '|' => "#124;",
        '`' => "#96;",
        '%' => "#37;",
        ';' => "#59;",
        ':' => "#58;",
        '\\' => "#92;",
        '\u{FB02}' => "#64258;",
        '\u{B6}' => "#182;",
        _ => return None,
    })
}

/// Whether the `e` at `index` begins the whole word `end` (any case) as it will stand in
/// the escaped text, where a neighbour that becomes an entity is a word boundary.
fn starts_word_end(text: &str, index: usize, previous: Option<char>) -> bool {
    let stays_word_char = |c: char| is_word_char(c) && entity(c).is_none();
    if previous.is_some_and(stays_word_char) {
        return false;
    }
    let rest = &text[index..];
    rest.get(..3)
        .is_some_and(|word| word.eq_ignore_ascii_case("end"))
        && !rest[3..].chars().next().is_some_and(stays_word_char)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Control characters, bidi formatting characters (which would reorder the text around
/// them when drawn) and the XML non-characters U+FFFE and U+FFFF.
pub(crate) fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{FFFE}'
                | '\u{FFFF}'
        )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::{Payload, SessionId, SessionKind};
    use crate::projection::fixtures::*;
    use crate::testing::fuzz::{
        assert_label_inert as assert_inert, check_mermaid_structure as check_structure,
        decode_label as decode, quoted_strings, shown_label as shown,
    };
    use crate::tools::planning::payload::{Body, PlanningEvent};
    use crate::tools::planning::state::{
        Approach, BranchClose, BranchMerge, Evaluation, FinalPlan, Folded, PlanInit, Planning,
    };
    use crate::tools::thinking::{SequentialThought, ThinkThought, ThinkingEvent};

    fn label(text: &str, max_chars: usize) -> String {
        let mut out = String::new();
        push_label(&mut out, &mut String::new(), text, max_chars);
        out
    }

    fn cut(text: &str, max_chars: usize) -> String {
        let mut out = String::new();
        cut_into(&mut out, text, max_chars);
        out
    }

    /// Strings a model might write, each trying to break out of a label.
    pub(crate) const HOSTILE: &[&str] = &[
        "plain words",
        "\"]; t9[\"injected",
        "quote \" and 'single'",
        "[brackets] {braces} (parens) ((double)) [[sub]] {{hex}}",
        "pipe | here |\"|",
        "`backtick` ```fence``` \"`markdown`\"",
        "A --> B -.-> C ==> D --- E -- text --> F",
        "%% comment\n%%{init: {\"theme\": \"dark\", \"securityLevel\": \"loose\"}}%%",
        "end",
        "END of story; the end. endless, depend, Ending end",
        "subgraph x\nend\nclick t1 call alert(1)",
        "# heading #35; #quot; &amp; &lt;",
        "line1\nline2\r\nline3\rline4\ttabbed",
        "<script>alert(1)</script><img src=x onerror=alert(1)>",
        "emoji 🧠💭🔄🌿 👨‍👩‍👧 ✔️ 🇺🇳",
        "nul \0 bell \u{7} del \u{7f} c1 \u{85}\u{9b}",
        "bidi \u{202E}gnp.exe\u{202C} \u{2066}isolate\u{2069} \u{200F}",
        "style t1 fill:#f00;\nclassDef x fill:#0f0;",
        "ﬂ°lt¶ß entity placeholder ﬂ°°35¶ß",
        "backslash \\\" \\n \\",
        "line sep\u{2028}para sep\u{2029}",
        "colon: semi; amp & lt < gt >",
        "",
        "   ",
        "\u{FFFE}\u{FFFF}",
        "zero\u{200B}width\u{200C}non\u{200D}joiner\u{2060}wj\u{FEFF}bom \u{E0001}tag",
        "esc \u{1b}[31mred\u{1b}[0m lrm\u{200E} alm\u{061C} pdi\u{2069} crlf\r\n",
    ];

    /// An agent session whose node ids, parents, questions, conclusions and model names
    /// are all `text`: nested nodes, a node under an unknown parent, low and no confidence.
    fn agent_tree(text: &str) -> ThoughtTree {
        use crate::tools::agent::node::{AgentNode, CallType};
        use crate::tools::agent::payload::BranchNodeCreated;
        let node = |id: &str, parent: &str, confidence: Option<f64>| -> Payload {
            BranchNodeCreated {
                node: AgentNode {
                    node_id: id.to_string(),
                    parent_node_id: parent.to_string(),
                    call_type: CallType::Explore,
                    input_text: text.to_string(),
                    raw_process: text.repeat(3),
                    conclusion: text.to_string(),
                    confidence,
                    model: text.to_string(),
                },
                call: crate::event::CallRecord {
                    tool: "create_branch".into(),
                    raw_arguments: serde_json::json!({}).into(),
                    duration_us: 1,
                },
            }
            .into()
        };
        tree_of(
            text,
            SessionKind::AGENT,
            vec![
                node("n_00000001", "trunk", Some(0.9)),
                node(text, "n_00000001", Some(0.2)),
                node("n_00000003", text, None),
                node("n_00000004", "n_missing", Some(1.0)),
            ],
        )
    }

    #[test]
    fn agent_trees_draw_the_trunk_and_one_edge_per_node_whatever_the_model_wrote() {
        for text in HOSTILE {
            let tree = agent_tree(text);
            let diagram = render(&tree, &crate::tools::exports());
            let (nodes, edges, subgraphs) = check_structure(&diagram, &crate::tools::exports());
            assert_eq!((nodes, edges, subgraphs), (0, 4, 0), "{diagram}");
            assert!(
                diagram.contains("r0 --> g1") && diagram.contains("g1 --> g2"),
                "{diagram}"
            );
            assert!(
                diagram.contains("r0 --> g4"),
                "unknown parent hangs off the trunk: {diagram}"
            );
            for line in diagram.lines() {
                for quoted in quoted_strings(line) {
                    for part in quoted.split(LABEL_BREAK) {
                        assert_inert(part);
                    }
                }
            }
        }
    }

    /// A tree with every edge kind, two branches, a think-like node and anomalies, whose
    /// every text field (title, thoughts, branch ids) is `text`.
    pub(crate) fn hostile_tree(text: &str) -> ThoughtTree {
        let branch_a = format!("a {text}");
        let branch_b = format!("b {text}");
        let mut payloads = vec![
            recorded(seq_thought(text, 1, 4)),
            recorded(seq_thought(&format!("second: {text}"), 2, 4)),
            recorded(SequentialThought {
                is_revision: Some(true),
                revises_thought: Some(1),
                ..seq_thought(&format!("revision of 1: {text}"), 3, 4)
            }),
            recorded(SequentialThought {
                branch_from_thought: Some(2),
                branch_id: Some(branch_a.clone()),
                ..seq_thought(&format!("branch a: {text}"), 3, 5)
            }),
            recorded(SequentialThought {
                branch_from_thought: Some(2),
                branch_id: Some(branch_a),
                ..seq_thought(text, 4, 5)
            }),
            recorded(SequentialThought {
                branch_from_thought: Some(1),
                branch_id: Some(branch_b.clone()),
                is_revision: Some(true),
                revises_thought: Some(2),
                ..seq_thought(text, 3, 5)
            }),
            // Dangling references: anomalies, no edges.
            recorded(SequentialThought {
                revises_thought: Some(99),
                ..seq_thought(text, 5, 5)
            }),
            recorded(SequentialThought {
                branch_from_thought: Some(77),
                branch_id: Some(format!("c {text}")),
                ..seq_thought(text, 6, 6)
            }),
        ];
        payloads.push(recorded(SequentialThought {
            next_thought_needed: false,
            ..seq_thought(&text.repeat(20), 7, 7)
        }));
        tree_of(text, SessionKind::THINKING, payloads)
    }

    fn planning(body: Body) -> Payload {
        PlanningEvent {
            body,
            call: call("deep_planning"),
        }
        .into()
    }

    /// A finalized plan (two approaches, one evaluated, one closed, a merge) whose every
    /// text is `text`.
    fn plan_tree(text: &str) -> ThoughtTree {
        let approach = |id: String| {
            planning(Body::ApproachExplored(Approach {
                branch_id: id,
                name: format!("name {text}"),
                description: Some(text.to_string()),
                pros: vec![text.to_string()],
                cons: Vec::new(),
            }))
        };
        let payloads = vec![
            planning(Body::PlanInitialized(PlanInit {
                problem: text.to_string(),
                context: Some(text.to_string()),
                constraints: vec![text.to_string()],
            })),
            approach(format!("x {text}")),
            approach(format!("y {text}")),
            planning(Body::BranchEvaluated(Evaluation {
                branch_id: format!("x {text}"),
                criteria: Vec::new(),
                score: 7.8,
                rationale: Some(text.to_string()),
                recommendation: Some(text.to_string()),
            })),
            planning(Body::BranchClosed(BranchClose {
                branch_id: format!("y {text}"),
                conclusion: text.to_string(),
            })),
            planning(Body::BranchMerged(BranchMerge {
                branch_id: format!("y {text}"),
                strategy: "summary".into(),
                thought_number: 1,
                thought: text.to_string(),
            })),
            planning(Body::PlanFinalized(FinalPlan {
                selected_branch: format!("x {text}"),
                steps: Vec::new(),
                risks: Vec::new(),
                assumptions: Vec::new(),
                success_criteria: Vec::new(),
            })),
        ];
        tree_of(text, SessionKind::PLANNING, payloads)
    }

    /// [`hostile_tree`] with its first branch evaluated and closed.
    fn evaluated_tree(text: &str) -> ThoughtTree {
        let mut tree = hostile_tree(text);
        let branch = tree.branches[0].id.clone();
        let seq = tree.at_seq;
        let planning = tree.family_or_default::<Planning>();
        planning.evaluations.push(Folded {
            seq,
            item: Evaluation {
                branch_id: branch.clone(),
                criteria: Vec::new(),
                score: 5.0,
                rationale: None,
                recommendation: None,
            },
        });
        planning.closes.push(Folded {
            seq,
            item: BranchClose {
                branch_id: branch,
                conclusion: text.to_string(),
            },
        });
        tree
    }

    #[test]
    fn plans_and_evaluated_branches_render_within_the_structure() {
        for text in HOSTILE {
            for tree in [plan_tree(text), evaluated_tree(text)] {
                crate::testing::fuzz::check_render(&tree, &crate::tools::exports());
            }
        }
        let diagram = render(&plan_tree("p"), &crate::tools::exports());
        assert!(
            diagram.contains("a1[\"x p · name p · score 7.80 · p\"]:::selected"),
            "{diagram}"
        );
        assert!(
            diagram.contains("a2[\"y p · name p · closed\"]:::approach"),
            "{diagram}"
        );
        assert!(
            !diagram.contains(&format!("{EMPTY_NODE_ID}[")),
            "no placeholder beside a plan: {diagram}"
        );
        let diagram = render(&evaluated_tree("q"), &crate::tools::exports());
        assert!(
            diagram.contains("from thought 2 · score 5.00 · closed\"]"),
            "{diagram}"
        );
    }

    pub(crate) fn think_tree(text: &str) -> ThoughtTree {
        let payloads = (1..=3)
            .map(|index| -> Payload {
                ThinkingEvent::ThinkRecorded {
                    thought: ThinkThought {
                        thread_purpose: text.into(),
                        thought: format!("{index}: {text}"),
                        thought_index: index,
                        tool_recommendation: text.into(),
                        left_to_be_done: text.into(),
                        open_items: vec![text.into(), "second".into()],
                    },
                    call: call("think"),
                }
                .into()
            })
            .collect();
        tree_of(text, SessionKind::THINK, payloads)
    }

    #[test]
    fn escape_label_makes_hostile_text_inert_and_round_trips() {
        for text in HOSTILE {
            let escaped = escape_label(text);
            assert_inert(&escaped);
            assert_eq!(decode(&escaped), shown(text), "round trip of {text:?}");
        }
    }

    #[test]
    fn escape_label_examples() {
        assert_eq!(escape_label("#"), "#35;");
        assert_eq!(escape_label("#quot;"), "#35;quot#59;");
        assert_eq!(escape_label("a\"b"), "a#quot;b");
        assert_eq!(escape_label("<script>"), "#lt;script#gt;");
        assert_eq!(escape_label("a --> b"), "a --#gt; b");
        assert_eq!(escape_label("%%{init}%%"), "#37;#37;#123;init#125;#37;#37;");
        assert_eq!(escape_label("the end"), "the #101;nd");
        assert_eq!(escape_label("End"), "#69;nd");
        assert_eq!(escape_label("endless depend end_"), "endless depend end_");
        assert_eq!(escape_label("ﬂend endﬂ"), "#64258;#101;nd #101;nd#64258;");
        assert_eq!(escape_label("a\nb\r\nc\td"), "a b  c d");
        assert_eq!(escape_label("x\0y\u{202E}z"), "x\u{FFFD}y\u{FFFD}z");
        assert_eq!(escape_label("🧠 ok"), "🧠 ok");
        assert_eq!(
            escape_label("[a](b){c}|d|`e`"),
            "#91;a#93;#40;b#41;#123;c#125;#124;d#124;#96;e#96;"
        );
    }

    #[test]
    fn labels_are_cut_before_escaping() {
        let hashes = "#".repeat(200);
        let text = label(&hashes, LABEL_MAX_CHARS);
        assert_eq!(text, format!("{}…", "#35;".repeat(LABEL_MAX_CHARS - 1)));
        let quotes = label(&"\"".repeat(LABEL_MAX_CHARS), LABEL_MAX_CHARS);
        assert_eq!(
            quotes,
            "#quot;".repeat(LABEL_MAX_CHARS),
            "exactly max chars is not cut"
        );

        let emoji = "🧠".repeat(100);
        let cut_emoji = cut(&emoji, LABEL_MAX_CHARS);
        assert_eq!(cut_emoji.chars().count(), LABEL_MAX_CHARS);
        assert!(cut_emoji.ends_with("🧠…"));

        assert_eq!(cut("  many\n\n spaces\there  ", 80), "many spaces here");
        assert_eq!(cut("one two three", 9), "one two…");
        assert_eq!(cut("one two three", 8), "one two…");
        assert_eq!(cut("abcdefghij", 5), "abcd…");
        assert_eq!(cut("", 5), "");
    }

    #[test]
    fn hostile_trees_render_one_node_per_thought_and_one_edge_per_graph_edge() {
        for text in HOSTILE {
            for tree in [hostile_tree(text), think_tree(text)] {
                let diagram = render(&tree, &crate::tools::exports());
                let (nodes, edges, subgraphs) = check_structure(&diagram, &crate::tools::exports());
                assert_eq!(nodes, tree.order.len(), "{diagram}");
                assert_eq!(edges, tree.edges().len(), "{diagram}");
                assert_eq!(subgraphs, tree.branches.len(), "{diagram}");
                for label in quoted_strings(&diagram) {
                    assert_inert(&label.replace(LABEL_BREAK, " "));
                }
            }
        }
    }

    #[test]
    fn edges_and_subgraphs_have_their_shapes() {
        let tree = hostile_tree("x");
        assert_eq!(tree.branches.len(), 3);
        assert!(
            tree.anomalies.contains(&Anomaly::DanglingRevision {
                seq: 8,
                revises_thought: 99
            }) && tree.anomalies.contains(&Anomaly::DanglingBranchPoint {
                seq: 9,
                branch_from_thought: 77
            }),
            "{:?}",
            tree.anomalies
        );
        let diagram = render(&tree, &crate::tools::exports());
        // seq 2,3 main line; 4 revises 2; 5,6 branch a from thought 2 (seq 3); 7 branch b.
        assert!(diagram.contains("\n    t2 --> t3\n"), "{diagram}");
        assert!(diagram.contains("\n    t4 -.->|revises| t2\n"), "{diagram}");
        assert!(
            diagram.contains("\n    t3 -->|\"🌿 a x\"| t5\n"),
            "{diagram}"
        );
        assert!(diagram.contains("\n    t5 --> t6\n"), "{diagram}");
        assert!(
            diagram.contains("\n    t2 -->|\"🌿 b x\"| t7\n"),
            "{diagram}"
        );
        assert!(diagram.contains("\n    t7 -.->|revises| t3\n"), "{diagram}");
        assert!(diagram.contains("\n    subgraph b1 [\"🌿 a x · from thought 2\"]\n        t5[\"🌿 3/5 · a x<br/>branch a#58; x\"]:::branch\n"), "{diagram}");
        assert!(
            diagram.contains("\n        t7[\"🔄 3/5 · b x · revises 2<br/>x\"]:::revision\n"),
            "{diagram}"
        );
        assert!(
            diagram.contains("\n    t2[\"💭 1/4<br/>x\"]\n"),
            "{diagram}"
        );
        assert!(
            diagram
                .contains("\n    t4[\"🔄 3/4 · revises 1<br/>revision of 1#58; x\"]:::revision\n"),
            "{diagram}"
        );
        assert!(diagram.contains("\n    class t8,t9 anomaly\n"), "{diagram}");
        assert!(
            diagram.contains(&counted(tree.anomalies.len(), "anomaly", "anomalies")),
            "{diagram}"
        );

        let think = render(&think_tree("why"), &crate::tools::exports());
        assert!(
            think.contains("\n    t2[\"🤔 1<br/>1#58; why\"]:::think\n"),
            "{think}"
        );
        assert!(think.contains("\n    t2 --> t3\n"), "{think}");
    }

    #[test]
    fn long_thoughts_are_cut_in_the_label() {
        let tree = tree_of(
            "t",
            SessionKind::THINKING,
            vec![recorded(seq_thought(&"word ".repeat(100), 1, 1))],
        );
        let diagram = render(&tree, &crate::tools::exports());
        let label = quoted_strings(&diagram)[0];
        let text = label.split_once(LABEL_BREAK).unwrap().1;
        assert_eq!(text.chars().count(), LABEL_MAX_CHARS, "{text:?}");
        assert!(text.ends_with("word…"));
    }

    #[test]
    fn an_empty_tree_is_still_a_diagram() {
        for tree in [
            tree_of("nothing \"]", SessionKind::THINKING, Vec::new()),
            ThoughtTree::new(SessionId::generate(), &crate::tools::folds()),
        ] {
            let diagram = render(&tree, &crate::tools::exports());
            let (nodes, edges, subgraphs) = check_structure(&diagram, &crate::tools::exports());
            assert_eq!((nodes, edges, subgraphs), (1, 0, 0));
            assert!(diagram.contains(&format!("\n    {EMPTY_NODE_ID}[\"")));
            assert!(
                !diagram.contains("nothing"),
                "the title never reaches the diagram"
            );
        }
    }

    #[test]
    fn the_count_header_says_one_branch_and_two_branches() {
        assert_eq!(counted(1, "branch", "branches"), "1 branch");
        assert_eq!(counted(0, "branch", "branches"), "0 branches");
        assert_eq!(counted(2, "anomaly", "anomalies"), "2 anomalies");
    }

    /// The target directory cargo built this test into: the nearest ancestor of the test
    /// binary holding cargo's `CACHEDIR.TAG` (so `CARGO_TARGET_DIR`, `--target-dir` and
    /// `build.target-dir` are all followed); else `$CARGO_TARGET_DIR`, else `target/`.
    pub(crate) fn cargo_target_dir() -> std::path::PathBuf {
        let exe = std::env::current_exe().unwrap();
        if let Some(dir) = exe
            .ancestors()
            .skip(1)
            .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        {
            return dir.to_path_buf();
        }
        let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        std::env::var_os("CARGO_TARGET_DIR")
            .filter(|dir| !dir.is_empty())
            .map_or_else(|| manifest.join("target"), |dir| manifest.join(dir))
    }

    /// Writes renders of hostile trees to `mermaid-fixtures/` in cargo's target directory
    /// (`target/` unless `CARGO_TARGET_DIR` or cargo's configuration moves it; never the
    /// source tree otherwise) for the real Mermaid parser, which `.ci/mermaid-check` runs
    /// on them (`tools/mermaid-check/check.mjs`, finding the same directory with `cargo
    /// metadata`). Each file's expected counts are written beside it as `NAME.counts`
    /// (`nodes edges subgraphs`).
    #[test]
    fn write_hostile_renders_for_the_mermaid_checker() {
        let dir = cargo_target_dir().join("mermaid-fixtures");
        std::fs::create_dir_all(&dir).unwrap();
        let mut trees = vec![(
            "empty".to_string(),
            ThoughtTree::new(SessionId::generate(), &crate::tools::folds()),
        )];
        for (i, text) in HOSTILE.iter().enumerate() {
            trees.push((format!("hostile-{i:02}"), hostile_tree(text)));
            trees.push((format!("think-{i:02}"), think_tree(text)));
        }
        let all: String = HOSTILE.concat();
        trees.push(("hostile-all".into(), hostile_tree(&all)));
        trees.push(("plan-all".into(), plan_tree(&all)));
        trees.push(("branches-all".into(), evaluated_tree(&all)));
        for (i, text) in HOSTILE.iter().enumerate() {
            trees.push((format!("plan-{i:02}"), plan_tree(text)));
            trees.push((format!("agent-{i:02}"), agent_tree(text)));
        }
        trees.push(("agent-all".into(), agent_tree(&all)));
        let exports = crate::tools::exports();
        for (name, tree) in trees {
            let diagram = render(&tree, &exports);
            let counts = (
                tree.order.len(),
                tree.edges().len()
                    + exports
                        .renders()
                        .iter()
                        .map(|r| r.mermaid_edges(&tree))
                        .sum::<usize>(),
                tree.branches.len(),
            );
            // What the checker will be told to expect must be what the diagram holds (an
            // empty session without a plan or an agent tree is drawn as one placeholder
            // node).
            let family_nodes = exports
                .renders()
                .iter()
                .any(|r| r.mermaid_nodes(&tree, &mut String::new()));
            let placeholder = usize::from(!family_nodes);
            let drawn = (counts.0.max(placeholder), counts.1, counts.2);
            assert_eq!(
                check_structure(&diagram, &exports),
                drawn,
                "{name}: {diagram}"
            );
            let file = dir.join(format!("{name}.mmd"));
            std::fs::write(&file, &diagram).unwrap();
            assert_eq!(std::fs::read_to_string(&file).unwrap(), diagram, "{name}");
            std::fs::write(
                dir.join(format!("{name}.counts")),
                format!("{} {} {}\n", counts.0, counts.1, counts.2),
            )
            .unwrap();
        }
    }
}
