//! The lake: hive-partitioned Parquet with a transactional manifest.
//!
//! Layout: `<lake>/<dataset>/chain=<altchain|evm-<chain_id>>/[interval=<seconds>/]date=YYYY-MM-DD/part-<id>.parquet`,
//! with the lake's own files under `<lake>/_dexlake/` (see [`manifest`]). DuckDB's
//! `read_parquet('<lake>/swaps/**/*.parquet', hive_partitioning = true)`, polars'
//! `scan_parquet(..., hive_partitioning=True)` and `pyarrow.dataset(..., partitioning="hive")`
//! read the folders as they are.
//!
//! ```no_run
//! use dexlake::lake::{Dataset, Lake, convert};
//! # fn demo(swaps: &[dexlake::api::models::Swap]) -> dexlake::Result<()> {
//! let lake = Lake::open("./lake")?;
//! let mut tx = lake.transaction()?;
//! tx.write(Dataset::Swaps, convert::swaps_to_batch(swaps)?)?;
//! tx.set_state("swaps/cursor", serde_json::json!("abc"));
//! let summary = tx.commit()?;
//! let frame = lake.scan(Dataset::Swaps)?; // a polars LazyFrame over the committed files
//! # let _ = (summary, frame); Ok(()) }
//! ```
//!
//! The root is a local folder or an S3-compatible object store (`s3://bucket/prefix`, see
//! [`object`]); everything else is the same on both.
//!
//! Invariant: a file is part of the lake exactly when the manifest lists it. Writes to a
//! folder take the writer lock (`_dexlake/lock`), so two processes writing one lake serialise;
//! on an object store, writers run side by side and the conditional create of each log entry
//! decides which commit takes a version (the other commits again on the new version). The manifest is
//! stored as a commit log with checkpoints ([`log`]), so a commit and a state read cost the
//! same whatever the number of files; each [`Lake`] handle (and its clones) keeps the newest
//! version it read and only reads the entries committed since.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

pub mod compact;
pub mod convert;
pub mod docs;
pub(crate) mod file;
pub(crate) mod ids;
pub mod layout;
pub mod log;
pub mod manifest;
pub mod object;
pub mod repair;
pub mod sample;
pub mod scan;
pub mod schema;
pub mod store;
pub mod verify;
pub mod writer;

pub use crate::api::models::ChainFamily;
pub use compact::CompactReport;
pub use layout::Partition;
pub use manifest::{FileEntry, Manifest, Recovery};
pub use object::{ObjectRoot, ObjectStoreLake};
pub use repair::RepairReport;
pub use store::{LocalStore, Store};
pub use verify::{Problem, VerifyReport};

/// The datasets of the lake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dataset {
    /// Altchain swaps (interface 2.8), by `block_time`.
    Swaps,
    /// Altchain trades (interface 2.9), by `block_time`.
    Trades,
    /// Altchain OHLCV candles (interface 2.7), by `timestamp`.
    Candles,
    /// EVM price history points (interface 2.7), by `timestamp`.
    PriceHistory,
    /// Latest-price snapshots of both families, by `fetched_at`.
    Prices,
    /// Price-stats snapshots of both families, by `fetched_at`.
    PriceStats,
    /// Token-profile snapshots of both families, by `fetched_at`.
    TokenProfiles,
    /// Wallet-portfolio snapshots (altchain), by `fetched_at`.
    Portfolios,
}

impl Dataset {
    /// Every dataset, in documentation order.
    pub const ALL: [Dataset; 8] = [
        Dataset::Swaps,
        Dataset::Trades,
        Dataset::Candles,
        Dataset::PriceHistory,
        Dataset::Prices,
        Dataset::PriceStats,
        Dataset::TokenProfiles,
        Dataset::Portfolios,
    ];

    /// The dataset's folder name.
    pub fn name(self) -> &'static str {
        match self {
            Dataset::Swaps => "swaps",
            Dataset::Trades => "trades",
            Dataset::Candles => "candles",
            Dataset::PriceHistory => "price_history",
            Dataset::Prices => "prices",
            Dataset::PriceStats => "price_stats",
            Dataset::TokenProfiles => "token_profiles",
            Dataset::Portfolios => "portfolios",
        }
    }

    /// The column whose UTC day names the `date=` partition and which files are sorted by.
    pub fn time_column(self) -> &'static str {
        match self {
            Dataset::Swaps | Dataset::Trades => "block_time",
            Dataset::Candles | Dataset::PriceHistory => "timestamp",
            Dataset::Prices
            | Dataset::PriceStats
            | Dataset::TokenProfiles
            | Dataset::Portfolios => "fetched_at",
        }
    }

    /// The natural key within a partition: writing a record whose key is already committed in
    /// its partition is a no-op, or replaces it in datasets that
    /// [replace on write](Self::replaces_on_write). The partition (chain, interval, date)
    /// completes the key. Swaps and trades also keep each [`id`](Self::id_column) once across
    /// partitions.
    pub fn key_columns(self) -> &'static [&'static str] {
        match self {
            Dataset::Swaps | Dataset::Trades => &["id"],
            Dataset::Candles => &["token", "pool", "timestamp"],
            Dataset::PriceHistory => &["token_address", "pool_address", "timestamp"],
            Dataset::Prices | Dataset::PriceStats => {
                &["token_address", "pool_address", "fetched_at"]
            }
            Dataset::TokenProfiles => &["token_address", "fetched_at"],
            Dataset::Portfolios => &["wallet", "fetched_at"],
        }
    }

    /// The column that identifies a record across partitions: swaps and trades carry the
    /// service's `id`, which names one event wherever its `block_time` puts it. An id is stored
    /// once per dataset (both are altchain only, so once per chain); a write that moves an id to
    /// another `block_time` replaces the committed record (see [`writer::prepare_files`]).
    pub fn id_column(self) -> Option<&'static str> {
        match self {
            Dataset::Swaps | Dataset::Trades => Some("id"),
            _ => None,
        }
    }

    /// Whether a later write of a key replaces the committed record. Candles and price-history
    /// points are revised until their interval closes, so the newest write wins; swaps,
    /// trades and snapshots never change, so the first write stays and repeats are dropped.
    pub fn replaces_on_write(self) -> bool {
        matches!(self, Dataset::Candles | Dataset::PriceHistory)
    }

    /// Record columns kept only in the hive path (between `chain=` and `date=`).
    pub fn path_columns(self) -> &'static [&'static str] {
        match self {
            Dataset::Candles | Dataset::PriceHistory => &["interval"],
            _ => &[],
        }
    }

    /// Whether records carry `chain_id` (null for altchain records).
    pub fn has_chain_id(self) -> bool {
        matches!(
            self,
            Dataset::PriceHistory | Dataset::Prices | Dataset::PriceStats | Dataset::TokenProfiles
        )
    }
}

impl fmt::Display for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for Dataset {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Dataset::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Dataset::ALL.iter().map(|d| d.name()).collect();
                Error::Config(format!(
                    "unknown dataset {s:?}; expected one of {}",
                    names.join(", ")
                ))
            })
    }
}

/// Tuning of a [`Lake`]; the defaults suit a laptop.
#[derive(Debug, Clone)]
pub struct LakeOptions {
    /// How long [`Lake::transaction`] waits for another writer before failing with
    /// [`Error::LakeLocked`].
    pub lock_timeout: Duration,
    /// Rows per Parquet row group (chosen by measurement; see the crate's benchmarks).
    pub row_group_rows: usize,
    /// Largest number of rows written to one file; bigger partitions get several files.
    pub max_rows_per_file: usize,
    /// Files with fewer rows than this are merged by [`Lake::compact`].
    pub compact_below_rows: usize,
    /// zstd compression level of data files.
    pub zstd_level: i32,
}

impl Default for LakeOptions {
    fn default() -> Self {
        LakeOptions {
            lock_timeout: Duration::from_secs(10),
            row_group_rows: writer::DEFAULT_ROW_GROUP_ROWS,
            max_rows_per_file: 1 << 21,
            compact_below_rows: writer::DEFAULT_ROW_GROUP_ROWS,
            zstd_level: 3,
        }
    }
}

/// A lake rooted at a folder.
#[derive(Debug, Clone)]
pub struct Lake {
    root: PathBuf,
    store: Arc<dyn Store>,
    options: LakeOptions,
    /// The newest manifest version read, shared by clones.
    log: Arc<std::sync::Mutex<Option<log::Snapshot>>>,
    /// Committed ids of the id datasets, built by the first write that needs them.
    ids: Arc<std::sync::Mutex<BTreeMap<Dataset, ids::IdIndex>>>,
}

/// What a commit added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitSummary {
    /// New rows per dataset (after dropping records whose key was already present).
    pub rows_added: BTreeMap<Dataset, u64>,
    /// Number of data files added.
    pub files_added: usize,
    /// Partitions the commit wrote files into.
    pub partitions: std::collections::BTreeSet<Partition>,
    /// New rows per tag of [`Transaction::write_tagged`] (untagged writes are not counted here).
    pub rows_added_by_tag: BTreeMap<u64, u64>,
}

impl Lake {
    /// Opens the lake at `root` with default options, creating its folders if missing.
    pub fn open(root: impl Into<PathBuf>) -> Result<Lake> {
        Lake::open_with(root, LakeOptions::default())
    }

    /// Opens the lake at `root` (a folder, or an `s3://bucket/prefix` URL whose credentials and
    /// endpoint come from the environment's AWS variables), creating its folders and manifest
    /// if missing. When no writer holds the lock, leftovers of an interrupted commit are
    /// cleaned up first.
    ///
    /// A lake whose data folders hold files but whose manifest is missing, or whose manifest
    /// is damaged, is refused with [`Error::Lake`]; [`Lake::repair`] rebuilds the manifest.
    pub fn open_with(root: impl Into<PathBuf>, options: LakeOptions) -> Result<Lake> {
        let lake = Lake::at(root.into(), options)?;
        let store = lake.store.as_ref();
        if let Some(lock) = lake.try_lock()? {
            manifest::recover(store)?;
            let m = lake.state_snapshot()?;
            if m.version == 0
                && log::last_checkpoint(store)?.is_none()
                && store.head(manifest::MANIFEST_PATH)?.is_none()
            {
                log::start_over(store, &m)?;
                // Read again from the checkpoint just written.
                *lake
                    .log
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
            }
            drop(lock);
        } else {
            // Another writer is at work; the manifest must still be readable.
            lake.state_snapshot()?;
        }
        Ok(lake)
    }

    /// Whether a lake is at `root`: a folder that exists, or an object-store prefix that holds
    /// a lake's log or manifest. Reading commands check this so that they never create a lake.
    pub fn exists(root: impl Into<PathBuf>) -> Result<bool> {
        let root = root.into();
        if ObjectRoot::parse(&root.to_string_lossy())?.is_none() {
            return Ok(root.is_dir());
        }
        let lake = Lake::at(root, LakeOptions::default())?;
        let store = lake.store();
        Ok(log::last_checkpoint(store)?.is_some()
            || store.head(manifest::MANIFEST_PATH)?.is_some()
            || !store.list(log::LOG_DIR)?.is_empty())
    }

    /// Rebuilds the manifest of the lake at `root` from the data files on disk when it is
    /// missing or damaged (see [`repair`](mod@repair)), under the writer lock. A sound
    /// manifest is left as it is. Nothing is deleted: files that cannot be accounted for are
    /// listed in the report.
    pub fn repair(root: impl Into<PathBuf>) -> Result<RepairReport> {
        Lake::repair_with(root, LakeOptions::default())
    }

    /// [`repair`](Self::repair) with `options` (the writer lock waits up to their
    /// [`lock_timeout`](LakeOptions::lock_timeout)).
    pub fn repair_with(root: impl Into<PathBuf>, options: LakeOptions) -> Result<RepairReport> {
        repair::repair(&Lake::at(root.into(), options)?)
    }

    /// The lake at `root`, its folders created, without reading the manifest.
    fn at(root: PathBuf, options: LakeOptions) -> Result<Lake> {
        if let Some(object_root) = ObjectRoot::parse(&root.to_string_lossy())? {
            let store = ObjectStoreLake::from_env(object_root)?;
            return Ok(Lake {
                root: PathBuf::from(store.root().url()),
                store: Arc::new(store),
                options,
                log: Arc::default(),
                ids: Arc::default(),
            });
        }
        let meta = root.join(manifest::META_DIR);
        std::fs::create_dir_all(&meta).map_err(|e| Error::io("creating folder", &meta, e))?;
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
            store: Arc::new(LocalStore::new(root.clone())),
            root,
            options,
            log: Arc::default(),
            ids: Arc::default(),
        })
    }

    /// The lake's root: its folder, or its URL (`s3://bucket/prefix`) on an object store.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The options the lake was opened with.
    pub fn options(&self) -> &LakeOptions {
        &self.options
    }

    /// The same lake with other options (for example a longer lock timeout).
    pub fn with_options(mut self, options: LakeOptions) -> Lake {
        self.options = options;
        self
    }

    /// The file access of the lake.
    pub fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// The committed manifest as of now (a copy; [`snapshot`](Self::snapshot) shares it).
    pub fn manifest(&self) -> Result<Manifest> {
        Ok(Arc::unwrap_or_clone(self.snapshot()?))
    }

    /// The committed manifest as of now, shared: reads only the commits since this handle's
    /// last read.
    pub fn snapshot(&self) -> Result<Arc<Manifest>> {
        self.read_log(true)
    }

    /// The committed manifest as of now without its file list (empty): the state and the
    /// version, read without the cost of the files.
    fn state_snapshot(&self) -> Result<Arc<Manifest>> {
        self.read_log(false)
    }

    fn read_log(&self, files: bool) -> Result<Arc<Manifest>> {
        let mut cache = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let store = self.store.as_ref();
        let result = match cache.as_mut() {
            Some(snap) if snap.has_files || !files => snap.catch_up(store),
            _ => log::Snapshot::read(store, files).map(|snap| *cache = Some(snap)),
        };
        match result {
            Ok(()) => Ok(Arc::clone(
                &cache.as_ref().expect("a snapshot was just read").manifest,
            )),
            Err(e) => {
                // A damaged or missing manifest is read again from scratch next time.
                *cache = None;
                Err(e)
            }
        }
    }

    /// The committed ids of `dataset` as of `manifest` (see [`ids`]), brought up to date or
    /// built. Runs under the writer lock.
    pub(crate) fn id_index(
        &self,
        manifest: &Manifest,
        dataset: Dataset,
    ) -> Result<std::sync::MutexGuard<'_, BTreeMap<Dataset, ids::IdIndex>>> {
        let mut indexes = self
            .ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = match indexes.get_mut(&dataset) {
            Some(index) if index.version == manifest.version => true,
            Some(index) if index.version < manifest.version => {
                index.catch_up(self, manifest, dataset)?
            }
            _ => false,
        };
        if !current {
            indexes.remove(&dataset);
            let index = ids::IdIndex::build(self, manifest, dataset)?;
            indexes.insert(dataset, index);
        }
        Ok(indexes)
    }

    /// Whether `error`, from a write that started on `base`, may be another writer's doing and
    /// the write worth another attempt on the newest version: on a store without a writer
    /// lock, a commit that lost its version, or any failure while the log moved past `base`
    /// (another writer may have replaced a file the write was reading). Never on a folder.
    pub(crate) fn lost_race(&self, error: &Error, base: u64) -> Result<bool> {
        if self.store.has_writer_lock() {
            return Ok(false);
        }
        Ok(matches!(error, Error::CommitConflict { .. }) || self.snapshot()?.version != base)
    }

    /// Appends a commit to the log (the commit point) and to this handle's snapshot. Runs under
    /// the writer lock.
    pub(crate) fn append(&self, commit: log::Commit) -> Result<()> {
        let mut cache = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let store = self.store.as_ref();
        let snap = match cache.as_mut() {
            Some(snap) if snap.has_files => {
                snap.catch_up(store)?;
                snap
            }
            _ => cache.insert(log::Snapshot::read(store, true)?),
        };
        if snap.manifest.version + 1 != commit.version {
            // Another writer committed this version first (it ignored the lock).
            *cache = None;
            return Err(Error::CommitConflict {
                path: store.location(log::LOG_DIR),
                version: commit.version,
            });
        }
        let result = snap.commit(store, commit);
        if result.is_err() {
            *cache = None;
        }
        result
    }

    fn open_lock_file(&self) -> Result<File> {
        let path = self.store.location(manifest::LOCK_PATH);
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io("opening the lock file", path, e))
    }

    /// Takes the writer lock if it is free right now. A store without a lock file (an
    /// object store) always grants it: there, commits serialise on the log.
    pub(crate) fn try_lock(&self) -> Result<Option<WriterLock>> {
        if !self.store.has_writer_lock() {
            return Ok(Some(WriterLock { _file: None }));
        }
        let f = self.open_lock_file()?;
        match f.try_lock() {
            Ok(()) => Ok(Some(WriterLock { _file: Some(f) })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(Error::io(
                "locking",
                self.store.location(manifest::LOCK_PATH),
                e,
            )),
        }
    }

    /// Takes the writer lock, waiting up to [`LakeOptions::lock_timeout`].
    pub(crate) fn lock(&self) -> Result<WriterLock> {
        self.lock_within(self.options.lock_timeout)
    }

    /// Takes the writer lock, waiting up to `timeout`.
    fn lock_within(&self, timeout: Duration) -> Result<WriterLock> {
        let start = Instant::now();
        loop {
            if let Some(f) = self.try_lock()? {
                return Ok(f);
            }
            if start.elapsed() >= timeout {
                return Err(Error::LakeLocked {
                    path: self.store.location(manifest::LOCK_PATH),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts a write transaction: takes the writer lock (waiting up to
    /// [`LakeOptions::lock_timeout`], then [`Error::LakeLocked`]) and cleans up leftovers of an
    /// interrupted commit.
    pub fn transaction(&self) -> Result<Transaction<'_>> {
        self.transaction_within(self.options.lock_timeout)
    }

    /// [`transaction`](Self::transaction), waiting up to `timeout` for another writer instead
    /// of [`LakeOptions::lock_timeout`]; a sync commit holding fetched rows waits this way.
    pub fn transaction_within(&self, timeout: Duration) -> Result<Transaction<'_>> {
        let lock = self.lock_within(timeout)?;
        manifest::recover(self.store.as_ref())?;
        let manifest = self.snapshot()?;
        Ok(Transaction {
            lake: self,
            _lock: lock,
            manifest,
            staged: BTreeMap::new(),
            tags: BTreeMap::new(),
            state: BTreeMap::new(),
        })
    }

    /// A polars `LazyFrame` over the committed files of `dataset`, with the hive columns
    /// `chain`, `interval` (candles and price history) and `date`, so filters on them prune files and filters on the time
    /// column prune row groups.
    pub fn scan(&self, dataset: Dataset) -> Result<polars::prelude::LazyFrame> {
        scan::scan(self, &*self.snapshot()?, dataset)
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

    /// Checks the lake against its manifest without blocking writers: when the writer lock is
    /// free it is taken only to clean up after an interrupted commit, then released; the checks
    /// read the committed manifest of the moment, and files of a commit in progress (named by its
    /// journal) are not reported. A commit landing during the check makes it start again (a few
    /// times at most), so the report describes one manifest version.
    pub fn verify(&self) -> Result<VerifyReport> {
        verify::verify(self)
    }

    /// Merges the small files of each partition into larger ones in one atomic commit. Each
    /// partition's files are merged in their sorted order a batch at a time and the result is
    /// streamed to disk, so memory stays bounded however large the lake (see
    /// [`compact`](mod@compact)).
    pub fn compact(&self) -> Result<CompactReport> {
        compact::compact(self)
    }

    /// [`compact`](Self::compact) limited to `partitions` (for example those a sync wrote,
    /// from [`CommitSummary::partitions`]), merging every file of fewer than
    /// [`max_rows_per_file`](LakeOptions::max_rows_per_file) rows, so each partition ends
    /// with one file per that many rows.
    pub fn compact_partitions(
        &self,
        partitions: &std::collections::BTreeSet<Partition>,
    ) -> Result<CompactReport> {
        compact::compact_partitions(self, partitions)
    }
}

/// How many times a commit on an object store is tried when other writers keep taking its
/// version first.
pub const COMMIT_ATTEMPTS: usize = 20;

/// The writer lock of a lake, held until dropped (on a local folder, a lock on
/// `_dexlake/lock`; on an object store, nothing).
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: Option<File>,
}

/// A write transaction: staged batches and state become visible together at
/// [`Transaction::commit`]; dropping it without committing discards them.
pub struct Transaction<'a> {
    lake: &'a Lake,
    _lock: WriterLock,
    manifest: Arc<Manifest>,
    staged: BTreeMap<Dataset, Vec<RecordBatch>>,
    /// The tag of each staged batch, in the order of `staged`.
    tags: BTreeMap<Dataset, Vec<Option<u64>>>,
    state: BTreeMap<String, serde_json::Value>,
}

impl fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transaction")
            .field("lake", &self.lake.root)
            .field("base_version", &self.manifest.version)
            .field(
                "staged_rows",
                &self
                    .staged
                    .iter()
                    .map(|(d, b)| (*d, b.iter().map(|b| b.num_rows()).sum::<usize>()))
                    .collect::<BTreeMap<_, _>>(),
            )
            .finish()
    }
}

impl Transaction<'_> {
    /// Stages a batch of `dataset` (with its [`schema::record_schema`]). Records whose natural
    /// key is already committed, or staged earlier, are dropped at commit.
    pub fn write(&mut self, dataset: Dataset, batch: RecordBatch) -> Result<()> {
        self.stage(dataset, batch, None)
    }

    /// [`write`](Self::write) with a tag: the commit counts the rows of this batch that are new
    /// to the lake under `tag` ([`CommitSummary::rows_added_by_tag`]), so several writers
    /// sharing one commit each learn what they added. Where two tags write one key, the row the
    /// write keeps counts: the last staged record of an id (swaps, trades) or of a key in
    /// datasets that [replace on write](Dataset::replaces_on_write), the first otherwise.
    pub fn write_tagged(&mut self, dataset: Dataset, batch: RecordBatch, tag: u64) -> Result<()> {
        self.stage(dataset, batch, Some(tag))
    }

    fn stage(&mut self, dataset: Dataset, batch: RecordBatch, tag: Option<u64>) -> Result<()> {
        writer::check_batch(dataset, &batch)?;
        if batch.num_rows() > 0 {
            self.staged.entry(dataset).or_default().push(batch);
            self.tags.entry(dataset).or_default().push(tag);
        }
        Ok(())
    }

    /// Stages a state value, committed with the data.
    pub fn set_state(&mut self, key: impl Into<String>, value: serde_json::Value) {
        self.state.insert(key.into(), value);
    }

    /// Writes the staged data and makes it and the state visible atomically.
    ///
    /// On a store without a writer lock (an object store), a commit whose version another
    /// writer took first, or whose preparation failed while another writer committed (which
    /// may have replaced a file it read), is prepared again on the new version (its rows
    /// checked again against what that writer added) and committed again, up to
    /// [`COMMIT_ATTEMPTS`] times. On a
    /// folder that can only happen when a writer ignored the lock, and it fails with
    /// [`Error::CommitConflict`].
    pub fn commit(self) -> Result<CommitSummary> {
        let Transaction {
            lake,
            _lock,
            mut manifest,
            staged,
            tags,
            state,
        } = self;
        let mut attempt = 1;
        loop {
            let base = manifest.version;
            match commit_on(lake, manifest, &staged, &tags, &state) {
                Err(e) if attempt < COMMIT_ATTEMPTS && lake.lost_race(&e, base)? => {
                    // Back off a little, differently per writer, so racing writers spread out.
                    let jitter = rand::random::<u64>() % 50;
                    std::thread::sleep(Duration::from_millis(10 * attempt as u64 + jitter));
                    attempt += 1;
                    manifest = lake.snapshot()?;
                }
                result => return result,
            }
        }
    }
}

/// One attempt of [`Transaction::commit`] on `manifest`: prepares the staged rows against it
/// and commits them as its next version.
fn commit_on(
    lake: &Lake,
    manifest: Arc<Manifest>,
    staged: &BTreeMap<Dataset, Vec<RecordBatch>>,
    tags: &BTreeMap<Dataset, Vec<Option<u64>>>,
    state: &BTreeMap<String, serde_json::Value>,
) -> Result<CommitSummary> {
    let version = manifest.version + 1;
    let prepared = writer::prepare_files_tagged(lake, &manifest, staged, tags, version)?;
    let summary = CommitSummary {
        rows_added: prepared.rows_added,
        rows_added_by_tag: prepared.rows_added_by_tag,
        files_added: prepared.files.len(),
        partitions: prepared
            .files
            .iter()
            .map(|f| Partition::from_file_path(&f.path))
            .collect::<Result<_>>()?,
    };
    if prepared.files.is_empty() && prepared.remove.is_empty() && state.is_empty() {
        return Ok(summary);
    }
    drop(manifest);
    let commit = log::Commit {
        version,
        id_ranges: prepared.id_ranges,
        state: state.clone(),
        ..log::Commit::default()
    };
    writer::commit_files(lake, commit, prepared.files, prepared.remove)?;
    Ok(summary)
}
