//! reasoning-ledger: an MCP server that records every reasoning step as an immutable event.
//!
//! Layout (data flows down this list and back up as answers):
//!
//! - [`transport`]: stdio lines in and out: the bounded line reader, JSON-RPC errors for
//!   lines no handler sees, the single writer of stdout.
//! - [`server`]: the MCP side (rmcp): tool listing, dispatch, resources and their
//!   subscriptions ([`live`]: `resources/updated` as any process commits), prompts and
//!   completions ([`prompts`]), logs to clients ([`mcp_log`]).
//! - [`apps`]: MCP Apps: the session drawn inside the client that declares the
//!   extension (one `ui://` resource, `_meta.ui` links, an app-only tool).
//! - [`http`]: `serve --http`: MCP's streamable HTTP transport at `/mcp` behind a bearer
//!   token, Host and Origin checks.
//! - [`tools`]: one module per tool family. Each parses its arguments ([`tools::args`]),
//!   runs a pure `decide` over the session head, and hands the events to the store.
//! - [`request`]: the context of one tool call ([`request::ToolCall`]: the ledger handle,
//!   current sessions and models; the peer, cancellation, progress token and arrival turn).
//! - [`query`]: the read side every front end and family shares: sessions, a session's
//!   tree (replay) and export, history, search (one seam, [`query::search`]).
//! - [`provenance`]: the record `import` appends of where a session's events came from.
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
//! - [`progress`]: progress bars of long commands, on a terminal only.
//! - [`fault`]: debug-only fault points (`REASONING_LEDGER_FAULT`) for the fault tests.
//! - `testing`: the one doc-hidden harness the bench, the tests and the fuzz targets
//!   reach (`testing::fuzz`, test builds and cargo-fuzz only: the fuzz targets' bodies).
//!
//! The benchmark harness is not part of the library or of the `reasoning-ledger` binary:
//! it is the second binary target, `reasoning-ledger-bench`.

pub(crate) mod apps;
pub(crate) mod cli;
/// The `reasoning-ledger` binary's entry: parse the command line, run, exit code.
pub use cli::main;
pub(crate) mod event;
pub(crate) mod export;
pub(crate) mod fault;
pub(crate) mod http;
pub(crate) mod live;
pub(crate) mod mcp_client;
pub(crate) mod mcp_log;
pub(crate) mod private;
pub(crate) mod progress;
pub(crate) mod projection;
pub(crate) mod prompts;
pub(crate) mod provenance;
pub(crate) mod provider;
pub(crate) mod query;
pub(crate) mod recall;
pub(crate) mod request;
pub(crate) mod server;
pub(crate) mod store;
pub(crate) mod telemetry;
pub(crate) mod tools;
pub(crate) mod transport;
pub(crate) mod ui;

/// Everything the benchmark harness (`src/bin/reasoning-ledger-bench`) and the integration
/// tests reach inside the crate, and nothing else: every module is `pub(crate)`, so
/// `unreachable_pub` holds the rest of the crate to `pub(crate)`. Not an API; it changes
/// with the code. The fuzz targets reach [`testing::fuzz`].
#[doc(hidden)]
pub mod testing {
    /// Fuzz target bodies: compiled for `cargo test` and under cargo-fuzz
    /// (`--cfg fuzzing`), never into the server a user runs.
    #[cfg(any(test, fuzzing))]
    pub mod fuzz;

    pub use crate::event::family::Families;
    pub use crate::event::{CallRecord, Event, NewEvent, Payload, SessionId, SessionKind};
    pub use crate::export::family::Exports;
    pub use crate::export::html::render as render_html;
    pub use crate::export::mermaid::render as render_mermaid;
    pub use crate::export::svg::render as render_svg;
    pub use crate::mcp_client::McpClient;
    pub use crate::progress::Progress;
    pub use crate::projection::tree::{Folds, ThoughtTree};
    pub use crate::query::session::load_tree;
    pub use crate::server::SLOW_CALL;
    pub use crate::store::{LEDGER_FILE_NAME, Ledger};
    pub use crate::tools::args::MAX_INTEGER;
    /// The product's families: what the bench and the tests open a ledger with.
    pub use crate::tools::families;
    pub use crate::tools::thinking::payload::{SequentialThought, ThinkingEvent};
    pub use crate::tools::{
        ALL_TOOLS_LIST_BUDGET_BYTES, DEFAULT_TOOLS_LIST_BUDGET_BYTES, REFERENCE_TOOLS_LIST_BYTES,
        Toolset,
    };

    /// A new ledger at the file `path` whose every commit is redb's own synced commit (its
    /// redo log holds no record): what the store costs without its log, for the bench.
    pub fn open_ledger_redb_alone(
        path: &std::path::Path,
        families: Families,
    ) -> Result<Ledger, crate::store::OpenError> {
        Ledger::open_redb_alone(path, families)
    }
}
