//! The redo log in front of redb (DESIGN §3): one small sync per group commit.
//!
//! A redb commit dirties a dozen scattered pages (four tables per append, redb's own trees
//! and header), and a sync costs by the pages it flushes. So the host writes each group's
//! table writes as one record at the tail of `ledger.wal` (beside `ledger.redb`, 0600),
//! syncs that (one or two pages), and then commits the redb transaction without a sync
//! (`Durability::None`: visible to this process at once). Every [`LogSize::capacity`] bytes
//! of records, when the writer has been idle a while, and when the ledger closes, one redb
//! commit with a sync (a checkpoint) makes everything before it durable in redb itself and
//! the log starts again at its beginning.
//!
//! Owns, one concern a file: [`record`] (the format: a header page naming the file and its
//! checksum key, then records `[len u32][checksum 8][lsn u64][payload]`, payload =
//! postcard of the [`Put`]s, i.e. the exact rows the commit wrote; reading them back, and
//! telling a torn tail from damage, [`record::LogDamage`]), [`file`] ([`LogFile`]: what
//! the log needs of a file, so the fault model can stand in for it; [`DiskLog`] on disk),
//! [`writer`] ([`Wal`]: writing and syncing records, the group commit's half) and
//! [`recovery`] ([`recover`]: replaying the records redb lacks; [`replay_in_memory`]: the
//! same for a ledger this process may only read, [`super::overlay`]). Must not: hold an
//! append rule, let a record count as written before its sync returned, or write a log
//! that holds records it did not apply.
//!
//! Invariants:
//! - The `meta` row [`WAL_LSN`] is written by the commits with a sync only (a checkpoint, a
//!   replay, a record too big for the log), so it names the last record redb holds
//!   durably: replay applies every record after it (lsn `WAL_LSN + 1`, `+ 2` …, read from
//!   the log's start while each checksum holds and the lsns follow each other). redb may
//!   also hold some of them (commits without a sync that reached the file before a kill):
//!   a record is the rows its commit wrote, each put whole, so applying it again over
//!   them leaves the same tables. A commit without a sync thus touches only the tables
//!   its rows are in (each table a commit touches costs redb a root update).
//! - The log starts again at its beginning only after a commit with a sync; a record of an
//!   older round fails the lsn test (smaller lsn) and ends the scan.
//! - [`WAL_ID`] in `meta` names the log this ledger writes to; a log with another id (a
//!   ledger file put back from a copy, a log of another file) is never replayed: it gets a
//!   new key (which invalidates every record in it) before the ledger writes to it.
//! - A record is written only while redb's `WAL_ID` naming the log is synced (a new name is
//!   committed without a sync; the commit after it syncs redb instead of writing a record).
//! - A clean close checkpoints, then clears the log (an end mark at its start): it then
//!   holds nothing to replay.
//! - The file is written with zeros ahead of the tail ([`LogSize::growth`] at a time, up to
//!   the capacity), so a record's sync flushes its own pages and no file-size change.
//!
//! A torn tail and damage. The scan stops at the first record that fails (its length, its
//! checksum, or an lsn that does not follow). After a crash that is the record being
//! written when the machine stopped (a torn tail): nothing acknowledged lies beyond it,
//! only zeros or records of an older round (smaller lsns), and it is dropped without a
//! word, as its commit was never acknowledged. So the scan then looks further
//! ([`MAX_DAMAGE_SEARCH_BYTES`], at every byte): a record beyond the stop that checks out
//! under this log's key with an lsn past the failed one's (greater than the last good lsn
//! plus one: a record of a failed write, begun again at the same lsn, is not one) was
//! acknowledged after it, so the stop is damage, not a tail ([`LogDamage`]: where, which
//! lsn, how many records lie beyond). The choice made then:
//! - The open replays the intact records before the damage, exactly as any open does
//!   (they are checksummed and were acknowledged), committed with a sync, and nothing past
//!   the damage: redb then holds a consistent prefix of the history.
//! - The log is never reset, re-keyed, cleared or written while it holds records that were
//!   not applied ([`Wal::damage`] refuses every write): `recover --to` reads them.
//! - The open reports the damage ([`super::open::Handle::damage_at_open`]), so every write
//!   of the ledger is refused with [`StoreError::Damaged`] naming it; reads show the prefix.
//!
//! A header that cannot be read (too short, not the log's magic number, zeros before
//! records, another build's format) is [`WalError::Unreadable`]: named as the redo log,
//! saying whether it may hold acknowledged commits (bytes after its header that are not
//! zeros; the ledger file not closed cleanly) and never advising to move it away when that
//! could drop them.
//!
//! A failed write or sync of the log fails its group (the callers are answered with the
//! error, never acknowledged) and marks the handle failed: it is never written or synced
//! again. Linux may mark the pages of a failed `fdatasync` clean, so a later sync on the
//! same file descriptor can succeed without them (PostgreSQL's lesson). Before the next
//! record the file is opened again ([`LogFile::reopen`]) and its header and acknowledged
//! records read back from it; if they do not read back, the log is damaged.
//!
//! [`WAL_LSN`]: super::tables::WAL_LSN
//! [`WAL_ID`]: super::tables::WAL_ID
//! [`MAX_DAMAGE_SEARCH_BYTES`]: record::MAX_DAMAGE_SEARCH_BYTES
//! [`LogDamage`]: record::LogDamage
//! [`StoreError::Damaged`]: crate::store::StoreError::Damaged

mod file;
#[cfg(test)]
mod memory;
mod record;
mod recovery;
mod writer;

pub(crate) use file::{DiskLog, LogFile, LogSize, log_path};
pub(crate) use record::{HEADER_BYTES, Put};
pub(crate) use recovery::{recover, replay_in_memory};
pub(crate) use writer::{LedgerState, Log, Wal, WalError};
