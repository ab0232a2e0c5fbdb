//! How text becomes index terms: the one analyser the index and its queries share.
//!
//! Owns: [`WordTokenizer`] (words are runs of letters and digits in any script; a CJK
//! ideograph, kana or hangul syllable is a word of its own, so text written without
//! spaces is still found by its characters, as a phrase) and [`analyzer`] (tokens
//! lowercased, folded to ASCII where they have a folding (`café` → `cafe`), stemmed as
//! English (`caching` → `cach`, `linkers` → `linker`); words of other languages pass the
//! English stemmer mostly unchanged and are found by their own forms). Must not: change
//! without bumping [`super::index::RECALL_SCHEMA`] (the index holds its terms).

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RawTokenizer, RemoveLongFilter, Stemmer,
    TextAnalyzer, Token, TokenStream, Tokenizer,
};

/// The name the analyser is registered under in the index.
pub(crate) const ANALYZER_NAME: &str = "recall_en";

/// Tokens longer than this many bytes are dropped (base64, hashes, minified code).
pub(crate) const MAX_TOKEN_BYTES: usize = 40;

/// The analyser of every indexed text and every query word.
pub(crate) fn analyzer() -> TextAnalyzer {
    normalising(WordTokenizer::default())
}

/// [`analyzer`]'s filters on one word as [`WordTokenizer`] cuts it: its term (no token
/// when the word is too long). What [`analyzer`] makes of a word does not depend on the
/// words around it, so the index's analyser keeps the terms of words it has seen
/// (`index/tokens.rs`).
pub(crate) fn word_analyzer() -> TextAnalyzer {
    normalising(RawTokenizer::default())
}

/// `words` followed by every filter of [`analyzer`].
fn normalising<T: Tokenizer>(words: T) -> TextAnalyzer {
    TextAnalyzer::builder(words)
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The terms `text` analyses to, in order.
pub(crate) fn terms(text: &str) -> Vec<String> {
    let mut analyzer = analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

/// `text` as words lowercased and folded to ASCII, unstemmed, one space apart: what a
/// backend with its own stemmer (PostgreSQL's `english` configuration) is given, so
/// case, diacritics and CJK characters fold the same on both backends.
pub(crate) fn folded(text: &str) -> String {
    let mut analyzer = TextAnalyzer::builder(WordTokenizer::default())
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build();
    let mut stream = analyzer.token_stream(text);
    let mut out = String::new();
    while stream.advance() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&stream.token().text);
    }
    out
}

/// Whether `c` is written without spaces between words (each one is a token).
fn stands_alone(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF       // hiragana, katakana
        | 0x3400..=0x4DBF     // CJK extension A
        | 0x4E00..=0x9FFF     // CJK unified ideographs
        | 0xAC00..=0xD7AF     // hangul syllables
        | 0xF900..=0xFAFF     // CJK compatibility ideographs
        | 0x20000..=0x2FA1F   // CJK extensions B–F, compatibility supplement
    )
}

/// Splits on everything that is not a letter or digit; see the module doc.
#[derive(Clone, Default)]
pub(crate) struct WordTokenizer {
    token: Token,
}

/// The tokens of one text.
pub(crate) struct WordStream<'a> {
    text: &'a str,
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    token: &'a mut Token,
}

impl Tokenizer for WordTokenizer {
    type TokenStream<'a> = WordStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream<'a> {
        self.token.reset();
        WordStream {
            text,
            chars: text.char_indices().peekable(),
            token: &mut self.token,
        }
    }
}

impl TokenStream for WordStream<'_> {
    fn advance(&mut self) -> bool {
        self.token.text.clear();
        self.token.position = self.token.position.wrapping_add(1);
        while let Some((from, c)) = self.chars.next() {
            if !c.is_alphanumeric() {
                continue;
            }
            let mut to = from + c.len_utf8();
            if !stands_alone(c) {
                while let Some(&(at, next)) = self.chars.peek() {
                    if !next.is_alphanumeric() || stands_alone(next) {
                        break;
                    }
                    to = at + next.len_utf8();
                    self.chars.next();
                }
            }
            self.token.offset_from = from;
            self.token.offset_to = to;
            self.token.text.push_str(&self.text[from..to]);
            return true;
        }
        false
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

#[cfg(test)]
mod tests {
    use super::terms;

    #[test]
    fn inflections_case_and_diacritics_fold() {
        assert_eq!(terms("Caching"), terms("cache"));
        assert_eq!(terms("linkers"), terms("linker"));
        assert_eq!(terms("Café NAÏVE"), terms("cafe naive"));
    }

    #[test]
    fn other_scripts_keep_their_words_and_cjk_splits_by_character() {
        assert_eq!(terms("Привет, мир"), vec!["привет", "мир"]);
        assert_eq!(terms("日本語のテキスト").len(), 8);
        assert_eq!(terms("rust日本"), vec!["rust", "日", "本"]);
        assert_eq!(super::folded("Café-Zürich 日本"), "cafe zurich 日 本");
    }
}
