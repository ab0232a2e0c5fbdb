//! The `plan` prompt: a person's way to start a plan for a problem, or to resume the open
//! plan for the same problem in its next phase (listed only where `deep_planning` is on).
//!
//! Owns: [`PLAN_PROMPT`] (the family's [`FamilyPrompt`]), its argument and instructions.
//! Must not: write, or put stored text outside the prompt's data block (the shared
//! helpers of [`crate::prompts`] place it).

use super::payload::PHASE_DONE;
use super::state::PlanningSummary;
use super::valid_next;
use crate::event::SessionKind;
use crate::prompts::{
    FamilyPrompt, PromptError, messages, reads, resumable_id, session_facts, text_argument,
};
use crate::store::{Ledger, SessionHead};
use rmcp::model::{GetPromptResult, Prompt, PromptArgument};
use serde_json::{Map, Value, json};

/// The prompt's name.
const PLAN: &str = "plan";
/// Its argument.
const PROBLEM_ARGUMENT: &str = "problem";
/// The tool it drives.
const DEEP_PLANNING: &str = "deep_planning";

/// The planning family's prompt.
pub(crate) struct PlanPrompt;

/// The one instance (the family's `prompts`).
pub(crate) static PLAN_PROMPT: PlanPrompt = PlanPrompt;

impl FamilyPrompt for PlanPrompt {
    fn name(&self) -> &'static str {
        PLAN
    }

    fn tool(&self) -> &'static str {
        DEEP_PLANNING
    }

    fn toolset(&self) -> &'static str {
        super::FAMILY.name
    }

    fn listing(&self) -> Prompt {
        Prompt::new(
            PLAN,
            Some("Plan a problem in phases with deep_planning: starts a plan, or resumes the open plan for the same problem in its next phase"),
            Some(vec![
                PromptArgument::new(PROBLEM_ARGUMENT)
                    .with_title("Problem")
                    .with_description("The problem to plan")
                    .with_required(true),
            ]),
        )
        .with_title("Plan a problem")
    }

    fn get(
        &self,
        ledger: &Ledger,
        arguments: &Map<String, Value>,
    ) -> Result<GetPromptResult, PromptError> {
        let problem = text_argument(PLAN, PROBLEM_ARGUMENT, arguments)?;
        plan_prompt(ledger, &problem)
    }
}

/// The phase a `deep_planning` session's summary records (`None`: not begun, or another
/// kind).
fn plan_phase(head: &SessionHead) -> Option<&str> {
    PlanningSummary::of(&head.summary).phase.as_deref()
}

fn plan_prompt(ledger: &Ledger, problem: &str) -> Result<GetPromptResult, PromptError> {
    let title = reads::title_of(problem).to_lowercase();
    let same_problem: Vec<SessionHead> = reads::heads_newest_first(ledger)?
        .into_iter()
        .filter(|h| {
            h.summary.kind == SessionKind::PLANNING && h.summary.title.to_lowercase() == title
        })
        .collect();
    let open = same_problem
        .iter()
        .find(|h| plan_phase(h) != Some(PHASE_DONE));
    let mut data = json!({"problem": problem});
    let resume = match open {
        Some(head) => {
            let tree = reads::tree(ledger, head)?;
            data["openPlan"] =
                json!({"session": session_facts(head), "plan": super::prompt::plan_state(&tree)});
            let next = valid_next(plan_phase(head));
            json!({
                "tool": DEEP_PLANNING,
                "arguments": {"sessionId": resumable_id(head), "phase": next.first().copied().unwrap_or("init")},
                "fill": ["phase (any of openPlan.plan.validNextPhases) and that phase's fields"],
            })
        }
        None => json!({
            "tool": DEEP_PLANNING,
            "arguments": {"phase": "init", "problem": problem},
            "fill": ["context", "constraints"],
        }),
    };
    let finished: Vec<Value> = same_problem
        .iter()
        .filter(|h| plan_phase(h) == Some(PHASE_DONE))
        .map(session_facts)
        .collect();
    if !finished.is_empty() {
        data["finishedPlans"] = json!(finished);
    }
    data["resume"] = resume;
    let start = if open.is_some() {
        "An open plan for this problem exists (`openPlan`): resume it in its next phase with \
         the call in `resume` instead of starting over."
    } else {
        "Start with the call in `resume` (phase init), adding the context and constraints \
         you know."
    };
    let instructions = format!(
        "Plan the problem given in the data below (`problem`) with the deep_planning tool, \
         one phase per call:\n\
         - init: the problem, its context and constraints;\n\
         - clarify: one open question per call, with its answer when you have one;\n\
         - explore: one approach per call (at least two), with pros and cons;\n\
         - evaluate: score each approach (feasibility, completeness, coherence, risk 0-10) with \
         a rationale;\n\
         - finalize: select one approach, with steps, risks, assumptions and success criteria.\n\
         Each answer lists validNextPhases.\n\n{start}"
    );
    Ok(GetPromptResult::new(messages(instructions, data))
        .with_description("Plan the problem with deep_planning"))
}
