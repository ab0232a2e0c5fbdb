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
    let log_thoughts = !std::env::var(DISABLE_THOUGHT_LOGGING_ENV)
        .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let ledger = open(settings)?;
    let runtime = runtime()?;
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
