//! Internals of the lake for its tests, benchmarks and the benchmark-lake writer: paths of the
//! commit log, hand-made commits that bypass the [`Transaction`](super::Transaction), and the
//! log's recovery and restart. Not a stable interface; programs use [`Lake`](super::Lake).

pub use super::layout::{
    CHECKPOINT_DIR, JOURNAL_PATH, LAST_CHECKPOINT_PATH, LOG_DIR, MANIFEST_PATH, data_file_name,
    entry_path, temp_name, version_of,
};
pub use super::log::{
    COMPACT, Commit, Journal, MANIFEST_FORMAT_VERSION, MIN_TAIL_ENTRIES, last_checkpoint, recover,
    start_over, write_history_records,
};
pub use super::parquet::DEFAULT_ROW_GROUP_ROWS;
pub use super::parquet::encode_parquet;
pub use super::read::scan_columns;
pub use super::write::batch::encode_records;
pub use super::write::writer::NewFile;

use super::handle::Lake;
use super::write::writer;

/// Puts `files` into the lake and commits them as `commit` (its version, state and id ranges
/// set), with the `remove`d files removed, bypassing the writer's checks. Returns the new
/// version.
pub fn commit_files(
    lake: &Lake,
    commit: Commit,
    files: Vec<NewFile>,
    remove: Vec<String>,
) -> crate::Result<u64> {
    writer::commit_files(lake.base(), commit, files, remove)
}
