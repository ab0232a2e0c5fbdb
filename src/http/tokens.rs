//! Named tokens: the tokens file (`tokens.toml` in the data directory, or `--tokens FILE`)
//! mapping a person's or an agent's name to the SHA-256 of their bearer token.
//!
//! Owns: the file's format ([`TokensFile`]), its changes (`token add`, `token revoke`:
//! read, change, write a temporary file with mode 0600 and rename it over the old one,
//! under an exclusive lock so two changes never lose one another), and [`NamedTokens`],
//! the active names and digests a server checks requests against, re-read when the file
//! changes (every [`RELOAD_INTERVAL`]: a revoked token stops working within seconds,
//! without a restart). Must not: store, log or print a token (only `token add` prints the
//! one it made, once), or compare a digest other than in constant time.
//!
//! A token is 32 random bytes written as 64 hex digits; the file keeps only its SHA-256
//! (a 256-bit random secret needs no slow hash: nothing can be guessed from the digest).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The tokens file in the data directory, when `--tokens` does not name one.
pub(crate) const TOKENS_FILE_NAME: &str = "tokens.toml";

/// Environment variable naming the tokens file (as `--tokens`).
pub(crate) const TOKENS_ENV: &str = "REASONING_LEDGER_TOKENS";

/// The name of the shared token (`REASONING_LEDGER_TOKEN` or the generated `http-token`):
/// reserved, a named token cannot take it.
pub(crate) const DEFAULT_ACTOR: &str = "default";

/// Longest token name, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 64;

/// Random bytes in a named token (hex-encoded: twice as many characters).
pub(crate) const NAMED_TOKEN_BYTES: usize = 32;

/// How often a server looks at the tokens file for a change: the most a revocation (or a
/// new token) waits before it counts.
pub(crate) const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// What can go wrong with the tokens file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a tokens file: {message}")]
    Format { path: PathBuf, message: String },
    #[error(
        "token name {0:?}: use 1 to {MAX_NAME_CHARS} letters, digits, '.', '_', '-' or '@' (not {DEFAULT_ACTOR:?}, the shared token's name)"
    )]
    BadName(String),
    #[error("a token named {name:?} already exists in {path}: revoke it first to replace it")]
    Exists { name: String, path: PathBuf },
    #[error("no token named {name:?} in {path} (`token list` shows them)")]
    Unknown { name: String, path: PathBuf },
    #[error("no randomness for a token: {0}")]
    Random(String),
}

/// The file as stored: `[tokens.NAME]` tables, sorted by name.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokensFile {
    #[serde(default)]
    pub tokens: BTreeMap<String, TokenEntry>,
}

/// One name's entry: the digest of its token, when it was made and, once, revoked.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TokenEntry {
    /// SHA-256 of the token, 64 lowercase hex digits.
    pub sha256: String,
    /// ISO 8601, UTC.
    pub created: String,
    /// ISO 8601, UTC; a revoked token is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<String>,
}

/// The first lines of every tokens file written.
const HEADER: &str = "# reasoning-ledger named tokens: each name's SHA-256 token digest, never a token.\n\
# Change it with `reasoning-ledger token add|list|revoke`; a running server re-reads it.\n\n";

/// The tokens file `--tokens` (or [`TOKENS_ENV`]) names, else [`TOKENS_FILE_NAME`] in the
/// data directory; and whether it was named explicitly.
pub(crate) fn tokens_path(data_dir: &Path, flag: Option<PathBuf>) -> (PathBuf, bool) {
    if let Some(path) = flag {
        return (path, true);
    }
    if let Some(path) = std::env::var_os(TOKENS_ENV).filter(|v| !v.is_empty()) {
        return (PathBuf::from(path), true);
    }
    (data_dir.join(TOKENS_FILE_NAME), false)
}

/// Whether `name` may name a token: what an event's actor and a picture show.
pub(crate) fn valid_name(name: &str) -> bool {
    let chars = name.chars().count();
    (1..=MAX_NAME_CHARS).contains(&chars)
        && name != DEFAULT_ACTOR
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
}

/// SHA-256 of a token.
pub(crate) fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// Reads the tokens file; a missing one is empty.
pub(crate) fn read(path: &Path) -> Result<TokensFile, TokenError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(path, &text),
        Err(source) if source.kind() == std::io::ErrorKind::NotFound => Ok(TokensFile::default()),
        Err(source) => Err(TokenError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn parse(path: &Path, text: &str) -> Result<TokensFile, TokenError> {
    let format = |message: String| TokenError::Format {
        path: path.to_path_buf(),
        message,
    };
    let file: TokensFile = toml::from_str(text).map_err(|e| format(e.message().to_string()))?;
    for (name, entry) in &file.tokens {
        if !valid_name(name) {
            return Err(format(format!("the token name {name:?} is not allowed")));
        }
        if parse_digest(&entry.sha256).is_none() {
            return Err(format(format!(
                "tokens.{name}.sha256 is not 64 lowercase hex digits"
            )));
        }
    }
    Ok(file)
}

fn parse_digest(text: &str) -> Option<[u8; 32]> {
    let mut bytes = [0u8; 32];
    (text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .then(|| hex::decode_to_slice(text, &mut bytes).ok())
        .flatten()
        .map(|()| bytes)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TokenError + '_ {
    move |source| TokenError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Holds an exclusive lock on `<file>.lock` beside the tokens file while it is changed.
struct ChangeLock {
    _file: std::fs::File,
}

fn lock(path: &Path) -> Result<ChangeLock, TokenError> {
    use fs4::fs_std::FileExt;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    let lock_path = path.with_file_name(name);
    let file = crate::private::file_options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    file.lock_exclusive().map_err(io(&lock_path))?;
    Ok(ChangeLock { _file: file })
}

/// Writes `file` to `path` whole or not at all: a temporary file beside it (mode 0600),
/// synced, renamed over it.
fn write(path: &Path, file: &TokensFile) -> Result<(), TokenError> {
    let text = format!(
        "{HEADER}{}",
        toml::to_string(file).expect("a tokens file serializes")
    );
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    // tempfile creates it with mode 0600.
    let mut temp = tempfile::Builder::new()
        .prefix(".tokens-")
        .tempfile_in(dir)
        .map_err(io(dir))?;
    temp.write_all(text.as_bytes()).map_err(io(temp.path()))?;
    temp.as_file().sync_all().map_err(io(path))?;
    temp.persist(path).map_err(|e| io(path)(e.error))?;
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Makes a token for `name`, records its digest in the file at `path` (created with its
/// folder if missing) and returns the token: the only time it exists outside a client.
pub(crate) fn add(path: &Path, name: &str) -> Result<String, TokenError> {
    if !valid_name(name) {
        return Err(TokenError::BadName(name.to_string()));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::private::create_dir_all(dir).map_err(io(dir))?;
    }
    let _lock = lock(path)?;
    let mut file = read(path)?;
    if file.tokens.get(name).is_some_and(|e| e.revoked.is_none()) {
        return Err(TokenError::Exists {
            name: name.to_string(),
            path: path.to_path_buf(),
        });
    }
    let mut bytes = [0u8; NAMED_TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    let token = hex::encode(bytes);
    file.tokens.insert(
        name.to_string(),
        TokenEntry {
            sha256: hex::encode(digest(token.as_bytes())),
            created: crate::event::format_time(crate::event::now_ms()),
            revoked: None,
        },
    );
    write(path, &file)?;
    Ok(token)
}

/// Marks `name`'s token revoked (kept, so `token list` still shows it); revoking a
/// revoked token changes nothing.
pub(crate) fn revoke(path: &Path, name: &str) -> Result<(), TokenError> {
    let _lock = lock(path)?;
    let mut file = read(path)?;
    let entry = file
        .tokens
        .get_mut(name)
        .ok_or_else(|| TokenError::Unknown {
            name: name.to_string(),
            path: path.to_path_buf(),
        })?;
    if entry.revoked.is_none() {
        entry.revoked = Some(crate::event::format_time(crate::event::now_ms()));
        write(path, &file)?;
    }
    Ok(())
}

/// What identifies one version of the file: a rename gives a new inode, an edit in place a
/// new time or length.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    #[cfg(unix)]
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        #[cfg(unix)]
        inode: std::os::unix::fs::MetadataExt::ino(&meta),
    })
}

/// The active named tokens of a server: names and digests, as of the file's last version.
#[derive(Debug)]
pub(crate) struct NamedTokens {
    path: PathBuf,
    stamp: Option<Stamp>,
    active: Vec<(std::sync::Arc<str>, [u8; 32])>,
}

impl NamedTokens {
    /// The tokens of the file at `path` (none while it does not exist).
    pub(crate) fn load(path: PathBuf) -> Result<NamedTokens, TokenError> {
        let mut tokens = NamedTokens {
            path,
            stamp: None,
            active: Vec::new(),
        };
        let stamp = stamp(&tokens.path);
        tokens.replace(read(&tokens.path)?, stamp);
        Ok(tokens)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// How many tokens are active.
    pub(crate) fn active(&self) -> usize {
        self.active.len()
    }

    fn replace(&mut self, file: TokensFile, stamp: Option<Stamp>) {
        self.stamp = stamp;
        self.active = file
            .tokens
            .into_iter()
            .filter(|(_, entry)| entry.revoked.is_none())
            .filter_map(|(name, entry)| Some((name.into(), parse_digest(&entry.sha256)?)))
            .collect();
    }

    /// Re-reads the file if it changed since the last read. A file that cannot be read or
    /// parsed leaves no named token active (a broken file never keeps a revoked token
    /// alive) and is reported until it is fixed.
    pub(crate) fn refresh(&mut self) {
        let now = stamp(&self.path);
        if now == self.stamp {
            return;
        }
        match read(&self.path) {
            Ok(file) => {
                self.replace(file, now);
                tracing::info!(path = %self.path.display(), active = self.active.len(), "tokens file re-read");
            }
            Err(error) => {
                self.stamp = now;
                self.active.clear();
                tracing::error!(%error, "named tokens refused until the tokens file is fixed");
            }
        }
    }

    /// The name whose token has SHA-256 `given`: every active digest is compared, each in
    /// constant time, none skipped once one matched.
    pub(crate) fn name_of(&self, given: &[u8; 32]) -> Option<&std::sync::Arc<str>> {
        use subtle::ConstantTimeEq;
        let mut found = None;
        for (name, digest) in &self.active {
            if bool::from(digest.ct_eq(given)) {
                found = Some(name);
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_plain_and_not_the_shared_one() {
        for good in ["alice", "bob.smith@example.com", "agent-7_b", "A"] {
            assert!(valid_name(good), "{good}");
        }
        let long = "x".repeat(MAX_NAME_CHARS + 1);
        for bad in ["", "default", "two words", "a/b", "é", "<b>", long.as_str()] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_file_holds_digests_never_tokens_and_revocation_is_seen_on_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join(TOKENS_FILE_NAME);
        let alice = add(&path, "alice").unwrap();
        let bob = add(&path, "bob").unwrap();
        assert_eq!(alice.len(), NAMED_TOKEN_BYTES * 2);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&alice) && !text.contains(&bob), "{text}");
        assert!(text.contains(&hex::encode(digest(alice.as_bytes()))));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(matches!(
            add(&path, "alice"),
            Err(TokenError::Exists { .. })
        ));

        let mut tokens = NamedTokens::load(path.clone()).unwrap();
        let name = |tokens: &NamedTokens, token: &str| {
            tokens
                .name_of(&digest(token.as_bytes()))
                .map(|n| n.to_string())
        };
        assert_eq!(name(&tokens, &alice).as_deref(), Some("alice"));
        assert_eq!(name(&tokens, &bob).as_deref(), Some("bob"));
        assert_eq!(name(&tokens, "nope"), None);

        revoke(&path, "alice").unwrap();
        tokens.refresh();
        assert_eq!(name(&tokens, &alice), None);
        assert_eq!(name(&tokens, &bob).as_deref(), Some("bob"));
        let listed = read(&path).unwrap();
        assert!(listed.tokens["alice"].revoked.is_some());
        assert!(matches!(
            revoke(&path, "carol"),
            Err(TokenError::Unknown { .. })
        ));
        // A revoked name may be given a new token.
        let again = add(&path, "alice").unwrap();
        tokens.refresh();
        assert_eq!(name(&tokens, &again).as_deref(), Some("alice"));
        assert_eq!(name(&tokens, &alice), None);
    }

    #[test]
    fn a_broken_file_refuses_every_named_token_until_fixed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TOKENS_FILE_NAME);
        let alice = add(&path, "alice").unwrap();
        let mut tokens = NamedTokens::load(path.clone()).unwrap();
        assert_eq!(tokens.active(), 1);
        std::fs::write(&path, "tokens = 3\n[oops").unwrap();
        tokens.refresh();
        assert_eq!(tokens.name_of(&digest(alice.as_bytes())), None);
        assert!(NamedTokens::load(path).is_err());
    }
}
