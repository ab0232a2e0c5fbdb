//! What the planning family draws in a session's picture ([`crate::export::picture`]):
//! the plan's problem, its clarifications and final plan on the main line, each approach
//! in the approaches' lane with its latest score and the selected one marked, the
//! evaluations and closes beside the approach (or, on a `sequentialthinking` branch, at
//! the end of the branch's column: its score on the branch), and the merges as main-line
//! thoughts drawn as merges, linked from the branch they merge.
//!
//! Owns: [`PICTURES`] (registered as the family's `picture`). Must not: change the
//! projection, or put text anywhere but in a [`Span`], a title or an entry (the renderers
//! escape them).

use crate::export::counted;
use crate::export::picture::{
    At, Entry, Glyph, LinkKind, Mark, Node, NodeId, NodeKind, Picture, Pictures, Place, Span,
    branch_tail, short,
};
use crate::projection::tree::ThoughtTree;
use crate::tools::planning::document::number;
use crate::tools::planning::state::{Evaluation, Planning};

/// The planning family's registration with the pictures.
pub(crate) static PICTURES: Pictures = Pictures {
    kinds: &[
        PLAN,
        CLARIFICATION,
        APPROACH,
        EVALUATION,
        FINAL,
        CLOSE,
        MERGE,
    ],
    links: &[EXPLORES, CLARIFIES, EVALUATES, CLOSES, SELECTS, MERGES],
    draw,
    css: ".selected{font-weight:bold;fill:#e67700}.closed{fill:#868e96}",
};

const PLAN: NodeKind = NodeKind {
    name: "plan",
    marker: "📋",
    glyph: Glyph::Square,
    style: "fill:#f3f0ff;stroke:#7048e8",
};
const CLARIFICATION: NodeKind = NodeKind {
    name: "clarification",
    marker: "❓",
    glyph: Glyph::Diamond,
    style: "fill:#f8f0fc;stroke:#ae3ec9",
};
const APPROACH: NodeKind = NodeKind {
    name: "approach",
    marker: "🧭",
    glyph: Glyph::Arrow,
    style: "fill:#ebfbee;stroke:#2f9e44",
};
const EVALUATION: NodeKind = NodeKind {
    name: "evaluation",
    marker: "⚖️",
    glyph: Glyph::Hexagon,
    style: "fill:#fff9db;stroke:#f08c00",
};
const FINAL: NodeKind = NodeKind {
    name: "final-plan",
    marker: "🏁",
    glyph: Glyph::Flag,
    style: "fill:#fff9db;stroke:#e67700;stroke-width:3",
};
const CLOSE: NodeKind = NodeKind {
    name: "close",
    marker: "🔒",
    glyph: Glyph::Square,
    style: "fill:#f1f3f5;stroke:#868e96;stroke-dasharray:4 3",
};
const MERGE: NodeKind = NodeKind {
    name: "merge",
    marker: "🔀",
    glyph: Glyph::Cross,
    style: "fill:#e6fcf5;stroke:#0ca678",
};

const EXPLORES: LinkKind = LinkKind {
    name: "explores",
    style: "stroke:#2f9e44",
};
const CLARIFIES: LinkKind = LinkKind {
    name: "clarifies",
    style: "stroke:#ae3ec9;stroke-dasharray:3 3",
};
const EVALUATES: LinkKind = LinkKind {
    name: "evaluates",
    style: "stroke:#f08c00",
};
const CLOSES: LinkKind = LinkKind {
    name: "closes",
    style: "stroke:#868e96;stroke-dasharray:4 3",
};
const SELECTS: LinkKind = LinkKind {
    name: "selects",
    style: "stroke:#e67700;stroke-width:2.5",
};
const MERGES: LinkKind = LinkKind {
    name: "merges",
    style: "stroke:#0ca678;stroke-width:2",
};

/// Most characters of a branch id, a name or a recommendation inside a label.
const LABEL_NAME_CHARS: usize = 16;

/// Where a note on branch `branch` as it stood before event `seq` goes, and what links to
/// it: beside its approach, at the end of its thoughts' column, or on the main line.
fn on_branch(
    tree: &ThoughtTree,
    approaches: &[(String, NodeId)],
    branch: &str,
    seq: u64,
) -> (Place, Option<At>) {
    if let Some((_, id)) = approaches.iter().find(|(b, _)| b == branch) {
        return (Place::Beside(At::Node(*id)), Some(At::Node(*id)));
    }
    match branch_tail(tree, branch, seq) {
        Some(tail) => (Place::Branch(branch.to_string()), Some(At::Thought(tail))),
        None => (Place::Main, None),
    }
}

fn score_text(evaluation: &Evaluation) -> String {
    format!("{:.2}", evaluation.score)
}

fn criteria_text(evaluation: &Evaluation) -> String {
    let criteria: Vec<String> = evaluation
        .criteria
        .iter()
        .map(|c| {
            format!(
                "{} {}{} ×{}",
                c.name,
                number(c.score),
                if c.inverted { " (inverted)" } else { "" },
                number(c.weight)
            )
        })
        .collect();
    criteria.join(", ")
}

fn draw(tree: &ThoughtTree, picture: &mut Picture) {
    let planning: &Planning = Planning::of(tree);
    if planning.is_empty() {
        return;
    }
    let mut approaches: Vec<(String, NodeId)> = Vec::new();
    if let Some(plan) = &planning.plan {
        let init = &plan.init;
        let mut details = Vec::new();
        if let Some(context) = &init.context {
            details.push(("context", context.clone()));
        }
        if !init.constraints.is_empty() {
            details.push(("constraints", init.constraints.join("; ")));
        }
        let mut title = init.problem.clone();
        for (label, value) in &details {
            title.push_str(&format!("\n{label}: {value}"));
        }
        let id = picture.add(Node {
            seq: plan.init_seq,
            kind: &PLAN,
            place: Place::Main,
            head: vec![Span::text("plan")],
            text: vec![Span::text(init.problem.clone())],
            title,
            entry: Some(Entry {
                meta: "deep_planning · init · problem".into(),
                text: init.problem.clone(),
                details,
            }),
        });
        // Clarifications follow one another under the problem.
        let mut previous = id;
        for c in &plan.clarifications {
            let answer = c.item.answer.as_deref();
            let clarification = picture.add(Node {
                seq: c.seq,
                kind: &CLARIFICATION,
                place: Place::Main,
                head: vec![Span::text(if answer.is_some() {
                    "clarification · answered"
                } else {
                    "clarification · pending"
                })],
                text: vec![Span::text(c.item.question.clone())],
                title: match answer {
                    Some(answer) => format!("{}\nanswer: {answer}", c.item.question),
                    None => c.item.question.clone(),
                },
                entry: Some(Entry {
                    meta: "deep_planning · clarify".into(),
                    text: c.item.question.clone(),
                    details: vec![("answer", answer.unwrap_or("pending").to_string())],
                }),
            });
            picture.link(At::Node(previous), At::Node(clarification), &CLARIFIES);
            previous = clarification;
        }
        let selected = plan
            .finalized
            .as_ref()
            .map(|f| (f.seq, f.item.selected_branch.as_str()));
        for a in &plan.approaches {
            let item = &a.item;
            let branch = item.branch_id.as_str();
            let mut head = vec![Span::text(short(branch, LABEL_NAME_CHARS))];
            // Each evaluation's score, shown until the next evaluation of the branch.
            let evaluations: Vec<_> = planning
                .evaluations
                .iter()
                .filter(|e| e.item.branch_id == branch && e.seq > a.seq)
                .collect();
            for (i, e) in evaluations.iter().enumerate() {
                let until = evaluations.get(i + 1).map(|next| next.seq);
                head.push(Span::during(
                    format!(" · {}", score_text(&e.item)),
                    e.seq,
                    until,
                ));
            }
            if let Some(close) = planning
                .closes
                .iter()
                .find(|c| c.item.branch_id == branch && c.seq > a.seq)
            {
                head.push(Span::during(" · closed", close.seq, None).with_class("closed"));
            }
            if let Some((at, _)) = selected.filter(|(_, s)| *s == branch) {
                head.push(Span::during(" · ★ selected", at, None).with_class("selected"));
            }
            let mut title = format!("{branch}: {}", item.name);
            let mut details = Vec::new();
            if let Some(description) = &item.description {
                title.push_str(&format!("\n{description}"));
            }
            if !item.pros.is_empty() {
                details.push(("pros", item.pros.join("; ")));
            }
            if !item.cons.is_empty() {
                details.push(("cons", item.cons.join("; ")));
            }
            for (label, value) in &details {
                title.push_str(&format!("\n{label}: {value}"));
            }
            let mut text = item.name.clone();
            if let Some(description) = &item.description {
                text.push('\n');
                text.push_str(description);
            }
            let approach = picture.add(Node {
                seq: a.seq,
                kind: &APPROACH,
                place: Place::Lane("approaches"),
                head,
                text: vec![Span::text(item.name.clone())],
                title,
                entry: Some(Entry {
                    meta: format!("deep_planning · explore · branch {branch}"),
                    text,
                    details,
                }),
            });
            picture.link(At::Node(id), At::Node(approach), &EXPLORES);
            approaches.push((branch.to_string(), approach));
        }
        if let Some(f) = &plan.finalized {
            let item = &f.item;
            let name = planning
                .approach(&item.selected_branch)
                .map_or("", |a| a.name.as_str());
            let mut details = vec![("selected", format!("{} ({name})", item.selected_branch))];
            for (i, step) in item.steps.iter().enumerate() {
                details.push((
                    "step",
                    format!("{}. {}: {}", i + 1, step.title, step.description),
                ));
            }
            for risk in &item.risks {
                // A risk given as a plain string has no mitigation: no arrow to nothing.
                let text = if risk.mitigation.trim().is_empty() {
                    risk.description.clone()
                } else {
                    format!("{} → {}", risk.description, risk.mitigation)
                };
                details.push(("risk", text));
            }
            for assumption in &item.assumptions {
                details.push(("assumption", assumption.clone()));
            }
            for criterion in &item.success_criteria {
                details.push(("success criterion", criterion.clone()));
            }
            let final_node = picture.add(Node {
                seq: f.seq,
                kind: &FINAL,
                place: Place::Main,
                head: vec![Span::text(format!(
                    "final plan · {} · {}",
                    counted(item.steps.len(), "step", "steps"),
                    counted(item.risks.len(), "risk", "risks")
                ))],
                text: vec![Span::text(format!(
                    "{} · {name}",
                    short(&item.selected_branch, LABEL_NAME_CHARS)
                ))],
                title: format!("selected {}: {name}", item.selected_branch),
                entry: Some(Entry {
                    meta: format!(
                        "deep_planning · finalize · selected {}",
                        item.selected_branch
                    ),
                    text: String::new(),
                    details,
                }),
            });
            if let Some((_, approach)) = approaches.iter().find(|(b, _)| *b == item.selected_branch)
            {
                picture.link(At::Node(final_node), At::Node(*approach), &SELECTS);
            }
        }
    }
    for (index, e) in planning.evaluations.iter().enumerate() {
        let item = &e.item;
        let (place, from) = on_branch(tree, &approaches, &item.branch_id, e.seq);
        let mut head = format!("score {}", score_text(item));
        if let Some(r) = &item.recommendation {
            head.push_str(" · ");
            head.push_str(&short(r, LABEL_NAME_CHARS));
        }
        let mut head = vec![Span::text(head)];
        // A branch evaluated again: its latest evaluation is the one that counts (until a
        // later one), each earlier one is replaced from the next one's event on.
        let same_branch = |other: &&crate::tools::planning::state::Folded<Evaluation>| {
            other.item.branch_id == item.branch_id
        };
        let next = planning.evaluations[index + 1..].iter().find(same_branch);
        // Marked from the second evaluation on: a fold up to the first draws no mark.
        let again = planning.evaluations[..index]
            .iter()
            .any(|e| same_branch(&e));
        if again {
            head.push(Span::during(" · counts", e.seq, next.map(|n| n.seq)).with_class("selected"));
        }
        if let Some(next) = next {
            head.push(
                Span::during(format!(" · replaced by #{}", next.seq), next.seq, None)
                    .with_class("closed"),
            );
        }
        let mut details = vec![("criteria", criteria_text(item))];
        if let Some(r) = &item.recommendation {
            details.push(("recommendation", r.clone()));
        }
        let rationale = item.rationale.clone().unwrap_or_default();
        // Without a rationale, what it scored says what the evaluation was.
        let said = if rationale.trim().is_empty() {
            criteria_text(item)
        } else {
            rationale.clone()
        };
        let node = picture.add(Node {
            seq: e.seq,
            kind: &EVALUATION,
            place,
            head,
            text: vec![Span::text(format!(
                "{}: {said}",
                short(&item.branch_id, LABEL_NAME_CHARS)
            ))],
            title: format!(
                "{} scored {}\n{}\n{rationale}",
                item.branch_id,
                score_text(item),
                criteria_text(item)
            ),
            entry: Some(Entry {
                // Recorded by deep_planning's evaluate or by evaluate_branch (the fold
                // does not keep which).
                meta: format!("branch {} · score {}", item.branch_id, score_text(item)),
                text: rationale,
                details,
            }),
        });
        if let Some(from) = from {
            picture.link(from, At::Node(node), &EVALUATES);
        }
    }
    for c in &planning.closes {
        let item = &c.item;
        let (place, from) = on_branch(tree, &approaches, &item.branch_id, c.seq);
        let node = picture.add(Node {
            seq: c.seq,
            kind: &CLOSE,
            place,
            head: vec![Span::text(format!(
                "closed · {}",
                short(&item.branch_id, LABEL_NAME_CHARS)
            ))],
            text: vec![Span::text(item.conclusion.clone())],
            title: format!("{} closed: {}", item.branch_id, item.conclusion),
            entry: Some(Entry {
                meta: format!("close_branch · branch {}", item.branch_id),
                text: item.conclusion.clone(),
                details: Vec::new(),
            }),
        });
        if let Some(from) = from {
            picture.link(from, At::Node(node), &CLOSES);
        }
    }
    for m in &planning.merges {
        let item = &m.item;
        picture.mark(Mark {
            seq: m.seq,
            kind: Some(&MERGE),
            head: vec![Span::text(format!(
                " · merges {}",
                short(&item.branch_id, LABEL_NAME_CHARS)
            ))],
            total: Vec::new(),
            details: vec![(
                "merged",
                format!("branch {} ({})", item.branch_id, item.strategy),
            )],
        });
        let from = approaches
            .iter()
            .find(|(b, _)| *b == item.branch_id)
            .map(|(_, id)| At::Node(*id))
            .or_else(|| branch_tail(tree, &item.branch_id, m.seq).map(At::Thought));
        if let Some(from) = from {
            picture.link(from, At::Thought(m.seq), &MERGES);
        }
    }
}
