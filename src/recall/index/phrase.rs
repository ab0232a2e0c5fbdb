//! A quoted phrase on the index: found by its word pairs, ranked as `body`'s phrase, and
//! cut off by the top-k collector.
//!
//! Owns: [`PairPhraseQuery`]. A two-word phrase is one term of `pairs`: its postings are
//! the matches and its frequency is the phrase's count in the document (no positions
//! read), scored by `body`'s phrase BM25 (the phrase's terms' statistics, `body`'s
//! length): the score a `PhraseQuery` on `body` gives, without positions. A longer phrase
//! is led by its rarest pair (its frequency bounds the phrase's count) and only the
//! documents that may still enter the top hits have their positions checked in `body`.
//! Either way the top-k collection skips every block of the lead pair's postings whose
//! best score cannot beat the current k-th (block-max, from the pair's per-block maxima),
//! so a phrase every document holds costs a walk of its skip list, not a scoring of
//! every match. Must not: change a phrase's score (`body`'s phrase BM25, as before).
//!
//! Why the bound holds: a pair's block maximum is stored at indexing with `pairs`' own
//! lengths, each one less than `body`'s (a text of n words has at most n − 1 pairs), and
//! BM25 falls as a document grows, so the bound is never below a `body` score of the
//! block (Tantivy's own caveat applies: the stored pair is chosen with the segment's
//! average length).

use super::schema::{Fields, pair_indexed, pair_term};
use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::BlockSegmentPostings;
use tantivy::query::{
    Bm25Weight, BooleanQuery, ConstScoreQuery, EmptyScorer, EnableScoring, Explanation, Occur,
    PhraseQuery, Query, Scorer, TermQuery, Weight,
};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocId, DocSet, Score, SegmentReader, TERMINATED, Term};

/// A phrase of at least two analysed words (see the module doc).
#[derive(Clone, Debug)]
pub(super) struct PairPhraseQuery {
    /// Two words, their pair indexed: the pair's count is the phrase's.
    exact: bool,
    /// The phrase on `body`, as it ranks.
    phrase: PhraseQuery,
    /// The distinct pairs of adjacent words that `pairs` holds (at least one).
    pairs: Vec<Term>,
    fields: Fields,
}

impl PairPhraseQuery {
    /// `terms` (at least two) in this order; a phrase none of whose pairs is indexed (each
    /// holds a word with a digit) is checked by positions alone, led by its rarest word.
    pub(super) fn for_terms(fields: &Fields, terms: &[String]) -> Box<dyn Query> {
        let phrase = PhraseQuery::new(
            terms
                .iter()
                .map(|t| Term::from_field_text(fields.body, t))
                .collect(),
        );
        let mut pairs: Vec<Term> = Vec::new();
        for pair in terms.windows(2) {
            if !pair_indexed(&pair[0], &pair[1]) {
                continue;
            }
            let term = Term::from_field_text(fields.pairs, &pair_term(&pair[0], &pair[1]));
            if !pairs.contains(&term) {
                pairs.push(term);
            }
        }
        if pairs.is_empty() {
            return Box::new(phrase);
        }
        Box::new(PairPhraseQuery {
            exact: terms.len() == 2,
            phrase,
            pairs,
            fields: *fields,
        })
    }

    /// The phrase checked in `body` on the documents holding every pair (the pairs only
    /// select: their clauses score 0, so a score is the phrase's).
    fn checked(&self) -> BooleanQuery {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, Box::new(self.phrase.clone()))];
        for pair in &self.pairs {
            clauses.push((
                Occur::Must,
                Box::new(ConstScoreQuery::new(
                    Box::new(TermQuery::new(pair.clone(), IndexRecordOption::Basic)),
                    0.0,
                )),
            ));
        }
        BooleanQuery::new(clauses)
    }
}

impl Query for PairPhraseQuery {
    fn weight(&self, enable_scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let checked = self.checked().weight(enable_scoring)?;
        let ranking = match enable_scoring {
            EnableScoring::Enabled {
                statistics_provider,
                ..
            } => Some(Bm25Weight::for_terms(
                statistics_provider,
                &self.phrase.phrase_terms(),
            )?),
            EnableScoring::Disabled { .. } => None,
        };
        Ok(Box::new(PairPhraseWeight {
            checked,
            ranking,
            pairs: self.pairs.clone(),
            exact: self.exact,
            body: self.fields.body,
        }))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        self.phrase.query_terms(visitor);
    }
}

struct PairPhraseWeight {
    /// The phrase checked in `body` (positions), on the documents holding every pair.
    checked: Box<dyn Weight>,
    /// `body`'s phrase BM25 (`None`: scoring disabled).
    ranking: Option<Bm25Weight>,
    pairs: Vec<Term>,
    exact: bool,
    body: tantivy::schema::Field,
}

impl PairPhraseWeight {
    /// The rarest pair's postings scored as the phrase would be with the pair's count:
    /// exactly the phrase's score when [`PairPhraseQuery::exact`], a bound on it else. `None` when
    /// scoring is disabled; an empty scorer when a pair is in no document of the segment.
    fn lead(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Option<Lead>> {
        let Some(ranking) = &self.ranking else {
            return Ok(None);
        };
        let inverted = reader.inverted_index(self.pairs[0].field())?;
        let mut rarest: Option<(u32, &Term)> = None;
        for pair in &self.pairs {
            let Some(info) = inverted.get_term_info(pair)? else {
                return Ok(Some(Lead::Nothing));
            };
            if rarest.is_none_or(|(n, _)| info.doc_freq < n) {
                rarest = Some((info.doc_freq, pair));
            }
        }
        let Some((_, pair)) = rarest else {
            return Ok(Some(Lead::Nothing));
        };
        let Some(postings) = inverted.read_block_postings(pair, IndexRecordOption::WithFreqs)?
        else {
            return Ok(Some(Lead::Nothing));
        };
        let lengths = match reader.fieldnorms_readers().get_field(self.body)? {
            Some(lengths) => lengths,
            None => FieldNormReader::constant(reader.max_doc(), 1),
        };
        Ok(Some(Lead::Pair(Box::new(PairScorer::new(
            postings,
            lengths,
            ranking.boost_by(boost),
        )))))
    }
}

/// The lead pair of a segment.
enum Lead {
    /// A pair the segment does not hold: nothing matches.
    Nothing,
    Pair(Box<PairScorer>),
}

impl Weight for PairPhraseWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        if self.exact {
            match self.lead(reader, boost)? {
                Some(Lead::Pair(lead)) => return Ok(lead),
                Some(Lead::Nothing) => return Ok(Box::new(EmptyScorer)),
                None => {}
            }
        }
        self.checked.scorer(reader, boost)
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        self.checked.explain(reader, doc)
    }

    fn for_each_pruning(
        &self,
        mut threshold: Score,
        reader: &SegmentReader,
        callback: &mut dyn FnMut(DocId, Score) -> Score,
    ) -> tantivy::Result<()> {
        let mut lead = match self.lead(reader, 1.0)? {
            Some(Lead::Pair(lead)) => lead,
            Some(Lead::Nothing) => return Ok(()),
            None => {
                let mut scorer = self.checked.scorer(reader, 1.0)?;
                let mut doc = scorer.doc();
                while doc != TERMINATED {
                    let score = scorer.score();
                    if score > threshold {
                        threshold = callback(doc, score);
                    }
                    doc = scorer.advance();
                }
                return Ok(());
            }
        };
        // Two words: the lead's score is the phrase's. More: the phrase is checked on the
        // documents whose bound beats the threshold.
        let mut checked = if !self.exact {
            Some(self.checked.scorer(reader, 1.0)?)
        } else {
            None
        };
        let mut doc = lead.doc();
        while doc != TERMINATED {
            if lead.block_max_score() <= threshold {
                doc = lead.next_block();
                continue;
            }
            let bound = lead.score();
            if bound > threshold {
                match checked.as_mut() {
                    None => threshold = callback(doc, bound),
                    Some(checked) => {
                        let at = if checked.doc() < doc {
                            checked.seek(doc)
                        } else {
                            checked.doc()
                        };
                        if at == TERMINATED {
                            break;
                        }
                        if at > doc {
                            doc = lead.seek(at);
                            continue;
                        }
                        let score = checked.score();
                        if score > threshold {
                            threshold = callback(doc, score);
                        }
                    }
                }
            }
            doc = lead.advance();
        }
        Ok(())
    }
}

/// One pair's postings, block by block, scored as `body`'s phrase with the pair's count.
struct PairScorer {
    postings: BlockSegmentPostings,
    /// The current document's index in the loaded block.
    at: usize,
    /// `body`'s lengths.
    lengths: FieldNormReader,
    ranking: Bm25Weight,
}

impl PairScorer {
    fn new(postings: BlockSegmentPostings, lengths: FieldNormReader, ranking: Bm25Weight) -> Self {
        PairScorer {
            postings,
            at: 0,
            lengths,
            ranking,
        }
    }

    /// The best score a document of the current block may have (never below it).
    fn block_max_score(&mut self) -> Score {
        self.postings.block_max_score(&self.lengths, &self.ranking)
    }

    /// The first document of the next block (its skipped documents are not decoded).
    fn next_block(&mut self) -> DocId {
        self.postings.advance();
        self.at = 0;
        self.doc()
    }
}

impl DocSet for PairScorer {
    fn advance(&mut self) -> DocId {
        self.at += 1;
        if self.at >= self.postings.docs().len() {
            return self.next_block();
        }
        self.doc()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        let docs = self.postings.docs();
        if self.at < docs.len() && docs[docs.len() - 1] >= target {
            while self.postings.docs()[self.at] < target {
                self.at += 1;
            }
            return self.doc();
        }
        if self.doc() == TERMINATED {
            return TERMINATED;
        }
        self.at = self.postings.seek(target);
        self.doc()
    }

    fn doc(&self) -> DocId {
        self.postings
            .docs()
            .get(self.at)
            .copied()
            .unwrap_or(TERMINATED)
    }

    fn size_hint(&self) -> u32 {
        self.postings.doc_freq()
    }
}

impl Scorer for PairScorer {
    fn score(&mut self) -> Score {
        let doc = self.doc();
        self.ranking
            .score(self.lengths.fieldnorm_id(doc), self.postings.freq(self.at))
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::{register_analyzers, schema};
    use super::*;
    use crate::recall::analyzer;
    use tantivy::collector::TopDocs;
    use tantivy::{DocAddress, Index, TantivyDocument};

    /// An index of `texts` in segments of 700 documents (several blocks of postings each).
    fn index_of(texts: &[String]) -> (Index, Fields) {
        let (schema, fields) = schema();
        let index = Index::create_in_ram(schema);
        register_analyzers(&index);
        let mut writer = index
            .writer_with_num_threads(1, 15_000_000)
            .expect("writer");
        for chunk in texts.chunks(700) {
            for text in chunk {
                let mut doc = TantivyDocument::new();
                doc.add_text(fields.body, text);
                doc.add_text(fields.pairs, text);
                writer.add_document(doc).expect("add");
            }
            writer.commit().expect("commit");
        }
        (index, fields)
    }

    fn top(index: &Index, query: &dyn Query, k: usize) -> Vec<(Score, DocAddress)> {
        let searcher = index.reader().expect("reader").searcher();
        searcher
            .search(query, &TopDocs::with_limit(k).order_by_score())
            .expect("search")
    }

    #[test]
    fn a_phrase_by_its_pairs_ranks_and_cuts_off_as_body_s_phrase() {
        // Varied lengths and counts: every text holds "check next" once or more, some
        // twice, some hold "what to check next", some a number inside the phrase.
        let texts: Vec<String> = (0..2_000u32)
            .map(|n| {
                let mut text = format!("Thought {n}: decide what to check next");
                for _ in 0..(n * 7919 % 13) {
                    text.push_str(" and weigh");
                }
                if n % 5 == 0 {
                    text.push_str(", check next again");
                }
                if n % 3 == 0 {
                    text.push_str(" what is check 7 next");
                }
                text
            })
            .collect();
        let (index, fields) = index_of(&texts);
        for phrase in [
            "check next",
            "what to check next",
            "decide what to",
            "check 7 next",
            "weigh and weigh",
            "next thought",
        ] {
            let terms = analyzer::terms(phrase);
            let pairs = PairPhraseQuery::for_terms(&fields, &terms);
            let positions = PhraseQuery::new(
                terms
                    .iter()
                    .map(|t| Term::from_field_text(fields.body, t))
                    .collect(),
            );
            for k in [1, 10, 3_000] {
                let by_pairs = top(&index, &*pairs, k);
                let by_positions = top(&index, &positions, k);
                assert_eq!(by_pairs.len(), by_positions.len(), "{phrase} top {k}");
                // The same scores in the same order (ties may swap documents).
                let scores = |hits: &[(Score, DocAddress)]| -> Vec<Score> {
                    hits.iter().map(|(s, _)| *s).collect()
                };
                assert_eq!(scores(&by_pairs), scores(&by_positions), "{phrase} top {k}");
                if k > texts.len() {
                    let docs = |hits: &[(Score, DocAddress)]| -> Vec<DocAddress> {
                        let mut docs: Vec<DocAddress> = hits.iter().map(|(_, d)| *d).collect();
                        docs.sort();
                        docs
                    };
                    assert_eq!(docs(&by_pairs), docs(&by_positions), "{phrase}");
                }
            }
        }
    }
}
