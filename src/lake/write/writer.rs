//! Writing: from staged batches to the files of a commit (split by partition, drop or replace
//! committed keys and moved ids, encode), and the commit of those files under the journal.

use std::collections::{BTreeMap, HashMap, HashSet};

use arrow_array::types::{Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch, cast::AsArray};
use arrow_row::{RowConverter, SortField};
use arrow_select::concat::concat_batches;
use arrow_select::take::take_record_batch;
use bytes::Bytes;
use chrono::Utc;

use super::batch::{
    arrow_err, column, encode_keys, id_range, key_columns, key_converter, micros_to_time,
    partition_rows, sort_batch, time_range, to_file_batch, value_range,
};
use super::ids::{IdCache, IdIndex};
use super::merge::{self, MergeSmall};
use crate::api::models::ChainFamily;
use crate::lake::base::Base;
use crate::lake::dataset::Dataset;
use crate::lake::layout::{Partition, data_file_name, temp_name};
use crate::lake::log::{Commit, FileEntry, Journal, Manifest, clear_journal};
use crate::lake::parquet::{TRANSIENT_ZSTD_LEVEL, encode_parquet};
use crate::lake::read::{read_columns, read_file};
use crate::lake::schema::SCHEMA_VERSION;
use crate::{Error, Result};

/// A data file encoded and ready to be put into the lake.
#[derive(Debug, Clone)]
pub struct NewFile {
    /// Path relative to the lake root.
    pub path: String,
    /// The encoded Parquet file, in memory or already on disk.
    pub data: FileData,
    /// Its manifest entry.
    pub entry: FileEntry,
}

/// Where the bytes of a [`NewFile`] are.
#[derive(Debug, Clone)]
pub enum FileData {
    /// In memory: the commit [puts](crate::lake::Store::put) them.
    Encoded(Bytes),
    /// Already written and synced under the file's [temporary name](crate::lake::layout::temp_name)
    /// (compaction streams its files there): the commit only renames it into place. The
    /// commit's journal must name the file before it is written, so that recovery removes it
    /// if the commit never lands.
    Written,
}

impl From<Vec<u8>> for FileData {
    fn from(data: Vec<u8>) -> Self {
        FileData::Encoded(Bytes::from(data))
    }
}

impl From<Bytes> for FileData {
    fn from(data: Bytes) -> Self {
        FileData::Encoded(data)
    }
}

/// Encodes one sorted partition batch (record or file schema) into files of at most
/// `max_rows_per_file` rows each. A file below
/// [`compact_below_rows`](crate::lake::LakeOptions::compact_below_rows) is small: a later merge
/// rewrites it, so it is written at the [transient level](TRANSIENT_ZSTD_LEVEL).
pub(crate) fn encode_partition(
    lake: &Base,
    partition: &Partition,
    sorted: &RecordBatch,
    version: u64,
    seq: &mut usize,
) -> Result<Vec<NewFile>> {
    let dataset = partition.dataset;
    let opts = lake.options();
    let file_batch = to_file_batch(dataset, sorted)?;
    let max = opts.max_rows_per_file.max(1);
    let mut out = Vec::new();
    let mut offset = 0;
    while offset < file_batch.num_rows() {
        let len = max.min(file_batch.num_rows() - offset);
        let chunk = file_batch.slice(offset, len);
        offset += len;
        let level = if len < opts.compact_below_rows {
            opts.zstd_level.min(TRANSIENT_ZSTD_LEVEL)
        } else {
            opts.zstd_level
        };
        let data = encode_parquet(dataset, &chunk, opts.row_group_rows, level)?;
        let (min_time, max_time) = time_range(dataset, &chunk)?;
        let ids = id_range(dataset, &chunk)?;
        let path = format!("{}/{}", partition.dir(), data_file_name(version, *seq));
        *seq += 1;
        out.push(NewFile {
            path,
            entry: FileEntry {
                dataset,
                rows: chunk.num_rows() as u64,
                bytes: data.len() as u64,
                min_time,
                max_time,
                schema_version: SCHEMA_VERSION,
                min_id: ids.map(|(lo, _)| lo),
                max_id: ids.map(|(_, hi)| hi),
            },
            data: FileData::from(data),
        });
    }
    Ok(out)
}

/// What a commit will change: files to add, files to drop, and the rows new to the lake.
#[derive(Debug, Default)]
pub struct Prepared {
    /// Encoded files to add.
    pub files: Vec<NewFile>,
    /// Committed files to drop (rewritten without records a write replaced).
    pub remove: Vec<String>,
    /// Rows whose key was not in the lake before, per dataset.
    pub rows_added: BTreeMap<Dataset, u64>,
    /// Id ranges (smallest, largest) read from committed files whose manifest entry lacked
    /// them; the commit records them so later writes can skip those files.
    pub id_ranges: BTreeMap<String, (i64, i64)>,
    /// Rows new to the lake per tag of [`prepare_files`] (tags with none are absent).
    pub rows_added_by_tag: BTreeMap<u64, u64>,
    /// Committed small files merged with the new rows of their partition (and removed).
    pub files_merged: usize,
}

/// One tag per row (null for untagged rows), carried beside a batch through de-duplication.
type Tags = arrow_array::UInt64Array;

/// Adds the rows of each tag present in `tags` to `out`.
fn count_tags(tags: &Tags, out: &mut BTreeMap<u64, u64>) {
    for tag in tags.iter().flatten() {
        *out.entry(tag).or_default() += 1;
    }
}

/// Turns the staged batches into encoded files. Per partition, a record whose key is already
/// committed or staged earlier is dropped (the first occurrence wins), except in datasets that
/// [replace on write](Dataset::replaces_on_write): there the last occurrence wins, and a
/// committed file holding a changed record is rewritten without it.
///
/// In datasets with an [`id_column`](Dataset::id_column) (swaps, trades) an id is stored once
/// in the whole dataset, whatever its partition: the last staged record of an id wins within
/// the write, and when the write gives a committed id another `block_time` (the service's newer
/// answer, possibly on another day), the committed record is dropped and its file rewritten
/// without it in the same commit. Cost: the `id` and `block_time` columns of every committed
/// file whose id range (kept in its [`FileEntry`]) meets the write's are read; files listed
/// without a range (older manifests, repaired ones) are read once: the commit records the
/// range it read. Where ids grow with time (the service orders them with `block_slot`, and the
/// simulator numbers them so), that is about the files of the write's own time span, which the
/// per-partition de-duplication reads anyway; where they do not, every file whose range
/// meets the write's.
///
/// The rows new to the lake are also counted per tag: `tags` gives, per dataset, the tag of
/// each staged batch in order (`None`, or a missing entry, for an untagged batch). A row
/// counts for its batch's tag when it is the one the write keeps and its key (or id) was not
/// in the lake before, so the counts of several writers sharing one commit add up to
/// [`Prepared::rows_added`] when every batch is tagged.
pub(crate) fn prepare_files(
    lake: &Base,
    ids: &IdCache,
    manifest: &Manifest,
    staged: &BTreeMap<Dataset, Vec<RecordBatch>>,
    tags: &BTreeMap<Dataset, Vec<Option<u64>>>,
    version: u64,
    merge_small: Option<MergeSmall>,
) -> Result<Prepared> {
    let mut out = Prepared::default();
    let mut seq = 0;
    for (&dataset, batches) in staged {
        let Some(first) = batches.first() else {
            continue;
        };
        let all = concat_batches(&first.schema(), batches)
            .map_err(arrow_err(format!("staging {dataset}")))?;
        let batch_tags = tags.get(&dataset);
        let all_tags: Tags = batches
            .iter()
            .enumerate()
            .flat_map(|(i, b)| {
                let tag = batch_tags.and_then(|t| t.get(i).copied().flatten());
                std::iter::repeat_n(tag, b.num_rows())
            })
            .collect();
        // With the id index, rows whose keys need no file read (all but moved ids, see
        // `drop_indexed_repeats`).
        let mut checked: Option<Vec<bool>> = None;
        // Files the write drops are no longer part of the partitions it merges into.
        let (all, all_tags, gone, not_new) = if dataset.id_column().is_some() {
            let indexes = ids.index(lake, manifest, dataset)?;
            let index = indexes.get(&dataset);
            let moved = displace_moved_ids(lake, manifest, index, dataset, &all, &all_tags)?;
            let gone: HashSet<String> = moved.remove.iter().cloned().collect();
            out.remove.extend(moved.remove);
            out.id_ranges.extend(moved.id_ranges);
            // The index knows every committed id: a staged record committed at the same time
            // is a repeat, so the partitions' files need not be read for their keys.
            match index {
                Some(index) => {
                    let (staged, tags, moved_rows) = drop_indexed_repeats(
                        dataset,
                        &moved.staged,
                        &moved.tags,
                        moved.from_write,
                        index,
                    )?;
                    checked = Some(moved_rows);
                    (staged, tags, gone, moved.not_new)
                }
                None => (moved.staged, moved.tags, gone, moved.not_new),
            }
        } else {
            (all, all_tags, HashSet::new(), 0)
        };
        let mut dataset_added = 0;
        // Each partition's new rows, sorted, encoded once the merges are planned.
        let mut written: Vec<(Partition, RecordBatch)> = Vec::new();
        for (partition, rows) in partition_rows(dataset, &all)? {
            let keys_checked = checked
                .as_ref()
                .is_some_and(|moved| rows.iter().all(|&r| !moved[r as usize]));
            let idx = arrow_array::UInt32Array::from(rows);
            let part =
                take_record_batch(&all, &idx).map_err(arrow_err(format!("splitting {dataset}")))?;
            let part_tags = arrow_select::take::take(&all_tags, &idx, None)
                .map_err(arrow_err(format!("splitting {dataset}")))?;
            let part_tags = part_tags.as_primitive::<arrow_array::types::UInt64Type>();
            let (fresh, added) = if dataset.replaces_on_write() {
                let merged = replace_known_keys(lake, manifest, &gone, &partition, &part)?;
                out.remove.extend(merged.remove);
                let added_idx = arrow_array::UInt32Array::from(merged.added_rows);
                let added_tags = arrow_select::take::take(part_tags, &added_idx, None)
                    .map_err(arrow_err(format!("counting new {dataset} rows")))?;
                count_tags(added_tags.as_primitive(), &mut out.rows_added_by_tag);
                (merged.batch, added_idx.len() as u64)
            } else if keys_checked {
                count_tags(part_tags, &mut out.rows_added_by_tag);
                let n = part.num_rows() as u64;
                (part, n)
            } else {
                let (fresh, keep) = drop_known_keys(lake, manifest, &gone, &partition, &part)?;
                match keep {
                    None => count_tags(part_tags, &mut out.rows_added_by_tag),
                    Some(keep) => {
                        let kept = arrow_select::filter::filter(part_tags, &keep)
                            .map_err(arrow_err(format!("counting new {dataset} rows")))?;
                        count_tags(kept.as_primitive(), &mut out.rows_added_by_tag);
                    }
                }
                let n = fresh.num_rows() as u64;
                (fresh, n)
            };
            dataset_added += added;
            if fresh.num_rows() == 0 {
                continue;
            }
            written.push((partition, fresh));
        }
        let merges = match merge_small {
            Some(policy) => {
                let sizes: Vec<(Partition, usize)> = written
                    .iter()
                    .map(|(p, b)| (p.clone(), b.num_rows()))
                    .collect();
                let removed: HashSet<String> = out.remove.iter().cloned().collect();
                merge::plan(manifest, policy, &sizes, &removed)
            }
            None => BTreeMap::new(),
        };
        for (partition, fresh) in written {
            let sorted = match merges.get(&partition) {
                Some(files) => {
                    let sorted = merge::merged(lake, &partition, files, &fresh)?;
                    out.remove.extend(files.iter().cloned());
                    out.files_merged += files.len();
                    sorted
                }
                None => sort_batch(dataset, &fresh)?,
            };
            out.files.extend(encode_partition(
                lake, &partition, &sorted, version, &mut seq,
            )?);
        }
        let added = dataset_added.saturating_sub(not_new);
        if added > 0 {
            *out.rows_added.entry(dataset).or_default() += added;
        }
    }
    Ok(out)
}

/// The staged records of an id dataset once moved ids are accounted for.
struct Displaced {
    /// The staged records (the last of each id), plus the untouched records of committed files
    /// that held an id the write moves.
    staged: RecordBatch,
    /// The tag of each row of `staged`: null for the records staged again and for the moved
    /// ones, which are not new to the lake.
    tags: Tags,
    /// Committed files to drop: they held an id the write moves to another `block_time`.
    remove: Vec<String>,
    /// Rows of `staged` that are not new to the lake: the re-staged records and the moved ones.
    not_new: u64,
    /// The first rows of `staged` that come from the write (the rest are re-staged records of
    /// dropped files).
    from_write: usize,
    /// Id ranges of files read whose manifest entry lacked one.
    id_ranges: BTreeMap<String, (i64, i64)>,
}

/// Applies the rule of [`prepare_files`] for datasets with an [`id_column`](Dataset::id_column):
/// keeps the last staged record of each id, and finds committed records of the staged ids at
/// another `block_time`; their files are dropped and their other records staged again.
fn displace_moved_ids(
    lake: &Base,
    manifest: &Manifest,
    index: Option<&IdIndex>,
    dataset: Dataset,
    all: &RecordBatch,
    all_tags: &Tags,
) -> Result<Displaced> {
    let Some(id_name) = dataset.id_column() else {
        return Ok(Displaced {
            staged: all.clone(),
            tags: all_tags.clone(),
            remove: Vec::new(),
            not_new: 0,
            from_write: all.num_rows(),
            id_ranges: BTreeMap::new(),
        });
    };
    let time_name = dataset.time_column();
    let ids = column(all, id_name, dataset)?.as_primitive::<Int64Type>();
    let times = column(all, time_name, dataset)?.as_primitive::<TimestampMicrosecondType>();
    // The last staged record of an id is the newest answer.
    let mut winner: HashMap<i64, usize> = HashMap::with_capacity(all.num_rows());
    for row in 0..all.num_rows() {
        winner.insert(ids.value(row), row);
    }
    let (staged, staged_tags) = if winner.len() == all.num_rows() {
        (all.clone(), all_tags.clone())
    } else {
        let keep: Vec<bool> = (0..all.num_rows())
            .map(|row| winner[&ids.value(row)] == row)
            .collect();
        let keep = arrow_array::BooleanArray::from(keep);
        let context = || format!("keeping the last {dataset} record of each id");
        let staged =
            arrow_select::filter::filter_record_batch(all, &keep).map_err(arrow_err(context()))?;
        let tags = arrow_select::filter::filter(all_tags, &keep).map_err(arrow_err(context()))?;
        (staged, tags.as_primitive().clone())
    };
    let staged_time: HashMap<i64, i64> = winner
        .iter()
        .map(|(&id, &row)| (id, times.value(row)))
        .collect();
    let (Some(lo), Some(hi)) = (
        staged_time.keys().min().copied(),
        staged_time.keys().max().copied(),
    ) else {
        return Ok(Displaced {
            from_write: staged.num_rows(),
            staged,
            tags: staged_tags,
            remove: Vec::new(),
            not_new: 0,
            id_ranges: BTreeMap::new(),
        });
    };

    let schema = staged.schema();
    let from_write = staged.num_rows();
    let staged_ids = column(&staged, id_name, dataset)?
        .as_primitive::<Int64Type>()
        .clone();
    let mut pieces = vec![staged];
    let mut rewritten_ids: HashSet<i64> = HashSet::new();
    let mut remove = Vec::new();
    let mut not_new = 0u64;
    let mut id_ranges = BTreeMap::new();
    // The committed files that can hold a moved id: with the index, those of the partition and
    // time span of each moved id's committed time; without it, every file whose id range
    // meets the write's.
    let candidates: Vec<(&String, &FileEntry)> = match index {
        Some(index) => {
            let mut old_times: Vec<i64> = staged_time
                .iter()
                .filter_map(|(&id, &t)| index.time_of(id).filter(|&old| old != t))
                .collect();
            old_times.sort_unstable();
            old_times.dedup();
            let mut found: BTreeMap<&String, &FileEntry> = BTreeMap::new();
            for old in old_times {
                let partition = Partition {
                    dataset,
                    chain: ChainFamily::from_chain_id(None),
                    interval: None,
                    date: micros_to_time(old)?.date_naive(),
                };
                let at = micros_to_time(old)?;
                found.extend(
                    manifest
                        .files_in(&partition)
                        .filter(|(_, e)| e.min_time <= at && at <= e.max_time),
                );
            }
            found.into_iter().collect()
        }
        None => manifest
            .files_of(dataset)
            .filter(|(_, e)| {
                !(e.max_id.is_some_and(|max| max < lo) || e.min_id.is_some_and(|min| min > hi))
            })
            .collect(),
    };
    for (path, entry) in candidates {
        let keys = read_columns(lake, path, &[id_name, time_name])?;
        let file_ids = column(&keys, id_name, dataset)?.as_primitive::<Int64Type>();
        let file_times =
            column(&keys, time_name, dataset)?.as_primitive::<TimestampMicrosecondType>();
        let unranged = entry.min_id.is_none() || entry.max_id.is_none();
        if let (true, Some(range)) = (unranged, value_range(file_ids)) {
            id_ranges.insert(path.clone(), range);
        }
        let moved: Vec<bool> = (0..keys.num_rows())
            .map(|row| {
                staged_time
                    .get(&file_ids.value(row))
                    .is_some_and(|&t| t != file_times.value(row))
            })
            .collect();
        let n_moved = moved.iter().filter(|m| **m).count();
        if n_moved == 0 {
            continue;
        }
        // The file is dropped and its other records staged again: no staged record of an id
        // it holds is new to the lake.
        rewritten_ids.extend(file_ids.iter().flatten());
        let committed = read_file(lake, path)?;
        let committed = RecordBatch::try_new(schema.clone(), committed.columns().to_vec())
            .map_err(arrow_err(format!("{dataset} file {path}")))?;
        let keep: Vec<bool> = moved.iter().map(|m| !m).collect();
        let kept = arrow_select::filter::filter_record_batch(
            &committed,
            &arrow_array::BooleanArray::from(keep),
        )
        .map_err(arrow_err(format!("rewriting {path}")))?;
        not_new += (kept.num_rows() + n_moved) as u64;
        pieces.push(kept);
        remove.push(path.clone());
    }
    // A moved record is not new to the lake, nor is a staged record of an id a rewritten file
    // held, nor are the records staged again.
    let restaged: usize = pieces[1..].iter().map(RecordBatch::num_rows).sum();
    let tags: Tags = staged_tags
        .iter()
        .zip(staged_ids.iter())
        .map(|(tag, id)| tag.filter(|_| !id.is_some_and(|id| rewritten_ids.contains(&id))))
        .chain(std::iter::repeat_n(None, restaged))
        .collect();
    let staged = if pieces.len() == 1 {
        pieces.pop().expect("one piece")
    } else {
        concat_batches(&schema, &pieces).map_err(arrow_err(format!("merging {dataset}")))?
    };
    id_ranges.retain(|path, _| !remove.contains(path));
    Ok(Displaced {
        staged,
        tags,
        remove,
        not_new,
        from_write,
        id_ranges,
    })
}

/// Drops the records among the first `from_write` rows of `staged` whose id the index holds
/// at the same time: records already committed. The other rows (new ids, moved ids, records
/// of rewritten files) stay. Also returns, per kept row, whether it is a moved id: in a lake
/// that holds an id twice (which `verify` reports) the index knows one of its times only, so
/// the partitions receiving moved ids are still checked against their files.
fn drop_indexed_repeats(
    dataset: Dataset,
    staged: &RecordBatch,
    tags: &Tags,
    from_write: usize,
    index: &IdIndex,
) -> Result<(RecordBatch, Tags, Vec<bool>)> {
    let Some(id_name) = dataset.id_column() else {
        return Ok((staged.clone(), tags.clone(), vec![false; staged.num_rows()]));
    };
    let ids = column(staged, id_name, dataset)?.as_primitive::<Int64Type>();
    let times =
        column(staged, dataset.time_column(), dataset)?.as_primitive::<TimestampMicrosecondType>();
    let mut keep = Vec::with_capacity(staged.num_rows());
    let mut moved = Vec::with_capacity(staged.num_rows());
    for row in 0..staged.num_rows() {
        let verdict = if row >= from_write {
            Some(false)
        } else {
            match index.time_of(ids.value(row)) {
                Some(t) if t == times.value(row) => None,
                Some(_) => Some(true),
                None => Some(false),
            }
        };
        keep.push(verdict.is_some());
        if let Some(is_moved) = verdict {
            moved.push(is_moved);
        }
    }
    if keep.iter().all(|k| *k) {
        return Ok((staged.clone(), tags.clone(), moved));
    }
    let keep = arrow_array::BooleanArray::from(keep);
    let context = || format!("dropping committed {dataset} ids");
    let kept =
        arrow_select::filter::filter_record_batch(staged, &keep).map_err(arrow_err(context()))?;
    let kept_tags = arrow_select::filter::filter(tags, &keep).map_err(arrow_err(context()))?;
    Ok((kept, kept_tags.as_primitive().clone(), moved))
}

/// The outcome of merging a staged partition into a replace-on-write dataset.
struct Replaced {
    /// Rows to write (file schema): new and changed records, plus the untouched records of
    /// rewritten files.
    batch: RecordBatch,
    /// Files to drop.
    remove: Vec<String>,
    /// Rows of the staged partition (by position) whose key was not committed before.
    added_rows: Vec<u32>,
}

/// Merges `part` into the committed files of its partition, the last write of a key winning.
/// A record equal to the committed one changes nothing (no file is rewritten for it).
fn replace_known_keys(
    lake: &Base,
    manifest: &Manifest,
    gone: &HashSet<String>,
    partition: &Partition,
    part: &RecordBatch,
) -> Result<Replaced> {
    let dataset = partition.dataset;
    let staged = to_file_batch(dataset, part)?;
    let schema = staged.schema();
    let keys = encode_keys(dataset, &staged)?;
    // The last occurrence of a key within the write wins.
    let mut index: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    for (i, k) in keys.iter().enumerate() {
        index.insert(k.as_slice(), i);
    }
    let winners: HashSet<usize> = index.values().copied().collect();
    let whole = |batch: &RecordBatch| -> Result<Vec<Vec<u8>>> {
        let fields = batch
            .columns()
            .iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect();
        let conv = RowConverter::new(fields).map_err(arrow_err(format!("{dataset} rows")))?;
        let rows = conv
            .convert_columns(batch.columns())
            .map_err(arrow_err(format!("{dataset} rows")))?;
        Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
    };
    let staged_rows = whole(&staged)?;

    // `found[i]`: the staged record's key is committed; `same[i]`: with equal values, in the
    // file `same_in[i]`.
    let mut found = vec![false; staged.num_rows()];
    let mut same_in: Vec<Option<usize>> = vec![None; staged.num_rows()];
    let mut files: Vec<(String, RecordBatch, Vec<bool>)> = Vec::new();
    let mut dirty: Vec<bool> = Vec::new();
    let (lo, hi) = time_range(dataset, &staged)?;
    for (path, entry) in manifest.files_in(partition) {
        if gone.contains(path) || entry.max_time < lo || entry.min_time > hi {
            continue;
        }
        let committed = read_file(lake, path)?;
        let committed = RecordBatch::try_new(schema.clone(), committed.columns().to_vec())
            .map_err(arrow_err(format!("{dataset} file {path}")))?;
        let committed_keys = encode_keys(dataset, &committed)?;
        let committed_rows = whole(&committed)?;
        let file_no = files.len();
        let mut keep = vec![true; committed.num_rows()];
        let mut changed = false;
        for (j, k) in committed_keys.iter().enumerate() {
            if let Some(&i) = index.get(k.as_slice()) {
                found[i] = true;
                keep[j] = false;
                if committed_rows[j] == staged_rows[i] {
                    same_in[i] = Some(file_no);
                } else {
                    changed = true;
                }
            }
        }
        files.push((path.clone(), committed, keep));
        dirty.push(changed);
    }

    let mut pieces = Vec::new();
    let take: Vec<bool> = (0..staged.num_rows())
        .map(|i| winners.contains(&i) && same_in[i].is_none_or(|f| dirty[f]))
        .collect();
    pieces.push(
        arrow_select::filter::filter_record_batch(&staged, &arrow_array::BooleanArray::from(take))
            .map_err(arrow_err(format!("selecting {dataset} records")))?,
    );
    let mut remove = Vec::new();
    for ((path, committed, keep), changed) in files.into_iter().zip(dirty) {
        if changed {
            pieces.push(
                arrow_select::filter::filter_record_batch(
                    &committed,
                    &arrow_array::BooleanArray::from(keep),
                )
                .map_err(arrow_err(format!("rewriting {path}")))?,
            );
            remove.push(path);
        }
    }
    let batch =
        concat_batches(&schema, &pieces).map_err(arrow_err(format!("merging {dataset}")))?;
    let added_rows = (0..staged.num_rows())
        .filter(|&i| winners.contains(&i) && !found[i])
        .map(|i| i as u32)
        .collect();
    Ok(Replaced {
        batch,
        remove,
        added_rows,
    })
}

/// Keeps the rows of `part` whose key is neither committed in the partition nor repeated
/// earlier in `part`; with the mask of kept rows when some were dropped.
fn drop_known_keys(
    lake: &Base,
    manifest: &Manifest,
    gone: &HashSet<String>,
    partition: &Partition,
    part: &RecordBatch,
) -> Result<(RecordBatch, Option<arrow_array::BooleanArray>)> {
    let dataset = partition.dataset;
    let (lo, hi) = time_range(dataset, part)?;
    let conv = key_converter(dataset, part)?;
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    // Every key includes the time column or fixes it (a committed id has the time of the
    // staged record, `displace_moved_ids` having dropped it otherwise), so only files whose
    // time range overlaps the batch can hold one of its keys.
    for (path, entry) in manifest.files_in(partition) {
        if gone.contains(path) || entry.max_time < lo || entry.min_time > hi {
            continue;
        }
        let keys = read_columns(lake, path, dataset.key_columns())?;
        let rows = conv
            .convert_columns(&key_columns(dataset, &keys)?)
            .map_err(arrow_err(format!("{dataset} keys of {path}")))?;
        seen.extend(rows.iter().map(|r| r.as_ref().to_vec()));
    }
    let rows = conv
        .convert_columns(&key_columns(dataset, part)?)
        .map_err(arrow_err(format!("{dataset} keys")))?;
    let keep: Vec<bool> = rows
        .iter()
        .map(|r| seen.insert(r.as_ref().to_vec()))
        .collect();
    if keep.iter().all(|k| *k) {
        return Ok((part.clone(), None));
    }
    let keep = arrow_array::BooleanArray::from(keep);
    let kept = arrow_select::filter::filter_record_batch(part, &keep)
        .map_err(arrow_err(format!("dropping duplicate {dataset} keys")))?;
    Ok((kept, Some(keep)))
}

/// Puts the files and appends `commit` (its version, state and id ranges already set) with
/// them added and the `remove`d files removed, in the journaled order described in
/// the commit log's module. The removed files stay on disk, listed in
/// [`Manifest::removed`](crate::lake::log::Manifest::removed), for the versions that list
/// them, until [`vacuum`](crate::lake::Lake::vacuum) deletes them. Returns the new version.
pub fn commit_files(
    lake: &Base,
    mut commit: Commit,
    files: Vec<NewFile>,
    remove: Vec<String>,
) -> Result<u64> {
    let store = lake.store();
    commit.committed_at = Some(Utc::now());
    let journal = Journal {
        version: commit.version,
        add: files.iter().map(|f| f.path.clone()).collect(),
        remove: remove.clone(),
        delete: Vec::new(),
    };
    journal.store(store)?;
    for f in files {
        match &f.data {
            FileData::Encoded(data) => store.put(&f.path, data)?,
            FileData::Written => store.rename(&temp_name(&f.path), &f.path)?,
        }
        commit.add.insert(f.path, f.entry);
    }
    commit.id_ranges.retain(|path, _| !remove.contains(path));
    commit.remove = remove.clone();
    let version = commit.version;
    if let Err(e) = lake.append(commit) {
        if matches!(e, Error::CommitConflict { .. }) {
            // Another writer's commit holds this version: the journal would take this
            // commit's files for committed ones, so they go now.
            for path in &journal.add {
                store.delete(path)?;
            }
            clear_journal(store)?;
        }
        return Err(e);
    }
    // The removed files stay for the versions that list them, until a vacuum.
    clear_journal(store)?;
    Ok(version)
}
