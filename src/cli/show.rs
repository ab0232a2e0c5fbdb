//! `show ID`: a session as Markdown (a damaged one up to its damage, then exit 1 naming
//! it).

use super::*;
use crate::export::family::Exports;

pub(super) fn show(settings: &Settings, id: &str) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let head = find_session(&ledger, id)?;
    let loaded = query::load_tree_up_to_damage(&ledger, &head, None)?;
    let exports = Exports::of_families(ledger.families());
    stdout_write(&export::markdown::render(&loaded.read, &exports))?;
    match loaded.damage_note(&head, loaded.read.at_seq) {
        Some(note) => bail!("{note}"),
        None => Ok(()),
    }
}
