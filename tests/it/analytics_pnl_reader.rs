//! The PnL's lake reader (row groups with arrow-rs, names interned per row group) against the
//! frames of the same lake: the same tables for every method and query, in batches of any size,
//! on a lake of many small files whose wallets and tokens repeat across files and row groups.

use std::sync::Arc;

use dexlake::analytics::pnl::{
    self, CostMethod, Mark, PnlConfig, PnlOptions, PnlReport, PnlSource,
};
use dexlake::lake::{Dataset, Lake};
use dexlake::sim::Simulator;
use dexlake::sync::{Job, SyncConfig, Syncer};
use parquet::file::reader::{FileReader, SerializedFileReader};
use polars::prelude::*;

use crate::common;
use crate::common::lake::small_file_options;

async fn synced_lake(sim: &Simulator) -> (tempfile::TempDir, Arc<Lake>, Vec<String>) {
    let catalog = sim.market().catalog();
    let chain = &catalog.altchain;
    let (t0, t1) = (
        chain.tokens[0].address.clone(),
        chain.tokens[1].address.clone(),
    );
    let t2 = chain.tokens[2].address.clone();
    let (w0, w1) = (
        chain.wallets[0].address.clone(),
        chain.wallets[1].address.clone(),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Arc::new(Lake::open_with(dir.path(), small_file_options()).expect("lake"));
    // Every wallet's trades of two tokens, one wallet's trades of every token, and swaps: of
    // one wallet (with no trade in the lake: its ledgers come from swaps) and of a token (the
    // swaps of wallets with trades are left out) and of a token no trade was synced for.
    let jobs = vec![
        Job::Trades {
            token: Some(t0.clone()),
            wallet: None,
        },
        Job::Trades {
            token: Some(t1.clone()),
            wallet: None,
        },
        Job::Trades {
            token: None,
            wallet: Some(w0.clone()),
        },
        Job::Swaps {
            token: None,
            wallet: Some(w1.clone()),
            pool: None,
        },
        Job::Swaps {
            token: Some(t1.clone()),
            wallet: None,
            pool: None,
        },
        Job::Swaps {
            token: Some(t2.clone()),
            wallet: None,
            pool: None,
        },
    ];
    let syncer = Syncer::new(
        common::sim_client_retrying(sim, 5),
        Arc::clone(&lake),
        SyncConfig::default(),
    );
    let report = syncer.run(&jobs).await;
    assert!(!report.any_failed(), "sync failed: {report:?}");
    (dir, lake, vec![t0, t1, w0, w1, t2])
}

/// The report of the frames path: the lake's frames of `options`, grouped from strings.
fn from_frames(lake: &Lake, options: &PnlOptions) -> PnlReport {
    let (trades, swaps) = pnl::lake_frames(lake, options).expect("frames");
    let frames = PnlSource::Frames {
        trades: &trades,
        swaps: Some(&swaps),
    };
    pnl::pnl_report(frames, options).expect("pnl from frames")
}

fn assert_same(a: &PnlReport, b: &PnlReport, what: &str) {
    assert!(
        a.ledgers.equals_missing(&b.ledgers),
        "ledgers, {what}:\n{}\n{}",
        a.ledgers,
        b.ledgers
    );
    assert!(
        a.positions.equals_missing(&b.positions),
        "positions, {what}"
    );
    match (&a.lots, &b.lots) {
        (Some(x), Some(y)) => assert!(x.equals_missing(y), "lots, {what}"),
        (None, None) => {}
        _ => panic!("lots on one side only, {what}"),
    }
}

/// A wallet of the lake's swaps that has no trade (its ledgers come from swaps), other than
/// `except`.
fn swap_only_wallet(lake: &Lake, except: &str) -> String {
    let (trades, swaps) = pnl::lake_frames(lake, &PnlOptions::default()).expect("frames");
    let traders: Vec<String> = trades
        .column("wallet_address")
        .expect("wallet")
        .str()
        .expect("str")
        .iter()
        .map(|w| w.unwrap_or_default().to_owned())
        .collect();
    swaps
        .column("wallet_address")
        .expect("wallet")
        .str()
        .expect("str")
        .iter()
        .flatten()
        .find(|w| !traders.iter().any(|t| t == w) && *w != except)
        .expect("a wallet with swaps only")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lake_reader_gives_the_tables_of_the_frames_for_every_method_and_query() {
    let sim = common::tiny_sim(11).await;
    let (_dir, lake, names) = synced_lake(&sim).await;
    let [t0, t1, w0, w1, t2] = [0, 1, 2, 3, 4].map(|i| names[i].clone());
    // Many files and row groups, so that names repeat across them.
    let files = lake.snapshot().expect("snapshot");
    let trade_files = files.files_of(Dataset::Trades).count();
    let swap_files = files.files_of(Dataset::Swaps).count();
    assert!(
        trade_files >= 3 && swap_files >= 2,
        "{trade_files} trade files, {swap_files} swap files"
    );
    let swapper = swap_only_wallet(&lake, &w1);
    let query = |wallets: Option<Vec<&String>>, token: Option<&String>| PnlOptions {
        wallets: wallets.map(|w| w.into_iter().cloned().collect()),
        token: token.cloned(),
        ..PnlOptions::default()
    };
    let queries = [
        query(None, None),
        query(None, Some(&t0)),
        query(None, Some(&t1)),
        query(Some(vec![&w0]), None),
        query(Some(vec![&w1]), None),
        query(Some(vec![&w0, &w1, &swapper]), None),
        query(Some(vec![&swapper]), None),
        query(Some(vec![&swapper]), Some(&t2)),
        query(Some(vec![&w0]), Some(&t1)),
    ];
    for method in CostMethod::ALL {
        for mark in [Mark::Latest, Mark::Price(2.5)] {
            let config = PnlConfig {
                method,
                mark,
                lots: true,
                ..PnlConfig::default()
            };
            for q in &queries {
                let what = format!("{method:?} {mark:?} {q:?}");
                let q = &PnlOptions {
                    config,
                    ..q.clone()
                };
                let lake_side = pnl::pnl_report(PnlSource::Lake(&lake), q).expect("pnl");
                assert!(lake_side.ledgers.height() > 0, "no ledger, {what}");
                assert_same(&lake_side, &from_frames(&lake, q), &what);
            }
        }
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_wallet_in_batches_equals_the_whole_for_every_method() {
    let sim = common::tiny_sim(12).await;
    let (_dir, lake, _) = synced_lake(&sim).await;
    for method in CostMethod::ALL {
        let options = PnlOptions {
            config: PnlConfig {
                method,
                lots: true,
                ..PnlConfig::default()
            },
            ..PnlOptions::default()
        };
        let lake = PnlSource::Lake(&lake);
        let whole = pnl::pnl_report(lake, &options).expect("whole");
        let n = whole.ledgers.height();
        assert!(n > 20, "{n} ledgers");
        for per_batch in [1, 7, n - 1, n, n + 5] {
            let mut parts: Vec<PnlReport> = Vec::new();
            pnl::pnl_report_batches(lake, &options, per_batch, |p| {
                parts.push(p);
                Ok(())
            })
            .expect("batches");
            assert_eq!(
                parts.len(),
                n.div_ceil(per_batch),
                "{method:?}, {per_batch} per batch"
            );
            let stack = |f: fn(&PnlReport) -> DataFrame| {
                let mut all = f(&parts[0]);
                for p in &parts[1..] {
                    all.vstack_mut(&f(p)).expect("stack");
                }
                all
            };
            let what = format!("{method:?}, {per_batch} per batch");
            assert!(
                stack(|p| p.ledgers.clone()).equals_missing(&whole.ledgers),
                "ledgers, {what}"
            );
            assert!(
                stack(|p| p.positions.clone()).equals_missing(&whole.positions),
                "positions, {what}"
            );
            assert!(
                stack(|p| p.lots.clone().expect("lots"))
                    .equals_missing(whole.lots.as_ref().expect("lots")),
                "lots, {what}"
            );
        }
        // Without the positions table: the same ledgers, no position built, one batch.
        let ledgers_only = PnlOptions {
            positions: false,
            ..options.clone()
        };
        let report = pnl::pnl_report(lake, &ledgers_only).expect("ledgers only");
        assert!(report.ledgers.equals_missing(&whole.ledgers), "{method:?}");
        assert_eq!(report.positions.height(), 0);
        assert_eq!(report.positions.width(), whole.positions.width());
        let mut ledgers: Option<DataFrame> = None;
        pnl::pnl_report_batches(lake, &ledgers_only, pnl::REPORT_CHUNK, |p| {
            assert_eq!(p.positions.height(), 0);
            match ledgers.as_mut() {
                None => ledgers = Some(p.ledgers),
                Some(all) => drop(all.vstack_mut(&p.ledgers).expect("stack")),
            }
            Ok(())
        })
        .expect("ledger batches");
        assert!(
            ledgers.expect("ledgers").equals_missing(&whole.ledgers),
            "{method:?}"
        );
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lake_read_in_parts_of_wallets_gives_the_tables_of_one_read() {
    let sim = common::tiny_sim(11).await;
    let (_dir, lake, names) = synced_lake(&sim).await;
    let [_, t1, w0, w1, _] = [0, 1, 2, 3, 4].map(|i| names[i].clone());
    let swapper = swap_only_wallet(&lake, &w1);
    let source = PnlSource::Lake(&lake);
    let queries = [
        PnlOptions::default(),
        PnlOptions {
            token: Some(t1),
            ..PnlOptions::default()
        },
        PnlOptions {
            wallets: Some(vec![w0, w1, swapper]),
            ..PnlOptions::default()
        },
    ];
    for method in CostMethod::ALL {
        for q in &queries {
            let options = PnlOptions {
                config: PnlConfig {
                    method,
                    lots: true,
                    ..PnlConfig::default()
                },
                ..q.clone()
            };
            let whole = pnl::pnl_report(source, &options).expect("whole");
            let events = pnl::ledger_set(source, &options).expect("set").events.len();
            let wallets = whole
                .ledgers
                .column("wallet_address")
                .expect("wallets")
                .n_unique()
                .expect("unique");
            assert!(wallets > 1, "{wallets} wallets");
            // 0: a part per wallet (with the first method only: a pass per wallet is slow in
            // a debug build); then parts of a few wallets; then one part.
            let sizes = match method == CostMethod::ALL[0] {
                true => vec![0, 1, 37, events / 3, events],
                false => vec![37, events / 3, events],
            };
            for at_once in sizes {
                let what = format!("{method:?}, {q:?}, {at_once} events at once");
                let parted = PnlOptions {
                    events_at_once: at_once,
                    ..options.clone()
                };
                let mut parts: Vec<PnlReport> = Vec::new();
                pnl::pnl_report_batches(source, &parted, usize::MAX, |p| {
                    parts.push(p);
                    Ok(())
                })
                .expect("parts");
                match at_once {
                    0 => assert_eq!(parts.len(), wallets, "{what}"),
                    n if n >= events => assert_eq!(parts.len(), 1, "{what}"),
                    _ => assert!(parts.len() > 1, "{what}: {} parts", parts.len()),
                }
                let mut all = parts.remove(0);
                for p in parts {
                    all.ledgers.vstack_mut(&p.ledgers).expect("ledgers");
                    all.positions.vstack_mut(&p.positions).expect("positions");
                    let lots = all.lots.as_mut().expect("lots");
                    lots.vstack_mut(p.lots.as_ref().expect("lots"))
                        .expect("lots");
                }
                assert_same(&all, &whole, &what);
            }
        }
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swaps_and_trades_files_carry_bloom_filters_on_wallets_and_tokens() {
    let sim = common::tiny_sim(13).await;
    let (dir, lake, names) = synced_lake(&sim).await;
    let snapshot = lake.snapshot().expect("snapshot");
    for (dataset, columns) in [
        (Dataset::Trades, vec!["wallet_address", "token_address"]),
        (
            Dataset::Swaps,
            vec!["wallet_address", "token_address_in", "token_address_out"],
        ),
    ] {
        for (path, _) in snapshot.files_of(dataset) {
            let file = std::fs::File::open(dir.path().join(path)).expect("open");
            let options = parquet::file::serialized_reader::ReadOptionsBuilder::new()
                .with_reader_properties(
                    parquet::file::properties::ReaderProperties::builder()
                        .set_read_bloom_filter(true)
                        .build(),
                )
                .build();
            let reader = SerializedFileReader::new_with_options(file, options).expect("parquet");
            for g in 0..reader.num_row_groups() {
                let rg = reader.get_row_group(g).expect("row group");
                let meta = rg.metadata();
                for c in &columns {
                    let i = (0..meta.num_columns())
                        .find(|&i| meta.column(i).column_path().parts() == [*c])
                        .expect("column");
                    let bloom = rg.get_column_bloom_filter(i).expect("a bloom filter");
                    // The chunk's smallest and largest values are in the filter.
                    let stats = meta.column(i).statistics().expect("statistics");
                    for v in [stats.min_bytes_opt(), stats.max_bytes_opt()] {
                        assert!(bloom.check(v.expect("a value")), "{path} {c}");
                    }
                }
            }
        }
    }
    // A wallet absent from the lake is absent from (almost) every filter: a query for it
    // reads nothing and gives no ledger.
    let query = PnlOptions::of_wallet(&format!("{}x", names[2]));
    let report = pnl::pnl_report(PnlSource::Lake(&lake), &query).expect("pnl");
    assert_eq!(report.ledgers.height(), 0);
    sim.shutdown().await;
}

/// A wallet's equity curve and metrics read from the lake (its row groups, then one pass for
/// its tokens' closes) equal those of the lake's frames: for a wallet trading many tokens, a
/// wallet with swaps only, a trader of one token, and a wallet the lake does not hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wallets_performance_from_the_lake_equals_the_frames_path() {
    let sim = common::tiny_sim(11).await;
    let (_dir, lake, names) = synced_lake(&sim).await;
    let [t0, _, w0, w1, _] = [0, 1, 2, 3, 4].map(|i| names[i].clone());
    let swapper = swap_only_wallet(&lake, &w1);
    let (trades, swaps) = pnl::lake_frames(&lake, &PnlOptions::default()).expect("frames");
    let trader = trades
        .clone()
        .lazy()
        .filter(col("token_address").eq(lit(t0.as_str())))
        .filter(col("wallet_address").neq(lit(w0.as_str())))
        .select([col("wallet_address")])
        .collect()
        .expect("a trader of the token")
        .column("wallet_address")
        .expect("wallet")
        .str()
        .expect("str")
        .get(0)
        .expect("a trader")
        .to_owned();
    let absent = "NotAWalletOfThisLake".to_owned();
    for method in [CostMethod::Fifo, CostMethod::AverageCost] {
        let config = PnlConfig {
            method,
            ..PnlConfig::default()
        };
        for period_seconds in [3_600, 86_400] {
            let equity = pnl::EquityConfig {
                period_seconds,
                ..pnl::EquityConfig::default()
            };
            for wallet in [&w0, &w1, &swapper, &trader, &absent] {
                let what = format!("{method:?}, {period_seconds} s, {wallet}");
                let options = PnlOptions {
                    config,
                    equity,
                    ..PnlOptions::of_wallet(wallet)
                };
                let lake_side = pnl::wallet_performance(PnlSource::Lake(&lake), &options)
                    .expect("from the lake");
                let frames = PnlSource::Frames {
                    trades: &trades,
                    swaps: Some(&swaps),
                };
                let frames = pnl::wallet_performance(frames, &options).expect("from frames");
                if wallet != &absent {
                    assert!(lake_side.curve.height() > 1, "{what}: {}", lake_side.curve);
                }
                assert!(
                    lake_side.curve.equals_missing(&frames.curve),
                    "curve, {what}:\n{}\n{}",
                    lake_side.curve,
                    frames.curve
                );
                assert!(
                    lake_side.metrics.equals_missing(&frames.metrics),
                    "metrics, {what}:\n{}\n{}",
                    lake_side.metrics,
                    frames.metrics
                );
            }
        }
    }
    sim.shutdown().await;
}
