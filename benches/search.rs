//! Local search-profiles on one million synthetic profiles: a filter of three conditions, a sort
//! and a page of 100, over a snapshot already in memory and over the lake's Parquet files. Run
//! with `cargo bench --bench search`.
//!
//! With `DEXLAKE_SEARCH_COMPARE=DIR` set, the binary is instead the dexlake side of
//! `benches/compare/search.py`: it writes the same lake into `DIR` unless a lake there already
//! holds its profiles (`DEXLAKE_SEARCH_PROFILES`, default one million), then times the request
//! `DEXLAKE_SEARCH_RUNS` times (default 5) in memory and from the lake's files, and prints one
//! JSON object: the seconds of each run and the page's token addresses and count.

use std::collections::BTreeMap;
use std::hint::black_box;

use chrono::{TimeZone, Utc};
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use dexlake::analytics::screener::{ProfileSnapshot, search, search_lazy, snapshot_frame};
use dexlake::api::models::{AltTokenProfile, Market, TimeWindow, TokenMetadata, WindowMetrics};
use dexlake::api::profile_query::SearchRequest;
use dexlake::lake::convert::alt_profiles_to_batch;
use dexlake::lake::{Dataset, Lake};
use dexlake::search::SearchPage;
use polars::prelude::IntoLazy;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

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
    write_profiles(&lake, n);
    (dir, lake)
}

/// Writes one snapshot of `n` profiles into `lake`, in commits of 100 000.
fn write_profiles(lake: &Lake, n: usize) {
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
    let in_memory = snapshot_frame(&lake, ProfileSnapshot::Latest)
        .expect("snapshot")
        .collect()
        .expect("collect");
    let expected = search(&lake, &req, ProfileSnapshot::Latest).expect("search");
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
        b.iter(|| search(black_box(&lake), &req, ProfileSnapshot::Latest).expect("search"))
    });
    group.finish();
}

/// The dexlake side of `benches/compare/search.py` (see the module docs).
fn compare(dir: &str) {
    let var = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .map(|v| v.parse().expect("a count"))
            .unwrap_or(default)
    };
    let n = var("DEXLAKE_SEARCH_PROFILES", 1_000_000);
    let runs = var("DEXLAKE_SEARCH_RUNS", 5);
    let lake = Lake::open(dir).expect("lake");
    let held = lake.row_count(Dataset::TokenProfiles).expect("row count");
    if held == 0 {
        let start = Instant::now();
        write_profiles(&lake, n);
        eprintln!("wrote {n} profiles into {dir} in {:.1?}", start.elapsed());
    } else {
        assert_eq!(held, n as u64, "{dir} holds another number of profiles");
    }
    let req = request();
    let in_memory = snapshot_frame(&lake, ProfileSnapshot::Latest)
        .expect("snapshot")
        .collect()
        .expect("collect");
    let time = |f: &dyn Fn() -> SearchPage| {
        let mut seconds = Vec::with_capacity(runs);
        let mut page = None;
        for _ in 0..runs {
            let start = Instant::now();
            let p = black_box(f());
            seconds.push(start.elapsed().as_secs_f64());
            page = Some(p);
        }
        (seconds, page.expect("at least one run"))
    };
    let (memory_s, memory_page) =
        time(&|| search_lazy(in_memory.clone().lazy(), &req).expect("search"));
    let (lake_s, lake_page) =
        time(&|| search(&lake, &req, ProfileSnapshot::Latest).expect("search"));
    assert_eq!(memory_page, lake_page, "both paths give one answer");
    let addresses: Vec<&Value> = lake_page
        .data
        .iter()
        .filter_map(|d| d.get("token_address"))
        .collect();
    println!(
        "{}",
        serde_json::json!({
            "profiles": n,
            "in_memory_s": memory_s,
            "parquet_s": lake_s,
            "count": lake_page.count,
            "addresses": addresses,
        })
    );
}

criterion_group!(benches, filter_sort_top_100);

fn main() {
    if let Ok(dir) = std::env::var("DEXLAKE_SEARCH_COMPARE") {
        compare(&dir);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
