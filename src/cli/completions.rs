//! `completions SHELL` and `man [--dir DIR]`: the shell completion script (clap_complete)
//! and the man pages (clap_mangen), generated from the same clap definitions as `--help`,
//! so they never drift from it.

use super::*;
use clap::CommandFactory;

/// The name completions and man pages are written for (the installed binary's).
const BINARY_NAME: &str = "reasoning-ledger";

pub(super) fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, BINARY_NAME, &mut out);
    stdout_write(&String::from_utf8(out).context("completion script")?)
}

/// The main page on stdout, or with `dir` one page per command written there
/// (`reasoning-ledger.1`, `reasoning-ledger-serve.1`, …), their names on stdout.
pub(super) fn man(dir: Option<&Path>) -> anyhow::Result<()> {
    let command = Cli::command().name(BINARY_NAME);
    let Some(dir) = dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(command).render(&mut out)?;
        return stdout_write(&String::from_utf8(out).context("man page")?);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    clap_mangen::generate_to(command, dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))?;
    let mut pages: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == "1")
                && path
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with(BINARY_NAME))
        })
        .map(|path| path.display().to_string())
        .collect();
    pages.sort();
    stdout_write(&(pages.join("\n") + "\n"))
}
