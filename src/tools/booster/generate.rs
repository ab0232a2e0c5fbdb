//! The generation seam: where an iteration's candidates come from. In order: the
//! configured HTTP provider, else the client's MCP sampling, else the heuristics — a
//! model's answer that yields nothing usable, or a failed call, falls back to heuristics
//! and never fails the iteration.
//!
//! Owns: [`generate`] (asks `ctx.models` through the provider layer, parses with
//! [`super::candidates::parse`], filters; heuristics when no usable step remains) and
//! [`from_response`] (the pure part, unit-tested). Must not: speak HTTP or MCP itself
//! (the provider layer does), hold the call's arrival turn across a model call, or call
//! a model more than `llmMaxCalls` times in a session.

use super::candidates::{Parser, filter, heuristic, parse, prompt};
use super::engine::Generated;
use crate::provider::{
    CallOptions, ChatMessage, ChatRequest, ChatResponse, Completion, ModelCallRecord, ProviderError,
};
use crate::request::ToolCall;
use crate::tools::booster::state::{BoosterState, ModelOutput, Proposal, Source};
use rmcp::model::InputRequiredResult;

/// The system prompt (fixed, first: prefix caches keep it).
pub(crate) const SYSTEM_PROMPT: &str = "You propose small, concrete, verifiable next steps for a task. You answer with a JSON array only.";
/// Sampling temperature asked for.
pub(crate) const TEMPERATURE: f64 = 0.4;
pub(crate) use super::state::HEURISTIC_PROVIDER;

/// What one generation produced.
pub(crate) enum Generation {
    /// Candidates, and the model call behind them (to record), if one was made.
    Ready {
        generated: Box<Generated>,
        model_call: Option<Box<ModelCallRecord>>,
        /// The idempotency key of a 2026-07-28 round that answered (record keyed).
        key: Option<String>,
    },
    /// Protocol 2026-07-28 sampling: the client must run the request and call again.
    InputRequired(Box<InputRequiredResult>),
}

fn heuristic_source(fallback: Option<String>) -> Source {
    Source {
        provider: HEURISTIC_PROVIDER.into(),
        model: None,
        fallback,
    }
}

/// Heuristic candidates for `state` (pending hints first).
pub(crate) fn heuristics(state: &BoosterState, k: u64, fallback: Option<String>) -> Generated {
    Generated {
        proposals: heuristic(
            &state.task,
            &state.applied_texts(),
            &state.pending_hints,
            k as usize,
        ),
        source: heuristic_source(fallback),
        model_output: None,
    }
}

/// Pure: candidates from a model's answer (or its failure): hints first, then the
/// model's steps, filtered, at most `k`; heuristics when none of the model's survive.
pub(crate) fn from_response(
    state: &BoosterState,
    k: u64,
    record: &ModelCallRecord,
    prompt_chars: u64,
    result: &Result<ChatResponse, ProviderError>,
) -> Generated {
    let (proposals, parser, error) = match result {
        Ok(response) => {
            let (proposals, parser) = parse(&response.content);
            (proposals, parser, None)
        }
        Err(error) => (Vec::new(), Parser::None, Some(error.to_string())),
    };
    let parsed = proposals.len() as u64;
    let hints: Vec<Proposal> = state
        .pending_hints
        .iter()
        .map(|hint| Proposal {
            text: hint.clone(),
            rationale: super::candidates::HINT_RATIONALE.into(),
            ..Proposal::default()
        })
        .collect();
    let hint_count = hints.len();
    let mut kept = filter(hints.into_iter().chain(proposals).collect());
    kept.truncate((k as usize).max(hint_count));
    // The spec's chain: heuristics only when the model gave no usable step.
    let fallback = if kept.len() > hint_count {
        None
    } else {
        kept = heuristic(
            &state.task,
            &state.applied_texts(),
            &state.pending_hints,
            k as usize,
        );
        Some(match &error {
            Some(error) => format!("the model call failed ({error}); heuristics used"),
            None if parsed == 0 => {
                "the model's answer held no usable step; heuristics used".to_string()
            }
            None => "every step the model gave was filtered out; heuristics used".to_string(),
        })
    };
    let response_chars = match result {
        Ok(response) => response.content.chars().count() as u64,
        Err(_) => 0,
    };
    Generated {
        proposals: kept,
        source: Source {
            provider: record.provider.clone(),
            model: Some(record.model.clone()).filter(|m| !m.is_empty()),
            fallback,
        },
        model_output: Some(ModelOutput {
            provider: record.provider.clone(),
            model: Some(record.model.clone()).filter(|m| !m.is_empty()),
            transport: record.transport.clone(),
            prompt_chars,
            response_chars,
            error,
            parsed,
            parser: parser.as_str().into(),
        }),
    }
}

/// Candidates for the next iteration of `state`. `rounds_ok`: whether this tool may
/// answer "input required" (one model call per tool call: `step`); multi-iteration tools
/// use heuristics where the client's sampling needs a round per call.
pub(crate) async fn generate(
    call: &ToolCall,
    state: &BoosterState,
    k: u64,
    rounds_ok: bool,
) -> Generation {
    let ready = |generated| Generation::Ready {
        generated: Box::new(generated),
        model_call: None,
        key: None,
    };
    if state.config.use_sampling == Some(false) {
        return ready(heuristics(state, k, None));
    }
    let models = &call.ctx.models;
    if !models.can_call(&call.request) {
        return ready(heuristics(state, k, None));
    }
    if state.diagnostics.total_calls >= state.config.llm_max_calls {
        return ready(heuristics(
            state,
            k,
            Some(format!(
                "llmMaxCalls ({}) reached; heuristics used",
                state.config.llm_max_calls
            )),
        ));
    }
    let modern = call
        .request
        .protocol_version
        .as_ref()
        .is_some_and(|v| *v >= rmcp::model::ProtocolVersion::V_2026_07_28);
    if modern && models.http_provider().is_none() && !rounds_ok {
        return ready(heuristics(
            state,
            k,
            Some("client sampling takes one tool call per model call under protocol 2026-07-28: use step, or configure an HTTP provider; heuristics used".into()),
        ));
    }
    let text = prompt(&state.task, &state.step_texts(), &state.hints, k);
    let prompt_chars = (SYSTEM_PROMPT.chars().count() + text.chars().count()) as u64;
    let chat = ChatRequest {
        system: Some(SYSTEM_PROMPT.into()),
        messages: vec![ChatMessage::user(text)],
        temperature: Some(TEMPERATURE),
        max_tokens: Some(state.config.sampling_max_tokens),
        ..ChatRequest::default()
    };
    let completion = models
        .complete(
            &call.name,
            &call.arguments,
            &call.request,
            &chat,
            &CallOptions::default(),
        )
        .await;
    match completion {
        Completion::InputRequired(result) => Generation::InputRequired(result),
        Completion::Done(outcome) => {
            let generated = from_response(state, k, &outcome.record, prompt_chars, &outcome.result);
            Generation::Ready {
                generated: Box::new(generated),
                model_call: Some(Box::new(outcome.record)),
                key: outcome.idempotency_key,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::booster::config::Config;
    use crate::tools::booster::state::Started;

    fn state() -> BoosterState {
        BoosterState::new(Started {
            task: "Find the counterfeit among 12 coins using a balance scale.".into(),
            config: Config::default(),
            seed_hints: Vec::new(),
            step_count: None,
        })
    }

    fn record() -> ModelCallRecord {
        ModelCallRecord::not_called(
            &ChatRequest::default(),
            ProviderError::Config {
                message: "none".into(),
            },
        )
    }

    fn response(content: &str) -> Result<ChatResponse, ProviderError> {
        Ok(ChatResponse {
            content: content.into(),
            reasoning: None,
            finish_reason: None,
            usage: None,
            model: "m".into(),
        })
    }

    #[test]
    fn garbage_and_failures_fall_back_and_short_answers_are_filled() {
        let s = state();
        let garbage = from_response(&s, 5, &record(), 10, &response("no idea, sorry"));
        assert_eq!(garbage.proposals.len(), 5);
        assert!(
            garbage
                .source
                .fallback
                .as_deref()
                .unwrap()
                .contains("no usable step")
        );
        assert_eq!(garbage.model_output.as_ref().unwrap().parser, "none");

        let failed = from_response(
            &s,
            3,
            &record(),
            10,
            &Err(ProviderError::Config {
                message: "x".into(),
            }),
        );
        assert_eq!(failed.proposals.len(), 3);
        assert!(failed.model_output.unwrap().error.is_some());

        let two = from_response(
            &s,
            4,
            &record(),
            10,
            &response(r#"[{"text": "Weigh coins 1-4 against 5-8"}, {"text": "We must think"}]"#),
        );
        assert_eq!(
            two.proposals.len(),
            1,
            "the meta step is filtered, nothing filled"
        );
        assert_eq!(two.proposals[0].text, "Weigh coins 1-4 against 5-8");
        assert_eq!(two.model_output.unwrap().parsed, 2);
        assert!(two.source.fallback.is_none());
        let meta = from_response(&s, 4, &record(), 10, &response(r#"["We must think"]"#));
        assert_eq!(meta.proposals.len(), 4);
        assert!(meta.source.fallback.unwrap().contains("filtered out"));
    }
}
