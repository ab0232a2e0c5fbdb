//! The planning projection: a plan's problem, clarifications, approaches and final plan,
//! and the evaluations, closes and merges of branches (planning approaches and
//! `sequentialthinking` branches alike), as folded from the planning family's events.
//!
//! Owns: the shapes ([`PlanState`], [`Approach`], [`Evaluation`], [`FinalPlan`], …), which
//! are also the bodies of the planning events as written (camelCase JSON), and the
//! weighted score ([`weighted_score`]); [`Planning`] is the family's state in the tree and
//! [`PlanningSummary`] its fields of the session summary. Must not: do I/O, or know how
//! an event is stored.

use crate::event::summary::SummaryPart;
use crate::projection::family::FamilyState;
use serde::{Deserialize, Serialize};

/// The family's name, as its codec and its parts of the projections give it.
pub(crate) const FAMILY: &str = "planning";

/// One item as folded: the seq of the event that recorded it, and the item.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Folded<T> {
    pub seq: u64,
    #[serde(flatten)]
    pub item: T,
}

/// What `init` records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PlanInit {
    pub problem: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
}

/// A clarifying question, answered or not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Clarification {
    pub question: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// An approach explored: a branch of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Approach {
    pub branch_id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pros: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cons: Vec<String>,
}

/// One criterion of an evaluation, with the weight it counted with (stored, so a score
/// can be recomputed later whatever the weights of the day).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Criterion {
    pub name: String,
    /// 0–10 as given.
    pub score: f64,
    pub weight: f64,
    /// Counted as `10 − score` (risk: lower is better).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inverted: bool,
}

/// An evaluation of one branch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Evaluation {
    pub branch_id: String,
    pub criteria: Vec<Criterion>,
    /// [`weighted_score`] of the criteria, as computed when recorded.
    pub score: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<String>,
}

impl Evaluation {
    /// The given score of criterion `name`, if it has one.
    pub(crate) fn criterion(&self, name: &str) -> Option<f64> {
        self.criteria
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.score)
    }
}

/// `Σ weight × score` (inverted criteria as `10 − score`), rounded to 2 decimals.
pub(crate) fn weighted_score(criteria: &[Criterion]) -> f64 {
    let sum: f64 = criteria
        .iter()
        .map(|c| {
            let value = if c.inverted { 10.0 - c.score } else { c.score };
            c.weight * value
        })
        .sum();
    round2(sum)
}

/// Rounded to 2 decimals (half away from zero, after removing float noise).
pub(crate) fn round2(value: f64) -> f64 {
    ((value * 100.0 + 1e-9_f64.copysign(value)).round()) / 100.0
}

/// A step of the final plan, normalised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Step {
    pub title: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complexity: Option<String>,
}

/// A risk of the final plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Risk {
    pub description: String,
    pub mitigation: String,
}

/// What `finalize` records.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FinalPlan {
    pub selected_branch: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub risks: Vec<Risk>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assumptions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub success_criteria: Vec<String>,
}

/// A branch ended with its conclusion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BranchClose {
    pub branch_id: String,
    pub conclusion: String,
}

/// A branch's finding brought back into the main line as a thought.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BranchMerge {
    pub branch_id: String,
    /// `summary` or `append`.
    pub strategy: String,
    /// The main-line thought number it was recorded as.
    pub thought_number: u64,
    /// The thought's text.
    pub thought: String,
}

/// A planning session's state.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PlanState {
    /// `init`, `clarify`, `explore`, `evaluate` or `done`.
    pub phase: &'static str,
    /// Seq of the event that initialized it (not exported: the pictures place it).
    #[serde(skip)]
    pub init_seq: u64,
    #[serde(flatten)]
    pub init: PlanInit,
    pub clarifications: Vec<Folded<Clarification>>,
    pub approaches: Vec<Folded<Approach>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalized: Option<Folded<FinalPlan>>,
}

/// Everything the planning family folded into a session's tree.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Planning {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanState>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evaluations: Vec<Folded<Evaluation>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub closes: Vec<Folded<BranchClose>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub merges: Vec<Folded<BranchMerge>>,
}

impl FamilyState for Planning {
    fn family(&self) -> &'static str {
        FAMILY
    }

    /// Only sessions with plans, evaluations, closes or merges carry it.
    fn json(&self) -> Option<(&'static str, serde_json::Value)> {
        (!self.is_empty()).then(|| {
            (
                "planning",
                serde_json::to_value(self).expect("planning serializes"),
            )
        })
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What the planning family keeps in a session's summary (after the core's fields, as
/// every build wrote them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct PlanningSummary {
    /// A plan's phase (`init`, `clarify`, `explore`, `evaluate`, `done`), in a planning
    /// session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// A plan's clarifications.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clarifications: u64,
    /// Branch ids with an evaluation, each once, in first-evaluated order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evaluated: Vec<String>,
    /// Branch ids ended by `close_branch`: they take no more thoughts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closed_branches: Vec<String>,
    /// The approach a finalized plan selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_branch: Option<String>,
}

/// The JSON keys of [`PlanningSummary`] (its codec reads them back).
pub(crate) const SUMMARY_KEYS: &[&str] = &[
    "phase",
    "clarifications",
    "evaluated",
    "closed_branches",
    "selected_branch",
];

impl PlanningSummary {
    /// The planning part of `summary` (an empty one when the session has none).
    pub(crate) fn of(summary: &crate::event::summary::SessionSummary) -> &PlanningSummary {
        static EMPTY: PlanningSummary = PlanningSummary {
            phase: None,
            clarifications: 0,
            evaluated: Vec::new(),
            closed_branches: Vec::new(),
            selected_branch: None,
        };
        summary.part().unwrap_or(&EMPTY)
    }
}

impl SummaryPart for PlanningSummary {
    fn family(&self) -> &'static str {
        FAMILY
    }

    fn position(&self) -> u8 {
        1
    }

    /// A finalized plan completes its session.
    fn complete(&self) -> bool {
        self.phase.as_deref() == Some("done")
    }

    fn closed_branches(&self) -> &[String] {
        &self.closed_branches
    }
}

impl Planning {
    /// What the planning family folded into `tree` (empty when nothing).
    pub(crate) fn of(tree: &crate::projection::tree::ThoughtTree) -> &Planning {
        static EMPTY: Planning = Planning {
            plan: None,
            evaluations: Vec::new(),
            closes: Vec::new(),
            merges: Vec::new(),
        };
        tree.family().unwrap_or(&EMPTY)
    }

    /// Nothing folded (every session of another family).
    pub(crate) fn is_empty(&self) -> bool {
        self.plan.is_none()
            && self.evaluations.is_empty()
            && self.closes.is_empty()
            && self.merges.is_empty()
    }

    /// The latest evaluation of `branch`.
    pub(crate) fn evaluation(&self, branch: &str) -> Option<&Folded<Evaluation>> {
        self.evaluations
            .iter()
            .rev()
            .find(|e| e.item.branch_id == branch)
    }

    /// The conclusion `branch` was closed with.
    pub(crate) fn conclusion(&self, branch: &str) -> Option<&str> {
        self.closes
            .iter()
            .rev()
            .find(|c| c.item.branch_id == branch)
            .map(|c| c.item.conclusion.as_str())
    }

    /// The approach recorded as `branch`, in a planning session.
    pub(crate) fn approach(&self, branch: &str) -> Option<&Approach> {
        self.plan.as_ref().and_then(|plan| {
            plan.approaches
                .iter()
                .find(|a| a.item.branch_id == branch)
                .map(|a| &a.item)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_planning_summary_reads_back_and_is_written_byte_for_byte() {
        use crate::event::summary::SessionSummary;
        let stored = r#"{"version":1,"kind":"planning","title":"p","created_at":1,"updated_at":2,"events":6,"thoughts":0,"branches":["a","b"],"closed":false,"phase":"done","clarifications":1,"evaluated":["a"],"closed_branches":["b"],"selected_branch":"a"}"#;
        let summary: SessionSummary = crate::tools::families()
            .read_summary(serde_json::from_str(stored).unwrap())
            .unwrap();
        assert_eq!(serde_json::to_string(&summary).unwrap(), stored);
        assert_eq!(summary.status(), "complete");
        assert!(summary.branch_closed("b") && !summary.branch_closed("a"));
        assert_eq!(PlanningSummary::of(&summary).evaluated, ["a"]);
    }

    fn plan_score(f: f64, c: f64, h: f64, r: f64) -> f64 {
        let crit = |name: &str, score: f64, weight: f64, inverted: bool| Criterion {
            name: name.into(),
            score,
            weight,
            inverted,
        };
        weighted_score(&[
            crit("feasibility", f, 0.3, false),
            crit("completeness", c, 0.25, false),
            crit("coherence", h, 0.25, false),
            crit("risk", r, 0.2, true),
        ])
    }

    #[test]
    fn the_spec_score_vectors() {
        assert_eq!(format!("{:.2}", plan_score(10.0, 10.0, 10.0, 0.0)), "10.00");
        assert_eq!(format!("{:.2}", plan_score(0.0, 0.0, 0.0, 10.0)), "0.00");
        assert_eq!(format!("{:.2}", plan_score(8.0, 7.0, 9.0, 3.0)), "7.80");
        assert_eq!(format!("{:.2}", plan_score(7.0, 6.0, 8.0, 4.0)), "6.80");
        assert_eq!(round2(1.005), 1.01);
    }
}
