//! The booster toolset (`specs/booster.md`): a best-of-N reasoning orchestrator. Each
//! iteration generates K candidate next steps (configured HTTP model, else the client's
//! sampling, else heuristics), scores them with the verifier, picks one (best-of-N, or a
//! shallow beam when improvement stalls), applies it to the scratchpad and checks for
//! stagnation and loops — every candidate set, score, choice, beam, backtrack and model
//! call recorded as events, so state survives restarts and a solve can be replayed.
//!
//! Owns: the family's registration ([`FAMILY`]), its tools' definitions, argument
//! parsing, the call flow (load the folded state, generate, [`engine::decide_iteration`],
//! record each iteration in its own commit, progress, cancellation) and the answers.
//! Submodules: [`config`], [`verifier`] (the scoring seam), [`candidates`] (parse chain,
//! filter, heuristics), [`generate`] (the model seam), [`engine`] (pure iteration),
//! [`payload`] (events, codec, folds), [`picture`] (what the SVG and HTML draw) and
//! [`output`] (`outputPath`). Must not: keep
//! sessions in memory, or answer before the events are committed.

pub mod candidates;
pub mod config;
pub mod engine;
pub mod generate;
pub mod output;
pub mod payload;
pub mod picture;
pub mod verifier;

use super::args::{
    Args, MAX_ID_BYTES, boolean_schema, count_schema, count_schema_up_to, string_list_schema,
};
use super::write::{Recorded, Target, with_start};
use super::{
    CallFuture, Family, KindInfo, ToolError, reading_annotations, structured_result,
    tool_definition, writing_annotations,
};
use crate::event::{CallRecord, NewEvent, Payload, SessionKind};
use crate::projection::booster::{BoosterState, Iteration, Started};
use crate::projection::tree::ThoughtTree;
use crate::provider::{ModelCallRecord, ModelCallRecorded};
use crate::request::ToolCall;
use crate::store::{Ledger, SessionHead};
use config::{Config, MAX_CANDIDATES, parse_config};
use generate::Generation;
use payload::{Body, BoosterEvent, Hints};
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock as Content, Tool};
use serde_json::{Map, Value, json};
use verifier::ReferenceVerifier;

impl SessionKind {
    /// A booster session.
    pub const BOOSTER: SessionKind = SessionKind::new("booster");
}

pub const USAGE: &str = "usage";
pub const START: &str = "start";
pub const STEP: &str = "step";
pub const MULTI_STEP: &str = "multi-step";
pub const GET_STATE: &str = "get-state";
pub const SUMMARIZE: &str = "summarize";
pub const SOLVE: &str = "solve";
pub const SOLVE_TEXT: &str = "solve-text";

/// Longest task accepted, in bytes (it is in every prompt).
pub const MAX_TASK_BYTES: usize = 16 * 1024;
/// Most hints one call may add.
pub const MAX_HINTS: usize = 16;
/// `solve`'s default iterations.
pub const SOLVE_DEFAULT_ITERATIONS: u64 = 8;
/// Characters of the chosen step in a progress message.
pub const PROGRESS_TEXT_CHARS: usize = 80;

/// The booster family, as registered in [`super::FAMILIES`].
pub static FAMILY: Family = Family {
    name: "booster",
    instructions: "booster (best-of-N step search with a verifier: solve a task in scored steps)",
    default_on: false,
    listing_budget_bytes: 3_100,
    tools,
    aliases: &[],
    call,
    kinds: &[KindInfo {
        kind: SessionKind::BOOSTER,
        label: "Booster session",
    }],
    codec: Some(&payload::BOOSTER_CODEC),
    picture: Some(&picture::PICTURES),
};

/// The tools of this family, as listed (`usage` first).
pub fn tools() -> Vec<Tool> {
    let text = json!({"type": "string"});
    let config = json!({"type": ["object", "string"]});
    let hints = string_list_schema();
    let count = count_schema();
    let candidates = count_schema_up_to(MAX_CANDIDATES);
    let solve_schema = json!({"type": "object", "properties": {
        "task": text, "iterations": count, "config": config, "seedHints": hints,
        "outputPath": text, "outputFormat": {"type": "string", "enum": ["json", "text"]},
        "overwrite": boolean_schema()
    }, "required": ["task"]});
    let session =
        json!({"type": "object", "properties": {"sessionId": text}, "required": ["sessionId"]});
    vec![
        tool_definition(
            USAGE,
            None,
            "How to use the booster tools (topic: solve, step, config, output).",
            json!({"type": "object", "properties": {"topic": text}}),
            None,
            reading_annotations(),
        ),
        tool_definition(
            START,
            None,
            "Start a booster session for a task. Config keys: see usage.",
            json!({"type": "object", "properties": {"task": text, "config": config, "seedHints": hints}, "required": ["task"]}),
            None,
            writing_annotations(),
        ),
        tool_definition(
            STEP,
            None,
            "One iteration: K candidates scored, the best applied.",
            json!({"type": "object", "properties": {"sessionId": text, "overrideNumCandidates": candidates, "addHints": hints}, "required": ["sessionId"]}),
            None,
            writing_annotations(),
        ),
        tool_definition(
            MULTI_STEP,
            None,
            "Run several iterations (default 1); progress per iteration.",
            json!({"type": "object", "properties": {"sessionId": text, "iterations": count, "overrideNumCandidates": candidates, "addHints": hints}, "required": ["sessionId"]}),
            None,
            writing_annotations(),
        ),
        tool_definition(
            GET_STATE,
            None,
            "A session's state, config, history of choices and diagnostics.",
            session.clone(),
            None,
            reading_annotations(),
        ),
        tool_definition(
            SUMMARIZE,
            None,
            "A session's summary: the task and its last distinct steps.",
            session,
            None,
            reading_annotations(),
        ),
        tool_definition(
            SOLVE,
            None,
            "Recommended: start, iterate (default 8), summarize; outputPath writes in the export directory.",
            solve_schema.clone(),
            None,
            writing_annotations(),
        ),
        tool_definition(
            SOLVE_TEXT,
            None,
            "solve, answering with the summary text first.",
            solve_schema,
            None,
            writing_annotations(),
        ),
    ]
}

fn call(call: ToolCall) -> CallFuture {
    Box::pin(async move {
        match call.name.as_str() {
            USAGE => usage(&call).map(Into::into),
            START => start(call).await.map(Into::into),
            STEP | MULTI_STEP => step(call).await,
            GET_STATE | SUMMARIZE => read(call).await.map(Into::into),
            SOLVE | SOLVE_TEXT => solve(call).await.map(Into::into),
            other => Err(ToolError::validation(
                other,
                vec![format!("unknown tool {other:?} in the booster toolset")],
            )),
        }
    })
}

// ---- arguments ----

fn finish(tool: &str, args: Args<'_>) -> Result<(), ToolError> {
    if args.has_problems() {
        return Err(ToolError::validation(tool, args.into_problems()));
    }
    Ok(())
}

fn hints_arg(args: &mut Args<'_>, names: &[&'static str]) -> Vec<String> {
    let hints = args.string_list(names).unwrap_or_default();
    let hints: Vec<String> = hints
        .into_iter()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .collect();
    if hints.len() > MAX_HINTS {
        args.problem(names[0], format!("Too big: at most {MAX_HINTS} hints"));
    }
    if hints
        .iter()
        .any(|h| h.chars().count() > candidates::MAX_STEP_CHARS)
    {
        args.problem(
            names[0],
            format!(
                "a hint is a step: at most {} characters each",
                candidates::MAX_STEP_CHARS
            ),
        );
    }
    hints
}

fn task_arg(args: &mut Args<'_>) -> Option<String> {
    let task = args.string_limited(&["task"], true, MAX_TASK_BYTES);
    if task.as_deref().is_some_and(|t| t.trim().is_empty()) {
        args.problem("task", "Too small: expected a non-empty task");
    }
    task.map(|t| t.trim().to_string())
}

fn config_arg(args: &mut Args<'_>, raw: &Map<String, Value>) -> Config {
    match parse_config(raw.get("config")) {
        Ok(config) => config,
        Err(problems) => {
            for problem in problems {
                let (field, message) = problem.split_once(": ").unwrap_or(("config", &problem));
                args.problem(field, message);
            }
            Config::default()
        }
    }
}

fn candidates_arg(args: &mut Args<'_>) -> Option<u64> {
    let k = args.integer(&["overrideNumCandidates"], false, 1)?;
    if k > MAX_CANDIDATES {
        args.problem(
            "overrideNumCandidates",
            format!("Too big: expected number to be <={MAX_CANDIDATES}"),
        );
        return None;
    }
    Some(k)
}

// ---- reading a session ----

/// A booster session's head and fold, read off the async workers.
async fn load(
    ledger: &Ledger,
    tool: &str,
    given: &str,
) -> Result<(SessionHead, ThoughtTree), ToolError> {
    let ledger = ledger.clone();
    let given_text = given.to_string();
    let tool_name = tool.to_string();
    tokio::task::spawn_blocking(move || -> Result<_, ToolError> {
        let unknown = || {
            ToolError::validation(
                &tool_name,
                vec![format!(
                    "sessionId: no booster session {given_text:?} in the ledger; call start or solve to begin one, or list_sessions (kind booster) to find one"
                )],
            )
        };
        let session = ledger.resolve(&given_text)?.ok_or_else(unknown)?;
        let head = ledger.head(session)?.ok_or_else(unknown)?;
        if head.summary.kind != SessionKind::BOOSTER {
            return Err(ToolError::validation(
                &tool_name,
                vec![format!(
                    "sessionId: session {} is a {} session, not a booster session",
                    head.session,
                    head.summary.kind.as_str()
                )],
            ));
        }
        let tree = super::ledger::load_tree(&ledger, &head, None)?;
        if tree.booster.is_none() {
            return Err(unknown());
        }
        Ok((head, tree))
    })
    .await
    .map_err(|e| ToolError::Panicked {
        tool: tool.to_string(),
        message: e.to_string(),
    })?
}

async fn reload(
    ledger: &Ledger,
    tool: &str,
    recorded: &Recorded,
) -> Result<ThoughtTree, ToolError> {
    let ledger = ledger.clone();
    let head = recorded.head.clone();
    tokio::task::spawn_blocking(move || super::ledger::load_tree(&ledger, &head, None))
        .await
        .map_err(|e| ToolError::Panicked {
            tool: tool.to_string(),
            message: e.to_string(),
        })?
        .map_err(ToolError::from)
}

fn booster(tree: &ThoughtTree) -> &BoosterState {
    tree.booster
        .as_deref()
        .expect("a loaded booster session has its state")
}

// ---- answers ----

fn steps_json(state: &BoosterState) -> Value {
    json!(state.steps)
}

fn state_json(state: &BoosterState) -> Value {
    json!({
        "task": state.task,
        "steps": steps_json(state),
        "hints": state.hints,
        "iterations": state.iteration_count(),
        "backtracks": state.backtracks,
    })
}

fn history_json(state: &BoosterState) -> Value {
    let top = state.config.top_m as usize;
    let entries: Vec<Value> = state
        .iterations
        .iter()
        .map(|it: &Iteration| {
            let mut entry = json!({
                "iteration": it.iteration,
                "chosen": it.chosen.as_ref().map(|c| json!({"proposal": c.proposal, "score": c.score, "via": c.via})),
                "candidates": it.candidates.iter().take(top).collect::<Vec<_>>(),
                "source": it.source,
            });
            if let Some(model) = &it.model_output {
                entry["model"] = json!(model);
            }
            if let Some(beam) = &it.beam {
                entry["beam"] = json!(beam);
            }
            if let Some(check) = &it.loop_check {
                entry["loopCheck"] = json!(check);
                entry["backtracked"] = json!(it.backtracked);
            }
            entry
        })
        .collect();
    json!(entries)
}

fn diagnostics_json(tree: &ThoughtTree) -> (Value, Vec<String>) {
    let (diagnostics, picks) = booster(tree).diagnostics.sampled(&tree.model_calls);
    (json!(diagnostics), picks)
}

fn solve_json(tree: &ThoughtTree) -> Value {
    let state = booster(tree);
    let (diagnostics, picks) = diagnostics_json(tree);
    json!({
        "sessionId": tree.session.to_string(),
        "summary": state.summary(),
        "arbiterPicks": picks,
        "steps": steps_json(state),
        "hints": state.hints,
        "config": state.config,
        "diagnostics": diagnostics,
    })
}

// ---- usage ----

const TOPICS: [&str; 4] = ["solve", "step", "config", "output"];

fn usage(call: &ToolCall) -> Result<CallToolResult, ToolError> {
    let mut args = Args::new(&call.arguments);
    let topic = args.string_limited(&["topic"], false, MAX_ID_BYTES);
    finish(USAGE, args)?;
    let sections = json!({
        "solve": {
            "call": {"task": "your task", "iterations": SOLVE_DEFAULT_ITERATIONS},
            "returns": "sessionId, summary, arbiterPicks, steps, hints, config, diagnostics",
            "notes": "solve-text answers with the summary first. Each iteration is committed before the next: a cancelled or interrupted solve keeps what it recorded.",
        },
        "step": {
            "flow": "start {task} → step {sessionId} or multi-step {sessionId, iterations} → get-state / summarize {sessionId}",
            "notes": "addHints offers hints as candidates in the next iteration; overrideNumCandidates changes K for one call. Sessions persist: continue one by id after a restart.",
        },
        "config": {
            "defaults": Config::default(),
            "limits": {"numCandidates": MAX_CANDIDATES, "maxSteps": config::MAX_STEPS_LIMIT, "beamWidth": config::MAX_BEAM_WIDTH, "beamDepth": config::MAX_BEAM_DEPTH, "llmMaxCalls": config::MAX_LLM_CALLS},
            "notes": "maxSteps caps a session's iterations; llmMaxCalls caps its model calls (then heuristics). beamWidth > 1 runs a shallow beam when a step improves less than minImprovement. Candidates come from the configured HTTP model, else the client's sampling, else heuristics (useSampling false: heuristics only).",
        },
        "output": {
            "notes": format!("outputPath (solve) writes the answer (outputFormat json) or the summary (text) inside the export directory ({} or 'exports' beside the ledger); '..', paths elsewhere and symbolic links are refused; an existing file only with overwrite: true.", output::EXPORT_DIR_ENV),
        },
    });
    let answer = match topic.as_deref().map(|t| t.trim().to_lowercase()) {
        None => json!({"recommended": SOLVE, "topics": TOPICS, "usage": sections}),
        Some(topic) if TOPICS.contains(&topic.as_str()) => {
            json!({"topic": topic, "usage": sections[topic.as_str()]})
        }
        Some(other) => {
            return Err(ToolError::validation(
                USAGE,
                vec![format!(
                    "topic: unknown topic {other:?}; use one of {}",
                    TOPICS.join(", ")
                )],
            ));
        }
    };
    Ok(structured_result(answer))
}

// ---- writing ----

fn event(body: Body, call: Option<CallRecord>) -> NewEvent {
    NewEvent::new(Payload::from(BoosterEvent { body, call }))
}

fn new_session() -> Target {
    Target {
        kind: SessionKind::BOOSTER,
        field: "sessionId",
        named: None,
        continue_key: None,
        remember_key: String::new(),
        idempotency_key: None,
    }
}

/// `booster_started` (after `session_started`), for `start` and `solve`.
async fn record_start(call: &mut ToolCall, started: Started) -> Result<Recorded, ToolError> {
    let title = started.task.clone();
    call.record(new_session(), move |head, record| {
        with_start(
            head,
            SessionKind::BOOSTER,
            &title,
            [Payload::from(BoosterEvent {
                body: Body::BoosterStarted(started),
                call: Some(record),
            })],
        )
    })
    .await
}

async fn start(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
    let raw = call.arguments.clone();
    let mut args = Args::new(&raw);
    let task = task_arg(&mut args);
    let config = config_arg(&mut args, &raw);
    let seed_hints = hints_arg(&mut args, &["seedHints"]);
    finish(START, args)?;
    let started = Started {
        task: task.expect("checked"),
        config: config.clone(),
        seed_hints,
    };
    let state = BoosterState::new(started.clone());
    let recorded = record_start(&mut call, started).await?;
    Ok(structured_result(json!({
        "sessionId": recorded.session.to_string(),
        "state": state_json(&state),
        "config": config,
        "eventSeq": recorded.seq,
    })))
}

/// How a run of iterations ended.
enum Ended {
    Done,
    Cancelled,
}

/// Where a run of iterations writes.
enum Writes {
    /// Its first iteration records into a named session (with the call's record).
    Named(String),
    /// After what this call recorded already.
    After(Box<Recorded>),
}

/// The iterations a run recorded, and how it ended.
struct Run {
    tree: ThoughtTree,
    recorded: Option<Recorded>,
    ended: Ended,
    /// The first iteration's bodies (what `step` answers with).
    first: Vec<Body>,
}

async fn progress(call: &ToolCall, done: u64, total: u64, chosen: &str) {
    let (Some(token), Some(peer)) = (&call.request.progress, &call.request.peer) else {
        return;
    };
    let text: String = chosen.chars().take(PROGRESS_TEXT_CHARS).collect();
    let param = rmcp::model::ProgressNotificationParam::new(token.clone(), done as f64)
        .with_total(total as f64)
        .with_message(format!("iteration {done}/{total}: {text}"));
    if let Err(error) = peer.notify_progress(param).await {
        tracing::debug!(%error, "progress notification not sent");
    }
}

/// The events of one iteration: the model call (if any), then the booster bodies; the
/// call's record goes on the first booster event when `first_call` has it.
fn iteration_events(
    bodies: Vec<Body>,
    model_call: Option<Box<ModelCallRecord>>,
    call_record: CallRecord,
    first_call: bool,
) -> Vec<NewEvent> {
    let mut events = Vec::with_capacity(bodies.len() + 1);
    if let Some(record) = model_call {
        events.push(NewEvent::new(
            ModelCallRecorded {
                record: *record,
                call: call_record.clone(),
            }
            .into(),
        ));
    }
    for (i, body) in bodies.into_iter().enumerate() {
        let attached = (i == 0 && first_call).then(|| call_record.clone());
        events.push(event(body, attached));
    }
    events
}

/// Runs `iterations` iterations over `tree`, each committed on its own.
#[allow(clippy::too_many_arguments)]
async fn run(
    call: &mut ToolCall,
    mut tree: ThoughtTree,
    writes: Writes,
    iterations: u64,
    override_k: Option<u64>,
    mut hints: Vec<String>,
    rounds_ok: bool,
    report_progress: bool,
) -> Result<Result<Run, CallToolResponse>, ToolError> {
    let raw = call.arguments.clone();
    let (mut named, mut recorded) = match writes {
        Writes::Named(name) => (Some(name), None),
        Writes::After(after) => (None, Some(*after)),
    };
    let mut first = Vec::new();
    let mut ended = Ended::Done;
    for done in 0..iterations {
        if call.request.cancel.is_cancelled() {
            ended = Ended::Cancelled;
            break;
        }
        let mut state = booster(&tree).clone();
        if !hints.is_empty() {
            state.hints_added(hints.clone());
        }
        let k = override_k.unwrap_or(state.config.num_candidates);
        let (generated, model_call, key) =
            match generate::generate(call, &state, k, rounds_ok).await {
                Generation::InputRequired(result) => {
                    return Ok(Err(CallToolResponse::InputRequired(*result)));
                }
                Generation::Ready {
                    generated,
                    model_call,
                    key,
                } => (*generated, model_call, key),
            };
        let mut bodies = Vec::new();
        if !hints.is_empty() {
            bodies.push(Body::HintsAdded(Hints {
                hints: std::mem::take(&mut hints),
            }));
        }
        bodies.extend(engine::decide_iteration(
            &ReferenceVerifier,
            &state,
            generated,
        ));
        if done == 0 {
            first = bodies.clone();
        }
        let chosen = bodies
            .iter()
            .find_map(|b| match b {
                Body::StepApplied(a) => Some(a.proposal.text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let written = match (named.take(), &recorded) {
            (Some(name), _) => {
                let target = Target {
                    kind: SessionKind::BOOSTER,
                    field: "sessionId",
                    named: Some(name),
                    continue_key: None,
                    remember_key: String::new(),
                    idempotency_key: key,
                };
                // Decided over the fold at `read_seq`: refused if the session moved since.
                let read_seq = tree.at_seq;
                let tool = call.name.clone();
                let result = call
                    .try_record(target, move |head, record| {
                        let now = head.map_or(0, |h| h.seq);
                        if now != read_seq {
                            return Err(ToolError::validation(
                                &tool,
                                vec![format!(
                                    "sessionId: the session moved on while this call ran (event {now}, read at {read_seq}): another call recorded first; call {tool} again"
                                )],
                            ));
                        }
                        Ok(iteration_events(bodies, model_call, record, true))
                    })
                    .await;
                call.arguments = raw.clone();
                result
            }
            (None, Some(after)) => {
                let record = CallRecord {
                    tool: call.name.clone(),
                    raw_arguments: Value::Object(raw.clone()).into(),
                    duration_us: call.received.elapsed().as_micros() as u64,
                };
                let events = iteration_events(bodies, model_call, record, false);
                call.record_more(after, key, events).await
            }
            (None, None) => unreachable!("a run writes into a named session or after a write"),
        };
        let written = match written {
            Ok(written) => written,
            Err(ToolError::Cancelled { .. }) if recorded.is_some() => {
                ended = Ended::Cancelled;
                break;
            }
            Err(error) => return Err(error),
        };
        tree = reload(&call.ctx.ledger, &call.name, &written).await?;
        recorded = Some(written);
        if report_progress {
            progress(call, done + 1, iterations, &chosen).await;
        }
    }
    Ok(Ok(Run {
        tree,
        recorded,
        ended,
        first,
    }))
}

fn steps_left(
    tool: &str,
    state: &BoosterState,
    session: &str,
    asked: u64,
) -> Result<(), ToolError> {
    let used = state.iteration_count();
    let max = state.config.max_steps;
    if used + asked > max {
        return Err(ToolError::validation(
            tool,
            vec![format!(
                "iterations: session {session} has run {used} of its maxSteps {max} iterations, so at most {} more; ask for fewer, or start a new session with a larger config.maxSteps (up to {})",
                max - used,
                config::MAX_STEPS_LIMIT
            )],
        ));
    }
    Ok(())
}

async fn step(mut call: ToolCall) -> Result<CallToolResponse, ToolError> {
    let tool = call.name.clone();
    let raw = call.arguments.clone();
    let mut args = Args::new(&raw);
    let session = args.string_limited(&["sessionId"], true, MAX_ID_BYTES);
    let iterations = if tool == MULTI_STEP {
        args.integer(&["iterations"], false, 1).unwrap_or(1)
    } else {
        1
    };
    let override_k = candidates_arg(&mut args);
    let hints = hints_arg(&mut args, &["addHints"]);
    finish(&tool, args)?;
    let session = session.expect("checked");
    let (head, tree) = load(&call.ctx.ledger, &tool, &session).await?;
    steps_left(&tool, booster(&tree), &head.session.to_string(), iterations)?;
    // A model call may come: never hold the arrival turn across it.
    call.request.turn.release();
    let run = match run(
        &mut call,
        tree,
        Writes::Named(head.session.to_string()),
        iterations,
        override_k,
        hints,
        tool == STEP,
        tool == MULTI_STEP,
    )
    .await?
    {
        Ok(run) => run,
        Err(input_required) => return Ok(input_required),
    };
    let state = booster(&run.tree);
    let event_seq = run.recorded.as_ref().map(|r| r.seq);
    let stopped = matches!(run.ended, Ended::Cancelled).then_some("cancelled");
    if tool == MULTI_STEP {
        let mut answer = json!({
            "sessionId": run.tree.session.to_string(),
            "state": state_json(state),
            "eventSeq": event_seq,
        });
        if let Some(stopped) = stopped {
            answer["stopped"] = json!(stopped);
        }
        return Ok(structured_result(answer).into());
    }
    let Some(iteration) = state.iterations.last().filter(|_| run.recorded.is_some()) else {
        return Err(ToolError::Cancelled { tool });
    };
    let chosen = iteration
        .chosen
        .as_ref()
        .expect("an iteration applies a step");
    let top = state.config.top_m as usize;
    let mut answer = json!({
        "sessionId": run.tree.session.to_string(),
        "chosen": {"proposal": chosen.proposal, "score": chosen.score},
        "candidates": iteration.candidates.iter().take(top).collect::<Vec<_>>(),
        "state": state_json(state),
        "eventSeq": event_seq,
    });
    for body in &run.first {
        match body {
            Body::BeamRolledOut(beam) => answer["beam"] = json!(beam),
            Body::Backtracked(check) => answer["backtracked"] = json!(check),
            Body::LoopDetected(check) => answer["loopDetected"] = json!(check),
            _ => {}
        }
    }
    let mut result = structured_result(answer);
    result
        .content
        .push(Content::text(format!("chosen: {}", chosen.proposal.text)));
    Ok(result.into())
}

async fn read(call: ToolCall) -> Result<CallToolResult, ToolError> {
    let mut args = Args::new(&call.arguments);
    let session = args.string_limited(&["sessionId"], true, MAX_ID_BYTES);
    finish(&call.name, args)?;
    let (_, tree) = load(&call.ctx.ledger, &call.name, &session.expect("checked")).await?;
    let state = booster(&tree);
    let answer = if call.name == SUMMARIZE {
        json!({"sessionId": tree.session.to_string(), "summary": state.summary()})
    } else {
        let (diagnostics, picks) = diagnostics_json(&tree);
        json!({
            "id": tree.session.to_string(),
            "state": state_json(state),
            "config": state.config,
            "history": history_json(state),
            "diagnostics": diagnostics,
            "arbiterPicks": picks,
            "atSeq": tree.at_seq,
        })
    };
    Ok(structured_result(answer))
}

async fn solve(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
    let tool = call.name.clone();
    let raw = call.arguments.clone();
    let mut args = Args::new(&raw);
    let task = task_arg(&mut args);
    let config = config_arg(&mut args, &raw);
    let seed_hints = hints_arg(&mut args, &["seedHints"]);
    let iterations = args
        .integer(&["iterations"], false, 1)
        .unwrap_or(SOLVE_DEFAULT_ITERATIONS);
    let output_path = args.string_limited(&["outputPath"], false, output::MAX_OUTPUT_PATH_BYTES);
    let overwrite = args.boolean(&["overwrite"], false).unwrap_or(false);
    let format = args.string_limited(&["outputFormat"], false, MAX_ID_BYTES);
    let text_format = match format.as_deref().map(|f| f.trim().to_lowercase()) {
        None => false,
        Some(f) if f == "json" => false,
        Some(f) if f == "text" => true,
        Some(other) => {
            args.problem(
                "outputFormat",
                format!("unknown format {other:?}; use json or text"),
            );
            false
        }
    };
    if iterations > config.max_steps {
        args.problem(
            "iterations",
            format!(
                "Too big: {iterations} is more than config.maxSteps {}; ask for fewer or raise config.maxSteps (up to {})",
                config.max_steps,
                config::MAX_STEPS_LIMIT
            ),
        );
    }
    finish(&tool, args)?;
    // The file is checked before anything is recorded: a refused path records nothing.
    let target = match &output_path {
        Some(path) => Some(
            output::resolve(&output::export_dir(call.ctx.ledger.path()), path, overwrite).map_err(
                |message| ToolError::validation(&tool, vec![format!("outputPath: {message}")]),
            )?,
        ),
        None => None,
    };
    let started = Started {
        task: task.expect("checked"),
        config,
        seed_hints,
    };
    call.request.turn.release();
    let recorded = record_start(&mut call, started).await?;
    call.arguments = raw;
    let tree = reload(&call.ctx.ledger, &tool, &recorded).await?;
    let run = match run(
        &mut call,
        tree,
        Writes::After(Box::new(recorded)),
        iterations,
        None,
        Vec::new(),
        false,
        true,
    )
    .await?
    {
        Ok(run) => run,
        Err(_) => unreachable!("solve never answers input required"),
    };
    let mut answer = solve_json(&run.tree);
    if let Ended::Cancelled = run.ended {
        answer["stopped"] = json!("cancelled");
    }
    let summary = booster(&run.tree).summary();
    if let (Some(path), Some(requested)) = (&target, &output_path) {
        let contents = if text_format {
            format!("{summary}\n")
        } else {
            let mut text = serde_json::to_string_pretty(&answer).expect("json");
            text.push('\n');
            text
        };
        if let Err(message) = output::write(path, contents.as_bytes(), overwrite) {
            return Err(ToolError::validation(
                &tool,
                vec![format!(
                    "outputPath: the solve was recorded as session {}, but the file was not written: {message}",
                    run.tree.session
                )],
            ));
        }
        answer["outputPath"] = json!(requested);
        answer["writtenTo"] = json!(path.display().to_string());
    }
    let mut result = structured_result(answer);
    if tool == SOLVE_TEXT {
        result.content.insert(0, Content::text(summary));
    }
    Ok(result)
}
