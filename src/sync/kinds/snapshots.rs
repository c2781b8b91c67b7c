//! Snapshots of prices, price stats, EVM profiles and portfolios: chunked requests sharing one
//! fetch time, resumed chunk by chunk.

use chrono::{DateTime, Utc};

use super::FetchEnd;
use crate::api::client::Client;
use crate::api::models::TimeWindow;
use crate::api::requests::{
    AltPricesRequest, EvmPricesRequest, GetProfileRequest, MAX_PRICE_ADDRESSES, PortfolioRequest,
    ProfileOptions,
};
use crate::error::Result;
use crate::lake::convert::{EvmSnapshot, ToBatch};
use crate::sync::commit::BatchBuilder;
use crate::sync::context::JobContext;
use crate::sync::state::{SnapshotRun, SnapshotState, StateKey, SyncStates, entry};

/// One request of a snapshot job.
#[derive(Debug, Clone)]
pub(crate) enum SnapshotRequest {
    /// Latest EVM prices of up to 1000 tokens or pools.
    EvmPrices(EvmPricesRequest),
    /// Latest altchain prices of up to 1000 tokens or pools.
    AltPrices(AltPricesRequest),
    /// EVM price stats of up to 1000 tokens or pools.
    EvmPriceStats(EvmPricesRequest),
    /// Altchain price stats of up to 1000 tokens or pools.
    AltPriceStats(AltPricesRequest),
    /// One EVM profile with its metadata and every window.
    EvmProfile(GetProfileRequest),
    /// One wallet's portfolio.
    Portfolio(PortfolioRequest),
}

impl SnapshotRequest {
    /// The requests of a latest-price (`stats` false) or price-stats snapshot: the tokens,
    /// then the pools, at most [`MAX_PRICE_ADDRESSES`] per request.
    pub(crate) fn prices(
        chain_id: Option<i64>,
        tokens: &[String],
        pools: &[String],
        stats: bool,
    ) -> Vec<Self> {
        let token_chunks = tokens
            .chunks(MAX_PRICE_ADDRESSES)
            .map(|c| (Some(c.to_vec()), None));
        let pool_chunks = pools
            .chunks(MAX_PRICE_ADDRESSES)
            .map(|c| (None, Some(c.to_vec())));
        token_chunks
            .chain(pool_chunks)
            .map(|(tokens, pools)| match (chain_id, stats) {
                (Some(chain_id), false) => SnapshotRequest::EvmPrices(EvmPricesRequest {
                    chain_id,
                    tokens,
                    pools,
                }),
                (Some(chain_id), true) => SnapshotRequest::EvmPriceStats(EvmPricesRequest {
                    chain_id,
                    tokens,
                    pools,
                }),
                (None, false) => SnapshotRequest::AltPrices(AltPricesRequest { tokens, pools }),
                (None, true) => SnapshotRequest::AltPriceStats(AltPricesRequest { tokens, pools }),
            })
            .collect()
    }

    /// One profile request per token, asking for the metadata and every window.
    pub(crate) fn evm_profiles(chain_id: i64, tokens: &[String]) -> Vec<Self> {
        tokens
            .iter()
            .map(|token| {
                SnapshotRequest::EvmProfile(GetProfileRequest {
                    chain_id,
                    token: token.clone(),
                    options: Some(ProfileOptions {
                        include_metadata: Some(true),
                        include_metrics: Some(TimeWindow::KNOWN.to_vec()),
                    }),
                })
            })
            .collect()
    }

    /// One portfolio request per wallet.
    pub(crate) fn portfolios(wallets: &[String]) -> Vec<Self> {
        wallets
            .iter()
            .map(|wallet| {
                SnapshotRequest::Portfolio(PortfolioRequest {
                    wallet: wallet.clone(),
                })
            })
            .collect()
    }
}

/// Records of one answer and how they become rows, with the number of items received.
fn builder<T>(records: Vec<T>, context: T::Context, received: usize) -> (BatchBuilder, usize)
where
    T: ToBatch + Send + 'static,
    T::Context: Send + 'static,
{
    let build: BatchBuilder =
        Box::new(move || Ok(vec![(T::DATASET, T::to_batch(&records, &context)?)]));
    (build, received)
}

/// [`builder`] counting one item per record.
fn records<T>(records: Vec<T>, context: T::Context) -> (BatchBuilder, usize)
where
    T: ToBatch + Send + 'static,
    T::Context: Send + 'static,
{
    let n = records.len();
    builder(records, context, n)
}

/// A snapshot job (prices, price stats, EVM profiles or portfolios): its requests, in order,
/// all answered with one fetch time.
#[derive(Debug, Clone)]
pub(crate) struct SnapshotJob {
    pub(crate) requests: Vec<SnapshotRequest>,
}

impl SnapshotJob {
    /// The chunks not yet committed, then the snapshot marked complete.
    pub(crate) async fn fetch(self, key: &StateKey, ctx: &mut JobContext<'_>) -> Result<FetchEnd> {
        let requests = self.requests;
        let state: SnapshotState = ctx.states.read(key)?;
        let mut run = state.run.unwrap_or_else(SnapshotRun::start);
        let fetched_at = run.fetched_at;
        for (i, request) in requests.into_iter().enumerate() {
            if run.done.contains(&i) {
                continue;
            }
            if ctx.cancel.is_cancelled() {
                return Ok(FetchEnd::Cancelled);
            }
            let Some(answer) = ctx
                .unless_cancelled(fetch_one(ctx.client, request, fetched_at))
                .await
            else {
                return Ok(FetchEnd::Cancelled);
            };
            let (batch_fn, rows) = answer?;
            ctx.fetched(rows);
            run.done.insert(i);
            let state = SnapshotState {
                run: Some(run.clone()),
                last_fetched_at: state.last_fetched_at,
            };
            ctx.hand_off(rows, batch_fn, vec![entry(key, &state)])
                .await?;
        }
        let done = SnapshotState {
            run: None,
            last_fetched_at: Some(fetched_at),
        };
        ctx.hand_off(0, || Ok(Vec::new()), vec![entry(key, &done)])
            .await?;
        Ok(FetchEnd::Complete)
    }

    /// A dry run of a snapshot: the requests it has left.
    pub(crate) fn estimate(
        &self,
        key: &StateKey,
        states: &SyncStates<'_>,
    ) -> Result<(Option<u64>, String)> {
        let requests = self.requests.len();
        let state: SnapshotState = states.read(key)?;
        let done = state.run.map(|r| r.done.len()).unwrap_or(0);
        let n = requests.saturating_sub(done) as u64;
        Ok((
            Some(n),
            if done > 0 {
                format!("resumes a snapshot with {done} chunks done")
            } else {
                "one request per chunk".to_owned()
            },
        ))
    }
}

/// Sends one request of a snapshot; the rows are built later, off the async workers.
async fn fetch_one(
    client: &Client,
    request: SnapshotRequest,
    fetched_at: DateTime<Utc>,
) -> Result<(BatchBuilder, usize)> {
    Ok(match request {
        SnapshotRequest::EvmPrices(r) => records(client.evm_prices(&r).await?, fetched_at),
        SnapshotRequest::AltPrices(r) => records(client.alt_prices(&r).await?, fetched_at),
        SnapshotRequest::EvmPriceStats(r) => records(
            client.evm_price_stats(&r).await?,
            EvmSnapshot {
                chain_id: r.chain_id,
                fetched_at,
            },
        ),
        SnapshotRequest::AltPriceStats(r) => records(client.alt_price_stats(&r).await?, fetched_at),
        SnapshotRequest::EvmProfile(r) => records(vec![client.evm_profile(&r).await?], fetched_at),
        SnapshotRequest::Portfolio(r) => {
            let portfolio = client.portfolio(&r).await?;
            let holdings = portfolio.tokens.len();
            builder(vec![(r.wallet, portfolio)], fetched_at, holdings)
        }
    })
}
