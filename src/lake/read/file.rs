//! Reading one data file: whole, some columns, or batch by batch, and [`SharedFile`], one open
//! file whose row groups several threads decode by position.
//!
//! Every Parquet read of the lake's own code goes through here, so errors name the file the
//! same way everywhere and the writer, compaction and verification share one reader.

use std::fs::File;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use arrow_select::concat::concat_batches;
use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::bloom_filter::Sbbf;

use parquet::file::FOOTER_SIZE;
use parquet::file::metadata::FooterTail;

use super::check::{
    arrow_error, check_rows, check_size, damaged, parquet_error, unless_missing, unless_missing_in,
};
use crate::lake::base::Base;
use crate::lake::log::FileEntry;
use crate::lake::storage::Store;
use crate::lake::storage::read_at;
use crate::{Error, Result};

fn arrow_err(context: String) -> impl FnOnce(arrow_schema::ArrowError) -> Error {
    move |source| Error::Arrow { context, source }
}

/// Opens a committed (or about to be committed) file of the lake for reading: its metadata,
/// schema and a reader builder.
fn open(lake: &Base, path: &str) -> Result<ParquetRecordBatchReaderBuilder<Bytes>> {
    let data = Bytes::from(
        lake.store()
            .get(path)
            .map_err(|e| unless_missing(lake, path, e))?,
    );
    ParquetRecordBatchReaderBuilder::try_new(data).map_err(parquet_error(lake.root(), path))
}

/// Reads the rows a builder selects into one batch of `schema` (its projected schema).
fn collect(
    lake: &Base,
    path: &str,
    builder: ParquetRecordBatchReaderBuilder<Bytes>,
    schema: SchemaRef,
) -> Result<RecordBatch> {
    let reader = builder.build().map_err(parquet_error(lake.root(), path))?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(arrow_error(lake.root(), path))?;
    concat_batches(&schema, &batches).map_err(arrow_err(format!("reading {path}")))
}

/// Reads a whole data file.
pub(crate) fn read_file(lake: &Base, path: &str) -> Result<RecordBatch> {
    let builder = open(lake, path)?;
    let schema = builder.schema().clone();
    collect(lake, path, builder, schema)
}

/// Reads the named columns of a data file (in file order, each once), for example a
/// dataset's natural key.
pub(crate) fn read_columns(lake: &Base, path: &str, names: &[&str]) -> Result<RecordBatch> {
    let builder = open(lake, path)?;
    let file_schema = builder.schema().clone();
    let mut wanted = names
        .iter()
        .map(|name| {
            file_schema
                .index_of(name)
                .map_err(|_| damaged(lake.root(), path, format!("it lacks column {name}")))
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
    lake: &Base,
    path: &str,
    batch_size: usize,
) -> Result<ParquetRecordBatchReader> {
    let file = lake
        .store()
        .open_read(path)
        .map_err(|e| unless_missing(lake, path, e))?;
    ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(parquet_error(lake.root(), path))?
        .with_batch_size(batch_size.max(1))
        .build()
        .map_err(parquet_error(lake.root(), path))
}

/// The most bytes of an object's tail fetched to read its footer (the least is 8 KiB): a
/// footer larger than the tail fetched costs one more request, for the rest of it.
pub(crate) const FOOTER_TAIL_BYTES: u64 = 64 << 10;

/// The bytes of the tail fetched to read the footer of an object of `bytes` bytes: a
/// sixteenth of the file, from 8 KiB to [`FOOTER_TAIL_BYTES`]. A footer holds about 5 KiB per
/// row group of a lake's files, a few percent of even a small row group, so one request
/// nearly always reads it, without fetching most of a small file.
fn footer_tail_bytes(bytes: u64) -> u64 {
    (bytes / 16).clamp(8 << 10, FOOTER_TAIL_BYTES)
}

/// A committed data file opened once and read by parts, so that several threads can decode
/// its row groups at the same time: in a folder, by position (a cloned `File` would share one
/// seek offset); on an object store, by ranged requests of its footer and of the column chunks
/// a read decodes, nothing else. When its footer is read, its row count and size are checked
/// against its manifest entry.
#[derive(Clone)]
pub(crate) struct SharedFile {
    source: Source,
    /// The lake's root.
    root: std::path::PathBuf,
    /// The path relative to the lake's root.
    path: String,
    /// Rows per the manifest.
    rows: u64,
    /// Size per the manifest.
    bytes: u64,
}

/// Where a [`SharedFile`]'s bytes come from.
#[derive(Clone)]
enum Source {
    /// A local file, read by position.
    Local { file: Arc<File>, len: u64 },
    /// An object, read by ranges through its store; opening it sends no request.
    Ranged(Arc<dyn Store>),
}

/// What the Parquet reader of a [`SharedFile`] reads: the local file by position, or the
/// ranges of an object fetched before decoding.
#[derive(Clone)]
pub(crate) enum Chunks {
    /// A local file and its size.
    Local { file: Arc<File>, len: u64 },
    /// Parts of an object.
    Fetched(Arc<Fetched>),
}

/// Parts of a file fetched before a read: each a start and its bytes, sorted, not
/// overlapping. A read outside them is an error (the ranges come from the footer, so it means
/// a damaged footer), never another request.
pub(crate) struct Fetched {
    /// The file's size.
    len: u64,
    parts: Vec<(u64, Bytes)>,
}

impl Fetched {
    /// The bytes from `start` to the end of the part holding it, or why there are none.
    fn from(&self, start: u64) -> parquet::errors::Result<Bytes> {
        let k = self.parts.partition_point(|(s, _)| *s <= start);
        k.checked_sub(1)
            .map(|k| &self.parts[k])
            .filter(|(s, b)| start < s + b.len() as u64)
            .map(|(s, b)| b.slice((start - s) as usize..))
            .ok_or_else(|| {
                parquet::errors::ParquetError::General(format!(
                    "byte {start} lies outside the column chunks its footer locates"
                ))
            })
    }
}

/// A reader of a [`SharedFile`] from a position on.
pub(crate) enum ChunkRead {
    /// A local file, by position.
    Local(std::io::BufReader<PositionedRead>),
    /// Fetched bytes.
    Fetched(bytes::buf::Reader<Bytes>),
}

impl std::io::Read for ChunkRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            ChunkRead::Local(r) => r.read(buf),
            ChunkRead::Fetched(r) => r.read(buf),
        }
    }
}

/// A reader of a local file from a position on.
pub(crate) struct PositionedRead {
    file: Arc<File>,
    pos: u64,
}

impl std::io::Read for PositionedRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = read_at(&self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl parquet::file::reader::Length for Chunks {
    fn len(&self) -> u64 {
        match self {
            Chunks::Local { len, .. } => *len,
            Chunks::Fetched(f) => f.len,
        }
    }
}

impl parquet::file::reader::ChunkReader for Chunks {
    type T = ChunkRead;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(match self {
            Chunks::Local { file, .. } => {
                ChunkRead::Local(std::io::BufReader::new(PositionedRead {
                    file: Arc::clone(file),
                    pos: start,
                }))
            }
            Chunks::Fetched(f) => ChunkRead::Fetched(bytes::Buf::reader(f.from(start)?)),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let short = |done: usize| {
            parquet::errors::ParquetError::EOF(format!(
                "expected {length} bytes at {start}, read {done}"
            ))
        };
        match self {
            Chunks::Local { file, .. } => {
                let mut buf = vec![0u8; length];
                let mut done = 0;
                while done < length {
                    let n = read_at(file, &mut buf[done..], start + done as u64)?;
                    if n == 0 {
                        return Err(short(done));
                    }
                    done += n;
                }
                Ok(buf.into())
            }
            Chunks::Fetched(f) => {
                let from = f.from(start)?;
                if from.len() < length {
                    return Err(short(from.len()));
                }
                Ok(from.slice(..length))
            }
        }
    }
}

impl SharedFile {
    /// Opens a committed data file of the lake with its manifest `entry`, which its footer is
    /// checked against. A folder's file is opened; an object store is sent no request yet.
    pub(crate) fn open(lake: &Base, path: &str, entry: &FileEntry) -> Result<SharedFile> {
        let source = if lake.store().reads_by_range() {
            Source::Ranged(lake.shared_store())
        } else {
            let file = lake
                .store()
                .open_read(path)
                .map_err(|e| unless_missing(lake, path, e))?;
            let len = file
                .metadata()
                .map_err(|e| Error::io("inspecting", lake.store().location(path), e))?
                .len();
            Source::Local {
                file: Arc::new(file),
                len,
            }
        };
        Ok(SharedFile {
            source,
            root: lake.root().to_owned(),
            path: path.to_owned(),
            rows: entry.rows,
            bytes: entry.bytes,
        })
    }

    fn perr(&self) -> impl FnOnce(parquet::errors::ParquetError) -> Error {
        parquet_error(&self.root, &self.path)
    }

    /// The error of this file when its pages do not decode (see [`arrow_error`]).
    fn aerr(&self) -> impl FnOnce(arrow_schema::ArrowError) -> Error {
        arrow_error(&self.root, &self.path)
    }

    /// The file's footer, refused when its row count or the file's size is not the
    /// manifest's (see [`SharedFile::footer_and_size`]).
    fn load_footer(&self, options: ArrowReaderOptions) -> Result<ArrowReaderMetadata> {
        let (footer, len) = self.footer_and_size(options)?;
        let rows = footer.metadata().file_metadata().num_rows();
        check_rows(&self.root, &self.path, self.rows, rows)?;
        check_size(&self.root, &self.path, self.bytes, len)?;
        Ok(footer)
    }

    /// The file's footer as the file has it, whatever its manifest entry says (the checks of
    /// `verify` compare the two themselves): only the footer is read.
    pub(crate) fn footer_as_is(&self) -> Result<ArrowReaderMetadata> {
        Ok(self.footer_and_size(ArrowReaderOptions::new())?.0)
    }

    /// The file's footer and the file's size. An object's is read by one request of its tail
    /// (see [`footer_tail_bytes`]; the answer also tells the object's size), and one more when
    /// the footer is longer.
    fn footer_and_size(&self, options: ArrowReaderOptions) -> Result<(ArrowReaderMetadata, u64)> {
        let (chunks, len) = match &self.source {
            Source::Local { file, len } => (
                Chunks::Local {
                    file: Arc::clone(file),
                    len: *len,
                },
                *len,
            ),
            Source::Ranged(store) => {
                let (len, tail) = store
                    .get_tail(&self.path, footer_tail_bytes(self.bytes))
                    .map_err(|e| unless_missing_in(store.as_ref(), &self.root, &self.path, e))?;
                let tail = self.whole_footer(store.as_ref(), len, tail)?;
                let parts = vec![(len - tail.len() as u64, tail)];
                (Chunks::Fetched(Arc::new(Fetched { len, parts })), len)
            }
        };
        let footer = ArrowReaderMetadata::load(&chunks, options).map_err(self.perr())?;
        Ok((footer, len))
    }

    /// The tail of an object of `len` bytes extended to hold its whole footer, which its last
    /// 8 bytes say the length of (left as it is when they do not parse: the Parquet reader
    /// then names the fault).
    fn whole_footer(&self, store: &dyn Store, len: u64, tail: Bytes) -> Result<Bytes> {
        let Some(last) = tail.len().checked_sub(FOOTER_SIZE).map(|at| &tail[at..]) else {
            return Ok(tail);
        };
        let last: &[u8; FOOTER_SIZE] = last.try_into().expect("a slice of FOOTER_SIZE bytes");
        let Ok(footer) = FooterTail::try_new(last) else {
            return Ok(tail);
        };
        let need = (footer.metadata_length() + FOOTER_SIZE) as u64;
        let have = tail.len() as u64;
        if need <= have || need > len {
            return Ok(tail);
        }
        let rest = std::ops::Range {
            start: len - need,
            end: len - have,
        };
        let head = store.get_ranges(&self.path, std::slice::from_ref(&rest))?;
        let mut whole = Vec::with_capacity(need as usize);
        for part in head.iter().chain([&tail]) {
            whole.extend_from_slice(part);
        }
        Ok(whole.into())
    }

    /// The file's footer (see [`SharedFile::footer_with_dictionaries`]).
    pub(crate) fn footer(&self) -> Result<ArrowReaderMetadata> {
        self.load_footer(ArrowReaderOptions::new())
    }

    /// The file's footer, with the named string columns read as dictionaries
    /// (`Dictionary(Int32, Utf8)`): each row group's distinct values once and a code per row,
    /// instead of a string per row. Columns absent from the file are ignored here.
    pub(crate) fn footer_with_dictionaries(
        &self,
        dictionaries: &[&str],
    ) -> Result<ArrowReaderMetadata> {
        let plain = self.footer()?;
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
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            plain.schema().metadata().clone(),
        ));
        ArrowReaderMetadata::try_new(
            Arc::clone(plain.metadata()),
            ArrowReaderOptions::new().with_schema(schema),
        )
        .map_err(self.perr())
    }

    /// The bloom filter of column `name` in row group `row_group`, if the file holds one (the
    /// lake's writer writes them for the wallet and token columns of swaps and trades). On an
    /// object store it is fetched by one ranged request; a filter whose length the footer does
    /// not give counts as none there.
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
        let Some(offset) = chunk.bloom_filter_offset() else {
            return Ok(None);
        };
        let chunks = match &self.source {
            Source::Local { file, len } => Chunks::Local {
                file: Arc::clone(file),
                len: *len,
            },
            Source::Ranged(store) => {
                let range = u64::try_from(offset)
                    .ok()
                    .zip(
                        chunk
                            .bloom_filter_length()
                            .and_then(|l| u64::try_from(l).ok()),
                    )
                    .map(|(start, len)| start..start.saturating_add(len))
                    .filter(|r| r.end <= self.bytes);
                let Some(range) = range else {
                    return Ok(None);
                };
                let bytes = store.get_ranges(&self.path, std::slice::from_ref(&range))?;
                Chunks::Fetched(Arc::new(Fetched {
                    len: self.bytes,
                    parts: vec![(range.start, bytes.into_iter().next().unwrap_or_default())],
                }))
            }
        };
        Sbbf::read_from_column_chunk(chunk, &chunks).map_err(self.perr())
    }

    /// A reader builder over the row groups `row_groups` (of `metadata`, this file's footer)
    /// with the leaves `mask` selects. On an object store those column chunks (with their
    /// dictionary pages) are fetched now, by ranged requests, and nothing else of the file.
    pub(crate) fn builder(
        &self,
        metadata: &ArrowReaderMetadata,
        row_groups: &[usize],
        mask: ProjectionMask,
    ) -> Result<ParquetRecordBatchReaderBuilder<Chunks>> {
        let chunks = match &self.source {
            Source::Local { file, len } => Chunks::Local {
                file: Arc::clone(file),
                len: *len,
            },
            Source::Ranged(store) => {
                let ranges = self.column_chunks(metadata, row_groups, &mask)?;
                let bytes = store.get_ranges(&self.path, &ranges)?;
                let mut parts: Vec<(u64, Bytes)> =
                    ranges.iter().map(|r| r.start).zip(bytes).collect();
                parts.sort_unstable_by_key(|(s, _)| *s);
                Chunks::Fetched(Arc::new(Fetched {
                    len: self.bytes,
                    parts,
                }))
            }
        };
        Ok(
            ParquetRecordBatchReaderBuilder::new_with_metadata(chunks, metadata.clone())
                .with_projection(mask)
                .with_row_groups(row_groups.to_vec()),
        )
    }

    /// The byte ranges of the column chunks of `row_groups` that `mask` selects, each from its
    /// dictionary page (if any) to its last data page; refused when the footer places one
    /// outside the file.
    fn column_chunks(
        &self,
        metadata: &ArrowReaderMetadata,
        row_groups: &[usize],
        mask: &ProjectionMask,
    ) -> Result<Vec<std::ops::Range<u64>>> {
        let meta = metadata.metadata();
        let mut ranges = Vec::new();
        for &g in row_groups {
            let Some(group) = meta.row_groups().get(g) else {
                return Err(self.perr()(parquet::errors::ParquetError::General(
                    format!(
                        "row group {g} asked, the file has {}",
                        meta.num_row_groups()
                    ),
                )));
            };
            for (leaf, column) in group.columns().iter().enumerate() {
                if !mask.leaf_included(leaf) {
                    continue;
                }
                let start = column
                    .dictionary_page_offset()
                    .unwrap_or_else(|| column.data_page_offset());
                let range = u64::try_from(start)
                    .ok()
                    .zip(u64::try_from(column.compressed_size()).ok())
                    .map(|(start, len)| start..start.saturating_add(len))
                    .filter(|r| r.end <= self.bytes);
                let Some(range) = range else {
                    return Err(self.perr()(parquet::errors::ParquetError::General(
                        format!(
                            "the footer places column {} of row group {g} at {start} ({} bytes), outside the file's {} bytes",
                            column.column_path(),
                            column.compressed_size(),
                            self.bytes
                        ),
                    )));
                };
                ranges.push(range);
            }
        }
        Ok(ranges)
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
                    .map_err(|_| damaged(&self.root, &self.path, format!("it lacks column {name}")))
            })
            .collect::<Result<Vec<usize>>>()?;
        wanted.sort_unstable();
        wanted.dedup();
        let rows = metadata.metadata().row_group(row_group).num_rows().max(1);
        let mask = ProjectionMask::roots(metadata.parquet_schema(), wanted.iter().copied());
        let projected = Arc::new(
            schema
                .project(&wanted)
                .map_err(arrow_err(format!("columns of {}", self.path)))?,
        );
        let reader = self
            .builder(metadata, &[row_group], mask)?
            .with_batch_size(usize::try_from(rows).unwrap_or(usize::MAX))
            .build()
            .map_err(self.perr())?;
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(self.aerr())?;
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
