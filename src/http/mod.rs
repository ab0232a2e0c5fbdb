//! `serve --http ADDR`: MCP's streamable HTTP transport at `/mcp` (rmcp's
//! `StreamableHttpService` over hyper), for remote clients of a shared server.
//!
//! Owns: where to listen (loopback unless an address is given), the accept loop (a
//! connection slot, then a place among its peer address's; when either is full, the
//! oldest connection that has shown no valid token makes room: [`connections`]), asking
//! [`auth`] (and, with `--oauth-issuer`, [`oauth`]) about each request before it reaches
//! MCP (a wrong or missing token gets 401 and nothing runs; a known token or a good access
//! token names the request's [`crate::request::Actor`], and gives its connection the normal
//! timeouts), and the Host/Origin allow-lists rmcp enforces against DNS rebinding.
//! Sessions are counted and capped in [`sessions`].
//! Must not: let any request through without the token or a good access token, or write
//! anything to stdout.
//!
//! Each HTTP session (the `initialize` generation) gets its own [`LedgerServer`] and
//! [`ToolContext`], all sharing the process's current sessions, which are kept per caller
//! ([`crate::request::Caller`]: actor, client, transport session if any), so a stateless
//! request continues its caller's session as a stdio connection's call does; its
//! tool calls get rmcp's real request context (the peer for sampling and progress, the
//! cancellation token), as over stdio, and share the process's model providers: sampling
//! reaches the HTTP client (`sampling/createMessage` on the session's stream, or the
//! input-required round trip of 2026-07-28). Requests of 2026-07-28 are served statelessly by
//! rmcp (a server per request), and pass session ids and request state explicitly.

mod auth;
mod connections;
pub(crate) mod limits;
pub(crate) mod metrics;
mod oauth;
pub(crate) mod ops;
pub(crate) mod sessions;
pub(crate) mod tokens;

use crate::request::{CurrentSessions, ToolContext};
use crate::server::LedgerServer;
use crate::store::Ledger;
use crate::tools::Toolset;
use anyhow::Context;
use auth::Authenticator;
pub(crate) use auth::{TOKEN_ENV, TOKEN_FILE_NAME};
use bytes::Bytes;
use connections::{ConnectionSlot, ConnectionTable};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
pub(crate) use limits::HttpLimits;
use limits::{ClockedIo, ConnectionClock, Guarded, InFlight};
pub(crate) use oauth::OAuthSettings;
use ops::RequestId;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sessions::{BoundedSessions, Sessions};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The path MCP is served at.
pub(crate) const MCP_PATH: &str = "/mcp";

/// Where and how to serve.
pub(crate) struct HttpSettings {
    /// The `--http` value: `PORT`, `:PORT`, `HOST:PORT` or `[V6]:PORT`.
    pub listen: String,
    /// `--oauth-issuer` and `--oauth-audience`: OAuth access tokens beside the token.
    pub oauth: Option<OAuthSettings>,
    /// Extra names the `Host` header may carry (a public name of this server).
    pub allowed_hosts: Vec<String>,
    /// Extra browser origins allowed (`https://app.example:443`).
    pub allowed_origins: Vec<String>,
    /// Holds the generated token file.
    pub data_dir: PathBuf,
    /// The named tokens file (`--tokens`), and whether it was named explicitly.
    pub tokens: (PathBuf, bool),
    /// Timeouts, the connection cap, the body size limit, the drain timeout.
    pub limits: HttpLimits,
    /// Serve `/metrics` without the token.
    pub metrics_public: bool,
}

/// Parses the `--http` value; a bare port (or `:PORT`) listens on loopback.
pub(crate) fn parse_listen(text: &str) -> anyhow::Result<SocketAddr> {
    let text = text.trim();
    let port_only = text.strip_prefix(':').unwrap_or(text);
    if let Ok(port) = port_only.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Some(port) = text.strip_prefix("localhost:") {
        let port: u16 = port
            .parse()
            .with_context(|| format!("--http {text}: the port is not a number"))?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse::<SocketAddr>().with_context(|| {
        format!("--http {text}: expected PORT, HOST:PORT (an IP address) or [IPv6]:PORT, e.g. 127.0.0.1:8765")
    })
}

type Body = BoxBody<Bytes, Infallible>;

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        "text/plain".parse().expect("header"),
    );
    response
}

/// rmcp's Host and Origin allow-lists for a server bound to `addr`.
fn rmcp_config(
    addr: SocketAddr,
    settings: &HttpSettings,
    cancel: CancellationToken,
) -> StreamableHttpServerConfig {
    let port = addr.port();
    let mut hosts: Vec<String> = vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        "[::1]".into(),
    ];
    let mut origins: Vec<String> = vec![
        format!("http://localhost:{port}"),
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
    ];
    if !addr.ip().is_loopback() && !addr.ip().is_unspecified() {
        hosts.push(addr.ip().to_string());
        origins.push(format!("http://{addr}"));
    }
    hosts.extend(settings.allowed_hosts.iter().cloned());
    origins.extend(settings.allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(cancel)
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    if addr.ip().is_unspecified() && settings.allowed_hosts.is_empty() {
        eprintln!(
            "reasoning-ledger: listening on every interface with no --allowed-host: any Host \
             header is accepted (the bearer token is still required)"
        );
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(hosts)
    }
}

/// What every connection's requests share.
struct Shared {
    service: StreamableHttpService<LedgerServer, Sessions>,
    /// The open connections: per peer address, and who makes room when they are too many.
    table: Arc<ConnectionTable>,
    /// Who a bearer token is (named tokens, the shared `default` one).
    auth: Authenticator,
    /// `--oauth-issuer`: access tokens beside the bearer tokens.
    oauth: Option<oauth::OAuth>,
    ledger: Ledger,
    limits: HttpLimits,
    metrics_public: bool,
    calls: Arc<InFlight>,
    connections: Arc<Semaphore>,
}

impl Shared {
    fn open_connections(&self) -> usize {
        self.limits.max_connections - self.connections.available_permits()
    }
}

/// Serves MCP over streamable HTTP until SIGINT/SIGTERM, then shuts down gracefully: stops
/// accepting, lets calls in flight finish (within the drain timeout), ends the sessions.
pub(crate) async fn serve_http(
    ledger: Ledger,
    toolsets: Vec<Toolset>,
    log_thoughts: bool,
    models: Arc<crate::provider::Models>,
    settings: HttpSettings,
) -> anyhow::Result<()> {
    let addr = parse_listen(&settings.listen)?;
    let limits = settings.limits.clone();
    anyhow::ensure!(
        limits.max_connections > 0 && limits.max_connections <= Semaphore::MAX_PERMITS,
        "--max-connections {}: expected 1 or more",
        limits.max_connections
    );
    anyhow::ensure!(
        limits.max_connections_per_peer > 0,
        "--max-connections-per-peer 0: expected 1 or more"
    );
    anyhow::ensure!(
        limits.max_sessions > 0 && limits.max_sessions_per_actor > 0,
        "--max-sessions and --max-sessions-per-actor: expected 1 or more"
    );
    let auth = Authenticator::load(&settings.data_dir, settings.tokens.clone())?;
    let oauth = match settings.oauth.clone() {
        Some(oauth) => Some(oauth::OAuth::start(oauth).await?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    // Ends every MCP session (and its streams): only once the calls in flight are done.
    let sessions_end = CancellationToken::new();
    let config = rmcp_config(bound, &settings, sessions_end.child_token())
        .with_max_request_body_bytes(limits.max_body_bytes);
    metrics::install();
    let factory_ledger = ledger.clone();
    // One completion index for every connection (and every stateless request).
    let completions = Arc::new(crate::prompts::complete::SessionIndex::default());
    let sessions = BoundedSessions::start(&limits);
    // One set of current sessions, keyed by caller: a stateless request continues what
    // the same actor and client wrote before (`request::Caller`).
    let current = Arc::new(std::sync::Mutex::new(CurrentSessions::default()));
    let service = StreamableHttpService::new(
        move || {
            Ok(LedgerServer::with_context(
                ToolContext::sharing_current(
                    factory_ledger.clone(),
                    log_thoughts,
                    models.clone(),
                    current.clone(),
                ),
                toolsets.clone(),
            )
            .sharing_completions(completions.clone()))
        },
        Arc::new(Sessions(sessions)),
        config,
    );
    eprintln!(
        "reasoning-ledger: serving MCP (streamable HTTP) at http://{bound}{MCP_PATH} on {}",
        ledger.path().display()
    );
    let shared = Arc::new(Shared {
        service,
        table: Arc::default(),
        auth,
        oauth,
        ledger,
        connections: Arc::new(Semaphore::new(limits.max_connections)),
        limits,
        metrics_public: settings.metrics_public,
        calls: Arc::new(InFlight::default()),
    });
    // Tells every connection to finish its request in flight and close.
    let draining = CancellationToken::new();
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, most likely: pause rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
        };
        // A connection slot: when every one is held, the oldest connection that has shown
        // no valid token is closed for this one; else this one waits for a slot (nothing
        // more is accepted meanwhile: later connections wait in the backlog).
        let permit = match shared.connections.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                shared.table.make_room();
                tokio::select! {
                    _ = &mut shutdown => break,
                    permit = shared.connections.clone().acquire_owned() => permit.expect("never closed"),
                }
            }
        };
        // Beyond its peer's share, its address's oldest connection without a valid token
        // is closed for it; with none, this one is closed at once (its slot freed).
        let clock = ConnectionClock::start();
        let Some(slot) = shared.table.admit(
            peer.ip(),
            shared.limits.max_connections_per_peer,
            clock.clone(),
        ) else {
            tracing::debug!(%peer, "connection closed: its address holds --max-connections-per-peer, each with a valid token");
            metrics::connection_refused();
            drop(stream);
            continue;
        };
        // Answers go out as they are written: an SSE answer is several small writes, which
        // Nagle's algorithm would hold for the client's delayed ACK (about 40 ms each).
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        tokio::spawn(serve_connection(
            stream,
            shared.clone(),
            clock,
            (permit, slot),
            draining.clone(),
        ));
    }
    drop(listener);
    let limits = &shared.limits;
    eprintln!(
        "reasoning-ledger: shutting down: finishing the calls in flight (at most {})",
        humantime::format_duration(limits.drain_timeout)
    );
    draining.cancel();
    let deadline = tokio::time::Instant::now() + limits.drain_timeout;
    if tokio::time::timeout_at(deadline, shared.calls.drained())
        .await
        .is_err()
    {
        tracing::warn!("calls still in flight at the end of the drain timeout: not answered");
    }
    sessions_end.cancel();
    let every_slot = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let closed = tokio::time::timeout_at(
        deadline.max(tokio::time::Instant::now() + CLOSE_GRACE),
        shared.connections.acquire_many(every_slot),
    )
    .await;
    if closed.is_err() {
        tracing::warn!("connections still open after the drain timeout: closed");
    }
    eprintln!("reasoning-ledger: stopped");
    Ok(())
}

/// How long the accept loop pauses after a failed accept (out of file descriptors).
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// How long connections get to close once their sessions ended, when the drain timeout
/// is spent.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// One connection: hyper's HTTP/1, closed by its clock's deadline (header or idle timeout)
/// or when evicted to make room, finished gracefully when `draining` fires. Holds its
/// connection slots until closed.
async fn serve_connection(
    stream: tokio::net::TcpStream,
    shared: Arc<Shared>,
    clock: Arc<ConnectionClock>,
    slots: (OwnedSemaphorePermit, ConnectionSlot),
    draining: CancellationToken,
) {
    let handler = {
        let clock = clock.clone();
        let shared = shared.clone();
        hyper::service::service_fn(move |request: Request<Incoming>| {
            let shared = shared.clone();
            let busy = clock.request_started();
            let clock = clock.clone();
            async move {
                // A `GET` is a stream the client holds open: not a call a drain waits for.
                let call = (request.method() != hyper::Method::GET).then(|| shared.calls.enter());
                let id = RequestId::new();
                let header = hyper::header::HeaderValue::from_str(&id.0).expect("a ULID");
                let mut response = route(&shared, &clock, request, id).await;
                response
                    .headers_mut()
                    .insert(ops::REQUEST_ID_HEADER, header);
                Ok::<_, Infallible>(response.map(|body| Guarded {
                    body,
                    _guard: (busy, call),
                }))
            }
        })
    };
    let io = TokioIo::new(ClockedIo {
        inner: stream,
        clock: clock.clone(),
    });
    let connection = hyper::server::conn::http1::Builder::new().serve_connection(io, handler);
    tokio::pin!(connection);
    let mut finishing = false;
    loop {
        let deadline = clock.deadline(&shared.limits);
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "HTTP connection ended with an error");
                }
                return;
            }
            _ = clock.changed() => {}
            _ = slots.1.evicted() => {
                tracing::debug!("HTTP connection closed: evicted for a new one (it showed no valid token)");
                return;
            }
            _ = sleep_until(deadline) => {
                if clock.deadline(&shared.limits).is_some_and(|due| due <= tokio::time::Instant::now()) {
                    tracing::debug!("HTTP connection closed: header or idle timeout");
                    return;
                }
            }
            _ = draining.cancelled(), if !finishing => {
                finishing = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Sleeps until `deadline`; forever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// One request: the probes, `/metrics`, then the token, then MCP with its body read within
/// the body timeout and size limit.
async fn route(
    shared: &Shared,
    clock: &ConnectionClock,
    request: Request<Incoming>,
    id: RequestId,
) -> Response<Body> {
    if let Some(metadata) = shared
        .oauth
        .as_ref()
        .and_then(|oauth| oauth.metadata_response(&request))
    {
        return metadata;
    }
    let path = request.uri().path();
    match path {
        ops::HEALTH_PATH => return ops::health(),
        ops::READY_PATH => return ops::ready(&shared.ledger).await,
        ops::METRICS_PATH if shared.metrics_public => {
            return ops::metrics(shared.open_connections());
        }
        MCP_PATH | ops::METRICS_PATH => {}
        _ => {
            return plain(StatusCode::NOT_FOUND, "not found: MCP is served at /mcp\n");
        }
    }
    let actor = match shared.auth.actor(&request) {
        Some(actor) => Some(actor),
        // Not a bearer token: an OAuth access token, if OAuth is on; its `sub` (or `name`)
        // is the actor of what it writes.
        None => match &shared.oauth {
            Some(oauth) => match oauth.admit(&request).await {
                Ok(name) => Some(crate::request::Actor::new(&name)),
                Err(refused) => return refused,
            },
            None => None,
        },
    };
    let Some(actor) = actor else {
        let mut response = plain(
            StatusCode::UNAUTHORIZED,
            "unauthorized: send Authorization: Bearer <token> (REASONING_LEDGER_TOKEN or the server's token file)\n",
        );
        response.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            "Bearer".parse().expect("header"),
        );
        return response;
    };
    // A valid token: the connection keeps the normal idle timeout from now on.
    clock.authenticated();
    if path == ops::METRICS_PATH {
        return ops::metrics(shared.open_connections());
    }
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(id);
    // The tool calls of this request record who sent it; a session it creates is its.
    let owner = actor.0.to_string();
    parts.extensions.insert(actor);
    let limited = Limited::new(body, shared.limits.max_body_bytes);
    let body = match tokio::time::timeout(shared.limits.body_timeout, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.is::<LengthLimitError>() => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload too large: see --max-body-bytes\n",
            );
        }
        Ok(Err(_)) => return plain(StatusCode::BAD_REQUEST, "the request body broke off\n"),
        Err(_) => {
            return plain(
                StatusCode::REQUEST_TIMEOUT,
                "request timeout: the body did not arrive within --body-timeout\n",
            );
        }
    };
    let closing = parts.method == hyper::Method::DELETE;
    let mut response = sessions::admitted(
        &owner,
        shared
            .service
            .handle(Request::from_parts(parts, Full::new(body))),
    )
    .await;
    // rmcp answers a closed session 202; clients expect 200 or 204 (the Python SDK logs
    // "Session termination failed: 202" on every disconnect).
    if closing && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_listens_on_loopback_and_an_address_where_it_says() {
        assert_eq!(
            parse_listen("8765").unwrap(),
            "127.0.0.1:8765".parse().unwrap()
        );
        assert_eq!(
            parse_listen(":8765").unwrap(),
            "127.0.0.1:8765".parse().unwrap()
        );
        assert_eq!(
            parse_listen("localhost:1").unwrap(),
            "127.0.0.1:1".parse().unwrap()
        );
        assert_eq!(
            parse_listen("0.0.0.0:80").unwrap(),
            "0.0.0.0:80".parse().unwrap()
        );
        assert_eq!(parse_listen("[::1]:9").unwrap(), "[::1]:9".parse().unwrap());
        assert!(parse_listen("example.com:80").is_err());
    }
}
