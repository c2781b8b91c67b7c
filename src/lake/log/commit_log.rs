//! The log's entries and checkpoints, and [`ManifestView`], the manifest as a reader holds it:
//! read from the newest checkpoint and the entries after it, caught up entry by entry, and
//! extended by a commit.

use std::borrow::Cow;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::history::{self, CommitRecord};
use super::manifest::{self, FileEntry, MANIFEST_FORMAT_VERSION, Manifest};
use crate::lake::layout::{
    CHECKPOINT_DIR, LAST_CHECKPOINT_PATH, LOG_DIR, MANIFEST_PATH, PREVIOUS_MANIFEST_PATH,
    check_path, entry_path, files_checkpoint_path, state_checkpoint_path, version_of,
};
use crate::lake::storage::Store;
use crate::{Error, Result};

/// A checkpoint is not written before this many entries follow the last one.
pub const MIN_TAIL_ENTRIES: u64 = 100;
/// A checkpoint is always written once this many entries follow the last one.
pub const MAX_TAIL_ENTRIES: u64 = 2_000;

/// How many times a reader starts again from the newest checkpoint when checkpoints written
/// while it reads keep moving the log's base.
const READ_ATTEMPTS: usize = 10;

/// The [`Commit::operation`] of a compaction.
pub const COMPACT: &str = "compact";

/// One commit of the log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    /// The version this commit produces (the one before plus one).
    pub version: u64,
    /// When it was committed.
    pub committed_at: Option<DateTime<Utc>>,
    /// What made it, when that matters to readers: [`COMPACT`] for a compaction, whose added
    /// files hold exactly the rows of its removed ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Files added, by path relative to the lake root.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, FileEntry>,
    /// Files removed (by compaction, or rewritten without replaced records).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Id ranges learnt for committed files whose entry lacked them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub id_ranges: BTreeMap<String, (i64, i64)>,
    /// State values set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub state: BTreeMap<String, serde_json::Value>,
    /// Files a vacuum deleted: removed by earlier commits, no version it keeps lists them, so
    /// they are forgotten from [`Manifest::removed`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forget: Vec<String>,
    /// Rows of the removed files, per dataset name, for the history; filled at commit time
    /// from the manifest (absent in entries written before the history was kept).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub removed_rows: BTreeMap<String, u64>,
}

/// The pointer to the newest checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastCheckpoint {
    /// Version of the checkpoint.
    pub version: u64,
    /// Size of its file list in bytes.
    pub files_bytes: u64,
    /// Version of the checkpoint before it, kept for repairs; `None` for the first.
    #[serde(default)]
    pub previous: Option<u64>,
}

/// The state part of a checkpoint; written from a borrowed state, read into an owned one.
#[derive(Debug, Serialize, Deserialize)]
struct StateCheckpoint<'a> {
    format_version: u32,
    version: u64,
    committed_at: Option<DateTime<Utc>>,
    state: Cow<'a, BTreeMap<String, serde_json::Value>>,
}

/// The file-list part of a checkpoint; written from a borrowed list, read into an owned one.
#[derive(Debug, Serialize, Deserialize)]
struct FilesCheckpoint<'a> {
    format_version: u32,
    version: u64,
    files: Cow<'a, BTreeMap<String, FileEntry>>,
    /// [`Manifest::removed`]; absent in checkpoints written before files were retained.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    removed: Cow<'a, BTreeMap<String, u64>>,
}

/// Where a snapshot's base came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    /// No checkpoint and no manifest: an empty lake.
    Empty,
    /// A checkpoint of the log.
    Checkpoint(LastCheckpoint),
    /// The single manifest of a lake written before the log existed.
    Legacy,
}

/// The manifest as of one version, as a reader holds it.
#[derive(Debug, Clone)]
pub struct ManifestView {
    /// The manifest; its `files` are empty unless [`has_files`](Self::has_files).
    pub manifest: std::sync::Arc<Manifest>,
    /// Whether the file list was read.
    pub has_files: bool,
    base: Base,
    tail_entries: u64,
    tail_bytes: u64,
    /// The records of the commits applied since the base, for the next checkpoint's history
    /// file (at most [`MAX_TAIL_ENTRIES`], the newest).
    tail_records: Vec<CommitRecord>,
}

fn decode_err(
    store: &dyn Store,
    path: &str,
    what: &str,
) -> impl FnOnce(serde_json::Error) -> Error {
    let path = store.location(path);
    let what = format!(
        "{what} is damaged; run `dexlake verify --repair` to rebuild the manifest from the files"
    );
    move |source| Error::LakeDecode { path, what, source }
}

fn read_json<T: serde::de::DeserializeOwned>(
    store: &dyn Store,
    path: &str,
    what: &str,
) -> Result<T> {
    let bytes = store.get(path)?;
    serde_json::from_slice(&bytes).map_err(decode_err(store, path, what))
}

fn check_format(store: &dyn Store, path: &str, format: u32) -> Result<()> {
    if format != MANIFEST_FORMAT_VERSION {
        return Err(Error::Lake {
            path: store.location(path),
            message: format!(
                "manifest format {format} is not supported (expected {MANIFEST_FORMAT_VERSION})"
            ),
        });
    }
    Ok(())
}

/// Scans open committed files by path, so none may point outside the lake.
fn check_files<'a>(
    store: &dyn Store,
    path: &str,
    mut files: impl Iterator<Item = &'a String>,
) -> Result<()> {
    if let Some((p, e)) = files.find_map(|p| check_path(p).err().map(|e| (p, e))) {
        return Err(Error::Lake {
            path: store.location(path),
            message: format!("the manifest lists {p:?}, outside the lake ({e})"),
        });
    }
    Ok(())
}

/// Reads the newest checkpoint pointer, if any.
pub fn last_checkpoint(store: &dyn Store) -> Result<Option<LastCheckpoint>> {
    if store.head(LAST_CHECKPOINT_PATH)?.is_none() {
        return Ok(None);
    }
    read_json(store, LAST_CHECKPOINT_PATH, "the checkpoint pointer").map(Some)
}

/// Reads one log entry, or `None` when the version has none.
pub fn read_entry(store: &dyn Store, version: u64) -> Result<Option<(Commit, u64)>> {
    let path = entry_path(version);
    if store.head(&path)?.is_none() {
        return Ok(None);
    }
    parse_entry(store, version, &store.get(&path)?).map(Some)
}

/// The versions of the log entries after `version`, in order, from one listing of the log
/// folder (on an object store, one that starts after that version's entry).
fn entries_after(store: &dyn Store, version: u64) -> Result<Vec<u64>> {
    let mut versions: Vec<u64> = store
        .list_after(LOG_DIR, &entry_path(version))?
        .iter()
        .filter_map(|p| version_of(p).filter(|v| entry_path(*v) == *p))
        .collect();
    versions.sort_unstable();
    Ok(versions)
}

/// The refusal of a log whose entry `missing` is gone while later entries exist: reading on
/// would stop before it, and the next commit would take its version and have the entries after
/// it applied on top. Names the newest entry too (one more listing, on this error path only).
fn missing_entry(store: &dyn Store, missing: u64) -> Error {
    let newest = entries_after(store, missing)
        .ok()
        .and_then(|listed| listed.last().copied());
    let later = match newest {
        Some(newest) => format!("entries up to {newest} exist"),
        None => "later entries exist".to_owned(),
    };
    Error::Lake {
        path: store.location(&entry_path(missing)),
        message: format!(
            "log entry {missing} is missing while {later}, so no version from {missing} on can be read; run `dexlake verify --repair` to rebuild the manifest from the files"
        ),
    }
}

/// Parses the log entry of `version` from its bytes; returns it with its size.
fn parse_entry(store: &dyn Store, version: u64, bytes: &[u8]) -> Result<(Commit, u64)> {
    let path = entry_path(version);
    let commit: Commit = serde_json::from_slice(bytes).map_err(decode_err(
        store,
        &path,
        &format!("log entry {version}"),
    ))?;
    if commit.version != version {
        return Err(Error::Lake {
            path: store.location(&path),
            message: format!(
                "log entry {version} says it is version {}; run `dexlake verify --repair`",
                commit.version
            ),
        });
    }
    check_files(store, &path, commit.add.keys())?;
    Ok((commit, bytes.len() as u64))
}

impl Manifest {
    /// Reads the newest committed manifest, files included (from the commit log); a lake
    /// without one is empty.
    ///
    /// Refused with [`Error::Lake`](crate::Error::Lake), pointing at `dexlake verify --repair`: a
    /// missing manifest while data folders hold files (reading on would count every row twice, or
    /// fetch it all again), and a part of it that does not parse (truncated or garbage).
    pub fn load(store: &dyn Store) -> Result<Manifest> {
        let snap = ManifestView::read(store, true)?;
        Ok(std::sync::Arc::unwrap_or_clone(snap.manifest))
    }
}

impl ManifestView {
    /// Reads the lake's manifest: the newest checkpoint and the entries after it. Without
    /// `files`, only the state is read.
    ///
    /// Refused with [`Error::Lake`], pointing at `dexlake verify --repair`: no manifest while
    /// data folders hold files, any part that does not parse, and an entry missing after the
    /// checkpoint while later ones exist. The entries are found with one listing of the log.
    pub fn read(store: &dyn Store, files: bool) -> Result<ManifestView> {
        for _ in 0..READ_ATTEMPTS {
            let mut snap = ManifestView::read_base(store, files)?;
            if snap.apply_listed(store)? {
                return Ok(snap);
            }
        }
        Err(Error::Lake {
            path: store.location(LOG_DIR),
            message: format!(
                "the log moved past {READ_ATTEMPTS} checkpoints while it was being read; try again"
            ),
        })
    }

    fn read_base(store: &dyn Store, files: bool) -> Result<ManifestView> {
        let (manifest, base) = match last_checkpoint(store)? {
            Some(last) => (
                read_checkpoint(store, last.version, files)?,
                Base::Checkpoint(last),
            ),
            None if store.head(MANIFEST_PATH)?.is_some() => {
                let m: Manifest = read_json(store, MANIFEST_PATH, "the manifest")?;
                check_format(store, MANIFEST_PATH, m.format_version)?;
                check_files(store, MANIFEST_PATH, m.files.keys())?;
                (m, Base::Legacy)
            }
            None => {
                if let Some(dataset) = manifest::datasets_with_files(store)?.first() {
                    return Err(Error::Lake {
                        path: store.location(LAST_CHECKPOINT_PATH),
                        message: format!(
                            "the manifest is missing but the lake holds data files ({dataset}/ and maybe others), so which of them are committed is unknown; run `dexlake verify --repair` to rebuild the manifest from the files"
                        ),
                    });
                }
                let m = Manifest {
                    format_version: MANIFEST_FORMAT_VERSION,
                    ..Manifest::default()
                };
                (m, Base::Empty)
            }
        };
        Ok(ManifestView {
            manifest: std::sync::Arc::new(manifest),
            has_files: files,
            base,
            tail_entries: 0,
            tail_bytes: 0,
            tail_records: Vec::new(),
        })
    }

    /// The manifest as of `version` (with its files): the newest checkpoint at or before it
    /// and the entries after that checkpoint up to it, read by name. `Ok(None)` when the log
    /// no longer holds what that takes (a vacuum or an older clean-up deleted it, or it never
    /// did); `version` must not be newer than the lake's.
    pub fn read_at(store: &dyn Store, version: u64) -> Result<Option<Manifest>> {
        let Some(checkpoint) = checkpoint_versions(store)?
            .into_iter()
            .filter(|&v| v <= version)
            .max()
        else {
            return Ok(None);
        };
        let mut snap = ManifestView {
            manifest: std::sync::Arc::new(read_checkpoint(store, checkpoint, true)?),
            has_files: true,
            base: Base::Empty,
            tail_entries: 0,
            tail_bytes: 0,
            tail_records: Vec::new(),
        };
        for v in checkpoint + 1..=version {
            match read_entry(store, v)? {
                Some((commit, _)) => snap.apply(&commit),
                None => return Ok(None),
            }
        }
        Ok(Some(std::sync::Arc::unwrap_or_clone(snap.manifest)))
    }

    /// Brings the snapshot to the newest committed version: applies the entries after it, or
    /// reads the manifest again when it is behind the newest checkpoint (a vacuum may have
    /// deleted the entries it needs, or a repair's new base).
    ///
    /// A snapshot asks for its next entry by name, as cheap as the log gets; when that entry is
    /// missing but the one after it exists, an entry was lost, and the log is refused as
    /// [`read`](Self::read) refuses it. (A longer run of lost entries right after a snapshot is
    /// found by the next fresh read or commit, which list the log.)
    pub fn catch_up(&mut self, store: &dyn Store) -> Result<()> {
        loop {
            let next = self.manifest.version + 1;
            match read_entry(store, next)? {
                Some((commit, bytes)) => {
                    self.apply(&commit);
                    self.tail_entries += 1;
                    self.tail_bytes += bytes;
                }
                None => {
                    if self.behind_checkpoint(store)? {
                        *self = ManifestView::read(store, self.has_files)?;
                    } else if store.head(&entry_path(next + 1))?.is_some() {
                        return Err(missing_entry(store, next));
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Applies the entries listed after the snapshot's version (one listing of the log), in
    /// order. `false` when the snapshot is behind the newest checkpoint and must start from it
    /// instead; an entry missing while later ones exist is refused.
    fn apply_listed(&mut self, store: &dyn Store) -> Result<bool> {
        for version in entries_after(store, self.manifest.version)? {
            let next = self.manifest.version + 1;
            if version != next {
                // Entries before `version` are gone: deleted by a vacuum (or by the clean-up
                // of a checkpoint in an older release) past this snapshot, or lost.
                if self.behind_checkpoint(store)? {
                    return Ok(false);
                }
                return Err(missing_entry(store, next));
            }
            let read = store
                .get(&entry_path(version))
                .and_then(|bytes| parse_entry(store, version, &bytes));
            match read {
                Ok((commit, bytes)) => {
                    self.apply(&commit);
                    self.tail_entries += 1;
                    self.tail_bytes += bytes;
                }
                // Listed, then deleted by a vacuum.
                Err(_) if self.behind_checkpoint(store)? => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        // A repair's new base has no entry of its own, so a snapshot that only followed the
        // entries starts from it.
        Ok(!self.behind_checkpoint(store)?)
    }

    /// Whether the newest checkpoint is newer than the snapshot. A lost pointer under a
    /// snapshot read from a checkpoint counts too: reading again fails as a fresh reader would.
    fn behind_checkpoint(&self, store: &dyn Store) -> Result<bool> {
        Ok(match last_checkpoint(store)? {
            Some(last) => last.version > self.manifest.version,
            None => matches!(self.base, Base::Checkpoint(_)),
        })
    }

    /// Applies one commit to the snapshot.
    pub fn apply(&mut self, commit: &Commit) {
        if self.tail_records.len() as u64 >= MAX_TAIL_ENTRIES {
            self.tail_records.remove(0);
        }
        self.tail_records.push(CommitRecord::of(commit));
        let has_files = self.has_files;
        let m = std::sync::Arc::make_mut(&mut self.manifest);
        m.version = commit.version;
        m.committed_at = commit.committed_at;
        m.state
            .extend(commit.state.iter().map(|(k, v)| (k.clone(), v.clone())));
        if has_files {
            for path in &commit.remove {
                if m.files.remove(path).is_some() {
                    m.removed.insert(path.clone(), commit.version);
                }
            }
            for path in &commit.forget {
                m.removed.remove(path);
            }
            for (path, entry) in &commit.add {
                m.files.insert(path.clone(), entry.clone());
            }
            for (path, &(lo, hi)) in &commit.id_ranges {
                if let Some(entry) = m.files.get_mut(path) {
                    entry.min_id = Some(lo);
                    entry.max_id = Some(hi);
                }
            }
        }
    }

    /// Appends `commit` to the log (the commit point) and applies it. Must run under the
    /// writer lock, on a snapshot with its files, at the newest version.
    pub fn commit(&mut self, store: &dyn Store, mut commit: Commit) -> Result<()> {
        debug_assert!(self.has_files, "commits start from a snapshot with files");
        for path in &commit.remove {
            if let Some(entry) = self.manifest.files.get(path) {
                *commit
                    .removed_rows
                    .entry(entry.dataset.name().to_owned())
                    .or_default() += entry.rows;
            }
        }
        debug_assert_eq!(commit.version, self.manifest.version + 1);
        if self.base == Base::Legacy {
            // The single manifest becomes the first checkpoint before the log grows on it.
            self.checkpoint(store)?;
        }
        // Nothing may follow this version: an entry after it means another writer took it
        // first, or, when it is later, that this version's entry was lost, and committing would
        // take its version and have the entries after it applied on top.
        match entries_after(store, self.manifest.version)?.first() {
            Some(&taken) if taken == commit.version => {
                return Err(Error::CommitConflict {
                    path: store.location(LOG_DIR),
                    version: commit.version,
                });
            }
            Some(_) => return Err(missing_entry(store, commit.version)),
            None => {}
        }
        let bytes = serde_json::to_vec(&commit)
            .expect("a commit of strings, numbers and JSON values always serialises");
        if !store.put_new(&entry_path(commit.version), &bytes)? {
            return Err(Error::CommitConflict {
                path: store.location(LOG_DIR),
                version: commit.version,
            });
        }
        self.apply(&commit);
        self.tail_entries += 1;
        self.tail_bytes += bytes.len() as u64;
        if self.checkpoint_due() {
            self.checkpoint(store)?;
        }
        Ok(())
    }

    fn checkpoint_due(&self) -> bool {
        let files_bytes = match self.base {
            Base::Checkpoint(last) => last.files_bytes,
            Base::Empty | Base::Legacy => 0,
        };
        self.tail_entries >= MAX_TAIL_ENTRIES
            || (self.tail_entries >= MIN_TAIL_ENTRIES
                && self.tail_bytes.saturating_mul(16) >= files_bytes)
    }

    /// Writes the history file of the commits since the base, then a checkpoint of the
    /// snapshot's version, and deletes a legacy manifest. Older entries and checkpoints stay:
    /// the versions they describe stay readable until a vacuum deletes them.
    pub fn checkpoint(&mut self, store: &dyn Store) -> Result<()> {
        let m = &self.manifest;
        let since = match self.base {
            Base::Checkpoint(last) => last.version,
            Base::Empty | Base::Legacy => 0,
        };
        let records: Vec<CommitRecord> = self
            .tail_records
            .iter()
            .filter(|r| r.version > since && r.version <= m.version)
            .cloned()
            .collect();
        history::write_records(store, m.version, &records)?;
        let state = serde_json::to_vec(&StateCheckpoint {
            format_version: MANIFEST_FORMAT_VERSION,
            version: m.version,
            committed_at: m.committed_at,
            state: Cow::Borrowed(&m.state),
        })
        .expect("a state of JSON values always serialises");
        let files = serde_json::to_vec(&FilesCheckpoint {
            format_version: MANIFEST_FORMAT_VERSION,
            version: m.version,
            files: Cow::Borrowed(&m.files),
            removed: Cow::Borrowed(&m.removed),
        })
        .expect("a file list of strings and numbers always serialises");
        store.put(&state_checkpoint_path(m.version), &state)?;
        store.put(&files_checkpoint_path(m.version), &files)?;
        let previous = match self.base {
            Base::Checkpoint(last) if last.version < m.version => Some(last),
            _ => None,
        };
        let last = LastCheckpoint {
            version: m.version,
            files_bytes: files.len() as u64,
            previous: previous.map(|p| p.version),
        };
        store.put(
            LAST_CHECKPOINT_PATH,
            &serde_json::to_vec(&last).expect("numbers always serialise"),
        )?;
        if self.base == Base::Legacy {
            store.delete(MANIFEST_PATH)?;
            store.delete(PREVIOUS_MANIFEST_PATH)?;
        }
        self.base = Base::Checkpoint(last);
        self.tail_entries = 0;
        self.tail_bytes = 0;
        self.tail_records.clear();
        Ok(())
    }
}

/// The versions of the checkpoints whose file list is on disk, in no particular order.
pub fn checkpoint_versions(store: &dyn Store) -> Result<Vec<u64>> {
    Ok(store
        .list(CHECKPOINT_DIR)?
        .iter()
        .filter(|p| p.ends_with(".files.json"))
        .filter_map(|p| version_of(p))
        .collect())
}

/// The checkpoint the versions from `oldest` on are read from: the newest at or before it,
/// never newer than the one before the newest (kept so that `verify --repair` can take the
/// sync state from it when the newest is damaged). `None` when no checkpoint is that old.
pub fn log_floor(store: &dyn Store, oldest: u64) -> Result<Option<u64>> {
    let previous = last_checkpoint(store)?.and_then(|l| l.previous.or(Some(l.version)));
    let floor = checkpoint_versions(store)?
        .into_iter()
        .filter(|&v| v <= oldest)
        .max();
    Ok(match (floor, previous) {
        (Some(f), Some(p)) => Some(f.min(p)),
        (f, _) => f,
    })
}

/// The log entries at or below checkpoint `keep` and the checkpoints below it: what a vacuum
/// deletes so that the versions before `keep` are no longer read. History files stay.
pub fn log_files_before(store: &dyn Store, keep: u64) -> Result<Vec<String>> {
    let mut files: Vec<String> = store
        .list(LOG_DIR)?
        .into_iter()
        .filter(|p| version_of(p).is_some_and(|v| v <= keep))
        .collect();
    files.extend(
        store
            .list(CHECKPOINT_DIR)?
            .into_iter()
            .filter(|p| version_of(p).is_some_and(|v| v < keep)),
    );
    Ok(files)
}

/// The manifest of the checkpoint of `version`; its file list (and removed files) only when
/// `files`.
fn read_checkpoint(store: &dyn Store, version: u64, files: bool) -> Result<Manifest> {
    let path = state_checkpoint_path(version);
    let s: StateCheckpoint = read_json(store, &path, "the checkpoint's state")?;
    check_format(store, &path, s.format_version)?;
    let mut m = Manifest {
        format_version: MANIFEST_FORMAT_VERSION,
        version: s.version,
        committed_at: s.committed_at,
        files: BTreeMap::new(),
        state: s.state.into_owned(),
        removed: BTreeMap::new(),
    };
    if files {
        let path = files_checkpoint_path(version);
        let f: FilesCheckpoint = read_json(store, &path, "the checkpoint's file list")?;
        check_format(store, &path, f.format_version)?;
        check_files(store, &path, f.files.keys())?;
        m.files = f.files.into_owned();
        m.removed = f.removed.into_owned();
    }
    Ok(m)
}

/// The newest version any file of the log names (entries and checkpoints, readable or not).
pub fn newest_named_version(store: &dyn Store) -> Result<u64> {
    let mut newest = 0;
    for dir in [LOG_DIR, CHECKPOINT_DIR] {
        for path in store.list(dir)? {
            newest = newest.max(version_of(&path).unwrap_or(0));
        }
    }
    Ok(newest)
}

/// Starts the log over from `manifest`: writes it as a checkpoint at its version (which must
/// be newer than every version the log names) and points at it. Used by `verify --repair` and
/// to create an empty lake.
pub fn start_over(store: &dyn Store, manifest: &Manifest) -> Result<()> {
    let mut snap = ManifestView {
        manifest: std::sync::Arc::new(manifest.clone()),
        has_files: true,
        base: Base::Empty,
        tail_entries: 0,
        tail_bytes: 0,
        // The history shows the repair as the commit of its version.
        tail_records: vec![CommitRecord {
            version: manifest.version,
            committed_at: manifest.committed_at,
            operation: history::REPAIR.to_owned(),
            datasets: BTreeMap::new(),
            state: Vec::new(),
        }],
    };
    snap.checkpoint(store)?;
    // The newest state must be the one just written: a legacy manifest would shadow nothing
    // (the pointer wins), but it is stale, so it goes.
    store.delete(MANIFEST_PATH)?;
    store.delete(PREVIOUS_MANIFEST_PATH)?;
    Ok(())
}

/// Every file the readable parts of the log say a commit removed: the retained files of each
/// checkpoint that parses and the files each readable entry removes, for a repair (a retained
/// file holds rows a committed file also holds, so it must not be adopted again).
pub fn salvage_removed(store: &dyn Store) -> std::collections::BTreeSet<String> {
    let mut removed = std::collections::BTreeSet::new();
    for path in store.list(CHECKPOINT_DIR).unwrap_or_default() {
        if path.ends_with(".files.json")
            && let Ok(f) = read_json::<FilesCheckpoint>(store, &path, "file list")
        {
            removed.extend(f.removed.into_owned().into_keys());
        }
    }
    for path in store.list(LOG_DIR).unwrap_or_default() {
        if let Some(Ok(Some((commit, _)))) = version_of(&path).map(|v| read_entry(store, v)) {
            removed.extend(commit.remove);
        }
    }
    removed
}

/// The sync state of the newest readable version: the newest checkpoint whose state parses
/// (the newest, else the previous one), then every entry after it that can be read, in order.
/// An entry that is missing or does not parse is skipped: the keys only it set keep the value
/// they had before it, which claims less than the data files hold (a sync fetches the
/// difference again), and the entries after it set theirs, whose files are on disk. So the
/// state never claims more than the data files hold.
pub fn salvage_state(store: &dyn Store) -> Option<(u64, BTreeMap<String, serde_json::Value>)> {
    let mut candidates = Vec::new();
    if let Ok(Some(last)) = last_checkpoint(store) {
        candidates.push(last.version);
        candidates.extend(last.previous);
    }
    // Without a readable pointer, any checkpoint on disk, newest first.
    let mut listed: Vec<u64> = store
        .list(CHECKPOINT_DIR)
        .unwrap_or_default()
        .iter()
        .filter(|p| p.ends_with(".state.json"))
        .filter_map(|p| version_of(p))
        .collect();
    listed.sort_unstable_by(|a, b| b.cmp(a));
    candidates.extend(listed);
    let from_checkpoint = candidates.into_iter().find_map(|v| {
        let s: StateCheckpoint = read_json(store, &state_checkpoint_path(v), "state").ok()?;
        Some((s.version, s.state.into_owned()))
    });
    let (mut version, mut state) = match from_checkpoint {
        Some(found) => found,
        None => {
            // A lake from before the log: its kept previous manifest.
            let bytes = store.get(PREVIOUS_MANIFEST_PATH).ok()?;
            let m = Manifest::parse(&bytes).ok()?;
            (m.version, m.state)
        }
    };
    for listed in entries_after(store, version).unwrap_or_default() {
        if let Ok(Some((commit, _))) = read_entry(store, listed) {
            state.extend(commit.state);
            version = listed;
        }
    }
    Some((version, state))
}
