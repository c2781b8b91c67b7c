//! `compact`: merge the small files of each partition into larger ones, in one atomic commit.

use std::collections::{BTreeMap, BTreeSet};

use arrow::compute::concat_batches;

use super::file::read_file;
use super::layout::Partition;
use super::manifest;
use super::writer::{commit_files, encode_partition, sort_batch};
use super::{Dataset, Lake};
use crate::{Error, Result};

/// What [`Lake::compact`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Partitions whose files were merged.
    pub partitions: usize,
    /// Files replaced.
    pub files_removed: usize,
    /// Files written.
    pub files_added: usize,
    /// Rows rewritten, per dataset.
    pub rows: BTreeMap<Dataset, u64>,
}

/// Runs [`Lake::compact`].
pub fn compact(lake: &Lake) -> Result<CompactReport> {
    compact_where(lake, |_| true)
}

/// Runs [`Lake::compact_partitions`].
pub fn compact_partitions(lake: &Lake, partitions: &BTreeSet<Partition>) -> Result<CompactReport> {
    if partitions.is_empty() {
        return Ok(CompactReport::default());
    }
    compact_where(lake, |p| partitions.contains(p))
}

/// Compacts the partitions `keep` accepts.
fn compact_where(lake: &Lake, keep: impl Fn(&Partition) -> bool) -> Result<CompactReport> {
    let _lock = lake.lock()?;
    manifest::recover(lake.store())?;
    let current = lake.snapshot()?;
    let small = lake.options().compact_below_rows as u64;
    let mut groups: BTreeMap<Partition, Vec<String>> = BTreeMap::new();
    for (path, entry) in &current.files {
        if entry.rows < small {
            groups
                .entry(Partition::from_file_path(path)?)
                .or_default()
                .push(path.clone());
        }
    }
    groups.retain(|partition, files| files.len() > 1 && keep(partition));
    let mut report = CompactReport::default();
    if groups.is_empty() {
        return Ok(report);
    }
    let version = current.version + 1;
    let mut seq = 0;
    let mut added = Vec::new();
    let mut removed = Vec::new();
    for (partition, files) in groups {
        let dataset = partition.dataset;
        let batches = files
            .iter()
            .map(|p| read_file(lake, p))
            .collect::<Result<Vec<_>>>()?;
        let schema = batches[0].schema();
        let merged = concat_batches(&schema, &batches).map_err(|source| Error::Arrow {
            context: format!("merging {}", partition.dir()),
            source,
        })?;
        let expected: u64 = files.iter().map(|p| current.files[p].rows).sum();
        if merged.num_rows() as u64 != expected {
            return Err(Error::Lake {
                path: lake.store().location(&partition.dir()),
                message: format!(
                    "files hold {} rows, the manifest says {expected}; run verify",
                    merged.num_rows()
                ),
            });
        }
        let sorted = sort_batch(dataset, &merged)?;
        let new = encode_partition(lake, &partition, &sorted, version, &mut seq)?;
        report.partitions += 1;
        report.files_removed += files.len();
        report.files_added += new.len();
        *report.rows.entry(dataset).or_default() += expected;
        added.extend(new);
        removed.extend(files);
    }
    let commit = super::log::Commit {
        version: current.version + 1,
        operation: Some(super::log::COMPACT.to_owned()),
        ..super::log::Commit::default()
    };
    drop(current);
    commit_files(lake, commit, added, removed)?;
    Ok(report)
}
