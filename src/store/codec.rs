//! The bytes of an `events` row: compact binary (postcard) for the rows this build writes,
//! JSON for rows written by earlier builds.
//!
//! Owns: how an [`Event`] becomes a row and back (also a row found among other bytes, with
//! its length: [`decode_event_at`], for salvage). A binary row this build writes starts
//! with [`BINARY_ROW_V2`] (core payloads inline, a family's payload as its tag and its
//! family codec's bytes), or with [`BINARY_ROW_ACTOR`] when the event has an actor (the
//! actor, then the same body): an event without one is stored exactly as before, and a
//! build that predates actors refuses an actor's row as "unknown format" instead of
//! dropping the name. Rows of earlier builds start with [`BINARY_ROW_V1`] or `{` (JSON)
//! and still decode. Must not: change what an event is — every encoding decodes
//! to the same [`Event`], whose canonical JSON (and so its hash and every export) does not
//! depend on how the row was stored — or know a family: a family payload's bytes go to
//! the codec that claims its tag among the families the caller hands in (a `0x01` row's family variants to the codec that
//! claims them, [`crate::event::PayloadCodec::decode_closed_enum_variant`]).
//!
//! Why binary: a rebuild decodes every event of a session. The JSON envelope spells out
//! every field name, hex hashes and the call's arguments as text to be parsed; the binary
//! row is less than half the size and its strings are read by copying.

use super::StoreError;
use crate::event::{DecodeFields, Event, EventId, Families, Payload, SessionId};
use serde::{Deserialize, Serialize};
use ulid::Ulid;

/// First byte of a binary row written before tool families had their own codecs: a
/// closed enum of the four payloads there were then. Read, never written.
pub(crate) const BINARY_ROW_V1: u8 = 0x01;

/// First byte of a binary row (format version 2): core payloads inline, a family's
/// payload as its tag and the bytes of its family's codec. JSON rows start with `{`.
pub(crate) const BINARY_ROW_V2: u8 = 0x02;

/// First byte of a binary row of an event with an actor: the actor (a postcard string),
/// then the body of a [`BINARY_ROW_V2`] row. Builds before actors existed stop at this
/// byte ("event row of unknown format") rather than read the event without its actor.
pub(crate) const BINARY_ROW_ACTOR: u8 = 0x03;

/// An event as stored in a binary row; strings borrow from the row.
#[derive(Serialize, Deserialize)]
struct StoredEvent<'a, P> {
    id: u128,
    session: u128,
    seq: u64,
    at: u64,
    schema: u32,
    payload: P,
    /// 32 bytes each. postcard writes a slice of `u8` as its length and then the bytes,
    /// which is also its byte-string form, so they are written and read back as one
    /// string of bytes instead of byte by byte ([`bytes_whole`]; the codec tests
    /// round-trip every payload through this).
    #[serde(borrow, serialize_with = "bytes_whole")]
    prev: &'a [u8],
    #[serde(borrow, serialize_with = "bytes_whole")]
    hash: &'a [u8],
}

/// The payload of a version 2 row. Variants are only ever appended (postcard stores the
/// variant's position).
#[derive(Serialize, Deserialize)]
enum StoredPayload<'a> {
    SessionStarted {
        kind: &'a str,
        title: &'a str,
        #[serde(borrow)]
        aliases: Vec<&'a str>,
    },
    SessionClosed {
        reason: &'a str,
    },
    /// A family's payload: its tag and what its codec wrote.
    Family {
        tag: &'a str,
        #[serde(borrow, serialize_with = "bytes_whole")]
        bytes: &'a [u8],
    },
    /// A family payload upcast from an older schema, kept as the JSON it was written as.
    Written {
        json: &'a str,
    },
}

/// The envelope fields before the payload, in every binary row.
#[derive(Deserialize)]
struct StoredEnvelopeHead {
    id: u128,
    session: u128,
    seq: u64,
    at: u64,
    schema: u32,
}

/// The hashes after the payload, in every binary row.
#[derive(Deserialize)]
struct StoredHashes<'a> {
    #[serde(borrow)]
    prev: &'a [u8],
    #[serde(borrow)]
    hash: &'a [u8],
}

/// A version 1 row's payload is a closed enum (frozen): variant 0 is `session_started`,
/// variant 3 `session_closed`; the others belong to the family codec that claims them.
const V1_SESSION_STARTED: u32 = 0;
/// See [`V1_SESSION_STARTED`].
const V1_SESSION_CLOSED: u32 = 3;

/// `session_started` in a version 1 row.
#[derive(Deserialize)]
struct StoredStartedV1<'a> {
    kind: &'a str,
    title: &'a str,
    #[serde(borrow)]
    aliases: Vec<&'a str>,
}

/// Writes bytes as one byte string. postcard writes a sequence of `u8` as its length and
/// then each byte, which is the same bytes as its byte-string form: this is the same row,
/// written with one copy instead of a serializer call per byte.
pub(crate) fn bytes_whole<S: serde::Serializer>(
    bytes: &[u8],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(bytes)
}

/// Bytes a binary row takes besides its payload and actor (marker, ids, seq, time, schema,
/// prev, hash, the payload's tag and lengths), rounded up: the row is written into one
/// allocation of that much more than its payload, never grown.
const ROW_FIXED_BYTES: usize = 192;

/// Bytes set aside for a family's own encoding of its payload before it writes: most
/// thoughts fit, so the buffer is seldom grown.
const FAMILY_BYTES_CAPACITY: usize = 512;

/// The bytes of the row for `event`: binary when its hashes are canonical lowercase hex
/// (always, for events this build or an import wrote), JSON otherwise.
pub(crate) fn encode_event(event: &Event) -> Vec<u8> {
    let (Some(prev), Some(hash)) = (hex_to_bytes(&event.prev), hex_to_bytes(&event.hash)) else {
        return serde_json::to_vec(event).expect("events always serialize");
    };
    let mut family_bytes = Vec::with_capacity(FAMILY_BYTES_CAPACITY);
    let written_json;
    let payload = match &event.payload {
        Payload::SessionStarted {
            kind,
            title,
            aliases,
        } => StoredPayload::SessionStarted {
            kind: kind.as_str(),
            title,
            aliases: aliases.iter().map(String::as_str).collect(),
        },
        Payload::SessionClosed { reason } => StoredPayload::SessionClosed { reason },
        Payload::Family(family) => match family.written() {
            Some(written) => {
                written_json = written.get();
                StoredPayload::Written { json: written_json }
            }
            None => {
                family.event().encode(&mut family_bytes);
                StoredPayload::Family {
                    tag: family.event().type_name(),
                    bytes: &family_bytes,
                }
            }
        },
    };
    let stored = StoredEvent {
        id: event.id.0.0,
        session: event.session.0.0,
        seq: event.seq,
        at: event.at,
        schema: event.schema,
        payload,
        prev: prev.as_bytes(),
        hash: hash.as_bytes(),
    };
    let payload_bytes = match &stored.payload {
        StoredPayload::Written { json } => json.len(),
        StoredPayload::Family { bytes, .. } => bytes.len(),
        StoredPayload::SessionStarted { title, aliases, .. } => {
            title.len() + aliases.iter().map(|alias| alias.len() + 1).sum::<usize>()
        }
        StoredPayload::SessionClosed { reason } => reason.len(),
    };
    let actor_bytes = event.actor.as_ref().map_or(0, |actor| actor.as_str().len());
    let mut row = Vec::with_capacity(ROW_FIXED_BYTES + payload_bytes + actor_bytes);
    match &event.actor {
        None => row.push(BINARY_ROW_V2),
        Some(actor) => {
            row.push(BINARY_ROW_ACTOR);
            postcard::to_io(actor.as_str(), &mut row).expect("writing to a Vec cannot fail");
        }
    }
    postcard::to_io(&stored, &mut row).expect("writing to a Vec cannot fail");
    row
}

/// The event in a row of any encoding, its payload read with `families`.
pub(crate) fn decode_event(row: &[u8], families: &Families) -> Result<Event, StoreError> {
    decode_row(row, DecodeFields::All, families)
}

/// [`decode_event`] for a projection's fold: `prev` and `hash` are left empty and a
/// family may leave what no fold reads (a call's arguments are `null`; skipping them is a
/// third of a rebuild). JSON rows decode whole.
pub(crate) fn decode_event_to_fold(row: &[u8], families: &Families) -> Result<Event, StoreError> {
    decode_row(row, DecodeFields::ToFold, families)
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("event row: {what}"))
}

/// A row of any encoding, building `fields` of a binary one (JSON rows decode whole).
fn decode_row(row: &[u8], fields: DecodeFields, families: &Families) -> Result<Event, StoreError> {
    match row.first() {
        Some(b'{') => {
            Event::from_json(row, families).map_err(|e| StoreError::Corrupt(format!("event: {e}")))
        }
        _ => decode_binary(row, fields, families).map(|(event, _)| event),
    }
}

/// The event in the row that starts `bytes`, whatever follows it, and the row's length
/// in bytes: for a scan of bytes that hold rows among other data (`store::salvage`). A
/// JSON row is its first JSON value.
pub(crate) fn decode_event_at(
    bytes: &[u8],
    families: &Families,
) -> Result<(Event, usize), StoreError> {
    if bytes.first() == Some(&b'{') {
        return match Event::from_json_prefix(bytes, families) {
            Some(Ok(found)) => Ok(found),
            Some(Err(e)) => Err(StoreError::Corrupt(format!("event: {e}"))),
            None => Err(StoreError::Corrupt("empty event row".into())),
        };
    }
    let (event, rest) = decode_binary(bytes, DecodeFields::All, families)?;
    Ok((event, bytes.len() - rest.len()))
}

/// A binary row at the start of `row`, building `fields`: the event and the bytes after
/// the row.
fn decode_binary<'r>(
    row: &'r [u8],
    fields: DecodeFields,
    families: &Families,
) -> Result<(Event, &'r [u8]), StoreError> {
    match row.first() {
        Some(&BINARY_ROW_V2) => decode_v2(&row[1..], fields, families),
        Some(&BINARY_ROW_ACTOR) => {
            let (actor, body): (&str, _) = postcard::take_from_bytes(&row[1..]).map_err(corrupt)?;
            let (mut event, rest) = decode_v2(body, fields, families)?;
            event.actor = Some(actor.to_string());
            Ok((event, rest))
        }
        Some(&BINARY_ROW_V1) => decode_v1(&row[1..], fields, families),
        Some(other) => Err(StoreError::Corrupt(format!(
            "event row of unknown format (first byte 0x{other:02x})"
        ))),
        None => Err(StoreError::Corrupt("empty event row".into())),
    }
}

/// The body of a version 2 row (after its first byte), building `fields`; and the bytes
/// after it.
fn decode_v2<'r>(
    body: &'r [u8],
    fields: DecodeFields,
    families: &Families,
) -> Result<(Event, &'r [u8]), StoreError> {
    let (stored, rest): (StoredEvent<'_, StoredPayload<'_>>, _) =
        postcard::take_from_bytes(body).map_err(corrupt)?;
    let (stored, payload) = stored.split();
    let payload = match payload {
        StoredPayload::SessionStarted {
            kind,
            title,
            aliases,
        } => started(kind, title, aliases, families)?,
        StoredPayload::SessionClosed { reason } => Payload::SessionClosed {
            reason: reason.to_string(),
        },
        StoredPayload::Family { tag, bytes } => {
            let codec = families.codec_for(tag).ok_or_else(|| {
                corrupt(format_args!("unknown event type {tag:?} (another build?)"))
            })?;
            Payload::Family(
                codec
                    .decode(tag, stored.schema, bytes, fields)
                    .map_err(corrupt)?,
            )
        }
        StoredPayload::Written { json } => {
            Payload::from_json(stored.schema, json, families).map_err(corrupt)?
        }
    };
    Ok((stored.build(payload, fields)?, rest))
}

/// A version 1 row (after its first byte): the envelope, the closed enum's variant and
/// its fields, the hashes, read one after the other; and the bytes after them.
fn decode_v1<'r>(
    row: &'r [u8],
    fields: DecodeFields,
    families: &Families,
) -> Result<(Event, &'r [u8]), StoreError> {
    let (head, rest): (StoredEnvelopeHead, _) = postcard::take_from_bytes(row).map_err(corrupt)?;
    let (variant, rest): (u32, _) = postcard::take_from_bytes(rest).map_err(corrupt)?;
    let (payload, rest) = match variant {
        V1_SESSION_STARTED => {
            let (s, rest): (StoredStartedV1<'_>, _) =
                postcard::take_from_bytes(rest).map_err(corrupt)?;
            (started(s.kind, s.title, s.aliases, families)?, rest)
        }
        V1_SESSION_CLOSED => {
            let (reason, rest): (&str, _) = postcard::take_from_bytes(rest).map_err(corrupt)?;
            let reason = reason.to_string();
            (Payload::SessionClosed { reason }, rest)
        }
        _ => {
            let (payload, rest) = families
                .codecs()
                .iter()
                .find_map(|codec| codec.decode_closed_enum_variant(variant, rest, fields))
                .ok_or_else(|| corrupt(postcard::Error::DeserializeBadEnum))?
                .map_err(corrupt)?;
            (Payload::Family(payload), rest)
        }
    };
    let (hashes, rest): (StoredHashes<'_>, _) = postcard::take_from_bytes(rest).map_err(corrupt)?;
    let envelope = StoredEvent {
        id: head.id,
        session: head.session,
        seq: head.seq,
        at: head.at,
        schema: head.schema,
        payload: (),
        prev: hashes.prev,
        hash: hashes.hash,
    };
    Ok((envelope.build(payload, fields)?, rest))
}

fn started(
    kind: &str,
    title: &str,
    aliases: Vec<&str>,
    families: &Families,
) -> Result<Payload, StoreError> {
    Ok(Payload::SessionStarted {
        kind: families
            .kind_named(kind)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown session kind {kind:?}")))?,
        title: title.to_string(),
        aliases: aliases.into_iter().map(str::to_string).collect(),
    })
}

impl<'a, P> StoredEvent<'a, P> {
    /// The envelope without its payload, and the payload.
    fn split(self) -> (StoredEvent<'a, ()>, P) {
        let StoredEvent {
            id,
            session,
            seq,
            at,
            schema,
            payload,
            prev,
            hash,
        } = self;
        let envelope = StoredEvent {
            id,
            session,
            seq,
            at,
            schema,
            payload: (),
            prev,
            hash,
        };
        (envelope, payload)
    }
}

impl StoredEvent<'_, ()> {
    fn build(self, payload: Payload, fields: DecodeFields) -> Result<Event, StoreError> {
        Ok(Event {
            id: EventId(Ulid(self.id)),
            session: SessionId(Ulid(self.session)),
            seq: self.seq,
            at: self.at,
            schema: self.schema,
            actor: None,
            payload,
            prev: hex_unless_to_fold(self.prev, fields)?,
            hash: hex_unless_to_fold(self.hash, fields)?,
        })
    }
}

fn hex_unless_to_fold(bytes: &[u8], fields: DecodeFields) -> Result<String, StoreError> {
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| StoreError::Corrupt(format!("a hash of {} bytes", bytes.len())))?;
    Ok(match fields {
        DecodeFields::All => blake3::Hash::from_bytes(bytes).to_hex().to_string(),
        DecodeFields::ToFold => String::new(),
    })
}

/// 64 lowercase hex digits as a hash; anything else is `None` (kept as JSON then, so the
/// text round-trips exactly).
fn hex_to_bytes(text: &str) -> Option<blake3::Hash> {
    // Lowercase only: a row stores the bytes, and decoding writes them back lowercase.
    // One pass over the digits (this runs twice for every event written).
    fn nibble(digit: u8) -> Option<u8> {
        match digit {
            b'0'..=b'9' => Some(digit - b'0'),
            b'a'..=b'f' => Some(digit - b'a' + 10),
            _ => None,
        }
    }
    let digits = text.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(blake3::Hash::from_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{CallRecord, GENESIS_HASH, SessionKind, event_hash};

    /// [`super::decode_event`] with the product's families.
    fn decode_event(row: &[u8]) -> Result<Event, StoreError> {
        super::decode_event(row, &crate::tools::families())
    }

    /// [`super::decode_event_to_fold`] with the product's families.
    fn decode_event_to_fold(row: &[u8]) -> Result<Event, StoreError> {
        super::decode_event_to_fold(row, &crate::tools::families())
    }
    use crate::tools::thinking::payload::{SequentialThought, ThinkThought, ThinkingEvent};

    /// [`bytes_whole`] writes what postcard writes for the bytes one by one: rows written
    /// before it and after it are the same bytes.
    #[test]
    fn bytes_written_whole_are_the_bytes_written_one_by_one() {
        #[derive(Serialize)]
        struct OneByOne<'a>(&'a [u8]);
        #[derive(Serialize)]
        struct Whole<'a>(#[serde(serialize_with = "bytes_whole")] &'a [u8]);
        for len in [0usize, 1, 32, 127, 128, 300, 16_383, 16_384, 70_000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 256) as u8).collect();
            assert_eq!(
                postcard::to_stdvec(&Whole(&bytes)).unwrap(),
                postcard::to_stdvec(&OneByOne(&bytes)).unwrap(),
                "{len} bytes"
            );
        }
    }

    fn events() -> Vec<Event> {
        let session = SessionId::generate();
        let payloads = vec![
            Payload::SessionStarted {
                kind: SessionKind::THINKING,
                title: "codec \u{0} \u{202e} \"quoted\"".into(),
                aliases: vec!["alias-1".into()],
            },
            ThinkingEvent::ThoughtRecorded {
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
            }
            .into(),
            ThinkingEvent::ThinkRecorded {
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
            }
            .into(),
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
                    actor: None,
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
            assert_eq!(row[0], BINARY_ROW_V2);
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
        let full = crate::projection::tree::ThoughtTree::build(
            events[0].session,
            events.clone(),
            &crate::tools::folds(),
        );
        let light = crate::projection::tree::ThoughtTree::build(
            events[0].session,
            events
                .iter()
                .map(|e| decode_event_to_fold(&encode_event(e)).unwrap()),
            &crate::tools::folds(),
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
        let event = events().remove(0);
        // A hash with letters in it, changed so it is no longer 64 lowercase hex digits.
        let hex = event.hash.clone();
        assert!(hex.contains(|c: char| c.is_ascii_lowercase()), "{hex}");
        for prev in [
            event.prev.to_uppercase().replace('0', "A"),
            hex.replacen(|c: char| c.is_ascii_lowercase(), "B", 1),
            hex.replacen(char::is_alphanumeric, "g", 1),
            hex[1..].to_string(),
            format!("{hex}0"),
        ] {
            let event = Event {
                prev,
                ..event.clone()
            };
            let row = encode_event(&event);
            assert_eq!(row[0], b'{', "{}", event.prev);
            assert_eq!(decode_event(&row).unwrap(), event);
        }
    }

    #[test]
    fn an_actor_gets_its_own_row_format_and_no_actor_the_old_one() {
        for mut event in events() {
            let plain = encode_event(&event);
            assert_eq!(plain[0], BINARY_ROW_V2);
            event.actor = Some("alice@example.com".into());
            event.hash = event.computed_hash();
            let row = encode_event(&event);
            assert_eq!(row[0], BINARY_ROW_ACTOR);
            // The body after the actor is the row the event had without one (but its hash).
            let back = decode_event(&row).unwrap();
            assert_eq!(back, event);
            assert_eq!(back.computed_hash(), event.hash);
            assert_eq!(
                decode_event_to_fold(&row).unwrap().actor.as_deref(),
                Some("alice@example.com")
            );
            for cut in 0..row.len() {
                assert!(decode_event(&row[..cut]).is_err(), "cut at {cut}");
            }
        }
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
