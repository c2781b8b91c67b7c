//! A wallet's equity curve marked to market at each period's close, and the metrics of its
//! returns.

use std::collections::HashMap;

use polars::prelude::*;

use super::grouping::group_ledgers;
use super::ledger::{Ledger, LedgerSet};
use super::options::{EquityConfig, PnlConfig, PnlOptions};
use super::report::{pct, ts_col};
use super::rows::{EventRows, find};
use crate::analytics::metrics;
use crate::{Error, Result};

/// A trade price on a token's price path: (period, event-order key, price).
pub(super) type PathPoint = (i64, (i64, i64, i64), f64);

/// What a wallet's equity curve is computed from, wherever it was read.
pub(super) struct EquityInputs<'a> {
    /// The wallet's ledgers (one per token).
    pub(super) set: LedgerSet,
    /// Per token of the wallet, prices of its events (every wallet's) in event order: at least
    /// the last one of each period (the period's close).
    pub(super) paths: HashMap<String, Vec<PathPoint>>,
    /// The period of the last event of the lake (every wallet and token).
    pub(super) last_period: Option<i64>,
    pub(super) equity: &'a EquityConfig,
}

/// The period (of `equity`'s width) holding `t` (µs).
pub(super) fn period_of(equity: &EquityConfig, t: i64) -> i64 {
    let width = equity.period_seconds as i128 * 1_000_000;
    (t as i128).div_euclid(width) as i64
}

/// A wallet's equity curve and the metrics of its returns.
#[derive(Debug, Clone)]
pub struct WalletPerformance {
    /// One row per period: `period_start`, `realized_pnl`, `unrealized_pnl`, `total_pnl`,
    /// `equity` (initial capital + total PnL at the period's close), `return` (equity over the
    /// previous period's, minus 1; the first period compares with the initial capital).
    pub curve: DataFrame,
    /// One row: `wallet_address`, `initial_capital`, `periods`, `sharpe_ratio`,
    /// `sortino_ratio`, `max_drawdown` (percent), `period_win_rate` (percent of the periods
    /// with a non-zero return that gained), `wins`, `losses`, `win_rate` (percent of the closed
    /// positions won), `profit_factor` (Σ realized of won positions /
    /// |Σ of lost ones|), `total_pnl`, `roi` (percent of the initial capital).
    pub metrics: DataFrame,
}

/// [`wallet_performance`](super::wallet_performance) of the events `all` (every wallet's,
/// wallets and tokens indexing the sorted dictionaries `wallets` and `tokens`).
pub(super) fn performance(
    all: &EventRows,
    wallets: &[String],
    tokens: &[String],
    wallet: &str,
    config: &PnlConfig,
    equity: &EquityConfig,
) -> Result<WalletPerformance> {
    let query = PnlOptions::of_wallet(wallet);
    let events = || (0..all.len()).filter(|&r| all.side[r].is_some());
    let last_period = events().map(|r| period_of(equity, all.time[r])).max();
    let this = find(wallets, wallet).map(|w| w as u32);
    let mut held = vec![false; tokens.len()];
    for r in events().filter(|&r| Some(all.wallet[r]) == this) {
        held[all.token[r] as usize] = true;
    }
    // Price paths of the wallet's tokens: (period, order key, price), sorted.
    let mut paths: HashMap<String, Vec<PathPoint>> = HashMap::new();
    for r in events() {
        let t = all.token[r] as usize;
        if held[t] && all.price[r].is_finite() {
            paths.entry(tokens[t].clone()).or_default().push((
                period_of(equity, all.time[r]),
                all.order_key(r),
                all.price[r],
            ));
        }
    }
    for p in paths.values_mut() {
        p.sort_by_key(|a| a.1);
    }
    let set = group_ledgers(all, wallets, tokens, &query)?;
    performance_of(
        EquityInputs {
            set,
            paths,
            last_period,
            equity,
        },
        wallet,
        config,
    )
}

/// The equity curve and metrics of `wallet` from its ledgers and its tokens' price paths.
pub(super) fn performance_of(
    inputs: EquityInputs<'_>,
    wallet: &str,
    config: &PnlConfig,
) -> Result<WalletPerformance> {
    let EquityInputs {
        set,
        paths,
        last_period,
        equity,
    } = inputs;
    let width = equity.period_seconds as i128 * 1_000_000;
    let period_of = |t: i64| period_of(equity, t);
    let mut ledgers: Vec<Ledger> = Vec::new();
    let first_period = set.events.iter().map(|e| period_of(e.time)).min();
    let (Some(first), Some(last)) = (first_period, last_period) else {
        return performance_frames(wallet, 0.0, &[], &[], &[], 0, 0, 0.0, 0.0, equity);
    };
    let n = (last - first + 1).max(0) as usize;
    let (mut realized, mut unrealized) = (vec![0.0; n], vec![0.0; n]);
    let (mut wins, mut losses, mut won, mut lost) = (0u64, 0u64, 0.0, 0.0);
    for k in 0..set.len() {
        let events = set.events_of(k);
        let path = paths.get(set.token(k)).map_or(&[][..], Vec::as_slice);
        let mut ledger = Ledger::new(config);
        let (mut e, mut p) = (0usize, 0usize);
        let mut close = f64::NAN;
        for (i, period) in (first..=last).enumerate() {
            while e < events.len() && period_of(events[e].time) <= period {
                ledger.apply(&events[e]).map_err(|o| Error::Oversell {
                    wallet: wallet.to_owned(),
                    token: set.token(k).to_owned(),
                    trade_id: o.id,
                    held: o.held,
                    sold: o.sold,
                })?;
                e += 1;
            }
            while p < path.len() && path[p].0 <= period {
                close = path[p].2;
                p += 1;
            }
            realized[i] += ledger.realized;
            unrealized[i] += if ledger.open_quantity() == 0.0 {
                ledger.unrealized(0.0)
            } else {
                ledger.unrealized(close)
            };
        }
        for pos in ledger.positions.iter().filter(|p| p.closed_at.is_some()) {
            if pos.realized > 0.0 {
                wins += 1;
                won += pos.realized;
            } else if pos.realized < 0.0 {
                losses += 1;
                lost += pos.realized;
            }
        }
        ledgers.push(ledger);
    }
    let capital = equity
        .initial_capital
        .unwrap_or_else(|| ledgers.iter().map(|l| l.buy_cost).sum());
    let starts: Vec<i64> = (first..=last).map(|p| (p as i128 * width) as i64).collect();
    performance_frames(
        wallet,
        capital,
        &starts,
        &realized,
        &unrealized,
        wins,
        losses,
        won,
        lost,
        equity,
    )
}

#[expect(
    clippy::too_many_arguments,
    reason = "a private assembly step of one caller"
)]
fn performance_frames(
    wallet: &str,
    capital: f64,
    starts: &[i64],
    realized: &[f64],
    unrealized: &[f64],
    wins: u64,
    losses: u64,
    won: f64,
    lost: f64,
    config: &EquityConfig,
) -> Result<WalletPerformance> {
    let total: Vec<f64> = realized
        .iter()
        .zip(unrealized)
        .map(|(r, u)| r + u)
        .collect();
    let curve: Vec<f64> = total.iter().map(|t| capital + t).collect();
    let returns: Vec<f64> = curve
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let prev = if i == 0 { capital } else { curve[i - 1] };
            e / prev - 1.0
        })
        .collect();
    let n = starts.len();
    let curve_df = DataFrame::new(
        n,
        vec![
            ts_col("period_start", starts.iter().map(|s| Some(*s)).collect())?,
            Column::new("realized_pnl".into(), realized),
            Column::new("unrealized_pnl".into(), unrealized),
            Column::new("total_pnl".into(), &total),
            Column::new("equity".into(), &curve),
            Column::new("return".into(), &returns),
        ],
    )
    .map_err(Error::polars("building the equity curve"))?;
    let finite: Vec<f64> = returns.iter().copied().filter(|r| r.is_finite()).collect();
    let m = metrics::ReturnMetrics::of(&finite, &config.ratios);
    let nan_none = |x: f64| (!x.is_nan()).then_some(x);
    let last_total = total.last().copied().unwrap_or(0.0);
    let metrics_df = DataFrame::new(
        1,
        vec![
            Column::new("wallet_address".into(), [wallet]),
            Column::new("initial_capital".into(), [capital]),
            Column::new("periods".into(), [n as u64]),
            Column::new("sharpe_ratio".into(), [nan_none(m.sharpe)]),
            Column::new("sortino_ratio".into(), [nan_none(m.sortino)]),
            Column::new(
                "max_drawdown".into(),
                [metrics::max_drawdown_of_equity(capital, &curve)],
            ),
            Column::new(
                "period_win_rate".into(),
                [nan_none(100.0 * m.period_win_rate)],
            ),
            Column::new("wins".into(), [wins]),
            Column::new("losses".into(), [losses]),
            Column::new(
                "win_rate".into(),
                [nan_none(100.0 * metrics::win_rate(wins, losses))],
            ),
            Column::new(
                "profit_factor".into(),
                [nan_none(metrics::profit_factor(won, lost))],
            ),
            Column::new("total_pnl".into(), [last_total]),
            Column::new("roi".into(), [pct(last_total, capital)]),
        ],
    )
    .map_err(Error::polars("building the wallet metrics"))?;
    Ok(WalletPerformance {
        curve: curve_df,
        metrics: metrics_df,
    })
}
