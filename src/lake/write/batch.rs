//! One batch of a dataset: checked against its record schema, split by partition, keyed by
//! its natural key, sorted, turned into the file schema and encoded; its time and id ranges.
//! Pure functions of the batch, shared by the writer, compaction and verification.

use std::collections::BTreeMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, PrimitiveArray, RecordBatch, UInt32Array};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{SchemaRef, SortOptions};
use arrow_select::take::take_record_batch;
use chrono::{DateTime, NaiveDate, Utc};

use crate::api::models::ChainFamily;
use crate::lake::dataset::Dataset;
use crate::lake::layout::Partition;
use crate::lake::parquet::encode_parquet;
use crate::lake::schema;
use crate::{Error, Result};

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

pub(crate) fn arrow_err(
    context: impl Into<String>,
) -> impl FnOnce(arrow_schema::ArrowError) -> Error {
    let context = context.into();
    move |source| Error::Arrow { context, source }
}

pub(crate) fn column<'b>(
    batch: &'b RecordBatch,
    name: &str,
    dataset: Dataset,
) -> Result<&'b ArrayRef> {
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
pub(crate) fn partition_rows(
    dataset: Dataset,
    batch: &RecordBatch,
) -> Result<BTreeMap<Partition, Vec<u32>>> {
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
        let chain = ChainFamily::from_chain_id(
            chain_ids.and_then(|c| c.is_valid(row).then(|| c.value(row))),
        );
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
pub(crate) fn key_converter(dataset: Dataset, batch: &RecordBatch) -> Result<RowConverter> {
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

pub(crate) fn key_columns(dataset: Dataset, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
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

/// The columns of the dataset's order in `schema` (the time column, then the natural key),
/// and the encoder whose byte order is that order: ascending, nulls first. The writer sorts
/// by it ([`sort_batch`]) and compaction merges sorted files by it, so the two agree.
pub(crate) fn order_encoder(
    dataset: Dataset,
    schema: &SchemaRef,
) -> Result<(Vec<usize>, RowConverter)> {
    let context = || format!("{dataset} sort order");
    let mut names = vec![dataset.time_column()];
    names.extend(
        dataset
            .key_columns()
            .iter()
            .filter(|k| **k != dataset.time_column()),
    );
    let columns = names
        .iter()
        .map(|name| schema.index_of(name).map_err(arrow_err(context())))
        .collect::<Result<Vec<usize>>>()?;
    let fields = columns
        .iter()
        .map(|&i| {
            SortField::new_with_options(
                schema.field(i).data_type().clone(),
                SortOptions {
                    descending: false,
                    nulls_first: true,
                },
            )
        })
        .collect();
    let converter = RowConverter::new(fields).map_err(arrow_err(context()))?;
    Ok((columns, converter))
}

/// Sorts a batch by time, then by the natural key (the byte order of [`order_encoder`]'s
/// rows; natural keys are unique, so the order has no ties).
pub(crate) fn sort_batch(dataset: Dataset, batch: &RecordBatch) -> Result<RecordBatch> {
    let context = || format!("sorting {dataset}");
    let (columns, converter) = order_encoder(dataset, &batch.schema())?;
    let columns: Vec<ArrayRef> = columns.iter().map(|&i| batch.column(i).clone()).collect();
    let rows = converter
        .convert_columns(&columns)
        .map_err(arrow_err(context()))?;
    let rows_count = u32::try_from(batch.num_rows()).map_err(|_| Error::Lake {
        path: dataset.name().into(),
        message: format!("a batch of {} rows is too large to sort", batch.num_rows()),
    })?;
    let mut order: Vec<u32> = (0..rows_count).collect();
    order.sort_by(|&a, &b| rows.row(a as usize).cmp(&rows.row(b as usize)));
    take_record_batch(batch, &UInt32Array::from(order)).map_err(arrow_err(context()))
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
    let (min, max) = value_range(t).ok_or_else(|| Error::Lake {
        path: dataset.name().into(),
        message: "empty batch has no time range".into(),
    })?;
    Ok((micros_to_time(min)?, micros_to_time(max)?))
}

/// Smallest and largest id of a batch of a dataset with an [`id_column`](Dataset::id_column).
pub(crate) fn id_range(dataset: Dataset, batch: &RecordBatch) -> Result<Option<(i64, i64)>> {
    let Some(name) = dataset.id_column() else {
        return Ok(None);
    };
    let ids = column(batch, name, dataset)?.as_primitive::<Int64Type>();
    Ok(value_range(ids))
}

/// The smallest and largest non-null value of an integer column; `None` when it has none.
pub(crate) fn value_range<T: ArrowPrimitiveType>(
    values: &PrimitiveArray<T>,
) -> Option<(T::Native, T::Native)>
where
    T::Native: Ord,
{
    let widen = |(lo, hi): (T::Native, T::Native), x: T::Native| (lo.min(x), hi.max(x));
    if values.null_count() == 0 {
        let (&first, rest) = values.values().split_first()?;
        Some(
            rest.iter()
                .fold((first, first), |range, &x| widen(range, x)),
        )
    } else {
        let mut present = values.iter().flatten();
        let first = present.next()?;
        Some(present.fold((first, first), widen))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};

    use super::*;

    #[test]
    fn value_range_skips_nulls_and_has_none_without_values() {
        assert_eq!(
            value_range(&Int64Array::from(vec![3, -7, 12, 0])),
            Some((-7, 12))
        );
        assert_eq!(
            value_range(&Int64Array::from(vec![None, Some(5), None, Some(2)])),
            Some((2, 5))
        );
        assert_eq!(value_range(&Int64Array::from(vec![None, None])), None);
        assert_eq!(value_range(&Int64Array::from(Vec::<i64>::new())), None);
    }

    /// Candles sort by time, then token, pool (nulls first), exactly as the tuples sort.
    #[test]
    fn sort_batch_orders_by_time_then_the_natural_key() {
        let times = [30, 10, 30, 10, 20, 30, 10];
        let tokens = ["b", "b", "a", "a", "c", "a", "a"];
        let pools = [
            Some("p"),
            Some("q"),
            Some("q"),
            Some("p"),
            Some("p"),
            None,
            None,
        ];
        let schema = Arc::new(Schema::new(vec![
            Field::new("token", DataType::Utf8, false),
            Field::new("pool", DataType::Utf8, true),
            Field::new(
                "timestamp",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            Field::new("row", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(tokens.to_vec())),
                Arc::new(StringArray::from(pools.to_vec())),
                Arc::new(TimestampMicrosecondArray::from(times.to_vec()).with_timezone("UTC")),
                Arc::new(Int64Array::from_iter_values(0..times.len() as i64)),
            ],
        )
        .expect("batch");
        let sorted = sort_batch(Dataset::Candles, &batch).expect("sort");
        let mut expected: Vec<usize> = (0..times.len()).collect();
        expected.sort_by_key(|&i| (times[i], tokens[i], pools[i]));
        let rows: Vec<usize> = sorted
            .column_by_name("row")
            .expect("row")
            .as_primitive::<Int64Type>()
            .values()
            .iter()
            .map(|&r| r as usize)
            .collect();
        assert_eq!(rows, expected);
    }
}
