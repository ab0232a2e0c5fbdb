//! The heuristic generator: candidate steps without a model.
//!
//! Owns: [`heuristic()`] (deterministic for a task, its history and k; it keeps
//! progressing: hints first, then candidates built from the task's own keywords,
//! constraints and numbers ([`super::terms`]), never one already applied in the
//! session, and the spec's five [`GENERIC_TEMPLATES`] while unused), and its templates.
//! Must not: use randomness or the clock.

use super::{HINT_RATIONALE, NEAR_DUPLICATE_AT, task_terms};
use crate::tools::booster::state::Proposal;
use crate::tools::booster::verifier::jaccard;

/// A heuristic candidate this similar to a step already applied is not proposed again.
pub(crate) const HEURISTIC_REPEAT_AT: f64 = 0.8;

/// Rationale of the spec's generic templates.
pub(crate) const GENERIC_RATIONALE: &str = "Heuristic diversified proposal without LLM";
/// Rationale of the task-derived heuristic steps.
pub(crate) const TASK_RATIONALE: &str = "Heuristic step built from the task's own terms (no model)";

/// The spec's five generic templates (rotated from the number of steps).
pub(crate) const GENERIC_TEMPLATES: [&str; 5] = [
    "Identify one concrete subgoal derived from the task.",
    "State a small check/measurement to validate progress.",
    "Split the problem into two smaller actions and pick one.",
    "Clarify assumptions/constraints blocking the next step.",
    "Pick a next action doable in <15 minutes.",
];

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
        text: "First, list every part of the {a} involved, so none gets missed later.",
        check: "Count the labels: none missing or duplicated; if one is, fix the list then continue.",
        outcomes: ["complete list", "gap found"],
    },
    Template {
        text: "Does '{c}' rule out any way of dealing with the {a}? Set those aside first.",
        check: "If an option breaks '{c}', record it as ruled out; otherwise keep it.",
        outcomes: ["ruled out", "still open"],
    },
    Template {
        text: "Start small: check the {a} once, around {n}, and note what happens.",
        check: "If the outcome matches the expectation, keep the plan; else note the difference.",
        outcomes: ["matches", "differs"],
    },
    Template {
        text: "Narrow it down: split the {a} in two and see which half shows the {b}.",
        check: "If one group shows it, continue there; otherwise check the other group.",
        outcomes: ["first group", "second group"],
    },
    Template {
        text: "Look for a link between the {a} and the {b}: change one and watch the other.",
        check: "Record before and after; if nothing changes, drop this lead.",
        outcomes: ["changes", "no change"],
    },
    Template {
        text: "Before going further, write down what I already know about the {a}, and how I know it.",
        check: "Each fact has a source; if one has none, mark it as an assumption.",
        outcomes: ["sourced", "assumption"],
    },
    Template {
        text: "Weigh two ways of handling the {a} against one stated rule, and pick one.",
        check: "Apply the rule to both; if it gives a strict winner, pick it; else refine the rule.",
        outcomes: ["winner", "tie"],
    },
    Template {
        text: "Make sure the plan for the {a} still fits '{c}'.",
        check: "Count what the plan uses; if it breaks '{c}', cut a step; otherwise go on.",
        outcomes: ["within", "over"],
    },
    Template {
        text: "Mark each {a} still in play as open, ruled out or confirmed.",
        check: "Each one has exactly one status; if not, assign the missing ones.",
        outcomes: ["all assigned", "missing"],
    },
    Template {
        text: "Look at the extreme case of the {a}: does the idea still hold there?",
        check: "If the edge case breaks the approach, revise it; otherwise keep it.",
        outcomes: ["holds", "breaks"],
    },
    Template {
        text: "Sketch how the {a} leads to the {b}, and check each link against the facts.",
        check: "Each link is backed by the task's text; if one is not, remove it.",
        outcomes: ["backed", "unbacked"],
    },
    Template {
        text: "Find the one open question about the {a} that blocks me, and test it.",
        check: "If the test answers it, record the answer; otherwise narrow the question.",
        outcomes: ["answered", "narrowed"],
    },
];

/// What fills a slot when the task has none of its kind.
const NO_KEYWORD: &str = "goal";
const NO_CONSTRAINT: &str = "the task's stated limits";
const NO_NUMBER: &str = "the smallest case";

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
pub(crate) fn heuristic(task: &str, applied: &[&str], hints: &[String], k: usize) -> Vec<Proposal> {
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
