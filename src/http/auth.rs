//! The bearer tokens of `serve --http`: where they come from and who a request's is.
//!
//! Owns: the shared token, named [`DEFAULT_ACTOR`] (`REASONING_LEDGER_TOKEN`, else the one
//! in [`TOKEN_FILE_NAME`] in the data directory, generated once with mode 0600 unless
//! named tokens are in use), the named tokens of [`super::tokens`] (re-read every
//! [`RELOAD_INTERVAL`] by a task that ends with the [`Authenticator`]), and the
//! constant-time lookup of a request's `Authorization: Bearer` credential: its SHA-256 is
//! compared with every known digest. Must not: let a request through without a known
//! token, or print a token.

use super::tokens::{DEFAULT_ACTOR, NamedTokens, RELOAD_INTERVAL, digest};
use crate::request::Actor;
use anyhow::Context;
use hyper::Request;
use hyper::body::Incoming;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// Environment variable holding the bearer token clients must send.
pub(crate) const TOKEN_ENV: &str = "REASONING_LEDGER_TOKEN";

/// File in the data directory holding the generated token (mode 0600), when
/// [`TOKEN_ENV`] is not set.
pub(crate) const TOKEN_FILE_NAME: &str = "http-token";

/// Random bytes in a generated token (hex-encoded: twice as many characters).
pub(crate) const TOKEN_BYTES: usize = 32;

/// Fewest characters of a token given in [`TOKEN_ENV`]: shorter ones are refused (a
/// generated token has 64).
pub(crate) const MIN_TOKEN_CHARS: usize = 32;

/// The token: [`TOKEN_ENV`] if set, else the one in the data directory's token file
/// (generated the first time). Returns it and, for the file, its path.
pub(super) fn load_token(data_dir: &Path) -> anyhow::Result<(String, Option<PathBuf>)> {
    if let Ok(token) = std::env::var(TOKEN_ENV)
        && !token.trim().is_empty()
    {
        let token = token.trim();
        let chars = token.chars().count();
        if chars < MIN_TOKEN_CHARS {
            anyhow::bail!(
                "{TOKEN_ENV} is {chars} characters long: a token must have at least {MIN_TOKEN_CHARS} \
                 (make one with `openssl rand -hex 32`, or unset it to have one generated in {})",
                data_dir.join(TOKEN_FILE_NAME).display()
            );
        }
        return Ok((token.to_string(), None));
    }
    let path = data_dir.join(TOKEN_FILE_NAME);
    match read_secret(&path) {
        Ok(text) if !text.trim().is_empty() => return Ok((text.trim().to_string(), Some(path))),
        Ok(_) => anyhow::bail!(
            "{} is empty: remove it to have a new token generated, or set {TOKEN_ENV}",
            path.display()
        ),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!("reading {}", path.display())));
        }
    }
    crate::private::create_dir_all(data_dir)
        .with_context(|| format!("creating the data directory {}", data_dir.display()))?;
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(format!("{token}\n").as_bytes())?;
            file.sync_all()?;
            Ok((token, Some(path)))
        }
        // Another server created it meanwhile: use that one.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => load_token(data_dir),
        Err(error) => {
            Err(anyhow::Error::new(error).context(format!("creating {}", path.display())))
        }
    }
}

/// A token file's text, refused (an error naming `chmod 600`) when group or others may
/// read or write it.
pub(super) fn read_secret(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    crate::private::check_secret_file(path, &file).map_err(std::io::Error::other)?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}

/// The shared token, if there is one: [`TOKEN_ENV`]; else the token file, read or (when
/// no named token exists) generated; and, for the file, its path.
fn load_default(data_dir: &Path, named: bool) -> anyhow::Result<(Option<String>, Option<PathBuf>)> {
    let from_env = std::env::var(TOKEN_ENV).is_ok_and(|t| !t.trim().is_empty());
    if from_env || !named || data_dir.join(TOKEN_FILE_NAME).exists() {
        let (token, path) = load_token(data_dir)?;
        return Ok((Some(token), path));
    }
    Ok((None, None))
}

/// Who may call: the shared token's digest and the named tokens.
pub(super) struct Authenticator {
    shared: Option<[u8; 32]>,
    named: Arc<RwLock<NamedTokens>>,
    /// The task re-reading the tokens file, stopped with the authenticator.
    reload: tokio::task::JoinHandle<()>,
}

impl Drop for Authenticator {
    fn drop(&mut self) {
        self.reload.abort();
    }
}

impl Authenticator {
    /// The shared token and the tokens file at `tokens_path` (which must exist when it was
    /// named explicitly); tells stderr where each comes from. Starts the reload task: call
    /// inside the runtime.
    pub(super) fn load(
        data_dir: &Path,
        (tokens_path, named_explicitly): (PathBuf, bool),
    ) -> anyhow::Result<Authenticator> {
        if named_explicitly && !tokens_path.exists() {
            anyhow::bail!(
                "no tokens file at {}: make one with `reasoning-ledger token add NAME --tokens {}`",
                tokens_path.display(),
                tokens_path.display()
            );
        }
        let named = NamedTokens::load(tokens_path)?;
        let has_named = named.path().exists();
        if has_named {
            let path = named.path();
            let file =
                std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
            crate::private::check_secret_file(path, &file)?;
        }
        let (shared, shared_file) = load_default(data_dir, has_named)?;
        match (&shared, &shared_file) {
            (Some(_), Some(path)) => eprintln!(
                "reasoning-ledger: bearer token ({DEFAULT_ACTOR:?}) in {} (or set {TOKEN_ENV})",
                path.display()
            ),
            (Some(_), None) => {
                eprintln!("reasoning-ledger: bearer token ({DEFAULT_ACTOR:?}) from {TOKEN_ENV}")
            }
            (None, _) => {}
        }
        if has_named || shared.is_none() {
            eprintln!(
                "reasoning-ledger: named tokens in {} ({} active; re-read when it changes)",
                named.path().display(),
                named.active()
            );
        }
        let named = Arc::new(RwLock::new(named));
        let watched = Arc::downgrade(&named);
        let reload = tokio::spawn(async move {
            let mut tick = tokio::time::interval(RELOAD_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(named) = watched.upgrade() else {
                    return;
                };
                // A stat (and on a change a small read): quick enough for a worker thread.
                named
                    .write()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .refresh();
            }
        });
        Ok(Authenticator {
            shared: shared.map(|token| digest(token.as_bytes())),
            named,
            reload,
        })
    }

    /// The actor behind the request's `Authorization: Bearer` token, if it is a known one
    /// (the shared token is [`DEFAULT_ACTOR`]).
    pub(super) fn actor(&self, request: &Request<Incoming>) -> Option<Actor> {
        request
            .headers()
            .get_all(hyper::header::AUTHORIZATION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .filter_map(|value| {
                let (scheme, credential) = value.trim().split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then(|| credential.trim())
            })
            .find_map(|credential| self.actor_of(credential.as_bytes()))
    }

    /// The actor whose token is `credential`: its SHA-256 against every known digest, in
    /// constant time each.
    fn actor_of(&self, credential: &[u8]) -> Option<Actor> {
        use subtle::ConstantTimeEq;
        let given = digest(credential);
        let named = self
            .named
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .name_of(&given)
            .map(|name| Actor(name.clone()));
        let shared = self
            .shared
            .is_some_and(|shared| bool::from(shared.ct_eq(&given)));
        named.or_else(|| shared.then(|| Actor::new(DEFAULT_ACTOR)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_shared_token_is_default_and_named_tokens_their_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(super::super::tokens::TOKENS_FILE_NAME);
        // No tokens file: the generated shared token only.
        let auth = Authenticator::load(dir.path(), (path.clone(), false)).unwrap();
        let (shared, _) = load_token(dir.path()).unwrap();
        assert_eq!(
            auth.actor_of(shared.as_bytes()),
            Some(Actor::new(DEFAULT_ACTOR))
        );
        assert_eq!(auth.actor_of(b"abc"), None);
        assert_eq!(auth.actor_of(&shared.as_bytes()[1..]), None);
        assert_eq!(auth.actor_of(b""), None);

        let alice = super::super::tokens::add(&path, "alice").unwrap();
        let auth = Authenticator::load(dir.path(), (path.clone(), true)).unwrap();
        assert_eq!(auth.actor_of(alice.as_bytes()), Some(Actor::new("alice")));
        assert_eq!(
            auth.actor_of(shared.as_bytes()),
            Some(Actor::new(DEFAULT_ACTOR)),
            "the generated token keeps working beside the file"
        );
    }

    #[tokio::test]
    async fn named_tokens_alone_generate_no_shared_token() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(super::super::tokens::TOKENS_FILE_NAME);
        let bob = super::super::tokens::add(&path, "bob").unwrap();
        let auth = Authenticator::load(dir.path(), (path.clone(), false)).unwrap();
        assert!(!dir.path().join(TOKEN_FILE_NAME).exists());
        assert_eq!(auth.actor_of(bob.as_bytes()), Some(Actor::new("bob")));
        let missing = dir.path().join("missing.toml");
        assert!(Authenticator::load(dir.path(), (missing, true)).is_err());
    }

    #[test]
    fn a_generated_token_is_kept_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let (first, path) = load_token(dir.path()).unwrap();
        let path = path.expect("a file");
        assert_eq!(first.len(), TOKEN_BYTES * 2);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (again, _) = load_token(dir.path()).unwrap();
        assert_eq!(first, again);
    }
}
