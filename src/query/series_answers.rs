//! The questions of a [`Query`] asked of a stored series instead of events (`docs/series.md`):
//! bars resampled from the candles or a price history, and price stats of a price history,
//! each with the coverage of what the series' syncs fetched.

use chrono::{DateTime, Utc};
use polars::prelude::*;

use super::answer::{self, Answer};
use super::bars::{self, Bars};
use super::{Query, refused};
use crate::TimeRange;
use crate::analytics::{Selection, SeriesSelection, SeriesSource, ohlcv};
use crate::coverage;
use crate::lake::cols::token;
use crate::{Error, Result};

/// How answers name a series: `candles`, `price_history of chain 1`.
fn series_name(series: SeriesSource) -> String {
    match series {
        SeriesSource::Candles => series.dataset().to_string(),
        SeriesSource::PriceHistory { chain_id } => {
            format!("{} of chain {chain_id}", series.dataset())
        }
    }
}

impl Query<'_> {
    /// [`Query::bars_covered`] from the stored series `series`: time bars only, with the
    /// coverage of the interval they are resampled from, whose unfetched ranges they leave out
    /// as the bars of events do.
    pub(super) fn series_bars(
        &self,
        series: SeriesSource,
        mut bars: Bars,
        version: u64,
    ) -> Result<Answer<DataFrame>> {
        if let bars::BarKind::Events(_) = bars.kind {
            return Err(refused(
                "bars",
                format!(
                    "tick, volume and dollar bars need events: the {} give time bars only \
                     (give a width)",
                    series.dataset()
                ),
            ));
        }
        self.range.validate()?;
        let selection = self.selection();
        let mut series_selection = SeriesSelection {
            tokens: self.tokens.clone(),
            pool: self.pool.clone(),
            range: self.range,
            series_interval: self.series_interval,
        };
        // The interval is chosen once, here: its syncs are the bars' coverage.
        if series_selection.series_interval.is_none() {
            let stored = ohlcv::stored_intervals(self.lake, series, &series_selection)?;
            series_selection.series_interval =
                ohlcv::choose_interval(bars.options.width_seconds, None, &stored)?;
        }
        let coverage = coverage::of_series(
            self.lake,
            series,
            &selection,
            series_selection.series_interval,
            self.range,
        )?;
        if bars.options.unfetched.is_empty() {
            bars.options.unfetched = coverage.unfetched();
        }
        let mut value =
            crate::analytics::series_bars(self.lake, series, &series_selection, &bars.options)?;
        let what = series_name(series);
        let mut warnings = answer::found(
            self.lake,
            value.height(),
            || answer::present_tokens(&value),
            &selection,
            &what,
            self.range,
        )?;
        if let Selection::Token(_) = selection {
            // One token's bars carry no token column, as the bars of its events.
            value = value
                .drop(token::TOKEN)
                .map_err(Error::polars("building bars"))?;
        }
        warnings.extend(answer::coverage_warnings(&coverage, self.strict)?);
        Ok(Answer {
            value,
            coverage,
            warnings,
            version,
        })
    }

    /// [`Query::price_stats_covered`] from the stored series `series` (a price history; see
    /// `docs/series.md`, "Price stats from a series"), with the series' coverage.
    pub(super) fn series_price_stats(
        &self,
        series: SeriesSource,
        now: Option<DateTime<Utc>>,
        version: u64,
    ) -> Result<Answer<DataFrame>> {
        self.no_wallets("price stats")?;
        self.no_range("price stats", "they are taken as of `now`")?;
        self.no_blank_address()?;
        let coverage = self.coverage()?;
        let series_selection = SeriesSelection {
            tokens: self.tokens.clone(),
            pool: self.pool.clone(),
            range: TimeRange::default(),
            series_interval: self.series_interval,
        };
        let value =
            crate::analytics::series_price_stats(self.lake, series, &series_selection, now)?;
        let when = match now {
            Some(now) => format!(" ending by {}", answer::rfc3339(now)),
            None => String::new(),
        };
        self.stats_answer(
            value,
            coverage,
            &format!("{}{when}", series_name(series)),
            version,
        )
    }
}
