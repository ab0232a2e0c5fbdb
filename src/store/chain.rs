//! A session's hash chain, checked as it is read: the one place that says whether a run of
//! stored rows is sound, for `verify`, for every read that hands events out, and for a
//! write before it chains onto a head.
//!
//! Owns: [`ChainCheck`] (row after row: the stored seq follows the last one, the event is
//! the row it is stored as, it belongs to the session, its `prev` is the last hash and its
//! content hashes to its `hash`), [`verify_in`] (a whole session against its head and
//! summary) and [`check_end`] (what a write chains onto: the head equals the stored last
//! event, which verifies, and nothing is stored after it). Must not: record damage (the
//! facade does, with what these return) or read anything but through [`ReadView`].

use super::contract::{Decode, ReadView};
use super::{SUMMARY_VERSION, SessionHead, StoreError, VerifiedSession, VerifyError};
use crate::event::summary::SessionSummary;
use crate::event::{Event, GENESIS_HASH, SessionId};

/// Checks stored rows of one session in seq order.
pub(crate) struct ChainCheck {
    session: SessionId,
    /// The seq the next row must be stored under.
    next_seq: u64,
    /// The hash the next event's `prev` must be; `None` when the check began after the
    /// first event without reading the one before (a read of a range).
    prev: Option<String>,
    /// Whether the rows' hashes are there to check (a whole decode).
    hashes: bool,
}

impl ChainCheck {
    /// A check of the rows of `session` from `from_seq` on (a seq of 0 reads from 1).
    pub(crate) fn from(session: SessionId, from_seq: u64, decode: Decode) -> ChainCheck {
        let first = from_seq.max(1);
        ChainCheck {
            session,
            next_seq: first,
            prev: (first == 1).then(|| GENESIS_HASH.to_string()),
            hashes: decode == Decode::Full,
        }
    }

    /// The seq of the last row that checked (0 before any).
    pub(crate) fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// The hash of the last row that checked, when known.
    pub(crate) fn last_hash(&self) -> Option<&str> {
        self.prev.as_deref()
    }

    /// Checks the next stored row: `stored_seq` is the seq it is stored under.
    pub(crate) fn check(
        &mut self,
        stored_seq: u64,
        decoded: Result<Event, StoreError>,
    ) -> Result<Event, VerifyError> {
        let session = self.session;
        let expected = self.next_seq;
        if stored_seq != expected {
            return Err(out_of_place(session, expected, stored_seq));
        }
        let event = decoded.map_err(|error| VerifyError::Undecodable {
            session,
            seq: stored_seq,
            detail: error.to_string(),
        })?;
        if event.seq != stored_seq {
            return Err(VerifyError::Renumbered {
                session,
                seq: stored_seq,
                found: event.seq,
            });
        }
        if event.session != session {
            return Err(VerifyError::WrongSession {
                session,
                seq: stored_seq,
                found: event.session,
            });
        }
        if self.hashes {
            if let Some(prev) = &self.prev
                && event.prev != *prev
            {
                return Err(VerifyError::BrokenChain {
                    session,
                    seq: stored_seq,
                    expected: prev.clone(),
                    found: event.prev,
                });
            }
            let computed = event.computed_hash();
            if computed != event.hash {
                return Err(VerifyError::HashMismatch {
                    session,
                    seq: stored_seq,
                    expected: computed,
                    found: event.hash,
                });
            }
            self.prev = Some(event.hash.clone());
        }
        self.next_seq = expected.checked_add(1).ok_or(VerifyError::SeqOverflow {
            session,
            seq: expected,
        })?;
        Ok(event)
    }

    /// Checks that the rows read end where `head` says the session ends: called when a
    /// read ran to its end without being stopped, and asked for rows up to `to_seq`.
    pub(crate) fn check_ends_at(&self, head: &SessionHead, to_seq: u64) -> Result<(), VerifyError> {
        let session = self.session;
        let last = self.last_seq();
        if last > head.seq {
            return Err(VerifyError::AfterHead {
                session,
                head: head.seq,
                last,
            });
        }
        let wanted = head.seq.min(to_seq);
        if last < wanted {
            return Err(VerifyError::Missing {
                session,
                from: last + 1,
                to: head.seq,
            });
        }
        if last == head.seq
            && let Some(hash) = self.last_hash()
            && self.hashes
            && hash != head.hash
        {
            return Err(VerifyError::HeadHashMismatch {
                session,
                seq: head.seq,
            });
        }
        Ok(())
    }
}

/// The finding for a row stored under `found` where `expected` was due.
fn out_of_place(session: SessionId, expected: u64, found: u64) -> VerifyError {
    if found > expected {
        VerifyError::Gap {
            session,
            expected,
            found,
        }
    } else if found + 1 == expected {
        VerifyError::Duplicate {
            session,
            seq: found,
        }
    } else {
        VerifyError::OutOfOrder {
            session,
            seq: found,
            after: expected - 1,
        }
    }
}

/// Checks one session: seqs gapless from 1, every event the row it is stored as, every
/// `prev` equal to the previous `hash`, every hash recomputed from the content, the head
/// equal to the last event and its summary equal to a fold of the log (a summary folded
/// by another [`SUMMARY_VERSION`] is [`VerifyError::StaleSummary`], fixable, apart from
/// damage). Stops at the first bad event.
pub(crate) fn verify_in(
    view: &dyn ReadView,
    session: SessionId,
) -> Result<VerifiedSession, VerifyError> {
    let head = view.head(session)?.ok_or(VerifyError::NoHead { session })?;
    let mut chain = ChainCheck::from(session, 1, Decode::Full);
    let mut summary: Option<SessionSummary> = None;
    let mut found: Option<VerifyError> = None;
    let mut previous_at = 0;
    let mut time_goes_back = None;
    view.scan_session(
        session,
        0,
        u64::MAX,
        Decode::Full,
        &mut |stored_seq, decoded| {
            let folded = chain.check(stored_seq, decoded).and_then(|event| {
                if event.at < previous_at && time_goes_back.is_none() {
                    time_goes_back = Some(event.seq);
                }
                previous_at = event.at;
                fold(session, &mut summary, &event)
            });
            match folded {
                Ok(()) => true,
                Err(error) => {
                    found = Some(error);
                    false
                }
            }
        },
    )?;
    if let Some(error) = found {
        return Err(error);
    }
    let last = chain.last_seq();
    if head.seq != last {
        return Err(if last > head.seq {
            VerifyError::AfterHead {
                session,
                head: head.seq,
                last,
            }
        } else {
            VerifyError::HeadMismatch {
                session,
                expected: head.seq,
                found: last,
            }
        });
    }
    if chain.last_hash() != Some(head.hash.as_str()) {
        return Err(VerifyError::HeadHashMismatch {
            session,
            seq: head.seq,
        });
    }
    if head.summary.version != SUMMARY_VERSION {
        return Err(VerifyError::StaleSummary {
            session,
            found: head.summary.version,
            current: SUMMARY_VERSION,
        });
    }
    if summary.as_ref() != Some(&head.summary) {
        return Err(VerifyError::SummaryMismatch { session });
    }
    Ok(VerifiedSession {
        session,
        events: last,
        time_goes_back,
    })
}

/// Folds `event` into the session's summary (the first must start it).
fn fold(
    session: SessionId,
    summary: &mut Option<SessionSummary>,
    event: &Event,
) -> Result<(), VerifyError> {
    match summary.as_mut() {
        None => {
            *summary = Some(SessionSummary::start(event).ok_or_else(|| {
                VerifyError::FirstEventNotStart {
                    session,
                    found: event.payload.type_name().to_string(),
                }
            })?)
        }
        Some(summary) => summary.apply(event),
    }
    Ok(())
}

/// What a write to `session` chains onto, checked before anything is planned: the stored
/// last event must be the one `head` names (same seq, same hash), must verify, and no
/// event may be stored after it; with no head, no event of the session may be stored.
/// `Ok(Err(finding))` is damage to record and refuse on; `Err` a storage failure.
pub(crate) fn check_end(
    view: &dyn ReadView,
    session: SessionId,
    head: Option<&SessionHead>,
) -> Result<Result<(), VerifyError>, StoreError> {
    let from = head.map_or(0, |h| h.seq);
    // The rows from the head's seq on: normally one (none for a new session).
    let mut last_two: Vec<(u64, Result<Event, StoreError>)> = Vec::with_capacity(2);
    let mut count = 0u64;
    view.scan_session(session, from, u64::MAX, Decode::Full, &mut |seq, row| {
        count += 1;
        if last_two.len() == 2 {
            drop(last_two.remove(0));
        }
        last_two.push((seq, row));
        true
    })?;
    let Some(head) = head else {
        return Ok(match last_two.first() {
            None => Ok(()),
            Some((seq, _)) => Err(VerifyError::NoHeadForEvents {
                session,
                first: *seq,
                count,
            }),
        });
    };
    if head.seq == u64::MAX {
        return Ok(Err(VerifyError::SeqOverflow {
            session,
            seq: head.seq,
        }));
    }
    let Some((last_seq, _)) = last_two.last() else {
        return Ok(Err(VerifyError::NoEventAtHead {
            session,
            seq: head.seq,
        }));
    };
    if *last_seq > head.seq {
        return Ok(Err(VerifyError::AfterHead {
            session,
            head: head.seq,
            last: *last_seq,
        }));
    }
    let (stored_seq, row) = last_two.pop().expect("a row");
    if stored_seq != head.seq {
        return Ok(Err(VerifyError::HeadMismatch {
            session,
            expected: head.seq,
            found: stored_seq,
        }));
    }
    let mut chain = ChainCheck {
        session,
        next_seq: head.seq,
        prev: None,
        hashes: true,
    };
    if let Err(finding) = chain.check(stored_seq, row) {
        return Ok(Err(finding));
    }
    if chain.last_hash() != Some(head.hash.as_str()) {
        return Ok(Err(VerifyError::HeadHashMismatch {
            session,
            seq: head.seq,
        }));
    }
    Ok(Ok(()))
}
