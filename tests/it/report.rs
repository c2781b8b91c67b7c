//! The daily report's pipeline on a lake synced from the `tiny` simulator over loopback: its
//! figures against the lake (through the CLI), its page against its files, its screener
//! against the simulator.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use dexlake::lake::{Dataset, Lake};
use dexlake::report::{self, ReportConfig, top_wallet};
use dexlake::sim::Simulator;
use dexlake::sync::{Job, SyncConfig, Syncer};
use serde_json::{Value, json};

use crate::common;

use common::{sim_client as client, tiny_sim};

/// A lake with the swaps and trades of every altchain token of the tiny market, and one
/// profile snapshot.
async fn synced_lake(sim: &Simulator, root: &Path) -> Arc<Lake> {
    let lake = Arc::new(Lake::open(root).expect("lake"));
    let mut jobs = vec![Job::AltProfiles {
        request: serde_json::from_value(json!({
            "options": {"include_metadata": true, "include_market": true,
                        "include_labels": true, "include_metrics": ["1d", "1h"]},
            "limit": 100
        }))
        .unwrap(),
    }];
    for t in &sim.market().catalog().altchain.tokens {
        jobs.push(Job::Swaps {
            token: Some(t.address.clone()),
            wallet: None,
            pool: None,
        });
        jobs.push(Job::Trades {
            token: Some(t.address.clone()),
            wallet: None,
        });
    }
    let syncer = Syncer::new(client(sim), Arc::clone(&lake), SyncConfig::default());
    let report = syncer.run(&jobs).await;
    assert!(!report.any_failed(), "sync failed: {report:?}");
    lake
}

fn dexlake(args: &[&str]) -> Value {
    serde_json::from_str(&common::dexlake_cli(args)).expect("JSON output")
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_shows_what_the_lake_holds() {
    let sim = tiny_sim(11).await;
    let dir = tempfile::tempdir().unwrap();
    let lake = synced_lake(&sim, &dir.path().join("lake")).await;
    let lake_arg = lake.root().to_str().unwrap().to_owned();

    let config = ReportConfig {
        top_tokens: 3,
        ..ReportConfig::default()
    };
    let r = {
        let lake = Arc::clone(&lake);
        let config = config.clone();
        tokio::task::spawn_blocking(move || report::build(&lake, &config))
            .await
            .unwrap()
            .expect("report")
    };
    assert_eq!(r.tokens.len(), 3);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    let swaps = r
        .datasets
        .iter()
        .find(|(d, _)| *d == Dataset::Swaps)
        .map(|(_, n)| *n);
    assert_eq!(swaps, Some(lake.row_count(Dataset::Swaps).unwrap()));

    // Tokens come most traded first, and each chart's last close is the last close of
    // `dexlake ohlcv` over the same period.
    assert!(
        r.tokens
            .windows(2)
            .all(|w| w[0].usd_volume >= w[1].usd_volume)
    );
    let (from, to) = (r.period.from.unwrap(), r.period.to.unwrap());
    for t in &r.tokens {
        let bars = dexlake(&[
            "ohlcv",
            "--lake",
            &lake_arg,
            "--token",
            &t.token_address,
            "--interval",
            "900",
            "--from",
            &rfc3339(from),
            "--to",
            &rfc3339(to),
            "--format",
            "json",
        ]);
        let bars = bars.as_array().expect("rows");
        assert_eq!(bars.len(), t.bars.height(), "{}", t.token_address);
        let last = bars.last().expect("a bar")["close"].as_f64().unwrap();
        assert_eq!(t.last_close(), Some(last), "{}", t.token_address);
        let count: u64 = bars.iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(count, t.events as u64);
    }

    // The leaderboard's best wallet has the total PnL `dexlake pnl` gives it.
    let (wallet, total) = top_wallet(&r.leaderboard).expect("a leaderboard");
    let rows = dexlake(&[
        "pnl", "--lake", &lake_arg, "--wallet", &wallet, "--format", "json",
    ]);
    let rows = rows.as_array().expect("rows");
    assert!(!rows.is_empty());
    let realized: f64 = rows
        .iter()
        .map(|p| p["realized_pnl"].as_f64().unwrap())
        .sum();
    let unrealized: f64 = rows
        .iter()
        .map(|p| p["unrealized_pnl"].as_f64().unwrap())
        .sum();
    let cli_total = realized + unrealized;
    assert!(
        (cli_total - total).abs() <= 1e-9 * total.abs().max(1.0),
        "leaderboard {total} vs dexlake pnl {cli_total}"
    );
    let board = dexlake(&["pnl", "--lake", &lake_arg, "--top", "1", "--format", "json"]);
    assert_eq!(board[0]["wallet_address"], json!(wallet));

    // The screener answers as the simulator does over the same profiles.
    let page = r.screener.as_ref().expect("a screener");
    let remote = client(&sim)
        .search_profiles(&config.screener)
        .await
        .expect("the simulator answers the screener");
    assert_eq!(page.count as i64, remote.count);
    let tokens = |docs: &[Value]| -> Vec<String> {
        docs.iter()
            .map(|d| d["token_address"].as_str().unwrap().to_owned())
            .collect()
    };
    let remote_docs: Vec<Value> = remote
        .data
        .iter()
        .map(|p| serde_json::to_value(p).unwrap())
        .collect();
    assert_eq!(tokens(&page.data), tokens(&remote_docs));

    // The page: every chart it shows is a PNG on disk, drawn from data (not blank), and
    // every figure above is on it.
    let out = dir.path().join("report");
    let index = r.write(&out).expect("written");
    let html = std::fs::read_to_string(&index).unwrap();
    let names = r.chart_names();
    assert_eq!(names.len(), 4, "three token charts and the leaderboard's");
    let shown: HashSet<&str> = html
        .split("src=\"charts/")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect();
    assert_eq!(shown, names.iter().map(String::as_str).collect());
    for name in &names {
        let bytes = std::fs::read(out.join("charts").join(name)).unwrap();
        let mut reader = png::Decoder::new(bytes.as_slice()).read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut rgb).unwrap();
        let colours: HashSet<&[u8]> = rgb[..info.buffer_size()].chunks(3).collect();
        assert!(colours.len() > 10, "{name} has {} colours", colours.len());
    }
    assert!(html.contains(&wallet));
    // ROI and win rate are percentages in the leaderboard and shown as they are.
    let roi = r
        .leaderboard
        .column("roi")
        .unwrap()
        .f64()
        .unwrap()
        .get(0)
        .unwrap();
    assert!(
        html.contains(&format!("{roi:+.2}%")),
        "ROI {roi} on the page"
    );
    let win_rate = r
        .leaderboard
        .column("win_rate")
        .unwrap()
        .f64()
        .unwrap()
        .get(0);
    if let Some(w) = win_rate {
        assert!(
            html.contains(&format!(">{w:.0}%<")),
            "win rate {w} on the page"
        );
    }
    for t in &r.tokens {
        assert!(html.contains(&t.token_address));
    }
    assert!(html.contains(&format!("{} tokens match", page.count)));
    // The "Data" section: a lake synced from the simulator is clean.
    assert!(r.quality.is_clean(), "{:#?}", r.quality.findings);
    assert!(html.contains("<h2>Data</h2>") && html.contains("found nothing"));
    // That lake synced every charted token's swaps over the period.
    assert!(r.coverage.is_empty(), "{:#?}", r.coverage);
    assert!(html.contains("fetched every charted token"));
    assert!(!out.join("index.tmp").exists());

    // The summary names the same figures.
    let summary = r.summary();
    assert!(summary.contains(&r.tokens[0].token_address), "{summary}");
    assert!(summary.contains(&wallet), "{summary}");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_lake_without_events_is_a_clear_error_and_without_profiles_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open(dir.path()).unwrap();
    let err = report::build(&lake, &ReportConfig::default()).unwrap_err();
    assert!(err.to_string().contains("no swaps to report on"), "{err}");

    let sim = tiny_sim(11).await;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let lake = Arc::new(lake);
    let syncer = Syncer::new(client(&sim), Arc::clone(&lake), SyncConfig::default());
    let jobs = [Job::Swaps {
        token: Some(token),
        wallet: None,
        pool: None,
    }];
    assert!(!syncer.run(&jobs).await.any_failed());
    let r = {
        let lake = Arc::clone(&lake);
        tokio::task::spawn_blocking(move || report::build(&lake, &ReportConfig::default()))
            .await
            .unwrap()
            .expect("a report of swaps alone")
    };
    assert!(r.screener.is_none());
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("no altchain token profiles")),
        "{:?}",
        r.notes
    );
    let html = std::fs::read_to_string(r.write(dir.path().join("out")).unwrap()).unwrap();
    assert!(html.contains("no altchain token profiles"));
    let bad = ReportConfig {
        bar_seconds: 0,
        ..ReportConfig::default()
    };
    assert!(report::build(&lake, &bad).is_err());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_shows_the_evm_chains_from_their_price_history() {
    let sim = tiny_sim(12).await;
    let dir = tempfile::tempdir().unwrap();
    let lake = Arc::new(Lake::open(dir.path().join("lake")).expect("lake"));
    let catalog = sim.market().catalog();
    let altchain_token = catalog.altchain.tokens[0].address.clone();
    let evm: Vec<String> = catalog.evm["1"]
        .tokens
        .iter()
        .take(3)
        .map(|t| t.address.clone())
        .collect();
    let jobs = vec![
        Job::Swaps {
            token: Some(altchain_token),
            wallet: None,
            pool: None,
        },
        Job::PriceHistory {
            chain_id: 1,
            tokens: evm.clone(),
            pools: Vec::new(),
            interval: 300,
            from: sim.market().now() - chrono::Duration::days(31),
            to: None,
        },
    ];
    let syncer = Syncer::new(client(&sim), Arc::clone(&lake), SyncConfig::default());
    let synced = syncer.run(&jobs).await;
    assert!(!synced.any_failed(), "sync failed: {synced:?}");
    sim.shutdown().await;

    let config = ReportConfig {
        top_tokens: 2,
        ..ReportConfig::default()
    };
    let r = {
        let lake = Arc::clone(&lake);
        tokio::task::spawn_blocking(move || report::build(&lake, &config))
            .await
            .unwrap()
            .expect("report")
    };
    assert_eq!(r.evm.len(), 1, "one EVM chain");
    let chain = &r.evm[0];
    assert_eq!(chain.chain_id, 1);
    assert_eq!(chain.tokens.len(), 2, "the two most traded of three");
    assert!(
        chain
            .tokens
            .windows(2)
            .all(|w| w[0].usd_volume >= w[1].usd_volume)
    );
    let lake_arg = lake.root().to_str().unwrap().to_owned();
    let (from, to) = (chain.period.from.unwrap(), chain.period.to.unwrap());
    for t in &chain.tokens {
        assert!(evm.contains(&t.token_address));
        // The chart's bars are `dexlake ohlcv --source price-history` over the same period.
        let bars = dexlake(&[
            "ohlcv",
            "--lake",
            &lake_arg,
            "--source",
            "price-history",
            "--chain-id",
            "1",
            "--token",
            &t.token_address,
            "--interval",
            "3600",
            "--from",
            &rfc3339(from),
            "--to",
            &rfc3339(to),
            "--format",
            "json",
        ]);
        let bars = bars.as_array().expect("rows");
        assert_eq!(bars.len(), t.bars.height(), "{}", t.token_address);
        let last = bars.last().expect("a bar")["close"].as_f64().unwrap();
        assert_eq!(t.last_close(), Some(last), "{}", t.token_address);
        let points: u64 = bars.iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(points, t.events as u64, "one count per point");
        let volume: f64 = bars.iter().map(|b| b["volume"].as_f64().unwrap()).sum();
        assert!((volume - t.usd_volume).abs() <= 1e-9 * volume.max(1.0));
    }
    // The price stats are `dexlake price-stats --source price-history` at the period's end.
    let tokens: Vec<&str> = chain
        .tokens
        .iter()
        .map(|t| t.token_address.as_str())
        .collect();
    let stats = dexlake(&[
        "price-stats",
        "--lake",
        &lake_arg,
        "--source",
        "price-history",
        "--chain-id",
        "1",
        "--tokens",
        &tokens.join(","),
        "--now",
        &rfc3339(to),
        "--format",
        "json",
    ]);
    let stats = stats.as_array().expect("rows");
    assert_eq!(stats.len(), chain.price_stats.height());
    for (k, row) in stats.iter().enumerate() {
        let price = chain
            .price_stats
            .column("usd_price")
            .unwrap()
            .f64()
            .unwrap()
            .get(k);
        assert_eq!(row["usd_price"].as_f64(), price);
    }

    // The page shows a chart per EVM token, drawn from data.
    let out = dir.path().join("report");
    let index = r.write(&out).expect("written");
    let html = std::fs::read_to_string(&index).unwrap();
    assert!(html.contains("<h2>EVM chains</h2>") && html.contains("<h3>Chain 1</h3>"));
    let evm_charts: Vec<String> = r
        .chart_names()
        .into_iter()
        .filter(|n| n.starts_with("evm_1_"))
        .collect();
    assert_eq!(evm_charts.len(), 2);
    for name in &evm_charts {
        assert!(html.contains(&format!("src=\"charts/{name}\"")), "{name}");
        let bytes = std::fs::read(out.join("charts").join(name)).unwrap();
        let mut reader = png::Decoder::new(bytes.as_slice()).read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut rgb).unwrap();
        let colours: HashSet<&[u8]> = rgb[..info.buffer_size()].chunks(3).collect();
        assert!(colours.len() > 10, "{name} has {} colours", colours.len());
    }
    for t in &chain.tokens {
        assert!(html.contains(&t.token_address));
    }
    assert!(
        r.summary().contains("EVM chain 1: 2 tokens"),
        "{}",
        r.summary()
    );
}
