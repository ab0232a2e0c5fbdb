//! The command line: arguments parsed once into validated settings, then one function
//! per subcommand.
//!
//! Owns: clap definitions, data-directory resolution, exit codes (0 ok, 1 error, 2 usage)
//! and quiet exit on a broken pipe. Must not: touch redb (it goes through [`Ledger`]) or
//! print anything but the command's output to stdout (`serve` prints nothing at all).

use crate::event::{Event, SessionId, SessionKind};
use crate::export::{self, Format};
use crate::server::{LedgerServer, serve_stdio};
use crate::store::{LEDGER_FILE_NAME, Ledger, OpenError, SessionHead};
use crate::tools::{Toolset, ledger as ledger_tools};
use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Environment variable naming the data directory.
pub const DATA_DIR_ENV: &str = "REASONING_LEDGER_DIR";
/// Environment variable choosing the toolsets of `serve`.
pub const TOOLSETS_ENV: &str = "REASONING_LEDGER_TOOLSETS";
/// Environment variable that turns the stderr thought box off when "true" (any case).
pub const DISABLE_THOUGHT_LOGGING_ENV: &str = "DISABLE_THOUGHT_LOGGING";

/// The scripted session `demo` runs: tool calls as a client would send them.
const DEMO_SCRIPT: &str = include_str!("../data/demo.json");

#[derive(Parser, Debug)]
#[command(
    name = "reasoning-ledger",
    version,
    about = "An MCP server that records every reasoning step in a crash-safe ledger",
    long_about = "An MCP server that records every reasoning step in a crash-safe ledger.\n\nWith no command it serves MCP over stdio (same as `serve`)."
)]
pub struct Cli {
    /// Directory holding ledger.redb [env: REASONING_LEDGER_DIR; default: the platform data directory]
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve MCP over stdio (the default)
    Serve {
        #[arg(long, value_name = "A,B", help = toolsets_help())]
        toolsets: Option<String>,
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
    /// Export one session
    Export {
        /// Session id or alias (`sessions` lists them)
        id: String,
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
    /// Search every session's text
    Search {
        /// Text to find, case-insensitive: the exact phrase first, then all its words
        text: String,
        /// Print JSON ({"query", "matches"}, as search_history answers) instead of lines
        #[arg(long)]
        json: bool,
        /// At most this many matches
        #[arg(long, default_value_t = 20)]
        limit: usize,
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
    /// Run a short scripted session through the real server and print it (writes into the ledger of --data-dir, else the default one)
    Demo,
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
pub struct Settings {
    pub data_dir: PathBuf,
}

/// Where the ledger lives: `--data-dir`, else `REASONING_LEDGER_DIR`, else the platform
/// data directory.
pub fn resolve_data_dir(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
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

/// Logs go to stderr only, filtered by `RUST_LOG` (`warn`, `reasoning_ledger=debug`, …;
/// target=level pairs, no regular expressions), warnings and errors by default.
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
                .with_ansi(false),
        )
        .with(filter)
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
    };
    let command = cli.command.unwrap_or(Command::Serve { toolsets: None });
    match command {
        Command::Serve { toolsets } => serve(&settings, toolsets),
        Command::Sessions { json, kind, limit } => sessions(&settings, json, kind, limit),
        Command::Show { id } => show(&settings, &id),
        Command::Export {
            id,
            format,
            at,
            output,
        } => export_cmd(&settings, &id, format, at, output.as_deref()),
        Command::Replay { id, at } => replay(&settings, &id, at),
        Command::Search { text, json, limit } => search(&settings, &text, json, limit),
        Command::Verify { id, rebuild } => verify(&settings, id.as_deref(), rebuild),
        Command::Import { file } => import(&settings, &file),
        Command::Ui { port } => {
            let ledger = open_existing(&settings)?;
            runtime()?.block_on(crate::ui::run(ledger, port))
        }
        Command::Demo => demo(&settings),
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
    Ok(Ledger::open(&settings.data_dir)?)
}

/// Opens an existing ledger: for the commands that only read. A missing one is an error
/// naming the path and the default ledger, so a mistyped `--data-dir` is noticed instead
/// of answering from a new, empty ledger.
fn open_existing(settings: &Settings) -> anyhow::Result<Ledger> {
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

fn serve(settings: &Settings, toolsets: Option<String>) -> anyhow::Result<()> {
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
    tracing::info!(path = %ledger.path().display(), ?toolsets, "serving MCP on stdio");
    let runtime = runtime()?;
    let _entered = runtime.enter();
    let models = crate::provider::Models::new(crate::provider::ProviderSettings::load(Some(
        &settings.data_dir,
    )));
    match models.http_provider() {
        Some((name, model)) => tracing::info!(provider = name, model, "model provider"),
        None => tracing::info!("no HTTP model provider configured: MCP sampling only"),
    }
    let ctx = crate::tools::ToolContext::with_models(ledger, log_thoughts, models);
    let server = LedgerServer::with_context(ctx, toolsets);
    runtime.block_on(serve_stdio(server))
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

fn sessions(
    settings: &Settings,
    json: bool,
    kind: Option<String>,
    limit: usize,
) -> anyhow::Result<()> {
    let kind = match kind {
        Some(text) => Some(SessionKind::parse(&text).with_context(|| {
            format!("unknown kind {text:?}: use {}", crate::tools::kind_names())
        })?),
        None => None,
    };
    let ledger = open_existing(settings)?;
    let (rows, next) = ledger_tools::list_sessions(&ledger, kind, None, None, limit)?;
    if json {
        let answer = ledger_tools::sessions_answer(&rows, next);
        return stdout_write(&format!("{}\n", serde_json::to_string_pretty(&answer)?));
    }
    let mut text = String::new();
    if rows.is_empty() {
        text.push_str(&format!("no sessions in {}\n", ledger.path().display()));
    } else {
        text.push_str(&format!(
            "{:<26}  {:<8}  {:>6}  {:>8}  {:>8}  {:<8}  {:<24}  {}\n",
            "SESSION", "KIND", "EVENTS", "THOUGHTS", "BRANCHES", "STATUS", "UPDATED", "TITLE"
        ));
        for head in &rows {
            let s = &head.summary;
            text.push_str(&format!(
                "{:<26}  {:<8}  {:>6}  {:>8}  {:>8}  {:<8}  {:<24}  {}\n",
                head.session.to_string(),
                s.kind.as_str(),
                head.seq,
                s.thoughts,
                s.branches.len(),
                s.status(),
                crate::event::format_time(s.updated_at),
                s.title.replace(['\n', '\r'], " ")
            ));
        }
    }
    stdout_write(&text)
}

fn show(settings: &Settings, id: &str) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let head = find_session(&ledger, id)?;
    let tree = ledger_tools::load_tree(&ledger, &head, None)?;
    stdout_write(&export::markdown::render(&tree))
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

fn export_cmd(
    settings: &Settings,
    id: &str,
    format: Format,
    at: Option<u64>,
    output: Option<&Path>,
) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let head = find_session(&ledger, id)?;
    check_at(&head, at)?;
    let (tree, events) = ledger_tools::load_for_export(&ledger, &head, at, format)?;
    let text = export::render(format, &tree, &events);
    match output {
        None => stdout_write(&text),
        Some(path) => {
            let mut file = create_new_file(path)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            eprintln!("wrote {} ({} bytes)", path.display(), text.len());
            Ok(())
        }
    }
}

/// Creates `path` for an export, refusing to overwrite, with an error that says what is
/// wrong: the file exists, or its folder does not.
fn create_new_file(path: &Path) -> anyhow::Result<std::fs::File> {
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => Ok(file),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "{} already exists: export never overwrites a file (choose another name or remove it)",
            path.display()
        ),
        Err(_) if !folder.exists() => bail!(
            "cannot write {}: the folder {} does not exist (create it first)",
            path.display(),
            folder.display()
        ),
        Err(_) if !folder.is_dir() => bail!(
            "cannot write {}: {} is a file, not a folder",
            path.display(),
            folder.display()
        ),
        Err(error) => {
            Err(anyhow::Error::new(error).context(format!("cannot create {}", path.display())))
        }
    }
}

fn replay(settings: &Settings, id: &str, at: Option<u64>) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let head = find_session(&ledger, id)?;
    check_at(&head, at)?;
    let (tree, events) = ledger_tools::load_for_export(&ledger, &head, at, Format::Jsonl)?;
    let mut text = format!(
        "Replay of session {} at seq {} of {}\n\n",
        head.session, tree.at_seq, head.seq
    );
    for event in &events {
        let line = event
            .payload
            .text()
            .unwrap_or("")
            .replace(['\n', '\r'], " ");
        let line: String = line.chars().take(100).collect();
        text.push_str(&format!(
            "{:>5}  {}  {:<16}  {}\n",
            event.seq,
            event.at_rfc3339(),
            event.payload.type_name(),
            line
        ));
    }
    text.push('\n');
    text.push_str(&export::markdown::render(&tree));
    stdout_write(&text)
}

fn search(settings: &Settings, query: &str, json: bool, limit: usize) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let hits = ledger_tools::search(&ledger, query, None, limit)?;
    if json {
        let answer = ledger_tools::search_answer(query, &hits);
        return stdout_write(&format!("{}\n", serde_json::to_string_pretty(&answer)?));
    }
    let mut text = String::new();
    for hit in &hits {
        text.push_str(&format!(
            "{} #{:<5} {:<8} {}\n",
            hit.session_id,
            hit.seq,
            hit.kind,
            hit.snippet.replace(['\n', '\r'], " ")
        ));
    }
    if hits.is_empty() {
        text.push_str("no matches\n");
    }
    stdout_write(&text)
}

fn verify(settings: &Settings, id: Option<&str>, rebuild: bool) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    if rebuild {
        let fixed = ledger.rebuild_summaries()?;
        let mut text = format!("rebuilt {} session summary(ies)\n", fixed.len());
        for session in &fixed {
            text.push_str(&format!("  {session}\n"));
        }
        stdout_write(&text)?;
    }
    let verified = match id {
        Some(id) => {
            let session = ledger
                .resolve(id)?
                .with_context(|| format!("no session {id:?}"))?;
            vec![ledger.verify_session(session)?]
        }
        None => ledger.verify_all()?,
    };
    let events: u64 = verified.iter().map(|v| v.events).sum();
    stdout_write(&format!(
        "ok: {} session(s), {} event(s), every hash chain and seq checked in {}\n",
        verified.len(),
        events,
        ledger.path().display()
    ))
}

/// Largest JSONL line `import` reads, in bytes.
pub const MAX_IMPORT_LINE_BYTES: usize = 64 * 1024 * 1024;

fn import(settings: &Settings, file: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut batches: Vec<Vec<Event>> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if line.len() > MAX_IMPORT_LINE_BYTES {
            bail!(
                "{}:{}: line longer than {MAX_IMPORT_LINE_BYTES} bytes",
                file.display(),
                number + 1
            );
        }
        let event: Event = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not an exported event", file.display(), number + 1))?;
        match batches.last_mut() {
            Some(batch) if batch[0].session == event.session => batch.push(event),
            _ => batches.push(vec![event]),
        }
    }
    let ledger = open(settings)?;
    let mut imported = 0usize;
    let mut sessions: Vec<SessionId> = Vec::new();
    for batch in batches {
        let session = batch[0].session;
        let head_seq = ledger.head(session)?.map_or(0, |h| h.seq);
        // Events the ledger already holds must be the same events (same hash); only the
        // rest are appended.
        let (known, fresh): (Vec<Event>, Vec<Event>) =
            batch.into_iter().partition(|e| e.seq <= head_seq);
        for event in &known {
            let stored = ledger.events(session, event.seq, event.seq)?;
            if event.computed_hash() != event.hash
                || stored.first().map(|s| &s.hash) != Some(&event.hash)
            {
                bail!(
                    "{}: event seq {} of session {session} differs from the one already in the ledger",
                    file.display(),
                    event.seq
                );
            }
        }
        let count = fresh.len();
        ledger
            .write_blocking(move |txn| txn.import(fresh))?
            .with_context(|| format!("importing session {session}"))?;
        imported += count;
        if !sessions.contains(&session) {
            sessions.push(session);
        }
    }
    stdout_write(&format!(
        "imported {imported} event(s) into {} session(s) in {}\n",
        sessions.len(),
        ledger.path().display()
    ))
}

fn demo(settings: &Settings) -> anyhow::Result<()> {
    runtime()?.block_on(run_demo(&settings.data_dir))
}

async fn run_demo(data_dir: &Path) -> anyhow::Result<()> {
    let script: Vec<serde_json::Value> =
        serde_json::from_str(DEMO_SCRIPT).context("demo script")?;
    let exe = std::env::current_exe().context("locating this binary")?;
    let data_dir = data_dir.to_path_buf();
    let mut command = tokio::process::Command::new(&exe);
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(&data_dir)
        .env(DISABLE_THOUGHT_LOGGING_ENV, "true");
    let client = crate::mcp_client::McpClient::spawn(command)?;
    client
        .initialize("reasoning-ledger-demo")
        .await
        .context("starting the server")?;
    eprintln!(
        "demo: a server is running on {}; sending {} thoughts",
        data_dir.display(),
        script.len()
    );
    let mut session_id = None;
    for step in &script {
        let tool = step["tool"]
            .as_str()
            .context("demo step without tool")?
            .to_string();
        let mut arguments = step["arguments"]
            .as_object()
            .cloned()
            .context("demo step without arguments")?;
        if let Some(id) = &session_id {
            arguments.insert("sessionId".into(), serde_json::json!(id));
        }
        let mut result = client.call_tool(&tool, arguments).await?;
        if result["isError"] == serde_json::Value::Bool(true) {
            bail!("demo: {tool} answered with an error: {}", result["content"]);
        }
        let answer = result
            .get_mut("structuredContent")
            .map(serde_json::Value::take)
            .context("demo: the server answered without structured content")?;
        eprintln!("demo: {}", serde_json::to_string(&answer)?);
        session_id = answer["sessionId"].as_str().map(String::from);
    }
    let session_id = session_id.context("demo: no session")?;
    let mut out = String::new();
    for format in [Format::Mermaid, Format::Markdown] {
        let mut arguments = serde_json::Map::new();
        arguments.insert("sessionId".into(), serde_json::json!(session_id));
        arguments.insert("format".into(), serde_json::json!(format.as_str()));
        let result = client.call_tool("export_session", arguments).await?;
        let text = result["content"][0]["text"]
            .as_str()
            .map(String::from)
            .context("demo: empty export")?;
        if format == Format::Mermaid {
            out.push_str("```mermaid\n");
            out.push_str(&text);
            out.push_str("```\n\n");
        } else {
            out.push_str(&text);
        }
    }
    client.close().await?;
    let program = follow_up_program(&exe);
    let data_dir_arg = shell_quote(&std::path::absolute(&data_dir).unwrap_or(data_dir.clone()));
    out.push_str(&format!(
        "\nSession {session_id} is stored in {}.\nTry:\n",
        data_dir.join(LEDGER_FILE_NAME).display()
    ));
    for command in [
        format!("show {session_id}"),
        format!("export {session_id} --format json"),
        "sessions".to_string(),
    ] {
        out.push_str(&format!(
            "  {program} --data-dir {data_dir_arg} {command}\n"
        ));
    }
    stdout_write(&out)
}

/// How a follow-up command names this binary so that it runs as printed: `reasoning-ledger`
/// when that name on `PATH` is this very binary, else its full path (after `cargo run` it
/// lives in the target directory, which is not on `PATH`).
fn follow_up_program(exe: &Path) -> String {
    let exe = exe.canonicalize().unwrap_or_else(|_| exe.to_path_buf());
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            dir.join(exe.file_name().unwrap_or_default())
                .canonicalize()
                .is_ok_and(|found| found == exe)
        })
    });
    match exe.file_stem() {
        Some(stem) if on_path => stem.to_string_lossy().into_owned(),
        _ => shell_quote(&exe),
    }
}

/// `path` as one POSIX shell word: as it is when it holds only characters no shell treats
/// specially, else in single quotes.
fn shell_quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@,=".contains(c));
    if plain {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}
