//! The integration tests, one crate (one link of polars, arrow and axum), a module per boundary:
//! the client against scripted servers, the simulator over HTTP, the lake on disk, sync, the
//! analytics (bars, PnL, local search) and the daily report. `tests/s3.rs` stays apart: it has
//! its own `main`, which starts moto.

mod analytics_ohlcv;
mod analytics_pnl;
mod analytics_pnl_reader;
mod analytics_search;
mod analytics_search_evm;
mod analytics_search_wide;
mod analytics_series;
#[cfg(feature = "sim")]
mod analytics_series_stats;
mod client;
mod common;
mod coverage;
#[cfg(feature = "sim")]
mod exit_status;
#[cfg(feature = "sim")]
mod follow;
mod lake;
mod lake_files;
mod lake_history;
mod lake_log;
mod lake_read_only;
#[cfg(feature = "sim")]
mod lake_versions;
mod output;
#[cfg(feature = "sim")]
mod provenance;
mod quality;
mod query;
mod query_memory;
#[cfg(feature = "report")]
mod report;
#[cfg(feature = "sim")]
mod series_bench_lake;
#[cfg(all(feature = "sim", feature = "serve"))]
mod serve;
#[cfg(all(feature = "sim", feature = "serve"))]
mod serve_pages;
mod sim;
mod sim_live;
#[cfg(feature = "sim")]
mod sql;
mod sync;
#[cfg(feature = "sim")]
mod sync_files;
