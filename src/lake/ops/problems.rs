//! What `verify` reports: a [`Problem`] of the lake, and the [`VerifyProgress`] of its deep
//! check. Shared by the checks (`verify.rs`) and the page decoding (`pages.rs`), which import
//! this file and not each other.

use std::fmt;

use crate::error::escaped;
use crate::lake::dataset::Dataset;

/// One thing wrong with the lake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A committed file does not exist.
    MissingFile {
        /// Path relative to the lake root.
        path: String,
    },
    /// A committed file cannot be read as Parquet.
    UnreadableFile {
        /// Path relative to the lake root.
        path: String,
        /// The reader's error.
        message: String,
    },
    /// A committed file holds another number of rows than the manifest says.
    RowCountMismatch {
        /// Path relative to the lake root.
        path: String,
        /// Rows per the manifest.
        manifest: u64,
        /// Rows in the file.
        file: u64,
    },
    /// A committed file whose size differs from the manifest's: it was replaced or changed
    /// after its commit.
    SizeMismatch {
        /// Path relative to the lake root.
        path: String,
        /// Bytes per the manifest.
        manifest: u64,
        /// Bytes on disk.
        file: u64,
    },
    /// A file under a dataset folder (or a Parquet file under `_dexlake/`) that the manifest
    /// does not list.
    UntrackedFile {
        /// Path relative to the lake root.
        path: String,
    },
    /// A committed file whose path is not in the lake layout or names another dataset.
    BadPath {
        /// Path relative to the lake root.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A committed file whose schema or schema version differs from the dataset's.
    SchemaMismatch {
        /// Path relative to the lake root.
        path: String,
        /// What differs.
        message: String,
    },
    /// A committed file whose footer reads but whose pages do not decode (found by a deep
    /// verify, [`VerifyOptions::deep`](super::VerifyOptions::deep)).
    DamagedPages {
        /// Path relative to the lake root.
        path: String,
        /// Which row group, and the decoder's error.
        message: String,
    },
    /// Records of one partition sharing a natural key.
    DuplicateKeys {
        /// The partition folder.
        partition: String,
        /// Number of rows beyond the first of each key.
        extra_rows: u64,
    },
    /// Records of a dataset whose `id` is unique across partitions (swaps, trades) stored in
    /// more than one partition: the same event at two `block_time`s.
    DuplicateIds {
        /// The dataset.
        dataset: Dataset,
        /// Number of ids found in more than one partition.
        ids: u64,
        /// Number of rows of those ids outside the first partition holding each.
        extra_rows: u64,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::MissingFile { path } => write!(f, "missing committed file {path}"),
            Problem::UnreadableFile { path, message } => {
                write!(f, "unreadable committed file {path}: {}", escaped(message))
            }
            Problem::DamagedPages { path, message } => {
                write!(
                    f,
                    "damaged pages in committed file {path}: {}",
                    escaped(message)
                )
            }
            Problem::RowCountMismatch {
                path,
                manifest,
                file,
            } => write!(f, "{path} holds {file} rows, the manifest says {manifest}"),
            Problem::SizeMismatch {
                path,
                manifest,
                file,
            } => write!(f, "{path} is {file} bytes, the manifest says {manifest}"),
            Problem::UntrackedFile { path } => write!(f, "file not in the manifest: {path}"),
            Problem::BadPath { path, message } => write!(f, "bad path {path}: {message}"),
            Problem::SchemaMismatch { path, message } => {
                write!(f, "schema mismatch in {path}: {message}")
            }
            Problem::DuplicateKeys {
                partition,
                extra_rows,
            } => write!(f, "{extra_rows} duplicate-key rows in {partition}"),
            Problem::DuplicateIds {
                dataset,
                ids,
                extra_rows,
            } => write!(
                f,
                "{ids} {dataset} ids stored in more than one partition ({extra_rows} extra rows)"
            ),
        }
    }
}

/// How far the page decoding of a deep verify is, handed to the observer of
/// [`Lake::verify_with`](crate::lake::Lake::verify_with) once before the first file and after each file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyProgress {
    /// Files decoded so far.
    pub files_done: usize,
    /// Files to decode.
    pub files: usize,
    /// Bytes of the files decoded so far.
    pub bytes_done: u64,
    /// Bytes of the files to decode.
    pub bytes: u64,
}
