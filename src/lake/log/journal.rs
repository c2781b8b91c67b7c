//! The journal of a commit in progress, and the recovery that reads it after a crash: the
//! journal names every file a commit adds and removes before any of them is written, so the
//! next writer can finish or undo what an interrupted commit left (see the order of a commit
//! in the folder's [`mod.rs`](super)).

use serde::{Deserialize, Serialize};

use super::manifest::Manifest;
use crate::lake::layout::{
    JOURNAL_PATH, LAST_CHECKPOINT_PATH, Partition, check_path, entry_path, temp_name,
};
use crate::lake::storage::Store;
use crate::{Error, Result};

/// The intent of a commit in progress.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    /// The manifest version the commit produces.
    pub version: u64,
    /// Data files the commit adds.
    pub add: Vec<String>,
    /// Data files the commit removes (compaction, rewrites): they stay on disk for the
    /// versions that list them.
    pub remove: Vec<String>,
    /// Data files deleted once the commit is in (a vacuum's), which recovery deletes when the
    /// commit landed; absent in journals of other commits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete: Vec<String>,
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
    /// Files a committed vacuum deleted whose deletion was finished.
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
    for path in journal
        .add
        .iter()
        .chain(&journal.remove)
        .chain(&journal.delete)
    {
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

/// Whether an interrupted commit left something for [`recover`] to clean up: a journal, or a
/// half-written journal or checkpoint pointer. A few `head`s, so that readers ask for the
/// writer lock (and create its file) only when there is something to do.
pub fn needs_recovery(store: &dyn Store) -> Result<bool> {
    if !store.has_writer_lock() {
        return Ok(false);
    }
    for path in [
        JOURNAL_PATH.to_owned(),
        temp_name(JOURNAL_PATH),
        temp_name(LAST_CHECKPOINT_PATH),
    ] {
        if store.head(&path)?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
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
    for meta in [JOURNAL_PATH, LAST_CHECKPOINT_PATH] {
        delete_if_present(store, &temp_name(meta), &mut rec.temps)?;
    }
    let Some(journal) = read_journal(store)? else {
        return Ok(rec);
    };
    let manifest = Manifest::load(store)?;
    // The entry of the interrupted commit, half written.
    delete_if_present(
        store,
        &temp_name(&entry_path(manifest.version + 1)),
        &mut rec.temps,
    )?;
    for path in journal.add.iter().chain(&journal.remove) {
        delete_if_present(store, &temp_name(path), &mut rec.temps)?;
    }
    if manifest.version >= journal.version {
        for path in &journal.delete {
            if !manifest.files.contains_key(path) && !manifest.removed.contains_key(path) {
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
    use crate::lake::dataset::Dataset;
    use crate::lake::layout::entry_path;
    use crate::lake::log::{FileEntry, commit_log};
    use crate::lake::storage::LocalStore;
    use chrono::DateTime;

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
        commit_log::start_over(&store, &m).expect("manifest");
        store.put(kept, b"PAR1").expect("put");
        Journal {
            version: 2,
            add: vec![added.into()],
            remove: vec![kept.into()],
            delete: Vec::new(),
        }
        .store(&store)
        .expect("journal");
        store.put(added, b"PAR1").expect("put");
        store
            .put(&temp_name(&entry_path(2)), b"{")
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
    fn a_committed_compaction_keeps_the_files_it_replaced() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(dir.path());
        let old = "swaps/chain=altchain/date=2024-01-01/part-a.parquet";
        let new = "swaps/chain=altchain/date=2024-01-01/part-c.parquet";
        let mut m = Manifest::load(&store).expect("empty manifest");
        m.version = 3;
        m.files.insert(new.into(), entry());
        m.removed.insert(old.into(), 3);
        commit_log::start_over(&store, &m).expect("manifest");
        store.put(old, b"PAR1").expect("put");
        store.put(new, b"PAR1").expect("put");
        Journal {
            version: 3,
            add: vec![new.into()],
            remove: vec![old.into()],
            delete: Vec::new(),
        }
        .store(&store)
        .expect("journal");

        let rec = recover(&store).expect("recover");
        assert!(rec.finished.is_empty() && rec.rolled_back.is_empty());
        assert_eq!(store.head(old).expect("head"), Some(4), "retained");
        assert_eq!(store.head(new).expect("head"), Some(4));
        assert_eq!(store.head(JOURNAL_PATH).expect("head"), None);
    }

    #[test]
    fn a_committed_vacuum_finishes_its_deletions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(dir.path());
        let old = "swaps/chain=altchain/date=2024-01-01/part-a.parquet";
        let new = "swaps/chain=altchain/date=2024-01-01/part-c.parquet";
        let mut m = Manifest::load(&store).expect("empty manifest");
        m.version = 3;
        m.files.insert(new.into(), entry());
        commit_log::start_over(&store, &m).expect("manifest");
        store.put(old, b"PAR1").expect("put");
        store.put(new, b"PAR1").expect("put");
        Journal {
            version: 3,
            add: Vec::new(),
            remove: Vec::new(),
            delete: vec![old.into()],
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
