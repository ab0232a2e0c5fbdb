//! A search's filters (`sessionId`, `kinds`, `since`/`until`, a cursor's bound) applied
//! while the top hits are collected, not after.
//!
//! Owns: [`Filter`] (what a request filters on) and [`FilteredQuery`], a query that wraps
//! the ranked one. Per segment it reads the filter's fast fields once and then, for the
//! top-k collection, either
//! - runs the ranked query's own pruned collection (block-max WAND over its terms) with
//!   each candidate checked against the fast fields (a rejected one leaves the threshold
//!   where it was), when the filter keeps many documents, or
//! - walks the few documents the filter keeps (a session's, or those of rare kinds: their
//!   postings) and scores only those, when it keeps few of them, or
//! - skips the segment, or drops the check, when its values' range says no document or
//!   every document passes.
//!
//! Filters used to be clauses of a boolean query (`ConstScoreQuery`, score 0): that turned
//! every filtered search into a scan of all its matches. Must not: change a score (a
//! filter only removes documents).

use super::schema::{AT, Fields, KIND, POSITION, SESSION};
use std::ops::Bound;
use tantivy::columnar::{Column, StrColumn};
use tantivy::query::{
    BooleanQuery, EmptyScorer, EnableScoring, Explanation, Query, RangeQuery, Scorer, TermQuery,
    Weight,
};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocId, DocSet, Score, SegmentReader, TERMINATED, Term};

/// A filter keeping at most one document in this many is walked (its postings, or its
/// time range's fast-field scan, drive the search and only what it keeps is scored); a
/// broader one is checked per candidate of the ranked query's own pruned collection
/// (measured at a million events: a kind kept by one event in ten is 5× faster walked,
/// half of the events faster checked).
const DRIVE_WHEN_ONE_IN: u64 = 2;

/// What a search keeps: every condition holds (empty: everything).
#[derive(Clone, Debug, Default)]
pub(super) struct Filter {
    /// The session's id, as indexed.
    pub session: Option<String>,
    /// Session kinds' names (empty: every kind).
    pub kinds: Vec<String>,
    /// Commit time bounds, inclusive.
    pub since: Option<u64>,
    pub until: Option<u64>,
    /// The highest ledger position (a cursor's bound).
    pub position_max: Option<u64>,
}

impl Filter {
    pub(super) fn is_empty(&self) -> bool {
        self.session.is_none()
            && self.kinds.is_empty()
            && self.since.is_none()
            && self.until.is_none()
            && self.position_max.is_none()
    }
}

/// `inner`, keeping only what `filter` keeps; scores are `inner`'s.
#[derive(Debug)]
pub(super) struct FilteredQuery {
    inner: Box<dyn Query>,
    filter: Filter,
    fields: Fields,
}

impl Clone for FilteredQuery {
    fn clone(&self) -> Self {
        FilteredQuery {
            inner: self.inner.box_clone(),
            filter: self.filter.clone(),
            fields: self.fields,
        }
    }
}

impl FilteredQuery {
    /// `inner` alone when the filter keeps everything.
    pub(super) fn wrap(inner: Box<dyn Query>, filter: &Filter, fields: Fields) -> Box<dyn Query> {
        if filter.is_empty() {
            return inner;
        }
        Box::new(FilteredQuery {
            inner,
            filter: filter.clone(),
            fields,
        })
    }
}

impl Query for FilteredQuery {
    fn weight(&self, enable_scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let inner = self.inner.weight(enable_scoring)?;
        // The postings that may drive the search: the session's, else the kinds'.
        let driver: Option<Box<dyn Query>> = if let Some(session) = &self.filter.session {
            Some(Box::new(TermQuery::new(
                Term::from_field_text(self.fields.session, session),
                IndexRecordOption::Basic,
            )))
        } else if !self.filter.kinds.is_empty() {
            Some(Box::new(BooleanQuery::union(
                self.filter
                    .kinds
                    .iter()
                    .map(|k| {
                        Box::new(TermQuery::new(
                            Term::from_field_text(self.fields.kind, k),
                            IndexRecordOption::Basic,
                        )) as Box<dyn Query>
                    })
                    .collect(),
            )))
        } else {
            None
        };
        let driver_terms: Vec<Term> = match &self.filter.session {
            Some(session) => vec![Term::from_field_text(self.fields.session, session)],
            None => self
                .filter
                .kinds
                .iter()
                .map(|k| Term::from_field_text(self.fields.kind, k))
                .collect(),
        };
        let schema = enable_scoring.schema();
        let driver = match driver {
            Some(query) => Some(query.weight(EnableScoring::disabled_from_schema(schema))?),
            None => None,
        };
        let time_range = if self.filter.since.is_some() || self.filter.until.is_some() {
            let bound = |v: Option<u64>| match v {
                Some(v) => Bound::Included(Term::from_field_u64(self.fields.at, v)),
                None => Bound::Unbounded,
            };
            let query = RangeQuery::new(bound(self.filter.since), bound(self.filter.until));
            Some(query.weight(EnableScoring::disabled_from_schema(schema))?)
        } else {
            None
        };
        Ok(Box::new(FilteredWeight {
            inner,
            driver,
            time_range,
            driver_terms,
            filter: self.filter.clone(),
        }))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        self.inner.query_terms(visitor);
    }
}

struct FilteredWeight {
    inner: Box<dyn Weight>,
    /// The filter's postings (session, else kinds), when it has some.
    driver: Option<Box<dyn Weight>>,
    /// The time range as a fast-field range query, when the filter has one.
    time_range: Option<Box<dyn Weight>>,
    driver_terms: Vec<Term>,
    filter: Filter,
}

/// The filter of one segment, its fast fields read once.
struct SegmentFilter {
    session: Option<(StrColumn, u64)>,
    kinds: Option<(StrColumn, Vec<u64>)>,
    at: Option<(Column<u64>, u64, u64)>,
    position: Option<(Column<u64>, u64)>,
}

/// A range check on a column, `None` when every value of the segment is in it;
/// `Err(())` when none is.
fn range_check(
    column: Column<u64>,
    low: Option<u64>,
    high: Option<u64>,
) -> Result<Option<(Column<u64>, u64, u64)>, ()> {
    let low = low.unwrap_or(0);
    let high = high.unwrap_or(u64::MAX);
    if low > high || column.max_value() < low || column.min_value() > high {
        return Err(());
    }
    if column.min_value() >= low && column.max_value() <= high {
        return Ok(None);
    }
    Ok(Some((column, low, high)))
}

/// The ordinals of `names` in a string column's dictionary (names absent: none).
fn ordinals(column: &StrColumn, names: &[&str]) -> tantivy::Result<Vec<u64>> {
    let mut ords = Vec::new();
    for name in names {
        if let Some(ord) = column.dictionary().term_ord(name.as_bytes())? {
            ords.push(ord);
        }
    }
    Ok(ords)
}

impl SegmentFilter {
    /// `None` when no document of the segment can pass.
    fn open(filter: &Filter, reader: &SegmentReader) -> tantivy::Result<Option<SegmentFilter>> {
        let fast = reader.fast_fields();
        let session = match &filter.session {
            None => None,
            Some(id) => {
                let Some(column) = fast.str(SESSION)? else {
                    return Ok(None);
                };
                match ordinals(&column, &[id.as_str()])?.first() {
                    Some(&ord) => Some((column, ord)),
                    None => return Ok(None),
                }
            }
        };
        let kinds = if filter.kinds.is_empty() {
            None
        } else {
            let Some(column) = fast.str(KIND)? else {
                return Ok(None);
            };
            let names: Vec<&str> = filter.kinds.iter().map(String::as_str).collect();
            let ords = ordinals(&column, &names)?;
            if ords.is_empty() {
                return Ok(None);
            }
            // Every kind of the segment kept: no check.
            if ords.len() as u64 == column.dictionary().num_terms() as u64 {
                None
            } else {
                Some((column, ords))
            }
        };
        let at = if filter.since.is_some() || filter.until.is_some() {
            match range_check(fast.u64(AT)?, filter.since, filter.until) {
                Ok(check) => check,
                Err(()) => return Ok(None),
            }
        } else {
            None
        };
        let position = match filter.position_max {
            None => None,
            Some(max) => match range_check(fast.u64(POSITION)?, None, Some(max)) {
                Ok(check) => check.map(|(column, _, high)| (column, high)),
                Err(()) => return Ok(None),
            },
        };
        Ok(Some(SegmentFilter {
            session,
            kinds,
            at,
            position,
        }))
    }

    /// Whether every document of the segment passes.
    fn keeps_all(&self) -> bool {
        self.session.is_none()
            && self.kinds.is_none()
            && self.at.is_none()
            && self.position.is_none()
    }

    fn keeps(&self, doc: DocId) -> bool {
        if let Some((column, ord)) = &self.session
            && column.term_ords(doc).next() != Some(*ord)
        {
            return false;
        }
        if let Some((column, ords)) = &self.kinds
            && !column
                .term_ords(doc)
                .next()
                .is_some_and(|o| ords.contains(&o))
        {
            return false;
        }
        if let Some((column, low, high)) = &self.at
            && !column
                .first(doc)
                .is_some_and(|at| at >= *low && at <= *high)
        {
            return false;
        }
        if let Some((column, high)) = &self.position
            && column.first(doc).is_none_or(|p| p > *high)
        {
            return false;
        }
        true
    }
}

impl FilteredWeight {
    /// The filter's postings in this segment when they are few enough to walk.
    fn driver(
        &self,
        reader: &SegmentReader,
        check: &SegmentFilter,
    ) -> tantivy::Result<Option<Box<dyn Scorer>>> {
        let Some(driver) = &self.driver else {
            return self.time_driver(reader, check);
        };
        let mut kept: u64 = 0;
        for term in &self.driver_terms {
            kept += u64::from(reader.inverted_index(term.field())?.doc_freq(term)?);
        }
        if kept * DRIVE_WHEN_ONE_IN > u64::from(reader.num_docs()) {
            return self.time_driver(reader, check);
        }
        Ok(Some(driver.scorer(reader, 1.0)?))
    }

    /// The time range's scan of the `at` fast field when the range is narrow in this
    /// segment (times taken as spread evenly between its first and last).
    fn time_driver(
        &self,
        reader: &SegmentReader,
        check: &SegmentFilter,
    ) -> tantivy::Result<Option<Box<dyn Scorer>>> {
        let (Some(range), Some((column, low, high))) = (&self.time_range, &check.at) else {
            return Ok(None);
        };
        let span = column.max_value() - column.min_value();
        let low = (*low).max(column.min_value());
        let high = (*high).min(column.max_value());
        if span == 0 || (high.saturating_sub(low)) * DRIVE_WHEN_ONE_IN > span {
            return Ok(None);
        }
        Ok(Some(range.scorer(reader, 1.0)?))
    }
}

impl Weight for FilteredWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let Some(check) = SegmentFilter::open(&self.filter, reader)? else {
            return Ok(Box::new(EmptyScorer));
        };
        let inner = self.inner.scorer(reader, boost)?;
        if check.keeps_all() {
            return Ok(inner);
        }
        let mut scorer = FilteredScorer { inner, check };
        scorer.settle();
        Ok(Box::new(scorer))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let kept = SegmentFilter::open(&self.filter, reader)?.is_some_and(|c| c.keeps(doc));
        if !kept {
            return Err(tantivy::TantivyError::InvalidArgument(format!(
                "document {doc} is filtered out"
            )));
        }
        self.inner.explain(reader, doc)
    }

    fn for_each_pruning(
        &self,
        threshold: Score,
        reader: &SegmentReader,
        callback: &mut dyn FnMut(DocId, Score) -> Score,
    ) -> tantivy::Result<()> {
        let Some(check) = SegmentFilter::open(&self.filter, reader)? else {
            return Ok(());
        };
        if check.keeps_all() {
            return self.inner.for_each_pruning(threshold, reader, callback);
        }
        if let Some(mut driver) = self.driver(reader, &check)? {
            // Few documents kept: score those.
            let mut scorer = self.inner.scorer(reader, 1.0)?;
            let mut threshold = threshold;
            let mut doc = driver.doc();
            while doc != TERMINATED {
                let at = if scorer.doc() < doc {
                    scorer.seek(doc)
                } else {
                    scorer.doc()
                };
                if at == TERMINATED {
                    break;
                }
                if at > doc {
                    doc = driver.seek(at);
                    continue;
                }
                if check.keeps(doc) {
                    let score = scorer.score();
                    if score > threshold {
                        threshold = callback(doc, score);
                    }
                }
                doc = driver.advance();
            }
            return Ok(());
        }
        // Many kept: the ranked query's own pruning, each candidate checked.
        let mut current = threshold;
        self.inner
            .for_each_pruning(threshold, reader, &mut |doc, score| {
                if check.keeps(doc) {
                    current = callback(doc, score);
                }
                current
            })
    }
}

/// The ranked query's scorer, skipping what the filter does not keep.
struct FilteredScorer {
    inner: Box<dyn Scorer>,
    check: SegmentFilter,
}

impl FilteredScorer {
    /// Moves to the first kept document at or after the current one.
    fn settle(&mut self) -> DocId {
        let mut doc = self.inner.doc();
        while doc != TERMINATED && !self.check.keeps(doc) {
            doc = self.inner.advance();
        }
        doc
    }
}

impl DocSet for FilteredScorer {
    fn advance(&mut self) -> DocId {
        self.inner.advance();
        self.settle()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        self.inner.seek(target);
        self.settle()
    }

    fn doc(&self) -> DocId {
        self.inner.doc()
    }

    fn size_hint(&self) -> u32 {
        self.inner.size_hint()
    }

    fn cost(&self) -> u64 {
        self.inner.cost()
    }
}

impl Scorer for FilteredScorer {
    fn score(&mut self) -> Score {
        self.inner.score()
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::{register_analyzers, schema};
    use super::*;
    use tantivy::collector::TopDocs;
    use tantivy::query::{ConstScoreQuery, Occur};
    use tantivy::{Index, IndexWriter, TantivyDocument};

    /// The filters as the boolean clauses they were before (score 0), for comparison.
    fn as_clauses(fields: &Fields, filter: &Filter) -> Vec<(Occur, Box<dyn Query>)> {
        let zero = |q: Box<dyn Query>| -> (Occur, Box<dyn Query>) {
            (Occur::Must, Box::new(ConstScoreQuery::new(q, 0.0)))
        };
        let mut clauses = Vec::new();
        if let Some(session) = &filter.session {
            clauses.push(zero(Box::new(TermQuery::new(
                Term::from_field_text(fields.session, session),
                IndexRecordOption::Basic,
            ))));
        }
        if !filter.kinds.is_empty() {
            clauses.push(zero(Box::new(BooleanQuery::union(
                filter
                    .kinds
                    .iter()
                    .map(|k| {
                        Box::new(TermQuery::new(
                            Term::from_field_text(fields.kind, k),
                            IndexRecordOption::Basic,
                        )) as Box<dyn Query>
                    })
                    .collect(),
            ))));
        }
        let bound = |f: Field, v: Option<u64>| match v {
            Some(v) => std::ops::Bound::Included(Term::from_field_u64(f, v)),
            None => std::ops::Bound::Unbounded,
        };
        if filter.since.is_some() || filter.until.is_some() {
            clauses.push(zero(Box::new(RangeQuery::new(
                bound(fields.at, filter.since),
                bound(fields.at, filter.until),
            ))));
        }
        if filter.position_max.is_some() {
            clauses.push(zero(Box::new(RangeQuery::new(
                std::ops::Bound::Unbounded,
                bound(fields.position, filter.position_max),
            ))));
        }
        clauses
    }

    use tantivy::schema::Field;

    #[test]
    fn filtered_collection_keeps_what_the_boolean_filters_kept_in_the_same_order() {
        let (schema, fields) = schema();
        let index = Index::create_in_ram(schema);
        register_analyzers(&index);
        let mut writer: IndexWriter<TantivyDocument> =
            index.writer_with_num_threads(1, 15_000_000).unwrap();
        let words = ["cache", "latency", "build", "deploy", "error"];
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in 0..6000u64 {
            // Three segments, so each shortcut meets a segment it applies to.
            if n % 2000 == 0 && n > 0 {
                writer.commit().unwrap();
            }
            let mut text = String::new();
            for _ in 0..(3 + next() % 6) {
                text.push_str(words[(next() % words.len() as u64) as usize]);
                text.push(' ');
            }
            let mut doc = TantivyDocument::new();
            doc.add_text(fields.body, &text);
            doc.add_text(fields.pairs, &text);
            doc.add_text(
                fields.kind,
                ["thinking", "think", "qa"][(n % 37 % 3) as usize],
            );
            doc.add_text(fields.session, format!("s{}", n / 100));
            doc.add_u64(fields.seq, n % 100);
            doc.add_u64(fields.position, n + 1);
            doc.add_u64(fields.at, 1000 + n);
            writer.add_document(doc).unwrap();
        }
        writer.commit().unwrap();
        let searcher = index.reader().unwrap().searcher();
        let cases = [
            Filter {
                session: Some("s42".into()),
                ..Filter::default()
            },
            Filter {
                kinds: vec!["qa".into()],
                ..Filter::default()
            },
            Filter {
                kinds: vec!["thinking".into(), "think".into()],
                ..Filter::default()
            },
            Filter {
                since: Some(4000),
                ..Filter::default()
            },
            Filter {
                since: Some(3100),
                until: Some(3300),
                ..Filter::default()
            },
            Filter {
                since: Some(1500),
                until: Some(2500),
                position_max: Some(2200),
                kinds: vec!["think".into()],
                ..Filter::default()
            },
            Filter {
                since: Some(0),
                until: Some(u64::MAX),
                ..Filter::default()
            },
            Filter {
                session: Some("nobody".into()),
                ..Filter::default()
            },
        ];
        let ranked: Vec<Box<dyn Query>> = vec![
            Box::new(TermQuery::new(
                Term::from_field_text(fields.body, "cach"),
                IndexRecordOption::WithFreqs,
            )),
            Box::new(BooleanQuery::new(vec![
                (
                    Occur::Must,
                    Box::new(TermQuery::new(
                        Term::from_field_text(fields.body, "cach"),
                        IndexRecordOption::WithFreqs,
                    )) as Box<dyn Query>,
                ),
                (
                    Occur::Must,
                    Box::new(TermQuery::new(
                        Term::from_field_text(fields.body, "latenc"),
                        IndexRecordOption::WithFreqs,
                    )),
                ),
            ])),
        ];
        for query in &ranked {
            for filter in &cases {
                let mut before = vec![(Occur::Must, query.box_clone())];
                before.extend(as_clauses(&fields, filter));
                let before = BooleanQuery::new(before);
                let after = FilteredQuery::wrap(query.box_clone(), filter, fields);
                for limit in [1, 10, 100] {
                    let top = TopDocs::with_limit(limit).order_by_score();
                    let expected = searcher.search(&before, &top).unwrap();
                    let found = searcher.search(&*after, &top).unwrap();
                    assert_eq!(found, expected, "{filter:?}, limit {limit}");
                }
                let count = tantivy::collector::Count;
                assert_eq!(
                    searcher.search(&*after, &count).unwrap(),
                    searcher.search(&before, &count).unwrap(),
                    "{filter:?}"
                );
            }
        }
    }
}
