//! `vacuum`: deletes what no version within a retention needs: the files commits removed
//! (compaction, rewrites) that no kept version lists, and the log older than the checkpoint
//! the oldest kept version is read from.
//!
//! The oldest kept version is the last one committed at or before `now − retain` (the version
//! a reader pinned to that time reads); every version from it on stays readable. A retained
//! file removed at version `r` is listed by the versions before `r` only, so it is deleted when
//! `r` is at or before the oldest kept version. The vacuum is a commit of the log (operation
//! `vacuum`) that forgets the files it deletes and records the oldest kept version; its journal
//! names the files, so a crash after the commit point has recovery finish the deletions, and a
//! crash before it deletes nothing. A reader pinned to a kept version reads every file it
//! lists, whatever vacuums run meanwhile; one pinned to a version the retention left is refused
//! by name when it pins (its files may be gone).

use std::time::Duration;

use chrono::Utc;

use crate::lake::base::Base;
use crate::lake::log::{self, Commit, Journal, OLDEST_VERSION_KEY};
use crate::{Error, Result};

/// The [`Commit::operation`] of a vacuum.
pub const VACUUM: &str = "vacuum";

/// The retention `dexlake vacuum` and `dexlake follow` use unless told otherwise: a week.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 86_400);

/// What a vacuum keeps and whether it deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VacuumOptions {
    /// Every version committed within this time before now stays readable, and the last one
    /// committed before it.
    pub retain: Duration,
    /// Report what would be deleted, delete nothing and commit nothing.
    pub dry_run: bool,
}

impl Default for VacuumOptions {
    fn default() -> Self {
        VacuumOptions {
            retain: DEFAULT_RETENTION,
            dry_run: false,
        }
    }
}

/// What [`Lake::vacuum`](crate::lake::Lake::vacuum) did (or, on a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VacuumReport {
    /// The oldest version that stays readable.
    pub oldest_version: u64,
    /// Data files deleted (or that would be), with their sizes in bytes.
    pub files: Vec<(String, u64)>,
    /// Log entries and checkpoints deleted (or that would be).
    pub log_files: usize,
    /// Files still retained for the kept versions.
    pub retained: usize,
    /// The version of the vacuum's commit; `None` on a dry run or when there was nothing to do.
    pub version: Option<u64>,
    /// Whether this was a dry run.
    pub dry_run: bool,
}

impl VacuumReport {
    /// Bytes of the data files deleted (or that would be).
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|(_, b)| b).sum()
    }
}

/// Runs [`Lake::vacuum`](crate::lake::Lake::vacuum) under the writer lock.
pub(crate) fn vacuum(lake: &Base, options: VacuumOptions) -> Result<VacuumReport> {
    let _lock = lake.lock()?;
    let store = lake.store();
    log::recover(store)?;
    let manifest = lake.snapshot()?;
    let retain =
        chrono::Duration::from_std(options.retain).map_err(|_| Error::InvalidArgument {
            argument: "retention".into(),
            reason: format!("{:?} is too long", options.retain),
        })?;
    let cutoff = Utc::now() - retain;
    let kept_before = log::oldest_readable(store, &manifest)?;
    let history = log::read_history(store, manifest.version)?;
    // The last version committed at or before the cutoff; every later one stays.
    let at_cutoff = history
        .records
        .iter()
        .find(|r| r.committed_at.is_none_or(|t| t <= cutoff))
        .map(|r| r.version);
    let oldest = at_cutoff.unwrap_or(kept_before).max(kept_before);
    let files = manifest
        .removed
        .iter()
        .filter(|&(_, &removed_at)| removed_at <= oldest)
        .map(|(path, _)| {
            let bytes = store.head(path)?.unwrap_or(0);
            Ok((path.clone(), bytes))
        })
        .collect::<Result<Vec<_>>>()?;
    let log_files = match log::log_floor(store, oldest)? {
        Some(keep) => log::log_files_before(store, keep)?,
        None => Vec::new(),
    };
    let mut report = VacuumReport {
        oldest_version: oldest,
        retained: manifest.removed.len() - files.len(),
        files,
        log_files: log_files.len(),
        version: None,
        dry_run: options.dry_run,
    };
    let moved = oldest != kept_before;
    if options.dry_run || (report.files.is_empty() && report.log_files == 0 && !moved) {
        return Ok(report);
    }
    let version = manifest.version + 1;
    let forget: Vec<String> = report.files.iter().map(|(p, _)| p.clone()).collect();
    Journal {
        version,
        add: Vec::new(),
        remove: Vec::new(),
        delete: forget.clone(),
    }
    .store(store)?;
    let mut commit = Commit {
        version,
        committed_at: Some(Utc::now()),
        operation: Some(VACUUM.to_owned()),
        forget: forget.clone(),
        ..Commit::default()
    };
    commit
        .state
        .insert(OLDEST_VERSION_KEY.to_owned(), serde_json::json!(oldest));
    lake.append(commit)?;
    for path in &forget {
        store.delete(path)?;
    }
    log::clear_journal(store)?;
    for path in &log_files {
        store.delete(path)?;
    }
    report.version = Some(version);
    Ok(report)
}
