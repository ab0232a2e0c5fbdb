//! What a tool family's payloads promise the core: one codec per family, and the hooks
//! the projections and the search call.
//!
//! Owns: [`FamilyEvent`] (a family's payload as the core sees it: tag, schema, text,
//! binary encoding, how it folds into the summary and the tree), [`FamilyPayload`] (one
//! such payload in an event, with the JSON it was written as when it was upcast),
//! [`PayloadCodec`] (how a family decodes its payloads, from any schema it ever wrote)
//! and the lookup of a codec by event tag. Must not: know any family; families register
//! in [`crate::tools::FAMILIES`].
//!
//! Versioning: a family that changes a payload's shape bumps its [`PayloadCodec::schema`]
//! and keeps decoding the older schemas. An event of an older schema decodes to the
//! current type ([`FamilyPayload::upcast`]) and keeps the JSON it was written as: its hash,
//! `verify` and the JSONL export use that JSON, so upcasting never breaks the chain.

use crate::event::{CallRecord, RawArguments};
use crate::projection::summary::SessionSummary;
use crate::projection::tree::ThoughtTree;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::any::Any;
use std::fmt;
use std::sync::OnceLock;

/// How much of a stored event to build: everything, or what a projection's fold reads
/// (a fold never reads a call's raw arguments, so a family may leave them `null`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeFields {
    All,
    ToFold,
}

/// A family's payload, as the core handles it.
///
/// Serialized (through erased serde) as one JSON object whose first key is `"type"`:
/// that JSON is what the hash covers. Implement it on a `Clone + PartialEq` type and
/// [`FamilyEventObject`] comes for free.
pub trait FamilyEvent:
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
    /// Folds it into the tree (moving its texts), as event `seq` committed at `at`.
    fn fold(self: Box<Self>, seq: u64, at: u64, tree: &mut ThoughtTree);
}

/// The object plumbing every [`FamilyEvent`] gets from its `Clone + PartialEq`.
pub trait FamilyEventObject: Any {
    fn as_any(&self) -> &dyn Any;
    fn clone_box(&self) -> Box<dyn FamilyEvent>;
    fn eq_dyn(&self, other: &dyn FamilyEvent) -> bool;
}

impl<T: FamilyEvent + Clone + PartialEq> FamilyEventObject for T {
    fn as_any(&self) -> &dyn Any {
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
pub trait PayloadCodec: Send + Sync {
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
    ) -> Result<FamilyPayload, String>;
    /// A payload from the JSON it was written as (imports, JSON rows, upcast events).
    fn decode_json(&self, tag: &str, schema: u32, json: &str) -> Result<FamilyPayload, String>;

    /// Refuses a row of a schema newer than this build reads, in the one wording every
    /// family uses (older schemas are the codec's to upcast).
    fn refuse_newer(&self, schema: u32) -> Result<(), String> {
        if schema > self.schema() {
            return Err(format!(
                "a {} event of schema {schema}, newer than this build reads ({})",
                self.family(),
                self.schema()
            ));
        }
        Ok(())
    }
}

/// A family's body (a serde-tagged enum) from its JSON, refused unless its own tag
/// (`tag_of`) is the one the row carries: the row's tag and its body never disagree.
pub fn tagged_body<B: serde::de::DeserializeOwned>(
    tag: &str,
    json: &str,
    tag_of: fn(&B) -> &'static str,
) -> Result<B, String> {
    let body: B = serde_json::from_str(json).map_err(|e| format!("payload: {e}"))?;
    if tag_of(&body) != tag {
        return Err(format!(
            "payload tagged {:?}, expected {tag:?}",
            tag_of(&body)
        ));
    }
    Ok(body)
}

/// One family payload inside an event.
pub struct FamilyPayload {
    event: Box<dyn FamilyEvent>,
    /// The payload's JSON as written, when `event` was upcast from an older schema.
    written: Option<Box<RawValue>>,
}

impl FamilyPayload {
    pub fn new(event: impl FamilyEvent) -> Self {
        FamilyPayload {
            event: Box::new(event),
            written: None,
        }
    }

    /// A payload read from an older schema: `event` is the current shape, `written` the
    /// JSON the older build wrote (what the hash covers and exports repeat).
    pub fn upcast(event: Box<dyn FamilyEvent>, written: Box<RawValue>) -> Self {
        FamilyPayload {
            event,
            written: Some(written),
        }
    }

    pub fn from_box(event: Box<dyn FamilyEvent>) -> Self {
        FamilyPayload {
            event,
            written: None,
        }
    }

    pub fn event(&self) -> &dyn FamilyEvent {
        &*self.event
    }

    pub fn into_event(self) -> Box<dyn FamilyEvent> {
        self.event
    }

    /// The JSON as written, if this payload was upcast.
    pub fn written(&self) -> Option<&RawValue> {
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

/// The codec that registered event tag `tag`. A scan of a short list: a rebuild asks once
/// per event, and a handful of string compares beat hashing the tag.
pub fn codec_for(tag: &str) -> Option<&'static dyn PayloadCodec> {
    static BY_TAG: OnceLock<Vec<(&'static str, &'static dyn PayloadCodec)>> = OnceLock::new();
    BY_TAG
        .get_or_init(|| {
            let mut tags: Vec<(&'static str, &'static dyn PayloadCodec)> = Vec::new();
            let families = crate::tools::FAMILIES.iter().filter_map(|f| f.codec);
            for codec in families.chain(crate::tools::SHARED_CODECS.iter().copied()) {
                for tag in codec.types() {
                    assert!(
                        tags.iter().all(|(known, _)| known != tag),
                        "event type {tag:?} is registered by two families"
                    );
                    tags.push((tag, codec));
                }
            }
            tags
        })
        .iter()
        .find(|(known, _)| *known == tag)
        .map(|(_, codec)| *codec)
}

/// Decodes `bytes` as postcard of `T` (the usual binary form of a family payload).
pub fn postcard_decode<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, String> {
    postcard::from_bytes(bytes).map_err(|e| format!("payload: {e}"))
}

/// Appends postcard of `value` to `out`.
pub fn postcard_encode<T: Serialize>(value: &T, out: &mut Vec<u8>) {
    postcard::to_io(value, out).expect("writing to a Vec cannot fail");
}

/// A call record in a family's binary row (fields in this order: every family that keeps
/// its call stores it so; the thinking family's rows of every format do).
#[derive(Serialize, Deserialize)]
pub struct StoredCall<'a> {
    tool: &'a str,
    /// Compact JSON text, exactly as hashed.
    raw_arguments: &'a str,
    duration_us: u64,
}

impl<'a> StoredCall<'a> {
    pub fn of(call: &'a CallRecord) -> Self {
        StoredCall {
            tool: &call.tool,
            raw_arguments: call.raw_arguments.as_json(),
            duration_us: call.duration_us,
        }
    }

    /// The call record, without its arguments for a fold.
    pub fn build(self, fields: DecodeFields) -> Result<CallRecord, String> {
        let raw_arguments = match fields {
            DecodeFields::All => RawArguments::from_json(self.raw_arguments.to_string())
                .map_err(|e| format!("call arguments: {e}"))?,
            DecodeFields::ToFold => RawArguments::null(),
        };
        Ok(CallRecord {
            tool: self.tool.to_string(),
            raw_arguments,
            duration_us: self.duration_us,
        })
    }
}
