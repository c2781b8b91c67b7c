//! Time running backwards: block times that disagree with the order of the slots.
//!
//! # The rule
//!
//! A slot (the altchain's block) has one block time, and a later slot never has an earlier
//! time. Over the rows of one dataset (swaps or trades), grouped by `block_slot` and taken in
//! slot order:
//! - a **split slot** is a slot whose rows carry more than one `block_time`;
//! - **time runs backwards** at a slot whose earliest time is before the latest time of the
//!   previous slot that has rows.
//!
//! Slots are compared with their neighbour, not with the latest time seen so far, so one row
//! put at a wrong time gives one finding (at its slot, or at the slot after it), not one for
//! every slot until the clock catches up. Equal times in consecutive slots are fine (several
//! slots fall in one second).

use std::sync::atomic::{AtomicI64, Ordering};

use rayon::prelude::*;

use super::key_rows::{KeyRows, slot_bounds};
use crate::Result;
use crate::lake::cols::event;

/// A slot whose rows carry several block times.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SplitSlot {
    /// `swaps` or `trades`.
    pub dataset: &'static str,
    /// The slot.
    pub block_slot: i64,
    /// Its rows.
    pub rows: u64,
    /// The earliest of their times.
    pub first_time: chrono::DateTime<chrono::Utc>,
    /// The latest.
    pub last_time: chrono::DateTime<chrono::Utc>,
}

/// A slot whose time is before the previous slot's.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TimeBackwards {
    /// `swaps` or `trades`.
    pub dataset: &'static str,
    /// The previous slot holding rows.
    pub previous_slot: i64,
    /// Its latest time.
    pub previous_time: chrono::DateTime<chrono::Utc>,
    /// The slot.
    pub block_slot: i64,
    /// Its earliest time.
    pub block_time: chrono::DateTime<chrono::Utc>,
}

/// The slots of one dataset: counts and up to `examples` of each finding.
#[derive(Debug, Default)]
pub(super) struct SlotOrder {
    pub(super) split: (u64, Vec<SplitSlot>),
    pub(super) backwards: (u64, Vec<TimeBackwards>),
}

/// Per slot, in slot order: (slot, earliest time, latest time, rows).
#[cfg(test)]
pub(super) type SlotTimes = (Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>);

/// One slot's rows: (slot, earliest time, latest time, rows).
type Slot = (i64, i64, i64, u64);

/// The time order of the rows of `keys` (a dataset's), in `passes` passes, each over the slots
/// of one range (from the smallest slot to the largest, by the row groups' statistics, in
/// ranges of equal width) and reading only the row groups whose slots meet it: a pass holds
/// the slots of about a `passes`-th of the rows.
pub(super) fn slot_order_in_passes(
    dataset: &'static str,
    keys: &KeyRows<'_>,
    examples: usize,
    passes: u64,
) -> Result<SlotOrder> {
    // The range of the slots, from the footers alone (no row group is read).
    let (lo, hi) = (AtomicI64::new(i64::MAX), AtomicI64::new(i64::MIN));
    keys.map(
        &[],
        |footer, g| {
            let (a, b) = slot_bounds(footer, g);
            lo.fetch_min(a, Ordering::Relaxed);
            hi.fetch_max(b, Ordering::Relaxed);
            false
        },
        |_| Ok(()),
    )?;
    let (lo, hi) = (lo.into_inner(), hi.into_inner());
    // Pass `i` takes the slots from `lo + i × width` (included) to `lo + (i + 1) × width`
    // (excluded); the first pass takes every slot before its end and the last every slot from
    // its start, so a row outside its row group's statistics still counts once.
    let passes = if lo == i64::MIN || hi == i64::MAX || lo > hi {
        1
    } else {
        passes.max(1)
    };
    let width = if passes > 1 {
        ((i128::from(hi) - i128::from(lo)) / i128::from(passes) + 1) as i64
    } else {
        0
    };
    let mut order = OrderScan::new(dataset, examples);
    for pass in 0..passes {
        let from = match pass {
            0 => i64::MIN,
            _ => lo.saturating_add(width.saturating_mul(pass as i64)),
        };
        let to = match pass + 1 {
            p if p == passes => None,
            p => Some(lo.saturating_add(width.saturating_mul(p as i64))),
        };
        let in_range = |s: i64| s >= from && to.is_none_or(|to| s < to);
        let found: Vec<Vec<Slot>> = keys.map(
            &[event::BLOCK_SLOT, event::BLOCK_TIME],
            |footer, g| {
                let (a, b) = slot_bounds(footer, g);
                b >= from && to.is_none_or(|to| a < to)
            },
            |rows| {
                let slots = rows.ints(event::BLOCK_SLOT)?;
                let times = rows.ints(event::BLOCK_TIME)?;
                let mut pairs: Vec<(i64, i64)> = slots
                    .into_iter()
                    .zip(times)
                    .filter(|(s, _)| in_range(*s))
                    .collect();
                pairs.sort_unstable();
                Ok(runs(&pairs))
            },
        )?;
        let mut slots: Vec<Slot> = found.into_iter().flatten().collect();
        slots.par_sort_unstable_by_key(|s| s.0);
        for run in slots.chunk_by(|a, b| a.0 == b.0) {
            let merged = run
                .iter()
                .skip(1)
                .fold(run[0], |m, s| (m.0, m.1.min(s.1), m.2.max(s.2), m.3 + s.3));
            order.push(merged);
        }
    }
    Ok(order.out)
}

/// Each slot's earliest and latest time and rows among `pairs` (slot, time), sorted.
fn runs(pairs: &[(i64, i64)]) -> Vec<Slot> {
    pairs
        .chunk_by(|a, b| a.0 == b.0)
        .map(|run| (run[0].0, run[0].1, run[run.len() - 1].1, run.len() as u64))
        .collect()
}

/// The findings of slots taken in slot order (see the module documentation), one at a time.
struct OrderScan {
    dataset: &'static str,
    examples: usize,
    /// The previous slot holding rows, and its latest time.
    previous: Option<(i64, i64)>,
    out: SlotOrder,
}

impl OrderScan {
    fn new(dataset: &'static str, examples: usize) -> OrderScan {
        OrderScan {
            dataset,
            examples,
            previous: None,
            out: SlotOrder::default(),
        }
    }

    fn push(&mut self, (slot, first, last, rows): Slot) {
        let (dataset, examples, out) = (self.dataset, self.examples, &mut self.out);
        if first != last {
            out.split.0 += 1;
            if out.split.1.len() < examples {
                out.split.1.push(SplitSlot {
                    dataset,
                    block_slot: slot,
                    rows,
                    first_time: super::utc(first),
                    last_time: super::utc(last),
                });
            }
        }
        if let Some((previous_slot, previous_time)) = self.previous
            && first < previous_time
        {
            out.backwards.0 += 1;
            if out.backwards.1.len() < examples {
                out.backwards.1.push(TimeBackwards {
                    dataset,
                    previous_slot,
                    previous_time: super::utc(previous_time),
                    block_slot: slot,
                    block_time: super::utc(first),
                });
            }
        }
        self.previous = Some((slot, last));
    }
}

/// The findings of slots in slot order (see the module documentation).
#[cfg(test)]
pub(super) fn order_of(dataset: &'static str, slots: &SlotTimes, examples: usize) -> SlotOrder {
    let (slot, first, last, rows) = slots;
    let mut order = OrderScan::new(dataset, examples);
    for i in 0..slot.len() {
        order.push((slot[i], first[i], last[i], rows[i] as u64));
    }
    order.out
}
