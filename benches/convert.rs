//! Conversion and encoding throughput: rows per second from decoded response pages to encoded
//! Parquet bytes (models → RecordBatch → sorted, zstd Parquet), per dataset family, plus a
//! whole commit into a lake on disk. Run with `cargo bench --bench convert`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dexlake::lake::sample::Samples;
use dexlake::lake::test_support::{DEFAULT_ROW_GROUP_ROWS, encode_records};
use dexlake::lake::{Dataset, Lake, LakeOptions, convert};

/// Full sizes under `cargo bench`; small ones when `cargo test --all-targets` runs each
/// benchmark once as a smoke test (criterion passes `--bench` only in the former case).
fn scale(full: usize) -> usize {
    if std::env::args().any(|a| a == "--bench") {
        full
    } else {
        full / 50
    }
}

fn pages_to_parquet(c: &mut Criterion) {
    let rows = scale(100_000);
    let samples = Samples::generate(42, rows);
    let mut group = c.benchmark_group("pages_to_parquet");
    group.sample_size(10);

    group.throughput(Throughput::Elements(samples.swaps.len() as u64));
    group.bench_function(BenchmarkId::new("swaps", rows), |b| {
        b.iter(|| {
            let batch = convert::swaps_to_batch(black_box(&samples.swaps)).expect("convert");
            encode_records(Dataset::Swaps, &batch, DEFAULT_ROW_GROUP_ROWS, 3).expect("encode")
        })
    });

    group.throughput(Throughput::Elements(samples.trades.len() as u64));
    group.bench_function(BenchmarkId::new("trades", rows), |b| {
        b.iter(|| {
            let batch = convert::trades_to_batch(black_box(&samples.trades)).expect("convert");
            encode_records(Dataset::Trades, &batch, DEFAULT_ROW_GROUP_ROWS, 3).expect("encode")
        })
    });

    // Profiles are wide (six windows of 46 metrics): fewer rows, many columns.
    let profiles: Vec<_> = (0..scale(2_000))
        .map(|i| {
            let mut p = samples.alt_profiles[i % samples.alt_profiles.len()].clone();
            p.token_address = format!("T{i:043}");
            p
        })
        .collect();
    group.throughput(Throughput::Elements(profiles.len() as u64));
    group.bench_function(BenchmarkId::new("alt_profiles", profiles.len()), |b| {
        b.iter(|| {
            let batch = convert::alt_profiles_to_batch(black_box(&profiles), samples.fetched_at)
                .expect("convert");
            encode_records(Dataset::TokenProfiles, &batch, DEFAULT_ROW_GROUP_ROWS, 3)
                .expect("encode")
        })
    });
    group.finish();
}

fn commit_to_lake(c: &mut Criterion) {
    let rows = scale(100_000);
    let samples = Samples::generate(43, rows);
    let mut group = c.benchmark_group("commit");
    group.sample_size(10);
    group.throughput(Throughput::Elements(samples.swaps.len() as u64));
    group.bench_function(BenchmarkId::new("swaps_new_lake", rows), |b| {
        b.iter_batched(
            || tempfile::tempdir().expect("temp dir"),
            |dir| {
                let lake = Lake::open(dir.path()).expect("open");
                let mut tx = lake.transaction().expect("tx");
                tx.write(
                    Dataset::Swaps,
                    convert::swaps_to_batch(&samples.swaps).expect("convert"),
                )
                .expect("write");
                tx.commit().expect("commit");
                dir
            },
            criterion::BatchSize::PerIteration,
        )
    });
    group.finish();
}

/// The row-group size trade-off: a one-hour time-range query (which prunes row groups by their
/// `block_time` statistics) against a full scan of four columns, on one million swaps over
/// three days, for several row-group sizes. File sizes are printed to stderr.
fn row_group_size(c: &mut Criterion) {
    use polars::prelude::*;

    let n = scale(1_000_000);
    let samples = Samples::generate(44, n);
    let batch = convert::swaps_to_batch(&samples.swaps).expect("convert");
    let lo = samples
        .swaps
        .iter()
        .map(|s| s.block_time)
        .min()
        .expect("rows")
        + chrono::Duration::hours(30);
    let hi = lo + chrono::Duration::hours(1);
    let as_lit = |t: chrono::DateTime<chrono::Utc>| {
        lit(t.timestamp_micros()).cast(DataType::Datetime(
            TimeUnit::Microseconds,
            Some(polars::prelude::TimeZone::UTC),
        ))
    };
    let mut group = c.benchmark_group("row_group_size");
    group.sample_size(10);
    let mut dirs = Vec::new();
    for rows in [8_192usize, 32_768, 65_536, 131_072, 524_288] {
        let dir = tempfile::tempdir().expect("temp dir");
        let lake = Lake::open_with(
            dir.path(),
            LakeOptions {
                row_group_rows: rows,
                ..LakeOptions::default()
            },
        )
        .expect("open");
        let mut tx = lake.transaction().expect("tx");
        tx.write(Dataset::Swaps, batch.clone()).expect("write");
        tx.commit().expect("commit");
        let bytes: u64 = lake
            .manifest()
            .expect("manifest")
            .files
            .values()
            .map(|f| f.bytes)
            .sum();
        eprintln!("row_group_rows {rows}: {bytes} bytes for {n} swaps");
        group.bench_function(BenchmarkId::new("one_hour_query", rows), |b| {
            b.iter(|| {
                lake.scan(Dataset::Swaps)
                    .expect("scan")
                    .filter(
                        col("block_time")
                            .gt_eq(as_lit(lo))
                            .and(col("block_time").lt(as_lit(hi))),
                    )
                    .select([col("id"), col("usd_amount_in")])
                    .collect()
                    .expect("collect")
            })
        });
        group.bench_function(BenchmarkId::new("scan_4_columns", rows), |b| {
            b.iter(|| {
                lake.scan(Dataset::Swaps)
                    .expect("scan")
                    .select([
                        col("block_time"),
                        col("token_address_out"),
                        col("token_price_out"),
                        col("usd_amount_out"),
                    ])
                    .collect()
                    .expect("collect")
            })
        });
        dirs.push(dir);
    }
    group.finish();
}

criterion_group!(benches, pages_to_parquet, commit_to_lake, row_group_size);
criterion_main!(benches);
