//! The simulator of the service: a deterministic synthetic market served over HTTP.
//!
//! [`SyntheticMarket::generate`] builds a market from a seed and a [`Scale`]: EVM chains (`chain_id` 1
//! and 8453) and the altchain, each with tokens, pools, wallets of different behaviours and a
//! time-ordered stream of swaps ending at a fixed simulated "now". Every answer of the service
//! (trades, candles, prices, stats, profiles, portfolios) is derived from those swaps by the plain
//! row-by-row computations of [`reference`](mod@reference), which are the reference the analytics layer is
//! tested against.
//!
//! [`Simulator::start`] serves the market over HTTP with the service's eleven operations, its
//! keys ([`DEMO_KEY`], [`FREE_KEY`]), its error bodies, an optional per-key rate limit and
//! injected faults.
//!
//! # Live
//!
//! With [`SimConfig::live`], the market keeps trading after its fixed "now"
//! ([`SyntheticMarket::generate_live`]): the same history to the byte, then each token's walk
//! goes on with the same generators and wallet behaviours for [`LiveConfig::horizon_days`].
//! The simulator answers at its clock, which starts at the fixed "now" and runs
//! [`LiveConfig::speed`] simulated seconds per real second, or stands still until
//! [`Simulator::advance`] for a manual clock. At an instant `t` (whole seconds):
//!
//! - the swaps and trades are those with a block time at or before `t`; `count` is their
//!   number at `t`;
//! - prices, price stats, candles, price history, profiles (market section, metrics windows,
//!   labels) and portfolios are computed at `t`, and `t` is the default `to`;
//! - the same seed and scale answer the same bytes at the same `t`, whatever the speed, the
//!   horizon or the requests before;
//! - the swaps after the fixed "now" have ids after every id of the history, growing with the
//!   event order, and block times after "now" (so the swaps shown at any `t` are a prefix of
//!   the event order `(block_slot, id)`, and the swaps that appear later sort above all of
//!   them): a newest-first walk of cursors that began before new swaps appeared goes on below
//!   its last cursor and sees every swap that existed when it began exactly once, and none of
//!   the new ones; a walk begun again from the newest sees them;
//! - a wallet buying with more quote than it holds first receives the difference and a margin
//!   (a transfer, not a swap), so its quote balance before such a swap exceeds the one after
//!   its swap before;
//! - after the horizon no swap happens; the clock and the windows go on.
//!
//! `GET /sim/catalog` (no key; not an operation of the service) answers the catalog at the
//! clock: tokens, pools and wallets with their swap counts so far, `now`, and for a live
//! market `live.trading_until`. The large scale cannot be live (it keeps no streams in memory).
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> dexlake::Result<()> {
//! use dexlake::sim::{Scale, SimConfig, Simulator};
//!
//! let sim = Simulator::start(SimConfig { seed: 7, scale: Scale::Tiny, ..SimConfig::default() })
//!     .await?;
//! let token = sim.market().catalog().altchain.tokens[0].address.clone();
//! // POST {base_url}/v1/altchain/dex/swaps/get-swaps with `x-api-key: demo-key` and
//! // {"token": token} now answers the newest swaps of the most active token.
//! println!("{} serves {token}", sim.base_url());
//! sim.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Scales
//!
//! | scale | altchain tokens / wallets / swaps | each EVM chain (1, 8453) |
//! |---|---|---|
//! | tiny | 10 / 60 / ~4,000 | 5 / 30 / ~1,000 |
//! | small | 60 / 1,500 / ~50,000 | 20 / 300 / ~10,000 |
//! | medium | 400 / 20,000 / ~1,000,000 | 100 / 3,000 / ~100,000 |
//! | large | 3,000 / 150,000 / ~10,000,000 | 300 / 20,000 / ~1,000,000 |
//!
//! Tiny to medium keep every token's swap stream in memory. Large keeps only compact indexes
//! (about 20 bytes per swap: the slot, the wallet's quote balance, the pool and wallet
//! indexes) and regenerates a token's stream from `(seed, chain, token)` when it is asked
//! for, with a cache bounded in records (room for the eight largest streams at once, so that a
//! client paging through several large tokens together does not evict one on every miss);
//! the regenerated stream is identical to the one the indexes were built from.
//!
//! # Decisions where the interface is silent
//!
//! - Every swap trades one non-quote token against one quote token (the chain's wrapped native
//!   coin or its USD stablecoin, swap types `quote_token` and `token_quote`) and carries no
//!   fee, so `usd_amount_in == usd_amount_out` and a trade's `usd_amount` is that same value.
//!   There is one trade per swap, with the swap's `id`.
//! - Ids are numbered token by token; the event order is `(block_slot, id)` (block times follow
//!   the slots). Swaps and trades come newest first; cursors are opaque keysets on
//!   `(block_slot, id)`; the last page has a null cursor; a page without `limit` has
//!   [`DEFAULT_LIMIT`] items.
//! - `position_state` is `open` for a buy from a zero balance, `close` for a sell to a zero
//!   balance, `trade` otherwise.
//! - Addresses the market does not know: left out of price, stats and history arrays; no
//!   matches for swaps and trades; an empty portfolio; a 400 for EVM get-profile (the
//!   interface has no 404).
//! - Token metadata carries every member of interface 2.3 in every answer: a link the token
//!   does not have (`image`, `twitter`, `discord`, `website`, `telegram`) is an empty string,
//!   so a filter such as `{"metadata.twitter": {"$eq": ""}}` finds the tokens without one.
//! - A ratio without a denominator (profit factor without losses, a change against a zero
//!   volume) is emitted as `0`, so every number is finite. Derived answers are defined in
//!   [`reference`](mod@reference).
//! - Errors: authentication (401), then the plan (403), then the rate limit and injected
//!   faults (429, 500), then the body (400).

mod catalog;
mod generate;
mod live;
mod market;
mod paging;
pub mod reference;
mod reject;
#[doc(hidden)]
pub mod server;
mod streams;
mod walk;

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

pub use crate::api::requests::DEFAULT_LIMIT;
pub use catalog::{Catalog, CatalogChain, CatalogLive, CatalogPool, CatalogToken, CatalogWallet};
pub use live::{LiveConfig, MAX_HORIZON_DAYS};
pub use market::{
    Behaviour, Chain, IndexList, PoolInfo, PosState, QuoteInfo, SwapRecord, SyntheticMarket,
    TokenInfo, WalletInfo,
};
pub use server::{MAX_HISTORY_POINTS, SimStats, Simulator};
pub use streams::StreamView;

/// The key of the plan that may call every operation.
pub const DEMO_KEY: &str = "demo-key";
/// The key of a plan that gets 403 on search-profiles and get-portfolio.
pub const FREE_KEY: &str = "free-key";

/// Size of the generated market.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Scale {
    /// A few thousand swaps: generated in well under a second, for tests.
    #[default]
    Tiny,
    /// About 50,000 altchain swaps.
    Small,
    /// About a million altchain swaps.
    Medium,
    /// About ten million altchain swaps.
    Large,
    /// A hundred million altchain swaps (30,000 tokens, 1.5 million wallets), kept the way the
    /// large scale is: for benchmarks at the limit (`dexlake bench-lake --scale xlarge`); its
    /// compact indexes and generation take about 5 GB of memory.
    XLarge,
}

impl Scale {
    /// Every scale, smallest first.
    pub const ALL: [Scale; 5] = [
        Scale::Tiny,
        Scale::Small,
        Scale::Medium,
        Scale::Large,
        Scale::XLarge,
    ];

    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Scale::Tiny => "tiny",
            Scale::Small => "small",
            Scale::Medium => "medium",
            Scale::Large => "large",
            Scale::XLarge => "xlarge",
        }
    }
}

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scale {
    type Err = crate::Error;

    fn from_str(s: &str) -> crate::Result<Self> {
        Scale::ALL
            .into_iter()
            .find(|scale| scale.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                crate::Error::Config(format!(
                    "unknown scale {s:?} (expected tiny, small, medium, large or xlarge)"
                ))
            })
    }
}

/// Configuration of a [`Simulator`].
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Address to bind; port 0 picks a free port. Default `127.0.0.1:0`.
    pub addr: SocketAddr,
    /// Seed of the market.
    pub seed: u64,
    /// Size of the market.
    pub scale: Scale,
    /// Path segment of the non-EVM family (`/v1/<segment>/...`). Default `altchain`.
    pub altchain_segment: String,
    /// Requests per second allowed per key (a token bucket with a burst of the same size);
    /// `None` means unlimited.
    pub rate_limit: Option<f64>,
    /// Probability that a request is answered 500, to exercise retries.
    pub fail_rate: f64,
    /// Probability that a request is answered 429 with `Retry-After: 1`.
    pub throttle_rate: f64,
    /// Seed of the fault injection; `None` derives it from `seed`.
    pub fault_seed: Option<u64>,
    /// A market that keeps trading after its fixed "now", answered at a running clock;
    /// `None` (the default) serves the fixed market. See the module documentation.
    pub live: Option<LiveConfig>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            seed: 0,
            scale: Scale::Tiny,
            altchain_segment: "altchain".to_owned(),
            rate_limit: None,
            fail_rate: 0.0,
            throttle_rate: 0.0,
            fault_seed: None,
            live: None,
        }
    }
}
