//! `export ID --format otlp` and `export --all --format otlp`: recorded sessions sent as
//! traces to the collector the `OTEL_*` variables name ([`crate::telemetry::past`]), one
//! trace per session with ids derived from its ids (sending again changes nothing). Prints
//! each session's trace id on stdout.

use super::*;
use crate::telemetry::{self, past};

pub(super) fn export_otlp(
    settings: &Settings,
    id: Option<&str>,
    at: Option<u64>,
    output: Option<PathBuf>,
) -> anyhow::Result<()> {
    if output.is_some() {
        bail!("export --format otlp sends to the collector; it writes no file (drop --output)");
    }
    // Before anything is read: a missing endpoint is the error, not a half-done export.
    telemetry::Settings::from_env()?;
    let ledger = open_existing(settings)?;
    let heads = match id {
        Some(id) => {
            let head = find_session(&ledger, id)?;
            check_at(&head, at)?;
            vec![head]
        }
        None => ledger.heads()?,
    };
    let capture = past::capture_content();
    let mut spans = 0;
    for head in &heads {
        let to = at.unwrap_or(head.seq);
        let events = ledger.events(head.session, 1, to)?;
        let session_spans = past::session_spans(&events, capture);
        spans += past::send(session_spans)?;
        println!(
            "{}\t{}",
            head.session,
            telemetry::events::trace_id_of(head.session)
        );
    }
    eprintln!("sent {spans} span(s) of {} session(s)", heads.len());
    Ok(())
}
