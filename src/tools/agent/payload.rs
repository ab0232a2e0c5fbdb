//! The agent family's event: `branch_node_created` (a `create_branch` node with the
//! model's full answer), its codec, and its folds. A `chat_agent` call records only the
//! provider's `model_call_recorded` ([`crate::provider::record`]).
//!
//! Owns: [`BranchNodeCreated`], [`AGENT_CODEC`]. Must not: change the written JSON
//! without bumping [`AGENT_SCHEMA`] and reading the old one.

use crate::event::{
    CallRecord, CodecError, DecodeFields, FamilyEvent, FamilyPayload, PayloadCodec,
};
use crate::projection::family::SummaryPart;
use crate::projection::summary::SessionSummary;
use crate::projection::tree::ThoughtTree;
use crate::tools::agent::node::{AgentNode, AgentNodes, AgentSummary, FAMILY, FoldedNode};
use serde::{Deserialize, Serialize};

/// Schema of the agent family's payloads written by this build.
pub const AGENT_SCHEMA: u32 = 1;
/// Tag of a branch node.
pub const BRANCH_NODE_CREATED: &str = "branch_node_created";

/// A node `create_branch` made. Written as `{"type": "branch_node_created", <node
/// fields>, "call": {…}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct BranchNodeCreated {
    pub node: AgentNode,
    pub call: CallRecord,
}

#[derive(Serialize)]
struct Written<'a> {
    #[serde(rename = "type")]
    tag: &'static str,
    node: &'a AgentNode,
    call: &'a CallRecord,
}

#[derive(Deserialize)]
struct Read {
    node: AgentNode,
    call: CallRecord,
}

impl Serialize for BranchNodeCreated {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Written {
            tag: BRANCH_NODE_CREATED,
            node: &self.node,
            call: &self.call,
        }
        .serialize(s)
    }
}

impl FamilyEvent for BranchNodeCreated {
    fn codec(&self) -> &'static dyn PayloadCodec {
        &AGENT_CODEC
    }

    fn type_name(&self) -> &'static str {
        BRANCH_NODE_CREATED
    }

    fn text(&self) -> Option<&str> {
        Some(&self.node.conclusion)
    }

    fn search_extra(&self) -> Option<&str> {
        Some(&self.node.input_text)
    }

    fn call(&self) -> Option<&CallRecord> {
        Some(&self.call)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        serde_json::to_writer(out, self).expect("a node serializes");
    }

    fn summarize(&self, summary: &mut SessionSummary, _new_branch: bool) {
        summary.part_mut::<AgentSummary>().agent_nodes += 1;
    }

    fn fold(self: Box<Self>, seq: u64, at: u64, tree: &mut ThoughtTree) {
        tree.family_or_default::<AgentNodes>().0.push(FoldedNode {
            seq,
            at,
            node: self.node,
        });
    }
}

/// The agent family's codec.
pub struct AgentCodec;

pub static AGENT_CODEC: AgentCodec = AgentCodec;

impl PayloadCodec for AgentCodec {
    fn family(&self) -> &'static str {
        FAMILY
    }

    fn summary_keys(&self) -> &'static [&'static str] {
        crate::tools::agent::node::SUMMARY_KEYS
    }

    fn read_summary(
        &self,
        fields: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Box<dyn SummaryPart>, serde_json::Error> {
        let part: AgentSummary = serde_json::from_value(fields.into())?;
        Ok(Box::new(part))
    }

    fn schema(&self) -> u32 {
        AGENT_SCHEMA
    }

    fn types(&self) -> &'static [&'static str] {
        &[BRANCH_NODE_CREATED]
    }

    fn decode(
        &self,
        tag: &str,
        schema: u32,
        bytes: &[u8],
        _fields: DecodeFields,
    ) -> Result<FamilyPayload, CodecError> {
        let json = std::str::from_utf8(bytes).map_err(|source| CodecError::NotUtf8 {
            what: "agent",
            source,
        })?;
        self.decode_json(tag, schema, json)
    }

    fn decode_json(&self, tag: &str, schema: u32, json: &str) -> Result<FamilyPayload, CodecError> {
        if tag != BRANCH_NODE_CREATED {
            return Err(CodecError::Refused(format!(
                "the agent family has no event type {tag:?}"
            )));
        }
        if schema != AGENT_SCHEMA {
            return Err(CodecError::only_schema(tag, schema, AGENT_SCHEMA));
        }
        let read: Read = serde_json::from_str(json).map_err(CodecError::payload)?;
        Ok(FamilyPayload::new(BranchNodeCreated {
            node: read.node,
            call: read.call,
        }))
    }
}
