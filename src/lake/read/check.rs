//! The one check of a committed file against its manifest entry, made where a reader already
//! learns the file's size (opening it) and row count (its footer), and the errors of a file
//! the Parquet reader refuses, named by its path in the lake.
//!
//! A data file replaced on disk by another valid Parquet file (or changed in place) would
//! otherwise be read as if committed: readers fail instead, naming the file and pointing at
//! `dexlake verify`, which lists every such file.

use std::collections::BTreeMap;
use std::path::Path;

use rayon::prelude::*;

use super::file::{PageFault, decode_pages_of};
use crate::lake::{Dataset, FileEntry, Lake};
use crate::{Error, Result};

/// What to run to see every committed file that differs from the manifest.
const VERIFY_HINT: &str =
    "it was replaced or changed after its commit; `dexlake verify` lists every such file";

/// A committed file's size on disk (`bytes`), checked against the size its manifest entry
/// records (`committed`); `root` is the lake's.
pub(crate) fn check_size(root: &Path, path: &str, committed: u64, bytes: u64) -> Result<()> {
    if bytes == committed {
        return Ok(());
    }
    Err(Error::Lake {
        path: root.to_owned(),
        message: format!(
            "data file {path} is {bytes} bytes, the manifest committed {committed} bytes: {VERIFY_HINT}"
        ),
    })
}

/// A committed file's row count from its footer (`rows`), checked against the count its
/// manifest entry records (`committed`); `root` is the lake's.
pub(crate) fn check_rows(root: &Path, path: &str, committed: u64, rows: i64) -> Result<()> {
    if u64::try_from(rows).is_ok_and(|rows| rows == committed) {
        return Ok(());
    }
    Err(Error::Lake {
        path: root.to_owned(),
        message: format!(
            "data file {path} holds {rows} rows, the manifest committed {committed}: {VERIFY_HINT}"
        ),
    })
}

/// The sizes of the committed files `files` of `dataset`, checked against their entries: the
/// check of readers that hand files to polars, which reads their footers itself. No file is
/// opened: a folder's files are asked their sizes, an object store's dataset listed once
/// ([`Store::sizes`](crate::lake::Store::sizes)).
pub(crate) fn check_sizes<'a>(
    lake: &Lake,
    dataset: Dataset,
    files: impl IntoIterator<Item = (&'a String, &'a FileEntry)>,
) -> Result<()> {
    let files: Vec<(&String, &FileEntry)> = files.into_iter().collect();
    if files.is_empty() {
        return Ok(());
    }
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    let sizes: BTreeMap<String, u64> = lake.store().sizes(dataset.name(), &paths)?;
    // polars names a missing file itself.
    for (path, entry) in files {
        if let Some(&bytes) = sizes.get(path.as_str()) {
            check_size(lake.root(), path, entry.bytes, bytes)?;
        }
    }
    Ok(())
}

/// The error of a data file the Parquet reader refused, naming it by its path in the lake.
pub(crate) fn parquet_error(path: &str) -> impl FnOnce(parquet::errors::ParquetError) -> Error {
    let path = std::path::PathBuf::from(path);
    move |source| Error::Parquet { path, source }
}

/// A failed polars read of `dataset`'s committed files, with the file to blame when there is
/// one: polars' errors do not name the file they were reading. The footers of the dataset's
/// committed files are read (only now, on this error path, in parallel) and the first the
/// Parquet reader refuses is named instead; when every footer reads, the files' pages are
/// decoded (as the deep verify does) and the first file with a damaged page is named. Any other
/// error, and any error on an object store (where this would fetch every file), is returned as
/// it is.
pub(crate) fn name_damaged_file(lake: &Lake, dataset: Dataset, error: Error) -> Error {
    if !matches!(error, Error::Polars { .. }) || !lake.store().has_writer_lock() {
        return error;
    }
    let Ok(manifest) = lake.snapshot() else {
        return error;
    };
    let paths: Vec<&String> = manifest.files_of(dataset).map(|(p, _)| p).collect();
    let footer = paths.par_iter().find_map_first(|path| {
        let file = lake.store().open_read(path).ok()?;
        footer_error(path, &file)
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
                }) => Some(Error::Lake {
                    path: lake.root().to_owned(),
                    message: format!(
                        "damaged pages in committed file {path}, row group {group} of {groups}: \
                         {message}; `dexlake verify` lists every damaged file"
                    ),
                }),
                _ => None,
            }
        })
        .unwrap_or(error)
}

/// The error of a file whose footer the Parquet reader refuses, if it does.
fn footer_error(path: &str, file: &std::fs::File) -> Option<Error> {
    parquet::arrow::arrow_reader::ArrowReaderMetadata::load(
        file,
        parquet::arrow::arrow_reader::ArrowReaderOptions::new(),
    )
    .err()
    .map(parquet_error(path))
}
