//! `export ID --format F [-o FILE]`: a session in any export format; `export --all --format
//! jsonl`: every session, re-importable (a backup). A file is created new, never
//! overwritten, and appears whole or not at all (written beside it, then linked in place).

use super::*;
use crate::progress::Progress;

/// Events read from the ledger at a time by `export --all`.
const EXPORT_ALL_CHUNK_EVENTS: u64 = 1000;

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
    let text = query::export_session(&ledger, &head, at, format)?;
    match output {
        None => stdout_write(&text),
        Some(path) => {
            let mut file = NewFile::create(path)?;
            file.write_all(text.as_bytes())?;
            file.finish()?;
            eprintln!("wrote {} ({} bytes)", path.display(), text.len());
            Ok(())
        }
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
    let mut heads = ledger.heads()?;
    heads.sort_by_key(|head| head.session);
    let total: u64 = heads.iter().map(|head| head.seq).sum();
    let bar = Progress::bar("exporting", total, "events");
    match output {
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            write_sessions(&ledger, &heads, &mut out, &bar)?;
            out.flush()?;
            bar.finish();
        }
        Some(path) => {
            let mut file = NewFile::create(path)?;
            let mut out = std::io::BufWriter::new(&mut file);
            let written = write_sessions(&ledger, &heads, &mut out, &bar)?;
            out.flush()?;
            drop(out);
            file.finish()?;
            bar.finish();
            eprintln!(
                "wrote {} ({written} event(s) of {} session(s))",
                path.display(),
                heads.len()
            );
        }
    }
    Ok(())
}

/// Every event of `heads`' sessions as JSONL lines, read a chunk at a time; returns how
/// many.
fn write_sessions(
    ledger: &Ledger,
    heads: &[SessionHead],
    out: &mut impl Write,
    bar: &Progress,
) -> anyhow::Result<u64> {
    let mut written = 0u64;
    for head in heads {
        let mut from = 1;
        while from <= head.seq {
            let to = head.seq.min(from + EXPORT_ALL_CHUNK_EVENTS - 1);
            let events = ledger.events(head.session, from, to)?;
            out.write_all(export::jsonl(&events).as_bytes())?;
            bar.inc(events.len() as u64);
            written += events.len() as u64;
            from = to + 1;
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
