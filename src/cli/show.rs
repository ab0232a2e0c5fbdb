//! `show ID`: a session as Markdown.

use super::*;

pub(super) fn show(settings: &Settings, id: &str) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let head = find_session(&ledger, id)?;
    let tree = query::load_tree(&ledger, &head, None)?;
    stdout_write(&export::markdown::render(&tree))
}
