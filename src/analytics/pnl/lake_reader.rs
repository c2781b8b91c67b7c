//! The lake's trades, and the swaps of wallets without trades, read straight into grouped
//! ledgers: row group by row group with arrow-rs, in parallel, as the events' reader does. No
//! polars frame of the lake and no string per row is built.
//!
//! - **First pass:** the wallet, token and kind columns of each row group, read as Parquet
//!   dictionaries ([`GroupKeys`]: the rules of which rows give events live in `lake_keys`). A
//!   row group's distinct names are numbered once in shared registries, and each row's events
//!   are recorded as a row-group-local (wallet, token) pair. Swaps are read after every trade: a
//!   wallet with trades (of the query's token, if any) takes no event from swaps.
//! - **Ledgers:** the distinct pairs, in (wallet, token) order of the names. Each row group's
//!   pairs get their ledger and the positions of their events in it, in file, row-group and row
//!   order (so ties in event order keep the order a concatenation of the files would give).
//! - **Second pass:** the numbers of the row groups holding events; each event is written once,
//!   straight to its place ([`EventSlots`]), then each ledger is sorted into event order.
//!
//! Memory: the events (56 bytes each), 4 bytes per trade row and 8 per swap row between the two
//! passes, the ledgers' integer pairs and the names. A lake with more events than a query takes
//! at once is read in parts of whole wallets by `lake_parts` instead, with the same ledgers.
//!
//! With wallets named ([`PnlOptions::wallets`]) only the row groups that can hold them are read:
//! their bloom filter on `wallet_address` (written by the lake's writer) or their statistics rule
//! the others out; the latest prices of those wallets' tokens then come from `lake_prices`.

use polars::prelude::PlHashMap;
use rayon::prelude::*;

use super::grouping::{EventSlots, prefetch_item, sort_ledgers};
use super::lake_files::{
    DataFiles, Filter, GroupNumbers, NONE, OrderKey, SWAPS, Source, TRADES, per_row_group,
};
use super::lake_keys::{GroupKeys, KeyPass, SortedNames, key_pass};
use super::lake_prices::latest_prices_of;
use super::ledger::LedgerSet;
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
    /// Once the ledgers are known: each pair's ledger, its token (rank among the sorted
    /// names), and where its events start in its ledger.
    ledger: Vec<u32>,
    token: Vec<u32>,
    start: Vec<u32>,
}

/// The local pairs of a row group, numbered in order of first sight.
#[derive(Default)]
struct LocalPairs {
    index: PlHashMap<u64, u32>,
    pairs: Vec<(u32, u32)>,
    counts: Vec<u32>,
}

impl LocalPairs {
    /// The event of a row's side: `pair << 1 | sell`.
    fn event(&mut self, wallet: u32, token: u32, sell: bool) -> u32 {
        let key = (u64::from(wallet) << 32) | u64::from(token);
        let next = self.pairs.len() as u32;
        let l = *self.index.entry(key).or_insert(next);
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
    let mut local = LocalPairs::default();
    let mut first = vec![NONE; n];
    let mut second = if keys.is_swaps() {
        vec![NONE; n]
    } else {
        Vec::new()
    };
    keys.for_each(|e| {
        let event = local.event(e.wallet, e.token, e.sell);
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
        ledger: Vec::new(),
        token: Vec::new(),
        start: Vec::new(),
    }
}

/// Where the second pass writes: each ledger's first position, and the room of every event.
struct Placement<'a> {
    offsets: &'a [usize],
    slots: &'a EventSlots,
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

/// How many rows (or pairs) ahead the scattered reads and writes of the passes fetch their
/// places: enough to cover a miss to memory, few enough to stay in the first-level cache.
const PREFETCH_AHEAD: usize = 16;

/// The second pass over one row group: its events written to their places, and its latest
/// price per token.
fn write_events(
    g: &GroupEvents,
    nums: &GroupNumbers,
    swaps: bool,
    to: &Placement<'_>,
) -> Result<GroupLatest> {
    let offsets = to.offsets;
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
    // Each pair's first place among every event and the end of its places, gathered in one
    // tight loop before the rows are walked: the reads of `offsets` (one per ledger, spread
    // over the whole table) then overlap one another instead of stalling each event's write.
    let (mut cursor, end): (Vec<usize>, Vec<usize>) = g
        .ledger
        .iter()
        .zip(g.start.iter().zip(&g.counts))
        .map(|(&ledger, (&s, &n))| match ledger {
            NONE => (0, 0),
            _ => {
                let at = offsets[ledger as usize] + s as usize;
                (at, at + n as usize)
            }
        })
        .unzip();
    let mut written = 0usize;
    // The latest priced event of each pair, with its place in the row group (row, side) for
    // ties; reduced to one per token at the end.
    let mut latest: Vec<Option<(OrderKey, usize, f64)>> = vec![None; g.ledger.len()];
    let mut put = |cursor: &mut [usize],
                   l: usize,
                   sell: bool,
                   i: usize,
                   side: usize,
                   fee: f64|
     -> Result<()> {
        let ledger = g.ledger[l];
        if ledger == NONE {
            return Ok(());
        }
        let price = nums.price[side][i];
        if price.is_finite() {
            let key = nums.key(i);
            let best = &mut latest[l];
            if best.is_none_or(|b| key > b.0) {
                *best = Some((key, 2 * i + side, price));
            }
        }
        let event = nums.event(i, side, sell, fee);
        let c = cursor[l];
        if c >= end[l] {
            return Err(damaged(
                "it gave more PnL events on its second read than on its first".into(),
            ));
        }
        cursor[l] += 1;
        // SAFETY: the positions of pair `l` are `offsets[ledger] + start[l]..+ counts[l]`
        // (`cursor[l]..end[l]`), a range no other pair of any row group holds (the starts are
        // running sums within each ledger), and a position past it was refused just above.
        unsafe { to.slots.write(c, event)? };
        written += 1;
        Ok(())
    };
    for i in 0..g.first.len() {
        // The place of the first event of a row a few rows ahead, as its pair's cursor says
        // now (exact unless that pair has events in between): its line is fetched while the
        // rows before it are written.
        if let Some(&ahead) = g.first.get(i + PREFETCH_AHEAD)
            && ahead != NONE
        {
            to.slots.prefetch(cursor[(ahead >> 1) as usize]);
        }
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
    let short = cursor.iter().zip(&end).any(|(c, e)| c != e);
    if short {
        return Err(damaged(
            "it gave fewer PnL events on its second read than on its first".into(),
        ));
    }
    to.slots.count(written);
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

/// The first pass's answer: every row group's events, the ledgers, where each ledger's
/// events go, and the names.
struct FirstPass {
    trade_keys: Vec<GroupEvents>,
    swap_keys: Vec<GroupEvents>,
    wallet_names: Vec<String>,
    token_names: Vec<String>,
    /// The ledgers in (wallet, token) order, as `wallet rank << 32 | token rank`.
    ledgers: Vec<u64>,
    /// Each ledger's first position among every event, plus the end.
    offsets: Vec<usize>,
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
        ledgers,
        offsets,
    } = first_pass(lake, [trades, swaps], [&trade_groups, &swap_groups], filter)?;
    let ledger_tokens: Vec<u32> = ledgers.iter().map(|&p| p as u32).collect();
    let slots = EventSlots::new(offsets[ledgers.len()]);
    let to = Placement {
        offsets: &offsets,
        slots: &slots,
    };
    let trade_latest = second_pass(lake, trades, &TRADES, &trade_groups, &trade_keys, &to)?;
    drop_in_background(trade_keys);
    let swap_latest = second_pass(lake, swaps, &SWAPS, &swap_groups, &swap_keys, &to)?;
    drop_in_background(swap_keys);
    let mut events = slots.finish().map_err(|e| match e {
        Error::Lake { message, .. } => Error::Lake {
            path: lake.root().to_owned(),
            message,
        },
        e => e,
    })?;
    sort_ledgers(&mut events, &offsets);
    let latest_prices = if filter.wallets.is_some() {
        named_wallets_prices(lake, [trades, swaps], filter, &ledger_tokens, &token_names)?
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
        ledger_wallets: ledgers.iter().map(|&p| (p >> 32) as u32).collect(),
        ledger_tokens,
        offsets,
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

/// The first pass: the trades, then the swaps of wallets without trades; the ledgers (the
/// distinct pairs in (wallet, token) order) and where each one's events go.
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
    // The ledgers: the distinct pairs in (wallet, token) order.
    let key = |(w, t): (u32, u32)| {
        (u64::from(wallet_rank[w as usize]) << 32) | u64::from(token_rank[t as usize])
    };
    let mut ledgers: Vec<u64> = trade_keys
        .par_iter()
        .chain(swap_keys.par_iter())
        .flat_map_iter(|g| g.pairs.iter().map(|&p| key(p)))
        .collect();
    ledgers.par_sort_unstable();
    ledgers.dedup();
    if u32::try_from(ledgers.len()).is_err() {
        return Err(Error::InvalidArgument {
            argument: "trades".into(),
            reason: format!(
                "{} (wallet, token) pairs are more than one computation takes (2^32)",
                ledgers.len()
            ),
        });
    }
    // A pair's ledger: its wallet's ledgers are a run of `ledgers` (where `wallet_first`
    // says), its token found in that short run.
    let mut wallet_first = vec![0u32; wallet_names.len() + 1];
    for &l in &ledgers {
        wallet_first[(l >> 32) as usize + 1] += 1;
    }
    for w in 0..wallet_names.len() {
        wallet_first[w + 1] += wallet_first[w];
    }
    let wallet_run = |w: u32| {
        let w = wallet_rank[w as usize] as usize;
        (wallet_first[w] as usize, wallet_first[w + 1] as usize)
    };
    let ledger_of = |(w, t): (u32, u32)| -> u32 {
        let (a, b) = wallet_run(w);
        let t = token_rank[t as usize];
        ledgers[a..b]
            .binary_search_by_key(&t, |&l| l as u32)
            .map_or(NONE, |i| (a + i) as u32)
    };
    trade_keys
        .par_iter_mut()
        .chain(swap_keys.par_iter_mut())
        .for_each(|g| {
            // A row group's wallets are spread over the whole of `ledgers`: the start of the
            // run of a pair a few ahead is fetched while this one is searched.
            g.ledger = (0..g.pairs.len())
                .map(|i| {
                    if let Some(&(w, _)) = g.pairs.get(i + PREFETCH_AHEAD) {
                        prefetch_item(&ledgers, wallet_run(w).0);
                    }
                    ledger_of(g.pairs[i])
                })
                .collect();
            g.token = g
                .pairs
                .iter()
                .map(|&(_, t)| token_rank[t as usize])
                .collect();
            g.pairs = Vec::new();
        });
    drop(wallet_first);
    // Each pair's events follow those of the row groups before it, in file order.
    let mut fill = vec![0u32; ledgers.len()];
    for g in trade_keys.iter_mut().chain(swap_keys.iter_mut()) {
        g.start = Vec::with_capacity(g.ledger.len());
        for (&l, &c) in g.ledger.iter().zip(&g.counts) {
            let f = &mut fill[l as usize];
            g.start.push(*f);
            *f = f.checked_add(c).ok_or_else(|| Error::InvalidArgument {
                argument: "trades".into(),
                reason: "a (wallet, token) pair has more events than one ledger takes (2^32)"
                    .into(),
            })?;
        }
    }
    let mut offsets = Vec::with_capacity(ledgers.len() + 1);
    offsets.push(0usize);
    for &c in &fill {
        offsets.push(offsets[offsets.len() - 1] + c as usize);
    }
    drop(fill);
    Ok(FirstPass {
        trade_keys,
        swap_keys,
        wallet_names,
        token_names,
        ledgers,
        offsets,
    })
}
