//! The manifest: which files are committed, plus the sync layer's bookkeeping, and the
//! journal that makes a commit atomic. How the manifest is stored (a commit log with
//! checkpoints, so that a commit costs the same whatever the size of the lake) is in
//! [`log`].
//!
//! A commit runs in this order, under the writer lock:
//! 1. `journal.json` is written, naming the files the commit adds and removes;
//! 2. each new data file is written to a hidden temporary name, synced and renamed into place;
//! 3. the commit's log entry `_dexlake/log/<version>.json` is written (atomically): the commit
//!    point;
//! 4. files the commit removed (by compaction) are deleted, then the journal;
//! 5. now and then, a checkpoint of the whole manifest is written after the entry.
//!
//! Recovery (the next writer, or a `verify` that finds the lock free) reads the journal: if the
//! log already holds the commit, it finishes step 4; otherwise it deletes the files the
//! commit had added. Either way no file outside the manifest remains. A journal naming anything but data files of the layout is
//! refused before anything is deleted.
//!
//! A manifest that is missing while data folders hold files, or any part of it that does not
//! parse, is refused on load; [`Lake::repair`](super::Lake::repair) (`dexlake verify
//! --repair`) rebuilds it from the files on disk (see [`repair`](super::repair)).
//!
//! [`Lake::scan`](super::Lake::scan) reads only committed files. Readers that glob the folders
//! (DuckDB, polars, pyarrow) see a commit's new files from step 2 on, a moment before the
//! commit point, and after a crash until the next writer, `verify` or `Lake::open` cleans up;
//! they never see a partial file. A compaction's replaced files stay on disk between steps 3 and
//! 4, so a glob reader racing a compaction can count those rows twice: compact when nothing
//! else reads the lake, or read the committed file list (`docs/datasets.md`). A `Lake::scan`
//! planned before a compaction can fail to find a replaced file; scanning again reads the new
//! manifest.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Dataset;
use super::layout::Partition;
use super::log::{self, Snapshot};
use super::store::{Store, check_path, temp_name};
use crate::{Error, Result};

/// Folder of the lake's own files; it never holds a `.parquet` file.
pub const META_DIR: &str = "_dexlake";
/// The single manifest document of lakes written before the commit log: read as the
/// checkpoint of its version, replaced by the log at the next commit.
pub const MANIFEST_PATH: &str = "_dexlake/manifest.json";
/// The manifest before the latest commit, beside [`MANIFEST_PATH`] in lakes written before the
/// commit log.
pub const PREVIOUS_MANIFEST_PATH: &str = "_dexlake/manifest.prev.json";
/// The journal of the commit in progress, relative to the lake root.
pub const JOURNAL_PATH: &str = "_dexlake/journal.json";
/// The writer lock file, relative to the lake root.
pub const LOCK_PATH: &str = "_dexlake/lock";
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
}

impl Manifest {
    /// Reads the newest committed manifest, files included (see [`log`]); a lake
    /// without one is empty.
    ///
    /// Refused with [`Error::Lake`], pointing at `dexlake verify --repair`: a missing manifest
    /// while data folders hold files (reading on would count every row twice, or fetch it all
    /// again), and a part of it that does not parse (truncated or garbage).
    pub fn load(store: &dyn Store) -> Result<Manifest> {
        let snap = Snapshot::read(store, true)?;
        Ok(std::sync::Arc::unwrap_or_clone(snap.manifest))
    }

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

/// The intent of a commit in progress.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    /// The manifest version the commit produces.
    pub version: u64,
    /// Data files the commit adds.
    pub add: Vec<String>,
    /// Data files the commit removes (compaction).
    pub remove: Vec<String>,
}

impl Journal {
    /// Writes the journal atomically. A store without a writer lock keeps no journal (it
    /// would be shared by writers running side by side): there, an interrupted commit leaves
    /// its files unreferenced, and readers never see them.
    pub fn store(&self, store: &dyn Store) -> Result<()> {
        if !store.has_writer_lock() {
            return Ok(());
        }
        let bytes = serde_json::to_vec_pretty(self)
            .expect("a journal of strings and numbers always serialises");
        store.put(JOURNAL_PATH, &bytes)
    }
}

/// What recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Files of an interrupted, uncommitted commit that were deleted.
    pub rolled_back: Vec<String>,
    /// Files removed by a committed compaction whose deletion was finished.
    pub finished: Vec<String>,
    /// Temporary files deleted.
    pub temps: Vec<String>,
}

impl Recovery {
    /// Whether recovery had nothing to do.
    pub fn is_empty(&self) -> bool {
        self.rolled_back.is_empty() && self.finished.is_empty() && self.temps.is_empty()
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

/// Reads the journal of an interrupted commit, if there is one, refusing one that names
/// anything but data files of the layout.
pub fn read_journal(store: &dyn Store) -> Result<Option<Journal>> {
    if !store.has_writer_lock() || store.head(JOURNAL_PATH)?.is_none() {
        return Ok(None);
    }
    let bytes = store.get(JOURNAL_PATH)?;
    let journal: Journal = serde_json::from_slice(&bytes).map_err(|source| Error::LakeDecode {
        path: store.location(JOURNAL_PATH),
        what: "the commit journal is not valid".to_owned(),
        source,
    })?;
    // The journal decides what is deleted, so every path in it must be a data file of the
    // layout before anything is touched.
    for path in journal.add.iter().chain(&journal.remove) {
        if let Err(e) = check_path(path).and_then(|()| Partition::from_file_path(path).map(drop)) {
            return Err(Error::Lake {
                path: store.location(JOURNAL_PATH),
                message: format!(
                    "the commit journal names {path:?}, which is not a data file of this lake ({e}); nothing was deleted. If no dexlake process writes to this lake, inspect the journal and remove it by hand"
                ),
            });
        }
    }
    Ok(Some(journal))
}

/// Removes the journal once its commit is done (or undone).
pub fn clear_journal(store: &dyn Store) -> Result<()> {
    if store.has_writer_lock() {
        store.delete(JOURNAL_PATH)?;
    }
    Ok(())
}

fn delete_if_present(store: &dyn Store, path: &str, into: &mut Vec<String>) -> Result<()> {
    if store.head(path)?.is_some() {
        store.delete(path)?;
        into.push(path.to_owned());
    }
    Ok(())
}

/// Cleans up after an interrupted commit. Must run under the writer lock.
///
/// A journal that names anything but data files of the lake's layout (a `..`, an absolute
/// path, another folder) is refused with [`Error::Lake`] before anything is deleted.
pub fn recover(store: &dyn Store) -> Result<Recovery> {
    let mut rec = Recovery::default();
    if !store.has_writer_lock() {
        // Other writers may be at work: nothing of theirs is touched.
        return Ok(rec);
    }
    for meta in [JOURNAL_PATH, log::LAST_CHECKPOINT_PATH] {
        delete_if_present(store, &temp_name(meta), &mut rec.temps)?;
    }
    let Some(journal) = read_journal(store)? else {
        return Ok(rec);
    };
    let manifest = Manifest::load(store)?;
    // The entry of the interrupted commit, half written.
    delete_if_present(
        store,
        &temp_name(&log::entry_path(manifest.version + 1)),
        &mut rec.temps,
    )?;
    for path in journal.add.iter().chain(&journal.remove) {
        delete_if_present(store, &temp_name(path), &mut rec.temps)?;
    }
    if manifest.version >= journal.version {
        for path in &journal.remove {
            if !manifest.files.contains_key(path) {
                delete_if_present(store, path, &mut rec.finished)?;
            }
        }
    } else {
        for path in &journal.add {
            if !manifest.files.contains_key(path) {
                delete_if_present(store, path, &mut rec.rolled_back)?;
            }
        }
    }
    store.delete(JOURNAL_PATH)?;
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lake::store::LocalStore;

    fn entry() -> FileEntry {
        FileEntry {
            dataset: Dataset::Swaps,
            rows: 1,
            bytes: 4,
            min_time: DateTime::UNIX_EPOCH,
            max_time: DateTime::UNIX_EPOCH,
            schema_version: 1,
            min_id: None,
            max_id: None,
        }
    }

    #[test]
    fn an_uncommitted_commit_is_rolled_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(dir.path());
        let kept = "swaps/chain=altchain/date=2024-01-01/part-a.parquet";
        let added = "swaps/chain=altchain/date=2024-01-01/part-b.parquet";
        let mut m = Manifest::load(&store).expect("empty manifest");
        m.version = 1;
        m.files.insert(kept.into(), entry());
        log::start_over(&store, &m).expect("manifest");
        store.put(kept, b"PAR1").expect("put");
        Journal {
            version: 2,
            add: vec![added.into()],
            remove: vec![kept.into()],
        }
        .store(&store)
        .expect("journal");
        store.put(added, b"PAR1").expect("put");
        store
            .put(&temp_name(&log::entry_path(2)), b"{")
            .expect("half log entry");

        let rec = recover(&store).expect("recover");
        assert_eq!(rec.rolled_back, vec![added.to_owned()]);
        assert!(rec.finished.is_empty());
        assert_eq!(store.head(added).expect("head"), None);
        assert_eq!(
            store.head(kept).expect("head"),
            Some(4),
            "committed file kept"
        );
        assert_eq!(store.head(JOURNAL_PATH).expect("head"), None);
        assert!(recover(&store).expect("again").is_empty());
    }

    #[test]
    fn a_committed_compaction_finishes_its_deletions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(dir.path());
        let old = "swaps/chain=altchain/date=2024-01-01/part-a.parquet";
        let new = "swaps/chain=altchain/date=2024-01-01/part-c.parquet";
        let mut m = Manifest::load(&store).expect("empty manifest");
        m.version = 3;
        m.files.insert(new.into(), entry());
        log::start_over(&store, &m).expect("manifest");
        store.put(old, b"PAR1").expect("put");
        store.put(new, b"PAR1").expect("put");
        Journal {
            version: 3,
            add: vec![new.into()],
            remove: vec![old.into()],
        }
        .store(&store)
        .expect("journal");

        let rec = recover(&store).expect("recover");
        assert_eq!(rec.finished, vec![old.to_owned()]);
        assert!(rec.rolled_back.is_empty());
        assert_eq!(store.head(old).expect("head"), None);
        assert_eq!(store.head(new).expect("head"), Some(4));
    }
}
