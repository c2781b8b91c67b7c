//! Quickstart: client → lake → bars in a page of code.
//!
//! Starts the built-in simulator on loopback, syncs the swaps and trades of its most active
//! altchain token into a lake in a temporary folder, computes hourly OHLCV bars from the lake
//! and the wallet PnL leaderboard of that token, and prints both. Against the real service,
//! build the client with `Client::from_env()` and name a token of yours.
//!
//! ```sh
//! cargo run --example quickstart
//! ```

use std::sync::Arc;

use dexlake::prelude::*;
use dexlake::sim::{Scale, SimConfig, Simulator};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // A deterministic simulated service on 127.0.0.1, and its most active token.
    let sim = Simulator::start(SimConfig {
        seed: 7,
        scale: Scale::Tiny,
        ..SimConfig::default()
    })
    .await?;
    let token = sim.market().catalog().altchain.tokens[0].address.clone();
    let client = Client::new(ClientConfig {
        base_url: sim.base_url().to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    })?;

    // Fetch the token's swaps and trades into a fresh lake; a second run would fetch only
    // what is new.
    let dir = tempfile::tempdir()?;
    let lake = Arc::new(Lake::open(dir.path())?);
    let syncer = Syncer::new(client, Arc::clone(&lake), SyncConfig::default());
    let jobs = [
        Job::Swaps {
            token: Some(token.clone()),
            wallet: None,
            pool: None,
        },
        Job::Trades {
            token: Some(token.clone()),
            wallet: None,
        },
    ];
    let report = syncer.run(&jobs).await;
    anyhow::ensure!(!report.any_failed(), "sync failed: {:?}", report.jobs);
    println!(
        "synced {:?} with {} requests",
        report.rows_added(),
        report.requests()
    );

    // Hourly bars of the token's swaps, asked of the lake's query off the async workers.
    let bar_lake = Arc::clone(&lake);
    let bar_token = token.clone();
    let hourly = tokio::task::spawn_blocking(move || {
        bar_lake.query().token(bar_token).bars(Bars::every(3600))
    })
    .await??;
    println!("last hourly bars of {token}:\n{}", hourly.tail(Some(5)));
    anyhow::ensure!(hourly.height() > 0, "no hourly bar of {token}");

    // Who made money on it: FIFO PnL of every wallet, marked at the latest price.
    let board = tokio::task::spawn_blocking(move || lake.query().leaderboard(5)).await??;
    println!("top wallets:\n{board}");
    anyhow::ensure!(board.height() > 0, "an empty leaderboard");

    sim.shutdown().await;
    Ok(())
}
