//! The connections `serve --http` holds, oldest first, and who makes room when they are
//! too many: the oldest connection that has not yet sent a request with a valid token.
//!
//! Owns: [`ConnectionTable`] (every open connection: its peer address, its clock, its
//! eviction signal; the count per peer address) and the policy proxies use for a full
//! table: a new connection is never refused, nor left waiting, while a connection that
//! has shown no valid token can be closed instead; a connection that has shown one is
//! never closed for one that has not. Beyond its peer's share (`--max-connections-per-
//! peer`) a connection evicts the oldest such connection of its own address, and is
//! refused only when there is none; when every slot is held (`--max-connections`), the
//! oldest such connection of any address makes room. Each eviction is counted
//! (`connections_evicted_total`).
//!
//! Must not: evict a connection with a valid token, or one whose request is being
//! served (a probe is answered in microseconds), or let an address's count go wrong when
//! an evicted connection's task ends after its entry left the table.

use super::limits::ConnectionClock;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;

/// One open connection.
struct Entry {
    peer: IpAddr,
    clock: Arc<ConnectionClock>,
    /// Cancelled to close the connection.
    evict: CancellationToken,
}

#[derive(Default)]
struct Table {
    /// Open connections by the order they were admitted (oldest first).
    open: BTreeMap<u64, Entry>,
    /// Entries in `open` per peer address.
    per_peer: HashMap<IpAddr, usize>,
    next: u64,
}

impl Table {
    /// Removes the oldest evictable entry (of `peer` when given) and signals it.
    fn evict_oldest(&mut self, peer: Option<IpAddr>) -> bool {
        let found = self
            .open
            .iter()
            .find(|(_, entry)| peer.is_none_or(|p| entry.peer == p) && entry.clock.evictable())
            .map(|(id, _)| *id);
        match found.and_then(|id| self.remove(id)) {
            Some(entry) => {
                entry.evict.cancel();
                super::metrics::connection_evicted();
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.open.remove(&id)?;
        if let Some(count) = self.per_peer.get_mut(&entry.peer) {
            *count -= 1;
            if *count == 0 {
                self.per_peer.remove(&entry.peer);
            }
        }
        Some(entry)
    }
}

/// The open connections (see the module doc).
#[derive(Default)]
pub(super) struct ConnectionTable {
    table: Mutex<Table>,
}

impl ConnectionTable {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Admits a connection of `peer` with `clock`: when `peer` holds `cap` connections,
    /// its oldest that has shown no valid token is evicted for it; `None` (refused) when
    /// there is none. The slot leaves the table when dropped, or when evicted.
    pub(super) fn admit(
        self: &Arc<Self>,
        peer: IpAddr,
        cap: usize,
        clock: Arc<ConnectionClock>,
    ) -> Option<ConnectionSlot> {
        // An IPv4 peer on a dual-stack socket is one address, however it is written.
        let peer = peer.to_canonical();
        let mut table = self.lock();
        let held = table.per_peer.get(&peer).copied().unwrap_or(0);
        if held >= cap && !table.evict_oldest(Some(peer)) {
            return None;
        }
        let id = table.next;
        table.next += 1;
        let evict = CancellationToken::new();
        table.open.insert(
            id,
            Entry {
                peer,
                clock,
                evict: evict.clone(),
            },
        );
        *table.per_peer.entry(peer).or_default() += 1;
        Some(ConnectionSlot {
            table: self.clone(),
            id,
            evicted: evict,
        })
    }

    /// Every slot is held and a connection waits for one: evicts the oldest connection,
    /// of any address, that has shown no valid token. False when there is none (the new
    /// connection waits for a slot to free).
    pub(super) fn make_room(&self) -> bool {
        self.lock().evict_oldest(None)
    }
}

/// One connection's place in the table; it leaves when dropped.
pub(super) struct ConnectionSlot {
    table: Arc<ConnectionTable>,
    id: u64,
    evicted: CancellationToken,
}

impl ConnectionSlot {
    /// Resolves when the connection was evicted: it is to close now.
    pub(super) fn evicted(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.evicted.cancelled()
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        // Already gone when it was evicted: its address's count was lowered then.
        self.table.lock().remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// A connection that has sent a request with a valid token.
    fn known() -> Arc<ConnectionClock> {
        let clock = ConnectionClock::start();
        clock.authenticated();
        clock
    }

    #[test]
    fn a_peer_holds_at_most_its_cap_however_its_address_is_written() {
        let table = Arc::new(ConnectionTable::default());
        let one: IpAddr = "127.0.0.2".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        let other: IpAddr = "127.0.0.1".parse().unwrap();
        let first = table.admit(one, 2, known()).unwrap();
        let _second = table.admit(mapped, 2, known()).unwrap();
        assert!(table.admit(one, 2, known()).is_none());
        let _third = table.admit(other, 2, known()).unwrap();
        drop(first);
        assert!(table.admit(one, 2, known()).is_some());
        assert!(table.admit(one, 0, known()).is_none());
    }

    fn addr(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    #[tokio::test]
    async fn a_full_address_evicts_its_oldest_connection_without_a_token_never_one_with() {
        let table = Arc::new(ConnectionTable::default());
        let clocks: Vec<Arc<ConnectionClock>> = (0..3).map(|_| ConnectionClock::start()).collect();
        // The first has shown a valid token; the second and third have not.
        clocks[0].authenticated();
        let slots: Vec<ConnectionSlot> = clocks
            .iter()
            .map(|clock| table.admit(addr(1), 3, clock.clone()).unwrap())
            .collect();
        // Full: the next evicts the oldest without a token (the second), not the first.
        let fourth = table.admit(addr(1), 3, ConnectionClock::start()).unwrap();
        slots[1].evicted().await;
        assert!(!slots[0].evicted.is_cancelled() && !slots[2].evicted.is_cancelled());
        // Another address is not touched by this one's share.
        let other = table.admit(addr(2), 3, ConnectionClock::start()).unwrap();
        assert_eq!(table.lock().per_peer[&addr(1)], 3);
        // The evicted task ending later does not lower the count again.
        drop(slots);
        assert_eq!(table.lock().per_peer[&addr(1)], 1);
        // With only connections that showed a token, a full address refuses.
        let known: Vec<ConnectionSlot> = (0..2)
            .map(|_| {
                let clock = ConnectionClock::start();
                clock.authenticated();
                table.admit(addr(3), 2, clock).unwrap()
            })
            .collect();
        assert!(table.admit(addr(3), 2, ConnectionClock::start()).is_none());
        // Any address's oldest without a token makes room in a full table.
        assert!(table.make_room());
        fourth.evicted().await;
        assert!(table.make_room());
        other.evicted().await;
        assert!(!table.make_room());
        drop(known);
        assert!(table.lock().open.is_empty() && table.lock().per_peer.is_empty());
    }
}
