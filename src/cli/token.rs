//! `token add NAME`, `token list`, `token revoke NAME`: the named tokens of `serve --http`
//! (the tokens file: `--tokens FILE`, else `tokens.toml` in the data directory).
//!
//! Owns: the subcommands' arguments and output. `add` prints the new token once, alone on
//! stdout (how to use it goes to stderr, so `$(reasoning-ledger token add NAME)` is the
//! token); the file and its rules are [`crate::http::tokens`]'s. Must not: print a token
//! anywhere else, or open the ledger.

use super::*;
use crate::http::tokens;

/// `--tokens FILE`, shared by the subcommands.
#[derive(clap::Args, Debug)]
pub(crate) struct TokensFileArg {
    /// The tokens file [env: REASONING_LEDGER_TOKENS; default: tokens.toml in the data directory]
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum TokenCommand {
    /// Make a token for NAME (a person or an agent): printed once on stdout, only its SHA-256 is kept
    Add {
        /// Recorded as the actor of every event written with the token (letters, digits, . _ - @)
        name: String,
        #[command(flatten)]
        file: TokensFileArg,
    },
    /// List the named tokens: name, created, revoked (never a token)
    List {
        /// Print JSON ({"tokens": [{"name", "created", "revoked"?}]})
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        file: TokensFileArg,
    },
    /// Revoke NAME's token: a running server refuses it within seconds
    Revoke {
        name: String,
        #[command(flatten)]
        file: TokensFileArg,
    },
}

pub(super) fn token(settings: &Settings, command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Add { name, file } => {
            let (path, _) = tokens::tokens_path(&settings.data_dir, file.tokens);
            let token = tokens::add(&path, &name)?;
            stdout_write(&format!("{token}\n"))?;
            eprintln!(
                "reasoning-ledger: the token of {name:?} (shown only now; {} keeps its SHA-256). \
                 Clients send it as `Authorization: Bearer <token>` to `serve --http`; \
                 events they write are recorded as written by {name:?}.",
                path.display()
            );
            Ok(())
        }
        TokenCommand::List { json, file } => {
            let (path, _) = tokens::tokens_path(&settings.data_dir, file.tokens);
            let listed = tokens::read(&path)?;
            if json {
                let rows: Vec<serde_json::Value> = listed
                    .tokens
                    .iter()
                    .map(|(name, entry)| {
                        let mut row = serde_json::json!({"name": name, "created": entry.created});
                        if let Some(revoked) = &entry.revoked {
                            row["revoked"] = revoked.as_str().into();
                        }
                        row
                    })
                    .collect();
                let answer = serde_json::json!({ "tokens": rows });
                return stdout_write(&format!("{}\n", serde_json::to_string_pretty(&answer)?));
            }
            if listed.tokens.is_empty() {
                return stdout_write(&format!(
                    "no named tokens in {} (`token add NAME` makes one)\n",
                    path.display()
                ));
            }
            let mut text = format!("{:<24}  {:<24}  {}\n", "NAME", "CREATED", "REVOKED");
            for (name, entry) in &listed.tokens {
                text.push_str(&format!(
                    "{:<24}  {:<24}  {}\n",
                    name,
                    entry.created,
                    entry.revoked.as_deref().unwrap_or("-")
                ));
            }
            stdout_write(&text)
        }
        TokenCommand::Revoke { name, file } => {
            let (path, _) = tokens::tokens_path(&settings.data_dir, file.tokens);
            tokens::revoke(&path, &name)?;
            stdout_write(&format!(
                "revoked {name:?} in {} (running servers refuse it within {} s)\n",
                path.display(),
                tokens::RELOAD_INTERVAL.as_secs().max(1)
            ))
        }
    }
}
