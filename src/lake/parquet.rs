//! The Parquet form of a data file: the writer properties every data file is written with
//! (zstd, row groups, page statistics, the schema version and dataset as key-value metadata,
//! the time column as the sort order) and the encoding of a batch in memory. The writer, the
//! streamed files of compaction and the scans' empty frames share them.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::Dataset;
use super::schema::{self, SCHEMA_VERSION};
use crate::{Error, Result};

fn arrow_err(context: String) -> impl FnOnce(arrow::error::ArrowError) -> Error {
    move |source| Error::Arrow { context, source }
}

/// The writer properties of every data file: zstd at `zstd_level`, row groups of
/// `row_group_rows`, page statistics, the schema version and dataset as key-value metadata,
/// and the time column declared as the sort order.
pub(crate) fn writer_properties(
    dataset: Dataset,
    schema: &SchemaRef,
    row_group_rows: usize,
    zstd_level: i32,
) -> Result<WriterProperties> {
    let level = ZstdLevel::try_new(zstd_level).map_err(|source| Error::Parquet {
        path: dataset.name().into(),
        source,
    })?;
    let time_idx = schema
        .index_of(dataset.time_column())
        .map_err(arrow_err(format!("{dataset} time column")))?;
    Ok(WriterProperties::builder()
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
        .build())
}

/// Encodes a sorted batch with the file schema into Parquet bytes.
pub fn encode_parquet(
    dataset: Dataset,
    file_batch: &RecordBatch,
    row_group_rows: usize,
    zstd_level: i32,
) -> Result<Vec<u8>> {
    let schema = file_batch.schema();
    let props = writer_properties(dataset, &schema, row_group_rows, zstd_level)?;
    let perr = |source| Error::Parquet {
        path: dataset.name().into(),
        source,
    };
    let mut writer = ArrowWriter::try_new(Vec::new(), schema, Some(props)).map_err(perr)?;
    writer.write(file_batch).map_err(perr)?;
    writer.into_inner().map_err(perr)
}
