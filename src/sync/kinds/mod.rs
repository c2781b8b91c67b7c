//! The kinds of sync job, one type per kind and one file per type, and [`JobKind`], which turns
//! a [`Job`] into the type of its kind once and dispatches to it.
//!
//! - `streams.rs`: [`StreamJob`], swaps and trades, newest first;
//! - `candles.rs`: [`CandlesJob`]; `price_history.rs`: [`PriceHistoryJob`]; both record the
//!   time ranges they cover with `coverage.rs`;
//! - `snapshots.rs`: [`SnapshotJob`], prices, price stats, EVM profiles and portfolios;
//! - `profiles.rs`: [`AltProfilesJob`], every page of one search-profiles request;
//!
//! The kinds' states and their keys are in `sync::state`, which alone reads and writes them.
//!
//! A kind fetches through its [`JobContext`] (the client, the recorded states, the hand-off
//! to the run's commit buffer) and never commits. Kinds may import `context`, `state`,
//! `commit`'s [`BatchBuilder`](crate::sync::commit::BatchBuilder) and `ranges`, never the
//! runner.

mod candles;
mod coverage;
mod price_history;
mod profiles;
mod snapshots;
mod streams;

use candles::CandlesJob;
use price_history::PriceHistoryJob;
use profiles::AltProfilesJob;
use snapshots::{SnapshotJob, SnapshotRequest};
use streams::StreamJob;

use super::config::SyncConfig;
use super::context::JobContext;
use super::jobs::Job;
use super::state::{StateKey, SyncStates};
use crate::api::requests::{SwapsRequest, TradesRequest};
use crate::error::Result;
use crate::lake::convert::CandleSeries;

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
    pub(crate) async fn fetch(self, key: &StateKey, ctx: &mut JobContext<'_>) -> Result<FetchEnd> {
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
        key: &StateKey,
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
