//! The simulator over real HTTP on loopback: conformance of the raw JSON of every operation to
//! the interface's field lists and types, every error status with its exact body, and the
//! consistency of derived answers with the swaps they come from.

use crate::common;
use common::number_texts;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use dexlake::sim::{DEMO_KEY, FREE_KEY, Scale, SimConfig, Simulator};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, f)
        .await
        .expect("the test finished within its time bound")
}

async fn start(seed: u64) -> Simulator {
    Simulator::start(SimConfig {
        seed,
        scale: Scale::Tiny,
        ..SimConfig::default()
    })
    .await
    .expect("the simulator starts")
}

struct Reply {
    status: u16,
    retry_after: Option<String>,
    text: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).expect("the body is JSON")
    }
}

async fn call_raw(base: &str, path: &str, key: Option<&str>, body: &str) -> Reply {
    let client = reqwest::Client::new();
    let mut req = client
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(k) = key {
        req = req.header("X-Api-Key", k);
    }
    let resp = req.send().await.expect("the request reaches the simulator");
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("ASCII header").to_owned());
    let text = resp.text().await.expect("the body is readable");
    Reply {
        status,
        retry_after,
        text,
    }
}

async fn call(base: &str, path: &str, body: Value) -> Value {
    let r = call_raw(base, path, Some(DEMO_KEY), &body.to_string()).await;
    assert_eq!(r.status, 200, "{path} {body}: {}", r.text);
    r.json()
}

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
const EVM_PRICE: &str = "/v1/evm/dex/prices/get-price";

/// Wire types of the interface.
#[derive(Clone, Copy, Debug)]
enum T {
    Int,
    Num,
    Str,
    Time,
    Bool,
}

fn check(v: &Value, t: T, what: &str) {
    let ok = match t {
        T::Int => v.is_i64() || v.is_u64(),
        T::Num => v.as_f64().is_some_and(f64::is_finite),
        T::Str => v.is_string(),
        T::Bool => v.is_boolean(),
        T::Time => v
            .as_str()
            .is_some_and(|s| s.ends_with('Z') && DateTime::parse_from_rfc3339(s).is_ok()),
    };
    assert!(ok, "{what}: expected {t:?}, got {v}");
}

/// Checks that `obj` has exactly the members of `fields` with their types.
fn exact(obj: &Value, fields: &[(&str, T)], what: &str) {
    let map = obj
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object: {obj}"));
    let expected: HashSet<&str> = fields.iter().map(|(k, _)| *k).collect();
    let got: HashSet<&str> = map.keys().map(String::as_str).collect();
    assert_eq!(got, expected, "{what}: members differ");
    for (k, t) in fields {
        check(&map[*k], *t, &format!("{what}.{k}"));
    }
}

const SWAP_FIELDS: &[(&str, T)] = &[
    ("id", T::Int),
    ("swap_type", T::Str),
    ("protocol", T::Str),
    ("wallet_address", T::Str),
    ("pool_address", T::Str),
    ("token_address_in", T::Str),
    ("token_address_out", T::Str),
    ("token_amount_in", T::Num),
    ("token_amount_out", T::Num),
    ("token_price_in", T::Num),
    ("token_price_out", T::Num),
    ("pre_token_balance_in", T::Num),
    ("pre_token_balance_out", T::Num),
    ("post_token_balance_in", T::Num),
    ("post_token_balance_out", T::Num),
    ("usd_amount_in", T::Num),
    ("usd_amount_out", T::Num),
    ("block_slot", T::Int),
    ("block_time", T::Time),
    ("tx_hash", T::Str),
];

const TRADE_FIELDS: &[(&str, T)] = &[
    ("id", T::Int),
    ("protocol", T::Str),
    ("swap_type", T::Str),
    ("wallet_address", T::Str),
    ("token_address", T::Str),
    ("quote_address", T::Str),
    ("position_address", T::Str),
    ("direction", T::Str),
    ("position_state", T::Str),
    ("token_amount", T::Num),
    ("quote_amount", T::Num),
    ("native_amount", T::Num),
    ("usd_amount", T::Num),
    ("pre_token_balance", T::Num),
    ("post_token_balance", T::Num),
    ("token_price", T::Num),
    ("quote_price", T::Num),
    ("token_mcap", T::Num),
    ("block_slot", T::Int),
    ("block_time", T::Time),
    ("tx_hash", T::Str),
];

const CANDLE_FIELDS: &[(&str, T)] = &[
    ("timestamp", T::Time),
    ("open", T::Num),
    ("high", T::Num),
    ("low", T::Num),
    ("close", T::Num),
    ("volume", T::Num),
    ("count", T::Int),
];

const MARKET_FIELDS: &[(&str, T)] = &[
    ("fdv", T::Num),
    ("market_cap", T::Num),
    ("price", T::Num),
    ("liquidity", T::Num),
    ("holders", T::Int),
    ("total_supply", T::Num),
    ("circulating_supply", T::Num),
    ("top_holdings", T::Num),
    ("dev_holdings", T::Num),
];

const METRIC_INTS: [&str; 10] = [
    "avg_holding_duration",
    "makers_count",
    "buyers_count",
    "sellers_count",
    "buy_count",
    "sell_count",
    "win_position_count",
    "loss_position_count",
    "trade_count",
    "position_count",
];

const METRIC_NUMBERS: [&str; 35] = [
    "largest_trade_win",
    "largest_trade_loss",
    "avg_buy_size",
    "avg_sell_size",
    "avg_price",
    "avg_buy_price",
    "avg_sell_price",
    "avg_buy_mcap",
    "avg_sell_mcap",
    "avg_trade_pnl",
    "avg_trade_roi",
    "avg_wallet_winrate",
    "avg_wallet_pnl",
    "avg_wallet_roi",
    "win_pnl",
    "loss_pnl",
    "buy_volume",
    "sell_volume",
    "pnl",
    "volume",
    "volume_weighted_winrate",
    "volume_weighted_roi",
    "wallet_hit_ratio",
    "profit_factor",
    "win_loss_size_ratio",
    "pnl_volume_ratio",
    "price_stability",
    "price_volatility",
    "roi_stability",
    "roi_volatility",
    "pnl_volatility",
    "pnl_stability",
    "sharpe_ratio",
    "sortino_ratio",
    "max_drawdown",
];

fn check_metrics(m: &Value, what: &str) {
    let map = m.as_object().expect("metrics window is an object");
    assert_eq!(map.len(), 46, "{what}: 46 fields");
    for k in METRIC_INTS {
        check(&map[k], T::Int, &format!("{what}.{k}"));
    }
    for k in METRIC_NUMBERS {
        check(&map[k], T::Num, &format!("{what}.{k}"));
    }
    let dist = map["wallet_roi_distribution"]
        .as_object()
        .expect("wallet_roi_distribution is an object");
    let keys: HashSet<&str> = dist.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        HashSet::from(["gt_500", "200_500", "0_200", "neg50_0", "lt_neg50_0"])
    );
    for v in dist.values() {
        check(v, T::Int, &format!("{what}.wallet_roi_distribution"));
    }
}

fn check_metadata(m: &Value, what: &str) {
    let allowed: HashMap<&str, T> = [
        ("last_trade_at", T::Time),
        ("created_at", T::Time),
        ("symbol", T::Str),
        ("name", T::Str),
        ("image", T::Str),
        ("verified", T::Bool),
        ("creator_address", T::Str),
        ("twitter", T::Str),
        ("discord", T::Str),
        ("website", T::Str),
        ("telegram", T::Str),
    ]
    .into_iter()
    .collect();
    let map = m.as_object().expect("metadata is an object");
    for (k, v) in map {
        let t = allowed
            .get(k.as_str())
            .unwrap_or_else(|| panic!("{what}: unknown member {k}"));
        check(v, *t, &format!("{what}.{k}"));
    }
    // Every member is sent, an empty string standing for a link the token does not have.
    for k in allowed.keys() {
        assert!(map.contains_key(*k), "{what}: {k} missing");
    }
}

fn members(v: &Value) -> HashSet<&str> {
    v.as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

fn stats_fields(evm: bool) -> Vec<(String, T)> {
    let mut f = vec![
        ("token_address".to_owned(), T::Str),
        ("pool_address".to_owned(), T::Str),
        ("usd_price".to_owned(), T::Num),
    ];
    for p in ["5m", "1h", "6h", "12h", "1d", "7d", "30d"] {
        for k in ["usd_price_change_", "usd_volume_", "usd_volume_change_"] {
            f.push((format!("{k}{p}"), T::Num));
        }
    }
    if evm {
        f.push(("block_number".to_owned(), T::Int));
    } else {
        f.push(("block_slot".to_owned(), T::Int));
    }
    f.push(("block_time".to_owned(), T::Time));
    f
}

fn catalog(sim: &Simulator) -> Value {
    serde_json::to_value(sim.market().catalog()).expect("the catalog serialises")
}

fn top_token(cat: &Value) -> String {
    cat["altchain"]["tokens"][0]["address"]
        .as_str()
        .expect("address")
        .to_owned()
}

fn evm_token(cat: &Value, chain: &str) -> (String, String) {
    let t = &cat["evm"][chain]["tokens"][0];
    (
        t["address"].as_str().expect("address").to_owned(),
        t["pools"][0].as_str().expect("pool").to_owned(),
    )
}

/// Every page of a paged operation, checking count, cursors and order on the way.
async fn all_pages(base: &str, path: &str, mut body: Value) -> Vec<Value> {
    let mut items = Vec::new();
    let mut seen_cursors = HashSet::new();
    let mut count = None;
    loop {
        let page = call(base, path, body.clone()).await;
        let c = page["count"].as_i64().expect("count is an integer");
        assert_eq!(
            *count.get_or_insert(c),
            c,
            "count is the same on every page"
        );
        let data = page["data"].as_array().expect("data is an array");
        items.extend(data.iter().cloned());
        match &page["cursor"] {
            Value::Null => break,
            Value::String(cur) => {
                assert!(!data.is_empty(), "a page with a cursor has items");
                assert!(seen_cursors.insert(cur.clone()), "cursors never repeat");
                body["cursor"] = json!(cur);
            }
            other => panic!("cursor must be a string or null, got {other}"),
        }
    }
    assert_eq!(
        items.len() as i64,
        count.unwrap_or(0),
        "count = items over all pages"
    );
    items
}

fn key(item: &Value) -> (i64, i64) {
    (
        item["block_slot"].as_i64().expect("block_slot"),
        item["id"].as_i64().expect("id"),
    )
}

fn f(v: &Value) -> f64 {
    v.as_f64().expect("a number")
}

fn secs(v: &Value) -> i64 {
    DateTime::parse_from_rfc3339(v.as_str().expect("a time"))
        .expect("RFC 3339")
        .timestamp()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

#[tokio::test]
async fn every_operation_answers_with_the_interfaces_fields_and_types() {
    bounded(async {
        let sim = start(7).await;
        let base = sim.base_url();
        let cat = catalog(&sim);
        let token = top_token(&cat);
        let wallet = cat["altchain"]["wallets"][0]["address"]
            .as_str()
            .expect("wallet")
            .to_owned();

        let page = call(base, SWAPS, json!({"token": token, "limit": 5})).await;
        assert_eq!(members(&page), HashSet::from(["count", "cursor", "data"]));
        check(&page["count"], T::Int, "swaps.count");
        check(&page["cursor"], T::Str, "swaps.cursor");
        assert_eq!(page["data"].as_array().expect("data").len(), 5);
        for s in page["data"].as_array().expect("data") {
            exact(s, SWAP_FIELDS, "swap");
            let st = s["swap_type"].as_str().expect("swap_type");
            assert!(["quote_token", "token_quote"].contains(&st), "{st}");
        }

        let page = call(base, TRADES, json!({"wallet": wallet, "limit": 5})).await;
        for t in page["data"].as_array().expect("data") {
            exact(t, TRADE_FIELDS, "trade");
            assert!(["buy", "sell"].contains(&t["direction"].as_str().expect("direction")));
            assert!(
                ["open", "trade", "close"]
                    .contains(&t["position_state"].as_str().expect("position_state"))
            );
        }

        let candles = call(
            base,
            CANDLES,
            json!({"token": token, "interval": 3600, "to": "2025-06-01T00:00:00Z", "count": 5}),
        )
        .await;
        let candles = candles.as_array().expect("candles are an array");
        assert_eq!(candles.len(), 5);
        for c in candles {
            exact(c, CANDLE_FIELDS, "candle");
        }

        let prices = call(base, ALT_PRICE, json!({"tokens": [token]})).await;
        exact(
            &prices[0],
            &[
                ("token_address", T::Str),
                ("pool_address", T::Str),
                ("usd_price", T::Num),
                ("block_slot", T::Int),
                ("block_time", T::Time),
            ],
            "altchain price",
        );

        let stats = call(base, ALT_STATS, json!({"tokens": [token]})).await;
        let fields = stats_fields(false);
        let fields: Vec<(&str, T)> = fields.iter().map(|(k, t)| (k.as_str(), *t)).collect();
        exact(&stats[0], &fields, "altchain price stats");

        let p = call(base, PORTFOLIO, json!({"wallet": wallet})).await;
        assert_eq!(members(&p), HashSet::from(["value", "tokens"]));
        check(&p["value"], T::Num, "portfolio.value");
        assert!(!p["tokens"].as_array().expect("tokens").is_empty());
        for t in p["tokens"].as_array().expect("tokens") {
            exact(
                t,
                &[
                    ("token", T::Str),
                    ("balance", T::Num),
                    ("price", T::Num),
                    ("value", T::Num),
                ],
                "portfolio token",
            );
        }

        let found = call(
            base,
            SEARCH,
            json!({
                "limit": 3,
                "options": {"include_metadata": true, "include_market": true,
                            "include_labels": true, "include_metrics": ["7d", "1d", "6h", "1h", "5m", "1m"]},
                "sort": {"field": "metrics.1d.volume", "direction": "desc"}
            }),
        )
        .await;
        check(&found["count"], T::Int, "search.count");
        for prof in found["data"].as_array().expect("data") {
            let map = prof.as_object().expect("profile");
            let keys: HashSet<&str> = map.keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                HashSet::from([
                    "updated_at",
                    "synced_at",
                    "token_address",
                    "labels",
                    "matched_labels",
                    "dynamic_labels",
                    "metadata",
                    "market",
                    "metrics"
                ])
            );
            check(&prof["updated_at"], T::Time, "updated_at");
            check(&prof["synced_at"], T::Time, "synced_at");
            for l in prof["labels"].as_array().expect("labels") {
                assert!(["trending", "hot", "new", "popular"].contains(&l.as_str().expect("label")));
                assert!(prof["matched_labels"][l.as_str().expect("label")].is_array());
            }
            check_metadata(&prof["metadata"], "search.metadata");
            exact(&prof["market"], MARKET_FIELDS, "market");
            let metrics = prof["metrics"].as_object().expect("metrics");
            assert_eq!(metrics.len(), 6);
            for (w, m) in metrics {
                check_metrics(m, &format!("search.metrics.{w}"));
            }
        }

        let (evm_tok, evm_pool) = evm_token(&cat, "8453");
        let prof = call(
            base,
            EVM_PROFILE,
            json!({"chain_id": 8453, "token": evm_tok,
                   "options": {"include_metadata": true, "include_metrics": ["1d", "5m"]}}),
        )
        .await;
        let map = prof.as_object().expect("profile");
        let keys: HashSet<&str> = map.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            HashSet::from([
                "updated_at",
                "synced_at",
                "chain_id",
                "token_address",
                "metadata",
                "metrics"
            ])
        );
        check(&prof["chain_id"], T::Int, "chain_id");
        check_metadata(&prof["metadata"], "evm.metadata");
        let windows: HashSet<&str> = prof["metrics"]
            .as_object()
            .expect("metrics")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(windows, HashSet::from(["1d", "5m"]));
        check_metrics(&prof["metrics"]["1d"], "evm.metrics.1d");
        let bare = call(base, EVM_PROFILE, json!({"chain_id": 8453, "token": evm_tok})).await;
        assert!(bare.get("metadata").is_none(), "metadata only when asked");

        let history = call(
            base,
            EVM_HISTORY,
            json!({"chain_id": 8453, "tokens": [evm_tok], "pools": [evm_pool],
                   "from": "2025-05-25T00:00:00Z", "interval": 86400}),
        )
        .await;
        let history = history.as_array().expect("history is an array");
        assert_eq!(history.len(), 2);
        for series in history {
            let map = series.as_object().expect("series");
            assert_eq!(map.len(), 3);
            check(&series["token_address"], T::Str, "series.token_address");
            check(&series["pool_address"], T::Str, "series.pool_address");
            assert!(!series["prices"].as_array().expect("prices").is_empty());
            for p in series["prices"].as_array().expect("prices") {
                exact(
                    p,
                    &[
                        ("timestamp", T::Time),
                        ("usd_price", T::Num),
                        ("usd_volume", T::Num),
                    ],
                    "price point",
                );
            }
        }

        let stats = call(base, EVM_STATS, json!({"chain_id": 1, "tokens": [evm_token(&cat, "1").0]}))
            .await;
        let fields = stats_fields(true);
        let fields: Vec<(&str, T)> = fields.iter().map(|(k, t)| (k.as_str(), *t)).collect();
        exact(&stats[0], &fields, "evm price stats");

        let prices = call(base, EVM_PRICE, json!({"chain_id": 1, "pools": [evm_token(&cat, "1").1]}))
            .await;
        exact(
            &prices[0],
            &[
                ("chain_id", T::Int),
                ("token_address", T::Str),
                ("pool_address", T::Str),
                ("usd_price", T::Num),
                ("block_number", T::Int),
                ("block_time", T::Time),
            ],
            "evm price",
        );
        sim.shutdown().await;
    })
    .await;
}

const BAD: &str = r#"{"error":"Bad request: Invalid request parameters"}"#;
const UNAUTHORIZED: &str = r#"{"error":"Unauthorized: Invalid or missing API key"}"#;
const FORBIDDEN: &str = r#"{"error":"Forbidden: Access denied for the current API plan"}"#;
const TOO_MANY: &str = r#"{"error":"Too many requests: Rate limit exceeded"}"#;
const INTERNAL: &str = r#"{"error":"Internal server error"}"#;

/// A valid body for every operation.
fn valid_bodies(cat: &Value) -> Vec<(&'static str, Value)> {
    let token = top_token(cat);
    let wallet = cat["altchain"]["wallets"][0]["address"].clone();
    let (evm_tok, _) = evm_token(cat, "1");
    vec![
        (EVM_PROFILE, json!({"chain_id": 1, "token": evm_tok})),
        (
            EVM_HISTORY,
            json!({"chain_id": 1, "tokens": [evm_tok], "from": "2025-05-30T00:00:00Z", "interval": 3600}),
        ),
        (EVM_STATS, json!({"chain_id": 1, "tokens": [evm_tok]})),
        (EVM_PRICE, json!({"chain_id": 1, "tokens": [evm_tok]})),
        (SEARCH, json!({"limit": 2})),
        (
            CANDLES,
            json!({"token": token, "interval": 60, "from": "2025-05-31T00:00:00Z"}),
        ),
        (SWAPS, json!({"token": token, "limit": 3})),
        (TRADES, json!({"token": token, "limit": 3})),
        (ALT_STATS, json!({"tokens": [token]})),
        (ALT_PRICE, json!({"tokens": [token]})),
        (PORTFOLIO, json!({"wallet": wallet})),
    ]
}

#[tokio::test]
async fn keys_and_plans_are_enforced_on_every_operation() {
    bounded(async {
        let sim = start(3).await;
        let base = sim.base_url();
        let cat = catalog(&sim);
        for (path, body) in valid_bodies(&cat) {
            let body = body.to_string();
            let r = call_raw(base, path, None, &body).await;
            assert_eq!(
                (r.status, r.text.as_str()),
                (401, UNAUTHORIZED),
                "{path} no key"
            );
            let r = call_raw(base, path, Some("wrong-key"), &body).await;
            assert_eq!(
                (r.status, r.text.as_str()),
                (401, UNAUTHORIZED),
                "{path} bad key"
            );
            let r = call_raw(base, path, Some(DEMO_KEY), &body).await;
            assert_eq!(r.status, 200, "{path} demo key: {}", r.text);
            let r = call_raw(base, path, Some(FREE_KEY), &body).await;
            if path == SEARCH || path == PORTFOLIO {
                assert_eq!(
                    (r.status, r.text.as_str()),
                    (403, FORBIDDEN),
                    "{path} free key"
                );
            } else {
                assert_eq!(r.status, 200, "{path} free key: {}", r.text);
            }
        }
        let stats = sim.stats();
        assert_eq!(stats.total, 44);
        assert_eq!(
            stats.count(dexlake::api::requests::Operation::AltGetSwaps, 401),
            2
        );
        assert_eq!(
            stats.count(dexlake::api::requests::Operation::AltGetPortfolio, 403),
            1
        );
        assert_eq!(sim.requests_served(), 44);
        sim.shutdown().await;
    })
    .await;
}

/// The member a request refusal names: the text between the first pair of backticks of
/// `invalid <operation> request: `<member>` <reason>`.
fn refused_member(reason: &str) -> Option<String> {
    let rest = reason.split_once("request: `")?.1;
    Some(rest.split_once('`')?.0.to_owned())
}

/// Sends `body` to the simulator (which must answer 400), then decodes it as the client's
/// request type and checks that the client's `validate()` refuses it naming the same member.
async fn refused_alike<R: serde::de::DeserializeOwned>(
    sim: &Simulator,
    path: &str,
    body: &Value,
    validate: impl Fn(&R) -> dexlake::Result<()>,
) {
    let r = call_raw(sim.base_url(), path, Some(DEMO_KEY), &body.to_string()).await;
    assert_eq!((r.status, r.text.as_str()), (400, BAD), "{path} {body}");
    let why = sim.last_rejection().expect("the rejection is recorded");
    let server_member = refused_member(&why).unwrap_or_else(|| panic!("{why}"));
    let request: R = serde_json::from_value(body.clone())
        .unwrap_or_else(|e| panic!("{path} {body}: the client can build it ({e})"));
    match validate(&request) {
        Err(dexlake::Error::InvalidRequest { member, .. }) => {
            assert_eq!(member, server_member, "{path} {body}: {why}");
        }
        other => panic!("{path} {body}: the simulator refused it ({why}), validate gave {other:?}"),
    }
}

#[tokio::test]
async fn the_clients_validate_refuses_what_the_simulator_refuses() {
    use dexlake::api::profile_query::SearchRequest;
    use dexlake::api::requests::{
        AltPricesRequest, CandlesRequest, EvmPricesRequest, GetProfileRequest, Operation,
        PortfolioRequest, PriceHistoryRequest, SwapsRequest, TradesRequest,
    };
    bounded(async {
        let sim = start(3).await;
        let cat = catalog(&sim);
        let token = top_token(&cat);
        let (evm_tok, _) = evm_token(&cat, "1");
        let many: Vec<String> = (0..1001).map(|i| format!("t{i}")).collect();
        // A cursor the simulator issued for the default sort (token_address ascending).
        let first = call(sim.base_url(), SEARCH, json!({"limit": 2})).await;
        let cursor = first["cursor"].as_str().expect("a first page of 2 has a cursor").to_owned();

        let search: &[Value] = &[
            json!({"limit": 0}),
            json!({"limit": 101}),
            json!({"query": {"text": ""}}),
            json!({"query": {"text": "x", "fields": []}}),
            json!({"query": {"text": "x", "fields": ["metadata.name", "market"]}}),
            json!({"sort": {"field": "", "direction": "asc"}}),
            json!({"sort": {"field": "market..fdv", "direction": "asc"}}),
            json!({"sort": {"field": "market.fdv.", "direction": "desc"}}),
            json!({"sort": {"field": "market.fdv", "direction": "up"}}),
            json!({"dynamic_labels": {" ": {"market.fdv": {"$gt": 1}}}}),
            json!({"cursor": ""}),
            json!({"cursor": cursor, "sort": {"field": "market.fdv", "direction": "asc"}}),
            json!({"cursor": cursor, "sort": {"field": "token_address", "direction": "desc"}}),
        ];
        for body in search {
            refused_alike(&sim, SEARCH, body, SearchRequest::validate).await;
        }
        for body in [
            json!({"token": token, "limit": 0}),
            json!({"token": token, "limit": 101}),
            json!({"token": token, "cursor": ""}),
            json!({}),
        ] {
            refused_alike(&sim, SWAPS, &body, SwapsRequest::validate).await;
        }
        for body in [json!({}), json!({"token": token, "limit": 101})] {
            refused_alike(&sim, TRADES, &body, TradesRequest::validate).await;
        }
        for body in [
            json!({"token": token, "interval": 0}),
            json!({"token": token, "interval": 60, "count": 5}),
            json!({"token": token, "interval": 60, "from": "2025-05-02T00:00:00Z", "to": "2025-05-01T00:00:00Z"}),
            json!({"interval": 60}),
        ] {
            refused_alike(&sim, CANDLES, &body, CandlesRequest::validate).await;
        }
        for body in [json!({"tokens": many}), json!({"tokens": []}), json!({})] {
            refused_alike(&sim, ALT_PRICE, &body, |r: &AltPricesRequest| r.validate(Operation::AltGetPrice)).await;
            refused_alike(&sim, ALT_STATS, &body, |r: &AltPricesRequest| r.validate(Operation::AltGetPriceStats)).await;
        }
        refused_alike(&sim, PORTFOLIO, &json!({"wallet": ""}), PortfolioRequest::validate).await;
        for body in [json!({"chain_id": 1, "tokens": many}), json!({"chain_id": 1})] {
            refused_alike(&sim, EVM_PRICE, &body, |r: &EvmPricesRequest| r.validate(Operation::EvmGetPrice)).await;
            refused_alike(&sim, EVM_STATS, &body, |r: &EvmPricesRequest| r.validate(Operation::EvmGetPriceStats)).await;
        }
        refused_alike(&sim, EVM_PROFILE, &json!({"chain_id": 1, "token": ""}), GetProfileRequest::validate).await;
        for body in [
            json!({"chain_id": 1, "tokens": (0..101).map(|i| format!("t{i}")).collect::<Vec<_>>(),
                   "from": "2025-05-30T00:00:00Z", "interval": 60}),
            json!({"chain_id": 1, "tokens": [evm_tok], "from": "2025-05-30T00:00:00Z", "interval": 0}),
            json!({"chain_id": 1, "from": "2025-05-30T00:00:00Z", "interval": 60}),
        ] {
            refused_alike(&sim, EVM_HISTORY, &body, PriceHistoryRequest::validate).await;
        }
        // What only the service can know is not the client's to check: whether a chain is
        // supported, and cursors it did not issue (opaque to a client of the real service).
        let r = call_raw(sim.base_url(), SEARCH, Some(DEMO_KEY), &json!({"cursor": "nonsense"}).to_string()).await;
        assert_eq!(r.status, 400);
        let opaque: SearchRequest = serde_json::from_value(json!({"cursor": "nonsense"})).unwrap();
        assert!(opaque.validate().is_ok());
        sim.shutdown().await;
    })
    .await;
}

/// A body is a JSON object: the members of a valid request given as an array, in order (which
/// serde's derive would read member by member), are refused on every operation.
#[tokio::test]
async fn a_body_that_is_an_array_is_refused_on_every_operation() {
    bounded(async {
        let sim = start(3).await;
        let base = sim.base_url();
        let cat = catalog(&sim);
        for (path, body) in valid_bodies(&cat) {
            let members: Vec<Value> = body
                .as_object()
                .expect("an object")
                .values()
                .cloned()
                .collect();
            let array = Value::Array(members).to_string();
            let r = call_raw(base, path, Some(DEMO_KEY), &array).await;
            assert_eq!(r.status, 400, "{path} {array}: {}", r.text);
        }
    })
    .await;
}

#[tokio::test]
async fn bad_requests_get_400_with_the_interfaces_text() {
    bounded(async {
        let sim = start(3).await;
        let base = sim.base_url();
        let cat = catalog(&sim);
        let token = top_token(&cat);
        let (evm_tok, _) = evm_token(&cat, "1");
        let many: Vec<String> = (0..1001).map(|i| format!("t{i}")).collect();
        let cases: Vec<(&str, String)> = vec![
            (SWAPS, "{".to_owned()),
            (SWAPS, "[]".to_owned()),
            (SWAPS, String::new()),
            (SWAPS, json!({"token": 5}).to_string()),
            (SWAPS, json!({"token": token, "bogus": 1}).to_string()),
            (SWAPS, json!({"token": token, "limit": 0}).to_string()),
            (SWAPS, json!({"token": token, "limit": 101}).to_string()),
            (SWAPS, json!({"token": token, "limit": "10"}).to_string()),
            (SWAPS, json!({"token": token, "cursor": "not-a-cursor"}).to_string()),
            (SWAPS, json!({"token": token, "cursor": "00000000000000000000000000000000"}).to_string()),
            (SWAPS, json!({}).to_string()),
            (TRADES, json!({"pool": "x"}).to_string()),
            (TRADES, json!({"token": token, "limit": -1}).to_string()),
            (CANDLES, json!({"token": token}).to_string()),
            (CANDLES, json!({"token": token, "interval": 0}).to_string()),
            (CANDLES, json!({"token": token, "interval": -60}).to_string()),
            (CANDLES, json!({"token": token, "interval": 60, "count": 5}).to_string()),
            (
                CANDLES,
                json!({"token": token, "interval": 60, "from": "2025-05-02T00:00:00Z", "to": "2025-05-01T00:00:00Z"}).to_string(),
            ),
            (CANDLES, json!({"token": token, "interval": 60, "from": "yesterday"}).to_string()),
            (CANDLES, json!({"interval": 60}).to_string()),
            (ALT_PRICE, json!({"tokens": many}).to_string()),
            (ALT_PRICE, json!({"tokens": []}).to_string()),
            (ALT_PRICE, json!({}).to_string()),
            (ALT_STATS, json!({"tokens": token}).to_string()),
            (PORTFOLIO, json!({}).to_string()),
            (SEARCH, json!({"limit": 0}).to_string()),
            (SEARCH, json!({"filter": {"market.liquidity": {"$gt": "0"}}}).to_string()),
            (SEARCH, json!({"filter": {"market.liquidity": {}}}).to_string()),
            (SEARCH, json!({"sort": {"field": "market.fdv", "direction": "up"}}).to_string()),
            (SEARCH, json!({"cursor": "nonsense"}).to_string()),
            (SEARCH, json!({"unknown": true}).to_string()),
            (EVM_PRICE, json!({"chain_id": 999, "tokens": [evm_tok]}).to_string()),
            (EVM_PRICE, json!({"chain_id": "1", "tokens": [evm_tok]}).to_string()),
            (EVM_STATS, json!({"chain_id": 1, "tokens": many}).to_string()),
            (EVM_PROFILE, json!({"chain_id": 999, "token": evm_tok}).to_string()),
            (EVM_PROFILE, json!({"chain_id": 1}).to_string()),
            (
                EVM_PROFILE,
                json!({"chain_id": 1, "token": evm_tok, "options": {"include_metrics": ["2d"]}}).to_string(),
            ),
            (
                EVM_PROFILE,
                json!({"chain_id": 1, "token": evm_tok, "options": {"extra": true}}).to_string(),
            ),
            (
                EVM_HISTORY,
                json!({"chain_id": 1, "tokens": [evm_tok], "interval": 60}).to_string(),
            ),
            (
                EVM_HISTORY,
                json!({"chain_id": 1, "tokens": (0..101).map(|i| format!("t{i}")).collect::<Vec<_>>(),
                       "from": "2025-05-30T00:00:00Z", "interval": 60}).to_string(),
            ),
            (
                EVM_HISTORY,
                json!({"chain_id": 1, "tokens": [evm_tok], "from": "2025-05-30T00:00:00Z", "interval": 0}).to_string(),
            ),
        ];
        for (path, body) in &cases {
            let r = call_raw(base, path, Some(DEMO_KEY), body).await;
            assert_eq!((r.status, r.text.as_str()), (400, BAD), "{path} {body}");
            let why = sim.last_rejection().expect("the rejection is recorded");
            assert!(why.contains(" 400: "), "{why}");
        }
        let r = call_raw(base, SWAPS, Some(DEMO_KEY), &json!({"token": token, "limit": 101}).to_string()).await;
        assert_eq!(r.status, 400);
        let why = sim.last_rejection().expect("the rejection is recorded");
        assert!(why.starts_with("altchain.get-swaps 400") && why.contains("limit"), "{why}");
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_rate_limit_answers_429_with_retry_after() {
    bounded(async {
        let sim = Simulator::start(SimConfig {
            seed: 1,
            rate_limit: Some(2.0),
            ..SimConfig::default()
        })
        .await
        .expect("the simulator starts");
        let base = sim.base_url();
        let body = json!({"tokens": [top_token(&catalog(&sim))]}).to_string();
        let mut statuses = Vec::new();
        let mut retry = None;
        for _ in 0..4 {
            let r = call_raw(base, ALT_PRICE, Some(DEMO_KEY), &body).await;
            if r.status == 429 {
                assert_eq!(r.text, TOO_MANY);
                retry = r.retry_after.clone();
            }
            statuses.push(r.status);
        }
        assert_eq!(&statuses[..2], &[200, 200], "the burst is served");
        assert!(statuses[2..].contains(&429), "{statuses:?}");
        let secs: u64 = retry
            .expect("429 carries Retry-After")
            .parse()
            .expect("Retry-After is whole seconds");
        assert!(secs >= 1);
        // The other key has its own bucket.
        let r = call_raw(base, ALT_PRICE, Some(FREE_KEY), &body).await;
        assert_eq!(r.status, 200);
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn injected_faults_answer_500_and_429() {
    bounded(async {
        let failing = Simulator::start(SimConfig {
            fail_rate: 1.0,
            ..SimConfig::default()
        })
        .await
        .expect("the simulator starts");
        let body = json!({"tokens": [top_token(&catalog(&failing))]}).to_string();
        let r = call_raw(failing.base_url(), ALT_PRICE, Some(DEMO_KEY), &body).await;
        assert_eq!((r.status, r.text.as_str()), (500, INTERNAL));
        failing.shutdown().await;

        let throttled = Simulator::start(SimConfig {
            throttle_rate: 1.0,
            ..SimConfig::default()
        })
        .await
        .expect("the simulator starts");
        let r = call_raw(throttled.base_url(), ALT_PRICE, Some(DEMO_KEY), &body).await;
        assert_eq!((r.status, r.text.as_str()), (429, TOO_MANY));
        assert_eq!(r.retry_after.as_deref(), Some("1"));
        throttled.shutdown().await;

        // Half the requests fail, in the same pattern for the same fault seed.
        let mut patterns = Vec::new();
        for _ in 0..2 {
            let sim = Simulator::start(SimConfig {
                fail_rate: 0.5,
                fault_seed: Some(9),
                ..SimConfig::default()
            })
            .await
            .expect("the simulator starts");
            let mut p = Vec::new();
            for _ in 0..40 {
                p.push(
                    call_raw(sim.base_url(), ALT_PRICE, Some(DEMO_KEY), &body)
                        .await
                        .status,
                );
            }
            sim.shutdown().await;
            patterns.push(p);
        }
        assert_eq!(patterns[0], patterns[1]);
        let fails = patterns[0].iter().filter(|&&s| s == 500).count();
        assert!((8..=32).contains(&fails), "{fails} of 40 failed");
        assert!(patterns[0].iter().all(|&s| s == 200 || s == 500));
    })
    .await;
}

#[tokio::test]
async fn paging_returns_every_match_exactly_once_newest_first() {
    bounded(async {
        let sim = start(11).await;
        let base = sim.base_url();
        let cat = catalog(&sim);
        let token = top_token(&cat);
        let swaps = all_pages(base, SWAPS, json!({"token": token, "limit": 100})).await;
        assert!(swaps.len() > 300, "the top token has many swaps");
        let keys: Vec<(i64, i64)> = swaps.iter().map(key).collect();
        assert!(
            keys.windows(2).all(|w| w[0] > w[1]),
            "strictly newest first"
        );
        let ids: HashSet<i64> = keys.iter().map(|k| k.1).collect();
        assert_eq!(ids.len(), swaps.len(), "no item twice");
        assert_eq!(
            swaps.len() as u64,
            cat["altchain"]["tokens"][0]["swap_count"]
                .as_u64()
                .expect("count")
        );

        // Trades page the same way, one per swap, with the swap's id.
        let trades = all_pages(base, TRADES, json!({"token": token, "limit": 37})).await;
        let trade_ids: Vec<i64> = trades.iter().map(|t| key(t).1).collect();
        assert_eq!(trade_ids, keys.iter().map(|k| k.1).collect::<Vec<_>>());

        // A combined filter equals the filtered single-filter pages.
        let wallet = swaps[0]["wallet_address"]
            .as_str()
            .expect("wallet")
            .to_owned();
        let pool = swaps[0]["pool_address"].as_str().expect("pool").to_owned();
        let combined = all_pages(
            base,
            SWAPS,
            json!({"token": token, "wallet": wallet, "pool": pool, "limit": 3}),
        )
        .await;
        let expected: Vec<(i64, i64)> = swaps
            .iter()
            .filter(|s| s["wallet_address"] == json!(wallet) && s["pool_address"] == json!(pool))
            .map(key)
            .collect();
        assert_eq!(combined.iter().map(key).collect::<Vec<_>>(), expected);

        // A wallet's swaps span tokens and still come newest first, each once.
        let busiest = &cat["altchain"]["wallets"][0];
        let by_wallet = all_pages(
            base,
            SWAPS,
            json!({"wallet": busiest["address"], "limit": 100}),
        )
        .await;
        assert_eq!(
            by_wallet.len() as u64,
            busiest["swap_count"].as_u64().expect("count")
        );
        let keys: Vec<(i64, i64)> = by_wallet.iter().map(key).collect();
        assert!(
            keys.windows(2).all(|w| w[0] > w[1]),
            "strictly newest first"
        );
        let tokens: HashSet<&str> = by_wallet
            .iter()
            .map(|s| {
                if s["swap_type"] == json!("quote_token") {
                    s["token_address_out"].as_str().expect("token")
                } else {
                    s["token_address_in"].as_str().expect("token")
                }
            })
            .collect();
        assert!(tokens.len() > 1, "the busiest wallet trades several tokens");
        let wallet_trades = all_pages(
            base,
            TRADES,
            json!({"wallet": busiest["address"], "limit": 100}),
        )
        .await;
        assert_eq!(wallet_trades.iter().map(key).collect::<Vec<_>>(), keys);

        // An unknown address matches nothing, with no cursor.
        let none = call(base, SWAPS, json!({"wallet": "nobody"})).await;
        assert_eq!(none, json!({"count": 0, "cursor": null, "data": []}));
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn derived_answers_agree_with_the_swaps() {
    bounded(async {
        let sim = start(5).await;
        let base = sim.base_url();
        let cat = catalog(&sim);
        let token = top_token(&cat);
        let now = sim.market().now().timestamp();
        let mut swaps = all_pages(base, SWAPS, json!({"token": token, "limit": 100})).await;
        swaps.reverse();
        let trades: HashMap<i64, Value> =
            all_pages(base, TRADES, json!({"token": token, "limit": 100}))
                .await
                .into_iter()
                .map(|t| (key(&t).1, t))
                .collect();
        let price = |s: &Value| -> f64 {
            if s["token_address_out"] == json!(token) {
                f(&s["token_price_out"])
            } else {
                f(&s["token_price_in"])
            }
        };

        // Candles: what the swaps in each bucket imply.
        for interval in [60i64, 3_600, 86_400] {
            let from = secs(&swaps[0]["block_time"]);
            let candles = call(
                base,
                CANDLES,
                json!({"token": token, "interval": interval,
                       "from": DateTime::<Utc>::from_timestamp(from, 0).expect("time")}),
            )
            .await;
            let mut expected: BTreeMap<i64, (f64, f64, f64, f64, f64, i64)> = BTreeMap::new();
            for s in &swaps {
                let b = secs(&s["block_time"]).div_euclid(interval) * interval;
                let p = price(s);
                let v = f(&s["usd_amount_in"]);
                expected
                    .entry(b)
                    .and_modify(|c| {
                        c.1 = c.1.max(p);
                        c.2 = c.2.min(p);
                        c.3 = p;
                        c.4 += v;
                        c.5 += 1;
                    })
                    .or_insert((p, p, p, p, v, 1));
            }
            let candles = candles.as_array().expect("candles");
            assert_eq!(candles.len(), expected.len(), "interval {interval}");
            for (c, (b, e)) in candles.iter().zip(&expected) {
                assert_eq!(secs(&c["timestamp"]), *b);
                assert_eq!(f(&c["open"]), e.0);
                assert_eq!(f(&c["high"]), e.1);
                assert_eq!(f(&c["low"]), e.2);
                assert_eq!(f(&c["close"]), e.3);
                assert!(close(f(&c["volume"]), e.4), "{} vs {}", c["volume"], e.4);
                assert_eq!(c["count"].as_i64(), Some(e.5));
            }
            // `count` with `to` only: the last N of the same candles.
            let last = call(
                base,
                CANDLES,
                json!({"token": token, "interval": interval, "to": sim.market().now(), "count": 3}),
            )
            .await;
            let n = candles.len();
            assert_eq!(
                last.as_array().expect("candles")[..],
                candles[n.saturating_sub(3)..]
            );
        }

        // Latest price and stats come from the newest swap and the volumes in each period.
        let newest = swaps.last().expect("swaps");
        let p = call(base, ALT_PRICE, json!({"tokens": [token]})).await;
        assert_eq!(f(&p[0]["usd_price"]), price(newest));
        assert_eq!(p[0]["block_slot"], newest["block_slot"]);
        assert_eq!(p[0]["pool_address"], newest["pool_address"]);
        let stats = call(base, ALT_STATS, json!({"tokens": [token]})).await;
        for (suffix, period) in [
            ("5m", 300i64),
            ("1h", 3_600),
            ("1d", 86_400),
            ("7d", 604_800),
        ] {
            let in_period = |lo: i64, hi: i64| -> f64 {
                swaps
                    .iter()
                    .filter(|s| {
                        let t = secs(&s["block_time"]);
                        t > lo && t <= hi
                    })
                    .map(|s| f(&s["usd_amount_in"]))
                    .sum()
            };
            let v = in_period(now - period, now);
            let before = in_period(now - 2 * period, now - period);
            assert!(
                close(f(&stats[0][format!("usd_volume_{suffix}")]), v),
                "{suffix}"
            );
            if before > 0.0 {
                assert!(close(
                    f(&stats[0][format!("usd_volume_change_{suffix}")]),
                    100.0 * (v / before - 1.0)
                ));
            }
            let base_price = swaps
                .iter()
                .rev()
                .find(|s| secs(&s["block_time"]) <= now - period)
                .map_or(price(&swaps[0]), price);
            assert!(close(
                f(&stats[0][format!("usd_price_change_{suffix}")]),
                100.0 * (price(newest) / base_price - 1.0)
            ));
        }

        // Trades are the swaps from the wallet's side; positions follow their lifecycle.
        let mut balance: HashMap<String, f64> = HashMap::new();
        for s in &swaps {
            let id = key(s).1;
            let t = &trades[&id];
            let buy = s["token_address_out"] == json!(token);
            assert_eq!(t["direction"], json!(if buy { "buy" } else { "sell" }));
            assert_eq!(t["wallet_address"], s["wallet_address"]);
            assert_eq!(t["block_slot"], s["block_slot"]);
            assert_eq!(t["tx_hash"], s["tx_hash"]);
            let (amount, quote, pre, post) = if buy {
                (
                    "token_amount_out",
                    "token_address_in",
                    "pre_token_balance_out",
                    "post_token_balance_out",
                )
            } else {
                (
                    "token_amount_in",
                    "token_address_out",
                    "pre_token_balance_in",
                    "post_token_balance_in",
                )
            };
            assert_eq!(t["token_amount"], s[amount]);
            assert_eq!(t["quote_address"], s[quote]);
            assert_eq!(t["pre_token_balance"], s[pre]);
            assert_eq!(t["post_token_balance"], s[post]);
            assert_eq!(f(&t["usd_amount"]), f(&s["usd_amount_in"]));
            let w = s["wallet_address"].as_str().expect("wallet").to_owned();
            let held = balance.get(&w).copied().unwrap_or(0.0);
            assert_eq!(
                f(&t["pre_token_balance"]),
                held,
                "balances chain from trade to trade"
            );
            let post_v = f(&t["post_token_balance"]);
            let state = t["position_state"].as_str().expect("state");
            let expected_state = if buy && held == 0.0 {
                "open"
            } else if !buy && post_v == 0.0 {
                "close"
            } else {
                "trade"
            };
            assert_eq!(state, expected_state);
            assert!(post_v >= 0.0);
            balance.insert(w, post_v);
        }

        // A portfolio is the wallet's balances at the latest prices.
        let wallet = swaps.last().expect("swaps")["wallet_address"].clone();
        let portfolio = call(base, PORTFOLIO, json!({"wallet": wallet})).await;
        let held = balance[wallet.as_str().expect("wallet")];
        let mut total = 0.0;
        for t in portfolio["tokens"].as_array().expect("tokens") {
            assert!(close(f(&t["value"]), f(&t["balance"]) * f(&t["price"])));
            total += f(&t["value"]);
            if t["token"] == json!(token) {
                assert_eq!(f(&t["balance"]), held);
                assert_eq!(f(&t["price"]), price(newest));
            }
        }
        assert!(close(f(&portfolio["value"]), total));

        // The search documents' market price is the latest price, and the 1d window counts
        // the day's trades.
        let found = call(
            base,
            SEARCH,
            json!({"filter": {"token_address": {"$eq": token}},
                   "options": {"include_market": true, "include_metrics": ["1d"]}}),
        )
        .await;
        assert_eq!(found["count"], json!(1));
        let prof = &found["data"][0];
        assert_eq!(f(&prof["market"]["price"]), price(newest));
        let day: Vec<&Value> = swaps
            .iter()
            .filter(|s| secs(&s["block_time"]) > now - 86_400)
            .collect();
        assert_eq!(prof["metrics"]["1d"]["trade_count"], json!(day.len()));
        let buys = day
            .iter()
            .filter(|s| s["token_address_out"] == json!(token))
            .count();
        assert_eq!(prof["metrics"]["1d"]["buy_count"], json!(buys));
        let volume: f64 = day.iter().map(|s| f(&s["usd_amount_in"])).sum();
        assert!(close(f(&prof["metrics"]["1d"]["volume"]), volume));
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn evm_history_and_prices_agree() {
    bounded(async {
        let sim = start(5).await;
        let base = sim.base_url();
        let cat = catalog(&sim);
        for chain in ["1", "8453"] {
            let chain_id: i64 = chain.parse().expect("chain id");
            let (token, _) = evm_token(&cat, chain);
            let latest = call(
                base,
                EVM_PRICE,
                json!({"chain_id": chain_id, "tokens": [token]}),
            )
            .await;
            let history = call(
                base,
                EVM_HISTORY,
                json!({"chain_id": chain_id, "tokens": [token], "from": "2025-04-01T00:00:00Z",
                       "interval": 3600}),
            )
            .await;
            let points = history[0]["prices"].as_array().expect("prices");
            let last = points.last().expect("points");
            assert_eq!(last["usd_price"], latest[0]["usd_price"], "carried to now");
            assert!(secs(&last["timestamp"]) <= sim.market().now().timestamp());
            let times: Vec<i64> = points.iter().map(|p| secs(&p["timestamp"])).collect();
            assert!(
                times.windows(2).all(|w| w[1] - w[0] == 3600),
                "a point every interval"
            );
            let volume: f64 = points.iter().map(|p| f(&p["usd_volume"])).sum();
            let stats = call(
                base,
                EVM_STATS,
                json!({"chain_id": chain_id, "tokens": [token]}),
            )
            .await;
            assert!(volume >= f(&stats[0]["usd_volume_30d"]) * 0.999_999);
            assert_eq!(stats[0]["block_number"], latest[0]["block_number"]);
        }
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_same_seed_gives_the_same_bytes() {
    bounded(async {
        let a = start(42).await;
        let b = start(42).await;
        let c = start(43).await;
        let cat_a = serde_json::to_string(&a.market().catalog()).expect("catalog");
        let cat_b = serde_json::to_string(&b.market().catalog()).expect("catalog");
        let cat_c = serde_json::to_string(&c.market().catalog()).expect("catalog");
        assert_eq!(cat_a, cat_b);
        assert_ne!(cat_a, cat_c);
        let cat: Value = serde_json::from_str(&cat_a).expect("catalog JSON");
        for (path, body) in valid_bodies(&cat) {
            let body = body.to_string();
            let ra = call_raw(a.base_url(), path, Some(DEMO_KEY), &body).await;
            let rb = call_raw(b.base_url(), path, Some(DEMO_KEY), &body).await;
            assert_eq!(ra.status, 200, "{path}");
            assert_eq!(ra.text, rb.text, "{path}");
        }
        let full =
            json!({"limit": 100, "options": {"include_metadata": true, "include_market": true,
                          "include_labels": true, "include_metrics": ["7d", "1m"]}})
            .to_string();
        let ra = call_raw(a.base_url(), SEARCH, Some(DEMO_KEY), &full).await;
        let rb = call_raw(b.base_url(), SEARCH, Some(DEMO_KEY), &full).await;
        assert_eq!(ra.text, rb.text);
        for s in [a, b, c] {
            s.shutdown().await;
        }
    })
    .await;
}

#[tokio::test]
async fn the_command_prints_its_address_first_and_the_catalog() {
    bounded(async {
        use tokio::io::AsyncBufReadExt;
        let exe = env!("CARGO_BIN_EXE_dexlake");
        let mut child = tokio::process::Command::new(exe)
            .args([
                "sim",
                "--addr",
                "127.0.0.1:0",
                "--seed",
                "4",
                "--scale",
                "tiny",
            ])
            .args(["--altchain-segment", "solana"])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("dexlake starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = lines
            .next_line()
            .await
            .expect("stdout is readable")
            .expect("a first line");
        let base = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        assert!(base.starts_with("http://127.0.0.1:"), "{base}");
        let r = call_raw(
            &base,
            "/v1/solana/dex/swaps/get-swaps",
            Some(DEMO_KEY),
            "{}",
        )
        .await;
        assert_eq!((r.status, r.text.as_str()), (400, BAD));
        let r = call_raw(&base, SWAPS, Some(DEMO_KEY), "{}").await;
        assert_eq!(r.status, 404, "the altchain segment is configurable");
        child.kill().await.expect("the child stops");

        let out = tokio::process::Command::new(exe)
            .args(["sim", "--seed", "4", "--scale", "tiny", "--catalog"])
            .output()
            .await
            .expect("dexlake runs");
        assert!(out.status.success());
        let cat: Value = serde_json::from_slice(&out.stdout).expect("the catalog is JSON");
        assert_eq!(members(&cat), HashSet::from(["evm", "altchain", "now"]));
        assert_eq!(members(&cat["evm"]), HashSet::from(["1", "8453"]));
        for chain in [&cat["altchain"], &cat["evm"]["1"], &cat["evm"]["8453"]] {
            assert_eq!(
                members(chain),
                HashSet::from(["tokens", "pools", "wallets"])
            );
            let counts: Vec<u64> = chain["tokens"]
                .as_array()
                .expect("tokens")
                .iter()
                .map(|t| t["swap_count"].as_u64().expect("swap_count"))
                .collect();
            assert!(counts.windows(2).all(|w| w[0] >= w[1]), "most active first");
        }
        assert_eq!(cat["now"], json!("2025-06-01T00:00:00Z"));
    })
    .await;
}

#[tokio::test]
async fn search_profiles_carry_consistent_labels_and_filters() {
    bounded(async {
        let sim = start(6).await;
        let base = sim.base_url();
        let now = sim.market().now().timestamp();
        let all = call(
            base,
            SEARCH,
            json!({
                "limit": 100,
                "options": {"include_metadata": true, "include_market": true, "include_labels": true},
                "dynamic_labels": {"big": {"market.holders": {"$gte": 25}}},
                "sort": {"field": "market.liquidity", "direction": "desc"}
            }),
        )
        .await;
        let docs = all["data"].as_array().expect("data");
        assert_eq!(all["count"].as_u64(), Some(docs.len() as u64));
        assert_eq!(docs.len(), sim.market().alt.tokens.len());
        assert_eq!(all["cursor"], Value::Null);
        let liquidity: Vec<f64> = docs.iter().map(|d| f(&d["market"]["liquidity"])).collect();
        assert!(liquidity.windows(2).all(|w| w[0] >= w[1]), "sorted descending");
        let mut holders_over_5 = 0;
        for d in docs {
            let labels: HashSet<&str> = d["labels"]
                .as_array()
                .expect("labels")
                .iter()
                .map(|l| l.as_str().expect("label"))
                .collect();
            let matched: HashSet<&str> = members(&d["matched_labels"]);
            assert_eq!(labels, matched, "every label has its rules");
            let holders = d["market"]["holders"].as_i64().expect("holders");
            assert_eq!(labels.contains("popular"), holders >= 25);
            let big = d["dynamic_labels"] == json!(["big"]);
            assert_eq!(big, holders >= 25, "dynamic label on the same rule");
            let created = secs(&d["metadata"]["created_at"]);
            assert_eq!(labels.contains("new"), created > now - 3 * 86_400);
            if holders > 5 {
                holders_over_5 += 1;
            }
        }
        let filtered = call(
            base,
            SEARCH,
            json!({"filter": {"market.holders": {"$gt": 5}}, "limit": 1}),
        )
        .await;
        assert_eq!(filtered["count"], json!(holders_over_5));
        assert!(members(&filtered["data"][0]).is_subset(&HashSet::from([
            "updated_at",
            "synced_at",
            "token_address",
            "dynamic_labels",
            "metrics"
        ])));
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_lazily_stored_market_answers_byte_for_byte_like_a_kept_one() {
    bounded(async {
        use std::sync::Arc;
        let kept = Simulator::serve(
            SimConfig::default(),
            Arc::new(dexlake::sim::SyntheticMarket::generate(21, Scale::Tiny)),
        )
        .await
        .expect("the simulator starts");
        let lazy_market = dexlake::sim::SyntheticMarket::generate_lazy(21, Scale::Tiny);
        assert!(lazy_market.is_lazy() && !kept.market().is_lazy());
        let lazy = Simulator::serve(SimConfig::default(), Arc::new(lazy_market))
            .await
            .expect("the simulator starts");
        let cat = catalog(&kept);
        assert_eq!(cat, catalog(&lazy));
        let mut bodies = valid_bodies(&cat);
        let wallet = cat["altchain"]["wallets"][0]["address"].clone();
        bodies.push((TRADES, json!({"wallet": wallet, "limit": 100})));
        bodies.push((
            SEARCH,
            json!({"limit": 100, "options": {"include_market": true, "include_labels": true,
                   "include_metadata": true, "include_metrics": ["1d", "5m"]}}),
        ));
        for (path, body) in bodies {
            let body = body.to_string();
            let a = call_raw(kept.base_url(), path, Some(DEMO_KEY), &body).await;
            let b = call_raw(lazy.base_url(), path, Some(DEMO_KEY), &body).await;
            assert_eq!(a.status, 200, "{path}");
            assert_eq!(a.text, b.text, "{path}");
        }
        kept.shutdown().await;
        lazy.shutdown().await;
    })
    .await;
}

/// Replaces every float of `value` by the correctly rounded value of its text in the body it
/// was parsed from. Objects keep the body's member order, so a depth-first walk meets the
/// numbers in the order of the text.
fn exact_floats<'a>(value: &mut Value, texts: &mut impl Iterator<Item = &'a str>) {
    match value {
        Value::Number(n) => {
            let text = texts.next().expect("as many numbers as in the text");
            if n.is_f64() {
                let exact: f64 = text.parse().expect("a JSON number");
                *n = serde_json::Number::from_f64(exact).expect("a finite number");
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| exact_floats(v, texts)),
        Value::Object(members) => members.values_mut().for_each(|v| exact_floats(v, texts)),
        _ => {}
    }
}

/// Every float leaf under `value`, by dotted path.
fn float_leaves(prefix: &str, value: &Value, out: &mut Vec<(String, f64)>) {
    match value {
        Value::Number(n) if n.is_f64() => out.push((prefix.to_owned(), n.as_f64().unwrap())),
        Value::Object(members) => {
            for (k, v) in members {
                float_leaves(&format!("{prefix}.{k}"), v, out);
            }
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_profiles_by_the_exact_numbers_it_returned() {
    bounded(async {
        let sim = start(11).await;
        let base = sim.base_url().to_owned();
        let body = json!({
            "options": {"include_market": true, "include_metrics": ["7d", "1d", "6h", "1h", "5m", "1m"]},
            "limit": 100
        });
        let reply = call_raw(&base, SEARCH, Some(DEMO_KEY), &body.to_string()).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        let mut page = reply.json();
        exact_floats(&mut page, &mut number_texts(&reply.text).into_iter());

        // Every float of every profile, by path: (token, value).
        let mut by_path: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
        for profile in page["data"].as_array().expect("data") {
            let token = profile["token_address"].as_str().expect("address").to_owned();
            let mut leaves = Vec::new();
            float_leaves("market", &profile["market"], &mut leaves);
            float_leaves("metrics", &profile["metrics"], &mut leaves);
            for (path, v) in leaves {
                by_path.entry(path).or_default().push((token.clone(), v));
            }
        }
        assert!(by_path.len() > 100, "market and metric fields: {}", by_path.len());

        // The simulator reads back every number it wrote: `$in` of a field's values finds every
        // profile that has one.
        for (path, values) in &by_path {
            let numbers: Vec<f64> = values.iter().map(|(_, v)| *v).collect();
            let request = json!({"filter": {path.as_str(): {"$in": numbers}}, "limit": 100});
            let found = call(&base, SEARCH, request).await;
            let found: HashSet<&str> = found["data"]
                .as_array()
                .expect("data")
                .iter()
                .map(|p| p["token_address"].as_str().expect("address"))
                .collect();
            let expected: HashSet<&str> = values.iter().map(|(t, _)| t.as_str()).collect();
            assert_eq!(found, expected, "$in on {path}");
        }
        // `$eq` and `$lte` on the exact price find the profile.
        for (token, price) in &by_path["market.price"] {
            for op in ["$eq", "$lte", "$gte"] {
                let request = json!({"filter": {"market.price": {op: price}}, "limit": 100});
                let found = call(&base, SEARCH, request).await;
                assert!(
                    found["data"]
                        .as_array()
                        .expect("data")
                        .iter()
                        .any(|p| p["token_address"] == token.as_str()),
                    "{op} {price:?} finds {token}"
                );
            }
        }

        // The client decodes the same bits.
        let client = dexlake::api::client::Client::new(
            dexlake::api::client::ClientConfig::new(&base).with_api_key(DEMO_KEY),
        )
        .expect("client");
        let request = serde_json::from_value(body).expect("a search request");
        let decoded = client.search_profiles(&request).await.expect("search");
        let decoded = serde_json::to_value(&decoded).expect("profiles serialise");
        for (i, profile) in decoded["data"].as_array().expect("data").iter().enumerate() {
            let mut got = Vec::new();
            float_leaves("market", &profile["market"], &mut got);
            float_leaves("metrics", &profile["metrics"], &mut got);
            let mut want = Vec::new();
            float_leaves("market", &page["data"][i]["market"], &mut want);
            float_leaves("metrics", &page["data"][i]["metrics"], &mut want);
            let bits = |v: &[(String, f64)]| -> BTreeMap<String, u64> {
                v.iter().map(|(p, x)| (p.clone(), x.to_bits())).collect()
            };
            assert_eq!(bits(&got), bits(&want), "profile {i} as the client decoded it");
        }
        sim.shutdown().await;
    })
    .await;
}

#[test]
fn cli_output_into_a_closed_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    // `--catalog` of the small market is far larger than a pipe's buffer.
    let mut child = Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .args(["sim", "--seed", "1", "--scale", "small", "--catalog"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the dexlake binary runs");
    let mut first = [0u8; 16];
    child
        .stdout
        .take()
        .expect("stdout")
        .read_exact(&mut first)
        .expect("some output");
    // The reader is gone (as after `| head -c 16`).
    let out = child.wait_with_output().expect("exits");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
}
