//! What the index holds: its fields ([`Fields`], [`schema`]) and the analysers registered
//! on it (words: [`WordsTokenizer`], [`super::super::analyzer::analyzer`]'s terms; word
//! pairs: [`PairTokenizer`]).
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
//! Each text is analysed once, on Tantivy's indexing threads, for both fields
//! ([`super::tokens`]).
//!
//! `kind` and `session` are fast fields too: a filter on them is read per candidate while
//! the top hits are collected ([`super::filter`]).

use super::super::analyzer::ANALYZER_NAME;
use super::tokens::{PairTokenizer, WordsTokenizer};
use tantivy::Index;
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::TextAnalyzer;

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

/// Whether `pairs` holds the pair of these two analysed words: not when either holds a
/// digit (see the module doc).
pub(super) fn pair_indexed(first: &str, second: &str) -> bool {
    !first
        .bytes()
        .chain(second.bytes())
        .any(|b| b.is_ascii_digit())
}
