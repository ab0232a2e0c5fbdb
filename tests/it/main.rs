//! The one integration-test binary: every test spawns the built `reasoning-ledger` and
//! talks to it the way a user's client would (rmcp's client over stdio, or the CLI).
//!
//! Modules: `common` (spawning, calling, snapshot `check`), `thinking` (the spec's cases
//! for sequentialthinking and think), `ledger` (ledger tools and resources), `durability`
//! (restart, several processes, verify), `bad_input` (hostile calls), `cli`
//! (the command line), `exports` (snapshots of every export format and answer shape),
//! `hostile` (malformed lines, a 200 MB line, spoofing characters, number and boolean
//! look-alikes for every field in the tools' schemas), `faults_files` (bad files at the
//! ledger path), `faults_process` (a panic in a tool, stdin closed or calls cancelled
//! mid-call, a randomized kill -9 loop), `protocol` (both protocol generations over raw
//! stdio), `bench` (the harness `reasoning-ledger-bench` with tiny counts, measuring the
//! server built beside it), `context` (every toolset's `tools/list` size against its
//! budget, and a validating client's verdict on arguments against the server's), `planning`
//! (deep_planning's phases and documents, list_plans, get_plan, the branch tools), `qa`
//! (verification steps, workflows, recommendations filtered by the caller's tools), `ui`
//! (the web view over HTTP: pages, refusals, `/changes` on another process's append), `team`
//! (PostgreSQL as the store through the CLI and servers, its faults, live updates across
//! processes, streamable HTTP with its token), `pg` (the tests' PostgreSQL: `tools/pg`),
//! `recall` (search: the relevance set on both backends, read-your-writes across processes,
//! kill -9 with the index open, damaged indexes rebuilt, hostile queries, related sessions),
//! `booster` (the booster toolset: answer shapes, heuristic determinism, beam, loops,
//! model answers of every shape, sampling, progress, cancellation, restart, outputPath
//! attacks, Mermaid, the local model). Storage faults (crash at every sync point, I/O errors, a full
//! disk) are unit tests in `src/store/fault.rs`, behind redb's `StorageBackend`.

mod agent;
mod bad_input;
mod bench;
mod booster;
mod cli;
mod common;
mod compat;
mod context;
mod durability;
mod exports;
mod faults_files;
mod faults_process;
mod hostile;
mod ledger;
mod llm;
mod local_model;
mod order;
mod pg;
mod planning;
mod protocol;
mod qa;
mod recall;
mod sampling;
mod team;
mod thinking;
mod ui;
