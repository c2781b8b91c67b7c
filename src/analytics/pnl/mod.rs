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
//! | `mod.rs` | the entry points: [`wallet_pnl`], [`wallet_pnl_in_batches`], [`wallet_pnl_in_batches_of`], [`wallet_ledgers_in_batches`], [`pnl_from_frames`], [`ledgers_from_frames`], [`lake_frames`], [`leaderboard`], [`leaderboard_from_frames`], [`wallet_performance`], [`lake_wallet_performance`] |
//! | `options.rs` | [`CostMethod`], [`OversellPolicy`], [`Mark`], [`PnlConfig`], [`PnlQuery`], [`EquityConfig`] |
//! | `ledger.rs` | the cost-basis books (FIFO queue, LIFO stack, HIFO heap) and [`Ledger`], its events and results ([`LedgerEvent`], [`LotMatch`], [`Position`], [`Oversold`]), [`run_ledger`], [`LedgerSet`] |
//! | `rows.rs` | the input frames read into events before grouping, wallets and tokens interned |
//! | `grouping.rs` | the events grouped into ledgers in parallel (counting sort, huge pages, events written in place by [`LedgerSet`]'s lake reader: the folder's `unsafe`) |
//! | `lake_files.rs` | the lake's trades and swaps files as the PnL reads them: columns, footers, row groups a window of files at a time, the query's filter (bloom filters), a row group's numbers |
//! | `lake_reader.rs` | the lake read straight into grouped ledgers: two passes over the row groups with arrow-rs, names interned per row group, each event written once in place |
//! | `lake_prices.rs` | the latest prices of named tokens when only named wallets' row groups were read: newest row groups first |
//! | `report.rs` | [`PnlReport`]: the ledgers, positions and lots tables, built a chunk of ledgers at a time |
//! | `leaderboard.rs` | wallets ranked by total PnL |
//! | `equity.rs` | a wallet's equity curve and [`WalletPerformance`]: the inputs from frames, and the curve's kernel |
//! | `lake_equity.rs` | the inputs of the curve from the lake: the wallet's ledgers by `lake_reader`, then one pass keeping each of its tokens' closing price per period and the lake's last event |
//!
//! A file imports only files listed above it in this order: `options`, `ledger`, `rows`,
//! `grouping`, `lake_files`, `lake_prices`, `lake_reader`, `report`, then `leaderboard`,
//! `equity` and `lake_equity`; `mod.rs` imports them all. Besides the crate's errors, the files may import
//! `crate::analytics::{arrow_columns, columns, intern, metrics}`; `mod.rs` and the four
//! `lake_*` files alone import `crate::lake` (to read the lake); nothing else of the crate.
//!
//! From the lake, the ledgers are read by `lake_reader` (no frame, no string per row, about 60
//! bytes per event); from frames, by `rows` then `grouping`. Both give the same ledgers, in the
//! same order, with the same latest prices (tests compare them on every method and query).
//!
//! The input frames' `block_time` may be a timestamp of any unit (or integer microseconds):
//! it is read as microseconds, the unit of the ledgers and of the output tables.

mod equity;
mod grouping;
mod lake_equity;
mod lake_files;
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
pub use ledger::{
    Ledger, LedgerEvent, LedgerSet, LotMatch, MATCH_TOLERANCE, Oversold, Position, TradeSide,
    run_ledger,
};
pub use options::{
    CostMethod, EquityConfig, MAX_PERIOD_SECONDS, Mark, OversellPolicy, PnlConfig, PnlQuery,
    PnlTable,
};
pub use report::{PnlReport, REPORT_CHUNK, report, run_report};
pub use rows::{SWAP_COLUMNS, TRADE_COLUMNS};

use grouping::group_ledgers;
use leaderboard::leaderboard_of;
use report::{drop_in_background, report_chunks};
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

/// Builds the ledgers of a trades frame (columns [`TRADE_COLUMNS`]) and, for wallets with no
/// trade in it, of a swaps frame (columns [`SWAP_COLUMNS`] and `id`).
pub fn ledgers_from_frames(
    trades: &DataFrame,
    swaps: Option<&DataFrame>,
    query: &PnlQuery,
) -> Result<LedgerSet> {
    let (rows, wallets, tokens) = read_rows(trades, swaps, query)?;
    group_ledgers(&rows, &wallets, &tokens, query)
}

/// Reads the trades (and swaps) of the lake that `query` concerns.
pub fn lake_frames(lake: &Lake, query: &PnlQuery) -> Result<(DataFrame, DataFrame)> {
    let trade_cols: Vec<Expr> = TRADE_COLUMNS.iter().map(|c| col(*c)).collect();
    let mut swap_cols: Vec<Expr> = SWAP_COLUMNS.iter().map(|c| col(*c)).collect();
    swap_cols.push(col(event::ID));
    let mut trades = lake.scan(Dataset::Trades)?.select(trade_cols);
    let mut swaps = lake.scan(Dataset::Swaps)?.select(swap_cols);
    if let Some(t) = &query.token {
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

/// PnL of in-memory frames (trades, and swaps for wallets without trades).
pub fn pnl_from_frames(
    trades: &DataFrame,
    swaps: Option<&DataFrame>,
    query: &PnlQuery,
    config: &PnlConfig,
) -> Result<PnlReport> {
    config.validate()?;
    query.validate()?;
    let set = ledgers_from_frames(trades, swaps, query)?;
    let report = run_report(&set, config);
    drop_in_background(set);
    report
}

/// PnL of the lake's trades (and swaps for wallets the lake has only swaps for).
///
/// A wallet with no trade in the lake gives empty tables, not an error.
pub fn wallet_pnl(lake: &Lake, query: &PnlQuery, config: &PnlConfig) -> Result<PnlReport> {
    config.validate()?;
    query.validate()?;
    let set = lake_ledgers(lake, query)?;
    let report = run_report(&set, config);
    drop_in_background(set);
    report
}

/// The grouped events of the lake's trades (and swaps for wallets without trades) that `query`
/// selects, read row group by row group (see `lake_reader`). The latest price of a token comes
/// from every wallet's trades, also when only some wallets' row groups are read.
fn lake_ledgers(lake: &Lake, query: &PnlQuery) -> Result<LedgerSet> {
    lake_reader::lake_ledgers(lake, query)
}

/// [`wallet_pnl`] handed to `sink` a chunk of [`REPORT_CHUNK`] ledgers at a time, in ledger
/// order, instead of as one report: each part holds the tables of its ledgers, so only the
/// grouped events and one part are in memory at once. For writing large results to a file.
/// Without any ledger `sink` is not called.
pub fn wallet_pnl_in_batches(
    lake: &Lake,
    query: &PnlQuery,
    config: &PnlConfig,
    sink: impl FnMut(PnlReport) -> Result<()>,
) -> Result<()> {
    wallet_pnl_in_batches_of(lake, query, config, REPORT_CHUNK, sink)
}

/// [`wallet_pnl_in_batches`] with `ledgers` ledgers per batch (at least one).
pub fn wallet_pnl_in_batches_of(
    lake: &Lake,
    query: &PnlQuery,
    config: &PnlConfig,
    ledgers: usize,
    sink: impl FnMut(PnlReport) -> Result<()>,
) -> Result<()> {
    config.validate()?;
    query.validate()?;
    report_chunks(&lake_ledgers(lake, query)?, config, ledgers, true, sink)
}

/// [`wallet_pnl`] without the positions table (its frame is empty): the ledgers (and the lots
/// when [`PnlConfig::lots`] is set) built a chunk of ledgers at a time and stacked. What
/// `dexlake pnl --all-wallets` prints and Python's `lake.pnl()` returns.
pub fn wallet_ledgers(lake: &Lake, query: &PnlQuery, config: &PnlConfig) -> Result<PnlReport> {
    let mut all: Option<PnlReport> = None;
    wallet_ledgers_in_batches(lake, query, config, |part| {
        let Some(all) = all.as_mut() else {
            all = Some(part);
            return Ok(());
        };
        let stack = Error::polars("stacking the PnL tables");
        all.ledgers.vstack_mut(&part.ledgers).map_err(&stack)?;
        if let (Some(lots), Some(more)) = (all.lots.as_mut(), part.lots.as_ref()) {
            lots.vstack_mut(more).map_err(&stack)?;
        }
        Ok(())
    })?;
    match all {
        Some(all) => Ok(all),
        None => report(&LedgerSet::default(), &[], config),
    }
}

/// The ledgers table of [`wallet_pnl`] (and the lots table when [`PnlConfig::lots`] is set)
/// handed to `sink` a chunk of [`REPORT_CHUNK`] ledgers at a time, in ledger order; the
/// positions table is not built (its frame in each part is empty). What `dexlake pnl
/// --all-wallets` writes to a file.
pub fn wallet_ledgers_in_batches(
    lake: &Lake,
    query: &PnlQuery,
    config: &PnlConfig,
    sink: impl FnMut(PnlReport) -> Result<()>,
) -> Result<()> {
    config.validate()?;
    query.validate()?;
    report_chunks(
        &lake_ledgers(lake, query)?,
        config,
        REPORT_CHUNK,
        false,
        sink,
    )
}

/// Ranks every wallet of the lake by total PnL (realized + unrealized, summed over its tokens),
/// largest first, ties by wallet address; keeps the first `top`.
///
/// Columns: `rank`, `wallet_address`, `tokens`, `realized_pnl`, `unrealized_pnl`,
/// `total_pnl`, `buy_cost`, `roi`, `wins`, `losses`, `win_rate` (percent of closed positions
/// won; null without any).
pub fn leaderboard(lake: &Lake, config: &PnlConfig, top: usize) -> Result<DataFrame> {
    config.validate()?;
    leaderboard_of(lake_ledgers(lake, &PnlQuery::default())?, config, top)
}

/// [`leaderboard`] over in-memory frames.
pub fn leaderboard_from_frames(
    trades: &DataFrame,
    swaps: Option<&DataFrame>,
    config: &PnlConfig,
    top: usize,
) -> Result<DataFrame> {
    config.validate()?;
    leaderboard_of(
        ledgers_from_frames(trades, swaps, &PnlQuery::default())?,
        config,
        top,
    )
}

/// [`wallet_performance`] of the lake's trades (and swaps for wallets without trades), read
/// from the lake without its frames: the wallet's ledgers from the row groups that can hold it,
/// then one pass over the row groups for the last event and its tokens' closes, keeping one
/// price per (token, period). Memory holds the wallet's events, not the lake.
pub fn lake_wallet_performance(
    lake: &Lake,
    wallet: &str,
    config: &PnlConfig,
    equity: &EquityConfig,
) -> Result<WalletPerformance> {
    check_performance(wallet, config, equity)?;
    lake_equity::lake_performance(lake, wallet, config, equity)
}

/// Refuses the options and wallet address a performance cannot be computed with, before
/// anything is read.
fn check_performance(wallet: &str, config: &PnlConfig, equity: &EquityConfig) -> Result<()> {
    config.validate()?;
    equity.validate()?;
    PnlQuery::of_wallet(wallet).validate()
}

/// The equity curve of `wallet` marked to market at each period's close, and its metrics.
///
/// A token's close in a period is its last trade price in the period (event order, every
/// wallet's trades), carried forward; so the marks are the closes of the lake's bars of that
/// period width. Periods run from the one holding the wallet's first trade to the one holding
/// the lake's last trade.
///
/// An empty wallet address, or options [`PnlConfig::validate`] or [`EquityConfig::validate`]
/// refuse, are an [`Error::InvalidArgument`] naming the argument.
pub fn wallet_performance(
    trades: &DataFrame,
    swaps: Option<&DataFrame>,
    wallet: &str,
    config: &PnlConfig,
    equity: &EquityConfig,
) -> Result<WalletPerformance> {
    check_performance(wallet, config, equity)?;
    let (rows, wallets, tokens) = read_rows(trades, swaps, &PnlQuery::default())?;
    equity::performance(&rows, &wallets, &tokens, wallet, config, equity)
}
