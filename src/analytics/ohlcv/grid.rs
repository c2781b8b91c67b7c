//! Bucket grids: which bucket an instant falls in, and where the next bucket starts.

use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveDateTime, TimeZone as _};
use chrono_tz::Tz;

use super::{BarOptions, Edge};
use crate::{Error, Result};

/// Microseconds per second.
pub(crate) const US: i64 = 1_000_000;
/// Seconds per day.
const DAY: i64 = 86_400;
/// Seconds per week.
const WEEK: i64 = 7 * DAY;
/// Monday 1969-12-29, the anchor of week grids, in seconds from the epoch.
pub(crate) const MONDAY_BEFORE_EPOCH: i64 = -3 * DAY;

/// A grid of buckets over time; instants are microseconds from the epoch.
#[derive(Debug, Clone)]
pub(crate) enum Grid {
    /// Buckets of a fixed width anchored at `anchor`.
    Fixed { width: i64, anchor: i64 },
    /// Buckets of `days` local calendar days in `tz`, starting `offset` after local midnight.
    Calendar {
        days: i64,
        tz: Tz,
        offset: Duration,
        anchor_day: i64,
    },
}

impl Grid {
    /// The grid of `options` (validated).
    pub(crate) fn of(options: &BarOptions) -> Result<Grid> {
        let w = options.width_seconds;
        if w <= 0 {
            return Err(Error::InvalidArgument {
                argument: "interval".into(),
                reason: format!("{w} s: the width must be a positive number of seconds"),
            });
        }
        let default_anchor = if w % WEEK == 0 {
            MONDAY_BEFORE_EPOCH
        } else {
            0
        };
        match &options.time_zone {
            None => Ok(Grid::Fixed {
                width: w * US,
                anchor: (default_anchor + options.offset_seconds) * US,
            }),
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
                Ok(Grid::Calendar {
                    days: w / DAY,
                    tz,
                    offset: Duration::seconds(options.offset_seconds),
                    anchor_day: default_anchor / DAY,
                })
            }
        }
    }

    /// Start of the left-closed bucket `[start, next(start))` holding `t`.
    #[inline]
    pub(crate) fn left_start(&self, t: i64) -> i64 {
        match self {
            Grid::Fixed { width, anchor } => (t - anchor).div_euclid(*width) * width + anchor,
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
    pub(crate) fn start(&self, t: i64, closed: Edge) -> i64 {
        match closed {
            Edge::Left => self.left_start(t),
            // `(s, next(s)]` holds t exactly when `[s, next(s))` holds t − 1 µs.
            Edge::Right => self.left_start(t - 1),
        }
    }

    /// Start of the bucket after the one starting at `start`.
    #[inline]
    pub(crate) fn next(&self, start: i64) -> i64 {
        match self {
            Grid::Fixed { width, .. } => start + width,
            Grid::Calendar {
                days, tz, offset, ..
            } => calendar_next(start, *days, tz, *offset),
        }
    }
}

// The calendar grid's steps stay out of line, so the fixed grid's arithmetic inlines into the
// kernels' loops.

#[inline(never)]
fn calendar_left_start(t: i64, days: i64, tz: &Tz, offset: Duration, anchor_day: i64) -> i64 {
    let local = utc_micros(t).with_timezone(tz).naive_local() - offset;
    let day = local
        .date()
        .signed_duration_since(NaiveDate::default())
        .num_days();
    let start_day = (day - anchor_day).div_euclid(days) * days + anchor_day;
    local_start(tz, start_day, offset)
}

#[inline(never)]
fn calendar_next(start: i64, days: i64, tz: &Tz, offset: Duration) -> i64 {
    let local = utc_micros(start).with_timezone(tz).naive_local() - offset;
    let day = local
        .date()
        .signed_duration_since(NaiveDate::default())
        .num_days();
    local_start(tz, day + days, offset)
}

fn utc_micros(t: i64) -> DateTime<chrono::Utc> {
    DateTime::from_timestamp_micros(t).unwrap_or_default()
}

/// The UTC instant (µs) of local midnight + `offset` on day `day` (days from 1970-01-01) in
/// `tz`: the earlier instant when the local time repeats, the first existing instant after
/// it when a clock change skips it.
fn local_start(tz: &Tz, day: i64, offset: Duration) -> i64 {
    let date = NaiveDate::default() + Duration::days(day);
    let mut local: NaiveDateTime = date.and_time(chrono::NaiveTime::MIN) + offset;
    for _ in 0..48 {
        match tz.from_local_datetime(&local) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => return t.timestamp_micros(),
            LocalResult::None => local += Duration::minutes(30),
        }
    }
    local.and_utc().timestamp_micros()
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

    #[test]
    fn a_day_whose_midnight_is_skipped_starts_at_the_first_local_instant() {
        // America/Santiago skips 2024-09-08 00:00 → 01:00 (UTC−4 to UTC−3): that day starts at
        // 01:00 local = 04:00 UTC and lasts 23 hours.
        let grid = Grid::of(&BarOptions {
            time_zone: Some("America/Santiago".into()),
            ..BarOptions::with_width(86_400)
        })
        .unwrap();
        let noon = utc(2024, 9, 8, 16);
        let start = grid.left_start(noon);
        assert_eq!(start, utc(2024, 9, 8, 4));
        assert_eq!(grid.next(start), utc(2024, 9, 9, 3));
        // Right-closed: local midnight itself belongs to the day before.
        let next = grid.next(start);
        assert_eq!(grid.start(next, Edge::Right), start);
        assert_eq!(grid.start(next, Edge::Left), next);
    }

    #[test]
    fn fixed_grids_align_to_the_epoch_and_weeks_to_monday() {
        let g = Grid::of(&BarOptions::with_width(3_600)).unwrap();
        assert_eq!(g.left_start(utc(2024, 1, 3, 5) + 1), utc(2024, 1, 3, 5));
        assert_eq!(g.left_start(-1), -3_600 * US);
        let w = Grid::of(&BarOptions::with_width(7 * 86_400)).unwrap();
        // 2024-01-07 is a Sunday; its week began Monday 2024-01-01.
        assert_eq!(w.left_start(utc(2024, 1, 7, 23)), utc(2024, 1, 1, 0));
    }
}
