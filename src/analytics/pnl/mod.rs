//! Wallet PnL: one ledger per (wallet, token), cost-basis methods, positions and the lots table.
//!
//! Definitions follow the semantics document (§2):
//! - Events are applied per (wallet, token) in event order `(block_time, block_slot, id)`,
//!   whatever the order of the rows or files they come from.
//! - A buy adds a lot (quantity, USD cost); a sell matches lots. Cost and proceeds are the
//!   trade's `usd_amount`, else `token_price × token_amount`.
//! - [`CostMethod`]: `Fifo` (default), `Lifo`, `Hifo` (highest unit cost first, ties to the
//!   earliest lot) and `AverageCost` (a running weighted average: a sell removes cost at the
//!   current average, so the average changes only at buys).
//! - realized = Σ over sells (proceeds − matched cost); unrealized = open quantity × mark − open
//!   cost. For every method: realized + unrealized = Σ counted proceeds + open quantity × mark −
//!   Σ buy cost.
//! - Selling more than is held follows [`OversellPolicy`] (default `ZeroCost`); the quantity
//!   concerned is reported per ledger (`oversold_quantity`, `ignored_quantity`), never silently.
//! - Fees are reported apart (`fees`); `realized_pnl_net` subtracts them.
//! - [`Ledger::drop_lots`] ends a position that a source marks as closed while lots remain:
//!   they leave the ledger without PnL, reported as `dropped_quantity` and `dropped_cost`.
//! - A position opens when the open quantity rises above the dust threshold and closes when it
//!   returns to it. A closed position with realized PnL > 0 is a win, < 0 a loss.
//! - ROI (percent) = 100 × (realized + unrealized) / Σ buy cost; realized ROI = 100 × realized /
//!   cost of the quantity sold; holding duration = Σ q·(t_sell − t_buy) / Σ q over matched lots,
//!   seconds.
//!
//! Float matching uses a relative tolerance of [`MATCH_TOLERANCE`]: a sell that leaves less
//! than that fraction of a lot consumes the lot, so a wallet selling its whole balance closes
//! its position even when the balance was summed with rounding.
//!
//! Ledgers are independent and run in parallel (rayon); each result depends only on its own
//! events, and results come back in (wallet, token) order, so the output does not depend on
//! the number of threads or on file order.
//!
//! | file | what lives there |
//! |---|---|
//! | `mod.rs` | [`PnlSource`] (the lake or in-memory frames) and one entry per question, each taking a source and [`PnlOptions`]: [`pnl_report`] (ledgers, positions and lots tables), [`pnl_report_batches`] (the same a chunk of ledgers at a time), [`leaderboard`], [`wallet_performance`] (equity curve and metrics), [`ledger_set`] (the grouped ledgers, not run); [`lake_frames`] (the lake's events as frames); for frames holding some wallets' events, [`latest_prices`] (with their event keys) and [`pnl_report_marked`] (marked at given latest prices) |
//! | `options.rs` | [`PnlOptions`], the one options type of the entries: the selection (wallets, token), [`PnlConfig`] (with [`CostMethod`], [`OversellPolicy`], [`Mark`]), the tables built, [`EquityConfig`]; [`PnlTable`] |
//! | `ledger.rs` | the cost-basis books (FIFO queue, LIFO stack, HIFO heap) and [`Ledger`], its events and results ([`LedgerEvent`], [`LotMatch`], [`Position`], [`Oversold`]), [`run_ledger`], [`LedgerSet`] |
//! | `rows.rs` | the input frames read into events before grouping, wallets and tokens interned |
//! | `grouping.rs` | the events grouped into ledgers in parallel (counting sort, huge pages, events written in place by parallel writers for [`LedgerSet`]'s lake reader: the folder's `unsafe`) |
//! | `lake_files.rs` | the lake's trades and swaps files as the PnL reads them: columns, footers, row groups a window of files at a time, the query's filter (bloom filters), a row group's numbers |
//! | `lake_keys.rs` | a row group's key columns as the PnL's events: which rows give an event, of which wallet and token, on which side, where a swap's fee goes (the rules both lake readers share), and the first pass over the keys both make |
//! | `lake_prices.rs` | the latest prices of named tokens when only named wallets' row groups were read: newest row groups first |
//! | `lake_reader.rs` | the lake read whole straight into grouped ledgers: two passes over the row groups with arrow-rs, names interned per row group, each event appended to its bucket of wallets, each bucket grouped into its ledgers in the caches |
//! | `report.rs` | [`PnlReport`]: the ledgers, positions and lots tables, built a chunk of ledgers at a time |
//! | `lake_parts.rs` | the lake read in parts of whole wallets, past [`PnlOptions::events_at_once`] events: a counting pass, one dealing pass to a spill file per part, then a part at a time grouped by wallet |
//! | `leaderboard.rs` | wallets ranked by total PnL |
//! | `equity.rs` | a wallet's equity curve and [`WalletPerformance`]: the inputs from frames, and the curve's kernel |
//! | `lake_equity.rs` | the inputs of the curve from the lake: the wallet's ledgers by `lake_reader`, then one pass keeping each of its tokens' closing price per period and the lake's last event |
//!
//! A file imports only files listed above it in this order: `options`, `ledger`, `rows`,
//! `grouping`, `lake_files`, `lake_keys`, `lake_prices`, `lake_reader`, `report`, `lake_parts`,
//! then `leaderboard`, `equity` and `lake_equity`; `mod.rs` imports them all. Besides the
//! crate's errors, the files may import `crate::analytics::{arrow_columns, columns, intern,
//! metrics, spill_files}`; `mod.rs` and the `lake_*` files alone import `crate::lake` (to read
//! the lake); nothing else of the crate.
//!
//! Each entry reads its [`PnlSource`]: from [`PnlSource::Lake`], the ledgers are read by
//! `lake_reader` (no frame, no string per row, about 60 bytes per event) and a performance's
//! closes by `lake_equity`; from [`PnlSource::Frames`], by `rows` then `grouping` (and
//! `equity`). Both give the same ledgers, in the same order, with the same latest prices
//! (tests compare them on every method and query).
//!
//! The input frames' `block_time` may be a timestamp of any unit (or integer microseconds):
//! it is read as microseconds, the unit of the ledgers and of the output tables.

mod equity;
mod grouping;
mod lake_equity;
mod lake_files;
mod lake_keys;
mod lake_parts;
mod lake_prices;
mod lake_reader;
mod leaderboard;
mod ledger;
mod options;
mod report;
mod rows;
#[cfg(test)]
mod tests;

use polars::prelude::*;

pub use equity::WalletPerformance;
#[doc(hidden)]
pub use ledger::{
    Ledger, LedgerEvent, LedgerSet, LotMatch, MATCH_TOLERANCE, Oversold, Position, TradeSide,
    run_ledger,
};
pub use options::{
    CostMethod, EVENTS_AT_ONCE, EquityConfig, MAX_PERIOD_SECONDS, Mark, OversellPolicy, PnlConfig,
    PnlOptions, PnlTable,
};
pub use report::PnlReport;
#[doc(hidden)]
pub use report::REPORT_CHUNK;
pub use rows::{SWAP_COLUMNS, TRADE_COLUMNS};

use grouping::{group_ledgers, latest_keyed};
use leaderboard::leaderboard_of;
use report::{drop_in_background, report_chunks, run_report_in};
use rows::read_rows;

use crate::lake::cols::{event, swap, trade};
use crate::lake::read::name_damaged_file;
use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

/// The PnL's rule for swaps: a wallet's swaps count only when it has no trades (of the query's
/// token, when one is named), since its trades then describe its positions already. Every
/// reader of swaps for the PnL (the frames', the lake's ledgers, latest prices and equity
/// curve) asks it.
#[inline]
fn swaps_count(wallet_has_trades: bool) -> bool {
    !wallet_has_trades
}

/// Where the PnL reads its events: the lake, or in-memory frames. Every entry takes one, so
/// that each question has one function whatever it is asked of.
#[derive(Debug, Clone, Copy)]
pub enum PnlSource<'a> {
    /// The lake's trades, and swaps for wallets without trades, read straight into grouped
    /// ledgers (no frame, no string per row, about 60 bytes per event).
    Lake(&'a Lake),
    /// A trades frame (columns [`TRADE_COLUMNS`]) and, for wallets with no trade in it, a
    /// swaps frame (columns [`SWAP_COLUMNS`] and `id`).
    Frames {
        /// The trades.
        trades: &'a DataFrame,
        /// The swaps, if any.
        swaps: Option<&'a DataFrame>,
    },
}

/// The grouped events of `source` that `options` selects, and the latest price of each token
/// (over every wallet's events, also when only some wallets' events are kept), unchecked.
fn grouped(source: PnlSource<'_>, options: &PnlOptions) -> Result<LedgerSet> {
    match source {
        PnlSource::Lake(lake) => lake_reader::lake_ledgers(lake, options),
        PnlSource::Frames { trades, swaps } => {
            let (rows, wallets, tokens) = read_rows(trades, swaps, options)?;
            group_ledgers(&rows, &wallets, &tokens, options)
        }
    }
}

/// The ledgers of `source` that `options` selects, grouped and not yet run: one per
/// (wallet, token), in that order ([`LedgerSet::run`] runs them).
#[doc(hidden)]
pub fn ledger_set(source: PnlSource<'_>, options: &PnlOptions) -> Result<LedgerSet> {
    options.validate()?;
    grouped(source, options)
}

/// The ledgers, positions and (with [`PnlConfig::lots`]) lots tables of the wallets and
/// token `options` selects; without [`PnlOptions::positions`] the positions table has no row.
/// The ledgers run and are reported a chunk of [`REPORT_CHUNK`] at a time, so only one
/// chunk's books are held at once.
///
/// A wallet with no trade in the source gives empty tables, not an error.
pub fn pnl_report(source: PnlSource<'_>, options: &PnlOptions) -> Result<PnlReport> {
    options.validate()?;
    let set = grouped(source, options)?;
    let report = run_report_in(&set, &options.config, REPORT_CHUNK, options.positions);
    drop_in_background(set);
    report
}

/// [`pnl_report`] handed to `sink` a chunk of `ledgers` ledgers (at least one) at a time, in
/// ledger order, instead of as one report: each part holds the tables of its ledgers, so only
/// the grouped events and one part are in memory at once. From the lake, the events are
/// grouped [`PnlOptions::events_at_once`] at most at a time (in parts of whole wallets), so
/// memory does not grow with the lake. For writing large results to a file. Without any
/// ledger `sink` is not called.
pub fn pnl_report_batches(
    source: PnlSource<'_>,
    options: &PnlOptions,
    ledgers: usize,
    mut sink: impl FnMut(PnlReport) -> Result<()>,
) -> Result<()> {
    options.validate()?;
    let (config, positions) = (&options.config, options.positions);
    if let PnlSource::Lake(lake) = source {
        return lake_parts::lake_ledger_parts(lake, options, options.events_at_once, |set| {
            report_chunks(set, config, ledgers, positions, &mut sink)
        });
    }
    let set = grouped(source, options)?;
    report_chunks(&set, config, ledgers, positions, sink)?;
    drop_in_background(set);
    Ok(())
}

/// [`pnl_report`] with each token marked by `latest` (its latest price over every wallet)
/// instead of the latest price in `source`: for a source holding some wallets' events only (a
/// group of a distributed computation), whose latest prices come from every group's
/// [`latest_prices`]. A token absent from `latest` has no latest price. Only
/// [`Mark::Latest`] reads `latest`.
#[doc(hidden)]
pub fn pnl_report_marked(
    source: PnlSource<'_>,
    options: &PnlOptions,
    latest: &std::collections::BTreeMap<String, f64>,
) -> Result<PnlReport> {
    options.validate()?;
    let mut set = grouped(source, options)?;
    set.latest_prices = set
        .token_names
        .iter()
        .map(|t| latest.get(t).copied())
        .collect();
    let report = run_report_in(&set, &options.config, REPORT_CHUNK, options.positions);
    drop_in_background(set);
    report
}

/// A token, the event-order key `(block_time, block_slot, id)` of its latest priced event, and
/// that price ([`latest_prices`]).
#[doc(hidden)]
pub type LatestPrice = (String, (i64, i64, i64), f64);

/// The latest price of each token of a trades frame and, for wallets with no trade in it, a
/// swaps frame (those of [`PnlSource::Frames`]), with the event-order key `(block_time,
/// block_slot, id)` of the event that set it: the latest price over all of them is the one of
/// the greatest key, whatever groups the events were split into. Tokens without a finite
/// price are absent.
#[doc(hidden)]
pub fn latest_prices(trades: &DataFrame, swaps: Option<&DataFrame>) -> Result<Vec<LatestPrice>> {
    let (rows, _, tokens) = read_rows(trades, swaps, &PnlOptions::default())?;
    let best = latest_keyed(&rows, tokens.len());
    Ok(tokens
        .into_iter()
        .zip(best)
        .filter_map(|(t, b)| b.map(|(key, price)| (t, key, price)))
        .collect())
}

/// Reads the lake's trades and swaps (of the token `options` names, when it names one) as
/// frames, the [`PnlSource::Frames`] of the same events as [`PnlSource::Lake`].
#[doc(hidden)]
pub fn lake_frames(lake: &Lake, options: &PnlOptions) -> Result<(DataFrame, DataFrame)> {
    let trade_cols: Vec<Expr> = TRADE_COLUMNS.iter().map(|c| col(*c)).collect();
    let mut swap_cols: Vec<Expr> = SWAP_COLUMNS.iter().map(|c| col(*c)).collect();
    swap_cols.push(col(event::ID));
    let mut trades = lake.scan(Dataset::Trades)?.select(trade_cols);
    let mut swaps = lake.scan(Dataset::Swaps)?.select(swap_cols);
    if let Some(t) = &options.token {
        trades = trades.filter(col(trade::TOKEN).eq(lit(t.as_str())));
        swaps = swaps.filter(
            col(swap::TOKEN_IN)
                .eq(lit(t.as_str()))
                .or(col(swap::TOKEN_OUT).eq(lit(t.as_str()))),
        );
    }
    let trades = trades
        .collect()
        .map_err(Error::polars("reading trades"))
        .map_err(|e| name_damaged_file(lake.base(), Dataset::Trades, e))?;
    let swaps = swaps
        .collect()
        .map_err(Error::polars("reading swaps"))
        .map_err(|e| name_damaged_file(lake.base(), Dataset::Swaps, e))?;
    Ok((trades, swaps))
}

/// Ranks the wallets `options` selects (every wallet by default) by total PnL (realized +
/// unrealized, summed over its tokens), largest first, ties by wallet address; keeps the
/// first `top`.
///
/// Columns: `rank`, `wallet_address`, `tokens`, `realized_pnl`, `unrealized_pnl`,
/// `total_pnl`, `buy_cost`, `roi`, `wins`, `losses`, `win_rate` (percent of closed positions
/// won; null without any).
pub fn leaderboard(source: PnlSource<'_>, options: &PnlOptions, top: usize) -> Result<DataFrame> {
    options.validate()?;
    leaderboard_of(grouped(source, options)?, &options.config, top)
}

/// The equity curve of the one wallet `options` selects, marked to market at each period's
/// close ([`PnlOptions::equity`]), and its metrics.
///
/// A token's close in a period is its last trade price in the period (event order, every
/// wallet's trades), carried forward; so the marks are the closes of the lake's bars of that
/// period width. Periods run from the one holding the wallet's first trade to the one holding
/// the source's last trade. From the lake, the wallet's ledgers come from the row groups that
/// can hold it, then one pass over the row groups keeps the last event and one close per
/// (token, period) of its tokens: memory holds the wallet's events, not the lake.
///
/// Options [`PnlConfig::validate`] or [`EquityConfig::validate`] refuse, an empty wallet
/// address, a selection of other than one wallet, or a token, are an
/// [`Error::InvalidArgument`] naming the argument.
pub fn wallet_performance(
    source: PnlSource<'_>,
    options: &PnlOptions,
) -> Result<WalletPerformance> {
    options.config.validate()?;
    options.equity.validate()?;
    options.validate()?;
    let wallet = match options.wallets.as_deref() {
        Some([wallet]) => wallet.as_str(),
        _ => {
            return Err(Error::InvalidArgument {
                argument: "wallet".into(),
                reason: "performance is of exactly one wallet".into(),
            });
        }
    };
    if options.token.is_some() {
        return Err(Error::InvalidArgument {
            argument: "token".into(),
            reason: "performance covers every token of the wallet".into(),
        });
    }
    let (config, equity) = (&options.config, &options.equity);
    match source {
        PnlSource::Lake(lake) => lake_equity::lake_performance(lake, wallet, config, equity),
        PnlSource::Frames { trades, swaps } => {
            let (rows, wallets, tokens) = read_rows(trades, swaps, &PnlOptions::default())?;
            equity::performance(&rows, &wallets, &tokens, wallet, config, equity)
        }
    }
}
