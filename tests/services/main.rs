//! The integration tests that need a service beside the binary: PostgreSQL (`pg`: the
//! tests' own throwaway cluster through `tools/pg`, or `REASONING_LEDGER_TEST_PG`; `team`:
//! PostgreSQL as the store through the CLI and servers, its faults, live updates across
//! processes, streamable HTTP with its token; `actor_pg`: named tokens' actors on
//! PostgreSQL rows, through verify and a copy into redb; `team_load`: `serve --http` under
//! load, half-open connections, SIGTERM and a PostgreSQL restart; `bench`: the harness with tiny counts, its
//! PostgreSQL figures included; `doctor`: the doctor on a PostgreSQL store; `recall_pg`: search's relevance set on
//! PostgreSQL's full-text search; `relevance`: hybrid recall's relevance set with the local
//! embedding model, on redb and PostgreSQL; `pg_tls`: each sslmode against a PostgreSQL with ssl=on and
//! certificates the test makes, `tools/pg start-tls`) and a real local model (`local_model`: llama.cpp through
//! `tools/local-model/run`, installed into a cached venv on first use; `local_embed`: a
//! real embedding model through `tools/local-embed/run`, semantic search on redb and on
//! PostgreSQL with and without pgvector) and a host of MCP Apps in headless chromium (`apps`:
//! `tools/apps-check/run`, the app bridge of `@modelcontextprotocol/ext-apps`) and a trace UI
//! (`phoenix`: Arize Phoenix through `tools/phoenix/run`, the spans of `demo` and of past
//! sessions read back through its API). Everything that
//! needs none of these is in `tests/it` (the fast lane, `cargo fast`). A test here that
//! cannot reach its service fails; none skips. `cargo test` runs both.

#[path = "../it/common.rs"]
mod common;

mod actor_pg;
mod apps;
mod bench;
mod containment_pg;
mod damage_pg;
mod damage_pg_sessions;
mod doctor;
mod local_embed;
mod local_model;
mod pg;
mod pg_tls;
mod phoenix;
mod recall_pg;
#[path = "../it/recall_set.rs"]
mod recall_set;
mod relevance;
mod team;
mod team_load;
