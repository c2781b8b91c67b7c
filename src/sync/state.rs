//! Sync states: the progress each job records in the lake's manifest (cursors, covered ranges,
//! snapshot chunks), read from the run's copy during a run and from the lake otherwise.
//!
//! This is the one place that knows how states are keyed and stored: [`StateKey`] is a
//! state's key (`sync/<dataset>/<target>`, built from a [`Job`]), and each kind's state is one
//! type ([`StreamState`] for swaps and trades, [`CoverState`] for candles and price history,
//! [`SnapshotState`] for snapshots), read and written as JSON only here. The member names and
//! defaults are those of the states older versions recorded, so their states still read.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::jobs::Job;
use super::ranges::{Range, RangeSet};
use crate::error::{Error, Result};
use crate::lake::{Dataset, Lake};

/// The key a job's progress is recorded under in the manifest: `sync/<dataset>/<target>`,
/// where the target names what the job fetches (`token=T,wallet=W`, `pool=P/interval=60`,
/// `evm-1/interval=3600`, `altchain/<digest>`; a price-history job records one state per
/// target under `<job key>/token=A`). Its text is the manifest's key, unchanged across
/// versions.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StateKey {
    dataset: Dataset,
    target: String,
}

impl StateKey {
    /// The key of `job`'s progress.
    pub(crate) fn of(job: &Job) -> StateKey {
        StateKey {
            dataset: job.dataset(),
            target: job.target_name(),
        }
    }

    /// The dataset the job that records the state writes.
    pub(crate) fn dataset(&self) -> Dataset {
        self.dataset
    }

    /// The key of one target (a token or pool) of a price-history job.
    pub(crate) fn history_target(&self, is_pool: bool, address: &str) -> StateKey {
        let name = if is_pool { "pool" } else { "token" };
        StateKey {
            dataset: self.dataset,
            target: format!("{}/{name}={address}", self.target),
        }
    }

    /// Whether `other` is a key under this one (a price-history target of this job).
    fn holds(&self, other: &StateKey) -> bool {
        other.dataset == self.dataset
            && other
                .target
                .strip_prefix(self.target.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// The text every key of `dataset` starts with.
    pub(crate) fn prefix(dataset: Dataset) -> String {
        format!("sync/{}/", dataset.name())
    }

    /// What the job fetched, as `(name, value)` pairs in key order: the filters of a stream
    /// (`token`, `wallet`, `pool`), the series of candles and price history (`token` or
    /// `pool`, `interval`, `chain`), the digest of a snapshot's list (`list`).
    pub(crate) fn target(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (i, segment) in self.target.split('/').enumerate() {
            if segment.contains('=') {
                for pair in segment.split(',') {
                    if let Some((k, v)) = pair.split_once('=') {
                        out.push((k.to_owned(), v.to_owned()));
                    }
                }
            } else if i == 0 {
                out.push(("chain".to_owned(), segment.to_owned()));
            } else {
                out.push(("list".to_owned(), segment.to_owned()));
            }
        }
        out
    }

    /// The value of the target's pair `name`, if it has one.
    pub(crate) fn value(&self, name: &str) -> Option<String> {
        self.target()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// Whether the state records covered time ranges (candles and price history), whose
    /// hand-offs join the recorded ranges instead of replacing them.
    fn records_covers(&self) -> bool {
        matches!(self.dataset, Dataset::Candles | Dataset::PriceHistory)
    }
}

impl fmt::Display for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sync/{}/{}", self.dataset, self.target)
    }
}

impl FromStr for StateKey {
    type Err = Error;

    fn from_str(s: &str) -> Result<StateKey> {
        let parsed = s
            .strip_prefix("sync/")
            .and_then(|rest| rest.split_once('/'))
            .and_then(|(name, target)| Some((name.parse::<Dataset>().ok()?, target)));
        match parsed {
            Some((dataset, target)) => Ok(StateKey {
                dataset,
                target: target.to_owned(),
            }),
            None => Err(Error::Config(format!("{s:?} is not a sync state key"))),
        }
    }
}

/// The state of one kind of job: what [`SyncStates::read`] decodes and [`entry`] encodes.
pub(crate) trait KindState: Serialize + DeserializeOwned + Default {}

impl KindState for StreamState {}
impl KindState for CoverState {}
impl KindState for SnapshotState {}

/// A recorded state, decoded as the type of its key's kind.
#[derive(Debug, Clone)]
pub(crate) enum SyncState {
    /// Swaps and trades.
    Stream(StreamState),
    /// Candles and price history (one state per target).
    Cover(CoverState),
    /// Prices, price stats, token profiles and portfolios.
    Snapshot(SnapshotState),
}

impl SyncState {
    /// The state recorded under `key`, as its kind's type; `None` when it does not decode.
    pub(crate) fn decode(key: &StateKey, value: &Value) -> Option<SyncState> {
        fn any<T: KindState>(v: &Value) -> Option<T> {
            serde_json::from_value(v.clone()).ok()
        }
        match key.dataset {
            Dataset::Swaps | Dataset::Trades => any(value).map(SyncState::Stream),
            Dataset::Candles | Dataset::PriceHistory => any(value).map(SyncState::Cover),
            _ => any(value).map(SyncState::Snapshot),
        }
    }
}

/// The `(key, value)` a hand-off records: `state` under `key`, as the manifest stores it.
pub(crate) fn entry<T: KindState>(key: &impl fmt::Display, state: &T) -> (String, Value) {
    let value = serde_json::to_value(state).expect("sync state types serialise to JSON");
    (key.to_string(), value)
}

/// The state a hand-off records under `key`, given what is recorded there already (committed,
/// or staged earlier in the same commit). The time ranges of candles and price history are a
/// union: jobs of one run read the states as the run found them, so of two jobs of one series
/// (candles over two ranges in one plan), the one committing last would otherwise record only
/// its own ranges. Every other state is its job's own progress and replaces the recorded one.
pub(crate) fn merged(key: &str, recorded: Option<&Value>, new: Value) -> Value {
    let covers = key.parse::<StateKey>().is_ok_and(|k| k.records_covers());
    let Some(recorded) = recorded.filter(|_| covers) else {
        return new;
    };
    let decode = |v: &Value| serde_json::from_value::<CoverState>(v.clone()).ok();
    match (decode(recorded), decode(&new)) {
        (Some(old), Some(mut merged)) => {
            merged.absorb(&old);
            serde_json::to_value(&merged).unwrap_or(new)
        }
        _ => new,
    }
}

/// Position of a swap or trade in the service's newest-first order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) struct EventKey {
    pub(crate) slot: i64,
    pub(crate) id: i64,
}

/// Progress of a newest-first stream (swaps or trades of one filter).
///
/// The members after `count` were added later: a state written before them reads with them
/// absent (`None`), and `dexlake status` reports what they would say as unknown until the
/// stream's next sync records them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct StreamState {
    /// Newest record of the last completed run: everything from there back is in the lake.
    pub(crate) newest: Option<EventKey>,
    /// An interrupted run: where to resume.
    pub(crate) run: Option<StreamRun>,
    /// The service's `count` at the last page seen.
    pub(crate) count: Option<i64>,
    /// End of what the last completed run fetched: every record of the stream before this
    /// instant is in the lake. The service's time (the `Date`) of the run's first answer, never
    /// later; without a `Date`, just after the newest record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) complete_until: Option<DateTime<Utc>>,
    /// What the stream has handed to the lake so far (absent in states of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) held: Option<Held>,
    /// When the stream last handed records or progress to the lake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) synced_at: Option<DateTime<Utc>>,
}

/// The records a stream handed to the lake: how many distinct ones, and their time span.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Held {
    /// Distinct records (a record fetched again, after a refused cursor, on an overlapping
    /// page or twice in one page, counts once).
    pub(crate) rows: u64,
    /// Oldest `block_time` among them.
    pub(crate) first: Option<DateTime<Utc>>,
    /// Newest `block_time` among them.
    pub(crate) last: Option<DateTime<Utc>>,
}

impl Held {
    /// Counts one record not handed to the lake before.
    pub(crate) fn add(&mut self, t: DateTime<Utc>) {
        self.rows += 1;
        self.first = Some(self.first.map_or(t, |f| f.min(t)));
        self.last = Some(self.last.map_or(t, |l| l.max(t)));
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StreamRun {
    /// Cursor of the next page to fetch.
    pub(crate) cursor: String,
    /// Newest record this run has seen.
    pub(crate) top: EventKey,
    /// The run stops at this record (the `newest` of the run before).
    pub(crate) stop: Option<EventKey>,
    /// The service's time (the `Date`) of the run's first answer: the run fetches everything
    /// before it (absent in runs recorded by older versions, and when the service sent no
    /// `Date`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) started_at: Option<DateTime<Utc>>,
    /// Oldest record the run has handed off, and its time: every record of the stream from
    /// just after that time to `started_at` is in the lake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) oldest: Option<(EventKey, DateTime<Utc>)>,
}

/// Time ranges a time-range dataset covers for one target (empty answers included).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct CoverState {
    pub(crate) covered: RangeSet,
    /// Time of the newest point received, in epoch seconds.
    #[serde(default)]
    pub(crate) newest_point: Option<i64>,
    /// When a range was last recorded as covered (absent in states of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) synced_at: Option<DateTime<Utc>>,
}

impl CoverState {
    /// Records `range` as covered, now.
    pub(crate) fn cover(&mut self, range: Range) {
        self.covered.insert(range);
        self.synced_at = Some(Utc::now());
    }

    /// Adds what `other` records: its covered ranges, and its newest point and sync time when
    /// later than these.
    pub(crate) fn absorb(&mut self, other: &CoverState) {
        for &range in other.covered.ranges() {
            self.covered.insert(range);
        }
        self.newest_point = self.newest_point.max(other.newest_point);
        self.synced_at = self.synced_at.max(other.synced_at);
    }
}

/// Progress of a snapshot job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct SnapshotState {
    /// An unfinished snapshot: its fetch time and the chunks already committed.
    pub(crate) run: Option<SnapshotRun>,
    /// Fetch time of the last completed snapshot.
    pub(crate) last_fetched_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SnapshotRun {
    pub(crate) fetched_at: DateTime<Utc>,
    pub(crate) done: BTreeSet<usize>,
    /// For paged snapshots (search): cursor of the next page.
    pub(crate) cursor: Option<String>,
}

impl SnapshotRun {
    /// A new snapshot, fetched now.
    pub(crate) fn start() -> Self {
        SnapshotRun {
            fetched_at: Utc::now(),
            done: BTreeSet::new(),
            cursor: None,
        }
    }
}

/// Every sync state of a lake, as a run found them at its start.
pub(crate) type StateMap = BTreeMap<String, Value>;

/// The sync states a run read once at its start, so that thousands of jobs do not each read
/// the manifest. A job's own keys change only by its own commits, so the copy is its state at
/// its start; runs overlapping on one `Syncer` may see an older state, which makes them fetch
/// again rows the lake already holds, never skip any.
#[derive(Debug, Default)]
pub(crate) struct RunStates {
    current: Mutex<Option<Arc<StateMap>>>,
}

impl RunStates {
    /// Sets (a run starts) or clears (a run ended) the copy.
    pub(crate) fn set(&self, states: Option<Arc<StateMap>>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = states;
    }

    fn get(&self) -> Option<Arc<StateMap>> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Reads sync states: from the run's copy while there is one, from the lake otherwise.
#[derive(Clone, Copy)]
pub(crate) struct SyncStates<'a> {
    pub(crate) lake: &'a Lake,
    pub(crate) run: &'a RunStates,
}

impl SyncStates<'_> {
    /// Every sync state whose key starts with `prefix`.
    fn with_prefix(&self, prefix: &str) -> Result<StateMap> {
        match self.run.get() {
            Some(all) => Ok(all
                .range(prefix.to_owned()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()),
            None => self.lake.states(prefix),
        }
    }

    /// The sync state recorded under `key`; the empty state when none is.
    pub(crate) fn read<T: KindState>(&self, key: &StateKey) -> Result<T> {
        let key = key.to_string();
        let value = match self.run.get() {
            Some(all) => all.get(&key).cloned(),
            None => self.lake.state(&key)?,
        };
        match value {
            None | Some(Value::Null) => Ok(T::default()),
            Some(v) => self.decode(&key, v),
        }
    }

    /// The covered ranges of every target of the price-history job recorded under `key`.
    pub(crate) fn targets(&self, key: &StateKey) -> Result<BTreeMap<StateKey, CoverState>> {
        let mut out = BTreeMap::new();
        for (k, v) in self.with_prefix(&format!("{key}/"))? {
            if v.is_null() {
                continue;
            }
            let state = self.decode(&k, v)?;
            if let Ok(target) = k.parse::<StateKey>()
                && key.holds(&target)
            {
                out.insert(target, state);
            }
        }
        Ok(out)
    }

    /// Decodes the sync state recorded under `key`.
    fn decode<T: DeserializeOwned>(&self, key: &str, value: Value) -> Result<T> {
        serde_json::from_value(value).map_err(|source| Error::LakeDecode {
            path: self.lake.root().to_path_buf(),
            what: format!("sync state {key} is not valid"),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{StateKey, merged as merged_state};
    use crate::sync::Job;

    fn cover(ranges: &[(i64, i64)], newest: i64) -> serde_json::Value {
        json!({
            "covered": ranges.iter().map(|&(s, e)| json!({"start": s, "end": e})).collect::<Vec<_>>(),
            "newest_point": newest,
        })
    }

    #[test]
    fn covered_ranges_of_one_key_add_up_and_other_states_replace() {
        let recorded = cover(&[(0, 100)], 90);
        let new = cover(&[(200, 300)], 290);
        for key in [
            "sync/candles/token=T/interval=60",
            "sync/price_history/evm-1/abc/token=T",
        ] {
            let merged = merged_state(key, Some(&recorded), new.clone());
            assert_eq!(
                merged["covered"],
                cover(&[(0, 100), (200, 300)], 0)["covered"]
            );
            assert_eq!(merged["newest_point"], 290);
            // The earlier state's newer point stays.
            let merged = merged_state(key, Some(&new), recorded.clone());
            assert_eq!(merged["newest_point"], 290);
            assert_eq!(merged_state(key, None, new.clone()), new);
        }
        // A stream's or a snapshot's state is its job's progress: replaced.
        for key in ["sync/swaps/token=T", "sync/prices/evm-1/x"] {
            assert_eq!(merged_state(key, Some(&recorded), new.clone()), new);
        }
        // A value that is not a coverage state is kept as given.
        let odd = json!({"cursor": 3});
        assert_eq!(
            merged_state(
                "sync/candles/token=T/interval=60",
                Some(&recorded),
                odd.clone()
            ),
            odd
        );
    }

    #[test]
    fn keys_read_back_as_written_and_name_their_targets() {
        for text in [
            "sync/swaps/token=T,wallet=W",
            "sync/candles/pool=P/interval=60",
            "sync/price_history/evm-1/interval=3600/token=A",
            "sync/token_profiles/altchain/00ff",
        ] {
            let key: StateKey = text.parse().expect("a state key");
            assert_eq!(key.to_string(), text);
        }
        let pairs = |text: &str| {
            let key: StateKey = text.parse().expect("a state key");
            key.target()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(pairs("sync/swaps/token=T,wallet=W"), "token=T wallet=W");
        assert_eq!(
            pairs("sync/price_history/evm-1/interval=60/token=A"),
            "chain=evm-1 interval=60 token=A"
        );
        assert_eq!(
            pairs("sync/portfolios/altchain/00ff"),
            "chain=altchain list=00ff"
        );
        for bad in ["follow/bars/60/pool=P", "sync/nope/token=T", "sync/swaps"] {
            assert!(bad.parse::<StateKey>().is_err(), "{bad}");
        }
        let job = Job::PriceHistory {
            chain_id: 1,
            tokens: vec!["A".into()],
            pools: vec![],
            interval: 3600,
            from: chrono::DateTime::UNIX_EPOCH,
            to: None,
        };
        let key = StateKey::of(&job);
        assert_eq!(key.to_string(), job.state_key());
        assert_eq!(
            key.history_target(false, "A").to_string(),
            "sync/price_history/evm-1/interval=3600/token=A"
        );
    }
}
