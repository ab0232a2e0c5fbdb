//! `import FILE`: a JSONL export read back into the ledger, verified as it goes; idempotent
//! by session and seq (events already there must hash the same), so an interrupted import
//! resumes when run again.
//!
//! Owns: streaming the file (a line at a time, at most [`MAX_IMPORT_LINE_BYTES`], written
//! in groups of at most [`IMPORT_GROUP_EVENTS`] events of one session), the tool-call text
//! limit applied to each event ([`MAX_TEXT_BYTES`]), and saying on stderr whose events it
//! brought in (the actors a file names are its claim: the chain is not keyed). Must not:
//! read the whole file into memory.

use super::*;
use crate::tools::args::MAX_TEXT_BYTES;
use std::io::BufRead;

/// Largest JSONL line `import` reads, in bytes.
pub(super) const MAX_IMPORT_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Most events of one session appended in one write transaction: what is held in memory.
const IMPORT_GROUP_EVENTS: usize = 1024;

/// Reads one line (without its `\n`) into `line`, refusing one over `max` bytes without
/// keeping more than `max + 1` of it. `Ok(false)` at the end of the file.
fn read_line_limited(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Result<bool, ()>> {
    line.clear();
    let mut any = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(Ok(any));
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(end) => (&buf[..end], Some(end + 1)),
            None => (buf, None),
        };
        if line.len() + chunk.len() > max {
            return Ok(Err(()));
        }
        line.extend_from_slice(chunk);
        let used = done.unwrap_or(chunk.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(Ok(true));
        }
    }
}

/// What the import did so far.
#[derive(Default)]
struct Imported {
    events: usize,
    sessions: Vec<SessionId>,
    /// Events carrying an actor, by actor, in order of first appearance.
    actors: Vec<(String, usize)>,
}

pub(super) fn import(settings: &Settings, file: &Path) -> anyhow::Result<()> {
    let opened =
        std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
    let size = opened.metadata().map_or(0, |m| m.len());
    let mut reader = std::io::BufReader::new(opened);
    let ledger = open(settings)?;
    let bar = crate::progress::Progress::bar("importing", size, "bytes");
    let mut done = Imported::default();
    let mut group: Vec<Event> = Vec::new();
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut read_bytes = 0u64;
    loop {
        let more = read_line_limited(&mut reader, &mut line, MAX_IMPORT_LINE_BYTES)
            .with_context(|| format!("reading {}", file.display()))?;
        number += 1;
        let Ok(more) = more else {
            bail!(
                "{}:{number}: line longer than {MAX_IMPORT_LINE_BYTES} bytes",
                file.display()
            );
        };
        if !more {
            break;
        }
        read_bytes += line.len() as u64 + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let event: Event = serde_json::from_slice(&line).with_context(|| {
            format!(
                "{}:{number}: not an exported event (import reads the JSONL export, one event \
                 a line: `export ID --format jsonl` or `export --all --format jsonl`; a `json` \
                 export is the folded tree, which cannot be imported)",
                file.display()
            )
        })?;
        for text in [event.payload.text(), event.payload.search_extra()]
            .into_iter()
            .flatten()
        {
            if text.len() > MAX_TEXT_BYTES {
                bail!(
                    "{}:{number}: event seq {} of session {} holds a text of {} bytes, over the {MAX_TEXT_BYTES} a tool call may record",
                    file.display(),
                    event.seq,
                    event.session,
                    text.len()
                );
            }
        }
        let other_session = group.first().is_some_and(|g| g.session != event.session);
        if other_session || group.len() >= IMPORT_GROUP_EVENTS {
            import_group(&ledger, file, std::mem::take(&mut group), &mut done)?;
            bar.set(read_bytes);
        }
        group.push(event);
    }
    if !group.is_empty() {
        import_group(&ledger, file, group, &mut done)?;
    }
    bar.finish();
    if !done.actors.is_empty() {
        let carried: usize = done.actors.iter().map(|(_, n)| n).sum();
        let names: Vec<String> = done
            .actors
            .iter()
            .map(|(actor, n)| format!("{} ({n})", export::markdown::terminal_line(actor)))
            .collect();
        eprintln!(
            "{carried} imported event(s) carry an actor, as the file says (verify checks the \
             hashes, not who wrote them); imported events written by: {}",
            names.join(", ")
        );
    }
    stdout_write(&format!(
        "imported {} event(s) into {} session(s) in {}\n",
        done.events,
        done.sessions.len(),
        ledger.path().display()
    ))
}

/// Appends the events of `group` (one session, in order) the ledger does not hold yet;
/// those it holds must hash the same.
fn import_group(
    ledger: &Ledger,
    file: &Path,
    group: Vec<Event>,
    done: &mut Imported,
) -> anyhow::Result<()> {
    let session = group[0].session;
    let head_seq = ledger.head(session)?.map_or(0, |h| h.seq);
    // Events the ledger already holds must be the same events (same hash); only the
    // rest are appended.
    let (known, fresh): (Vec<Event>, Vec<Event>) =
        group.into_iter().partition(|e| e.seq <= head_seq);
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
    let mut actors: Vec<(String, usize)> = Vec::new();
    for actor in fresh.iter().filter_map(|e| e.actor.as_deref()) {
        match actors.iter_mut().find(|(a, _)| a == actor) {
            Some((_, n)) => *n += 1,
            None => actors.push((actor.to_string(), 1)),
        }
    }
    match ledger.write_blocking(move |txn| txn.import(fresh))? {
        Ok(_) => {}
        // The file's events do not go on where the ledger's copy of the session ends:
        // events missing from the file (its damage), not a session that moved on.
        Err(crate::store::AppendError::Conflict {
            expected, actual, ..
        }) => bail!(
            "{}: session {session} goes on at seq {} in the file, but the ledger holds it up \
             to seq {actual}: seq {} is missing from the file (damaged, or a part of an \
             export); nothing of this session was imported past seq {actual}",
            file.display(),
            expected + 1,
            actual + 1
        ),
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!("importing session {session}")));
        }
    }
    done.events += count;
    if !done.sessions.contains(&session) {
        done.sessions.push(session);
    }
    for (actor, n) in actors {
        match done.actors.iter_mut().find(|(a, _)| *a == actor) {
            Some((_, total)) => *total += n,
            None => done.actors.push((actor, n)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_one_at_a_time_and_a_long_one_is_refused_unkept() {
        let text = b"ab\n\ncdef\r\nlast";
        // A buffer smaller than a line: lines span several fills.
        let mut reader = std::io::BufReader::with_capacity(2, &text[..]);
        let mut line = Vec::new();
        let mut lines = Vec::new();
        while read_line_limited(&mut reader, &mut line, 16).unwrap() == Ok(true) {
            lines.push(String::from_utf8(line.clone()).unwrap());
        }
        assert_eq!(lines, ["ab", "", "cdef\r", "last"]);
        let mut reader = std::io::BufReader::with_capacity(2, &b"abcdefgh\nok\n"[..]);
        assert_eq!(
            read_line_limited(&mut reader, &mut line, 4).unwrap(),
            Err(())
        );
        assert!(line.len() <= 4);
    }
}
