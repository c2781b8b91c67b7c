//! `compact`: merge the small files of each partition into larger ones, in one atomic commit.
//!
//! Memory stays bounded whatever the size of the lake. Every data file is already sorted in
//! its dataset's order (time, then natural key: the order of the writer's `sort_batch`), so a
//! partition is compacted by a k-way merge of its small files, each read a few thousand rows
//! at a time, and the merged rows are streamed through a Parquet writer into files on disk,
//! a new file starting every [`max_rows_per_file`](crate::lake::LakeOptions::max_rows_per_file) rows.
//! At most [`MERGE_FAN_IN`] files are merged at once: a partition with more files is first
//! merged in groups into intermediate runs (temporary files, merged again and deleted), so
//! memory holds at most that many read batches plus the row group being encoded, per
//! partition being merged. Partitions are merged in parallel on rayon's threads, one per
//! thread.
//!
//! Crash safety: before any file is written, the commit journal names every file the
//! compaction will write (its output files and its intermediate runs, all named up front from
//! the row counts in the manifest) and the files it replaces. Outputs are written and synced
//! under their temporary names; the commit renames them into place and replaces the manifest.
//! A crash at any point leaves the committed rows as they were, and recovery (the next writer,
//! [`Lake::open`](crate::lake::Lake::open), `verify`) deletes everything the journal names
//! that the manifest does not hold, temporary names included.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use arrow_array::RecordBatch;
use arrow_row::{OwnedRow, Row, RowConverter, Rows};
use arrow_schema::SchemaRef;
use arrow_select::interleave::interleave_record_batch;
use chrono::{DateTime, Utc};
use parquet::arrow::arrow_reader::ParquetRecordBatchReader;
use rayon::prelude::*;

use crate::lake::base::Base;
use crate::lake::dataset::Dataset;
use crate::lake::layout::{Partition, data_file_name, temp_name};
use crate::lake::log::{self, FileEntry, Journal, Manifest};
use crate::lake::parquet::TRANSIENT_ZSTD_LEVEL;
use crate::lake::read::read_batches;
use crate::lake::schema::{self, SCHEMA_VERSION};
use crate::lake::write::FileWriter;
use crate::lake::write::batch::{id_range, order_encoder, time_range};
use crate::lake::write::writer::{FileData, NewFile, commit_files};
use crate::{Error, Result};

/// Most files merged at once. Memory holds one read batch of each, so this bounds the memory
/// of a merge; a partition with more small files is merged in several passes.
pub const MERGE_FAN_IN: usize = 32;

/// Rows read from each merged file at a time.
const READ_BATCH_ROWS: usize = 2_048;

/// Rows handed to the Parquet writer at a time (at most).
const WRITE_BATCH_ROWS: usize = 8_192;

/// What [`Lake::compact`](crate::lake::Lake::compact) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Partitions whose files were merged.
    pub partitions: usize,
    /// Files replaced.
    pub files_removed: usize,
    /// Files written.
    pub files_added: usize,
    /// Rows rewritten, per dataset.
    pub rows: BTreeMap<Dataset, u64>,
}

/// Runs [`Lake::compact`](crate::lake::Lake::compact).
pub fn compact(lake: &Base) -> Result<CompactReport> {
    let below = lake.options().compact_below_rows as u64;
    compact_where(lake, |_| true, below, MERGE_FAN_IN)
}

/// Runs [`Lake::compact_partitions`](crate::lake::Lake::compact_partitions).
pub fn compact_partitions(lake: &Base, partitions: &BTreeSet<Partition>) -> Result<CompactReport> {
    if partitions.is_empty() {
        return Ok(CompactReport::default());
    }
    // A sync's partitions end in one file per `max_rows_per_file` rows: every file not yet
    // full is merged, not only those under `compact_below_rows`.
    let below = lake.options().max_rows_per_file as u64;
    compact_where(lake, |p| partitions.contains(p), below, MERGE_FAN_IN)
}

/// Runs [`Lake::compact_small_in`](crate::lake::Lake::compact_small_in).
pub fn compact_small_in(lake: &Base, partitions: &BTreeSet<Partition>) -> Result<CompactReport> {
    if partitions.is_empty() {
        return Ok(CompactReport::default());
    }
    let below = lake.options().compact_below_rows as u64;
    compact_where(lake, |p| partitions.contains(p), below, MERGE_FAN_IN)
}

/// The files one partition's compaction reads and writes, all named before any is written.
#[derive(Debug)]
struct Plan {
    partition: Partition,
    /// The committed small files it replaces.
    inputs: Vec<String>,
    /// Their rows, per the manifest.
    rows: u64,
    /// The files it commits: one per `max_rows_per_file` rows.
    outputs: Vec<String>,
    /// The intermediate runs of each pass before the last, when there are more inputs than
    /// the fan-in: pass `i` merges groups of `fan_in` files of the previous pass (the inputs
    /// first) into one run each.
    passes: Vec<Vec<String>>,
}

impl Plan {
    fn new(
        partition: Partition,
        inputs: Vec<String>,
        rows: u64,
        (max_rows, fan_in): (usize, usize),
        version: u64,
        seq: &mut usize,
    ) -> Plan {
        let dir = partition.dir();
        let mut name = || {
            let path = format!("{dir}/{}", data_file_name(version, *seq));
            *seq += 1;
            path
        };
        let outputs = (0..rows.div_ceil(max_rows as u64))
            .map(|_| name())
            .collect();
        let mut passes = Vec::new();
        let mut files = inputs.len();
        while files > fan_in {
            files = files.div_ceil(fan_in);
            passes.push((0..files).map(|_| name()).collect());
        }
        Plan {
            partition,
            inputs,
            rows,
            outputs,
            passes,
        }
    }
}

/// Compacts the files of fewer than `below` rows in the partitions `keep` accepts, merging at
/// most `fan_in` files at once.
fn compact_where(
    lake: &Base,
    keep: impl Fn(&Partition) -> bool,
    below: u64,
    fan_in: usize,
) -> Result<CompactReport> {
    // On an object store another writer may commit while the files merge; the compaction then
    // loses its version (and removes its files) and is planned again on the new files.
    // A merge can also fail reading a file that such a commit replaced.
    let mut attempt = 1;
    loop {
        let base = lake.snapshot()?.version;
        match compact_once(lake, &keep, below, fan_in) {
            Err(e) if attempt < COMPACT_ATTEMPTS && lake.lost_race(&e, base)? => attempt += 1,
            result => return result,
        }
    }
}

/// How many times a compaction on an object store is planned when other writers keep taking
/// its version first.
const COMPACT_ATTEMPTS: usize = 5;

fn compact_once(
    lake: &Base,
    keep: &impl Fn(&Partition) -> bool,
    below: u64,
    fan_in: usize,
) -> Result<CompactReport> {
    let fan_in = fan_in.max(2);
    let _lock = lake.lock()?;
    log::recover(lake.store())?;
    let current = lake.snapshot()?;
    let plans = plan(lake, &current, keep, below, fan_in)?;
    let mut report = CompactReport::default();
    if plans.is_empty() {
        return Ok(report);
    }
    journal(&current, &plans).store(lake.store())?;
    let mut added = Vec::new();
    let mut removed = Vec::new();
    // Partitions merge on rayon's threads, each streaming its own files (a merge is bound by
    // one core's decode and encode); the first error stops the merges not yet started.
    let merged = plans
        .par_iter()
        .map(|plan| merge_partition(lake, plan, fan_in))
        .collect::<Result<Vec<_>>>();
    let merged = match merged {
        Ok(merged) => merged,
        Err(e) => {
            // The journal names every file any merge wrote. The error that stopped the
            // compaction is the one to report; a failing cleanup is retried by the next
            // writer's recovery.
            let _ = log::recover(lake.store());
            return Err(e);
        }
    };
    for (plan, files) in plans.into_iter().zip(merged) {
        let dataset = plan.partition.dataset;
        report.partitions += 1;
        report.files_removed += plan.inputs.len();
        report.files_added += files.len();
        *report.rows.entry(dataset).or_default() += plan.rows;
        added.extend(files);
        removed.extend(plan.inputs);
    }
    let commit = log::Commit {
        version: current.version + 1,
        operation: Some(log::COMPACT.to_owned()),
        ..log::Commit::default()
    };
    drop(current);
    commit_files(lake, commit, added, removed)?;
    Ok(report)
}

/// The compaction of every partition `keep` accepts that has more than one file of fewer than
/// `small` rows.
fn plan(
    lake: &Base,
    current: &Manifest,
    keep: impl Fn(&Partition) -> bool,
    small: u64,
    fan_in: usize,
) -> Result<Vec<Plan>> {
    let mut groups: BTreeMap<Partition, Vec<String>> = BTreeMap::new();
    for (path, entry) in &current.files {
        if entry.rows < small {
            groups
                .entry(Partition::from_file_path(path)?)
                .or_default()
                .push(path.clone());
        }
    }
    groups.retain(|partition, files| files.len() > 1 && keep(partition));
    let version = current.version + 1;
    let max_rows = lake.options().max_rows_per_file.max(1);
    let mut seq = 0;
    Ok(groups
        .into_iter()
        .map(|(partition, files)| {
            let rows = files.iter().map(|p| current.files[p].rows).sum();
            Plan::new(
                partition,
                files,
                rows,
                (max_rows, fan_in),
                version,
                &mut seq,
            )
        })
        .collect())
}

/// The journal written before the first file of a compaction: it names every file the merge
/// writes (outputs and intermediate runs), so that recovery removes them all if the commit
/// does not land, and the files the commit replaces. The commit writes the journal again,
/// naming its outputs only (the runs are gone by then).
fn journal(current: &Manifest, plans: &[Plan]) -> Journal {
    Journal {
        version: current.version + 1,
        add: plans
            .iter()
            .flat_map(|p| p.outputs.iter().chain(p.passes.iter().flatten()))
            .cloned()
            .collect(),
        remove: plans
            .iter()
            .flat_map(|p| p.inputs.iter().cloned())
            .collect(),
        delete: Vec::new(),
    }
}

/// Merges one partition's files into its planned outputs, written under their temporary names.
fn merge_partition(lake: &Base, plan: &Plan, fan_in: usize) -> Result<Vec<NewFile>> {
    let dataset = plan.partition.dataset;
    let opts = lake.options();
    let mut inputs = plan.inputs.clone();
    let mut runs_done: Vec<String> = Vec::new();
    for pass in &plan.passes {
        let mut next = Vec::with_capacity(pass.len());
        for (group, run) in inputs.chunks(fan_in).zip(pass) {
            let mut writer = FileWriter::create(
                lake,
                dataset,
                run,
                opts.row_group_rows,
                TRANSIENT_ZSTD_LEVEL,
            )?;
            merge(lake, dataset, group, |batch| writer.write(batch))?;
            writer.finish()?;
            next.push(temp_name(run));
        }
        for old in runs_done {
            lake.store().delete(&old)?;
        }
        runs_done = next.clone();
        inputs = next;
    }
    let mut outputs = Outputs {
        lake,
        plan,
        next: 0,
        open: None,
        rows: 0,
        done: Vec::new(),
    };
    merge(lake, dataset, &inputs, |batch| outputs.write(batch))?;
    let files = outputs.finish()?;
    for old in runs_done {
        lake.store().delete(&old)?;
    }
    Ok(files)
}

/// The error of a partition whose files do not hold the rows the manifest says.
fn row_count_error(lake: &Base, plan: &Plan, found: &str) -> Error {
    Error::Lake {
        path: lake.store().location(&plan.partition.dir()),
        message: format!(
            "files hold {found} rows, the manifest says {}; run verify",
            plan.rows
        ),
    }
}

/// The output files of a partition: merged rows are appended to the current file until it
/// holds `max_rows_per_file` rows, then the next planned file starts.
struct Outputs<'a> {
    lake: &'a Base,
    plan: &'a Plan,
    /// Index of the next planned output to open.
    next: usize,
    open: Option<OpenOutput>,
    /// Rows written to all outputs.
    rows: u64,
    done: Vec<NewFile>,
}

/// An output file being written, and what its manifest entry will say.
struct OpenOutput {
    writer: FileWriter,
    rows: usize,
    time: Option<(DateTime<Utc>, DateTime<Utc>)>,
    ids: Option<(i64, i64)>,
}

impl Outputs<'_> {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let dataset = self.plan.partition.dataset;
        let opts = self.lake.options();
        let max = opts.max_rows_per_file.max(1);
        let mut offset = 0;
        while offset < batch.num_rows() {
            let open = match &mut self.open {
                Some(open) => open,
                None => {
                    let Some(path) = self.plan.outputs.get(self.next) else {
                        return Err(row_count_error(self.lake, self.plan, "more"));
                    };
                    self.next += 1;
                    let writer = FileWriter::create(
                        self.lake,
                        dataset,
                        path,
                        opts.row_group_rows,
                        opts.zstd_level,
                    )?;
                    self.open.insert(OpenOutput {
                        writer,
                        rows: 0,
                        time: None,
                        ids: None,
                    })
                }
            };
            let len = (max - open.rows).min(batch.num_rows() - offset);
            let chunk = batch.slice(offset, len);
            offset += len;
            open.writer.write(&chunk)?;
            open.rows += len;
            self.rows += len as u64;
            let (lo, hi) = time_range(dataset, &chunk)?;
            open.time = Some(open.time.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
            if let Some((lo, hi)) = id_range(dataset, &chunk)? {
                open.ids = Some(open.ids.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
            }
            if open.rows == max {
                self.close()?;
            }
        }
        Ok(())
    }

    /// Finishes the open output file and records its manifest entry.
    fn close(&mut self) -> Result<()> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let (path, bytes) = open.writer.finish()?;
        let Some((min_time, max_time)) = open.time else {
            // An output is opened only to write rows into it.
            return Err(row_count_error(self.lake, self.plan, "no"));
        };
        self.done.push(NewFile {
            path,
            data: FileData::Written,
            entry: FileEntry {
                dataset: self.plan.partition.dataset,
                rows: open.rows as u64,
                bytes,
                min_time,
                max_time,
                schema_version: SCHEMA_VERSION,
                min_id: open.ids.map(|(lo, _)| lo),
                max_id: open.ids.map(|(_, hi)| hi),
            },
        });
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<NewFile>> {
        self.close()?;
        if self.rows != self.plan.rows {
            return Err(row_count_error(
                self.lake,
                self.plan,
                &self.rows.to_string(),
            ));
        }
        Ok(self.done)
    }
}

/// One merged file, read a batch at a time.
struct Cursor {
    /// The file (a data file or the temporary name of a run).
    path: String,
    reader: ParquetRecordBatchReader,
    /// The current batch (file schema) and its rows in the dataset's order.
    batch: RecordBatch,
    keys: Rows,
    /// The next row of `batch` to merge.
    pos: usize,
    /// The last row of the previous batch, to check the file's order across batches.
    last: Option<OwnedRow>,
}

/// What the merge reads and checks each batch against.
struct Order<'a> {
    lake: &'a Base,
    dataset: Dataset,
    schema: SchemaRef,
    columns: Vec<usize>,
    converter: RowConverter,
}

impl Order<'_> {
    /// Opens a file for the merge; `None` if it holds no rows.
    fn open(&self, path: &str) -> Result<Option<Cursor>> {
        let mut cursor = Cursor {
            path: path.to_owned(),
            reader: read_batches(self.lake, path, READ_BATCH_ROWS)?,
            batch: RecordBatch::new_empty(self.schema.clone()),
            keys: self.converter.empty_rows(0, 0),
            pos: 0,
            last: None,
        };
        Ok(self.next_batch(&mut cursor)?.then_some(cursor))
    }

    /// Moves `cursor` to its file's next non-empty batch; `false` at the end of the file.
    /// Fails if the file's rows are not in the dataset's order.
    fn next_batch(&self, cursor: &mut Cursor) -> Result<bool> {
        let path = &cursor.path;
        let arrow_err = |source| Error::Arrow {
            context: format!("reading {path}"),
            source,
        };
        let batch = loop {
            match cursor.reader.next() {
                None => {
                    cursor.batch = RecordBatch::new_empty(self.schema.clone());
                    cursor.keys = self.converter.empty_rows(0, 0);
                    cursor.pos = 0;
                    return Ok(false);
                }
                Some(Err(source)) => return Err(arrow_err(source)),
                Some(Ok(b)) if b.num_rows() == 0 => {}
                Some(Ok(b)) => break b,
            }
        };
        // The file's own schema may differ in metadata only; the merged batches share one.
        let batch = RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec()).map_err(
            |source| Error::Arrow {
                context: format!("{path} does not have the {} file schema", self.dataset),
                source,
            },
        )?;
        let order: Vec<_> = self
            .columns
            .iter()
            .map(|&i| batch.column(i).clone())
            .collect();
        let keys = self.converter.convert_columns(&order).map_err(arrow_err)?;
        let ordered = cursor.last.as_ref().is_none_or(|l| l.row() <= keys.row(0))
            && (1..keys.num_rows()).all(|i| keys.row(i - 1) <= keys.row(i));
        if !ordered {
            return Err(Error::Lake {
                path: self.lake.store().location(path),
                message: format!(
                    "rows are not in the {} order (time, then natural key); compaction merges sorted files only",
                    self.dataset
                ),
            });
        }
        cursor.last = Some(keys.row(keys.num_rows() - 1).owned());
        cursor.batch = batch;
        cursor.keys = keys;
        cursor.pos = 0;
        Ok(true)
    }
}

impl Cursor {
    fn current(&self) -> Row<'_> {
        self.keys.row(self.pos)
    }
}

/// Whether cursor `a`'s current row comes before cursor `b`'s; equal rows keep file order.
fn before(cursors: &[Cursor], a: usize, b: usize) -> bool {
    match cursors[a].current().cmp(&cursors[b].current()) {
        Ordering::Less => true,
        Ordering::Greater => false,
        Ordering::Equal => a < b,
    }
}

/// Restores the heap order of `heap` (cursor indices, smallest row first) below `i`.
fn sift_down(heap: &mut [usize], cursors: &[Cursor], mut i: usize) {
    loop {
        let left = 2 * i + 1;
        if left >= heap.len() {
            return;
        }
        let right = left + 1;
        let child = if right < heap.len() && before(cursors, heap[right], heap[left]) {
            right
        } else {
            left
        };
        if !before(cursors, heap[child], heap[i]) {
            return;
        }
        heap.swap(child, i);
        i = child;
    }
}

/// Hands the rows picked so far (cursor, row) to `emit` as one batch.
fn flush(
    cursors: &[Cursor],
    picked: &mut Vec<(usize, usize)>,
    emit: &mut impl FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    if picked.is_empty() {
        return Ok(());
    }
    let batches: Vec<&RecordBatch> = cursors.iter().map(|c| &c.batch).collect();
    let merged = interleave_record_batch(&batches, picked).map_err(|source| Error::Arrow {
        context: "merging sorted files".to_owned(),
        source,
    })?;
    picked.clear();
    emit(&merged)
}

/// Merges sorted files of one dataset (at most the fan-in) and hands the rows, in the dataset's
/// order, to `emit` in batches of at most [`WRITE_BATCH_ROWS`] rows.
fn merge(
    lake: &Base,
    dataset: Dataset,
    paths: &[String],
    mut emit: impl FnMut(&RecordBatch) -> Result<()>,
) -> Result<()> {
    let schema = schema::file_schema(dataset);
    let (columns, converter) = order_encoder(dataset, &schema)?;
    let order = Order {
        lake,
        dataset,
        schema,
        columns,
        converter,
    };
    let mut cursors = Vec::with_capacity(paths.len());
    for path in paths {
        cursors.extend(order.open(path)?);
    }
    let mut heap: Vec<usize> = (0..cursors.len()).collect();
    for i in (0..heap.len() / 2).rev() {
        sift_down(&mut heap, &cursors, i);
    }
    let mut picked = Vec::with_capacity(WRITE_BATCH_ROWS);
    while let Some(&top) = heap.first() {
        let cursor = &mut cursors[top];
        picked.push((top, cursor.pos));
        if cursor.pos + 1 < cursor.batch.num_rows() {
            cursor.pos += 1;
            if picked.len() >= WRITE_BATCH_ROWS {
                flush(&cursors, &mut picked, &mut emit)?;
            }
        } else {
            // The picked rows may point into the batch about to be replaced.
            flush(&cursors, &mut picked, &mut emit)?;
            if !order.next_batch(&mut cursors[top])? {
                heap.swap_remove(0);
            }
        }
        sift_down(&mut heap, &cursors, 0);
    }
    flush(&cursors, &mut picked, &mut emit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lake::handle::Lake;
    use crate::lake::sample::Samples;
    use crate::lake::write::batch::sort_batch;
    use arrow_array::UInt32Array;
    use arrow_select::concat::concat_batches;
    use arrow_select::take::take_record_batch;

    /// Swaps committed as `files` small files per partition with overlapping time ranges
    /// (file `k` holds every `files`-th record).
    fn lake_of_small_files(dir: &std::path::Path, files: usize) -> (Lake, RecordBatch) {
        let opts = crate::lake::base::LakeOptions {
            max_rows_per_file: 50,
            compact_below_rows: 50,
            row_group_rows: 16,
            ..crate::lake::base::LakeOptions::default()
        };
        let lake = Lake::open_with(dir, opts).expect("open");
        let samples = Samples::generate(5, 400);
        let all = samples
            .batches()
            .expect("batches")
            .into_iter()
            .find(|(d, _)| *d == Dataset::Swaps)
            .map(|(_, b)| b)
            .expect("swaps");
        for k in 0..files {
            let idx: Vec<u32> = (k..all.num_rows())
                .step_by(files)
                .map(|i| i as u32)
                .collect();
            let part = take_record_batch(&all, &UInt32Array::from(idx)).expect("take");
            let mut tx = lake.transaction().expect("tx");
            tx.write(Dataset::Swaps, part).expect("write");
            tx.commit().expect("commit");
        }
        (lake, all)
    }

    /// The committed rows of each partition file by file, in manifest (path) order.
    fn committed(lake: &Lake) -> Vec<(String, RecordBatch)> {
        lake.manifest()
            .expect("manifest")
            .files
            .keys()
            .map(|p| {
                (
                    p.clone(),
                    crate::lake::read::read_file(lake.base(), p).expect("read"),
                )
            })
            .collect()
    }

    #[test]
    fn a_multi_pass_merge_gives_sorted_bounded_files_of_the_same_rows() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (lake, all) = lake_of_small_files(dir.path(), 11);
        let before = committed(&lake);
        let partitions: BTreeSet<String> = before
            .iter()
            .map(|(p, _)| Partition::from_file_path(p).expect("partition").dir())
            .collect();
        let most = partitions
            .iter()
            .map(|d| {
                before
                    .iter()
                    .filter(|(p, _)| p.starts_with(&format!("{d}/")))
                    .count()
            })
            .max();
        assert!(most > Some(9), "a partition needs two passes at fan-in 3");

        // Fan-in 3: 11 files → 4 runs → 2 runs → the outputs.
        let report = compact_where(
            lake.base(),
            |_| true,
            lake.options().compact_below_rows as u64,
            3,
        )
        .expect("compact");
        assert_eq!(report.partitions, partitions.len());
        assert_eq!(report.rows[&Dataset::Swaps], all.num_rows() as u64);
        let after = committed(&lake);
        let manifest = lake.manifest().expect("manifest");
        let mut total = 0;
        for dir in &partitions {
            let files: Vec<&(String, RecordBatch)> = after
                .iter()
                .filter(|(p, _)| p.starts_with(&format!("{dir}/")))
                .collect();
            let batches: Vec<RecordBatch> = files.iter().map(|(_, b)| b.clone()).collect();
            let merged =
                concat_batches(&schema::file_schema(Dataset::Swaps), &batches).expect("concat");
            total += merged.num_rows();
            // Files in name order are the partition's rows in the dataset's order.
            assert_eq!(
                merged,
                sort_batch(Dataset::Swaps, &merged).expect("sort"),
                "{dir}"
            );
            for (i, (path, batch)) in files.iter().enumerate() {
                assert!(batch.num_rows() <= 50);
                if i + 1 < files.len() {
                    assert_eq!(batch.num_rows(), 50, "only the last file is short");
                }
                let entry = &manifest.files[path];
                assert_eq!(entry.rows, batch.num_rows() as u64);
                let meta = crate::lake::read::SharedFile::open(lake.base(), path, entry)
                    .and_then(|f| f.footer())
                    .expect("open");
                let groups: Vec<i64> = meta
                    .metadata()
                    .row_groups()
                    .iter()
                    .map(|g| g.num_rows())
                    .collect();
                let n = batch.num_rows() as u64;
                let want: Vec<i64> = (0..n.div_ceil(16))
                    .map(|g| 16.min(n - 16 * g) as i64)
                    .collect();
                assert_eq!(groups, want, "row groups of {path}");
                let (lo, hi) = time_range(Dataset::Swaps, batch).expect("time");
                assert_eq!((entry.min_time, entry.max_time), (lo, hi));
                let ids = id_range(Dataset::Swaps, batch).expect("ids");
                assert_eq!(entry.min_id.zip(entry.max_id), ids);
            }
        }
        assert_eq!(total, all.num_rows());
        // No runs or temporary files remain: the committed files and the replaced ones,
        // retained for the older versions.
        let on_disk = lake.store().list("swaps").expect("list");
        let mut listed: Vec<&String> = manifest
            .files
            .keys()
            .chain(manifest.removed.keys())
            .collect();
        listed.sort();
        assert_eq!(on_disk.iter().collect::<Vec<_>>(), listed);
        assert!(!manifest.removed.is_empty());
        assert!(
            lake.store()
                .list("_dexlake")
                .expect("list")
                .iter()
                .all(|p| !p.contains("journal"))
        );
        // Nothing left to do.
        assert_eq!(
            compact_where(
                lake.base(),
                |_| true,
                lake.options().compact_below_rows as u64,
                3
            )
            .expect("again"),
            CompactReport::default()
        );
    }

    #[test]
    fn a_file_out_of_order_is_refused_and_the_compaction_leaves_nothing_behind() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (lake, _) = lake_of_small_files(dir.path(), 3);
        let manifest = lake.manifest().expect("manifest");
        // Replace one committed file by its rows in reverse order.
        let path = manifest.files.keys().next().expect("a file").clone();
        let batch = crate::lake::read::read_file(lake.base(), &path).expect("read");
        let n = batch.num_rows() as u32;
        let reversed =
            take_record_batch(&batch, &UInt32Array::from((0..n).rev().collect::<Vec<_>>()))
                .expect("reverse");
        let data = crate::lake::parquet::encode_parquet(Dataset::Swaps, &reversed, 1024, 3)
            .expect("encode");
        lake.store().put(&path, &data).expect("put");

        let err = compact_where(
            lake.base(),
            |_| true,
            lake.options().compact_below_rows as u64,
            2,
        )
        .expect_err("refused");
        assert!(err.to_string().contains("not in the swaps order"), "{err}");
        assert_eq!(lake.manifest().expect("manifest"), manifest);
        let on_disk = lake.store().list("swaps").expect("list");
        assert_eq!(on_disk, manifest.files.keys().cloned().collect::<Vec<_>>());
        // The one file replaced may have changed size; nothing else is wrong.
        let report = lake.verify().expect("verify");
        assert!(
            report.problems.iter().all(|p| matches!(
                p,
                crate::lake::ops::problems::Problem::SizeMismatch { path: p, .. } if *p == path
            )),
            "{report:?}"
        );
    }

    #[test]
    fn a_compaction_stopped_part_way_leaves_the_committed_rows_and_no_stray_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (lake, _) = lake_of_small_files(dir.path(), 11);
        let manifest = lake.manifest().expect("manifest");
        let before = committed(&lake);
        for stop in 0..3 {
            {
                // The steps of `compact_where`, stopped where a kill could stop them.
                let _lock = lake.base().lock().expect("lock");
                let below = lake.options().compact_below_rows as u64;
                let plans = plan(lake.base(), &manifest, |_| true, below, 3).expect("plan");
                assert!(plans.len() > 1 && !plans[1].passes.is_empty());
                journal(&manifest, &plans)
                    .store(lake.store())
                    .expect("journal");
                let first = merge_partition(lake.base(), &plans[0], 3).expect("merge");
                assert!(!first.is_empty());
                match stop {
                    // Outputs of one partition written under their temporary names.
                    0 => {}
                    // A run of the next partition half written.
                    1 => {
                        let run = &plans[1].passes[0][0];
                        let mut writer =
                            FileWriter::create(lake.base(), Dataset::Swaps, run, 16, 1)
                                .expect("run");
                        writer.write(&before[0].1).expect("write");
                        assert!(lake.store().head(&temp_name(run)).expect("head").is_some());
                    }
                    // Some outputs renamed into place by a commit that did not reach its
                    // manifest.
                    _ => {
                        for f in &first {
                            lake.store()
                                .rename(&temp_name(&f.path), &f.path)
                                .expect("rename");
                        }
                    }
                }
            }
            // Recovery (here on open) removes every leftover.
            let reopened = Lake::open(dir.path()).expect("open");
            assert_eq!(
                reopened.manifest().expect("manifest"),
                manifest,
                "stop {stop}"
            );
            assert_eq!(committed(&reopened), before, "stop {stop}");
            let on_disk = reopened.store().list("swaps").expect("list");
            assert_eq!(
                on_disk,
                manifest.files.keys().cloned().collect::<Vec<_>>(),
                "stop {stop}"
            );
            assert!(
                reopened
                    .store()
                    .head(crate::lake::layout::JOURNAL_PATH)
                    .expect("head")
                    .is_none()
            );
        }
        let report = compact_where(
            lake.base(),
            |_| true,
            lake.options().compact_below_rows as u64,
            3,
        )
        .expect("compact");
        assert_eq!(report.files_removed, manifest.files.len());
        assert!(lake.verify().expect("verify").is_ok());
    }
}
