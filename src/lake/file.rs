//! One data file: reading it (whole, some columns, or batch by batch) and encoding it (into
//! memory, or streamed to a temporary file).
//!
//! Every Parquet read and write of the lake's own code goes through here, so errors name the
//! file the same way everywhere and the writer, compaction and verification share one reader
//! and one set of writer properties.

use std::fs::File;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::schema::{self, SCHEMA_VERSION};
use super::store::temp_name;
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

/// Reads a file of the lake (a data file, or the temporary file of one) in batches of at most
/// `batch_size` rows, fetching its pages as they are decoded: memory holds one batch and one
/// page per column, whatever the file's size.
pub(crate) fn read_batches(
    lake: &Lake,
    path: &str,
    batch_size: usize,
) -> Result<ParquetRecordBatchReader> {
    let perr = |source| Error::Parquet {
        path: lake.store().location(path),
        source,
    };
    let file = lake.store().open_read(path)?;
    ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(perr)?
        .with_batch_size(batch_size.max(1))
        .build()
        .map_err(perr)
}

/// The writer properties of every data file: zstd at `zstd_level`, row groups of
/// `row_group_rows`, page statistics, the schema version and dataset as key-value metadata,
/// and the time column declared as the sort order.
fn writer_properties(
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

/// A data file streamed to its [temporary name](temp_name) batch by batch, with the properties
/// of [`encode_parquet`]: memory holds the row group being encoded, never the whole file. Once
/// [finished](Self::finish) the file is synced and waits for a rename into place.
pub(crate) struct FileWriter {
    /// The data file's path (not the temporary one).
    path: String,
    writer: ArrowWriter<File>,
    location: std::path::PathBuf,
}

impl FileWriter {
    /// Creates the temporary file of `path` for batches of the dataset's file schema.
    pub(crate) fn create(
        lake: &Lake,
        dataset: Dataset,
        path: &str,
        row_group_rows: usize,
        zstd_level: i32,
    ) -> Result<FileWriter> {
        let schema = schema::file_schema(dataset);
        let props = writer_properties(dataset, &schema, row_group_rows, zstd_level)?;
        let file = lake.store().create_temp(path)?;
        let location = lake.store().location(&temp_name(path));
        let writer =
            ArrowWriter::try_new(file, schema, Some(props)).map_err(|source| Error::Parquet {
                path: location.clone(),
                source,
            })?;
        Ok(FileWriter {
            path: path.to_owned(),
            writer,
            location,
        })
    }

    /// Appends a batch of the file schema.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.writer.write(batch).map_err(|source| Error::Parquet {
            path: self.location.clone(),
            source,
        })
    }

    /// Writes the footer and syncs the file; returns the data file's path and the file's size
    /// in bytes.
    pub(crate) fn finish(self) -> Result<(String, u64)> {
        let FileWriter {
            path,
            writer,
            location,
        } = self;
        let file = writer.into_inner().map_err(|source| Error::Parquet {
            path: location.clone(),
            source,
        })?;
        file.sync_all()
            .map_err(|e| Error::io("syncing", &location, e))?;
        let bytes = file
            .metadata()
            .map_err(|e| Error::io("inspecting", &location, e))?
            .len();
        Ok((path, bytes))
    }
}
