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

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use chrono::{DateTime, Utc};
use polars::prelude::*;

use crate::api::models::{ROI_BUCKETS, TimeWindow, WindowMetrics};
use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

/// Columns read from the trades dataset.
pub const COLUMNS: [&str; 10] = [
    "wallet_address",
    "direction",
    "position_state",
    "token_amount",
    "usd_amount",
    "token_price",
    "token_mcap",
    "block_time",
    "block_slot",
    "id",
];

fn polars_err(context: &str) -> impl FnOnce(PolarsError) -> Error + '_ {
    move |source| Error::Polars {
        context: context.to_owned(),
        source,
    }
}

/// Parses a window length: a positive integer and a unit `s`, `m`, `h`, `d` or `w`
/// (`1d`, `6h`, `90m`, `30d`).
pub fn parse_window(s: &str) -> Result<i64> {
    let bad = || Error::InvalidArgument {
        argument: "window".into(),
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
    n.checked_mul(scale).ok_or_else(bad)
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
        let s = |name: &str| -> Result<Vec<Option<String>>> {
            let ca = df
                .column(name)
                .and_then(|c| c.str())
                .map_err(polars_err(name))?;
            Ok(ca.iter().map(|v| v.map(str::to_owned)).collect())
        };
        let f = |name: &str| -> Result<Vec<f64>> {
            let c = df
                .column(name)
                .and_then(|c| c.cast(&DataType::Float64))
                .map_err(polars_err(name))?;
            let ca = c.f64().map_err(polars_err(name))?;
            Ok(ca.iter().map(|v| v.unwrap_or(f64::NAN)).collect())
        };
        let i = |name: &str| -> Result<Vec<i64>> {
            let c = df
                .column(name)
                .and_then(|c| c.cast(&DataType::Int64))
                .map_err(polars_err(name))?;
            let ca = c.i64().map_err(polars_err(name))?;
            Ok(ca.iter().map(|v| v.unwrap_or(0)).collect())
        };
        let wallet = s("wallet_address")?;
        let direction = s("direction")?;
        let state = s("position_state")?;
        let (amount, usd, price, mcap) = (
            f("token_amount")?,
            f("usd_amount")?,
            f("token_price")?,
            f("token_mcap")?,
        );
        let (time, slot, id) = (i("block_time")?, i("block_slot")?, i("id")?);
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut rows = Vec::with_capacity(df.height());
        for k in 0..df.height() {
            let buy = match direction[k].as_deref() {
                Some("buy") => true,
                Some("sell") => false,
                _ => continue,
            };
            let next = ids.len() as u32;
            let wid = *ids
                .entry(wallet[k].clone().unwrap_or_default())
                .or_insert(next);
            rows.push(Row {
                wallet: wid,
                buy,
                open: state[k].as_deref() == Some("open"),
                close: state[k].as_deref() == Some("close"),
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
    pub fn window_metrics(&self, now: i64, window_seconds: i64) -> WindowMetrics {
        let lo = self
            .rows
            .partition_point(|r| r.time <= now - window_seconds * 1_000_000);
        let hi = self.rows.partition_point(|r| r.time <= now);
        let mark = hi.checked_sub(1).map_or(0.0, |k| self.rows[k].price);
        compute(&self.rows[lo..hi.max(lo)], mark)
    }
}

#[derive(Default)]
struct WalletLedger {
    lots: VecDeque<(f64, f64, i64)>,
    realized: f64,
    buy_cost: f64,
    volume: f64,
    wins: u32,
    losses: u32,
    position_realized: f64,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn std_dev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

/// ROI bucket of a percent ROI.
pub fn roi_bucket(roi: f64) -> &'static str {
    match roi {
        r if r > 500.0 => ROI_BUCKETS[0],
        r if r >= 200.0 => ROI_BUCKETS[1],
        r if r >= 0.0 => ROI_BUCKETS[2],
        r if r >= -50.0 => ROI_BUCKETS[3],
        _ => ROI_BUCKETS[4],
    }
}

fn compute(trades: &[Row], mark: f64) -> WindowMetrics {
    let mut ledgers: HashMap<u32, WalletLedger> = HashMap::new();
    let mut first_seen: Vec<u32> = Vec::new();
    let mut buyers = HashSet::new();
    let mut sellers = HashSet::new();
    let (mut buy_count, mut sell_count) = (0i64, 0i64);
    let (mut buy_volume, mut sell_volume) = (0.0, 0.0);
    let (mut buy_tokens, mut sell_tokens) = (0.0, 0.0);
    let (mut buy_mcap, mut sell_mcap) = (0.0, 0.0);
    let mut position_count = 0i64;
    let (mut wins, mut losses) = (0i64, 0i64);
    let mut trade_pnls: Vec<f64> = Vec::new();
    let mut trade_rois: Vec<f64> = Vec::new();
    let mut returns: Vec<f64> = Vec::new();
    let (mut hold_qt, mut hold_q) = (0.0, 0.0);
    let mut prices: Vec<f64> = Vec::with_capacity(trades.len());

    for s in trades {
        let usd = s.usd;
        prices.push(s.price);
        let ledger = ledgers.entry(s.wallet).or_insert_with(|| {
            first_seen.push(s.wallet);
            if !(s.buy && s.open) {
                position_count += 1;
            }
            WalletLedger::default()
        });
        ledger.volume += usd;
        if s.buy {
            buy_count += 1;
            buy_volume += usd;
            buy_tokens += s.amount;
            buy_mcap += s.mcap;
            buyers.insert(s.wallet);
            ledger.buy_cost += usd;
            ledger.lots.push_back((s.amount, usd, s.time));
            if s.open {
                position_count += 1;
                ledger.position_realized = 0.0;
            }
            continue;
        }
        sell_count += 1;
        sell_volume += usd;
        sell_tokens += s.amount;
        sell_mcap += s.mcap;
        sellers.insert(s.wallet);
        let mut remaining = s.amount;
        let (mut matched_q, mut matched_cost) = (0.0, 0.0);
        while remaining > 0.0 {
            let Some(lot) = ledger.lots.front_mut() else {
                break;
            };
            let q = remaining.min(lot.0);
            let cost = lot.1 * q / lot.0;
            matched_q += q;
            matched_cost += cost;
            hold_qt += q * ((s.time - lot.2) as f64 / 1e6);
            hold_q += q;
            remaining -= q;
            if q >= lot.0 {
                ledger.lots.pop_front();
            } else {
                lot.1 -= cost;
                lot.0 -= q;
            }
        }
        if matched_q > 0.0 {
            let proceeds = usd * matched_q / s.amount;
            let pnl = proceeds - matched_cost;
            ledger.realized += pnl;
            ledger.position_realized += pnl;
            trade_pnls.push(pnl);
            let r = ratio(pnl, matched_cost);
            returns.push(r);
            trade_rois.push(100.0 * r);
        }
        if s.close {
            if ledger.position_realized > 0.0 {
                ledger.wins += 1;
                wins += 1;
            } else if ledger.position_realized < 0.0 {
                ledger.losses += 1;
                losses += 1;
            }
            ledger.position_realized = 0.0;
            ledger.lots.clear();
        }
    }

    let mut wallet_pnls = Vec::new();
    let mut wallet_rois = Vec::new();
    let mut wallet_winrates = Vec::new();
    let (mut vw_roi, mut vw_roi_w, mut vw_win, mut vw_win_w) = (0.0, 0.0, 0.0, 0.0);
    let mut hits = 0i64;
    let mut distribution: BTreeMap<String, i64> =
        ROI_BUCKETS.iter().map(|b| ((*b).to_owned(), 0)).collect();
    for w in &first_seen {
        let l = &ledgers[w];
        let unrealized: f64 = l.lots.iter().map(|(q, cost, _)| q * mark - cost).sum();
        let pnl = l.realized + unrealized;
        wallet_pnls.push(pnl);
        if pnl > 0.0 {
            hits += 1;
        }
        if l.buy_cost > 0.0 {
            let roi = 100.0 * pnl / l.buy_cost;
            wallet_rois.push(roi);
            vw_roi += roi * l.volume;
            vw_roi_w += l.volume;
            if let Some(n) = distribution.get_mut(roi_bucket(roi)) {
                *n += 1;
            }
        }
        if l.wins + l.losses > 0 {
            let winrate = 100.0 * f64::from(l.wins) / f64::from(l.wins + l.losses);
            wallet_winrates.push(winrate);
            vw_win += winrate * l.volume;
            vw_win_w += l.volume;
        }
    }

    let win_values: Vec<f64> = trade_pnls.iter().copied().filter(|p| *p > 0.0).collect();
    let loss_values: Vec<f64> = trade_pnls.iter().copied().filter(|p| *p < 0.0).collect();
    let win_pnl: f64 = win_values.iter().sum();
    let loss_pnl: f64 = loss_values.iter().sum();
    let volume = buy_volume + sell_volume;
    let pnl: f64 = wallet_pnls.iter().sum();
    let price_returns: Vec<f64> = prices
        .windows(2)
        .map(|w| 100.0 * (w[1] / w[0] - 1.0))
        .collect();
    let price_volatility = std_dev(&price_returns);
    let roi_volatility = std_dev(&trade_rois);
    let pnl_volatility = std_dev(&trade_pnls);
    let (sharpe, sortino) = if returns.len() < 2 {
        (0.0, 0.0)
    } else {
        let downside: Vec<f64> = returns.iter().map(|r| r.min(0.0) * r.min(0.0)).collect();
        (
            ratio(mean(&returns), std_dev(&returns)),
            ratio(mean(&returns), mean(&downside).sqrt()),
        )
    };
    let (mut equity, mut peak, mut max_drawdown) = (1.0f64, 1.0f64, 0.0f64);
    for r in &returns {
        equity *= 1.0 + r;
        peak = peak.max(equity);
        max_drawdown = max_drawdown.min(100.0 * (equity / peak - 1.0));
    }

    WindowMetrics {
        avg_holding_duration: Some(ratio(hold_qt, hold_q).round() as i64),
        makers_count: Some(first_seen.len() as i64),
        buyers_count: Some(buyers.len() as i64),
        sellers_count: Some(sellers.len() as i64),
        buy_count: Some(buy_count),
        sell_count: Some(sell_count),
        win_position_count: Some(wins),
        loss_position_count: Some(losses),
        trade_count: Some(buy_count + sell_count),
        position_count: Some(position_count),
        wallet_roi_distribution: Some(distribution),
        largest_trade_win: Some(win_values.iter().copied().fold(0.0, f64::max)),
        largest_trade_loss: Some(loss_values.iter().copied().fold(0.0, f64::min)),
        avg_buy_size: Some(ratio(buy_volume, buy_count as f64)),
        avg_sell_size: Some(ratio(sell_volume, sell_count as f64)),
        avg_price: Some(ratio(volume, buy_tokens + sell_tokens)),
        avg_buy_price: Some(ratio(buy_volume, buy_tokens)),
        avg_sell_price: Some(ratio(sell_volume, sell_tokens)),
        avg_buy_mcap: Some(ratio(buy_mcap, buy_count as f64)),
        avg_sell_mcap: Some(ratio(sell_mcap, sell_count as f64)),
        avg_trade_pnl: Some(mean(&trade_pnls)),
        avg_trade_roi: Some(mean(&trade_rois)),
        avg_wallet_winrate: Some(mean(&wallet_winrates)),
        avg_wallet_pnl: Some(mean(&wallet_pnls)),
        avg_wallet_roi: Some(mean(&wallet_rois)),
        win_pnl: Some(win_pnl),
        loss_pnl: Some(loss_pnl),
        buy_volume: Some(buy_volume),
        sell_volume: Some(sell_volume),
        pnl: Some(pnl),
        volume: Some(volume),
        volume_weighted_winrate: Some(ratio(vw_win, vw_win_w)),
        volume_weighted_roi: Some(ratio(vw_roi, vw_roi_w)),
        wallet_hit_ratio: Some(ratio(100.0 * hits as f64, first_seen.len() as f64)),
        profit_factor: Some(ratio(win_pnl, loss_pnl.abs())),
        win_loss_size_ratio: Some(ratio(mean(&win_values), mean(&loss_values).abs())),
        pnl_volume_ratio: Some(ratio(pnl, volume)),
        price_stability: Some(1.0 / (1.0 + price_volatility)),
        price_volatility: Some(price_volatility),
        roi_stability: Some(1.0 / (1.0 + roi_volatility)),
        roi_volatility: Some(roi_volatility),
        pnl_volatility: Some(pnl_volatility),
        pnl_stability: Some(1.0 / (1.0 + pnl_volatility)),
        sharpe_ratio: Some(sharpe),
        sortino_ratio: Some(sortino),
        max_drawdown: Some(max_drawdown),
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
        .filter(col("token_address").eq(lit(token)))
        .select(cols)
        .collect()
        .map_err(polars_err("reading the token's trades"))?;
    TokenTrades::from_frame(&df)
}

/// The latest trade time in the lake (every token), the default "now" of the metrics.
pub fn lake_now(lake: &Lake) -> Result<Option<DateTime<Utc>>> {
    let df = lake
        .scan(Dataset::Trades)?
        .select([col("block_time").cast(DataType::Int64).max()])
        .collect()
        .map_err(polars_err("reading the latest trade time"))?;
    let v = df
        .column("block_time")
        .and_then(|c| c.i64().map(|c| c.get(0)))
        .map_err(polars_err("reading the latest trade time"))?;
    Ok(v.and_then(DateTime::from_timestamp_micros))
}

/// The metrics of `token` from the lake's trades, one row per window (see
/// [`metrics_frame`] for the columns). `now` defaults to the lake's latest trade time.
pub fn token_metrics(
    lake: &Lake,
    token: &str,
    windows: &[Window],
    now: Option<DateTime<Utc>>,
) -> Result<DataFrame> {
    let trades = lake_token_trades(lake, token)?;
    let now = match now {
        Some(n) => n,
        None => lake_now(lake)?.unwrap_or(DateTime::UNIX_EPOCH),
    };
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
            .map_err(polars_err("window_end"))?
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
        .map_err(polars_err("wallet_roi_distribution"))?;
    cols.push(dist.into_series().into());
    let nums: Vec<Vec<Option<f64>>> = rows.iter().map(|r| r.1.numbers()).collect();
    for (k, name) in WindowMetrics::NUMBER_FIELDS.iter().enumerate() {
        cols.push(Column::new(
            (*name).into(),
            nums.iter().map(|v| v[k]).collect::<Vec<_>>(),
        ));
    }
    DataFrame::new(n, cols).map_err(polars_err("building the token metrics"))
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
    }

    #[test]
    fn v1_in_a_window() {
        // semantics.md §2 V1 by one wallet, then another wallet's buy at 4 sets the mark.
        let s = 1_000_000;
        let df = DataFrame::new(
            4,
            vec![
                Column::new("wallet_address".into(), ["a", "a", "a", "b"]),
                Column::new("direction".into(), ["buy", "buy", "sell", "buy"]),
                Column::new("position_state".into(), ["open", "trade", "trade", "open"]),
                Column::new("token_amount".into(), [10.0, 10.0, 15.0, 1.0]),
                Column::new("usd_amount".into(), [10.0, 20.0, 45.0, 4.0]),
                Column::new("token_price".into(), [1.0, 2.0, 3.0, 4.0]),
                Column::new("token_mcap".into(), [1e6, 2e6, 3e6, 4e6]),
                // Rows out of order: the sell is listed first.
                Column::new("block_time".into(), [100 * s, 200 * s, 500 * s, 600 * s]),
                Column::new("block_slot".into(), [1i64, 2, 5, 6]),
                Column::new("id".into(), [1i64, 2, 5, 6]),
            ],
        )
        .expect("frame");
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
}
