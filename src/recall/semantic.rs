//! Semantic recall: the embedder that keeps a ledger's vectors (off the write path) and
//! the semantic side of a search (the query's vector, bounded in time; the nearest
//! events). Their fusion with the lexical ranking is [`super::fusion`]'s.
//!
//! Owns: [`Semantic`] (one embeddings endpoint and one vector store for one ledger, the
//! store chosen by [`open_store`]: PostgreSQL's own, else the data directory's), its
//! steps ([`Semantic::embed_step`]: under the store's embed lock, the events after the
//! checkpoint, their searchable text ([`super::Documents`], the index's) embedded in one
//! batch, the vectors and the new checkpoint put in one transaction), the background
//! embedder of `serve` ([`Semantic::spawn_embedder`]: woken by the store's watch, bounded
//! backoff while the endpoint fails), the query's vector within [`QUERY_EMBED_TIMEOUT`]
//! and the process's embeddings runtime. Must not:
//! write to the ledger, delay an append (nothing here runs on the write path), or fail a
//! search because the endpoint does (the caller answers lexically with a note).

use super::vectors::{EventVector, Nearest, VectorCheckpoint, VectorStore};
use super::{Documents, RecallError};
use crate::provider::embeddings::{
    EmbeddingsClient, EmbeddingsConfig, EmbeddingsError, MAX_BATCH_TEXTS,
};
use crate::store::Ledger;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The longest a search waits for its query's vector; then it answers lexically.
pub(crate) const QUERY_EMBED_TIMEOUT: Duration = Duration::from_secs(2);
/// Events read per embed step (the texts among them are sent in one batch of at most
/// [`MAX_BATCH_TEXTS`]; most events have text, so twice that is read).
const EMBED_STEP_EVENTS: usize = 2 * MAX_BATCH_TEXTS;
/// The embedder's longest wait between attempts while the endpoint fails (so events
/// missed while it was down are embedded within this, plus a batch, of its return).
pub(crate) const MAX_EMBEDDER_BACKOFF: Duration = Duration::from_secs(10);
/// How often the embedder looks again while another process holds the embed lock.
const LOCK_BUSY_RETRY: Duration = Duration::from_millis(500);
/// Query vectors remembered (the pages of one query, a query asked again).
const QUERY_CACHE_ENTRIES: usize = 64;

/// The runtime every embeddings call runs on (one worker thread; made on first use).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("recall-embeddings")
            .enable_all()
            .build()
            .expect("the embeddings runtime starts")
    })
}

/// Runs `future` on the embeddings runtime and waits for it, at most `timeout` (from any
/// thread, inside another runtime's blocking task included).
fn run<T: Send + 'static>(
    future: impl std::future::Future<Output = T> + Send + 'static,
    timeout: Option<Duration>,
) -> Option<T> {
    let (send, receive) = std::sync::mpsc::sync_channel(1);
    let task = runtime().spawn(async move {
        let _ = send.send(future.await);
    });
    let got = match timeout {
        Some(timeout) => receive.recv_timeout(timeout).ok(),
        None => receive.recv().ok(),
    };
    if got.is_none() {
        task.abort();
    }
    got
}

/// What one embed step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Embedded `vectors` texts, the checkpoint now at `position`.
    Embedded { vectors: usize, position: u64 },
    /// Nothing after the checkpoint.
    Current,
    /// Another process holds the embed lock.
    Busy,
}

/// Why an embed step failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EmbedError {
    #[error(transparent)]
    Endpoint(#[from] EmbeddingsError),
    #[error(transparent)]
    Recall(#[from] RecallError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("the embeddings call was abandoned")]
    Abandoned,
}

/// The semantic side of one ledger's recall.
pub(crate) struct Semantic {
    client: Arc<EmbeddingsClient>,
    store: Arc<dyn VectorStore>,
    queries: Mutex<HashMap<String, Arc<Vec<f32>>>>,
}

/// The vector store of `ledger`: the backend's own (PostgreSQL's tables), else a redb
/// file in its data directory; `None` on a backend with a search but no vector store.
pub(crate) fn open_store(ledger: &Ledger) -> Option<Arc<dyn VectorStore>> {
    if let Some(store) = super::postgres::vector_store(ledger) {
        return Some(Arc::new(store));
    }
    Some(super::vectors::data_dir_store(ledger))
}

impl Semantic {
    /// The semantic side of `ledger` when an endpoint is configured for its data
    /// directory and its backend keeps vectors; a broken setting is logged.
    pub(crate) fn for_ledger(ledger: &Ledger) -> Option<Arc<Semantic>> {
        let data_dir = ledger.path().parent().map(std::path::Path::to_path_buf);
        let config = match EmbeddingsConfig::load(data_dir.as_deref()) {
            Ok(config) => config?,
            Err(problem) => {
                tracing::warn!("embeddings are off: {problem}");
                return None;
            }
        };
        let store = open_store(ledger)?;
        Some(Arc::new(Semantic::new(config, store)))
    }

    pub(crate) fn new(config: EmbeddingsConfig, store: Arc<dyn VectorStore>) -> Self {
        Semantic {
            client: Arc::new(EmbeddingsClient::new(config)),
            store,
            queries: Mutex::new(HashMap::new()),
        }
    }

    /// The model vectors are made with (and keyed by).
    pub(crate) fn model(&self) -> &str {
        &self.client.config().model
    }

    pub(crate) fn store(&self) -> &Arc<dyn VectorStore> {
        &self.store
    }

    /// The vector of a query, within [`QUERY_EMBED_TIMEOUT`]; `Err` says (in one line) why
    /// there is none.
    pub(crate) fn embed_query(&self, text: &str) -> Result<Arc<Vec<f32>>, String> {
        if let Some(vector) = self
            .queries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(text)
        {
            return Ok(vector.clone());
        }
        let client = self.client.clone();
        let texts = vec![text.to_string()];
        let answer = run(
            async move { client.embed_once(&texts).await },
            Some(QUERY_EMBED_TIMEOUT),
        );
        let vector = match answer {
            None => {
                return Err(format!(
                    "the embeddings endpoint did not answer within {} s",
                    QUERY_EMBED_TIMEOUT.as_secs()
                ));
            }
            Some(Err(error)) => return Err(error.to_string()),
            Some(Ok(mut vectors)) => Arc::new(vectors.pop().unwrap_or_default()),
        };
        let mut queries = self.queries.lock().unwrap_or_else(|p| p.into_inner());
        if queries.len() >= QUERY_CACHE_ENTRIES {
            queries.clear();
        }
        queries.insert(text.to_string(), vector.clone());
        Ok(vector)
    }

    /// The nearest `k` events to `vector` under `filter`.
    pub(crate) fn nearest(
        &self,
        vector: &[f32],
        k: usize,
        filter: &super::vectors::VectorFilter,
    ) -> Result<Vec<Nearest>, RecallError> {
        self.store.nearest(self.model(), vector, k, filter)
    }

    /// The store's checkpoint, checked against `ledger`: cleared (and `None`) when it is
    /// not this ledger's (beyond its end, or another event at its position).
    fn checked_checkpoint(&self, ledger: &Ledger) -> Result<VectorCheckpoint, EmbedError> {
        let model = self.model();
        let Some(checkpoint) = self.store.checkpoint(model)? else {
            return Ok(VectorCheckpoint::default());
        };
        if checkpoint.position == 0 {
            return Ok(checkpoint);
        }
        let at = ledger.events_from_position(checkpoint.position, 1)?;
        let ours = at
            .first()
            .is_some_and(|e| e.position == checkpoint.position && e.event.hash == checkpoint.hash);
        if ours {
            return Ok(checkpoint);
        }
        tracing::warn!(
            model,
            "the vectors were made for another ledger (position {} differs): embedding again",
            checkpoint.position
        );
        self.store.clear(model)?;
        Ok(VectorCheckpoint::default())
    }

    /// Embeds the next batch of events after the checkpoint, under the embed lock.
    pub(crate) fn embed_step(&self, ledger: &Ledger) -> Result<Step, EmbedError> {
        let Some(_lock) = self.store.try_lock()? else {
            return Ok(Step::Busy);
        };
        let mut checkpoint = self.checked_checkpoint(ledger)?;
        let events = ledger.events_from_position(checkpoint.position + 1, EMBED_STEP_EVENTS)?;
        if events.is_empty() {
            return Ok(Step::Current);
        }
        let mut documents = Documents::new(ledger);
        let mut pending: Vec<EventVector> = Vec::new();
        let mut texts: Vec<String> = Vec::new();
        for positioned in events {
            if let Some(searchable) = documents.searchable(&positioned.event)? {
                if texts.len() == MAX_BATCH_TEXTS {
                    break;
                }
                texts.push(searchable.text);
                pending.push(EventVector {
                    position: positioned.position,
                    session: positioned.event.session,
                    seq: positioned.event.seq,
                    at: positioned.event.at,
                    kind: searchable.kind,
                    vector: Vec::new(),
                });
            }
            checkpoint.position = positioned.position;
            checkpoint.hash = positioned.event.hash.clone();
        }
        if !texts.is_empty() {
            let client = self.client.clone();
            let vectors = run(async move { client.embed(&texts).await }, None)
                .ok_or(EmbedError::Abandoned)??;
            let dimensions = vectors[0].len() as u32;
            if checkpoint.dimensions != 0 && checkpoint.dimensions != dimensions {
                tracing::warn!(
                    model = self.model(),
                    "the model's vectors changed length ({} → {dimensions}): embedding again",
                    checkpoint.dimensions
                );
                self.store.clear(self.model())?;
                return Ok(Step::Embedded {
                    vectors: 0,
                    position: 0,
                });
            }
            checkpoint.dimensions = dimensions;
            for (slot, vector) in pending.iter_mut().zip(vectors) {
                slot.vector = vector;
            }
        }
        self.store.put(self.model(), &pending, &checkpoint)?;
        Ok(Step::Embedded {
            vectors: pending.len(),
            position: checkpoint.position,
        })
    }

    /// Embeds every event after the checkpoint (`reindex --embeddings`, the bench),
    /// reporting (position reached, last position); waits while another process embeds.
    pub(crate) fn catch_up(
        &self,
        ledger: &Ledger,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64, EmbedError> {
        loop {
            match self.embed_step(ledger)? {
                Step::Embedded { position, .. } => progress(position, ledger.last_position()?),
                Step::Current => return Ok(self.checked_checkpoint(ledger)?.position),
                Step::Busy => std::thread::sleep(LOCK_BUSY_RETRY),
            }
        }
    }

    /// Starts the background embedder of `serve`: it embeds what is behind, then each new
    /// event after its commit, in batches; while the endpoint fails it waits (doubling from
    /// the configured backoff, at most [`MAX_EMBEDDER_BACKOFF`]) and tries again.
    pub(crate) fn spawn_embedder(self: Arc<Self>, ledger: Ledger) {
        let spawned = std::thread::Builder::new()
            .name("recall-embedder".into())
            .spawn(move || self.embedder(ledger));
        if let Err(error) = spawned {
            tracing::warn!(%error, "the background embedder did not start");
        }
    }

    fn embedder(&self, ledger: Ledger) {
        tracing::info!(
            model = self.model(),
            "embedding new events in the background"
        );
        let first_backoff = self.client.config().backoff.max(Duration::from_millis(10));
        let mut backoff = first_backoff;
        loop {
            match self.embed_step(&ledger) {
                Ok(Step::Embedded { .. }) => backoff = first_backoff,
                Ok(Step::Busy) => std::thread::sleep(LOCK_BUSY_RETRY),
                Ok(Step::Current) => {
                    backoff = first_backoff;
                    let from = match self.store.checkpoint(self.model()) {
                        Ok(checkpoint) => checkpoint.map_or(0, |c| c.position) + 1,
                        Err(_) => 1,
                    };
                    let mut watch = ledger.watch(from);
                    // Wakes on this process's commits at once, other processes' within the
                    // watch's poll.
                    let _ = runtime().block_on(watch.next());
                }
                Err(error) => {
                    tracing::warn!(
                        retry_in_ms = backoff.as_millis() as u64,
                        "embedding new events failed: {error}"
                    );
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(MAX_EMBEDDER_BACKOFF);
                }
            }
        }
    }
}
