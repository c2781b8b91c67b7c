//! The lake: hive-partitioned Parquet with a transactional manifest.
//!
//! Layout: `<lake>/<dataset>/chain=<altchain|evm-<chain_id>>/[interval=<seconds>/]date=YYYY-MM-DD/part-<id>.parquet`,
//! with the lake's own files under `<lake>/_dexlake/` (see the commit log below). DuckDB's
//! `read_parquet('<lake>/swaps/**/*.parquet', hive_partitioning = true)`, polars'
//! `scan_parquet(..., hive_partitioning=True)` and `pyarrow.dataset(..., partitioning="hive")`
//! read the folders as they are.
//!
//! ```no_run
//! use dexlake::lake::{Dataset, Lake, convert};
//! # fn demo(swaps: &[dexlake::api::models::Swap]) -> dexlake::Result<()> {
//! let lake = Lake::open("./lake")?;
//! let mut tx = lake.transaction()?;
//! tx.write(Dataset::Swaps, convert::swaps_to_batch(swaps)?)?;
//! tx.set_state("swaps/cursor", serde_json::json!("abc"));
//! let summary = tx.commit()?;
//! let frame = lake.scan(Dataset::Swaps)?; // a polars LazyFrame over the committed files
//! # let _ = (summary, frame); Ok(()) }
//! ```
//!
//! The root is a local folder or an S3-compatible object store (`s3://bucket/prefix`, see
//! [`ObjectStoreLake`]); everything else is the same on both.
//!
//! Invariant: a file is part of the lake exactly when the manifest lists it. Writes to a
//! folder take the writer lock (`_dexlake/lock`), so two processes writing one lake serialise;
//! on an object store, writers run side by side and the conditional create of each log entry
//! decides which commit takes a version (the other commits again on the new version). The manifest is
//! stored as a commit log with checkpoints, so a commit and a state read cost the
//! same whatever the number of files; each [`Lake`] handle (and its clones) keeps the newest
//! version it read and only reads the entries committed since. [`Lake::at`] pins a handle to
//! an older version: its reads see exactly what that version committed, files and state. Files
//! that commits replace stay on disk for the older versions until [`Lake::vacuum`] deletes
//! those no version within its retention lists.
//!
//! The code is grouped by role, each row importing only rows above it:
//!
//! | where | what lives there |
//! |---|---|
//! | `dataset.rs`, `schema.rs`, `cols.rs`, `convert.rs` | the datasets, their Arrow schemas, their column names, models → batches (these import the API's models) |
//! | `layout.rs` | every path: hive paths of data files, every `_dexlake/` path, temporary names, which paths a store accepts |
//! | `docs.rs`, `sample.rs` | column docs (`docs/datasets.md` is generated from them), deterministic sample records |
//! | `parquet.rs` | the Parquet writer properties of every data file, a batch encoded in memory |
//! | `storage/` | the [`Store`] trait, [`LocalStore`], [`ObjectStoreLake`], the writer lock of a folder |
//! | `log/` | the [`Manifest`], the commit log and its checkpoints, the journal and recovery, the readable versions |
//! | `base.rs` | what the reads, writes and operations run on: the store, the root, the [`LakeOptions`], the manifest read (or the version pinned) and the writer lock |
//! | `read/` | polars scans of committed files, the lake's own Parquet reads |
//! | `write/` | [`Transaction`], the writer (partition, de-duplicate, encode, commit), the id index |
//! | `ops/` | verify, compact, repair, vacuum |
//! | `handle.rs` | [`Lake`]: opening (and recovering) a lake, its base and id indexes, the entry points |
//!
//! `read/`, `write/` and `ops/` run on the handle's base (`base.rs`), never on the [`Lake`]
//! handle itself: the handle is the top of the folder, and its methods are their entry points.

pub(crate) mod base;
pub(crate) mod cols;
mod dataset;
mod handle;
pub(crate) mod layout;
pub(crate) mod log;
pub(crate) mod ops;
pub(crate) mod parquet;
pub(crate) mod read;
pub(crate) mod storage;
pub(crate) mod write;

pub mod convert;
#[doc(hidden)]
pub mod docs;
#[doc(hidden)]
pub mod sample;
pub mod schema;
#[doc(hidden)]
pub mod test_support;

pub use crate::api::models::ChainFamily;
pub use base::LakeOptions;
pub use dataset::Dataset;
pub use handle::Lake;
pub use layout::Partition;
pub use log::{AsOf, CommitRecord, DatasetChange, FileEntry, History, Manifest, Recovery};
pub use ops::{
    CompactReport, DEFAULT_RETENTION, MERGE_FAN_IN, Problem, RepairReport, VACUUM, VacuumOptions,
    VacuumReport, VerifyOptions, VerifyProgress, VerifyReport,
};
pub use read::ViewEngine;
/// What a scan of a dataset gives, for engines that scan the files themselves.
pub use read::{hive_schema, scan_columns};
pub use storage::{LocalStore, ObjectRoot, ObjectStoreLake, Store, TransferStats};
pub use write::{COMMIT_ATTEMPTS, CommitSummary, Transaction};
