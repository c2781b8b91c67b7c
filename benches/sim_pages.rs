//! Page serving of the simulator over loopback HTTP: requests per second for 100-item pages of
//! swaps and trades, one request at a time and 16 in flight, on the `small` market.
//!
//! Run with `cargo bench --bench sim_pages`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dexlake::sim::{DEMO_KEY, Scale, SimConfig, Simulator};
use futures::future::join_all;

const SWAPS: &str = "/v1/altchain/dex/swaps/get-swaps";
const TRADES: &str = "/v1/altchain/dex/trades/get-trades";
const IN_FLIGHT: usize = 16;

fn pages(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts");
    let sim = runtime
        .block_on(Simulator::start(SimConfig {
            seed: 1,
            scale: Scale::Small,
            ..SimConfig::default()
        }))
        .expect("the simulator starts");
    let catalog = sim.market().catalog();
    let token = catalog.altchain.tokens[0].address.clone();
    let wallet = catalog.altchain.wallets[0].address.clone();
    let client = reqwest::Client::new();

    // A cursor in the middle of the token's history, so that pages are served by keyset
    // search rather than from the newest end only.
    let middle_cursor: String = runtime.block_on(async {
        let mut body = serde_json::json!({"token": token, "limit": 100});
        let mut cursor = String::new();
        for _ in 0..20 {
            let page: serde_json::Value = client
                .post(format!("{}{SWAPS}", sim.base_url()))
                .header("x-api-key", DEMO_KEY)
                .json(&body)
                .send()
                .await
                .expect("the page is served")
                .json()
                .await
                .expect("the page is JSON");
            cursor = page["cursor"].as_str().expect("a next page").to_owned();
            body["cursor"] = serde_json::json!(cursor);
        }
        cursor
    });

    let cases = [
        (
            "swaps_token_first_page",
            SWAPS,
            serde_json::json!({"token": token, "limit": 100}),
        ),
        (
            "swaps_token_middle_page",
            SWAPS,
            serde_json::json!({"token": token, "limit": 100, "cursor": middle_cursor}),
        ),
        (
            "trades_wallet_first_page",
            TRADES,
            serde_json::json!({"wallet": wallet, "limit": 100}),
        ),
    ];

    let mut group = c.benchmark_group("sim_pages");
    for (name, path, body) in &cases {
        let url = format!("{}{path}", sim.base_url());
        let body = serde_json::to_vec(body).expect("the body serialises");
        let send = |client: &reqwest::Client| {
            let request = client
                .post(&url)
                .header("x-api-key", DEMO_KEY)
                .header("content-type", "application/json")
                .body(body.clone());
            async move {
                let response = request.send().await.expect("the page is served");
                assert!(response.status().is_success());
                response.bytes().await.expect("the body is read")
            }
        };
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("{name}/sequential"), |b| {
            b.iter(|| runtime.block_on(async { black_box(send(&client).await) }))
        });
        group.throughput(Throughput::Elements(IN_FLIGHT as u64));
        group.bench_function(format!("{name}/in_flight_{IN_FLIGHT}"), |b| {
            b.iter(|| {
                runtime.block_on(async {
                    black_box(join_all((0..IN_FLIGHT).map(|_| send(&client))).await)
                })
            })
        });
    }
    group.finish();
    runtime.block_on(sim.shutdown());
}

criterion_group!(benches, pages);
criterion_main!(benches);
