//! The booster's writing tools: `start`, `step` / `multi-step`, `solve` / `solve-text`
//! (fold the session, generate, decide, one commit per iteration, progress, cancel) and
//! the reads of `get-state` / `summarize`.
//!
//! Owns: the call flow of an iteration (`run`) and its events. Must not: keep anything in
//! memory between calls (every call folds the session from the ledger).

use super::*;

pub(super) fn event(body: Body, call: Option<CallRecord>) -> NewEvent {
    NewEvent::new(Payload::from(BoosterEvent { body, call }))
}

pub(super) fn new_session() -> Target {
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
pub(super) async fn record_start(
    call: &mut ToolCall,
    started: Started,
) -> Result<Recorded, ToolError> {
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

pub(super) async fn start(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
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
        step_count: Some(StepCount::SoFar),
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
pub(super) enum Ended {
    Done,
    Cancelled,
}

/// Where a run of iterations writes.
pub(super) enum Writes {
    /// Its first iteration records into a named session (with the call's record).
    Named(String),
    /// After what this call recorded already.
    After(Box<Recorded>),
}

/// The iterations a run recorded, and how it ended.
pub(super) struct Run {
    tree: ThoughtTree,
    recorded: Option<Recorded>,
    ended: Ended,
    /// The first iteration's bodies (what `step` answers with).
    first: Vec<Body>,
}

pub(super) async fn progress(call: &ToolCall, done: u64, total: u64, chosen: &str) {
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
pub(super) fn iteration_events(
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
pub(super) async fn run(
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

pub(super) fn steps_left(
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

pub(super) async fn step(mut call: ToolCall) -> Result<CallToolResponse, ToolError> {
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

pub(super) async fn read(call: ToolCall) -> Result<CallToolResult, ToolError> {
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

pub(super) async fn solve(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
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
        step_count: Some(StepCount::Planned(iterations)),
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
        answer["writtenTo"] = json!(path.path().display().to_string());
    }
    let mut result = structured_result(answer);
    if tool == SOLVE_TEXT {
        result.content.insert(0, Content::text(summary));
    }
    Ok(result)
}
