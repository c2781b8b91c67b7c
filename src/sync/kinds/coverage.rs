//! What candles and price history share: the time ranges a target covers (empty answers
//! included), the part of a wanted range still missing, and how far an answer reaches.

use crate::sync::config::SyncConfig;
use crate::sync::ranges::{Range, RangeSet};
pub(crate) use crate::sync::ranges::{epoch_seconds, from_epoch_seconds};
use chrono::{DateTime, Utc};

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
