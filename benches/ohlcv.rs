//! The bar kernel alone, on events already in memory: 1-minute time bars and dollar bars of
//! many tokens (rayon across tokens), and the event-order sort of unsorted rows. No Parquet
//! reading: `benches/compare/` times the whole path on a lake. Run with
//! `cargo bench --bench ohlcv`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dexlake::analytics::ohlcv::{bars_of_events, event_bars_of_events};
use dexlake::analytics::{BarOptions, EventRule, Events, Tick, TimeRange, TokenEvents};

/// Full sizes under `cargo bench`; small ones when `cargo test --all-targets` runs each
/// benchmark once as a smoke test (criterion passes `--bench` only in the former case).
fn scale(full: usize) -> usize {
    if std::env::args().any(|a| a == "--bench") {
        full
    } else {
        full / 100
    }
}

/// `n` events spread over `tokens` tokens and 30 days, as a deterministic random walk.
fn market(n: usize, tokens: usize) -> Vec<TokenEvents> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let per = n / tokens;
    let span = 30 * 86_400 * 1_000_000i64;
    (0..tokens)
        .map(|k| {
            let mut price = 1.0 + k as f64;
            let ticks = (0..per).map(|i| {
                price *= 1.0 + ((next() % 2001) as f64 - 1000.0) * 1e-6;
                let q = 1.0 + (next() % 1000) as f64;
                Tick {
                    time: span / per as i64 * i as i64,
                    slot: i as i64,
                    id: i as i64,
                    price,
                    base: q,
                    usd: price * q,
                    buy: next() % 2 == 0,
                }
            });
            TokenEvents {
                token: format!("T{k:043}"),
                events: Events::from_ticks(ticks),
            }
        })
        .collect()
}

fn kernel(c: &mut Criterion) {
    let n = scale(10_000_000);
    let tokens = market(n, 200);
    let mut group = c.benchmark_group("ohlcv_kernel");
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    let one_minute = BarOptions::with_width(60);
    group.bench_function(BenchmarkId::new("time_bars_1m", n), |b| {
        b.iter(|| {
            bars_of_events(black_box(&tokens), true, TimeRange::default(), &one_minute)
                .expect("bars")
        })
    });
    group.bench_function(BenchmarkId::new("dollar_bars", n), |b| {
        b.iter(|| {
            event_bars_of_events(black_box(&tokens), true, EventRule::UsdVolume(1e6)).expect("bars")
        })
    });
    // Rows read in reverse: the sort into event order is part of the work.
    let reversed: Vec<Tick> = {
        let e = &tokens[0].events;
        (0..e.len()).rev().map(|i| e.tick(i)).collect()
    };
    group.throughput(Throughput::Elements(reversed.len() as u64));
    group.bench_function(BenchmarkId::new("sort_one_token", reversed.len()), |b| {
        b.iter(|| Events::from_ticks(black_box(reversed.iter().copied())))
    });
    group.finish();
}

criterion_group!(benches, kernel);
criterion_main!(benches);
