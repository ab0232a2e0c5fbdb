//! The thinking family's events: what `sequentialthinking` and `think` record, their one
//! codec, and how they fold into the summary and the thought tree.
//!
//! Owns: [`SequentialThought`], [`ThinkThought`], [`ThinkingEvent`] (tags
//! `thought_recorded` and `think_recorded`, schema [`THINKING_SCHEMA`]) and
//! [`THINKING_CODEC`]. Must not: change a stored layout ([`StoredThought`],
//! [`StoredThink`] are also the layout of the rows builds before families wrote) or a
//! JSON field name without bumping the schema and reading the old one.

use crate::event::family::{StoredCall, postcard_decode, postcard_encode, postcard_take};
use crate::event::summary::SessionSummary;
use crate::event::{
    CallRecord, CodecError, DecodeFields, FamilyEvent, FamilyPayload, PayloadCodec,
};
use crate::projection::tree::FoldTree;
use crate::projection::tree::{ThoughtNode, ThoughtTree};
use serde::{Deserialize, Serialize};

/// Schema of the thinking family's payloads written by this build.
pub(crate) const THINKING_SCHEMA: u32 = 1;
/// Tag of a `sequentialthinking` thought.
pub(crate) const THOUGHT_RECORDED: &str = "thought_recorded";
/// Tag of a `think` thought.
pub(crate) const THINK_RECORDED: &str = "think_recorded";

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
    /// Its node in the tree, as event `seq` committed at `at` by `tool` (the qa family's
    /// steps are thoughts too and add their own data to this node).
    pub(crate) fn into_node(self, seq: u64, at: u64, tool: String) -> ThoughtNode {
        let branch_id = self.branch().map(|(id, _)| id.to_string());
        let mut node = ThoughtNode::new(seq, at, tool, self.thought_number, self.thought);
        node.total_thoughts = Some(self.total_thoughts);
        node.next_thought_needed = Some(self.next_thought_needed);
        node.is_revision = self.is_revision;
        node.revises_thought = self.revises_thought;
        node.branch_from_thought = self.branch_from_thought;
        node.branch_id = branch_id;
        node.needs_more_thoughts = self.needs_more_thoughts;
        node
    }

    /// The branch this thought belongs to: recorded only when both a branch point ≥ 1 and a
    /// non-empty id are given (the reference server's rule).
    pub(crate) fn branch(&self) -> Option<(&str, u64)> {
        match (self.branch_from_thought, self.branch_id.as_deref()) {
            (Some(from), Some(id)) if from >= 1 && !id.is_empty() => Some((id, from)),
            _ => None,
        }
    }

    /// The thought this one revises, when it is a revision.
    pub(crate) fn revision_of(&self) -> Option<u64> {
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

/// What the thinking tools record. Written tag first, thought fields flattened, then the
/// call (the JSON every earlier build wrote and hashed).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ThinkingEvent {
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
}

impl FamilyEvent for ThinkingEvent {
    fn codec(&self) -> &'static dyn PayloadCodec {
        &THINKING_CODEC
    }

    fn type_name(&self) -> &'static str {
        match self {
            ThinkingEvent::ThoughtRecorded { .. } => THOUGHT_RECORDED,
            ThinkingEvent::ThinkRecorded { .. } => THINK_RECORDED,
        }
    }

    fn text(&self) -> Option<&str> {
        match self {
            ThinkingEvent::ThoughtRecorded { thought, .. } => Some(&thought.thought),
            ThinkingEvent::ThinkRecorded { thought, .. } => Some(&thought.thought),
        }
    }

    fn call(&self) -> Option<&CallRecord> {
        match self {
            ThinkingEvent::ThoughtRecorded { call, .. }
            | ThinkingEvent::ThinkRecorded { call, .. } => Some(call),
        }
    }

    fn branch(&self) -> Option<&str> {
        match self {
            ThinkingEvent::ThoughtRecorded { thought, .. } => thought.branch().map(|(id, _)| id),
            ThinkingEvent::ThinkRecorded { .. } => None,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            ThinkingEvent::ThoughtRecorded { thought, call } => {
                postcard_encode(&StoredThought::of(thought, call), out)
            }
            ThinkingEvent::ThinkRecorded { thought, call } => {
                postcard_encode(&StoredThink::of(thought, call), out)
            }
        }
    }

    fn summarize(&self, summary: &mut SessionSummary, new_branch: bool) {
        summary.thoughts += 1;
        if let ThinkingEvent::ThoughtRecorded { thought, .. } = self {
            summary.total_thoughts = Some(thought.total_thoughts);
            summary.next_thought_needed = Some(thought.next_thought_needed);
            if let Some((id, _)) = thought.branch()
                && new_branch
            {
                summary.branches.push(id.to_string());
            }
        }
    }
}

impl FoldTree for ThinkingEvent {
    fn fold_tree(self, seq: u64, at: u64, tree: &mut ThoughtTree) {
        let node = match self {
            ThinkingEvent::ThoughtRecorded { thought, call } => {
                thought.into_node(seq, at, call.tool)
            }
            ThinkingEvent::ThinkRecorded { thought, call } => {
                let mut node =
                    ThoughtNode::new(seq, at, call.tool, thought.thought_index, thought.thought);
                node.thread_purpose = Some(thought.thread_purpose);
                node.tool_recommendation =
                    Some(thought.tool_recommendation).filter(|t| !t.eq_ignore_ascii_case("none"));
                node.open_items = thought.open_items;
                node
            }
        };
        tree.add_thought(node);
    }
}

/// The thinking family's codec.
pub(crate) struct ThinkingCodec;

/// The one instance, registered with the family.
pub(crate) static THINKING_CODEC: ThinkingCodec = ThinkingCodec;

impl PayloadCodec for ThinkingCodec {
    fn family(&self) -> &'static str {
        "thinking"
    }

    fn schema(&self) -> u32 {
        THINKING_SCHEMA
    }

    fn types(&self) -> &'static [&'static str] {
        &[THOUGHT_RECORDED, THINK_RECORDED]
    }

    fn decode(
        &self,
        tag: &str,
        schema: u32,
        bytes: &[u8],
        fields: DecodeFields,
    ) -> Result<FamilyPayload, CodecError> {
        self.refuse_newer(schema)?;
        let event = match tag {
            THOUGHT_RECORDED => postcard_decode::<StoredThought<'_>>(bytes)?.build(fields)?,
            THINK_RECORDED => postcard_decode::<StoredThink<'_>>(bytes)?.build(fields)?,
            other => return Err(no_event(other)),
        };
        Ok(FamilyPayload::new(event))
    }

    fn decode_json(&self, tag: &str, schema: u32, json: &str) -> Result<FamilyPayload, CodecError> {
        self.refuse_newer(schema)?;
        let wire: ThinkingWire = serde_json::from_str(json).map_err(CodecError::payload)?;
        if wire.tag != tag {
            return Err(CodecError::TagMismatch {
                found: wire.tag,
                expected: tag.to_string(),
            });
        }
        wire.into_event().map(FamilyPayload::new)
    }

    /// The rows before families (`0x01`): variant 1 was a `thought_recorded`, variant 2 a
    /// `think_recorded`, each held as the same stored struct as today's rows.
    fn decode_closed_enum_variant<'a>(
        &self,
        variant: u32,
        bytes: &'a [u8],
        fields: DecodeFields,
    ) -> Option<Result<(FamilyPayload, &'a [u8]), CodecError>> {
        let decoded = match variant {
            CLOSED_ENUM_THOUGHT => postcard_take::<StoredThought<'_>>(bytes)
                .and_then(|(stored, rest)| Ok((stored.build(fields)?, rest))),
            CLOSED_ENUM_THINK => postcard_take::<StoredThink<'_>>(bytes)
                .and_then(|(stored, rest)| Ok((stored.build(fields)?, rest))),
            _ => return None,
        };
        Some(decoded.map(|(event, rest)| (FamilyPayload::new(event), rest)))
    }
}

/// Variants of the closed payload enum of `0x01` rows that were this family's.
const CLOSED_ENUM_THOUGHT: u32 = 1;
/// See [`CLOSED_ENUM_THOUGHT`].
const CLOSED_ENUM_THINK: u32 = 2;

fn no_event(tag: &str) -> CodecError {
    CodecError::Refused(format!("the thinking family has no event {tag:?}"))
}

/// Every field of both events, flat, as read from JSON in one pass. (serde's derived
/// reader for a tagged enum with flattened fields buffers each payload first, and cannot
/// hand the call's raw arguments through.)
#[derive(Deserialize)]
struct ThinkingWire {
    #[serde(rename = "type")]
    tag: String,
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
}

fn required<T>(value: Option<T>, field: &'static str) -> Result<T, CodecError> {
    value.ok_or(CodecError::MissingField(field))
}

impl ThinkingWire {
    fn into_event(self) -> Result<ThinkingEvent, CodecError> {
        Ok(match self.tag.as_str() {
            THOUGHT_RECORDED => ThinkingEvent::ThoughtRecorded {
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
            THINK_RECORDED => ThinkingEvent::ThinkRecorded {
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
            other => return Err(no_event(other)),
        })
    }
}

/// The argument both tools send their thought in: a row keeps its text once, in the
/// payload ([`StoredCall::of_text_once`]).
const THOUGHT_ARGUMENT: &str = "thought";

/// A `thought_recorded` payload as stored in a binary row; strings borrow from the row.
/// Frozen: rows written before families existed hold exactly these fields in this order.
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredThought<'a> {
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
}

/// A `think_recorded` payload as stored in a binary row. Frozen like [`StoredThought`].
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredThink<'a> {
    thread_purpose: &'a str,
    thought: &'a str,
    thought_index: u64,
    tool_recommendation: &'a str,
    left_to_be_done: &'a str,
    #[serde(borrow)]
    open_items: Vec<&'a str>,
    #[serde(borrow)]
    call: StoredCall<'a>,
}

impl<'a> StoredThought<'a> {
    fn of(thought: &'a SequentialThought, call: &'a CallRecord) -> Self {
        StoredThought {
            thought: &thought.thought,
            thought_number: thought.thought_number,
            total_thoughts: thought.total_thoughts,
            next_thought_needed: thought.next_thought_needed,
            is_revision: thought.is_revision,
            revises_thought: thought.revises_thought,
            branch_from_thought: thought.branch_from_thought,
            branch_id: thought.branch_id.as_deref(),
            needs_more_thoughts: thought.needs_more_thoughts,
            call: StoredCall::of_text_once(call, THOUGHT_ARGUMENT, &thought.thought),
        }
    }

    /// The event this row holds.
    pub(crate) fn build(self, fields: DecodeFields) -> Result<ThinkingEvent, CodecError> {
        Ok(ThinkingEvent::ThoughtRecorded {
            thought: SequentialThought {
                thought: self.thought.to_string(),
                thought_number: self.thought_number,
                total_thoughts: self.total_thoughts,
                next_thought_needed: self.next_thought_needed,
                is_revision: self.is_revision,
                revises_thought: self.revises_thought,
                branch_from_thought: self.branch_from_thought,
                branch_id: self.branch_id.map(str::to_string),
                needs_more_thoughts: self.needs_more_thoughts,
            },
            call: self
                .call
                .build_with_text(fields, THOUGHT_ARGUMENT, self.thought)?,
        })
    }
}

impl<'a> StoredThink<'a> {
    fn of(thought: &'a ThinkThought, call: &'a CallRecord) -> Self {
        StoredThink {
            thread_purpose: &thought.thread_purpose,
            thought: &thought.thought,
            thought_index: thought.thought_index,
            tool_recommendation: &thought.tool_recommendation,
            left_to_be_done: &thought.left_to_be_done,
            open_items: thought.open_items.iter().map(String::as_str).collect(),
            call: StoredCall::of_text_once(call, THOUGHT_ARGUMENT, &thought.thought),
        }
    }

    /// The event this row holds.
    pub(crate) fn build(self, fields: DecodeFields) -> Result<ThinkingEvent, CodecError> {
        Ok(ThinkingEvent::ThinkRecorded {
            thought: ThinkThought {
                thread_purpose: self.thread_purpose.to_string(),
                thought: self.thought.to_string(),
                thought_index: self.thought_index,
                tool_recommendation: self.tool_recommendation.to_string(),
                left_to_be_done: self.left_to_be_done.to_string(),
                open_items: self.open_items.into_iter().map(str::to_string).collect(),
            },
            call: self
                .call
                .build_with_text(fields, THOUGHT_ARGUMENT, self.thought)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::FamilyPayload;
    use serde_json::json;

    fn thought(text: &str, arguments: serde_json::Value) -> ThinkingEvent {
        ThinkingEvent::ThoughtRecorded {
            thought: SequentialThought {
                thought: text.into(),
                thought_number: 1,
                total_thoughts: 1,
                next_thought_needed: false,
                is_revision: None,
                revises_thought: None,
                branch_from_thought: None,
                branch_id: None,
                needs_more_thoughts: None,
            },
            call: CallRecord {
                tool: "sequentialthinking".into(),
                raw_arguments: arguments.into(),
                duration_us: 3,
            },
        }
    }

    /// The row's bytes, and the event read back from them with every field, as JSON.
    fn round_trip(event: ThinkingEvent) -> (usize, String, String) {
        let mut row = Vec::new();
        event.encode(&mut row);
        let back = THINKING_CODEC
            .decode(THOUGHT_RECORDED, THINKING_SCHEMA, &row, DecodeFields::All)
            .unwrap();
        let json = |payload: &FamilyPayload| serde_json::to_string(payload).unwrap();
        (row.len(), json(&FamilyPayload::new(event)), json(&back))
    }

    #[test]
    fn a_thought_is_stored_once_and_read_back_byte_for_byte() {
        let text = "a long thought, \"quoted\", \\ back-slashed, ünïcode 🧠\n".repeat(20_000);
        let arguments = json!({"thought": text, "thoughtNumber": "1", "nextThoughtNeeded": false});
        let (row, written, read) = round_trip(thought(&text, arguments));
        assert_eq!(read, written);
        assert!(row < text.len() + 200, "{row} bytes for {}", text.len());
        // Nothing to escape (most thoughts), and the member found after a nested one
        // whose value differs.
        let plain = "plain words ünïcode 🧠 ".repeat(5_000);
        for arguments in [
            json!({"thought": plain, "thoughtNumber": 1}),
            json!({"meta": {"thought": "other"}, "thought": plain}),
        ] {
            let (row, written, read) = round_trip(thought(&plain, arguments));
            assert_eq!(read, written);
            assert!(row < plain.len() + 200, "{row} bytes for {}", plain.len());
        }
    }

    #[test]
    fn arguments_that_differ_from_the_thought_are_stored_whole() {
        for (text, arguments) in [
            // Coerced or trimmed: the argument is not the recorded text.
            ("x", json!({"thought": " x ", "thoughtNumber": 1})),
            ("7", json!({"thought": 7})),
            // The same member nested as well, and an argument that looks like the marker.
            (
                "y",
                json!({"meta": {"thought": "y"}, "thought": "y", "z": "\"thought\":@"}),
            ),
            ("", json!({})),
            ("@", json!({"thought": "@"})),
        ] {
            let (_, written, read) = round_trip(thought(text, arguments));
            assert_eq!(read, written);
        }
    }
}
