//! [`LocalStore`]: the lake's files in a folder of the local file system.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::Store;
use crate::lake::layout::{check_path, temp_name};
use crate::{Error, Result};

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

    fn list_after(&self, prefix: &str, after: &str) -> Result<Vec<String>> {
        // `after` names a file of the folder `prefix` (a log entry): the folder's names are
        // compared as they are, and paths are built only for the files after it.
        let Some(name_after) = after
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|rest| !rest.contains('/'))
        else {
            let mut files = self.list(prefix)?;
            files.retain(|p| p.as_str() > after);
            return Ok(files);
        };
        let dir = self.checked(prefix)?;
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("listing", &dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("listing", &dir, e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let kind = entry
                .file_type()
                .map_err(|e| Error::io("inspecting", entry.path(), e))?;
            if kind.is_dir() {
                // Rare in the folders listed this way; its files are compared whole.
                let mut files = self.list(&format!("{prefix}/{name}"))?;
                files.retain(|p| p.as_str() > after);
                out.extend(files);
            } else if *name > *name_after {
                out.push(format!("{prefix}/{name}"));
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
    fn list_after_lists_only_the_files_after_a_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = LocalStore::new(dir.path());
        for v in [1, 2, 3, 10] {
            store
                .put(&format!("_dexlake/log/{v:020}.json"), b"{}")
                .expect("put");
        }
        store
            .put("_dexlake/log/sub/00000000000000000009.json", b"{}")
            .expect("put in a subfolder");
        let after = |v: u64| {
            store
                .list_after("_dexlake/log", &format!("_dexlake/log/{v:020}.json"))
                .expect("list_after")
        };
        let all = store.list("_dexlake/log").expect("list");
        for v in [0, 2, 3, 10] {
            let want: Vec<String> = all
                .iter()
                .filter(|p| p.as_str() > format!("_dexlake/log/{v:020}.json").as_str())
                .cloned()
                .collect();
            assert_eq!(after(v), want, "after {v}");
        }
        assert_eq!(
            after(2),
            vec![
                "_dexlake/log/00000000000000000003.json".to_owned(),
                "_dexlake/log/00000000000000000010.json".to_owned(),
                "_dexlake/log/sub/00000000000000000009.json".to_owned(),
            ]
        );
        assert!(
            store
                .list_after("_dexlake/checkpoint", "_dexlake/checkpoint/x")
                .expect("a missing folder")
                .is_empty()
        );
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
