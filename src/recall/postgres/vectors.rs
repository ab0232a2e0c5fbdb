//! PostgreSQL's vector store ([`VectorStore`]): the vectors of a team's ledger, in the
//! same database, so every server of the team searches the same vectors and one of them
//! embeds at a time.
//!
//! Owns: what is kept in the tables of schema version 3 (made by the store's schema:
//! `ledger_vectors`, one row per (model, position) with the filter columns and the vector
//! as little-endian f32s, the portable form every server can read;
//! `ledger_vector_checkpoints`, model → [`VectorCheckpoint`] as JSON), [`PgVectors`] and
//! its two ways to search:
//! - **pgvector** (the `vector` extension is installed, or can be: `CREATE EXTENSION IF
//!   NOT EXISTS vector` is tried once): a table `ledger_vectors_hnsw` (model, position,
//!   `embedding vector`), made at run time beside `ledger_vectors` and filled from it, with
//!   one HNSW index (cosine) per model and length of vector, partial on the model. Filling
//!   the table and making an index happen before a put, on the embedder's path (minutes on
//!   a large ledger), never in a search. A search asks the index for the nearest rows
//!   under the filters (until the index is made and the table full, the sign bits below
//!   serve); when a narrow filter leaves the index's candidates short of `k`, it scans the
//!   admitted rows exactly (pgvector's own distance, in SQL).
//! - **without pgvector** (not installed, or no right to create it: said once in the log):
//!   the same memory-bounded search as a redb ledger's ([`BitIndex`]: one sign bit per
//!   dimension in this process's memory, brought up to the table's end before each search;
//!   the best candidates rescored exactly from their stored vectors).
//!
//! The embed lock is a session-level advisory lock of this schema, held by one connection
//! for as long as the [`EmbedLock`] lives. Must not: write a ledger table, or let a
//! `postgres` type out of this module.

use crate::event::Families;
use crate::recall::RecallError;
use crate::recall::vectors::quantized::{self, BitIndex};
use crate::recall::vectors::{
    EmbedLock, EventVector, Nearest, VectorCheckpoint, VectorFilter, VectorStore, best,
    check_dimensions, cosine, decode_values, encode_values, rescored_for, stored_kind,
};
use crate::store::StoreError;
use crate::store::postgres::database::{
    Database, blocking, query_error, quote_ident, quote_literal, session_key, session_of, to_i64,
};
use postgres::Client;
use postgres::types::ToSql;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

/// The extension's name.
const EXTENSION: &str = "vector";

/// The pgvector table, made at run time where the extension is.
const HNSW_TABLE: &str = "ledger_vectors_hnsw";

/// First key of the embed lock's advisory lock (the second is the schema's hash):
/// "rlvec" in ASCII.
const EMBED_LOCK_CLASS: i32 = 0x726c_7665;

/// The HNSW search's candidate list (`hnsw.ef_search`) per match asked for; pgvector's
/// default is 40 in all.
const EF_SEARCH_PER_MATCH: usize = 4;

/// Bounds of `hnsw.ef_search` (pgvector accepts 1..=1000).
const EF_SEARCH_RANGE: (usize, usize) = (40, 1000);

/// Rows copied into the pgvector table per statement when it is filled.
const FILL_BATCH_ROWS: usize = 500;

/// How this database searches vectors, found on first use.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Search {
    /// pgvector, its objects in this (quoted) schema.
    Pgvector { schema: String },
    /// No pgvector: the in-memory sign bits and exact rescoring.
    Bits,
}

/// The vectors of one PostgreSQL ledger.
pub(crate) struct PgVectors {
    database: Database,
    /// What the kinds its rows name are read as.
    families: Families,
    search: OnceLock<Search>,
    /// HNSW indexes this process made or found, by name.
    indexes: Mutex<HashSet<String>>,
    /// Whether this process filled the pgvector table (once, before its first put).
    filled: Mutex<bool>,
    /// Indexes found ready to serve searches: present and covering every vector of their
    /// model (the pgvector table filled), by name.
    ready: Mutex<HashSet<String>>,
    /// Without pgvector: each searched model's in-memory index.
    loaded: Mutex<HashMap<String, BitIndex>>,
    /// The embed lock's connection, kept between holders.
    lock_client: Arc<Mutex<Option<Client>>>,
}

fn vectors_error(error: StoreError) -> RecallError {
    RecallError::Vectors(error.to_string())
}

fn failed(what: &'static str) -> impl Fn(postgres::Error) -> RecallError {
    move |error| vectors_error(query_error(what)(error))
}

/// pgvector's text form of `vector`: `[x,y,…]`.
fn vector_text(vector: &[f32]) -> String {
    let mut text = String::with_capacity(vector.len() * 12 + 2);
    text.push('[');
    for (i, x) in vector.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        // Finite by construction (an embedding); pgvector refuses NaN and infinities.
        let x = if x.is_finite() { *x } else { 0.0 };
        let _ = write!(text, "{x}");
    }
    text.push(']');
    text
}

/// The name of the HNSW index of `model`'s vectors of `dimensions`.
fn index_name(model: &str, dimensions: u32) -> String {
    let digest = blake3::hash(format!("{model}\u{0}{dimensions}").as_bytes());
    format!("{HNSW_TABLE}_{}", &digest.to_hex()[..16])
}

/// The SQL conditions of `filter` on table alias `v`, its parameters appended to `params`.
fn filter_sql(filter: &VectorFilter, params: &mut Vec<Box<dyn ToSql + Sync>>) -> String {
    let mut sql = String::new();
    let mut push = |condition: &str, value: Box<dyn ToSql + Sync>| {
        params.push(value);
        let _ = write!(
            sql,
            " AND {}",
            condition.replace('?', &format!("${}", params.len()))
        );
    };
    if let Some(session) = filter.session {
        push("v.session = ?", Box::new(session_key(session).to_vec()));
    }
    if !filter.kinds.is_empty() {
        let kinds: Vec<String> = filter
            .kinds
            .iter()
            .map(|k| k.as_str().to_string())
            .collect();
        push("v.kind = ANY(?)", Box::new(kinds));
    }
    if let Some(since) = filter.since {
        push("v.at >= ?", Box::new(to_i64(since)));
    }
    if let Some(until) = filter.until {
        push("v.at <= ?", Box::new(to_i64(until)));
    }
    if let Some(bound) = filter.bound {
        push("v.position <= ?", Box::new(to_i64(bound)));
    }
    sql
}

/// A row's (position, session, seq).
fn entry(row: &postgres::Row) -> Result<(u64, crate::event::SessionId, u64), RecallError> {
    let position: i64 = row.get(0);
    let session: Vec<u8> = row.get(1);
    let seq: i64 = row.get(2);
    let session = session_of(&session).map_err(vectors_error)?;
    Ok((position.max(0) as u64, session, seq.max(0) as u64))
}

/// Holds the embed lock's connection; unlocks and gives it back when dropped.
struct HeldLock {
    client: Option<Client>,
    slot: Arc<Mutex<Option<Client>>>,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        if let Some(mut client) = self.client.take() {
            let unlocked = blocking(|| {
                client.execute(
                    "SELECT pg_advisory_unlock($1, hashtext(current_schema()))",
                    &[&EMBED_LOCK_CLASS],
                )
            });
            // A connection that could not unlock is closed (which unlocks).
            if unlocked.is_ok() {
                *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(client);
            }
        }
    }
}

impl PgVectors {
    pub(crate) fn new(database: Database, families: Families) -> Self {
        PgVectors {
            database,
            families,
            search: OnceLock::new(),
            indexes: Mutex::new(HashSet::new()),
            filled: Mutex::new(false),
            ready: Mutex::new(HashSet::new()),
            loaded: Mutex::new(HashMap::new()),
            lock_client: Arc::new(Mutex::new(None)),
        }
    }

    /// Runs `f` on a pooled connection; a failed connection is not pooled again.
    fn with_client<T>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, RecallError>,
    ) -> Result<T, RecallError> {
        let mut pooled = self.database.client().map_err(vectors_error)?;
        let result = blocking(|| f(pooled.get()));
        if result.is_err() {
            pooled.discard();
        }
        result
    }

    /// How this database searches: pgvector when the extension is there or can be made,
    /// else the sign bits (said once). Found on first use.
    fn search(&self) -> Result<&Search, RecallError> {
        if let Some(search) = self.search.get() {
            return Ok(search);
        }
        let found = self.with_client(find_search)?;
        if found == Search::Bits {
            tracing::info!(
                "pgvector is not available in this database (CREATE EXTENSION vector): \
                 semantic search scans the vectors' sign bits in memory and rescores the \
                 best exactly; install pgvector for its HNSW index"
            );
        }
        Ok(self.search.get_or_init(|| found))
    }

    /// Makes the HNSW index of `model`'s vectors of `dimensions` if it is missing.
    fn ensure_index(
        &self,
        client: &mut Client,
        schema: &str,
        model: &str,
        dimensions: u32,
    ) -> Result<String, RecallError> {
        let name = index_name(model, dimensions);
        if self
            .indexes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&name)
        {
            return Ok(name);
        }
        client
            .batch_execute(&format!(
                "CREATE INDEX IF NOT EXISTS {name} ON {HNSW_TABLE} USING hnsw \
                 ((embedding::{schema}.vector({dimensions})) {schema}.vector_cosine_ops) \
                 WHERE model = {model}",
                model = quote_literal(model),
            ))
            .map_err(failed("making a vector index"))?;
        self.indexes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.clone());
        Ok(name)
    }

    /// Before a put with pgvector (on the embedder's path, under the embed lock): the
    /// pgvector table filled with what it lacks (once per process) and the index of
    /// `model`'s vectors of `dimensions` made. Either may take minutes on a large
    /// ledger; searches use the sign bits until both are done.
    fn prepare_pgvector(
        &self,
        client: &mut Client,
        schema: &str,
        model: &str,
        dimensions: u32,
    ) -> Result<(), RecallError> {
        let mut filled = self.filled.lock().unwrap_or_else(|p| p.into_inner());
        if !*filled {
            fill_hnsw_table(client, schema)?;
            *filled = true;
        }
        drop(filled);
        if dimensions > 0 {
            self.ensure_index(client, schema, model, dimensions)?;
        }
        Ok(())
    }

    /// Whether the HNSW index of `model`'s vectors of `dimensions` can serve a search:
    /// it exists and the pgvector table holds every vector of the model. Once true, it
    /// stays true (every put writes both tables).
    fn is_ready(
        &self,
        client: &mut Client,
        model: &str,
        dimensions: u32,
    ) -> Result<bool, RecallError> {
        let name = index_name(model, dimensions);
        if self
            .ready
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&name)
        {
            return Ok(true);
        }
        let ready: bool = client
            .query_one(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
                       WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace \
                       AND i.indisvalid) \
                     AND NOT EXISTS (SELECT 1 FROM ledger_vectors v WHERE v.model = $2 \
                       AND NOT EXISTS (SELECT 1 FROM {HNSW_TABLE} h \
                         WHERE h.model = v.model AND h.position = v.position))"
                ),
                &[&name, &model],
            )
            .map_err(failed("checking the vector index"))?
            .get(0);
        if ready {
            self.ready
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name);
        }
        Ok(ready)
    }

    fn read_checkpoint(
        client: &mut Client,
        model: &str,
    ) -> Result<Option<VectorCheckpoint>, RecallError> {
        let row = client
            .query_opt(
                "SELECT checkpoint FROM ledger_vector_checkpoints WHERE model = $1",
                &[&model],
            )
            .map_err(failed("reading the vectors' checkpoint"))?;
        let Some(row) = row else { return Ok(None) };
        let text: String = row.get(0);
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| RecallError::Vectors(format!("a vector checkpoint: {e}")))
    }

    /// pgvector: the index's nearest rows under `filter`, or an exact scan when a filter
    /// leaves the index short.
    fn nearest_pgvector(
        &self,
        client: &mut Client,
        schema: &str,
        model: &str,
        query: &[f32],
        k: usize,
        filter: &VectorFilter,
    ) -> Result<Vec<Nearest>, RecallError> {
        // Checked against the stored vectors' length by the caller.
        let dimensions = query.len();
        let mut params: Vec<Box<dyn ToSql + Sync>> = vec![Box::new(vector_text(query))];
        let conditions = filter_sql(filter, &mut params);
        let distance = format!(
            "h.embedding::{schema}.vector({dimensions}) OPERATOR({schema}.<=>) $1::text::{schema}.vector({dimensions})"
        );
        let ef_search = (k * EF_SEARCH_PER_MATCH).clamp(EF_SEARCH_RANGE.0, EF_SEARCH_RANGE.1);
        let model = quote_literal(model);
        let run = |client: &mut Client, order: &str| -> Result<Vec<Nearest>, RecallError> {
            let sql = format!(
                "SELECT v.position, v.session, v.seq, 1 - ({distance}) FROM {HNSW_TABLE} h \
                 JOIN ledger_vectors v ON v.model = h.model AND v.position = h.position \
                 WHERE h.model = {model}{conditions} ORDER BY {order} LIMIT {k}"
            );
            let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
            let mut txn = client
                .transaction()
                .map_err(failed("beginning a vector search"))?;
            txn.batch_execute(&format!("SET LOCAL hnsw.ef_search = {ef_search}"))
                .map_err(failed("setting the vector search's breadth"))?;
            let rows = txn
                .query(&sql, &refs)
                .map_err(failed("searching the vectors"))?;
            txn.commit().map_err(failed("ending a vector search"))?;
            rows.iter()
                .map(|row| {
                    let (position, session, seq) = entry(row)?;
                    let similarity: f64 = row.get(3);
                    Ok(Nearest {
                        position,
                        session,
                        seq,
                        similarity: similarity as f32,
                    })
                })
                .collect()
        };
        let found = run(client, &distance)?;
        if found.len() < k && *filter != VectorFilter::default() {
            // The index gave its ef_search nearest and the filter kept fewer than k:
            // the admitted rows, exactly (`+ 0`: an order the index cannot serve).
            return Ok(best(run(client, &format!("({distance}) + 0"))?, k));
        }
        Ok(best(found, k))
    }

    /// Without pgvector: the sign bits in memory, brought up to the table's end, and the
    /// best candidates rescored from their stored vectors.
    fn nearest_bits(
        &self,
        client: &mut Client,
        model: &str,
        query: &[f32],
        k: usize,
        filter: &VectorFilter,
        checkpoint: &VectorCheckpoint,
    ) -> Result<Vec<Nearest>, RecallError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        let (index, _) = quantized::loaded_for(&mut loaded, model, checkpoint);
        let rows = client
            .query(
                "SELECT position, session, seq, at, kind, vector FROM ledger_vectors \
                 WHERE model = $1 AND position > $2 ORDER BY position",
                &[&model, &to_i64(index.through())],
            )
            .map_err(failed("reading new vectors"))?;
        let words = (checkpoint.dimensions as usize).div_ceil(64).max(1);
        let mut code = Vec::with_capacity(words);
        for row in &rows {
            let (position, session, seq) = entry(row)?;
            let at: i64 = row.get(3);
            let kind: String = row.get(4);
            let vector: Vec<u8> = row.get(5);
            code.clear();
            quantized::encode(&decode_values(&vector), words, &mut code);
            let bytes: Vec<u8> = code.iter().flat_map(|w| w.to_le_bytes()).collect();
            index.push_code(
                position,
                session,
                seq,
                at.max(0) as u64,
                stored_kind(&kind, &self.families),
                &bytes,
            );
        }
        let wanted = rescored_for(k);
        let candidates = index.candidates(query, wanted, filter);
        let entries: HashMap<u64, (crate::event::SessionId, u64)> = candidates
            .iter()
            .map(|&i| {
                let (position, session, seq) = index.entry(i);
                (position, (session, seq))
            })
            .collect();
        drop(loaded);
        let positions: Vec<i64> = entries.keys().map(|p| to_i64(*p)).collect();
        let rows = client
            .query(
                "SELECT position, vector FROM ledger_vectors \
                 WHERE model = $1 AND position = ANY($2)",
                &[&model, &positions],
            )
            .map_err(failed("reading the candidates' vectors"))?;
        let found = rows
            .iter()
            .filter_map(|row| {
                let position = row.get::<_, i64>(0).max(0) as u64;
                let vector: Vec<u8> = row.get(1);
                let (session, seq) = *entries.get(&position)?;
                Some(Nearest {
                    position,
                    session,
                    seq,
                    similarity: cosine(query, &decode_values(&vector)),
                })
            })
            .collect();
        Ok(best(found, k))
    }
}

/// pgvector's schema (quoted) if the extension is installed, after trying to install it.
fn find_search(client: &mut Client) -> Result<Search, RecallError> {
    let installed = |client: &mut Client| -> Result<Option<String>, RecallError> {
        client
            .query_opt(
                "SELECT n.nspname::text FROM pg_extension e \
                 JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = $1",
                &[&EXTENSION],
            )
            .map(|row| row.map(|r| r.get(0)))
            .map_err(failed("looking for pgvector"))
    };
    let mut schema = installed(client)?;
    if schema.is_none() {
        let available: bool = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = $1)",
                &[&EXTENSION],
            )
            .map_err(failed("looking for pgvector"))?
            .get(0);
        if available {
            // Needs the right to create it (a superuser, or the database's owner where
            // pgvector is trusted); without it, the sign bits serve.
            match client.batch_execute("CREATE EXTENSION IF NOT EXISTS vector") {
                Ok(()) => schema = installed(client)?,
                Err(error) => tracing::info!(
                    error = %query_error("creating the vector extension")(error),
                    "pgvector is installed on the server but could not be created here"
                ),
            }
        }
    }
    let Some(schema) = schema else {
        return Ok(Search::Bits);
    };
    let schema = quote_ident(&schema);
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {HNSW_TABLE} (
                model text NOT NULL,
                position bigint NOT NULL,
                embedding {schema}.vector NOT NULL,
                PRIMARY KEY (model, position)
            )"
        ))
        .map_err(failed("making the pgvector table"))?;
    Ok(Search::Pgvector { schema })
}

/// Copies into the pgvector table the vectors it lacks (those stored before pgvector
/// was there), in batches.
fn fill_hnsw_table(client: &mut Client, schema: &str) -> Result<(), RecallError> {
    loop {
        let rows = client
            .query(
                &format!(
                    "SELECT v.model, v.position, v.vector FROM ledger_vectors v \
                     WHERE NOT EXISTS (SELECT 1 FROM {HNSW_TABLE} h \
                       WHERE h.model = v.model AND h.position = v.position) \
                     LIMIT {FILL_BATCH_ROWS}"
                ),
                &[],
            )
            .map_err(failed("finding vectors the pgvector table lacks"))?;
        if rows.is_empty() {
            return Ok(());
        }
        let mut txn = client
            .transaction()
            .map_err(failed("filling the pgvector table"))?;
        let insert = txn
            .prepare(&format!(
                "INSERT INTO {HNSW_TABLE} (model, position, embedding) \
                 VALUES ($1, $2, $3::text::{schema}.vector) ON CONFLICT DO NOTHING"
            ))
            .map_err(failed("filling the pgvector table"))?;
        for row in &rows {
            let model: String = row.get(0);
            let position: i64 = row.get(1);
            let vector: Vec<u8> = row.get(2);
            txn.execute(
                &insert,
                &[&model, &position, &vector_text(&decode_values(&vector))],
            )
            .map_err(failed("filling the pgvector table"))?;
        }
        txn.commit().map_err(failed("filling the pgvector table"))?;
    }
}

impl VectorStore for PgVectors {
    fn checkpoint(&self, model: &str) -> Result<Option<VectorCheckpoint>, RecallError> {
        self.with_client(|client| Self::read_checkpoint(client, model))
    }

    fn put(
        &self,
        model: &str,
        vectors: &[EventVector],
        checkpoint: &VectorCheckpoint,
    ) -> Result<(), RecallError> {
        let search = self.search()?.clone();
        self.with_client(|client| {
            if let Search::Pgvector { schema } = &search {
                self.prepare_pgvector(client, schema, model, checkpoint.dimensions)?;
            }
            let mut txn = client
                .transaction()
                .map_err(failed("beginning to store vectors"))?;
            let insert = txn
                .prepare(
                    "INSERT INTO ledger_vectors (model, position, session, seq, at, kind, vector) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (model, position) DO UPDATE \
                     SET session = excluded.session, seq = excluded.seq, at = excluded.at, \
                         kind = excluded.kind, vector = excluded.vector",
                )
                .map_err(failed("storing vectors"))?;
            let insert_hnsw = match &search {
                Search::Pgvector { schema } => Some(
                    txn.prepare(&format!(
                        "INSERT INTO {HNSW_TABLE} (model, position, embedding) \
                         VALUES ($1, $2, $3::text::{schema}.vector) \
                         ON CONFLICT (model, position) DO UPDATE SET embedding = excluded.embedding"
                    ))
                    .map_err(failed("storing vectors"))?,
                ),
                Search::Bits => None,
            };
            for v in vectors {
                let position = to_i64(v.position);
                txn.execute(
                    &insert,
                    &[
                        &model,
                        &position,
                        &session_key(v.session).to_vec(),
                        &to_i64(v.seq),
                        &to_i64(v.at),
                        &v.kind.as_str(),
                        &encode_values(&v.vector),
                    ],
                )
                .map_err(failed("storing vectors"))?;
                if let Some(insert_hnsw) = &insert_hnsw {
                    txn.execute(insert_hnsw, &[&model, &position, &vector_text(&v.vector)])
                        .map_err(failed("storing vectors"))?;
                }
            }
            let text = serde_json::to_string(checkpoint).expect("a checkpoint serializes");
            txn.execute(
                "INSERT INTO ledger_vector_checkpoints (model, checkpoint) VALUES ($1, $2) \
                 ON CONFLICT (model) DO UPDATE SET checkpoint = excluded.checkpoint",
                &[&model, &text],
            )
            .map_err(failed("storing the vectors' checkpoint"))?;
            txn.commit().map_err(failed("committing vectors"))
        })
    }

    fn nearest(
        &self,
        model: &str,
        query: &[f32],
        k: usize,
        filter: &VectorFilter,
    ) -> Result<Vec<Nearest>, RecallError> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let search = self.search()?.clone();
        self.with_client(|client| {
            let Some(checkpoint) = Self::read_checkpoint(client, model)? else {
                return Ok(Vec::new());
            };
            check_dimensions(query, &checkpoint)?;
            match &search {
                Search::Pgvector { schema }
                    if self.is_ready(client, model, checkpoint.dimensions)? =>
                {
                    self.nearest_pgvector(client, schema, model, query, k, filter)
                }
                _ => self.nearest_bits(client, model, query, k, filter, &checkpoint),
            }
        })
    }

    fn count(&self, model: &str) -> Result<u64, RecallError> {
        self.with_client(|client| {
            client
                .query_one(
                    "SELECT count(*) FROM ledger_vectors WHERE model = $1",
                    &[&model],
                )
                .map(|row| row.get::<_, i64>(0).max(0) as u64)
                .map_err(failed("counting vectors"))
        })
    }

    fn clear(&self, model: &str) -> Result<(), RecallError> {
        let search = self.search()?.clone();
        self.with_client(|client| {
            let mut txn = client
                .transaction()
                .map_err(failed("beginning to remove vectors"))?;
            txn.execute("DELETE FROM ledger_vectors WHERE model = $1", &[&model])
                .map_err(failed("removing vectors"))?;
            txn.execute(
                "DELETE FROM ledger_vector_checkpoints WHERE model = $1",
                &[&model],
            )
            .map_err(failed("removing vectors"))?;
            if matches!(search, Search::Pgvector { .. }) {
                txn.execute(
                    &format!("DELETE FROM {HNSW_TABLE} WHERE model = $1"),
                    &[&model],
                )
                .map_err(failed("removing vectors"))?;
            }
            txn.commit().map_err(failed("removing vectors"))
        })?;
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(model);
        Ok(())
    }

    fn try_lock(&self) -> Result<Option<EmbedLock>, RecallError> {
        let kept = self
            .lock_client
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let mut client = match kept {
            Some(client) if !client.is_closed() => client,
            _ => self
                .database
                .connect()
                .map_err(|e| RecallError::Vectors(e.to_string()))?,
        };
        let taken: bool = blocking(|| {
            client.query_one(
                "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))",
                &[&EMBED_LOCK_CLASS],
            )
        })
        .map_err(failed("taking the embed lock"))?
        .get(0);
        if !taken {
            *self.lock_client.lock().unwrap_or_else(|p| p.into_inner()) = Some(client);
            return Ok(None);
        }
        Ok(Some(EmbedLock(Box::new(HeldLock {
            client: Some(client),
            slot: self.lock_client.clone(),
        }))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{SessionId, SessionKind};
    use crate::store::postgres::testdb::TestDb;

    #[test]
    fn vector_text_is_pgvector_input() {
        assert_eq!(vector_text(&[1.0, -0.5, 0.25]), "[1,-0.5,0.25]");
        assert_eq!(vector_text(&[f32::NAN]), "[0]");
        assert_ne!(index_name("a", 384), index_name("a", 768));
        assert!(index_name(&"m".repeat(200), 384).len() <= 63);
    }

    fn vector(position: u64, session: u128, values: &[f32]) -> EventVector {
        EventVector {
            position,
            session: SessionId(ulid::Ulid(session)),
            seq: position,
            at: position * 10,
            kind: SessionKind::THINKING,
            vector: values.to_vec(),
        }
    }

    /// The store's contract on this database (pgvector or not, whichever it has).
    pub(crate) fn the_contract_holds(url: &str) {
        let ledger = crate::store::Ledger::open_postgres(url, crate::tools::families()).unwrap();
        let store = crate::recall::semantic::open_store(&ledger).expect("a PostgreSQL store");
        assert_eq!(store.checkpoint("m").unwrap(), None);
        let checkpoint = VectorCheckpoint {
            position: 4,
            hash: "h4".into(),
            dimensions: 2,
        };
        let batch = [
            vector(1, 7, &[1.0, 0.0]),
            vector(2, 7, &[0.0, 1.0]),
            vector(3, 7, &[0.7, 0.7]),
            vector(4, 8, &[0.9, 0.2]),
        ];
        store.put("m", &batch, &checkpoint).unwrap();
        store.put("m", &batch, &checkpoint).unwrap(); // again: nothing doubles
        assert_eq!(store.count("m").unwrap(), 4);
        assert_eq!(store.checkpoint("m").unwrap(), Some(checkpoint));
        let near = |k, filter: &VectorFilter| -> Vec<u64> {
            store
                .nearest("m", &[1.0, 0.1], k, filter)
                .unwrap()
                .iter()
                .map(|n| n.position)
                .collect()
        };
        assert_eq!(near(2, &VectorFilter::default()), vec![1, 4]);
        let session = VectorFilter {
            session: Some(SessionId(ulid::Ulid(7))),
            ..VectorFilter::default()
        };
        assert_eq!(near(2, &session), vec![1, 3]);
        let bounded = VectorFilter {
            bound: Some(2),
            ..VectorFilter::default()
        };
        assert_eq!(near(5, &bounded), vec![1, 2]);
        // One embedder at a time, across connections (servers); given back when dropped.
        let lock = store.try_lock().unwrap().expect("free");
        let other = crate::store::Ledger::open_postgres(url, crate::tools::families()).unwrap();
        let other_store = crate::recall::semantic::open_store(&other).unwrap();
        assert!(other_store.try_lock().unwrap().is_none());
        drop(lock);
        assert!(other_store.try_lock().unwrap().is_some());
        store.clear("m").unwrap();
        assert_eq!(store.count("m").unwrap(), 0);
        assert!(near(2, &VectorFilter::default()).is_empty());
    }

    #[test]
    fn the_contract_holds_on_the_tests_server() {
        // Debian's PostgreSQL 15 in CI: no pgvector there, the sign bits serve.
        let db = TestDb::new();
        the_contract_holds(&db.url);
    }

    /// A PostgreSQL with pgvector of this test process's own (`tools/pg
    /// start-vector-for`: installed once into a cache, stopped when the process exits).
    fn pgvector_server() -> &'static str {
        static URL: OnceLock<String> = OnceLock::new();
        URL.get_or_init(|| {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/pg");
            let output = std::process::Command::new(script)
                .arg("start-vector-for")
                .arg(std::process::id().to_string())
                .output()
                .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
            assert!(
                output.status.success(),
                "{script} start-vector-for could not start PostgreSQL with pgvector: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            String::from_utf8(output.stdout).unwrap().trim().to_string()
        })
    }

    #[test]
    fn the_contract_holds_with_pgvector_and_its_hnsw_index_serves() {
        let url = pgvector_server();
        the_contract_holds(url);
        let mut client = Client::connect(url, postgres::NoTls).unwrap();
        let indexes: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_indexes WHERE tablename = $1 AND indexdef LIKE '%USING hnsw%'",
                &[&HNSW_TABLE],
            )
            .unwrap()
            .get(0);
        assert_eq!(indexes, 1, "one HNSW index, for model m at 2 dimensions");
        // The planner takes the index for an unfiltered search (enough rows to matter).
        let ledger = crate::store::Ledger::open_postgres(url, crate::tools::families()).unwrap();
        let store = crate::recall::semantic::open_store(&ledger).unwrap();
        let many: Vec<EventVector> = (1..=2000u64)
            .map(|p| {
                let angle = p as f32 * 0.0007;
                vector(p, u128::from(p % 7), &[angle.cos(), angle.sin()])
            })
            .collect();
        let checkpoint = VectorCheckpoint {
            position: 2000,
            hash: "h".into(),
            dimensions: 2,
        };
        store.put("m", &many, &checkpoint).unwrap();
        client.batch_execute("ANALYZE ledger_vectors_hnsw").unwrap();
        let schema: String = client
            .query_one(
                "SELECT n.nspname::text FROM pg_extension e                  JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'",
                &[],
            )
            .unwrap()
            .get(0);
        let schema = quote_ident(&schema);
        let plan: Vec<String> = client
            .query(
                &format!(
                    "EXPLAIN SELECT position FROM {HNSW_TABLE} h WHERE h.model = 'm' ORDER BY                      h.embedding::{schema}.vector(2) OPERATOR({schema}.<=>) '[1,0]'::text::{schema}.vector(2) LIMIT 5"
                ),
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert!(
            plan.iter().any(|line| line.contains(&index_name("m", 2))),
            "{plan:?}"
        );
        let near = store
            .nearest("m", &[1.0, 0.0], 3, &VectorFilter::default())
            .unwrap();
        // Angle 0.0007 × p (under π/2): the nearest to [1,0] are the smallest p (p = 1, 2, 3).
        assert_eq!(
            near.iter().map(|n| n.position).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        // Vectors stored before pgvector was there (its table empty): a new server's
        // search is served by the sign bits meanwhile; its embedder's next put fills the
        // table, and then the index serves.
        client
            .batch_execute(&format!("TRUNCATE {HNSW_TABLE}"))
            .unwrap();
        // A new server's store (its own pool, nothing cached).
        let later_vectors = PgVectors::new(Database::open_for_tests(url), crate::tools::families());
        let nearest = |store: &PgVectors| -> Vec<u64> {
            store
                .nearest("m", &[1.0, 0.0], 3, &VectorFilter::default())
                .unwrap()
                .iter()
                .map(|n| n.position)
                .collect()
        };
        assert_eq!(nearest(&later_vectors), vec![1, 2, 3]);
        let mut check = Client::connect(url, postgres::NoTls).unwrap();
        assert!(!later_vectors.is_ready(&mut check, "m", 2).unwrap());
        later_vectors.put("m", &[], &checkpoint).unwrap();
        let filled: i64 = client
            .query_one(&format!("SELECT count(*) FROM {HNSW_TABLE}"), &[])
            .unwrap()
            .get(0);
        assert_eq!(filled, 2000);
        assert!(later_vectors.is_ready(&mut check, "m", 2).unwrap());
        assert_eq!(nearest(&later_vectors), vec![1, 2, 3]);
        store.clear("m").unwrap();
    }
}
