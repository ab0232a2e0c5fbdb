//! `export ID --format F [-o FILE]`: a session in any export format; `export --all --format
//! jsonl`: every session, re-importable (a backup). A file is created new, never
//! overwritten, and appears whole or not at all (written beside it, then linked in place).

use super::*;
use crate::progress::Progress;

pub(super) fn export_cmd(
    settings: &Settings,
    id: &str,
    format: Format,
    at: Option<u64>,
    output: Option<&Path>,
) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let head = find_session(&ledger, id)?;
    check_at(&head, at)?;
    let exported = query::export_session_up_to_damage(&ledger, &head, at, format)?;
    let (text, shown_to) = &exported.read;
    match output {
        None => stdout_write(text)?,
        Some(path) => {
            let mut file = NewFile::create(path)?;
            file.write_all(text.as_bytes())?;
            file.finish()?;
            eprintln!("wrote {} ({} bytes)", path.display(), text.len());
        }
    }
    // A damaged session is exported up to its damage, and the command fails naming it.
    match exported.damage_note(&head, *shown_to) {
        Some(note) => bail!("{note}"),
        None => Ok(()),
    }
}

/// `export --all`: every session's events as JSONL, session after session (ordered by id,
/// each by seq), which `import` reads back into any ledger.
pub(super) fn export_all(
    settings: &Settings,
    format: Format,
    output: Option<&Path>,
) -> anyhow::Result<()> {
    if format != Format::Jsonl {
        bail!(
            "export --all writes jsonl only (the events, re-importable); export one session \
             for {}",
            format.as_str()
        );
    }
    let ledger = open_existing(settings)?;
    let heads = ledger.heads()?;
    // A session whose head row cannot be read (or that has none) is exported from its
    // events alone, to the end of its chain, and named: its events are what a backup
    // keeps, and whether it held more cannot be told.
    let mut sessions: Vec<(SessionId, Option<u64>)> = heads
        .iter()
        .map(|head| (head.session, Some(head.seq)))
        .collect();
    let unreadable = ledger.undecodable_heads()?;
    sessions.extend(unreadable.iter().map(|(session, _)| (*session, None)));
    sessions.sort();
    let total: u64 = heads
        .iter()
        .fold(0u64, |sum, head| sum.saturating_add(head.seq));
    let bar = Progress::bar("exporting", total, "events");
    let written = match output {
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let written = write_sessions(&ledger, &sessions, &mut out, &bar)?;
            out.flush()?;
            bar.finish();
            written
        }
        Some(path) => {
            let mut file = NewFile::create(path)?;
            let mut out = std::io::BufWriter::new(&mut file);
            let written = write_sessions(&ledger, &sessions, &mut out, &bar)?;
            out.flush()?;
            drop(out);
            file.finish()?;
            bar.finish();
            eprintln!(
                "wrote {} ({} event(s) of {} session(s))",
                path.display(),
                written.events,
                sessions.len()
            );
            written
        }
    };
    let mut written = written;
    for (session, detail) in &unreadable {
        let exported = written.exported.get(session).copied().unwrap_or(0);
        written.left_out.push(format!(
            "session {session}: its head row cannot be read ({detail}); its {exported} \
             event(s) that chain from seq 1 are exported, whether it held more cannot be told"
        ));
    }
    if written.left_out.is_empty()
        && let Some(detail) = ledger.damage().ledger_damage()
    {
        // Damage no session scan meets (the open's: redo log records it could not apply):
        // the export holds every event that could be read, and says what it may lack.
        written.left_out.push(detail);
    }
    if written.left_out.is_empty() {
        return Ok(());
    }
    let mut report =
        String::from("damaged (every event before each cut is exported, nothing after it):\n");
    for cut in &written.left_out {
        report.push_str(&format!("  {cut}\n"));
    }
    eprint!("{report}");
    bail!(
        "{} session(s) of {} are damaged and were exported only up to the damage; \
         `reasoning-ledger verify` lists the damage, `reasoning-ledger recover --to NEW_DIR` \
         salvages what verifies",
        written.left_out.len(),
        ledger.path().display()
    )
}

/// What `export --all` wrote: how many events (in all, and per session), and what it
/// left out (one line a session).
struct Written {
    events: u64,
    exported: std::collections::BTreeMap<SessionId, u64>,
    left_out: Vec<String>,
}

/// Every event of `sessions` (each up to its head's seq; without a readable head, to the
/// end of its chain) as JSONL lines, streamed. Each event is checked as it
/// goes (seq, chain, hash): a session is written up to its first event that does not
/// read or verify, and the rest of it is named in [`Written::left_out`], so a backup never
/// holds a damaged event as if it were sound and one damaged session stops no other.
fn write_sessions(
    ledger: &Ledger,
    sessions: &[(SessionId, Option<u64>)],
    out: &mut impl Write,
    bar: &Progress,
) -> anyhow::Result<Written> {
    let mut written = Written {
        events: 0,
        exported: Default::default(),
        left_out: Vec::new(),
    };
    let mut line = Vec::new();
    for &(session, last_seq) in sessions {
        let mut expected_seq = 1;
        let mut prev = crate::event::GENESIS_HASH.to_string();
        let mut problem: Option<String> = None;
        let mut failed_write: Option<std::io::Error> = None;
        let scanned = ledger.for_each_event(session, 1, last_seq.unwrap_or(u64::MAX), |event| {
            if event.seq != expected_seq {
                problem = Some(format!("event seq {expected_seq} is missing"));
                return false;
            }
            // The read already refused an event whose content does not match its hash
            // (`Ledger::for_each_event`): the chain is what is left to check.
            if event.prev != prev {
                problem = Some(format!("event seq {expected_seq} does not chain"));
                return false;
            }
            line.clear();
            serde_json::to_writer(&mut line, &event).expect("events serialize");
            line.push(b'\n');
            if let Err(error) = out.write_all(&line) {
                failed_write = Some(error);
                return false;
            }
            prev = event.hash;
            expected_seq += 1;
            bar.inc(1);
            written.events += 1;
            true
        });
        if let Some(error) = failed_write {
            return Err(error.into());
        }
        written.exported.insert(session, expected_seq - 1);
        let problem = match (problem, scanned) {
            (Some(problem), _) => Some(problem),
            (None, Err(error)) => Some(format!("after seq {}: {error}", expected_seq - 1)),
            (None, Ok(())) => match last_seq {
                Some(last) if expected_seq <= last => Some(format!(
                    "its head says seq {last} but the events end at {}",
                    expected_seq - 1
                )),
                _ => None,
            },
        };
        if let Some(problem) = problem {
            let rest = match last_seq {
                Some(last) if expected_seq <= last => {
                    format!("events {expected_seq}..={last} left out")
                }
                _ => format!("events from seq {expected_seq} on left out"),
            };
            written
                .left_out
                .push(format!("session {session}: {problem}; {rest}"));
        }
    }
    Ok(written)
}

/// A file being exported: written to a temporary file in the target's folder, then
/// linked at the target's name only if nothing is there (so an interrupted export leaves
/// no partial file, and an existing file is never replaced).
struct NewFile {
    temp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl NewFile {
    /// Checks `path` (it must not exist; its folder must) and opens the temporary file,
    /// with errors that say what is wrong.
    fn create(path: &Path) -> anyhow::Result<NewFile> {
        let folder = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(already_exists(path));
        }
        if !folder.exists() {
            bail!(
                "cannot write {}: the folder {} does not exist (create it first)",
                path.display(),
                folder.display()
            );
        }
        if !folder.is_dir() {
            bail!(
                "cannot write {}: {} is a file, not a folder",
                path.display(),
                folder.display()
            );
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}.partial-"))
            .tempfile_in(folder)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(NewFile {
            temp,
            path: path.to_path_buf(),
        })
    }

    /// Syncs the data and links it at its name (refusing if a file appeared there).
    fn finish(self) -> anyhow::Result<()> {
        self.temp.as_file().sync_all()?;
        match self.temp.persist_noclobber(&self.path) {
            Ok(_) => Ok(()),
            Err(error) if error.error.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(already_exists(&self.path))
            }
            Err(error) => Err(anyhow::Error::new(error.error)
                .context(format!("cannot create {}", self.path.display()))),
        }
    }
}

impl Write for NewFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.temp.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.temp.flush()
    }
}

fn already_exists(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "{} already exists: export never overwrites a file (choose another name or remove it)",
        path.display()
    )
}
