//! Which committed files and row groups a selection of tokens, wallets and times can skip: the
//! one place the lake's readers of swaps and trades (the events' reader, the PnL's ledgers,
//! prices and equity curve) and of a profile snapshot (the screener's) list a dataset's files and prune row groups by the statistics of
//! `block_time` and by the bloom filters the writer puts on the token and wallet columns
//! ([`bloom_filter_columns`](crate::lake::parquet::bloom_filter_columns)).
//!
//! Each file is opened through [`SharedFile::open`] with its manifest entry, which checks it
//! against that entry; projection is the column list handed to
//! [`SharedFile::read_row_group`].
//!
//! A skipped row group is one that holds no row of the selection for certain: statistics and
//! bloom filters only ever rule row groups out, never in, so reading fewer row groups never
//! changes an answer.

use chrono::{DateTime, Utc};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::bloom_filter::Sbbf;
use parquet::file::statistics::Statistics;

use super::file::SharedFile;
use crate::Result;
use crate::lake::cols::event;
use crate::lake::dataset::Dataset;
use crate::lake::layout::Partition;
use crate::lake::log::{FileEntry, Manifest};

/// A committed file: its store path and its manifest entry.
pub(crate) type CommittedFile = (String, FileEntry);

/// The committed files of `dataset` whose time span (as their manifest entries record it) meets
/// `[lo, hi)` in microseconds (a missing bound does not limit), sorted by path.
pub(crate) fn committed_files(
    manifest: &Manifest,
    dataset: Dataset,
    lo: Option<i64>,
    hi: Option<i64>,
) -> Vec<CommittedFile> {
    let mut files: Vec<CommittedFile> = manifest
        .files_of(dataset)
        .filter(|(_, e)| {
            lo.is_none_or(|lo| e.max_time.timestamp_micros() >= lo)
                && hi.is_none_or(|hi| e.min_time.timestamp_micros() < hi)
        })
        .map(|(p, e)| (p.clone(), e.clone()))
        .collect();
    // The manifest lists files in path order already; sorted all the same, as readers rely on it.
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

/// The committed files of one partition whose time span (as their manifest entries record it)
/// holds the instant `at`, in path order: the files of a snapshot taken at `at`.
pub(crate) fn files_holding(
    manifest: &Manifest,
    partition: &Partition,
    at: DateTime<Utc>,
) -> Vec<CommittedFile> {
    manifest
        .files_in(partition)
        .filter(|(_, e)| e.min_time <= at && at <= e.max_time)
        .map(|(p, e)| (p.clone(), e.clone()))
        .collect()
}

/// The smallest and largest `block_time` of a row group from its statistics (`i64::MIN` and
/// `i64::MAX` where they are absent), in the file's unit (microseconds in the lake).
pub(crate) fn time_bounds(footer: &ArrowReaderMetadata, group: usize) -> (i64, i64) {
    int_bounds(footer, group, event::BLOCK_TIME)
}

/// The smallest and largest value of a 64-bit integer (or timestamp) column of a row group
/// from its statistics (`i64::MIN` and `i64::MAX` where they are absent).
pub(crate) fn int_bounds(footer: &ArrowReaderMetadata, group: usize, column: &str) -> (i64, i64) {
    let rg = footer.metadata().row_group(group);
    let stats = rg
        .columns()
        .iter()
        .find(|c| c.column_path().parts() == [column])
        .and_then(|c| match c.statistics() {
            Some(Statistics::Int64(s)) => Some((s.min_opt().copied(), s.max_opt().copied())),
            _ => None,
        });
    match stats {
        Some((lo, hi)) => (lo.unwrap_or(i64::MIN), hi.unwrap_or(i64::MAX)),
        None => (i64::MIN, i64::MAX),
    }
}

/// Whether a row group can hold a `block_time` in `[lo, hi)`, by its statistics.
pub(crate) fn may_hold_times(
    footer: &ArrowReaderMetadata,
    group: usize,
    lo: Option<i64>,
    hi: Option<i64>,
) -> bool {
    let (first, last) = time_bounds(footer, group);
    !(lo.is_some_and(|lo| last < lo) || hi.is_some_and(|hi| first >= hi))
}

/// Whether a row group can hold one of some values in one of `columns`, by their bloom filters:
/// `hit` says whether a filter may contain one of the values. A column without a filter may hold
/// anything; the filters are read one column at a time, until one answers yes.
pub(crate) fn may_hold_values(
    file: &SharedFile,
    footer: &ArrowReaderMetadata,
    group: usize,
    columns: &[&str],
    hit: impl Fn(&Sbbf) -> bool,
) -> Result<bool> {
    for c in columns {
        match file.bloom_filter(footer, group, c)? {
            Some(bloom) if !hit(&bloom) => {}
            _ => return Ok(true),
        }
    }
    Ok(false)
}

/// The bloom filters of a row group's `columns`, kept to be asked several times (`None` when a
/// column has none: the row group may then hold any value).
pub(crate) fn column_blooms(
    file: &SharedFile,
    footer: &ArrowReaderMetadata,
    group: usize,
    columns: &[&str],
) -> Result<Option<Vec<Sbbf>>> {
    let mut blooms = Vec::with_capacity(columns.len());
    for c in columns {
        match file.bloom_filter(footer, group, c)? {
            Some(bloom) => blooms.push(bloom),
            None => return Ok(None),
        }
    }
    Ok(Some(blooms))
}

/// Whether a row group with these filters ([`column_blooms`]) can hold one of `values`.
pub(crate) fn blooms_may_hold<'v>(
    blooms: &Option<Vec<Sbbf>>,
    mut values: impl Iterator<Item = &'v str>,
) -> bool {
    match blooms {
        None => true,
        Some(blooms) => values.any(|v| blooms.iter().any(|b| b.check(v))),
    }
}

/// Whether a row group can hold one of `values` in the string column `column`, by the column's
/// statistics (its smallest and largest value) and then its bloom filter (always, without
/// either).
pub(crate) fn may_hold_strings<'v, I>(
    file: &SharedFile,
    footer: &ArrowReaderMetadata,
    group: usize,
    column: &str,
    values: I,
) -> Result<bool>
where
    I: Iterator<Item = &'v str> + Clone,
{
    let rg = footer.metadata().row_group(group);
    let chunk = rg
        .columns()
        .iter()
        .find(|c| c.column_path().parts() == [column]);
    if let Some(Statistics::ByteArray(s)) = chunk.and_then(|c| c.statistics())
        && let (Some(lo), Some(hi)) = (s.min_opt(), s.max_opt())
        && !values
            .clone()
            .any(|v| lo.data() <= v.as_bytes() && v.as_bytes() <= hi.data())
    {
        return Ok(false);
    }
    Ok(match file.bloom_filter(footer, group, column)? {
        Some(bloom) => values.into_iter().any(|v| bloom.check(v)),
        None => true,
    })
}
