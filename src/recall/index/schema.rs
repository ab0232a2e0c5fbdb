//! What the index holds: its fields ([`Fields`], [`schema`]) and the analysers registered
//! on it (words: [`super::super::analyzer::analyzer`]; word pairs: [`PairTokenizer`]).
//!
//! `pairs` holds each two adjacent words of `body` (analysed the same way) as one term,
//! "cache latency", the way Elasticsearch's `index_phrases` does: a two-word phrase is
//! one term lookup, its frequency the phrase's count, no positions read; a longer one is
//! led by its rarest pair ([`super::phrase`]). With frequencies and lengths (no positions):
//! a pair's postings carry the per-block maxima the top-k collection skips blocks by. A
//! pair with a word that holds a digit is not indexed (numbers, hashes, versions: the
//! long tail of distinct words, each such pair in a document or two, most of the field's
//! terms); a phrase holding one is checked by positions, led by that word's short postings.
//!
//! Each text is analysed once, on Tantivy's indexing threads: the words analyser
//! ([`WordsTokenizer`], `body`'s) leaves the text's pairs on its thread for the pair
//! analyser ([`PairTokenizer`], `pairs`'), which Tantivy runs next on the same document
//! (a document's fields are indexed in field order, `body` first). Handing Tantivy
//! pre-tokenized text instead costs a JSON round trip of every token (serialized when
//! the document is built, parsed again when it is indexed).
//!
//! `kind` and `session` are fast fields too: a filter on them is read per candidate while
//! the top hits are collected ([`super::filter`]).

use super::super::analyzer::{ANALYZER_NAME, analyzer};
use std::cell::RefCell;
use tantivy::Index;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{TextAnalyzer, Token, TokenStream, Tokenizer};

/// The name the pair analyser is registered under in the index.
pub(crate) const PAIRS_ANALYZER_NAME: &str = "recall_pairs";

/// The index's fields.
#[derive(Clone, Copy, Debug)]
pub(super) struct Fields {
    pub body: Field,
    pub pairs: Field,
    pub kind: Field,
    pub session: Field,
    pub seq: Field,
    pub position: Field,
    pub at: Field,
}

/// Fast field names, as the collectors read them.
pub(super) const KIND: &str = "kind";
pub(super) const SESSION: &str = "session";
pub(super) const SEQ: &str = "seq";
pub(super) const POSITION: &str = "position";
pub(super) const AT: &str = "at";

pub(super) fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER_NAME)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let pairs = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(PAIRS_ANALYZER_NAME)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        body: builder.add_text_field("body", text),
        pairs: builder.add_text_field("pairs", pairs),
        kind: builder.add_text_field(KIND, STRING | FAST),
        session: builder.add_text_field(SESSION, STRING | FAST),
        seq: builder.add_u64_field(SEQ, FAST),
        // Read from its fast field only (a cursor's bound, the newest position).
        position: builder.add_u64_field(POSITION, FAST),
        at: builder.add_u64_field(AT, INDEXED | FAST),
    };
    (builder.build(), fields)
}

/// Registers the analysers the schema names on `index` (needed on every open).
pub(super) fn register_analyzers(index: &Index) {
    index
        .tokenizers()
        .register(ANALYZER_NAME, TextAnalyzer::from(WordsTokenizer::default()));
    index.tokenizers().register(
        PAIRS_ANALYZER_NAME,
        TextAnalyzer::from(PairTokenizer::default()),
    );
}

/// The term of two adjacent analysed words.
pub(super) fn pair_term(first: &str, second: &str) -> String {
    format!("{first} {second}")
}

thread_local! {
    /// The last text [`WordsTokenizer`] analysed on this thread and its pairs, for the
    /// [`PairTokenizer`] of the same document (taken, not copied).
    static LAST_PAIRS: RefCell<(String, Vec<Token>)> = const { RefCell::new((String::new(), Vec::new())) };
}

/// `body`'s analyser on the index ([`analyzer`]'s words), leaving each text's pairs on
/// its thread for [`PairTokenizer`].
#[derive(Clone)]
pub(crate) struct WordsTokenizer {
    words: TextAnalyzer,
}

impl Default for WordsTokenizer {
    fn default() -> Self {
        WordsTokenizer { words: analyzer() }
    }
}

impl Tokenizer for WordsTokenizer {
    type TokenStream<'a> = VecStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> VecStream {
        let (words, pairs) = words_and_pairs(&mut self.words, text);
        LAST_PAIRS.with(|last| {
            let mut last = last.borrow_mut();
            last.0.clear();
            last.0.push_str(text);
            last.1 = pairs;
        });
        VecStream {
            tokens: words,
            next: 0,
        }
    }
}

/// Each two adjacent words of a text (analysed as `body` is) as one token at the first
/// one's position; words not adjacent (a long token dropped between them) make no pair,
/// nor does a word holding a digit ([`pair_indexed`]). The pairs [`WordsTokenizer`] just
/// made of the same text on this thread when it did, else analysed here.
#[derive(Clone)]
pub(crate) struct PairTokenizer {
    words: TextAnalyzer,
}

impl Default for PairTokenizer {
    fn default() -> Self {
        PairTokenizer { words: analyzer() }
    }
}

/// The tokens of one text, made when the stream is.
pub(crate) struct VecStream {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for PairTokenizer {
    type TokenStream<'a> = VecStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> VecStream {
        let left = LAST_PAIRS.with(|last| {
            let mut last = last.borrow_mut();
            (last.0 == text).then(|| {
                last.0.clear();
                std::mem::take(&mut last.1)
            })
        });
        let pairs = match left {
            Some(pairs) => pairs,
            None => words_and_pairs(&mut self.words, text).1,
        };
        VecStream {
            tokens: pairs,
            next: 0,
        }
    }
}

/// Whether `pairs` holds the pair of these two analysed words: not when either holds a
/// digit (see the module doc).
pub(super) fn pair_indexed(first: &str, second: &str) -> bool {
    !first
        .bytes()
        .chain(second.bytes())
        .any(|b| b.is_ascii_digit())
}

/// The analysed words of `text` (as `body` indexes them) and their adjacent pairs (as
/// `pairs` does).
pub(super) fn words_and_pairs(words: &mut TextAnalyzer, text: &str) -> (Vec<Token>, Vec<Token>) {
    let mut stream = words.token_stream(text);
    let mut tokens: Vec<Token> = Vec::new();
    while stream.advance() {
        tokens.push(stream.token().clone());
    }
    let pairs = tokens
        .windows(2)
        .filter(|w| w[1].position == w[0].position + 1 && pair_indexed(&w[0].text, &w[1].text))
        .map(|w| Token {
            offset_from: w[0].offset_from,
            offset_to: w[1].offset_to,
            position: w[0].position,
            text: pair_term(&w[0].text, &w[1].text),
            position_length: 2,
        })
        .collect();
    (tokens, pairs)
}

impl TokenStream for VecStream {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_adjacent_analysed_words() {
        let mut pairs = PairTokenizer::default();
        let mut stream = pairs.token_stream("Caching the linkers, quickly 2 times");
        let mut out = Vec::new();
        while stream.advance() {
            out.push((stream.token().text.clone(), stream.token().position));
        }
        assert_eq!(
            out,
            vec![
                ("cach the".to_string(), 0),
                ("the linker".to_string(), 1),
                ("linker quick".to_string(), 2),
                // "quick 2", "2 time": a word with a digit makes no pair.
            ]
        );
    }

    #[test]
    fn the_pair_analyser_takes_the_words_analysers_pairs_of_the_same_text() {
        let text = "check the cache latency";
        let mut words = WordsTokenizer::default();
        let mut stream = words.token_stream(text);
        let mut n = 0;
        while stream.advance() {
            n += 1;
        }
        assert_eq!(n, 4);
        let collect = |pairs: &mut PairTokenizer, text: &str| {
            let mut stream = pairs.token_stream(text);
            let mut out = Vec::new();
            while stream.advance() {
                out.push(stream.token().text.clone());
            }
            out
        };
        let mut pairs = PairTokenizer::default();
        assert_eq!(
            collect(&mut pairs, text),
            vec!["check the", "the cach", "cach latenc"]
        );
        // Taken once: the same text again, and another text, are analysed here.
        assert_eq!(
            collect(&mut pairs, text),
            vec!["check the", "the cach", "cach latenc"]
        );
        assert_eq!(collect(&mut pairs, "linkers quickly"), vec!["linker quick"]);
    }
}
