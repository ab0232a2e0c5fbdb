//! What keeps `serve --http` standing under load and abuse: the limits (each a setting with
//! a named default), each connection's timeouts, and the count of calls in flight that a
//! graceful shutdown waits for.
//!
//! Owns: [`HttpLimits`] and its defaults; [`ConnectionClock`], one connection's phase
//! (awaiting a request head, busy with requests, idle between them) and the deadline that
//! phase gives it: the header-read timeout runs from the connection's start, or from the
//! first byte of a later request, until the head is parsed; the idle timeout from the end
//! of a response until the next byte; none while a request is served (its body has its own
//! timeout, a response stream none); both shortened to the unauthenticated timeout until
//! the connection has sent a request with a valid token; [`ClockedIo`], the socket
//! reporting arrivals to its clock (who makes room in a full table: `connections.rs`);
//! [`InFlight`], the calls (every request but a `GET` stream) not yet answered.
//! Must not: cut a connection while one of its requests is being served, or touch MCP.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Default of `--max-sessions`: live MCP sessions at most. A session costs about 200 KB
/// (issue 36's measure: 1,500 took 600 MB), so 256 hold about 50 MB at worst, while a team
/// of a few dozen people with several clients each stays far below it.
pub(crate) const DEFAULT_MAX_SESSIONS: usize = 256;

/// Default of `--max-sessions-per-actor`: live sessions of one actor (a named token, the
/// shared `default` token, an OAuth subject). One actor takes at most a quarter of
/// [`DEFAULT_MAX_SESSIONS`] (about 13 MB), so three others always find room; and a team
/// that shares the `default` token (one actor) still runs 64 clients at once, as the team
/// load test does (`tests/services/team_load.rs`). Clients that leak sessions without a
/// DELETE get their slots back after the idle timeout.
pub(crate) const DEFAULT_MAX_SESSIONS_PER_ACTOR: usize = 64;

/// Default of `--session-idle-timeout`: a session with no request and no open stream for
/// this long is ended (rmcp's own expiry is 300 s and counts a long tool call as idle;
/// this one never ends a session with a request or a stream open). A client that comes
/// back later gets 404 and initializes again, as the protocol says.
pub(crate) const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default of `--header-timeout`: longest a request head may take to arrive.
pub(crate) const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of `--idle-timeout`: longest a keep-alive connection may sit between requests.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of `--body-timeout`: longest a request body may take to arrive once its head
/// has.
pub(crate) const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of `--max-connections`: connections (file descriptors) held open at most; more
/// wait in the listen backlog.
pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 1_024;
/// Default of `--max-body-bytes`: the largest request body (4 MiB, rmcp's own default).
pub(crate) const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Default of `--drain-timeout`: how long a shutdown waits for calls in flight.
pub(crate) const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of `--max-connections-per-peer`: connections one peer address may hold; beyond
/// it the address's oldest connection that has shown no valid token is closed for the new
/// one, which is refused only when there is none. A quarter of [`DEFAULT_MAX_CONNECTIONS`]: one address cannot take
/// every slot (issue 36: 1,030 idle connections from one client), while one host running
/// many clients (a NAT, a CI machine, the team-load test's 64 MCP clients, each a `POST`
/// connection, a `GET` stream and pooled spares: about 130–200) is still served whole.
pub(crate) const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 256;
/// Default of `--unauthenticated-timeout`: how long a connection that has not yet sent a
/// request with a valid token may wait for its head or sit idle (then the normal header
/// and idle timeouts apply). A real client sends its request at once after connecting;
/// probes (`/healthz`) open a connection per check or come back within seconds.
pub(crate) const DEFAULT_UNAUTHENTICATED_TIMEOUT: Duration = Duration::from_secs(5);

/// The HTTP server's limits.
#[derive(Clone, Debug)]
pub(crate) struct HttpLimits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub body_timeout: Duration,
    pub max_connections: usize,
    pub max_body_bytes: usize,
    pub drain_timeout: Duration,
    pub max_connections_per_peer: usize,
    pub unauthenticated_timeout: Duration,
    pub max_sessions: usize,
    pub max_sessions_per_actor: usize,
    pub session_idle_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            unauthenticated_timeout: DEFAULT_UNAUTHENTICATED_TIMEOUT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_actor: DEFAULT_MAX_SESSIONS_PER_ACTOR,
            session_idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT,
        }
    }
}

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// A request head is (or may be) arriving, since then.
    AwaitingHead(Instant),
    /// This many requests are being served (their responses not yet finished).
    Busy(usize),
    /// Between requests, since then.
    Idle(Instant),
}

/// One connection's phase, and a wake-up for the task enforcing its deadline.
pub(super) struct ConnectionClock {
    phase: Mutex<Phase>,
    changed: Notify,
    /// A request with a valid token came on it: the normal timeouts apply.
    authenticated: AtomicBool,
}

impl ConnectionClock {
    /// A new connection: its first head is awaited from now.
    pub(super) fn start() -> Arc<ConnectionClock> {
        Arc::new(ConnectionClock {
            phase: Mutex::new(Phase::AwaitingHead(Instant::now())),
            changed: Notify::new(),
            authenticated: AtomicBool::new(false),
        })
    }

    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Bytes arrived: an idle connection starts receiving a head.
    fn bytes_arrived(&self) {
        let mut phase = self.phase();
        if let Phase::Idle(_) = *phase {
            *phase = Phase::AwaitingHead(Instant::now());
            drop(phase);
            self.changed.notify_one();
        }
    }

    /// A request's head was parsed: the connection is busy until the guard (carried by the
    /// response body) is dropped.
    pub(super) fn request_started(self: &Arc<Self>) -> RequestGuard {
        {
            let mut phase = self.phase();
            *phase = match *phase {
                Phase::Busy(n) => Phase::Busy(n + 1),
                _ => Phase::Busy(1),
            };
        }
        self.changed.notify_one();
        RequestGuard {
            clock: self.clone(),
        }
    }

    /// A request with a valid token arrived: the connection gets the normal timeouts.
    pub(super) fn authenticated(&self) {
        self.authenticated.store(true, Ordering::Relaxed);
    }

    /// Whether the connection may be closed to make room for another: it has not sent a
    /// request with a valid token, and no request of it is being served.
    pub(super) fn evictable(&self) -> bool {
        !self.authenticated.load(Ordering::Relaxed) && !matches!(*self.phase(), Phase::Busy(_))
    }

    /// When the connection is to be closed unless its phase changes; `None` while busy.
    pub(super) fn deadline(&self, limits: &HttpLimits) -> Option<Instant> {
        let short = |timeout: Duration| {
            if self.authenticated.load(Ordering::Relaxed) {
                timeout
            } else {
                timeout.min(limits.unauthenticated_timeout)
            }
        };
        match *self.phase() {
            Phase::AwaitingHead(since) => Some(since + short(limits.header_timeout)),
            Phase::Idle(since) => Some(since + short(limits.idle_timeout)),
            Phase::Busy(_) => None,
        }
    }

    /// Resolves when the phase may have changed (the deadline is to be read again).
    pub(super) async fn changed(&self) {
        self.changed.notified().await
    }
}

/// Held while a request is served; the connection goes idle when the last one drops.
pub(super) struct RequestGuard {
    clock: Arc<ConnectionClock>,
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        {
            let mut phase = self.clock.phase();
            *phase = match *phase {
                Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
                _ => Phase::Idle(Instant::now()),
            };
        }
        self.clock.changed.notify_one();
    }
}

/// A socket that tells its connection's clock when bytes arrive.
pub(super) struct ClockedIo<T> {
    pub(super) inner: T,
    pub(super) clock: Arc<ConnectionClock>,
}

impl<T: AsyncRead + Unpin> AsyncRead for ClockedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.bytes_arrived();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ClockedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The calls in flight (requests other than `GET` streams, not yet answered): what a
/// graceful shutdown waits for.
#[derive(Default)]
pub(super) struct InFlight {
    count: AtomicUsize,
    finished: Notify,
}

impl InFlight {
    /// One more call in flight until the guard drops.
    pub(super) fn enter(self: &Arc<Self>) -> CallGuard {
        self.count.fetch_add(1, Ordering::SeqCst);
        CallGuard {
            calls: self.clone(),
        }
    }

    /// Resolves when no call is in flight.
    pub(super) async fn drained(&self) {
        loop {
            let finished = self.finished.notified();
            tokio::pin!(finished);
            finished.as_mut().enable();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            finished.await;
        }
    }
}

/// Held while a call is in flight.
pub(super) struct CallGuard {
    calls: Arc<InFlight>,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if self.calls.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.calls.finished.notify_waiters();
        }
    }
}

/// A response body that holds guards until hyper has sent it all (or dropped it).
pub(super) struct Guarded<G> {
    pub(super) body: BoxBody<Bytes, Infallible>,
    pub(super) _guard: G,
}

impl<G: Unpin> Body for Guarded<G> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_timed_by_its_phase() {
        let limits = HttpLimits {
            header_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(5),
            ..HttpLimits::default()
        };
        let clock = ConnectionClock::start();
        clock.authenticated();
        let start = Instant::now();
        assert_eq!(clock.deadline(&limits), Some(start + limits.header_timeout));
        let guard = clock.request_started();
        assert_eq!(clock.deadline(&limits), None, "never cut while serving");
        let second = clock.request_started();
        drop(guard);
        assert_eq!(clock.deadline(&limits), None);
        tokio::time::advance(Duration::from_secs(2)).await;
        drop(second);
        let idle_since = Instant::now();
        assert_eq!(
            clock.deadline(&limits),
            Some(idle_since + limits.idle_timeout)
        );
        tokio::time::advance(Duration::from_secs(3)).await;
        clock.bytes_arrived();
        assert_eq!(
            clock.deadline(&limits),
            Some(Instant::now() + limits.header_timeout),
            "a head's first byte starts the header timeout"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_a_valid_token_gets_the_short_timeout() {
        let limits = HttpLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            unauthenticated_timeout: Duration::from_secs(2),
            ..HttpLimits::default()
        };
        let clock = ConnectionClock::start();
        let start = Instant::now();
        assert_eq!(
            clock.deadline(&limits),
            Some(start + Duration::from_secs(2))
        );
        drop(clock.request_started());
        assert_eq!(
            clock.deadline(&limits),
            Some(Instant::now() + Duration::from_secs(2))
        );
        let guard = clock.request_started();
        clock.authenticated();
        drop(guard);
        assert_eq!(
            clock.deadline(&limits),
            Some(Instant::now() + limits.idle_timeout)
        );
    }

    #[tokio::test]
    async fn a_drain_waits_for_every_call() {
        let calls = Arc::new(InFlight::default());
        calls.drained().await;
        let first = calls.enter();
        let second = calls.enter();
        let waiter = tokio::spawn({
            let calls = calls.clone();
            async move { calls.drained().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(second);
        waiter.await.unwrap();
    }
}
