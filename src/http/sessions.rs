//! The MCP sessions of `serve --http`, bounded: at most [`HttpLimits::max_sessions`] live
//! sessions overall and [`HttpLimits::max_sessions_per_actor`] per actor, each ended after
//! [`HttpLimits::session_idle_timeout`] without a request or an open stream.
//!
//! Owns: [`BoundedSessions`], rmcp's [`SessionManager`] around its `LocalSessionManager`
//! (which keeps every session it is given until a DELETE or its own 300 s idle expiry,
//! about 200 KB each: issue 36's flood): who each live session belongs to, the admission of
//! an `initialize` (the actor comes from [`admitted`], which the router wraps around the
//! request), the refusal beyond a cap ([`Refusal`]: 503 overall, 429 per actor, with
//! `Retry-After`), the idle reaper, and the live/refused metrics. Closing a session (DELETE,
//! the reaper, the server's end) frees its slot.
//! Must not: end a session while one of its requests or streams is open (a long tool call
//! is not idle), or count the stateless requests of 2026-07-28 (they hold no session).

use super::limits::HttpLimits;
use super::{Body, metrics};
use bytes::Bytes;
use futures_core::Stream;
use http_body_util::{BodyExt, Full};
use hyper::{Response, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use std::cell::Cell;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// The fewest seconds a refusal's `Retry-After` says.
const MIN_RETRY_AFTER_SECS: u64 = 1;

tokio::task_local! {
    /// The actor of the request being routed, and the refusal if its `initialize` found
    /// the caps full.
    static ADMISSION: Admission;
}

struct Admission {
    actor: String,
    refused: Cell<Option<Refusal>>,
}

/// Runs `request` (one MCP request of `actor`) so that a session it creates is counted for
/// `actor`; returns its response, or the refusal if it would have gone over a cap.
pub(super) async fn admitted<F>(actor: &str, request: F) -> Response<Body>
where
    F: Future<Output = Response<Body>>,
{
    let admission = Admission {
        actor: actor.to_string(),
        refused: Cell::new(None),
    };
    ADMISSION
        .scope(admission, async {
            let response = request.await;
            match ADMISSION.with(|admission| admission.refused.take()) {
                Some(refusal) => refusal.response(),
                None => response,
            }
        })
        .await
}

/// Which cap an `initialize` met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `--max-sessions`: 503.
    Overall,
    /// `--max-sessions-per-actor`: 429.
    Actor,
}

impl Scope {
    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Scope::Overall => "overall",
            Scope::Actor => "actor",
        }
    }
}

/// An `initialize` refused: the cap it met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub scope: Scope,
    pub cap: usize,
    pub retry_after: Duration,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.retry_after_secs();
        match self.scope {
            Scope::Overall => write!(
                f,
                "too many MCP sessions: the server holds its cap of {} live sessions \
                 (serve --max-sessions N raises it); retry in {secs} s, when idle ones \
                 have expired",
                self.cap
            ),
            Scope::Actor => write!(
                f,
                "too many MCP sessions for this token: {} live sessions is the cap per actor \
                 (serve --max-sessions-per-actor N raises it); end one (DELETE /mcp with its \
                 Mcp-Session-Id) or retry in {secs} s, when idle ones have expired",
                self.cap
            ),
        }
    }
}

impl Refusal {
    fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_secs().max(MIN_RETRY_AFTER_SECS)
    }

    /// 503 (overall) or 429 (per actor), `Retry-After`, and a JSON-RPC error body.
    pub(super) fn response(&self) -> Response<Body> {
        let (status, flag) = match self.scope {
            Scope::Overall => (StatusCode::SERVICE_UNAVAILABLE, "--max-sessions"),
            Scope::Actor => (StatusCode::TOO_MANY_REQUESTS, "--max-sessions-per-actor"),
        };
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {
                "code": -32000,
                "message": self.to_string(),
                "data": {
                    "cap": self.cap,
                    "scope": self.scope.label(),
                    "flag": flag,
                    "retryAfterSeconds": self.retry_after_secs(),
                },
            },
        });
        let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        headers.insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from(self.retry_after_secs()),
        );
        response
    }
}

/// What [`BoundedSessions`] answers rmcp with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionsError {
    /// Over a cap (the router answers it with [`Refusal::response`]).
    #[error("{0}")]
    Refused(Refusal),
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// One live session.
struct Entry {
    actor: String,
    /// Requests and streams open now.
    open: usize,
    /// When the last one closed (or the session began).
    idle_since: Instant,
}

/// The live sessions: who holds each, and the counts the caps are checked against.
#[derive(Default)]
struct Table {
    /// Sessions counted, including those being created.
    total: usize,
    per_actor: HashMap<String, usize>,
    live: HashMap<SessionId, Entry>,
}

impl Table {
    fn release(&mut self, actor: &str) {
        self.total = self.total.saturating_sub(1);
        if let Some(count) = self.per_actor.get_mut(actor) {
            *count -= 1;
            if *count == 0 {
                self.per_actor.remove(actor);
            }
        }
        metrics::sessions_live(self.total);
    }
}

/// rmcp's `LocalSessionManager` with caps, owners and an idle expiry.
pub(crate) struct BoundedSessions {
    inner: LocalSessionManager,
    table: Mutex<Table>,
    max_sessions: usize,
    max_per_actor: usize,
    idle_timeout: Duration,
}

impl BoundedSessions {
    /// The session manager, and its reaper (a task that ends with it): call inside the
    /// runtime.
    pub(super) fn start(limits: &HttpLimits) -> Arc<BoundedSessions> {
        let mut inner = LocalSessionManager::default();
        // The reaper below is the idle expiry: rmcp's would end a session in the middle of
        // a long tool call (it sees no event while the handler works).
        inner.session_config.keep_alive = None;
        let sessions = Arc::new(BoundedSessions {
            inner,
            table: Mutex::new(Table::default()),
            max_sessions: limits.max_sessions,
            max_per_actor: limits.max_sessions_per_actor,
            idle_timeout: limits.session_idle_timeout,
        });
        let every = (limits.session_idle_timeout / 4).max(Duration::from_millis(100));
        tokio::spawn(reap(Arc::downgrade(&sessions), every));
        sessions
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Live sessions now.
    #[cfg(test)]
    fn live(&self) -> usize {
        self.table().total
    }

    /// Takes a slot for `actor`, or says which cap is full.
    fn take_slot(&self, actor: &str) -> Result<(), Refusal> {
        let mut table = self.table();
        let refusal = |scope, cap| Refusal {
            scope,
            cap,
            retry_after: self.idle_timeout,
        };
        if table.per_actor.get(actor).copied().unwrap_or(0) >= self.max_per_actor {
            return Err(refusal(Scope::Actor, self.max_per_actor));
        }
        if table.total >= self.max_sessions {
            return Err(refusal(Scope::Overall, self.max_sessions));
        }
        table.total += 1;
        *table.per_actor.entry(actor.to_string()).or_default() += 1;
        metrics::sessions_live(table.total);
        Ok(())
    }

    /// A request or stream of `id` opened: the session is busy until the guard drops.
    fn open(self: &Arc<Self>, id: &SessionId) -> Busy {
        if let Some(entry) = self.table().live.get_mut(id) {
            entry.open += 1;
        }
        Busy {
            sessions: Arc::downgrade(self),
            id: id.clone(),
        }
    }

    fn is_expired(&self, entry: &Entry, now: Instant) -> bool {
        entry.open == 0 && entry.idle_since + self.idle_timeout <= now
    }

    /// The sessions idle for the timeout.
    fn expired(&self) -> Vec<SessionId> {
        let now = Instant::now();
        self.table()
            .live
            .iter()
            .filter(|(_, entry)| self.is_expired(entry, now))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Frees the slot of `id` if it is still idle for the timeout; says whether it did.
    fn forget_if_idle(&self, id: &SessionId) -> bool {
        let mut table = self.table();
        let now = Instant::now();
        if !table
            .live
            .get(id)
            .is_some_and(|entry| self.is_expired(entry, now))
        {
            return false;
        }
        let entry = table.live.remove(id).expect("just found");
        table.release(&entry.actor);
        true
    }
}

/// Ends the sessions idle for the timeout, every `every`, while the manager lives.
async fn reap(sessions: Weak<BoundedSessions>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        for id in sessions.expired() {
            // Checked again under the lock: a request may have come since.
            if !sessions.forget_if_idle(&id) {
                continue;
            }
            tracing::debug!(session = %id, "MCP session ended: idle");
            if let Err(error) = sessions.inner.close_session(&id).await {
                tracing::debug!(%error, "ending an idle MCP session");
            }
        }
    }
}

/// A request or stream of a session, open.
struct Busy {
    sessions: Weak<BoundedSessions>,
    id: SessionId,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(sessions) = self.sessions.upgrade()
            && let Some(entry) = sessions.table().live.get_mut(&self.id)
        {
            entry.open = entry.open.saturating_sub(1);
            entry.idle_since = Instant::now();
        }
    }
}

/// A session's stream, keeping the session busy while it is open.
struct Watched<S> {
    inner: Pin<Box<S>>,
    _busy: Busy,
}

impl<S: Stream> Stream for Watched<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.inner.as_mut().poll_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

/// rmcp calls the manager through an `Arc`; the reaper and the stream guards need it too.
pub(crate) struct Sessions(pub(super) Arc<BoundedSessions>);

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let sessions = &self.0;
        let actor = ADMISSION
            .try_with(|admission| admission.actor.clone())
            .unwrap_or_default();
        if let Err(refusal) = sessions.take_slot(&actor) {
            metrics::session_refused(refusal.scope.label());
            tracing::debug!(actor = %actor, cap = refusal.cap, scope = refusal.scope.label(), "MCP session refused");
            let _ = ADMISSION.try_with(|admission| admission.refused.set(Some(refusal)));
            return Err(SessionsError::Refused(refusal));
        }
        match sessions.inner.create_session().await {
            Ok((id, transport)) => {
                sessions.table().live.insert(
                    id.clone(),
                    Entry {
                        actor,
                        open: 0,
                        idle_since: Instant::now(),
                    },
                );
                Ok((id, transport))
            }
            Err(error) => {
                sessions.table().release(&actor);
                Err(error.into())
            }
        }
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let _busy = self.0.open(id);
        Ok(self.0.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.0.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.0.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let busy = self.0.open(id);
        let stream = self.0.inner.create_stream(id, message).await?;
        Ok(Watched {
            inner: Box::pin(stream),
            _busy: busy,
        })
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        let _busy = self.0.open(id);
        Ok(self.0.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let busy = self.0.open(id);
        let stream = self.0.inner.create_standalone_stream(id).await?;
        Ok(Watched {
            inner: Box::pin(stream),
            _busy: busy,
        })
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let busy = self.0.open(id);
        let stream = self.0.inner.resume(id, last_event_id).await?;
        Ok(Watched {
            inner: Box::pin(stream),
            _busy: busy,
        })
    }

    async fn restore_session(
        &self,
        _id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // No session store is configured: a session rmcp does not hold is gone (404).
        Ok(RestoreOutcome::NotSupported)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.0.inner.event_store()
    }
}

impl BoundedSessions {
    /// Ends the session and frees its slot (a DELETE, the reaper, the session's own end).
    async fn close_session(&self, id: &SessionId) -> Result<(), SessionsError> {
        let entry = self.table().live.remove(id);
        if let Some(entry) = entry {
            self.table().release(&entry.actor);
        }
        Ok(self.inner.close_session(id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_sessions: usize, max_per_actor: usize) -> HttpLimits {
        HttpLimits {
            max_sessions,
            max_sessions_per_actor: max_per_actor,
            ..HttpLimits::default()
        }
    }

    #[tokio::test]
    async fn caps_count_per_actor_and_overall_and_a_close_frees_a_slot() {
        let sessions = Sessions(BoundedSessions::start(&limits(3, 2)));
        let create = |actor: &'static str| {
            let sessions = &sessions;
            ADMISSION.scope(
                Admission {
                    actor: actor.into(),
                    refused: Cell::new(None),
                },
                async move { sessions.create_session().await.map(|(id, _)| id) },
            )
        };
        let a1 = create("alice").await.unwrap();
        create("alice").await.unwrap();
        match create("alice").await {
            Err(SessionsError::Refused(refusal)) => assert_eq!(refusal.scope, Scope::Actor),
            other => panic!("{:?}", other.map(|_| ())),
        }
        create("bob").await.unwrap();
        match create("carol").await {
            Err(SessionsError::Refused(refusal)) => assert_eq!(refusal.scope, Scope::Overall),
            other => panic!("{:?}", other.map(|_| ())),
        }
        assert_eq!(sessions.0.live(), 3);
        sessions.close_session(&a1).await.unwrap();
        sessions.close_session(&a1).await.unwrap();
        assert_eq!(sessions.0.live(), 2, "closing twice frees one slot");
        create("alice").await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn the_reaper_ends_only_a_session_idle_for_the_timeout() {
        let limits = HttpLimits {
            session_idle_timeout: Duration::from_secs(60),
            ..HttpLimits::default()
        };
        let sessions = Sessions(BoundedSessions::start(&limits));
        let admission = Admission {
            actor: "alice".into(),
            refused: Cell::new(None),
        };
        let (id, _transport) = ADMISSION
            .scope(admission, sessions.create_session())
            .await
            .unwrap();
        // A call in flight for twice the timeout: never idle.
        let call = sessions.0.open(&id);
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(sessions.0.live(), 1, "ended in the middle of a call");
        drop(call);
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert_eq!(sessions.0.live(), 1, "ended before the timeout");
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(sessions.0.live(), 0, "idle past the timeout");
        assert!(!sessions.has_session(&id).await.unwrap());
    }

    #[test]
    fn a_refusal_says_its_cap_and_how_to_raise_it() {
        let refusal = Refusal {
            scope: Scope::Actor,
            cap: 4,
            retry_after: Duration::from_secs(60),
        };
        let response = refusal.response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[hyper::header::RETRY_AFTER], "60");
        assert!(refusal.to_string().contains("--max-sessions-per-actor"));
    }
}
