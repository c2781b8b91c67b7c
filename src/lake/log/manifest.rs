//! The manifest: which data files are committed, plus the sync layer's bookkeeping, as of
//! one version. How it is stored (a commit log with checkpoints) is in the folder's
//! [`mod.rs`](super).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::lake::dataset::Dataset;
use crate::lake::layout::Partition;
use crate::lake::storage::Store;

/// Version of the manifest's own format.
pub const MANIFEST_FORMAT_VERSION: u32 = 1;

/// One committed data file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// The dataset the file belongs to.
    pub dataset: Dataset,
    /// Number of rows.
    pub rows: u64,
    /// Size in bytes.
    pub bytes: u64,
    /// Smallest value of the dataset's time column in the file.
    pub min_time: DateTime<Utc>,
    /// Largest value of the dataset's time column in the file.
    pub max_time: DateTime<Utc>,
    /// Schema version the file was written with.
    pub schema_version: u32,
    /// Smallest `id` in the file, in datasets whose `id` is unique across partitions
    /// ([`Dataset::id_column`]). Writes read only the files whose id range meets theirs;
    /// `None` in other datasets and in entries of older manifests (such files are always read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_id: Option<i64>,
    /// Largest `id` in the file; see [`min_id`](Self::min_id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_id: Option<i64>,
}

/// The committed state of the lake.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format of this document.
    pub format_version: u32,
    /// Number of commits so far; 0 for an empty lake.
    pub version: u64,
    /// Time of the latest commit.
    pub committed_at: Option<DateTime<Utc>>,
    /// Committed data files by path relative to the lake root.
    pub files: BTreeMap<String, FileEntry>,
    /// Sync bookkeeping (cursors, covered ranges), committed with the data.
    pub state: BTreeMap<String, serde_json::Value>,
    /// Files removed from the lake (by compaction or a rewrite) that stay on disk for the
    /// versions that still list them, by path, with the version that removed them, until
    /// `dexlake vacuum` deletes them (and forgets them here). Read with the file list only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub removed: BTreeMap<String, u64>,
}

impl Manifest {
    /// Parses a manifest document (the single manifest of lakes written before the log).
    pub fn parse(bytes: &[u8]) -> std::result::Result<Manifest, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The manifest as one JSON document.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self)
            .expect("a manifest of strings, numbers and JSON values always serialises")
    }

    /// Committed files of one dataset, in path order.
    pub fn files_of(&self, dataset: Dataset) -> impl Iterator<Item = (&String, &FileEntry)> {
        self.files_under(format!("{}/", dataset.name()))
    }

    /// Committed files of one partition, in path order (a range of the sorted file list, so
    /// its cost does not grow with the rest of the lake).
    pub fn files_in(&self, partition: &Partition) -> impl Iterator<Item = (&String, &FileEntry)> {
        self.files_under(format!("{}/", partition.dir()))
    }

    fn files_under(&self, prefix: String) -> impl Iterator<Item = (&String, &FileEntry)> {
        self.files
            .range(prefix.clone()..)
            .take_while(move |(p, _)| p.starts_with(&prefix))
    }
}

/// Datasets whose folder holds at least one file, in documentation order.
pub fn datasets_with_files(store: &dyn Store) -> Result<Vec<Dataset>> {
    let mut out = Vec::new();
    for dataset in Dataset::ALL {
        if !store.list(dataset.name())?.is_empty() {
            out.push(dataset);
        }
    }
    Ok(out)
}
