//! `dexlake status`: what the lake holds and what its syncs fetched, from the manifest alone.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::target_text;
use crate::Result;
use crate::lake::{Dataset, Lake};
use crate::sync::recorded::Recorded;
use crate::sync::recorded::recorded;
use crate::time_range::TimeRange;

/// What a lake holds, per dataset and per synced target ([`status`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LakeStatus {
    /// The manifest version read.
    pub version: u64,
    /// Time of the latest commit.
    pub committed_at: Option<DateTime<Utc>>,
    /// Every dataset with files or recorded syncs, in documentation order.
    pub datasets: Vec<DatasetStatus>,
}

/// One dataset: its committed files, and each target its syncs fetched.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetStatus {
    /// The dataset.
    pub dataset: Dataset,
    /// Committed data files.
    pub files: u64,
    /// Their size in bytes.
    pub bytes: u64,
    /// Their rows.
    pub rows: u64,
    /// The earliest value of the dataset's time column (from the files' statistics).
    pub first: Option<DateTime<Utc>>,
    /// The latest value of the dataset's time column.
    pub last: Option<DateTime<Utc>>,
    /// What each recorded sync of the dataset fetched, in key order.
    pub targets: Vec<TargetStatus>,
}

/// One target a sync fetched: a swaps or trades stream (token, wallet or pool), a candles or
/// price-history series, or a snapshot's list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetStatus {
    /// The target as `name=value` pairs: `token=T`, `wallet=W`, `token=T interval=60`,
    /// `chain=evm-1 interval=3600 token=A`, `chain=altchain list=<digest>`.
    pub target: String,
    /// Records the stream handed to the lake (swaps and trades; `None` for other datasets and
    /// for streams first synced by a version that did not count them). A record several
    /// streams fetched counts in each.
    pub rows: Option<u64>,
    /// Oldest record time (streams) or oldest covered instant (candles, price history).
    pub first: Option<DateTime<Utc>>,
    /// Newest record time (streams) or newest point (price history).
    pub last: Option<DateTime<Utc>>,
    /// Ranges fetched completely, in order. A stream's first range starts at its first record
    /// (`from` is `None`): a complete run fetches everything back to it.
    pub fetched: Vec<TimeRange>,
    /// Whether `fetched` is known: `false` for a stream last completed by a version that kept
    /// no times (its next sync records them).
    pub fetched_known: bool,
    /// When the target was last synced (`None` for states of older versions).
    pub synced_at: Option<DateTime<Utc>>,
    /// Whether its last run stopped before the end (the next sync resumes it).
    pub interrupted: bool,
    /// Snapshots: fetch time of the last complete snapshot.
    pub snapshot_at: Option<DateTime<Utc>>,
    /// Snapshots: fetch time of an interrupted snapshot (its rows hold part of the list).
    pub partial_snapshot_at: Option<DateTime<Utc>>,
}

impl From<&Recorded> for TargetStatus {
    fn from(r: &Recorded) -> Self {
        TargetStatus {
            target: target_text(&r.target),
            rows: r.rows,
            first: r.first,
            last: r.last,
            fetched: r.fetched.clone(),
            fetched_known: r.fetched_known,
            synced_at: r.synced_at,
            interrupted: r.interrupted,
            snapshot_at: r.snapshot_at,
            partial_snapshot_at: r.partial_snapshot_at,
        }
    }
}

/// What `lake` holds, per dataset and per synced target, read from its manifest (the file
/// list's per-file statistics and the recorded sync states); no data file is opened.
pub fn status(lake: &Lake) -> Result<LakeStatus> {
    let manifest = lake.snapshot()?;
    let mut by_dataset: BTreeMap<Dataset, DatasetStatus> = BTreeMap::new();
    let empty = |dataset| DatasetStatus {
        dataset,
        files: 0,
        bytes: 0,
        rows: 0,
        first: None,
        last: None,
        targets: Vec::new(),
    };
    for entry in manifest.files.values() {
        let d = by_dataset
            .entry(entry.dataset)
            .or_insert_with(|| empty(entry.dataset));
        d.files += 1;
        d.bytes += entry.bytes;
        d.rows += entry.rows;
        d.first = Some(d.first.map_or(entry.min_time, |t| t.min(entry.min_time)));
        d.last = Some(d.last.map_or(entry.max_time, |t| t.max(entry.max_time)));
    }
    for r in recorded(&manifest.state) {
        by_dataset
            .entry(r.dataset)
            .or_insert_with(|| empty(r.dataset))
            .targets
            .push(TargetStatus::from(&r));
    }
    let datasets = Dataset::ALL
        .into_iter()
        .filter_map(|d| by_dataset.remove(&d))
        .collect();
    Ok(LakeStatus {
        version: manifest.version,
        committed_at: manifest.committed_at,
        datasets,
    })
}
