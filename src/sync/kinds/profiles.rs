//! Altchain profiles: every page of one search-profiles request, as one snapshot.

use futures::StreamExt;

use super::run::{Finished, JobCtx, Syncer, to_value};
use super::snapshots::{SnapshotRun, SnapshotState};
use crate::api::search::SearchRequest;
use crate::error::{ApiStatus, Result};

impl Syncer {
    /// Every page of one search-profiles request, as one snapshot.
    pub(super) async fn sync_search(
        &self,
        ctx: &mut JobCtx<'_>,
        key: &str,
        request: &SearchRequest,
    ) -> Result<Finished> {
        let state: SnapshotState = self.read_state(key)?.unwrap_or_default();
        let mut run = state.run.unwrap_or_else(SnapshotRun::start);
        let mut fetched_at = run.fetched_at;
        let mut req = request.clone();
        if req.limit.is_none() {
            req.limit = Some(self.config.page_limit);
        }
        let resumed = run.cursor.is_some();
        let mut pages = Box::pin(self.client.search_pages(SearchRequest {
            cursor: run.cursor.clone(),
            ..req.clone()
        }));
        let mut first_page = true;
        loop {
            if ctx.cancel.is_cancelled() {
                return Ok(false);
            }
            let Some(next) = ctx.unless_cancelled(pages.next()).await else {
                return Ok(false);
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
                    pages = Box::pin(self.client.search_pages(req.clone()));
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
            self.hand_off_records(
                ctx,
                page.data,
                fetched_at,
                vec![(key.to_owned(), to_value(&state))],
            )
            .await?;
            if last {
                break;
            }
        }
        Ok(true)
    }
}
