//! `demo`: a scripted session through the real server, printed, with follow-ups that run as printed.

use super::*;

pub(super) fn demo(settings: &Settings) -> anyhow::Result<()> {
    runtime()?.block_on(run_demo(&settings.data_dir, settings.store.as_deref()))
}

async fn run_demo(data_dir: &Path, store: Option<&str>) -> anyhow::Result<()> {
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
    if let Some(url) = store {
        command.arg("--store").arg(url);
    }
    let where_stored = match store {
        Some(url) => crate::store::postgres::redact_url(url),
        None => data_dir.join(LEDGER_FILE_NAME).display().to_string(),
    };
    let client = crate::mcp_client::McpClient::spawn(command)?;
    client
        .initialize("reasoning-ledger-demo")
        .await
        .context("starting the server")?;
    eprintln!(
        "demo: a server is running on {where_stored}; sending {} thoughts",
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
    let data_dir_arg = match store {
        // The URL as given (a password in it is the user's own); `sh` reads it as one word.
        Some(url) => format!("--store {}", shell_quote(Path::new(url))),
        None => format!(
            "--data-dir {}",
            shell_quote(&std::path::absolute(&data_dir).unwrap_or(data_dir.clone()))
        ),
    };
    out.push_str(&format!(
        "\nSession {session_id} is stored in {where_stored}.\nTry:\n"
    ));
    for command in [
        format!("show {session_id}"),
        format!("export {session_id} --format json"),
        "sessions".to_string(),
    ] {
        out.push_str(&format!("  {program} {data_dir_arg} {command}\n"));
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
