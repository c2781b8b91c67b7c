//! Altchain profiles: every page of one search-profiles request, as one snapshot.

use futures::StreamExt;

use super::FetchEnd;
use crate::api::profile_query::SearchRequest;
use crate::error::{ApiStatus, Result};
use crate::sync::context::JobContext;
use crate::sync::state::{SnapshotRun, SnapshotState, StateKey, entry};

/// An altchain profiles job: every page of one search-profiles request, as one snapshot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AltProfilesJob<'j> {
    /// The search body (its `cursor` is managed by the job).
    pub(crate) request: &'j SearchRequest,
}

impl AltProfilesJob<'_> {
    /// Every page of the request, as one snapshot; an interrupted one resumes at its cursor.
    pub(crate) async fn fetch(&self, key: &StateKey, ctx: &mut JobContext<'_>) -> Result<FetchEnd> {
        let request = self.request;
        let client = ctx.client;
        let state: SnapshotState = ctx.states.read(key)?;
        let mut run = state.run.unwrap_or_else(SnapshotRun::start);
        let mut fetched_at = run.fetched_at;
        let mut req = request.clone();
        if req.limit.is_none() {
            req.limit = Some(ctx.config.page_limit);
        }
        let resumed = run.cursor.is_some();
        let mut pages = Box::pin(client.search_pages(SearchRequest {
            cursor: run.cursor.clone(),
            ..req.clone()
        }));
        let mut first_page = true;
        loop {
            if ctx.cancel.is_cancelled() {
                return Ok(FetchEnd::Cancelled);
            }
            let Some(next) = ctx.unless_cancelled(pages.next()).await else {
                return Ok(FetchEnd::Cancelled);
            };
            let Some(page) = next else {
                break;
            };
            let page = match page {
                Ok(page) => page,
                Err(e)
                    if first_page && resumed && e.api_status() == Some(ApiStatus::BadRequest) =>
                {
                    // The recorded cursor is no longer accepted (cursors may expire): the
                    // snapshot starts again from the first page with a new fetch time, so its
                    // pages are one consistent answer. The pages committed under the old fetch
                    // time stay in the lake as an incomplete snapshot.
                    ctx.requests += 1;
                    ctx.restarted(format!(
                        "the service refused the recorded cursor ({e}); the snapshot of {} starts again with a new fetch time",
                        run.fetched_at.to_rfc3339()
                    ));
                    run = SnapshotRun::start();
                    fetched_at = run.fetched_at;
                    pages = Box::pin(client.search_pages(req.clone()));
                    first_page = false;
                    continue;
                }
                Err(e) => return Err(e),
            };
            first_page = false;
            ctx.total = u64::try_from(page.count).ok();
            ctx.fetched(page.data.len());
            let next = page.next_cursor().map(str::to_owned);
            let last = next.is_none() || page.data.is_empty();
            run.cursor = next;
            run.done.insert(run.done.len());
            let state = if last {
                SnapshotState {
                    run: None,
                    last_fetched_at: Some(fetched_at),
                }
            } else {
                SnapshotState {
                    run: Some(run.clone()),
                    last_fetched_at: state.last_fetched_at,
                }
            };
            ctx.hand_off_records(page.data, fetched_at, vec![entry(key, &state)])
                .await?;
            if last {
                break;
            }
        }
        Ok(FetchEnd::Complete)
    }
}
