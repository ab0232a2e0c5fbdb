//! Waiting for new events: the ledger-wide position makes "everything after P" a question
//! with one answer, whichever session and process wrote it.
//!
//! Owns: [`Watch`] (await the events committed at or after a position). Must not: miss a
//! commit (the position read happens after the wake-up is armed) or busy-wait (it sleeps
//! on this process's commits and, for other processes', polls no more often than the
//! backend's [`super::contract::Backend::poll_interval`]).

use super::{Ledger, PositionedEvent, StoreError};
use std::time::Duration;

/// How often a watch re-reads the ledger to notice commits of other processes (redb has
/// no cross-process notification). This process's commits wake it at once.
pub(crate) const WATCH_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Most events one [`Watch::next`] returns.
pub(crate) const WATCH_BATCH_LIMIT: usize = 256;

/// Events as they are committed, from a position on. Made by [`Ledger::watch`].
pub(crate) struct Watch {
    ledger: Ledger,
    next: u64,
    commits: tokio::sync::watch::Receiver<u64>,
    poll: Duration,
}

impl Watch {
    pub(super) fn new(ledger: Ledger, from: u64) -> Watch {
        let commits = ledger.commits.0.subscribe();
        let poll = ledger.backend.poll_interval();
        Watch {
            ledger,
            next: from.max(1),
            commits,
            poll,
        }
    }

    /// The position the next event returned will have at least.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn next_position(&self) -> u64 {
        self.next
    }

    /// Waits until at least one event at or after [`Watch::next_position`] is committed,
    /// then returns those committed so far (up to [`WATCH_BATCH_LIMIT`]) in position
    /// order. Wakes at once on a commit of this process; notices another process's commit
    /// within [`WATCH_POLL_INTERVAL`] (a bounded poll). Cancel-safe: dropping the future
    /// loses nothing.
    pub(crate) async fn next(&mut self) -> Result<Vec<PositionedEvent>, StoreError> {
        loop {
            // Armed before the read: a commit after it marks the receiver as changed.
            self.commits.borrow_and_update();
            let ledger = self.ledger.clone();
            let from = self.next;
            let events = tokio::task::spawn_blocking(move || {
                ledger.events_from_position(from, WATCH_BATCH_LIMIT)
            })
            .await
            .map_err(|e| StoreError::JobPanicked(e.to_string()))??;
            if let Some(last) = events.last() {
                self.next = last.position + 1;
                return Ok(events);
            }
            // Timeout or a commit: look again either way. A closed channel cannot happen
            // while `self.ledger` holds the sender.
            let _ = tokio::time::timeout(self.poll, self.commits.changed()).await;
        }
    }
}
