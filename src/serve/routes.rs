//! The router: the JSON API under `/api/` (`api.rs`), a JSON 404 for every other path (no
//! path of a request reaches the file system), a JSON 405 for a method a route does not
//! take, and the access check (`access.rs`) in front of all of them.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State as Shared};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::Response;
use tokio::sync::Semaphore;

use super::access::{self, Access};
use super::{api, bounds, reply};
use crate::lake::Lake;

/// What every request reads: the lake, the access rule and the permits of the questions
/// answered at once.
#[derive(Debug)]
pub(super) struct State {
    pub(super) lake: Lake,
    access: Access,
    pub(super) permits: Semaphore,
}

impl State {
    pub(super) fn new(lake: Lake, access: Access) -> State {
        State {
            lake,
            access,
            permits: Semaphore::new(bounds::MAX_CONCURRENT),
        }
    }
}

/// Every route of the server, behind the access check.
pub(super) fn router(state: Arc<State>) -> Router {
    Router::new()
        .nest("/api", api::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(not_allowed)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            check_access,
        ))
        .layer(DefaultBodyLimit::max(bounds::MAX_BODY_BYTES))
        .with_state(state)
}

async fn check_access(Shared(state): Shared<Arc<State>>, request: Request, next: Next) -> Response {
    match access::refusal(&state.access, request.headers(), request.uri().query()) {
        None => next.run(request).await,
        Some((status, text)) => reply::refusal(
            StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED),
            &text,
        ),
    }
}

async fn not_found() -> Response {
    reply::refusal(
        StatusCode::NOT_FOUND,
        "no such route; the API's routes are under /api/ (docs/api.md)",
    )
}

async fn not_allowed() -> Response {
    reply::refusal(
        StatusCode::METHOD_NOT_ALLOWED,
        "this route does not take this method (docs/api.md)",
    )
}
