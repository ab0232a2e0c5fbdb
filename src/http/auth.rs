//! The bearer token of `serve --http`: where it comes from and how a request's is checked.
//!
//! Owns: the token (`REASONING_LEDGER_TOKEN`, else one generated once into
//! [`TOKEN_FILE_NAME`] in the data directory, mode 0600) and the constant-time comparison
//! of a request's `Authorization: Bearer` credential against it. Must not: let a request
//! through without the token, or print the token.

use anyhow::Context;
use hyper::Request;
use hyper::body::Incoming;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Environment variable holding the bearer token clients must send.
pub(crate) const TOKEN_ENV: &str = "REASONING_LEDGER_TOKEN";

/// File in the data directory holding the generated token (mode 0600), when
/// [`TOKEN_ENV`] is not set.
pub(crate) const TOKEN_FILE_NAME: &str = "http-token";

/// Random bytes in a generated token (hex-encoded: twice as many characters).
pub(crate) const TOKEN_BYTES: usize = 32;

/// The token: [`TOKEN_ENV`] if set, else the one in the data directory's token file
/// (generated the first time). Returns it and, for the file, its path.
pub(super) fn load_token(data_dir: &Path) -> anyhow::Result<(String, Option<PathBuf>)> {
    if let Ok(token) = std::env::var(TOKEN_ENV)
        && !token.trim().is_empty()
    {
        return Ok((token.trim().to_string(), None));
    }
    let path = data_dir.join(TOKEN_FILE_NAME);
    match std::fs::read_to_string(&path) {
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
    std::fs::create_dir_all(data_dir)
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

/// Whether `given` is the expected token, in time independent of both: the SHA-256
/// digests of the two are compared in constant time, so neither where the first
/// difference is nor the token's length shows.
fn same_token(given: &[u8], expected: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    Sha256::digest(given)[..]
        .ct_eq(&Sha256::digest(expected)[..])
        .into()
}

/// Whether the request carries `Authorization: Bearer <token>`.
pub(super) fn authorized(request: &Request<Incoming>, token: &str) -> bool {
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
        .any(|credential| same_token(credential.as_bytes(), token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abc", b"abc"));
        assert!(!same_token(b"abd", b"abc"));
        assert!(!same_token(b"ab", b"abc"));
        assert!(!same_token(b"", b"abc"));
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
