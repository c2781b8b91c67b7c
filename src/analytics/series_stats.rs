//! Price stats of tokens at an instant `now`, from the lake's stored EVM `price_history`
//! (`docs/series.md`, "Price stats from a series").
//!
//! A point at `t` of a series stored at interval `i` holds the last price up to the end of
//! `[t, t + i)` and the USD volume of `[t, t + i)`. For each period `p` of
//! [`PERIODS`](super::stats::PERIODS) that `i` divides:
//! - the latest price is that of the latest point ending at or before `now`
//!   (`t + i <= now`);
//! - the base price is that of the latest point ending at or before `now − p`, else (a token
//!   whose stored history starts later) the first stored point's;
//! - `usd_volume_<p>` is the sum of the volumes of the points lying in `[now − p, now)`, in
//!   time order, and the previous volume that of the points in `[now − 2p, now − p)`;
//! - the price change and the volume change are the events' (`100 × (a / b − 1)`, 0 when `b`
//!   is 0).
//!
//! A period that `i` does not divide (`5m` of an hourly series) has null figures: a point
//! cannot be split. `now` must lie on the series' grid (a multiple of `i` since the epoch);
//! it defaults to the end of the latest stored point's interval of the chain (every token,
//! not only the selected ones). `usd_price` is the latest price, `block_time` the end of the
//! latest point's interval and `block_slot` null (a series carries no block). A token without
//! a point ending by `now` gives no row.

use chrono::{DateTime, Utc};
use polars::prelude::*;
use rayon::prelude::*;

use super::events::TimeRange;
use super::ohlcv::{SeriesSelection, SeriesSource, TokenSeries, filtered, read_series};
use super::stats::{StatsRow, percent_change, stats_frame};
use crate::api::models::PRICE_STATS_PERIOD_SECONDS;
use crate::lake::Lake;
use crate::{Error, Result};

/// One token's stats from its series: the latest price, the end of the latest point's
/// interval (µs), and per period of [`PERIODS`](super::stats::PERIODS) `(price change %, USD volume, volume
/// change %)`, `None` where the interval does not divide the period.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesTokenStats {
    /// Price of the latest point ending by `now`, USD.
    pub usd_price: f64,
    /// End of the latest point's interval, µs.
    pub price_time: i64,
    /// The figures of each period, `None` where the interval does not divide it.
    pub periods: Vec<Option<(f64, f64, f64)>>,
}

/// Σ volume of the points lying in `[lo, hi)` (start at or after `lo`, end at or before
/// `hi`), in time order.
fn volume_within(t: &[i64], volume: &[f64], interval: i64, lo: i64, hi: i64) -> f64 {
    let a = t.partition_point(|&x| x < lo);
    let b = t.partition_point(|&x| x.saturating_add(interval) <= hi);
    volume[a..b.max(a)].iter().fold(0.0, |s, v| s + v)
}

/// Stats of one token's points (`t` sorted starts, µs; `price`, `volume` alike) stored at
/// `interval` µs, at `now` µs; `None` when no point ends by `now`.
pub fn token_series_stats(
    t: &[i64],
    price: &[f64],
    volume: &[f64],
    interval: i64,
    now: i64,
) -> Option<SeriesTokenStats> {
    let ending_by = |instant: i64| t.partition_point(|&x| x.saturating_add(interval) <= instant);
    let last = ending_by(now).checked_sub(1)?;
    let latest = price[last];
    let periods = PRICE_STATS_PERIOD_SECONDS
        .iter()
        .map(|&secs| {
            let p = secs * 1_000_000;
            if p % interval != 0 {
                return None;
            }
            let base = price[ending_by(now - p).saturating_sub(1)];
            let current = volume_within(t, volume, interval, now - p, now);
            let previous = volume_within(t, volume, interval, now - 2 * p, now - p);
            Some((
                percent_change(latest, base),
                current,
                percent_change(current, previous),
            ))
        })
        .collect();
    Some(SeriesTokenStats {
        usd_price: latest,
        price_time: t[last].saturating_add(interval),
        periods,
    })
}

/// The stored interval to compute from (seconds): `series_interval` if given, else the finest
/// interval stored for the selection; `None` when nothing is stored.
fn stats_interval(
    lake: &Lake,
    source: SeriesSource,
    selection: &SeriesSelection,
) -> Result<Option<i64>> {
    match selection.series_interval {
        Some(i) if i <= 0 => Err(Error::InvalidArgument {
            argument: "series interval".into(),
            reason: format!("{i} s: must be a positive number of seconds"),
        }),
        Some(i) => Ok(Some(i)),
        None => Ok(super::ohlcv::stored_intervals(lake, source, selection)?
            .into_iter()
            .find(|&i| i > 0)),
    }
}

/// The end (µs) of the latest stored point's interval of the whole chain at `interval`.
fn latest_point_end(lake: &Lake, source: SeriesSource, interval: i64) -> Result<Option<i64>> {
    let what = format!("reading the {}", source.dataset());
    let df = filtered(lake, source, &SeriesSelection::default(), Some(interval))?
        .select([col("timestamp").cast(DataType::Int64).max()])
        .collect()
        .map_err(Error::polars(what.clone()))?;
    let latest = df
        .column("timestamp")
        .and_then(|c| c.i64().map(|c| c.get(0)))
        .map_err(Error::polars(what))?;
    Ok(latest.map(|t| t.saturating_add(interval.saturating_mul(1_000_000))))
}

/// Price stats of the selected tokens from the stored series `source` (a price history; the
/// module documentation above gives the rule), one row per token with a point ending by
/// `now`, in address order: `token_address`, `usd_price`, `block_slot` (null), `block_time`
/// (the end of the latest point's interval), then for each period of [`PERIODS`](super::stats::PERIODS)
/// `usd_price_change_<p>`, `usd_volume_<p>`, `usd_volume_change_<p>` (null where the interval
/// does not divide the period). The interval is `selection.series_interval`, else the finest
/// stored for the selection; `selection.range` is ignored (stats are taken as of `now`).
/// Refused: candles, a `now` off the series' grid, a non-positive interval.
pub fn series_price_stats(
    lake: &Lake,
    source: SeriesSource,
    selection: &SeriesSelection,
    now: Option<DateTime<Utc>>,
) -> Result<DataFrame> {
    if let SeriesSource::Candles = source {
        return Err(Error::InvalidArgument {
            argument: "source".into(),
            reason: "price stats are computed from swaps, trades or a price history, not from \
                     the candles"
                .into(),
        });
    }
    let unbounded = SeriesSelection {
        range: TimeRange::default(),
        ..selection.clone()
    };
    let Some(interval) = stats_interval(lake, source, &unbounded)? else {
        return stats_frame(Vec::new());
    };
    let step = interval.saturating_mul(1_000_000);
    let now = match now {
        Some(t) => t.timestamp_micros(),
        None => match latest_point_end(lake, source, interval)? {
            Some(t) => t,
            None => return stats_frame(Vec::new()),
        },
    };
    if now.rem_euclid(step) != 0 {
        let at = DateTime::from_timestamp_micros(now)
            .map_or_else(|| format!("{now} µs"), |t| t.to_rfc3339());
        return Err(Error::InvalidArgument {
            argument: "now".into(),
            reason: format!(
                "{at} is not on the grid of the series' interval of {interval} s (its \
                 points cover [t, t + {interval} s) with t a multiple of {interval} s): give a \
                 multiple of {interval} s"
            ),
        });
    }
    // Only the points ending by `now` count.
    let read = SeriesSelection {
        range: TimeRange {
            from: None,
            to: DateTime::from_timestamp_micros(now - step + 1),
        },
        series_interval: Some(interval),
        ..unbounded
    };
    let series: Vec<TokenSeries> = read_series(lake, source, &read, interval)?;
    let rows: Vec<StatsRow> = series
        .par_iter()
        .filter_map(|s| {
            let stats = token_series_stats(&s.t, s.close(), &s.volume, step, now)?;
            Some(StatsRow {
                token: s.token.clone(),
                usd_price: stats.usd_price,
                block_slot: None,
                block_time: stats.price_time,
                periods: stats.periods,
            })
        })
        .collect();
    stats_frame(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000_000;

    #[test]
    fn periods_take_the_points_inside_them_and_the_price_before_them() {
        // Minute points over two hours: price = minute index, volume = 1 each.
        let t: Vec<i64> = (0..120).map(|m| m * MIN).collect();
        let price: Vec<f64> = (0..120).map(|m| m as f64 + 1.0).collect();
        let volume = vec![1.0; 120];
        let now = 120 * MIN;
        let s = token_series_stats(&t, &price, &volume, MIN, now).expect("stats");
        assert_eq!(s.usd_price, 120.0);
        assert_eq!(s.price_time, now);
        // 5m: base is the point ending at now − 5m (minute 114, price 115).
        let (change, v, vc) = s.periods[0].expect("5m");
        assert_eq!(change, 100.0 * (120.0 / 115.0 - 1.0));
        assert_eq!((v, vc), (5.0, 0.0));
        // 1h: base the point ending at minute 60 (minute 59, price 60); previous hour full.
        let (change, v, vc) = s.periods[1].expect("1h");
        assert_eq!(change, 100.0 * (120.0 / 60.0 - 1.0));
        assert_eq!((v, vc), (60.0, 0.0));
        // 6h: the token is younger: its first point is the base; no previous volume.
        let (change, v, vc) = s.periods[2].expect("6h");
        assert_eq!(change, 100.0 * (120.0 / 1.0 - 1.0));
        assert_eq!((v, vc), (120.0, 0.0));
        // A `now` inside the series ignores later points.
        let s = token_series_stats(&t, &price, &volume, MIN, 90 * MIN).expect("stats");
        assert_eq!(s.usd_price, 90.0);
        assert_eq!(s.periods[1].expect("1h").1, 60.0);
        assert_eq!(s.periods[1].expect("1h").2, 100.0 * (60.0 / 30.0 - 1.0));
        // Nothing ends by `now`: no stats.
        assert!(token_series_stats(&t, &price, &volume, MIN, MIN - 1).is_none());
    }

    #[test]
    fn a_period_the_interval_does_not_divide_has_no_figures() {
        let hour = 60 * MIN;
        let t: Vec<i64> = (0..48).map(|h| h * hour).collect();
        let price = vec![2.0; 48];
        let volume = vec![3.0; 48];
        let s = token_series_stats(&t, &price, &volume, hour, 48 * hour).expect("stats");
        assert_eq!(s.periods[0], None, "5m of an hourly series");
        assert_eq!(s.periods[1], Some((0.0, 3.0, 0.0)));
        assert_eq!(s.periods[4], Some((0.0, 72.0, 0.0)));
    }
}
