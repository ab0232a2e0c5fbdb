//! `import FILE [--strict]`: a JSONL export read back into the ledger, verified as it goes;
//! idempotent by session and seq (events already there, or read earlier in the file, must
//! hash the same: they are skipped and counted), so an interrupted import resumes when run
//! again and a file holding an export twice imports once.
//!
//! Owns: streaming the file (a line at a time, at most [`MAX_IMPORT_LINE_BYTES`], written
//! in groups of at most [`IMPORT_GROUP_EVENTS`] events of one session), the tool-call text
//! limit applied to each event ([`MAX_TEXT_BYTES`]), what is left out (a line that is not
//! an event; a session from where its events stop chaining), each named, with exit 1 after
//! every intact session was imported; the whole file checked against the ledger first
//! (its sha256, where each session will end; `--strict`: nothing written unless all of it
//! imports); the record of the import in each session it brought events into
//! ([`crate::provenance`]), written with the session's last imported events; and saying on
//! stderr whose events it brought in (the actors a file names are its claim: the chain is
//! not keyed). Must not: read the whole file into memory, let one damaged line or session
//! cost the sessions around it, or write a record where a session's next event must go
//! (a session left out part-way is recorded when an import completes it).

use super::*;
use crate::store::rules::{ChainEnd, check_continues};
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
    /// A dry run (the check before writing): each session's end as far as the file has
    /// been read, standing in for the head nothing was written to.
    planned: Option<std::collections::HashMap<SessionId, ChainEnd>>,
    /// The first and last seq this run wrote into each session, in order of first write
    /// (the first: from the first event no record accounts for, as below).
    brought: Vec<(SessionId, u64, u64)>,
    /// Per session, the first event found already in the ledger that no record of an
    /// import accounts for (a session an earlier import left out part-way, now
    /// completed): the record of this import covers it too.
    unrecorded: std::collections::HashMap<SessionId, u64>,
    /// Sessions whose record of the import was written with their last imported events.
    recorded: std::collections::HashSet<SessionId>,
    /// sha256 of every byte read, once the file was read to its end.
    sha256: String,
}

/// What the writing pass records of the file in each session it brings events into
/// ([`crate::provenance::EventsImported`]).
struct Provenance {
    file: String,
    sha256: String,
    by: String,
    /// Where the check before writing found each session would end: the group ending
    /// there carries the record, in its transaction.
    ends: std::collections::HashMap<SessionId, u64>,
}

impl Provenance {
    /// The record of events `from_seq..=to_seq` of `session`.
    fn record(&self, from_seq: u64, to_seq: u64) -> crate::provenance::EventsImported {
        crate::provenance::EventsImported {
            file: self.file.clone(),
            sha256: self.sha256.clone(),
            by: self.by.clone(),
            from_seq,
            to_seq,
        }
    }
}

/// The record `record` as the event after `last`, sealed as an import writes events
/// (its time never before `last`'s); `None` after the last seq there is (the write then
/// refuses the group, or [`record_the_rest`] says why it could not record).
fn record_after(last: &Event, record: crate::provenance::EventsImported) -> Option<Event> {
    let mut event = Event {
        id: crate::event::EventId::generate(),
        session: last.session,
        seq: last.seq.checked_add(1)?,
        at: crate::event::now_ms().max(last.at),
        schema: crate::provenance::EVENTS_IMPORTED_SCHEMA,
        actor: None,
        payload: record.into(),
        prev: last.hash.clone(),
        hash: String::new(),
    };
    event.hash = event.computed_hash();
    Some(event)
}

/// A reader that hashes every byte it hands on.
struct Hashing<R> {
    inner: R,
    sha256: sha2::Sha256,
}

impl<R: std::io::Read> std::io::Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.read(buf)?;
        self.sha256.update(&buf[..n]);
        Ok(n)
    }
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
    // The whole file is checked against the ledger before anything is written: its
    // sha256 and where each session will end, for the records of the import; with
    // --strict, all or nothing.
    let checked = read_file(&ledger, file, None)?;
    if strict && !checked.problems.is_empty() {
        let count = checked.report();
        bail!(
            "nothing imported (--strict): {count} problem(s) in {}; without --strict every intact session is imported",
            file.display()
        );
    }
    let provenance = Provenance {
        file: file.display().to_string(),
        sha256: checked.sha256.clone(),
        by: crate::provenance::current_user(),
        // A session left out part-way gets its record when a later import completes it
        // (a record now would stand where its next event must go).
        ends: checked
            .planned
            .iter()
            .flatten()
            .filter(|(session, _)| !checked.failed.contains(session))
            .map(|(session, end)| (*session, end.seq))
            .collect(),
    };
    let mut done = read_file(&ledger, file, Some(&provenance))?;
    record_the_rest(&ledger, &provenance, &mut done)?;
    if done.sha256 != checked.sha256 {
        bail!(
            "{} changed while it was imported (its sha256 was {} when checked, {} when \
             written): what was imported is recorded with the first; run the import again \
             once the file stays put",
            file.display(),
            checked.sha256,
            done.sha256
        );
    }
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
    let recorded = if done.sessions.is_empty() {
        String::new()
    } else {
        format!(
            "; each session records that they came from {} (sha256 {})",
            file.display(),
            done.sha256
        )
    };
    stdout_write(&format!(
        "imported {} event(s) into {} session(s) in {}{skipped}{recorded}\n",
        done.events,
        done.sessions.len(),
        ledger.path().display()
    ))?;
    if !done.problems.is_empty() {
        let count = done.report();
        bail!(
            "{count} problem(s) in {}: what they name was left out, every intact session was \
             imported (a session left out part-way records where its events came from once an \
             import completes it)",
            file.display()
        );
    }
    Ok(())
}

/// Reads `file` a line at a time into groups of one session and imports them, each
/// session's last with the record of `provenance` (`None`: checks them against the ledger
/// and each other without writing).
fn read_file(
    ledger: &Ledger,
    file: &Path,
    provenance: Option<&Provenance>,
) -> anyhow::Result<Imported> {
    let dry = provenance.is_none();
    let opened =
        std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
    let size = opened.metadata().map_or(0, |m| m.len());
    let mut reader = std::io::BufReader::new(Hashing {
        inner: opened,
        sha256: Default::default(),
    });
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
        let event = match Event::from_json(&line, ledger.families()) {
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
                import_group(
                    ledger,
                    file,
                    provenance,
                    std::mem::take(&mut group),
                    &mut done,
                )?;
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
            import_group(
                ledger,
                file,
                provenance,
                std::mem::take(&mut group),
                &mut done,
            )?;
            bar.set(read_bytes);
            if done.failed.contains(&event.session) {
                continue;
            }
        }
        group.push(event);
    }
    if !group.is_empty() {
        import_group(ledger, file, provenance, group, &mut done)?;
    }
    bar.finish();
    done.sha256 = {
        use sha2::Digest;
        hex::encode(reader.into_inner().sha256.finalize())
    };
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

/// Imports the events of `group` (one session, in order) the ledger does not hold yet;
/// those it holds must hash the same (then they are skipped and counted). A group that
/// cannot be imported leaves its session out from there, said in `done.problems`.
fn import_group(
    ledger: &Ledger,
    file: &Path,
    provenance: Option<&Provenance>,
    group: Vec<Event>,
    done: &mut Imported,
) -> anyhow::Result<()> {
    let session = group[0].session;
    let stored = ledger.head(session)?;
    // Where the session ends as far as this import knows: the ledger's head, or in a dry
    // run what the file brought after it (read earlier in the file).
    let end = done
        .planned
        .as_ref()
        .and_then(|planned| planned.get(&session).cloned())
        .unwrap_or_else(|| ChainEnd::of(stored.as_ref()));
    let head_seq = end.seq;
    let (known, fresh): (Vec<Event>, Vec<Event>) =
        group.into_iter().partition(|e| e.seq <= head_seq);
    let stored_seq = stored.as_ref().map_or(0, |head| head.seq);
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
    let recorded_through = stored
        .as_ref()
        .and_then(|head| {
            crate::provenance::ImportedEvents::of(&head.summary).map(|p| p.recorded_through)
        })
        .unwrap_or(0);
    if let Some(event) = known.iter().find(|e| e.seq > recorded_through) {
        done.unrecorded.entry(session).or_insert(event.seq);
    }
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
    let (first, last) = (fresh[0].seq, fresh[count - 1].seq);
    let from_seq = done
        .brought
        .iter()
        .find(|(s, _, _)| *s == session)
        .map(|(_, from, _)| *from)
        .or_else(|| done.unrecorded.get(&session).copied())
        .unwrap_or(first);
    // The group where the session's events from the file end carries the record of
    // where they came from, written with them.
    let record = provenance
        .filter(|p| p.ends.get(&session) == Some(&last))
        .and_then(|p| record_after(&fresh[count - 1], p.record(from_seq, last)));
    let recorded = record.is_some();
    let written = match &mut done.planned {
        Some(planned) => check_continues(&end, &fresh).map(|end| {
            planned.insert(session, end);
        }),
        None => {
            let mut batch = fresh;
            batch.extend(record);
            match ledger.write_blocking(move |txn| txn.import(batch))? {
                Ok(_) => Ok(()),
                Err(error) => Err(error),
            }
        }
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
    match done.brought.iter_mut().find(|(s, _, _)| *s == session) {
        Some((_, _, to)) => *to = last,
        None => done.brought.push((session, from_seq, last)),
    }
    if recorded {
        done.recorded.insert(session);
    }
    for (actor, n) in actors {
        match done.actors.iter_mut().find(|(a, _)| *a == actor) {
            Some((_, total)) => *total += n,
            None => done.actors.push((actor, n)),
        }
    }
    Ok(())
}

/// Records the import in each session it brought events into whose record was not
/// written with them (the file did not end the session where the check before writing
/// said; a session brought in more than one group by a file holding it twice): after the
/// session's head, in a transaction of its own.
fn record_the_rest(
    ledger: &Ledger,
    provenance: &Provenance,
    done: &mut Imported,
) -> anyhow::Result<()> {
    let missing: Vec<(SessionId, u64, u64)> = done
        .brought
        .iter()
        .filter(|(session, _, _)| {
            !done.recorded.contains(session) && !done.failed.contains(session)
        })
        .copied()
        .collect();
    for (session, from_seq, to_seq) in missing {
        let payload: crate::event::Payload = provenance.record(from_seq, to_seq).into();
        let written = ledger.write_blocking(move |txn| {
            let head = txn.head(session)?.map_or(0, |head| head.seq);
            txn.append(session, head, vec![crate::event::NewEvent::new(payload)])
        })?;
        match written {
            Ok(_) => {
                done.recorded.insert(session);
            }
            Err(error) => done.problem(format!(
                "session {session}: events {from_seq}–{to_seq} were imported, but the record of \
                 where they came from could not be written: {error}"
            )),
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
