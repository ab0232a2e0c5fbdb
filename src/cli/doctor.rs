//! `doctor`: checks what a misconfiguration would otherwise show at the first failing tool
//! call, and says how to fix each problem. Exit 1 when anything is wrong.
//!
//! Checks, in order: the data directory (exists, writable, who may read or write it), the
//! ledger (opens, a `verify` summary), the store URL if set (reachable, schema version,
//! TLS), the model provider if configured (one `GET /models`, no tokens spent), the
//! families' own checks of their files in the data directory (`tools::DoctorCheck`: the
//! qa family's workflow templates), the HTTP token (its file's permissions).
//! Must not: create or change anything (the ledger is opened read-only as `verify` does;
//! the writability probe is a temporary file removed at once) or print a secret.

use super::*;
use crate::provider::config::ProviderSettings;
use std::time::Duration;

/// Longest wait for the model provider's `GET /models`.
const PROVIDER_PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Shortest `REASONING_LEDGER_TOKEN` not reported as weak (the generated ones have 64 hex
/// characters).
const MIN_TOKEN_CHARS: usize = 32;

/// How one check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Ok,
    /// Nothing to check (not configured), said for completeness.
    Note,
    /// Works, but worth changing; does not fail the run.
    Warn,
    /// Wrong: the command exits 1.
    Fail,
}

impl Level {
    fn label(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Note => "-",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        }
    }
}

struct Finding {
    level: Level,
    what: &'static str,
    detail: String,
    fix: Option<String>,
}

#[derive(Default)]
struct Report {
    findings: Vec<Finding>,
}

impl Report {
    fn add(&mut self, level: Level, what: &'static str, detail: impl Into<String>) {
        self.findings.push(Finding {
            level,
            what,
            detail: detail.into(),
            fix: None,
        });
    }

    fn fail(&mut self, what: &'static str, detail: impl Into<String>, fix: impl Into<String>) {
        self.with_fix(Level::Fail, what, detail, fix);
    }

    fn with_fix(
        &mut self,
        level: Level,
        what: &'static str,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.findings.push(Finding {
            level,
            what,
            detail: detail.into(),
            fix: Some(fix.into()),
        });
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for finding in &self.findings {
            out.push_str(&format!(
                "{:<5} {:<15} {}\n",
                finding.level.label(),
                finding.what,
                finding.detail
            ));
            if let Some(fix) = &finding.fix {
                out.push_str(&format!("{:<5} {:<15} fix: {fix}\n", "", ""));
            }
        }
        out
    }

    fn failures(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.level == Level::Fail)
            .count()
    }
}

pub(super) fn doctor(settings: &Settings) -> anyhow::Result<()> {
    let mut report = Report::default();
    let dir = &settings.data_dir;
    check_data_dir(&mut report, dir);
    match &settings.store {
        None => check_redb_ledger(&mut report, dir),
        Some(url) => check_store(&mut report, url),
    }
    check_provider(&mut report, dir);
    check_embeddings(&mut report, dir);
    check_families(&mut report, dir);
    check_token(&mut report, dir);
    let failures = report.failures();
    let mut text = format!(
        "reasoning-ledger {} doctor: data directory {}\n\n",
        env!("CARGO_PKG_VERSION"),
        dir.display()
    );
    text.push_str(&report.render());
    text.push_str(&match failures {
        0 => "\nNothing is wrong.\n".to_string(),
        n => format!("\n{n} problem(s): see the fix under each FAIL.\n"),
    });
    stdout_write(&text)?;
    if failures > 0 {
        bail!("doctor found {failures} problem(s)");
    }
    Ok(())
}

fn check_data_dir(report: &mut Report, dir: &Path) {
    const WHAT: &str = "data directory";
    let metadata = match std::fs::metadata(dir) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            // Created on the first write, if its nearest existing ancestor lets us.
            let ancestor = dir.ancestors().skip(1).find(|a| a.exists());
            match ancestor {
                Some(parent) if is_writable(parent) => report.add(
                    Level::Note,
                    WHAT,
                    format!(
                        "{} does not exist yet: `serve`, `demo` or `import` create it",
                        dir.display()
                    ),
                ),
                Some(parent) => report.fail(
                    WHAT,
                    format!(
                        "{} does not exist and {} is not writable, so it cannot be created",
                        dir.display(),
                        parent.display()
                    ),
                    format!(
                        "create it yourself (mkdir -p {0}) or choose another with --data-dir / {DATA_DIR_ENV}",
                        dir.display()
                    ),
                ),
                None => report.fail(
                    WHAT,
                    format!("{}: no existing folder above it", dir.display()),
                    format!("choose another with --data-dir / {DATA_DIR_ENV}"),
                ),
            }
            return;
        }
        Err(error) => {
            report.fail(
                WHAT,
                format!("{}: {error}", dir.display()),
                format!("check the path, or choose another with --data-dir / {DATA_DIR_ENV}"),
            );
            return;
        }
    };
    if !metadata.is_dir() {
        report.fail(
            WHAT,
            format!("{} is a file, not a folder", dir.display()),
            format!("point --data-dir / {DATA_DIR_ENV} at a folder"),
        );
        return;
    }
    if !is_writable(dir) {
        report.fail(
            WHAT,
            format!("{} is not writable by this user", dir.display()),
            format!(
                "give this user write access (chown/chmod u+rwx {}) or choose another with --data-dir",
                dir.display()
            ),
        );
        return;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o002 != 0 {
            report.fail(
                WHAT,
                format!(
                    "{} is writable by every user (mode {mode:o}): anyone could replace the ledger",
                    dir.display()
                ),
                format!("chmod 700 {}", dir.display()),
            );
            return;
        }
        if mode & 0o077 != 0 {
            report.with_fix(
                Level::Warn,
                WHAT,
                format!(
                    "{} exists and is writable; other users may read it (mode {mode:o}), and the ledger holds every recorded thought",
                    dir.display()
                ),
                format!("chmod 700 {}", dir.display()),
            );
            return;
        }
        report.add(
            Level::Ok,
            WHAT,
            format!(
                "{} exists, is writable, and only its owner may read it (mode {mode:o})",
                dir.display()
            ),
        );
    }
    #[cfg(not(unix))]
    report.add(
        Level::Ok,
        WHAT,
        format!("{} exists and is writable", dir.display()),
    );
}

/// Whether a file can be created in `dir` (a temporary one, removed at once).
fn is_writable(dir: &Path) -> bool {
    tempfile::Builder::new()
        .prefix(".doctor-")
        .tempfile_in(dir)
        .is_ok()
}

fn check_redb_ledger(report: &mut Report, dir: &Path) {
    const WHAT: &str = "ledger";
    match Ledger::open_at(
        &Location::DataDir(dir.to_path_buf()),
        OpenMode::Existing,
        super::families(),
    ) {
        Ok(ledger) => {
            if let Some(note) = ledger.read_only() {
                report.with_fix(
                    Level::Warn,
                    WHAT,
                    format!(
                        "{note}. Reading commands work; `serve`, `import` and `verify --rebuild` \
                         cannot record"
                    ),
                    "to record, run as the user who owns it (or give this user write access)",
                );
            }
            // Damage the open found (a redo log record that does not read back with
            // acknowledged ones after it): the ledger reads as the commits before it.
            if let Some(detail) = ledger.damage().ledger_damage() {
                report.fail(
                    WHAT,
                    format!("{} is damaged: {detail}", ledger.path().display()),
                    "keep ledger.wal as it is; `reasoning-ledger recover --to NEW_DIR` copies \
                     every intact event and the log's records into a new ledger",
                );
            }
            verify_summary(report, &ledger)
        }
        Err(OpenError::NoLedger { path }) => report.add(
            Level::Note,
            WHAT,
            format!(
                "no ledger at {} yet: `serve` or `demo` creates it",
                path.display()
            ),
        ),
        Err(error @ OpenError::Damaged { .. }) => report.fail(
            WHAT,
            error.to_string(),
            "`reasoning-ledger recover --to NEW_DIR` copies every intact event into a new \
             ledger (the damaged one is left as it is), then use --data-dir NEW_DIR",
        ),
        // The redo log, or a ledger that may not be written here and cannot be read
        // either: the error says what it may hold and what to do; never "move it away".
        Err(error @ (OpenError::RedoLog { .. } | OpenError::ReadOnly { .. })) => report.fail(
            WHAT,
            error.to_string(),
            "do as the line above says; `reasoning-ledger recover --to NEW_DIR` copies what \
             can be read into a new ledger",
        ),
        Err(error) => report.fail(
            WHAT,
            format!("{}: {error}", dir.join(LEDGER_FILE_NAME).display()),
            "if another build wrote it, use that build; if it is damaged, `reasoning-ledger \
             recover --to NEW_DIR` copies every intact event into a new ledger (or `copy --to` \
             from a good copy); keep the damaged file",
        ),
    }
}

fn verify_summary(report: &mut Report, ledger: &Ledger) {
    const WHAT: &str = "ledger";
    // A database's ledger is salvaged into a directory or another database, and one whose
    // every session verified needs no salvage.
    let salvage = match ledger.database() {
        Some(_) => {
            "`reasoning-ledger recover --to NEW_DIR|URL` salvages every event whose hash \
             verifies, `copy --to NEW_DIR|URL` copies every intact session"
        }
        None => {
            "`reasoning-ledger recover --to NEW_DIR` copies every intact event into a new ledger"
        }
    };
    let check = match ledger.check_all(|_, _| {}) {
        Ok(check) => check,
        Err(error) => {
            return report.fail(
                WHAT,
                format!("{}: {error}", ledger.path().display()),
                format!("run `reasoning-ledger verify`; {salvage}"),
            );
        }
    };
    if check.is_damaged() {
        let first = check
            .structure
            .first()
            .cloned()
            .or_else(|| check.findings.first().map(|f| f.error.to_string()))
            .or_else(|| check.orphans.as_ref().map(|o| o.to_string()))
            .unwrap_or_default();
        return report.fail(
            WHAT,
            format!(
                "{}: damaged ({} session(s) damaged, {} structural finding(s); first: {first})",
                ledger.path().display(),
                check.findings.len(),
                check.structure.len()
            ),
            if ledger.database().is_some() && check.findings.is_empty() && check.orphans.is_none() {
                "`reasoning-ledger verify` lists each structural finding and how to set it \
                 right (every session verified)"
                    .to_string()
            } else {
                format!(
                    "`reasoning-ledger verify` lists everything damaged; {salvage} (this one is \
                     left as it is)"
                )
            },
        );
    }
    if !check.findings.is_empty() {
        return report.with_fix(
            Level::Warn,
            WHAT,
            format!(
                "{}: a session summary was written by another build or differs from its log",
                ledger.path().display()
            ),
            "reasoning-ledger verify --rebuild",
        );
    }
    report.add(
        Level::Ok,
        WHAT,
        format!(
            "{}: {} session(s), {} event(s), every hash chain and seq checked",
            ledger.path().display(),
            check.verified.len(),
            check.verified.iter().map(|v| v.events).sum::<u64>()
        ),
    );
}

fn check_store(report: &mut Report, url: &str) {
    const WHAT: &str = "store";
    let shown = crate::store::postgres::redact_url(url);
    // A URL that cannot be parsed or a server not reached: the store line says why.
    if let Ok(state) = crate::store::postgres::tls_state(url) {
        check_tls(report, &state);
    }
    match Ledger::open_at(
        &Location::Url(url.to_string()),
        OpenMode::Existing,
        super::families(),
    ) {
        Ok(ledger) => {
            report.add(
                Level::Ok,
                WHAT,
                format!(
                    "{shown}: reachable, schema version {} (this build's)",
                    crate::store::postgres::schema::SCHEMA_VERSION
                ),
            );
            verify_summary(report, &ledger);
        }
        Err(OpenError::NoLedger { .. }) => report.add(
            Level::Note,
            WHAT,
            format!(
                "{shown}: reachable, no ledger in its schema yet (`serve`, `demo` or `copy --to` create it)"
            ),
        ),
        // The error names the URL (without its password).
        Err(error) => report.fail(
            WHAT,
            error.to_string(),
            format!(
                "check the URL in --store / {STORE_ENV} (user, host, port, database), that \
                 the server runs and accepts this user (pg_hba.conf), then run doctor again"
            ),
        ),
    }
}

/// Whether the store's connection is encrypted, and what of the server's certificate is
/// checked: a remote host reached in clear, or without checking its certificate, warns.
fn check_tls(report: &mut Report, state: &crate::store::postgres::TlsState) {
    const WHAT: &str = "store TLS";
    let remote: Vec<&str> = state
        .tcp_hosts
        .iter()
        .map(String::as_str)
        .filter(|host| !is_loopback(host))
        .collect();
    match &state.encrypted {
        Some(protocol) if remote.is_empty() || !state.checks.starts_with("not verified") => report
            .add(
                Level::Ok,
                WHAT,
                format!("{protocol}; server certificate: {}", state.checks),
            ),
        Some(protocol) => report.with_fix(
            Level::Warn,
            WHAT,
            format!("{protocol}; server certificate: {}", state.checks),
            "add sslmode=verify-full (and sslrootcert=FILE, or system) to the URL",
        ),
        None if remote.is_empty() => report.add(
            Level::Ok,
            WHAT,
            "not used: the server is on this machine (socket or loopback)",
        ),
        None => report.with_fix(
            Level::Warn,
            WHAT,
            format!(
                "{} is reached over the network without TLS",
                remote.join(", ")
            ),
            "turn ssl on in the server and add sslmode=verify-full to the URL",
        ),
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn check_provider(report: &mut Report, dir: &Path) {
    const WHAT: &str = "model provider";
    let settings = ProviderSettings::load(Some(dir));
    for problem in &settings.problems {
        report.fail(
            WHAT,
            problem.clone(),
            "fix the variable or the file named, or remove it",
        );
    }
    let Some(provider) = settings.provider else {
        if settings.problems.is_empty() {
            report.add(
                Level::Note,
                WHAT,
                "none configured: the agent tools answer `config`, the booster uses MCP sampling or its heuristics (set REASONING_LEDGER_LLM_BASE_URL and _MODEL to add one)",
            );
        }
        return;
    };
    let shown = format!(
        "{} ({}, model {})",
        provider.name, provider.base_url, provider.model
    );
    match probe_models(&provider) {
        Ok(status) if status.is_success() => report.add(
            Level::Ok,
            WHAT,
            format!("{shown}: GET /models answered {status}"),
        ),
        Ok(status) if status.as_u16() == 401 || status.as_u16() == 403 => report.fail(
            WHAT,
            format!("{shown}: GET /models answered {status}: the key was refused"),
            "check the API key's variable (or secrets.txt in the data directory)",
        ),
        Ok(status) => report.add(
            Level::Warn,
            WHAT,
            format!(
                "{shown}: reachable, but GET /models answered {status} (some servers do not list models; the key was not checked)"
            ),
        ),
        Err(error) => report.fail(
            WHAT,
            format!("{shown}: not reachable: {error}"),
            "check the base URL and that the server runs (a local one: is it started?)",
        ),
    }
}

/// The embedding endpoint of semantic search, when one is configured: one text embedded
/// (a word's worth of tokens), with no retry, so a dead or refusing endpoint is a FAIL
/// here instead of searches that quietly fall back to words.
fn check_embeddings(report: &mut Report, dir: &Path) {
    const WHAT: &str = "embeddings";
    let config = match crate::provider::embeddings::EmbeddingsConfig::load(Some(dir)) {
        Ok(Some(config)) => config,
        Ok(None) => {
            report.add(
                Level::Note,
                WHAT,
                "none configured: search ranks by words only (set REASONING_LEDGER_EMBEDDINGS_BASE_URL and _MODEL for semantic and hybrid search)",
            );
            return;
        }
        Err(problem) => {
            report.fail(
                WHAT,
                problem,
                "set both REASONING_LEDGER_EMBEDDINGS_BASE_URL and _MODEL (or the providers.json entry), or neither",
            );
            return;
        }
    };
    let shown = format!(
        "{} ({}, model {})",
        config.name, config.base_url, config.model
    );
    let client = crate::provider::embeddings::EmbeddingsClient::new(config);
    let probe = runtime().map(|rt| rt.block_on(client.embed_once(&["doctor".to_string()])));
    match probe {
        Ok(Ok(vectors)) => report.add(
            Level::Ok,
            WHAT,
            format!(
                "{shown}: a text embedded ({} dimensions)",
                vectors.first().map_or(0, Vec::len)
            ),
        ),
        Ok(Err(error)) => report.fail(
            WHAT,
            format!("{shown}: {error}"),
            "check the base URL, the model and that the server runs (semantic search falls back to words until it answers)",
        ),
        Err(error) => report.fail(WHAT, format!("{shown}: {error}"), "run doctor again"),
    }
}

/// One `GET {base_url}/models` with the key: reachable and accepted, no tokens spent.
fn probe_models(
    provider: &crate::provider::config::ProviderConfig,
) -> anyhow::Result<reqwest::StatusCode> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(PROVIDER_PROBE_TIMEOUT)
        .user_agent(concat!("reasoning-ledger/", env!("CARGO_PKG_VERSION")))
        .build()?;
    let mut request = client.get(format!("{}/models", provider.base_url));
    if let Some(key) = &provider.api_key {
        request = request.bearer_auth(key.expose());
    }
    let response = runtime()?
        .block_on(async move { request.send().await })
        .map_err(|error| {
            // reqwest's message carries the URL, never the key; its cause says why.
            let mut text = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            anyhow::anyhow!(text)
        })?;
    Ok(response.status())
}

/// The families' own checks (the qa family's workflow templates), in registry order.
fn check_families(report: &mut Report, dir: &Path) {
    for check in crate::tools::FAMILIES.iter().filter_map(|f| f.doctor) {
        for (problem, fix) in check.problems(dir) {
            report.fail(check.what(), problem, fix);
        }
    }
}

fn check_token(report: &mut Report, dir: &Path) {
    const WHAT: &str = "http token";
    if let Ok(token) = std::env::var(crate::http::TOKEN_ENV)
        && !token.trim().is_empty()
    {
        let chars = token.trim().chars().count();
        if chars < MIN_TOKEN_CHARS {
            report.with_fix(
                Level::Warn,
                WHAT,
                format!(
                    "{} holds {chars} characters, under {MIN_TOKEN_CHARS}: easy to guess",
                    crate::http::TOKEN_ENV
                ),
                "use a long random one (openssl rand -hex 32), or unset it to have one generated",
            );
        } else {
            report.add(
                Level::Ok,
                WHAT,
                format!("from {} ({chars} characters)", crate::http::TOKEN_ENV),
            );
        }
        return;
    }
    let path = dir.join(crate::http::TOKEN_FILE_NAME);
    let metadata = match std::fs::metadata(&path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            report.add(
                Level::Note,
                WHAT,
                format!(
                    "no {} yet: `serve --http` generates one (mode 600)",
                    path.display()
                ),
            );
            return;
        }
        Err(error) => {
            report.fail(
                WHAT,
                format!("{}: {error}", path.display()),
                format!(
                    "remove it to have a new one generated, or set {}",
                    crate::http::TOKEN_ENV
                ),
            );
            return;
        }
    };
    match std::fs::read_to_string(&path) {
        Ok(text) if text.trim().is_empty() => {
            report.fail(
                WHAT,
                format!("{} is empty", path.display()),
                format!(
                    "remove it to have a new one generated at the next `serve --http`, or set {}",
                    crate::http::TOKEN_ENV
                ),
            );
            return;
        }
        Ok(_) => {}
        Err(error) => {
            report.fail(
                WHAT,
                format!("{} cannot be read: {error}", path.display()),
                format!("chmod 600 {} (as its owner)", path.display()),
            );
            return;
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            report.fail(
                WHAT,
                format!(
                    "{} may be read by other users (mode {mode:o}): they could call the server",
                    path.display()
                ),
                format!("chmod 600 {}", path.display()),
            );
            return;
        }
        report.add(
            Level::Ok,
            WHAT,
            format!("{} (mode {mode:o})", path.display()),
        );
    }
    #[cfg(not(unix))]
    {
        let _ = metadata;
        report.add(Level::Ok, WHAT, path.display().to_string());
    }
}
