//! The indexer: events in ledger-position order turned into documents ([`Indexer`]) and
//! the checkpoint carried in the same Tantivy commit as the documents (what of an event
//! is indexed is `recall/documents.rs`').
//!
//! Must not: search, or decide when to rebuild (the index's [`super::TantivyRecall`]
//! does).

use super::super::{Documents, RecallError};
use super::Checkpoint;
use super::schema::Fields;
use crate::event::Event;
use crate::store::Ledger;
use tantivy::IndexWriter;
use tantivy::schema::document::{ReferenceValue, ReferenceValueLeaf};
use tantivy::schema::{Document, Field, Value};
use ulid::ULID_LEN;

/// What the index holds of one event, as Tantivy indexes it in place: its text once for
/// both `body` and `pairs` (analysed once for both: see `tokens`), no `TantivyDocument`
/// built (a copy of every value) on the thread reading the ledger.
pub(super) struct EventDocument {
    fields: Fields,
    text: String,
    kind: &'static str,
    /// The session's id as text (a ULID's 26 ASCII characters: no string allocated).
    session: [u8; ULID_LEN],
    seq: u64,
    position: u64,
    at: u64,
}

/// A value of an [`EventDocument`].
#[derive(Clone, Copy, Debug)]
pub(super) enum Leaf<'a> {
    Str(&'a str),
    U64(u64),
}

impl<'a> Value<'a> for Leaf<'a> {
    type ArrayIter = std::iter::Empty<Self>;
    type ObjectIter = std::iter::Empty<(&'a str, Self)>;

    fn as_value(&self) -> ReferenceValue<'a, Self> {
        ReferenceValue::Leaf(match *self {
            Leaf::Str(text) => ReferenceValueLeaf::Str(text),
            Leaf::U64(n) => ReferenceValueLeaf::U64(n),
        })
    }
}

/// An [`EventDocument`]'s fields and values.
const DOCUMENT_VALUES: usize = 7;

impl Document for EventDocument {
    type Value<'a> = Leaf<'a>;
    type FieldsValuesIter<'a> = std::array::IntoIter<(Field, Leaf<'a>), DOCUMENT_VALUES>;

    fn iter_fields_and_values(&self) -> Self::FieldsValuesIter<'_> {
        let f = self.fields;
        [
            (f.body, Leaf::Str(&self.text)),
            (f.pairs, Leaf::Str(&self.text)),
            (f.kind, Leaf::Str(self.kind)),
            (
                f.session,
                Leaf::Str(std::str::from_utf8(&self.session).expect("a ULID is ASCII")),
            ),
            (f.seq, Leaf::U64(self.seq)),
            (f.position, Leaf::U64(self.position)),
            (f.at, Leaf::U64(self.at)),
        ]
        .into_iter()
    }
}

/// [`Indexer::apply_from`] reports its progress every this many events.
const PROGRESS_EVERY: u64 = 100_000;

/// Turns events into documents and remembers what it applied.
pub(super) struct Indexer<'l> {
    ledger: &'l Ledger,
    fields: Fields,
    pub(super) checkpoint: Checkpoint,
    documents: Documents<'l>,
}

impl<'l> Indexer<'l> {
    pub(super) fn new(ledger: &'l Ledger, fields: Fields, checkpoint: Checkpoint) -> Self {
        Indexer {
            ledger,
            fields,
            checkpoint,
            documents: Documents::new(ledger),
        }
    }

    /// The document of `event` at `position`, if it has text.
    fn document(
        &mut self,
        position: u64,
        event: &Event,
    ) -> Result<Option<EventDocument>, RecallError> {
        let Some(searchable) = self.documents.searchable(event)? else {
            return Ok(None);
        };
        Ok(Some(EventDocument {
            fields: self.fields,
            text: searchable.text,
            kind: searchable.kind.as_str(),
            session: {
                let mut session = [0; ULID_LEN];
                event.session.0.array_to_str(&mut session);
                session
            },
            seq: event.seq,
            position,
            at: event.at,
        }))
    }

    /// Applies every event after the checkpoint, committing every `commit_every` events
    /// and reporting the last position applied every [`PROGRESS_EVERY`] events.
    ///
    /// An event that cannot be read (damage, which the ledger records and `verify` lists)
    /// is skipped: the index goes on with the next position, so one damaged event does
    /// not stop every search. After [`crate::store::MAX_UNREADABLE_EVENTS`] of them in one catch-up the
    /// rest is left for later and searches answer from what is indexed.
    pub(super) fn apply_from(
        &mut self,
        writer: &mut IndexWriter<EventDocument>,
        commit_every: Option<u64>,
        mut progress: Option<&mut dyn FnMut(u64)>,
    ) -> Result<(), RecallError> {
        let mut failed = None;
        let mut since_commit = 0;
        let mut since_progress = 0;
        let from = self.checkpoint.position + 1;
        self.ledger.for_each_readable_event_from_position(
            from,
            crate::store::MAX_UNREADABLE_EVENTS,
            |positioned| {
                let step = self
                    .document(positioned.position, &positioned.event)
                    .and_then(|doc| match doc {
                        Some(doc) => writer.add_document(doc).map(drop).map_err(Into::into),
                        None => Ok(()),
                    });
                if let Err(error) = step {
                    failed = Some(error);
                    return false;
                }
                self.checkpoint.position = positioned.position;
                self.checkpoint.hash = positioned.event.hash;
                since_commit += 1;
                if commit_every.is_some_and(|every| since_commit >= every) {
                    since_commit = 0;
                    if let Err(error) = self.commit(writer) {
                        failed = Some(error);
                        return false;
                    }
                }
                since_progress += 1;
                if since_progress >= PROGRESS_EVERY {
                    since_progress = 0;
                    if let Some(progress) = progress.as_mut() {
                        progress(positioned.position);
                    }
                }
                true
            },
        )?;
        failed.map_or(Ok(()), Err)
    }

    /// Applies every event of a ledger without positions.
    pub(super) fn apply_unpositioned(
        &mut self,
        writer: &mut IndexWriter<EventDocument>,
    ) -> Result<(), RecallError> {
        let mut failed = None;
        let mut applied = 0;
        self.ledger.for_each_event_everywhere(|event| {
            let step = self.document(0, &event).and_then(|doc| match doc {
                Some(doc) => writer.add_document(doc).map(drop).map_err(Into::into),
                None => Ok(()),
            });
            if let Err(error) = step {
                failed = Some(error);
                return false;
            }
            applied += 1;
            true
        })?;
        self.checkpoint.unpositioned = Some(applied);
        failed.map_or(Ok(()), Err)
    }

    pub(super) fn commit(
        &self,
        writer: &mut IndexWriter<EventDocument>,
    ) -> Result<(), RecallError> {
        let payload = serde_json::to_string(&self.checkpoint).expect("a checkpoint serializes");
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload(&payload);
        prepared.commit()?;
        Ok(())
    }
}
