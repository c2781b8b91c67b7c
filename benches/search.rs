//! Local search-profiles on one million synthetic profiles: a filter of three conditions, a sort
//! and a page of 100, over a snapshot already in memory and over the lake's Parquet files. Run
//! with `cargo bench --bench search`.

use std::collections::BTreeMap;
use std::hint::black_box;

use chrono::{TimeZone, Utc};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dexlake::analytics::search::{Snapshot, search, search_lazy, snapshot_frame};
use dexlake::api::models::{AltTokenProfile, Market, TimeWindow, TokenMetadata, WindowMetrics};
use dexlake::api::search::SearchRequest;
use dexlake::lake::convert::alt_profiles_to_batch;
use dexlake::lake::{Dataset, Lake};
use polars::prelude::IntoLazy;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Full sizes under `cargo bench`; small ones when `cargo test --all-targets` runs each
/// benchmark once as a smoke test (criterion passes `--bench` only in the former case).
fn scale(full: usize) -> usize {
    if std::env::args().any(|a| a == "--bench") {
        full
    } else {
        full / 50
    }
}

const LABELS: [&str; 4] = ["trending", "hot", "new", "popular"];

/// A profile with metadata, a market section, labels and one metrics window; some values
/// missing, as in real profiles.
fn profile(rng: &mut ChaCha8Rng, i: usize) -> AltTokenProfile {
    let now = Utc
        .timestamp_opt(1_748_736_000, 0)
        .single()
        .expect("a valid time");
    let maybe = |rng: &mut ChaCha8Rng, x: f64| rng.random_bool(0.9).then_some(x);
    let liquidity = 10f64.powf(rng.random_range(1.0..7.0));
    let volume = 10f64.powf(rng.random_range(0.0..6.0));
    let fdv = liquidity * rng.random_range(1.0..50.0);
    AltTokenProfile {
        updated_at: now,
        synced_at: now,
        token_address: format!("{i:010x}{:016x}", rng.random::<u64>()),
        labels: Some(
            LABELS
                .iter()
                .filter(|_| rng.random_bool(0.25))
                .map(|l| (*l).to_owned())
                .collect(),
        ),
        matched_labels: Some(BTreeMap::new()),
        dynamic_labels: Vec::new(),
        metadata: Some(TokenMetadata {
            name: Some(format!("Token {i}")),
            symbol: Some(format!("T{}", i % 10_000)),
            verified: Some(rng.random_bool(0.3)),
            ..TokenMetadata::default()
        }),
        market: Some(Market {
            liquidity: maybe(rng, liquidity),
            fdv: maybe(rng, fdv),
            holders: Some(rng.random_range(1..100_000)),
            ..Market::default()
        }),
        metrics: BTreeMap::from([(
            TimeWindow::from_wire("1h"),
            WindowMetrics {
                volume: maybe(rng, volume),
                trade_count: Some(rng.random_range(0..5_000)),
                ..WindowMetrics::default()
            },
        )]),
    }
}

/// A lake holding one snapshot of `n` profiles, written in chunks of 100 000.
fn lake_of(n: usize) -> (tempfile::TempDir, Lake) {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Lake::open(dir.path()).expect("lake");
    let fetched_at = Utc
        .timestamp_opt(1_748_736_000, 0)
        .single()
        .expect("a valid time");
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut start = 0;
    while start < n {
        let end = n.min(start + 100_000);
        let profiles: Vec<AltTokenProfile> = (start..end).map(|i| profile(&mut rng, i)).collect();
        let batch = alt_profiles_to_batch(&profiles, fetched_at).expect("batch");
        let mut tx = lake.transaction().expect("transaction");
        tx.write(Dataset::TokenProfiles, batch).expect("stage");
        tx.commit().expect("commit");
        start = end;
    }
    (dir, lake)
}

fn request() -> SearchRequest {
    serde_json::from_value(serde_json::json!({
        "filter": {
            "market.liquidity": {"$gte": 10000},
            "metrics.1h.volume": {"$gt": 1000},
            "labels": {"$eq": "hot"},
        },
        "sort": {"field": "metrics.1h.volume", "direction": "desc"},
        "limit": 100,
    }))
    .expect("a valid request")
}

fn filter_sort_top_100(c: &mut Criterion) {
    let n = scale(1_000_000);
    let (_dir, lake) = lake_of(n);
    let req = request();
    let in_memory = snapshot_frame(&lake, Snapshot::Latest)
        .expect("snapshot")
        .collect()
        .expect("collect");
    let expected = search(&lake, &req, Snapshot::Latest).expect("search");
    assert_eq!(
        search_lazy(in_memory.clone().lazy(), &req).expect("search"),
        expected
    );

    let mut group = c.benchmark_group("search_filter3_sort_top100");
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function(BenchmarkId::new("in_memory", n), |b| {
        b.iter(|| search_lazy(black_box(in_memory.clone().lazy()), &req).expect("search"))
    });
    group.bench_function(BenchmarkId::new("parquet_lake", n), |b| {
        b.iter(|| search(black_box(&lake), &req, Snapshot::Latest).expect("search"))
    });
    group.finish();
}

criterion_group!(benches, filter_sort_top_100);
criterion_main!(benches);
