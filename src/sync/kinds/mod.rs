//! The kinds of sync job, one type per kind and one file per type, and [`JobKind`], which turns
//! a [`Job`] into the type of its kind once and dispatches to it.
//!
//! - `streams.rs`: [`StreamJob`], swaps and trades, newest first;
//! - `candles.rs`: [`CandlesJob`]; `price_history.rs`: [`PriceHistoryJob`]; both record the
//!   time ranges they cover with `coverage.rs`;
//! - `snapshots.rs`: [`SnapshotJob`], prices, price stats, EVM profiles and portfolios;
//! - `profiles.rs`: [`AltProfilesJob`], every page of one search-profiles request;
//! - `recorded.rs`: what every kind's recorded state says was fetched, read by
//!   `dexlake status` and the coverage of the analytics (`crate::coverage`).
//!
//! [`merged_state`] says how a hand-off's state joins the one recorded under its key; the
//! commit applies it.
//!
//! A kind fetches through its [`JobContext`] (the client, the recorded states, the hand-off
//! to the run's commit buffer) and never commits. Kinds may import `context`, `state`,
//! `commit`'s [`BatchBuilder`](crate::sync::commit::BatchBuilder) and `ranges`, never the
//! runner.

mod candles;
mod coverage;
mod price_history;
mod profiles;
pub(crate) mod recorded;
mod snapshots;
mod streams;

use serde_json::Value;

use candles::CandlesJob;
use coverage::CoverState;
use price_history::PriceHistoryJob;
use profiles::AltProfilesJob;
use snapshots::{SnapshotJob, SnapshotRequest};
use streams::StreamJob;

use super::config::SyncConfig;
use super::context::JobContext;
use super::jobs::Job;
use super::state::SyncStates;
use crate::api::requests::{SwapsRequest, TradesRequest};
use crate::error::Result;
use crate::lake::Dataset;
use crate::lake::convert::CandleSeries;

/// The state a hand-off records under `key`, given what is recorded there already (committed,
/// or staged earlier in the same commit). The time ranges of candles and price history are a
/// union: jobs of one run read the states as the run found them, so of two jobs of one series
/// (candles over two ranges in one plan), the one committing last would otherwise record only
/// its own ranges. Every other state is its job's own progress and replaces the recorded one.
pub(crate) fn merged_state(key: &str, recorded: Option<&Value>, new: Value) -> Value {
    let covers = key
        .strip_prefix("sync/")
        .and_then(|rest| rest.split_once('/'))
        .and_then(|(name, _)| name.parse::<Dataset>().ok())
        .is_some_and(|d| matches!(d, Dataset::Candles | Dataset::PriceHistory));
    let Some(recorded) = recorded.filter(|_| covers) else {
        return new;
    };
    let decode = |v: &Value| serde_json::from_value::<CoverState>(v.clone()).ok();
    match (decode(recorded), decode(&new)) {
        (Some(old), Some(mut merged)) => {
            merged.absorb(&old);
            serde_json::to_value(&merged).unwrap_or(new)
        }
        _ => new,
    }
}

/// How a job's fetching ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FetchEnd {
    /// Everything asked for was fetched and handed off.
    Complete,
    /// The run was cancelled; what was fetched before was handed off.
    Cancelled,
}

/// A job as the type of its kind, with exactly what that kind needs.
pub(crate) enum JobKind<'j> {
    Swaps(StreamJob<SwapsRequest>),
    Trades(StreamJob<TradesRequest>),
    Candles(CandlesJob),
    PriceHistory(PriceHistoryJob<'j>),
    Snapshot(SnapshotJob),
    AltProfiles(AltProfilesJob<'j>),
}

impl<'j> JobKind<'j> {
    /// The kind of `job`, its requests paged by `config`.
    pub(crate) fn of(job: &'j Job, config: &SyncConfig) -> Self {
        let limit = Some(config.page_limit);
        match job {
            Job::Swaps {
                token,
                wallet,
                pool,
            } => JobKind::Swaps(StreamJob {
                request: SwapsRequest {
                    wallet: wallet.clone(),
                    token: token.clone(),
                    pool: pool.clone(),
                    limit,
                    cursor: None,
                },
            }),
            Job::Trades { token, wallet } => JobKind::Trades(StreamJob {
                request: TradesRequest {
                    wallet: wallet.clone(),
                    token: token.clone(),
                    limit,
                    cursor: None,
                },
            }),
            Job::Candles {
                token,
                pool,
                interval,
                from,
                to,
            } => JobKind::Candles(CandlesJob {
                series: CandleSeries {
                    token: token.clone(),
                    pool: pool.clone(),
                    interval: *interval,
                },
                from: *from,
                to: *to,
            }),
            Job::PriceHistory {
                chain_id,
                tokens,
                pools,
                interval,
                from,
                to,
            } => JobKind::PriceHistory(PriceHistoryJob {
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
            } => JobKind::Snapshot(SnapshotJob {
                requests: SnapshotRequest::prices(*chain_id, tokens, pools, false),
            }),
            Job::PriceStats {
                chain_id,
                tokens,
                pools,
            } => JobKind::Snapshot(SnapshotJob {
                requests: SnapshotRequest::prices(*chain_id, tokens, pools, true),
            }),
            Job::EvmProfiles { chain_id, tokens } => JobKind::Snapshot(SnapshotJob {
                requests: SnapshotRequest::evm_profiles(*chain_id, tokens),
            }),
            Job::Portfolios { wallets } => JobKind::Snapshot(SnapshotJob {
                requests: SnapshotRequest::portfolios(wallets),
            }),
            Job::AltProfiles { request } => JobKind::AltProfiles(AltProfilesJob { request }),
        }
    }

    /// Fetches what the job's state under `key` says is missing, handing everything to the
    /// run's commit buffer through `ctx`.
    pub(crate) async fn fetch(self, key: &str, ctx: &mut JobContext<'_>) -> Result<FetchEnd> {
        match self {
            JobKind::Swaps(job) => job.fetch(key, ctx).await,
            JobKind::Trades(job) => job.fetch(key, ctx).await,
            JobKind::Candles(job) => job.fetch(key, ctx).await,
            JobKind::PriceHistory(job) => job.fetch(key, ctx).await,
            JobKind::Snapshot(job) => job.fetch(key, ctx).await,
            JobKind::AltProfiles(job) => job.fetch(key, ctx).await,
        }
    }

    /// A dry run: the requests the job will make, when known, and how that was reached.
    pub(crate) fn estimate(
        &self,
        key: &str,
        states: &SyncStates<'_>,
        config: &SyncConfig,
    ) -> Result<(Option<u64>, String)> {
        match self {
            JobKind::Swaps(job) => job.estimate(key, states, config),
            JobKind::Trades(job) => job.estimate(key, states, config),
            JobKind::Candles(job) => job.estimate(key, states, config),
            JobKind::PriceHistory(job) => job.estimate(key, states, config),
            JobKind::Snapshot(job) => job.estimate(key, states),
            JobKind::AltProfiles(_) => Ok((None, "every page of the search".to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::merged_state;

    fn cover(ranges: &[(i64, i64)], newest: i64) -> serde_json::Value {
        json!({
            "covered": ranges.iter().map(|&(s, e)| json!({"start": s, "end": e})).collect::<Vec<_>>(),
            "newest_point": newest,
        })
    }

    #[test]
    fn covered_ranges_of_one_key_add_up_and_other_states_replace() {
        let recorded = cover(&[(0, 100)], 90);
        let new = cover(&[(200, 300)], 290);
        for key in [
            "sync/candles/token=T/interval=60",
            "sync/price_history/evm-1/abc/token=T",
        ] {
            let merged = merged_state(key, Some(&recorded), new.clone());
            assert_eq!(
                merged["covered"],
                cover(&[(0, 100), (200, 300)], 0)["covered"]
            );
            assert_eq!(merged["newest_point"], 290);
            // The earlier state's newer point stays.
            let merged = merged_state(key, Some(&new), recorded.clone());
            assert_eq!(merged["newest_point"], 290);
            assert_eq!(merged_state(key, None, new.clone()), new);
        }
        // A stream's or a snapshot's state is its job's progress: replaced.
        for key in ["sync/swaps/token=T", "sync/prices/evm-1/x"] {
            assert_eq!(merged_state(key, Some(&recorded), new.clone()), new);
        }
        // A value that is not a coverage state is kept as given.
        let odd = json!({"cursor": 3});
        assert_eq!(
            merged_state(
                "sync/candles/token=T/interval=60",
                Some(&recorded),
                odd.clone()
            ),
            odd
        );
    }
}
