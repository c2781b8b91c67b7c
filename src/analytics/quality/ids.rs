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
//! The counts come from one grouped pass over the `id`, `block_time` and `date` columns; only
//! the examples' rows are read whole.

use polars::prelude::*;

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

/// [`repeated_ids`] in `passes` passes over `rows` (of `n` rows), each grouping the ids of
/// one residue modulo `passes`, so that a pass holds about `n / passes` rows: the same counts
/// and examples (the first by id) as one pass.
pub(super) fn repeated_ids_in_passes(
    dataset: &'static str,
    rows: LazyFrame,
    examples: usize,
    passes: u64,
) -> Result<RepeatedIds> {
    if passes <= 1 {
        return repeated_ids(dataset, rows, examples);
    }
    let k = passes as i64;
    let mut out = RepeatedIds::default();
    for residue in 0..k {
        // `rem_euclid`: negative ids fall in a residue too.
        let ids = ((col(event::ID) % lit(k)) + lit(k)) % lit(k);
        let part = repeated_ids(dataset, rows.clone().filter(ids.eq(lit(residue))), examples)?;
        out.duplicates.0 += part.duplicates.0;
        out.duplicates.1.extend(part.duplicates.1);
        out.moved.0 += part.moved.0;
        out.moved.1.extend(part.moved.1);
    }
    out.duplicates.1.sort_by_key(|d| d.id);
    out.duplicates.1.truncate(examples);
    out.moved.1.sort_by_key(|m| m.id);
    out.moved.1.truncate(examples);
    Ok(out)
}

/// The repeated ids of `rows` (a scan of `dataset`, with its hive `date` column).
pub(super) fn repeated_ids(
    dataset: &'static str,
    rows: LazyFrame,
    examples: usize,
) -> Result<RepeatedIds> {
    let err = || Error::polars(format!("finding repeated ids of {dataset}"));
    let grouped = rows
        .clone()
        .group_by([col(event::ID)])
        .agg([
            len().alias("copies"),
            col(event::BLOCK_TIME).n_unique().alias("times"),
            col("date").n_unique().alias("dates"),
        ])
        .filter(col("copies").gt(lit(1u32)))
        .with_column(
            col("times")
                .gt(lit(1u32))
                .or(col("dates").gt(lit(1u32)))
                .alias("moved"),
        )
        .sort([event::ID], SortMultipleOptions::default())
        .collect()
        .map_err(err())?;
    let mut out = RepeatedIds::default();
    if grouped.height() == 0 {
        return Ok(out);
    }
    let ids = crate::analytics::columns::i64_col(&grouped, event::ID)?;
    let copies = crate::analytics::columns::i64_col(&grouped, "copies")?;
    let moved: Vec<bool> = grouped
        .column("moved")
        .and_then(|c| c.bool())
        .map_err(err())?
        .iter()
        .map(|m| m.unwrap_or(false))
        .collect();
    let n_moved = moved.iter().filter(|m| **m).count() as u64;
    out.moved.0 = n_moved;
    out.duplicates.0 = ids.len() as u64 - n_moved;
    // The first examples of each kind, by id.
    let pick = |want: bool| -> Vec<(i64, u64)> {
        (0..ids.len())
            .filter(|&i| moved[i] == want)
            .take(examples)
            .map(|i| (ids[i], copies[i] as u64))
            .collect()
    };
    let (moved_ids, duplicate_ids) = (pick(true), pick(false));
    let wanted: Vec<i64> = moved_ids
        .iter()
        .chain(&duplicate_ids)
        .map(|p| p.0)
        .collect();
    if wanted.is_empty() {
        return Ok(out);
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
    out.duplicates.1.sort_by_key(|d| d.id);
    Ok(out)
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
