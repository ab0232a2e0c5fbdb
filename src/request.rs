//! The context of one tool call: what the process gives every call, and what the request
//! it came in carries.
//!
//! Owns: [`ToolContext`] (the ledger handle, the process's [`CurrentSessions`], the
//! models), [`Request`] (peer, cancellation, progress token, the call's [`arrival`] turn,
//! the client's input-required answers and capabilities, its [`Actor`]), and [`ToolCall`] (one call with
//! both; families' writes go through [`crate::tools::write`], which adds to it). The
//! front ends ([`crate::server`], [`crate::http`], the CLI) build these; the families
//! consume them. Must not: name a family or the registry, or reach the client other than
//! through [`Request::peer`]. [`crate::provider`] sees a request only as its own
//! [`ClientLink`] (made here), so the arrow runs request → provider.

pub(crate) mod arrival;

use crate::event::{SessionId, SessionKind};
use crate::provider::{ClientLink, Models};
use crate::store::Ledger;
use rmcp::RoleServer;
use rmcp::model::{InputResponses, ProgressToken};
use rmcp::service::Peer;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The session a process continues, per kind, when a call names none: the session and
/// the key it was remembered under (think: the thread purpose; otherwise empty).
#[derive(Debug, Default)]
pub struct CurrentSessions {
    by_kind: HashMap<SessionKind, (SessionId, String)>,
}

impl CurrentSessions {
    /// The current session of `kind` if it was remembered under `key`.
    pub fn get(&self, kind: SessionKind, key: &str) -> Option<SessionId> {
        self.by_kind
            .get(&kind)
            .filter(|(_, remembered)| remembered == key)
            .map(|(session, _)| *session)
    }

    pub fn set(&mut self, kind: SessionKind, session: SessionId, key: String) {
        self.by_kind.insert(kind, (session, key));
    }
}

/// What every tool call can reach.
pub struct ToolContext {
    pub ledger: Ledger,
    /// Updated inside write jobs (on the writer thread, in commit order).
    pub current: Arc<Mutex<CurrentSessions>>,
    /// Draw the stderr box for each thought (off with DISABLE_THOUGHT_LOGGING=true).
    pub log_thoughts: bool,
    /// The models tools may call ([`crate::provider`]).
    pub models: Arc<Models>,
}

impl ToolContext {
    /// A context without an HTTP model provider (sampling only).
    pub fn new(ledger: Ledger, log_thoughts: bool) -> Arc<Self> {
        Self::with_models(ledger, log_thoughts, Models::unconfigured())
    }

    /// A context whose tools call `models`.
    pub fn with_models(ledger: Ledger, log_thoughts: bool, models: Arc<Models>) -> Arc<Self> {
        Arc::new(ToolContext {
            ledger,
            current: Arc::new(Mutex::new(CurrentSessions::default())),
            log_thoughts,
            models,
        })
    }

    /// The data directory: the folder holding the ledger file, where user data such as
    /// workflow templates lives beside it.
    pub fn data_dir(&self) -> Option<&std::path::Path> {
        self.ledger.path().parent()
    }
}

/// The name behind an HTTP request (a named token's name, an OAuth subject): recorded on
/// every event the request writes. [`crate::http`] puts it on the HTTP request's
/// extensions once the request is authorized; rmcp hands the request's parts to the tool
/// call, where [`Actor::of_call`] finds it. stdio calls have none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor(pub Arc<str>);

impl Actor {
    pub fn new(name: &str) -> Self {
        Actor(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The actor of a tool call: the one on the HTTP request it came in, if any.
    pub fn of_call(extensions: &rmcp::model::Extensions) -> Option<Actor> {
        extensions
            .get::<http::request::Parts>()?
            .extensions
            .get::<Actor>()
            .cloned()
    }
}

/// The request a call came in: who to ask (sampling), when to stop, where to report
/// progress, and its place in the connection's arrival order.
pub struct Request {
    /// The client, when the call came over a connection (sampling, notifications).
    pub peer: Option<Peer<RoleServer>>,
    /// Cancelled when the client cancels the request.
    pub cancel: CancellationToken,
    /// The client's progress token, if it asked for progress.
    pub progress: Option<ProgressToken>,
    /// The call's turn to write ([`arrival`]).
    pub turn: arrival::Turn,
    /// The client's answers to what an earlier round of this call asked for (protocol
    /// 2026-07-28 "input required" round trips).
    pub input_responses: Option<InputResponses>,
    /// The state an earlier round handed the client, echoed back (untrusted).
    pub request_state: Option<String>,
    /// The protocol version of the request (2026-07-28 and later: no server-to-client
    /// requests; sampling goes through input-required rounds).
    pub protocol_version: Option<rmcp::model::ProtocolVersion>,
    /// What the client declared it can do (sampling, for the provider layer).
    pub client_capabilities: Option<rmcp::model::ClientCapabilities>,
    /// Who sent it (HTTP with a named token or OAuth): every event it writes carries it.
    pub actor: Option<Actor>,
}

impl Request {
    /// A request outside any connection (tests, the CLI).
    pub fn detached() -> Self {
        Request {
            peer: None,
            cancel: CancellationToken::new(),
            progress: None,
            turn: arrival::Turn::unordered(),
            input_responses: None,
            request_state: None,
            protocol_version: None,
            client_capabilities: None,
            actor: None,
        }
    }
}

/// What a model call needs of the request: the client to ask and how.
impl<'a> From<&'a Request> for ClientLink<'a> {
    fn from(request: &'a Request) -> Self {
        ClientLink {
            peer: request.peer.as_ref(),
            cancel: &request.cancel,
            input_responses: request.input_responses.as_ref(),
            request_state: request.request_state.as_deref(),
            protocol_version: request.protocol_version.as_ref(),
            client_capabilities: request.client_capabilities.as_ref(),
        }
    }
}

/// One tool call, as a family's `call` receives it.
pub struct ToolCall {
    pub ctx: Arc<ToolContext>,
    /// The tool name as called (an alias stays an alias).
    pub name: String,
    /// Arguments exactly as the client sent them.
    pub arguments: Map<String, Value>,
    /// When the call was received (for the recorded duration).
    pub received: Instant,
    pub request: Request,
}
