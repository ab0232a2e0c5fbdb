//! Renderings of a session: Mermaid, Markdown, JSON (the full tree), JSONL (the raw
//! envelopes, re-importable), SVG (a picture laid out here) and HTML (one offline page:
//! the picture, the thoughts, a replay slider and a filter).
//!
//! Owns: turning a [`ThoughtTree`] or a list of events into text, and [`truncate`] (the
//! one way a text is shortened with an ellipsis, for titles and answers; [`cut_into`] for
//! labels, whitespace collapsed). Must
//! not: read the store (callers fold and pass what to render), let any text a model wrote
//! change the structure of the output (escaping is the renderer's job), name a family
//! (they add their pieces through [`family`] and [`picture`]), or look the families up:
//! every render takes the [`family::Exports`] it is handed (a ledger's carry them).

pub(crate) mod family;
pub(crate) mod html;
pub(crate) mod markdown;
pub(crate) mod mermaid;
pub(crate) mod picture;
pub(crate) mod svg;

use crate::event::Event;
use crate::projection::tree::ThoughtTree;
use std::fmt;
use std::str::FromStr;

/// An export format, as named on the command line and in `export_session`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Mermaid,
    Markdown,
    Json,
    Jsonl,
    Svg,
    Html,
}

impl Format {
    pub(crate) const ALL: [Format; 6] = [
        Format::Mermaid,
        Format::Markdown,
        Format::Json,
        Format::Jsonl,
        Format::Svg,
        Format::Html,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Format::Mermaid => "mermaid",
            Format::Markdown => "markdown",
            Format::Json => "json",
            Format::Jsonl => "jsonl",
            Format::Svg => "svg",
            Format::Html => "html",
        }
    }

    /// MIME type for resources.
    pub(crate) fn mime_type(self) -> &'static str {
        match self {
            Format::Mermaid => "text/vnd.mermaid",
            Format::Markdown => "text/markdown",
            Format::Json => "application/json",
            Format::Jsonl => "application/jsonl",
            Format::Svg => "image/svg+xml",
            Format::Html => "text/html",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Format {
    /// The format spelt exactly `name` ([`Format::as_str`]): the one place a format name is
    /// read (the CLI's `--format` through [`FromStr`], the server's resource URIs).
    pub(crate) fn named(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

impl FromStr for Format {
    type Err = String;
    /// A format name as a person types it: any case, spaces around it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::named(&s.trim().to_ascii_lowercase()).ok_or_else(|| {
            format!("unknown format {s:?}: use one of mermaid, markdown, json, jsonl, svg, html")
        })
    }
}

/// Where a [`truncate`]d text's ellipsis goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ellipsis {
    /// After the first `max_chars` chars: a cut text is `max_chars + 1` chars long.
    After,
    /// Within `max_chars`: a cut text is `max_chars` chars long, its last one the `…`.
    Within,
}

/// `text` cut to `max_chars` chars (on a char boundary), with `…` where [`Ellipsis`]
/// says when anything was cut; appended to `out`.
pub(crate) fn truncate_into(out: &mut String, text: &str, max_chars: usize, ellipsis: Ellipsis) {
    let mut chars = text.chars();
    let start = out.len();
    out.extend(chars.by_ref().take(max_chars));
    if chars.next().is_none() {
        return;
    }
    if ellipsis == Ellipsis::Within && out.len() > start {
        out.pop();
    }
    out.push('…');
}

/// [`truncate_into`] a new string.
pub(crate) fn truncate(text: &str, max_chars: usize, ellipsis: Ellipsis) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 4) + 3);
    truncate_into(&mut out, text, max_chars, ellipsis);
    out
}

/// Appends `text` to `out` with every run of whitespace (newlines included) collapsed to
/// one space, trimmed, and cut to at most `max_chars` chars on a char boundary, ending in
/// `…` when cut.
pub(crate) fn cut_into(out: &mut String, text: &str, max_chars: usize) {
    let base = out.len();
    let mut count = 0;
    for word in text.split_whitespace() {
        let needed = usize::from(count > 0) + word.chars().count();
        if count + needed > max_chars {
            // Fill what room is left (keeping one char for the ellipsis).
            if count > 0 && count + 1 < max_chars {
                out.push(' ');
                count += 1;
            }
            out.extend(word.chars().take(max_chars.saturating_sub(count + 1)));
            let trimmed = base + out[base..].trim_end().len();
            out.truncate(trimmed);
            out.push('…');
            return;
        }
        if count > 0 {
            out.push(' ');
        }
        out.push_str(word);
        count += needed;
    }
}

/// `count` and its noun, singular for exactly one ("1 branch", "0 branches", "2 branches"):
/// every count a person reads (Mermaid's comment, the `ui`'s list, the recall prompt).
pub(crate) fn counted(count: usize, one: &str, many: &str) -> String {
    format!("{count} {}", if count == 1 { one } else { many })
}

/// Renders the tree (or, for JSONL, the events it was folded from), with the families'
/// pieces `exports` hold.
pub(crate) fn render(
    format: Format,
    tree: &ThoughtTree,
    events: &[Event],
    exports: &family::Exports,
) -> String {
    match format {
        Format::Mermaid => mermaid::render(tree, exports),
        Format::Markdown => markdown::render(tree, exports),
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&tree.to_json()).expect("json value");
            text.push('\n');
            text
        }
        Format::Jsonl => jsonl(events),
        Format::Svg => svg::render(tree, exports),
        Format::Html => html::render(tree, exports),
    }
}

/// One envelope per line: `id`, `session`, `seq`, `at`, `schema`, `payload`, `prev`, `hash`.
pub(crate) fn jsonl(events: &[Event]) -> String {
    let mut out = String::new();
    for event in events {
        out.push_str(&serde_json::to_string(event).expect("events serialize"));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_cuts_on_chars_and_places_the_ellipsis() {
        assert_eq!(truncate("short", 5, Ellipsis::After), "short");
        assert_eq!(truncate("short", 5, Ellipsis::Within), "short");
        assert_eq!(truncate("longer 🧠", 6, Ellipsis::After), "longer…");
        assert_eq!(truncate("longer 🧠", 6, Ellipsis::Within), "longe…");
        assert_eq!(truncate("🧠🧠🧠", 2, Ellipsis::After), "🧠🧠…");
        assert_eq!(truncate("🧠🧠🧠", 2, Ellipsis::Within), "🧠…");
        assert_eq!(truncate("abc", 0, Ellipsis::After), "…");
        assert_eq!(truncate("abc", 0, Ellipsis::Within), "…");
    }
}
