//! What a tool family keeps in the core's projections, without the core knowing it.
//!
//! Owns: [`FamilyState`] (a family's folded state in a [`ThoughtTree`], one value per type,
//! found by its type: [`FamilyStates`]) and [`NodeData`] (what a family adds to one thought
//! node, serialized flat into the node as if its fields were the node's). The fields a
//! family adds to the stored [`SessionSummary`] are the event layer's
//! ([`crate::event::summary::SummaryPart`]): the store keeps them. Must not: name a family,
//! or import `crate::tools` or `crate::export`.
//!
//! A family folds its events into a tree through `crate::projection::tree::FoldTree`
//! (registered as a `Fold` beside its codec: the event layer knows nothing of trees; the
//! hook is the tree's, so this file names no tree) and into the summary through
//! [`crate::event::FamilyEvent::summarize`], and reads them back by type
//! (`tree.family::<T>()`, `node.data::<T>()`, `summary.part::<T>()`); the exports ask the
//! families' renderers (`crate::export::family`) for their pieces.
//!
//! [`ThoughtTree`]: crate::projection::tree::ThoughtTree
//! [`SessionSummary`]: crate::event::summary::SessionSummary

use serde::Serialize;
use serde_json::Value;
use std::any::{Any, TypeId};
use std::fmt;

/// A family's folded state in a tree (its plans, its search, its nodes…).
///
/// Implement it on a `Clone` type; [`FamilyStateObject`] comes for free.
pub(crate) trait FamilyState: FamilyStateObject + fmt::Debug + Send + Sync {
    /// The family it belongs to (its codec's `family()`): the tree's JSON lists the
    /// families' parts in the registry's order of their codecs.
    fn family(&self) -> &'static str;
    /// The key and value it adds to the tree's JSON (`None`: nothing to show).
    fn json(&self) -> Option<(&'static str, Value)>;
}

/// The object plumbing every [`FamilyState`] gets from its `Clone`.
pub(crate) trait FamilyStateObject: Any {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn clone_box(&self) -> Box<dyn FamilyState>;
}

impl<T: FamilyState + Clone> FamilyStateObject for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn clone_box(&self) -> Box<dyn FamilyState> {
        Box::new(self.clone())
    }
}

/// The families' states in one tree: at most one value per type, in the order they
/// were first folded (a handful, so a scan beats hashing).
#[derive(Default)]
pub(crate) struct FamilyStates(Vec<Box<dyn FamilyState>>);

impl FamilyStates {
    /// The state of type `T`, if the tree has one.
    pub(crate) fn get<T: FamilyState>(&self) -> Option<&T> {
        self.0.iter().find_map(|s| s.as_any().downcast_ref())
    }

    /// The state of type `T`, if the tree has one, to change.
    pub(crate) fn get_mut<T: FamilyState>(&mut self) -> Option<&mut T> {
        self.0
            .iter_mut()
            .find_map(|s| s.as_any_mut().downcast_mut())
    }

    /// The state of type `T`, its default first if the tree has none.
    pub(crate) fn get_or_default<T: FamilyState + Default>(&mut self) -> &mut T {
        let at = match self.position::<T>() {
            Some(at) => at,
            None => {
                self.0.push(Box::new(T::default()));
                self.0.len() - 1
            }
        };
        self.0[at]
            .as_any_mut()
            .downcast_mut()
            .expect("the position of this type")
    }

    /// Sets the state of type `T` (replacing the one the tree had).
    pub(crate) fn set<T: FamilyState>(&mut self, state: T) {
        match self.position::<T>() {
            Some(at) => self.0[at] = Box::new(state),
            None => self.0.push(Box::new(state)),
        }
    }

    fn position<T: FamilyState>(&self) -> Option<usize> {
        self.0
            .iter()
            .position(|s| s.as_any().type_id() == TypeId::of::<T>())
    }

    /// Every state, in the order of the registry (the tree's JSON order).
    /// (`rank`: a family's position in the registry, the tree's folds'.)
    pub(crate) fn in_registry_order(&self, rank: impl Fn(&str) -> usize) -> Vec<&dyn FamilyState> {
        let mut states: Vec<&dyn FamilyState> = self.0.iter().map(|s| &**s).collect();
        states.sort_by_key(|s| rank(s.family()));
        states
    }
}

impl Clone for FamilyStates {
    fn clone(&self) -> Self {
        FamilyStates(self.0.iter().map(|s| s.clone_box()).collect())
    }
}

impl fmt::Debug for FamilyStates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

/// What a family adds to one thought node (a verification step's target and tools…):
/// serialized flat into the node, after the node's own fields.
///
/// Implement it on a `Clone + PartialEq + Serialize` type whose JSON is an object;
/// [`NodeDataObject`] comes for free.
pub(crate) trait NodeData:
    NodeDataObject + erased_serde::Serialize + fmt::Debug + Send + Sync
{
    /// The family it belongs to (its codec's `family()`).
    #[allow(
        dead_code,
        reason = "every part names its family; nothing reads it yet"
    )]
    fn family(&self) -> &'static str;
}

/// The object plumbing every [`NodeData`] gets from its `Clone + PartialEq`.
pub(crate) trait NodeDataObject: Any {
    fn as_any(&self) -> &dyn Any;
    fn clone_box(&self) -> Box<dyn NodeData>;
    fn eq_dyn(&self, other: &dyn NodeData) -> bool;
}

impl<T: NodeData + Clone + PartialEq> NodeDataObject for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn clone_box(&self) -> Box<dyn NodeData> {
        Box::new(self.clone())
    }
    fn eq_dyn(&self, other: &dyn NodeData) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

/// A node's family data, boxed (see [`NodeData`]).
pub(crate) struct NodeExtension(pub Box<dyn NodeData>);

impl NodeExtension {
    pub(crate) fn new(data: impl NodeData + Clone + PartialEq) -> Self {
        NodeExtension(Box::new(data))
    }

    /// The data, if it is a `T`.
    pub(crate) fn get<T: NodeData>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref()
    }
}

impl Serialize for NodeExtension {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        erased_serde::serialize(&*self.0, s)
    }
}

impl Clone for NodeExtension {
    fn clone(&self) -> Self {
        NodeExtension(self.0.clone_box())
    }
}

impl PartialEq for NodeExtension {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_dyn(&*other.0)
    }
}

impl fmt::Debug for NodeExtension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
