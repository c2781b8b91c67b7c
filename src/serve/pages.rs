//! The pages: HTML, JavaScript and CSS files of the repository (`assets/`), embedded in the
//! binary and served under a fixed table of routes. No path of a request names a file: a page
//! route answers its shell, an asset route answers the asset its name matches in
//! [`ASSETS`], and anything else is the router's 404. Every number a page shows it fetches
//! from the API under `/api/`; a page computes no answer itself.

use std::sync::Arc;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::reply;
use super::routes::State;
use crate::query::args;

/// The page shell: a page's name is put into it (never anything of the request).
const SHELL: &str = include_str!("assets/page.html");

/// Every asset the pages load, by the name of its route `/assets/{name}`, with its type.
const ASSETS: [(&str, &str, &str); 9] = [
    ("style.css", "text/css", include_str!("assets/style.css")),
    ("common.js", JS, include_str!("assets/common.js")),
    ("lake.js", JS, include_str!("assets/lake.js")),
    ("token.js", JS, include_str!("assets/token.js")),
    ("wallet.js", JS, include_str!("assets/wallet.js")),
    ("leaderboard.js", JS, include_str!("assets/leaderboard.js")),
    ("screener.js", JS, include_str!("assets/screener.js")),
    (
        "lightweight-charts.js",
        JS,
        include_str!("assets/vendor/lightweight-charts.standalone.production.js"),
    ),
    (
        "lightweight-charts.LICENSE",
        "text/plain; charset=utf-8",
        include_str!("assets/vendor/LICENSE"),
    ),
];

const JS: &str = "text/javascript; charset=utf-8";

/// The pages' content policy: scripts, styles and requests of this server only.
const POLICY: &str = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; \
                      object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

/// The routes of the pages and their assets.
pub(super) fn routes() -> Router<Arc<State>> {
    Router::new()
        .route("/", get(|| async { page("lake", "the lake") }))
        .route(
            "/leaderboard",
            get(|| async { page("leaderboard", "leaderboard") }),
        )
        .route("/screener", get(|| async { page("screener", "screener") }))
        .route("/token/{address}", get(token))
        .route("/wallet/{address}", get(wallet))
        .route("/assets/{name}", get(asset))
}

async fn token(Path(address): Path<String>) -> Response {
    addressed("token", &address)
}

async fn wallet(Path(address): Path<String>) -> Response {
    addressed("wallet", &address)
}

/// The page of a token or a wallet, whose address the page reads from its own location; an
/// address the CLI would refuse is a 400 with the CLI's reason.
fn addressed(name: &'static str, address: &str) -> Response {
    match args::address(address) {
        Ok(_) => page(name, name),
        Err(reason) => reply::refusal(
            StatusCode::BAD_REQUEST,
            &format!("invalid {name}: {reason}"),
        ),
    }
}

/// The shell of the page `name` (a fixed name: its script is `/assets/{name}.js`).
fn page(name: &'static str, title: &'static str) -> Response {
    let html = SHELL.replace("{{page}}", name).replace("{{title}}", title);
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    secure(&mut response);
    response
}

/// The asset of `name` in [`ASSETS`], or a 404.
async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => {
            let mut response = ([(header::CONTENT_TYPE, *kind)], *body).into_response();
            secure(&mut response);
            response
        }
        None => reply::refusal(StatusCode::NOT_FOUND, "no such asset"),
    }
}

fn secure(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_script_is_an_asset() {
        for page in ["lake", "token", "wallet", "leaderboard", "screener"] {
            let script = format!("{page}.js");
            assert!(ASSETS.iter().any(|(n, _, _)| *n == script), "{script}");
        }
        assert!(SHELL.contains("/assets/{{page}}.js"));
    }
}
