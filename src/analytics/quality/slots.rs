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

use polars::prelude::*;

use crate::analytics::columns::{i64_col, micros_col};
use crate::lake::cols::event;
use crate::{Error, Result};

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
pub(super) type SlotTimes = (Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>);

/// The time order of `rows` (a scan of `dataset`).
pub(super) fn slot_order(
    dataset: &'static str,
    rows: LazyFrame,
    examples: usize,
) -> Result<SlotOrder> {
    Ok(order_of(dataset, &slot_times(dataset, rows)?, examples))
}

/// Per slot of `rows`, in slot order: its earliest and latest times and its rows.
fn slot_times(dataset: &'static str, rows: LazyFrame) -> Result<SlotTimes> {
    let df = rows
        .group_by([col(event::BLOCK_SLOT)])
        .agg([
            col(event::BLOCK_TIME).min().alias("first"),
            col(event::BLOCK_TIME).max().alias("last"),
            len().alias("rows"),
        ])
        .sort([event::BLOCK_SLOT], SortMultipleOptions::default())
        .collect()
        .map_err(Error::polars(format!("reading the slots of {dataset}")))?;
    Ok((
        i64_col(&df, event::BLOCK_SLOT)?,
        micros_col(&df, "first")?,
        micros_col(&df, "last")?,
        i64_col(&df, "rows")?,
    ))
}

/// [`slot_order`] in `passes` passes over `rows`, each grouping the slots of one range (from
/// the smallest slot to the largest, in ranges of equal width), so that a pass holds about a
/// `passes`-th of the slots: the same findings as one pass.
pub(super) fn slot_order_in_passes(
    dataset: &'static str,
    rows: LazyFrame,
    examples: usize,
    passes: u64,
) -> Result<SlotOrder> {
    if passes <= 1 {
        return slot_order(dataset, rows, examples);
    }
    let err = || Error::polars(format!("reading the slots of {dataset}"));
    let bounds = rows
        .clone()
        .select([
            col(event::BLOCK_SLOT).min().alias("lo"),
            col(event::BLOCK_SLOT).max().alias("hi"),
        ])
        .collect()
        .map_err(err())?;
    let (Some(&lo), Some(&hi)) = (
        i64_col(&bounds, "lo")?.first(),
        i64_col(&bounds, "hi")?.first(),
    ) else {
        return slot_order(dataset, rows, examples);
    };
    let width = ((i128::from(hi) - i128::from(lo)) / i128::from(passes) + 1) as i64;
    let mut slots: SlotTimes = Default::default();
    let mut start = lo;
    while start <= hi {
        let end = start.saturating_add(width);
        let part = slot_times(
            dataset,
            rows.clone().filter(
                col(event::BLOCK_SLOT)
                    .gt_eq(lit(start))
                    .and(col(event::BLOCK_SLOT).lt(lit(end))),
            ),
        )?;
        slots.0.extend(part.0);
        slots.1.extend(part.1);
        slots.2.extend(part.2);
        slots.3.extend(part.3);
        if end == i64::MAX {
            break;
        }
        start = end;
    }
    Ok(order_of(dataset, &slots, examples))
}

/// The findings of slots in slot order (see the module documentation).
pub(super) fn order_of(dataset: &'static str, slots: &SlotTimes, examples: usize) -> SlotOrder {
    let (slot, first, last, rows) = slots;
    let mut out = SlotOrder::default();
    for i in 0..slot.len() {
        if first[i] != last[i] {
            out.split.0 += 1;
            if out.split.1.len() < examples {
                out.split.1.push(SplitSlot {
                    dataset,
                    block_slot: slot[i],
                    rows: rows[i] as u64,
                    first_time: super::utc(first[i]),
                    last_time: super::utc(last[i]),
                });
            }
        }
        if i > 0 && first[i] < last[i - 1] {
            out.backwards.0 += 1;
            if out.backwards.1.len() < examples {
                out.backwards.1.push(TimeBackwards {
                    dataset,
                    previous_slot: slot[i - 1],
                    previous_time: super::utc(last[i - 1]),
                    block_slot: slot[i],
                    block_time: super::utc(first[i]),
                });
            }
        }
    }
    out
}
