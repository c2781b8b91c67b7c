//! Screener: cache the token profiles once, then ask the service's search questions locally,
//! as often as you like.
//!
//! Starts the built-in simulator on loopback and caches one snapshot of every altchain token
//! profile into a lake. It then answers a search-profiles request (filter, sort, page size,
//! cursor) from the lake, pages through every match, and screens the same snapshot with the
//! filter language as a polars expression, without JSON. Against the real service, build the
//! client with `Client::from_env()`.
//!
//! ```sh
//! cargo run --example screener
//! ```

use std::sync::Arc;

use dexlake::analytics::screener::{filter_expr, snapshot_frame};
use dexlake::api::profile_query::{Condition, Filter, Scalar};
use dexlake::prelude::*;
use dexlake::sim::{Scale, SimConfig, Simulator};
use polars::prelude::*;
use serde_json::json;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let sim = Simulator::start(SimConfig {
        seed: 7,
        scale: Scale::Small,
        ..SimConfig::default()
    })
    .await?;
    let client = Client::new(ClientConfig {
        base_url: sim.base_url().to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    })?;
    let dir = tempfile::tempdir()?;
    let lake = Arc::new(Lake::open(dir.path())?);

    // One snapshot of every profile: every page of one search, with every section.
    let all: SearchRequest = serde_json::from_value(json!({
        "options": {"include_metadata": true, "include_market": true, "include_labels": true,
                    "include_metrics": ["1d", "6h", "1h", "5m"]},
        "limit": 100
    }))?;
    let syncer = Syncer::new(client, Arc::clone(&lake), SyncConfig::default());
    let report = syncer.run(&[Job::AltProfiles { request: all }]).await;
    anyhow::ensure!(!report.any_failed(), "sync failed: {:?}", report.jobs);
    println!("cached {} profiles", report.jobs[0].rows_added);
    sim.shutdown().await;

    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        // The service's request, answered locally: liquid tokens labelled "hot", most hourly
        // volume first, ten per page.
        let mut request: SearchRequest = serde_json::from_value(json!({
            "filter": {"market.liquidity": {"$gte": 10000}, "labels": {"$eq": "hot"}},
            "sort": {"field": "metrics.1h.volume", "direction": "desc"},
            "options": {"include_metadata": true, "include_market": true,
                        "include_metrics": ["1h"]},
            "limit": 10
        }))?;
        let page = lake.query().search(&request)?;
        println!("{} tokens match; the first page:", page.count);
        for doc in &page.data {
            println!(
                "  {:<8} liquidity {:>12.0}  1h volume {:>12.0}",
                doc["metadata"]["symbol"].as_str().unwrap_or("?"),
                doc["market"]["liquidity"].as_f64().unwrap_or(f64::NAN),
                doc["metrics"]["1h"]["volume"].as_f64().unwrap_or(f64::NAN),
            );
        }
        // Paging with the cursor visits every match once.
        let mut seen = page.data.len();
        let mut cursor = page.cursor;
        while let Some(c) = cursor {
            request.cursor = Some(c);
            let next = lake.query().search(&request)?;
            seen += next.data.len();
            cursor = next.cursor;
        }
        println!("paged through {seen} of {} matches", page.count);
        anyhow::ensure!(
            seen as u64 == page.count,
            "paging visited {seen} profiles of {} matches",
            page.count
        );

        // The same filter language on a polars frame of the snapshot, no JSON involved.
        let screen = Filter::field("market.liquidity", Condition::Gte(10_000.0))
            .and_field("labels", Condition::Eq(Scalar::Str("hot".into())));
        let hot = snapshot_frame(&lake, ProfileSnapshot::Latest)?
            .filter(filter_expr(&screen)?)
            .select([
                col("token_address"),
                col("market").struct_().field_by_name("liquidity"),
            ])
            .sort(
                ["liquidity"],
                SortMultipleOptions::default().with_order_descending(true),
            )
            .collect()?;
        println!(
            "the same screen as a polars expression:\n{}",
            hot.head(Some(5))
        );
        anyhow::ensure!(hot.height() as u64 == page.count, "both ways agree");
        Ok(())
    })
    .await??;
    Ok(())
}
