//! A wallet's equity curve read from the lake without its frames: the wallet's ledgers through
//! the lake reader (only the row groups that can hold it), then one pass over the row groups,
//! a window of files at a time, for the lake's last event and the closes of the wallet's
//! tokens. A period's close is the price of its last event, so of every (token, period) only
//! that event is kept: memory holds the wallet's events and its tokens' closes, not the lake.
//!
//! The events are those of the frames path ([`super::wallet_performance`]): trades bought or
//! sold, and the swap sides of wallets without trades.

use std::collections::HashMap;

use polars::prelude::PlHashMap;

use super::equity::{EquityInputs, PathPoint, WalletPerformance, performance_of, period_of};
use super::lake_files::{
    DataFiles, Filter, GroupNumbers, OrderKey, SWAPS, Source, TRADES, per_row_group, swap_sides,
};
use super::lake_prices::all_traders;
use super::lake_reader::ledgers_of_files;
use super::options::{EquityConfig, PnlConfig, PnlOptions};
use super::swaps_count;
use crate::Result;
use crate::analytics::arrow_columns::dictionary;
use crate::lake::cols::{event, swap, trade};
use crate::lake::{Dataset, Lake};

/// Where an event sits in the input (dataset, file, row group, `2 × row + side`): of two events
/// with one order key, the later in the input closes the period, as a stable sort leaves it.
type Position = (usize, usize, usize, usize);

/// The last priced event of a (token, period): its key, its position, its price.
type Close = (OrderKey, Position, f64);

/// What one row group gives: the time of its last event, and the last priced event of each
/// (wallet's token, period) it holds.
#[derive(Default)]
struct GroupCloses {
    last: Option<i64>,
    closes: PlHashMap<(u32, i64), Close>,
}

impl GroupCloses {
    fn event(&mut self, time: i64) {
        self.last = self.last.max(Some(time));
    }

    fn offer(&mut self, token: u32, period: i64, close: Close) {
        keep_later(self.closes.entry((token, period)).or_insert(close), close);
    }
}

/// Keeps in `best` the later of `best` and `other` (by order key, then position).
fn keep_later(best: &mut Close, other: Close) {
    if (other.0, other.1) > (best.0, best.1) {
        *best = other;
    }
}

/// [`super::wallet_performance`] of the lake's trades and swaps, read from the lake.
pub(super) fn lake_performance(
    lake: &Lake,
    wallet: &str,
    config: &PnlConfig,
    equity: &EquityConfig,
) -> Result<WalletPerformance> {
    let query = PnlOptions::of_wallet(wallet);
    let trades = DataFiles::of(lake, Dataset::Trades)?;
    let swaps = DataFiles::of(lake, Dataset::Swaps)?;
    let set = ledgers_of_files(lake, &trades, &swaps, &query)?;
    if set.is_empty() {
        let inputs = EquityInputs {
            set,
            paths: HashMap::new(),
            last_period: None,
            equity,
        };
        return performance_of(inputs, wallet, config);
    }
    let mut held: Vec<String> = (0..set.len()).map(|k| set.token(k).to_owned()).collect();
    held.sort_unstable();
    held.dedup();
    let index: PlHashMap<&str, u32> = held
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i as u32))
        .collect();
    let mut parts = closes_of(lake, &trades, &TRADES, 0, &index, equity, None)?;
    if !swaps.entries.is_empty() {
        // Swaps count only for wallets without trades.
        let every = Filter {
            token: None,
            wallets: None,
        };
        let traders = all_traders(lake, &trades, &every)?;
        let skip = |w: &str| !swaps_count(traders.contains(w));
        parts.extend(closes_of(
            lake,
            &swaps,
            &SWAPS,
            1,
            &index,
            equity,
            Some(&skip),
        )?);
    }
    let mut last: Option<i64> = None;
    let mut closes: PlHashMap<(u32, i64), Close> = PlHashMap::default();
    for part in parts {
        last = last.max(part.last);
        for (k, close) in part.closes {
            keep_later(closes.entry(k).or_insert(close), close);
        }
    }
    let mut paths: HashMap<String, Vec<PathPoint>> = HashMap::new();
    for ((token, period), (key, _, price)) in closes {
        paths
            .entry(held[token as usize].clone())
            .or_default()
            .push((period, key, price));
    }
    for p in paths.values_mut() {
        p.sort_by_key(|a| a.1);
    }
    let inputs = EquityInputs {
        set,
        paths,
        last_period: last.map(|t| period_of(equity, t)),
        equity,
    };
    performance_of(inputs, wallet, config)
}

/// The [`GroupCloses`] of every row group of `files` (`dataset` 0: trades, 1: swaps, whose
/// wallets `skip` names are left out).
fn closes_of(
    lake: &Lake,
    files: &DataFiles,
    source: &Source,
    dataset: usize,
    index: &PlHashMap<&str, u32>,
    equity: &EquityConfig,
    skip: Option<&(dyn Fn(&str) -> bool + Sync)>,
) -> Result<Vec<GroupCloses>> {
    let swaps = dataset == 1;
    per_row_group(lake, files, &files.row_groups(), |file, k, g| {
        let mut columns: Vec<&str> = source
            .keys
            .iter()
            .copied()
            .filter(|&c| swaps || c != event::WALLET)
            .collect();
        columns.extend_from_slice(source.numbers);
        let batch = file.read_row_group(&files.footers[k], g, &columns)?;
        let path = &files.paths[k];
        let nums = GroupNumbers::read(&batch, path, swaps)?;
        let mut out = GroupCloses::default();
        let offer = |out: &mut GroupCloses, token: Option<u32>, i: usize, side: usize| {
            let time = nums.time[i];
            out.event(time);
            let price = nums.price[side][i];
            if let Some(t) = token
                && price.is_finite()
            {
                let close = (nums.key(i), (dataset, k, g, 2 * i + side), price);
                out.offer(t, period_of(equity, time), close);
            }
        };
        let ids = |names: Vec<&str>| -> Vec<Option<u32>> {
            names.iter().map(|n| index.get(n).copied()).collect()
        };
        if !swaps {
            let (t_codes, t_names) = dictionary(&batch, trade::TOKEN, path)?;
            let tokens = ids(t_names.names());
            let (d_codes, d_names) = dictionary(&batch, trade::DIRECTION, path)?;
            let event: Vec<bool> = d_names
                .names()
                .iter()
                .map(|d| matches!(*d, "buy" | "sell"))
                .collect();
            for i in 0..t_codes.len() {
                if event[d_codes[i] as usize] {
                    offer(&mut out, tokens[t_codes[i] as usize], i, 0);
                }
            }
        } else {
            let (w_codes, w_names) = dictionary(&batch, event::WALLET, path)?;
            let left_out: Vec<bool> = w_names
                .names()
                .iter()
                .map(|w| skip.is_some_and(|s| s(w)))
                .collect();
            let (k_codes, k_names) = dictionary(&batch, event::SWAP_TYPE, path)?;
            let sides: Vec<(bool, bool)> = k_names.names().iter().map(|k| swap_sides(k)).collect();
            let (i_codes, i_names) = dictionary(&batch, swap::TOKEN_IN, path)?;
            let ins = ids(i_names.names());
            let (o_codes, o_names) = dictionary(&batch, swap::TOKEN_OUT, path)?;
            let outs = ids(o_names.names());
            for i in 0..w_codes.len() {
                if left_out[w_codes[i] as usize] {
                    continue;
                }
                let (sell, buy) = sides[k_codes[i] as usize];
                if sell {
                    offer(&mut out, ins[i_codes[i] as usize], i, 0);
                }
                if buy {
                    offer(&mut out, outs[o_codes[i] as usize], i, 1);
                }
            }
        }
        Ok(out)
    })
}
