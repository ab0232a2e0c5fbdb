//! The agent toolset (specs/agent.md): `chat_agent` hands a self-contained sub-task to
//! another model; `create_branch` grows a persistent tree of branch nodes, each answered
//! by the model; `get_branch_details` reads a node's full answer back, after a restart
//! or from another process.
//!
//! Owns: the three tools' schemas, argument parsing, the caller's `session_id` strings
//! (kept as the ledger session's alias `agent:<session_id>`), the gatekeeper's order,
//! the answers and the structured error envelope. Models are reached through
//! [`crate::provider::Models`]; every model call, failed ones included, is recorded as a
//! `model_call_recorded` event with the node (if any) in the same commit; a call no model
//! could take (none configured) records nothing. Must not: hold the arrival turn across
//! a model call, or count a failed call against the quota.

pub(crate) mod node;
pub(crate) mod payload;
pub(crate) mod picture;
pub(crate) mod prompt;
pub(crate) mod read;
pub(crate) mod render;

use super::args::{Args, MAX_ID_BYTES, count_schema, count_schema_up_to, string_list_schema};
use super::write::{Target, title_of};
use super::{
    CallFuture, Family, KindInfo, ToolError, reading_annotations, structured_result,
    tool_definition,
};
use crate::event::{NewEvent, Payload, SessionKind};
use crate::provider::{
    CallOptions, ChatMessage, ChatRequest, Completion, ModelCallRecorded, ModelOutcome,
    ProviderError,
};
use crate::query::load_tree;
use crate::request::ToolCall;
use crate::store::{AppendError, Ledger, SessionHead};
use crate::tools::agent::node::{AgentNode, AgentNodes, AgentSummary, CallType, TRUNK};
use payload::{AGENT_CODEC, BranchNodeCreated};
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock as Content, Tool};
use serde_json::{Map, Value, json};
use std::sync::OnceLock;

impl SessionKind {
    /// A session of delegated model calls and branch nodes.
    pub(crate) const AGENT: SessionKind = SessionKind::new("agent");
}

pub(crate) const CHAT_AGENT: &str = "chat_agent";
pub(crate) const CREATE_BRANCH: &str = "create_branch";
pub(crate) const GET_BRANCH_DETAILS: &str = "get_branch_details";

/// Prefix of the alias a caller's `session_id` is kept under.
pub(crate) const ALIAS_PREFIX: &str = "agent:";

/// Environment variable overriding the node quota per session.
pub(crate) const NODE_QUOTA_ENV: &str = "REASONING_LEDGER_AGENT_NODE_QUOTA";

/// Largest `max_tokens` a `chat_agent` call may ask for.
pub(crate) const MAX_TOKENS_LIMIT: u64 = 384_000;

/// Defaults of `chat_agent`.
pub(crate) const DEFAULT_TEMPERATURE: f64 = 0.7;
pub(crate) const DEFAULT_TOP_P: f64 = 0.9;
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The agent family, as registered in [`super::FAMILIES`].
pub(crate) static FAMILY: Family = Family {
    name: "agent",
    instructions: "agent (hand self-contained sub-questions to another model; a persistent tree of branch nodes)",
    default_on: false,
    listing_budget_bytes: 1_690,
    tools,
    aliases: &[],
    call,
    asks_the_client: true,
    kinds: &[KindInfo {
        kind: SessionKind::AGENT,
        label: "Agent session",
    }],
    codec: Some(&AGENT_CODEC),
    folds: &[&crate::projection::tree::FoldOf::<payload::BranchNodeCreated>::NEW],
    picture: Some(&picture::PICTURES),
    render: Some(&render::RENDER),
    prompts: &[],
    doctor: None,
};

/// Environment variable choosing the suggestions' language: `zh` for the original's
/// Chinese texts, English otherwise.
pub(crate) const LANGUAGE_ENV: &str = "REASONING_LEDGER_AGENT_LANGUAGE";

/// The suggestions' language ([`LANGUAGE_ENV`]).
pub(crate) fn language() -> read::Language {
    static LANGUAGE: OnceLock<read::Language> = OnceLock::new();
    *LANGUAGE.get_or_init(|| match std::env::var(LANGUAGE_ENV) {
        Ok(v) if v.trim().to_ascii_lowercase().starts_with("zh") => read::Language::Chinese,
        _ => read::Language::English,
    })
}

/// The node quota: [`read::DEFAULT_NODE_QUOTA`] unless [`NODE_QUOTA_ENV`] says otherwise.
pub(crate) fn node_quota() -> u64 {
    static QUOTA: OnceLock<u64> = OnceLock::new();
    *QUOTA.get_or_init(|| {
        std::env::var(NODE_QUOTA_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|q| *q >= 1)
            .unwrap_or(read::DEFAULT_NODE_QUOTA)
    })
}

/// Schema of a number argument in `minimum..=maximum` (or its string). The bounds are
/// whole, written as JSON integers (`2`, not `2.0`: JSON Schema compares by value).
fn number_schema(minimum: u32, maximum: u32) -> Value {
    json!({"type": ["number", "string"], "minimum": minimum, "maximum": maximum})
}

fn tools() -> Vec<Tool> {
    // Appends to the ledger, destroys nothing, and reaches a model outside: open world,
    // which is MCP's default for `openWorldHint`, so only `destructiveHint` is sent.
    let writing = || rmcp::model::ToolAnnotations::new().destructive(false);
    vec![
        tool_definition(
            CHAT_AGENT,
            None,
            // The strategies of specs/agent.md (one list, not a description per argument; the
            // defaults a call gets without them are not needed to call it); an error's
            // envelope names its own `action`.
            "Delegate one self-contained subtask to a non-thinking model; input_text must hold all its context. Strategies (temperature, top_p, max_tokens): verification 0.1, 0.1, 2048, seed 42; exploration 1.2, 0.95, 4096; balanced 0.5, 0.8, 4096.",
            json!({"type": "object", "properties": {
                "input_text": {"type": "string"},
                "system_prompt": {"type": "string"},
                "temperature": number_schema(0, 2),
                "top_p": number_schema(0, 1),
                "max_tokens": count_schema_up_to(MAX_TOKENS_LIMIT),
                "stop": string_list_schema(),
                "seed": count_schema(),
                "session_id": {"type": "string"}
            }, "required": ["input_text"]}),
            None,
            writing(),
        ),
        tool_definition(
            CREATE_BRANCH,
            None,
            "A model answers one self-contained sub-question (30+ chars, never the whole task) as a node (conclusion, confidence). call_type: drill_down (default), verify (a claim), explore (other angles), stash (a note). parent_node_id: trunk (default) or a node id. Up to 16 nodes per session_id (a name you choose); then integrate the conclusions.",
            json!({"type": "object", "properties": {
                "session_id": {"type": "string"},
                "input_text": {"type": "string"},
                "call_type": {"type": "string"},
                "parent_node_id": {"type": "string"}
            }, "required": ["session_id", "input_text"]}),
            None,
            writing(),
        ),
        tool_definition(
            GET_BRANCH_DETAILS,
            None,
            "The full model output (raw_process) of a branch node.",
            json!({"type": "object", "properties": {
                "session_id": {"type": "string"},
                "node_id": {"type": "string"}
            }, "required": ["session_id", "node_id"]}),
            None,
            reading_annotations(),
        ),
    ]
}

fn call(call: ToolCall) -> CallFuture {
    Box::pin(async move {
        match call.name.as_str() {
            CHAT_AGENT => chat_agent(call).await,
            CREATE_BRANCH => create_branch(call).await,
            _ => get_branch_details(call).await,
        }
    })
}

/// An error answer: `isError: true`, the envelope as JSON text.
fn envelope_result(envelope: Value) -> CallToolResponse {
    let text = serde_json::to_string_pretty(&envelope).expect("json");
    let mut result = CallToolResult::error(vec![Content::text(text)]);
    result.structured_content = None;
    result.into()
}

/// The validation envelope: `{success: false, type: "validation", action: "fix_input",
/// message, errors: ["path: message"]}`.
fn validation(tool: &str, errors: Vec<String>) -> CallToolResponse {
    envelope_result(json!({
        "success": false,
        "type": "validation",
        "action": "fix_input",
        "message": ToolError::validation(tool, errors.clone()).to_string(),
        "errors": errors,
    }))
}

/// A number argument in `min..=max` (JSON number or numeric string).
fn number(
    args: &mut Args<'_>,
    raw: &Map<String, Value>,
    name: &'static str,
    min: f64,
    max: f64,
) -> Option<f64> {
    super::args::note_read(&[name]);
    let value = raw.get(name)?;
    let parsed = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match parsed {
        Some(v) if v.is_finite() && (min..=max).contains(&v) => Some(v),
        Some(v) => {
            args.problem(
                name,
                format!("Out of range: expected a number from {min} to {max}, received {v}"),
            );
            None
        }
        None => {
            args.problem(
                name,
                format!(
                    "Invalid input: expected a number from {min} to {max}, received {}",
                    super::args::describe(value)
                ),
            );
            None
        }
    }
}

/// The ledger session a caller's `session_id` names: its alias, or a ledger session id
/// of an agent session.
fn find_session(ledger: &Ledger, session_id: &str) -> Result<Option<SessionHead>, ToolError> {
    let alias = format!("{ALIAS_PREFIX}{session_id}");
    let found = match ledger.resolve(&alias)? {
        Some(session) => Some(session),
        None => ledger.resolve(session_id)?,
    };
    let Some(session) = found else {
        return Ok(None);
    };
    Ok(ledger
        .head(session)?
        .filter(|head| head.summary.kind == SessionKind::AGENT))
}

async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, ToolError> + Send + 'static,
) -> Result<R, ToolError> {
    tokio::task::spawn_blocking(super::args::carry(f))
        .await
        .map_err(|e| ToolError::Panicked {
            tool: "agent read".into(),
            message: e.to_string(),
        })?
}

/// The events of one call: `session_started` (with the caller's alias) when the session
/// is new, then `payloads`.
fn events(
    head: Option<&SessionHead>,
    session_id: Option<&str>,
    title_source: &str,
    payloads: Vec<Payload>,
) -> Vec<NewEvent> {
    let mut events = Vec::with_capacity(payloads.len() + 1);
    if head.is_none() {
        events.push(NewEvent::new(Payload::SessionStarted {
            kind: SessionKind::AGENT,
            title: title_of(title_source),
            aliases: session_id
                .map(|id| vec![format!("{ALIAS_PREFIX}{id}")])
                .unwrap_or_default(),
        }));
    }
    events.extend(payloads.into_iter().map(NewEvent::new));
    events
}

/// Where a call records: the caller's session (existing, or new under its alias), else
/// the process's current agent session.
fn target(session_id: Option<&str>, existing: Option<&SessionHead>, key: Option<String>) -> Target {
    Target {
        kind: SessionKind::AGENT,
        field: "session_id",
        named: existing.map(|h| h.session.to_string()),
        continue_key: if session_id.is_none() {
            Some(String::new())
        } else {
            None
        },
        remember_key: String::new(),
        idempotency_key: key,
    }
}

/// Records `outcome` (and the node `node`, built from the answer, when there is one) in
/// the caller's session. A first use of a `session_id` that another call created at the
/// same moment is retried once into that session. The quota is checked again inside the
/// write (parallel calls on one session passed the gatekeeper together): a node over it
/// is not recorded, its model call is, and the second value says so.
async fn record_outcome(
    call: &mut ToolCall,
    session_id: Option<String>,
    existing: Option<SessionHead>,
    outcome: &ModelOutcome,
    title_source: String,
    node: Option<AgentNode>,
    quota: u64,
) -> Result<(super::write::Recorded, bool), ToolError> {
    let arguments = call.arguments.clone();
    let mut existing = existing;
    let over_quota = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for round in 0..2 {
        call.arguments = arguments.clone();
        let record = outcome.record.clone();
        let node = node.clone();
        let over = over_quota.clone();
        let title = title_source.clone();
        let alias = session_id.clone();
        let target = target(
            session_id.as_deref(),
            existing.as_ref(),
            outcome.idempotency_key.clone(),
        );
        let result = call
            .record(target, move |head, call_record| {
                let mut payloads: Vec<Payload> = vec![
                    ModelCallRecorded {
                        record,
                        call: call_record.clone(),
                    }
                    .into(),
                ];
                let full = head.is_some_and(|h| AgentSummary::nodes(&h.summary) >= quota);
                if node.is_some() && full {
                    over.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                if let Some(node) = node.filter(|_| !full) {
                    payloads.push(
                        BranchNodeCreated {
                            node,
                            call: call_record,
                        }
                        .into(),
                    );
                }
                events(head, alias.as_deref(), &title, payloads)
            })
            .await;
        match result {
            Err(ToolError::Append(AppendError::AliasTaken { .. })) if round == 0 => {
                let ledger = call.ctx.ledger.clone();
                let id = session_id.clone().unwrap_or_default();
                existing = blocking(move || find_session(&ledger, &id)).await?;
            }
            other => {
                return other.map(|recorded| {
                    (
                        recorded,
                        over_quota.load(std::sync::atomic::Ordering::SeqCst),
                    )
                });
            }
        }
    }
    unreachable!("the second round returns")
}

/// The model's answer, or the input-required round to hand back.
async fn ask(call: &mut ToolCall, chat: &ChatRequest) -> Result<ModelOutcome, CallToolResponse> {
    // Never hold the connection's write order across a model call.
    call.request.turn.release();
    let models = call.ctx.models.clone();
    match models
        .complete(
            &call.name,
            &call.arguments,
            &call.request,
            chat,
            &CallOptions::default(),
        )
        .await
    {
        Completion::InputRequired(result) => Err(CallToolResponse::InputRequired(*result)),
        Completion::Done(outcome) => Ok(*outcome),
    }
}

/// The answer to a call no model could take (none configured, no sampling offered): the
/// `config` error, recording nothing, so a failing call leaves no empty session behind.
fn unconfigured(outcome: &ModelOutcome, session: Option<&str>) -> Option<CallToolResponse> {
    match &outcome.result {
        Err(error @ ProviderError::Config { .. }) => Some(provider_error(error, session)),
        _ => None,
    }
}

fn provider_error(error: &ProviderError, session: Option<&str>) -> CallToolResponse {
    let mut envelope = error.envelope();
    if let Some(session) = session {
        envelope["session_id"] = json!(session);
    }
    envelope_result(envelope)
}

async fn chat_agent(mut call: ToolCall) -> Result<CallToolResponse, ToolError> {
    let raw = call.arguments.clone();
    let mut args = Args::new(&raw);
    let input_text = args.string(&["input_text"], true);
    let system_prompt = args.string(&["system_prompt"], false);
    let stop = args.string_list(&["stop"]).unwrap_or_default();
    let max_tokens = args.integer(&["max_tokens"], false, 1);
    let session_id = args.string_limited(&["session_id"], false, MAX_ID_BYTES);
    let temperature = number(&mut args, &raw, "temperature", 0.0, 2.0);
    let top_p = number(&mut args, &raw, "top_p", 0.0, 1.0);
    let seed = args
        .integer(&["seed"], false, 1)
        .map(|s| s.min(i64::MAX as u64) as i64);
    if let Some(m) = max_tokens.filter(|m| *m > MAX_TOKENS_LIMIT) {
        args.problem(
            "max_tokens",
            format!("Too big: expected at most {MAX_TOKENS_LIMIT}, received {m}"),
        );
    }
    if input_text.as_deref().is_some_and(|t| t.trim().is_empty()) {
        args.problem(
            "input_text",
            "must not be empty: give the complete, self-contained task",
        );
    }
    if args.has_problems() {
        return Ok(validation(CHAT_AGENT, args.into_problems()));
    }
    let input_text = input_text.expect("required");
    let existing = match session_id.clone() {
        Some(id) => {
            let ledger = call.ctx.ledger.clone();
            blocking(move || find_session(&ledger, &id)).await?
        }
        None => None,
    };
    let chat = ChatRequest {
        system: system_prompt.filter(|s| !s.trim().is_empty()),
        messages: vec![ChatMessage::user(input_text.clone())],
        temperature: Some(temperature.unwrap_or(DEFAULT_TEMPERATURE)),
        top_p: Some(top_p.unwrap_or(DEFAULT_TOP_P)),
        max_tokens: Some(max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        stop,
        seed,
    };
    let outcome = match ask(&mut call, &chat).await {
        Ok(outcome) => outcome,
        Err(input_required) => return Ok(input_required),
    };
    if let Some(refused) = unconfigured(&outcome, session_id.as_deref()) {
        return Ok(refused);
    }
    let (recorded, _) = record_outcome(
        &mut call,
        session_id.clone(),
        existing,
        &outcome,
        input_text,
        None,
        u64::MAX,
    )
    .await?;
    let shown_session = session_id.unwrap_or_else(|| recorded.session.to_string());
    match outcome.result {
        Err(error) => Ok(provider_error(&error, Some(&shown_session))),
        Ok(response) => {
            let mut answer = json!({
            "success": true,
            "content": response.content,
            "finish_reason": response.finish_reason,
            "usage": response.usage.map(|u| json!({
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "total_tokens": u.total_tokens,
            })),
            "model": response.model,
            "hint": "For a question worth several angles, use create_branch (drill_down, verify, explore) to build a tree of sub-answers.",
            "session_id": shown_session,
            "ledger_session_id": recorded.session.to_string(),
            "event_seq": recorded.seq,
            });
            super::write::mark_started(&mut answer, &recorded, &shown_session, "session_id");
            Ok(structured_result(answer).into())
        }
    }
}

/// A new node id: "n_" + 8 hex digits, not used in the session yet; derived from the
/// round's key when there is one, so a replayed round names the node it recorded.
fn new_node_id(key: Option<&str>, taken: &[String]) -> String {
    if let Some(key) = key {
        let digest = blake3::hash(key.as_bytes());
        let bits = u32::from_be_bytes(digest.as_bytes()[..4].try_into().expect("4 bytes"));
        return format!("n_{bits:08x}");
    }
    loop {
        let id = format!("n_{:08x}", ulid::Ulid::generate().random() as u32);
        if !taken.contains(&id) {
            return id;
        }
    }
}

async fn create_branch(mut call: ToolCall) -> Result<CallToolResponse, ToolError> {
    let raw = call.arguments.clone();
    let mut args = Args::new(&raw);
    let session_id = args.string_limited(&["session_id"], true, MAX_ID_BYTES);
    let input_text = args.string(&["input_text"], true);
    let call_type = args
        .string_limited(&["call_type"], false, MAX_ID_BYTES)
        .map_or(CallType::DrillDown, |t| CallType::parse_or_default(&t));
    let parent = args
        .string_limited(&["parent_node_id"], false, MAX_ID_BYTES)
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| TRUNK.to_string());
    if session_id.as_deref().is_some_and(|s| s.trim().is_empty()) {
        args.problem(
            "session_id",
            "must not be empty: name the reasoning session",
        );
    }
    if args.has_problems() {
        return Ok(validation(CREATE_BRANCH, args.into_problems()));
    }
    let (session_id, input_text) = (session_id.expect("required"), input_text.expect("required"));
    let ledger = call.ctx.ledger.clone();
    let lookup = session_id.clone();
    let (existing, nodes) = blocking(move || {
        let head = find_session(&ledger, &lookup)?;
        let nodes: Vec<String> = match &head {
            Some(head) => AgentNodes::of(&load_tree(&ledger, head, None)?)
                .iter()
                .map(|n| n.node.node_id.clone())
                .collect(),
            None => Vec::new(),
        };
        Ok((head, nodes))
    })
    .await?;
    let quota = node_quota();
    if let Some((field, problem)) = read::gatekeeper(&input_text, nodes.len() as u64, quota) {
        return Ok(validation(
            CREATE_BRANCH,
            vec![format!("{field}: {problem}")],
        ));
    }
    let parent = parent.trim().to_string();
    if parent != TRUNK && !nodes.contains(&parent) {
        let known = if nodes.is_empty() {
            "the session has no nodes yet".to_string()
        } else {
            format!("its nodes are {}", nodes.join(", "))
        };
        return Ok(validation(
            CREATE_BRANCH,
            vec![format!(
                "parent_node_id: no node {parent:?} in session {session_id:?} ({known}); use \"trunk\" or one of its node ids"
            )],
        ));
    }
    let (temperature, top_p, max_tokens) = read::strategy(call_type);
    let chat = ChatRequest {
        system: Some(read::BRANCH_SYSTEM_PROMPT.to_string()),
        messages: vec![ChatMessage::user(format!(
            "{}\n\n{input_text}",
            read::branch_instruction(call_type)
        ))],
        temperature: Some(temperature),
        top_p: Some(top_p),
        max_tokens: Some(max_tokens),
        stop: Vec::new(),
        seed: None,
    };
    let outcome = match ask(&mut call, &chat).await {
        Ok(outcome) => outcome,
        Err(input_required) => return Ok(input_required),
    };
    if let Some(refused) = unconfigured(&outcome, Some(&session_id)) {
        return Ok(refused);
    }
    let node = outcome.result.as_ref().ok().map(|response| {
        let raw_process = response.content.clone();
        let confidence = read::confidence(&raw_process);
        AgentNode {
            node_id: new_node_id(outcome.idempotency_key.as_deref(), &nodes),
            parent_node_id: parent.clone(),
            call_type,
            input_text: input_text.clone(),
            conclusion: read::conclusion(&raw_process),
            confidence,
            raw_process,
            model: response.model.clone(),
        }
    });
    let (recorded, over_quota) = record_outcome(
        &mut call,
        Some(session_id.clone()),
        existing,
        &outcome,
        input_text.clone(),
        node.clone(),
        quota,
    )
    .await?;
    if over_quota {
        // Another call took the last node while this one asked the model.
        let (field, problem) = read::gatekeeper(&input_text, quota, quota).expect("over quota");
        return Ok(validation(
            CREATE_BRANCH,
            vec![format!("{field}: {problem}")],
        ));
    }
    let (Ok(_), Some(node)) = (&outcome.result, node) else {
        let error = outcome.result.expect_err("no node without an error");
        return Ok(provider_error(&error, Some(&session_id)));
    };
    let remaining = quota.saturating_sub(AgentSummary::nodes(&recorded.head.summary));
    Ok(structured_result(json!({
        "status": "success",
        "node_id": node.node_id,
        "conclusion": node.conclusion,
        "confidence": node.confidence,
        "remaining_quota": remaining,
        "suggestions": read::suggestions_in(language(), call_type, node.confidence, remaining),
        "session_id": session_id,
        "parent_node_id": node.parent_node_id,
        "ledger_session_id": recorded.session.to_string(),
        "event_seq": recorded.seq,
    }))
    .into())
}

async fn get_branch_details(call: ToolCall) -> Result<CallToolResponse, ToolError> {
    let raw = call.arguments.clone();
    let ledger = call.ctx.ledger.clone();
    // A read gives its turn up at once.
    drop(call);
    let mut args = Args::new(&raw);
    let session_id = args.string_limited(&["session_id"], true, MAX_ID_BYTES);
    let node_id = args.string_limited(&["node_id"], true, MAX_ID_BYTES);
    if args.has_problems() {
        return Ok(validation(GET_BRANCH_DETAILS, args.into_problems()));
    }
    let (session_id, node_id) = (session_id.expect("required"), node_id.expect("required"));
    let (lookup, wanted) = (session_id.clone(), node_id.clone());
    let found = blocking(move || {
        let Some(head) = find_session(&ledger, &lookup)? else {
            return Ok(None);
        };
        let tree = load_tree(&ledger, &head, None)?;
        Ok(AgentNodes::of(&tree)
            .iter()
            .find(|n| n.node.node_id == wanted.trim())
            .cloned())
    })
    .await?;
    Ok(match found {
        Some(folded) => structured_result(json!({
            "status": "success",
            "node_id": folded.node.node_id,
            "raw_process": folded.node.raw_process,
            "session_id": session_id,
            "parent_node_id": folded.node.parent_node_id,
            "call_type": folded.node.call_type,
            "event_seq": folded.seq,
        }))
        .into(),
        None => envelope_result(json!({
            "success": false,
            "type": "not_found",
            "action": "report",
            "message": "Node not found.",
            "session_id": session_id,
            "node_id": node_id,
        })),
    })
}
