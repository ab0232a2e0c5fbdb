//! The index's two analysers as Tantivy runs them on its indexing threads: `body`'s words
//! ([`WordsTokenizer`]) and `pairs`' adjacent pairs of them ([`PairTokenizer`]), both
//! from one analysis of each text ([`Analysis`]).
//!
//! The terms are [`super::super::analyzer::analyzer`]'s, made cheaper: a word's term
//! depends on the word alone, so each analyser keeps the terms of the words it has seen
//! ([`WordCache`]: a ledger's text is mostly the same few thousand words, and stemming
//! them again for every event was the largest part of analysing it), and a text's terms
//! are kept in one buffer reused from text to text, each token written into one reused
//! [`Token`] as it is read (no string per token or per pair).
//!
//! The words analyser leaves each text's analysis on its thread for the pair analyser,
//! which Tantivy runs next on the same document (a document's fields are indexed in field
//! order, `body` first). Handing Tantivy pre-tokenized text instead costs a JSON round trip
//! of every token (serialized when the document is built, parsed again when it is
//! indexed).

use super::super::analyzer::{WordTokenizer, word_analyzer};
use std::cell::RefCell;
use std::collections::HashMap;
use tantivy::tokenizer::{TextAnalyzer, Token, TokenStream, Tokenizer};

/// Most words [`WordCache`] keeps (emptied when full, then filled again by the words that
/// come next): a ledger's common words fit many times over; at most a few MiB per
/// analyser.
const MAX_CACHED_WORDS: usize = 16_384;

/// Words as written → their terms (`None`: a word the analyser drops, too long), for the
/// words seen so far. A term holding a digit is not kept (numbers, hashes, versions: the
/// long tail of words that seldom come again).
#[derive(Clone)]
struct WordCache {
    terms: HashMap<Box<str>, Option<Box<str>>, foldhash::fast::RandomState>,
    /// The analyser's filters, for a word not yet seen.
    word: TextAnalyzer,
}

impl Default for WordCache {
    fn default() -> Self {
        WordCache {
            terms: HashMap::default(),
            word: word_analyzer(),
        }
    }
}

impl WordCache {
    /// Appends `word`'s term to `terms`; `false` when the word has none.
    fn push_term(&mut self, word: &str, terms: &mut String) -> bool {
        if let Some(term) = self.terms.get(word) {
            return term.as_deref().is_some_and(|term| {
                terms.push_str(term);
                true
            });
        }
        let mut stream = self.word.token_stream(word);
        let term = stream.advance().then(|| stream.token().text.as_str());
        if let Some(term) = term {
            terms.push_str(term);
        }
        let made = term.is_some();
        if !term.is_some_and(|term| term.bytes().any(|b| b.is_ascii_digit())) {
            if self.terms.len() >= MAX_CACHED_WORDS {
                self.terms.clear();
            }
            self.terms.insert(word.into(), term.map(Into::into));
        }
        made
    }
}

/// One word of an analysed text.
#[derive(Clone, Copy, Debug)]
struct Word {
    /// Where its term starts and ends in [`Analysis::terms`].
    from: usize,
    to: usize,
    position: usize,
    offset_from: usize,
    offset_to: usize,
    /// Its term holds a digit (it makes no pair: [`super::schema::pair_indexed`]).
    digit: bool,
}

/// One text's analysis: its words' terms, one after another, and where each is.
#[derive(Clone, Default)]
struct Analysis {
    /// The text analysed (for the pair analyser to know it).
    text: String,
    terms: String,
    words: Vec<Word>,
}

impl Analysis {
    /// Analyses `text` in place of what this held.
    fn analyse(&mut self, text: &str, cut: &mut WordTokenizer, cache: &mut WordCache) {
        self.text.clear();
        self.text.push_str(text);
        self.terms.clear();
        self.words.clear();
        let mut words = cut.token_stream(text);
        while words.advance() {
            let word = words.token();
            let from = self.terms.len();
            if !cache.push_term(&word.text, &mut self.terms) {
                continue;
            }
            let term = &self.terms[from..];
            self.words.push(Word {
                from,
                to: self.terms.len(),
                position: word.position,
                offset_from: word.offset_from,
                offset_to: word.offset_to,
                digit: term.bytes().any(|b| b.is_ascii_digit()),
            });
        }
    }

    fn term(&self, word: &Word) -> &str {
        &self.terms[word.from..word.to]
    }

    /// Whether the words at `i` and `i + 1` make a pair `pairs` holds.
    fn pairs_at(&self, i: usize) -> bool {
        let (first, second) = (&self.words[i], &self.words[i + 1]);
        second.position == first.position + 1 && !first.digit && !second.digit
    }
}

thread_local! {
    /// The last text [`WordsTokenizer`] analysed on this thread (left when its stream
    /// is dropped), for the [`PairTokenizer`] of the same document (taken, not copied).
    static LAST: RefCell<Analysis> = RefCell::new(Analysis::default());
}

/// `body`'s analyser on the index ([`super::super::analyzer::analyzer`]'s words), leaving
/// each text's analysis on its thread for [`PairTokenizer`].
#[derive(Clone, Default)]
pub(crate) struct WordsTokenizer {
    cut: WordTokenizer,
    cache: WordCache,
    analysis: Analysis,
    token: Token,
}

impl Tokenizer for WordsTokenizer {
    type TokenStream<'a> = WordsStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> WordsStream<'a> {
        self.analysis.analyse(text, &mut self.cut, &mut self.cache);
        self.token.position_length = 1;
        WordsStream {
            analysis: &mut self.analysis,
            token: &mut self.token,
            next: 0,
        }
    }
}

/// The words of one text; the analysis is left on the thread when it is dropped (swapped
/// with what was there, not copied).
pub(crate) struct WordsStream<'a> {
    analysis: &'a mut Analysis,
    token: &'a mut Token,
    next: usize,
}

impl Drop for WordsStream<'_> {
    fn drop(&mut self) {
        LAST.with(|last| std::mem::swap(&mut *last.borrow_mut(), self.analysis));
    }
}

impl TokenStream for WordsStream<'_> {
    fn advance(&mut self) -> bool {
        let Some(word) = self.analysis.words.get(self.next) else {
            return false;
        };
        self.next += 1;
        self.token.text.clear();
        self.token.text.push_str(self.analysis.term(word));
        self.token.position = word.position;
        self.token.offset_from = word.offset_from;
        self.token.offset_to = word.offset_to;
        true
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

/// Each two adjacent words of a text (analysed as `body` is) as one token at the first
/// one's position; words not adjacent (a long token dropped between them) make no pair,
/// nor does a word holding a digit ([`super::schema::pair_indexed`]). The analysis [`WordsTokenizer`]
/// just made of the same text on this thread when it did, else analysed here.
#[derive(Clone, Default)]
pub(crate) struct PairTokenizer {
    cut: WordTokenizer,
    cache: WordCache,
    analysis: Analysis,
    token: Token,
}

impl Tokenizer for PairTokenizer {
    type TokenStream<'a> = PairStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> PairStream<'a> {
        let taken = LAST.with(|last| {
            let mut last = last.borrow_mut();
            let same = last.text == text;
            if same {
                std::mem::swap(&mut *last, &mut self.analysis);
                last.text.clear();
            }
            same
        });
        if !taken {
            self.analysis.analyse(text, &mut self.cut, &mut self.cache);
        }
        self.token.position_length = 2;
        PairStream {
            analysis: &self.analysis,
            token: &mut self.token,
            next: 0,
        }
    }
}

/// The pairs of one text.
pub(crate) struct PairStream<'a> {
    analysis: &'a Analysis,
    token: &'a mut Token,
    /// The first word of the next pair to look at.
    next: usize,
}

impl TokenStream for PairStream<'_> {
    fn advance(&mut self) -> bool {
        let words = &self.analysis.words;
        while self.next + 1 < words.len() {
            let i = self.next;
            self.next += 1;
            if !self.analysis.pairs_at(i) {
                continue;
            }
            let (first, second) = (&words[i], &words[i + 1]);
            self.token.text.clear();
            self.token.text.push_str(self.analysis.term(first));
            self.token.text.push(' ');
            self.token.text.push_str(self.analysis.term(second));
            self.token.position = first.position;
            self.token.offset_from = first.offset_from;
            self.token.offset_to = second.offset_to;
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
    use super::super::super::analyzer::{MAX_TOKEN_BYTES, analyzer};
    use super::super::schema::{pair_indexed, pair_term};
    use super::*;

    /// Every token of `stream`, whole.
    fn tokens(mut stream: impl TokenStream) -> Vec<Token> {
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().clone());
        }
        out
    }

    /// `text`'s words and pairs the plain way: [`analyzer`]'s tokens, and each two of
    /// them adjacent, without a digit, joined by [`pair_term`].
    fn plain(text: &str) -> (Vec<Token>, Vec<Token>) {
        let mut words = analyzer();
        let words = tokens(words.token_stream(text));
        let pairs = words
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
        (words, pairs)
    }

    #[test]
    fn the_cached_analysers_make_the_plain_analysers_tokens() {
        let long = "x".repeat(MAX_TOKEN_BYTES);
        let shorter = "y".repeat(MAX_TOKEN_BYTES - 1);
        let texts = [
            "Caching the linkers, quickly 2 times".to_string(),
            "Café NAÏVE naïve cafe CAFÉ résumé Zürich — ﬁnal ① ² Ⅻ".to_string(),
            "the and of what is a an to in it was were being been".to_string(),
            "v1.2.3 0xDEADBEEF 777 thought777 7th 2026-11-29 3.14 1e9 x86_64".to_string(),
            format!("before {long} after {shorter} end {long}{long} tail"),
            "running runs ran runner running RUNNING Running runs".to_string(),
            "Привет, мир! Мир, привет. Straße STRASSE straße".to_string(),
            "日本語のテキスト rust日本 한국어 텍스트".to_string(),
            "Thought 41: weigh the evidence, note what is uncertain, and decide what to \
             check next.\nThought 42: weigh the evidence again"
                .to_string(),
            "generalizations generalization generally general generals".to_string(),
            "it's don't O'Neill's rock'n'roll e-mail co-operate".to_string(),
            "   ".to_string(),
            String::new(),
            "a".to_string(),
            "\u{0301}é\u{0301} ǅ ß ﬀ İstanbul ΣΊΣΥΦΟΣ".to_string(),
        ];
        let mut words = WordsTokenizer::default();
        let mut pairs = PairTokenizer::default();
        // Twice over: the first time each word is analysed, the second its term is cached.
        for round in 0..2 {
            for text in &texts {
                let (plain_words, plain_pairs) = plain(text);
                let cached_words = tokens(words.token_stream(text));
                assert_eq!(
                    cached_words, plain_words,
                    "words of {text:?}, round {round}"
                );
                let cached_pairs = tokens(pairs.token_stream(text));
                assert_eq!(
                    cached_pairs, plain_pairs,
                    "pairs of {text:?}, round {round}"
                );
                // The pair analyser on its own (nothing left for it on this thread).
                let alone = tokens(PairTokenizer::default().token_stream(text));
                assert_eq!(alone, plain_pairs, "pairs alone of {text:?}, round {round}");
            }
        }
    }

    #[test]
    fn the_cache_is_emptied_when_full_and_still_makes_the_same_terms() {
        let mut cache = WordCache::default();
        let mut terms = String::new();
        for n in 0..MAX_CACHED_WORDS + 10 {
            // A distinct word of letters for each n: n written in base 26.
            let mut word = String::from("Word");
            let mut rest = n;
            loop {
                word.push(char::from(b'a' + (rest % 26) as u8));
                rest /= 26;
                if rest == 0 {
                    break;
                }
            }
            word.push_str("ings");
            terms.clear();
            assert!(cache.push_term(&word, &mut terms));
            assert_eq!(terms, analyzer_term(&word));
            assert!(cache.terms.len() <= MAX_CACHED_WORDS);
        }
        // A term with a digit is made but not kept.
        terms.clear();
        assert!(cache.push_term("Thought777", &mut terms));
        assert_eq!(terms, "thought777");
        assert!(!cache.terms.contains_key("Thought777"));
        // A word too long has no term, and that is kept.
        let long = "z".repeat(MAX_TOKEN_BYTES);
        terms.clear();
        assert!(!cache.push_term(&long, &mut terms));
        assert!(!cache.push_term(&long, &mut terms));
        assert_eq!(terms, "");
    }

    fn analyzer_term(word: &str) -> String {
        let mut words = analyzer();
        let all = tokens(words.token_stream(word));
        assert_eq!(all.len(), 1);
        all[0].text.clone()
    }

    #[test]
    fn pairs_are_adjacent_analysed_words() {
        let mut pairs = PairTokenizer::default();
        let out: Vec<(String, usize)> =
            tokens(pairs.token_stream("Caching the linkers, quickly 2 times"))
                .into_iter()
                .map(|t| (t.text, t.position))
                .collect();
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
        assert_eq!(tokens(words.token_stream(text)).len(), 4);
        let collect = |pairs: &mut PairTokenizer, text: &str| -> Vec<String> {
            tokens(pairs.token_stream(text))
                .into_iter()
                .map(|t| t.text)
                .collect()
        };
        let mut pairs = PairTokenizer::default();
        assert_eq!(
            collect(&mut pairs, text),
            vec!["check the", "the cach", "cach latenc"]
        );
        // Taken once: the same text again, and another text, are analysed here.
        assert!(LAST.with(|last| last.borrow().text.is_empty()));
        assert_eq!(
            collect(&mut pairs, text),
            vec!["check the", "the cach", "cach latenc"]
        );
        assert_eq!(collect(&mut pairs, "linkers quickly"), vec!["linker quick"]);
    }
}
