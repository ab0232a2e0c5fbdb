//! The redo log's format: what its bytes are, and reading records back from them.
//!
//! Owns: the header page ([`HEADER_BYTES`]: [`MAGIC`], [`FORMAT_VERSION`], the checksum
//! key), a record (`[len u32][checksum 8][lsn u64][payload]`, payload = postcard of the
//! [`Put`]s: [`encode`], [`checksum`]), the scan of the records from the log's start
//! ([`scan`]), the search past a failed record that tells damage from a torn tail
//! ([`damage_after`], [`LogDamage`]) and reading one record ([`read_record`]). Every
//! function takes the log's key and file. Must not: write the file, or know the ledger's
//! tables (what a [`Put`] does to them is `super::recovery`'s).

use super::file::LogFile;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;

/// Size of the header page at the start of the log (magic, format version, key).
pub(crate) const HEADER_BYTES: u64 = 4096;

/// The first bytes of every redo log.
pub(super) const MAGIC: [u8; 8] = *b"RLDGWAL\0";

/// The record format this build writes and reads.
pub(super) const FORMAT_VERSION: u32 = 1;

/// Bytes of the header that are read: magic (8), format version (4), key (32).
pub(super) const HEADER_FIELDS_BYTES: usize = 44;

/// Bytes before a record's payload: length (u32), checksum (8 bytes), lsn (u64).
pub(super) const RECORD_HEAD_BYTES: usize = 20;

/// Most bytes after a failed record that are searched for records acknowledged after it
/// (and, for an unreadable header, for bytes that are not zeros): the product's log is
/// 8 MiB; a file longer than this is searched this far.
pub(crate) const MAX_DAMAGE_SEARCH_BYTES: u64 = 64 << 20;

/// One row a commit wrote, as written (replay writes the same bytes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum Put {
    Event {
        session: u128,
        seq: u64,
        #[serde(serialize_with = "crate::store::codec::bytes_whole")]
        row: Vec<u8>,
    },
    EventId {
        id: u128,
        session: u128,
        seq: u64,
    },
    Position {
        position: u64,
        session: u128,
        seq: u64,
    },
    Head {
        session: u128,
        #[serde(serialize_with = "crate::store::codec::bytes_whole")]
        row: Vec<u8>,
    },
    Alias {
        alias: String,
        session: u128,
    },
    Meta {
        key: String,
        value: u64,
    },
}

/// A record that does not read back with records acknowledged after it: damage, not a
/// torn tail (see the module's doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogDamage {
    /// Byte offset of the first record that does not read back.
    pub(crate) offset: u64,
    /// The lsn it should have had.
    pub(crate) lsn: u64,
    /// The records beyond it that check out under the log's key, each (offset, lsn), in
    /// file order: acknowledged commits the ledger file does not hold.
    pub(crate) beyond: Vec<(u64, u64)>,
}

impl LogDamage {
    /// The lsns of the records beyond the damage: (lowest, highest).
    pub(crate) fn lsn_range(&self) -> (u64, u64) {
        let lsns = self.beyond.iter().map(|(_, lsn)| *lsn);
        (
            lsns.clone().min().unwrap_or(self.lsn),
            lsns.max().unwrap_or(self.lsn),
        )
    }

    /// The damage in words, naming the log at `path`.
    pub(crate) fn describe(&self, path: &Path) -> String {
        let (first, last) = self.lsn_range();
        format!(
            "its redo log {} is damaged at byte {}: record {} does not read back, and {} \
             acknowledged record(s) after it (lsn {first} to {last}) do. Nothing past the \
             damage was replayed (the ledger shows the commits before it) and the log is \
             kept as it is",
            path.display(),
            self.offset,
            self.lsn,
            self.beyond.len(),
        )
    }
}

/// One record the scan read: its lsn, its rows, and where it ends in the file.
pub(super) struct Scanned {
    pub(super) lsn: u64,
    pub(super) puts: Vec<Put>,
    pub(super) end: u64,
}

/// What a scan of the log from its start read.
#[derive(Default)]
pub(super) struct Scan {
    pub(super) records: Vec<Scanned>,
    /// The first byte that is not part of a record read: where a failed record begins.
    pub(super) stop: u64,
    /// The scan stopped at the end mark of a clear (`Wal::clear`): what follows it is
    /// of an earlier history, never damage.
    pub(super) cleared: bool,
}

/// A record's checksum under the log's `key`: keyed BLAKE3 of its length, lsn and payload.
pub(super) fn checksum(key: &[u8; 32], len: u32, lsn: u64, payload: &[u8]) -> [u8; 8] {
    let mut hasher = blake3::Hasher::new_keyed(key);
    hasher.update(&len.to_le_bytes());
    hasher.update(&lsn.to_le_bytes());
    hasher.update(payload);
    let hash = hasher.finalize();
    hash.as_bytes()[..8].try_into().expect("8 bytes")
}

/// The record of `puts` under `lsn`, checksummed with the log's `key`.
pub(super) fn encode(key: &[u8; 32], lsn: u64, puts: &[Put]) -> Vec<u8> {
    let payload = postcard::to_stdvec(puts).expect("puts always serialize");
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut record = Vec::with_capacity(RECORD_HEAD_BYTES + payload.len());
    record.extend_from_slice(&len.to_le_bytes());
    record.extend_from_slice(&checksum(key, len, lsn, &payload));
    record.extend_from_slice(&lsn.to_le_bytes());
    record.extend_from_slice(&payload);
    record
}

/// The record at `at` if it checks out under `key` (`len` bytes in the file
/// from `at` on are in `bytes`): its lsn and payload length.
fn record_in(key: &[u8; 32], bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let head = bytes.get(at..at + RECORD_HEAD_BYTES)?;
    let payload_len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
    let lsn = u64::from_le_bytes(head[12..20].try_into().expect("8 bytes"));
    let payload =
        bytes.get(at + RECORD_HEAD_BYTES..at + RECORD_HEAD_BYTES + payload_len as usize)?;
    (payload_len > 0 && head[4..12] == checksum(key, payload_len, lsn, payload))
        .then_some((lsn, payload_len as usize))
}

/// The records from the start of the log in `file` while each checks out under `key` and
/// the lsns follow each other, and where that stopped.
pub(super) fn scan(key: &[u8; 32], file: &dyn LogFile) -> io::Result<Scan> {
    let len = file.len()?;
    let mut scan = Scan {
        records: Vec::new(),
        stop: HEADER_BYTES,
        cleared: false,
    };
    let mut at = HEADER_BYTES;
    let mut head = [0u8; RECORD_HEAD_BYTES];
    while at + RECORD_HEAD_BYTES as u64 <= len {
        file.read_at(at, &mut head)?;
        let payload_len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
        let lsn = u64::from_le_bytes(head[12..20].try_into().expect("8 bytes"));
        let end = at + RECORD_HEAD_BYTES as u64 + u64::from(payload_len);
        let follows = scan.records.last().is_none_or(|last| lsn == last.lsn + 1);
        if payload_len == 0 {
            // Zeros ahead of the tail, or the end mark of a clear.
            scan.cleared = head[4..12] == checksum(key, 0, lsn, &[]);
            break;
        }
        if end > len || !follows {
            break;
        }
        let mut payload = vec![0u8; payload_len as usize];
        file.read_at(at + RECORD_HEAD_BYTES as u64, &mut payload)?;
        if head[4..12] != checksum(key, payload_len, lsn, &payload) {
            break;
        }
        let Ok(puts) = postcard::from_bytes::<Vec<Put>>(&payload) else {
            tracing::warn!(lsn, "a redo log record checks out but does not decode");
            break;
        };
        scan.records.push(Scanned { lsn, puts, end });
        at = end;
        scan.stop = end;
    }
    Ok(scan)
}

/// Whether the scan's stop is damage rather than a torn tail: the records beyond it
/// (searched byte by byte, up to [`MAX_DAMAGE_SEARCH_BYTES`]) that check out under
/// `key` with an lsn past the failed record's. `floor` is the last lsn redb holds;
/// the failed record's lsn is the one after the last good one (or after `floor`).
pub(super) fn damage_after(
    key: &[u8; 32],
    file: &dyn LogFile,
    scan: &Scan,
    floor: u64,
) -> io::Result<Option<LogDamage>> {
    if scan.cleared {
        return Ok(None);
    }
    let last_good = scan.records.last().map_or(floor, |r| r.lsn.max(floor));
    let failed_lsn = last_good + 1;
    let len = file.len()?;
    let end = len.min(scan.stop.saturating_add(MAX_DAMAGE_SEARCH_BYTES));
    if scan.stop + RECORD_HEAD_BYTES as u64 > end {
        return Ok(None);
    }
    let mut bytes = vec![0u8; (end - scan.stop) as usize];
    file.read_at(scan.stop, &mut bytes)?;
    // An lsn past the failed one, and no further than the records these bytes could
    // hold: cheap tests that leave the checksum for the few candidates that pass.
    let highest = failed_lsn + bytes.len() as u64;
    let mut beyond = Vec::new();
    let mut at = 0usize;
    while at + RECORD_HEAD_BYTES <= bytes.len() {
        let lsn = u64::from_le_bytes(bytes[at + 12..at + 20].try_into().expect("8 bytes"));
        let plausible = lsn > failed_lsn
            && lsn <= highest
            && u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) > 0;
        if plausible && let Some((lsn, payload_len)) = record_in(key, &bytes, at) {
            beyond.push((scan.stop + at as u64, lsn));
            at += RECORD_HEAD_BYTES + payload_len;
            continue;
        }
        at += 1;
    }
    Ok((!beyond.is_empty()).then_some(LogDamage {
        offset: scan.stop,
        lsn: failed_lsn,
        beyond,
    }))
}

/// The rows of the record at `offset` if it checks out under `key`: its lsn
/// and puts (for `recover`, which reads the records past a damaged one).
pub(super) fn read_record(
    key: &[u8; 32],
    file: &dyn LogFile,
    offset: u64,
) -> io::Result<Option<(u64, Vec<Put>)>> {
    let len = file.len()?;
    if offset + RECORD_HEAD_BYTES as u64 > len {
        return Ok(None);
    }
    let mut head = [0u8; RECORD_HEAD_BYTES];
    file.read_at(offset, &mut head)?;
    let payload_len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as u64;
    let end = offset + RECORD_HEAD_BYTES as u64 + payload_len;
    if end > len {
        return Ok(None);
    }
    let mut bytes = vec![0u8; (end - offset) as usize];
    file.read_at(offset, &mut bytes)?;
    let Some((lsn, _)) = record_in(key, &bytes, 0) else {
        return Ok(None);
    };
    Ok(
        postcard::from_bytes::<Vec<Put>>(&bytes[RECORD_HEAD_BYTES..])
            .ok()
            .map(|puts| (lsn, puts)),
    )
}

#[cfg(test)]
mod tests {
    //! The records read back, and what follows a clear's end mark.

    use super::*;
    use crate::store::redb::wal::memory::{
        MemoryFile, SIZE, lsns, open, pending_records, put, write_records,
    };

    #[test]
    fn records_read_back_in_lsn_order_until_one_does_not_follow_or_check_out() {
        let file = MemoryFile::default();
        let mut wal = open(&file);
        assert_eq!(file.len().unwrap(), HEADER_BYTES, "a new log is its header");
        write_records(&mut wal, 1..=3);
        assert_eq!(
            file.len().unwrap(),
            HEADER_BYTES + SIZE.growth,
            "grown ahead by the first record"
        );
        // Opened again: the same key, the same records.
        let again = open(&file);
        assert_eq!(again.id(), wal.id());
        assert_eq!(lsns(&again), [1, 2, 3]);
        assert_eq!(again.scan().unwrap().records[1].puts, put(2));

        // A new round from the start: the old round's records after it do not follow.
        wal.reset(3);
        let offsets = write_records(&mut wal, 4..=4);
        assert_eq!(offsets, [HEADER_BYTES]);
        assert_eq!(lsns(&wal), [4]);

        // A flipped byte ends the scan before its record.
        let second = wal.tail as usize;
        let record = wal.encode(5, &put(5));
        wal.write(&record).unwrap();
        file.edit(|bytes| bytes[second + RECORD_HEAD_BYTES + 1] ^= 1);
        assert_eq!(lsns(&wal), [4]);
        assert_eq!(wal.scan().unwrap().stop, second as u64);

        // A new key: nothing checks out any more.
        wal.rekey().unwrap();
        assert!(lsns(&wal).is_empty());
    }

    #[test]
    fn a_cleared_log_holds_nothing_and_what_follows_its_end_mark_is_never_damage() {
        let file = MemoryFile::default();
        let (_, _) = pending_records(&file, 4);
        let mut wal = open(&file);
        wal.holds_records = true;
        wal.last_lsn = 4;
        wal.clear().unwrap();
        let scan = wal.scan().unwrap();
        assert!(scan.records.is_empty() && scan.cleared);
        // A ledger file put back from a copy (it holds less than the log's history).
        assert_eq!(wal.damage_after(&scan, 0).unwrap(), None);
        // A zeroed head instead of the mark (damage, or a build before the mark): the
        // acknowledged records after it are damage for a ledger that lacks them.
        file.edit(|bytes| bytes[HEADER_BYTES as usize..][..RECORD_HEAD_BYTES].fill(0));
        let scan = wal.scan().unwrap();
        assert!(!scan.cleared);
        assert_eq!(
            wal.damage_after(&scan, 0).unwrap().unwrap().lsn_range(),
            (2, 4)
        );
        assert_eq!(
            wal.damage_after(&scan, 4).unwrap(),
            None,
            "a ledger that holds them"
        );
    }
}
