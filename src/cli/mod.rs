//! The command line: arguments parsed once into validated settings, then one
//! file per subcommand (mini-redis style): `serve`, `sessions`, `show`, `export`, `replay`,
//! `search`, `reindex`, `verify`, `import`, `demo`, `copy`, `recover`, `doctor`, `token`,
//! `completions` and `man` (and `ui`, served by [`crate::ui`]).
//!
//! Owns: clap definitions, data-directory resolution, exit codes (0 ok, 1 error, 2 usage)
//! and quiet exit on a broken pipe. Must not: touch redb (it goes through [`Ledger`]) or
//! print anything but the command's output to stdout (`serve` prints nothing at all).

use crate::event::{Event, SessionId, SessionKind};
use crate::export::{self, Format};
use crate::query;
use crate::server::{LedgerServer, serve_stdio};
use crate::store::{LEDGER_FILE_NAME, Ledger, Location, OpenError, OpenMode, SessionHead};
use crate::tools::Toolset;
use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use values::TypedValueParser as _;

mod completions;
mod copy;
mod demo;
mod doctor;
mod export_cmd;
mod export_otlp;
mod import;
mod recover;
mod reindex;
mod replay;
mod search;
mod serve;
mod sessions;
mod show;
mod token;
mod values;
mod verify;

use completions::{completions, man};
use copy::copy;
use demo::demo;
use doctor::doctor;
use export_cmd::{export_all, export_cmd};
use import::import;
use recover::recover;
use reindex::reindex;
use replay::replay;
use search::search;
use serve::serve;
use sessions::sessions;
use show::show;
use token::{TokenCommand, token};
use verify::verify;

/// Environment variable naming the data directory.
pub(crate) const DATA_DIR_ENV: &str = "REASONING_LEDGER_DIR";
/// Environment variable choosing the store (`postgres://…`); unset: the redb file in the
/// data directory.
pub(crate) const STORE_ENV: &str = "REASONING_LEDGER_STORE";
/// Environment variable choosing the toolsets of `serve` (the server names it too).
pub(crate) use crate::server::TOOLSETS_ENV;
/// Environment variable that turns the stderr thought box off when "true" (any case).
pub(crate) const DISABLE_THOUGHT_LOGGING_ENV: &str = "DISABLE_THOUGHT_LOGGING";

/// What the bare command says when its input is a terminal instead of an MCP client.
const BARE_ON_A_TERMINAL: &str = "\
reasoning-ledger is an MCP server: an MCP client (Claude Desktop, Claude Code, VS Code, …)
starts it and speaks MCP on its standard input, so on a terminal it has nothing to do.
  reasoning-ledger demo       a tour of every tool, recorded into a ledger you can look at
  reasoning-ledger --help     every command (sessions, show, export, search, ui, serve --http, …)
  reasoning-ledger serve      serve MCP on this terminal anyway
";

#[derive(Parser, Debug)]
#[command(
    name = "reasoning-ledger",
    version,
    about = "An MCP server that records every reasoning step in a crash-safe ledger",
    long_about = "An MCP server that records every reasoning step in a crash-safe ledger.\n\nWith no command it serves MCP over stdio (same as `serve`)."
)]
pub(crate) struct Cli {
    /// Directory holding ledger.redb [env: REASONING_LEDGER_DIR; default: the platform data directory]
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// A PostgreSQL ledger shared by a team (postgres://user@host/db) instead of ledger.redb in the data directory [env: REASONING_LEDGER_STORE]
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Serve MCP over stdio (the default)
    Serve {
        #[arg(long, value_name = "A,B", help = toolsets_help(), value_parser = values::Listed::toolsets(), hide_possible_values = true)]
        toolsets: Option<String>,
        /// Serve MCP's streamable HTTP transport at http://ADDR/mcp instead of stdio: PORT (loopback) or IP:PORT. A bearer token is required: REASONING_LEDGER_TOKEN, else one generated into http-token in the data directory
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        #[command(flatten)]
        oauth: serve::OAuthArgs,
        /// With --http: another name clients reach this server by (Host header check), repeatable
        #[arg(long, value_name = "NAME", requires = "http")]
        allowed_host: Vec<String>,
        /// With --http: a browser origin allowed to call (scheme://host:port), repeatable
        #[arg(long, value_name = "ORIGIN", requires = "http")]
        allowed_origin: Vec<String>,
        /// With --http: the named tokens file (`token add`), re-read when it changes [env: REASONING_LEDGER_TOKENS; default: tokens.toml in the data directory]
        #[arg(long, value_name = "FILE", requires = "http")]
        tokens: Option<PathBuf>,
        /// Answer a new session's first thought with up to N earlier sessions like it (related: [...]) [env: REASONING_LEDGER_RELATED; default: 0, off]
        #[arg(long, value_name = "N")]
        related: Option<usize>,
        #[command(flatten)]
        http_limits: HttpLimitArgs,
        /// Log format on stderr: text, or json (one object a line; with it, one line per tool call: request_id, tool, outcome, duration_ms)
        #[arg(long, value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
    },
    /// List sessions, newest first. BRANCH IDS counts the branch ids a session has: its
    /// thinking or qa branches and a plan's approaches (what evaluate_branch and
    /// compare_branches take); `show` counts the thought branches only
    Sessions {
        /// Print JSON ({"sessions": [...]}, as list_sessions answers) instead of a table
        #[arg(long)]
        json: bool,
        /// Only sessions of these kinds (repeatable or comma-separated, as `search --kind`)
        #[arg(long, value_name = "KIND", value_parser = values::Listed::kinds())]
        kind: Vec<String>,
        /// At most this many
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Show one session as Markdown
    Show {
        /// Session id or alias (`sessions` lists them)
        id: String,
    },
    /// Export one session, or with --all every session as JSONL (a backup `import` reads back)
    Export {
        /// Session id or alias (`sessions` lists them)
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Every session of the ledger, one after another (--format jsonl only)
        #[arg(long, conflicts_with = "at")]
        all: bool,
        /// Output format: mermaid (flowchart), markdown, json (the whole tree), jsonl (the raw events, re-importable; the default with --all), svg (a picture), html (one offline page: picture, thoughts, replay slider, filter) or otlp (sent as a trace to OTEL_EXPORTER_OTLP_ENDPOINT)
        #[arg(long, short = 'f', value_parser = values::Listed::formats().try_map(parse_format), hide_possible_values = true, value_name = "FORMAT", required_unless_present = "all")]
        format: Option<ExportFormat>,
        /// Export the session as it stood right after this event seq (default: its last event)
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
        /// Write to this new file instead of stdout (never overwrites; its folder must exist)
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Show a session as it stood after one event, with the events up to it
    Replay {
        /// Session id or alias (`sessions` lists them)
        id: String,
        /// Replay up to and including this event seq (default: its last event)
        #[arg(long, value_name = "SEQ")]
        at: Option<u64>,
    },
    /// Search every session's text, ranked (through the index beside the ledger)
    Search {
        /// Words (ranked, every-word matches first; case, accents and English inflections fold), "a quoted phrase", -word to exclude
        #[arg(allow_hyphen_values = true)]
        text: String,
        /// Print JSON ({"query", "matches", "nextCursor"?}, as search_history answers) instead of lines
        #[arg(long)]
        json: bool,
        /// At most this many matches (1..=100)
        #[arg(long, default_value_t = crate::recall::DEFAULT_LIMIT)]
        limit: usize,
        /// Only this session (id or alias)
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Only sessions of these kinds (repeatable or comma-separated)
        #[arg(long, value_name = "KIND", value_parser = values::Listed::kinds())]
        kind: Vec<String>,
        /// Only events committed at or after this time (RFC 3339, or ms since the epoch)
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Only events committed at or before this time (RFC 3339, or ms since the epoch)
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// The next page: nextCursor of the previous answer
        #[arg(long)]
        cursor: Option<String>,
        /// lexical, semantic or hybrid (default: hybrid when embeddings are configured, else lexical)
        #[arg(long, value_parser = values::Listed::search_modes(), hide_possible_values = true)]
        mode: Option<String>,
        /// One match per session (its best; newest first among equals); --limit and --cursor count sessions
        #[arg(long)]
        by_session: bool,
    },
    /// Rebuild the search index from the ledger
    Reindex {
        /// Also embed every event again (the configured embeddings endpoint), with a progress bar
        #[arg(long)]
        embeddings: bool,
    },
    /// Check every hash chain and seq (or one session's)
    Verify {
        /// Only this session (id or alias)
        id: Option<String>,
        /// First fold every session again and rewrite stale or differing summaries
        #[arg(long)]
        rebuild: bool,
    },
    /// Import events from a JSONL export (creates the ledger if there is none)
    Import {
        /// A file written by `export --format jsonl`
        file: PathBuf,
        /// All or nothing: check the whole file first and import nothing if any line or
        /// session would be left out
        #[arg(long)]
        strict: bool,
    },
    /// Serve a read-only web view of the ledger on 127.0.0.1 (sessions, pictures, replay; updates live)
    Ui {
        /// Port on 127.0.0.1 (default: a free one, printed with the address)
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// Tour every family (thinking, think, planning, qa, booster; the agent when a model is configured) through the real server, print the sessions and where their pictures are (writes into the ledger of --data-dir, else the default one)
    Demo,
    /// Check the setup and say how to fix what is wrong: the data directory, the ledger (verify), the store URL, the model provider, QA workflow files, the HTTP token (exit 1 if anything is wrong)
    Doctor,
    /// Print the shell completion script: bash, zsh, fish, powershell or elvish (e.g. `reasoning-ledger completions bash > ~/.local/share/bash-completion/completions/reasoning-ledger`)
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print the man page (`reasoning-ledger man > reasoning-ledger.1`), or write one page per command into a folder
    Man {
        /// Write reasoning-ledger.1 and one page per command (reasoning-ledger-serve.1, …) into this folder instead
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Named bearer tokens for `serve --http`: add (printed once), list, revoke
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Copy the whole ledger into another store: a PostgreSQL URL or a data directory (idempotent: run it again to resume or to bring the copy up to date)
    Copy {
        /// Where to: postgres://… or a directory (its ledger.redb)
        #[arg(long, value_name = "URL|DIR")]
        to: String,
    },
    /// Salvage a damaged ledger: every event whose hash verifies (in ledger.redb and ledger.wal, wherever it lies; or in any row of a PostgreSQL ledger) into a new ledger in DIR or at URL; never touches the damaged one
    Recover {
        /// A new directory (or one without a ledger) for the new ledger, its salvage-report.txt and salvage-beyond-gaps.jsonl (the events a session could not keep past a gap); or a PostgreSQL URL whose schema holds no ledger (those two files then go to the data directory)
        #[arg(long, value_name = "DIR|URL")]
        to: String,
    },
}

// The limits of `serve --http` (their defaults: `crate::http::limits`). A plain comment:
// a doc comment here would become the help of `serve` itself.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct HttpLimitArgs {
    /// With --http: longest a request head may take to arrive (10s, 500ms, …) [default: 10s]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "http")]
    header_timeout: Option<std::time::Duration>,
    /// With --http: longest a keep-alive connection may sit idle between requests [default: 60s]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "http")]
    idle_timeout: Option<std::time::Duration>,
    /// With --http: longest a request body may take to arrive once its head has [default: 30s]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "http")]
    body_timeout: Option<std::time::Duration>,
    /// With --http: connections held open at most (more wait in the listen backlog) [default: 1024]
    #[arg(long, value_name = "N", requires = "http")]
    max_connections: Option<usize>,
    /// With --http: the largest request body, in bytes [default: 4194304]
    #[arg(long, value_name = "BYTES", requires = "http")]
    max_body_bytes: Option<usize>,
    /// With --http: on SIGTERM/SIGINT, how long calls in flight get to finish [default: 30s]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "http")]
    drain_timeout: Option<std::time::Duration>,
    /// With --http: connections one peer address may hold (more are closed at once) [default: 256]
    #[arg(long, value_name = "N", requires = "http")]
    max_connections_per_peer: Option<usize>,
    /// With --http: header and idle timeout of a connection that has not yet sent a valid token [default: 5s]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "http")]
    unauthenticated_timeout: Option<std::time::Duration>,
    /// With --http: live MCP sessions at most (beyond: initialize gets 503) [default: 256]
    #[arg(long, value_name = "N", requires = "http")]
    max_sessions: Option<usize>,
    /// With --http: live MCP sessions per actor (token name or OAuth subject; beyond: 429) [default: 64]
    #[arg(long, value_name = "N", requires = "http")]
    max_sessions_per_actor: Option<usize>,
    /// With --http: an MCP session with no request and no open stream for this long is ended [default: 60s]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "http")]
    session_idle_timeout: Option<std::time::Duration>,
    /// With --http: serve /metrics without the bearer token
    #[arg(long, requires = "http")]
    metrics_public: bool,
}

impl HttpLimitArgs {
    fn limits(&self) -> crate::http::HttpLimits {
        let defaults = crate::http::HttpLimits::default();
        crate::http::HttpLimits {
            header_timeout: self.header_timeout.unwrap_or(defaults.header_timeout),
            idle_timeout: self.idle_timeout.unwrap_or(defaults.idle_timeout),
            body_timeout: self.body_timeout.unwrap_or(defaults.body_timeout),
            max_connections: self.max_connections.unwrap_or(defaults.max_connections),
            max_body_bytes: self.max_body_bytes.unwrap_or(defaults.max_body_bytes),
            drain_timeout: self.drain_timeout.unwrap_or(defaults.drain_timeout),
            max_connections_per_peer: self
                .max_connections_per_peer
                .unwrap_or(defaults.max_connections_per_peer),
            unauthenticated_timeout: self
                .unauthenticated_timeout
                .unwrap_or(defaults.unauthenticated_timeout),
            max_sessions: self.max_sessions.unwrap_or(defaults.max_sessions),
            max_sessions_per_actor: self
                .max_sessions_per_actor
                .unwrap_or(defaults.max_sessions_per_actor),
            session_idle_timeout: self
                .session_idle_timeout
                .unwrap_or(defaults.session_idle_timeout),
        }
    }
}

/// How stderr logs are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq)]
pub(crate) enum LogFormat {
    /// Human-readable lines (warnings and errors by default).
    #[default]
    Text,
    /// One JSON object a line, with one line per tool call by default.
    Json,
}

/// Help of `serve --toolsets`, from the registered families: a toolset that lands appears
/// in it, in `all`, and in the default only if it is on by default.
fn toolsets_help() -> String {
    let names = |sets: Vec<Toolset>| {
        sets.iter()
            .map(|set| set.as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "Toolsets to list: {}, or all (every toolset of this build) [env: {TOOLSETS_ENV}; default: {}]",
        names(Toolset::available()).replace(',', ", "),
        names(Toolset::default_sets())
    )
}

/// What `export --format` names: a rendering, or `otlp` (a trace sent to a collector).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExportFormat {
    Render(Format),
    Otlp,
}

fn parse_format(text: String) -> Result<ExportFormat, String> {
    if text == "otlp" {
        return Ok(ExportFormat::Otlp);
    }
    text.parse()
        .map(ExportFormat::Render)
        .map_err(|rendering: String| format!("{rendering}, or otlp"))
}

/// Settings resolved once from arguments and environment.
pub(crate) struct Settings {
    pub data_dir: PathBuf,
    /// The PostgreSQL URL of `--store` / `REASONING_LEDGER_STORE`; `None`: redb.
    pub store: Option<String>,
}

impl Settings {
    /// Where the ledger is kept: the `--store` URL, else the data directory.
    pub(crate) fn location(&self) -> Location {
        match &self.store {
            Some(url) => Location::Url(url.clone()),
            None => Location::DataDir(self.data_dir.clone()),
        }
    }
}

/// The store URL: `--store`, else `REASONING_LEDGER_STORE`; only PostgreSQL URLs.
pub(crate) fn resolve_store(flag: Option<String>) -> anyhow::Result<Option<String>> {
    let chosen = flag.or_else(|| {
        std::env::var(STORE_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
    });
    match chosen {
        None => Ok(None),
        Some(url) if Location::url(url.trim()).is_some() => Ok(Some(url.trim().to_string())),
        Some(other) => bail!(
            "--store {other:?}: expected a PostgreSQL URL (postgres://user@host/db); leave \
             --store and {STORE_ENV} unset for the ledger.redb in the data directory"
        ),
    }
}

/// Where the ledger lives: `--data-dir`, else `REASONING_LEDGER_DIR`, else the platform
/// data directory.
pub(crate) fn resolve_data_dir(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = flag {
        return Ok(dir);
    }
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    directories::ProjectDirs::from("", "", "reasoning-ledger")
        .map(|dirs| dirs.data_dir().to_path_buf())
        .context(
            "no home directory to hold the ledger: pass --data-dir or set REASONING_LEDGER_DIR",
        )
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(match &cli.command {
        Some(Command::Serve { log_format, .. }) => *log_format,
        _ => LogFormat::Text,
    });
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if is_broken_pipe(&error) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {}", said_once(&error));
            ExitCode::from(1)
        }
    }
}

/// An error and its causes, each said once: our errors quote their source in their own
/// text, so a cause already said is left out (anyhow's `{:#}` said a PostgreSQL
/// connection failure three times).
fn said_once(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// Logs go to stderr, filtered by `RUST_LOG` (`warn`, `reasoning_ledger=debug`, …;
/// target=level pairs, no regular expressions), warnings and errors by default (in JSON,
/// also the one line per tool call); and to the MCP clients that set a level
/// ([`crate::mcp_log`], its own filter: off until then).
fn init_logging(format: LogFormat) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    // rmcp warns of every error answer it sends ("response error"): the client already got
    // the answer, so it is noise in the client's log; rmcp's errors still show.
    let mut default = Targets::new()
        .with_default(LevelFilter::WARN)
        .with_target("rmcp::service", LevelFilter::ERROR);
    if format == LogFormat::Json {
        default = default.with_target(crate::http::metrics::CALL_LOG_TARGET, LevelFilter::INFO);
    }
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|text| text.parse::<Targets>().ok())
        .unwrap_or(default);
    let text = (format == LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .with_filter(filter.clone())
    });
    let json = (format == LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .with_filter(filter)
    });
    let _ = tracing_subscriber::registry()
        .with(text)
        .with(json)
        .with(crate::mcp_log::client_layer())
        .try_init();
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let settings = Settings {
        data_dir: resolve_data_dir(cli.data_dir)?,
        store: resolve_store(cli.store)?,
    };
    if cli.command.is_none() && std::io::stdin().is_terminal() {
        // A person typed the bare command: nothing would answer them, and nothing is made.
        eprint!("{BARE_ON_A_TERMINAL}");
        return Ok(());
    }
    let command = cli.command.unwrap_or(Command::Serve {
        toolsets: None,
        http: None,
        oauth: serve::OAuthArgs::default(),
        allowed_host: Vec::new(),
        allowed_origin: Vec::new(),
        tokens: None,
        related: None,
        http_limits: HttpLimitArgs::default(),
        log_format: LogFormat::Text,
    });
    // Private by default: what a command writes (the ledger, its index and vectors, token
    // files, the booster's files) is this user's alone, whatever the umask; `completions`
    // and `man` write files meant to be installed for everyone.
    if !matches!(command, Command::Completions { .. } | Command::Man { .. }) {
        crate::private::restrict_umask();
    }
    match command {
        Command::Serve {
            toolsets,
            http,
            oauth,
            allowed_host,
            allowed_origin,
            tokens,
            related,
            http_limits,
            log_format: _,
        } => {
            serve::set_related(related)?;
            let http = http.map(|listen| crate::http::HttpSettings {
                listen,
                oauth: oauth.settings(),
                allowed_hosts: allowed_host,
                allowed_origins: allowed_origin,
                data_dir: settings.data_dir.clone(),
                tokens: crate::http::tokens::tokens_path(&settings.data_dir, tokens),
                limits: http_limits.limits(),
                metrics_public: http_limits.metrics_public,
            });
            serve(&settings, toolsets, http)
        }
        Command::Sessions { json, kind, limit } => sessions(&settings, json, kind, limit),
        Command::Show { id } => show(&settings, &id),
        Command::Export {
            id,
            all,
            format,
            at,
            output,
        } => match (format.unwrap_or(ExportFormat::Render(Format::Jsonl)), id) {
            (ExportFormat::Otlp, id) => {
                export_otlp::export_otlp(&settings, id.filter(|_| !all).as_deref(), at, output)
            }
            (ExportFormat::Render(format), Some(id)) if !all => {
                export_cmd(&settings, &id, format, at, output.as_deref())
            }
            (ExportFormat::Render(format), _) => export_all(&settings, format, output.as_deref()),
        },
        Command::Replay { id, at } => replay(&settings, &id, at),
        Command::Search {
            text,
            json,
            limit,
            session,
            kind,
            since,
            until,
            cursor,
            mode,
            by_session,
        } => search(
            &settings,
            search::SearchArgs {
                query: text,
                json,
                limit,
                session,
                kinds: kind,
                since,
                until,
                cursor,
                mode,
                by_session,
            },
        ),
        Command::Reindex { embeddings } => reindex(&settings, embeddings),
        Command::Verify { id, rebuild } => verify(&settings, id.as_deref(), rebuild),
        Command::Import { file, strict } => import(&settings, &file, strict),
        Command::Ui { port } => {
            let ledger = open_existing(&settings)?;
            runtime()?.block_on(crate::ui::run(ledger, port))
        }
        Command::Demo => demo(&settings),
        Command::Copy { to } => copy(&settings, &to),
        Command::Recover { to } => recover(&settings, &to),
        Command::Token { command } => token(&settings, command),
        Command::Doctor => doctor(&settings),
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => man(dir.as_deref()),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Opens the ledger, creating it if missing: for the commands that record (`serve`,
/// `demo`, `import`).
fn open(settings: &Settings) -> anyhow::Result<Ledger> {
    Ok(Ledger::open_at(
        &settings.location(),
        OpenMode::Create,
        families(),
    )?)
}

/// The product's families: the command line is the composition root that builds them
/// and hands them to every ledger it opens.
fn families() -> crate::event::Families {
    crate::tools::families()
}

/// Opens an existing ledger: for the commands that only read. A missing one is an error
/// naming the path and the default ledger, so a mistyped `--data-dir` is noticed instead
/// of answering from a new, empty ledger.
fn open_existing(settings: &Settings) -> anyhow::Result<Ledger> {
    let location = settings.location();
    match (
        Ledger::open_at(&location, OpenMode::Existing, families()),
        &location,
    ) {
        (Ok(ledger), _) => {
            if let Some(note) = ledger.read_only() {
                eprintln!("note: {note}");
            }
            Ok(ledger)
        }
        (Err(OpenError::NoLedger { path }), Location::Url(_)) => bail!(
            "no ledger in {} (check --store / {STORE_ENV}). Read-only commands never \
             create one: `serve`, `demo`, `import` and `copy --to` do",
            path.display()
        ),
        (Err(OpenError::NoLedger { path }), Location::DataDir(_)) => {
            let default = match resolve_data_dir(None) {
                Ok(dir) if dir == settings.data_dir => {
                    "this is the default data directory".to_string()
                }
                Ok(dir) => format!(
                    "the default ledger is {}",
                    dir.join(LEDGER_FILE_NAME).display()
                ),
                Err(_) => "there is no default data directory here".to_string(),
            };
            bail!(
                "no ledger at {} (check --data-dir / {DATA_DIR_ENV}; {default}). Read-only \
                 commands never create one: `serve`, `demo` and `import` do",
                path.display()
            )
        }
        (Err(error), _) => Err(error.into()),
    }
}

fn stdout_write(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

fn find_session(ledger: &Ledger, id: &str) -> anyhow::Result<SessionHead> {
    let session = ledger.resolve(id)?.with_context(|| {
        format!(
            "no session {id:?} in {}; `reasoning-ledger sessions` lists them",
            ledger.path().display()
        )
    })?;
    ledger
        .head(session)?
        .with_context(|| format!("session {session} has no head"))
}

fn check_at(head: &SessionHead, at: Option<u64>) -> anyhow::Result<()> {
    if let Some(at) = at
        && (at == 0 || at > head.seq)
    {
        bail!(
            "--at {at} is out of range: session {} has events 1..={}",
            head.session,
            head.seq
        );
    }
    Ok(())
}
