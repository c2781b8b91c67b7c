//! Price stats of tokens at an instant `now`, from their events in the lake.
//!
//! For each period `p` of [`PERIODS`] (`5m`, `1h`, `6h`, `12h`, `1d`, `7d`, `30d`):
//! - `usd_price_change_<p>` = `100 × (latest / base − 1)`, where `latest` is the price of the
//!   last event at or before `now` and `base` the price of the last event at or before
//!   `now − p` (the token's first price when it is younger than `p`); 0 when `base` is 0.
//! - `usd_volume_<p>` = the USD volume of the events in `(now − p, now]`.
//! - `usd_volume_change_<p>` = `100 × (usd_volume_<p> / previous − 1)` with `previous` the USD
//!   volume in `(now − 2p, now − p]`; 0 when `previous` is 0.
//!
//! `usd_price`, `block_slot` and `block_time` are those of the latest event at or before
//! `now`. Events after `now` are ignored. Volumes are summed in event order. These are the
//! service's definitions, so on the same events the numbers equal its get-price-stats.
//!
//! `now` defaults to the latest `block_time` of the dataset in the lake (every token, not only
//! the selected ones). A token without events at or before `now` gives no row.

use chrono::{DateTime, Utc};
use polars::prelude::*;
use rayon::prelude::*;

use super::events::{
    EVENTS_AT_ONCE, EventSource, Events, Selection, TimeRange, latest_event_time,
    load_events_in_parts,
};
use crate::api::models::{PRICE_STATS_PERIOD_SECONDS, PriceChanges};
use crate::lake::Lake;
use crate::{Error, Result};

/// The stats periods, in output order.
pub const PERIODS: &[&str] = PriceChanges::PERIODS;

/// How far back price stats read: their longest period (30 days), in seconds.
pub const WINDOW_SECONDS: i64 = PRICE_STATS_PERIOD_SECONDS[PRICE_STATS_PERIOD_SECONDS.len() - 1];

/// Options of [`price_stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriceStatsOptions {
    /// The instant of the stats; default: the latest event of the dataset in the lake.
    pub now: Option<DateTime<Utc>>,
    /// Where the events come from.
    pub source: EventSource,
    /// Most events held in memory at once: a lake with more is read in parts of whole tokens
    /// ([`load_events_in_parts`]), with the same rows. Default [`EVENTS_AT_ONCE`].
    pub events_at_once: usize,
}

impl Default for PriceStatsOptions {
    fn default() -> Self {
        PriceStatsOptions {
            now: None,
            source: EventSource::default(),
            events_at_once: EVENTS_AT_ONCE,
        }
    }
}

/// One token's stats.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenStats {
    /// Latest price, USD.
    pub usd_price: f64,
    /// Slot of the latest event.
    pub block_slot: i64,
    /// Time of the latest event, µs.
    pub block_time: i64,
    /// `(price change %, USD volume, volume change %)` per period of [`PERIODS`].
    pub periods: Vec<(f64, f64, f64)>,
}

/// `100 × (now / before − 1)`, 0 when `before` is 0.
pub(crate) fn percent_change(now: f64, before: f64) -> f64 {
    if before == 0.0 {
        0.0
    } else {
        100.0 * (now / before - 1.0)
    }
}

/// Σ USD of the events with time in `(lo, hi]`, in event order.
fn usd_between(e: &Events, end: usize, lo: i64, hi: i64) -> f64 {
    let t = &e.time[..end];
    let a = t.partition_point(|&x| x <= lo);
    let b = t.partition_point(|&x| x <= hi);
    e.usd[a..b.max(a)].iter().fold(0.0, |s, v| s + v)
}

/// Stats of one token's events (in event order) at `now` (µs), if it has an event by then.
pub fn token_stats(e: &Events, now: i64) -> Option<TokenStats> {
    let end = e.time.partition_point(|&x| x <= now);
    let last = end.checked_sub(1)?;
    let latest = e.price[last];
    let periods = PRICE_STATS_PERIOD_SECONDS
        .iter()
        .map(|&secs| {
            let p = secs * 1_000_000;
            let at = e.time[..end].partition_point(|&x| x <= now - p);
            let base = e.price[at.saturating_sub(1)];
            let volume = usd_between(e, end, now - p, now);
            let previous = usd_between(e, end, now - 2 * p, now - p);
            (
                percent_change(latest, base),
                volume,
                percent_change(volume, previous),
            )
        })
        .collect();
    Some(TokenStats {
        usd_price: latest,
        block_slot: e.slot[last],
        block_time: e.time[last],
        periods,
    })
}

/// Price stats of the selected tokens (one row per token with events, in address order):
/// `token_address`, `usd_price`, `block_slot`, `block_time`, then for each period of
/// [`PERIODS`] `usd_price_change_<p>`, `usd_volume_<p>`, `usd_volume_change_<p>`.
pub fn price_stats(
    lake: &Lake,
    selection: &Selection,
    options: PriceStatsOptions,
) -> Result<DataFrame> {
    let now = match options.now {
        Some(t) => t,
        None => match latest_event_time(lake, options.source)? {
            Some(t) => t,
            None => return stats_frame(Vec::new()),
        },
    };
    // Events after `now` do not count; reading up to it is enough.
    let range = TimeRange {
        from: None,
        to: Some(now + chrono::Duration::microseconds(1)),
    };
    let mut parts = load_events_in_parts(
        lake,
        options.source,
        selection,
        range,
        options.events_at_once,
    )?;
    let now_us = now.timestamp_micros();
    let mut rows: Vec<StatsRow> = Vec::new();
    while let Some(tokens) = parts.next_part()? {
        rows.par_extend(tokens.into_par_iter().filter_map(|t| {
            let stats = token_stats(&t.events, now_us)?;
            Some(StatsRow {
                token: t.token,
                usd_price: stats.usd_price,
                block_slot: Some(stats.block_slot),
                block_time: stats.block_time,
                periods: stats.periods.into_iter().map(Some).collect(),
            })
        }));
    }
    stats_frame(rows)
}

/// One row of the price stats: the event version fills every field; the series version
/// (`series_stats`) has no slot and leaves the periods its interval does not divide empty.
pub(crate) struct StatsRow {
    /// The token.
    pub token: String,
    /// Latest price, USD.
    pub usd_price: f64,
    /// Slot of the latest event; `None` for a series.
    pub block_slot: Option<i64>,
    /// Time of the latest price, µs.
    pub block_time: i64,
    /// `(price change %, USD volume, volume change %)` per period of [`PERIODS`]; `None` for a
    /// period not computed.
    pub periods: Vec<Option<(f64, f64, f64)>>,
}

/// The price stats frame of `rows`: `token_address`, `usd_price`, `block_slot`, `block_time`,
/// then for each period of [`PERIODS`] `usd_price_change_<p>`, `usd_volume_<p>`,
/// `usd_volume_change_<p>`.
pub(crate) fn stats_frame(rows: Vec<StatsRow>) -> Result<DataFrame> {
    let err = |source| Error::Polars {
        context: "building price stats".into(),
        source,
    };
    let n = rows.len();
    let mut cols = vec![
        Column::new(
            "token_address".into(),
            rows.iter().map(|r| r.token.as_str()).collect::<Vec<_>>(),
        ),
        Column::new(
            "usd_price".into(),
            rows.iter().map(|r| r.usd_price).collect::<Vec<_>>(),
        ),
        Column::new(
            "block_slot".into(),
            rows.iter().map(|r| r.block_slot).collect::<Vec<_>>(),
        )
        .cast(&DataType::Int64)
        .map_err(err)?,
        Column::new(
            "block_time".into(),
            rows.iter().map(|r| r.block_time).collect::<Vec<_>>(),
        )
        .cast(&DataType::Datetime(
            TimeUnit::Microseconds,
            Some(TimeZone::UTC),
        ))
        .map_err(err)?,
    ];
    for (k, p) in PERIODS.iter().enumerate() {
        let pick = |f: fn(&(f64, f64, f64)) -> f64| {
            rows.iter()
                .map(|r| r.periods[k].as_ref().map(f))
                .collect::<Vec<Option<f64>>>()
        };
        cols.push(Column::new(
            format!("usd_price_change_{p}").into(),
            pick(|v| v.0),
        ));
        cols.push(Column::new(format!("usd_volume_{p}").into(), pick(|v| v.1)));
        cols.push(Column::new(
            format!("usd_volume_change_{p}").into(),
            pick(|v| v.2),
        ));
    }
    DataFrame::new(n, cols).map_err(err)
}
