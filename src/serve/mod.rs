//! `dexlake serve`: the lake's answers over HTTP, as a JSON API under `/api/` (docs/api.md).
//!
//! What lives here: the server ([`Server`]: bind, then run until a shutdown signal), the
//! router (`routes.rs`: the API under `/api/`, a JSON 404 for every other path, the access
//! check on every request), the API's handlers (`api.rs`: each turns its query parameters
//! into one question of the query and writes its answer), the parameters' parsing
//! (`params.rs`: the CLI's names, the library's parsers), the answer and error JSON with
//! the one mapping of an error's kind to an HTTP status (`reply.rs`), the access token
//! (`access.rs`) and the response bounds ([`bounds`]).
//!
//! What it may import: [`crate::query`] for every answer, with its option and result types
//! (`analytics` options, `coverage` results), [`crate::error`], and a read-only
//! [`Lake`] handle ([`Lake::open_existing`]:
//! no lock, nothing created). Never `sync`, `live` or the service's client: serving never
//! writes the lake nor reads the network. No path of a request reaches the file system: the
//! routes are a fixed list of names, and every answer is read from the lake's committed files.
//!
//! The pages and their live event stream are to sit beside the API: a route module of their
//! own merged into the router next to `/api/`, behind the same access check.

mod access;
mod api;
pub mod bounds;
mod params;
mod reply;
mod routes;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

pub use access::{Access, generate_token};

use crate::lake::Lake;
use crate::{Error, Result};

/// A bound server: its address is known (a port of 0 is chosen by the system), and
/// [`Server::run`] answers requests until its shutdown signal.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    state: Arc<routes::State>,
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
            state: Arc::new(routes::State::new(lake, access)),
        })
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
        let router = routes::router(self.state);
        axum::serve(self.listener, router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| Error::io("serving on", addr.to_string(), e))
    }
}
