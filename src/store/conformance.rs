//! The store's contract as tests, written once against the [`Ledger`] facade and run for
//! every backend (test builds only).
//!
//! Owns: one function per promise of the contract (the append rules, idempotency, imports,
//! what `verify` catches, positions, reading from a position, watches, several handles on
//! one ledger) and [`conformance_suite!`], which turns them into `#[test]`s for a backend
//! given a constructor of a fresh, empty ledger. Must not: reach a backend's tables: damage
//! is injected through [`super::contract::WriteView`] only, so the same cases hold for
//! any backend.
//!
//! A backend runs the suite with one line (see the bottom of this file):
//! `mod my_backend { crate::conformance_suite!(super::my_backend_fresh); }`, its fresh
//! ledger opened by `fresh_at` as every command opens one.

use super::contract::AppendPlan;
use super::{
    AppendError, Appended, Ledger, Location, OpenMode, SessionHead, StoreError, VerifyError,
};
use crate::event::summary::SUMMARY_VERSION;
use crate::event::{Event, NewEvent, Payload, SessionId, SessionKind};
use crate::projection::fixtures;
use std::time::Duration;

/// A fresh, empty ledger for one case, and a way to open another handle on the same
/// ledger (as a second process would).
pub(super) struct Fresh {
    pub ledger: Ledger,
    pub another_handle: Box<dyn Fn() -> Ledger>,
    /// Whatever must outlive the handles (a temporary directory, a test database): bind
    /// it first, for the whole case (`keep: _keep, ledger, ..`; a `..` alone drops it at
    /// once, and bindings drop in reverse order).
    pub keep: Box<dyn std::any::Any>,
}

/// Longest a case waits for a watch before failing.
const WATCH_TEST_LIMIT: Duration = Duration::from_secs(10);

/// Turns every case into a `#[test]` for the backend `$fresh: fn() -> Fresh` builds.
#[macro_export]
#[doc(hidden)]
macro_rules! conformance_suite {
    ($fresh:path) => {
        $crate::conformance_suite!(@cases $fresh;
            append_checks_the_expected_seq_and_writes_nothing_on_conflict,
            a_retried_batch_is_acknowledged_with_the_stored_events,
            a_reused_id_is_refused,
            a_head_and_events_by_id_answer_as_their_parts,
            a_session_starts_with_session_started_once,
            aliases_are_unique_and_resolve,
            import_keeps_hashes_chains_and_is_idempotent,
            verify_catches_each_kind_of_damage,
            a_stale_summary_is_reported_apart_from_damage_and_a_rebuild_fixes_it,
            positions_follow_commit_order_without_gaps,
            events_are_read_from_a_position,
            heads_order_newest_first_by_position,
            a_watch_wakes_on_a_local_commit,
            two_handles_see_each_other_and_conflict,
            a_panicking_job_answers_an_error_and_the_writer_goes_on,
            a_write_checks_what_it_chains_onto,
            a_read_never_hands_out_damage_as_sound,
            a_verdict_outlasts_its_finder_and_only_a_sound_ledger_clears_it,
        );
    };
    (@cases $fresh:path; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::store::conformance::$case(&$fresh);
            }
        )*
    };
}

type MakeFresh = dyn Fn() -> Fresh;

fn start(aliases: &[&str]) -> NewEvent {
    NewEvent::new(Payload::SessionStarted {
        kind: SessionKind::THINKING,
        title: "t".into(),
        aliases: aliases.iter().map(|a| a.to_string()).collect(),
    })
}

fn closed(reason: &str) -> NewEvent {
    NewEvent::new(Payload::SessionClosed {
        reason: reason.into(),
    })
}

fn thought(text: &str, number: u64) -> NewEvent {
    NewEvent::new(fixtures::recorded(fixtures::seq_thought(text, number, 9)))
}

fn append(
    ledger: &Ledger,
    session: SessionId,
    expected: u64,
    events: Vec<NewEvent>,
) -> Result<Appended, AppendError> {
    ledger
        .write_blocking(move |txn| txn.append(session, expected, events))
        .expect("commit")
}

/// A new session with a start and `thoughts` thoughts; returns its head.
fn session_with(ledger: &Ledger, thoughts: u64) -> SessionHead {
    let session = SessionId::generate();
    let mut batch = vec![start(&[])];
    batch.extend((1..=thoughts).map(|n| thought(&format!("thought {n}"), n)));
    append(ledger, session, 0, batch).unwrap().head
}

/// Writes `plan` through the backend as it is (no rule checks): how the cases inject
/// damage a buggy writer or a bad disk could leave.
fn inject(ledger: &Ledger, plan: AppendPlan) {
    ledger
        .write_blocking(move |txn| txn.backend().append(&plan).map(|_| ()))
        .expect("commit")
        .expect("raw append");
}

/// Replaces a head through the backend.
fn put_head(ledger: &Ledger, head: SessionHead) {
    ledger
        .write_blocking(move |txn| txn.backend().put_head(&head))
        .expect("commit")
        .expect("put head");
}

pub(super) fn append_checks_the_expected_seq_and_writes_nothing_on_conflict(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let session = SessionId::generate();
    let first = append(&ledger, session, 0, vec![start(&[]), closed("a")]).unwrap();
    assert_eq!(first.head.seq, 2);
    let position = ledger.last_position().unwrap();
    match append(&ledger, session, 1, vec![closed("b")]) {
        Err(AppendError::Conflict {
            expected: 1,
            actual: 2,
            ..
        }) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(ledger.head(session).unwrap().unwrap(), first.head);
    assert_eq!(
        ledger.last_position().unwrap(),
        position,
        "no position taken"
    );
    assert_eq!(ledger.events(session, 1, 10).unwrap(), first.events);
    assert_eq!(ledger.verify_all().unwrap().len(), 1);
}

pub(super) fn a_retried_batch_is_acknowledged_with_the_stored_events(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let session = SessionId::generate();
    let batch = vec![start(&[]), closed("a")];
    let first = append(&ledger, session, 0, batch.clone()).unwrap();
    let position = ledger.last_position().unwrap();
    // The same batch again (a retried call) is acknowledged with the stored events, even
    // with a stale expected seq.
    let again = append(&ledger, session, 0, batch).unwrap();
    assert_eq!(again, first);
    assert_eq!(ledger.head(session).unwrap().unwrap().seq, 2);
    assert_eq!(ledger.last_position().unwrap(), position);
    // And an import of what is stored.
    let imported = ledger
        .write_blocking(move |txn| txn.import(first.events))
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(imported, again);
    assert_eq!(ledger.verify_all().unwrap().len(), 1);
}

/// `head_and_events_by_id` answers exactly as `head` and `events_by_id` do: in a read
/// view, and in the write transaction after appends of the same transaction (which it
/// sees), for a known and an unknown session, stored and missing ids, and no ids.
pub(super) fn a_head_and_events_by_id_answer_as_their_parts(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let first = session_with(&ledger, 2);
    let stored = ledger.events(first.session, 1, 10).unwrap();
    let missing = closed("never stored").id;
    let ids = vec![stored[2].id, missing, stored[0].id];
    let unknown = SessionId::generate();
    let expected_events = vec![Some(stored[2].clone()), None, Some(stored[0].clone())];
    {
        let view = ledger.backend.read(&ledger.families).unwrap();
        let (head, events) = view.head_and_events_by_id(first.session, &ids).unwrap();
        assert_eq!(head.as_ref(), Some(&first));
        assert_eq!(head, view.head(first.session).unwrap());
        assert_eq!(events, expected_events);
        assert_eq!(events, view.events_by_id(&ids).unwrap());
        let (head, events) = view.head_and_events_by_id(unknown, &[]).unwrap();
        assert_eq!((head, events), (None, Vec::new()));
    }
    let session = first.session;
    let seen = ledger
        .write_blocking(move |txn| {
            let view = txn.backend();
            let before = view.head_and_events_by_id(session, &ids)?;
            assert_eq!(before.0, view.head(session)?);
            assert_eq!(before.1, view.events_by_id(&ids)?);
            let more = closed("in this transaction");
            let more_id = more.id;
            let appended = txn.append(session, 3, vec![more]).expect("append");
            let view = txn.backend();
            let after = view.head_and_events_by_id(session, &[more_id, missing])?;
            assert_eq!(after.0.as_ref(), Some(&appended.head));
            assert_eq!(after.0, view.head(session)?);
            assert_eq!(after.1, vec![Some(appended.events[0].clone()), None]);
            assert_eq!(after.1, view.events_by_id(&[more_id, missing])?);
            assert_eq!(
                view.head_and_events_by_id(unknown, &[more_id])?,
                (None, vec![Some(appended.events[0].clone())])
            );
            Ok::<_, StoreError>((before, appended))
        })
        .unwrap()
        .unwrap();
    assert_eq!(seen.0, (Some(first), expected_events));
    assert_eq!(ledger.head(session).unwrap(), Some(seen.1.head));
}

pub(super) fn a_reused_id_is_refused(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let session = SessionId::generate();
    let batch = vec![start(&[]), closed("a")];
    append(&ledger, session, 0, batch.clone()).unwrap();
    let mut reused = closed("different");
    reused.id = batch[1].id;
    assert!(matches!(
        append(&ledger, session, 2, vec![reused]),
        Err(AppendError::IdReused { .. })
    ));
    // A batch whose ids are only partly stored is refused too, and writes nothing.
    let partly = vec![batch[1].clone(), closed("new")];
    assert!(matches!(
        append(&ledger, session, 2, partly),
        Err(AppendError::IdReused { id }) if id == batch[1].id
    ));
    // An id is unique across sessions.
    let other = SessionId::generate();
    let mut stolen = start(&[]);
    stolen.id = batch[0].id;
    assert!(matches!(
        append(&ledger, other, 0, vec![stolen]),
        Err(AppendError::IdReused { .. })
    ));
    assert_eq!(ledger.head(session).unwrap().unwrap().seq, 2);
    assert!(ledger.head(other).unwrap().is_none());
    assert_eq!(ledger.verify_all().unwrap().len(), 1);
}

pub(super) fn a_session_starts_with_session_started_once(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let session = SessionId::generate();
    assert!(matches!(
        append(&ledger, session, 0, vec![closed("x")]),
        Err(AppendError::FirstEventNotStart { .. })
    ));
    assert!(matches!(
        append(&ledger, session, 0, vec![]),
        Err(AppendError::EmptyBatch)
    ));
    assert!(matches!(
        append(&ledger, session, 0, vec![start(&[]), start(&[])]),
        Err(AppendError::StartInsideSession)
    ));
    assert!(ledger.head(session).unwrap().is_none());
    append(&ledger, session, 0, vec![start(&[])]).unwrap();
    assert!(matches!(
        append(&ledger, session, 1, vec![start(&[])]),
        Err(AppendError::StartInsideSession)
    ));
    assert_eq!(ledger.head(session).unwrap().unwrap().seq, 1);
    assert_eq!(ledger.last_position().unwrap(), 1);
}

pub(super) fn aliases_are_unique_and_resolve(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let session = SessionId::generate();
    append(&ledger, session, 0, vec![start(&["dp-1", "mine"])]).unwrap();
    assert_eq!(ledger.resolve("dp-1").unwrap(), Some(session));
    assert_eq!(ledger.resolve("mine").unwrap(), Some(session));
    assert_eq!(ledger.resolve(&session.to_string()).unwrap(), Some(session));
    assert_eq!(ledger.resolve("nobody").unwrap(), None);
    let unknown = SessionId::generate();
    assert_eq!(ledger.resolve(&unknown.to_string()).unwrap(), None);
    let other = SessionId::generate();
    assert!(matches!(
        append(&ledger, other, 0, vec![start(&["fresh", "dp-1"])]),
        Err(AppendError::AliasTaken { alias, existing }) if alias == "dp-1" && existing == session
    ));
    assert!(
        ledger.head(other).unwrap().is_none(),
        "nothing of a refused batch"
    );
    assert_eq!(ledger.resolve("fresh").unwrap(), None);
    let inside = ledger
        .write_blocking(|txn| txn.resolve("dp-1"))
        .unwrap()
        .unwrap();
    assert_eq!(inside, Some(session));
}

pub(super) fn import_keeps_hashes_chains_and_is_idempotent(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep_from,
        ledger: from,
        ..
    } = fresh();
    let Fresh {
        keep: _keep_to,
        ledger: to,
        ..
    } = fresh();
    let head = session_with(&from, 3);
    let events = from.events(head.session, 1, head.seq).unwrap();
    // In two pieces: the second must chain onto the first.
    let (first, rest) = (events[..2].to_vec(), events[2..].to_vec());
    to.write_blocking(move |txn| txn.import(first))
        .unwrap()
        .unwrap();
    let imported = to
        .write_blocking(move |txn| txn.import(rest))
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(to.events(head.session, 1, head.seq).unwrap(), events);
    assert_eq!(imported.head.hash, head.hash);
    assert_eq!(imported.head.summary, head.summary);
    // Again: acknowledged, nothing added.
    let again = events.clone();
    to.write_blocking(move |txn| txn.import(again))
        .unwrap()
        .unwrap();
    assert_eq!(to.head(head.session).unwrap().unwrap().seq, head.seq);
    assert!(
        to.write_blocking(|txn| txn.import(Vec::new()))
            .unwrap()
            .unwrap()
            .is_none()
    );
    // An event that does not chain is refused.
    let more = session_with(&from, 2);
    let mut tampered = from.events(more.session, 1, more.seq).unwrap();
    tampered[1].prev = tampered[0].prev.clone();
    tampered[1].hash = tampered[1].computed_hash();
    assert!(matches!(
        to.write_blocking(move |txn| txn.import(tampered)).unwrap(),
        Err(AppendError::ImportMismatch { seq: 2, .. })
    ));
    let mut altered = from.events(more.session, 1, more.seq).unwrap();
    altered[2].at += 1;
    assert!(matches!(
        to.write_blocking(move |txn| txn.import(altered)).unwrap(),
        Err(AppendError::ImportMismatch { seq: 3, .. })
    ));
    let skipping = from.events(more.session, 2, more.seq).unwrap();
    assert!(matches!(
        to.write_blocking(move |txn| txn.import(skipping)).unwrap(),
        Err(AppendError::Conflict { .. })
    ));
    assert!(to.head(more.session).unwrap().is_none());
    assert_eq!(to.verify_all().unwrap().len(), 1);
}

/// A plan that writes `events` after `head` as they are, with a head that matches them.
fn plan_after(head: &SessionHead, events: Vec<Event>) -> AppendPlan {
    let last = events.last().unwrap();
    AppendPlan {
        head: SessionHead {
            seq: last.seq,
            hash: last.hash.clone(),
            ..head.clone()
        },
        events,
        aliases: Vec::new(),
    }
}

/// The next event of `head`'s session (seq, prev and hash right), to be spoiled.
fn next_event(head: &SessionHead) -> Event {
    let mut event = Event {
        id: crate::event::EventId::generate(),
        session: head.session,
        seq: head.seq + 1,
        at: head.summary.updated_at,
        schema: crate::event::CORE_SCHEMA,
        actor: None,
        payload: Payload::SessionClosed {
            reason: "injected".into(),
        },
        prev: head.hash.clone(),
        hash: String::new(),
    };
    event.hash = event.computed_hash();
    event
}

pub(super) fn verify_catches_each_kind_of_damage(fresh: &MakeFresh) {
    type Spoil = fn(&SessionHead, &mut Event);
    let cases: [(&str, Spoil); 6] = [
        ("altered", |_, e| {
            e.payload = Payload::SessionClosed {
                reason: "other".into(),
            }
        }),
        ("altered actor", |_, e| {
            e.actor = Some("alice".into());
            e.hash = e.computed_hash();
            e.actor = Some("mallory".into());
        }),
        ("dropped actor", |_, e| {
            e.actor = Some("alice".into());
            e.hash = e.computed_hash();
            e.actor = None;
        }),
        ("broken chain", |_, e| {
            e.prev = crate::event::GENESIS_HASH.into();
            e.hash = e.computed_hash();
        }),
        ("gap", |_, e| {
            e.seq += 1;
            e.hash = e.computed_hash();
        }),
        ("wrong session", |_, e| {
            e.session = SessionId::generate();
            e.hash = e.computed_hash();
        }),
    ];
    for (name, spoil) in cases {
        let Fresh {
            keep: _keep,
            ledger,
            ..
        } = fresh();
        let head = session_with(&ledger, 2);
        let mut event = next_event(&head);
        spoil(&head, &mut event);
        inject(&ledger, plan_after(&head, vec![event]));
        let found = ledger.verify_session(head.session).unwrap_err();
        let expected = match name {
            "altered" | "altered actor" | "dropped actor" => {
                matches!(found, VerifyError::HashMismatch { seq: 4, .. })
            }
            "broken chain" => matches!(found, VerifyError::BrokenChain { seq: 4, .. }),
            "gap" => matches!(
                found,
                VerifyError::Gap {
                    expected: 4,
                    found: 5,
                    ..
                }
            ),
            _ => matches!(found, VerifyError::WrongSession { seq: 4, .. }),
        };
        assert!(expected, "{name}: {found:?}");
        assert!(!found.is_fixable(), "{name}");
        assert!(ledger.verify_all().is_err(), "{name}");
    }

    // An event with an actor is stored, read back and verified as written.
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let head = session_with(&ledger, 2);
    let mut by_alice = thought("by alice", 3);
    by_alice.actor = Some("alice@example.com".into());
    let appended = ledger
        .write_blocking(move |txn| txn.append(head.session, head.seq, vec![by_alice]))
        .unwrap()
        .unwrap();
    ledger.verify_session(head.session).unwrap();
    let stored = ledger.events(head.session, 4, 4).unwrap();
    assert_eq!(stored, appended.events);
    assert_eq!(stored[0].actor.as_deref(), Some("alice@example.com"));

    // A head that does not match its log.
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let head = session_with(&ledger, 2);
    put_head(
        &ledger,
        SessionHead {
            seq: 2,
            ..head.clone()
        },
    );
    assert!(matches!(
        ledger.verify_session(head.session),
        Err(VerifyError::AfterHead {
            head: 2,
            last: 3,
            ..
        })
    ));
    // Refused for the session (a database) or for the whole ledger (a file).
    let session = head.session;
    let refused =
        ledger.write_blocking(move |txn| txn.append(session, 3, vec![thought("after", 4)]));
    assert!(
        matches!(
            refused,
            Err(StoreError::Damaged { .. })
                | Ok(Err(AppendError::Storage(StoreError::Damaged { .. })))
        ),
        "a session found damaged takes no write: {refused:?}"
    );
    // A summary that does not match its log: damage, which a rebuild mends (it stops no
    // write: the rebuild is one).
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let head = session_with(&ledger, 2);
    let mut wrong = head.clone();
    wrong.summary.thoughts += 5;
    put_head(&ledger, wrong);
    let found = ledger.verify_session(head.session).unwrap_err();
    assert!(
        matches!(found, VerifyError::SummaryMismatch { .. }),
        "{found:?}"
    );
    assert_eq!(ledger.rebuild_summaries().unwrap(), [head.session]);
    ledger.verify_all().unwrap();

    // A session whose first event is not session_started.
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let head = session_with(&ledger, 1);
    let session = SessionId::generate();
    let first = next_event(&SessionHead {
        session,
        seq: 0,
        hash: crate::event::GENESIS_HASH.into(),
        ..head.clone()
    });
    inject(
        &ledger,
        plan_after(
            &SessionHead {
                session,
                ..head.clone()
            },
            vec![first],
        ),
    );
    // A rebuild leaves a log that does not fold alone.
    assert!(ledger.rebuild_summaries().unwrap().is_empty());
    assert!(matches!(
        ledger.verify_session(session),
        Err(VerifyError::FirstEventNotStart { .. })
    ));

    // No head at all.
    assert!(matches!(
        ledger.verify_session(SessionId::generate()),
        Err(VerifyError::NoHead { .. })
    ));
}

pub(super) fn a_stale_summary_is_reported_apart_from_damage_and_a_rebuild_fixes_it(
    fresh: &MakeFresh,
) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let fine = session_with(&ledger, 1);
    let head = session_with(&ledger, 3);
    let mut old = head.clone();
    old.summary.version = SUMMARY_VERSION - 1;
    put_head(&ledger, old);
    let found = ledger.verify_session(head.session).unwrap_err();
    assert!(
        matches!(found, VerifyError::StaleSummary { found, current, .. }
            if found == SUMMARY_VERSION - 1 && current == SUMMARY_VERSION),
        "{found:?}"
    );
    assert!(found.is_fixable());
    assert!(ledger.verify_all().unwrap_err().is_fixable());
    ledger.verify_session(fine.session).unwrap();
    assert_eq!(ledger.rebuild_summaries().unwrap(), [head.session]);
    assert_eq!(ledger.head(head.session).unwrap().unwrap(), head);
    assert_eq!(ledger.verify_all().unwrap().len(), 2);
    assert!(
        ledger.rebuild_summaries().unwrap().is_empty(),
        "nothing left"
    );
}

pub(super) fn positions_follow_commit_order_without_gaps(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    assert_eq!(ledger.last_position().unwrap(), 0);
    let a = session_with(&ledger, 2);
    assert_eq!(a.position, 3);
    let b = session_with(&ledger, 1);
    assert_eq!(b.position, 5);
    // One transaction, two sessions: positions in the order the job appended.
    let (sa, sb) = (a.session, b.session);
    let (ha, hb) = ledger
        .write_blocking(move |txn| {
            let hb = txn.append(sb, 2, vec![thought("b2", 2)]).unwrap().head;
            let ha = txn.append(sa, 3, vec![thought("a3", 3)]).unwrap().head;
            (ha, hb)
        })
        .unwrap();
    assert_eq!((hb.position, ha.position), (6, 7));
    assert_eq!(ledger.head(sa).unwrap().unwrap().position, 7);
    assert_eq!(ledger.last_position().unwrap(), 7);
    let all = ledger.events_from_position(1, usize::MAX).unwrap();
    let positions: Vec<u64> = all.iter().map(|e| e.position).collect();
    assert_eq!(positions, (1..=7).collect::<Vec<_>>());
    let order: Vec<(SessionId, u64)> = all.iter().map(|e| (e.event.session, e.event.seq)).collect();
    assert_eq!(
        order,
        [
            (sa, 1),
            (sa, 2),
            (sa, 3),
            (sb, 1),
            (sb, 2),
            (sb, 3),
            (sa, 4)
        ]
    );
    // A refused append takes no position.
    assert!(append(&ledger, sa, 1, vec![closed("late")]).is_err());
    assert_eq!(session_with(&ledger, 0).position, 8);
}

pub(super) fn events_are_read_from_a_position(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    assert!(ledger.events_from_position(1, 10).unwrap().is_empty());
    let a = session_with(&ledger, 3);
    let b = session_with(&ledger, 1);
    let page = ledger.events_from_position(3, 2).unwrap();
    assert_eq!(page.len(), 2);
    assert_eq!((page[0].position, page[1].position), (3, 4));
    assert_eq!(page[0].event, ledger.events(a.session, 3, 3).unwrap()[0]);
    let rest = ledger.events_from_position(5, 100).unwrap();
    assert_eq!(rest.len(), 2);
    assert!(rest.iter().all(|e| e.event.session == b.session));
    assert!(ledger.events_from_position(7, 100).unwrap().is_empty());
    assert!(ledger.events_from_position(1, 0).unwrap().is_empty());
    let mut seen = 0;
    ledger
        .for_each_event_from_position(0, |_| {
            seen += 1;
            seen < 4
        })
        .unwrap();
    assert_eq!(seen, 4, "stops when told");
}

pub(super) fn heads_order_newest_first_by_position(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    // All within the same millisecond, most likely: time cannot order them, positions do.
    let a = session_with(&ledger, 0);
    let b = session_with(&ledger, 0);
    let c = session_with(&ledger, 0);
    append(&ledger, a.session, 1, vec![thought("again", 1)]).unwrap();
    let mut heads = ledger.heads().unwrap();
    heads.sort_by_key(|h| std::cmp::Reverse(h.position));
    let order: Vec<SessionId> = heads.iter().map(|h| h.session).collect();
    assert_eq!(order, [a.session, c.session, b.session]);
}

/// Runs `future` on a fresh runtime (the cases are plain tests so a backend's constructor
/// may block).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// Wakes [`next_with_commit_while_waiting`]'s thread when the future it drives by hand
/// is worth polling again.
#[derive(Default)]
struct WakeSignal {
    woken: std::sync::Mutex<bool>,
    condvar: std::sync::Condvar,
}

impl std::task::Wake for WakeSignal {
    fn wake(self: std::sync::Arc<Self>) {
        *self.woken.lock().unwrap() = true;
        self.condvar.notify_all();
    }
}

impl WakeSignal {
    /// Waits (at most [`WATCH_TEST_LIMIT`]) for a wake since the last one, and consumes it.
    fn wait(&self, what: &str) {
        let woken = self.woken.lock().unwrap();
        let (mut woken, timeout) = self
            .condvar
            .wait_timeout_while(woken, WATCH_TEST_LIMIT, |woken| !*woken)
            .unwrap();
        assert!(!timeout.timed_out(), "{what} within {WATCH_TEST_LIMIT:?}");
        *woken = false;
    }
}

/// `watch.next()` driven by hand, with `commit` run while it waits: the first poll starts
/// its read of the ledger (on the blocking pool), the wake after it and the second poll
/// find nothing and leave it waiting for a commit (those are its only two places to wait).
/// Only then does `commit` run, so the answer proves a *waiting* watch woke: a commit
/// before the wait would be found by the read and prove nothing.
fn next_with_commit_while_waiting(
    watch: &mut super::Watch,
    commit: impl FnOnce() + Send,
) -> Vec<super::PositionedEvent> {
    use std::task::{Context, Poll};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let signal = std::sync::Arc::new(WakeSignal::default());
    let waker = std::task::Waker::from(signal.clone());
    let mut cx = Context::from_waker(&waker);
    let mut next = std::pin::pin!(watch.next());
    let mut poll = |cx: &mut Context<'_>| {
        let _inside = runtime.enter();
        next.as_mut().poll(cx)
    };
    assert!(poll(&mut cx).is_pending(), "the first poll starts the read");
    signal.wait("the read finished");
    assert!(
        poll(&mut cx).is_pending(),
        "nothing after the watch's position yet: it waits"
    );
    // On a thread of its own: a backend's blocking client may start a runtime.
    std::thread::scope(|scope| scope.spawn(commit).join().unwrap());
    loop {
        signal.wait("the watch woke after the commit");
        if let Poll::Ready(events) = poll(&mut cx) {
            return events.unwrap();
        }
    }
}

pub(super) fn a_watch_wakes_on_a_local_commit(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let before = session_with(&ledger, 1);
    let mut watch = ledger.watch(ledger.last_position().unwrap() + 1);
    assert_eq!(watch.next_position(), 3);
    let session = before.session;
    let events = next_with_commit_while_waiting(&mut watch, || {
        append(&ledger, session, 2, vec![thought("news", 2)]).unwrap();
    });
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].position, 3);
    assert_eq!(events[0].event.seq, 3);
    assert_eq!(watch.next_position(), 4);
    // From the start, a watch returns what is there without waiting.
    let mut from_start = ledger.watch(0);
    let all = block_on(async move { from_start.next().await.unwrap() });
    assert_eq!(all.len(), 3);
}

pub(super) fn two_handles_see_each_other_and_conflict(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        another_handle,
    } = fresh();
    let other = another_handle();
    let head = session_with(&ledger, 1);
    assert_eq!(other.head(head.session).unwrap().unwrap(), head);
    let moved = append(&other, head.session, 2, vec![thought("from the other", 2)]).unwrap();
    assert_eq!(ledger.head(head.session).unwrap().unwrap(), moved.head);
    assert_eq!(moved.head.position, 3);
    // The first handle's view was stale: its append is refused.
    assert!(matches!(
        append(&ledger, head.session, 2, vec![thought("stale", 2)]),
        Err(AppendError::Conflict {
            expected: 2,
            actual: 3,
            ..
        })
    ));
    // A watch on one handle notices the other's commit (by polling).
    let mut watch = ledger.watch(4);
    let session = head.session;
    let events = next_with_commit_while_waiting(&mut watch, || {
        append(&other, session, 3, vec![closed("done")]).unwrap();
    });
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].position, 4);
    assert_eq!(ledger.verify_all().unwrap().len(), 1);
}

pub(super) fn a_panicking_job_answers_an_error_and_the_writer_goes_on(fresh: &MakeFresh) {
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let outcome = ledger.write_blocking(|_txn| -> u8 { panic!("boom") });
    assert!(matches!(outcome, Err(StoreError::JobPanicked(m)) if m == "boom"));
    // One that panics after appending takes its group down: nothing of it is stored.
    let session = SessionId::generate();
    let outcome = ledger.write_blocking(move |txn| {
        txn.append(session, 0, vec![start(&[])]).unwrap();
        panic!("after appending")
    });
    assert!(matches!(outcome, Err(StoreError::JobPanicked(_))));
    assert!(ledger.head(session).unwrap().is_none());
    assert_eq!(ledger.last_position().unwrap(), 0);
    append(&ledger, session, 0, vec![start(&[])]).unwrap();
    assert_eq!(ledger.verify_all().unwrap().len(), 1);
}

/// Whether `outcome` (of an append) is a refusal for damage, not a conflict to retry.
fn refused_for_damage(outcome: &Result<Result<Appended, AppendError>, StoreError>) -> bool {
    matches!(
        outcome,
        Err(StoreError::Damaged { .. }) | Ok(Err(AppendError::Storage(StoreError::Damaged { .. })))
    )
}

pub(super) fn a_write_checks_what_it_chains_onto(fresh: &MakeFresh) {
    // The head's hash altered: the next write would chain onto a hash no event has.
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let head = session_with(&ledger, 2);
    let position = ledger.last_position().unwrap();
    put_head(
        &ledger,
        SessionHead {
            hash: "0".repeat(64),
            ..head.clone()
        },
    );
    let session = head.session;
    let refused =
        ledger.write_blocking(move |txn| txn.append(session, 3, vec![thought("after", 3)]));
    assert!(refused_for_damage(&refused), "{refused:?}");
    let text = format!("{:?}", refused);
    assert!(text.contains("head row was altered"), "{text}");
    assert!(!text.contains("call again"), "{text}");
    assert_eq!(ledger.last_position().unwrap(), position, "nothing written");

    // The head set back one event (seq and hash of seq 2): an event is stored after it.
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let head = session_with(&ledger, 2);
    let second = ledger.events(head.session, 2, 2).unwrap().remove(0);
    let mut set_back = head.clone();
    set_back.seq = 2;
    set_back.hash = second.hash.clone();
    put_head(&ledger, set_back);
    let session = head.session;
    let refused =
        ledger.write_blocking(move |txn| txn.append(session, 2, vec![thought("again", 3)]));
    assert!(refused_for_damage(&refused), "{refused:?}");
    assert!(
        format!("{refused:?}").contains("stored after its head"),
        "{refused:?}"
    );

    // A head at the largest seq: refused, never wrapped to seq 0.
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let head = session_with(&ledger, 1);
    put_head(
        &ledger,
        SessionHead {
            seq: u64::MAX,
            ..head.clone()
        },
    );
    let session = head.session;
    let refused =
        ledger.write_blocking(move |txn| txn.append(session, u64::MAX, vec![thought("wrap", 2)]));
    assert!(refused_for_damage(&refused), "{refused:?}");
    assert!(
        format!("{refused:?}").contains("largest there is"),
        "{refused:?}"
    );
    assert_eq!(ledger.head(head.session).unwrap().unwrap().seq, u64::MAX);

    // A sound session of the same ledger: a database goes on taking its writes.
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let damaged = session_with(&ledger, 1);
    let sound = session_with(&ledger, 1);
    put_head(
        &ledger,
        SessionHead {
            hash: "1".repeat(64),
            ..damaged.clone()
        },
    );
    let session = damaged.session;
    let refused = ledger.write_blocking(move |txn| txn.append(session, 2, vec![thought("x", 2)]));
    assert!(refused_for_damage(&refused), "{refused:?}");
    let session = sound.session;
    let other =
        ledger.write_blocking(move |txn| txn.append(session, 2, vec![thought("goes on", 2)]));
    match ledger.damage().stops_every_write() {
        // A file: every write stops (its pages are shared by every session).
        Some(_) => assert!(refused_for_damage(&other), "{other:?}"),
        None => assert_eq!(other.unwrap().unwrap().head.seq, 3),
    }
}

pub(super) fn a_read_never_hands_out_damage_as_sound(fresh: &MakeFresh) {
    // An altered event: the events before it are handed out, then the damage, named.
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let head = session_with(&ledger, 2);
    let mut altered = next_event(&head);
    altered.payload = Payload::SessionClosed {
        reason: "other".into(),
    };
    inject(&ledger, plan_after(&head, vec![altered]));
    let mut seen = Vec::new();
    let read = ledger.for_each_event(head.session, 0, u64::MAX, |event| {
        seen.push(event.seq);
        true
    });
    assert_eq!(seen, [1, 2, 3]);
    let error = read.unwrap_err();
    assert!(error.is_damage(), "{error}");
    assert!(error.to_string().contains("seq 4 was altered"), "{error}");

    // The head set back: the log goes on past it.
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let head = session_with(&ledger, 2);
    let second = ledger.events(head.session, 2, 2).unwrap().remove(0);
    put_head(
        &ledger,
        SessionHead {
            seq: 2,
            hash: second.hash,
            ..head.clone()
        },
    );
    let error = ledger.events(head.session, 1, u64::MAX).unwrap_err();
    assert!(
        error.to_string().contains("stored after its head"),
        "{error}"
    );

    // The head ahead of the log: the end is missing, not silently short.
    let Fresh {
        keep: _keep,
        ledger,
        ..
    } = fresh();
    let head = session_with(&ledger, 2);
    put_head(
        &ledger,
        SessionHead {
            seq: 9,
            ..head.clone()
        },
    );
    let mut seen = 0;
    let error = ledger
        .for_each_event(head.session, 1, u64::MAX, |_| {
            seen += 1;
            true
        })
        .unwrap_err();
    assert_eq!(seen, 3, "every event that verifies, then the damage");
    assert!(
        error.to_string().contains("seq 4 to 9 are missing"),
        "{error}"
    );
    // The session stays marked: a later read of what verifies still says so.
    let error = ledger.events(head.session, 1, 2).unwrap_err();
    assert!(error.to_string().contains("found damaged"), "{error}");
}

pub(super) fn a_verdict_outlasts_its_finder_and_only_a_sound_ledger_clears_it(fresh: &MakeFresh) {
    // What verify finds is recorded: a handle opened afterwards (another process) refuses
    // writes to the session.
    let Fresh {
        keep: _keep,
        ledger,
        another_handle,
    } = fresh();
    let head = session_with(&ledger, 2);
    put_head(
        &ledger,
        SessionHead {
            hash: "2".repeat(64),
            ..head.clone()
        },
    );
    assert!(ledger.verify_session(head.session).is_err());
    let later = another_handle();
    let recorded = later.damage().recorded();
    assert!(
        recorded.iter().any(|v| v.session == Some(head.session)),
        "{recorded:?}"
    );
    let session = head.session;
    let refused = later.write_blocking(move |txn| txn.append(session, 3, vec![thought("x", 3)]));
    assert!(refused_for_damage(&refused), "{refused:?}");
    // A whole check still finds it, so nothing clears it.
    assert!(later.check_all(|_, _| {}).unwrap().is_damaged());
    drop((ledger, later));

    // A verdict on a ledger that is sound (restored from a backup, say): it stops writes in
    // every handle until a check of the whole ledger passes, which clears it.
    let Fresh {
        keep: _keep,
        ledger,
        another_handle,
    } = fresh();
    let head = session_with(&ledger, 1);
    ledger
        .damage()
        .found_in(head.session, "found damaged before the restore");
    let later = another_handle();
    let session = head.session;
    let refused = later.write_blocking(move |txn| txn.append(session, 2, vec![thought("x", 2)]));
    assert!(refused_for_damage(&refused), "{refused:?}");
    let check = later.check_all(|_, _| {}).unwrap();
    assert!(!check.is_damaged(), "{:?}", check.findings);
    later.damage().clear_recorded().unwrap();
    drop((ledger, later));
    let reopened = another_handle();
    assert!(reopened.damage().recorded().is_empty());
    let appended = append(&reopened, head.session, 2, vec![thought("on", 2)]);
    assert_eq!(appended.unwrap().head.seq, 3);
}

/// A fresh ledger at `location` (opened as every command opens one), another handle on it,
/// and `keep` (what must outlive them).
fn fresh_at(location: Location, keep: Box<dyn std::any::Any>) -> Fresh {
    let again = location.clone();
    Fresh {
        ledger: Ledger::open_at(&location, OpenMode::Create, crate::tools::families()).unwrap(),
        another_handle: Box::new(move || {
            Ledger::open_at(&again, OpenMode::Create, crate::tools::families()).unwrap()
        }),
        keep,
    }
}

/// A fresh redb ledger in a temporary directory.
fn redb_fresh() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    fresh_at(Location::DataDir(dir.path().to_path_buf()), Box::new(dir))
}

mod redb {
    crate::conformance_suite!(super::redb_fresh);
}

/// A fresh redb ledger reached through its host: the case's ledger is a client of a host
/// that another handle holds (as a second process would be), and so is every other handle.
fn host_fresh() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let location = Location::DataDir(dir.path().to_path_buf());
    let host = Ledger::open_at(&location, OpenMode::Create, crate::tools::families()).unwrap();
    fresh_at(location, Box::new((dir, host)))
}

mod host {
    crate::conformance_suite!(super::host_fresh);
}

/// A fresh PostgreSQL ledger in its own schema of the tests' server.
fn postgres_fresh() -> Fresh {
    let db = super::postgres::testdb::TestDb::new();
    fresh_at(Location::parse(&db.url), Box::new(db))
}

mod postgres {
    crate::conformance_suite!(super::postgres_fresh);
}
