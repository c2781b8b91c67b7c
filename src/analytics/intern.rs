//! Interning: the distinct keys (strings, or integer pairs) of many rows as a sorted dictionary,
//! and each row's index in it, built in parallel over ranges of rows and merged so that the
//! indexes do not depend on the number of threads. Strings go through [`StrDict`], a
//! hand-written table kept because it beats the crates' maps on this work (see its comment);
//! other keys through polars' `PlHashMap` (hashbrown with foldhash).

use polars::prelude::*;
use rayon::prelude::*;

use super::columns::{StrArray, nulls, str_at};

/// Rows per range of the parallel passes over rows. Ranges depend on the row count only.
pub(crate) const RANGE: usize = 1 << 18;

/// The ranges of `n` rows.
pub(crate) fn ranges(n: usize) -> impl IndexedParallelIterator<Item = std::ops::Range<usize>> {
    (0..n.div_ceil(RANGE))
        .into_par_iter()
        .map(move |r| r * RANGE..((r + 1) * RANGE).min(n))
}

/// The local dictionary of one range of rows: its distinct keys in first-seen order, and each
/// row's index among them (`u32::MAX` for a row without a key).
type RangeDict<K> = (Vec<K>, Vec<u32>);

/// Local dictionaries of the keys of `n` rows, one per range, built in parallel.
pub(crate) fn local_dicts<K>(n: usize, key: impl Fn(usize) -> Option<K> + Sync) -> Vec<RangeDict<K>>
where
    K: Copy + Eq + std::hash::Hash + Send,
{
    ranges(n)
        .map(|range| {
            let mut map: PlHashMap<K, u32> = PlHashMap::default();
            let mut names: Vec<K> = Vec::new();
            let ids = range
                .map(|i| match key(i) {
                    None => u32::MAX,
                    Some(k) => *map.entry(k).or_insert_with(|| {
                        names.push(k);
                        (names.len() - 1) as u32
                    }),
                })
                .collect();
            (names, ids)
        })
        .collect()
}

/// Merges local dictionaries (of one or more columns): the distinct keys, sorted, and for each
/// column the rank of each row's key among them (`u32::MAX` kept for rows without a key). The
/// ranks do not depend on how the rows were split, so not on the number of threads.
pub(crate) fn merge_dicts<K>(columns: Vec<Vec<RangeDict<K>>>) -> (Vec<K>, Vec<Vec<u32>>)
where
    K: Copy + Ord + std::hash::Hash + Send + Sync,
{
    let mut seen: PlHashSet<K> = PlHashSet::default();
    for (names, _) in columns.iter().flatten() {
        seen.extend(names.iter().copied());
    }
    let mut dict: Vec<K> = seen.into_iter().collect();
    dict.sort_unstable();
    let rank: PlHashMap<K, u32> = dict
        .iter()
        .enumerate()
        .map(|(k, s)| (*s, k as u32))
        .collect();
    let ids = columns
        .into_iter()
        .map(|parts| {
            let ranges: Vec<Vec<u32>> = parts
                .into_par_iter()
                .map(|(names, ids)| {
                    let to: Vec<u32> = names.iter().map(|s| rank[s]).collect();
                    relabel(ids, &to)
                })
                .collect();
            ranges.concat()
        })
        .collect();
    (dict, ids)
}

/// The distinct strings of some string arrays, sorted, and for each array the index of each
/// row's string among them (nulls read as the empty string). Each range of rows is interned
/// with a small dictionary of its own ([`StrDict`]), in parallel, and the dictionaries are
/// then merged ([`merge_strs`]).
pub(crate) fn intern<'a>(arrays: &[&'a StrArray]) -> (Vec<&'a str>, Vec<Vec<u32>>) {
    let parts = arrays
        .iter()
        .map(|&arr| {
            let no_nulls = nulls(arr) == 0;
            ranges(arr.len())
                .map(|range| {
                    let mut dict = StrDict::default();
                    let ids = if no_nulls {
                        dict.ids(range, |i| arr.value(i).as_bytes())
                    } else {
                        dict.ids(range, |i| str_at(arr, i).as_bytes())
                    };
                    let names = dict
                        .first
                        .iter()
                        .map(|&i| str_at(arr, i as usize))
                        .collect();
                    (names, ids)
                })
                .collect()
        })
        .collect();
    merge_strs(parts)
}

/// Local ids replaced by `to[id]`; `u32::MAX` (no key) kept.
fn relabel(mut ids: Vec<u32>, to: &[u32]) -> Vec<u32> {
    for id in &mut ids {
        if *id != u32::MAX {
            *id = to[*id as usize];
        }
    }
    ids
}

/// [`merge_dicts`] for strings: the local dictionaries' names are interned once more, into
/// one [`StrDict`], instead of hashed twice.
fn merge_strs(columns: Vec<Vec<RangeDict<&str>>>) -> (Vec<&str>, Vec<Vec<u32>>) {
    let mut all = StrDict::default();
    let mut names: Vec<&str> = Vec::new();
    let globals: Vec<Vec<Vec<u32>>> = columns
        .iter()
        .map(|parts| {
            parts
                .iter()
                .map(|(local, _)| {
                    local
                        .iter()
                        .map(|s| {
                            let id = all.id(s.as_bytes());
                            if id as usize == names.len() {
                                names.push(s);
                            }
                            id
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut order: Vec<u32> = (0..names.len() as u32).collect();
    order.sort_unstable_by_key(|&k| names[k as usize]);
    let mut rank = vec![0u32; names.len()];
    for (r, &k) in order.iter().enumerate() {
        rank[k as usize] = r as u32;
    }
    let dict = order.iter().map(|&k| names[k as usize]).collect();
    let ids = columns
        .into_iter()
        .zip(globals)
        .map(|(parts, globals)| {
            let ranges: Vec<Vec<u32>> = parts
                .into_par_iter()
                .zip(globals)
                .map(|((_, ids), global)| {
                    let to: Vec<u32> = global.iter().map(|&g| rank[g as usize]).collect();
                    relabel(ids, &to)
                })
                .collect();
            ranges.concat()
        })
        .collect();
    (dict, ids)
}

/// Keys looked up together by [`StrDict::ids`]: their table slots are read before any is
/// compared, so that the memory reads of several keys overlap.
const BATCH: usize = 16;

/// A dictionary of strings, ids given in first-seen order (the local dictionary of one range
/// of rows in [`intern`], the token registry of the events' reader): an open-addressing table
/// whose slots hold 24 bits of the key's hash and where the key's record starts (+ 1; 0 when
/// empty); a record is the key's length and id (4 bytes each) and its bytes, records one
/// after another. A lookup reads one slot and one record instead of the string where the
/// frame holds it.
///
/// Hand-written rather than a crate's map (hashbrown with foldhash, as `PlHashMap`): with it,
/// its batched lookups and its merge of the ranges' dictionaries, wallet PnL went from 6.2 to
/// 9.3 M trades/s (BENCHMARKS.md, PnL, "Second round (towards 10 M/s)").
#[derive(Default)]
pub(crate) struct StrDict {
    slots: Vec<u64>,
    records: Vec<u8>,
    /// Hash and record start of each key.
    keys: Vec<(u64, u64)>,
    /// Row of each key's first occurrence (for [`StrDict::ids`]).
    first: Vec<u32>,
}

/// Bits of a slot that hold the record's start (+ 1).
const RECORD_BITS: u32 = 40;

impl StrDict {
    /// The ids of the strings of the rows `range` (`key(i)` is the string of row `i`).
    fn ids<'k>(
        &mut self,
        range: std::ops::Range<usize>,
        key: impl Fn(usize) -> &'k [u8],
    ) -> Vec<u32> {
        let mut out = Vec::with_capacity(range.len());
        let (mut hashes, mut slots) = ([0u64; BATCH], [0u64; BATCH]);
        let mut start = range.start;
        while start < range.end {
            let m = BATCH.min(range.end - start);
            for (j, h) in hashes[..m].iter_mut().enumerate() {
                *h = hash_bytes(key(start + j));
            }
            if self.slots.is_empty() {
                self.grow();
            }
            let mask = self.slots.len() - 1;
            for (s, &h) in slots[..m].iter_mut().zip(&hashes[..m]) {
                *s = self.slots[h as usize & mask];
            }
            for j in 0..m {
                let k = key(start + j);
                // A slot read before an insertion of this batch still names the right
                // record when it matches: records never move and keep their id.
                let id = match self.matches(slots[j], hashes[j], k) {
                    Some(id) => id,
                    None => {
                        let (id, new) = self.find(k, hashes[j]);
                        if new {
                            self.first.push((start + j) as u32);
                        }
                        id
                    }
                };
                out.push(id);
            }
            start += m;
        }
        out
    }

    /// The id of `s`, if it is in the dictionary.
    pub(crate) fn get(&self, s: &[u8]) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        self.get_hashed(s, hash_bytes(s))
    }

    /// The ids of the keys `key(0..n)` that are in the dictionary, looked up [`BATCH`] at a
    /// time: their slots, then the records those slots name, are read before any key is
    /// compared, so that the memory reads of several keys overlap (in a table larger than the
    /// caches each read is a miss).
    pub(crate) fn get_many<'k>(
        &self,
        n: usize,
        key: impl Fn(usize) -> &'k [u8],
    ) -> Vec<Option<u32>> {
        if self.slots.is_empty() {
            return vec![None; n];
        }
        let mut out = Vec::with_capacity(n);
        let mask = self.slots.len() - 1;
        let (mut hashes, mut slots, mut lens) = ([0u64; BATCH], [0u64; BATCH], [0u8; BATCH]);
        let mut start = 0;
        while start < n {
            let m = BATCH.min(n - start);
            for (j, h) in hashes[..m].iter_mut().enumerate() {
                *h = hash_bytes(key(start + j));
            }
            for (s, &h) in slots[..m].iter_mut().zip(&hashes[..m]) {
                *s = self.slots[h as usize & mask];
            }
            for j in 0..m {
                let slot = slots[j];
                if slot != 0 && slot >> RECORD_BITS == hashes[j] >> RECORD_BITS {
                    lens[j] = self.records[(slot & ((1 << RECORD_BITS) - 1)) as usize - 1];
                }
            }
            // The reads above are what matters, not their values.
            std::hint::black_box(&lens);
            for j in 0..m {
                let k = key(start + j);
                out.push(match self.matches(slots[j], hashes[j], k) {
                    Some(id) => Some(id),
                    None => self.get_hashed(k, hashes[j]),
                });
            }
            start += m;
        }
        out
    }

    /// The id of `s` (of hash `h`), if it is in the (non-empty) dictionary.
    fn get_hashed(&self, s: &[u8], h: u64) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                return None;
            }
            if let Some(id) = self.matches(slot, h, s) {
                return Some(id);
            }
            i = (i + 1) & mask;
        }
    }

    /// The id of `s`; a new id if `s` is new.
    pub(crate) fn id(&mut self, s: &[u8]) -> u32 {
        if self.slots.is_empty() {
            self.grow();
        }
        self.find(s, hash_bytes(s)).0
    }

    /// The id of the key of `slot` when it is `s` (of hash `h`).
    #[inline]
    fn matches(&self, slot: u64, h: u64, s: &[u8]) -> Option<u32> {
        if slot == 0 || slot >> RECORD_BITS != h >> RECORD_BITS {
            return None;
        }
        let at = (slot & ((1 << RECORD_BITS) - 1)) as usize - 1;
        let rec = &self.records[at..];
        let len = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]) as usize;
        (len == s.len() && same_bytes(&rec[8..8 + len], s))
            .then(|| u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]))
    }

    /// The id of `s` (of hash `h`), and whether it is new.
    fn find(&mut self, s: &[u8], h: u64) -> (u32, bool) {
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                break;
            }
            if let Some(id) = self.matches(slot, h, s) {
                return (id, false);
            }
            i = (i + 1) & mask;
        }
        let id = self.keys.len() as u32;
        let at = self.records.len() as u64;
        assert!(at + 1 < 1 << RECORD_BITS, "strings too long to intern");
        self.slots[i] = ((h >> RECORD_BITS) << RECORD_BITS) | (at + 1);
        self.records
            .extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.records.extend_from_slice(&id.to_le_bytes());
        self.records.extend_from_slice(s);
        self.keys.push((h, at));
        if 2 * self.keys.len() > self.slots.len() {
            self.grow();
        }
        (id, true)
    }

    /// Doubles the table (or makes the first one) and puts the keys back.
    fn grow(&mut self) {
        let size = (2 * self.slots.len()).max(1024);
        let mask = size - 1;
        self.slots = vec![0; size];
        for &(h, at) in &self.keys {
            let mut i = h as usize & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = ((h >> RECORD_BITS) << RECORD_BITS) | (at + 1);
        }
    }
}

/// Eight bytes of `b` from `i` as one word.
#[inline]
fn word(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(w)
}

/// Whether two byte strings are equal, a word at a time (keys are short: addresses).
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a == b;
    }
    let mut i = 0;
    while i + 8 < n {
        if word(a, i) != word(b, i) {
            return false;
        }
        i += 8;
    }
    word(a, n - 8) == word(b, n - 8)
}

/// The product of two words folded into one (the high half xor the low half).
#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A fast hash of a short byte string for [`StrDict`] (its quality only affects speed: keys
/// are always compared).
#[inline]
fn hash_bytes(b: &[u8]) -> u64 {
    const K0: u64 = 0x243f_6a88_85a3_08d3;
    const K1: u64 = 0x1319_8a2e_0370_7344;
    const K2: u64 = 0xa409_3822_299f_31d0;
    let n = b.len();
    let mut h = K0 ^ n as u64;
    if n < 8 {
        let mut w = 0u64;
        for (k, &x) in b.iter().enumerate() {
            w |= u64::from(x) << (8 * k);
        }
        h = fold_mul(h ^ w, K1);
    } else {
        let mut i = 0;
        while i + 16 < n {
            h = fold_mul(word(b, i) ^ h, word(b, i + 8) ^ K1);
            i += 16;
        }
        let tail = if n >= 16 {
            (word(b, n - 16), word(b, n - 8))
        } else {
            (word(b, 0), word(b, n - 8))
        };
        h = fold_mul(tail.0 ^ h, tail.1 ^ K2);
    }
    fold_mul(h, K2 ^ K0)
}

/// Names (addresses) seen so far, numbered in order of first sight: shared by the threads of a
/// row-group reader behind a lock, looked up once per distinct name of a row group.
#[derive(Default)]
pub(crate) struct NameRegistry {
    index: StrDict,
    /// The names, by number.
    pub(crate) names: Vec<String>,
}

impl NameRegistry {
    /// The number of `name`, if it has one.
    pub(crate) fn get(&self, name: &str) -> Option<u32> {
        self.index.get(name.as_bytes())
    }

    /// The numbers of `names` that have one, looked up together ([`StrDict::get_many`]).
    pub(crate) fn get_many(&self, names: &[&str]) -> Vec<Option<u32>> {
        self.index.get_many(names.len(), |i| names[i].as_bytes())
    }

    /// The number of `name`, a new one if it has none.
    pub(crate) fn id(&mut self, name: &str) -> u32 {
        let k = self.index.id(name.as_bytes());
        if k as usize == self.names.len() {
            self.names.push(name.to_owned());
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_looked_up_together_get_the_numbers_of_one_lookup_each() {
        let mut registry = NameRegistry::default();
        let names: Vec<String> = (0..1000).map(|i| format!("wallet-{i}")).collect();
        for name in names.iter().step_by(2) {
            registry.id(name);
        }
        // Present and absent names, in batches of every size around BATCH.
        let asked: Vec<&str> = names.iter().rev().map(String::as_str).collect();
        for n in [0, 1, BATCH - 1, BATCH, BATCH + 1, asked.len()] {
            let many = registry.get_many(&asked[..n]);
            let one: Vec<Option<u32>> = asked[..n].iter().map(|a| registry.get(a)).collect();
            assert_eq!(many, one, "{n} names");
        }
        assert_eq!(NameRegistry::default().get_many(&asked[..3]), vec![None; 3]);
        assert_eq!(registry.get_many(&["wallet-0"]), vec![Some(0)]);
        assert_eq!(registry.get_many(&["wallet-1"]), vec![None]);
    }
}
