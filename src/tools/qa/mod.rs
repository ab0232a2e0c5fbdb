//! The qa toolset: `sequentialthinking_qa`, sequential thinking for verification work
//! that records each step and recommends the next one with tools chosen from the
//! caller's own (`specs/qa.md`).
//!
//! Owns: the family's registration ([`FAMILY`]), the tool's definition, argument parsing
//! ([`QaArgs`]: the thinking fields through [`thought_fields`], plus the verification
//! fields), the pure [`decide_step`] and the answer. Workflows and the recommendation
//! are in [`workflow`], the event and its folds in [`payload`]. Must not: rewrite what
//! the caller wrote (its thought and its step are recorded as given), write stdout, or
//! answer before the commit.

pub(crate) mod node;
pub(crate) mod payload;
pub(crate) mod picture;
pub(crate) mod workflow;

use super::args::{Args, MAX_ID_BYTES, boolean_schema, count_schema, describe, described};
use super::thinking::{Spelling, log_thought_box, starts_session, thought_fields};
use super::write::{Target, with_start};
use super::{
    CallFuture, Family, KindInfo, ToolError, structured_result, tool_definition,
    writing_annotations,
};
use crate::event::{CallRecord, NewEvent, SessionKind};
use crate::request::ToolCall;
use crate::store::SessionHead;
use crate::tools::thinking::SequentialThought;
pub(crate) use payload::{QaStep, QaStepRecorded, Step, ToolRecommendation};
use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex};
use workflow::{Available, Context, Workflows, recommend_step};

impl SessionKind {
    /// A `sequentialthinking_qa` session.
    pub(crate) const QA: SessionKind = SessionKind::new("qa");
}

/// The tool's name.
pub(crate) const QA_TOOL: &str = "sequentialthinking_qa";

/// Most tools `available_client_tools` may list.
pub(crate) const MAX_AVAILABLE_TOOLS: usize = 10_000;

/// Longest tool name accepted (in `available_client_tools` and in a step), in bytes.
pub(crate) const MAX_TOOL_NAME_BYTES: usize = MAX_ID_BYTES;

/// Most tools one step may recommend.
pub(crate) const MAX_STEP_TOOLS: usize = 64;

/// Most items of a step's lists (conditions, alternatives), of `remaining_steps`, and
/// steps in `previous_steps`.
pub(crate) const MAX_LIST_ITEMS: usize = 256;

/// Longest item of a list (a condition, an alternative, a remaining step), in bytes.
pub(crate) const MAX_ITEM_BYTES: usize = 4_096;

/// The qa family, as registered in [`super::FAMILIES`].
pub(crate) static FAMILY: Family = Family {
    name: "qa",
    instructions: "qa (verification steps; recommends next tools from the caller's own)",
    default_on: false,
    listing_budget_bytes: 1_440,
    tools,
    aliases: &[],
    call,
    asks_the_client: false,
    kinds: &[KindInfo {
        kind: SessionKind::QA,
        label: "QA session",
    }],
    codec: Some(&payload::QA_CODEC),
    folds: &[&crate::projection::tree::FoldOf::<payload::QaStepRecorded>::NEW],
    picture: Some(&picture::PICTURES),
    render: Some(&node::RENDER),
    prompts: &[],
    doctor: Some(&workflow::WORKFLOW_CHECK),
};

/// What the tool is for, what its answer recommends, and the two arguments whose use the
/// names do not say (the revision and branch fields are `sequentialthinking`'s, named as
/// they are). That a session persists and continues is said once for every tool, in the
/// server instructions.
const DESCRIPTION: &str = "Sequential thinking for verification (versions, syntax, compatibility, tests), one step per call. Send available_client_tools: answers recommend the next step (ranked tools, when to revise or branch) from them, flagging current_step tools outside them. Earlier steps are kept.";

/// A step's shape, with its bounds, said once in `current_step`'s description rather than
/// as a nested schema (which `previous_steps` would repeat): [`parse_step`] checks every
/// field of both, naming the path and the bound (`current_step.recommended_tools[0].
/// confidence: Too big: …`). `?` marks what may be left out.
const STEP_SHAPE: &str = "{step_description, expected_outcome, recommended_tools: [{tool_name, confidence 0-1, rationale, priority 1+, alternatives?, suggested_inputs?}], next_step_conditions}";

fn tools() -> Vec<Tool> {
    let text = json!({"type": "string"});
    let strings = json!({"type": "array", "items": text});
    let object = json!({"type": "object"});
    let input = json!({
        "type": "object",
        "properties": {
            "thought": text,
            "next_thought_needed": boolean_schema(),
            "thought_number": count_schema(),
            "total_thoughts": count_schema(),
            "is_revision": boolean_schema(),
            "revises_thought": count_schema(),
            "branch_from_thought": count_schema(),
            "branch_id": text,
            "needs_more_thoughts": boolean_schema(),
            "verification_target": text,
            // Names, or `{name, description}` objects: the schema says it.
            "available_client_tools": {"type": "array", "items": {"type": ["string", "object"], "required": ["name"]}},
            "current_step": described(object.clone(), STEP_SHAPE),
            "previous_steps": {"type": "array", "items": object},
            "remaining_steps": strings,
            "session_id": text
        },
        "required": ["thought", "next_thought_needed", "thought_number", "total_thoughts"]
    });
    vec![tool_definition(
        QA_TOOL,
        // No title: seed 003 has none, and one would only repeat the name.
        None,
        DESCRIPTION,
        input,
        None,
        writing_annotations(),
    )]
}

fn call(call: ToolCall) -> CallFuture {
    Box::pin(async move { call_qa(call).await.map(Into::into) })
}

/// A validated `sequentialthinking_qa` call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QaArgs {
    pub thought: SequentialThought,
    pub verification_target: Option<String>,
    /// The caller's tool names, when it sent them.
    pub available: Option<Vec<String>>,
    pub current_step: Option<Step>,
    pub previous_steps: Vec<Step>,
    pub remaining_steps: Vec<String>,
    pub session_id: Option<String>,
}

/// The first of `names` present in `raw`, with its value.
fn lookup<'a>(
    raw: &'a Map<String, Value>,
    names: &[&'static str],
) -> Option<(&'static str, &'a Value)> {
    super::args::note_read(names);
    names
        .iter()
        .find_map(|name| raw.get(*name).map(|value| (*name, value)))
}

/// A list of strings (a JSON array), each at most `max_bytes`.
fn strings(
    raw: &Map<String, Value>,
    names: &[&'static str],
    path: &str,
    max_bytes: usize,
    problems: &mut Vec<String>,
) -> Vec<String> {
    let Some((field, value)) = lookup(raw, names) else {
        return Vec::new();
    };
    let field = format!("{path}{field}");
    let Value::Array(items) = value else {
        problems.push(format!(
            "{field}: Invalid input: expected array of strings, received {}",
            describe(value)
        ));
        return Vec::new();
    };
    if items.len() > MAX_LIST_ITEMS {
        problems.push(format!(
            "{field}: Too big: expected at most {MAX_LIST_ITEMS} items, received {}",
            items.len()
        ));
        return Vec::new();
    }
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match item {
            Value::String(text) if text.len() <= max_bytes => out.push(text.clone()),
            Value::String(text) => problems.push(format!(
                "{field}[{index}]: Too big: expected string to have <={max_bytes} bytes, received {} bytes",
                text.len()
            )),
            other => problems.push(format!(
                "{field}[{index}]: Invalid input: expected string, received {}",
                describe(other)
            )),
        }
    }
    out
}

/// `available_client_tools` (or another server's name for it): names, or objects with a
/// `name` (and a description, which is read and not kept).
fn available_tools(raw: &Map<String, Value>, problems: &mut Vec<String>) -> Option<Vec<String>> {
    let (field, value) = lookup(
        raw,
        &[
            "available_client_tools",
            "availableClientTools",
            "available_mcp_tools",
            "availableMcpTools",
            "available_tools",
            "availableTools",
        ],
    )?;
    let Value::Array(items) = value else {
        problems.push(format!(
            "{field}: Invalid input: expected array of tool names or {{name, description}} objects, received {}",
            describe(value)
        ));
        return None;
    };
    if items.len() > MAX_AVAILABLE_TOOLS {
        problems.push(format!(
            "{field}: Too big: expected at most {MAX_AVAILABLE_TOOLS} tools, received {}; send the tools that matter for this verification",
            items.len()
        ));
        return None;
    }
    let before = problems.len();
    let mut names = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let name = match item {
            Value::String(name) => Some(name),
            Value::Object(object) => match object.get("name") {
                Some(Value::String(name)) => {
                    if let Some(description) = object.get("description")
                        && !description.is_string()
                    {
                        problems.push(format!(
                            "{field}[{index}].description: Invalid input: expected string, received {}",
                            describe(description)
                        ));
                    }
                    Some(name)
                }
                other => {
                    problems.push(format!(
                        "{field}[{index}].name: Invalid input: expected string, received {}",
                        other.map_or("undefined".into(), describe)
                    ));
                    None
                }
            },
            other => {
                problems.push(format!(
                    "{field}[{index}]: Invalid input: expected a tool name or {{name, description}}, received {}",
                    describe(other)
                ));
                None
            }
        };
        if let Some(name) = name {
            if name.trim().is_empty() {
                problems.push(format!("{field}[{index}]: a tool name must not be empty"));
            } else if name.len() > MAX_TOOL_NAME_BYTES {
                problems.push(format!(
                    "{field}[{index}]: Too big: expected a tool name of <={MAX_TOOL_NAME_BYTES} bytes, received {} bytes",
                    name.len()
                ));
            } else {
                names.push(name.clone());
            }
        }
        if problems.len() - before >= 10 {
            problems.push(format!("{field}: more problems not listed"));
            break;
        }
    }
    Some(names)
}

/// One step object (`current_step`, an item of `previous_steps`); problems are named by
/// `path` (`current_step.recommended_tools[0].confidence: …`).
fn parse_step(value: &Value, path: &str, problems: &mut Vec<String>) -> Option<Step> {
    let Value::Object(raw) = value else {
        problems.push(format!(
            "{path}: Invalid input: expected object, received {}",
            describe(value)
        ));
        return None;
    };
    let before = problems.len();
    let prefix = format!("{path}.");
    let mut args = Args::new(raw);
    let step_description = args.string(&["step_description", "stepDescription"], false);
    let expected_outcome = args.string(&["expected_outcome", "expectedOutcome"], false);
    problems.extend(
        args.into_problems()
            .into_iter()
            .map(|p| format!("{prefix}{p}")),
    );
    let next_step_conditions = strings(
        raw,
        &["next_step_conditions", "nextStepConditions"],
        &prefix,
        MAX_ITEM_BYTES,
        problems,
    );
    let mut tools = Vec::new();
    if let Some((field, value)) = lookup(raw, &["recommended_tools", "recommendedTools"]) {
        match value {
            Value::Array(items) if items.len() > MAX_STEP_TOOLS => problems.push(format!(
                "{prefix}{field}: Too big: expected at most {MAX_STEP_TOOLS} tools, received {}",
                items.len()
            )),
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    let item_path = format!("{prefix}{field}[{index}]");
                    if let Some(tool) = parse_tool(item, &item_path, problems) {
                        tools.push(tool);
                    }
                }
            }
            other => problems.push(format!(
                "{prefix}{field}: Invalid input: expected array, received {}",
                describe(other)
            )),
        }
    }
    if problems.len() > before {
        return None;
    }
    Some(Step {
        step_description: step_description.unwrap_or_default(),
        expected_outcome: expected_outcome.unwrap_or_default(),
        recommended_tools: tools,
        next_step_conditions,
        revise_when: Vec::new(),
        branch_when: Vec::new(),
    })
}

/// One recommended tool of a caller's step.
fn parse_tool(value: &Value, path: &str, problems: &mut Vec<String>) -> Option<ToolRecommendation> {
    let Value::Object(raw) = value else {
        problems.push(format!(
            "{path}: Invalid input: expected object, received {}",
            describe(value)
        ));
        return None;
    };
    let before = problems.len();
    let prefix = format!("{path}.");
    let mut args = Args::new(raw);
    let tool_name = args.string_limited(&["tool_name", "toolName"], true, MAX_TOOL_NAME_BYTES);
    let rationale = args.string(&["rationale"], true);
    let priority = args.integer(&["priority"], true, 1);
    problems.extend(
        args.into_problems()
            .into_iter()
            .map(|p| format!("{prefix}{p}")),
    );
    super::args::note_read(&["confidence"]);
    let confidence = match raw.get("confidence") {
        None => {
            problems.push(format!(
                "{prefix}confidence: Invalid input: expected number, received undefined"
            ));
            None
        }
        Some(Value::Number(n)) => match n.as_f64() {
            Some(c) if (0.0..=1.0).contains(&c) => Some(c),
            Some(c) if c > 1.0 => {
                problems.push(format!(
                    "{prefix}confidence: Too big: expected number to be <=1, received {n}"
                ));
                None
            }
            _ => {
                problems.push(format!(
                    "{prefix}confidence: Too small: expected number to be >=0, received {n}"
                ));
                None
            }
        },
        Some(other) => {
            problems.push(format!(
                "{prefix}confidence: Invalid input: expected number from 0 to 1, received {}",
                describe(other)
            ));
            None
        }
    };
    let alternatives = strings(raw, &["alternatives"], &prefix, MAX_ITEM_BYTES, problems);
    let suggested_inputs = match lookup(raw, &["suggested_inputs", "suggestedInputs"]) {
        None => None,
        Some((_, Value::Object(map))) => Some(Value::Object(map.clone())),
        Some((field, other)) => {
            problems.push(format!(
                "{prefix}{field}: Invalid input: expected object, received {}",
                describe(other)
            ));
            None
        }
    };
    if problems.len() > before {
        return None;
    }
    Some(ToolRecommendation {
        tool_name: tool_name?,
        confidence: confidence?,
        rationale: rationale?,
        priority: priority?,
        alternatives,
        suggested_inputs,
    })
}

impl QaArgs {
    /// Decodes the arguments with the coercion policy; every problem is reported at once.
    pub(crate) fn parse(tool: &str, raw: &Map<String, Value>) -> Result<Self, ToolError> {
        let mut args = Args::new(raw);
        let thought = thought_fields(&mut args, Spelling::Snake);
        let verification_target =
            args.string(&["verification_target", "verificationTarget"], false);
        let session_id = args.string_limited(&["session_id", "sessionId"], false, MAX_ID_BYTES);
        let mut problems = args.into_problems();
        let available = available_tools(raw, &mut problems);
        let current_step = lookup(raw, &["current_step", "currentStep"])
            .and_then(|(field, value)| parse_step(value, field, &mut problems));
        let mut previous_steps = Vec::new();
        if let Some((field, value)) = lookup(raw, &["previous_steps", "previousSteps"]) {
            match value {
                Value::Array(items) if items.len() > MAX_LIST_ITEMS => problems.push(format!(
                    "{field}: Too big: expected at most {MAX_LIST_ITEMS} steps, received {}",
                    items.len()
                )),
                Value::Array(items) => {
                    for (index, item) in items.iter().enumerate() {
                        if let Some(step) =
                            parse_step(item, &format!("{field}[{index}]"), &mut problems)
                        {
                            previous_steps.push(step);
                        }
                    }
                }
                other => problems.push(format!(
                    "{field}: Invalid input: expected array of steps, received {}",
                    describe(other)
                )),
            }
        }
        let remaining_steps = strings(
            raw,
            &["remaining_steps", "remainingSteps"],
            "",
            MAX_ITEM_BYTES,
            &mut problems,
        );
        if !problems.is_empty() {
            return Err(ToolError::validation(tool, problems));
        }
        Ok(QaArgs {
            thought: thought.expect("required fields are reported as problems when missing"),
            verification_target,
            available,
            current_step,
            previous_steps,
            remaining_steps,
            session_id,
        })
    }
}

/// What [`decide_step`] found: the recorded step and what only the answer shows.
#[derive(Clone, Debug)]
pub(crate) struct Decision {
    pub step: QaStep,
    /// Why the workflow was chosen.
    pub reason: String,
    /// The step this thought is at in the workflow (1-based).
    pub position: u64,
    /// The workflow's step for this position, when the caller sent no `current_step`.
    pub suggested_current: Option<Step>,
    /// The workflow's steps after the recommended one.
    pub workflow_remaining: Vec<String>,
}

/// Pure: routes the step to a workflow (by its thought and target, else by the session's
/// first step, the title of `head`), computes the recommended next step for its position
/// filtered by the caller's tools, and lists the caller's own tools it does not have.
/// `available` is [`QaArgs::available`] indexed ([`available_index`]), built before the
/// write so the writer thread does not.
pub(crate) fn decide_step(
    workflows: &Workflows,
    head: Option<&SessionHead>,
    args: &QaArgs,
    available: Option<&Available>,
) -> Decision {
    let thought = &args.thought;
    let title = head.map(|h| h.summary.title.as_str());
    let routed = workflows.route(&thought.thought, args.verification_target.as_deref(), title);
    let revises = thought.revision_of();
    // A revision redoes the step it revises; any other thought is at its own number.
    let position = revises.unwrap_or(thought.thought_number);
    let context = Context {
        available,
        revises,
        target: args.verification_target.as_deref(),
    };
    let template = routed.template;
    let suggested_current = args
        .current_step
        .is_none()
        .then(|| recommend_step(template, workflows.step_at(template, position), &context));
    let next = thought.next_thought_needed.then(|| {
        recommend_step(
            template,
            workflows.step_at(template, position.saturating_add(1)),
            &context,
        )
    });
    let mut invalid: Vec<String> = Vec::new();
    if let (Some(available), Some(step)) = (available, &args.current_step) {
        for tool in &step.recommended_tools {
            if available.find(&tool.tool_name).is_none() && !invalid.contains(&tool.tool_name) {
                invalid.push(tool.tool_name.clone());
            }
        }
    }
    Decision {
        step: QaStep {
            thought: thought.clone(),
            verification_target: args.verification_target.clone(),
            workflow: template.name.clone(),
            current_step: args.current_step.clone(),
            recommended_next_step: next,
            invalid_recommendations: invalid,
            remaining_steps: args.remaining_steps.clone(),
        },
        reason: routed.reason,
        position,
        suggested_current,
        workflow_remaining: Workflows::remaining_after(template, position.saturating_add(1)),
    }
}

/// The caller's tools as [`decide_step`] looks them up; an empty list says nothing about
/// them, so nothing is filtered then.
pub(crate) fn available_index(args: &QaArgs) -> Option<Available> {
    args.available
        .as_deref()
        .filter(|names| !names.is_empty())
        .map(Available::new)
}

/// The events one call appends (a new session gets its `session_started` first).
pub(crate) fn decide_events(
    head: Option<&SessionHead>,
    step: QaStep,
    call: CallRecord,
) -> Vec<NewEvent> {
    let title = step.thought.thought.clone();
    with_start(
        head,
        SessionKind::QA,
        &title,
        [QaStepRecorded { step, call }.into()],
    )
}

/// Handles one `sequentialthinking_qa` call: parse, load the workflows, decide and append
/// on the writer thread, answer after the commit.
pub(crate) async fn call_qa(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
    let args = QaArgs::parse(QA_TOOL, &call.arguments)?;
    let data_dir = call.ctx.data_dir().map(std::path::Path::to_path_buf);
    let workflows = tokio::task::spawn_blocking(move || Workflows::load(data_dir.as_deref()))
        .await
        .unwrap_or_else(|_| Workflows::built_in());
    let target = Target {
        kind: SessionKind::QA,
        field: "session_id",
        named: args.session_id.clone(),
        continue_key: (!starts_session(&args.thought)).then(String::new),
        remember_key: String::new(),
        idempotency_key: None,
    };
    let available = available_index(&args);
    let decided: Arc<Mutex<Option<Decision>>> = Arc::new(Mutex::new(None));
    let recorded = {
        let args = args.clone();
        let decided = decided.clone();
        let workflows = workflows.clone();
        call.record(target, move |head, record| {
            let decision = decide_step(&workflows, head, &args, available.as_ref());
            let step = decision.step.clone();
            *decided.lock().unwrap_or_else(|p| p.into_inner()) = Some(decision);
            decide_events(head, step, record)
        })
        .await?
    };
    let decision = decided
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .expect("the write job decided before it appended");
    if call.ctx.log_thoughts {
        log_thought_box(&args.thought);
    }
    let summary = &recorded.head.summary;
    let step = decision.step;
    let remaining = if step.remaining_steps.is_empty() {
        decision.workflow_remaining
    } else {
        step.remaining_steps.clone()
    };
    let mut answer = json!({
        "session_id": recorded.session.to_string(),
        "thought_number": step.thought.thought_number,
        "total_thoughts": step.thought.total_thoughts,
        "next_thought_needed": step.thought.next_thought_needed,
        "branches": summary.branches,
        "thought_history_length": summary.thoughts,
        "verification_target": step.verification_target,
        "workflow": {
            "name": step.workflow,
            "why": decision.reason,
            "position": decision.position,
        },
        "current_step": step.current_step.as_ref().or(decision.suggested_current.as_ref()),
        "recommended_next_step": step.recommended_next_step,
        "previous_steps_count": summary.thoughts.saturating_sub(1),
        "remaining_steps": remaining,
        "event_seq": recorded.seq,
    });
    let session = recorded.session.to_string();
    super::write::mark_started(&mut answer, &recorded, &session, "session_id");
    if !step.invalid_recommendations.is_empty() {
        answer["invalid_recommendations"] = json!(step.invalid_recommendations);
    }
    if !workflows.errors.is_empty() {
        answer["template_errors"] = json!(workflows.errors);
    }
    Ok(structured_result(answer))
}
