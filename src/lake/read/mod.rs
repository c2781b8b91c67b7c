//! Reading the lake: polars scans of the committed files of a dataset (with its hive columns) or
//! of named files, and the lake's own Parquet reads of one data file (whole, some columns,
//! batch by batch, or row groups from several threads: by position in a folder, by ranged
//! requests of the footer and the column chunks read on an object store).
//!
//! - `scan.rs`: [`scan()`], [`scan_files`], [`empty_frame`] and the scanned columns, and
//!   [`name_damaged_file`], the file to blame for a failed polars read;
//! - `file.rs`: [`read_file`], [`read_columns`], [`read_batches`], [`SharedFile`] and
//!   [`decode_pages_of`], every page of a file decoded (the deep verify, and naming the file
//!   behind a polars error);
//! - `prune.rs`: a dataset's committed files for a time range (or a partition's for an instant),
//!   and the row groups a selection of tokens, wallets and times skips by the `block_time`
//!   statistics and the bloom filters;
//! - `check.rs`: a committed file checked against its manifest entry (size, footer's row count)
//!   where its reader opens it, and the errors naming a file the Parquet reader refuses or that
//!   is missing ([`Error::DamagedLake`](crate::Error::DamagedLake)).
//!
//! - `views.rs`: [`views_script`], the DuckDB or Spark script of one view per dataset over the
//!   committed files (`dexlake views`).
//!
//! Within the folder, `check.rs` is the bottom (it imports no sibling), `file.rs` opens files
//! through it, `prune.rs` stands on `file.rs` `scan.rs` on `check.rs` and `file.rs`, and `views.rs` on `scan.rs`.
//!
//! Imports: the log (the [`Manifest`](crate::lake::Manifest) names what a scan reads), the
//! storage through the handle's base (`base.rs`: the store, the root messages name), `parquet.rs`
//! and the schemas; never the writer, the operations or the [`Lake`](crate::lake::Lake) handle.

mod check;
mod file;
mod prune;
mod scan;
mod views;

pub(crate) use check::{arrow_error, parquet_error};
pub(crate) use file::{
    PageFault, SharedFile, decode_pages_of, read_batches, read_columns, read_file,
};
pub(crate) use prune::{
    CommittedFile, blooms_may_hold, column_blooms, committed_files, files_holding, int_bounds,
    may_hold_strings, may_hold_times, may_hold_values, time_bounds,
};
pub(crate) use scan::name_damaged_file;
pub use scan::{empty_frame, hive_schema, scan_columns};
pub(crate) use scan::{locations, scan, scan_files};
pub use views::ViewEngine;
pub(crate) use views::views_script;
