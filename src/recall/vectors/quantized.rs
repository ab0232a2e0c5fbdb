//! The in-memory side of vector search: one bit per dimension (the sign) and the few
//! numbers the filters need, per vector; the nearest candidates by Hamming distance.
//!
//! Owns: [`BitIndex`] (appended in position order, scanned whole under the filters, the
//! best [`candidates`](BitIndex::candidates) kept in a bounded heap). Must not: hold the
//! vectors themselves (the caller rescores the candidates exactly from disk) or read
//! anything.
//!
//! Memory per vector: dimensions / 8 bytes of code, plus 8 (position) + 4 (session, as
//! an index into the sessions seen) + 8 (seq) + 8 (time) + 1 (kind): 77 bytes at 384
//! dimensions, so 100k vectors take about 7.7 MB and a million about 77 MB.

use super::VectorFilter;
use crate::event::{SessionId, SessionKind};
use std::collections::{BinaryHeap, HashMap};

/// Sign bits and filter columns of a model's vectors, in position order.
#[derive(Default)]
pub(crate) struct BitIndex {
    dimensions: usize,
    /// u64 words per vector.
    words: usize,
    codes: Vec<u64>,
    positions: Vec<u64>,
    sessions: Vec<u32>,
    seqs: Vec<u64>,
    ats: Vec<u64>,
    kinds: Vec<u8>,
    session_ids: Vec<SessionId>,
    session_slots: HashMap<SessionId, u32>,
    kind_names: Vec<SessionKind>,
}

/// The sign bits of `vector`, appended to `out` (`words` u64s).
pub(crate) fn encode(vector: &[f32], words: usize, out: &mut Vec<u64>) {
    for w in 0..words {
        let mut word = 0u64;
        for (bit, x) in vector.iter().skip(w * 64).take(64).enumerate() {
            if *x > 0.0 {
                word |= 1 << bit;
            }
        }
        out.push(word);
    }
}

/// `model`'s index in `loaded`, started afresh when it holds vectors past `checkpoint` or of
/// another length (the vectors were cleared or the model changed): what each store keeps in
/// memory, to be topped up from its rows after the index's `through()`. Also says whether it
/// was started afresh.
pub(crate) fn loaded_for<'a>(
    loaded: &'a mut HashMap<String, BitIndex>,
    model: &str,
    checkpoint: &super::VectorCheckpoint,
) -> (&'a mut BitIndex, bool) {
    let dimensions = checkpoint.dimensions as usize;
    let stale = loaded.get(model).is_none_or(|index| {
        index.through() > checkpoint.position || index.dimensions() != dimensions
    });
    if stale {
        loaded.insert(model.to_string(), BitIndex::new(dimensions));
    }
    (loaded.get_mut(model).expect("inserted"), stale)
}

impl BitIndex {
    pub(crate) fn new(dimensions: usize) -> Self {
        BitIndex {
            dimensions,
            words: dimensions.div_ceil(64).max(1),
            ..BitIndex::default()
        }
    }

    /// Length of the vectors it holds.
    pub(crate) fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// How many vectors it holds.
    pub(crate) fn len(&self) -> usize {
        self.positions.len()
    }

    /// The highest position it holds (0: none).
    pub(crate) fn through(&self) -> u64 {
        self.positions.last().copied().unwrap_or(0)
    }

    /// Bytes held (for the bench).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.codes.capacity() * 8
            + self.positions.capacity() * 8
            + self.sessions.capacity() * 4
            + self.seqs.capacity() * 8
            + self.ats.capacity() * 8
            + self.kinds.capacity()
            + self.session_ids.capacity() * (16 + 20)
    }

    /// Appends the vector of the event at `position` (after every position it holds;
    /// one at or before them is already held and skipped).
    #[cfg(test)]
    pub(crate) fn push(
        &mut self,
        position: u64,
        session: SessionId,
        seq: u64,
        at: u64,
        kind: SessionKind,
        vector: &[f32],
    ) {
        let mut code = Vec::with_capacity(self.words);
        encode(vector, self.words, &mut code);
        let bytes: Vec<u8> = code.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.push_code(position, session, seq, at, kind, &bytes);
    }

    /// [`BitIndex::push`] of a vector already encoded (`words` u64s, little-endian).
    pub(crate) fn push_code(
        &mut self,
        position: u64,
        session: SessionId,
        seq: u64,
        at: u64,
        kind: SessionKind,
        code: &[u8],
    ) {
        if position <= self.through() || code.len() != self.words * 8 {
            return;
        }
        self.codes.extend(
            code.chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))),
        );
        self.positions.push(position);
        let next = self.session_ids.len() as u32;
        let slot = *self.session_slots.entry(session).or_insert(next);
        if slot == next {
            self.session_ids.push(session);
        }
        self.sessions.push(slot);
        self.seqs.push(seq);
        self.ats.push(at);
        let kind_slot = match self.kind_names.iter().position(|k| *k == kind) {
            Some(at) => at,
            None => {
                self.kind_names.push(kind);
                self.kind_names.len() - 1
            }
        };
        self.kinds.push(kind_slot as u8);
    }

    /// (position, session, seq) of entry `i`.
    pub(crate) fn entry(&self, i: usize) -> (u64, SessionId, u64) {
        (
            self.positions[i],
            self.session_ids[self.sessions[i] as usize],
            self.seqs[i],
        )
    }

    /// Up to `count` entries `filter` admits, nearest to `query` by Hamming distance of
    /// their sign bits, nearest first.
    pub(crate) fn candidates(
        &self,
        query: &[f32],
        count: usize,
        filter: &VectorFilter,
    ) -> Vec<usize> {
        if count == 0 {
            return Vec::new();
        }
        let mut code = Vec::with_capacity(self.words);
        encode(query, self.words, &mut code);
        let session = match filter.session {
            Some(session) => match self.session_slots.get(&session) {
                Some(slot) => Some(*slot),
                None => return Vec::new(),
            },
            None => None,
        };
        let kinds: Vec<u8> = filter
            .kinds
            .iter()
            .filter_map(|k| self.kind_names.iter().position(|n| n == k))
            .map(|at| at as u8)
            .collect();
        if !filter.kinds.is_empty() && kinds.is_empty() {
            return Vec::new();
        }
        let mut best: BinaryHeap<(u32, usize)> = BinaryHeap::with_capacity(count + 1);
        for i in 0..self.positions.len() {
            if filter.bound.is_some_and(|b| self.positions[i] > b)
                || session.is_some_and(|s| self.sessions[i] != s)
                || (!kinds.is_empty() && !kinds.contains(&self.kinds[i]))
                || filter.since.is_some_and(|t| self.ats[i] < t)
                || filter.until.is_some_and(|t| self.ats[i] > t)
            {
                continue;
            }
            let words = &self.codes[i * self.words..(i + 1) * self.words];
            let distance: u32 = words
                .iter()
                .zip(&code)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            if best.len() < count {
                best.push((distance, i));
            } else if let Some(&(worst, _)) = best.peek()
                && distance < worst
            {
                best.pop();
                best.push((distance, i));
            }
        }
        let mut out = best.into_sorted_vec();
        out.truncate(count);
        out.into_iter().map(|(_, i)| i).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_by_sign_come_first_and_filters_hold() {
        let kind = SessionKind::new("thinking");
        let a = SessionId(ulid::Ulid(1));
        let b = SessionId(ulid::Ulid(2));
        let mut index = BitIndex::new(4);
        index.push(1, a, 1, 10, kind, &[1.0, 1.0, 1.0, 1.0]);
        index.push(2, b, 1, 20, kind, &[-1.0, -1.0, -1.0, -1.0]);
        index.push(3, a, 2, 30, kind, &[1.0, 1.0, -1.0, 1.0]);
        index.push(3, a, 2, 30, kind, &[1.0, 1.0, -1.0, 1.0]); // again: skipped
        assert_eq!(index.len(), 3);
        let all = VectorFilter::default();
        assert_eq!(index.candidates(&[1.0, 1.0, 1.0, 1.0], 2, &all), vec![0, 2]);
        let only_b = VectorFilter {
            session: Some(b),
            ..VectorFilter::default()
        };
        assert_eq!(index.candidates(&[1.0; 4], 5, &only_b), vec![1]);
        let early = VectorFilter {
            until: Some(15),
            ..VectorFilter::default()
        };
        assert_eq!(index.candidates(&[1.0; 4], 5, &early), vec![0]);
    }
}
