//! Sync: incremental, resumable, rate-aware fetch of every dataset into the lake.
//!
//! A [`Syncer`] runs [`Job`]s over one [`Client`](crate::api::Client), so all jobs share its
//! rate limit and concurrency permits, and one [`Lake`](crate::lake::Lake). Jobs do not commit
//! on their own: each hands its fetched rows, with the progress state that describes them, to
//! one buffer shared by the run, and goes on fetching. The buffer is committed in one lake
//! transaction when it holds [`SyncConfig::commit_rows`] rows, when its oldest rows are
//! [`SyncConfig::commit_interval`] old, at the end of the run, and once after a cancellation,
//! so a run of many small jobs writes few, large files. A job's progress is committed only
//! with every row it handed off before, so an interrupted sync (Ctrl-C, SIGKILL, a failed
//! request) resumes where the last commit left it, with no duplicates and no gaps (a kill loses
//! at most the uncommitted buffer, which the next run fetches again):
//!
//! - swaps and trades come newest first: a job pages until it reaches the newest record an
//!   earlier run committed, and an interrupted run resumes from its recorded cursor;
//! - candles and price history record the time ranges they cover (empty answers included) and
//!   ask only for what is missing, always re-fetching the most recent
//!   [`SyncConfig::recent_window`] because the newest bars may still change;
//! - snapshots (prices, price stats, profiles, portfolios) carry the time they were fetched; an
//!   interrupted snapshot resumes with the same fetch time and fetches only its missing chunks.
//!
//! At the end of a run that was not cancelled, the partitions its commits wrote are compacted
//! ([`SyncConfig::compact`]), so the lake reads as fast as a compacted one.
//!
//! The library never prints on its own: progress goes to a [`SyncObserver`]. [`ProgressBars`] is
//! the observer that draws it on stderr, for the CLI and for programs that want the same bars.

mod commit;
mod context;
mod jobs;
mod kinds;
mod progress;
pub mod ranges;
mod runner;
mod state;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

pub use jobs::{Job, MAX_BARS_PER_JOB, MAX_INTERVAL_SECONDS, Plan, read_search_request};
pub use progress::ProgressBars;
pub use runner::Syncer;

use crate::lake::Dataset;

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
    /// ([`Lake::compact_partitions`](crate::lake::Lake::compact_partitions)). Default on.
    pub compact: bool,
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
            bars_per_request: 1000,
            parallel_jobs: 4,
            lock_timeout: Duration::from_secs(600),
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone)]
pub enum JobOutcome {
    /// Everything asked for is in the lake.
    Done,
    /// Stopped by cancellation after committing what it had fetched.
    Interrupted,
    /// Not started: the run was cancelled first. The lake was not read or written for it.
    NotStarted,
    /// Failed after the client's retries, or because a commit holding its rows failed (those
    /// rows are not in the lake; its recorded progress matches the rows that are, so the next
    /// run fetches them again). What was committed before stays. The error is
    /// [`Error::Sync`](crate::Error::Sync) naming the job, with the cause as its `source`
    /// (ask it [`api_status`](crate::Error::api_status), or walk its sources).
    Failed(Arc<crate::Error>),
}

impl PartialEq for JobOutcome {
    /// `Done`, `Interrupted` and `NotStarted` equal themselves; two failures are equal when they
    /// share the same error (errors are not comparable by value).
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (JobOutcome::Done, JobOutcome::Done) => true,
            (JobOutcome::Interrupted, JobOutcome::Interrupted) => true,
            (JobOutcome::NotStarted, JobOutcome::NotStarted) => true,
            (JobOutcome::Failed(a), JobOutcome::Failed(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl JobOutcome {
    /// The error of a failed job.
    pub fn error(&self) -> Option<&crate::Error> {
        match self {
            JobOutcome::Failed(e) => Some(e),
            _ => None,
        }
    }
}

/// What one job did.
#[derive(Debug, Clone, PartialEq)]
pub struct JobReport {
    /// The job's description.
    pub job: String,
    /// The dataset written.
    pub dataset: Dataset,
    /// Rows of this job new to the lake, once committed (the commit de-duplicates across the
    /// whole buffer and counts each job's own rows).
    pub rows_added: u64,
    /// Records received from the service (before de-duplication).
    pub rows_fetched: u64,
    /// Requests the job asked the client for (retries not included).
    pub requests: u64,
    /// How it ended.
    pub outcome: JobOutcome,
}

/// What a whole sync did.
#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    /// One report per job, in plan order.
    pub jobs: Vec<JobReport>,
    /// Requests sent by the client during the run, retries included.
    pub http_requests: u64,
    /// Retries made by the client during the run.
    pub retries: u64,
    /// Wall time of the run, compaction included.
    pub elapsed: Duration,
    /// Commits of the run's buffer that landed.
    pub commits: u64,
    /// Data files those commits added.
    pub files_added: u64,
    /// Time spent committing (building rows, waiting for the lake, writing), not counting the
    /// compaction.
    pub commit_time: Duration,
    /// Partitions the run's commits wrote into.
    pub partitions_written: usize,
    /// The compaction of those partitions at the end of the run: `None` when it did not run
    /// (turned off, cancelled run, nothing written).
    pub compaction: Option<Compaction>,
}

/// The compaction at the end of a sync run.
#[derive(Debug, Clone)]
pub struct Compaction {
    /// Partitions asked for (those the run wrote).
    pub partitions: usize,
    /// What it did, or why it failed (the synced rows are committed either way).
    pub result: std::result::Result<crate::lake::CompactReport, Arc<crate::Error>>,
    /// How long it took.
    pub elapsed: Duration,
}

impl SyncReport {
    /// Rows added per dataset.
    pub fn rows_added(&self) -> BTreeMap<Dataset, u64> {
        let mut out = BTreeMap::new();
        for j in &self.jobs {
            *out.entry(j.dataset).or_insert(0) += j.rows_added;
        }
        out
    }

    /// Requests asked for by all jobs (retries not included).
    pub fn requests(&self) -> u64 {
        self.jobs.iter().map(|j| j.requests).sum()
    }

    /// Whether any job failed.
    pub fn any_failed(&self) -> bool {
        self.jobs
            .iter()
            .any(|j| matches!(j.outcome, JobOutcome::Failed(_)))
    }

    /// Whether any job was interrupted or not started.
    pub fn interrupted(&self) -> bool {
        self.jobs
            .iter()
            .any(|j| matches!(j.outcome, JobOutcome::Interrupted | JobOutcome::NotStarted))
    }

    /// Rows added by all jobs.
    pub fn total_rows_added(&self) -> u64 {
        self.jobs.iter().map(|j| j.rows_added).sum()
    }
}

/// A dry run's estimate for one job.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// The job's description.
    pub job: String,
    /// Requests the job will make, when that can be known before asking.
    pub requests: Option<u64>,
    /// How the figure was reached, or why it is unknown.
    pub note: String,
}

/// Progress of a sync, as it happens.
#[derive(Debug, Clone)]
pub enum SyncEvent {
    /// A job started.
    JobStarted {
        /// Index of the job in the plan.
        index: usize,
        /// Its description.
        job: String,
        /// Requests it is expected to make, when known.
        expected_requests: Option<u64>,
    },
    /// A job received data.
    Progress {
        /// Index of the job in the plan.
        index: usize,
        /// Records received so far.
        rows_fetched: u64,
        /// Requests made so far.
        requests: u64,
        /// Total records expected (the service's `count`), when known.
        total: Option<u64>,
    },
    /// A job could not resume where an earlier run stopped and started again (the service no
    /// longer accepts the recorded cursor, which may expire).
    Restarted {
        /// Index of the job in the plan.
        index: usize,
        /// What was started again and why.
        reason: String,
    },
    /// A job ended and its last rows are committed (or it failed, or was not started).
    JobFinished {
        /// Index of the job in the plan.
        index: usize,
        /// What it did.
        report: JobReport,
    },
    /// The commit buffer was committed.
    Committed {
        /// Rows new to the lake.
        rows_added: u64,
        /// Data files written.
        files_added: usize,
        /// How long the commit took (building rows, waiting for the lake, writing).
        elapsed: Duration,
    },
    /// The partitions the run wrote are being compacted.
    Compacting {
        /// How many.
        partitions: usize,
    },
    /// The compaction at the end of the run ended.
    Compacted(Compaction),
}

/// Receives [`SyncEvent`]s (progress bars, log lines). Called from async tasks: keep it quick.
pub trait SyncObserver: Send + std::marker::Sync {
    /// One event.
    fn on_event(&self, event: SyncEvent);
}

impl SyncObserver for () {
    fn on_event(&self, _event: SyncEvent) {}
}

/// Cooperative cancellation: once cancelled, a sync starts no more jobs, drops the requests in
/// flight, commits what its jobs fetched (once), and stops. Clones share one flag.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: Arc<(AtomicBool, Notify)>,
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every holder to stop.
    pub fn cancel(&self) {
        self.inner.0.store(true, Ordering::SeqCst);
        self.inner.1.notify_waiters();
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.0.load(Ordering::SeqCst)
    }

    /// Resolves once cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.inner.1.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}
