//! The seam between the tool families and the text exports: what a family adds to the
//! Markdown and Mermaid of a session (the SVG and HTML pictures ask
//! [`super::picture::Pictures`]; the JSON asks the family's state in the tree).
//!
//! Owns: [`FamilyRender`] (the hooks a family implements, each a no-op by default,
//! among them its pieces of the MCP prompts: [`PromptResume`], [`resumable_id`]),
//! [`Registry`] (what the exports ask of the registered families) and [`Exports`] (what
//! a registry lists, as a value: the families' renderers in registry order, then those
//! no family owns, the provider's model calls; the session kinds' labels; the pictures).
//! Must not: name a family, or import `crate::tools`: the composition root builds the
//! product's [`Exports`] (`tools::families()` carries them in the ledger's
//! [`Families`]) and every renderer takes the one it is handed, as `event::family` and
//! `projection::tree::Folds` do. Nothing here is looked up.
//!
//! A hook reads its family's state from the tree (`tree.family::<T>()`) or a thought's
//! data (`node.data::<T>()`) and must be cheap when there is none of it (it runs for
//! every export). Every text a model wrote goes through the exports' escapers
//! ([`super::markdown::escape_inline`], [`super::mermaid::escape_label`] /
//! [`super::mermaid::push_label`]); ids and classes are generated or constant.

use super::picture::Pictures;
use crate::event::family::Families;
use crate::event::summary::SessionSummary;
use crate::event::{KindInfo, SessionKind};
use crate::projection::tree::{ThoughtNode, ThoughtTree};
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// The call that carries a session on, as a family proposes it (the `continue` prompt's
/// `resume`, which adds whether this server offers the tool).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PromptResume {
    /// The tool to call.
    pub tool: &'static str,
    /// The arguments we know.
    pub arguments: Value,
    /// What the model must fill in (none: nothing).
    pub fill: &'static [&'static str],
    /// A word on the session's state (a finalized plan…).
    pub note: Option<String>,
}

/// The id a tool takes back for a session: its alias when it has one (a plan's `dp-`
/// id), else its id (`session`).
pub(crate) fn resumable_id(summary: &SessionSummary, session: &str) -> String {
    summary
        .aliases
        .first()
        .cloned()
        .unwrap_or_else(|| session.to_string())
}

/// What a family adds to the Markdown and Mermaid exports.
pub(crate) trait FamilyRender: Sync {
    /// Markdown: lines under a thought carrying this family's data (after its quote).
    fn markdown_thought(&self, node: &ThoughtNode, out: &mut String) {
        let _ = (node, out);
    }

    /// Markdown: its sections, after the branches (a plan, branch nodes, model calls).
    fn markdown_sections(&self, tree: &ThoughtTree, out: &mut String) {
        let _ = (tree, out);
    }

    /// HTML: lines of plain text under the page's header (where the session's events
    /// came from), escaped by the page.
    fn header_notes(&self, tree: &ThoughtTree) -> Vec<String> {
        let _ = tree;
        Vec::new()
    }

    /// Mermaid: the whole diagram, when the family draws its sessions its own way.
    fn mermaid_instead(&self, tree: &ThoughtTree) -> Option<String> {
        let _ = tree;
        None
    }

    /// Mermaid: how many edges [`FamilyRender::mermaid_nodes`] draws (the header's count).
    fn mermaid_edges(&self, tree: &ThoughtTree) -> usize {
        let _ = tree;
        0
    }

    /// Mermaid: its class definitions, nodes and edges, after the core's class
    /// definitions; returns whether it drew any node (a session without thoughts then
    /// shows them instead of the placeholder).
    fn mermaid_nodes(&self, tree: &ThoughtTree, out: &mut String) -> bool {
        let _ = (tree, out);
        false
    }

    /// Mermaid: appended to the title of branch `branch`'s subgraph (generated text).
    fn mermaid_branch_title(&self, tree: &ThoughtTree, branch: &str, out: &mut String) {
        let _ = (tree, branch, out);
    }

    /// Mermaid: appended inside the label of a thought carrying this family's data
    /// (`scratch` is reused for cutting text).
    fn mermaid_thought(&self, node: &ThoughtNode, out: &mut String, scratch: &mut String) {
        let _ = (node, out, scratch);
    }

    /// Mermaid: its constant `classDef`s (class, style), for the checks of its output.
    #[cfg_attr(not(test), allow(dead_code))]
    fn mermaid_classes(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// Prompt `continue`: the key and value of where its state stands (a plan's phase,
    /// the last `last` steps or nodes), `None` when the session has none of it.
    fn prompt_state(&self, tree: &ThoughtTree, last: usize) -> Option<(&'static str, Value)> {
        let _ = (tree, last);
        None
    }

    /// Prompt `continue`: the call that carries the session on, when its state decides it
    /// (`session` is the session's id).
    fn prompt_resume(
        &self,
        tree: &ThoughtTree,
        summary: &SessionSummary,
        session: &str,
    ) -> Option<PromptResume> {
        let _ = (tree, summary, session);
        None
    }

    /// Prompt `continue`: whether it merged `branch` (a merged branch is not open).
    fn prompt_branch_merged(&self, tree: &ThoughtTree, branch: &str) -> bool {
        let _ = (tree, branch);
        false
    }

    /// Prompt `review`: the key and value of what a critic checks of its state
    /// (evaluations, scores, confidences), `None` when the session has none of it.
    fn prompt_review(&self, tree: &ThoughtTree) -> Option<(&'static str, Value)> {
        let _ = tree;
        None
    }
}

/// What the exports ask of the registered families (`tools` implements it over its
/// families; [`Exports::of`] reads it once).
pub(crate) trait Registry: Sync {
    /// Every family's picture registration, in registry order.
    fn pictures(&self) -> Vec<&'static Pictures>;
    /// Every registered session kind (how a Markdown export heads a session).
    fn kinds(&self) -> Vec<&'static KindInfo>;
    /// Every renderer: the families' in registry order, then the shared ones.
    fn renders(&self) -> Vec<&'static dyn FamilyRender>;
}

/// The families' exports as a value: their renderers (Markdown, Mermaid, the HTML page's
/// notes, the prompts' pieces), their session kinds' labels and their pictures (SVG,
/// HTML). Built at the composition root, carried by the ledger's [`Families`]
/// ([`Exports::of_families`]); every renderer takes the one it is handed. Cloning
/// shares the lists (one `Arc`).
#[derive(Clone)]
pub struct Exports(Arc<ExportLists>);

struct ExportLists {
    renders: Vec<&'static dyn FamilyRender>,
    kinds: Vec<&'static KindInfo>,
    pictures: Vec<&'static Pictures>,
}

impl fmt::Debug for Exports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.kinds.iter().map(|info| info.kind.as_str()))
            .finish()
    }
}

impl Exports {
    /// The exports a registry lists.
    pub(crate) fn of(registry: &dyn Registry) -> Self {
        Exports(Arc::new(ExportLists {
            renders: registry.renders(),
            kinds: registry.kinds(),
            pictures: registry.pictures(),
        }))
    }

    /// No family's: the core's renderings alone (a session is headed "Session").
    pub(crate) fn none() -> Self {
        Exports(Arc::new(ExportLists {
            renders: Vec::new(),
            kinds: Vec::new(),
            pictures: Vec::new(),
        }))
    }

    /// The exports `families` carry (the composition root's), else none.
    pub fn of_families(families: &Families) -> Self {
        families
            .carried::<Exports>()
            .cloned()
            .unwrap_or_else(Exports::none)
    }

    /// Every renderer: the families' in registry order, then the shared ones.
    pub(crate) fn renders(&self) -> &[&'static dyn FamilyRender] {
        &self.0.renders
    }

    /// Every family's picture registration, in registry order.
    pub(crate) fn pictures(&self) -> &[&'static Pictures] {
        &self.0.pictures
    }

    /// The heading label of session kind `kind` ("Thinking session"), if it is registered.
    pub(crate) fn kind_label(&self, kind: SessionKind) -> Option<&'static str> {
        self.0
            .kinds
            .iter()
            .find(|info| info.kind == kind)
            .map(|info| info.label)
    }
}
