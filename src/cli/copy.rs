//! `copy --to URL|DIR`: the whole ledger copied in position order; idempotent and resumable
//! (each batch is one transaction: an interrupted copy leaves whole batches, and the next
//! run skips what is there).

use super::*;

/// Events one `copy` transaction carries at most.
pub(super) const COPY_BATCH_EVENTS: usize = 1000;

/// `copy --to`: every event of this ledger into another store, in position order (so the
/// copy's positions follow the same commit order), each session's events exactly as
/// stored (ids, times, hashes). Idempotent and resumable: events the target already holds
/// are checked (same hash) and skipped, the rest appended.
pub(super) fn copy(settings: &Settings, to: &str) -> anyhow::Result<()> {
    let source = open_existing(settings)?;
    let target = Ledger::open_at(&Location::parse(to), OpenMode::Create)?;
    let source_label = source.path().display().to_string();
    let target_label = target.path().display().to_string();
    if source_label == target_label {
        bail!("copy --to {target_label}: that is the ledger being copied");
    }
    let mut copied = 0u64;
    let mut present = 0u64;
    let mut sessions: std::collections::BTreeSet<SessionId> = Default::default();
    let mut batch: Vec<Event> = Vec::new();
    let mut failed: Option<anyhow::Error> = None;
    let mut flush = |batch: &mut Vec<Event>| -> anyhow::Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let events = std::mem::take(batch);
        let session = events[0].session;
        sessions.insert(session);
        let head_seq = target.head(session)?.map_or(0, |h| h.seq);
        let (known, fresh): (Vec<Event>, Vec<Event>) =
            events.into_iter().partition(|e| e.seq <= head_seq);
        if let (Some(first), Some(last)) = (known.first(), known.last()) {
            let stored = target.events(session, first.seq, last.seq)?;
            if stored.len() != known.len()
                || stored.iter().zip(&known).any(|(s, k)| s.hash != k.hash)
            {
                bail!(
                    "session {session} in {target_label} differs from {source_label} at seqs \
                     {}..={}: not a copy of this ledger (nothing more was copied)",
                    first.seq,
                    last.seq
                );
            }
            present += known.len() as u64;
        }
        let count = fresh.len() as u64;
        target
            .write_blocking(move |txn| txn.import(fresh))?
            .with_context(|| format!("copying session {session}"))?;
        copied += count;
        Ok(())
    };
    let last_position = source.last_position()?;
    let bar = if last_position > 0 {
        crate::progress::Progress::bar("copying", last_position, "events")
    } else {
        crate::progress::Progress::counter("copying", "events")
    };
    let mut visit = |event: Event| -> bool {
        bar.inc(1);
        let full = batch
            .last()
            .is_some_and(|last| last.session != event.session)
            || batch.len() >= COPY_BATCH_EVENTS;
        if full && let Err(error) = flush(&mut batch) {
            failed = Some(error);
            return false;
        }
        batch.push(event);
        true
    };
    if last_position > 0 {
        source.for_each_event_from_position(1, |positioned| visit(positioned.event))?;
    } else {
        // A ledger of an earlier build before its first write has no positions yet.
        source.for_each_event_everywhere(&mut visit)?;
    }
    if let Some(error) = failed {
        return Err(error);
    }
    flush(&mut batch)?;
    bar.finish();
    let verified = super::verify::verify_all_with_progress(&target)?;
    stdout_write(&format!(
        "copied {copied} event(s) ({present} already there) of {} session(s) from {source_label} \
         to {target_label}; verify: ok, {} session(s)\n",
        sessions.len(),
        verified.len()
    ))
}
