//! Small files merged into a commit: a commit that asks for it ([`MergeSmall`], the group
//! commits of a sync) writes the new rows of a partition together with the partition's
//! committed small files as one file, and removes those files in the same commit, once they
//! add up to a file that is no longer small.
//!
//! A sync spreads every commit over the days its rows fall in, so each commit adds one small
//! file per day; merged here, a day's rows reach files of
//! [`compact_below_rows`](crate::lake::LakeOptions::compact_below_rows) rows or more while the
//! sync runs, each row rewritten once, and the compaction at the end of the run merges only
//! what is still small. The merge is the commit's own: the files it removes are listed in the
//! commit's journal and in [`Manifest::removed`](crate::lake::log::Manifest::removed) like any
//! rewrite's, so the crash and version promises are those of every commit.

use std::collections::{BTreeMap, HashSet};

use arrow_array::RecordBatch;
use arrow_select::concat::concat_batches;

use super::batch::{arrow_err, sort_batch, to_file_batch};
use crate::Result;
use crate::lake::base::Base;
use crate::lake::layout::Partition;
use crate::lake::log::Manifest;
use crate::lake::read::read_file;
use crate::lake::schema;

/// How a commit merges the small files of the partitions it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeSmall {
    /// A committed file of fewer rows is small.
    pub below: u64,
    /// Rows of committed files one commit rewrites at most: the commit's new rows times this
    /// (at least `below`), so one commit never rewrites much more than it adds.
    pub rewrite_factor: u64,
}

impl MergeSmall {
    /// Small files are those of fewer than `below` rows; a commit rewrites at most twice its
    /// new rows (at least `below`).
    pub fn below(below: u64) -> Self {
        MergeSmall {
            below: below.max(1),
            rewrite_factor: 2,
        }
    }
}

/// The small files each partition's new rows are merged with: in the partitions where the
/// small files and the new rows reach `below` rows together, the partitions with the most
/// small rows first, within the commit's rewrite budget (the first one whatever its size). `fresh` gives the new rows of each
/// partition the commit writes; files in `excluded` (removed by the commit already) are not
/// taken.
pub(crate) fn plan(
    manifest: &Manifest,
    policy: MergeSmall,
    fresh: &[(Partition, usize)],
    excluded: &HashSet<String>,
) -> BTreeMap<Partition, Vec<String>> {
    let new_rows: u64 = fresh.iter().map(|(_, n)| *n as u64).sum();
    let mut budget = new_rows
        .saturating_mul(policy.rewrite_factor)
        .max(policy.below);
    let mut candidates: Vec<(u64, &Partition, Vec<String>)> = fresh
        .iter()
        .filter_map(|(partition, n)| {
            let mut rows = 0;
            let mut files = Vec::new();
            for (path, entry) in manifest.files_in(partition) {
                if entry.rows < policy.below && !excluded.contains(path) {
                    rows += entry.rows;
                    files.push(path.clone());
                }
            }
            (!files.is_empty() && rows.saturating_add(*n as u64) >= policy.below)
                .then_some((rows, partition, files))
        })
        .collect();
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let mut out = BTreeMap::new();
    for (rows, partition, files) in candidates {
        // The partition with the most small rows is merged whatever the budget, so none waits
        // for ever behind it.
        if rows > budget && !out.is_empty() {
            continue;
        }
        budget = budget.saturating_sub(rows);
        out.insert(partition.clone(), files);
    }
    out
}

/// The rows of `files` (committed files of `partition`) and the new rows `fresh` (record or
/// file schema) as one batch with the file schema, sorted in the dataset's order.
pub(crate) fn merged(
    lake: &Base,
    partition: &Partition,
    files: &[String],
    fresh: &RecordBatch,
) -> Result<RecordBatch> {
    let dataset = partition.dataset;
    let file_schema = schema::file_schema(dataset);
    let mut pieces = Vec::with_capacity(files.len() + 1);
    pieces.push(to_file_batch(dataset, fresh)?);
    for path in files {
        let batch = read_file(lake, path)?;
        // A file's own schema may differ in metadata only.
        pieces.push(
            RecordBatch::try_new(file_schema.clone(), batch.columns().to_vec())
                .map_err(arrow_err(format!("{dataset} file {path}")))?,
        );
    }
    let all = concat_batches(&file_schema, &pieces)
        .map_err(arrow_err(format!("merging {dataset} files")))?;
    sort_batch(dataset, &all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::models::ChainFamily;
    use crate::lake::dataset::Dataset;
    use crate::lake::log::FileEntry;

    fn day(d: u32) -> Partition {
        Partition {
            dataset: Dataset::Swaps,
            chain: ChainFamily::from_chain_id(None),
            interval: None,
            date: chrono::NaiveDate::from_ymd_opt(2025, 1, d).expect("a date"),
        }
    }

    /// A manifest whose day `d` holds files of the given rows.
    fn manifest(days: &[(u32, &[u64])]) -> Manifest {
        let mut m = Manifest::default();
        for (d, sizes) in days {
            for (i, rows) in sizes.iter().enumerate() {
                let at = chrono::DateTime::UNIX_EPOCH;
                m.files.insert(
                    format!("{}/f{i}.parquet", day(*d).dir()),
                    FileEntry {
                        dataset: Dataset::Swaps,
                        rows: *rows,
                        bytes: 1,
                        min_time: at,
                        max_time: at,
                        schema_version: 1,
                        min_id: None,
                        max_id: None,
                    },
                );
            }
        }
        m
    }

    #[test]
    fn days_reaching_the_size_merge_their_small_files_within_the_budget() {
        let m = manifest(&[(1, &[40, 30, 500]), (2, &[10]), (3, &[60, 60]), (4, &[50])]);
        let policy = MergeSmall {
            below: 100,
            rewrite_factor: 2,
        };
        let none = HashSet::new();
        // Day 1: 70 small rows (the 500-row file stays) + 40 new reach 100; day 2: 10 + 5 do
        // not; day 3: 120 small rows; day 4 is not written. Budget max(2 × 55, 100) = 110:
        // day 3 first (the most small rows, over the budget but first), then day 1 no longer fits.
        let fresh = [(day(1), 40), (day(2), 5), (day(3), 10)];
        let plan = plan(&m, policy, &fresh, &none);
        assert_eq!(plan.keys().cloned().collect::<Vec<_>>(), vec![day(3)]);
        assert_eq!(plan[&day(3)].len(), 2);
        // With a larger commit both fit, and only the small files of day 1 are taken.
        let fresh = [(day(1), 400), (day(2), 5), (day(3), 10)];
        let plan = super::plan(&m, policy, &fresh, &none);
        assert_eq!(
            plan.keys().cloned().collect::<Vec<_>>(),
            vec![day(1), day(3)]
        );
        assert_eq!(plan[&day(1)].len(), 2);
        assert!(plan[&day(1)].iter().all(|p| !p.ends_with("f2.parquet")));
        // A file the commit removes already is not taken.
        let gone: HashSet<String> = [format!("{}/f0.parquet", day(3).dir())].into();
        let plan = super::plan(&m, policy, &[(day(3), 10)], &gone);
        assert!(plan.is_empty(), "60 + 10 rows stay small: {plan:?}");
    }
}
