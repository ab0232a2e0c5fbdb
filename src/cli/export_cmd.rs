//! `export ID --format F [-o FILE]`: a session in any export format; a file is created new, never overwritten.

use super::*;

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
            let mut file = create_new_file(path)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            eprintln!("wrote {} ({} bytes)", path.display(), text.len());
            Ok(())
        }
    }
}

/// Creates `path` for an export, refusing to overwrite, with an error that says what is
/// wrong: the file exists, or its folder does not.
fn create_new_file(path: &Path) -> anyhow::Result<std::fs::File> {
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => Ok(file),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "{} already exists: export never overwrites a file (choose another name or remove it)",
            path.display()
        ),
        Err(_) if !folder.exists() => bail!(
            "cannot write {}: the folder {} does not exist (create it first)",
            path.display(),
            folder.display()
        ),
        Err(_) if !folder.is_dir() => bail!(
            "cannot write {}: {} is a file, not a folder",
            path.display(),
            folder.display()
        ),
        Err(error) => {
            Err(anyhow::Error::new(error).context(format!("cannot create {}", path.display())))
        }
    }
}
