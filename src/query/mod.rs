//! The one way into the lake's answers: which events, then what, then an [`Answer`].
//!
//! A [`Query`] starts from an open [`Lake`] (`lake.query()`, through [`LakeQuery`]), narrows the
//! events it speaks of (source, tokens, pool, wallets, time range), and ends in one question
//! (bars may instead be resampled from a stored series, [`Query::candles`] or
//! [`Query::price_history`], and price stats computed from a price history; the other
//! questions refuse a series):
//!
//! | question | its answer |
//! |---|---|
//! | [`Query::scan`] | the selected rows of the source dataset, a `LazyFrame` |
//! | [`Query::bars_covered`], [`Query::bars_to`] | time, tick, volume or dollar bars ([`Bars`]) |
//! | [`Query::price_stats_covered`] | price changes and volumes over 5m … 30d (from events or a price history) |
//! | [`Query::pnl_table`], [`Query::pnl_table_to`], [`Query::pnl_report_covered`] | wallet PnL: ledgers, positions or lots ([`PnlTable`]) |
//! | [`Query::leaderboard_covered`] | wallets ranked by total PnL |
//! | [`Query::performance_covered`] | one wallet's equity curve and its trading metrics |
//! | [`Query::token_metrics_covered`] | the window metrics of one token |
//! | [`Query::search_covered`] | a search-profiles request answered from the lake's profile snapshots |
//! | [`Query::search_evm_covered`] | the same request over an EVM chain's profile snapshots (dexlake's extension) |
//! | [`Query::status`] | what the lake covers, per dataset and synced target |
//! | [`Query::sql`] | the rows a SQL query selects from the lake's datasets (polars' SQL) |
//! | [`Query::check`] | the data-quality findings of the selected tokens (or every one) |
//!
//! Every door (the CLI, the Python package, the daily report, `dexlake follow`) asks through
//! these methods and only formats what comes back: an [`Answer`] carries the value, the
//! [`Coverage`] of what it read, its [`Warning`]s as data and the lake version it read. The
//! rules of an answer live here once: the arguments' checks (one message for every door), what
//! the selection covers, the "nothing found" refusal ([`Error::NoData`]), the warning for
//! listed tokens without events, and strict coverage ([`Query::strict`]: an incomplete
//! coverage is [`Error::Incomplete`] instead of warnings). The short forms ([`Query::bars`],
//! [`Query::pnl`], ...) return the answer's value alone.
//!
//! The doors share the parsers of their text arguments ([`args`]) and the JSON of an answer's
//! rows ([`json_rows`]), so the CLI and `dexlake serve` refuse and write alike.
//!
//! Bars, PnL tables and token metrics are also answered over events held in memory
//! ([`InMemory`]: frames of the lake's schema, a group of a distributed engine) by the same
//! dispatch and kernels past the analytics' in-memory reader; [`Query::bars_plan`] gives what
//! such bars take from the lake (the ranges it never fetched).
//!
//! Every answer is computed by the analytics ([`crate::analytics`]) from the lake's committed
//! files; nothing here reads the network. A query of a handle pinned to an older version
//! (`lake.at(version)?.query()`, [`Lake::at`](crate::lake::Lake::at)) reads that version's files
//! and sync state, and its answers carry that version: the same question answers the same
//! bytes whatever the lake committed since. Time bars always leave out the buckets that meet a
//! range never fetched and never fill across one ([`BarOptions::unfetched`]). A selection that an
//! answer cannot honour (a wallet for bars, a time range for PnL, which is computed over each
//! wallet's whole history) is refused with [`Error::InvalidArgument`], never silently dropped;
//! so is an empty (or blank) token, pool or wallet address, which would select nothing.
//!
//! ```no_run
//! use dexlake::prelude::*;
//!
//! # fn demo() -> dexlake::Result<()> {
//! let lake = Lake::open_existing("./lake")?;
//! // Hourly bars of one token's swaps, forward-filled.
//! let bars = lake.query().token("So11111111111111111111111111111111111111112")
//!     .bars(Bars::every(3_600).fill(Fill::ForwardFill))?;
//! // One wallet's PnL per token, highest-in first-out, with its coverage and warnings.
//! let pnl = lake.query().wallet("7xKXtg2CW87d97TXJSDpbD5jBkheTqA83TZRuJosgAsU")
//!     .pnl_table(&PnlConfig { method: CostMethod::Hifo, ..PnlConfig::default() }, PnlTable::Ledgers)?;
//! for warning in &pnl.warnings {
//!     eprintln!("{}: {}", warning.kind.prefix(), warning.text);
//! }
//! // The ten wallets with the largest total PnL.
//! let top = lake.query().leaderboard(10)?;
//! # let _ = (bars, pnl, top); Ok(()) }
//! ```

mod answer;
pub mod args;
mod bars;
mod check;
mod memory;
mod pnl_answers;
mod rows;
mod series_answers;
mod sql;

pub use answer::{Answer, Warning, WarningKind};
pub use bars::{BarSplit, Bars};
pub use memory::InMemory;
pub use rows::{json_cells, json_rows};

use chrono::{DateTime, Utc};
use polars::prelude::*;

#[cfg(doc)]
use crate::analytics::BarOptions;
#[cfg(doc)]
use crate::analytics::pnl::PnlTable;
use crate::analytics::screener::{self, ProfileSnapshot};
use crate::analytics::token_metrics;
use crate::analytics::{EventSource, PriceStatsOptions, Selection, SeriesSource, TimeRange};
use crate::api::profile_query::SearchRequest;
use crate::coverage::{self, Coverage, LakeStatus};
use crate::lake::Lake;
use crate::lake::cols::{event, swap, trade};
use crate::search::SearchPage;
use crate::{Error, Result};

/// `lake.query()`: the entry of a [`Query`] on an open lake (in [`crate::prelude`]).
pub trait LakeQuery {
    /// A query over every swap of the lake, to narrow and then answer.
    fn query(&self) -> Query<'_>;
}

impl LakeQuery for Lake {
    fn query(&self) -> Query<'_> {
        Query::new(self)
    }
}

/// Which events of a lake a question is about; each answer method computes one thing on them.
///
/// The default selection is every token's swaps over the lake's whole history. Selectors
/// replace (`token`, `tokens`, `pool`) or extend (`wallet`, `wallets`) the selection; the
/// last source, token and range given wins.
#[derive(Debug, Clone)]
pub struct Query<'a> {
    lake: &'a Lake,
    source: EventSource,
    /// A stored series instead of events: bars are resampled from it, price stats computed
    /// from a price history. Kept apart from [`EventSource`], which every event answer (PnL,
    /// the price stats of events, coverage) reads as events.
    series: Option<SeriesSource>,
    /// The stored interval of the series to read, seconds ([`Query::series_interval`]).
    series_interval: Option<i64>,
    tokens: Option<Vec<String>>,
    pool: Option<String>,
    wallets: Option<Vec<String>>,
    range: TimeRange,
    /// Whether the tokens were given as a list ([`Query::tokens`]), not one ([`Query::token`]).
    listed: bool,
    strict: bool,
    /// Most PnL events read into memory at once ([`Query::events_at_once`]).
    events_at_once: usize,
}

impl<'a> Query<'a> {
    /// Every swap of `lake`.
    pub fn new(lake: &'a Lake) -> Self {
        Query {
            lake,
            source: EventSource::Swaps,
            series: None,
            series_interval: None,
            tokens: None,
            pool: None,
            wallets: None,
            range: TimeRange::default(),
            listed: false,
            strict: false,
            events_at_once: crate::analytics::pnl::EVENTS_AT_ONCE,
        }
    }

    /// Events from swaps (the default): the token side of each swap.
    pub fn swaps(self) -> Self {
        self.source(EventSource::Swaps)
    }

    /// Events from trades: one event per trade.
    pub fn trades(self) -> Self {
        self.source(EventSource::Trades)
    }

    /// Events from `source`.
    pub fn source(mut self, source: EventSource) -> Self {
        self.source = source;
        self.series = None;
        self
    }

    /// The altchain candles stored in the lake instead of events: [`Query::bars`] resamples
    /// them (time bars only, see `docs/series.md`); the other answers refuse a series.
    pub fn candles(self) -> Self {
        self.series(SeriesSource::Candles)
    }

    /// The price history of the EVM chain `chain_id` stored in the lake instead of events:
    /// [`Query::bars`] resamples it (time bars only) and [`Query::price_stats`] computes from
    /// its points (see `docs/series.md`); the other answers refuse a series.
    pub fn price_history(self, chain_id: i64) -> Self {
        self.series(SeriesSource::PriceHistory { chain_id })
    }

    /// What bars (and price stats) are made of, by the name every door uses: `swaps`,
    /// `trades`, `candles` or `price_history` (also spelled `price-history`), with the EVM
    /// chain a price history is of. One check of the pair for every door: a price history
    /// without its chain, or a chain with another source, is refused.
    pub fn bars_source(self, source: &str, chain_id: Option<i64>) -> Result<Self> {
        match (source, chain_id) {
            ("candles", None) => Ok(self.candles()),
            ("price_history" | "price-history", Some(chain_id)) => Ok(self.price_history(chain_id)),
            ("price_history" | "price-history", None) => Err(refused(
                "chain_id",
                "a price history is of one EVM chain: name the chain",
            )),
            (_, Some(_)) => Err(refused(
                "chain_id",
                "only a price history is of a chain; the other sources take none",
            )),
            (source, None) => Ok(self.source(source.parse()?)),
        }
    }

    /// The stored series `series` instead of events ([`Query::candles`],
    /// [`Query::price_history`]).
    pub fn series(mut self, series: SeriesSource) -> Self {
        self.series = Some(series);
        self
    }

    /// The stored interval of the series to resample, in seconds; the bar width must be a
    /// multiple of it. Without it, the finest stored interval that divides the width. Refused
    /// without a series.
    pub fn series_interval(mut self, seconds: i64) -> Self {
        self.series_interval = Some(seconds);
        self
    }

    /// Only this token's events: frames without `token_address`. An empty address is refused
    /// by the answer.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.tokens = Some(vec![token.into()]);
        self.listed = false;
        self.pool = None;
        self
    }

    /// Only these tokens' events, as a list (of any length): one long frame with
    /// `token_address`, and the tokens without events named in a warning.
    pub fn tokens<S: Into<String>>(mut self, tokens: impl IntoIterator<Item = S>) -> Self {
        self.tokens = Some(tokens.into_iter().map(Into::into).collect());
        self.listed = true;
        self.pool = None;
        self
    }

    /// Only the swaps of this pool (grouped by the token they price).
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = Some(pool.into());
        self.tokens = None;
        self
    }

    /// Also this wallet (PnL, performance and scans select by wallet; bars do not). An empty
    /// address is refused by the answer.
    pub fn wallet(self, wallet: impl Into<String>) -> Self {
        self.wallets([wallet])
    }

    /// Also these wallets.
    pub fn wallets<S: Into<String>>(mut self, wallets: impl IntoIterator<Item = S>) -> Self {
        self.wallets
            .get_or_insert_with(Vec::new)
            .extend(wallets.into_iter().map(Into::into));
        self
    }

    /// Only events at or after `from`.
    pub fn since(mut self, from: DateTime<Utc>) -> Self {
        self.range.from = Some(from);
        self
    }

    /// Only events before `to`.
    pub fn until(mut self, to: DateTime<Utc>) -> Self {
        self.range.to = Some(to);
        self
    }

    /// Only events in `[from, to)`.
    pub fn between(self, from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        self.since(from).until(to)
    }

    /// The time range selected so far.
    pub fn range(&self) -> TimeRange {
        self.range
    }

    /// The selected rows of the source dataset (`swaps` or `trades`) with the hive columns, as
    /// a lazy frame to refine with polars: a swap is selected when either of its tokens is, a
    /// trade by its `token_address`; wallets by `wallet_address`, the pool by `pool_address`,
    /// time by `block_time`.
    pub fn scan(&self) -> Result<LazyFrame> {
        self.events_only("a scan")?;
        self.range.validate()?;
        self.no_blank_address()?;
        let mut frame = self.lake.scan(self.source.dataset())?;
        let mut keep: Vec<Expr> = Vec::new();
        if let Some(tokens) = &self.tokens {
            // A list literal: polars matches each row against the set.
            let set = lit(Series::new("tokens".into(), tokens.as_slice())).implode(false);
            keep.push(match self.source {
                EventSource::Swaps => col(swap::TOKEN_IN)
                    .is_in(set.clone(), false)
                    .or(col(swap::TOKEN_OUT).is_in(set, false)),
                EventSource::Trades => col(trade::TOKEN).is_in(set, false),
            });
        }
        if let Some(pool) = &self.pool {
            if self.source != EventSource::Swaps {
                return Err(refused("pool", "only swaps have a pool; trades do not"));
            }
            keep.push(col(swap::POOL).eq(lit(pool.as_str())));
        }
        if let Some(wallets) = &self.wallets {
            let set = lit(Series::new("wallets".into(), wallets.as_slice())).implode(false);
            keep.push(col(event::WALLET).is_in(set, false));
        }
        // The lake's times are microseconds (UTC).
        let time = || col(event::BLOCK_TIME).cast(DataType::Int64);
        if let Some(from) = self.range.from {
            keep.push(time().gt_eq(lit(from.timestamp_micros())));
        }
        if let Some(to) = self.range.to {
            keep.push(time().lt(lit(to.timestamp_micros())));
        }
        if let Some(all) = keep.into_iter().reduce(Expr::and) {
            frame = frame.filter(all);
        }
        Ok(frame)
    }

    /// Strict coverage: an answer the lake does not completely cover (a range never fetched,
    /// a partial view, a coverage never recorded) is refused with [`Error::Incomplete`]
    /// instead of carrying coverage warnings. Off by default.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Most events held in memory at once, with the same answers: [`Query::pnl_table_to`]
    /// reads a lake with more in parts of whole wallets, through temporary spill files (see
    /// [`PnlOptions::events_at_once`](crate::analytics::pnl::PnlOptions::events_at_once));
    /// [`Query::bars_to`] (time bars), [`Query::price_stats`] and [`Query::check`] read it in
    /// parts of whole tokens, the files once, through temporary spill files
    /// ([`load_events_in_parts`](crate::analytics::events::load_events_in_parts)).
    /// Default [`EVENTS_AT_ONCE`](crate::analytics::events::EVENTS_AT_ONCE).
    pub fn events_at_once(mut self, events: usize) -> Self {
        self.events_at_once = events;
        self
    }

    /// Bars of the selected events: time bars on a grid, or tick, volume or dollar bars (see
    /// [`Bars`]). One frame with the bar columns, and `token_address` first unless one token
    /// is selected with [`Query::token`]. The value of [`Query::bars_covered`].
    pub fn bars(&self, bars: Bars) -> Result<DataFrame> {
        Ok(self.bars_covered(bars)?.value)
    }

    /// [`Query::bars`] as an [`Answer`]. Time bars leave out the buckets that meet a range the
    /// lake never fetched (see [`crate::analytics::ohlcv`], "Missing data"), unless `bars`
    /// names its own [`BarOptions::unfetched`]. No bar at all is [`Error::NoData`]; tokens of
    /// a list without events are a [`WarningKind::NoEvents`] warning.
    pub fn bars_covered(&self, mut bars: Bars) -> Result<Answer<DataFrame>> {
        let version = self.version()?;
        self.no_wallets("bars")?;
        self.no_blank_address()?;
        if let Some(series) = self.series {
            return self.series_bars(series, bars, version);
        }
        self.no_series_interval()?;
        let coverage = self.coverage()?;
        if bars.options.unfetched.is_empty() {
            bars.options.unfetched = coverage.unfetched();
        }
        let value = self.bars_of(bars)?;
        let selection = self.selection();
        let mut warnings = answer::found(
            self.lake,
            value.height(),
            || answer::present_tokens(&value),
            &selection,
            answer::events_name(self.source),
            self.range,
        )?;
        warnings.extend(answer::coverage_warnings(&coverage, self.strict)?);
        Ok(Answer {
            value,
            coverage,
            warnings,
            version,
        })
    }

    /// Time bars handed to `sink` a batch of `tokens_per_batch` tokens at a time, in token
    /// order, so a whole market's bars never sit in memory at once; the answer's value is the
    /// number of rows handed over. Strict coverage is checked before any batch is handed over;
    /// tick, volume and dollar bars (which hold no more than the events) are handed over in one
    /// batch.
    pub fn bars_to(
        &self,
        mut bars: Bars,
        tokens_per_batch: usize,
        mut sink: impl FnMut(DataFrame) -> Result<()>,
    ) -> Result<Answer<u64>> {
        if !matches!(bars.kind, bars::BarKind::Time) || self.series.is_some() {
            let answer = self.bars_covered(bars)?;
            let rows = answer.value.height() as u64;
            return answer.try_map(|frame| sink(frame).map(|()| rows));
        }
        let version = self.version()?;
        self.no_wallets("bars")?;
        self.no_blank_address()?;
        let coverage = self.coverage()?;
        if bars.options.unfetched.is_empty() {
            bars.options.unfetched = coverage.unfetched();
        }
        let mut warnings = answer::coverage_warnings(&coverage, self.strict)?;
        let selection = self.selection();
        let list = matches!(selection, Selection::Tokens(_));
        let mut present = std::collections::BTreeSet::new();
        let mut rows = 0u64;
        crate::analytics::bars_in_batches(
            self.lake,
            self.source,
            &selection,
            self.range,
            &bars.options,
            tokens_per_batch,
            self.events_at_once,
            |df| {
                // Only a list of tokens names the missing ones.
                if list {
                    present.extend(answer::present_tokens(&df)?);
                }
                rows += df.height() as u64;
                sink(df)
            },
        )?;
        warnings.extend(answer::found(
            self.lake,
            rows as usize,
            || Ok(present),
            &selection,
            answer::events_name(self.source),
            self.range,
        )?);
        Ok(Answer {
            value: rows,
            coverage,
            warnings,
            version,
        })
    }

    /// The coverage of the selected events (source, tokens or pool, range): what the lake's
    /// syncs fetched of them (see [`crate::coverage::of_events`]). Reads only the manifest.
    /// Of a stored series, what its syncs at the [`Query::series_interval`] (at any interval
    /// without one) fetched of the selected tokens or pool over the range (see
    /// [`crate::coverage::of_series`]); its bars take the coverage of the interval they read.
    pub fn coverage(&self) -> Result<Coverage> {
        if let Some(series) = self.series {
            return coverage::of_series(
                self.lake,
                series,
                &self.selection(),
                self.series_interval,
                self.range,
            );
        }
        coverage::of_events(self.lake, self.source, &self.selection(), self.range)
    }

    fn bars_of(&self, bars: Bars) -> Result<DataFrame> {
        let input = crate::analytics::EventInput::Lake(self.lake);
        bars.of_events(input, self.source, &self.selection(), self.range)
    }

    /// Price changes and USD volumes over 5m … 30d of the selected tokens as of `now` (the
    /// source's latest event when `None`); one row per token. The value of
    /// [`Query::price_stats_covered`]. From a price history ([`Query::price_history`]) they
    /// are computed from its points (`docs/series.md`, "Price stats from a series"; `now`
    /// defaults to the end of the latest point's interval); candles are refused.
    pub fn price_stats(&self, now: Option<DateTime<Utc>>) -> Result<DataFrame> {
        Ok(self.price_stats_covered(now)?.value)
    }

    /// [`Query::price_stats`] as an [`Answer`], with the coverage of the 30 days before `now`
    /// of each token. No row is [`Error::NoData`] (naming the tokens' first event when they
    /// have events, only none by `now`).
    pub fn price_stats_covered(&self, now: Option<DateTime<Utc>>) -> Result<Answer<DataFrame>> {
        let version = self.version()?;
        if let Some(series) = self.series {
            return self.series_price_stats(series, now, version);
        }
        self.events_only("price stats")?;
        self.no_wallets("price stats")?;
        self.no_range("price stats", "they are taken as of `now`")?;
        self.no_blank_address()?;
        let selection = self.selection();
        let tokens = self.tokens.clone().unwrap_or_default();
        let coverage = coverage::of_window(
            self.lake,
            self.source,
            &tokens,
            now,
            crate::analytics::stats::WINDOW_SECONDS,
        )?;
        let value = crate::analytics::price_stats(
            self.lake,
            &selection,
            PriceStatsOptions {
                source: self.source,
                now,
                events_at_once: self.events_at_once,
            },
        )?;
        if let (0, Some(now)) = (value.height(), now) {
            // Say that the tokens have events, only none by `now`.
            if let Some(first) = self.first_event_time()? {
                return Err(Error::NoData {
                    what: format!(
                        "no {} of tokens {} at or before --now {} in the lake at {}; their first is at {}",
                        answer::events_name(self.source),
                        tokens.join(","),
                        answer::rfc3339(now),
                        self.lake.named_root().display(),
                        answer::rfc3339(first)
                    ),
                });
            }
        }
        self.stats_answer(value, coverage, answer::events_name(self.source), version)
    }

    /// The answer of price stats (of events or of a series) whose rows are `value`: "nothing
    /// found" and the listed tokens without a row, named as `what`, then the coverage warnings.
    fn stats_answer(
        &self,
        value: DataFrame,
        coverage: Coverage,
        what: &str,
        version: u64,
    ) -> Result<Answer<DataFrame>> {
        // Price stats name their tokens as a list, whatever their number.
        let listed = match self.selection() {
            Selection::Token(t) => Selection::Tokens(vec![t]),
            other => other,
        };
        let mut warnings = answer::found(
            self.lake,
            value.height(),
            || answer::present_tokens(&value),
            &listed,
            what,
            TimeRange::default(),
        )?;
        warnings.extend(answer::coverage_warnings(&coverage, self.strict)?);
        Ok(Answer {
            value,
            coverage,
            warnings,
            version,
        })
    }

    /// The time of the first selected event, if any.
    fn first_event_time(&self) -> Result<Option<DateTime<Utc>>> {
        let first = self
            .scan()?
            .select([col(event::BLOCK_TIME).cast(DataType::Int64).min()])
            .collect()
            .map_err(Error::polars("reading the first event's time"))?;
        let micros = first
            .column(event::BLOCK_TIME)
            .and_then(|c| c.i64().map(|c| c.get(0)))
            .map_err(Error::polars("reading the first event's time"))?;
        Ok(micros.and_then(DateTime::from_timestamp_micros))
    }

    /// The window metrics of the one selected token from the lake's trades, one row per
    /// window label (`1h`, `90m`, `7d`, ...; the service's six when `windows` is empty), as of
    /// `now` (the lake's latest trade when `None`).
    pub fn token_metrics(&self, windows: &[&str], now: Option<DateTime<Utc>>) -> Result<DataFrame> {
        Ok(self.token_metrics_covered(windows, now)?.value)
    }

    /// [`Query::token_metrics`] as an [`Answer`], with the coverage of the token's trades over
    /// the widest window before `now`. A token without trades in its windows is a
    /// [`WarningKind::Empty`] note.
    pub fn token_metrics_covered(
        &self,
        windows: &[&str],
        now: Option<DateTime<Utc>>,
    ) -> Result<Answer<DataFrame>> {
        let version = self.version()?;
        self.events_only("token metrics")?;
        self.no_wallets("token metrics")?;
        self.no_range("token metrics", "their windows end at `now`")?;
        self.no_blank_address()?;
        let token = match self.tokens.as_deref() {
            Some([token]) => token,
            _ => return Err(refused("token", "token metrics are of exactly one token")),
        };
        let windows = memory::windows_of(windows)?;
        let widest = windows.iter().map(|w| w.seconds).max().unwrap_or(0);
        let coverage = coverage::of_window(
            self.lake,
            EventSource::Trades,
            std::slice::from_ref(&token.to_owned()),
            now,
            widest,
        )?;
        let mut warnings = answer::coverage_warnings(&coverage, self.strict)?;
        let value = token_metrics::token_metrics(self.lake, token, &windows, now)?;
        let trades: i64 = value
            .column("trade_count")
            .ok()
            .and_then(|c| c.i64().ok().and_then(|c| c.max()))
            .unwrap_or(0);
        if trades == 0 {
            warnings.push(Warning::new(
                WarningKind::Empty,
                format!("no trades of token {token} in the lake's windows"),
            ));
        }
        Ok(Answer {
            value,
            coverage,
            warnings,
            version,
        })
    }

    /// A search-profiles request answered from the lake's newest profile snapshot, shaped like
    /// the service's answer (`count`, `cursor`, `data`). The request carries its own filter:
    /// an event selection is refused.
    pub fn search(&self, request: &SearchRequest) -> Result<SearchPage> {
        self.search_at(request, ProfileSnapshot::Latest)
    }

    /// [`Query::search`] on the snapshot `snapshot` names.
    pub fn search_at(
        &self,
        request: &SearchRequest,
        snapshot: ProfileSnapshot,
    ) -> Result<SearchPage> {
        Ok(self.search_covered(request, snapshot)?.value)
    }

    /// [`Query::search_at`] as an [`Answer`], with the coverage of the snapshot it read:
    /// partial when the snapshot's sync was interrupted.
    pub fn search_covered(
        &self,
        request: &SearchRequest,
        snapshot: ProfileSnapshot,
    ) -> Result<Answer<SearchPage>> {
        let version = self.version()?;
        self.no_search_selection()?;
        let coverage = coverage::of_profiles(self.lake, &snapshot)?;
        let warnings = answer::coverage_warnings(&coverage, self.strict)?;
        let value = screener::search(self.lake, request, snapshot)?;
        Ok(Answer {
            value,
            coverage,
            warnings,
            version,
        })
    }

    /// A search-profiles request answered from the newest profile snapshot of the EVM chain
    /// `chain_id` (dexlake's extension: the service searches the altchain's profiles only),
    /// with the same shape (`count`, `cursor`, `data`). See
    /// [`screener::search_evm`] for the fields it may name.
    pub fn search_evm(&self, chain_id: i64, request: &SearchRequest) -> Result<SearchPage> {
        Ok(self
            .search_evm_covered(chain_id, request, ProfileSnapshot::Latest)?
            .value)
    }

    /// [`Query::search_evm`] on the snapshot `snapshot` names, as an [`Answer`] with the
    /// coverage of the snapshot it read: partial when the snapshot's sync was interrupted.
    /// The snapshot is chosen as the altchain's: the newest, or the one fetched at exactly
    /// the time named. A request naming a field an EVM profile lacks is refused before the
    /// lake is read.
    pub fn search_evm_covered(
        &self,
        chain_id: i64,
        request: &SearchRequest,
        snapshot: ProfileSnapshot,
    ) -> Result<Answer<SearchPage>> {
        let version = self.version()?;
        self.no_search_selection()?;
        screener::check_evm_request(request)?;
        let chain = crate::api::models::ChainFamily::Evm(chain_id);
        let at = ProfileSnapshot::At(screener::snapshot_time_of(self.lake, chain, snapshot)?);
        let coverage = coverage::of_profiles(self.lake, &at)?;
        let warnings = answer::coverage_warnings(&coverage, self.strict)?;
        let value = screener::search_evm(self.lake, chain_id, request, at)?;
        Ok(Answer {
            value,
            coverage,
            warnings,
            version,
        })
    }

    /// What the lake covers, per dataset and per synced target (`dexlake status`), read from
    /// its manifest and recorded sync states only; it names the version it read.
    pub fn status(&self) -> Result<LakeStatus> {
        coverage::status(self.lake)
    }

    /// A search selects profiles by its request's filter: a token, pool or wallet is refused.
    fn no_search_selection(&self) -> Result<()> {
        if self.tokens.is_some() || self.pool.is_some() || self.wallets.is_some() {
            return Err(refused(
                "selection",
                "a search selects profiles by its request's filter: select no token, pool or wallet",
            ));
        }
        Ok(())
    }

    /// The lake version the answer reads.
    fn version(&self) -> Result<u64> {
        Ok(self.lake.snapshot()?.version)
    }

    fn selection(&self) -> Selection {
        match (&self.pool, &self.tokens) {
            (Some(pool), _) => Selection::Pool(pool.clone()),
            (None, Some(tokens)) if tokens.len() == 1 && !self.listed => {
                Selection::Token(tokens[0].clone())
            }
            (None, Some(tokens)) => Selection::Tokens(tokens.clone()),
            (None, None) => Selection::AllTokens,
        }
    }

    /// Refuses an empty (or blank) token, pool or wallet address: it would select nothing.
    fn no_blank_address(&self) -> Result<()> {
        let blank = |a: &&String| a.trim().is_empty();
        let tokens = self.tokens.iter().flatten().map(|a| ("token", a));
        let pool = self.pool.iter().map(|a| ("pool", a));
        let wallets = self.wallets.iter().flatten().map(|a| ("wallet", a));
        match tokens.chain(pool).chain(wallets).find(|(_, a)| blank(a)) {
            None => Ok(()),
            Some((argument, a)) => Err(refused(
                argument,
                format!("{a:?}: give a {argument} address"),
            )),
        }
    }

    /// Refuses a stored series (or its interval) for an answer computed from events.
    fn events_only(&self, what: &str) -> Result<()> {
        if let Some(series) = self.series {
            return Err(refused(
                "source",
                format!(
                    "{what} are computed from swaps or trades, not from the {}",
                    series.dataset()
                ),
            ));
        }
        self.no_series_interval()
    }

    fn no_series_interval(&self) -> Result<()> {
        match self.series_interval {
            Some(_) => Err(refused(
                "series interval",
                "applies to a stored series only (candles or price history)",
            )),
            None => Ok(()),
        }
    }

    fn no_wallets(&self, what: &str) -> Result<()> {
        match self.wallets {
            Some(_) => Err(refused(
                "wallet",
                format!("{what} are of every wallet's events: select no wallet"),
            )),
            None => Ok(()),
        }
    }

    fn no_range(&self, what: &str, why: &str) -> Result<()> {
        match self.range {
            TimeRange {
                from: None,
                to: None,
            } => Ok(()),
            _ => Err(refused(
                "range",
                format!("{what} take no time range: {why}"),
            )),
        }
    }
}

fn refused(argument: &str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        argument: argument.to_owned(),
        reason: reason.into(),
    }
}
