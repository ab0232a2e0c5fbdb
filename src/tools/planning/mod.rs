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
//! the plan's documents in [`crate::export::plan`]. Must not: keep state but the
//! process's current plan, or answer before the commit.

pub mod branches;
pub mod payload;
pub mod picture;

use super::args::{Args, MAX_ID_BYTES, describe};
use super::write::title_of;
use super::{
    CallFuture, Family, KindInfo, ToolError, reading_annotations, structured_result,
    tool_definition, writing_annotations,
};
use crate::event::{CallRecord, NewEvent, Payload, SessionId, SessionKind, format_time};
use crate::export;
use crate::projection::plan::{
    Approach, Clarification, Evaluation, FinalPlan, PlanInit, Risk, Step, weighted_score,
};
use crate::projection::summary::SessionSummary;
use crate::projection::tree::ThoughtTree;
use crate::request::ToolCall;
use crate::store::{Ledger, SessionHead};
use payload::{Body, PHASE_DONE, PlanningEvent};
use rmcp::model::{CallToolResult, ContentBlock as Content, Tool};
use serde_json::{Map, Value, json};

impl SessionKind {
    /// A `deep_planning` session.
    pub const PLANNING: SessionKind = SessionKind::new("planning");
}

pub const DEEP_PLANNING: &str = "deep_planning";
pub const LIST_PLANS: &str = "list_plans";
pub const GET_PLAN: &str = "get_plan";

/// The planning family, as registered in [`super::FAMILIES`].
pub static FAMILY: Family = Family {
    name: "planning",
    instructions: "planning (phased plans with scored approaches; evaluate, compare, close and merge branches)",
    default_on: false,
    listing_budget_bytes: 5_000,
    tools,
    aliases: &[],
    call,
    kinds: &[KindInfo {
        kind: SessionKind::PLANNING,
        label: "Plan",
    }],
    codec: Some(&payload::PLANNING_CODEC),
    picture: Some(&picture::PICTURES),
};

const DEEP_PLANNING_DESCRIPTION: &str = "Plan in phases, one call each: init (problem, context, constraints) → clarify (question, answer)* → explore (branchId, name, description, pros, cons: one approach per call) → evaluate (branchId; feasibility, completeness, coherence, risk 0-10; rationale; recommendation) → finalize (selectedBranch, steps, risks, assumptions, successCriteria; format). Each answer lists validNextPhases. Plans persist: pass sessionId (dp-…) to resume one. Arrays may be JSON strings.";

/// The tools of this family, as listed.
pub fn tools() -> Vec<Tool> {
    let text = json!({"type": "string"});
    let list = json!({"type": ["array", "string"], "items": {"type": "string"}});
    let objects = json!({"type": ["array", "string"], "items": {"type": "object"}});
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
                "risks": objects,
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
            "Stored plans, newest first; filter by status or keyword (problem, approach names).",
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
            "A plan (finalized or so far) as markdown, json, mermaid, or its events as jsonl.",
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
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ToolError::Panicked {
            tool: "planning read".into(),
            message: e.to_string(),
        })?
}

/// The phases a call may name.
pub const PHASES: [&str; 5] = ["init", "clarify", "explore", "evaluate", "finalize"];
/// The recommendations an evaluation may give.
pub const RECOMMENDATIONS: [&str; 3] = ["pursue", "refine", "abandon"];

/// The phases allowed after `phase` (`None`: no session). `init` is accepted from any
/// state but listed only here.
pub fn valid_next(phase: Option<&str>) -> &'static [&'static str] {
    match phase {
        None | Some(PHASE_DONE) => &["init"],
        Some("init") => &["clarify", "explore"],
        Some("clarify") => &["clarify", "explore"],
        Some("explore") => &["explore", "evaluate", "clarify"],
        Some("evaluate") => &["evaluate", "explore", "finalize"],
        Some(_) => &["init"],
    }
}

/// A validated `deep_planning` call.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanArgs {
    /// One of [`PHASES`].
    pub phase: &'static str,
    /// The session to resume (not for init).
    pub session_id: Option<String>,
    /// The new session's `dp-` id (init only).
    pub alias: String,
    pub body: Body,
    /// finalize: markdown or json.
    pub format: &'static str,
}

/// A new plan's id: `dp-` and 8 base62 characters.
pub fn new_plan_id() -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut random = ulid::Ulid::generate().random();
    let mut id = String::from("dp-");
    for _ in 0..8 {
        id.push(DIGITS[(random % 62) as usize] as char);
        random /= 62;
    }
    id
}

/// A field that takes an array as JSON, or as a JSON-encoded string.
fn json_array(args: &mut Args<'_>, raw: &Map<String, Value>, field: &str) -> Option<Vec<Value>> {
    match raw.get(field)? {
        Value::Array(items) => Some(items.clone()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(items)) => Some(items),
            Ok(other) => {
                args.problem(
                    field,
                    format!(
                        "expected an array (or a JSON string of one), received a JSON string holding {}",
                        describe(&other)
                    ),
                );
                None
            }
            Err(e) => {
                args.problem(
                    field,
                    format!("expected an array or a JSON-encoded array, received a string that is not valid JSON ({e})"),
                );
                None
            }
        },
        other => {
            args.problem(
                field,
                format!(
                    "expected an array or a JSON-encoded array, received {}",
                    describe(other)
                ),
            );
            None
        }
    }
}

/// An array of strings, as [`json_array`] reads it.
pub fn string_array(args: &mut Args<'_>, raw: &Map<String, Value>, field: &str) -> Vec<String> {
    let Some(items) = json_array(args, raw, field) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Value::String(s) => out.push(s),
            other => {
                args.problem(
                    field,
                    format!("item {i}: expected a string, received {}", describe(&other)),
                );
                return Vec::new();
            }
        }
    }
    out
}

/// The first string among `names` in a step object.
fn first_string(object: &Map<String, Value>, names: &[&str]) -> Option<String> {
    names.iter().find_map(|name| {
        object
            .get(*name)
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}

/// Strings and numbers of a pass-through field, as text.
fn texts(value: Option<&Value>) -> Vec<String> {
    let one = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match value {
        Some(Value::Array(items)) => items.iter().filter_map(one).collect(),
        Some(v) => one(v).into_iter().collect(),
        None => Vec::new(),
    }
}

/// Step normalisation: title ← first string of title, action, name, step; description ←
/// first string of description, detail, details, info ("Step N" and "" when missing);
/// files, dependencies, complexity pass through (as text).
pub fn normalize_step(position: usize, object: &Map<String, Value>) -> Step {
    Step {
        title: first_string(object, &["title", "action", "name", "step"])
            .unwrap_or_else(|| format!("Step {position}")),
        description: first_string(object, &["description", "detail", "details", "info"])
            .unwrap_or_default(),
        files: texts(object.get("files")),
        dependencies: texts(object.get("dependencies")),
        complexity: texts(object.get("complexity")).into_iter().next(),
    }
}

fn objects(args: &mut Args<'_>, raw: &Map<String, Value>, field: &str) -> Vec<Map<String, Value>> {
    let Some(items) = json_array(args, raw, field) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Value::Object(object) => out.push(object),
            other => {
                args.problem(
                    field,
                    format!(
                        "item {i}: expected an object, received {}",
                        describe(&other)
                    ),
                );
                return Vec::new();
            }
        }
    }
    out
}

/// A deep_planning refusal: its message (nothing recorded).
fn refused(message: impl Into<String>) -> ToolError {
    ToolError::validation(DEEP_PLANNING, vec![message.into()])
}

impl PlanArgs {
    /// Decodes and checks what the arguments alone decide; the phase machine and the
    /// approaches are checked against the stored session ([`decide_planning`]).
    pub fn parse(raw: &Map<String, Value>) -> Result<Self, ToolError> {
        let mut args = Args::new(raw);
        let phase_text = args.string_limited(&["phase"], false, MAX_ID_BYTES);
        let Some(phase_text) = phase_text else {
            if args.has_problems() {
                return Err(ToolError::validation(DEEP_PLANNING, args.into_problems()));
            }
            return Err(refused(
                "deep_planning requires a \"phase\": init, clarify, explore, evaluate or finalize",
            ));
        };
        let Some(phase) = PHASES.iter().copied().find(|p| *p == phase_text.trim()) else {
            return Err(refused(format!(
                "Unknown phase {:?}: use init, clarify, explore, evaluate or finalize",
                describe_short(&phase_text)
            )));
        };
        // Every field is read (and its type checked) whatever the phase, so a call is
        // refused for a malformed field even where the phase does not use it.
        let nonblank = |text: Option<String>| text.filter(|t| !t.trim().is_empty());
        let session_id = args.string_limited(&["sessionId", "session_id"], false, MAX_ID_BYTES);
        let problem = nonblank(args.string(&["problem"], false));
        let context = nonblank(args.string(&["context"], false));
        let constraints = string_array(&mut args, raw, "constraints");
        let question = nonblank(args.string(&["question"], false));
        let answer = nonblank(args.string(&["answer"], false));
        let branch_id =
            nonblank(args.string_limited(&["branchId", "branch_id"], false, MAX_ID_BYTES));
        let name = nonblank(args.string(&["name"], false));
        let description = nonblank(args.string(&["description"], false));
        let pros = string_array(&mut args, raw, "pros");
        let cons = string_array(&mut args, raw, "cons");
        let criteria = branches::criteria(&mut args, raw, branches::PLAN_WEIGHTS);
        let rationale = nonblank(args.string(&["rationale"], false));
        let recommendation = branches::recommendation(&mut args, DEEP_PLANNING)?;
        let selected = nonblank(args.string_limited(
            &["selectedBranch", "selected_branch"],
            false,
            MAX_ID_BYTES,
        ));
        let steps = objects(&mut args, raw, "steps");
        let risks = objects(&mut args, raw, "risks");
        let assumptions = string_array(&mut args, raw, "assumptions");
        let success_criteria = string_array(&mut args, raw, "successCriteria");
        let mut format = "markdown";
        if let Some(text) = args.string_limited(&["format"], false, MAX_ID_BYTES) {
            match text.trim().to_ascii_lowercase().as_str() {
                "markdown" => format = "markdown",
                "json" => format = "json",
                _ => args.problem(
                    "format",
                    format!(
                        "unknown format {}; use markdown or json",
                        describe_short(&text)
                    ),
                ),
            }
        }
        let risks: Vec<Risk> = risks
            .iter()
            .enumerate()
            .filter_map(
                |(i, risk)| match first_string(risk, &["description", "risk"]) {
                    Some(description) => Some(Risk {
                        description,
                        mitigation: first_string(risk, &["mitigation"]).unwrap_or_default(),
                    }),
                    None => {
                        args.problem("risks", format!("item {i}: needs a \"description\" string"));
                        None
                    }
                },
            )
            .collect();
        if args.has_problems() {
            return Err(ToolError::validation(DEEP_PLANNING, args.into_problems()));
        }
        let body = match phase {
            "init" => Body::PlanInitialized(PlanInit {
                problem: problem.ok_or_else(|| refused("init requires a \"problem\" field"))?,
                context,
                constraints,
            }),
            "clarify" => Body::PlanClarified(Clarification {
                question: question
                    .ok_or_else(|| refused("clarify requires a \"question\" field"))?,
                answer,
            }),
            "explore" => {
                let (Some(branch_id), Some(name)) = (branch_id, name) else {
                    return Err(refused("explore requires \"branchId\" and \"name\""));
                };
                Body::ApproachExplored(Approach {
                    branch_id,
                    name,
                    description,
                    pros,
                    cons,
                })
            }
            "evaluate" => Body::BranchEvaluated(Evaluation {
                branch_id: branch_id.ok_or_else(|| refused("evaluate requires a \"branchId\""))?,
                score: weighted_score(&criteria),
                criteria,
                rationale,
                recommendation: Some(recommendation.unwrap_or("refine").to_string()),
            }),
            _ => Body::PlanFinalized(FinalPlan {
                selected_branch: selected
                    .ok_or_else(|| refused("finalize requires a \"selectedBranch\""))?,
                steps: steps
                    .iter()
                    .enumerate()
                    .map(|(i, step)| normalize_step(i + 1, step))
                    .collect(),
                risks,
                assumptions,
                success_criteria,
            }),
        };
        Ok(PlanArgs {
            phase,
            session_id: if phase == "init" { None } else { session_id },
            alias: if phase == "init" {
                new_plan_id()
            } else {
                String::new()
            },
            body,
            format,
        })
    }
}

/// A user's text, cut for a message.
fn describe_short(text: &str) -> String {
    let shown: String = text.chars().take(40).collect();
    if shown.len() < text.len() {
        format!("{shown}…")
    } else {
        shown
    }
}

/// Pure: the events one `deep_planning` call appends to the plan at `head` (`None`: no
/// session; init starts a new one), or why it is refused.
pub fn decide_planning(
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
    let current = summary.phase.as_deref();
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
            if summary.evaluated.contains(&e.branch_id) {
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
pub fn plan_id(session: SessionId, summary: &SessionSummary) -> String {
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
    let phase = summary.and_then(|s| s.phase.as_deref());
    json!({
        "sessionId": plan.map_or(String::new(), |(session, s)| plan_id(session, s)),
        "phase": phase.unwrap_or("none"),
        "status": status,
        "approachCount": summary.map_or(0, |s| s.branches.len()),
        "evaluationCount": summary.map_or(0, |s| s.evaluated.len()),
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

async fn deep_planning(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
    let args = match PlanArgs::parse(&call.arguments) {
        Ok(args) => args,
        Err(error) => return refusal(call.ctx.clone(), None, error).await,
    };
    // An unknown sessionId is named, said to be not found, and list_plans suggested.
    if let Some(id) = &args.session_id {
        let ledger = call.ctx.ledger.clone();
        let given = id.clone();
        if blocking(move || Ok(ledger.resolve(&given)?))
            .await?
            .is_none()
        {
            return refusal(
                call.ctx.clone(),
                None,
                refused(format!(
                    "Session \"{}\" not found; call list_plans to see stored plans",
                    describe_short(id)
                )),
            )
            .await;
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
        Err(error) => return refusal(call.ctx.clone(), args.session_id.as_deref(), error).await,
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
                summary.clarifications
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
            export::plan::json(&tree.planning).unwrap_or(Value::Null)
        } else {
            json!(export::plan::markdown(&tree.planning).unwrap_or_default())
        };
    }
    value["eventSeq"] = json!(recorded.seq);
    Ok(planning_result(value, false))
}

/// A refused deep_planning call, answered in its own shape (status "error") with the
/// state of the plan it was about; other failures stay tool errors.
async fn refusal(
    ctx: std::sync::Arc<super::ToolContext>,
    named: Option<&str>,
    error: ToolError,
) -> Result<CallToolResult, ToolError> {
    let ToolError::Validation { problems, .. } = &error else {
        return Err(error);
    };
    let message = problems.join("; ");
    let current = ctx
        .current
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(SessionKind::PLANNING, "");
    let ledger = ctx.ledger.clone();
    let named = named.map(str::to_string);
    // The plan's state as stored now (the refused call changed nothing).
    let head = blocking(move || {
        let session = match named {
            Some(id) => ledger.resolve(&id)?,
            None => current,
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

fn finish(tool: &str, args: Args<'_>) -> Result<(), ToolError> {
    if args.has_problems() {
        Err(ToolError::validation(tool, args.into_problems()))
    } else {
        Ok(())
    }
}

/// Folds every planning session (newest first) with its head.
fn plans(ledger: &Ledger) -> Result<Vec<(SessionHead, ThoughtTree)>, ToolError> {
    let mut heads: Vec<SessionHead> = ledger
        .heads()?
        .into_iter()
        .filter(|h| h.summary.kind == SessionKind::PLANNING)
        .collect();
    heads.sort_by_key(|h| std::cmp::Reverse((h.position, h.summary.updated_at, h.session)));
    heads
        .into_iter()
        .map(|head| {
            let tree = super::ledger::load_tree(ledger, &head, None)?;
            Ok((head, tree))
        })
        .collect()
}

/// `list_plans {status?, keyword?}` → `{count, plans: [...]}` newest first.
fn list_plans(ledger: &Ledger, raw: &Map<String, Value>) -> Result<CallToolResult, ToolError> {
    let mut args = Args::new(raw);
    let status = args.string_limited(&["status"], false, MAX_ID_BYTES);
    if let Some(s) = &status
        && s != "complete"
        && s != "in-progress"
    {
        args.problem(
            "status",
            format!(
                "unknown status {}; use complete or in-progress",
                describe_short(s)
            ),
        );
    }
    let keyword = args.string_limited(&["keyword"], false, MAX_ID_BYTES);
    finish(LIST_PLANS, args)?;
    let keyword = keyword
        .map(|k| k.trim().to_lowercase())
        .filter(|k| !k.is_empty());
    let mut rows = Vec::new();
    for (head, tree) in plans(ledger)? {
        let summary = &head.summary;
        let done = summary.phase.as_deref() == Some(PHASE_DONE);
        match status.as_deref() {
            Some("complete") if !done => continue,
            Some("in-progress") if done => continue,
            _ => {}
        }
        let Some(plan) = &tree.planning.plan else {
            continue;
        };
        if let Some(keyword) = &keyword {
            let hit = plan.init.problem.to_lowercase().contains(keyword)
                || plan
                    .approaches
                    .iter()
                    .any(|a| a.item.name.to_lowercase().contains(keyword));
            if !hit {
                continue;
            }
        }
        let mut row = json!({
            "sessionId": plan_id(head.session, summary),
            "problem": plan.init.problem,
            "phase": summary.phase.as_deref().unwrap_or("init"),
            "createdAt": format_time(summary.created_at),
            "updatedAt": format_time(summary.updated_at),
        });
        if let Some(selected) = &summary.selected_branch {
            row["selectedBranch"] = json!(selected);
        }
        rows.push(row);
    }
    Ok(structured_result(
        json!({"count": rows.len(), "plans": rows}),
    ))
}

/// `get_plan {sessionId, format?}` → the plan's document, or `found: false`.
fn get_plan(ledger: &Ledger, raw: &Map<String, Value>) -> Result<CallToolResult, ToolError> {
    let mut args = Args::new(raw);
    let id = args.string_limited(&["sessionId", "session_id"], true, MAX_ID_BYTES);
    let format = args.string_limited(&["format"], false, MAX_ID_BYTES);
    let format = match format.as_deref().map(str::trim) {
        None | Some("markdown") => "markdown",
        Some("json") => "json",
        Some("jsonl") => "jsonl",
        Some("mermaid") => "mermaid",
        Some(other) => {
            args.problem(
                "format",
                format!(
                    "unknown format {}; use markdown, json, jsonl or mermaid",
                    describe_short(other)
                ),
            );
            "markdown"
        }
    };
    finish(GET_PLAN, args)?;
    let id = id.expect("required");
    let head = match ledger.resolve(&id)? {
        Some(session) => ledger.head(session)?,
        None => None,
    };
    let Some(head) = head.filter(|h| h.summary.kind == SessionKind::PLANNING) else {
        return Ok(structured_result(json!({
            "found": false,
            "sessionId": id,
            "message": format!("Plan \"{}\" not found; call list_plans to see stored plans", describe_short(&id)),
        })));
    };
    let session_id = plan_id(head.session, &head.summary);
    let phase = head.summary.phase.clone().unwrap_or_default();
    let (text, plan) = match format {
        "jsonl" => {
            let events = ledger.events(head.session, 1, head.seq)?;
            (export::jsonl(&events), None)
        }
        _ => {
            let tree = super::ledger::load_tree(ledger, &head, None)?;
            match format {
                "json" => {
                    let plan = export::plan::json(&tree.planning).unwrap_or(Value::Null);
                    (
                        serde_json::to_string_pretty(&plan).expect("json"),
                        Some(plan),
                    )
                }
                "mermaid" => (export::plan::mermaid(&tree), None),
                _ => (
                    export::plan::markdown(&tree.planning).unwrap_or_default(),
                    None,
                ),
            }
        }
    };
    let mut value = json!({
        "found": true,
        "sessionId": session_id,
        "phase": phase,
        "format": format,
    });
    match plan {
        Some(plan) => value["plan"] = plan,
        None => value["text"] = json!(text),
    }
    let mut result = CallToolResult::success(vec![Content::text(text)]);
    result.structured_content = Some(value);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_ids_are_dp_and_8_base62() {
        let id = new_plan_id();
        assert_eq!(id.len(), 11, "{id}");
        assert!(id.starts_with("dp-"));
        assert!(id[3..].chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(new_plan_id(), id);
    }

    #[test]
    fn steps_normalise_with_aliases_canonical_first() {
        let step = |v: Value| normalize_step(3, v.as_object().unwrap());
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
