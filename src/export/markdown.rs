//! Markdown rendering of a thought tree, for a person to read.
//!
//! Owns: the Markdown text of a [`ThoughtTree`]: a title with the session's title, kind
//! and id, its status and counts, the thoughts in seq order (number/total, branch and
//! revision markers, the text, and for think threads the purpose, recommended tool and
//! open items), the branches, and the anomalies when there are any.
//!
//! Must not: let text a model wrote change the document's structure. Every one-line field
//! (title, branch ids, tool names, purposes, open items) goes through [`escape_inline`].
//! A thought keeps its Markdown but is quoted ([`quote_thought`]): every line sits behind
//! `> `, a blank line closes the quote, raw HTML is neutralised, and the only code blocks
//! left are fences the quote opens at its own left margin, so what is code to this module
//! is code to any CommonMark reader and nothing else can hide a `<`.

use crate::event::format_time;
use crate::export::family::Exports;
use crate::export::mermaid::is_unsafe_char;
use crate::projection::tree::{Anomaly, ThoughtNode, ThoughtTree};
use std::fmt::Write as _;

/// Stands in for control and bidi characters.
const REPLACEMENT: char = '\u{FFFD}';

/// ASCII punctuation escaped with a backslash in one-line fields: everything that can
/// open emphasis, code, links, images, HTML, entities, headings, tables, strikethrough or
/// math mid-line.
const INLINE_SPECIAL: &[char] = &[
    '\\', '`', '*', '_', '[', ']', '<', '>', '#', '|', '~', '!', '&', '$',
];

/// Shortest run of backticks or tildes that makes a code fence.
const FENCE_MIN: usize = 3;

/// Most spaces before a closing fence (CommonMark's rule).
const FENCE_CLOSE_MAX_INDENT: usize = 3;

/// Renders the tree as a Markdown document, with the families' pieces `exports` hold.
pub(crate) fn render(tree: &ThoughtTree, exports: &Exports) -> String {
    let mut out = String::with_capacity(1024 + tree.order.len() * 512);
    write_header(&mut out, tree, exports);
    write_thoughts(&mut out, tree, exports);
    write_branches(&mut out, tree);
    // The families' sections (a plan, branch nodes, model calls), in registry order.
    for render in exports.renders() {
        render.markdown_sections(tree, &mut out);
    }
    write_anomalies(&mut out, tree);
    out
}

fn write_header(out: &mut String, tree: &ThoughtTree, exports: &Exports) {
    let summary = tree.summary.as_ref();
    let kind = tree
        .kind()
        .and_then(|kind| exports.kind_label(kind))
        .unwrap_or("Session");
    let title = escape_inline(tree.title());
    let title = if title.is_empty() {
        "(untitled)".to_string()
    } else {
        title
    };
    let _ = writeln!(out, "# {kind}: {title}\n");
    let _ = writeln!(out, "- **Session:** `{}`", tree.session);
    let _ = writeln!(
        out,
        "- **Kind:** {}",
        tree.kind().map_or("unknown", |k| k.as_str())
    );
    match summary {
        Some(summary) => {
            let _ = writeln!(out, "- **Status:** {}", summary.status());
            if !summary.aliases.is_empty() {
                let aliases: Vec<String> =
                    summary.aliases.iter().map(|a| escape_inline(a)).collect();
                let _ = writeln!(out, "- **Aliases:** {}", aliases.join(", "));
            }
            let _ = writeln!(out, "- **Created:** {}", format_time(summary.created_at));
            let _ = writeln!(out, "- **Updated:** {}", format_time(summary.updated_at));
            if let Some(total) = summary.total_thoughts {
                let _ = writeln!(out, "- **Planned thoughts:** {total}");
            }
        }
        None => {
            let _ = writeln!(out, "- **Status:** unknown (no session start recorded)");
        }
    }
    let revisions = tree.thoughts().filter(|node| is_revision(node)).count();
    let _ = writeln!(
        out,
        "- **Events:** {} · **thoughts:** {} · **revisions:** {revisions} · **branches:** {} · **anomalies:** {}",
        tree.at_seq,
        tree.order.len(),
        tree.branches.len(),
        tree.anomalies.len()
    );
    out.push('\n');
}

fn write_thoughts(out: &mut String, tree: &ThoughtTree, exports: &Exports) {
    out.push_str("## Thoughts\n\n");
    if tree.order.is_empty() {
        out.push_str("No thoughts recorded.\n\n");
        return;
    }
    for node in tree.thoughts() {
        let _ = writeln!(out, "### {}\n", heading(node));
        let _ = writeln!(out, "*{}*\n", details(node));
        out.push_str(&quote_thought(&node.thought));
        out.push('\n');
        if let Some(purpose) = &node.thread_purpose {
            let _ = writeln!(out, "- **Purpose:** {}", or_none(escape_inline(purpose)));
            if let Some(tool) = &node.tool_recommendation {
                let _ = writeln!(
                    out,
                    "- **Recommended tool:** {}",
                    or_none(escape_inline(tool))
                );
            }
            if node.open_items.is_empty() {
                out.push_str("- **Open items:** none\n");
            } else {
                out.push_str("- **Open items:**\n");
                for item in &node.open_items {
                    let _ = writeln!(out, "  - {}", or_none(escape_inline(item)));
                }
            }
            out.push('\n');
        }
        if node.data.is_some() {
            for render in exports.renders() {
                render.markdown_thought(node, out);
            }
        }
    }
}

/// `💭 Thought 3/5`, `🔄 Thought 3/5 · revises thought 2`, `🌿 Thought 3/5 · branch x`,
/// `🤔 Think 3`.
fn heading(node: &ThoughtNode) -> String {
    let revision = is_revision(node);
    let mut text = match (node.total_thoughts, revision, node.branch_id.is_some()) {
        (None, _, _) => format!("🤔 Think {}", node.thought_number),
        (Some(total), true, _) => format!("🔄 Thought {}/{total}", node.thought_number),
        (Some(total), false, true) => format!("🌿 Thought {}/{total}", node.thought_number),
        (Some(total), false, false) => format!("💭 Thought {}/{total}", node.thought_number),
    };
    if let Some(branch) = &node.branch_id {
        let _ = write!(text, " · branch {}", escape_inline(branch));
        if let Some(from) = node.branch_from_thought {
            let _ = write!(text, " (from thought {from})");
        }
    }
    if revision {
        match node.revises_thought {
            Some(target) => {
                let _ = write!(text, " · revises thought {target}");
            }
            None => text.push_str(" · revision"),
        }
    }
    text
}

/// The line under a heading: seq, time, tool, who wrote it (when the event says) and flags.
fn details(node: &ThoughtNode) -> String {
    let mut text = format!(
        "seq {} · {} · {}",
        node.seq,
        format_time(node.at),
        escape_inline(&node.tool)
    );
    if let Some(actor) = &node.actor {
        let _ = write!(text, " · by {}", escape_inline(actor));
    }
    match node.next_thought_needed {
        Some(true) => text.push_str(" · next thought needed"),
        Some(false) => text.push_str(" · last thought"),
        None => {}
    }
    if node.needs_more_thoughts == Some(true) {
        text.push_str(" · needs more thoughts");
    }
    text
}

fn write_branches(out: &mut String, tree: &ThoughtTree) {
    out.push_str("## Branches\n\n");
    if tree.branches.is_empty() {
        out.push_str("No branches.\n\n");
        return;
    }
    for branch in &tree.branches {
        let _ = writeln!(
            out,
            "- 🌿 **{}**: from thought {} · {} thought{} · first at seq {}",
            or_none(escape_inline(&branch.id)),
            branch.from_thought,
            branch.thoughts,
            if branch.thoughts == 1 { "" } else { "s" },
            branch.first_seq
        );
    }
    out.push('\n');
}

fn write_anomalies(out: &mut String, tree: &ThoughtTree) {
    if tree.anomalies.is_empty() {
        return;
    }
    out.push_str("## Anomalies\n\n");
    for anomaly in &tree.anomalies {
        let line = match anomaly {
            Anomaly::DanglingRevision {
                seq,
                revises_thought,
            } => format!(
                "seq {seq}: revises thought {revises_thought}, which the session does not have"
            ),
            Anomaly::DanglingBranchPoint {
                seq,
                branch_from_thought,
            } => format!(
                "seq {seq}: branches from thought {branch_from_thought}, which the session does not have"
            ),
            Anomaly::SelfReference {
                seq,
                thought_number,
            } => format!("seq {seq}: thought {thought_number} revises or branches from itself"),
            Anomaly::Cycle => "the thought graph has a cycle".to_string(),
        };
        let _ = writeln!(out, "- {line}");
    }
    out.push('\n');
}

/// The tree's rule: a thought is a revision when it says so or names what it revises.
fn is_revision(node: &ThoughtNode) -> bool {
    node.is_revision == Some(true) || node.revises_thought.is_some()
}

/// An escaped field, or a marker when there was nothing to show.
pub(crate) fn or_none(text: String) -> String {
    if text.is_empty() {
        "(none)".to_string()
    } else {
        text
    }
}

/// Escapes text for one line of Markdown: whitespace runs (newlines included) become one
/// space, control and bidi characters become U+FFFD, [`INLINE_SPECIAL`] characters get a
/// backslash, and a leading `-`, `+`, `=` or `1.`-style number is escaped so the field
/// can't start a list, a heading underline or a thematic break.
pub(crate) fn escape_inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        for c in word.chars() {
            if INLINE_SPECIAL.contains(&c) {
                out.push('\\');
                out.push(c);
            } else if is_unsafe_char(c) {
                out.push(REPLACEMENT);
            } else {
                out.push(c);
            }
        }
    }
    if out.starts_with(['-', '+', '=']) {
        out.insert(0, '\\');
    } else {
        let digits = out.len() - out.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 && out[digits..].starts_with(['.', ')']) {
            out.insert(digits, '\\');
        }
    }
    out
}

/// Ledger text as one line for a terminal (the CLI's text output: `sessions`, `search`,
/// `replay`): whitespace runs (newlines included) become one space and control and bidi
/// characters ([`is_unsafe_char`]: C0, DEL, C1) become U+FFFD, so an ESC, BEL or OSC 8
/// sequence a model wrote never reaches the terminal. No Markdown escaping.
pub(crate) fn terminal_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.extend(
            word.chars()
                .map(|c| if is_unsafe_char(c) { REPLACEMENT } else { c }),
        );
    }
    out
}

/// A code fence opened at the quote's left margin: its char and length.
struct Fence {
    ch: char,
    len: usize,
}

/// A thought as a block quote followed by a blank line, its Markdown kept except:
/// - line breaks are `\n` (CR, CRLF, U+2028, U+2029 and U+0085 count as one), control
///   and bidi characters become U+FFFD;
/// - a code fence counts only at the left margin (no indent); every other run of three or
///   more backticks or tildes that could open a fence (indented, after a list marker or a
///   `>`, or unclosed on its line) is backslash-escaped, so a reader never sees a fence
///   this function did not;
/// - outside fences and same-line code spans every `<` becomes `&lt;` (no HTML block,
///   tag, comment or autolink), and inside a code span too on a line with a `|` (a GFM
///   table row splits cells before it finds code spans).
pub(crate) fn quote_thought(text: &str) -> String {
    let normalized: String = text
        .replace("\r\n", "\n")
        .chars()
        .map(|c| match c {
            '\r' | '\u{85}' | '\u{2028}' | '\u{2029}' => '\n',
            '\n' | '\t' => c,
            c if is_unsafe_char(c) => REPLACEMENT,
            c => c,
        })
        .collect();
    let body = normalized.trim_matches('\n');
    if body.trim().is_empty() {
        return "> *(empty)*\n".to_string();
    }
    let mut out = String::with_capacity(body.len() + body.len() / 8 + 16);
    let mut fence: Option<Fence> = None;
    for line in body.split('\n') {
        let quoted = match &fence {
            Some(open) => {
                if closes_fence(open, line) {
                    fence = None;
                }
                line.to_string()
            }
            None => match opening_fence(line) {
                Some(open) => {
                    fence = Some(open);
                    line.to_string()
                }
                None => neutralize_line(line),
            },
        };
        if quoted.is_empty() {
            out.push_str(">\n");
        } else {
            out.push_str("> ");
            out.push_str(&quoted);
            out.push('\n');
        }
    }
    out
}

/// Length of the run of `ch` at the start of `text`, in chars (all ASCII).
fn run_len(text: &str, ch: char) -> usize {
    text.len() - text.trim_start_matches(ch).len()
}

/// A fence opener at the left margin: three or more backticks (with no backtick after
/// them on the line) or tildes.
fn opening_fence(line: &str) -> Option<Fence> {
    let ch = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = run_len(line, ch);
    if len < FENCE_MIN || (ch == '`' && line[len..].contains('`')) {
        return None;
    }
    Some(Fence { ch, len })
}

/// CommonMark's closing fence: up to three spaces, at least as long a run of the same
/// char, then only spaces or tabs.
fn closes_fence(fence: &Fence, line: &str) -> bool {
    let indent = run_len(line, ' ');
    if indent > FENCE_CLOSE_MAX_INDENT {
        return false;
    }
    let rest = &line[indent..];
    let len = run_len(rest, fence.ch);
    len >= fence.len && rest[len..].trim_matches([' ', '\t']).is_empty()
}

/// One line outside a fence: `<` → `&lt;` outside code spans that close on the line,
/// unclosed backtick runs and tilde runs of fence length escaped, backslash escapes kept.
fn neutralize_line(line: &str) -> String {
    let table_row = line.contains('|');
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len() + 16);
    let mut i = 0;
    while i < line.len() {
        let c = line[i..].chars().next().expect("in bounds");
        match c {
            '\\' if bytes.get(i + 1).is_some_and(u8::is_ascii_punctuation) => {
                out.push_str(&line[i..i + 2]);
                i += 2;
            }
            '`' => {
                let len = run_len(&line[i..], '`');
                match closing_backticks(&line[i + len..], len) {
                    Some(end) => {
                        let span = &line[i..i + len + end + len];
                        if table_row {
                            out.push_str(&span.replace('<', "&lt;"));
                        } else {
                            out.push_str(span);
                        }
                        i += len + end + len;
                    }
                    None => {
                        out.push_str(&"\\`".repeat(len));
                        i += len;
                    }
                }
            }
            '~' => {
                let len = run_len(&line[i..], '~');
                if len >= FENCE_MIN {
                    out.push_str(&"\\~".repeat(len));
                } else {
                    out.push_str(&line[i..i + len]);
                }
                i += len;
            }
            '<' => {
                out.push_str("&lt;");
                i += 1;
            }
            c => {
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// Offset in `rest` of the next run of exactly `len` backticks, if any.
fn closing_backticks(rest: &str, len: usize) -> Option<usize> {
    let mut i = 0;
    while let Some(at) = rest[i..].find('`') {
        let start = i + at;
        let run = run_len(&rest[start..], '`');
        if run == len {
            return Some(start);
        }
        i = start + run;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{SessionId, SessionKind};
    use crate::projection::fixtures::*;
    use crate::tools::thinking::{SequentialThought, ThinkThought, ThinkingEvent};

    fn sample_tree(text: &str) -> ThoughtTree {
        tree_with_aliases(
            text,
            SessionKind::THINKING,
            vec!["alias *one*".into()],
            vec![
                recorded(seq_thought(&format!("first {text}"), 1, 3)),
                recorded(seq_thought("second", 2, 3)),
                recorded(SequentialThought {
                    is_revision: Some(true),
                    revises_thought: Some(1),
                    ..seq_thought("revised", 3, 3)
                }),
                recorded(SequentialThought {
                    branch_from_thought: Some(2),
                    branch_id: Some(format!("alt {text}")),
                    needs_more_thoughts: Some(true),
                    ..seq_thought("on a branch", 3, 4)
                }),
                recorded(SequentialThought {
                    revises_thought: Some(42),
                    next_thought_needed: false,
                    ..seq_thought(text, 4, 4)
                }),
            ],
        )
    }

    /// Text a model might write to break out of its quote or the document.
    const HOSTILE: &[&str] = &[
        "# Heading\n\n## Thoughts\n\n---\n\nnot quoted?",
        "<!-- never closed",
        "<script>alert(1)</script>",
        "<div>\n\nstill html?",
        "```\nunclosed fence <!-- in code",
        "- item\n  ```\n<!--\n```\n<!-- after",
        "~~~\n<b>code</b>\n~~~\n<b>text</b>",
        "- ~~~ list fence\n<!-- x",
        "a `x\n`<script>` b",
        "a `<script>\n# h `",
        "| `<x|y>` |\n|---|\n| `<script>|` |",
        "> nested quote\n```\n<x>\n```",
        "\\`<script>`",
        "line\r\nwith CR\rand\u{2028}separators",
        "nul \0 bell \u{7} bidi \u{202E}evil\u{202C}",
        "emoji 🧠 `Vec<T>` and ``a`b`` fine",
        "    ```\n    <indented>",
        "text\n===",
        "",
        "\n\n  \n",
    ];

    /// No `<` reaches a reader outside this module's own fences and code spans.
    fn assert_no_raw_html(quote: &str) {
        let mut fence: Option<Fence> = None;
        for line in quote.lines() {
            let line = line
                .strip_prefix("> ")
                .or_else(|| line.strip_prefix('>'))
                .expect("quoted");
            match &fence {
                Some(open) => {
                    if closes_fence(open, line) {
                        fence = None;
                    }
                }
                None => {
                    if let Some(open) = opening_fence(line) {
                        fence = Some(open);
                        continue;
                    }
                    // Outside fences, `<` only inside a span that closes on the line.
                    let mut rest = line;
                    while let Some(at) = rest.find(['`', '<', '\\']) {
                        let c = rest.as_bytes()[at];
                        if c == b'<' {
                            panic!("raw < in {line:?} of {quote}");
                        } else if c == b'\\' {
                            rest = &rest[(at + 2).min(rest.len())..];
                        } else {
                            let len = run_len(&rest[at..], '`');
                            let end = closing_backticks(&rest[at + len..], len)
                                .unwrap_or_else(|| panic!("unclosed span left in {line:?}"));
                            rest = &rest[at + len + end + len..];
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn hostile_thoughts_stay_inside_their_quote() {
        for text in HOSTILE {
            let quote = quote_thought(text);
            assert!(quote.ends_with('\n'));
            for line in quote.lines() {
                assert!(line == ">" || line.starts_with("> "), "{line:?} of {quote}");
                for bad in ['\0', '\u{7}', '\u{202E}', '\r', '\u{2028}'] {
                    assert!(!line.contains(bad), "{bad:?} in {line:?}");
                }
            }
            assert_no_raw_html(&quote);
        }
    }

    #[test]
    fn quote_examples() {
        assert_eq!(quote_thought("a\n\nb"), "> a\n>\n> b\n");
        assert_eq!(quote_thought("x <y> `<z>`"), "> x &lt;y> `<z>`\n");
        assert_eq!(
            quote_thought("```rust\nlet v: Vec<u8>;\n```\n<b>"),
            "> ```rust\n> let v: Vec<u8>;\n> ```\n> &lt;b>\n"
        );
        assert_eq!(quote_thought("- ```\n<x>"), "> - \\`\\`\\`\n> &lt;x>\n");
        assert_eq!(quote_thought("  ```\n<x>"), ">   \\`\\`\\`\n> &lt;x>\n");
        assert_eq!(quote_thought("a `x\n`<s>` b"), "> a \\`x\n> `<s>` b\n");
        assert_eq!(quote_thought("| `<a|b>` |"), "> | `&lt;a|b>` |\n");
        assert_eq!(quote_thought("\\`<s>`"), "> \\`&lt;s>\\`\n");
        assert_eq!(quote_thought("~~strike~~ ~~~"), "> ~~strike~~ \\~\\~\\~\n");
        assert_eq!(quote_thought("a\r\nb\rc"), "> a\n> b\n> c\n");
        assert_eq!(quote_thought(""), "> *(empty)*\n");
        assert_eq!(quote_thought("```\nopen <!--"), "> ```\n> open <!--\n");
    }

    #[test]
    fn escape_inline_examples() {
        assert_eq!(
            escape_inline("a *b* _c_ `d` [e](f) <g> #h |i| ~j~ !k &l; $m$"),
            "a \\*b\\* \\_c\\_ \\`d\\` \\[e\\](f) \\<g\\> \\#h \\|i\\| \\~j\\~ \\!k \\&l; \\$m\\$"
        );
        assert_eq!(
            escape_inline("two\nlines\r\n\tand  spaces "),
            "two lines and spaces"
        );
        assert_eq!(escape_inline("- item"), "\\- item");
        assert_eq!(escape_inline("+ item"), "\\+ item");
        assert_eq!(escape_inline("==="), "\\===");
        assert_eq!(escape_inline("12. item"), "12\\. item");
        assert_eq!(escape_inline("3) item"), "3\\) item");
        assert_eq!(escape_inline("2024 was"), "2024 was");
        assert_eq!(escape_inline("x\0y\u{202E}"), "x\u{FFFD}y\u{FFFD}");
        assert_eq!(escape_inline("🧠"), "🧠");
    }

    #[test]
    fn terminal_line_leaves_no_control_for_a_terminal() {
        assert_eq!(
            terminal_line("a\x1b]8;;https://x/\x07link\x1b]8;;\x07 b\u{9b}1m\x7f\r\nc *d*"),
            "a\u{FFFD}]8;;https://x/\u{FFFD}link\u{FFFD}]8;;\u{FFFD} b\u{FFFD}1m\u{FFFD} c *d*"
        );
    }

    #[test]
    fn document_has_header_thoughts_branches_and_anomalies() {
        let tree = sample_tree("plan");
        let doc = render(&tree, &crate::tools::exports());
        assert!(doc.starts_with("# Thinking session: plan\n\n"), "{doc}");
        assert!(
            doc.contains(&format!("- **Session:** `{}`\n", tree.session)),
            "{doc}"
        );
        assert!(doc.contains("- **Kind:** thinking\n"));
        assert!(doc.contains("- **Status:** complete\n"), "{doc}");
        assert!(doc.contains("- **Aliases:** alias \\*one\\*\n"), "{doc}");
        assert!(doc.contains(&format!(
            "- **Created:** {}\n",
            format_time(1_700_000_001_000)
        )));
        assert!(
            doc.contains("**thoughts:** 5 · **revisions:** 2 · **branches:** 1"),
            "{doc}"
        );
        assert!(doc.contains("### 💭 Thought 1/3\n\n*seq 2 · 2023-11-14T22:13:22.000Z · sequentialthinking · next thought needed*\n\n> first plan\n\n"), "{doc}");
        assert!(
            doc.contains("### 🔄 Thought 3/3 · revises thought 1\n"),
            "{doc}"
        );
        assert!(
            doc.contains("### 🌿 Thought 3/4 · branch alt plan (from thought 2)\n\n*seq 5 · "),
            "{doc}"
        );
        assert!(
            doc.contains("· needs more thoughts*\n\n> on a branch\n"),
            "{doc}"
        );
        assert!(doc.contains("### 🔄 Thought 4/4 · revises thought 42\n\n*seq 6 · 2023-11-14T22:13:26.000Z · sequentialthinking · last thought*"), "{doc}");
        assert!(
            doc.contains(
                "## Branches\n\n- 🌿 **alt plan**: from thought 2 · 1 thought · first at seq 5\n"
            ),
            "{doc}"
        );
        assert!(
            doc.contains(
                "## Anomalies\n\n- seq 6: revises thought 42, which the session does not have\n"
            ),
            "{doc}"
        );
        // Sections in order, thoughts in seq order.
        let at = |needle: &str| {
            doc.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {doc}"))
        };
        assert!(at("## Thoughts") < at("## Branches") && at("## Branches") < at("## Anomalies"));
        assert!(
            at("*seq 2 ") < at("*seq 3 ")
                && at("*seq 3 ") < at("*seq 4 ")
                && at("*seq 5 ") < at("*seq 6 ")
        );
    }

    #[test]
    fn think_threads_show_purpose_tool_and_open_items() {
        let payloads = vec![
            ThinkingEvent::ThinkRecorded {
                thought: ThinkThought {
                    thread_purpose: "find the *bug*".into(),
                    thought: "look at <main>".into(),
                    thought_index: 1,
                    tool_recommendation: "grep".into(),
                    left_to_be_done: "a\n- b".into(),
                    open_items: vec!["read logs".into(), "- fix # it".into()],
                },
                call: call("think"),
            }
            .into(),
        ];
        let doc = render(
            &tree_of("bug hunt", SessionKind::THINK, payloads),
            &crate::tools::exports(),
        );
        assert!(doc.starts_with("# Think thread: bug hunt\n"), "{doc}");
        assert!(doc.contains("### 🤔 Think 1\n\n*seq 2 · 2023-11-14T22:13:22.000Z · think*\n\n> look at &lt;main>\n\n"), "{doc}");
        assert!(doc.contains("- **Purpose:** find the \\*bug\\*\n- **Recommended tool:** grep\n- **Open items:**\n  - read logs\n  - \\- fix \\# it\n"), "{doc}");
        assert!(doc.contains("## Branches\n\nNo branches.\n"), "{doc}");
        assert!(!doc.contains("## Anomalies"), "{doc}");
    }

    #[test]
    fn empty_and_unstarted_sessions_render() {
        let doc = render(
            &tree_of("", SessionKind::THINKING, Vec::new()),
            &crate::tools::exports(),
        );
        assert!(doc.starts_with("# Thinking session: (untitled)\n"), "{doc}");
        assert!(
            doc.contains("## Thoughts\n\nNo thoughts recorded.\n"),
            "{doc}"
        );
        let doc = render(
            &ThoughtTree::new(SessionId::generate(), &crate::tools::folds()),
            &crate::tools::exports(),
        );
        assert!(doc.starts_with("# Session: (untitled)\n"), "{doc}");
        assert!(doc.contains("- **Status:** unknown"), "{doc}");
    }

    #[test]
    fn verification_steps_show_target_workflow_and_tools_on_one_escaped_line_each() {
        use crate::tools::qa::{QaStep, QaStepRecorded, Step, ToolRecommendation};
        let step = |tool: &str| Step {
            step_description: String::new(),
            expected_outcome: String::new(),
            recommended_tools: vec![ToolRecommendation {
                tool_name: tool.to_string(),
                confidence: 0.5,
                rationale: String::new(),
                priority: 1,
                alternatives: Vec::new(),
                suggested_inputs: None,
            }],
            next_step_conditions: Vec::new(),
            revise_when: Vec::new(),
            branch_when: Vec::new(),
        };
        for text in HOSTILE {
            let payload = QaStepRecorded {
                step: QaStep {
                    thought: seq_thought("check it", 1, 2),
                    verification_target: Some(text.to_string()),
                    workflow: text.to_string(),
                    current_step: Some(step(text)),
                    recommended_next_step: Some(step("read_file")),
                    invalid_recommendations: Vec::new(),
                    remaining_steps: Vec::new(),
                },
                call: call("sequentialthinking_qa"),
            };
            let tree = tree_of("qa", SessionKind::QA, vec![payload.into()]);
            let doc = render(&tree, &crate::tools::exports());
            let headings = doc.lines().filter(|line| line.starts_with('#')).count();
            // Title, Thoughts, the one thought, Branches: no heading from the text.
            assert_eq!(headings, 1 + 1 + 1 + 1, "{text:?}:\n{doc}");
            let thoughts = doc
                .split_once("## Thoughts")
                .and_then(|(_, rest)| rest.split_once("## Branches"))
                .expect("sections")
                .0;
            let fields: Vec<&str> = thoughts.lines().filter(|l| l.starts_with("- **")).collect();
            assert_eq!(fields.len(), 4, "{text:?}: {fields:?}");
            assert!(fields[0].starts_with("- **Target:** "), "{fields:?}");
            assert!(fields[1].starts_with("- **Workflow:** "), "{fields:?}");
            assert!(fields[2].starts_with("- **Used tools:** "), "{fields:?}");
            assert_eq!(fields[3], "- **Recommended next:** read\\_file");
            for field in fields {
                assert!(
                    !field.replace("\\<", "").contains('<')
                        && !field.contains('\u{202E}')
                        && !field.contains('\0'),
                    "{field:?}"
                );
            }
        }
    }

    #[test]
    fn hostile_text_cannot_add_sections_or_escape_the_document() {
        for text in HOSTILE {
            let tree = sample_tree(text);
            let doc = render(&tree, &crate::tools::exports());
            // Headings at the document level are only ours: 1 title, sections, thoughts.
            let headings: Vec<&str> = doc.lines().filter(|line| line.starts_with('#')).collect();
            let expected = 1 + 3 + tree.order.len();
            assert_eq!(headings.len(), expected, "{text:?}: {headings:?}");
            assert!(doc.lines().filter(|line| line.starts_with("# ")).count() == 1);
            // Every line is ours or quoted; the title is on its one line.
            for line in doc.lines() {
                assert!(
                    !line.contains('\0') && !line.contains('\u{202E}'),
                    "{line:?}"
                );
            }
            for quote in doc.split("\n\n").filter(|block| block.starts_with('>')) {
                assert_no_raw_html(&format!("{quote}\n"));
            }
        }
    }
}
