//! LISTEN/NOTIFY: how one server hears at once that another committed.
//!
//! Owns: [`Listener`], a thread with its own connection that LISTENs on the ledger's
//! channel and raises the ledger's [`CommitSignal`] with the position each commit
//! announces. Must not: be needed for correctness — a watch still polls (at
//! [`super::PG_WATCH_POLL_INTERVAL`]), so a notification lost with a connection delays a
//! wake-up, never loses an event. A lost connection is opened again (backing off up to
//! [`RECONNECT_LIMIT`]), and after each (re)connect the watches are woken once, since
//! commits may have happened unheard.

use super::connect::Target;
use super::schema::quote_ident;
use crate::store::contract::CommitSignal;
use postgres::fallible_iterator::FallibleIterator;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Longest pause between attempts to reconnect the listener.
pub(crate) const RECONNECT_LIMIT: Duration = Duration::from_secs(2);

/// How long the listener blocks waiting for a notification before looking at its stop flag.
const WAIT_SLICE: Duration = Duration::from_millis(500);

/// The listener of one backend; stops when the backend is dropped.
pub(crate) struct Listener {
    target: Arc<Target>,
    channel: Arc<str>,
    stop: Arc<AtomicBool>,
}

impl Listener {
    pub(crate) fn new(target: Arc<Target>, channel: Arc<str>) -> Listener {
        Listener {
            target,
            channel,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Starts the thread (once per backend: the ledger calls this when built).
    pub(crate) fn start(&self, signal: CommitSignal) {
        let (target, channel, stop) =
            (self.target.clone(), self.channel.clone(), self.stop.clone());
        let spawned = std::thread::Builder::new()
            .name("ledger-listen".into())
            .spawn(move || run(&target, &channel, &stop, &signal));
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start the NOTIFY listener; watches will poll");
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn run(target: &Target, channel: &str, stop: &AtomicBool, signal: &CommitSignal) {
    let mut pause = Duration::from_millis(50);
    let mut warned = false;
    while !stop.load(Ordering::Relaxed) {
        let mut client = match target.connect() {
            Ok(client) => client,
            Err(error) => {
                if !warned {
                    tracing::warn!(%error, "the NOTIFY listener lost PostgreSQL; retrying");
                    warned = true;
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(RECONNECT_LIMIT);
                continue;
            }
        };
        let listening = client
            .batch_execute(&format!("LISTEN {}", quote_ident(channel)))
            .and_then(|()| {
                client.query_one("SELECT last_position FROM ledger_counter WHERE id = 1", &[])
            });
        match listening {
            Ok(row) => {
                if warned {
                    tracing::info!("the NOTIFY listener is connected again");
                }
                warned = false;
                pause = Duration::from_millis(50);
                // Commits may have happened while nobody listened.
                signal.committed(row.get::<_, i64>(0) as u64);
            }
            Err(error) => {
                tracing::debug!(%error, "LISTEN failed; reconnecting");
                std::thread::sleep(pause);
                continue;
            }
        }
        'connected: while !stop.load(Ordering::Relaxed) {
            let failed = {
                let mut notifications = client.notifications();
                let mut heard = notifications.timeout_iter(WAIT_SLICE);
                loop {
                    match heard.next() {
                        Ok(Some(notification)) => {
                            if let Ok(position) = notification.payload().parse::<u64>() {
                                signal.committed(position);
                            }
                        }
                        Err(error) => {
                            tracing::debug!(%error, "the NOTIFY connection failed; reconnecting");
                            break true;
                        }
                        Ok(None) => break false,
                    }
                }
            };
            if failed {
                break 'connected;
            }
            if client.is_closed() {
                break;
            }
        }
    }
}
