//! Swaps and trades: newest-first streams, fetched down to what an earlier run committed.

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

use super::FetchEnd;
use crate::api::client::Client;
use crate::api::models::{Page, Swap, Trade};
use crate::api::requests::{SwapsRequest, TradesRequest};
use crate::error::{ApiStatus, Result};
use crate::lake::convert::ToBatch;
use crate::sync::SyncConfig;
use crate::sync::context::JobContext;
use crate::sync::state::{SyncStates, state_value};

/// Position of a swap or trade in the service's newest-first order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct EventKey {
    slot: i64,
    id: i64,
}

/// A record of a newest-first stream: where it sits in the order.
pub(crate) trait Streamed: ToBatch<Context = ()> + Clone + Send + 'static {
    /// Position in the service's newest-first order.
    fn key(&self) -> EventKey;
}

impl Streamed for Swap {
    fn key(&self) -> EventKey {
        EventKey {
            slot: self.block_slot,
            id: self.id,
        }
    }
}

impl Streamed for Trade {
    fn key(&self) -> EventKey {
        EventKey {
            slot: self.block_slot,
            id: self.id,
        }
    }
}

/// The request of a stream: its pages from a cursor on.
pub(crate) trait StreamRequest: Clone + Send + Sync + 'static {
    /// The records its pages hold.
    type Item: Streamed;
    /// The pages from `cursor` on (from the newest when `None`).
    fn pages(
        &self,
        client: &Client,
        cursor: Option<String>,
    ) -> impl Stream<Item = Result<Page<Self::Item>>> + Send + 'static;
}

impl StreamRequest for SwapsRequest {
    type Item = Swap;
    fn pages(
        &self,
        client: &Client,
        cursor: Option<String>,
    ) -> impl Stream<Item = Result<Page<Swap>>> + Send + 'static {
        client.swap_pages(SwapsRequest {
            cursor,
            ..self.clone()
        })
    }
}

impl StreamRequest for TradesRequest {
    type Item = Trade;
    fn pages(
        &self,
        client: &Client,
        cursor: Option<String>,
    ) -> impl Stream<Item = Result<Page<Trade>>> + Send + 'static {
        client.trade_pages(TradesRequest {
            cursor,
            ..self.clone()
        })
    }
}

/// Progress of a newest-first stream (swaps or trades of one filter).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct StreamState {
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

/// A swaps or trades job: the pages of one filter, newest first, down to what an earlier run
/// committed.
#[derive(Debug, Clone)]
pub(crate) struct StreamJob<R> {
    /// The filter, asked for from the newest record (its cursor is managed by the job).
    pub(crate) request: R,
}

impl<R: StreamRequest> StreamJob<R> {
    /// Swaps or trades of one filter, newest first, down to what an earlier run committed.
    pub(crate) async fn fetch(&self, key: &str, ctx: &mut JobContext<'_>) -> Result<FetchEnd> {
        let request = &self.request;
        let client = ctx.client;
        let mut state: StreamState = ctx.states.read(key)?.unwrap_or_default();
        let (mut cursor, mut top, stop) = match state.run.take() {
            Some(run) => (Some(run.cursor), Some(run.top), run.stop),
            None => (None, None, state.newest),
        };
        let resumed = cursor.is_some();
        let mut stream = Box::pin(request.pages(client, cursor.clone()));
        let mut buffer: Vec<R::Item> = Vec::new();
        let mut pages_held = 0usize;
        let mut first_page = true;
        let finished = loop {
            // A cancellation drops the request in flight: its page was not handed off, and the
            // resume cursor still points at it.
            let next = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => break FetchEnd::Cancelled,
                next = stream.next() => next,
            };
            let page = match next {
                None => break FetchEnd::Complete,
                Some(Ok(page)) => page,
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
                    hand_off_stream(
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
                break FetchEnd::Complete;
            }
            cursor = next;
            pages_held += 1;
            if pages_held >= ctx.config.pages_per_handoff.max(1) {
                hand_off_stream(
                    ctx,
                    key,
                    &mut buffer,
                    &resume_state(&state, cursor.as_deref(), top, stop),
                )
                .await?;
                pages_held = 0;
            }
        };
        let next = if finished == FetchEnd::Complete {
            StreamState {
                newest: top.or(stop),
                run: None,
                count: state.count,
            }
        } else {
            resume_state(&state, cursor.as_deref(), top, stop)
        };
        hand_off_stream(ctx, key, &mut buffer, &next).await?;
        Ok(finished)
    }

    /// A dry run of a stream: requests it will make, from its recorded state.
    pub(crate) fn estimate(
        &self,
        key: &str,
        states: &SyncStates<'_>,
        config: &SyncConfig,
    ) -> Result<(Option<u64>, String)> {
        let state: StreamState = states.read(key)?.unwrap_or_default();
        let limit = i64::from(config.page_limit);
        Ok(match (&state.run, state.newest, state.count) {
            (Some(_), _, _) => (
                None,
                "resumes an interrupted run from its recorded cursor".to_owned(),
            ),
            (None, Some(_), _) => (
                Some(1),
                "fetches the pages newer than the newest committed record (usually 1)".to_owned(),
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
    key: &str,
    held: &mut Vec<T>,
    next: &StreamState,
) -> Result<()> {
    let rows = std::mem::take(held);
    ctx.hand_off_records(rows, (), vec![(key.to_owned(), state_value(next))])
        .await
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
