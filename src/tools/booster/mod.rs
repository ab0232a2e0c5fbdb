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

pub(crate) mod candidates;
pub(crate) mod config;
pub(crate) mod engine;
pub(crate) mod generate;
pub(crate) mod mermaid;
pub(crate) mod output;
pub(crate) mod payload;
pub(crate) mod picture;
pub(crate) mod prompt;
mod run;
use run::{read, solve, start, step};
pub(crate) mod state;
pub(crate) mod verifier;

use super::args::{
    Args, MAX_ID_BYTES, boolean_schema, count_schema, count_schema_up_to, finish,
    string_list_schema,
};
use super::write::{Recorded, Target, with_start};
use super::{
    CallFuture, Family, KindInfo, ToolError, reading_annotations, structured_result,
    tool_definition, writing_annotations,
};
use crate::event::{CallRecord, NewEvent, Payload, SessionKind};
use crate::projection::tree::ThoughtTree;
use crate::provider::{ModelCallRecord, ModelCallRecorded};
use crate::request::ToolCall;
use crate::store::{Ledger, SessionHead};
use crate::tools::booster::state::{BoosterState, Iteration, Started, StepCount};
use config::{Config, MAX_CANDIDATES, parse_config};
use generate::Generation;
use payload::{Body, BoosterEvent, Hints};
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock as Content, Tool};
use serde_json::{Map, Value, json};
use verifier::ReferenceVerifier;

impl SessionKind {
    /// A booster session.
    pub(crate) const BOOSTER: SessionKind = SessionKind::new("booster");
}

pub(crate) const USAGE: &str = "usage";
pub(crate) const START: &str = "start";
pub(crate) const STEP: &str = "step";
pub(crate) const MULTI_STEP: &str = "multi-step";
pub(crate) const GET_STATE: &str = "get-state";
pub(crate) const SUMMARIZE: &str = "summarize";
pub(crate) const SOLVE: &str = "solve";
pub(crate) const SOLVE_TEXT: &str = "solve-text";

/// Longest task accepted, in bytes (it is in every prompt).
pub(crate) const MAX_TASK_BYTES: usize = 16 * 1024;
/// Most hints one call may add.
pub(crate) const MAX_HINTS: usize = 16;
/// `solve`'s default iterations.
pub(crate) const SOLVE_DEFAULT_ITERATIONS: u64 = 8;
/// Characters of the chosen step in a progress message.
pub(crate) const PROGRESS_TEXT_CHARS: usize = 80;

/// The booster family, as registered in [`super::FAMILIES`].
pub(crate) static FAMILY: Family = Family {
    name: "booster",
    instructions: "booster (best-of-N step search with a verifier: solve a task in scored steps)",
    default_on: false,
    listing_budget_bytes: 2_800,
    tools,
    aliases: &[],
    call,
    asks_the_client: true,
    kinds: &[KindInfo {
        kind: SessionKind::BOOSTER,
        label: "Booster session",
    }],
    codec: Some(&payload::BOOSTER_CODEC),
    folds: &[&crate::projection::tree::FoldOf::<payload::BoosterEvent>::NEW],
    picture: Some(&picture::PICTURES),
    render: Some(&mermaid::RENDER),
    prompts: &[],
    doctor: None,
};

/// The tools of this family, as listed (`usage` first).
pub(crate) fn tools() -> Vec<Tool> {
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
            "Booster help; topic: solve, step, config or output.",
            json!({"type": "object", "properties": {"topic": text}}),
            None,
            reading_annotations(),
        ),
        tool_definition(
            START,
            None,
            "A booster session for a task; config keys: see usage.",
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
            "Several iterations, reporting progress.",
            json!({"type": "object", "properties": {"sessionId": text, "iterations": count, "overrideNumCandidates": candidates, "addHints": hints}, "required": ["sessionId"]}),
            None,
            writing_annotations(),
        ),
        tool_definition(
            GET_STATE,
            None,
            "A session's state, config, choices and diagnostics.",
            session.clone(),
            None,
            reading_annotations(),
        ),
        tool_definition(
            SUMMARIZE,
            None,
            "The session's task and its last distinct steps.",
            session,
            None,
            reading_annotations(),
        ),
        tool_definition(
            SOLVE,
            None,
            "Recommended: start, iterate, summarize; outputPath is in the export directory.",
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
    super::args::note_read(&["config"]);
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
        if tree.family::<BoosterState>().is_none() {
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
    tree.family::<BoosterState>()
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
    let (diagnostics, picks) = booster(tree)
        .diagnostics
        .sampled(crate::provider::record::ModelCalls::of(tree));
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
