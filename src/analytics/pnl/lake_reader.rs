//! The lake's trades, and the swaps of wallets without trades, read straight into grouped
//! ledgers: row group by row group with arrow-rs, in parallel, as the events' reader does. No
//! polars frame of the lake and no string per row is built.
//!
//! - **First pass:** the wallet, token and kind columns of each row group, read as Parquet
//!   dictionaries ([`GroupKeys`]: the rules of which rows give events live in `lake_keys`). A
//!   row group's distinct names are numbered once in shared registries, and each row's events
//!   are recorded as a row-group-local (wallet, token) pair. Swaps are read after every trade: a
//!   wallet with trades (of the query's token, if any) takes no event from swaps.
//! - **Buckets:** the wallets, in name order, cut into runs of about [`BUCKET_EVENTS`] events
//!   ([`Buckets`]). Each row group's pairs get their bucket and their key in it, and the row
//!   group a run of positions in each bucket, after the row groups before it (file, row-group
//!   and row order, so ties in event order keep the order a concatenation of the files would
//!   give).
//! - **Second pass:** the numbers of the row groups holding events; each event is appended to
//!   its bucket with its key ([`Slots`]): a few hundred sequential streams of writes, not one
//!   random write per event.
//! - **Ledgers:** each bucket, on its own and in the caches, sorted by key (stable) into its
//!   ledgers, then each ledger into event order.
//!
//! Memory: the events (56 bytes each) and their keys (4), 4 bytes per trade row and 8 per swap
//! row between the two passes, the pairs' buckets and keys, and the names. A lake with more
//! events than a query takes at once is read in parts of whole wallets by `lake_parts` instead,
//! with the same ledgers.
//!
//! With wallets named ([`PnlOptions::wallets`]) only the row groups that can hold them are read:
//! their bloom filter on `wallet_address` (written by the lake's writer) or their statistics rule
//! the others out; the latest prices of those wallets' tokens then come from `lake_prices`.

use polars::prelude::PlHashMap;
use rayon::prelude::*;

use super::grouping::{Slots, prefetch_item, sort_into_event_order};
use super::lake_files::{
    DataFiles, Filter, GroupNumbers, NONE, OrderKey, SWAPS, Source, TRADES, per_row_group,
};
use super::lake_keys::{GroupKeys, KeyPass, SortedNames, key_pass};
use super::lake_prices::latest_prices_of;
use super::ledger::{LedgerEvent, LedgerSet};
use super::options::PnlOptions;
use super::report::drop_in_background;
use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

/// A row group's events after the first pass.
struct GroupEvents {
    /// Per row: its first event (a trade's, or a swap's sold side) as `pair << 1 | sell`, or
    /// [`NONE`].
    first: Vec<u32>,
    /// Per row of a swap: its bought side's event as `pair << 1 | sold`, where `sold` says the
    /// swap's type also sells (its fee is then booked on that side); empty for trades.
    second: Vec<u32>,
    /// The row group's (wallet, token) pairs, as registry numbers; dropped once each has its
    /// ledger.
    pairs: Vec<(u32, u32)>,
    /// Events per pair.
    counts: Vec<u32>,
    /// Once the buckets are known: each pair's bucket, its key in the bucket ([`Buckets`]),
    /// and its token (rank among the sorted names).
    bucket: Vec<u32>,
    key: Vec<u32>,
    token: Vec<u32>,
    /// Events per bucket, and where they start among every event.
    in_bucket: Vec<u32>,
    start: Vec<usize>,
}

/// The local pairs of a row group, numbered in order of first sight.
///
/// Most of a row group's wallets trade one token in it: each wallet's first pair is kept in
/// a table by the wallet's code in the row group's dictionary (small and dense, so it stays in
/// the caches), and only a wallet's other pairs go through a hash table.
struct LocalPairs {
    /// Per wallet code: its first pair, as (token, pair), or `NONE` for the pair.
    first: Vec<(u32, u32)>,
    /// The pairs beyond each wallet's first, by `wallet << 32 | token`.
    others: PlHashMap<u64, u32>,
    pairs: Vec<(u32, u32)>,
    counts: Vec<u32>,
}

impl LocalPairs {
    /// Room for the pairs of `events` events of `wallet_codes` wallets.
    fn with_capacity(events: usize, wallet_codes: usize) -> LocalPairs {
        LocalPairs {
            first: vec![(0, NONE); wallet_codes],
            others: PlHashMap::default(),
            pairs: Vec::with_capacity(events),
            counts: Vec::with_capacity(events),
        }
    }

    /// The event of a row's side: `pair << 1 | sell`.
    fn event(&mut self, wallet_code: u32, wallet: u32, token: u32, sell: bool) -> u32 {
        let next = self.pairs.len() as u32;
        let l = match self.first.get_mut(wallet_code as usize) {
            Some(first) if first.1 == NONE => {
                *first = (token, next);
                next
            }
            Some(&mut (t, l)) if t == token => l,
            _ => {
                let key = (u64::from(wallet) << 32) | u64::from(token);
                *self.others.entry(key).or_insert(next)
            }
        };
        if l == next {
            self.pairs.push((wallet, token));
            self.counts.push(0);
        }
        self.counts[l as usize] += 1;
        (l << 1) | u32::from(sell)
    }
}

/// A row group's events after the first pass, from its keys.
fn group_events(keys: &GroupKeys) -> GroupEvents {
    let n = keys.rows();
    let mut local = LocalPairs::with_capacity(n, keys.wallet_codes());
    let mut first = vec![NONE; n];
    let mut second = if keys.is_swaps() {
        vec![NONE; n]
    } else {
        Vec::new()
    };
    keys.for_each(|e| {
        let event = local.event(e.wallet_code, e.wallet, e.token, e.sell);
        match e.side {
            0 => first[e.row] = event,
            _ => second[e.row] = (event & !1) | u32::from(!e.fee),
        }
    });
    GroupEvents {
        first,
        second,
        pairs: local.pairs,
        counts: local.counts,
        bucket: Vec::new(),
        key: Vec::new(),
        token: Vec::new(),
        in_bucket: Vec::new(),
        start: Vec::new(),
    }
}

/// Where the second pass writes: the room of every event, and of its key in its bucket.
struct Placement<'a> {
    slots: &'a Slots<LedgerEvent>,
    keys: &'a Slots<u32>,
}

/// The latest price of each token of a row group, as (token rank, key, price): one per token,
/// the earlier event on ties.
type GroupLatest = Vec<(u32, OrderKey, f64)>;

/// Keeps the later of `best` and (`key`, `price`); an earlier candidate wins ties.
pub(super) fn keep_latest(best: &mut Option<(OrderKey, f64)>, key: OrderKey, price: f64) {
    if best.is_none_or(|(k, _)| key > k) {
        *best = Some((key, price));
    }
}

/// How many pairs ahead the first pass's lookups of wallets fetch their places: enough to
/// cover a miss to memory, few enough to stay in the first-level cache.
const PREFETCH_AHEAD: usize = 16;

/// The second pass over one row group: its events appended to their buckets (the row group's
/// own run of positions in each), and its latest price per token.
fn write_events(
    g: &GroupEvents,
    nums: &GroupNumbers,
    swaps: bool,
    to: &Placement<'_>,
) -> Result<GroupLatest> {
    // The reader names the file of a damaged row group (see `per_row_group`).
    let damaged = |reason: String| Error::DamagedLake {
        lake: std::path::PathBuf::new(),
        file: String::new(),
        reason,
    };
    if nums.time.len() != g.first.len() {
        return Err(damaged(format!(
            "a row group gave {} rows on its second read, {} on its first",
            nums.time.len(),
            g.first.len()
        )));
    }
    let mut cursor = g.start.clone();
    let end: Vec<usize> = g
        .start
        .iter()
        .zip(&g.in_bucket)
        .map(|(&s, &n)| s + n as usize)
        .collect();
    let mut written = 0usize;
    // The latest priced event of each pair, with its place in the row group (row, side) for
    // ties; reduced to one per token at the end.
    let mut latest: Vec<Option<(OrderKey, usize, f64)>> = vec![None; g.bucket.len()];
    let mut put = |cursor: &mut [usize],
                   l: usize,
                   sell: bool,
                   i: usize,
                   side: usize,
                   fee: f64|
     -> Result<()> {
        let price = nums.price[side][i];
        if price.is_finite() {
            let key = nums.key(i);
            let best = &mut latest[l];
            if best.is_none_or(|b| key > b.0) {
                *best = Some((key, 2 * i + side, price));
            }
        }
        let b = g.bucket[l] as usize;
        let c = cursor[b];
        if c >= end[b] {
            return Err(damaged(
                "it gave more PnL events on its second read than on its first".into(),
            ));
        }
        cursor[b] += 1;
        // SAFETY: the row group's positions in bucket `b` are `start[b]..start[b] +
        // in_bucket[b]` (`cursor[b]..end[b]`), a range no other row group holds (the starts
        // are running sums within each bucket), and a position past it was refused just above.
        unsafe {
            to.slots.write(c, nums.event(i, side, sell, fee))?;
            to.keys.write(c, g.key[l])?;
        }
        written += 1;
        Ok(())
    };
    for i in 0..g.first.len() {
        let (a, b) = (g.first[i], g.second.get(i).copied().unwrap_or(NONE));
        if a == NONE && b == NONE {
            continue;
        }
        let fee = if swaps { nums.swap_fee(i) } else { 0.0 };
        if a != NONE {
            put(&mut cursor, (a >> 1) as usize, a & 1 == 1, i, 0, fee)?;
        }
        if b != NONE {
            // A swap's fee is booked on its sold side, on the bought side only without one.
            let sold = b & 1 == 1;
            let fee = if sold { 0.0 } else { fee };
            put(&mut cursor, (b >> 1) as usize, false, i, 1, fee)?;
        }
    }
    if cursor != end {
        return Err(damaged(
            "it gave fewer PnL events on its second read than on its first".into(),
        ));
    }
    to.slots.count(written);
    to.keys.count(written);
    let mut per_token: PlHashMap<u32, (OrderKey, usize, f64)> = PlHashMap::default();
    for (l, found) in latest.into_iter().enumerate() {
        let Some(f) = found else { continue };
        let token = g.token[l];
        per_token
            .entry(token)
            .and_modify(|b| {
                if f.0 > b.0 || (f.0 == b.0 && f.1 < b.1) {
                    *b = f;
                }
            })
            .or_insert(f);
    }
    Ok(per_token
        .into_iter()
        .map(|(t, (k, _, p))| (t, k, p))
        .collect())
}

/// Row groups of `files` that can hold the wallets of `filter` (every row group without).
pub(super) fn candidate_groups(
    lake: &Lake,
    files: &DataFiles,
    filter: &Filter<'_>,
) -> Result<Vec<(usize, usize)>> {
    let all = files.row_groups();
    if filter.wallets.is_none() {
        return Ok(all);
    }
    let keep = per_row_group(lake, files, &all, |file, k, g| {
        filter.may_hold_wallets(file, &files.footers[k], g)
    })?;
    Ok(all
        .into_iter()
        .zip(keep)
        .filter_map(|(g, k)| k.then_some(g))
        .collect())
}

/// The second pass over the row groups of `groups` that hold events.
fn second_pass(
    lake: &Lake,
    files: &DataFiles,
    source: &Source,
    groups: &[(usize, usize)],
    keys: &[GroupEvents],
    to: &Placement<'_>,
) -> Result<Vec<GroupLatest>> {
    // Row groups without events are not read again; `at` finds a row group's first-pass keys.
    let with_events: Vec<(usize, usize)> = groups
        .iter()
        .zip(keys)
        .filter(|(_, g)| !g.counts.is_empty())
        .map(|(&rg, _)| rg)
        .collect();
    let at: PlHashMap<(usize, usize), usize> =
        groups.iter().enumerate().map(|(i, &rg)| (rg, i)).collect();
    let swaps = source.dataset == Dataset::Swaps;
    per_row_group(lake, files, &with_events, |file, k, g| {
        let batch = file.read_row_group(&files.footers[k], g, source.numbers)?;
        let nums = GroupNumbers::read(&batch, &files.paths[k], swaps)?;
        write_events(&keys[at[&(k, g)]], &nums, swaps, to)
    })
}

/// The grouped events of the lake's trades (and of the swaps of wallets without trades) that
/// `query` selects, and the latest price of each token (over every wallet's events).
pub(super) fn lake_ledgers(lake: &Lake, query: &PnlOptions) -> Result<LedgerSet> {
    let trades = DataFiles::of(lake, Dataset::Trades)?;
    let swaps = DataFiles::of(lake, Dataset::Swaps)?;
    ledgers_of_files(lake, &trades, &swaps, query)
}

/// [`lake_ledgers`] of the trades and swaps files whose footers were read already.
pub(super) fn ledgers_of_files(
    lake: &Lake,
    trades: &DataFiles,
    swaps: &DataFiles,
    query: &PnlOptions,
) -> Result<LedgerSet> {
    let filter = Filter::of(query);
    let groups = [
        candidate_groups(lake, trades, &filter)?,
        candidate_groups(lake, swaps, &filter)?,
    ];
    ledgers_of_groups(lake, [trades, swaps], groups, &filter)
}

/// The first pass's answer: every row group's events, the buckets and the names.
struct FirstPass {
    trade_keys: Vec<GroupEvents>,
    swap_keys: Vec<GroupEvents>,
    wallet_names: Vec<String>,
    token_names: Vec<String>,
    buckets: Buckets,
}

/// [`lake_ledgers`] of the row groups `groups` of the trades and swaps `files` (those that can
/// hold the wallets of `filter`).
pub(super) fn ledgers_of_groups(
    lake: &Lake,
    [trades, swaps]: [&DataFiles; 2],
    [trade_groups, swap_groups]: [Vec<(usize, usize)>; 2],
    filter: &Filter<'_>,
) -> Result<LedgerSet> {
    let FirstPass {
        trade_keys,
        swap_keys,
        wallet_names,
        token_names,
        buckets,
    } = first_pass(lake, [trades, swaps], [&trade_groups, &swap_groups], filter)?;
    let total = buckets.offsets[buckets.len()];
    let slots = Slots::new(total);
    let keys = Slots::new(total);
    let to = Placement {
        slots: &slots,
        keys: &keys,
    };
    let trade_latest = second_pass(lake, trades, &TRADES, &trade_groups, &trade_keys, &to)?;
    drop_in_background(trade_keys);
    let swap_latest = second_pass(lake, swaps, &SWAPS, &swap_groups, &swap_keys, &to)?;
    drop_in_background(swap_keys);
    // A count that disagrees is the lake's.
    let in_lake = |e| match e {
        Error::Lake { message, .. } => Error::Lake {
            path: lake.root().to_owned(),
            message,
        },
        e => e,
    };
    let mut events = slots.finish().map_err(in_lake)?;
    let keys = keys.finish().map_err(in_lake)?;
    let grouped = buckets.group(&mut events, &keys)?;
    drop_in_background(keys);
    let latest_prices = if filter.wallets.is_some() {
        named_wallets_prices(
            lake,
            [trades, swaps],
            filter,
            &grouped.ledger_tokens,
            &token_names,
        )?
    } else {
        let mut best: Vec<Option<(OrderKey, f64)>> = vec![None; token_names.len()];
        for part in trade_latest.into_iter().chain(swap_latest) {
            for (t, k, p) in part {
                keep_latest(&mut best[t as usize], k, p);
            }
        }
        best.into_iter().map(|b| b.map(|(_, p)| p)).collect()
    };
    Ok(LedgerSet {
        wallet_names,
        token_names,
        ledger_wallets: grouped.ledger_wallets,
        ledger_tokens: grouped.ledger_tokens,
        offsets: grouped.offsets,
        events,
        latest_prices,
    })
}

/// The latest prices of the tokens of `ledger_tokens` (ranks among `token_names`) when only
/// the named wallets' row groups were read: from the newest row groups that can hold those
/// tokens, every wallet's.
pub(super) fn named_wallets_prices(
    lake: &Lake,
    [trades, swaps]: [&DataFiles; 2],
    filter: &Filter<'_>,
    ledger_tokens: &[u32],
    token_names: &[String],
) -> Result<Vec<Option<f64>>> {
    let mut traded: Vec<u32> = ledger_tokens.to_vec();
    traded.sort_unstable();
    traded.dedup();
    let names: Vec<&str> = traded
        .iter()
        .map(|&t| token_names[t as usize].as_str())
        .collect();
    let found = latest_prices_of(lake, trades, swaps, filter, &names)?;
    let mut prices = vec![None; token_names.len()];
    for (&t, p) in traded.iter().zip(found) {
        prices[t as usize] = p.map(|(_, p)| p);
    }
    Ok(prices)
}

/// The first pass: the trades, then the swaps of wallets without trades; the buckets, and
/// where each row group's events go in each.
fn first_pass(
    lake: &Lake,
    [trades, swaps]: [&DataFiles; 2],
    [trade_groups, swap_groups]: [&[(usize, usize)]; 2],
    filter: &Filter<'_>,
) -> Result<FirstPass> {
    let KeyPass {
        trades: mut trade_keys,
        swaps: mut swap_keys,
        names:
            SortedNames {
                wallet_names,
                wallet_rank,
                token_names,
                token_rank,
            },
    } = key_pass(
        lake,
        [trades, swaps],
        [trade_groups, swap_groups],
        filter,
        |keys, _| Ok(group_events(keys)),
    )?;
    // Events per wallet (by rank), for the cut of the buckets.
    let mut per_wallet = vec![0u64; wallet_names.len()];
    for g in trade_keys.iter().chain(&swap_keys) {
        for (&(w, _), &n) in g.pairs.iter().zip(&g.counts) {
            per_wallet[wallet_rank[w as usize] as usize] += u64::from(n);
        }
    }
    let buckets = Buckets::cut(&per_wallet, token_names.len())?;
    drop(per_wallet);
    // Each wallet's bucket and place in it, by the registry's number.
    let place: Vec<(u32, u32)> = wallet_rank.iter().map(|&r| buckets.place_of(r)).collect();
    let tokens = buckets.tokens;
    let count = buckets.len();
    trade_keys
        .par_iter_mut()
        .chain(swap_keys.par_iter_mut())
        .for_each(|g| {
            let n = g.pairs.len();
            let (mut bucket, mut key, mut token) = (
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
            );
            let mut in_bucket = vec![0u32; count];
            for (i, (&(w, t), &c)) in g.pairs.iter().zip(&g.counts).enumerate() {
                // A row group's wallets are spread over the whole of `place`: the place of a
                // pair a few ahead is fetched while this one is looked up.
                if let Some(&(w, _)) = g.pairs.get(i + PREFETCH_AHEAD) {
                    prefetch_item(&place, w as usize);
                }
                let (b, p) = place[w as usize];
                let t = token_rank[t as usize];
                bucket.push(b);
                // The key fits: a bucket holds at most `2^32 / tokens` wallets.
                key.push((u64::from(p) * tokens + u64::from(t)) as u32);
                token.push(t);
                in_bucket[b as usize] += c;
            }
            (g.bucket, g.key, g.token, g.in_bucket) = (bucket, key, token, in_bucket);
            g.pairs = Vec::new();
        });
    drop(place);
    // Each row group's events in a bucket follow those of the row groups before it, in file
    // order (trades, then swaps).
    let mut fill: Vec<usize> = buckets.offsets[..count].to_vec();
    for g in trade_keys.iter_mut().chain(swap_keys.iter_mut()) {
        g.start = fill.clone();
        for (f, &n) in fill.iter_mut().zip(&g.in_bucket) {
            *f += n as usize;
        }
    }
    if fill[..] != buckets.offsets[1..] {
        return Err(Error::Lake {
            path: lake.root().to_owned(),
            message:
                "the PnL's events per wallet and per row group disagree; run the command again"
                    .into(),
        });
    }
    Ok(FirstPass {
        trade_keys,
        swap_keys,
        wallet_names,
        token_names,
        buckets,
    })
}

/// About how many events a bucket holds: a bucket's events, its copy and its sort keys stay
/// in the caches while its ledgers are formed.
const BUCKET_EVENTS: u64 = 1 << 15;

/// The ledgers' buckets: runs of whole wallets in name order, of about [`BUCKET_EVENTS`]
/// events each. The second pass appends each event to its bucket (a few hundred sequential
/// streams instead of a write to a random place), and each bucket is then grouped into its
/// ledgers on its own, in the caches ([`Buckets::group`]).
///
/// A pair's key in its bucket is `place × tokens + token`, its wallet's place among the
/// bucket's wallets and its token's rank: a bucket holds at most `2^32 / tokens` wallets, so
/// the key fits 32 bits, and the keys' order is the ledgers' (wallet, token) order.
struct Buckets {
    /// Each bucket's first wallet (rank), plus the number of wallets.
    first_wallet: Vec<u32>,
    /// Each bucket's first position among every event, plus the total.
    offsets: Vec<usize>,
    /// The number of tokens (at least 1).
    tokens: u64,
}

/// The ledgers of grouped buckets, in (wallet, token) order, as [`LedgerSet`] holds them.
struct Grouped {
    ledger_wallets: Vec<u32>,
    ledger_tokens: Vec<u32>,
    offsets: Vec<usize>,
}

impl Buckets {
    /// The buckets of wallets with `per_wallet` events each (by rank), of `tokens` tokens.
    fn cut(per_wallet: &[u64], tokens: usize) -> Result<Buckets> {
        let tokens = (tokens as u64).max(1);
        let most_wallets = (1u64 << 32) / tokens;
        let (mut first_wallet, mut offsets) = (Vec::new(), vec![0usize]);
        let (mut fill, mut wallets) = (0u64, 0u64);
        for (r, &n) in per_wallet.iter().enumerate() {
            let full = wallets == most_wallets || (wallets > 0 && fill + n > BUCKET_EVENTS);
            if r == 0 || full {
                if r > 0 {
                    offsets.push(offsets[offsets.len() - 1] + fill as usize);
                }
                first_wallet.push(r as u32);
                (fill, wallets) = (0, 0);
            }
            fill += n;
            wallets += 1;
            if fill > u64::from(u32::MAX) {
                return Err(Error::InvalidArgument {
                    argument: "trades".into(),
                    reason: format!(
                        "a wallet has {fill} PnL events, more than one computation takes (2^32)"
                    ),
                });
            }
        }
        if !per_wallet.is_empty() {
            offsets.push(offsets[offsets.len() - 1] + fill as usize);
        }
        first_wallet.push(per_wallet.len() as u32);
        Ok(Buckets {
            first_wallet,
            offsets,
            tokens,
        })
    }

    /// The number of buckets.
    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The bucket of the wallet of rank `rank`, and the wallet's place in it.
    fn place_of(&self, rank: u32) -> (u32, u32) {
        let b = self.first_wallet.partition_point(|&f| f <= rank) - 1;
        (b as u32, rank - self.first_wallet[b])
    }

    /// Groups each bucket's events (`events`, with their `keys`, bucket after bucket, each in
    /// file order) into its ledgers, buckets in parallel: the events of a ledger together, in
    /// (wallet, token) order, each ledger then sorted into event order (a stable sort, so ties
    /// keep file order).
    fn group(&self, events: &mut [LedgerEvent], keys: &[u32]) -> Result<Grouped> {
        let mut parts: Vec<(&mut [LedgerEvent], &[u32])> = Vec::with_capacity(self.len());
        let (mut events, mut keys) = (events, keys);
        for w in self.offsets.windows(2) {
            let (e, e_rest) = events.split_at_mut(w[1] - w[0]);
            let (k, k_rest) = keys.split_at(w[1] - w[0]);
            parts.push((e, k));
            (events, keys) = (e_rest, k_rest);
        }
        let ledgers: Vec<Vec<(u32, u32)>> = parts
            .into_par_iter()
            .map_init(
                || (Vec::new(), Vec::new()),
                |(copy, order), (events, keys)| group_bucket(events, keys, copy, order),
            )
            .collect();
        let count: usize = ledgers.iter().map(Vec::len).sum();
        if u32::try_from(count).is_err() {
            return Err(Error::InvalidArgument {
                argument: "trades".into(),
                reason: format!(
                    "{count} (wallet, token) pairs are more than one computation takes (2^32)"
                ),
            });
        }
        let mut out = Grouped {
            ledger_wallets: Vec::with_capacity(count),
            ledger_tokens: Vec::with_capacity(count),
            offsets: Vec::with_capacity(count + 1),
        };
        out.offsets.push(0);
        let mut at = 0usize;
        for (b, part) in ledgers.iter().enumerate() {
            for &(key, n) in part {
                out.ledger_wallets
                    .push(self.first_wallet[b] + (u64::from(key) / self.tokens) as u32);
                out.ledger_tokens
                    .push((u64::from(key) % self.tokens) as u32);
                at += n as usize;
                out.offsets.push(at);
            }
        }
        Ok(out)
    }
}

/// One bucket grouped in place ([`Buckets::group`]): its ledgers as (key, number of events),
/// in key order. `copy` and `order` are room reused from bucket to bucket.
fn group_bucket(
    events: &mut [LedgerEvent],
    keys: &[u32],
    copy: &mut Vec<LedgerEvent>,
    order: &mut Vec<u64>,
) -> Vec<(u32, u32)> {
    // Each event as `key << 32 | position`: sorted, the events of a key come together, in
    // the order they were written (a bucket holds fewer than 2^32 events, see `cut`).
    order.clear();
    order.extend(
        keys.iter()
            .enumerate()
            .map(|(i, &k)| (u64::from(k) << 32) | i as u64),
    );
    order.sort_unstable();
    copy.clear();
    copy.extend_from_slice(events);
    let mut ledgers: Vec<(u32, u32)> = Vec::new();
    for (slot, &o) in events.iter_mut().zip(order.iter()) {
        *slot = copy[o as u32 as usize];
        let key = (o >> 32) as u32;
        match ledgers.last_mut() {
            Some((k, n)) if *k == key => *n += 1,
            _ => ledgers.push((key, 1)),
        }
    }
    let mut at = 0usize;
    for &(_, n) in &ledgers {
        sort_into_event_order(&mut events[at..at + n as usize]);
        at += n as usize;
    }
    ledgers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analytics::pnl::TradeSide;

    fn event(time: i64, id: i64) -> LedgerEvent {
        LedgerEvent {
            time,
            slot: 0,
            id,
            side: TradeSide::Buy,
            quantity: 1.0,
            usd: 1.0,
            fee: 0.0,
        }
    }

    #[test]
    fn buckets_hold_whole_wallets_and_keys_fit_32_bits() {
        // No wallet: no bucket.
        let none = Buckets::cut(&[], 3).unwrap();
        assert_eq!((none.len(), none.offsets.clone()), (0, vec![0]));
        // A wallet above the target alone takes a bucket of its own; the rest fill up to it.
        let big = BUCKET_EVENTS + 5;
        let b = Buckets::cut(&[1, big, 2, 3], 10).unwrap();
        assert_eq!(b.first_wallet, vec![0, 1, 2, 4]);
        assert_eq!(b.offsets, vec![0, 1, 1 + big as usize, 6 + big as usize]);
        assert_eq!(b.place_of(3), (2, 1));
        // With 2^31 tokens a bucket holds two wallets at most, whatever their events.
        let b = Buckets::cut(&[1, 1, 1, 1, 1], 1 << 31).unwrap();
        assert_eq!(b.first_wallet, vec![0, 2, 4, 5]);
        let (_, place) = b.place_of(3);
        assert!(u64::from(place) * b.tokens + (b.tokens - 1) <= u64::from(u32::MAX));
    }

    #[test]
    fn a_bucket_groups_by_key_and_sorts_each_ledger_stably() {
        // Keys 7 and 2 interleaved; ledger 2's events out of time order, with a tie at time 5
        // (same time, slot and id) whose written order (quantity 3 before quantity 5) is kept.
        let keys = [7, 2, 2, 7, 2, 2];
        let mut events = [
            event(1, 10),
            event(9, 2),
            event(5, 1),
            event(2, 11),
            event(5, 1),
            event(4, 4),
        ];
        events[2].quantity = 3.0;
        events[4].quantity = 5.0;
        let (mut copy, mut order) = (Vec::new(), Vec::new());
        let ledgers = group_bucket(&mut events, &keys, &mut copy, &mut order);
        assert_eq!(ledgers, vec![(2, 4), (7, 2)]);
        let got: Vec<(i64, i64, f64)> = events.iter().map(|e| (e.time, e.id, e.quantity)).collect();
        assert_eq!(
            got,
            vec![
                (4, 4, 1.0),
                (5, 1, 3.0),
                (5, 1, 5.0),
                (9, 2, 1.0),
                (1, 10, 1.0),
                (2, 11, 1.0)
            ]
        );
    }

    #[test]
    fn grouped_buckets_give_ledgers_in_wallet_then_token_order() {
        // Two buckets: wallets 0-1 (3 events), wallet 2 (2 events); 3 tokens.
        let b = Buckets {
            first_wallet: vec![0, 2, 3],
            offsets: vec![0, 3, 5],
            tokens: 3,
        };
        let mut events = [
            event(1, 1),
            event(2, 2),
            event(3, 3),
            event(4, 4),
            event(5, 5),
        ];
        // Bucket 0: (wallet 1, token 0), (wallet 0, token 2), (wallet 1, token 0);
        // bucket 1: (wallet 2, token 1) twice.
        let keys = [3, 2, 3, 1, 1];
        let g = b.group(&mut events, &keys).unwrap();
        assert_eq!(g.ledger_wallets, vec![0, 1, 2]);
        assert_eq!(g.ledger_tokens, vec![2, 0, 1]);
        assert_eq!(g.offsets, vec![0, 1, 3, 5]);
        let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
        assert_eq!(ids, vec![2, 1, 3, 4, 5]);
    }
}
