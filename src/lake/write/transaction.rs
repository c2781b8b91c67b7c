//! [`Transaction`]: staged batches and state that become visible together at
//! [`Transaction::commit`], the summary of what a commit added, and the retries of a commit
//! that lost its version to another writer on an object store.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;

use super::batch::check_batch;
use super::ids::IdCache;
use super::merge::MergeSmall;
use super::writer;
use crate::Result;
use crate::lake::base::Base;
use crate::lake::dataset::Dataset;
use crate::lake::layout::Partition;
use crate::lake::log::{self, Manifest};
use crate::lake::storage::WriterLock;

/// What a commit added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitSummary {
    /// New rows per dataset (after dropping records whose key was already present).
    pub rows_added: BTreeMap<Dataset, u64>,
    /// Number of data files added.
    pub files_added: usize,
    /// Partitions the commit wrote files into.
    pub partitions: BTreeSet<Partition>,
    /// New rows per tag of [`Transaction::write_tagged`] (untagged writes are not counted here).
    pub rows_added_by_tag: BTreeMap<u64, u64>,
    /// Committed small files the commit merged with its new rows and removed
    /// ([`Transaction::merge_small_files`]).
    pub files_merged: usize,
}

/// How many times a commit on an object store is tried when other writers keep taking its
/// version first.
pub const COMMIT_ATTEMPTS: usize = 20;

/// A write transaction: staged batches and state become visible together at
/// [`Transaction::commit`]; dropping it without committing discards them.
pub struct Transaction<'a> {
    lake: &'a Base,
    ids: &'a IdCache,
    _lock: WriterLock,
    manifest: Arc<Manifest>,
    staged: BTreeMap<Dataset, Vec<RecordBatch>>,
    /// The tag of each staged batch, in the order of `staged`.
    tags: BTreeMap<Dataset, Vec<Option<u64>>>,
    state: BTreeMap<String, serde_json::Value>,
    /// What the commit is, for the lake's history (`sync`, `follow`, …).
    operation: Option<String>,
    /// Whether (and how) the commit merges the small files of the partitions it writes.
    merge_small: Option<MergeSmall>,
}

impl<'a> Transaction<'a> {
    /// Starts a transaction on `lake`: takes the writer lock (waiting up to `timeout`, then
    /// [`Error::LakeLocked`](crate::Error::LakeLocked)), cleans up leftovers of an interrupted commit and reads the
    /// manifest it commits on.
    pub(crate) fn begin(
        lake: &'a Base,
        ids: &'a IdCache,
        timeout: Duration,
    ) -> Result<Transaction<'a>> {
        let lock = lake.lock_within(timeout)?;
        log::recover(lake.store())?;
        let manifest = lake.snapshot()?;
        Ok(Transaction {
            lake,
            ids,
            _lock: lock,
            manifest,
            staged: BTreeMap::new(),
            tags: BTreeMap::new(),
            state: BTreeMap::new(),
            operation: None,
            merge_small: None,
        })
    }
}

impl fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transaction")
            .field("lake", &self.lake.root())
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
    /// Stages a batch of `dataset` (with its
    /// [`schema::record_schema`](crate::lake::schema::record_schema)). Records whose natural key is
    /// already committed, or staged earlier, are dropped at commit.
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
        check_batch(dataset, &batch)?;
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

    /// Names what the commit is in the lake's history ([`Lake::history`](crate::lake::Lake::history)):
    /// `sync`, `follow`, …; a transaction that names nothing is a `write`.
    pub fn set_operation(&mut self, operation: impl Into<String>) {
        self.operation = Some(operation.into());
    }

    /// Merges the committed small files (fewer than
    /// [`compact_below_rows`](crate::lake::LakeOptions::compact_below_rows) rows) of each
    /// partition the commit writes with the commit's new rows into one file, and removes them in
    /// the same commit, once together they are no longer small; a commit rewrites at most twice
    /// the rows it adds (the partitions with the most small rows first). Many small commits
    /// spread over the same partitions (a sync's) so end in files of at least that many rows,
    /// each row rewritten about once, instead of one small file per commit and partition. The
    /// removed files stay for the versions that list them, as a compaction's do.
    pub fn merge_small_files(&mut self) {
        self.merge_small = Some(MergeSmall::below(
            self.lake.options().compact_below_rows as u64,
        ));
    }

    /// The state value under `key` as this transaction stands: staged in it, else committed at
    /// the version it started from.
    pub fn state(&self, key: &str) -> Option<&serde_json::Value> {
        self.state.get(key).or_else(|| self.manifest.state.get(key))
    }

    /// Writes the staged data and makes it and the state visible atomically.
    ///
    /// On a store without a writer lock (an object store), a commit whose version another
    /// writer took first, or whose preparation failed while another writer committed (which
    /// may have replaced a file it read), is prepared again on the new version (its rows
    /// checked again against what that writer added) and committed again, up to
    /// [`COMMIT_ATTEMPTS`] times. On a
    /// folder that can only happen when a writer ignored the lock, and it fails with
    /// [`Error::CommitConflict`](crate::Error::CommitConflict).
    pub fn commit(self) -> Result<CommitSummary> {
        let Transaction {
            lake,
            ids,
            _lock,
            mut manifest,
            staged,
            tags,
            state,
            operation,
            merge_small,
        } = self;
        let mut attempt = 1;
        loop {
            let base = manifest.version;
            let staged = Staged {
                batches: &staged,
                tags: &tags,
                state: &state,
                operation: operation.as_deref(),
                merge_small,
            };
            match commit_on(lake, ids, manifest, &staged) {
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

/// What a transaction commits.
struct Staged<'t> {
    batches: &'t BTreeMap<Dataset, Vec<RecordBatch>>,
    tags: &'t BTreeMap<Dataset, Vec<Option<u64>>>,
    state: &'t BTreeMap<String, serde_json::Value>,
    operation: Option<&'t str>,
    merge_small: Option<MergeSmall>,
}

/// One attempt of [`Transaction::commit`] on `manifest`: prepares the staged rows against it
/// and commits them as its next version.
fn commit_on(
    lake: &Base,
    ids: &IdCache,
    manifest: Arc<Manifest>,
    staged: &Staged<'_>,
) -> Result<CommitSummary> {
    let state = staged.state;
    let version = manifest.version + 1;
    let prepared = writer::prepare_files(
        lake,
        ids,
        &manifest,
        staged.batches,
        staged.tags,
        version,
        staged.merge_small,
    )?;
    let summary = CommitSummary {
        rows_added: prepared.rows_added,
        rows_added_by_tag: prepared.rows_added_by_tag,
        files_added: prepared.files.len(),
        files_merged: prepared.files_merged,
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
        operation: staged.operation.map(str::to_owned),
        ..log::Commit::default()
    };
    writer::commit_files(lake, commit, prepared.files, prepared.remove)?;
    Ok(summary)
}
