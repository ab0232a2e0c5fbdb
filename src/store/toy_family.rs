//! Test builds only: ledgers of families other than the product's, side by side.
//!
//! Owns: a toy family that exists only here (one event kind, its payload, its JSON codec,
//! its summary fold, and its exports: a renderer, a node kind and a picture), the ledgers
//! built with it, and the proof that a ledger's families are a value it was handed: two
//! ledgers of different families in one process, used interleaved from one thread, from
//! tokio tasks and from threads, each read with its own; and each session rendered with
//! the exports it is handed, the toy's or the product's, on one thread. Must not: reach a
//! family any other way than through the ledger it opened or the exports it was given.

use crate::event::family::{Families, JsonCodec, KindInfo, SummaryFields, read_part};
use crate::event::summary::{SessionSummary, SummaryPart};
use crate::event::{FamilyEvent, FamilyPayload, NewEvent, Payload, PayloadCodec, SessionId};
use crate::event::{SessionKind, family::json_encode};
use crate::export::family::{Exports, FamilyRender};
use crate::export::picture::{Glyph, Node, NodeKind, Picture, Pictures, Place, Span};
use crate::export::{Format, html, markdown, svg};
use crate::projection::tree::ThoughtTree;
use crate::query;
use crate::server::LedgerServer;
use crate::store::{Ledger, StoreError};
use crate::tools::Toolset;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::fmt::Write as _;

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

/// The toy's sayings so far, as the tree's summary counts them (`None`: no toy session).
fn toy_sayings(tree: &ThoughtTree) -> Option<u64> {
    let part = tree.summary.as_ref()?.part::<ToySummary>()?;
    Some(part.toy_sayings)
}

/// What the toy family adds to the Markdown export and the HTML page.
struct ToyRender;

static TOY_RENDER: ToyRender = ToyRender;

impl FamilyRender for ToyRender {
    fn markdown_sections(&self, tree: &ThoughtTree, out: &mut String) {
        if let Some(sayings) = toy_sayings(tree) {
            let _ = writeln!(out, "## Toy sayings\n\n{sayings} said\n");
        }
    }

    fn header_notes(&self, tree: &ThoughtTree) -> Vec<String> {
        toy_sayings(tree)
            .map(|sayings| format!("toy sayings: {sayings}"))
            .into_iter()
            .collect()
    }
}

/// The toy's one node kind: class `k-toy`, its style in the picture's stylesheet.
static TOY_NODE_KINDS: [NodeKind; 1] = [NodeKind {
    name: "toy",
    marker: "🧸",
    glyph: Glyph::Circle,
    style: "fill:#fff0f6;stroke:#d6336c",
}];

/// The toy's picture: one node in a lane of its own, counting the sayings.
fn draw_toy(tree: &ThoughtTree, picture: &mut Picture) {
    if let Some(sayings) = toy_sayings(tree) {
        picture.add(Node {
            seq: tree.at_seq,
            kind: &TOY_NODE_KINDS[0],
            place: Place::Lane("toys"),
            head: vec![Span::text(format!("{sayings} sayings"))],
            text: Vec::new(),
            title: "the toy's sayings".into(),
            entry: None,
        });
    }
}

static TOY_PICTURES: Pictures = Pictures {
    kinds: &TOY_NODE_KINDS,
    links: &[],
    draw: draw_toy,
    css: "",
};

/// The toy family's exports, as the product's registry lists its own.
struct ToyRegistry;

impl crate::export::family::Registry for ToyRegistry {
    fn pictures(&self) -> Vec<&'static Pictures> {
        vec![&TOY_PICTURES]
    }
    fn kinds(&self) -> Vec<&'static KindInfo> {
        vec![&TOY_KIND]
    }
    fn renders(&self) -> Vec<&'static dyn FamilyRender> {
        vec![&TOY_RENDER]
    }
}

/// The toy family, carrying its exports (as `tools::families()` carries the product's).
fn toy_families() -> Families {
    Families::new(vec![&TOY_CODEC], vec![&TOY_KIND]).carrying(Exports::of(&ToyRegistry))
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
    let ledger = Ledger::open(dir.path(), toy_families()).unwrap();
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
    let product = Ledger::open(dir.path(), crate::tools::families()).unwrap();
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
    let product = Ledger::open(dir.path(), crate::tools::families()).unwrap();
    let thinking = product_session(&product, &runtime);
    let thought = product.events(thinking, 1, 2).unwrap();
    assert_eq!(thought.len(), 2, "the product reads its own events");
    drop(product);

    let toy = Ledger::open(dir.path(), toy_families()).unwrap();
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

/// Appends one more saying to `session` of a toy ledger.
fn toy_says(ledger: &Ledger, session: SessionId, after: u64, text: String) {
    let events = vec![NewEvent::new(Payload::from(ToySaid { text }))];
    ledger
        .write_blocking(move |txn| txn.append(session, after, events))
        .unwrap()
        .unwrap();
}

/// A session of the product's families (a `sequentialthinking` call's, through a server
/// over `ledger`): started, one thought recorded.
fn product_session(ledger: &Ledger, runtime: &tokio::runtime::Runtime) -> SessionId {
    let server = LedgerServer::new(
        ledger.clone(),
        Toolset::parse_list("thinking").unwrap(),
        false,
    );
    let args = json!({"thought": "a product thought", "thoughtNumber": 1,
        "totalThoughts": 1, "nextThoughtNeeded": false});
    runtime
        .block_on(server.dispatch("sequentialthinking", args.as_object().unwrap().clone()))
        .unwrap();
    ledger.heads().unwrap()[0].session
}

/// A toy-family ledger and a product ledger, each in its own directory, with a session
/// on each ([`toy_session`], [`product_session`]).
struct TwoLedgers {
    toy_dir: tempfile::TempDir,
    product_dir: tempfile::TempDir,
    toy: Ledger,
    product: Ledger,
    toy_session: SessionId,
    thinking: SessionId,
}

fn two_ledgers(runtime: &tokio::runtime::Runtime) -> TwoLedgers {
    let toy_dir = tempfile::tempdir().unwrap();
    let product_dir = tempfile::tempdir().unwrap();
    let toy = Ledger::open(toy_dir.path(), toy_families()).unwrap();
    let product = Ledger::open(product_dir.path(), crate::tools::families()).unwrap();
    let toy_session = toy_session(&toy);
    let thinking = product_session(&product, runtime);
    TwoLedgers {
        toy_dir,
        product_dir,
        toy,
        product,
        toy_session,
        thinking,
    }
}

/// What a toy ledger must read of its session, whoever asks and from where.
fn check_toy(ledger: &Ledger, session: SessionId, sayings: u64) {
    let head = ledger.head(session).unwrap().unwrap();
    assert_eq!(head.summary.kind, TOY);
    assert_eq!(
        head.summary.part::<ToySummary>().unwrap().toy_sayings,
        sayings
    );
    let events = ledger.events(session, 2, 2).unwrap();
    assert_eq!(
        events[0].payload.family::<ToySaid>(),
        Some(&ToySaid { text: "one".into() })
    );
}

/// What the product's ledger must read of its thinking session.
fn check_product(ledger: &Ledger, session: SessionId) {
    let head = ledger.head(session).unwrap().unwrap();
    assert_eq!(head.summary.kind, SessionKind::THINKING);
    assert_eq!(head.summary.thoughts, 1);
    let events = ledger.events(session, 2, 2).unwrap();
    assert_eq!(
        events[0].payload.text(),
        Some("a product thought"),
        "{events:?}"
    );
}

#[test]
fn two_ledgers_of_different_families_interleaved_on_one_thread_in_tasks_and_threads() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let TwoLedgers {
        toy_dir,
        product_dir,
        toy,
        product,
        toy_session,
        thinking,
    } = two_ledgers(&runtime);

    // One thread, the two interleaved call by call.
    check_toy(&toy, toy_session, 2);
    check_product(&product, thinking);
    toy_says(&toy, toy_session, 3, "three".into());
    check_product(&product, thinking);
    check_toy(&toy, toy_session, 3);

    // Tokio tasks on a multi-threaded runtime, the two sides' reads and writes in flight
    // at once: a task decodes with the families of the ledger it holds, whatever worker
    // runs it and whatever ran there before.
    runtime.block_on(async {
        let mut readers = Vec::new();
        for round in 0..8u64 {
            let events = vec![NewEvent::new(Payload::from(ToySaid {
                text: format!("task {round}"),
            }))];
            let writer = {
                let toy = toy.clone();
                tokio::spawn(async move {
                    toy.write(move |txn| txn.append(toy_session, 4 + round, events))
                        .await
                        .unwrap()
                        .unwrap();
                })
            };
            let (toy, product) = (toy.clone(), product.clone());
            readers.push(tokio::spawn(async move {
                check_product(&product, thinking);
                let sayings = toy
                    .head(toy_session)
                    .unwrap()
                    .unwrap()
                    .summary
                    .part::<ToySummary>()
                    .unwrap()
                    .toy_sayings;
                assert!((3 + round..=4 + round).contains(&sayings), "{sayings}");
                check_product(&product, thinking);
            }));
            writer.await.unwrap();
        }
        for reader in readers {
            reader.await.unwrap();
        }
    });
    check_toy(&toy, toy_session, 11);

    // Plain threads, the two ledgers read side by side.
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..10 {
                    check_toy(&toy, toy_session, 11);
                    check_product(&product, thinking);
                }
            });
        }
    });

    // Each ledger reads only its own families' rows: another handle on each file, opened
    // with the other ledger's families (in this process: a client of the first handle,
    // its host, which sends it the rows), finds the session's kind unknown and its
    // events of a type none of its families claims.
    let product_on_toy = Ledger::open(toy_dir.path(), crate::tools::families()).unwrap();
    let refused = product_on_toy.head(toy_session).unwrap_err();
    assert!(
        matches!(&refused, StoreError::Corrupt(why) if why.contains("unknown session kind \"toy\"")),
        "{refused:?}"
    );
    let refused = product_on_toy.events(toy_session, 2, 2).unwrap_err();
    assert!(
        matches!(&refused, StoreError::Corrupt(why) if why.contains("unknown event type \"toy_said\"")),
        "{refused:?}"
    );
    let toy_on_product = Ledger::open(product_dir.path(), toy_families()).unwrap();
    let refused = toy_on_product.head(thinking).unwrap_err();
    assert!(
        matches!(&refused, StoreError::Corrupt(why) if why.contains("unknown session kind \"thinking\"")),
        "{refused:?}"
    );
    let refused = toy_on_product.events(thinking, 2, 2).unwrap_err();
    assert!(
        matches!(&refused, StoreError::Corrupt(why) if why.contains("unknown event type")),
        "{refused:?}"
    );
    // … while the first handles still read theirs.
    check_toy(&toy, toy_session, 11);
    check_product(&product, thinking);
}

#[test]
fn a_render_draws_with_the_exports_it_is_handed_interleaved_on_one_thread() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // The directories are bound (not `..`) so they live as long as the ledgers.
    let TwoLedgers {
        toy_dir: _toy_dir,
        product_dir: _product_dir,
        toy,
        product,
        toy_session,
        thinking,
    } = two_ledgers(&runtime);
    // Each ledger's exports, as any holder of a ledger gets them.
    let toy_exports = Exports::of_families(toy.families());
    let product_exports = Exports::of_families(product.families());
    let tree_of = |ledger: &Ledger, session| {
        let head = ledger.head(session).unwrap().unwrap();
        query::load_tree(ledger, &head, None).unwrap()
    };
    // A node kind of the product's pictures: its style is in every picture the product's
    // exports draw, and in none the toy's draw.
    let product_kind = product_exports
        .pictures()
        .iter()
        .flat_map(|pictures| pictures.kinds)
        .next()
        .expect("the product's families draw nodes of their own")
        .name;
    let product_style = format!(".k-{product_kind} rect{{");

    for round in 0..3u64 {
        let sayings = 2 + round;
        let toys = tree_of(&toy, toy_session);
        let thoughts = tree_of(&product, thinking);

        // Markdown: the kind's label and the family's section come from the exports
        // handed in, whichever ledger's session it is, one render after the other.
        let text = markdown::render(&toys, &toy_exports);
        assert!(text.starts_with("# Toy session: toys\n"), "{text}");
        assert!(
            text.contains(&format!("## Toy sayings\n\n{sayings} said\n")),
            "{text}"
        );
        let text = markdown::render(&thoughts, &product_exports);
        assert!(text.starts_with("# Thinking session: "), "{text}");
        assert!(!text.contains("Toy sayings"), "{text}");
        let text = markdown::render(&toys, &product_exports);
        assert!(text.starts_with("# Session: toys\n"), "{text}");
        assert!(!text.contains("Toy sayings"), "{text}");
        let text = markdown::render(&thoughts, &toy_exports);
        assert!(text.starts_with("# Session: "), "{text}");

        // SVG: the toy's node and its style only with the toy's exports; the product's
        // kinds' styles only with the product's.
        let picture = svg::render(&toys, &toy_exports);
        assert!(picture.contains("data-kind=\"toy\""), "{picture}");
        assert!(picture.contains(".k-toy rect{"), "{picture}");
        assert!(picture.contains(&format!("{sayings} sayings")), "{picture}");
        assert!(!picture.contains(&product_style), "{picture}");
        let picture = svg::render(&toys, &product_exports);
        assert!(!picture.contains("data-kind=\"toy\""), "{picture}");
        assert!(!picture.contains(".k-toy"), "{picture}");
        assert!(picture.contains(&product_style), "{picture}");
        let picture = svg::render(&thoughts, &toy_exports);
        assert!(picture.contains(".k-toy rect{"), "{picture}");
        assert!(!picture.contains(&product_style), "{picture}");

        // HTML: the family's note under the header, with its own exports only.
        let page = html::render(&toys, &toy_exports);
        assert!(page.contains(&format!("toy sayings: {sayings}")), "{page}");
        let page = html::render(&toys, &product_exports);
        assert!(!page.contains("toy sayings"), "{page}");

        // A ledger's own exports read: with the exports its families carry.
        let head = toy.head(toy_session).unwrap().unwrap();
        let text = query::export_session(&toy, &head, None, Format::Markdown).unwrap();
        assert!(text.starts_with("# Toy session: toys\n"), "{text}");
        let head = product.head(thinking).unwrap().unwrap();
        let text = query::export_session(&product, &head, None, Format::Markdown).unwrap();
        assert!(text.starts_with("# Thinking session: "), "{text}");

        toy_says(&toy, toy_session, 3 + round, format!("round {round}"));
    }
}
