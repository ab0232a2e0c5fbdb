//! The booster projection: a session's task, config and hints, its scratchpad of applied
//! steps (after backtracks), every iteration's candidate set, scores, choice, beam and
//! loop checks, and the model diagnostics, as folded from the booster family's events.
//!
//! Owns: the shapes ([`Proposal`], [`Score`], [`Scored`], [`CandidateSet`], [`Beam`],
//! [`Applied`], [`LoopCheck`], …), which are also the bodies of the booster events as
//! written (camelCase JSON), the fold ([`BoosterState::apply`]), the summary text
//! ([`BoosterState::summary`]) and the arbiter picks ([`arbiter_picks`]). Memory is
//! bounded: raw model samples keep at most [`MAX_RAW_SAMPLES`] of
//! [`RAW_SAMPLE_CHARS`] each (the full texts stay in the ledger), and a session runs at
//! most `MAX_STEPS_LIMIT` iterations. Must not: do I/O, or know how an event is stored.

use crate::projection::family::FamilyState;
use crate::provider::record::ModelCallView;
use crate::tools::booster::config::Config;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Raw model samples kept in the diagnostics (the newest).
pub(crate) const MAX_RAW_SAMPLES: usize = 5;
/// Characters of a prompt or response kept in one raw sample.
pub(crate) const RAW_SAMPLE_CHARS: usize = 2_000;
/// Most arbiter picks kept.
pub(crate) const MAX_ARBITER_PICKS: usize = 5;
/// Most distinct recent steps in a summary.
pub(crate) const SUMMARY_STEPS: usize = 5;

/// One proposed next step.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Proposal {
    pub text: String,
    #[serde(default)]
    pub rationale: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub how_to_verify: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_outcomes: Vec<String>,
}

/// A proposal's score, in parts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Score {
    pub rules_score: f64,
    pub redundancy_score: f64,
    pub consistency_score: f64,
    pub total_score: f64,
}

/// A proposal with its score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Scored {
    pub proposal: Proposal,
    pub score: Score,
}

/// `booster_started`: what the session is for and how it runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Started {
    pub task: String,
    pub config: Config,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seed_hints: Vec<String>,
    /// What its steps are numbered against; none in a session recorded before this was
    /// (its steps were numbered against `maxSteps`, and are drawn so still).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_count: Option<StepCount>,
}

/// What a booster session's steps are numbered against ("step 2 of N" in its pictures).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum StepCount {
    /// The iterations a `solve` set out to run.
    Planned(u64),
    /// The steps applied so far (a session stepped call by call).
    SoFar,
}

impl StepCount {
    /// The total the step of iteration `iteration` is numbered against; `None` (a session
    /// recorded before steps were counted) numbers against `max_steps`, as it was drawn.
    pub(crate) fn total(count: Option<StepCount>, iteration: u64, max_steps: u64) -> u64 {
        match count {
            Some(StepCount::Planned(planned)) => planned.max(iteration),
            Some(StepCount::SoFar) => iteration,
            None => max_steps,
        }
    }
}

/// `hints_added`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Hints {
    pub hints: Vec<String>,
}

/// [`Source::provider`] of heuristic candidate sets (the server's templates around the
/// task, no model).
pub(crate) const HEURISTIC_PROVIDER: &str = "heuristic";

/// Where an iteration's candidates came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Source {
    /// `heuristic`, `mcp` (client sampling) or the HTTP provider's name.
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why heuristics were used or filled in, when a model was meant to be asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

/// A model call behind a candidate set, in short: the whole call (prompt, response,
/// attempts) is the `model_call_recorded` event just before the candidate set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModelOutput {
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// "http", "sampling" or "sampling-input-required".
    pub transport: String,
    pub prompt_chars: u64,
    pub response_chars: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Proposals the parse chain read from the response.
    pub parsed: u64,
    /// Which parser read them: json, fenced, array, prose, none.
    pub parser: String,
}

/// `candidates_scored`: one iteration's candidates, best first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CandidateSet {
    pub iteration: u64,
    pub source: Source,
    pub scorer: String,
    pub candidates: Vec<Scored>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_output: Option<ModelOutput>,
}

/// One head of a beam rollout and its best continuation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BeamHead {
    /// Its position in the candidate set.
    pub candidate: u64,
    pub text: String,
    /// Continuation steps and their totals, depth 2 onwards.
    pub path: Vec<PathStep>,
    /// Mean total along head and path.
    pub value: f64,
}

/// One simulated step of a rollout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PathStep {
    pub text: String,
    pub total_score: f64,
}

/// `beam_rolled_out`: why a beam ran, its heads and which won.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Beam {
    pub iteration: u64,
    /// Total of the last applied step and of the best candidate: their difference was
    /// below `minImprovement`.
    pub last_total: f64,
    pub best_total: f64,
    pub heads: Vec<BeamHead>,
    /// Position in `heads` of the winner.
    pub chosen: u64,
}

/// How a step was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Via {
    /// Best-of-N.
    Best,
    /// The beam's winner.
    Beam,
}

/// `step_applied`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Applied {
    pub iteration: u64,
    /// Its position in the candidate set.
    pub candidate: u64,
    pub via: Via,
    pub proposal: Proposal,
    pub score: Score,
}

/// Why a loop check fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LoopKind {
    /// The last two steps are equal.
    Stagnation,
    /// The new step repeats an earlier one.
    Loop,
}

/// `backtracked` (the step was dropped from the scratchpad: an event, nothing deleted)
/// or `loop_detected` (backtracking is off: the step stays).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LoopCheck {
    pub iteration: u64,
    pub kind: LoopKind,
    /// The repeated step's text.
    pub text: String,
    /// 1-based position in the scratchpad of the earlier step it repeats.
    pub repeats_step: u64,
}

/// A step on the scratchpad.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Step {
    /// 0-based position on the scratchpad.
    pub index: u64,
    pub iteration: u64,
    pub seq: u64,
    #[serde(flatten)]
    pub proposal: Proposal,
    pub score: Score,
}

/// One iteration as folded.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Iteration {
    pub iteration: u64,
    pub seq: u64,
    pub source: Source,
    pub scorer: String,
    /// All candidates, best first.
    pub candidates: Vec<Scored>,
    /// The model call behind them, in short.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_output: Option<ModelOutput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen: Option<Applied>,
    /// Seq of the chosen step's event (its thought in the tree).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beam: Option<Beam>,
    /// Seq of the `beam_rolled_out` event (for the pictures; not in answers).
    #[serde(skip)]
    pub beam_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loop_check: Option<LoopCheck>,
    /// Seq of the `backtracked` or `loop_detected` event (for the pictures; not in
    /// answers).
    #[serde(skip)]
    pub check_seq: Option<u64>,
    /// Whether the loop check dropped the step.
    pub backtracked: bool,
}

/// One kept model sample.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawSample {
    pub provider: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub prompt: String,
    pub response: String,
    pub at: String,
}

/// Model diagnostics, bounded.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Diagnostics {
    /// The provider of the last candidate set.
    pub provider: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_model: Option<String>,
    /// Model calls made (each an attempt to generate one candidate set).
    pub total_calls: u64,
    pub last_prompt_chars: u64,
    pub last_response_chars: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_ok_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The newest [`MAX_RAW_SAMPLES`] model answers of the session, each cut to
    /// [`RAW_SAMPLE_CHARS`] (filled from the tree's model calls by [`Diagnostics::sampled`]).
    pub raw_samples: VecDeque<RawSample>,
}

impl Diagnostics {
    /// These diagnostics with the raw samples of the session's model calls, and the
    /// arbiter picks of all of them (bounded: [`MAX_RAW_SAMPLES`], [`MAX_ARBITER_PICKS`]).
    pub(crate) fn sampled(&self, calls: &[ModelCallView]) -> (Diagnostics, Vec<String>) {
        let mut out = self.clone();
        let mut picks = Vec::new();
        for view in calls {
            let Some(response) = view.record.response.as_ref() else {
                continue;
            };
            arbiter_picks(&response.content, &mut picks);
            if out.raw_samples.len() == MAX_RAW_SAMPLES {
                out.raw_samples.pop_front();
            }
            let prompt = view
                .record
                .request
                .messages
                .last()
                .map_or("", |m| m.content.as_str());
            out.raw_samples.push_back(RawSample {
                provider: view.record.provider.clone(),
                model: Some(view.record.model.clone()).filter(|m| !m.is_empty()),
                prompt: cut(prompt, RAW_SAMPLE_CHARS),
                response: cut(&response.content, RAW_SAMPLE_CHARS),
                at: crate::event::format_time(view.at),
            });
        }
        (out, picks)
    }
}

/// A booster session as folded.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BoosterState {
    pub task: String,
    pub config: Config,
    pub hints: Vec<String>,
    /// Hints not yet offered as candidates.
    #[serde(skip)]
    pub pending_hints: Vec<String>,
    /// The scratchpad.
    pub steps: Vec<Step>,
    pub iterations: Vec<Iteration>,
    pub backtracks: u64,
    pub diagnostics: Diagnostics,
    /// The tool of the last call that recorded (for tree nodes).
    #[serde(skip)]
    pub last_tool: String,
    /// Seq of `booster_started` (for the pictures; not in answers).
    #[serde(skip)]
    pub started_seq: u64,
    /// Each `hints_added` event: its seq and hints (for the pictures; not in answers).
    #[serde(skip)]
    pub hint_events: Vec<(u64, Vec<String>)>,
    /// What its steps are numbered against (see [`Started::step_count`]).
    #[serde(skip)]
    pub step_count: Option<StepCount>,
}

fn cut(text: &str, chars: usize) -> String {
    crate::export::truncate(text, chars, crate::export::Ellipsis::After)
}

/// Whether a line of model output states an answer: it opens with "final step:",
/// "final answer:", "answer:", "solution:", "conclusion:", "result:" (spaces before the
/// colon allowed), or the word "therefore" or "thus".
fn states_answer(line: &str) -> bool {
    let lower = line.to_lowercase();
    let labelled = |label: &str| {
        let mut rest = lower.as_str();
        for word in label.split(' ') {
            match rest.trim_start().strip_prefix(word) {
                Some(after) => rest = after,
                None => return false,
            }
        }
        rest.trim_start().starts_with(':')
    };
    let word = |w: &str| {
        lower
            .strip_prefix(w)
            .is_some_and(|rest| rest.chars().next().is_none_or(|c| !c.is_alphanumeric()))
    };
    [
        "final step",
        "final answer",
        "answer",
        "solution",
        "conclusion",
        "result",
    ]
    .iter()
    .any(|label| labelled(label))
        || word("therefore")
        || word("thus")
}

/// The lines of `response` that state an answer, added to `picks` (distinct, at most
/// [`MAX_ARBITER_PICKS`]).
pub(crate) fn arbiter_picks(response: &str, picks: &mut Vec<String>) {
    for line in response.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if picks.len() >= MAX_ARBITER_PICKS {
            return;
        }
        if states_answer(line) && !picks.iter().any(|p| p.eq_ignore_ascii_case(line)) {
            picks.push(cut(line, RAW_SAMPLE_CHARS));
        }
    }
}

impl FamilyState for BoosterState {
    fn family(&self) -> &'static str {
        "booster"
    }

    fn json(&self) -> Option<(&'static str, serde_json::Value)> {
        let state = serde_json::to_value(self).expect("booster state serializes");
        Some(("booster", state))
    }
}

impl BoosterState {
    pub(crate) fn new(started: Started) -> Self {
        BoosterState {
            task: started.task,
            config: started.config,
            hints: started.seed_hints.clone(),
            pending_hints: started.seed_hints,
            steps: Vec::new(),
            iterations: Vec::new(),
            backtracks: 0,
            diagnostics: Diagnostics {
                provider: "heuristic".into(),
                ..Diagnostics::default()
            },
            last_tool: String::new(),
            started_seq: 0,
            hint_events: Vec::new(),
            step_count: started.step_count,
        }
    }

    /// Iterations run so far.
    pub(crate) fn iteration_count(&self) -> u64 {
        self.iterations.len() as u64
    }

    /// The scratchpad's texts, oldest first.
    pub(crate) fn step_texts(&self) -> Vec<&str> {
        self.steps
            .iter()
            .map(|s| s.proposal.text.as_str())
            .collect()
    }

    /// Every text ever applied (backtracked ones too), oldest first.
    pub(crate) fn applied_texts(&self) -> Vec<&str> {
        self.iterations
            .iter()
            .filter_map(|i| i.chosen.as_ref().map(|c| c.proposal.text.as_str()))
            .collect()
    }

    pub(crate) fn hints_added(&mut self, hints: Vec<String>) {
        self.hints.extend(hints.iter().cloned());
        self.pending_hints.extend(hints);
    }

    /// Folds a candidate set committed at `at` (ms) as event `seq`.
    pub(crate) fn candidates_scored(&mut self, seq: u64, at: u64, set: CandidateSet) {
        self.pending_hints.clear();
        self.diagnostics.provider = set.source.provider.clone();
        if let Some(output) = &set.model_output {
            let diagnostics = &mut self.diagnostics;
            diagnostics.total_calls += 1;
            diagnostics.last_model = output.model.clone();
            diagnostics.last_prompt_chars = output.prompt_chars;
            diagnostics.last_response_chars = output.response_chars;
            let when = crate::event::format_time(at);
            match &output.error {
                Some(error) => {
                    diagnostics.last_error_at = Some(when);
                    diagnostics.last_error = Some(cut(error, RAW_SAMPLE_CHARS));
                }
                None => diagnostics.last_ok_at = Some(when),
            }
        }
        self.iterations.push(Iteration {
            iteration: set.iteration,
            seq,
            source: set.source,
            scorer: set.scorer,
            candidates: set.candidates,
            model_output: set.model_output,
            chosen: None,
            chosen_seq: None,
            beam: None,
            beam_seq: None,
            loop_check: None,
            check_seq: None,
            backtracked: false,
        });
    }

    /// Folds a beam rollout recorded as event `seq`.
    pub(crate) fn beam_rolled_out(&mut self, seq: u64, beam: Beam) {
        if let Some(last) = self.iterations.last_mut() {
            last.beam = Some(beam);
            last.beam_seq = Some(seq);
        }
    }

    pub(crate) fn step_applied(&mut self, seq: u64, applied: Applied) {
        self.steps.push(Step {
            index: self.steps.len() as u64,
            iteration: applied.iteration,
            seq,
            proposal: applied.proposal.clone(),
            score: applied.score,
        });
        if let Some(last) = self.iterations.last_mut() {
            last.chosen = Some(applied);
            last.chosen_seq = Some(seq);
        }
    }

    /// A loop check recorded as event `seq`: `backtracked` drops the last step from the
    /// scratchpad.
    pub(crate) fn loop_checked(&mut self, seq: u64, check: LoopCheck, backtracked: bool) {
        if backtracked {
            self.steps.pop();
            self.backtracks += 1;
        }
        if let Some(last) = self.iterations.last_mut() {
            last.loop_check = Some(check);
            last.check_seq = Some(seq);
            last.backtracked = backtracked;
        }
    }

    /// `Summary:\nTask: …` then the last ≤ [`SUMMARY_STEPS`] distinct steps as `- ` lines.
    pub(crate) fn summary(&self) -> String {
        let mut recent: Vec<&str> = Vec::new();
        for step in self.steps.iter().rev() {
            let text = step.proposal.text.trim();
            if !recent.contains(&text) {
                recent.push(text);
            }
            if recent.len() == SUMMARY_STEPS {
                break;
            }
        }
        recent.reverse();
        let mut out = format!("Summary:\nTask: {}", self.task);
        for text in recent {
            out.push_str("\n- ");
            out.push_str(text);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_lines_are_picked_once_and_bounded() {
        let mut picks = Vec::new();
        arbiter_picks(
            "Step 1: weigh\nFinal answer: coin 7\nTherefore coin 7 is light\nthusly not\nResult: 7\nfinal answer: coin 7\nSolution : x\nConclusion: y\nAnswer: z",
            &mut picks,
        );
        assert_eq!(
            picks,
            vec![
                "Final answer: coin 7",
                "Therefore coin 7 is light",
                "Result: 7",
                "Solution : x",
                "Conclusion: y"
            ]
        );
        let mut more = Vec::new();
        arbiter_picks("Final step: stop", &mut more);
        assert_eq!(more, vec!["Final step: stop"]);
    }
}
