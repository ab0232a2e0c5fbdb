//! Vectors of events, as a projection of the ledger: the contract a vector store keeps
//! ([`VectorStore`]) and what passes through it.
//!
//! Owns: [`VectorStore`] (put vectors of (event, model) with a checkpoint in one atomic
//! step, the nearest k of a query vector under the search filters, how far they reach,
//! the right to embed: one process at a time), the shapes ([`EventVector`],
//! [`VectorCheckpoint`], [`VectorFilter`], [`Nearest`]), the redb store of a data
//! directory ([`redb_store`]) and the memory-bounded search it uses ([`quantized`]:
//! one bit per dimension in memory, exact rescoring of the best candidates from disk).
//! [`data_dir_store`] opens the redb one of a ledger. Must not: write to the ledger, call an
//! embeddings endpoint (the embedder in [`super::semantic`] does), or know another
//! store (PostgreSQL's, `super::postgres::vectors`, implements this contract).
//!
//! An event is named by its ledger position (unique across the ledger) and carries its
//! session, seq, commit time and session kind, so filters need no ledger read. Vectors
//! are keyed by (model, position): putting one twice replaces it, so a batch written again
//! after a crash doubles nothing; the checkpoint is written in the same transaction as the
//! vectors, so a crash loses nothing that the checkpoint claims.

pub(crate) mod quantized;
pub(crate) mod redb_store;

use super::RecallError;
use crate::event::{Families, SessionId, SessionKind};
use crate::store::Ledger;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One event's vector.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EventVector {
    /// The event's ledger position.
    pub position: u64,
    pub session: SessionId,
    pub seq: u64,
    /// Commit time, ms since the epoch.
    pub at: u64,
    /// The session's kind.
    pub kind: SessionKind,
    pub vector: Vec<f32>,
}

/// How far a model's vectors reach: every event up to `position` (whose hash is `hash`)
/// has been embedded (or had no text).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct VectorCheckpoint {
    pub position: u64,
    pub hash: String,
    /// Length of the model's vectors (0 before the first).
    pub dimensions: u32,
}

/// The filters of a search, on vectors.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct VectorFilter {
    pub session: Option<SessionId>,
    /// None: every kind.
    pub kinds: Vec<SessionKind>,
    /// Commit time bounds, inclusive.
    pub since: Option<u64>,
    pub until: Option<u64>,
    /// Highest position (a cursor's bound).
    pub bound: Option<u64>,
}

/// A near event: its position, session and seq, and its cosine similarity to the query.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Nearest {
    pub position: u64,
    pub session: SessionId,
    pub seq: u64,
    pub similarity: f32,
}

/// The right to embed a ledger's events, held by one process at a time (dropped: given
/// up).
pub(crate) struct EmbedLock(#[allow(dead_code)] pub Box<dyn Send>);

/// Where a ledger's vectors are kept.
pub(crate) trait VectorStore: Send + Sync {
    /// How far `model`'s vectors reach (`None`: none yet).
    fn checkpoint(&self, model: &str) -> Result<Option<VectorCheckpoint>, RecallError>;
    /// Stores `vectors` of `model` and its new `checkpoint`, atomically (all or none).
    fn put(
        &self,
        model: &str,
        vectors: &[EventVector],
        checkpoint: &VectorCheckpoint,
    ) -> Result<(), RecallError>;
    /// The `k` vectors of `model` most like `query` (cosine) that `filter` admits, best
    /// first.
    fn nearest(
        &self,
        model: &str,
        query: &[f32],
        k: usize,
        filter: &VectorFilter,
    ) -> Result<Vec<Nearest>, RecallError>;
    /// How many vectors `model` has.
    fn count(&self, model: &str) -> Result<u64, RecallError>;
    /// Removes `model`'s vectors and checkpoint.
    fn clear(&self, model: &str) -> Result<(), RecallError>;
    /// The right to embed, `None` while another process holds it.
    fn try_lock(&self) -> Result<Option<EmbedLock>, RecallError>;
}

/// The redb vector store of `ledger`'s data directory (`vectors/` beside the ledger file),
/// its engine's panics contained. Which store a ledger uses is `semantic::open_store`'s
/// choice (PostgreSQL's own tables first), above both.
pub(crate) fn data_dir_store(ledger: &Ledger) -> Arc<dyn VectorStore> {
    let dir = ledger
        .path()
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(redb_store::VECTORS_DIR);
    Arc::new(ContainedVectors(redb_store::RedbVectors::new(
        dir,
        ledger.families().clone(),
    )))
}

/// A vector store in a redb file, with a panic of redb on a damaged page (it assumes a
/// sound file) contained: the call fails as the vector store failing, which a search
/// answers lexically with a note and the embedder retries later. Vectors are derived data:
/// deleting `vectors/` (or `reindex --embeddings`) makes them again.
struct ContainedVectors<S>(S);

impl<S> ContainedVectors<S> {
    fn call<T>(&self, call: impl FnOnce(&S) -> Result<T, RecallError>) -> Result<T, RecallError> {
        crate::store::damage::catch_quietly(|| call(&self.0)).unwrap_or_else(|message| {
            Err(RecallError::Vectors(format!(
                "its file is damaged ({message}); it is derived data: delete the vectors \
                 folder beside the ledger, or run `reasoning-ledger reindex --embeddings`"
            )))
        })
    }
}

impl<S: VectorStore> VectorStore for ContainedVectors<S> {
    fn checkpoint(&self, model: &str) -> Result<Option<VectorCheckpoint>, RecallError> {
        self.call(|store| store.checkpoint(model))
    }

    fn put(
        &self,
        model: &str,
        vectors: &[EventVector],
        checkpoint: &VectorCheckpoint,
    ) -> Result<(), RecallError> {
        self.call(|store| store.put(model, vectors, checkpoint))
    }

    fn nearest(
        &self,
        model: &str,
        query: &[f32],
        k: usize,
        filter: &VectorFilter,
    ) -> Result<Vec<Nearest>, RecallError> {
        self.call(|store| store.nearest(model, query, k, filter))
    }

    fn count(&self, model: &str) -> Result<u64, RecallError> {
        self.call(|store| store.count(model))
    }

    fn clear(&self, model: &str) -> Result<(), RecallError> {
        self.call(|store| store.clear(model))
    }

    fn try_lock(&self) -> Result<Option<EmbedLock>, RecallError> {
        self.call(|store| store.try_lock())
    }
}

/// The session kind a vector row stored, among `families`: a kind they do not know (a
/// family removed since) reads as the one every ledger has, as recall's own session
/// lookup does.
pub(crate) fn stored_kind(text: &str, families: &Families) -> SessionKind {
    families.kind_named(text).unwrap_or(SessionKind::THINKING)
}

/// A vector as stored by both stores: each value's little-endian bytes, in order.
pub(crate) fn encode_values(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The vector [`encode_values`] stored.
pub(crate) fn decode_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Candidates the sign bits hand to exact rescoring per match asked for (both stores).
pub(crate) const RESCORE_PER_MATCH: usize = 10;

/// Fewest candidates rescored (small stores are searched exactly).
pub(crate) const MIN_RESCORED: usize = 256;

/// How many candidates the sign bits hand to exact rescoring for `k` matches.
pub(crate) fn rescored_for(k: usize) -> usize {
    (k * RESCORE_PER_MATCH).max(MIN_RESCORED)
}

/// Refuses a query whose vector is not as long as the stored ones.
pub(crate) fn check_dimensions(
    query: &[f32],
    checkpoint: &VectorCheckpoint,
) -> Result<(), RecallError> {
    if checkpoint.dimensions as usize != query.len() {
        return Err(RecallError::Vectors(format!(
            "the query's vector has {} dimensions, the stored ones {}",
            query.len(),
            checkpoint.dimensions
        )));
    }
    Ok(())
}

/// The `k` best of `found`: most similar first, the later position first among equals.
pub(crate) fn best(mut found: Vec<Nearest>, k: usize) -> Vec<Nearest> {
    found.sort_by(|a, b| {
        b.similarity
            .total_cmp(&a.similarity)
            .then(b.position.cmp(&a.position))
    });
    found.truncate(k);
    found
}

/// Cosine similarity of two vectors of one length (0 when either is all zeros).
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut aa, mut bb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        0.0
    } else {
        dot / (aa.sqrt() * bb.sqrt())
    }
}
