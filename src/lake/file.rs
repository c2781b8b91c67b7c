//! One data file: reading it (whole or some columns) and encoding it.
//!
//! Every Parquet read and write of the lake's own code goes through here, so errors name the
//! file the same way everywhere and the writer, compaction and verification share one reader.

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::schema::{self, SCHEMA_VERSION};
use super::{Dataset, Lake};
use crate::{Error, Result};

fn arrow_err(context: String) -> impl FnOnce(arrow::error::ArrowError) -> Error {
    move |source| Error::Arrow { context, source }
}

/// Opens a committed (or about to be committed) file of the lake for reading: its metadata,
/// schema and a reader builder.
pub(crate) fn open(lake: &Lake, path: &str) -> Result<ParquetRecordBatchReaderBuilder<Bytes>> {
    let data = Bytes::from(lake.store().get(path)?);
    ParquetRecordBatchReaderBuilder::try_new(data).map_err(|source| Error::Parquet {
        path: lake.store().location(path),
        source,
    })
}

/// Reads the rows a builder selects into one batch of `schema` (its projected schema).
fn collect(
    lake: &Lake,
    path: &str,
    builder: ParquetRecordBatchReaderBuilder<Bytes>,
    schema: SchemaRef,
) -> Result<RecordBatch> {
    let reader = builder.build().map_err(|source| Error::Parquet {
        path: lake.store().location(path),
        source,
    })?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(arrow_err(format!("reading {path}")))?;
    concat_batches(&schema, &batches).map_err(arrow_err(format!("reading {path}")))
}

/// Reads a whole data file.
pub(crate) fn read_file(lake: &Lake, path: &str) -> Result<RecordBatch> {
    let builder = open(lake, path)?;
    let schema = builder.schema().clone();
    collect(lake, path, builder, schema)
}

/// Reads the named columns of a data file (in file order, each once), for example a
/// dataset's natural key.
pub(crate) fn read_columns(lake: &Lake, path: &str, names: &[&str]) -> Result<RecordBatch> {
    let builder = open(lake, path)?;
    let file_schema = builder.schema().clone();
    let mut wanted = names
        .iter()
        .map(|name| {
            file_schema
                .index_of(name)
                .map_err(arrow_err(format!("{path} lacks column {name}")))
        })
        .collect::<Result<Vec<usize>>>()?;
    wanted.sort_unstable();
    wanted.dedup();
    let projected = std::sync::Arc::new(
        file_schema
            .project(&wanted)
            .map_err(arrow_err(format!("columns of {path}")))?,
    );
    let mask = ProjectionMask::roots(builder.parquet_schema(), wanted);
    collect(lake, path, builder.with_projection(mask), projected)
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
