//! A booster session as a Mermaid flowchart: the task, then each iteration's chosen step
//! on the path (thick edges), its rejected candidates as side nodes with their scores
//! (dotted edges from the point they were alternatives at), beam winners marked, and
//! backtracked steps styled apart (the path continues from the step before them).
//!
//! Owns: [`mermaid`]. Ids are generated (`task`, `s<iteration>`, `c<iteration>_<n>`);
//! every model-written text goes through [`escape_label`], cut to
//! [`LABEL_MAX_CHARS`](crate::export::mermaid::LABEL_MAX_CHARS). Must not: read the
//! store, or take an id, class or comment from content.

use crate::export::mermaid::{LABEL_MAX_CHARS, escape_label};
use crate::projection::booster::{BoosterState, Via};
use crate::projection::tree::ThoughtTree;
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

fn cut(text: &str) -> String {
    let mut out: String = text.chars().take(LABEL_MAX_CHARS).collect();
    if out.len() < text.len() {
        out.pop();
        out.push('…');
    }
    out
}

fn score(total: f64) -> String {
    format!("{total:.2}")
}

/// The flowchart of a booster session (its fold in `tree`).
pub fn mermaid(tree: &ThoughtTree, state: &BoosterState) -> String {
    let mut out = String::with_capacity(512 + state.iterations.len() * 400);
    out.push_str("flowchart TD\n");
    let candidates: usize = state.iterations.iter().map(|i| i.candidates.len()).sum();
    // Generated values only: a ULID and counts.
    let _ = writeln!(
        out,
        "{INDENT}%% reasoning-ledger booster session {}, at seq {}: {} iterations, {} candidates, {} steps, {} backtracks",
        tree.session,
        tree.at_seq,
        state.iterations.len(),
        candidates,
        state.steps.len(),
        state.backtracks
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
        let Some(chosen) = &iteration.chosen else {
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
        let _ = writeln!(out, "{INDENT}s{i}[\"{}\"]:::{class}", escape_label(&label));
        if iteration.backtracked {
            let _ = writeln!(out, "{INDENT}{at} -.-x s{i}");
        } else {
            let _ = writeln!(out, "{INDENT}{at} ==> s{i}");
            at = format!("s{i}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SessionId;
    use crate::projection::booster::{
        Applied, CandidateSet, LoopCheck, LoopKind, Proposal, Score, Scored, Source, Started,
    };
    use crate::tools::booster::config::Config;

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
            LoopCheck {
                iteration: 2,
                kind: LoopKind::Loop,
                text: "a".into(),
                repeats_step: 1,
            },
            true,
        );
        let tree = ThoughtTree::new(SessionId::generate());
        let text = mermaid(&tree, &state);
        assert!(text.contains("task ==> s1"), "{text}");
        assert!(text.contains("s1 -.-x s2"), "{text}");
        assert!(text.contains("s1 -.-> c2_1"), "{text}");
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
}
