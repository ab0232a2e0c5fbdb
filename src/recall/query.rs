//! The query language of `search_history` and `search`, parsed once for both backends.
//!
//! Owns: [`parse`] (text → [`ParsedQuery`]: the words, `"quoted phrases"` and `word*`
//! prefixes to find, the `-excluded` ones) and its errors, each saying how to write a
//! query; [`parse_time`], the time bounds of a search's filters. Must not: analyse
//! words (stemming, folding: each backend does that with its own analyser) or know a
//! backend.
//!
//! The language: words are ranked (BM25; every-word matches first, any-word matches
//! after), `"a quoted phrase"` matches those words in that order, `word*` matches the
//! words that start with `word`, a leading `-` excludes a word, a prefix or a phrase.
//! Nothing else is special: `AND`, `field:value`, a `*` inside a word are words.
//! Control characters count as spaces.

use std::fmt;

/// Longest query accepted, in bytes.
pub(crate) const MAX_QUERY_BYTES: usize = 4096;

/// Most words and phrases (wanted and excluded together) one query may hold.
pub(crate) const MAX_QUERY_TERMS: usize = 16;

/// How to write a query, said with every error.
pub(crate) const QUERY_HELP: &str = "write words (ranked, every-word matches first), \"a quoted phrase\", word* for words that start with it, and -word to exclude one";

/// One thing to find or exclude, as the user wrote it (analysed later, per backend).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    /// A word (may still analyse to several tokens: `e-mail`, CJK text).
    Word(String),
    /// The text between quotes: its words in this order.
    Phrase(String),
    /// `word*` (the text before the `*`): the words that start with it.
    Prefix(String),
}

impl Unit {
    pub(crate) fn text(&self) -> &str {
        match self {
            Unit::Word(text) | Unit::Phrase(text) | Unit::Prefix(text) => text,
        }
    }
}

/// A parsed query: at least one wanted unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParsedQuery {
    pub wanted: Vec<Unit>,
    pub excluded: Vec<Unit>,
}

/// Why a query cannot be run; the message says how to write one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct QueryError(pub String);

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {QUERY_HELP}", self.0)
    }
}

impl std::error::Error for QueryError {}

/// Parses `text` (see the module doc).
pub(crate) fn parse(text: &str) -> Result<ParsedQuery, QueryError> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(QueryError(format!(
            "the query is {} bytes, more than the {MAX_QUERY_BYTES} a query may hold",
            text.len()
        )));
    }
    let cleaned: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut wanted = Vec::new();
    let mut excluded = Vec::new();
    let mut chars = cleaned.char_indices().peekable();
    while let Some(&(_, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        // A leading '-' excludes what follows it (a lone '-' is nothing).
        let negated = c == '-';
        if negated {
            chars.next();
            match chars.peek() {
                Some(&(_, next)) if !next.is_whitespace() => {}
                _ => continue,
            }
        }
        let unit = if chars.peek().is_some_and(|&(_, c)| c == '"') {
            let (open, _) = chars.next().expect("peeked");
            let mut phrase = String::new();
            let mut closed = false;
            for (_, c) in chars.by_ref() {
                if c == '"' {
                    closed = true;
                    break;
                }
                phrase.push(c);
            }
            if !closed {
                return Err(QueryError(format!(
                    "the quote at byte {open} is never closed"
                )));
            }
            Unit::Phrase(phrase.trim().to_string())
        } else {
            let mut word = String::new();
            while let Some(&(_, c)) = chars.peek() {
                if c.is_whitespace() || c == '"' {
                    break;
                }
                word.push(c);
                chars.next();
            }
            match word.strip_suffix('*') {
                Some(stem)
                    if stem
                        .trim_end_matches('*')
                        .chars()
                        .any(char::is_alphanumeric) =>
                {
                    Unit::Prefix(stem.trim_end_matches('*').to_string())
                }
                _ => Unit::Word(word),
            }
        };
        if unit.text().is_empty() {
            continue;
        }
        if negated {
            excluded.push(unit);
        } else {
            wanted.push(unit);
        }
        if wanted.len() + excluded.len() > MAX_QUERY_TERMS {
            return Err(QueryError(format!(
                "the query has more than {MAX_QUERY_TERMS} words and phrases"
            )));
        }
    }
    if wanted.is_empty() {
        return Err(QueryError(if excluded.is_empty() {
            "the query is empty".to_string()
        } else {
            "the query only excludes (-word): it needs a word to find".to_string()
        }));
    }
    Ok(ParsedQuery { wanted, excluded })
}

/// A time bound as the tools and the CLI take it: RFC 3339 (`2026-01-31T12:00:00Z`; a
/// date alone is its midnight, UTC), or milliseconds since the epoch as digits.
pub(crate) fn parse_time(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map_err(|_| format!("{text:?} is too large for milliseconds since the epoch"));
    }
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_string()
    };
    let time = humantime::parse_rfc3339_weak(&full).map_err(|_| {
        format!("{text:?} is not a time: use RFC 3339 (2026-01-31T12:00:00Z) or milliseconds since the epoch")
    })?;
    Ok(time
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<Unit> {
        list.iter().map(|w| Unit::Word(w.to_string())).collect()
    }

    #[test]
    fn words_phrases_and_exclusions() {
        let parsed = parse(r#"cache "linker fails" -rust -"old build" x-y"#).unwrap();
        assert_eq!(
            parsed.wanted,
            vec![
                Unit::Word("cache".into()),
                Unit::Phrase("linker fails".into()),
                Unit::Word("x-y".into()),
            ]
        );
        assert_eq!(
            parsed.excluded,
            vec![Unit::Word("rust".into()), Unit::Phrase("old build".into())]
        );
    }

    #[test]
    fn a_trailing_star_makes_a_prefix() {
        let parsed = parse("uncert* -old** * a*b").unwrap();
        assert_eq!(
            parsed.wanted,
            vec![
                Unit::Prefix("uncert".into()),
                Unit::Word("*".into()),
                Unit::Word("a*b".into())
            ]
        );
        assert_eq!(parsed.excluded, vec![Unit::Prefix("old".into())]);
    }

    #[test]
    fn control_characters_are_spaces_and_lone_dashes_nothing() {
        let parsed = parse("a\u{0}b\tc - d").unwrap();
        assert_eq!(parsed.wanted, words(&["a", "b", "c", "d"]));
    }

    #[test]
    fn hostile_queries_get_errors_that_say_how_to_write_one() {
        for bad in ["\"unclosed", "-only -minus", "   ", "\u{1}\u{2}", "\"\""] {
            let error = parse(bad).unwrap_err().to_string();
            assert!(error.contains("\"a quoted phrase\""), "{bad:?}: {error}");
        }
        let long = "word ".repeat(30_000);
        assert!(parse(&long).unwrap_err().0.contains("4096"));
        let many = "w ".repeat(MAX_QUERY_TERMS + 1);
        assert!(parse(&many).unwrap_err().0.contains("16"));
    }
}
