//! One question about a lake as one expression: which events, then what, then a polars frame.
//!
//! A [`Query`] starts from an open [`Lake`] (`lake.query()`, through [`LakeQuery`]), narrows the
//! events it speaks of (source, tokens, pool, wallets, time range), and ends in one answer:
//!
//! | answer | what it returns |
//! |---|---|
//! | [`Query::scan`] | the selected rows of the source dataset, a `LazyFrame` |
//! | [`Query::bars`] | time, tick, volume or dollar bars ([`Bars`]) |
//! | [`Query::price_stats`] | price changes and volumes over 5m … 30d |
//! | [`Query::pnl`], [`Query::pnl_report`] | wallet PnL per (wallet, token), and its positions and lots |
//! | [`Query::leaderboard`] | wallets ranked by total PnL |
//! | [`Query::performance`] | one wallet's equity curve and its trading metrics |
//! | [`Query::token_metrics`] | the 46 window metrics of one token |
//! | [`Query::search`] | a search-profiles request answered from the lake's profile snapshots |
//!
//! Every answer is computed by the analytics ([`crate::analytics`]) from the lake's committed
//! files; nothing here reads the network.
//!
//! Each answer also has a `_covered` form ([`Query::bars_covered`], ...) that returns it with
//! the [`Coverage`] of what it read: the ranges of each token, wallet or snapshot the lake's
//! syncs never fetched completely, and the targets the lake holds only a partial view of
//! (see [`crate::coverage`]). Time bars always leave out the buckets that meet a range never
//! fetched and never fill across one ([`BarOptions::unfetched`]), in both forms. A selection that an answer cannot honour (a wallet for
//! bars, a time range for PnL, which is computed over each wallet's whole history) is refused
//! with [`Error::InvalidArgument`], never silently dropped; so is an empty (or blank) token,
//! pool or wallet address, which would select nothing.
//!
//! ```no_run
//! use dexlake::prelude::*;
//!
//! # fn demo() -> dexlake::Result<()> {
//! let lake = Lake::open_existing("./lake")?;
//! // Hourly bars of one token's swaps, forward-filled.
//! let bars = lake.query().token("So11111111111111111111111111111111111111112")
//!     .bars(Bars::every(3_600).fill(Fill::ForwardFill))?;
//! // One wallet's PnL per token, highest-in first-out.
//! let pnl = lake.query().wallet("7xKXtg2CW87d97TXJSDpbD5jBkheTqA83TZRuJosgAsU")
//!     .pnl_with(&PnlConfig { method: CostMethod::Hifo, ..PnlConfig::default() })?;
//! // The ten wallets with the largest total PnL.
//! let top = lake.query().leaderboard(10)?;
//! # let _ = (bars, pnl, top); Ok(()) }
//! ```

use chrono::{DateTime, Utc};
use polars::prelude::*;

use crate::analytics::pnl::{
    self, EquityConfig, PnlConfig, PnlQuery, PnlReport, WalletPerformance,
};
use crate::analytics::screener::{self, ProfileSnapshot};
use crate::analytics::token_metrics::{self, Window};
use crate::analytics::{
    BarOptions, BarRule, Edge, EventRule, EventSource, Fill, PriceStatsOptions, Selection,
    TimeRange,
};
use crate::api::profile_query::SearchRequest;
use crate::coverage::{self, Coverage, Covered};
use crate::lake::Lake;
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
    tokens: Option<Vec<String>>,
    pool: Option<String>,
    wallets: Option<Vec<String>>,
    range: TimeRange,
}

impl<'a> Query<'a> {
    /// Every swap of `lake`.
    pub fn new(lake: &'a Lake) -> Self {
        Query {
            lake,
            source: EventSource::Swaps,
            tokens: None,
            pool: None,
            wallets: None,
            range: TimeRange::default(),
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
        self
    }

    /// Only this token's events. An empty address is refused by the answer.
    pub fn token(self, token: impl Into<String>) -> Self {
        self.tokens([token])
    }

    /// Only these tokens' events.
    pub fn tokens<S: Into<String>>(mut self, tokens: impl IntoIterator<Item = S>) -> Self {
        self.tokens = Some(tokens.into_iter().map(Into::into).collect());
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
        use crate::lake::cols::{event, swap, trade};
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

    /// Bars of the selected events: time bars on a grid, or tick, volume or dollar bars (see
    /// [`Bars`]). One frame with the bar columns, and `token_address` first unless exactly one
    /// token is selected.
    pub fn bars(&self, bars: Bars) -> Result<DataFrame> {
        Ok(self.bars_covered(bars)?.value)
    }

    /// [`Query::bars`] with the coverage of the selected events over the selected range. Time
    /// bars leave out the buckets that meet a range the lake never fetched (see
    /// [`crate::analytics::ohlcv`], "Missing data"), unless `bars` names its own
    /// [`BarOptions::unfetched`].
    pub fn bars_covered(&self, mut bars: Bars) -> Result<Covered<DataFrame>> {
        self.no_wallets("bars")?;
        self.no_blank_address()?;
        let coverage = self.coverage()?;
        if bars.options.unfetched.is_empty() {
            bars.options.unfetched = coverage.unfetched();
        }
        let value = self.bars_of(bars)?;
        Ok(Covered { value, coverage })
    }

    /// The coverage of the selected events (source, tokens or pool, range): what the lake's
    /// syncs fetched of them (see [`crate::coverage::of_events`]). Reads only the manifest.
    pub fn coverage(&self) -> Result<Coverage> {
        coverage::of_events(self.lake, self.source, &self.selection(), self.range)
    }

    fn bars_of(&self, bars: Bars) -> Result<DataFrame> {
        let selection = self.selection();
        match bars.kind {
            BarKind::Time => crate::analytics::bars(
                self.lake,
                self.source,
                &selection,
                self.range,
                &bars.options,
            ),
            BarKind::Events(rule) => {
                bars.only_time_options()?;
                crate::analytics::event_bars(self.lake, self.source, &selection, self.range, rule)
            }
        }
    }

    /// Price changes and USD volumes over 5m … 30d of the selected tokens as of `now` (the
    /// source's latest event when `None`); one row per token.
    pub fn price_stats(&self, now: Option<DateTime<Utc>>) -> Result<DataFrame> {
        self.no_wallets("price stats")?;
        self.no_range("price stats", "they are taken as of `now`")?;
        self.no_blank_address()?;
        crate::analytics::price_stats(
            self.lake,
            &self.selection(),
            PriceStatsOptions {
                source: self.source,
                now,
            },
        )
    }

    /// [`Query::price_stats`] with the coverage of the 30 days before `now` of each token.
    pub fn price_stats_covered(&self, now: Option<DateTime<Utc>>) -> Result<Covered<DataFrame>> {
        let value = self.price_stats(now)?;
        let tokens = self.tokens.clone().unwrap_or_default();
        let coverage = coverage::of_window(self.lake, self.source, &tokens, now, 30 * 86_400)?;
        Ok(Covered { value, coverage })
    }

    /// The PnL of the selected wallets (every wallet when none is) per (wallet, token), FIFO
    /// and marked at each token's latest price: the ledgers table of [`Query::pnl_report`].
    pub fn pnl(&self) -> Result<DataFrame> {
        Ok(self.pnl_report(&PnlConfig::default())?.ledgers)
    }

    /// [`Query::pnl`] with the ledgers, positions and (with `config.lots`) lots tables, under
    /// `config`'s cost-basis method, oversell policy and mark. PnL reads the lake's trades
    /// (and swaps for wallets with no trades) over their whole history: a time range, a pool
    /// or a source other than the default is refused.
    pub fn pnl_report(&self, config: &PnlConfig) -> Result<PnlReport> {
        self.pnl_selection("PnL")?;
        let report = pnl::wallet_pnl(self.lake, &self.pnl_query(), config)?;
        self.keep_tokens(report)
    }

    /// [`Query::pnl_report`] with the coverage of each selected wallet's trades: partial when
    /// the lake holds only the trades of the tokens synced by token, not the wallet's own
    /// (see [`crate::coverage::of_wallets`]).
    pub fn pnl_report_covered(&self, config: &PnlConfig) -> Result<Covered<PnlReport>> {
        let value = self.pnl_report(config)?;
        let token = match self.tokens.as_deref() {
            Some([token]) => Some(token.as_str()),
            _ => None,
        };
        let coverage = coverage::of_wallets(self.lake, self.wallets.as_deref(), token)?;
        Ok(Covered { value, coverage })
    }

    /// [`Query::pnl`] under `config` (method, oversell policy, mark, dust).
    pub fn pnl_with(&self, config: &PnlConfig) -> Result<DataFrame> {
        Ok(self.pnl_report(config)?.ledgers)
    }

    /// The `top` wallets of the lake by total PnL (FIFO, latest marks), largest first.
    pub fn leaderboard(&self, top: usize) -> Result<DataFrame> {
        self.leaderboard_with(top, &PnlConfig::default())
    }

    /// [`Query::leaderboard`] under `config`. The leaderboard ranks every wallet: a selection
    /// of tokens or wallets is refused.
    pub fn leaderboard_with(&self, top: usize, config: &PnlConfig) -> Result<DataFrame> {
        self.pnl_selection("the leaderboard")?;
        if self.tokens.is_some() || self.wallets.is_some() {
            return Err(refused(
                "selection",
                "the leaderboard ranks every wallet of the lake: select no token or wallet",
            ));
        }
        pnl::leaderboard(self.lake, config, top)
    }

    /// The equity curve of the one selected wallet, marked at each period's close, and the
    /// metrics of its returns (Sharpe, Sortino, drawdown, win rate, profit factor).
    pub fn performance(
        &self,
        config: &PnlConfig,
        equity: &EquityConfig,
    ) -> Result<WalletPerformance> {
        self.pnl_selection("performance")?;
        let wallet = match self.wallets.as_deref() {
            Some([wallet]) => wallet,
            _ => return Err(refused("wallet", "performance is of exactly one wallet")),
        };
        if self.tokens.is_some() {
            return Err(refused(
                "token",
                "performance covers every token of the wallet",
            ));
        }
        // Refused before the lake is read.
        config.validate()?;
        equity.validate()?;
        pnl::lake_wallet_performance(self.lake, wallet, config, equity)
    }

    /// The window metrics of the one selected token from the lake's trades, one row per
    /// window label (`1h`, `90m`, `7d`, ...), as of `now` (the lake's latest trade when `None`).
    pub fn token_metrics(&self, windows: &[&str], now: Option<DateTime<Utc>>) -> Result<DataFrame> {
        self.no_wallets("token metrics")?;
        self.no_range("token metrics", "their windows end at `now`")?;
        self.no_blank_address()?;
        let token = match self.tokens.as_deref() {
            Some([token]) => token,
            _ => return Err(refused("token", "token metrics are of exactly one token")),
        };
        let windows = windows
            .iter()
            .map(|w| Window::parse(w))
            .collect::<Result<Vec<_>>>()?;
        token_metrics::token_metrics(self.lake, token, &windows, now)
    }

    /// [`Query::token_metrics`] with the coverage of the token's trades over the widest
    /// window before `now`.
    pub fn token_metrics_covered(
        &self,
        windows: &[&str],
        now: Option<DateTime<Utc>>,
    ) -> Result<Covered<DataFrame>> {
        let value = self.token_metrics(windows, now)?;
        let widest = windows
            .iter()
            .map(|w| Window::parse(w).map(|w| w.seconds))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .max()
            .unwrap_or(0);
        let tokens = self.tokens.clone().unwrap_or_default();
        let coverage = coverage::of_window(self.lake, EventSource::Trades, &tokens, now, widest)?;
        Ok(Covered { value, coverage })
    }

    /// [`Query::search_at`] with the coverage of the snapshot it read: partial when the
    /// snapshot's sync was interrupted.
    pub fn search_covered(
        &self,
        request: &SearchRequest,
        snapshot: ProfileSnapshot,
    ) -> Result<Covered<SearchPage>> {
        let coverage = coverage::of_profiles(self.lake, &snapshot)?;
        let value = self.search_at(request, snapshot)?;
        Ok(Covered { value, coverage })
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
        if self.tokens.is_some() || self.pool.is_some() || self.wallets.is_some() {
            return Err(refused(
                "selection",
                "a search selects profiles by its request's filter: select no token, pool or wallet",
            ));
        }
        screener::search(self.lake, request, snapshot)
    }

    fn selection(&self) -> Selection {
        match (&self.pool, &self.tokens) {
            (Some(pool), _) => Selection::Pool(pool.clone()),
            (None, Some(tokens)) if tokens.len() == 1 => Selection::Token(tokens[0].clone()),
            (None, Some(tokens)) => Selection::Tokens(tokens.clone()),
            (None, None) => Selection::AllTokens,
        }
    }

    fn pnl_query(&self) -> PnlQuery {
        PnlQuery {
            wallets: self.wallets.clone(),
            token: match self.tokens.as_deref() {
                Some([token]) => Some(token.clone()),
                _ => None,
            },
        }
    }

    /// With several tokens selected, the PnL of every token is computed and these kept.
    fn keep_tokens(&self, mut report: PnlReport) -> Result<PnlReport> {
        let Some(tokens) = self.tokens.as_deref().filter(|t| t.len() > 1) else {
            return Ok(report);
        };
        let set = Series::new("tokens".into(), tokens);
        let keep = |df: DataFrame| -> Result<DataFrame> {
            df.lazy()
                .filter(col("token_address").is_in(lit(set.clone()).implode(false), false))
                .collect()
                .map_err(Error::polars("selecting the PnL of the tokens asked for"))
        };
        report.ledgers = keep(report.ledgers)?;
        report.positions = keep(report.positions)?;
        report.lots = report.lots.map(keep).transpose()?;
        Ok(report)
    }

    fn pnl_selection(&self, what: &str) -> Result<()> {
        self.no_range(what, "it is computed over each wallet's whole history")?;
        self.no_blank_address()?;
        if self.pool.is_some() {
            return Err(refused(
                "pool",
                format!("{what} is per wallet and token, not per pool"),
            ));
        }
        if self.source != EventSource::Swaps {
            return Err(refused(
                "source",
                format!("{what} reads trades, and swaps for wallets with no trades, by itself"),
            ));
        }
        Ok(())
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

/// Which bars [`Query::bars`] builds: time bars of a width ([`Bars::every`]), or bars that
/// close after a number of events or an amount of volume; time options refine time bars.
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    kind: BarKind,
    options: BarOptions,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum BarKind {
    Time,
    Events(EventRule),
}

impl Bars {
    /// Time bars `seconds` wide: closed and labelled on the left, empty buckets skipped, on
    /// the epoch's grid in UTC.
    pub fn every(seconds: i64) -> Self {
        Bars {
            kind: BarKind::Time,
            options: BarOptions::with_width(seconds),
        }
    }

    /// Time bars of `options`.
    pub fn time(options: BarOptions) -> Self {
        Bars {
            kind: BarKind::Time,
            options,
        }
    }

    /// A bar every `n` events.
    pub fn ticks(n: u64) -> Self {
        Self::events(EventRule::Ticks(n))
    }

    /// A bar each time the token (base) volume reaches `amount`.
    pub fn base_volume(amount: f64) -> Self {
        Self::events(EventRule::BaseVolume(amount))
    }

    /// A bar each time the USD volume reaches `amount` (dollar bars).
    pub fn usd_volume(amount: f64) -> Self {
        Self::events(EventRule::UsdVolume(amount))
    }

    fn events(rule: EventRule) -> Self {
        Bars {
            kind: BarKind::Events(rule),
            options: BarOptions::default(),
        }
    }

    /// Shifts the grid's origin by `seconds` (time bars).
    pub fn offset(mut self, seconds: i64) -> Self {
        self.options.offset_seconds = seconds;
        self
    }

    /// Which edge of a bucket is closed (time bars; default left).
    pub fn closed(mut self, edge: Edge) -> Self {
        self.options.closed = edge;
        self
    }

    /// Which edge of a bucket labels its bar (time bars; default left).
    pub fn label(mut self, edge: Edge) -> Self {
        self.options.label = edge;
        self
    }

    /// What an empty bucket between two bars gives (time bars; default none).
    pub fn fill(mut self, fill: Fill) -> Self {
        self.options.fill = fill;
        self
    }

    /// Calendar days of an IANA time zone (time bars of whole days).
    pub fn time_zone(mut self, zone: impl Into<String>) -> Self {
        self.options.time_zone = Some(zone.into());
        self
    }

    /// No data is known at or after `end`: bars whose bucket reaches it are `incomplete`.
    pub fn data_end(mut self, end: DateTime<Utc>) -> Self {
        self.options.data_end = Some(end);
        self
    }

    /// The rule of [`LiveBars`](crate::analytics::LiveBars) that keeps these bars up to date
    /// as events arrive; time options on tick, volume or dollar bars are refused as
    /// [`Query::bars`] refuses them.
    pub fn live_rule(&self) -> Result<BarRule> {
        match self.kind {
            BarKind::Time => Ok(BarRule::Time(self.options.clone())),
            BarKind::Events(rule) => {
                self.only_time_options()?;
                Ok(BarRule::Events(rule))
            }
        }
    }

    /// Refuses time options on tick, volume or dollar bars, naming the first one given: they
    /// are labelled with their first event's time, so a grid, a side or a time zone would be
    /// silently ignored.
    fn only_time_options(&self) -> Result<()> {
        let (o, d) = (&self.options, BarOptions::default());
        let given = [
            ("time zone", o.time_zone != d.time_zone),
            ("offset", o.offset_seconds != d.offset_seconds),
            ("closed", o.closed != d.closed),
            ("label", o.label != d.label),
            ("fill", o.fill != d.fill),
            ("data end", o.data_end != d.data_end),
        ];
        match given.iter().find(|(_, given)| *given) {
            None => Ok(()),
            Some((argument, _)) => Err(refused(
                argument,
                "applies to time bars only: tick, volume and dollar bars are labelled with \
                 their first event's time",
            )),
        }
    }
}
