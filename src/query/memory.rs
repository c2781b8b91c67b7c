//! The questions of the query over events held in memory: [`InMemory`], frames of the lake's
//! swaps and trades schemas (a group of a distributed computation, handed over as Arrow), and
//! [`Query::bars_plan`], what such bars take from the lake besides its events.
//!
//! The answers run the lake's code past its reader: the events of a frame are read by the
//! analytics' in-memory reader ([`EventInput::Frame`]) under the same token-side rules, bars
//! go through [`Bars`]' one dispatch to the same kernels, the PnL through
//! [`PnlSource::Frames`] and the same ledgers, token metrics through the same windows. So a
//! frame holding a lake's rows answers what the lake answers, to the bit (tests in
//! `tests/it/query_memory.rs`). What a whole lake decides and a group cannot know (the end of
//! the data, the ranges never fetched, the latest price of a token over every wallet, the
//! metrics' `now`) is given by the caller, taken from the lake's query or from every group.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use polars::prelude::*;

use super::answer::{self, Answer};
use super::{BarSplit, Bars, Query, refused};
use crate::analytics::pnl::{self, PnlConfig, PnlOptions, PnlSource, PnlTable};
use crate::analytics::token_metrics::{self, Window};
use crate::analytics::{EventInput, EventSource, Selection, TimeRange, columns, events};
use crate::lake::cols::{event, token, trade};
use crate::{Error, Result};

/// Events held in memory: a frame of the lake's swaps and one of its trades (the lake's
/// columns; `block_time` a timestamp of any unit, or integer microseconds). Each question
/// reads the frames it needs: bars the source's, the PnL the trades and (for wallets without
/// trades) the swaps, token metrics the trades.
#[derive(Debug, Clone)]
pub struct InMemory<'a> {
    swaps: Option<&'a DataFrame>,
    trades: Option<&'a DataFrame>,
    selection: Selection,
    range: TimeRange,
}

impl Default for InMemory<'_> {
    fn default() -> Self {
        InMemory {
            swaps: None,
            trades: None,
            selection: Selection::AllTokens,
            range: TimeRange::default(),
        }
    }
}

impl<'a> InMemory<'a> {
    /// No events yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// These swaps (the `swaps` dataset's columns).
    pub fn swaps(mut self, frame: &'a DataFrame) -> Self {
        self.swaps = Some(frame);
        self
    }

    /// These trades (the `trades` dataset's columns).
    pub fn trades(mut self, frame: &'a DataFrame) -> Self {
        self.trades = Some(frame);
        self
    }

    /// Bars and the latest event read only these tokens' events (by default every token's;
    /// the token side of a swap is then that of the tokens selected, as the lake's query of
    /// these tokens reads it).
    pub fn tokens(mut self, tokens: Vec<String>) -> Self {
        self.selection = Selection::Tokens(tokens);
        self
    }

    /// Bars and the latest event read only the swaps of this pool.
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.selection = Selection::Pool(pool.into());
        self
    }

    /// Bars and the latest event read only the events in `range` (`[from, to)`); the end of
    /// the data of time bars is then at most `to`, as in the lake's query.
    pub fn range(mut self, range: TimeRange) -> Self {
        self.range = range;
        self
    }

    /// Which rows of the `source` frame can hold the selected events (see
    /// [`selected_rows`](crate::analytics::events::selected_rows)): a filter of the rows
    /// before they are moved to their groups. A selection the query refuses is refused here.
    pub fn selected_rows(&self, source: EventSource) -> Result<Vec<bool>> {
        events::selected_rows(self.frame(source)?, source, &self.selection, self.range)
    }

    /// The start (µs) of the part of `split` holding each row of the `source` frame, by its
    /// `block_time` as bars read it: the group key that splits a token's time bars by time.
    pub fn bar_parts(&self, source: EventSource, split: &BarSplit) -> Result<Vec<i64>> {
        let frame = self.frame(source)?;
        split.part_starts(&columns::micros_col(frame, event::BLOCK_TIME)?)
    }

    /// The frame of `source`; not given, an error naming it.
    fn frame(&self, source: EventSource) -> Result<&'a DataFrame> {
        let (frame, name) = match source {
            EventSource::Swaps => (self.swaps, "swaps"),
            EventSource::Trades => (self.trades, "trades"),
        };
        frame.ok_or_else(|| refused(name, format!("no {name} were given")))
    }

    /// Bars of every selected token of the `source` events (every token unless
    /// [`InMemory::tokens`] or [`InMemory::pool`] says otherwise, in [`InMemory::range`]),
    /// `token_address` first, in token then time order: [`Query::bars`] of a lake holding
    /// these rows with the same selection, when `bars` carries what the lake's query decides
    /// from the whole lake: the end of the data ([`Bars::data_end`], by default the instant
    /// after the latest selected event, at most the range's end) and the ranges never fetched
    /// ([`Query::bars_plan`]). With `tokens`, only their bars are kept (their events are
    /// still read as the selection reads them: the token side of a swap is that of its type
    /// unless tokens are selected, not of the tokens kept). No event gives no rows, not an
    /// error.
    pub fn bars(
        &self,
        source: EventSource,
        bars: &Bars,
        tokens: Option<&[String]>,
    ) -> Result<DataFrame> {
        let input = EventInput::Frame(self.frame(source)?);
        let all = bars.of_events(input, source, &self.selection, self.range)?;
        let Some(tokens) = tokens else {
            return Ok(all);
        };
        let keep = lit(Series::new("tokens".into(), tokens)).implode(false);
        all.lazy()
            .filter(col(token::TOKEN).is_in(keep, false))
            .collect()
            .map_err(Error::polars("keeping the tokens' bars"))
    }

    /// The latest time (microseconds) of the selected `source` events (token sides, as bars
    /// read them), if any: the end of the data of bars computed in groups is the instant
    /// after the latest of every group's (at most the range's end).
    pub fn latest_event(&self, source: EventSource) -> Result<Option<i64>> {
        let frame = self.frame(source)?;
        let tokens = events::events_of_frame(frame, source, &self.selection, self.range)?;
        Ok(tokens
            .iter()
            .filter_map(|t| t.events.time.last().copied())
            .max())
    }

    /// One PnL table (ledgers, positions or lots) of every wallet of the trades, and of the
    /// swaps of wallets without trades, under `config`: [`Query::pnl_table`] of a lake holding
    /// these rows with every wallet selected. Frames holding some wallets' events only (each
    /// wallet's events whole) give those wallets' rows of the lake's table when `latest` gives
    /// every token's latest price over the whole lake (from [`InMemory::latest_prices`] of
    /// every group; read under [`Mark::Latest`](pnl::Mark::Latest) only). No trade is an
    /// empty table, not an error.
    pub fn pnl_table(
        &self,
        config: &PnlConfig,
        table: PnlTable,
        latest: Option<&BTreeMap<String, f64>>,
    ) -> Result<DataFrame> {
        config.validate()?;
        let config = table.config(config);
        let source = PnlSource::Frames {
            trades: self.frame(EventSource::Trades)?,
            swaps: self.swaps,
        };
        let options = PnlOptions {
            config,
            positions: table == PnlTable::Positions,
            ..PnlOptions::default()
        };
        let report = match latest {
            Some(latest) => pnl::pnl_report_marked(source, &options, latest)?,
            None => pnl::pnl_report(source, &options)?,
        };
        Ok(table.of(report))
    }

    /// The latest price of each token of the PnL's events (trades, and swaps of wallets
    /// without trades) with the event that set it: columns `token_address`, `block_time`,
    /// `block_slot`, `id` (the event-order key, integers) and `price`. Over groups of whole
    /// wallets, a token's latest price is the one of its greatest key.
    pub fn latest_prices(&self) -> Result<DataFrame> {
        let rows = pnl::latest_prices(self.frame(EventSource::Trades)?, self.swaps)?;
        let n = rows.len();
        let column = |name: &str, f: &dyn Fn(&pnl::LatestPrice) -> i64| {
            Column::new(name.into(), rows.iter().map(f).collect::<Vec<i64>>())
        };
        DataFrame::new(
            n,
            vec![
                Column::new(
                    trade::TOKEN.into(),
                    rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
                ),
                column(event::BLOCK_TIME, &|r| r.1.0),
                column(event::BLOCK_SLOT, &|r| r.1.1),
                column(event::ID, &|r| r.1.2),
                Column::new(
                    "price".into(),
                    rows.iter().map(|r| r.2).collect::<Vec<f64>>(),
                ),
            ],
        )
        .map_err(Error::polars("building the latest prices"))
    }

    /// The window metrics of `token` from the trades (its rows; other tokens' are left out),
    /// as [`Query::token_metrics`] gives them of a lake holding these trades: `now` defaults
    /// to the frame's latest trade of any token (the lake's is its latest trade of any token:
    /// give it when the frame holds some tokens only).
    pub fn token_metrics(
        &self,
        token: &str,
        windows: &[&str],
        now: Option<DateTime<Utc>>,
    ) -> Result<DataFrame> {
        let windows = windows_of(windows)?;
        token_metrics::token_metrics_of_frame(
            self.frame(EventSource::Trades)?,
            token,
            &windows,
            now,
        )
    }
}

/// The windows of token metrics by their labels; the service's six when none is given.
pub(super) fn windows_of(windows: &[&str]) -> Result<Vec<Window>> {
    if windows.is_empty() {
        return Ok(Window::service_windows());
    }
    windows.iter().map(|w| Window::parse(w)).collect()
}

impl Query<'_> {
    /// What bars of the selected events computed elsewhere ([`InMemory::bars`], a group of a
    /// distributed computation) take from the lake besides its events: `bars` with the ranges
    /// the lake never fetched of the selection (unless `bars` names its own), as
    /// [`Query::bars_covered`] decides them, with the coverage, its warnings (strict coverage
    /// refuses here) and the lake version. Selections bars refuse are refused here too.
    pub fn bars_plan(&self, mut bars: Bars) -> Result<Answer<Bars>> {
        let version = self.version()?;
        self.no_wallets("bars")?;
        self.no_blank_address()?;
        self.events_only("bars")?;
        let coverage = self.coverage()?;
        if bars.options.unfetched.is_empty() {
            bars.options.unfetched = coverage.unfetched();
        }
        let warnings = answer::coverage_warnings(&coverage, self.strict)?;
        Ok(Answer {
            value: bars,
            coverage,
            warnings,
            version,
        })
    }
}
