//! Progress of long commands (`copy`, `import`, `verify`, `export --all`, the bench) on
//! stderr, as an indicatif bar.
//!
//! Owns: whether a bar is drawn at all: only when stderr is a terminal and
//! [`NO_PROGRESS_ENV`] is unset, so piped runs, tests and logs stay silent (not one byte).
//! Must not: write to stdout (it carries the command's output), or change what a command
//! does: a bar only counts.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// Set (to anything non-empty) to draw no bar even on a terminal.
pub(crate) const NO_PROGRESS_ENV: &str = "REASONING_LEDGER_NO_PROGRESS";

/// How often a bar redraws: also its spinner's tick.
const REDRAW_EVERY: Duration = Duration::from_millis(120);

/// A bar on stderr, or nothing.
pub struct Progress {
    bar: ProgressBar,
}

/// Whether bars are drawn in this process.
pub(crate) fn enabled() -> bool {
    std::io::stderr().is_terminal()
        && std::env::var_os(NO_PROGRESS_ENV).is_none_or(|value| value.is_empty())
}

impl Progress {
    /// A bar from 0 to `total` counting `unit`s (`events`, `sessions`), led by `what`.
    pub fn bar(what: &str, total: u64, unit: &str) -> Progress {
        let bar = Self::drawn(Some(total));
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{msg}} [{{bar:30}}] {{human_pos}}/{{human_len}} {unit} ({{elapsed}}, {{eta}} left)"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        Progress { bar }
    }

    /// A spinner alone, for one step that cannot count (a single transaction).
    pub(crate) fn spinner(what: &str) -> Progress {
        let bar = Self::drawn(None);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(what.to_string());
        bar.enable_steady_tick(REDRAW_EVERY);
        Progress { bar }
    }

    fn drawn(total: Option<u64>) -> ProgressBar {
        if !enabled() {
            return ProgressBar::hidden();
        }
        let target = ProgressDrawTarget::stderr_with_hz(8);
        ProgressBar::with_draw_target(total, target)
    }

    /// What is being done now (the text before the bar).
    pub fn set_message(&self, what: &str) {
        self.bar.set_message(what.to_string());
    }

    /// A line on stderr above the bar (or just the line, with no bar).
    pub fn say(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    /// `n` more done.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// `done` so far.
    pub(crate) fn set(&self, done: u64) {
        self.bar.set_position(done);
    }

    /// A new total (it grew while counting).
    pub(crate) fn set_total(&self, total: u64) {
        self.bar.set_length(total);
    }

    /// Done: the bar is removed (the command prints its own summary).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    /// A bar left by an error is removed too, so the error is the last line.
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}
