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
//! [`LiveBars`], and the bars the new watermark closes are returned. A poll whose sync did not
//! finish every job (an outage, retries exhausted, Ctrl-C) keeps the watermark where it was:
//! bars close only over data the lake holds completely.
//!
//! **Committing.** [`Follower::commit`] writes the closed bars to the lake's `bars` dataset and
//! the watermark to the follow's state in one commit. A caller prints a poll's bars first and
//! commits them second, so after a kill only the bars of the poll in flight can be printed
//! again (with the same values: they are computed from committed swaps), and none is lost.
//! A new [`Follower`] on the same lake, tokens and interval resumes at the committed
//! watermark: it replays the lake's swaps from each token's last stored bar to rebuild the
//! open bars, and returns nothing twice.
//!
//! **Where bars begin.** On a first start, at the bucket holding [`FollowConfig::since`]
//! (default: the first watermark), so every bar holds a whole bucket. The follow's history
//! is synced all the same.
//!
//! Imports `api`, `lake`, `sync` and `analytics`; the CLI imports it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, Utc};
use polars::prelude::*;
use serde_json::json;

use crate::analytics::ohlcv::{BarColumns, bars_frame};
use crate::analytics::{
    BarOptions, BarRule, EventSource, LiveBars, Selection, Tick, TimeRange, TokenEvents,
    load_events,
};
use crate::api::Client;
use crate::lake::cols::{bar, token};
use crate::lake::{Dataset, Lake, Partition, schema};
use crate::sync::{CancelToken, Job, SyncConfig, SyncReport, Syncer};
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
    /// watermark. Ignored when resuming.
    pub since: Option<DateTime<Utc>>,
    /// Every this many commits the files the follow wrote are merged (the partitions its polls
    /// and its bars wrote into, and no other), so their count stays bounded over days of
    /// running.
    pub compact_every: u64,
}

impl Default for FollowConfig {
    fn default() -> Self {
        FollowConfig {
            tokens: Vec::new(),
            pool: None,
            wallet: None,
            interval_seconds: 60,
            since: None,
            compact_every: 200,
        }
    }
}

/// What one [`Follower::poll`] did.
#[derive(Debug)]
pub struct PollReport {
    /// Bars the poll closed: `token_address` then the bar columns, by token then time.
    pub closed: DataFrame,
    /// The watermark after the poll, if the follow has one yet.
    pub watermark: Option<DateTime<Utc>>,
    /// Whether the watermark moved (false when a sync job did not finish).
    pub advanced: bool,
    /// Swaps new to the bars.
    pub new_events: usize,
    /// The sync run.
    pub sync: SyncReport,
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
    commits: u64,
    /// Partitions written since the last compaction.
    written: BTreeSet<Partition>,
}

/// The stored state of a follow.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
struct Saved {
    start: i64,
    watermark: i64,
}

impl Follower {
    /// A follow of `config` writing into `lake` through `client`, resumed from the lake's
    /// state of the same tokens (or pool) and interval when there is one.
    pub fn new(client: Client, lake: Arc<Lake>, config: FollowConfig) -> Result<Follower> {
        let selection = match (&config.pool, config.tokens.as_slice()) {
            (Some(pool), []) => Selection::Pool(pool.clone()),
            (None, [_, ..]) => Selection::Tokens(config.tokens.clone()),
            (Some(_), _) => return Err(invalid("pool", "follow either tokens or a pool")),
            (None, []) => return Err(invalid("token", "name the tokens (or the pool) to follow")),
        };
        selection.validate()?;
        let options = BarOptions::with_width(config.interval_seconds);
        let bars = LiveBars::new(BarRule::Time(options))?;
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
            commits: 0,
            written: BTreeSet::new(),
        };
        follower.resume()?;
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

    /// Swaps pushed after the watermark that arrived late (before it), per token: never
    /// merged into a bar.
    pub fn late(&self) -> BTreeMap<String, u64> {
        self.bars.late()
    }

    /// Rebuilds the open bars from the lake when the follow has a committed state.
    fn resume(&mut self) -> Result<()> {
        let lake = Arc::clone(self.syncer.lake());
        let Some(saved) = lake.state(&self.key)? else {
            return Ok(());
        };
        let saved: Saved = serde_json::from_value(saved)
            .map_err(|e| Error::Config(format!("follow state {}: {e}", self.key)))?;
        self.start = Some(saved.start);
        // From each token's last stored bar (its bucket is where the kernels' state starts
        // again), or from the start; the bars the replay closes were committed before.
        let last = self.last_stored_labels(&lake, saved.start)?;
        let from = match &self.selection {
            Selection::Tokens(tokens) => tokens
                .iter()
                .map(|t| last.get(t).copied().unwrap_or(saved.start))
                .min()
                .unwrap_or(saved.start),
            _ => last.values().copied().min().unwrap_or(saved.start),
        };
        let range = TimeRange {
            from: DateTime::from_timestamp_micros(from),
            to: DateTime::from_timestamp_micros(saved.watermark),
        };
        for t in load_events(&lake, EventSource::Swaps, &self.selection, range)? {
            self.bars.push(&t.token, ticks_of(&t));
        }
        self.bars.advance(saved.watermark)?;
        Ok(())
    }

    /// The label of the last stored bar of each token of this follow's interval, at or after
    /// `start`.
    fn last_stored_labels(&self, lake: &Lake, start: i64) -> Result<BTreeMap<String, i64>> {
        let stored = lake
            .scan(Dataset::Bars)?
            .filter(
                col(bar::INTERVAL)
                    .eq(lit(self.config.interval_seconds))
                    .and(col(bar::TIMESTAMP).cast(DataType::Int64).gt_eq(lit(start))),
            )
            .group_by([col(token::TOKEN)])
            .agg([col(bar::TIMESTAMP).cast(DataType::Int64).max()])
            .collect()
            .map_err(Error::polars("reading the stored bars"))?;
        let tokens = stored
            .column(token::TOKEN)
            .and_then(|c| c.str().cloned())
            .map_err(Error::polars("reading the stored bars"))?;
        let labels = stored
            .column(bar::TIMESTAMP)
            .and_then(|c| c.i64().cloned())
            .map_err(Error::polars("reading the stored bars"))?;
        Ok(tokens
            .iter()
            .zip(labels.iter())
            .filter_map(|(t, l)| Some((t?.to_owned(), l?)))
            .collect())
    }

    /// One poll: syncs what is new, moves the watermark and returns the bars it closed (not
    /// yet committed: print them, then [`commit`](Self::commit) them).
    pub async fn poll(&mut self, cancel: &CancelToken) -> Result<PollReport> {
        // Dates seen before this poll do not count for it.
        let _ = self.syncer.client().take_earliest_server_date();
        let sync = self.syncer.run_with(&self.jobs, &(), cancel).await;
        self.written.extend(sync.partitions.iter().cloned());
        let complete = !sync.any_failed() && !sync.interrupted();
        let date = self.syncer.client().take_earliest_server_date();
        let previous = self.bars.watermark();
        let mut watermark = match (complete, date) {
            (true, Some(d)) => d.timestamp_micros().max(previous.unwrap_or(i64::MIN)),
            _ => {
                // No new watermark: nothing closes (an empty frame of the bars' columns).
                let closed = match previous {
                    Some(w) => self.bars.advance(w)?.closed,
                    None => bars_frame(BarColumns::default(), Some(Vec::new()))?,
                };
                return Ok(PollReport {
                    closed,
                    watermark: self.watermark(),
                    advanced: false,
                    new_events: 0,
                    sync,
                });
            }
        };
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
        // The swaps at or after the previous watermark, as the lake now holds them.
        let from = previous.map_or(start, |w| w.max(start));
        let range = TimeRange {
            from: DateTime::from_timestamp_micros(from),
            to: None,
        };
        let lake = Arc::clone(self.syncer.lake());
        let selection = self.selection.clone();
        let tokens = tokio::task::spawn_blocking(move || {
            load_events(&lake, EventSource::Swaps, &selection, range)
        })
        .await
        .map_err(|e| Error::Task {
            context: "reading the new swaps".into(),
            source: e,
        })??;
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
        Ok(PollReport {
            closed: update.closed,
            watermark: self.watermark(),
            advanced: true,
            new_events,
            sync,
        })
    }

    /// Commits `closed` (a poll's bars) to the lake's `bars` dataset with the watermark, in one
    /// commit; every [`FollowConfig::compact_every`] commits, merges the files of the partitions
    /// the follow wrote since the last time.
    pub fn commit(&mut self, closed: &DataFrame) -> Result<()> {
        let (Some(start), Some(watermark)) = (self.start, self.bars.watermark()) else {
            return Ok(());
        };
        let lake = Arc::clone(self.syncer.lake());
        let mut tx = lake.transaction()?;
        if closed.height() > 0 {
            tx.write(
                Dataset::Bars,
                bars_batch(closed, self.config.interval_seconds)?,
            )?;
        }
        let saved = Saved { start, watermark };
        tx.set_state(self.key.clone(), json!(saved));
        let summary = tx.commit()?;
        self.written.extend(summary.partitions);
        self.commits += 1;
        if self.config.compact_every > 0 && self.commits.is_multiple_of(self.config.compact_every) {
            lake.compact_partitions(&self.written)?;
            self.written.clear();
        }
        Ok(())
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
