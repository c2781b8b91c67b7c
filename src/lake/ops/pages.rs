//! The deep check of `dexlake verify` (its default): every page of every committed file decoded.
//!
//! The checks of [`verify()`](super::verify()) read each file's footer and its key columns; a
//! file whose other pages were damaged while its footer stayed intact passes them, and then
//! fails every reader that decodes those pages. Here each file is decoded whole (every column
//! of every row group), a batch at a time, files in parallel on rayon's threads, and its
//! decoded rows are counted against the manifest. Memory holds one batch and its pages per
//! thread, whatever the file's size (an object store's file is fetched to a temporary file
//! first, as every reader of the lake does).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use rayon::prelude::*;

use super::verify::{Problem, VerifyProgress};
use crate::error::escaped;
use crate::lake::{FileEntry, Lake};

/// Rows decoded at a time.
const BATCH_ROWS: usize = 8192;

/// Decodes every page of `files` (paths relative to the lake's root, with their manifest
/// entries), in parallel, calling `progress` after each file; returns the problems found, in
/// the order of `files`.
pub(super) fn decode_every_page(
    lake: &Lake,
    files: &[(&String, &FileEntry)],
    progress: &(dyn Fn(VerifyProgress) + Sync),
) -> Vec<Problem> {
    let total = VerifyProgress {
        files_done: 0,
        files: files.len(),
        bytes_done: 0,
        bytes: files.iter().map(|(_, e)| e.bytes).sum(),
    };
    progress(total);
    let files_done = AtomicUsize::new(0);
    let bytes_done = AtomicU64::new(0);
    files
        .par_iter()
        .filter_map(|(path, entry)| {
            let problem = catch_unwind(AssertUnwindSafe(|| decode_file(lake, path, entry)))
                .unwrap_or_else(|panic| {
                    let what = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("no message");
                    Some(Problem::DamagedPages {
                        path: (*path).clone(),
                        message: format!("the Parquet decoder failed: {}", escaped(what)),
                    })
                });
            progress(VerifyProgress {
                files_done: files_done.fetch_add(1, Ordering::Relaxed) + 1,
                bytes_done: bytes_done.fetch_add(entry.bytes, Ordering::Relaxed) + entry.bytes,
                ..total
            });
            problem
        })
        .collect()
}

/// Decodes one file row group by row group; the first page that does not decode, or a decoded
/// row count other than the manifest's, is its problem.
fn decode_file(lake: &Lake, path: &str, entry: &FileEntry) -> Option<Problem> {
    let unreadable = |message: String| {
        Some(Problem::UnreadableFile {
            path: path.to_owned(),
            message,
        })
    };
    let file = match lake.store().open_read(path) {
        Ok(file) => file,
        Err(e) => return unreadable(e.to_string()),
    };
    let footer = match ArrowReaderMetadata::load(&file, ArrowReaderOptions::new()) {
        Ok(footer) => footer,
        Err(e) => return unreadable(escaped(&e.to_string())),
    };
    let groups = footer.metadata().num_row_groups();
    let mut rows = 0u64;
    for group in 0..groups {
        let damaged = |what: String| {
            Some(Problem::DamagedPages {
                path: path.to_owned(),
                message: format!("row group {} of {groups}: {}", group + 1, escaped(&what)),
            })
        };
        // One thread reads the file: clones of the handle share its offset, never at once.
        let handle = match file.try_clone() {
            Ok(handle) => handle,
            Err(e) => return unreadable(e.to_string()),
        };
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(handle, footer.clone())
            .with_row_groups(vec![group])
            .with_batch_size(BATCH_ROWS)
            .build();
        let reader = match reader {
            Ok(reader) => reader,
            Err(e) => return damaged(e.to_string()),
        };
        for batch in reader {
            match batch {
                Ok(batch) => rows += batch.num_rows() as u64,
                Err(e) => return damaged(e.to_string()),
            }
        }
    }
    (rows != entry.rows).then(|| Problem::RowCountMismatch {
        path: path.to_owned(),
        manifest: entry.rows,
        file: rows,
    })
}
