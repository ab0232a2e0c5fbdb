//! The event envelope and payloads: the one wire format of the ledger.
//!
//! Owns: [`Event`] (the envelope a store hands out), [`NewEvent`] (what a tool asks the
//! store to append), [`Payload`] (the tagged union of everything a tool can record) and the
//! hash chain ([`event_hash`]). Must not: touch redb or any I/O; payload variants are never
//! renamed or re-shaped without bumping [`SCHEMA_VERSION`] and adding an upcaster.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use ulid::Ulid;

/// Version of the payload format written by this build. Stored in every envelope so older
/// events can be upcast when the format changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Domain prefix of the event hash; the trailing version lets the hash change later.
const HASH_DOMAIN: &[u8] = b"reasoning-ledger/event-hash/v1\0";

/// `prev` of the first event of every session.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Identifier of a session: a ULID, written as its 26-character Crockford string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(#[serde(with = "ulid_string")] pub Ulid);

/// Identifier of an event: a ULID, globally unique, doubling as the idempotency key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EventId(#[serde(with = "ulid_string")] pub Ulid);

impl SessionId {
    pub fn generate() -> Self {
        SessionId(Ulid::generate())
    }
}

impl EventId {
    pub fn generate() -> Self {
        EventId(Ulid::generate())
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for SessionId {
    type Err = ulid::DecodeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ulid::from_string(s.trim()).map(SessionId)
    }
}

mod ulid_string {
    use serde::{Deserializer, Serializer};
    use ulid::Ulid;

    pub fn serialize<S: Serializer>(id: &Ulid, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&id.to_string())
    }

    /// Reads the string without allocating: ids are decoded for every event of a rebuild.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Ulid, D::Error> {
        struct UlidVisitor;
        impl serde::de::Visitor<'_> for UlidVisitor {
            type Value = Ulid;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a ULID string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Ulid, E> {
                Ulid::from_string(text).map_err(E::custom)
            }
        }
        d.deserialize_str(UlidVisitor)
    }
}

/// What kind of reasoning a session holds; decides which tools and projections apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    /// `sequentialthinking` thoughts.
    Thinking,
    /// A `think` thread.
    Think,
}

impl SessionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Thinking => "thinking",
            SessionKind::Think => "think",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "thinking" => Some(SessionKind::Thinking),
            "think" => Some(SessionKind::Think),
            _ => None,
        }
    }
}

/// A call's arguments as compact JSON text, kept verbatim: written and hashed exactly as a
/// [`Value`] would serialize, but read back without building the value tree (a rebuild
/// decodes every event and never looks inside the arguments).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawArguments(Cow<'static, RawValue>);

impl RawArguments {
    pub fn from_value(value: &Value) -> Self {
        RawArguments(Cow::Owned(
            serde_json::value::to_raw_value(value).expect("JSON values always serialize"),
        ))
    }

    /// `null`: what a projection's read path puts in place of arguments it never reads
    /// (borrowed, so a rebuild does not allocate it per event).
    pub fn null() -> Self {
        RawArguments(Cow::Borrowed(RawValue::NULL))
    }

    /// Parses compact JSON text (as [`RawArguments::as_json`] gives it).
    pub fn from_json(text: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text).map(|raw| RawArguments(Cow::Owned(raw)))
    }

    /// The arguments as compact JSON text.
    pub fn as_json(&self) -> &str {
        self.0.get()
    }

    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).expect("raw arguments are valid JSON")
    }
}

impl From<Value> for RawArguments {
    fn from(value: Value) -> Self {
        RawArguments::from_value(&value)
    }
}

impl PartialEq for RawArguments {
    /// Compact JSON of order-preserving values: equal texts ⇔ equal arguments.
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

/// The tool call that produced an event: kept so a session can be replayed call by call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// Tool name as the client called it (an alias stays an alias).
    pub tool: String,
    /// Arguments exactly as the client sent them, before coercion.
    pub raw_arguments: RawArguments,
    /// Time from receiving the call to handing its events to the store, in microseconds.
    pub duration_us: u64,
}

/// One `sequentialthinking` thought, with the values after coercion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SequentialThought {
    pub thought: String,
    pub thought_number: u64,
    pub total_thoughts: u64,
    pub next_thought_needed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_revision: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revises_thought: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_from_thought: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs_more_thoughts: Option<bool>,
}

impl SequentialThought {
    /// The branch this thought belongs to: recorded only when both a branch point ≥ 1 and a
    /// non-empty id are given (the reference server's rule).
    pub fn branch(&self) -> Option<(&str, u64)> {
        match (self.branch_from_thought, self.branch_id.as_deref()) {
            (Some(from), Some(id)) if from >= 1 && !id.is_empty() => Some((id, from)),
            _ => None,
        }
    }

    /// The thought this one revises, when it is a revision.
    pub fn revision_of(&self) -> Option<u64> {
        if self.is_revision == Some(true) || self.revises_thought.is_some() {
            self.revises_thought
        } else {
            None
        }
    }
}

/// One `think` thought.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThinkThought {
    pub thread_purpose: String,
    pub thought: String,
    pub thought_index: u64,
    /// As given; the default when absent is the string "None".
    pub tool_recommendation: String,
    /// As given; the default when absent is the string "None".
    pub left_to_be_done: String,
    /// `left_to_be_done` split into its open items.
    pub open_items: Vec<String>,
}

/// Everything the ledger records. Tagged by `"type"`; variants are never renamed.
///
/// Written by serde's derive (internally tagged, thoughts flattened); read through
/// [`PayloadWire`], a flat struct that decodes in one pass. The derived reader would buffer
/// every payload as an untyped tree first (tag plus `flatten`), which made rebuilding a
/// long session several times slower.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Payload {
    /// First event of every session.
    SessionStarted {
        kind: SessionKind,
        title: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        aliases: Vec<String>,
    },
    /// A `sequentialthinking` call.
    ThoughtRecorded {
        #[serde(flatten)]
        thought: SequentialThought,
        call: CallRecord,
    },
    /// A `think` call.
    ThinkRecorded {
        #[serde(flatten)]
        thought: ThinkThought,
        call: CallRecord,
    },
    /// The session was closed; later calls start a new one.
    SessionClosed { reason: String },
}

/// The `type` tags of [`Payload`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum PayloadType {
    SessionStarted,
    ThoughtRecorded,
    ThinkRecorded,
    SessionClosed,
}

/// Every field of every [`Payload`] variant, flat, as read from the wire. Field names are
/// shared only where the variants agree on their type (`thought`, `call`).
#[derive(Deserialize)]
struct PayloadWire {
    #[serde(rename = "type")]
    tag: PayloadType,
    kind: Option<SessionKind>,
    title: Option<String>,
    #[serde(default)]
    aliases: Vec<String>,
    thought: Option<String>,
    thought_number: Option<u64>,
    total_thoughts: Option<u64>,
    next_thought_needed: Option<bool>,
    is_revision: Option<bool>,
    revises_thought: Option<u64>,
    branch_from_thought: Option<u64>,
    branch_id: Option<String>,
    needs_more_thoughts: Option<bool>,
    thread_purpose: Option<String>,
    thought_index: Option<u64>,
    tool_recommendation: Option<String>,
    left_to_be_done: Option<String>,
    open_items: Option<Vec<String>>,
    call: Option<CallRecord>,
    reason: Option<String>,
}

impl PayloadWire {
    fn into_payload<E: serde::de::Error>(self) -> Result<Payload, E> {
        fn required<T, E: serde::de::Error>(value: Option<T>, field: &'static str) -> Result<T, E> {
            value.ok_or_else(|| E::missing_field(field))
        }
        Ok(match self.tag {
            PayloadType::SessionStarted => Payload::SessionStarted {
                kind: required(self.kind, "kind")?,
                title: required(self.title, "title")?,
                aliases: self.aliases,
            },
            PayloadType::ThoughtRecorded => Payload::ThoughtRecorded {
                thought: SequentialThought {
                    thought: required(self.thought, "thought")?,
                    thought_number: required(self.thought_number, "thought_number")?,
                    total_thoughts: required(self.total_thoughts, "total_thoughts")?,
                    next_thought_needed: required(self.next_thought_needed, "next_thought_needed")?,
                    is_revision: self.is_revision,
                    revises_thought: self.revises_thought,
                    branch_from_thought: self.branch_from_thought,
                    branch_id: self.branch_id,
                    needs_more_thoughts: self.needs_more_thoughts,
                },
                call: required(self.call, "call")?,
            },
            PayloadType::ThinkRecorded => Payload::ThinkRecorded {
                thought: ThinkThought {
                    thread_purpose: required(self.thread_purpose, "thread_purpose")?,
                    thought: required(self.thought, "thought")?,
                    thought_index: required(self.thought_index, "thought_index")?,
                    tool_recommendation: required(self.tool_recommendation, "tool_recommendation")?,
                    left_to_be_done: required(self.left_to_be_done, "left_to_be_done")?,
                    open_items: required(self.open_items, "open_items")?,
                },
                call: required(self.call, "call")?,
            },
            PayloadType::SessionClosed => Payload::SessionClosed {
                reason: required(self.reason, "reason")?,
            },
        })
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        PayloadWire::deserialize(deserializer)?.into_payload()
    }
}

impl Payload {
    /// The `type` tag as written on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            Payload::SessionStarted { .. } => "session_started",
            Payload::ThoughtRecorded { .. } => "thought_recorded",
            Payload::ThinkRecorded { .. } => "think_recorded",
            Payload::SessionClosed { .. } => "session_closed",
        }
    }

    /// The thought text this event carries, if any (what search looks at first).
    pub fn text(&self) -> Option<&str> {
        match self {
            Payload::ThoughtRecorded { thought, .. } => Some(&thought.thought),
            Payload::ThinkRecorded { thought, .. } => Some(&thought.thought),
            Payload::SessionStarted { title, .. } => Some(title),
            Payload::SessionClosed { reason } => Some(reason),
        }
    }
}

/// What a tool hands to the store: the store assigns seq, time and hashes.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    pub id: EventId,
    pub payload: Payload,
}

impl NewEvent {
    pub fn new(payload: Payload) -> Self {
        NewEvent {
            id: EventId::generate(),
            payload,
        }
    }
}

/// A committed event: the envelope as stored and as exported in JSONL.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: EventId,
    pub session: SessionId,
    /// 1, 2, 3 … gapless within the session.
    pub seq: u64,
    /// Commit time, milliseconds since the Unix epoch (UTC).
    pub at: u64,
    /// Payload format version ([`SCHEMA_VERSION`] when written by this build).
    pub schema: u32,
    pub payload: Payload,
    /// `hash` of the previous event of the session, [`GENESIS_HASH`] for seq 1.
    pub prev: String,
    /// blake3 over the domain prefix, `prev` and the canonical bytes of the other fields.
    pub hash: String,
}

/// The fields the hash covers, in a fixed order: the canonical form of an event.
#[derive(Serialize)]
struct HashedFields<'a> {
    id: &'a EventId,
    session: &'a SessionId,
    seq: u64,
    at: u64,
    schema: u32,
    payload: &'a Payload,
}

/// Hash of an event's content chained to `prev`, as lowercase hex.
pub fn event_hash(
    prev: &str,
    id: &EventId,
    session: &SessionId,
    seq: u64,
    at: u64,
    schema: u32,
    payload: &Payload,
) -> String {
    let canonical = serde_json::to_vec(&HashedFields {
        id,
        session,
        seq,
        at,
        schema,
        payload,
    })
    .expect("event fields always serialize");
    let mut hasher = blake3::Hasher::new();
    hasher.update(HASH_DOMAIN);
    hasher.update(prev.as_bytes());
    hasher.update(&canonical);
    hasher.finalize().to_hex().to_string()
}

impl Event {
    /// Recomputes this event's hash from its content and `prev`.
    pub fn computed_hash(&self) -> String {
        event_hash(
            &self.prev,
            &self.id,
            &self.session,
            self.seq,
            self.at,
            self.schema,
            &self.payload,
        )
    }

    /// The commit time as RFC 3339 with milliseconds.
    pub fn at_rfc3339(&self) -> String {
        format_time(self.at)
    }
}

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn format_time(at_ms: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms);
    humantime::format_rfc3339_millis(time).to_string()
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_changes_with_any_field_and_round_trips_through_json() {
        let payload = Payload::SessionClosed {
            reason: "done \u{0} \u{202e}".into(),
        };
        let id = EventId::generate();
        let session = SessionId::generate();
        let hash = event_hash(GENESIS_HASH, &id, &session, 1, 5, 1, &payload);
        let event = Event {
            id,
            session,
            seq: 1,
            at: 5,
            schema: 1,
            payload: payload.clone(),
            prev: GENESIS_HASH.into(),
            hash: hash.clone(),
        };
        let back: Event = serde_json::from_slice(&serde_json::to_vec(&event).unwrap()).unwrap();
        assert_eq!(back.computed_hash(), hash);
        assert_ne!(
            event_hash(GENESIS_HASH, &id, &session, 2, 5, 1, &payload),
            hash
        );
    }
}
