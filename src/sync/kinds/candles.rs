//! Candles and price history: time ranges, recorded as covered (empty answers included), of
//! which only the missing sub-ranges are fetched.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::ranges::{Range, RangeSet};
use super::run::{Finished, JobCtx, Syncer, at, to_value, ts};
use crate::api::requests::{
    CandlesRequest, MAX_HISTORY_POOLS, MAX_HISTORY_TOKENS, PriceHistoryRequest,
};
use crate::error::Result;
use crate::lake::convert::{CandleSeries, HistorySeries};

/// Time ranges a time-range dataset covers for one target (empty answers included).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct CoverState {
    pub(super) covered: RangeSet,
    /// Time of the newest point received, in epoch seconds.
    #[serde(default)]
    newest_point: Option<i64>,
}

/// A price-history job's targets and time range.
#[derive(Debug, Clone, Copy)]
pub(super) struct HistoryJob<'a> {
    pub(super) chain_id: i64,
    pub(super) tokens: &'a [String],
    pub(super) pools: &'a [String],
    pub(super) interval: i64,
    pub(super) from: DateTime<Utc>,
    pub(super) to: Option<DateTime<Utc>>,
}

impl Syncer {
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

    /// Candles of one token or pool: the missing sub-ranges of a closed range, or, for an open
    /// one, the gaps and then pages forward to the service's present.
    pub(super) async fn sync_candles(
        &self,
        ctx: &mut JobCtx<'_>,
        key: &str,
        series: &CandleSeries,
        from: DateTime<Utc>,
        to: Option<DateTime<Utc>>,
    ) -> Result<Finished> {
        let interval = series.interval;
        let mut state: CoverState = self.read_state(key)?.unwrap_or_default();
        ctx.total = None;
        let base = CandlesRequest {
            interval,
            token: series.token.clone(),
            pool: series.pool.clone(),
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
        // The queue holds what is left to ask for. An answer covers its range only up to the
        // end of its last bar: a service that caps its answers (fewer bars than the range
        // holds) leaves the rest queued, and only an empty answer proves a range has no bars.
        let mut queue: std::collections::VecDeque<Range> = chunks.into();
        while let Some(chunk) = queue.pop_front() {
            if ctx.cancel.is_cancelled() {
                return Ok(false);
            }
            let req = CandlesRequest {
                from: Some(at(chunk.start)),
                to: Some(at(chunk.end)),
                ..base.clone()
            };
            let Some(answer) = ctx.unless_cancelled(self.client.candles(&req)).await else {
                return Ok(false);
            };
            let mut candles = answer?;
            ctx.fetched(candles.len());
            // A bar belongs to the chunk its start falls in; the neighbour chunk owns the rest.
            candles.retain(|c| (chunk.start..chunk.end).contains(&ts(c.timestamp)));
            let reached = answered_until(chunk, interval, candles.iter().map(|c| ts(c.timestamp)));
            if reached < chunk.end {
                queue.push_front(Range::new(reached, chunk.end));
            }
            state.covered.insert(Range::new(chunk.start, reached));
            self.hand_off_records(
                ctx,
                candles,
                series.clone(),
                vec![(key.to_owned(), to_value(&state))],
            )
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
            let Some(answer) = ctx.unless_cancelled(self.client.candles(&req)).await else {
                return Ok(false);
            };
            let mut candles = answer?;
            ctx.fetched(candles.len());
            let full = candles.len() as i64 >= per_page;
            candles.retain(|c| ts(c.timestamp) >= start);
            let Some(last) = candles.iter().map(|c| ts(c.timestamp)).max() else {
                return Ok(true);
            };
            let next = last + interval;
            state.covered.insert(Range::new(start, next));
            self.hand_off_records(
                ctx,
                candles,
                series.clone(),
                vec![(key.to_owned(), to_value(&state))],
            )
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
        for (k, v) in self.states_with_prefix(&format!("{key}/"))? {
            if v.is_null() {
                continue;
            }
            let state: CoverState = self.decode_state(&k, v)?;
            by_key.insert(k, state);
        }
        Ok(HistoryCovers {
            key: key.to_owned(),
            by_key,
        })
    }

    /// Price history of many tokens or pools: for each target, only the sub-ranges it misses,
    /// grouped into requests by chunk.
    pub(super) async fn sync_price_history(
        &self,
        ctx: &mut JobCtx<'_>,
        key: &str,
        job: &HistoryJob<'_>,
    ) -> Result<Finished> {
        let &HistoryJob {
            chain_id,
            tokens,
            pools,
            interval,
            from,
            to,
        } = job;
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
        // As for candles, an answer covers a target only up to its last point; the rest of the
        // range is asked for again (see `answered_until`).
        let mut queue: std::collections::VecDeque<HistoryRequest> = self
            .history_requests(&covers, tokens, pools, interval, from, to)
            .into();
        while let Some(hr) = queue.pop_front() {
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
            let Some(answer) = ctx
                .unless_cancelled(self.client.evm_price_history(&req))
                .await
            else {
                return Ok(false);
            };
            let mut series = answer?;
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
                    .flat_map(|s| s.prices.iter().map(|p| ts(p.timestamp)))
                    .collect();
                let reached = answered_until(hr.range, interval, own.iter().copied());
                if reached < hr.range.end {
                    short.push((reached, address.clone()));
                }
                state.covered.insert(Range::new(hr.range.start, reached));
                state.newest_point = state.newest_point.max(own.iter().copied().max());
                states.push((target_key, to_value(state)));
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
            self.hand_off_records(ctx, series, HistorySeries { chain_id, interval }, states)
                .await?;
        }
        Ok(true)
    }

    /// A dry run of a candles job: its missing sub-ranges, or for an open range its gaps.
    pub(super) fn estimate_candles(
        &self,
        key: &str,
        interval: i64,
        from: DateTime<Utc>,
        to: Option<DateTime<Utc>>,
    ) -> Result<(Option<u64>, String)> {
        let state: CoverState = self.read_state(key)?.unwrap_or_default();
        let bars = self.config.bars_per_request;
        Ok(match to {
            Some(_) => {
                let want = self.wanted(interval, from, to);
                let n = self.missing_for(&state.covered, interval, want).len();
                (
                    Some(n as u64),
                    format!("{n} missing sub-ranges of at most {bars} bars"),
                )
            }
            None => {
                let (gaps, _) = self.open_candle_plan(&state.covered, interval, from);
                (
                    None,
                    format!(
                        "{} gaps, then pages of {bars} bars forward to the service's now",
                        gaps.len()
                    ),
                )
            }
        })
    }

    /// A dry run of a price-history job: its requests, grouped by target.
    pub(super) fn estimate_history(
        &self,
        key: &str,
        job: &HistoryJob<'_>,
    ) -> Result<(Option<u64>, String)> {
        let covers = self.history_covers(key)?;
        let groups = self.history_requests(
            &covers,
            job.tokens,
            job.pools,
            job.interval,
            job.from,
            job.to,
        );
        Ok((
            Some(groups.len() as u64),
            "missing sub-ranges, grouped by target".to_owned(),
        ))
    }
}

/// How far an answer for `range` reaches: the end of its last bar or point, or the whole
/// range when it holds none (an empty answer proves there is nothing to fetch) or its last bar
/// is the range's last bucket. An answer that stops earlier may have been cut short by the
/// service, so the rest of the range is not recorded as covered.
fn answered_until(range: Range, interval: i64, starts: impl Iterator<Item = i64>) -> i64 {
    match starts.max() {
        Some(last) => last.saturating_add(interval).clamp(range.start, range.end),
        None => range.end,
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
