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
    /// Where the next word is looked for (a char boundary).
    at: usize,
    token: &'a mut Token,
}

impl Tokenizer for WordTokenizer {
    type TokenStream<'a> = WordStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordStream<'a> {
        self.token.reset();
        WordStream {
            text,
            at: 0,
            token: &mut self.token,
        }
    }
}

impl WordStream<'_> {
    /// The char at `self.at` (an ASCII byte read as one), and moves past it.
    fn next_char(&mut self) -> char {
        let b = self.text.as_bytes()[self.at];
        let c = if b.is_ascii() {
            char::from(b)
        } else {
            self.text[self.at..]
                .chars()
                .next()
                .expect("a char starts at a char boundary")
        };
        self.at += c.len_utf8();
        c
    }
}

impl TokenStream for WordStream<'_> {
    fn advance(&mut self) -> bool {
        self.token.text.clear();
        self.token.position = self.token.position.wrapping_add(1);
        let bytes = self.text.as_bytes();
        while self.at < bytes.len() {
            let from = self.at;
            let c = self.next_char();
            if !c.is_alphanumeric() {
                continue;
            }
            if !stands_alone(c) {
                // ASCII letters and digits byte by byte (`is_alphanumeric` of an ASCII
                // char is `is_ascii_alphanumeric`, and none stands alone).
                while let Some(&b) = bytes.get(self.at) {
                    if b.is_ascii() {
                        if !b.is_ascii_alphanumeric() {
                            break;
                        }
                        self.at += 1;
                        continue;
                    }
                    let at = self.at;
                    let next = self.next_char();
                    if !next.is_alphanumeric() || stands_alone(next) {
                        self.at = at;
                        break;
                    }
                }
            }
            self.token.offset_from = from;
            self.token.offset_to = self.at;
            self.token.text.push_str(&self.text[from..self.at]);
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
    use super::*;

    /// [`WordTokenizer`]'s words as it cut them char by char before its ASCII path:
    /// (offset from, offset to, position).
    fn reference_words(text: &str) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        let mut chars = text.char_indices().peekable();
        while let Some((from, c)) = chars.next() {
            if !c.is_alphanumeric() {
                continue;
            }
            let mut to = from + c.len_utf8();
            if !stands_alone(c) {
                while let Some(&(at, next)) = chars.peek() {
                    if !next.is_alphanumeric() || stands_alone(next) {
                        break;
                    }
                    to = at + next.len_utf8();
                    chars.next();
                }
            }
            out.push((from, to, out.len()));
        }
        out
    }

    #[test]
    fn words_are_cut_as_char_by_char() {
        let every_ascii: String = (0u8..128).map(char::from).collect();
        let texts = [
            every_ascii.as_str(),
            "Thought 41: weigh the evidence, note what is uncertain.",
            "Café-Zürich naïve résumé ﬁnal ① ² Ⅻ 3.14 x86_64",
            "rust日本語のテキストabc 한국어텍스트 mixed한국",
            "Привет,мир!Straße ΣΊΣΥΦΟΣ e\u{301}\u{301}x",
            "e\u{301}\u{301}x a\u{200d}b 🧠emoji🧠 ٣٤٥ १२३ tab\tnew\nline",
            "",
            " ",
            "a",
            "日",
            "é",
        ];
        for text in texts {
            let mut cut = WordTokenizer::default();
            let mut stream = cut.token_stream(text);
            let mut words = Vec::new();
            while stream.advance() {
                let token = stream.token();
                assert_eq!(token.text, text[token.offset_from..token.offset_to]);
                words.push((token.offset_from, token.offset_to, token.position));
            }
            assert_eq!(words, reference_words(text), "{text:?}");
        }
    }

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
