//! The 46 window metrics of a token profile (interface §2.4), computed from the lake's trades.
//!
//! The service's profiles carry, per time window, metrics of the trades of a token in
//! `(now − window, now]`. This module computes the same object from the lake, for any window
//! (the service's `7d` … `1m`, or any length). With the lake holding every trade of the token,
//! the numbers equal the service's (the simulator's profiles are the reference the tests
//! compare with).
//!
//! Trades are taken in event order `(block_time, block_slot, id)`. Per wallet, a FIFO ledger
//! runs over the window's trades (semantics §2): a buy adds a lot at its `usd_amount`; a sell
//! matches lots first in, first out. The part of a sell beyond what the window's buys hold
//! (bought before the window) is left out of PnL (the `Ignore` policy), so the window's
//! numbers depend only on the window's trades. A trade whose `position_state` is `close`
//! ends the wallet's position and drops its remaining lots. The mark is the token's latest
//! trade price at or before `now`.
//!
//! | field | definition |
//! |---|---|
//! | `trade_count`, `buy_count`, `sell_count` | trades, buys and sells in the window |
//! | `makers_count`, `buyers_count`, `sellers_count` | distinct wallets that traded, bought, sold |
//! | `position_count` | positions opened in the window (buys with `position_state` `open`) plus wallets whose first trade in the window is not such a buy (their position was already open) |
//! | `win_position_count`, `loss_position_count` | positions closed in the window with realized PnL > 0, < 0 |
//! | `buy_volume`, `sell_volume`, `volume` | USD volume of buys, sells, both |
//! | `avg_buy_size`, `avg_sell_size` | volume / count |
//! | `avg_price`, `avg_buy_price`, `avg_sell_price` | volume-weighted: Σ usd / Σ tokens |
//! | `avg_buy_mcap`, `avg_sell_mcap` | mean `token_mcap` of buys, sells |
//! | `largest_trade_win`, `largest_trade_loss` | largest per-sell PnL > 0 (0 without one), smallest < 0 (0 without one) |
//! | `avg_trade_pnl`, `avg_trade_roi` | mean per-sell PnL (proceeds of the matched part − FIFO cost) and ROI (100 × PnL / cost) |
//! | `win_pnl`, `loss_pnl` | Σ per-sell PnL > 0, Σ per-sell PnL < 0 |
//! | `profit_factor` | win_pnl / \|loss_pnl\| |
//! | `win_loss_size_ratio` | mean winning sell PnL / \|mean losing sell PnL\| |
//! | `avg_wallet_pnl`, `pnl` | mean and Σ of wallet PnL = realized + unrealized (open lots at the mark) |
//! | `avg_wallet_roi` | mean of 100 × wallet PnL / wallet buy cost, over wallets that bought |
//! | `avg_wallet_winrate` | mean of 100 × wins / closed positions, over wallets that closed one |
//! | `volume_weighted_roi`, `volume_weighted_winrate` | the same, weighted by the wallet's volume |
//! | `wallet_hit_ratio` | 100 × wallets with PnL > 0 / makers |
//! | `pnl_volume_ratio` | pnl / volume |
//! | `wallet_roi_distribution` | wallets that bought, by ROI bucket: `gt_500` (> 500), `200_500` [200, 500], `0_200` [0, 200), `neg50_0` [−50, 0), `lt_neg50_0` (< −50) |
//! | `avg_holding_duration` | Σ q·(t_sell − t_buy) / Σ q over matched lots, seconds, rounded |
//! | `price_volatility` | sample std of the percent changes between consecutive trade prices |
//! | `roi_volatility`, `pnl_volatility` | sample std of the per-sell ROI, PnL |
//! | `price_stability`, `roi_stability`, `pnl_stability` | 1 / (1 + the volatility) |
//! | `sharpe_ratio` | mean(r) / std(r) over per-sell returns r = PnL / cost; not annualised, risk-free 0 |
//! | `sortino_ratio` | mean(r) / √mean(min(r, 0)²) |
//! | `max_drawdown` | largest fall, percent (≤ 0), of the curve compounding the per-sell returns from 1 |
//!
//! As in the service, a ratio without a denominator, and a statistic of fewer than two values,
//! is 0, so every number is finite.
//!
//! The flow fields are aggregates of the window's rows. The PnL fields come from one
//! [`pnl::Ledger`](super::pnl::Ledger) per wallet (FIFO, [`OversellPolicy::Ignore`], the lots
//! table on; a `close` sell calls [`Ledger::drop_lots`](super::pnl::Ledger::drop_lots)): each
//! sell's PnL and return are those of its lot matches, wallet PnL is the ledger's realized plus
//! unrealized at the mark, and the return statistics are those of [`metrics`] with no
//! risk-free rate and one period a year.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use polars::prelude::*;

use super::columns::{f64_col, i64_col, micros_col, str_col};
use super::metrics;
use super::pnl::{
    CostMethod, Ledger, LedgerEvent, LotMatch, Mark, OversellPolicy, PnlConfig, TradeSide,
};
use crate::api::models::{ROI_BUCKETS, TimeWindow, WindowMetrics};
use crate::lake::cols::{event, trade};
use crate::lake::read::name_damaged_file;
use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

/// Columns read from the trades dataset.
pub const COLUMNS: [&str; 10] = [
    event::WALLET,
    trade::DIRECTION,
    trade::POSITION_STATE,
    trade::AMOUNT,
    trade::USD,
    trade::PRICE,
    trade::MCAP,
    event::BLOCK_TIME,
    event::BLOCK_SLOT,
    event::ID,
];

/// The longest window, seconds: the longest span microseconds hold in 64 bits
/// (106,751,991 days and a little).
pub const MAX_WINDOW_SECONDS: i64 = i64::MAX / 1_000_000;

/// Parses a window length: a positive integer and a unit `s`, `m`, `h`, `d` or `w`
/// (`1d`, `6h`, `90m`, `30d`), at most [`MAX_WINDOW_SECONDS`] (`106751991d`).
pub fn parse_window(s: &str) -> Result<i64> {
    parse_span(s, "window")
}

/// [`parse_window`] for a span another argument gives (an equity curve's `period`): its
/// errors name `argument`.
pub fn parse_span(s: &str, argument: &str) -> Result<i64> {
    let bad = || Error::InvalidArgument {
        argument: argument.into(),
        reason: format!("{s:?} is not a window like 1m, 5m, 1h, 6h, 1d, 7d or 30d"),
    };
    let s = s.trim();
    let unit = s.chars().last().ok_or_else(bad)?;
    let n: i64 = s[..s.len() - unit.len_utf8()].parse().map_err(|_| bad())?;
    let scale = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        'w' => 7 * 86_400,
        _ => return Err(bad()),
    };
    if n <= 0 {
        return Err(bad());
    }
    let seconds = n
        .checked_mul(scale)
        .filter(|w| *w <= MAX_WINDOW_SECONDS)
        .ok_or_else(|| Error::InvalidArgument {
            argument: argument.into(),
            reason: format!(
                "{s:?} is longer than the longest window, {MAX_WINDOW_SECONDS}s (106751991d)"
            ),
        })?;
    Ok(seconds)
}

/// Checks a window's length: 1 to [`MAX_WINDOW_SECONDS`] seconds.
fn check_window(w: &Window) -> Result<()> {
    if (1..=MAX_WINDOW_SECONDS).contains(&w.seconds) {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        argument: "window".into(),
        reason: format!(
            "{:?} is {} s; a window is 1 to {MAX_WINDOW_SECONDS} s",
            w.label, w.seconds
        ),
    })
}

/// One trade of the token, as the metrics read it.
#[derive(Debug, Clone, Copy)]
struct Row {
    wallet: u32,
    buy: bool,
    open: bool,
    close: bool,
    amount: f64,
    usd: f64,
    price: f64,
    mcap: f64,
    time: i64,
    slot: i64,
    id: i64,
}

/// The trades of one token, in event order, ready for any window.
#[derive(Debug, Clone, Default)]
pub struct TokenTrades {
    rows: Vec<Row>,
}

impl TokenTrades {
    /// Reads a frame of one token's trades (columns [`COLUMNS`]; `block_time` in
    /// microseconds). Rows whose `direction` is neither `buy` nor `sell` are left out.
    pub fn from_frame(df: &DataFrame) -> Result<TokenTrades> {
        let wallet = str_col(df, event::WALLET)?;
        let direction = str_col(df, trade::DIRECTION)?;
        let state = str_col(df, trade::POSITION_STATE)?;
        let (amount, usd, price, mcap) = (
            f64_col(df, trade::AMOUNT)?,
            f64_col(df, trade::USD)?,
            f64_col(df, trade::PRICE)?,
            f64_col(df, trade::MCAP)?,
        );
        let (time, slot, id) = (
            micros_col(df, event::BLOCK_TIME)?,
            i64_col(df, event::BLOCK_SLOT)?,
            i64_col(df, event::ID)?,
        );
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut rows = Vec::with_capacity(df.height());
        for k in 0..df.height() {
            let buy = match direction[k] {
                "buy" => true,
                "sell" => false,
                _ => continue,
            };
            let next = ids.len() as u32;
            let wid = *ids.entry(wallet[k].to_owned()).or_insert(next);
            rows.push(Row {
                wallet: wid,
                buy,
                open: state[k] == "open",
                close: state[k] == "close",
                amount: amount[k],
                usd: usd[k],
                price: price[k],
                mcap: mcap[k],
                time: time[k],
                slot: slot[k],
                id: id[k],
            });
        }
        rows.sort_by_key(|r| (r.time, r.slot, r.id));
        Ok(TokenTrades { rows })
    }

    /// Number of trades.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is no trade.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Time of the last trade, microseconds.
    pub fn last_time(&self) -> Option<i64> {
        self.rows.last().map(|r| r.time)
    }

    /// The 46 metrics of the trades in `(now − window_seconds, now]` (`now` in microseconds).
    /// A window reaching before the earliest instant microseconds hold takes every trade up
    /// to `now`.
    pub fn window_metrics(&self, now: i64, window_seconds: i64) -> WindowMetrics {
        let from = now.saturating_sub(window_seconds.saturating_mul(1_000_000));
        let lo = self.rows.partition_point(|r| r.time <= from);
        let hi = self.rows.partition_point(|r| r.time <= now);
        let mark = hi.checked_sub(1).map_or(0.0, |k| self.rows[k].price);
        compute(&self.rows[lo..hi.max(lo)], mark)
    }
}

impl Row {
    /// A buy that opens a position.
    fn opens(&self) -> bool {
        self.buy && self.open
    }

    /// The trade as a ledger event.
    fn event(&self) -> LedgerEvent {
        LedgerEvent {
            time: self.time,
            slot: self.slot,
            id: self.id,
            side: if self.buy {
                TradeSide::Buy
            } else {
                TradeSide::Sell
            },
            quantity: self.amount,
            usd: self.usd,
            fee: 0.0,
        }
    }
}

/// `a / b`, 0 without a denominator.
fn per(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

/// The statistics of [`metrics`] are NaN or infinite where the profile's are 0.
fn finite(x: f64) -> f64 {
    if x.is_finite() { x } else { 0.0 }
}

/// ROI bucket of a percent ROI (NaN falls in the lowest).
pub fn roi_bucket(roi: f64) -> &'static str {
    let k = if roi > 500.0 {
        0
    } else if roi >= 200.0 {
        1
    } else if roi >= 0.0 {
        2
    } else if roi >= -50.0 {
        3
    } else {
        4
    };
    ROI_BUCKETS[k]
}

/// Aggregates of one side (buys or sells) of the window's trades.
#[derive(Default)]
struct SideTotals {
    count: i64,
    usd: f64,
    tokens: f64,
    mcap: f64,
    wallets: HashSet<u32>,
}

impl SideTotals {
    fn of<'a>(rows: impl Iterator<Item = &'a Row>) -> SideTotals {
        rows.fold(SideTotals::default(), |mut t, r| {
            t.count += 1;
            t.usd += r.usd;
            t.tokens += r.amount;
            t.mcap += r.mcap;
            t.wallets.insert(r.wallet);
            t
        })
    }
}

/// The ledger every wallet runs over the window: FIFO; what a sell takes beyond the window's
/// buys is left out; the lots table gives each sell's matches.
fn window_ledger_config() -> PnlConfig {
    PnlConfig {
        method: CostMethod::Fifo,
        oversell: OversellPolicy::Ignore,
        mark: Mark::Latest,
        dust: 0.0,
        lots: true,
    }
}

/// One wallet over the window: its ledger, its volume and its positions as the trades'
/// `position_state` delimits them (an opening buy starts one, a `close` sell ends it).
struct WalletBook {
    ledger: Ledger,
    volume: f64,
    position_pnl: f64,
    wins: u32,
    losses: u32,
}

/// A sell that matched lots of the window: PnL and return on the matched cost.
struct Sale {
    pnl: f64,
    ret: f64,
}

/// The ledgers of the window's wallets (in order of their first trade), the matched sells
/// in event order and the quantity-weighted holding time of the matched lots.
#[derive(Default)]
struct WindowBooks {
    wallets: Vec<WalletBook>,
    sales: Vec<Sale>,
    held_quantity_seconds: f64,
    held_quantity: f64,
}

impl WindowBooks {
    fn run(trades: &[Row]) -> WindowBooks {
        let config = window_ledger_config();
        let mut index: HashMap<u32, usize> = HashMap::new();
        let mut books = WindowBooks::default();
        for r in trades {
            let k = *index.entry(r.wallet).or_insert_with(|| {
                books.wallets.push(WalletBook {
                    ledger: Ledger::new(&config),
                    volume: 0.0,
                    position_pnl: 0.0,
                    wins: 0,
                    losses: 0,
                });
                books.wallets.len() - 1
            });
            let Some(book) = books.wallets.get_mut(k) else {
                continue;
            };
            book.volume += r.usd;
            // Under `Ignore` a ledger never refuses a sell.
            let _ = book.ledger.apply(&r.event());
            let matches = book.ledger.lots.as_mut().map(std::mem::take);
            let matched: Vec<LotMatch> = matches
                .unwrap_or_default()
                .into_iter()
                .filter(|m| m.buy_time.is_some())
                .collect();
            if r.opens() {
                book.position_pnl = 0.0;
            }
            if !matched.is_empty() {
                let cost: f64 = matched.iter().map(|m| m.cost).sum();
                let proceeds: f64 = matched.iter().map(|m| m.proceeds).sum();
                let pnl = proceeds - cost;
                book.position_pnl += pnl;
                books.sales.push(Sale {
                    pnl,
                    ret: per(pnl, cost),
                });
            }
            for m in &matched {
                let bought = m.buy_time.unwrap_or(m.sell_time);
                books.held_quantity_seconds += m.quantity * ((m.sell_time - bought) as f64 / 1e6);
                books.held_quantity += m.quantity;
            }
            if !r.buy && r.close {
                let p = std::mem::take(&mut book.position_pnl);
                book.wins += u32::from(p > 0.0);
                book.losses += u32::from(p < 0.0);
                book.ledger.drop_lots(r.time);
            }
        }
        books
    }
}

/// A wallet's result at the mark.
struct WalletResult {
    pnl: f64,
    /// Percent ROI, for a wallet that bought.
    roi: Option<f64>,
    /// Percent of its closed positions won, for a wallet that closed one.
    winrate: Option<f64>,
    volume: f64,
    wins: i64,
    losses: i64,
}

impl WalletResult {
    fn of(book: &WalletBook, mark: f64) -> WalletResult {
        let l = &book.ledger;
        let pnl = l.realized + l.unrealized(mark);
        let closed = book.wins + book.losses;
        WalletResult {
            pnl,
            roi: (l.buy_cost > 0.0).then(|| 100.0 * pnl / l.buy_cost),
            winrate: (closed > 0).then(|| 100.0 * f64::from(book.wins) / f64::from(closed)),
            volume: book.volume,
            wins: i64::from(book.wins),
            losses: i64::from(book.losses),
        }
    }
}

/// Σ x·w / Σ w over the pairs, 0 without weight.
fn weighted(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (xw, w) = pairs.fold((0.0, 0.0), |(xw, w), (x, v)| (xw + x * v, w + v));
    per(xw, w)
}

fn compute(trades: &[Row], mark: f64) -> WindowMetrics {
    // Trade flow: plain aggregates of the rows.
    let buys = SideTotals::of(trades.iter().filter(|r| r.buy));
    let sells = SideTotals::of(trades.iter().filter(|r| !r.buy));
    // Each wallet's first trade in the window. Positions are those opened in the window plus
    // those already open when it began (a wallet whose first trade is not an opening buy).
    let mut seen = HashSet::new();
    let firsts: Vec<&Row> = trades.iter().filter(|r| seen.insert(r.wallet)).collect();
    let makers = firsts.len();
    let already_open = firsts.iter().filter(|r| !r.opens()).count();
    let position_count = (trades.iter().filter(|r| r.opens()).count() + already_open) as i64;
    let price_moves: Vec<f64> = trades
        .iter()
        .zip(trades.iter().skip(1))
        .map(|(a, b)| 100.0 * (b.price / a.price - 1.0))
        .collect();

    // PnL: one FIFO ledger per wallet.
    let books = WindowBooks::run(trades);
    let wallets: Vec<WalletResult> = books
        .wallets
        .iter()
        .map(|b| WalletResult::of(b, mark))
        .collect();
    let wallet_pnls: Vec<f64> = wallets.iter().map(|w| w.pnl).collect();
    let wallet_rois: Vec<f64> = wallets.iter().filter_map(|w| w.roi).collect();
    let winrates: Vec<f64> = wallets.iter().filter_map(|w| w.winrate).collect();
    let mut distribution: BTreeMap<String, i64> =
        ROI_BUCKETS.iter().map(|b| ((*b).to_owned(), 0)).collect();
    for roi in &wallet_rois {
        if let Some(n) = distribution.get_mut(roi_bucket(*roi)) {
            *n += 1;
        }
    }
    let hits = wallets.iter().filter(|w| w.pnl > 0.0).count();
    let pnl: f64 = wallet_pnls.iter().sum();

    // Per-sell results, in event order.
    let sale_pnls: Vec<f64> = books.sales.iter().map(|s| s.pnl).collect();
    let returns: Vec<f64> = books.sales.iter().map(|s| s.ret).collect();
    let sale_rois: Vec<f64> = returns.iter().map(|r| 100.0 * r).collect();
    let gains: Vec<f64> = sale_pnls.iter().copied().filter(|p| *p > 0.0).collect();
    let drops: Vec<f64> = sale_pnls.iter().copied().filter(|p| *p < 0.0).collect();
    let (win_pnl, loss_pnl) = (gains.iter().sum::<f64>(), drops.iter().sum::<f64>());

    let volume = buys.usd + sells.usd;
    let price_volatility = finite(metrics::sample_std(&price_moves));
    let roi_volatility = finite(metrics::sample_std(&sale_rois));
    let pnl_volatility = finite(metrics::sample_std(&sale_pnls));
    let stability = |v: f64| 1.0 / (1.0 + v);
    let avg = |v: &[f64]| finite(metrics::mean(v));

    WindowMetrics {
        avg_holding_duration: Some(
            per(books.held_quantity_seconds, books.held_quantity).round() as i64,
        ),
        makers_count: Some(makers as i64),
        buyers_count: Some(buys.wallets.len() as i64),
        sellers_count: Some(sells.wallets.len() as i64),
        buy_count: Some(buys.count),
        sell_count: Some(sells.count),
        win_position_count: Some(wallets.iter().map(|w| w.wins).sum()),
        loss_position_count: Some(wallets.iter().map(|w| w.losses).sum()),
        trade_count: Some(buys.count + sells.count),
        position_count: Some(position_count),
        wallet_roi_distribution: Some(distribution),
        largest_trade_win: Some(gains.iter().copied().fold(0.0, f64::max)),
        largest_trade_loss: Some(drops.iter().copied().fold(0.0, f64::min)),
        avg_buy_size: Some(per(buys.usd, buys.count as f64)),
        avg_sell_size: Some(per(sells.usd, sells.count as f64)),
        avg_price: Some(per(volume, buys.tokens + sells.tokens)),
        avg_buy_price: Some(per(buys.usd, buys.tokens)),
        avg_sell_price: Some(per(sells.usd, sells.tokens)),
        avg_buy_mcap: Some(per(buys.mcap, buys.count as f64)),
        avg_sell_mcap: Some(per(sells.mcap, sells.count as f64)),
        avg_trade_pnl: Some(avg(&sale_pnls)),
        avg_trade_roi: Some(avg(&sale_rois)),
        avg_wallet_winrate: Some(avg(&winrates)),
        avg_wallet_pnl: Some(avg(&wallet_pnls)),
        avg_wallet_roi: Some(avg(&wallet_rois)),
        win_pnl: Some(win_pnl),
        loss_pnl: Some(loss_pnl),
        buy_volume: Some(buys.usd),
        sell_volume: Some(sells.usd),
        pnl: Some(pnl),
        volume: Some(volume),
        volume_weighted_winrate: Some(weighted(
            wallets.iter().filter_map(|w| Some((w.winrate?, w.volume))),
        )),
        volume_weighted_roi: Some(weighted(
            wallets.iter().filter_map(|w| Some((w.roi?, w.volume))),
        )),
        wallet_hit_ratio: Some(per(100.0 * hits as f64, makers as f64)),
        profit_factor: Some(finite(metrics::profit_factor(win_pnl, loss_pnl))),
        win_loss_size_ratio: Some(finite(metrics::mean(&gains) / metrics::mean(&drops).abs())),
        pnl_volume_ratio: Some(per(pnl, volume)),
        price_stability: Some(stability(price_volatility)),
        price_volatility: Some(price_volatility),
        roi_stability: Some(stability(roi_volatility)),
        roi_volatility: Some(roi_volatility),
        pnl_volatility: Some(pnl_volatility),
        pnl_stability: Some(stability(pnl_volatility)),
        sharpe_ratio: Some(finite(metrics::sharpe(&returns, 0.0, 1.0))),
        sortino_ratio: Some(finite(metrics::sortino(&returns, 0.0, 1.0))),
        max_drawdown: Some(metrics::max_drawdown(&returns)),
    }
}

/// A window to compute: its label and length in seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Label, such as `1d`.
    pub label: String,
    /// Length, seconds.
    pub seconds: i64,
}

impl Window {
    /// Parses a label such as `1d` or `90m` (see [`parse_window`]).
    pub fn parse(label: &str) -> Result<Window> {
        Ok(Window {
            label: label.trim().to_owned(),
            seconds: parse_window(label)?,
        })
    }

    /// The service's six windows, longest first.
    pub fn service_windows() -> Vec<Window> {
        TimeWindow::KNOWN
            .iter()
            .filter_map(|w| {
                Some(Window {
                    label: w.to_string(),
                    seconds: w.seconds()?,
                })
            })
            .collect()
    }
}

/// Reads the trades of `token` from the lake.
pub fn lake_token_trades(lake: &Lake, token: &str) -> Result<TokenTrades> {
    let cols: Vec<Expr> = COLUMNS.iter().map(|c| col(*c)).collect();
    let df = lake
        .scan(Dataset::Trades)?
        .filter(col(trade::TOKEN).eq(lit(token)))
        .select(cols)
        .collect()
        .map_err(Error::polars("reading the token's trades"))
        .map_err(|e| name_damaged_file(lake.base(), Dataset::Trades, e))?;
    TokenTrades::from_frame(&df)
}

/// The latest trade time in the lake (every token), the default "now" of the metrics.
pub fn lake_now(lake: &Lake) -> Result<Option<DateTime<Utc>>> {
    let df = lake
        .scan(Dataset::Trades)?
        .select([col(event::BLOCK_TIME).cast(DataType::Int64).max()])
        .collect()
        .map_err(Error::polars("reading the latest trade time"))
        .map_err(|e| name_damaged_file(lake.base(), Dataset::Trades, e))?;
    let v = df
        .column(event::BLOCK_TIME)
        .and_then(|c| c.i64().map(|c| c.get(0)))
        .map_err(Error::polars("reading the latest trade time"))?;
    Ok(v.and_then(DateTime::from_timestamp_micros))
}

/// Refuses an empty token address or a window outside 1 to [`MAX_WINDOW_SECONDS`] seconds,
/// before anything is read.
fn check_arguments(token: &str, windows: &[Window]) -> Result<()> {
    if token.trim().is_empty() {
        return Err(Error::InvalidArgument {
            argument: "token".into(),
            reason: format!("{token:?}: give a token address"),
        });
    }
    windows.iter().try_for_each(check_window)
}

/// The metrics of `token` from the lake's trades, one row per window (see
/// [`metrics_frame`] for the columns). `now` defaults to the lake's latest trade time.
/// An empty token address, or a window outside 1 to [`MAX_WINDOW_SECONDS`] seconds, is
/// refused before anything is read.
pub fn token_metrics(
    lake: &Lake,
    token: &str,
    windows: &[Window],
    now: Option<DateTime<Utc>>,
) -> Result<DataFrame> {
    check_arguments(token, windows)?;
    let trades = lake_token_trades(lake, token)?;
    let now = match now {
        Some(n) => n,
        None => lake_now(lake)?.unwrap_or(DateTime::UNIX_EPOCH),
    };
    metrics_of(&trades, token, windows, now)
}

/// The metrics of `token` from its trades held in a frame of the lake's trades (columns
/// [`COLUMNS`], other tokens' rows left out), as of `now` (the frame's latest trade of any
/// token when `None`): [`token_metrics`] of a lake holding the same trades.
pub fn token_metrics_of_frame(
    trades: &DataFrame,
    token: &str,
    windows: &[Window],
    now: Option<DateTime<Utc>>,
) -> Result<DataFrame> {
    check_arguments(token, windows)?;
    let now = match now {
        Some(n) => n,
        None => micros_col(trades, event::BLOCK_TIME)?
            .into_iter()
            .max()
            .and_then(DateTime::from_timestamp_micros)
            .unwrap_or(DateTime::UNIX_EPOCH),
    };
    let mask = trades
        .column(trade::TOKEN)
        .and_then(|c| c.str().map(|c| c.equal(token)))
        .map_err(Error::polars("selecting the token's trades"))?;
    let own = trades
        .filter(&mask)
        .map_err(Error::polars("selecting the token's trades"))?;
    metrics_of(&TokenTrades::from_frame(&own)?, token, windows, now)
}

/// The metrics frame of `token`'s trades over `windows` as of `now`.
fn metrics_of(
    trades: &TokenTrades,
    token: &str,
    windows: &[Window],
    now: DateTime<Utc>,
) -> Result<DataFrame> {
    let rows: Vec<(String, WindowMetrics)> = windows
        .iter()
        .map(|w| {
            (
                w.label.clone(),
                trades.window_metrics(now.timestamp_micros(), w.seconds),
            )
        })
        .collect();
    metrics_frame(token, now, &rows)
}

/// A frame of window metrics: `token_address`, `window`, `window_end` (the "now" of the
/// windows), the ten integer fields, `wallet_roi_distribution` (a struct of the five bucket
/// counts) and the 35 number fields, in the interface's order.
pub fn metrics_frame(
    token: &str,
    now: DateTime<Utc>,
    rows: &[(String, WindowMetrics)],
) -> Result<DataFrame> {
    let n = rows.len();
    let mut cols = vec![
        Column::new("token_address".into(), vec![token; n]),
        Column::new(
            "window".into(),
            rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ),
        Series::new("window_end".into(), vec![now.timestamp_micros(); n])
            .cast(&DataType::Datetime(
                TimeUnit::Microseconds,
                Some(TimeZone::UTC),
            ))
            .map_err(Error::polars("window_end"))?
            .into(),
    ];
    let ints: Vec<Vec<Option<i64>>> = rows.iter().map(|r| r.1.integers()).collect();
    for (k, name) in WindowMetrics::INTEGER_FIELDS.iter().enumerate() {
        cols.push(Column::new(
            (*name).into(),
            ints.iter().map(|v| v[k]).collect::<Vec<_>>(),
        ));
    }
    let buckets: Vec<Series> = ROI_BUCKETS
        .iter()
        .map(|b| {
            Series::new(
                (*b).into(),
                rows.iter()
                    .map(|r| {
                        r.1.wallet_roi_distribution
                            .as_ref()
                            .and_then(|d| d.get(*b).copied())
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let dist = StructChunked::from_series("wallet_roi_distribution".into(), n, buckets.iter())
        .map_err(Error::polars("wallet_roi_distribution"))?;
    cols.push(dist.into_series().into());
    let nums: Vec<Vec<Option<f64>>> = rows.iter().map(|r| r.1.numbers()).collect();
    for (k, name) in WindowMetrics::NUMBER_FIELDS.iter().enumerate() {
        cols.push(Column::new(
            (*name).into(),
            nums.iter().map(|v| v[k]).collect::<Vec<_>>(),
        ));
    }
    DataFrame::new(n, cols).map_err(Error::polars("building the token metrics"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_or_fail_clearly() {
        assert_eq!(parse_window("1d").ok(), Some(86_400));
        assert_eq!(parse_window("90m").ok(), Some(5_400));
        assert_eq!(parse_window("2w").ok(), Some(14 * 86_400));
        for bad in ["", "d", "0h", "-1d", "1y", "1.5h"] {
            let e = parse_window(bad).expect_err(bad);
            assert!(e.to_string().contains("window"), "{e}");
        }
        assert_eq!(Window::service_windows().len(), 6);
        // The longest window whose microseconds fit in 64 bits, and no longer.
        assert_eq!(parse_window("106751991d").ok(), Some(106_751_991 * 86_400));
        assert_eq!(
            parse_window("9223372036854s").ok(),
            Some(MAX_WINDOW_SECONDS)
        );
        for long in [
            "110000000d",
            "9223372036855s",
            "15250284452w",
            "9223372036854775807s",
        ] {
            let e = parse_window(long).expect_err(long).to_string();
            assert!(
                e.starts_with("invalid window: ") && e.contains("longest"),
                "{e}"
            );
        }
    }

    #[test]
    fn windows_longer_than_history_hold_every_trade() {
        let s = 1_000_000;
        let df = v1_frame(Column::new(
            "block_time".into(),
            [100 * s, 200 * s, 500 * s, 600 * s],
        ));
        let trades = TokenTrades::from_frame(&df).expect("trades");
        let day = trades.window_metrics(1_000 * s, 86_400);
        assert_eq!(day.trade_count, Some(4));
        // Microseconds of these windows do not fit in 64 bits: they still start before every
        // trade, and never wrap into an empty window.
        for w in [MAX_WINDOW_SECONDS, MAX_WINDOW_SECONDS + 1, i64::MAX] {
            assert_eq!(trades.window_metrics(1_000 * s, w), day, "{w}");
            assert_eq!(trades.window_metrics(i64::MIN + 1, w).trade_count, Some(0));
        }
        assert!(
            check_window(&Window {
                label: "x".into(),
                seconds: MAX_WINDOW_SECONDS + 1
            })
            .is_err()
        );
        assert!(
            check_window(&Window {
                label: "x".into(),
                seconds: 0
            })
            .is_err()
        );
    }

    /// semantics.md §2 V1's trades by one wallet, then another wallet's buy; `block_time` given.
    fn v1_frame(block_time: Column) -> DataFrame {
        DataFrame::new(
            4,
            vec![
                Column::new("wallet_address".into(), ["a", "a", "a", "b"]),
                Column::new("direction".into(), ["buy", "buy", "sell", "buy"]),
                Column::new("position_state".into(), ["open", "trade", "trade", "open"]),
                Column::new("token_amount".into(), [10.0, 10.0, 15.0, 1.0]),
                Column::new("usd_amount".into(), [10.0, 20.0, 45.0, 4.0]),
                Column::new("token_price".into(), [1.0, 2.0, 3.0, 4.0]),
                Column::new("token_mcap".into(), [1e6, 2e6, 3e6, 4e6]),
                block_time,
                Column::new("block_slot".into(), [1i64, 2, 5, 6]),
                Column::new("id".into(), [1i64, 2, 5, 6]),
            ],
        )
        .expect("frame")
    }

    #[test]
    fn v1_in_a_window() {
        // semantics.md §2 V1 by one wallet, then another wallet's buy at 4 sets the mark.
        let s = 1_000_000;
        let df = v1_frame(Column::new(
            "block_time".into(),
            [100 * s, 200 * s, 500 * s, 600 * s],
        ));
        let trades = TokenTrades::from_frame(&df).expect("trades");
        let m = trades.window_metrics(1_000 * s, 86_400);
        assert_eq!(m.trade_count, Some(4));
        assert_eq!(m.win_pnl, Some(25.0));
        assert_eq!(m.pnl, Some(35.0));
        assert_eq!(m.position_count, Some(2));
        assert_eq!(m.avg_buy_mcap, Some(7e6 / 3.0));
        assert_eq!(
            m.avg_holding_duration,
            Some(((10.0 * 400.0 + 5.0 * 300.0) / 15.0f64).round() as i64)
        );
        // A window that starts after the buys: the sell matches nothing.
        let late = trades.window_metrics(1_000 * s, 1_000 - 300);
        assert_eq!(late.trade_count, Some(2));
        assert_eq!(late.win_pnl, Some(0.0));
        let frame = metrics_frame("T", DateTime::UNIX_EPOCH, &[("1d".into(), m)]).expect("frame");
        assert_eq!(frame.width(), 3 + 46);
    }

    #[test]
    fn block_times_are_read_in_their_unit() {
        // V1's trades with `block_time` as a timestamp of each unit.
        let frame = |unit: TimeUnit, per_second: i64| {
            let times = Column::new(
                "block_time".into(),
                [
                    100 * per_second,
                    200 * per_second,
                    500 * per_second,
                    600 * per_second,
                ],
            )
            .cast(&DataType::Datetime(unit, Some(TimeZone::UTC)))
            .expect("timestamps");
            v1_frame(times)
        };
        let metrics = |df: DataFrame| {
            let trades = TokenTrades::from_frame(&df).expect("trades");
            // The window ends at 1,000 s and holds the last 700 s (the sell, not the buys).
            (
                trades.window_metrics(1_000_000_000, 86_400),
                trades.window_metrics(1_000_000_000, 700),
            )
        };
        let micros = metrics(frame(TimeUnit::Microseconds, 1_000_000));
        assert_eq!(micros.0.avg_holding_duration, Some(367));
        assert_eq!(metrics(frame(TimeUnit::Milliseconds, 1_000)), micros);
        assert_eq!(metrics(frame(TimeUnit::Nanoseconds, 1_000_000_000)), micros);
    }

    #[test]
    fn a_close_drops_the_lots_and_settles_the_position() {
        let s = 1_000_000;
        // a: opens with 10 at 1, closes selling 5 at 2 (the other 5 are dropped), opens again
        // with 4 at 3. b: sells first (a position open before the window), unmatched.
        let df = DataFrame::new(
            4,
            vec![
                Column::new("wallet_address".into(), ["a", "a", "b", "a"]),
                Column::new("direction".into(), ["buy", "sell", "sell", "buy"]),
                Column::new("position_state".into(), ["open", "close", "close", "open"]),
                Column::new("token_amount".into(), [10.0, 5.0, 1.0, 4.0]),
                Column::new("usd_amount".into(), [10.0, 10.0, 3.0, 12.0]),
                Column::new("token_price".into(), [1.0, 2.0, 3.0, 3.0]),
                Column::new("token_mcap".into(), [1.0, 2.0, 3.0, 3.0]),
                Column::new("block_time".into(), [s, 2 * s, 3 * s, 4 * s]),
                Column::new("block_slot".into(), [1i64, 2, 3, 4]),
                Column::new("id".into(), [1i64, 2, 3, 4]),
            ],
        )
        .expect("frame");
        let m = TokenTrades::from_frame(&df)
            .expect("trades")
            .window_metrics(10 * s, 86_400);
        assert_eq!(m.position_count, Some(3));
        assert_eq!(m.win_position_count, Some(1));
        assert_eq!(m.loss_position_count, Some(0));
        assert_eq!(m.win_pnl, Some(5.0));
        assert_eq!(m.avg_trade_roi, Some(100.0));
        // a: realized 5, the new lot is at the mark; b: nothing counted.
        assert_eq!(m.pnl, Some(5.0));
        assert_eq!(m.avg_wallet_roi, Some(100.0 * 5.0 / 22.0));
        assert_eq!(m.wallet_hit_ratio, Some(50.0));
        assert_eq!(m.avg_holding_duration, Some(1));
        assert_eq!(m.sharpe_ratio, Some(0.0));
    }
}
