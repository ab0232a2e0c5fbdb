//! MCP sampling: the client's own model, in both protocol generations (DESIGN §11).
//!
//! Sessions that came through `initialize` (up to 2025-11-25): a `sampling/createMessage`
//! request sent to the client, bounded by a timeout (a client that never answers fails
//! the call, it does not hang it). Sessions of 2026-07-28 (`server/discover`), where a
//! server may not send requests: the tool answers "input required" with the same
//! sampling request and a sealed request state; the client runs it and calls the tool
//! again with the answer and the state. The state is an HMAC-SHA256 seal (rmcp's
//! `RequestStateCodec`) under a key made when the process starts, bound to the tool and
//! its arguments: a state that was altered, made by another process, or sent back with
//! other arguments is refused. The state carries a nonce and the digest of the sampling
//! request; every round renders the request again from the arguments and it must match,
//! so each round asks for the same thing. The nonce keys the round's side effects:
//! [`super::ModelOutcome::idempotency_key`].
//!
//! Owns: [`StateSealer`], [`complete`], the rendering of a [`ChatRequest`] as sampling
//! parameters, and reading a `CreateMessageResult`. Must not: trust anything in a
//! request state before it is opened.
#![allow(deprecated)] // rmcp marks sampling deprecated (SEP-2577); the protocol still has it.

use super::record::{AttemptRecord, ModelCallRecord};
use super::{ChatRequest, ChatResponse, ClientLink, Completion, ModelOutcome, ProviderError, Role};
use rmcp::model::{
    ClientCapabilities, ClientResult, CreateMessageRequest, CreateMessageRequestParams,
    CreateMessageResult, InputRequest, InputRequests, InputRequiredResult, ProtocolVersion,
    RequestStateCodec, SamplingMessage, SamplingMessageContentBlock, SealOptions, ServerRequest,
};
use rmcp::service::PeerRequestOptions;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::{Duration, Instant};

/// Key of the sampling request in an input-required answer.
pub(crate) const INPUT_KEY: &str = "sampling";

/// `max_tokens` sent in a sampling request when the caller set none (MCP requires one).
pub(crate) const DEFAULT_SAMPLING_MAX_TOKENS: u32 = 4096;

/// How long a sealed request state stays valid.
pub(crate) const REQUEST_STATE_TTL: Duration = Duration::from_secs(3600);

/// Seals and opens request states under a per-process random key.
pub(crate) struct StateSealer {
    codec: RequestStateCodec,
}

impl StateSealer {
    pub(crate) fn new() -> Self {
        let mut key = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
            .expect("the system's random source works");
        StateSealer {
            codec: RequestStateCodec::try_new(key.to_vec()).expect("32 bytes is a long key"),
        }
    }
}

impl Default for StateSealer {
    fn default() -> Self {
        Self::new()
    }
}

/// What a sealed state holds (readable by anyone, trusted only once opened).
#[derive(Serialize, Deserialize)]
struct RoundState {
    /// Random per first round: the key of this call's side effects.
    nonce: String,
    /// blake3 of the sampling request as rendered.
    request_digest: String,
}

/// The sampling parameters of `chat`.
pub(crate) fn render(chat: &ChatRequest) -> CreateMessageRequestParams {
    let messages = chat
        .messages
        .iter()
        .map(|m| match m.role {
            Role::User => SamplingMessage::user_text(m.content.clone()),
            Role::Assistant => SamplingMessage::assistant_text(m.content.clone()),
        })
        .collect();
    let max_tokens = chat.max_tokens.map_or(DEFAULT_SAMPLING_MAX_TOKENS, |m| {
        m.min(u32::MAX as u64) as u32
    });
    let mut params = CreateMessageRequestParams::new(messages, max_tokens);
    params.system_prompt = chat.system.clone();
    params.temperature = chat.temperature.map(|t| t as f32);
    if !chat.stop.is_empty() {
        params.stop_sequences = Some(chat.stop.clone());
    }
    params
}

fn digest(params: &CreateMessageRequestParams) -> String {
    let json = serde_json::to_vec(params).expect("sampling params serialize");
    blake3::hash(&json).to_hex().to_string()
}

/// What binds a state to its call: the tool and its arguments as sent.
fn associated_data(tool: &str, arguments: &Map<String, Value>) -> Vec<u8> {
    let mut data = tool.as_bytes().to_vec();
    data.push(0);
    data.extend(serde_json::to_vec(arguments).expect("arguments serialize"));
    data
}

/// Whether the client said it can sample.
fn offers_sampling(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities.is_some_and(|c| c.sampling.is_some())
}

fn response_of(result: CreateMessageResult) -> ChatResponse {
    let content = result
        .message
        .content
        .iter()
        .filter_map(|block| match block {
            SamplingMessageContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    ChatResponse {
        content,
        reasoning: None,
        finish_reason: result.stop_reason,
        usage: None,
        model: result.model,
    }
}

fn outcome(
    chat: &ChatRequest,
    transport: &str,
    started: Instant,
    result: Result<ChatResponse, ProviderError>,
    idempotency_key: Option<String>,
) -> Completion {
    let latency_ms = started.elapsed().as_millis() as u64;
    let record = ModelCallRecord {
        provider: "mcp-sampling".into(),
        model: result.as_ref().map(|r| r.model.clone()).unwrap_or_default(),
        transport: transport.into(),
        request: chat.clone(),
        response: result.as_ref().ok().cloned(),
        error: result.as_ref().err().cloned(),
        attempts: vec![AttemptRecord {
            attempt: 1,
            waited_ms: 0,
            latency_ms,
            status: None,
            usage: None,
            cost: None,
            error: result.as_ref().err().cloned(),
            retry_after_ms: None,
        }],
        latency_ms,
        usage: None,
        cost: None,
    };
    Completion::Done(Box::new(ModelOutcome {
        result,
        record,
        idempotency_key,
    }))
}

fn not_called(chat: &ChatRequest, error: ProviderError) -> Completion {
    Completion::Done(Box::new(ModelOutcome {
        result: Err(error.clone()),
        record: ModelCallRecord::not_called(chat, error),
        idempotency_key: None,
    }))
}

fn sampling_error(message: impl Into<String>) -> ProviderError {
    ProviderError::Sampling {
        message: super::redact::redact(&message.into(), &[]),
    }
}

/// The client's model answers `chat` (see the module doc), or a `config` error when the
/// client offers no sampling.
pub(crate) async fn complete(
    sealer: &StateSealer,
    tool: &str,
    arguments: &Map<String, Value>,
    request: ClientLink<'_>,
    chat: &ChatRequest,
    timeout: Duration,
    unconfigured: &str,
) -> Completion {
    let modern = request
        .protocol_version
        .is_some_and(|v| *v >= ProtocolVersion::V_2026_07_28);
    if modern {
        return round_trip(sealer, tool, arguments, request, chat);
    }
    let Some(peer) = request.peer else {
        return not_called(
            chat,
            ProviderError::Config {
                message: unconfigured.to_string(),
            },
        );
    };
    if !offers_sampling(request.client_capabilities) {
        return not_called(
            chat,
            ProviderError::Config {
                message: unconfigured.to_string(),
            },
        );
    }
    let started = Instant::now();
    let sent = peer
        .send_request_with_option(
            ServerRequest::CreateMessageRequest(CreateMessageRequest::new(render(chat))),
            PeerRequestOptions::with_timeout(timeout),
        )
        .await;
    let result = match sent {
        Err(error) => Err(sampling_error(format!(
            "the request could not be sent: {error}"
        ))),
        Ok(handle) => {
            let answer = tokio::select! {
                biased;
                () = request.cancel.cancelled() => Err(ProviderError::Cancelled),
                answer = handle.await_response() => Ok(answer),
            };
            match answer {
                Err(error) => Err(error),
                Ok(Ok(ClientResult::CreateMessageResult(result))) => Ok(response_of(*result)),
                Ok(Ok(_)) => Err(sampling_error(
                    "the client answered sampling/createMessage with another kind of result",
                )),
                Ok(Err(rmcp::ServiceError::Timeout { timeout })) => Err(sampling_error(format!(
                    "the client did not answer sampling/createMessage within {} s",
                    timeout.as_secs_f64()
                ))),
                Ok(Err(error)) => Err(sampling_error(error.to_string())),
            }
        }
    };
    outcome(chat, "sampling", started, result, None)
}

/// Protocol 2026-07-28: ask for the sampling as input, or take the client's answer.
fn round_trip(
    sealer: &StateSealer,
    tool: &str,
    arguments: &Map<String, Value>,
    request: ClientLink<'_>,
    chat: &ChatRequest,
) -> Completion {
    let params = render(chat);
    let request_digest = digest(&params);
    let context = associated_data(tool, arguments);
    let ask = |nonce: String| {
        let state = RoundState {
            nonce,
            request_digest: request_digest.clone(),
        };
        let sealed = sealer
            .codec
            .seal_json_with(
                &state,
                &SealOptions::new()
                    .associated_data(&context)
                    .ttl(REQUEST_STATE_TTL),
            )
            .expect("a round state serializes");
        let mut requests = InputRequests::new();
        requests.insert(
            INPUT_KEY.to_string(),
            InputRequest::CreateMessage(CreateMessageRequest::new(params.clone())),
        );
        Completion::InputRequired(Box::new(InputRequiredResult::new(
            Some(requests),
            Some(sealed),
        )))
    };
    let Some(sealed) = request.request_state else {
        if !offers_sampling(request.client_capabilities) {
            return not_called(
                chat,
                ProviderError::Config {
                    message: "No model provider is configured and the client does not declare the sampling capability; configure a provider (README: Models) or use a client that offers sampling.".into(),
                },
            );
        }
        return ask(ulid::Ulid::generate().to_string());
    };
    let state: RoundState = match sealer.codec.open_json_with(sealed, &context) {
        Ok(state) => state,
        Err(error) => {
            return not_called(
                chat,
                sampling_error(format!(
                    "the requestState sent back was refused ({error}): it must be the one this server sent for this tool and these arguments; call the tool again without requestState"
                )),
            );
        }
    };
    if state.request_digest != request_digest {
        return not_called(
            chat,
            sampling_error(
                "the requestState belongs to another sampling request; call the tool again without requestState",
            ),
        );
    }
    let key = format!("mrtr:{}", state.nonce);
    let Some(answer) = request
        .input_responses
        .and_then(|responses| responses.get(INPUT_KEY))
    else {
        // No answer yet: ask again, for the same request under the same nonce.
        return ask(state.nonce);
    };
    let started = Instant::now();
    let result = match serde_json::from_value::<CreateMessageResult>(answer.clone()) {
        Ok(result) => Ok(response_of(result)),
        Err(_) => match answer.get("error").or_else(|| answer.get("message")) {
            Some(error) => Err(sampling_error(format!(
                "the client's model failed: {error}"
            ))),
            None => Err(sampling_error(
                "inputResponses.sampling is not a CreateMessageResult ({model, role, content})",
            )),
        },
    };
    outcome(chat, "sampling-input-required", started, result, Some(key))
}
