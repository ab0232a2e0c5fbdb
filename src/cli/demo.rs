//! `demo`: a tour of every family through the real server (`data/demo.json`), printed, with
//! the pictures it wrote and follow-ups that run as printed.
//!
//! Owns: reading the tour, driving a `serve --toolsets all` child over MCP, the families
//! that need a model (run only when one is configured, else one line on how to see them),
//! `<data dir>/demo/`: the SVG/HTML pictures and [`TOUR_RECORD`], the sessions an earlier
//! run recorded (a second run shows them again instead of recording the tour twice). What
//! it prints: on a terminal, what it is doing, one line per family, the pictures, then what
//! to try; into a pipe, each session's Markdown too. Must not: record anything itself
//! (every event comes from the server's tools) or need a key: without a model it stays a
//! few seconds long.

use super::*;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The tour `demo` runs: tool calls as a client would send them, family by family.
const DEMO_TOUR: &str = include_str!("../../data/demo.json");

/// Folder of the data directory the pictures go to.
const PICTURES_DIR: &str = "demo";

/// The file in [`PICTURES_DIR`] naming the ledger and the session of each family the last
/// run recorded or showed.
const TOUR_RECORD: &str = "tour.json";

/// Placeholder in a tour's string arguments replaced by a fresh id per run (so a caller
/// chosen session id, like the agent's, starts a new session each time).
const RUN_PLACEHOLDER: &str = "{run}";

#[derive(Deserialize)]
struct Tour {
    families: Vec<FamilyTour>,
}

#[derive(Deserialize)]
struct FamilyTour {
    family: String,
    title: String,
    /// The argument carrying the session id of the first answer into the next calls.
    #[serde(rename = "continue")]
    continue_as: Option<String>,
    /// `model`: run only when a model provider is configured.
    needs: Option<String>,
    steps: Vec<TourStep>,
}

#[derive(Deserialize)]
struct TourStep {
    tool: String,
    arguments: Map<String, Value>,
}

/// One family's run: the session it recorded, or why it did not run.
struct FamilyRun {
    family: String,
    title: String,
    outcome: Outcome,
}

enum Outcome {
    /// `calls`: how many calls recorded it now; 0 when an earlier run did.
    Recorded {
        session: String,
        markdown: String,
        calls: usize,
    },
    Skipped(String),
}

/// [`TOUR_RECORD`]: where the tour was recorded, and each family's session there.
#[derive(Default, serde::Serialize, Deserialize)]
struct TourRecord {
    /// The ledger as `demo` names it (the redb file, or the redacted PostgreSQL URL).
    ledger: String,
    sessions: std::collections::BTreeMap<String, String>,
}

impl TourRecord {
    /// The record in `folder` when it is about `ledger`; an empty one otherwise (none yet,
    /// unreadable, or of another ledger).
    fn read(folder: &Path, ledger: &str) -> TourRecord {
        std::fs::read(folder.join(TOUR_RECORD))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<TourRecord>(&bytes).ok())
            .filter(|record| record.ledger == ledger)
            .unwrap_or_default()
    }

    /// Replaces the record in `folder` whole (a new file renamed over the old one).
    fn write(&self, folder: &Path) -> anyhow::Result<()> {
        let mut temp = tempfile::NamedTempFile::new_in(folder)
            .with_context(|| format!("creating a file in {}", folder.display()))?;
        serde_json::to_writer_pretty(&mut temp, self)?;
        temp.as_file().sync_all()?;
        temp.persist(folder.join(TOUR_RECORD))
            .map_err(|e| e.error)
            .with_context(|| format!("writing {}", folder.join(TOUR_RECORD).display()))?;
        Ok(())
    }
}

pub(super) fn demo(settings: &Settings) -> anyhow::Result<()> {
    runtime()?.block_on(run_demo(&settings.data_dir, settings.store.as_deref()))
}

async fn run_demo(data_dir: &Path, store: Option<&str>) -> anyhow::Result<()> {
    let tour: Tour = serde_json::from_str(DEMO_TOUR).context("demo tour")?;
    let exe = std::env::current_exe().context("locating this binary")?;
    let data_dir = data_dir.to_path_buf();
    let mut command = tokio::process::Command::new(&exe);
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(&data_dir)
        .arg("--toolsets")
        .arg("all")
        .env(DISABLE_THOUGHT_LOGGING_ENV, "true");
    if let Some(url) = store {
        command.arg("--store").arg(url);
    }
    let where_stored = match store {
        Some(url) => crate::store::postgres::redact_url(url),
        None => data_dir.join(LEDGER_FILE_NAME).display().to_string(),
    };
    let model = crate::provider::config::ProviderSettings::load(Some(&data_dir))
        .provider
        .map(|provider| format!("{} ({})", provider.model, provider.base_url));
    let folder = std::path::absolute(data_dir.join(PICTURES_DIR))
        .unwrap_or_else(|_| data_dir.join(PICTURES_DIR));
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("creating {} for the demo's pictures", folder.display()))?;
    let earlier = TourRecord::read(&folder, &where_stored);
    let client = crate::mcp_client::McpClient::spawn(command)?;
    client
        .initialize("reasoning-ledger-demo")
        .await
        .context("starting the server")?;
    eprintln!(
        "demo: a server (this binary, `serve`) is running as a child process on {where_stored}; \
         calling its tools over MCP, as a client would, for {} families",
        tour.families.len()
    );
    let run_id = ulid::Ulid::generate().to_string().to_ascii_lowercase();
    let program = follow_up_program(&exe);
    let mut runs = Vec::new();
    for family in &tour.families {
        let needs_model = family.needs.as_deref() == Some("model");
        if let Some(session) = earlier.sessions.get(&family.family)
            && let Ok(markdown) = session_markdown(&client, family, session).await
        {
            eprintln!(
                "demo: {}: shown again (recorded by an earlier run)",
                family.family
            );
            runs.push(FamilyRun {
                family: family.family.clone(),
                title: family.title.clone(),
                outcome: Outcome::Recorded {
                    session: session.clone(),
                    markdown,
                    calls: 0,
                },
            });
            continue;
        }
        let outcome = match (&model, needs_model) {
            (None, true) => Outcome::Skipped(format!(
                "needs a model and none is configured. To see it, point the server at any \
                 OpenAI-compatible one (from a checkout: `tools/local-model/run serve 8080`) \
                 and run `REASONING_LEDGER_LLM_BASE_URL=http://127.0.0.1:8080/v1 \
                 REASONING_LEDGER_LLM_MODEL=local {program} demo`"
            )),
            _ => match run_family(&client, family, &run_id).await {
                Ok(outcome) => outcome,
                // A model that does not answer is the model's problem, not the demo's.
                // (The failed call is recorded all the same: `sessions` lists it.)
                Err(error) if needs_model => Outcome::Skipped(format!(
                    "the model {} did not answer ({error:#}); `doctor` checks the provider",
                    model.as_deref().unwrap_or_default()
                )),
                Err(error) => return Err(error),
            },
        };
        runs.push(FamilyRun {
            family: family.family.clone(),
            title: family.title.clone(),
            outcome,
        });
    }
    let pictures = write_pictures(&client, &folder, &runs, &earlier).await?;
    client.close().await?;
    let mut record = TourRecord {
        ledger: where_stored.clone(),
        sessions: Default::default(),
    };
    for run in &runs {
        if let Outcome::Recorded { session, .. } = &run.outcome {
            record.sessions.insert(run.family.clone(), session.clone());
        }
    }
    record.write(&folder)?;

    let thinking = runs
        .iter()
        .find_map(|run| match &run.outcome {
            Outcome::Recorded { session, .. } if run.family == "thinking" => Some(session),
            _ => None,
        })
        .context("demo: no thinking session")?;
    let terminal = std::io::stdout().is_terminal();
    let mut out = String::new();
    if terminal {
        out.push_str(&format!(
            "A tour of reasoning-ledger: this binary started as an MCP server and called as a \
             client would, one family of tools at a time. Every call is an event in {where_stored}.\n\n"
        ));
        let width = runs.iter().map(|run| run.family.len()).max().unwrap_or(0);
        for run in &runs {
            let line = match &run.outcome {
                Outcome::Recorded { session, calls, .. } => {
                    let how = match calls {
                        0 => "recorded by an earlier run".to_string(),
                        n => export::counted(*n, "call", "calls"),
                    };
                    format!("{} · {how} · session {session}", run.title)
                }
                Outcome::Skipped(why) => format!("not run: {why}"),
            };
            out.push_str(&format!("  {:width$}  {line}\n", run.family));
        }
        out.push('\n');
    } else {
        for run in &runs {
            out.push_str(&format!("## {}: {}\n\n", run.family, run.title));
            match &run.outcome {
                Outcome::Recorded { markdown, .. } => {
                    out.push_str(markdown);
                    out.push('\n');
                }
                Outcome::Skipped(why) => out.push_str(&format!("Not run: {why}.\n\n")),
            }
        }
    }
    if runs
        .iter()
        .any(|run| matches!(run.outcome, Outcome::Recorded { calls: 0, .. }))
    {
        out.push_str(&format!(
            "Sessions an earlier demo recorded in this ledger are shown again, not recorded \
             twice (delete {} to record the tour anew).\n\n",
            shell_quote(&folder.join(TOUR_RECORD))
        ));
    }
    let data_dir_arg = match store {
        // The URL as given (a password in it is the user's own); `sh` reads it as one word.
        Some(url) => format!("--store {}", shell_quote(Path::new(url))),
        None => format!(
            "--data-dir {}",
            shell_quote(&std::path::absolute(&data_dir).unwrap_or(data_dir.clone()))
        ),
    };
    if terminal {
        // One page per session: the picture with its replay; the SVG is beside it.
        out.push_str("Pictures of these sessions (open them in a browser; an .svg beside each):\n");
        for path in pictures
            .iter()
            .filter(|path| path.extension() == Some("html".as_ref()))
        {
            out.push_str(&format!("  {}\n", shell_quote(path)));
        }
    } else {
        out.push_str("Pictures of these sessions (open them in a browser):\n");
        for path in &pictures {
            out.push_str(&format!("  {}\n", shell_quote(path)));
        }
    }
    out.push_str(&format!(
        "All of them, updating live as sessions grow, in the web view:\n  {program} {data_dir_arg} ui\n"
    ));
    let recorded = runs
        .iter()
        .filter(|run| matches!(run.outcome, Outcome::Recorded { .. }))
        .count();
    out.push_str(&format!(
        "\nSession {thinking} (thinking) and {} more are stored in {where_stored}.\nTry:\n",
        recorded - 1
    ));
    for command in [
        format!("show {thinking}"),
        format!("replay {thinking} --at 4"),
        format!("export {thinking} --format json"),
        "sessions".to_string(),
    ] {
        out.push_str(&format!("  {program} {data_dir_arg} {command}\n"));
    }
    stdout_write(&out)
}

/// Runs one family's calls in order; the session of its first answer carries on.
async fn run_family(
    client: &crate::mcp_client::McpClient,
    family: &FamilyTour,
    run_id: &str,
) -> anyhow::Result<Outcome> {
    let mut carried: Option<Value> = None;
    let mut session: Option<String> = None;
    let mut calls = 0;
    for step in &family.steps {
        let mut arguments = step.arguments.clone();
        for value in arguments.values_mut() {
            if let Value::String(text) = value
                && text.contains(RUN_PLACEHOLDER)
            {
                *text = text.replace(RUN_PLACEHOLDER, run_id);
            }
        }
        if let (Some(name), Some(id)) = (&family.continue_as, &carried) {
            arguments.insert(name.clone(), id.clone());
        }
        let mut result = client.call_tool(&step.tool, arguments).await?;
        if result["isError"] == Value::Bool(true) {
            // An error envelope's message (the agent's), else the whole text.
            let text = result["content"][0]["text"].as_str().unwrap_or_default();
            let message = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|envelope| envelope["message"].as_str().map(String::from))
                .unwrap_or_else(|| text.to_string());
            bail!("{} answered with an error: {message}", step.tool);
        }
        let answer = result
            .get_mut("structuredContent")
            .map(Value::take)
            .context("demo: the server answered without structured content")?;
        eprintln!(
            "demo: {}: {} ({} of {})",
            family.family,
            step.tool,
            calls + 1,
            family.steps.len()
        );
        calls += 1;
        if carried.is_none()
            && let Some(name) = &family.continue_as
        {
            carried = answer.get(name).cloned();
        }
        if session.is_none() {
            session = ["ledger_session_id", "sessionId", "session_id"]
                .iter()
                .find_map(|key| answer[*key].as_str().map(String::from));
        }
    }
    let session =
        session.with_context(|| format!("demo: {} recorded no session", family.family))?;
    let markdown = session_markdown(client, family, &session).await?;
    Ok(Outcome::Recorded {
        session,
        markdown,
        calls,
    })
}

/// A family's session as the demo prints it into a pipe: its Markdown, the thinking
/// session's Mermaid first. An error when the ledger has no such session.
async fn session_markdown(
    client: &crate::mcp_client::McpClient,
    family: &FamilyTour,
    session: &str,
) -> anyhow::Result<String> {
    let mut markdown = String::new();
    if family.family == "thinking" {
        markdown.push_str("```mermaid\n");
        markdown.push_str(&export_text(client, session, Format::Mermaid).await?);
        markdown.push_str("```\n\n");
    }
    markdown.push_str(&export_text(client, session, Format::Markdown).await?);
    Ok(markdown)
}

/// A session in one export format, through the server's `export_session`.
async fn export_text(
    client: &crate::mcp_client::McpClient,
    session: &str,
    format: Format,
) -> anyhow::Result<String> {
    let mut arguments = Map::new();
    arguments.insert("sessionId".into(), serde_json::json!(session));
    arguments.insert("format".into(), serde_json::json!(format.as_str()));
    let result = client.call_tool("export_session", arguments).await?;
    if result["isError"] == Value::Bool(true) {
        bail!(
            "demo: {session} could not be exported: {}",
            result["content"][0]["text"]
        );
    }
    result["content"][0]["text"]
        .as_str()
        .map(String::from)
        .with_context(|| format!("demo: empty {} export of {session}", format.as_str()))
}

/// Writes each recorded session's SVG and HTML into `folder` (`<data dir>/demo/`), named
/// by family and session (a session shown again writes its files again), and removes the
/// pictures of the sessions `earlier` named that this run no longer shows; returns the
/// absolute paths written.
async fn write_pictures(
    client: &crate::mcp_client::McpClient,
    folder: &Path,
    runs: &[FamilyRun],
    earlier: &TourRecord,
) -> anyhow::Result<Vec<PathBuf>> {
    let picture = |family: &str, session: &str, format: Format| {
        folder.join(format!("{family}-{session}.{}", format.as_str()))
    };
    let mut written = Vec::new();
    for run in runs {
        let Outcome::Recorded { session, .. } = &run.outcome else {
            continue;
        };
        for format in [Format::Svg, Format::Html] {
            let text = export_text(client, session, format).await?;
            let path = picture(&run.family, session, format);
            let mut temp = tempfile::NamedTempFile::new_in(folder)
                .with_context(|| format!("creating a file in {}", folder.display()))?;
            temp.write_all(text.as_bytes())?;
            temp.as_file().sync_all()?;
            temp.persist(&path)
                .map_err(|e| e.error)
                .with_context(|| format!("writing {}", path.display()))?;
            written.push(path);
        }
    }
    for (family, session) in &earlier.sessions {
        for format in [Format::Svg, Format::Html] {
            let path = picture(family, session, format);
            if !written.contains(&path) {
                // Gone already is as good as removed.
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    Ok(written)
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
