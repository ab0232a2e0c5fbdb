//! `replay ID --at SEQ`: the tree as it stood after that event.

use super::*;
use crate::export::family::Exports;

/// Characters of an event's text `replay` shows on its line (a longer one ends in `…`;
/// the whole text is in the tree below).
const REPLAY_LINE_CHARS: usize = 100;

pub(super) fn replay(settings: &Settings, id: &str, at: Option<u64>) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let head = find_session(&ledger, id)?;
    check_at(&head, at)?;
    let loaded = query::load_for_export_up_to_damage(&ledger, &head, at, Format::Jsonl)?;
    let (tree, events) = &loaded.read;
    let mut text = format!(
        "Replay of session {} at seq {} of {}\n\n",
        head.session, tree.at_seq, head.seq
    );
    for event in events {
        let line = export::markdown::terminal_line(event.payload.text().unwrap_or(""));
        let line = export::truncate(&line, REPLAY_LINE_CHARS, export::Ellipsis::Within);
        text.push_str(&format!(
            "{:>5}  {}  {:<16}  {}\n",
            event.seq,
            event.at_rfc3339(),
            event.payload.type_name(),
            line
        ));
    }
    text.push('\n');
    text.push_str(&export::markdown::render(
        tree,
        &Exports::of_families(ledger.families()),
    ));
    stdout_write(&text)?;
    match loaded.damage_note(&head, tree.at_seq) {
        Some(note) => bail!("{note}"),
        None => Ok(()),
    }
}
