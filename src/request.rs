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
use crate::telemetry::call::CallTrace;
use rmcp::RoleServer;
use rmcp::model::{InputResponses, ProgressToken};
use rmcp::service::Peer;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Most current sessions one process remembers (callers × kinds × thread purposes):
/// beyond it the one used longest ago is forgotten (its next call without a session id
/// starts a session, and says so).
pub(crate) const MAX_CURRENT_SESSIONS: usize = 4_096;

/// Who a call comes from, as far as the request says: the sessions a call without a
/// session id continues are this caller's own ([`CurrentSessions`]). The same rule on
/// every transport: the actor (HTTP: the token's name or the OAuth subject), the
/// client's name (`clientInfo`, per request under 2026-07-28, else from `initialize`),
/// and the transport session where there is one (HTTP of the `initialize`
/// generation). Over stdio the process is one caller; a stateless HTTP request
/// (2026-07-28) is its actor and client.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Caller {
    pub actor: Option<Actor>,
    pub client: Option<String>,
    pub connection: Option<String>,
}

impl Caller {
    /// The caller of a tool call: its actor, the client's name, and the HTTP transport
    /// session (`Mcp-Session-Id`) when the request carries one.
    pub(crate) fn of_call(
        context: &rmcp::service::RequestContext<RoleServer>,
        actor: Option<Actor>,
    ) -> Self {
        let connection = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.headers.get("mcp-session-id"))
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        Caller {
            actor,
            client: context.client_info().map(|info| info.name),
            connection,
        }
    }
}

/// The sessions calls without a session id continue: per caller, kind and key (think:
/// the thread purpose; otherwise empty), the session last written under them. Shared by
/// every connection of a process (and every stateless request); bounded by
/// [`MAX_CURRENT_SESSIONS`].
#[derive(Debug, Default)]
pub(crate) struct CurrentSessions {
    /// Hashed with foldhash (seeded per process): looked up and set on every call.
    remembered:
        HashMap<(Caller, SessionKind, String), (SessionId, u64), foldhash::fast::RandomState>,
    /// Counts uses: the entry with the smallest is forgotten first.
    clock: u64,
}

impl CurrentSessions {
    /// The session `caller` last wrote of `kind` under `key`, if remembered.
    pub(crate) fn get(&self, caller: &Caller, kind: SessionKind, key: &str) -> Option<SessionId> {
        // A lookup by borrowed parts would need a second map; callers are small.
        self.remembered
            .get(&(caller.clone(), kind, key.to_string()))
            .map(|(session, _)| *session)
    }

    /// Remembers `session` as `caller`'s current one of `kind` under `key`.
    pub(crate) fn set(
        &mut self,
        caller: &Caller,
        kind: SessionKind,
        key: String,
        session: SessionId,
    ) {
        self.clock += 1;
        let entry = (caller.clone(), kind, key);
        if self.remembered.len() >= MAX_CURRENT_SESSIONS
            && !self.remembered.contains_key(&entry)
            && let Some(oldest) = self
                .remembered
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(entry, _)| entry.clone())
        {
            self.remembered.remove(&oldest);
        }
        self.remembered.insert(entry, (session, self.clock));
    }
}

/// What every tool call can reach.
pub(crate) struct ToolContext {
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
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn new(ledger: Ledger, log_thoughts: bool) -> Arc<Self> {
        Self::with_models(ledger, log_thoughts, Models::unconfigured())
    }

    /// A context whose tools call `models`.
    pub(crate) fn with_models(
        ledger: Ledger,
        log_thoughts: bool,
        models: Arc<Models>,
    ) -> Arc<Self> {
        Self::sharing_current(ledger, log_thoughts, models, Arc::default())
    }

    /// A context whose calls continue the sessions of `current`: every connection of
    /// `serve --http` (and every stateless request) shares the process's one.
    pub(crate) fn sharing_current(
        ledger: Ledger,
        log_thoughts: bool,
        models: Arc<Models>,
        current: Arc<Mutex<CurrentSessions>>,
    ) -> Arc<Self> {
        Arc::new(ToolContext {
            ledger,
            current,
            log_thoughts,
            models,
        })
    }

    /// The data directory: the folder holding the ledger file, where user data such as
    /// workflow templates lives beside it.
    pub(crate) fn data_dir(&self) -> Option<&std::path::Path> {
        self.ledger.path().parent()
    }
}

/// The name behind an HTTP request (a named token's name, an OAuth subject): recorded on
/// every event the request writes. [`crate::http`] puts it on the HTTP request's
/// extensions once the request is authorized; rmcp hands the request's parts to the tool
/// call, where [`Actor::of_call`] finds it. stdio calls have none.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Actor(pub Arc<str>);

impl Actor {
    pub(crate) fn new(name: &str) -> Self {
        Actor(name.into())
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The actor of a tool call: the one on the HTTP request it came in, if any.
    pub(crate) fn of_call(extensions: &rmcp::model::Extensions) -> Option<Actor> {
        extensions
            .get::<http::request::Parts>()?
            .extensions
            .get::<Actor>()
            .cloned()
    }
}

/// The request a call came in: who to ask (sampling), when to stop, where to report
/// progress, and its place in the connection's arrival order.
pub(crate) struct Request {
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
    /// Whose current sessions a call without a session id continues.
    pub caller: Caller,
    /// The request's span, when telemetry is on ([`crate::telemetry`]): the write path
    /// reports the events it committed to it.
    pub(crate) trace: Option<Arc<CallTrace>>,
}

impl Request {
    /// A request outside any connection (tests, the CLI).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn detached() -> Self {
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
            caller: Caller::default(),
            trace: None,
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
pub(crate) struct ToolCall {
    pub ctx: Arc<ToolContext>,
    /// The tool name as called (an alias stays an alias).
    pub name: String,
    /// Arguments exactly as the client sent them.
    pub arguments: Map<String, Value>,
    /// When the call was received (for the recorded duration).
    pub received: Instant,
    pub request: Request,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(client: &str) -> Caller {
        Caller {
            actor: None,
            client: Some(client.to_string()),
            connection: None,
        }
    }

    #[test]
    fn current_sessions_are_per_caller_kind_and_key_and_bounded() {
        let kind = SessionKind::new("note");
        let mut current = CurrentSessions::default();
        let (a, b) = (SessionId::generate(), SessionId::generate());
        current.set(&caller("one"), kind, "A".into(), a);
        current.set(&caller("one"), kind, "B".into(), b);
        assert_eq!(current.get(&caller("one"), kind, "A"), Some(a));
        assert_eq!(current.get(&caller("one"), kind, "B"), Some(b));
        assert_eq!(current.get(&caller("two"), kind, "A"), None);
        // Beyond the bound, the entry used longest ago goes first.
        for i in 0..MAX_CURRENT_SESSIONS {
            current.set(&caller(&format!("c{i}")), kind, String::new(), a);
        }
        assert_eq!(current.remembered.len(), MAX_CURRENT_SESSIONS);
        assert_eq!(current.get(&caller("one"), kind, "A"), None);
    }
}
