//! Price history of many EVM tokens or pools: for each target, only the sub-ranges it misses,
//! grouped into requests by chunk.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::FetchEnd;
use super::coverage::{
    answered_until, covered_until, epoch_seconds, from_epoch_seconds, missing_for, wanted,
};
use crate::api::client::Dated;
use crate::api::requests::{MAX_HISTORY_POOLS, MAX_HISTORY_TOKENS, PriceHistoryRequest};
use crate::error::Result;
use crate::lake::convert::HistorySeries;
use crate::sync::config::SyncConfig;
use crate::sync::context::JobContext;
use crate::sync::ranges::{Range, RangeSet};
use crate::sync::state::{CoverState, StateKey, SyncStates, entry};

/// A price-history job: its targets and time range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PriceHistoryJob<'j> {
    pub(crate) chain_id: i64,
    pub(crate) tokens: &'j [String],
    pub(crate) pools: &'j [String],
    pub(crate) interval: i64,
    pub(crate) from: DateTime<Utc>,
    /// End of the range; open (the service's present) when absent.
    pub(crate) to: Option<DateTime<Utc>>,
}

impl PriceHistoryJob<'_> {
    /// The requests a price-history job needs: for each missing chunk, the targets missing it,
    /// at most 100 tokens or 1000 pools per request.
    fn requests(&self, config: &SyncConfig, covers: &HistoryCovers) -> Vec<HistoryRequest> {
        let &PriceHistoryJob {
            tokens,
            pools,
            interval,
            from,
            to,
            ..
        } = self;
        let want = wanted(interval, from, to);
        let mut by_chunk: BTreeMap<(Range, bool), Vec<String>> = BTreeMap::new();
        for (is_pool, list) in [(false, tokens), (true, pools)] {
            for address in list {
                let covered = &covers.get(is_pool, address).covered;
                for chunk in missing_for(config, covered, interval, want) {
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
    fn covers(key: &StateKey, states: &SyncStates<'_>) -> Result<HistoryCovers> {
        Ok(HistoryCovers {
            key: key.clone(),
            by_key: states.targets(key)?,
        })
    }

    /// Price history of many tokens or pools: for each target, only the sub-ranges it misses,
    /// grouped into requests by chunk.
    pub(crate) async fn fetch(&self, key: &StateKey, ctx: &mut JobContext<'_>) -> Result<FetchEnd> {
        let client = ctx.client;
        let &PriceHistoryJob {
            chain_id,
            tokens,
            pools,
            interval,
            to,
            ..
        } = self;
        // An open range ends at the service's present: once data was seen, an answer with no
        // point at all means the requests after it ask for time that has no data yet, so they
        // are skipped and nothing is recorded for them (a later run asks again).
        let mut covers = Self::covers(key, &ctx.states)?;
        let mut seen_data = [false; 2];
        let mut ended = [false; 2];
        let mut newest = [None::<i64>; 2];
        for (is_pool, list) in [(false, tokens), (true, pools)] {
            for address in list {
                let kind = usize::from(is_pool);
                newest[kind] = newest[kind].max(covers.get(is_pool, address).newest_point);
            }
        }
        // As for candles, an answer covers a target only up to its last point; the rest of the
        // range is asked for again (see `answered_until`).
        let mut queue: std::collections::VecDeque<HistoryRequest> =
            self.requests(ctx.config, &covers).into();
        while let Some(hr) = queue.pop_front() {
            if ctx.cancel.is_cancelled() {
                return Ok(FetchEnd::Cancelled);
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
                from: from_epoch_seconds(hr.range.start),
                to: Some(from_epoch_seconds(hr.range.end)),
                interval,
            };
            let Some(answer) = ctx
                .unless_cancelled(client.evm_price_history_dated(&req))
                .await
            else {
                return Ok(FetchEnd::Cancelled);
            };
            let Dated {
                value: mut series,
                date,
            } = answer?;
            ctx.fetched(series.iter().map(|s| s.prices.len()).sum());
            for s in &mut series {
                s.prices.retain(|pt| {
                    (hr.range.start..hr.range.end).contains(&epoch_seconds(pt.timestamp))
                });
            }
            let points: usize = series.iter().map(|s| s.prices.len()).sum();
            let after_data = seen_data[kind] || newest[kind].is_some_and(|t| t < hr.range.start);
            if to.is_none() && points == 0 && after_data {
                ended[kind] = true;
                continue;
            }
            seen_data[kind] |= points > 0;
            let mut states = Vec::with_capacity(hr.addresses.len());
            let mut short: Vec<(i64, String)> = Vec::new();
            for address in &hr.addresses {
                let (target_key, state) = covers.entry(hr.is_pool, address);
                let own: Vec<i64> = series
                    .iter()
                    .filter(|s| {
                        let own = if hr.is_pool {
                            &s.pool_address
                        } else {
                            &s.token_address
                        };
                        own == address
                    })
                    .flat_map(|s| s.prices.iter().map(|p| epoch_seconds(p.timestamp)))
                    .collect();
                let reached = answered_until(hr.range, interval, own.iter().copied());
                if reached < hr.range.end {
                    short.push((reached, address.clone()));
                }
                // Never past the service's present (see `covered_until`).
                let covered = covered_until(reached, date, interval);
                if covered > hr.range.start {
                    state.cover(Range::new(hr.range.start, covered));
                }
                state.newest_point = state.newest_point.max(own.iter().copied().max());
                states.push(entry(&target_key, &*state));
            }
            // Targets the answer stopped short for are asked again from where it stopped.
            short.sort();
            for (reached, addresses) in group_by_start(short) {
                queue.push_front(HistoryRequest {
                    range: Range::new(reached, hr.range.end),
                    is_pool: hr.is_pool,
                    addresses,
                });
            }
            ctx.hand_off_records(series, HistorySeries { chain_id, interval }, states)
                .await?;
        }
        Ok(FetchEnd::Complete)
    }

    /// A dry run of a price-history job: its requests, grouped by target.
    pub(crate) fn estimate(
        &self,
        key: &StateKey,
        states: &SyncStates<'_>,
        config: &SyncConfig,
    ) -> Result<(Option<u64>, String)> {
        let covers = Self::covers(key, states)?;
        let groups = self.requests(config, &covers);
        Ok((
            Some(groups.len() as u64),
            "missing sub-ranges, grouped by target".to_owned(),
        ))
    }
}

/// Addresses grouped by the time their answer reached, in order.
fn group_by_start(sorted: Vec<(i64, String)>) -> Vec<(i64, Vec<String>)> {
    let mut out: Vec<(i64, Vec<String>)> = Vec::new();
    for (t, address) in sorted {
        match out.last_mut() {
            Some((last, addresses)) if *last == t => addresses.push(address),
            _ => out.push((t, vec![address])),
        }
    }
    out
}

/// One request's worth of a price-history job.
#[derive(Debug, Clone)]
struct HistoryRequest {
    range: Range,
    is_pool: bool,
    addresses: Vec<String>,
}

/// The coverage of each target (token or pool) of a price-history job, loaded once per job and
/// kept up to date in memory as the job commits.
struct HistoryCovers {
    key: StateKey,
    by_key: BTreeMap<StateKey, CoverState>,
}

impl HistoryCovers {
    /// A target's coverage (empty when it was never synced).
    fn get(&self, is_pool: bool, address: &str) -> &CoverState {
        static EMPTY: CoverState = CoverState {
            covered: RangeSet::EMPTY,
            newest_point: None,
            synced_at: None,
        };
        self.by_key
            .get(&self.key.history_target(is_pool, address))
            .unwrap_or(&EMPTY)
    }

    /// A target's state key and its coverage, to update.
    fn entry(&mut self, is_pool: bool, address: &str) -> (StateKey, &mut CoverState) {
        let k = self.key.history_target(is_pool, address);
        (k.clone(), self.by_key.entry(k).or_default())
    }
}
