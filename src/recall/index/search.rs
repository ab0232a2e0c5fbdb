//! Searching the index: a parsed query turned into Tantivy queries, the two tiers
//! (every wanted unit, then any), a page of hits read back from the ledger, snippets.
//!
//! Owns: what each unit of the query language is on the index ([`unit_query`]: a word is
//! its term, ranked by BM25; a phrase is its pairs of adjacent words in `pairs`, ranked
//! as `body`'s phrase and cut off by the top-k collection ([`super::phrase`]), so a
//! phrase costs what its rarest pair costs, not what every match costs; `word*` is the index's most frequent terms that start with it,
//! ranked as words), the typo retry's candidates ([`correction`]: words one edit away
//! that the index holds), the document frequencies hybrid fusion weighs words by
//! ([`document_frequencies`]), and snippets. Filters are applied inside the collection
//! ([`super::filter`]). Must not: change a score of a word query (the relevance set and
//! its snapshots hold them).

use super::super::analyzer;
use super::super::query::{ParsedQuery, Unit};
use super::super::{
    CountedWord, Cursor, DocumentFrequencies, Heads, RecallError, SearchAnswer, SearchRequest,
};
use super::filter::{Filter, FilteredQuery};
use super::phrase::PairPhraseQuery;
use super::schema::{Fields, POSITION, SEQ, SESSION};
use super::texts;
use super::{MAX_CACHED_HEADS, Open};
use crate::event::{Event, SessionId};
use crate::store::{Ledger, StoreError};
use std::collections::{HashMap, HashSet};
use tantivy::collector::TopDocs;
use tantivy::columnar::{Column, StrColumn};
use tantivy::query::{BooleanQuery, EmptyQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::snippet::SnippetGenerator;
use tantivy::{DocAddress, Searcher, Term};

/// Longest snippet, in characters.
pub(crate) const SNIPPET_MAX_CHARS: usize = 160;
/// Most index terms one `word*` stands for: the most frequent of those that start with it.
pub(crate) const MAX_PREFIX_TERMS: usize = 64;
/// Most terms of one segment's dictionary read for one `word*` (a one-letter prefix
/// would otherwise walk most of it).
const MAX_PREFIX_SCAN: usize = 20_000;
/// Fewest characters a word needs to be corrected when nothing matched (shorter words
/// have too many neighbours one edit away).
pub(crate) const MIN_TYPO_CHARS: usize = 5;

/// A term query on `body` ranked as a word (BM25).
fn word(fields: &Fields, term: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(fields.body, term),
        IndexRecordOption::WithFreqs,
    ))
}

/// Up to [`MAX_PREFIX_TERMS`] terms of `field` that start with `prefix`, the most
/// frequent first, each with the documents holding it.
fn prefix_terms(
    searcher: &Searcher,
    field: Field,
    prefix: &str,
) -> Result<Vec<(String, u64)>, RecallError> {
    let mut frequency: HashMap<Vec<u8>, u64> = HashMap::new();
    for segment in searcher.segment_readers() {
        let inverted = segment.inverted_index(field)?;
        let mut stream = inverted
            .terms()
            .range()
            .ge(prefix.as_bytes())
            .into_stream()
            .map_err(|e| RecallError::Index(e.into()))?;
        let mut read = 0;
        while stream.advance() && read < MAX_PREFIX_SCAN {
            let key = stream.key();
            if !key.starts_with(prefix.as_bytes()) {
                break;
            }
            *frequency.entry(key.to_vec()).or_default() += u64::from(stream.value().doc_freq);
            read += 1;
        }
    }
    let mut terms: Vec<(Vec<u8>, u64)> = frequency.into_iter().collect();
    terms.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(terms
        .into_iter()
        .take(MAX_PREFIX_TERMS)
        .filter_map(|(t, n)| Some((String::from_utf8(t).ok()?, n)))
        .collect())
}

/// A unit's query, `None` when it analyses to nothing.
pub(super) fn unit_query(
    searcher: &Searcher,
    fields: &Fields,
    unit: &Unit,
) -> Result<Option<Box<dyn Query>>, RecallError> {
    if let Unit::Prefix(text) = unit {
        // Folded, not stemmed: a stem is a prefix of its words ("uncertain" is indexed
        // as itself, "caching" as "cach"), so the folded start of a word starts its stem.
        let folded = analyzer::folded(text);
        let mut words: Vec<&str> = folded.split(' ').filter(|w| !w.is_empty()).collect();
        let Some(last) = words.pop() else {
            return Ok(None);
        };
        let expanded: Vec<Box<dyn Query>> = prefix_terms(searcher, fields.body, last)?
            .iter()
            .map(|(t, _)| word(fields, t))
            .collect();
        let prefix: Box<dyn Query> = match expanded.len() {
            0 => Box::new(EmptyQuery),
            1 => expanded.into_iter().next().expect("one"),
            _ => Box::new(BooleanQuery::union(expanded)),
        };
        if words.is_empty() {
            return Ok(Some(prefix));
        }
        // `e-mai*`: the words before the last one, then the prefix.
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, prefix)];
        for w in words {
            for term in analyzer::terms(w) {
                clauses.push((Occur::Must, word(fields, &term)));
            }
        }
        return Ok(Some(Box::new(BooleanQuery::new(clauses))));
    }
    let terms = analyzer::terms(unit.text());
    Ok(match terms.len() {
        0 => None,
        1 => Some(word(fields, &terms[0])),
        _ => Some(PairPhraseQuery::for_terms(fields, &terms)),
    })
}

/// The word the index holds one edit away from `typed` (deleted, inserted, replaced or
/// two neighbours swapped, as folded), the one in most documents; `None` when `typed` is
/// shorter than [`MIN_TYPO_CHARS`], is itself in the index, or has no such neighbour.
pub(super) fn correction(
    searcher: &Searcher,
    fields: &Fields,
    typed: &str,
) -> Result<Option<String>, RecallError> {
    let folded = analyzer::folded(typed);
    if folded.contains(' ') || folded.chars().count() < MIN_TYPO_CHARS {
        return Ok(None);
    }
    // One analyser for every candidate (building one per word costs more than stemming).
    let mut words = analyzer::analyzer();
    let mut stem = |word: &str| -> Option<String> {
        let mut stream = words.token_stream(word);
        let first = stream.advance().then(|| stream.token().text.clone())?;
        (!stream.advance()).then_some(first)
    };
    let frequency = |stem: &str| -> Result<u64, RecallError> {
        Ok(searcher.doc_freq(&Term::from_field_text(fields.body, stem))?)
    };
    if let Some(own) = stem(&folded)
        && frequency(&own)? > 0
    {
        return Ok(None);
    }
    let mut best: Option<(u64, String)> = None;
    let mut seen_stems: HashMap<String, u64> = HashMap::new();
    for candidate in one_edit_away(&folded) {
        let Some(stem) = stem(&candidate) else {
            continue;
        };
        let found = match seen_stems.get(&stem) {
            Some(&found) => found,
            None => {
                let found = frequency(&stem)?;
                seen_stems.insert(stem, found);
                found
            }
        };
        if found > 0
            && best
                .as_ref()
                .is_none_or(|(n, w)| found > *n || (found == *n && candidate < *w))
        {
            best = Some((found, candidate));
        }
    }
    Ok(best.map(|(_, word)| word))
}

/// How many documents hold each of `words` (a folded word's first term in `body`, as a
/// one-word query finds it; 0 for a word that analyses to nothing; a prefix's terms as
/// `word*` finds them, their counts summed up to every document: words of one prefix
/// seldom share a document, and a count too high only weighs the prefix less), and how
/// many the searcher holds.
pub(super) fn document_frequencies(
    searcher: &Searcher,
    fields: &Fields,
    words: &[CountedWord],
) -> Result<DocumentFrequencies, RecallError> {
    let documents = searcher.num_docs();
    let mut holding = Vec::with_capacity(words.len());
    for word in words {
        holding.push(match word {
            CountedWord::Word(word) => match analyzer::terms(word).first() {
                Some(term) => searcher.doc_freq(&Term::from_field_text(fields.body, term))?,
                None => 0,
            },
            CountedWord::Prefix(prefix) => prefix_terms(searcher, fields.body, prefix)?
                .iter()
                .map(|(_, n)| n)
                .sum::<u64>()
                .min(documents),
        });
    }
    Ok(DocumentFrequencies { documents, holding })
}

/// Every string one edit away from `word`: a character deleted, two neighbours swapped,
/// one replaced or inserted (letters a–z, digits, and the word's own characters).
pub(crate) fn one_edit_away(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    let mut alphabet: Vec<char> = ('a'..='z').chain('0'..='9').collect();
    for c in &chars {
        if !alphabet.contains(c) {
            alphabet.push(*c);
        }
    }
    let text = |v: &[char]| v.iter().collect::<String>();
    let mut out = Vec::new();
    for at in 0..chars.len() {
        let mut v = chars.clone();
        v.remove(at);
        out.push(text(&v));
        if at + 1 < chars.len() {
            let mut v = chars.clone();
            v.swap(at, at + 1);
            out.push(text(&v));
        }
        for &c in &alphabet {
            if c != chars[at] {
                let mut v = chars.clone();
                v[at] = c;
                out.push(text(&v));
            }
        }
    }
    for at in 0..=chars.len() {
        for &c in &alphabet {
            let mut v = chars.clone();
            v.insert(at, c);
            out.push(text(&v));
        }
    }
    out.retain(|w| w != word);
    out.sort();
    out.dedup();
    out
}

/// The request's filters.
fn filter_of(request: &SearchRequest, bound: Option<u64>) -> Filter {
    Filter {
        session: request.session.map(|s| s.to_string()),
        kinds: request
            .kinds
            .iter()
            .map(|k| k.as_str().to_string())
            .collect(),
        since: request.since,
        until: request.until,
        position_max: bound,
    }
}

fn clone_all(queries: &[Box<dyn Query>]) -> Vec<Box<dyn Query>> {
    queries.iter().map(|q| q.box_clone()).collect()
}

/// The highest position the searcher holds (once per generation of the searcher).
fn max_position(open: &Open, searcher: &tantivy::Searcher) -> Result<u64, RecallError> {
    let generation = searcher.generation().generation_id();
    let mut cached = open.max_position.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((at, max)) = *cached
        && at == generation
    {
        return Ok(max);
    }
    let mut max = 0;
    for segment in searcher.segment_readers() {
        if segment.num_docs() == 0 {
            continue;
        }
        let column = segment.fast_fields().u64(POSITION)?;
        max = max.max(column.max_value());
    }
    *cached = Some((generation, max));
    Ok(max)
}

pub(super) fn run_search(
    open: &Open,
    ledger: &Ledger,
    request: &SearchRequest,
    parsed: &ParsedQuery,
) -> Result<SearchAnswer, RecallError> {
    let fields = &open.fields;
    let searcher = open.reader.searcher();
    let mut wanted: Vec<Box<dyn Query>> = Vec::new();
    for unit in &parsed.wanted {
        wanted.extend(unit_query(&searcher, fields, unit)?);
    }
    if wanted.is_empty() {
        return Ok(SearchAnswer::default());
    }
    let mut excluded: Vec<Box<dyn Query>> = Vec::new();
    for unit in &parsed.excluded {
        excluded.extend(unit_query(&searcher, fields, unit)?);
    }
    let (offset, bound) = match request.cursor {
        Some(cursor) => (cursor.offset, cursor.bound),
        None => (0, max_position(open, &searcher)?),
    };
    let filter = filter_of(request, request.cursor.map(|c| c.bound));
    let exclusions = || {
        excluded
            .iter()
            .map(|q| (Occur::MustNot, q.box_clone()))
            .collect::<Vec<_>>()
    };
    let want = offset + request.limit + 1;
    // Tier 1: every wanted unit.
    let mut every: Vec<(Occur, Box<dyn Query>)> = clone_all(&wanted)
        .into_iter()
        .map(|q| (Occur::Must, q))
        .collect();
    every.extend(exclusions());
    let every: Box<dyn Query> = if every.len() == 1 {
        every.pop().expect("one").1
    } else {
        Box::new(BooleanQuery::new(every))
    };
    let every = FilteredQuery::wrap(every, &filter, *fields);
    let mut hits = searcher.search(&*every, &TopDocs::with_limit(want).order_by_score())?;
    // Tier 2: any wanted unit, after every tier-1 hit.
    if hits.len() < want && wanted.len() > 1 {
        let union: Box<dyn Query> = Box::new(BooleanQuery::union(clone_all(&wanted)));
        // The union alone when nothing is excluded: its own collection prunes (block-max
        // WAND over its words); inside another boolean query every match is scored.
        let any = if excluded.is_empty() {
            union
        } else {
            let mut any: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, union)];
            any.extend(exclusions());
            Box::new(BooleanQuery::new(any))
        };
        let any = FilteredQuery::wrap(any, &filter, *fields);
        let seen: HashSet<DocAddress> = hits.iter().map(|(_, doc)| *doc).collect();
        let more = searcher.search(&*any, &TopDocs::with_limit(want).order_by_score())?;
        hits.extend(more.into_iter().filter(|(_, doc)| !seen.contains(doc)));
        hits.truncate(want);
    }
    let next_cursor = (hits.len() > offset + request.limit).then(|| Cursor {
        offset: offset + request.limit,
        bound,
    });
    let page: Vec<(f32, DocAddress)> = hits.into_iter().skip(offset).take(request.limit).collect();
    let mut snippets = SnippetGenerator::create(
        &searcher,
        &BooleanQuery::union(clone_all(&wanted)),
        fields.body,
    )?;
    snippets.set_max_num_chars(SNIPPET_MAX_CHARS);
    // The sessions' titles the last pages read, while the ledger has not grown.
    let end = ledger.last_position()?;
    let mut heads = {
        let mut cached = open.heads.lock().unwrap_or_else(|e| e.into_inner());
        if cached.0 != end || cached.1.sessions() > MAX_CACHED_HEADS {
            *cached = (end, Heads::default());
        }
        std::mem::take(&mut cached.1)
    };
    let mut matches = Vec::with_capacity(page.len());
    let mut columns: HashMap<u32, PageColumns> = HashMap::new();
    for (score, address) in page {
        let columns = match columns.entry(address.segment_ord) {
            std::collections::hash_map::Entry::Occupied(open) => open.into_mut(),
            std::collections::hash_map::Entry::Vacant(slot) => {
                let fast = searcher.segment_reader(address.segment_ord).fast_fields();
                let Some(sessions) = fast.str(SESSION)? else {
                    continue;
                };
                slot.insert(PageColumns {
                    seq: fast.u64(SEQ)?,
                    position: fast.u64(POSITION)?,
                    sessions,
                })
            }
        };
        let seq = columns.seq.first(address.doc_id).unwrap_or(0);
        let position = columns.position.first(address.doc_id).unwrap_or(0);
        let mut session_text = String::new();
        if let Some(ord) = columns.sessions.term_ords(address.doc_id).next() {
            columns
                .sessions
                .ord_to_str(ord, &mut session_text)
                .map_err(|e| RecallError::Index(e.into()))?;
        }
        let Ok(session) = session_text.parse::<SessionId>() else {
            continue;
        };
        let Some(event) = read_event(ledger, position, session, seq)? else {
            continue;
        };
        let text = texts(&event.payload).join("\n");
        let snippet = render_snippet(&snippets.snippet(&text), &text);
        if let Some(found) = heads.describe(ledger, &event, score, snippet)? {
            matches.push(found);
        }
    }
    {
        let mut cached = open.heads.lock().unwrap_or_else(|e| e.into_inner());
        if cached.0 == end {
            cached.1 = heads;
        }
    }
    Ok(SearchAnswer {
        matches,
        next_cursor,
        // Each event read above by position or by session and seq, checked (its hash;
        // one that does not check is skipped).
        checked: true,
    })
}

/// The fast fields a page of hits reads, opened once per segment.
struct PageColumns {
    seq: Column<u64>,
    position: Column<u64>,
    sessions: StrColumn,
}

/// The event of a hit: by its ledger position (one row, its hash checked), else (a ledger
/// of an earlier build has no positions, or the position holds another event) by session
/// and seq, which also reads the session's head (a long session's is large).
fn read_event(
    ledger: &Ledger,
    position: u64,
    session: SessionId,
    seq: u64,
) -> Result<Option<Event>, RecallError> {
    if position > 0 {
        let read = ledger
            .events_from_position(position, 1)
            .map(|events| events.into_iter().next())
            .or_else(StoreError::skip_damage)?;
        if let Some(found) = read
            && found.position == position
            && found.event.session == session
            && found.event.seq == seq
        {
            return Ok(Some(found.event));
        }
    }
    Ok(ledger
        .events(session, seq, seq)
        .map(|events| events.into_iter().next())
        .or_else(StoreError::skip_damage)?)
}

/// The first `max` characters of `text`, `…` when cut.
pub(crate) fn cut(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// A snippet with its matched words marked `**word**`, and `…` where text was cut.
fn render_snippet(snippet: &tantivy::snippet::Snippet, text: &str) -> String {
    let fragment = snippet.fragment();
    if fragment.is_empty() {
        return cut(text, SNIPPET_MAX_CHARS);
    }
    let mut ranges: Vec<std::ops::Range<usize>> = snippet.highlighted().to_vec();
    ranges.sort_by_key(|r| r.start);
    let mut out = String::new();
    let range = snippet.fragment_range();
    if range.start > 0 {
        out.push('…');
    }
    let mut from = 0;
    for r in ranges {
        if r.start < from || r.end > fragment.len() {
            continue;
        }
        out.push_str(&fragment[from..r.start]);
        out.push_str("**");
        out.push_str(&fragment[r.clone()]);
        out.push_str("**");
        from = r.end;
    }
    out.push_str(&fragment[from..]);
    if range.end < text.len() {
        out.push('…');
    }
    super::super::join_adjacent_marks(out)
}
