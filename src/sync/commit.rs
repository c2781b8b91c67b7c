//! The group commit: jobs hand their fetched rows and their next states to one shared buffer,
//! and one committer writes the buffer in a single lake transaction when it is big enough, old
//! enough, or the run ends.
//!
//! A job's hand-offs enter the buffer in the order the job hands them off and the whole buffer is
//! committed at once, so a state is never committed without every row handed off before it. A
//! failed commit fails the jobs whose rows it held: their hand-offs still in the buffer are
//! dropped and their later ones refused, so their committed states still match their committed
//! rows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use serde_json::Value;
use tokio::sync::Notify;

use super::cancel::CancelToken;
use super::config::SyncConfig;
use super::events::{SyncEvent, SyncObserver};
use super::report::{JobOutcome, JobReport};
use crate::error::{Error, Result};
use crate::lake::{Dataset, Lake, Partition};

/// Builds the batches of one hand-off; runs on the blocking pool, when the buffer is committed.
pub(crate) type BatchBuilder = Box<dyn FnOnce() -> Result<Vec<(Dataset, RecordBatch)>> + Send>;

/// Rows of one hand-off, converted on the blocking pool while the job goes on fetching.
type Converting = tokio::task::JoinHandle<Result<Vec<(Dataset, RecordBatch)>>>;

/// What a job hands to the buffer: its rows (being converted, off the async workers) and the
/// states that describe them.
struct Handoff {
    job: usize,
    converting: Converting,
    rows: usize,
    states: Vec<(String, Value)>,
    handed_at: Instant,
}

/// What a job did once its fetching ended.
pub(crate) struct FetchTotals {
    pub(crate) rows_fetched: u64,
    pub(crate) rows_refused: u64,
    pub(crate) requests: u64,
    pub(crate) outcome: JobOutcome,
}

impl FetchTotals {
    /// A job the run never started.
    pub(crate) fn not_started() -> Self {
        FetchTotals {
            rows_fetched: 0,
            rows_refused: 0,
            requests: 0,
            outcome: JobOutcome::NotStarted,
        }
    }
}

/// One job's account: what it handed off and what of it was committed.
struct Account {
    job: String,
    dataset: Dataset,
    rows_added: u64,
    /// Hand-offs handed off and not yet committed (nor dropped).
    pending: usize,
    /// The error of a commit that held this job's rows.
    failed: Option<Arc<Error>>,
    fetched: Option<FetchTotals>,
    reported: bool,
}

impl Account {
    fn report(&self) -> JobReport {
        let (rows_fetched, rows_refused, requests, outcome) = match &self.fetched {
            Some(f) => (
                f.rows_fetched,
                f.rows_refused,
                f.requests,
                f.outcome.clone(),
            ),
            None => (0, 0, 0, JobOutcome::NotStarted),
        };
        JobReport {
            job: self.job.clone(),
            dataset: self.dataset,
            rows_added: self.rows_added,
            rows_fetched,
            rows_refused,
            requests,
            outcome: match &self.failed {
                Some(e) => JobOutcome::Failed(Arc::clone(e)),
                None => outcome,
            },
        }
    }
}

/// What the buffer holds: the hand-offs not yet committed, their rows, and every job's account.
struct Contents {
    handoffs: Vec<Handoff>,
    rows: usize,
    accounts: Vec<Account>,
    /// Every job's fetching has ended: nothing more will be handed off.
    closed: bool,
}

/// Figures of a run's commits.
#[derive(Debug, Default)]
pub(crate) struct CommitStats {
    pub(crate) commits: u64,
    pub(crate) files_added: u64,
    /// Committed small files the commits merged with their new rows.
    pub(crate) files_merged: u64,
    pub(crate) time: Duration,
    pub(crate) partitions: BTreeSet<Partition>,
}

/// The shared buffer of one run and the accounts of its jobs.
pub(crate) struct CommitBuffer {
    contents: Mutex<Contents>,
    /// Wakes the committer (a hand-off, the end of the run) and hand-offs waiting for room
    /// (the end of a commit).
    wake: Notify,
    commit_rows: usize,
    max_rows: usize,
    interval: Duration,
    root: PathBuf,
    lake: Arc<Lake>,
    /// How long a commit waits for another writer ([`SyncConfig::lock_timeout`]).
    lock_timeout: Duration,
    /// What the commits are in the lake's history ([`SyncConfig::operation`]).
    operation: &'static str,
    /// Whether the commits merge their partitions' small files ([`SyncConfig::merge_small_files`]).
    merge_small: bool,
    /// Once cancelled, hand-offs no longer wait for room: the committer waits for every job's
    /// last hand-off before its one final commit.
    cancel: CancelToken,
    /// How a hand-off's state joins the one recorded under its key (the kinds decide it; the
    /// runner hands it over, so the commit imports no kind).
    merge: StateMerge,
}

/// How a state handed off under a key joins the one recorded there (committed, or staged
/// earlier in the same commit): `merge(key, recorded, new)` is the state to record.
pub(crate) type StateMerge = fn(&str, Option<&Value>, Value) -> Value;

impl CommitBuffer {
    /// The buffer of a run of `jobs` (description and dataset of each, in plan order).
    pub(crate) fn new(
        jobs: Vec<(String, Dataset)>,
        config: &SyncConfig,
        lake: &Arc<Lake>,
        cancel: &CancelToken,
        merge: StateMerge,
    ) -> Self {
        let commit_rows = config.commit_rows.max(1);
        CommitBuffer {
            contents: Mutex::new(Contents {
                handoffs: Vec::new(),
                rows: 0,
                accounts: jobs
                    .into_iter()
                    .map(|(job, dataset)| Account {
                        job,
                        dataset,
                        rows_added: 0,
                        pending: 0,
                        failed: None,
                        fetched: None,
                        reported: false,
                    })
                    .collect(),
                closed: false,
            }),
            wake: Notify::new(),
            commit_rows,
            max_rows: commit_rows.saturating_mul(4),
            interval: config.commit_interval,
            root: lake.root().to_path_buf(),
            lake: Arc::clone(lake),
            lock_timeout: config.lock_timeout,
            operation: config.operation,
            merge_small: config.merge_small_files,
            cancel: cancel.clone(),
            merge,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Contents> {
        self.contents.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands `rows` rows (built by `build`, which starts at once on the blocking pool) and the
    /// states that describe them to the buffer.
    /// Waits only while the buffer holds four times [`SyncConfig::commit_rows`] (and the run
    /// is not cancelled); fails when a commit that held earlier rows of the job failed.
    pub(crate) async fn hand_off(
        &self,
        job: usize,
        build: BatchBuilder,
        rows: usize,
        states: Vec<(String, Value)>,
    ) -> Result<()> {
        loop {
            let mut notified = pin!(self.wake.notified());
            notified.as_mut().enable();
            {
                let mut buf = self.lock();
                if buf.accounts.get(job).is_some_and(|a| a.failed.is_some()) {
                    return Err(Error::Lake {
                        path: self.root.clone(),
                        message: "a commit holding earlier rows of this job failed".into(),
                    });
                }
                if buf.rows == 0
                    || buf.rows.saturating_add(rows) <= self.max_rows
                    || self.cancel.is_cancelled()
                {
                    buf.rows += rows;
                    if let Some(a) = buf.accounts.get_mut(job) {
                        a.pending += 1;
                    }
                    buf.handoffs.push(Handoff {
                        job,
                        converting: tokio::task::spawn_blocking(build),
                        rows,
                        states,
                        handed_at: Instant::now(),
                    });
                    if buf.rows >= self.commit_rows {
                        self.wake.notify_waiters();
                    }
                    return Ok(());
                }
            }
            tokio::select! {
                () = notified => {}
                () = self.cancel.cancelled() => {}
            }
        }
    }

    /// Records the end of a job's fetching. Its [`SyncEvent::JobFinished`] goes out once its
    /// last rows are committed: at once when it has none waiting in the buffer.
    pub(crate) fn fetch_done(&self, observer: &dyn SyncObserver, job: usize, totals: FetchTotals) {
        let ready = {
            let mut buf = self.lock();
            if let Some(a) = buf.accounts.get_mut(job) {
                a.fetched = Some(totals);
            }
            ready_reports(&mut buf)
        };
        for (index, report) in ready {
            observer.on_event(SyncEvent::JobFinished { index, report });
        }
    }

    /// Every job's fetching has ended: the committer commits what is left and stops.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_waiters();
    }

    /// The reports of every job, in plan order.
    pub(crate) fn reports(&self) -> Vec<JobReport> {
        self.lock().accounts.iter().map(Account::report).collect()
    }

    /// Waits until the buffer is due (big enough, old enough, or the run over) and takes it;
    /// `None` once the run is over and the buffer empty. After a cancellation only the end of
    /// the run makes it due, so the buffer is committed once, when every job has stopped.
    async fn next_due(&self, cancel: &CancelToken) -> Option<Vec<Handoff>> {
        loop {
            let mut notified = pin!(self.wake.notified());
            notified.as_mut().enable();
            let sleep = {
                let mut buf = self.lock();
                if buf.closed && buf.handoffs.is_empty() {
                    return None;
                }
                let cancelled = cancel.is_cancelled();
                let age = buf.handoffs.first().map(|p| p.handed_at.elapsed());
                let due = buf.closed
                    || (!cancelled
                        && (buf.rows >= self.commit_rows
                            || age.is_some_and(|a| a >= self.interval)));
                if due && !buf.handoffs.is_empty() {
                    buf.rows = 0;
                    return Some(std::mem::take(&mut buf.handoffs));
                }
                match age {
                    Some(age) if !cancelled => Some(self.interval.saturating_sub(age)),
                    _ => None,
                }
            };
            match sleep {
                Some(d) => {
                    tokio::select! {
                        () = notified => {}
                        () = tokio::time::sleep(d) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Applies the outcome of one commit to the accounts; returns the reports now ready.
    fn committed(&self, done: CommitOutcome) -> Vec<(usize, JobReport)> {
        let mut buf = self.lock();
        for (job, n) in &done.handoffs {
            if let Some(a) = buf.accounts.get_mut(*job) {
                a.pending = a.pending.saturating_sub(*n);
            }
        }
        let mut failed: Vec<(usize, Error)> = done.build_failures;
        match done.result {
            Ok(summary) => {
                for (tag, rows) in summary.rows_added_by_tag {
                    if let Some(a) = usize::try_from(tag)
                        .ok()
                        .and_then(|i| buf.accounts.get_mut(i))
                    {
                        a.rows_added += rows;
                    }
                }
            }
            Err(e) => {
                let mut jobs = done.handoffs.keys().copied();
                if let Some(first) = jobs.next() {
                    for other in jobs {
                        failed.push((other, shared(&e, &self.root)));
                    }
                    failed.push((first, e));
                }
            }
        }
        let failed_jobs: BTreeSet<usize> = failed.iter().map(|(j, _)| *j).collect();
        for (job, e) in failed {
            if let Some(a) = buf.accounts.get_mut(job)
                && a.failed.is_none()
            {
                a.failed = Some(Arc::new(Error::Sync {
                    job: a.job.clone(),
                    source: Box::new(e),
                }));
            }
        }
        // Later hand-offs of a failed job would commit states past the lost rows: drop them.
        if !failed_jobs.is_empty() {
            let handoffs = std::mem::take(&mut buf.handoffs);
            let mut kept = Vec::with_capacity(handoffs.len());
            let mut rows = 0;
            for p in handoffs {
                if failed_jobs.contains(&p.job) {
                    if let Some(a) = buf.accounts.get_mut(p.job) {
                        a.pending = a.pending.saturating_sub(1);
                    }
                } else {
                    rows += p.rows;
                    kept.push(p);
                }
            }
            buf.handoffs = kept;
            buf.rows = rows;
        }
        let ready = ready_reports(&mut buf);
        drop(buf);
        self.wake.notify_waiters();
        ready
    }
}

/// The reports of jobs whose fetching ended and whose rows are all committed, marked reported.
fn ready_reports(buf: &mut Contents) -> Vec<(usize, JobReport)> {
    let mut out = Vec::new();
    for (i, a) in buf.accounts.iter_mut().enumerate() {
        if !a.reported && a.pending == 0 && a.fetched.is_some() {
            a.reported = true;
            out.push((i, a.report()));
        }
    }
    out
}

/// The error of a commit for another job whose rows it held (errors are not `Clone`): a held
/// lake stays [`Error::LakeLocked`]; anything else becomes a lake error with the same text.
fn shared(e: &Error, root: &std::path::Path) -> Error {
    match e {
        Error::LakeLocked { path } => Error::LakeLocked { path: path.clone() },
        other => {
            let mut message = format!("the commit holding this job's rows failed: {other}");
            let mut source = std::error::Error::source(other);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            Error::Lake {
                path: root.to_path_buf(),
                message,
            }
        }
    }
}

/// The outcome of one commit of the buffer.
struct CommitOutcome {
    /// Hand-offs per job the buffer held (those of jobs whose rows failed to build included).
    handoffs: BTreeMap<usize, usize>,
    /// Jobs whose rows could not be built; their hand-offs were left out of the commit.
    build_failures: Vec<(usize, Error)>,
    result: Result<crate::lake::CommitSummary>,
}

impl CommitBuffer {
    /// The committer of a run: commits the buffer each time it is due, one commit at a
    /// time, reports jobs whose last rows landed, and stops once the run is over and the
    /// buffer committed.
    pub(crate) async fn commit_until_closed(&self, observer: &dyn SyncObserver) -> CommitStats {
        let cancel = &self.cancel;
        let mut stats = CommitStats::default();
        while let Some(handoffs) = self.next_due(cancel).await {
            let started = Instant::now();
            let done = self.commit_handoffs(handoffs, cancel).await;
            stats.time += started.elapsed();
            if let Ok(summary) = &done.result {
                stats.commits += 1;
                stats.files_added += summary.files_added as u64;
                stats.files_merged += summary.files_merged as u64;
                stats.partitions.extend(summary.partitions.iter().cloned());
                observer.on_event(SyncEvent::Committed {
                    rows_added: summary.rows_added.values().sum(),
                    files_added: summary.files_added,
                    elapsed: started.elapsed(),
                });
            }
            for (index, report) in self.committed(done) {
                observer.on_event(SyncEvent::JobFinished { index, report });
            }
        }
        stats
    }

    /// Waits for the hand-offs' rows to be converted and commits them with their states in one
    /// transaction, on the blocking pool. A job whose rows failed to convert is left out, all
    /// its hand-offs with it.
    async fn commit_handoffs(&self, handoffs: Vec<Handoff>, cancel: &CancelToken) -> CommitOutcome {
        let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
        let mut failures: Vec<(usize, Error)> = Vec::new();
        let mut built = Vec::with_capacity(handoffs.len());
        for p in handoffs {
            *counts.entry(p.job).or_default() += 1;
            let batches = match p.converting.await {
                Ok(r) => r,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(source) => Err(Error::Task {
                    context: "converting fetched rows".to_owned(),
                    source,
                }),
            };
            match batches {
                Ok(batches) => built.push((p.job, batches, p.states)),
                Err(e) => {
                    if !failures.iter().any(|(j, _)| *j == p.job) {
                        failures.push((p.job, e));
                    }
                }
            }
        }
        built.retain(|(job, ..)| !failures.iter().any(|(j, _)| j == job));
        let lake = Arc::clone(&self.lake);
        let lock_timeout = self.lock_timeout;
        let operation = (self.operation, self.merge_small);
        let cancel = cancel.clone();
        let merge = self.merge;
        let task = tokio::task::spawn_blocking(move || {
            commit_blocking(&lake, built, (lock_timeout, operation), &cancel, merge)
        });
        let result = match task.await {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(source) => Err(Error::Task {
                context: format!("committing to the lake {}", self.lake.root().display()),
                source,
            }),
        };
        CommitOutcome {
            handoffs: counts,
            build_failures: failures,
            result,
        }
    }
}

/// Converted rows of one job with the states that describe them.
type ConvertedHandoff = (usize, Vec<(Dataset, RecordBatch)>, Vec<(String, Value)>);

/// The blocking part of a commit: wait for the lake (up to `lock_timeout`), write each job's
/// rows under its own tag, set the states in hand-off order (each joined with the one recorded
/// by `merge`), commit as `operation`, merging the small files of the partitions written when
/// `merge_small` is set and the run is not cancelled.
fn commit_blocking(
    lake: &Lake,
    built: Vec<ConvertedHandoff>,
    (lock_timeout, (operation, merge_small)): (Duration, (&str, bool)),
    cancel: &CancelToken,
    merge: StateMerge,
) -> Result<crate::lake::CommitSummary> {
    let mut tx = wait_for_lake(lake, lock_timeout, cancel)?;
    tx.set_operation(operation);
    // After a cancellation the one last commit only adds, so Ctrl-C costs what it did.
    if merge_small && !cancel.is_cancelled() {
        tx.merge_small_files();
    }
    for (job, batches, states) in built {
        for (dataset, batch) in batches {
            if batch.num_rows() > 0 {
                tx.write_tagged(dataset, batch, job as u64)?;
            }
        }
        for (key, value) in states {
            let value = merge(&key, tx.state(&key), value);
            tx.set_state(key, value);
        }
    }
    tx.commit()
}

/// Opens a lake transaction, waiting up to `timeout` for another writer, or up to the lake's
/// own lock timeout from the moment `cancel` fires, whichever ends first. Runs on the blocking
/// pool.
fn wait_for_lake<'l>(
    lake: &'l Lake,
    timeout: Duration,
    cancel: &CancelToken,
) -> Result<crate::lake::Transaction<'l>> {
    // Short attempts, so a cancellation is noticed within one of them.
    const ATTEMPT: Duration = Duration::from_millis(250);
    let start = Instant::now();
    let mut deadline = start.checked_add(timeout);
    let mut cancelled = false;
    loop {
        if !cancelled && cancel.is_cancelled() {
            cancelled = true;
            let cut = Instant::now().checked_add(lake.options().lock_timeout);
            deadline = match (deadline, cut) {
                (Some(d), Some(c)) => Some(d.min(c)),
                (d, c) => d.or(c),
            };
        }
        let remaining = deadline.map_or(ATTEMPT, |d| d.saturating_duration_since(Instant::now()));
        match lake.transaction_within(remaining.min(ATTEMPT)) {
            Err(Error::LakeLocked { .. }) if deadline.is_none_or(|d| Instant::now() < d) => {}
            other => return other,
        }
    }
}
