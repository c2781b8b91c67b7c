//! The manifest under `<lake>/_dexlake/`: which files are committed, plus the sync layer's
//! bookkeeping. Replacing `manifest.json` (by an atomic rename) is the one moment files become
//! part of the lake.
//!
//! A commit runs in this order, under the writer lock:
//! 1. `journal.json` is written, naming the files the commit adds and removes;
//! 2. each new data file is written to a hidden temporary name, synced and renamed into place;
//! 3. the current `manifest.json` is copied to `manifest.prev.json`, then replaced: the
//!    commit point;
//! 4. files the commit removed (by compaction) are deleted, then the journal.
//!
//! Recovery (the next writer, or a `verify` that finds the lock free) reads the journal: if the
//! manifest already holds the commit, it finishes step 4; otherwise it deletes the files the
//! commit had added. Either way no file outside the manifest remains. A journal naming anything but data files of the layout is
//! refused before anything is deleted.
//!
//! A manifest that is missing while data folders hold files, or that does not parse, is refused
//! on load; [`Lake::repair`](super::Lake::repair) (`dexlake verify --repair`) rebuilds it from
//! the files on disk (see [`repair`](super::repair)).
//!
//! [`Lake::scan`](super::Lake::scan) reads only committed files. Readers that glob the folders
//! (DuckDB, polars, pyarrow) see a commit's new files from step 2 on, a moment before the
//! commit point, and after a crash until the next writer, `verify` or `Lake::open` cleans up;
//! they never see a partial file. A compaction's replaced files stay on disk between steps 3 and
//! 4, so a glob reader racing a compaction can count those rows twice: compact when nothing
//! else reads the lake. A `Lake::scan` planned before a compaction can fail to find a replaced
//! file; scanning again reads the new manifest.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Dataset;
use super::layout::Partition;
use super::store::{Store, check_path, temp_name};
use crate::{Error, Result};

/// Folder of the lake's own files; it never holds a `.parquet` file.
pub const META_DIR: &str = "_dexlake";
/// The manifest, relative to the lake root.
pub const MANIFEST_PATH: &str = "_dexlake/manifest.json";
/// The manifest as it was before the latest commit, kept beside the current one; `dexlake
/// verify --repair` takes the sync state from it when the current one is lost.
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
    /// Reads the manifest; a lake without one is empty.
    ///
    /// Refused with [`Error::Lake`], pointing at `dexlake verify --repair`: a missing manifest
    /// while data folders hold files (reading on would count every row twice, or fetch it all
    /// again), and a manifest that does not parse (truncated or garbage).
    pub fn load(store: &dyn Store) -> Result<Manifest> {
        if store.head(MANIFEST_PATH)?.is_none() {
            if let Some(dataset) = datasets_with_files(store)?.first() {
                return Err(Error::Lake {
                    path: store.location(MANIFEST_PATH),
                    message: format!(
                        "the manifest is missing but the lake holds data files ({dataset}/ and maybe others), so which of them are committed is unknown; run `dexlake verify --repair` to rebuild the manifest from the files"
                    ),
                });
            }
            return Ok(Manifest {
                format_version: MANIFEST_FORMAT_VERSION,
                ..Manifest::default()
            });
        }
        let bytes = store.get(MANIFEST_PATH)?;
        let m = Manifest::parse(&bytes).map_err(|source| Error::LakeDecode {
            path: store.location(MANIFEST_PATH),
            what: "the manifest is damaged; run `dexlake verify --repair` to rebuild it from the files"
                .to_owned(),
            source,
        })?;
        if m.format_version != MANIFEST_FORMAT_VERSION {
            return Err(Error::Lake {
                path: store.location(MANIFEST_PATH),
                message: format!(
                    "manifest format {} is not supported (expected {MANIFEST_FORMAT_VERSION})",
                    m.format_version
                ),
            });
        }
        // Scans open committed files by path, so none may point outside the lake.
        if let Some((path, e)) = m
            .files
            .keys()
            .find_map(|p| check_path(p).err().map(|e| (p, e)))
        {
            return Err(Error::Lake {
                path: store.location(MANIFEST_PATH),
                message: format!("the manifest lists {path:?}, outside the lake ({e})"),
            });
        }
        Ok(m)
    }

    /// Parses a manifest document.
    pub fn parse(bytes: &[u8]) -> std::result::Result<Manifest, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The manifest as JSON.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self)
            .expect("a manifest of strings, numbers and JSON values always serialises")
    }

    /// Writes the manifest atomically: the commit point. The manifest it replaces is kept
    /// first as [`PREVIOUS_MANIFEST_PATH`].
    pub fn store(&self, store: &dyn Store) -> Result<()> {
        if store.head(MANIFEST_PATH)?.is_some() {
            let current = store.get(MANIFEST_PATH)?;
            store.put(PREVIOUS_MANIFEST_PATH, &current)?;
        }
        store.put(MANIFEST_PATH, &self.to_bytes())
    }

    /// Committed files of one dataset.
    pub fn files_of(&self, dataset: Dataset) -> impl Iterator<Item = (&String, &FileEntry)> {
        self.files.iter().filter(move |(_, e)| e.dataset == dataset)
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
    /// Writes the journal atomically.
    pub fn store(&self, store: &dyn Store) -> Result<()> {
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
    if store.head(JOURNAL_PATH)?.is_none() {
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
    for meta in [MANIFEST_PATH, PREVIOUS_MANIFEST_PATH, JOURNAL_PATH] {
        delete_if_present(store, &temp_name(meta), &mut rec.temps)?;
    }
    let Some(journal) = read_journal(store)? else {
        return Ok(rec);
    };
    let manifest = Manifest::load(store)?;
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
        m.store(&store).expect("manifest");
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
            .put(&temp_name(MANIFEST_PATH), b"{")
            .expect("half manifest");

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
        m.store(&store).expect("manifest");
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
