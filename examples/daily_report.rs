//! The daily report: sync a slice of the market into a lake, compute the analytics on it and
//! write `report/index.html` with PNG charts.
//!
//! ```sh
//! cargo run --release --example daily_report
//! ```
//!
//! With no configuration it starts the built-in simulator (the `small` market, seed 42) on
//! 127.0.0.1 and syncs from it; with `DEXLAKE_API_KEY` set it talks to the real service
//! (`DEXLAKE_BASE_URL` names another address). Either way it:
//!
//! 1. caches the altchain token profiles that traded in the last day (one search, every page);
//! 2. picks the day's most traded tokens from that snapshot, locally, with the search engine;
//! 3. syncs their swaps, trades and 5-minute candles of the last day, and a snapshot of their
//!    prices and price stats;
//! 4. syncs the 5-minute price history of a few tokens of an EVM chain over 31 days (the
//!    simulator's most traded ones, or those of `DEXLAKE_REPORT_EVM_TOKENS`);
//! 5. syncs the trades of the wallets most active in those trades;
//! 6. builds the report ([`dexlake::report`]): candles and volume of the top tokens, price
//!    stats, the wallet PnL leaderboard, a screener answered from the cached profiles, the
//!    EVM tokens' hourly bars and price stats from their price history, and a "Data" section
//!    with the findings of the data check (`dexlake check`).
//!
//! It compacts the lake after every 15 tokens and after the wallets: each job writes a file per
//! day it touched, and thousands of small files would make every later commit and read slow.
//!
//! Every sync is incremental, so a second run fetches only what is new. Ctrl-C stops the sync
//! after committing what it fetched. Settings, all optional:
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `DEXLAKE_LAKE` | `./lake` | the lake folder |
//! | `DEXLAKE_REPORT_DIR` | `./report` | where `index.html` and `charts/` go |
//! | `DEXLAKE_REPORT_TOKENS` | 60 | tokens synced |
//! | `DEXLAKE_REPORT_WALLETS` | 300 | wallets whose trades are synced |
//! | `DEXLAKE_REPORT_CHAIN_ID` | 1 | the EVM chain of the price-history section |
//! | `DEXLAKE_REPORT_EVM_TOKENS` | the simulator's 5 most traded | its tokens, comma-separated (none with the real service unless listed) |

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use chrono::{Duration, Utc};
use dexlake::analytics::screener as local_search;
use dexlake::api::profile_query::SearchRequest;
use dexlake::api::{Client, ClientConfig};
use dexlake::lake::{Dataset, Lake};
use dexlake::prelude::{LakeQuery, ProfileSnapshot};
use dexlake::report::{self, ReportConfig};
use dexlake::sim::{Scale, SimConfig, Simulator};
use dexlake::sync::{CancelToken, Job, ProgressBars, SyncConfig, SyncReport, Syncer};
use polars::prelude::*;

/// Tokens whose streams are synced between two compactions.
const TOKENS_PER_STEP: usize = 15;

/// EVM tokens whose price history the report shows, from the simulator's catalog.
const EVM_TOKENS: usize = 5;

fn setting<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v:?} is not a valid value")),
        _ => Ok(default),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let started = Instant::now();
    let lake_dir = setting("DEXLAKE_LAKE", "lake".to_owned())?;
    let report_dir = setting("DEXLAKE_REPORT_DIR", "report".to_owned())?;
    let n_tokens: usize = setting("DEXLAKE_REPORT_TOKENS", 60)?;
    let n_wallets: usize = setting("DEXLAKE_REPORT_WALLETS", 300)?;
    let evm_chain: i64 = setting("DEXLAKE_REPORT_CHAIN_ID", 1)?;
    let evm_tokens: Option<Vec<String>> =
        setting("DEXLAKE_REPORT_EVM_TOKENS", String::new()).map(|v| {
            let listed: Vec<String> = v
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect();
            (!listed.is_empty()).then_some(listed)
        })?;

    // The service: the real one when a key is configured, else the simulator on loopback.
    let real = std::env::var("DEXLAKE_API_KEY").is_ok_and(|k| !k.trim().is_empty());
    let (client, now, sim) = if real {
        let client = Client::from_env().context("configuring the client")?;
        eprintln!("service: {}", client.config().base_url);
        (client, Utc::now(), None)
    } else {
        let sim = Simulator::start(SimConfig {
            seed: 42,
            scale: Scale::Small,
            ..SimConfig::default()
        })
        .await?;
        eprintln!("service: the built-in simulator at {}", sim.base_url());
        let client = Client::new(ClientConfig {
            base_url: sim.base_url().to_owned(),
            api_key: Some("demo-key".into()),
            ..ClientConfig::default()
        })?;
        let now = sim.market().now();
        (client, now, Some(sim))
    };

    let lake = Arc::new(Lake::open(&lake_dir).with_context(|| format!("opening {lake_dir}"))?);
    let syncer = Syncer::new(client, Arc::clone(&lake), SyncConfig::default());
    let cancel = CancelToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("stopping: committing what was fetched");
            on_ctrl_c.cancel();
        }
    });

    // 1. Profiles of the tokens that traded in the last day.
    let profiles: SearchRequest = serde_json::from_value(serde_json::json!({
        "filter": {"metrics.1d.trade_count": {"$gt": 0}},
        "options": {
            "include_metadata": true,
            "include_market": true,
            "include_labels": true,
            "include_metrics": ["1d", "6h", "1h", "5m"]
        },
        "limit": 100
    }))?;
    step(
        &syncer,
        "profiles",
        vec![Job::AltProfiles { request: profiles }],
        &cancel,
    )
    .await?;

    // 2. The day's most traded tokens, picked locally from the snapshot just cached.
    let tokens = most_traded(&lake, n_tokens).await?;
    anyhow::ensure!(!tokens.is_empty(), "no token traded in the last day");

    // 3. Their swaps, trades, candles, prices and price stats.
    // A snapshot of their prices and price stats, then their streams in groups of tokens:
    // one job per token writes a file per day it touched, so the lake is compacted after each
    // group and commits stay cheap (their cost grows with the number of files).
    let snapshots = vec![
        Job::Prices {
            chain_id: None,
            tokens: tokens.clone(),
            pools: Vec::new(),
        },
        Job::PriceStats {
            chain_id: None,
            tokens: tokens.clone(),
            pools: Vec::new(),
        },
    ];
    step(&syncer, "prices", snapshots, &cancel).await?;
    let day_ago = now - Duration::days(1);
    let groups = tokens.chunks(TOKENS_PER_STEP);
    let n_groups = groups.len();
    for (g, group) in groups.enumerate() {
        let mut jobs = Vec::new();
        for t in group {
            jobs.push(Job::Swaps {
                token: Some(t.clone()),
                wallet: None,
                pool: None,
            });
            jobs.push(Job::Trades {
                token: Some(t.clone()),
                wallet: None,
            });
            jobs.push(Job::Candles {
                token: Some(t.clone()),
                pool: None,
                interval: 300,
                from: day_ago,
                to: None,
            });
        }
        let name = format!("tokens {}/{n_groups}", g + 1);
        step(&syncer, &name, jobs, &cancel).await?;
        compact(&lake).await?;
    }

    // 4. The price history of a few EVM tokens: 5-minute points over 31 days, enough for the
    // hourly bars of the last day and for every price-stats period.
    let evm_tokens = match (&sim, evm_tokens) {
        (_, Some(listed)) => listed,
        (Some(sim), None) => sim
            .market()
            .catalog()
            .evm
            .get(&evm_chain.to_string())
            .map(|chain| {
                chain
                    .tokens
                    .iter()
                    .take(EVM_TOKENS)
                    .map(|t| t.address.clone())
                    .collect()
            })
            .unwrap_or_default(),
        (None, None) => Vec::new(),
    };
    if !evm_tokens.is_empty() {
        let jobs = vec![Job::PriceHistory {
            chain_id: evm_chain,
            tokens: evm_tokens,
            pools: Vec::new(),
            interval: 300,
            from: now - Duration::days(31),
            to: None,
        }];
        step(&syncer, "EVM price history", jobs, &cancel).await?;
    }

    // 5. The trades of the wallets most active in them.
    let wallets = most_active_wallets(&lake, n_wallets).await?;
    let jobs = wallets
        .iter()
        .map(|w| Job::Trades {
            token: None,
            wallet: Some(w.clone()),
        })
        .collect();
    step(&syncer, "wallets", jobs, &cancel).await?;
    compact(&lake).await?;
    if let Some(sim) = sim {
        sim.shutdown().await;
    }

    // 6. The report, from the lake alone.
    let synced = Instant::now();
    let report_lake = Arc::clone(&lake);
    let out = report_dir.clone();
    let (report, index) = tokio::task::spawn_blocking(move || -> dexlake::Result<_> {
        let report = report::build(&report_lake, &ReportConfig::default())?;
        let index = report.write(&out)?;
        Ok((report, index))
    })
    .await??;
    println!("{}", report.summary());
    println!(
        "lake {lake_dir}: {} swaps, {} trades, {} candles",
        lake.row_count(Dataset::Swaps)?,
        lake.row_count(Dataset::Trades)?,
        lake.row_count(Dataset::Candles)?
    );
    println!(
        "wrote {} in {:.1} s (sync {:.1} s, analytics and charts {:.1} s)",
        index.display(),
        started.elapsed().as_secs_f64(),
        (synced - started).as_secs_f64(),
        synced.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs one step's jobs with progress bars, then says what it did. A failed job stops the
/// report; an interrupted step (Ctrl-C) too, after its commits.
async fn step(
    syncer: &Syncer,
    name: &str,
    jobs: Vec<Job>,
    cancel: &CancelToken,
) -> anyhow::Result<SyncReport> {
    let bars = ProgressBars::new(jobs.len());
    let report = syncer.run_with(&jobs, &bars, cancel).await;
    bars.finish();
    let added: u64 = report.jobs.iter().map(|j| j.rows_added).sum();
    eprintln!(
        "{name}: {} jobs, {added} new rows, {} requests in {:.1} s",
        report.jobs.len(),
        report.http_requests,
        report.elapsed.as_secs_f64()
    );
    if let Some(failed) = report.jobs.iter().find_map(|j| j.outcome.error()) {
        anyhow::bail!("{name}: {failed}");
    }
    anyhow::ensure!(!report.interrupted(), "{name}: interrupted");
    Ok(report)
}

/// Merges each partition's small files into large ones.
async fn compact(lake: &Arc<Lake>) -> anyhow::Result<()> {
    let lake = Arc::clone(lake);
    let started = Instant::now();
    let done = tokio::task::spawn_blocking(move || lake.compact()).await??;
    if done.files_removed > 0 {
        eprintln!(
            "compacted {} partitions: {} files into {} in {:.1} s",
            done.partitions,
            done.files_removed,
            done.files_added,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// The tokens with the most USD volume in the last day, from the latest profile snapshot,
/// asked with the service's own search language and answered locally.
async fn most_traded(lake: &Arc<Lake>, n: usize) -> anyhow::Result<Vec<String>> {
    let mut request: SearchRequest = serde_json::from_value(serde_json::json!({
        "sort": {"field": "metrics.1d.volume", "direction": "desc"},
        "limit": n.clamp(1, 100)
    }))?;
    let lake = Arc::clone(lake);
    tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<String>> {
        // One snapshot for every page, even if a sync adds another meanwhile.
        let at = ProfileSnapshot::At(local_search::snapshot_time(&lake, ProfileSnapshot::Latest)?);
        let mut tokens = Vec::new();
        loop {
            let page = lake.query().search_at(&request, at)?;
            tokens.extend(
                page.data
                    .iter()
                    .filter_map(|d| d.get("token_address")?.as_str().map(str::to_owned)),
            );
            match page.cursor {
                Some(cursor) if tokens.len() < n => request.cursor = Some(cursor),
                _ => break,
            }
        }
        tokens.truncate(n);
        Ok(tokens)
    })
    .await?
}

/// The wallets with the most trades in the lake.
async fn most_active_wallets(lake: &Arc<Lake>, n: usize) -> anyhow::Result<Vec<String>> {
    let lake = Arc::clone(lake);
    let df = tokio::task::spawn_blocking(move || -> anyhow::Result<DataFrame> {
        Ok(lake
            .scan(Dataset::Trades)?
            .group_by([col("wallet_address")])
            .agg([len().alias("trades")])
            .sort_by_exprs(
                [col("trades"), col("wallet_address")],
                SortMultipleOptions::default().with_order_descending_multi([true, false]),
            )
            .limit(n as u32)
            .collect()?)
    })
    .await??;
    Ok(df
        .column("wallet_address")?
        .str()?
        .iter()
        .flatten()
        .map(str::to_owned)
        .collect())
}
