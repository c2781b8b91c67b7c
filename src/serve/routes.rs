//! The router: the JSON API under `/api/` (`api.rs`, and the live routes of `events.rs`), the
//! pages and their assets (`pages.rs`, a fixed table), a JSON 404 for every other path (no
//! path of a request reaches the file system), a JSON 405 for a method a route does not
//! take, and the access check (`access.rs`) in front of all of them.

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State as Shared};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use tokio::sync::{Semaphore, watch};

use super::access::{self, Access};
use super::events::{self, Feed};
use super::{api, bounds, pages, reply};
use crate::lake::Lake;

/// What every request reads: the lake, the access rule, the permits of the questions
/// answered at once, the follow's feed when there is one, and whether the server is stopping
/// (event streams end then).
#[derive(Debug)]
pub(super) struct State {
    pub(super) lake: Lake,
    access: Access,
    pub(super) permits: Semaphore,
    pub(super) feed: Option<Feed>,
    pub(super) stopping: watch::Sender<bool>,
}

impl State {
    pub(super) fn new(lake: Lake, access: Access, feed: Option<Feed>) -> State {
        State {
            lake,
            access,
            permits: Semaphore::new(bounds::MAX_CONCURRENT),
            feed,
            stopping: watch::Sender::new(false),
        }
    }
}

/// Every route of the server, behind the access check.
pub(super) fn router(state: Arc<State>) -> Router {
    Router::new()
        .nest(
            "/api",
            api::routes()
                .route("/follow", get(events::follow))
                .route("/events", get(events::events)),
        )
        .merge(pages::routes())
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
        None => {
            // A page opened with its token in the link keeps it as a cookie.
            let given = access::in_query(request.uri().query());
            let mut response = next.run(request).await;
            if let (Access::Token(token), true) = (&state.access, given)
                && let Ok(value) = HeaderValue::from_str(&access::cookie(token))
            {
                response.headers_mut().append(header::SET_COOKIE, value);
            }
            response
        }
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
