//! Progress of a sync as it happens: [`SyncEvent`]s sent to a [`SyncObserver`].

use std::time::Duration;

use super::report::{Compaction, JobReport};

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
    /// A job met something it did not take as the service sent it (records dated far past
    /// the answer that carried them, refused); it goes on.
    Warning {
        /// Index of the job in the plan.
        index: usize,
        /// What was met and what the job did about it.
        message: String,
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
