//! What the recorded sync states say was fetched, kind by kind, in terms that need no
//! knowledge of the states' format: per target, the time ranges fetched completely, the
//! records handed to the lake and when it was last synced. Read by `dexlake status` and by
//! the coverage the analytics report (`crate::coverage`) and `dexlake follow`. The states are
//! read through `sync::state`, the one place that knows their format.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use super::jobs::Job;
use super::ranges::from_epoch_seconds;
use super::state::{StateKey, StreamState, SyncState};
use crate::error::Result;
use crate::lake::{Dataset, Lake};
use crate::time_range::TimeRange;

/// What one sync state says was fetched.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recorded {
    /// The state's key in the manifest (`sync/swaps/token=...`).
    pub(crate) key: StateKey,
    /// The dataset the job wrote.
    pub(crate) dataset: Dataset,
    /// What the job fetched, as `(name, value)` pairs in key order: the filters of a stream
    /// (`token`, `wallet`, `pool`), the series of candles and price history (`token` or
    /// `pool`, `interval`, `chain`), the digest of a snapshot's list (`list`).
    pub(crate) target: Vec<(String, String)>,
    /// Ranges fetched completely, sorted and disjoint.
    pub(crate) fetched: Vec<TimeRange>,
    /// Whether `fetched` is known: a stream recorded by an older version says only that it
    /// was fetched, not up to when.
    pub(crate) fetched_known: bool,
    /// Records handed to the lake (streams first fetched by this version).
    pub(crate) rows: Option<u64>,
    /// Oldest record time handed to the lake (streams), or oldest covered instant (series).
    pub(crate) first: Option<DateTime<Utc>>,
    /// Newest record time handed to the lake (streams), or newest point (price history).
    pub(crate) last: Option<DateTime<Utc>>,
    /// When the target was last synced (absent in states of older versions).
    pub(crate) synced_at: Option<DateTime<Utc>>,
    /// Whether the last run stopped before the end (a resumable run is recorded).
    pub(crate) interrupted: bool,
    /// Snapshots: the fetch time of the last complete snapshot.
    pub(crate) snapshot_at: Option<DateTime<Utc>>,
    /// Snapshots: the fetch time of an interrupted snapshot, whose rows are in the lake but
    /// not all of them.
    pub(crate) partial_snapshot_at: Option<DateTime<Utc>>,
}

/// Every recorded sync state among `states` (the manifest's state map), in key order. A state
/// that does not parse is skipped (the sync itself refuses it, naming it).
pub(crate) fn recorded(states: &BTreeMap<String, Value>) -> Vec<Recorded> {
    states
        .iter()
        .filter_map(|(key, value)| one(key, value))
        .collect()
}

/// What the lake's recorded states of `dataset` say was fetched, in key order.
pub(crate) fn in_dataset(lake: &Lake, dataset: Dataset) -> Result<Vec<Recorded>> {
    Ok(recorded(&lake.states(&StateKey::prefix(dataset))?))
}

/// What the lake's recorded states of `jobs` say was fetched (jobs never synced have none).
pub(crate) fn of_jobs<'a>(
    lake: &Lake,
    jobs: impl IntoIterator<Item = &'a Job>,
) -> Result<Vec<Recorded>> {
    let mut states = BTreeMap::new();
    for job in jobs {
        let key = StateKey::of(job).to_string();
        if let Some(v) = lake.state(&key)? {
            states.insert(key, v);
        }
    }
    Ok(recorded(&states))
}

fn one(key: &str, value: &Value) -> Option<Recorded> {
    let key: StateKey = key.parse().ok()?;
    let dataset = key.dataset();
    let state = SyncState::decode(&key, value)?;
    let mut r = Recorded {
        target: key.target(),
        key,
        dataset,
        fetched: Vec::new(),
        fetched_known: true,
        rows: None,
        first: None,
        last: None,
        synced_at: None,
        interrupted: false,
        snapshot_at: None,
        partial_snapshot_at: None,
    };
    match state {
        SyncState::Stream(state) => stream(&mut r, &state),
        SyncState::Cover(state) => {
            // A price-history job keeps one state per target under its own key.
            r.fetched = state
                .covered
                .ranges()
                .iter()
                .map(|x| {
                    TimeRange::until(Some(from_epoch_seconds(x.start)), from_epoch_seconds(x.end))
                })
                .collect();
            r.first = r.fetched.first().and_then(|s| s.from);
            r.last = state.newest_point.map(from_epoch_seconds);
            r.synced_at = state.synced_at;
        }
        SyncState::Snapshot(state) => {
            r.snapshot_at = state.last_fetched_at;
            r.partial_snapshot_at = state.run.as_ref().map(|run| run.fetched_at);
            r.interrupted = state.run.is_some();
            r.synced_at = state.last_fetched_at.max(r.partial_snapshot_at);
        }
    }
    Some(r)
}

/// A stream's coverage: everything before the end of its last complete run, and what an
/// interrupted run fetched, from just after its oldest record to its start.
fn stream(r: &mut Recorded, state: &StreamState) {
    let mut spans: Vec<TimeRange> = Vec::new();
    if let Some(until) = state.complete_until {
        spans.push(TimeRange::until(None, until));
    } else if state.newest.is_some() {
        // Complete once, recorded by a version that kept no times.
        r.fetched_known = false;
    }
    if let Some(run) = &state.run {
        r.interrupted = true;
        match (run.oldest, run.started_at) {
            (Some((_, oldest)), Some(start)) => {
                spans.push(TimeRange::until(
                    Some(oldest + Duration::microseconds(1)),
                    start,
                ));
            }
            (None, Some(_)) => {}
            _ => r.fetched_known = false,
        }
    }
    r.fetched = TimeRange::merged(spans);
    if let Some(held) = state.held {
        r.rows = Some(held.rows);
        r.first = held.first;
        r.last = held.last;
    }
    r.synced_at = state.synced_at;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_state_of_an_older_version_reads_with_its_coverage_unknown() {
        let old = serde_json::json!({"newest": {"slot": 5, "id": 9}, "run": null, "count": 10});
        let r = one("sync/swaps/token=T", &old).expect("an old state reads");
        assert!(!r.fetched_known);
        assert_eq!(r.rows, None);
        assert!(r.fetched.is_empty());
    }
}
