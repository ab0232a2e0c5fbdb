//! The command line: arguments parsed once into validated settings, then one
//! file per subcommand (mini-redis style): `serve`, `sessions`, `show`, `export`, `replay`,
//! `search`, `reindex`, `verify`, `import`, `demo`, `copy`, `doctor`, `completions` and
//! `man` (and `ui`, served by [`crate::ui`]).
//!
//! Owns: clap definitions, data-directory resolution, exit codes (0 ok, 1 error, 2 usage)
//! and quiet exit on a broken pipe. Must not: touch redb (it goes through [`Ledger`]) or
//! print anything but the command's output to stdout (`serve` prints nothing at all).

use crate::event::{Event, SessionId, SessionKind};
use crate::export::{self, Format};
use crate::query;
use crate::server::{LedgerServer, serve_stdio};
use crate::store::{LEDGER_FILE_NAME, Ledger, OpenError, SessionHead};
use crate::tools::Toolset;
use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod completions;
mod copy;
mod demo;
mod doctor;
mod export_cmd;
mod import;
mod reindex;
mod replay;
mod search;
mod serve;
mod sessions;
mod show;
mod verify;

use completions::{completions, man};
use copy::copy;
use demo::demo;
use doctor::doctor;
use export_cmd::{export_all, export_cmd};
use import::import;
use reindex::reindex;
use replay::replay;
use search::search;
use serve::serve;
use sessions::sessions;
use show::show;
use verify::verify;

/// Environment variable naming the data directory.
pub(crate) const DATA_DIR_ENV: &str = "REASONING_LEDGER_DIR";
/// Environment variable choosing the store (`postgres://…`); unset: the redb file in the
/// data directory.
pub(crate) const STORE_ENV: &str = "REASONING_LEDGER_STORE";
/// Environment variable choosing the toolsets of `serve`.
pub(crate) const TOOLSETS_ENV: &str = "REASONING_LEDGER_TOOLSETS";
/// Environment variable that turns the stderr thought box off when "true" (any case).
pub(crate) const DISABLE_THOUGHT_LOGGING_ENV: &str = "DISABLE_THOUGHT_LOGGING";

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
        #[arg(long, value_name = "A,B", help = toolsets_help())]
        toolsets: Option<String>,
        /// Serve MCP's streamable HTTP transport at http://ADDR/mcp instead of stdio: PORT (loopback) or IP:PORT. A bearer token is required: REASONING_LEDGER_TOKEN, else one generated into http-token in the data directory
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// With --http: another name clients reach this server by (Host header check), repeatable
        #[arg(long, value_name = "NAME", requires = "http")]
        allowed_host: Vec<String>,
        /// With --http: a browser origin allowed to call (scheme://host:port), repeatable
        #[arg(long, value_name = "ORIGIN", requires = "http")]
        allowed_origin: Vec<String>,
        /// Answer a new session's first thought with up to N earlier sessions like it (related: [...]) [env: REASONING_LEDGER_RELATED; default: 0, off]
        #[arg(long, value_name = "N")]
        related: Option<usize>,
    },
    /// List sessions, newest first
    Sessions {
        /// Print JSON ({"sessions": [...]}, as list_sessions answers) instead of a table
        #[arg(long)]
        json: bool,
        /// Only sessions of this kind (thinking, think)
        #[arg(long)]
        kind: Option<String>,
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
        /// Output format: mermaid (flowchart), markdown, json (the whole tree), jsonl (the raw events, re-importable), svg (a picture) or html (one offline page: picture, thoughts, replay slider, filter)
        #[arg(long, short = 'f', value_parser = parse_format, value_name = "FORMAT")]
        format: Format,
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
        #[arg(long, value_name = "KIND")]
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
        #[arg(long)]
        mode: Option<String>,
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
    /// Copy the whole ledger into another store: a PostgreSQL URL or a data directory (idempotent: run it again to resume or to bring the copy up to date)
    Copy {
        /// Where to: postgres://… or a directory (its ledger.redb)
        #[arg(long, value_name = "URL|DIR")]
        to: String,
    },
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

fn parse_format(text: &str) -> Result<Format, String> {
    text.parse()
}

/// Settings resolved once from arguments and environment.
pub(crate) struct Settings {
    pub data_dir: PathBuf,
    /// The PostgreSQL URL of `--store` / `REASONING_LEDGER_STORE`; `None`: redb.
    pub store: Option<String>,
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
        Some(url) if crate::store::postgres::is_postgres_url(url.trim()) => {
            Ok(Some(url.trim().to_string()))
        }
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
    init_logging();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if is_broken_pipe(&error) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// Logs go to stderr, filtered by `RUST_LOG` (`warn`, `reasoning_ledger=debug`, …;
/// target=level pairs, no regular expressions), warnings and errors by default; and to
/// the MCP clients that set a level ([`crate::mcp_log`], its own filter: off until then).
fn init_logging() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|text| text.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::WARN));
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_filter(filter),
        )
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
    let command = cli.command.unwrap_or(Command::Serve {
        toolsets: None,
        http: None,
        allowed_host: Vec::new(),
        allowed_origin: Vec::new(),
        related: None,
    });
    match command {
        Command::Serve {
            toolsets,
            http,
            allowed_host,
            allowed_origin,
            related,
        } => {
            serve::set_related(related)?;
            let http = http.map(|listen| crate::http::HttpSettings {
                listen,
                allowed_hosts: allowed_host,
                allowed_origins: allowed_origin,
                data_dir: settings.data_dir.clone(),
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
        } => match id {
            Some(id) if !all => export_cmd(&settings, &id, format, at, output.as_deref()),
            _ => export_all(&settings, format, output.as_deref()),
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
            },
        ),
        Command::Reindex { embeddings } => reindex(&settings, embeddings),
        Command::Verify { id, rebuild } => verify(&settings, id.as_deref(), rebuild),
        Command::Import { file } => import(&settings, &file),
        Command::Ui { port } => {
            let ledger = open_existing(&settings)?;
            runtime()?.block_on(crate::ui::run(ledger, port))
        }
        Command::Demo => demo(&settings),
        Command::Copy { to } => copy(&settings, &to),
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
    match &settings.store {
        Some(url) => Ok(Ledger::open_postgres(url)?),
        None => Ok(Ledger::open(&settings.data_dir)?),
    }
}

/// Opens an existing ledger: for the commands that only read. A missing one is an error
/// naming the path and the default ledger, so a mistyped `--data-dir` is noticed instead
/// of answering from a new, empty ledger.
fn open_existing(settings: &Settings) -> anyhow::Result<Ledger> {
    if let Some(url) = &settings.store {
        return match Ledger::open_postgres_existing(url) {
            Ok(ledger) => Ok(ledger),
            Err(OpenError::NoLedger { path }) => bail!(
                "no ledger in {} (check --store / {STORE_ENV}). Read-only commands never \
                 create one: `serve`, `demo`, `import` and `copy --to` do",
                path.display()
            ),
            Err(error) => Err(error.into()),
        };
    }
    match Ledger::open_existing(&settings.data_dir) {
        Ok(ledger) => Ok(ledger),
        Err(OpenError::NoLedger { path }) => {
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
        Err(error) => Err(error.into()),
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
