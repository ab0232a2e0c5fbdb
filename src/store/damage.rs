//! Damage found in a ledger, and the one place a panic of the storage engine is contained
//! (DESIGN §15).
//!
//! Owns: [`Damage`] (what this process found damaged in one ledger, and what any process
//! recorded in the ledger's lasting verdicts, [`super::verdict`]; whether that stops a
//! write), [`contain`] (runs a storage call so that a panic inside it — redb
//! assumes a sound file and panics on a damaged page — becomes [`StoreError::Damaged`],
//! printed by no panic hook); the views whose every call is contained are
//! `super::contained`'s. Must not: decide what is damaged beyond
//! what a call reported, or let a write through once a damage that stops writes is known.
//!
//! Scope: a file backend (redb) stops every write once any damage is found: its pages
//! are shared by every session, so nothing more may be appended to a file known to be
//! damaged. A database that checks its own pages (PostgreSQL) stops writes only to the
//! sessions whose rows are damaged ([`DamageScope::Session`]).

use super::StoreError;
use super::verdict::{Unrecorded, Verdict, VerdictStore};
use crate::event::SessionId;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};

/// What a damaged event or page stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DamageScope {
    /// Every write to the ledger (a file whose pages every session shares).
    Ledger,
    /// Writes to the damaged sessions only (a database with per-row storage).
    Session,
}

/// What this process found damaged in one ledger. Cheap to clone: every clone shares it.
#[derive(Clone)]
pub(crate) struct Damage(Arc<DamageInner>);

struct DamageInner {
    /// Set once anything is found: the write path's check is one load until then.
    any: AtomicBool,
    scope: DamageScope,
    /// The ledger's name in messages (its path, or a URL without credentials).
    label: String,
    /// The first damage found that stops every write, if any.
    ledger: Mutex<Option<String>>,
    /// Damage found in a session, by session (the first found in each).
    sessions: Mutex<BTreeMap<SessionId, String>>,
    /// Where findings are recorded so that they outlast this process, and where the
    /// findings of other processes are read from.
    store: Arc<dyn VerdictStore>,
    /// The verdicts recorded in `store`, as last read (this process's among them once
    /// recorded): they stop writes as this process's own findings do.
    recorded: Mutex<Vec<Verdict>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

impl Damage {
    /// What this process finds, kept in this process only.
    pub(crate) fn new(scope: DamageScope, label: impl Into<String>) -> Damage {
        Damage::recorded_in(scope, label, Arc::new(Unrecorded))
    }

    /// What this process finds, recorded in `store`; starts with what `store` holds
    /// already (a store that cannot be read is logged and taken as empty).
    pub(crate) fn recorded_in(
        scope: DamageScope,
        label: impl Into<String>,
        store: Arc<dyn VerdictStore>,
    ) -> Damage {
        let label = label.into();
        let recorded = store.load().unwrap_or_else(|error| {
            tracing::warn!(ledger = %label, %error, "cannot read the ledger's damage record");
            Vec::new()
        });
        Damage(Arc::new(DamageInner {
            any: AtomicBool::new(!recorded.is_empty()),
            scope,
            label,
            ledger: Mutex::new(None),
            sessions: Mutex::new(BTreeMap::new()),
            store,
            recorded: Mutex::new(recorded),
        }))
    }

    /// Reads again what other processes recorded, if the store says it changed (one
    /// `stat` of a file): called before each group commit.
    pub(crate) fn refresh(&self) {
        if let Some(verdicts) = self.0.store.reload_if_changed() {
            self.absorb(verdicts);
        }
    }

    /// Takes `verdicts` as what the store holds now (a write transaction that read them
    /// with its first statement).
    pub(crate) fn absorb(&self, verdicts: Vec<Verdict>) {
        if !verdicts.is_empty() {
            self.0.any.store(true, Ordering::Release);
        }
        *lock(&self.0.recorded) = verdicts;
    }

    /// The verdicts recorded in the ledger's store, as last read.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn recorded(&self) -> Vec<Verdict> {
        lock(&self.0.recorded).clone()
    }

    /// Reads the store's verdicts now (what `verify` lists).
    pub(crate) fn reload(&self) -> Result<Vec<Verdict>, StoreError> {
        let verdicts = self.0.store.load()?;
        self.absorb(verdicts.clone());
        Ok(verdicts)
    }

    /// Removes every recorded verdict: the whole ledger verified sound (after a restore
    /// or on a rebuilt ledger). What this process found itself still stops its writes.
    pub(crate) fn clear_recorded(&self) -> Result<(), StoreError> {
        self.0.store.clear()?;
        lock(&self.0.recorded).clear();
        Ok(())
    }

    /// Records `verdict` in the store, unless the store holds one for its session (or
    /// the ledger) already; a store that cannot be written is logged, no more.
    fn record(&self, verdict: Verdict) {
        {
            let mut recorded = lock(&self.0.recorded);
            if recorded.iter().any(|v| v.session == verdict.session) {
                return;
            }
            recorded.push(verdict.clone());
        }
        if let Err(error) = self.0.store.record(&verdict) {
            tracing::warn!(ledger = %self.0.label, %error, "cannot record the damage found: it stops this process's writes only");
        }
    }

    /// The ledger's name in messages.
    pub(crate) fn label(&self) -> &str {
        &self.0.label
    }

    /// Damage that is no one session's (a page of the file, the redo log): stops every
    /// write, whatever the scope. The first one found is kept, and recorded.
    pub(crate) fn found(&self, detail: impl Into<String>) {
        if let Some(detail) = self.stop_every_write(detail.into()) {
            self.record(Verdict::now(None, detail));
        }
    }

    /// Makes `detail` what stops every write here, unless something does already: returns
    /// it when it is the first.
    fn stop_every_write(&self, detail: String) -> Option<String> {
        let mut ledger = lock(&self.0.ledger);
        self.0.any.store(true, Ordering::Release);
        if ledger.is_some() {
            return None;
        }
        tracing::debug!(ledger = %self.0.label, %detail, "the ledger is damaged: it takes no more writes");
        *ledger = Some(detail.clone());
        Some(detail)
    }

    /// Damage in one session (an event that does not decode or verify): stops writes to
    /// that session, and to the whole ledger when the scope is [`DamageScope::Ledger`].
    pub(crate) fn found_in(&self, session: SessionId, detail: impl Into<String>) {
        let detail = in_session(session, detail.into());
        let new = {
            let mut sessions = lock(&self.0.sessions);
            let new = !sessions.contains_key(&session);
            sessions.entry(session).or_insert_with(|| detail.clone());
            new
        };
        self.0.any.store(true, Ordering::Release);
        if new {
            self.record(Verdict::now(Some(session), detail.clone()));
        }
        if self.0.scope == DamageScope::Ledger {
            // A file's every write stops on it (see `stops_every_write`).
            tracing::debug!(ledger = %self.0.label, %detail, "the ledger is damaged: it takes no more writes");
        } else {
            tracing::debug!(ledger = %self.0.label, %session, %detail, "a session of the ledger is damaged: it takes no more writes");
        }
    }

    /// What this process found in `session`, or a verdict recorded on it (`None` when the
    /// session is not known damaged): a read that finds nothing itself still marks it.
    pub(crate) fn verdict_on(&self, session: SessionId) -> Option<String> {
        if !self.0.any.load(Ordering::Acquire) {
            return None;
        }
        if let Some(detail) = lock(&self.0.sessions).get(&session) {
            return Some(detail.clone());
        }
        lock(&self.0.recorded)
            .iter()
            .find(|v| v.session == Some(session))
            .map(|v| v.detail.clone())
    }

    /// The damage this process found in no one session (a page, the redo log), if any:
    /// what a walk of the tables may not show again.
    pub(crate) fn ledger_damage(&self) -> Option<String> {
        lock(&self.0.ledger).clone()
    }

    /// What stops every write: this process's own finding, else a recorded verdict on
    /// the whole ledger (or, in a file, any recorded verdict: its pages are shared).
    pub(crate) fn stops_every_write(&self) -> Option<String> {
        if let Some(detail) = self.ledger_damage() {
            return Some(detail);
        }
        if self.0.scope == DamageScope::Ledger
            && let Some(detail) = lock(&self.0.sessions).values().next()
        {
            return Some(detail.clone());
        }
        let recorded = lock(&self.0.recorded);
        recorded
            .iter()
            .find(|v| v.session.is_none() || self.0.scope == DamageScope::Ledger)
            .map(|v| v.detail.clone())
    }

    /// The sessions known damaged, with what was found in each: this process's findings
    /// and the verdicts recorded on sessions.
    pub(crate) fn damaged_sessions(&self) -> BTreeMap<SessionId, String> {
        let mut damaged = lock(&self.0.sessions).clone();
        for verdict in lock(&self.0.recorded).iter() {
            if let Some(session) = verdict.session {
                damaged
                    .entry(session)
                    .or_insert_with(|| verdict.detail.clone());
            }
        }
        damaged
    }

    /// Whether a write to `session` (or any write, with `None`) may go ahead: the error
    /// to answer instead when damage stops it.
    pub(crate) fn check_write(&self, session: Option<SessionId>) -> Result<(), StoreError> {
        if !self.0.any.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Some(detail) = self.stops_every_write() {
            return Err(StoreError::Damaged {
                ledger: self.0.label.clone(),
                detail,
            });
        }
        let Some(session) = session else {
            return Ok(());
        };
        let found = lock(&self.0.sessions).get(&session).cloned().or_else(|| {
            lock(&self.0.recorded)
                .iter()
                .find(|v| v.session == Some(session))
                .map(|v| v.detail.clone())
        });
        match found {
            Some(detail) => Err(StoreError::Damaged {
                ledger: self.0.label.clone(),
                detail,
            }),
            None => Ok(()),
        }
    }

    /// Records what `error` says is damaged, if anything: a contained panic or an event
    /// that does not decode (in `session`, when the caller knows it).
    pub(crate) fn note(&self, session: Option<SessionId>, error: &StoreError) {
        let detail = match error {
            StoreError::Damaged { detail, .. } => detail.clone(),
            StoreError::Corrupt(detail) => detail.clone(),
            _ => return,
        };
        match session {
            Some(session) if !matches!(error, StoreError::Damaged { .. }) => {
                self.found_in(session, detail)
            }
            _ => self.found(detail),
        }
    }
}

/// `detail` as a finding about `session`: prefixed with it unless it names it already.
fn in_session(session: SessionId, detail: String) -> String {
    let prefix = format!("session {session}");
    if detail.starts_with(&prefix) {
        detail
    } else {
        format!("{prefix}: {detail}")
    }
}

thread_local! {
    /// How deep this thread is inside [`contain`]: a panic there is the call's answer, not
    /// something to print.
    static CONTAINING: Cell<u32> = const { Cell::new(0) };
    /// The message and place of the last panic contained on this thread.
    static CONTAINED_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once per process) the panic hook that keeps a contained panic off stderr: it
/// is kept for the error instead; any other panic goes to the hook there was before.
fn install_quiet_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CONTAINING.with(Cell::get) > 0 {
                let place = info
                    .location()
                    .map(|l| format!(" at {}:{}", short_path(l.file()), l.line()))
                    .unwrap_or_default();
                let message = payload_text(info.payload());
                // With RUST_BACKTRACE set, where it happened, for whoever debugs the engine.
                let trace = std::backtrace::Backtrace::capture();
                if trace.status() == std::backtrace::BacktraceStatus::Captured {
                    tracing::debug!(%message, %trace, "contained a panic of the storage engine");
                }
                CONTAINED_PANIC.with(|last| *last.borrow_mut() = Some(format!("{message}{place}")));
            } else {
                previous(info);
            }
        }));
    });
}

/// A source path as far as its crate's folder (`redb-4.6.0/src/…`), not the registry's.
fn short_path(file: &str) -> &str {
    const REGISTRY: &str = "/registry/src/";
    match file.find(REGISTRY) {
        Some(at) => {
            let rest = &file[at + REGISTRY.len()..];
            rest.split_once('/').map_or(rest, |(_, in_crate)| in_crate)
        }
        None => file,
    }
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text.to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic".to_string()
    }
}

/// Runs `call`; a panic inside it is returned as its message (and place), printed by no
/// panic hook. The one place a panic of the storage engine is caught.
pub(crate) fn catch_quietly<T>(call: impl FnOnce() -> T) -> Result<T, String> {
    install_quiet_hook();
    CONTAINING.with(|depth| depth.set(depth.get() + 1));
    let outcome = catch_unwind(AssertUnwindSafe(call));
    CONTAINING.with(|depth| depth.set(depth.get() - 1));
    outcome.map_err(|panic| {
        CONTAINED_PANIC
            .with(|last| last.borrow_mut().take())
            .unwrap_or_else(|| payload_text(&*panic))
    })
}

/// Runs `call`, a call into storage; a panic inside it (the storage engine meeting bytes
/// it cannot read) becomes [`StoreError::Damaged`] naming `what` was being done, recorded
/// in `damage`. No panic message reaches stderr. An error `call` returns that says the
/// ledger is damaged is recorded too.
pub(crate) fn contain<T>(
    damage: &Damage,
    what: impl FnOnce() -> String,
    call: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    match catch_quietly(call) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => {
            if matches!(error, StoreError::Damaged { .. }) {
                damage.note(None, &error);
            }
            Err(error)
        }
        Err(message) => {
            let detail = format!(
                "the storage engine stopped on bytes it cannot read while {} ({message})",
                what()
            );
            damage.found(detail.clone());
            Err(StoreError::Damaged {
                ledger: damage.label().to_string(),
                detail,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_contain_is_an_error_naming_what_was_done_and_stops_writes() {
        let damage = Damage::new(DamageScope::Ledger, "test.redb");
        assert!(damage.check_write(None).is_ok());
        let answer: Result<(), StoreError> = contain(
            &damage,
            || "reading a page".into(),
            || unreachable!("a damaged page"),
        );
        let Err(StoreError::Damaged { ledger, detail }) = answer else {
            panic!("{answer:?}");
        };
        assert_eq!(ledger, "test.redb");
        assert!(detail.contains("while reading a page"), "{detail}");
        assert!(detail.contains("a damaged page"), "{detail}");
        assert!(detail.contains("damage.rs"), "where it happened: {detail}");
        assert!(damage.check_write(None).is_err());
        // A panic outside any containment still reaches the hook there was before.
        assert!(std::panic::catch_unwind(|| panic!("a bug")).is_err());
    }

    #[test]
    fn a_damaged_session_stops_its_own_writes_on_a_database_and_every_write_on_a_file() {
        let one = SessionId::generate();
        let other = SessionId::generate();
        let database = Damage::new(DamageScope::Session, "postgres://db");
        database.found_in(one, "event seq 2 cannot be decoded");
        assert!(database.check_write(Some(one)).is_err());
        assert!(database.check_write(Some(other)).is_ok());
        assert!(database.check_write(None).is_ok());
        let file = Damage::new(DamageScope::Ledger, "ledger.redb");
        file.found_in(one, format!("session {one}: event seq 2 cannot be decoded"));
        let Err(StoreError::Damaged { detail, .. }) = file.check_write(Some(other)) else {
            panic!("a damaged file takes no write");
        };
        assert_eq!(detail.matches("session").count(), 1, "{detail}");
        assert_eq!(file.damaged_sessions().len(), 1);
    }
}
