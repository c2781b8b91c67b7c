//! Analytics on the lake: bars, price stats, wallet PnL, trading metrics, token metrics, local
//! search and data-quality checks.
//!
//! Rules of this layer:
//! - It reads only the lake's committed Parquet files (those the manifest lists), never the
//!   network. It reads only the columns it needs, skips files whose time span (recorded in the
//!   manifest) misses the requested range, and prunes row groups by `block_time`. Row groups are
//!   decoded in parallel into compact event columns, so memory holds those, not whole frames.
//! - Results are polars `DataFrame`s; printing and file formats belong to the CLI.
//! - Event order is `(block_time, block_slot, id)`, whatever order the files hold rows in;
//!   each token's (or ledger's) events are sorted into it before any computation.
//! - Work is parallel across tokens and ledgers (rayon), and each one's numbers are computed by
//!   one sequential pass in event order, so results have the same bits whatever the thread
//!   count and whatever the order of rows or files.
//! - The simulator's reference code is never called: tests compare the two over HTTP.
//!
//! | module | what |
//! |---|---|
//! | `events` | the token side of swaps or trades, per token, in event order |
//! | `ohlcv` | time bars, coarser bars from finer bars, bars from stored candles and price history, tick / volume / dollar bars |
//! | `stats` | price changes and volumes over 5m … 30d, as the service's get-price-stats |
//! | `series_stats` | the same price stats from a stored EVM price history (`docs/series.md`) |
//! | [`pnl`] | ledgers per (wallet, token): cost-basis methods, realized and unrealized PnL, lots, positions, equity curves |
//! | `metrics` | trading metrics: Sharpe, Sortino, max drawdown, win rate, profit factor |
//! | `arrow_columns` (crate-internal) | an arrow-rs batch's columns read from a data file: strings as dictionaries, numbers as one type, timestamps as microseconds |
//! | `columns` (crate-internal) | typed readers of a frame's columns (floats, integers, strings, timestamps as microseconds) |
//! | `intern` (crate-internal) | strings and integer pairs of many rows interned in parallel into sorted dictionaries |
//! | `token_metrics` | the 46 window metrics of a token profile, from the lake's trades |
//! | [`screener`] | the service's search-profiles request answered locally from cached profile snapshots, and its filter language as polars expressions |
//! | `spill_files` (crate-internal) | the spill files of the readers in parts: a part's records appended per row group as segments, read back a part at a time |
//! | `quality` | data-quality findings (`dexlake check`): gaps, price jumps, candles against bars, repeated ids, slot times |

pub(crate) mod arrow_columns;
pub(crate) mod columns;
#[doc(hidden)]
pub mod events;
pub(crate) mod intern;
#[doc(hidden)]
pub mod metrics;
#[doc(hidden)]
pub mod ohlcv;
pub mod pnl;
#[doc(hidden)]
pub mod quality;
pub mod screener;
#[doc(hidden)]
pub mod series_stats;
pub(crate) mod spill_files;
#[doc(hidden)]
pub mod stats;
#[doc(hidden)]
pub mod token_metrics;

// What the query's questions and answers name; the kernels behind them are reached through
// [`Query`](crate::query::Query) (the modules above stay public, hidden from the docs, for the
// crate's tests and benches).
pub use events::{EventInput, EventSource, Selection, TimeRange};
pub use metrics::{RatioConfig, ReturnMetrics};
pub use ohlcv::{
    BarOptions, BarRule, Edge, EventRule, Fill, LiveBars, LiveUpdate, MAX_WIDTH_SECONDS,
    SeriesSelection, SeriesSource,
};
pub use quality::{
    CheckOptions, CheckReport, Finding, Findings, GapRule, JumpRule, check, check_with,
};
pub use stats::PriceStatsOptions;
pub use token_metrics::Window;

#[doc(hidden)]
pub use events::{Events, Tick, TokenEvents, load_events};
#[doc(hidden)]
pub use ohlcv::{
    bars, bars_from, bars_in_batches, event_bars, event_bars_from, resample, series_bars,
};
#[doc(hidden)]
pub use series_stats::series_price_stats;
#[doc(hidden)]
pub use stats::price_stats;
