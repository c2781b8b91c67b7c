//! File access of the lake behind one small interface, shaped like the `object_store` crate
//! (put, get, list, rename, delete on `/`-separated relative paths), so that an object-store
//! root can be added later without touching the writer, the manifest or the analytics.

use std::fmt::Debug;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Storage of the lake's files. Paths are relative to the lake root and use `/`.
///
/// Invariant: only the holder of the lake's writer lock calls the mutating methods, so the
/// temporary names used by [`Store::put`] never collide.
pub trait Store: Debug + Send + Sync {
    /// Writes `data` to `path` atomically and durably: readers see either no file or the whole
    /// file, never a prefix, and the file survives a crash once this returns.
    fn put(&self, path: &str, data: &[u8]) -> Result<()>;
    /// Reads the whole file.
    fn get(&self, path: &str) -> Result<Vec<u8>>;
    /// Size in bytes of the file, or `None` if it does not exist.
    fn head(&self, path: &str) -> Result<Option<u64>>;
    /// Every file under `prefix` (recursively), as relative paths, sorted.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;
    /// Renames `from` to `to` atomically, replacing `to`.
    fn rename(&self, from: &str, to: &str) -> Result<()>;
    /// Deletes a file; deleting a missing file is not an error.
    fn delete(&self, path: &str) -> Result<()>;
    /// The location readers (polars, DuckDB) open for `path`: a local path or a URL.
    fn location(&self, path: &str) -> PathBuf;
}

/// The name [`Store::put`] writes to before renaming: hidden and not ending in `.parquet`, so
/// that `**/*.parquet` globs of DuckDB, polars and pyarrow never pick it up.
pub fn temp_name(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/.{name}.tmp"),
        None => format!(".{path}.tmp"),
    }
}

/// A [`Store`] on the local file system.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// A store rooted at `root` (which must exist).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStore { root: root.into() }
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn full(&self, path: &str) -> PathBuf {
        let mut p = self.root.clone();
        p.extend(path.split('/').filter(|s| !s.is_empty()));
        p
    }
}

/// Flushes a folder's entry table so a rename or create inside it survives a crash.
fn sync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|e| Error::io("opening folder", dir, e))?;
    d.sync_all()
        .map_err(|e| Error::io("syncing folder", dir, e))
}

impl Store for LocalStore {
    fn put(&self, path: &str, data: &[u8]) -> Result<()> {
        let target = self.full(path);
        let temp = self.full(&temp_name(path));
        let dir = target
            .parent()
            .expect("a path joined onto the lake root has a parent folder");
        if !dir.exists() {
            fs::create_dir_all(dir).map_err(|e| Error::io("creating folder", dir, e))?;
            // The new folder's own entry must be durable too, or the file could vanish with it.
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
        }
        let mut f = File::create(&temp).map_err(|e| Error::io("creating", &temp, e))?;
        f.write_all(data)
            .map_err(|e| Error::io("writing", &temp, e))?;
        f.sync_all().map_err(|e| Error::io("syncing", &temp, e))?;
        drop(f);
        fs::rename(&temp, &target).map_err(|e| Error::io("renaming into place", &target, e))?;
        sync_dir(dir)
    }

    fn get(&self, path: &str) -> Result<Vec<u8>> {
        let p = self.full(path);
        fs::read(&p).map_err(|e| Error::io("reading", p, e))
    }

    fn head(&self, path: &str) -> Result<Option<u64>> {
        let p = self.full(path);
        match fs::metadata(&p) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("inspecting", p, e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let start = self.full(prefix);
        if !start.exists() {
            return Ok(out);
        }
        let mut stack = vec![start];
        while let Some(dir) = stack.pop() {
            let entries = fs::read_dir(&dir).map_err(|e| Error::io("listing", &dir, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| Error::io("listing", &dir, e))?;
                let p = entry.path();
                let kind = entry
                    .file_type()
                    .map_err(|e| Error::io("inspecting", &p, e))?;
                if kind.is_dir() {
                    stack.push(p);
                } else if let Ok(rel) = p.strip_prefix(&self.root) {
                    let parts: Vec<String> = rel
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect();
                    out.push(parts.join("/"));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (a, b) = (self.full(from), self.full(to));
        fs::rename(&a, &b).map_err(|e| Error::io("renaming", &a, e))?;
        if let Some(dir) = b.parent() {
            sync_dir(dir)?;
        }
        Ok(())
    }

    fn delete(&self, path: &str) -> Result<()> {
        let p = self.full(path);
        match fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("deleting", p, e)),
        }
    }

    fn location(&self, path: &str) -> PathBuf {
        self.full(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_is_whole_and_leaves_no_temp() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(dir.path());
        store.put("a/b/c.bin", b"hello").expect("put");
        assert_eq!(store.get("a/b/c.bin").expect("get"), b"hello");
        assert_eq!(store.list("").expect("list"), vec!["a/b/c.bin".to_owned()]);
        assert_eq!(store.head("a/b/c.bin").expect("head"), Some(5));
        store.delete("a/b/c.bin").expect("delete");
        store.delete("a/b/c.bin").expect("deleting twice is fine");
        assert_eq!(store.head("a/b/c.bin").expect("head"), None);
    }

    #[test]
    fn temp_names_are_hidden_and_not_parquet() {
        let t = temp_name("swaps/chain=altchain/date=2024-01-01/part-1.parquet");
        assert_eq!(
            t,
            "swaps/chain=altchain/date=2024-01-01/.part-1.parquet.tmp"
        );
        assert!(!t.ends_with(".parquet"));
    }
}
