//! Candles of one token or pool: the missing sub-ranges of a closed range, or, for an open
//! one, the gaps and then pages forward to the service's present.

use chrono::{DateTime, Utc};

use super::FetchEnd;
use super::coverage::{
    answered_until, covered_until, epoch_seconds, from_epoch_seconds, missing_for, wanted,
};
use crate::api::client::Dated;
use crate::api::requests::CandlesRequest;
use crate::error::Result;
use crate::lake::convert::CandleSeries;
use crate::sync::config::SyncConfig;
use crate::sync::context::JobContext;
use crate::sync::ranges::{Range, RangeSet};
use crate::sync::state::{CoverState, StateKey, SyncStates, entry};

/// A candles job: one token's or pool's candles at one interval over a time range.
#[derive(Debug, Clone)]
pub(crate) struct CandlesJob {
    pub(crate) series: CandleSeries,
    pub(crate) from: DateTime<Utc>,
    /// End of the range; open (the service's present) when absent.
    pub(crate) to: Option<DateTime<Utc>>,
}

impl CandlesJob {
    /// Candles of one token or pool: the missing sub-ranges of a closed range, or, for an open
    /// one, the gaps and then pages forward to the service's present.
    pub(crate) async fn fetch(&self, key: &StateKey, ctx: &mut JobContext<'_>) -> Result<FetchEnd> {
        let CandlesJob { series, from, to } = self;
        let (from, to) = (*from, *to);
        let interval = series.interval;
        let client = ctx.client;
        let mut state: CoverState = ctx.states.read(key)?;
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
                missing_for(
                    ctx.config,
                    &state.covered,
                    interval,
                    wanted(interval, from, to),
                ),
                None,
            ),
            None => {
                let (gaps, tail) = open_plan(ctx.config, &state.covered, interval, from);
                (gaps, Some(tail))
            }
        };
        // The queue holds what is left to ask for. An answer covers its range only up to the
        // end of its last bar: a service that caps its answers (fewer bars than the range
        // holds) leaves the rest queued, and only an empty answer proves a range has no bars.
        let mut queue: std::collections::VecDeque<Range> = chunks.into();
        while let Some(chunk) = queue.pop_front() {
            if ctx.cancel.is_cancelled() {
                return Ok(FetchEnd::Cancelled);
            }
            let req = CandlesRequest {
                from: Some(from_epoch_seconds(chunk.start)),
                to: Some(from_epoch_seconds(chunk.end)),
                ..base.clone()
            };
            let Some(answer) = ctx.unless_cancelled(client.candles_dated(&req)).await else {
                return Ok(FetchEnd::Cancelled);
            };
            let Dated {
                value: mut candles,
                date,
            } = answer?;
            ctx.fetched(candles.len());
            // A bar belongs to the chunk its start falls in; the neighbour chunk owns the rest.
            candles.retain(|c| (chunk.start..chunk.end).contains(&epoch_seconds(c.timestamp)));
            let reached = answered_until(
                chunk,
                interval,
                candles.iter().map(|c| epoch_seconds(c.timestamp)),
            );
            if reached < chunk.end {
                queue.push_front(Range::new(reached, chunk.end));
            }
            // Time after the service's present is not covered, even by an empty answer: a
            // later run asks for it again.
            let covered = covered_until(reached, date, interval);
            if covered > chunk.start {
                state.cover(Range::new(chunk.start, covered));
            }
            ctx.hand_off_records(candles, series.clone(), vec![entry(key, &state)])
                .await?;
        }
        // An open range: page forward with the service's `count` member from the start of the
        // tail until a page holds fewer bars than asked for. The service's own "now" ends the
        // range, so no request is spent on time after its data.
        let Some(mut start) = tail else {
            return Ok(FetchEnd::Complete);
        };
        let per_page = ctx.config.bars_per_request.max(1);
        loop {
            if ctx.cancel.is_cancelled() {
                return Ok(FetchEnd::Cancelled);
            }
            let req = CandlesRequest {
                from: Some(from_epoch_seconds(start)),
                count: Some(per_page),
                ..base.clone()
            };
            let Some(answer) = ctx.unless_cancelled(client.candles_dated(&req)).await else {
                return Ok(FetchEnd::Cancelled);
            };
            let Dated {
                value: mut candles,
                date,
            } = answer?;
            ctx.fetched(candles.len());
            let full = candles.len() as i64 >= per_page;
            candles.retain(|c| epoch_seconds(c.timestamp) >= start);
            let Some(last) = candles.iter().map(|c| epoch_seconds(c.timestamp)).max() else {
                return Ok(FetchEnd::Complete);
            };
            let next = last + interval;
            let covered = covered_until(next, date, interval);
            if covered > start {
                state.cover(Range::new(start, covered));
            }
            ctx.hand_off_records(candles, series.clone(), vec![entry(key, &state)])
                .await?;
            if !full || next <= start {
                return Ok(FetchEnd::Complete);
            }
            start = next;
        }
    }

    /// A dry run of a candles job: its missing sub-ranges, or for an open range its gaps.
    pub(crate) fn estimate(
        &self,
        key: &StateKey,
        states: &SyncStates<'_>,
        config: &SyncConfig,
    ) -> Result<(Option<u64>, String)> {
        let CandlesJob { series, from, to } = self;
        let (interval, from, to) = (series.interval, *from, *to);
        let state: CoverState = states.read(key)?;
        let bars = config.bars_per_request;
        Ok(match to {
            Some(_) => {
                let want = wanted(interval, from, to);
                let n = missing_for(config, &state.covered, interval, want).len();
                (
                    Some(n as u64),
                    format!("{n} missing sub-ranges of at most {bars} bars"),
                )
            }
            None => {
                let (gaps, _) = open_plan(config, &state.covered, interval, from);
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
}

/// For an open candle range: the gaps earlier runs left between `from` and the newest
/// covered bar (as closed chunks), and where the forward paging starts (the newest covered
/// bar less the recent window, or `from`).
fn open_plan(
    config: &SyncConfig,
    covered: &RangeSet,
    interval: i64,
    from: DateTime<Utc>,
) -> (Vec<Range>, i64) {
    let start = Range::new(epoch_seconds(from), epoch_seconds(from))
        .align_out(interval)
        .start;
    let recent = i64::try_from(config.recent_window.as_secs()).unwrap_or(i64::MAX);
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
        .flat_map(|r| r.chunks(interval.saturating_mul(config.bars_per_request.max(1))))
        .collect();
    (gaps, tail)
}
