//! What the booster family draws in a session's picture ([`crate::export::picture`]):
//! the task (with its config and seed hints) and each `hints_added` on the main line;
//! each applied step (the core's thought) drawn as a step with its verifier score, `beam`
//! when the beam chose it, and `↩ dropped` / `⟳ repeat` once a loop check fired on it;
//! beside each step its iteration's candidates, best first, each with its score (the
//! chosen one marked `✓ chosen` from the step's event on and linked to the step), the beam
//! rollout (its heads and values, linked to the head that won) and the loop check
//! (backtracked or only detected); and the chosen path linked from the task through
//! every step the scratchpad kept (a backtracked step is left out: the path goes on
//! from the step before it).
//!
//! Owns: [`PICTURES`] (registered as the family's `picture`). Must not: change the
//! projection, or put text anywhere but in a [`Span`], a title or an entry (the renderers
//! escape them: candidates are model output).

use crate::export::counted;
use crate::export::picture::{
    At, Entry, Glyph, LinkKind, Mark, Node, NodeId, NodeKind, Picture, Pictures, Place, Span, short,
};
use crate::projection::tree::ThoughtTree;
use crate::tools::booster::state::{BoosterState, Iteration, LoopKind, Score, StepCount, Via};

/// The booster family's registration with the pictures.
pub(crate) static PICTURES: Pictures = Pictures {
    kinds: &[TASK, HINTS, STEP, CANDIDATE, BEAM, BACKTRACK, LOOP],
    links: &[PATH, CHOOSES, BEAM_PICKS],
    draw,
    css: ".booster-chosen{font-weight:bold;fill:#2b8a3e}\
          .booster-dropped{font-weight:bold;fill:#e8590c}",
};

const TASK: NodeKind = NodeKind {
    name: "booster-task",
    marker: "🎯",
    glyph: Glyph::Circle,
    style: "fill:#f3f0ff;stroke:#7048e8",
};
const HINTS: NodeKind = NodeKind {
    name: "booster-hints",
    marker: "📝",
    glyph: Glyph::Square,
    style: "fill:#f8f0fc;stroke:#ae3ec9",
};
const STEP: NodeKind = NodeKind {
    name: "booster-step",
    marker: "🚀",
    glyph: Glyph::Arrow,
    style: "fill:#d3f9d8;stroke:#2b8a3e;stroke-width:2.5",
};
const CANDIDATE: NodeKind = NodeKind {
    name: "booster-candidate",
    marker: "🎲",
    glyph: Glyph::Diamond,
    style: "fill:#f8f9fa;stroke:#adb5bd",
};
const BEAM: NodeKind = NodeKind {
    name: "booster-beam",
    marker: "🔭",
    glyph: Glyph::Hexagon,
    style: "fill:#d0ebff;stroke:#1c7ed6;stroke-width:2",
};
const BACKTRACK: NodeKind = NodeKind {
    name: "booster-backtrack",
    marker: "↩️",
    glyph: Glyph::Cross,
    style: "fill:#fff4e6;stroke:#e8590c;stroke-dasharray:4 3",
};
const LOOP: NodeKind = NodeKind {
    name: "booster-loop",
    marker: "🔁",
    glyph: Glyph::Diamond,
    style: "fill:#fff9db;stroke:#f08c00;stroke-dasharray:4 3",
};

const PATH: LinkKind = LinkKind {
    name: "booster_path",
    style: "stroke:#2b8a3e;stroke-width:3",
};
const CHOOSES: LinkKind = LinkKind {
    name: "chooses",
    style: "stroke:#2b8a3e;stroke-dasharray:5 3",
};
const BEAM_PICKS: LinkKind = LinkKind {
    name: "beam_picks",
    style: "stroke:#1c7ed6;stroke-dasharray:2 3",
};

/// Most characters of a candidate's text inside a beam's or loop check's label.
const LABEL_TEXT_CHARS: usize = 24;

fn total(score: &Score) -> String {
    format!("{:.2}", score.total_score)
}

fn parts(score: &Score) -> String {
    format!(
        "rules {:.2} · redundancy {:.2} · consistency {:.2} · total {:.2}",
        score.rules_score, score.redundancy_score, score.consistency_score, score.total_score
    )
}

fn config_text(state: &BoosterState) -> String {
    let c = &state.config;
    format!(
        "numCandidates {} · topM {} · allowBacktrack {} · minImprovement {} · beamWidth {} · \
         beamDepth {} · maxSteps {} · llmMaxCalls {}",
        c.num_candidates,
        c.top_m,
        c.allow_backtrack,
        c.min_improvement,
        c.beam_width,
        c.beam_depth,
        c.max_steps,
        c.llm_max_calls
    )
}

fn task_node(state: &BoosterState, picture: &mut Picture) -> NodeId {
    let mut details = vec![("config", config_text(state))];
    let added: usize = state.hint_events.iter().map(|(_, h)| h.len()).sum();
    let seeds = state.hints.len().saturating_sub(added);
    for hint in state.hints.iter().take(seeds) {
        details.push(("seed hint", hint.clone()));
    }
    let c = &state.config;
    picture.add(Node {
        seq: state.started_seq,
        kind: &TASK,
        place: Place::Main,
        head: vec![Span::text(format!(
            "task · {} candidate{} · top {} · beam {}",
            c.num_candidates,
            if c.num_candidates == 1 { "" } else { "s" },
            c.top_m,
            c.beam_width
        ))],
        text: vec![Span::text(state.task.clone())],
        title: format!("{}\n{}", state.task, config_text(state)),
        entry: Some(Entry {
            meta: "booster_started · task".into(),
            text: state.task.clone(),
            details,
        }),
    })
}

/// Where the nodes of an iteration go: beside its step, else (a session replayed before
/// its step) on the main line.
fn beside(iteration: &Iteration) -> Place {
    match iteration.chosen_seq {
        Some(seq) => Place::Beside(At::Thought(seq)),
        None => Place::Main,
    }
}

/// The iteration's candidates, best first; the node ids in candidate order.
fn candidates(iteration: &Iteration, picture: &mut Picture) -> Vec<NodeId> {
    let i = iteration.iteration;
    let count = iteration.candidates.len();
    let chosen = iteration
        .chosen
        .as_ref()
        .zip(iteration.chosen_seq)
        .map(|(c, seq)| (c.candidate as usize, seq));
    let mut ids = Vec::with_capacity(count);
    for (n, candidate) in iteration.candidates.iter().enumerate() {
        let proposal = &candidate.proposal;
        let mut head = vec![Span::text(format!(
            "#{i}.{} · {}",
            n + 1,
            total(&candidate.score)
        ))];
        if let Some((_, seq)) = chosen.filter(|(at, _)| *at == n) {
            head.push(Span::during(" · ✓ chosen", seq, None).with_class("booster-chosen"));
        }
        let mut title = format!("{}\n{}", proposal.text, parts(&candidate.score));
        if !proposal.rationale.is_empty() {
            title.push_str(&format!("\nrationale: {}", proposal.rationale));
        }
        if let Some(how) = &proposal.how_to_verify {
            title.push_str(&format!("\nhow to verify: {how}"));
        }
        // The candidate set is one event: listed once, with its first candidate.
        let entry = (n == 0).then(|| {
            let mut details: Vec<(&'static str, String)> = iteration
                .candidates
                .iter()
                .enumerate()
                .map(|(n, c)| {
                    (
                        "candidate",
                        format!("{}. {} · {}", n + 1, total(&c.score), c.proposal.text),
                    )
                })
                .collect();
            if let Some(fallback) = &iteration.source.fallback {
                details.push(("fallback", fallback.clone()));
            }
            if let Some(output) = &iteration.model_output {
                details.push((
                    "model output",
                    format!(
                        "{} · parser {} · {} parsed",
                        counted(output.response_chars as usize, "char", "chars"),
                        output.parser,
                        output.parsed
                    ),
                ));
                if let Some(error) = &output.error {
                    details.push(("model error", error.clone()));
                }
            }
            let mut source = iteration.source.provider.clone();
            if let Some(model) = &iteration.source.model {
                source.push_str(&format!(" ({model})"));
            }
            Entry {
                meta: format!(
                    "candidates_scored · iteration {i} · {} · {source} · scorer {}",
                    counted(count, "candidate", "candidates"),
                    iteration.scorer
                ),
                text: String::new(),
                details,
            }
        });
        let place = match (ids.first(), iteration.chosen_seq) {
            (_, Some(seq)) => Place::Beside(At::Thought(seq)),
            (Some(first), None) => Place::Beside(At::Node(*first)),
            (None, None) => Place::Main,
        };
        let id = picture.add(Node {
            seq: iteration.seq,
            kind: &CANDIDATE,
            place,
            head,
            text: vec![Span::text(proposal.text.clone())],
            title,
            entry,
        });
        ids.push(id);
    }
    if let Some((n, seq)) = chosen
        && let Some(id) = ids.get(n)
    {
        picture.link(At::Node(*id), At::Thought(seq), &CHOOSES);
    }
    ids
}

fn beam(iteration: &Iteration, ids: &[NodeId], picture: &mut Picture) {
    let (Some(beam), Some(seq)) = (&iteration.beam, iteration.beam_seq) else {
        return;
    };
    let winner = beam.heads.get(beam.chosen as usize);
    let heads: Vec<String> = beam
        .heads
        .iter()
        .enumerate()
        .map(|(n, head)| {
            let mut line = format!(
                "{}. value {:.2} · candidate {} · {}",
                n + 1,
                head.value,
                head.candidate + 1,
                head.text
            );
            for step in &head.path {
                line.push_str(&format!(" → {} ({:.2})", step.text, step.total_score));
            }
            line
        })
        .collect();
    let mut details = vec![(
        "stalled",
        format!("last {:.2} · best {:.2}", beam.last_total, beam.best_total),
    )];
    details.extend(heads.iter().map(|h| ("head", h.clone())));
    let node = picture.add(Node {
        seq,
        kind: &BEAM,
        place: beside(iteration),
        head: vec![Span::text(format!(
            "beam · {} · stalled {:.2} → {:.2}",
            counted(beam.heads.len(), "head", "heads"),
            beam.last_total,
            beam.best_total
        ))],
        text: vec![Span::text(match winner {
            Some(w) => format!("won {:.2}: {}", w.value, short(&w.text, LABEL_TEXT_CHARS)),
            None => "no head".to_string(),
        })],
        title: heads.join("\n"),
        entry: Some(Entry {
            meta: format!(
                "beam_rolled_out · iteration {} · {}",
                iteration.iteration,
                counted(beam.heads.len(), "head", "heads")
            ),
            text: String::new(),
            details,
        }),
    });
    if let Some(id) = winner.and_then(|w| ids.get(w.candidate as usize)) {
        picture.link(At::Node(node), At::Node(*id), &BEAM_PICKS);
    }
}

fn loop_check(iteration: &Iteration, picture: &mut Picture) {
    let (Some(check), Some(seq)) = (&iteration.loop_check, iteration.check_seq) else {
        return;
    };
    let kind = match check.kind {
        LoopKind::Stagnation => "stagnation",
        LoopKind::Loop => "loop",
    };
    let (node_kind, what, event) = if iteration.backtracked {
        (&BACKTRACK, "backtracked", "backtracked")
    } else {
        (&LOOP, "loop detected", "loop_detected")
    };
    picture.add(Node {
        seq,
        kind: node_kind,
        place: beside(iteration),
        head: vec![Span::text(format!(
            "{what} · {kind} · repeats step {}",
            check.repeats_step
        ))],
        text: vec![Span::text(check.text.clone())],
        title: format!(
            "{what} ({kind}): repeats step {}\n{}",
            check.repeats_step, check.text
        ),
        entry: Some(Entry {
            meta: format!(
                "{event} · iteration {} · {kind} · repeats step {}",
                iteration.iteration, check.repeats_step
            ),
            text: check.text.clone(),
            details: if iteration.backtracked {
                vec![(
                    "scratchpad",
                    "the step was dropped (its event stays)".into(),
                )]
            } else {
                vec![("scratchpad", "the step stays (backtracking is off)".into())]
            },
        }),
    });
}

fn draw(tree: &ThoughtTree, picture: &mut Picture) {
    let Some(state) = tree.family::<BoosterState>() else {
        return;
    };
    let task = task_node(state, picture);
    for (seq, hints) in &state.hint_events {
        picture.add(Node {
            seq: *seq,
            kind: &HINTS,
            place: Place::Main,
            head: vec![Span::text(format!("hints · {}", hints.len()))],
            text: vec![Span::text(hints.join("; "))],
            title: hints.join("\n"),
            entry: Some(Entry {
                meta: format!("hints_added · {}", counted(hints.len(), "hint", "hints")),
                text: String::new(),
                details: hints.iter().map(|h| ("hint", h.clone())).collect(),
            }),
        });
    }
    let counts = step_counts(state);
    // The chosen path: from the task through each step the scratchpad kept.
    let mut at = At::Node(task);
    for iteration in &state.iterations {
        let ids = candidates(iteration, picture);
        beam(iteration, &ids, picture);
        loop_check(iteration, picture);
        let (Some(chosen), Some(seq)) = (&iteration.chosen, iteration.chosen_seq) else {
            continue;
        };
        let mut head = vec![Span::text(format!(" · {}", total(&chosen.score)))];
        if chosen.via == Via::Beam {
            head.push(Span::text(" · beam"));
        }
        if let Some(check_seq) = iteration.check_seq {
            let text = if iteration.backtracked {
                " · ↩ dropped"
            } else {
                " · ⟳ repeat"
            };
            head.push(Span::during(text, check_seq, None).with_class("booster-dropped"));
        }
        let proposal = &chosen.proposal;
        let mut details = vec![
            (
                "iteration",
                format!(
                    "{} · candidate {} of {} · {}",
                    iteration.iteration,
                    chosen.candidate + 1,
                    iteration.candidates.len(),
                    match chosen.via {
                        Via::Best => "best of N",
                        Via::Beam => "beam",
                    }
                ),
            ),
            ("score", parts(&chosen.score)),
        ];
        if !proposal.rationale.is_empty() {
            details.push(("rationale", proposal.rationale.clone()));
        }
        if let Some(how) = &proposal.how_to_verify {
            details.push(("how to verify", how.clone()));
        }
        if !proposal.expected_outcomes.is_empty() {
            details.push(("expected outcomes", proposal.expected_outcomes.join("; ")));
        }
        picture.mark(Mark {
            seq,
            kind: Some(&STEP),
            head,
            total: total_as_it_grew(&counts, seq),
            details,
        });
        picture.link(at, At::Thought(seq), &PATH);
        if !iteration.backtracked {
            at = At::Thought(seq);
        }
    }
}

/// The count the steps are numbered against as it grew: (the step's event, the count from
/// then on), each step that raised it, in event order.
fn step_counts(state: &BoosterState) -> Vec<(u64, u64)> {
    let mut counts: Vec<(u64, u64)> = Vec::new();
    for iteration in &state.iterations {
        let Some(seq) = iteration.chosen_seq else {
            continue;
        };
        let total = StepCount::total(
            state.step_count,
            iteration.iteration,
            state.config.max_steps,
        );
        if counts.last().is_none_or(|&(_, last)| total > last) {
            counts.push((seq, total));
        }
    }
    counts
}

/// The `/total` of the step recorded by `seq` at each event from its own: empty when the
/// count never grew after it (the core draws the step's total), else one span per count
/// it was shown against, each until the step that raised it.
fn total_as_it_grew(counts: &[(u64, u64)], seq: u64) -> Vec<Span> {
    let raised = counts.partition_point(|&(at, _)| at <= seq);
    if raised == counts.len() || raised == 0 {
        return Vec::new();
    }
    let mut spans = vec![Span::during(
        format!("/{}", counts[raised - 1].1),
        0,
        Some(counts[raised].0),
    )];
    for (i, &(from, total)) in counts.iter().enumerate().skip(raised) {
        spans.push(Span::during(
            format!("/{total}"),
            from,
            counts.get(i + 1).map(|&(until, _)| until),
        ));
    }
    spans
}

#[cfg(test)]
mod tests {
    use crate::export::mermaid::tests::HOSTILE;
    use crate::export::picture::Picture;
    use crate::export::svg::tests::{booster_events, booster_events_counted, parse, shown_nodes};
    use crate::export::svg::{Options, render, render_into};
    use crate::projection::tree::ThoughtTree;
    use crate::tools::booster::state::{BoosterState, StepCount};

    fn tree(text: &str) -> ThoughtTree {
        let (session, events) = booster_events(text);
        ThoughtTree::build(session, events, &crate::tools::folds())
    }

    /// The booster's nodes and links are what its fold holds: counted from the
    /// projection, not from the picture's own list.
    #[test]
    fn booster_nodes_are_the_projection_s() {
        let tree = tree("b");
        let state = tree.family::<BoosterState>().unwrap();
        let (nodes, edges) = parse(&render(&tree, &crate::tools::exports()));
        let count = |kind: &str| nodes.iter().filter(|(_, k)| k == kind).count();
        let candidates: usize = state.iterations.iter().map(|i| i.candidates.len()).sum();
        assert_eq!(count("booster-task"), 1);
        assert_eq!(count("booster-hints"), state.hint_events.len());
        assert_eq!(count("booster-candidate"), candidates);
        assert_eq!(
            count("booster-step"),
            state
                .iterations
                .iter()
                .filter(|i| i.chosen.is_some())
                .count()
        );
        assert_eq!(
            count("booster-beam"),
            state.iterations.iter().filter(|i| i.beam.is_some()).count()
        );
        assert_eq!(count("booster-backtrack"), state.backtracks as usize);
        assert_eq!(
            count("booster-loop"),
            state
                .iterations
                .iter()
                .filter(|i| i.loop_check.is_some() && !i.backtracked)
                .count()
        );
        assert_eq!(nodes.len(), 1 + 1 + 9 + 3 + 1 + 1 + 1);
        // Every candidate carries the seq of its candidate set; each node its event's.
        for iteration in &state.iterations {
            let at =
                |seq: u64, kind: &str| nodes.iter().filter(|n| **n == (seq, kind.into())).count();
            assert_eq!(
                at(iteration.seq, "booster-candidate"),
                iteration.candidates.len()
            );
            if let Some(seq) = iteration.beam_seq {
                assert_eq!(at(seq, "booster-beam"), 1);
            }
        }
        let links = |kind: &str| {
            let mut l: Vec<(u64, u64)> = edges
                .iter()
                .filter(|(_, _, k)| k == kind)
                .map(|(f, t, _)| (*f, *t))
                .collect();
            l.sort_unstable();
            l
        };
        // Task (seq 2) → step 5 → step 8 (backtracked); step 11 goes on from step 5.
        assert_eq!(links("booster_path"), [(2, 5), (5, 8), (5, 11)]);
        // The chosen candidate of each set (seq 4, 6, 10) to its step.
        assert_eq!(links("chooses"), [(4, 5), (6, 8), (10, 11)]);
        // The beam (seq 7) to the candidate it picked (the set's, seq 6).
        assert_eq!(links("beam_picks"), [(7, 6)]);

        let shown = shown_nodes(&render(&tree, &crate::tools::exports()), None);
        let labels = |kind: &str| -> Vec<String> {
            shown
                .iter()
                .filter(|(_, k, _)| k == kind)
                .map(|(_, _, t)| t.clone())
                .collect()
        };
        assert_eq!(
            labels("booster-step"),
            [
                "1/16 · #5\u{a0}· 0.901 b",
                "2/16 · #8\u{a0}· 0.80\u{a0}· beam\u{a0}· ↩ dropped2 b",
                "3/16 · #11\u{a0}· 0.90\u{a0}· ⟳ repeat1 b"
            ]
        );
        let chosen: Vec<String> = labels("booster-candidate")
            .into_iter()
            .filter(|t| t.contains("✓ chosen"))
            .collect();
        assert_eq!(
            chosen,
            [
                "#4 #1.1 · 0.90\u{a0}· ✓ chosen1 b",
                "#6 #2.2 · 0.80\u{a0}· ✓ chosen2 b",
                "#10 #3.1 · 0.90\u{a0}· ✓ chosen1 b"
            ]
        );
    }

    /// Model output in every label and list item stays text: the picture parses, nothing
    /// raw reaches it, and the slider at every k shows the fold of the first k events.
    #[test]
    fn hostile_candidates_stay_text_and_replay_at_every_k() {
        let all: String = HOSTILE.concat();
        let counts = [None, Some(StepCount::SoFar), Some(StepCount::Planned(2))];
        let texts = HOSTILE.iter().copied().chain([all.as_str()]);
        for (text, count) in texts.flat_map(|t| counts.map(|c| (t, c))) {
            let (session, events) = booster_events_counted(text, count);
            let whole = ThoughtTree::build(session, events.clone(), &crate::tools::folds());
            let exports = crate::tools::exports();
            let mut page = String::new();
            render_into(
                &mut page,
                &whole,
                &Picture::of(&whole, exports.pictures()),
                Options { embedded: true },
                &exports,
            );
            let html = crate::export::html::render(&whole, &exports);
            for out in [&render(&whole, &exports), &page, &html] {
                for raw in ["<img", "\u{202E}", "\u{0}", "\u{1b}"] {
                    assert!(!out.contains(raw), "{raw:?} reached the picture");
                }
            }
            assert_eq!(html.matches("<script").count(), 1, "only the page's own");
            assert!(!page.contains("<script"));
            parse(&page);
            for k in 1..=events.len() as u64 {
                let prefix = ThoughtTree::build(
                    session,
                    events[..k as usize].to_vec(),
                    &crate::tools::folds(),
                );
                assert_eq!(
                    shown_nodes(&page, Some(k)),
                    shown_nodes(&render(&prefix, &exports), None),
                    "at event {k}"
                );
            }
        }
    }
}
