//! reasoning-ledger: an MCP server that records every reasoning step as an immutable event.
//!
//! Layout (data flows down this list and back up as answers):
//!
//! - [`server`]: the MCP transport side (rmcp over stdio): tool listing, dispatch,
//!   resources. The only writer of stdout.
//! - [`tools`]: one module per tool family. Each parses its arguments ([`tools::args`]),
//!   runs a pure `decide` over the session head, and hands the events to the store.
//! - [`store`]: the event log behind a backend contract (redb today), the only module
//!   that touches storage.
//! - [`projection`]: pure folds of events (session summary, thought tree).
//! - [`export`]: Mermaid, Markdown, JSON and JSONL renderings of a projection.
//! - [`event`]: the envelope and payloads, the hash chain.
//! - [`cli`]: the command line (serve, sessions, show, export, replay, search, verify,
//!   import, demo, bench).
//! - [`mcp_client`]: the small stdio MCP client `demo` and `bench` drive servers with.

pub mod bench;
pub mod bench_ledger;
pub mod cli;
pub mod event;
pub mod export;
pub mod fault;
/// Fuzz target bodies: compiled for `cargo test` and under cargo-fuzz (`--cfg fuzzing`),
/// never into the server a user runs.
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub mod fuzzing;
pub mod mcp_client;
pub mod projection;
pub mod server;
pub mod store;
pub mod tools;
pub mod transport;
