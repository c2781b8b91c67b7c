//! Data-quality findings on the lake: what `dexlake check` reports.
//!
//! [`check`] reads the lake (never the network) and returns a [`CheckReport`]: for each kind
//! of finding its count and a few examples. A clean lake has no finding. The kinds, each
//! defined exactly in its file (and in `docs/checks.md`):
//!
//! | kind | file | what |
//! |---|---|---|
//! | `gaps` | `gaps.rs` | a stretch with no swap inside a token's fetched ranges, where the swaps on both sides are dense enough that it should have held many |
//! | `price_jumps` | `jumps.rs` | a swap whose price departs from the token's rolling median by more than a robust bound (median absolute deviation, with a floor) |
//! | `candle_mismatches` | `candles.rs` | a bucket where the lake's `candles` (the service's) and the bars computed from the lake's swaps differ, and by how much |
//! | `duplicate_ids`, `moved_ids` | `ids.rs` | a swap or trade id stored on several rows: at one time, or at several times or date partitions |
//! | `split_slots`, `time_backwards` | `slots.rs` | a slot whose rows carry several block times, or whose time is before the previous slot's |
//! | `series_gaps`, `series_jumps` | `series.rs` | points missing inside a stored price history's fetched ranges; a price-history point or candle close departing from its series' rolling median (the jump rule of `jumps.rs`) |
//!
//! Gaps and jumps are found on the token side of the swaps ([`load_events`]), per token in
//! event order, tokens in parallel; the reconciliation runs the crate's own time bars
//! ([`bars_of_events`](crate::analytics::ohlcv::bars_of_events)); ids and slots are grouped
//! by sorting the key columns of `swaps` and `trades`, read row group by row group
//! (`key_rows.rs`), in passes of bounded size. A token's fetched ranges narrow the gaps and the
//! reconciliation to what the lake was meant to hold ([`CheckOptions::fetched`]); without
//! them, a token's swaps are taken to cover its first to its last swap. The stored series'
//! gaps and jumps are found series by series in time order, the gaps inside a price history's
//! fetched ranges ([`CheckOptions::history_fetched`]).
//!
//! The files may import `crate::lake`, `crate::analytics` (events, bars, the column readers)
//! and the crate's errors; nothing else of the crate (not `sync`: fetched ranges come in as
//! arguments).

mod candles;
mod gaps;
mod ids;
mod jumps;
mod key_rows;
mod series;
mod slots;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use polars::prelude::*;
use rayon::prelude::*;

pub use crate::lake::convert::CandleSeries;
pub use candles::{CandleMismatch, FieldDiff, Reconciled};
pub use gaps::{Gap, GapRule};
pub use ids::{DuplicateId, MovedId};
pub use jumps::{JumpRule, PriceJump};
pub use series::{HistoryTarget, SeriesChecked, SeriesGap, SeriesJump};
pub use slots::{SplitSlot, TimeBackwards};

use gaps::find_gaps;
use jumps::find_jumps;

use crate::analytics::events::{EVENTS_AT_ONCE, load_events_in_parts};
use crate::analytics::{EventSource, Selection, TimeRange, TokenEvents, load_events};
use crate::error::number;
use crate::lake::cols::{swap, token};
use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

/// Examples kept of each kind of finding by default.
pub const DEFAULT_EXAMPLES: usize = 5;

/// What to check, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOptions {
    /// Check only these tokens (swaps and trades that involve one of them, candles of them);
    /// every token when `None`.
    pub tokens: Option<Vec<String>>,
    /// The time ranges of each token's swaps that were fetched completely. A token not named
    /// here is taken to cover its first to its last swap.
    pub fetched: BTreeMap<String, Vec<TimeRange>>,
    /// The time ranges of each candle series that were fetched completely. A series not named
    /// here is taken to cover its first to its last candle.
    pub candles_fetched: BTreeMap<CandleSeries, Vec<TimeRange>>,
    /// The time ranges of each price history's syncs (by token or by pool). A series of
    /// neither is taken to cover its first to its last point.
    pub history_fetched: BTreeMap<HistoryTarget, Vec<TimeRange>>,
    /// The gap rule.
    pub gaps: GapRule,
    /// The price-jump rule.
    pub jumps: JumpRule,
    /// Examples kept of each kind of finding.
    pub examples: usize,
    /// Most swap events held in memory at once: a lake with more is read in parts of whole
    /// tokens ([`load_events_in_parts`]), and its ids and slots grouped in passes of at most
    /// as many rows, with the same findings. Default [`EVENTS_AT_ONCE`].
    pub events_at_once: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            tokens: None,
            fetched: BTreeMap::new(),
            candles_fetched: BTreeMap::new(),
            history_fetched: BTreeMap::new(),
            gaps: GapRule::default(),
            jumps: JumpRule::default(),
            examples: DEFAULT_EXAMPLES,
            events_at_once: EVENTS_AT_ONCE,
        }
    }
}

/// A half-open span of time `[start, end)`, microseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TimeSpan {
    start: i64,
    end: i64,
}

impl TimeSpan {
    fn of(range: &TimeRange) -> TimeSpan {
        TimeSpan {
            start: range.from.map_or(i64::MIN, |t| t.timestamp_micros()),
            end: range.to.map_or(i64::MAX, |t| t.timestamp_micros()),
        }
    }

    /// Whether the stretch between two instants `a ≤ b` lies inside.
    fn holds_stretch(&self, a: i64, b: i64) -> bool {
        a >= self.start && b < self.end
    }

    /// Whether the bucket `[start, end)` lies inside.
    fn holds_bucket(&self, start: i64, end: i64) -> bool {
        start >= self.start && end <= self.end
    }
}

/// Microseconds since the epoch as a UTC time (the epoch for an instant chrono cannot hold).
fn utc(micros: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(micros).unwrap_or_default()
}

/// One kind of finding: how many, and the first few.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Finding<T> {
    /// How many were found.
    pub count: u64,
    /// The first of them (at most [`CheckOptions::examples`]), in the order of the kind's
    /// file: by token then time, by id, by slot.
    pub examples: Vec<T>,
}

impl<T> Default for Finding<T> {
    fn default() -> Self {
        Finding {
            count: 0,
            examples: Vec::new(),
        }
    }
}

impl<T> Finding<T> {
    fn add(&mut self, (count, examples): (u64, Vec<T>), keep: usize) {
        self.count += count;
        let room = keep.saturating_sub(self.examples.len());
        self.examples.extend(examples.into_iter().take(room));
    }
}

/// An example of a finding in one line of text, for tables and pages.
pub trait Describe {
    /// The example in one line.
    fn describe(&self) -> String;
}

impl Describe for Gap {
    fn describe(&self) -> String {
        format!(
            "{}: no swap from {} to {} ({:.0} s; about {:.0} expected at {:.0}/h before and {:.0}/h after; ids {} and {})",
            self.token,
            self.from.to_rfc3339(),
            self.to.to_rfc3339(),
            self.seconds,
            self.expected_events,
            self.rate_before_per_hour,
            self.rate_after_per_hour,
            self.id_before,
            self.id_after
        )
    }
}

/// How a price jump's rolling median and deviation read (swaps' and series' alike).
fn jump_terms(median_price: Option<f64>, log_deviation: Option<f64>) -> (String, String) {
    let median =
        median_price.map_or_else(|| "none (no price around)".to_owned(), |m| m.to_string());
    let deviation = log_deviation.map_or_else(
        || "no logarithm".to_owned(),
        |d| format!("ln ratio {d:+.3}"),
    );
    (median, deviation)
}

impl Describe for PriceJump {
    fn describe(&self) -> String {
        let (median, deviation) = jump_terms(self.median_price, self.log_deviation);
        format!(
            "{}: id {} at {} (slot {}) price {} vs rolling median {median} ({deviation}, bound {:.3})",
            self.token,
            self.id,
            self.block_time.to_rfc3339(),
            self.block_slot,
            self.price,
            self.bound
        )
    }
}

impl Describe for CandleMismatch {
    fn describe(&self) -> String {
        let value = |v: Option<f64>| v.map_or_else(|| "none".to_owned(), |v| v.to_string());
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|f| {
                format!(
                    "{} candle {} bars {}",
                    f.field,
                    value(f.candle),
                    value(f.bars)
                )
            })
            .collect();
        let series = match (&self.token, &self.pool) {
            (Some(t), Some(p)) => format!("token {t} pool {p}"),
            (Some(t), None) => format!("token {t}"),
            (None, Some(p)) => format!("pool {p}"),
            (None, None) => "no token or pool".to_owned(),
        };
        format!(
            "{series} {} s at {}: {}",
            self.interval,
            self.timestamp.to_rfc3339(),
            fields.join("; ")
        )
    }
}

/// `price_history chain 1 token T pool P 60 s` or `candles token T 3600 s`.
fn series_name(
    dataset: &str,
    chain_id: Option<i64>,
    token: Option<&str>,
    pool: Option<&str>,
    interval: i64,
) -> String {
    let mut out = dataset.to_owned();
    if let Some(c) = chain_id {
        out.push_str(&format!(" chain {c}"));
    }
    if let Some(t) = token {
        out.push_str(&format!(" token {t}"));
    }
    if let Some(p) = pool {
        out.push_str(&format!(" pool {p}"));
    }
    out.push_str(&format!(" {interval} s"));
    out
}

impl Describe for SeriesGap {
    fn describe(&self) -> String {
        format!(
            "{}: no point from {} to {} ({} missing)",
            series_name(
                self.dataset,
                Some(self.chain_id),
                Some(&self.token),
                Some(&self.pool),
                self.interval
            ),
            self.from.to_rfc3339(),
            self.to.to_rfc3339(),
            self.missing_points
        )
    }
}

impl Describe for SeriesJump {
    fn describe(&self) -> String {
        let (median, deviation) = jump_terms(self.median_price, self.log_deviation);
        format!(
            "{} at {}: price {} vs rolling median {median} ({deviation}, bound {:.3})",
            series_name(
                self.dataset,
                self.chain_id,
                self.token.as_deref(),
                self.pool.as_deref(),
                self.interval
            ),
            self.timestamp.to_rfc3339(),
            self.price,
            self.bound
        )
    }
}

impl Describe for DuplicateId {
    fn describe(&self) -> String {
        let how = if self.differing.is_empty() {
            "identical".to_owned()
        } else {
            format!("differing in {}", self.differing.join(", "))
        };
        format!(
            "{} id {}: {} rows at {} ({how})",
            self.dataset,
            self.id,
            self.copies,
            self.block_time.to_rfc3339()
        )
    }
}

impl Describe for MovedId {
    fn describe(&self) -> String {
        let at: Vec<String> = self
            .block_times
            .iter()
            .zip(&self.dates)
            .map(|(t, d)| format!("{} (date={d})", t.to_rfc3339()))
            .collect();
        format!(
            "{} id {}: {} rows at {}",
            self.dataset,
            self.id,
            self.copies,
            at.join(", ")
        )
    }
}

impl Describe for SplitSlot {
    fn describe(&self) -> String {
        format!(
            "{} slot {}: {} rows from {} to {}",
            self.dataset,
            self.block_slot,
            self.rows,
            self.first_time.to_rfc3339(),
            self.last_time.to_rfc3339()
        )
    }
}

impl Describe for TimeBackwards {
    fn describe(&self) -> String {
        format!(
            "{} slot {} at {} is before slot {} at {}",
            self.dataset,
            self.block_slot,
            self.block_time.to_rfc3339(),
            self.previous_slot,
            self.previous_time.to_rfc3339()
        )
    }
}

/// Every kind of finding.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Findings {
    /// Stretches without swaps inside fetched ranges, between busy neighbours.
    pub gaps: Finding<Gap>,
    /// Swaps whose price departs from the rolling median beyond the bound.
    pub price_jumps: Finding<PriceJump>,
    /// Buckets where the candles and the bars of the swaps differ.
    pub candle_mismatches: Finding<CandleMismatch>,
    /// Ids stored on several rows at one time.
    pub duplicate_ids: Finding<DuplicateId>,
    /// Ids stored at several times or date partitions.
    pub moved_ids: Finding<MovedId>,
    /// Slots whose rows carry several block times.
    pub split_slots: Finding<SplitSlot>,
    /// Slots whose time is before the previous slot's.
    pub time_backwards: Finding<TimeBackwards>,
    /// Points missing inside a stored price history's fetched ranges.
    pub series_gaps: Finding<SeriesGap>,
    /// Records of a stored series whose price departs from the rolling median beyond the
    /// bound.
    pub series_jumps: Finding<SeriesJump>,
}

impl Findings {
    /// Each kind's name and count, in the order of the fields.
    pub fn counts(&self) -> [(&'static str, u64); 9] {
        [
            ("gaps", self.gaps.count),
            ("price_jumps", self.price_jumps.count),
            ("candle_mismatches", self.candle_mismatches.count),
            ("duplicate_ids", self.duplicate_ids.count),
            ("moved_ids", self.moved_ids.count),
            ("split_slots", self.split_slots.count),
            ("time_backwards", self.time_backwards.count),
            ("series_gaps", self.series_gaps.count),
            ("series_jumps", self.series_jumps.count),
        ]
    }

    /// Each kind's name and its examples in one line each, in the order of the fields.
    pub fn described(&self) -> [(&'static str, Vec<String>); 9] {
        fn lines<T: Describe>(f: &Finding<T>) -> Vec<String> {
            f.examples.iter().map(Describe::describe).collect()
        }
        [
            ("gaps", lines(&self.gaps)),
            ("price_jumps", lines(&self.price_jumps)),
            ("candle_mismatches", lines(&self.candle_mismatches)),
            ("duplicate_ids", lines(&self.duplicate_ids)),
            ("moved_ids", lines(&self.moved_ids)),
            ("split_slots", lines(&self.split_slots)),
            ("time_backwards", lines(&self.time_backwards)),
            ("series_gaps", lines(&self.series_gaps)),
            ("series_jumps", lines(&self.series_jumps)),
        ]
    }
}

/// What [`check`] found, and what it looked at.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CheckReport {
    /// The manifest version checked.
    pub version: u64,
    /// Tokens whose swaps were checked for gaps and jumps.
    pub tokens: usize,
    /// Their swaps (token sides).
    pub swaps: u64,
    /// Rows of `swaps` and `trades` checked for ids and slots.
    pub rows: BTreeMap<&'static str, u64>,
    /// What the reconciliation of candles and bars compared.
    pub reconciled: Reconciled,
    /// The stored series checked for gaps and jumps.
    pub series: SeriesChecked,
    /// The findings.
    pub findings: Findings,
}

impl CheckReport {
    /// Findings of every kind together.
    pub fn total(&self) -> u64 {
        self.findings.counts().iter().map(|(_, n)| n).sum()
    }

    /// Whether nothing was found.
    pub fn is_clean(&self) -> bool {
        self.total() == 0
    }
}

impl CheckOptions {
    /// Refuses rules outside their domain, empty token addresses and empty fetched ranges,
    /// naming the argument.
    pub fn validate(&self) -> Result<()> {
        let bad = |argument: &str, reason: String| {
            Err(Error::InvalidArgument {
                argument: argument.into(),
                reason,
            })
        };
        if let Some(tokens) = &self.tokens {
            Selection::Tokens(tokens.clone()).validate()?;
        }
        for ranges in self
            .fetched
            .values()
            .chain(self.candles_fetched.values())
            .chain(self.history_fetched.values())
        {
            for r in ranges {
                r.validate()?;
            }
        }
        let g = &self.gaps;
        for (argument, value) in [
            ("gap expected events", g.min_expected),
            ("gap rate per hour", g.min_rate_per_hour),
            ("gap seconds", g.min_seconds),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return bad(
                    argument,
                    format!("{}: must be finite and not negative", number(value)),
                );
            }
        }
        let j = &self.jumps;
        if j.half_window < 1 {
            return bad(
                "jump window",
                "0: at least one event on each side".to_owned(),
            );
        }
        if !(j.z.is_finite() && j.z > 0.0) {
            return bad(
                "jump z",
                format!("{}: must be finite and positive", number(j.z)),
            );
        }
        if !(j.floor.is_finite() && j.floor >= 0.0) {
            return bad(
                "jump floor",
                format!("{}: must be finite and not negative", number(j.floor)),
            );
        }
        Ok(())
    }
}

/// Checks the lake: see the module documentation.
pub fn check(lake: &Lake, options: &CheckOptions) -> Result<CheckReport> {
    check_with(lake, options, &|_| {})
}

/// [`check`], naming each step to `progress` as it starts (for a progress line on a terminal).
pub fn check_with(
    lake: &Lake,
    options: &CheckOptions,
    progress: &dyn Fn(&str),
) -> Result<CheckReport> {
    options.validate()?;
    let keep = options.examples;
    let version = lake.manifest()?.version;
    let selection = match &options.tokens {
        Some(t) => Selection::Tokens(t.clone()),
        None => Selection::AllTokens,
    };
    // A pool's series is kept until its swaps say which token it prices.
    let wanted: Option<BTreeSet<&str>> = options
        .tokens
        .as_ref()
        .map(|t| t.iter().map(String::as_str).collect());
    let is_wanted = |token: &str| wanted.as_ref().is_none_or(|w| w.contains(token));
    let candles = candles::read_candles(lake, |s| s.token.as_deref().is_none_or(is_wanted))?;
    // Each candle series' comparison, by its place in `candles`: made with the part of the
    // swaps that holds its token, added to the findings in the series' order at the end.
    let mut compared: Vec<Option<SeriesComparison>> = candles.iter().map(|_| None).collect();
    progress("reading the swaps");
    let mut parts = load_events_in_parts(
        lake,
        EventSource::Swaps,
        &selection,
        TimeRange::default(),
        options.events_at_once,
    )?;
    let mut findings = Findings::default();
    let (mut tokens, mut swaps) = (0usize, 0u64);
    while let Some(part) = parts.next_part()? {
        tokens += part.len();
        swaps += part.iter().map(|t| t.events.len() as u64).sum::<u64>();
        progress("looking for gaps and price jumps");
        let per_token: Vec<(Vec<Gap>, Vec<PriceJump>)> = part
            .par_iter()
            .map(|t| {
                let spans = spans_of(options.fetched.get(&t.token))
                    .unwrap_or_else(|| event_span(t).into_iter().collect());
                (
                    find_gaps(&t.token, &t.events, &spans, &options.gaps),
                    find_jumps(&t.token, &t.events, &options.jumps),
                )
            })
            .collect();
        for (gaps, jumps) in per_token {
            findings.gaps.add((gaps.len() as u64, gaps), keep);
            findings.price_jumps.add((jumps.len() as u64, jumps), keep);
        }
        progress("comparing the candles with the bars of the swaps");
        let by_token: BTreeMap<&str, &TokenEvents> =
            part.iter().map(|t| (t.token.as_str(), t)).collect();
        for (i, (series, buckets)) in candles.iter().enumerate() {
            if let (Some(token), None) = (&series.token, &series.pool)
                && let Some(events) = by_token.get(token.as_str())
            {
                compared[i] = Some(compare_series(options, series, buckets, Some(events))?);
            }
        }
    }
    progress("comparing the candles with the bars of the swaps");
    let reconciled = reconcile_rest(
        lake,
        options,
        &candles,
        compared,
        &is_wanted,
        &mut findings.candle_mismatches,
    )?;

    progress("looking for gaps and price jumps in the stored series");
    let (mut series, gaps, jumps) = series::check_histories(
        lake,
        options.tokens.as_deref(),
        &options.history_fetched,
        &options.jumps,
    )?;
    findings.series_gaps.add((gaps.len() as u64, gaps), keep);
    findings.series_jumps.add((jumps.len() as u64, jumps), keep);
    // Checking tokens, the candles of a pool (no token) are left out.
    let judged: Vec<(&CandleSeries, &candles::Buckets)> = candles
        .iter()
        .filter(|(s, _)| wanted.is_none() || s.token.is_some())
        .collect();
    series.candle_series = judged.len();
    series.records += judged.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
    let jumps = series::candle_jumps(&judged, &options.jumps);
    findings.series_jumps.add((jumps.len() as u64, jumps), keep);

    let mut rows = BTreeMap::new();
    for dataset in [Dataset::Swaps, Dataset::Trades] {
        let name = dataset.name();
        progress(&format!(
            "looking for repeated ids and slot times in {name}"
        ));
        let keys = key_rows::KeyRows::of(lake, dataset, options.tokens.as_deref())?;
        // A pass holds at most as many rows as a part may hold events: a row takes 24 bytes
        // (ids) or 16 (slots), half an event's or less.
        let passes = keys
            .committed_rows()
            .div_ceil((options.events_at_once as u64).max(1))
            .max(1);
        let scan = rows_of(lake, dataset, options.tokens.as_deref())?;
        let (repeated, read) = ids::repeated_ids_in_passes(name, &keys, scan, keep, passes)?;
        rows.insert(name, read);
        findings.duplicate_ids.add(repeated.duplicates, keep);
        findings.moved_ids.add(repeated.moved, keep);
        let order = slots::slot_order_in_passes(name, &keys, keep, passes)?;
        findings.split_slots.add(order.split, keep);
        findings.time_backwards.add(order.backwards, keep);
    }

    Ok(CheckReport {
        version,
        tokens,
        swaps,
        rows,
        reconciled,
        series,
        findings,
    })
}

/// The spans of some fetched ranges, sorted; `None` when none were given.
fn spans_of(ranges: Option<&Vec<TimeRange>>) -> Option<Vec<TimeSpan>> {
    let mut spans: Vec<TimeSpan> = ranges?.iter().map(TimeSpan::of).collect();
    spans.sort_by_key(|s| s.start);
    Some(spans)
}

/// A token's own span: its first to its last event, both included.
fn event_span(t: &TokenEvents) -> Option<TimeSpan> {
    Some(TimeSpan {
        start: *t.events.time.first()?,
        end: t.events.time.last()?.saturating_add(1),
    })
}

/// The rows of `dataset` that involve one of `tokens` (all rows without them).
fn rows_of(lake: &Lake, dataset: Dataset, tokens: Option<&[String]>) -> Result<LazyFrame> {
    let scan = lake.scan(dataset)?;
    let Some(tokens) = tokens else {
        return Ok(scan);
    };
    let set = || lit(Series::new("tokens".into(), tokens)).implode(false);
    Ok(match dataset {
        Dataset::Swaps => scan.filter(
            col(swap::TOKEN_IN)
                .is_in(set(), false)
                .or(col(swap::TOKEN_OUT).is_in(set(), false)),
        ),
        _ => scan.filter(col(token::TOKEN).is_in(set(), false)),
    })
}

/// One candle series compared with the bars of its swaps: `None` when the series does not
/// count (a pool of another token), else whether its swaps were found, the buckets compared
/// and the mismatches.
type SeriesComparison = Option<(bool, u64, Vec<CandleMismatch>)>;

/// Compares one candle series with the bars of `events` (its token's swaps, when found).
fn compare_series(
    options: &CheckOptions,
    series: &CandleSeries,
    buckets: &candles::Buckets,
    events: Option<&TokenEvents>,
) -> Result<SeriesComparison> {
    let Some(events) = events else {
        return Ok(Some((false, 0, Vec::new())));
    };
    let candle_spans = spans_of(options.candles_fetched.get(series))
        .unwrap_or_else(|| buckets.span(series.interval).into_iter().collect());
    let swap_spans = spans_of(options.fetched.get(&events.token));
    let (compared, mismatches) = candles::reconcile(
        series,
        buckets,
        events,
        &candle_spans,
        swap_spans.as_deref(),
    )?;
    Ok(Some((true, compared, mismatches)))
}

/// Reconciles every candle series of the checked tokens with the bars of their swaps: those
/// `compared` already (with the part of the swaps that held their token) and the rest, whose
/// swaps are read here (a pool's, or a token's that the parts did not hold); then adds them
/// all to `out` in the series' order.
fn reconcile_rest(
    lake: &Lake,
    options: &CheckOptions,
    candles: &BTreeMap<CandleSeries, candles::Buckets>,
    mut compared: Vec<Option<SeriesComparison>>,
    is_wanted: &dyn Fn(&str) -> bool,
    out: &mut Finding<CandleMismatch>,
) -> Result<Reconciled> {
    let wanted = options.tokens.is_some();
    let mut reconciled = Reconciled::default();
    for ((series, buckets), done) in candles.iter().zip(compared.iter_mut()) {
        let comparison = match done.take() {
            Some(c) => c,
            None => {
                let own;
                let events: Option<&TokenEvents> = match (&series.token, &series.pool) {
                    (Some(token), None) => {
                        own = load_events(
                            lake,
                            EventSource::Swaps,
                            &Selection::Token(token.clone()),
                            TimeRange::default(),
                        )?;
                        own.first()
                    }
                    (token, Some(pool)) => {
                        own = load_events(
                            lake,
                            EventSource::Swaps,
                            &Selection::Pool(pool.clone()),
                            TimeRange::default(),
                        )?;
                        match token {
                            Some(token) => own.iter().find(|t| &t.token == token),
                            // A pool prices one token; a pool whose swaps price several is not
                            // compared.
                            None if own.len() == 1 => own.first().filter(|t| is_wanted(&t.token)),
                            None => None,
                        }
                    }
                    (None, None) => None,
                };
                if series.token.is_none() && events.is_none() && wanted {
                    // A pool of another token.
                    None
                } else {
                    compare_series(options, series, buckets, events)?
                }
            }
        };
        let Some((found, buckets_compared, mismatches)) = comparison else {
            continue;
        };
        reconciled.series += 1;
        if !found {
            continue;
        }
        if buckets_compared > 0 {
            reconciled.series_compared += 1;
        }
        reconciled.buckets_compared += buckets_compared;
        out.add((mismatches.len() as u64, mismatches), options.examples);
    }
    Ok(reconciled)
}
