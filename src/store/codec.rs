//! The bytes of an `events` row: compact binary (postcard) for the rows this build writes,
//! JSON for rows written by earlier builds.
//!
//! Owns: how an [`Event`] becomes a row and back. A binary row starts with
//! [`BINARY_ROW_V1`]; a JSON row starts with `{`. Must not: change what an event is —
//! both encodings decode to the same [`Event`], whose canonical JSON (and so its hash and
//! every export) does not depend on how the row was stored.
//!
//! Why binary: a rebuild decodes every event of a session. The JSON envelope spells out
//! every field name, hex hashes and the call's arguments as text to be parsed; the binary
//! row is less than half the size and its strings are read by copying.

use super::StoreError;
use crate::event::{
    CallRecord, Event, EventId, Payload, RawArguments, SequentialThought, SessionId, SessionKind,
    ThinkThought,
};
use serde::{Deserialize, Serialize};
use ulid::Ulid;

/// First byte of a binary row (format version 1). JSON rows start with `{` (0x7B).
pub const BINARY_ROW_V1: u8 = 0x01;

/// An event as stored in a binary row; strings borrow from the row.
#[derive(Serialize, Deserialize)]
struct StoredEvent<'a> {
    id: u128,
    session: u128,
    seq: u64,
    at: u64,
    schema: u32,
    #[serde(borrow)]
    payload: StoredPayload<'a>,
    /// 32 bytes each. postcard writes a slice of `u8` as its length and then the bytes,
    /// which is also its byte-string form, so they are read back by borrowing instead of
    /// byte by byte (the codec tests round-trip every payload through this).
    #[serde(borrow)]
    prev: &'a [u8],
    #[serde(borrow)]
    hash: &'a [u8],
}

/// [`Payload`] field by field. Variants are only ever appended (postcard stores the
/// variant's position).
#[derive(Serialize, Deserialize)]
enum StoredPayload<'a> {
    SessionStarted {
        kind: &'a str,
        title: &'a str,
        #[serde(borrow)]
        aliases: Vec<&'a str>,
    },
    ThoughtRecorded {
        thought: &'a str,
        thought_number: u64,
        total_thoughts: u64,
        next_thought_needed: bool,
        is_revision: Option<bool>,
        revises_thought: Option<u64>,
        branch_from_thought: Option<u64>,
        #[serde(borrow)]
        branch_id: Option<&'a str>,
        needs_more_thoughts: Option<bool>,
        #[serde(borrow)]
        call: StoredCall<'a>,
    },
    ThinkRecorded {
        thread_purpose: &'a str,
        thought: &'a str,
        thought_index: u64,
        tool_recommendation: &'a str,
        left_to_be_done: &'a str,
        #[serde(borrow)]
        open_items: Vec<&'a str>,
        #[serde(borrow)]
        call: StoredCall<'a>,
    },
    SessionClosed {
        reason: &'a str,
    },
}

#[derive(Serialize, Deserialize)]
struct StoredCall<'a> {
    tool: &'a str,
    /// Compact JSON text, exactly as hashed.
    raw_arguments: &'a str,
    duration_us: u64,
}

/// The bytes of the row for `event`: binary when its hashes are canonical lowercase hex
/// (always, for events this build or an import wrote), JSON otherwise.
pub fn encode_event(event: &Event) -> Vec<u8> {
    let (Some(prev), Some(hash)) = (hex_to_bytes(&event.prev), hex_to_bytes(&event.hash)) else {
        return serde_json::to_vec(event).expect("events always serialize");
    };
    let stored = StoredEvent {
        id: event.id.0.0,
        session: event.session.0.0,
        seq: event.seq,
        at: event.at,
        schema: event.schema,
        payload: stored_payload(&event.payload),
        prev: &prev,
        hash: &hash,
    };
    let mut row = vec![BINARY_ROW_V1];
    postcard::to_io(&stored, &mut row).expect("writing to a Vec cannot fail");
    row
}

/// The event in a row of either encoding.
pub fn decode_event(row: &[u8]) -> Result<Event, StoreError> {
    decode_row(row, Fields::All)
}

/// A row of either encoding, building `fields` of a binary one (JSON rows decode whole).
fn decode_row(row: &[u8], fields: Fields) -> Result<Event, StoreError> {
    match row.first() {
        Some(&BINARY_ROW_V1) => {
            let stored: StoredEvent<'_> = postcard::from_bytes(&row[1..])
                .map_err(|e| StoreError::Corrupt(format!("event row: {e}")))?;
            build_event(stored, fields)
        }
        Some(b'{') => {
            serde_json::from_slice(row).map_err(|e| StoreError::Corrupt(format!("event: {e}")))
        }
        Some(other) => Err(StoreError::Corrupt(format!(
            "event row of unknown format (first byte 0x{other:02x})"
        ))),
        None => Err(StoreError::Corrupt("empty event row".into())),
    }
}

/// [`decode_event`] for a projection's fold: `prev` and `hash` are left empty and the
/// call's arguments `null` (a fold never reads them; skipping them is a third of a
/// rebuild). JSON rows decode whole.
pub fn decode_event_to_fold(row: &[u8]) -> Result<Event, StoreError> {
    decode_row(row, Fields::ToFold)
}

/// How much of a stored event to build.
#[derive(Clone, Copy, PartialEq)]
enum Fields {
    All,
    ToFold,
}

fn stored_payload(payload: &Payload) -> StoredPayload<'_> {
    match payload {
        Payload::SessionStarted {
            kind,
            title,
            aliases,
        } => StoredPayload::SessionStarted {
            kind: kind.as_str(),
            title,
            aliases: aliases.iter().map(String::as_str).collect(),
        },
        Payload::ThoughtRecorded { thought, call } => StoredPayload::ThoughtRecorded {
            thought: &thought.thought,
            thought_number: thought.thought_number,
            total_thoughts: thought.total_thoughts,
            next_thought_needed: thought.next_thought_needed,
            is_revision: thought.is_revision,
            revises_thought: thought.revises_thought,
            branch_from_thought: thought.branch_from_thought,
            branch_id: thought.branch_id.as_deref(),
            needs_more_thoughts: thought.needs_more_thoughts,
            call: stored_call(call),
        },
        Payload::ThinkRecorded { thought, call } => StoredPayload::ThinkRecorded {
            thread_purpose: &thought.thread_purpose,
            thought: &thought.thought,
            thought_index: thought.thought_index,
            tool_recommendation: &thought.tool_recommendation,
            left_to_be_done: &thought.left_to_be_done,
            open_items: thought.open_items.iter().map(String::as_str).collect(),
            call: stored_call(call),
        },
        Payload::SessionClosed { reason } => StoredPayload::SessionClosed { reason },
    }
}

fn stored_call(call: &CallRecord) -> StoredCall<'_> {
    StoredCall {
        tool: &call.tool,
        raw_arguments: call.raw_arguments.as_json(),
        duration_us: call.duration_us,
    }
}

fn build_event(stored: StoredEvent<'_>, fields: Fields) -> Result<Event, StoreError> {
    let payload = match stored.payload {
        StoredPayload::SessionStarted {
            kind,
            title,
            aliases,
        } => Payload::SessionStarted {
            kind: SessionKind::parse(kind)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown session kind {kind:?}")))?,
            title: title.to_string(),
            aliases: aliases.into_iter().map(str::to_string).collect(),
        },
        StoredPayload::ThoughtRecorded {
            thought,
            thought_number,
            total_thoughts,
            next_thought_needed,
            is_revision,
            revises_thought,
            branch_from_thought,
            branch_id,
            needs_more_thoughts,
            call,
        } => Payload::ThoughtRecorded {
            thought: SequentialThought {
                thought: thought.to_string(),
                thought_number,
                total_thoughts,
                next_thought_needed,
                is_revision,
                revises_thought,
                branch_from_thought,
                branch_id: branch_id.map(str::to_string),
                needs_more_thoughts,
            },
            call: call_from(call, fields)?,
        },
        StoredPayload::ThinkRecorded {
            thread_purpose,
            thought,
            thought_index,
            tool_recommendation,
            left_to_be_done,
            open_items,
            call,
        } => Payload::ThinkRecorded {
            thought: ThinkThought {
                thread_purpose: thread_purpose.to_string(),
                thought: thought.to_string(),
                thought_index,
                tool_recommendation: tool_recommendation.to_string(),
                left_to_be_done: left_to_be_done.to_string(),
                open_items: open_items.into_iter().map(str::to_string).collect(),
            },
            call: call_from(call, fields)?,
        },
        StoredPayload::SessionClosed { reason } => Payload::SessionClosed {
            reason: reason.to_string(),
        },
    };
    Ok(Event {
        id: EventId(Ulid(stored.id)),
        session: SessionId(Ulid(stored.session)),
        seq: stored.seq,
        at: stored.at,
        schema: stored.schema,
        payload,
        prev: hex_unless_to_fold(stored.prev, fields)?,
        hash: hex_unless_to_fold(stored.hash, fields)?,
    })
}

fn hex_unless_to_fold(bytes: &[u8], fields: Fields) -> Result<String, StoreError> {
    let bytes: &[u8; 32] = bytes
        .try_into()
        .map_err(|_| StoreError::Corrupt(format!("a hash of {} bytes", bytes.len())))?;
    Ok(match fields {
        Fields::All => bytes_to_hex(bytes),
        Fields::ToFold => String::new(),
    })
}

fn call_from(call: StoredCall<'_>, fields: Fields) -> Result<CallRecord, StoreError> {
    let raw_arguments = match fields {
        Fields::All => RawArguments::from_json(call.raw_arguments.to_string())
            .map_err(|e| StoreError::Corrupt(format!("call arguments: {e}")))?,
        Fields::ToFold => RawArguments::null(),
    };
    Ok(CallRecord {
        tool: call.tool.to_string(),
        raw_arguments,
        duration_us: call.duration_us,
    })
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// 64 lowercase hex digits as 32 bytes; anything else is `None` (kept as JSON then, so
/// the text round-trips exactly).
fn hex_to_bytes(text: &str) -> Option<[u8; 32]> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let text = text.as_bytes();
    if text.len() != 64 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(bytes)
}

fn bytes_to_hex(bytes: &[u8; 32]) -> String {
    let mut text = String::with_capacity(64);
    for byte in bytes {
        text.push(HEX_DIGITS[(byte >> 4) as usize] as char);
        text.push(HEX_DIGITS[(byte & 0x0f) as usize] as char);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{GENESIS_HASH, event_hash};

    fn events() -> Vec<Event> {
        let session = SessionId::generate();
        let payloads = vec![
            Payload::SessionStarted {
                kind: SessionKind::Thinking,
                title: "codec \u{0} \u{202e} \"quoted\"".into(),
                aliases: vec!["alias-1".into()],
            },
            Payload::ThoughtRecorded {
                thought: SequentialThought {
                    thought: "line\r\nnext \u{200b} 🧠".into(),
                    thought_number: 2,
                    total_thoughts: 5,
                    next_thought_needed: true,
                    is_revision: Some(false),
                    revises_thought: None,
                    branch_from_thought: Some(1),
                    branch_id: Some("b".into()),
                    needs_more_thoughts: None,
                },
                call: CallRecord {
                    tool: "sequential_thinking".into(),
                    raw_arguments: serde_json::json!({"thought": "x", "n": [1, 2.5, null]}).into(),
                    duration_us: 17,
                },
            },
            Payload::ThinkRecorded {
                thought: ThinkThought {
                    thread_purpose: "p".into(),
                    thought: "t".into(),
                    thought_index: 1,
                    tool_recommendation: "None".into(),
                    left_to_be_done: "a; b".into(),
                    open_items: vec!["a".into(), "b".into()],
                },
                call: CallRecord {
                    tool: "think".into(),
                    raw_arguments: serde_json::json!({}).into(),
                    duration_us: 0,
                },
            },
            Payload::SessionClosed {
                reason: String::new(),
            },
        ];
        let mut prev = GENESIS_HASH.to_string();
        payloads
            .into_iter()
            .enumerate()
            .map(|(i, payload)| {
                let id = EventId::generate();
                let seq = i as u64 + 1;
                let hash = event_hash(&prev, &id, &session, seq, 9, 1, &payload);
                Event {
                    id,
                    session,
                    seq,
                    at: 9,
                    schema: 1,
                    payload,
                    prev: std::mem::replace(&mut prev, hash.clone()),
                    hash,
                }
            })
            .collect()
    }

    #[test]
    fn binary_rows_round_trip_every_payload_and_keep_the_hash() {
        for event in events() {
            let row = encode_event(&event);
            assert_eq!(row[0], BINARY_ROW_V1);
            let back = decode_event(&row).unwrap();
            assert_eq!(back, event);
            assert_eq!(
                serde_json::to_vec(&back).unwrap(),
                serde_json::to_vec(&event).unwrap()
            );
            assert_eq!(back.computed_hash(), event.hash);
        }
    }

    #[test]
    fn the_fold_decode_keeps_everything_a_projection_reads() {
        let events = events();
        let full = crate::projection::tree::ThoughtTree::build(events[0].session, events.clone());
        let light = crate::projection::tree::ThoughtTree::build(
            events[0].session,
            events
                .iter()
                .map(|e| decode_event_to_fold(&encode_event(e)).unwrap()),
        );
        assert_eq!(light.to_json(), full.to_json());
        let folded = decode_event_to_fold(&encode_event(&events[1])).unwrap();
        assert!(folded.prev.is_empty() && folded.hash.is_empty());
    }

    #[test]
    fn json_rows_written_by_earlier_builds_still_decode() {
        for event in events() {
            let row = serde_json::to_vec(&event).unwrap();
            assert_eq!(decode_event(&row).unwrap(), event);
        }
    }

    #[test]
    fn a_hash_that_is_not_canonical_hex_is_kept_as_json() {
        let mut event = events().remove(0);
        event.prev = event.prev.to_uppercase().replace('0', "A");
        let row = encode_event(&event);
        assert_eq!(row[0], b'{');
        assert_eq!(decode_event(&row).unwrap(), event);
    }

    #[test]
    fn damaged_rows_are_corrupt_not_a_panic() {
        let row = encode_event(&events().remove(1));
        for cut in 0..row.len() {
            assert!(decode_event(&row[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode_event(&[0x7f, 1, 2]).is_err());
    }
}
