//! The reference computations: every derived answer of the service, computed plainly, row by
//! row, from the swaps it comes from.
//!
//! These functions are what the simulator serves and what the analytics layer is tested
//! against. Times are Unix seconds; a swap's price is its token's USD price
//! ([`SwapRecord::token_price`]) and its volume is its USD value ([`SwapRecord::usd`]).
//!
//! Definitions (decisions where the interface is silent):
//! - **Candles**: epoch-aligned buckets `[start, start + interval)` labelled by `start`; open and
//!   close are the first and last swap in event order; `count` is the number of swaps; `volume`
//!   is USD; empty buckets are skipped. The candles returned are whole buckets whose start lies
//!   in `[align(from), to]`. With `count` and `from`: the first `count` candles from `from`;
//!   with `count` and only `to`: the last `count` up to `to`; with neither `from` nor `count`:
//!   the last [`DEFAULT_CANDLES`] up to `to`.
//! - **Price history**: points at `from`, `from + interval`, … up to `to`; a point's
//!   `usd_price` is the last swap price before the end of its interval (carried forward) and
//!   its `usd_volume` the USD volume inside it. Points before the first swap are left out.
//! - **Price stats**: `usd_price_change_<p>` is the percent change of the latest price against
//!   the last price at or before `now − p` (the first price when the token is younger);
//!   `usd_volume_<p>` the USD volume in `(now − p, now]`; `usd_volume_change_<p>` its percent
//!   change against `(now − 2p, now − p]` (0 when that volume is 0).
//! - **Window metrics** (the 46 fields) from the trades in `(now − window, now]`: see
//!   [`window_metrics`].

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::api::models::{
    AltTokenProfile, Candle, EvmTokenProfile, Market as MarketSection, PRICE_STATS_PERIOD_SECONDS,
    Portfolio, PortfolioToken, PriceChanges, PricePoint, ROI_BUCKETS, TimeWindow, TokenMetadata,
    WindowMetrics,
};

use super::market::{Chain, SwapRecord, utc};
use super::streams::StreamView;

/// Candles returned when a request has neither `from` nor `count`.
pub const DEFAULT_CANDLES: usize = 1000;

/// Start of the epoch-aligned bucket of width `interval` that contains `t`.
pub fn align(t: i64, interval: i64) -> i64 {
    t.div_euclid(interval) * interval
}

/// Position of the first swap of `recs` whose time is greater than `t`.
fn after(recs: &[SwapRecord], t: i64) -> usize {
    recs.partition_point(|s| s.time <= t)
}

/// Position of the first swap of `recs` whose time is at least `t`.
fn at_or_after(recs: &[SwapRecord], t: i64) -> usize {
    recs.partition_point(|s| s.time < t)
}

/// Swaps in event order, shared with the chain's stream or filtered from it.
pub enum Records {
    /// A whole token stream (as of the chain's `now`).
    Shared(StreamView),
    /// A filtered copy.
    Owned(Vec<SwapRecord>),
}

impl std::ops::Deref for Records {
    type Target = [SwapRecord];

    fn deref(&self) -> &[SwapRecord] {
        match self {
            Records::Shared(s) => s,
            Records::Owned(v) => v,
        }
    }
}

/// Swaps of a candle or history request: a token's, a pool's, or a pool's restricted to a
/// token (none when the pool trades another token).
pub fn price_source(chain: &Chain, token: Option<u32>, pool: Option<u32>) -> Records {
    match (token, pool) {
        (Some(t), Some(p)) if chain.pools[p as usize].token == t => {
            Records::Owned(chain.pool_records(p))
        }
        (Some(t), None) => Records::Shared(chain.stream(t)),
        (None, Some(p)) => Records::Owned(chain.pool_records(p)),
        _ => Records::Owned(Vec::new()),
    }
}

/// Builds the candles of consecutive swaps (in event order), skipping empty buckets.
pub fn bucketize(recs: &[SwapRecord], interval: i64) -> Vec<Candle> {
    let mut out: Vec<Candle> = Vec::new();
    let mut current: Option<i64> = None;
    for s in recs {
        let b = align(s.time, interval);
        let p = s.token_price;
        if current == Some(b) {
            let c = out
                .last_mut()
                .expect("a current bucket always has its candle");
            c.high = c.high.max(p);
            c.low = c.low.min(p);
            c.close = p;
            c.volume += s.usd();
            c.count += 1;
        } else {
            current = Some(b);
            out.push(Candle {
                timestamp: utc(b),
                open: p,
                high: p,
                low: p,
                close: p,
                volume: s.usd(),
                count: 1,
            });
        }
    }
    out
}

/// Candles of `recs` (see the module documentation for the range rules); `now` is the
/// default of `to`.
pub fn candles(
    recs: &[SwapRecord],
    now: i64,
    interval: i64,
    from: Option<i64>,
    to: Option<i64>,
    count: Option<usize>,
) -> Vec<Candle> {
    let to = to.unwrap_or(now);
    // Whole buckets: every swap of the bucket that contains `to` is included.
    let hi = at_or_after(recs, align(to, interval).saturating_add(interval));
    match from {
        Some(from) => {
            let lo = at_or_after(recs, align(from, interval));
            let mut out = bucketize(&recs[lo..hi.max(lo)], interval);
            if let Some(n) = count {
                out.truncate(n);
            }
            out
        }
        None => {
            let n = count.unwrap_or(DEFAULT_CANDLES);
            // Walk back until `n` distinct buckets are covered.
            let mut lo = hi;
            let mut buckets = 0usize;
            let mut last_bucket = None;
            while lo > 0 {
                let b = align(recs[lo - 1].time, interval);
                if last_bucket != Some(b) {
                    if buckets == n {
                        break;
                    }
                    buckets += 1;
                    last_bucket = Some(b);
                }
                lo -= 1;
            }
            bucketize(&recs[lo..hi], interval)
        }
    }
}

/// Number of points a price-history request would produce.
pub fn history_points(from: i64, to: i64, interval: i64) -> i64 {
    if to < from {
        0
    } else {
        (to - from) / interval + 1
    }
}

/// Price history of `recs` at `interval` from `from` to `to` (both Unix seconds).
pub fn price_history(recs: &[SwapRecord], from: i64, to: i64, interval: i64) -> Vec<PricePoint> {
    let mut out = Vec::new();
    let mut pos = at_or_after(recs, from);
    let mut last_price = pos.checked_sub(1).map(|p| recs[p].token_price);
    let mut ts = from;
    while ts <= to {
        let end = ts.saturating_add(interval);
        let mut volume = 0.0;
        while pos < recs.len() && recs[pos].time < end {
            volume += recs[pos].usd();
            last_price = Some(recs[pos].token_price);
            pos += 1;
        }
        if let Some(p) = last_price {
            out.push(PricePoint {
                timestamp: utc(ts),
                usd_price: p,
                usd_volume: volume,
            });
        }
        ts = end;
    }
    out
}

/// USD volume of the swaps of `recs` with time in `(lo, hi]`.
pub fn volume_between(recs: &[SwapRecord], lo: i64, hi: i64) -> f64 {
    let a = after(recs, lo);
    let b = after(recs, hi);
    recs[a..b.max(a)].iter().map(SwapRecord::usd).sum()
}

/// Last price of `recs` at or before `t`, else the first price.
pub fn price_at_or_first(recs: &[SwapRecord], t: i64) -> Option<f64> {
    let p = after(recs, t);
    let s = if p == 0 { recs.first()? } else { &recs[p - 1] };
    Some(s.token_price)
}

/// `100 × (a / b − 1)`, or 0 when `b` is 0.
pub fn percent_change(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { 100.0 * (a / b - 1.0) }
}

/// Price changes and volumes of `recs` for the seven stats periods, at `now`.
pub fn price_changes(recs: &[SwapRecord], now: i64) -> PriceChanges {
    let latest_price = recs.last().map_or(0.0, |s| s.token_price);
    let mut values = [(0.0, 0.0, 0.0); 7];
    for (v, &p) in values.iter_mut().zip(PRICE_STATS_PERIOD_SECONDS.iter()) {
        let base = price_at_or_first(recs, now - p).unwrap_or(0.0);
        let volume = volume_between(recs, now - p, now);
        let previous = volume_between(recs, now - 2 * p, now - p);
        *v = (
            percent_change(latest_price, base),
            volume,
            percent_change(volume, previous),
        );
    }
    PriceChanges::from_periods(&values)
}

/// The latest price of a token, USD (0 for a token without swaps).
pub fn latest_price(chain: &Chain, token: u32) -> f64 {
    chain.latest_of_token(token).map_or(0.0, |s| s.token_price)
}

/// Token balances of every holder of `token` at "now" (wallet index → balance), from the
/// post-trade balance of each wallet's last swap of the token.
pub fn holder_balances(chain: &Chain, token: u32) -> HashMap<u32, f64> {
    let mut last: HashMap<u32, f64> = HashMap::new();
    for s in chain.stream(token).iter() {
        last.insert(s.wallet, s.post_token);
    }
    last.retain(|_, b| *b > 0.0);
    last
}

/// The market section of a token (interface 2.6) at "now".
///
/// `holders` counts the wallets with a positive balance plus the creator when it holds an
/// allocation; `top_holdings` is the share of the circulating supply held by the ten largest
/// holders (creator included) and `dev_holdings` the creator's share, both percent;
/// `liquidity` is twice the USD value of the token reserves of its pools (each pool starts
/// with a reserve and changes by the swaps against it).
pub fn market_section(chain: &Chain, token: u32) -> MarketSection {
    let info = &chain.tokens[token as usize];
    let stream = chain.stream(token);
    let price = stream.last().map_or(0.0, |s| s.token_price);
    let balances = holder_balances(chain, token);
    let mut amounts: Vec<f64> = balances.values().copied().collect();
    if info.dev_allocation > 0.0 {
        amounts.push(info.dev_allocation);
    }
    amounts.sort_by(|a, b| b.total_cmp(a));
    let top: f64 = amounts.iter().take(10).sum();
    let mut liquidity = 0.0;
    for &p in &info.pools {
        let mut reserve = chain.pools[p as usize].initial_reserve;
        for s in stream.iter().filter(|s| s.pool == p) {
            reserve += if s.buy {
                -s.token_amount
            } else {
                s.token_amount
            };
        }
        liquidity += 2.0 * reserve.max(0.0) * price;
    }
    MarketSection {
        fdv: Some(info.total_supply * price),
        market_cap: Some(info.circulating_supply * price),
        price: Some(price),
        liquidity: Some(liquidity),
        holders: Some(amounts.len() as i64),
        total_supply: Some(info.total_supply),
        circulating_supply: Some(info.circulating_supply),
        top_holdings: Some(100.0 * top / info.circulating_supply),
        dev_holdings: Some(100.0 * info.dev_allocation / info.circulating_supply),
    }
}

/// Metadata of a token (interface 2.3). Every member is sent: the interface types each link as
/// a string, so a link the token does not have is an empty string, never an absent member.
pub fn metadata(chain: &Chain, token: u32) -> TokenMetadata {
    let info = &chain.tokens[token as usize];
    let link = |l: &Option<String>| Some(l.clone().unwrap_or_default());
    TokenMetadata {
        last_trade_at: chain.stream(token).last().map(|s| utc(s.time)),
        created_at: Some(utc(info.created_at)),
        symbol: Some(info.symbol.clone()),
        name: Some(info.name.clone()),
        image: link(&info.image),
        verified: Some(info.verified),
        creator_address: Some(info.creator.clone()),
        twitter: link(&info.twitter),
        discord: link(&info.discord),
        website: link(&info.website),
        telegram: link(&info.telegram),
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Sample standard deviation (ddof 1); 0 with fewer than two values.
pub fn std_dev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// `a / b`, or 0 when `b` is 0 (so that every emitted number is finite).
fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

/// ROI bucket key of a percent ROI (`gt_500`, `200_500`, `0_200`, `neg50_0`, `lt_neg50_0`).
pub fn roi_bucket(roi: f64) -> &'static str {
    if roi > 500.0 {
        ROI_BUCKETS[0]
    } else if roi >= 200.0 {
        ROI_BUCKETS[1]
    } else if roi >= 0.0 {
        ROI_BUCKETS[2]
    } else if roi >= -50.0 {
        ROI_BUCKETS[3]
    } else {
        ROI_BUCKETS[4]
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

/// The 46 metrics of one token over the trades in `(now − window, now]`.
///
/// Per wallet, a FIFO ledger over the window's trades (semantics §2): a buy adds a lot at its
/// `usd_amount`; a sell matches lots first in, first out. The part of a sell beyond what the
/// window's buys hold (bought before the window) is left out of PnL (the `Ignore` policy), so
/// that the window's numbers depend only on the window's trades. Definitions:
/// - counts: `trade_count`, `buy_count`, `sell_count`; distinct wallets `makers_count`,
///   `buyers_count`, `sellers_count`; `position_count` = positions opened in the window plus
///   wallets whose position was already open when it began; `win_position_count` /
///   `loss_position_count` = positions closed in the window with realized PnL > 0 / < 0.
/// - volumes (USD): `buy_volume`, `sell_volume`, `volume`; `avg_buy_size`, `avg_sell_size`
///   (volume / count); `avg_price`, `avg_buy_price`, `avg_sell_price` are volume-weighted
///   (Σ usd / Σ tokens); `avg_buy_mcap`, `avg_sell_mcap` are means of `token_mcap`.
/// - per sell (the matched part): PnL = proceeds − FIFO cost, ROI = 100 × PnL / cost.
///   `largest_trade_win` (0 without a win), `largest_trade_loss` (negative, 0 without a loss),
///   `avg_trade_pnl`, `avg_trade_roi`, `win_pnl` (Σ positive), `loss_pnl` (Σ negative),
///   `profit_factor` = win_pnl / |loss_pnl|, `win_loss_size_ratio` = mean win / |mean loss|.
/// - per wallet: PnL = realized + unrealized (open lots at the latest price), ROI = 100 × PnL /
///   buy cost (wallets that bought), winrate = 100 × wins / closed positions (wallets that
///   closed one). `avg_wallet_pnl`, `avg_wallet_roi`, `avg_wallet_winrate` are plain means;
///   `volume_weighted_roi` / `_winrate` weigh by the wallet's volume; `wallet_hit_ratio` =
///   100 × wallets with PnL > 0 / makers; `pnl` = Σ wallet PnL; `pnl_volume_ratio` = pnl /
///   volume; `wallet_roi_distribution` counts wallets that bought by ROI bucket.
/// - `avg_holding_duration`: Σ q·(t_sell − t_buy) / Σ q over matched lots, seconds, rounded.
/// - dispersion: `price_volatility` = sample std of the percent returns between consecutive
///   trade prices; `roi_volatility` and `pnl_volatility` = sample std of the per-sell ROI and
///   PnL; each `*_stability` = 1 / (1 + its volatility).
/// - `sharpe_ratio` = mean(r) / std(r) and `sortino_ratio` = mean(r) / √mean(min(r, 0)²) over
///   the per-sell returns r = PnL / cost, risk-free 0, not annualised (one period per trade).
/// - `max_drawdown`: the largest fall, percent (≤ 0), of the equity curve that compounds the
///   per-sell returns in event order from an initial capital of 1 (semantics §3).
///
/// A ratio without a denominator, and a statistic of fewer than two values, is 0.
pub fn window_metrics(chain: &Chain, token: u32, window_seconds: i64) -> WindowMetrics {
    let stream = chain.stream(token);
    let lo = after(&stream, chain.now - window_seconds);
    let hi = after(&stream, chain.now);
    let trades = &stream[lo..hi.max(lo)];
    let mark = stream.last().map_or(0.0, |s| s.token_price);

    let mut ledgers: HashMap<u32, WalletLedger> = HashMap::new();
    let mut first_seen: Vec<u32> = Vec::new();
    let mut buyers = std::collections::HashSet::new();
    let mut sellers = std::collections::HashSet::new();
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
        let usd = s.usd();
        prices.push(s.token_price);
        let ledger = ledgers.entry(s.wallet).or_insert_with(|| {
            first_seen.push(s.wallet);
            // A wallet whose first trade in the window is not an opening buy held a position
            // when the window began.
            if !(s.buy && s.state == super::market::PosState::Open) {
                position_count += 1;
            }
            WalletLedger::default()
        });
        ledger.volume += usd;
        if s.buy {
            buy_count += 1;
            buy_volume += usd;
            buy_tokens += s.token_amount;
            buy_mcap += chain.mcap(s.token, s.token_price);
            buyers.insert(s.wallet);
            ledger.buy_cost += usd;
            ledger.lots.push_back((s.token_amount, usd, s.time));
            if s.state == super::market::PosState::Open {
                position_count += 1;
                ledger.position_realized = 0.0;
            }
        } else {
            sell_count += 1;
            sell_volume += usd;
            sell_tokens += s.token_amount;
            sell_mcap += chain.mcap(s.token, s.token_price);
            sellers.insert(s.wallet);
            let mut remaining = s.token_amount;
            let (mut matched_q, mut matched_cost) = (0.0, 0.0);
            while remaining > 0.0 {
                let Some(lot) = ledger.lots.front_mut() else {
                    break;
                };
                let q = remaining.min(lot.0);
                let cost = lot.1 * q / lot.0;
                matched_q += q;
                matched_cost += cost;
                hold_qt += q * (s.time - lot.2) as f64;
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
                let proceeds = usd * matched_q / s.token_amount;
                let pnl = proceeds - matched_cost;
                ledger.realized += pnl;
                ledger.position_realized += pnl;
                trade_pnls.push(pnl);
                let r = ratio(pnl, matched_cost);
                returns.push(r);
                trade_rois.push(100.0 * r);
            }
            if s.state == super::market::PosState::Close {
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
    }

    let mut wallet_pnls = Vec::new();
    let mut wallet_rois = Vec::new();
    let mut wallet_winrates = Vec::new();
    let (mut vw_roi, mut vw_roi_w, mut vw_win, mut vw_win_w) = (0.0, 0.0, 0.0, 0.0);
    let mut hits = 0i64;
    let mut distribution: std::collections::BTreeMap<String, i64> =
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
            *distribution
                .get_mut(roi_bucket(roi))
                .expect("every bucket key is pre-filled") += 1;
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
    let sharpe = if returns.len() < 2 {
        0.0
    } else {
        ratio(mean(&returns), std_dev(&returns))
    };
    let downside = mean(
        &returns
            .iter()
            .map(|r| r.min(0.0) * r.min(0.0))
            .collect::<Vec<_>>(),
    )
    .sqrt();
    let sortino = if returns.len() < 2 {
        0.0
    } else {
        ratio(mean(&returns), downside)
    };
    // Equity curve of the per-sell returns compounded from an initial capital of 1, which is
    // the first peak (so a loss on the first sell counts).
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

/// The six documented metric windows, longest first.
pub fn all_windows() -> Vec<TimeWindow> {
    TimeWindow::KNOWN.to_vec()
}

/// The EVM profile of a token (interface 2.2), with metadata when asked and the given windows.
pub fn evm_profile(
    chain: &Chain,
    chain_id: i64,
    token: u32,
    include_metadata: bool,
    windows: &[TimeWindow],
) -> EvmTokenProfile {
    let now = utc(chain.now);
    EvmTokenProfile {
        updated_at: now,
        synced_at: now,
        chain_id,
        token_address: chain.tokens[token as usize].address.clone(),
        metadata: include_metadata.then(|| metadata(chain, token)),
        metrics: windows
            .iter()
            .filter_map(|w| Some((w.clone(), window_metrics(chain, token, w.seconds()?))))
            .collect(),
    }
}

/// A wallet's portfolio at "now" (interface 2.10): every token and quote token with a positive
/// balance (the post-trade balance of the wallet's last swap of it, kept by the generator so
/// that no stream is read), at its latest price
/// (a token's last swap price; the native coin's price path; 1 for the stablecoin), largest
/// value first. An unknown wallet has an empty portfolio.
pub fn portfolio(chain: &Chain, wallet: Option<u32>) -> Portfolio {
    let Some(wallet) = wallet else {
        return Portfolio {
            value: 0.0,
            tokens: Vec::new(),
        };
    };
    let (tokens, quotes) = chain.final_balances(wallet);
    let tokens = tokens.into_iter();
    let quotes = quotes.iter().enumerate().map(|(q, b)| (q as u8, *b));
    let mut out: Vec<PortfolioToken> = Vec::new();
    for (t, balance) in tokens {
        if balance > 0.0 {
            let price = latest_price(chain, t);
            out.push(PortfolioToken {
                token: chain.tokens[t as usize].address.clone(),
                balance,
                price,
                value: balance * price,
            });
        }
    }
    for (q, balance) in quotes {
        if balance > 0.0 {
            let price = chain.quote_price(q, chain.now);
            out.push(PortfolioToken {
                token: chain.quotes[q as usize].address.clone(),
                balance,
                price,
                value: balance * price,
            });
        }
    }
    out.sort_by(|a, b| {
        b.value
            .total_cmp(&a.value)
            .then_with(|| a.token.cmp(&b.token))
    });
    Portfolio {
        value: out.iter().map(|t| t.value).sum(),
        tokens: out,
    }
}

/// Trades in the last hour for a token to be labelled `hot`.
pub const HOT_TRADES_1H: i64 = 20;
/// USD volume in the last hour for a token to be labelled `trending` (with a rising volume).
pub const TRENDING_VOLUME_1H: f64 = 10_000.0;
/// Percent rise of the last hour's volume over the hour before for `trending`.
pub const TRENDING_VOLUME_CHANGE_1H: f64 = 50.0;
/// Holders for a token to be labelled `popular`.
pub const POPULAR_HOLDERS: i64 = 25;
/// Age below which a token is labelled `new`, seconds (three days).
pub const NEW_AGE_SECONDS: i64 = 3 * 86_400;

/// The static labels of a token and, per label, the rules that made it apply:
/// - `new`: created less than three days before "now";
/// - `hot`: at least [`HOT_TRADES_1H`] trades in the last hour;
/// - `trending`: at least [`TRENDING_VOLUME_1H`] USD volume in the last hour, up more than
///   [`TRENDING_VOLUME_CHANGE_1H`] percent on the hour before;
/// - `popular`: at least [`POPULAR_HOLDERS`] holders.
pub fn labels(
    chain: &Chain,
    token: u32,
    market: &MarketSection,
) -> (Vec<String>, BTreeMap<String, Vec<String>>) {
    let stream = chain.stream(token);
    let mut matched: Vec<(&str, Vec<String>)> = Vec::new();
    let volume_1h = volume_between(&stream, chain.now - 3_600, chain.now);
    let previous_1h = volume_between(&stream, chain.now - 7_200, chain.now - 3_600);
    let change_1h = percent_change(volume_1h, previous_1h);
    if volume_1h >= TRENDING_VOLUME_1H && change_1h > TRENDING_VOLUME_CHANGE_1H {
        matched.push((
            "trending",
            vec![
                format!("usd_volume_1h >= {TRENDING_VOLUME_1H}"),
                format!("usd_volume_change_1h > {TRENDING_VOLUME_CHANGE_1H}"),
            ],
        ));
    }
    let trades_1h = (after(&stream, chain.now) - after(&stream, chain.now - 3_600)) as i64;
    if trades_1h >= HOT_TRADES_1H {
        matched.push(("hot", vec![format!("trade_count_1h >= {HOT_TRADES_1H}")]));
    }
    if chain.tokens[token as usize].created_at > chain.now - NEW_AGE_SECONDS {
        matched.push(("new", vec!["created_at > now - 3d".to_owned()]));
    }
    if market.holders.unwrap_or(0) >= POPULAR_HOLDERS {
        matched.push((
            "popular",
            vec![format!("market.holders >= {POPULAR_HOLDERS}")],
        ));
    }
    let labels = matched.iter().map(|(l, _)| (*l).to_owned()).collect();
    let rules = matched
        .into_iter()
        .map(|(l, r)| (l.to_owned(), r))
        .collect();
    (labels, rules)
}

/// The full search document of an altchain token: every section, every window, the static
/// labels and their rules, and no dynamic labels (the search fills those per request).
pub fn alt_profile(chain: &Chain, token: u32) -> AltTokenProfile {
    let now = utc(chain.now);
    let market = market_section(chain, token);
    let (labels, matched_labels) = labels(chain, token, &market);
    AltTokenProfile {
        updated_at: now,
        synced_at: now,
        token_address: chain.tokens[token as usize].address.clone(),
        labels: Some(labels),
        matched_labels: Some(matched_labels),
        dynamic_labels: Vec::new(),
        metadata: Some(metadata(chain, token)),
        market: Some(market),
        metrics: all_windows()
            .into_iter()
            .filter_map(|w| {
                let seconds = w.seconds()?;
                Some((w, window_metrics(chain, token, seconds)))
            })
            .collect(),
    }
}

/// The full search documents of every altchain token, as JSON, in token order (built in
/// parallel; each document depends on its token only, so the result does not depend on the
/// number of threads).
pub fn alt_profile_documents(chain: &Chain) -> Vec<serde_json::Value> {
    use rayon::prelude::*;
    (0..chain.tokens.len() as u32)
        .into_par_iter()
        .map(|t| {
            serde_json::to_value(alt_profile(chain, t))
                .expect("a profile of finite numbers and strings converts to JSON")
        })
        .collect()
}

#[cfg(test)]
mod tests;
