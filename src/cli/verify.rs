//! `verify [ID] [--rebuild]`: hash chains and summaries checked (and stale summaries
//! rebuilt), and whether the search index agrees with the ledger.

use super::*;
use crate::progress::Progress;

pub(super) fn verify(settings: &Settings, id: Option<&str>, rebuild: bool) -> anyhow::Result<()> {
    let ledger = open_existing(settings)?;
    // The lasting verdicts any process recorded before this check.
    let recorded = ledger.damage().reload().unwrap_or_else(|error| {
        vec![crate::store::verdict::Verdict::now(
            None,
            format!("the recorded verdicts cannot be read ({error})"),
        )]
    });
    if rebuild {
        let working = Progress::spinner("rebuilding session summaries");
        let fixed = ledger.rebuild_summaries()?;
        working.finish();
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
        None => {
            let bar = Progress::bar("verifying", 0, "sessions");
            let check = ledger
                .check_all(|done, total| {
                    bar.set_total(total as u64);
                    bar.set(done as u64);
                })
                .map_err(|error| {
                    anyhow::anyhow!("{error}\n{}", recorded_report(&recorded).trim_end())
                })?;
            bar.finish();
            if check.is_damaged() {
                bail!("{}", damage_report(&ledger, &check, &recorded).trim_end());
            }
            if let Some(finding) = check.findings.into_iter().next() {
                return Err(finding.error.into());
            }
            check.verified
        }
    };
    let events: u64 = verified.iter().map(|v| v.events).sum();
    let mut report = format!(
        "ok: {} session(s), {} event(s), every hash chain and seq checked in {}\n{}\n",
        verified.len(),
        events,
        ledger.path().display(),
        index_report(&ledger)
    );
    // Sessions holding events that came from files: their times and actors are claims.
    let imported: std::collections::HashMap<SessionId, crate::provenance::ImportedEvents> = ledger
        .heads()?
        .into_iter()
        .filter_map(|head| {
            let part = crate::provenance::ImportedEvents::of(&head.summary)?.clone();
            Some((head.session, part))
        })
        .collect();
    for session in &verified {
        if let Some(part) = imported.get(&session.session) {
            report.push_str(&format!(
                "note: session {}: {} event(s) came from {} imported file(s) (`show {}` names \
                 them): the chain is sound, but their times and actors are the files' claims\n",
                session.session, part.imported_events, part.imports, session.session
            ));
        }
        if let Some(seq) = session.time_goes_back {
            report.push_str(&format!(
                "note: session {}: event seq {seq} is dated before the event it follows; the \
                 chain is sound, but its times are claims (an import of an earlier build, or \
                 a clock that stepped back)\n",
                session.session
            ));
        }
    }
    match (id, recorded.is_empty()) {
        (_, true) => {}
        // Only a check of the whole ledger clears what was recorded.
        (Some(_), false) => report.push_str(&format!(
            "{} damage verdict(s) recorded earlier stay until `reasoning-ledger verify` finds the whole ledger sound\n",
            recorded.len()
        )),
        (None, false) => match ledger.damage().clear_recorded() {
            Ok(()) => report.push_str(&format!(
                "cleared {} damage verdict(s) recorded earlier: the whole ledger verified sound \
                 (restored, or rebuilt by `recover`), so servers take writes again\n",
                recorded.len()
            )),
            // A ledger this user may only read: sound, but its verdicts stay for its owner.
            Err(error) => report.push_str(&format!(
                "{} damage verdict(s) recorded earlier could not be cleared ({error}): run \
                 `reasoning-ledger verify` as a user who may write the ledger\n",
                recorded.len()
            )),
        },
    }
    if let Some(line) = vectors_report(&ledger) {
        report.push_str(&line);
        report.push('\n');
    }
    stdout_write(&report)
}

/// What `verify` prints for a damaged ledger: every finding, what is intact, what to do.
fn damage_report(
    ledger: &Ledger,
    check: &crate::store::LedgerCheck,
    recorded: &[crate::store::verdict::Verdict],
) -> String {
    let mut text = format!("the ledger {} is damaged:\n", ledger.path().display());
    for finding in &check.structure {
        text.push_str(&format!("  structure: {finding}\n"));
    }
    for finding in &check.findings {
        let range = match finding.error.first_bad_seq() {
            Some(first) if first <= finding.last_seq => format!(
                " (events {first}..={} of {} cannot be trusted)",
                finding.last_seq, finding.last_seq
            ),
            _ => String::new(),
        };
        let what = match &finding.error {
            crate::store::VerifyError::Storage(crate::store::StoreError::Damaged {
                detail,
                ..
            }) => format!("session {}: {detail}", finding.session),
            error if !error.stops_writes() => {
                format!("{error} (`reasoning-ledger verify --rebuild` folds it again)")
            }
            error => error.to_string(),
        };
        text.push_str(&format!("  {what}{range}\n"));
    }
    if let Some(orphans) = &check.orphans {
        text.push_str(&format!("  {orphans}\n"));
    }
    text.push_str(&recorded_report(recorded));
    let events: u64 = check.verified.iter().map(|v| v.events).sum();
    text.push_str(&format!(
        "intact: {} session(s), {events} event(s) verified; {} session(s) damaged\n",
        check.verified.len(),
        check.findings.len()
    ));
    if ledger.database().is_some() {
        text.push_str(&database_advice(check));
        return text;
    }
    text.push_str(
        "what to do: nothing more is written to it by a process that found the damage (this \
         one, or a server). `reasoning-ledger recover --to NEW_DIR` copies every event \
         whose hash verifies (from ledger.redb and ledger.wal, wherever it lies) into a new \
         ledger and reports what it cut; then use --data-dir NEW_DIR. Keep the damaged \
         files until you have checked the new ledger.\n",
    );
    text
}

/// The lasting verdicts recorded before this check, a line each (nothing when none).
fn recorded_report(recorded: &[crate::store::verdict::Verdict]) -> String {
    if recorded.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "recorded earlier (each stops writes in every process until a whole `verify` passes):\n",
    );
    for verdict in recorded {
        let when = crate::event::format_time(verdict.at);
        text.push_str(&format!("  {when}: {}\n", verdict.detail));
    }
    text
}

/// What to do about a damaged ledger in a database (PostgreSQL): a session's damage stops
/// writes to it only, a structural finding every write; when every session verified, the
/// findings say how to set each right, and no salvage is needed.
fn database_advice(check: &crate::store::LedgerCheck) -> String {
    if check.findings.is_empty() && check.orphans.is_none() {
        return "what to do: every session verified; each finding above says how to set it \
                right (then run `reasoning-ledger verify` again: a whole check that passes lets \
                servers write again), or `reasoning-ledger copy --to NEW_DIR|URL` writes a new \
                ledger of every session with every column rebuilt.\n"
            .to_string();
    }
    "what to do: no server writes to a damaged session (to any, for a structural finding); \
     the other sessions go on. `reasoning-ledger copy --to NEW_DIR|URL` copies every intact \
     session and names the rest; `reasoning-ledger recover --to NEW_DIR|URL` salvages every \
     event whose hash verifies, in any row of the ledger's tables (also past damage within a \
     chain), into a new ledger and reports what it cut. Then point --store (or --data-dir) \
     at the new ledger; keep the damaged schema until you have checked it.\n"
        .to_string()
}

/// How far the vectors reach, when embeddings are configured (`None` otherwise: the
/// report is as before semantic recall). Never a failure: vectors are derived data.
fn vectors_report(ledger: &Ledger) -> Option<String> {
    let recall = crate::recall::Recall::for_ledger(ledger);
    let semantic = recall.semantic()?;
    let model = semantic.model();
    let last = ledger.last_position().unwrap_or(0);
    let line = match (
        semantic.store().checkpoint(model),
        semantic.store().count(model),
    ) {
        (Ok(None), _) => format!(
            "vectors ({model}): none yet (`serve` embeds in the background; `reindex --embeddings` now)"
        ),
        (Ok(Some(checkpoint)), Ok(count)) if checkpoint.position >= last => format!(
            "vectors ({model}): reach the ledger's end (position {}, {count} vector(s))",
            checkpoint.position
        ),
        (Ok(Some(checkpoint)), Ok(count)) => format!(
            "vectors ({model}): reach position {} of {last} ({count} vector(s); `serve` embeds the rest)",
            checkpoint.position
        ),
        (Err(error), _) | (_, Err(error)) => format!("vectors ({model}): not checked ({error})"),
    };
    Some(line)
}

/// Every session verified, with a bar of sessions on a terminal.
pub(super) fn verify_all_with_progress(
    ledger: &Ledger,
) -> Result<Vec<crate::store::VerifiedSession>, crate::store::VerifyError> {
    let bar = Progress::bar("verifying", 0, "sessions");
    let verified = ledger.verify_all_reporting(|done, total| {
        bar.set_total(total as u64);
        bar.set(done as u64);
    })?;
    bar.finish();
    Ok(verified)
}

/// Whether the search index agrees with the ledger (never a failure of `verify`: the
/// index is derived data, rebuilt by the next search or `reindex`).
fn index_report(ledger: &Ledger) -> String {
    use crate::recall::{IndexState, Recall};
    match Recall::for_ledger(ledger).state(ledger) {
        Ok(IndexState::Missing) => {
            "search index: none yet (the next search or `reindex` builds it)".to_string()
        }
        Ok(IndexState::Indexed { position, last }) if position >= last => {
            format!("search index: agrees with the ledger (indexed up to position {position})")
        }
        Ok(IndexState::Indexed { position, last }) => format!(
            "search index: indexed up to position {position} of {last} (the next search applies the rest)"
        ),
        Ok(IndexState::Unusable { why }) => {
            format!("search index: unusable ({why}); the next search or `reindex` rebuilds it")
        }
        Err(error) => format!("search index: not checked ({error})"),
    }
}
