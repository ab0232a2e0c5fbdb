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
use tantivy::{IndexWriter, TantivyDocument};

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
    ) -> Result<Option<TantivyDocument>, RecallError> {
        let Some(searchable) = self.documents.searchable(event)? else {
            return Ok(None);
        };
        let f = self.fields;
        let mut doc = TantivyDocument::new();
        // Analysed on Tantivy's indexing threads, once for both fields (`body`'s analyser
        // leaves the pairs for `pairs`': see `schema`).
        doc.add_text(f.body, &searchable.text);
        doc.add_text(f.pairs, searchable.text);
        doc.add_text(f.kind, searchable.kind.as_str());
        doc.add_text(f.session, event.session.to_string());
        doc.add_u64(f.seq, event.seq);
        doc.add_u64(f.position, position);
        doc.add_u64(f.at, event.at);
        Ok(Some(doc))
    }

    /// Applies every event after the checkpoint, committing every `commit_every` events.
    ///
    /// An event that cannot be read (damage, which the ledger records and `verify` lists)
    /// is skipped: the index goes on with the next position, so one damaged event does
    /// not stop every search. After [`crate::store::MAX_UNREADABLE_EVENTS`] of them in one catch-up the
    /// rest is left for later and searches answer from what is indexed.
    pub(super) fn apply_from(
        &mut self,
        writer: &mut IndexWriter<TantivyDocument>,
        commit_every: Option<u64>,
        mut progress: Option<&mut dyn FnMut(u64)>,
    ) -> Result<(), RecallError> {
        let mut failed = None;
        let mut since_commit = 0;
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
                self.checkpoint.hash = positioned.event.hash.clone();
                since_commit += 1;
                if commit_every.is_some_and(|every| since_commit >= every) {
                    since_commit = 0;
                    if let Err(error) = self.commit(writer) {
                        failed = Some(error);
                        return false;
                    }
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
        writer: &mut IndexWriter<TantivyDocument>,
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
        writer: &mut IndexWriter<TantivyDocument>,
    ) -> Result<(), RecallError> {
        let payload = serde_json::to_string(&self.checkpoint).expect("a checkpoint serializes");
        let mut prepared = writer.prepare_commit()?;
        prepared.set_payload(&payload);
        prepared.commit()?;
        Ok(())
    }
}
