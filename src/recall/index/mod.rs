//! The Tantivy index of a redb ledger: a projection of the ledger kept in
//! `<data dir>/index/`, derived data that can be deleted at any time.
//!
//! Owns: opening and checking it (missing, unreadable, of another schema, ahead of the
//! ledger or of another ledger: it is rebuilt, with one log line), catching it up and
//! rebuilding it, the checkpoint (written in the same Tantivy commit as the documents),
//! and the update lock (`index/update.lock`: one process updates at a time, across
//! processes; the others wait for it, then read). Beside it, by concern as Tantivy lays
//! itself out: [`schema`] (the fields, the word and word-pair analysers), [`indexer`]
//! (events → documents), [`search`] (queries, tiers, pages, snippets, prefixes, typos),
//! [`phrase`] (a quoted phrase: its pairs, pruned by the top-k collection)
//! and [`filter`] (filters applied while the top hits are collected). Must not: write to
//! the ledger, or answer from an index behind the ledger (every search first applies the
//! tail after the checkpoint), or write beside a ledger that may not be written here
//! ([`TantivyRecall::temporary`]: the index is kept in a temporary directory instead,
//! from a copy of the one beside it).
//!
//! A document per event with text: `body` (the event's texts, analysed), `pairs` (its
//! adjacent words, for phrases), `kind` (the session's kind), `session`, `seq`,
//! `position`, `at`. A session's title is the text of its `session_started` document,
//! indexed once (not repeated into its events), and not at all when it only repeats the
//! session's first event (a thinking session's title is its first thought). Stored
//! fields: none; a hit is read back from the ledger by session and seq (its fast fields),
//! so snippets always show the ledger's text.

mod filter;
mod indexer;
mod phrase;
mod schema;
mod search;
mod tokens;

pub(crate) use super::documents::texts;
use super::query::ParsedQuery;
use super::{DocumentFrequencies, Heads, RecallError, SearchAnswer, SearchRequest};
use crate::store::Ledger;
use indexer::{EventDocument, Indexer};
use schema::{Fields, register_analyzers, schema};
pub(crate) use search::{MIN_TYPO_CHARS, SNIPPET_MAX_CHARS, cut, one_edit_away};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy};

/// Version of what the index holds (fields, analyser, what is indexed). An index whose
/// checkpoint names another version is rebuilt. 2: word pairs (`pairs`), `kind` fast. 3:
/// no model prompts and no heuristic candidate sets (the server's own words). 4: pairs
/// with frequencies and lengths, none with a digit; `position` not indexed (fast only).
pub(crate) const RECALL_SCHEMA: u32 = 4;

/// The index's folder inside the data directory.
pub(crate) const INDEX_DIR: &str = "index";
/// Tantivy's files, inside [`INDEX_DIR`] (removed whole by a rebuild).
const TANTIVY_DIR: &str = "tantivy";
/// The update lock, inside [`INDEX_DIR`] (outside [`TANTIVY_DIR`], so a rebuild that
/// removes the index keeps the lock others wait on).
const LOCK_FILE: &str = "update.lock";

/// Indexing memory of a catch-up (Tantivy's least per thread).
const CATCH_UP_MEMORY_BYTES: usize = 15_000_000;
/// Indexing memory per thread of a rebuild.
const REBUILD_MEMORY_BYTES: usize = 48_000_000;
/// Most indexing threads of a rebuild.
const REBUILD_THREADS: usize = 2;
/// A rebuild commits every this many events (a rebuild cut short resumes from its last
/// commit; searches meanwhile wait for it). Each commit ends the segments being written,
/// and Tantivy merges small segments again: at 100,000 a rebuild of 1,000,000 events
/// wrote 20 segments and merged 16 of them into 2, a fifth of its CPU. With one commit
/// per million events the indexing threads end a segment when their memory is full
/// ([`REBUILD_MEMORY_BYTES`]: about 250,000 events each), a few segments that are not
/// merged. (Progress is reported more often: `indexer`.)
const REBUILD_COMMIT_EVERY: u64 = 1_000_000;

/// What the index has applied, written with each commit (Tantivy's commit payload).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Checkpoint {
    /// [`RECALL_SCHEMA`] of the build that wrote it.
    recall: u32,
    /// The last ledger position applied (0: none).
    position: u64,
    /// The hash of the event at `position` (the index belongs to this ledger).
    hash: String,
    /// A ledger of an earlier build has no positions: how many of its events are applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unpositioned: Option<u64>,
}

impl Checkpoint {
    pub(super) fn empty() -> Self {
        Checkpoint {
            recall: RECALL_SCHEMA,
            position: 0,
            hash: String::new(),
            unpositioned: None,
        }
    }
}

/// The index's fields.
#[derive(Clone, Copy, Debug, PartialEq)]
enum LedgerEnd {
    /// The last position.
    Positioned(u64),
    /// A ledger of an earlier build, not written since: no positions, this many events.
    Unpositioned(u64),
}

fn ledger_end(ledger: &Ledger) -> Result<LedgerEnd, RecallError> {
    let last = ledger.last_position()?;
    if last > 0 {
        return Ok(LedgerEnd::Positioned(last));
    }
    let events: u64 = ledger
        .heads()?
        .iter()
        .fold(0u64, |sum, h| sum.saturating_add(h.seq));
    Ok(if events == 0 {
        LedgerEnd::Positioned(0)
    } else {
        LedgerEnd::Unpositioned(events)
    })
}

impl Checkpoint {
    /// Whether the index holds everything up to `end`.
    fn covers(&self, end: LedgerEnd) -> bool {
        match end {
            LedgerEnd::Positioned(last) => self.unpositioned.is_none() && self.position >= last,
            LedgerEnd::Unpositioned(events) => self.unpositioned == Some(events),
        }
    }
}

/// The index of one data directory, opened on first use.
pub(crate) struct TantivyRecall {
    dir: PathBuf,
    open: Mutex<Option<Arc<Open>>>,
    /// One update at a time in this process (the lock file orders processes).
    updating: Mutex<()>,
    /// The temporary directory `dir` is in, when the data directory may not be written
    /// ([`TantivyRecall::temporary`]): removed with this.
    _temporary: Option<tempfile::TempDir>,
}

/// An opened index.
struct Open {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// The highest position of the searcher of this generation (read once per reload:
    /// each segment's column is opened for it).
    max_position: Mutex<Option<(u64, u64)>>,
    /// The titles and kinds of the sessions pages of hits showed, read at the ledger's
    /// last position (a head changes only with an append, which moves it): a page's
    /// sessions are not read again by the next search until the ledger grows. At most
    /// [`MAX_CACHED_HEADS`].
    heads: Mutex<(u64, Heads)>,
}

/// Most sessions' titles [`Open`] keeps between searches (emptied past it).
const MAX_CACHED_HEADS: usize = 1_024;

/// The index's state, as `verify` reports it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum IndexState {
    /// No index yet (the next search or `reindex` builds it).
    Missing,
    /// Readable, applied up to `position` of the ledger's `last`.
    Indexed { position: u64, last: u64 },
    /// Unusable (`why`): the next search or `reindex` rebuilds it.
    Unusable { why: String },
}

impl TantivyRecall {
    /// The index of the ledger in `data_dir`; nothing is read until the first search.
    pub(crate) fn new(data_dir: &Path) -> Self {
        TantivyRecall {
            dir: data_dir.join(INDEX_DIR),
            open: Mutex::new(None),
            updating: Mutex::new(()),
            _temporary: None,
        }
    }

    /// The index of the ledger in `data_dir` when nothing may be written there (a ledger
    /// opened read-only, a directory this user may not write): kept in a new temporary
    /// directory (removed when this is dropped), starting from a copy of the files of
    /// `<data dir>/index/` if there are any (read only: Tantivy itself would take a lock
    /// file in them), so an index that is only behind is caught up rather than rebuilt.
    /// Returns it and a sentence saying where it is.
    pub(crate) fn temporary(data_dir: &Path) -> Result<(Self, String), RecallError> {
        let temporary = tempfile::Builder::new()
            .prefix("reasoning-ledger-index-")
            .tempdir()
            .map_err(|source| RecallError::Io {
                path: std::env::temp_dir(),
                source,
            })?;
        let dir = temporary.path().join(INDEX_DIR);
        let from = data_dir.join(INDEX_DIR).join(TANTIVY_DIR);
        let copied = copy_index_files(&from, &dir.join(TANTIVY_DIR)).unwrap_or_else(|error| {
            tracing::debug!(%error, "the search index beside the ledger was not copied");
            0
        });
        let note = if copied > 0 {
            format!(
                "the search index is kept in {} for this command (a copy of {}, brought up to \
                 the ledger's end there), not beside the ledger, which may not be written here",
                dir.display(),
                from.display()
            )
        } else {
            format!(
                "the search index is built in {} for this command (removed when it ends), not \
                 beside the ledger, which may not be written here",
                dir.display()
            )
        };
        let recall = TantivyRecall {
            dir,
            open: Mutex::new(None),
            updating: Mutex::new(()),
            _temporary: Some(temporary),
        };
        Ok((recall, note))
    }

    fn tantivy_dir(&self) -> PathBuf {
        self.dir.join(TANTIVY_DIR)
    }

    /// Searches, the index first brought up to the ledger's end.
    pub(crate) fn search(
        &self,
        ledger: &Ledger,
        request: &SearchRequest,
        parsed: &ParsedQuery,
    ) -> Result<SearchAnswer, RecallError> {
        let answer = self
            .current(ledger, None)
            .and_then(|open| search::run_search(&open, ledger, request, parsed));
        match answer {
            Ok(answer) => Ok(answer),
            Err(RecallError::Index(error)) => {
                // The index broke under us (a file damaged after it was opened):
                // rebuild and answer from the rebuilt one, never from this one.
                self.forget();
                let open = self.rebuild(ledger, &format!("reading it failed: {error}"), None)?;
                search::run_search(&open, ledger, request, parsed)
            }
            Err(other) => Err(other),
        }
    }

    /// The word one edit away from `word` that the index holds in most documents (the
    /// index first brought up to the ledger's end); `None` when `word` is short, held
    /// itself, or has no such neighbour.
    pub(crate) fn correction(
        &self,
        ledger: &Ledger,
        word: &str,
    ) -> Result<Option<String>, RecallError> {
        let open = self.current(ledger, None)?;
        search::correction(&open.reader.searcher(), &open.fields, word)
    }

    /// How many documents hold each of `words` (a folded word's term in `body`, as a
    /// one-word query finds it; a prefix's terms as `word*` finds them), and how many the
    /// index holds (the index first brought up to the ledger's end).
    pub(crate) fn document_frequencies(
        &self,
        ledger: &Ledger,
        words: &[super::CountedWord],
    ) -> Result<DocumentFrequencies, RecallError> {
        let open = self.current(ledger, None)?;
        search::document_frequencies(&open.reader.searcher(), &open.fields, words)
    }

    /// Rebuilds the index from the ledger (`reindex`), reporting progress as
    /// (events applied, last position).
    pub(crate) fn reindex(
        &self,
        ledger: &Ledger,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64, RecallError> {
        self.forget();
        let open = self.rebuild(ledger, "asked to (reindex)", Some(progress))?;
        Ok(read_checkpoint(&open.index)?.position)
    }

    /// What `verify` says about the index, without building or changing it.
    pub(crate) fn state(&self, ledger: &Ledger) -> Result<IndexState, RecallError> {
        let path = self.tantivy_dir();
        if !path.join("meta.json").exists() {
            return Ok(IndexState::Missing);
        }
        let end = ledger_end(ledger)?;
        let checked = open_index(&path).and_then(|open| {
            let checkpoint = read_checkpoint(&open.index)?;
            Ok(validate(&checkpoint, ledger, end)?.map(|()| checkpoint))
        });
        Ok(match checked {
            Ok(Ok(checkpoint)) => IndexState::Indexed {
                position: checkpoint.position,
                last: match end {
                    LedgerEnd::Positioned(last) => last,
                    LedgerEnd::Unpositioned(_) => 0,
                },
            },
            Ok(Err(why)) => IndexState::Unusable { why },
            Err(error) => IndexState::Unusable {
                why: error.to_string(),
            },
        })
    }

    fn forget(&self) {
        *self.open.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The opened index, checked, rebuilt if unusable, caught up to the ledger's end.
    fn current(
        &self,
        ledger: &Ledger,
        progress: Option<&mut dyn FnMut(u64, u64)>,
    ) -> Result<Arc<Open>, RecallError> {
        let end = ledger_end(ledger)?;
        let held = self.open.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let open = match held {
            Some(open) => open,
            None => {
                let open = match self.open_checked(ledger, end) {
                    Ok(open) => open,
                    Err(why) => self.rebuild(ledger, &why, progress)?,
                };
                *self.open.lock().unwrap_or_else(|p| p.into_inner()) = Some(open.clone());
                open
            }
        };
        let checkpoint = match read_checkpoint(&open.index) {
            Ok(checkpoint) if checkpoint.recall == RECALL_SCHEMA => checkpoint,
            // Another process rebuilt it (or broke it) meanwhile: check it again.
            _ => {
                self.forget();
                return self.current(ledger, None);
            }
        };
        if !checkpoint.covers(end) {
            self.catch_up(&open, ledger)?;
        }
        open.reader.reload()?;
        Ok(open)
    }

    /// Opens the index and checks it belongs to this ledger; `Err` says why it cannot
    /// be used.
    fn open_checked(&self, ledger: &Ledger, end: LedgerEnd) -> Result<Arc<Open>, String> {
        let path = self.tantivy_dir();
        if !path.join("meta.json").exists() {
            return Err("there is none yet".into());
        }
        let open = open_index(&path).map_err(|e| format!("it does not open: {e}"))?;
        let checkpoint = read_checkpoint(&open.index).map_err(|e| e.to_string())?;
        validate(&checkpoint, ledger, end).map_err(|e| e.to_string())??;
        Ok(Arc::new(open))
    }

    fn lock(&self) -> Result<UpdateLock, RecallError> {
        crate::private::own_dir(&self.dir).map_err(|source| RecallError::Io {
            path: self.dir.clone(),
            source,
        })?;
        UpdateLock::acquire(&self.dir.join(LOCK_FILE))
    }

    /// Applies the ledger's events after the checkpoint, under the update lock.
    fn catch_up(&self, open: &Open, ledger: &Ledger) -> Result<(), RecallError> {
        let _in_process = self.updating.lock().unwrap_or_else(|p| p.into_inner());
        let _lock = self.lock()?;
        // Read again under the lock: another process may have applied it meanwhile.
        let checkpoint = read_checkpoint(&open.index)?;
        let end = ledger_end(ledger)?;
        if checkpoint.covers(end) {
            return Ok(());
        }
        if checkpoint.unpositioned.is_some() || matches!(end, LedgerEnd::Unpositioned(_)) {
            // An earlier build's ledger: no positions to resume from.
            drop(_lock);
            drop(_in_process);
            self.forget();
            self.rebuild(
                ledger,
                "the ledger's events have no positions to resume from",
                None,
            )?;
            return Ok(());
        }
        // Opened again under the lock: Tantivy reads which files it manages when an index
        // is opened, and another process may have written some since this one opened it.
        let index = Index::open_in_dir(self.tantivy_dir())?;
        register_analyzers(&index);
        let mut writer: IndexWriter<EventDocument> =
            index.writer_with_num_threads(1, CATCH_UP_MEMORY_BYTES)?;
        let mut indexer = Indexer::new(ledger, open.fields, checkpoint);
        indexer.apply_from(&mut writer, None, None)?;
        indexer.commit(&mut writer)?;
        writer.wait_merging_threads()?;
        Ok(())
    }

    /// Builds the index again from the whole ledger (one log line says why).
    fn rebuild(
        &self,
        ledger: &Ledger,
        why: &str,
        progress: Option<&mut dyn FnMut(u64, u64)>,
    ) -> Result<Arc<Open>, RecallError> {
        let _in_process = self.updating.lock().unwrap_or_else(|p| p.into_inner());
        let _lock = self.lock()?;
        let end = ledger_end(ledger)?;
        // Another process may have rebuilt it while this one waited for the lock.
        if progress.is_none()
            && let Ok(open) = self.open_checked(ledger, end)
        {
            return Ok(open);
        }
        let path = self.tantivy_dir();
        if why == "there is none yet" {
            tracing::info!(path = %path.display(), "building the search index from the ledger");
        } else {
            tracing::warn!(path = %path.display(), "rebuilding the search index from the ledger: {why}");
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(RecallError::Io { path, source }),
        }
        crate::private::own_dir(&self.dir)
            .and_then(|()| crate::private::create_dir_all(&path))
            .map_err(|source| RecallError::Io {
                path: path.clone(),
                source,
            })?;
        let (schema, fields) = schema();
        let index = Index::create_in_dir(&path, schema)?;
        register_analyzers(&index);
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, REBUILD_THREADS);
        let mut writer: IndexWriter<EventDocument> =
            index.writer_with_num_threads(threads, REBUILD_MEMORY_BYTES * threads)?;
        let mut indexer = Indexer::new(ledger, fields, Checkpoint::empty());
        let total = match end {
            LedgerEnd::Positioned(last) => last,
            LedgerEnd::Unpositioned(events) => events,
        };
        let mut progress = progress;
        let mut report = |done: u64| {
            if let Some(progress) = progress.as_mut() {
                progress(done, total);
            }
        };
        if let LedgerEnd::Unpositioned(_) = end {
            indexer.apply_unpositioned(&mut writer)?;
        } else {
            indexer.apply_from(&mut writer, Some(REBUILD_COMMIT_EVERY), Some(&mut report))?;
        }
        indexer.commit(&mut writer)?;
        report(total);
        writer.wait_merging_threads()?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Arc::new(Open {
            index,
            reader,
            fields,
            max_position: Mutex::new(None),
            heads: Mutex::new((0, Heads::default())),
        }))
    }
}

/// Copies the regular files of an index's Tantivy folder `from` (none of its lock files)
/// into `to`, created; returns how many. Reads `from` only.
fn copy_index_files(from: &Path, to: &Path) -> std::io::Result<usize> {
    if !from.join("meta.json").is_file() {
        return Ok(0);
    }
    crate::private::create_dir_all(to)?;
    let mut copied = 0;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        let lock = name.to_string_lossy().ends_with(".lock");
        if entry.file_type()?.is_file() && !lock {
            std::fs::copy(entry.path(), to.join(&name))?;
            copied += 1;
        }
    }
    Ok(copied)
}

/// The update lock: an exclusive lock on a file, held across processes until dropped.
struct UpdateLock {
    _file: std::fs::File,
}

impl UpdateLock {
    fn acquire(path: &Path) -> Result<UpdateLock, RecallError> {
        use fs4::fs_std::FileExt;
        let io = |source| RecallError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = crate::private::file_options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io)?;
        file.lock_exclusive().map_err(io)?;
        Ok(UpdateLock { _file: file })
    }
}

fn open_index(path: &Path) -> Result<Open, RecallError> {
    let index = Index::open_in_dir(path)?;
    register_analyzers(&index);
    let (expected, fields) = schema();
    if index.schema() != expected {
        return Err(RecallError::Stale(
            "its fields are not this build's".to_string(),
        ));
    }
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?;
    Ok(Open {
        index,
        reader,
        fields,
        max_position: Mutex::new(None),
        heads: Mutex::new((0, Heads::default())),
    })
}

fn read_checkpoint(index: &Index) -> Result<Checkpoint, RecallError> {
    let metas = index.load_metas()?;
    match metas.payload.as_deref() {
        None => Ok(Checkpoint::empty()),
        Some(text) => serde_json::from_str(text)
            .map_err(|e| RecallError::Stale(format!("its checkpoint does not read: {e}"))),
    }
}

/// Whether an index at `checkpoint` may serve this ledger: `Ok(Err(why))` when not.
fn validate(
    checkpoint: &Checkpoint,
    ledger: &Ledger,
    end: LedgerEnd,
) -> Result<Result<(), String>, RecallError> {
    if checkpoint.recall != RECALL_SCHEMA {
        return Ok(Err(format!(
            "it was made by index schema {}, this build's is {RECALL_SCHEMA}",
            checkpoint.recall
        )));
    }
    match (end, checkpoint.unpositioned) {
        (LedgerEnd::Positioned(_), Some(_)) => {
            return Ok(Err(
                "it was made before the ledger's events had positions".into()
            ));
        }
        (LedgerEnd::Unpositioned(events), Some(applied)) => {
            return Ok(if applied > events {
                Err(format!(
                    "it holds {applied} events, the ledger {events}: not this ledger's"
                ))
            } else {
                Ok(())
            });
        }
        (LedgerEnd::Unpositioned(_), None) if checkpoint.position > 0 => {
            return Ok(Err("the ledger has no positions, the index does".into()));
        }
        _ => {}
    }
    let last = match end {
        LedgerEnd::Positioned(last) => last,
        LedgerEnd::Unpositioned(_) => 0,
    };
    if checkpoint.position > last {
        return Ok(Err(format!(
            "it is indexed up to position {}, beyond the ledger's last ({last}): not this ledger's",
            checkpoint.position
        )));
    }
    if checkpoint.position > 0 {
        let at = ledger.events_from_position(checkpoint.position, 1)?;
        let matches = at
            .first()
            .is_some_and(|e| e.position == checkpoint.position && e.event.hash == checkpoint.hash);
        if !matches {
            return Ok(Err(format!(
                "the ledger's event at position {} is not the one it indexed: not this ledger's",
                checkpoint.position
            )));
        }
    }
    Ok(Ok(()))
}
