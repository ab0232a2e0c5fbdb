//! A ledger file this process may read but not write, seen through a copy-on-write layer
//! in memory: redb's `StorageBackend` for [`super::open::open_read_only`].
//!
//! redb opens a database for writing even to recover a file a crashed writer left (its
//! read-only open refuses such a file), and the redo log's records must be applied to
//! serve the reads. Over an [`Overlay`] both happen in memory: a write copies the
//! [`BLOCK_BYTES`] blocks it touches into the layer and changes them there; a read takes
//! each block from the layer if it is there, else from the file (bytes past where the
//! file was cut read as zeros). Syncs do nothing; the lock methods never take a lock (the
//! overlay is this process's alone, and a lock on the file would stop its owner's server
//! from opening it).
//!
//! Owns: [`Overlay`]. Must not: write, truncate or lock the file it reads (it is opened
//! read-only), or drop a byte written to it while it lives.
//!
//! Cost: memory for every block written (redb's recovery of an unclean file, the log's
//! records: a few MiB at most for the product's 8 MiB log), none for the blocks read.

use redb::{BackendError, StorageBackend};
use std::collections::HashMap;
use std::io;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// Granularity of the copy-on-write layer: a write copies the blocks it touches whole.
pub(crate) const BLOCK_BYTES: u64 = 4096;

/// A read-only file with a layer in memory that takes every write.
pub(crate) struct Overlay {
    file: std::fs::File,
    layer: Mutex<Layer>,
}

/// What was written over the file.
struct Layer {
    /// The storage's length as redb sees it.
    len: u64,
    /// The bytes of the file still shown where no block is in `blocks`: below the
    /// shortest length the storage was ever cut to (the file's own length at first).
    base: u64,
    /// Blocks written, by index (offset / [`BLOCK_BYTES`]), each [`BLOCK_BYTES`] long.
    blocks: HashMap<u64, Box<[u8]>>,
}

impl std::fmt::Debug for Overlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let layer = self.lock();
        write!(
            f,
            "Overlay({} bytes, {} block(s) in memory)",
            layer.len,
            layer.blocks.len()
        )
    }
}

impl Overlay {
    /// The file at `path`, opened read-only, with an empty layer.
    pub(crate) fn open(path: &Path) -> io::Result<Overlay> {
        Overlay::over(std::fs::File::open(path)?)
    }

    /// `file` (read from only) with an empty layer.
    pub(crate) fn over(file: std::fs::File) -> io::Result<Overlay> {
        let len = file.metadata()?.len();
        Ok(Overlay {
            file,
            layer: Mutex::new(Layer {
                len,
                base: len,
                blocks: HashMap::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Layer> {
        self.layer
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Bytes of the file itself at `offset` into `out`: those at or past `base` are zeros.
    fn read_file(&self, base: u64, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let from_file = base.saturating_sub(offset).min(out.len() as u64) as usize;
        if from_file > 0 {
            self.file.read_exact_at(&mut out[..from_file], offset)?;
        }
        out[from_file..].fill(0);
        Ok(())
    }

    /// The block at `index` in the layer, copied from the file first if it is not there.
    fn block<'l>(&self, layer: &'l mut Layer, index: u64) -> io::Result<&'l mut [u8]> {
        if !layer.blocks.contains_key(&index) {
            let mut block = vec![0u8; BLOCK_BYTES as usize].into_boxed_slice();
            self.read_file(layer.base, index * BLOCK_BYTES, &mut block)?;
            layer.blocks.insert(index, block);
        }
        Ok(layer.blocks.get_mut(&index).expect("inserted above"))
    }
}

impl StorageBackend for Overlay {
    fn len(&self) -> io::Result<u64> {
        Ok(self.lock().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let layer = self.lock();
        let end = offset + out.len() as u64;
        if end > layer.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the storage",
            ));
        }
        // Runs of blocks not in the layer are read from the file in one call each.
        let mut at = offset;
        let mut file_run: Option<u64> = None;
        while at < end {
            let index = at / BLOCK_BYTES;
            let block_end = ((index + 1) * BLOCK_BYTES).min(end);
            match layer.blocks.get(&index) {
                Some(block) => {
                    if let Some(start) = file_run.take() {
                        let range = (start - offset) as usize..(at - offset) as usize;
                        self.read_file(layer.base, start, &mut out[range])?;
                    }
                    let within = (at - index * BLOCK_BYTES) as usize;
                    let take = (block_end - at) as usize;
                    out[(at - offset) as usize..(block_end - offset) as usize]
                        .copy_from_slice(&block[within..within + take]);
                }
                None => {
                    file_run.get_or_insert(at);
                }
            }
            at = block_end;
        }
        if let Some(start) = file_run {
            let range = (start - offset) as usize..out.len();
            self.read_file(layer.base, start, &mut out[range])?;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut layer = self.lock();
        if len < layer.len {
            let cut = len.div_ceil(BLOCK_BYTES);
            layer.blocks.retain(|index, _| *index < cut);
            if !len.is_multiple_of(BLOCK_BYTES) {
                // The block the storage now ends in: zeros after the end, so growing again
                // shows zeros there.
                let within = (len % BLOCK_BYTES) as usize;
                let block = self.block(&mut layer, len / BLOCK_BYTES)?;
                block[within..].fill(0);
            }
            layer.base = layer.base.min(len);
        }
        layer.len = len;
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut layer = self.lock();
        let end = offset + data.len() as u64;
        let mut at = offset;
        while at < end {
            let index = at / BLOCK_BYTES;
            let block_end = ((index + 1) * BLOCK_BYTES).min(end);
            let within = (at - index * BLOCK_BYTES) as usize;
            let block = self.block(&mut layer, index)?;
            block[within..within + (block_end - at) as usize]
                .copy_from_slice(&data[(at - offset) as usize..(block_end - offset) as usize]);
            at = block_end;
        }
        layer.len = layer.len.max(end);
        Ok(())
    }

    fn close(&self) -> io::Result<()> {
        Ok(())
    }

    fn try_lock_range(&self, _start: Bound<u64>, _end: Bound<u64>) -> Result<bool, BackendError> {
        Ok(true)
    }

    fn try_lock_shared_range(
        &self,
        _start: Bound<u64>,
        _end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        Ok(true)
    }

    fn lock_range(&self, _start: Bound<u64>, _end: Bound<u64>) -> Result<(), BackendError> {
        Ok(())
    }

    fn lock_shared_range(&self, _start: Bound<u64>, _end: Bound<u64>) -> Result<(), BackendError> {
        Ok(())
    }

    fn unlock_range(&self, _start: Bound<u64>, _end: Bound<u64>) -> Result<(), BackendError> {
        Ok(())
    }

    fn query_lock_range(&self, _start: Bound<u64>, _end: Bound<u64>) -> Result<bool, BackendError> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `len` bytes, byte `i` = `i % 251`.
    fn file(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &bytes).unwrap();
        (file, bytes)
    }

    fn read(overlay: &Overlay, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0xee; len];
        overlay.read(offset, &mut out).unwrap();
        out
    }

    #[test]
    fn writes_stay_in_memory_and_reads_see_them_over_the_file() {
        let (on_disk, mut expected) = file(3 * BLOCK_BYTES as usize + 100);
        let overlay = Overlay::open(on_disk.path()).unwrap();
        assert_eq!(read(&overlay, 0, expected.len()), expected);
        // A write across a block boundary, and one past the end.
        overlay.write(4000, &[7u8; 200]).unwrap();
        expected[4000..4200].fill(7);
        let end = expected.len() as u64;
        overlay.write(end + 10, &[9u8; 5]).unwrap();
        expected.extend_from_slice(&[0u8; 10]);
        expected.extend_from_slice(&[9u8; 5]);
        assert_eq!(overlay.len().unwrap(), expected.len() as u64);
        assert_eq!(read(&overlay, 0, expected.len()), expected);
        assert_eq!(read(&overlay, 3990, 300), expected[3990..4290]);
        // Cut, then grown again: zeros where it was cut, whatever the file holds there.
        overlay.set_len(5000).unwrap();
        overlay.set_len(9000).unwrap();
        expected.truncate(5000);
        expected.resize(9000, 0);
        assert_eq!(read(&overlay, 0, 9000), expected);
        assert!(overlay.read(8990, &mut [0u8; 20]).is_err(), "past the end");
        // The file itself is untouched.
        let (_, original) = file(3 * BLOCK_BYTES as usize + 100);
        assert_eq!(std::fs::read(on_disk.path()).unwrap(), original);
    }

    #[test]
    fn a_redb_database_over_a_read_only_file_recovers_and_commits_in_memory() {
        use redb::{ReadableDatabase, TableDefinition};
        const T: TableDefinition<u64, u64> = TableDefinition::new("t");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.redb");
        {
            let db = redb::Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(T).unwrap().insert(1, 10).unwrap();
            txn.commit().unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        let db = redb::Database::builder()
            .create_with_backend(Overlay::open(&path).unwrap())
            .unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(T).unwrap().insert(2, 20).unwrap();
        txn.commit().unwrap();
        let read = db.begin_read().unwrap();
        let table = read.open_table(T).unwrap();
        assert_eq!(table.get(1).unwrap().unwrap().value(), 10);
        assert_eq!(table.get(2).unwrap().unwrap().value(), 20);
        drop((table, read, db));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "nothing reached the file"
        );
    }
}
