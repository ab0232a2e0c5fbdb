//! One iteration, decided: score the candidates, choose (best-of-N, or a shallow beam
//! when improvement stalls), apply, and check for stagnation and loops — as the events
//! that record it.
//!
//! Owns: [`decide_iteration`] (pure: the folded state, the generated candidates and a
//! scorer → the iteration's bodies) and the beam rollout. Beam rollouts simulate their
//! continuations with the heuristic generator (never a model call, so a beam costs no
//! `llmMaxCalls`). Must not: do I/O, or drop anything from the record (a backtrack is
//! an event that says the scratchpad dropped its last step).

use super::candidates::heuristic;
use super::payload::Body;
use super::verifier::Scorer;
use crate::tools::booster::state::{
    Applied, Beam, BeamHead, BoosterState, CandidateSet, LoopCheck, LoopKind, ModelOutput,
    PathStep, Proposal, Scored, Source, Via,
};

/// Candidates for one iteration, as the generation seam produced them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Generated {
    /// Filtered, filled to the asked number with heuristics.
    pub proposals: Vec<Proposal>,
    pub source: Source,
    pub model_output: Option<ModelOutput>,
}

/// Scores and sorts `proposals` (best first; ties keep their order).
pub(crate) fn score_all(
    scorer: &dyn Scorer,
    state: &BoosterState,
    steps: &[&str],
    proposals: Vec<Proposal>,
) -> Vec<Scored> {
    let mut scored: Vec<Scored> = proposals
        .into_iter()
        .map(|proposal| Scored {
            score: scorer.score(&state.task, steps, &proposal, &state.config),
            proposal,
        })
        .collect();
    scored.sort_by(|a, b| b.score.total_score.total_cmp(&a.score.total_score));
    scored
}

fn same(a: &str, b: &str) -> bool {
    a.trim() == b.trim()
}

/// Mean of a head's total and its continuation's.
fn mean(head: f64, path: &[PathStep]) -> f64 {
    let sum: f64 = head + path.iter().map(|p| p.total_score).sum::<f64>();
    let value = sum / (1 + path.len()) as f64;
    (value * 10_000.0).round() / 10_000.0
}

/// Rolls the top `beamWidth` heads out to `beamDepth` with heuristic continuations; the
/// head with the best mean total wins (the first on a tie).
fn beam(
    scorer: &dyn Scorer,
    state: &BoosterState,
    iteration: u64,
    scored: &[Scored],
    last_total: f64,
) -> Beam {
    let steps = state.step_texts();
    let applied = state.applied_texts();
    let last = steps.last().copied();
    let k = state.config.num_candidates as usize;
    let heads: Vec<(usize, &Scored)> = scored
        .iter()
        .enumerate()
        .filter(|(_, s)| last.is_none_or(|l| !same(l, &s.proposal.text)))
        .take(state.config.beam_width as usize)
        .collect();
    let mut rolled = Vec::new();
    for (index, head) in heads {
        let mut sim_steps: Vec<String> = steps.iter().map(|s| s.to_string()).collect();
        let mut sim_applied: Vec<String> = applied.iter().map(|s| s.to_string()).collect();
        sim_steps.push(head.proposal.text.clone());
        sim_applied.push(head.proposal.text.clone());
        let mut path = Vec::new();
        for _ in 1..state.config.beam_depth {
            let applied_refs: Vec<&str> = sim_applied.iter().map(String::as_str).collect();
            let step_refs: Vec<&str> = sim_steps.iter().map(String::as_str).collect();
            let continuation = score_all(
                scorer,
                state,
                &step_refs,
                heuristic(&state.task, &applied_refs, &[], k),
            );
            let tail = step_refs.last().copied();
            let Some(best) = continuation
                .iter()
                .find(|c| tail.is_none_or(|t| !same(t, &c.proposal.text)))
            else {
                break;
            };
            path.push(PathStep {
                text: best.proposal.text.clone(),
                total_score: best.score.total_score,
            });
            sim_steps.push(best.proposal.text.clone());
            sim_applied.push(best.proposal.text.clone());
        }
        rolled.push(BeamHead {
            candidate: index as u64,
            text: head.proposal.text.clone(),
            value: mean(head.score.total_score, &path),
            path,
        });
    }
    let mut chosen = 0;
    for (i, head) in rolled.iter().enumerate() {
        if head.value > rolled[chosen].value {
            chosen = i;
        }
    }
    Beam {
        iteration,
        last_total,
        best_total: scored.first().map_or(0.0, |s| s.score.total_score),
        heads: rolled,
        chosen: chosen as u64,
    }
}

/// Pure: the events of one iteration over `state` with `generated` candidates.
pub(crate) fn decide_iteration(
    scorer: &dyn Scorer,
    state: &BoosterState,
    generated: Generated,
) -> Vec<Body> {
    let iteration = state.iteration_count() + 1;
    let steps = state.step_texts();
    let scored = score_all(scorer, state, &steps, generated.proposals);
    let last = state.steps.last();
    let top = (state.config.top_m as usize).min(scored.len()).max(1);
    let mut chosen = scored[..top]
        .iter()
        .position(|s| last.is_none_or(|l| !same(&l.proposal.text, &s.proposal.text)))
        .unwrap_or(0);
    let mut via = Via::Best;
    let mut rollout = None;
    if let Some(last) = last
        && scored[chosen].score.total_score - last.score.total_score < state.config.min_improvement
        && state.config.beam_width > 1
    {
        let rolled = beam(scorer, state, iteration, &scored, last.score.total_score);
        if let Some(head) = rolled.heads.get(rolled.chosen as usize) {
            chosen = head.candidate as usize;
            via = Via::Beam;
        }
        rollout = Some(rolled);
    }
    let pick = scored[chosen].clone();
    let check = steps
        .iter()
        .position(|s| same(s, &pick.proposal.text))
        .map(|at| LoopCheck {
            iteration,
            kind: if at + 1 == steps.len() {
                LoopKind::Stagnation
            } else {
                LoopKind::Loop
            },
            text: pick.proposal.text.clone(),
            repeats_step: at as u64 + 1,
        });
    let mut bodies = vec![Body::CandidatesScored(CandidateSet {
        iteration,
        source: generated.source,
        scorer: scorer.name().to_string(),
        candidates: scored,
        model_output: generated.model_output,
    })];
    if let Some(rolled) = rollout {
        bodies.push(Body::BeamRolledOut(rolled));
    }
    bodies.push(Body::StepApplied(Applied {
        iteration,
        candidate: chosen as u64,
        via,
        proposal: pick.proposal,
        score: pick.score,
    }));
    if let Some(check) = check {
        bodies.push(if state.config.allow_backtrack {
            Body::Backtracked(check)
        } else {
            Body::LoopDetected(check)
        });
    }
    bodies
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::booster::config::Config;
    use crate::tools::booster::state::{Started, Step};
    use crate::tools::booster::verifier::ReferenceVerifier;

    const TASK: &str = "Find the counterfeit among 12 coins using a balance scale in as few steps as possible (3 weighings).";

    fn state(config: Config) -> BoosterState {
        BoosterState::new(Started {
            task: TASK.into(),
            config,
            seed_hints: Vec::new(),
            step_count: None,
        })
    }

    fn heuristics(state: &BoosterState) -> Generated {
        Generated {
            proposals: heuristic(
                &state.task,
                &state.applied_texts(),
                &state.pending_hints,
                state.config.num_candidates as usize,
            ),
            source: Source {
                provider: "heuristic".into(),
                model: None,
                fallback: None,
            },
            model_output: None,
        }
    }

    /// Applies bodies to a state the way the fold does.
    fn apply(state: &mut BoosterState, bodies: Vec<Body>) {
        let mut seq = state.iterations.last().map_or(1, |i| i.seq + 10);
        for body in bodies {
            seq += 1;
            match body {
                Body::CandidatesScored(set) => state.candidates_scored(seq, 0, set),
                Body::BeamRolledOut(beam) => state.beam_rolled_out(seq, beam),
                Body::StepApplied(a) => state.step_applied(seq, a),
                Body::Backtracked(c) => state.loop_checked(seq, c, true),
                Body::LoopDetected(c) => state.loop_checked(seq, c, false),
                _ => {}
            }
        }
    }

    #[test]
    fn eight_heuristic_iterations_give_eight_distinct_task_steps() {
        let mut s = state(Config::default());
        for _ in 0..8 {
            let bodies = decide_iteration(&ReferenceVerifier, &s, heuristics(&s));
            apply(&mut s, bodies);
        }
        let texts: Vec<&str> = s.step_texts();
        assert_eq!(texts.len(), 8, "{texts:?}");
        let mut unique = texts.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 8, "{texts:?}");
        let keywords = crate::tools::booster::candidates::task_terms(TASK).keywords;
        for text in &texts {
            assert!(
                keywords
                    .iter()
                    .any(|k| text.to_lowercase().contains(k.as_str())),
                "{text} is not about the task"
            );
        }
    }

    #[test]
    fn a_stall_runs_the_beam_and_a_repeat_backtracks() {
        let config = Config {
            beam_width: 2,
            beam_depth: 3,
            min_improvement: 5.0,
            ..Config::default()
        };
        let mut s = state(config);
        let bodies = decide_iteration(&ReferenceVerifier, &s, heuristics(&s));
        apply(&mut s, bodies);
        let bodies = decide_iteration(&ReferenceVerifier, &s, heuristics(&s));
        let Some(Body::BeamRolledOut(beam)) = bodies.get(1) else {
            panic!("no beam: {bodies:?}");
        };
        assert_eq!(beam.heads.len(), 2);
        assert_eq!(beam.heads[0].path.len(), 2);

        // A repeat of an earlier step: backtracked, then the scratchpad drops it.
        let mut s = state(Config::default());
        s.steps.push(Step {
            index: 0,
            iteration: 1,
            seq: 3,
            proposal: Proposal {
                text: "Weigh 1,2,3,4 vs 5,6,7,8.".into(),
                ..Proposal::default()
            },
            score: Default::default(),
        });
        s.steps.push(Step {
            index: 1,
            iteration: 2,
            seq: 5,
            proposal: Proposal {
                text: "Label coins".into(),
                ..Proposal::default()
            },
            score: Default::default(),
        });
        let repeat = Generated {
            proposals: vec![Proposal {
                text: "Weigh 1,2,3,4 vs 5,6,7,8.".into(),
                how_to_verify: Some("If balanced then 9-12; left tilt or right tilt".into()),
                ..Proposal::default()
            }],
            ..heuristics(&s)
        };
        let bodies = decide_iteration(&ReferenceVerifier, &s, repeat.clone());
        assert!(
            matches!(bodies.last(), Some(Body::Backtracked(c)) if c.kind == LoopKind::Loop && c.repeats_step == 1),
            "{bodies:?}"
        );
        apply(&mut s, bodies);
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.backtracks, 1);
        s.config.allow_backtrack = false;
        let bodies = decide_iteration(&ReferenceVerifier, &s, repeat);
        assert!(
            matches!(bodies.last(), Some(Body::LoopDetected(_))),
            "{bodies:?}"
        );
    }
}
