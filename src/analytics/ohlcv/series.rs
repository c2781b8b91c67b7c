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
//! - **Reading**: the committed files of the series' chain and interval whose time span meets
//!   the range are read one at a time (in path order, so by date), their selected records
//!   appended to their token's, which is then sorted by time only if it is not already. A
//!   price history keeps per point only its time, price and volume (24 bytes); candles keep
//!   their six columns.
//!
//! The columns are [`BAR_COLUMNS`](super::BAR_COLUMNS) preceded by `token_address` (always):
//! `base_volume`, `buy_volume`, `sell_volume`, `sum_pq`, `sum_q` and `vwap` are null, since
//! a stored series does not carry them.

use std::collections::{BTreeMap, BTreeSet};

use polars::prelude::*;

use super::kernel::{self, PartialBar, TimeSpec};
use super::{BarOptions, Edge, PartBars, bars_frame, bars_of_parts};
use crate::analytics::columns::{f64_slice, i64_col, i64_slice, micros_col, str_at, str_chunk};
use crate::analytics::events::TimeRange;
use crate::lake::read::{committed_files, scan_files};
use crate::lake::{ChainFamily, Dataset, Lake, Partition};
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

/// One token's stored records at one interval, sorted by time. A price history stores only
/// each point's time, `usd_price` (as `open`) and `usd_volume`: its high, low and close equal
/// its open and its count is 1 (`candle` is `None`).
#[derive(Debug, Clone, Default)]
pub(crate) struct TokenSeries {
    pub(crate) token: String,
    /// Record starts, µs.
    pub(crate) t: Vec<i64>,
    pub(crate) open: Vec<f64>,
    pub(crate) volume: Vec<f64>,
    /// The other columns of a candle; `None` for a price history.
    pub(crate) candle: Option<CandleColumns>,
}

/// The columns of a stored candle besides its open and volume.
#[derive(Debug, Clone, Default)]
pub(crate) struct CandleColumns {
    pub(crate) high: Vec<f64>,
    pub(crate) low: Vec<f64>,
    pub(crate) close: Vec<f64>,
    pub(crate) count: Vec<i64>,
}

impl TokenSeries {
    /// The closes: a price history's are its prices.
    pub(crate) fn close(&self) -> &[f64] {
        self.candle.as_ref().map_or(&self.open, |c| &c.close)
    }

    /// Record `k` as a candle: open, high, low, close, volume, count.
    fn record(&self, k: usize) -> (f64, f64, f64, f64, f64, i64) {
        let (open, volume) = (self.open[k], self.volume[k]);
        match &self.candle {
            Some(c) => (open, c.high[k], c.low[k], c.close[k], volume, c.count[k]),
            None => (open, open, open, open, volume, 1),
        }
    }

    /// Sorts the records by time (stable: records of one time keep their read order), when
    /// they are not already.
    fn sort_by_time(&mut self) {
        if self.t.is_sorted() {
            return;
        }
        let mut idx: Vec<usize> = (0..self.t.len()).collect();
        idx.sort_by_key(|&i| self.t[i]);
        fn pick<T: Copy>(v: &mut Vec<T>, idx: &[usize]) {
            *v = idx.iter().map(|&i| v[i]).collect();
        }
        pick(&mut self.t, &idx);
        pick(&mut self.open, &idx);
        pick(&mut self.volume, &idx);
        if let Some(c) = &mut self.candle {
            pick(&mut c.high, &idx);
            pick(&mut c.low, &idx);
            pick(&mut c.close, &idx);
            pick(&mut c.count, &idx);
        }
    }

    fn shrink_to_fit(&mut self) {
        self.t.shrink_to_fit();
        self.open.shrink_to_fit();
        self.volume.shrink_to_fit();
        if let Some(c) = &mut self.candle {
            c.high.shrink_to_fit();
            c.low.shrink_to_fit();
            c.close.shrink_to_fit();
            c.count.shrink_to_fit();
        }
    }
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

/// The filter of the selected records inside one file of `source`: chain id, range, tokens and
/// pool (the chain and the interval are the file's partition).
fn record_filter(source: SeriesSource, selection: &SeriesSelection) -> Expr {
    let mut keep = lit(true);
    if let SeriesSource::PriceHistory { chain_id } = source {
        keep = col("chain_id").eq(lit(chain_id));
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
    keep
}

/// The lake's scan of `source`, filtered by chain, tokens, pool, range and (if given) interval.
pub(crate) fn filtered(
    lake: &Lake,
    source: SeriesSource,
    selection: &SeriesSelection,
    interval: Option<i64>,
) -> Result<LazyFrame> {
    let mut keep = col("chain").eq(lit(source.chain().to_string()));
    if let Some(i) = interval {
        keep = keep.and(col("interval").eq(lit(i)));
    }
    keep = keep.and(record_filter(source, selection));
    Ok(lake.scan(source.dataset())?.filter(keep))
}

/// One token's records as they are read, with the pools they come from.
struct Reading {
    series: TokenSeries,
    pools: BTreeSet<String>,
}

/// The tokens' records as they are read: each token's [`Reading`] and, once a token has
/// records of more than one pool (`refused`: the read will be refused), only pools are
/// gathered.
#[derive(Default)]
struct Readings {
    /// Position of each token's reading in `readings`.
    index: BTreeMap<String, usize>,
    readings: Vec<Reading>,
    refused: bool,
}

impl Readings {
    /// The position of `token`'s reading, added (with candle columns if `candle`) when new.
    fn index(&mut self, token: &str, candle: bool) -> usize {
        if let Some(&k) = self.index.get(token) {
            return k;
        }
        let k = self.readings.len();
        self.readings.push(Reading {
            series: TokenSeries {
                token: token.to_owned(),
                candle: candle.then(CandleColumns::default),
                ..TokenSeries::default()
            },
            pools: BTreeSet::new(),
        });
        self.index.insert(token.to_owned(), k);
        k
    }

    /// The readings in token order.
    fn into_sorted(self) -> Vec<Reading> {
        let mut slots: Vec<Option<Reading>> = self.readings.into_iter().map(Some).collect();
        self.index
            .into_values()
            .filter_map(|k| slots[k].take())
            .collect()
    }
}

/// The selected records at `interval`, by token (a candle without a token is keyed by its
/// pool). A token with records of more than one pool is refused, naming them: their volumes
/// would be counted twice.
///
/// The committed files of the source's chain and interval whose time span meets the range are
/// read one at a time, in path order (so by date), each file's records appended to their
/// token's; a token's records are then sorted by time (stably, and only when they are not
/// already). Memory is the selected records' times, prices and volumes (and, for candles,
/// their high, low, close and count), plus one file's selected rows at a time.
pub(crate) fn read_series(
    lake: &Lake,
    source: SeriesSource,
    selection: &SeriesSelection,
    interval: i64,
) -> Result<Vec<TokenSeries>> {
    let what = format!("reading the {}", source.dataset());
    let dataset = source.dataset();
    // Every committed file of the dataset is checked against its manifest entry, as a scan of
    // the dataset checks them.
    lake.scan_locations(dataset)?;
    let manifest = lake.snapshot()?;
    let (lo, hi) = (
        selection.range.from.map(|t| t.timestamp_micros()),
        selection.range.to.map(|t| t.timestamp_micros()),
    );
    let chain = source.chain();
    let mut files = Vec::new();
    for (path, entry) in committed_files(&manifest, dataset, lo, hi) {
        let partition = Partition::from_file_path(&path)?;
        if partition.chain == chain && partition.interval == Some(interval) {
            files.push((path, entry));
        }
    }
    let (tok, pool) = (source.token_column(), source.pool_column());
    let mut columns = vec![col(tok), col(pool), col("timestamp")];
    match source {
        SeriesSource::Candles => {
            columns.extend(["open", "high", "low", "close", "volume", "count"].map(col))
        }
        SeriesSource::PriceHistory { .. } => columns.extend([
            col("usd_price").alias("open"),
            col("usd_volume").alias("volume"),
        ]),
    }
    let keep = record_filter(source, selection);
    let mut readings = Readings::default();
    for (path, entry) in &files {
        let df = scan_files(lake.base(), dataset, [(path, entry)])?
            .filter(keep.clone())
            .select(columns.clone())
            .collect()
            .map_err(Error::polars(what.clone()))?;
        append_records(&df, source, &mut readings)?;
    }
    let readings = readings.into_sorted();
    if let Some(r) = readings.iter().find(|r| r.pools.len() > 1) {
        let token = &r.series.token;
        let names: Vec<String> = r.pools.iter().map(|p| format!("{p:?}")).collect();
        return Err(Error::InvalidArgument {
            argument: "pool".into(),
            reason: format!(
                "the {} of {token} are stored for more than one pool ({}); select one pool",
                source.dataset(),
                names.join(", ")
            ),
        });
    }
    Ok(readings
        .into_iter()
        .map(|r| {
            let mut s = r.series;
            s.sort_by_time();
            s.shrink_to_fit();
            s
        })
        .collect())
}

/// Appends the records of one file's frame (the columns [`read_series`] selects) to their
/// tokens' readings, and their pools to the tokens' pools.
fn append_records(df: &DataFrame, source: SeriesSource, readings: &mut Readings) -> Result<()> {
    let tokens = str_chunk(df, source.token_column())?;
    let tokens = tokens.downcast_as_array();
    let pools = str_chunk(df, source.pool_column())?;
    let pools = pools.downcast_as_array();
    let t = micros_col(df, "timestamp")?;
    let open = f64_slice(df, "open")?;
    let volume = f64_slice(df, "volume")?;
    let candle = match source {
        SeriesSource::Candles => Some((
            f64_slice(df, "high")?,
            f64_slice(df, "low")?,
            f64_slice(df, "close")?,
            i64_slice(df, "count")?,
        )),
        SeriesSource::PriceHistory { .. } => None,
    };
    // Rows of one token come in runs: the token is looked up once per run.
    let mut current: Option<usize> = None;
    for i in 0..df.height() {
        let (token, pool) = (str_at(tokens, i), str_at(pools, i));
        let key = if token.is_empty() { pool } else { token };
        let k = match current {
            Some(k) if readings.readings[k].series.token == key => k,
            _ => {
                let k = readings.index(key, candle.is_some());
                current = Some(k);
                k
            }
        };
        let reading = &mut readings.readings[k];
        if !reading.pools.contains(pool) {
            reading.pools.insert(pool.to_owned());
            readings.refused |= reading.pools.len() > 1;
        }
        if readings.refused {
            continue;
        }
        let s = &mut reading.series;
        s.t.push(t[i]);
        s.open.push(open[i]);
        s.volume.push(volume[i]);
        if let (Some(c), Some((high, low, close, count))) = (&mut s.candle, &candle) {
            c.high.push(high[i]);
            c.low.push(low[i]);
            c.close.push(close[i]);
            c.count.push(count[i]);
        }
    }
    Ok(())
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
                let (open, high, low, close, volume, count) = s.record(k);
                Ok(PartialBar {
                    // A right-closed bucket `(s, e]` holds the interval by its end.
                    t: match self.spec.closed {
                        Edge::Left => t,
                        Edge::Right => t + i,
                    },
                    open,
                    high,
                    low,
                    close,
                    volume,
                    base: 0.0,
                    buy: 0.0,
                    sell: 0.0,
                    pq: 0.0,
                    q: 0.0,
                    count,
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
