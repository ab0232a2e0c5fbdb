//! `demo`: a tour of every family through the real server (`data/demo.json`), printed, with
//! the pictures it wrote and follow-ups that run as printed.
//!
//! Owns: reading the tour, driving a `serve --toolsets all` child over MCP, the families
//! that need a model (run only when one is configured, else one line on how to see them),
//! the SVG/HTML files under `<data dir>/demo/`. Must not: record anything itself (every
//! event comes from the server's tools) or need a key: without a model it stays a few
//! seconds long.

use super::*;
use serde::Deserialize;
use serde_json::{Map, Value};

/// The tour `demo` runs: tool calls as a client would send them, family by family.
const DEMO_TOUR: &str = include_str!("../../data/demo.json");

/// Folder of the data directory the pictures go to.
const PICTURES_DIR: &str = "demo";

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
    Recorded { session: String, markdown: String },
    Skipped(String),
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
    let client = crate::mcp_client::McpClient::spawn(command)?;
    client
        .initialize("reasoning-ledger-demo")
        .await
        .context("starting the server")?;
    eprintln!(
        "demo: a server is running on {where_stored}; touring {} families",
        tour.families.len()
    );
    let run_id = ulid::Ulid::generate().to_string().to_ascii_lowercase();
    let program = follow_up_program(&exe);
    let mut runs = Vec::new();
    for family in &tour.families {
        let needs_model = family.needs.as_deref() == Some("model");
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
    let pictures = write_pictures(&client, &data_dir, &runs).await?;
    client.close().await?;

    let thinking = runs
        .iter()
        .find_map(|run| match &run.outcome {
            Outcome::Recorded { session, .. } if run.family == "thinking" => Some(session),
            _ => None,
        })
        .context("demo: no thinking session")?;
    let mut out = String::new();
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
    let data_dir_arg = match store {
        // The URL as given (a password in it is the user's own); `sh` reads it as one word.
        Some(url) => format!("--store {}", shell_quote(Path::new(url))),
        None => format!(
            "--data-dir {}",
            shell_quote(&std::path::absolute(&data_dir).unwrap_or(data_dir.clone()))
        ),
    };
    out.push_str("Pictures of these sessions (open them in a browser):\n");
    for path in &pictures {
        out.push_str(&format!("  {}\n", shell_quote(path)));
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
        eprintln!("demo: {} {}", step.tool, serde_json::to_string(&answer)?);
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
    let mut markdown = String::new();
    if family.family == "thinking" {
        markdown.push_str("```mermaid\n");
        markdown.push_str(&export_text(client, &session, Format::Mermaid).await?);
        markdown.push_str("```\n\n");
    }
    markdown.push_str(&export_text(client, &session, Format::Markdown).await?);
    Ok(Outcome::Recorded { session, markdown })
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
    result["content"][0]["text"]
        .as_str()
        .map(String::from)
        .with_context(|| format!("demo: empty {} export of {session}", format.as_str()))
}

/// Writes each recorded session's SVG and HTML into `<data dir>/demo/`, new files named
/// by family and session; returns their absolute paths.
async fn write_pictures(
    client: &crate::mcp_client::McpClient,
    data_dir: &Path,
    runs: &[FamilyRun],
) -> anyhow::Result<Vec<PathBuf>> {
    let folder = std::path::absolute(data_dir.join(PICTURES_DIR))
        .unwrap_or_else(|_| data_dir.join(PICTURES_DIR));
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("creating {} for the demo's pictures", folder.display()))?;
    let mut written = Vec::new();
    for run in runs {
        let Outcome::Recorded { session, .. } = &run.outcome else {
            continue;
        };
        for format in [Format::Svg, Format::Html] {
            let text = export_text(client, session, format).await?;
            let path = folder.join(format!("{}-{session}.{}", run.family, format.as_str()));
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .with_context(|| format!("creating {}", path.display()))?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            written.push(path);
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
