//! The lake's ledgers in parts of whole wallets ([`lake_ledger_parts`]), for lakes whose events
//! do not fit in memory at once: the files are read twice, whatever the number of parts.
//!
//! - **Counting pass:** the key columns of every row group ([`GroupKeys`], the rules of
//!   `lake_keys`); the names are numbered in shared registries, each wallet's events counted,
//!   and each row group's events written to a spill file as keys. Nothing is kept in memory per
//!   row: it holds the names and a count per wallet.
//! - **Parts:** the wallets, in address order, cut into parts of at most `events` events (a
//!   wallet with more is a part of its own).
//! - **Dealing pass:** the numbers of every row group holding events, with the counting pass's
//!   keys of its events (13 bytes each, kept in a spill file of their own, so the key columns
//!   are decoded and the names looked up once); each event (its wallet's and token's ranks and
//!   the ledger's numbers, 57 bytes, `EVENT_BYTES`) is appended to the spill file of its
//!   wallet's part (`analytics::spill_files`), one segment per row group and part, and the
//!   latest price of each token is kept.
//! - **A part at a time:** its segments are read back in row-group order, each event written
//!   to its wallet's next place (so ties in event order keep the order a concatenation of the
//!   files gives, as in the whole read), then each wallet's events are sorted by token and event
//!   order, which makes its ledgers. The part is handed over, and its memory given back, before
//!   the next is read.
//!
//! A lake whose trades and swaps cannot give more than `events` events (one per trade, two per
//! swap) is read whole by `lake_reader`, in one part: the same ledgers, without the spill.

use std::sync::{Mutex, PoisonError};

use rayon::prelude::*;

use super::grouping::{huge_pages, sort_into_event_order};
use super::lake_files::{
    DataFiles, Filter, GroupNumbers, NONE, OrderKey, SWAPS, Source, TRADES, per_row_group,
};
use super::lake_keys::{GroupKeys, KeyPass, SortedNames, key_pass};
use super::lake_reader::{candidate_groups, keep_latest, ledgers_of_groups, named_wallets_prices};
use super::ledger::{LedgerEvent, LedgerSet, TradeSide};
use super::options::PnlOptions;
use super::report::drop_in_background;
use crate::analytics::spill_files::{
    PartReader, Segment, SpillFiles, SpilledParts, release_free_memory,
};
use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

/// The grouped events of the lake's trades (and of the swaps of wallets without trades) that
/// `query` selects, handed to `part` in parts of whole wallets, in ledger order, each holding at
/// most `events` events (a wallet with more is a part of its own); the first part is handed
/// over even when empty. Every part carries the names of every wallet and token and the latest
/// prices of every token. Memory holds one part's events (about 60 bytes each), the names and
/// a count per wallet, however many events the lake has; the other parts wait in spill files
/// in the system's temporary folder.
pub(super) fn lake_ledger_parts(
    lake: &Lake,
    query: &PnlOptions,
    events: usize,
    mut part: impl FnMut(&LedgerSet) -> Result<()>,
) -> Result<()> {
    let trades = DataFiles::of(lake, Dataset::Trades)?;
    let swaps = DataFiles::of(lake, Dataset::Swaps)?;
    let filter = Filter::of(query);
    let groups = [
        candidate_groups(lake, &trades, &filter)?,
        candidate_groups(lake, &swaps, &filter)?,
    ];
    let rows = |files: &DataFiles, groups: &[(usize, usize)]| -> usize {
        groups
            .iter()
            .map(|&(k, g)| files.footers[k].metadata().row_group(g).num_rows().max(0) as usize)
            .sum()
    };
    // At most one event per trade and two per swap.
    let most = rows(&trades, &groups[0]).saturating_add(rows(&swaps, &groups[1]).saturating_mul(2));
    if most <= events {
        let set = ledgers_of_groups(lake, [&trades, &swaps], groups, &filter)?;
        part(&set)?;
        drop_in_background(set);
        return Ok(());
    }
    let counted = count_events(lake, [&trades, &swaps], [&groups[0], &groups[1]], &filter)?;
    let wallets = WalletParts::of(&counted.counts, events);
    let dealt = deal_events(lake, [&trades, &swaps], &groups, &counted, &wallets)?;
    let Counted {
        names,
        counts,
        keys,
    } = counted;
    drop(keys);
    let SortedNames {
        mut wallet_names,
        mut token_names,
        ..
    } = names;
    let latest_prices = match filter.wallets.is_some() {
        // Only the named wallets' row groups were read: their tokens' latest prices come from
        // every wallet's newest row groups.
        true => named_wallets_prices(
            lake,
            [&trades, &swaps],
            &filter,
            &dealt.traded,
            &token_names,
        )?,
        false => dealt.latest,
    };
    for p in 0..wallets.len() {
        let (ledgers, events) = read_part(&dealt.spilled, p, &wallets, &counts)?;
        dealt.spilled.remove(p);
        let set = LedgerSet {
            wallet_names,
            token_names,
            ledger_wallets: ledgers.ledger_wallets,
            ledger_tokens: ledgers.ledger_tokens,
            offsets: ledgers.offsets,
            events,
            latest_prices: latest_prices.clone(),
        };
        part(&set)?;
        (wallet_names, token_names) = (set.wallet_names, set.token_names);
        drop_in_background(set.events);
    }
    Ok(())
}

/// The counting pass's answer: the names, sorted, each one's rank by registry number, the
/// events of each wallet by rank, and each row group's events as keys (`KEY_BYTES` each, one
/// segment per row group holding events, ranked in the order of the whole read).
struct Counted {
    names: SortedNames,
    /// Events per wallet, by rank.
    counts: Vec<u64>,
    keys: SpilledParts,
}

/// Bytes of an event's keys in the counting pass's spill, all little-endian: its wallet's and
/// token's registry numbers and its row (u32), then its side (bit 0), whether it sells (bit 1)
/// and whether the swap's fee is booked on it (bit 2).
const KEY_BYTES: usize = 3 * 4 + 1;

/// A row group's events as keys ([`KEY_BYTES`] each).
fn encode_keys(keys: &GroupKeys) -> Vec<u8> {
    let mut buf = Vec::new();
    keys.for_each(|e| {
        let mut r = [0u8; KEY_BYTES];
        r[0..4].copy_from_slice(&e.wallet.to_le_bytes());
        r[4..8].copy_from_slice(&e.token.to_le_bytes());
        r[8..12].copy_from_slice(&(e.row as u32).to_le_bytes());
        r[12] = (e.side as u8 & 1) | (u8::from(e.sell) << 1) | (u8::from(e.fee) << 2);
        buf.extend_from_slice(&r);
    });
    buf
}

/// The counting pass: the trades, then the swaps of wallets without trades.
fn count_events(
    lake: &Lake,
    files: [&DataFiles; 2],
    groups: [&[(usize, usize)]; 2],
    filter: &Filter<'_>,
) -> Result<Counted> {
    let counts = Mutex::new(Vec::<u64>::new());
    let spill = SpillFiles::new(1)?;
    // Counts the events of a row group (ranked `order`) and keeps them as keys.
    let add = |keys: &GroupKeys, order: usize| -> Result<()> {
        let mut local = vec![0u32; keys.wallet_codes()];
        keys.for_each(|e| local[e.wallet_code as usize] += 1);
        let mut counts = counts.lock().unwrap_or_else(PoisonError::into_inner);
        for (code, &n) in local.iter().enumerate().filter(|(_, n)| **n > 0) {
            let w = keys.wallet_id(code as u32) as usize;
            if w >= counts.len() {
                counts.resize(w + 1, 0);
            }
            counts[w] += u64::from(n);
        }
        drop(counts);
        let buf = encode_keys(keys);
        if !buf.is_empty() {
            spill.append(0, order, &buf)?;
        }
        Ok(())
    };
    let KeyPass { names, .. } = key_pass(lake, files, groups, filter, add)?;
    let by_number = counts.into_inner().unwrap_or_else(PoisonError::into_inner);
    let mut counts = vec![0u64; names.wallet_names.len()];
    for (w, n) in by_number.into_iter().enumerate() {
        counts[names.wallet_rank[w] as usize] = n;
    }
    Ok(Counted {
        keys: spill.finish()?,
        names,
        counts,
    })
}

/// The wallets (by rank) cut into parts: part `p` holds the ranks `bounds[p]..bounds[p + 1]`.
struct WalletParts {
    bounds: Vec<u32>,
}

impl WalletParts {
    /// Whole wallets in rank order, at most `events` events a part (a wallet with more is a
    /// part of its own); at least one part.
    fn of(counts: &[u64], events: usize) -> WalletParts {
        let mut bounds = vec![0u32];
        let mut held = 0u64;
        for (w, &n) in counts.iter().enumerate() {
            if held > 0 && held + n > events.max(1) as u64 {
                bounds.push(w as u32);
                held = 0;
            }
            held += n;
        }
        bounds.push(counts.len() as u32);
        WalletParts { bounds }
    }

    fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    /// The part of the wallet ranked `rank`.
    fn of_rank(&self, rank: u32) -> usize {
        self.bounds[1..].partition_point(|&b| b <= rank)
    }

    /// The ranks of part `p`'s wallets.
    fn ranks(&self, p: usize) -> std::ops::Range<usize> {
        self.bounds[p] as usize..self.bounds[p + 1] as usize
    }
}

/// Bytes an event takes in a spill file, all little-endian: its wallet's and token's ranks
/// (u32), time, slot and id (i64), quantity, USD value and fee (f64), and whether it sells (one
/// byte).
const EVENT_BYTES: usize = 2 * 4 + 6 * 8 + 1;

/// The dealing pass's answer: the spill files, the latest price of each token (by rank) and
/// the tokens of any event.
struct Dealt {
    spilled: SpilledParts,
    latest: Vec<Option<f64>>,
    traded: Vec<u32>,
}

/// Each token of a row group's events (its rank), with its latest price and that event's key.
type GroupLatest = Vec<(u32, Option<(OrderKey, f64)>)>;

/// The dealing pass: every row group's events appended to their wallets' parts' files, from
/// the counting pass's keys and the row group's numbers.
fn deal_events(
    lake: &Lake,
    [trades, swaps]: [&DataFiles; 2],
    [trade_groups, swap_groups]: &[Vec<(usize, usize)>; 2],
    counted: &Counted,
    parts: &WalletParts,
) -> Result<Dealt> {
    let spill = SpillFiles::new(parts.len())?;
    let keys = counted.keys.open(0)?;
    let segments = counted.keys.segments(0);
    let pass = |files: &DataFiles, source: &Source, groups: &[(usize, usize)], first: usize| {
        let swaps = source.dataset == Dataset::Swaps;
        // The row groups holding events, and their keys' segments.
        let (held, segments): (Vec<(usize, usize)>, Vec<Segment>) = segments
            .iter()
            .filter(|s| (first..first + groups.len()).contains(&s.order))
            .map(|s| (groups[s.order - first], *s))
            .unzip();
        per_row_group(lake, files, &held, |file, k, g| {
            let batch = file.read_row_group(&files.footers[k], g, source.numbers)?;
            let nums = GroupNumbers::read(&batch, &files.paths[k], swaps)?;
            let segment = &segments[held.partition_point(|&rg| rg < (k, g))];
            let mut records = Vec::with_capacity(segment.len);
            keys.read_into(segment, &mut records)?;
            deal_group(&records, &nums, segment.order, counted, parts, &spill)
        })
    };
    let trade_latest = pass(trades, &TRADES, trade_groups, 0)?;
    let swap_latest = pass(swaps, &SWAPS, swap_groups, trade_groups.len())?;
    drop(keys);
    let mut best: Vec<Option<(OrderKey, f64)>> = vec![None; counted.names.token_names.len()];
    let mut traded = vec![false; counted.names.token_names.len()];
    for group in trade_latest.into_iter().chain(swap_latest) {
        for (t, found) in group {
            traded[t as usize] = true;
            if let Some((k, p)) = found {
                keep_latest(&mut best[t as usize], k, p);
            }
        }
    }
    let spilled = spill.finish()?;
    release_free_memory();
    Ok(Dealt {
        spilled,
        latest: best.into_iter().map(|b| b.map(|(_, p)| p)).collect(),
        traded: (0..traded.len() as u32)
            .filter(|&t| traded[t as usize])
            .collect(),
    })
}

/// One row group of the dealing pass: its events (`records`, [`KEY_BYTES`] each, in row
/// order) appended to the files of their parts, one segment per part; gives the latest price of
/// each of its tokens (the earlier event on ties).
fn deal_group(
    records: &[u8],
    nums: &GroupNumbers,
    order: usize,
    counted: &Counted,
    parts: &WalletParts,
    spill: &SpillFiles,
) -> Result<GroupLatest> {
    let damaged = |reason: String| Error::DamagedLake {
        lake: std::path::PathBuf::new(),
        file: String::new(),
        reason,
    };
    if !records.len().is_multiple_of(KEY_BYTES) {
        return Err(damaged(format!(
            "its events' keys took {} bytes in the spill, not a multiple of {KEY_BYTES}",
            records.len()
        )));
    }
    let rows = nums.time.len();
    let mut segments: Vec<Vec<u8>> = vec![Vec::new(); parts.len()];
    // Each token's place in `latest`, and its latest priced event (key and price).
    let mut place = vec![NONE; counted.names.token_names.len()];
    let mut latest: Vec<(u32, Option<(OrderKey, f64)>)> = Vec::new();
    for r in records.chunks_exact(KEY_BYTES) {
        let at = |k: usize| u32::from_le_bytes(array(&r[k..k + 4])) as usize;
        let (wallet, token, i, flags) = (at(0), at(4), at(8), r[12]);
        let ranks = (
            counted.names.wallet_rank.get(wallet),
            counted.names.token_rank.get(token),
        );
        let (Some(&wallet), Some(&token), true) = (ranks.0, ranks.1, i < rows) else {
            return Err(damaged(format!(
                "it gave {rows} rows on its second read, and the first pass's keys do not fit them"
            )));
        };
        let (side, sell, fee) = (usize::from(flags & 1), flags & 2 != 0, flags & 4 != 0);
        let slot = &mut place[token as usize];
        if *slot == NONE {
            *slot = latest.len() as u32;
            latest.push((token, None));
        }
        let best = &mut latest[*slot as usize].1;
        let price = nums.price[side][i];
        if price.is_finite() {
            let key = nums.key(i);
            if best.is_none_or(|(k, _)| key > k) {
                *best = Some((key, price));
            }
        }
        let fee = if fee { nums.swap_fee(i) } else { 0.0 };
        let event = nums.event(i, side, sell, fee);
        let buf = &mut segments[parts.of_rank(wallet)];
        if buf.capacity() == 0 {
            buf.reserve((records.len() / KEY_BYTES / parts.len() + 16) * EVENT_BYTES);
        }
        encode(buf, wallet, token, &event);
    }
    for (p, buf) in segments.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
        spill.append(p, order, buf)?;
    }
    Ok(latest)
}

/// Appends an event to a segment ([`EVENT_BYTES`]).
fn encode(buf: &mut Vec<u8>, wallet: u32, token: u32, e: &LedgerEvent) {
    let mut r = [0u8; EVENT_BYTES];
    r[0..4].copy_from_slice(&wallet.to_le_bytes());
    r[4..8].copy_from_slice(&token.to_le_bytes());
    for (k, v) in [e.time, e.slot, e.id].into_iter().enumerate() {
        r[8 + 8 * k..16 + 8 * k].copy_from_slice(&v.to_le_bytes());
    }
    for (k, v) in [e.quantity, e.usd, e.fee].into_iter().enumerate() {
        r[32 + 8 * k..40 + 8 * k].copy_from_slice(&v.to_le_bytes());
    }
    r[56] = u8::from(e.side == TradeSide::Sell);
    buf.extend_from_slice(&r);
}

/// The bytes of `b` (of exactly `N` bytes, as every caller slices them) as an array.
fn array<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(b);
    a
}

/// The event of a record ([`EVENT_BYTES`]).
fn decode(r: &[u8]) -> LedgerEvent {
    let int = |at: usize| i64::from_le_bytes(array(&r[at..at + 8]));
    let float = |at: usize| f64::from_le_bytes(array(&r[at..at + 8]));
    LedgerEvent {
        time: int(8),
        slot: int(16),
        id: int(24),
        quantity: float(32),
        usd: float(40),
        fee: float(48),
        side: match r[56] {
            0 => TradeSide::Buy,
            _ => TradeSide::Sell,
        },
    }
}

/// The ledgers of a part: each one's wallet and token (ranks) and where its events start, plus
/// the end.
struct PartLedgers {
    ledger_wallets: Vec<u32>,
    ledger_tokens: Vec<u32>,
    offsets: Vec<usize>,
}

/// Bytes of segments read at a time when a part is read back.
const READ_BYTES: usize = 64 << 20;

/// Part `p` read back from its file: its events, in ledger order, and its ledgers.
fn read_part(
    spilled: &SpilledParts,
    p: usize,
    parts: &WalletParts,
    counts: &[u64],
) -> Result<(PartLedgers, Vec<LedgerEvent>)> {
    let ranks = parts.ranks(p);
    let mut starts = Vec::with_capacity(ranks.len() + 1);
    starts.push(0usize);
    for &n in &counts[ranks.clone()] {
        starts.push(starts[starts.len() - 1] + n as usize);
    }
    let total = starts[ranks.len()];
    let zero = LedgerEvent {
        time: 0,
        slot: 0,
        id: 0,
        side: TradeSide::Buy,
        quantity: 0.0,
        usd: 0.0,
        fee: 0.0,
    };
    // Written at random places: backed by huge pages where the kernel can.
    let mut events = Vec::with_capacity(total);
    huge_pages(&mut events);
    events.resize(total, zero);
    let mut tokens = vec![0u32; total];
    let reader = spilled.open(p)?;
    let mut jobs = jobs_of(&starts, &mut events, &mut tokens);
    let segments = spilled.segments(p);
    let mut records = Vec::new();
    let mut at = 0;
    while at < segments.len() {
        // Consecutive segments, about `READ_BYTES` at most (one at least).
        let mut end = at + 1;
        let mut bytes = segments[at].len;
        while end < segments.len() && bytes + segments[end].len <= READ_BYTES {
            bytes += segments[end].len;
            end += 1;
        }
        records.clear();
        for s in &segments[at..end] {
            if !s.len.is_multiple_of(EVENT_BYTES) {
                return Err(reader.damaged(format!(
                    "a segment of {} bytes, not a multiple of {EVENT_BYTES}",
                    s.len
                )));
            }
            reader.read_into(s, &mut records)?;
        }
        jobs.par_iter_mut()
            .try_for_each(|job| job.place(&records, ranks.start, &reader))?;
        at = end;
    }
    if jobs.iter().any(|j| !j.full()) {
        return Err(reader.damaged(format!("part {p} gave fewer events than were counted")));
    }
    drop(jobs);
    let ledgers = sort_wallets(&starts, &mut events, &tokens, ranks.start as u32);
    Ok((ledgers, events))
}

/// A share of a part's wallets being placed by one thread: its wallets' ranks (from `first`,
/// relative to the part), the next place of each, and its room.
struct PlaceJob<'a> {
    first: usize,
    cursor: Vec<usize>,
    ends: Vec<usize>,
    /// Where the room starts in the part.
    base: usize,
    events: &'a mut [LedgerEvent],
    tokens: &'a mut [u32],
}

/// The part's wallets (`starts`: each one's first place, plus the end) shared among the
/// threads by events, each with its own room.
fn jobs_of<'a>(
    starts: &[usize],
    mut events: &'a mut [LedgerEvent],
    mut tokens: &'a mut [u32],
) -> Vec<PlaceJob<'a>> {
    let wallets = starts.len() - 1;
    let total = starts[wallets];
    let n = rayon::current_num_threads().clamp(1, 8);
    let mut bounds = vec![0usize];
    for j in 1..n {
        let w = starts[..wallets].partition_point(|&s| s < total * j / n);
        bounds.push(w.max(bounds[j - 1]));
    }
    bounds.push(wallets);
    let mut jobs = Vec::with_capacity(n);
    for b in bounds.windows(2) {
        let len = starts[b[1]] - starts[b[0]];
        let (e, e_rest) = std::mem::take(&mut events).split_at_mut(len);
        let (t, t_rest) = std::mem::take(&mut tokens).split_at_mut(len);
        (events, tokens) = (e_rest, t_rest);
        jobs.push(PlaceJob {
            first: b[0],
            cursor: starts[b[0]..b[1]].to_vec(),
            ends: starts[b[0] + 1..=b[1]].to_vec(),
            base: starts[b[0]],
            events: e,
            tokens: t,
        });
    }
    jobs
}

impl PlaceJob<'_> {
    /// Places the events of `records` whose wallets are this job's, each at its wallet's next
    /// place (`rank0`: the rank of the part's first wallet).
    fn place(&mut self, records: &[u8], rank0: usize, reader: &PartReader) -> Result<()> {
        for r in records.chunks_exact(EVENT_BYTES) {
            let rank = u32::from_le_bytes(array(&r[0..4])) as usize;
            let w = rank.wrapping_sub(rank0).wrapping_sub(self.first);
            if w >= self.cursor.len() {
                continue;
            }
            let c = self.cursor[w];
            if c == self.ends[w] {
                return Err(
                    reader.damaged(format!("wallet {rank} gave more events than were counted"))
                );
            }
            self.cursor[w] = c + 1;
            self.events[c - self.base] = decode(r);
            self.tokens[c - self.base] = u32::from_le_bytes(array(&r[4..8]));
        }
        Ok(())
    }

    /// Whether every wallet's places are filled.
    fn full(&self) -> bool {
        self.cursor == self.ends
    }
}

/// Sorts each wallet's events (wallet `w` at `starts[w]..starts[w + 1]`, of the tokens
/// `tokens`) by token and event order, stably, wallets in parallel, and gives the ledgers: a
/// run of one token in a wallet.
fn sort_wallets(
    starts: &[usize],
    events: &mut [LedgerEvent],
    tokens: &[u32],
    rank0: u32,
) -> PartLedgers {
    let mut chunks: Vec<(&mut [LedgerEvent], &[u32])> = Vec::with_capacity(starts.len());
    let (mut rest, mut rest_tokens) = (events, tokens);
    for w in starts.windows(2) {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
        let (t_head, t_tail) = rest_tokens.split_at(w[1] - w[0]);
        chunks.push((head, t_head));
        (rest, rest_tokens) = (tail, t_tail);
    }
    // Each wallet's ledgers: (token, events).
    let runs: Vec<Vec<(u32, usize)>> = chunks
        .into_par_iter()
        .map(|(events, tokens)| {
            let Some(&t0) = tokens.first() else {
                return Vec::new();
            };
            if tokens.iter().all(|&t| t == t0) {
                sort_into_event_order(events);
                return vec![(t0, events.len())];
            }
            let mut order: Vec<u32> = (0..events.len() as u32).collect();
            order.sort_by_key(|&i| (tokens[i as usize], events[i as usize].order_key()));
            let sorted: Vec<LedgerEvent> = order.iter().map(|&i| events[i as usize]).collect();
            events.copy_from_slice(&sorted);
            let mut runs: Vec<(u32, usize)> = Vec::new();
            for &i in &order {
                let t = tokens[i as usize];
                match runs.last_mut() {
                    Some((last, n)) if *last == t => *n += 1,
                    _ => runs.push((t, 1)),
                }
            }
            runs
        })
        .collect();
    let mut ledgers = PartLedgers {
        ledger_wallets: Vec::new(),
        ledger_tokens: Vec::new(),
        offsets: vec![0],
    };
    for (w, wallet_runs) in runs.into_iter().enumerate() {
        for (t, n) in wallet_runs {
            ledgers.ledger_wallets.push(rank0 + w as u32);
            ledgers.ledger_tokens.push(t);
            let end = ledgers.offsets[ledgers.offsets.len() - 1] + n;
            ledgers.offsets.push(end);
        }
    }
    ledgers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wallets_are_cut_into_parts_of_whole_wallets() {
        let parts = WalletParts::of(&[2, 3, 0, 9, 1, 1], 5);
        assert_eq!(parts.bounds, vec![0, 3, 4, 6]);
        assert_eq!(parts.len(), 3);
        assert_eq!(
            (0..6).map(|r| parts.of_rank(r)).collect::<Vec<_>>(),
            vec![0, 0, 0, 1, 2, 2]
        );
        assert_eq!(parts.ranks(1), 3..4);
        assert_eq!(WalletParts::of(&[], 5).len(), 1);
    }

    #[test]
    fn an_event_reads_back_as_written() {
        let e = LedgerEvent {
            time: -5,
            slot: 7,
            id: i64::MAX,
            side: TradeSide::Sell,
            quantity: 1.5,
            usd: f64::NAN,
            fee: 0.25,
        };
        let mut buf = Vec::new();
        encode(&mut buf, 3, 9, &e);
        assert_eq!(buf.len(), EVENT_BYTES);
        let back = decode(&buf);
        assert_eq!((back.time, back.slot, back.id), (e.time, e.slot, e.id));
        assert_eq!(back.side, e.side);
        assert_eq!(back.usd.to_bits(), e.usd.to_bits());
        assert_eq!((back.quantity, back.fee), (e.quantity, e.fee));
    }
}
