//! `copy --to URL|DIR`: the whole ledger copied in position order; idempotent and resumable
//! (each batch is one transaction: an interrupted copy leaves whole batches, and the next
//! run skips what is there). One damaged session is one session not copied whole: it is
//! copied up to its damage and named, and every other session is copied.
//!
//! Owns: the two passes (every readable event in position order, so the copy's positions
//! follow the source's commit order; then each session the first pass left behind, by
//! seq: positions out of order, or events after an unreadable one), telling a source's
//! damage (named, the copy goes on) from a target that is not a copy of the source (the
//! copy stops), and the report and exit code (1 when a session was not copied whole, after
//! everything else is copied). Must not: write the source, or call damage inside the data
//! anything but damage (never "moved").

use super::*;
use crate::store::{AppendError, PositionedEvent};
use std::collections::{BTreeMap, BTreeSet};

/// Events one `copy` transaction carries at most.
pub(super) const COPY_BATCH_EVENTS: usize = 1000;

/// Events the position pass skips because they cannot be read before it leaves the rest to
/// the pass by seq (a damaged position index can make every later one unreadable).
const COPY_MAX_UNREADABLE: usize = 100;

/// `copy --to`: every event of this ledger into another store, in position order (so the
/// copy's positions follow the same commit order), each session's events exactly as
/// stored (ids, times, hashes). Idempotent and resumable: events the target already holds
/// are checked (same hash) and skipped, the rest appended. A session damaged in the source
/// is copied up to its damage and named; the command then exits 1.
pub(super) fn copy(settings: &Settings, to: &str) -> anyhow::Result<()> {
    let source = open_existing(settings)?;
    let target = Ledger::open_at(&Location::parse(to), OpenMode::Create, families())?;
    let source_label = source.path().display().to_string();
    let target_label = target.path().display().to_string();
    if source_label == target_label {
        bail!("copy --to {target_label}: that is the ledger being copied");
    }
    let mut copy = Copy {
        target: &target,
        source_label: &source_label,
        target_label: &target_label,
        copied: 0,
        present: 0,
        sessions: BTreeSet::new(),
        stopped: BTreeMap::new(),
    };
    copy.by_position(&source)?;
    copy.stopped.clear();
    copy.by_seq(&source)?;
    let verified = super::verify::verify_all_with_progress(&target)?;
    stdout_write(&format!(
        "copied {} event(s) ({} already there) of {} session(s) from {source_label} to \
         {target_label}; verify: ok, {} session(s)\n",
        copy.copied,
        copy.present,
        copy.sessions.len(),
        verified.len()
    ))?;
    let damaged = copy.damaged(&source)?;
    if damaged.is_empty() {
        return Ok(());
    }
    let mut report = String::from(
        "not copied whole (damaged in the source; every event before each cut is copied):\n",
    );
    for line in &damaged {
        report.push_str(&format!("  {line}\n"));
    }
    eprint!("{report}");
    bail!(
        "{} session(s) of {source_label} are damaged and were copied only up to the damage; \
         every other session was copied. `reasoning-ledger verify` lists the damage, \
         `reasoning-ledger recover --to NEW_DIR|URL` salvages what verifies",
        damaged.len()
    )
}

/// One run of `copy`: where to, what it did, and which sessions it stopped copying.
struct Copy<'a> {
    target: &'a Ledger,
    source_label: &'a str,
    target_label: &'a str,
    copied: u64,
    present: u64,
    sessions: BTreeSet<SessionId>,
    /// Sessions whose events this pass no longer copies, with why.
    stopped: BTreeMap<SessionId, String>,
}

impl Copy<'_> {
    /// Every event the source can read, in position order; an event that cannot be read is
    /// skipped (its session's later events are then refused, and left to [`Copy::by_seq`]).
    fn by_position(&mut self, source: &Ledger) -> anyhow::Result<()> {
        let last_position = source.last_position()?;
        if last_position == 0 {
            // A ledger of an earlier build before its first write has no positions yet:
            // the pass by seq copies it.
            return Ok(());
        }
        let bar = crate::progress::Progress::bar("copying", last_position, "events");
        let mut batch: Vec<Event> = Vec::new();
        let mut failed: Option<anyhow::Error> = None;
        source.for_each_readable_event_from_position(
            1,
            COPY_MAX_UNREADABLE,
            |PositionedEvent { event, .. }| {
                bar.inc(1);
                if self.stopped.contains_key(&event.session) {
                    return true;
                }
                let full = batch
                    .last()
                    .is_some_and(|last| last.session != event.session)
                    || batch.len() >= COPY_BATCH_EVENTS;
                if full && let Err(error) = self.flush(std::mem::take(&mut batch)) {
                    failed = Some(error);
                    return false;
                }
                batch.push(event);
                true
            },
        )?;
        if let Some(error) = failed {
            return Err(error);
        }
        self.flush(batch)?;
        bar.finish();
        Ok(())
    }

    /// Each session whose copy is behind its head in the source, by seq from where the
    /// copy ends: what the position pass could not copy in order.
    fn by_seq(&mut self, source: &Ledger) -> anyhow::Result<()> {
        let mut heads = source.heads()?;
        heads.sort_by_key(|h| h.session);
        for head in heads {
            let session = head.session;
            let done = self.target.head(session)?.map_or(0, |h| h.seq);
            if done >= head.seq {
                continue;
            }
            let mut batch: Vec<Event> = Vec::new();
            let mut failed: Option<anyhow::Error> = None;
            let read = source.for_each_event(session, done + 1, head.seq, |event| {
                batch.push(event);
                if batch.len() < COPY_BATCH_EVENTS {
                    return true;
                }
                match self.flush(std::mem::take(&mut batch)) {
                    Ok(()) => !self.stopped.contains_key(&session),
                    Err(error) => {
                        failed = Some(error);
                        false
                    }
                }
            });
            if let Some(error) = failed {
                return Err(error);
            }
            if !self.stopped.contains_key(&session) {
                self.flush(batch)?;
            }
            if let Err(error) = read
                && !self.stopped.contains_key(&session)
            {
                self.stopped.insert(
                    session,
                    format!("the source cannot be read past that ({error})"),
                );
            }
        }
        Ok(())
    }

    /// Copies one session's consecutive events: those the target holds are compared by
    /// hash (another event there: the target is not a copy of the source, and the copy
    /// stops), the rest imported. A source whose events do not continue the copy's chain
    /// stops that session only.
    fn flush(&mut self, events: Vec<Event>) -> anyhow::Result<()> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        let session = first.session;
        self.sessions.insert(session);
        let head_seq = self.target.head(session)?.map_or(0, |h| h.seq);
        let (known, fresh): (Vec<Event>, Vec<Event>) =
            events.into_iter().partition(|e| e.seq <= head_seq);
        if let (Some(first), Some(last)) = (known.first(), known.last()) {
            let stored = self.target.events(session, first.seq, last.seq)?;
            let same = stored.len() == known.len()
                && stored.iter().zip(&known).all(|(s, k)| s.hash == k.hash);
            if !same {
                bail!(
                    "session {session} in {} differs from {} at seqs {}..={}: not a copy of \
                     this ledger (nothing more was copied)",
                    self.target_label,
                    self.source_label,
                    first.seq,
                    last.seq
                );
            }
            self.present += known.len() as u64;
        }
        let count = fresh.len() as u64;
        match self.target.write_blocking(move |txn| txn.import(fresh))? {
            Ok(_) => {
                self.copied += count;
                Ok(())
            }
            Err(AppendError::Storage(error)) if !error.is_damage() => {
                Err(anyhow::Error::new(error).context(format!(
                    "copying session {session} into {}",
                    self.target_label
                )))
            }
            Err(refused) => {
                self.stopped
                    .insert(session, source_damage(head_seq, &refused));
                Ok(())
            }
        }
    }

    /// One line for each session the copy does not hold whole: its head row cannot be
    /// read in the source, or the copy ends before the source's head.
    fn damaged(&self, source: &Ledger) -> anyhow::Result<Vec<String>> {
        let mut lines = Vec::new();
        let mut heads = source.heads()?;
        heads.sort_by_key(|h| h.session);
        for head in heads {
            let copied = self.target.head(head.session)?;
            if copied
                .as_ref()
                .is_some_and(|c| c.seq == head.seq && c.hash == head.hash)
            {
                continue;
            }
            let done = copied.map_or(0, |c| c.seq);
            let why = self.stopped.get(&head.session).cloned().unwrap_or_else(|| {
                format!(
                    "the source's head names seq {} and its hash, which the copy's events \
                         up to seq {done} do not end with (the source's head row is damaged)",
                    head.seq
                )
            });
            lines.push(format!(
                "session {}: copied up to seq {done} of {}; {why}",
                head.session, head.seq
            ));
        }
        for (session, detail) in source.undecodable_heads()? {
            let done = self.target.head(session)?.map_or(0, |c| c.seq);
            lines.push(format!(
                "session {session}: its head row in the source cannot be read ({detail}); its \
                 {done} event(s) that chain from seq 1 were copied, whether it held more \
                 cannot be told"
            ));
        }
        Ok(lines)
    }
}

/// Why the source's events of a session do not go on where its copy ends (`copied`): damage
/// in the source, said as such (never "moved").
fn source_damage(copied: u64, refused: &AppendError) -> String {
    match refused {
        AppendError::Conflict { expected, .. } => format!(
            "in the source the event after seq {copied} is seq {} (seq {} is missing or cannot \
             be read: damage)",
            expected + 1,
            copied + 1
        ),
        AppendError::ImportMismatch { seq, .. } => {
            format!("in the source event seq {seq} does not chain onto the one before (damage)")
        }
        other => format!("the copy refused the source's next events: {other}"),
    }
}
