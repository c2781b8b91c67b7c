//! Swaps and trades: newest-first streams, fetched down to what an earlier run committed.

use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt};

use super::FetchEnd;
use bytestring::ByteString;

use crate::api::client::{Client, Dated, decode_page_shared};
use crate::api::models::{Page, Swap, Trade};
use crate::api::requests::{Operation, SwapsRequest, TradesRequest};
use crate::error::{ApiStatus, Error, Result};
use crate::lake::convert::ToBatch;
use crate::sync::config::SyncConfig;
use crate::sync::context::JobContext;
use crate::sync::state::{EventKey, Held, StateKey, StreamRun, StreamState, SyncStates, entry};

/// A record of a newest-first stream: where it sits in the order.
pub(crate) trait Streamed: ToBatch<Context = ()> + Clone + Send + 'static {
    /// Position in the service's newest-first order.
    fn key(&self) -> EventKey;
    /// The record's time (`block_time`).
    fn time(&self) -> DateTime<Utc>;
}

impl<S: AsRef<str> + Clone + Send + 'static> Streamed for Swap<S> {
    fn key(&self) -> EventKey {
        EventKey {
            slot: self.block_slot,
            id: self.id,
        }
    }

    fn time(&self) -> DateTime<Utc> {
        self.block_time
    }
}

impl<S: AsRef<str> + Clone + Send + 'static> Streamed for Trade<S> {
    fn key(&self) -> EventKey {
        EventKey {
            slot: self.block_slot,
            id: self.id,
        }
    }

    fn time(&self) -> DateTime<Utc> {
        self.block_time
    }
}

/// The request of a stream: its pages from a cursor on.
pub(crate) trait StreamRequest: Clone + Send + Sync + 'static {
    /// The records its pages hold.
    type Item: Streamed;
    /// The operation it calls.
    const OPERATION: Operation;
    /// The pages from `cursor` on (from the newest when `None`), each with its answer's date.
    fn pages(
        &self,
        client: &Client,
        cursor: Option<String>,
    ) -> impl Stream<Item = Result<Dated<Page<Self::Item>>>> + Send + 'static;
}

// A sync's records keep their names as views of the page they came in (see
// `SharesBody`): one buffer per page, not six strings per swap.
impl StreamRequest for SwapsRequest {
    type Item = Swap<ByteString>;
    const OPERATION: Operation = Operation::AltGetSwaps;
    fn pages(
        &self,
        client: &Client,
        cursor: Option<String>,
    ) -> impl Stream<Item = Result<Dated<Page<Self::Item>>>> + Send + 'static {
        client.swap_pages_dated(
            SwapsRequest {
                cursor,
                ..self.clone()
            },
            decode_page_shared,
        )
    }
}

impl StreamRequest for TradesRequest {
    type Item = Trade<ByteString>;
    const OPERATION: Operation = Operation::AltGetTrades;
    fn pages(
        &self,
        client: &Client,
        cursor: Option<String>,
    ) -> impl Stream<Item = Result<Dated<Page<Self::Item>>>> + Send + 'static {
        client.trade_pages_dated(
            TradesRequest {
                cursor,
                ..self.clone()
            },
            decode_page_shared,
        )
    }
}

/// How far after the answer that carried it a record may be dated: a record later than that
/// (a swap dated 2099) is refused, never stored nor taken as the stream's end.
pub(crate) const FUTURE_TOLERANCE: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// Pages in a row that bring no record not already taken, after which the service is taken
/// to page without end.
pub(crate) const STALE_PAGES: u32 = 5;

/// A swaps or trades job: the pages of one filter, newest first, down to what an earlier run
/// committed.
#[derive(Debug, Clone)]
pub(crate) struct StreamJob<R> {
    /// The filter, asked for from the newest record (its cursor is managed by the job).
    pub(crate) request: R,
}

impl<R: StreamRequest> StreamJob<R> {
    /// Swaps or trades of one filter, newest first, down to what an earlier run committed.
    ///
    /// The interface does not define the order of the records within a page, so every record
    /// of a page is taken, and the walk stops only after a page whose newest record is at or
    /// below the stopping point (the newest record of the last complete run). A record dated
    /// more than [`FUTURE_TOLERANCE`] after the answer that carried it is refused (counted and
    /// warned about, never stored). Pages that bring no record not already taken, several in a
    /// row ([`STALE_PAGES`]), end the job with [`Error::EndlessPaging`].
    pub(crate) async fn fetch(&self, key: &StateKey, ctx: &mut JobContext<'_>) -> Result<FetchEnd> {
        let request = &self.request;
        let client = ctx.client;
        let mut state: StreamState = ctx.states.read(key)?;
        // A stream first fetched by a version that did not count its records stays uncounted.
        if state.held.is_none() && state.newest.is_none() && state.run.is_none() {
            state.held = Some(Held::default());
        }
        let fresh = state.run.is_none();
        let (mut cursor, mut top, stop, mut started_at, mut oldest) = match state.run.take() {
            Some(run) => (
                Some(run.cursor),
                Some(run.top),
                run.stop,
                run.started_at,
                run.oldest,
            ),
            // A fresh run starts at the service's time of its first answer.
            None => (None, None, state.newest, None, None),
        };
        let resumed = cursor.is_some();
        let mut stream = Box::pin(request.pages(client, cursor.clone()));
        let mut buffer: Vec<R::Item> = Vec::new();
        let mut pages_held = 0usize;
        let mut first_page = true;
        let mut stale_pages = 0u32;
        let mut received = 0u64;
        let finished = loop {
            // A cancellation drops the request in flight: its page was not handed off, and the
            // resume cursor still points at it.
            let next = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => break FetchEnd::Cancelled,
                next = stream.next() => next,
            };
            let dated = match next {
                None => break FetchEnd::Complete,
                Some(Ok(dated)) => dated,
                Some(Err(e))
                    if first_page && resumed && e.api_status() == Some(ApiStatus::BadRequest) =>
                {
                    // The recorded cursor is no longer accepted (cursors may expire): start again
                    // from the newest record; the stop point still bounds the work.
                    ctx.requests += 1;
                    ctx.restarted(format!(
                        "the service refused the recorded cursor ({e}); paging again from the newest record down to the last committed one"
                    ));
                    cursor = None;
                    stream = Box::pin(request.pages(client, None));
                    first_page = false;
                    continue;
                }
                Some(Err(e)) => {
                    let run = RunPosition {
                        cursor: cursor.as_deref(),
                        top,
                        stop,
                        started_at,
                        oldest,
                    };
                    hand_off_stream(ctx, key, &mut buffer, &resume_state(&state, &run)).await?;
                    return Err(e);
                }
            };
            if fresh && first_page {
                started_at = dated.date;
            }
            first_page = false;
            let page = dated.value;
            let next = page.next_cursor().map(str::to_owned);
            let page_len = page.data.len();
            ctx.total = u64::try_from(page.count).ok();
            state.count = Some(page.count);
            received += page_len as u64;
            ctx.fetched(page_len);
            // Records already taken by this run lie between its oldest and its top: a page
            // that repeats them (a refused cursor paged again from the newest, or a service
            // whose pages overlap) brings nothing new.
            let taken = oldest.map(|(o, _)| o).zip(top);
            let horizon = dated
                .date
                .unwrap_or_else(Utc::now)
                .checked_add_signed(FUTURE_TOLERANCE)
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            let mut in_page = std::collections::HashSet::with_capacity(page.data.len());
            let mut page_newest: Option<EventKey> = None;
            let mut new_records = 0usize;
            let mut refused: Vec<DateTime<Utc>> = Vec::new();
            for item in page.data {
                if item.time() > horizon {
                    refused.push(item.time());
                    continue;
                }
                let k = item.key();
                page_newest = page_newest.max(Some(k));
                let already = stop.is_some_and(|s| k <= s)
                    || taken.is_some_and(|(low, high)| (low..=high).contains(&k))
                    || !in_page.insert(k);
                if already {
                    continue;
                }
                new_records += 1;
                top = top.max(Some(k));
                if oldest.is_none_or(|(o, _)| k < o) {
                    oldest = Some((k, item.time()));
                }
                if let Some(held) = &mut state.held {
                    held.add(item.time());
                }
                buffer.push(item);
            }
            if !refused.is_empty() {
                ctx.refused(&refused, dated.date, horizon);
            }
            let old_page = page_newest.is_some_and(|n| stop.is_some_and(|s| n <= s));
            if old_page || next.is_none() || page_len == 0 {
                break FetchEnd::Complete;
            }
            stale_pages = if new_records == 0 { stale_pages + 1 } else { 0 };
            if stale_pages >= STALE_PAGES {
                let run = RunPosition {
                    cursor: cursor.as_deref(),
                    top,
                    stop,
                    started_at,
                    oldest,
                };
                hand_off_stream(ctx, key, &mut buffer, &resume_state(&state, &run)).await?;
                return Err(Error::EndlessPaging {
                    operation: R::OPERATION.name(),
                    received,
                    count: state.count.unwrap_or(0),
                    pages_without_new: stale_pages,
                });
            }
            cursor = next;
            pages_held += 1;
            if pages_held >= ctx.config.pages_per_handoff.max(1) {
                let run = RunPosition {
                    cursor: cursor.as_deref(),
                    top,
                    stop,
                    started_at,
                    oldest,
                };
                hand_off_stream(ctx, key, &mut buffer, &resume_state(&state, &run)).await?;
                pages_held = 0;
            }
        };
        let next = if finished == FetchEnd::Complete {
            // Nothing of the stream before the service's time of the run's first answer is
            // missing (never later than that time, whatever the records' times). Without a
            // `Date`, only what the records prove: up to just after the newest one. A run
            // resumed from an older version's record has no start, and the older coverage
            // stands.
            let complete_until = match started_at {
                Some(s) => Some(s),
                None if fresh => state
                    .held
                    .and_then(|h| h.last)
                    .map(|t| t + chrono::Duration::microseconds(1))
                    .max(state.complete_until),
                None => state.complete_until,
            };
            StreamState {
                newest: top.or(stop),
                run: None,
                count: state.count,
                complete_until,
                held: state.held,
                synced_at: Some(Utc::now()),
            }
        } else {
            let run = RunPosition {
                cursor: cursor.as_deref(),
                top,
                stop,
                started_at,
                oldest,
            };
            resume_state(&state, &run)
        };
        hand_off_stream(ctx, key, &mut buffer, &next).await?;
        Ok(finished)
    }

    /// A dry run of a stream: requests it will make, from its recorded state.
    pub(crate) fn estimate(
        &self,
        key: &StateKey,
        states: &SyncStates<'_>,
        config: &SyncConfig,
    ) -> Result<(Option<u64>, String)> {
        let state: StreamState = states.read(key)?;
        let limit = i64::from(config.page_limit);
        Ok(match (&state.run, state.newest, state.count) {
            (Some(_), _, _) => (
                None,
                "resumes an interrupted run from its recorded cursor".to_owned(),
            ),
            (None, Some(_), _) => (
                Some(1),
                "fetches the pages down to one whose newest record is committed (1 when nothing is new)".to_owned(),
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
        })
    }
}

/// Hands the held records of a stream to the commit buffer with the stream's next state.
async fn hand_off_stream<T: Streamed>(
    ctx: &JobContext<'_>,
    key: &StateKey,
    held: &mut Vec<T>,
    next: &StreamState,
) -> Result<()> {
    let rows = std::mem::take(held);
    ctx.hand_off_records(rows, (), vec![entry(key, next)]).await
}

/// Where an unfinished run stands.
struct RunPosition<'a> {
    cursor: Option<&'a str>,
    top: Option<EventKey>,
    stop: Option<EventKey>,
    started_at: Option<DateTime<Utc>>,
    oldest: Option<(EventKey, DateTime<Utc>)>,
}

/// The state of an unfinished stream: where to resume. Without a cursor or a newest record
/// there is nothing to resume from; the records themselves are still committed (the lake
/// de-duplicates them on a later run).
fn resume_state(state: &StreamState, at: &RunPosition<'_>) -> StreamState {
    let run = match (at.cursor, at.top) {
        (Some(c), Some(t)) => Some(StreamRun {
            cursor: c.to_owned(),
            top: t,
            stop: at.stop,
            started_at: at.started_at,
            oldest: at.oldest,
        }),
        _ => None,
    };
    StreamState {
        newest: state.newest,
        run,
        count: state.count,
        complete_until: state.complete_until,
        held: state.held,
        synced_at: Some(Utc::now()),
    }
}
