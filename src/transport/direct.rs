//! Plain tool calls answered by the transport itself, not through rmcp's request loop.
//!
//! rmcp handles every request the same way: a child cancellation token pair, an entry in
//! its table of running requests, a task of its own (about 5.5 KiB, allocated and moved
//! per request: its handler future holds room for every method's), task-local scopes, and
//! a second task that sends the answer back through the loop. For a stdio server that is
//! a sixth of the CPU of a `sequentialthinking` call (issue 41's profile). So once the
//! client has initialized, a plain `tools/call` (no `_meta`: no progress token, no
//! per-request protocol data) of a tool that never asks the client anything
//! ([`DirectCalls::takes`]) is run in one task here and its answer written straight to
//! stdout; everything else goes to rmcp exactly as before.
//!
//! Kept from rmcp's handling, so a client sees no difference: the answer is the message
//! rmcp would send for the handler's result; a `notifications/cancelled` naming a running
//! call cancels it and its answer is not sent (rmcp drops a cancelled request's answer);
//! at the end of input every call taken is answered before the input ends, within
//! [`DRAIN_LIMIT`] (rmcp drains its handlers the same way).
//!
//! Must not: take a call before `notifications/initialized` went by, or one with `_meta`;
//! end the input while a call it took may still be answered within the limit.

use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, RequestId};
use rmcp::service::TxJsonRpcMessage;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::request::arrival::Arrival;

/// How long the end of input waits for the calls still running here to be answered
/// (rmcp waits as long for its own at the end of input).
pub(crate) const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// The answer to one call, as the JSON-RPC message to send.
pub(crate) type DirectAnswer = Pin<Box<dyn Future<Output = TxJsonRpcMessage<RoleServer>> + Send>>;

/// What runs the calls the transport answers itself: the server of the connection.
pub(crate) trait DirectCalls: Send + Sync + 'static {
    /// Whether a call of tool `name` is answered here: the connection is initialized in a
    /// protocol generation with a lifecycle, and the tool never asks the client anything
    /// (no sampling, no progress).
    fn takes(&self, name: &str) -> bool;

    /// Runs one call: `arrival` is its place in the connection's order of calls, `cancel`
    /// is cancelled when the client cancels it.
    fn answer(
        &self,
        params: CallToolRequestParams,
        id: RequestId,
        arrival: Arrival,
        cancel: CancellationToken,
    ) -> DirectAnswer;
}

/// The transport's side: the calls running here.
pub(super) struct Direct {
    pub(super) calls: Arc<dyn DirectCalls>,
    /// Whether `notifications/initialized` went by: no call is taken before.
    pub(super) initialized: bool,
    /// The cancellation of each call running here, by request id; a call whose entry is
    /// gone when it ends was cancelled, and its answer is not sent.
    pub(super) running: Arc<Mutex<HashMap<RequestId, CancellationToken>>>,
    pub(super) tasks: JoinSet<()>,
}

impl Direct {
    pub(super) fn new(calls: Arc<dyn DirectCalls>) -> Self {
        Direct {
            calls,
            initialized: false,
            running: Arc::default(),
            tasks: JoinSet::new(),
        }
    }

    /// Cancels the call `id` if it runs here (its answer is then not sent).
    pub(super) fn cancel(&self, id: &RequestId) {
        if let Some(token) = lock(&self.running).remove(id) {
            token.cancel();
        }
    }

    /// Forgets the tasks that ended (their answers are written).
    pub(super) fn reap(&mut self) {
        while self.tasks.try_join_next().is_some() {}
    }

    /// Waits, up to [`DRAIN_LIMIT`], for every call running here to be answered.
    pub(super) async fn drain(&mut self) {
        let tasks = &mut self.tasks;
        let drained = tokio::time::timeout(DRAIN_LIMIT, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("timed out answering the calls still running at the end of input");
        }
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}
