//! The session summary: a small fold kept beside the session head in the store.
//!
//! Owns: [`SessionSummary`], the counts and branch list every answer of the thinking tools
//! needs, folded one event at a time (each family folds its own events into it through
//! [`crate::event::FamilyEvent::summarize`]), and [`SummaryPart`] (the fields a family adds
//! to it, in [`SummaryParts`], read back by the family's codec: [`StoredSummary::read`]
//! hands them to the `Families` it is given, so this file knows no registry). The store keeps the folded
//! summary of each session next to its head so a tool reads one row instead of replaying
//! the log. Must not: do I/O or depend on anything but the events folded into it.
//!
//! Why here, below the store, and not in `projection`: the summary is stored data. The
//! store folds it inside every append (`store::rules`), keeps its bytes in the head row
//! and `verify` compares it with a fold of the log, so it is part of what the log is, as
//! the envelope is; the projections (`crate::projection`) read it, the store never reads
//! a projection.

use crate::event::{Event, Payload, SessionKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::any::{Any, TypeId};
use std::fmt;

/// Version of what [`SessionSummary`] folds. Raise it when a field is added or a fold
/// rule changes: the store then reports summaries stored by an earlier build as stale
/// (`verify`), and a rebuild (`verify --rebuild`) folds them again. Heads stored before
/// summaries carried a version read as version 1.
pub(crate) const SUMMARY_VERSION: u32 = 1;

fn summary_version_one() -> u32 {
    1
}

/// Counts and state of one session after the events folded into it. Read back from its
/// JSON as a [`StoredSummary`] and the families of the ledger that stored it
/// ([`StoredSummary::read`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct SessionSummary {
    /// The [`SUMMARY_VERSION`] of the build that folded it.
    #[serde(default = "summary_version_one")]
    pub version: u32,
    pub kind: SessionKind,
    pub title: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Time of the first event, ms since the epoch.
    pub created_at: u64,
    /// Time of the last event, ms since the epoch.
    pub updated_at: u64,
    /// Events folded (equals the head seq).
    pub events: u64,
    /// Thoughts recorded (sequentialthinking and think calls).
    pub thoughts: u64,
    /// Branch ids in first-seen order, each once.
    pub branches: Vec<String>,
    /// The last `totalThoughts` after adjustment, if the session has thoughts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_thoughts: Option<u64>,
    /// The last thought's `nextThoughtNeeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_thought_needed: Option<bool>,
    pub closed: bool,
    /// The families' fields (a plan's phase, model calls' tokens, …), written after these
    /// ([`SummaryPart::position`]). Only events no earlier build wrote set them,
    /// and they are written as they always were: every summary an earlier build stored
    /// folds the same today, so [`SUMMARY_VERSION`] stays.
    #[serde(flatten)]
    pub parts: SummaryParts,
}

/// A stored summary as read from its JSON, before a ledger's families read what is
/// theirs in it: its kind (by name) and the fields no core field took (the families'
/// parts). Must not: be read without them ([`StoredSummary::read`]).
#[derive(Deserialize)]
pub(crate) struct StoredSummary {
    #[serde(default = "summary_version_one")]
    version: u32,
    kind: String,
    title: String,
    #[serde(default)]
    aliases: Vec<String>,
    created_at: u64,
    updated_at: u64,
    events: u64,
    thoughts: u64,
    branches: Vec<String>,
    #[serde(default)]
    total_thoughts: Option<u64>,
    #[serde(default)]
    next_thought_needed: Option<bool>,
    closed: bool,
    #[serde(flatten)]
    parts: Map<String, Value>,
}

impl StoredSummary {
    /// The summary, its kind read by `kind_named` (a kind of some families, by name) and
    /// its families' fields by `read_parts` (`Families::read_summary` hands both).
    pub(crate) fn read(
        self,
        kind_named: impl FnOnce(&str) -> Option<SessionKind>,
        read_parts: impl FnOnce(Map<String, Value>) -> Result<SummaryParts, serde_json::Error>,
    ) -> Result<SessionSummary, serde_json::Error> {
        use serde::de::Error;
        let kind = kind_named(&self.kind).ok_or_else(|| {
            serde_json::Error::custom(format_args!("unknown session kind {:?}", self.kind))
        })?;
        Ok(SessionSummary {
            version: self.version,
            kind,
            title: self.title,
            aliases: self.aliases,
            created_at: self.created_at,
            updated_at: self.updated_at,
            events: self.events,
            thoughts: self.thoughts,
            branches: self.branches,
            total_thoughts: self.total_thoughts,
            next_thought_needed: self.next_thought_needed,
            closed: self.closed,
            parts: read_parts(self.parts)?,
        })
    }
}

impl SessionSummary {
    /// The summary right after a `session_started` event; `None` for any other event.
    pub(crate) fn start(event: &Event) -> Option<Self> {
        match &event.payload {
            Payload::SessionStarted {
                kind,
                title,
                aliases,
            } => Some(SessionSummary {
                version: SUMMARY_VERSION,
                kind: *kind,
                title: title.clone(),
                aliases: aliases.clone(),
                created_at: event.at,
                updated_at: event.at,
                events: 1,
                thoughts: 0,
                branches: Vec::new(),
                total_thoughts: None,
                next_thought_needed: None,
                closed: false,
                parts: SummaryParts::default(),
            }),
            _ => None,
        }
    }

    /// Folds one more event (seq `events + 1`) into the summary.
    pub(crate) fn apply(&mut self, event: &Event) {
        let new_branch = event
            .payload
            .branch()
            .is_some_and(|id| !self.branches.iter().any(|known| known == id));
        self.apply_known(event, new_branch);
    }

    /// [`SessionSummary::apply`] for a fold that already knows whether the event's branch
    /// is new (the thought tree indexes its branches; a session can have thousands).
    pub(crate) fn apply_known(&mut self, event: &Event, new_branch: bool) {
        self.events += 1;
        self.updated_at = event.at;
        match &event.payload {
            Payload::SessionStarted { .. } => {}
            Payload::SessionClosed { .. } => self.closed = true,
            Payload::Family(family) => family.event().summarize(self, new_branch),
        }
    }

    /// `open`, `complete` (the last thought said no next thought is needed, or a family's
    /// part says so: a finalized plan) or `closed`.
    pub(crate) fn status(&self) -> &'static str {
        if self.closed {
            "closed"
        } else if self.next_thought_needed == Some(false) || self.parts.iter().any(|p| p.complete())
        {
            "complete"
        } else {
            "open"
        }
    }

    /// The family part of type `T`, if the summary has one.
    pub(crate) fn part<T: SummaryPart>(&self) -> Option<&T> {
        self.parts.get()
    }

    /// The family part of type `T`, its default first if the summary has none.
    pub(crate) fn part_mut<T: SummaryPart + Clone + PartialEq + Default>(&mut self) -> &mut T {
        self.parts.get_or_default()
    }

    /// Adds what the families' parts show in a session list's row (model calls, their
    /// tokens and cost; branch nodes), after the row's own fields.
    pub(crate) fn add_list_row_fields(&self, row: &mut serde_json::Value) {
        if let Some(row) = row.as_object_mut() {
            for part in self.parts.iter() {
                part.list_row(row);
            }
        }
    }

    /// Whether a family closed `branch` to new thoughts.
    pub(crate) fn branch_closed(&self, branch: &str) -> bool {
        self.parts
            .iter()
            .any(|p| p.closed_branches().iter().any(|b| b == branch))
    }
}

/// The fields a family adds to a session's stored summary (a plan's phase, the model
/// calls' tokens…). Serialized flat into the summary after its own fields, parts in
/// ascending [`SummaryPart::position`]; its fields that hold nothing are left out, so a
/// part that holds nothing writes nothing.
///
/// Implement it on a `Clone + PartialEq + Default + Serialize` type;
/// [`SummaryPartObject`] comes for free. Its family's codec reads it back
/// ([`crate::event::PayloadCodec::summary_keys`] and `read_summary`).
pub(crate) trait SummaryPart:
    SummaryPartObject + erased_serde::Serialize + fmt::Debug + Send + Sync
{
    /// The family it belongs to (its codec's `family()`).
    #[allow(
        dead_code,
        reason = "every part names its family; nothing reads it yet"
    )]
    fn family(&self) -> &'static str;
    /// Where its fields stand among the families' parts (ascending), so a summary's
    /// bytes never depend on the order its events came in or a backend hands fields
    /// back. Today's parts keep the order every build wrote: planning 1, the provider's
    /// model calls 2, agent 3; a new family takes the next free number.
    fn position(&self) -> u8;
    /// What a session list's row shows of it (camelCase keys, added after the row's own).
    fn list_row(&self, row: &mut Map<String, Value>) {
        let _ = row;
    }
    /// Whether it makes the session `complete` (a finalized plan).
    fn complete(&self) -> bool {
        false
    }
    /// Branches it closed: they take no more thoughts.
    fn closed_branches(&self) -> &[String] {
        &[]
    }
}

/// The object plumbing every [`SummaryPart`] gets from its `Clone + PartialEq + Default`.
pub(crate) trait SummaryPartObject: Any {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn clone_box(&self) -> Box<dyn SummaryPart>;
    fn eq_dyn(&self, other: &dyn SummaryPart) -> bool;
    /// Equal to its type's default (writes nothing).
    fn is_default(&self) -> bool;
}

impl<T: SummaryPart + Clone + PartialEq + Default> SummaryPartObject for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn clone_box(&self) -> Box<dyn SummaryPart> {
        Box::new(self.clone())
    }
    fn eq_dyn(&self, other: &dyn SummaryPart) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn is_default(&self) -> bool {
        *self == T::default()
    }
}

/// The families' parts of one summary, in ascending [`SummaryPart::position`]: the
/// order their fields are written in.
#[derive(Default)]
pub(crate) struct SummaryParts(Vec<Box<dyn SummaryPart>>);

impl SummaryParts {
    /// The part of type `T`, if the summary has one.
    pub(crate) fn get<T: SummaryPart>(&self) -> Option<&T> {
        self.0.iter().find_map(|p| p.as_any().downcast_ref())
    }

    /// The part of type `T`, its default first if the summary has none.
    pub(crate) fn get_or_default<T: SummaryPart + Clone + PartialEq + Default>(
        &mut self,
    ) -> &mut T {
        let at = match self
            .0
            .iter()
            .position(|p| p.as_any().type_id() == TypeId::of::<T>())
        {
            Some(at) => at,
            None => self.insert(Box::new(T::default())),
        };
        self.0[at]
            .as_any_mut()
            .downcast_mut()
            .expect("the position of this type")
    }

    /// Inserts `part` in its place; returns its index.
    pub(super) fn insert(&mut self, part: Box<dyn SummaryPart>) -> usize {
        let at = self
            .0
            .iter()
            .position(|p| p.position() > part.position())
            .unwrap_or(self.0.len());
        self.0.insert(at, part);
        at
    }

    /// Every part.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &dyn SummaryPart> {
        self.0.iter().map(|p| &**p)
    }
}

impl Clone for SummaryParts {
    fn clone(&self) -> Self {
        SummaryParts(self.0.iter().map(|p| p.clone_box()).collect())
    }
}

impl fmt::Debug for SummaryParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl PartialEq for SummaryParts {
    /// Equal when every part that holds something has an equal part on the other side
    /// (in any order: a backend may hand the fields back in another order).
    fn eq(&self, other: &Self) -> bool {
        let held = |parts: &SummaryParts| parts.0.iter().filter(|p| !p.is_default()).count();
        held(self) == held(other)
            && self
                .0
                .iter()
                .filter(|p| !p.is_default())
                .all(|mine| other.0.iter().any(|theirs| mine.eq_dyn(&**theirs)))
    }
}

impl Serialize for SummaryParts {
    /// Every part's fields, flat, part after part.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        let mut map = s.serialize_map(None)?;
        for part in &self.0 {
            let fields = erased_serde::serialize(&**part, serde_json::value::Serializer)
                .map_err(S::Error::custom)?;
            let Value::Object(fields) = fields else {
                return Err(S::Error::custom(
                    "a summary part must serialize as an object",
                ));
            };
            for (key, value) in fields {
                map.serialize_entry(&key, &value)?;
            }
        }
        map.end()
    }
}
