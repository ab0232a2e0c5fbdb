//! The parse chain, structured half: a model's answer as JSON.
//!
//! Owns: [`parse()`] (the whole chain: strip `<think>` blocks; a whole JSON array; the
//! last fenced block holding one; the last `[…]` that parses; then the prose readers of
//! [`super::prose`]), [`Parser`] (which of them read it) and [`MAX_PARSE_BYTES`]; the
//! bounds on each field and the helpers both halves share are [`super::fields`]'. Must
//! not: judge a step (the filter does).

use super::fields::{MAX_OUTCOMES, MAX_PARSED, cut, split_outcomes};
use super::prose::{bullets, labelled_blocks};
use crate::tools::booster::state::Proposal;
use serde_json::Value;

/// Most bytes of a model answer the parse chain reads.
pub(crate) const MAX_PARSE_BYTES: usize = 64 * 1024;
/// Which parser read a model answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parser {
    Json,
    Fenced,
    Array,
    Prose,
    None,
}

impl Parser {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Parser::Json => "json",
            Parser::Fenced => "fenced",
            Parser::Array => "array",
            Parser::Prose => "prose",
            Parser::None => "none",
        }
    }
}

/// Removes `<think>…</think>` blocks (any case); an unclosed `<think>` hides the rest.
pub(crate) fn strip_think(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let lower = text.to_ascii_lowercase();
    let mut at = 0;
    while let Some(open) = lower[at..].find("<think>") {
        out.push_str(&text[at..at + open]);
        match lower[at + open..].find("</think>") {
            Some(close) => at = at + open + close + "</think>".len(),
            None => return out,
        }
    }
    out.push_str(&text[at..]);
    out
}

fn string_field(object: &serde_json::Map<String, Value>, names: &[&str]) -> Option<String> {
    names.iter().find_map(|name| match object.get(*name)? {
        Value::String(s) if !s.trim().is_empty() => Some(cut(s)),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

fn outcomes(value: Option<&Value>) -> Vec<String> {
    let items: Vec<String> = match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(s) => Some(cut(s)),
                Value::Object(o) => string_field(o, &["label", "text", "outcome"]),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect(),
        Some(Value::String(s)) => split_outcomes(s),
        _ => Vec::new(),
    };
    items
        .into_iter()
        .filter(|s| !s.is_empty())
        .take(MAX_OUTCOMES)
        .collect()
}

/// A proposal from one JSON item: an object with a text, or a string.
fn proposal_of(item: &Value) -> Option<Proposal> {
    match item {
        Value::String(s) if !s.trim().is_empty() => Some(Proposal {
            text: cut(s),
            ..Proposal::default()
        }),
        Value::Object(object) => Some(Proposal {
            text: string_field(object, &["text", "step", "action"])?,
            rationale: string_field(object, &["rationale", "why"]).unwrap_or_default(),
            how_to_verify: string_field(
                object,
                &["how_to_verify", "howToVerify", "verify", "check"],
            ),
            expected_outcomes: outcomes(
                object
                    .get("expected_outcomes")
                    .or_else(|| object.get("expectedOutcomes"))
                    .or_else(|| object.get("outcomes")),
            ),
        }),
        _ => None,
    }
}

/// Proposals from a JSON value: an array of items, or an object holding one under
/// `steps`, `candidates` or `proposals`. `objects`: whether any item was an object.
fn proposals_of(value: &Value) -> Option<(Vec<Proposal>, bool)> {
    let items = match value {
        Value::Array(items) => items,
        Value::Object(object) => ["steps", "candidates", "proposals"]
            .iter()
            .find_map(|key| object.get(*key)?.as_array())?,
        _ => return None,
    };
    let objects = items.iter().any(Value::is_object);
    let proposals: Vec<Proposal> = items
        .iter()
        .filter_map(proposal_of)
        .take(MAX_PARSED)
        .collect();
    (!proposals.is_empty()).then_some((proposals, objects))
}

/// The last fenced block (```…```) whose body parses as proposals.
fn last_fenced(text: &str) -> Option<Vec<Proposal>> {
    let parts: Vec<&str> = text.split("```").collect();
    // Fenced bodies are the odd parts.
    (1..parts.len()).step_by(2).rev().find_map(|i| {
        let body = parts[i];
        // Drop an info string (`json`) on the opening line.
        let body = match body.find('\n') {
            Some(nl) if !body[..nl].trim_start().starts_with(['[', '{']) => &body[nl + 1..],
            _ => body,
        };
        let value: Value = serde_json::from_str(body.trim()).ok()?;
        proposals_of(&value).map(|(p, _)| p)
    })
}

/// The last `[…]` in the text that parses as proposals (objects preferred over strings).
fn last_array(text: &str) -> Option<Vec<Proposal>> {
    let mut strings_only: Option<Vec<Proposal>> = None;
    for (at, _) in text
        .match_indices('[')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        let mut stream = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        let Some(Ok(value @ Value::Array(_))) = stream.next() else {
            continue;
        };
        match proposals_of(&value) {
            Some((proposals, true)) => return Some(proposals),
            Some((proposals, false)) if strings_only.is_none() => strings_only = Some(proposals),
            _ => {}
        }
    }
    strings_only
}

/// Reads proposals from a model's answer (the chain in the module doc). `Parser::None`
/// with nothing: the caller falls back to heuristics.
pub(crate) fn parse(response: &str) -> (Vec<Proposal>, Parser) {
    let mut end = response.len().min(MAX_PARSE_BYTES);
    while !response.is_char_boundary(end) {
        end -= 1;
    }
    let text = strip_think(&response[..end]);
    let trimmed = text.trim();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed)
        && let Some((proposals, _)) = proposals_of(&value)
    {
        return (proposals, Parser::Json);
    }
    if let Some(proposals) = last_fenced(trimmed) {
        return (proposals, Parser::Fenced);
    }
    if let Some(proposals) = last_array(trimmed) {
        return (proposals, Parser::Array);
    }
    let blocks = labelled_blocks(trimmed);
    if !blocks.is_empty() {
        return (blocks, Parser::Prose);
    }
    let listed = bullets(trimmed);
    if !listed.is_empty() {
        return (listed, Parser::Prose);
    }
    (Vec::new(), Parser::None)
}
