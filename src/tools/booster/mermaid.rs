//! A booster session as a Mermaid flowchart: the task, then each iteration's chosen step
//! on the path (thick edges), its rejected candidates as side nodes with their scores
//! (dotted edges from the point they were alternatives at), beam winners marked, and
//! backtracked steps styled apart (the path continues from the step before them).
//!
//! Owns: [`mermaid`]. Ids are generated (`task`; `t<seq>` for a chosen step, the thought
//! its event folds into; `c<iteration>_<n>` for a rejected candidate); the header states
//! the counts the real Mermaid parser must find (`.ci/mermaid-check`);
//! every model-written text goes through [`escape_label`], cut to
//! [`LABEL_MAX_CHARS`](crate::export::mermaid::LABEL_MAX_CHARS). Must not: read the
//! store, or take an id, class or comment from content.

use crate::event::summary::SessionSummary;
use crate::export::family::{FamilyRender, PromptResume};
use crate::export::mermaid::{LABEL_MAX_CHARS, escape_label};
use crate::export::{Ellipsis, counted, truncate};
use crate::projection::tree::ThoughtTree;
use crate::tools::booster::state::{BoosterState, Via};
use serde_json::Value;
use std::fmt::Write as _;

const INDENT: &str = "    ";

/// Class of each node kind, as `classDef` lines (constant text).
const CLASS_DEFS: [(&str, &str); 5] = [
    ("task", "fill:#f3f0ff,stroke:#7048e8"),
    ("chosen", "fill:#d3f9d8,stroke:#2b8a3e,stroke-width:3px"),
    ("rejected", "fill:#f8f9fa,stroke:#adb5bd,color:#495057"),
    (
        "backtracked",
        "fill:#fff4e6,stroke:#e8590c,stroke-dasharray:4 3",
    ),
    ("beam", "fill:#d0ebff,stroke:#1c7ed6,stroke-width:3px"),
];

/// Cut to [`LABEL_MAX_CHARS`], the ellipsis within.
fn cut(text: &str) -> String {
    truncate(text, LABEL_MAX_CHARS, Ellipsis::Within)
}

fn score(total: f64) -> String {
    format!("{total:.2}")
}

/// The booster family's piece of the Mermaid export: its own diagram of its sessions.
pub(crate) struct BoosterRender;

/// The one instance, registered with the family.
pub(crate) static RENDER: BoosterRender = BoosterRender;

impl FamilyRender for BoosterRender {
    /// A booster session draws its search: chosen path, rejected candidates, backtracks.
    fn mermaid_instead(&self, tree: &ThoughtTree) -> Option<String> {
        tree.family::<BoosterState>()
            .map(|state| mermaid(tree, state))
    }

    fn mermaid_classes(&self) -> &'static [(&'static str, &'static str)] {
        &CLASS_DEFS
    }

    fn prompt_state(&self, tree: &ThoughtTree, last: usize) -> Option<(&'static str, Value)> {
        super::prompt::state(tree, last).map(|state| ("booster", state))
    }

    fn prompt_resume(
        &self,
        tree: &ThoughtTree,
        summary: &SessionSummary,
        session: &str,
    ) -> Option<PromptResume> {
        super::prompt::resume(tree, summary, session)
    }

    fn prompt_review(&self, tree: &ThoughtTree) -> Option<(&'static str, Value)> {
        super::prompt::step_scores(tree).map(|rows| ("stepScores", rows))
    }
}

/// The flowchart of a booster session (its fold in `tree`).
pub(crate) fn mermaid(tree: &ThoughtTree, state: &BoosterState) -> String {
    let mut out = String::with_capacity(512 + state.iterations.len() * 400);
    out.push_str("flowchart TD\n");
    let candidates: usize = state.iterations.iter().map(|i| i.candidates.len()).sum();
    let chosen = state
        .iterations
        .iter()
        .filter(|i| i.chosen.is_some())
        .count();
    let rejected = candidates - chosen;
    // Every node but the task has one edge into it.
    let edges = chosen + rejected;
    // Generated values only: a ULID and counts.
    let _ = writeln!(
        out,
        "{INDENT}%% reasoning-ledger session {} (booster), at seq {}: {}, {}, 0 branches; {}, {}, {}",
        tree.session,
        tree.at_seq,
        counted(chosen, "thought", "thoughts"),
        counted(edges, "edge", "edges"),
        counted(state.iterations.len(), "iteration", "iterations"),
        counted(candidates, "candidate", "candidates"),
        counted(state.backtracks as usize, "backtrack", "backtracks")
    );
    for (class, style) in CLASS_DEFS {
        let _ = writeln!(out, "{INDENT}classDef {class} {style}");
    }
    let _ = writeln!(
        out,
        "{INDENT}task[\"{}\"]:::task",
        escape_label(&format!("Task: {}", cut(&state.task)))
    );
    let mut at = "task".to_string();
    for iteration in &state.iterations {
        let i = iteration.iteration;
        let chosen_index = iteration.chosen.as_ref().map(|c| c.candidate as usize);
        for (n, candidate) in iteration.candidates.iter().enumerate() {
            if Some(n) == chosen_index {
                continue;
            }
            let label = format!(
                "{} · {}",
                score(candidate.score.total_score),
                cut(&candidate.proposal.text)
            );
            let _ = writeln!(
                out,
                "{INDENT}c{i}_{n}[\"{}\"]:::rejected",
                escape_label(&label)
            );
            let _ = writeln!(out, "{INDENT}{at} -.-> c{i}_{n}");
        }
        let (Some(chosen), Some(seq)) = (&iteration.chosen, iteration.chosen_seq) else {
            continue;
        };
        let mut label = format!(
            "#{i} · {} · {}",
            score(chosen.score.total_score),
            cut(&chosen.proposal.text)
        );
        let class = if iteration.backtracked {
            label.push_str(" · backtracked");
            "backtracked"
        } else if chosen.via == Via::Beam {
            label.push_str(" · beam");
            "beam"
        } else {
            "chosen"
        };
        let _ = writeln!(
            out,
            "{INDENT}t{seq}[\"{}\"]:::{class}",
            escape_label(&label)
        );
        if iteration.backtracked {
            let _ = writeln!(out, "{INDENT}{at} -.-x t{seq}");
        } else {
            let _ = writeln!(out, "{INDENT}{at} ==> t{seq}");
            at = format!("t{seq}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SessionId;
    use crate::tools::booster::config::Config;
    use crate::tools::booster::state::{
        Applied, CandidateSet, LoopCheck, LoopKind, Proposal, Score, Scored, Source, Started,
    };

    fn scored(text: &str, total: f64) -> Scored {
        Scored {
            proposal: Proposal {
                text: text.into(),
                ..Proposal::default()
            },
            score: Score {
                total_score: total,
                ..Score::default()
            },
        }
    }

    #[test]
    fn chosen_path_side_nodes_and_hostile_text() {
        let mut state = BoosterState::new(Started {
            task: "Find \"x\"]:::evil\n%% y".into(),
            config: Config::default(),
            seed_hints: Vec::new(),
            step_count: None,
        });
        for i in 1..=2u64 {
            state.candidates_scored(
                i * 3,
                0,
                CandidateSet {
                    iteration: i,
                    source: Source {
                        provider: "heuristic".into(),
                        model: None,
                        fallback: None,
                    },
                    scorer: "reference-1".into(),
                    candidates: vec![scored("a]\"-->b", 0.5), scored("<script>", 0.25)],
                    model_output: None,
                },
            );
            state.step_applied(
                i * 3 + 1,
                Applied {
                    iteration: i,
                    candidate: 0,
                    via: Via::Best,
                    proposal: scored("a]\"-->b", 0.5).proposal,
                    score: scored("a]\"-->b", 0.5).score,
                },
            );
        }
        state.loop_checked(
            99,
            LoopCheck {
                iteration: 2,
                kind: LoopKind::Loop,
                text: "a".into(),
                repeats_step: 1,
            },
            true,
        );
        let tree = ThoughtTree::new(SessionId::generate(), &crate::tools::folds());
        let text = mermaid(&tree, &state);
        assert!(text.contains("task ==> t4"), "{text}");
        assert!(text.contains("t4 -.-x t7"), "{text}");
        assert!(text.contains("t4 -.-> c2_1"), "{text}");
        assert!(text.contains(":::backtracked"), "{text}");
        assert!(!text.contains(":::evil"), "{text}");
        assert!(!text.contains("<script>"), "{text}");
        assert_eq!(
            text.lines()
                .filter(|l| l.trim_start().starts_with("%%"))
                .count(),
            1
        );
    }

    fn session(text: &str) -> BoosterState {
        let mut state = BoosterState::new(Started {
            task: text.into(),
            config: Config::default(),
            seed_hints: Vec::new(),
            step_count: None,
        });
        for i in 1..=3u64 {
            state.candidates_scored(
                i * 3,
                0,
                CandidateSet {
                    iteration: i,
                    source: Source {
                        provider: "heuristic".into(),
                        model: None,
                        fallback: None,
                    },
                    scorer: "reference-1".into(),
                    candidates: vec![scored(text, 0.5), scored(&text.repeat(2), -0.25)],
                    model_output: None,
                },
            );
            state.step_applied(
                i * 3 + 1,
                Applied {
                    iteration: i,
                    candidate: 0,
                    via: if i == 2 { Via::Beam } else { Via::Best },
                    proposal: scored(text, 0.5).proposal,
                    score: scored(text, 0.5).score,
                },
            );
        }
        state.loop_checked(
            99,
            LoopCheck {
                iteration: 3,
                kind: LoopKind::Loop,
                text: text.into(),
                repeats_step: 1,
            },
            true,
        );
        state
    }

    /// Hostile texts in every label, handed to the real Mermaid parser by
    /// `.ci/mermaid-check` with the counts the header states.
    #[test]
    fn hostile_sessions_render_for_the_mermaid_checker() {
        use crate::export::mermaid::tests::{HOSTILE, cargo_target_dir};
        let dir = cargo_target_dir().join("mermaid-fixtures");
        std::fs::create_dir_all(&dir).unwrap();
        let all: String = HOSTILE.concat();
        let texts: Vec<&str> = HOSTILE.iter().copied().chain([all.as_str()]).collect();
        for (i, text) in texts.iter().enumerate() {
            let diagram = mermaid(
                &ThoughtTree::new(SessionId::generate(), &crate::tools::folds()),
                &session(text),
            );
            let statements: Vec<&str> = diagram.lines().skip(1).map(str::trim_start).collect();
            for line in &statements {
                let id: String = line
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    line.starts_with("%%") || line.starts_with("classDef ") || !id.is_empty(),
                    "a statement starts with a generated id: {line}"
                );
            }
            assert_eq!(diagram.matches(":::rejected").count(), 3, "{diagram}");
            std::fs::write(dir.join(format!("booster-{i:02}.mmd")), &diagram).unwrap();
            std::fs::write(dir.join(format!("booster-{i:02}.counts")), "3 6 0\n").unwrap();
        }
    }
}
