//! Models the tool families call: one interface over an OpenAI-compatible HTTP endpoint
//! and MCP sampling through the client (DESIGN §6, §11).
//!
//! Owns: the request and answer shapes ([`ChatRequest`], [`ChatResponse`], [`Usage`]),
//! [`ProviderError`] and its classification into the error envelope's `type` and
//! `action`, [`Models`] (the configured chain: HTTP provider, else sampling), the attempt
//! record every call produces ([`ModelCallRecord`], written as a `model_call_recorded`
//! event by any family through [`record::ModelCallRecorded`]), configuration
//! ([`config`]), the HTTP client with its retries ([`http`]), sampling in both protocol
//! generations ([`sampling`]) and redaction of key-like text ([`redact`]).
//!
//! Must not: write to the ledger (families record the [`ModelCallRecord`] with their own
//! events), hold a call's arrival turn across a model call, or let an API key reach an
//! event, an answer, an error, a log line or `Debug` output ([`config::ApiKey`] has no
//! `Serialize` and prints as `***`).

pub(crate) mod config;
pub(crate) mod embeddings;
pub(crate) mod http;
pub(crate) mod record;
pub(crate) mod redact;
pub(crate) mod sampling;

use rmcp::RoleServer;
use rmcp::model::{ClientCapabilities, InputRequiredResult, InputResponses, ProtocolVersion};
use rmcp::service::Peer;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[allow(unused_imports)] // some only in test builds
pub(crate) use config::{ApiKey, Prices, ProviderConfig, ProviderSettings};
#[allow(unused_imports)] // some only in test builds
pub(crate) use record::{AttemptRecord, ModelCallRecord, ModelCallRecorded};

/// Who speaks in a chat message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    User,
    Assistant,
}

/// One message of the conversation sent to a model (the system prompt is separate).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    pub(crate) fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::User,
            content: content.into(),
        }
    }
}

/// What a family asks a model. The fixed part of a prompt (system prompt, instructions)
/// should be byte-stable and first so provider prefix caches hit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChatRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Sent only when non-empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
}

impl ChatRequest {
    /// One user message, with an optional system prompt.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn single(system: Option<String>, user: impl Into<String>) -> Self {
        ChatRequest {
            system,
            messages: vec![ChatMessage::user(user)],
            ..ChatRequest::default()
        }
    }
}

/// Tokens a provider reports for one answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Prompt tokens served from the provider's prefix cache, where it says
    /// (DeepSeek `prompt_cache_hit_tokens`, OpenAI `prompt_tokens_details.cached_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<u64>,
}

/// A model's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChatResponse {
    pub content: String,
    /// A thinking model's separate reasoning text (DeepSeek `reasoning_content`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The model that answered, as the provider named it.
    pub model: String,
}

/// The `type` of the error envelope (specs/agent.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ErrorType {
    Network,
    Api,
    Config,
    Unknown,
}

/// The `action` of the error envelope: what the calling model should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ErrorAction {
    Retry,
    Backoff,
    Report,
    FixInput,
}

/// How a network failure happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum NetworkKind {
    Dns,
    Refused,
    Reset,
    Unreachable,
    Timeout,
    Other,
}

/// Why a model call failed. Every message is already redacted of key-like text.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum ProviderError {
    /// No answer from the endpoint (DNS, refused, reset, unreachable, timeout).
    #[error("network error ({network:?}) calling {provider}: {message}")]
    Network {
        provider: String,
        network: NetworkKind,
        message: String,
    },
    /// The endpoint answered with an HTTP error status.
    #[error("{provider} answered HTTP {status}: {message}")]
    Api {
        provider: String,
        status: u16,
        message: String,
        /// What the provider asked us to wait before retrying, in milliseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_ms: Option<u64>,
    },
    /// A success status with a body that is not a chat completion.
    #[error("{provider} answered with a body that is not a chat completion: {message}")]
    BadResponse { provider: String, message: String },
    /// No model is configured and the client offers no sampling.
    #[error("{message}")]
    Config { message: String },
    /// The client's sampling failed, was refused or never answered.
    #[error("the client's model (MCP sampling) failed: {message}")]
    Sampling { message: String },
    /// The client cancelled the tool call while the model was working.
    #[error("the client cancelled the call while the model was answering")]
    Cancelled,
}

impl ProviderError {
    /// The envelope's `type`.
    pub(crate) fn error_type(&self) -> ErrorType {
        match self {
            ProviderError::Network { .. } => ErrorType::Network,
            ProviderError::Api { status, .. } => match status {
                400 | 401 | 429 | 500..=599 => ErrorType::Api,
                _ => ErrorType::Unknown,
            },
            ProviderError::Config { .. } => ErrorType::Config,
            ProviderError::BadResponse { .. }
            | ProviderError::Sampling { .. }
            | ProviderError::Cancelled => ErrorType::Unknown,
        }
    }

    /// The envelope's `action`.
    pub(crate) fn action(&self) -> ErrorAction {
        match self {
            ProviderError::Network { .. } => ErrorAction::Retry,
            ProviderError::Api { status, .. } => match status {
                429 => ErrorAction::Backoff,
                400 => ErrorAction::FixInput,
                500..=599 => ErrorAction::Retry,
                _ => ErrorAction::Report,
            },
            ProviderError::BadResponse { .. } => ErrorAction::Retry,
            ProviderError::Config { .. }
            | ProviderError::Sampling { .. }
            | ProviderError::Cancelled => ErrorAction::Report,
        }
    }

    /// The HTTP status, for API errors.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn status_code(&self) -> Option<u16> {
        match self {
            ProviderError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the HTTP layer retries it by itself (429 and 5xx only).
    pub(crate) fn retryable(&self) -> bool {
        matches!(self, ProviderError::Api { status, .. } if *status == 429 || (500..=599).contains(status))
    }

    /// The structured error envelope of specs/agent.md: `{success: false, type, action,
    /// message, error?, status_code?}`.
    pub(crate) fn envelope(&self) -> serde_json::Value {
        let mut envelope = serde_json::json!({
            "success": false,
            "type": self.error_type(),
            "action": self.action(),
            "message": self.to_string(),
        });
        if let ProviderError::Api {
            status,
            message,
            retry_after_ms,
            ..
        } = self
        {
            envelope["error"] = serde_json::Value::String(message.clone());
            envelope["status_code"] = serde_json::json!(status);
            if let Some(ms) = retry_after_ms {
                envelope["retry_after_seconds"] = serde_json::json!(*ms as f64 / 1000.0);
            }
        }
        envelope
    }
}

/// What a model call needs of the tool call it is made for: the client to ask (MCP
/// sampling), the cancellation, and the client's side of a 2026-07-28 round trip. A
/// [`crate::request::Request`] converts into one; the provider knows no other request
/// type.
#[derive(Clone, Copy)]
pub(crate) struct ClientLink<'a> {
    /// The client, when the call came over a connection.
    pub peer: Option<&'a Peer<RoleServer>>,
    /// Cancelled when the client cancels the request.
    pub cancel: &'a CancellationToken,
    /// The client's answers to what an earlier round asked for.
    pub input_responses: Option<&'a InputResponses>,
    /// The state an earlier round handed the client, echoed back (untrusted).
    pub request_state: Option<&'a str>,
    /// The protocol version of the request.
    pub protocol_version: Option<&'a ProtocolVersion>,
    /// What the client declared it can do.
    pub client_capabilities: Option<&'a ClientCapabilities>,
}

/// What a family passes with a model call besides the request.
#[derive(Clone, Debug, Default)]
pub(crate) struct CallOptions {
    /// The most the client's model may take to answer a sampling request (default: the
    /// process's, [`DEFAULT_SAMPLING_TIMEOUT`] unless configured).
    pub sampling_timeout: Option<Duration>,
}

/// How a model call ended, for the family to record and answer from.
pub(crate) enum Completion {
    /// The call ran (successfully or not): record `record`, answer from `result`.
    Done(Box<ModelOutcome>),
    /// Protocol 2026-07-28 without an HTTP provider: the client must run the sampling
    /// request and call the tool again. Answer the tool call with it
    /// (`CallToolResponse::InputRequired(*result)`); record nothing in this round.
    InputRequired(Box<InputRequiredResult>),
}

/// A finished model call: its answer (or why it failed) and the record of every attempt.
pub(crate) struct ModelOutcome {
    pub result: Result<ChatResponse, ProviderError>,
    /// What to record as a `model_call_recorded` event (no key anywhere in it).
    pub record: ModelCallRecord,
    /// For a call answered through a 2026-07-28 round trip: the idempotency key of the
    /// round (derived from the sealed request state), so the run that records is keyed
    /// and a replayed state records nothing twice. Pass it as the write's
    /// `Target::idempotency_key`.
    pub idempotency_key: Option<String>,
}

/// The models a process can call: the configured HTTP provider, if any, then MCP
/// sampling through the client when it offers it.
pub(crate) struct Models {
    http: Option<http::HttpProvider>,
    /// Seals 2026-07-28 request states (a key made when the process starts).
    sealer: sampling::StateSealer,
    /// Why no HTTP provider is configured (for the `config` error), when none is.
    unconfigured_reason: String,
    /// The most a sampling request may wait for the client.
    sampling_timeout: Duration,
}

impl std::fmt::Debug for Models {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Models")
            .field("http", &self.http)
            .field("sampling_timeout", &self.sampling_timeout)
            .finish_non_exhaustive()
    }
}

/// Default longest wait for a client to answer a sampling request.
pub(crate) const DEFAULT_SAMPLING_TIMEOUT: Duration = Duration::from_secs(120);

impl Models {
    /// Models from settings (see [`ProviderSettings::load`]).
    pub(crate) fn new(settings: ProviderSettings) -> Arc<Self> {
        let unconfigured_reason = settings.unconfigured_reason();
        let sampling_timeout = settings
            .sampling_timeout
            .unwrap_or(DEFAULT_SAMPLING_TIMEOUT);
        let http = settings.provider.map(http::HttpProvider::new);
        Arc::new(Models {
            http,
            sealer: sampling::StateSealer::new(),
            unconfigured_reason,
            sampling_timeout,
        })
    }

    /// No HTTP provider: only the client's sampling (and a `config` error without it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn unconfigured() -> Arc<Self> {
        Models::new(ProviderSettings::default())
    }

    /// The HTTP provider's name and model, when one is configured.
    pub(crate) fn http_provider(&self) -> Option<(&str, &str)> {
        self.http
            .as_ref()
            .map(|h| (h.config().name.as_str(), h.config().model.as_str()))
    }

    /// Whether [`Models::complete`] can reach a model for this request: an HTTP provider
    /// is configured, or the client declared the sampling capability (a family with a
    /// fallback of its own, such as the booster's heuristics, asks this first).
    pub(crate) fn can_call<'a>(&self, request: impl Into<ClientLink<'a>>) -> bool {
        self.http.is_some()
            || request
                .into()
                .client_capabilities
                .is_some_and(|c| c.sampling.is_some())
    }

    /// Asks a model: the HTTP provider when configured, else the client through MCP
    /// sampling (a `sampling/createMessage` request on sessions that came through
    /// `initialize`; an input-required round trip on 2026-07-28 sessions), else a
    /// `config` error. Never holds the call's arrival turn: give it up before calling.
    ///
    /// `tool` names the calling tool (for the sealed request state: a state made for
    /// another tool or other arguments is refused).
    pub(crate) async fn complete<'a>(
        &self,
        tool: &str,
        arguments: &serde_json::Map<String, serde_json::Value>,
        request: impl Into<ClientLink<'a>>,
        chat: &ChatRequest,
        options: &CallOptions,
    ) -> Completion {
        let request: ClientLink<'a> = request.into();
        if let Some(http) = &self.http {
            let (result, record) = http.complete(chat, request.cancel).await;
            return Completion::Done(Box::new(ModelOutcome {
                result,
                record,
                idempotency_key: None,
            }));
        }
        let timeout = options.sampling_timeout.unwrap_or(self.sampling_timeout);
        sampling::complete(
            &self.sealer,
            tool,
            arguments,
            request,
            chat,
            timeout,
            &self.unconfigured_reason,
        )
        .await
    }
}
