//! What the index holds: its fields ([`Fields`], [`schema`]) and the analysers registered
//! on it (words: [`super::super::analyzer::analyzer`]; word pairs: [`PairTokenizer`]).
//!
//! `pairs` holds each two adjacent words of `body` (analysed the same way) as one term,
//! "cache latency", the way Elasticsearch's `index_phrases` does: a phrase query first
//! narrows to the documents that hold every pair of the phrase (one term lookup per pair,
//! their postings short), and only those are checked for positions in `body`. Documents
//! only (no frequencies, no positions): the pairs select, `body` ranks.
//!
//! `kind` and `session` are fast fields too: a filter on them is read per candidate while
//! the top hits are collected ([`super::filter`]).

use super::super::analyzer::{ANALYZER_NAME, analyzer};
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
            .set_index_option(IndexRecordOption::Basic)
            .set_fieldnorms(false),
    );
    let fields = Fields {
        body: builder.add_text_field("body", text),
        pairs: builder.add_text_field("pairs", pairs),
        kind: builder.add_text_field(KIND, STRING | FAST),
        session: builder.add_text_field(SESSION, STRING | FAST),
        seq: builder.add_u64_field(SEQ, FAST),
        position: builder.add_u64_field(POSITION, INDEXED | FAST),
        at: builder.add_u64_field(AT, INDEXED | FAST),
    };
    (builder.build(), fields)
}

/// Registers the analysers the schema names on `index` (needed on every open).
pub(super) fn register_analyzers(index: &Index) {
    index.tokenizers().register(ANALYZER_NAME, analyzer());
    index.tokenizers().register(
        PAIRS_ANALYZER_NAME,
        TextAnalyzer::from(PairTokenizer::default()),
    );
}

/// The term of two adjacent analysed words.
pub(super) fn pair_term(first: &str, second: &str) -> String {
    format!("{first} {second}")
}

/// Each two adjacent words of a text (analysed as `body` is) as one token at the first
/// one's position; words not adjacent (a long token dropped between them) make no pair.
#[derive(Clone)]
pub(crate) struct PairTokenizer {
    words: TextAnalyzer,
}

impl Default for PairTokenizer {
    fn default() -> Self {
        PairTokenizer { words: analyzer() }
    }
}

/// The pairs of one text, made when the stream is.
pub(crate) struct PairStream {
    pairs: Vec<Token>,
    next: usize,
}

impl Tokenizer for PairTokenizer {
    type TokenStream<'a> = PairStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> PairStream {
        let (_, pairs) = words_and_pairs(&mut self.words, text);
        PairStream { pairs, next: 0 }
    }
}

/// The analysed words of `text` (as `body` indexes them) and their adjacent pairs (as
/// `pairs` does): the indexer analyses each text once for both fields.
pub(super) fn words_and_pairs(words: &mut TextAnalyzer, text: &str) -> (Vec<Token>, Vec<Token>) {
    let mut stream = words.token_stream(text);
    let mut tokens: Vec<Token> = Vec::new();
    while stream.advance() {
        tokens.push(stream.token().clone());
    }
    let pairs = tokens
        .windows(2)
        .filter(|w| w[1].position == w[0].position + 1)
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

impl TokenStream for PairStream {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.pairs.len()
    }

    fn token(&self) -> &Token {
        &self.pairs[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.pairs[self.next - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_adjacent_analysed_words() {
        let mut pairs = PairTokenizer::default();
        let mut stream = pairs.token_stream("Caching the linkers, quickly");
        let mut out = Vec::new();
        while stream.advance() {
            out.push((stream.token().text.clone(), stream.token().position));
        }
        assert_eq!(
            out,
            vec![
                ("cach the".to_string(), 0),
                ("the linker".to_string(), 1),
                ("linker quick".to_string(), 2)
            ]
        );
    }
}
