//! Writing the lake: a [`Transaction`] stages batches and state and commits them together; the
//! writer partitions, de-duplicates (or replaces) by natural key and id, sorts, encodes and
//! commits the files under the journal; the id index keeps the committed ids of swaps and
//! trades in memory.
//!
//! - `transaction.rs`: [`Transaction`], [`CommitSummary`] and the retries of a commit on an
//!   object store ([`COMMIT_ATTEMPTS`]);
//! - `writer.rs`: from staged batches to the files of a commit, and the commit of those files;
//! - `batch.rs`: one batch checked, split by partition, keyed, sorted, encoded; its ranges;
//! - `file_writer.rs`: [`FileWriter`], a data file streamed to its temporary name;
//! - `merge.rs`: the small files of a partition merged into a commit's new rows, when the
//!   commit asks for it ([`Transaction::merge_small_files`], a sync's group commits);
//! - `ids.rs`: [`IdIndex`](ids::IdIndex), the committed ids (and times) of swaps and trades, and [`IdCache`],
//!   a handle's indexes.
//!
//! Imports: the readers (a write reads the files whose records it replaces), the handle's base
//! (`base.rs`), the log, the storage, the layout, `parquet.rs` and the schemas; never the
//! operations or the [`Lake`](crate::lake::Lake) handle.

pub(crate) mod batch;
mod file_writer;
mod ids;
mod merge;
mod transaction;
pub(crate) mod writer;

pub(crate) use file_writer::FileWriter;
pub(crate) use ids::IdCache;
pub use transaction::{COMMIT_ATTEMPTS, CommitSummary, Transaction};
