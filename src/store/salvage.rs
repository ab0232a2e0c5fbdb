//! Salvage (issue 32, `recover --to`): the events of a damaged ledger found by their own
//! hashes, wherever they lie in its files or rows, and the longest verified chain of each
//! session.
//!
//! Owns: the scan of raw bytes for event rows ([`Scan`]), reading a data directory's
//! `ledger.redb` and `ledger.wal` for it with plain reads ([`salvage_dir`]) or every row
//! of a PostgreSQL ledger's tables (`super::postgres::salvage::salvage_url`, handing
//! them to the same [`Scan`]), and the chains built from what was found ([`chains`]). Why a scan: an event row is self-contained
//! ([`codec`]: first byte `0x01`/`0x02`/`0x03` or `{`, then every field) and an event
//! verifies itself (its hash covers `prev` and all its content), so a row that decodes at
//! any offset and whose hash verifies *is* an event of the ledger, byte for byte, whichever
//! page, freed page or redo-log record holds it; a damaged branch page hides nothing (the
//! way SQLite's recovery walks pages). Must not: open a file with the storage engine (it
//! may be damaged; the media may be read-only), trust anything that does not verify (page
//! structure, heads, positions, checksums of log records, a database's key columns), or
//! panic on any input.

use super::codec;
use crate::event::{Event, EventId, Families, GENESIS_HASH, Payload, SessionId};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The bytes a JSON row of an earlier build starts with (serde wrote `id` first): a `{`
/// elsewhere (JSON text inside a payload) is not tried.
const JSON_ROW_START: &[u8] = b"{\"id\":\"";

/// The bytes a session's head row starts with (JSON, `session` first). A head does not
/// verify itself: what it names (its last seq) only tells the report how many events a
/// session had, never what they were.
const HEAD_ROW_START: &[u8] = b"{\"session\":\"";

/// What the scan reads of a head row.
#[derive(serde::Deserialize)]
struct HeadHint {
    session: SessionId,
    seq: u64,
}

/// Why a data directory could not be scanned.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SalvageError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("nothing to salvage in {dir}: it holds neither ledger.redb nor ledger.wal")]
    Nothing { dir: PathBuf },
    #[error("nothing to salvage at {label}: its schema holds no ledger_events nor ledger_heads")]
    NoTables { label: String },
    #[error("cannot read the ledger at {label}: {source}")]
    Database {
        label: String,
        source: super::postgres::PgError,
    },
}

/// What one scanned file (or table) gave.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct SourceReport {
    /// The file's path, or `<URL> table <name>`.
    pub(crate) name: String,
    /// The bytes scanned; `None`: the file (or table) is not there.
    pub(crate) bytes: Option<u64>,
    /// Verified events first found in this file.
    pub(crate) found: u64,
    /// Verified rows of events already found (stale copies in freed pages, the log's copy
    /// of a row the file holds too).
    pub(crate) copies: u64,
    /// Rows that decoded but whose hash does not verify (damaged, or not this event).
    pub(crate) unverified: u64,
    /// Offsets where a decoder panicked (caught, and the offset skipped); none expected.
    pub(crate) panics: u64,
    /// Head rows read (current or stale): they name how far a session went.
    pub(crate) heads: u64,
}

/// The verified events found in any number of byte slices, one copy of each, and the
/// highest seq any head row names per session.
pub(crate) struct Scan {
    events: HashMap<EventId, Event>,
    heads: BTreeMap<SessionId, u64>,
    /// What the rows found decode with.
    families: Families,
}

impl Scan {
    /// A scan whose rows decode with `families`.
    pub(crate) fn new(families: Families) -> Scan {
        Scan {
            events: HashMap::new(),
            heads: BTreeMap::new(),
            families,
        }
    }

    /// Looks for an event row (and a head row) at every offset of `bytes`; keeps each
    /// event whose hash verifies. After a verified row the scan goes on past its end (rows
    /// do not overlap; a row quoted inside a verified event's text is not a row of the
    /// ledger).
    pub(crate) fn bytes(&mut self, bytes: &[u8], report: &mut SourceReport) {
        let mut at = 0;
        while at < bytes.len() {
            let rest = &bytes[at..];
            let len = match rest[0] {
                codec::BINARY_ROW_V1 | codec::BINARY_ROW_V2 | codec::BINARY_ROW_ACTOR => {
                    self.event_at(rest, report)
                }
                b'{' if rest.starts_with(JSON_ROW_START) => self.event_at(rest, report),
                b'{' if rest.starts_with(HEAD_ROW_START) => self.head_at(rest, report),
                _ => None,
            };
            at += len.unwrap_or(1).max(1);
        }
    }

    /// The event row at the start of `rest`, kept if it verifies: its length then.
    fn event_at(&mut self, rest: &[u8], report: &mut SourceReport) -> Option<usize> {
        let decoded =
            match super::damage::catch_quietly(|| codec::decode_event_at(rest, &self.families)) {
                Ok(decoded) => decoded,
                Err(_) => {
                    report.panics += 1;
                    return None;
                }
            };
        let (event, len) = decoded.ok()?;
        if event.computed_hash() != event.hash {
            report.unverified += 1;
            return None;
        }
        match self.events.entry(event.id) {
            std::collections::hash_map::Entry::Occupied(_) => report.copies += 1,
            std::collections::hash_map::Entry::Vacant(slot) => {
                report.found += 1;
                slot.insert(event);
            }
        }
        Some(len)
    }

    /// The head row at the start of `rest`, if it reads as one: its length then.
    fn head_at(&mut self, rest: &[u8], report: &mut SourceReport) -> Option<usize> {
        let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<HeadHint>();
        let head = values.next()?.ok()?;
        report.heads += 1;
        let seq = self.heads.entry(head.session).or_default();
        *seq = (*seq).max(head.seq);
        Some(values.byte_offset())
    }

    /// The verified events found (in no particular order), and the highest seq a head
    /// row names per session.
    pub(crate) fn finish(self) -> (Vec<Event>, BTreeMap<SessionId, u64>) {
        (self.events.into_values().collect(), self.heads)
    }
}

/// What a data directory's files gave: every verified event, the highest seq a head row
/// names per session, and a report per file.
pub(crate) struct Found {
    pub(crate) events: Vec<Event>,
    pub(crate) heads: BTreeMap<SessionId, u64>,
    pub(crate) sources: Vec<SourceReport>,
}

/// Scans `ledger.redb` and its redo log `ledger.wal` in `data_dir`, read with plain reads
/// (never opened by the storage engine, never written). A missing file is reported as
/// such; neither there is [`SalvageError::Nothing`].
pub(crate) fn salvage_dir(data_dir: &Path, families: Families) -> Result<Found, SalvageError> {
    let ledger = data_dir.join(super::LEDGER_FILE_NAME);
    let log = super::redb::wal::log_path(&ledger);
    let mut scan = Scan::new(families);
    let mut sources = Vec::new();
    for path in [ledger, log] {
        let mut report = SourceReport {
            name: path.display().to_string(),
            ..SourceReport::default()
        };
        match std::fs::read(&path) {
            Ok(bytes) => {
                report.bytes = Some(bytes.len() as u64);
                scan.bytes(&bytes, &mut report);
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(SalvageError::Read { path, source }),
        }
        sources.push(report);
    }
    if sources.iter().all(|s| s.bytes.is_none()) {
        return Err(SalvageError::Nothing {
            dir: data_dir.to_path_buf(),
        });
    }
    let (events, heads) = scan.finish();
    Ok(Found {
        events,
        heads,
        sources,
    })
}

/// One session as salvaged: its longest verified chain from its start, and the rest.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SessionSalvage {
    pub(crate) session: SessionId,
    /// Seqs 1..=n, each chaining onto the one before (seq 1 a `session_started` after
    /// [`GENESIS_HASH`]); empty when no verified start was found.
    pub(crate) kept: Vec<Event>,
    /// The verified events not on that chain (beyond its first gap, or another event at a
    /// seq the chain holds), by seq.
    pub(crate) beyond: Vec<Event>,
    /// The highest seq a head row names (a row that does not verify itself), if one was
    /// read.
    pub(crate) head_seq: Option<u64>,
    /// Seqs with no verified event at all, up to the highest one found or named by a head
    /// row, as ranges.
    pub(crate) missing: Vec<(u64, u64)>,
}

impl SessionSalvage {
    /// Whether the session's start was found (and so a chain kept).
    pub(crate) fn started(&self) -> bool {
        !self.kept.is_empty()
    }

    /// The first seq after the kept chain, when events beyond it were found (where the
    /// session was cut).
    pub(crate) fn cut_at(&self) -> Option<u64> {
        (!self.beyond.is_empty()).then(|| self.kept.len() as u64 + 1)
    }
}

/// Groups `events` by session and keeps each session's longest verified chain: seq 1 a
/// `session_started` whose `prev` is [`GENESIS_HASH`], each next seq one whose `prev` is
/// the hash before it (of several events at one seq, the one with the longest chain after
/// it). `heads`: the highest seq a head row names per session (a session known only from
/// its head is reported lost). Sessions in id order.
pub(crate) fn chains(events: Vec<Event>, heads: &BTreeMap<SessionId, u64>) -> Vec<SessionSalvage> {
    let mut sessions: BTreeMap<SessionId, BTreeMap<u64, Vec<Event>>> = heads
        .keys()
        .map(|session| (*session, BTreeMap::new()))
        .collect();
    for event in events {
        sessions
            .entry(event.session)
            .or_default()
            .entry(event.seq)
            .or_default()
            .push(event);
    }
    sessions
        .into_iter()
        .map(|(session, by_seq)| chain_of(session, by_seq, heads.get(&session).copied()))
        .collect()
}

fn chain_of(
    session: SessionId,
    mut by_seq: BTreeMap<u64, Vec<Event>>,
    head_seq: Option<u64>,
) -> SessionSalvage {
    for events in by_seq.values_mut() {
        events.sort_by_key(|e| e.id);
    }
    // The length of the longest chain from each event on, from the highest seq down.
    let mut length: HashMap<EventId, u64> = HashMap::new();
    for (seq, events) in by_seq.iter().rev() {
        let next = seq.checked_add(1).and_then(|next| by_seq.get(&next));
        for event in events {
            let after = next
                .into_iter()
                .flatten()
                .filter(|n| n.prev == event.hash)
                .filter_map(|n| length.get(&n.id))
                .max()
                .copied()
                .unwrap_or(0);
            length.insert(event.id, after + 1);
        }
    }
    let longest = |candidates: &mut dyn Iterator<Item = &Event>| -> Option<EventId> {
        // Longest first; of equals, the smallest id (deterministic).
        candidates
            .max_by(|a, b| length[&a.id].cmp(&length[&b.id]).then(b.id.cmp(&a.id)))
            .map(|e| e.id)
    };
    let mut chain: Vec<EventId> = Vec::new();
    let start = by_seq.get(&1).and_then(|events| {
        longest(&mut events.iter().filter(|e| {
            e.prev == GENESIS_HASH && matches!(e.payload, Payload::SessionStarted { .. })
        }))
    });
    if let Some(start) = start {
        chain.push(start);
        let mut hash = by_seq[&1]
            .iter()
            .find(|e| e.id == start)
            .map(|e| e.hash.clone());
        let mut seq: u64 = 1;
        while let Some(prev) = hash.take() {
            let Some(next) = seq.checked_add(1).and_then(|next| by_seq.get(&next)) else {
                break;
            };
            let Some(id) = longest(&mut next.iter().filter(|e| e.prev == prev)) else {
                break;
            };
            chain.push(id);
            seq += 1;
            hash = next.iter().find(|e| e.id == id).map(|e| e.hash.clone());
        }
    }
    let mut missing: Vec<(u64, u64)> = Vec::new();
    let mut expected = 1;
    for &seq in by_seq.keys() {
        if seq > expected {
            missing.push((expected, seq - 1));
        }
        expected = expected.max(seq.saturating_add(1));
    }
    let highest = by_seq.keys().next_back().copied().unwrap_or(0);
    if let Some(head) = head_seq.filter(|head| *head > highest) {
        missing.push((highest + 1, head));
    }
    let mut kept = Vec::with_capacity(chain.len());
    let mut beyond = Vec::new();
    for events in by_seq.into_values() {
        for event in events {
            if chain.get(event.seq.wrapping_sub(1) as usize) == Some(&event.id) {
                kept.push(event);
            } else {
                beyond.push(event);
            }
        }
    }
    SessionSalvage {
        session,
        kept,
        beyond,
        head_seq,
        missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventId, SessionKind, event_hash};

    /// A session of `n` events (a start, then closes with distinct reasons), chained.
    fn session(n: u64) -> Vec<Event> {
        let session = SessionId::generate();
        let mut prev = GENESIS_HASH.to_string();
        (1..=n)
            .map(|seq| {
                let payload = if seq == 1 {
                    Payload::SessionStarted {
                        kind: SessionKind::THINKING,
                        title: "salvage".into(),
                        aliases: vec![],
                    }
                } else {
                    Payload::SessionClosed {
                        reason: format!("event {seq} \u{1} \u{2} {{\"id\":\""),
                    }
                };
                let id = EventId::generate();
                let hash = event_hash(
                    &prev,
                    &id,
                    &session,
                    seq,
                    1_700_000_000_000 + seq,
                    1,
                    &payload,
                );
                let event = Event {
                    id,
                    session,
                    seq,
                    at: 1_700_000_000_000 + seq,
                    schema: 1,
                    actor: None,
                    payload,
                    prev: std::mem::replace(&mut prev, hash.clone()),
                    hash,
                };
                assert_eq!(event.computed_hash(), event.hash);
                event
            })
            .collect()
    }

    /// xorshift64*: deterministic noise.
    struct Noise(u64);

    impl Noise {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn bytes(&mut self, len: usize) -> Vec<u8> {
            (0..len).map(|_| self.next() as u8).collect()
        }
    }

    fn scan(bytes: &[u8]) -> (Scan, SourceReport) {
        let mut scan = Scan::new(crate::tools::families());
        let mut report = SourceReport::default();
        scan.bytes(bytes, &mut report);
        (scan, report)
    }

    fn events_of(scan: Scan) -> Vec<Event> {
        scan.finish().0
    }

    #[test]
    fn random_bytes_and_damaged_rows_never_panic_and_never_verify() {
        let mut noise = Noise(0x5eed);
        // Pure noise, and noise biased to the bytes that start a row.
        for round in 0..200 {
            let mut bytes = noise.bytes(4096);
            if round % 2 == 1 {
                for b in bytes.iter_mut() {
                    *b %= 4;
                }
            }
            let (scan, report) = scan(&bytes);
            assert_eq!(report.panics, 0);
            assert!(events_of(scan).is_empty());
        }
        // Real rows of every encoding this scan reads, each byte of each one changed.
        let events = session(3);
        let mut rows: Vec<Vec<u8>> = events.iter().map(codec::encode_event).collect();
        rows.push(serde_json::to_vec(&events[1]).unwrap());
        let mut with_actor = events[2].clone();
        with_actor.actor = Some("alice".into());
        rows.push(codec::encode_event(&with_actor));
        let originals: Vec<Event> = events.iter().cloned().chain([with_actor]).collect();
        for row in &rows {
            for at in 0..row.len() {
                for value in [0u8, 1, 0x7f, 0x80, 0xff, row[at] ^ 1] {
                    if value == row[at] {
                        continue;
                    }
                    let mut damaged = row.clone();
                    damaged[at] = value;
                    let (scan, report) = scan(&damaged);
                    assert_eq!(report.panics, 0, "row byte {at} = {value}");
                    // What verifies is the original event (a byte outside its row's fields
                    // cannot change it), never a different one.
                    for event in events_of(scan) {
                        assert!(originals.contains(&event), "row byte {at} = {value}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_row_at_an_odd_offset_among_noise_is_found_byte_for_byte() {
        let events = session(2);
        let mut noise = Noise(7);
        let mut bytes = noise.bytes(1001);
        bytes.extend(codec::encode_event(&events[0]));
        bytes.extend(noise.bytes(333));
        // A JSON row of an earlier build, and the same row again (a stale copy).
        bytes.extend(serde_json::to_vec(&events[1]).unwrap());
        bytes.extend(noise.bytes(5));
        bytes.extend(codec::encode_event(&events[1]));
        // A head row (JSON; it does not verify itself), and an older one of the session.
        for seq in [3, 2] {
            let head = serde_json::json!({"session": events[0].session, "seq": seq,
                "hash": events[1].hash, "summary": {"kind": "thinking", "parts": [{"x": 1}]},
                "position": 4});
            bytes.extend(noise.bytes(3));
            bytes.extend(serde_json::to_vec(&head).unwrap());
        }
        let (scan, report) = scan(&bytes);
        assert_eq!((report.found, report.copies, report.heads), (2, 1, 2));
        let (mut found, heads) = scan.finish();
        assert_eq!(heads, BTreeMap::from([(events[0].session, 3)]));
        found.sort_by_key(|e| e.seq);
        assert_eq!(found, events);
        assert_eq!(
            crate::export::jsonl(&found),
            crate::export::jsonl(&events),
            "exported byte for byte"
        );
    }

    #[test]
    fn a_flipped_byte_inside_an_event_drops_that_event_only() {
        let events = session(5);
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for event in &events {
            starts.push(bytes.len());
            bytes.extend(codec::encode_event(event));
            bytes.extend([0u8; 17]);
        }
        // Inside event 3's title-free body: its `at` field region, past the ids.
        let flip = starts[2] + 40;
        bytes[flip] ^= 0x20;
        let (scan, _) = scan(&bytes);
        let mut seqs: Vec<u64> = events_of(scan).iter().map(|e| e.seq).collect();
        seqs.sort();
        assert_eq!(seqs, [1, 2, 4, 5]);
    }

    #[test]
    fn a_chain_with_a_hole_is_cut_there_and_forks_take_the_longest_chain() {
        let events = session(6);
        let mut found: Vec<Event> = events.clone();
        found.remove(3); // seq 4
        let salvaged = chains(found, &BTreeMap::new());
        assert_eq!(salvaged.len(), 1);
        let one = &salvaged[0];
        assert_eq!(one.kept, events[..3]);
        assert_eq!(one.beyond, events[4..]);
        assert_eq!(one.cut_at(), Some(4));
        assert_eq!(one.missing, [(4, 4)]);

        // No start: nothing kept, everything beyond.
        let headless = chains(events[1..].to_vec(), &BTreeMap::new());
        assert!(!headless[0].started());
        assert_eq!(headless[0].beyond.len(), 5);
        assert_eq!(headless[0].missing, [(1, 1)]);

        // A second, shorter history at seq 3 (same prev, another event): the longer one
        // is kept, the other goes beyond.
        let mut fork = events[2].clone();
        fork.id = EventId::generate();
        fork.payload = Payload::SessionClosed {
            reason: "fork".into(),
        };
        fork.hash = fork.computed_hash();
        let mut found = events.clone();
        found.push(fork.clone());
        let forked = chains(found, &BTreeMap::new());
        assert_eq!(forked[0].kept, events);
        assert_eq!(forked[0].beyond, [fork]);
        assert!(forked[0].missing.is_empty());

        // A complete session is kept whole.
        let whole = chains(events.clone(), &BTreeMap::new());
        assert_eq!(whole[0].kept, events);
        assert_eq!(whole[0].cut_at(), None);

        // The last event lost: only a head row tells; a session known only by its head
        // is lost whole.
        let other = SessionId::generate();
        let heads = BTreeMap::from([(events[0].session, 6), (other, 3)]);
        let tail = chains(events[..5].to_vec(), &heads);
        assert_eq!(tail.len(), 2);
        let (one, only_head) = if tail[0].session == other {
            (&tail[1], &tail[0])
        } else {
            (&tail[0], &tail[1])
        };
        assert_eq!((one.kept.len(), one.cut_at()), (5, None));
        assert_eq!(one.missing, [(6, 6)]);
        assert!(!only_head.started());
        assert_eq!(only_head.missing, [(1, 3)]);

        // Seqs at the ends of the range (verified: anyone can hash) break nothing.
        let mut ends = events.clone();
        for seq in [0, u64::MAX - 1, u64::MAX] {
            let mut odd = events[1].clone();
            odd.id = EventId::generate();
            odd.seq = seq;
            odd.hash = odd.computed_hash();
            ends.push(odd);
        }
        let heads = BTreeMap::from([(events[0].session, u64::MAX)]);
        let ends = chains(ends, &heads);
        assert_eq!(ends[0].kept, events);
        assert_eq!(ends[0].beyond.len(), 3);
        assert_eq!(ends[0].missing, [(7, u64::MAX - 2)]);
    }
}
