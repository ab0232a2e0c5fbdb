//! The fast lane's integration tests (`cargo fast`): every test spawns the built
//! `reasoning-ledger` and talks to it the way a user's client would (rmcp's client over
//! stdio, or the CLI), and needs nothing else: no PostgreSQL, browser, Python or model
//! (those tests are in `tests/services`; `cargo test` runs both).
//!
//! Modules: `common` (spawning, calling, snapshot `check`, Mermaid counts), `actor` (named
//! tokens over `serve --http`: who wrote each event, in history, exports and verify;
//! revocation without a restart), `thinking`
//! (the spec's cases for sequentialthinking and think), `ledger` (ledger tools and
//! resources), `durability` (restart, several processes, verify), `bad_input` (hostile
//! calls), `cli` (the command line), `exports` (snapshots of every export format and
//! answer shape), `hostile` (malformed lines, a 200 MB line, spoofing characters, number
//! and boolean look-alikes for every field in the tools' schemas), `faults_files` (bad
//! files at the ledger path), `faults_process` (a panic in a tool, stdin closed or calls
//! cancelled mid-call, a randomized kill -9 loop), `protocol` (both protocol generations
//! over raw stdio), `context` (every toolset's `tools/list` size against its budget, and
//! a validating client's verdict on arguments against the server's), `planning`
//! (deep_planning's phases and documents, list_plans, get_plan, the branch tools), `qa`
//! (verification steps, workflows, recommendations filtered by the caller's tools), `ui`
//! (the web view over HTTP: pages, refusals, `/changes` on another process's append),
//! `conformance` (the MCP conformance suite's generic server scenarios over
//! `serve --http`), `surface` (prompts, completions and logs to clients over stdio and
//! HTTP in both generations), `recall` (search: the relevance set, read-your-writes
//! across processes, kill -9 with the index open, damaged indexes rebuilt, hostile
//! queries, related sessions), `recall_grouped` (matches grouped by session), `booster` (the booster toolset: answer shapes, heuristic
//! determinism, beam, loops,
//! model answers of every shape, sampling, progress, cancellation, restart, outputPath
//! attacks, Mermaid), `agent` and `llm` (the agent toolset against a loopback
//! OpenAI-compatible server), `sampling`, `order`, `compat` (a ledger of format-1 rows),
//! `fixture_ledger` (a ledger of the build before issue 19: verify and every export, byte
//! for byte), `oauth` (`serve --http` with OAuth access tokens against an issuer served
//! on loopback: who gets in, metadata, key rotation), `host` (issue 23: two servers and the
//! CLI through the ledger host, takeover after a clean exit and after kill -9, stale and
//! foreign sockets), `http_limits` (issue 36: session caps and expiry, a flood of idle
//! connections from one peer, the unauthenticated timeout), `readonly` (issue 32: a ledger read as a user who may not write it, a
//! damaged redo log refusing writes, a log cut below its header) and `firsthour` (issue 24: the demo's tour of every family, risks as plain
//! strings, doctor, completions and man, progress only on a terminal, export --all, an
//! interrupted copy or import resuming), `recover` (issue 32: `recover --to`, every 4 KiB
//! page of the fixture damaged in turn, acknowledged redo-log records past a damaged
//! one), `sessions` (issue 42: the current session on stdio, HTTP with a transport session and
//! stateless HTTP; `think` threads per purpose; started sessions said so; evaluate_branch's
//! misspelt scores and replacements; deep_planning's errors about one plan only) and
//! `import` (issue 46: a file holding an export twice, a damaged line, `--strict`, time
//! going back),
//! `telemetry` (issue 44: OpenTelemetry spans against an OTLP receiver the test runs: names,
//! traceparent parentage, attributes, span events, opt-in text, chat spans, no exporter
//! without the variables, a hung collector, `export --format otlp` ids stable) and
//! `security` (issue 36, files and text: terminal escapes in the CLI's text
//! output, modes under a permissive umask, token files and short tokens refused by
//! `serve --http`, a provider's redirect, `import`'s text limit). Storage faults (crash
//! at every sync point, I/O errors, a full disk) are unit tests in `src/store/fault.rs`, behind redb's
//! `StorageBackend`.

mod actor;
mod agent;
mod apps;
mod architecture;
mod bad_input;
mod booster;
mod cli;
mod common;
mod compat;
mod conformance;
mod context;
mod damage;
mod durability;
mod exports;
mod faults_files;
mod faults_process;
mod firsthour;
mod fixture_ledger;
mod host;
mod hostile;
mod http_limits;
mod import;
mod ledger;
mod llm;
mod oauth;
mod order;
mod planning;
mod protocol;
mod qa;
mod readonly;
mod recall;
mod recall_grouped;
mod recall_semantic;
mod recall_set;
mod recover;
mod sampling;
mod security;
mod sessions;
mod surface;
mod telemetry;
mod thinking;
mod ui;
