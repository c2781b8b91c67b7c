//! The latest prices of named tokens for a query of named wallets, whose reader skipped the
//! row groups without those wallets: the row groups that can hold the tokens (by their bloom
//! filters) are read newest first, until no row group left can hold a later event. As over the
//! whole lake, a price comes from every wallet's trades and from the swaps of wallets without
//! trades.

use polars::prelude::{PlHashMap, PlHashSet};

use super::lake_files::{
    DataFiles, Filter, GroupNumbers, OrderKey, SWAPS, TRADES, per_row_group, swap_sides,
};
use super::swaps_count;
use crate::Result;
use crate::analytics::arrow_columns::dictionary;
use crate::lake::Lake;
use crate::lake::cols::{event, swap, trade};
use crate::lake::read::{blooms_may_hold, column_blooms, time_bounds};
use parquet::bloom_filter::Sbbf;

/// A price found for a token: its event's key and where the event sits in the input (dataset,
/// file, row group, row and side), which breaks ties towards the earlier event.
type Found = (OrderKey, (usize, usize, usize, usize), f64);

/// A row group that can hold a token: its newest time, dataset (0: trades, 1: swaps), file and
/// row group.
type Candidate = (i64, usize, usize, usize);

/// The wallets with a trade of a token `filter` keeps (every trade row group read, its wallet
/// and token columns only).
pub(super) fn all_traders(
    lake: &Lake,
    trades: &DataFiles,
    filter: &Filter<'_>,
) -> Result<PlHashSet<String>> {
    let parts = per_row_group(lake, trades, &trades.row_groups(), |file, k, g| {
        let batch = file.read_row_group(&trades.footers[k], g, &[event::WALLET, trade::TOKEN])?;
        let (w_codes, w_names_dict) = dictionary(&batch, event::WALLET, &trades.paths[k])?;
        let w_names = w_names_dict.names();
        let (t_codes, t_names_dict) = dictionary(&batch, trade::TOKEN, &trades.paths[k])?;
        let t_names = t_names_dict.names();
        let token_ok: Vec<bool> = t_names.iter().map(|t| filter.token_ok(t)).collect();
        let mut seen = vec![false; w_names.len()];
        for (&w, &t) in w_codes.iter().zip(&t_codes) {
            seen[w as usize] |= token_ok[t as usize];
        }
        Ok(w_names
            .into_iter()
            .zip(seen)
            .filter(|&(_, s)| s)
            .map(|(w, _)| w.to_owned())
            .collect::<Vec<String>>())
    })?;
    Ok(parts.into_iter().flatten().collect())
}

/// The latest price of each of `tokens` (over every wallet's trades, and the swaps of wallets
/// without trades), reading the row groups that can hold them newest first, and stopping once
/// no row group left can hold a later event.
pub(super) fn latest_prices_of(
    lake: &Lake,
    trades: &DataFiles,
    swaps: &DataFiles,
    filter: &Filter<'_>,
    tokens: &[&str],
) -> Result<Vec<Option<(OrderKey, f64)>>> {
    let mut best: Vec<Option<Found>> = vec![None; tokens.len()];
    if tokens.is_empty() {
        return Ok(Vec::new());
    }
    let index: PlHashMap<&str, usize> = tokens.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    // Candidates as (newest time, dataset, file, row group), newest first, with their token
    // columns' bloom filters.
    let mut candidates: Vec<(Candidate, Option<Vec<Sbbf>>)> = Vec::new();
    for (d, (files, source)) in [(trades, &TRADES), (swaps, &SWAPS)].into_iter().enumerate() {
        let all = files.row_groups();
        let blooms = per_row_group(lake, files, &all, |file, k, g| {
            column_blooms(file, &files.footers[k], g, source.token_columns)
        })?;
        for (&(k, g), blooms) in all.iter().zip(blooms) {
            if blooms_may_hold(&blooms, tokens.iter().copied()) {
                candidates.push(((time_bounds(&files.footers[k], g).1, d, k, g), blooms));
            }
        }
    }
    candidates.sort_by(|(a, _), (b, _)| b.0.cmp(&a.0).then((a.1, a.2, a.3).cmp(&(b.1, b.2, b.3))));
    // The tokens whose latest price an unread row group may still change.
    let mut open: Vec<usize> = (0..tokens.len()).collect();
    let traders = if candidates.iter().any(|(c, _)| c.1 == 1) {
        all_traders(lake, trades, filter)?
    } else {
        PlHashSet::default()
    };
    let step = (2 * rayon::current_num_threads()).max(2);
    let mut at = 0;
    while at < candidates.len() {
        // The next row groups that can hold a token still open.
        let mut chunk: Vec<Candidate> = Vec::with_capacity(step);
        while at < candidates.len() && chunk.len() < step {
            let (c, blooms) = &candidates[at];
            if blooms_may_hold(blooms, open.iter().map(|&x| tokens[x])) {
                chunk.push(*c);
            }
            at += 1;
        }
        for (d, (files, source)) in [(trades, &TRADES), (swaps, &SWAPS)].into_iter().enumerate() {
            let mut groups: Vec<(usize, usize)> = chunk
                .iter()
                .filter(|c| c.1 == d)
                .map(|c| (c.2, c.3))
                .collect();
            groups.sort_unstable();
            let found = per_row_group(lake, files, &groups, |file, k, g| {
                // A trade's wallet does not matter here (a swap's does: swaps of wallets with
                // trades are left out).
                let mut columns: Vec<&str> = source
                    .keys
                    .iter()
                    .copied()
                    .filter(|&c| d == 1 || c != event::WALLET)
                    .collect();
                columns.extend_from_slice(source.numbers);
                let batch = file.read_row_group(&files.footers[k], g, &columns)?;
                let path = &files.paths[k];
                let nums = GroupNumbers::read(&batch, path, d == 1)?;
                let mut out: Vec<(usize, Found)> = Vec::new();
                let mut offer = |t: &str, i: usize, side: usize| {
                    let price = nums.price[side][i];
                    if let Some(&x) = index.get(t)
                        && price.is_finite()
                        && filter.token_ok(t)
                    {
                        out.push((x, (nums.key(i), (d, k, g, 2 * i + side), price)));
                    }
                };
                if d == 0 {
                    let (t_codes, t_names_dict) = dictionary(&batch, trade::TOKEN, path)?;
                    let t_names = t_names_dict.names();
                    let (d_codes, d_names_dict) = dictionary(&batch, trade::DIRECTION, path)?;
                    let d_names = d_names_dict.names();
                    for i in 0..t_codes.len() {
                        if matches!(d_names[d_codes[i] as usize], "buy" | "sell") {
                            offer(t_names[t_codes[i] as usize], i, 0);
                        }
                    }
                } else {
                    let (w_codes, w_names_dict) = dictionary(&batch, event::WALLET, path)?;
                    let w_names = w_names_dict.names();
                    let (k_codes, k_names_dict) = dictionary(&batch, event::SWAP_TYPE, path)?;
                    let k_names = k_names_dict.names();
                    let (i_codes, i_names_dict) = dictionary(&batch, swap::TOKEN_IN, path)?;
                    let i_names = i_names_dict.names();
                    let (o_codes, o_names_dict) = dictionary(&batch, swap::TOKEN_OUT, path)?;
                    let o_names = o_names_dict.names();
                    for i in 0..w_codes.len() {
                        if !swaps_count(traders.contains(w_names[w_codes[i] as usize])) {
                            continue;
                        }
                        let (sell, buy) = swap_sides(k_names[k_codes[i] as usize]);
                        if sell {
                            offer(i_names[i_codes[i] as usize], i, 0);
                        }
                        if buy {
                            offer(o_names[o_codes[i] as usize], i, 1);
                        }
                    }
                }
                Ok(out)
            })?;
            for (x, f) in found.into_iter().flatten() {
                let b = &mut best[x];
                if b.is_none_or(|b| f.0 > b.0 || (f.0 == b.0 && f.1 < b.1)) {
                    *b = Some(f);
                }
            }
        }
        // Row groups left are no newer than the next candidate: a token whose price is from a
        // later time cannot change.
        let Some(&((next, ..), _)) = candidates.get(at) else {
            break;
        };
        open.retain(|&x| best[x].is_none_or(|b| b.0.0 <= next));
        if open.is_empty() {
            break;
        }
    }
    Ok(best
        .into_iter()
        .map(|b| b.map(|(k, _, p)| (k, p)))
        .collect())
}
