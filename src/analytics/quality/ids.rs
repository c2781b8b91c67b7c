//! Ids stored more than once: the same swap or trade `id` in several rows of its dataset.
//!
//! # The rule
//!
//! The lake keeps each id once per dataset (ARCHITECTURE.md, "One copy of each event"), so
//! any id on more than one committed row is a finding (a file written past the lake's writer,
//! a copy restored by hand). The copies of an id are:
//! - **moved** when they do not all have the same `block_time` or the same `date` partition:
//!   the service answered the id at two times and both answers were kept;
//! - **duplicated** otherwise: the same event stored twice, identical or not (`differing`
//!   names the columns whose values differ between the copies; empty when they are equal).
//!
//! The counts come from the `id` and `block_time` columns and the `date` partition of every
//! row, sorted by id (in passes of id residues); only the examples' rows are read whole.

use polars::prelude::*;
use rayon::prelude::*;

use super::key_rows::KeyRows;
use crate::lake::cols::event;
use crate::{Error, Result};

/// An id stored on several rows at one time.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DuplicateId {
    /// `swaps` or `trades`.
    pub dataset: &'static str,
    /// The id.
    pub id: i64,
    /// Rows holding it.
    pub copies: u64,
    /// Its block time.
    pub block_time: chrono::DateTime<chrono::Utc>,
    /// Columns whose values differ between the copies (empty: identical copies).
    pub differing: Vec<String>,
}

/// An id stored at several times or in several date partitions.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MovedId {
    /// `swaps` or `trades`.
    pub dataset: &'static str,
    /// The id.
    pub id: i64,
    /// Rows holding it.
    pub copies: u64,
    /// The block times of its copies, in order.
    pub block_times: Vec<chrono::DateTime<chrono::Utc>>,
    /// The date partitions of its copies, in the same order.
    pub dates: Vec<String>,
    /// Columns whose values differ between the copies.
    pub differing: Vec<String>,
}

/// The ids of one dataset found more than once: counts and up to `examples` of each kind.
#[derive(Debug, Default)]
pub(super) struct RepeatedIds {
    pub(super) duplicates: (u64, Vec<DuplicateId>),
    pub(super) moved: (u64, Vec<MovedId>),
}

/// One row of an id: (id, block time, `date` partition as days since the Unix epoch).
type IdRow = (i64, i64, i32);

/// The repeated ids of the rows of `keys` (a dataset's), in `passes` passes over their `id`
/// and `block_time` columns, each grouping the ids of one residue modulo `passes` (by sorting
/// them), so that a pass holds about a `passes`-th of the rows, 24 bytes each; then the rows
/// of the examples (the first of each kind by id) read whole from `rows`, the same rows as a
/// scan. Also returns the rows read (those of the named tokens, when `keys` names some).
pub(super) fn repeated_ids_in_passes(
    dataset: &'static str,
    keys: &KeyRows<'_>,
    rows: LazyFrame,
    examples: usize,
    passes: u64,
) -> Result<(RepeatedIds, u64)> {
    let k = passes.max(1) as i64;
    let mut out = RepeatedIds::default();
    // (id, copies) of the first examples of each kind.
    let mut moved_ids: Vec<(i64, u64)> = Vec::new();
    let mut duplicate_ids: Vec<(i64, u64)> = Vec::new();
    let mut read = 0u64;
    for residue in 0..k {
        let found: Vec<(Vec<IdRow>, u64)> = keys.map(
            &[event::ID, event::BLOCK_TIME],
            |_, _| true,
            |batch| {
                let ids = batch.ints(event::ID)?;
                let times = batch.ints(event::BLOCK_TIME)?;
                let n = ids.len() as u64;
                // `rem_euclid`: negative ids fall in a residue too.
                let rows = ids
                    .into_iter()
                    .zip(times)
                    .filter(|(id, _)| id.rem_euclid(k) == residue)
                    .map(|(id, t)| (id, t, batch.date))
                    .collect();
                Ok((rows, n))
            },
        )?;
        if residue == 0 {
            read = found.iter().map(|(_, n)| n).sum();
        }
        let mut held: Vec<IdRow> = found.into_iter().flat_map(|(rows, _)| rows).collect();
        held.par_sort_unstable();
        // A pass's ids come in order, so its first examples of each kind are its smallest;
        // with those of the passes before, the smallest are kept.
        let counted = (out.moved.0, out.duplicates.0);
        for run in held.chunk_by(|a, b| a.0 == b.0).filter(|r| r.len() > 1) {
            let moved = run.iter().any(|r| r.1 != run[0].1 || r.2 != run[0].2);
            let (count, before, kept) = match moved {
                true => (&mut out.moved.0, counted.0, &mut moved_ids),
                false => (&mut out.duplicates.0, counted.1, &mut duplicate_ids),
            };
            if *count - before < examples as u64 {
                kept.push((run[0].0, run.len() as u64));
            }
            *count += 1;
        }
        for kept in [&mut moved_ids, &mut duplicate_ids] {
            kept.sort_unstable();
            kept.truncate(examples);
        }
    }
    examples_of(dataset, rows, moved_ids, duplicate_ids, &mut out)?;
    Ok((out, read))
}

/// The rows of the example ids, read whole from `rows`: their times, dates and the columns
/// whose values differ between the copies.
fn examples_of(
    dataset: &'static str,
    rows: LazyFrame,
    moved_ids: Vec<(i64, u64)>,
    duplicate_ids: Vec<(i64, u64)>,
    out: &mut RepeatedIds,
) -> Result<()> {
    let err = || Error::polars(format!("finding repeated ids of {dataset}"));
    let wanted: Vec<i64> = moved_ids
        .iter()
        .chain(&duplicate_ids)
        .map(|p| p.0)
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let set = lit(Series::new("ids".into(), wanted.as_slice())).implode(false);
    let copies_df = rows
        .filter(col(event::ID).is_in(set, false))
        .sort(
            [event::ID, event::BLOCK_TIME, "date"],
            SortMultipleOptions::default(),
        )
        .collect()
        .map_err(err())?;
    let times = crate::analytics::columns::micros_col(&copies_df, event::BLOCK_TIME)?;
    let row_ids = crate::analytics::columns::i64_col(&copies_df, event::ID)?;
    let dates = copies_df
        .column("date")
        .and_then(|c| c.cast(&DataType::String))
        .map_err(err())?;
    let dates: Vec<String> = dates
        .str()
        .map_err(err())?
        .iter()
        .map(|d| d.unwrap_or("").to_owned())
        .collect();
    let rows_of =
        |id: i64| -> Vec<usize> { (0..row_ids.len()).filter(|&r| row_ids[r] == id).collect() };
    for (id, n) in moved_ids {
        let rows = rows_of(id);
        out.moved.1.push(MovedId {
            dataset,
            id,
            copies: n,
            block_times: rows.iter().map(|&r| super::utc(times[r])).collect(),
            dates: rows.iter().map(|&r| dates[r].clone()).collect(),
            differing: differing(&copies_df, &rows)?,
        });
    }
    for (id, n) in duplicate_ids {
        let rows = rows_of(id);
        out.duplicates.1.push(DuplicateId {
            dataset,
            id,
            copies: n,
            block_time: super::utc(rows.first().map_or(0, |&r| times[r])),
            differing: differing(&copies_df, &rows)?,
        });
    }
    Ok(())
}

/// The columns of `df` whose values differ between `rows`.
fn differing(df: &DataFrame, rows: &[usize]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for c in df.columns() {
        let s = c.as_materialized_series();
        let first = rows.first().map(|&r| s.get(r)).transpose();
        let first = first.map_err(Error::polars("comparing the copies of an id"))?;
        for &r in rows.iter().skip(1) {
            let v = s
                .get(r)
                .map_err(Error::polars("comparing the copies of an id"))?;
            if Some(&v) != first.as_ref() {
                out.push(s.name().to_string());
                break;
            }
        }
    }
    Ok(out)
}
