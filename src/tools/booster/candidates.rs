//! Candidate steps: the model prompt, the parse chain that reads a model's answer, the
//! filter, and the heuristic generator.
//!
//! Owns: [`prompt`], [`parse`] (strip `<think>` blocks; a whole JSON array; the last
//! fenced block holding one; the last `[…]` that parses; prose: labelled
//! `Text:/Rationale:/How_to_verify:/Outcomes:` blocks, then bullets `-`, `*`, `1.`,
//! `1)`, `Step N:`), [`filter`] (empty, over [`MAX_STEP_CHARS`], meta openers,
//! near-duplicates) and [`heuristic`] (deterministic for a task, its history and k; it
//! keeps progressing: candidates built from the task's own keywords, constraints and
//! numbers, never one already applied in the session, and the spec's five generic
//! templates while unused). Must not: do I/O, use randomness or the clock.

use super::verifier::{is_meta, jaccard, tokens};
use crate::tools::booster::state::Proposal;
use serde_json::Value;

/// Longest step kept, in characters.
pub const MAX_STEP_CHARS: usize = 400;
/// Longest step a model is asked for, in characters.
pub const ASKED_STEP_CHARS: usize = 200;
/// Candidates this similar (token Jaccard) to one kept before are dropped.
pub const NEAR_DUPLICATE_AT: f64 = 0.9;
/// A heuristic candidate this similar to a step already applied is not proposed again.
pub const HEURISTIC_REPEAT_AT: f64 = 0.8;
/// Most bytes of a model answer the parse chain reads.
pub const MAX_PARSE_BYTES: usize = 64 * 1024;
/// Most proposals read from one answer.
pub const MAX_PARSED: usize = 32;
/// Most characters of one field read from a model answer (longer is cut).
pub const MAX_FIELD_CHARS: usize = 1_000;
/// Most outcomes read for one proposal.
pub const MAX_OUTCOMES: usize = 6;

/// Rationale of the spec's generic templates.
pub const GENERIC_RATIONALE: &str = "Heuristic diversified proposal without LLM";
/// Rationale of the task-derived heuristic steps.
pub const TASK_RATIONALE: &str = "Heuristic step built from the task's own terms (no model)";
/// Rationale of a caller's hint offered as a candidate.
pub const HINT_RATIONALE: &str = "Hint from the caller";

/// The spec's five generic templates (rotated from the number of steps).
pub const GENERIC_TEMPLATES: [&str; 5] = [
    "Identify one concrete subgoal derived from the task.",
    "State a small check/measurement to validate progress.",
    "Split the problem into two smaller actions and pick one.",
    "Clarify assumptions/constraints blocking the next step.",
    "Pick a next action doable in <15 minutes.",
];

/// The prompt asking a model for `k` next steps.
pub fn prompt(task: &str, steps: &[&str], hints: &[String], k: u64) -> String {
    let mut out = format!(
        "You are helping solve a task one small, verifiable step at a time.\nTask: {task}\n"
    );
    if steps.is_empty() {
        out.push_str("Steps so far: none.\n");
    } else {
        out.push_str("Steps so far:\n");
        for (i, step) in steps.iter().enumerate() {
            out.push_str(&format!("{}. {step}\n", i + 1));
        }
    }
    if !hints.is_empty() {
        out.push_str("Hints:\n");
        for hint in hints {
            out.push_str(&format!("- {hint}\n"));
        }
    }
    out.push_str(&format!(
        "Propose exactly {k} different next steps. Answer with a JSON array only, no prose: \
         [{{\"text\": \"...\", \"rationale\": \"...\", \"how_to_verify\": \"...\", \
         \"expected_outcomes\": [\"...\", \"...\"]}}]. Each text at most {ASKED_STEP_CHARS} \
         characters, one concrete action that can be checked."
    ));
    out
}

/// Which parser read a model answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parser {
    Json,
    Fenced,
    Array,
    Prose,
    None,
}

impl Parser {
    pub fn as_str(self) -> &'static str {
        match self {
            Parser::Json => "json",
            Parser::Fenced => "fenced",
            Parser::Array => "array",
            Parser::Prose => "prose",
            Parser::None => "none",
        }
    }
}

fn cut(text: &str) -> String {
    text.trim().chars().take(MAX_FIELD_CHARS).collect()
}

/// Removes `<think>…</think>` blocks (any case); an unclosed `<think>` hides the rest.
pub fn strip_think(text: &str) -> String {
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

fn split_outcomes(text: &str) -> Vec<String> {
    text.split([';', '/', '|', ','])
        .map(cut)
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

/// `Label: value` on a line, the label matched loosely (`How to verify`, `how_to_verify`).
fn labelled<'a>(line: &'a str, labels: &[&str]) -> Option<&'a str> {
    let (label, value) = line.split_once(':')?;
    let label: String = label
        .trim()
        .trim_start_matches(['-', '*', ' '])
        .trim_matches('*')
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect();
    labels
        .iter()
        .any(|l| *l == label)
        .then_some(value.trim())
        .filter(|v| !v.is_empty())
}

const TEXT_LABELS: [&str; 2] = ["text", "step"];
const RATIONALE_LABELS: [&str; 2] = ["rationale", "why"];
const VERIFY_LABELS: [&str; 3] = ["howtoverify", "verify", "check"];
const OUTCOME_LABELS: [&str; 4] = ["outcomes", "outcome", "expectedoutcomes", "expectedoutcome"];

/// Whether a text is a template's placeholder rather than a step.
fn placeholder(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    lower.is_empty()
        || lower == "..."
        || lower.starts_with("the step description")
        || lower.starts_with("text:")
        || lower.starts_with("rationale:")
}

/// `Text:/Rationale:/How_to_verify:/Outcomes:` blocks separated by blank lines.
fn labelled_blocks(text: &str) -> Vec<Proposal> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut proposal = Proposal::default();
        for line in block.lines() {
            if let Some(v) = labelled(line, &TEXT_LABELS) {
                proposal.text = cut(v);
            } else if let Some(v) = labelled(line, &RATIONALE_LABELS) {
                proposal.rationale = cut(v);
            } else if let Some(v) = labelled(line, &VERIFY_LABELS) {
                proposal.how_to_verify = Some(cut(v));
            } else if let Some(v) = labelled(line, &OUTCOME_LABELS) {
                proposal.expected_outcomes = split_outcomes(v);
            }
        }
        if !placeholder(&proposal.text) {
            out.push(proposal);
        }
        if out.len() == MAX_PARSED {
            break;
        }
    }
    out
}

/// The text after a bullet (`-`, `*`, `1.`, `1)`, `Step N:`), if the line has one.
fn bullet(line: &str) -> Option<&str> {
    let line = line.trim_start();
    if let Some(rest) = line.strip_prefix(['-', '*', '•']) {
        return rest.starts_with(' ').then(|| rest.trim());
    }
    let (rest, marks): (&str, &[char]) = match line.get(..4) {
        Some(word) if word.eq_ignore_ascii_case("step") => {
            (line[4..].trim_start(), &[':', '.', ')'])
        }
        _ => (line, &['.', ')']),
    };
    let digits = rest.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let after = rest[digits..].strip_prefix(marks)?;
    (after.is_empty() || after.starts_with(' ')).then(|| after.trim())
}

/// Bulleted or numbered lines, with `Rationale:`/`How to verify:`/`Outcomes:` lines
/// that follow one attached to it.
fn bullets(text: &str) -> Vec<Proposal> {
    let mut out: Vec<Proposal> = Vec::new();
    let mut current: Option<Proposal> = None;
    let flush = |current: &mut Option<Proposal>, out: &mut Vec<Proposal>| {
        if let Some(p) = current.take()
            && !placeholder(&p.text)
            && !out.iter().any(|o| o.text == p.text)
        {
            out.push(p);
        }
    };
    for line in text.lines() {
        if let Some(item) = bullet(line) {
            // A bullet that is itself a label continues the current step.
            let inner = item;
            if let Some(current) = current.as_mut() {
                if let Some(v) = labelled(inner, &RATIONALE_LABELS) {
                    current.rationale = cut(v);
                    continue;
                }
                if let Some(v) = labelled(inner, &VERIFY_LABELS) {
                    current.how_to_verify = Some(cut(v));
                    continue;
                }
                if let Some(v) = labelled(inner, &OUTCOME_LABELS) {
                    current.expected_outcomes = split_outcomes(v);
                    continue;
                }
            }
            flush(&mut current, &mut out);
            let text = labelled(inner, &TEXT_LABELS).unwrap_or(inner);
            current = Some(Proposal {
                text: cut(text.trim_matches('*').trim()),
                ..Proposal::default()
            });
        } else if let Some(current) = current.as_mut() {
            if let Some(v) = labelled(line, &RATIONALE_LABELS) {
                current.rationale = cut(v);
            } else if let Some(v) = labelled(line, &VERIFY_LABELS) {
                current.how_to_verify = Some(cut(v));
            } else if let Some(v) = labelled(line, &OUTCOME_LABELS) {
                current.expected_outcomes = split_outcomes(v);
            }
        }
        if out.len() == MAX_PARSED {
            break;
        }
    }
    flush(&mut current, &mut out);
    out
}

/// Reads proposals from a model's answer (the chain in the module doc). `Parser::None`
/// with nothing: the caller falls back to heuristics.
pub fn parse(response: &str) -> (Vec<Proposal>, Parser) {
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

/// Drops empty steps, steps over [`MAX_STEP_CHARS`], meta openers and near-duplicates
/// of a step kept before; trims what it keeps.
pub fn filter(proposals: Vec<Proposal>) -> Vec<Proposal> {
    let mut kept: Vec<Proposal> = Vec::new();
    for mut proposal in proposals {
        proposal.text = proposal.text.trim().to_string();
        if proposal.text.is_empty()
            || proposal.text.chars().count() > MAX_STEP_CHARS
            || is_meta(&proposal.text)
            || kept
                .iter()
                .any(|k| jaccard(&k.text, &proposal.text) >= NEAR_DUPLICATE_AT)
        {
            continue;
        }
        kept.push(proposal);
    }
    kept
}

/// Words after which a keyword is likely a noun (what the task is about).
const NOUN_MARKERS: [&str; 16] = [
    "the", "a", "an", "of", "for", "among", "with", "in", "on", "each", "every", "whether", "that",
    "if", "your", "our",
];

/// Verbs of the kind tasks are phrased with: never a keyword.
const VERBS: [&str; 40] = [
    "improve",
    "improves",
    "increase",
    "increases",
    "reduce",
    "reduces",
    "determine",
    "identify",
    "compute",
    "calculate",
    "design",
    "create",
    "build",
    "explain",
    "choose",
    "decide",
    "prove",
    "solve",
    "describe",
    "compare",
    "estimate",
    "evaluate",
    "analyze",
    "analyse",
    "write",
    "makes",
    "affect",
    "affects",
    "causes",
    "depends",
    "minimize",
    "maximize",
    "optimize",
    "ensure",
    "verify",
    "measure",
    "check",
    "tests",
    "finds",
    "using",
];

/// Words too common to name what a task is about.
const STOPWORDS: [&str; 52] = [
    "about",
    "above",
    "after",
    "again",
    "against",
    "among",
    "around",
    "because",
    "before",
    "being",
    "below",
    "between",
    "could",
    "doing",
    "during",
    "every",
    "first",
    "given",
    "having",
    "possible",
    "should",
    "their",
    "there",
    "these",
    "thing",
    "things",
    "those",
    "three",
    "through",
    "under",
    "until",
    "using",
    "where",
    "which",
    "while",
    "would",
    "other",
    "still",
    "within",
    "without",
    "write",
    "quickly",
    "least",
    "most",
    "many",
    "something",
    "anything",
    "always",
    "steps",
    "whether",
    "quite",
    "really",
];

/// What the heuristics build from: the task's keywords, constraints and numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskTerms {
    pub keywords: Vec<String>,
    pub constraints: Vec<String>,
    pub numbers: Vec<String>,
}

/// Words opening a constraint phrase.
const CONSTRAINT_OPENERS: [&str; 9] = [
    "using",
    "with",
    "without",
    "within",
    "under",
    "only",
    "at most",
    "no more than",
    "before",
];
/// Words that end a constraint phrase (not kept).
const PHRASE_ENDS: [&str; 9] = [
    "in", "as", "to", "and", "so", "that", "then", "while", "for",
];
/// Most words of a constraint phrase.
const CONSTRAINT_WORDS: usize = 6;

/// The task's keywords (≥ 5 letters, not stop words, first-seen order), constraints (a
/// parenthesised part, or a phrase opened by "using", "with", "without", "at most", …)
/// and numbers.
pub fn task_terms(task: &str) -> TaskTerms {
    // Keywords right after a determiner, a preposition or a number (likely nouns) first,
    // the others after them; each in first-seen order.
    let mut leading: Vec<String> = Vec::new();
    let mut others: Vec<String> = Vec::new();
    let mut numbers: Vec<String> = Vec::new();
    let mut previous = String::new();
    for token in tokens(task) {
        if token.chars().all(|c| c.is_ascii_digit()) {
            if !numbers.contains(&token) {
                numbers.push(token.clone());
            }
        } else if token.chars().count() >= 5
            && !STOPWORDS.contains(&token.as_str())
            && !VERBS.contains(&token.as_str())
            && !leading.contains(&token)
            && !others.contains(&token)
        {
            let after_marker = NOUN_MARKERS.contains(&previous.as_str())
                || previous.chars().all(|c| c.is_ascii_digit()) && !previous.is_empty();
            if after_marker {
                leading.push(token.clone());
            } else {
                others.push(token.clone());
            }
        }
        previous = token;
    }
    let mut keywords = leading;
    keywords.extend(others);
    let mut constraints: Vec<String> = Vec::new();
    let mut rest = task;
    while let Some(open) = rest.find('(') {
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        let inside = rest[open + 1..open + close].trim();
        if !inside.is_empty() && inside.len() <= 80 {
            constraints.push(inside.to_string());
        }
        rest = &rest[open + close + 1..];
    }
    let words: Vec<&str> = task
        .split(|c: char| c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    let bare = |w: &str| {
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    for (i, _) in words.iter().enumerate() {
        for opener in CONSTRAINT_OPENERS {
            let parts: Vec<&str> = opener.split(' ').collect();
            if i + parts.len() > words.len()
                || !parts
                    .iter()
                    .enumerate()
                    .all(|(j, p)| bare(words[i + j]) == *p)
            {
                continue;
            }
            let mut phrase: Vec<&str> = Vec::new();
            for word in &words[i..] {
                if phrase.len() > parts.len() && PHRASE_ENDS.contains(&bare(word).as_str()) {
                    break;
                }
                let stop = word.ends_with([',', '.', ';', ':', '(', ')', '?', '!']);
                phrase.push(word.trim_end_matches([',', '.', ';', ':', '(', ')', '?', '!']));
                if stop || phrase.len() == CONSTRAINT_WORDS + parts.len() - 1 {
                    break;
                }
            }
            if phrase.len() > parts.len() {
                let phrase = phrase.join(" ");
                if !constraints.contains(&phrase) {
                    constraints.push(phrase);
                }
            }
        }
    }
    TaskTerms {
        keywords,
        constraints,
        numbers,
    }
}

/// A task-derived template: text, check and outcomes, with `{a}` and `{b}` (keywords),
/// `{c}` (a constraint) and `{n}` (a number) filled in.
struct Template {
    text: &'static str,
    check: &'static str,
    outcomes: [&'static str; 2],
}

/// The task-derived templates. Each names an observation or a check, so each states how
/// to verify it and what it can show.
const TASK_TEMPLATES: [Template; 12] = [
    Template {
        text: "List every {a} the task mentions and label each one for tracking.",
        check: "Count the labels: none missing or duplicated; if one is, fix the list then continue.",
        outcomes: ["complete list", "gap found"],
    },
    Template {
        text: "Check whether the constraint '{c}' rules out any option for the {a}.",
        check: "If an option breaks '{c}', record it as ruled out; otherwise keep it.",
        outcomes: ["ruled out", "still open"],
    },
    Template {
        text: "Test the simplest case of the {a} with {n} and record the outcome.",
        check: "If the outcome matches the expectation, keep the plan; else note the difference.",
        outcomes: ["matches", "differs"],
    },
    Template {
        text: "Split the {a} into two groups and check which group holds the {b}.",
        check: "If one group shows it, continue there; otherwise check the other group.",
        outcomes: ["first group", "second group"],
    },
    Template {
        text: "Measure how the {a} and the {b} relate in one small trial.",
        check: "Record before and after; if nothing changes, drop this lead.",
        outcomes: ["changes", "no change"],
    },
    Template {
        text: "Record what is already known about the {a} before acting again.",
        check: "Each fact has a source; if one has none, mark it as an assumption.",
        outcomes: ["sourced", "assumption"],
    },
    Template {
        text: "Compare two options for the {a} and pick one by a stated rule.",
        check: "Apply the rule to both; if it gives a strict winner, pick it; else refine the rule.",
        outcomes: ["winner", "tie"],
    },
    Template {
        text: "Verify that the plan for the {a} respects '{c}'.",
        check: "Count what the plan uses; if it breaks '{c}', cut a step; otherwise go on.",
        outcomes: ["within", "over"],
    },
    Template {
        text: "Assign every {a} in play a status (open, ruled out, confirmed) and log it.",
        check: "Each one has exactly one status; if not, assign the missing ones.",
        outcomes: ["all assigned", "missing"],
    },
    Template {
        text: "Observe the edge case where the {a} is extreme and log the result.",
        check: "If the edge case breaks the approach, revise it; otherwise keep it.",
        outcomes: ["holds", "breaks"],
    },
    Template {
        text: "Draw a small diagram linking the {a} to the {b} and check each link.",
        check: "Each link is backed by the task's text; if one is not, remove it.",
        outcomes: ["backed", "unbacked"],
    },
    Template {
        text: "Pick the one open question about the {a} that blocks progress and test it.",
        check: "If the test answers it, record the answer; otherwise narrow the question.",
        outcomes: ["answered", "narrowed"],
    },
];

/// What fills a slot when the task has none of its kind.
const NO_KEYWORD: &str = "goal";
const NO_CONSTRAINT: &str = "the task's stated limits";
const NO_NUMBER: &str = "one instance";

fn pick(list: &[String], at: usize, fallback: &str) -> String {
    if list.is_empty() {
        fallback.to_string()
    } else {
        list[at % list.len()].clone()
    }
}

/// Rounds of keyword rotation tried before numbered variants are used.
const HEURISTIC_ROUNDS: usize = 64;

/// `k` heuristic candidates for `task`, given every step applied so far in the session
/// (`applied`, backtracked ones included) and hints not yet offered. Deterministic.
pub fn heuristic(task: &str, applied: &[&str], hints: &[String], k: usize) -> Vec<Proposal> {
    let k = k.max(1);
    let mut out: Vec<Proposal> = Vec::new();
    let fresh = |text: &str, out: &[Proposal]| {
        !applied
            .iter()
            .any(|a| a.trim() == text || jaccard(a, text) >= HEURISTIC_REPEAT_AT)
            && !out
                .iter()
                .any(|o| jaccard(&o.text, text) >= NEAR_DUPLICATE_AT)
    };
    // Numbered variants differ in one number only: new when no step has the same text.
    let unused = |text: &str, out: &[Proposal]| {
        !applied.iter().any(|a| a.trim() == text) && !out.iter().any(|o| o.text == text)
    };
    for hint in hints {
        if out.len() == k {
            return out;
        }
        let text = hint.trim();
        if !text.is_empty() && !out.iter().any(|o| o.text == text) {
            out.push(Proposal {
                text: text.to_string(),
                rationale: HINT_RATIONALE.into(),
                ..Proposal::default()
            });
        }
    }
    // Two of five from the generic templates while unused, the rest from the task.
    let generic_share = (k * 2 / 5).min(k - out.len());
    let task_share = k - out.len() - generic_share;
    let terms = task_terms(task);
    let rotation = applied.len();
    let mut task_made = 0;
    'rounds: for round in 0..HEURISTIC_ROUNDS {
        for t in 0..TASK_TEMPLATES.len() {
            if task_made == task_share {
                break 'rounds;
            }
            let index = (t + rotation) % TASK_TEMPLATES.len();
            let template = &TASK_TEMPLATES[index];
            let a = pick(&terms.keywords, index + round, NO_KEYWORD);
            let mut b = pick(&terms.keywords, index + round + 1, NO_KEYWORD);
            if b == a {
                b = "result".into();
            }
            let c = pick(&terms.constraints, index + round, NO_CONSTRAINT);
            let n = pick(&terms.numbers, index + round, NO_NUMBER);
            let fill = |s: &str| {
                s.replace("{a}", &a)
                    .replace("{b}", &b)
                    .replace("{c}", &c)
                    .replace("{n}", &n)
            };
            let text = fill(template.text);
            if fresh(&text, &out) {
                out.push(Proposal {
                    text,
                    rationale: TASK_RATIONALE.into(),
                    how_to_verify: Some(fill(template.check)),
                    expected_outcomes: template.outcomes.iter().map(|s| s.to_string()).collect(),
                });
                task_made += 1;
            }
        }
    }
    // Numbered variants once the rotations are used up (a long session on a short task).
    let mut pass = 2;
    while task_made < task_share {
        let a = pick(&terms.keywords, pass, NO_KEYWORD);
        let text = format!("Re-check the {a} against step {pass} and record what changed.");
        if unused(&text, &out) {
            out.push(Proposal {
                text,
                rationale: TASK_RATIONALE.into(),
                how_to_verify: Some(
                    "If anything changed, log it; otherwise mark it stable.".into(),
                ),
                expected_outcomes: vec!["changed".into(), "stable".into()],
            });
            task_made += 1;
        }
        pass += 1;
    }
    for t in 0..GENERIC_TEMPLATES.len() {
        if out.len() == k {
            break;
        }
        let text = GENERIC_TEMPLATES[(t + rotation) % GENERIC_TEMPLATES.len()];
        if fresh(text, &out) {
            out.push(Proposal {
                text: text.into(),
                rationale: GENERIC_RATIONALE.into(),
                ..Proposal::default()
            });
        }
    }
    // Generic templates all used: fill from further task rounds.
    let mut pass = 100;
    while out.len() < k {
        let a = pick(&terms.keywords, pass, NO_KEYWORD);
        let text = format!(
            "Re-check the {a} against step {} and record what changed.",
            pass - 98
        );
        if unused(&text, &out) {
            out.push(Proposal {
                text,
                rationale: TASK_RATIONALE.into(),
                how_to_verify: Some(
                    "If anything changed, log it; otherwise mark it stable.".into(),
                ),
                expected_outcomes: vec!["changed".into(), "stable".into()],
            });
        }
        pass += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK: &str = "Find the counterfeit among 12 coins using a balance scale in as few steps as possible (3 weighings).";

    fn texts(proposals: &[Proposal]) -> Vec<&str> {
        proposals.iter().map(|p| p.text.as_str()).collect()
    }

    #[test]
    fn json_fenced_array_prose_and_think_blocks() {
        let (p, parser) = parse(
            r#"[{"text": "Weigh 1-4 vs 5-8", "rationale": "split", "how_to_verify": "tilt or balance", "expected_outcomes": ["left", "right", "balanced"]}]"#,
        );
        assert_eq!(parser, Parser::Json);
        assert_eq!(p[0].expected_outcomes.len(), 3);
        assert_eq!(p[0].how_to_verify.as_deref(), Some("tilt or balance"));

        let fenced = "Here you go:\n```json\n[{\"text\": \"a\"}]\n```\nand again\n```json\n[{\"text\": \"b\"}, {\"text\": \"c\"}]\n```\n";
        let (p, parser) = parse(fenced);
        assert_eq!((texts(&p), parser), (vec!["b", "c"], Parser::Fenced));

        let (p, parser) = parse(
            "Sure. [1, 2] then [{\"text\": \"x\", \"expected_outcomes\": [\"a\", \"b\"]}] done",
        );
        assert_eq!((texts(&p), parser), (vec!["x"], Parser::Array));

        let think = "<think>[{\"text\": \"hidden\"}]</think>\n- Weigh coins 1-4 against 5-8\n  Rationale: halves\n  How to verify: see which pan tilts\n- Record the result";
        let (p, parser) = parse(think);
        assert_eq!(parser, Parser::Prose);
        assert_eq!(
            texts(&p),
            vec!["Weigh coins 1-4 against 5-8", "Record the result"]
        );
        assert_eq!(p[0].rationale, "halves");
        assert_eq!(p[0].how_to_verify.as_deref(), Some("see which pan tilts"));

        let numbered = "1. Label the coins\n2) Weigh four against four\nStep 3: Record it";
        assert_eq!(
            texts(&parse(numbered).0),
            vec!["Label the coins", "Weigh four against four", "Record it"]
        );

        let blocks = "Text: Weigh 1 vs 2\nRationale: small\nHow_to_verify: tilt\nOutcomes: left; right; balance\n\nText: Label coins\nRationale: track";
        let (p, parser) = parse(blocks);
        assert_eq!(parser, Parser::Prose);
        assert_eq!(p[0].expected_outcomes, vec!["left", "right", "balance"]);
        assert_eq!(p.len(), 2);

        assert_eq!(parse("I cannot help with that.").1, Parser::None);
        assert_eq!(parse("<think>only thinking, never closed").1, Parser::None);
        assert_eq!(parse("").1, Parser::None);
    }

    #[test]
    fn the_filter_drops_empty_long_meta_and_near_duplicate_steps() {
        let p = |t: &str| Proposal {
            text: t.into(),
            ..Proposal::default()
        };
        let kept = filter(vec![
            p("  "),
            p(&"x".repeat(401)),
            p("We must think"),
            p("Approach: split"),
            p("Weigh coins one to four"),
            p("weigh coins one to four!"),
            p("Record the tilt"),
        ]);
        assert_eq!(
            texts(&kept),
            vec!["Weigh coins one to four", "Record the tilt"]
        );
    }

    #[test]
    fn task_terms_of_the_coin_task() {
        let terms = task_terms(TASK);
        assert_eq!(
            terms.keywords,
            vec!["counterfeit", "coins", "balance", "weighings", "scale"],
            "nouns after a determiner, a preposition or a number first"
        );
        assert_eq!(terms.numbers, vec!["12", "3"]);
        let caffeine =
            task_terms("Plan a 3-step experiment to test whether caffeine improves typing speed.");
        assert_eq!(
            caffeine.keywords,
            vec!["caffeine", "experiment", "typing", "speed"]
        );
        assert_eq!(terms.constraints[0], "3 weighings");
        assert_eq!(
            terms.constraints,
            vec!["3 weighings", "using a balance scale"]
        );
    }

    #[test]
    fn heuristics_never_repeat_an_applied_step_and_are_deterministic() {
        let mut applied: Vec<String> = Vec::new();
        for _ in 0..40 {
            let refs: Vec<&str> = applied.iter().map(String::as_str).collect();
            let batch = heuristic(TASK, &refs, &[], 5);
            assert_eq!(batch, heuristic(TASK, &refs, &[], 5));
            assert_eq!(batch.len(), 5);
            let first = batch[0].text.clone();
            assert!(!applied.contains(&first), "{first} repeated");
            applied.push(first);
        }
        let hints = vec!["Weigh 1,2,3 vs 4,5,6".to_string()];
        let batch = heuristic(TASK, &[], &hints, 3);
        assert_eq!(batch[0].text, hints[0]);
        assert_eq!(batch.len(), 3);
        assert_eq!(heuristic("Do it.", &[], &[], 5).len(), 5);
    }
}
