//! `reindex`: the search index rebuilt from the ledger (a progress line on a terminal).

use super::*;
use crate::recall::Recall;
use std::io::IsTerminal;

pub(super) fn reindex(settings: &Settings) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    let started = std::time::Instant::now();
    let terminal = std::io::stderr().is_terminal();
    let mut progress = |done: u64, total: u64| {
        if terminal {
            let percent = (done * 100).checked_div(total).unwrap_or(100);
            eprint!("\rindexing: {done}/{total} positions ({percent}%)");
        }
    };
    let position = Recall::for_ledger(&ledger).reindex(&ledger, &mut progress)?;
    if terminal {
        eprintln!();
    }
    stdout_write(&format!(
        "reindexed {} up to position {position} in {:.1} s\n",
        ledger.path().display(),
        started.elapsed().as_secs_f64()
    ))
}
