//! Live bars: a simulated market that keeps trading, two tokens followed, each 1-minute bar
//! printed once it closes.
//!
//! Starts the built-in simulator in live mode at 600 simulated seconds per real second, then
//! follows its two most active tokens until its watermark has passed an hour of simulated time
//! (six real seconds, more on a loaded machine; at most two minutes): each
//! poll syncs their new swaps into a lake in a temporary folder, moves the watermark to the
//! service's time, and prints the bars it closed; at the end, the bars `dexlake ohlcv` computes
//! over the same lake and span are compared with the printed ones, and the example fails
//! (exit status 1) when they differ or when no bar closed.
//!
//! ```sh
//! cargo run --example live_bars
//! ```

use std::sync::Arc;
use std::time::Duration;

use dexlake::live::{FollowConfig, Follower};
use dexlake::prelude::*;
use dexlake::sim::{LiveConfig, Scale, SimConfig, Simulator};
use dexlake::sync::CancelToken;
use polars::prelude::*;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = Simulator::start(SimConfig {
        seed: 7,
        scale: Scale::Small,
        live: Some(LiveConfig {
            speed: 600.0,
            ..LiveConfig::default()
        }),
        ..SimConfig::default()
    })
    .await?;
    let catalog = sim.market().catalog();
    let tokens: Vec<String> = catalog.altchain.tokens[..2]
        .iter()
        .map(|t| t.address.clone())
        .collect();
    println!("following {} from {}", tokens.join(", "), sim.now());
    let client = Client::new(ClientConfig {
        base_url: sim.base_url().to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    })?;
    let dir = tempfile::tempdir()?;
    let lake = Arc::new(Lake::open(dir.path())?);
    let mut follower = Follower::new(
        client,
        Arc::clone(&lake),
        FollowConfig {
            tokens: tokens.clone(),
            interval_seconds: 60,
            ..FollowConfig::default()
        },
    )?;
    let cancel = CancelToken::new();
    let mut printed: Option<DataFrame> = None;
    // An hour of simulated time (six real seconds, or longer on a loaded machine: the polls
    // catch up), within two minutes.
    let until = sim.now() + chrono::Duration::hours(1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while follower.watermark().is_none_or(|w| w < until) {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the watermark did not reach {until} in two minutes"
        );
        let poll = follower.poll(&cancel).await?;
        print_bars(&poll.closed)?;
        follower.commit(&poll.closed)?;
        match printed.as_mut() {
            None => printed = Some(poll.closed),
            Some(all) => {
                all.vstack_mut(&poll.closed)?;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let watermark = follower
        .watermark()
        .ok_or_else(|| anyhow::anyhow!("no watermark after the polls"))?;
    let printed = printed.unwrap_or_default();
    // The batch bars of the same swaps from the first printed bar to the watermark.
    let first = printed
        .column("timestamp")?
        .cast(&DataType::Int64)?
        .i64()?
        .min()
        .and_then(chrono::DateTime::from_timestamp_micros);
    let mut query = lake.query().tokens(tokens).until(watermark);
    if let Some(first) = first {
        query = query.since(first);
    }
    let batch = query
        .bars(Bars::every(60).data_end(watermark))?
        .lazy()
        .filter(col("incomplete").not())
        .collect()?;
    let printed = printed.sort(
        ["token_address", "timestamp"],
        SortMultipleOptions::default(),
    )?;
    let equal = printed.equals_missing(&batch);
    println!(
        "watermark {watermark}: {} bars printed, equal to the batch bars of the lake: {equal}",
        printed.height(),
    );
    sim.shutdown().await;
    anyhow::ensure!(printed.height() > 0, "no bar closed in an hour of polls");
    anyhow::ensure!(
        equal,
        "the printed bars differ from the batch bars of the lake:\nprinted\n{printed}\nbatch\n{batch}"
    );
    Ok(())
}

/// One line per closed bar: token, minute, open, close, USD volume, swaps.
fn print_bars(closed: &DataFrame) -> anyhow::Result<()> {
    let token = closed.column("token_address")?.str()?;
    let time = closed.column("timestamp")?.cast(&DataType::Int64)?;
    let time = time.i64()?;
    let open = closed.column("open")?.f64()?;
    let close = closed.column("close")?.f64()?;
    let volume = closed.column("volume")?.f64()?;
    let count = closed.column("count")?.i64()?;
    for i in 0..closed.height() {
        let at = time
            .get(i)
            .and_then(chrono::DateTime::from_timestamp_micros)
            .map_or_else(String::new, |t| t.format("%H:%M").to_string());
        println!(
            "{:.8}…  {at}  open {:.4e}  close {:.4e}  ${:>10.2}  {} swaps",
            token.get(i).unwrap_or(""),
            open.get(i).unwrap_or(f64::NAN),
            close.get(i).unwrap_or(f64::NAN),
            volume.get(i).unwrap_or(0.0),
            count.get(i).unwrap_or(0),
        );
    }
    Ok(())
}
