//! The committed ids of the datasets with an [`id_column`](Dataset::id_column) (swaps,
//! trades), each with its time, held in memory by a writing [`Lake`](crate::lake::Lake) handle
//! (its [`IdCache`]).
//!
//! A write must keep every id once in its dataset: a staged id already committed at the same
//! time is a repeat (dropped), and one committed at another time has moved (its old record is
//! replaced). Answering that from the files means reading the `id` column of every file
//! whose id range meets the write's, and in a lake synced pool by pool the ranges of all files
//! of a day interleave, so each commit would read most of the lake. The index answers it in
//! memory instead: it is built once per handle (reading the `id` and time columns of the
//! dataset's files, in parallel), then brought up to date before each write by reading the
//! log entries since its version and the `id` and time columns of the files they added
//! (a compaction's only when it merged such files: otherwise they hold indexed rows). Ids
//! never leave a dataset (a rewritten file's rows are all in the files that replace it), so
//! adding is enough. When the entries are gone (a checkpoint's clean-up) or the manifest was
//! rebuilt, it is built again.
//!
//! Memory: 16 bytes per committed id (160 MB for 10 million swaps), in sorted arrays plus a
//! small hash map of recent ids that is merged into them as it grows.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMicrosecondType};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::lake::base::Base;
use crate::lake::dataset::Dataset;
use crate::lake::log::{self, Manifest};
use crate::lake::read::read_columns;
use crate::{Error, Result};

/// The `(id, time)` pairs of the given files of `dataset`, read in parallel.
fn read_pairs(lake: &Base, dataset: Dataset, paths: &[&String]) -> Result<Vec<(i64, i64)>> {
    let Some(id_name) = dataset.id_column() else {
        return Ok(Vec::new());
    };
    let time_name = dataset.time_column();
    let pieces = paths
        .par_iter()
        .map(|path| -> Result<Vec<(i64, i64)>> {
            let batch = read_columns(lake, path, &[id_name, time_name])?;
            let column = |name: &str| {
                batch.column_by_name(name).ok_or_else(|| Error::Lake {
                    path: lake.store().location(path),
                    message: format!("{dataset} file lacks column {name}"),
                })
            };
            let ids = column(id_name)?.as_primitive::<Int64Type>();
            let times = column(time_name)?.as_primitive::<TimestampMicrosecondType>();
            Ok(ids
                .values()
                .iter()
                .copied()
                .zip(times.values().iter().copied())
                .collect())
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(pieces.into_iter().flatten().collect())
}

/// The id indexes of a lake handle and its clones, one per id dataset, built by the first
/// write that needs them.
#[derive(Debug, Clone, Default)]
pub(crate) struct IdCache(Arc<Mutex<BTreeMap<Dataset, IdIndex>>>);

impl IdCache {
    /// The committed ids of `dataset` as of `manifest` (see [`IdIndex`]), brought up to date or
    /// built. Runs under the writer lock.
    pub(crate) fn index(
        &self,
        lake: &Base,
        manifest: &Manifest,
        dataset: Dataset,
    ) -> Result<MutexGuard<'_, BTreeMap<Dataset, IdIndex>>> {
        let mut indexes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let current = match indexes.get_mut(&dataset) {
            Some(index) if index.version == manifest.version => true,
            Some(index) if index.version < manifest.version => {
                index.catch_up(lake, manifest, dataset)?
            }
            _ => false,
        };
        if !current {
            indexes.remove(&dataset);
            let index = IdIndex::build(lake, manifest, dataset)?;
            indexes.insert(dataset, index);
        }
        Ok(indexes)
    }
}

/// The committed `(id, time)` pairs of one dataset as of one manifest version.
#[derive(Debug, Default)]
pub(crate) struct IdIndex {
    /// The manifest version the index describes.
    pub version: u64,
    /// Ids in ascending order.
    ids: Vec<i64>,
    /// The time (microseconds) of each id of `ids`.
    times: Vec<i64>,
    /// Ids committed since the sorted arrays were last rebuilt; they win over them.
    recent: FxHashMap<i64, i64>,
}

impl IdIndex {
    /// Reads the ids and times of every committed file of `dataset` in `manifest`.
    pub fn build(lake: &Base, manifest: &Manifest, dataset: Dataset) -> Result<IdIndex> {
        let paths: Vec<&String> = manifest.files_of(dataset).map(|(p, _)| p).collect();
        let mut pairs = read_pairs(lake, dataset, &paths)?;
        pairs.par_sort_unstable();
        pairs.dedup_by_key(|(id, _)| *id);
        let (ids, times) = pairs.into_iter().unzip();
        Ok(IdIndex {
            version: manifest.version,
            ids,
            times,
            recent: FxHashMap::default(),
        })
    }

    /// Brings the index to `manifest`'s version, or returns `false` when that needs a rebuild
    /// (the entries since its version are gone).
    ///
    /// Files whose rows may be missing from the index are followed through the entries: each
    /// file a write adds; a compaction's outputs only when it merged such a file (otherwise
    /// they hold indexed rows only); a file dropped by a later write hands its rows to that
    /// write's new files. The files still listed at the end are read.
    pub fn catch_up(&mut self, lake: &Base, manifest: &Manifest, dataset: Dataset) -> Result<bool> {
        let prefix = format!("{}/", dataset.name());
        let mut pending: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        for version in self.version + 1..=manifest.version {
            let Some((commit, _)) = log::read_entry(lake.store(), version)? else {
                return Ok(false);
            };
            let mut merged_pending = false;
            for path in &commit.remove {
                merged_pending |= pending.remove(path);
            }
            if commit.operation.as_deref() == Some(log::COMPACT) && !merged_pending {
                continue;
            }
            pending.extend(commit.add.into_keys().filter(|p| p.starts_with(&prefix)));
        }
        if pending.iter().any(|p| !manifest.files.contains_key(p)) {
            return Ok(false);
        }
        let pairs = read_pairs(lake, dataset, &pending.iter().collect::<Vec<_>>())?;
        self.insert(pairs);
        self.version = manifest.version;
        Ok(true)
    }

    /// The committed time of `id`, if it is committed.
    pub fn time_of(&self, id: i64) -> Option<i64> {
        if let Some(&t) = self.recent.get(&id) {
            return Some(t);
        }
        self.ids.binary_search(&id).ok().map(|i| self.times[i])
    }

    /// Records ids committed (or moved) with their times.
    pub fn insert(&mut self, pairs: impl IntoIterator<Item = (i64, i64)>) {
        self.recent.extend(pairs);
        if self.recent.len() > (self.ids.len() / 8).max(1 << 16) {
            self.merge();
        }
    }

    /// Folds the recent ids into the sorted arrays.
    fn merge(&mut self) {
        let mut recent: Vec<(i64, i64)> = self.recent.drain().collect();
        recent.sort_unstable();
        let mut ids = Vec::with_capacity(self.ids.len() + recent.len());
        let mut times = Vec::with_capacity(ids.capacity());
        let (mut i, mut j) = (0, 0);
        while i < self.ids.len() || j < recent.len() {
            let take_recent = match (self.ids.get(i), recent.get(j)) {
                (Some(&a), Some(&(b, _))) => {
                    if a == b {
                        i += 1; // the recent time wins
                    }
                    b <= a
                }
                (None, Some(_)) => true,
                _ => false,
            };
            if take_recent {
                ids.push(recent[j].0);
                times.push(recent[j].1);
                j += 1;
            } else {
                ids.push(self.ids[i]);
                times.push(self.times[i]);
                i += 1;
            }
        }
        self.ids = ids;
        self.times = times;
    }

    /// Number of ids held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.ids.len()
            + self
                .recent
                .keys()
                .filter(|id| self.ids.binary_search(id).is_err())
                .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_ids_win_and_merge_keeps_order() {
        let mut index = IdIndex {
            version: 1,
            ids: vec![1, 3, 5],
            times: vec![10, 30, 50],
            recent: FxHashMap::default(),
        };
        index.insert([(3, 31), (4, 40)]);
        assert_eq!(index.time_of(3), Some(31));
        assert_eq!(index.time_of(4), Some(40));
        assert_eq!(index.time_of(2), None);
        index.merge();
        assert_eq!(index.ids, vec![1, 3, 4, 5]);
        assert_eq!(index.times, vec![10, 31, 40, 50]);
        assert_eq!(index.len(), 4);
        index.insert((100..70_000).map(|id| (id, id * 10)));
        assert!(index.recent.is_empty(), "merged once large");
        assert_eq!(index.time_of(69_999), Some(699_990));
        assert_eq!(index.time_of(5), Some(50));
        assert!(index.ids.windows(2).all(|w| w[0] < w[1]));
    }
}
