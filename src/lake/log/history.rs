//! The lake's history: one [`CommitRecord`] per commit (version, time, operation, files and
//! rows added and removed per dataset, the state keys it set), kept so that `dexlake log`
//! reads a long log in a few files.
//!
//! A record is derived from its log entry alone ([`CommitRecord::of`]): the entry names the
//! files it adds with their rows, the files it removes (their dataset is their path's first
//! folder) and, since the history exists, the rows those removed files held
//! ([`Commit::removed_rows`], filled at commit time from the manifest), and the files a vacuum
//! deleted ([`Commit::forget`]). Entries are deleted by vacuums, so every checkpoint first writes the records of the commits
//! since the one before it to `_dexlake/history/<version>.json` ([`write_records`]); history
//! files are never deleted. [`read_history`] reads them and the entries after the newest one.
//!
//! A commit older than the history (written before it was kept) whose entry is gone has no
//! record: [`History::unrecorded_before`] says from which version on the records are whole.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::commit_log::{Commit, read_entry};
use super::manifest::MANIFEST_FORMAT_VERSION;
use crate::lake::dataset::Dataset;
use crate::lake::layout::{HISTORY_DIR, history_path, version_of};
use crate::lake::storage::Store;
use crate::{Error, Result};

/// What one commit changed in one dataset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetChange {
    /// Files the commit added.
    pub files_added: u64,
    /// Rows in them.
    pub rows_added: u64,
    /// Files the commit removed (replaced by compaction or by a rewrite).
    pub files_removed: u64,
    /// Rows in them; `None` for a commit written before the history was kept, whose entry
    /// does not say.
    pub rows_removed: Option<u64>,
    /// Files a vacuum deleted from disk (removed by earlier commits; no kept version lists
    /// them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub files_vacuumed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One commit, as the history shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitRecord {
    /// The version the commit produced.
    pub version: u64,
    /// When it was committed.
    pub committed_at: Option<DateTime<Utc>>,
    /// What made it: `sync`, `follow`, `compact`, `repair`, …; `write` for a transaction
    /// that did not name itself.
    pub operation: String,
    /// What it changed, per dataset it touched.
    pub datasets: BTreeMap<Dataset, DatasetChange>,
    /// The state keys it set (the sync layer's cursors and covered ranges), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state: Vec<String>,
}

/// The operation of a commit that did not name itself.
pub const WRITE: &str = "write";
/// The operation of the new base a repair writes (`dexlake verify --repair`).
pub const REPAIR: &str = "repair";

impl CommitRecord {
    /// The record of `commit`.
    pub fn of(commit: &Commit) -> CommitRecord {
        let mut datasets: BTreeMap<Dataset, DatasetChange> = BTreeMap::new();
        for entry in commit.add.values() {
            let change = datasets.entry(entry.dataset).or_default();
            change.files_added += 1;
            change.rows_added += entry.rows;
        }
        let dataset_of = |path: &str| {
            path.split('/')
                .next()
                .and_then(|d| d.parse::<Dataset>().ok())
        };
        for dataset in commit.remove.iter().filter_map(|p| dataset_of(p)) {
            datasets.entry(dataset).or_default().files_removed += 1;
        }
        for dataset in commit.forget.iter().filter_map(|p| dataset_of(p)) {
            datasets.entry(dataset).or_default().files_vacuumed += 1;
        }
        for (dataset, change) in &mut datasets {
            if change.files_removed > 0 {
                change.rows_removed = commit.removed_rows.get(dataset.name()).copied();
            } else {
                change.rows_removed = Some(0);
            }
        }
        CommitRecord {
            version: commit.version,
            committed_at: commit.committed_at,
            operation: commit.operation.clone().unwrap_or_else(|| WRITE.to_owned()),
            datasets,
            state: commit.state.keys().cloned().collect(),
        }
    }
}

/// A history file: the records of the commits after the checkpoint before it.
#[derive(Debug, Serialize, Deserialize)]
struct HistoryFile {
    format_version: u32,
    records: Vec<CommitRecord>,
}

/// Writes `records` (the commits since the previous checkpoint, in version order) as the
/// history file of `version`. Nothing is written for no records.
pub fn write_records(store: &dyn Store, version: u64, records: &[CommitRecord]) -> Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let bytes = serde_json::to_vec(&HistoryFile {
        format_version: MANIFEST_FORMAT_VERSION,
        records: records.to_vec(),
    })
    .expect("records of strings and numbers always serialise");
    store.put(&history_path(version), &bytes)
}

/// The lake's history as far as it is recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// One record per commit, newest first.
    pub records: Vec<CommitRecord>,
    /// When some commits have no record (written before the history was kept, their entries
    /// since cleaned up): the version from which on every commit has one. `None` when every
    /// commit from the first has its record.
    pub unrecorded_before: Option<u64>,
}

/// Reads the history up to `version` (the lake's version as the caller read it): the history
/// files, then the log entries after the newest of them. Costs one listing of the history
/// folder, one read per history file (each holds up to the checkpoint interval's commits),
/// and at most the checkpoint interval's entries.
pub fn read_history(store: &dyn Store, version: u64) -> Result<History> {
    let mut files: Vec<(u64, String)> = store
        .list(HISTORY_DIR)?
        .into_iter()
        .filter_map(|p| version_of(&p).map(|v| (v, p)))
        .collect();
    files.sort_unstable();
    let mut by_version: BTreeMap<u64, CommitRecord> = BTreeMap::new();
    for (_, path) in &files {
        let bytes = store.get(path)?;
        let file: HistoryFile =
            serde_json::from_slice(&bytes).map_err(|source| Error::LakeDecode {
                path: store.location(path),
                what: "a history file is damaged; the data and its manifest are not affected"
                    .into(),
                source,
            })?;
        for r in file.records {
            if r.version <= version {
                by_version.insert(r.version, r);
            }
        }
    }
    // The commits after the newest history file are in their entries; so may be older ones
    // (a lake whose checkpoints predate the history), as far as the clean-up left them.
    let mut v = version;
    while v > 0 && !by_version.contains_key(&v) {
        match read_entry(store, v)? {
            Some((commit, _)) => {
                by_version.insert(v, CommitRecord::of(&commit));
                v -= 1;
            }
            None => break,
        }
    }
    let mut first_whole = version + 1;
    while first_whole > 1 && by_version.contains_key(&(first_whole - 1)) {
        first_whole -= 1;
    }
    let unrecorded_before = (first_whole > 1 && version > 0).then_some(first_whole);
    let records = by_version
        .into_values()
        .rev()
        .filter(|r| r.version >= first_whole)
        .collect();
    Ok(History {
        records,
        unrecorded_before,
    })
}
