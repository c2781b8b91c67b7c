//! The live simulator: a market that keeps trading after its fixed "now", answered at a clock.
//! Every test but the CLI's drives a manual clock, so nothing depends on the wall clock.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use dexlake::lake::{Dataset, Lake};
use dexlake::sim::{DEMO_KEY, LiveConfig, Scale, SimConfig, Simulator, SyntheticMarket};
use dexlake::sync::{Job, SyncConfig, Syncer};
use polars::prelude::*;
use serde_json::{Value, json};

use crate::common;

const SEED: u64 = 12;
const DAY: u64 = 86_400;
const TIMEOUT: Duration = Duration::from_secs(120);

const SWAPS: &str = "/v1/altchain/dex/swaps/get-swaps";
const TRADES: &str = "/v1/altchain/dex/trades/get-trades";
const CANDLES: &str = "/v1/altchain/dex/prices/get-price-candles";
const ALT_PRICE: &str = "/v1/altchain/dex/prices/get-price";
const ALT_STATS: &str = "/v1/altchain/dex/prices/get-price-stats";
const PORTFOLIO: &str = "/v1/altchain/dex/portfolios/get-portfolio";
const SEARCH: &str = "/v1/altchain/dex/profiles/tokens/search-profiles";
const EVM_PROFILE: &str = "/v1/evm/dex/profiles/tokens/get-profile";
const EVM_HISTORY: &str = "/v1/evm/dex/prices/get-price-history";
const EVM_STATS: &str = "/v1/evm/dex/prices/get-price-stats";

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, f)
        .await
        .expect("the test finished within its time bound")
}

/// A live simulator of the tiny market whose clock moves only when the test advances it.
async fn manual(seed: u64) -> Simulator {
    common::manual_live_sim(seed).await
}

async fn fixed(seed: u64) -> Simulator {
    common::tiny_sim(seed).await
}

/// The body of a 200 answer.
async fn text(base: &str, path: &str, body: &Value) -> String {
    let resp = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("x-api-key", DEMO_KEY)
        .json(body)
        .send()
        .await
        .expect("the request reaches the simulator");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("the body is readable");
    assert_eq!(status, 200, "{path} {body}: {text}");
    text
}

async fn call(base: &str, path: &str, body: Value) -> Value {
    serde_json::from_str(&text(base, path, &body).await).expect("the answer is JSON")
}

/// The catalog the simulator serves at its clock.
async fn served_catalog(base: &str) -> Value {
    reqwest::get(format!("{base}/sim/catalog"))
        .await
        .expect("the catalog is served")
        .json()
        .await
        .expect("the catalog is JSON")
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .expect("a time string")
        .parse()
        .expect("an RFC 3339 time")
}

/// The most active altchain token, a busy wallet, an EVM token of chain 1, and the fixed now.
fn names(sim: &Simulator) -> (String, String, String, DateTime<Utc>) {
    let c = sim.market().catalog();
    (
        c.altchain.tokens[0].address.clone(),
        c.altchain.wallets[0].address.clone(),
        c.evm["1"].tokens[0].address.clone(),
        c.now,
    )
}

/// Every swap of a filter, newest first, by walking the cursors from `cursor`.
async fn walk(base: &str, mut filter: Value, cursor: Option<String>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor = cursor;
    loop {
        filter["cursor"] = cursor.map_or(Value::Null, Value::String);
        filter["limit"] = json!(100);
        let page = call(base, SWAPS, filter.clone()).await;
        out.extend(page["data"].as_array().expect("data").iter().cloned());
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

fn ids(swaps: &[Value]) -> Vec<i64> {
    swaps
        .iter()
        .map(|s| s["id"].as_i64().expect("an integer id"))
        .collect()
}

/// A request of every operation, as the same bytes ask for them of any simulator.
fn requests(token: &str, wallet: &str, evm_token: &str) -> Vec<(&'static str, Value)> {
    vec![
        (SWAPS, json!({"token": token, "limit": 100})),
        (TRADES, json!({"wallet": wallet, "limit": 100})),
        (ALT_PRICE, json!({"tokens": [token]})),
        (ALT_STATS, json!({"tokens": [token]})),
        (CANDLES, json!({"token": token, "interval": 3600})),
        (PORTFOLIO, json!({"wallet": wallet})),
        (
            SEARCH,
            json!({"limit": 5, "sort": {"field": "market.price", "direction": "desc"},
                   "options": {"include_market": true, "include_labels": true,
                               "include_metrics": ["1h", "1d"]}}),
        ),
        (
            EVM_PROFILE,
            json!({"chain_id": 1, "token": evm_token,
                   "options": {"include_metadata": true, "include_metrics": ["1d"]}}),
        ),
        (EVM_STATS, json!({"chain_id": 1, "tokens": [evm_token]})),
        (
            EVM_HISTORY,
            json!({"chain_id": 1, "tokens": [evm_token], "from": "2025-05-30T00:00:00Z",
                   "interval": 3600}),
        ),
    ]
}

async fn answers(base: &str, requests: &[(&'static str, Value)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, body) in requests {
        out.push(text(base, path, body).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swaps_after_now_appear_only_once_the_clock_passes_them() {
    bounded(async {
        let sim = manual(SEED).await;
        let base = sim.base_url();
        let (token, _, _, now) = names(&sim);
        assert_eq!(sim.now(), now, "the clock starts at the fixed now");
        let first = call(base, SWAPS, json!({"token": token, "limit": 1})).await;
        let count0 = first["count"].as_i64().expect("count");
        assert!(time(&first["data"][0]["block_time"]) <= now);

        // The first swap of the token after now, as a day's advance shows it.
        let later = manual(SEED).await;
        later.advance(DAY).unwrap();
        let all = walk(later.base_url(), json!({"token": token}), None).await;
        let after: Vec<&Value> = all
            .iter()
            .filter(|s| time(&s["block_time"]) > now)
            .collect();
        assert!(!after.is_empty(), "the most active token trades in a day");
        let next = after.last().expect("the oldest swap after now");
        let at = time(&next["block_time"]);

        // One second before it, it is not there; at its time it is the newest swap.
        sim.advance((at - now).num_seconds() as u64 - 1).unwrap();
        let before = call(base, SWAPS, json!({"token": token, "limit": 1})).await;
        assert_eq!(before["count"].as_i64(), Some(count0));
        assert_eq!(before["data"][0], first["data"][0]);
        sim.advance(1).unwrap();
        assert_eq!(sim.now(), at);
        let page = call(base, SWAPS, json!({"token": token, "limit": 1})).await;
        assert_eq!(&page["data"][0], *next);
        assert!(page["data"][0]["id"].as_i64() > first["data"][0]["id"].as_i64());
        assert!(page["count"].as_i64().expect("count") > count0);
        // Its trade appears with it, for the wallet that made it.
        let wallet = next["wallet_address"].as_str().expect("wallet");
        let trades = call(base, TRADES, json!({"wallet": wallet, "limit": 1})).await;
        assert_eq!(trades["data"][0]["id"], next["id"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_instant_gives_the_same_bytes() {
    bounded(async {
        let (a, b) = (manual(SEED).await, manual(SEED).await);
        let (token, wallet, evm_token, _) = names(&a);
        let reqs = requests(&token, &wallet, &evm_token);
        // `b` is asked at an earlier instant first: answers do not depend on the past requests.
        b.advance(2 * 3_600).unwrap();
        let earlier = answers(b.base_url(), &reqs).await;
        b.advance(5 * 3_600 + 17).unwrap();
        a.advance(7 * 3_600 + 17).unwrap();
        let (x, y) = (
            answers(a.base_url(), &reqs).await,
            answers(b.base_url(), &reqs).await,
        );
        for ((path, _), (x, y)) in reqs.iter().zip(x.iter().zip(&y)) {
            assert_eq!(x, y, "{path}");
        }
        assert_ne!(earlier, x, "seven hours later, the answers moved");
        assert_eq!(
            served_catalog(a.base_url()).await,
            served_catalog(b.base_url()).await
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_before_now_is_the_fixed_markets() {
    bounded(async {
        // In the library: every swap of the history, and the catalog at the fixed now.
        let fixed_market = SyntheticMarket::generate(SEED, Scale::Tiny);
        let live_market = SyntheticMarket::generate_live(SEED, Scale::Tiny, 30).unwrap();
        for (f, l) in std::iter::once((&fixed_market.alt, &live_market.alt))
            .chain(fixed_market.evm.iter().zip(&live_market.evm))
        {
            assert_eq!(f.swap_count(), l.swap_count());
            for i in 0..f.swap_count() as u32 {
                assert_eq!(f.swap(i), l.swap(i));
                assert_eq!(f.trade(i), l.trade(i));
            }
        }
        let mut catalog = serde_json::to_value(live_market.catalog()).unwrap();
        assert!(catalog["live"]["trading_until"].is_string());
        catalog.as_object_mut().unwrap().remove("live");
        assert_eq!(
            catalog,
            serde_json::to_value(fixed_market.catalog()).unwrap()
        );

        // Over HTTP: at the start of its clock the live simulator answers the fixed one's bytes.
        let (live, fixed) = (manual(SEED).await, fixed(SEED).await);
        let (token, wallet, evm_token, now) = names(&fixed);
        let reqs = requests(&token, &wallet, &evm_token);
        assert_eq!(
            answers(live.base_url(), &reqs).await,
            answers(fixed.base_url(), &reqs).await
        );
        // A day later, the swaps up to now and the candles before it are still the same.
        live.advance(DAY).unwrap();
        let history = walk(fixed.base_url(), json!({"token": token}), None).await;
        let kept: Vec<Value> = walk(live.base_url(), json!({"token": token}), None)
            .await
            .into_iter()
            .filter(|s| time(&s["block_time"]) <= now)
            .collect();
        assert_eq!(kept, history);
        let before_now = json!({"token": token, "interval": 3600,
                                "to": (now - chrono::Duration::seconds(1)).to_rfc3339()});
        assert_eq!(
            text(live.base_url(), CANDLES, &before_now).await,
            text(fixed.base_url(), CANDLES, &before_now).await
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_begun_before_an_advance_neither_skips_nor_repeats() {
    bounded(async {
        let sim = manual(SEED).await;
        let base = sim.base_url();
        let (token, _, _, _) = names(&sim);
        let existing = walk(base, json!({"token": token}), None).await;

        let first = call(base, SWAPS, json!({"token": token, "limit": 40})).await;
        let cursor = first["cursor"].as_str().expect("more pages").to_owned();
        sim.advance(2 * DAY).unwrap();
        let rest = walk(base, json!({"token": token}), Some(cursor)).await;
        let mut seen = ids(first["data"].as_array().expect("data"));
        seen.extend(ids(&rest));
        assert_eq!(
            seen,
            ids(&existing),
            "every swap once, in order, none of the new"
        );
        assert_eq!(
            seen.iter().collect::<BTreeSet<_>>().len(),
            seen.len(),
            "no swap twice"
        );

        // A walk begun again from the newest sees the new swaps above the old ones.
        let again = walk(base, json!({"token": token}), None).await;
        let new = &again[..again.len() - existing.len()];
        assert!(!new.is_empty(), "two days brought swaps");
        assert_eq!(ids(&again[new.len()..]), ids(&existing));
        let oldest_id = ids(&existing)[0];
        assert!(ids(new).iter().all(|&id| id > oldest_id));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prices_stats_candles_profiles_and_portfolios_move_with_the_clock() {
    bounded(async {
        let sim = manual(SEED).await;
        let base = sim.base_url();
        let (token, _, _, now) = names(&sim);
        let stats0 = call(base, ALT_STATS, json!({"tokens": [token]})).await;
        let candles0 = call(base, CANDLES, json!({"token": token, "interval": 3600})).await;
        let search = json!({"filter": {"token_address": {"$eq": token}},
                            "options": {"include_market": true, "include_metrics": ["1d"]}});
        let profile0 = call(base, SEARCH, search.clone()).await;

        sim.advance(DAY).unwrap();
        let t = sim.now();
        assert_eq!(t, now + chrono::Duration::days(1));
        let catalog = served_catalog(base).await;
        assert_eq!(time(&catalog["now"]), t);
        let newest = call(base, SWAPS, json!({"token": token, "limit": 1})).await;
        let last = &newest["data"][0];
        assert!(time(&last["block_time"]) > now);

        let stats = call(base, ALT_STATS, json!({"tokens": [token]})).await;
        assert_eq!(stats[0]["block_slot"], last["block_slot"]);
        assert_ne!(stats[0]["usd_price"], stats0[0]["usd_price"]);
        assert_ne!(stats[0]["usd_volume_1d"], stats0[0]["usd_volume_1d"]);
        let price = call(base, ALT_PRICE, json!({"tokens": [token]})).await;
        assert_eq!(price[0]["usd_price"], stats[0]["usd_price"]);

        let candles = call(base, CANDLES, json!({"token": token, "interval": 3600})).await;
        let latest = candles
            .as_array()
            .expect("candles")
            .last()
            .expect("a candle");
        assert!(time(&latest["timestamp"]) > now);
        assert!(time(&latest["timestamp"]) <= t);
        assert_ne!(candles, candles0);

        let profile = call(base, SEARCH, search).await;
        let (m0, m) = (
            &profile0["data"][0]["market"],
            &profile["data"][0]["market"],
        );
        assert_eq!(m["price"], stats[0]["usd_price"]);
        assert_ne!(m["price"], m0["price"]);
        assert_ne!(
            profile["data"][0]["metrics"]["1d"],
            profile0["data"][0]["metrics"]["1d"]
        );
        assert_eq!(time(&profile["data"][0]["updated_at"]), t);

        // The wallet of the newest swap holds what that swap left it.
        let wallet = last["wallet_address"].as_str().expect("wallet");
        let portfolio = call(base, PORTFOLIO, json!({"wallet": wallet})).await;
        let held = portfolio["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .find(|p| p["token"] == json!(token))
            .map_or(0.0, |p| p["balance"].as_f64().expect("balance"));
        let bought = last["token_address_out"] == json!(token);
        let after = if bought {
            &last["post_token_balance_out"]
        } else {
            &last["post_token_balance_in"]
        };
        assert_eq!(held, after.as_f64().expect("a balance"));
    })
    .await;
}

fn lake_ids(lake: &Lake) -> Vec<i64> {
    let df = lake
        .scan(Dataset::Swaps)
        .expect("scan")
        .select([col("id")])
        .sort(["id"], SortMultipleOptions::default())
        .collect()
        .expect("collect");
    df.column("id")
        .expect("id")
        .i64()
        .expect("i64 ids")
        .into_no_null_iter()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sync_after_an_advance_adds_exactly_the_new_swaps() {
    bounded(async {
        let sim = manual(SEED).await;
        let (token, _, _, _) = names(&sim);
        let dir = tempfile::tempdir().unwrap();
        let lake = Arc::new(Lake::open(dir.path()).unwrap());
        let job = Job::Swaps {
            token: Some(token.clone()),
            wallet: None,
            pool: None,
        };
        let sync = Syncer::new(
            common::sim_client(&sim),
            Arc::clone(&lake),
            SyncConfig::default(),
        );
        let first = sync.run(std::slice::from_ref(&job)).await;
        assert!(!first.any_failed(), "{:?}", first.jobs);
        let mut expected = ids(&walk(sim.base_url(), json!({"token": token}), None).await);
        expected.sort_unstable();
        assert_eq!(lake_ids(&lake), expected);

        sim.advance(DAY).unwrap();
        let second = sync.run(std::slice::from_ref(&job)).await;
        assert!(!second.any_failed(), "{:?}", second.jobs);
        let mut now_expected = ids(&walk(sim.base_url(), json!({"token": token}), None).await);
        now_expected.sort_unstable();
        let added = (now_expected.len() - expected.len()) as u64;
        assert!(added > 0, "a day brought swaps");
        assert_eq!(second.jobs[0].rows_added, added);
        assert_eq!(lake_ids(&lake), now_expected, "no gap, no duplicate");
        assert!(lake.verify().unwrap().is_ok());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_simulator_refuses_what_it_cannot_do() {
    bounded(async {
        let fixed = fixed(SEED).await;
        assert!(!fixed.is_live());
        assert!(fixed.advance(1).is_err(), "a fixed simulator has no clock");
        let bad = |live: LiveConfig, scale: Scale| SimConfig {
            scale,
            live: Some(live),
            ..SimConfig::default()
        };
        for config in [
            bad(
                LiveConfig {
                    speed: 0.0,
                    ..LiveConfig::default()
                },
                Scale::Tiny,
            ),
            bad(
                LiveConfig {
                    horizon_days: 0,
                    ..LiveConfig::default()
                },
                Scale::Tiny,
            ),
            bad(LiveConfig::default(), Scale::Large),
        ] {
            let e = Simulator::start(config).await.expect_err("refused");
            let text = e.to_string();
            assert!(
                text.contains("speed") || text.contains("horizon") || text.contains("scale"),
                "{text}"
            );
        }
        // A cursor of a swap that is not there yet is refused like any unknown cursor.
        let market = SyntheticMarket::generate_live(SEED, Scale::Tiny, 30).unwrap();
        assert!(
            market
                .at(fixed.now() - chrono::Duration::seconds(1))
                .is_err()
        );
        assert!(
            SyntheticMarket::generate(SEED, Scale::Tiny)
                .at(fixed.now())
                .is_err()
        );
    })
    .await;
}

#[tokio::test]
async fn the_command_runs_a_live_market_whose_now_moves() {
    bounded(async {
        use tokio::io::AsyncBufReadExt;
        let exe = env!("CARGO_BIN_EXE_dexlake");
        let mut child = tokio::process::Command::new(exe)
            .args([
                "sim", "--seed", "3", "--scale", "tiny", "--live", "--speed", "600",
            ])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("dexlake starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = lines.next_line().await.unwrap().expect("a first line");
        let base = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        let second = lines.next_line().await.unwrap().expect("a second line");
        assert!(second.starts_with("live: "), "{second}");
        assert!(second.contains("600"), "{second}");

        let a = served_catalog(&base).await;
        assert!(a["live"]["trading_until"].is_string(), "{a}");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let b = served_catalog(&base).await;
        let moved = (time(&b["now"]) - time(&a["now"])).num_seconds();
        // Two real seconds at 600 simulated seconds per second (and some scheduling slack).
        assert!(moved >= 1_000, "the clock moved {moved} s");
        child.kill().await.expect("the child stops");

        let out = tokio::process::Command::new(exe)
            .args(["sim", "--seed", "3", "--live", "--catalog"])
            .output()
            .await
            .expect("dexlake runs");
        assert!(out.status.success());
        let cat: Value = serde_json::from_slice(&out.stdout).expect("the catalog is JSON");
        assert_eq!(cat["now"], json!("2025-06-01T00:00:00Z"));
        assert!(cat["live"]["trading_until"].is_string());

        let out = tokio::process::Command::new(exe)
            .args(["sim", "--speed", "600", "--catalog"])
            .output()
            .await
            .expect("dexlake runs");
        assert!(!out.status.success(), "--speed needs --live");
    })
    .await;
}

#[tokio::test]
async fn the_command_says_huge_speeds_in_a_few_characters() {
    bounded(async {
        use tokio::io::AsyncBufReadExt;
        let exe = env!("CARGO_BIN_EXE_dexlake");
        let mut child = tokio::process::Command::new(exe)
            .args([
                "sim", "--seed", "3", "--scale", "tiny", "--live", "--speed", "1e308",
            ])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("dexlake starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        lines.next_line().await.unwrap().expect("a first line");
        let second = lines.next_line().await.unwrap().expect("a second line");
        assert!(second.contains("runs 1e308 simulated seconds"), "{second}");
        assert!(second.len() < 300, "{second}");
        child.kill().await.expect("the child stops");

        // A refused one too.
        let out = tokio::process::Command::new(exe)
            .args(["sim", "--live", "--speed=-1e308", "--catalog"])
            .output()
            .await
            .expect("dexlake runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(err.contains("live speed -1e308 must be"), "{err}");
        assert!(err.len() < 300, "{err}");
    })
    .await;
}
