//! OHLCV bars and price stats: the semantics vectors, every option, property tests, and
//! equality with the simulator's get-price-candles and get-price-stats over loopback.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use dexlake::analytics::ohlcv::{bars_of_events, event_bars_of_events};
use dexlake::analytics::stats::PERIODS;
use dexlake::analytics::{
    BarOptions, Edge, EventRule, EventSource, Events, Fill, PriceStatsOptions, Selection, Tick,
    TimeRange, TokenEvents, bars, bars_in_batches, event_bars, price_stats, resample,
};
use dexlake::api::client::{Client, ClientConfig};
use dexlake::api::models::{Swap, SwapType};
use dexlake::api::requests::{AltPricesRequest, CandlesRequest};
use dexlake::lake::{Dataset, Lake, convert};
use dexlake::sim::{Scale, SimConfig, Simulator};
use dexlake::sync::{Job, SyncConfig, Syncer};
use polars::prelude::*;
use proptest::prelude::*;

const S: i64 = 1_000_000;

/// A bar's comparable fields: (timestamp µs, open, high, low, close, base volume, count, vwap,
/// incomplete).
type Row = (
    i64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    f64,
    i64,
    Option<f64>,
    bool,
);

/// A price that a filled bar may leave null.
type Price = Option<f64>;

/// (label s, open, high, low, close, count).
type Ohlcc = (i64, Price, Price, Price, Price, i64);

fn f64s(df: &DataFrame, name: &str) -> Vec<Option<f64>> {
    df.column(name).unwrap().f64().unwrap().iter().collect()
}

fn rows(df: &DataFrame) -> Vec<Row> {
    let ts: Vec<i64> = df
        .column("timestamp")
        .unwrap()
        .datetime()
        .unwrap()
        .physical()
        .iter()
        .map(Option::unwrap)
        .collect();
    let (o, h, l, c) = (
        f64s(df, "open"),
        f64s(df, "high"),
        f64s(df, "low"),
        f64s(df, "close"),
    );
    let bv = f64s(df, "base_volume");
    let vwap = f64s(df, "vwap");
    let count: Vec<i64> = df
        .column("count")
        .unwrap()
        .i64()
        .unwrap()
        .iter()
        .map(Option::unwrap)
        .collect();
    let inc: Vec<bool> = df
        .column("incomplete")
        .unwrap()
        .bool()
        .unwrap()
        .iter()
        .map(Option::unwrap)
        .collect();
    (0..df.height())
        .map(|i| {
            (
                ts[i],
                o[i],
                h[i],
                l[i],
                c[i],
                bv[i].unwrap(),
                count[i],
                vwap[i],
                inc[i],
            )
        })
        .collect()
}

/// semantics.md §1: `00:00:10 11×1; 00:00:30 10×2; 00:00:30 12×3; 00:01:00 13×1; 00:01:59 9×4;
/// 00:03:10 14×5`, the two 00:00:30 ticks ordered by slot (10 first). Given in reverse, so
/// that only the event order can put them right.
fn vector_ticks() -> Vec<Tick> {
    let v = [
        (10, 11.0, 1.0),
        (30, 10.0, 2.0),
        (30, 12.0, 3.0),
        (60, 13.0, 1.0),
        (119, 9.0, 4.0),
        (190, 14.0, 5.0),
    ];
    v.iter()
        .enumerate()
        .rev()
        .map(|(k, &(t, p, q))| Tick {
            time: t * S,
            slot: 100 + k as i64,
            id: 1000 - k as i64,
            price: p,
            base: q,
            usd: p * q,
            buy: k % 2 == 0,
        })
        .collect()
}

fn one(ticks: Vec<Tick>) -> Vec<TokenEvents> {
    vec![TokenEvents {
        token: "T".into(),
        events: Events::from_ticks(ticks),
    }]
}

fn opts(width: i64) -> BarOptions {
    BarOptions::with_width(width)
}

fn vector_bars(o: &BarOptions) -> Vec<Row> {
    rows(&bars_of_events(&one(vector_ticks()), false, TimeRange::default(), o).unwrap())
}

#[test]
fn semantics_vector_left_closed_left_label() {
    let got = vector_bars(&opts(60));
    assert_eq!(
        got,
        vec![
            (
                0,
                Some(11.0),
                Some(12.0),
                Some(10.0),
                Some(12.0),
                6.0,
                3,
                Some(67.0 / 6.0),
                false
            ),
            (
                60 * S,
                Some(13.0),
                Some(13.0),
                Some(9.0),
                Some(9.0),
                5.0,
                2,
                Some(9.8),
                false
            ),
            (
                180 * S,
                Some(14.0),
                Some(14.0),
                Some(14.0),
                Some(14.0),
                5.0,
                1,
                Some(14.0),
                true
            ),
        ]
    );
}

#[test]
fn semantics_vector_fill_policies() {
    let mut o = opts(60);
    o.fill = Fill::Null;
    let got = vector_bars(&o);
    assert_eq!(got.len(), 4);
    assert_eq!(
        got[2],
        (120 * S, None, None, None, None, 0.0, 0, None, false)
    );
    o.fill = Fill::ForwardFill;
    let got = vector_bars(&o);
    assert_eq!(
        got[2],
        (
            120 * S,
            Some(9.0),
            Some(9.0),
            Some(9.0),
            Some(9.0),
            0.0,
            0,
            None,
            false
        )
    );
    assert_eq!(got[3].0, 180 * S);
}

#[test]
fn semantics_vector_right_closed_right_label() {
    let mut o = opts(60);
    o.closed = Edge::Right;
    o.label = Edge::Right;
    let got = vector_bars(&o);
    let short: Vec<Ohlcc> = got
        .iter()
        .map(|r| (r.0 / S, r.1, r.2, r.3, r.4, r.6))
        .collect();
    assert_eq!(
        short,
        vec![
            (60, Some(11.0), Some(13.0), Some(10.0), Some(13.0), 4),
            (120, Some(9.0), Some(9.0), Some(9.0), Some(9.0), 1),
            (240, Some(14.0), Some(14.0), Some(14.0), Some(14.0), 1),
        ]
    );
    // Right-closed, left-labelled: the same buckets, labelled by their starts.
    o.label = Edge::Left;
    let starts: Vec<i64> = vector_bars(&o).iter().map(|r| r.0 / S).collect();
    assert_eq!(starts, vec![0, 60, 180]);
}

#[test]
fn volumes_split_by_side_and_usd() {
    let df = bars_of_events(&one(vector_ticks()), true, TimeRange::default(), &opts(60)).unwrap();
    let names: Vec<&str> = df.get_column_names().iter().map(|n| n.as_str()).collect();
    assert_eq!(names[..3], ["token_address", "timestamp", "open"]);
    // Ticks k = 0, 2, 4 are buys: 11×1, 12×3, 9×4.
    assert_eq!(
        f64s(&df, "buy_volume"),
        vec![Some(11.0 + 36.0), Some(36.0), Some(0.0)]
    );
    assert_eq!(
        f64s(&df, "sell_volume"),
        vec![Some(20.0), Some(13.0), Some(70.0)]
    );
    assert_eq!(
        f64s(&df, "volume"),
        vec![Some(67.0), Some(49.0), Some(70.0)]
    );
    assert_eq!(f64s(&df, "sum_pq"), f64s(&df, "volume"));
    assert_eq!(f64s(&df, "sum_q"), f64s(&df, "base_volume"));
}

#[test]
fn offset_moves_the_grid_and_data_end_flags_incomplete() {
    let mut o = opts(60);
    o.offset_seconds = 30;
    let got: Vec<(i64, i64)> = vector_bars(&o).iter().map(|r| (r.0 / S, r.6)).collect();
    // Buckets [−30, 30), [30, 90), …: the 00:00:30 ticks open the second one.
    assert_eq!(got, vec![(-30, 1), (30, 3), (90, 1), (150, 1)]);
    // Data known until 00:04: the last bucket [180, 240) is complete.
    let mut o = opts(60);
    o.data_end = Some(Utc.timestamp_opt(240, 0).unwrap());
    assert!(vector_bars(&o).iter().all(|r| !r.8));
    o.data_end = Some(Utc.timestamp_opt(239, 0).unwrap());
    assert_eq!(
        vector_bars(&o).iter().map(|r| r.8).collect::<Vec<_>>(),
        vec![false, false, true]
    );
}

fn at(y: i32, m: u32, d: u32, h: u32, min: u32) -> i64 {
    Utc.with_ymd_and_hms(y, m, d, h, min, 0)
        .unwrap()
        .timestamp_micros()
}

fn tick_at(t: i64, price: f64) -> Tick {
    Tick {
        time: t,
        slot: t / S,
        id: t / S,
        price,
        base: 1.0,
        usd: price,
        buy: true,
    }
}

#[test]
fn weeks_start_on_monday() {
    // 2024-01-03 is a Wednesday; its week starts Monday 2024-01-01.
    let ticks = vec![
        tick_at(at(2024, 1, 3, 12, 0), 1.0),
        tick_at(at(2024, 1, 8, 0, 0), 2.0),
    ];
    let df = bars_of_events(&one(ticks), false, TimeRange::default(), &opts(7 * 86_400)).unwrap();
    let starts: Vec<i64> = rows(&df).iter().map(|r| r.0).collect();
    assert_eq!(starts, vec![at(2024, 1, 1, 0, 0), at(2024, 1, 8, 0, 0)]);
}

#[test]
fn calendar_days_follow_the_time_zone_across_a_clock_change() {
    // Europe/London moves to summer time on 2024-03-31 at 01:00 UTC: that day has 23 hours.
    let ticks = vec![
        tick_at(at(2024, 3, 30, 23, 30), 1.0), // 23:30 local on the 30th (GMT)
        tick_at(at(2024, 3, 31, 0, 30), 2.0),  // 00:30 local on the 31st
        tick_at(at(2024, 3, 31, 22, 30), 3.0), // 23:30 local (BST) on the 31st
        tick_at(at(2024, 3, 31, 23, 30), 4.0), // 00:30 local on 1 April
    ];
    let mut o = opts(86_400);
    o.time_zone = Some("Europe/London".into());
    o.fill = Fill::Null;
    let df = bars_of_events(&one(ticks.clone()), false, TimeRange::default(), &o).unwrap();
    let got: Vec<(i64, i64)> = rows(&df).iter().map(|r| (r.0, r.6)).collect();
    assert_eq!(
        got,
        vec![
            (at(2024, 3, 30, 0, 0), 1),
            (at(2024, 3, 31, 0, 0), 2),
            (at(2024, 3, 31, 23, 0), 1),
        ]
    );
    // In UTC the same ticks fall on other days.
    let utc = bars_of_events(&one(ticks), false, TimeRange::default(), &opts(86_400)).unwrap();
    let got: Vec<(i64, i64)> = rows(&utc).iter().map(|r| (r.0, r.6)).collect();
    assert_eq!(
        got,
        vec![(at(2024, 3, 30, 0, 0), 1), (at(2024, 3, 31, 0, 0), 3)]
    );
}

#[test]
fn bad_options_are_errors_not_panics() {
    let ev = one(vector_ticks());
    let r = TimeRange::default();
    for (o, needle) in [
        (opts(0), "positive"),
        (opts(-60), "positive"),
        (
            BarOptions {
                time_zone: Some("Europe/London".into()),
                ..opts(3600)
            },
            "whole days",
        ),
        (
            BarOptions {
                time_zone: Some("Mars/Olympus".into()),
                ..opts(86_400)
            },
            "IANA",
        ),
    ] {
        let e = bars_of_events(&ev, false, r, &o).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
    let empty = TimeRange {
        from: Some(Utc.timestamp_opt(100, 0).unwrap()),
        to: Some(Utc.timestamp_opt(100, 0).unwrap()),
    };
    assert!(empty.validate().is_err());
    for rule in [
        EventRule::Ticks(0),
        EventRule::BaseVolume(0.0),
        EventRule::UsdVolume(f64::NAN),
    ] {
        assert!(event_bars_of_events(&ev, false, rule).is_err());
    }
}

#[test]
fn tick_volume_and_dollar_bars_close_on_the_crossing_event() {
    let ev = one(vector_ticks());
    // Every 4 events.
    let t = rows(&event_bars_of_events(&ev, false, EventRule::Ticks(4)).unwrap());
    let short: Vec<(i64, i64, Price, Price, bool)> =
        t.iter().map(|r| (r.0 / S, r.6, r.1, r.4, r.8)).collect();
    assert_eq!(
        short,
        vec![
            (10, 4, Some(11.0), Some(13.0), false),
            (119, 2, Some(9.0), Some(14.0), true),
        ]
    );
    // Base volume 5: 1+2+3 = 6 crosses at the third event, which stays whole in the first
    // bar; the next bar starts from 0: 1+4 = 5 reaches it exactly; 5 reaches it alone.
    let v = rows(&event_bars_of_events(&ev, false, EventRule::BaseVolume(5.0)).unwrap());
    let short: Vec<(i64, f64, i64, bool)> = v.iter().map(|r| (r.0 / S, r.5, r.6, r.8)).collect();
    assert_eq!(
        short,
        vec![
            (10, 6.0, 3, false),
            (60, 5.0, 2, false),
            (190, 5.0, 1, false)
        ]
    );
    // Dollar bars of 60: 11+20+36 = 67 ≥ 60; 13+36 = 49 < 60, + 70 = 119 crosses.
    let d = rows(&event_bars_of_events(&ev, false, EventRule::UsdVolume(60.0)).unwrap());
    let short: Vec<(i64, i64, bool)> = d.iter().map(|r| (r.0 / S, r.6, r.8)).collect();
    assert_eq!(short, vec![(10, 3, false), (60, 3, false)]);
    // A threshold never reached leaves one incomplete bar.
    let d = rows(&event_bars_of_events(&ev, false, EventRule::UsdVolume(1e9)).unwrap());
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].6, d[0].8), (6, true));
}

#[test]
fn coarser_bars_from_finer_bars_ignore_filled_bars() {
    let ev = one(vector_ticks());
    let r = TimeRange::default();
    let mut fine = opts(60);
    fine.fill = Fill::ForwardFill;
    let fine = bars_of_events(&ev, false, r, &fine).unwrap();
    let coarse = resample(&fine, &opts(120)).unwrap();
    let direct = bars_of_events(&ev, false, r, &opts(120)).unwrap();
    assert_eq!(rows(&coarse), rows(&direct));
    let short: Vec<(i64, i64)> = rows(&direct).iter().map(|x| (x.0 / S, x.6)).collect();
    assert_eq!(short, vec![(0, 5), (120, 1)]);
}

// ---------------------------------------------------------------------------------------
// Property tests.

fn arb_ticks() -> impl Strategy<Value = Vec<Tick>> {
    prop::collection::vec(
        (
            0i64..4 * 3600,
            0i64..3,
            1.0f64..100.0,
            0.001f64..50.0,
            any::<bool>(),
        ),
        1..200,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(k, (t, s, p, q, buy))| Tick {
                time: t * S,
                slot: t * 4 + s,
                id: k as i64,
                price: p,
                base: q,
                usd: p * q,
                buy,
            })
            .collect()
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
}

/// Exact equality of labels, prices, counts and flags; sums within a relative 1e-12 (they
/// are added in a different grouping).
fn same_bars(a: &DataFrame, b: &DataFrame) -> std::result::Result<(), TestCaseError> {
    let (ra, rb) = (rows(a), rows(b));
    prop_assert_eq!(ra.len(), rb.len());
    for (x, y) in ra.iter().zip(&rb) {
        prop_assert_eq!(
            (x.0, x.1, x.2, x.3, x.4, x.6, x.8),
            (y.0, y.1, y.2, y.3, y.4, y.6, y.8)
        );
        prop_assert!(close(x.5, y.5), "base volume {} vs {}", x.5, y.5);
        match (x.7, y.7) {
            (Some(p), Some(q)) => prop_assert!(close(p, q), "vwap {p} vs {q}"),
            (p, q) => prop_assert_eq!(p, q),
        }
    }
    for name in ["volume", "buy_volume", "sell_volume", "sum_pq", "sum_q"] {
        for (x, y) in f64s(a, name).iter().zip(f64s(b, name)) {
            prop_assert!(close(x.unwrap(), y.unwrap()), "{name}");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn finer_bars_compose_into_coarser_bars(
        ticks in arb_ticks(),
        fine_fill in prop_oneof![Just(Fill::Skip), Just(Fill::Null), Just(Fill::ForwardFill)],
        right in any::<bool>(),
        (fine, factor) in prop_oneof![Just((60i64, 5i64)), Just((60, 60)), Just((300, 12)), Just((900, 4))],
    ) {
        let ev = one(ticks);
        let r = TimeRange::default();
        let end = Utc.timestamp_opt(3 * 3600 + 7, 0).unwrap();
        let side = if right { Edge::Right } else { Edge::Left };
        let base = BarOptions { closed: side, label: side, data_end: Some(end), ..opts(fine) };
        let fine_bars = bars_of_events(&ev, false, r, &BarOptions { fill: fine_fill, ..base.clone() }).unwrap();
        let coarse = BarOptions { width_seconds: fine * factor, ..base };
        let composed = resample(&fine_bars, &coarse).unwrap();
        let direct = bars_of_events(&ev, false, r, &coarse).unwrap();
        same_bars(&composed, &direct)?;
    }

    #[test]
    fn row_order_does_not_change_bars(ticks in arb_ticks(), seed in any::<u64>()) {
        let mut shuffled = ticks.clone();
        // A deterministic shuffle from the seed.
        let mut s = seed | 1;
        for i in (1..shuffled.len()).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            shuffled.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let r = TimeRange::default();
        let a = bars_of_events(&one(ticks), false, r, &opts(300)).unwrap();
        let b = bars_of_events(&one(shuffled), false, r, &opts(300)).unwrap();
        // Same event order, same additions: identical bits.
        prop_assert!(a.equals_missing(&b));
    }

    #[test]
    fn volume_and_count_are_conserved(ticks in arb_ticks(), width in prop_oneof![Just(1i64), Just(60), Just(3600), Just(86_400)]) {
        let n = ticks.len() as i64;
        let usd: f64 = ticks.iter().map(|t| t.usd).sum();
        let base: f64 = ticks.iter().map(|t| t.base).sum();
        let ev = one(ticks);
        let df = bars_of_events(&ev, false, TimeRange::default(), &BarOptions { fill: Fill::ForwardFill, ..opts(width) }).unwrap();
        let count: i64 = df.column("count").unwrap().i64().unwrap().sum().unwrap();
        prop_assert_eq!(count, n);
        let v: f64 = f64s(&df, "volume").iter().map(|x| x.unwrap()).sum();
        let b: f64 = f64s(&df, "base_volume").iter().map(|x| x.unwrap()).sum();
        let split: f64 = f64s(&df, "buy_volume").iter().chain(f64s(&df, "sell_volume").iter()).map(|x| x.unwrap()).sum();
        prop_assert!((v - usd).abs() <= 1e-9 * usd, "{v} vs {usd}");
        prop_assert!((split - usd).abs() <= 1e-9 * usd);
        prop_assert!((b - base).abs() <= 1e-9 * base);
        for rule in [EventRule::Ticks(7), EventRule::BaseVolume(20.0), EventRule::UsdVolume(500.0)] {
            let df = event_bars_of_events(&ev, false, rule).unwrap();
            let count: i64 = df.column("count").unwrap().i64().unwrap().sum().unwrap();
            prop_assert_eq!(count, n);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Through the lake: swaps on disk, in files of any order.

fn swap_of(token: &str, t: &Tick) -> Swap {
    let quote = "QUOTE".to_owned();
    let (swap_type, t_in, t_out) = if t.buy {
        (SwapType::QuoteToken, quote, token.to_owned())
    } else {
        (SwapType::TokenQuote, token.to_owned(), quote)
    };
    let (a_token, a_quote) = (t.base, t.usd);
    let (a_in, a_out, p_in, p_out) = if t.buy {
        (a_quote, a_token, 1.0, t.price)
    } else {
        (a_token, a_quote, t.price, 1.0)
    };
    Swap {
        id: t.id,
        swap_type,
        protocol: "amm".into(),
        wallet_address: "W".into(),
        pool_address: format!("POOL-{token}"),
        token_address_in: t_in,
        token_address_out: t_out,
        token_amount_in: a_in,
        token_amount_out: a_out,
        token_price_in: p_in,
        token_price_out: p_out,
        pre_token_balance_in: 0.0,
        pre_token_balance_out: 0.0,
        post_token_balance_in: 0.0,
        post_token_balance_out: 0.0,
        usd_amount_in: t.usd,
        usd_amount_out: t.usd,
        block_slot: t.slot,
        block_time: DateTime::from_timestamp_micros(t.time).unwrap(),
        tx_hash: format!("tx{}", t.id),
    }
}

/// Writes `(token, tick)` swaps into a fresh lake, one commit (file) per chunk.
fn lake_of(chunks: &[Vec<(String, Tick)>]) -> (tempfile::TempDir, Lake) {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open(dir.path()).unwrap();
    for chunk in chunks {
        let swaps: Vec<Swap> = chunk.iter().map(|(tok, t)| swap_of(tok, t)).collect();
        let mut tx = lake.transaction().unwrap();
        tx.write(Dataset::Swaps, convert::swaps_to_batch(&swaps).unwrap())
            .unwrap();
        tx.commit().unwrap();
    }
    (dir, lake)
}

#[test]
fn the_vector_through_the_lake_with_a_swap_per_side() {
    // One file per swap.
    let ticks = vector_ticks();
    let chunks: Vec<Vec<(String, Tick)>> =
        ticks.iter().map(|t| vec![("TOK".to_owned(), *t)]).collect();
    let (_dir, lake) = lake_of(&chunks);
    let df = bars(
        &lake,
        EventSource::Swaps,
        &Selection::Token("TOK".into()),
        TimeRange::default(),
        &opts(60),
    )
    .unwrap();
    assert_eq!(rows(&df), vector_bars(&opts(60)));
    // Every token: the same bars, with the token's name; the quote is never a token side.
    let all = bars(
        &lake,
        EventSource::Swaps,
        &Selection::AllTokens,
        TimeRange::default(),
        &opts(60),
    )
    .unwrap();
    assert_eq!(rows(&all), rows(&df));
    let names: Vec<Option<&str>> = all
        .column("token_address")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .collect();
    assert!(names.iter().all(|n| *n == Some("TOK")));
    // The pool gives the same; a range keeps whole events in [from, to).
    let pool = bars(
        &lake,
        EventSource::Swaps,
        &Selection::Pool("POOL-TOK".into()),
        TimeRange::default(),
        &opts(60),
    )
    .unwrap();
    assert_eq!(rows(&pool), rows(&df));
    let range = TimeRange {
        from: Some(Utc.timestamp_opt(30, 0).unwrap()),
        to: Some(Utc.timestamp_opt(119, 0).unwrap()),
    };
    let part = bars(
        &lake,
        EventSource::Swaps,
        &Selection::Token("TOK".into()),
        range,
        &opts(60),
    )
    .unwrap();
    let short: Vec<(i64, i64, Option<f64>)> =
        rows(&part).iter().map(|r| (r.0 / S, r.6, r.1)).collect();
    assert_eq!(short, vec![(0, 2, Some(10.0)), (60, 1, Some(13.0))]);
    // Unknown token: no rows, no error.
    let none = bars(
        &lake,
        EventSource::Swaps,
        &Selection::Token("NOPE".into()),
        TimeRange::default(),
        &opts(60),
    )
    .unwrap();
    assert_eq!(none.height(), 0);
    // Event bars read the lake the same way.
    let ticks3 = event_bars(
        &lake,
        EventSource::Swaps,
        &Selection::Token("TOK".into()),
        TimeRange::default(),
        EventRule::Ticks(3),
    )
    .unwrap();
    assert_eq!(ticks3.height(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn file_order_and_split_do_not_change_bars(
        ticks in arb_ticks(),
        cut in prop::collection::vec(0usize..200, 0..4),
        reverse in any::<bool>(),
    ) {
        let tagged: Vec<(String, Tick)> = ticks
            .iter()
            .enumerate()
            .map(|(k, t)| (if k % 3 == 0 { "A" } else { "B" }.to_owned(), *t))
            .collect();
        let (_d1, one_file) = lake_of(std::slice::from_ref(&tagged));
        let mut cuts: Vec<usize> = cut.into_iter().map(|c| c % (tagged.len() + 1)).collect();
        cuts.sort();
        let mut chunks = Vec::new();
        let mut prev = 0;
        for c in cuts.into_iter().chain([tagged.len()]) {
            chunks.push(tagged[prev..c].to_vec());
            prev = c;
        }
        chunks.retain(|c| !c.is_empty());
        if reverse {
            chunks.reverse();
            for c in &mut chunks { c.reverse(); }
        }
        let (_d2, many) = lake_of(&chunks);
        let r = TimeRange::default();
        let a = bars(&one_file, EventSource::Swaps, &Selection::AllTokens, r, &opts(600)).unwrap();
        let b = bars(&many, EventSource::Swaps, &Selection::AllTokens, r, &opts(600)).unwrap();
        prop_assert!(a.equals_missing(&b));
        let tokens = bars(&many, EventSource::Swaps, &Selection::Tokens(vec!["B".into(), "A".into()]), r, &opts(600)).unwrap();
        prop_assert!(a.equals_missing(&tokens));
        // In batches of one token, the events read in parts of about three: the same frame.
        let mut stacked: Option<DataFrame> = None;
        bars_in_batches(&many, EventSource::Swaps, &Selection::AllTokens, r, &opts(600), 1, 3, |df| {
            match &mut stacked {
                Some(all) => { all.vstack_mut(&df).unwrap(); }
                None => stacked = Some(df),
            }
            Ok(())
        }).unwrap();
        match stacked {
            Some(all) => prop_assert!(a.equals_missing(&all)),
            None => prop_assert_eq!(a.height(), 0),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Against the simulator over loopback.

fn near(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bars_and_price_stats_equal_the_simulator() {
    let sim = Simulator::start(SimConfig {
        seed: 11,
        scale: Scale::Tiny,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let market = sim.market();
    let tokens: Vec<String> = market.catalog().altchain.tokens[..4]
        .iter()
        .map(|t| t.address.clone())
        .collect();
    let now = market.catalog().now;
    let client = Client::new(ClientConfig {
        base_url: sim.base_url().to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path()).unwrap());
    let sync = Syncer::new(
        client.clone(),
        Arc::clone(&lake),
        SyncConfig {
            recent_window: Duration::ZERO,
            ..SyncConfig::default()
        },
    );
    let jobs: Vec<Job> = tokens
        .iter()
        .map(|t| Job::Swaps {
            token: Some(t.clone()),
            wallet: None,
            pool: None,
        })
        .collect();
    let report = sync.run(&jobs).await;
    assert!(!report.any_failed(), "{:?}", report.jobs);

    for interval in [60i64, 3600, 86_400] {
        // Whole buckets: from an aligned start to the end of the bucket holding `now`.
        let span = (interval * 300).min(20 * 86_400);
        let from = (now.timestamp() - span).div_euclid(interval) * interval;
        let to_bucket = now.timestamp().div_euclid(interval) * interval;
        let range = TimeRange {
            from: Some(Utc.timestamp_opt(from, 0).unwrap()),
            to: Some(Utc.timestamp_opt(to_bucket + interval, 0).unwrap()),
        };
        let local = bars(
            &lake,
            EventSource::Swaps,
            &Selection::Tokens(tokens.clone()),
            range,
            &opts(interval),
        )
        .unwrap();
        let mut compared = 0;
        for token in &tokens {
            let remote = client
                .candles(&CandlesRequest {
                    interval,
                    token: Some(token.clone()),
                    pool: None,
                    from: Some(Utc.timestamp_opt(from, 0).unwrap()),
                    to: Some(Utc.timestamp_opt(to_bucket, 0).unwrap()),
                    count: None,
                })
                .await
                .unwrap();
            let mine = local
                .clone()
                .lazy()
                .filter(col("token_address").eq(lit(token.as_str())))
                .collect()
                .unwrap();
            assert_eq!(mine.height(), remote.len(), "{token} at {interval}s");
            let r = rows(&mine);
            let vol = f64s(&mine, "volume");
            for ((row, v), c) in r.iter().zip(vol).zip(&remote) {
                assert_eq!(row.0, c.timestamp.timestamp_micros());
                // Prices are copied, never computed: exact.
                assert_eq!(
                    (row.1, row.2, row.3, row.4, row.6),
                    (
                        Some(c.open),
                        Some(c.high),
                        Some(c.low),
                        Some(c.close),
                        c.count
                    )
                );
                // The same additions in the same event order: equal to the last bit, but a
                // relative 1e-12 is what the test asks of a sum.
                assert!(
                    near(v.unwrap(), c.volume, 1e-12),
                    "{} vs {}",
                    v.unwrap(),
                    c.volume
                );
            }
            compared += remote.len();
        }
        assert!(compared > 0, "some candles at {interval}s");
    }

    let stats = price_stats(
        &lake,
        &Selection::Tokens(tokens.clone()),
        PriceStatsOptions {
            now: Some(now),
            source: EventSource::Swaps,
            // The events in parts of whole tokens, through the spill files.
            events_at_once: 1_000,
        },
    )
    .unwrap();
    let remote = client
        .alt_price_stats(&AltPricesRequest {
            tokens: Some(tokens.clone()),
            pools: None,
        })
        .await
        .unwrap();
    assert_eq!(stats.height(), remote.len());
    let names: Vec<String> = stats
        .column("token_address")
        .unwrap()
        .str()
        .unwrap()
        .iter()
        .map(|s| s.unwrap().to_owned())
        .collect();
    for r in &remote {
        let i = names.iter().position(|n| *n == r.token_address).unwrap();
        assert_eq!(f64s(&stats, "usd_price")[i], Some(r.usd_price));
        let slot: Vec<Option<i64>> = stats
            .column("block_slot")
            .unwrap()
            .i64()
            .unwrap()
            .iter()
            .collect();
        assert_eq!(slot[i], Some(r.block_slot));
        for (k, (c, v, vc)) in r.changes.by_period().into_iter().enumerate() {
            let p = PERIODS[k];
            let got = |name: String| f64s(&stats, &name)[i].unwrap();
            assert!(near(got(format!("usd_price_change_{p}")), c, 1e-12), "{p}");
            assert!(near(got(format!("usd_volume_{p}")), v, 1e-12), "{p}");
            assert!(
                near(got(format!("usd_volume_change_{p}")), vc, 1e-12),
                "{p}"
            );
        }
    }
    // The default `now` is the latest swap in the lake (of any token).
    let latest = lake
        .scan(Dataset::Swaps)
        .unwrap()
        .select([col("block_time").max()])
        .collect()
        .unwrap();
    let latest_us = latest
        .column("block_time")
        .unwrap()
        .datetime()
        .unwrap()
        .physical()
        .get(0)
        .unwrap();
    let one_token = Selection::Token(tokens[1].clone());
    let by_default = price_stats(&lake, &one_token, PriceStatsOptions::default()).unwrap();
    let explicit = price_stats(
        &lake,
        &one_token,
        PriceStatsOptions {
            now: DateTime::from_timestamp_micros(latest_us),
            source: EventSource::Swaps,
            ..PriceStatsOptions::default()
        },
    )
    .unwrap();
    assert_eq!(by_default.height(), 1);
    assert!(by_default.equals_missing(&explicit));
    sim.shutdown().await;
}

// ---------------------------------------------------------------------------------------
// The CLI on a lake on disk.

fn dexlake(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(args)
        .output()
        .expect("the dexlake binary runs")
}

#[test]
fn cli_prints_bars_and_stats_and_fails_in_one_line() {
    let chunks = vec![
        vector_ticks()
            .into_iter()
            .map(|t| ("TOK".to_owned(), t))
            .collect::<Vec<_>>(),
    ];
    let (dir, opened) = lake_of(&chunks);
    let lake = dir.path().to_str().unwrap();
    let out = dexlake(&[
        "ohlcv",
        "--lake",
        lake,
        "--token",
        "TOK",
        "--interval",
        "60",
        "--format",
        "csv",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "timestamp,open,high,low,close,volume,base_volume,buy_volume,sell_volume,sum_pq,sum_q,incomplete,count,vwap"
    );
    assert_eq!(lines.len(), 4);
    assert!(
        lines[2].starts_with("1970-01-01T00:01:00Z,13,13,9,9,49,5,"),
        "{}",
        lines[2]
    );
    assert!(lines[2].ends_with(",false,2,9.8"), "{}", lines[2]);

    // Null fill, JSON: the empty 00:02 bucket has null prices and count 0.
    let out = dexlake(&[
        "ohlcv",
        "--lake",
        lake,
        "--tokens",
        "TOK",
        "--interval",
        "60",
        "--fill",
        "null",
        "--format",
        "json",
    ]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 4);
    assert_eq!(v[2]["open"], serde_json::Value::Null);
    assert_eq!(v[2]["count"], 0);
    assert_eq!(v[2]["token_address"], "TOK");

    // Parquet round trip, and tick bars.
    let file = dir.path().join("bars.parquet");
    let out = dexlake(&[
        "ohlcv",
        "--lake",
        lake,
        "--all-tokens",
        "--ticks",
        "4",
        "--format",
        "parquet",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back = ParquetReader::new(std::fs::File::open(&file).unwrap())
        .finish()
        .unwrap();
    assert_eq!(back.height(), 2);

    // Time bars as Parquet are written a batch of tokens at a time: the same frame as the
    // library's, and no file at all when nothing matches.
    let out = dexlake(&[
        "ohlcv",
        "--lake",
        lake,
        "--all-tokens",
        "--interval",
        "60",
        "--format",
        "parquet",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back = ParquetReader::new(std::fs::File::open(&file).unwrap())
        .finish()
        .unwrap();
    let direct = bars(
        &opened,
        EventSource::Swaps,
        &Selection::AllTokens,
        TimeRange::default(),
        &opts(60),
    )
    .unwrap();
    assert!(back.equals_missing(&direct));
    let none = dir.path().join("none.parquet");
    let out = dexlake(&[
        "ohlcv",
        "--lake",
        lake,
        "--token",
        "NOPE",
        "--interval",
        "60",
        "--format",
        "parquet",
        "--out",
        none.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no swaps for token NOPE"));
    assert!(!none.exists());

    // Price stats at a given instant, as a table.
    let out = dexlake(&[
        "price-stats",
        "--lake",
        lake,
        "--tokens",
        "TOK",
        "--now",
        "1970-01-01T00:05:00Z",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .contains("usd_price_change_5m")
    );
    assert_eq!(table.lines().count(), 2);

    // Errors: one line on stderr, a failure status, never a panic.
    for args in [
        vec![
            "ohlcv",
            "--lake",
            lake,
            "--token",
            "NOPE",
            "--interval",
            "60",
        ],
        vec!["ohlcv", "--lake", lake, "--token", "TOK", "--interval", "0"],
        vec![
            "ohlcv",
            "--lake",
            lake,
            "--token",
            "TOK",
            "--interval",
            "3600",
            "--tz",
            "Europe/Paris",
        ],
        vec![
            "ohlcv",
            "--lake",
            lake,
            "--token",
            "TOK",
            "--interval",
            "60",
            "--from",
            "200",
            "--to",
            "100",
        ],
        vec![
            "ohlcv",
            "--lake",
            "/nonexistent/lake",
            "--token",
            "TOK",
            "--interval",
            "60",
        ],
        vec!["price-stats", "--lake", lake, "--tokens", "NOPE"],
    ] {
        let out = dexlake(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && !err.contains("panicked"),
            "{err}"
        );
    }
    let out = dexlake(&[
        "ohlcv",
        "--lake",
        lake,
        "--token",
        "NOPE",
        "--interval",
        "60",
    ]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no swaps for token NOPE"));
}

/// The `ohlcv` output of `args` on `lake` as CSV, which must succeed.
fn ohlcv_csv(lake: &str, args: &[&str]) -> String {
    let mut all = vec!["ohlcv", "--lake", lake, "--token", "TOK", "--format", "csv"];
    all.extend(args);
    let out = dexlake(&all);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{all:?}: {err}");
    assert!(!err.contains("panicked"), "{all:?}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn cli_refuses_time_arguments_that_do_not_fit_and_reduces_offsets() {
    let chunks = vec![
        vector_ticks()
            .into_iter()
            .map(|t| ("TOK".to_owned(), t))
            .collect::<Vec<_>>(),
    ];
    let (dir, _lake) = lake_of(&chunks);
    let lake = dir.path().to_str().unwrap();
    let ohlcv = |extra: &[&'static str]| {
        let mut args = vec!["ohlcv", "--lake", lake, "--token", "TOK"];
        args.extend(extra);
        args
    };
    for extra in [
        // The width in microseconds wraps to 0.
        &["--interval", "4611686018427387904"][..],
        // ... or to 1 µs short of a second.
        &["--interval", "9223372036854775807"],
        // Calendar buckets beyond chrono's dates.
        &["--interval", "8640000000000", "--tz", "UTC"],
        // A bucket that ends past the last instant a bar can be labelled with.
        &[
            "--interval",
            "9223372036854",
            "--closed",
            "right",
            "--label",
            "right",
        ],
    ] {
        crate::common::dexlake_cli_refused(&ohlcv(extra), "invalid interval");
    }
    // Only an offset's remainder modulo the width moves the grid: a huge one is that
    // remainder (10^13 s = 2_777_777_777 h + 2_800 s = 115_740_740 d + 64_000 s).
    for (width, huge, rest, tz) in [
        ("3600", "10000000000000", "2800", None),
        ("86400", "10000000000000", "64000", Some("Europe/Paris")),
        ("60", "-9223372036854775808", "-8", None),
    ] {
        let with = |offset: &'static str| {
            let mut args = vec!["--interval", width, "--offset", offset];
            if let Some(tz) = tz {
                args.extend(["--tz", tz]);
            }
            ohlcv_csv(lake, &args)
        };
        let (a, b) = (with(huge), with(rest));
        assert!(a.lines().count() > 1, "{a}");
        assert_eq!(a, b, "--offset {huge} against --offset {rest}");
    }
}

#[test]
fn cli_refuses_empty_addresses_time_zones_of_event_bars_and_infinite_thresholds() {
    let chunks = vec![
        vector_ticks()
            .into_iter()
            .map(|t| ("TOK".to_owned(), t))
            .collect::<Vec<_>>(),
    ];
    let (dir, _lake) = lake_of(&chunks);
    let lake = dir.path().to_str().unwrap();
    let ohlcv = |extra: &[&'static str]| {
        let mut args = vec!["ohlcv", "--lake", lake];
        args.extend(extra);
        args
    };
    for (extra, needle) in [
        (&["--tokens", "TOK,,", "--interval", "60"][..], "--tokens"),
        (&["--tokens", "", "--interval", "60"], "--tokens"),
        (&["--token", "", "--interval", "60"], "--token"),
        (&["--pool", "", "--interval", "60"], "--pool"),
        (&["--token", "TOK", "--ticks", "2", "--tz", "UTC"], "--tz"),
        (
            &["--token", "TOK", "--base-volume", "5", "--tz", "UTC"],
            "--tz",
        ),
        (
            &["--token", "TOK", "--ticks", "2", "--offset", "30"],
            "--offset",
        ),
        (&["--token", "TOK", "--base-volume", "inf"], "finite"),
        (&["--token", "TOK", "--usd-volume", "NaN"], "finite"),
        (&["--token", "TOK", "--usd-volume=-inf"], "finite"),
    ] {
        crate::common::dexlake_cli_refused(&ohlcv(extra), needle);
    }
    crate::common::dexlake_cli_refused(
        &["price-stats", "--lake", lake, "--tokens", "TOK,"],
        "--tokens",
    );
    // Nothing at or before --now: the message names --now and when the swaps start.
    crate::common::dexlake_cli_refused(
        &[
            "price-stats",
            "--lake",
            lake,
            "--tokens",
            "TOK",
            "--now",
            "1969-12-31T00:00:00Z",
        ],
        "at or before --now 1969-12-31T00:00:00Z",
    );
    crate::common::dexlake_cli_refused(
        &[
            "price-stats",
            "--lake",
            lake,
            "--tokens",
            "TOK",
            "--now",
            "1969-12-31T00:00:00Z",
        ],
        "1970-01-01T00:00:10",
    );
}

/// Partition folders (relative to the lake) holding the dataset's Parquet files.
fn partitions(root: &std::path::Path, dataset: &str) -> std::collections::BTreeSet<String> {
    fn walk(
        dir: &std::path::Path,
        root: &std::path::Path,
        out: &mut std::collections::BTreeSet<String>,
    ) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.insert(
                    p.parent()
                        .unwrap()
                        .strip_prefix(root)
                        .unwrap()
                        .display()
                        .to_string(),
                );
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(&root.join(dataset), root, &mut out);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_lake_writes_what_a_sync_writes() {
    let sim = Simulator::start(SimConfig {
        seed: 5,
        scale: Scale::Tiny,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let tokens: Vec<String> = sim
        .market()
        .catalog()
        .altchain
        .tokens
        .iter()
        .map(|t| t.address.clone())
        .collect();
    let client = Client::new(ClientConfig {
        base_url: sim.base_url().to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    })
    .unwrap();
    let synced = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(synced.path()).unwrap());
    let jobs: Vec<Job> = tokens
        .iter()
        .map(|t| Job::Swaps {
            token: Some(t.clone()),
            wallet: None,
            pool: None,
        })
        .collect();
    let config = SyncConfig {
        recent_window: Duration::ZERO,
        ..SyncConfig::default()
    };
    let report = Syncer::new(client, Arc::clone(&lake), config)
        .run(&jobs)
        .await;
    assert!(!report.any_failed());
    lake.compact().unwrap();
    sim.shutdown().await;

    let direct = tempfile::tempdir().unwrap();
    let out = dexlake(&[
        "bench-lake",
        direct.path().to_str().unwrap(),
        "--seed",
        "5",
        "--scale",
        "tiny",
        "--chunk",
        "1000",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let direct_lake = Lake::open(direct.path()).unwrap();
    let sorted = |l: &Lake| {
        l.scan(Dataset::Swaps)
            .unwrap()
            .sort(["id"], SortMultipleOptions::default())
            .collect()
            .unwrap()
    };
    let (a, b) = (sorted(&lake), sorted(&direct_lake));
    assert!(a.height() > 1000);
    assert_eq!(a.height(), b.height());
    // Same columns and types; every value equal, floats to the last bit or one: the synced
    // lake holds what the client parsed from JSON, and serde_json's default float parser may
    // land one ULP away from the value the simulator printed.
    assert_eq!(a.schema(), b.schema());
    for (x, y) in a.columns().iter().zip(b.columns()) {
        match (x.f64(), y.f64()) {
            (Ok(fx), Ok(fy)) => {
                for (p, q) in fx.iter().zip(fy.iter()) {
                    let (p, q) = (p.unwrap(), q.unwrap());
                    assert!(
                        (p - q).abs() <= 2.0 * f64::EPSILON * p.abs().max(q.abs()),
                        "{}: {p} vs {q}",
                        x.name()
                    );
                }
            }
            _ => assert!(
                x.as_materialized_series()
                    .equals_missing(y.as_materialized_series()),
                "column {}",
                x.name()
            ),
        }
    }
    assert_eq!(
        partitions(synced.path(), "swaps"),
        partitions(direct.path(), "swaps")
    );
}
