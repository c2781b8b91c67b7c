//! `dexlake serve`: the lake in a browser, its pages and their live bars, and the lake's
//! answers over HTTP as a JSON API under `/api/` (docs/api.md).
//!
//! What lives here: the server ([`Server`]: bind, then run until a shutdown signal), the
//! router (`routes.rs`: the API under `/api/`, the pages, a JSON 404 for every other path, the
//! access check on every request), the API's handlers (`api.rs`: each turns its query
//! parameters into one question of the query and writes its answer), the parameters' parsing
//! (`params.rs`: the CLI's names, the library's parsers), the answer and error JSON with
//! the one mapping of an error's kind to an HTTP status (`reply.rs`), the access token and
//! its cookie (`access.rs`), the response bounds ([`bounds`]), the pages (`pages.rs`: the
//! HTML, JavaScript and CSS of `assets/`, embedded in the binary, under a fixed table of
//! routes; `assets/vendor/` holds TradingView's Lightweight Charts with its licence) and the
//! live bars (`events.rs`: the [`Feed`] a follow publishes to, the server-sent events of
//! `/api/events`, resumed from the lake after a bar's id).
//!
//! What it may import: [`crate::query`] for every answer, with its option and result types
//! (`analytics` options, `coverage` results), [`crate::error`], and a read-only
//! [`Lake`] handle ([`Lake::open_existing`]:
//! no lock, nothing created). Never `sync`, `live` or the service's client: serving never
//! writes the lake nor reads the network; with `dexlake serve --follow` the CLI runs the
//! follower and publishes its bars to the [`Feed`]. No path of a request reaches the file
//! system: the routes are a fixed list of names, the assets are compiled in, and every answer
//! is read from the lake's committed files. A page computes no answer: every number it shows
//! is an answer of the API.

mod access;
mod api;
pub mod bounds;
mod events;
mod pages;
mod params;
mod reply;
mod routes;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

pub use access::{Access, generate_token};
pub use events::Feed;

use crate::lake::Lake;
use crate::{Error, Result};

/// A bound server: its address is known (a port of 0 is chosen by the system), and
/// [`Server::run`] answers requests until its shutdown signal.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    lake: Lake,
    access: Access,
    feed: Option<Feed>,
}

impl Server {
    /// Binds `addr` to answer from `lake` (open it with
    /// [`Lake::open_existing`](crate::lake::Lake::open_existing): serving reads only), checking
    /// every request against `access`. A non-loopback address without a token is refused
    /// (give it [`Access::Token`], see [`generate_token`]), and so is an empty token. Must be called within a tokio
    /// runtime.
    pub async fn bind(addr: SocketAddr, lake: Lake, access: Access) -> Result<Server> {
        if access == Access::Token(String::new()) {
            return Err(Error::InvalidArgument {
                argument: "token".into(),
                reason: "give a token: an empty one would let anyone in".into(),
            });
        }
        if !addr.ip().is_loopback() && access == Access::Open {
            return Err(Error::InvalidArgument {
                argument: "addr".into(),
                reason: format!(
                    "{addr} is not a loopback address: serving beyond this machine needs an access token"
                ),
            });
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| Error::io("binding", addr.to_string(), e))?;
        Ok(Server {
            listener,
            lake,
            access,
            feed: None,
        })
    }

    /// Serves the live bars of `feed` on `/api/events` (and its state on `/api/follow`): the
    /// caller follows the market and publishes each poll to it.
    pub fn with_feed(mut self, feed: Feed) -> Server {
        self.feed = Some(feed);
        self
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::io("reading the address of", "the server", e))
    }

    /// Answers requests until `shutdown` completes, then finishes the requests under way.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let addr = self.local_addr()?;
        let state = Arc::new(routes::State::new(self.lake, self.access, self.feed));
        let router = routes::router(Arc::clone(&state));
        // Event streams never end by themselves: they end when the shutdown comes.
        let stopping = async move {
            shutdown.await;
            state.stopping.send_replace(true);
        };
        axum::serve(self.listener, router)
            .with_graceful_shutdown(stopping)
            .await
            .map_err(|e| Error::io("serving on", addr.to_string(), e))
    }
}
