//! [`Base`]: what the reads, writes and operations of a lake run on (its store, its root as
//! messages name it, its [`LakeOptions`], the newest manifest it read or the version it is
//! pinned to, and its writer lock),
//! below the [`Lake`](crate::lake::Lake) handle, which holds one and opens it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::layout::LOG_DIR;
use super::log::{self, Manifest, ManifestView};
use super::parquet::DEFAULT_ROW_GROUP_ROWS;
use super::storage::{Store, WriterLock};
use crate::{Error, Result};

/// Tuning of a [`Lake`](crate::lake::Lake); the defaults suit a laptop.
#[derive(Debug, Clone)]
pub struct LakeOptions {
    /// How long [`Lake::transaction`](crate::lake::Lake::transaction) waits for another writer
    /// before failing with [`Error::LakeLocked`].
    pub lock_timeout: Duration,
    /// Rows per Parquet row group (chosen by measurement; see the crate's benchmarks).
    pub row_group_rows: usize,
    /// Largest number of rows written to one file; bigger partitions get several files.
    pub max_rows_per_file: usize,
    /// Files with fewer rows than this are merged by
    /// [`Lake::compact`](crate::lake::Lake::compact).
    pub compact_below_rows: usize,
    /// zstd compression level of data files.
    pub zstd_level: i32,
}

impl Default for LakeOptions {
    fn default() -> Self {
        LakeOptions {
            lock_timeout: Duration::from_secs(10),
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
            max_rows_per_file: 1 << 21,
            compact_below_rows: DEFAULT_ROW_GROUP_ROWS,
            zstd_level: 3,
        }
    }
}

/// The parts of a lake that its reads, writes and operations use: the store, the root, the
/// options and the newest manifest version read (shared by clones).
#[derive(Debug, Clone)]
pub(crate) struct Base {
    root: PathBuf,
    store: Arc<dyn Store>,
    options: LakeOptions,
    /// The newest manifest version read, shared by clones.
    log: Arc<Mutex<Option<ManifestView>>>,
    /// The manifest of the version this base is pinned to ([`Lake::at`](crate::lake::Lake::at)):
    /// every read returns it, and writes are refused.
    pinned: Option<Arc<Manifest>>,
}

impl Base {
    /// The lake at `root` (its folder, or its URL on an object store), read through `store`.
    pub(crate) fn new(root: PathBuf, store: Arc<dyn Store>, options: LakeOptions) -> Base {
        Base {
            root,
            store,
            options,
            log: Arc::default(),
            pinned: None,
        }
    }

    /// The same base pinned to `manifest`, an older (or the newest) version: its reads return
    /// that manifest, its writes are refused.
    pub(crate) fn pinned_to(&self, manifest: Manifest) -> Base {
        Base {
            pinned: Some(Arc::new(manifest)),
            ..self.clone()
        }
    }

    /// The version this base is pinned to, if it is.
    pub(crate) fn pinned_version(&self) -> Option<u64> {
        self.pinned.as_ref().map(|m| m.version)
    }

    /// The newest committed state, without its files, even on a pinned base.
    pub(crate) fn newest_state(&self) -> Result<Arc<Manifest>> {
        self.read_log_newest(false)
    }

    /// The refusal of a write on a pinned base.
    fn check_writable(&self) -> Result<()> {
        match &self.pinned {
            Some(m) => Err(Error::Lake {
                path: self.root.clone(),
                message: format!(
                    "this handle reads the lake as of version {}; it cannot write (open the lake again to write)",
                    m.version
                ),
            }),
            None => Ok(()),
        }
    }

    /// The lake's root: its folder, or its URL (`s3://bucket/prefix`) on an object store.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The options the lake was opened with.
    pub(crate) fn options(&self) -> &LakeOptions {
        &self.options
    }

    /// Sets the options (the manifest read stays shared).
    pub(crate) fn set_options(&mut self, options: LakeOptions) {
        self.options = options;
    }

    /// The file access of the lake.
    pub(crate) fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// The file access of the lake, shared, for readers that outlive a borrow of it.
    pub(crate) fn shared_store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.store)
    }

    /// The committed manifest as of now (a copy; [`snapshot`](Self::snapshot) shares it).
    pub(crate) fn manifest(&self) -> Result<Manifest> {
        Ok(Arc::unwrap_or_clone(self.snapshot()?))
    }

    /// The committed manifest as of now, shared: reads only the commits since the last read.
    pub(crate) fn snapshot(&self) -> Result<Arc<Manifest>> {
        self.read_log(true)
    }

    /// The committed manifest as of now without its file list (empty): the state and the
    /// version, read without the cost of the files.
    pub(crate) fn state_snapshot(&self) -> Result<Arc<Manifest>> {
        self.read_log(false)
    }

    /// Forgets the manifest read, so the next read starts from the newest checkpoint.
    pub(crate) fn forget_log(&self) {
        *self.log.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    fn read_log(&self, files: bool) -> Result<Arc<Manifest>> {
        match &self.pinned {
            Some(m) => Ok(Arc::clone(m)),
            None => self.read_log_newest(files),
        }
    }

    fn read_log_newest(&self, files: bool) -> Result<Arc<Manifest>> {
        let mut cache = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let store = self.store.as_ref();
        let result = match cache.as_mut() {
            Some(snap) if snap.has_files || !files => snap.catch_up(store),
            _ => ManifestView::read(store, files).map(|snap| *cache = Some(snap)),
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

    /// Appends a commit to the log (the commit point) and to the manifest read. Runs under the
    /// writer lock.
    pub(crate) fn append(&self, commit: log::Commit) -> Result<()> {
        self.check_writable()?;
        let mut cache = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let store = self.store.as_ref();
        let snap = match cache.as_mut() {
            Some(snap) if snap.has_files => {
                snap.catch_up(store)?;
                snap
            }
            _ => cache.insert(ManifestView::read(store, true)?),
        };
        if snap.manifest.version + 1 != commit.version {
            // Another writer committed this version first (it ignored the lock).
            *cache = None;
            return Err(Error::CommitConflict {
                path: store.location(LOG_DIR),
                version: commit.version,
            });
        }
        let result = snap.commit(store, commit);
        if result.is_err() {
            *cache = None;
        }
        result
    }

    /// Takes the writer lock if it is free right now (see [`WriterLock::try_take`]).
    pub(crate) fn try_lock(&self) -> Result<Option<WriterLock>> {
        self.check_writable()?;
        WriterLock::try_take(self.store.as_ref())
    }

    /// The writer lock for a reader that cleans up on its way (`open`, `verify`): taken only
    /// when an interrupted commit left something to clean up ([`log::needs_recovery`]), the
    /// lock is free right now and this process may write the lake. Otherwise `None`, and
    /// nothing is created: the reader reads the committed log as it is.
    pub(crate) fn lock_for_cleanup(&self) -> Result<Option<WriterLock>> {
        if self.pinned.is_some() || !log::needs_recovery(self.store.as_ref())? {
            return Ok(None);
        }
        WriterLock::try_take_if_writable(self.store.as_ref())
    }

    /// Takes the writer lock, waiting up to [`LakeOptions::lock_timeout`].
    pub(crate) fn lock(&self) -> Result<WriterLock> {
        self.lock_within(self.options.lock_timeout)
    }

    /// Takes the writer lock, waiting up to `timeout`.
    pub(crate) fn lock_within(&self, timeout: Duration) -> Result<WriterLock> {
        self.check_writable()?;
        WriterLock::take(self.store.as_ref(), timeout)
    }
}
