//! Test fixtures shared by the projection and export unit tests: events and trees built
//! by hand (hashes are not checked by folds or renderers). Compiled only for tests.

use crate::event::{CallRecord, Event, EventId, GENESIS_HASH, Payload, SessionId, SessionKind};
use crate::projection::tree::ThoughtTree;
use crate::tools::thinking::{SequentialThought, ThinkingEvent};

/// An event of `session` at `seq`, timed one second per seq after a fixed instant.
pub(crate) fn session_event(session: SessionId, seq: u64, payload: Payload) -> Event {
    Event {
        id: EventId::generate(),
        session,
        seq,
        at: 1_700_000_000_000 + seq * 1_000,
        schema: 1,
        actor: None,
        payload,
        prev: GENESIS_HASH.into(),
        hash: GENESIS_HASH.into(),
    }
}

pub(crate) fn call(tool: &str) -> CallRecord {
    CallRecord {
        tool: tool.into(),
        raw_arguments: serde_json::json!({}).into(),
        duration_us: 1,
    }
}

/// A plain main-line thought.
pub(crate) fn seq_thought(text: &str, number: u64, total: u64) -> SequentialThought {
    SequentialThought {
        thought: text.into(),
        thought_number: number,
        total_thoughts: total,
        next_thought_needed: true,
        is_revision: None,
        revises_thought: None,
        branch_from_thought: None,
        branch_id: None,
        needs_more_thoughts: None,
    }
}

/// `thought` as recorded by `sequentialthinking`.
pub(crate) fn recorded(thought: SequentialThought) -> Payload {
    ThinkingEvent::ThoughtRecorded {
        thought,
        call: call("sequentialthinking"),
    }
    .into()
}

/// A tree of one session: `session_started` (with `aliases`), then `payloads` in order.
pub(crate) fn tree_with_aliases(
    title: &str,
    kind: SessionKind,
    aliases: Vec<String>,
    payloads: Vec<Payload>,
) -> ThoughtTree {
    let session = SessionId::generate();
    let mut events = vec![session_event(
        session,
        1,
        Payload::SessionStarted {
            kind,
            title: title.into(),
            aliases,
        },
    )];
    for (i, payload) in payloads.into_iter().enumerate() {
        events.push(session_event(session, i as u64 + 2, payload));
    }
    ThoughtTree::build(session, events, &crate::tools::folds())
}

/// [`tree_with_aliases`] without aliases.
pub(crate) fn tree_of(title: &str, kind: SessionKind, payloads: Vec<Payload>) -> ThoughtTree {
    tree_with_aliases(title, kind, Vec::new(), payloads)
}
