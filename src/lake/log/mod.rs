//! The commit log: which data files are committed (the [`Manifest`]), how it is stored under
//! `<lake>/_dexlake/` so that a commit and a state read cost the same whatever the number of
//! files in the lake, and the journal that makes a commit atomic.
//!
//! - `manifest.rs`: [`Manifest`] and [`FileEntry`], the committed state as of one version;
//! - `commit_log.rs`: the log entries ([`Commit`]), the checkpoints and [`ManifestView`], which
//!   reads, catches up and extends them ([`Manifest::load`] reads the newest through it);
//! - `journal.rs`: the [`Journal`] of the commit in progress and the [`recover`]y after a crash;
//! - `history.rs`: the [`CommitRecord`] of each commit (what `dexlake log` shows), written to
//!   a history file at each checkpoint, and [`read_history`];
//! - `versions.rs`: which versions can still be read ([`AsOf`], [`oldest_readable`]) and the
//!   manifest of one of them ([`manifest_as_of`]), for pinned reads.
//!
//! Imports: the storage ([`Store`](crate::lake::Store)), the layout (every `_dexlake/` path is
//! in `layout.rs`) and [`Dataset`](crate::lake::Dataset); never the writer, the readers or the
//! operations, which build on the log.
//!
//! ```text
//! _dexlake/log/00000000000000000042.json            one commit: files added and removed, state set
//! _dexlake/checkpoint/00000000000000000040.state.json   the sync state as of commit 40
//! _dexlake/checkpoint/00000000000000000040.files.json   the committed files as of commit 40
//! _dexlake/_last_checkpoint.json                     which checkpoint is the newest
//! _dexlake/history/00000000000000000040.json         the records of commits 1 to 40 (never deleted)
//! ```
//!
//! - **A commit** writes one small log entry, `log/<version>.json`, atomically and only if no entry
//!   of that version exists ([`Store::put_new`](crate::lake::Store::put_new)): the commit point.
//!   Before it, the writer lists the entries after its base version, which must be none.
//!   Its size depends on what the commit changes, never on the size of the lake. Writers take the
//!   lake's lock, so the entry is normally free; when it is not (a writer that ignored the lock),
//!   the commit fails with [`Error::CommitConflict`](crate::Error::CommitConflict) instead of
//!   replacing the other's.
//! - **Reading** starts from the newest checkpoint, lists the log entries after it (one listing;
//!   on an object store, one that starts after the checkpoint's version) and applies them in
//!   version order. A reader that already holds a version (every [`Lake`](crate::lake::Lake)
//!   handle keeps the last one it read, shared by its clones) only asks whether the next entry
//!   exists, and applies it if so. Reading takes no lock and writes nothing: the log only grows
//!   and an entry appears whole, so a reader sees the version of the newest entry it reached.
//! - **A lost entry** (deleted by hand, lost by a copy) while later ones exist is refused,
//!   naming the missing version and pointing at `dexlake verify --repair`: by every fresh read
//!   and every commit, which list the log, and by a handle whose next entry is missing while
//!   the one after it exists. Reading on would stop before it, and the next commit would take
//!   its version and have the entries after it applied on top. An entry the newest checkpoint
//!   covers may be missing: readers start from the checkpoint. A missing newest entry cannot
//!   be told from one never written; `verify` then reports its files as untracked.
//! - **The state alone** (cursors, covered ranges) is read from the checkpoint's small
//!   `.state.json` and the entries after it, without the file list, so a job reading its
//!   sync state in a fresh process pays for the state and at most [`MAX_TAIL_ENTRIES`]
//!   entries, not for the files.
//! - **Checkpoints** are written after a commit once the entries since the last checkpoint
//!   number at least [`MIN_TAIL_ENTRIES`] and weigh at least a sixteenth of the file list, or
//!   number [`MAX_TAIL_ENTRIES`]. Writing a checkpoint costs the size of the lake, but
//!   happens at most once per that many bytes of log, so its cost per commit stays flat; a
//!   cold read never applies more than [`MAX_TAIL_ENTRIES`] entries.
//! - **History**: before a checkpoint, the records of the commits since the previous one (what
//!   each added and removed, per dataset, and which state it set) are written to
//!   `history/<version>.json`; a vacuum leaves them, so the history of a long log
//!   is read in a few files (`history.rs`).
//! - **Old versions** stay readable: a checkpoint deletes nothing, and a commit that removes
//!   files (compaction, a rewrite) leaves them on disk, listed in [`Manifest::removed`]. A
//!   version is read from the newest checkpoint at or before it and the entries after that
//!   (`versions.rs`). Only `dexlake vacuum` deletes: the removed files no version within its
//!   retention lists, and the entries and checkpoints older than the checkpoint the oldest
//!   kept version is read from (never the checkpoint before the newest, which `verify
//!   --repair` takes the sync state from when the newest is damaged).
//!
//! Lakes written before the log existed hold a single `_dexlake/manifest.json`; it is read as
//! the checkpoint of its version, and the first commit turns it into a real checkpoint and
//! removes it.
//!
//! A commit runs in this order, under the writer lock:
//! 1. `journal.json` is written, naming the files the commit adds and removes;
//! 2. each new data file is written to a hidden temporary name, synced and renamed into place;
//! 3. the commit's log entry `_dexlake/log/<version>.json` is written (atomically): the commit
//!    point;
//! 4. the journal is deleted; a vacuum's commit deletes the files it names first (files a
//!    commit removes stay on disk for the versions that list them);
//! 5. now and then, a checkpoint of the whole manifest is written after the entry.
//!
//! Recovery (the next writer, or a `verify` that finds the lock free) reads the journal: if the log
//! already holds the commit, it finishes a vacuum's deletions; otherwise it deletes the files the
//! commit had added. Either way every file on disk is committed or retained for an old version. A journal naming anything but data files
//! of the layout is refused before anything is deleted.
//!
//! A manifest that is missing while data folders hold files, any part of it that does not
//! parse, and a log with a lost entry are refused on load; [`Lake::repair`](crate::lake::Lake::repair)
//! (`dexlake verify --repair`) rebuilds it from the files on disk (see `ops/repair.rs`).
//!
//! [`Lake::scan`](crate::lake::Lake::scan) reads only committed files. Readers that glob the
//! folders (DuckDB, polars, pyarrow) see a commit's new files from step 2 on, a moment before the
//! commit point, and after a crash until the next writer, `verify` or `Lake::open` cleans up; they
//! never see a partial file. A compaction's replaced files stay on disk until a vacuum, so a glob
//! reader counts those rows twice: read the committed file list instead (`dexlake views`,
//! `docs/datasets.md`). A reader holding a version reads its files until a vacuum whose retention
//! that version has left.
//!
//! [`MAX_TAIL_ENTRIES`]: commit_log::MAX_TAIL_ENTRIES

mod commit_log;
mod history;
mod journal;
mod manifest;
mod versions;

pub use commit_log::{
    COMPACT, Commit, MIN_TAIL_ENTRIES, ManifestView, last_checkpoint, log_files_before, log_floor,
    newest_named_version, read_entry, salvage_removed, salvage_state, start_over,
};
pub use history::{
    CommitRecord, DatasetChange, History, read_history, write_records as write_history_records,
};
pub use journal::{Journal, Recovery, clear_journal, needs_recovery, read_journal, recover};
pub use manifest::{FileEntry, MANIFEST_FORMAT_VERSION, Manifest, datasets_with_files};
pub use versions::{AsOf, OLDEST_VERSION_KEY, manifest_as_of, oldest_readable};
