//! `reindex [--embeddings]`: the search index rebuilt from the ledger (a progress line on
//! a terminal); with `--embeddings`, every event embedded again (a progress bar).

use super::*;
use crate::progress::Progress;
use crate::recall::Recall;
use std::io::IsTerminal;

pub(super) fn reindex(settings: &Settings, embeddings: bool) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    if ledger.read_only().is_some() {
        bail!(
            "{} may not be written here, so no index or vectors can be kept beside it (a \
             search builds its index in a temporary directory instead)",
            ledger.path().display()
        );
    }
    let recall = Recall::for_ledger(&ledger);
    // Checked first: asking for embeddings with none configured rebuilds nothing.
    let semantic = match (embeddings, recall.semantic()) {
        (false, _) => None,
        (true, Some(semantic)) => Some(semantic.clone()),
        (true, None) => bail!(
            "--embeddings: no embeddings endpoint is configured for this ledger (set {} and {}, or an \"embeddings\" entry in providers.json)",
            crate::provider::embeddings::EMBEDDINGS_BASE_URL_ENV,
            crate::provider::embeddings::EMBEDDINGS_MODEL_ENV
        ),
    };
    let started = std::time::Instant::now();
    let terminal = std::io::stderr().is_terminal();
    let mut progress = |done: u64, total: u64| {
        if terminal {
            let percent = (done * 100).checked_div(total).unwrap_or(100);
            eprint!("\rindexing: {done}/{total} positions ({percent}%)");
        }
    };
    let position = recall.reindex(&ledger, &mut progress)?;
    if terminal {
        eprintln!();
    }
    stdout_write(&format!(
        "reindexed {} up to position {position} in {:.1} s\n",
        ledger.path().display(),
        started.elapsed().as_secs_f64()
    ))?;
    let Some(semantic) = semantic else {
        return Ok(());
    };
    let started = std::time::Instant::now();
    semantic.store().clear(semantic.model())?;
    let bar = Progress::bar("embedding", ledger.last_position()?, "positions");
    let position = semantic
        .catch_up(&ledger, &mut |done, total| {
            bar.set_total(total);
            bar.set(done);
        })
        .map_err(|error| anyhow::anyhow!("embedding failed: {error}"))?;
    bar.finish();
    let count = semantic.store().count(semantic.model())?;
    stdout_write(&format!(
        "embedded {count} event(s) with {} up to position {position} in {:.1} s\n",
        semantic.model(),
        started.elapsed().as_secs_f64()
    ))
}
