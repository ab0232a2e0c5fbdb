//! `serve --http ADDR`: MCP's streamable HTTP transport at `/mcp` (rmcp's
//! `StreamableHttpService` over hyper), for remote clients of a shared server.
//!
//! Owns: where to listen (loopback unless an address is given), the bearer token
//! (`REASONING_LEDGER_TOKEN`, else one generated once into [`TOKEN_FILE_NAME`] in the data
//! directory, path printed on stderr), checking it before a request reaches MCP (a wrong
//! or missing token gets 401 and nothing runs), and the Host/Origin allow-lists rmcp
//! enforces against DNS rebinding. Must not: let any request through without the token,
//! or write anything to stdout.
//!
//! Each HTTP session (the `initialize` generation) gets its own [`LedgerServer`] and
//! [`ToolContext`] (its "current session" is its own, as a stdio connection's is); its
//! tool calls get rmcp's real request context (the peer for sampling and progress, the
//! cancellation token), as over stdio, and share the process's model providers: sampling
//! reaches the HTTP client (`sampling/createMessage` on the session's stream, or the
//! input-required round trip of 2026-07-28). Requests of 2026-07-28 are served statelessly by
//! rmcp (a server per request), and pass session ids and request state explicitly.

use crate::request::ToolContext;
use crate::server::LedgerServer;
use crate::store::Ledger;
use crate::tools::Toolset;
use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Environment variable holding the bearer token clients must send.
pub(crate) const TOKEN_ENV: &str = "REASONING_LEDGER_TOKEN";

/// File in the data directory holding the generated token (mode 0600), when
/// [`TOKEN_ENV`] is not set.
pub(crate) const TOKEN_FILE_NAME: &str = "http-token";

/// The path MCP is served at.
pub(crate) const MCP_PATH: &str = "/mcp";

/// Random bytes in a generated token (hex-encoded: twice as many characters).
pub(crate) const TOKEN_BYTES: usize = 32;

/// Where and how to serve.
pub(crate) struct HttpSettings {
    /// The `--http` value: `PORT`, `:PORT`, `HOST:PORT` or `[V6]:PORT`.
    pub listen: String,
    /// Extra names the `Host` header may carry (a public name of this server).
    pub allowed_hosts: Vec<String>,
    /// Extra browser origins allowed (`https://app.example:443`).
    pub allowed_origins: Vec<String>,
    /// Holds the generated token file.
    pub data_dir: PathBuf,
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

/// The token: [`TOKEN_ENV`] if set, else the one in the data directory's token file
/// (generated the first time). Returns it and, for the file, its path.
pub(crate) fn load_token(data_dir: &Path) -> anyhow::Result<(String, Option<PathBuf>)> {
    if let Ok(token) = std::env::var(TOKEN_ENV)
        && !token.trim().is_empty()
    {
        return Ok((token.trim().to_string(), None));
    }
    let path = data_dir.join(TOKEN_FILE_NAME);
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => return Ok((text.trim().to_string(), Some(path))),
        Ok(_) => anyhow::bail!(
            "{} is empty: remove it to have a new token generated, or set {TOKEN_ENV}",
            path.display()
        ),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!("reading {}", path.display())));
        }
    }
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating the data directory {}", data_dir.display()))?;
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(format!("{token}\n").as_bytes())?;
            file.sync_all()?;
            Ok((token, Some(path)))
        }
        // Another server created it meanwhile: use that one.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => load_token(data_dir),
        Err(error) => {
            Err(anyhow::Error::new(error).context(format!("creating {}", path.display())))
        }
    }
}

/// Whether `given` is the expected token, in time independent of both: the SHA-256
/// digests of the two are compared in constant time, so neither where the first
/// difference is nor the token's length shows.
fn same_token(given: &[u8], expected: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    Sha256::digest(given)[..]
        .ct_eq(&Sha256::digest(expected)[..])
        .into()
}

/// Whether the request carries `Authorization: Bearer <token>`.
fn authorized(request: &Request<Incoming>, token: &str) -> bool {
    request
        .headers()
        .get_all(hyper::header::AUTHORIZATION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .filter_map(|value| {
            let (scheme, credential) = value.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| credential.trim())
        })
        .any(|credential| same_token(credential.as_bytes(), token.as_bytes()))
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
    let (token, token_file) = load_token(&settings.data_dir)?;
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
    match &token_file {
        Some(path) => eprintln!(
            "reasoning-ledger: bearer token in {} (or set {TOKEN_ENV})",
            path.display()
        ),
        None => eprintln!("reasoning-ledger: bearer token from {TOKEN_ENV}"),
    }
    eprintln!(
        "reasoning-ledger: serving MCP (streamable HTTP) at http://{bound}{MCP_PATH} on {}",
        ledger.path().display()
    );
    let token: Arc<str> = token.into();
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
        let token = token.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
                let service = service.clone();
                let token = token.clone();
                async move {
                    if request.uri().path() != MCP_PATH {
                        return Ok::<_, Infallible>(plain(
                            StatusCode::NOT_FOUND,
                            "not found: MCP is served at /mcp\n",
                        ));
                    }
                    if !authorized(&request, &token) {
                        let mut response = plain(
                            StatusCode::UNAUTHORIZED,
                            "unauthorized: send Authorization: Bearer <token> (REASONING_LEDGER_TOKEN or the server's token file)\n",
                        );
                        response.headers_mut().insert(
                            hyper::header::WWW_AUTHENTICATE,
                            "Bearer".parse().expect("header"),
                        );
                        return Ok(response);
                    }
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

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abc", b"abc"));
        assert!(!same_token(b"abd", b"abc"));
        assert!(!same_token(b"ab", b"abc"));
        assert!(!same_token(b"", b"abc"));
    }

    #[test]
    fn a_generated_token_is_kept_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let (first, path) = load_token(dir.path()).unwrap();
        let path = path.expect("a file");
        assert_eq!(first.len(), TOKEN_BYTES * 2);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (again, _) = load_token(dir.path()).unwrap();
        assert_eq!(first, again);
    }
}
