//! Wallet PnL: one wallet's positions under two cost-basis methods, the lots its sells
//! consumed, and its equity curve with Sharpe, Sortino and max drawdown.
//!
//! Starts the built-in simulator on loopback, syncs the trades of its most active altchain
//! wallet (and of the tokens it trades, so every position is marked at the market's latest
//! price), then computes everything from the lake. Against the real service, build the client
//! with `Client::from_env()` and name a wallet of yours.
//!
//! ```sh
//! cargo run --example wallet_pnl
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;

use dexlake::prelude::*;
use dexlake::sim::{Scale, SimConfig, Simulator};
use polars::prelude::*;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = Simulator::start(SimConfig {
        seed: 7,
        scale: Scale::Tiny,
        ..SimConfig::default()
    })
    .await?;
    let wallet = sim.market().catalog().altchain.wallets[0].address.clone();
    let client = Client::new(ClientConfig {
        base_url: sim.base_url().to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    })?;
    let dir = tempfile::tempdir()?;
    let lake = Arc::new(Lake::open(dir.path())?);
    let syncer = Syncer::new(client, Arc::clone(&lake), SyncConfig::default());

    // The wallet's trades, then every trade of the tokens it holds (for their latest prices).
    let wallet_job = Job::Trades {
        token: None,
        wallet: Some(wallet.clone()),
    };
    let report = syncer.run(&[wallet_job]).await;
    anyhow::ensure!(!report.any_failed(), "sync failed: {:?}", report.jobs);
    let tokens: BTreeSet<String> = lake
        .scan(Dataset::Trades)?
        .select([col("token_address")])
        .collect()?
        .column("token_address")?
        .str()?
        .iter()
        .flatten()
        .map(str::to_owned)
        .collect();
    let jobs: Vec<Job> = tokens
        .iter()
        .map(|t| Job::Trades {
            token: Some(t.clone()),
            wallet: None,
        })
        .collect();
    let report = syncer.run(&jobs).await;
    anyhow::ensure!(!report.any_failed(), "sync failed: {:?}", report.jobs);
    println!(
        "wallet {wallet}: {} tokens, {} trades in the lake",
        tokens.len(),
        lake.row_count(Dataset::Trades)?
    );

    // Everything below asks the lake's query (no network); polars work runs off the async
    // workers.
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        let query = lake.query().wallet(wallet.as_str());
        let columns = [
            "token_address",
            "realized_pnl",
            "unrealized_pnl",
            "open_quantity",
            "cost_basis",
            "roi",
        ];
        // Realized PnL depends on the method; realized + unrealized does not.
        let mut totals = Vec::new();
        for method in [CostMethod::Fifo, CostMethod::AverageCost] {
            let pnl = query.pnl_report(&PnlConfig {
                method,
                ..PnlConfig::default()
            })?;
            println!("{method} positions:\n{}", pnl.ledgers.select(columns)?);
            let total = |name: &str| -> anyhow::Result<f64> {
                Ok(pnl.ledgers.column(name)?.f64()?.sum().unwrap_or(0.0))
            };
            totals.push(total("realized_pnl")? + total("unrealized_pnl")?);
        }
        let (fifo, average) = (totals[0], totals[1]);
        anyhow::ensure!(
            (fifo - average).abs() <= 1e-6 * fifo.abs().max(1.0),
            "realized + unrealized differs between the methods: FIFO {fifo}, average cost {average}"
        );

        // The audit trail: which buy lots each sell consumed, at what cost.
        let pnl = query.pnl_report(&PnlConfig {
            lots: true,
            ..PnlConfig::default()
        })?;
        let lots = pnl
            .lots
            .ok_or_else(|| anyhow::anyhow!("no lots, though asked for"))?;
        println!("first FIFO lots:\n{}", lots.head(Some(8)));
        println!("positions:\n{}", pnl.positions.head(Some(8)));

        // Daily equity marked to market at each day's close (the default period), and the
        // metrics of its returns.
        let perf = query.performance(&PnlConfig::default(), &EquityConfig::default())?;
        println!("equity curve (last days):\n{}", perf.curve.tail(Some(5)));
        println!("metrics:\n{}", perf.metrics);
        Ok(())
    })
    .await??;
    sim.shutdown().await;
    Ok(())
}
