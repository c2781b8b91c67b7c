//! Reading one data file: whole, some columns, or batch by batch, and [`SharedFile`], one open
//! file whose row groups several threads decode by position.
//!
//! Every Parquet read of the lake's own code goes through here, so errors name the file the
//! same way everywhere and the writer, compaction and verification share one reader.

use std::fs::File;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::bloom_filter::Sbbf;

use super::check::{check_rows, check_size, parquet_error};
use crate::lake::{FileEntry, Lake};
use crate::{Error, Result};

fn arrow_err(context: String) -> impl FnOnce(arrow::error::ArrowError) -> Error {
    move |source| Error::Arrow { context, source }
}

/// Opens a committed (or about to be committed) file of the lake for reading: its metadata,
/// schema and a reader builder.
pub(crate) fn open(lake: &Lake, path: &str) -> Result<ParquetRecordBatchReaderBuilder<Bytes>> {
    let data = Bytes::from(lake.store().get(path)?);
    ParquetRecordBatchReaderBuilder::try_new(data).map_err(parquet_error(path))
}

/// Reads the rows a builder selects into one batch of `schema` (its projected schema).
fn collect(
    path: &str,
    builder: ParquetRecordBatchReaderBuilder<Bytes>,
    schema: SchemaRef,
) -> Result<RecordBatch> {
    let reader = builder.build().map_err(parquet_error(path))?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(arrow_err(format!("reading {path}")))?;
    concat_batches(&schema, &batches).map_err(arrow_err(format!("reading {path}")))
}

/// Reads a whole data file.
pub(crate) fn read_file(lake: &Lake, path: &str) -> Result<RecordBatch> {
    let builder = open(lake, path)?;
    let schema = builder.schema().clone();
    collect(path, builder, schema)
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
    collect(path, builder.with_projection(mask), projected)
}

/// Reads a file of the lake (a data file, or the temporary file of one) in batches of at most
/// `batch_size` rows, fetching its pages as they are decoded: memory holds one batch and one
/// page per column, whatever the file's size.
pub(crate) fn read_batches(
    lake: &Lake,
    path: &str,
    batch_size: usize,
) -> Result<ParquetRecordBatchReader> {
    let file = lake.store().open_read(path)?;
    ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(parquet_error(path))?
        .with_batch_size(batch_size.max(1))
        .build()
        .map_err(parquet_error(path))
}

/// A committed data file opened once and read by position, so that several threads can
/// decode its row groups at the same time (a cloned `File` would share one seek offset). When
/// its footer is read, its row count and size are checked against its manifest entry.
#[derive(Clone)]
pub(crate) struct SharedFile {
    file: std::sync::Arc<File>,
    len: u64,
    /// The lake's root.
    root: std::path::PathBuf,
    /// The path relative to the lake's root.
    path: String,
    /// Rows per the manifest.
    rows: u64,
    /// Size per the manifest.
    bytes: u64,
}

/// Reads `buf.len()` bytes or fewer at `offset` without moving any seek offset.
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
}

/// A reader of a [`SharedFile`] from a position on.
pub(crate) struct PositionedRead {
    file: std::sync::Arc<File>,
    pos: u64,
}

impl std::io::Read for PositionedRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = read_at(&self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl parquet::file::reader::Length for SharedFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl parquet::file::reader::ChunkReader for SharedFile {
    type T = std::io::BufReader<PositionedRead>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(std::io::BufReader::new(PositionedRead {
            file: std::sync::Arc::clone(&self.file),
            pos: start,
        }))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let mut buf = vec![0u8; length];
        let mut done = 0;
        while done < length {
            let n = read_at(&self.file, &mut buf[done..], start + done as u64)?;
            if n == 0 {
                return Err(parquet::errors::ParquetError::EOF(format!(
                    "expected {length} bytes at {start}, read {done}"
                )));
            }
            done += n;
        }
        Ok(buf.into())
    }
}

impl SharedFile {
    /// Opens a committed data file of the lake (an object store fetches it once, here, to a
    /// temporary file) with its manifest `entry`, which its footer is checked against.
    pub(crate) fn open(lake: &Lake, path: &str, entry: &FileEntry) -> Result<SharedFile> {
        let file = lake.store().open_read(path)?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("inspecting", lake.store().location(path), e))?
            .len();
        Ok(SharedFile {
            file: std::sync::Arc::new(file),
            len,
            root: lake.root().to_owned(),
            path: path.to_owned(),
            rows: entry.rows,
            bytes: entry.bytes,
        })
    }

    fn perr(&self) -> impl FnOnce(parquet::errors::ParquetError) -> Error {
        parquet_error(&self.path)
    }

    /// The file's footer, refused when its row count or the file's size is not the
    /// manifest's.
    fn footer(&self, options: ArrowReaderOptions) -> Result<ArrowReaderMetadata> {
        let footer = ArrowReaderMetadata::load(self, options).map_err(self.perr())?;
        let rows = footer.metadata().file_metadata().num_rows();
        check_rows(&self.root, &self.path, self.rows, rows)?;
        check_size(&self.root, &self.path, self.bytes, self.len)?;
        Ok(footer)
    }

    /// The file's footer, with the named string columns read as dictionaries
    /// (`Dictionary(Int32, Utf8)`): each row group's distinct values once and a code per row,
    /// instead of a string per row. Columns absent from the file are ignored here.
    pub(crate) fn footer_with_dictionaries(
        &self,
        dictionaries: &[&str],
    ) -> Result<ArrowReaderMetadata> {
        let plain = self.footer(ArrowReaderOptions::new())?;
        let fields: Vec<Field> = plain
            .schema()
            .fields()
            .iter()
            .map(|f| {
                let string = matches!(
                    f.data_type(),
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                );
                if string && dictionaries.contains(&f.name().as_str()) {
                    let dict =
                        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
                    f.as_ref().clone().with_data_type(dict)
                } else {
                    f.as_ref().clone()
                }
            })
            .collect();
        let schema = std::sync::Arc::new(Schema::new_with_metadata(
            fields,
            plain.schema().metadata().clone(),
        ));
        ArrowReaderMetadata::try_new(
            std::sync::Arc::clone(plain.metadata()),
            ArrowReaderOptions::new().with_schema(schema),
        )
        .map_err(self.perr())
    }

    /// The bloom filter of column `name` in row group `row_group`, if the file holds one (the
    /// lake's writer writes them for the wallet and token columns of swaps and trades).
    pub(crate) fn bloom_filter(
        &self,
        metadata: &ArrowReaderMetadata,
        row_group: usize,
        name: &str,
    ) -> Result<Option<Sbbf>> {
        let rg = metadata.metadata().row_group(row_group);
        let Some(chunk) = rg
            .columns()
            .iter()
            .find(|c| c.column_path().parts() == [name])
        else {
            return Ok(None);
        };
        Sbbf::read_from_column_chunk(chunk, self).map_err(self.perr())
    }

    /// The named columns of one row group as one batch (columns in file order; find them by
    /// name). A missing column is an error naming the file.
    pub(crate) fn read_row_group(
        &self,
        metadata: &ArrowReaderMetadata,
        row_group: usize,
        names: &[&str],
    ) -> Result<RecordBatch> {
        let schema = metadata.schema();
        let mut wanted = names
            .iter()
            .map(|name| {
                schema
                    .index_of(name)
                    .map_err(arrow_err(format!("{} lacks column {name}", self.path)))
            })
            .collect::<Result<Vec<usize>>>()?;
        wanted.sort_unstable();
        wanted.dedup();
        let rows = metadata.metadata().row_group(row_group).num_rows().max(1);
        let builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(self.clone(), metadata.clone());
        let mask = ProjectionMask::roots(builder.parquet_schema(), wanted.iter().copied());
        let projected = std::sync::Arc::new(
            schema
                .project(&wanted)
                .map_err(arrow_err(format!("columns of {}", self.path)))?,
        );
        let reader = builder
            .with_projection(mask)
            .with_row_groups(vec![row_group])
            .with_batch_size(usize::try_from(rows).unwrap_or(usize::MAX))
            .build()
            .map_err(self.perr())?;
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(arrow_err(format!("reading {}", self.path)))?;
        match batches.len() {
            1 => Ok(batches.into_iter().next().expect("one batch")),
            _ => concat_batches(&projected, &batches)
                .map_err(arrow_err(format!("reading {}", self.path))),
        }
    }
}

/// Rows decoded at a time by [`decode_pages_of`].
const DECODE_BATCH_ROWS: usize = 8192;

/// Why a data file's pages do not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PageFault {
    /// The file cannot be read or its footer does not parse.
    Unreadable(String),
    /// A page of a row group does not decode (or the decoder gave up).
    Damaged {
        /// The row group, from 1.
        group: usize,
        /// The file's row groups.
        groups: usize,
        /// The decoder's error, control characters escaped.
        message: String,
    },
}

/// Decodes every page of `file` (every column of every row group, a batch at a time, so memory
/// holds one batch and its pages) and returns the rows decoded. A decoder that panics on a
/// damaged page is a [`PageFault::Damaged`] too, never a panic of the caller.
pub(crate) fn decode_pages_of(file: &File) -> std::result::Result<u64, PageFault> {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    let mut group_now = (0, 0);
    catch_unwind(AssertUnwindSafe(|| decode_row_groups(file, &mut group_now))).unwrap_or_else(
        |panic| {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("no message");
            Err(PageFault::Damaged {
                group: group_now.0,
                groups: group_now.1,
                message: format!(
                    "the Parquet decoder failed: {}",
                    crate::error::escaped(what)
                ),
            })
        },
    )
}

/// [`decode_pages_of`] without the guard; `at` follows the row group being decoded.
fn decode_row_groups(file: &File, at: &mut (usize, usize)) -> std::result::Result<u64, PageFault> {
    use crate::error::escaped;

    let footer = ArrowReaderMetadata::load(file, ArrowReaderOptions::new())
        .map_err(|e| PageFault::Unreadable(escaped(&e.to_string())))?;
    let groups = footer.metadata().num_row_groups();
    let mut rows = 0u64;
    for group in 0..groups {
        *at = (group + 1, groups);
        let damaged = |what: String| PageFault::Damaged {
            group: group + 1,
            groups,
            message: escaped(&what),
        };
        // One thread reads the file: clones of the handle share its offset, never at once.
        let handle = file
            .try_clone()
            .map_err(|e| PageFault::Unreadable(e.to_string()))?;
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(handle, footer.clone())
            .with_row_groups(vec![group])
            .with_batch_size(DECODE_BATCH_ROWS)
            .build()
            .map_err(|e| damaged(e.to_string()))?;
        for batch in reader {
            rows += batch.map_err(|e| damaged(e.to_string()))?.num_rows() as u64;
        }
    }
    Ok(rows)
}
