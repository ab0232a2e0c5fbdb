//! Recall: ranked full-text search over the whole ledger, as a projection of it.
//!
//! Owns: the one entry point the tools and the CLI call ([`Recall::for_ledger`], then
//! [`Recall::search`], [`Recall::related`], [`Recall::reindex`], [`Recall::state`]), the
//! request and answer shapes ([`SearchRequest`], [`SearchAnswer`], [`Match`],
//! [`Related`], [`Cursor`]; matches grouped by session on request), the query language
//! ([`query`]), the analyser ([`analyzer`]), hybrid mode's fusion ([`fusion`]),
//! the redb ledger's Tantivy index ([`index`]), the typo retry ([`correct`]), what the
//! indexes hold and a page reads back ([`documents`]) and the contract a backend that searches
//! its own ledger implements ([`TextSearch`]: PostgreSQL's full-text search, in
//! [`postgres`], with its vectors). Must not: write to the ledger, or answer from an index
//! that lags the ledger (the tail after its checkpoint is applied first).
//!
//! Why Tantivy: BM25 with English stemming, phrase queries, snippets and mmap'd segments
//! in pure Rust (no C build), a writer lock across processes and an atomic commit that
//! carries our checkpoint; its alternatives were SQLite FTS5 (a C build and a second
//! storage engine beside redb), an index kept in redb by hand (BM25, positions, phrase
//! matching and snippets written and tuned here), in-memory BM25 crates (the whole index
//! rebuilt at every start) and Meilisearch's milli (LMDB in C, several times the build).
//! Built without zstd (a C build) and without its stop-word lists.
//!
//! The index is opened on the first search (never at start: the stdio server's start-up
//! and memory stay as they were) and shared by every call of the process.

pub(crate) mod analyzer;
mod correct;
mod documents;
pub(crate) mod fusion;
pub(crate) mod index;
pub(crate) mod postgres;
pub(crate) mod query;
pub(crate) mod semantic;
pub(crate) mod vectors;

use crate::event::{SessionId, SessionKind};
use crate::store::{Ledger, StoreError};
use query::{ParsedQuery, Unit};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub(crate) use documents::{Documents, Heads};
pub(crate) use index::{IndexState, cut};
pub(crate) use query::{MAX_QUERY_BYTES, QueryError, parse_time};
#[allow(unused_imports)] // some only in test builds
pub(crate) use semantic::Semantic;

/// Matches a search returns unless asked otherwise.
pub(crate) const DEFAULT_LIMIT: usize = 10;
/// Most matches one page may hold.
pub(crate) const MAX_LIMIT: usize = 100;
/// Deepest a page may start (a search holds offset + limit hits, never every match).
pub(crate) const MAX_OFFSET: usize = 10_000;
/// Environment variable of `serve --related N`.
pub(crate) const RELATED_ENV: &str = "REASONING_LEDGER_RELATED";
/// Most related sessions a first thought may be answered with.
pub(crate) const MAX_RELATED: usize = 20;
/// Indexes one process keeps open (one per data directory it searched).
const MAX_OPEN_INDEXES: usize = 8;
/// Matches read per session wanted when a search groups by session (a session's several
/// matches take several places of the ranking).
const GROUPED_HITS_PER_SESSION: usize = 5;
/// Most matches a search grouped by session reads (the sessions beyond them are not
/// offered).
const MAX_GROUPED_HITS: usize = 1_000;

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecallError {
    /// The query cannot be run; says how to write one (transparent: said once, also in
    /// an error chain).
    #[error(transparent)]
    Query(#[from] QueryError),
    /// A `cursor` that no search answered with.
    #[error("{0:?} is not a cursor; pass nextCursor from the previous answer")]
    Cursor(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the search index failed: {0}")]
    Index(#[from] tantivy::TantivyError),
    #[error("the search index at {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The vector store failed (semantic search answers lexically meanwhile).
    #[error("the vector store failed: {0}")]
    Vectors(String),
    /// The index cannot serve this ledger (rebuilt on the next search).
    #[error("the search index cannot be used: {0}")]
    Stale(String),
}

/// Where the next page starts: the ledger position the first page saw (later events are
/// left out, so pages do not shift) and how many hits came before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub bound: u64,
    pub offset: usize,
}

impl Cursor {
    pub(crate) fn parse(text: &str) -> Result<Cursor, RecallError> {
        let bad = || RecallError::Cursor(text.to_string());
        let (bound, offset) = text.trim().split_once('.').ok_or_else(bad)?;
        let cursor = Cursor {
            bound: bound.parse().map_err(|_| bad())?,
            offset: offset.parse().map_err(|_| bad())?,
        };
        if cursor.offset > MAX_OFFSET {
            return Err(bad());
        }
        Ok(cursor)
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.bound, self.offset)
    }
}

/// One search.
#[derive(Clone, Debug, Default)]
pub(crate) struct SearchRequest {
    pub query: String,
    /// Matches per page (1..=[`MAX_LIMIT`]).
    pub limit: usize,
    pub session: Option<SessionId>,
    /// Session kinds (none: every kind).
    pub kinds: Vec<SessionKind>,
    /// Commit time bounds, inclusive, in ms since the epoch.
    pub since: Option<u64>,
    pub until: Option<u64>,
    pub cursor: Option<Cursor>,
    /// Which ranking(s) (`None`: hybrid when embeddings are configured, else lexical).
    pub mode: Option<SearchMode>,
    /// One match per session (its best; newest session first among equal scores); the
    /// cursor and limit count sessions.
    pub by_session: bool,
}

/// Which ranking a search uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SearchMode {
    /// The index's words (BM25).
    Lexical,
    /// The embeddings' nearest events.
    Semantic,
    /// Both, fused by reciprocal rank, each lexical match weighed by how much of the
    /// evidence of the query's content words it holds (their IDF, [`fusion`]).
    Hybrid,
}

impl SearchMode {
    /// The modes' names, as the tool and the CLI take them.
    pub(crate) const NAMES: &'static str = "lexical, semantic or hybrid";
    /// Every mode, in the order [`SearchMode::NAMES`] says them.
    pub(crate) const ALL: [SearchMode; 3] = [
        SearchMode::Lexical,
        SearchMode::Semantic,
        SearchMode::Hybrid,
    ];

    pub(crate) fn parse(text: &str) -> Option<SearchMode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "lexical" => Some(SearchMode::Lexical),
            "semantic" => Some(SearchMode::Semantic),
            "hybrid" => Some(SearchMode::Hybrid),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SearchMode::Lexical => "lexical",
            SearchMode::Semantic => "semantic",
            SearchMode::Hybrid => "hybrid",
        }
    }
}

/// A ranker's name in `rankers`.
const LEXICAL: &str = "lexical";
/// A ranker's name in `rankers`.
const SEMANTIC: &str = "semantic";

/// A page of matches with how they were ranked: what `search_history` and `search`
/// answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RankedAnswer {
    pub answer: SearchAnswer,
    /// Per match, the rankers that found it (empty in lexical mode: the answer is as
    /// before semantic recall).
    pub rankers: Vec<Vec<&'static str>>,
    /// Why a semantic or hybrid search answered lexically (one line).
    pub note: Option<String>,
}

impl RankedAnswer {
    /// [`SearchAnswer::to_json`], each match with its `rankers` when it has them, and
    /// `note` when there is one.
    pub(crate) fn to_json(&self, query: &str) -> Value {
        let mut answer = self.answer.to_json(query);
        if let Some(matches) = answer["matches"].as_array_mut() {
            for (found, rankers) in matches.iter_mut().zip(&self.rankers) {
                if !rankers.is_empty() {
                    found["rankers"] = json!(rankers);
                }
            }
        }
        if let Some(note) = &self.note {
            answer["note"] = json!(note);
        }
        answer
    }
}

/// One match.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Match {
    pub session_id: String,
    pub seq: u64,
    /// The session's kind.
    pub kind: &'static str,
    pub event_type: &'static str,
    pub at: String,
    /// Relevance (BM25 on redb, `ts_rank_cd` on PostgreSQL), rounded to 3 decimals.
    pub score: f64,
    /// The session's title.
    pub title: String,
    /// Text around the best match, matched words marked `**word**`.
    pub snippet: String,
}

/// A page of matches, best first.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct SearchAnswer {
    pub matches: Vec<Match>,
    pub next_cursor: Option<Cursor>,
    /// Every match's event was read from the ledger and checked while the answer was
    /// made (the redb index reads each hit's event for its snippet): [`keep_sound`] need
    /// not read them again (a session's head decoded per match, the most of a search of
    /// a long session).
    pub checked: bool,
}

impl SearchAnswer {
    /// The one shape of an answer (`search_history` adds its note, `search --json`
    /// prints it): `{"query", "matches", "nextCursor"?}`.
    pub(crate) fn to_json(&self, query: &str) -> Value {
        let mut answer = json!({"query": query, "matches": self.matches});
        if let Some(cursor) = self.next_cursor {
            answer["nextCursor"] = json!(cursor.to_string());
        }
        answer
    }
}

/// An earlier session like a new one's first thought.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Related {
    pub session_id: String,
    pub title: String,
    pub score: f64,
    pub snippet: String,
}

/// A content word of a query as a lexical index counts the documents holding it
/// ([`TextSearch::document_frequencies`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CountedWord {
    /// A folded word ([`analyzer::folded`]), found as a one-word query finds it.
    Word(String),
    /// The folded start of words (`word*`): the documents holding any word that starts
    /// with it.
    Prefix(String),
}

impl CountedWord {
    /// The folded word or prefix.
    pub(crate) fn text(&self) -> &str {
        match self {
            CountedWord::Word(text) | CountedWord::Prefix(text) => text,
        }
    }
}

/// How many documents of a lexical index hold each of some words, and how many it holds
/// in all: what hybrid fusion weighs a word's match by (its IDF, [`fusion`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DocumentFrequencies {
    /// The documents the index holds.
    pub documents: u64,
    /// Per word asked about, in its order: the documents holding it (on PostgreSQL
    /// counted up to [`postgres::search::DOCUMENT_FREQUENCY_CAP`]).
    pub holding: Vec<u64>,
}

/// A backend that searches its own ledger (PostgreSQL's full-text search): the same
/// request, filters and answer as the Tantivy index.
pub(crate) trait TextSearch: Send + Sync {
    /// One page of matches, the backend's own index first brought up to the ledger's end.
    fn search(
        &self,
        ledger: &Ledger,
        request: &SearchRequest,
        parsed: &ParsedQuery,
    ) -> Result<SearchAnswer, RecallError>;
    /// Rebuilds the backend's index from the ledger; returns the position indexed to.
    fn reindex(&self, ledger: &Ledger) -> Result<u64, RecallError>;
    /// What `verify` reports.
    fn state(&self, ledger: &Ledger) -> Result<IndexState, RecallError>;
    /// How many of the backend index's documents hold each of `words` (a folded word as
    /// a one-word query finds it, a prefix as `word*` does), and how many it holds in
    /// all; for hybrid fusion, after [`TextSearch::search`] brought the index up to the
    /// ledger's end.
    fn document_frequencies(
        &self,
        ledger: &Ledger,
        words: &[CountedWord],
    ) -> Result<DocumentFrequencies, RecallError>;
    /// The word one edit away from `word` the backend's index holds most, for the typo
    /// retry ([`correct`]); `None` by default (no retry).
    fn correction(&self, _ledger: &Ledger, _word: &str) -> Result<Option<String>, RecallError> {
        Ok(None)
    }
}

/// The search of one ledger.
pub(crate) struct Recall {
    /// The Tantivy index of a redb ledger; `None` when the backend searches itself (or
    /// when no index can be kept anywhere: `index_note` says why).
    index: Option<index::TantivyRecall>,
    /// Embeddings and vectors, when an endpoint is configured and the backend keeps them.
    semantic: Option<Arc<semantic::Semantic>>,
    /// Where the index is when it is not beside the ledger (the data directory may not be
    /// written here), or why there is none: said once by the command that searches.
    index_note: Option<String>,
}

/// Whether this process may create files in `dir` (and in its `index/` folder, when that
/// exists): asks the system (`access(2)`), creating nothing.
fn may_write(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let writable = |path: &Path| {
        let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: `path` is a valid NUL-terminated string that outlives the call.
        unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
    };
    let index = dir.join(index::INDEX_DIR);
    writable(dir) && (!index.exists() || writable(&index))
}

/// Every [`Recall`] this process opened, by ledger path (most recent last).
static OPEN: Mutex<Vec<(PathBuf, Arc<Recall>)>> = Mutex::new(Vec::new());

impl Recall {
    /// The search of `ledger`, shared by every call of this process on it. Opens nothing
    /// yet: the index is read on the first search.
    pub(crate) fn for_ledger(ledger: &Ledger) -> Arc<Recall> {
        let key = ledger.path().to_path_buf();
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = open.iter().position(|(path, _)| *path == key) {
            let entry = open.remove(at);
            let recall = entry.1.clone();
            open.push(entry);
            return recall;
        }
        let data_dir = ledger.path().parent().unwrap_or(Path::new("."));
        let mut index_note = None;
        let index = match postgres::text_search(ledger) {
            Some(_) => None,
            // Nothing is written beside a ledger opened read-only, or in a directory this
            // process may not write: the index is kept in a temporary directory.
            None if ledger.read_only().is_some() || !may_write(data_dir) => {
                match index::TantivyRecall::temporary(data_dir) {
                    Ok((index, note)) => {
                        index_note = Some(note);
                        Some(index)
                    }
                    Err(error) => {
                        index_note = Some(format!(
                            "no search index can be kept: the ledger's directory may not be \
                             written here and a temporary one cannot be made ({error})"
                        ));
                        None
                    }
                }
            }
            None => Some(index::TantivyRecall::new(data_dir)),
        };
        // Vectors are kept beside the ledger too: none for a ledger opened read-only.
        let semantic = match ledger.read_only() {
            Some(_) => None,
            None => semantic::Semantic::for_ledger(ledger),
        };
        let recall = Arc::new(Recall {
            index,
            semantic,
            index_note,
        });
        if open.len() >= MAX_OPEN_INDEXES {
            open.remove(0);
        }
        open.push((key, recall.clone()));
        recall
    }

    /// The semantic side, when embeddings are configured for this ledger.
    pub(crate) fn semantic(&self) -> Option<&Arc<semantic::Semantic>> {
        self.semantic.as_ref()
    }

    /// Where the index is kept when it is not beside the ledger (the ledger's directory may
    /// not be written here), or why there is none; `None` for the usual place.
    pub(crate) fn index_note(&self) -> Option<&str> {
        self.index_note.as_deref()
    }

    /// One page of matches for `request`, as of the ledger's end when called.
    pub(crate) fn search(
        &self,
        ledger: &Ledger,
        request: &SearchRequest,
    ) -> Result<SearchAnswer, RecallError> {
        self.search_ranked(ledger, request)
            .map(|ranked| ranked.answer)
    }

    /// One page of matches for `request` in its mode, with each match's rankers and a
    /// note when a semantic or hybrid search had to answer lexically (never an error for
    /// that, never a wait longer than [`semantic::QUERY_EMBED_TIMEOUT`] for the query's
    /// vector).
    pub(crate) fn search_ranked(
        &self,
        ledger: &Ledger,
        request: &SearchRequest,
    ) -> Result<RankedAnswer, RecallError> {
        let parsed = query::parse(&request.query)?;
        let mut request = request.clone();
        request.limit = request.limit.clamp(1, MAX_LIMIT);
        let mode = request.mode.unwrap_or(if self.semantic.is_some() {
            SearchMode::Hybrid
        } else {
            SearchMode::Lexical
        });
        let mut ranked = if request.by_session {
            self.by_session(ledger, &request, &parsed, mode)?
        } else {
            self.ranked_page(ledger, &request, &parsed, mode)?
        };
        keep_sound(ledger, &mut ranked)?;
        Ok(ranked)
    }

    /// [`Recall::search_ranked`] grouped by session: the ranking read deep enough for
    /// the page's sessions (at most [`MAX_GROUPED_HITS`] matches), each session's first
    /// match kept in its place, sessions whose best matches score alike newest first.
    fn by_session(
        &self,
        ledger: &Ledger,
        request: &SearchRequest,
        parsed: &ParsedQuery,
        mode: SearchMode,
    ) -> Result<RankedAnswer, RecallError> {
        let (offset, bound) = match request.cursor {
            Some(cursor) => (cursor.offset, cursor.bound),
            None => (0, ledger.last_position()?),
        };
        let wanted = offset + request.limit + 1;
        let deep = SearchRequest {
            limit: (wanted * GROUPED_HITS_PER_SESSION).min(MAX_GROUPED_HITS),
            cursor: Some(Cursor { bound, offset: 0 }),
            by_session: false,
            ..request.clone()
        };
        let ranked = self.ranked_page(ledger, &deep, parsed, mode)?;
        let mut rankers = ranked.rankers.into_iter();
        let mut groups: Vec<(Match, Vec<&'static str>)> = Vec::new();
        for found in ranked.answer.matches {
            let found_rankers = rankers.next().unwrap_or_default();
            if !groups.iter().any(|(m, _)| m.session_id == found.session_id) {
                groups.push((found, found_rankers));
            }
        }
        // Among equal scores (a run of them in rank order), the newest session first.
        let mut from = 0;
        while from < groups.len() {
            let score = groups[from].0.score;
            let to = from
                + groups[from..]
                    .iter()
                    .take_while(|(m, _)| m.score == score)
                    .count();
            groups[from..to].sort_by(|a, b| b.0.at.cmp(&a.0.at));
            from = to;
        }
        let next_cursor = (groups.len() > offset + request.limit).then(|| Cursor {
            bound,
            offset: offset + request.limit,
        });
        let mut answer = RankedAnswer {
            note: ranked.note,
            ..RankedAnswer::default()
        };
        for (found, found_rankers) in groups.into_iter().skip(offset).take(request.limit) {
            answer.answer.matches.push(found);
            answer.rankers.push(found_rankers);
        }
        answer.answer.next_cursor = next_cursor;
        // A subset of the ranked page's matches: checked when those were.
        answer.answer.checked = ranked.answer.checked;
        Ok(answer)
    }

    /// One page of `request` (its limit taken as it is) in `mode`.
    fn ranked_page(
        &self,
        ledger: &Ledger,
        request: &SearchRequest,
        parsed: &ParsedQuery,
        mode: SearchMode,
    ) -> Result<RankedAnswer, RecallError> {
        if mode == SearchMode::Lexical {
            let (answer, note) = self.lexical_corrected(ledger, request, parsed)?;
            return Ok(RankedAnswer {
                answer,
                note,
                ..RankedAnswer::default()
            });
        }
        let lexically = |note: String| -> Result<RankedAnswer, RecallError> {
            let (answer, corrected) = self.lexical_corrected(ledger, request, parsed)?;
            Ok(RankedAnswer {
                rankers: vec![vec![LEXICAL]; answer.matches.len()],
                answer,
                note: Some(match corrected {
                    Some(corrected) => format!("{note}; {corrected}"),
                    None => note,
                }),
            })
        };
        let Some(semantic) = &self.semantic else {
            if ledger.read_only().is_some() {
                return lexically(format!(
                    "{} search needs the ledger's vectors, which are not kept for a ledger opened read-only; these are lexical matches",
                    mode.as_str()
                ));
            }
            return lexically(format!(
                "{} search needs an embeddings endpoint (REASONING_LEDGER_EMBEDDINGS_BASE_URL and _MODEL); these are lexical matches",
                mode.as_str()
            ));
        };
        let (offset, bound) = match request.cursor {
            Some(cursor) => (cursor.offset, cursor.bound),
            None => (0, ledger.last_position()?),
        };
        let depth = offset + request.limit + 1;
        // Hybrid fuses the lexical matches; semantic mode reads them only when the query
        // has a `word*`, to embed it as the word they hold.
        let has_prefix = parsed.wanted.iter().any(|u| matches!(u, Unit::Prefix(_)));
        let mut lexical = if mode == SearchMode::Hybrid || has_prefix {
            let deep = SearchRequest {
                limit: depth,
                cursor: Some(Cursor { bound, offset: 0 }),
                ..request.clone()
            };
            self.lexical(ledger, &deep, parsed)?.matches
        } else {
            Vec::new()
        };
        // Each lexical match's text, read once: what it weighs and what a `word*` of
        // the query stands for.
        let lexical_texts: Vec<String> = lexical
            .iter()
            .map(|found| match_text(ledger, found))
            .collect::<Result<_, _>>()?;
        if mode != SearchMode::Hybrid {
            lexical.clear();
        }
        let vector = match semantic.embed_query(&fusion::embedded_query(parsed, &lexical_texts)) {
            Ok(vector) => vector,
            Err(why) => {
                return lexically(format!(
                    "semantic ranking unavailable ({why}); these are lexical matches"
                ));
            }
        };
        let filter = vectors::VectorFilter {
            session: request.session,
            kinds: request.kinds.clone(),
            since: request.since,
            until: request.until,
            bound: Some(bound),
        };
        let near = match semantic.nearest(&vector, depth, &filter) {
            Ok(near) => near,
            Err(error) => {
                tracing::warn!(%error, "semantic search failed; answering lexically");
                return lexically(format!(
                    "semantic ranking unavailable ({error}); these are lexical matches"
                ));
            }
        };
        let semantic_matches = semantic_matches(ledger, &near, parsed)?;
        let key = |m: &Match| (m.session_id.clone(), m.seq);
        // Each lexical match weighs as much as it holds of the evidence the query's
        // content words offer (each word's IDF in the lexical index).
        let mut weight = fusion::LexicalWeight::new(parsed);
        if !lexical.is_empty() {
            weight.weigh_by(&self.document_frequencies(ledger, &weight.words())?);
        }
        let mut lexical_keys: Vec<(fusion::Key, f64)> = Vec::with_capacity(lexical.len());
        for (found, text) in lexical.iter().zip(&lexical_texts) {
            lexical_keys.push((key(found), weight.of(text)));
        }
        let semantic_keys: Vec<fusion::Key> = semantic_matches.iter().map(key).collect();
        let fused = fusion::fuse(&lexical_keys, &semantic_keys);
        let mut by_key: HashMap<fusion::Key, Match> = HashMap::new();
        for found in semantic_matches.into_iter().chain(lexical) {
            // The lexical match (its snippet marks the words) replaces the semantic one.
            by_key.insert(key(&found), found);
        }
        let next_cursor = (fused.len() > offset + request.limit).then(|| Cursor {
            bound,
            offset: offset + request.limit,
        });
        let mut answer = RankedAnswer::default();
        for fused in fused.into_iter().skip(offset).take(request.limit) {
            let Some(mut found) = by_key.remove(&fused.key) else {
                continue;
            };
            if mode == SearchMode::Hybrid {
                found.score = round_score(fused.score);
            }
            let mut rankers = Vec::new();
            if fused.by_words {
                rankers.push(LEXICAL);
            }
            if fused.by_meaning {
                rankers.push(SEMANTIC);
            }
            answer.answer.matches.push(found);
            answer.rankers.push(rankers);
        }
        answer.answer.next_cursor = next_cursor;
        Ok(answer)
    }

    /// The lexical ranking (the index, or the backend's own search).
    fn lexical(
        &self,
        ledger: &Ledger,
        request: &SearchRequest,
        parsed: &ParsedQuery,
    ) -> Result<SearchAnswer, RecallError> {
        match (&self.index, postgres::text_search(ledger)) {
            (_, Some(backend)) => backend.search(ledger, request, parsed),
            (Some(index), None) => index.search(ledger, request, parsed),
            (None, None) => Err(RecallError::Stale(
                self.index_note
                    .clone()
                    .unwrap_or_else(|| "no index for this ledger".into()),
            )),
        }
    }

    /// How many documents of the lexical index hold each of `words`, and how many it
    /// holds ([`TextSearch::document_frequencies`]).
    fn document_frequencies(
        &self,
        ledger: &Ledger,
        words: &[CountedWord],
    ) -> Result<DocumentFrequencies, RecallError> {
        match (&self.index, postgres::text_search(ledger)) {
            (_, Some(backend)) => backend.document_frequencies(ledger, words),
            (Some(index), None) => index.document_frequencies(ledger, words),
            (None, None) => Err(RecallError::Stale(
                self.index_note
                    .clone()
                    .unwrap_or_else(|| "no index for this ledger".into()),
            )),
        }
    }

    /// Rebuilds the index from the ledger; returns the position indexed to.
    pub(crate) fn reindex(
        &self,
        ledger: &Ledger,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64, RecallError> {
        match (&self.index, postgres::text_search(ledger)) {
            (_, Some(backend)) => backend.reindex(ledger),
            (Some(index), None) => index.reindex(ledger, progress),
            (None, None) => Err(RecallError::Stale("no index for this ledger".into())),
        }
    }

    /// Whether the index agrees with the ledger (for `verify`); builds nothing.
    pub(crate) fn state(&self, ledger: &Ledger) -> Result<IndexState, RecallError> {
        match (&self.index, postgres::text_search(ledger)) {
            (_, Some(backend)) => backend.state(ledger),
            (Some(index), None) => index.state(ledger),
            (None, None) => Ok(IndexState::Missing),
        }
    }

    /// Up to `count` sessions other than `own` whose text is most like `text` (the
    /// words of `text` as an any-word query), best first.
    pub(crate) fn related(
        &self,
        ledger: &Ledger,
        text: &str,
        own: SessionId,
        count: usize,
    ) -> Result<Vec<Related>, RecallError> {
        let count = count.min(MAX_RELATED);
        let mut words: Vec<String> = Vec::new();
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= RELATED_MIN_WORD_CHARS)
        {
            let word = word.to_lowercase();
            if !words.contains(&word) {
                words.push(word);
            }
            if words.len() == query::MAX_QUERY_TERMS {
                break;
            }
        }
        if count == 0 || words.is_empty() {
            return Ok(Vec::new());
        }
        let request = SearchRequest {
            query: words.join(" "),
            limit: (count * RELATED_HITS_PER_SESSION).min(MAX_LIMIT),
            ..SearchRequest::default()
        };
        let answer = self.search(ledger, &request)?;
        let mut related: Vec<Related> = Vec::new();
        let own = own.to_string();
        for found in answer.matches {
            if found.session_id == own || related.iter().any(|r| r.session_id == found.session_id) {
                continue;
            }
            related.push(Related {
                session_id: found.session_id,
                title: found.title,
                score: found.score,
                snippet: found.snippet,
            });
            if related.len() == count {
                break;
            }
        }
        Ok(related)
    }
}

/// Leaves out of `ranked` every match whose event no longer verifies in the ledger (an
/// index is derived data: it may hold an event altered or removed since it was built),
/// saying so in its note. The damage is recorded by the read that meets it.
fn keep_sound(ledger: &Ledger, ranked: &mut RankedAnswer) -> Result<(), RecallError> {
    if ranked.answer.checked {
        return Ok(());
    }
    let matches = std::mem::take(&mut ranked.answer.matches);
    let mut rankers = std::mem::take(&mut ranked.rankers).into_iter();
    let mut left_out = 0;
    for found in matches {
        let found_rankers = rankers.next();
        let sound = match found.session_id.parse::<SessionId>() {
            Ok(session) => ledger
                .events(session, found.seq, found.seq)
                .map(|events| (!events.is_empty()).then_some(()))
                .or_else(StoreError::skip_damage)?
                .is_some(),
            Err(_) => false,
        };
        if !sound {
            left_out += 1;
            continue;
        }
        ranked.answer.matches.push(found);
        ranked.rankers.extend(found_rankers);
    }
    if left_out > 0 {
        let why = format!(
            "{left_out} match(es) left out: their events no longer verify in the ledger \
             (`reasoning-ledger verify` names the damage)"
        );
        ranked.note = Some(match ranked.note.take() {
            Some(note) => format!("{note}; {why}"),
            None => why,
        });
    }
    Ok(())
}

/// The searchable text of a match's event (empty when it cannot be read).
fn match_text(ledger: &Ledger, found: &Match) -> Result<String, RecallError> {
    let Ok(session) = found.session_id.parse::<SessionId>() else {
        return Ok(String::new());
    };
    let read = ledger
        .events(session, found.seq, found.seq)
        .map(|events| events.into_iter().next())
        .or_else(StoreError::skip_damage)?;
    Ok(read.map_or_else(String::new, |event| index::texts(&event.payload).join("\n")))
}

/// The matches of the nearest events (score: cosine similarity; snippet: the start of
/// the text), leaving out events whose text holds an excluded word or phrase.
fn semantic_matches(
    ledger: &Ledger,
    near: &[vectors::Nearest],
    parsed: &ParsedQuery,
) -> Result<Vec<Match>, RecallError> {
    let excluded: Vec<Vec<String>> = parsed
        .excluded
        .iter()
        .map(|u| analyzer::terms(u.text()))
        .filter(|terms| !terms.is_empty())
        .collect();
    let mut heads = Heads::default();
    let mut matches = Vec::with_capacity(near.len());
    for found in near {
        let read = ledger
            .events(found.session, found.seq, found.seq)
            .map(|events| events.into_iter().next())
            .or_else(StoreError::skip_damage)?;
        let Some(event) = read else {
            continue;
        };
        let text = index::texts(&event.payload).join("\n");
        if !excluded.is_empty() {
            let terms: std::collections::HashSet<String> =
                analyzer::terms(&text).into_iter().collect();
            if excluded
                .iter()
                .any(|unit| unit.iter().all(|t| terms.contains(t)))
            {
                continue;
            }
        }
        let snippet = cut(&text, index::SNIPPET_MAX_CHARS);
        if let Some(found) = heads.describe(ledger, &event, found.similarity, snippet)? {
            matches.push(found);
        }
    }
    Ok(matches)
}

/// Starts the background embedder of `serve` when embeddings are configured for
/// `ledger` (nothing otherwise).
pub(crate) fn start_embedder(ledger: &Ledger) {
    if let Some(semantic) = Recall::for_ledger(ledger).semantic() {
        semantic.clone().spawn_embedder(ledger.clone());
    }
}

/// How many related sessions a new session's first thought is answered with (`serve
/// --related N`); 0, the default, answers with none and searches nothing.
static RELATED_COUNT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets what `serve --related N` asks for (at most [`MAX_RELATED`]).
pub(crate) fn set_related_count(count: usize) {
    RELATED_COUNT.store(count.min(MAX_RELATED), std::sync::atomic::Ordering::Relaxed);
}

/// Adds `related: [...]` to the answer of a new session's first thought when `serve
/// --related N` asked for it and earlier sessions are like it (the key is left out when
/// none is). A failed search is logged and leaves the answer as it is: the thought is
/// recorded either way.
pub(crate) async fn attach_related(
    ledger: &Ledger,
    text: &str,
    own: SessionId,
    answer: &mut Value,
) {
    let count = RELATED_COUNT.load(std::sync::atomic::Ordering::Relaxed);
    if count == 0 {
        return;
    }
    let ledger = ledger.clone();
    let text = text.to_string();
    let found = tokio::task::spawn_blocking(move || {
        Recall::for_ledger(&ledger).related(&ledger, &text, own, count)
    })
    .await;
    match found {
        Ok(Ok(related)) if !related.is_empty() => answer["related"] = json!(related),
        Ok(Ok(_)) => {}
        Ok(Err(error)) => tracing::warn!(%error, "related sessions: the search failed"),
        Err(error) => tracing::warn!(%error, "related sessions: the search panicked"),
    }
}

/// Words shorter than this are left out of a related-sessions query (articles,
/// prepositions: they would match everything).
const RELATED_MIN_WORD_CHARS: usize = 4;
/// Hits asked for per related session wanted (several hits may share a session).
const RELATED_HITS_PER_SESSION: usize = 5;

/// A score rounded to 3 decimals (answers stay short and stable).
pub(crate) fn round_score(score: f64) -> f64 {
    (score * 1000.0).round() / 1000.0
}

/// A snippet's marks one per run of matched text: where one `**…**` ends just as the next
/// begins (a CJK word's characters, each a token of both backends), they are joined, so
/// "日本語" reads `**日本語**`, not `**日****本****語**`.
pub(crate) fn join_adjacent_marks(snippet: String) -> String {
    if snippet.contains("****") {
        snippet.replace("****", "")
    } else {
        snippet
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_marks_are_joined() {
        let joined = join_adjacent_marks("…in **日****本****語** and **x** **y**".into());
        assert_eq!(joined, "…in **日本語** and **x** **y**");
    }

    #[test]
    fn times_and_cursors_read_back() {
        assert_eq!(parse_time("1700000000000"), Ok(1_700_000_000_000));
        assert_eq!(parse_time("1970-01-02"), Ok(86_400_000));
        assert_eq!(parse_time("1970-01-01T00:00:01Z"), Ok(1000));
        assert!(parse_time("yesterday").is_err());
        let cursor = Cursor {
            bound: 42,
            offset: 10,
        };
        assert_eq!(Cursor::parse(&cursor.to_string()).unwrap(), cursor);
        assert!(Cursor::parse("x").is_err());
        assert!(Cursor::parse("1.99999999").is_err());
    }
}
