//! Half-open time ranges `[start, end)` in epoch seconds, and sets of them.
//!
//! Time-range datasets (candles, price history) record which ranges the lake covers; a sync asks
//! only for what is missing. Kept apart from the runner so the arithmetic is tested on its own.

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

/// A half-open range `[start, end)` of epoch seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Range {
    /// First second in the range.
    pub start: i64,
    /// First second after the range.
    pub end: i64,
}

impl Range {
    /// A range; empty when `end <= start`.
    pub fn new(start: i64, end: i64) -> Self {
        Range { start, end }
    }

    /// Whether the range holds no second.
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// Length in seconds (saturating at `i64::MAX`).
    pub fn len(&self) -> i64 {
        self.end.saturating_sub(self.start).max(0)
    }

    /// The range widened outwards to multiples of `step` (a bucket grid anchored at the epoch).
    /// Bounds that fall outside `i64` saturate.
    pub fn align_out(&self, step: i64) -> Range {
        let step = step.max(1);
        let start = self.start.div_euclid(step).saturating_mul(step);
        let end = self.end.div_euclid(step).saturating_mul(step);
        let end = if end < self.end {
            end.saturating_add(step)
        } else {
            end
        };
        Range { start, end }
    }

    /// Splits into consecutive pieces of at most `max_len` seconds (at least 1).
    ///
    /// The arithmetic saturates, so any range and length are safe; the number of pieces is
    /// the caller's to bound (jobs bound their span in bars, see
    /// [`Job::validate`](super::Job::validate)).
    pub fn chunks(&self, max_len: i64) -> Vec<Range> {
        let mut out = Vec::new();
        let mut s = self.start;
        while s < self.end {
            let e = s.saturating_add(max_len.max(1)).min(self.end);
            out.push(Range::new(s, e));
            s = e;
        }
        out
    }

    /// How many pieces [`Self::chunks`] makes, without making them.
    pub fn chunk_count(&self, max_len: i64) -> u64 {
        // The exact length, which can exceed `i64::MAX`, always fits in a `u64`.
        let len = (i128::from(self.end) - i128::from(self.start)).max(0) as u64;
        len.div_ceil(max_len.max(1) as u64)
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

/// A normalised set of ranges: sorted, non-overlapping, non-adjacent, none empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RangeSet {
    ranges: Vec<Range>,
}

impl RangeSet {
    /// The empty set, as a constant.
    pub const EMPTY: RangeSet = RangeSet { ranges: Vec::new() };

    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ranges, in order.
    pub fn ranges(&self) -> &[Range] {
        &self.ranges
    }

    /// Adds a range, merging with overlapping or adjacent ones.
    pub fn insert(&mut self, r: Range) {
        if r.is_empty() {
            return;
        }
        let mut merged = r;
        let mut out = Vec::with_capacity(self.ranges.len() + 1);
        let mut placed = false;
        for &x in &self.ranges {
            if x.end < merged.start {
                out.push(x);
            } else if merged.end < x.start {
                if !placed {
                    out.push(merged);
                    placed = true;
                }
                out.push(x);
            } else {
                merged = Range::new(merged.start.min(x.start), merged.end.max(x.end));
            }
        }
        if !placed {
            out.push(merged);
        }
        self.ranges = out;
    }

    /// Removes a range (the part of the set inside it).
    pub fn remove(&mut self, r: Range) {
        if r.is_empty() {
            return;
        }
        let mut out = Vec::with_capacity(self.ranges.len() + 1);
        for &x in &self.ranges {
            if x.end <= r.start || r.end <= x.start {
                out.push(x);
                continue;
            }
            if x.start < r.start {
                out.push(Range::new(x.start, r.start));
            }
            if r.end < x.end {
                out.push(Range::new(r.end, x.end));
            }
        }
        self.ranges = out;
    }

    /// The parts of `want` this set does not cover, in order.
    pub fn missing(&self, want: Range) -> Vec<Range> {
        let mut out = Vec::new();
        let mut cursor = want.start;
        for x in &self.ranges {
            if x.end <= cursor {
                continue;
            }
            if x.start >= want.end {
                break;
            }
            if x.start > cursor {
                out.push(Range::new(cursor, x.start.min(want.end)));
            }
            cursor = cursor.max(x.end);
            if cursor >= want.end {
                break;
            }
        }
        if cursor < want.end {
            out.push(Range::new(cursor, want.end));
        }
        out
    }

    /// Whether `want` is wholly covered.
    pub fn covers(&self, want: Range) -> bool {
        want.is_empty() || self.missing(want).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn insert_merges_adjacent_and_overlapping() {
        let mut s = RangeSet::new();
        s.insert(Range::new(10, 20));
        s.insert(Range::new(30, 40));
        s.insert(Range::new(20, 25));
        assert_eq!(s.ranges(), &[Range::new(10, 25), Range::new(30, 40)]);
        s.insert(Range::new(0, 35));
        assert_eq!(s.ranges(), &[Range::new(0, 40)]);
    }

    #[test]
    fn missing_and_remove() {
        let mut s = RangeSet::new();
        s.insert(Range::new(10, 20));
        s.insert(Range::new(30, 40));
        assert_eq!(
            s.missing(Range::new(0, 50)),
            vec![Range::new(0, 10), Range::new(20, 30), Range::new(40, 50)]
        );
        assert_eq!(s.missing(Range::new(12, 18)), vec![]);
        s.remove(Range::new(15, 35));
        assert_eq!(s.ranges(), &[Range::new(10, 15), Range::new(35, 40)]);
    }

    #[test]
    fn extreme_values_saturate() {
        let all = Range::new(i64::MIN, i64::MAX);
        assert_eq!(all.len(), i64::MAX);
        assert_eq!(all.chunk_count(i64::MAX), 3);
        assert_eq!(all.chunks(i64::MAX).len(), 3);
        assert_eq!(
            Range::new(0, 100).align_out(i64::MAX),
            Range::new(0, i64::MAX)
        );
        assert_eq!(
            Range::new(i64::MAX - 5, i64::MAX).chunks(10),
            vec![Range::new(i64::MAX - 5, i64::MAX)]
        );
        assert_eq!(Range::new(0, 250).chunk_count(100), 3);
        assert_eq!(Range::new(5, 5).chunk_count(0), 0);
    }

    #[test]
    fn align_and_chunks() {
        assert_eq!(Range::new(61, 179).align_out(60), Range::new(60, 180));
        assert_eq!(Range::new(-61, 0).align_out(60), Range::new(-120, 0));
        assert_eq!(
            Range::new(0, 250).chunks(100),
            vec![
                Range::new(0, 100),
                Range::new(100, 200),
                Range::new(200, 250)
            ]
        );
    }

    proptest! {
        #[test]
        fn set_agrees_with_a_bitmap(ops in proptest::collection::vec((any::<bool>(), 0i64..100, 0i64..30), 0..30), q in (0i64..100, 0i64..60)) {
            let mut set = RangeSet::new();
            let mut bits = [false; 200];
            for (add, s, len) in ops {
                let r = Range::new(s, s + len);
                if add { set.insert(r) } else { set.remove(r) }
                for b in &mut bits[s as usize..(s + len) as usize] { *b = add; }
            }
            let want = Range::new(q.0, q.0 + q.1);
            let mut expect = Vec::new();
            for t in want.start..want.end {
                if !bits[t as usize] {
                    match expect.last_mut() {
                        Some(Range { end, .. }) if *end == t => *end = t + 1,
                        _ => expect.push(Range::new(t, t + 1)),
                    }
                }
            }
            prop_assert_eq!(set.missing(want), expect);
            for w in set.ranges().windows(2) { prop_assert!(w[0].end < w[1].start); }
        }

        #[test]
        fn arithmetic_never_overflows(start in any::<i64>(), end in any::<i64>(), step in any::<i64>(), len in 1i64..) {
            let r = Range::new(start, end).align_out(step);
            // Widened outwards: the aligned range holds the whole of the original one.
            prop_assert!(r.start <= start && end <= r.end, "{:?} does not hold {}..{}", r, start, end);
            // The length is the exact one, saturated, never a wrapped subtraction.
            let exact = (i128::from(r.end) - i128::from(r.start)).clamp(0, i128::from(i64::MAX));
            prop_assert_eq!(i128::from(r.len()), exact);
            let count = r.chunk_count(len);
            // Only lay out the pieces when there are few of them.
            if count <= 1000 {
                let pieces = r.chunks(len);
                prop_assert_eq!(pieces.len() as u64, count);
                prop_assert!(pieces.windows(2).all(|w| w[0].end == w[1].start));
            }
        }
    }
}
