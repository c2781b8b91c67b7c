//! The HTTP face of the simulator: routes, keys, errors, rate limit, faults and counters.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::live::Clock;
use super::market::{Chain, SyntheticMarket, mix, utc};
use super::paging::page_of;
use super::reject::Reject;
use super::{DEMO_KEY, FREE_KEY, SimConfig, reference};
use crate::api::models::{
    AltPrice, AltPriceStats, EvmPrice, EvmPriceStats, Page, PriceHistorySeries, TimeWindow,
};
use crate::api::profile_query::SearchRequest;
use crate::api::requests::{
    AltPricesRequest, CandlesRequest, EvmPricesRequest, GetProfileRequest, Operation,
    PortfolioRequest, PriceHistoryRequest, SwapsRequest, TradesRequest,
};
use crate::error::{ApiStatus, Error, Result};

/// Upper bound of the JSON size of one swap or trade, bytes.
const ITEM_BYTES: usize = 1_100;

/// Most points one price-history series may have; a longer request is a 400.
pub const MAX_HISTORY_POINTS: i64 = 100_000;

/// Requests served, by operation and status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimStats {
    /// Every request answered on an operation's path, whatever its status.
    pub total: u64,
    /// Operation name (such as `altchain.get-swaps`) → status code → count.
    pub by_operation: BTreeMap<String, BTreeMap<u16, u64>>,
}

impl SimStats {
    /// Requests of `operation` answered with `status`.
    pub fn count(&self, operation: Operation, status: u16) -> u64 {
        self.by_operation
            .get(operation.name())
            .and_then(|m| m.get(&status))
            .copied()
            .unwrap_or(0)
    }

    /// Requests of `operation`, whatever their status.
    pub fn operation_total(&self, operation: Operation) -> u64 {
        self.by_operation
            .get(operation.name())
            .map_or(0, |m| m.values().sum())
    }
}

struct TokenBucket {
    tokens: f64,
    last: Instant,
}

struct State {
    /// The market as generated (at its fixed "now").
    market: Arc<SyntheticMarket>,
    /// The clock of a live simulator.
    clock: Option<Clock>,
    /// The market at the clock's latest instant asked for.
    latest: Mutex<Arc<SyntheticMarket>>,
    rate_limit: Option<f64>,
    buckets: Mutex<HashMap<String, TokenBucket>>,
    fail_rate: f64,
    throttle_rate: f64,
    faults: Mutex<ChaCha8Rng>,
    served: AtomicU64,
    stats: Mutex<BTreeMap<(&'static str, u16), u64>>,
    last_rejection: Mutex<Option<String>>,
    /// Whether requests are answered on the blocking pool (for lazily stored markets).
    offload: bool,
    /// Full search documents of the altchain tokens at an instant: built at start for the
    /// fixed "now", again for each instant a live simulator is searched at.
    profiles: Mutex<(i64, Arc<Vec<serde_json::Value>>)>,
}

impl State {
    /// The market as the service answers now: at the clock's instant for a live simulator.
    fn market_now(&self) -> Arc<SyntheticMarket> {
        let Some(clock) = &self.clock else {
            return self.market.clone();
        };
        let now = clock.now();
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if latest.now == now {
            return latest;
        }
        // Built outside the lock: two requests at a new instant may both build it, which
        // costs a little time but gives the same market.
        let market = Arc::new(self.market.at_secs(now));
        *self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = market.clone();
        market
    }

    /// The search documents of `market`'s altchain tokens at its instant.
    fn profiles(&self, market: &SyntheticMarket) -> Arc<Vec<serde_json::Value>> {
        let cached = self
            .profiles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if cached.0 == market.now {
            return cached.1;
        }
        let docs = Arc::new(reference::alt_profile_documents(&market.alt));
        *self
            .profiles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (market.now, docs.clone());
        docs
    }
}

/// A running simulator: an HTTP server on loopback over a generated [`SyntheticMarket`].
pub struct Simulator {
    base_url: String,
    market: Arc<SyntheticMarket>,
    state: Arc<State>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("base_url", &self.base_url)
            .field("seed", &self.market.seed)
            .field("scale", &self.market.scale)
            .finish()
    }
}

impl Simulator {
    /// Generates the market of `config` (a live one when `config.live` is set), binds
    /// `config.addr` and serves in a spawned task. Must be called within a tokio runtime.
    pub async fn start(config: SimConfig) -> Result<Simulator> {
        let (seed, scale) = (config.seed, config.scale);
        let horizon = match &config.live {
            Some(live) => {
                live.validate()?;
                Some(live.horizon_days)
            }
            None => None,
        };
        let market = tokio::task::spawn_blocking(move || match horizon {
            Some(days) => SyntheticMarket::generate_live(seed, scale, days),
            None => Ok(SyntheticMarket::generate(seed, scale)),
        })
        .await
        .map_err(|e| Error::Config(format!("generating the market failed: {e}")))?
        .map_err(|e| Error::Config(format!("a live simulator: {e}")))?;
        Self::serve(config, Arc::new(market)).await
    }

    /// Serves an already generated market (for tests and benchmarks that reuse one). With
    /// `config.live`, the market must be live ([`SyntheticMarket::generate_live`]); a live
    /// market served without it answers at its fixed "now".
    pub async fn serve(config: SimConfig, market: Arc<SyntheticMarket>) -> Result<Simulator> {
        if let Some(live) = &config.live {
            live.validate()?;
            if !market.is_live() {
                return Err(Error::Config(
                    "a live simulator needs a live market (SyntheticMarket::generate_live)"
                        .to_owned(),
                ));
            }
        }
        if !(0.0..=1.0).contains(&config.fail_rate) || !(0.0..=1.0).contains(&config.throttle_rate)
        {
            return Err(Error::Config(format!(
                "fail rate {} and throttle rate {} must lie in [0, 1]",
                config.fail_rate, config.throttle_rate
            )));
        }
        if let Some(r) = config.rate_limit
            && !(r > 0.0 && r.is_finite())
        {
            return Err(Error::Config(format!(
                "rate limit {r} must be a positive number of requests per second"
            )));
        }
        if config.altchain_segment.is_empty()
            || config.altchain_segment.contains('/')
            || config.altchain_segment == "evm"
        {
            return Err(Error::Config(format!(
                "altchain path segment {:?} must be one non-empty path segment other than `evm`",
                config.altchain_segment
            )));
        }
        let listener = tokio::net::TcpListener::bind(config.addr)
            .await
            .map_err(|e| Error::io("binding", config.addr.to_string(), e))?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::io("reading the address of", config.addr.to_string(), e))?;
        let docs_market = market.clone();
        let profiles =
            tokio::task::spawn_blocking(move || reference::alt_profile_documents(&docs_market.alt))
                .await
                .map_err(|e| {
                    Error::Config(format!("building the profile documents failed: {e}"))
                })?;
        let clock = config.live.as_ref().map(Clock::new);
        let fault_seed = config
            .fault_seed
            .unwrap_or_else(|| mix(config.seed, 0xFA17));
        let state = Arc::new(State {
            latest: Mutex::new(market.clone()),
            profiles: Mutex::new((market.now, Arc::new(profiles))),
            // A live market is taken at each new instant and its profiles rebuilt for a search:
            // that runs on the blocking pool too.
            offload: market.is_lazy() || clock.is_some(),
            clock,
            market: market.clone(),
            rate_limit: config.rate_limit,
            buckets: Mutex::new(HashMap::new()),
            fail_rate: config.fail_rate,
            throttle_rate: config.throttle_rate,
            faults: Mutex::new(ChaCha8Rng::seed_from_u64(fault_seed)),
            served: AtomicU64::new(0),
            stats: Mutex::new(BTreeMap::new()),
            last_rejection: Mutex::new(None),
        });
        let mut router = Router::new();
        for op in Operation::ALL {
            let st = state.clone();
            router = router.route(
                &op.path(&config.altchain_segment),
                post(move |headers: HeaderMap, body: Bytes| {
                    let st = st.clone();
                    async move {
                        if !st.offload {
                            return handle(&st, op, &headers, &body);
                        }
                        // A lazy market may regenerate a token's stream (up to a second of
                        // CPU) to answer: that runs on the blocking pool, not on a worker.
                        let job =
                            tokio::task::spawn_blocking(move || handle(&st, op, &headers, &body));
                        job.await.unwrap_or_else(|e| {
                            error_response(&Reject {
                                status: ApiStatus::InternalServerError,
                                retry_after: None,
                                reason: format!("the request's task failed: {e}"),
                            })
                        })
                    }
                }),
            );
        }
        // The simulator's own route, not an operation of the service: no key, not counted.
        let st = state.clone();
        router = router.route(
            "/sim/catalog",
            get(move || {
                let st = st.clone();
                async move {
                    let answer =
                        tokio::task::spawn_blocking(move || ok(&st.market_now().catalog()))
                            .await
                            .unwrap_or_else(|e| {
                                Err(Reject {
                                    status: ApiStatus::InternalServerError,
                                    retry_after: None,
                                    reason: format!("the catalog's task failed: {e}"),
                                })
                            });
                    match answer {
                        Ok(bytes) => json_response(StatusCode::OK, bytes),
                        Err(reject) => error_response(&reject),
                    }
                }
            }),
        );
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let server = axum::serve(listener, router).with_graceful_shutdown(async {
                let _ = rx.await;
            });
            // The server only ends on shutdown or on an accept-loop failure; there is nobody
            // to report the latter to but the handle's owner, who sees the port go dark.
            let _ = server.await;
        });
        Ok(Simulator {
            base_url: format!("http://{local}"),
            market,
            state,
            shutdown: Some(tx),
            task: Some(task),
        })
    }

    /// The base URL, such as `http://127.0.0.1:41234`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The market being served, as generated: at its fixed "now". For a live simulator, the
    /// market as it answers at this instant is [`Simulator::market_now`].
    pub fn market(&self) -> &Arc<SyntheticMarket> {
        &self.market
    }

    /// The market as the simulator answers at this instant of its clock (the fixed market
    /// when it is not live): its catalog, swaps and derived answers are those the service
    /// gives now.
    pub fn market_now(&self) -> Arc<SyntheticMarket> {
        self.state.market_now()
    }

    /// Whether the simulator's market keeps trading with a clock ([`SimConfig::live`]).
    pub fn is_live(&self) -> bool {
        self.state.clock.is_some()
    }

    /// The simulated instant the simulator answers at (whole seconds): the fixed "now" when it
    /// is not live.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        utc(self
            .state
            .clock
            .as_ref()
            .map_or(self.market.now, Clock::now))
    }

    /// Simulated seconds per real second of a live simulator's clock: 0 for a manual clock
    /// or a simulator that is not live.
    pub fn speed(&self) -> f64 {
        self.state.clock.as_ref().map_or(0.0, Clock::speed)
    }

    /// Moves a live simulator's clock `seconds` forward (a manual clock moves only so). A
    /// simulator that is not live has no clock: that is an invalid argument.
    pub fn advance(&self, seconds: u64) -> Result<()> {
        match &self.state.clock {
            Some(clock) => {
                clock.advance(seconds);
                Ok(())
            }
            None => Err(Error::InvalidArgument {
                argument: "advance".into(),
                reason: "the simulator is not live (SimConfig::live), so it has no clock".into(),
            }),
        }
    }

    /// Requests answered so far on the operations' paths (every status).
    pub fn requests_served(&self) -> u64 {
        self.state.served.load(Ordering::Relaxed)
    }

    /// Requests answered so far, by operation and status.
    pub fn stats(&self) -> SimStats {
        let stats = self
            .state
            .stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = SimStats {
            total: self.requests_served(),
            ..SimStats::default()
        };
        for (&(op, status), &n) in stats.iter() {
            out.by_operation
                .entry(op.to_owned())
                .or_default()
                .insert(status, n);
        }
        out
    }

    /// Why the latest rejected request was rejected (operation, status and reason), for
    /// diagnosing a test: the response body itself only carries the interface's text.
    pub fn last_rejection(&self) -> Option<String> {
        self.state
            .last_rejection
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Stops accepting connections, lets requests in flight finish, and waits for the server.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn error_response(reject: &Reject) -> Response {
    let text = reject
        .status
        .documented_text()
        .expect("the simulator only answers documented error statuses");
    let body = serde_json::to_vec(&serde_json::json!({ "error": text }))
        .expect("a JSON object of one string serialises");
    let status = StatusCode::from_u16(reject.status.code())
        .expect("documented statuses are valid HTTP statuses");
    let mut r = json_response(status, body);
    if let Some(s) = reject.retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

fn handle(state: &State, op: Operation, headers: &HeaderMap, body: &[u8]) -> Response {
    // The answer's `Date` is the simulated instant read before answering: the answer holds
    // every event before it (it is computed at that instant or a later one), as the real
    // service's answers hold what happened before their `Date`. A follower's watermark.
    let at = state.clock.as_ref().map_or(state.market.now, Clock::now);
    let (status, mut response) =
        match admit(state, op, headers).and_then(|()| answer(state, op, body)) {
            Ok(bytes) => (200, json_response(StatusCode::OK, bytes)),
            Err(reject) => {
                *state
                    .last_rejection
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(format!(
                    "{} {}: {}",
                    op.name(),
                    reject.status.code(),
                    reject.reason
                ));
                (reject.status.code(), error_response(&reject))
            }
        };
    if let Ok(secs) = u64::try_from(at)
        && let Ok(date) = HeaderValue::from_str(&httpdate::fmt_http_date(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs),
        ))
    {
        response.headers_mut().insert(header::DATE, date);
    }
    state.served.fetch_add(1, Ordering::Relaxed);
    *state
        .stats
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry((op.name(), status))
        .or_insert(0) += 1;
    response
}

/// Key, plan, rate limit and injected faults, in that order.
fn admit(state: &State, op: Operation, headers: &HeaderMap) -> Result<(), Reject> {
    let key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if key != DEMO_KEY && key != FREE_KEY {
        return Err(Reject::status(
            ApiStatus::Unauthorized,
            None,
            "missing or unknown x-api-key",
        ));
    }
    if key == FREE_KEY
        && matches!(
            op,
            Operation::AltSearchProfiles | Operation::AltGetPortfolio
        )
    {
        return Err(Reject::status(
            ApiStatus::Forbidden,
            None,
            "the free plan has no search-profiles or get-portfolio",
        ));
    }
    if let Some(rate) = state.rate_limit {
        let mut buckets = state
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        let b = buckets.entry(key.to_owned()).or_insert(TokenBucket {
            tokens: rate,
            last: now,
        });
        b.tokens = (b.tokens + now.duration_since(b.last).as_secs_f64() * rate).min(rate);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
        } else {
            let wait = ((1.0 - b.tokens) / rate).ceil().max(1.0) as u64;
            return Err(Reject::status(
                ApiStatus::TooManyRequests,
                Some(wait),
                "the key's rate limit is exhausted",
            ));
        }
    }
    if state.fail_rate > 0.0 || state.throttle_rate > 0.0 {
        let u: f64 = state
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .random();
        if u < state.fail_rate {
            return Err(Reject::status(
                ApiStatus::InternalServerError,
                None,
                "injected failure",
            ));
        }
        if u < state.fail_rate + state.throttle_rate {
            return Err(Reject::status(
                ApiStatus::TooManyRequests,
                Some(1),
                "injected throttling",
            ));
        }
    }
    Ok(())
}

/// A request body: a JSON object of the operation's members. serde's derive would also read
/// a JSON array member by member, which the interface does not allow, so that is refused first.
fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, Reject> {
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return Err(Reject::bad("body: expected a JSON object, not an array"));
    }
    serde_json::from_slice(body).map_err(|e| Reject::bad(format!("body: {e}")))
}

fn ok<T: Serialize>(value: &T) -> Result<Vec<u8>, Reject> {
    ok_sized(value, 4 * 1024)
}

/// Serialises an answer into a buffer of `capacity` bytes to start with (a page of 100 swaps
/// is about 90 KB; sizing it up front saves regrowing and copying the buffer).
fn ok_sized<T: Serialize>(value: &T, capacity: usize) -> Result<Vec<u8>, Reject> {
    let mut out = Vec::with_capacity(capacity);
    serde_json::to_writer(&mut out, value)
        .map(|()| out)
        .map_err(|e| Reject {
            status: ApiStatus::InternalServerError,
            retry_after: None,
            reason: format!("serialising the answer: {e}"),
        })
}

fn valid(r: Result<()>) -> Result<(), Reject> {
    r.map_err(Reject::bad)
}

fn evm_chain(market: &SyntheticMarket, chain_id: i64) -> Result<&Chain, Reject> {
    market
        .evm_chain(chain_id)
        .ok_or_else(|| Reject::bad(format!("unsupported chain_id {chain_id}")))
}

fn time_secs(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp()
}

fn answer(state: &State, op: Operation, body: &[u8]) -> Result<Vec<u8>, Reject> {
    let market = state.market_now();
    let market = &*market;
    let alt = &market.alt;
    match op {
        Operation::EvmGetProfile => {
            let req: GetProfileRequest = parse(body)?;
            valid(req.validate())?;
            let chain = evm_chain(market, req.chain_id)?;
            // The interface has no 404: a token the chain does not know is a bad parameter.
            let token = chain
                .token_index(&req.token)
                .ok_or_else(|| Reject::bad(format!("unknown token {:?}", req.token)))?;
            let options = req.options.unwrap_or_default();
            let windows: Vec<TimeWindow> = options.include_metrics.unwrap_or_default();
            if let Some(w) = windows.iter().find(|w| w.seconds().is_none()) {
                return Err(Reject::bad(format!("unknown metrics window {w}")));
            }
            ok(&reference::evm_profile(
                chain,
                req.chain_id,
                token,
                options.include_metadata.unwrap_or(false),
                &windows,
            ))
        }
        Operation::EvmGetPriceHistory => {
            let req: PriceHistoryRequest = parse(body)?;
            valid(req.validate())?;
            let chain = evm_chain(market, req.chain_id)?;
            let from = time_secs(req.from);
            // No point exists after the simulated present, whatever `to` asks for.
            let to = req.to.map_or(chain.now, time_secs).min(chain.now);
            if reference::history_points(from, to, req.interval) > MAX_HISTORY_POINTS {
                return Err(Reject::bad(format!(
                    "more than {MAX_HISTORY_POINTS} points per series"
                )));
            }
            let mut out = Vec::new();
            for t in req.tokens.iter().flatten() {
                if let Some(ti) = chain.token_index(t) {
                    let info = &chain.tokens[ti as usize];
                    out.push(PriceHistorySeries {
                        token_address: info.address.clone(),
                        pool_address: chain.pools[info.pools[0] as usize].address.clone(),
                        prices: reference::price_history(&chain.stream(ti), from, to, req.interval),
                    });
                }
            }
            for p in req.pools.iter().flatten() {
                if let Some(pi) = chain.pool_index(p) {
                    let pool = &chain.pools[pi as usize];
                    out.push(PriceHistorySeries {
                        token_address: chain.tokens[pool.token as usize].address.clone(),
                        pool_address: pool.address.clone(),
                        prices: reference::price_history(
                            &chain.pool_records(pi),
                            from,
                            to,
                            req.interval,
                        ),
                    });
                }
            }
            ok(&out)
        }
        Operation::EvmGetPrice | Operation::EvmGetPriceStats => {
            let req: EvmPricesRequest = parse(body)?;
            valid(req.validate(op))?;
            let chain = evm_chain(market, req.chain_id)?;
            if op == Operation::EvmGetPrice {
                let out: Vec<EvmPrice> = latest_records(chain, &req.tokens, &req.pools)
                    .into_iter()
                    .map(|(token, s)| EvmPrice {
                        chain_id: req.chain_id,
                        token_address: chain.tokens[token as usize].address.clone(),
                        pool_address: chain.pools[s.pool as usize].address.clone(),
                        usd_price: s.token_price,
                        block_number: s.slot,
                        block_time: utc(s.time),
                    })
                    .collect();
                ok(&out)
            } else {
                let lists = price_lists(chain, &req.tokens, &req.pools);
                let out: Vec<EvmPriceStats> = lists
                    .iter()
                    .filter_map(|(token, list)| {
                        let s = list.last()?;
                        Some(EvmPriceStats {
                            token_address: chain.tokens[*token as usize].address.clone(),
                            pool_address: chain.pools[s.pool as usize].address.clone(),
                            usd_price: s.token_price,
                            changes: reference::price_changes(list, chain.now),
                            block_number: s.slot,
                            block_time: utc(s.time),
                        })
                    })
                    .collect();
                ok(&out)
            }
        }
        Operation::AltGetPrice | Operation::AltGetPriceStats => {
            let req: AltPricesRequest = parse(body)?;
            valid(req.validate(op))?;
            if op == Operation::AltGetPrice {
                let out: Vec<AltPrice> = latest_records(alt, &req.tokens, &req.pools)
                    .into_iter()
                    .map(|(token, s)| AltPrice {
                        token_address: alt.tokens[token as usize].address.clone(),
                        pool_address: alt.pools[s.pool as usize].address.clone(),
                        usd_price: s.token_price,
                        block_slot: s.slot,
                        block_time: utc(s.time),
                    })
                    .collect();
                ok(&out)
            } else {
                let lists = price_lists(alt, &req.tokens, &req.pools);
                let out: Vec<AltPriceStats> = lists
                    .iter()
                    .filter_map(|(token, list)| {
                        let s = list.last()?;
                        Some(AltPriceStats {
                            token_address: alt.tokens[*token as usize].address.clone(),
                            pool_address: alt.pools[s.pool as usize].address.clone(),
                            usd_price: s.token_price,
                            changes: reference::price_changes(list, alt.now),
                            block_slot: s.slot,
                            block_time: utc(s.time),
                        })
                    })
                    .collect();
                ok(&out)
            }
        }
        Operation::AltGetPriceCandles => {
            let req: CandlesRequest = parse(body)?;
            valid(req.validate())?;
            let token = match &req.token {
                Some(t) => match alt.token_index(t) {
                    Some(i) => Some(i),
                    None => return ok(&Vec::<()>::new()),
                },
                None => None,
            };
            let pool = match &req.pool {
                Some(p) => match alt.pool_index(p) {
                    Some(i) => Some(i),
                    None => return ok(&Vec::<()>::new()),
                },
                None => None,
            };
            let list = reference::price_source(alt, token, pool);
            let count = req
                .count
                .map(|c| usize::try_from(c).map_err(|e| Reject::bad(format!("count {c}: {e}"))))
                .transpose()?;
            ok(&reference::candles(
                &list,
                alt.now,
                req.interval,
                req.from.map(time_secs),
                req.to.map(time_secs),
                count,
            ))
        }
        Operation::AltGetSwaps => {
            let req: SwapsRequest = parse(body)?;
            valid(req.validate())?;
            let page = page_of(
                alt,
                req.wallet.as_deref(),
                req.token.as_deref(),
                req.pool.as_deref(),
                req.limit,
                req.cursor.as_deref(),
            )?;
            let capacity = 256 + ITEM_BYTES * page.items.len();
            ok_sized(
                &Page {
                    count: page.count,
                    cursor: page.cursor,
                    data: page.items.iter().map(|&i| alt.swap_view(i)).collect(),
                },
                capacity,
            )
        }
        Operation::AltGetTrades => {
            let req: TradesRequest = parse(body)?;
            valid(req.validate())?;
            let page = page_of(
                alt,
                req.wallet.as_deref(),
                req.token.as_deref(),
                None,
                req.limit,
                req.cursor.as_deref(),
            )?;
            let capacity = 256 + ITEM_BYTES * page.items.len();
            ok_sized(
                &Page {
                    count: page.count,
                    cursor: page.cursor,
                    data: page.items.iter().map(|&i| alt.trade_view(i)).collect(),
                },
                capacity,
            )
        }
        Operation::AltGetPortfolio => {
            let req: PortfolioRequest = parse(body)?;
            valid(req.validate())?;
            ok(&reference::portfolio(alt, alt.wallet_index(&req.wallet)))
        }
        Operation::AltSearchProfiles => {
            let req: SearchRequest = parse(body)?;
            // The engine runs the request's `validate()` itself.
            let page = crate::search::search(&req, &state.profiles(market)).map_err(Reject::bad)?;
            ok(&page)
        }
    }
}

/// The latest swap of each known token, then of each known pool, with the token it prices.
/// Unknown addresses are left out of the answer.
fn latest_records(
    chain: &Chain,
    tokens: &Option<Vec<String>>,
    pools: &Option<Vec<String>>,
) -> Vec<(u32, crate::sim::SwapRecord)> {
    let mut out = Vec::new();
    for t in tokens.iter().flatten() {
        if let Some(s) = chain
            .token_index(t)
            .and_then(|ti| chain.latest_of_token(ti))
        {
            out.push((s.token, s));
        }
    }
    for p in pools.iter().flatten() {
        if let Some(s) = chain.pool_index(p).and_then(|pi| chain.latest_of_pool(pi)) {
            out.push((s.token, s));
        }
    }
    out
}

/// The swaps of a price request: one list per known token, then one per known pool, each
/// with the token it prices. Unknown addresses are left out of the answer.
fn price_lists(
    chain: &Chain,
    tokens: &Option<Vec<String>>,
    pools: &Option<Vec<String>>,
) -> Vec<(u32, reference::Records)> {
    let mut out = Vec::new();
    for t in tokens.iter().flatten() {
        if let Some(ti) = chain.token_index(t) {
            out.push((ti, reference::Records::Shared(chain.stream(ti))));
        }
    }
    for p in pools.iter().flatten() {
        if let Some(pi) = chain.pool_index(p) {
            out.push((
                chain.pools[pi as usize].token,
                reference::Records::Owned(chain.pool_records(pi)),
            ));
        }
    }
    out
}
