//! `import FILE [--strict]`: a JSONL export read back into the ledger, verified as it goes;
//! idempotent by session and seq (events already there, or read earlier in the file, must
//! hash the same: they are skipped and counted), so an interrupted import resumes when run
//! again and a file holding an export twice imports once.
//!
//! Owns: streaming the file (a line at a time, at most [`MAX_IMPORT_LINE_BYTES`], written
//! in groups of at most [`IMPORT_GROUP_EVENTS`] events of one session), the tool-call text
//! limit applied to each event ([`MAX_TEXT_BYTES`]), what is left out (a line that is not
//! an event; a session from where its events stop chaining), each named, with exit 1 after
//! every intact session was imported; `--strict`: the whole file checked against the
//! ledger first, nothing written unless all of it imports; and saying on stderr whose
//! events it brought in (the actors a file names are its claim: the chain is not keyed).
//! Must not: read the whole file into memory, or let one damaged line or session cost the
//! sessions around it.

use super::*;
use crate::tools::args::MAX_TEXT_BYTES;
use std::io::BufRead;

/// Largest JSONL line `import` reads, in bytes.
pub(super) const MAX_IMPORT_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Most events of one session appended in one write transaction: what is held in memory.
const IMPORT_GROUP_EVENTS: usize = 1024;

/// Most problems named one by one (a file of garbage lines must not fill memory with
/// them); the rest are counted.
const MAX_NAMED_PROBLEMS: usize = 1_000;

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
    /// Events the ledger already held, or the file held before: the same events (same
    /// hash), skipped.
    skipped: usize,
    sessions: Vec<SessionId>,
    /// Events carrying an actor, by actor, in order of first appearance.
    actors: Vec<(String, usize)>,
    /// What was left out, each said in full: a line that is not an event, a session whose
    /// events stop chaining (the rest of it is left out).
    problems: Vec<String>,
    /// Problems beyond [`MAX_NAMED_PROBLEMS`], counted only.
    unnamed_problems: usize,
    /// Sessions left out from some point on: their later lines are not read into groups.
    failed: std::collections::HashSet<SessionId>,
    /// A dry run (`--strict`'s check before writing): each session's end as far as the
    /// file has been read, standing in for the head nothing was written to.
    planned: Option<std::collections::HashMap<SessionId, SessionEnd>>,
}

impl Imported {
    fn problem(&mut self, problem: String) {
        if self.problems.len() < MAX_NAMED_PROBLEMS {
            self.problems.push(problem);
        } else {
            self.unnamed_problems += 1;
        }
    }

    fn left_out(&mut self, session: SessionId, problem: String) {
        self.problem(problem);
        self.failed.insert(session);
    }

    /// Every problem on stderr (those beyond the named ones counted); how many in all.
    fn report(&self) -> usize {
        for problem in &self.problems {
            eprintln!("{problem}");
        }
        if self.unnamed_problems > 0 {
            eprintln!("… and {} more problem(s)", self.unnamed_problems);
        }
        self.problems.len() + self.unnamed_problems
    }
}

pub(super) fn import(settings: &Settings, file: &Path, strict: bool) -> anyhow::Result<()> {
    let ledger = open(settings)?;
    if strict {
        // All or nothing: the whole file is checked against the ledger before anything is
        // written.
        let checked = read_file(&ledger, file, true)?;
        if !checked.problems.is_empty() {
            let count = checked.report();
            bail!(
                "nothing imported (--strict): {count} problem(s) in {}; without --strict every intact session is imported",
                file.display()
            );
        }
    }
    let done = read_file(&ledger, file, false)?;
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
    let skipped = if done.skipped > 0 {
        format!(
            "; skipped {} event(s) already in the ledger or earlier in the file",
            done.skipped
        )
    } else {
        String::new()
    };
    stdout_write(&format!(
        "imported {} event(s) into {} session(s) in {}{skipped}\n",
        done.events,
        done.sessions.len(),
        ledger.path().display()
    ))?;
    if !done.problems.is_empty() {
        let count = done.report();
        bail!(
            "{count} problem(s) in {}: what they name was left out, every intact session was imported",
            file.display()
        );
    }
    Ok(())
}

/// Reads `file` a line at a time into groups of one session and imports them (`dry`:
/// checks them against the ledger and each other without writing).
fn read_file(ledger: &Ledger, file: &Path, dry: bool) -> anyhow::Result<Imported> {
    let opened =
        std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
    let size = opened.metadata().map_or(0, |m| m.len());
    let mut reader = std::io::BufReader::new(opened);
    let bar =
        crate::progress::Progress::bar(if dry { "checking" } else { "importing" }, size, "bytes");
    let mut done = Imported {
        planned: dry.then(Default::default),
        ..Imported::default()
    };
    let mut group: Vec<Event> = Vec::new();
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut read_bytes = 0u64;
    loop {
        let more = read_line_limited(&mut reader, &mut line, MAX_IMPORT_LINE_BYTES)
            .with_context(|| format!("reading {}", file.display()))?;
        number += 1;
        let Ok(more) = more else {
            // The rest of the over-long line is skipped up to its newline.
            done.problem(format!(
                "{}:{number}: line longer than {MAX_IMPORT_LINE_BYTES} bytes: left out",
                file.display()
            ));
            skip_rest_of_line(&mut reader)
                .with_context(|| format!("reading {}", file.display()))?;
            continue;
        };
        if !more {
            break;
        }
        read_bytes += line.len() as u64 + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let event: Event = match serde_json::from_slice(&line) {
            Ok(event) => event,
            Err(error) => {
                done.problem(format!(
                    "{}:{number}: not an exported event ({error}): left out (import reads the \
                     JSONL export, one event a line: `export ID --format jsonl` or `export \
                     --all --format jsonl`; a `json` export is the folded tree, which cannot \
                     be imported)",
                    file.display()
                ));
                continue;
            }
        };
        if done.failed.contains(&event.session) {
            continue;
        }
        if let Some(text) = [event.payload.text(), event.payload.search_extra()]
            .into_iter()
            .flatten()
            .find(|text| text.len() > MAX_TEXT_BYTES)
        {
            let problem = format!(
                "{}:{number}: event seq {} of session {} holds a text of {} bytes, over the \
                 {MAX_TEXT_BYTES} a tool call may record: the session is left out from there",
                file.display(),
                event.seq,
                event.session,
                text.len()
            );
            if !group.is_empty() && group[0].session == event.session {
                import_group(ledger, file, std::mem::take(&mut group), &mut done)?;
            }
            done.left_out(event.session, problem);
            continue;
        }
        // A new group for another session, a full group, or an event that does not follow
        // the group's last (the same export twice in one file; a line missing): the group
        // is imported first, so an event read again is found in the ledger and skipped,
        // and a gap costs only what comes after it.
        let restart = group
            .last()
            .is_some_and(|last| last.session != event.session || event.seq != last.seq + 1);
        if restart || group.len() >= IMPORT_GROUP_EVENTS {
            import_group(ledger, file, std::mem::take(&mut group), &mut done)?;
            bar.set(read_bytes);
            if done.failed.contains(&event.session) {
                continue;
            }
        }
        group.push(event);
    }
    if !group.is_empty() {
        import_group(ledger, file, group, &mut done)?;
    }
    bar.finish();
    Ok(done)
}

/// Skips the rest of a line, through its newline.
fn skip_rest_of_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(());
            }
            None => {
                let all = buf.len();
                reader.consume(all);
            }
        }
    }
}

/// Where a session ends: its last event's seq, hash and time (seq 0: no session yet).
#[derive(Clone, Default)]
struct SessionEnd {
    seq: u64,
    hash: Option<String>,
    at: u64,
}

/// Where a session ends as far as this import knows: the ledger's head, or in a dry run
/// what the file brought after it.
fn session_end(ledger: &Ledger, done: &Imported, session: SessionId) -> anyhow::Result<SessionEnd> {
    if let Some(end) = done.planned.as_ref().and_then(|p| p.get(&session)) {
        return Ok(end.clone());
    }
    Ok(ledger
        .head(session)?
        .map_or_else(SessionEnd::default, |head| SessionEnd {
            seq: head.seq,
            hash: Some(head.hash),
            at: head.summary.updated_at,
        }))
}

/// Imports the events of `group` (one session, in order) the ledger does not hold yet;
/// those it holds must hash the same (then they are skipped and counted). A group that
/// cannot be imported leaves its session out from there, said in `done.problems`.
fn import_group(
    ledger: &Ledger,
    file: &Path,
    group: Vec<Event>,
    done: &mut Imported,
) -> anyhow::Result<()> {
    let session = group[0].session;
    let end = session_end(ledger, done, session)?;
    let head_seq = end.seq;
    let (known, fresh): (Vec<Event>, Vec<Event>) =
        group.into_iter().partition(|e| e.seq <= head_seq);
    // In a dry run, what lies past the ledger's head was read earlier in the file.
    let stored_seq = match &done.planned {
        Some(_) => ledger.head(session)?.map_or(0, |head| head.seq),
        None => head_seq,
    };
    for event in &known {
        let same = event.computed_hash() == event.hash
            && (event.seq > stored_seq
                || ledger
                    .events(session, event.seq, event.seq)?
                    .first()
                    .is_some_and(|stored| stored.hash == event.hash));
        if !same {
            done.left_out(
                session,
                format!(
                    "{}: event seq {} of session {session} differs from the one already in the \
                     ledger (or earlier in the file): the rest of the session is left out",
                    file.display(),
                    event.seq
                ),
            );
            return Ok(());
        }
    }
    done.skipped += known.len();
    if fresh.is_empty() {
        return Ok(());
    }
    let count = fresh.len();
    let mut actors: Vec<(String, usize)> = Vec::new();
    for actor in fresh.iter().filter_map(|e| e.actor.as_deref()) {
        match actors.iter_mut().find(|(a, _)| a == actor) {
            Some((_, n)) => *n += 1,
            None => actors.push((actor.to_string(), 1)),
        }
    }
    let written = match &mut done.planned {
        Some(planned) => check_chain(end, &fresh).map(|end| {
            planned.insert(session, end);
        }),
        None => match ledger.write_blocking(move |txn| txn.import(fresh))? {
            Ok(_) => Ok(()),
            Err(error) => Err(error),
        },
    };
    match written {
        Ok(()) => {}
        // The file's events do not go on where the ledger's copy of the session ends:
        // events missing from the file (its damage), not a session that moved on.
        Err(crate::store::AppendError::Conflict {
            expected, actual, ..
        }) => {
            done.left_out(
                session,
                format!(
                    "{}: session {session} goes on at seq {} in the file, but the ledger holds \
                     it up to seq {actual}: seq {} is missing from the file (damaged, or a part \
                     of an export); nothing of this session was imported past seq {actual}",
                    file.display(),
                    expected + 1,
                    actual + 1
                ),
            );
            return Ok(());
        }
        Err(crate::store::AppendError::Storage(error)) if !error.is_damage() => {
            return Err(anyhow::Error::new(error).context(format!("importing session {session}")));
        }
        Err(error) => {
            done.left_out(
                session,
                format!(
                    "{}: session {session} left out from seq {}: {error}",
                    file.display(),
                    head_seq + 1
                ),
            );
            return Ok(());
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

/// A dry run's check that `events` continue a session ending at `end`: next seqs, each
/// `prev` the previous hash, each hash its content's, time never going back (as the
/// store's import checks). The end they leave, or why not.
fn check_chain(end: SessionEnd, events: &[Event]) -> Result<SessionEnd, crate::store::AppendError> {
    let session = events[0].session;
    let mut prev = end
        .hash
        .unwrap_or_else(|| crate::event::GENESIS_HASH.to_string());
    let mut at_seq = end.seq;
    let mut previous_at = end.at;
    for event in events {
        if event.seq != at_seq + 1 {
            return Err(crate::store::AppendError::Conflict {
                session,
                expected: event.seq.saturating_sub(1),
                actual: at_seq,
            });
        }
        let computed = event.computed_hash();
        let (expected, found) = if event.prev != prev {
            (prev, event.prev.clone())
        } else if computed != event.hash {
            (computed, event.hash.clone())
        } else if event.at < previous_at {
            return Err(crate::store::AppendError::TimeGoesBack {
                session,
                seq: event.seq,
                at: event.at,
                previous: previous_at,
            });
        } else {
            prev = event.hash.clone();
            at_seq = event.seq;
            previous_at = event.at;
            continue;
        };
        return Err(crate::store::AppendError::ImportMismatch {
            session,
            seq: event.seq,
            expected,
            found,
        });
    }
    Ok(SessionEnd {
        seq: at_seq,
        hash: Some(prev),
        at: previous_at,
    })
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
