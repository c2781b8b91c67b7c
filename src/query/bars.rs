//! [`Bars`]: which bars [`Query::bars`](super::Query::bars) builds.

use chrono::{DateTime, Utc};

use polars::prelude::DataFrame;

use super::refused;
use crate::Result;
use crate::analytics::ohlcv::Unfetched;
use crate::analytics::{
    BarOptions, BarRule, Edge, EventInput, EventRule, EventSource, Fill, Selection, TimeRange,
};

/// Which bars [`Query::bars`](super::Query::bars) builds: time bars of a width ([`Bars::every`]), or bars that
/// close after a number of events or an amount of volume; time options refine time bars.
#[derive(Debug, Clone, PartialEq)]
pub struct Bars {
    pub(super) kind: BarKind,
    pub(super) options: BarOptions,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum BarKind {
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

    /// The bars of a door's arguments: time bars `interval` seconds wide, or a bar every
    /// `ticks` events, or each time `base_volume` or `usd_volume` traded. Exactly one must be
    /// given: two are refused naming the second, none is refused naming `interval`.
    pub fn of(
        interval: Option<i64>,
        ticks: Option<u64>,
        base_volume: Option<f64>,
        usd_volume: Option<f64>,
    ) -> Result<Bars> {
        let rule = match (ticks, base_volume, usd_volume) {
            (Some(n), None, None) => Some(("ticks", Bars::ticks(n))),
            (None, Some(v), None) => Some(("base_volume", Bars::base_volume(v))),
            (None, None, Some(v)) => Some(("usd_volume", Bars::usd_volume(v))),
            (None, None, None) => None,
            (Some(_), Some(_), _) => {
                return Err(refused("base_volume", "not with ticks: give one bar rule"));
            }
            (_, _, Some(_)) => {
                return Err(refused(
                    "usd_volume",
                    "not with ticks or base_volume: give one bar rule",
                ));
            }
        };
        match (interval, rule) {
            (Some(width), None) => Ok(Bars::every(width)),
            (None, Some((_, bars))) => Ok(bars),
            (Some(_), Some((name, _))) => Err(refused(
                "interval",
                format!("not with {name} (tick, volume and dollar bars have no grid)"),
            )),
            (None, None) => Err(refused(
                "interval",
                "give interval, ticks, base_volume or usd_volume",
            )),
        }
    }

    /// Whether these are time bars (on a grid), not tick, volume or dollar bars.
    pub fn is_time(&self) -> bool {
        matches!(self.kind, BarKind::Time)
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

    /// The ranges never fetched of each token: a bucket that meets one gives no bar (time
    /// bars; [`BarOptions::unfetched`]). A query of the lake takes them from its coverage;
    /// bars of events held in memory ([`InMemory`](super::InMemory)) take those the lake's
    /// query gave ([`Query::bars_plan`](super::Query::bars_plan)).
    pub fn unfetched(mut self, unfetched: Unfetched) -> Self {
        self.options.unfetched = unfetched;
        self
    }

    /// The options of time bars (for tick, volume and dollar bars, the defaults).
    pub fn options(&self) -> &BarOptions {
        &self.options
    }

    /// These bars of the selected events of `input` in `range`: the one dispatch of the
    /// lake's query and of events held in memory.
    pub(super) fn of_events(
        &self,
        input: EventInput<'_>,
        source: EventSource,
        selection: &Selection,
        range: TimeRange,
    ) -> Result<DataFrame> {
        match self.kind {
            BarKind::Time => {
                crate::analytics::bars_from(input, source, selection, range, &self.options)
            }
            BarKind::Events(rule) => {
                self.only_time_options()?;
                crate::analytics::event_bars_from(input, source, selection, range, rule)
            }
        }
    }

    /// The rule of [`LiveBars`](crate::analytics::LiveBars) that keeps these bars up to date
    /// as events arrive; time options on tick, volume or dollar bars are refused as
    /// [`Query::bars`](super::Query::bars) refuses them.
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
    pub(super) fn only_time_options(&self) -> Result<()> {
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
