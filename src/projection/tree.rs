//! The thought tree: every thought of a session as a petgraph node, linked by `next`
//! (the previous thought on the same line), `revises` (to the thought a revision revises)
//! and `branches_from` (from a branch point to the first thought of its branch).
//!
//! Built by folding events in seq order ([`ThoughtTree::fold`]; each family's events add
//! their nodes through [`FoldTree`], the hook defined here); replaying to seq N is
//! folding the first N. Edges only ever point from an earlier node to a later one or from
//! a later one back to an earlier one that already exists, so a fold can never loop; a
//! reference to a thought that does not exist is recorded as an [`Anomaly`] and left
//! without an edge. Must not: write, do I/O, or reorder events.

use crate::event::family::Families;
use crate::event::summary::SessionSummary;
use crate::event::{Event, FamilyEvent, Payload, SessionId, SessionKind};
use crate::projection::family::{FamilyState, FamilyStates, NodeData, NodeExtension};
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::{EdgeRef, IntoEdgeReferences};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;

/// Hash maps of the fold: keyed by thought numbers and branch ids the fold itself
/// inserts, so a fast non-keyed hash is enough (a rebuild does one insert per thought).
type FoldMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Serializes a time in ms since the epoch as ISO 8601 ([`crate::event::format_time`]).
fn serialize_time<S: serde::Serializer>(at_ms: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&crate::event::format_time(*at_ms))
}

/// One recorded thought (from `sequentialthinking`, `think`, or any family that records
/// thoughts): build it with [`ThoughtNode::new`] and set what the thought has.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThoughtNode {
    /// Seq of the event that recorded it.
    pub seq: u64,
    /// Commit time, ms since the epoch; serialized as ISO 8601 (UTC, milliseconds) like
    /// every other time in answers and exports.
    #[serde(serialize_with = "serialize_time")]
    pub at: u64,
    /// Tool that wrote it, as called.
    pub tool: String,
    /// Who wrote it ([`Event::actor`]), when the event names someone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// `thoughtNumber` (or `thought_index` for think).
    pub thought_number: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_thoughts: Option<u64>,
    pub thought: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_thought_needed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_revision: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revises_thought: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_from_thought: Option<u64>,
    /// The branch it belongs to, when recorded as a branch thought.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs_more_thoughts: Option<bool>,
    /// think: the thread purpose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_purpose: Option<String>,
    /// think: the recommended tool, when one was named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_recommendation: Option<String>,
    /// think: the open items of `left_to_be_done`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub open_items: Vec<String>,
    /// What its family adds to it (a verification step's target, workflow and tools),
    /// written flat after the fields above; absent for a plain thought, so its export is
    /// unchanged.
    #[serde(flatten)]
    pub data: Option<NodeExtension>,
}

impl ThoughtNode {
    /// A thought recorded by event `seq` at `at` through `tool`, numbered
    /// `thought_number`, with nothing else set.
    pub(crate) fn new(
        seq: u64,
        at: u64,
        tool: String,
        thought_number: u64,
        thought: String,
    ) -> Self {
        ThoughtNode {
            seq,
            at,
            tool,
            actor: None,
            thought_number,
            total_thoughts: None,
            thought,
            next_thought_needed: None,
            is_revision: None,
            revises_thought: None,
            branch_from_thought: None,
            branch_id: None,
            needs_more_thoughts: None,
            thread_purpose: None,
            tool_recommendation: None,
            open_items: Vec::new(),
            data: None,
        }
    }

    /// Its family data, if it is a `T`.
    pub(crate) fn data<T: NodeData>(&self) -> Option<&T> {
        self.data.as_ref().and_then(NodeExtension::get)
    }
}

/// How two thoughts are related.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EdgeKind {
    /// The next thought on the same line (main line or one branch).
    Next,
    /// From a revision to the thought it revises.
    Revises,
    /// From a branch point to the first thought of the branch.
    BranchesFrom,
}

/// A branch of the session, in first-seen order.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Branch {
    pub id: String,
    /// The thought number it branched from (as first given).
    pub from_thought: u64,
    /// Thoughts recorded on it.
    pub thoughts: u64,
    /// Seq of its first thought.
    pub first_seq: u64,
}

/// Something in the log that does not fit together; reported, never fatal.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Anomaly {
    /// `revisesThought` names a thought that does not exist (yet) in the session.
    DanglingRevision { seq: u64, revises_thought: u64 },
    /// `branchFromThought` names a thought that does not exist (yet) in the session.
    DanglingBranchPoint { seq: u64, branch_from_thought: u64 },
    /// A thought revises or branches from itself.
    SelfReference { seq: u64, thought_number: u64 },
    /// The graph has a cycle (impossible for a log this build wrote; a crafted one).
    Cycle,
}

/// An edge as exported: seqs of both ends.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct EdgeView {
    pub from: u64,
    pub to: u64,
    pub kind: EdgeKind,
}

/// Most thoughts [`ThoughtTree::with_capacity`] reserves room for up front: a longer
/// session grows as usual, and a damaged head claiming an absurd seq cannot make the fold
/// allocate for it.
pub(crate) const PRESIZE_LIMIT: usize = 1 << 20;

/// The latest thought with one number, as references resolve it.
#[derive(Clone, Copy, Debug)]
struct Latest {
    /// On any line.
    any: NodeIndex,
    /// On the main line, if it has one.
    main: Option<NodeIndex>,
}

/// The fold of one session's events.
#[derive(Clone, Debug)]
pub struct ThoughtTree {
    pub(crate) session: SessionId,
    pub(crate) summary: Option<SessionSummary>,
    /// Seq of the last event folded.
    pub at_seq: u64,
    pub(crate) graph: StableDiGraph<ThoughtNode, EdgeKind>,
    /// Nodes in seq order.
    pub(crate) order: Vec<NodeIndex>,
    pub(crate) branches: Vec<Branch>,
    pub(crate) anomalies: Vec<Anomaly>,
    /// What the families folded besides thoughts (plans, searches, branch nodes, model
    /// calls), one state per type: [`ThoughtTree::family`].
    pub(crate) families: FamilyStates,
    /// Position in `branches` of each branch id.
    branch_index: FoldMap<String, usize>,
    /// Last node of the main line (`None` key) and of each branch.
    line_tails: FoldMap<Option<String>, NodeIndex>,
    /// Latest node for each thought number: on any line, and on the main line.
    latest: FoldMap<u64, Latest>,
    /// Latest node for each thought number on each branch.
    latest_on_branch: FoldMap<String, FoldMap<u64, NodeIndex>>,
    /// The actor of each event that has one, in seq order ([`ThoughtTree::actor_at`]); a
    /// name repeated event after event is one shared string.
    actors: Vec<(u64, std::sync::Arc<str>)>,
    /// The actor of the event being folded: its thoughts get it.
    folding_actor: Option<String>,
    /// The folds its family events go through, and the order of the families' parts.
    folds: Folds,
}

impl ThoughtTree {
    pub(crate) fn new(session: SessionId, folds: &Folds) -> Self {
        ThoughtTree {
            session,
            summary: None,
            at_seq: 0,
            graph: StableDiGraph::new(),
            order: Vec::new(),
            branches: Vec::new(),
            anomalies: Vec::new(),
            families: FamilyStates::default(),
            branch_index: FoldMap::default(),
            line_tails: FoldMap::default(),
            latest: FoldMap::default(),
            latest_on_branch: FoldMap::default(),
            actors: Vec::new(),
            folding_actor: None,
            folds: folds.clone(),
        }
    }

    /// An empty tree with room for `events` thoughts, for a fold that knows how many
    /// events it will read (no regrowing of the graph and maps on a long session).
    pub(crate) fn with_capacity(session: SessionId, events: usize, folds: &Folds) -> Self {
        let events = events.min(PRESIZE_LIMIT);
        let mut tree = ThoughtTree::new(session, folds);
        tree.graph = StableDiGraph::with_capacity(events, events.saturating_mul(2));
        tree.order.reserve(events);
        tree.latest.reserve(events);
        tree
    }

    /// Folds `events` (in seq order) into a new tree, through `folds`.
    pub fn build(
        session: SessionId,
        events: impl IntoIterator<Item = Event>,
        folds: &Folds,
    ) -> Self {
        let mut tree = ThoughtTree::new(session, folds);
        for event in events {
            tree.fold(event);
        }
        tree.finish();
        tree
    }

    /// Checks the whole graph once after a fold, without recursion (a session can hold
    /// hundreds of thousands of thoughts). `next` and `branches_from` edges must point
    /// forward in seq and `revises` edges backward; then no path can return to its
    /// start. An edge breaking that (only a crafted log could) is reported as a cycle.
    pub(crate) fn finish(&mut self) {
        let out_of_order = self.graph.edge_references().any(|edge| {
            let (from, to) = (self.graph[edge.source()].seq, self.graph[edge.target()].seq);
            match edge.weight() {
                EdgeKind::Next | EdgeKind::BranchesFrom => from >= to,
                EdgeKind::Revises => from <= to,
            }
        });
        if out_of_order && !self.anomalies.contains(&Anomaly::Cycle) {
            self.anomalies.push(Anomaly::Cycle);
        }
    }

    pub(crate) fn kind(&self) -> Option<SessionKind> {
        self.summary.as_ref().map(|s| s.kind)
    }

    pub(crate) fn title(&self) -> &str {
        self.summary.as_ref().map_or("", |s| s.title.as_str())
    }

    /// Folds one event; its texts move into the tree instead of being copied (the
    /// rebuild path). Events of other sessions, and seqs not following the last one, are
    /// ignored (a fold of a crafted log never panics).
    pub(crate) fn fold(&mut self, mut event: Event) {
        if !self.follows(&event) {
            return;
        }
        self.at_seq = event.seq;
        if let Some(actor) = event.actor.take() {
            let name = match self.actors.last() {
                Some((_, last)) if **last == *actor => last.clone(),
                _ => actor.as_str().into(),
            };
            self.actors.push((event.seq, name));
            self.folding_actor = Some(actor);
        }
        match &mut self.summary {
            None => self.summary = SessionSummary::start(&event),
            Some(summary) => {
                let new_branch = event
                    .payload
                    .branch()
                    .is_some_and(|id| !self.branch_index.contains_key(id));
                summary.apply_known(&event, new_branch);
            }
        }
        if let Payload::Family(family) = event.payload {
            fold_into(family.into_event(), event.seq, event.at, self);
        }
        self.folding_actor = None;
    }

    /// Who wrote event `seq`, when it names someone.
    pub(crate) fn actor_at(&self, seq: u64) -> Option<&str> {
        self.actors
            .binary_search_by_key(&seq, |(at, _)| *at)
            .ok()
            .map(|index| &*self.actors[index].1)
    }

    /// The state family type `T` folded, if the session has one.
    pub(crate) fn family<T: FamilyState>(&self) -> Option<&T> {
        self.families.get()
    }

    /// The state of type `T`, to change (a family's fold).
    pub(crate) fn family_mut<T: FamilyState>(&mut self) -> Option<&mut T> {
        self.families.get_mut()
    }

    /// The state of type `T`, its default first if the session has none (a family's fold).
    pub(crate) fn family_or_default<T: FamilyState + Default>(&mut self) -> &mut T {
        self.families.get_or_default()
    }

    /// Sets the state of type `T`, replacing any (a family's fold).
    pub(crate) fn set_family<T: FamilyState>(&mut self, state: T) {
        self.families.set(state);
    }

    fn follows(&self, event: &Event) -> bool {
        event.session == self.session && Some(event.seq) == self.at_seq.checked_add(1)
    }

    /// Adds a thought: linked to the previous one on its line, to what it revises and to
    /// its branch point (the families' folds call this).
    pub(crate) fn add_thought(&mut self, mut node: ThoughtNode) {
        if node.actor.is_none() {
            node.actor.clone_from(&self.folding_actor);
        }
        let seq = node.seq;
        let number = node.thought_number;
        let line = node.branch_id.clone();
        let revises = if node.is_revision == Some(true) || node.revises_thought.is_some() {
            node.revises_thought
        } else {
            None
        };
        let branch_from = node.branch_id.as_ref().and(node.branch_from_thought);
        // Resolve references before this node exists, so nothing can point at itself.
        let revised = revises.map(|target| (target, self.resolve(&line, target)));
        let branch_point = branch_from.map(|target| (target, self.resolve(&None, target)));
        let index = self.graph.add_node(node);
        self.order.push(index);

        let previous_on_line = self.line_tails.get(&line).copied();
        match (&line, previous_on_line) {
            (_, Some(previous)) => {
                self.graph.add_edge(previous, index, EdgeKind::Next);
            }
            (Some(_), None) => {}
            (None, None) => {}
        }
        if let Some(branch_id) = &line {
            match self.branch_index.get(branch_id) {
                Some(&at) => self.branches[at].thoughts += 1,
                None => {
                    self.branch_index
                        .insert(branch_id.clone(), self.branches.len());
                    self.branches.push(Branch {
                        id: branch_id.clone(),
                        from_thought: branch_from.unwrap_or(0),
                        thoughts: 1,
                        first_seq: seq,
                    });
                }
            }
            if previous_on_line.is_none() {
                match branch_point {
                    Some((_, Some(point))) => {
                        self.graph.add_edge(point, index, EdgeKind::BranchesFrom);
                    }
                    Some((target, None)) => self.anomalies.push(if target == number {
                        Anomaly::SelfReference {
                            seq,
                            thought_number: number,
                        }
                    } else {
                        Anomaly::DanglingBranchPoint {
                            seq,
                            branch_from_thought: target,
                        }
                    }),
                    None => {}
                }
            }
        }
        match revised {
            Some((_, Some(target))) => {
                self.graph.add_edge(index, target, EdgeKind::Revises);
            }
            Some((target, None)) => self.anomalies.push(if target == number {
                Anomaly::SelfReference {
                    seq,
                    thought_number: number,
                }
            } else {
                Anomaly::DanglingRevision {
                    seq,
                    revises_thought: target,
                }
            }),
            None => {}
        }
        let latest = self.latest.entry(number).or_insert(Latest {
            any: index,
            main: None,
        });
        latest.any = index;
        match &line {
            None => latest.main = Some(index),
            Some(branch_id) => {
                self.latest_on_branch
                    .entry(branch_id.clone())
                    .or_default()
                    .insert(number, index);
            }
        }
        self.line_tails.insert(line, index);
    }

    /// The thought a reference to `number` from `line` means: the latest with that
    /// number on the same line, else on the main line, else on any line.
    fn resolve(&self, line: &Option<String>, number: u64) -> Option<NodeIndex> {
        let latest = self.latest.get(&number);
        line.as_deref()
            .and_then(|branch_id| self.latest_on_branch.get(branch_id)?.get(&number).copied())
            .or_else(|| latest.and_then(|l| l.main))
            .or_else(|| latest.map(|l| l.any))
    }

    /// Raises every numbered thought's total to at least `total`: a family whose count
    /// grows as it goes (the booster's steps) numbers all its thoughts against the count.
    pub(crate) fn raise_totals(&mut self, total: u64) {
        for node in self.graph.node_weights_mut() {
            if let Some(old) = node.total_thoughts.as_mut() {
                *old = (*old).max(total);
            }
        }
    }

    /// Thoughts in seq order.
    pub(crate) fn thoughts(&self) -> impl Iterator<Item = &ThoughtNode> {
        self.order.iter().map(|index| &self.graph[*index])
    }

    /// Every edge as (from seq, to seq, kind), sorted by the seqs.
    pub(crate) fn edges(&self) -> Vec<EdgeView> {
        let mut edges: Vec<EdgeView> = self
            .graph
            .edge_references()
            .map(|edge| EdgeView {
                from: self.graph[edge.source()].seq,
                to: self.graph[edge.target()].seq,
                kind: *edge.weight(),
            })
            .collect();
        edges.sort_by_key(|e| (e.from, e.to, e.kind as u8));
        edges
    }

    /// The whole tree as one JSON value (the `json` export and `replay_session`).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let summary = self.summary.as_ref();
        let mut json = serde_json::json!({
            "sessionId": self.session.to_string(),
            "kind": summary.map(|s| s.kind.as_str()),
            "title": self.title(),
            "status": summary.map(|s| s.status()),
            "atSeq": self.at_seq,
            "createdAt": summary.map(|s| crate::event::format_time(s.created_at)),
            "updatedAt": summary.map(|s| crate::event::format_time(s.updated_at)),
            "thoughtCount": summary.map_or(0, |s| s.thoughts),
            "branches": self.branches,
            "thoughts": self.thoughts().collect::<Vec<_>>(),
            "edges": self.edges(),
            "anomalies": self.anomalies,
        });
        // Who wrote which event, only when some event names someone.
        if !self.actors.is_empty() {
            let actors: serde_json::Map<String, serde_json::Value> = self
                .actors
                .iter()
                .map(|(seq, actor)| (seq.to_string(), (**actor).into()))
                .collect();
            json["actors"] = actors.into();
        }
        // Each family's part, when it holds something (every other export stays as it
        // was), in the registry's order.
        for state in self
            .families
            .in_registry_order(|name| self.folds.rank(name))
        {
            if let Some((key, value)) = state.json() {
                json[key] = value;
            }
        }
        json
    }
}

/// A payload type that folds into a thought tree (moving its texts): the projection's hook
/// on a family's events, implemented in the family's folder.
pub(crate) trait FoldTree: FamilyEvent + Sized {
    /// Folds it into `tree` as event `seq` committed at `at`.
    fn fold_tree(self, seq: u64, at: u64, tree: &mut ThoughtTree);
}

/// How some of a family's payloads fold into a tree, as the registry hands it to the
/// projection (see [`Registry`]). [`FoldOf`] is the one implementation a family needs.
pub(crate) trait Fold: Sync {
    /// Folds `event` if it is one of the payload types this fold knows; hands it back
    /// otherwise.
    fn fold(
        &self,
        event: Box<dyn FamilyEvent>,
        seq: u64,
        at: u64,
        tree: &mut ThoughtTree,
    ) -> Result<(), Box<dyn FamilyEvent>>;
}

/// The [`Fold`] of payloads of type `T` (a family registers one per payload type it
/// decodes to: `&FoldOf::<MyEvent>::NEW`).
pub(crate) struct FoldOf<T>(PhantomData<fn() -> T>);

impl<T> FoldOf<T> {
    /// The fold of `T` (a constant, for a family's static list).
    pub(crate) const NEW: FoldOf<T> = FoldOf(PhantomData);
}

impl<T: FoldTree> Fold for FoldOf<T> {
    fn fold(
        &self,
        event: Box<dyn FamilyEvent>,
        seq: u64,
        at: u64,
        tree: &mut ThoughtTree,
    ) -> Result<(), Box<dyn FamilyEvent>> {
        if !event.as_any().is::<T>() {
            return Err(event);
        }
        let event = event
            .into_any()
            .downcast::<T>()
            .expect("the type was just checked");
        event.fold_tree(seq, at, tree);
        Ok(())
    }
}

/// What the projections ask of the registered families: how their payloads fold into a
/// tree (`tools` implements it over its families; [`Folds::of`] reads it once).
pub(crate) trait Registry: Sync {
    /// Every registered fold: the families' in registry order, then the shared ones.
    fn folds(&self) -> Vec<&'static dyn Fold>;
    /// The family of every registered codec, in registration order: the order a tree's
    /// family states are written in.
    fn family_order(&self) -> Vec<&'static str>;
}

/// The families' folds as a value: how their payloads fold into a tree, and the order
/// their parts of a tree are written in. Built at the composition root, carried by the
/// ledger's [`Families`] ([`Folds::of_families`]); every tree holds the one it was built
/// with. Cloning shares the lists (one `Arc`).
#[derive(Clone)]
pub struct Folds(std::sync::Arc<FoldLists>);

struct FoldLists {
    folds: Vec<&'static dyn Fold>,
    family_order: Vec<&'static str>,
}

impl fmt::Debug for Folds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.0.family_order).finish()
    }
}

impl Folds {
    /// The folds a registry lists.
    pub(crate) fn of(registry: &dyn Registry) -> Self {
        Folds(std::sync::Arc::new(FoldLists {
            folds: registry.folds(),
            family_order: registry.family_order(),
        }))
    }

    /// No fold: family payloads add nothing to a tree.
    pub(crate) fn none() -> Self {
        Folds(std::sync::Arc::new(FoldLists {
            folds: Vec::new(),
            family_order: Vec::new(),
        }))
    }

    /// The folds `families` carry (the composition root's), else none.
    pub fn of_families(families: &Families) -> Self {
        families
            .carried::<Folds>()
            .cloned()
            .unwrap_or_else(Folds::none)
    }

    /// Every fold, in registry order.
    pub(crate) fn folds(&self) -> &[&'static dyn Fold] {
        &self.0.folds
    }

    /// Position of family `name` in the registry (the order families' parts of a tree
    /// are written in); unregistered names come last.
    pub(crate) fn rank(&self, name: &str) -> usize {
        self.0
            .family_order
            .iter()
            .position(|family| *family == name)
            .unwrap_or(usize::MAX)
    }
}

/// Folds a family payload into `tree` through the fold registered for its type; a payload
/// no fold claims adds nothing to a tree.
pub(crate) fn fold_into(event: Box<dyn FamilyEvent>, seq: u64, at: u64, tree: &mut ThoughtTree) {
    let mut event = event;
    let folds = tree.folds.clone();
    for fold in folds.folds() {
        match fold.fold(event, seq, at, tree) {
            Ok(()) => return,
            Err(back) => event = back,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::fixtures::{recorded, seq_thought, session_event};

    fn thought(n: u64, revises: Option<u64>, branch: Option<(&str, u64)>) -> Payload {
        let mut thought = seq_thought(&format!("t{n}"), n, 9);
        thought.is_revision = revises.map(|_| true);
        thought.revises_thought = revises;
        thought.branch_from_thought = branch.map(|(_, from)| from);
        thought.branch_id = branch.map(|(id, _)| id.to_string());
        recorded(thought)
    }

    fn log(session: SessionId) -> Vec<Event> {
        let payloads = vec![
            Payload::SessionStarted {
                kind: SessionKind::THINKING,
                title: "t".into(),
                aliases: Vec::new(),
            },
            thought(1, None, None),
            thought(2, None, None),
            thought(2, None, Some(("alt", 1))),
            // A main-line revision of 2 means the main line's 2, not the branch's later 2.
            thought(3, Some(2), None),
            thought(4, Some(7), None),
        ];
        payloads
            .into_iter()
            .enumerate()
            .map(|(i, p)| session_event(session, i as u64 + 1, p))
            .collect()
    }

    #[test]
    fn a_revision_resolves_on_its_own_line_before_other_lines() {
        let session = SessionId::generate();
        let tree = ThoughtTree::build(session, log(session), &crate::tools::folds());
        let revises: Vec<(u64, u64)> = tree
            .edges()
            .iter()
            .filter(|e| e.kind == EdgeKind::Revises)
            .map(|e| (e.from, e.to))
            .collect();
        assert_eq!(revises, vec![(5, 3)]);
        assert_eq!(
            tree.anomalies,
            vec![Anomaly::DanglingRevision {
                seq: 6,
                revises_thought: 7
            }]
        );
    }

    #[test]
    fn rebuilding_twice_gives_identical_state_and_a_prefix_is_a_replay() {
        let session = SessionId::generate();
        let first = ThoughtTree::build(session, log(session), &crate::tools::folds());
        let second = ThoughtTree::build(session, log(session), &crate::tools::folds());
        assert_eq!(first.to_json(), second.to_json());
        let prefix = ThoughtTree::build(
            session,
            log(session).into_iter().take(3),
            &crate::tools::folds(),
        );
        assert_eq!(prefix.at_seq, 3);
        assert_eq!(prefix.thoughts().count(), 2);
    }

    #[test]
    fn events_out_of_order_or_from_another_session_are_ignored() {
        let session = SessionId::generate();
        let mut events = log(session);
        events.swap(2, 3);
        events.push(session_event(
            SessionId::generate(),
            7,
            thought(9, None, None),
        ));
        let tree = ThoughtTree::build(session, events, &crate::tools::folds());
        // 1, 2 fold; 4 is skipped (it does not follow 2); 3 folds; 5 and 6 do not follow
        // 3 and are skipped; the other session's event is ignored.
        assert_eq!(tree.at_seq, 3);
        assert_eq!(tree.thoughts().count(), 2);
    }
}
