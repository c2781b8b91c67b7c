//! The few leaves of a snapshot's profiles that a search reads before its page is chosen.
//!
//! polars decodes a struct column whole, and a profile's `metrics` holds every window's few
//! dozen numbers: a filter on `metrics.1h.volume` would decode all of them for every profile.
//! Here the snapshot's files are read with the Parquet reader's leaf projection instead, only
//! the leaves under the paths the request names (plus `fetched_at` where a file holds more than
//! one snapshot), and turned into a polars frame of the same column types, the structs holding
//! only those fields. The search's expressions resolve the same paths in it to the same values,
//! so its answer is that of the whole frame. The arrow-rs arrays become polars' by copying
//! their buffers whole. [`Keys`] remembers where each row lies, so the addresses of the rows
//! that can reach the page, and the page's rows, are read afterwards by row selection
//! ([`Keys::rows`]).

use std::collections::BTreeMap;

use arrow_array::types::{ArrowPrimitiveType, Float64Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch, cast::AsArray};
use arrow_schema::{DataType as ArrowType, TimeUnit as ArrowUnit};
use chrono::{DateTime, Utc};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, RowSelection};
use parquet::schema::types::SchemaDescriptor;
use polars::prelude::*;
use rayon::prelude::*;

use crate::lake::cols::{profile, token};
use crate::lake::read::{SharedFile, arrow_error, files_holding, parquet_error};
use crate::lake::{ChainFamily, Dataset, FileEntry, Lake, Partition};
use crate::{Error, Result};

const FETCHED_AT: &str = profile::FETCHED_AT;

/// The rows of `chain`'s snapshot fetched at `at`, with the leaves under `paths` only (or
/// `token_address` alone when none of them is in the files); the column types are those of `schema` (the profiles' whole schema), structs holding a
/// subset of their fields. `None` when a column has a type this reader does not convert (the
/// caller then reads the whole frame).
pub(super) fn read(
    lake: &Lake,
    chain: ChainFamily,
    at: DateTime<Utc>,
    paths: &[String],
    schema: &Schema,
) -> Result<Option<Keys>> {
    let manifest = lake.snapshot()?;
    let partition = Partition {
        dataset: Dataset::TokenProfiles,
        chain,
        interval: None,
        date: at.date_naive(),
    };
    // A file whose every profile was fetched at `at` (its manifest entry's time range is that
    // one instant) is read whole, without its `fetched_at`.
    let (files, entries): (Vec<String>, Vec<FileEntry>) =
        files_holding(&manifest, &partition, at).into_iter().unzip();
    let whole: Vec<bool> = entries.iter().map(|e| e.min_time == e.max_time).collect();
    if files.is_empty() {
        return Ok(None);
    }
    let mut prefixes: Vec<Vec<&str>> = paths.iter().map(|p| existing_prefix(p, schema)).collect();
    if prefixes.iter().all(Vec::is_empty) {
        // Rows are counted by the leaves read: with none of the paths in the files, one column
        // is read all the same.
        prefixes.push(vec![token::TOKEN]);
    }
    let wanted = at.timestamp_micros();
    // One file per task: the files are decoded in parallel, then stacked in their order.
    let read: Vec<Result<(ArrowReaderMetadata, Option<DataFrame>)>> = files
        .par_iter()
        .zip(&entries)
        .zip(&whole)
        .map(|((path, entry), whole)| read_file(lake, path, entry, &prefixes, schema, !whole))
        .collect();
    let mut frame: Option<DataFrame> = None;
    let mut locations = Vec::new();
    let mut metadata = Vec::with_capacity(files.len());
    for (index, result) in read.into_iter().enumerate() {
        let file = u32::try_from(index).expect("fewer than 2^32 files in a partition");
        let (meta, df) = result?;
        metadata.push(meta);
        let Some(df) = df else {
            return Ok(None);
        };
        if whole[index] {
            let rows = u32::try_from(df.height()).expect("fewer than 2^32 rows in a file");
            locations.extend((0..rows).map(|row| (file, row)));
            stack(&mut frame, df, "stacking the profiles' key columns")?;
            continue;
        }
        let fetched = df
            .column(FETCHED_AT)
            .and_then(|c| c.i64())
            .map_err(Error::polars("selecting the snapshot's profiles"))?;
        let mask: BooleanChunked = fetched
            .iter()
            .map(|t| t == Some(wanted))
            .collect::<BooleanChunked>();
        for (row, keep) in mask.iter().enumerate() {
            if keep == Some(true) {
                let row = u32::try_from(row).expect("fewer than 2^32 rows in a file");
                locations.push((file, row));
            }
        }
        let df = df
            .filter(&mask)
            .and_then(|df| df.drop(FETCHED_AT))
            .map_err(Error::polars("selecting the snapshot's profiles"))?;
        stack(&mut frame, df, "stacking the profiles' key columns")?;
    }
    let Some(frame) = frame else { return Ok(None) };
    Ok(Some(Keys {
        frame,
        files,
        entries,
        metadata,
        locations,
    }))
}

/// The key columns of a snapshot, and where each row lies in the lake's files.
pub(super) struct Keys {
    /// The leaves read, one row per profile of the snapshot.
    pub frame: DataFrame,
    files: Vec<String>,
    /// The manifest entry of each file.
    entries: Vec<FileEntry>,
    /// The footer of each file, read once.
    metadata: Vec<ArrowReaderMetadata>,
    /// The file (an index into `files`) and the row within it of each row of `frame`.
    locations: Vec<(u32, u32)>,
}

impl Keys {
    /// The rows at the given rows of [`Keys::frame`], in that order, read from their files by
    /// row selection, with the leaves under `paths` (whole columns and structs of a subset of
    /// their fields, as [`read`]). `None` when a column has a type this reader does not
    /// convert.
    pub(super) fn rows(
        &self,
        lake: &Lake,
        rows: &[IdxSize],
        paths: &[String],
        schema: &Schema,
    ) -> Result<Option<DataFrame>> {
        let prefixes: Vec<Vec<&str>> = paths.iter().map(|p| existing_prefix(p, schema)).collect();
        let mut by_file: BTreeMap<u32, Vec<(u32, usize)>> = BTreeMap::new();
        for (k, row) in rows.iter().enumerate() {
            let index = usize::try_from(*row).expect("a row number fits in usize");
            let (file, in_file) = self.locations[index];
            by_file.entry(file).or_default().push((in_file, k));
        }
        // Rows in ascending order are the files' rows in file order: the files' frames are
        // stacked as they are.
        let ascending = rows.is_sorted_by(|a, b| a < b);
        let mut picked: Vec<Option<DataFrame>> = vec![None; rows.len()];
        let read: Vec<Result<FileRows>> = by_file
            .into_iter()
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|(file, mut wanted)| {
                wanted.sort_unstable();
                wanted.dedup_by_key(|(r, _)| *r);
                let index = file as usize;
                let df = read_rows(
                    lake,
                    &self.files[index],
                    &self.entries[index],
                    &self.metadata[index],
                    &wanted,
                    &prefixes,
                    schema,
                )?;
                Ok((wanted, df))
            })
            .collect();
        let mut out: Option<DataFrame> = None;
        for result in read {
            let (wanted, df) = result?;
            let Some(df) = df else {
                return Ok(None);
            };
            if ascending {
                stack(&mut out, df, "stacking the page's profiles")?;
                continue;
            }
            for (i, (_, k)) in wanted.iter().enumerate() {
                picked[*k] = Some(df.slice(i64::try_from(i).expect("a small index"), 1));
            }
        }
        for df in picked.into_iter().flatten() {
            stack(&mut out, df, "stacking the page's profiles")?;
        }
        Ok(out)
    }
}

/// The rows read from one file (row in file and place in the page, ascending by row) and their
/// frame, `None` when a column does not convert.
type FileRows = (Vec<(u32, usize)>, Option<DataFrame>);

/// The rows `wanted` (row in file, ascending) of one file, the leaves under `prefixes`: only
/// the row groups holding them are read (on an object store, only their column chunks of
/// those leaves are fetched).
fn read_rows(
    lake: &Lake,
    path: &str,
    entry: &FileEntry,
    metadata: &ArrowReaderMetadata,
    wanted: &[(u32, usize)],
    prefixes: &[Vec<&str>],
    schema: &Schema,
) -> Result<Option<DataFrame>> {
    let file = SharedFile::open(lake.base(), path, entry)?;
    let mask = leaf_mask(metadata.parquet_schema(), prefixes, false);
    // The first row of each row group, and the row groups holding a wanted row (ascending,
    // as the rows are).
    let mut firsts = Vec::with_capacity(metadata.metadata().num_row_groups());
    let mut total = 0usize;
    for group in metadata.metadata().row_groups() {
        firsts.push(total);
        total += usize::try_from(group.num_rows()).unwrap_or(0);
    }
    let group_of = |row: usize| {
        firsts
            .partition_point(|&first| first <= row)
            .saturating_sub(1)
    };
    let mut groups: Vec<usize> = wanted.iter().map(|(r, _)| group_of(*r as usize)).collect();
    groups.dedup();
    // The rows renumbered within the row groups read, which follow each other.
    let mut read_rows = 0usize;
    let mut first_read = Vec::with_capacity(groups.len());
    for &g in &groups {
        first_read.push(read_rows);
        let end = firsts.get(g + 1).copied().unwrap_or(total);
        read_rows += end - firsts[g];
    }
    let selection = RowSelection::from_consecutive_ranges(
        wanted.iter().map(|(r, _)| {
            let r = *r as usize;
            let g = group_of(r);
            let k = groups.partition_point(|&x| x < g);
            let at = first_read[k] + (r - firsts[g]);
            at..at + 1
        }),
        read_rows,
    );
    let reader = file
        .builder(metadata, &groups, mask)?
        .with_row_selection(selection)
        .with_batch_size(wanted.len().max(1))
        .build()
        .map_err(parquet_error(lake.root(), path))?;
    collect_frames(reader, lake, path, schema)
}

/// The longest prefix of a dotted path that names a column or a field of nested structs in
/// `schema`: the leaves under it are what the path can read. Empty when the column is absent.
fn existing_prefix<'p>(path: &'p str, schema: &Schema) -> Vec<&'p str> {
    let mut segments = path.split('.');
    let first = segments.next().unwrap_or_default();
    let Some(mut dtype) = schema.get(first) else {
        return Vec::new();
    };
    let mut prefix = vec![first];
    for segment in segments {
        let DataType::Struct(fields) = dtype else {
            break;
        };
        let Some(field) = fields.iter().find(|f| f.name().as_str() == segment) else {
            break;
        };
        prefix.push(segment);
        dtype = field.dtype();
    }
    prefix
}

/// The leaves under the prefixes (and `fetched_at`, when asked).
fn leaf_mask(
    parquet_schema: &SchemaDescriptor,
    prefixes: &[Vec<&str>],
    fetched_at: bool,
) -> ProjectionMask {
    let leaves: Vec<usize> = parquet_schema
        .columns()
        .iter()
        .enumerate()
        .filter(|(_, column)| {
            let parts = column.path().parts();
            (fetched_at && parts.first().is_some_and(|p| p == FETCHED_AT))
                || prefixes.iter().any(|prefix| {
                    !prefix.is_empty()
                        && parts.len() >= prefix.len()
                        && parts.iter().zip(prefix).all(|(a, b)| a == b)
                })
        })
        .map(|(i, _)| i)
        .collect();
    ProjectionMask::leaves(parquet_schema, leaves)
}

/// The leaves under `prefixes` of every row of one file, and `fetched_at` when asked.
fn read_file(
    lake: &Lake,
    path: &str,
    entry: &FileEntry,
    prefixes: &[Vec<&str>],
    schema: &Schema,
    fetched_at: bool,
) -> Result<(ArrowReaderMetadata, Option<DataFrame>)> {
    // The file's size and row count are checked against its manifest `entry` with its footer.
    let file = SharedFile::open(lake.base(), path, entry)?;
    let metadata = file.footer()?;
    let mask = leaf_mask(metadata.parquet_schema(), prefixes, fetched_at);
    let rows = usize::try_from(metadata.metadata().file_metadata().num_rows())
        .unwrap_or(usize::MAX)
        .max(1);
    let groups: Vec<usize> = (0..metadata.metadata().num_row_groups()).collect();
    let reader = file
        .builder(&metadata, &groups, mask)?
        .with_batch_size(rows)
        .build()
        .map_err(parquet_error(lake.root(), path))?;
    Ok((metadata, collect_frames(reader, lake, path, schema)?))
}

/// The batches of a reader as one polars frame (see [`frame_of`]).
fn collect_frames(
    reader: impl Iterator<Item = std::result::Result<RecordBatch, arrow_schema::ArrowError>>,
    lake: &Lake,
    path: &str,
    schema: &Schema,
) -> Result<Option<DataFrame>> {
    let mut out: Option<DataFrame> = None;
    for batch in reader {
        let batch = batch.map_err(arrow_error(lake.root(), path))?;
        let Some(df) = frame_of(&batch, schema)? else {
            return Ok(None);
        };
        stack(&mut out, df, "stacking the profiles' columns")?;
    }
    Ok(out)
}

/// `df` appended below the frame in `out`, or put there when it is the first.
fn stack(out: &mut Option<DataFrame>, df: DataFrame, context: &str) -> Result<()> {
    match out {
        None => *out = Some(df),
        Some(acc) => {
            acc.vstack_mut(&df).map_err(Error::polars(context))?;
        }
    }
    Ok(())
}

fn frame_of(batch: &RecordBatch, schema: &Schema) -> Result<Option<DataFrame>> {
    let mut columns = Vec::with_capacity(batch.num_columns());
    for (field, array) in batch.schema().fields().iter().zip(batch.columns()) {
        let name = field.name().as_str();
        let series = if name == FETCHED_AT {
            match array.data_type() {
                ArrowType::Timestamp(ArrowUnit::Microsecond, _) => {
                    let times =
                        primitive::<TimestampMicrosecondType>(array, pa::ArrowDataType::Int64);
                    Some(Int64Chunked::with_chunk(name.into(), times).into_series())
                }
                _ => None,
            }
        } else {
            schema
                .get(name)
                .and_then(|dtype| series_of(name, array.as_ref(), dtype))
        };
        let Some(series) = series else {
            return Ok(None);
        };
        columns.push(series.into_column());
    }
    let height = batch.num_rows();
    DataFrame::new(height, columns)
        .map(Some)
        .map_err(Error::polars("building the profiles' key columns"))
}

/// An arrow-rs array as a polars series of `dtype` (a struct of a subset of `dtype`'s fields);
/// `None` for types a profile's key columns do not have. The buffers are copied whole into
/// polars' arrays, not value by value.
fn series_of(name: &str, array: &dyn Array, dtype: &DataType) -> Option<Series> {
    let converted = to_polars(array)?;
    let series = Series::from_arrow(name.into(), converted).ok()?;
    let wanted = subset_dtype(series.dtype(), dtype)?;
    if series.dtype() == &wanted {
        Some(series)
    } else {
        series.cast(&wanted).ok()
    }
}

/// `target` restricted to the struct fields `read` has, at every level: the type the key
/// column of a read holding only those fields takes. `None` when `read` has a field `target`
/// lacks, or a shape of another kind.
fn subset_dtype(read: &DataType, target: &DataType) -> Option<DataType> {
    Some(match (read, target) {
        (DataType::Struct(read), DataType::Struct(target)) => DataType::Struct(
            read.iter()
                .map(|field| {
                    let t = target.iter().find(|t| t.name() == field.name())?;
                    Some(Field::new(
                        field.name().clone(),
                        subset_dtype(field.dtype(), t.dtype())?,
                    ))
                })
                .collect::<Option<Vec<_>>>()?,
        ),
        (DataType::List(read), DataType::List(target)) => {
            DataType::List(Box::new(subset_dtype(read, target)?))
        }
        (DataType::Struct(_) | DataType::List(_), _)
        | (_, DataType::Struct(_) | DataType::List(_)) => {
            return None;
        }
        (_, target) => target.clone(),
    })
}

/// polars' Arrow arrays (`polars-arrow`), as the aliases the converters below name.
mod pa {
    pub use polars_arrow::array::{
        Array, BooleanArray, ListArray, PrimitiveArray, StructArray, Utf8Array,
    };
    pub use polars_arrow::bitmap::Bitmap;
    pub use polars_arrow::datatypes::{ArrowDataType, Field, TimeUnit};
    pub use polars_arrow::offset::OffsetsBuffer;
}

/// The validity of an arrow-rs array as a polars bitmap; `None` when every value is valid.
fn validity(nulls: Option<&arrow_buffer::NullBuffer>) -> Option<pa::Bitmap> {
    let nulls = nulls.filter(|n| n.null_count() > 0)?;
    Some(bitmap(nulls.inner()))
}

fn bitmap(bits: &arrow_buffer::BooleanBuffer) -> pa::Bitmap {
    let (offset, len) = (bits.offset(), bits.len());
    pa::Bitmap::from_u8_slice(bits.values(), offset + len).sliced(offset, len)
}

/// Offsets of an arrow-rs list or string array, which may start past zero.
fn offsets(offsets: &[i32]) -> Option<pa::OffsetsBuffer<i32>> {
    pa::OffsetsBuffer::try_from(offsets.to_vec()).ok()
}

/// An arrow-rs array of primitive type `T` as a polars-arrow array of `dtype` (of the same
/// native type), its values and validity copied whole.
fn primitive<T>(array: &dyn Array, dtype: pa::ArrowDataType) -> pa::PrimitiveArray<T::Native>
where
    T: ArrowPrimitiveType,
    T::Native: polars_arrow::types::NativeType,
{
    let a = array.as_primitive::<T>();
    pa::PrimitiveArray::new(dtype, a.values().to_vec().into(), validity(a.nulls()))
}

/// An arrow-rs array of a type a profile's key columns have, as a polars-arrow array of the
/// same logical type (`None` for other types).
fn to_polars(array: &dyn Array) -> Option<Box<dyn pa::Array>> {
    Some(match array.data_type() {
        ArrowType::Int64 => primitive::<Int64Type>(array, pa::ArrowDataType::Int64).boxed(),
        ArrowType::Float64 => primitive::<Float64Type>(array, pa::ArrowDataType::Float64).boxed(),
        ArrowType::Timestamp(ArrowUnit::Microsecond, zone) => {
            let zone = zone.as_deref().map(PlSmallStr::from_str);
            primitive::<TimestampMicrosecondType>(
                array,
                pa::ArrowDataType::Timestamp(pa::TimeUnit::Microsecond, zone),
            )
            .boxed()
        }
        ArrowType::Boolean => {
            let a = array.as_boolean();
            pa::BooleanArray::new(
                pa::ArrowDataType::Boolean,
                bitmap(a.values()),
                validity(a.nulls()),
            )
            .boxed()
        }
        ArrowType::Utf8 => {
            let a = array.as_string::<i32>();
            pa::Utf8Array::<i32>::try_new(
                pa::ArrowDataType::Utf8,
                offsets(a.value_offsets())?,
                a.values().as_slice().to_vec().into(),
                validity(a.nulls()),
            )
            .ok()?
            .boxed()
        }
        ArrowType::List(_) => {
            let a = array.as_list::<i32>();
            let values = to_polars(a.values().as_ref())?;
            let field = pa::Field::new("item".into(), values.dtype().clone(), true);
            pa::ListArray::<i32>::try_new(
                pa::ArrowDataType::List(Box::new(field)),
                offsets(a.value_offsets())?,
                values,
                validity(a.nulls()),
            )
            .ok()?
            .boxed()
        }
        ArrowType::Struct(fields) => {
            let a = array.as_struct();
            let children = a
                .columns()
                .iter()
                .map(|c| to_polars(c.as_ref()))
                .collect::<Option<Vec<_>>>()?;
            let fields = fields
                .iter()
                .zip(&children)
                .map(|(f, c)| pa::Field::new(f.name().as_str().into(), c.dtype().clone(), true))
                .collect();
            pa::StructArray::try_new(
                pa::ArrowDataType::Struct(fields),
                a.len(),
                children,
                validity(a.nulls()),
            )
            .ok()?
            .boxed()
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::TimeZone;

    use super::*;
    use crate::analytics::screener::documents::documents;
    use crate::analytics::screener::{
        DOCUMENT_COLUMNS, ProfileSnapshot, snapshot_frame, snapshots,
    };
    use crate::api::models::{AltTokenProfile, Market, TimeWindow, TokenMetadata, WindowMetrics};
    use crate::lake::convert::alt_profiles_to_batch;

    fn profile(i: usize) -> AltTokenProfile {
        let now = Utc
            .timestamp_opt(1_748_736_000 + i64::try_from(i).expect("small"), 1_000)
            .single()
            .expect("a valid time");
        AltTokenProfile {
            updated_at: now,
            synced_at: now,
            token_address: format!("t{i:02}"),
            labels: (!i.is_multiple_of(3)).then(|| vec!["hot".to_owned(), format!("l{i}")]),
            matched_labels: i.is_multiple_of(2).then(|| {
                BTreeMap::from([("hot".to_owned(), vec![format!("rule {i}"), "r".into()])])
            }),
            dynamic_labels: Vec::new(),
            metadata: (i % 4 != 1).then(|| TokenMetadata {
                name: Some(format!("Token {i}")),
                symbol: (!i.is_multiple_of(5)).then(|| format!("T{i}")),
                verified: Some(i % 2 == 1),
                created_at: Some(now),
                ..TokenMetadata::default()
            }),
            market: (i % 4 != 2).then(|| Market {
                liquidity: (i % 3 != 1).then_some(100.0 * i as f64),
                holders: Some(i64::try_from(i).expect("small")),
                ..Market::default()
            }),
            metrics: BTreeMap::from([(
                TimeWindow::from_wire("1h"),
                WindowMetrics {
                    volume: (i % 5 != 2).then_some(10.0 * i as f64),
                    trade_count: Some(3),
                    ..WindowMetrics::default()
                },
            )]),
        }
    }

    /// The key columns and the rows read from the files equal the polars scan of the snapshot:
    /// over files of one snapshot each, then over the compacted file that holds both; with
    /// one row group per file, and with row groups of 2 rows (the page's rows are then read
    /// from the row groups holding them alone).
    #[test]
    fn keys_and_rows_equal_the_whole_scan() {
        for row_group_rows in [crate::lake::LakeOptions::default().row_group_rows, 2] {
            keys_and_rows_equal_the_whole_scan_in_row_groups_of(row_group_rows);
        }
    }

    fn keys_and_rows_equal_the_whole_scan_in_row_groups_of(row_group_rows: usize) {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = crate::lake::LakeOptions {
            row_group_rows,
            ..crate::lake::LakeOptions::default()
        };
        let lake = Lake::open_with(dir.path(), options).expect("lake");
        let at = Utc
            .timestamp_opt(1_748_740_000, 0)
            .single()
            .expect("a valid time");
        for (chunk, fetched_at) in [
            (0..7, at),
            (7..12, at),
            (0..5, at + chrono::Duration::hours(1)),
        ] {
            let profiles: Vec<AltTokenProfile> = chunk.map(profile).collect();
            let batch = alt_profiles_to_batch(&profiles, fetched_at).expect("batch");
            let mut tx = lake.transaction().expect("transaction");
            tx.write(Dataset::TokenProfiles, batch).expect("stage");
            tx.commit().expect("commit");
        }
        let held = vec![at, at + chrono::Duration::hours(1)];
        assert_eq!(snapshots(&lake).expect("snapshots"), held);
        check_keys_and_rows(&lake, at);
        lake.compact().expect("compact");
        assert_eq!(snapshots(&lake).expect("snapshots"), held);
        let manifest = lake.snapshot().expect("manifest");
        let mixed = manifest
            .files_of(Dataset::TokenProfiles)
            .filter(|(_, e)| e.min_time < e.max_time)
            .count();
        assert_eq!(mixed, 1, "compaction wrote one file holding both snapshots");
        check_keys_and_rows(&lake, at);
        check_keys_and_rows(&lake, at + chrono::Duration::hours(1));
    }

    fn check_keys_and_rows(lake: &Lake, at: DateTime<Utc>) {
        let mut whole = snapshot_frame(lake, ProfileSnapshot::At(at)).expect("snapshot");
        let schema = whole.collect_schema().expect("schema");
        let whole = whole.collect().expect("collect");
        let paths: Vec<String> = [
            "token_address",
            "market.liquidity",
            "metrics.1h.volume",
            "labels",
            "metadata.symbol",
            "metadata.created_at",
            "updated_at",
            "market.nothing",
        ]
        .map(str::to_owned)
        .to_vec();
        let keys = read(lake, ChainFamily::Altchain, at, &paths, &schema)
            .expect("read")
            .expect("the profile columns convert");
        assert_eq!(keys.frame.height(), whole.height());
        let leaves = |df: DataFrame| {
            df.lazy()
                .select([
                    col("token_address"),
                    col("market").struct_().field_by_name("liquidity"),
                    col("metrics")
                        .struct_()
                        .field_by_name("1h")
                        .struct_()
                        .field_by_name("volume"),
                    col("labels"),
                    col("metadata").struct_().field_by_name("symbol"),
                    col("metadata").struct_().field_by_name("created_at"),
                    col("metadata").is_null().alias("no_metadata"),
                    col("market").is_null().alias("no_market"),
                    col("updated_at"),
                ])
                .collect()
                .expect("leaves")
        };
        assert_eq!(leaves(keys.frame.clone()), leaves(whole.clone()));

        let every: Vec<String> = DOCUMENT_COLUMNS.map(str::to_owned).to_vec();
        // Any order, and ascending order (the files' frames stacked as read).
        for order in [[11, 0, 5, 7, 3], [0, 3, 5, 7, 11]] {
            let order: Vec<IdxSize> = order
                .into_iter()
                .filter(|&i| (i as usize) < whole.height())
                .collect();
            let rows = keys
                .rows(lake, &order, &every, &schema)
                .expect("rows")
                .expect("every column converts");
            let picked = whole
                .take(&IdxCa::from_vec("i".into(), order))
                .expect("take");
            assert_eq!(
                documents(&rows, ChainFamily::Altchain).expect("documents"),
                documents(&picked, ChainFamily::Altchain).expect("documents")
            );
        }
    }
}
