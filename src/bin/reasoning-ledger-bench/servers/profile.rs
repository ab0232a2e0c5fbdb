//! `--perf-wide`: the server's CPU profile over a wide run, recorded by `perf record`
//! attached to its process, for flame graphs of the request path.
//!
//! Owns: the `perf` child (started on the server's pid, stopped with SIGINT as a user
//! stops it at a terminal, so it writes its file whole) and the file's name. Must not:
//! run unless asked (perf slows the server it samples).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// Samples per second: enough for a flame graph of a 2-second run, little enough that
/// DWARF call graphs (a copy of the stack per sample) stay a few hundred MiB.
const SAMPLES_PER_SECOND: u32 = 1999;

/// Bytes of stack copied per sample for DWARF unwinding: the request path's frames fit.
const STACK_BYTES: u32 = 32_768;

/// How long perf may take to attach (write its file's header) or to finish writing.
const PERF_WAIT: Duration = Duration::from_secs(30);

/// A `perf record` attached to a server.
pub(crate) struct Recording {
    perf: tokio::process::Child,
    file: PathBuf,
}

impl Recording {
    /// Starts recording `pid` into `dir/<name>.perf.data`; returns once perf has attached
    /// (its file exists and has its header).
    pub(crate) async fn start(dir: &Path, name: &str, pid: u32) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let stem: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let file = dir.join(format!("{stem}.perf.data"));
        let _ = std::fs::remove_file(&file);
        let perf = tokio::process::Command::new("perf")
            .args(["record", "-F", &SAMPLES_PER_SECOND.to_string()])
            .args(["--call-graph", &format!("dwarf,{STACK_BYTES}")])
            .args(["-p", &pid.to_string(), "-o"])
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("starting `perf record` (is perf installed?)")?;
        let started = Instant::now();
        while !std::fs::metadata(&file).is_ok_and(|meta| meta.len() > 0) {
            if started.elapsed() > PERF_WAIT {
                bail!("perf did not start recording into {}", file.display());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self { perf, file })
    }

    /// Stops perf as Ctrl-C does and waits for it to write its file; returns the file.
    pub(crate) async fn stop(mut self) -> anyhow::Result<PathBuf> {
        let pid = self.perf.id().context("perf has already exited")?;
        let status = std::process::Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .context("signalling perf")?;
        if !status.success() {
            bail!("kill -INT {pid} failed");
        }
        tokio::time::timeout(PERF_WAIT, self.perf.wait())
            .await
            .context("perf did not finish writing")??;
        Ok(self.file)
    }
}
