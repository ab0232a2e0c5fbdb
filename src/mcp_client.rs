//! A small MCP client over a child process's stdio, for `demo` and the benchmark harness
//! (`reasoning-ledger-bench`): spawn a server, `initialize`, call tools with any number
//! of requests in flight, end it.
//!
//! Owns: the child process (killed when the client is dropped while it still runs) and
//! its pipes. Must not: serve anything (the server side is `server.rs` and
//! `transport/`) or grow into a general client: it sends requests and the `initialized`
//! notification, and answers any request from the server with "method not found". The
//! integration tests use rmcp's full client; this one keeps that client out of the
//! binary users run.

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

/// The protocol version this client asks for.
pub(crate) const PROTOCOL_VERSION: &str = "2025-11-25";

/// Longest wait for the child to exit once its stdin is closed, before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(10);

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// A connection to one spawned server; clones share it (for requests in flight).
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
}

struct Inner {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Pending,
    next_id: AtomicU64,
    child: Mutex<Option<Child>>,
    pid: Option<u32>,
}

impl McpClient {
    /// Spawns `command` with piped stdin/stdout and stderr discarded, and starts reading
    /// its answers. Call [`McpClient::initialize`] next.
    pub fn spawn(mut command: Command) -> anyhow::Result<McpClient> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = command.spawn().context("spawning the server")?;
        let stdin = child.stdin.take().context("the server's stdin")?;
        let stdout = child.stdout.take().context("the server's stdout")?;
        let pending: Pending = Arc::default();
        let inner = Arc::new(Inner {
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending: pending.clone(),
            next_id: AtomicU64::new(1),
            pid: child.id(),
            child: Mutex::new(Some(child)),
        });
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let id = message.get("id").and_then(Value::as_u64);
                if message.get("method").is_some() {
                    // A request from the server (none is expected): refuse it.
                    if let (Some(inner), Some(id)) = (weak.upgrade(), message.get("id")) {
                        let answer = json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": -32601, "message": "not supported by this client"}});
                        let _ = inner.write_line(&answer).await;
                    }
                    continue;
                }
                if let Some(id) = id
                    && let Some(waiting) = lock(&pending).remove(&id)
                {
                    let _ = waiting.send(message);
                }
            }
            // The server is gone: every waiting request fails.
            lock(&pending).clear();
        });
        Ok(McpClient { inner })
    }

    /// The `initialize` handshake; returns the server's `initialize` result.
    pub async fn initialize(&self, client_name: &str) -> anyhow::Result<Value> {
        let result = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": client_name, "version": env!("CARGO_PKG_VERSION")},
                }),
            )
            .await
            .context("MCP initialize handshake failed")?;
        self.inner
            .write_line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(result)
    }

    /// `tools/call`; returns the call's result (check its `isError`).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> anyhow::Result<Value> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
            .with_context(|| format!("tools/call {name}"))
    }

    /// Sends one request and waits for its answer; a JSON-RPC error is an error.
    pub(crate) async fn request(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        lock(&self.inner.pending).insert(id, answer);
        self.inner
            .write_line(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let mut message = answered
            .await
            .context("the server closed its output before answering")?;
        if let Some(error) = message.get("error") {
            bail!("{method} answered with an error: {error}");
        }
        Ok(message["result"].take())
    }

    /// Process id of the server.
    pub fn pid(&self) -> Option<u32> {
        self.inner.pid
    }

    /// Closes the server's stdin and waits for it to exit (killing it after
    /// [`EXIT_WAIT`]).
    pub async fn close(&self) -> anyhow::Result<()> {
        drop(self.inner.stdin.lock().await.take());
        let child = lock(&self.inner.child).take();
        if let Some(mut child) = child {
            match tokio::time::timeout(EXIT_WAIT, child.wait()).await {
                Ok(status) => {
                    status.context("waiting for the server to exit")?;
                }
                Err(_) => {
                    child.kill().await.context("killing the server")?;
                    bail!("the server did not exit within {EXIT_WAIT:?} of its stdin closing");
                }
            }
        }
        Ok(())
    }
}

impl Inner {
    async fn write_line(&self, message: &Value) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let stdin = stdin.as_mut().context("the connection is closed")?;
        stdin
            .write_all(&line)
            .await
            .context("writing to the server")?;
        stdin.flush().await.context("writing to the server")?;
        Ok(())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
