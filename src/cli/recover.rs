//! `recover --to DIR|URL` (issues 32 and 40, salvage): every event of a damaged ledger
//! whose hash verifies — in `ledger.redb` and `ledger.wal`, wherever it lies, or in any
//! row of a PostgreSQL ledger's tables ([`salvage`]) — into a new ledger in DIR or at URL,
//! through the same import path as `import`; the events a session cannot keep (beyond its
//! first gap, or of a session whose start was not found) into [`BEYOND_GAPS_FILE`] (beside
//! the new ledger in DIR; in the data directory for a URL), and what was kept, cut and
//! lost into [`REPORT_FILE`] there and stdout.
//!
//! Owns: refusing a target that holds a ledger (or is the damaged one), the order the
//! kept events are imported in, the report and the exit code (1 when anything was cut or
//! lost, after everything is written). Must not: open or write the damaged ledger (its
//! files are only read, with plain reads: the command works on read-only media and on a
//! file the storage engine cannot open; a PostgreSQL ledger's rows are only selected, in
//! a read-only transaction).

use super::*;
use crate::export::{Ellipsis, truncate};
use crate::store::salvage::{self, SessionSalvage, SourceReport};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The JSONL file (as `export --format jsonl` writes) beside the new ledger holding the
/// verified events it could not keep.
pub(super) const BEYOND_GAPS_FILE: &str = "salvage-beyond-gaps.jsonl";

/// The report beside the new ledger (what stdout showed).
pub(super) const REPORT_FILE: &str = "salvage-report.txt";

/// Events one import transaction of the new ledger carries at most.
const RECOVER_BATCH_EVENTS: usize = 1000;

/// Characters of a session's title the report shows.
const TITLE_CHARS: usize = 60;

pub(super) fn recover(settings: &Settings, to: &str) -> anyhow::Result<()> {
    let target = Location::parse(to);
    let scanning = crate::progress::Progress::spinner("scanning for events whose hash verifies");
    let (from, found) = match &settings.store {
        Some(url) => {
            let from = crate::store::postgres::redact_url(url);
            check_target(None, &from, &target)?;
            (
                from,
                crate::store::postgres::salvage::salvage_url(url, families())?,
            )
        }
        None => {
            let dir = &settings.data_dir;
            let from = dir.display().to_string();
            check_target(Some(dir), &from, &target)?;
            (from, salvage::salvage_dir(dir, families())?)
        }
    };
    scanning.finish();
    let found_events = found.events.len();
    let sessions = salvage::chains(found.events, &found.heads);

    let (ledger, report_dir) = open_target(&target, &settings.data_dir)?;
    let imported = import_kept(&ledger, &sessions)?;
    let verified = super::verify::verify_all_with_progress(&ledger)
        .with_context(|| format!("verifying the new ledger {}", ledger.path().display()))?;
    let new_path = ledger.path().to_path_buf();
    drop(ledger);
    let (to, apart) = match &target {
        Location::DataDir(dir) => (dir.display().to_string(), None),
        Location::Url(_) => (new_path.display().to_string(), Some(report_dir.as_path())),
    };

    // What the new ledger could not keep: beyond each session's first gap, whole sessions
    // without a verified start, and what import refused.
    let mut beyond: Vec<Event> = Vec::new();
    for session in &sessions {
        let done = imported.get(&session.session).map_or(0, |i| i.count);
        beyond.extend_from_slice(&session.kept[done..]);
        beyond.extend_from_slice(&session.beyond);
    }
    beyond.sort_by_key(|e| (e.session, e.seq, e.id));
    write_beside(&report_dir, BEYOND_GAPS_FILE, &export::jsonl(&beyond))?;

    let report = Report {
        from: &from,
        to: &to,
        apart,
        new_path: &new_path,
        sources: &found.sources,
        found: found_events,
        sessions: &sessions,
        imported: &imported,
        verified_sessions: verified.len(),
        verified_events: verified.iter().map(|v| v.events).sum(),
        beyond: beyond.len(),
    };
    let (text, tally) = report.text();
    write_beside(&report_dir, REPORT_FILE, &text)?;
    stdout_write(&text)?;
    if tally.complete() {
        Ok(())
    } else {
        bail!(
            "salvage incomplete: {} session(s) cut, {} lost, {} seq(s) known missing, {} \
             verified event(s) not kept (in {}); the report is {}",
            tally.cut,
            tally.lost,
            tally.missing,
            tally.beyond,
            report_dir.join(BEYOND_GAPS_FILE).display(),
            report_dir.join(REPORT_FILE).display()
        )
    }
}

/// The counts the exit code and the last line of the report come from.
struct Tally {
    /// Sessions kept up to a gap (or up to what the new ledger refused).
    cut: usize,
    /// Sessions without a verified start: nothing of them in the new ledger.
    lost: usize,
    /// Seqs with no verified event, below the highest one found or named by a head row.
    missing: u64,
    /// Verified events not in the new ledger (in [`BEYOND_GAPS_FILE`]).
    beyond: usize,
}

impl Tally {
    /// Whether every verified event found is in the new ledger, every session whole.
    fn complete(&self) -> bool {
        self.cut == 0 && self.lost == 0 && self.missing == 0 && self.beyond == 0
    }
}

/// The target must not be the damaged ledger: a DIR not its data directory (`from_dir`,
/// for a redb source) and holding no ledger (nor its redo log); a URL not the one read.
/// Whether a URL's schema holds a ledger is checked once it is open ([`open_target`]).
fn check_target(from_dir: Option<&Path>, from: &str, target: &Location) -> anyhow::Result<()> {
    let to = match target {
        Location::Url(url) => {
            let to = crate::store::postgres::redact_url(url);
            if to == from {
                bail!(
                    "recover --to {to}: that is the damaged ledger; salvage writes a new ledger \
                     elsewhere (another database, or another schema: ?options=-csearch_path%3DNAME) \
                     and never touches the damaged one"
                );
            }
            return Ok(());
        }
        Location::DataDir(to) => to,
    };
    if to.is_file() {
        bail!(
            "recover --to {}: that is a file, not a directory",
            to.display()
        );
    }
    if let Some(from) = from_dir
        && let (Ok(a), Ok(b)) = (from.canonicalize(), to.canonicalize())
        && a == b
    {
        bail!(
            "recover --to {}: that is the data directory of the damaged ledger; salvage \
             writes a new ledger elsewhere and never touches the damaged one",
            to.display()
        );
    }
    let ledger = to.join(LEDGER_FILE_NAME);
    let log = ledger.with_extension("wal");
    for existing in [&ledger, &log] {
        if std::fs::symlink_metadata(existing).is_ok() {
            bail!(
                "recover --to {}: {} exists; salvage writes a new ledger, into a directory \
                 without one",
                to.display(),
                existing.display()
            );
        }
    }
    Ok(())
}

/// Opens (creates) the new ledger, and says where the report files go: beside it in DIR,
/// in the data directory for a URL. A URL whose schema already holds a ledger is refused.
fn open_target(target: &Location, data_dir: &Path) -> anyhow::Result<(Ledger, PathBuf)> {
    match target {
        Location::DataDir(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            Ok((Ledger::open(dir, families())?, dir.clone()))
        }
        Location::Url(_) => {
            let ledger = Ledger::open_at(target, OpenMode::Create, families())?;
            let holds = !ledger.heads()?.is_empty()
                || !ledger.undecodable_heads()?.is_empty()
                || ledger.last_position()? > 0;
            if holds {
                bail!(
                    "recover --to {}: its schema already holds a ledger; salvage writes a new \
                     ledger, into an empty schema (?options=-csearch_path%3DNAME names another)",
                    ledger.path().display()
                );
            }
            std::fs::create_dir_all(data_dir)
                .with_context(|| format!("creating {}", data_dir.display()))?;
            Ok((ledger, data_dir.to_path_buf()))
        }
    }
}

/// How far one session's kept chain went into the new ledger.
#[derive(Default)]
struct Imported {
    /// Events of `kept` in the new ledger (from seq 1).
    count: usize,
    /// Why the rest was refused, if it was.
    refused: Option<String>,
}

/// Imports every session's kept chain into `ledger`, ids, times and hashes as found (the
/// import path of `import`: each event checked to continue the chain, summaries folded by
/// this build). Sessions are interleaved by commit time (`at`), each in seq order, so the
/// new ledger's positions follow the damaged one's commit order as nearly as the events
/// tell it; a transaction carries at most [`RECOVER_BATCH_EVENTS`] events.
fn import_kept(
    ledger: &Ledger,
    sessions: &[SessionSalvage],
) -> anyhow::Result<BTreeMap<SessionId, Imported>> {
    let total: usize = sessions.iter().map(|s| s.kept.len()).sum();
    let bar = crate::progress::Progress::bar("importing", total as u64, "events");
    // Runs of one session's consecutive events, in merged order.
    let mut next: Vec<usize> = vec![0; sessions.len()];
    let mut runs: Vec<(usize, Vec<Event>)> = Vec::new();
    loop {
        let pick = (0..sessions.len())
            .filter(|&i| next[i] < sessions[i].kept.len())
            .min_by_key(|&i| (sessions[i].kept[next[i]].at, sessions[i].session));
        let Some(i) = pick else { break };
        let event = sessions[i].kept[next[i]].clone();
        next[i] += 1;
        match runs.last_mut() {
            Some((session, events)) if *session == i => events.push(event),
            _ => runs.push((i, vec![event])),
        }
    }
    let mut imported: BTreeMap<SessionId, Imported> = BTreeMap::new();
    let mut batch: Vec<(usize, Vec<Event>)> = Vec::new();
    let mut in_batch = 0;
    let mut runs = runs.into_iter().peekable();
    while let Some(run) = runs.next() {
        in_batch += run.1.len();
        batch.push(run);
        let full = runs
            .peek()
            .is_none_or(|next| in_batch + next.1.len() > RECOVER_BATCH_EVENTS);
        if !full {
            continue;
        }
        // A session import refused is not tried again in later runs.
        let refused: BTreeSet<SessionId> = imported
            .iter()
            .filter(|(_, i)| i.refused.is_some())
            .map(|(s, _)| *s)
            .collect();
        let jobs: Vec<(SessionId, Vec<Event>)> = std::mem::take(&mut batch)
            .into_iter()
            .map(|(i, events)| (sessions[i].session, events))
            .filter(|(session, _)| !refused.contains(session))
            .collect();
        in_batch = 0;
        let outcomes = ledger.write_blocking(move |txn| {
            let mut refused: BTreeSet<SessionId> = refused;
            let mut outcomes: Vec<(SessionId, usize, Option<String>)> = Vec::new();
            for (session, events) in jobs {
                if refused.contains(&session) {
                    continue;
                }
                let count = events.len();
                match txn.import(events) {
                    Ok(_) => outcomes.push((session, count, None)),
                    Err(error) => {
                        refused.insert(session);
                        outcomes.push((session, 0, Some(error.to_string())));
                    }
                }
            }
            outcomes
        })?;
        for (session, count, refused) in outcomes {
            let entry = imported.entry(session).or_default();
            entry.count += count;
            if refused.is_some() {
                entry.refused = refused;
            }
            bar.inc(count as u64);
        }
    }
    bar.finish();
    Ok(imported)
}

/// Writes `name` in `dir` whole (a temporary file beside it, then renamed over it).
fn write_beside(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let path = dir.join(name);
    let mut temp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("writing {}", path.display()))?;
    temp.write_all(text.as_bytes())
        .and_then(|()| temp.as_file().sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    temp.persist(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// What `recover` found and did, as the report says it.
struct Report<'a> {
    /// The damaged ledger (a data directory, or a URL without its password).
    from: &'a str,
    /// The new ledger.
    to: &'a str,
    /// Where [`REPORT_FILE`] and [`BEYOND_GAPS_FILE`] are written when not beside the new
    /// ledger (a URL's: in the data directory).
    apart: Option<&'a Path>,
    new_path: &'a Path,
    sources: &'a [SourceReport],
    found: usize,
    sessions: &'a [SessionSalvage],
    imported: &'a BTreeMap<SessionId, Imported>,
    verified_sessions: usize,
    verified_events: u64,
    beyond: usize,
}

impl Report<'_> {
    /// The report's text, and its counts.
    fn text(&self) -> (String, Tally) {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "salvage of {} into {}: the damaged ledger was only read, and left untouched",
            self.from, self.to
        );
        if let Some(dir) = self.apart {
            let _ = writeln!(
                out,
                "  this report and {BEYOND_GAPS_FILE} are in {}",
                dir.display()
            );
        }
        for source in self.sources {
            let name = &source.name;
            match source.bytes {
                None => {
                    let _ = writeln!(out, "  {name}: not there");
                }
                Some(bytes) => {
                    let _ = write!(
                        out,
                        "  {name}: {bytes} bytes scanned, {} verified event(s) found there first, \
                         {} copy(ies) of events already found, {} row(s) that do not verify, \
                         {} session head row(s)",
                        source.found, source.copies, source.unverified, source.heads
                    );
                    if source.panics > 0 {
                        let _ = write!(out, ", {} offset(s) a decoder failed on", source.panics);
                    }
                    out.push('\n');
                }
            }
        }
        let _ = writeln!(
            out,
            "kept: {} session(s), {} event(s) in {} (verify: ok)",
            self.verified_sessions,
            self.verified_events,
            self.new_path.display()
        );
        let (mut cut, mut lost) = (0usize, 0usize);
        for session in self.sessions {
            let imported = self.imported.get(&session.session);
            let done = imported.map_or(0, |i| i.count);
            let left = session.kept.len() - done + session.beyond.len();
            if let Some(reason) = imported.and_then(|i| i.refused.as_deref()) {
                cut += 1;
                let _ = writeln!(
                    out,
                    "refused: session {}{}: the new ledger refused it after {done} event(s) \
                     ({reason}); {left} event(s) of it in {BEYOND_GAPS_FILE}",
                    session.session,
                    describe(session)
                );
            } else if !session.started() && session.beyond.is_empty() {
                lost += 1;
                let _ = writeln!(
                    out,
                    "lost: session {}: no verified event found (a head row names {} event(s))",
                    session.session,
                    session.head_seq.unwrap_or(0)
                );
            } else if !session.started() {
                lost += 1;
                let _ = writeln!(
                    out,
                    "lost: session {}: no verified start (seq 1); {left} event(s) of it found \
                     ({}) in {BEYOND_GAPS_FILE}",
                    session.session,
                    seqs_of(&session.beyond)
                );
            } else if let Some(at) = session.cut_at() {
                cut += 1;
                let why = if session.missing.first().is_some_and(|m| m.0 == at) {
                    format!("no verified event at seq {at}")
                } else {
                    format!("the event(s) at seq {at} do not chain onto seq {}", at - 1)
                };
                let _ = writeln!(
                    out,
                    "cut: session {}{}: kept seqs 1..={}; first gap at seq {at} ({why}); \
                     {left} event(s) beyond it ({}) in {BEYOND_GAPS_FILE}",
                    session.session,
                    describe(session),
                    at - 1,
                    seqs_of(&session.beyond)
                );
            }
            if !session.missing.is_empty() {
                let ranges: Vec<String> =
                    session.missing.iter().map(|&(a, b)| range(a, b)).collect();
                let found_to = session
                    .kept
                    .iter()
                    .chain(&session.beyond)
                    .map(|e| e.seq)
                    .max()
                    .unwrap_or(0);
                let named = match session.head_seq {
                    Some(head) if head > found_to => format!(
                        " (those after seq {found_to} named only by the session's head row)"
                    ),
                    _ => String::new(),
                };
                let _ = writeln!(
                    out,
                    "missing: session {}: no verified event at seq(s) {}{named}",
                    session.session,
                    ranges.join(", ")
                );
            }
        }
        let missing: u64 = self
            .sessions
            .iter()
            .flat_map(|s| &s.missing)
            .fold(0u64, |sum, &(a, b)| sum.saturating_add(b - a + 1));
        let _ = writeln!(
            out,
            "total: {} verified event(s) found, {} kept in the new ledger, {} in {BEYOND_GAPS_FILE}; \
             {cut} session(s) cut, {lost} lost; {missing} seq(s) known missing (from gaps, and \
             from head rows naming events not found; beyond that, lost events cannot be \
             counted)",
            self.found, self.verified_events, self.beyond
        );
        let tally = Tally {
            cut,
            lost,
            missing,
            beyond: self.beyond,
        };
        (out, tally)
    }
}

/// ` (kind "title")` of a session whose start was kept.
fn describe(session: &SessionSalvage) -> String {
    match session.kept.first().map(|e| &e.payload) {
        Some(crate::event::Payload::SessionStarted { kind, title, .. }) => {
            let title: String = title
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            format!(
                " ({} {:?})",
                kind.as_str(),
                truncate(&title, TITLE_CHARS, Ellipsis::Within)
            )
        }
        _ => String::new(),
    }
}

/// The seqs of `events` (sorted by seq) as "seqs a..=b" or "seq a" when one.
fn seqs_of(events: &[Event]) -> String {
    match (events.first(), events.last()) {
        (Some(first), Some(last)) if first.seq != last.seq => {
            format!("seqs {}", range(first.seq, last.seq))
        }
        (Some(first), _) => format!("seq {}", first.seq),
        _ => "none".to_string(),
    }
}

fn range(a: u64, b: u64) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}..={b}")
    }
}
