//! Storage: where the lake's files live, behind one small interface shaped like the
//! `object_store` crate (put, get, list, rename, delete on `/`-separated relative paths):
//! [`LocalStore`] for a folder, [`ObjectStoreLake`] for `s3://` roots. The writer, the log and
//! the analytics never know which.
//!
//! - `mod.rs`: the [`Store`] trait;
//! - `local.rs`: [`LocalStore`], a folder on the local file system;
//! - `object.rs`: [`ObjectStoreLake`] and [`ObjectRoot`], an S3-compatible object store, read
//!   by ranged GETs;
//! - `lock.rs`: [`WriterLock`], the lock file that makes a folder's writers take turns.
//!
//! Imports: the layout (which paths a store accepts, the temporary names) and
//! [`Dataset`](super::Dataset); nothing of the log, the writer or the readers.

use std::fmt::Debug;
use std::fs::File;
use std::ops::Range;
use std::path::PathBuf;

use bytes::Bytes;

use crate::{Error, Result};

mod local;
mod lock;
mod object;

pub use local::LocalStore;
pub(crate) use lock::WriterLock;
pub use object::{ObjectRoot, ObjectStoreLake};

/// What a store fetched: its GET requests (whole objects or ranges) and the bytes they
/// returned. Counted by an object store from its opening, shared by the clones of a
/// [`Lake`](crate::lake::Lake); a folder, read in place, counts nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferStats {
    /// GET requests sent (each ranged GET counts one).
    pub get_requests: u64,
    /// Bytes those requests returned.
    pub get_bytes: u64,
}

impl TransferStats {
    /// What was fetched since `earlier` (an earlier reading of the same store).
    pub fn since(self, earlier: TransferStats) -> TransferStats {
        TransferStats {
            get_requests: self.get_requests.saturating_sub(earlier.get_requests),
            get_bytes: self.get_bytes.saturating_sub(earlier.get_bytes),
        }
    }
}

/// The size of a local file and its last `n` bytes (all of them when it is shorter).
fn tail_of(file: &File, n: u64) -> std::io::Result<(u64, Bytes)> {
    let size = file.metadata()?.len();
    Ok((size, read_range(file, size.saturating_sub(n)..size)?))
}

/// The bytes of each of `ranges` of a local file.
fn ranges_of(file: &File, ranges: &[Range<u64>]) -> std::io::Result<Vec<Bytes>> {
    ranges.iter().map(|r| read_range(file, r.clone())).collect()
}

/// Reads `range` of a local file by position (no seek offset moves), failing if the file ends
/// before the range does.
fn read_range(file: &File, range: Range<u64>) -> std::io::Result<Bytes> {
    let len = usize::try_from(range.end.saturating_sub(range.start))
        .map_err(|_| std::io::Error::other("a range larger than memory"))?;
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let n = read_at(file, &mut buf[done..], range.start + done as u64)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "expected bytes {}..{}, the file ends at {}",
                    range.start,
                    range.end,
                    range.start + done as u64
                ),
            ));
        }
        done += n;
    }
    Ok(buf.into())
}

/// Reads `buf.len()` bytes or fewer at `offset` without moving any seek offset.
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
}

/// Storage of the lake's files. Paths are relative to the lake root and use `/`.
///
/// Invariant: only the holder of the lake's writer lock calls the mutating methods, so the
/// temporary names used by [`Store::put`] never collide.
///
/// Invariant: every method that takes a path refuses one outside the lake's layout
/// (`layout::check_path`), so no file outside the lake's layout is ever read, written or deleted
/// through a store.
pub trait Store: Debug + Send + Sync {
    /// Writes `data` to `path` atomically and durably: readers see either no file or the whole
    /// file, never a prefix, and the file survives a crash once this returns.
    fn put(&self, path: &str, data: &[u8]) -> Result<()>;
    /// Writes `data` to `path` only if no file is there, atomically and durably like
    /// [`put`](Store::put): `Ok(false)` (and nothing written) when `path` exists. A commit
    /// point written this way cannot replace another writer's (on an object store, a
    /// conditional create).
    fn put_new(&self, path: &str, data: &[u8]) -> Result<bool>;
    /// Reads the whole file.
    fn get(&self, path: &str) -> Result<Vec<u8>>;
    /// Opens a file for reading by position, so that a Parquet reader holds only the pages it
    /// decodes instead of the whole file. (An object store downloads the object to an
    /// anonymous local file first: one request, and memory stays bounded; readers that need a
    /// few parts of a file ask [`get_ranges`](Store::get_ranges) instead when
    /// [`reads_by_range`](Store::reads_by_range).)
    fn open_read(&self, path: &str) -> Result<File>;
    /// Whether parts of this store's files are best read by [`get_tail`](Store::get_tail) and
    /// [`get_ranges`](Store::get_ranges) (an object store: each a request, and only the bytes
    /// asked for travel) rather than by position in [`open_read`](Store::open_read)'s file (a
    /// folder: no copy, the pages read as they are decoded).
    fn reads_by_range(&self) -> bool {
        false
    }
    /// The size of the file and its last `n` bytes (the whole file when it is shorter): on an
    /// object store, one request (a suffix range) tells both.
    fn get_tail(&self, path: &str, n: u64) -> Result<(u64, Bytes)> {
        let file = self.open_read(path)?;
        tail_of(&file, n).map_err(|e| Error::io("reading", self.location(path), e))
    }
    /// The bytes of each of `ranges` of the file, in the order asked. On an object store,
    /// ranges close to each other are fetched by one request and the requests run side by
    /// side. A range past the end of the file is an error naming it.
    fn get_ranges(&self, path: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let file = self.open_read(path)?;
        ranges_of(&file, ranges).map_err(|e| Error::io("reading", self.location(path), e))
    }
    /// What this handle fetched from the store so far (zero for a folder, which is read in
    /// place).
    fn transfer_stats(&self) -> TransferStats {
        TransferStats::default()
    }
    /// Creates (or truncates) the temporary file of `path` (hidden, see `layout::temp_name`) for a
    /// writer that streams a file too large to hold in memory, creating missing folders durably.
    /// The writer syncs the file when done; a [`rename`](Store::rename) from the temporary name
    /// puts it in place, as [`put`](Store::put) would.
    fn create_temp(&self, path: &str) -> Result<File>;
    /// Size in bytes of the file, or `None` if it does not exist.
    fn head(&self, path: &str) -> Result<Option<u64>>;
    /// Every file under `prefix` (recursively), as relative paths, sorted.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;
    /// The sizes in bytes of `paths`, files under `prefix`; a missing file is left out. A
    /// folder asks each file ([`head`](Store::head)); an object store lists `prefix` once,
    /// which costs a request per thousand files instead of one per file.
    fn sizes(
        &self,
        prefix: &str,
        paths: &[&str],
    ) -> Result<std::collections::BTreeMap<String, u64>> {
        let _ = prefix;
        let mut out = std::collections::BTreeMap::new();
        for &path in paths {
            if let Some(bytes) = self.head(path)? {
                out.insert(path.to_owned(), bytes);
            }
        }
        Ok(out)
    }
    /// Every file under `prefix` whose path sorts after `after`, as relative paths, sorted. An
    /// object store starts its listing there (S3's `start-after`), so the request returns only
    /// those files however many sort before; a folder reads its entries and filters them.
    fn list_after(&self, prefix: &str, after: &str) -> Result<Vec<String>> {
        let mut files = self.list(prefix)?;
        files.retain(|p| p.as_str() > after);
        Ok(files)
    }
    /// Renames `from` to `to` atomically, replacing `to`.
    fn rename(&self, from: &str, to: &str) -> Result<()>;
    /// Deletes a file; deleting a missing file is not an error.
    fn delete(&self, path: &str) -> Result<()>;
    /// The location readers (polars, DuckDB) open for `path`: a local path or a URL.
    fn location(&self, path: &str) -> PathBuf;
    /// Whether writers of this store serialise on a lock file (local folders). Without one
    /// (object stores), writers run side by side and the conditional create of
    /// [`put_new`](Store::put_new) alone decides which commit takes a version, so nothing may
    /// assume one writer at a time: no shared journal, no clean-up of other writers' files.
    fn has_writer_lock(&self) -> bool {
        true
    }
}
