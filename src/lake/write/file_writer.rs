//! [`FileWriter`]: a data file streamed to its temporary name batch by batch, for outputs too
//! large to hold in memory (compaction's merged files and runs).

use std::fs::File;

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;

use crate::lake::base::Base;
use crate::lake::dataset::Dataset;
use crate::lake::layout::temp_name;
use crate::lake::parquet::writer_properties;
use crate::lake::schema;
use crate::{Error, Result};

/// A data file streamed to its [temporary name](temp_name) batch by batch, with the properties
/// of [`encode_parquet`](crate::lake::parquet::encode_parquet): memory holds the row group
/// being encoded, never the whole file. Once [finished](Self::finish) the file is synced and
/// waits for a rename into place.
pub(crate) struct FileWriter {
    /// The data file's path (not the temporary one).
    path: String,
    writer: ArrowWriter<File>,
    location: std::path::PathBuf,
}

impl FileWriter {
    /// Creates the temporary file of `path` for batches of the dataset's file schema.
    pub(crate) fn create(
        lake: &Base,
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
