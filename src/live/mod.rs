//! Following the market as it trades: [`Follower`] keeps a lake fresh by polling the service
//! and keeps bars up to date as swaps arrive (`dexlake follow`).
//!
//! One **poll** runs the follow's sync jobs (the swaps of its tokens or pool, the trades of
//! its wallet): incremental, so it fetches only what is new and commits it. The **watermark**
//! then moves to the earliest `Date` the service answered the poll with
//! ([`Client::take_earliest_server_date`]): every request of the poll was answered at or after
//! it, so every swap before it is in the lake. The swaps at or after the previous watermark are
//! read back from the lake (the manifest's time spans and the row groups' statistics skip the
//! rest, so a poll's cost follows what is new, not the lake's size), pushed into
//! [`LiveBars`], and the bars the new watermark closes are returned.
//!
//! **When the watermark waits.** The watermark never passes a swap not yet fetched:
//!
//! - A poll whose sync did not finish every job (a transient failure, Ctrl-C) keeps the
//!   watermark where it was: bars close only over data the lake holds completely.
//! - A stream left unfinished by an earlier poll (interrupted, killed, failed mid-way) resumes
//!   from its recorded cursor and pages down to where its run began; the swaps that arrived
//!   since are above that run. So a poll that finished such a stream syncs once more, from the
//!   newest page down, before its `Date` may move the watermark.
//! - A `Date` more than [`FollowConfig::max_date_jump`] past the previous watermark (on a
//!   first poll: past the lake's newest swap) is not trusted: the poll is held, and the next
//!   poll's `Date` must confirm it (at or after it, within the same jump of it).
//!
//! Swaps that still arrive for a bar already closed (a service that indexes late) are counted
//! as late ([`PollReport::late`], [`Follower::late`]): they are in the lake, not in the bars.
//!
//! **Failures.** A poll stops with the error when it cannot succeed by being tried again:
//! the service refused the request (400, 401, 403, 404), could not be reached before it ever
//! answered (a wrong address), answered without a `Date` header, or the lake cannot be
//! written or read (read-only, a damaged or missing committed file). Transient failures (429,
//! 5xx, timeouts and lost connections once the service has answered, malformed answers, a lake
//! locked by another writer) hold the poll ([`PollReport::held`]), and the caller tries again.
//!
//! **Committing.** [`Follower::commit`] writes the closed bars to the lake's `bars` dataset and
//! the follow's state (its watermark, and where a restart's replay starts) in one commit,
//! waiting up to [`FollowConfig::lock_timeout`] for another writer. Bars whose commit failed
//! are kept and committed with the next ones. A caller prints a poll's bars first and commits
//! them second, so after a kill only the bars of the poll in flight can be printed again (with
//! the same values: they are computed from committed swaps), and none is lost. A new
//! [`Follower`] on the same lake, tokens and interval resumes at the committed watermark: it
//! replays the lake's swaps from this follow's own earliest bar still needed (each token's last
//! closed bar, or its open one), never from what other follows stored, and returns nothing
//! twice. [`FollowConfig::reset`] forgets the committed state.
//!
//! **Where bars begin.** On a first start, at the bucket holding [`FollowConfig::since`]
//! (default: the first watermark), so every bar holds a whole bucket. The follow's history
//! is synced all the same.
//!
//! What to follow is checked once ([`FollowConfig::selection`], which a door asks before it
//! opens the lake), and the bars are the query's time bars of the width
//! ([`Bars::every`](crate::query::Bars::every), kept up to date by its
//! [`live_rule`](crate::query::Bars::live_rule)).
//!
//! Imports `api`, `lake`, `sync`, `analytics` and `query` (the bars' rule); the CLI imports it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
use chrono::{DateTime, Utc};
use polars::prelude::*;
use serde_json::json;

use crate::analytics::events::load_events_in_files;
use crate::analytics::ohlcv::{BarColumns, bars_frame};
use crate::analytics::{
    EventSource, LiveBars, Selection, Tick, TimeRange, TokenEvents, load_events,
};
use crate::api::Client;
use crate::lake::cols::{bar, token};
use crate::lake::{Dataset, Lake, Partition, schema};
use crate::query::Bars;
use crate::sync::{CancelToken, Job, JobOutcome, SyncConfig, SyncReport, Syncer};
use crate::{Error, Result};

/// What to follow.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowConfig {
    /// Tokens whose swaps are synced and whose bars are kept.
    pub tokens: Vec<String>,
    /// A pool whose swaps are synced and whose tokens' bars are kept.
    pub pool: Option<String>,
    /// A wallet whose trades (and swaps) are synced too; it adds no bars.
    pub wallet: Option<String>,
    /// Width of the time bars, seconds.
    pub interval_seconds: i64,
    /// Where bars begin on a first start (rounded down to its bucket); default the first
    /// watermark. Ignored when resuming, unless [`reset`](Self::reset).
    pub since: Option<DateTime<Utc>>,
    /// Forget the follow's committed state (its watermark and where its bars began) and start
    /// as on a first start: the way to take back a watermark the user does not trust. Bars
    /// already stored stay (a bar's first write is kept).
    pub reset: bool,
    /// Every this many commits the files the follow wrote are merged (the partitions its polls
    /// and its bars wrote into, and no other), so their count stays bounded over days of
    /// running.
    pub compact_every: u64,
    /// After each of those compactions, the replaced files (and the log) that no version
    /// committed within this time needs are deleted ([`Lake::vacuum`](crate::lake::Lake::vacuum)),
    /// so the disk a follow uses stays bounded; `None` keeps every version. Default a week
    /// ([`DEFAULT_RETENTION`](crate::lake::DEFAULT_RETENTION)).
    pub vacuum_retain: Option<Duration>,
    /// How long a commit (the polls' swaps and the bars) waits for another writer to release
    /// the lake. Default 10 minutes, as a sync's.
    pub lock_timeout: Duration,
    /// A service `Date` more than this past the previous watermark (on a first poll, past the
    /// lake's newest swap) is not trusted until the next poll confirms it. Default one day.
    pub max_date_jump: Duration,
}

impl Default for FollowConfig {
    fn default() -> Self {
        FollowConfig {
            tokens: Vec::new(),
            pool: None,
            wallet: None,
            interval_seconds: 60,
            since: None,
            reset: false,
            compact_every: 200,
            vacuum_retain: Some(crate::lake::DEFAULT_RETENTION),
            lock_timeout: SyncConfig::default().lock_timeout,
            max_date_jump: Duration::from_secs(86_400),
        }
    }
}

impl FollowConfig {
    /// What the follow reads and keeps bars of: its tokens, or its pool. Refuses both, neither,
    /// or a blank address, as [`Follower::new`] does; a door checks it this way before it opens
    /// the lake.
    pub fn selection(&self) -> Result<Selection> {
        let selection = match (&self.pool, self.tokens.as_slice()) {
            (Some(pool), []) => Selection::Pool(pool.clone()),
            (None, [_, ..]) => Selection::Tokens(self.tokens.clone()),
            (Some(_), _) => return Err(invalid("pool", "follow either tokens or a pool")),
            (None, []) => return Err(invalid("token", "name the tokens (or the pool) to follow")),
        };
        selection.validate()?;
        Ok(selection)
    }
}

/// What one [`Follower::poll`] did.
#[derive(Debug)]
pub struct PollReport {
    /// Bars the poll closed: `token_address` then the bar columns, by token then time.
    pub closed: DataFrame,
    /// The watermark after the poll, if the follow has one yet.
    pub watermark: Option<DateTime<Utc>>,
    /// Whether the watermark moved (false when the poll was held).
    pub advanced: bool,
    /// Why the watermark did not move, when the poll was held by a transient failure, a
    /// cancellation or a `Date` not yet trusted; the failed jobs' errors are in
    /// [`sync`](Self::sync) ([`PollReport::into_error`]).
    pub held: Option<String>,
    /// Swaps new to the bars.
    pub new_events: usize,
    /// Swaps this poll fetched for bars already closed (before the previous watermark): they
    /// are in the lake, not in the bars.
    pub late: u64,
    /// The sync runs of the poll (more than one when an unfinished stream was finished
    /// first), their job reports summed.
    pub sync: SyncReport,
}

impl PollReport {
    /// The error of the poll's first failed job, owned (for a caller that ends on it).
    pub fn into_error(self) -> Option<Error> {
        let failed = self.sync.jobs.into_iter().find_map(|j| match j.outcome {
            JobOutcome::Failed(e) => Some((j.job, e)),
            _ => None,
        })?;
        let (job, shared) = failed;
        // Every other report holding the same error is dropped by now.
        Some(
            Arc::try_unwrap(shared).unwrap_or_else(|shared| Error::Sync {
                job,
                source: Box::new(Error::Lake {
                    path: Default::default(),
                    message: crate::error::error_chain(&*shared),
                }),
            }),
        )
    }
}

/// A follow of tokens (or a pool) on one lake (see the module documentation).
pub struct Follower {
    syncer: Syncer,
    config: FollowConfig,
    jobs: Vec<Job>,
    selection: Selection,
    bars: LiveBars,
    /// The follow's state key in the lake.
    key: String,
    /// Bars are of swaps at or after this instant (µs), once known.
    start: Option<i64>,
    /// Ids of swaps at or after the watermark already pushed, with their times.
    pushed: HashMap<i64, i64>,
    /// Each token's last closed bar (its label, µs).
    last_closed: BTreeMap<String, i64>,
    /// Closed bars whose commit failed, committed with the next ones.
    unstored: Option<DataFrame>,
    /// A `Date` far past the watermark, waiting for the next poll to confirm it (µs).
    suspect: Option<i64>,
    /// Whether the service has answered this follow yet.
    answered: bool,
    commits: u64,
    /// Partitions written since the last compaction.
    written: BTreeSet<Partition>,
}

/// The stored state of a follow.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
struct Saved {
    start: i64,
    watermark: i64,
    /// Where a restart's replay starts: the earliest of each token's last closed bar and open
    /// bar (absent in states of older versions, which replay from `start`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replay_from: Option<i64>,
}

impl Follower {
    /// A follow of `config` writing into `lake` through `client`, resumed from the lake's
    /// state of the same tokens (or pool) and interval when there is one (and not
    /// [`FollowConfig::reset`]).
    pub fn new(client: Client, lake: Arc<Lake>, config: FollowConfig) -> Result<Follower> {
        let selection = config.selection()?;
        // The query's time bars of the width, kept up to date as swaps arrive.
        let bars = LiveBars::new(Bars::every(config.interval_seconds).live_rule()?)?;
        let mut jobs: Vec<Job> = config
            .tokens
            .iter()
            .map(|t| Job::Swaps {
                token: Some(t.clone()),
                wallet: None,
                pool: None,
            })
            .collect();
        if let Some(pool) = &config.pool {
            jobs.push(Job::Swaps {
                token: None,
                wallet: None,
                pool: Some(pool.clone()),
            });
        }
        if let Some(wallet) = &config.wallet {
            jobs.push(Job::Trades {
                token: None,
                wallet: Some(wallet.clone()),
            });
        }
        for job in &jobs {
            job.validate()?;
        }
        let mut followed: Vec<String> = config.tokens.clone();
        followed.sort();
        let key = match &config.pool {
            Some(pool) => format!("follow/bars/{}/pool={pool}", config.interval_seconds),
            None => format!(
                "follow/bars/{}/tokens={}",
                config.interval_seconds,
                followed.join(",")
            ),
        };
        // The polls' files are merged every `compact_every` commits instead of at the end of
        // each sync run, which would rewrite the day's partition at every poll.
        let sync = SyncConfig {
            compact: false,
            // The follow merges its own polls' files, as it always did.
            merge_small_files: false,
            lock_timeout: config.lock_timeout,
            operation: "follow",
            ..SyncConfig::default()
        };
        let mut follower = Follower {
            syncer: Syncer::new(client, lake, sync),
            config,
            jobs,
            selection,
            bars,
            key,
            start: None,
            pushed: HashMap::new(),
            last_closed: BTreeMap::new(),
            unstored: None,
            suspect: None,
            answered: false,
            commits: 0,
            written: BTreeSet::new(),
        };
        if !follower.config.reset {
            follower.resume()?;
        }
        Ok(follower)
    }

    /// The lake written to.
    pub fn lake(&self) -> &Arc<Lake> {
        self.syncer.lake()
    }

    /// The watermark, if the follow has one yet.
    pub fn watermark(&self) -> Option<DateTime<Utc>> {
        self.bars
            .watermark()
            .and_then(DateTime::from_timestamp_micros)
    }

    /// Each followed token's open bar, flagged `incomplete` (it may still change).
    pub fn provisional(&self) -> Result<DataFrame> {
        self.bars.provisional()
    }

    /// Swaps that arrived for bars already closed (before the watermark), per token, since
    /// this follower started: in the lake, never merged into a bar.
    pub fn late(&self) -> BTreeMap<String, u64> {
        self.bars.late()
    }

    /// Rebuilds the open bars from the lake when the follow has a committed state: replays
    /// this follow's swaps from where its state says (each token's last closed bar or open
    /// bar) to its watermark. The bars the replay closes were committed before.
    fn resume(&mut self) -> Result<()> {
        let lake = Arc::clone(self.syncer.lake());
        let Some(saved) = lake.state(&self.key)? else {
            return Ok(());
        };
        let saved: Saved = serde_json::from_value(saved)
            .map_err(|e| Error::Config(format!("follow state {}: {e}", self.key)))?;
        self.start = Some(saved.start);
        let from = saved.replay_from.unwrap_or(saved.start).max(saved.start);
        if from < saved.watermark {
            let range = TimeRange {
                from: DateTime::from_timestamp_micros(from),
                to: DateTime::from_timestamp_micros(saved.watermark),
            };
            for t in load_events(&lake, EventSource::Swaps, &self.selection, range)? {
                self.bars.push(&t.token, ticks_of(&t));
            }
        }
        let replayed = self.bars.advance(saved.watermark)?.closed;
        self.note_closed(&replayed)?;
        Ok(())
    }

    /// Records the label of each token's last bar in `closed`.
    fn note_closed(&mut self, closed: &DataFrame) -> Result<()> {
        for (token, label) in labels(closed)? {
            let last = self.last_closed.entry(token).or_insert(label);
            *last = (*last).max(label);
        }
        Ok(())
    }

    /// Where a restart's replay must start: the earliest of each token's last closed bar and
    /// open bar; `None` when there is neither.
    fn replay_from(&self) -> Result<Option<i64>> {
        let open = labels(&self.bars.provisional()?)?;
        Ok(self
            .last_closed
            .values()
            .copied()
            .chain(open.into_iter().map(|(_, l)| l))
            .min())
    }

    /// Whether a stream of the follow's jobs records an unfinished run (it resumes from its
    /// cursor and ends where that run began).
    fn unfinished_streams(&self, lake: &Lake) -> Result<bool> {
        Ok(crate::sync::recorded::of_jobs(lake, &self.jobs)?
            .iter()
            .any(|r| r.interrupted))
    }

    /// One poll: syncs what is new, moves the watermark and returns the bars it closed (not
    /// yet committed: print them, then [`commit`](Self::commit) them). A permanent failure is
    /// an error; a transient one holds the poll (see the module documentation).
    pub async fn poll(&mut self, cancel: &CancelToken) -> Result<PollReport> {
        // Dates seen before this poll do not count for it.
        let _ = self.syncer.client().take_earliest_server_date();
        let lake = Arc::clone(self.syncer.lake());
        let before = swaps_files(&lake)?;
        let mut sync = SyncReport::default();
        // A stream left unfinished is finished first, then synced again from the newest page.
        let mut complete = false;
        for _ in 0..3 {
            let unfinished = self.unfinished_streams(&lake)?;
            let pass = self.syncer.run_with(&self.jobs, &(), cancel).await;
            self.written.extend(pass.partitions.iter().cloned());
            let finished = !pass.any_failed() && !pass.interrupted();
            add_pass(&mut sync, pass);
            if !finished {
                break;
            }
            if !unfinished {
                complete = true;
                break;
            }
        }
        let date = self.syncer.client().take_earliest_server_date();
        if date.is_some() {
            self.answered = true;
        }
        if !complete {
            let failure = sync.jobs.iter().find_map(|j| j.outcome.error());
            let failed = failure.is_some();
            if failure.is_some_and(|e| !is_transient(e, self.answered)) {
                let report = self.held(sync, String::new())?;
                return Err(report
                    .into_error()
                    .unwrap_or_else(|| invalid("poll", "a failed job without an error")));
            }
            let reason = match failed {
                true => sync
                    .jobs
                    .iter()
                    .filter_map(|j| j.outcome.error().map(|e| format!("{}: {e}", j.job)))
                    .collect::<Vec<_>>()
                    .join("; "),
                false if cancel.is_cancelled() => "interrupted".to_owned(),
                false => "a stream did not finish".to_owned(),
            };
            return self.held(sync, reason);
        }
        let Some(date) = date else {
            if sync.http_requests > 0 {
                return Err(Error::ServiceAnswer {
                    url: self.syncer.client().config().base_url.to_string(),
                    reason: "answered without a `Date` header; follow takes its watermark from the service's clock (the `Date` of its answers) and cannot close bars without it".to_owned(),
                });
            }
            return self.held(sync, "the service sent no answer".to_owned());
        };
        let previous = self.bars.watermark();
        let candidate = date.timestamp_micros();
        // A `Date` far past what the follow knew is not trusted until the next poll confirms it.
        let jump = i64::try_from(self.config.max_date_jump.as_micros()).unwrap_or(i64::MAX);
        let reference = match previous {
            Some(w) => Some(w),
            None => newest_swap(&lake)?,
        };
        if let Some(r) = reference
            && candidate > r.saturating_add(jump)
        {
            let confirmed = self
                .suspect
                .is_some_and(|s| candidate >= s && candidate - s <= jump);
            if !confirmed {
                self.suspect = Some(candidate);
                let reason = format!(
                    "the service's Date {} is more than {} past {} {}; not trusted until the next poll confirms it",
                    date.to_rfc3339(),
                    show_duration(self.config.max_date_jump),
                    if previous.is_some() {
                        "the watermark"
                    } else {
                        "the lake's newest swap"
                    },
                    show_micros(r)
                );
                return self.held(sync, reason);
            }
        }
        self.suspect = None;
        let mut watermark = candidate.max(previous.unwrap_or(i64::MIN));
        let start = match self.start {
            Some(s) => s,
            None => {
                let since = self
                    .config
                    .since
                    .map_or(watermark, |t| t.timestamp_micros());
                let s = bucket_start(since, self.config.interval_seconds);
                self.start = Some(s);
                s
            }
        };
        watermark = watermark.max(start);
        // The swaps this poll's commits added before the previous watermark are late; they are
        // counted only when no file was removed meanwhile (a compaction's new files hold old
        // swaps).
        let mut late = 0;
        if let Some(w) = previous
            && w > start
        {
            let after = swaps_files(&lake)?;
            if before.is_subset(&after) && after.len() > before.len() {
                let added: BTreeSet<String> = after.difference(&before).cloned().collect();
                let range = TimeRange {
                    from: DateTime::from_timestamp_micros(start),
                    to: DateTime::from_timestamp_micros(w),
                };
                let (lake, selection) = (Arc::clone(&lake), self.selection.clone());
                let tokens = blocking("reading the late swaps", move || {
                    load_events_in_files(&lake, EventSource::Swaps, &selection, range, &added)
                })
                .await?;
                for t in &tokens {
                    late += self.bars.push(&t.token, ticks_of(t));
                }
            }
        }
        // The swaps at or after the previous watermark, as the lake now holds them.
        let from = previous.map_or(start, |w| w.max(start));
        let range = TimeRange {
            from: DateTime::from_timestamp_micros(from),
            to: None,
        };
        let selection = self.selection.clone();
        let reading = Arc::clone(&lake);
        let tokens = blocking("reading the new swaps", move || {
            load_events(&reading, EventSource::Swaps, &selection, range)
        })
        .await?;
        let mut new_events = 0;
        for t in &tokens {
            let fresh: Vec<_> = ticks_of(t)
                .filter(|e| self.pushed.insert(e.id, e.time).is_none())
                .collect();
            new_events += fresh.len();
            self.bars.push(&t.token, fresh);
        }
        let update = self.bars.advance(watermark)?;
        self.pushed.retain(|_, time| *time >= watermark);
        self.note_closed(&update.closed)?;
        Ok(PollReport {
            closed: update.closed,
            watermark: self.watermark(),
            advanced: true,
            held: None,
            new_events,
            late,
            sync,
        })
    }

    /// The report of a poll held for `reason`: nothing closes.
    fn held(&mut self, sync: SyncReport, reason: String) -> Result<PollReport> {
        // An empty frame of the bars' columns.
        let closed = match self.bars.watermark() {
            Some(w) => self.bars.advance(w)?.closed,
            None => bars_frame(BarColumns::default(), Some(Vec::new()))?,
        };
        Ok(PollReport {
            closed,
            watermark: self.watermark(),
            advanced: false,
            held: Some(reason),
            new_events: 0,
            late: 0,
            sync,
        })
    }

    /// Commits `closed` (a poll's bars), with the bars of earlier commits that failed, to the
    /// lake's `bars` dataset with the watermark, in one commit that waits up to
    /// [`FollowConfig::lock_timeout`] for another writer; every
    /// [`FollowConfig::compact_every`] commits, merges the files of the partitions the follow
    /// wrote since the last time and vacuums with [`FollowConfig::vacuum_retain`]. On failure
    /// the bars are kept for the next commit.
    pub fn commit(&mut self, closed: &DataFrame) -> Result<()> {
        let (Some(start), Some(watermark)) = (self.start, self.bars.watermark()) else {
            return Ok(());
        };
        let bars = match self.unstored.take() {
            Some(mut kept) => {
                kept.vstack_mut(closed)
                    .map_err(Error::polars("keeping bars to commit"))?;
                kept
            }
            None => closed.clone(),
        };
        let saved = Saved {
            start,
            watermark,
            replay_from: self.replay_from()?,
        };
        let lake = Arc::clone(self.syncer.lake());
        let written = (|| {
            let mut tx = lake.transaction_within(self.config.lock_timeout)?;
            tx.set_operation("follow");
            if bars.height() > 0 {
                tx.write(
                    Dataset::Bars,
                    bars_batch(&bars, self.config.interval_seconds)?,
                )?;
            }
            tx.set_state(self.key.clone(), json!(saved));
            tx.commit()
        })();
        let summary = match written {
            Ok(summary) => summary,
            Err(e) => {
                if bars.height() > 0 {
                    self.unstored = Some(bars);
                }
                return Err(e);
            }
        };
        self.written.extend(summary.partitions);
        self.commits += 1;
        if self.config.compact_every > 0 && self.commits.is_multiple_of(self.config.compact_every) {
            lake.compact_partitions(&self.written)?;
            self.written.clear();
            if let Some(retain) = self.config.vacuum_retain {
                lake.vacuum(crate::lake::VacuumOptions {
                    retain,
                    dry_run: false,
                })?;
            }
        }
        Ok(())
    }
}

/// Shortest poll period a follow accepts, seconds: the backoff after failed polls starts
/// from it.
pub const MIN_POLL_SECS: f64 = 0.05;

/// Longest poll period a follow accepts, seconds: a day.
pub const MAX_POLL_SECS: f64 = 86_400.0;

/// Longest wait after failed polls.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The wait before a follow's next poll, from the start of the last one: the `period`,
/// doubled after each of the `failing` polls in a row that could not move the watermark (a
/// held poll, a commit refused by a busy lake), up to [`MAX_BACKOFF`] (or the period when
/// longer).
pub fn backoff(period: Duration, failing: u32) -> Duration {
    if failing == 0 {
        return period;
    }
    (period * 2u32.pow(failing.min(10)))
        .min(MAX_BACKOFF)
        .max(period)
}

/// Whether a poll that failed with `e` may succeed if tried again: the service's 429 and 5xx,
/// malformed or endless answers, a lost connection once the service has `answered`, a lake
/// locked by another writer. A refused request, a service never reached and the lake's own
/// failures are not.
#[doc(hidden)]
pub fn is_transient(e: &Error, answered: bool) -> bool {
    match e {
        Error::Sync { source, .. } | Error::RetriesExhausted { source, .. } => {
            is_transient(source, answered)
        }
        Error::Api { status, .. } => status.is_retryable(),
        Error::Transport { .. } => answered,
        Error::Decode { .. }
        | Error::ResponseTooLarge { .. }
        | Error::RepeatedCursor { .. }
        | Error::EndlessPaging { .. }
        | Error::LakeLocked { .. }
        | Error::CommitConflict { .. } => true,
        _ => false,
    }
}

/// Adds a sync pass to the poll's report: the jobs' counts summed, the last pass's outcomes.
fn add_pass(total: &mut SyncReport, pass: SyncReport) {
    if total.jobs.is_empty() {
        *total = pass;
        return;
    }
    for (t, p) in total.jobs.iter_mut().zip(pass.jobs) {
        t.rows_added += p.rows_added;
        t.rows_fetched += p.rows_fetched;
        t.requests += p.requests;
        t.outcome = p.outcome;
    }
    total.http_requests += pass.http_requests;
    total.retries += pass.retries;
    total.elapsed += pass.elapsed;
    total.commits += pass.commits;
    total.files_added += pass.files_added;
    total.files_merged += pass.files_merged;
    total.fetch_elapsed += pass.fetch_elapsed;
    total.commits_elapsed += pass.commits_elapsed;
    total.commit_time += pass.commit_time;
    total.partitions.extend(pass.partitions);
    total.partitions_written = total.partitions.len();
}

/// The committed swaps files of the lake.
fn swaps_files(lake: &Lake) -> Result<BTreeSet<String>> {
    Ok(lake
        .snapshot()?
        .files_of(Dataset::Swaps)
        .map(|(p, _)| p.clone())
        .collect())
}

/// The newest swap time the lake holds (µs), from the manifest.
fn newest_swap(lake: &Lake) -> Result<Option<i64>> {
    Ok(lake
        .snapshot()?
        .files_of(Dataset::Swaps)
        .map(|(_, e)| e.max_time.timestamp_micros())
        .max())
}

/// Runs `f` on the blocking pool.
async fn blocking<T: Send + 'static>(
    context: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Task {
            context: context.into(),
            source: e,
        })?
}

/// `(token, label µs)` of each bar of a frame of bars.
fn labels(bars: &DataFrame) -> Result<Vec<(String, i64)>> {
    if bars.height() == 0 {
        return Ok(Vec::new());
    }
    let fail = Error::polars("reading bar labels");
    let tokens = bars
        .column("token_address")
        .and_then(|c| c.str().cloned())
        .map_err(&fail)?;
    let times = bars
        .column("timestamp")
        .map_err(&fail)?
        .cast(&DataType::Int64)
        .map_err(&fail)?;
    let times = times.i64().map_err(&fail)?;
    Ok(tokens
        .iter()
        .zip(times.iter())
        .filter_map(|(t, l)| Some((t?.to_owned(), l?)))
        .collect())
}

/// An instant for a message.
fn show_micros(micros: i64) -> String {
    DateTime::from_timestamp_micros(micros)
        .map_or_else(|| format!("{micros} µs"), |t| t.to_rfc3339())
}

/// A duration for a message, in hours when whole.
fn show_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(3600) {
        format!("{} h", s / 3600)
    } else {
        format!("{s} s")
    }
}

/// The events of a token as ticks.
fn ticks_of(t: &TokenEvents) -> impl Iterator<Item = Tick> + '_ {
    (0..t.events.len()).map(|i| t.events.tick(i))
}

/// The start of the `width`-second bucket holding `t` (µs), on the epoch's grid.
fn bucket_start(t: i64, width: i64) -> i64 {
    let w = width.saturating_mul(1_000_000).max(1);
    t.div_euclid(w) * w
}

fn invalid(argument: &str, reason: &str) -> Error {
    Error::InvalidArgument {
        argument: argument.into(),
        reason: reason.into(),
    }
}

/// Closed bars (a frame of `token_address` and the bar columns) as a batch of the lake's
/// `bars` dataset.
#[doc(hidden)]
pub fn bars_batch(closed: &DataFrame, interval_seconds: i64) -> Result<RecordBatch> {
    let fail = Error::polars("storing bars");
    let n = closed.height();
    let f64s = |name: &str| -> Result<ArrayRef> {
        let c = closed
            .column(name)
            .and_then(|c| c.f64().cloned())
            .map_err(&fail)?;
        Ok(Arc::new(c.iter().collect::<Float64Array>()))
    };
    let tokens = closed
        .column(token::TOKEN)
        .and_then(|c| c.str().cloned())
        .map_err(&fail)?;
    let times = closed
        .column(bar::TIMESTAMP)
        .map_err(&fail)?
        .cast(&DataType::Int64)
        .map_err(&fail)?;
    let times = times.i64().map_err(&fail)?;
    let counts = closed
        .column("count")
        .and_then(|c| c.i64().cloned())
        .map_err(&fail)?;
    let schema = schema::record_schema(Dataset::Bars);
    let timestamp: ArrayRef = Arc::new(
        times
            .iter()
            .collect::<TimestampMicrosecondArray>()
            .with_timezone("UTC"),
    );
    let columns: Vec<ArrayRef> = vec![
        Arc::new(tokens.iter().collect::<StringArray>()),
        Arc::new(Int64Array::from(vec![interval_seconds; n])),
        timestamp,
        f64s("open")?,
        f64s("high")?,
        f64s("low")?,
        f64s("close")?,
        f64s("volume")?,
        f64s("base_volume")?,
        f64s("buy_volume")?,
        f64s("sell_volume")?,
        f64s("sum_pq")?,
        f64s("sum_q")?,
        Arc::new(counts.iter().collect::<Int64Array>()),
        f64s("vwap")?,
    ];
    RecordBatch::try_new(schema, columns).map_err(|e| Error::Arrow {
        context: "storing bars".into(),
        source: e,
    })
}
