//! What a tool family's payloads promise the core: one codec per family, and the hooks
//! the store and the search call.
//!
//! Owns: [`FamilyEvent`] (a family's payload as the core sees it: tag, schema, text,
//! binary encoding, how it folds into the stored summary; how it folds into a thought
//! tree is the projection's hook, `crate::projection::tree::FoldTree`), [`FamilyPayload`] (one
//! such payload in an event, with the JSON it was written as when it was upcast),
//! [`PayloadCodec`] (how a family decodes its payloads, from any schema it ever wrote),
//! [`CodecError`] (why a payload did not decode), [`Registry`] (what the core asks of the
//! registered families: their codecs and session kinds), [`Families`] (them as a value:
//! the lookups of a codec by event tag, of a kind by name, and the reading of a stored
//! summary's parts). Must not: know any family, import `crate::tools`, or keep families
//! anywhere but in a value someone was handed (no global, no thread-local scope).
//!
//! Injection: the families register in one list (`tools::FAMILIES`). The composition root
//! (the command line; a test) builds the product's [`Families`] from it
//! (`tools::families()`) and hands the value to the ledger it opens, which passes it to
//! everything that decodes (`store::codec::decode_event(row, &families)`,
//! `store::HeadSeed`, `event::EventSeed`). `event`, `store`, `projection` and `export` see
//! only these traits, so the arrows point one way: families → core.
//!
//! Versioning: a family that changes a payload's shape bumps its [`PayloadCodec::schema`]
//! and keeps decoding the older schemas. An event of an older schema decodes to the
//! current type ([`FamilyPayload::upcast`]) and keeps the JSON it was written as: its hash,
//! `verify` and the JSONL export use that JSON, so upcasting never breaks the chain.

use crate::event::summary::{SessionSummary, StoredSummary, SummaryPart, SummaryParts};
use crate::event::{CallRecord, RawArguments, SessionKind};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::any::Any;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// Why a payload did not decode. Its text is what a corrupt row or a refused import
/// reports (`event row: <this>`), so a variant's wording never changes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CodecError {
    /// The payload's JSON or binary form does not parse as its type.
    #[error("payload: {0}")]
    Payload(String),
    /// A field the payload's type requires is absent.
    #[error("payload: missing field `{0}`")]
    MissingField(&'static str),
    /// The call record kept beside a body does not parse.
    #[error("payload call: {0}")]
    Call(serde_json::Error),
    /// A call record's raw arguments are not JSON.
    #[error("call arguments: {0}")]
    CallArguments(serde_json::Error),
    /// A row that holds JSON text is not UTF-8 (`what`: whose row).
    #[error("{what} row: {source}")]
    NotUtf8 {
        what: &'static str,
        source: std::str::Utf8Error,
    },
    /// The body's own tag is not the one its row carries.
    #[error("payload tagged {found:?}, expected {expected:?}")]
    TagMismatch { found: String, expected: String },
    /// Refused in the family's own words (an event type or schema it never wrote).
    #[error("{0}")]
    Refused(String),
    /// No registered codec claims the tag.
    #[error("unknown event type {0:?} (written by another build?)")]
    Unregistered(String),
    /// A row of a schema newer than this build reads (the wording every family uses).
    #[error("a {family} event of schema {schema}, newer than this build reads ({reads})")]
    NewerSchema {
        family: &'static str,
        schema: u32,
        reads: u32,
    },
    /// A row of a schema this build does not read (`tag` as written).
    #[error("{tag} of schema {schema}{wording}")]
    UnreadableSchema {
        tag: String,
        schema: u32,
        /// The rest of the sentence: "; this build reads schema N" or ", newer than …".
        wording: String,
    },
}

impl CodecError {
    /// A parse failure of the payload's JSON or binary form.
    pub(crate) fn payload(error: impl fmt::Display) -> Self {
        CodecError::Payload(error.to_string())
    }

    /// A row of `schema` when the codec reads only `reads`.
    pub(crate) fn only_schema(tag: &str, schema: u32, reads: u32) -> Self {
        CodecError::UnreadableSchema {
            tag: tag.to_string(),
            schema,
            wording: format!("; this build reads schema {reads}"),
        }
    }
}

/// A registered session kind and how it is named to a person.
#[derive(Debug)]
pub(crate) struct KindInfo {
    pub kind: SessionKind,
    /// Heading of its Markdown export, e.g. "Thinking session".
    pub label: &'static str,
}

/// What the core asks of the registered families (the crate root wires the one
/// implementation, over `tools::FAMILIES`: see the module docs).
pub(crate) trait Registry: Sync {
    /// Every payload codec, in registration order: the families' (in the order of the
    /// registry), then those no family owns (the provider's model calls).
    fn codecs(&self) -> Vec<&'static dyn PayloadCodec>;
    /// Every registered session kind, in registration order.
    fn kinds(&self) -> Vec<&'static KindInfo>;
}

/// The families a ledger reads with, as a value: their codecs (each event tag claimed by
/// one) and their session kinds. The composition root builds the product's
/// ([`Families::of`] over `tools::REGISTRY`); a test may open a ledger with others
/// ([`Families::new`]). Cloning shares the lists (one `Arc`): a read view holds a clone,
/// a row's decode borrows it.
#[derive(Clone)]
pub struct Families(std::sync::Arc<FamilyLists>);

#[derive(Clone)]
struct FamilyLists {
    codecs: Vec<&'static dyn PayloadCodec>,
    kinds: Vec<&'static KindInfo>,
    /// Every event tag and the codec that claims it (a scan of a short list: a rebuild
    /// asks once per event, and a handful of string compares beat hashing the tag).
    by_tag: Vec<(&'static str, &'static dyn PayloadCodec)>,
    /// The values the layers above read with ([`Families::carrying`]), one per type.
    carried: Vec<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
}

impl fmt::Debug for Families {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.codecs.iter().map(|codec| codec.family()))
            .finish()
    }
}

impl Families {
    /// Families of these codecs (in registration order) and session kinds.
    ///
    /// # Panics
    /// When two codecs claim the same event tag.
    pub(crate) fn new(
        codecs: Vec<&'static dyn PayloadCodec>,
        kinds: Vec<&'static KindInfo>,
    ) -> Self {
        let mut by_tag: Vec<(&'static str, &'static dyn PayloadCodec)> = Vec::new();
        for &codec in &codecs {
            for tag in codec.types() {
                assert!(
                    by_tag.iter().all(|(known, _)| known != tag),
                    "event type {tag:?} is registered by two families"
                );
                by_tag.push((tag, codec));
            }
        }
        Families(std::sync::Arc::new(FamilyLists {
            codecs,
            kinds,
            by_tag,
            carried: Vec::new(),
        }))
    }

    /// These families with `value` carried beside them: what the layers above read a
    /// ledger's events with (the projections' folds, the exports' renderers), handed down
    /// from the composition root with the families and never named here. One value per
    /// type: a second of the same type replaces the first.
    pub(crate) fn carrying<T: std::any::Any + Send + Sync>(mut self, value: T) -> Self {
        let lists = std::sync::Arc::make_mut(&mut self.0);
        lists.carried.retain(|known| !known.is::<T>());
        lists.carried.push(std::sync::Arc::new(value));
        self
    }

    /// The value of type `T` these families carry ([`Families::carrying`]), if any.
    pub(crate) fn carried<T: std::any::Any + Send + Sync>(&self) -> Option<&T> {
        self.0
            .carried
            .iter()
            .find_map(|value| value.downcast_ref::<T>())
    }

    /// The families a registry lists.
    pub(crate) fn of(registry: &dyn Registry) -> Self {
        Families::new(registry.codecs(), registry.kinds())
    }

    /// Every codec, in registration order.
    pub(crate) fn codecs(&self) -> &[&'static dyn PayloadCodec] {
        &self.0.codecs
    }

    /// Every session kind, in registration order.
    pub(crate) fn kinds(&self) -> &[&'static KindInfo] {
        &self.0.kinds
    }

    /// The codec that claims event tag `tag`.
    pub(crate) fn codec_for(&self, tag: &str) -> Option<&'static dyn PayloadCodec> {
        self.0
            .by_tag
            .iter()
            .find(|(known, _)| *known == tag)
            .map(|(_, codec)| *codec)
    }

    /// The registered kind named `name`.
    pub(crate) fn kind_named(&self, name: &str) -> Option<SessionKind> {
        self.kinds()
            .iter()
            .find(|k| k.kind.as_str() == name)
            .map(|k| k.kind)
    }

    /// A stored summary read with these families: its kind one of theirs, its family parts
    /// read by their codecs ([`Families::summary_parts`]).
    pub(crate) fn read_summary(
        &self,
        stored: StoredSummary,
    ) -> Result<SessionSummary, serde_json::Error> {
        stored.read(
            |name| self.kind_named(name),
            |fields| self.summary_parts(fields),
        )
    }

    /// A stored summary's family parts: the summary's fields no core field took, each given
    /// to the codec that declares it ([`PayloadCodec::summary_keys`]). A field no codec
    /// declares is ignored (as serde ignores unknown fields).
    pub(crate) fn summary_parts(
        &self,
        fields: serde_json::Map<String, serde_json::Value>,
    ) -> Result<SummaryParts, serde_json::Error> {
        let mut groups: Vec<(
            &'static dyn PayloadCodec,
            serde_json::Map<String, serde_json::Value>,
        )> = Vec::new();
        for (key, value) in fields {
            let Some(codec) = self
                .codecs()
                .iter()
                .copied()
                .find(|codec| codec.summary_keys().contains(&key.as_str()))
            else {
                continue;
            };
            match groups
                .iter_mut()
                .find(|(known, _)| std::ptr::addr_eq(*known, codec))
            {
                Some((_, group)) => {
                    group.insert(key, value);
                }
                None => groups.push((codec, serde_json::Map::from_iter([(key, value)]))),
            }
        }
        let mut parts = SummaryParts::default();
        for (codec, group) in groups {
            parts.insert(codec.read_summary(group)?);
        }
        Ok(parts)
    }
}

/// How much of a stored event to build: everything, or what a projection's fold reads
/// (a fold never reads a call's raw arguments, so a family may leave them `null`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DecodeFields {
    All,
    ToFold,
}

/// A family's payload, as the core handles it.
///
/// Serialized (through erased serde) as one JSON object whose first key is `"type"`:
/// that JSON is what the hash covers. Implement it on a `Clone + PartialEq` type and
/// [`FamilyEventObject`] comes for free.
pub(crate) trait FamilyEvent:
    FamilyEventObject + erased_serde::Serialize + fmt::Debug + Send + Sync
{
    /// The codec of the family this payload belongs to.
    fn codec(&self) -> &'static dyn PayloadCodec;
    /// The `type` tag (one of the codec's [`PayloadCodec::types`]).
    fn type_name(&self) -> &'static str;
    /// The schema this payload's type is written with (the family's current one, unless
    /// the type is an older shape kept to read old events).
    fn schema(&self) -> u32 {
        self.codec().schema()
    }
    /// The text search looks at.
    fn text(&self) -> Option<&str>;
    /// Another text search looks at besides [`FamilyEvent::text`] (it matches, the
    /// snippet comes from it when the text does not match).
    fn search_extra(&self) -> Option<&str> {
        None
    }
    /// Every text of it the search index holds (a plan's steps and risks, a booster's
    /// candidates…): by default [`FamilyEvent::text`] and [`FamilyEvent::search_extra`]; a
    /// family that records more text lists it here.
    fn search_texts(&self) -> Vec<&str> {
        self.text().into_iter().chain(self.search_extra()).collect()
    }
    /// The tool call that recorded it, if one did.
    fn call(&self) -> Option<&CallRecord> {
        None
    }
    /// The branch it belongs to, if it records one.
    fn branch(&self) -> Option<&str> {
        None
    }
    /// Appends this payload's binary form (read back by the codec's `decode`).
    fn encode(&self, out: &mut Vec<u8>);
    /// Folds it into the session summary; `new_branch` says whether its
    /// [`FamilyEvent::branch`] is one the session has not seen.
    fn summarize(&self, summary: &mut SessionSummary, new_branch: bool);
    /// A step of the reasoning this event is, shown in a trace as a span of its own under
    /// its call's (a plan's phase, a booster's round); `None` (the default): a span event
    /// on the call's span only.
    fn trace_step(&self) -> Option<TraceStep> {
        None
    }
}

/// A step of the reasoning as a trace shows it ([`FamilyEvent::trace_step`]): an
/// INTERNAL span at the event's commit time, under the span of the call that recorded it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TraceStep {
    /// The span's name: `plan explore`, `booster round 2`.
    pub name: String,
    /// Its `gen_ai.operation.name`, where the conventions give one.
    pub operation: Option<&'static str>,
    /// Its attributes (`reasoning_ledger.*`): counts, scores and phases, never a text a
    /// person or a model wrote (that goes in span events, and only on opt-in).
    pub attributes: Vec<(&'static str, TraceValue)>,
}

/// A [`TraceStep`] attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TraceValue {
    Int(i64),
    Float(f64),
    Text(&'static str),
}

/// The object plumbing every [`FamilyEvent`] gets from its `Clone + PartialEq`.
pub(crate) trait FamilyEventObject: Any {
    fn as_any(&self) -> &dyn Any;
    /// The payload as its own type, for a hook of a layer above that knows the type (a
    /// projection's fold).
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    fn clone_box(&self) -> Box<dyn FamilyEvent>;
    fn eq_dyn(&self, other: &dyn FamilyEvent) -> bool;
}

impl<T: FamilyEvent + Clone + PartialEq> FamilyEventObject for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn clone_box(&self) -> Box<dyn FamilyEvent> {
        Box::new(self.clone())
    }
    fn eq_dyn(&self, other: &dyn FamilyEvent) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

/// How a family's payloads are read back, whatever schema wrote them.
pub(crate) trait PayloadCodec: Send + Sync {
    /// The family's name (its toolset's name).
    fn family(&self) -> &'static str;
    /// The schema this build writes.
    fn schema(&self) -> u32;
    /// Every `type` tag the family ever wrote.
    fn types(&self) -> &'static [&'static str];
    /// A payload from its binary form ([`FamilyEvent::encode`] of schema `schema`).
    fn decode(
        &self,
        tag: &str,
        schema: u32,
        bytes: &[u8],
        fields: DecodeFields,
    ) -> Result<FamilyPayload, CodecError>;
    /// A payload from the JSON it was written as (imports, JSON rows, upcast events).
    fn decode_json(&self, tag: &str, schema: u32, json: &str) -> Result<FamilyPayload, CodecError>;

    /// Rows written before families had codecs (`0x01`) held one closed enum of payloads;
    /// a codec whose events were its variants claims variant `variant` and reads its
    /// bytes from the front of `bytes`, returning the payload and the bytes after it.
    /// `None`: not one of this codec's.
    fn decode_closed_enum_variant<'a>(
        &self,
        _variant: u32,
        _bytes: &'a [u8],
        _fields: DecodeFields,
    ) -> Option<Result<(FamilyPayload, &'a [u8]), CodecError>> {
        None
    }

    /// The fields its payloads add to a stored summary (the JSON keys of its
    /// [`SummaryPart`]); a stored summary's field is given to the codec declaring it.
    fn summary_keys(&self) -> &'static [&'static str] {
        &[]
    }

    /// Its summary part, from the fields of a stored summary it declared.
    fn read_summary(
        &self,
        fields: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Box<dyn SummaryPart>, serde_json::Error> {
        let _ = fields;
        Err(keeps_nothing(self.family()))
    }

    /// Refuses a row of a schema newer than this build reads, in the one wording every
    /// family uses (older schemas are the codec's to upcast).
    fn refuse_newer(&self, schema: u32) -> Result<(), CodecError> {
        if schema > self.schema() {
            return Err(CodecError::NewerSchema {
                family: self.family(),
                schema,
                reads: self.schema(),
            });
        }
        Ok(())
    }
}

/// Why a family that declared no summary fields was handed some.
fn keeps_nothing(family: &str) -> serde_json::Error {
    serde::de::Error::custom(format_args!(
        "the {family} family keeps nothing in a summary"
    ))
}

/// A family's summary part of type `T` from the stored summary's fields it declared: what
/// [`PayloadCodec::read_summary`] does for every part that is plain serde.
pub(crate) fn read_part<T>(
    fields: serde_json::Map<String, serde_json::Value>,
) -> Result<Box<dyn SummaryPart>, serde_json::Error>
where
    T: SummaryPart + serde::de::DeserializeOwned + Clone + PartialEq + Default,
{
    let part: T = serde_json::from_value(fields.into())?;
    Ok(Box::new(part))
}

/// How a summary part reads back from the stored summary's fields it declared.
pub(crate) type ReadPart = fn(
    serde_json::Map<String, serde_json::Value>,
) -> Result<Box<dyn SummaryPart>, serde_json::Error>;

/// The fields a codec's payloads add to a stored summary, and how they read back (usually
/// [`read_part`]).
pub(crate) struct SummaryFields {
    /// The JSON keys of its [`SummaryPart`].
    pub keys: &'static [&'static str],
    /// Its part from those fields.
    pub read: ReadPart,
}

/// The common codec: events of one schema whose row is its JSON text (a family
/// whose events are few and mostly text: the agent's nodes, the provider's model calls).
/// A family fills in its names and how its payload reads from JSON; the tag and schema
/// checks, the UTF-8 check of a row and the summary's fields are written here once.
pub(crate) struct JsonCodec {
    /// The family's name.
    pub family: &'static str,
    /// Its event types (one, usually).
    pub types: &'static [&'static str],
    /// The one schema it writes and reads.
    pub schema: u32,
    /// Who refuses another tag ("the agent family": "… has no event type …").
    pub owner: &'static str,
    /// Whose row a non-UTF-8 error names ("agent": "agent row: …").
    pub row: &'static str,
    /// The payload from its JSON (tag and schema already checked).
    pub read: fn(&str) -> Result<FamilyPayload, serde_json::Error>,
    /// The fields it adds to a stored summary, if any.
    pub summary: Option<SummaryFields>,
}

impl PayloadCodec for JsonCodec {
    fn family(&self) -> &'static str {
        self.family
    }

    fn schema(&self) -> u32 {
        self.schema
    }

    fn types(&self) -> &'static [&'static str] {
        self.types
    }

    fn summary_keys(&self) -> &'static [&'static str] {
        self.summary.as_ref().map_or(&[], |summary| summary.keys)
    }

    fn read_summary(
        &self,
        fields: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Box<dyn SummaryPart>, serde_json::Error> {
        match &self.summary {
            Some(summary) => (summary.read)(fields),
            None => Err(keeps_nothing(self.family)),
        }
    }

    fn decode(
        &self,
        tag: &str,
        schema: u32,
        bytes: &[u8],
        _fields: DecodeFields,
    ) -> Result<FamilyPayload, CodecError> {
        let json = std::str::from_utf8(bytes).map_err(|source| CodecError::NotUtf8 {
            what: self.row,
            source,
        })?;
        self.decode_json(tag, schema, json)
    }

    fn decode_json(&self, tag: &str, schema: u32, json: &str) -> Result<FamilyPayload, CodecError> {
        if !self.types.contains(&tag) {
            return Err(CodecError::Refused(format!(
                "{} has no event type {tag:?}",
                self.owner
            )));
        }
        if schema != self.schema {
            return Err(CodecError::only_schema(tag, schema, self.schema));
        }
        (self.read)(json).map_err(CodecError::payload)
    }
}

/// A family's body (a serde-tagged enum) from its JSON, refused unless its own tag
/// (`tag_of`) is the one the row carries: the row's tag and its body never disagree.
pub(crate) fn tagged_body<B: serde::de::DeserializeOwned>(
    tag: &str,
    json: &str,
    tag_of: fn(&B) -> &'static str,
) -> Result<B, CodecError> {
    let body: B = serde_json::from_str(json).map_err(CodecError::payload)?;
    if tag_of(&body) != tag {
        return Err(CodecError::TagMismatch {
            found: tag_of(&body).to_string(),
            expected: tag.to_string(),
        });
    }
    Ok(body)
}

/// A payload's JSON object split into its body (every key but `call`, as one JSON object
/// text, keys in sorted order) and its `call` (the raw JSON, if present): the shape of
/// the families whose body is a tagged enum kept beside the call.
pub(crate) fn split_call(json: &str) -> Result<(String, Option<Box<RawValue>>), CodecError> {
    let mut fields: BTreeMap<String, Box<RawValue>> =
        serde_json::from_str(json).map_err(CodecError::payload)?;
    let call = fields.remove("call");
    let mut body = String::from("{");
    for (i, (key, value)) in fields.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&serde_json::to_string(key).expect("a key serializes"));
        body.push(':');
        body.push_str(value.get());
    }
    body.push('}');
    Ok((body, call))
}

/// A call record from its raw JSON (the `call` of [`split_call`]).
pub(crate) fn call_from_json(call: &RawValue) -> Result<CallRecord, CodecError> {
    serde_json::from_str(call.get()).map_err(CodecError::Call)
}

/// One family payload inside an event.
pub struct FamilyPayload {
    event: Box<dyn FamilyEvent>,
    /// The payload's JSON as written, when `event` was upcast from an older schema.
    written: Option<Box<RawValue>>,
}

impl FamilyPayload {
    pub(crate) fn new(event: impl FamilyEvent) -> Self {
        FamilyPayload {
            event: Box::new(event),
            written: None,
        }
    }

    /// A payload read from an older schema: `event` is the current shape, `written` the
    /// JSON the older build wrote (what the hash covers and exports repeat).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn upcast(event: Box<dyn FamilyEvent>, written: Box<RawValue>) -> Self {
        FamilyPayload {
            event,
            written: Some(written),
        }
    }

    pub(crate) fn event(&self) -> &dyn FamilyEvent {
        &*self.event
    }

    pub(crate) fn into_event(self) -> Box<dyn FamilyEvent> {
        self.event
    }

    /// The JSON as written, if this payload was upcast.
    pub(crate) fn written(&self) -> Option<&RawValue> {
        self.written.as_deref()
    }
}

impl Serialize for FamilyPayload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.written {
            Some(written) => written.serialize(s),
            None => erased_serde::serialize(&*self.event, s),
        }
    }
}

impl Clone for FamilyPayload {
    fn clone(&self) -> Self {
        FamilyPayload {
            event: self.event.clone_box(),
            written: self.written.clone(),
        }
    }
}

impl PartialEq for FamilyPayload {
    /// Equal when they were written the same: as the same typed value, or as the same
    /// JSON (which is what the hash covers).
    fn eq(&self, other: &Self) -> bool {
        match (&self.written, &other.written) {
            (None, None) => self.event.eq_dyn(&*other.event),
            _ => match (serde_json::to_string(self), serde_json::to_string(other)) {
                (Ok(mine), Ok(theirs)) => mine == theirs,
                _ => false,
            },
        }
    }
}

impl fmt::Debug for FamilyPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.written {
            Some(written) => write!(f, "{:?} (written as {})", self.event, written.get()),
            None => self.event.fmt(f),
        }
    }
}

/// Decodes `bytes` as postcard of `T` (the usual binary form of a family payload).
pub(crate) fn postcard_decode<'a, T: serde::Deserialize<'a>>(
    bytes: &'a [u8],
) -> Result<T, CodecError> {
    postcard::from_bytes(bytes).map_err(CodecError::payload)
}

/// Decodes postcard of `T` from the front of `bytes`, returning the bytes after it.
pub(crate) fn postcard_take<'a, T: serde::Deserialize<'a>>(
    bytes: &'a [u8],
) -> Result<(T, &'a [u8]), CodecError> {
    postcard::take_from_bytes(bytes).map_err(CodecError::payload)
}

/// Appends the JSON of `value` to `out` (the binary form of a [`JsonCodec`]'s payload).
pub(crate) fn json_encode<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    serde_json::to_writer(out, value).expect("a payload serializes");
}

/// Appends postcard of `value` to `out`.
pub(crate) fn postcard_encode<T: Serialize>(value: &T, out: &mut Vec<u8>) {
    postcard::to_io(value, out).expect("writing to a Vec cannot fail");
}

/// A call record in a family's binary row (fields in this order: every family that keeps
/// its call stores it so; the thinking family's rows of every format do).
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredCall<'a> {
    tool: &'a str,
    /// Compact JSON text, exactly as hashed, or with one member's value left out
    /// ([`StoredCall::of_text_once`]).
    #[serde(borrow)]
    raw_arguments: Cow<'a, str>,
    duration_us: u64,
}

/// What a stored call's arguments hold in place of a member's value that its payload
/// holds too (`"thought":@`): no JSON text holds `"KEY":@`, so neither a call written
/// before nor any argument can be taken for it.
const LEFT_OUT: char = '@';

/// `"KEY":` as compact JSON writes it.
fn member_key(key: &str) -> String {
    let mut member = serde_json::to_string(key).expect("a string serializes");
    member.push(':');
    member
}

/// Where `raw` first holds `"KEY":@` ([`StoredCall::of_text_once`]'s mark): the index of
/// its [`LEFT_OUT`]. Every read of a thought looks for it, so it is found by its last
/// character (a byte search) rather than by a substring search built for each read.
fn left_out_at(raw: &str, key: &str) -> Option<usize> {
    let member = member_key(key);
    raw.match_indices(LEFT_OUT)
        .map(|(at, _)| at)
        .find(|&at| raw[..at].ends_with(&member))
}

impl<'a> StoredCall<'a> {
    pub(crate) fn of(call: &'a CallRecord) -> Self {
        StoredCall {
            tool: &call.tool,
            raw_arguments: Cow::Borrowed(call.raw_arguments.as_json()),
            duration_us: call.duration_us,
        }
    }

    /// `call` stored without the value of its argument `key` when that value is exactly
    /// `text` (which the payload stores beside it): a thought is kept once, not twice. Read
    /// back by [`StoredCall::build_with_text`] with the same `key` and `text`, byte for
    /// byte; the event and its hash do not change.
    pub(crate) fn of_text_once(call: &'a CallRecord, key: &str, text: &str) -> Self {
        let mut stored = StoredCall::of(call);
        let raw = call.raw_arguments.as_json();
        let key = member_key(key);
        // `text` as a JSON string: written out only when it holds a character JSON
        // escapes (this runs on every thought, and most hold none).
        let escaped;
        let value = if text
            .bytes()
            .all(|byte| byte >= 0x20 && byte != b'"' && byte != b'\\')
        {
            None
        } else {
            escaped = serde_json::to_string(text).expect("a string serializes");
            Some(escaped.as_str())
        };
        let value_len = value.map_or(text.len() + 2, str::len);
        let is_value = |rest: &str| match value {
            Some(value) => rest.starts_with(value),
            None => {
                rest.len() >= value_len
                    && rest.as_bytes()[0] == b'"'
                    && rest.as_bytes()[value_len - 1] == b'"'
                    && &rest.as_bytes()[1..value_len - 1] == text.as_bytes()
            }
        };
        // The first `"key":` followed by the value: the first match of the whole member.
        let mut from = 0;
        while let Some(found) = raw[from..].find(&key) {
            let value_at = from + found + key.len();
            if is_value(&raw[value_at..]) {
                let mut left_out = String::with_capacity(raw.len() - value_len + 1);
                left_out.push_str(&raw[..value_at]);
                left_out.push(LEFT_OUT);
                left_out.push_str(&raw[value_at + value_len..]);
                stored.raw_arguments = Cow::Owned(left_out);
                break;
            }
            from = value_at;
        }
        stored
    }

    /// The call record, without its arguments for a fold.
    pub(crate) fn build(self, fields: DecodeFields) -> Result<CallRecord, CodecError> {
        self.build_with_text(fields, "", "")
    }

    /// The call record of a row written by [`StoredCall::of_text_once`]: the value of
    /// `key` put back as `text` where it was left out (a row written whole reads as is).
    pub(crate) fn build_with_text(
        self,
        fields: DecodeFields,
        key: &str,
        text: &str,
    ) -> Result<CallRecord, CodecError> {
        let raw_arguments = match fields {
            DecodeFields::All => {
                let left_out = if key.is_empty() {
                    None
                } else {
                    left_out_at(&self.raw_arguments, key)
                };
                let json = match left_out {
                    // Made at its length in one go: the text before the mark, the value,
                    // the text after it.
                    Some(at) => {
                        let raw = &*self.raw_arguments;
                        let value = serde_json::to_string(text).expect("a string serializes");
                        let after = at + LEFT_OUT.len_utf8();
                        let mut json = String::with_capacity(raw.len() - after + at + value.len());
                        json.push_str(&raw[..at]);
                        json.push_str(&value);
                        json.push_str(&raw[after..]);
                        json
                    }
                    None => self.raw_arguments.into_owned(),
                };
                RawArguments::from_json(json).map_err(CodecError::CallArguments)?
            }
            DecodeFields::ToFold => RawArguments::null(),
        };
        Ok(CallRecord {
            tool: self.tool.to_string(),
            raw_arguments,
            duration_us: self.duration_us,
        })
    }
}
