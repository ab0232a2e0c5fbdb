//! One MCP client session with a server under test: spawn it over stdio,
//! complete the `initialize` handshake, call `sequentialthinking`, read the
//! child's resident set size and the CPU time it has used, shut it down.
//!
//! Owns: the child process it spawns (it ends it before returning from
//! [`Session::close`]) and the per-session data directory it is given. Must
//! not: interpret figures, or talk to a server other than over the child's
//! stdin/stdout.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use reasoning_ledger::testing::McpClient;
use serde_json::{Map, Value};

/// Name of the tool both servers expose.
pub(crate) const TOOL_NAME: &str = "sequentialthinking";

/// Environment variable that silences the reference server's per-thought
/// stderr box (our server is given it too, so both run the same way).
pub(crate) const QUIET_ENV: (&str, &str) = ("DISABLE_THOUGHT_LOGGING", "true");

/// Placeholder in a server's argv that is replaced by a fresh, empty
/// directory for each session.
pub(crate) const DATA_DIR_PLACEHOLDER: &str = "{data_dir}";

/// Longest wait for spawn + `initialize` before the session counts as failed.
const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest wait for one `tools/call` answer before the run counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest wait for the child to exit after its stdin is closed (the client kills it
/// after a shorter wait of its own).
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(15);

/// Target length of the `thought` text of each call, in bytes.
const THOUGHT_LEN: usize = 100;

/// A live session with one spawned server.
pub(crate) struct Session {
    client: McpClient,
    /// The server's `initialize` result.
    initialized: Value,
    /// Time from spawning the process to `initialize` answered.
    pub spawn_to_initialize: Duration,
}

/// What the server said about itself during the handshake.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerIdentity {
    /// `serverInfo.name` and `serverInfo.version`, if sent.
    pub name_version: Option<String>,
    /// Negotiated protocol version.
    pub protocol_version: Option<String>,
}

impl Session {
    /// Spawns `argv` (with [`DATA_DIR_PLACEHOLDER`] replaced by `data_dir`)
    /// with stderr discarded, and completes the handshake.
    pub(crate) async fn start(argv: &[String], data_dir: &Path) -> anyhow::Result<Self> {
        let (program, args) = argv.split_first().context("server command is empty")?;
        let data_dir = data_dir.to_string_lossy();
        let mut command = tokio::process::Command::new(program);
        command
            .args(
                args.iter()
                    .map(|a| a.replace(DATA_DIR_PLACEHOLDER, &data_dir)),
            )
            .env(QUIET_ENV.0, QUIET_ENV.1);

        let start = Instant::now();
        let client =
            McpClient::spawn(command).with_context(|| format!("spawning {}", argv.join(" ")))?;
        let initialized = tokio::time::timeout(
            INITIALIZE_TIMEOUT,
            client.initialize("reasoning-ledger-bench"),
        )
        .await
        .with_context(|| format!("no initialize answer within {INITIALIZE_TIMEOUT:?}"))??;
        let spawn_to_initialize = start.elapsed();
        Ok(Self {
            client,
            initialized,
            spawn_to_initialize,
        })
    }

    /// What the server reported in its `initialize` result.
    pub(crate) fn identity(&self) -> ServerIdentity {
        let info = &self.initialized["serverInfo"];
        ServerIdentity {
            name_version: info["name"]
                .as_str()
                .map(|name| format!("{name} {}", info["version"].as_str().unwrap_or(""))),
            protocol_version: self.initialized["protocolVersion"]
                .as_str()
                .map(String::from),
        }
    }

    /// The client handle for issuing calls (cheap to clone, shareable).
    pub(crate) fn peer(&self) -> McpClient {
        self.client.clone()
    }

    /// VmRSS and RssAnon of the server process.
    pub(crate) fn memory(&self) -> anyhow::Result<MemoryReading> {
        read_memory(self.pid()?)
    }

    /// CPU time the server process has used since it started: user and system time of
    /// all its threads, those already ended included (see [`process_cpu_time`]).
    pub(crate) fn cpu_time(&self) -> anyhow::Result<Duration> {
        process_cpu_time(self.pid()?)
    }

    pub(crate) fn pid(&self) -> anyhow::Result<u32> {
        self.client.pid().context("server process id is unknown")
    }

    /// Closes the server's stdin and waits for it to exit; the child is gone on return.
    pub(crate) async fn close(self) -> anyhow::Result<()> {
        tokio::time::timeout(SHUTDOWN_TIMEOUT, self.client.close())
            .await
            .with_context(|| format!("server did not shut down within {SHUTDOWN_TIMEOUT:?}"))?
    }
}

/// One `sequentialthinking` call for thought `number` of `total`; returns its
/// round-trip time. A protocol error or a tool result flagged `isError` is an
/// error: figures over failing calls would measure the error path.
pub(crate) async fn call_thought(
    peer: &McpClient,
    number: usize,
    total: usize,
) -> anyhow::Result<Duration> {
    let arguments = thought_arguments(number, total);
    let start = Instant::now();
    let result = tokio::time::timeout(CALL_TIMEOUT, peer.call_tool(TOOL_NAME, arguments))
        .await
        .with_context(|| format!("thought {number}: no answer within {CALL_TIMEOUT:?}"))?
        .with_context(|| format!("thought {number}: tools/call failed"))?;
    let elapsed = start.elapsed();
    if result["isError"] == Value::Bool(true) {
        bail!(
            "thought {number}: tool reported an error: {}",
            result["content"]
        );
    }
    Ok(elapsed)
}

/// Calls thoughts `first..first + count` one after another.
pub(crate) async fn call_sequential(
    peer: &McpClient,
    first: usize,
    count: usize,
    total: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(count);
    for number in first..first + count {
        samples.push(call_thought(peer, number, total).await?);
    }
    Ok(samples)
}

/// Result of [`call_concurrent`].
pub(crate) struct ConcurrentRun {
    /// Wall time from the first call sent to the last answer received.
    pub elapsed: Duration,
    /// Round-trip time of every call.
    pub samples: Vec<Duration>,
}

/// Calls thoughts `first..first + count` from `in_flight` tasks that share
/// one peer, each taking the next number when its previous call is answered.
pub(crate) async fn call_concurrent(
    peer: &McpClient,
    first: usize,
    count: usize,
    total: usize,
    in_flight: usize,
) -> anyhow::Result<ConcurrentRun> {
    anyhow::ensure!(in_flight > 0, "concurrency must be positive");
    let next = Arc::new(AtomicUsize::new(first));
    let end = first + count;
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..in_flight {
        let peer = peer.clone();
        let next = Arc::clone(&next);
        tasks.spawn(async move {
            let mut samples = Vec::new();
            loop {
                let number = next.fetch_add(1, Ordering::Relaxed);
                if number >= end {
                    return anyhow::Ok(samples);
                }
                samples.push(call_thought(&peer, number, total).await?);
            }
        });
    }
    let mut samples = Vec::with_capacity(count);
    while let Some(joined) = tasks.join_next().await {
        samples.extend(joined.context("a caller task panicked")??);
    }
    Ok(ConcurrentRun {
        elapsed: start.elapsed(),
        samples,
    })
}

/// The arguments of one call: a ~100-byte thought that differs per number.
fn thought_arguments(number: usize, total: usize) -> Map<String, Value> {
    let mut thought = format!(
        "Thought {number}: weighing the evidence gathered so far before committing to the next step"
    );
    while thought.len() < THOUGHT_LEN {
        thought.push('.');
    }
    let value = serde_json::json!({
        "thought": thought,
        "thoughtNumber": number,
        "totalThoughts": total,
        "nextThoughtNeeded": true,
    });
    match value {
        serde_json::Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A process's resident memory at one moment, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoryReading {
    /// `VmRSS`: every resident page, the binary's code and other file pages included.
    pub vm_rss_kib: u64,
    /// `RssAnon`: resident anonymous memory, the process's private heap and stacks.
    pub rss_anon_kib: u64,
}

/// `VmRSS` and `RssAnon` from `/proc/<pid>/status`.
fn read_memory(pid: u32) -> anyhow::Result<MemoryReading> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let field =
        |name: &str| status_kib(&status, name).with_context(|| format!("no {name} line in {path}"));
    Ok(MemoryReading {
        vm_rss_kib: field("VmRSS")?,
        rss_anon_kib: field("RssAnon")?,
    })
}

/// The value of the `NAME:   1234 kB` line of a `/proc/<pid>/status` text, in KiB.
fn status_kib(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// CPU time process `pid` has used: user plus system time of all its threads, ended
/// ones included. It is read from the process's CPU clock (`clock_getcpuclockid`),
/// which the kernel keeps in nanoseconds; `/proc/<pid>/stat`'s `utime + stime` is the
/// same sum rounded to clock ticks (10 ms), too coarse for a run of a few thousand calls.
fn process_cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let pid = libc::pid_t::try_from(pid).context("process id out of range")?;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid place for the one clockid_t the call writes.
    let status = unsafe { libc::clock_getcpuclockid(pid, &mut clock) };
    anyhow::ensure!(
        status == 0,
        "no CPU clock for process {pid}: {}",
        std::io::Error::from_raw_os_error(status)
    );
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the call to fill.
    let read = unsafe { libc::clock_gettime(clock, &mut now) };
    anyhow::ensure!(
        read == 0,
        "reading the CPU clock of process {pid}: {}",
        std::io::Error::last_os_error()
    );
    let secs = u64::try_from(now.tv_sec).context("negative CPU time")?;
    let nanos = u32::try_from(now.tv_nsec).context("CPU time nanoseconds out of range")?;
    Ok(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_fields() {
        let status = "Name:\tnode\nVmPeak:\t  999 kB\nVmRSS:\t   51234 kB\nRssAnon:\t    2048 kB\nRssAnonX:\t 1 kB\nThreads:\t7\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(51_234));
        assert_eq!(status_kib(status, "RssAnon"), Some(2_048));
        assert_eq!(status_kib("Name:\tx\n", "VmRSS"), None);
    }

    #[test]
    fn reads_own_memory_and_cpu_time() {
        let memory = read_memory(std::process::id()).expect("own status");
        assert!(
            memory.vm_rss_kib > 0 && memory.rss_anon_kib > 0,
            "{memory:?}"
        );
        assert!(memory.rss_anon_kib <= memory.vm_rss_kib, "{memory:?}");
        let before = process_cpu_time(std::process::id()).expect("own CPU clock");
        let mut spin = 0u64;
        while process_cpu_time(std::process::id()).expect("own CPU clock") == before {
            spin = std::hint::black_box(spin + 1);
        }
        assert!(process_cpu_time(u32::MAX).is_err());
    }

    #[test]
    fn thought_arguments_shape() {
        let args = thought_arguments(7, 2000);
        let thought = args["thought"].as_str().expect("thought is a string");
        assert!(thought.len() >= THOUGHT_LEN && thought.len() < THOUGHT_LEN + 10);
        assert!(thought.starts_with("Thought 7:"));
        assert_eq!(args["thoughtNumber"], 7);
        assert_eq!(args["totalThoughts"], 2000);
        assert_eq!(args["nextThoughtNeeded"], true);
    }
}
