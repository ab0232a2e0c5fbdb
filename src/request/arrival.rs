//! Arrival order of one connection's calls: its writes take effect in the order its
//! requests arrived, however the runtime schedules their tasks.
//!
//! Owns: [`Arrival`] (the number the transport stamps on each `tools/call` request, in
//! the order its lines are read), [`ArrivalOrder`] (one per connection) and [`Turn`] (a
//! call's place in it). A call waits for its turn just before it queues its first write
//! and gives the turn up right after, so the writer thread receives a connection's jobs in
//! arrival order while they still share group commits; a call that does not write gives
//! its turn up when it ends (or at once, for read-only tools). Must not: hold a turn
//! across a commit or a model call, or let a lost request stall a connection: a turn
//! waited for longer than [`ARRIVAL_WAIT_LIMIT`] skips the calls that never came.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// Longest a call waits for the calls that arrived before it to reach their write (or
/// give it up). Earlier calls only parse their arguments first, so this is only reached
/// when a stamped request never reached a tool (the framework refused it).
pub(crate) const ARRIVAL_WAIT_LIMIT: Duration = Duration::from_secs(2);

/// The position of a `tools/call` request among its connection's, from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Arrival(pub u64);

/// Whose turn it is on one connection.
#[derive(Debug, Default)]
pub(crate) struct ArrivalOrder {
    state: Mutex<OrderState>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct OrderState {
    /// The arrival whose turn it is.
    next: u64,
    /// Later arrivals that gave their turn up before it came.
    released_early: BTreeSet<u64>,
}

impl ArrivalOrder {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(ArrivalOrder::default())
    }

    /// The turn of the call that arrived as `arrival` (`None`: not stamped, no order).
    pub(crate) fn turn(self: &Arc<Self>, arrival: Option<Arrival>) -> Turn {
        Turn {
            order: arrival.map(|a| (self.clone(), a.0)),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, OrderState> {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn release(&self, ticket: u64) {
        tracing::trace!(ticket, "turn given up");
        let mut state = self.state();
        if ticket == state.next {
            state.next += 1;
            loop {
                let next = state.next;
                if !state.released_early.remove(&next) {
                    break;
                }
                state.next += 1;
            }
        } else if ticket > state.next {
            state.released_early.insert(ticket);
        }
        drop(state);
        self.changed.notify_waiters();
    }

    async fn wait_for(&self, ticket: u64) {
        tracing::trace!(ticket, "waiting for the turn");
        let deadline = tokio::time::Instant::now() + ARRIVAL_WAIT_LIMIT;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state().next >= ticket {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let mut state = self.state();
                if state.next < ticket {
                    tracing::warn!(
                        waiting = ticket,
                        stuck_at = state.next,
                        "calls that arrived earlier never reached a tool; going on without them"
                    );
                    state.next = ticket;
                    state.released_early.retain(|t| *t > ticket);
                }
                return;
            }
        }
    }
}

/// A call's place in its connection's arrival order; given up when dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    order: Option<(Arc<ArrivalOrder>, u64)>,
}

impl Turn {
    /// A turn outside any order (a call that came without an arrival stamp).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn unordered() -> Turn {
        Turn { order: None }
    }

    /// Waits until every call that arrived earlier on this connection has queued its
    /// write or given its turn up.
    pub(crate) async fn wait(&self) {
        if let Some((order, ticket)) = &self.order {
            order.wait_for(*ticket).await;
        }
    }

    /// Gives the turn up: later calls may queue their writes.
    pub(crate) fn release(&mut self) {
        if let Some((order, ticket)) = self.order.take() {
            order.release(ticket);
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_come_in_arrival_order_whatever_order_they_wait_in() {
        let order = ArrivalOrder::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for ticket in (0..20u64).rev() {
            let mut turn = order.turn(Some(Arrival(ticket)));
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                turn.wait().await;
                log.lock().unwrap().push(ticket);
                turn.release();
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*log.lock().unwrap(), (0..20).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_turn_given_up_early_does_not_block_later_ones() {
        let order = ArrivalOrder::new();
        let first = order.turn(Some(Arrival(0)));
        let second = order.turn(Some(Arrival(1)));
        drop(second);
        let third = order.turn(Some(Arrival(2)));
        drop(first);
        tokio::time::timeout(Duration::from_millis(100), third.wait())
            .await
            .expect("0 and 1 are done");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_never_came_is_skipped_after_the_limit() {
        let order = ArrivalOrder::new();
        let late = order.turn(Some(Arrival(1)));
        let started = tokio::time::Instant::now();
        late.wait().await;
        assert!(started.elapsed() >= ARRIVAL_WAIT_LIMIT);
    }
}
