//! The sync runner: one function per kind of job, all committing through one helper.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use chrono::{DateTime, TimeZone, Utc};
use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::jobs::Job;
use super::ranges::{Range, RangeSet};
use super::{
    CancelToken, Estimate, JobOutcome, JobReport, SyncConfig, SyncEvent, SyncObserver, SyncReport,
};
use crate::api::client::Client;
use crate::api::models::{Page, Swap, TimeWindow, Trade};
use crate::api::requests::{
    AltPricesRequest, CandlesRequest, EvmPricesRequest, GetProfileRequest, MAX_HISTORY_POOLS,
    MAX_HISTORY_TOKENS, MAX_PRICE_ADDRESSES, PortfolioRequest, PriceHistoryRequest, ProfileOptions,
    SwapsRequest, TradesRequest,
};
use crate::error::{ApiStatus, Error, Result};
use crate::lake::{Dataset, Lake, convert};

/// Runs sync jobs over one client and one lake.
///
/// ```no_run
/// # async fn demo() -> dexlake::Result<()> {
/// use std::sync::Arc;
/// use dexlake::api::client::Client;
/// use dexlake::lake::Lake;
/// use dexlake::sync::{CancelToken, Job, Sync, SyncConfig};
///
/// let sync = Sync::new(Client::from_env()?, Arc::new(Lake::open("./lake")?), SyncConfig::default());
/// let jobs = [Job::Swaps { token: Some("TOKEN".into()), wallet: None, pool: None }];
/// let report = sync.run(&jobs, &(), &CancelToken::new()).await;
/// println!("{} rows added with {} requests", report.jobs[0].rows_added, report.requests());
/// # Ok(()) }
/// ```
pub struct Sync {
    client: Client,
    lake: Arc<Lake>,
    config: SyncConfig,
    /// Commits of concurrent jobs take the lake's writer lock one at a time.
    commit_lock: Arc<std::sync::Mutex<()>>,
}

/// Position of a swap or trade in the service's newest-first order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct EventKey {
    slot: i64,
    id: i64,
}

/// A record of a newest-first stream: where it sits in the order, and how it becomes rows.
trait Streamed: Clone + Send + 'static {
    /// The dataset the records go to.
    const DATASET: Dataset;
    /// Position in the service's newest-first order.
    fn key(&self) -> EventKey;
    /// Records to a batch of [`Self::DATASET`].
    fn to_batch(records: &[Self]) -> Result<RecordBatch>;
}

impl Streamed for Swap {
    const DATASET: Dataset = Dataset::Swaps;
    fn key(&self) -> EventKey {
        EventKey {
            slot: self.block_slot,
            id: self.id,
        }
    }
    fn to_batch(records: &[Self]) -> Result<RecordBatch> {
        convert::swaps_to_batch(records)
    }
}

impl Streamed for Trade {
    const DATASET: Dataset = Dataset::Trades;
    fn key(&self) -> EventKey {
        EventKey {
            slot: self.block_slot,
            id: self.id,
        }
    }
    fn to_batch(records: &[Self]) -> Result<RecordBatch> {
        convert::trades_to_batch(records)
    }
}

/// Progress of a newest-first stream (swaps or trades of one filter).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct StreamState {
    /// Newest record of the last completed run: everything from there back is in the lake.
    newest: Option<EventKey>,
    /// An interrupted run: where to resume.
    run: Option<StreamRun>,
    /// The service's `count` at the last page seen.
    count: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct StreamRun {
    /// Cursor of the next page to fetch.
    cursor: String,
    /// Newest record this run has seen.
    top: EventKey,
    /// The run stops at this record (the `newest` of the run before).
    stop: Option<EventKey>,
}

/// Time ranges a time-range dataset covers for one target (empty answers included).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct CoverState {
    covered: RangeSet,
    /// Time of the newest point received, in epoch seconds.
    #[serde(default)]
    newest_point: Option<i64>,
}

/// Progress of a snapshot job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SnapshotState {
    /// An unfinished snapshot: its fetch time and the chunks already committed.
    run: Option<SnapshotRun>,
    /// Fetch time of the last completed snapshot.
    last_fetched_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SnapshotRun {
    fetched_at: DateTime<Utc>,
    done: BTreeSet<usize>,
    /// For paged snapshots (search): cursor of the next page.
    cursor: Option<String>,
}

/// One job in progress: counters and where to report them.
struct JobCtx<'a> {
    index: usize,
    observer: &'a dyn SyncObserver,
    cancel: &'a CancelToken,
    rows_added: u64,
    rows_fetched: u64,
    requests: u64,
    total: Option<u64>,
}

impl JobCtx<'_> {
    fn fetched(&mut self, rows: usize) {
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

/// Builds the batches of one commit; runs on the blocking pool.
type BatchBuilder = Box<dyn FnOnce() -> Result<Vec<(Dataset, RecordBatch)>> + Send>;

/// `Ok(true)`: the job got everything; `Ok(false)`: cancelled after committing.
type Finished = bool;

fn ts(t: DateTime<Utc>) -> i64 {
    t.timestamp()
}

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).single().unwrap_or_default()
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("sync state types serialise to JSON")
}

impl Sync {
    /// A runner over `client` and `lake`.
    pub fn new(client: Client, lake: Arc<Lake>, config: SyncConfig) -> Self {
        Sync {
            client,
            lake,
            config,
            commit_lock: Arc::new(std::sync::Mutex::new(())),
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

    /// Runs every job (up to [`SyncConfig::parallel_jobs`] at once) and reports each. A failed
    /// job does not stop the others.
    pub async fn run(
        &self,
        jobs: &[Job],
        observer: &dyn SyncObserver,
        cancel: &CancelToken,
    ) -> SyncReport {
        let started = Instant::now();
        let before = self.client.metrics();
        let reports = futures::stream::iter(jobs.iter().enumerate())
            .map(|(i, job)| self.run_job(i, job, observer, cancel))
            .buffered(self.config.parallel_jobs.max(1))
            .collect::<Vec<_>>()
            .await;
        let after = self.client.metrics();
        SyncReport {
            jobs: reports,
            http_requests: after.requests.saturating_sub(before.requests),
            retries: after.retries.saturating_sub(before.retries),
            elapsed: started.elapsed(),
        }
    }

    /// Runs one job.
    pub async fn run_job(
        &self,
        index: usize,
        job: &Job,
        observer: &dyn SyncObserver,
        cancel: &CancelToken,
    ) -> JobReport {
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
            rows_added: 0,
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
            Err(e) => JobOutcome::Failed(error_chain(&e)),
        };
        let report = JobReport {
            job: job.describe(),
            dataset: job.dataset(),
            rows_added: ctx.rows_added,
            rows_fetched: ctx.rows_fetched,
            requests: ctx.requests,
            outcome,
        };
        observer.on_event(SyncEvent::JobFinished {
            index,
            report: report.clone(),
        });
        report
    }

    async fn dispatch(&self, job: &Job, ctx: &mut JobCtx<'_>) -> Result<Finished> {
        let key = job.state_key();
        match job {
            Job::Swaps {
                token,
                wallet,
                pool,
            } => {
                let base = SwapsRequest {
                    wallet: wallet.clone(),
                    token: token.clone(),
                    pool: pool.clone(),
                    limit: Some(self.config.page_limit),
                    cursor: None,
                };
                let client = self.client.clone();
                let pages = move |cursor: Option<String>| {
                    client.swap_pages(SwapsRequest {
                        cursor,
                        ..base.clone()
                    })
                };
                self.sync_stream(ctx, &key, pages).await
            }
            Job::Trades { token, wallet } => {
                let base = TradesRequest {
                    wallet: wallet.clone(),
                    token: token.clone(),
                    limit: Some(self.config.page_limit),
                    cursor: None,
                };
                let client = self.client.clone();
                let pages = move |cursor: Option<String>| {
                    client.trade_pages(TradesRequest {
                        cursor,
                        ..base.clone()
                    })
                };
                self.sync_stream(ctx, &key, pages).await
            }
            Job::Candles {
                token,
                pool,
                interval,
                from,
                to,
            } => {
                self.sync_candles(
                    ctx,
                    &key,
                    token.as_deref(),
                    pool.as_deref(),
                    *interval,
                    *from,
                    *to,
                )
                .await
            }
            Job::PriceHistory {
                chain_id,
                tokens,
                pools,
                interval,
                from,
                to,
            } => {
                self.sync_price_history(ctx, &key, *chain_id, tokens, pools, *interval, *from, *to)
                    .await
            }
            Job::Prices { .. }
            | Job::PriceStats { .. }
            | Job::EvmProfiles { .. }
            | Job::Portfolios { .. } => self.sync_snapshot(ctx, &key, job).await,
            Job::AltProfiles { request } => self.sync_search(ctx, &key, request).await,
        }
    }

    /// A dry run: how many requests the job will make, from the lake's records alone.
    pub fn estimate(&self, job: &Job) -> Result<Estimate> {
        job.validate()?;
        let key = job.state_key();
        let (requests, note) = match job {
            Job::Swaps { .. } | Job::Trades { .. } => {
                let state: StreamState = self.read_state(&key)?.unwrap_or_default();
                let limit = i64::from(self.config.page_limit);
                match (&state.run, state.newest, state.count) {
                    (Some(_), _, _) => (
                        None,
                        "resumes an interrupted run from its recorded cursor".to_owned(),
                    ),
                    (None, Some(_), _) => (
                        Some(1),
                        "fetches the pages newer than the newest committed record (usually 1)"
                            .to_owned(),
                    ),
                    (None, None, Some(c)) => (
                        Some((c.saturating_add(limit - 1) / limit).max(1) as u64),
                        format!("{c} records last seen, {limit} per page"),
                    ),
                    (None, None, None) => (
                        None,
                        format!(
                            "first sync: every page ({limit} per page); the total is known after the first page"
                        ),
                    ),
                }
            }
            Job::Candles {
                interval, from, to, ..
            } => {
                let state: CoverState = self.read_state(&key)?.unwrap_or_default();
                let bars = self.config.bars_per_request;
                match to {
                    Some(_) => {
                        let want = self.wanted(*interval, *from, *to);
                        let n = self.missing_for(&state.covered, *interval, want).len();
                        (
                            Some(n as u64),
                            format!("{n} missing sub-ranges of at most {bars} bars"),
                        )
                    }
                    None => {
                        let (gaps, _) = self.open_candle_plan(&state.covered, *interval, *from);
                        (
                            None,
                            format!(
                                "{} gaps, then pages of {bars} bars forward to the service's now",
                                gaps.len()
                            ),
                        )
                    }
                }
            }
            Job::PriceHistory {
                tokens,
                pools,
                interval,
                from,
                to,
                ..
            } => {
                let covers = self.history_covers(&key)?;
                let groups = self.history_requests(&covers, tokens, pools, *interval, *from, *to);
                (
                    Some(groups.len() as u64),
                    "missing sub-ranges, grouped by target".to_owned(),
                )
            }
            Job::AltProfiles { .. } => (None, "every page of the search".to_owned()),
            _ => {
                let state: SnapshotState = self.read_state(&key)?.unwrap_or_default();
                let done = state.run.map(|r| r.done.len()).unwrap_or(0);
                let n = snapshot_chunks(job).len().saturating_sub(done) as u64;
                (
                    Some(n),
                    if done > 0 {
                        format!("resumes a snapshot with {done} chunks done")
                    } else {
                        "one request per chunk".to_owned()
                    },
                )
            }
        };
        Ok(Estimate {
            job: job.describe(),
            requests,
            note,
        })
    }

    fn read_state<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        match self.lake.state(key)? {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v)
                .map(Some)
                .map_err(|e| Error::Lake {
                    path: self.lake.root().to_path_buf(),
                    message: format!("sync state {key}: {e}"),
                }),
        }
    }

    /// Converts (on the blocking pool, off the async workers) and commits batches and states in
    /// one lake transaction. Returns the rows new to the lake.
    async fn commit<F>(&self, build: F, states: Vec<(String, Value)>) -> Result<u64>
    where
        F: FnOnce() -> Result<Vec<(Dataset, RecordBatch)>> + Send + 'static,
    {
        let lake = Arc::clone(&self.lake);
        let lock = Arc::clone(&self.commit_lock);
        let task = tokio::task::spawn_blocking(move || -> Result<u64> {
            let batches = build()?;
            let _guard = lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut tx = lake.transaction()?;
            for (dataset, batch) in batches {
                if batch.num_rows() > 0 {
                    tx.write(dataset, batch)?;
                }
            }
            for (key, value) in states {
                tx.set_state(key, value);
            }
            let summary = tx.commit()?;
            Ok(summary.rows_added.values().sum())
        });
        match task.await {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(Error::Lake {
                path: self.lake.root().to_path_buf(),
                message: format!("commit task: {e}"),
            }),
        }
    }

    /// Swaps or trades of one filter, newest first, down to what an earlier run committed.
    async fn sync_stream<T, S, P>(
        &self,
        ctx: &mut JobCtx<'_>,
        key: &str,
        pages: P,
    ) -> Result<Finished>
    where
        T: Streamed,
        S: Stream<Item = Result<Page<T>>> + Send,
        P: Fn(Option<String>) -> S,
    {
        let mut state: StreamState = self.read_state(key)?.unwrap_or_default();
        let (mut cursor, mut top, stop) = match state.run.take() {
            Some(run) => (Some(run.cursor), Some(run.top), run.stop),
            None => (None, None, state.newest),
        };
        let resumed = cursor.is_some();
        let mut stream = Box::pin(pages(cursor.clone()));
        let mut buffer: Vec<T> = Vec::new();
        let mut pages_held = 0usize;
        let mut first_page = true;
        let finished = loop {
            if ctx.cancel.is_cancelled() {
                break false;
            }
            let page = match stream.next().await {
                None => break true,
                Some(Ok(page)) => page,
                Some(Err(e))
                    if first_page && resumed && e.api_status() == Some(ApiStatus::BadRequest) =>
                {
                    // The recorded cursor is no longer accepted (cursors may expire): start again
                    // from the newest record; the stop point still bounds the work.
                    ctx.requests += 1;
                    cursor = None;
                    stream = Box::pin(pages(None));
                    first_page = false;
                    continue;
                }
                Some(Err(e)) => {
                    self.commit_stream(
                        ctx,
                        key,
                        &mut buffer,
                        &resume_state(&state, cursor.as_deref(), top, stop),
                    )
                    .await?;
                    return Err(e);
                }
            };
            first_page = false;
            ctx.total = u64::try_from(page.count).ok();
            state.count = Some(page.count);
            ctx.fetched(page.data.len());
            let mut reached_stop = false;
            for item in &page.data {
                let k = item.key();
                if stop.is_some_and(|s| k <= s) {
                    reached_stop = true;
                    break;
                }
                top = Some(top.map_or(k, |t| t.max(k)));
                buffer.push(item.clone());
            }
            let next = page.next_cursor().map(str::to_owned);
            if reached_stop || next.is_none() || page.data.is_empty() {
                break true;
            }
            cursor = next;
            pages_held += 1;
            if pages_held >= self.config.pages_per_commit.max(1) {
                self.commit_stream(
                    ctx,
                    key,
                    &mut buffer,
                    &resume_state(&state, cursor.as_deref(), top, stop),
                )
                .await?;
                pages_held = 0;
            }
        };
        if finished {
            let done = StreamState {
                newest: top.or(stop),
                run: None,
                count: state.count,
            };
            self.commit_stream(ctx, key, &mut buffer, &done).await?;
        } else {
            self.commit_stream(
                ctx,
                key,
                &mut buffer,
                &resume_state(&state, cursor.as_deref(), top, stop),
            )
            .await?;
        }
        Ok(finished)
    }

    /// Commits the buffered records of a stream with the stream's next state.
    async fn commit_stream<T: Streamed>(
        &self,
        ctx: &mut JobCtx<'_>,
        key: &str,
        buffer: &mut Vec<T>,
        next: &StreamState,
    ) -> Result<()> {
        let rows = std::mem::take(buffer);
        ctx.rows_added += self
            .commit(
                move || Ok(vec![(T::DATASET, T::to_batch(&rows)?)]),
                vec![(key.to_owned(), to_value(next))],
            )
            .await?;
        Ok(())
    }

    /// The requested range of a time-range job, aligned to its bar grid. Open ranges end now.
    fn wanted(&self, interval: i64, from: DateTime<Utc>, to: Option<DateTime<Utc>>) -> Range {
        let end = to.unwrap_or_else(Utc::now);
        Range::new(ts(from), ts(end)).align_out(interval)
    }

    /// Missing sub-ranges of one target, split into requests of at most `bars_per_request` bars.
    /// The most recent window is always missing.
    fn missing_for(&self, covered: &RangeSet, interval: i64, want: Range) -> Vec<Range> {
        let mut covered = covered.clone();
        let now = ts(Utc::now());
        let recent = i64::try_from(self.config.recent_window.as_secs()).unwrap_or(i64::MAX);
        covered
            .remove(Range::new(now.saturating_sub(recent), want.end.max(now)).align_out(interval));
        covered
            .missing(want)
            .into_iter()
            .flat_map(|r| r.chunks(interval.saturating_mul(self.config.bars_per_request.max(1))))
            .collect()
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "a job's targets and time range are passed as they are in the `Job`"
    )]
    async fn sync_candles(
        &self,
        ctx: &mut JobCtx<'_>,
        key: &str,
        token: Option<&str>,
        pool: Option<&str>,
        interval: i64,
        from: DateTime<Utc>,
        to: Option<DateTime<Utc>>,
    ) -> Result<Finished> {
        let mut state: CoverState = self.read_state(key)?.unwrap_or_default();
        ctx.total = None;
        let base = CandlesRequest {
            interval,
            token: token.map(str::to_owned),
            pool: pool.map(str::to_owned),
            from: None,
            to: None,
            count: None,
        };
        let (chunks, tail) = match to {
            Some(_) => (
                self.missing_for(&state.covered, interval, self.wanted(interval, from, to)),
                None,
            ),
            None => {
                let (gaps, tail) = self.open_candle_plan(&state.covered, interval, from);
                (gaps, Some(tail))
            }
        };
        for chunk in chunks {
            if ctx.cancel.is_cancelled() {
                return Ok(false);
            }
            let req = CandlesRequest {
                from: Some(at(chunk.start)),
                to: Some(at(chunk.end)),
                ..base.clone()
            };
            let mut candles = self.client.candles(&req).await?;
            ctx.fetched(candles.len());
            // A bar belongs to the chunk its start falls in; the neighbour chunk owns the rest.
            candles.retain(|c| (chunk.start..chunk.end).contains(&ts(c.timestamp)));
            state.covered.insert(chunk);
            ctx.rows_added += self
                .commit_candles(key, &state, token, pool, interval, candles)
                .await?;
        }
        // An open range: page forward with the service's `count` member from the start of the
        // tail until a page holds fewer bars than asked for. The service's own "now" ends the
        // range, so no request is spent on time after its data.
        let Some(mut start) = tail else {
            return Ok(true);
        };
        let per_page = self.config.bars_per_request.max(1);
        loop {
            if ctx.cancel.is_cancelled() {
                return Ok(false);
            }
            let req = CandlesRequest {
                from: Some(at(start)),
                count: Some(per_page),
                ..base.clone()
            };
            let mut candles = self.client.candles(&req).await?;
            ctx.fetched(candles.len());
            let full = candles.len() as i64 >= per_page;
            candles.retain(|c| ts(c.timestamp) >= start);
            let Some(last) = candles.iter().map(|c| ts(c.timestamp)).max() else {
                return Ok(true);
            };
            let next = last + interval;
            state.covered.insert(Range::new(start, next));
            ctx.rows_added += self
                .commit_candles(key, &state, token, pool, interval, candles)
                .await?;
            if !full || next <= start {
                return Ok(true);
            }
            start = next;
        }
    }

    /// For an open candle range: the gaps earlier runs left between `from` and the newest
    /// covered bar (as closed chunks), and where the forward paging starts (the newest covered
    /// bar less the recent window, or `from`).
    fn open_candle_plan(
        &self,
        covered: &RangeSet,
        interval: i64,
        from: DateTime<Utc>,
    ) -> (Vec<Range>, i64) {
        let start = Range::new(ts(from), ts(from)).align_out(interval).start;
        let recent = i64::try_from(self.config.recent_window.as_secs()).unwrap_or(i64::MAX);
        let tail = match covered.ranges().last() {
            Some(r) if r.end > start => {
                let back = Range::new(r.end.saturating_sub(recent), r.end)
                    .align_out(interval)
                    .start;
                back.max(start)
            }
            _ => start,
        };
        let gaps = covered
            .missing(Range::new(start, tail))
            .into_iter()
            .flat_map(|r| r.chunks(interval.saturating_mul(self.config.bars_per_request.max(1))))
            .collect();
        (gaps, tail)
    }

    /// Commits one answer of candles with the job's coverage.
    async fn commit_candles(
        &self,
        key: &str,
        state: &CoverState,
        token: Option<&str>,
        pool: Option<&str>,
        interval: i64,
        candles: Vec<crate::api::models::Candle>,
    ) -> Result<u64> {
        let (token, pool) = (token.map(str::to_owned), pool.map(str::to_owned));
        self.commit(
            move || {
                let batch = convert::candles_to_batch(
                    token.as_deref(),
                    pool.as_deref(),
                    interval,
                    &candles,
                )?;
                Ok(vec![(Dataset::Candles, batch)])
            },
            vec![(key.to_owned(), to_value(state))],
        )
        .await
    }

    /// The requests a price-history job needs: for each missing chunk, the targets missing it,
    /// at most 100 tokens or 1000 pools per request.
    fn history_requests(
        &self,
        covers: &HistoryCovers,
        tokens: &[String],
        pools: &[String],
        interval: i64,
        from: DateTime<Utc>,
        to: Option<DateTime<Utc>>,
    ) -> Vec<HistoryRequest> {
        let want = self.wanted(interval, from, to);
        let mut by_chunk: BTreeMap<(Range, bool), Vec<String>> = BTreeMap::new();
        for (is_pool, list) in [(false, tokens), (true, pools)] {
            for address in list {
                let covered = &covers.get(is_pool, address).covered;
                for chunk in self.missing_for(covered, interval, want) {
                    by_chunk
                        .entry((chunk, is_pool))
                        .or_default()
                        .push(address.clone());
                }
            }
        }
        let mut out = Vec::new();
        for ((range, is_pool), addresses) in by_chunk {
            let per = if is_pool {
                MAX_HISTORY_POOLS
            } else {
                MAX_HISTORY_TOKENS
            };
            for group in addresses.chunks(per) {
                out.push(HistoryRequest {
                    range,
                    is_pool,
                    addresses: group.to_vec(),
                });
            }
        }
        out
    }

    /// The coverage of every target of a price-history job, read from one manifest load.
    fn history_covers(&self, key: &str) -> Result<HistoryCovers> {
        let mut by_key = BTreeMap::new();
        for (k, v) in self.lake.states(&format!("{key}/"))? {
            if v.is_null() {
                continue;
            }
            let state: CoverState = serde_json::from_value(v).map_err(|e| Error::Lake {
                path: self.lake.root().to_path_buf(),
                message: format!("sync state {k}: {e}"),
            })?;
            by_key.insert(k, state);
        }
        Ok(HistoryCovers {
            key: key.to_owned(),
            by_key,
        })
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "a job's targets and time range are passed as they are in the `Job`"
    )]
    async fn sync_price_history(
        &self,
        ctx: &mut JobCtx<'_>,
        key: &str,
        chain_id: i64,
        tokens: &[String],
        pools: &[String],
        interval: i64,
        from: DateTime<Utc>,
        to: Option<DateTime<Utc>>,
    ) -> Result<Finished> {
        // An open range ends at the service's present: once data was seen, an answer with no
        // point at all means the requests after it ask for time that has no data yet, so they
        // are skipped and nothing is recorded for them (a later run asks again).
        let mut covers = self.history_covers(key)?;
        let mut seen_data = [false; 2];
        let mut ended = [false; 2];
        let mut newest = [None::<i64>; 2];
        for (is_pool, list) in [(false, tokens), (true, pools)] {
            for address in list {
                let kind = usize::from(is_pool);
                newest[kind] = newest[kind].max(covers.get(is_pool, address).newest_point);
            }
        }
        for hr in self.history_requests(&covers, tokens, pools, interval, from, to) {
            if ctx.cancel.is_cancelled() {
                return Ok(false);
            }
            let kind = usize::from(hr.is_pool);
            if ended[kind] {
                continue;
            }
            let (t, p) = if hr.is_pool {
                (None, Some(hr.addresses.clone()))
            } else {
                (Some(hr.addresses.clone()), None)
            };
            let req = PriceHistoryRequest {
                chain_id,
                tokens: t,
                pools: p,
                from: at(hr.range.start),
                to: Some(at(hr.range.end)),
                interval,
            };
            let mut series = self.client.evm_price_history(&req).await?;
            ctx.fetched(series.iter().map(|s| s.prices.len()).sum());
            for s in &mut series {
                s.prices
                    .retain(|pt| (hr.range.start..hr.range.end).contains(&ts(pt.timestamp)));
            }
            let points: usize = series.iter().map(|s| s.prices.len()).sum();
            let after_data = seen_data[kind] || newest[kind].is_some_and(|t| t < hr.range.start);
            if to.is_none() && points == 0 && after_data {
                ended[kind] = true;
                continue;
            }
            seen_data[kind] |= points > 0;
            let mut states = Vec::with_capacity(hr.addresses.len());
            for address in &hr.addresses {
                let (target_key, state) = covers.entry(hr.is_pool, address);
                state.covered.insert(hr.range);
                let last = series
                    .iter()
                    .filter(|s| {
                        let own = if hr.is_pool {
                            &s.pool_address
                        } else {
                            &s.token_address
                        };
                        own == address
                    })
                    .flat_map(|s| s.prices.iter().map(|p| ts(p.timestamp)))
                    .max();
                state.newest_point = state.newest_point.max(last);
                states.push((target_key, to_value(state)));
            }
            ctx.rows_added += self
                .commit(
                    move || {
                        Ok(vec![(
                            Dataset::PriceHistory,
                            convert::price_history_to_batch(chain_id, interval, &series)?,
                        )])
                    },
                    states,
                )
                .await?;
        }
        Ok(true)
    }

    /// Prices, price stats, EVM profiles and portfolios: chunked snapshots with one fetch time.
    async fn sync_snapshot(&self, ctx: &mut JobCtx<'_>, key: &str, job: &Job) -> Result<Finished> {
        let state: SnapshotState = self.read_state(key)?.unwrap_or_default();
        let mut run = state.run.unwrap_or_else(|| SnapshotRun {
            fetched_at: Utc::now(),
            done: BTreeSet::new(),
            cursor: None,
        });
        let chunks = snapshot_chunks(job);
        ctx.total = Some(chunks.len() as u64);
        let fetched_at = run.fetched_at;
        for (i, chunk) in chunks.into_iter().enumerate() {
            if run.done.contains(&i) {
                continue;
            }
            if ctx.cancel.is_cancelled() {
                return Ok(false);
            }
            let (batch_fn, rows): (BatchBuilder, usize) =
                self.fetch_snapshot_chunk(job, chunk, fetched_at).await?;
            ctx.requests += 1;
            ctx.rows_fetched += rows as u64;
            ctx.observer.on_event(SyncEvent::Progress {
                index: ctx.index,
                rows_fetched: ctx.rows_fetched,
                requests: ctx.requests,
                total: ctx.total,
            });
            run.done.insert(i);
            let state = SnapshotState {
                run: Some(run.clone()),
                last_fetched_at: state.last_fetched_at,
            };
            ctx.rows_added += self
                .commit(batch_fn, vec![(key.to_owned(), to_value(&state))])
                .await?;
        }
        let done = SnapshotState {
            run: None,
            last_fetched_at: Some(fetched_at),
        };
        self.commit(|| Ok(Vec::new()), vec![(key.to_owned(), to_value(&done))])
            .await?;
        Ok(true)
    }

    async fn fetch_snapshot_chunk(
        &self,
        job: &Job,
        chunk: SnapshotChunk,
        fetched_at: DateTime<Utc>,
    ) -> Result<(BatchBuilder, usize)> {
        let (tokens, pools) = match &chunk {
            SnapshotChunk::Tokens(t) => (Some(t.clone()), None),
            SnapshotChunk::Pools(p) => (None, Some(p.clone())),
            SnapshotChunk::One(_) => (None, None),
        };
        Ok(match job {
            Job::Prices {
                chain_id: Some(chain_id),
                ..
            } => {
                let v = self
                    .client
                    .evm_prices(&EvmPricesRequest {
                        chain_id: *chain_id,
                        tokens,
                        pools,
                    })
                    .await?;
                let n = v.len();
                (
                    Box::new(move || {
                        Ok(vec![(
                            Dataset::Prices,
                            convert::evm_prices_to_batch(&v, fetched_at)?,
                        )])
                    }),
                    n,
                )
            }
            Job::Prices { chain_id: None, .. } => {
                let v = self
                    .client
                    .alt_prices(&AltPricesRequest { tokens, pools })
                    .await?;
                let n = v.len();
                (
                    Box::new(move || {
                        Ok(vec![(
                            Dataset::Prices,
                            convert::alt_prices_to_batch(&v, fetched_at)?,
                        )])
                    }),
                    n,
                )
            }
            Job::PriceStats {
                chain_id: Some(chain_id),
                ..
            } => {
                let chain_id = *chain_id;
                let v = self
                    .client
                    .evm_price_stats(&EvmPricesRequest {
                        chain_id,
                        tokens,
                        pools,
                    })
                    .await?;
                let n = v.len();
                (
                    Box::new(move || {
                        Ok(vec![(
                            Dataset::PriceStats,
                            convert::evm_price_stats_to_batch(chain_id, &v, fetched_at)?,
                        )])
                    }),
                    n,
                )
            }
            Job::PriceStats { chain_id: None, .. } => {
                let v = self
                    .client
                    .alt_price_stats(&AltPricesRequest { tokens, pools })
                    .await?;
                let n = v.len();
                (
                    Box::new(move || {
                        Ok(vec![(
                            Dataset::PriceStats,
                            convert::alt_price_stats_to_batch(&v, fetched_at)?,
                        )])
                    }),
                    n,
                )
            }
            Job::EvmProfiles { chain_id, .. } => {
                let SnapshotChunk::One(token) = chunk else {
                    unreachable!("profile chunks hold one token")
                };
                let req = GetProfileRequest {
                    chain_id: *chain_id,
                    token,
                    options: Some(ProfileOptions {
                        include_metadata: Some(true),
                        include_metrics: Some(TimeWindow::KNOWN.to_vec()),
                    }),
                };
                let profile = self.client.evm_profile(&req).await?;
                (
                    Box::new(move || {
                        Ok(vec![(
                            Dataset::TokenProfiles,
                            convert::evm_profiles_to_batch(&[profile], fetched_at)?,
                        )])
                    }),
                    1,
                )
            }
            Job::Portfolios { .. } => {
                let SnapshotChunk::One(wallet) = chunk else {
                    unreachable!("portfolio chunks hold one wallet")
                };
                let portfolio = self
                    .client
                    .portfolio(&PortfolioRequest {
                        wallet: wallet.clone(),
                    })
                    .await?;
                let n = portfolio.tokens.len();
                (
                    Box::new(move || {
                        Ok(vec![(
                            Dataset::Portfolios,
                            convert::portfolios_to_batch(&[(wallet, portfolio)], fetched_at)?,
                        )])
                    }),
                    n,
                )
            }
            _ => unreachable!("sync_snapshot is called for snapshot jobs only"),
        })
    }

    /// Every page of one search-profiles request, as one snapshot.
    async fn sync_search(
        &self,
        ctx: &mut JobCtx<'_>,
        key: &str,
        request: &crate::api::search::SearchRequest,
    ) -> Result<Finished> {
        let state: SnapshotState = self.read_state(key)?.unwrap_or_default();
        let mut run = state.run.unwrap_or_else(|| SnapshotRun {
            fetched_at: Utc::now(),
            done: BTreeSet::new(),
            cursor: None,
        });
        let fetched_at = run.fetched_at;
        let mut req = request.clone();
        req.cursor = run.cursor.clone();
        if req.limit.is_none() {
            req.limit = Some(self.config.page_limit);
        }
        let mut pages = Box::pin(self.client.search_pages(req));
        loop {
            if ctx.cancel.is_cancelled() {
                return Ok(false);
            }
            let Some(page) = pages.next().await else {
                break;
            };
            let page = page?;
            ctx.total = u64::try_from(page.count).ok();
            ctx.fetched(page.data.len());
            let next = page.next_cursor().map(str::to_owned);
            let last = next.is_none() || page.data.is_empty();
            run.cursor = next;
            run.done.insert(run.done.len());
            let state = if last {
                SnapshotState {
                    run: None,
                    last_fetched_at: Some(fetched_at),
                }
            } else {
                SnapshotState {
                    run: Some(run.clone()),
                    last_fetched_at: state.last_fetched_at,
                }
            };
            let profiles = page.data;
            ctx.rows_added += self
                .commit(
                    move || {
                        Ok(vec![(
                            Dataset::TokenProfiles,
                            convert::alt_profiles_to_batch(&profiles, fetched_at)?,
                        )])
                    },
                    vec![(key.to_owned(), to_value(&state))],
                )
                .await?;
            if last {
                break;
            }
        }
        Ok(true)
    }
}

/// The state of an unfinished stream: where to resume. Without a cursor or a newest record
/// there is nothing to resume from; the records themselves are still committed (the lake
/// de-duplicates them on a later run).
fn resume_state(
    state: &StreamState,
    cursor: Option<&str>,
    top: Option<EventKey>,
    stop: Option<EventKey>,
) -> StreamState {
    let run = match (cursor, top) {
        (Some(c), Some(t)) => Some(StreamRun {
            cursor: c.to_owned(),
            top: t,
            stop,
        }),
        _ => None,
    };
    StreamState {
        newest: state.newest,
        run,
        count: state.count,
    }
}

/// One request's worth of a price-history job.
#[derive(Debug, Clone)]
struct HistoryRequest {
    range: Range,
    is_pool: bool,
    addresses: Vec<String>,
}

fn history_target_key(job_key: &str, is_pool: bool, address: &str) -> String {
    format!(
        "{job_key}/{}={address}",
        if is_pool { "pool" } else { "token" }
    )
}

/// The coverage of each target (token or pool) of a price-history job, loaded once per job and
/// kept up to date in memory as the job commits.
struct HistoryCovers {
    key: String,
    by_key: BTreeMap<String, CoverState>,
}

impl HistoryCovers {
    /// A target's coverage (empty when it was never synced).
    fn get(&self, is_pool: bool, address: &str) -> &CoverState {
        static EMPTY: CoverState = CoverState {
            covered: RangeSet::EMPTY,
            newest_point: None,
        };
        self.by_key
            .get(&history_target_key(&self.key, is_pool, address))
            .unwrap_or(&EMPTY)
    }

    /// A target's state key and its coverage, to update.
    fn entry(&mut self, is_pool: bool, address: &str) -> (String, &mut CoverState) {
        let k = history_target_key(&self.key, is_pool, address);
        (k.clone(), self.by_key.entry(k).or_default())
    }
}

/// One request's worth of a snapshot job.
#[derive(Debug, Clone)]
enum SnapshotChunk {
    Tokens(Vec<String>),
    Pools(Vec<String>),
    One(String),
}

fn snapshot_chunks(job: &Job) -> Vec<SnapshotChunk> {
    match job {
        Job::Prices { tokens, pools, .. } | Job::PriceStats { tokens, pools, .. } => tokens
            .chunks(MAX_PRICE_ADDRESSES)
            .map(|c| SnapshotChunk::Tokens(c.to_vec()))
            .chain(
                pools
                    .chunks(MAX_PRICE_ADDRESSES)
                    .map(|c| SnapshotChunk::Pools(c.to_vec())),
            )
            .collect(),
        Job::EvmProfiles { tokens, .. } => tokens.iter().cloned().map(SnapshotChunk::One).collect(),
        Job::Portfolios { wallets } => wallets.iter().cloned().map(SnapshotChunk::One).collect(),
        _ => Vec::new(),
    }
}

/// The error and its causes on one line.
fn error_chain(e: &Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        source = cause.source();
    }
    s
}
