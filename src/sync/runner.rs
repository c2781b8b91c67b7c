//! The sync runner: turns each [`Job`] into the work of its kind once, runs it, and hands
//! everything it fetches to the run's commit buffer (`group.rs`) through one helper. The kinds
//! live beside it: `streams.rs` (swaps, trades), `series.rs` (candles, price history),
//! `snapshots.rs` (prices, price stats, EVM profiles, portfolios) and `search.rs` (altchain
//! profiles).

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use chrono::{DateTime, TimeZone, Utc};
use futures::StreamExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::group::Group;
use super::jobs::Job;
use super::series::HistoryJob;
use super::snapshots::SnapshotRequest;
use super::{
    CancelToken, Compaction, Estimate, JobOutcome, SyncConfig, SyncEvent, SyncObserver, SyncReport,
};
use crate::api::client::Client;
use crate::api::requests::{SwapsRequest, TradesRequest};
use crate::error::{Error, Result};
use crate::lake::convert::{CandleSeries, ToBatch};
use crate::lake::{Dataset, Lake};

/// Runs sync jobs over one client and one lake.
///
/// ```no_run
/// # async fn demo() -> dexlake::Result<()> {
/// use std::sync::Arc;
/// use dexlake::api::client::Client;
/// use dexlake::lake::Lake;
/// use dexlake::sync::{CancelToken, Job, SyncConfig, Syncer};
///
/// let sync = Syncer::new(Client::from_env()?, Arc::new(Lake::open("./lake")?), SyncConfig::default());
/// let jobs = [Job::Swaps { token: Some("TOKEN".into()), wallet: None, pool: None }];
/// let report = sync.run(&jobs, &(), &CancelToken::new()).await;
/// println!("{} rows added with {} requests", report.jobs[0].rows_added, report.requests());
/// # Ok(()) }
/// ```
pub struct Syncer {
    pub(super) client: Client,
    pub(super) lake: Arc<Lake>,
    pub(super) config: SyncConfig,
    /// The sync states as a run found them, read once at its start so that thousands of jobs
    /// do not each read the manifest. A job's own keys change only by its own commits, so the
    /// snapshot is its state at its start; runs overlapping on one `Syncer` may see an older
    /// state, which makes them fetch again rows the lake already holds, never skip any.
    states: std::sync::Mutex<Option<Arc<std::collections::BTreeMap<String, Value>>>>,
}

/// What a job is, decided once: the work of its kind with exactly what that work needs.
enum Work<'a> {
    Swaps(SwapsRequest),
    Trades(TradesRequest),
    Candles {
        series: CandleSeries,
        from: DateTime<Utc>,
        to: Option<DateTime<Utc>>,
    },
    PriceHistory(HistoryJob<'a>),
    Snapshot(Vec<SnapshotRequest>),
    Search(&'a crate::api::search::SearchRequest),
}

/// One job in progress: counters and where to report them.
pub(super) struct JobCtx<'a> {
    pub(super) index: usize,
    pub(super) observer: &'a dyn SyncObserver,
    pub(super) cancel: &'a CancelToken,
    /// The run's commit buffer.
    group: &'a Group,
    pub(super) rows_fetched: u64,
    pub(super) requests: u64,
    pub(super) total: Option<u64>,
}

impl JobCtx<'_> {
    /// Reports that the job starts again from the top, and why.
    pub(super) fn restarted(&self, reason: String) {
        self.observer.on_event(SyncEvent::Restarted {
            index: self.index,
            reason,
        });
    }

    /// Awaits one request, or `None` as soon as the run is cancelled: the request in flight is
    /// dropped, and since nothing of it was handed off, the job's recorded progress still
    /// points at it.
    pub(super) async fn unless_cancelled<T>(&self, request: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            answer = request => Some(answer),
        }
    }

    /// Counts one answer of `rows` records and reports the progress.
    pub(super) fn fetched(&mut self, rows: usize) {
        self.requests += 1;
        self.rows_fetched += rows as u64;
        self.observer.on_event(SyncEvent::Progress {
            index: self.index,
            rows_fetched: self.rows_fetched,
            requests: self.requests,
            total: self.total,
        });
    }
}

/// Builds the batches of one hand-off; runs on the blocking pool, when the buffer is committed.
pub(super) type BatchBuilder = Box<dyn FnOnce() -> Result<Vec<(Dataset, RecordBatch)>> + Send>;

/// `Ok(true)`: the job got everything; `Ok(false)`: cancelled after handing off what it
/// fetched.
pub(super) type Finished = bool;

pub(super) fn ts(t: DateTime<Utc>) -> i64 {
    t.timestamp()
}

pub(super) fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).single().unwrap_or_default()
}

pub(super) fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("sync state types serialise to JSON")
}

impl Syncer {
    /// A runner over `client` and `lake`.
    pub fn new(client: Client, lake: Arc<Lake>, config: SyncConfig) -> Self {
        Syncer {
            client,
            lake,
            config,
            states: std::sync::Mutex::new(None),
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
    /// order. A failed job does not stop the others. The jobs' rows are committed in groups
    /// (see the [module docs](super)); at the end, unless cancelled, the partitions the run
    /// wrote are compacted when [`SyncConfig::compact`] is on.
    ///
    /// Once `cancel` fires, jobs not yet started are not started ([`JobOutcome::NotStarted`],
    /// the lake untouched for them), running jobs stop at their next request, and the buffer is
    /// committed once.
    pub async fn run(
        &self,
        jobs: &[Job],
        observer: &dyn SyncObserver,
        cancel: &CancelToken,
    ) -> SyncReport {
        let started = Instant::now();
        let before = self.client.metrics();
        // Without a snapshot (the manifest unreadable) each job reads its state and reports
        // the error itself.
        let lake = Arc::clone(&self.lake);
        if let Ok(Ok(states)) = tokio::task::spawn_blocking(move || lake.states("")).await {
            self.set_states(Some(Arc::new(states)));
        }
        let group = Group::new(
            jobs.iter().map(|j| (j.describe(), j.dataset())).collect(),
            &self.config,
            &self.lake,
            cancel,
        );
        let fetching = async {
            futures::stream::iter(jobs.iter().enumerate())
                .map(|(i, job)| self.run_job(i, job, observer, cancel, &group))
                .buffer_unordered(self.config.parallel_jobs.max(1))
                .for_each(|()| async {})
                .await;
            group.close();
        };
        let ((), stats) = tokio::join!(fetching, self.committer(&group, observer, cancel));
        self.set_states(None);
        let after = self.client.metrics();
        let compaction =
            if self.config.compact && !cancel.is_cancelled() && !stats.partitions.is_empty() {
                Some(self.compact_written(&stats.partitions, observer).await)
            } else {
                None
            };
        SyncReport {
            jobs: group.reports(),
            http_requests: after.requests.saturating_sub(before.requests),
            retries: after.retries.saturating_sub(before.retries),
            elapsed: started.elapsed(),
            commits: stats.commits,
            files_added: stats.files_added,
            commit_time: stats.time,
            partitions_written: stats.partitions.len(),
            compaction,
        }
    }

    /// Compacts `partitions` on the blocking pool and reports it to `observer`.
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
        let result =
            match tokio::task::spawn_blocking(move || lake.compact_partitions(&wanted)).await {
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

    /// Runs one job's fetching, handing its rows to `group`; its report comes from the group
    /// once its last rows are committed.
    async fn run_job(
        &self,
        index: usize,
        job: &Job,
        observer: &dyn SyncObserver,
        cancel: &CancelToken,
        group: &Group,
    ) {
        if cancel.is_cancelled() {
            group.fetch_done(observer, index, 0, 0, JobOutcome::NotStarted);
            return;
        }
        let expected_requests = self.estimate(job).ok().and_then(|e| e.requests);
        observer.on_event(SyncEvent::JobStarted {
            index,
            job: job.describe(),
            expected_requests,
        });
        let mut ctx = JobCtx {
            index,
            observer,
            cancel,
            group,
            rows_fetched: 0,
            requests: 0,
            total: None,
        };
        let result = match job.validate() {
            Ok(()) => self.dispatch(job, &mut ctx).await,
            Err(e) => Err(e),
        };
        let outcome = match result {
            Ok(true) => JobOutcome::Done,
            Ok(false) => JobOutcome::Interrupted,
            Err(e) => JobOutcome::Failed(Arc::new(Error::Sync {
                job: job.describe(),
                source: Box::new(e),
            })),
        };
        group.fetch_done(observer, index, ctx.rows_fetched, ctx.requests, outcome);
    }

    /// The work of a job's kind.
    fn work<'j>(&self, job: &'j Job) -> Work<'j> {
        let limit = Some(self.config.page_limit);
        match job {
            Job::Swaps {
                token,
                wallet,
                pool,
            } => Work::Swaps(SwapsRequest {
                wallet: wallet.clone(),
                token: token.clone(),
                pool: pool.clone(),
                limit,
                cursor: None,
            }),
            Job::Trades { token, wallet } => Work::Trades(TradesRequest {
                wallet: wallet.clone(),
                token: token.clone(),
                limit,
                cursor: None,
            }),
            Job::Candles {
                token,
                pool,
                interval,
                from,
                to,
            } => Work::Candles {
                series: CandleSeries {
                    token: token.clone(),
                    pool: pool.clone(),
                    interval: *interval,
                },
                from: *from,
                to: *to,
            },
            Job::PriceHistory {
                chain_id,
                tokens,
                pools,
                interval,
                from,
                to,
            } => Work::PriceHistory(HistoryJob {
                chain_id: *chain_id,
                tokens,
                pools,
                interval: *interval,
                from: *from,
                to: *to,
            }),
            Job::Prices {
                chain_id,
                tokens,
                pools,
            } => Work::Snapshot(SnapshotRequest::prices(*chain_id, tokens, pools, false)),
            Job::PriceStats {
                chain_id,
                tokens,
                pools,
            } => Work::Snapshot(SnapshotRequest::prices(*chain_id, tokens, pools, true)),
            Job::EvmProfiles { chain_id, tokens } => {
                Work::Snapshot(SnapshotRequest::evm_profiles(*chain_id, tokens))
            }
            Job::Portfolios { wallets } => Work::Snapshot(SnapshotRequest::portfolios(wallets)),
            Job::AltProfiles { request } => Work::Search(request),
        }
    }

    async fn dispatch(&self, job: &Job, ctx: &mut JobCtx<'_>) -> Result<Finished> {
        let key = job.state_key();
        match self.work(job) {
            Work::Swaps(request) => self.sync_stream(ctx, &key, &request).await,
            Work::Trades(request) => self.sync_stream(ctx, &key, &request).await,
            Work::Candles { series, from, to } => {
                self.sync_candles(ctx, &key, &series, from, to).await
            }
            Work::PriceHistory(history) => self.sync_price_history(ctx, &key, &history).await,
            Work::Snapshot(requests) => self.sync_snapshot(ctx, &key, requests).await,
            Work::Search(request) => self.sync_search(ctx, &key, request).await,
        }
    }

    /// A dry run: how many requests the job will make, from the lake's records alone.
    pub fn estimate(&self, job: &Job) -> Result<Estimate> {
        job.validate()?;
        let key = job.state_key();
        let (requests, note) = match self.work(job) {
            Work::Swaps(_) | Work::Trades(_) => self.estimate_stream(&key)?,
            Work::Candles { series, from, to } => {
                self.estimate_candles(&key, series.interval, from, to)?
            }
            Work::PriceHistory(history) => self.estimate_history(&key, &history)?,
            Work::Snapshot(requests) => self.estimate_snapshot(&key, requests.len())?,
            Work::Search(_) => (None, "every page of the search".to_owned()),
        };
        Ok(Estimate {
            job: job.describe(),
            requests,
            note,
        })
    }

    fn set_states(&self, states: Option<Arc<std::collections::BTreeMap<String, Value>>>) {
        *self
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = states;
    }

    fn snapshot(&self) -> Option<Arc<std::collections::BTreeMap<String, Value>>> {
        self.states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Every sync state whose key starts with `prefix`: from the run's snapshot during a run,
    /// from the lake otherwise.
    pub(super) fn states_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<std::collections::BTreeMap<String, Value>> {
        match self.snapshot() {
            Some(all) => Ok(all
                .range(prefix.to_owned()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()),
            None => self.lake.states(prefix),
        }
    }

    /// The sync state recorded under `key`, if any: from the run's snapshot during a run, from
    /// the lake otherwise.
    pub(super) fn read_state<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let value = match self.snapshot() {
            Some(all) => all.get(key).cloned(),
            None => self.lake.state(key)?,
        };
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(v) => self.decode_state(key, v).map(Some),
        }
    }

    /// Decodes the sync state recorded under `key`.
    pub(super) fn decode_state<T: DeserializeOwned>(&self, key: &str, value: Value) -> Result<T> {
        serde_json::from_value(value).map_err(|source| Error::LakeDecode {
            path: self.lake.root().to_path_buf(),
            what: format!("sync state {key} is not valid"),
            source,
        })
    }

    /// Hands rows (built later by `build`, off the async workers) and the states that describe
    /// them to the run's commit buffer. `rows` is their number, as received. Returns at once
    /// unless the buffer is full; fails when a commit holding earlier rows of the job failed.
    pub(super) async fn hand_off<F>(
        &self,
        ctx: &JobCtx<'_>,
        rows: usize,
        build: F,
        states: Vec<(String, Value)>,
    ) -> Result<()>
    where
        F: FnOnce() -> Result<Vec<(Dataset, RecordBatch)>> + Send + 'static,
    {
        ctx.group
            .hand_off(ctx.index, Box::new(build), rows, states)
            .await
    }

    /// Hands records of one dataset with the job's states: [`hand_off`](Self::hand_off) with
    /// the records' own conversion.
    pub(super) async fn hand_off_records<T>(
        &self,
        ctx: &JobCtx<'_>,
        records: Vec<T>,
        context: T::Context,
        states: Vec<(String, Value)>,
    ) -> Result<()>
    where
        T: ToBatch + Send + 'static,
        T::Context: Send + 'static,
    {
        let rows = records.len();
        self.hand_off(
            ctx,
            rows,
            move || Ok(vec![(T::DATASET, T::to_batch(&records, &context)?)]),
            states,
        )
        .await
    }
}

/// Opens a lake transaction, waiting up to `timeout` for another writer, or up to the lake's
/// own lock timeout from the moment `cancel` fires, whichever ends first. Runs on the blocking
/// pool.
pub(super) fn wait_for_lake<'l>(
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
