//! `import FILE`: a JSONL export read back into the ledger, verified as it goes; idempotent
//! by session and seq (events already there must hash the same), so an interrupted import
//! resumes when run again.

use super::*;

/// Largest JSONL line `import` reads, in bytes.
pub(super) const MAX_IMPORT_LINE_BYTES: usize = 64 * 1024 * 1024;

pub(super) fn import(settings: &Settings, file: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let mut batches: Vec<Vec<Event>> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if line.len() > MAX_IMPORT_LINE_BYTES {
            bail!(
                "{}:{}: line longer than {MAX_IMPORT_LINE_BYTES} bytes",
                file.display(),
                number + 1
            );
        }
        let event: Event = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not an exported event", file.display(), number + 1))?;
        match batches.last_mut() {
            Some(batch) if batch[0].session == event.session => batch.push(event),
            _ => batches.push(vec![event]),
        }
    }
    let ledger = open(settings)?;
    let total: usize = batches.iter().map(Vec::len).sum();
    let bar = crate::progress::Progress::bar("importing", total as u64, "events");
    let mut imported = 0usize;
    let mut sessions: Vec<SessionId> = Vec::new();
    for batch in batches {
        let session = batch[0].session;
        let head_seq = ledger.head(session)?.map_or(0, |h| h.seq);
        // Events the ledger already holds must be the same events (same hash); only the
        // rest are appended.
        let (known, fresh): (Vec<Event>, Vec<Event>) =
            batch.into_iter().partition(|e| e.seq <= head_seq);
        for event in &known {
            let stored = ledger.events(session, event.seq, event.seq)?;
            if event.computed_hash() != event.hash
                || stored.first().map(|s| &s.hash) != Some(&event.hash)
            {
                bail!(
                    "{}: event seq {} of session {session} differs from the one already in the ledger",
                    file.display(),
                    event.seq
                );
            }
        }
        let count = fresh.len();
        let read = known.len() + count;
        ledger
            .write_blocking(move |txn| txn.import(fresh))?
            .with_context(|| format!("importing session {session}"))?;
        imported += count;
        bar.inc(read as u64);
        if !sessions.contains(&session) {
            sessions.push(session);
        }
    }
    bar.finish();
    stdout_write(&format!(
        "imported {imported} event(s) into {} session(s) in {}\n",
        sessions.len(),
        ledger.path().display()
    ))
}
