//! The vector store of a redb ledger: `<data dir>/vectors/vectors.redb`, derived data
//! that can be deleted at any time (the embedder makes it again).
//!
//! Owns: [`RedbVectors`] (its file, opened on first use in redb's multi-writer mode so
//! several processes share it; its tables; the embed lock `vectors/embed.lock`; the
//! [`BitIndex`] of each model it searched, brought up to the store's end before each
//! search). Must not: write to the ledger.
//!
//! Tables, keyed by (model, position):
//! - `vector_codes`: the filter columns (session, seq, time, kind) and the sign bits:
//!   what a process reads into memory (about 80 bytes a vector at 384 dimensions);
//! - `vector_values`: the vector as little-endian f32s, read only to rescore candidates;
//! - `vector_checkpoints`: model → [`VectorCheckpoint`] as JSON.

use super::quantized::BitIndex;
use super::{
    EmbedLock, EventVector, Nearest, VectorCheckpoint, VectorFilter, VectorStore, best,
    check_dimensions, cosine, decode_values, encode_values, rescored_for, stored_kind,
};
use crate::event::{Families, SessionId, SessionKind};
use crate::recall::RecallError;
use redb::{ConcurrencyMode, Database, ReadTransaction, ReadableDatabase, TableDefinition};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The store's folder inside the data directory.
pub(crate) const VECTORS_DIR: &str = "vectors";
/// The redb file inside [`VECTORS_DIR`].
const VECTORS_FILE: &str = "vectors.redb";
/// The embed lock, inside [`VECTORS_DIR`].
const LOCK_FILE: &str = "embed.lock";
/// redb's cache for the store.
const CACHE_BYTES: usize = 64 * 1024 * 1024;

const CODES: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("vector_codes");
const VALUES: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("vector_values");
const CHECKPOINTS: TableDefinition<&str, &str> = TableDefinition::new("vector_checkpoints");

fn failed(error: impl std::fmt::Display) -> RecallError {
    RecallError::Vectors(error.to_string())
}

/// The vectors of one data directory.
pub(crate) struct RedbVectors {
    dir: PathBuf,
    db: Mutex<Option<Arc<Database>>>,
    /// Each searched model's in-memory index.
    loaded: Mutex<HashMap<String, BitIndex>>,
    /// What the kinds its rows name are read as.
    families: Families,
}

/// The bytes of a `vector_codes` row: session (16), seq (8), time (8), kind length (1),
/// kind, then the sign bits.
fn encode_code(v: &EventVector) -> Vec<u8> {
    let kind = v.kind.as_str().as_bytes();
    let mut out = Vec::with_capacity(33 + kind.len());
    out.extend_from_slice(&v.session.0.0.to_le_bytes());
    out.extend_from_slice(&v.seq.to_le_bytes());
    out.extend_from_slice(&v.at.to_le_bytes());
    out.push(kind.len() as u8);
    out.extend_from_slice(kind);
    out
}

/// Session, seq, time and kind of a `vector_codes` row.
fn decode_code(bytes: &[u8], families: &Families) -> Option<(SessionId, u64, u64, SessionKind)> {
    let session = u128::from_le_bytes(bytes.get(0..16)?.try_into().ok()?);
    let seq = u64::from_le_bytes(bytes.get(16..24)?.try_into().ok()?);
    let at = u64::from_le_bytes(bytes.get(24..32)?.try_into().ok()?);
    let len = *bytes.get(32)? as usize;
    let kind = std::str::from_utf8(bytes.get(33..33 + len)?).ok()?;
    Some((
        SessionId(ulid::Ulid(session)),
        seq,
        at,
        stored_kind(kind, families),
    ))
}

impl RedbVectors {
    pub(crate) fn new(dir: PathBuf, families: Families) -> Self {
        RedbVectors {
            dir,
            db: Mutex::new(None),
            loaded: Mutex::new(HashMap::new()),
            families,
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(VECTORS_FILE)
    }

    fn io(&self, source: std::io::Error) -> RecallError {
        RecallError::Io {
            path: self.dir.clone(),
            source,
        }
    }

    /// The database, opened (and its tables made) on first use.
    fn db(&self) -> Result<Arc<Database>, RecallError> {
        let mut held = self.db.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(db) = held.as_ref() {
            return Ok(db.clone());
        }
        crate::private::own_dir(&self.dir).map_err(|e| self.io(e))?;
        let db = Database::builder()
            .set_concurrency_mode(ConcurrencyMode::MultiWriter)
            .set_cache_size(CACHE_BYTES)
            .create(self.path())
            .map_err(failed)?;
        let txn = db.begin_write().map_err(failed)?;
        txn.open_table(CODES).map_err(failed)?;
        txn.open_table(VALUES).map_err(failed)?;
        txn.open_table(CHECKPOINTS).map_err(failed)?;
        txn.commit().map_err(failed)?;
        let db = Arc::new(db);
        *held = Some(db.clone());
        Ok(db)
    }

    /// Whether the store's file exists (nothing is created to find out).
    pub(crate) fn exists(&self) -> bool {
        self.path().exists()
    }

    fn read(&self) -> Result<ReadTransaction, RecallError> {
        self.db()?.begin_read().map_err(failed)
    }

    fn read_checkpoint(
        txn: &ReadTransaction,
        model: &str,
    ) -> Result<Option<VectorCheckpoint>, RecallError> {
        let table = txn.open_table(CHECKPOINTS).map_err(failed)?;
        let Some(text) = table.get(model).map_err(failed)? else {
            return Ok(None);
        };
        serde_json::from_str(text.value()).map(Some).map_err(failed)
    }

    /// Brings `index` up to the store's end for `model` (rebuilt when the store was
    /// cleared or its vectors changed length).
    fn refresh(
        &self,
        txn: &ReadTransaction,
        model: &str,
        checkpoint: &VectorCheckpoint,
        loaded: &mut HashMap<String, BitIndex>,
    ) -> Result<(), RecallError> {
        let (index, stale) = super::quantized::loaded_for(loaded, model, checkpoint);
        let from = index.through() + 1;
        let codes = txn.open_table(CODES).map_err(failed)?;
        for row in codes
            .range((model, from)..=(model, u64::MAX))
            .map_err(failed)?
        {
            let (key, value) = row.map_err(failed)?;
            let position = key.value().1;
            let bytes = value.value();
            let Some((session, seq, at, kind)) = decode_code(bytes, &self.families) else {
                continue;
            };
            let len = 33 + bytes[32] as usize;
            index.push_code(position, session, seq, at, kind, &bytes[len..]);
        }
        if stale {
            tracing::info!(
                model,
                vectors = index.len(),
                memory_kib = index.memory_bytes() / 1024,
                "vectors loaded for search"
            );
        }
        Ok(())
    }
}

impl VectorStore for RedbVectors {
    fn checkpoint(&self, model: &str) -> Result<Option<VectorCheckpoint>, RecallError> {
        if !self.exists() {
            return Ok(None);
        }
        Self::read_checkpoint(&self.read()?, model)
    }

    fn put(
        &self,
        model: &str,
        vectors: &[EventVector],
        checkpoint: &VectorCheckpoint,
    ) -> Result<(), RecallError> {
        let db = self.db()?;
        let txn = db.begin_write().map_err(failed)?;
        {
            let mut codes = txn.open_table(CODES).map_err(failed)?;
            let mut values = txn.open_table(VALUES).map_err(failed)?;
            let words = (checkpoint.dimensions as usize).div_ceil(64).max(1);
            for v in vectors {
                let mut code = encode_code(v);
                let mut bits = Vec::with_capacity(words);
                super::quantized::encode(&v.vector, words, &mut bits);
                for word in bits {
                    code.extend_from_slice(&word.to_le_bytes());
                }
                codes
                    .insert((model, v.position), code.as_slice())
                    .map_err(failed)?;
                values
                    .insert((model, v.position), encode_values(&v.vector).as_slice())
                    .map_err(failed)?;
            }
            let mut checkpoints = txn.open_table(CHECKPOINTS).map_err(failed)?;
            let text = serde_json::to_string(checkpoint).expect("a checkpoint serializes");
            checkpoints.insert(model, text.as_str()).map_err(failed)?;
        }
        txn.commit().map_err(failed)
    }

    fn nearest(
        &self,
        model: &str,
        query: &[f32],
        k: usize,
        filter: &VectorFilter,
    ) -> Result<Vec<Nearest>, RecallError> {
        if !self.exists() || k == 0 {
            return Ok(Vec::new());
        }
        let txn = self.read()?;
        let Some(checkpoint) = Self::read_checkpoint(&txn, model)? else {
            return Ok(Vec::new());
        };
        check_dimensions(query, &checkpoint)?;
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        self.refresh(&txn, model, &checkpoint, &mut loaded)?;
        let index = &loaded[model];
        let wanted = rescored_for(k);
        let candidates = index.candidates(query, wanted, filter);
        let values = txn.open_table(VALUES).map_err(failed)?;
        let mut found = Vec::with_capacity(candidates.len());
        for i in candidates {
            let (position, session, seq) = index.entry(i);
            let Some(bytes) = values.get((model, position)).map_err(failed)? else {
                continue;
            };
            let vector = decode_values(bytes.value());
            found.push(Nearest {
                position,
                session,
                seq,
                similarity: cosine(query, &vector),
            });
        }
        Ok(best(found, k))
    }

    fn count(&self, model: &str) -> Result<u64, RecallError> {
        if !self.exists() {
            return Ok(0);
        }
        let txn = self.read()?;
        let codes = txn.open_table(CODES).map_err(failed)?;
        let mut count = 0;
        for row in codes
            .range((model, 0)..=(model, u64::MAX))
            .map_err(failed)?
        {
            row.map_err(failed)?;
            count += 1;
        }
        Ok(count)
    }

    fn clear(&self, model: &str) -> Result<(), RecallError> {
        if !self.exists() {
            return Ok(());
        }
        let db = self.db()?;
        let txn = db.begin_write().map_err(failed)?;
        {
            let mut codes = txn.open_table(CODES).map_err(failed)?;
            codes
                .retain_in((model, 0)..=(model, u64::MAX), |_, _| false)
                .map_err(failed)?;
            let mut values = txn.open_table(VALUES).map_err(failed)?;
            values
                .retain_in((model, 0)..=(model, u64::MAX), |_, _| false)
                .map_err(failed)?;
            let mut checkpoints = txn.open_table(CHECKPOINTS).map_err(failed)?;
            checkpoints.remove(model).map_err(failed)?;
        }
        txn.commit().map_err(failed)?;
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(model);
        Ok(())
    }

    fn try_lock(&self) -> Result<Option<EmbedLock>, RecallError> {
        use fs4::fs_std::FileExt;
        crate::private::own_dir(&self.dir).map_err(|e| self.io(e))?;
        let path: &Path = &self.dir.join(LOCK_FILE);
        let file = crate::private::file_options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| self.io(e))?;
        match file.try_lock_exclusive() {
            Ok(true) => Ok(Some(EmbedLock(Box::new(file)))),
            Ok(false) => Ok(None),
            Err(e) => Err(self.io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(position: u64, values: &[f32]) -> EventVector {
        EventVector {
            position,
            session: SessionId(ulid::Ulid(7)),
            seq: position,
            at: position * 10,
            kind: SessionKind::THINKING,
            vector: values.to_vec(),
        }
    }

    #[test]
    fn put_nearest_count_clear_and_one_lock_holder() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbVectors::new(dir.path().join(VECTORS_DIR), crate::tools::families());
        assert_eq!(store.checkpoint("m").unwrap(), None);
        let checkpoint = VectorCheckpoint {
            position: 3,
            hash: "h3".into(),
            dimensions: 2,
        };
        let batch = [
            vector(1, &[1.0, 0.0]),
            vector(2, &[0.0, 1.0]),
            vector(3, &[0.7, 0.7]),
        ];
        store.put("m", &batch, &checkpoint).unwrap();
        store.put("m", &batch, &checkpoint).unwrap(); // again: nothing doubles
        assert_eq!(store.count("m").unwrap(), 3);
        assert_eq!(store.checkpoint("m").unwrap(), Some(checkpoint));
        let near = store
            .nearest("m", &[1.0, 0.1], 2, &VectorFilter::default())
            .unwrap();
        assert_eq!(
            near.iter().map(|n| n.position).collect::<Vec<_>>(),
            vec![1, 3]
        );
        let lock = store.try_lock().unwrap();
        assert!(lock.is_some());
        store.clear("m").unwrap();
        assert_eq!(store.count("m").unwrap(), 0);
        assert!(
            store
                .nearest("m", &[1.0, 0.0], 2, &VectorFilter::default())
                .unwrap()
                .is_empty()
        );
    }

    /// Issue 32: whatever bytes the vectors file holds, the store (as `open_store` hands it
    /// out, contained) answers: a value or an error, never a panic.
    #[test]
    fn a_damaged_vectors_file_fails_its_calls_without_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(VECTORS_DIR);
        {
            let store = RedbVectors::new(folder.clone(), crate::tools::families());
            let checkpoint = VectorCheckpoint {
                position: 200,
                hash: "h".into(),
                dimensions: 2,
            };
            let batch: Vec<EventVector> = (1..=200).map(|p| vector(p, &[p as f32, 1.0])).collect();
            store.put("m", &batch, &checkpoint).unwrap();
        }
        let file = folder.join(VECTORS_FILE);
        let original = std::fs::read(&file).unwrap();
        let mut failed = 0;
        for page in 1..original.len() / 4096 {
            let mut bytes = original.clone();
            for byte in &mut bytes[page * 4096..page * 4096 + 64] {
                *byte ^= 0xFF;
            }
            std::fs::write(&file, &bytes).unwrap();
            let store = super::super::ContainedVectors(RedbVectors::new(
                folder.clone(),
                crate::tools::families(),
            ));
            let filter = VectorFilter::default();
            let answers = [
                store.count("m").map(drop),
                store.checkpoint("m").map(drop),
                store.nearest("m", &[1.0, 0.0], 5, &filter).map(drop),
            ];
            failed += answers.iter().filter(|a| a.is_err()).count();
        }
        assert!(failed > 0, "the damage was met");
    }
}
