//! A plan as a document: the Markdown and JSON of `deep_planning`'s finalize and
//! `get_plan`, and the Mermaid of its approaches (scores shown, the selected one styled).
//!
//! Owns: [`markdown`], [`json`], [`mermaid`], and [`RENDER`] (the family's pieces of a
//! session's Markdown and Mermaid: its sections, its plan's nodes, its branch titles).
//! Sections follow `specs/planning.md` in its order; an empty section is left out, and
//! nothing prints "undefined" or "null". Every model-written text goes through the
//! Markdown escaper or the Mermaid label escaper. Must not: read the store, or change a
//! projection.

use crate::event::summary::SessionSummary;
use crate::export::counted;
use crate::export::family::{FamilyRender, PromptResume};
use crate::export::markdown::escape_inline;
use crate::export::mermaid::escape_label;
use crate::projection::tree::ThoughtTree;
use crate::tools::planning::state::{Evaluation, Planning};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;

/// The planning family's pieces of a session's Markdown and Mermaid.
pub(crate) struct PlanningRender;

/// The one instance, registered with the family.
pub(crate) static RENDER: PlanningRender = PlanningRender;

impl FamilyRender for PlanningRender {
    fn markdown_sections(&self, tree: &ThoughtTree, out: &mut String) {
        out.push_str(&session_markdown(Planning::of(tree)));
    }

    fn mermaid_edges(&self, tree: &ThoughtTree) -> usize {
        plan_edges(tree)
    }

    /// A plan: its problem and approaches as their own nodes (`p0`, `a<n>`).
    fn mermaid_nodes(&self, tree: &ThoughtTree, out: &mut String) -> bool {
        if Planning::of(tree).plan.is_none() {
            return false;
        }
        write_plan_class_defs(out);
        write_plan_nodes(out, tree);
        true
    }

    /// The branch's evaluation score and its close, when it has them.
    fn mermaid_branch_title(&self, tree: &ThoughtTree, branch: &str, out: &mut String) {
        let planning = Planning::of(tree);
        if let Some(evaluation) = planning.evaluation(branch) {
            let _ = write!(out, " · score {:.2}", evaluation.item.score);
        }
        if planning.conclusion(branch).is_some() {
            out.push_str(" · closed");
        }
    }

    fn mermaid_classes(&self) -> &'static [(&'static str, &'static str)] {
        &PLAN_CLASS_DEFS
    }

    fn prompt_state(&self, tree: &ThoughtTree, _last: usize) -> Option<(&'static str, Value)> {
        super::prompt::plan_state(tree).map(|state| ("plan", state))
    }

    fn prompt_resume(
        &self,
        tree: &ThoughtTree,
        summary: &SessionSummary,
        session: &str,
    ) -> Option<PromptResume> {
        super::prompt::resume(tree, summary, session)
    }

    fn prompt_branch_merged(&self, tree: &ThoughtTree, branch: &str) -> bool {
        super::prompt::merged(tree, branch)
    }

    fn prompt_review(&self, tree: &ThoughtTree) -> Option<(&'static str, Value)> {
        super::prompt::evaluations(tree).map(|rows| ("evaluations", rows))
    }
}

/// `8` as "8", `7.5` as "7.5".
pub(crate) fn number(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.2}");
        text.trim_end_matches('0').to_string()
    }
}

/// "feasibility" → "Feasibility".
fn capitalized(name: &str) -> String {
    let mut chars = name.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn list(out: &mut String, items: &[String], prefix: &str) {
    for item in items {
        let _ = writeln!(out, "{prefix}{}", escape_inline(item));
    }
}

fn evaluation_lines(out: &mut String, evaluation: &Evaluation) {
    let _ = writeln!(out, "**Score:** {:.2}/10\n", evaluation.score);
    if let Some(rationale) = &evaluation.rationale {
        let _ = writeln!(out, "**Rationale:** {}\n", escape_inline(rationale));
    }
    if let Some(recommendation) = &evaluation.recommendation {
        let _ = writeln!(
            out,
            "**Recommendation:** {}\n",
            escape_inline(recommendation)
        );
    }
    out.push_str("| Criterion | Score |\n| --- | --- |\n");
    for criterion in &evaluation.criteria {
        let _ = writeln!(
            out,
            "| {} | {}/10 |",
            escape_inline(&capitalized(&criterion.name)),
            number(criterion.score)
        );
    }
    out.push('\n');
}

/// The plan of a planning session as Markdown (finalized, or so far); `None` when the
/// session has no plan.
pub(crate) fn markdown(planning: &Planning) -> Option<String> {
    let plan = planning.plan.as_ref()?;
    let mut out = String::new();
    let selected = plan.finalized.as_ref().map(|f| &f.item);
    let selected_approach = selected.and_then(|f| planning.approach(&f.selected_branch));
    match selected_approach {
        Some(approach) => {
            let _ = writeln!(out, "# Plan: {}\n", escape_inline(&approach.name));
        }
        None => out.push_str("# Plan (in progress)\n\n"),
    }
    let _ = writeln!(out, "## Problem\n\n{}\n", escape_inline(&plan.init.problem));
    if let Some(context) = plan
        .init
        .context
        .as_deref()
        .filter(|c| !c.trim().is_empty())
    {
        let _ = writeln!(out, "## Context\n\n{}\n", escape_inline(context));
    }
    if !plan.init.constraints.is_empty() {
        out.push_str("## Constraints\n\n");
        list(&mut out, &plan.init.constraints, "- ");
        out.push('\n');
    }
    if !plan.clarifications.is_empty() {
        out.push_str("## Clarifications\n\n| Question | Answer |\n| --- | --- |\n");
        for c in &plan.clarifications {
            let answer = c.item.answer.as_deref().unwrap_or("Pending");
            let _ = writeln!(
                out,
                "| {} | {} |",
                escape_inline(&c.item.question),
                escape_inline(answer)
            );
        }
        out.push('\n');
    }
    if let Some(approach) = selected_approach {
        let _ = writeln!(
            out,
            "## Selected Approach: {}\n",
            escape_inline(&approach.name)
        );
        if let Some(description) = &approach.description {
            let _ = writeln!(out, "{}\n", escape_inline(description));
        }
        if let Some(evaluation) = planning.evaluation(&approach.branch_id) {
            evaluation_lines(&mut out, &evaluation.item);
        }
        if !approach.pros.is_empty() {
            out.push_str("**Pros:**\n\n");
            list(&mut out, &approach.pros, "- ");
            out.push('\n');
        }
        if !approach.cons.is_empty() {
            out.push_str("**Cons:**\n\n");
            list(&mut out, &approach.cons, "- ");
            out.push('\n');
        }
    }
    let others: Vec<_> = plan
        .approaches
        .iter()
        .filter(|a| Some(a.item.branch_id.as_str()) != selected.map(|s| s.selected_branch.as_str()))
        .collect();
    if !others.is_empty() {
        out.push_str(if selected.is_some() {
            "## Rejected Approaches\n\n"
        } else {
            "## Approaches\n\n"
        });
        for approach in others {
            let _ = writeln!(out, "### {}\n", escape_inline(&approach.item.name));
            if let Some(evaluation) = planning.evaluation(&approach.item.branch_id) {
                let e = &evaluation.item;
                let _ = write!(out, "**Score:** {:.2}/10", e.score);
                if let Some(recommendation) = &e.recommendation {
                    let _ = write!(
                        out,
                        " · **Recommendation:** {}",
                        escape_inline(recommendation)
                    );
                }
                out.push_str("\n\n");
                if let Some(rationale) = &e.rationale {
                    let _ = writeln!(out, "{}\n", escape_inline(rationale));
                }
            } else if let Some(description) = &approach.item.description {
                let _ = writeln!(out, "{}\n", escape_inline(description));
            }
        }
    }
    let Some(final_plan) = selected else {
        return Some(out);
    };
    if !final_plan.steps.is_empty() {
        out.push_str("## Implementation Steps\n\n");
        for (i, step) in final_plan.steps.iter().enumerate() {
            let _ = writeln!(out, "### Step {}: {}\n", i + 1, escape_inline(&step.title));
            if !step.description.trim().is_empty() {
                let _ = writeln!(out, "{}\n", escape_inline(&step.description));
            }
            let mut details = Vec::new();
            if !step.files.is_empty() {
                details.push(format!(
                    "**Files:** {}",
                    escape_inline(&step.files.join(", "))
                ));
            }
            if !step.dependencies.is_empty() {
                details.push(format!(
                    "**Depends on:** {}",
                    escape_inline(&step.dependencies.join(", "))
                ));
            }
            if let Some(complexity) = &step.complexity {
                details.push(format!("**Complexity:** {}", escape_inline(complexity)));
            }
            if !details.is_empty() {
                let _ = writeln!(out, "{}\n", details.join("  \n"));
            }
        }
    }
    if !final_plan.risks.is_empty() {
        out.push_str("## Risks\n\n| Risk | Mitigation |\n| --- | --- |\n");
        for risk in &final_plan.risks {
            let _ = writeln!(
                out,
                "| {} | {} |",
                escape_inline(&risk.description),
                escape_inline(&risk.mitigation)
            );
        }
        out.push('\n');
    }
    if !final_plan.assumptions.is_empty() {
        out.push_str("## Assumptions\n\n");
        list(&mut out, &final_plan.assumptions, "- ");
        out.push('\n');
    }
    if !final_plan.success_criteria.is_empty() {
        out.push_str("## Success Criteria\n\n");
        list(&mut out, &final_plan.success_criteria, "- [ ] ");
        out.push('\n');
    }
    Some(out)
}

/// `{name, branchId, score?, rationale?}` (+ recommendation for rejected ones).
fn approach_json(planning: &Planning, branch: &str, name: &str, recommendation: bool) -> Value {
    let mut row = Map::new();
    row.insert("name".into(), json!(name));
    row.insert("branchId".into(), json!(branch));
    if let Some(e) = planning.evaluation(branch) {
        row.insert("score".into(), json!(e.item.score));
        if recommendation && let Some(r) = &e.item.recommendation {
            row.insert("recommendation".into(), json!(r));
        }
        if let Some(r) = &e.item.rationale {
            row.insert("rationale".into(), json!(r));
        }
    }
    Value::Object(row)
}

/// The plan as the spec's JSON: `{title, problem, context?, constraints, clarifications,
/// selectedApproach?, rejectedApproaches, steps, risks, assumptions, successCriteria}`;
/// `None` when the session has no plan. Absent values are left out, never null.
pub(crate) fn json(planning: &Planning) -> Option<Value> {
    let plan = planning.plan.as_ref()?;
    let selected = plan.finalized.as_ref().map(|f| &f.item);
    let selected_approach = selected.and_then(|f| planning.approach(&f.selected_branch));
    let mut out = Map::new();
    out.insert(
        "title".into(),
        json!(match selected_approach {
            Some(a) => format!("Plan: {}", a.name),
            None => "Plan (in progress)".to_string(),
        }),
    );
    out.insert("problem".into(), json!(plan.init.problem));
    if let Some(context) = &plan.init.context {
        out.insert("context".into(), json!(context));
    }
    out.insert("constraints".into(), json!(plan.init.constraints));
    let clarifications: Vec<Value> = plan
        .clarifications
        .iter()
        .map(|c| json!({"question": c.item.question, "answer": c.item.answer.as_deref().unwrap_or("Pending")}))
        .collect();
    out.insert("clarifications".into(), json!(clarifications));
    if let Some(approach) = selected_approach {
        let mut row = approach_json(planning, &approach.branch_id, &approach.name, false);
        row.as_object_mut()
            .expect("object")
            .remove("recommendation");
        out.insert("selectedApproach".into(), row);
    }
    let key = if selected.is_some() {
        "rejectedApproaches"
    } else {
        "approaches"
    };
    let others: Vec<Value> = plan
        .approaches
        .iter()
        .filter(|a| Some(a.item.branch_id.as_str()) != selected.map(|s| s.selected_branch.as_str()))
        .map(|a| approach_json(planning, &a.item.branch_id, &a.item.name, true))
        .collect();
    out.insert(key.into(), json!(others));
    if let Some(f) = selected {
        out.insert("steps".into(), json!(f.steps));
        out.insert("risks".into(), json!(f.risks));
        out.insert("assumptions".into(), json!(f.assumptions));
        out.insert("successCriteria".into(), json!(f.success_criteria));
    }
    Some(Value::Object(out))
}

const INDENT: &str = "    ";

/// Node classes of the plan diagram (constant text).
pub(crate) const PLAN_CLASS_DEFS: [(&str, &str); 3] = [
    ("problem", "fill:#f3f0ff,stroke:#7048e8"),
    ("approach", "fill:#ebfbee,stroke:#2f9e44"),
    ("selected", "fill:#fff9db,stroke:#f08c00,stroke-width:3px"),
];

/// The plan's approaches as a tree under its problem: `p0` the problem, `a<n>` each
/// approach with its score and recommendation, the selected one styled. Ids are
/// generated; every text is an escaped, quoted label. The header states the counts the
/// real Mermaid parser must find (no thought nodes; one edge per approach).
pub(crate) fn mermaid(tree: &ThoughtTree) -> String {
    let mut out = String::from("flowchart TD\n");
    let _ = writeln!(
        out,
        "{INDENT}%% reasoning-ledger session {} plan, at seq {}: 0 thoughts, {}, 0 branches",
        tree.session,
        tree.at_seq,
        counted(plan_edges(tree), "edge", "edges")
    );
    write_plan_class_defs(&mut out);
    write_plan_nodes(&mut out, tree);
    out
}

/// Edges [`write_plan_nodes`] draws: one per approach.
pub(crate) fn plan_edges(tree: &ThoughtTree) -> usize {
    Planning::of(tree)
        .plan
        .as_ref()
        .map_or(0, |p| p.approaches.len())
}

/// The `classDef` lines of the plan's nodes.
pub(crate) fn write_plan_class_defs(out: &mut String) {
    for (class, style) in PLAN_CLASS_DEFS {
        let _ = writeln!(out, "{INDENT}classDef {class} {style}");
    }
}

/// The plan's nodes (`p0`, `a<n>`) and its [`plan_edges`] edges, for this diagram and
/// the session's.
pub(crate) fn write_plan_nodes(out: &mut String, tree: &ThoughtTree) {
    let approaches = Planning::of(tree)
        .plan
        .as_ref()
        .map_or(&[][..], |p| p.approaches.as_slice());
    let problem = Planning::of(tree)
        .plan
        .as_ref()
        .map_or("This session has no plan.", |p| p.init.problem.as_str());
    let _ = writeln!(
        out,
        "{INDENT}p0[\"📋 {}\"]:::problem",
        escape_label(&cut(problem))
    );
    let selected = Planning::of(tree)
        .plan
        .as_ref()
        .and_then(|p| p.finalized.as_ref())
        .map(|f| f.item.selected_branch.as_str());
    for (i, approach) in approaches.iter().enumerate() {
        let a = &approach.item;
        let mut label = format!("{} · {}", cut(&a.branch_id), cut(&a.name));
        if let Some(e) = Planning::of(tree).evaluation(&a.branch_id) {
            let _ = write!(label, " · score {:.2}", e.item.score);
            if let Some(r) = &e.item.recommendation {
                let _ = write!(label, " · {}", cut(r));
            }
        }
        if Planning::of(tree).conclusion(&a.branch_id).is_some() {
            label.push_str(" · closed");
        }
        let class = if selected == Some(a.branch_id.as_str()) {
            "selected"
        } else {
            "approach"
        };
        let _ = writeln!(
            out,
            "{INDENT}a{}[\"{}\"]:::{class}",
            i + 1,
            escape_label(&label)
        );
    }
    for i in 0..approaches.len() {
        let _ = writeln!(out, "{INDENT}p0 --> a{}", i + 1);
    }
}

/// What a session's Markdown export adds for its plan, evaluations, closes and merges
/// (empty when it has none): the plan's document with its headings two levels down.
pub(crate) fn session_markdown(planning: &Planning) -> String {
    let mut out = String::new();
    if let Some(plan) = markdown(planning) {
        out.push_str("## Plan\n\n");
        for line in plan.lines() {
            // Every text in the plan is escaped: a line opening with `#` is a heading.
            if line.starts_with('#') {
                out.push_str("##");
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    if !planning.evaluations.is_empty() {
        out.push_str("## Evaluations\n\n");
        for e in &planning.evaluations {
            let item = &e.item;
            let criteria: Vec<String> = item
                .criteria
                .iter()
                .map(|c| {
                    format!(
                        "{} {}{} ×{}",
                        escape_inline(&c.name),
                        number(c.score),
                        if c.inverted { " (inverted)" } else { "" },
                        number(c.weight)
                    )
                })
                .collect();
            let _ = write!(
                out,
                "- seq {} · **{}**: {:.2}/10",
                e.seq,
                escape_inline(&item.branch_id),
                item.score
            );
            if let Some(r) = &item.recommendation {
                let _ = write!(out, " · {}", escape_inline(r));
            }
            let _ = write!(out, " · {}", criteria.join(", "));
            if let Some(r) = &item.rationale {
                let _ = write!(out, " · {}", escape_inline(r));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    if !planning.closes.is_empty() {
        out.push_str("## Closed branches\n\n");
        for c in &planning.closes {
            let _ = writeln!(
                out,
                "- seq {} · **{}**: {}",
                c.seq,
                escape_inline(&c.item.branch_id),
                escape_inline(&c.item.conclusion)
            );
        }
        out.push('\n');
    }
    if !planning.merges.is_empty() {
        out.push_str("## Merges\n\n");
        for m in &planning.merges {
            let _ = writeln!(
                out,
                "- seq {} · **{}** merged ({}) into the main line as thought {}",
                m.seq,
                escape_inline(&m.item.branch_id),
                escape_inline(&m.item.strategy),
                m.item.thought_number
            );
        }
        out.push('\n');
    }
    out
}

/// Most characters of a text in a plan diagram's label.
const PLAN_LABEL_MAX_CHARS: usize = 60;

/// Text with whitespace collapsed, cut to a readable label length (the ellipsis within).
fn cut(text: &str) -> String {
    let collapsed: Vec<&str> = text.split_whitespace().collect();
    crate::export::truncate(
        &collapsed.join(" "),
        PLAN_LABEL_MAX_CHARS,
        crate::export::Ellipsis::Within,
    )
}
