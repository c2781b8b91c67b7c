//! OHLCV bars: time bars from events, coarser bars from finer bars, time bars from the stored
//! candles and price history ([`series_bars`], in `series.rs`; `docs/series.md`), and tick,
//! volume and dollar bars.
//!
//! # Time bars
//!
//! Buckets are half-open `[start, start + width)` on a grid anchored at the Unix epoch in UTC
//! (so widths that divide a day align to midnight); widths that are whole weeks are anchored
//! at Monday 1969-12-29, so weeks start on Monday. [`BarOptions::offset_seconds`] moves the
//! grid's origin. With [`BarOptions::time_zone`] (widths of whole days only), buckets are
//! local calendar days of that IANA zone, starting at local midnight plus the offset: such a
//! bucket lasts 23 or 25 hours across a clock change. Sub-day buckets always stay UTC.
//!
//! **Limits.** A width is 1 to [`MAX_WIDTH_SECONDS`] seconds (100,000 years): in microseconds
//! it fits in 64 bits, and the bucket of any instant of years 0 to 9999 starts and ends within
//! chrono's dates (years −262143 to +262142), so every label can be written. Any offset is
//! accepted: the grid repeats every width, so only the offset's remainder modulo the width
//! moves it (an offset of a width plus 30 s is an offset of 30 s). A bucket that would still
//! start or end outside chrono's dates (a wide bar of an event near their ends) is refused
//! with [`Error::InvalidArgument`] naming the interval; no time wraps or is clamped.
//!
//! - `closed = Left` puts an event at `t` in the bucket `[s, e)` that holds it, `Right` in
//!   `(s, e]`; `label = Left` labels the bar `s`, `Right` labels it `e`.
//! - open / close are the prices of the first and last event in event order
//!   `(block_time, block_slot, id)`, whatever order the files hold the rows in; high / low the
//!   maximum and minimum; `count` the number of events.
//! - `volume` is USD, `base_volume` the token amount, `buy_volume` / `sell_volume` the USD
//!   volume of buys and sells; `vwap = sum_pq / sum_q` with `sum_pq = Σ price × amount` and
//!   `sum_q = Σ amount` kept as columns so bars compose.
//! - Empty buckets between a token's first and last bar are skipped ([`Fill::Skip`], the
//!   default), emitted with null prices ([`Fill::Null`]) or with every price equal to the
//!   previous close ([`Fill::ForwardFill`]); filled bars have zero volumes, `count == 0` and a
//!   null `vwap`. A token whose gaps would take more than [`MAX_FILLED_BARS`] filled bars is
//!   refused (`--interval 1 --fill null` over events years apart would otherwise build
//!   billions of rows).
//! - `incomplete` flags a bar whose bucket reaches the end of the data: its last instant is at
//!   or after [`BarOptions::data_end`] (by default the range's `to`, or the instant after the
//!   latest event read, whichever is earlier).
//!
//! # Missing data
//!
//! A range the lake never fetched is not a quiet market. [`BarOptions::unfetched`] names such
//! ranges per token (`lake.query()` and `dexlake ohlcv` take them from the lake's recorded
//! sync coverage, `crate::coverage`): a bucket that meets one gives **no row**, even when the
//! lake holds some of its events (from another stream, such as one wallet's), and no fill
//! policy fills across one: the empty buckets between two bars are filled only when no such
//! range lies between them. So a missing bar is an absent row next to which nothing was
//! filled, and the coverage carried with the bars names the ranges.
//!
//! [`resample`] builds coarser bars from finer ones: it ignores filled bars (`count == 0`), so
//! `resample(bars(1m), 5m)` equals `bars(5m)` bar for bar: prices, counts and labels exactly,
//! and the sums up to the rounding of adding partial sums (a relative 1e-12 in the tests).
//!
//! # Tick, volume and dollar bars
//!
//! [`event_bars`] closes a bar after every `N` events ([`EventRule::Ticks`]), or as soon as its
//! base volume ([`EventRule::BaseVolume`]) or USD volume ([`EventRule::UsdVolume`]) reaches
//! the threshold. **Threshold rule:** the event that makes the running total reach or cross
//! the threshold belongs whole to the bar it completes (events are never split), and the next
//! bar starts from zero (the excess is not carried over). A bar is labelled with the time of
//! its first event; the last bar, if its threshold was not reached, is flagged `incomplete`.
//!
//! # Output
//!
//! A polars `DataFrame` with the columns [`BAR_COLUMNS`] (preceded by `token_address` for
//! [`Selection::Tokens`], [`Selection::Pool`] and [`Selection::AllTokens`]), sorted by token
//! then time. A token without events gives no rows; it is not an error.

mod grid;
mod kernel;
mod live;
mod series;

use chrono::{DateTime, Utc};
use polars::prelude::*;
use rayon::prelude::*;

pub use kernel::BarColumns;
pub use live::{BarRule, LiveBars, LiveUpdate};
pub use series::{SeriesSelection, SeriesSource, choose_interval, series_bars, stored_intervals};
pub(crate) use series::{TokenSeries, filtered, read_series};

use super::events::{
    EventInput, EventSource, Selection, TimeRange, TokenEvents, load_events_in_parts,
};
use crate::lake::Lake;
use crate::{Error, Result};
use grid::Grid;
use kernel::{BarOut, CountBars, PartialBar, TimeSpec};

/// The widest time bar, seconds: 100,000 years of 365.2425 days, 36,524,250 days (a whole
/// number of weeks). See the module documentation for why.
pub const MAX_WIDTH_SECONDS: i64 = 36_524_250 * 86_400;

/// The most filled bars one token's bars may hold (10 million, 116 days of 1-second bars);
/// past it the bars are refused with [`Error::InvalidArgument`] naming `fill`.
pub const MAX_FILLED_BARS: u64 = 10_000_000;

/// Names of the bar columns, in order.
pub const BAR_COLUMNS: [&str; 14] = [
    "timestamp",
    "open",
    "high",
    "low",
    "close",
    "volume",
    "base_volume",
    "buy_volume",
    "sell_volume",
    "sum_pq",
    "sum_q",
    "incomplete",
    "count",
    "vwap",
];

/// An edge of a bucket: which one is closed (`BarOptions::closed`) and which one labels the bar
/// (`BarOptions::label`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Edge {
    /// The start.
    #[default]
    Left,
    /// The end.
    Right,
}

impl Edge {
    /// `left` or `right`, as every door names an edge; a refusal names `argument`.
    pub fn parse(s: &str, argument: &str) -> Result<Edge> {
        match s {
            "left" => Ok(Edge::Left),
            "right" => Ok(Edge::Right),
            other => Err(Error::InvalidArgument {
                argument: argument.into(),
                reason: format!("{other:?}: expected \"left\" or \"right\""),
            }),
        }
    }
}

/// What to emit for an empty bucket between two bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fill {
    /// Nothing.
    #[default]
    Skip,
    /// A bar with null prices and zero volumes.
    Null,
    /// A bar whose prices are all the previous close, with zero volumes.
    ForwardFill,
}

impl std::str::FromStr for Fill {
    type Err = Error;

    /// `skip`, `null` or `ffill`, as every door names a fill.
    fn from_str(s: &str) -> Result<Fill> {
        match s {
            "skip" => Ok(Fill::Skip),
            "null" => Ok(Fill::Null),
            "ffill" => Ok(Fill::ForwardFill),
            other => Err(Error::InvalidArgument {
                argument: "fill".into(),
                reason: format!("{other:?}: expected \"skip\", \"null\" or \"ffill\""),
            }),
        }
    }
}

/// When an event-driven bar closes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EventRule {
    /// After this many events.
    Ticks(u64),
    /// When the bar's base (token) volume reaches this amount.
    BaseVolume(f64),
    /// When the bar's USD volume reaches this amount.
    UsdVolume(f64),
}

impl EventRule {
    /// Checks the threshold: a positive count of events, or a finite positive amount; the
    /// error names the rule (`ticks`, `base volume`, `usd volume`).
    pub fn validate(&self) -> Result<()> {
        let (argument, problem) = match *self {
            EventRule::Ticks(0) => ("ticks", Some("must be a positive number of events")),
            EventRule::Ticks(_) => ("ticks", None),
            EventRule::BaseVolume(v) => ("base volume", amount_problem(v)),
            EventRule::UsdVolume(v) => ("usd volume", amount_problem(v)),
        };
        match problem {
            None => Ok(()),
            Some(problem) => Err(Error::InvalidArgument {
                argument: argument.into(),
                reason: format!("{}: the threshold {problem}", self.threshold()),
            }),
        }
    }

    /// The threshold as written.
    fn threshold(&self) -> String {
        match self {
            EventRule::Ticks(n) => n.to_string(),
            EventRule::BaseVolume(v) | EventRule::UsdVolume(v) => format!("{v:?}"),
        }
    }
}

/// What is wrong with a volume threshold, if anything.
fn amount_problem(v: f64) -> Option<&'static str> {
    if !v.is_finite() {
        Some("must be a finite amount")
    } else if v <= 0.0 {
        Some("must be positive")
    } else {
        None
    }
}

/// Options of time bars.
#[derive(Debug, Clone, PartialEq)]
pub struct BarOptions {
    /// Width of a bucket, seconds: 1 to [`MAX_WIDTH_SECONDS`] (with a time zone, a whole
    /// number of days).
    pub width_seconds: i64,
    /// Shift of the grid's origin from its default anchor, seconds; any value, of which only
    /// the remainder modulo the width matters.
    pub offset_seconds: i64,
    /// Which side of a bucket is closed.
    pub closed: Edge,
    /// Which side of a bucket labels its bar.
    pub label: Edge,
    /// What to emit for empty buckets.
    pub fill: Fill,
    /// IANA time zone of calendar-day buckets (widths of whole days only).
    pub time_zone: Option<String>,
    /// No data is known at or after this instant; bars whose bucket reaches it are flagged
    /// `incomplete`. Default: see the module documentation.
    pub data_end: Option<DateTime<Utc>>,
    /// Time ranges the lake never fetched, per token: a bucket that meets one gives no bar
    /// and empty buckets are never filled across one (see "Missing data" in the module
    /// documentation). Empty by default; `lake.query()` and the CLI fill it from the lake's
    /// recorded coverage.
    pub unfetched: Unfetched,
}

/// Time ranges the lake never fetched, per token, in microseconds from the epoch, half-open
/// `[from, to)`: where a token's bars are missing rather than empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unfetched {
    by_token: std::collections::BTreeMap<String, Vec<(i64, i64)>>,
}

impl Unfetched {
    /// No range missing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `[from, to)` (µs) as never fetched for `token`; an empty range is ignored.
    pub fn insert(&mut self, token: &str, from: i64, to: i64) {
        if from < to {
            let ranges = self.by_token.entry(token.to_owned()).or_default();
            ranges.push((from, to));
            ranges.sort_unstable();
        }
    }

    /// The ranges of `token` never fetched, in order.
    pub fn of(&self, token: &str) -> &[(i64, i64)] {
        self.by_token.get(token).map_or(&[], Vec::as_slice)
    }

    /// Whether no range is missing.
    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }

    /// Every token's ranges never fetched, by token address.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[(i64, i64)])> {
        self.by_token
            .iter()
            .map(|(t, r)| (t.as_str(), r.as_slice()))
    }
}

impl Default for BarOptions {
    fn default() -> Self {
        BarOptions {
            width_seconds: 60,
            offset_seconds: 0,
            closed: Edge::Left,
            label: Edge::Left,
            fill: Fill::Skip,
            time_zone: None,
            data_end: None,
            unfetched: Unfetched::default(),
        }
    }
}

impl BarOptions {
    /// Options of bars `width_seconds` wide, the rest default.
    pub fn with_width(width_seconds: i64) -> Self {
        BarOptions {
            width_seconds,
            ..BarOptions::default()
        }
    }

    fn spec(&self, default_end: i64) -> Result<TimeSpec> {
        Ok(TimeSpec {
            grid: Grid::of(self)?,
            closed: self.closed,
            label: self.label,
            fill: self.fill,
            data_end: self.data_end.map_or(default_end, |t| t.timestamp_micros()),
        })
    }
}

/// The start (µs) of the part holding each instant of `times` when time bars of `options`
/// are split by time into parts of `split_seconds`: runs of whole buckets of the bars' own
/// grid, so no bucket straddles two parts and the bars of each part's events are the whole's
/// bars of that part. `Bars::split` in the query decides which bars may be split (buckets
/// closed on the left in UTC, `split_seconds` a positive multiple of the width); a grid that
/// cannot be coarsened is refused naming `split_seconds`.
pub(crate) fn part_starts(
    options: &BarOptions,
    split_seconds: i64,
    times: &[i64],
) -> Result<Vec<i64>> {
    let grid = Grid::of(options)?;
    let width = options.width_seconds;
    let parts = (split_seconds % width == 0)
        .then(|| grid.coarsened(split_seconds / width))
        .flatten()
        .ok_or_else(|| Error::InvalidArgument {
            argument: "split_seconds".into(),
            reason: "give a positive multiple of interval".into(),
        })?;
    times
        .iter()
        .map(|&t| parts.left_start(t).ok_or_else(|| parts.out_of_range(t)))
        .collect()
}

fn utc_type() -> DataType {
    DataType::Datetime(TimeUnit::Microseconds, Some(TimeZone::UTC))
}

/// A float column, null where `null` says (copied only when some value is null).
fn float_column(name: &str, values: Vec<f64>, null: impl Fn(usize) -> bool) -> Column {
    let n = values.len();
    if (0..n).any(&null) {
        let it = values
            .into_iter()
            .enumerate()
            .map(|(i, v)| (!null(i)).then_some(v));
        Float64Chunked::from_iter_options(name.into(), it).into_column()
    } else {
        Float64Chunked::from_vec(name.into(), values).into_column()
    }
}

/// The bars of one or many tokens as a frame with [`BAR_COLUMNS`], preceded by
/// `token_address` when `tokens` is given (each name with its number of bars, in order).
pub fn bars_frame(bars: BarColumns, tokens: Option<Vec<(String, usize)>>) -> Result<DataFrame> {
    let n = bars.len();
    let vwap: Vec<f64> = bars
        .sum_pq
        .iter()
        .zip(&bars.sum_q)
        .map(|(pq, q)| pq / q)
        .collect();
    let no_vwap = |i: usize| bars.count[i] == 0 || bars.sum_q[i] == 0.0;
    let vwap = float_column("vwap", vwap, no_vwap);
    let nulls = &bars.null_prices;
    let mut cols: Vec<Column> = Vec::with_capacity(15);
    if let Some(t) = tokens {
        // Each name is stored once; the bars' cells are views of it (a gather of 16-byte
        // views, not a copy of the text per bar).
        let names = t.iter().map(|(name, _)| name.as_str());
        let distinct = StringChunked::from_iter_values("token_address".into(), names);
        let at: Vec<IdxSize> = (0..t.len() as IdxSize)
            .zip(&t)
            .flat_map(|(i, (_, k))| std::iter::repeat_n(i, *k))
            .collect();
        let column = distinct
            .take(&IdxCa::from_vec(PlSmallStr::EMPTY, at))
            .map_err(Error::polars("building bars"))?;
        cols.push(column.into_column());
    }
    let ts = Int64Chunked::from_vec("timestamp".into(), bars.timestamp)
        .into_column()
        .cast(&utc_type())
        .map_err(Error::polars("building bars"))?;
    let plain = |name: &str, v: Vec<f64>| Float64Chunked::from_vec(name.into(), v).into_column();
    cols.extend([
        ts,
        float_column("open", bars.open, |i| nulls[i]),
        float_column("high", bars.high, |i| nulls[i]),
        float_column("low", bars.low, |i| nulls[i]),
        float_column("close", bars.close, |i| nulls[i]),
        plain("volume", bars.volume),
        plain("base_volume", bars.base_volume),
        plain("buy_volume", bars.buy_volume),
        plain("sell_volume", bars.sell_volume),
        plain("sum_pq", bars.sum_pq),
        plain("sum_q", bars.sum_q),
        BooleanChunked::from_slice("incomplete".into(), &bars.incomplete).into_column(),
        Int64Chunked::from_vec("count".into(), bars.count).into_column(),
        vwap,
    ]);
    DataFrame::new(n, cols).map_err(Error::polars("building bars"))
}

/// A bar kernel over one part of the input (a token's events, or a token's run of finer bars):
/// closes the part's bars, in order, into any [`BarOut`]. Generic rather than a closure, so the
/// counting pass of [`bars_of_parts`] compiles to the kernel's bucket logic alone.
trait PartBars<P>: Sync {
    fn bars<B: BarOut>(&self, part: &P, out: &mut B) -> Result<()>;
}

/// Time bars of a token's events, none in the ranges the lake never fetched.
struct TimeBarsOf<'a>(&'a TimeSpec, &'a Unfetched);

impl<T: std::borrow::Borrow<TokenEvents>> PartBars<T> for TimeBarsOf<'_> {
    fn bars<B: BarOut>(&self, t: &T, out: &mut B) -> Result<()> {
        let t = t.borrow();
        kernel::event_time_bars(&t.events, self.0, self.1.of(&t.token), out)
    }
}

/// Tick, volume or dollar bars of a token's events.
struct EventBarsOf(EventRule);

impl<T: std::borrow::Borrow<TokenEvents>> PartBars<T> for EventBarsOf {
    fn bars<B: BarOut>(&self, t: &T, out: &mut B) -> Result<()> {
        kernel::event_bars(&t.borrow().events, self.0, out)
    }
}

/// The bars of many parts side by side, written straight into columns of their final size: a
/// first pass counts each part's bars, a second writes them into the part's share of the
/// columns. No part's bars are grown, copied or concatenated, and the columns' memory is
/// touched once. Returns the columns, in the parts' order, and each part's number of bars.
/// Owned parts are dropped as soon as their bars are written. A part the kernel refuses (a
/// bucket beyond the instants a bar may have) fails the whole, in the counting pass.
fn bars_of_parts<P: Send + Sync>(
    parts: Vec<P>,
    kernel: &impl PartBars<P>,
) -> Result<(BarColumns, Vec<usize>)> {
    let lens: Vec<usize> = parts
        .par_iter()
        .map(|p| {
            let mut n = CountBars::default();
            kernel.bars(p, &mut n)?;
            Ok(n.0)
        })
        .collect::<Result<_>>()?;
    let mut all = BarColumns::zeroed(lens.iter().sum());
    let exact = parts
        .into_par_iter()
        .zip(all.slots(&lens))
        .map(|(p, mut slots)| {
            kernel.bars(&p, &mut slots)?;
            Ok(slots.exact())
        })
        .collect::<Result<Vec<bool>>>()?;
    if exact.contains(&false) {
        return Err(Error::polars("building bars")(PolarsError::ComputeError(
            "a part's bars differ between counting and writing".into(),
        )));
    }
    Ok((all, lens))
}

/// Bars of each token in parallel, in token order.
fn per_token<T>(tokens: Vec<T>, long: bool, kernel: &impl PartBars<T>) -> Result<DataFrame>
where
    T: std::borrow::Borrow<TokenEvents> + Send + Sync,
{
    let names: Vec<String> = tokens.iter().map(|t| t.borrow().token.clone()).collect();
    let (all, lens) = bars_of_parts(tokens, kernel)?;
    bars_frame(all, long.then(|| names.into_iter().zip(lens).collect()))
}

/// Whether a selection gives a long frame with a `token_address` column.
fn is_long(selection: &Selection) -> bool {
    !matches!(selection, Selection::Token(_))
}

/// The default end of the data: the range's `to` or the instant after the latest event,
/// whichever is earlier.
fn default_end(tokens: &[TokenEvents], range: TimeRange) -> i64 {
    end_of(
        tokens
            .iter()
            .filter_map(|t| t.events.time.last().copied())
            .max(),
        range,
    )
}

/// [`default_end`] of events whose latest time is `latest` (µs).
fn end_of(latest: Option<i64>, range: TimeRange) -> i64 {
    let latest = latest.map_or(i64::MIN, |t| t.saturating_add(1));
    match range.to {
        Some(to) => latest.min(to.timestamp_micros()),
        None => latest,
    }
}

/// Time bars of already loaded events (see the module documentation).
pub fn bars_of_events(
    tokens: &[TokenEvents],
    long: bool,
    range: TimeRange,
    options: &BarOptions,
) -> Result<DataFrame> {
    let spec = options.spec(default_end(tokens, range))?;
    per_token(
        tokens.iter().collect(),
        long,
        &TimeBarsOf(&spec, &options.unfetched),
    )
}

/// Time bars of the selected events of the lake in `range`.
pub fn bars(
    lake: &Lake,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
    options: &BarOptions,
) -> Result<DataFrame> {
    bars_from(EventInput::Lake(lake), source, selection, range, options)
}

/// Time bars of the selected events in `range` of `input`, the lake or a frame in memory.
pub fn bars_from(
    input: EventInput<'_>,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
    options: &BarOptions,
) -> Result<DataFrame> {
    // Fails on bad options before reading anything.
    Grid::of(options)?;
    let tokens = input.load(source, selection, range)?;
    let spec = options.spec(default_end(&tokens, range))?;
    per_token(
        tokens,
        is_long(selection),
        &TimeBarsOf(&spec, &options.unfetched),
    )
}

/// Time bars of the selected events of the lake in `range`, handed to `sink` in batches of
/// `tokens_per_batch` tokens (in token order) instead of one frame: each batch has the columns
/// and order of [`bars`], and a token's events are freed as soon as its bars are made. The
/// events are read in parts of at most `events_at_once` ([`load_events_in_parts`]), so only
/// one part's events and one batch of bars are in memory at once, however large the lake. For
/// writing large results to a file. A selection without events calls `sink` no time.
#[allow(clippy::too_many_arguments)]
pub fn bars_in_batches(
    lake: &Lake,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
    options: &BarOptions,
    tokens_per_batch: usize,
    events_at_once: usize,
    mut sink: impl FnMut(DataFrame) -> Result<()>,
) -> Result<()> {
    Grid::of(options)?;
    let mut parts = load_events_in_parts(lake, source, selection, range, events_at_once)?;
    // Every part is read before the first is handed over, so the data's end is known.
    let spec = options.spec(end_of(parts.latest_time(), range))?;
    let long = is_long(selection);
    let make =
        |batch: Vec<TokenEvents>| per_token(batch, long, &TimeBarsOf(&spec, &options.unfetched));
    let mut part = Vec::new().into_iter();
    // The next batch of tokens: within a part, the next part once it is done.
    let mut next_batch = || -> Result<Vec<TokenEvents>> {
        loop {
            let batch: Vec<TokenEvents> = part.by_ref().take(tokens_per_batch.max(1)).collect();
            if !batch.is_empty() {
                return Ok(batch);
            }
            match parts.next_part()? {
                Some(tokens) => part = tokens.into_iter(),
                None => return Ok(batch),
            }
        }
    };
    // The bars of a batch are built on another thread while `sink` takes the batch before,
    // so building and writing overlap; batches still reach `sink` in order.
    let mut ready: Option<DataFrame> = None;
    loop {
        let batch = next_batch()?;
        if batch.is_empty() {
            return ready.map_or(Ok(()), sink);
        }
        let mut batch = Some(batch);
        let overlapped = std::thread::scope(|scope| {
            let (todo, make) = (&mut batch, &make);
            let building = std::thread::Builder::new()
                .name("dexlake-bars".into())
                .spawn_scoped(scope, move || todo.take().map(make));
            let building = building.ok()?;
            let sunk = ready.take().map_or(Ok(()), &mut sink);
            let next = building
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            Some((next, sunk))
        });
        let (next, sunk) = match overlapped {
            Some((Some(next), sunk)) => (next, sunk),
            // No thread could be started: one after the other on this one.
            _ => {
                let sunk = ready.take().map_or(Ok(()), &mut sink);
                (make(batch.take().unwrap_or_default()), sunk)
            }
        };
        sunk?;
        ready = Some(next?);
    }
}

/// Tick, volume or dollar bars of already loaded events.
pub fn event_bars_of_events(
    tokens: &[TokenEvents],
    long: bool,
    rule: EventRule,
) -> Result<DataFrame> {
    rule.validate()?;
    per_token(tokens.iter().collect(), long, &EventBarsOf(rule))
}

/// Tick, volume or dollar bars of the selected events of the lake in `range`.
pub fn event_bars(
    lake: &Lake,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
    rule: EventRule,
) -> Result<DataFrame> {
    event_bars_from(EventInput::Lake(lake), source, selection, range, rule)
}

/// Tick, volume or dollar bars of the selected events in `range` of `input`, the lake or a
/// frame in memory.
pub fn event_bars_from(
    input: EventInput<'_>,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
    rule: EventRule,
) -> Result<DataFrame> {
    rule.validate()?;
    let tokens = input.load(source, selection, range)?;
    event_bars_of_events(&tokens, is_long(selection), rule)
}

fn col_f64(df: &DataFrame, name: &str) -> Result<Vec<Option<f64>>> {
    Ok(df
        .column(name)
        .and_then(|c| c.f64())
        .map_err(Error::polars("building bars"))?
        .iter()
        .collect())
}

/// Coarser bars from finer bars (a frame with [`BAR_COLUMNS`], with or without
/// `token_address`).
///
/// The finer bars must have been built with the same `closed` side as `options`, labelled on
/// that side, on a grid the coarser grid refines (each finer bucket inside one coarser
/// bucket). Filled bars (`count == 0`) are ignored. A coarser bar is `incomplete` when one of
/// its finer bars is, or when its bucket reaches `options.data_end`.
pub fn resample(bars: &DataFrame, options: &BarOptions) -> Result<DataFrame> {
    let spec = options.spec(i64::MAX)?;
    let has_token = bars.schema().contains("token_address");
    for name in BAR_COLUMNS {
        if !bars.schema().contains(name) {
            return Err(Error::InvalidArgument {
                argument: "bars".into(),
                reason: format!("the frame has no `{name}` column"),
            });
        }
    }
    let ts: Vec<i64> = bars
        .column("timestamp")
        .and_then(|c| c.cast(&utc_type()))
        .and_then(|c| {
            c.datetime()
                .map(|d| d.physical().iter().map(Option::unwrap_or_default).collect())
        })
        .map_err(Error::polars("building bars"))?;
    let tokens: Vec<String> = if has_token {
        bars.column("token_address")
            .and_then(|c| {
                c.str()
                    .map(|s| s.iter().map(|v| v.unwrap_or_default().to_owned()).collect())
            })
            .map_err(Error::polars("building bars"))?
    } else {
        vec![String::new(); bars.height()]
    };
    // The ten number columns after `timestamp`, `open` to `sum_q`, in `BAR_COLUMNS`' order.
    let numbers: [&str; 10] = std::array::from_fn(|i| BAR_COLUMNS[i + 1]);
    let [open, high, low, close, volume, base, buy, sell, pq, q] =
        numbers.map(|n| col_f64(bars, n));
    let (open, high, low, close) = (open?, high?, low?, close?);
    let (volume, base, buy, sell, pq, q) = (volume?, base?, buy?, sell?, pq?, q?);
    let count: Vec<i64> = bars
        .column("count")
        .and_then(|c| {
            c.i64()
                .map(|v| v.iter().map(Option::unwrap_or_default).collect())
        })
        .map_err(Error::polars("building bars"))?;
    let incomplete: Vec<bool> = bars
        .column("incomplete")
        .and_then(|c| {
            c.bool()
                .map(|v| v.iter().map(Option::unwrap_or_default).collect())
        })
        .map_err(Error::polars("building bars"))?;
    let mut order: Vec<usize> = (0..bars.height()).collect();
    order.sort_by(|&a, &b| (&tokens[a], ts[a]).cmp(&(&tokens[b], ts[b])));
    // Runs of one token, in token order.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    for i in 1..=order.len() {
        if i == order.len() || tokens[order[i]] != tokens[order[start]] {
            if i > start {
                runs.push((start, i));
            }
            start = i;
        }
    }
    let piece = |i: usize| PartialBar {
        t: ts[i],
        open: open[i].unwrap_or(f64::NAN),
        high: high[i].unwrap_or(f64::NAN),
        low: low[i].unwrap_or(f64::NAN),
        close: close[i].unwrap_or(f64::NAN),
        volume: volume[i].unwrap_or_default(),
        base: base[i].unwrap_or_default(),
        buy: buy[i].unwrap_or_default(),
        sell: sell[i].unwrap_or_default(),
        pq: pq[i].unwrap_or_default(),
        q: q[i].unwrap_or_default(),
        count: count[i],
        incomplete: incomplete[i],
    };
    /// Time bars of a token's run of finer bars (`order[a..b]`).
    struct FinerBars<'a, F> {
        order: &'a [usize],
        piece: F,
        spec: &'a TimeSpec,
        tokens: &'a [String],
        unfetched: &'a Unfetched,
    }
    impl<F: Fn(usize) -> PartialBar + Sync> PartBars<(usize, usize)> for FinerBars<'_, F> {
        fn bars<B: BarOut>(&self, &(a, b): &(usize, usize), out: &mut B) -> Result<()> {
            let pieces = self.order[a..b].iter().map(|&i| (self.piece)(i));
            let holes = self.unfetched.of(&self.tokens[self.order[a]]);
            kernel::time_bars(pieces, self.spec, holes, out)
        }
    }
    let finer = FinerBars {
        order: &order,
        piece,
        spec: &spec,
        tokens: &tokens,
        unfetched: &options.unfetched,
    };
    let (all, lens) = bars_of_parts(runs.clone(), &finer)?;
    let names = runs
        .iter()
        .zip(lens)
        .map(|(&(a, _), n)| (tokens[order[a]].clone(), n))
        .collect();
    bars_frame(all, has_token.then_some(names))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod live_tests;
