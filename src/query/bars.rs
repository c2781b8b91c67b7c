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

    /// The width of the time bars a door gives when it is asked for none of interval, ticks,
    /// base volume and USD volume (the Python package's default): one minute.
    pub const DEFAULT_INTERVAL: i64 = 60;

    /// [`Bars::of`] for a door whose interval has a default: no rule at all is time bars
    /// [`Bars::DEFAULT_INTERVAL`] seconds wide; anything else is [`Bars::of`]'s answer (an
    /// interval beside ticks, base volume or USD volume is refused as there).
    pub fn of_defaulting(
        interval: Option<i64>,
        ticks: Option<u64>,
        base_volume: Option<f64>,
        usd_volume: Option<f64>,
    ) -> Result<Bars> {
        match (interval, ticks, base_volume, usd_volume) {
            (None, None, None, None) => Ok(Bars::every(Self::DEFAULT_INTERVAL)),
            _ => Bars::of(interval, ticks, base_volume, usd_volume),
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

    /// These bars split by time into parts of `seconds` (a group of a distributed
    /// computation each), when the rule allows it: each part's events give the whole's bars
    /// of that part. Refused naming `split_seconds`, with the reason: tick, volume and dollar
    /// bars (a bar's events depend on every event before it), a fill (a filled bucket depends
    /// on the bar before it, in another part), buckets closed on the right and a time zone's
    /// days (their buckets do not start on the epoch grid's instants), and `seconds` that is
    /// not a positive multiple of the interval.
    pub fn split(&self, seconds: i64) -> Result<BarSplit> {
        let o = &self.options;
        let reason = if !self.is_time() {
            Some("tick, volume and dollar bars depend on every event before them")
        } else if o.fill != Fill::Skip {
            Some("a filled bucket depends on the bar before it")
        } else if o.closed != Edge::Left {
            Some("buckets closed on the right do not start on the grid's instants")
        } else if o.time_zone.is_some() {
            Some("calendar days of a time zone do not start on the epoch grid")
        } else if seconds <= 0 || o.width_seconds <= 0 || seconds % o.width_seconds != 0 {
            Some("give a positive multiple of interval")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(refused("split_seconds", reason)),
            None => Ok(BarSplit {
                options: o.clone(),
                seconds,
            }),
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

/// Time bars split by time into parts ([`Bars::split`]): which part each event belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct BarSplit {
    options: BarOptions,
    seconds: i64,
}

impl BarSplit {
    /// The width of a part, seconds (a multiple of the bars' interval).
    pub fn seconds(&self) -> i64 {
        self.seconds
    }

    /// The start (µs) of the part holding each instant (µs) of `times`: runs of whole
    /// buckets of the bars' own grid, from one of its instants (offset and week anchor
    /// included), so no bar straddles two parts.
    pub fn part_starts(&self, times: &[i64]) -> Result<Vec<i64>> {
        crate::analytics::ohlcv::part_starts(&self.options, self.seconds, times)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(result: Result<BarSplit>) -> String {
        match result {
            Err(crate::Error::InvalidArgument { argument, reason }) => {
                format!("{argument}: {reason}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn no_rule_is_one_minute_bars_and_an_interval_beside_ticks_is_refused() {
        assert_eq!(
            Bars::of_defaulting(None, None, None, None).unwrap(),
            Bars::every(60)
        );
        assert_eq!(
            Bars::of_defaulting(Some(300), None, None, None).unwrap(),
            Bars::every(300)
        );
        assert_eq!(
            Bars::of_defaulting(None, Some(5), None, None).unwrap(),
            Bars::ticks(5)
        );
        for interval in [60, 300] {
            let err = Bars::of_defaulting(Some(interval), Some(5), None, None).unwrap_err();
            assert_eq!(
                err.to_string(),
                Bars::of(Some(interval), Some(5), None, None)
                    .unwrap_err()
                    .to_string()
            );
            assert!(err.to_string().contains("interval"), "{err}");
        }
        // Bars::of keeps refusing no rule at all.
        assert!(Bars::of(None, None, None, None).is_err());
    }

    #[test]
    fn a_split_is_refused_where_a_part_cannot_know_its_bars() {
        let cases = [
            (
                Bars::ticks(5),
                600,
                "tick, volume and dollar bars depend on every event before them",
            ),
            (
                Bars::usd_volume(1.0),
                600,
                "tick, volume and dollar bars depend on every event before them",
            ),
            (
                Bars::every(60).fill(Fill::Null),
                600,
                "a filled bucket depends on the bar before it",
            ),
            (
                Bars::every(60).closed(Edge::Right),
                600,
                "buckets closed on the right do not start on the grid's instants",
            ),
            (
                Bars::every(86_400).time_zone("Europe/Paris"),
                86_400 * 7,
                "calendar days of a time zone do not start on the epoch grid",
            ),
            (Bars::every(60), 90, "give a positive multiple of interval"),
            (Bars::every(60), 0, "give a positive multiple of interval"),
            (
                Bars::every(60),
                -600,
                "give a positive multiple of interval",
            ),
        ];
        for (bars, seconds, reason) in cases {
            assert_eq!(
                refusal(bars.split(seconds)),
                format!("split_seconds: {reason}"),
                "{bars:?} split every {seconds} s"
            );
        }
        // A label on the right and an offset keep the buckets' starts on the grid.
        let split = Bars::every(60)
            .label(Edge::Right)
            .offset(7)
            .split(600)
            .unwrap();
        assert_eq!(split.seconds(), 600);
    }

    #[test]
    fn parts_are_runs_of_whole_buckets_of_the_bars_own_grid() {
        const US: i64 = 1_000_000;
        // Offset 7 s: buckets start at 7 s past each minute, parts at 7 s past each 10 min.
        let split = Bars::every(60).offset(7).split(600).unwrap();
        let times = [0, 7 * US - 1, 7 * US, 607 * US - 1, 607 * US, -1];
        assert_eq!(
            split.part_starts(&times).unwrap(),
            vec![-593 * US, -593 * US, 7 * US, 7 * US, 607 * US, -593 * US]
        );
        // Week bars start on Mondays (1969-12-29, 3 days before the epoch), and so do parts
        // of weeks: no week bar straddles two parts.
        let week = 7 * 86_400 * US;
        let split = Bars::every(7 * 86_400).split(14 * 86_400).unwrap();
        let monday = -3 * 86_400 * US;
        for t in [monday - 1, monday, 0, monday + 2 * week, 40 * week + 5] {
            let part = split.part_starts(&[t]).unwrap()[0];
            assert_eq!(
                (part - monday).rem_euclid(week),
                0,
                "part of {t} on a Monday"
            );
            assert!(part <= t && t < part + 2 * week, "part of {t}");
        }
        // Parts of bars two days wide start where a bar starts, whatever their width.
        let days = 2 * 86_400;
        let split = Bars::every(days).split(14 * days).unwrap();
        for t in [0, 5 * days * US + 3, -7 * days * US - 1] {
            let part = split.part_starts(&[t]).unwrap()[0];
            let bar = Bars::every(days)
                .split(days)
                .unwrap()
                .part_starts(&[t])
                .unwrap()[0];
            assert_eq!(part.rem_euclid(days * US), 0, "part of {t}");
            assert!(part <= bar && bar < part + 14 * days * US, "part of {t}");
        }
    }
}
