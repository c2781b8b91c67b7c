//! [`Lake`]: a handle on one lake (a folder or an object-store prefix): opening (and
//! recovering) it with its [`LakeOptions`], and the entry points of the reads, writes and
//! operations, which run on its base (`base.rs`) and id indexes; the top of the lake's code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::base::{Base, LakeOptions};
use super::dataset::Dataset;
use super::layout::Partition;
use super::layout::{LOG_DIR, MANIFEST_PATH, META_DIR};
use super::log::{self, AsOf, History, Manifest};
use super::ops::{
    CompactReport, RepairReport, VacuumOptions, VacuumReport, VerifyOptions, VerifyProgress,
    VerifyReport, compact, repair, vacuum, verify, verify_with,
};
use super::read::{self, ViewEngine};
use super::storage::{LocalStore, ObjectRoot, ObjectStoreLake, Store, TransferStats};
use super::write::{IdCache, Transaction};
use crate::{Error, Result};

/// A lake rooted at a folder.
#[derive(Debug, Clone)]
pub struct Lake {
    /// The store, root, options and manifest read that the reads, writes and operations use.
    base: Base,
    /// The root as the caller named it (relative, or with links), for messages.
    named: PathBuf,
    /// Committed ids of the id datasets, built by the first write that needs them.
    ids: IdCache,
}

impl Lake {
    /// Opens the lake at `root` with default options, creating it if missing (see
    /// [`open_with`](Self::open_with)).
    pub fn open(root: impl Into<PathBuf>) -> Result<Lake> {
        Lake::open_with(root, LakeOptions::default())
    }

    /// Opens the lake at `root` (a folder, or an `s3://bucket/prefix` URL whose credentials and
    /// endpoint come from the environment's AWS variables), creating its folders and manifest
    /// if missing: the entry of programs that write. An existing lake is opened as
    /// [`open_existing`](Self::open_existing) opens it, except that leftovers of an interrupted
    /// commit are cleaned up first when the writer lock is free and the lake is writable; so a
    /// read-only lake (a read-only mount, another user's folder) opens and reads.
    ///
    /// A lake whose data folders hold files but whose manifest is missing, or whose manifest
    /// is damaged or lost a log entry, is refused with [`Error::Lake`]; [`Lake::repair`]
    /// rebuilds the manifest.
    pub fn open_with(root: impl Into<PathBuf>, options: LakeOptions) -> Result<Lake> {
        let lake = Lake::connect(root.into(), options, true)?;
        let store = lake.store();
        let new = log::last_checkpoint(store)?.is_none() && store.head(MANIFEST_PATH)?.is_none();
        if new {
            // The first checkpoint of a new lake, unless another writer is at work.
            if let Some(lock) = lake.base.try_lock()? {
                log::recover(store)?;
                let m = lake.state_snapshot()?;
                if m.version == 0
                    && log::last_checkpoint(store)?.is_none()
                    && store.head(MANIFEST_PATH)?.is_none()
                {
                    log::start_over(store, &m)?;
                    // Read again from the checkpoint just written.
                    lake.base.forget_log();
                }
                drop(lock);
            }
        } else if let Some(lock) = lake.base.lock_for_cleanup()? {
            log::recover(store)?;
            drop(lock);
        }
        // The manifest must be readable.
        lake.state_snapshot()?;
        Ok(lake)
    }

    /// Opens the existing lake at `root` for reading, with default options (see
    /// [`open_existing_with`](Self::open_existing_with)).
    pub fn open_existing(root: impl Into<PathBuf>) -> Result<Lake> {
        Lake::open_existing_with(root, LakeOptions::default())
    }

    /// Opens the existing lake at `root` for reading: creates nothing, takes no lock and cleans
    /// nothing up, so it needs no write access (readers need only the log, which only grows;
    /// an interrupted commit's files are not in it). A `root` that is not a lake (see
    /// [`exists`](Self::exists)) is refused with [`Error::Lake`] naming it; a damaged manifest
    /// as by [`open_with`](Self::open_with). Writes through the handle still work: a
    /// [`transaction`](Self::transaction) takes the lock and cleans up first.
    pub fn open_existing_with(root: impl Into<PathBuf>, options: LakeOptions) -> Result<Lake> {
        let root = root.into();
        if !Lake::exists(&root)? {
            return Err(not_a_lake(root));
        }
        let lake = Lake::connect(root, options, false)?;
        lake.state_snapshot()?;
        Ok(lake)
    }

    /// Whether a lake is at `root`: a folder holding `_dexlake/`, an object-store prefix holding
    /// a lake's checkpoint pointer, manifest or log, or either holding data files under the
    /// dataset folders (a lake that lost its `_dexlake/`, which opening then refuses, pointing at
    /// `dexlake verify --repair`). Creates nothing. Reading commands check this so that they
    /// never create a lake.
    pub fn exists(root: impl Into<PathBuf>) -> Result<bool> {
        let root = root.into();
        let local = ObjectRoot::parse(&root.to_string_lossy())?.is_none();
        if local && !root.is_dir() {
            return Ok(false);
        }
        if local && root.join(META_DIR).is_dir() {
            return Ok(true);
        }
        let lake = Lake::connect(root, LakeOptions::default(), false)?;
        let store = lake.store();
        if !local
            && (log::last_checkpoint(store)?.is_some()
                || store.head(MANIFEST_PATH)?.is_some()
                || !store.list(LOG_DIR)?.is_empty())
        {
            return Ok(true);
        }
        Ok(!log::datasets_with_files(store)?.is_empty())
    }

    /// Rebuilds the manifest of the lake at `root` from the data files on disk when it is
    /// missing, damaged or lost a log entry (see ARCHITECTURE.md, "What the lake promises"),
    /// under the writer lock. A sound manifest is left as it is. Nothing is deleted: files that
    /// cannot be accounted for are listed in the report. A `root` that is not a lake (see
    /// [`exists`](Self::exists)) is refused with [`Error::Lake`], and nothing is created there.
    pub fn repair(root: impl Into<PathBuf>) -> Result<RepairReport> {
        Lake::repair_with(root, LakeOptions::default())
    }

    /// [`repair`](Self::repair) with `options` (the writer lock waits up to their
    /// [`lock_timeout`](LakeOptions::lock_timeout)).
    pub fn repair_with(root: impl Into<PathBuf>, options: LakeOptions) -> Result<RepairReport> {
        let root = root.into();
        if !Lake::exists(&root)? {
            return Err(not_a_lake(root));
        }
        repair(&Lake::connect(root, options, true)?.base)
    }

    /// Connects to the store of the lake at `root` (an object store, or a folder whose
    /// `_dexlake/` is created if missing when `create`; otherwise the folder must exist) without
    /// reading the manifest.
    fn connect(root: PathBuf, options: LakeOptions, create: bool) -> Result<Lake> {
        if let Some(object_root) = ObjectRoot::parse(&root.to_string_lossy())? {
            let store = ObjectStoreLake::from_env(object_root)?;
            let url = PathBuf::from(store.root().url());
            return Ok(Lake {
                named: url.clone(),
                base: Base::new(url, Arc::new(store), options),
                ids: IdCache::default(),
            });
        }
        if create {
            let meta = root.join(META_DIR);
            std::fs::create_dir_all(&meta).map_err(|e| Error::io("creating folder", &meta, e))?;
        }
        let named = root.clone();
        let root = root
            .canonicalize()
            .map_err(|e| Error::io("resolving", &root, e))?;
        // Readers parse every `key=value` folder of a path as a hive column, so a root folder
        // with `=` in its name would add bogus columns to every scan.
        if let Some(c) = root
            .components()
            .find(|c| c.as_os_str().to_string_lossy().contains('='))
        {
            return Err(Error::Lake {
                path: root.clone(),
                message: format!(
                    "the folder name {:?} contains `=`, which hive readers take for a partition column; choose another lake folder",
                    c.as_os_str()
                ),
            });
        }
        Ok(Lake {
            base: Base::new(root.clone(), Arc::new(LocalStore::new(root)), options),
            named,
            ids: IdCache::default(),
        })
    }

    /// The same lake read as of an older version (or a time: the last version committed at or
    /// before it): every read of the returned handle (scans, the query, coverage, state,
    /// history, views) sees exactly the files and the state committed at that version, however
    /// the lake changes meanwhile; its writes are refused. A version newer than the lake's, or
    /// one a vacuum left behind (its files or log deleted), is refused with
    /// [`Error::InvalidArgument`] naming the oldest readable version.
    ///
    /// The files the version lists stay on disk while a vacuum's retention covers it; a handle
    /// pinned to a version that a vacuum with a shorter retention then leaves can fail to find
    /// a file, as any reader of a vacuumed version does.
    pub fn at(&self, as_of: impl Into<AsOf>) -> Result<Lake> {
        let newest = self.base.newest_state()?;
        let manifest = log::manifest_as_of(self.store(), &newest, as_of.into())?;
        Ok(Lake {
            base: self.base.pinned_to(manifest),
            named: self.named.clone(),
            ids: IdCache::default(),
        })
    }

    /// The version this handle reads: the one it is pinned to ([`at`](Self::at)), else the
    /// newest committed (0 for a lake without a commit), read now without the file list
    /// (only the commits since this handle's last read).
    pub fn version(&self) -> Result<u64> {
        Ok(self.state_snapshot()?.version)
    }

    /// The version this handle is pinned to by [`at`](Self::at), if it is.
    pub fn pinned_version(&self) -> Option<u64> {
        self.base.pinned_version()
    }

    /// The oldest version [`at`](Self::at) can still read (see `dexlake vacuum`).
    pub fn oldest_readable_version(&self) -> Result<u64> {
        log::oldest_readable(self.store(), &*self.base.newest_state()?)
    }

    /// The lake's root: its folder, or its URL (`s3://bucket/prefix`) on an object store.
    pub fn root(&self) -> &Path {
        self.base.root()
    }

    /// The root as it was named when the lake was opened (a relative folder stays relative),
    /// as answers name the lake in their messages.
    pub fn named_root(&self) -> &Path {
        &self.named
    }

    /// The options the lake was opened with.
    pub fn options(&self) -> &LakeOptions {
        self.base.options()
    }

    /// The same lake with other options (for example a longer lock timeout).
    pub fn with_options(mut self, options: LakeOptions) -> Lake {
        self.base.set_options(options);
        self
    }

    /// The file access of the lake.
    pub fn store(&self) -> &dyn Store {
        self.base.store()
    }

    /// The parts of the lake its reads, writes and operations run on, for the readers above
    /// the lake (the analytics' own Parquet reads).
    pub(crate) fn base(&self) -> &Base {
        &self.base
    }

    /// What this handle (and its clones) fetched from the lake's object store so far: GET
    /// requests and their bytes, the lake's own reads (its log, footers, column chunks, whole
    /// files). A folder is read in place and counts nothing; the files polars scans itself are
    /// not counted either.
    pub fn transfer_stats(&self) -> TransferStats {
        self.store().transfer_stats()
    }

    /// The committed manifest as of now (a copy; [`snapshot`](Self::snapshot) shares it).
    pub fn manifest(&self) -> Result<Manifest> {
        self.base.manifest()
    }

    /// The committed manifest as of now, shared: reads only the commits since this handle's
    /// last read.
    pub fn snapshot(&self) -> Result<Arc<Manifest>> {
        self.base.snapshot()
    }

    /// The committed manifest as of now without its file list (empty): the state and the
    /// version, read without the cost of the files.
    fn state_snapshot(&self) -> Result<Arc<Manifest>> {
        self.base.state_snapshot()
    }

    /// Starts a write transaction: takes the writer lock (waiting up to
    /// [`LakeOptions::lock_timeout`], then [`Error::LakeLocked`]) and cleans up leftovers of an
    /// interrupted commit.
    pub fn transaction(&self) -> Result<Transaction<'_>> {
        self.transaction_within(self.options().lock_timeout)
    }

    /// [`transaction`](Self::transaction), waiting up to `timeout` for another writer instead
    /// of [`LakeOptions::lock_timeout`]; a sync commit holding fetched rows waits this way.
    pub fn transaction_within(&self, timeout: Duration) -> Result<Transaction<'_>> {
        Transaction::begin(&self.base, &self.ids, timeout)
    }

    /// A polars `LazyFrame` over the committed files of `dataset`, with the hive columns
    /// `chain`, `interval` (candles and price history) and `date`, so filters on them prune files and filters on the time
    /// column prune row groups.
    pub fn scan(&self, dataset: Dataset) -> Result<polars::prelude::LazyFrame> {
        read::scan(&self.base, &*self.snapshot()?, dataset)
    }

    /// Where the committed files of `dataset` are, for an engine that scans them itself (the
    /// Python package's `Lake.scan` hands them to polars): local paths, or `s3://` URLs on an
    /// object store. Each is checked against its manifest entry's size first, as
    /// [`scan`](Self::scan) checks them; the hive columns (`chain`, an optional key, `date`)
    /// are read from the paths.
    pub fn scan_locations(&self, dataset: Dataset) -> Result<Vec<PathBuf>> {
        read::locations(&self.base, &*self.snapshot()?, dataset)
    }

    /// The lake's history, newest commit first: per commit its version, time, operation,
    /// files and rows added and removed per dataset, and the state keys it set (see
    /// `dexlake log`). Reads the history files written at each checkpoint and the log entries
    /// after the newest of them, so a long log costs a few reads.
    pub fn history(&self) -> Result<History> {
        let version = self.state_snapshot()?.version;
        log::read_history(self.store(), version)
    }

    /// A script that defines, for `engine`, one view per dataset over exactly the files the
    /// lake commits now (`dexlake views`): DuckDB SQL (`duckdb -init views.sql`) or PySpark. A
    /// dataset without files gets a comment instead of a view.
    pub fn views(&self, engine: ViewEngine) -> Result<String> {
        read::views_script(&self.base, &*self.snapshot()?, engine)
    }

    /// A committed state value. Reads only the state (never the file list) and, on a handle
    /// that read the lake before, only the commits since.
    pub fn state(&self, key: &str) -> Result<Option<serde_json::Value>> {
        Ok(self.state_snapshot()?.state.get(key).cloned())
    }

    /// Every committed state value whose key starts with `prefix`.
    pub fn states(&self, prefix: &str) -> Result<BTreeMap<String, serde_json::Value>> {
        Ok(self
            .state_snapshot()?
            .state
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    /// Committed rows of a dataset.
    pub fn row_count(&self, dataset: Dataset) -> Result<u64> {
        Ok(self
            .snapshot()?
            .files_of(dataset)
            .map(|(_, e)| e.rows)
            .sum())
    }

    /// Checks the lake against its manifest without blocking writers and without writing to a
    /// sound lake: the writer lock is taken only to clean up after an interrupted commit, when
    /// one left something, the lock is free and the lake is writable, then released; the checks
    /// read the committed manifest of the moment, and files of a commit in progress (named by its
    /// journal) are not reported. A commit landing during the check makes it start again (a few
    /// times at most), so the report describes one manifest version.
    pub fn verify(&self) -> Result<VerifyReport> {
        verify(&self.base)
    }

    /// [`verify`](Self::verify) as `options` ask: with [`VerifyOptions::deep`], every page of
    /// every committed file is also decoded, and `progress` is told after each file.
    pub fn verify_with(
        &self,
        options: &VerifyOptions,
        progress: &(dyn Fn(VerifyProgress) + Sync),
    ) -> Result<VerifyReport> {
        verify_with(&self.base, options, progress)
    }

    /// Merges the small files of each partition into larger ones in one atomic commit. Each
    /// partition's files are merged in their sorted order a batch at a time and the result is
    /// streamed to disk, so memory stays bounded however large the lake (see
    /// ARCHITECTURE.md, "What the lake promises").
    pub fn compact(&self) -> Result<CompactReport> {
        compact::compact(&self.base)
    }

    /// Deletes what no version within `options.retain` needs (`dexlake vacuum`): the files that
    /// compactions and rewrites replaced and that no kept version lists, and the log older than
    /// the checkpoint the oldest kept version is read from. Every version committed within the
    /// retention, and the last one before it, stays readable by [`at`](Self::at). Runs under
    /// the writer lock and records itself in the log (operation `vacuum`) when it deletes
    /// anything; a dry run only reports.
    pub fn vacuum(&self, options: VacuumOptions) -> Result<VacuumReport> {
        vacuum(&self.base, options)
    }

    /// [`compact`](Self::compact) limited to `partitions` (for example those a sync wrote, from
    /// [`CommitSummary::partitions`](super::CommitSummary::partitions)), merging every file of
    /// fewer than [`max_rows_per_file`](LakeOptions::max_rows_per_file) rows, so each partition
    /// ends with one file per that many rows.
    pub fn compact_partitions(&self, partitions: &BTreeSet<Partition>) -> Result<CompactReport> {
        compact::compact_partitions(&self.base, partitions)
    }

    /// [`compact`](Self::compact) limited to `partitions`: merges only the files of fewer than
    /// [`compact_below_rows`](LakeOptions::compact_below_rows) rows, leaving larger ones as
    /// they are. What a sync whose commits merged their small files
    /// ([`Transaction::merge_small_files`](super::Transaction::merge_small_files)) runs at its
    /// end: only what is still small is rewritten.
    pub fn compact_small_in(&self, partitions: &BTreeSet<Partition>) -> Result<CompactReport> {
        compact::compact_small_in(&self.base, partitions)
    }
}

/// The refusal of a root that is not a lake, by a command that never creates one.
fn not_a_lake(root: PathBuf) -> Error {
    Error::Lake {
        path: root,
        message: "not a dexlake lake (no `_dexlake/` folder and no data files); `dexlake sync`, or a program writing through `Lake::open`, creates one".to_owned(),
    }
}
