//! The session summary: a small fold kept beside the session head in the store.
//!
//! Owns: [`SessionSummary`], the counts and branch list every answer of the thinking tools
//! needs, folded one event at a time (each family folds its own events into it through
//! [`crate::event::FamilyEvent::summarize`]). The store keeps the folded summary of each session
//! next to its head so a tool reads one row instead of replaying the log. Must not: do I/O
//! or depend on anything but the events folded into it.

use crate::event::{Event, Payload, SessionKind};
use crate::projection::family::{SummaryPart, SummaryParts};
use serde::{Deserialize, Serialize};

/// Version of what [`SessionSummary`] folds. Raise it when a field is added or a fold
/// rule changes: the store then reports summaries stored by an earlier build as stale
/// (`verify`), and a rebuild (`verify --rebuild`) folds them again. Heads stored before
/// summaries carried a version read as version 1.
pub const SUMMARY_VERSION: u32 = 1;

fn summary_version_one() -> u32 {
    1
}

/// Counts and state of one session after the events folded into it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
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
    /// ([`crate::projection::family::SummaryPart::position`]). Only events no earlier build wrote set them,
    /// and they are written as they always were: every summary an earlier build stored
    /// folds the same today, so [`SUMMARY_VERSION`] stays.
    #[serde(flatten)]
    pub parts: SummaryParts,
}

impl SessionSummary {
    /// The summary right after a `session_started` event; `None` for any other event.
    pub fn start(event: &Event) -> Option<Self> {
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
    pub fn apply(&mut self, event: &Event) {
        let new_branch = event
            .payload
            .branch()
            .is_some_and(|id| !self.branches.iter().any(|known| known == id));
        self.apply_known(event, new_branch);
    }

    /// [`SessionSummary::apply`] for a fold that already knows whether the event's branch
    /// is new (the thought tree indexes its branches; a session can have thousands).
    pub fn apply_known(&mut self, event: &Event, new_branch: bool) {
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
    pub fn status(&self) -> &'static str {
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
    pub fn part<T: SummaryPart>(&self) -> Option<&T> {
        self.parts.get()
    }

    /// The family part of type `T`, its default first if the summary has none.
    pub fn part_mut<T: SummaryPart + Clone + PartialEq + Default>(&mut self) -> &mut T {
        self.parts.get_or_default()
    }

    /// Adds what the families' parts show in a session list's row (model calls, their
    /// tokens and cost; branch nodes), after the row's own fields.
    pub fn add_list_row_fields(&self, row: &mut serde_json::Value) {
        if let Some(row) = row.as_object_mut() {
            for part in self.parts.iter() {
                part.list_row(row);
            }
        }
    }

    /// Whether a family closed `branch` to new thoughts.
    pub fn branch_closed(&self, branch: &str) -> bool {
        self.parts
            .iter()
            .any(|p| p.closed_branches().iter().any(|b| b == branch))
    }
}
