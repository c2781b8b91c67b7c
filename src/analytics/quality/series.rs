//! Gaps and price jumps in the stored series: the EVM `price_history` and the altchain
//! `candles` (their bars: `docs/series.md`).
//!
//! # Gaps
//!
//! A price history is dense: from its first point on, the service gives one point for every
//! interval (the price carried over when nothing traded). So in one series (a chain's token in
//! one pool, at one interval) two consecutive points at `a` and `b` with `b − a` more than the
//! interval `i` leave the points of `[a + i, b)` missing; the part of that stretch inside the
//! series' fetched ranges (its token's or pool's syncs at that interval; without them, its
//! first point to the end of its last) is a gap, however short: one missing point is one too
//! many. Nothing before the first point (a token priced only from then on) or after the last is
//! claimed missing; what the syncs never fetched is the coverage's to report.
//!
//! Candles are sparse: the service gives no candle for an interval without swaps, so a missing
//! candle cannot be told from a quiet interval by the candles alone, and no candle gap is
//! reported. A candle lost from the lake is found by the reconciliation with the swaps
//! (`candles.rs`) where the lake holds them; a range never fetched, by the coverage.
//!
//! # Price jumps
//!
//! The swaps' rule and thresholds (`jumps.rs`, [`JumpRule`]) over each series' records in time
//! order, a record standing for an event: a price-history point's `usd_price`, a candle's
//! `close`. A record is a jump when its price departs from the rolling median of the
//! `half_window` records on each side beyond the bound, and from its nearest neighbours too.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use polars::prelude::*;
use rayon::prelude::*;

use super::candles::Buckets;
use super::jumps::{JumpRule, judge};
use super::{CandleSeries, TimeSpan};
use crate::analytics::TimeRange;
use crate::analytics::columns::{f64_col, i64_col, micros_col, str_col};
use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

/// What a price history's sync fetched: one chain's token or pool at one interval (the
/// target a sync names: a token or a pool, not both).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct HistoryTarget {
    /// Numeric EVM chain id.
    pub chain_id: i64,
    /// Token address, when synced by token.
    pub token: Option<String>,
    /// Pool address, when synced by pool.
    pub pool: Option<String>,
    /// Seconds between points.
    pub interval: i64,
}

/// A stretch of missing points inside a price history's fetched ranges.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeriesGap {
    /// The dataset: `price_history`.
    pub dataset: &'static str,
    /// Numeric EVM chain id.
    pub chain_id: i64,
    /// The series' token.
    pub token: String,
    /// The series' pool.
    pub pool: String,
    /// Seconds between points.
    pub interval: i64,
    /// Start of the first missing point's interval.
    pub from: DateTime<Utc>,
    /// End of the stretch: the next point present (or the end of the fetched range).
    pub to: DateTime<Utc>,
    /// Points missing in `[from, to)`.
    pub missing_points: u64,
}

/// A record of a stored series whose price departs from its neighbours' beyond the bound.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SeriesJump {
    /// The dataset: `price_history` or `candles`.
    pub dataset: &'static str,
    /// Numeric EVM chain id (price history).
    pub chain_id: Option<i64>,
    /// The series' token (null for the candles of a pool).
    pub token: Option<String>,
    /// The series' pool (null for the candles of a token).
    pub pool: Option<String>,
    /// Seconds per record.
    pub interval: i64,
    /// The record's start.
    pub timestamp: DateTime<Utc>,
    /// Its price: a point's `usd_price`, a candle's `close`.
    pub price: f64,
    /// The median price of its window; null when no record of the window has a price.
    pub median_price: Option<f64>,
    /// `ln(price / median_price)`; null when the price has no logarithm.
    pub log_deviation: Option<f64>,
    /// The bound it broke, in log price.
    pub bound: f64,
}

/// What the series checks looked at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SeriesChecked {
    /// Price histories (a chain's token in one pool at one interval).
    pub price_histories: usize,
    /// Candle series.
    pub candle_series: usize,
    /// Their records (points and candles).
    pub records: u64,
}

/// One price history of the lake: its points' starts (µs) and prices, in time order.
struct History {
    chain_id: i64,
    token: String,
    pool: String,
    interval: i64,
    t: Vec<i64>,
    price: Vec<f64>,
}

/// The lake's price histories of `tokens` (every token when `None`).
fn read_histories(lake: &Lake, tokens: Option<&[String]>) -> Result<Vec<History>> {
    let mut scan = lake.scan(Dataset::PriceHistory)?;
    if let Some(tokens) = tokens {
        let set = lit(Series::new("tokens".into(), tokens)).implode(false);
        scan = scan.filter(col("token_address").is_in(set, false));
    }
    let df = scan
        .select(
            [
                "chain_id",
                "token_address",
                "pool_address",
                "interval",
                "timestamp",
                "usd_price",
            ]
            .map(col),
        )
        .collect()
        .map_err(Error::polars("reading the price history"))?;
    let chain = i64_col(&df, "chain_id")?;
    let token = str_col(&df, "token_address")?;
    let pool = str_col(&df, "pool_address")?;
    let interval = i64_col(&df, "interval")?;
    let t = micros_col(&df, "timestamp")?;
    let price = f64_col(&df, "usd_price")?;
    let mut rows: BTreeMap<(i64, &str, &str, i64), Vec<usize>> = BTreeMap::new();
    for i in 0..df.height() {
        rows.entry((chain[i], token[i], pool[i], interval[i]))
            .or_default()
            .push(i);
    }
    Ok(rows
        .into_iter()
        .map(|((chain_id, token, pool, interval), mut idx)| {
            idx.sort_by_key(|&i| t[i]);
            History {
                chain_id,
                token: token.to_owned(),
                pool: pool.to_owned(),
                interval,
                t: idx.iter().map(|&i| t[i]).collect(),
                price: idx.iter().map(|&i| price[i]).collect(),
            }
        })
        .collect())
}

/// Sorted spans, overlapping or touching ones merged.
fn merged(mut spans: Vec<TimeSpan>) -> Vec<TimeSpan> {
    spans.sort_by_key(|s| s.start);
    let mut out: Vec<TimeSpan> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some(last) if s.start <= last.end => last.end = last.end.max(s.end),
            _ => out.push(s),
        }
    }
    out
}

/// The gaps of one price history inside `fetched` (sorted, disjoint spans).
fn history_gaps(h: &History, fetched: &[TimeSpan]) -> Vec<SeriesGap> {
    let Some(i) = h.interval.checked_mul(1_000_000).filter(|&i| i > 0) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for w in h.t.windows(2) {
        let (from, to) = (w[0].saturating_add(i), w[1]);
        if from >= to {
            continue;
        }
        for s in fetched {
            let (lo, hi) = (from.max(s.start), to.min(s.end));
            if lo < hi {
                out.push(SeriesGap {
                    dataset: "price_history",
                    chain_id: h.chain_id,
                    token: h.token.clone(),
                    pool: h.pool.clone(),
                    interval: h.interval,
                    from: super::utc(lo),
                    to: super::utc(hi),
                    missing_points: ((hi - lo) / i + i64::from((hi - lo) % i != 0)) as u64,
                });
            }
        }
    }
    out
}

/// The jumps of one series' prices at times `t` (µs), named as `jump` makes them.
fn series_jumps(
    t: &[i64],
    prices: &[f64],
    rule: &JumpRule,
    jump: impl Fn(DateTime<Utc>, f64) -> SeriesJump,
) -> Vec<SeriesJump> {
    judge(prices, rule)
        .into_iter()
        .map(|j| SeriesJump {
            median_price: j.median.map(f64::exp),
            log_deviation: j.deviation,
            bound: j.bound,
            ..jump(super::utc(t[j.index]), prices[j.index])
        })
        .collect()
}

/// The gaps and jumps of the lake's price histories of `tokens` (every token when `None`),
/// gaps inside `fetched` (a series without recorded syncs: its first point to its last).
pub(super) fn check_histories(
    lake: &Lake,
    tokens: Option<&[String]>,
    fetched: &BTreeMap<HistoryTarget, Vec<TimeRange>>,
    rule: &JumpRule,
) -> Result<(SeriesChecked, Vec<SeriesGap>, Vec<SeriesJump>)> {
    let histories = read_histories(lake, tokens)?;
    let per: Vec<(Vec<SeriesGap>, Vec<SeriesJump>)> = histories
        .par_iter()
        .map(|h| {
            let target = |token: Option<&str>, pool: Option<&str>| HistoryTarget {
                chain_id: h.chain_id,
                token: token.map(str::to_owned),
                pool: pool.map(str::to_owned),
                interval: h.interval,
            };
            let recorded: Vec<TimeSpan> =
                [target(Some(&h.token), None), target(None, Some(&h.pool))]
                    .iter()
                    .filter_map(|k| fetched.get(k))
                    .flatten()
                    .map(TimeSpan::of)
                    .collect();
            let spans = if recorded.is_empty() {
                let width = h.interval.saturating_mul(1_000_000);
                match (h.t.first(), h.t.last()) {
                    (Some(&a), Some(&b)) => vec![TimeSpan {
                        start: a,
                        end: b.saturating_add(width),
                    }],
                    _ => Vec::new(),
                }
            } else {
                merged(recorded)
            };
            let jumps = series_jumps(&h.t, &h.price, rule, |timestamp, price| SeriesJump {
                dataset: "price_history",
                chain_id: Some(h.chain_id),
                token: Some(h.token.clone()),
                pool: Some(h.pool.clone()),
                interval: h.interval,
                timestamp,
                price,
                median_price: None,
                log_deviation: None,
                bound: 0.0,
            });
            (history_gaps(h, &spans), jumps)
        })
        .collect();
    let checked = SeriesChecked {
        price_histories: histories.len(),
        candle_series: 0,
        records: histories.iter().map(|h| h.t.len() as u64).sum(),
    };
    let (gaps, jumps) = per.into_iter().unzip::<_, _, Vec<_>, Vec<_>>();
    Ok((
        checked,
        gaps.into_iter().flatten().collect(),
        jumps.into_iter().flatten().collect(),
    ))
}

/// The jumps of the candles' closes, series by series.
pub(super) fn candle_jumps(
    candles: &[(&CandleSeries, &Buckets)],
    rule: &JumpRule,
) -> Vec<SeriesJump> {
    candles
        .par_iter()
        .map(|(series, buckets)| {
            let (t, closes) = buckets.closes();
            series_jumps(&t, &closes, rule, |timestamp, price| SeriesJump {
                dataset: "candles",
                chain_id: None,
                token: series.token.clone(),
                pool: series.pool.clone(),
                interval: series.interval,
                timestamp,
                price,
                median_price: None,
                log_deviation: None,
                bound: 0.0,
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .flatten()
        .collect()
}
