//! `verify [ID] [--rebuild]`: hash chains and summaries checked (and stale summaries rebuilt).

use super::*;

pub(super) fn verify(settings: &Settings, id: Option<&str>, rebuild: bool) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    if rebuild {
        let fixed = ledger.rebuild_summaries()?;
        let mut text = format!("rebuilt {} session summary(ies)\n", fixed.len());
        for session in &fixed {
            text.push_str(&format!("  {session}\n"));
        }
        stdout_write(&text)?;
    }
    let verified = match id {
        Some(id) => {
            let session = ledger
                .resolve(id)?
                .with_context(|| format!("no session {id:?}"))?;
            vec![ledger.verify_session(session)?]
        }
        None => ledger.verify_all()?,
    };
    let events: u64 = verified.iter().map(|v| v.events).sum();
    stdout_write(&format!(
        "ok: {} session(s), {} event(s), every hash chain and seq checked in {}\n",
        verified.len(),
        events,
        ledger.path().display()
    ))
}
