//! The one write path every tool family uses: pick the session (named, current or new),
//! let the family's pure `decide` produce the events, append them with the expected seq,
//! and answer only after the commit.
//!
//! Owns: [`Target`] (which session a call may continue), [`ToolCall::record`] (and
//! [`ToolCall::try_record`], whose `decide` may refuse) and [`ToolCall::record_more`], [`with_start`] and [`title_of`].
//! Every event a call writes carries the request's [`crate::request::Actor`], if any. The job runs on the
//! writer thread inside the group's transaction, so it reads the session head and the
//! process's current sessions in commit order; it is queued in the connection's arrival
//! order ([`crate::request::arrival`]). Idempotency is by event id: a call given a key
//! ([`Target::idempotency_key`]) records its events under ids derived from it, so a call
//! that runs again (a retried request, a 2026-07-28 round that runs the tool body again)
//! finds what it recorded and appends nothing.
//! Must not: decide what to record (families do), or answer before the commit.

use super::ToolError;
use crate::event::{CallRecord, EventId, NewEvent, Payload, SessionId, SessionKind};
use crate::request::{Actor, CurrentSessions, ToolCall};
use crate::store::{AppendTxn, SessionHead};
use serde_json::Value;

/// Most events one keyed call (or one keyed `record_more`) may append: what a re-run
/// looks up to find them again.
pub(crate) const MAX_EVENTS_PER_KEYED_CALL: usize = 16;

/// Characters of the first thought (or purpose) kept as a session's title.
pub(crate) const TITLE_CHARS: usize = 80;

/// The first line of a text, cut to [`TITLE_CHARS`].
pub(crate) fn title_of(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut title: String = line.chars().take(TITLE_CHARS).collect();
    if title.len() < line.len() {
        title.push('…');
    }
    title
}

/// Pure: `payloads` for the session at `head`, preceded by `session_started` of `kind`
/// (titled from `title_source`) when there is no session yet.
pub(crate) fn with_start(
    head: Option<&SessionHead>,
    kind: SessionKind,
    title_source: &str,
    payloads: impl IntoIterator<Item = Payload>,
) -> Vec<NewEvent> {
    let mut events = Vec::with_capacity(2);
    if head.is_none() {
        events.push(NewEvent::new(Payload::SessionStarted {
            kind,
            title: title_of(title_source),
            aliases: Vec::new(),
        }));
    }
    events.extend(payloads.into_iter().map(NewEvent::new));
    events
}

/// Which session a call may continue.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// The kind of session the call records.
    pub kind: SessionKind,
    /// The argument that names a session (for error messages).
    pub field: &'static str,
    /// The session (id or alias) the call names, if any: it must exist and be of `kind`.
    pub named: Option<String>,
    /// Without a named session: continue the caller's current session of `kind` if it
    /// was remembered under this key (and is still open); `None` starts a new session.
    /// A call with a key that finds none starts one and its answer says so
    /// ([`Recorded::started`]).
    pub continue_key: Option<String>,
    /// The key the session is remembered under after the call.
    pub remember_key: String,
    /// Makes the call idempotent: its events get ids derived from this key, and a call
    /// with a key that already recorded answers with what it recorded, appending nothing.
    pub idempotency_key: Option<String>,
}

/// What a committed append answers with.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub session: SessionId,
    /// Seq of the last event appended.
    pub seq: u64,
    pub head: SessionHead,
    /// A session was started though the call asked for none (no session id, and no
    /// current session of its caller to continue): the answer says so ([`started_hint`]).
    pub started: bool,
}

/// The line an answer carries when its call started a session it did not ask for: the
/// id, and the argument that continues it.
pub(crate) fn started_hint(session: &str, field: &str) -> String {
    format!(
        "Started a new session {session}: no open session of yours to continue here; pass {field}: \"{session}\" to continue it."
    )
}

/// Adds `"started": true` and the [`started_hint`] (as `sessionHint`) to a JSON answer of a call that
/// started a session it did not ask for; nothing otherwise.
pub(crate) fn mark_started(answer: &mut Value, recorded: &Recorded, shown: &str, field: &str) {
    if recorded.started {
        answer["started"] = Value::Bool(true);
        answer["sessionHint"] = Value::String(started_hint(shown, field));
    }
}

fn unknown_session(tool: &str, field: &str, given: &str) -> ToolError {
    ToolError::validation(
        tool,
        vec![format!(
            "{field}: no session {given:?} in the ledger; omit {field} to start a new session, or call list_sessions to find one"
        )],
    )
}

fn wrong_kind(tool: &str, field: &str, head: &SessionHead, wanted: SessionKind) -> ToolError {
    ToolError::validation(
        tool,
        vec![format!(
            "{field}: session {} is a {} session; {tool} continues {} sessions",
            head.session,
            head.summary.kind.as_str(),
            wanted.as_str()
        )],
    )
}

/// The session a call continues: the named one, else the current one, else none.
fn target_head(
    txn: &AppendTxn<'_>,
    tool: &str,
    target: &Target,
    current: Option<SessionId>,
) -> Result<Option<SessionHead>, ToolError> {
    if let Some(text) = target.named.as_deref() {
        let session = txn
            .resolve(text)?
            .ok_or_else(|| unknown_session(tool, target.field, text))?;
        let head = txn
            .head(session)?
            .ok_or_else(|| unknown_session(tool, target.field, text))?;
        if head.summary.kind != target.kind {
            return Err(wrong_kind(tool, target.field, &head, target.kind));
        }
        return Ok(Some(head));
    }
    match current {
        Some(session) => Ok(txn
            .head(session)?
            .filter(|h| h.summary.kind == target.kind && !h.summary.closed)),
        None => Ok(None),
    }
}

fn append(
    txn: &mut AppendTxn<'_>,
    session: SessionId,
    expected: u64,
    events: Vec<NewEvent>,
    traced: Option<&Traced>,
) -> Result<Recorded, ToolError> {
    let appended = txn.append(session, expected, events)?;
    if let Some(traced) = traced {
        traced.keep(&appended.events);
    }
    let seq = appended.events.last().map_or(appended.head.seq, |e| e.seq);
    Ok(Recorded {
        session,
        seq,
        head: appended.head,
        started: false,
    })
}

/// The events a traced call appended, kept for its span until the commit returns (a
/// commit that fails reports none): made only when the request has a span.
#[derive(Default)]
struct Traced(std::sync::Mutex<Vec<crate::event::Event>>);

impl Traced {
    /// A keeper for `call`'s appends, when it is traced.
    fn of(call: &ToolCall) -> Option<std::sync::Arc<Traced>> {
        call.request.trace.as_ref().map(|_| Default::default())
    }

    fn keep(&self, events: &[crate::event::Event]) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(events);
    }

    /// Hands the committed events to the call's span.
    fn report(&self, call: &ToolCall) {
        if let Some(trace) = &call.request.trace {
            trace.recorded(&self.0.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }
}

/// Gives `events` the request's actor (none over stdio): every event a call writes
/// carries who sent it.
fn stamp(events: &mut [NewEvent], actor: Option<&Actor>) {
    if let Some(actor) = actor {
        for event in events {
            event.actor = Some(actor.as_str().to_string());
        }
    }
}

/// Gives `events` the ids derived from `key`.
fn key_events(key: &str, events: &mut [NewEvent]) -> Result<(), ToolError> {
    if events.len() > MAX_EVENTS_PER_KEYED_CALL {
        return Err(ToolError::Panicked {
            tool: "write path".into(),
            message: format!(
                "a keyed call may append at most {MAX_EVENTS_PER_KEYED_CALL} events, not {}",
                events.len()
            ),
        });
    }
    for (index, event) in events.iter_mut().enumerate() {
        event.id = EventId::derived(key, index as u64);
    }
    Ok(())
}

/// What a call keyed `key` recorded before, if it did: the last of its events.
fn recorded_before(txn: &AppendTxn<'_>, key: &str) -> Result<Option<Recorded>, ToolError> {
    let ids: Vec<EventId> = (0..MAX_EVENTS_PER_KEYED_CALL as u64)
        .map(|index| EventId::derived(key, index))
        .collect();
    let found = txn.events_by_id(&ids)?;
    let Some(last) = found.into_iter().map_while(|event| event).last() else {
        return Ok(None);
    };
    let head = txn
        .head(last.session)?
        .ok_or(crate::store::StoreError::MissingHead {
            session: last.session,
        })?;
    Ok(Some(Recorded {
        session: last.session,
        seq: last.seq,
        head,
        started: false,
    }))
}

fn lock(current: &std::sync::Mutex<CurrentSessions>) -> std::sync::MutexGuard<'_, CurrentSessions> {
    current
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ToolCall {
    /// Records this call: on the writer thread, inside the group's transaction, picks the
    /// session ([`Target`]), lets the pure `decide` produce the events from the head
    /// (`None`: a new session) and the call's record, appends them at the head's seq and
    /// remembers the session as current. Queued in arrival order; returns once the
    /// commit is durable.
    pub(crate) async fn record(
        &mut self,
        target: Target,
        decide: impl FnOnce(Option<&SessionHead>, CallRecord) -> Vec<NewEvent> + Send + 'static,
    ) -> Result<Recorded, ToolError> {
        self.try_record(target, move |head, call| Ok(decide(head, call)))
            .await
    }

    /// [`ToolCall::record`] for a `decide` that may refuse, from the head it reads inside
    /// the transaction (a plan's phase, a closed branch): a refusal appends nothing and is
    /// the call's answer.
    pub(crate) async fn try_record(
        &mut self,
        target: Target,
        decide: impl FnOnce(Option<&SessionHead>, CallRecord) -> Result<Vec<NewEvent>, ToolError>
        + Send
        + 'static,
    ) -> Result<Recorded, ToolError> {
        let sessions = self.ctx.current.clone();
        let tool = self.name.clone();
        // Encoded here, not on the writer thread every call's commit waits for.
        let raw_arguments: crate::event::RawArguments =
            Value::Object(std::mem::take(&mut self.arguments)).into();
        let received = self.received;
        let actor = self.request.actor.clone();
        let caller = self.request.caller.clone();
        let traced = Traced::of(self);
        let keeper = traced.clone();
        let recorded = self
            .write(move |txn| -> Result<Recorded, ToolError> {
                if let Some(key) = target.idempotency_key.as_deref()
                    && let Some(recorded) = recorded_before(txn, key)?
                {
                    lock(&sessions).set(
                        &caller,
                        target.kind,
                        target.remember_key,
                        recorded.session,
                    );
                    return Ok(recorded);
                }
                let current = match target.continue_key.as_deref() {
                    Some(key) => lock(&sessions).get(&caller, target.kind, key),
                    None => None,
                };
                let head = target_head(txn, &tool, &target, current)?;
                let call = CallRecord {
                    tool,
                    raw_arguments,
                    duration_us: received.elapsed().as_micros() as u64,
                };
                let mut events = decide(head.as_ref(), call)?;
                stamp(&mut events, actor.as_ref());
                if let Some(key) = target.idempotency_key.as_deref() {
                    key_events(key, &mut events)?;
                }
                let (session, expected) = match &head {
                    Some(h) => (h.session, h.seq),
                    None => (SessionId::generate(), 0),
                };
                let mut recorded = append(txn, session, expected, events, keeper.as_deref())?;
                recorded.started =
                    head.is_none() && target.named.is_none() && target.continue_key.is_some();
                crate::fault::hit(crate::fault::FaultPoint::JobAfterAppend);
                lock(&sessions).set(&caller, target.kind, target.remember_key, recorded.session);
                Ok(recorded)
            })
            .await;
        if let (Ok(_), Some(traced)) = (&recorded, traced) {
            traced.report(self);
        }
        recorded
    }

    /// Appends more events to a session this call already recorded to (a model call's
    /// outcome after its request), right after `after`. With a key, as
    /// [`Target::idempotency_key`]: a re-run finds them and appends nothing.
    pub(crate) async fn record_more(
        &mut self,
        after: &Recorded,
        idempotency_key: Option<String>,
        mut events: Vec<NewEvent>,
    ) -> Result<Recorded, ToolError> {
        let (session, expected) = (after.session, after.seq);
        stamp(&mut events, self.request.actor.as_ref());
        let traced = Traced::of(self);
        let keeper = traced.clone();
        let recorded = self
            .write(move |txn| {
                if let Some(key) = idempotency_key.as_deref() {
                    if let Some(recorded) = recorded_before(txn, key)? {
                        return Ok(recorded);
                    }
                    key_events(key, &mut events)?;
                }
                append(txn, session, expected, events, keeper.as_deref())
            })
            .await;
        if let (Ok(_), Some(traced)) = (&recorded, traced) {
            traced.report(self);
        }
        recorded
    }

    /// Queues `job` in this call's turn and waits for its commit. A call the client
    /// cancelled before its job was queued records nothing (its answer would be dropped
    /// anyway); once queued, the job commits whatever happens to the request.
    async fn write<R: Send + 'static>(
        &mut self,
        job: impl FnOnce(&mut AppendTxn<'_>) -> Result<R, ToolError> + Send + 'static,
    ) -> Result<R, ToolError> {
        crate::fault::hit(crate::fault::FaultPoint::ToolBeforeWrite);
        tokio::select! {
            biased;
            () = self.request.cancel.cancelled() => {}
            () = self.request.turn.wait() => {}
        }
        if self.request.cancel.is_cancelled() {
            return Err(ToolError::Cancelled {
                tool: self.name.clone(),
            });
        }
        let queued = self.ctx.ledger.queue_write(job);
        self.request.turn.release();
        queued?.await?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Request, ToolContext};
    use crate::store::Ledger;

    fn closed(reason: &str) -> Vec<NewEvent> {
        vec![NewEvent::new(Payload::SessionClosed {
            reason: reason.into(),
        })]
    }

    fn call(ctx: &std::sync::Arc<ToolContext>) -> ToolCall {
        ToolCall {
            ctx: ctx.clone(),
            name: "note".into(),
            arguments: serde_json::Map::new(),
            received: std::time::Instant::now(),
            request: Request::detached(),
        }
    }

    fn target(key: Option<&str>) -> Target {
        Target {
            kind: SessionKind::THINKING,
            field: "sessionId",
            named: None,
            continue_key: None,
            remember_key: String::new(),
            idempotency_key: key.map(str::to_string),
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_call_records_more_after_its_first_append_and_keyed_writes_happen_once() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path(), crate::tools::families()).unwrap();
        let ctx = ToolContext::new(ledger.clone(), false);
        let decide = |head: Option<&SessionHead>, _call: CallRecord| {
            with_start(head, SessionKind::THINKING, "request", [])
        };

        // A request, then its outcome: two appends of one call, in one session.
        let mut first = call(&ctx);
        let request = first.record(target(Some("call-1")), decide).await.unwrap();
        assert_eq!(request.seq, 1);
        let outcome = first
            .record_more(&request, Some("call-1/outcome".into()), closed("answered"))
            .await
            .unwrap();
        assert_eq!((outcome.session, outcome.seq), (request.session, 2));

        // The same call run again (a retried request, a second round): nothing new.
        let mut again = call(&ctx);
        let request_again = again.record(target(Some("call-1")), decide).await.unwrap();
        assert_eq!(
            (request_again.session, request_again.seq),
            (request.session, 1)
        );
        let outcome_again = again
            .record_more(
                &request_again,
                Some("call-1/outcome".into()),
                closed("again"),
            )
            .await
            .unwrap();
        assert_eq!(outcome_again.seq, 2);
        assert_eq!(ledger.head(request.session).unwrap().unwrap().seq, 2);

        // Unkeyed, a call records every time: a new session here.
        let mut plain = call(&ctx);
        let other = plain.record(target(None), decide).await.unwrap();
        assert_ne!(other.session, request.session);
        ledger.verify_all().unwrap();
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn every_event_of_a_call_with_an_actor_carries_it_and_without_one_none() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path(), crate::tools::families()).unwrap();
        let ctx = ToolContext::new(ledger.clone(), false);
        let decide = |head: Option<&SessionHead>, _call: CallRecord| {
            with_start(head, SessionKind::THINKING, "request", [])
        };
        let mut by_alice = call(&ctx);
        by_alice.request.actor = Some(crate::request::Actor::new("alice"));
        let first = by_alice.record(target(None), decide).await.unwrap();
        // A model call's outcome, recorded after the first append: the same actor.
        let more = by_alice
            .record_more(&first, None, closed("answered"))
            .await
            .unwrap();
        let events = ledger.events(first.session, 1, more.seq).unwrap();
        assert_eq!(events.len(), 2);
        assert!(events.iter().all(|e| e.actor.as_deref() == Some("alice")));

        let mut anonymous = call(&ctx);
        let other = anonymous.record(target(None), decide).await.unwrap();
        let events = ledger.events(other.session, 1, other.seq).unwrap();
        assert!(events.iter().all(|e| e.actor.is_none()));
        ledger.verify_all().unwrap();
    }
}
