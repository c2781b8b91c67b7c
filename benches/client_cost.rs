//! The client's own cost per swap, on the simulator's JSON: a page's bytes decoded into the
//! service's models (the client's decode, with owned text and, as a sync reads swaps, with
//! text shared with the page's bytes), the models converted into an Arrow batch (what a sync
//! job hands to the commit buffer), and the batches of a commit sorted and encoded into
//! zstd Parquet bytes (what a commit writes); against serde_json's parse of the same bytes into
//! a `serde_json::Value`, the bound no decode of the JSON beats by much.
//!
//! The pages are fetched once from the simulator (`small` market, seed 1) over loopback: the
//! newest pages of swaps of its tokens in catalog order, 100 swaps each, as a sync asks for them.
//! Throughput counts swaps. Run with `cargo bench --bench client_cost`.

use std::hint::black_box;

use arrow_array::RecordBatch;
use arrow_select::concat::concat_batches;
use bytes::Bytes;
use bytestring::ByteString;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dexlake::api::models::{Page, Swap};
use dexlake::lake::test_support::{DEFAULT_ROW_GROUP_ROWS, encode_records};
use dexlake::lake::{Dataset, convert};
use dexlake::sim::{DEMO_KEY, Scale, SimConfig, Simulator};

const SWAPS: &str = "/v1/altchain/dex/swaps/get-swaps";

/// Pages of 100 swaps fetched: under `cargo bench` a commit's worth (100 pages); a few when
/// `cargo test --all-targets` runs each benchmark once as a smoke test.
fn pages_wanted() -> usize {
    if std::env::args().any(|a| a == "--bench") {
        100
    } else {
        4
    }
}

/// The raw bytes of the first `n` pages of swaps, newest first, of the market's tokens in
/// catalog order (each token's pages followed by cursor until it has no more).
fn fetch_pages(n: usize) -> Vec<Bytes> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts");
    runtime.block_on(async {
        let sim = Simulator::start(SimConfig {
            seed: 1,
            scale: Scale::Small,
            ..SimConfig::default()
        })
        .await
        .expect("the simulator starts");
        let client = reqwest::Client::new();
        let mut pages = Vec::with_capacity(n);
        for token in sim.market().catalog().altchain.tokens {
            let mut body = serde_json::json!({"token": token.address, "limit": 100});
            while pages.len() < n {
                let bytes = client
                    .post(format!("{}{SWAPS}", sim.base_url()))
                    .header("x-api-key", DEMO_KEY)
                    .json(&body)
                    .send()
                    .await
                    .expect("the page is served")
                    .bytes()
                    .await
                    .expect("the page's bytes");
                let page = decode(&bytes);
                if !page.data.is_empty() {
                    pages.push(bytes);
                }
                match page.next_cursor() {
                    Some(c) => body["cursor"] = serde_json::json!(c),
                    None => break,
                }
            }
            if pages.len() == n {
                break;
            }
        }
        pages
    })
}

/// The client's decode of a page.
fn decode(bytes: &[u8]) -> Page<Swap> {
    dexlake::api::client::decode_body(bytes).expect("a page of swaps")
}

/// A sync's decode of a page: the swaps' text shares the page's bytes.
fn decode_shared(bytes: &Bytes) -> Page<Swap<ByteString>> {
    dexlake::api::client::decode_page_shared(bytes).expect("a page of swaps")
}

/// A page's swaps as the Arrow batch a job hands off.
fn to_batch(bytes: &Bytes) -> RecordBatch {
    convert::swaps_to_batch(&decode_shared(bytes).data).expect("convert")
}

fn client_cost(c: &mut Criterion) {
    let pages = fetch_pages(pages_wanted());
    let swaps: usize = pages.iter().map(|p| decode(p).data.len()).sum();
    let bytes: usize = pages.iter().map(Bytes::len).sum();
    assert!(swaps > 0, "the simulator served swaps");
    eprintln!(
        "client_cost: {} pages, {swaps} swaps, {bytes} bytes of JSON ({} bytes a swap)",
        pages.len(),
        bytes / swaps
    );

    let mut group = c.benchmark_group("client_cost_per_swap");
    group.sample_size(10);
    group.throughput(Throughput::Elements(swaps as u64));

    // The bound: serde_json's own parse of the same bytes, into a generic value.
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            for p in &pages {
                black_box(serde_json::from_slice::<serde_json::Value>(black_box(p)).expect("JSON"));
            }
        })
    });
    group.bench_function("json_to_models", |b| {
        b.iter(|| {
            for p in &pages {
                black_box(decode(black_box(p)));
            }
        })
    });
    group.bench_function("json_to_shared_models", |b| {
        b.iter(|| {
            for p in &pages {
                black_box(decode_shared(black_box(p)));
            }
        })
    });
    group.bench_function("json_to_arrow", |b| {
        b.iter(|| {
            for p in &pages {
                black_box(to_batch(black_box(p)));
            }
        })
    });
    // The whole path: every page to a batch, the commit's batches concatenated, sorted and
    // encoded as one file (zstd level 3, the lake's row groups and bloom filters).
    group.bench_function("json_to_parquet", |b| {
        b.iter(|| {
            let batches: Vec<RecordBatch> = pages.iter().map(|p| to_batch(black_box(p))).collect();
            let all = concat_batches(&batches[0].schema(), &batches).expect("concat");
            black_box(
                encode_records(Dataset::Swaps, &all, DEFAULT_ROW_GROUP_ROWS, 3).expect("encode"),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, client_cost);
criterion_main!(benches);
