//! The agent family's event: `branch_node_created` (a `create_branch` node with the
//! model's full answer), its codec, and its folds. A `chat_agent` call records only the
//! provider's `model_call_recorded` ([`crate::provider::record`]).
//!
//! Owns: [`BranchNodeCreated`], [`AGENT_CODEC`]. Must not: change the written JSON
//! without bumping [`AGENT_SCHEMA`] and reading the old one.

use crate::event::family::{JsonCodec, SummaryFields, json_encode, read_part};
use crate::event::summary::SessionSummary;
use crate::event::{CallRecord, FamilyEvent, FamilyPayload, PayloadCodec};
use crate::projection::tree::FoldTree;
use crate::projection::tree::ThoughtTree;
use crate::tools::agent::node::{AgentNode, AgentNodes, AgentSummary, FAMILY, FoldedNode};
use serde::{Deserialize, Serialize};

/// Schema of the agent family's payloads written by this build.
pub(crate) const AGENT_SCHEMA: u32 = 1;
/// Tag of a branch node.
pub(crate) const BRANCH_NODE_CREATED: &str = "branch_node_created";

/// A node `create_branch` made. Written as `{"type": "branch_node_created", <node
/// fields>, "call": {…}}`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BranchNodeCreated {
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
        json_encode(self, out);
    }

    fn summarize(&self, summary: &mut SessionSummary, _new_branch: bool) {
        summary.part_mut::<AgentSummary>().agent_nodes += 1;
    }
}

impl FoldTree for BranchNodeCreated {
    fn fold_tree(self, seq: u64, at: u64, tree: &mut ThoughtTree) {
        tree.family_or_default::<AgentNodes>().0.push(FoldedNode {
            seq,
            at,
            node: self.node,
        });
    }
}

/// The agent family's codec: its one event, stored as its JSON.
pub(crate) static AGENT_CODEC: JsonCodec = JsonCodec {
    family: FAMILY,
    types: &[BRANCH_NODE_CREATED],
    schema: AGENT_SCHEMA,
    owner: "the agent family",
    row: "agent",
    read: read_node,
    summary: Some(SummaryFields {
        keys: crate::tools::agent::node::SUMMARY_KEYS,
        read: read_part::<AgentSummary>,
    }),
};

fn read_node(json: &str) -> Result<FamilyPayload, serde_json::Error> {
    let read: Read = serde_json::from_str(json)?;
    Ok(FamilyPayload::new(BranchNodeCreated {
        node: read.node,
        call: read.call,
    }))
}
