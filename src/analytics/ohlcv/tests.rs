//! Bars under extreme time arguments: the refusals, and a property over any width, offset,
//! time zone and event time.

use proptest::prelude::*;

use super::grid::{FIRST_INSTANT, LAST_INSTANT, MONDAY_BEFORE_EPOCH, US};
use super::*;
use crate::analytics::events::{Events, Tick};

fn events(times: &[i64]) -> Vec<TokenEvents> {
    vec![TokenEvents {
        token: "T".into(),
        events: Events::from_ticks(times.iter().enumerate().map(|(i, &t)| Tick {
            time: t,
            slot: i as i64,
            id: i as i64,
            price: 1.0 + i as f64,
            base: 1.0,
            usd: 1.0,
            buy: i % 2 == 0,
        })),
    }]
}

fn labels(df: &DataFrame) -> Vec<i64> {
    df.column("timestamp")
        .unwrap()
        .datetime()
        .unwrap()
        .physical()
        .iter()
        .map(Option::unwrap)
        .collect()
}

fn counts(df: &DataFrame) -> Vec<i64> {
    df.column("count")
        .unwrap()
        .i64()
        .unwrap()
        .iter()
        .map(Option::unwrap)
        .collect()
}

fn invalid_argument(e: &Error) -> Option<&str> {
    match e {
        Error::InvalidArgument { argument, .. } => Some(argument),
        _ => None,
    }
}

/// 2024-05-01 00:00 UTC, µs.
const MAY_2024: i64 = 1_714_521_600 * US;

#[test]
fn widths_that_do_not_fit_are_refused_naming_the_interval() {
    let ev = events(&[MAY_2024, MAY_2024 + 90 * US]);
    for (width, tz, closed) in [
        // The width in microseconds wraps to 0 (a division by zero) or to 1 µs short of 1 s.
        (4_611_686_018_427_387_904, None, Edge::Left),
        (i64::MAX, None, Edge::Left),
        // Calendar buckets far beyond chrono's dates.
        (8_640_000_000_000, Some("UTC"), Edge::Left),
        // A bucket that ends after the last instant a label can have.
        (9_223_372_036_854, None, Edge::Right),
        (MAX_WIDTH_SECONDS + 1, None, Edge::Left),
    ] {
        let options = BarOptions {
            time_zone: tz.map(str::to_owned),
            closed,
            label: closed,
            ..BarOptions::with_width(width)
        };
        let e = bars_of_events(&ev, false, TimeRange::default(), &options).unwrap_err();
        assert_eq!(invalid_argument(&e), Some("interval"), "{width}: {e}");
        // The query API builds the same options.
        assert!(Grid::of(&options).is_err());
    }
}

#[test]
fn a_bucket_beyond_the_last_date_is_refused_not_wrapped() {
    // An event near the last date chrono can write, in the widest bar: its bucket would end
    // after that date.
    let late = LAST_INSTANT - 10 * 86_400 * US;
    let options = BarOptions::with_width(MAX_WIDTH_SECONDS);
    let e = bars_of_events(&events(&[late]), false, TimeRange::default(), &options).unwrap_err();
    assert_eq!(invalid_argument(&e), Some("interval"), "{e}");
    assert!(e.to_string().contains("narrower width"), "{e}");
    // An event before the first date has no bucket at all.
    let e = bars_of_events(
        &events(&[i64::MIN]),
        false,
        TimeRange::default(),
        &BarOptions::with_width(60),
    )
    .unwrap_err();
    assert_eq!(invalid_argument(&e), Some("interval"), "{e}");
    // Event bars are labelled with event times, which must be writable too.
    let e = event_bars_of_events(&events(&[i64::MAX]), false, EventRule::Ticks(1)).unwrap_err();
    assert_eq!(invalid_argument(&e), Some("events"), "{e}");
}

#[test]
fn huge_offsets_are_their_remainder() {
    let ev = events(&[
        MAY_2024 + 10 * US,
        MAY_2024 + 4_000 * US,
        MAY_2024 + 9_000 * US,
    ]);
    let at = |width: i64, offset: i64, tz: Option<&str>| {
        let options = BarOptions {
            offset_seconds: offset,
            time_zone: tz.map(str::to_owned),
            fill: Fill::Null,
            ..BarOptions::with_width(width)
        };
        bars_of_events(&ev, false, TimeRange::default(), &options).unwrap()
    };
    for (width, tz) in [(3_600, None), (86_400, Some("Europe/Paris")), (60, None)] {
        for offset in [10_000_000_000_000, i64::MIN, i64::MAX] {
            let (a, b) = (
                at(width, offset, tz),
                at(width, offset.rem_euclid(width), tz),
            );
            assert!(a.equals_missing(&b), "{width} {offset} {tz:?}");
        }
    }
    // 10^13 s is 2,800 s past a whole hour: buckets start at :46:40.
    assert_eq!(
        labels(&at(3_600, 10_000_000_000_000, None))[0],
        MAY_2024 - 800 * US
    );
}

#[test]
fn thresholds_that_are_not_finite_are_refused_as_such() {
    let ev = events(&[MAY_2024]);
    for (rule, argument, reason) in [
        (
            EventRule::BaseVolume(f64::INFINITY),
            "base volume",
            "finite",
        ),
        (EventRule::UsdVolume(f64::NAN), "usd volume", "finite"),
        (
            EventRule::UsdVolume(f64::NEG_INFINITY),
            "usd volume",
            "finite",
        ),
        (EventRule::BaseVolume(-1.0), "base volume", "positive"),
        (EventRule::UsdVolume(0.0), "usd volume", "positive"),
        (EventRule::Ticks(0), "ticks", "positive"),
    ] {
        let e = event_bars_of_events(&ev, false, rule).unwrap_err();
        assert_eq!(invalid_argument(&e), Some(argument), "{e}");
        assert!(e.to_string().contains(reason), "{rule:?}: {e}");
    }
}

/// Instants of every kind: today's, around the epoch, and at or beyond chrono's ends.
fn instant() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => (0i64..4_000_000_000).prop_map(|s| s * US),
        2 => -1_000_000_000i64..1_000_000_000,
        1 => any::<i64>(),
        1 => (0i64..1_000_000_000_000).prop_map(|d| FIRST_INSTANT + d),
        1 => (0i64..1_000_000_000_000).prop_map(|d| LAST_INSTANT - d),
        1 => prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(FIRST_INSTANT), Just(LAST_INSTANT)],
    ]
}

fn width() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => 1i64..100_000,
        2 => (1i64..1_000).prop_map(|d| d * 86_400),
        1 => any::<i64>(),
        1 => (0i64..1_000).prop_map(|d| MAX_WIDTH_SECONDS - d * 86_400),
        1 => prop_oneof![
            Just(MAX_WIDTH_SECONDS + 1),
            Just(4_611_686_018_427_387_904),
            Just(9_223_372_036_854),
            Just(8_640_000_000_000),
            Just(i64::MAX),
            Just(0),
        ],
    ]
}

fn offset() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => -200_000i64..200_000,
        1 => any::<i64>(),
        1 => prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(10_000_000_000_000)],
    ]
}

fn zone() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        3 => Just(None),
        1 => Just(Some("UTC")),
        1 => Just(Some("Europe/Paris")),
        1 => Just(Some("America/Santiago")),
        1 => Just(Some("Pacific/Apia")),
        1 => Just(Some("Australia/Lord_Howe")),
    ]
}

fn edge() -> impl Strategy<Value = Edge> {
    prop_oneof![Just(Edge::Left), Just(Edge::Right)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the width, offset, zone and event times, bars are an error naming the
    /// argument, or bars whose labels are writable instants, increasing, each holding exactly
    /// the events between its neighbours' labels; on a fixed grid every label is on the grid
    /// the offset defines. Reasonable arguments over today's events always give bars.
    #[test]
    fn extreme_time_arguments_give_an_error_or_consistent_bars(
        width in width(),
        offset in offset(),
        tz in zone(),
        closed in edge(),
        label in edge(),
        fill in prop_oneof![Just(Fill::Skip), Just(Fill::Null), Just(Fill::ForwardFill)],
        mut times in proptest::collection::vec(instant(), 0..12),
    ) {
        times.sort_unstable();
        // Filled bars between far-apart events would be too many to hold; skip them then.
        let span = times.last().zip(times.first()).map_or(0, |(b, a)| *b as i128 - *a as i128);
        let fill = if span / (width.max(1) as i128 * US as i128) > 5_000 { Fill::Skip } else { fill };
        let options = BarOptions {
            offset_seconds: offset,
            closed,
            label,
            fill,
            time_zone: tz.map(str::to_owned),
            ..BarOptions::with_width(width)
        };
        let reasonable = (1..=MAX_WIDTH_SECONDS).contains(&width)
            && (tz.is_none() || width % 86_400 == 0)
            && times.iter().all(|t| (0..4_000_000_000 * US).contains(t));
        let df = match bars_of_events(&events(&times), false, TimeRange::default(), &options) {
            Err(e) => {
                prop_assert!(!reasonable, "{e}");
                let argument = invalid_argument(&e);
                prop_assert!(matches!(argument, Some("interval" | "time zone")), "{e}");
                return Ok(());
            }
            Ok(df) => df,
        };
        let (labels, counts) = (labels(&df), counts(&df));
        prop_assert_eq!(counts.iter().sum::<i64>(), times.len() as i64);
        prop_assert!(labels.iter().all(|l| (FIRST_INSTANT..=LAST_INSTANT).contains(l)));
        prop_assert!(labels.windows(2).all(|w| w[0] < w[1]), "{labels:?}");
        // The events between the labels around a bar are its events.
        let n = labels.len();
        for (i, &count) in counts.iter().enumerate() {
            let (lo, hi) = match label {
                Edge::Left => (Some(labels[i]), (i + 1 < n).then(|| labels[i + 1])),
                Edge::Right => ((i > 0).then(|| labels[i - 1]), Some(labels[i])),
            };
            let inside = |t: i64| match closed {
                Edge::Left => lo.is_none_or(|lo| t >= lo) && hi.is_none_or(|hi| t < hi),
                Edge::Right => lo.is_none_or(|lo| t > lo) && hi.is_none_or(|hi| t <= hi),
            };
            let held = times.iter().filter(|&&t| inside(t)).count() as i64;
            prop_assert_eq!(held, count, "bar {} of {:?}", i, labels);
        }
        if tz.is_none() {
            let anchor = if width % (7 * 86_400) == 0 { MONDAY_BEFORE_EPOCH } else { 0 };
            let origin = (anchor as i128 + offset as i128) * US as i128;
            let step = width as i128 * US as i128;
            for &l in &labels {
                prop_assert_eq!((l as i128 - origin).rem_euclid(step), 0, "label {}", l);
            }
        }
    }

    /// Tick bars of any event times: an error naming the events, or labels that are event
    /// times a bar can have.
    #[test]
    fn tick_bars_of_any_times_are_an_error_or_writable(
        times in proptest::collection::vec(instant(), 0..12),
        n in 1u64..4,
    ) {
        match event_bars_of_events(&events(&times), false, EventRule::Ticks(n)) {
            Err(e) => prop_assert_eq!(invalid_argument(&e), Some("events")),
            Ok(df) => {
                let labels = labels(&df);
                prop_assert!(labels.iter().all(|l| (FIRST_INSTANT..=LAST_INSTANT).contains(l)));
                prop_assert_eq!(counts(&df).iter().sum::<i64>(), times.len() as i64);
            }
        }
    }
}
