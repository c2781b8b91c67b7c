//! Wallet PnL throughput in trades per second over a synthetic market: 20,000 wallets trading
//! 200 tokens (about 60,000 ledgers), rows in time order as the lake's files hold them.
//! `ledgers/*` runs the cost-basis methods over ledgers already grouped (the ledger pass);
//! `frame/fifo` is the whole computation from an in-memory trades frame: reading the columns,
//! grouping by (wallet, token), event order, the ledger pass and the output tables.
//! Run with `cargo bench --bench pnl`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dexlake::analytics::pnl::{self, CostMethod, PnlConfig, PnlOptions, PnlSource};
use polars::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Full sizes under `cargo bench`; small ones when `cargo test --all-targets` runs each
/// benchmark once as a smoke test (criterion passes `--bench` only in the former case).
fn scale(full: usize) -> usize {
    if std::env::args().any(|a| a == "--bench") {
        full
    } else {
        full / 100
    }
}

/// A trades frame of `n` trades: wallets pick a token among a few favourites, buy more often
/// when they hold nothing, and sell part or all of what they hold; a few sells exceed it.
fn trades(n: usize) -> DataFrame {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let (wallets, tokens) = (20_000usize, 200usize);
    let wallet_names: Vec<String> = (0..wallets).map(|w| format!("W{w:043}")).collect();
    let token_names: Vec<String> = (0..tokens).map(|t| format!("T{t:043}")).collect();
    let mut held = std::collections::HashMap::<(usize, usize), f64>::new();
    let mut price: Vec<f64> = (0..tokens).map(|_| rng.random_range(0.01..10.0)).collect();
    let (mut w_col, mut t_col, mut d_col) = (Vec::new(), Vec::new(), Vec::new());
    let (mut q_col, mut u_col, mut p_col) = (Vec::new(), Vec::new(), Vec::new());
    let (mut time_col, mut slot_col, mut id_col) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let w = rng.random_range(0..wallets);
        let t = (w * 7 + rng.random_range(0..3usize) * 31) % tokens;
        price[t] *= 1.0 + rng.random_range(-0.02..0.02);
        let h = held.entry((w, t)).or_insert(0.0);
        let sell = *h > 0.0 && rng.random_bool(0.45) || rng.random_bool(0.01);
        let q = if sell {
            if rng.random_bool(0.3) {
                h.max(1.0)
            } else {
                (*h * rng.random_range(0.1..0.9)).max(0.5)
            }
        } else {
            rng.random_range(1.0..1_000.0)
        };
        *h = if sell { (*h - q).max(0.0) } else { *h + q };
        w_col.push(wallet_names[w].as_str());
        t_col.push(token_names[t].as_str());
        d_col.push(if sell { "sell" } else { "buy" });
        q_col.push(q);
        u_col.push(q * price[t]);
        p_col.push(price[t]);
        time_col.push(1_700_000_000_000_000i64 + i as i64 * 400_000);
        slot_col.push(300_000_000 + i as i64);
        id_col.push(i as i64 + 1);
    }
    DataFrame::new(
        n,
        vec![
            Column::new("wallet_address".into(), w_col),
            Column::new("token_address".into(), t_col),
            Column::new("direction".into(), d_col),
            Column::new("token_amount".into(), q_col),
            Column::new("usd_amount".into(), u_col),
            Column::new("token_price".into(), p_col),
            Column::new("block_time".into(), time_col),
            Column::new("block_slot".into(), slot_col),
            Column::new("id".into(), id_col),
        ],
    )
    .expect("bench frame")
}

/// A digest of every value of a frame (floats by their bits), with its shape.
fn digest(df: &DataFrame) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for c in df.columns() {
        c.name().as_str().hash(&mut h);
        let s = c.as_materialized_series();
        match s.dtype() {
            DataType::Float64 => {
                for v in s.f64().expect("f64").iter() {
                    v.map(f64::to_bits).hash(&mut h);
                }
            }
            DataType::Datetime(_, _) | DataType::Int64 => {
                let s = s.cast(&DataType::Int64).expect("i64");
                for v in s.i64().expect("i64").iter() {
                    v.hash(&mut h);
                }
            }
            _ => {
                let s = s.cast(&DataType::String).expect("str");
                for v in s.str().expect("str").iter() {
                    v.hash(&mut h);
                }
            }
        }
    }
    format!("{}x{} {:016x}", df.height(), df.width(), h.finish())
}

/// With `PNL_DUMP` set, prints digests of the reports of the bench frame (in time order and
/// shuffled) for every method with the lots table, filtered queries and the leaderboard, to
/// compare two builds' results.
fn dump(df: &DataFrame) {
    use rand::seq::SliceRandom;
    let mut idx: Vec<IdxSize> = (0..df.height() as IdxSize).collect();
    idx.shuffle(&mut ChaCha8Rng::seed_from_u64(7));
    let shuffled = df.take(&IdxCa::from_vec("i".into(), idx)).expect("take");
    let wallet = |w: usize| format!("W{w:043}");
    let queries = [
        PnlOptions::default(),
        PnlOptions {
            wallets: Some(vec![wallet(3), wallet(17_777), "nobody".into()]),
            ..PnlOptions::default()
        },
        PnlOptions {
            token: Some(format!("T{:043}", 21)),
            ..PnlOptions::default()
        },
        PnlOptions {
            wallets: Some(vec![wallet(3), wallet(10), wallet(5_000)]),
            token: Some(format!("T{:043}", 21)),
            ..PnlOptions::default()
        },
    ];
    for (name, frame) in [("ordered", df), ("shuffled", &shuffled)] {
        let frame = PnlSource::Frames {
            trades: frame,
            swaps: None,
        };
        for method in CostMethod::ALL {
            let config = PnlConfig {
                method,
                lots: true,
                ..PnlConfig::default()
            };
            for (q, query) in queries.iter().enumerate() {
                let query = PnlOptions {
                    config,
                    ..query.clone()
                };
                let r = pnl::pnl_report(frame, &query).expect("pnl");
                println!(
                    "{name} {method} q{q}: ledgers {} positions {} lots {}",
                    digest(&r.ledgers),
                    digest(&r.positions),
                    digest(r.lots.as_ref().expect("lots"))
                );
            }
            let options = PnlOptions {
                config,
                ..PnlOptions::default()
            };
            let top = pnl::leaderboard(frame, &options, 1_000).expect("top");
            println!("{name} {method} leaderboard {}", digest(&top));
        }
    }
}

fn pnl_throughput(c: &mut Criterion) {
    let n = scale(2_000_000);
    let df = trades(n);
    if std::env::var_os("PNL_DUMP").is_some() {
        dump(&df);
        return;
    }
    let frame = PnlSource::Frames {
        trades: &df,
        swaps: None,
    };
    let set = pnl::ledger_set(frame, &PnlOptions::default()).expect("ledgers");
    let mut group = c.benchmark_group("pnl");
    group.sample_size(10);
    group.throughput(Throughput::Elements(n as u64));
    for method in CostMethod::ALL {
        let config = PnlConfig {
            method,
            ..PnlConfig::default()
        };
        group.bench_function(BenchmarkId::new("ledgers", method), |b| {
            b.iter(|| set.run(black_box(&config)).expect("run"))
        });
    }
    let options = PnlOptions::default();
    group.bench_function(BenchmarkId::new("frame", "fifo"), |b| {
        b.iter(|| pnl::pnl_report(black_box(frame), &options).expect("pnl"))
    });
    group.finish();
}

criterion_group!(benches, pnl_throughput);
criterion_main!(benches);
