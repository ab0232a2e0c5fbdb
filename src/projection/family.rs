//! What a tool family keeps in the core's projections, without the core knowing it.
//!
//! Owns: [`FamilyState`] (a family's folded state in a [`ThoughtTree`], one value per type,
//! found by its type: [`FamilyStates`]), [`NodeData`] (what a family adds to one thought
//! node, serialized flat into the node as if its fields were the node's) and
//! [`SummaryPart`] (the fields a family adds to the stored [`SessionSummary`], in
//! [`SummaryParts`], read back by the family's codec). Must not: name a family, or import
//! `crate::tools` or `crate::export`.
//!
//! A family folds its events into these ([`crate::event::FamilyEvent::fold`] and
//! `summarize` get the tree and the summary) and reads them back by type
//! (`tree.family::<T>()`, `node.data::<T>()`, `summary.part::<T>()`); the exports ask the
//! families' renderers (`crate::export::family`) for their pieces.
//!
//! [`ThoughtTree`]: crate::projection::tree::ThoughtTree
//! [`SessionSummary`]: crate::projection::summary::SessionSummary

use serde::Serialize;
use serde_json::{Map, Value};
use std::any::{Any, TypeId};
use std::fmt;

/// A family's folded state in a tree (its plans, its search, its nodes…).
///
/// Implement it on a `Clone` type; [`FamilyStateObject`] comes for free.
pub trait FamilyState: FamilyStateObject + fmt::Debug + Send + Sync {
    /// The family it belongs to (its codec's `family()`): the tree's JSON lists the
    /// families' parts in the registry's order of their codecs.
    fn family(&self) -> &'static str;
    /// The key and value it adds to the tree's JSON (`None`: nothing to show).
    fn json(&self) -> Option<(&'static str, Value)>;
}

/// The object plumbing every [`FamilyState`] gets from its `Clone`.
pub trait FamilyStateObject: Any {
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
pub struct FamilyStates(Vec<Box<dyn FamilyState>>);

impl FamilyStates {
    /// The state of type `T`, if the tree has one.
    pub fn get<T: FamilyState>(&self) -> Option<&T> {
        self.0.iter().find_map(|s| s.as_any().downcast_ref())
    }

    /// The state of type `T`, if the tree has one, to change.
    pub fn get_mut<T: FamilyState>(&mut self) -> Option<&mut T> {
        self.0
            .iter_mut()
            .find_map(|s| s.as_any_mut().downcast_mut())
    }

    /// The state of type `T`, its default first if the tree has none.
    pub fn get_or_default<T: FamilyState + Default>(&mut self) -> &mut T {
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
    pub fn set<T: FamilyState>(&mut self, state: T) {
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
    pub fn in_registry_order(&self) -> Vec<&dyn FamilyState> {
        let mut states: Vec<&dyn FamilyState> = self.0.iter().map(|s| &**s).collect();
        states.sort_by_key(|s| crate::event::family::family_rank(s.family()));
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
pub trait NodeData: NodeDataObject + erased_serde::Serialize + fmt::Debug + Send + Sync {
    /// The family it belongs to (its codec's `family()`).
    fn family(&self) -> &'static str;
}

/// The object plumbing every [`NodeData`] gets from its `Clone + PartialEq`.
pub trait NodeDataObject: Any {
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
pub struct NodeExtension(pub Box<dyn NodeData>);

impl NodeExtension {
    pub fn new(data: impl NodeData + Clone + PartialEq) -> Self {
        NodeExtension(Box::new(data))
    }

    /// The data, if it is a `T`.
    pub fn get<T: NodeData>(&self) -> Option<&T> {
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

/// The fields a family adds to a session's stored summary (a plan's phase, the model
/// calls' tokens…). Serialized flat into the summary after its own fields, parts in
/// ascending [`SummaryPart::position`]; its fields that hold nothing are left out, so a
/// part that holds nothing writes nothing.
///
/// Implement it on a `Clone + PartialEq + Default + Serialize` type;
/// [`SummaryPartObject`] comes for free. Its family's codec reads it back
/// ([`crate::event::PayloadCodec::summary_keys`] and `read_summary`).
pub trait SummaryPart:
    SummaryPartObject + erased_serde::Serialize + fmt::Debug + Send + Sync
{
    /// The family it belongs to (its codec's `family()`).
    fn family(&self) -> &'static str;
    /// Where its fields stand among the families' parts (ascending), so a summary's
    /// bytes never depend on the order its events came in or a backend hands fields
    /// back. Today's parts keep the order every build wrote: planning 1, the provider's
    /// model calls 2, agent 3; a new family takes the next free number.
    fn position(&self) -> u8;
    /// What a session list's row shows of it (camelCase keys, added after the row's own).
    fn list_row(&self, row: &mut Map<String, Value>) {
        let _ = row;
    }
    /// Whether it makes the session `complete` (a finalized plan).
    fn complete(&self) -> bool {
        false
    }
    /// Branches it closed: they take no more thoughts.
    fn closed_branches(&self) -> &[String] {
        &[]
    }
}

/// The object plumbing every [`SummaryPart`] gets from its `Clone + PartialEq + Default`.
pub trait SummaryPartObject: Any {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn clone_box(&self) -> Box<dyn SummaryPart>;
    fn eq_dyn(&self, other: &dyn SummaryPart) -> bool;
    /// Equal to its type's default (writes nothing).
    fn is_default(&self) -> bool;
}

impl<T: SummaryPart + Clone + PartialEq + Default> SummaryPartObject for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn clone_box(&self) -> Box<dyn SummaryPart> {
        Box::new(self.clone())
    }
    fn eq_dyn(&self, other: &dyn SummaryPart) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn is_default(&self) -> bool {
        *self == T::default()
    }
}

/// The families' parts of one summary, in ascending [`SummaryPart::position`]: the
/// order their fields are written in.
#[derive(Default)]
pub struct SummaryParts(Vec<Box<dyn SummaryPart>>);

impl SummaryParts {
    /// The part of type `T`, if the summary has one.
    pub fn get<T: SummaryPart>(&self) -> Option<&T> {
        self.0.iter().find_map(|p| p.as_any().downcast_ref())
    }

    /// The part of type `T`, its default first if the summary has none.
    pub fn get_or_default<T: SummaryPart + Clone + PartialEq + Default>(&mut self) -> &mut T {
        let at = match self
            .0
            .iter()
            .position(|p| p.as_any().type_id() == TypeId::of::<T>())
        {
            Some(at) => at,
            None => self.insert(Box::new(T::default())),
        };
        self.0[at]
            .as_any_mut()
            .downcast_mut()
            .expect("the position of this type")
    }

    /// Inserts `part` in its place; returns its index.
    fn insert(&mut self, part: Box<dyn SummaryPart>) -> usize {
        let at = self
            .0
            .iter()
            .position(|p| p.position() > part.position())
            .unwrap_or(self.0.len());
        self.0.insert(at, part);
        at
    }

    /// Every part.
    pub fn iter(&self) -> impl Iterator<Item = &dyn SummaryPart> {
        self.0.iter().map(|p| &**p)
    }
}

impl Clone for SummaryParts {
    fn clone(&self) -> Self {
        SummaryParts(self.0.iter().map(|p| p.clone_box()).collect())
    }
}

impl fmt::Debug for SummaryParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl PartialEq for SummaryParts {
    /// Equal when every part that holds something has an equal part on the other side
    /// (in any order: a backend may hand the fields back in another order).
    fn eq(&self, other: &Self) -> bool {
        let held = |parts: &SummaryParts| parts.0.iter().filter(|p| !p.is_default()).count();
        held(self) == held(other)
            && self
                .0
                .iter()
                .filter(|p| !p.is_default())
                .all(|mine| other.0.iter().any(|theirs| mine.eq_dyn(&**theirs)))
    }
}

impl Serialize for SummaryParts {
    /// Every part's fields, flat, part after part.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        let mut map = s.serialize_map(None)?;
        for part in &self.0 {
            let fields = erased_serde::serialize(&**part, serde_json::value::Serializer)
                .map_err(S::Error::custom)?;
            let Value::Object(fields) = fields else {
                return Err(S::Error::custom(
                    "a summary part must serialize as an object",
                ));
            };
            for (key, value) in fields {
                map.serialize_entry(&key, &value)?;
            }
        }
        map.end()
    }
}

impl<'de> serde::Deserialize<'de> for SummaryParts {
    /// The summary's fields no core field took, each given to the codec that declares it
    /// ([`crate::event::PayloadCodec::summary_keys`]). A field no codec declares is ignored (as serde ignores unknown fields).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let fields = Map::<String, Value>::deserialize(d)?;
        let mut groups: Vec<(&'static dyn crate::event::PayloadCodec, Map<String, Value>)> =
            Vec::new();
        for (key, value) in fields {
            let Some(codec) = crate::event::family::registered_codecs()
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
                None => groups.push((codec, Map::from_iter([(key, value)]))),
            }
        }
        let mut parts = SummaryParts::default();
        for (codec, group) in groups {
            parts.insert(codec.read_summary(group).map_err(D::Error::custom)?);
        }
        Ok(parts)
    }
}
