//! The reconciliation of the lake's `candles` (as the service computed them) with the bars the
//! crate computes from the lake's swaps for the same token or pool and interval.
//!
//! # The rule
//!
//! The service's candles are epoch-aligned buckets `[start, start + interval)` labelled by
//! their start, open and close the first and last swap in event order, high and low the
//! extremes, `volume` the USD volume and `count` the number of swaps, with empty buckets left
//! out: the definition of the crate's time bars with `closed = left`, `label = left` and
//! empty buckets skipped. So the bars of [`ohlcv::bars_of_events`](crate::analytics::ohlcv)
//! over the series' swaps (a token's, a pool's, or a pool's swaps of one token) are compared
//! with the candles, bucket by bucket. Widths of whole weeks are put on the epoch's grid
//! (the bars' weeks start on Monday, the candles' on the epoch's Thursday).
//!
//! Only buckets both sides cover are compared:
//! - the candles cover their fetched ranges; without them, from their first bucket to the end
//!   of their last one (a bucket is compared only when it lies inside one of those ranges);
//! - the swaps cover their fetched ranges; without them, every bucket from the one holding the
//!   token's first swap to the one holding its last (a swap stream is synced whole, back to
//!   its first swap), so a bucket must meet the span of the swaps.
//!
//! A compared bucket differs when a candle has no bar or a bar no candle, when `count` differs,
//! or when `open`, `high`, `low`, `close` or `volume` differ by more than a relative `1e-9`
//! (the two sides add the same floats in the same order, so a clean lake agrees to the bit
//! or nearly). A missing side has zero `count` and `volume` and no prices.

use std::collections::BTreeMap;

use polars::prelude::*;

use super::TimeSpan;
use crate::analytics::columns::{f64_col, i64_col, micros_col};
use crate::analytics::ohlcv::{BarOptions, bars_of_events};
use crate::analytics::{TimeRange, TokenEvents};
use crate::lake::convert::CandleSeries;
use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

/// Relative tolerance of prices and volumes.
const TOLERANCE: f64 = 1e-9;

/// Seconds in a week.
const WEEK: i64 = 7 * 86_400;

/// One field of a bucket that differs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FieldDiff {
    /// `open`, `high`, `low`, `close`, `volume` or `count`.
    pub field: &'static str,
    /// The candle's value; null when there is no candle (prices).
    pub candle: Option<f64>,
    /// The bar's value; null when there is no bar (prices).
    pub bars: Option<f64>,
}

/// A bucket whose candle and bar differ.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CandleMismatch {
    /// Token of the series.
    pub token: Option<String>,
    /// Pool of the series.
    pub pool: Option<String>,
    /// Seconds per candle.
    pub interval: i64,
    /// Start of the bucket.
    pub timestamp: chrono::DateTime<chrono::Utc>,
    /// The fields that differ.
    pub fields: Vec<FieldDiff>,
}

/// What the reconciliation compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reconciled {
    /// Series of candles in the lake (of the checked tokens).
    pub series: usize,
    /// Series compared (those whose swaps the lake holds).
    pub series_compared: usize,
    /// Buckets compared (holding a candle, a bar or both).
    pub buckets_compared: u64,
}

/// One bucket's values, candle or bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Ohlcv {
    open: f64,
    high: f64,
    low: f64,
    close: f64,
    volume: f64,
    count: i64,
}

/// A series' buckets, sorted by start (microseconds).
#[derive(Debug, Clone, Default)]
pub(super) struct Buckets {
    start: Vec<i64>,
    values: Vec<Ohlcv>,
}

impl Buckets {
    /// The span from the first bucket's start to the end of the last.
    pub(super) fn span(&self, interval: i64) -> Option<TimeSpan> {
        let (first, last) = (self.start.first()?, self.start.last()?);
        Some(TimeSpan {
            start: *first,
            end: last.saturating_add(interval.saturating_mul(1_000_000)),
        })
    }

    /// The number of buckets.
    pub(super) fn len(&self) -> usize {
        self.start.len()
    }

    /// The buckets' starts and closes, in order.
    pub(super) fn closes(&self) -> (Vec<i64>, Vec<f64>) {
        (
            self.start.clone(),
            self.values.iter().map(|v| v.close).collect(),
        )
    }

    fn of_frame(df: &DataFrame, rows: impl Iterator<Item = usize>) -> Result<Buckets> {
        let start = micros_col(df, "timestamp")?;
        let [open, high, low, close, volume] =
            ["open", "high", "low", "close", "volume"].map(|c| f64_col(df, c));
        let (open, high, low, close, volume) = (open?, high?, low?, close?, volume?);
        let count = i64_col(df, "count")?;
        let mut out = Buckets::default();
        for i in rows {
            out.start.push(start[i]);
            out.values.push(Ohlcv {
                open: open[i],
                high: high[i],
                low: low[i],
                close: close[i],
                volume: volume[i],
                count: count[i],
            });
        }
        Ok(out)
    }

    fn sort(&mut self) {
        let mut order: Vec<usize> = (0..self.start.len()).collect();
        order.sort_by_key(|&i| self.start[i]);
        self.start = order.iter().map(|&i| self.start[i]).collect();
        self.values = order.iter().map(|&i| self.values[i]).collect();
    }
}

/// The lake's candles, by series, each sorted by start; `keep` picks the series read.
pub(super) fn read_candles(
    lake: &Lake,
    keep: impl Fn(&CandleSeries) -> bool,
) -> Result<BTreeMap<CandleSeries, Buckets>> {
    let columns = [
        "token",
        "pool",
        "interval",
        "timestamp",
        "open",
        "high",
        "low",
        "close",
        "volume",
        "count",
    ];
    let df = lake
        .scan(Dataset::Candles)?
        .select(columns.map(col))
        .collect()
        .map_err(Error::polars("reading the candles"))?;
    let text = |name: &str| -> Result<Vec<Option<String>>> {
        Ok(df
            .column(name)
            .and_then(|c| c.str())
            .map_err(Error::polars(format!("candles' {name}")))?
            .iter()
            .map(|v| v.map(str::to_owned))
            .collect())
    };
    let (token, pool) = (text("token")?, text("pool")?);
    let interval = i64_col(&df, "interval")?;
    let mut rows: BTreeMap<CandleSeries, Vec<usize>> = BTreeMap::new();
    for i in 0..df.height() {
        let series = CandleSeries {
            token: token[i].clone(),
            pool: pool[i].clone(),
            interval: interval[i],
        };
        if keep(&series) {
            rows.entry(series).or_default().push(i);
        }
    }
    rows.into_iter()
        .map(|(series, rows)| {
            let mut b = Buckets::of_frame(&df, rows.into_iter())?;
            b.sort();
            Ok((series, b))
        })
        .collect()
}

/// The options of bars that match candles of `interval` seconds.
fn bar_options(interval: i64) -> BarOptions {
    BarOptions {
        // Bars' weeks start on Monday 1969-12-29; the candles' grid is the epoch's.
        offset_seconds: if interval % WEEK == 0 { 3 * 86_400 } else { 0 },
        ..BarOptions::with_width(interval)
    }
}

/// Whether two prices or volumes agree.
fn same(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= TOLERANCE * a.abs().max(b.abs())
}

/// One price of a bucket.
type Field = fn(&Ohlcv) -> f64;

/// The fields of a bucket that differ between its candle and its bar.
fn differences(candle: Option<&Ohlcv>, bar: Option<&Ohlcv>) -> Vec<FieldDiff> {
    let price = |o: Option<&Ohlcv>, f: fn(&Ohlcv) -> f64| o.map(f);
    let mut out = Vec::new();
    let fields: [(&'static str, Field); 4] = [
        ("open", |o| o.open),
        ("high", |o| o.high),
        ("low", |o| o.low),
        ("close", |o| o.close),
    ];
    for (name, f) in fields {
        let (c, b) = (price(candle, f), price(bar, f));
        let agree = match (c, b) {
            (Some(c), Some(b)) => same(c, b),
            (None, None) => true,
            _ => false,
        };
        if !agree {
            out.push(FieldDiff {
                field: name,
                candle: c,
                bars: b,
            });
        }
    }
    let volume = |o: Option<&Ohlcv>| o.map_or(0.0, |o| o.volume);
    if !same(volume(candle), volume(bar)) {
        out.push(FieldDiff {
            field: "volume",
            candle: Some(volume(candle)),
            bars: Some(volume(bar)),
        });
    }
    let count = |o: Option<&Ohlcv>| o.map_or(0, |o| o.count);
    if count(candle) != count(bar) {
        out.push(FieldDiff {
            field: "count",
            candle: Some(count(candle) as f64),
            bars: Some(count(bar) as f64),
        });
    }
    out
}

/// Compares one series' candles with the bars of its swaps (`events`, the series' token's),
/// in the buckets both cover: inside one of `candle_spans`, and inside one of `swap_spans`
/// when given, else meeting the span of the swaps. Returns the buckets compared and those
/// that differ.
pub(super) fn reconcile(
    series: &CandleSeries,
    candles: &Buckets,
    events: &TokenEvents,
    candle_spans: &[TimeSpan],
    swap_spans: Option<&[TimeSpan]>,
) -> Result<(u64, Vec<CandleMismatch>)> {
    let (Some(&first), Some(&last)) = (events.events.time.first(), events.events.time.last())
    else {
        return Ok((0, Vec::new()));
    };
    let width = series
        .interval
        .checked_mul(1_000_000)
        .ok_or_else(|| Error::InvalidArgument {
            argument: "interval".into(),
            reason: format!(
                "candles of {} s do not fit in microseconds",
                series.interval
            ),
        })?;
    let frame = bars_of_events(
        std::slice::from_ref(events),
        false,
        TimeRange::default(),
        &bar_options(series.interval),
    )?;
    let bars = Buckets::of_frame(&frame, 0..frame.height())?;
    let covered = |start: i64| {
        let end = start.saturating_add(width);
        let by_candles = candle_spans.iter().any(|s| s.holds_bucket(start, end));
        let by_swaps = match swap_spans {
            Some(spans) => spans.iter().any(|s| s.holds_bucket(start, end)),
            None => end > first && start <= last,
        };
        by_candles && by_swaps
    };
    let (mut i, mut j) = (0, 0);
    let (mut compared, mut out) = (0u64, Vec::new());
    while i < candles.start.len() || j < bars.start.len() {
        let c = candles.start.get(i).copied().unwrap_or(i64::MAX);
        let b = bars.start.get(j).copied().unwrap_or(i64::MAX);
        let start = c.min(b);
        let candle = (c == start).then(|| &candles.values[i]);
        let bar = (b == start).then(|| &bars.values[j]);
        i += usize::from(c == start);
        j += usize::from(b == start);
        if !covered(start) {
            continue;
        }
        compared += 1;
        let fields = differences(candle, bar);
        if !fields.is_empty() {
            out.push(CandleMismatch {
                token: series.token.clone(),
                pool: series.pool.clone(),
                interval: series.interval,
                timestamp: super::utc(start),
                fields,
            });
        }
    }
    Ok((compared, out))
}

#[cfg(test)]
pub(super) fn ohlcv_for_tests(
    start: i64,
    prices: [f64; 4],
    volume: f64,
    count: i64,
) -> (i64, Ohlcv) {
    (
        start,
        Ohlcv {
            open: prices[0],
            high: prices[1],
            low: prices[2],
            close: prices[3],
            volume,
            count,
        },
    )
}

#[cfg(test)]
impl Buckets {
    pub(super) fn from_rows(rows: Vec<(i64, Ohlcv)>) -> Buckets {
        let (start, values) = rows.into_iter().unzip();
        Buckets { start, values }
    }
}
