//! Bucket grids: which bucket an instant falls in, and where the next bucket starts.
//!
//! Every step is checked: an instant whose bucket would start or end outside
//! [`FIRST_INSTANT`, `LAST_INSTANT`] (chrono's dates, years −262143 to +262142) gives `None`,
//! never a wrapped or clamped time.

use chrono::TimeZone as _;
use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveDateTime, Offset as _, Utc};
use chrono_tz::Tz;

use super::{BarOptions, Edge, MAX_WIDTH_SECONDS};
use crate::{Error, Result};

/// Microseconds per second.
pub(crate) const US: i64 = 1_000_000;
/// Seconds per day.
const DAY: i64 = 86_400;
/// Seconds per week.
const WEEK: i64 = 7 * DAY;
/// Monday 1969-12-29, the anchor of week grids, in seconds from the epoch.
pub(crate) const MONDAY_BEFORE_EPOCH: i64 = -3 * DAY;
/// The earliest instant a bar may start, end or be labelled with, µs from the epoch: the first
/// instant chrono (and so every output format) can write.
pub(crate) const FIRST_INSTANT: i64 = DateTime::<Utc>::MIN_UTC.timestamp_micros();
/// The latest instant a bar may start, end or be labelled with, µs from the epoch.
pub(crate) const LAST_INSTANT: i64 = DateTime::<Utc>::MAX_UTC.timestamp_micros();

/// `t` if a bar may have it as a bound or label.
#[inline]
fn in_range(t: i64) -> Option<i64> {
    (FIRST_INSTANT..=LAST_INSTANT).contains(&t).then_some(t)
}

/// A grid of buckets over time; instants are microseconds from the epoch.
#[derive(Debug, Clone)]
pub(crate) enum Grid {
    /// Buckets of `width` µs starting at `anchor` + k · `width` (`0 ≤ anchor < width`).
    Fixed { width: i64, anchor: i64 },
    /// Buckets of `days` local calendar days in `tz`, starting `offset` (less than a day)
    /// after local midnight of the days `anchor_day` + k · `days` (`0 ≤ anchor_day < days`,
    /// days counted from 1970-01-01).
    Calendar {
        days: i64,
        tz: Tz,
        offset: Duration,
        anchor_day: i64,
    },
}

impl Grid {
    /// The grid of `options`: a width of 1 to [`MAX_WIDTH_SECONDS`] seconds, any offset (only
    /// its remainder modulo the width moves the grid), a time zone only for whole days.
    pub(crate) fn of(options: &BarOptions) -> Result<Grid> {
        let w = options.width_seconds;
        if w <= 0 {
            return Err(Error::InvalidArgument {
                argument: "interval".into(),
                reason: format!("{w} s: the width must be a positive number of seconds"),
            });
        }
        if w > MAX_WIDTH_SECONDS {
            return Err(Error::InvalidArgument {
                argument: "interval".into(),
                reason: format!(
                    "{w} s: the width must be at most {MAX_WIDTH_SECONDS} s (100,000 years)"
                ),
            });
        }
        let default_anchor = if w % WEEK == 0 {
            MONDAY_BEFORE_EPOCH
        } else {
            0
        };
        match &options.time_zone {
            None => {
                // The grid repeats every width: the origin is its remainder, which no sum
                // of huge offsets can overflow.
                let phase = (default_anchor.rem_euclid(w) + options.offset_seconds.rem_euclid(w))
                    .rem_euclid(w);
                Ok(Grid::Fixed {
                    width: w * US,
                    anchor: phase * US,
                })
            }
            Some(name) => {
                if w % DAY != 0 {
                    return Err(Error::InvalidArgument {
                        argument: "time zone".into(),
                        reason: format!(
                            "{name} applies only to widths of whole days; {w} s buckets stay in UTC"
                        ),
                    });
                }
                let tz: Tz = name.parse().map_err(|_| Error::InvalidArgument {
                    argument: "time zone".into(),
                    reason: format!("{name:?} is not an IANA time zone name"),
                })?;
                let days = w / DAY;
                // Local midnight + offset: whole days of the offset move the anchor day (naive
                // local arithmetic is exact), the rest is the time of day buckets start at.
                let offset = options.offset_seconds;
                let anchor_day = ((default_anchor / DAY).rem_euclid(days)
                    + offset.div_euclid(DAY).rem_euclid(days))
                .rem_euclid(days);
                Ok(Grid::Calendar {
                    days,
                    tz,
                    offset: Duration::seconds(offset.rem_euclid(DAY)),
                    anchor_day,
                })
            }
        }
    }

    /// The error of an instant whose bucket on this grid does not fit in the instants a bar
    /// may have.
    pub(crate) fn out_of_range(&self, t: i64) -> Error {
        let at = DateTime::from_timestamp_micros(t)
            .map_or_else(|| format!("{t} µs"), |d| d.to_rfc3339());
        let width = match self {
            Grid::Fixed { width, .. } => format!("{} s", width / US),
            Grid::Calendar { days, tz, .. } => format!("{days} days of {tz}"),
        };
        let bound = |t: i64| {
            DateTime::from_timestamp_micros(t)
                .map(|d| d.to_rfc3339())
                .unwrap_or_default()
        };
        Error::InvalidArgument {
            argument: "interval".into(),
            reason: format!(
                "the bucket of {width} holding {at} starts or ends outside the instants a bar \
                 can have ({} to {}); give a narrower width",
                bound(FIRST_INSTANT),
                bound(LAST_INSTANT)
            ),
        }
    }

    /// Start of the left-closed bucket `[start, next(start))` holding `t`; `None` when it
    /// does not fit.
    #[inline]
    pub(crate) fn left_start(&self, t: i64) -> Option<i64> {
        match self {
            Grid::Fixed { width, anchor } => {
                let k = t.checked_sub(*anchor)?.div_euclid(*width);
                in_range(k.checked_mul(*width)?.checked_add(*anchor)?)
            }
            Grid::Calendar {
                days,
                tz,
                offset,
                anchor_day,
            } => calendar_left_start(t, *days, tz, *offset, *anchor_day),
        }
    }

    /// Start of the bucket that holds `t` when buckets are closed on `closed`.
    #[inline]
    pub(crate) fn start(&self, t: i64, closed: Edge) -> Option<i64> {
        match closed {
            Edge::Left => self.left_start(t),
            // `(s, next(s)]` holds t exactly when `[s, next(s))` holds t − 1 µs.
            Edge::Right => self.left_start(t.checked_sub(1)?),
        }
    }

    /// The grid whose buckets are runs of `factor` of this grid's buckets, starting where
    /// one of them starts (a fixed grid and `factor` ≥ 1 only; `None` otherwise or when the
    /// coarser width does not fit): parts of time that never cut a bucket.
    pub(crate) fn coarsened(&self, factor: i64) -> Option<Grid> {
        match self {
            Grid::Fixed { width, anchor } if factor >= 1 => Some(Grid::Fixed {
                width: width.checked_mul(factor)?,
                anchor: *anchor,
            }),
            _ => None,
        }
    }

    /// Start of the bucket after the one starting at `start`; `None` when it does not fit.
    #[inline]
    pub(crate) fn next(&self, start: i64) -> Option<i64> {
        match self {
            Grid::Fixed { width, .. } => in_range(start.checked_add(*width)?),
            Grid::Calendar {
                days, tz, offset, ..
            } => calendar_next(start, *days, tz, *offset),
        }
    }
}

// The calendar grid's steps stay out of line, so the fixed grid's arithmetic inlines into the
// kernels' loops.

#[inline(never)]
fn calendar_left_start(
    t: i64,
    days: i64,
    tz: &Tz,
    offset: Duration,
    anchor_day: i64,
) -> Option<i64> {
    let day = local_day(t, tz, offset)?;
    let start_day = (day - anchor_day).div_euclid(days) * days + anchor_day;
    local_start(tz, start_day, offset)
}

#[inline(never)]
fn calendar_next(start: i64, days: i64, tz: &Tz, offset: Duration) -> Option<i64> {
    local_start(tz, local_day(start, tz, offset)?.checked_add(days)?, offset)
}

/// The local day (days from 1970-01-01) of the bucket day holding `t`: the date of `t`'s
/// local time in `tz`, less `offset`.
fn local_day(t: i64, tz: &Tz, offset: Duration) -> Option<i64> {
    let utc = DateTime::from_timestamp_micros(t)?.naive_utc();
    let local = utc
        .checked_add_offset(tz.offset_from_utc_datetime(&utc).fix())?
        .checked_sub_signed(offset)?;
    Some(
        local
            .date()
            .signed_duration_since(NaiveDate::default())
            .num_days(),
    )
}

/// The UTC instant (µs) of local midnight + `offset` on day `day` (days from 1970-01-01) in
/// `tz`: the earlier instant when the local time repeats, the first existing instant after
/// it when a clock change skips it. `None` outside the instants a bar may have.
fn local_start(tz: &Tz, day: i64, offset: Duration) -> Option<i64> {
    let date = NaiveDate::default().checked_add_signed(Duration::try_days(day)?)?;
    let mut local: NaiveDateTime = date
        .and_time(chrono::NaiveTime::MIN)
        .checked_add_signed(offset)?;
    // A clock change skips at most a day (Pacific/Apia, 2011-12-30).
    // The offset is looked up apart from the subtraction, so a local time whose instant is
    // beyond chrono's dates is `None`, not taken for a skipped one.
    for _ in 0..=48 {
        match tz.offset_from_local_datetime(&local) {
            LocalResult::Single(o) | LocalResult::Ambiguous(o, _) => {
                let utc = local.checked_sub_offset(o.fix())?;
                return in_range(utc.and_utc().timestamp_micros());
            }
            LocalResult::None => local = local.checked_add_signed(Duration::minutes(30))?,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;

    use super::*;

    fn utc(y: i32, m: u32, d: u32, h: u32) -> i64 {
        chrono::Utc
            .with_ymd_and_hms(y, m, d, h, 0, 0)
            .unwrap()
            .timestamp_micros()
    }

    fn grid(width: i64, offset: i64, tz: Option<&str>) -> Result<Grid> {
        Grid::of(&BarOptions {
            offset_seconds: offset,
            time_zone: tz.map(str::to_owned),
            ..BarOptions::with_width(width)
        })
    }

    #[test]
    fn a_day_whose_midnight_is_skipped_starts_at_the_first_local_instant() {
        // America/Santiago skips 2024-09-08 00:00 → 01:00 (UTC−4 to UTC−3): that day starts at
        // 01:00 local = 04:00 UTC and lasts 23 hours.
        let grid = grid(86_400, 0, Some("America/Santiago")).unwrap();
        let noon = utc(2024, 9, 8, 16);
        let start = grid.left_start(noon).unwrap();
        assert_eq!(start, utc(2024, 9, 8, 4));
        let next = grid.next(start).unwrap();
        assert_eq!(next, utc(2024, 9, 9, 3));
        // Right-closed: local midnight itself belongs to the day before.
        assert_eq!(grid.start(next, Edge::Right), Some(start));
        assert_eq!(grid.start(next, Edge::Left), Some(next));
    }

    #[test]
    fn a_day_that_a_clock_change_skips_whole_ends_the_day_before() {
        // Pacific/Apia skipped 2011-12-30 entirely: 29 December ends at 31 December's
        // midnight (UTC+14), 10:00 UTC on the 30th.
        let grid = grid(86_400, 0, Some("Pacific/Apia")).unwrap();
        let start = grid.left_start(utc(2011, 12, 29, 12)).unwrap();
        assert_eq!(grid.next(start), Some(utc(2011, 12, 30, 10)));
    }

    #[test]
    fn fixed_grids_align_to_the_epoch_and_weeks_to_monday() {
        let g = grid(3_600, 0, None).unwrap();
        assert_eq!(
            g.left_start(utc(2024, 1, 3, 5) + 1),
            Some(utc(2024, 1, 3, 5))
        );
        assert_eq!(g.left_start(-1), Some(-3_600 * US));
        let w = grid(7 * 86_400, 0, None).unwrap();
        // 2024-01-07 is a Sunday; its week began Monday 2024-01-01.
        assert_eq!(w.left_start(utc(2024, 1, 7, 23)), Some(utc(2024, 1, 1, 0)));
    }

    #[test]
    fn widths_beyond_the_widest_are_refused_naming_the_interval() {
        for w in [
            MAX_WIDTH_SECONDS + 1,
            9_223_372_036_854,
            4_611_686_018_427_387_904,
            i64::MAX,
        ] {
            for tz in [None, Some("UTC")] {
                let e = grid(w, 0, tz).unwrap_err().to_string();
                assert!(
                    e.starts_with("invalid interval: ") && e.contains("at most"),
                    "{e}"
                );
            }
        }
        // The widest is accepted, and its bucket of today fits, in UTC and in a zone.
        for tz in [None, Some("Europe/Paris")] {
            let g = grid(MAX_WIDTH_SECONDS, 0, tz).unwrap();
            let now = utc(2024, 5, 1, 0);
            let start = g.left_start(now).unwrap();
            assert!(start <= now && g.next(start).unwrap() > now, "{tz:?}");
        }
    }

    #[test]
    fn only_the_remainder_of_an_offset_moves_the_grid() {
        let t = utc(2024, 3, 31, 5) + 12_345;
        for (width, tz) in [
            (3_600, None),
            (7 * 86_400, None),
            (86_400, Some("Europe/Paris")),
        ] {
            for offset in [10_000_000_000_000, i64::MAX, i64::MIN, -1, 1 << 40] {
                let rest = offset.rem_euclid(width);
                let (a, b) = (
                    grid(width, offset, tz).unwrap(),
                    grid(width, rest, tz).unwrap(),
                );
                assert_eq!(a.left_start(t), b.left_start(t), "{width} {offset} {tz:?}");
                let s = a.left_start(t).unwrap();
                assert!(s <= t && a.next(s).unwrap() > t);
            }
        }
        // 10^13 s = 2,777,777,777 h + 2,800 s.
        let g = grid(3_600, 10_000_000_000_000, None).unwrap();
        assert_eq!(
            g.left_start(utc(2024, 1, 1, 1)),
            Some(utc(2024, 1, 1, 0) + 2_800 * US)
        );
    }

    #[test]
    fn buckets_beyond_chrono_dates_are_none_not_wrapped() {
        let day = grid(86_400, 0, None).unwrap();
        assert_eq!(day.left_start(i64::MIN), None);
        assert_eq!(day.start(i64::MIN, Edge::Right), None);
        assert_eq!(day.left_start(i64::MAX), None);
        assert_eq!(day.next(LAST_INSTANT), None);
        let last_day = day.left_start(LAST_INSTANT).unwrap();
        assert_eq!(day.next(last_day), None);
        let paris = grid(86_400, 0, Some("Europe/Paris")).unwrap();
        for t in [FIRST_INSTANT, LAST_INSTANT, i64::MIN, i64::MAX] {
            if let Some(s) = paris.left_start(t) {
                assert!(s <= t);
            }
        }
        // The widest bucket of an instant near the last date ends after it.
        let widest = grid(MAX_WIDTH_SECONDS, 0, None).unwrap();
        let late = LAST_INSTANT - 1_000 * 86_400 * US;
        assert_eq!(widest.left_start(late).and_then(|s| widest.next(s)), None);
        assert!(
            widest
                .out_of_range(late)
                .to_string()
                .starts_with("invalid interval: ")
        );
    }
}
