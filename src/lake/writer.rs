//! Writing: check, split by partition, drop duplicate keys, sort, encode, commit atomically.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::{
    SortColumn, SortOptions, concat_batches, lexsort_to_indices, take_record_batch,
};
use arrow::datatypes::{Int64Type, TimestampMicrosecondType};
use arrow::row::{RowConverter, SortField};
use bytes::Bytes;
use chrono::{DateTime, NaiveDate, Utc};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::layout::{Chain, Partition, data_file_name};
use super::manifest::{FileEntry, Journal, Manifest};
use super::schema::{self, SCHEMA_VERSION};
use super::{Dataset, Lake};
use crate::{Error, Result};

/// Default rows per row group. Measured with `cargo bench --bench convert` and the time-range
/// scan check in the lake tests: see the crate's benchmark notes.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 65_536;

/// A data file encoded and ready to be put into the lake.
#[derive(Debug, Clone)]
pub struct NewFile {
    /// Path relative to the lake root.
    pub path: String,
    /// The encoded Parquet file.
    pub data: Bytes,
    /// Its manifest entry.
    pub entry: FileEntry,
}

/// Checks that `batch` has exactly the dataset's record schema (names, types and nesting).
pub fn check_batch(dataset: Dataset, batch: &RecordBatch) -> Result<()> {
    let expected = schema::record_schema(dataset);
    let got = batch.schema();
    if got.fields().len() != expected.fields().len() {
        return Err(Error::Lake {
            path: dataset.name().into(),
            message: format!(
                "batch has {} columns, the {dataset} record schema has {}",
                got.fields().len(),
                expected.fields().len()
            ),
        });
    }
    for (g, e) in got.fields().iter().zip(expected.fields()) {
        if g.name() != e.name() || g.data_type() != e.data_type() {
            return Err(Error::Lake {
                path: dataset.name().into(),
                message: format!(
                    "batch column `{}` ({}) does not match the {dataset} schema's `{}` ({})",
                    g.name(),
                    g.data_type(),
                    e.name(),
                    e.data_type()
                ),
            });
        }
        if !e.is_nullable()
            && batch
                .column_by_name(e.name())
                .is_some_and(|c| c.null_count() > 0)
        {
            return Err(Error::Lake {
                path: dataset.name().into(),
                message: format!("column `{}` must not hold nulls", e.name()),
            });
        }
    }
    Ok(())
}

fn arrow_err(context: impl Into<String>) -> impl FnOnce(arrow::error::ArrowError) -> Error {
    let context = context.into();
    move |source| Error::Arrow { context, source }
}

fn column<'b>(batch: &'b RecordBatch, name: &str, dataset: Dataset) -> Result<&'b ArrayRef> {
    batch.column_by_name(name).ok_or_else(|| Error::Lake {
        path: dataset.name().into(),
        message: format!("batch lacks the column `{name}`"),
    })
}

/// Microseconds since the epoch to a UTC time; values outside chrono's range are errors.
pub(crate) fn micros_to_time(us: i64) -> Result<DateTime<Utc>> {
    DateTime::from_timestamp_micros(us).ok_or_else(|| Error::Lake {
        path: "".into(),
        message: format!("timestamp {us} µs is outside the supported range"),
    })
}

/// Splits a record batch into partitions (row indices per partition).
fn partition_rows(dataset: Dataset, batch: &RecordBatch) -> Result<BTreeMap<Partition, Vec<u32>>> {
    let time =
        column(batch, dataset.time_column(), dataset)?.as_primitive::<TimestampMicrosecondType>();
    let chain_ids = if dataset.has_chain_id() {
        Some(column(batch, "chain_id", dataset)?.as_primitive::<Int64Type>())
    } else {
        None
    };
    let intervals = match dataset.path_columns() {
        [] => None,
        [name] => Some(column(batch, name, dataset)?.as_primitive::<Int64Type>()),
        _ => unreachable!("datasets have at most one key level between chain and date"),
    };
    let mut out: BTreeMap<Partition, Vec<u32>> = BTreeMap::new();
    for row in 0..batch.num_rows() {
        let chain =
            Chain::from_chain_id(chain_ids.and_then(|c| c.is_valid(row).then(|| c.value(row))));
        let date: NaiveDate = micros_to_time(time.value(row))?.date_naive();
        let interval = intervals.map(|i| i.value(row));
        let p = Partition {
            dataset,
            chain,
            interval,
            date,
        };
        let idx = u32::try_from(row).map_err(|e| Error::Lake {
            path: dataset.name().into(),
            message: format!("batch of more than 2^32 rows: {e}"),
        })?;
        out.entry(p).or_default().push(idx);
    }
    Ok(out)
}

/// The natural-key encoder of a dataset: equal keys give equal bytes.
fn key_converter(dataset: Dataset, batch: &RecordBatch) -> Result<RowConverter> {
    let fields = dataset
        .key_columns()
        .iter()
        .map(|k| {
            Ok(SortField::new(
                column(batch, k, dataset)?.data_type().clone(),
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    RowConverter::new(fields).map_err(arrow_err(format!("{dataset} key encoder")))
}

fn key_columns(dataset: Dataset, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    dataset
        .key_columns()
        .iter()
        .map(|k| column(batch, k, dataset).cloned())
        .collect()
}

/// Encoded natural keys of every row of `batch`.
pub(crate) fn encode_keys(dataset: Dataset, batch: &RecordBatch) -> Result<Vec<Vec<u8>>> {
    let conv = key_converter(dataset, batch)?;
    let rows = conv
        .convert_columns(&key_columns(dataset, batch)?)
        .map_err(arrow_err(format!("{dataset} keys")))?;
    Ok(rows.iter().map(|r| r.as_ref().to_vec()).collect())
}

/// Reads a data file's natural-key columns (and the time column) from the lake.
pub(crate) fn read_key_batch(lake: &Lake, dataset: Dataset, path: &str) -> Result<RecordBatch> {
    let data = Bytes::from(lake.store().get(path)?);
    let location = lake.store().location(path);
    let perr = |source| Error::Parquet {
        path: location.clone(),
        source,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(data).map_err(perr)?;
    let arrow_schema = builder.schema().clone();
    let mut wanted: Vec<usize> = Vec::new();
    for name in dataset.key_columns() {
        let i = arrow_schema.index_of(name).map_err(arrow_err(format!(
            "{dataset} file {path} lacks key column {name}"
        )))?;
        wanted.push(i);
    }
    wanted.sort_unstable();
    wanted.dedup();
    let mask = ProjectionMask::roots(builder.parquet_schema(), wanted);
    let reader = builder.with_projection(mask).build().map_err(perr)?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(arrow_err(format!("reading keys of {path}")))?;
    let schema = match batches.first() {
        Some(b) => b.schema(),
        None => {
            return Ok(RecordBatch::new_empty(Arc::new(
                arrow_schema
                    .project(
                        &dataset
                            .key_columns()
                            .iter()
                            .map(|k| arrow_schema.index_of(k))
                            .collect::<std::result::Result<Vec<_>, _>>()
                            .map_err(arrow_err(format!("{dataset} keys of {path}")))?,
                    )
                    .map_err(arrow_err(format!("{dataset} keys of {path}")))?,
            )));
        }
    };
    concat_batches(&schema, &batches).map_err(arrow_err(format!("keys of {path}")))
}

/// Sorts a batch by time, then by the natural key.
pub(crate) fn sort_batch(dataset: Dataset, batch: &RecordBatch) -> Result<RecordBatch> {
    let mut cols = vec![column(batch, dataset.time_column(), dataset)?.clone()];
    for k in dataset.key_columns() {
        if *k != dataset.time_column() {
            cols.push(column(batch, k, dataset)?.clone());
        }
    }
    let sort: Vec<SortColumn> = cols
        .into_iter()
        .map(|values| SortColumn {
            values,
            options: Some(SortOptions {
                descending: false,
                nulls_first: true,
            }),
        })
        .collect();
    let idx = lexsort_to_indices(&sort, None).map_err(arrow_err(format!("sorting {dataset}")))?;
    take_record_batch(batch, &idx).map_err(arrow_err(format!("sorting {dataset}")))
}

/// Drops the path-only columns, giving a batch with the dataset's file schema.
pub(crate) fn to_file_batch(dataset: Dataset, batch: &RecordBatch) -> Result<RecordBatch> {
    let file_schema = schema::file_schema(dataset);
    let cols = file_schema
        .fields()
        .iter()
        .map(|f| column(batch, f.name(), dataset).cloned())
        .collect::<Result<Vec<_>>>()?;
    RecordBatch::try_new(file_schema, cols).map_err(arrow_err(format!("{dataset} file batch")))
}

/// Encodes a sorted batch with the file schema into Parquet bytes.
pub fn encode_parquet(
    dataset: Dataset,
    file_batch: &RecordBatch,
    row_group_rows: usize,
    zstd_level: i32,
) -> Result<Vec<u8>> {
    let schema = file_batch.schema();
    let level = ZstdLevel::try_new(zstd_level).map_err(|source| Error::Parquet {
        path: dataset.name().into(),
        source,
    })?;
    let time_idx = schema
        .index_of(dataset.time_column())
        .map_err(arrow_err(format!("{dataset} time column")))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_max_row_group_row_count(Some(row_group_rows.max(1)))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_key_value_metadata(Some(vec![
            KeyValue::new(
                schema::SCHEMA_VERSION_KEY.to_owned(),
                SCHEMA_VERSION.to_string(),
            ),
            KeyValue::new(schema::DATASET_KEY.to_owned(), dataset.name().to_owned()),
        ]))
        .set_sorting_columns(Some(vec![SortingColumn {
            column_idx: i32::try_from(time_idx).expect("a schema has fewer than 2^31 columns"),
            descending: false,
            nulls_first: true,
        }]))
        .build();
    let perr = |source| Error::Parquet {
        path: dataset.name().into(),
        source,
    };
    let mut writer = ArrowWriter::try_new(Vec::new(), schema, Some(props)).map_err(perr)?;
    writer.write(file_batch).map_err(perr)?;
    writer.into_inner().map_err(perr)
}

/// Sorts a record batch of one partition and encodes it as one Parquet file, exactly as a
/// commit does (without the duplicate-key check against committed data).
pub fn encode_records(
    dataset: Dataset,
    batch: &RecordBatch,
    row_group_rows: usize,
    zstd_level: i32,
) -> Result<Vec<u8>> {
    let sorted = sort_batch(dataset, batch)?;
    encode_parquet(
        dataset,
        &to_file_batch(dataset, &sorted)?,
        row_group_rows,
        zstd_level,
    )
}

/// Smallest and largest value of the dataset's time column.
pub(crate) fn time_range(
    dataset: Dataset,
    batch: &RecordBatch,
) -> Result<(DateTime<Utc>, DateTime<Utc>)> {
    let t =
        column(batch, dataset.time_column(), dataset)?.as_primitive::<TimestampMicrosecondType>();
    let (min, max) = (
        arrow::compute::min(t).ok_or_else(|| Error::Lake {
            path: dataset.name().into(),
            message: "empty batch has no time range".into(),
        })?,
        arrow::compute::max(t).ok_or_else(|| Error::Lake {
            path: dataset.name().into(),
            message: "empty batch has no time range".into(),
        })?,
    );
    Ok((micros_to_time(min)?, micros_to_time(max)?))
}

/// Encodes one sorted partition batch (record or file schema) into files of at most
/// `max_rows_per_file` rows each.
pub(crate) fn encode_partition(
    lake: &Lake,
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
        let data = encode_parquet(dataset, &chunk, opts.row_group_rows, opts.zstd_level)?;
        let (min_time, max_time) = time_range(dataset, &chunk)?;
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
            },
            data: Bytes::from(data),
        });
    }
    Ok(out)
}

/// Turns the staged batches into encoded files: per partition, records whose key is already
/// committed or staged earlier are dropped (the first occurrence wins), the rest are sorted.
pub fn prepare_files(
    lake: &Lake,
    manifest: &Manifest,
    staged: &BTreeMap<Dataset, Vec<RecordBatch>>,
    version: u64,
) -> Result<Vec<NewFile>> {
    let mut files = Vec::new();
    let mut seq = 0;
    for (&dataset, batches) in staged {
        let Some(first) = batches.first() else {
            continue;
        };
        let all = concat_batches(&first.schema(), batches)
            .map_err(arrow_err(format!("staging {dataset}")))?;
        for (partition, rows) in partition_rows(dataset, &all)? {
            let idx = arrow::array::UInt32Array::from(rows);
            let part =
                take_record_batch(&all, &idx).map_err(arrow_err(format!("splitting {dataset}")))?;
            let fresh = drop_known_keys(lake, manifest, &partition, &part)?;
            if fresh.num_rows() == 0 {
                continue;
            }
            let sorted = sort_batch(dataset, &fresh)?;
            files.extend(encode_partition(
                lake, &partition, &sorted, version, &mut seq,
            )?);
        }
    }
    Ok(files)
}

/// Keeps the rows of `part` whose key is neither committed in the partition nor repeated
/// earlier in `part`.
fn drop_known_keys(
    lake: &Lake,
    manifest: &Manifest,
    partition: &Partition,
    part: &RecordBatch,
) -> Result<RecordBatch> {
    let dataset = partition.dataset;
    let (lo, hi) = time_range(dataset, part)?;
    let dir = format!("{}/", partition.dir());
    let conv = key_converter(dataset, part)?;
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    // Every key includes the time column or fixes it (an id's time never changes), so only
    // files whose time range overlaps the batch can hold one of its keys.
    for (path, entry) in manifest.files_of(dataset) {
        if !path.starts_with(&dir) || entry.max_time < lo || entry.min_time > hi {
            continue;
        }
        let keys = read_key_batch(lake, dataset, path)?;
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
        return Ok(part.clone());
    }
    arrow::compute::filter_record_batch(part, &arrow::array::BooleanArray::from(keep))
        .map_err(arrow_err(format!("dropping duplicate {dataset} keys")))
}

/// Puts the files and commits a new manifest listing them (without the `remove`d files), in
/// the journaled order described in [`super::manifest`].
pub fn commit_files(
    lake: &Lake,
    mut next: Manifest,
    files: Vec<NewFile>,
    remove: Vec<String>,
) -> Result<u64> {
    let store = lake.store();
    next.version += 1;
    next.committed_at = Some(Utc::now());
    let journal = Journal {
        version: next.version,
        add: files.iter().map(|f| f.path.clone()).collect(),
        remove: remove.clone(),
    };
    journal.store(store)?;
    for f in files {
        store.put(&f.path, &f.data)?;
        next.files.insert(f.path, f.entry);
    }
    for r in &remove {
        next.files.remove(r);
    }
    next.store(store)?;
    for r in &remove {
        store.delete(r)?;
    }
    store.delete(super::manifest::JOURNAL_PATH)?;
    Ok(next.version)
}
