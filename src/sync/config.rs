//! [`SyncConfig`]: the knobs of a sync run.

use std::time::Duration;

/// Knobs of a sync run. Rate limits and concurrency live in the client's configuration.
#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// Time-range datasets always re-fetch this much of the newest data, because the newest bars
    /// may still change. Default one hour.
    pub recent_window: Duration,
    /// Page size of paged operations (1 to 100). Default 100.
    pub page_limit: u32,
    /// Pages of swaps and trades a job fetches between two hand-offs of its rows (and its
    /// resume cursor) to the run's commit buffer. Default 10.
    pub pages_per_handoff: usize,
    /// The commit buffer is committed once it holds this many rows (counted as received, before
    /// de-duplication). Default 65,536. The buffer holds at most four times this while a
    /// commit runs; jobs handing off more wait for room.
    pub commit_rows: usize,
    /// The commit buffer is committed once its oldest rows are this old, however few. Default
    /// 30 seconds.
    pub commit_interval: Duration,
    /// At the end of a run that was not cancelled, compact the partitions its commits wrote
    /// (see [`merge_small_files`](Self::merge_small_files) for which files). Default on.
    pub compact: bool,
    /// The commits merge the small files of the partitions they write with their new rows
    /// ([`Transaction::merge_small_files`](crate::lake::Transaction::merge_small_files)), so the
    /// run's rows reach files of
    /// [`compact_below_rows`](crate::lake::LakeOptions::compact_below_rows) rows or more as they
    /// are committed, and the compaction at the end merges only the files still under that
    /// ([`Lake::compact_small_in`](crate::lake::Lake::compact_small_in)). Off: each commit adds
    /// its own files and the end compacts every file not yet full
    /// ([`Lake::compact_partitions`](crate::lake::Lake::compact_partitions)). Default on.
    pub merge_small_files: bool,
    /// Bars (candles, price-history points) asked for in one request. Default 1000.
    pub bars_per_request: i64,
    /// Jobs run at once (their requests still share the client's permits). Default 4.
    pub parallel_jobs: usize,
    /// How long a commit waits for another writer to release the lake, holding the buffer's
    /// rows (converted once) all the while; only then do the jobs whose rows it holds fail with
    /// [`Error::LakeLocked`](crate::Error::LakeLocked). Jobs go on fetching meanwhile into the
    /// next buffer (up to its bound). Replaces
    /// [`LakeOptions::lock_timeout`](crate::lake::LakeOptions::lock_timeout) for sync commits,
    /// except after a cancellation, when a commit waits no longer than the lake's own timeout.
    /// Default 10 minutes.
    pub lock_timeout: Duration,
    /// What the run's commits are in the lake's history
    /// ([`Lake::history`](crate::lake::Lake::history)): `sync` by default, `follow` for the
    /// syncs of `dexlake follow`.
    pub operation: &'static str,
}

impl Default for SyncConfig {
    fn default() -> Self {
        SyncConfig {
            recent_window: Duration::from_secs(3600),
            page_limit: 100,
            pages_per_handoff: 10,
            commit_rows: 65_536,
            commit_interval: Duration::from_secs(30),
            compact: true,
            merge_small_files: true,
            bars_per_request: 1000,
            parallel_jobs: 4,
            lock_timeout: Duration::from_secs(600),
            operation: "sync",
        }
    }
}
