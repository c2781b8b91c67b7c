//! Vectors of the quality rules: gaps, price jumps, the candles' reconciliation and the slots'
//! time order.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::CandleSeries;
use super::candles::{self, Buckets, ohlcv_for_tests};
use super::slots::order_of;
use super::{GapRule, JumpRule, TimeSpan, find_gaps, find_jumps};
use crate::analytics::{Events, Tick, TokenEvents};

const S: i64 = 1_000_000;

/// Events at the given seconds and prices, ids 1, 2, … in order.
fn events(times: &[i64], prices: &[f64]) -> Events {
    Events::from_ticks(
        times
            .iter()
            .zip(prices)
            .enumerate()
            .map(|(i, (&t, &p))| Tick {
                time: t * S,
                slot: t * 5 / 2,
                id: i as i64 + 1,
                price: p,
                base: 1.0,
                usd: p,
                buy: true,
            }),
    )
}

fn everywhere() -> Vec<TimeSpan> {
    vec![TimeSpan {
        start: i64::MIN,
        end: i64::MAX,
    }]
}

#[test]
fn a_silence_between_two_busy_stretches_is_a_gap() {
    // 40 events 10 s apart, 600 s of nothing, 40 events 10 s apart: the 600 s before the
    // silence hold 39 events (the last one is its edge), and so do the 600 s after it.
    let mut times: Vec<i64> = (0..40).map(|i| i * 10).collect();
    times.extend((0..40).map(|i| 990 + i * 10));
    let e = events(&times, &vec![1.0; times.len()]);
    let gaps = find_gaps("T", &e, &everywhere(), &GapRule::default());
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    let g = &gaps[0];
    assert_eq!((g.from.timestamp(), g.to.timestamp()), (390, 990));
    assert_eq!((g.id_before, g.id_after), (40, 41));
    assert_eq!(g.expected_events, 39.0, "{g:?}");
    assert!((g.rate_before_per_hour - 234.0).abs() < 1e-9, "{g:?}");

    // Outside the fetched ranges, or shorter than the rule's minimum, it is not reported.
    let before = [TimeSpan {
        start: 0,
        end: 500 * S,
    }];
    assert!(find_gaps("T", &e, &before, &GapRule::default()).is_empty());
    let long = GapRule {
        min_seconds: 601.0,
        ..GapRule::default()
    };
    assert!(find_gaps("T", &e, &everywhere(), &long).is_empty());
    // A stricter expectation, or a higher rate floor, is not met.
    let strict = GapRule {
        min_expected: 40.0,
        ..GapRule::default()
    };
    assert!(find_gaps("T", &e, &everywhere(), &strict).is_empty());
    let strict = GapRule {
        min_rate_per_hour: 235.0,
        ..GapRule::default()
    };
    assert!(find_gaps("T", &e, &everywhere(), &strict).is_empty());
}

#[test]
fn the_edge_of_a_burst_and_the_quiet_between_bursts_are_not_gaps() {
    // Busy, then an hour of nothing, then quiet (an event an hour): only one side is busy.
    let mut times: Vec<i64> = (0..40).map(|i| i * 10).collect();
    times.extend((1..=40).map(|i| 390 + i * 3600));
    let e = events(&times, &vec![1.0; times.len()]);
    assert!(find_gaps("T", &e, &everywhere(), &GapRule::default()).is_empty());
    // Quiet on both sides: an event an hour, with a silence of five hours in the middle (five
    // events an hour would be needed even with a lower expectation).
    let mut times: Vec<i64> = (0..40).map(|i| i * 3600).collect();
    times.extend((0..40).map(|i| 44 * 3600 + i * 3600));
    let e = events(&times, &vec![1.0; times.len()]);
    assert!(find_gaps("T", &e, &everywhere(), &GapRule::default()).is_empty());
    let lenient = GapRule {
        min_expected: 5.0,
        ..GapRule::default()
    };
    assert!(find_gaps("T", &e, &everywhere(), &lenient).is_empty());
    let no_floor = GapRule {
        min_rate_per_hour: 0.0,
        ..lenient
    };
    assert_eq!(find_gaps("T", &e, &everywhere(), &no_floor).len(), 1);
}

#[test]
fn a_poisson_stream_with_bursts_has_no_gaps() {
    // 200,000 events: a background rate and bursts ten to a hundred times denser.
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut t = 0.0f64;
    let mut times = Vec::new();
    while times.len() < 200_000 {
        let phase = (t / 20_000.0) as i64;
        let rate = if phase % 3 == 0 {
            0.01
        } else {
            0.01 * (10 + (phase % 7) * 15) as f64
        };
        let u: f64 = rng.random();
        t += -(1.0 - u).ln() / rate;
        times.push(t as i64);
    }
    let e = events(&times, &vec![1.0; times.len()]);
    let gaps = find_gaps("T", &e, &everywhere(), &GapRule::default());
    assert!(gaps.is_empty(), "{:?}", &gaps[..gaps.len().min(3)]);
}

#[test]
fn the_bound_is_scaled_mad_with_a_floor() {
    let rule = JumpRule {
        half_window: 2,
        z: 10.0,
        floor: 0.5,
    };
    // Median 3; deviations 2, 1, 0, 1, 97: MAD 1.
    let (m, bound) = super::jumps::window_bound(&mut [1.0, 2.0, 3.0, 4.0, 100.0], &rule);
    assert_eq!(m, 3.0);
    assert!((bound - 14.826).abs() < 1e-12);
    // Equal values: MAD 0, the floor. An even count takes the mean of the middle two.
    let (m, bound) = super::jumps::window_bound(&mut [2.0, 2.0, 4.0, 4.0], &rule);
    assert_eq!(m, 3.0);
    assert!((bound - 14.826).abs() < 1e-12);
    let (m, bound) = super::jumps::window_bound(&mut [2.0, 2.0, 2.0], &rule);
    assert_eq!((m, bound), (2.0, 0.5));
}

#[test]
fn a_doctored_price_is_a_jump_and_its_neighbours_are_not() {
    let n = 100;
    let times: Vec<i64> = (0..n).map(|i| i * 60).collect();
    // A random walk of 1 % steps around 100, one price ten times too high, one zero.
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut x = 100f64.ln();
    let mut prices: Vec<f64> = (0..n)
        .map(|_| {
            x += 0.01 * (rng.random::<f64>() - 0.5);
            x.exp()
        })
        .collect();
    prices[40] *= 10.0;
    prices[70] = 0.0;
    let e = events(&times, &prices);
    let jumps = find_jumps("T", &e, &JumpRule::default());
    let ids: Vec<i64> = jumps.iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![41, 71], "{jumps:?}");
    let j = &jumps[0];
    assert!(
        (j.log_deviation.unwrap() - 10f64.ln()).abs() < 0.05,
        "{j:?}"
    );
    assert_eq!(jumps[1].log_deviation, None);
}

#[test]
fn unpriced_events_are_jumps_without_a_median() {
    // 17 events: the ninth is the first judged (8 on each side). All unpriced (0, negative,
    // NaN): each judged one is a jump, though no event of its window has a price.
    let times: Vec<i64> = (0..17).map(|i| i * 60).collect();
    for price in [0.0, -1.5, f64::NAN] {
        let e = events(&times, &[price; 17]);
        let jumps = find_jumps("T", &e, &JumpRule::default());
        assert_eq!(jumps.len(), 1, "{jumps:?}");
        let j = &jumps[0];
        assert_eq!(
            (j.id, j.median_price, j.log_deviation),
            (9, None, None),
            "{j:?}"
        );
        assert_eq!(j.bound, JumpRule::default().floor);
    }
    // One priced event among unpriced ones has nothing to be compared with: not judged. Its
    // unpriced neighbours are jumps, with its price as their window's median while it is in
    // their window, and none past it.
    let mut prices = vec![0.0; 60];
    prices[20] = 3.0;
    let e = events(&(0..60).map(|i| i * 60).collect::<Vec<_>>(), &prices);
    let jumps = find_jumps("T", &e, &JumpRule::default());
    let ids: Vec<i64> = jumps.iter().map(|j| j.id).collect();
    assert_eq!(ids, (9..=52).filter(|&i| i != 21).collect::<Vec<_>>());
    assert!(jumps.iter().all(|j| j.log_deviation.is_none()));
    for j in &jumps {
        match j.median_price {
            Some(m) => assert!(j.id <= 37 && (m - 3.0).abs() < 1e-12, "{j:?}"),
            None => assert!(j.id > 37, "{j:?}"),
        }
    }
}

/// The jump rule read straight from its definition (every event's window sorted, its median
/// and MAD, then the bound and the spike test): the judged indices, medians and bounds.
fn jumps_by_definition(prices: &[f64], rule: &JumpRule) -> Vec<(usize, Option<f64>, f64)> {
    let k = rule.half_window.max(1);
    let logs = super::jumps::log_prices(prices);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let mut out = Vec::new();
    for i in 0..logs.len() {
        let (lo, hi) = (i.saturating_sub(k), (i + k).min(logs.len() - 1));
        if i - lo < k.div_ceil(2) || hi - i < k.div_ceil(2) {
            continue;
        }
        let mut window: Vec<f64> = (lo..=hi)
            .filter(|&j| j != i && !logs[j].is_nan())
            .map(|j| logs[j])
            .collect();
        let x = logs[i];
        if window.is_empty() {
            if x.is_nan() {
                out.push((i, None, rule.floor));
            }
            continue;
        }
        let m = median(&mut window);
        let mut dev: Vec<f64> = window.iter().map(|w| (w - m).abs()).collect();
        let bound = (rule.z * 1.4826 * median(&mut dev)).max(rule.floor);
        let before = (lo..i).rev().map(|j| logs[j]).find(|y| !y.is_nan());
        let after = (i + 1..=hi).map(|j| logs[j]).find(|y| !y.is_nan());
        let d = x - m;
        let spike = [before, after]
            .into_iter()
            .flatten()
            .all(|y| (x - y) * d.signum() > bound);
        if x.is_nan() || (d.abs() > bound && spike) {
            out.push((i, Some(m), bound));
        }
    }
    out
}

#[test]
fn the_jumps_found_are_those_of_the_rule_read_by_its_definition() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for round in 0..40 {
        // A walk with steps of every size, doctored prices alone and in pairs, unpriced events.
        let step = [0.001, 0.05, 0.4, 1.0][round % 4];
        let mut x = 0.0f64;
        let prices: Vec<f64> = (0..600)
            .map(|_| {
                x += rng.random_range(-step..step);
                match rng.random_range(0..100) {
                    0..3 => (x + rng.random_range(-4.0..4.0)).exp(),
                    3 => f64::NAN,
                    4 => 0.0,
                    _ => x.exp(),
                }
            })
            .collect();
        for rule in [
            JumpRule::default(),
            JumpRule {
                half_window: 5,
                z: 3.0,
                floor: 0.05,
            },
            JumpRule {
                half_window: 16,
                z: 2.0,
                floor: 0.0,
            },
        ] {
            let found: Vec<(usize, Option<f64>, f64)> = super::jumps::judge(&prices, &rule)
                .into_iter()
                .map(|j| (j.index, j.median, j.bound))
                .collect();
            let expected = jumps_by_definition(&prices, &rule);
            let indices =
                |v: &[(usize, Option<f64>, f64)]| v.iter().map(|j| j.0).collect::<Vec<_>>();
            assert_eq!(
                indices(&found),
                indices(&expected),
                "round {round}, {rule:?}"
            );
            for (f, e) in found.iter().zip(&expected) {
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(1.0);
                assert!(f.1.zip(e.1).is_none_or(|(a, b)| close(a, b)), "{f:?} {e:?}");
                assert!(close(f.2, e.2), "{f:?} {e:?}");
            }
        }
    }
}

#[test]
fn a_level_shift_of_the_market_is_not_a_jump() {
    // The price rises 2.5 times at once and stays: the windows around the step hold both
    // levels, whose spread widens their bound, and the others hold one level.
    let times: Vec<i64> = (0..100).map(|i| i * 60).collect();
    let prices: Vec<f64> = (0..100)
        .map(|i| if i < 50 { 100.0 } else { 250.0 } * (1.0 + 0.001 * (i % 3) as f64))
        .collect();
    let e = events(&times, &prices);
    let jumps = find_jumps("T", &e, &JumpRule::default());
    assert!(jumps.is_empty(), "{jumps:?}");
}

#[test]
fn slots_out_of_time_order_are_found_once() {
    // Slot 3 carries two times; slot 5 is before slot 4; slot 6 is fine again.
    let slots = (
        vec![1, 2, 3, 4, 5, 6],
        vec![10, 10, 11, 20, 15, 21]
            .into_iter()
            .map(|t| t * S)
            .collect(),
        vec![10, 10, 12, 20, 15, 21]
            .into_iter()
            .map(|t| t * S)
            .collect(),
        vec![1, 1, 2, 1, 1, 1],
    );
    let order = order_of("swaps", &slots, 5);
    assert_eq!(order.split.0, 1);
    assert_eq!(order.split.1[0].block_slot, 3);
    assert_eq!(order.backwards.0, 1);
    let b = &order.backwards.1[0];
    assert_eq!((b.previous_slot, b.block_slot), (4, 5));
    // Examples are bounded, counts are not.
    let order = order_of("swaps", &slots, 0);
    assert_eq!((order.split.0, order.split.1.len()), (1, 0));
}

#[test]
fn candles_equal_to_the_bars_agree_and_a_missing_swap_is_found() {
    let series = CandleSeries {
        token: Some("T".into()),
        pool: None,
        interval: 60,
    };
    // Two minutes of swaps: 00:00:10 at 11, 00:00:30 at 10, 00:00:31 at 12, 00:01:10 at 13.
    let e = events(&[10, 30, 31, 70], &[11.0, 10.0, 12.0, 13.0]);
    let t = TokenEvents {
        token: "T".into(),
        events: e,
    };
    let candles = Buckets::from_rows(vec![
        ohlcv_for_tests(0, [11.0, 12.0, 10.0, 12.0], 33.0, 3),
        ohlcv_for_tests(60 * S, [13.0, 13.0, 13.0, 13.0], 13.0, 1),
    ]);
    let spans = candles.span(60).into_iter().collect::<Vec<_>>();
    let (compared, diffs) = candles::reconcile(&series, &candles, &t, &spans, None).unwrap();
    assert_eq!((compared, diffs.len()), (2, 0), "{diffs:?}");

    // The lake lost the swap at 00:00:31: the first minute differs in high, close, volume
    // and count.
    let e = events(&[10, 30, 70], &[11.0, 10.0, 13.0]);
    let t = TokenEvents {
        token: "T".into(),
        events: e,
    };
    let (compared, diffs) = candles::reconcile(&series, &candles, &t, &spans, None).unwrap();
    assert_eq!((compared, diffs.len()), (2, 1));
    let fields: Vec<&str> = diffs[0].fields.iter().map(|f| f.field).collect();
    assert_eq!(fields, vec!["high", "close", "volume", "count"]);
    assert_eq!(diffs[0].timestamp.timestamp(), 0);
    assert_eq!(diffs[0].fields[3].candle, Some(3.0));
    assert_eq!(diffs[0].fields[3].bars, Some(2.0));

    // Buckets outside the swaps' fetched ranges are not compared.
    let late = [TimeSpan {
        start: 60 * S,
        end: 120 * S,
    }];
    let (compared, diffs) = candles::reconcile(&series, &candles, &t, &spans, Some(&late)).unwrap();
    assert_eq!((compared, diffs.len()), (1, 0));
}
