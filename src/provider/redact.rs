//! Redaction of key-like text from anything a provider sends back (error bodies,
//! messages) before it reaches an event, an answer or a log.
//!
//! Owns: [`redact`]. A token is replaced by `[redacted]` when it is one of the known
//! keys, follows `Bearer`, starts like a key (`sk-`, `csk-`, `key-`, `gsk_`, …) or is a
//! long run of letters and digits (≥ [`LONG_TOKEN_CHARS`]) mixing both. Must not: keep
//! the original text anywhere.

/// A run of key characters at least this long, with letters and digits, reads as a key.
pub(crate) const LONG_TOKEN_CHARS: usize = 32;

/// What replaces a key-like token.
pub(crate) const REDACTED: &str = "[redacted]";

/// Prefixes providers give their keys.
const KEY_PREFIXES: [&str; 7] = ["sk-", "csk-", "key-", "gsk_", "xai-", "sk_", "pk-"];

fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '/' | '=')
}

fn key_like(token: &str) -> bool {
    let lower = token.to_ascii_lowercase();
    if KEY_PREFIXES
        .iter()
        .any(|p| lower.starts_with(p) && token.len() >= p.len() + 6)
    {
        return true;
    }
    token.len() >= LONG_TOKEN_CHARS
        && token.chars().any(|c| c.is_ascii_digit())
        && token.chars().any(|c| c.is_ascii_alphabetic())
}

/// `text` with every known key and every key-like token replaced by [`REDACTED`].
pub(crate) fn redact(text: &str, known: &[&str]) -> String {
    let mut text = text.to_string();
    for key in known.iter().filter(|k| k.len() >= 4) {
        text = text.replace(key, REDACTED);
    }
    let mut out = String::with_capacity(text.len());
    let mut after_bearer = false;
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let start = rest.find(key_char).unwrap_or(rest.len());
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        if rest.is_empty() {
            break;
        }
        let end = rest.find(|c: char| !key_char(c)).unwrap_or(rest.len());
        let token = &rest[..end];
        if after_bearer || key_like(token) {
            out.push_str(REDACTED);
        } else {
            out.push_str(token);
        }
        after_bearer = token.eq_ignore_ascii_case("bearer");
        rest = &rest[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_key_like_tokens_are_replaced() {
        let text = "Incorrect API key provided: sk-abc123def456. Authorization: Bearer tok_1 and my-secret-canary here; id a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7";
        let out = redact(text, &["my-secret-canary"]);
        assert!(!out.contains("sk-abc123def456"), "{out}");
        assert!(!out.contains("tok_1"), "{out}");
        assert!(!out.contains("my-secret-canary"), "{out}");
        assert!(!out.contains("a1b2c3d4e5f6"), "{out}");
        assert!(
            out.starts_with("Incorrect API key provided: [redacted]."),
            "{out}"
        );
        // Ordinary words and numbers stay.
        assert_eq!(
            redact("rate limit: retry in 20 seconds", &[]),
            "rate limit: retry in 20 seconds"
        );
    }
}
