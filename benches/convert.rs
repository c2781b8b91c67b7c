//! Conversion and encoding throughput: rows per second from decoded response pages to encoded
//! Parquet bytes (models → RecordBatch → sorted, zstd Parquet), per dataset family, plus a
//! whole commit into a lake on disk. Run with `cargo bench --bench convert`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dexlake::lake::sample::Samples;
use dexlake::lake::writer::{DEFAULT_ROW_GROUP_ROWS, encode_records};
use dexlake::lake::{Dataset, Lake, convert};

const ROWS: usize = 100_000;

fn pages_to_parquet(c: &mut Criterion) {
    let samples = Samples::generate(42, ROWS);
    let mut group = c.benchmark_group("pages_to_parquet");
    group.sample_size(10);

    group.throughput(Throughput::Elements(samples.swaps.len() as u64));
    group.bench_function(BenchmarkId::new("swaps", ROWS), |b| {
        b.iter(|| {
            let batch = convert::swaps_to_batch(black_box(&samples.swaps)).expect("convert");
            encode_records(Dataset::Swaps, &batch, DEFAULT_ROW_GROUP_ROWS, 3).expect("encode")
        })
    });

    group.throughput(Throughput::Elements(samples.trades.len() as u64));
    group.bench_function(BenchmarkId::new("trades", ROWS), |b| {
        b.iter(|| {
            let batch = convert::trades_to_batch(black_box(&samples.trades)).expect("convert");
            encode_records(Dataset::Trades, &batch, DEFAULT_ROW_GROUP_ROWS, 3).expect("encode")
        })
    });

    // Profiles are wide (six windows of 46 metrics): fewer rows, many columns.
    let profiles: Vec<_> = (0..2_000)
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
    let samples = Samples::generate(43, ROWS);
    let mut group = c.benchmark_group("commit");
    group.sample_size(10);
    group.throughput(Throughput::Elements(samples.swaps.len() as u64));
    group.bench_function(BenchmarkId::new("swaps_new_lake", ROWS), |b| {
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

criterion_group!(benches, pages_to_parquet, commit_to_lake);
criterion_main!(benches);
