//! `serve`: the MCP server over stdio, or over streamable HTTP with `--http`.

use super::*;

/// `--related N`, else `REASONING_LEDGER_RELATED`: how many related sessions a new
/// session's first thought is answered with (0, the default: none).
pub(super) fn set_related(flag: Option<usize>) -> anyhow::Result<()> {
    let env = crate::recall::RELATED_ENV;
    let count = match flag {
        Some(count) => count,
        None => match std::env::var(env).ok().filter(|v| !v.trim().is_empty()) {
            None => 0,
            Some(text) => text
                .trim()
                .parse()
                .with_context(|| format!("{env}={text:?}: expected a number of sessions"))?,
        },
    };
    if count > crate::recall::MAX_RELATED {
        bail!(
            "--related {count}: at most {} sessions",
            crate::recall::MAX_RELATED
        );
    }
    crate::recall::set_related_count(count);
    Ok(())
}

/// The runtime of a stdio server on a local ledger: one thread. A call's async steps are
/// short (decode, plan, render: commits run on the writer thread, stdin is read only when
/// bytes are waiting, an answer is written only when the pipe has room: see
/// [`crate::transport`]), so a second worker would only add hand-offs between threads —
/// a wake-up of another core for a task stolen or a timer moved. PostgreSQL's driver
/// blocks on a runtime of its own (stepping aside with `block_in_place`, which a
/// one-thread runtime cannot do), and `serve --http` serves many connections: both keep
/// the multi-threaded runtime.
fn stdio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

// `--oauth-issuer` and `--oauth-audience` (src/http/oauth.rs). A plain comment: a doc
// comment here would become the help of `serve` itself.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct OAuthArgs {
    /// With --http: also accept OAuth 2.1 access tokens (JWTs) from this issuer, as the MCP authorization spec describes (https; its iss exactly); needs --oauth-audience
    #[arg(long, value_name = "URL", requires_all = ["http", "oauth_audience"])]
    oauth_issuer: Option<String>,
    /// With --oauth-issuer: this server's URL as clients reach it (https://host/mcp), the aud its tokens must carry
    #[arg(long, value_name = "URL", requires = "oauth_issuer")]
    oauth_audience: Option<String>,
}

impl OAuthArgs {
    /// The settings, when OAuth is on (clap has seen that both flags are given).
    pub(super) fn settings(self) -> Option<crate::http::OAuthSettings> {
        let (issuer, audience) = self.oauth_issuer.zip(self.oauth_audience)?;
        Some(crate::http::OAuthSettings { issuer, audience })
    }
}

pub(super) fn serve(
    settings: &Settings,
    toolsets: Option<String>,
    http: Option<crate::http::HttpSettings>,
) -> anyhow::Result<()> {
    let chosen = toolsets.or_else(|| {
        std::env::var(TOOLSETS_ENV)
            .ok()
            .filter(|s| !s.trim().is_empty())
    });
    let toolsets = match chosen {
        Some(text) => Toolset::parse_list(&text).map_err(anyhow::Error::msg)?,
        None => Toolset::default_sets(),
    };
    // Every thought drawn on stderr: on over stdio (the reference server's default, in
    // the client's own log), off for `serve --http`, whose log would hold every user's
    // thoughts; DISABLE_THOUGHT_LOGGING=true or false says which, anything else is the
    // default.
    let setting = std::env::var(DISABLE_THOUGHT_LOGGING_ENV).unwrap_or_default();
    let log_thoughts = match setting.trim().to_ascii_lowercase().as_str() {
        "true" => false,
        "false" => true,
        _ => http.is_none(),
    };
    let existed = settings.store.is_some()
        || settings
            .data_dir
            .join(crate::store::LEDGER_FILE_NAME)
            .exists();
    let ledger = open(settings)?;
    if http.is_none() {
        // Which ledger this server records into: a mistyped --data-dir or
        // REASONING_LEDGER_DIR shows here instead of silently starting a new, empty one.
        eprintln!(
            "reasoning-ledger: serving MCP over stdio on {}{}",
            ledger.path().display(),
            if existed { "" } else { " (a new ledger)" }
        );
    }
    // Traces, when the OTEL_* variables ask for them (nothing starts otherwise); made
    // before the runtime and stopped after it (the exporter's client blocks on a thread
    // of its own), flushing within telemetry::SHUTDOWN_DEADLINE.
    let _telemetry = crate::telemetry::start();
    let one_thread = http.is_none() && settings.store.is_none();
    let runtime = if one_thread {
        stdio_runtime()?
    } else {
        runtime()?
    };
    let _entered = runtime.enter();
    let models = crate::provider::Models::new(crate::provider::ProviderSettings::load(Some(
        &settings.data_dir,
    )));
    // Vectors are a projection made off the write path: embedded after commit, in the
    // background, when an embeddings endpoint is configured (nothing starts otherwise).
    crate::recall::start_embedder(&ledger);
    match models.http_provider() {
        Some((name, model)) => tracing::info!(provider = name, model, "model provider"),
        None => tracing::info!("no HTTP model provider configured: MCP sampling only"),
    }
    if let Some(http) = http {
        return runtime.block_on(crate::http::serve_http(
            ledger,
            toolsets,
            log_thoughts,
            models,
            http,
        ));
    }
    tracing::info!(path = %ledger.path().display(), ?toolsets, "serving MCP on stdio");
    let ctx = crate::request::ToolContext::with_models(ledger, log_thoughts, models);
    let server = LedgerServer::with_context(ctx, toolsets);
    runtime.block_on(serve_stdio(server))
}
