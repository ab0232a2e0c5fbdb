//! A read view that decodes with its ledger's families.
//!
//! Owns: [`ScopedRead`], which runs every question to a backend's read view in the scope
//! of the ledger's [`Families`] (so a row's payload, session kind and summary parts are
//! read with the families the ledger was built with, `Ledger::with_families`). Must not:
//! decode anything itself.

use super::contract::{Decode, PositionVisitor, ReadView, RowVisitor};
use super::{SessionHead, StoreError};
use crate::event::family::Families;
use crate::event::{Event, EventId, SessionId};

/// A backend's read view whose every question runs in the scope of `families`.
pub(super) struct ScopedRead<'a> {
    view: Box<dyn ReadView + 'a>,
    families: &'a Families,
}

impl<'a> ScopedRead<'a> {
    pub(super) fn new(view: Box<dyn ReadView + 'a>, families: &'a Families) -> Self {
        ScopedRead { view, families }
    }
}

impl ReadView for ScopedRead<'_> {
    fn head(&self, session: SessionId) -> Result<Option<SessionHead>, StoreError> {
        self.families.in_scope(|| self.view.head(session))
    }

    fn heads(&self) -> Result<Vec<SessionHead>, StoreError> {
        self.families.in_scope(|| self.view.heads())
    }

    fn heads_and_undecodable(
        &self,
    ) -> Result<(Vec<SessionHead>, Vec<(SessionId, String)>), StoreError> {
        self.families.in_scope(|| self.view.heads_and_undecodable())
    }

    fn undecodable_heads(&self) -> Result<Vec<(SessionId, String)>, StoreError> {
        self.families.in_scope(|| self.view.undecodable_heads())
    }

    fn alias(&self, alias: &str) -> Result<Option<SessionId>, StoreError> {
        self.families.in_scope(|| self.view.alias(alias))
    }

    fn events_by_id(&self, ids: &[EventId]) -> Result<Vec<Option<Event>>, StoreError> {
        self.families.in_scope(|| self.view.events_by_id(ids))
    }

    fn head_and_events_by_id(
        &self,
        session: SessionId,
        ids: &[EventId],
    ) -> Result<(Option<SessionHead>, Vec<Option<Event>>), StoreError> {
        self.families
            .in_scope(|| self.view.head_and_events_by_id(session, ids))
    }

    fn scan_session(
        &self,
        session: SessionId,
        from_seq: u64,
        to_seq: u64,
        decode: Decode,
        visit: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.families.in_scope(|| {
            self.view
                .scan_session(session, from_seq, to_seq, decode, visit)
        })
    }

    fn scan_all(&self, visit: &mut dyn FnMut(Event) -> bool) -> Result<(), StoreError> {
        self.families.in_scope(|| self.view.scan_all(visit))
    }

    fn event_count(&self) -> Result<u64, StoreError> {
        self.families.in_scope(|| self.view.event_count())
    }

    fn last_position(&self) -> Result<u64, StoreError> {
        self.families.in_scope(|| self.view.last_position())
    }

    fn scan_positions(&self, from: u64, visit: &mut PositionVisitor<'_>) -> Result<(), StoreError> {
        self.families
            .in_scope(|| self.view.scan_positions(from, visit))
    }

    fn check_structure(&self) -> Result<Vec<String>, StoreError> {
        self.families.in_scope(|| self.view.check_structure())
    }
}

#[cfg(test)]
mod tests {
    //! A ledger built with a toy family that exists only here (one event kind, its
    //! payload, its JSON codec and its summary fold), not the product's list.

    use crate::event::family::{Families, JsonCodec, KindInfo, SummaryFields, read_part};
    use crate::event::summary::{SessionSummary, SummaryPart};
    use crate::event::{FamilyEvent, FamilyPayload, NewEvent, Payload, PayloadCodec, SessionId};
    use crate::event::{SessionKind, family::json_encode};
    use crate::server::LedgerServer;
    use crate::store::{Ledger, StoreError};
    use crate::tools::Toolset;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    const TOY: SessionKind = SessionKind::new("toy");
    const TOY_SAID: &str = "toy_said";

    /// The toy family's one event.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "type", rename = "toy_said")]
    struct ToySaid {
        text: String,
    }

    /// What it folds into a summary.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    struct ToySummary {
        toy_sayings: u64,
    }

    impl SummaryPart for ToySummary {
        fn family(&self) -> &'static str {
            "toy"
        }
        fn position(&self) -> u8 {
            9
        }
    }

    static TOY_CODEC: JsonCodec = JsonCodec {
        family: "toy",
        types: &[TOY_SAID],
        schema: 1,
        owner: "the toy family",
        row: "toy",
        read: |json| Ok(FamilyPayload::new(serde_json::from_str::<ToySaid>(json)?)),
        summary: Some(SummaryFields {
            keys: &["toy_sayings"],
            read: read_part::<ToySummary>,
        }),
    };

    static TOY_KIND: KindInfo = KindInfo {
        kind: TOY,
        label: "Toy session",
    };

    impl FamilyEvent for ToySaid {
        fn codec(&self) -> &'static dyn PayloadCodec {
            &TOY_CODEC
        }
        fn type_name(&self) -> &'static str {
            TOY_SAID
        }
        fn text(&self) -> Option<&str> {
            Some(&self.text)
        }
        fn encode(&self, out: &mut Vec<u8>) {
            json_encode(self, out);
        }
        fn summarize(&self, summary: &mut SessionSummary, _new_branch: bool) {
            summary.part_mut::<ToySummary>().toy_sayings += 1;
        }
    }

    fn toy_families() -> Families {
        Families::new(vec![&TOY_CODEC], vec![&TOY_KIND])
    }

    fn toy_session(ledger: &Ledger) -> SessionId {
        let session = SessionId::generate();
        let events = vec![
            NewEvent::new(Payload::SessionStarted {
                kind: TOY,
                title: "toys".into(),
                aliases: vec!["the-toys".into()],
            }),
            NewEvent::new(Payload::from(ToySaid { text: "one".into() })),
            NewEvent::new(Payload::from(ToySaid { text: "two".into() })),
        ];
        ledger
            .write_blocking(move |txn| txn.append(session, 0, events))
            .unwrap()
            .unwrap();
        session
    }

    #[test]
    fn a_ledger_of_a_toy_family_writes_reads_and_folds_its_events() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path())
            .unwrap()
            .with_families(toy_families());
        let session = toy_session(&ledger);

        let events = ledger.events(session, 1, 3).unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(
            events[2].payload.family::<ToySaid>(),
            Some(&ToySaid { text: "two".into() })
        );
        let head = ledger.head(session).unwrap().unwrap();
        assert_eq!(head.summary.kind, TOY);
        assert_eq!(head.summary.part::<ToySummary>().unwrap().toy_sayings, 2);
        assert_eq!(ledger.resolve("the-toys").unwrap(), Some(session));
        assert_eq!(ledger.verify_all().unwrap().len(), 1);

        // The product's families have no toy: its rows are not theirs to read.
        drop(ledger);
        let product = Ledger::open(dir.path()).unwrap();
        assert!(product.heads().unwrap().is_empty());
        let undecodable = product.undecodable_heads().unwrap();
        assert_eq!(undecodable.len(), 1);
        assert!(
            undecodable[0].1.contains("unknown session kind \"toy\""),
            "{undecodable:?}"
        );
        let refused = product.events(session, 2, 2).unwrap_err();
        assert!(
            matches!(&refused, StoreError::Corrupt(why) if why.contains("unknown event type \"toy_said\"")),
            "{refused:?}"
        );
    }

    #[test]
    fn a_ledger_of_only_the_toy_family_does_not_read_the_products_events() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let product = Ledger::open(dir.path()).unwrap();
        let server = LedgerServer::new(
            product.clone(),
            Toolset::parse_list("thinking").unwrap(),
            false,
        );
        let args = json!({"thought": "a product thought", "thoughtNumber": 1,
            "totalThoughts": 1, "nextThoughtNeeded": false});
        let answer = runtime
            .block_on(server.dispatch("sequentialthinking", args.as_object().unwrap().clone()))
            .unwrap();
        drop((server, answer));
        let thinking = product.heads().unwrap()[0].session;
        let thought = product.events(thinking, 1, 2).unwrap();
        assert_eq!(thought.len(), 2, "the product reads its own events");
        drop(product);

        let toy = Ledger::open(dir.path())
            .unwrap()
            .with_families(toy_families());
        // The rule for a kind no family of the ledger registers: the head does not
        // decode (left out of the heads, named as undecodable) …
        assert!(toy.heads().unwrap().is_empty());
        let undecodable = toy.undecodable_heads().unwrap();
        assert_eq!(undecodable.len(), 1, "{undecodable:?}");
        assert_eq!(undecodable[0].0, thinking);
        // … and an event of a type no family claims is a corrupt row, not skipped.
        let refused = toy.events(thinking, 2, 2).unwrap_err();
        assert!(
            matches!(&refused, StoreError::Corrupt(why) if why.contains("unknown event type")),
            "{refused:?}"
        );
        // … which is damage to this ledger: it writes nothing more over rows it cannot
        // read (the damage rule, `store::damage`).
        let session = SessionId::generate();
        let start = vec![NewEvent::new(Payload::SessionStarted {
            kind: TOY,
            title: "toys".into(),
            aliases: Vec::new(),
        })];
        let refused = toy
            .write_blocking(move |txn| txn.append(session, 0, start))
            .unwrap_err();
        assert!(
            matches!(&refused, StoreError::Damaged { detail, .. } if detail.contains("unknown session kind \"thinking\"")),
            "{refused:?}"
        );
    }
}
