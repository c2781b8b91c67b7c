//! File access of the lake behind one small interface, shaped like the `object_store` crate
//! (put, get, list, rename, delete on `/`-separated relative paths): [`LocalStore`] for a
//! folder, [`ObjectStoreLake`](super::object::ObjectStoreLake) for `s3://` roots. The writer,
//! the log and the analytics never know which.

use std::fmt::Debug;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::Dataset;
use super::manifest::META_DIR;
use crate::{Error, Result};

/// Storage of the lake's files. Paths are relative to the lake root and use `/`.
///
/// Invariant: only the holder of the lake's writer lock calls the mutating methods, so the
/// temporary names used by [`Store::put`] never collide.
///
/// Invariant: every method that takes a path refuses one that [`check_path`] refuses, so no
/// file outside the lake's layout is ever read, written or deleted through a store.
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
    /// Creates (or truncates) the [temporary file](temp_name) of `path` for a writer that
    /// streams a file too large to hold in memory, creating missing folders durably. The writer
    /// syncs the file when done; a [`rename`](Store::rename) from the temporary name puts it in
    /// place, as [`put`](Store::put) would.
    fn create_temp(&self, path: &str) -> Result<File>;
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
    /// Whether writers of this store serialise on a lock file (local folders). Without one
    /// (object stores), writers run side by side and the conditional create of
    /// [`put_new`](Store::put_new) alone decides which commit takes a version, so nothing may
    /// assume one writer at a time: no shared journal, no clean-up of other writers' files.
    fn has_writer_lock(&self) -> bool {
        true
    }
}

/// Checks that `path` is a path of the lake's layout: relative, `/`-separated, without empty,
/// `.` or `..` segments, backslashes or NUL bytes, and under a dataset folder or `_dexlake/`.
/// The empty path (the root) is accepted only as a prefix of [`Store::list`].
pub fn check_path(path: &str) -> Result<()> {
    let refuse = |why: &str| {
        Err(Error::Lake {
            path: PathBuf::from(path),
            message: format!("refused: {why}"),
        })
    };
    if path.is_empty() {
        return refuse("an empty path");
    }
    if path.starts_with('/') {
        return refuse("an absolute path; lake paths are relative to the lake root");
    }
    if path.contains(['\\', '\0']) {
        return refuse("a backslash or NUL byte in a lake path");
    }
    if path
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return refuse("an empty, `.` or `..` segment; lake paths never leave their folder");
    }
    let top = path.split('/').next().unwrap_or_default();
    if top != META_DIR && !Dataset::ALL.iter().any(|d| d.name() == top) {
        return refuse("not under a dataset folder or `_dexlake/`");
    }
    Ok(())
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

    /// The local path of a checked lake path.
    fn checked(&self, path: &str) -> Result<PathBuf> {
        check_path(path)?;
        Ok(self.full(path))
    }

    /// Writes `data` durably to the temporary file of `path`; returns the local paths of
    /// `path` and of that temporary file, for [`Store::put`] and [`Store::put_new`] to put it
    /// in place.
    fn write_temp(&self, path: &str, data: &[u8]) -> Result<(PathBuf, PathBuf)> {
        let target = self.checked(path)?;
        let temp = self.full(&temp_name(path));
        let mut f = self.create_temp(path)?;
        f.write_all(data)
            .map_err(|e| Error::io("writing", &temp, e))?;
        f.sync_all().map_err(|e| Error::io("syncing", &temp, e))?;
        Ok((target, temp))
    }

    fn full(&self, path: &str) -> PathBuf {
        let mut p = self.root.clone();
        p.extend(path.split('/').filter(|s| !s.is_empty()));
        p
    }
}

/// The folder of a local path inside the lake.
fn parent_of(path: &Path) -> &Path {
    path.parent()
        .expect("a path joined onto the lake root has a parent folder")
}

/// Flushes a folder's entry table so a rename or create inside it survives a crash.
fn sync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).map_err(|e| Error::io("opening folder", dir, e))?;
    d.sync_all()
        .map_err(|e| Error::io("syncing folder", dir, e))
}

/// Creates `dir` and its missing ancestors. Each new folder's entry in its parent is made
/// durable too, or a file could vanish with its folder after a crash.
fn create_dirs(dir: &Path) -> Result<()> {
    if dir.exists() {
        return Ok(());
    }
    let missing: Vec<&Path> = dir.ancestors().take_while(|a| !a.exists()).collect();
    fs::create_dir_all(dir).map_err(|e| Error::io("creating folder", dir, e))?;
    for created in missing.iter().rev() {
        if let Some(parent) = created.parent() {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

impl Store for LocalStore {
    fn put(&self, path: &str, data: &[u8]) -> Result<()> {
        let (target, temp) = self.write_temp(path, data)?;
        fs::rename(&temp, &target).map_err(|e| Error::io("renaming into place", &target, e))?;
        sync_dir(parent_of(&target))
    }

    fn put_new(&self, path: &str, data: &[u8]) -> Result<bool> {
        let (target, temp) = self.write_temp(path, data)?;
        // A hard link fails when the target exists, where a rename would replace it.
        let linked = fs::hard_link(&temp, &target);
        fs::remove_file(&temp).map_err(|e| Error::io("removing", &temp, e))?;
        match linked {
            Ok(()) => {
                sync_dir(parent_of(&target))?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(Error::io("linking into place", &target, e)),
        }
    }

    fn get(&self, path: &str) -> Result<Vec<u8>> {
        let p = self.checked(path)?;
        fs::read(&p).map_err(|e| Error::io("reading", p, e))
    }

    fn open_read(&self, path: &str) -> Result<File> {
        let p = self.checked(path)?;
        File::open(&p).map_err(|e| Error::io("opening", p, e))
    }

    fn create_temp(&self, path: &str) -> Result<File> {
        let target = self.checked(path)?;
        let temp = self.full(&temp_name(path));
        create_dirs(parent_of(&target))?;
        File::create(&temp).map_err(|e| Error::io("creating", &temp, e))
    }

    fn head(&self, path: &str) -> Result<Option<u64>> {
        let p = self.checked(path)?;
        match fs::metadata(&p) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("inspecting", p, e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let start = if prefix.is_empty() {
            self.root.clone()
        } else {
            self.checked(prefix)?
        };
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
        let (a, b) = (self.checked(from)?, self.checked(to)?);
        fs::rename(&a, &b).map_err(|e| Error::io("renaming", &a, e))?;
        if let Some(dir) = b.parent() {
            sync_dir(dir)?;
        }
        Ok(())
    }

    fn delete(&self, path: &str) -> Result<()> {
        let p = self.checked(path)?;
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
        let path = "swaps/b/c.bin";
        store.put(path, b"hello").expect("put");
        assert_eq!(store.get(path).expect("get"), b"hello");
        assert_eq!(store.list("").expect("list"), vec![path.to_owned()]);
        assert_eq!(store.head(path).expect("head"), Some(5));
        store.delete(path).expect("delete");
        store.delete(path).expect("deleting twice is fine");
        assert_eq!(store.head(path).expect("head"), None);
    }

    #[test]
    fn a_streamed_temp_file_is_hidden_until_renamed_into_place() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(dir.path());
        let path = "swaps/chain=altchain/date=2024-01-01/part-1.parquet";
        let mut f = store.create_temp(path).expect("create in a new folder");
        f.write_all(b"PAR1").expect("write");
        f.sync_all().expect("sync");
        drop(f);
        assert_eq!(store.head(path).expect("head"), None);
        assert_eq!(store.list("").expect("list"), vec![temp_name(path)]);
        store.rename(&temp_name(path), path).expect("rename");
        assert_eq!(store.list("").expect("list"), vec![path.to_owned()]);
        let mut read = String::new();
        std::io::Read::read_to_string(&mut store.open_read(path).expect("open"), &mut read)
            .expect("read");
        assert_eq!(read, "PAR1");
        assert!(store.create_temp("../outside.parquet").is_err());
        assert!(store.open_read("../outside.parquet").is_err());
    }

    #[test]
    fn paths_outside_the_layout_are_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = dir.path().join("lake");
        fs::create_dir(&lake).expect("lake folder");
        let victim = dir.path().join("victim.txt");
        fs::write(&victim, b"keep me").expect("victim");
        let store = LocalStore::new(&lake);
        let outside = victim.to_str().expect("UTF-8 temp path").to_owned();
        for bad in [
            "../victim.txt",
            "swaps/../../victim.txt",
            "swaps/./x.parquet",
            "swaps//x.parquet",
            outside.as_str(),
            "victim.txt",
            "notes/x.parquet",
            "swaps\\..\\..\\victim.txt",
            "",
        ] {
            assert!(check_path(bad).is_err(), "{bad:?}");
            assert!(
                matches!(store.delete(bad), Err(Error::Lake { .. })),
                "{bad:?}"
            );
            assert!(store.put(bad, b"x").is_err(), "{bad:?}");
            assert!(store.get(bad).is_err(), "{bad:?}");
            assert!(store.head(bad).is_err(), "{bad:?}");
            assert!(store.rename("swaps/a.parquet", bad).is_err(), "{bad:?}");
        }
        assert!(store.list("..").is_err());
        assert_eq!(fs::read(&victim).expect("victim kept"), b"keep me");
        assert_eq!(fs::read_dir(dir.path()).expect("list").count(), 2);
        for good in [
            "_dexlake/manifest.json",
            "swaps/chain=altchain/date=2024-01-01/.part-1.parquet.tmp",
        ] {
            check_path(good).expect(good);
        }
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

    #[test]
    fn put_new_never_replaces_a_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(dir.path());
        let path = "_dexlake/log/00000000000000000007.json";
        assert!(store.put_new(path, b"first").expect("put_new"));
        assert!(!store.put_new(path, b"second").expect("put_new again"));
        assert_eq!(store.get(path).expect("get"), b"first");
        assert_eq!(store.list("_dexlake").expect("list"), vec![path.to_owned()]);
    }
}
