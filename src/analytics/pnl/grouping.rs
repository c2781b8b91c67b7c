//! Parallel grouping of the events into ledgers: a ledger per (wallet, token) pair, counted
//! per cell of the wallet × token grid or interned, the events scattered to their ledger by a
//! counting sort (written once, into memory backed by huge pages where the kernel can), then
//! each ledger sorted into event order. The `unsafe` code of the PnL lives here.

use rayon::prelude::*;

use super::ledger::{LedgerEvent, LedgerSet};
use super::options::PnlOptions;
use super::rows::{EventRows, find};
use crate::analytics::intern::{local_dicts, merge_dicts, ranges};
use crate::{Error, Result};

/// The events of the rows, each written at the next position of its ledger: `ledger_of[r]`
/// is the ledger of row `r` (`u32::MAX` for no event), ledger `k` takes the positions
/// `offsets[k]..offsets[k + 1]`, which the rows of ledger `k` fill exactly, in row order.
/// Parts of the ledgers, with their own slices of the output, run in parallel, each over all
/// rows in order; the positions do not depend on the number of parts. The events are written
/// once, into memory not filled beforehand.
fn scatter(rows: &EventRows, ledger_of: &[u32], offsets: &[usize]) -> Vec<LedgerEvent> {
    let ledgers = offsets.len() - 1;
    let total = offsets[ledgers];
    let mut events: Vec<LedgerEvent> = Vec::with_capacity(total);
    huge_pages(&mut events);
    let mut cursor: Vec<usize> = offsets[..ledgers].to_vec();
    let parts = rayon::current_num_threads().clamp(1, 8);
    let mut bounds = vec![0usize];
    for p in 1..parts {
        let target = total * p / parts;
        let k = offsets[..ledgers].partition_point(|&c| c < target);
        bounds.push(k.max(*bounds.last().unwrap_or(&0)));
    }
    bounds.push(ledgers);
    type LedgerRange<'a> = (
        usize,
        usize,
        &'a mut [usize],
        &'a mut [std::mem::MaybeUninit<LedgerEvent>],
    );
    let mut jobs: Vec<LedgerRange> = Vec::new();
    let (mut cursor_rest, mut events_rest) = (
        cursor.as_mut_slice(),
        &mut events.spare_capacity_mut()[..total],
    );
    for w in bounds.windows(2) {
        let (k0, k1) = (w[0], w[1]);
        let (c, c_tail) = cursor_rest.split_at_mut(k1 - k0);
        let (e, e_tail) = events_rest.split_at_mut(offsets[k1] - offsets[k0]);
        jobs.push((k0, offsets[k0], c, e));
        (cursor_rest, events_rest) = (c_tail, e_tail);
    }
    jobs.into_par_iter().for_each(|(k0, e0, cursor, events)| {
        for (r, &k) in ledger_of.iter().enumerate() {
            let k = (k as usize).wrapping_sub(k0);
            if k < cursor.len() {
                let c = &mut cursor[k];
                events[*c - e0].write(rows.event(r));
                *c += 1;
            }
        }
    });
    // Every ledger's cursor went from its start to its end one position at a time, so each
    // position of 0..total was written exactly once.
    assert!(
        cursor.iter().zip(&offsets[1..]).all(|(c, end)| c == end),
        "events scattered beyond their ledgers"
    );
    // SAFETY: the first `total` elements are initialized (checked just above).
    unsafe { events.set_len(total) };
    events
}

/// Sorts each ledger's events (ledger `k` at `offsets[k]..offsets[k + 1]`) into event order,
/// ledgers in parallel; a stable sort, so ties keep the order they were written in.
pub(super) fn sort_ledgers(events: &mut [LedgerEvent], offsets: &[usize]) {
    let mut chunks: Vec<&mut [LedgerEvent]> = Vec::with_capacity(offsets.len());
    let mut rest = events;
    for w in offsets.windows(2) {
        let (head, tail) = rest.split_at_mut(w[1] - w[0]);
        chunks.push(head);
        rest = tail;
    }
    chunks.par_iter_mut().for_each(|c| sort_into_event_order(c));
}

/// Sorts one ledger's events into event order (already so, most often: it is checked first);
/// a stable sort, so ties keep the order they were written in.
pub(super) fn sort_into_event_order(ledger: &mut [LedgerEvent]) {
    if !ledger.is_sorted_by_key(LedgerEvent::order_key) {
        ledger.sort_by_key(LedgerEvent::order_key);
    }
}

/// Asks the processor to bring the cache line of `at` in (a hint: nothing is read or written,
/// so any address is sound; one outside the process's memory is ignored). On other
/// architectures than x86-64, nothing.
#[inline]
fn prefetch_line<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch neither reads nor writes memory and never faults.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Brings `items[i]` into the cache ahead of its use, when `i` is in range: for lookups that
/// land all over a large table, issued a few items ahead so that their misses overlap.
#[inline]
pub(super) fn prefetch_item<T>(items: &[T], i: usize) {
    if let Some(item) = items.get(i) {
        prefetch_line(item);
    }
}

/// Items (events, their keys) written in place by parallel writers, into memory not filled
/// beforehand: the lake's row groups each write their own positions. A writer owns
/// positions it was handed (ranges no other writer holds); [`Slots::finish`] takes the items
/// only when as many were written as there are positions, so every position was written
/// exactly once.
pub(super) struct Slots<T> {
    items: Vec<T>,
    total: usize,
    ptr: *mut T,
    written: std::sync::atomic::AtomicUsize,
}

// SAFETY: the writers write disjoint positions (see `write`), and the vector is only read or
// resized by `finish`, which takes `self` by value once every writer is done.
unsafe impl<T: Send> Sync for Slots<T> {}
unsafe impl<T: Send> Send for Slots<T> {}

impl<T: Copy> Slots<T> {
    /// Room for `total` items.
    pub(super) fn new(total: usize) -> Slots<T> {
        let mut items: Vec<T> = Vec::with_capacity(total);
        huge_pages(&mut items);
        let ptr = items.as_mut_ptr();
        Slots {
            items,
            total,
            ptr,
            written: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Writes `item` at `position`. Refused (nothing written) when the position lies beyond
    /// the room. Each writer then counts its writes ([`Slots::count`]).
    ///
    /// # Safety
    /// Each position is written by one call only, over all writers: the callers hand out
    /// disjoint ranges of positions.
    #[inline]
    pub(super) unsafe fn write(&self, position: usize, item: T) -> Result<()> {
        if position >= self.total {
            // The reader names the file (see `per_row_group`).
            return Err(Error::DamagedLake {
                lake: std::path::PathBuf::new(),
                file: String::new(),
                reason: "it gave more PnL events on its second read than on its first".into(),
            });
        }
        // SAFETY: `position` is inside the allocation (checked above) and no other writer
        // writes it (the caller's contract), so the write does not race.
        unsafe { self.ptr.add(position).write(item) };
        Ok(())
    }

    /// Adds `n` to the count of items written.
    pub(super) fn count(&self, n: usize) {
        self.written
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// The items, once every position was written.
    pub(super) fn finish(self) -> Result<Vec<T>> {
        let (mut items, total) = (self.items, self.total);
        let written = self.written.into_inner();
        if written != total {
            // Each row group's count was checked as it was read, so no file is to blame.
            return Err(Error::Lake {
                path: std::path::PathBuf::new(),
                message: format!(
                    "the data files gave {written} PnL events on their second read, {total} on their first; run the command again"
                ),
            });
        }
        // SAFETY: `total` writes, each at a distinct position below `total` (the writers'
        // contract), initialized every element of `0..total`.
        unsafe { items.set_len(total) };
        Ok(items)
    }
}

/// Asks the kernel to back the memory of `v` (not yet written) with huge pages where it can:
/// a large buffer written at random places then takes fewer page faults and TLB misses.
pub(super) fn huge_pages<T>(v: &mut Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = v.capacity() * std::mem::size_of::<T>();
        let start = v.as_mut_ptr() as usize;
        let (from, to) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
        if to > from {
            // SAFETY: the range lies inside the allocation of `v`; the advice only changes how
            // the kernel backs its pages, not their contents.
            unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// The number of rows of each of `cells` keys (`key` gives a row's key, `None` for no
/// event), counted in parallel: parts of the keys, each over all rows.
fn count_keys(n: usize, cells: usize, key: impl Fn(usize) -> Option<usize> + Sync) -> Vec<u32> {
    let mut count: Vec<u32> = Vec::with_capacity(cells);
    huge_pages(&mut count);
    count.resize(cells, 0);
    let parts = rayon::current_num_threads().clamp(1, 8);
    let size = cells.div_ceil(parts).max(1);
    count
        .par_chunks_mut(size)
        .enumerate()
        .for_each(|(p, part)| {
            let k0 = p * size;
            for r in 0..n {
                if let Some(k) = key(r) {
                    let k = k.wrapping_sub(k0);
                    if k < part.len() {
                        part[k] += 1;
                    }
                }
            }
        });
    count
}

/// A price and the event-order key `(block_time, block_slot, id)` of the event that set it.
pub(super) type KeyedPrice = ((i64, i64, i64), f64);

/// The latest price of each of `tokens` tokens over every event of `rows` (every wallet): the
/// last finite price in event order, with the event-order key of its event (`None` without a
/// finite price). Earlier rows win ties, as in one pass over the rows.
pub(super) fn latest_keyed(rows: &EventRows, tokens: usize) -> Vec<Option<KeyedPrice>> {
    let n = rows.len();
    type Latest = Vec<Option<((i64, i64, i64), f64)>>;
    let latest: Vec<Latest> = ranges(n)
        .map(|range| {
            let mut best: Latest = vec![None; tokens];
            for r in range {
                if rows.side[r].is_none() || !rows.price[r].is_finite() {
                    continue;
                }
                let key = rows.order_key(r);
                let b = &mut best[rows.token[r] as usize];
                match b {
                    Some(v) if v.0 >= key => {}
                    _ => *b = Some((key, rows.price[r])),
                }
            }
            best
        })
        .collect();
    let mut best: Latest = vec![None; tokens];
    for part in latest {
        for (b, p) in best.iter_mut().zip(part) {
            if let Some(p) = p
                && b.is_none_or(|b| p.0 > b.0)
            {
                *b = Some(p);
            }
        }
    }
    best
}

/// Groups the events into ledgers sorted by (wallet, token), each in event order (ties in
/// the input's row order), keeping only the wallets of `query`. Latest prices come from every
/// event (all wallets).
///
/// Wallets and tokens are indexes into sorted dictionaries, so a ledger is one integer pair
/// and (wallet, token) order is the order of the pairs: the pairs are counted per cell of the
/// wallet × token grid when it is small enough, else interned like the strings; the events go
/// to their ledger by a counting sort (stable, so in row order), and a ledger whose rows are
/// not in event order already is sorted, ledgers in parallel.
pub(super) fn group_ledgers(
    rows: &EventRows,
    wallets: &[String],
    tokens: &[String],
    query: &PnlOptions,
) -> Result<LedgerSet> {
    let n = rows.len();
    if u32::try_from(n).is_err() {
        return Err(Error::InvalidArgument {
            argument: "trades".into(),
            reason: format!("{n} events are more than one computation takes (2^32)"),
        });
    }
    let best = latest_keyed(rows, tokens.len());
    let wanted: Option<Vec<bool>> = query.wallets.as_ref().map(|ws| {
        let mut wanted = vec![false; wallets.len()];
        for w in ws {
            if let Some(k) = find(wallets, w) {
                wanted[k] = true;
            }
        }
        wanted
    });
    let kept = |r: usize| {
        rows.side[r].is_some() && wanted.as_ref().is_none_or(|k| k[rows.wallet[r] as usize])
    };
    // A ledger is the pair (wallet, token) as one integer. The events go straight to their
    // ledger by a counting sort, in one pass over the rows in order.
    let token_count = tokens.len();
    let dense = wallets
        .len()
        .checked_mul(token_count)
        .filter(|&cells| cells <= (4 * n).clamp(1 << 20, 1 << 26));
    let (pairs, ledger_of, offsets) = if let Some(cells) = dense {
        // Few enough (wallet, token) cells to count the rows of each directly; the non-empty
        // cells, in order, are the ledgers.
        let cell = |r: usize| {
            kept(r).then(|| rows.wallet[r] as usize * token_count + rows.token[r] as usize)
        };
        let mut count = count_keys(n, cells, cell);
        let (mut pairs, mut offsets) = (Vec::new(), vec![0usize]);
        let mut end = 0usize;
        for (c, slot) in count.iter_mut().enumerate() {
            if *slot > 0 {
                end += *slot as usize;
                offsets.push(end);
                *slot = pairs.len() as u32;
                pairs.push((((c / token_count) as u64) << 32) | (c % token_count) as u64);
            }
        }
        let ledger_of: Vec<u32> = (0..n)
            .into_par_iter()
            .map(|r| cell(r).map_or(u32::MAX, |c| count[c]))
            .collect();
        (pairs, ledger_of, offsets)
    } else {
        let pair = |r: usize| {
            kept(r).then(|| (u64::from(rows.wallet[r]) << 32) | u64::from(rows.token[r]))
        };
        let (pairs, mut ledger_of) = merge_dicts(vec![local_dicts(n, pair)]);
        let ledger_of = ledger_of.pop().unwrap_or_default();
        let mut offsets = vec![0usize; pairs.len() + 1];
        for &k in &ledger_of {
            if k != u32::MAX {
                offsets[k as usize + 1] += 1;
            }
        }
        for k in 0..pairs.len() {
            offsets[k + 1] += offsets[k];
        }
        (pairs, ledger_of, offsets)
    };
    let mut events = scatter(rows, &ledger_of, &offsets);
    drop(ledger_of);
    sort_ledgers(&mut events, &offsets);
    let owned = |names: &[String]| names.to_vec();
    Ok(LedgerSet {
        wallet_names: owned(wallets),
        token_names: owned(tokens),
        ledger_wallets: pairs.iter().map(|&p| (p >> 32) as u32).collect(),
        ledger_tokens: pairs.iter().map(|&p| p as u32).collect(),
        offsets,
        events,
        latest_prices: best.iter().map(|b| b.map(|(_, p)| p)).collect(),
    })
}
