//! polars `LazyFrame`s over the committed files of a dataset, and the file to blame when a polars
//! read of them fails.
//!
//! Only files the manifest lists are scanned. The hive columns come from the paths with fixed
//! types (`chain`: string, `interval`: Int64, `date`: Date), so polars prunes whole files on
//! filters over them and row groups (by their statistics) on filters over the time column.
//! Columns come in a fixed order: the file columns, then `chain`, `[interval]`, `date`.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use polars::prelude::*;
use rayon::prelude::*;

use super::check::{check_sizes, damaged, parquet_error};
use super::file::{PageFault, decode_pages_of};
use crate::lake::base::Base;
use crate::lake::dataset::Dataset;
use crate::lake::log::{FileEntry, Manifest};
use crate::lake::parquet::encode_parquet;
use crate::lake::schema::{self, hive_columns};
use crate::{Error, Result};

fn hive_dtype(name: &str) -> DataType {
    match name {
        "interval" => DataType::Int64,
        "date" => DataType::Date,
        _ => DataType::String,
    }
}

/// The polars schema of the hive columns of `dataset`, as a scan types them.
pub fn hive_schema(dataset: Dataset) -> Schema {
    hive_columns(dataset)
        .into_iter()
        .map(|n| Field::new(n.into(), hive_dtype(n)))
        .collect()
}

/// Names of the scanned columns, in order.
pub fn scan_columns(dataset: Dataset) -> Vec<String> {
    let mut cols: Vec<String> = schema::file_schema(dataset)
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    cols.extend(hive_columns(dataset).into_iter().map(str::to_owned));
    cols
}

/// An empty frame with the dataset's scan columns and types, read back from an empty Parquet
/// file so the types are exactly those polars gives the real files.
pub fn empty_frame(dataset: Dataset) -> Result<LazyFrame> {
    let empty = RecordBatch::new_empty(schema::file_schema(dataset));
    let bytes = encode_parquet(dataset, &empty, 1024, 1)?;
    let mut df = ParquetReader::new(Cursor::new(bytes))
        .finish()
        .map_err(Error::polars(format!("scanning {dataset}")))?;
    for name in hive_columns(dataset) {
        df.with_column(Column::new_empty(name.into(), &hive_dtype(name)))
            .map_err(Error::polars(format!("scanning {dataset}")))?;
    }
    Ok(df.lazy())
}

/// A lazy scan of the committed files of `dataset` as of `manifest`. A file whose size on disk
/// is not its manifest entry's is refused, naming it (polars reads the footers itself, so
/// their row counts are not checked here).
pub(crate) fn scan(lake: &Base, manifest: &Manifest, dataset: Dataset) -> Result<LazyFrame> {
    let paths: Vec<PlRefPath> = locations(lake, manifest, dataset)?
        .into_iter()
        .map(PlRefPath::try_from_pathbuf)
        .collect::<PolarsResult<_>>()
        .map_err(Error::polars(format!("scanning {dataset}")))?;
    let order: Vec<Expr> = scan_columns(dataset)
        .into_iter()
        .map(|c| col(c.as_str()))
        .collect();
    if paths.is_empty() {
        return Ok(empty_frame(dataset)?.select(order));
    }
    let args = ScanArgsParquet {
        hive_options: HiveOptions {
            enabled: Some(true),
            hive_start_idx: 0,
            schema: Some(Arc::new(hive_schema(dataset))),
            try_parse_dates: true,
        },
        glob: false,
        ..ScanArgsParquet::default()
    };
    let lf = LazyFrame::scan_parquet_files(paths.into_iter().collect(), args)
        .map_err(Error::polars(format!("scanning {dataset}")))?;
    Ok(lf.select(order))
}

/// Where the committed files of `dataset` as of `manifest` are, as a scan opens them (local
/// paths, or `s3://` URLs on an object store), in the manifest's order. A file whose size is
/// not its manifest entry's is refused, naming it.
pub(crate) fn locations(
    lake: &Base,
    manifest: &Manifest,
    dataset: Dataset,
) -> Result<Vec<PathBuf>> {
    check_sizes(lake, dataset, manifest.files_of(dataset))?;
    Ok(manifest
        .files_of(dataset)
        .map(|(p, _)| lake.store().location(p))
        .collect())
}

/// A lazy scan of some committed files, by their paths relative to the lake's root with their
/// manifest entries: their own columns only, without the hive columns of their folders. For
/// reading a few files the manifest named (a dataset's whole scan is [`scan`]). A file whose
/// size is not its entry's is refused, naming it.
pub(crate) fn scan_files<'a>(
    lake: &Base,
    dataset: Dataset,
    files: impl IntoIterator<Item = (&'a String, &'a FileEntry)>,
) -> Result<LazyFrame> {
    let files: Vec<(&String, &FileEntry)> = files.into_iter().collect();
    check_sizes(lake, dataset, files.iter().copied())?;
    let paths: Vec<PlRefPath> = files
        .into_iter()
        .map(|(p, _)| PlRefPath::try_from_pathbuf(lake.store().location(p)))
        .collect::<PolarsResult<_>>()
        .map_err(Error::polars(format!("scanning {dataset}")))?;
    let args = ScanArgsParquet {
        hive_options: HiveOptions {
            enabled: Some(false),
            ..HiveOptions::default()
        },
        glob: false,
        ..ScanArgsParquet::default()
    };
    LazyFrame::scan_parquet_files(paths.into_iter().collect(), args)
        .map_err(Error::polars(format!("scanning {dataset}")))
}

/// A failed polars read of `dataset`'s committed files, with the file to blame when there is
/// one, as [`Error::DamagedLake`]: polars' errors do not name the file they were reading (or
/// cut its path). The footers of the dataset's committed files are read (only now, on this
/// error path, in parallel) and the first missing file, or the first the Parquet reader
/// refuses, is named instead; when every footer reads, the files' pages are
/// decoded (as the deep verify does) and the first file with a damaged page is named. Any other
/// error, and any error on an object store (where this would fetch every file), is returned as
/// it is.
pub(crate) fn name_damaged_file(lake: &Base, dataset: Dataset, error: Error) -> Error {
    if !matches!(error, Error::Polars { .. }) || !lake.store().has_writer_lock() {
        return error;
    }
    let Ok(manifest) = lake.snapshot() else {
        return error;
    };
    let paths: Vec<&String> = manifest.files_of(dataset).map(|(p, _)| p).collect();
    let footer = paths.par_iter().find_map_first(|path| {
        let Ok(file) = lake.store().open_read(path) else {
            return matches!(lake.store().head(path), Ok(None))
                .then(|| damaged(lake.root(), path, "it is missing"));
        };
        footer_error(lake.root(), path, &file)
    });
    if let Some(named) = footer {
        return named;
    }
    paths
        .par_iter()
        .find_map_first(|path| {
            let file = lake.store().open_read(path).ok()?;
            match decode_pages_of(&file) {
                Err(PageFault::Damaged {
                    group,
                    groups,
                    message,
                }) => Some(damaged(
                    lake.root(),
                    path,
                    format!("damaged pages in row group {group} of {groups}: {message}"),
                )),
                _ => None,
            }
        })
        .unwrap_or(error)
}

/// The error of a file whose footer the Parquet reader refuses, if it does.
fn footer_error(root: &Path, path: &str, file: &std::fs::File) -> Option<Error> {
    parquet::arrow::arrow_reader::ArrowReaderMetadata::load(
        file,
        parquet::arrow::arrow_reader::ArrowReaderOptions::new(),
    )
    .err()
    .map(parquet_error(root, path))
}
