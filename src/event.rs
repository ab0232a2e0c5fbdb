//! The event envelope and payloads: the one wire format of the ledger.
//!
//! Owns: [`Event`] (the envelope a store hands out), [`NewEvent`] (what a tool asks the
//! store to append), [`Payload`] (the two core events and a [`FamilyPayload`] for
//! everything a tool family records; [`family`] holds the contract a family's payloads
//! meet), [`SessionKind`] and the hash chain ([`event_hash`]). Must not: touch the store
//! or any I/O. A payload's shape never changes without its family bumping its schema and
//! upcasting the older one; an event is hashed, verified and exported as it was written
//! and upcast only for reading.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;
use ulid::Ulid;

/// Domain prefix of the event hash; the trailing version lets the hash change later.
const HASH_DOMAIN: &[u8] = b"reasoning-ledger/event-hash/v1\0";

/// `prev` of the first event of every session.
pub(crate) const GENESIS_HASH: &str =
    "0000000000000000000000000000000000000000000000000000000000000000";

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
    pub(crate) fn generate() -> Self {
        EventId(Ulid::generate())
    }

    /// The id of the `index`-th event a call keyed `key` records: the same key always
    /// gives the same ids, so a call that runs again records nothing twice (a 128-bit
    /// blake3 digest, written as a ULID).
    pub(crate) fn derived(key: &str, index: u64) -> Self {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"reasoning-ledger/derived-event-id/v1\0");
        hasher.update(&index.to_le_bytes());
        hasher.update(key.as_bytes());
        let digest = hasher.finalize();
        let bytes: [u8; 16] = digest.as_bytes()[..16].try_into().expect("16 of 32 bytes");
        EventId(Ulid(u128::from_be_bytes(bytes)))
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

pub(crate) mod family;
pub(crate) mod summary;

pub(crate) use family::{
    CodecError, DecodeFields, Families, FamilyEvent, FamilyPayload, KindInfo, PayloadCodec,
};

mod ulid_string {
    use serde::{Deserializer, Serializer};
    use ulid::Ulid;

    pub(super) fn serialize<S: Serializer>(id: &Ulid, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&id.to_string())
    }

    /// Reads the string without allocating: ids are decoded for every event of a rebuild.
    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Ulid, D::Error> {
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
///
/// Kinds are registered by the tool families (through [`family::Registry`]); a family
/// declares its kinds as constants (each lives with its family). Stored as its name and
/// read back as a kind of the families reading it (`Families::kind_named`): a name none
/// of them claims does not decode. No `Deserialize`: a name alone is no kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKind(&'static str);

impl SessionKind {
    /// A kind named `name`; only families declare kinds (and register them).
    pub(crate) const fn new(name: &'static str) -> Self {
        SessionKind(name)
    }

    pub(crate) fn as_str(self) -> &'static str {
        self.0
    }
}

impl Serialize for SessionKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

/// A call's arguments as compact JSON text, kept verbatim: written and hashed exactly as a
/// [`Value`] would serialize, but read back without building the value tree (a rebuild
/// decodes every event and never looks inside the arguments).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawArguments(Cow<'static, RawValue>);

impl RawArguments {
    pub(crate) fn from_value(value: &Value) -> Self {
        RawArguments(Cow::Owned(
            serde_json::value::to_raw_value(value).expect("JSON values always serialize"),
        ))
    }

    /// `null`: what a projection's read path puts in place of arguments it never reads
    /// (borrowed, so a rebuild does not allocate it per event).
    pub(crate) fn null() -> Self {
        RawArguments(Cow::Borrowed(RawValue::NULL))
    }

    /// Parses compact JSON text (as [`RawArguments::as_json`] gives it).
    pub(crate) fn from_json(text: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text).map(|raw| RawArguments(Cow::Owned(raw)))
    }

    /// The arguments as compact JSON text.
    pub(crate) fn as_json(&self) -> &str {
        self.0.get()
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

/// Schema version of the core payloads (`session_started`, `session_closed`). A family's
/// payloads carry their own version ([`PayloadCodec::schema`]).
pub(crate) const CORE_SCHEMA: u32 = 1;

/// Everything the ledger records. Serialized as one object tagged by `"type"`; tags are
/// never renamed.
///
/// The two core events frame every session and are read by the store itself (the start
/// rule, aliases, the closed flag); everything a tool family records is a
/// [`FamilyPayload`], encoded, folded and rendered by its family.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    /// First event of every session.
    SessionStarted {
        kind: SessionKind,
        title: String,
        aliases: Vec<String>,
    },
    /// The session was closed; later calls start a new one.
    SessionClosed { reason: String },
    /// An event of a tool family.
    Family(FamilyPayload),
}

/// The core payloads as written: tag first, then the fields (the canonical form hashed).
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum CorePayloadRef<'a> {
    SessionStarted {
        kind: SessionKind,
        title: &'a str,
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        aliases: &'a [String],
    },
    SessionClosed {
        reason: &'a str,
    },
}

/// The core payloads as read from JSON.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum CorePayloadWire {
    SessionStarted {
        /// Its name, read as a kind of the families decoding it.
        kind: String,
        title: String,
        #[serde(default)]
        aliases: Vec<String>,
    },
    SessionClosed {
        reason: String,
    },
}

/// Tag of the first event of every session.
pub(crate) const SESSION_STARTED: &str = "session_started";
/// Tag of the event that closes a session.
pub(crate) const SESSION_CLOSED: &str = "session_closed";

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Payload::SessionStarted {
                kind,
                title,
                aliases,
            } => CorePayloadRef::SessionStarted {
                kind: *kind,
                title,
                aliases,
            }
            .serialize(s),
            Payload::SessionClosed { reason } => {
                CorePayloadRef::SessionClosed { reason }.serialize(s)
            }
            Payload::Family(family) => family.serialize(s),
        }
    }
}

/// Just the tag of a JSON payload.
#[derive(Deserialize)]
struct TagOnly<'a> {
    #[serde(rename = "type", borrow)]
    tag: Cow<'a, str>,
}

impl Payload {
    /// Decodes a payload's JSON as written with `schema`: core tags here, every other tag
    /// by the family that registered it (which upcasts an older schema).
    pub(crate) fn from_json(
        schema: u32,
        json: &str,
        families: &Families,
    ) -> Result<Payload, CodecError> {
        let tag = serde_json::from_str::<TagOnly<'_>>(json)
            .map_err(CodecError::payload)?
            .tag;
        if tag == SESSION_STARTED || tag == SESSION_CLOSED {
            if schema > CORE_SCHEMA {
                return Err(CodecError::UnreadableSchema {
                    tag: tag.into_owned(),
                    schema,
                    wording: format!(", newer than this build reads ({CORE_SCHEMA})"),
                });
            }
            let core: CorePayloadWire = serde_json::from_str(json).map_err(CodecError::payload)?;
            return Ok(match core {
                CorePayloadWire::SessionStarted {
                    kind,
                    title,
                    aliases,
                } => Payload::SessionStarted {
                    kind: families.kind_named(&kind).ok_or_else(|| {
                        CodecError::Payload(format!("unknown session kind {kind:?}"))
                    })?,
                    title,
                    aliases,
                },
                CorePayloadWire::SessionClosed { reason } => Payload::SessionClosed { reason },
            });
        }
        let codec = families
            .codec_for(&tag)
            .ok_or_else(|| CodecError::Unregistered(tag.to_string()))?;
        codec.decode_json(&tag, schema, json).map(Payload::Family)
    }

    /// The `type` tag as written on the wire.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Payload::SessionStarted { .. } => SESSION_STARTED,
            Payload::SessionClosed { .. } => SESSION_CLOSED,
            Payload::Family(family) => family.event().type_name(),
        }
    }

    /// The schema version this payload is written with.
    pub(crate) fn schema(&self) -> u32 {
        match self {
            Payload::SessionStarted { .. } | Payload::SessionClosed { .. } => CORE_SCHEMA,
            Payload::Family(family) => family.event().schema(),
        }
    }

    /// The text this event carries, if any (what search looks at).
    pub fn text(&self) -> Option<&str> {
        match self {
            Payload::SessionStarted { title, .. } => Some(title),
            Payload::SessionClosed { reason } => Some(reason),
            Payload::Family(family) => family.event().text(),
        }
    }

    /// A second text search also looks at (a verification step's target), if any.
    pub fn search_extra(&self) -> Option<&str> {
        match self {
            Payload::Family(family) => family.event().search_extra(),
            _ => None,
        }
    }

    /// The branch this event belongs to, if it records one.
    pub(crate) fn branch(&self) -> Option<&str> {
        match self {
            Payload::Family(family) => family.event().branch(),
            _ => None,
        }
    }

    /// The family event of type `T`, if this is one.
    pub(crate) fn family<T: FamilyEvent>(&self) -> Option<&T> {
        match self {
            Payload::Family(family) => family.event().as_any().downcast_ref(),
            _ => None,
        }
    }
}

impl<T: FamilyEvent + Clone + PartialEq> From<T> for Payload {
    fn from(event: T) -> Self {
        Payload::Family(FamilyPayload::new(event))
    }
}

/// What a tool hands to the store: the store assigns seq, time and hashes.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    pub id: EventId,
    pub payload: Payload,
    /// Who wrote it ([`Event::actor`]): set by the write path from the request, never by a
    /// family's `decide`.
    pub actor: Option<String>,
}

impl NewEvent {
    pub fn new(payload: Payload) -> Self {
        NewEvent {
            id: EventId::generate(),
            payload,
            actor: None,
        }
    }
}

/// A committed event: the envelope as stored and as exported in JSONL. Read back from JSON
/// with the families that decode its payload ([`Event::from_json`], [`EventSeed`]), never
/// with a plain `Deserialize`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    pub id: EventId,
    pub session: SessionId,
    /// 1, 2, 3 … gapless within the session.
    pub seq: u64,
    /// Commit time, milliseconds since the Unix epoch (UTC).
    pub at: u64,
    /// Version of the payload's format as written ([`Payload::schema`] at the append).
    pub schema: u32,
    /// The name behind the request that wrote it (a named token, an OAuth subject); `None`
    /// for stdio, the CLI and every event of earlier builds. Hashed, stored and exported
    /// only when present, so an event without one is byte for byte as before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    pub payload: Payload,
    /// `hash` of the previous event of the session, [`GENESIS_HASH`] for seq 1.
    pub prev: String,
    /// blake3 over the domain prefix, `prev` and the canonical bytes of the other fields.
    pub hash: String,
}

/// An envelope as read from JSON: the payload is decoded once `schema` is known.
#[derive(Deserialize)]
struct EventWire {
    id: EventId,
    session: SessionId,
    seq: u64,
    at: u64,
    schema: u32,
    #[serde(default)]
    actor: Option<String>,
    payload: Box<RawValue>,
    prev: String,
    hash: String,
}

impl EventWire {
    /// The event, its payload decoded by `families`.
    fn into_event(self, families: &Families) -> Result<Event, CodecError> {
        let payload = Payload::from_json(self.schema, self.payload.get(), families)?;
        Ok(Event {
            id: self.id,
            session: self.session,
            seq: self.seq,
            at: self.at,
            schema: self.schema,
            actor: self.actor,
            payload,
            prev: self.prev,
            hash: self.hash,
        })
    }
}

/// Reads an [`Event`]'s JSON with the families given: what serde cannot do with a plain
/// `Deserialize`, since the payload's codec is the families' to choose.
#[derive(Clone, Copy)]
pub(crate) struct EventSeed<'a>(pub(crate) &'a Families);

impl<'de> serde::de::DeserializeSeed<'de> for EventSeed<'_> {
    type Value = Event;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Event, D::Error> {
        EventWire::deserialize(d)?
            .into_event(self.0)
            .map_err(serde::de::Error::custom)
    }
}

impl Event {
    /// The event whose JSON (as exported in JSONL) is `json`, read with `families`.
    pub fn from_json(json: &[u8], families: &Families) -> Result<Event, serde_json::Error> {
        use serde::de::DeserializeSeed;
        let mut reader = serde_json::Deserializer::from_slice(json);
        let event = EventSeed(families).deserialize(&mut reader)?;
        reader.end()?;
        Ok(event)
    }

    /// The event at the start of `bytes` (its first JSON value) and the bytes it took.
    pub(crate) fn from_json_prefix(
        bytes: &[u8],
        families: &Families,
    ) -> Option<Result<(Event, usize), serde_json::Error>> {
        let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<EventWire>();
        let wire = match values.next()? {
            Ok(wire) => wire,
            Err(error) => return Some(Err(error)),
        };
        Some(
            wire.into_event(families)
                .map(|event| (event, values.byte_offset()))
                .map_err(serde::de::Error::custom),
        )
    }
}

/// The fields the hash covers, in a fixed order: the canonical form of an event. `actor`
/// is left out when absent, so an event without one hashes as it always did.
#[derive(Serialize)]
struct HashedFields<'a> {
    id: &'a EventId,
    session: &'a SessionId,
    seq: u64,
    at: u64,
    schema: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    actor: Option<&'a str>,
    payload: &'a Payload,
}

/// Hash of an event's content (without an actor) chained to `prev`, as lowercase hex;
/// [`Event::computed_hash`] covers an actor too. (Reads use the latter; the tests pin
/// this form.)
#[cfg(test)]
pub(crate) fn event_hash(
    prev: &str,
    id: &EventId,
    session: &SessionId,
    seq: u64,
    at: u64,
    schema: u32,
    payload: &Payload,
) -> String {
    hash_fields(
        prev,
        &HashedFields {
            id,
            session,
            seq,
            at,
            schema,
            actor: None,
            payload,
        },
    )
}

/// Bytes of canonical JSON handed to the hasher at a time (the JSON is never kept whole).
const HASH_CHUNK_BYTES: usize = 4096;

/// The canonical JSON on its way into the hasher, [`HASH_CHUNK_BYTES`] at a time, gathered
/// on the stack (every event read is hashed again: a buffer on the heap was an allocation
/// per event read).
struct Chunked<'h> {
    hasher: &'h mut blake3::Hasher,
    buffer: [u8; HASH_CHUNK_BYTES],
    len: usize,
}

impl Chunked<'_> {
    fn hand_over(&mut self) {
        self.hasher.update(&self.buffer[..self.len]);
        self.len = 0;
    }
}

impl std::io::Write for Chunked<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if bytes.len() > HASH_CHUNK_BYTES - self.len {
            self.hand_over();
            if bytes.len() >= HASH_CHUNK_BYTES {
                self.hasher.update(bytes);
                return Ok(bytes.len());
            }
        }
        self.buffer[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.hand_over();
        Ok(())
    }
}

fn hash_fields(prev: &str, fields: &HashedFields<'_>) -> String {
    hash_of_fields(prev, fields).to_hex().to_string()
}

fn hash_of_fields(prev: &str, fields: &HashedFields<'_>) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    hasher.update(HASH_DOMAIN);
    hasher.update(prev.as_bytes());
    // The canonical JSON streams into the hash: the same bytes in the same order as a
    // buffer of all of it, without growing one.
    let mut canonical = Chunked {
        hasher: &mut hasher,
        buffer: [0; HASH_CHUNK_BYTES],
        len: 0,
    };
    serde_json::to_writer(&mut canonical, fields).expect("event fields always serialize");
    canonical.hand_over();
    hasher.finalize()
}

impl Event {
    fn hashed_fields(&self) -> HashedFields<'_> {
        HashedFields {
            id: &self.id,
            session: &self.session,
            seq: self.seq,
            at: self.at,
            schema: self.schema,
            actor: self.actor.as_deref(),
            payload: &self.payload,
        }
    }

    /// Recomputes this event's hash from its content (its actor included, when it has
    /// one) and `prev`.
    pub fn computed_hash(&self) -> String {
        hash_fields(&self.prev, &self.hashed_fields())
    }

    /// Whether [`Event::computed_hash`] is the hash the event carries (compared without
    /// making a string of it: every event read is checked).
    pub(crate) fn hash_matches(&self) -> bool {
        hash_of_fields(&self.prev, &self.hashed_fields())
            .to_hex()
            .as_str()
            == self.hash
    }

    /// The commit time as RFC 3339 with milliseconds.
    pub(crate) fn at_rfc3339(&self) -> String {
        format_time(self.at)
    }
}

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds.
pub(crate) fn format_time(at_ms: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms);
    humantime::format_rfc3339_millis(time).to_string()
}

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The modules above the event layer (and above the store, for the store's check).
    const ABOVE: [&str; 13] = [
        "projection",
        "store",
        "recall",
        "export",
        "tools",
        "query",
        "server",
        "cli",
        "http",
        "prompts",
        "request",
        "provider",
        "ui",
    ];

    /// The code of a source file, without its comments and its `#[cfg(test)] mod tests`.
    fn product_code(path: &std::path::Path) -> String {
        let text = std::fs::read_to_string(path).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        code.lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The `crate::<module>` paths of `modules` that the product code under `paths` names.
    fn named(paths: &[std::path::PathBuf], modules: &[&str]) -> Vec<String> {
        let mut found = Vec::new();
        for path in paths {
            let code = product_code(path);
            for module in modules {
                for pattern in [format!("crate::{module}::"), format!("crate::{module};")] {
                    if code.contains(&pattern) {
                        found.push(format!("{} names crate::{module}", path.display()));
                    }
                }
            }
        }
        found
    }

    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn the_event_layer_imports_nothing_above_it_and_the_store_no_projection() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut event = vec![src.join("event.rs")];
        rust_files(&src.join("event"), &mut event);
        assert_eq!(named(&event, &ABOVE), Vec::<String>::new());
        let mut store = vec![];
        rust_files(&src.join("store"), &mut store);
        // Test-only files: the conformance suite and the fault model fold with fixtures,
        // the toy family renders its trees.
        store.retain(|p| {
            !p.ends_with("conformance.rs")
                && !p.ends_with("redb/fault.rs")
                && !p.ends_with("toy_family.rs")
        });
        assert_eq!(named(&store, &["projection"]), Vec::<String>::new());
    }

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
            actor: None,
            payload: payload.clone(),
            prev: GENESIS_HASH.into(),
            hash: hash.clone(),
        };
        let back = Event::from_json(
            &serde_json::to_vec(&event).unwrap(),
            &crate::tools::families(),
        )
        .unwrap();
        assert_eq!(back.computed_hash(), hash);
        assert_ne!(
            event_hash(GENESIS_HASH, &id, &session, 2, 5, 1, &payload),
            hash
        );
    }

    #[test]
    fn an_actor_is_hashed_and_written_only_when_present() {
        let payload = Payload::SessionClosed { reason: "r".into() };
        let mut event = Event {
            id: EventId::generate(),
            session: SessionId::generate(),
            seq: 1,
            at: 5,
            schema: 1,
            actor: None,
            payload,
            prev: GENESIS_HASH.into(),
            hash: String::new(),
        };
        let plain = event.computed_hash();
        assert_eq!(
            plain,
            event_hash(
                GENESIS_HASH,
                &event.id,
                &event.session,
                1,
                5,
                1,
                &event.payload
            )
        );
        event.hash = plain.clone();
        let json = serde_json::to_string(&event).unwrap();
        assert!(!json.contains("actor"), "{json}");

        event.actor = Some("alice".into());
        let by_alice = event.computed_hash();
        assert_ne!(by_alice, plain);
        event.actor = Some("bob".into());
        assert_ne!(event.computed_hash(), by_alice);
        event.actor = Some("alice".into());
        event.hash = by_alice.clone();
        let json = serde_json::to_string(&event).unwrap();
        assert!(
            json.contains(r#""schema":1,"actor":"alice","payload""#),
            "{json}"
        );
        let back = Event::from_json(json.as_bytes(), &crate::tools::families()).unwrap();
        assert_eq!(back, event);
        assert_eq!(back.computed_hash(), by_alice);
    }
}
