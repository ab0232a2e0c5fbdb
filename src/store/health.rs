//! The store's connection health, for `/metrics`: how often a backend that reaches its
//! store over a connection (PostgreSQL) reached it again after losing it.
//!
//! Owns: [`STORE_RECONNECTS`] and what a backend tells it ([`store_connection_lost`],
//! [`store_connected`]). Must not: decide anything (nothing reads it but the metrics).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Times the store was reached again after a connection was lost or could not be opened
/// (PostgreSQL; `/metrics`): a whole outage counts once.
pub(crate) static STORE_RECONNECTS: AtomicU64 = AtomicU64::new(0);

/// Whether a store connection was lost (or failed to open) since the last one opened.
static STORE_LOST: AtomicBool = AtomicBool::new(false);

/// A store connection was found dead.
pub(crate) fn store_connection_lost() {
    STORE_LOST.store(true, Ordering::Relaxed);
}

/// A store connection was opened (`true`) or could not be (`false`).
pub(crate) fn store_connected(opened: bool) {
    if !opened {
        store_connection_lost();
    } else if STORE_LOST.swap(false, Ordering::Relaxed) {
        STORE_RECONNECTS.fetch_add(1, Ordering::Relaxed);
    }
}
