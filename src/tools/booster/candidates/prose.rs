//! The parse chain, prose half: steps a model wrote as text rather than JSON.
//!
//! Owns: labelled `Text:/Rationale:/How_to_verify:/Outcomes:` blocks
//! ([`labelled_blocks`]) and bulleted or numbered lines (`-`, `*`, `1.`, `1)`,
//! `Step N:`) with the labelled lines that follow one ([`bullets`]), and what counts as
//! a template's placeholder instead of a step. Must not: read JSON (the structured half
//! in [`super::chain`] tries first).

use super::fields::{MAX_PARSED, cut, split_outcomes};
use crate::tools::booster::state::Proposal;

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
pub(super) fn labelled_blocks(text: &str) -> Vec<Proposal> {
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
pub(super) fn bullets(text: &str) -> Vec<Proposal> {
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
