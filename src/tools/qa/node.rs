//! What a verification step adds to its thought: [`QaNode`] (its target, workflow and
//! tools, written flat into the thought's JSON) and how the Markdown and Mermaid exports
//! show it ([`RENDER`]).
//!
//! Owns: [`QaNode`], [`StandIn`], [`RENDER`] (registered as the family's `render`). Must
//! not: put a model-written text anywhere but through the exports' escapers.

use crate::export::family::FamilyRender;
use crate::export::markdown::{escape_inline, or_none};
use crate::export::mermaid::{LABEL_BREAK, push_label};
use crate::projection::family::NodeData;
use crate::projection::tree::ThoughtNode;
use serde::Serialize;
use std::fmt::Write as _;

/// Most characters of a verification step's tool list (used, or recommended next) shown
/// in its Mermaid node label.
pub(crate) const QA_TOOLS_MAX_CHARS: usize = 60;

/// What a verification step (`sequentialthinking_qa`) adds to its thought.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct QaNode {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification_target: Option<String>,
    /// The workflow the step was routed to.
    pub workflow: String,
    /// Tools of the caller's own step (`current_step.recommended_tools`): what it used.
    pub used_tools: Vec<String>,
    /// Tools the answer recommended for the next step.
    pub recommended_tools: Vec<String>,
    /// Recommended tools that stand in for a tool of the workflow the caller lacks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stand_ins: Vec<StandIn>,
}

/// A recommended tool standing in for one the caller does not have.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StandIn {
    pub tool: String,
    pub stands_in_for: String,
}

impl NodeData for QaNode {
    fn family(&self) -> &'static str {
        "qa"
    }
}

/// The qa family's pieces of the Markdown and Mermaid exports.
pub(crate) struct QaRender;

/// The one instance, registered with the family.
pub(crate) static RENDER: QaRender = QaRender;

impl FamilyRender for QaRender {
    /// The step's target, workflow and tools, under its thought.
    fn markdown_thought(&self, node: &ThoughtNode, out: &mut String) {
        let Some(qa) = node.data::<QaNode>() else {
            return;
        };
        if let Some(target) = &qa.verification_target {
            let _ = writeln!(out, "- **Target:** {}", or_none(escape_inline(target)));
        }
        let _ = writeln!(
            out,
            "- **Workflow:** {}",
            or_none(escape_inline(&qa.workflow))
        );
        for (label, tools) in [
            ("Used tools", &qa.used_tools),
            ("Recommended next", &qa.recommended_tools),
        ] {
            if !tools.is_empty() {
                let names: Vec<String> = tools.iter().map(|t| escape_inline(t)).collect();
                let _ = writeln!(out, "- **{label}:** {}", names.join(", "));
            }
        }
        out.push('\n');
    }

    /// The step's tools, on their own lines of its label: the ones its own step used and
    /// the ones recommended next (names are the model's text: cut and escaped).
    fn mermaid_thought(&self, node: &ThoughtNode, out: &mut String, scratch: &mut String) {
        let Some(qa) = node.data::<QaNode>() else {
            return;
        };
        for (marker, tools) in [
            ("🔧 used ", &qa.used_tools),
            ("👉 next ", &qa.recommended_tools),
        ] {
            if tools.is_empty() {
                continue;
            }
            out.push_str(LABEL_BREAK);
            out.push_str(marker);
            push_label(out, scratch, &tools.join(", "), QA_TOOLS_MAX_CHARS);
        }
    }
}
