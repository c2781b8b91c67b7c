//! # dexlake
//!
//! An embedded analytics engine over cached DEX market data.
//!
//! dexlake fetches price history, candles, swaps, trades, prices, price stats, token profiles
//! and portfolios from a token market-data service and keeps them in a local **lake** of
//! hive-partitioned Parquet. DuckDB, polars and pyarrow read the lake as it is. The crate has
//! these layers, each with one entry point:
//!
//! | layer | entry | what it does |
//! |---|---|---|
//! | [`api`] | [`api::Client`] | typed requests for the service's eleven operations, retries, rate limit, paging, chunking |
//! | [`lake`] | [`lake::Lake`] | Arrow schemas, atomic Parquet writes under a manifest, polars scans |
//! | [`time_range`] | [`TimeRange`] | the one half-open time range: what the analytics select, the coverage reports and the sync states record |
//! | [`sync`] | [`sync::Syncer`] | incremental, resumable fetch jobs: client → lake |
//! | [`query`] | [`query::Query`] (`lake.query()`) | the one way into the lake's answers: every door (CLI, Python, report, follow) asks it; an [`query::Answer`] carries the value, its coverage, its warnings and the lake version |
//! | [`coverage`] | [`coverage::status`] | what the lake covers, from the manifest and the recorded sync states: `dexlake status`, and the coverage each analytics answer carries (ranges never fetched, partial views) |
//! | [`live`] | [`live::Follower`] | following tokens as the market trades: polls through sync, a watermark from the service's answers, bars kept up to date ([`analytics::LiveBars`]) and committed to the lake's `bars` dataset (`dexlake follow`) |
//! | [`search`] | [`search::search`] | the service's search-profiles engine, shared by the simulator and local search |
//! | [`analytics`] | [`analytics::bars`], [`analytics::price_stats`], [`analytics::pnl::pnl_report`], [`analytics::screener::search`] | OHLCV and other bars, price stats (from events or a stored price history), wallet PnL, trading and token metrics, and the search-profiles request answered from the lake's profile snapshots |
//! | `report` (feature `report`) | `report::build` | the daily report: top tokens' candles, price stats, the PnL leaderboard and a screener as HTML with PNG charts |
//! | `serve` (feature `serve`) | `serve::Server` | `dexlake serve`: the query's answers as a JSON API over HTTP, read-only, loopback unless given an access token |
//! | `sim` (feature `sim`) | `sim::Simulator` | a deterministic simulator of the service on loopback |
//!
//! ## Example
//!
//! Start the simulator, sync one token's swaps into a fresh lake, and read them back with
//! polars:
//!
//! ```
//! # #[cfg(feature = "sim")]
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! use dexlake::api::{Client, ClientConfig};
//! use dexlake::lake::{Dataset, Lake};
//! use dexlake::sim::{Scale, SimConfig, Simulator};
//! use dexlake::sync::{Job, SyncConfig, Syncer};
//!
//! // A simulated service on 127.0.0.1 with a small deterministic market.
//! let sim = Simulator::start(SimConfig { seed: 42, scale: Scale::Tiny, ..SimConfig::default() }).await?;
//! let token = sim.market().catalog().altchain.tokens[0].address.clone();
//!
//! let client = Client::new(ClientConfig {
//!     base_url: sim.base_url().to_owned(),
//!     api_key: Some("demo-key".into()),
//!     ..ClientConfig::default()
//! })?;
//! let dir = tempfile::tempdir()?;
//! let lake = Arc::new(Lake::open(dir.path())?);
//!
//! // Fetch every swap of the token; a second run would fetch only newer ones.
//! let sync = Syncer::new(client, Arc::clone(&lake), SyncConfig::default());
//! let job = Job::Swaps { token: Some(token), wallet: None, pool: None };
//! let report = sync.run(&[job]).await;
//! assert!(!report.any_failed());
//!
//! // The lake is Parquet; polars reads it lazily with the hive partition columns.
//! let swaps = lake.scan(Dataset::Swaps)?.collect()?;
//! assert_eq!(swaps.height() as u64, report.jobs[0].rows_added);
//! # sim.shutdown().await;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "sim"))]
//! # fn main() {}
//! ```
//!
//! The same program runs against the real service: build the client with
//! [`api::Client::from_env`] (`DEXLAKE_BASE_URL`, `DEXLAKE_API_KEY`) instead of the simulator's
//! address.
//!
//! ## Errors
//!
//! Every fallible function returns [`Result`] with the one [`Error`] type. It keeps the
//! operation, path or member concerned and the underlying cause as its `source`, and
//! [`Error::kind`] says which [`ErrorKind`] it is (usage, no data, incomplete coverage, damaged
//! lake, service, busy, interrupted), which the CLI's exit status and the Python package's
//! exception class follow. The library never prints and never exits. Progress of long work is reported through
//! [`sync::SyncObserver`].
#![warn(missing_docs)]

pub mod analytics;
pub mod api;
pub mod coverage;
pub mod error;
pub mod lake;
pub mod live;
pub mod prelude;
pub mod query;
#[cfg(feature = "report")]
pub mod report;
pub mod search;
#[cfg(feature = "serve")]
pub mod serve;
#[cfg(feature = "sim")]
pub mod sim;
pub mod sync;
pub mod time_range;

pub use error::{ApiStatus, Error, ErrorKind, Result};
pub use time_range::TimeRange;
