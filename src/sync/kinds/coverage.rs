//! What candles and price history share: the time ranges a target covers (empty answers
//! included), the part of a wanted range still missing, and how far an answer reaches.

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::sync::config::SyncConfig;
use crate::sync::ranges::{Range, RangeSet};

/// Time ranges a time-range dataset covers for one target (empty answers included).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct CoverState {
    pub(crate) covered: RangeSet,
    /// Time of the newest point received, in epoch seconds.
    #[serde(default)]
    pub(crate) newest_point: Option<i64>,
    /// When a range was last recorded as covered (absent in states of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) synced_at: Option<DateTime<Utc>>,
}

impl CoverState {
    /// Records `range` as covered, now.
    pub(crate) fn cover(&mut self, range: Range) {
        self.covered.insert(range);
        self.synced_at = Some(Utc::now());
    }

    /// Adds what `other` records: its covered ranges, and its newest point and sync time when
    /// later than these.
    pub(crate) fn absorb(&mut self, other: &CoverState) {
        for &range in other.covered.ranges() {
            self.covered.insert(range);
        }
        self.newest_point = self.newest_point.max(other.newest_point);
        self.synced_at = self.synced_at.max(other.synced_at);
    }
}

/// A time as epoch seconds, the unit of the ranges.
pub(crate) fn epoch_seconds(t: DateTime<Utc>) -> i64 {
    t.timestamp()
}

/// Epoch seconds as a time (the epoch itself when out of range).
pub(crate) fn from_epoch_seconds(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).single().unwrap_or_default()
}

/// The requested range of a time-range job, aligned to its bar grid. Open ranges end now.
pub(crate) fn wanted(interval: i64, from: DateTime<Utc>, to: Option<DateTime<Utc>>) -> Range {
    let end = to.unwrap_or_else(Utc::now);
    Range::new(epoch_seconds(from), epoch_seconds(end)).align_out(interval)
}

/// Missing sub-ranges of one target, split into requests of at most `bars_per_request` bars.
/// The most recent window is always missing.
pub(crate) fn missing_for(
    config: &SyncConfig,
    covered: &RangeSet,
    interval: i64,
    want: Range,
) -> Vec<Range> {
    let mut covered = covered.clone();
    let now = epoch_seconds(Utc::now());
    let recent = i64::try_from(config.recent_window.as_secs()).unwrap_or(i64::MAX);
    covered.remove(Range::new(now.saturating_sub(recent), want.end.max(now)).align_out(interval));
    covered
        .missing(want)
        .into_iter()
        .flat_map(|r| r.chunks(interval.saturating_mul(config.bars_per_request.max(1))))
        .collect()
}

/// How far an answer for `range` reaches: the end of its last bar or point, or the whole
/// range when it holds none (an empty answer proves there is nothing to fetch) or its last bar
/// is the range's last bucket. An answer that stops earlier may have been cut short by the
/// service, so the rest of the range is not recorded as covered.
pub(crate) fn answered_until(
    range: Range,
    interval: i64,
    starts: impl Iterator<Item = i64>,
) -> i64 {
    match starts.max() {
        Some(last) => last.saturating_add(interval).clamp(range.start, range.end),
        None => range.end,
    }
}

/// Where the coverage of an answer dated `date` (its `Date` header) ends at the latest, on a
/// grid of `interval` seconds: `reached`, but never after the start of the bar holding the
/// service's time, so nothing after the service's present is recorded as covered, and the bar
/// still open there is asked for again by the next run. Without a `Date`, `reached`.
pub(crate) fn covered_until(reached: i64, date: Option<DateTime<Utc>>, interval: i64) -> i64 {
    match date {
        Some(d) => {
            let step = interval.max(1);
            reached.min(epoch_seconds(d).div_euclid(step).saturating_mul(step))
        }
        None => reached,
    }
}
