//! Time bars from a stored series: the altchain `candles` and the EVM `price_history` of the
//! lake, resampled to coarser buckets (see `docs/series.md`).
//!
//! A series is stored at an interval `i` (the datasets' `interval=` partitions); each stored
//! record covers `[t, t + i)` on the epoch's grid. It is resampled to bars of a width `w` that
//! is a multiple of `i`, with every time-bar option of [`BarOptions`]; the grid's buckets must
//! fall on the series' own boundaries (an offset or a time zone that splits a stored interval
//! is refused, naming both).
//!
//! - **Candles**: open of the first, high and low the extremes, close of the last, volume and
//!   count summed.
//! - **Price history**: each point is a candle whose open, high, low and close are its
//!   `usd_price` (the last price up to the end of its interval), whose volume is its
//!   `usd_volume` and whose count is 1; so a bar's open is its first point's price, its close
//!   its last point's, and its count the number of points.
//! - **Coverage**: a bucket that reaches before the series' first record or past the end of
//!   its last is flagged `incomplete`, as is, for price history (whose points are dense: one
//!   per interval once the token has a price), a bucket that meets a missing point. Buckets
//!   lying wholly in such a gap give no row and no fill policy fills across them. Candles are
//!   sparse (an interval without trades has none), so a missing candle is an empty interval,
//!   not a gap; the ranges the lake never fetched come in [`BarOptions::unfetched`], handled
//!   as for swap bars.
//!
//! The columns are [`BAR_COLUMNS`](super::BAR_COLUMNS) preceded by `token_address` (always):
//! `base_volume`, `buy_volume`, `sell_volume`, `sum_pq`, `sum_q` and `vwap` are null, since
//! a stored series does not carry them.

use std::collections::{BTreeMap, BTreeSet};

use polars::prelude::*;

use super::kernel::{self, PartialBar, TimeSpec};
use super::{BarOptions, Edge, PartBars, bars_frame, bars_of_parts};
use crate::analytics::columns::{f64_col, i64_col, micros_col, str_col};
use crate::analytics::events::TimeRange;
use crate::lake::{ChainFamily, Dataset, Lake};
use crate::{Error, Result};

/// A stored series to build bars from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesSource {
    /// The altchain `candles` dataset.
    Candles,
    /// The `price_history` dataset of one EVM chain.
    PriceHistory {
        /// The chain's numeric id.
        chain_id: i64,
    },
}

impl SeriesSource {
    /// The dataset the series is stored in.
    pub fn dataset(self) -> Dataset {
        match self {
            SeriesSource::Candles => Dataset::Candles,
            SeriesSource::PriceHistory { .. } => Dataset::PriceHistory,
        }
    }

    fn chain(self) -> ChainFamily {
        match self {
            SeriesSource::Candles => ChainFamily::Altchain,
            SeriesSource::PriceHistory { chain_id } => ChainFamily::Evm(chain_id),
        }
    }

    /// The columns of the token, the pool, the price (or open, high, low, close) and the volume.
    fn token_column(self) -> &'static str {
        match self {
            SeriesSource::Candles => "token",
            SeriesSource::PriceHistory { .. } => "token_address",
        }
    }

    fn pool_column(self) -> &'static str {
        match self {
            SeriesSource::Candles => "pool",
            SeriesSource::PriceHistory { .. } => "pool_address",
        }
    }
}

/// Which records of a stored series to read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SeriesSelection {
    /// Only these tokens; `None` for every token of the series.
    pub tokens: Option<Vec<String>>,
    /// Only the records of this pool (candles' `pool`, price history's `pool_address`).
    pub pool: Option<String>,
    /// Records whose start `t` lies in this range.
    pub range: TimeRange,
    /// The stored interval to read, seconds; `None` for the finest stored interval that
    /// divides the bar width.
    pub series_interval: Option<i64>,
}

/// One token's stored records at one interval, sorted by time (for price history, `open`,
/// `high`, `low` and `close` are each point's `usd_price`, `count` is 1).
#[derive(Debug, Clone, Default)]
pub(crate) struct TokenSeries {
    pub(crate) token: String,
    /// Record starts, µs.
    pub(crate) t: Vec<i64>,
    pub(crate) open: Vec<f64>,
    pub(crate) high: Vec<f64>,
    pub(crate) low: Vec<f64>,
    pub(crate) close: Vec<f64>,
    pub(crate) volume: Vec<f64>,
    pub(crate) count: Vec<i64>,
}

/// The stored intervals (seconds) of the selected records of `source`, in order.
pub fn stored_intervals(
    lake: &Lake,
    source: SeriesSource,
    selection: &SeriesSelection,
) -> Result<Vec<i64>> {
    let df = filtered(lake, source, selection, None)?
        .select([col("interval")])
        .unique(None, UniqueKeepStrategy::Any)
        .collect()
        .map_err(Error::polars(format!("reading the {}", source.dataset())))?;
    let set: BTreeSet<i64> = i64_col(&df, "interval")?.into_iter().collect();
    Ok(set.into_iter().collect())
}

/// The interval to resample from: `series_interval` if given (the width must be a multiple of
/// it), else the finest of `stored` that divides the width. Refusals are
/// [`Error::InvalidArgument`] naming the numbers. `None` when nothing is stored and no
/// interval was asked for.
pub fn choose_interval(
    width_seconds: i64,
    series_interval: Option<i64>,
    stored: &[i64],
) -> Result<Option<i64>> {
    let refuse = |reason: String| Error::InvalidArgument {
        argument: "series interval".into(),
        reason,
    };
    if let Some(i) = series_interval {
        if i <= 0 {
            return Err(refuse(format!(
                "{i} s: must be a positive number of seconds"
            )));
        }
        if width_seconds % i != 0 {
            return Err(refuse(format!(
                "a bar width of {width_seconds} s is not a multiple of the series interval \
                 {i} s"
            )));
        }
        return Ok(Some(i));
    }
    if stored.is_empty() {
        return Ok(None);
    }
    let mut fits: Vec<i64> = stored
        .iter()
        .copied()
        .filter(|&i| i > 0 && width_seconds % i == 0)
        .collect();
    fits.sort_unstable();
    match fits.first() {
        Some(&i) => Ok(Some(i)),
        None => {
            let names: Vec<String> = stored.iter().map(|i| format!("{i} s")).collect();
            Err(refuse(format!(
                "no stored interval divides the bar width of {width_seconds} s (stored: {})",
                names.join(", ")
            )))
        }
    }
}

/// A `timestamp` literal of the lake's type.
fn time_lit(t: i64) -> Expr {
    lit(t).cast(DataType::Datetime(
        TimeUnit::Microseconds,
        Some(TimeZone::UTC),
    ))
}

/// The lake's scan of `source`, filtered by chain, tokens, pool, range and (if given) interval.
pub(crate) fn filtered(
    lake: &Lake,
    source: SeriesSource,
    selection: &SeriesSelection,
    interval: Option<i64>,
) -> Result<LazyFrame> {
    let mut keep = col("chain").eq(lit(source.chain().to_string()));
    if let SeriesSource::PriceHistory { chain_id } = source {
        keep = keep.and(col("chain_id").eq(lit(chain_id)));
    }
    if let Some(i) = interval {
        keep = keep.and(col("interval").eq(lit(i)));
    }
    if let Some(from) = selection.range.from {
        keep = keep.and(col("timestamp").gt_eq(time_lit(from.timestamp_micros())));
    }
    if let Some(to) = selection.range.to {
        keep = keep.and(col("timestamp").lt(time_lit(to.timestamp_micros())));
    }
    if let Some(tokens) = &selection.tokens {
        let set = Series::new("tokens".into(), tokens.clone());
        keep = keep.and(col(source.token_column()).is_in(lit(set).implode(false), false));
    }
    if let Some(pool) = &selection.pool {
        keep = keep.and(col(source.pool_column()).eq(lit(pool.clone())));
    }
    Ok(lake.scan(source.dataset())?.filter(keep))
}

/// The selected records at `interval`, by token (a candle without a token is keyed by its
/// pool). A token with records of more than one pool is refused, naming them: their volumes
/// would be counted twice.
pub(crate) fn read_series(
    lake: &Lake,
    source: SeriesSource,
    selection: &SeriesSelection,
    interval: i64,
) -> Result<Vec<TokenSeries>> {
    let what = format!("reading the {}", source.dataset());
    let (tok, pool) = (source.token_column(), source.pool_column());
    let prices: Vec<Expr> = match source {
        SeriesSource::Candles => ["open", "high", "low", "close", "volume", "count"]
            .map(col)
            .into(),
        SeriesSource::PriceHistory { .. } => vec![
            col("usd_price").alias("open"),
            col("usd_volume").alias("volume"),
        ],
    };
    let mut columns = vec![col(tok), col(pool), col("timestamp")];
    columns.extend(prices);
    let df = filtered(lake, source, selection, Some(interval))?
        .select(columns)
        .collect()
        .map_err(Error::polars(what))?;
    let tokens = str_col(&df, tok)?;
    let pools = str_col(&df, pool)?;
    let t = micros_col(&df, "timestamp")?;
    let open = f64_col(&df, "open")?;
    let volume = f64_col(&df, "volume")?;
    let (high, low, close, count) = match source {
        SeriesSource::Candles => (
            f64_col(&df, "high")?,
            f64_col(&df, "low")?,
            f64_col(&df, "close")?,
            i64_col(&df, "count")?,
        ),
        SeriesSource::PriceHistory { .. } => (
            open.clone(),
            open.clone(),
            open.clone(),
            vec![1; df.height()],
        ),
    };
    let mut rows: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut pools_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for i in 0..df.height() {
        let key = if tokens[i].is_empty() {
            pools[i]
        } else {
            tokens[i]
        };
        rows.entry(key).or_default().push(i);
        pools_of.entry(key).or_default().insert(pools[i]);
    }
    if let Some((token, pools)) = pools_of.iter().find(|(_, p)| p.len() > 1) {
        let names: Vec<String> = pools.iter().map(|p| format!("{p:?}")).collect();
        return Err(Error::InvalidArgument {
            argument: "pool".into(),
            reason: format!(
                "the {} of {token} are stored for more than one pool ({}); select one pool",
                source.dataset(),
                names.join(", ")
            ),
        });
    }
    Ok(rows
        .into_iter()
        .map(|(token, mut idx)| {
            idx.sort_by_key(|&i| t[i]);
            let pick = |v: &[f64]| idx.iter().map(|&i| v[i]).collect();
            TokenSeries {
                token: token.to_owned(),
                t: idx.iter().map(|&i| t[i]).collect(),
                open: pick(&open),
                high: pick(&high),
                low: pick(&low),
                close: pick(&close),
                volume: pick(&volume),
                count: idx.iter().map(|&i| count[i]).collect(),
            }
        })
        .collect())
}

/// The resampling of one token's series: the spec, the stored interval (µs), whether missing
/// records inside the series are gaps (dense series), and the ranges never fetched.
struct SeriesBars<'a> {
    spec: &'a TimeSpec,
    interval: i64,
    dense: bool,
    options: &'a BarOptions,
}

impl SeriesBars<'_> {
    /// The left-closed bucket `[start, end)` holding the stored interval `[t, t + i)`, refused
    /// when the interval does not lie in one bucket.
    fn bucket(&self, t: i64) -> Result<(i64, i64)> {
        let grid = &self.spec.grid;
        let start = grid.left_start(t).ok_or_else(|| grid.out_of_range(t))?;
        let end = grid.next(start).ok_or_else(|| grid.out_of_range(t))?;
        if t + self.interval > end {
            return Err(Error::InvalidArgument {
                argument: "offset".into(),
                reason: format!(
                    "the bars' buckets do not fall on the series' intervals of {} s (a bucket \
                     of the width {} s ends at {} µs, inside the interval starting at {t} µs); \
                     give an offset (and time zone) that is a multiple of the series interval",
                    self.interval / 1_000_000,
                    self.options.width_seconds,
                    end
                ),
            });
        }
        Ok((start, end))
    }

    /// The ranges no bar may be filled across (as [`BarOptions::unfetched`]): the token's
    /// unfetched ranges and, for a dense series, the whole buckets inside its gaps.
    fn holes(&self, s: &TokenSeries) -> Result<Vec<(i64, i64)>> {
        let mut holes = self.options.unfetched.of(&s.token).to_vec();
        if self.dense && self.spec.fill != super::Fill::Skip {
            let grid = &self.spec.grid;
            for w in s.t.windows(2) {
                let (from, to) = (w[0] + self.interval, w[1]);
                if from >= to {
                    continue;
                }
                // The buckets wholly inside [from, to): from the first start at or after
                // `from` to the start of the bucket holding `to`.
                let (mut a, _) = self.bucket(w[0])?;
                while a < from {
                    a = grid.next(a).ok_or_else(|| grid.out_of_range(a))?;
                }
                let (b, _) = self.bucket(to)?;
                if a < b {
                    // Right-closed buckets `(s, e]` meet a hole `[from, to)` when
                    // `from <= e`: start one instant later so the bar before is not met.
                    let a = if self.spec.closed == Edge::Right {
                        a + 1
                    } else {
                        a
                    };
                    holes.push((a, b));
                }
            }
            holes.sort_unstable();
        }
        Ok(holes)
    }
}

impl PartBars<TokenSeries> for SeriesBars<'_> {
    fn bars<B: kernel::BarOut>(&self, s: &TokenSeries, out: &mut B) -> Result<()> {
        let i = self.interval;
        let n = s.t.len();
        let pieces = (0..n)
            .map(|k| {
                let t = s.t[k];
                let (start, end) = self.bucket(t)?;
                // Whether the series is unbroken just before and just after this record.
                let joined_before = k > 0 && (!self.dense || s.t[k - 1] + i >= t);
                let joined_after = k + 1 < n && (!self.dense || t + i >= s.t[k + 1]);
                let incomplete = (!joined_before && start < t) || (!joined_after && t + i < end);
                Ok(PartialBar {
                    // A right-closed bucket `(s, e]` holds the interval by its end.
                    t: match self.spec.closed {
                        Edge::Left => t,
                        Edge::Right => t + i,
                    },
                    open: s.open[k],
                    high: s.high[k],
                    low: s.low[k],
                    close: s.close[k],
                    volume: s.volume[k],
                    base: 0.0,
                    buy: 0.0,
                    sell: 0.0,
                    pq: 0.0,
                    q: 0.0,
                    count: s.count[k],
                    incomplete,
                })
            })
            .collect::<Result<Vec<PartialBar>>>()?;
        let holes = self.holes(s)?;
        kernel::time_bars(pieces.into_iter(), self.spec, &holes, out)
    }
}

/// The columns a stored series does not carry, set to null.
const UNKNOWN_COLUMNS: [&str; 6] = [
    "base_volume",
    "buy_volume",
    "sell_volume",
    "sum_pq",
    "sum_q",
    "vwap",
];

/// Time bars of width `options.width_seconds` from the stored series `source` (module
/// documentation above; the point semantics in `docs/series.md`).
///
/// The stored interval is `selection.series_interval`, else the finest stored interval of the
/// selected records that divides the width ([`choose_interval`]; the refusals name the
/// numbers). Every option of [`BarOptions`] applies; `data_end` defaults to the range's `to`.
/// The frame has `token_address` then [`BAR_COLUMNS`](super::BAR_COLUMNS), sorted by token
/// then time; nothing stored gives no rows.
pub fn series_bars(
    lake: &Lake,
    source: SeriesSource,
    selection: &SeriesSelection,
    options: &BarOptions,
) -> Result<DataFrame> {
    // Fails on bad options before reading anything.
    let data_end = options
        .data_end
        .or(selection.range.to)
        .map_or(i64::MAX, |t| t.timestamp_micros());
    let spec = options.spec(data_end)?;
    let stored = match selection.series_interval {
        Some(_) => Vec::new(),
        None => stored_intervals(lake, source, selection)?,
    };
    let (series, interval) =
        match choose_interval(options.width_seconds, selection.series_interval, &stored)? {
            Some(i) => (read_series(lake, source, selection, i)?, i),
            None => (Vec::new(), 1),
        };
    series_bars_of(series, source, interval, &spec, options)
}

fn series_bars_of(
    series: Vec<TokenSeries>,
    source: SeriesSource,
    interval: i64,
    spec: &TimeSpec,
    options: &BarOptions,
) -> Result<DataFrame> {
    let kernel = SeriesBars {
        spec,
        interval: interval.saturating_mul(1_000_000),
        dense: matches!(source, SeriesSource::PriceHistory { .. }),
        options,
    };
    let names: Vec<String> = series.iter().map(|s| s.token.clone()).collect();
    let (all, lens) = bars_of_parts(series, &kernel)?;
    let mut df = bars_frame(all, Some(names.into_iter().zip(lens).collect()))?;
    let n = df.height();
    for name in UNKNOWN_COLUMNS {
        df.with_column(Column::full_null(name.into(), n, &DataType::Float64))
            .map_err(Error::polars("building bars"))?;
    }
    Ok(df)
}
