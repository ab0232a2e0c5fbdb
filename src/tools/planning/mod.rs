//! The planning toolset: `deep_planning` (a phased plan, `specs/planning.md`),
//! `list_plans`, `get_plan`, and the branch tools of `specs/ledger.md`
//! (`evaluate_branch`, `compare_branches`, `close_branch`, `merge_branch`, in
//! [`branches`]), recorded durably: every phase, clarification, approach, evaluation,
//! close, merge and final plan is an event; the plan is a projection.
//!
//! Owns: the family's registration ([`FAMILY`]), its tools' definitions, argument
//! parsing (arrays as JSON arrays or JSON-encoded strings, scores 0–10 as numbers or
//! numeric strings, step normalisation), the phase machine ([`valid_next`]) and the pure
//! [`decide_planning`], and the answers. Its events, codec and folds are in [`payload`];
//! the plan's documents in [`crate::tools::planning::document`]. Must not: keep state but the
//! process's current plan, or answer before the commit.

pub(crate) mod branches;
pub(crate) mod document;
mod parse;
pub(crate) mod payload;
pub(crate) mod picture;
mod plan_prompt;
pub(crate) mod prompt;
mod read;
pub(crate) mod state;

pub(crate) use parse::PlanArgs;
use parse::refused;
use read::{get_plan, list_plans};

use super::args::{Args, MAX_ID_BYTES, describe, finish};
use super::write::title_of;
use super::{
    CallFuture, Family, KindInfo, ToolError, reading_annotations, structured_result,
    tool_definition, writing_annotations,
};
use crate::event::summary::SessionSummary;
use crate::event::{CallRecord, NewEvent, Payload, SessionId, SessionKind, format_time};
use crate::export;
use crate::projection::tree::ThoughtTree;
use crate::request::ToolCall;
use crate::store::{Ledger, SessionHead};
use crate::tools::planning::state::{
    Approach, Clarification, Evaluation, FinalPlan, PlanInit, Planning, PlanningSummary, Risk,
    Step, weighted_score,
};
use payload::{Body, PHASE_DONE, PlanningEvent};
use rmcp::model::{CallToolResult, ContentBlock as Content, Tool};
use serde_json::{Map, Value, json};

impl SessionKind {
    /// A `deep_planning` session.
    pub(crate) const PLANNING: SessionKind = SessionKind::new("planning");
}

pub(crate) const DEEP_PLANNING: &str = "deep_planning";
pub(crate) const LIST_PLANS: &str = "list_plans";
pub(crate) const GET_PLAN: &str = "get_plan";

/// The planning family, as registered in [`super::FAMILIES`].
pub(crate) static FAMILY: Family = Family {
    name: "planning",
    instructions: "planning (phased plans with scored approaches; evaluate, compare, close and merge branches)",
    default_on: false,
    listing_budget_bytes: 4_060,
    tools,
    aliases: &[],
    call,
    asks_the_client: false,
    kinds: &[KindInfo {
        kind: SessionKind::PLANNING,
        label: "Plan",
    }],
    codec: Some(&payload::PLANNING_CODEC),
    folds: &[&crate::projection::tree::FoldOf::<payload::PlanningEvent>::NEW],
    picture: Some(&picture::PICTURES),
    render: Some(&document::RENDER),
    prompts: &[&plan_prompt::PLAN_PROMPT],
    doctor: None,
};

/// Each phase with the arguments it reads (the schema lists them all, for every phase).
/// That a plan persists and that its sessionId continues it are said once for every tool,
/// in the server instructions (a phase without one continues the caller's current plan);
/// that an array may come as a JSON string, by the schema's type union; which phases may
/// follow, by every answer's validNextPhases.
/// The scores' bounds (0-10) are said here, not in the schema (see `branches::score_schema`).
const DEEP_PLANNING_DESCRIPTION: &str = "One call per phase: init (problem, context, constraints) → clarify* (question, answer) → explore* (one approach: branchId, name, description, pros, cons) → evaluate (branchId; feasibility, completeness, coherence, risk: 0-10; rationale; recommendation) → finalize (selectedBranch, steps, risks, assumptions, successCriteria; format).";

/// The tools of this family, as listed.
/// The argument names each tool of this family lists, built once: a name of the tool's
/// own is never taken for a misspelt one ([`branches::criteria`]).
static FIELDS: std::sync::LazyLock<Vec<(String, Vec<String>)>> = std::sync::LazyLock::new(|| {
    tools()
        .iter()
        .map(|tool| (tool.name.to_string(), super::args::property_names(tool)))
        .collect()
});

/// The argument names `tool` lists (none for a tool of another family).
pub(crate) fn fields_of(tool: &str) -> &'static [String] {
    FIELDS
        .iter()
        .find(|(name, _)| name == tool)
        .map_or(&[], |(_, fields)| fields.as_slice())
}

pub(crate) fn tools() -> Vec<Tool> {
    let text = json!({"type": "string"});
    let list = json!({"type": ["array", "string"], "items": {"type": "string"}});
    let objects = json!({"type": ["array", "string"], "items": {"type": "object"}});
    // A risk may be just its description (see `objects`).
    let risks = json!({"type": ["array", "string"], "items": {"type": ["object", "string"]}});
    let score = branches::score_schema();
    let mut planning = vec![
        tool_definition(
            DEEP_PLANNING,
            None,
            DEEP_PLANNING_DESCRIPTION,
            json!({"type": "object", "properties": {
                "phase": {"type": "string", "enum": PHASES},
                "sessionId": text,
                "problem": text,
                "context": text,
                "constraints": list,
                "question": text,
                "answer": text,
                "branchId": text,
                "name": text,
                "description": text,
                "pros": list,
                "cons": list,
                "feasibility": score,
                "completeness": score,
                "coherence": score,
                "risk": score,
                "rationale": text,
                "recommendation": {"type": "string", "enum": RECOMMENDATIONS},
                "selectedBranch": text,
                "steps": objects,
                "risks": risks,
                "assumptions": list,
                "successCriteria": list,
                "format": {"type": "string", "enum": ["markdown", "json"]}
            }, "required": ["phase"]}),
            None,
            writing_annotations(),
        ),
        tool_definition(
            LIST_PLANS,
            None,
            "Plans, newest first; keyword matches problems and approach names.",
            json!({"type": "object", "properties": {
                "status": {"type": "string", "enum": ["complete", "in-progress"]},
                "keyword": text
            }}),
            None,
            reading_annotations(),
        ),
        tool_definition(
            GET_PLAN,
            None,
            "A plan, finalized or in progress.",
            json!({"type": "object", "properties": {
                "sessionId": text,
                "format": {"type": "string", "enum": ["markdown", "json", "jsonl", "mermaid"]}
            }, "required": ["sessionId"]}),
            None,
            reading_annotations(),
        ),
    ];
    planning.extend(branches::tools());
    planning
}

fn call(call: ToolCall) -> CallFuture {
    Box::pin(async move {
        match call.name.as_str() {
            DEEP_PLANNING => deep_planning(call).await,
            LIST_PLANS | GET_PLAN => {
                let ledger = call.ctx.ledger.clone();
                let tool = call.name.clone();
                let raw = call.arguments.clone();
                // A read gives its turn up at once.
                drop(call);
                blocking(move || {
                    if tool == LIST_PLANS {
                        list_plans(&ledger, &raw)
                    } else {
                        get_plan(&ledger, &raw)
                    }
                })
                .await
            }
            _ => branches::call(call).await,
        }
        .map(Into::into)
    })
}

/// Runs blocking ledger reads off the async workers.
pub(crate) async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, ToolError> + Send + 'static,
) -> Result<R, ToolError> {
    tokio::task::spawn_blocking(super::args::carry(f))
        .await
        .map_err(|e| ToolError::Panicked {
            tool: "planning read".into(),
            message: e.to_string(),
        })?
}

/// The phases a call may name.
pub(crate) const PHASES: [&str; 5] = ["init", "clarify", "explore", "evaluate", "finalize"];
/// The recommendations an evaluation may give.
pub(crate) const RECOMMENDATIONS: [&str; 3] = ["pursue", "refine", "abandon"];

/// The phases allowed after `phase` (`None`: no session). `init` is accepted from any
/// state but listed only here.
pub(crate) fn valid_next(phase: Option<&str>) -> &'static [&'static str] {
    match phase {
        None | Some(PHASE_DONE) => &["init"],
        Some("init") => &["clarify", "explore"],
        Some("clarify") => &["clarify", "explore"],
        Some("explore") => &["explore", "evaluate", "clarify"],
        Some("evaluate") => &["evaluate", "explore", "finalize"],
        Some(_) => &["init"],
    }
}

/// Most characters of a user's text quoted in a message.
const QUOTED_MAX_CHARS: usize = 40;

/// A user's text, cut for a message.
fn describe_short(text: &str) -> String {
    export::truncate(text, QUOTED_MAX_CHARS, export::Ellipsis::After)
}

/// Pure: the events one `deep_planning` call appends to the plan at `head` (`None`: no
/// session; init starts a new one), or why it is refused.
pub(crate) fn decide_planning(
    head: Option<&SessionHead>,
    args: &PlanArgs,
    call: CallRecord,
) -> Result<Vec<NewEvent>, ToolError> {
    let event = |body: Body| {
        NewEvent::new(Payload::from(PlanningEvent {
            body,
            call: call.clone(),
        }))
    };
    if let Body::PlanInitialized(init) = &args.body {
        return Ok(vec![
            NewEvent::new(Payload::SessionStarted {
                kind: SessionKind::PLANNING,
                title: title_of(&init.problem),
                aliases: vec![args.alias.clone()],
            }),
            event(args.body.clone()),
        ]);
    }
    let Some(head) = head else {
        return Err(refused(
            "No active planning session: start one with phase \"init\"",
        ));
    };
    let summary = &head.summary;
    let planned = PlanningSummary::of(summary);
    let current = planned.phase.as_deref();
    let valid = valid_next(current);
    if !valid.contains(&args.phase) {
        return Err(refused(format!(
            "Cannot transition from \"{}\" to \"{}\"; valid next phases: {}",
            current.unwrap_or("none"),
            args.phase,
            valid.join(", ")
        )));
    }
    match &args.body {
        Body::ApproachExplored(a) if summary.branches.contains(&a.branch_id) => {
            return Err(refused(format!(
                "Approach \"{}\" already exists in this plan; use another branchId",
                a.branch_id
            )));
        }
        Body::BranchEvaluated(e) => {
            if !summary.branches.contains(&e.branch_id) {
                return Err(refused(format!(
                    "No approach found with branchId \"{}\"; explore it first (approaches: {})",
                    e.branch_id,
                    summary.branches.join(", ")
                )));
            }
            if planned.evaluated.contains(&e.branch_id) {
                return Err(refused(format!(
                    "An evaluation of \"{}\" already exists (one per approach)",
                    e.branch_id
                )));
            }
        }
        Body::PlanFinalized(f) if !summary.branches.contains(&f.selected_branch) => {
            return Err(refused(format!(
                "No approach found with branchId \"{}\" (selectedBranch); approaches: {}",
                f.selected_branch,
                summary.branches.join(", ")
            )));
        }
        _ => {}
    }
    Ok(vec![event(args.body.clone())])
}

/// The id a plan is shown by: its `dp-` alias.
pub(crate) fn plan_id(session: SessionId, summary: &SessionSummary) -> String {
    summary
        .aliases
        .first()
        .cloned()
        .unwrap_or_else(|| session.to_string())
}

/// Every deep_planning answer: `{sessionId, phase, status, approachCount,
/// evaluationCount, validNextPhases, message}`.
fn answer(plan: Option<(SessionId, &SessionSummary)>, status: &str, message: String) -> Value {
    let summary = plan.map(|(_, s)| s);
    let phase = summary.and_then(|s| PlanningSummary::of(s).phase.as_deref());
    json!({
        "sessionId": plan.map_or(String::new(), |(session, s)| plan_id(session, s)),
        "phase": phase.unwrap_or("none"),
        "status": status,
        "approachCount": summary.map_or(0, |s| s.branches.len()),
        "evaluationCount": summary.map_or(0, |s| PlanningSummary::of(s).evaluated.len()),
        "validNextPhases": valid_next(phase),
        "message": message,
    })
}

/// The answer as text and structured content; an error sets `isError`.
fn planning_result(value: Value, error: bool) -> CallToolResult {
    let text = serde_json::to_string_pretty(&value).expect("json");
    let mut result = if error {
        CallToolResult::error(vec![Content::text(text)])
    } else {
        CallToolResult::success(vec![Content::text(text)])
    };
    result.structured_content = Some(value);
    result
}

/// The plan a refused `deep_planning` call is about, as its arguments say: its answer
/// shows that plan's state and no other.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Subject {
    /// None: `init`, no phase, or an id that names no plan (the message names the id).
    Nothing,
    /// The plan the call names.
    Named(String),
    /// The caller's current plan (a phase that continues one, without an id).
    Current,
}

impl Subject {
    /// What the raw arguments of a call (parsed or not) are about.
    fn of(raw: &Map<String, Value>) -> Subject {
        let text = |name: &str| raw.get(name).and_then(Value::as_str).map(str::trim);
        if let Some(id) = text("sessionId").or_else(|| text("session_id")) {
            return Subject::Named(id.to_string());
        }
        match text("phase") {
            Some(phase) if phase != "init" && PHASES.contains(&phase) => Subject::Current,
            _ => Subject::Nothing,
        }
    }
}

async fn deep_planning(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
    let subject = Subject::of(&call.arguments);
    let caller = call.request.caller.clone();
    let args = match PlanArgs::parse(&call.arguments) {
        Ok(args) => args,
        Err(error) => return refusal(call.ctx.clone(), &caller, subject, error).await,
    };
    // An unknown sessionId is named, said to be not found, and list_plans suggested; on
    // init, any sessionId is refused: init starts a new plan, it never continues one.
    if let Subject::Named(id) = &subject {
        let ledger = call.ctx.ledger.clone();
        let given = id.clone();
        let found = blocking(move || {
            Ok(match ledger.resolve(&given)? {
                Some(session) => ledger.head(session)?,
                None => None,
            })
        })
        .await?;
        let Some(head) = found else {
            return refusal(
                call.ctx.clone(),
                &caller,
                Subject::Nothing,
                refused(format!(
                    "Session \"{}\" not found; call list_plans to see stored plans",
                    describe_short(id)
                )),
            )
            .await;
        };
        if args.phase == "init" {
            let phase = PlanningSummary::of(&head.summary).phase.clone();
            let next: Vec<&str> = valid_next(phase.as_deref())
                .iter()
                .copied()
                .filter(|p| *p != "init")
                .collect();
            let message = if next.is_empty() {
                format!(
                    "init starts a new plan and takes no sessionId: plan \"{}\" is finished; call init without sessionId to start another",
                    describe_short(id)
                )
            } else {
                format!(
                    "init starts a new plan and takes no sessionId: to continue plan \"{}\" call {} with this sessionId; to start another, call init without sessionId",
                    describe_short(id),
                    next.join(" or ")
                )
            };
            return refusal(call.ctx.clone(), &caller, subject.clone(), refused(message)).await;
        }
    }
    let target = super::write::Target {
        kind: SessionKind::PLANNING,
        field: "sessionId",
        named: args.session_id.clone(),
        continue_key: (args.phase != "init").then(String::new),
        remember_key: String::new(),
        idempotency_key: None,
    };
    let recorded = {
        let args = args.clone();
        call.try_record(target, move |head, record| {
            decide_planning(head, &args, record)
        })
        .await
    };
    let recorded = match recorded {
        Ok(recorded) => recorded,
        Err(error) => return refusal(call.ctx.clone(), &caller, subject, error).await,
    };
    let summary = &recorded.head.summary;
    let plan = Some((recorded.session, summary));
    let mut value = match &args.body {
        Body::PlanInitialized(_) => answer(
            plan,
            "ok",
            format!(
                "Planning session {} started. Next: clarify the problem or explore approaches.",
                plan_id(recorded.session, summary)
            ),
        ),
        Body::PlanClarified(c) => answer(
            plan,
            "ok",
            format!(
                "Clarification recorded{} ({} total).",
                if c.answer.is_some() {
                    ""
                } else {
                    ", answer pending"
                },
                PlanningSummary::of(summary).clarifications
            ),
        ),
        Body::ApproachExplored(a) => answer(
            plan,
            "ok",
            format!(
                "Approach \"{}\" ({}) recorded ({} total).",
                a.name,
                a.branch_id,
                summary.branches.len()
            ),
        ),
        Body::BranchEvaluated(e) => answer(
            plan,
            "ok",
            format!(
                "Evaluation of \"{}\" recorded, score: {:.2}/10, recommendation: {}.",
                e.branch_id,
                e.score,
                e.recommendation.as_deref().unwrap_or("refine")
            ),
        ),
        Body::PlanFinalized(f) => answer(
            plan,
            "complete",
            format!("Plan finalized with approach \"{}\".", f.selected_branch),
        ),
        Body::BranchClosed(_) | Body::BranchMerged(_) => unreachable!("not a deep_planning body"),
    };
    if matches!(args.body, Body::PlanFinalized(_)) {
        let ledger = call.ctx.ledger.clone();
        let head = recorded.head.clone();
        let at = recorded.seq;
        let tree =
            blocking(move || Ok(super::ledger::load_tree(&ledger, &head, Some(at))?)).await?;
        value["plan"] = if args.format == "json" {
            document::json(Planning::of(&tree)).unwrap_or(Value::Null)
        } else {
            json!(document::markdown(Planning::of(&tree)).unwrap_or_default())
        };
    }
    value["eventSeq"] = json!(recorded.seq);
    Ok(planning_result(value, false))
}

/// A refused deep_planning call, answered in its own shape (status "error") with the
/// state of the plan it was about ([`Subject`]) and of no other; other failures stay tool
/// errors.
async fn refusal(
    ctx: std::sync::Arc<super::ToolContext>,
    caller: &crate::request::Caller,
    subject: Subject,
    error: ToolError,
) -> Result<CallToolResult, ToolError> {
    let ToolError::Validation { problems, .. } = &error else {
        return Err(error);
    };
    let message = problems.join("; ");
    let current = ctx.current.lock().unwrap_or_else(|p| p.into_inner()).get(
        caller,
        SessionKind::PLANNING,
        "",
    );
    let ledger = ctx.ledger.clone();
    // The plan's state as stored now (the refused call changed nothing).
    let head = blocking(move || {
        let session = match subject {
            Subject::Named(id) => ledger.resolve(&id)?,
            Subject::Current => current,
            Subject::Nothing => None,
        };
        Ok(match session {
            Some(session) => ledger.head(session)?,
            None => None,
        })
    })
    .await
    .unwrap_or(None);
    let plan = head
        .as_ref()
        .filter(|h| h.summary.kind == SessionKind::PLANNING)
        .map(|h| (h.session, &h.summary));
    Ok(planning_result(answer(plan, "error", message), true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_ids_are_dp_and_8_base62() {
        let id = parse::new_plan_id();
        assert_eq!(id.len(), 11, "{id}");
        assert!(id.starts_with("dp-"));
        assert!(id[3..].chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(parse::new_plan_id(), id);
    }

    #[test]
    fn steps_normalise_with_aliases_canonical_first() {
        let step = |v: Value| parse::normalize_step(3, v.as_object().unwrap());
        let s = step(json!({"action": "act", "title": "canon", "detail": "d"}));
        assert_eq!((s.title.as_str(), s.description.as_str()), ("canon", "d"));
        let s = step(json!({"name": 5, "step": "from step", "info": "i"}));
        assert_eq!(
            (s.title.as_str(), s.description.as_str()),
            ("from step", "i")
        );
        let s = step(json!({"files": ["a.rs", 2], "dependencies": [1], "complexity": "low"}));
        assert_eq!((s.title.as_str(), s.description.as_str()), ("Step 3", ""));
        assert_eq!(s.files, ["a.rs", "2"]);
        assert_eq!(s.dependencies, ["1"]);
        assert_eq!(s.complexity.as_deref(), Some("low"));
        let s = step(json!({"description": "canon", "details": "alias"}));
        assert_eq!(s.description, "canon");
    }

    #[test]
    fn the_phase_machine() {
        assert_eq!(valid_next(None), ["init"]);
        assert_eq!(valid_next(Some("init")), ["clarify", "explore"]);
        assert_eq!(valid_next(Some("clarify")), ["clarify", "explore"]);
        assert_eq!(
            valid_next(Some("explore")),
            ["explore", "evaluate", "clarify"]
        );
        assert_eq!(
            valid_next(Some("evaluate")),
            ["evaluate", "explore", "finalize"]
        );
        assert_eq!(valid_next(Some("done")), ["init"]);
    }
}
