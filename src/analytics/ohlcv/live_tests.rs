//! The live bars against the batch bars: for any events, split into batches of any size and
//! order, with rising watermarks, the bars closed up to the last watermark and the open bars
//! are the batch bars of the events before it, for every bar kind, width, side, fill and zone.

use polars::prelude::*;
use proptest::prelude::*;

use super::grid::US;
use super::*;
use crate::analytics::events::{Events, Tick};

/// 2025-03-30 00:00 UTC (a clock change in Europe the next night), µs.
const START: i64 = 1_743_292_800 * US;

fn rule_strategy() -> impl Strategy<Value = BarRule> {
    let time = (
        prop::sample::select(vec![1i64, 7, 60, 300, 3_600, 86_400]),
        -100_000i64..100_000,
        any::<bool>(),
        any::<bool>(),
        0u8..3,
        prop::option::of(prop::sample::select(vec![
            "Europe/Paris",
            "America/New_York",
        ])),
    )
        .prop_map(|(width, offset, right_closed, right_label, fill, tz)| {
            let edge = |right| if right { Edge::Right } else { Edge::Left };
            BarRule::Time(BarOptions {
                width_seconds: width,
                offset_seconds: offset,
                closed: edge(right_closed),
                label: edge(right_label),
                fill: [Fill::Skip, Fill::Null, Fill::ForwardFill][fill as usize],
                // Calendar days only for whole days.
                time_zone: if width == 86_400 {
                    tz.map(str::to_owned)
                } else {
                    None
                },
                ..BarOptions::default()
            })
        });
    prop_oneof![
        3 => time,
        1 => (1u64..12).prop_map(|n| BarRule::Events(EventRule::Ticks(n))),
        1 => (1.0f64..40.0).prop_map(|v| BarRule::Events(EventRule::BaseVolume(v))),
        1 => (1.0f64..400.0).prop_map(|v| BarRule::Events(EventRule::UsdVolume(v))),
    ]
}

/// Events of up to three tokens over about two days, some sharing a time.
fn events_strategy() -> impl Strategy<Value = Vec<(String, Tick)>> {
    prop::collection::vec(
        (
            0usize..3,
            0i64..172_800,
            0i64..3,
            0.5f64..2.0,
            0.0f64..10.0,
            any::<bool>(),
        ),
        0..120,
    )
    .prop_map(|rows| {
        rows.into_iter()
            .enumerate()
            .map(|(i, (token, secs, sub, price, base, buy))| {
                let time = START + secs * US + sub * 250_000;
                let tick = Tick {
                    time,
                    slot: time / 400_000,
                    id: i as i64,
                    price,
                    base,
                    usd: price * base * 10.0,
                    buy,
                };
                (format!("T{token}"), tick)
            })
            .collect()
    })
}

/// The batch bars of `events` before `end` (`data_end = end`), as `(closed, open)` frames.
fn batch(rule: &BarRule, events: &[(String, Tick)], end: i64) -> (DataFrame, DataFrame) {
    let mut by_token: std::collections::BTreeMap<&str, Vec<Tick>> = Default::default();
    for (t, e) in events.iter().filter(|(_, e)| e.time < end) {
        by_token.entry(t).or_default().push(*e);
    }
    let tokens: Vec<TokenEvents> = by_token
        .into_iter()
        .map(|(t, ticks)| TokenEvents {
            token: t.to_owned(),
            events: Events::from_ticks(ticks),
        })
        .collect();
    let all = match rule {
        BarRule::Time(options) => {
            let options = BarOptions {
                data_end: DateTime::from_timestamp_micros(end),
                ..options.clone()
            };
            bars_of_events(&tokens, true, TimeRange::default(), &options).unwrap()
        }
        BarRule::Events(r) => event_bars_of_events(&tokens, true, *r).unwrap(),
    };
    let split = |open: bool| {
        all.clone()
            .lazy()
            .filter(col("incomplete").eq(lit(open)))
            .collect()
            .unwrap()
    };
    (split(false), split(true))
}

/// Rows of a frame as text (NaN-safe), in the order of `token_address` then their own order.
fn rows(df: &DataFrame) -> Vec<String> {
    let df = df
        .sort(
            ["token_address"],
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .unwrap();
    (0..df.height())
        .map(|i| format!("{:?}", df.get_row(i).unwrap().0))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn live_bars_equal_the_batch_bars_of_the_events_before_the_watermark(
        rule in rule_strategy(),
        mut events in events_strategy(),
        cuts in prop::collection::vec(0.0f64..1.0, 0..6),
        extra in 0i64..200_000,
        seed in any::<u64>(),
    ) {
        // Events sorted by time; batches cut anywhere, each pushed in a shuffled order; after
        // each batch the watermark rises to at most the next batch's first event (none late).
        events.sort_by_key(|(_, e)| (e.time, e.slot, e.id));
        let n = events.len();
        let mut bounds: Vec<usize> = cuts.iter().map(|c| (c * n as f64) as usize).collect();
        bounds.push(n);
        bounds.sort_unstable();
        let mut live = LiveBars::new(rule.clone()).unwrap();
        let mut closed: Vec<DataFrame> = Vec::new();
        let mut from = 0;
        let mut rng = seed;
        let mut watermark = START - US;
        for &to in &bounds {
            let mut batch: Vec<(String, Tick)> = events[from..to].to_vec();
            // A cheap deterministic shuffle.
            for i in (1..batch.len()).rev() {
                rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                batch.swap(i, (rng >> 33) as usize % (i + 1));
            }
            for (token, tick) in batch {
                prop_assert_eq!(live.push(&token, [tick]), 0);
            }
            let next = events.get(to).map_or(START + 200_000 * US, |(_, e)| e.time);
            rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            watermark = watermark.max(watermark + ((rng >> 33) as i64 % (next - watermark + 1).max(1)));
            watermark = watermark.min(next);
            closed.push(live.advance(watermark).unwrap().closed);
            from = to;
        }
        let end = watermark + extra * US;
        closed.push(live.advance(end).unwrap().closed);
        let mut all = closed.remove(0);
        for c in closed {
            all.vstack_mut(&c).unwrap();
        }
        let (batch_closed, batch_open) = batch(&rule, &events, end);
        prop_assert_eq!(rows(&all), rows(&batch_closed), "{:?}", rule);
        prop_assert_eq!(rows(&live.provisional().unwrap()), rows(&batch_open), "{:?}", rule);
        prop_assert_eq!(live.pending(), events.iter().filter(|(_, e)| e.time >= end).count());
    }
}

/// An event before the watermark is late: counted, dropped, and no bar changes.
#[test]
fn late_events_are_counted_and_never_merged() {
    let tick = |secs: i64, price: f64| Tick {
        time: START + secs * US,
        slot: secs,
        id: secs,
        price,
        base: 1.0,
        usd: price,
        buy: true,
    };
    let mut live = LiveBars::new(BarRule::Time(BarOptions::with_width(60))).unwrap();
    assert_eq!(live.push("T", [tick(10, 1.0), tick(70, 2.0)]), 0);
    let first = live.advance(START + 65 * US).unwrap().closed;
    assert_eq!(first.height(), 1);
    assert_eq!(
        live.push("T", [tick(20, 9.0), tick(64, 9.0), tick(66, 3.0)]),
        2
    );
    assert_eq!(live.late().get("T"), Some(&2));
    let closed = live.advance(START + 120 * US).unwrap().closed;
    let close = closed.column("close").unwrap().f64().unwrap().get(0);
    // The bar of [60, 120) holds the events at 66 and 70 only.
    assert_eq!(close, Some(2.0));
    assert_eq!(
        closed.column("count").unwrap().i64().unwrap().get(0),
        Some(2)
    );
    // A watermark going back is refused naming it.
    let e = live.advance(START).unwrap_err();
    assert!(e.to_string().starts_with("invalid watermark"), "{e}");
    // Time bars close on the watermark alone: no event needed.
    let mut quiet = LiveBars::new(BarRule::Time(BarOptions::with_width(60))).unwrap();
    quiet.push("T", [tick(5, 1.0)]);
    assert_eq!(quiet.advance(START + 59 * US).unwrap().closed.height(), 0);
    assert_eq!(quiet.provisional().unwrap().height(), 1);
    assert_eq!(quiet.advance(START + 60 * US).unwrap().closed.height(), 1);
    assert_eq!(quiet.provisional().unwrap().height(), 0);
}
