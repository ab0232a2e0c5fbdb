//! Candidate steps, by stage: the model [`prompt()`], the parse chain that reads a
//! model's answer ([`parse()`]: [`chain`] for JSON, [`prose`] for text), the
//! [`filter()`], and the [`heuristic()`] generator (from the task's [`terms`]).
//!
//! The chain: strip `<think>` blocks; a whole JSON array; the last fenced block holding
//! one; the last `[…]` that parses; prose: labelled `Text:/Rationale:/How_to_verify:/
//! Outcomes:` blocks, then bullets `-`, `*`, `1.`, `1)`, `Step N:`. The filter drops
//! empty steps, steps over [`MAX_STEP_CHARS`], meta openers and near-duplicates. The
//! heuristics are deterministic for a task, its history and k, and keep progressing:
//! candidates built from the task's own keywords, constraints and numbers, never one
//! already applied in the session, and the spec's five generic templates while unused.
//! Must not: do I/O, use randomness or the clock.

mod chain;
mod fields;
mod filter;
mod heuristic;
mod prompt;
mod prose;
mod terms;

pub(crate) use chain::{Parser, parse};
pub(crate) use filter::filter;
pub(crate) use heuristic::heuristic;
pub(crate) use prompt::prompt;
pub(crate) use terms::task_terms;

/// Longest step kept, in characters.
pub(crate) const MAX_STEP_CHARS: usize = 400;
/// Candidates this similar (token Jaccard) to one kept before are dropped.
pub(crate) const NEAR_DUPLICATE_AT: f64 = 0.9;
/// Rationale of a caller's hint offered as a candidate.
pub(crate) const HINT_RATIONALE: &str = "Hint from the caller";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::booster::state::Proposal;

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
            vec!["counterfeit", "coins"],
            "nouns after a determiner, a preposition or a number first, with their modifier; \
             not the constraints' words (balance scale, weighings)"
        );
        let demo = task_terms(
            "Find why the nightly export writes an empty file on some nights, without new infrastructure and before the 06:00 deadline",
        );
        assert_eq!(
            demo.keywords,
            vec!["nightly export", "empty file", "nights"],
            "the deadline and the infrastructure are the constraints' words"
        );
        assert_eq!(demo.numbers, vec!["06:00"], "a time of day is one number");
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
