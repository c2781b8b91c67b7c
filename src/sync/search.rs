//! Altchain profiles: every page of one search-profiles request, as one snapshot.

use futures::StreamExt;

use super::run::{Finished, JobCtx, Syncer, to_value};
use super::snapshots::{SnapshotRun, SnapshotState};
use crate::api::search::SearchRequest;
use crate::error::Result;

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
        let fetched_at = run.fetched_at;
        let mut req = request.clone();
        req.cursor = run.cursor.clone();
        if req.limit.is_none() {
            req.limit = Some(self.config.page_limit);
        }
        let mut pages = Box::pin(self.client.search_pages(req));
        loop {
            if ctx.cancel.is_cancelled() {
                return Ok(false);
            }
            let Some(page) = pages.next().await else {
                break;
            };
            let page = page?;
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
            ctx.rows_added += self
                .commit_records(
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
