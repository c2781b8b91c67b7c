//! `verify`: the lake against its manifest.

use std::collections::{BTreeMap, HashMap, HashSet};

use arrow_array::cast::AsArray;
use rayon::prelude::*;

use crate::Result;
use crate::lake::base::Base;
use crate::lake::dataset::Dataset;
use crate::lake::layout::{self, Partition, temp_name};
use crate::lake::log::{self, FileEntry, Manifest, Recovery};
use crate::lake::read;
use crate::lake::schema::{self, SCHEMA_VERSION, SCHEMA_VERSION_KEY};
use crate::lake::write::batch::encode_keys;

use super::problems::{Problem, VerifyProgress};

/// What [`Lake::verify`](crate::lake::Lake::verify) found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Manifest version checked.
    pub version: u64,
    /// Committed files checked.
    pub files_checked: usize,
    /// Committed rows checked, per dataset.
    pub rows: BTreeMap<Dataset, u64>,
    /// Cleanup done first, after an interrupted commit (not a problem).
    pub recovery: Recovery,
    /// Files on disk that commits replaced and that stay for older versions until a vacuum
    /// ([`Manifest::removed`]): not untracked, not problems.
    pub retained: usize,
    /// Everything wrong; empty when the lake is sound.
    pub problems: Vec<Problem>,
    /// On a store without a writer lock (an object store): data files no commit references,
    /// written by a commit still in progress or left by one that was interrupted or lost its
    /// version to another writer. Readers never see them, so they are not problems there.
    pub unreferenced: Vec<String>,
}

impl VerifyReport {
    /// Whether the lake is sound.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// What is wrong with a file a reader refused: the reason alone when the error names the
/// file, as the problem does already.
fn reason(e: crate::Error) -> String {
    match e {
        crate::Error::DamagedLake { reason, .. } => reason,
        e => e.to_string(),
    }
}

/// Checks one committed file's schema, version and row count (`entry` its manifest entry);
/// returns its rows. Only the file's footer is read.
fn check_file(
    lake: &Base,
    path: &str,
    entry: &FileEntry,
    problems: &mut Vec<Problem>,
) -> Option<u64> {
    let footer = match read::SharedFile::open(lake, path, entry).and_then(|f| f.footer_as_is()) {
        Ok(footer) => footer,
        Err(e) => {
            problems.push(Problem::UnreadableFile {
                path: path.to_owned(),
                message: reason(e),
            });
            return None;
        }
    };
    let expected = schema::file_schema(entry.dataset);
    let got = footer.schema();
    let same = got.fields().len() == expected.fields().len()
        && got
            .fields()
            .iter()
            .zip(expected.fields())
            .all(|(g, e)| g.name() == e.name() && g.data_type() == e.data_type());
    if !same {
        problems.push(Problem::SchemaMismatch {
            path: path.to_owned(),
            message: format!(
                "columns are {:?}",
                got.fields().iter().map(|f| f.name()).collect::<Vec<_>>()
            ),
        });
    }
    let meta = footer.metadata().file_metadata();
    let version = meta
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == SCHEMA_VERSION_KEY))
        .and_then(|k| k.value.clone());
    if version.as_deref() != Some(SCHEMA_VERSION.to_string().as_str()) {
        problems.push(Problem::SchemaMismatch {
            path: path.to_owned(),
            message: format!("schema version {version:?}, expected {SCHEMA_VERSION}"),
        });
    }
    u64::try_from(meta.num_rows()).ok()
}

/// How many times [`verify`] checks again when commits land while it reads.
const VERIFY_ATTEMPTS: usize = 5;

/// Runs the checks of [`Lake::verify`](crate::lake::Lake::verify). The writer lock is held
/// only for the cleanup after an interrupted commit, and only when there is one to clean up,
/// the lock is free and the lake is writable: a verify never waits for a writer, nor makes
/// one wait longer than that cleanup, and checks a read-only lake without writing to it.
pub fn verify(lake: &Base) -> Result<VerifyReport> {
    let recovery = match lake.lock_for_cleanup()? {
        Some(lock) => {
            let recovery = log::recover(lake.store())?;
            drop(lock);
            recovery
        }
        None => Recovery::default(),
    };
    let mut attempt = 1;
    loop {
        let manifest = lake.manifest()?;
        let mut report = check(lake, &manifest)?;
        // A commit that landed meanwhile can make committed files look missing or new files
        // look untracked; the check is only meaningful against one manifest version.
        let settled = report.is_ok() || lake.manifest()?.version == manifest.version;
        if settled || attempt >= VERIFY_ATTEMPTS {
            report.recovery = recovery;
            return Ok(report);
        }
        attempt += 1;
    }
}

/// The data files of a commit in progress (and their temporary names), which a verify that does
/// not hold the writer lock must not report as untracked.
fn in_progress(lake: &Base) -> Result<HashSet<String>> {
    let journal = log::read_journal(lake.store())?;
    Ok(journal
        .iter()
        .flat_map(|j| j.add.iter().chain(&j.remove))
        .flat_map(|p| [p.clone(), temp_name(p)])
        .collect())
}

/// Checks the lake's files against one manifest version.
fn check(lake: &Base, manifest: &Manifest) -> Result<VerifyReport> {
    let mut report = VerifyReport {
        version: manifest.version,
        ..VerifyReport::default()
    };
    let mut problems = Vec::new();

    // The journal is read before and after listing: a commit writes it before its files, so
    // every file of a commit still in progress is named by one of the two reads.
    let mut writing = in_progress(lake)?;
    let mut untracked = Vec::new();
    for dataset in Dataset::ALL {
        for path in lake.store().list(dataset.name())? {
            if manifest.removed.contains_key(&path) {
                report.retained += 1;
            } else if !manifest.files.contains_key(&path) {
                untracked.push(path);
            }
        }
    }
    writing.extend(in_progress(lake)?);
    let untracked = untracked.into_iter().filter(|p| !writing.contains(p));
    if lake.store().has_writer_lock() {
        problems.extend(untracked.map(|path| Problem::UntrackedFile { path }));
    } else {
        report.unreferenced.extend(untracked);
    }
    for path in lake.store().list(layout::META_DIR)? {
        if path.ends_with(".parquet") {
            problems.push(Problem::UntrackedFile { path });
        }
    }

    // Keys are checked a partition at a time: a partition's files are consecutive in path
    // order, as every path with the same folder prefix is.
    let mut duplicate_keys: Vec<(Partition, Problem)> = Vec::new();
    let mut keys_of: Option<(Partition, Keys)> = None;
    // Datasets with an id column: each id's partitions, in buckets of ids by hash, the first
    // while the files are read and the others in passes over the id columns after.
    let id_rows: u64 = manifest
        .files
        .values()
        .filter(|e| e.dataset.id_column().is_some())
        .map(|e| e.rows)
        .sum();
    let mut ids = IdCheck::new(id_rows, IDS_AT_ONCE);
    let mut partition_no: HashMap<Partition, u32> = HashMap::new();
    let mut id_files: Vec<(&str, &FileEntry, u32, bool)> = Vec::new();
    let files: Vec<(&String, &FileEntry)> = manifest.files.iter().collect();
    // The files are read a window at a time, in parallel, and what each gave is taken in path
    // order: the problems, partitions and keys come in the order of a read one file at a time.
    for window in files.chunks(FILES_AT_ONCE) {
        let read: Vec<FileRead> = window
            .par_iter()
            .map(|&(path, entry)| read_file(lake, path, entry, ids.buckets))
            .collect::<Result<_>>()?;
        for (&(path, entry), read) in window.iter().zip(read) {
            report.files_checked += 1;
            *report.rows.entry(entry.dataset).or_default() += entry.rows;
            problems.extend(read.problems);
            let (Some(partition), Some(keys)) = (read.partition, read.keys) else {
                continue;
            };
            if let Some(mut first) = read.first_bucket {
                let next = partition_no.len() as u32;
                let here = *partition_no.entry(partition.clone()).or_insert(next);
                first.in_partition(here);
                ids.take(entry.dataset, first);
                id_files.push((path, entry, here, read.matches));
            }
            match &mut keys_of {
                Some((p, held)) if *p == partition => held.extend(keys),
                _ => {
                    if let Some((p, held)) = keys_of.replace((partition, keys)) {
                        duplicate_keys.extend(duplicates_in(p, held));
                    }
                }
            }
        }
    }
    if let Some((p, held)) = keys_of.take() {
        duplicate_keys.extend(duplicates_in(p, held));
    }
    while ids.next_bucket() {
        let (buckets, bucket) = (ids.buckets, ids.bucket);
        // Each file's ids of the bucket, read in parallel (only they are held past the read).
        let taken: Vec<(Dataset, BucketIds)> = id_files
            .par_iter()
            .map(|&(path, entry, here, matches)| {
                let mut taken = BucketIds::default();
                if let Keys::Ids(file_ids) = read_keys(lake, path, entry, matches)? {
                    taken.add(here, &file_ids, buckets, bucket);
                }
                Ok((entry.dataset, taken))
            })
            .collect::<Result<_>>()?;
        for (dataset, taken) in taken {
            ids.take(dataset, taken);
        }
    }
    duplicate_keys.sort_by(|a, b| a.0.cmp(&b.0));
    problems.extend(duplicate_keys.into_iter().map(|(_, problem)| problem));
    problems.extend(ids.problems());
    report.problems = problems;
    Ok(report)
}

/// Committed files read at once (in parallel) by [`check`]: each holds its keys until its
/// window is taken in order.
const FILES_AT_ONCE: usize = 8;

/// What reading one committed file found: its problems, in the order they are found, its
/// partition (unless its path names none) and its keys (unless the file could not be read).
struct FileRead {
    problems: Vec<Problem>,
    partition: Option<Partition>,
    keys: Option<Keys>,
    /// Whether the file's size and rows are those of its manifest entry.
    matches: bool,
    /// Its ids of the first bucket of the id check (with partition number 0), when it has ids.
    first_bucket: Option<BucketIds>,
}

/// Checks one committed file (`entry` its manifest entry) against its entry and reads its
/// keys: its path, its size, its footer (schema, version, rows), then its key columns (and
/// its ids of the id check's first bucket, of `buckets`).
fn read_file(lake: &Base, path: &str, entry: &FileEntry, buckets: u64) -> Result<FileRead> {
    let mut read = FileRead {
        problems: Vec::new(),
        partition: None,
        keys: None,
        matches: true,
        first_bucket: None,
    };
    let partition = match Partition::from_file_path(path) {
        Ok(p) if p.dataset == entry.dataset => p,
        Ok(p) => {
            read.problems.push(Problem::BadPath {
                path: path.to_owned(),
                message: format!("in {} but recorded as {}", p.dataset, entry.dataset),
            });
            return Ok(read);
        }
        Err(e) => {
            read.problems.push(Problem::BadPath {
                path: path.to_owned(),
                message: e.to_string(),
            });
            return Ok(read);
        }
    };
    match lake.store().head(path)? {
        None => {
            read.problems.push(Problem::MissingFile {
                path: path.to_owned(),
            });
            return Ok(read);
        }
        Some(bytes) if bytes != entry.bytes => {
            read.matches = false;
            read.problems.push(Problem::SizeMismatch {
                path: path.to_owned(),
                manifest: entry.bytes,
                file: bytes,
            });
        }
        Some(_) => {}
    }
    let Some(rows) = check_file(lake, path, entry, &mut read.problems) else {
        return Ok(read);
    };
    if rows != entry.rows {
        read.matches = false;
        read.problems.push(Problem::RowCountMismatch {
            path: path.to_owned(),
            manifest: entry.rows,
            file: rows,
        });
    }
    match read_keys(lake, path, entry, read.matches) {
        Ok(keys) => {
            if let Keys::Ids(ids) = &keys {
                let mut first = BucketIds::default();
                first.add(0, ids, buckets, 0);
                read.first_bucket = Some(first);
            }
            read.partition = Some(partition);
            read.keys = Some(keys);
        }
        Err(e) => read.problems.push(Problem::UnreadableFile {
            path: path.to_owned(),
            message: reason(e),
        }),
    }
    Ok(read)
}

/// A file's keys: its ids where the id is the whole key (swaps and trades; a null id is
/// `None`), else the key columns encoded as the writer compares them.
enum Keys {
    Ids(Vec<Option<i64>>),
    Encoded(Vec<Vec<u8>>),
}

impl Keys {
    /// `other`'s keys after these (of the same dataset, so of the same kind).
    fn extend(&mut self, other: Keys) {
        match (self, other) {
            (Keys::Ids(a), Keys::Ids(b)) => a.extend(b),
            (Keys::Encoded(a), Keys::Encoded(b)) => a.extend(b),
            _ => {}
        }
    }

    /// How many keys repeat one before them.
    fn repeated(self) -> usize {
        fn repeated<T: Ord + Send>(mut keys: Vec<T>) -> usize {
            let n = keys.len();
            keys.par_sort_unstable();
            keys.dedup();
            n - keys.len()
        }
        match self {
            Keys::Ids(k) => repeated(k),
            Keys::Encoded(k) => repeated(k),
        }
    }
}

/// The keys of a committed file (see [`Keys`]), `entry` its manifest entry. The ids of a
/// file that matches its entry are read column chunk by column chunk, not with the whole file
/// (the buckets of the id check read them again); a file whose size or rows differ from its
/// entry is read whole, as the other keys are.
fn read_keys(lake: &Base, path: &str, entry: &FileEntry, matches: bool) -> Result<Keys> {
    let dataset = entry.dataset;
    let ints = |column: &dyn arrow_array::Array, id: &str| {
        column
            .as_primitive_opt::<arrow_array::types::Int64Type>()
            .map(|c| c.iter().collect::<Vec<_>>())
            .ok_or_else(|| crate::Error::Lake {
                path: lake.root().join(path),
                message: format!("its {id} column is not of 64-bit integers"),
            })
    };
    match dataset.id_column() {
        Some(id) if dataset.key_columns() == [id] && matches => {
            let file = read::SharedFile::open(lake, path, entry)?;
            let footer = file.footer()?;
            let mut ids = Vec::with_capacity(entry.rows as usize);
            for g in 0..footer.metadata().num_row_groups() {
                let batch = file.read_row_group(&footer, g, &[id])?;
                ids.extend(ints(batch.column(0), id)?);
            }
            Ok(Keys::Ids(ids))
        }
        Some(id) if dataset.key_columns() == [id] => {
            let batch = read::read_columns(lake, path, &[id])?;
            Ok(Keys::Ids(ints(batch.column(0), id)?))
        }
        _ => read::read_columns(lake, path, dataset.key_columns())
            .and_then(|b| encode_keys(dataset, &b))
            .map(Keys::Encoded),
    }
}

/// The problem of a partition whose `keys` repeat, if they do.
fn duplicates_in(partition: Partition, keys: Keys) -> Option<(Partition, Problem)> {
    let repeated = keys.repeated();
    (repeated > 0).then(|| {
        let problem = Problem::DuplicateKeys {
            partition: partition.dir(),
            extra_rows: repeated as u64,
        };
        (partition, problem)
    })
}

/// Most ids the check of ids across partitions holds at once (16 bytes each, 512 MiB): a lake
/// with more is checked in buckets of ids by hash, one pass over the id columns per bucket
/// after the first.
const IDS_AT_ONCE: u64 = 1 << 25;

/// The bucket of an id among `buckets`: a multiplicative hash (ids are often consecutive), the
/// null id in the first.
fn bucket_of(id: Option<i64>, buckets: u64) -> u64 {
    id.map_or(0, |id| {
        ((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % buckets
    })
}

/// The rows of one bucket's ids: each id with the number of the partition holding the row.
#[derive(Default)]
struct BucketIds {
    ids: Vec<(i64, u32)>,
    /// The partitions of the rows whose id is null (in the first bucket).
    nulls: Vec<u32>,
}

impl BucketIds {
    /// Takes the ids of bucket `bucket` (of `buckets`) among `ids`, rows of partition `here`.
    fn add(&mut self, here: u32, ids: &[Option<i64>], buckets: u64, bucket: u64) {
        for &key in ids {
            if buckets > 1 && bucket_of(key, buckets) != bucket {
                continue;
            }
            match key {
                Some(id) => self.ids.push((id, here)),
                None => self.nulls.push(here),
            }
        }
    }

    /// Sets the partition number of every row.
    fn in_partition(&mut self, here: u32) {
        self.ids.iter_mut().for_each(|r| r.1 = here);
        self.nulls.iter_mut().for_each(|p| *p = here);
    }

    fn append(&mut self, mut other: BucketIds) {
        self.ids.append(&mut other.ids);
        self.nulls.append(&mut other.nulls);
    }

    /// The ids held by more than one partition and their rows outside the first partition (by
    /// number) that holds them: sorted by id and partition, each id's rows are a run whose
    /// first row is in that partition.
    fn moved(mut self) -> (u64, u64) {
        self.ids.par_sort_unstable();
        let (mut moved, mut extra_rows) = (0, 0);
        let mut count = |first: u32, partitions: &mut dyn Iterator<Item = u32>| {
            let extra = partitions.filter(|&p| p != first).count() as u64;
            moved += u64::from(extra > 0);
            extra_rows += extra;
        };
        for run in self.ids.chunk_by(|a, b| a.0 == b.0) {
            count(run[0].1, &mut run.iter().map(|r| r.1));
        }
        if let Some(&first) = self.nulls.iter().min() {
            count(first, &mut self.nulls.iter().copied());
        }
        (moved, extra_rows)
    }
}

/// The check of ids across partitions: an id's rows outside the first partition (by number)
/// that holds it, and the ids found in more than one, a bucket of ids at a time.
struct IdCheck {
    buckets: u64,
    bucket: u64,
    /// The current bucket's ids, per dataset.
    held: BTreeMap<Dataset, BucketIds>,
    /// Rows of an id outside its first partition, per dataset.
    extra_rows: BTreeMap<Dataset, u64>,
    /// Ids in more than one partition, per dataset.
    moved: BTreeMap<Dataset, u64>,
}

impl IdCheck {
    /// A check of `rows` ids, in as many buckets as keep each under `at_once`.
    fn new(rows: u64, at_once: u64) -> IdCheck {
        IdCheck {
            buckets: rows.div_ceil(at_once.max(1)).max(1),
            bucket: 0,
            held: BTreeMap::new(),
            extra_rows: BTreeMap::new(),
            moved: BTreeMap::new(),
        }
    }

    /// Takes `dataset`'s ids of the current bucket read from a file.
    fn take(&mut self, dataset: Dataset, ids: BucketIds) {
        self.held.entry(dataset).or_default().append(ids);
    }

    /// Closes the current bucket; whether there is another to read.
    fn next_bucket(&mut self) -> bool {
        for (dataset, held) in std::mem::take(&mut self.held) {
            let (moved, extra_rows) = held.moved();
            if extra_rows > 0 {
                *self.moved.entry(dataset).or_default() += moved;
                *self.extra_rows.entry(dataset).or_default() += extra_rows;
            }
        }
        self.bucket += 1;
        self.bucket < self.buckets
    }

    /// A problem per dataset with ids in more than one partition.
    fn problems(&self) -> Vec<Problem> {
        self.extra_rows
            .iter()
            .map(|(&dataset, &extra_rows)| Problem::DuplicateIds {
                dataset,
                ids: self.moved.get(&dataset).copied().unwrap_or(0),
                extra_rows,
            })
            .collect()
    }
}

/// How thoroughly [`Lake::verify_with`](crate::lake::Lake::verify_with) checks the lake.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Also decode every page of every committed file (every column of every row group) and
    /// count its rows against the manifest, in parallel over the files and in bounded memory
    /// (`dexlake verify`, the command's default; `--quick` skips it). Without it the checks
    /// read each file's footer and its key columns only, so a file whose other pages were
    /// overwritten passes them.
    pub deep: bool,
}

/// Runs [`verify`], then, when `options` ask for it, decodes every page of the files it found
/// sound (see [`VerifyOptions::deep`]), reporting each file whose pages do not decode. The
/// pages are decoded against the newest manifest; a problem of a file that a commit meanwhile
/// removed from it is dropped.
pub fn verify_with(
    lake: &Base,
    options: &VerifyOptions,
    progress: &(dyn Fn(VerifyProgress) + Sync),
) -> Result<VerifyReport> {
    let mut report = verify(lake)?;
    if !options.deep {
        return Ok(report);
    }
    let reported: HashSet<&str> = report
        .problems
        .iter()
        .filter_map(|p| match p {
            Problem::MissingFile { path }
            | Problem::UnreadableFile { path, .. }
            | Problem::RowCountMismatch { path, .. }
            | Problem::SizeMismatch { path, .. }
            | Problem::BadPath { path, .. }
            | Problem::SchemaMismatch { path, .. } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    let manifest = lake.manifest()?;
    let files: Vec<(&String, &crate::lake::log::FileEntry)> = manifest
        .files
        .iter()
        .filter(|(path, _)| !reported.contains(path.as_str()))
        .collect();
    let found = super::pages::decode_every_page(lake, &files, progress);
    let now = lake.manifest()?;
    report
        .problems
        .extend(found.into_iter().filter(|p| match p {
            Problem::UnreadableFile { path, .. }
            | Problem::DamagedPages { path, .. }
            | Problem::RowCountMismatch { path, .. } => now.files.contains_key(path),
            _ => true,
        }));
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids of a few partitions, some in several of them and some repeated within one: every
    /// number of buckets finds the same.
    #[test]
    fn ids_checked_in_buckets_give_the_problems_of_one_pass() {
        let key = |id: i64| Some(id * 1_000_003);
        // (dataset, partition number, ids)
        let files: Vec<(Dataset, u32, Vec<Option<i64>>)> = vec![
            (Dataset::Swaps, 0, (0..40).map(key).collect()),
            (
                Dataset::Swaps,
                1,
                (30..60).chain([31, 31]).map(key).collect(),
            ),
            (Dataset::Swaps, 0, (55..58).map(key).collect()),
            (Dataset::Trades, 2, (0..10).map(key).collect()),
            (Dataset::Trades, 3, (5..12).chain([5]).map(key).collect()),
            (Dataset::Swaps, 4, (0..3).map(key).chain([None]).collect()),
            (Dataset::Swaps, 5, vec![None, None]),
        ];
        let rows = files.iter().map(|f| f.2.len() as u64).sum::<u64>();
        let run = |at_once: u64| {
            let mut ids = IdCheck::new(rows, at_once);
            loop {
                for (dataset, here, keys) in &files {
                    let mut taken = BucketIds::default();
                    taken.add(*here, keys, ids.buckets, ids.bucket);
                    ids.take(*dataset, taken);
                }
                if !ids.next_bucket() {
                    break;
                }
            }
            (ids.buckets, ids.problems())
        };
        let (one, expected) = run(u64::MAX);
        assert_eq!(one, 1);
        // Swaps: 30..40 in 0 and 1 (10 ids, 10 rows, plus 31 twice more), 55..58 in 1 and 0
        // (3 ids, 3 rows), 0..3 in 0 and 4 (3 rows), the null id in 4 and twice in 5 (1 id,
        // 2 rows). Trades: 5..10 in 2 and 3 (5 ids, 6 rows).
        assert_eq!(
            expected,
            vec![
                Problem::DuplicateIds {
                    dataset: Dataset::Swaps,
                    ids: 17,
                    extra_rows: 20,
                },
                Problem::DuplicateIds {
                    dataset: Dataset::Trades,
                    ids: 5,
                    extra_rows: 6,
                },
            ]
        );
        for at_once in [1, 7, 50] {
            let (buckets, problems) = run(at_once);
            assert!(buckets > 1, "{at_once}");
            assert_eq!(problems, expected, "{at_once}");
        }
    }
}
