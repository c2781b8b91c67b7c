//! The one time-range type: a half-open range `[from, to)` of instants whose sides may be open.
//!
//! The analytics select events in a [`TimeRange`], the coverage reports what a request asked
//! for and what is missing of it in [`TimeRange`]s, the sync's recorded states say which ranges
//! were fetched in [`TimeRange`]s, and `dexlake follow` reads them. It sits below every layer
//! (it imports only `error`), so each of them may import it. The sync's covered ranges of
//! candles and price history are stored as whole epoch seconds on a bar grid
//! ([`sync::ranges`](crate::sync::ranges)), the manifest's format; they are read out as
//! [`TimeRange`]s.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::{Error, Result};

/// A half-open time range `[from, to)`; an open side is unbounded (a stream's coverage starts
/// at its first record, whatever time that is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TimeRange {
    /// First instant included; `None`: from the beginning.
    pub from: Option<DateTime<Utc>>,
    /// First instant excluded; `None`: without end.
    pub to: Option<DateTime<Utc>>,
}

impl TimeRange {
    /// The range from `from` (the beginning when `None`) to `to`, excluded.
    pub fn until(from: Option<DateTime<Utc>>, to: DateTime<Utc>) -> TimeRange {
        TimeRange { from, to: Some(to) }
    }

    /// Checks that the range is not empty.
    pub fn validate(&self) -> Result<()> {
        if let (Some(f), Some(t)) = (self.from, self.to)
            && f >= t
        {
            return Err(Error::InvalidArgument {
                argument: "time range".into(),
                reason: format!("`from` {f} is not before `to` {t}: the range is empty"),
            });
        }
        Ok(())
    }

    /// The range in microseconds, open sides as `i64::MIN` / `i64::MAX`.
    pub(crate) fn micros(&self) -> (i64, i64) {
        (
            self.from.map_or(i64::MIN, |t| t.timestamp_micros()),
            self.to.map_or(i64::MAX, |t| t.timestamp_micros()),
        )
    }

    /// The range of microseconds `[from, to)`, `i64::MIN` / `i64::MAX` as open sides.
    pub(crate) fn of_micros(from: i64, to: i64) -> TimeRange {
        let at = |us: i64| DateTime::from_timestamp_micros(us);
        TimeRange {
            from: (from != i64::MIN).then(|| at(from)).flatten(),
            to: (to != i64::MAX).then(|| at(to)).flatten(),
        }
    }

    /// Whether the range holds no instant (both sides closed, `from` not before `to`).
    pub fn is_empty(&self) -> bool {
        matches!((self.from, self.to), (Some(f), Some(t)) if f >= t)
    }

    /// Sorted, disjoint ranges holding what `ranges` hold (ranges that meet are joined; empty
    /// ones are left out).
    pub(crate) fn merged(ranges: impl IntoIterator<Item = TimeRange>) -> Vec<TimeRange> {
        let mut v: Vec<TimeRange> = ranges.into_iter().filter(|r| !r.is_empty()).collect();
        // An open start sorts first.
        v.sort_by_key(|r| r.from);
        let mut out: Vec<TimeRange> = Vec::with_capacity(v.len());
        for r in v {
            match out.last_mut() {
                Some(last) if last.to.is_none_or(|end| r.from.is_none_or(|f| f <= end)) => {
                    last.to = last.to.zip(r.to).map(|(a, b)| a.max(b));
                }
                _ => out.push(r),
            }
        }
        out
    }
}

impl fmt::Display for TimeRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
        write!(
            f,
            "[{}, {})",
            self.from.map_or("start".into(), at),
            self.to.map_or("end".into(), at)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(s, 0).expect("a time")
    }

    #[test]
    fn ranges_merge_when_they_meet_and_an_open_start_comes_first() {
        let merged = TimeRange::merged(vec![
            TimeRange::until(Some(t(50)), t(60)),
            TimeRange::until(None, t(10)),
            TimeRange::until(Some(t(5)), t(20)),
            TimeRange::until(Some(t(30)), t(30)),
        ]);
        assert_eq!(
            merged,
            vec![
                TimeRange::until(None, t(20)),
                TimeRange::until(Some(t(50)), t(60))
            ]
        );
    }

    #[test]
    fn an_empty_range_is_refused_and_open_sides_print_as_words() {
        assert!(TimeRange::until(Some(t(5)), t(5)).validate().is_err());
        assert!(TimeRange::default().validate().is_ok());
        assert_eq!(
            TimeRange::until(None, t(0)).to_string(),
            "[start, 1970-01-01T00:00:00Z)"
        );
    }
}
