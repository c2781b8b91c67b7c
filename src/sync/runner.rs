//! The sync runner, [`Syncer`]: runs a plan's jobs a few at a time, each as the type of its
//! kind ([`JobKind`]), beside the run's committer ([`CommitBuffer`]), then compacts what the
//! run wrote.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;

use super::cancel::CancelToken;
use super::commit::{CommitBuffer, FetchTotals};
use super::config::SyncConfig;
use super::context::JobContext;
use super::events::{SyncEvent, SyncObserver};
use super::jobs::Job;
use super::kinds::{FetchEnd, JobKind};
use super::report::{Compaction, Estimate, JobOutcome, SyncReport};
use super::state::{RunStates, StateKey, SyncStates};
use crate::api::client::Client;
use crate::error::{Error, Result};
use crate::lake::Lake;

/// Runs sync jobs over one client and one lake.
///
/// ```no_run
/// # async fn demo() -> dexlake::Result<()> {
/// use std::sync::Arc;
/// use dexlake::api::client::Client;
/// use dexlake::lake::Lake;
/// use dexlake::sync::{Job, SyncConfig, Syncer};
///
/// let sync = Syncer::new(Client::from_env()?, Arc::new(Lake::open("./lake")?), SyncConfig::default());
/// let jobs = [Job::Swaps { token: Some("TOKEN".into()), wallet: None, pool: None }];
/// let report = sync.run(&jobs).await;
/// println!("{} rows added with {} requests", report.jobs[0].rows_added, report.requests());
/// # Ok(()) }
/// ```
pub struct Syncer {
    client: Client,
    lake: Arc<Lake>,
    config: SyncConfig,
    /// The sync states as a run found them, read once at its start.
    states: RunStates,
}

impl Syncer {
    /// A runner over `client` and `lake`.
    pub fn new(client: Client, lake: Arc<Lake>, config: SyncConfig) -> Self {
        Syncer {
            client,
            lake,
            config,
            states: RunStates::default(),
        }
    }

    /// The client requests go through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The lake written to.
    pub fn lake(&self) -> &Arc<Lake> {
        &self.lake
    }

    /// Runs every job (up to [`SyncConfig::parallel_jobs`] at once) and reports each, in plan
    /// order, with no observer and no cancellation: [`run_with`](Self::run_with) takes both.
    /// A failed job does not stop the others. The jobs' rows are committed in groups (see the
    /// [module docs](super)); at the end the partitions the run wrote are compacted when
    /// [`SyncConfig::compact`] is on.
    pub async fn run(&self, jobs: &[Job]) -> SyncReport {
        self.run_with(jobs, &(), &CancelToken::new()).await
    }

    /// [`run`](Self::run), reporting progress to `observer` and stopping once `cancel` fires.
    ///
    /// Once `cancel` fires, jobs not yet started are not started ([`JobOutcome::NotStarted`],
    /// the lake untouched for them), running jobs stop at their next request, the buffer is
    /// committed once, and nothing is compacted.
    pub async fn run_with(
        &self,
        jobs: &[Job],
        observer: &dyn SyncObserver,
        cancel: &CancelToken,
    ) -> SyncReport {
        let started = Instant::now();
        let before = self.client.metrics();
        // Without a copy (the manifest unreadable) each job reads its state and reports
        // the error itself.
        let lake = Arc::clone(&self.lake);
        if let Ok(Ok(states)) = tokio::task::spawn_blocking(move || lake.states("")).await {
            self.states.set(Some(Arc::new(states)));
        }
        let buffer = CommitBuffer::new(
            jobs.iter().map(|j| (j.describe(), j.dataset())).collect(),
            &self.config,
            &self.lake,
            cancel,
            super::state::merged,
        );
        let fetching = async {
            futures::stream::iter(jobs.iter().enumerate())
                .map(|(i, job)| self.run_job(i, job, observer, cancel, &buffer))
                .buffer_unordered(self.config.parallel_jobs.max(1))
                .for_each(|()| async {})
                .await;
            buffer.close();
            started.elapsed()
        };
        let committing = async {
            let stats = buffer.commit_until_closed(observer).await;
            (stats, started.elapsed())
        };
        let (fetch_elapsed, (stats, commits_elapsed)) = tokio::join!(fetching, committing);
        self.states.set(None);
        let after = self.client.metrics();
        let compaction =
            if self.config.compact && !cancel.is_cancelled() && !stats.partitions.is_empty() {
                Some(self.compact_written(&stats.partitions, observer).await)
            } else {
                None
            };
        SyncReport {
            jobs: buffer.reports(),
            http_requests: after.requests.saturating_sub(before.requests),
            retries: after.retries.saturating_sub(before.retries),
            elapsed: started.elapsed(),
            commits: stats.commits,
            files_added: stats.files_added,
            files_merged: stats.files_merged,
            fetch_elapsed,
            commits_elapsed,
            commit_time: stats.time,
            partitions_written: stats.partitions.len(),
            partitions: stats.partitions,
            compaction,
        }
    }

    /// Compacts `partitions` on the blocking pool and reports it to `observer`: their small
    /// files when the commits merged theirs ([`SyncConfig::merge_small_files`]), every file not
    /// yet full otherwise.
    async fn compact_written(
        &self,
        partitions: &std::collections::BTreeSet<crate::lake::Partition>,
        observer: &dyn SyncObserver,
    ) -> Compaction {
        observer.on_event(SyncEvent::Compacting {
            partitions: partitions.len(),
        });
        let started = Instant::now();
        let lake = Arc::clone(&self.lake);
        let wanted = partitions.clone();
        let small_only = self.config.merge_small_files;
        let result = match tokio::task::spawn_blocking(move || {
            if small_only {
                lake.compact_small_in(&wanted)
            } else {
                lake.compact_partitions(&wanted)
            }
        })
        .await
        {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(source) => Err(Error::Task {
                context: format!("compacting the lake {}", self.lake.root().display()),
                source,
            }),
        };
        let compaction = Compaction {
            partitions: partitions.len(),
            result: result.map_err(Arc::new),
            elapsed: started.elapsed(),
        };
        observer.on_event(SyncEvent::Compacted(compaction.clone()));
        compaction
    }

    /// Runs one job's fetching, handing its rows to `buffer`; its report comes from the buffer
    /// once its last rows are committed.
    async fn run_job(
        &self,
        index: usize,
        job: &Job,
        observer: &dyn SyncObserver,
        cancel: &CancelToken,
        buffer: &CommitBuffer,
    ) {
        if cancel.is_cancelled() {
            buffer.fetch_done(observer, index, FetchTotals::not_started());
            return;
        }
        let expected_requests = self.estimate(job).ok().and_then(|e| e.requests);
        observer.on_event(SyncEvent::JobStarted {
            index,
            job: job.describe(),
            expected_requests,
        });
        let mut ctx = JobContext {
            index,
            client: &self.client,
            config: &self.config,
            states: self.states(),
            observer,
            cancel,
            buffer,
            rows_fetched: 0,
            requests: 0,
            total: None,
            rows_refused: 0,
        };
        let result = match job.validate() {
            Ok(()) => {
                JobKind::of(job, &self.config)
                    .fetch(&StateKey::of(job), &mut ctx)
                    .await
            }
            Err(e) => Err(e),
        };
        let outcome = match result {
            Ok(FetchEnd::Complete) => JobOutcome::Done,
            Ok(FetchEnd::Cancelled) => JobOutcome::Interrupted,
            Err(e) => JobOutcome::Failed(Arc::new(Error::Sync {
                job: job.describe(),
                source: Box::new(e),
            })),
        };
        let totals = FetchTotals {
            rows_fetched: ctx.rows_fetched,
            rows_refused: ctx.rows_refused,
            requests: ctx.requests,
            outcome,
        };
        buffer.fetch_done(observer, index, totals);
    }

    /// A dry run: how many requests the job will make, from the lake's records alone.
    pub fn estimate(&self, job: &Job) -> Result<Estimate> {
        job.validate()?;
        let (requests, note) = JobKind::of(job, &self.config).estimate(
            &StateKey::of(job),
            &self.states(),
            &self.config,
        )?;
        Ok(Estimate {
            job: job.describe(),
            requests,
            note,
        })
    }

    /// The sync states: the run's copy during a run, the lake's otherwise.
    fn states(&self) -> SyncStates<'_> {
        SyncStates {
            lake: &self.lake,
            run: &self.states,
        }
    }
}
