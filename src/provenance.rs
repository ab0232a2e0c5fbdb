//! Where a session's events came from when this ledger did not record them: the
//! `events_imported` event `import` appends to every session it brought events into.
//!
//! Owns: the payload [`EventsImported`] (tag `events_imported`, schema
//! [`EVENTS_IMPORTED_SCHEMA`]: the file's name and sha256, who ran the import, and the
//! seqs it brought), its codec [`EVENTS_IMPORTED_CODEC`] (registered in
//! [`crate::tools::SHARED_CODECS`]: any family's session can hold it), its part of the
//! summary ([`ImportedEvents`]: what `sessions` and `verify` say), its state in the tree
//! ([`Imports`], the JSON export's `imports`) and its words in the Markdown and on the
//! HTML page's header ([`ProvenanceRender`]).
//!
//! Why an event: a hash chain proves that events were not changed after they were
//! written, not who wrote them or when; an imported event's actor and time are the file's
//! claims. The record of the import is appended through the ordinary hash-chained write
//! (in the same transaction as the session's last imported events), so it is as lasting
//! as they are and travels with `copy` and `export --all`. Must not: let an import's
//! record be mistaken for a thought (it has no text to search, no node in the picture).

use crate::event::family::{JsonCodec, SummaryFields, json_encode, read_part};
use crate::event::summary::{SessionSummary, SummaryPart};
use crate::event::{FamilyEvent, FamilyPayload, PayloadCodec, format_time};
use crate::export::family::FamilyRender;
use crate::export::markdown::escape_inline;
use crate::projection::family::FamilyState;
use crate::projection::tree::{FoldTree, ThoughtTree};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;

/// The name the import record's codec and its parts of the projections go by.
pub(crate) const PROVENANCE: &str = "provenance";
/// Schema of `events_imported` written by this build.
pub(crate) const EVENTS_IMPORTED_SCHEMA: u32 = 1;
/// Its tag.
pub(crate) const EVENTS_IMPORTED: &str = "events_imported";

/// Hex digits of a file's sha256 shown where space is short (the JSON and the Markdown
/// carry all of it).
const SHORT_SHA256_CHARS: usize = 12;

/// What one import brought into one session: its events `from_seq..=to_seq` were read
/// from `file` (whose bytes hash to `sha256`) by `by`. Their ids, times, actors and
/// hashes are the file's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EventsImported {
    /// The file as named to `import`.
    pub file: String,
    /// sha256 of the file's bytes, lowercase hex.
    pub sha256: String,
    /// Who ran the import: the operating system's user name.
    pub by: String,
    pub from_seq: u64,
    pub to_seq: u64,
}

impl EventsImported {
    /// How many events it brought (a file's claim: any seqs decode, none overflows).
    pub(crate) fn events(&self) -> u64 {
        self.to_seq.saturating_sub(self.from_seq).saturating_add(1)
    }

    /// One line a person reads: which events, from where, by whom, and what that means.
    pub(crate) fn sentence(&self, at: u64) -> String {
        let events = if self.from_seq == self.to_seq {
            format!("event {}", self.from_seq)
        } else {
            format!("events {}–{}", self.from_seq, self.to_seq)
        };
        format!(
            "{events} came from the file {} (sha256 {}…), imported by {} at {}: their \
             times and actors are the file's claims, not this ledger's record",
            self.file,
            short_sha256(&self.sha256),
            self.by,
            format_time(at)
        )
    }
}

fn short_sha256(sha256: &str) -> &str {
    sha256.get(..SHORT_SHA256_CHARS).unwrap_or(sha256)
}

/// The user running this process, for [`EventsImported::by`]: `$USER`, `$LOGNAME`, else
/// `uid N`.
pub(crate) fn current_user() -> String {
    ["USER", "LOGNAME"]
        .into_iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|name| !name.trim().is_empty())
        .unwrap_or_else(|| format!("uid {}", rustix::process::getuid().as_raw()))
}

/// Written form: tag first (the hashed JSON).
#[derive(Serialize)]
struct Tagged<'a> {
    #[serde(rename = "type")]
    tag: &'static str,
    #[serde(flatten)]
    record: &'a EventsImported,
}

/// [`EventsImported`] as a family payload.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ImportEvent(pub EventsImported);

impl Serialize for ImportEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Tagged {
            tag: EVENTS_IMPORTED,
            record: &self.0,
        }
        .serialize(s)
    }
}

impl From<EventsImported> for crate::event::Payload {
    fn from(event: EventsImported) -> Self {
        crate::event::Payload::Family(FamilyPayload::new(ImportEvent(event)))
    }
}

impl FamilyEvent for ImportEvent {
    fn codec(&self) -> &'static dyn PayloadCodec {
        &EVENTS_IMPORTED_CODEC
    }

    fn type_name(&self) -> &'static str {
        EVENTS_IMPORTED
    }

    /// Nothing to search: the file's name is no one's reasoning.
    fn text(&self) -> Option<&str> {
        None
    }

    fn encode(&self, out: &mut Vec<u8>) {
        json_encode(self, out);
    }

    fn summarize(&self, summary: &mut SessionSummary, _new_branch: bool) {
        // The summary has counted this event: its seq.
        let summary_seq = summary.events;
        let part = summary.part_mut::<ImportedEvents>();
        part.imported_events = part.imported_events.saturating_add(self.0.events());
        part.imports = part.imports.saturating_add(1);
        part.recorded_through = summary_seq;
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Events of a session that came from files, and the imports that brought them: the
/// provenance part of the summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ImportedEvents {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub imported_events: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub imports: u64,
    /// The seq of the latest record: the events before it are accounted for.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub recorded_through: u64,
}

/// The JSON keys of [`ImportedEvents`].
const SUMMARY_KEYS: &[&str] = &["imported_events", "imports", "recorded_through"];

impl SummaryPart for ImportedEvents {
    fn family(&self) -> &'static str {
        PROVENANCE
    }

    fn position(&self) -> u8 {
        4
    }

    /// Sessions holding imported events say how many.
    fn list_row(&self, row: &mut Map<String, Value>) {
        if self.imported_events > 0 {
            row.insert("importedEvents".into(), json!(self.imported_events));
        }
    }
}

impl ImportedEvents {
    /// The part of `summary`, when its session holds imported events.
    pub(crate) fn of(summary: &SessionSummary) -> Option<&ImportedEvents> {
        summary.part::<ImportedEvents>().filter(|p| p.imports > 0)
    }
}

/// An import as folded: the record's seq and time, and the record.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ImportView {
    pub seq: u64,
    pub at: u64,
    pub record: EventsImported,
}

/// The imports recorded in a session, in seq order: their state in the tree.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Imports(pub Vec<ImportView>);

impl Imports {
    /// The imports of `tree` (none when it has none).
    pub(crate) fn of(tree: &ThoughtTree) -> &[ImportView] {
        tree.family::<Imports>().map_or(&[], |imports| &imports.0)
    }
}

impl FamilyState for Imports {
    fn family(&self) -> &'static str {
        PROVENANCE
    }

    fn json(&self) -> Option<(&'static str, Value)> {
        if self.0.is_empty() {
            return None;
        }
        let rows = self
            .0
            .iter()
            .map(|view| {
                let mut row = serde_json::to_value(&view.record).expect("a record serializes");
                row["seq"] = json!(view.seq);
                row["at"] = json!(format_time(view.at));
                row
            })
            .collect();
        Some(("imports", rows))
    }
}

impl FoldTree for ImportEvent {
    fn fold_tree(self, seq: u64, at: u64, tree: &mut ThoughtTree) {
        tree.family_or_default::<Imports>().0.push(ImportView {
            seq,
            at,
            record: self.0,
        });
    }
}

/// The imports' words in a session's Markdown and page header.
pub(crate) struct ProvenanceRender;

/// The one instance, registered among the renderers no family owns.
pub(crate) static PROVENANCE_RENDER: ProvenanceRender = ProvenanceRender;

impl FamilyRender for ProvenanceRender {
    fn markdown_sections(&self, tree: &ThoughtTree, out: &mut String) {
        let imports = Imports::of(tree);
        if imports.is_empty() {
            return;
        }
        out.push_str("## Imported\n\n");
        for view in imports {
            let r = &view.record;
            let _ = writeln!(
                out,
                "- seq {} · {} · sha256 `{}`",
                view.seq,
                escape_inline(&r.sentence(view.at)),
                r.sha256
            );
        }
        out.push('\n');
    }

    fn header_notes(&self, tree: &ThoughtTree) -> Vec<String> {
        Imports::of(tree)
            .iter()
            .map(|view| format!("Imported: {}.", view.record.sentence(view.at)))
            .collect()
    }
}

/// The codec of `events_imported` (no toolset's: any session can hold it): its JSON is
/// its row.
pub(crate) static EVENTS_IMPORTED_CODEC: JsonCodec = JsonCodec {
    family: PROVENANCE,
    types: &[EVENTS_IMPORTED],
    schema: EVENTS_IMPORTED_SCHEMA,
    owner: "the provenance codec",
    row: "import record",
    read: read_import,
    summary: Some(SummaryFields {
        keys: SUMMARY_KEYS,
        read: read_part::<ImportedEvents>,
    }),
};

fn read_import(json: &str) -> Result<FamilyPayload, serde_json::Error> {
    #[derive(Deserialize)]
    struct Wire {
        #[serde(rename = "type")]
        _tag: String,
        #[serde(flatten)]
        record: EventsImported,
    }
    let wire: Wire = serde_json::from_str(json)?;
    Ok(FamilyPayload::new(ImportEvent(wire.record)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record is a file's claim: seqs at the ends of the range fold without overflow.
    #[test]
    fn any_seqs_a_record_claims_fold_without_overflow() {
        let record = |from_seq, to_seq| EventsImported {
            file: "f".into(),
            sha256: "0".into(),
            by: "b".into(),
            from_seq,
            to_seq,
        };
        assert_eq!(record(0, u64::MAX).events(), u64::MAX);
        assert_eq!(record(u64::MAX, 0).events(), 1);
        assert_eq!(record(3, 7).events(), 5);
        let stored: crate::event::summary::StoredSummary = serde_json::from_value(json!({
            "kind": "thinking", "title": "t", "created_at": 0, "updated_at": 0,
            "events": 1, "thoughts": 0, "branches": [], "closed": false
        }))
        .unwrap();
        let mut summary: SessionSummary = crate::tools::families().read_summary(stored).unwrap();
        for _ in 0..2 {
            ImportEvent(record(0, u64::MAX)).summarize(&mut summary, false);
        }
        let part = ImportedEvents::of(&summary).unwrap();
        assert_eq!((part.imported_events, part.imports), (u64::MAX, 2));
    }
}
