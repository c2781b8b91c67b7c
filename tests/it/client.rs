//! The client against scripted HTTP servers on loopback: every operation's request and answer,
//! error mapping, retries, paging, chunking and validation.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, TimeZone, Utc};
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};

use dexlake::api::client::{Client, ClientConfig};
use dexlake::api::models::{
    Direction, PositionState, PriceChanges, SortDirection, SwapType, TimeWindow,
};
use dexlake::api::profile_query::{Condition, Filter, SearchRequest};
use dexlake::api::requests::{
    AltPricesRequest, CandlesRequest, EvmPricesRequest, GetProfileRequest, Operation,
    PortfolioRequest, PriceHistoryRequest, SwapsRequest, TradesRequest,
};
use dexlake::api::retry::{RateLimit, RetryConfig};
use dexlake::{ApiStatus, Error};

// ----- A scripted server -----

/// One request as the server received it.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Value,
    at: Instant,
}

/// What the server answers.
#[derive(Debug, Clone)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

impl Reply {
    fn json(value: Value) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: value.to_string(),
            delay: Duration::ZERO,
        }
    }

    fn error(status: u16, text: &str) -> Reply {
        Reply {
            status,
            ..Reply::json(json!({ "error": text }))
        }
    }

    fn raw(status: u16, body: &str) -> Reply {
        Reply {
            status,
            body: body.to_owned(),
            ..Reply::json(Value::Null)
        }
    }

    fn header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.push((name, value.to_owned()));
        self
    }

    fn delay(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

type Script = dyn Fn(&Seen, usize) -> Reply + Send + Sync;

struct Shared {
    script: Box<Script>,
    seen: Mutex<Vec<Seen>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// A server on 127.0.0.1:0 that answers every request with `script(request, index)` and records
/// what it received.
struct Server {
    url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(script: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static) -> Server {
        let shared = Arc::new(Shared {
            script: Box::new(script),
            seen: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        Server {
            url: format!("http://{addr}"),
            shared,
            task,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().expect("seen lock").clone()
    }

    fn count(&self) -> usize {
        self.shared.seen.lock().expect("seen lock").len()
    }

    fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// A client of this server with the test key and fast retries.
    fn client(&self) -> Client {
        Client::new(self.config()).expect("valid configuration")
    }

    fn config(&self) -> ClientConfig {
        ClientConfig::new(&self.url)
            .with_api_key("test-key")
            .with_timeout(Duration::from_secs(5))
            .with_retry(
                RetryConfig::default()
                    .with_initial_backoff(Duration::from_millis(5))
                    .with_max_backoff(Duration::from_millis(20)),
            )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let seen = Seen {
        method,
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        at: Instant::now(),
    };
    let index = {
        let mut all = shared.seen.lock().expect("seen lock");
        all.push(seen.clone());
        all.len() - 1
    };
    let reply = (shared.script)(&seen, index);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    shared.in_flight.fetch_sub(1, Ordering::SeqCst);
    let status = StatusCode::from_u16(reply.status).expect("scripted status is valid");
    let mut response = (status, reply.body).into_response();
    let h = response.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/json"));
    for (name, value) in reply.headers {
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_str(&value).expect("scripted header value"),
        );
    }
    response
}

/// Runs a test body with a time limit.
async fn bounded<F: Future<Output = ()>>(seconds: u64, body: F) {
    tokio::time::timeout(Duration::from_secs(seconds), body)
        .await
        .expect("test finished within its time limit");
}

// ----- Canned, interface-conformant JSON -----

const T0: &str = "2026-01-02T03:04:05Z";

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap()
}

fn metrics_json() -> Value {
    json!({
        "avg_holding_duration": 3600, "makers_count": 12, "buyers_count": 7, "sellers_count": 5,
        "buy_count": 30, "sell_count": 20, "win_position_count": 4, "loss_position_count": 3,
        "trade_count": 50, "position_count": 7,
        "wallet_roi_distribution": {"gt_500": 1, "200_500": 0, "0_200": 3, "neg50_0": 2, "lt_neg50_0": 1},
        "volume": 12345.5, "pnl": -12.25, "max_drawdown": 33.3, "sharpe_ratio": 1.2
    })
}

fn metadata_json() -> Value {
    json!({
        "last_trade_at": T0, "created_at": "2025-06-01T00:00:00Z", "symbol": "ABC",
        "name": "Alpha Beta", "image": "https://img/abc.png", "verified": true,
        "creator_address": "Creator1", "twitter": "@abc", "discord": "d", "website": "w",
        "telegram": "t"
    })
}

fn evm_profile_json() -> Value {
    json!({
        "updated_at": T0, "synced_at": T0, "chain_id": 1, "token_address": "0xabc",
        "metadata": metadata_json(), "metrics": {"1d": metrics_json(), "5m": metrics_json()}
    })
}

fn alt_profile_json(address: &str) -> Value {
    json!({
        "updated_at": T0, "synced_at": T0, "token_address": address,
        "labels": ["hot"], "matched_labels": {"hot": ["volume_1h > 1000"]},
        "dynamic_labels": ["whales"], "metadata": metadata_json(),
        "market": {"fdv": 1.0e6, "market_cap": 5.0e5, "price": 0.5, "liquidity": 2.0e4,
                   "holders": 321, "total_supply": 2.0e6, "circulating_supply": 1.0e6,
                   "top_holdings": 40.5, "dev_holdings": 2.5},
        "metrics": {"7d": metrics_json()}
    })
}

fn changes_into(record: &mut Value) {
    let map = record.as_object_mut().expect("record is an object");
    for (i, p) in PriceChanges::PERIODS.iter().enumerate() {
        map.insert(format!("usd_price_change_{p}"), json!(i as f64 + 0.5));
        map.insert(format!("usd_volume_{p}"), json!(1000.0 * (i as f64 + 1.0)));
        map.insert(format!("usd_volume_change_{p}"), json!(-1.5));
    }
}

fn evm_price_json(token: &str) -> Value {
    json!({"chain_id": 1, "token_address": token, "pool_address": format!("pool-{token}"),
           "usd_price": 1.25, "block_number": 19_000_000, "block_time": T0})
}

fn evm_stats_json(token: &str) -> Value {
    let mut v = json!({"token_address": token, "pool_address": "0xpool", "usd_price": 2.5,
                       "block_number": 19_000_001, "block_time": T0});
    changes_into(&mut v);
    v
}

fn alt_price_json(token: &str) -> Value {
    json!({"token_address": token, "pool_address": format!("pool-{token}"), "usd_price": 0.75,
           "block_slot": 300_000_000, "block_time": T0})
}

fn alt_stats_json(token: &str) -> Value {
    let mut v = json!({"token_address": token, "pool_address": "Pool1", "usd_price": 0.75,
                       "block_slot": 300_000_001, "block_time": T0});
    changes_into(&mut v);
    v
}

fn history_json(token: &str) -> Value {
    json!({"token_address": token, "pool_address": format!("pool-{token}"), "prices": [
        {"timestamp": T0, "usd_price": 1.0, "usd_volume": 10.0},
        {"timestamp": "2026-01-02T04:04:05Z", "usd_price": 1.1, "usd_volume": 12.5}
    ]})
}

fn candle_json() -> Value {
    json!({"timestamp": T0, "open": 1.0, "high": 1.5, "low": 0.9, "close": 1.2,
           "volume": 1234.5, "count": 17})
}

fn swap_json(id: i64, swap_type: &str) -> Value {
    json!({
        "id": id, "swap_type": swap_type, "protocol": "raydium", "wallet_address": "W1",
        "pool_address": "P1", "token_address_in": "Q", "token_address_out": "T",
        "token_amount_in": 10.0, "token_amount_out": 1000.0, "token_price_in": 150.0,
        "token_price_out": 1.5, "pre_token_balance_in": 20.0, "pre_token_balance_out": 0.0,
        "post_token_balance_in": 10.0, "post_token_balance_out": 1000.0,
        "usd_amount_in": 1500.0, "usd_amount_out": 1500.0, "block_slot": 1000 - id,
        "block_time": T0, "tx_hash": format!("tx{id}")
    })
}

fn trade_json(id: i64, direction: &str, state: &str) -> Value {
    json!({
        "id": id, "protocol": "raydium", "swap_type": "quote_token", "wallet_address": "W1",
        "token_address": "T", "quote_address": "Q", "position_address": "Pos1",
        "direction": direction, "position_state": state, "token_amount": 1000.0,
        "quote_amount": 10.0, "native_amount": 10.0, "usd_amount": 1500.0,
        "pre_token_balance": 0.0, "post_token_balance": 1000.0, "token_price": 1.5,
        "quote_price": 150.0, "token_mcap": 1.5e6, "block_slot": 2000 - id, "block_time": T0,
        "tx_hash": format!("tx{id}")
    })
}

fn portfolio_json() -> Value {
    json!({"value": 150.0, "tokens": [
        {"token": "T", "balance": 100.0, "price": 1.5, "value": 150.0}
    ]})
}

fn addresses(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

fn body_strings(body: &Value, member: &str) -> Vec<String> {
    body[member]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().expect("address is a string").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

// ----- The eleven operations -----

/// Answers each operation by path, echoing the requested addresses where it lists any.
fn answer_by_path(seen: &Seen, _: usize) -> Reply {
    let tokens = body_strings(&seen.body, "tokens");
    let p = seen.path.as_str();
    let value = if p.ends_with("/evm/dex/profiles/tokens/get-profile") {
        evm_profile_json()
    } else if p.ends_with("/evm/dex/prices/get-price-history") {
        Value::Array(tokens.iter().map(|t| history_json(t)).collect())
    } else if p.ends_with("/evm/dex/prices/get-price-stats") {
        Value::Array(tokens.iter().map(|t| evm_stats_json(t)).collect())
    } else if p.ends_with("/evm/dex/prices/get-price") {
        Value::Array(tokens.iter().map(|t| evm_price_json(t)).collect())
    } else if p.ends_with("/dex/profiles/tokens/search-profiles") {
        json!({"count": 2, "cursor": null, "data": [alt_profile_json("A1"), alt_profile_json("A2")]})
    } else if p.ends_with("/dex/prices/get-price-candles") {
        json!([candle_json(), candle_json()])
    } else if p.ends_with("/dex/swaps/get-swaps") {
        json!({"count": 1, "cursor": null, "data": [swap_json(1, "quote_token")]})
    } else if p.ends_with("/dex/trades/get-trades") {
        json!({"count": 1, "cursor": null, "data": [trade_json(1, "buy", "open")]})
    } else if p.ends_with("/dex/prices/get-price-stats") {
        Value::Array(tokens.iter().map(|t| alt_stats_json(t)).collect())
    } else if p.ends_with("/dex/prices/get-price") {
        Value::Array(tokens.iter().map(|t| alt_price_json(t)).collect())
    } else if p.ends_with("/dex/portfolios/get-portfolio") {
        portfolio_json()
    } else {
        return Reply::error(400, "Bad request: Invalid request parameters");
    };
    Reply::json(value)
}

#[tokio::test]
async fn every_operation_round_trips() {
    bounded(20, async {
        let server = Server::start(answer_by_path).await;
        // A path prefix on the base URL and a configured altchain segment are both honoured.
        let client = Client::new(
            ClientConfig::new(format!("{}/api/", server.url))
                .with_api_key("test-key")
                .with_altchain_segment("sol")
                .with_user_agent("dexlake-test/1"),
        )
        .expect("valid configuration");

        let profile = client
            .evm_profile(
                &GetProfileRequest::new(1, "0xabc")
                    .include_metadata(true)
                    .include_metrics([TimeWindow::D1, TimeWindow::M5]),
            )
            .await
            .expect("get-profile");
        assert_eq!(profile.token_address, "0xabc");
        assert_eq!(
            profile.metadata.as_ref().and_then(|m| m.symbol.as_deref()),
            Some("ABC")
        );
        assert_eq!(profile.metrics[&TimeWindow::D1].trade_count, Some(50));

        let from = t0();
        let history = client
            .evm_price_history(
                &PriceHistoryRequest::for_tokens(1, ["0xa", "0xb"], from, 3600)
                    .to(from + chrono::Duration::hours(2)),
            )
            .await
            .expect("get-price-history");
        assert_eq!(history.len(), 2);
        assert_eq!(history[1].token_address, "0xb");
        assert_eq!(history[0].prices.len(), 2);

        let stats = client
            .evm_price_stats(&EvmPricesRequest::for_tokens(1, ["0xa"]))
            .await
            .expect("evm get-price-stats");
        assert_eq!(stats[0].block_number, 19_000_001);
        assert_eq!(stats[0].changes.usd_volume_30d, 7000.0);

        let prices = client
            .evm_prices(&EvmPricesRequest::for_tokens(1, ["0xa", "0xb", "0xc"]))
            .await
            .expect("evm get-price");
        assert_eq!(prices.len(), 3);
        assert_eq!(prices[2].token_address, "0xc");

        let search = SearchRequest::new()
            .text("alp")
            .filter(Filter::field("market.liquidity", Condition::Gt(1000.0)))
            .sort("market.liquidity", SortDirection::Desc)
            .dynamic_label(
                "whales",
                Filter::field("market.holders", Condition::Gte(300.0)),
            )
            .limit(50);
        let page = client
            .search_profiles(&search)
            .await
            .expect("search-profiles");
        assert_eq!(page.count, 2);
        assert_eq!(page.next_cursor(), None);
        assert_eq!(page.data[1].token_address, "A2");
        assert_eq!(
            page.data[0].market.as_ref().and_then(|m| m.holders),
            Some(321)
        );

        let candles = client
            .candles(&CandlesRequest::for_token("T", 60).from(from).count(2))
            .await
            .expect("get-price-candles");
        assert_eq!(candles.len(), 2);
        assert_eq!(candles[0].count, 17);

        let swaps = client
            .swaps(&SwapsRequest::for_token("T").limit(10))
            .await
            .expect("get-swaps");
        assert_eq!(swaps.data[0].swap_type, SwapType::QuoteToken);

        let trades = client
            .trades(&TradesRequest::for_wallet("W1").limit(10))
            .await
            .expect("get-trades");
        assert_eq!(trades.data[0].direction, Direction::Buy);
        assert_eq!(trades.data[0].position_state, PositionState::Open);

        let alt_stats = client
            .alt_price_stats(&AltPricesRequest::for_tokens(["T1", "T2"]))
            .await
            .expect("altchain get-price-stats");
        assert_eq!(alt_stats[1].token_address, "T2");
        assert_eq!(alt_stats[0].changes.usd_price_change_5m, 0.5);

        let alt_prices = client
            .alt_prices(&AltPricesRequest::for_tokens(["T1"]))
            .await
            .expect("altchain get-price");
        assert_eq!(alt_prices[0].block_slot, 300_000_000);

        let portfolio = client
            .portfolio(&PortfolioRequest::for_wallet("W1"))
            .await
            .expect("get-portfolio");
        assert_eq!(portfolio.tokens[0].value, 150.0);

        // What the server received, request by request.
        let seen = server.seen();
        assert_eq!(seen.len(), 11);
        let expected: Vec<(&str, Value)> = vec![
            (
                "/api/v1/evm/dex/profiles/tokens/get-profile",
                json!({"chain_id": 1, "token": "0xabc",
                       "options": {"include_metadata": true, "include_metrics": ["1d", "5m"]}}),
            ),
            (
                "/api/v1/evm/dex/prices/get-price-history",
                json!({"chain_id": 1, "tokens": ["0xa", "0xb"], "from": "2026-01-02T03:04:05Z",
                       "to": "2026-01-02T05:04:05Z", "interval": 3600}),
            ),
            (
                "/api/v1/evm/dex/prices/get-price-stats",
                json!({"chain_id": 1, "tokens": ["0xa"]}),
            ),
            (
                "/api/v1/evm/dex/prices/get-price",
                json!({"chain_id": 1, "tokens": ["0xa", "0xb", "0xc"]}),
            ),
            (
                "/api/v1/sol/dex/profiles/tokens/search-profiles",
                json!({"query": {"text": "alp"}, "filter": {"market.liquidity": {"$gt": 1000}},
                       "sort": {"field": "market.liquidity", "direction": "desc"},
                       "dynamic_labels": {"whales": {"market.holders": {"$gte": 300}}},
                       "limit": 50}),
            ),
            (
                "/api/v1/sol/dex/prices/get-price-candles",
                json!({"interval": 60, "token": "T", "from": "2026-01-02T03:04:05Z", "count": 2}),
            ),
            (
                "/api/v1/sol/dex/swaps/get-swaps",
                json!({"token": "T", "limit": 10}),
            ),
            (
                "/api/v1/sol/dex/trades/get-trades",
                json!({"wallet": "W1", "limit": 10}),
            ),
            (
                "/api/v1/sol/dex/prices/get-price-stats",
                json!({"tokens": ["T1", "T2"]}),
            ),
            (
                "/api/v1/sol/dex/prices/get-price",
                json!({"tokens": ["T1"]}),
            ),
            (
                "/api/v1/sol/dex/portfolios/get-portfolio",
                json!({"wallet": "W1"}),
            ),
        ];
        for (s, (path, body)) in seen.iter().zip(&expected) {
            assert_eq!(s.method, Method::POST, "{path}");
            assert_eq!(&s.path, path);
            assert_eq!(&s.body, body, "{path}");
            assert_eq!(s.headers["x-api-key"], "test-key", "{path}");
            assert_eq!(s.headers["content-type"], "application/json", "{path}");
            assert_eq!(s.headers["user-agent"], "dexlake-test/1", "{path}");
        }
        // The paths are the operations' own, in the interface's order.
        for (s, op) in seen.iter().zip(Operation::ALL) {
            assert_eq!(s.path, format!("/api{}", op.path("sol")));
        }
        let m = client.metrics();
        assert_eq!(
            (m.requests, m.retries, m.throttled, m.failures),
            (11, 0, 0, 0)
        );
    })
    .await;
}

#[tokio::test]
async fn unknown_enum_values_decode_as_other() {
    bounded(10, async {
        let server = Server::start(|seen, _| {
            if seen.path.ends_with("get-swaps") {
                Reply::json(json!({"count": 1, "cursor": null,
                                   "data": [swap_json(1, "token_nft")]}))
            } else if seen.path.ends_with("get-trades") {
                Reply::json(json!({"count": 1, "cursor": null,
                                   "data": [trade_json(1, "short", "liquidated")]}))
            } else {
                let mut profile = evm_profile_json();
                profile["metrics"] = json!({"30d": metrics_json(), "1h": metrics_json()});
                Reply::json(profile)
            }
        })
        .await;
        let client = server.client();
        let swaps = client
            .swaps(&SwapsRequest::for_wallet("W1"))
            .await
            .expect("swaps decode");
        assert_eq!(swaps.data[0].swap_type, SwapType::Other("token_nft".into()));
        let trades = client
            .trades(&TradesRequest::for_wallet("W1"))
            .await
            .expect("trades decode");
        assert_eq!(trades.data[0].direction, Direction::Other("short".into()));
        assert_eq!(
            trades.data[0].position_state,
            PositionState::Other("liquidated".into())
        );
        let profile = client
            .evm_profile(&GetProfileRequest::new(1, "0xabc"))
            .await
            .expect("profile decodes");
        assert!(
            profile
                .metrics
                .contains_key(&TimeWindow::Other("30d".into()))
        );
        assert!(profile.metrics.contains_key(&TimeWindow::H1));
    })
    .await;
}

// ----- Errors -----

#[tokio::test]
async fn each_error_status_maps_to_its_typed_error() {
    bounded(20, async {
        let statuses = [
            (400, ApiStatus::BadRequest),
            (401, ApiStatus::Unauthorized),
            (403, ApiStatus::Forbidden),
            (429, ApiStatus::TooManyRequests),
            (500, ApiStatus::InternalServerError),
        ];
        for (code, status) in statuses {
            let text = status.documented_text().expect("documented status");
            let server = Server::start(move |_, _| Reply::error(code, text)).await;
            // Without retries every status comes back as it was answered.
            let client = Client::new(server.config().with_retry(RetryConfig::disabled()))
                .expect("valid configuration");
            let err = client
                .portfolio(&PortfolioRequest::for_wallet("W1"))
                .await
                .expect_err("an error status is an error");
            match &err {
                Error::Api {
                    operation,
                    status: got,
                    message,
                    ..
                } => {
                    assert_eq!(*operation, "altchain.get-portfolio");
                    assert_eq!(*got, status);
                    assert_eq!(message, text);
                }
                other => panic!("{code}: expected Error::Api, got {other:?}"),
            }
            assert!(err.to_string().contains(text), "{err}");
            assert_eq!(server.count(), 1);
        }
    })
    .await;
}

#[tokio::test]
async fn odd_bodies_and_dead_servers_keep_their_context() {
    bounded(20, async {
        // An error status whose body is not the documented object: the body's start is the
        // message.
        let server = Server::start(|_, _| Reply::raw(502, "<html>bad gateway</html>")).await;
        let client = Client::new(server.config().with_retry(RetryConfig::disabled()))
            .expect("valid configuration");
        let err = client
            .alt_prices(&AltPricesRequest::for_tokens(["T"]))
            .await
            .expect_err("502");
        assert!(
            matches!(&err, Error::Api { status: ApiStatus::Other(502), message, .. }
                if message == "<html>bad gateway</html>"),
            "{err:?}"
        );

        // A success whose body does not fit the model: Decode, with the operation and the
        // body's start, and no retry.
        let server = Server::start(|_, _| Reply::json(json!({"unexpected": true}))).await;
        let err = server
            .client()
            .alt_prices(&AltPricesRequest::for_tokens(["T"]))
            .await
            .expect_err("wrong shape");
        match &err {
            Error::Decode {
                operation, excerpt, ..
            } => {
                assert_eq!(*operation, "altchain.get-price");
                assert!(excerpt.contains("unexpected"), "{excerpt}");
            }
            other => panic!("expected Decode, got {other:?}"),
        }
        assert!(std::error::Error::source(&err).is_some());
        assert_eq!(server.count(), 1);

        // Nobody listening: a transport error that keeps reqwest's error as its source.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", closed.local_addr().expect("address"));
        drop(closed);
        let client = Client::new(
            ClientConfig::new(&url)
                .with_api_key("k")
                .with_retry(RetryConfig::disabled()),
        )
        .expect("valid configuration");
        let err = client
            .portfolio(&PortfolioRequest::for_wallet("W1"))
            .await
            .expect_err("nothing listens");
        match &err {
            Error::Transport {
                operation,
                url: u,
                source,
            } => {
                assert_eq!(*operation, "altchain.get-portfolio");
                assert!(u.starts_with(&url), "{u}");
                assert!(source.is_connect(), "{source:?}");
            }
            other => panic!("expected Transport, got {other:?}"),
        }
        assert_eq!(client.metrics().failures, 1);
    })
    .await;
}

#[tokio::test]
async fn a_service_echoing_the_api_key_never_gets_it_printed() {
    bounded(20, async {
        // The key the request sent, as a hostile or careless service would quote it.
        let key_of = |seen: &Seen| {
            seen.headers
                .get("x-api-key")
                .expect("the key header")
                .to_str()
                .expect("text")
                .to_owned()
        };
        let replies: [fn(&str) -> Reply; 3] = [
            // The documented error object.
            |k| Reply::error(500, &format!("internal error for key {k}")),
            // A body that is no error object, the key across the excerpt's cut.
            |k| Reply::raw(502, &format!("{}{k}{k}", "x".repeat(196))),
            // A success that does not decode, the decoder quoting the key.
            |k| Reply::json(json!({ "data": k, "key": k })),
        ];
        for reply in replies {
            let server = Server::start(move |seen, _| reply(&key_of(seen))).await;
            let client = Client::new(server.config().with_retry(RetryConfig::disabled()))
                .expect("valid configuration");
            let err = client
                .alt_prices(&AltPricesRequest::for_tokens(["T"]))
                .await
                .expect_err("an error");
            assert_eq!(server.count(), 1);
            let shown = format!("{err} | {err:?} | {}", dexlake::error::error_chain(&err));
            assert!(!shown.contains("test-key"), "{shown}");
            assert!(!shown.contains("test-"), "a piece of the key: {shown}");
            assert!(shown.contains("***"), "{shown}");
        }
    })
    .await;
}

// ----- Retries -----

#[tokio::test]
async fn retry_after_is_honoured() {
    bounded(20, async {
        let server = Server::start(|_, i| {
            if i == 0 {
                Reply::error(429, "Too many requests: Rate limit exceeded")
                    .header("retry-after", "1")
            } else {
                Reply::json(portfolio_json())
            }
        })
        .await;
        let client = server.client();
        let started = Instant::now();
        let portfolio = client
            .portfolio(&PortfolioRequest::for_wallet("W1"))
            .await
            .expect("succeeds after the wait");
        let elapsed = started.elapsed();
        assert_eq!(portfolio.value, 150.0);
        let seen = server.seen();
        assert_eq!(seen.len(), 2);
        let gap = seen[1].at - seen[0].at;
        // The drawn backoff would be at most 5 ms; the second attempt waited for Retry-After.
        assert!(gap >= Duration::from_millis(990), "gap {gap:?}");
        assert!(elapsed < Duration::from_secs(3), "elapsed {elapsed:?}");
        let m = client.metrics();
        assert_eq!(
            (m.requests, m.retries, m.throttled, m.failures),
            (2, 1, 1, 0)
        );
    })
    .await;
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    bounded(10, async {
        for status in [
            ApiStatus::BadRequest,
            ApiStatus::Unauthorized,
            ApiStatus::Forbidden,
        ] {
            let code = status.code();
            let text = status.documented_text().expect("documented status");
            let server = Server::start(move |_, _| Reply::error(code, text)).await;
            // Retries are on (the server's default client allows five).
            let client = server.client();
            let err = client
                .swaps(&SwapsRequest::for_wallet("W1"))
                .await
                .expect_err("client error");
            assert_eq!(err.api_status(), Some(status));
            assert!(matches!(err, Error::Api { .. }), "{err:?}");
            assert_eq!(server.count(), 1, "{code} was sent once");
            let m = client.metrics();
            assert_eq!((m.requests, m.retries, m.failures), (1, 0, 1));
        }
    })
    .await;
}

#[tokio::test]
async fn server_error_then_success_succeeds() {
    bounded(10, async {
        let server = Server::start(|_, i| {
            if i == 0 {
                Reply::error(500, "Internal server error")
            } else {
                Reply::json(json!([candle_json()]))
            }
        })
        .await;
        let client = server.client();
        let candles = client
            .candles(&CandlesRequest::for_pool("P1", 300))
            .await
            .expect("second attempt succeeds");
        assert_eq!(candles.len(), 1);
        assert_eq!(server.count(), 2);
        assert_eq!(client.metrics().retries, 1);
    })
    .await;
}

#[tokio::test]
async fn retries_stop_at_the_count_and_at_the_elapsed_bound() {
    bounded(20, async {
        let server = Server::start(|_, _| Reply::error(500, "Internal server error")).await;
        let client = Client::new(
            server
                .config()
                .with_retry(server.config().retry.with_max_retries(2)),
        )
        .expect("valid configuration");
        let err = client
            .portfolio(&PortfolioRequest::for_wallet("W1"))
            .await
            .expect_err("always 500");
        match &err {
            Error::RetriesExhausted {
                operation,
                attempts,
                source,
                ..
            } => {
                assert_eq!(*operation, "altchain.get-portfolio");
                assert_eq!(*attempts, 3);
                assert_eq!(source.api_status(), Some(ApiStatus::InternalServerError));
            }
            other => panic!("expected RetriesExhausted, got {other:?}"),
        }
        assert_eq!(server.count(), 3);
        assert_eq!(err.api_status(), Some(ApiStatus::InternalServerError));

        // A Retry-After beyond the elapsed bound ends retrying at once instead of sleeping.
        let server = Server::start(|_, _| {
            Reply::error(429, "Too many requests: Rate limit exceeded").header("retry-after", "30")
        })
        .await;
        let client = Client::new(
            server
                .config()
                .with_retry(server.config().retry.with_max_elapsed(Duration::from_secs(5))),
        )
        .expect("valid configuration");
        let started = Instant::now();
        let err = client
            .portfolio(&PortfolioRequest::for_wallet("W1"))
            .await
            .expect_err("429 beyond the bound");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            matches!(&err, Error::RetriesExhausted { attempts: 1, source, .. }
                if matches!(**source, Error::Api { retry_after: Some(d), .. } if d == Duration::from_secs(30))),
            "{err:?}"
        );
        assert_eq!(server.count(), 1);
        assert_eq!(client.metrics().throttled, 1);
        // One attempt is said in the singular.
        let message = err.to_string();
        assert!(
            message.contains("gave up after 1 attempt in"),
            "{message}"
        );
    })
    .await;
}

// ----- Paging -----

/// Serves `total` items in pages: the cursor is the offset of the next page; the last page has
/// the given `last_cursor` (null, missing or empty).
fn paged_reply(
    seen: &Seen,
    total: i64,
    item: impl Fn(i64) -> Value,
    last_cursor: Option<Value>,
) -> Reply {
    let limit = seen.body["limit"].as_i64().unwrap_or(20);
    let offset: i64 = seen.body["cursor"]
        .as_str()
        .map(|c| {
            c.strip_prefix("off-")
                .expect("our cursor")
                .parse()
                .expect("offset")
        })
        .unwrap_or(0);
    let end = (offset + limit).min(total);
    let data: Vec<Value> = (offset..end).map(&item).collect();
    let mut page = json!({"count": total, "data": data});
    if end < total {
        page["cursor"] = json!(format!("off-{end}"));
    } else if let Some(last) = last_cursor {
        page["cursor"] = last;
    }
    Reply::json(page)
}

#[tokio::test]
async fn paging_walks_every_item_exactly_once() {
    bounded(20, async {
        let server = Server::start(|seen, _| {
            if seen.path.ends_with("get-swaps") {
                paged_reply(
                    seen,
                    250,
                    |i| swap_json(i, "quote_token"),
                    Some(Value::Null),
                )
            } else if seen.path.ends_with("get-trades") {
                paged_reply(
                    seen,
                    230,
                    |i| trade_json(i, "sell", "close"),
                    Some(json!("")),
                )
            } else {
                paged_reply(seen, 45, |i| alt_profile_json(&format!("A{i}")), None)
            }
        })
        .await;
        let client = server.client();

        let swaps: Vec<_> = client
            .swaps_stream(SwapsRequest::for_token("T").limit(100))
            .try_collect()
            .await
            .expect("all swaps");
        let ids: Vec<i64> = swaps.iter().map(|s| s.id).collect();
        assert_eq!(ids, (0..250).collect::<Vec<_>>());
        assert_eq!(server.count(), 3);

        // The page stream exposes each page's cursor for resuming.
        let pages: Vec<_> = client
            .trade_pages(TradesRequest::for_wallet("W1").limit(100))
            .try_collect()
            .await
            .expect("all trade pages");
        let cursors: Vec<Option<&str>> = pages.iter().map(|p| p.next_cursor()).collect();
        assert_eq!(cursors, vec![Some("off-100"), Some("off-200"), None]);
        let trade_ids: Vec<i64> = pages
            .iter()
            .flat_map(|p| p.data.iter().map(|t| t.id))
            .collect();
        assert_eq!(trade_ids, (0..230).collect::<Vec<_>>());

        // Resuming from a recorded cursor fetches only the rest.
        let rest: Vec<_> = client
            .trades_stream(TradesRequest::for_wallet("W1").limit(100).cursor("off-200"))
            .try_collect()
            .await
            .expect("rest of the trades");
        assert_eq!(rest.first().map(|t| t.id), Some(200));
        assert_eq!(rest.len(), 30);

        let before = server.count();
        let profiles: Vec<_> = client
            .search_stream(SearchRequest::new().limit(20))
            .try_collect()
            .await
            .expect("all profiles");
        let names: Vec<String> = profiles.into_iter().map(|p| p.token_address).collect();
        assert_eq!(names, (0..45).map(|i| format!("A{i}")).collect::<Vec<_>>());
        assert_eq!(server.count() - before, 3);
        // Every request after the first carried the previous page's cursor.
        let search_cursors: Vec<Value> = server.seen()[before..]
            .iter()
            .map(|s| s.body.get("cursor").cloned().unwrap_or(Value::Null))
            .collect();
        assert_eq!(
            search_cursors,
            vec![Value::Null, json!("off-20"), json!("off-40")]
        );
    })
    .await;
}

#[tokio::test]
async fn an_empty_page_ends_paging() {
    bounded(10, async {
        // A server that keeps handing out fresh cursors but runs out of data.
        let server = Server::start(|_, i| {
            let data: Vec<Value> = if i < 2 {
                vec![swap_json(i as i64, "token_quote")]
            } else {
                vec![]
            };
            Reply::json(json!({"count": 2, "cursor": format!("c{i}"), "data": data}))
        })
        .await;
        let pages: Vec<_> = server
            .client()
            .swap_pages(SwapsRequest::for_pool("P1"))
            .try_collect()
            .await
            .expect("pages");
        assert_eq!(pages.len(), 3);
        assert!(pages[2].data.is_empty());
        assert_eq!(server.count(), 3);
    })
    .await;
}

#[tokio::test]
async fn a_repeated_cursor_stops_with_an_error() {
    bounded(10, async {
        let server = Server::start(|_, i| {
            Reply::json(json!({"count": 99, "cursor": "again", "data": [swap_json(i as i64, "quote_token")]}))
        })
        .await;
        let results: Vec<_> = server
            .client()
            .swaps_stream(SwapsRequest::for_token("T"))
            .collect()
            .await;
        assert_eq!(results.len(), 2, "{results:?}");
        assert_eq!(results[0].as_ref().map(|s| s.id).ok(), Some(0));
        assert!(
            matches!(&results[1], Err(Error::RepeatedCursor { operation: "altchain.get-swaps", cursor }) if cursor == "again"),
            "{:?}",
            results[1]
        );
        assert_eq!(server.count(), 2);
    })
    .await;
}

#[tokio::test]
async fn endless_fresh_cursors_stop_at_the_bound_the_count_allows() {
    bounded(10, async {
        // Every page holds two swaps, announces a total of 4 and a cursor never seen before.
        let server = Server::start(|_, i| {
            Reply::json(json!({
                "count": 4,
                "cursor": format!("c{i}"),
                "data": [swap_json(2 * i as i64, "quote_token"), swap_json(2 * i as i64 + 1, "quote_token")],
            }))
        })
        .await;
        let pages: Vec<_> = server
            .client()
            .swap_pages(SwapsRequest::for_token("T"))
            .collect()
            .await;
        // 4 + 4/2 + 10 pages of 2 = 26 items are allowed; the page that crosses it (the 14th)
        // is still yielded, then the error ends the stream.
        let (ok, errors): (Vec<_>, Vec<_>) = pages.iter().partition(|p| p.is_ok());
        assert_eq!(ok.len(), 14, "{pages:?}");
        assert_eq!(errors.len(), 1);
        assert!(
            matches!(pages.last(), Some(Err(Error::EndlessPaging { operation: "altchain.get-swaps", received: 28, count: 4, pages_without_new: 0 }))),
            "{:?}",
            pages.last()
        );
        assert_eq!(server.count(), 14, "no request after the bound");
    })
    .await;
}

#[tokio::test]
async fn an_endless_paging_error_reports_a_negative_count_as_sent() {
    bounded(10, async {
        // Fresh cursors, two swaps a page, and a count of -5: no count bounds the paging, so it
        // stops after ten pages and says what the service announced.
        let server = Server::start(|_, i| {
            Reply::json(json!({
                "count": -5,
                "cursor": format!("c{i}"),
                "data": [swap_json(2 * i as i64, "quote_token"), swap_json(2 * i as i64 + 1, "quote_token")],
            }))
        })
        .await;
        let pages: Vec<_> = server
            .client()
            .swap_pages(SwapsRequest::for_token("T"))
            .collect()
            .await;
        let Some(Err(err)) = pages.last() else {
            panic!("paging ends in an error: {pages:?}");
        };
        assert!(
            matches!(err, Error::EndlessPaging { count: -5, received: 22, .. }),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(message.contains("its count was -5"), "{message}");
        assert_eq!(server.count(), 11, "no request after the bound");
    })
    .await;
}

// ----- Chunking -----

#[tokio::test]
async fn large_price_requests_are_chunked_and_merged_in_input_order() {
    bounded(20, async {
        // The first chunk answers last, so arrival order differs from input order.
        let server = Server::start(|seen, _| {
            let tokens = body_strings(&seen.body, "tokens");
            let pools = body_strings(&seen.body, "pools");
            let delay = if tokens.first().map(String::as_str) == Some("t0") {
                Duration::from_millis(200)
            } else {
                Duration::ZERO
            };
            let all = tokens.iter().chain(&pools);
            let value = if seen.path.contains("/evm/") && seen.path.ends_with("get-price-history") {
                Value::Array(all.map(|t| history_json(t)).collect())
            } else if seen.path.contains("/evm/") {
                Value::Array(all.map(|t| evm_price_json(t)).collect())
            } else if seen.path.ends_with("get-price-stats") {
                Value::Array(all.map(|t| alt_stats_json(t)).collect())
            } else {
                Value::Array(all.map(|t| alt_price_json(t)).collect())
            };
            Reply::json(value).delay(delay)
        })
        .await;
        let client = Client::new(server.config().with_max_concurrency(2)).expect("valid");

        let tokens = addresses("t", 2500);
        let prices = client
            .alt_prices_chunked(&tokens, &[])
            .await
            .expect("chunked prices");
        let seen = server.seen();
        assert_eq!(seen.len(), 3);
        let mut sizes: Vec<usize> = seen
            .iter()
            .map(|s| body_strings(&s.body, "tokens").len())
            .collect();
        sizes.sort_unstable();
        assert_eq!(sizes, vec![500, 1000, 1000]);
        let got: Vec<&str> = prices.iter().map(|p| p.token_address.as_str()).collect();
        assert_eq!(got, tokens.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(server.max_in_flight() <= 2);

        // EVM price stats with pools as well: pools ride along in the same calls.
        let before = server.count();
        let pools = addresses("p", 1500);
        let stats = client
            .evm_prices_chunked(1, &tokens[..1200], &pools)
            .await
            .expect("chunked evm prices");
        assert_eq!(server.count() - before, 2);
        assert_eq!(stats.len(), 2700);

        let before = server.count();
        let stats = client
            .alt_price_stats_chunked(&tokens[..1001], &[])
            .await
            .expect("chunked altchain stats");
        assert_eq!(server.count() - before, 2);
        assert_eq!(
            stats.last().map(|s| s.token_address.as_str()),
            Some("t1000")
        );

        // Price history splits at 100 tokens.
        let before = server.count();
        let req = PriceHistoryRequest::for_tokens(1, tokens[..250].to_vec(), t0(), 3600);
        let series = client
            .evm_price_history_chunked(&req)
            .await
            .expect("chunked history");
        let calls = &server.seen()[before..];
        assert_eq!(calls.len(), 3);
        assert!(
            calls
                .iter()
                .all(|c| c.body["interval"] == 3600 && c.body["from"] == T0)
        );
        let got: Vec<&str> = series.iter().map(|s| s.token_address.as_str()).collect();
        assert_eq!(
            got,
            tokens[..250].iter().map(String::as_str).collect::<Vec<_>>()
        );
        assert!(server.max_in_flight() <= 2);
    })
    .await;
}

// ----- Validation -----

#[tokio::test]
async fn invalid_requests_send_nothing() {
    bounded(10, async {
        let server = Server::start(answer_by_path).await;
        let client = server.client();

        fn member(result: Result<impl std::fmt::Debug, Error>) -> String {
            match result {
                Err(Error::InvalidRequest { member, .. }) => member,
                other => panic!("expected InvalidRequest, got {other:?}"),
            }
        }

        assert_eq!(
            member(client.swaps(&SwapsRequest::for_token("T").limit(101)).await),
            "limit"
        );
        assert_eq!(
            member(client.swaps(&SwapsRequest::default()).await),
            "wallet"
        );
        assert_eq!(
            member(
                client
                    .trades(&TradesRequest::for_wallet("W").limit(0))
                    .await
            ),
            "limit"
        );
        assert_eq!(
            member(
                client
                    .search_profiles(&SearchRequest::new().limit(500))
                    .await
            ),
            "limit"
        );
        assert_eq!(
            member(
                client
                    .alt_prices(&AltPricesRequest::for_tokens(addresses("t", 1001)))
                    .await
            ),
            "tokens"
        );
        assert_eq!(
            member(
                client
                    .evm_prices(&EvmPricesRequest::for_pools(1, Vec::<String>::new()))
                    .await
            ),
            "pools"
        );
        assert_eq!(
            member(
                client
                    .evm_price_history(&PriceHistoryRequest::for_tokens(
                        1,
                        addresses("t", 101),
                        t0(),
                        60
                    ))
                    .await
            ),
            "tokens"
        );
        assert_eq!(
            member(
                client
                    .evm_price_history(&PriceHistoryRequest::for_tokens(1, ["t"], t0(), 0))
                    .await
            ),
            "interval"
        );
        assert_eq!(
            member(
                client
                    .candles(&CandlesRequest::for_token("T", 60).count(3))
                    .await
            ),
            "count"
        );
        assert_eq!(
            member(client.portfolio(&PortfolioRequest::for_wallet(" ")).await),
            "wallet"
        );
        assert_eq!(
            member(client.evm_profile(&GetProfileRequest::new(1, "")).await),
            "token"
        );
        // Chunked calls check every chunk first: one bad address anywhere sends nothing.
        let mut tokens = addresses("t", 2500);
        tokens[2400] = String::new();
        assert_eq!(
            member(client.alt_prices_chunked(&tokens, &[]).await),
            "tokens"
        );
        assert_eq!(
            member(client.evm_price_stats_chunked(1, &[], &[]).await),
            "tokens"
        );
        let empty = PriceHistoryRequest {
            tokens: None,
            pools: None,
            ..PriceHistoryRequest::for_tokens(1, ["t"], t0(), 60)
        };
        assert_eq!(
            member(client.evm_price_history_chunked(&empty).await),
            "tokens"
        );

        // Streams validate too, and end after the error.
        let results: Vec<_> = client
            .swaps_stream(SwapsRequest::for_token("T").limit(1000))
            .collect()
            .await;
        assert_eq!(results.len(), 1);
        assert!(matches!(results[0], Err(Error::InvalidRequest { .. })));

        assert_eq!(server.count(), 0);
        assert_eq!(client.metrics().requests, 0);
    })
    .await;
}

// ----- Throttling -----

#[tokio::test]
async fn the_rate_limit_spaces_requests() {
    bounded(20, async {
        let server = Server::start(|_, _| Reply::json(portfolio_json())).await;
        let client = Client::new(
            server
                .config()
                .with_rate_limit(Some(RateLimit::new(20.0, 2))),
        )
        .expect("valid configuration");
        let started = Instant::now();
        let calls = (0..8).map(|_| {
            let client = client.clone();
            async move { client.portfolio(&PortfolioRequest::for_wallet("W1")).await }
        });
        for r in futures::future::join_all(calls).await {
            r.expect("portfolio");
        }
        // Two go at once, the other six at 20 per second: at least 300 ms in all.
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(290), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
        assert_eq!(server.count(), 8);
    })
    .await;
}

// ----- Against the simulator -----

/// Every operation through the typed client against the simulator, with answers that agree
/// with each other (a page's `count`, chunked calls, the catalog).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_round_trips_against_the_simulator() {
    use dexlake::sim::{Scale, SimConfig, Simulator};
    let sim = Simulator::start(SimConfig {
        seed: 3,
        scale: Scale::Tiny,
        ..SimConfig::default()
    })
    .await
    .expect("simulator");
    let catalog = sim.market().catalog();
    let now = catalog.now;
    let alt = &catalog.altchain;
    let evm = &catalog.evm["1"];
    let token = alt.tokens[0].address.clone();
    let wallet = alt.wallets[0].address.clone();
    let pool = alt.pools[0].address.clone();
    let evm_token = evm.tokens[0].address.clone();
    let client = Client::new(ClientConfig {
        base_url: sim.base_url().to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    })
    .expect("client");

    let body = async {
        let profile = client
            .evm_profile(
                &GetProfileRequest::new(1, evm_token.clone())
                    .include_metadata(true)
                    .include_metrics([TimeWindow::D1]),
            )
            .await?;
        assert_eq!(profile.token_address, evm_token);
        assert!(profile.metadata.is_some());
        assert_eq!(
            profile.metrics.keys().collect::<Vec<_>>(),
            vec![&TimeWindow::D1]
        );

        let from = now - chrono::Duration::days(1);
        let history = client
            .evm_price_history(&PriceHistoryRequest::for_tokens(
                1,
                vec![evm_token.clone()],
                from,
                3600,
            ))
            .await?;
        assert_eq!(history.len(), 1);
        assert!(!history[0].prices.is_empty());

        let evm_prices = client
            .evm_prices(&EvmPricesRequest::for_tokens(1, vec![evm_token.clone()]))
            .await?;
        assert_eq!(evm_prices[0].chain_id, 1);
        let evm_stats = client
            .evm_price_stats(&EvmPricesRequest::for_tokens(1, vec![evm_token.clone()]))
            .await?;
        assert_eq!(evm_stats[0].token_address, evm_token);
        assert_eq!(
            evm_stats[0].usd_price, evm_prices[0].usd_price,
            "stats and price agree"
        );

        let search = client
            .search_profiles(
                &SearchRequest::new()
                    .sort("market.liquidity", SortDirection::Desc)
                    .limit(5),
            )
            .await?;
        assert!(search.count >= search.data.len() as i64 && !search.data.is_empty());

        let candles = client
            .candles(&CandlesRequest::for_token(token.clone(), 3600).from(from))
            .await?;
        assert!(!candles.is_empty());
        assert!(candles.windows(2).all(|w| w[0].timestamp < w[1].timestamp));

        let first = client
            .swaps(&SwapsRequest::for_token(token.clone()).limit(100))
            .await?;
        let all: Vec<_> = client
            .swaps_stream(SwapsRequest::for_token(token.clone()).limit(100))
            .try_collect()
            .await?;
        assert_eq!(all.len() as i64, first.count, "paging walks `count` swaps");
        let pool_swaps = client
            .swaps(&SwapsRequest::for_pool(pool.clone()).limit(10))
            .await?;
        assert!(pool_swaps.data.iter().all(|s| s.pool_address == pool));

        let trades: Vec<_> = client
            .trades_stream(TradesRequest::for_wallet(wallet.clone()).limit(100))
            .try_collect()
            .await?;
        assert!(!trades.is_empty() && trades.iter().all(|t| t.wallet_address == wallet));

        let tokens: Vec<String> = alt.tokens.iter().map(|t| t.address.clone()).collect();
        let prices = client
            .alt_prices(&AltPricesRequest::for_tokens(tokens.clone()))
            .await?;
        let chunked = client.alt_prices_chunked(&tokens, &[]).await?;
        assert_eq!(prices, chunked);
        let stats = client
            .alt_price_stats(&AltPricesRequest::for_tokens(vec![token.clone()]))
            .await?;
        assert_eq!(stats[0].token_address, token);

        let portfolio = client
            .portfolio(&PortfolioRequest::for_wallet(wallet.clone()))
            .await?;
        let sum: f64 = portfolio.tokens.iter().map(|t| t.value).sum();
        assert!((portfolio.value - sum).abs() <= 1e-6 * sum.abs().max(1.0));
        Ok::<_, Error>(())
    };
    tokio::time::timeout(Duration::from_secs(60), body)
        .await
        .expect("in time")
        .expect("every operation succeeds");
    assert!(sim.requests_served() >= 13);
    sim.shutdown().await;
}

// ----- Hostile servers -----

/// Every character of an error's message and of its sources' messages.
fn error_chain_text(err: &Error) -> String {
    let mut text = format!("{err} | {err:?}");
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        text.push_str(&format!(" | {s}"));
        source = s.source();
    }
    text
}

#[tokio::test]
async fn escape_codes_in_server_text_are_stripped() {
    bounded(20, async {
        let hostile = "Bad request\u{1b}[2J\u{1b}[31m: wiped\u{1b}]0;title\u{7}\r\nforged line\u{9b}1m\u{202e}";
        for reply in [
            Reply::error(400, hostile),
            Reply::raw(502, hostile),
            Reply::raw(200, &format!("{{\"nope\": \"{hostile}")),
        ] {
            let server = Server::start(move |_, _| reply.clone()).await;
            let client = Client::new(server.config().with_retry(RetryConfig::disabled()))
                .expect("valid configuration");
            let err = client
                .alt_prices(&AltPricesRequest::for_tokens(["T"]))
                .await
                .expect_err("a failure");
            let shown = err.to_string();
            assert!(
                !shown.chars().any(|c| c.is_control() || c == '\u{202e}'),
                "{shown:?}"
            );
            assert!(shown.contains("Bad request"), "the readable text stays: {shown:?}");
            assert!(shown.contains("forged line"), "{shown:?}");
            if let Error::Api { message, .. } = &err {
                assert!(!message.chars().any(char::is_control), "{message:?}");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn url_credentials_never_reach_errors() {
    bounded(20, async {
        const SECRET: &str = "s3cret-pw";
        // Nobody listening: the transport error names the URL.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = closed.local_addr().expect("address");
        drop(closed);
        let config = ClientConfig::new(format!("http://alice:{SECRET}@{addr}/prefix"))
            .with_api_key("k")
            .with_retry(RetryConfig::disabled());
        assert!(!format!("{config:?}").contains(SECRET), "{config:?}");
        let client = Client::new(config).expect("valid configuration");
        assert!(!format!("{client:?}").contains(SECRET));
        let err = client
            .portfolio(&PortfolioRequest::for_wallet("W1"))
            .await
            .expect_err("nothing listens");
        assert!(matches!(err, Error::Transport { .. }), "{err:?}");
        let text = error_chain_text(&err);
        assert!(!text.contains(SECRET), "{text}");
        assert!(text.contains("alice") || text.contains("***"), "{text}");

        // A base URL that cannot be used is refused without echoing its password.
        for bad in [
            format!("ftp://alice:{SECRET}@example.com"),
            format!("http://alice:{SECRET}@example.com:99999999"),
            format!("http://alice:{SECRET}@example.com/?q=1"),
        ] {
            let err = Client::new(ClientConfig::new(bad.as_str())).expect_err("refused");
            let text = error_chain_text(&err);
            assert!(!text.contains(SECRET), "{text}");
        }

        // Credentials are sent (as basic authentication) and errors after a retry run out
        // do not show them either.
        let server = Server::start(|_, _| Reply::error(500, "Internal server error")).await;
        let url = server
            .url
            .replace("http://", &format!("http://alice:{SECRET}@"));
        let client = Client::new(
            ClientConfig::new(url).with_api_key("k").with_retry(
                RetryConfig::default()
                    .with_max_retries(1)
                    .with_initial_backoff(Duration::from_millis(1))
                    .with_max_backoff(Duration::from_millis(2)),
            ),
        )
        .expect("valid configuration");
        let err = client
            .portfolio(&PortfolioRequest::for_wallet("W1"))
            .await
            .expect_err("500");
        assert!(!error_chain_text(&err).contains(SECRET));
    })
    .await;
}

#[tokio::test]
async fn an_oversized_body_fails_without_retry() {
    bounded(30, async {
        // Announced by Content-Length.
        let big = json!([{"token": "T", "balance": 1.0, "price": 1.0, "value": 1.0, "pad": "x".repeat(200_000)}]);
        let server = Server::start(move |_, _| Reply::json(big.clone())).await;
        let client = Client::new(server.config().with_max_response_bytes(64 * 1024))
            .expect("valid configuration");
        let err = client
            .alt_prices(&AltPricesRequest::for_tokens(["T"]))
            .await
            .expect_err("too large");
        assert!(
            matches!(err, Error::ResponseTooLarge { limit: 65_536, .. }),
            "{err:?}"
        );
        assert_eq!(server.count(), 1, "no retry");

        // Streamed without a length: reading stops at the cap.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&connections);
        let task = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            while let Ok((mut socket, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = socket.read(&mut request).await;
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    // 8 MiB of a JSON array that never closes, in 64 KiB chunks.
                    let chunk = format!("{:x}\r\n{}\r\n", 65_536, "[".repeat(65_536));
                    for _ in 0..128 {
                        if socket.write_all(chunk.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    let _ = socket.write_all(b"0\r\n\r\n").await;
                });
            }
        });
        let client = Client::new(
            ClientConfig::new(format!("http://{addr}"))
                .with_api_key("k")
                .with_max_response_bytes(1 << 20),
        )
        .expect("valid configuration");
        let err = client
            .alt_prices(&AltPricesRequest::for_tokens(["T"]))
            .await
            .expect_err("too large");
        assert!(
            matches!(err, Error::ResponseTooLarge { limit, .. } if limit == 1 << 20),
            "{err:?}"
        );
        assert!(err.to_string().contains("1048576"), "{err}");
        assert_eq!(connections.load(Ordering::SeqCst), 1, "no retry");
        assert_eq!(ClientConfig::default().max_response_bytes, 64 << 20);
        task.abort();
    })
    .await;
}
