//! The query over events held in memory (`InMemory`) against the lake's answers: bars of
//! every kind, the PnL tables of every method and token metrics, bit for bit; and the same
//! answers computed group by group as a distributed engine computes them (tokens or wallets
//! apart, a token split by time), with what a group cannot know taken from the whole.

use std::collections::BTreeMap;
use std::sync::Arc;

use dexlake::analytics::pnl::{CostMethod, PnlConfig, PnlTable};
use dexlake::analytics::{EventSource, TimeRange};
use dexlake::lake::{Dataset, Lake};
use dexlake::query::{Bars, InMemory, LakeQuery as _, Query};
use dexlake::sim::Simulator;
use dexlake::sync::{Job, SyncConfig, Syncer};
use polars::prelude::*;

use crate::common;
use crate::common::lake::small_file_options;

/// Two tokens' swaps and trades, and one wallet's swaps (its ledgers come from swaps), in
/// many small files. Returns the tokens.
async fn synced_lake(sim: &Simulator) -> (tempfile::TempDir, Arc<Lake>, Vec<String>) {
    let catalog = sim.market().catalog();
    let chain = &catalog.altchain;
    let tokens: Vec<String> = chain.tokens[..2]
        .iter()
        .map(|t| t.address.clone())
        .collect();
    let wallet = chain.wallets[1].address.clone();
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Arc::new(Lake::open_with(dir.path(), small_file_options()).expect("lake"));
    let mut jobs = Vec::new();
    for t in &tokens {
        jobs.push(Job::Trades {
            token: Some(t.clone()),
            wallet: None,
        });
        jobs.push(Job::Swaps {
            token: Some(t.clone()),
            wallet: None,
            pool: None,
        });
    }
    jobs.push(Job::Swaps {
        token: None,
        wallet: Some(wallet),
        pool: None,
    });
    let syncer = Syncer::new(
        common::sim_client_retrying(sim, 5),
        Arc::clone(&lake),
        SyncConfig::default(),
    );
    let report = syncer.run(&jobs).await;
    assert!(!report.any_failed(), "sync failed: {report:?}");
    (dir, lake, tokens)
}

fn frame_of(lake: &Lake, dataset: Dataset) -> DataFrame {
    lake.scan(dataset)
        .expect("scan")
        .collect()
        .expect("collect")
}

fn strings(frame: &DataFrame, name: &str) -> Vec<String> {
    frame
        .column(name)
        .expect("column")
        .str()
        .expect("strings")
        .iter()
        .map(|s| s.unwrap_or_default().to_owned())
        .collect()
}

/// The rows of `frame` where `keep` holds.
fn rows_where(frame: &DataFrame, keep: impl Fn(usize) -> bool) -> DataFrame {
    let mask: BooleanChunked = (0..frame.height()).map(|i| Some(keep(i))).collect();
    frame.filter(&mask).expect("filter")
}

fn concat(parts: Vec<DataFrame>) -> DataFrame {
    let mut parts = parts.into_iter();
    let mut all = parts.next().expect("a part");
    for p in parts {
        all.vstack_mut(&p).expect("vstack");
    }
    all
}

fn assert_equal(a: &DataFrame, b: &DataFrame, what: &str) {
    assert!(a.height() > 0, "no rows, {what}");
    assert!(a.equals_missing(b), "{what}:\n{a}\n{b}");
}

/// The events of `source` keyed by token as a distributed engine groups them: a swap goes to
/// the group of each of its tokens, a trade to its token's.
fn token_groups(frame: &DataFrame, source: EventSource) -> BTreeMap<String, DataFrame> {
    let sides: Vec<Vec<String>> = match source {
        EventSource::Swaps => vec![
            strings(frame, "token_address_in"),
            strings(frame, "token_address_out"),
        ],
        EventSource::Trades => vec![strings(frame, "token_address")],
    };
    let mut names: Vec<&String> = sides.iter().flatten().collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|t| {
            let rows = rows_where(frame, |i| sides.iter().any(|s| &s[i] == t));
            (t.clone(), rows)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bars_of_events_in_memory_equal_the_lakes_whole_and_by_group() {
    let sim = common::tiny_sim(11).await;
    let (_dir, lake, tokens) = synced_lake(&sim).await;
    for (source, dataset) in [
        (EventSource::Swaps, Dataset::Swaps),
        (EventSource::Trades, Dataset::Trades),
    ] {
        let frame = frame_of(&lake, dataset);
        let memory = match source {
            EventSource::Swaps => InMemory::new().swaps(&frame),
            EventSource::Trades => InMemory::new().trades(&frame),
        };
        let end = memory
            .latest_event(source)
            .expect("latest")
            .expect("events")
            + 1;
        let end = chrono::DateTime::from_timestamp_micros(end).expect("time");
        for bars in [
            Bars::every(60),
            Bars::every(300).offset(7),
            Bars::every(3_600).fill(dexlake::analytics::Fill::ForwardFill),
            Bars::ticks(7),
            Bars::usd_volume(5_000.0),
        ] {
            let what = format!("{source:?} {bars:?}");
            let query = lake.query().source(source);
            let expected = query.bars(bars.clone()).expect("lake bars");
            let plan = query.bars_plan(bars.clone()).expect("plan").value;
            let whole = memory.bars(source, &plan, None).expect("bars");
            assert_equal(&expected, &whole, &format!("whole, {what}"));
            // Token by token, each group with the whole's end of data.
            let planned = if plan.is_time() {
                plan.clone().data_end(end)
            } else {
                plan.clone()
            };
            let parts: Vec<DataFrame> = token_groups(&frame, source)
                .iter()
                .map(|(t, rows)| {
                    let group = match source {
                        EventSource::Swaps => InMemory::new().swaps(rows),
                        EventSource::Trades => InMemory::new().trades(rows),
                    };
                    group
                        .bars(source, &planned, Some(std::slice::from_ref(t)))
                        .expect("group bars")
                })
                .collect();
            assert_equal(&expected, &concat(parts), &format!("by token, {what}"));
        }
        // A token split by time at a multiple of the width gives the bars of the whole.
        let token = &tokens[0];
        let groups = token_groups(&frame, source);
        let rows = &groups[token];
        let plan = lake
            .query()
            .source(source)
            .bars_plan(Bars::every(60))
            .expect("plan")
            .value
            .data_end(end);
        let times: Vec<i64> = rows
            .column("block_time")
            .expect("time")
            .cast(&DataType::Int64)
            .expect("micros")
            .i64()
            .expect("i64")
            .into_no_null_iter()
            .collect();
        let (lo, hi) = (times.iter().min().unwrap(), times.iter().max().unwrap());
        let cut = (lo + (hi - lo) / 2) / 60_000_000 * 60_000_000;
        let one = |keep: &dyn Fn(i64) -> bool| {
            let part = rows_where(rows, |i| keep(times[i]));
            let group = match source {
                EventSource::Swaps => InMemory::new().swaps(&part),
                EventSource::Trades => InMemory::new().trades(&part),
            };
            group
                .bars(source, &plan, Some(std::slice::from_ref(token)))
                .expect("bars")
        };
        let whole = one(&|_| true);
        let split = concat(vec![one(&|t| t < cut), one(&|t| t >= cut)]);
        assert!(split.height() > 2, "a split of few bars proves little");
        assert_equal(&whole, &split, &format!("{source:?} split by time"));
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selected_bars_in_memory_equal_the_lakes_and_parts_of_the_grid_give_the_whole() {
    let sim = common::tiny_sim(11).await;
    let (_dir, lake, tokens) = synced_lake(&sim).await;
    let swaps = frame_of(&lake, Dataset::Swaps);
    let source = EventSource::Swaps;
    let times: Vec<i64> = swaps
        .column("block_time")
        .expect("time")
        .cast(&DataType::Int64)
        .expect("micros")
        .i64()
        .expect("i64")
        .into_no_null_iter()
        .collect();
    let (lo, hi) = (*times.iter().min().unwrap(), *times.iter().max().unwrap());
    let at = |t: i64| chrono::DateTime::from_timestamp_micros(t).expect("time");
    let (from, to) = (at(lo + (hi - lo) / 4 + 1), at(hi - (hi - lo) / 4 - 1));
    let range = TimeRange {
        from: Some(from),
        to: Some(to),
    };
    let pools = strings(&swaps, "pool_address");
    let pool = pools[0].clone();
    let bars = Bars::every(60).offset(7);
    let cases: Vec<(&str, Query<'_>, InMemory<'_>)> = vec![
        (
            "a token in a range",
            lake.query()
                .tokens([tokens[0].clone()])
                .since(from)
                .until(to),
            InMemory::new()
                .swaps(&swaps)
                .tokens(vec![tokens[0].clone()])
                .range(range),
        ),
        (
            "a pool",
            lake.query().pool(pool.clone()),
            InMemory::new().swaps(&swaps).pool(pool.clone()),
        ),
    ];
    for (what, query, memory) in cases {
        let expected = query.bars(bars.clone()).expect("lake bars");
        let plan = query.bars_plan(bars.clone()).expect("plan").value;
        assert_equal(
            &expected,
            &memory.bars(source, &plan, None).expect("bars"),
            what,
        );
        // The rows kept before they move give the same bars, and some were left out.
        let keep = memory.selected_rows(source).expect("rows");
        assert!(keep.iter().any(|k| !k), "{what}: every row kept");
        let kept = rows_where(&swaps, |i| keep[i]);
        let end = memory
            .latest_event(source)
            .expect("latest")
            .expect("events")
            + 1;
        let planned = plan.clone().data_end(at(end));
        let memory_kept = match what {
            "a pool" => InMemory::new().swaps(&kept).pool(pool.clone()),
            _ => InMemory::new()
                .swaps(&kept)
                .tokens(vec![tokens[0].clone()])
                .range(range),
        };
        assert_equal(
            &expected,
            &memory_kept.bars(source, &planned, None).expect("bars"),
            &format!("{what}, rows kept"),
        );
        // Parts of 10 minutes of the bars' grid, each its own group, give the whole's bars.
        let split = planned.split(600).expect("split");
        let parts = memory_kept.bar_parts(source, &split).expect("parts");
        let mut starts = parts.clone();
        starts.sort();
        starts.dedup();
        assert!(starts.len() > 2, "{what}: too few parts");
        let groups: Vec<DataFrame> = starts
            .iter()
            .map(|p| {
                let rows = rows_where(&kept, |i| parts[i] == *p);
                let group = match what {
                    "a pool" => InMemory::new().swaps(&rows).pool(pool.clone()),
                    _ => InMemory::new()
                        .swaps(&rows)
                        .tokens(vec![tokens[0].clone()])
                        .range(range),
                };
                group.bars(source, &planned, None).expect("part bars")
            })
            .filter(|f| f.height() > 0)
            .collect();
        let by_key = |f: DataFrame| {
            f.sort(
                ["token_address", "timestamp"],
                SortMultipleOptions::default(),
            )
            .expect("sort")
        };
        assert_equal(
            &by_key(expected.clone()),
            &by_key(concat(groups)),
            &format!("{what}, by part"),
        );
    }
    // A selection the lake's query refuses is refused in memory too.
    let trades = frame_of(&lake, Dataset::Trades);
    let refused = InMemory::new()
        .trades(&trades)
        .pool(pool)
        .selected_rows(EventSource::Trades);
    assert!(refused.is_err(), "a pool of trades");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pnl_tables_in_memory_equal_the_lakes_for_every_method_whole_and_by_wallet() {
    let sim = common::tiny_sim(11).await;
    let (_dir, lake, _) = synced_lake(&sim).await;
    let trades = frame_of(&lake, Dataset::Trades);
    let swaps = frame_of(&lake, Dataset::Swaps);
    let memory = InMemory::new().trades(&trades).swaps(&swaps);
    // Wallet groups, each holding a wallet's trades and swaps whole.
    let (tw, sw) = (
        strings(&trades, "wallet_address"),
        strings(&swaps, "wallet_address"),
    );
    let mut wallets: Vec<&String> = tw.iter().chain(&sw).collect();
    wallets.sort();
    wallets.dedup();
    let groups: Vec<(DataFrame, DataFrame)> = wallets
        .iter()
        .map(|w| {
            (
                rows_where(&trades, |i| &tw[i] == *w),
                rows_where(&swaps, |i| &sw[i] == *w),
            )
        })
        .collect();
    // The latest price of each token over every group: the price of the greatest key.
    let mut latest: BTreeMap<String, ((i64, i64, i64), f64)> = BTreeMap::new();
    for (t, s) in &groups {
        let prices = InMemory::new()
            .trades(t)
            .swaps(s)
            .latest_prices()
            .expect("prices");
        let tokens = strings(&prices, "token_address");
        let int = |name: &str| -> Vec<i64> {
            let c = prices.column(name).expect("column").i64().expect("i64");
            c.into_no_null_iter().collect()
        };
        let (time, slot, id) = (int("block_time"), int("block_slot"), int("id"));
        let price = prices.column("price").expect("price").f64().expect("f64");
        for (k, token) in tokens.into_iter().enumerate() {
            let key = (time[k], slot[k], id[k]);
            let p = price.get(k).expect("price");
            let best = latest.entry(token).or_insert((key, p));
            if key > best.0 {
                *best = (key, p);
            }
        }
    }
    let latest: BTreeMap<String, f64> = latest.into_iter().map(|(t, (_, p))| (t, p)).collect();
    for method in CostMethod::ALL {
        for table in [PnlTable::Ledgers, PnlTable::Positions, PnlTable::Lots] {
            let what = format!("{method:?} {table:?}");
            let config = PnlConfig {
                method,
                ..PnlConfig::default()
            };
            let expected = lake
                .query()
                .pnl_table(&config, table)
                .expect("lake pnl")
                .value;
            let whole = memory.pnl_table(&config, table, None).expect("pnl");
            assert_equal(&expected, &whole, &format!("whole, {what}"));
            let parts: Vec<DataFrame> = groups
                .iter()
                .map(|(t, s)| {
                    InMemory::new()
                        .trades(t)
                        .swaps(s)
                        .pnl_table(&config, table, Some(&latest))
                        .expect("group pnl")
                })
                .collect();
            assert_equal(&expected, &concat(parts), &format!("by wallet, {what}"));
        }
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_metrics_in_memory_equal_the_lakes() {
    let sim = common::tiny_sim(11).await;
    let (_dir, lake, tokens) = synced_lake(&sim).await;
    let trades = frame_of(&lake, Dataset::Trades);
    let memory = InMemory::new().trades(&trades);
    let of_token = strings(&trades, "token_address");
    for token in &tokens {
        let expected = lake
            .query()
            .token(token)
            .token_metrics(&[], None)
            .expect("lake metrics");
        let got = memory.token_metrics(token, &[], None).expect("metrics");
        assert_equal(&expected, &got, &format!("metrics of {token}"));
        // A group of the token's trades alone, with the lake's now.
        let own = rows_where(&trades, |i| of_token[i] == *token);
        let now = expected
            .column("window_end")
            .expect("window_end")
            .cast(&DataType::Int64)
            .expect("micros")
            .i64()
            .expect("i64")
            .get(0)
            .and_then(chrono::DateTime::from_timestamp_micros);
        let group = InMemory::new()
            .trades(&own)
            .token_metrics(token, &["1h", "1d"], now)
            .expect("group metrics");
        let expected = lake
            .query()
            .token(token)
            .token_metrics(&["1h", "1d"], now)
            .expect("lake metrics");
        assert_equal(&expected, &group, &format!("group metrics of {token}"));
    }
    sim.shutdown().await;
}
