//! The one check of a committed file against its manifest entry, made where a reader already
//! learns the file's size (opening it) and row count (its footer), and the errors of a file
//! the Parquet reader refuses or that is missing, named by its path in the lake.
//!
//! A data file replaced on disk by another valid Parquet file (or changed in place) would
//! otherwise be read as if committed: readers fail instead with [`Error::DamagedLake`], naming
//! the file and pointing at `dexlake verify`, which lists every such file.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::escaped;
use crate::lake::base::Base;
use crate::lake::dataset::Dataset;
use crate::lake::log::FileEntry;
use crate::lake::storage::Store;
use crate::{Error, Result};

/// The error of the committed file `path` of the lake at `root`: missing, unreadable, or not
/// the file its manifest entry describes, for `reason`.
pub(crate) fn damaged(root: &Path, path: &str, reason: impl Into<String>) -> Error {
    Error::DamagedLake {
        lake: root.to_owned(),
        file: path.to_owned(),
        reason: reason.into(),
    }
}

/// `error`, met opening or reading the committed file `path`, or the file's
/// [`Error::DamagedLake`] when the cause is that the file is missing (which the store is asked
/// only now, on this error path).
pub(crate) fn unless_missing(lake: &Base, path: &str, error: Error) -> Error {
    unless_missing_in(lake.store(), lake.root(), path, error)
}

/// [`unless_missing`] for the file `path` of `store`, the store of the lake at `root`.
pub(crate) fn unless_missing_in(store: &dyn Store, root: &Path, path: &str, error: Error) -> Error {
    match store.head(path) {
        Ok(None) => damaged(root, path, "it is missing"),
        _ => error,
    }
}

/// A committed file's size on disk (`bytes`), checked against the size its manifest entry
/// records (`committed`); `root` is the lake's.
pub(crate) fn check_size(root: &Path, path: &str, committed: u64, bytes: u64) -> Result<()> {
    if bytes == committed {
        return Ok(());
    }
    Err(damaged(
        root,
        path,
        format!("it is {bytes} bytes, the manifest committed {committed} bytes"),
    ))
}

/// A committed file's row count from its footer (`rows`), checked against the count its
/// manifest entry records (`committed`); `root` is the lake's.
pub(crate) fn check_rows(root: &Path, path: &str, committed: u64, rows: i64) -> Result<()> {
    if u64::try_from(rows).is_ok_and(|rows| rows == committed) {
        return Ok(());
    }
    Err(damaged(
        root,
        path,
        format!("it holds {rows} rows, the manifest committed {committed}"),
    ))
}

/// The sizes of the committed files `files` of `dataset`, checked against their entries: the
/// check of readers that hand files to polars, which reads their footers itself. No file is
/// opened: a folder's files are asked their sizes, an object store's dataset listed once
/// ([`Store::sizes`](crate::lake::Store::sizes)).
pub(crate) fn check_sizes<'a>(
    lake: &Base,
    dataset: Dataset,
    files: impl IntoIterator<Item = (&'a String, &'a FileEntry)>,
) -> Result<()> {
    let files: Vec<(&String, &FileEntry)> = files.into_iter().collect();
    if files.is_empty() {
        return Ok(());
    }
    let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    let sizes: BTreeMap<String, u64> = lake.store().sizes(dataset.name(), &paths)?;
    for (path, entry) in files {
        match sizes.get(path.as_str()) {
            Some(&bytes) => check_size(lake.root(), path, entry.bytes, bytes)?,
            None => return Err(damaged(lake.root(), path, "it is missing")),
        }
    }
    Ok(())
}

/// The error of a committed file of the lake at `root` the Parquet reader refused, naming it
/// by its path in the lake.
pub(crate) fn parquet_error(
    root: &Path,
    path: &str,
) -> impl FnOnce(parquet::errors::ParquetError) -> Error {
    let (root, path) = (root.to_owned(), path.to_owned());
    move |source| damaged(&root, &path, escaped(&source.to_string()))
}

/// The error of a committed file of the lake at `root` whose pages Arrow could not decode, or
/// whose columns are not of the dataset's schema, naming it by its path in the lake.
pub(crate) fn arrow_error(
    root: &Path,
    path: &str,
) -> impl FnOnce(arrow_schema::ArrowError) -> Error {
    let (root, path) = (root.to_owned(), path.to_owned());
    move |source| damaged(&root, &path, escaped(&source.to_string()))
}
