//! Storage: where the lake's files live, behind one small interface shaped like the
//! `object_store` crate (put, get, list, rename, delete on `/`-separated relative paths):
//! [`LocalStore`] for a folder, [`ObjectStoreLake`] for `s3://` roots. The writer, the log and
//! the analytics never know which.
//!
//! - `mod.rs`: the [`Store`] trait;
//! - `local.rs`: [`LocalStore`], a folder on the local file system;
//! - `object.rs`: [`ObjectStoreLake`] and [`ObjectRoot`], an S3-compatible object store;
//! - `lock.rs`: [`WriterLock`], the lock file that makes a folder's writers take turns.
//!
//! Imports: the layout (which paths a store accepts, the temporary names) and
//! [`Dataset`](super::Dataset); nothing of the log, the writer or the readers.

use std::fmt::Debug;
use std::fs::File;
use std::path::PathBuf;

use crate::Result;

mod local;
mod lock;
mod object;

pub use local::LocalStore;
pub(crate) use lock::WriterLock;
pub use object::{ObjectRoot, ObjectStoreLake};

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
    /// Opens a file for reading by ranges, so that a Parquet reader holds only the pages it
    /// decodes instead of the whole file. (An object store downloads the object to an
    /// anonymous local file first: one request, and memory stays bounded.)
    fn open_read(&self, path: &str) -> Result<File>;
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
