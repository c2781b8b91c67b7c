//! What a sync run reports: [`SyncReport`], one [`JobReport`] per job with its [`JobOutcome`],
//! the [`Compaction`] at the end, and a dry run's [`Estimate`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::lake::{Dataset, Partition};

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
    /// The outcome's name in job reports: `done`, `interrupted`, `not started` or `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            JobOutcome::Done => "done",
            JobOutcome::Interrupted => "interrupted",
            JobOutcome::NotStarted => "not started",
            JobOutcome::Failed(_) => "failed",
        }
    }

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
    /// Records refused because they were dated far past the answer that carried them (more
    /// than an hour after its `Date`): not stored, and warned about
    /// ([`SyncEvent::Warning`](super::SyncEvent::Warning)).
    pub rows_refused: u64,
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
    /// Committed small files those commits merged with their new rows (and removed), see
    /// [`SyncConfig::merge_small_files`](super::SyncConfig::merge_small_files).
    pub files_merged: u64,
    /// Time spent committing (building rows, waiting for the lake, writing), not counting the
    /// compaction. Commits run beside the fetching: this is busy time, not a share of
    /// [`elapsed`](Self::elapsed).
    pub commit_time: Duration,
    /// Wall time from the start of the run until every job's fetching had ended.
    pub fetch_elapsed: Duration,
    /// Wall time from the start of the run until its last commit landed: the part after
    /// [`fetch_elapsed`](Self::fetch_elapsed) is committing alone. The compaction follows.
    pub commits_elapsed: Duration,
    /// Partitions the run's commits wrote into.
    pub partitions_written: usize,
    /// Those partitions (for a caller that compacts them itself, as `follow` does).
    pub partitions: BTreeSet<Partition>,
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
