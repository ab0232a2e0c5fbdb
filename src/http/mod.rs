//! `serve --http ADDR`: MCP's streamable HTTP transport at `/mcp` (rmcp's
//! `StreamableHttpService` over hyper), for remote clients of a shared server.
//!
//! Owns: where to listen (loopback unless an address is given), the accept loop, asking
//! [`auth`] (and, with `--oauth-issuer`, [`oauth`]) about each request before it reaches
//! MCP (a wrong or missing token gets 401 and nothing runs; a known token or a good access
//! token names the request's [`crate::request::Actor`]), and the Host/Origin allow-lists
//! rmcp enforces against DNS rebinding.
//! Must not: let any request through without the token or a good access token, or write
//! anything to stdout.
//!
//! Each HTTP session (the `initialize` generation) gets its own [`LedgerServer`] and
//! [`ToolContext`] (its "current session" is its own, as a stdio connection's is); its
//! tool calls get rmcp's real request context (the peer for sampling and progress, the
//! cancellation token), as over stdio, and share the process's model providers: sampling
//! reaches the HTTP client (`sampling/createMessage` on the session's stream, or the
//! input-required round trip of 2026-07-28). Requests of 2026-07-28 are served statelessly by
//! rmcp (a server per request), and pass session ids and request state explicitly.

mod auth;
mod oauth;
pub(crate) mod tokens;

use crate::request::ToolContext;
use crate::server::LedgerServer;
use crate::store::Ledger;
use crate::tools::Toolset;
use anyhow::Context;
use auth::Authenticator;
pub(crate) use auth::{TOKEN_ENV, TOKEN_FILE_NAME};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
pub(crate) use oauth::OAuthSettings;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
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

/// Serves MCP over streamable HTTP until SIGINT/SIGTERM.
pub(crate) async fn serve_http(
    ledger: Ledger,
    toolsets: Vec<Toolset>,
    log_thoughts: bool,
    models: Arc<crate::provider::Models>,
    settings: HttpSettings,
) -> anyhow::Result<()> {
    let addr = parse_listen(&settings.listen)?;
    let auth = Arc::new(Authenticator::load(
        &settings.data_dir,
        settings.tokens.clone(),
    )?);
    let oauth = match settings.oauth.clone() {
        Some(oauth) => Some(Arc::new(oauth::OAuth::start(oauth).await?)),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    let cancel = CancellationToken::new();
    let config = rmcp_config(bound, &settings, cancel.child_token());
    let factory_ledger = ledger.clone();
    // One completion index for every connection (and every stateless request).
    let completions = Arc::new(crate::prompts::complete::SessionIndex::default());
    let service = StreamableHttpService::new(
        move || {
            Ok(LedgerServer::with_context(
                ToolContext::with_models(factory_ledger.clone(), log_thoughts, models.clone()),
                toolsets.clone(),
            )
            .sharing_completions(completions.clone()))
        },
        Arc::new(LocalSessionManager::default()),
        config,
    );
    eprintln!(
        "reasoning-ledger: serving MCP (streamable HTTP) at http://{bound}{MCP_PATH} on {}",
        ledger.path().display()
    );
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    continue;
                }
            },
        };
        let service = service.clone();
        let auth = auth.clone();
        let oauth = oauth.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |mut request: Request<Incoming>| {
                let service = service.clone();
                let auth = auth.clone();
                let oauth = oauth.clone();
                async move {
                    if let Some(metadata) =
                        oauth.as_ref().and_then(|o| o.metadata_response(&request))
                    {
                        return Ok(metadata);
                    }
                    if request.uri().path() != MCP_PATH {
                        return Ok::<_, Infallible>(plain(
                            StatusCode::NOT_FOUND,
                            "not found: MCP is served at /mcp\n",
                        ));
                    }
                    let actor = match auth.actor(&request) {
                        Some(actor) => Some(actor),
                        // Not a bearer token: an OAuth access token, if OAuth is on; its
                        // `sub` (or `name`) is the actor of what it writes.
                        None => match &oauth {
                            Some(oauth) => match oauth.admit(&request).await {
                                Ok(name) => Some(crate::request::Actor::new(&name)),
                                Err(refused) => return Ok(refused),
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
                        return Ok(response);
                    };
                    // The tool calls of this request record who sent it.
                    request.extensions_mut().insert(actor);
                    Ok(service.handle(request).await)
                }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handler);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "HTTP connection ended with an error");
                    }
                }
                _ = cancel.cancelled() => connection.as_mut().graceful_shutdown(),
            }
        });
    }
    cancel.cancel();
    Ok(())
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
