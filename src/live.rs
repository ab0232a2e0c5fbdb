//! Live resources: `notifications/resources/updated` for the sessions a client follows, as
//! any process (or any server sharing the database) commits to them.
//!
//! Owns: [`Interest`] (resource URIs by the session they show, plus the session list),
//! [`follow`] (one loop over a ledger [`crate::store::Watch`] that sends one
//! notification per touched URI per batch of commits). Both subscription styles use it:
//! `resources/subscribe` of the `initialize` generation (a connection's set of URIs,
//! grown and shrunk by subscribe/unsubscribe) and `subscriptions/listen` of 2026-07-28
//! (a fixed set for the life of that request). Must not: poll on its own (the watch
//! wakes on a local commit, a NOTIFY, or its backend's poll interval) or hold anything
//! that keeps a closed connection alive (it ends when sending fails or it is cancelled).

use crate::event::SessionId;
use crate::store::Ledger;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// The URI of the session list resource.
#[cfg(test)]
pub(crate) const SESSIONS_URI: &str = "ledger://sessions";

/// What a client follows.
#[derive(Default, Debug)]
pub(crate) struct Interest {
    /// (session, the URI as the client subscribed it).
    uris: BTreeSet<(SessionId, String)>,
    /// URIs of the session list (updated by any commit).
    lists: BTreeSet<String>,
}

impl Interest {
    pub(crate) fn add_session(&mut self, session: SessionId, uri: String) {
        self.uris.insert((session, uri));
    }

    pub(crate) fn add_list(&mut self, uri: String) {
        self.lists.insert(uri);
    }

    /// Forgets `uri` whatever it named.
    pub(crate) fn remove(&mut self, uri: &str) {
        self.uris.retain(|(_, u)| u != uri);
        self.lists.remove(uri);
    }

    /// The URIs touched by commits to `sessions`, each once.
    fn touched(&self, sessions: &BTreeSet<SessionId>) -> Vec<String> {
        let mut out: Vec<String> = self
            .uris
            .iter()
            .filter(|(session, _)| sessions.contains(session))
            .map(|(_, uri)| uri.clone())
            .collect();
        if !sessions.is_empty() {
            out.extend(self.lists.iter().cloned());
        }
        out
    }
}

/// Follows the ledger from position `from`: after each batch of commits, calls `send` with
/// every URI of `interest` the batch touched. Ends when `cancel` fires, when `send`
/// answers false (the client is gone), or when the ledger cannot be read.
pub(crate) async fn follow<F, Fut>(
    ledger: Ledger,
    from: u64,
    interest: Arc<Mutex<Interest>>,
    cancel: CancellationToken,
    mut send: F,
) where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut watch = ledger.watch(from);
    loop {
        let batch = tokio::select! {
            _ = cancel.cancelled() => return,
            batch = watch.next() => batch,
        };
        let events = match batch {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(%error, "live resource updates stopped: cannot read the ledger");
                return;
            }
        };
        let sessions: BTreeSet<SessionId> = events.iter().map(|e| e.event.session).collect();
        let uris = interest
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .touched(&sessions);
        for uri in uris {
            if !send(uri).await {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_touches_its_sessions_uris_and_the_list() {
        let (a, b) = (SessionId::generate(), SessionId::generate());
        let mut interest = Interest::default();
        interest.add_session(a, format!("ledger://sessions/{a}"));
        interest.add_session(a, format!("ledger://sessions/{a}/mermaid"));
        interest.add_session(b, format!("ledger://sessions/{b}"));
        interest.add_list(SESSIONS_URI.into());
        let touched = interest.touched(&BTreeSet::from([a]));
        assert_eq!(touched.len(), 3, "{touched:?}");
        assert!(touched.iter().all(|u| !u.contains(&b.to_string())));
        interest.remove(SESSIONS_URI);
        interest.remove(&format!("ledger://sessions/{a}/mermaid"));
        assert_eq!(interest.touched(&BTreeSet::from([a])).len(), 1);
        assert!(interest.touched(&BTreeSet::new()).is_empty());
    }
}
