//! PostgreSQL's full-text search of its ledger: the same requests, filters and answers as
//! the Tantivy index of a redb ledger ([`crate::recall`]), through the database's own
//! `tsvector`, GIN index, `ts_rank_cd` and `ts_headline`.
//!
//! Owns: [`PgSearch`] over the tables of schema version 2 (made by the store's schema:
//! `ledger_search`, one row per event with text, and `ledger_search_state`, the position
//! it is indexed to, and since version 5 how many rows it holds), keeping those rows a
//! projection of the ledger (each search first applies the events after the state's
//! position, under the state row's lock: one server updates at a time, the others wait
//! and read), the query, and the document frequencies of hybrid fusion (each word's rows
//! counted in the GIN index up to [`DOCUMENT_FREQUENCY_CAP`], a common word's share of
//! rows read from the table's statistics). Must not: write a ledger table.
//!
//! What is indexed: `doc` = `to_tsvector('english', t) || to_tsvector('simple', t)` of the
//! event's texts folded by our analyser (lowercase, ASCII folding, CJK characters apart:
//! [`analyzer::folded`]), so English words stem and the `simple` half keeps every word as
//! written (stop words, words the stemmer mangles). A query is parsed once
//! ([`crate::recall::query`]); each word or phrase is `phraseto_tsquery('english', …)`,
//! or `simple` when English drops it (a stop word). Every-word matches come first, then
//! any-word matches (`ts_rank_cd` within each), like the index of a redb ledger.
//!
//! What differs from redb: `ts_rank_cd` weighs a rare word no more than a common one
//! (BM25's IDF), so within a tier the order may differ; snippets come from `ts_headline`
//! (words folded away by our analyser, such as `café` for `cafe`, are not marked).

use crate::event::format_time;
use crate::recall::query::{ParsedQuery, Unit};
use crate::recall::{
    CountedWord, Cursor, DocumentFrequencies, Documents, Heads, IndexState, Match, RecallError,
    SearchAnswer, SearchRequest, TextSearch, round_score,
};
use crate::recall::{analyzer, index};
use crate::store::postgres::database::{
    Database, blocking, query_error, session_key, session_of, to_i64,
};
use crate::store::{Ledger, StoreError};
use postgres::types::ToSql;
use std::collections::HashMap;

/// Rows counted per candidate of the typo retry (enough to tell a common word from a
/// rare one, without counting every row of a common word).
const TYPO_COUNT_CAP: usize = 1000;

/// Rows counted per word of a query for hybrid fusion's document frequencies. Exact
/// below it, where a rare word is told apart; above it a word is common, and a count
/// stays an index probe and at most this many rows (a word in every row stops within a
/// few pages). A word counted to the cap takes the share of rows the table's statistics
/// give it ([`PgSearch::common_word_rows`]), so on a ledger of 1M rows a word in every
/// one weighs about 0, as on redb, not as one in 1,000 rows (IDF 6.9 against 13.4 for a
/// word in one row); a word the statistics do not list counts as in this many.
pub(crate) const DOCUMENT_FREQUENCY_CAP: usize = 1000;

/// Rows one INSERT of the projection carries.
const INSERT_BATCH_ROWS: usize = 1000;

/// Options of `ts_headline`: one fragment of about 12–30 words, matches marked `**`.
const HEADLINE_OPTIONS: &str =
    "StartSel=**, StopSel=**, MinWords=12, MaxWords=30, MaxFragments=1, FragmentDelimiter=\" … \"";

/// A row of the projection, before it is written.
struct Row {
    position: i64,
    session: Vec<u8>,
    seq: i64,
    kind: String,
    event_type: String,
    at: i64,
    body: String,
    folded: String,
}

/// The full-text search of a PostgreSQL ledger, in its own database.
pub(crate) struct PgSearch {
    database: Database,
}

impl PgSearch {
    pub(crate) fn new(database: Database) -> PgSearch {
        PgSearch { database }
    }

    /// Runs `f` on a pooled connection; a lost connection is not pooled again.
    fn with_client<T>(
        &self,
        what: &'static str,
        f: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut pooled = self.database.client()?;
        match blocking(|| f(pooled.get())) {
            Ok(value) => Ok(value),
            Err(error) => {
                // Lost, or in an unknown state: either way not pooled again.
                pooled.discard();
                Err(query_error(what)(error))
            }
        }
    }

    /// The share of `ledger_search`'s rows holding each of `words` (folded words, as
    /// [`ledger_search_unit`] makes them lexemes), as the table's statistics have it:
    /// `ANALYZE` keeps the most common lexemes of `doc` with the share of rows holding
    /// each (`pg_stats.most_common_elems`, from a sample of the rows). A word missing
    /// (not among the most common, or the table not analysed yet) is left out: it is
    /// counted as in [`DOCUMENT_FREQUENCY_CAP`] rows. A word of several lexemes takes
    /// the rarest's share, when every one of them is listed.
    fn common_word_rows(&self, words: &[String]) -> Result<HashMap<String, f64>, StoreError> {
        let rows = self.with_client("reading the search index's statistics", |c| {
            c.query(
                "WITH common AS (
                   SELECT e.lexeme, e.share
                   FROM pg_stats s,
                        unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs)
                          AS e(lexeme, share)
                   WHERE s.schemaname = current_schema() AND s.tablename = 'ledger_search'
                     AND s.attname = 'doc' AND e.lexeme IS NOT NULL)
                 SELECT w.word, min(common.share)::float8
                 FROM unnest($1::text[]) AS w(word)
                 CROSS JOIN LATERAL unnest(tsvector_to_array(
                   CASE WHEN numnode(phraseto_tsquery('english', w.word)) > 0
                        THEN to_tsvector('english', w.word)
                        ELSE to_tsvector('simple', w.word) END)) AS l(lexeme)
                 LEFT JOIN common ON common.lexeme = l.lexeme
                 GROUP BY w.word
                 HAVING count(common.share) = count(*)",
                &[&words],
            )
        })?;
        Ok(rows
            .iter()
            .map(|row| (row.get::<_, String>(0), row.get::<_, f64>(1)))
            .collect())
    }

    fn indexed_position(&self) -> Result<u64, StoreError> {
        self.with_client("reading the search index's position", |c| {
            c.query_one("SELECT position FROM ledger_search_state WHERE id = 1", &[])
                .map(|row| row.get::<_, i64>(0).max(0) as u64)
        })
    }

    /// Applies the ledger's events after the indexed position (all of them when
    /// `from_scratch`), in one transaction holding the state row's lock.
    fn apply(&self, ledger: &Ledger, from_scratch: bool) -> Result<u64, RecallError> {
        let mut pooled = self.database.client()?;
        let client = pooled.get();
        let result = blocking(|| -> Result<u64, RecallError> {
            let mut txn = client
                .transaction()
                .map_err(query_error("beginning a search index update"))?;
            let state = txn
                .query_one(
                    "SELECT position, documents FROM ledger_search_state WHERE id = 1 FOR UPDATE",
                    &[],
                )
                .map_err(query_error("locking the search index"))?;
            let mut indexed = state.get::<_, i64>(0).max(0) as u64;
            let mut rows_held = state.get::<_, i64>(1).max(0) as u64;
            if from_scratch {
                txn.batch_execute("DELETE FROM ledger_search")
                    .map_err(query_error("emptying the search index"))?;
                indexed = 0;
                rows_held = 0;
            }
            let rows_before = rows_held;
            let last = ledger.last_position()?;
            if indexed >= last && !from_scratch {
                txn.commit()
                    .map_err(query_error("ending a search index update"))?;
                return Ok(indexed);
            }
            let mut documents = Documents::new(ledger);
            let mut rows: Vec<Row> = Vec::new();
            let mut failed: Option<RecallError> = None;
            let mut applied = indexed;
            let max_unreadable = crate::store::MAX_UNREADABLE_EVENTS;
            ledger.for_each_readable_event_from_position(
                indexed + 1,
                max_unreadable,
                |positioned| {
                    if positioned.position > last {
                        return false;
                    }
                    let event = &positioned.event;
                    match documents.searchable(event) {
                        Ok(Some(searchable)) => rows.push(Row {
                            position: to_i64(positioned.position),
                            session: session_key(event.session).to_vec(),
                            seq: to_i64(event.seq),
                            kind: searchable.kind.as_str().to_string(),
                            event_type: event.payload.type_name().to_string(),
                            at: to_i64(event.at),
                            folded: analyzer::folded(&searchable.text),
                            body: searchable.text,
                        }),
                        Ok(None) => {}
                        Err(error) => {
                            failed = Some(error.into());
                            return false;
                        }
                    }
                    applied = positioned.position;
                    if rows.len() >= INSERT_BATCH_ROWS {
                        match insert(&mut txn, &mut rows) {
                            Ok(inserted) => rows_held += inserted,
                            Err(error) => {
                                failed = Some(error.into());
                                return false;
                            }
                        }
                    }
                    true
                },
            )?;
            if let Some(error) = failed {
                return Err(error);
            }
            rows_held += insert(&mut txn, &mut rows)?;
            txn.execute(
                "UPDATE ledger_search_state SET position = $1, documents = $2 WHERE id = 1",
                &[&to_i64(applied), &to_i64(rows_held)],
            )
            .map_err(query_error("recording the search index's position"))?;
            txn.commit()
                .map_err(query_error("committing a search index update"))?;
            // The statistics that weigh common words ([`PgSearch::common_word_rows`]) are
            // taken again after a rebuild, and when an update at least doubled the rows
            // (a ledger indexed for the first time, an import); autovacuum keeps them
            // after that.
            let added = rows_held.saturating_sub(rows_before);
            if from_scratch || (added >= DOCUMENT_FREQUENCY_CAP as u64 && added >= rows_before) {
                client
                    .batch_execute("ANALYZE ledger_search")
                    .map_err(query_error("analysing the search index"))?;
            }
            Ok(applied)
        });
        if result.is_err() {
            pooled.discard();
        }
        result
    }
}

/// The `simple` tsquery text of a `word*` prefix (`words` already folded, joined by
/// `<->` when several): its last word matches every word that starts with it.
fn prefix_query(words: &str) -> String {
    format!("{words}:*")
}

/// Writes `rows` (and empties it); returns how many were new.
fn insert(txn: &mut postgres::Transaction<'_>, rows: &mut Vec<Row>) -> Result<u64, StoreError> {
    if rows.is_empty() {
        return Ok(0);
    }
    let positions: Vec<i64> = rows.iter().map(|r| r.position).collect();
    let sessions: Vec<&[u8]> = rows.iter().map(|r| r.session.as_slice()).collect();
    let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
    let kinds: Vec<&str> = rows.iter().map(|r| r.kind.as_str()).collect();
    let types: Vec<&str> = rows.iter().map(|r| r.event_type.as_str()).collect();
    let ats: Vec<i64> = rows.iter().map(|r| r.at).collect();
    let bodies: Vec<&str> = rows.iter().map(|r| r.body.as_str()).collect();
    let folded: Vec<&str> = rows.iter().map(|r| r.folded.as_str()).collect();
    let inserted = txn
        .execute(
            "INSERT INTO ledger_search (position, session, seq, kind, event_type, at, body, doc)
         SELECT p, s, q, k, t, a, b, to_tsvector('english', f) || to_tsvector('simple', f)
         FROM unnest($1::bigint[], $2::bytea[], $3::bigint[], $4::text[], $5::text[],
                     $6::bigint[], $7::text[], $8::text[]) AS r(p, s, q, k, t, a, b, f)
         ON CONFLICT (position) DO NOTHING",
            &[
                &positions, &sessions, &seqs, &kinds, &types, &ats, &bodies, &folded,
            ],
        )
        .map_err(query_error("writing the search index"))?;
    rows.clear();
    Ok(inserted)
}

/// Parameters of one query, numbered as they are pushed.
#[derive(Default)]
struct Params {
    values: Vec<Box<dyn ToSql + Sync>>,
}

impl Params {
    /// `$n` of `value`.
    fn push(&mut self, value: impl ToSql + Sync + 'static) -> String {
        self.values.push(Box::new(value));
        format!("${}", self.values.len())
    }

    fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.values
            .iter()
            .map(|v| &**v as &(dyn ToSql + Sync))
            .collect()
    }
}

impl TextSearch for PgSearch {
    fn search(
        &self,
        ledger: &Ledger,
        request: &SearchRequest,
        parsed: &ParsedQuery,
    ) -> Result<SearchAnswer, RecallError> {
        let indexed = self.apply(ledger, false)?;
        let mut params = Params::default();
        let unit = |unit: &Unit, params: &mut Params| -> Option<String> {
            let folded = analyzer::folded(unit.text());
            if folded.is_empty() {
                return None;
            }
            Some(match unit {
                // `word*`: the words before the last one in this order, then a word that
                // starts with the last one, in the `simple` half (words as written).
                Unit::Prefix(_) => {
                    let words: Vec<&str> = folded.split(' ').collect();
                    let query = prefix_query(&words.join(" <-> "));
                    format!("to_tsquery('simple', {})", params.push(query))
                }
                Unit::Word(_) | Unit::Phrase(_) => {
                    format!("ledger_search_unit({})", params.push(folded))
                }
            })
        };
        let wanted: Vec<String> = parsed
            .wanted
            .iter()
            .filter_map(|u| unit(u, &mut params))
            .collect();
        if wanted.is_empty() {
            return Ok(SearchAnswer::default());
        }
        let excluded: Vec<String> = parsed
            .excluded
            .iter()
            .filter_map(|u| unit(u, &mut params))
            .map(|q| format!(" && !!{q}"))
            .collect();
        let excluded = excluded.concat();
        let every = format!("({}){excluded}", wanted.join(" && "));
        let any = format!("({}){excluded}", wanted.join(" || "));
        let positive = format!("({})", wanted.join(" || "));
        let (offset, bound) = match request.cursor {
            Some(cursor) => (cursor.offset, cursor.bound),
            None => (0, indexed),
        };
        let mut filters = format!(" AND position <= {}", params.push(to_i64(bound)));
        if let Some(session) = request.session {
            filters.push_str(&format!(
                " AND session = {}",
                params.push(session_key(session).to_vec())
            ));
        }
        if !request.kinds.is_empty() {
            let kinds: Vec<String> = request
                .kinds
                .iter()
                .map(|k| k.as_str().to_string())
                .collect();
            filters.push_str(&format!(" AND kind = ANY({}::text[])", params.push(kinds)));
        }
        if let Some(since) = request.since {
            filters.push_str(&format!(" AND at >= {}", params.push(to_i64(since))));
        }
        if let Some(until) = request.until {
            filters.push_str(&format!(" AND at <= {}", params.push(to_i64(until))));
        }
        let want = offset + request.limit + 1;
        let sql = format!(
            "WITH q AS (SELECT {every} AS every, {any} AS anyq, {positive} AS hl)
             SELECT p.session, p.seq, p.kind, p.event_type, p.at, p.score,
                    ts_headline('english', p.body, q.hl, '{HEADLINE_OPTIONS}')
             FROM (
                 SELECT position, session, seq, kind, event_type, at, body,
                        doc @@ q.every AS all_words, ts_rank_cd(doc, q.anyq) AS score
                 FROM ledger_search, q
                 WHERE doc @@ q.anyq{filters}
                 ORDER BY all_words DESC, score DESC, position DESC
                 LIMIT {want}
             ) p, q
             ORDER BY p.all_words DESC, p.score DESC, p.position DESC"
        );
        let rows = self.with_client("searching", |c| c.query(&sql, &params.refs()))?;
        let next_cursor = (rows.len() > offset + request.limit).then(|| Cursor {
            offset: offset + request.limit,
            bound,
        });
        let mut heads = Heads::default();
        let mut matches = Vec::new();
        for row in rows.iter().skip(offset).take(request.limit) {
            let session = session_of(row.get::<_, &[u8]>(0))?;
            let Some((title, _)) = heads.title_and_kind(ledger, session)? else {
                continue;
            };
            let score: f32 = row.get(5);
            matches.push(Match {
                session_id: session.to_string(),
                seq: row.get::<_, i64>(1).max(0) as u64,
                kind: kind_name(row.get(2), ledger.families()),
                event_type: event_type_name(row.get(3), ledger.families()),
                at: format_time(row.get::<_, i64>(4).max(0) as u64),
                score: round_score(score as f64),
                title,
                snippet: crate::recall::join_adjacent_marks(row.get(6)),
            });
        }
        Ok(SearchAnswer {
            matches,
            next_cursor,
            // Built from the search table's rows: `keep_sound` reads each event.
            checked: false,
        })
    }

    fn reindex(&self, ledger: &Ledger) -> Result<u64, RecallError> {
        self.apply(ledger, true)
    }

    /// Each word counted as its one-word query finds it (`ledger_search_unit`, in the
    /// GIN index; a prefix as `word*` finds it, `to_tsquery('simple', 'word:*')`), up to
    /// [`DOCUMENT_FREQUENCY_CAP`] rows, one subquery per word in one statement (each
    /// planned for its own word: a common word's count stops at the cap within a few
    /// pages, a rare one's is an index probe); the number of rows is the state's
    /// `documents`. A word counted to the cap is then looked up in the table's statistics
    /// ([`PgSearch::common_word_rows`]).
    fn document_frequencies(
        &self,
        _ledger: &Ledger,
        words: &[CountedWord],
    ) -> Result<DocumentFrequencies, RecallError> {
        let mut params = Params::default();
        let counts: Vec<String> = words
            .iter()
            .map(|word| {
                let query = match word {
                    CountedWord::Word(word) => {
                        format!("ledger_search_unit({})", params.push(word.clone()))
                    }
                    CountedWord::Prefix(prefix) => format!(
                        "to_tsquery('simple', {})",
                        params.push(prefix_query(prefix))
                    ),
                };
                format!(
                    "(SELECT count(*) FROM (SELECT 1 FROM ledger_search
                      WHERE doc @@ {query} LIMIT {DOCUMENT_FREQUENCY_CAP}) s)"
                )
            })
            .collect();
        let mut columns = vec!["documents".to_string()];
        columns.extend(counts);
        let sql = format!(
            "SELECT {} FROM ledger_search_state WHERE id = 1",
            columns.join(", ")
        );
        let row = self.with_client("counting the documents that hold the query's words", |c| {
            c.query_one(&sql, &params.refs())
        })?;
        let documents = row.get::<_, i64>(0).max(0) as u64;
        let mut holding: Vec<u64> = (1..=words.len())
            .map(|i| row.get::<_, i64>(i).max(0) as u64)
            .collect();
        let common: Vec<String> = words
            .iter()
            .zip(&holding)
            .filter(|(word, n)| {
                **n >= DOCUMENT_FREQUENCY_CAP as u64 && matches!(word, CountedWord::Word(_))
            })
            .map(|(word, _)| word.text().to_string())
            .collect();
        if !common.is_empty() {
            let share = self.common_word_rows(&common)?;
            for (word, n) in words.iter().zip(holding.iter_mut()) {
                if let Some(share) = share.get(word.text()) {
                    *n = (*n).max((share * documents as f64).round() as u64);
                }
            }
        }
        Ok(DocumentFrequencies { documents, holding })
    }

    /// The same candidates as the index of a redb ledger (every word one edit away from
    /// the folded word), each looked up in the `simple` half of `doc` (words as written)
    /// in one statement: the one in most rows (counted up to [`TYPO_COUNT_CAP`]) wins.
    fn correction(&self, ledger: &Ledger, word: &str) -> Result<Option<String>, RecallError> {
        let folded = analyzer::folded(word);
        if folded.contains(' ') || folded.chars().count() < index::MIN_TYPO_CHARS {
            return Ok(None);
        }
        self.apply(ledger, false)?;
        let candidates = index::one_edit_away(&folded);
        let sql = format!(
            "SELECT c, (SELECT count(*) FROM (SELECT 1 FROM ledger_search
                        WHERE doc @@ to_tsquery('simple', c) LIMIT {TYPO_COUNT_CAP}) s) AS n
             FROM unnest($1::text[]) AS c
             WHERE NOT EXISTS (SELECT 1 FROM ledger_search
                               WHERE doc @@ to_tsquery('simple', $2)
                                  OR doc @@ plainto_tsquery('english', $2))
             ORDER BY n DESC, c
             LIMIT 1"
        );
        let rows = self.with_client("looking for a word one edit away", |c| {
            c.query(&sql, &[&candidates, &folded])
        })?;
        Ok(rows
            .first()
            .filter(|row| row.get::<_, i64>(1) > 0)
            .map(|row| row.get::<_, String>(0)))
    }

    fn state(&self, ledger: &Ledger) -> Result<IndexState, RecallError> {
        let position = self.indexed_position()?;
        Ok(IndexState::Indexed {
            position,
            last: ledger.last_position()?,
        })
    }
}

/// The kind of this name among `families` (a `&'static str` for the answer).
fn kind_name(name: &str, families: &crate::event::Families) -> &'static str {
    families.kind_named(name).map_or("unknown", |k| k.as_str())
}

/// The event type of this name among `families`.
fn event_type_name(name: &str, families: &crate::event::Families) -> &'static str {
    const CORE: [&str; 2] = [crate::event::SESSION_STARTED, crate::event::SESSION_CLOSED];
    if let Some(core) = CORE.iter().find(|t| **t == name) {
        return core;
    }
    families
        .codec_for(name)
        .and_then(|codec| codec.types().iter().find(|t| **t == name).copied())
        .unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{NewEvent, Payload, SessionId, SessionKind};
    use crate::projection::fixtures;
    use crate::store::postgres::testdb::TestDb;

    /// A thinking session of one thought.
    fn session(ledger: &Ledger, text: &str) {
        let events = vec![
            NewEvent::new(Payload::SessionStarted {
                kind: SessionKind::THINKING,
                title: text.into(),
                aliases: Vec::new(),
            }),
            NewEvent::new(fixtures::recorded(fixtures::seq_thought(text, 1, 1))),
        ];
        ledger
            .write_blocking(move |txn| txn.append(SessionId::generate(), 0, events))
            .expect("commit")
            .expect("append");
    }

    fn rows(db: &TestDb) -> u64 {
        let count: i64 = db
            .client()
            .query_one("SELECT count(*) FROM ledger_search", &[])
            .unwrap()
            .get(0);
        count as u64
    }

    #[test]
    fn postgres_counts_its_rows_and_the_rows_holding_each_word() {
        let db = TestDb::new();
        let ledger = Ledger::open_postgres(&db.url, crate::tools::families()).unwrap();
        session(&ledger, "Booked the ferry to Zanzibar");
        for n in 0..4 {
            session(&ledger, &format!("Improved the speed of build {n}"));
        }
        let search = PgSearch::new(ledger.database().unwrap());
        search.apply(&ledger, false).unwrap();
        let mut words: Vec<CountedWord> = ["zanzibar", "speed", "nowhere", "the"]
            .map(|w| CountedWord::Word(w.into()))
            .to_vec();
        words.extend(["zanz", "spe", "nowh"].map(|w| CountedWord::Prefix(w.into())));
        let counted = search.document_frequencies(&ledger, &words).unwrap();
        assert_eq!(counted.holding, vec![1, 4, 0, 5, 1, 4, 0]);
        assert_eq!(counted.documents, rows(&db));
        assert!(counted.documents >= 5);

        // Kept as events are applied, and by a rebuild.
        session(&ledger, "More speed");
        search.apply(&ledger, false).unwrap();
        let counted = search.document_frequencies(&ledger, &words).unwrap();
        assert_eq!(counted.holding[1], 5);
        assert_eq!(counted.documents, rows(&db));
        search.reindex(&ledger).unwrap();
        let rebuilt = search.document_frequencies(&ledger, &words).unwrap();
        assert_eq!(rebuilt, counted);

        // A database of schema version 4 counts its rows when it is migrated.
        drop(search);
        drop(ledger);
        db.client()
            .batch_execute(
                "ALTER TABLE ledger_search_state DROP COLUMN documents;
                 UPDATE ledger_meta SET value = 4 WHERE key = 'schema_version'",
            )
            .unwrap();
        let ledger = Ledger::open_postgres(&db.url, crate::tools::families()).unwrap();
        let search = PgSearch::new(ledger.database().unwrap());
        assert_eq!(
            search.document_frequencies(&ledger, &words).unwrap(),
            counted
        );
    }

    #[test]
    fn postgres_weighs_a_word_above_the_cap_by_the_tables_statistics() {
        let db = TestDb::new();
        let ledger = Ledger::open_postgres(&db.url, crate::tools::families()).unwrap();
        let search = PgSearch::new(ledger.database().unwrap());
        search.apply(&ledger, false).unwrap();
        // 4,000 rows: "everywhere" in each, "halfway" in every second one, "seldom" in
        // one; written straight into the projection (the counts read nothing else).
        const ROWS: i64 = 4000;
        db.client()
            .batch_execute(&format!(
                "INSERT INTO ledger_search (position, session, seq, kind, event_type, at, body, doc)
                 SELECT g, '\\x00'::bytea, g, 'thinking', 'thought', 0, t,
                        to_tsvector('english', t) || to_tsvector('simple', t)
                 FROM (SELECT g, 'everywhere ' || CASE WHEN g % 2 = 0 THEN 'halfway' ELSE 'odd' END
                                 || CASE WHEN g = 7 THEN ' seldom' ELSE '' END AS t
                       FROM generate_series(1, {ROWS}) g) r;
                 UPDATE ledger_search_state SET documents = {ROWS};"
            ))
            .unwrap();
        let words = ["everywhere", "halfway", "seldom"].map(|w| CountedWord::Word(w.into()));
        // Not analysed yet: the two common words count as in the cap's rows.
        let unanalysed = search.document_frequencies(&ledger, &words).unwrap();
        let cap = DOCUMENT_FREQUENCY_CAP as u64;
        assert_eq!(unanalysed.holding, vec![cap, cap, 1]);
        db.client().batch_execute("ANALYZE ledger_search").unwrap();
        let counted = search.document_frequencies(&ledger, &words).unwrap();
        assert_eq!(counted.documents, ROWS as u64);
        let [everywhere, halfway, seldom] = counted.holding[..] else {
            panic!("{counted:?}")
        };
        assert!(everywhere > 3900, "{counted:?}");
        assert!((1800..=2200).contains(&halfway), "{counted:?}");
        assert_eq!(seldom, 1);
        // A word in every row is no evidence, as on redb; the rare one is all of it.
        let everywhere_idf = crate::recall::fusion::idf(ROWS as u64, everywhere);
        assert!(everywhere_idf < 0.05, "{everywhere_idf}");
    }
}
