//! The deep check of `dexlake verify` (its default): every page of every committed file decoded.
//!
//! The checks of [`verify()`](super::verify()) read each file's footer and its key columns; a
//! file whose other pages were damaged while its footer stayed intact passes them, and then
//! fails every reader that decodes those pages. Here each file is decoded whole (every column
//! of every row group), a batch at a time, files in parallel on rayon's threads, and its
//! decoded rows are counted against the manifest. Memory holds one batch and its pages per
//! thread, whatever the file's size (an object store's file is fetched to a temporary file
//! first, as every reader of the lake does).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use rayon::prelude::*;

use super::problems::{Problem, VerifyProgress};
use crate::lake::base::Base;
use crate::lake::log::FileEntry;
use crate::lake::read::{PageFault, decode_pages_of};

/// Decodes every page of `files` (paths relative to the lake's root, with their manifest
/// entries), in parallel, calling `progress` after each file; returns the problems found, in
/// the order of `files`.
pub(super) fn decode_every_page(
    lake: &Base,
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
            let problem = decode_file(lake, path, entry);
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
fn decode_file(lake: &Base, path: &str, entry: &FileEntry) -> Option<Problem> {
    let decoded = lake
        .store()
        .open_read(path)
        .map_err(|e| PageFault::Unreadable(e.to_string()))
        .and_then(|file| decode_pages_of(&file));
    match decoded {
        Ok(rows) => (rows != entry.rows).then(|| Problem::RowCountMismatch {
            path: path.to_owned(),
            manifest: entry.rows,
            file: rows,
        }),
        Err(PageFault::Unreadable(message)) => Some(Problem::UnreadableFile {
            path: path.to_owned(),
            message,
        }),
        Err(PageFault::Damaged {
            group,
            groups,
            message,
        }) => Some(Problem::DamagedPages {
            path: path.to_owned(),
            message: format!("row group {group} of {groups}: {message}"),
        }),
    }
}
