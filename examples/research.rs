//! Research: three questions asked of an existing lake, each one expression.
//!
//! Opens the lake the daily report leaves (`./lake`, or `DEXLAKE_LAKE`), with no service and no
//! simulator, and asks:
//! 1. which token traded the most USD in the lake's last day, and its hourly bars that day;
//! 2. which wallet leads the PnL leaderboard, and what it made on each token (FIFO and HIFO);
//! 3. which liquid tokens the profile snapshot ranks first by 1-hour volume.
//!
//! ```sh
//! cargo run --example daily_report   # leaves ./lake
//! cargo run --example research
//! ```

use chrono::Duration;
use dexlake::prelude::*;
use polars::prelude::*;
use serde_json::json;

fn main() -> anyhow::Result<()> {
    let root = std::env::var("DEXLAKE_LAKE").unwrap_or_else(|_| "lake".to_owned());
    // Reading only: no lock, nothing created (a missing lake is refused, naming it).
    let lake = Lake::open_existing(&root)?;

    // 1. Price stats of every token as of the lake's last swap; the day's most traded token;
    //    its hourly bars over that day.
    let stats = lake.query().price_stats(None)?.sort(
        ["usd_volume_1d"],
        SortMultipleOptions::default()
            .with_order_descending(true)
            .with_nulls_last(true),
    )?;
    let (Some(token), Some(last)) = (
        stats.column("token_address")?.str()?.get(0),
        stats.column("block_time")?.datetime()?.physical().get(0),
    ) else {
        anyhow::bail!("{root} holds no swaps: run `cargo run --example daily_report` first");
    };
    let last = chrono::DateTime::from_timestamp_micros(last).unwrap_or_default();
    let bars = lake
        .query()
        .token(token)
        .since(last - Duration::days(1))
        .bars(Bars::every(3_600))?;
    let bars = bars.select([
        "timestamp",
        "open",
        "high",
        "low",
        "close",
        "volume",
        "count",
    ])?;
    println!("1. {token} traded the most in the last day; its hourly bars:\n{bars}");

    // 2. The leaderboard's first wallet, and its PnL per token under two cost-basis methods.
    let top = lake.query().leaderboard(1)?;
    let Some(wallet) = top
        .column("wallet_address")?
        .str()?
        .get(0)
        .map(str::to_owned)
    else {
        anyhow::bail!("{root} holds no trades");
    };
    let of_wallet = lake.query().wallet(&wallet);
    let fifo = of_wallet.pnl()?;
    let hifo = of_wallet.pnl_with(&PnlConfig {
        method: CostMethod::Hifo,
        ..PnlConfig::default()
    })?;
    let columns = [
        "token_address",
        "realized_pnl",
        "unrealized_pnl",
        "total_pnl",
    ];
    println!(
        "2. {wallet} leads the leaderboard: FIFO\n{}",
        fifo.select(columns)?
    );
    println!("   and HIFO\n{}", hifo.select(columns)?);

    // 3. The profile snapshot's liquid tokens, most traded in the last hour first.
    let request: SearchRequest = serde_json::from_value(json!({
        "filter": {"market.liquidity": {"$gte": 10_000}},
        "sort": {"field": "metrics.1h.volume", "direction": "desc"},
        "options": {"include_market": true, "include_metrics": ["1h"]},
        "limit": 5
    }))?;
    match lake.query().search(&request) {
        Ok(page) => {
            println!(
                "3. {} liquid tokens; the first {}:",
                page.count,
                page.data.len()
            );
            for profile in &page.data {
                println!(
                    "   {}  liquidity {}  1h volume {}",
                    profile["token_address"].as_str().unwrap_or_default(),
                    profile["market"]["liquidity"],
                    profile["metrics"]["1h"]["volume"],
                );
            }
        }
        // A lake without profile snapshots has nothing to screen.
        Err(e) if e.kind() == ErrorKind::NoData => println!("3. no screener: {e}"),
        Err(e) => return Err(e.into()),
    }
    Ok(())
}
