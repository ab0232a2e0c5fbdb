//! reasoning-ledger: an MCP server that records every reasoning step as an immutable event.
//!
//! Layout (data flows down this list and back up as answers):
//!
//! - [`transport`]: stdio lines in and out: the bounded line reader, JSON-RPC errors for
//!   lines no handler sees, the single writer of stdout.
//! - [`server`]: the MCP side (rmcp): tool listing, dispatch, resources and their
//!   subscriptions ([`live`]: `resources/updated` as any process commits).
//! - [`http`]: `serve --http`: MCP's streamable HTTP transport at `/mcp` behind a bearer
//!   token, Host and Origin checks.
//! - [`tools`]: one module per tool family. Each parses its arguments ([`tools::args`]),
//!   runs a pure `decide` over the session head, and hands the events to the store.
//! - [`provider`]: the models tools call: an OpenAI-compatible HTTP endpoint or MCP
//!   sampling through the client, with retries and the model-call event.
//! - [`store`]: the event log behind a backend contract (redb, the default; PostgreSQL
//!   for a team), the only module that touches storage.
//! - [`projection`]: pure folds of events (session summary, thought tree).
//! - [`recall`]: ranked full-text search over the whole ledger (a Tantivy index beside a
//!   redb ledger, PostgreSQL's own full-text search for a team ledger).
//! - [`export`]: Mermaid, Markdown, JSON, JSONL, SVG and HTML renderings of a projection.
//! - [`event`]: the envelope and payloads, the hash chain.
//! - [`cli`]: the command line (serve, sessions, show, export, replay, search, verify,
//!   import, ui, demo).
//! - [`ui`]: `reasoning-ledger ui`, a read-only web view on 127.0.0.1 (tiny HTTP/1.1
//!   server over tokio) whose pages update live from the ledger's watch.
//! - [`mcp_client`]: the small stdio MCP client `demo` drives the server with (the
//!   benchmark harness, `src/bin/reasoning-ledger-bench/`, uses it too).
//! - [`fault`]: debug-only fault points (`REASONING_LEDGER_FAULT`) for the fault tests.
//! - `fuzzing` (test builds and cargo-fuzz only): the fuzz targets' bodies and invariants.
//!
//! The benchmark harness is not part of the library or of the `reasoning-ledger` binary:
//! it is the second binary target, `reasoning-ledger-bench`.

pub mod cli;
pub mod event;
pub mod export;
pub mod fault;
/// Fuzz target bodies: compiled for `cargo test` and under cargo-fuzz (`--cfg fuzzing`),
/// never into the server a user runs.
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub mod live;
pub mod mcp_client;
pub mod projection;
pub mod provider;
pub mod recall;
pub mod server;
pub mod store;
pub mod tools;
pub mod transport;
pub mod ui;
