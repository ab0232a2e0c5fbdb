//! Hybrid fusion: the lexical and the semantic rankings of one search made one, the
//! lexical side heard only as far as it has something to say.
//!
//! Owns: reciprocal rank fusion ([`fuse`], [`RRF_K`]) with a weight per lexical match
//! ([`LexicalWeight`]: the share of the evidence of the query's content words the match
//! holds, each word or `word*` prefix weighed by its [`idf`] in the lexical index, raised
//! to [`COVERAGE_POWER`]; stop words are no content, [`STOP_WORDS`]), and the query as
//! the embedder is given it ([`embedded_query`]: a `word*` completed from the lexical
//! matches). Must not: read the ledger or know a backend (the same fusion on redb and
//! PostgreSQL: it sees keys, texts, ranks and the document frequencies a backend
//! counted, [`DocumentFrequencies`]).
//!
//! Why: a paraphrase ("people kept getting signed out") shares no content word with its
//! session, yet the lexical index matches its "out", "getting" or one stray word
//! elsewhere; plain RRF counts such a match as much as the semantic ranker's best and
//! drags the right answer down. Measured on the relevance set of
//! `tests/services/relevance.rs` (docs/src/recall.md has the table): equal-weight RRF,
//! score normalisation with a convex combination, one weight for the whole lexical
//! ranking (its best match's coverage) and a weight per match; only the last, with the
//! coverage raised to the fourth power, kept hybrid at least as good as the better single
//! mode on every kind of query on both backends. Coverage counted the words alike until
//! issue 45: then a rare identifier beside a common word (`E4021 users`, "zanzibar
//! speed") counted 1/16 whether the match held the identifier or the common word, and
//! the semantic ranker's guesses outranked the one session holding it. Weighed by IDF, a
//! match of the identifier holds most of the query's evidence and one of a word most
//! documents hold almost none; on the set's rare-identifier queries hybrid went from
//! below lexical (MRR@10 0.715 against 0.847 on redb, 0.794 on PostgreSQL) to 1.000,
//! every other kind unchanged. At the square a stray word of a paraphrase lifted a near
//! miss again; the cube and the fourth power pass, and the fourth was kept.

use super::analyzer;
use super::query::{ParsedQuery, Unit};
use super::{CountedWord, DocumentFrequencies};
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// The constant of reciprocal rank fusion: a match ranked r by a ranker scores
/// `RRF_K / (RRF_K + r)` from it (1-based r; so a first place scores about 1), times its
/// weight.
pub(crate) const RRF_K: f64 = 60.0;

/// The power a lexical match's coverage (the share of the query's evidence, its content
/// words' IDF, that the match holds) is raised to for its weight: a match of every
/// content word counts fully, one holding half the evidence 1/16, a third 1/81 (a stray
/// word in a paraphrase moves nothing; a rare identifier beside a word most documents
/// hold is most of the evidence).
pub(crate) const COVERAGE_POWER: i32 = 4;

/// Words that say nothing about what a text is about (English function words and the
/// commonest verbs): a lexical match on these alone is no evidence. Used for fusion's
/// weights only; the index still matches them. Separated by whitespace.
pub(crate) const STOP_WORDS: &str = "a about above after again against all am an and any are \
    as at be because been before being below between both but by can could did do does doing \
    done down during each few for from further get gets getting got had has have having he her \
    here hers herself him himself his how i if in into is it its itself just make made makes me \
    more most my myself no nor not now of off on once only or other our ours ourselves out over \
    own same she should so some such than that the their theirs them themselves then there these \
    they this those through to too under until up use used uses using very was we were what when \
    where which while who whom why will with would you your yours yourself yourselves";

/// The stop words as the analyser makes them (folded, stemmed).
fn stop_terms() -> &'static HashSet<String> {
    static TERMS: OnceLock<HashSet<String>> = OnceLock::new();
    TERMS.get_or_init(|| {
        STOP_WORDS
            .split_whitespace()
            .flat_map(analyzer::terms)
            .collect()
    })
}

/// What weight a lexical match carries in fusion, from the query's content words and
/// the evidence each is (its IDF in the lexical index).
pub(crate) struct LexicalWeight {
    /// The wanted words, prefixes and phrases' words, stop words left out, each once.
    content: Vec<ContentWord>,
    /// Each content word's evidence, in `content`'s order: 1 each until
    /// [`LexicalWeight::weigh_by`] weighs them by IDF.
    evidence: Vec<f64>,
}

/// One content word of a query: how a text holds it and how a backend counts the
/// documents holding it.
struct ContentWord {
    /// The analysed term a text must hold; `None` for a prefix (`word*`), which a text
    /// holds when one of its folded words starts with it.
    term: Option<String>,
    /// What the lexical index is asked the document frequency of.
    counted: CountedWord,
}

impl LexicalWeight {
    pub(crate) fn new(parsed: &ParsedQuery) -> Self {
        let stop = stop_terms();
        let mut content: Vec<ContentWord> = Vec::new();
        for unit in &parsed.wanted {
            let folded = analyzer::folded(unit.text());
            let mut words: Vec<&str> = folded.split(' ').filter(|w| !w.is_empty()).collect();
            // `word*` (or `e-mai*`): the last word is a prefix, the words before it words.
            if matches!(unit, Unit::Prefix(_))
                && let Some(prefix) = words.pop()
            {
                let counted = CountedWord::Prefix(prefix.to_string());
                if !content.iter().any(|c| c.counted == counted) {
                    content.push(ContentWord {
                        term: None,
                        counted,
                    });
                }
            }
            for word in words {
                for term in analyzer::terms(word) {
                    let known = content.iter().any(|c| c.term.as_ref() == Some(&term));
                    if !stop.contains(&term) && !known {
                        content.push(ContentWord {
                            term: Some(term),
                            counted: CountedWord::Word(word.to_string()),
                        });
                    }
                }
            }
        }
        let evidence = vec![1.0; content.len()];
        LexicalWeight { content, evidence }
    }

    /// The content words and prefixes, folded, in order: what the lexical index is asked
    /// the [`DocumentFrequencies`] of.
    pub(crate) fn words(&self) -> Vec<CountedWord> {
        self.content.iter().map(|c| c.counted.clone()).collect()
    }

    /// Weighs each content word by its IDF among the index's documents
    /// ([`idf`]; `frequencies` answers [`LexicalWeight::words`], in order).
    pub(crate) fn weigh_by(&mut self, frequencies: &DocumentFrequencies) {
        for (evidence, &holding) in self.evidence.iter_mut().zip(&frequencies.holding) {
            *evidence = idf(frequencies.documents, holding);
        }
    }

    /// The weight of a lexical match of `text`: the share of the query's evidence (its
    /// content words' IDF) that the words `text` holds carry, to the
    /// [`COVERAGE_POWER`]; 0 when the query has no content word (stop words only: the
    /// semantic ranking decides).
    pub(crate) fn of(&self, text: &str) -> f64 {
        let total: f64 = self.evidence.iter().sum();
        if total <= 0.0 {
            return 0.0;
        }
        let terms: HashSet<String> = analyzer::terms(text).into_iter().collect();
        let has_prefix = self.content.iter().any(|c| c.term.is_none());
        let folded = if has_prefix {
            analyzer::folded(text)
        } else {
            String::new()
        };
        let holds = |word: &ContentWord| match &word.term {
            Some(term) => terms.contains(term),
            None => folded
                .split(' ')
                .any(|w| w.starts_with(word.counted.text())),
        };
        let held: f64 = self
            .content
            .iter()
            .zip(&self.evidence)
            .filter(|(word, _)| holds(word))
            .map(|(_, evidence)| evidence)
            .sum();
        (held / total).powi(COVERAGE_POWER)
    }
}

/// The query's wanted words as the embedder is given them: each unit's text, a `word*`
/// completed to the word starting with it that the lexical matches' `texts` hold most
/// often, as they write it (an embedder cannot place a word's first letters: `Margue`
/// is nothing to it, `Marguerite` a person a session names), left as typed when none
/// holds one.
pub(crate) fn embedded_query(parsed: &ParsedQuery, texts: &[String]) -> String {
    let mut out: Vec<String> = Vec::with_capacity(parsed.wanted.len());
    for unit in &parsed.wanted {
        let Unit::Prefix(_) = unit else {
            out.push(unit.text().to_string());
            continue;
        };
        let folded = analyzer::folded(unit.text());
        let mut words: Vec<&str> = folded.split(' ').filter(|w| !w.is_empty()).collect();
        let Some(prefix) = words.pop() else {
            continue;
        };
        let completed = most_held_completion(prefix, texts);
        words.push(completed.unwrap_or(prefix));
        out.push(words.join(" "));
    }
    out.join(" ")
}

/// The word of `texts` (as written) whose folded form starts with `prefix` (folded)
/// that they hold most often; among equals the shortest, then the first in order.
fn most_held_completion<'a>(prefix: &str, texts: &'a [String]) -> Option<&'a str> {
    let first = prefix.chars().next()?;
    let mut held: HashMap<&str, (usize, usize)> = HashMap::new();
    let written = texts
        .iter()
        .flat_map(|t| t.split(|c: char| !c.is_alphanumeric() && c != '_'));
    for (order, word) in written.enumerate() {
        // Fold only a word that may start with the prefix (folding builds an analyser).
        let may = word
            .chars()
            .next()
            .is_some_and(|c| !c.is_ascii() || c.to_ascii_lowercase() == first);
        if may && analyzer::folded(word).starts_with(prefix) {
            held.entry(word).or_insert((0, order)).0 += 1;
        }
    }
    held.into_iter()
        .max_by(|a, b| {
            (a.1.0.cmp(&b.1.0))
                .then(b.0.len().cmp(&a.0.len()))
                .then(b.1.1.cmp(&a.1.1))
        })
        .map(|(word, _)| word)
}

/// The inverse document frequency of a word `holding` of an index's `documents` hold,
/// as BM25 (Lucene, Tantivy) has it: `ln(1 + (N - n + 0.5) / (n + 0.5))`. A word in one
/// document of 1,000 weighs 6.5, one in half of them 0.7, one in all of them 0.0005;
/// one in none weighs most (the query speaks of what no document says).
pub(crate) fn idf(documents: u64, holding: u64) -> f64 {
    let n = holding.min(documents) as f64;
    (1.0 + (documents as f64 - n + 0.5) / (n + 0.5)).ln()
}

/// A match as ranked by one ranker: its key (session, seq).
pub(crate) type Key = (String, u64);

/// One fused match: its key, fused score, and whether each ranker found it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fused {
    pub key: Key,
    pub score: f64,
    pub by_words: bool,
    pub by_meaning: bool,
}

/// Weighted reciprocal rank fusion of the lexical ranking (each match with its weight,
/// [`LexicalWeight::of`]) and the semantic one (weight 1), best first each: every key
/// with its fused score, best first (ties: the better lexical rank, then the better
/// semantic rank).
pub(crate) fn fuse(lexical: &[(Key, f64)], semantic: &[Key]) -> Vec<Fused> {
    let mut fused: HashMap<&Key, (f64, usize, usize)> = HashMap::new();
    for (rank, (key, weight)) in lexical.iter().enumerate() {
        let entry = fused.entry(key).or_insert((0.0, usize::MAX, usize::MAX));
        entry.0 += weight * RRF_K / (RRF_K + rank as f64 + 1.0);
        entry.1 = entry.1.min(rank);
    }
    for (rank, key) in semantic.iter().enumerate() {
        let entry = fused.entry(key).or_insert((0.0, usize::MAX, usize::MAX));
        entry.0 += RRF_K / (RRF_K + rank as f64 + 1.0);
        entry.2 = entry.2.min(rank);
    }
    let mut out: Vec<(Key, f64, usize, usize)> = fused
        .into_iter()
        .map(|(key, (score, l, s))| (key.clone(), score, l, s))
        .collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)));
    out.into_iter()
        .map(|(key, score, l, s)| Fused {
            key,
            score,
            by_words: l != usize::MAX,
            by_meaning: s != usize::MAX,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recall::query::parse;

    fn key(s: &str) -> Key {
        (s.to_string(), 1)
    }

    #[test]
    fn fusion_puts_what_both_found_first() {
        let fused = fuse(&[(key("a"), 1.0), (key("b"), 1.0)], &[key("c"), key("b")]);
        let order: Vec<&str> = fused.iter().map(|f| f.key.0.as_str()).collect();
        assert_eq!(order, vec!["b", "a", "c"]);
        assert!(fused[0].by_words && fused[0].by_meaning);
        assert!(fused[1].by_words && !fused[1].by_meaning);
        assert!((fused[1].score - 60.0 / 61.0).abs() < 1e-9);
    }

    #[test]
    fn a_match_of_stop_words_alone_weighs_nothing() {
        let weight = LexicalWeight::new(&parse("people kept getting signed out").unwrap());
        // "getting" and "out" are stop words: only people, kept, signed count.
        assert_eq!(weight.of("Users were logged out, getting errors"), 0.0);
        assert_eq!(weight.of("People kept getting signed out"), 1.0);
        let one_of_three = weight.of("commits are signed");
        assert!((one_of_three - (1.0f64 / 3.0).powi(COVERAGE_POWER)).abs() < 1e-12);
        // A query of stop words only: the lexical side says nothing.
        assert_eq!(
            LexicalWeight::new(&parse("how did we do it").unwrap()).of("how did we do it"),
            0.0
        );
    }

    #[test]
    fn a_rare_word_is_most_of_the_evidence_and_a_common_one_little() {
        let mut weight = LexicalWeight::new(&parse("zanzibar speed").unwrap());
        assert_eq!(
            weight.words(),
            vec![
                CountedWord::Word("zanzibar".into()),
                CountedWord::Word("speed".into())
            ]
        );
        // Alike, either word is half the query.
        let alike = weight.of("the ferry to Zanzibar");
        assert!((alike - 0.5f64.powi(COVERAGE_POWER)).abs() < 1e-12);
        // One of 100 documents holds "zanzibar", 90 hold "speed".
        weight.weigh_by(&DocumentFrequencies {
            documents: 100,
            holding: vec![1, 90],
        });
        assert!(weight.of("the ferry to Zanzibar") > 0.8);
        assert!(weight.of("the speed of the build") < 0.001);
        assert!((weight.of("zanzibar at speed") - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_prefix_is_held_by_a_word_that_starts_with_it_and_weighs_by_its_words() {
        let mut weight = LexicalWeight::new(&parse("laten* speed").unwrap());
        assert_eq!(
            weight.words(),
            vec![
                CountedWord::Prefix("laten".into()),
                CountedWord::Word("speed".into())
            ]
        );
        // Held by "latency" and "latencies", as `laten*` finds them; not by "late".
        assert!((weight.of("Latencies doubled") - 0.5f64.powi(COVERAGE_POWER)).abs() < 1e-12);
        assert_eq!(weight.of("the build ran late"), 0.0);
        // Two of 100 documents hold a word starting with "laten", 90 "speed".
        weight.weigh_by(&DocumentFrequencies {
            documents: 100,
            holding: vec![2, 90],
        });
        assert!(weight.of("p99 latency is 40 ms") > 0.7);
        assert!(weight.of("speed") < 0.001);
        // `e-mai*`: the words before the last are words, the last a prefix.
        let weight = LexicalWeight::new(&parse("e-mai*").unwrap());
        assert_eq!(
            weight.words(),
            vec![
                CountedWord::Prefix("mai".into()),
                CountedWord::Word("e".into())
            ]
        );
        assert_eq!(weight.of("an e-mail came"), 1.0);
    }

    #[test]
    fn a_prefix_is_embedded_as_the_word_the_matches_hold_most() {
        let texts = [
            "Reports built from kestrel07 lagged".to_string(),
            "kestrel07 and kestrel08 were paused; Kestrel07 resumed".to_string(),
        ];
        let parsed = parse("kestr* database").unwrap();
        assert_eq!(embedded_query(&parsed, &texts), "kestrel07 database");
        // As written; among words held as often, the shortest.
        let texts = ["Marguerite owns it; ask Marguerite or Margo".to_string()];
        let parsed = parse("Margue* app").unwrap();
        assert_eq!(embedded_query(&parsed, &texts), "Marguerite app");
        let parsed = parse("mar*").unwrap();
        assert_eq!(embedded_query(&parsed, &texts), "Marguerite");
        let texts = ["Margo and Marguerite".to_string()];
        assert_eq!(embedded_query(&parsed, &texts), "Margo");
        // `e-mai*`: the last word is completed; none held: as typed.
        let parsed = parse("e-mai* \"sent late\" zzq*").unwrap();
        let texts = ["an e-mail, two emails".to_string()];
        assert_eq!(embedded_query(&parsed, &texts), "e mail sent late zzq");
        assert_eq!(
            embedded_query(&parse("plain words").unwrap(), &[]),
            "plain words"
        );
    }

    #[test]
    fn idf_is_bm25s() {
        assert!((idf(1000, 1) - 6.503).abs() < 1e-3);
        assert!((idf(1000, 500) - 2f64.ln()).abs() < 1e-3);
        assert!(idf(1000, 1000) < 0.001);
        assert!(idf(1000, 0) > idf(1000, 1));
        // A count above the documents (a capped or stale count) is taken as all of them.
        assert_eq!(idf(10, 20), idf(10, 10));
    }

    #[test]
    fn a_weightless_lexical_match_does_not_move_the_semantic_order() {
        let fused = fuse(&[(key("x"), 0.0), (key("b"), 0.0)], &[key("a"), key("b")]);
        let order: Vec<&str> = fused.iter().map(|f| f.key.0.as_str()).collect();
        assert_eq!(order, vec!["a", "b", "x"]);
        // A full match still counts as in plain RRF.
        let fused = fuse(&[(key("b"), 1.0)], &[key("a"), key("b")]);
        assert_eq!(fused[0].key, key("b"));
    }
}
