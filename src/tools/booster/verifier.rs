//! The verifier: how a candidate step is scored, in one place.
//!
//! Owns: the [`Scorer`] seam (anything that scores a proposal against a task and the
//! steps so far), the reference scorer [`ReferenceVerifier`] of `specs/booster.md` with
//! every weight and threshold a named constant, and the text helpers the rest of the
//! family shares ([`tokens`], [`jaccard`]). A better scorer sits beside the reference
//! one as another [`Scorer`]; the events record which one scored (`scorer`).
//! Must not: do I/O, depend on time or randomness, or change a reference score (the
//! spec's vectors are unit tests below).

use super::config::Config;
use super::payload::{Proposal, Score};
use std::collections::HashSet;

/// What scores a candidate step.
pub(crate) trait Scorer {
    /// Its name, as recorded with every candidate set it scored.
    fn name(&self) -> &'static str;
    /// Scores `proposal` for `task`, given the steps applied so far (oldest first).
    fn score(&self, task: &str, steps: &[&str], proposal: &Proposal, config: &Config) -> Score;
}

/// Name of the reference scorer in events.
pub(crate) const REFERENCE_SCORER: &str = "reference-1";

// ---- rules: length ----
/// A step this long or shorter is "short".
pub(crate) const SHORT_CHARS: usize = 200;
/// A step this long or shorter (and not short) is "medium".
pub(crate) const MEDIUM_CHARS: usize = 400;
pub(crate) const SHORT_BONUS: f64 = 0.3;
pub(crate) const MEDIUM_BONUS: f64 = 0.1;
pub(crate) const LONG_PENALTY: f64 = -0.2;

// ---- rules: vague words ----
/// Matched case-insensitively anywhere in the text, every occurrence counted.
pub(crate) const VAGUE_WORDS: [&str; 5] = [
    "obviously",
    "evidently",
    "clearly",
    "trivial",
    "without proof",
];
pub(crate) const VAGUE_PENALTY_EACH: f64 = 0.2;
pub(crate) const VAGUE_PENALTY_CAP: f64 = 0.6;

// ---- rules: verification ----
/// A non-empty `howToVerify`.
pub(crate) const HOW_TO_VERIFY_BONUS: f64 = 0.2;
/// Entropy boost: `min(ENTROPY_CAP, ENTROPY_FACTOR · log2 n)` for n ≥ 2 outcomes.
pub(crate) const ENTROPY_FACTOR: f64 = 0.12;
pub(crate) const ENTROPY_CAP: f64 = 0.25;
/// Value of information: `min(VOI_CAP, boost / cost)`, cost 1 (a proposal states none).
pub(crate) const VOI_CAP: f64 = 0.2;
pub(crate) const VERIFICATION_COST: f64 = 1.0;

// ---- rules: information-gain words (in the step's text) ----
/// Matched case-insensitively as substrings, every occurrence counted; `if` and `then`
/// only followed by white space.
pub(crate) const INFO_WORDS: [&str; 10] = [
    "if ", "then ", "case", "outcome", "tilt", "balance", "verify", "check", "observe", "measure",
];
pub(crate) const INFO_BONUS_EACH: f64 = 0.08;
pub(crate) const INFO_BONUS_CAP: f64 = 0.3;

// ---- rules: meta openers ----
/// A step opening with one of these (case-insensitive) is talk about the task, not a
/// step: penalised here and dropped by the candidate filter.
pub(crate) const META_OPENERS: [&str; 9] = [
    "we are",
    "standard approach",
    "each step must",
    "each step should",
    "we must",
    "the task",
    "important:",
    "approach:",
    "constraints:",
];
pub(crate) const META_PENALTY: f64 = -0.35;

// ---- rules: final step ----
pub(crate) const FINAL_STEP_WITH_CHECK_BONUS: f64 = 0.15;
pub(crate) const FINAL_STEP_BONUS: f64 = 0.05;

// ---- rules: objective proxies ----
/// A step naming an observation (each followed by a word boundary).
pub(crate) const OBSERVATION_VERBS: [&str; 9] = [
    "draw", "pick", "measure", "record", "log", "check", "verify", "test", "observe",
];
pub(crate) const OBSERVATION_BONUS: f64 = 0.3;
/// A step that labels or assigns (each followed by a word boundary).
pub(crate) const LABEL_VERBS: [&str; 4] = ["label", "assign", "relabel", "rename"];
pub(crate) const LABEL_BONUS: f64 = 0.1;

// ---- rules: the task's keywords ----
/// Tokens this long or longer are keywords.
pub(crate) const KEYWORD_MIN_CHARS: usize = 5;
pub(crate) const KEYWORD_BONUS: f64 = 0.15;
pub(crate) const NO_KEYWORD_PENALTY: f64 = -0.1;

// ---- rules: novelty against the steps so far ----
pub(crate) const NOVEL_MEAN_BELOW: f64 = 0.3;
pub(crate) const NOVEL_BONUS: f64 = 0.2;
pub(crate) const FRESH_MEAN_BELOW: f64 = 0.5;
pub(crate) const FRESH_BONUS: f64 = 0.1;

// ---- redundancy ----
pub(crate) const FIRST_STEP_REDUNDANCY: f64 = 0.05;
pub(crate) const DUPLICATE_AT: f64 = 0.95;
pub(crate) const DUPLICATE_PENALTY: f64 = -0.5;
pub(crate) const NEAR_DUPLICATE_AT: f64 = 0.8;
pub(crate) const NEAR_DUPLICATE_PENALTY: f64 = -0.3;
pub(crate) const NEW_STEP_REDUNDANCY: f64 = 0.1;

// ---- consistency ----
pub(crate) const CONTRADICTION_WORDS: [&str; 4] = [
    "in contradiction",
    "in conflict",
    "contradicts",
    "inconsistent",
];
pub(crate) const CONTRADICTION_PENALTY: f64 = -0.3;
pub(crate) const CONSISTENT_BONUS: f64 = 0.05;

/// Lower-case word tokens: letters and digits, everything else a separator.
pub(crate) fn tokens(text: &str) -> Vec<String> {
    let lowered: String = text
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect::<String>()
        .to_lowercase();
    lowered.split_whitespace().map(str::to_string).collect()
}

/// Token Jaccard similarity of two texts (0 when both have no tokens).
pub(crate) fn jaccard(a: &str, b: &str) -> f64 {
    let a: HashSet<String> = tokens(a).into_iter().collect();
    let b: HashSet<String> = tokens(b).into_iter().collect();
    let union = a.union(&b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

/// Whether `text` opens with a meta opener.
pub(crate) fn is_meta(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    META_OPENERS.iter().any(|opener| lower.starts_with(opener))
}

fn occurrences(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// Whether `verb` occurs in `lower` followed by a word boundary.
fn has_verb(lower: &str, verb: &str) -> bool {
    lower.match_indices(verb).any(|(at, _)| {
        lower[at + verb.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

/// How many distinguishable outcomes a proposal states: its expected outcomes when it
/// gives two or more distinct ones, else what its check and rationale spell out.
pub(crate) fn outcome_count(proposal: &Proposal) -> usize {
    let labels: HashSet<String> = proposal
        .expected_outcomes
        .iter()
        .map(|o| o.trim().to_lowercase())
        .filter(|o| !o.is_empty())
        .collect();
    if labels.len() >= 2 {
        return labels.len();
    }
    let mut joined = String::new();
    if let Some(check) = &proposal.how_to_verify {
        joined.push_str(check);
    }
    if !proposal.rationale.is_empty() {
        joined.push('\n');
        joined.push_str(&proposal.rationale);
    }
    let joined = joined.to_lowercase();
    if joined.trim().is_empty() {
        return 0;
    }
    let words = tokens(&joined);
    let followed = |first: &str, seconds: &[&str]| {
        words
            .windows(2)
            .any(|w| w[0] == first && seconds.contains(&w[1].as_str()))
    };
    let mut outcomes = 0;
    if joined.contains("balance") {
        outcomes += 1;
    }
    if followed("left", &["tilt", "tilts", "heavy", "heavier"]) {
        outcomes += 1;
    }
    if followed("right", &["tilt", "tilts", "heavy", "heavier"]) {
        outcomes += 1;
    }
    if joined.contains("heavier") || joined.contains("lighter") {
        outcomes += 1;
    }
    let separators = occurrences(&joined, ";")
        + occurrences(&joined, "/")
        + words.iter().filter(|w| *w == "or").count();
    outcomes += separators.min(2);
    let if_at = words.iter().position(|w| w == "if");
    if let Some(at) = if_at
        && words[at..].iter().any(|w| w == "then")
    {
        outcomes += 1;
        if words.iter().any(|w| w == "else") {
            outcomes += 1;
        }
    }
    outcomes
}

/// The entropy boost of `n` outcomes.
pub(crate) fn entropy_boost(n: usize) -> f64 {
    if n < 2 {
        return 0.0;
    }
    (ENTROPY_FACTOR * (n as f64).log2()).min(ENTROPY_CAP)
}

/// The scorer of `specs/booster.md`, the original's rules and weights.
pub(crate) struct ReferenceVerifier;

impl ReferenceVerifier {
    /// The rules part of a score.
    pub(crate) fn rules(task: &str, steps: &[&str], proposal: &Proposal) -> f64 {
        let text = proposal.text.trim();
        // White space of any kind counts as one space (`if\t` is `if `).
        let lower: String = text
            .to_lowercase()
            .chars()
            .map(|c| if c.is_whitespace() { ' ' } else { c })
            .collect();
        let mut rules = 0.0;
        let length = text.chars().count();
        rules += if length <= SHORT_CHARS {
            SHORT_BONUS
        } else if length <= MEDIUM_CHARS {
            MEDIUM_BONUS
        } else {
            LONG_PENALTY
        };
        let vague: usize = VAGUE_WORDS.iter().map(|w| occurrences(&lower, w)).sum();
        if vague > 0 {
            rules -= (VAGUE_PENALTY_EACH * vague as f64).min(VAGUE_PENALTY_CAP);
        }
        let has_check = proposal
            .how_to_verify
            .as_deref()
            .is_some_and(|c| !c.trim().is_empty());
        if has_check {
            rules += HOW_TO_VERIFY_BONUS;
        }
        let boost = entropy_boost(outcome_count(proposal));
        rules += boost;
        rules += (boost / VERIFICATION_COST).min(VOI_CAP);
        let info: usize = INFO_WORDS.iter().map(|w| occurrences(&lower, w)).sum();
        if info > 0 {
            rules += (INFO_BONUS_EACH * info as f64).min(INFO_BONUS_CAP);
        }
        if is_meta(text) {
            rules += META_PENALTY;
        }
        if is_final_step(text) {
            rules += if has_check {
                FINAL_STEP_WITH_CHECK_BONUS
            } else {
                FINAL_STEP_BONUS
            };
        }
        if OBSERVATION_VERBS.iter().any(|v| has_verb(&lower, v)) {
            rules += OBSERVATION_BONUS;
        }
        if LABEL_VERBS.iter().any(|v| has_verb(&lower, v)) {
            rules += LABEL_BONUS;
        }
        let task_keywords: HashSet<String> = keywords(task).collect();
        if keywords(text).any(|k| task_keywords.contains(&k)) {
            rules += KEYWORD_BONUS;
        } else {
            rules += NO_KEYWORD_PENALTY;
        }
        if !steps.is_empty() {
            let mean = steps.iter().map(|s| jaccard(s, text)).sum::<f64>() / steps.len() as f64;
            if mean < NOVEL_MEAN_BELOW {
                rules += NOVEL_BONUS;
            } else if mean < FRESH_MEAN_BELOW {
                rules += FRESH_BONUS;
            }
        }
        rules
    }

    /// The redundancy part: against the most similar step so far.
    pub(crate) fn redundancy(steps: &[&str], text: &str) -> f64 {
        if steps.is_empty() {
            return FIRST_STEP_REDUNDANCY;
        }
        let max = steps
            .iter()
            .map(|s| jaccard(s, text))
            .fold(0.0_f64, f64::max);
        if max >= DUPLICATE_AT {
            DUPLICATE_PENALTY
        } else if max >= NEAR_DUPLICATE_AT {
            NEAR_DUPLICATE_PENALTY
        } else {
            NEW_STEP_REDUNDANCY
        }
    }

    /// The consistency part.
    pub(crate) fn consistency(text: &str) -> f64 {
        let lower = text.to_lowercase();
        if CONTRADICTION_WORDS.iter().any(|w| lower.contains(w)) {
            CONTRADICTION_PENALTY
        } else {
            CONSISTENT_BONUS
        }
    }
}

/// Whether a step opens with "Final step:" (any case, spaces before the colon allowed).
pub(crate) fn is_final_step(text: &str) -> bool {
    let lower = text.trim_start().to_lowercase();
    let Some(rest) = lower.strip_prefix("final") else {
        return false;
    };
    let rest = rest.trim_start();
    rest.len() < lower.len() - "final".len()
        && rest
            .strip_prefix("step")
            .is_some_and(|after| after.trim_start().starts_with(':'))
}

fn keywords(text: &str) -> impl Iterator<Item = String> {
    tokens(text)
        .into_iter()
        .filter(|t| t.chars().count() >= KEYWORD_MIN_CHARS)
}

/// Rounds a score part to 4 decimals (what answers and events carry).
fn round(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}

impl Scorer for ReferenceVerifier {
    fn name(&self) -> &'static str {
        REFERENCE_SCORER
    }

    fn score(&self, task: &str, steps: &[&str], proposal: &Proposal, config: &Config) -> Score {
        let rules = Self::rules(task, steps, proposal);
        let redundancy = Self::redundancy(steps, proposal.text.trim());
        let consistency = Self::consistency(proposal.text.trim());
        let total = config.w_rules * rules
            + config.w_redundancy * redundancy
            + config.w_consistency * consistency;
        Score {
            rules_score: round(rules),
            redundancy_score: round(redundancy),
            consistency_score: round(consistency),
            total_score: round(total),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TASK: &str = "Find the counterfeit among 12 coins using a balance scale in as few steps as possible (3 weighings).";

    fn proposal(text: &str, check: Option<&str>) -> Proposal {
        Proposal {
            text: text.into(),
            rationale: String::new(),
            how_to_verify: check.map(str::to_string),
            expected_outcomes: Vec::new(),
        }
    }

    fn scored(text: &str, check: Option<&str>) -> Score {
        ReferenceVerifier.score(TASK, &[], &proposal(text, check), &Config::default())
    }

    fn near(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() <= 0.01
    }

    #[test]
    fn the_spec_reference_vectors_are_reproduced() {
        let weigh = scored(
            "Weigh 1,2,3,4 vs 5,6,7,8.",
            Some("If balanced then suspects 9-12; left tilt or right tilt"),
        );
        assert!(near(weigh.rules_score, 0.85), "{weigh:?}");
        assert!(near(weigh.total_score, 0.53), "{weigh:?}");
        let vague = scored("Obviously the answer is coin 1, clearly trivial.", None);
        assert!(near(vague.rules_score, -0.4), "{vague:?}");
        assert!(near(vague.total_score, -0.22), "{vague:?}");
        let meta = scored("We must consider the task carefully.", None);
        assert!(near(meta.rules_score, -0.15), "{meta:?}");
        assert!(near(meta.total_score, -0.07), "{meta:?}");
    }

    #[test]
    fn history_shapes_redundancy_and_novelty() {
        let steps = ["Weigh 1,2,3,4 vs 5,6,7,8."];
        let same = ReferenceVerifier.score(
            TASK,
            &steps,
            &proposal("Weigh 1,2,3,4 vs 5,6,7,8.", None),
            &Config::default(),
        );
        assert_eq!(same.redundancy_score, DUPLICATE_PENALTY);
        let new = ReferenceVerifier.score(
            TASK,
            &steps,
            &proposal("Record which pan tilts for the coins.", None),
            &Config::default(),
        );
        assert_eq!(new.redundancy_score, NEW_STEP_REDUNDANCY);
        // record (+0.3), tilt (+0.08), coins (+0.15), short (+0.3), novel (+0.2).
        assert!(near(new.rules_score, 1.03), "{new:?}");
    }

    #[test]
    fn outcomes_final_steps_and_contradictions() {
        let mut p = proposal("Final step: name the coin.", Some("weigh it"));
        p.expected_outcomes = vec!["heavy".into(), "light".into(), "Heavy ".into()];
        assert_eq!(outcome_count(&p), 2);
        assert!(is_final_step("final  step : x"));
        assert!(!is_final_step("finalstep: x"));
        assert!(!is_final_step("Final answer: x"));
        assert_eq!(
            ReferenceVerifier::consistency("This contradicts step 2"),
            CONTRADICTION_PENALTY
        );
        assert!(has_verb("we log it", "log"));
        assert!(!has_verb("logging", "log"));
        assert!(is_meta("  Approach: split"));
    }

    #[test]
    fn jaccard_of_tokens() {
        assert_eq!(jaccard("a b", "b a"), 1.0);
        assert_eq!(jaccard("", ""), 0.0);
        assert!((jaccard("a b c", "a b d") - 0.5).abs() < 1e-9);
    }
}
