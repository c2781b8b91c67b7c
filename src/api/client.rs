//! The HTTP client of the service.
//!
//! [`Client`] sends the eleven operations as typed requests and decodes typed answers. Every
//! request is checked against the interface's bounds before anything is sent; every HTTP attempt
//! takes a permit from one [`Permits`] (concurrency and rate); failures that may pass when
//! repeated (429, 5xx, connection errors, timeouts) are retried with jittered exponential backoff
//! or after the service's `Retry-After`. On top of the single calls the client offers paging
//! streams that follow the cursor, and chunked price calls that split address lists larger than
//! one call allows.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::stream::{self, Stream, StreamExt};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::models::Portfolio;
use super::models::{
    AltPrice, AltPriceStats, AltTokenProfile, Candle, EvmPrice, EvmPriceStats, EvmTokenProfile,
    Page, PriceHistorySeries, Swap, Trade,
};
use super::profile_query::SearchRequest;
use super::requests::{
    AltPricesRequest, CandlesRequest, EvmPricesRequest, GetProfileRequest, MAX_HISTORY_POOLS,
    MAX_HISTORY_TOKENS, MAX_PRICE_ADDRESSES, Operation, PortfolioRequest, PriceHistoryRequest,
    SwapsRequest, TradesRequest,
};
use super::retry::{Permits, parse_retry_after};
use crate::error::{ApiStatus, Error, Result, printable};

mod body;
mod config;

pub use body::{SharesBody, decode_body, decode_page_shared};
use body::{excerpt, redact_decode_error, redact_key};

pub use config::{
    API_KEY_HEADER, ClientConfig, DEFAULT_ALTCHAIN_SEGMENT, DEFAULT_BASE_URL,
    DEFAULT_MAX_RESPONSE_BYTES, ENV_ALTCHAIN_SEGMENT, ENV_API_KEY, ENV_BASE_URL,
};

/// Counters of a client's traffic, as a snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientMetrics {
    /// HTTP attempts sent, retries included.
    pub requests: u64,
    /// Attempts that were retries.
    pub retries: u64,
    /// 429 answers seen.
    pub throttled: u64,
    /// Calls that ended in an error after reaching the network (retries exhausted included).
    pub failures: u64,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    retries: AtomicU64,
    throttled: AtomicU64,
    failures: AtomicU64,
    /// The earliest `Date` of a successful answer since the last
    /// [`Client::take_earliest_server_date`], as Unix seconds plus one (0: none yet).
    earliest_date: AtomicU64,
}

impl Counters {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

struct Inner {
    config: ClientConfig,
    /// The checked base URL, credentials included (the HTTP client sends them as basic
    /// authentication); never shown.
    base_url: String,
    http: reqwest::Client,
    permits: Permits,
    counters: Counters,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("config", &self.config)
            .field("base_url", &redact_url(&self.base_url))
            .field("http", &self.http)
            .field("permits", &self.permits)
            .field("counters", &self.counters)
            .finish()
    }
}

/// The typed async client of the service. Cloning is cheap; clones share the connection pool,
/// the permits and the counters.
///
/// # Example
///
/// ```no_run
/// use dexlake::api::client::{Client, ClientConfig};
/// use dexlake::api::requests::{AltPricesRequest, SwapsRequest};
/// use futures::TryStreamExt;
///
/// # async fn demo() -> dexlake::Result<()> {
/// let client = Client::new(
///     ClientConfig::new("http://127.0.0.1:8080").with_api_key("demo-key"),
/// )?;
///
/// // One call.
/// let prices = client
///     .alt_prices(&AltPricesRequest::for_tokens(["So11111111111111111111111111111111111111112"]))
///     .await?;
/// println!("{} prices", prices.len());
///
/// // Every swap of a token, following the cursor page after page.
/// let swaps: Vec<_> = client
///     .swaps_stream(SwapsRequest::for_token("TokenAddress").limit(100))
///     .try_collect()
///     .await?;
/// println!("{} swaps in {} requests", swaps.len(), client.metrics().requests);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// The service's error body.
#[derive(serde::Deserialize)]
struct ErrorBody {
    error: String,
}

/// An answer with the `Date` header the service sent with it (`None` when it sent none, or
/// one that does not parse): the service's time when it answered, in whole seconds.
#[derive(Debug, Clone)]
pub(crate) struct Dated<T> {
    pub(crate) value: T,
    pub(crate) date: Option<chrono::DateTime<chrono::Utc>>,
}

/// How one attempt ended, when it did not succeed.
struct Failure {
    error: Error,
    /// Whether sending the same request again may succeed.
    retryable: bool,
    /// The service's `Retry-After`, if it sent one.
    retry_after: Option<Duration>,
}

impl Client {
    /// A client for the configuration; fails on a configuration that cannot work.
    pub fn new(config: ClientConfig) -> Result<Client> {
        let base_url = config.checked_base_url()?;
        config.check_segment()?;
        config.retry.validate()?;
        if config.max_response_bytes == 0 {
            return Err(Error::Config(
                "max_response_bytes must be at least 1".into(),
            ));
        }
        let permits = Permits::new(config.rate_limit.as_ref(), config.max_concurrency)?;

        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(key) = &config.api_key {
            let mut value = HeaderValue::from_str(key).map_err(|e| {
                Error::Config(format!(
                    "api_key cannot be sent as an HTTP header value: {e}"
                ))
            })?;
            value.set_sensitive(true);
            headers.insert(API_KEY_HEADER, value);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .user_agent(config.user_agent.clone())
            .timeout(config.timeout)
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| Error::Config(format!("could not build the HTTP client: {e}")))?;
        Ok(Client {
            inner: Arc::new(Inner {
                config,
                base_url,
                http,
                permits,
                counters: Counters::default(),
            }),
        })
    }

    /// A client configured from the environment (see [`ClientConfig::from_env`]).
    pub fn from_env() -> Result<Client> {
        Client::new(ClientConfig::from_env()?)
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// A snapshot of the traffic counters.
    pub fn metrics(&self) -> ClientMetrics {
        let c = &self.inner.counters;
        ClientMetrics {
            requests: c.requests.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            throttled: c.throttled.load(Ordering::Relaxed),
            failures: c.failures.load(Ordering::Relaxed),
        }
    }

    /// The earliest `Date` header of the service's successful answers since the last call (or
    /// since the client was built), and starts again: every request made since was answered
    /// at or after that instant, so whatever the service held before it was visible to each.
    /// A follower takes it as its watermark. Whole seconds, as HTTP dates are; `None` when no
    /// answer carried a date.
    pub fn take_earliest_server_date(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        let encoded = self.inner.counters.earliest_date.swap(0, Ordering::Relaxed);
        let secs = i64::try_from(encoded.checked_sub(1)?).ok()?;
        chrono::DateTime::from_timestamp(secs, 0)
    }

    /// The permits every request of this client takes; share them to throttle other work
    /// against the same service.
    pub fn permits(&self) -> &Permits {
        &self.inner.permits
    }

    /// The full URL of an operation.
    pub fn url(&self, op: Operation) -> String {
        format!(
            "{}{}",
            self.inner.base_url,
            op.path(&self.inner.config.altchain_segment)
        )
    }

    // ----- The eleven operations -----

    /// EVM get-profile (4.1): the profile of one token.
    pub async fn evm_profile(&self, req: &GetProfileRequest) -> Result<EvmTokenProfile> {
        req.validate()?;
        self.call(Operation::EvmGetProfile, req).await
    }

    /// EVM get-price-history (4.2): at most 100 tokens and 1000 pools; see
    /// [`Self::evm_price_history_chunked`] for more.
    pub async fn evm_price_history(
        &self,
        req: &PriceHistoryRequest,
    ) -> Result<Vec<PriceHistorySeries>> {
        Ok(self.evm_price_history_dated(req).await?.value)
    }

    /// [`Self::evm_price_history`] with the answer's `Date`.
    pub(crate) async fn evm_price_history_dated(
        &self,
        req: &PriceHistoryRequest,
    ) -> Result<Dated<Vec<PriceHistorySeries>>> {
        req.validate()?;
        self.call_dated(Operation::EvmGetPriceHistory, req).await
    }

    /// EVM get-price-stats (4.3): at most 1000 tokens and 1000 pools.
    pub async fn evm_price_stats(&self, req: &EvmPricesRequest) -> Result<Vec<EvmPriceStats>> {
        req.validate(Operation::EvmGetPriceStats)?;
        self.call(Operation::EvmGetPriceStats, req).await
    }

    /// EVM get-price (4.4): at most 1000 tokens and 1000 pools.
    pub async fn evm_prices(&self, req: &EvmPricesRequest) -> Result<Vec<EvmPrice>> {
        req.validate(Operation::EvmGetPrice)?;
        self.call(Operation::EvmGetPrice, req).await
    }

    /// Altchain search-profiles (4.5): one page of results.
    pub async fn search_profiles(&self, req: &SearchRequest) -> Result<Page<AltTokenProfile>> {
        req.validate()?;
        self.call(Operation::AltSearchProfiles, req).await
    }

    /// Altchain get-price-candles (4.6).
    pub async fn candles(&self, req: &CandlesRequest) -> Result<Vec<Candle>> {
        Ok(self.candles_dated(req).await?.value)
    }

    /// [`Self::candles`] with the answer's `Date`.
    pub(crate) async fn candles_dated(&self, req: &CandlesRequest) -> Result<Dated<Vec<Candle>>> {
        req.validate()?;
        self.call_dated(Operation::AltGetPriceCandles, req).await
    }

    /// Altchain get-swaps (4.7): one page of swaps (newest first at the simulator; the
    /// interface does not define the order).
    pub async fn swaps(&self, req: &SwapsRequest) -> Result<Page<Swap>> {
        Ok(self.swaps_dated(req, |body| decode_body(body)).await?.value)
    }

    async fn swaps_dated<R>(
        &self,
        req: &SwapsRequest,
        decode: fn(&Bytes) -> serde_json::Result<Page<R>>,
    ) -> Result<Dated<Page<R>>> {
        req.validate()?;
        self.call_decoded(Operation::AltGetSwaps, req, decode).await
    }

    /// Altchain get-trades (4.8): one page of trades (newest first at the simulator; the
    /// interface does not define the order).
    pub async fn trades(&self, req: &TradesRequest) -> Result<Page<Trade>> {
        Ok(self
            .trades_dated(req, |body| decode_body(body))
            .await?
            .value)
    }

    async fn trades_dated<R>(
        &self,
        req: &TradesRequest,
        decode: fn(&Bytes) -> serde_json::Result<Page<R>>,
    ) -> Result<Dated<Page<R>>> {
        req.validate()?;
        self.call_decoded(Operation::AltGetTrades, req, decode)
            .await
    }

    /// Altchain get-price-stats (4.9): at most 1000 tokens and 1000 pools.
    pub async fn alt_price_stats(&self, req: &AltPricesRequest) -> Result<Vec<AltPriceStats>> {
        req.validate(Operation::AltGetPriceStats)?;
        self.call(Operation::AltGetPriceStats, req).await
    }

    /// Altchain get-price (4.10): at most 1000 tokens and 1000 pools.
    pub async fn alt_prices(&self, req: &AltPricesRequest) -> Result<Vec<AltPrice>> {
        req.validate(Operation::AltGetPrice)?;
        self.call(Operation::AltGetPrice, req).await
    }

    /// Altchain get-portfolio (4.11).
    pub async fn portfolio(&self, req: &PortfolioRequest) -> Result<Portfolio> {
        req.validate()?;
        self.call(Operation::AltGetPortfolio, req).await
    }

    // ----- Paging -----

    /// Every page of get-swaps from the request's cursor on (see [`Self::search_pages`] for
    /// when paging stops).
    pub fn swap_pages(
        &self,
        req: SwapsRequest,
    ) -> impl Stream<Item = Result<Page<Swap>>> + Send + use<> {
        undated(self.swap_pages_dated(req, |body| decode_body(body)))
    }

    /// [`Self::swap_pages`], each page with its answer's `Date`, decoded by `decode`.
    pub(crate) fn swap_pages_dated<R: Send + 'static>(
        &self,
        req: SwapsRequest,
        decode: fn(&Bytes) -> serde_json::Result<Page<R>>,
    ) -> impl Stream<Item = Result<Dated<Page<R>>>> + Send + use<R> {
        let client = self.clone();
        let start = req.cursor.clone();
        pages(Operation::AltGetSwaps, start, move |cursor| {
            let client = client.clone();
            let mut req = req.clone();
            req.cursor = cursor;
            async move { client.swaps_dated(&req, decode).await }
        })
    }

    /// Every page of get-trades from the request's cursor on (see [`Self::search_pages`] for
    /// when paging stops).
    pub fn trade_pages(
        &self,
        req: TradesRequest,
    ) -> impl Stream<Item = Result<Page<Trade>>> + Send + use<> {
        undated(self.trade_pages_dated(req, |body| decode_body(body)))
    }

    /// [`Self::trade_pages`], each page with its answer's `Date`, decoded by `decode`.
    pub(crate) fn trade_pages_dated<R: Send + 'static>(
        &self,
        req: TradesRequest,
        decode: fn(&Bytes) -> serde_json::Result<Page<R>>,
    ) -> impl Stream<Item = Result<Dated<Page<R>>>> + Send + use<R> {
        let client = self.clone();
        let start = req.cursor.clone();
        pages(Operation::AltGetTrades, start, move |cursor| {
            let client = client.clone();
            let mut req = req.clone();
            req.cursor = cursor;
            async move { client.trades_dated(&req, decode).await }
        })
    }

    /// Every page of search-profiles from the request's cursor on.
    ///
    /// Paging stops after a page whose cursor is missing, null or empty, or whose `data` is
    /// empty; that last page is still yielded. A cursor seen before (the request's own
    /// included) yields [`Error::RepeatedCursor`] in place of its page and ends the stream, as
    /// does any other error. A service that keeps sending fresh cursors past what its `count`
    /// announced (more items than the count, half the count again and ten pages) gets
    /// [`Error::EndlessPaging`] after the page that crossed that bound.
    pub fn search_pages(
        &self,
        req: SearchRequest,
    ) -> impl Stream<Item = Result<Page<AltTokenProfile>>> + Send + use<> {
        let client = self.clone();
        let start = req.cursor.clone();
        undated(pages(Operation::AltSearchProfiles, start, move |cursor| {
            let client = client.clone();
            let mut req = req.clone();
            req.cursor = cursor;
            async move {
                req.validate()?;
                client.call_dated(Operation::AltSearchProfiles, &req).await
            }
        }))
    }

    /// Every swap of every page of [`Self::swap_pages`].
    pub fn swaps_stream(
        &self,
        req: SwapsRequest,
    ) -> impl Stream<Item = Result<Swap>> + Send + use<> {
        items(self.swap_pages(req))
    }

    /// Every trade of every page of [`Self::trade_pages`].
    pub fn trades_stream(
        &self,
        req: TradesRequest,
    ) -> impl Stream<Item = Result<Trade>> + Send + use<> {
        items(self.trade_pages(req))
    }

    /// Every profile of every page of [`Self::search_pages`].
    pub fn search_stream(
        &self,
        req: SearchRequest,
    ) -> impl Stream<Item = Result<AltTokenProfile>> + Send + use<> {
        items(self.search_pages(req))
    }

    // ----- Chunking -----

    /// EVM get-price over any number of tokens and pools: split into calls of at most 1000
    /// tokens and 1000 pools, run concurrently under the permits, merged in input order. Every chunk is validated before any is sent.
    pub async fn evm_prices_chunked(
        &self,
        chain_id: i64,
        tokens: &[String],
        pools: &[String],
    ) -> Result<Vec<EvmPrice>> {
        let requests = evm_price_requests(chain_id, tokens, pools, Operation::EvmGetPrice)?;
        self.join_chunks(requests, |c, r| async move { c.evm_prices(&r).await })
            .await
    }

    /// EVM get-price-stats over any number of tokens and pools, chunked like
    /// [`Self::evm_prices_chunked`].
    pub async fn evm_price_stats_chunked(
        &self,
        chain_id: i64,
        tokens: &[String],
        pools: &[String],
    ) -> Result<Vec<EvmPriceStats>> {
        let requests = evm_price_requests(chain_id, tokens, pools, Operation::EvmGetPriceStats)?;
        self.join_chunks(requests, |c, r| async move { c.evm_price_stats(&r).await })
            .await
    }

    /// Altchain get-price over any number of tokens and pools, chunked like
    /// [`Self::evm_prices_chunked`].
    pub async fn alt_prices_chunked(
        &self,
        tokens: &[String],
        pools: &[String],
    ) -> Result<Vec<AltPrice>> {
        let requests = alt_price_requests(tokens, pools, Operation::AltGetPrice)?;
        self.join_chunks(requests, |c, r| async move { c.alt_prices(&r).await })
            .await
    }

    /// Altchain get-price-stats over any number of tokens and pools, chunked like
    /// [`Self::evm_prices_chunked`].
    pub async fn alt_price_stats_chunked(
        &self,
        tokens: &[String],
        pools: &[String],
    ) -> Result<Vec<AltPriceStats>> {
        let requests = alt_price_requests(tokens, pools, Operation::AltGetPriceStats)?;
        self.join_chunks(requests, |c, r| async move { c.alt_price_stats(&r).await })
            .await
    }

    /// EVM get-price-history over any number of tokens and pools: split into calls of at most
    /// 100 tokens and 1000 pools with the same range and interval, merged in input order.
    pub async fn evm_price_history_chunked(
        &self,
        req: &PriceHistoryRequest,
    ) -> Result<Vec<PriceHistorySeries>> {
        let tokens = req.tokens.as_deref().unwrap_or_default();
        let pools = req.pools.as_deref().unwrap_or_default();
        let requests: Vec<PriceHistoryRequest> =
            price_chunks(tokens, pools, MAX_HISTORY_TOKENS, MAX_HISTORY_POOLS)
                .into_iter()
                .map(|(tokens, pools)| PriceHistoryRequest {
                    tokens,
                    pools,
                    ..req.clone()
                })
                .collect();
        if requests.is_empty() {
            // Nothing to split: let validation report the missing addresses.
            req.validate()?;
        }
        for r in &requests {
            r.validate()?;
        }
        self.join_chunks(
            requests,
            |c, r| async move { c.evm_price_history(&r).await },
        )
        .await
    }

    /// Runs one call per request concurrently (the permits bound how many are in flight) and
    /// concatenates the answers in request order. The first error ends the whole call.
    async fn join_chunks<R, T, F, Fut>(&self, requests: Vec<R>, call: F) -> Result<Vec<T>>
    where
        F: Fn(Client, R) -> Fut,
        Fut: Future<Output = Result<Vec<T>>>,
    {
        let calls = requests.into_iter().map(|r| call(self.clone(), r));
        let answers = futures::future::try_join_all(calls).await?;
        Ok(answers.into_iter().flatten().collect())
    }

    // ----- Transport -----

    /// Sends `body` to `op` with permits and retries, and decodes the answer.
    async fn call<B, R>(&self, op: Operation, body: &B) -> Result<R>
    where
        B: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        Ok(self.call_dated(op, body).await?.value)
    }

    /// [`Self::call`], with the answer's `Date`.
    async fn call_dated<B, R>(&self, op: Operation, body: &B) -> Result<Dated<R>>
    where
        B: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        self.call_decoded(op, body, |body| decode_body(body)).await
    }

    /// [`Self::call_dated`], the answer's body decoded by `decode`.
    async fn call_decoded<B, R>(
        &self,
        op: Operation,
        body: &B,
        decode: fn(&Bytes) -> serde_json::Result<R>,
    ) -> Result<Dated<R>>
    where
        B: Serialize + ?Sized,
    {
        let payload = serde_json::to_vec(body).map_err(|e| Error::InvalidRequest {
            operation: op.name(),
            member: "(body)".into(),
            reason: format!("cannot be encoded as JSON: {e}"),
        })?;
        let url = self.url(op);
        let result = self.call_with_retries(op, &url, payload, decode).await;
        if result.is_err() {
            Counters::bump(&self.inner.counters.failures);
        }
        result
    }

    async fn call_with_retries<R>(
        &self,
        op: Operation,
        url: &str,
        payload: Vec<u8>,
        decode: fn(&Bytes) -> serde_json::Result<R>,
    ) -> Result<Dated<R>> {
        let retry = &self.inner.config.retry;
        let started = Instant::now();
        let mut retries = 0u32;
        loop {
            let failure = match self.attempt(op, url, payload.clone(), decode).await {
                Ok(value) => return Ok(value),
                Err(failure) => failure,
            };
            if !failure.retryable {
                return Err(failure.error);
            }
            if let Some(delay) = failure.retry_after {
                // The service asked every request to hold back, not only this one. No retry
                // waits longer than `max_elapsed`, so neither does the pause.
                self.inner.permits.pause_for(delay.min(retry.max_elapsed));
            }
            let elapsed = started.elapsed();
            let delay = retry.next_delay(retries, elapsed, failure.retry_after, &mut rand::rng());
            let Some(delay) = delay else {
                if retry.max_retries == 0 {
                    return Err(failure.error);
                }
                return Err(Error::RetriesExhausted {
                    operation: op.name(),
                    attempts: retries + 1,
                    elapsed,
                    source: Box::new(failure.error),
                });
            };
            tokio::time::sleep(delay).await;
            retries += 1;
            Counters::bump(&self.inner.counters.retries);
        }
    }

    /// One HTTP attempt under a permit.
    async fn attempt<R>(
        &self,
        op: Operation,
        url: &str,
        payload: Vec<u8>,
        decode: fn(&Bytes) -> serde_json::Result<R>,
    ) -> std::result::Result<Dated<R>, Failure> {
        let transport = |source: reqwest::Error| {
            // Connection failures, timeouts and broken exchanges may pass on another attempt;
            // errors in building the request or decoding the body will not.
            let retryable = source.is_connect()
                || source.is_timeout()
                || source.is_request()
                || source.is_body();
            Failure {
                error: Error::Transport {
                    operation: op.name(),
                    url: redact_url(url),
                    source: redact_source(source),
                },
                retryable,
                retry_after: None,
            }
        };

        let _permit = self.inner.permits.acquire().await;
        Counters::bump(&self.inner.counters.requests);
        let mut response = self
            .inner
            .http
            .post(url)
            .body(payload)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        let date = response
            .headers()
            .get(reqwest::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok())
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok());
        let answered_at = date
            .and_then(|d| i64::try_from(d.as_secs()).ok())
            .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0));
        if status.is_success()
            && let Some(date) = date
        {
            // Unix seconds plus one, so that 0 keeps meaning "none"; the minimum is kept.
            let encoded = date.as_secs().saturating_add(1);
            let _ = self.inner.counters.earliest_date.fetch_update(
                Ordering::Relaxed,
                Ordering::Relaxed,
                |seen| {
                    Some(if seen == 0 {
                        encoded
                    } else {
                        seen.min(encoded)
                    })
                },
            );
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let limit = self.inner.config.max_response_bytes;
        let too_large = || Failure {
            error: Error::ResponseTooLarge {
                operation: op.name(),
                limit,
            },
            // The same request would get the same answer.
            retryable: false,
            retry_after: None,
        };
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        // Read chunk by chunk so that a body without a length (or with a false one) stops at
        // the limit instead of filling memory.
        // Sized from the length when there is one (already checked against the limit), so the
        // chunks are copied once.
        let mut body = Vec::with_capacity(response.content_length().unwrap_or(0) as usize);
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if (body.len() + chunk.len()) as u64 > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }

        // Whatever of the body a message quotes, the API key is taken out of it first: a
        // service (or a proxy) that echoes the request's header must not print the key.
        let key = self.inner.config.api_key.as_deref();
        let body = Bytes::from(body);
        if status.is_success() {
            return decode(&body)
                .map(|value| Dated {
                    value,
                    date: answered_at,
                })
                .map_err(|source| Failure {
                    error: Error::Decode {
                        operation: op.name(),
                        excerpt: excerpt(&body, key),
                        source: redact_decode_error(source, key),
                    },
                    retryable: false,
                    retry_after: None,
                });
        }

        let status = ApiStatus::from_code(status.as_u16());
        if status == ApiStatus::TooManyRequests {
            Counters::bump(&self.inner.counters.throttled);
        }
        // A body that is not the documented `{"error": ...}` (a proxy's HTML page, say) is
        // still worth showing, so its start stands in for the message.
        let message = match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(b) => printable(&redact_key(&b.error, key)),
            Err(_) => excerpt(&body, key),
        };
        Err(Failure {
            error: Error::Api {
                operation: op.name(),
                status,
                message,
                retry_after,
            },
            retryable: status.is_retryable(),
            retry_after,
        })
    }
}

/// `url` with the user name and password of its authority replaced by `***`, for messages
/// and logs: `http://user:pw@host/p` becomes `http://***@host/p`. Works on text that does
/// not parse as a URL too; anything without credentials is returned as it is.
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}://***@{}", &url[..scheme_end], &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// The HTTP client's error with any credentials taken out of the URL it names.
fn redact_source(mut source: reqwest::Error) -> reqwest::Error {
    if let Some(url) = source.url_mut()
        && (!url.username().is_empty() || url.password().is_some())
    {
        // Neither call fails on a URL that already has credentials.
        let _ = url.set_password(None);
        let _ = url.set_username("***");
    }
    source
}

/// The `tokens` and `pools` members of one chunked call (`None` when the call has none).
pub(crate) type ChunkMembers = (Option<Vec<String>>, Option<Vec<String>>);

/// Splits address lists into the `(tokens, pools)` members of successive calls: call `i` gets
/// the `i`-th chunk of each list (at most `max_tokens` and `max_pools` elements), so the number
/// of calls is the larger of the two chunk counts. Concatenating the calls' answers in call
/// order keeps the input order of each list. Empty lists give no calls.
pub(crate) fn price_chunks(
    tokens: &[String],
    pools: &[String],
    max_tokens: usize,
    max_pools: usize,
) -> Vec<ChunkMembers> {
    let mut token_chunks = tokens.chunks(max_tokens.max(1));
    let mut pool_chunks = pools.chunks(max_pools.max(1));
    let mut calls = Vec::new();
    loop {
        let t = token_chunks.next().map(<[String]>::to_vec);
        let p = pool_chunks.next().map(<[String]>::to_vec);
        if t.is_none() && p.is_none() {
            return calls;
        }
        calls.push((t, p));
    }
}

fn evm_price_requests(
    chain_id: i64,
    tokens: &[String],
    pools: &[String],
    op: Operation,
) -> Result<Vec<EvmPricesRequest>> {
    let requests: Vec<EvmPricesRequest> =
        price_chunks(tokens, pools, MAX_PRICE_ADDRESSES, MAX_PRICE_ADDRESSES)
            .into_iter()
            .map(|(tokens, pools)| EvmPricesRequest {
                chain_id,
                tokens,
                pools,
            })
            .collect();
    validate_all(
        &requests,
        || EvmPricesRequest {
            chain_id,
            tokens: None,
            pools: None,
        },
        |r| r.validate(op),
    )?;
    Ok(requests)
}

fn alt_price_requests(
    tokens: &[String],
    pools: &[String],
    op: Operation,
) -> Result<Vec<AltPricesRequest>> {
    let requests: Vec<AltPricesRequest> =
        price_chunks(tokens, pools, MAX_PRICE_ADDRESSES, MAX_PRICE_ADDRESSES)
            .into_iter()
            .map(|(tokens, pools)| AltPricesRequest { tokens, pools })
            .collect();
    validate_all(&requests, AltPricesRequest::default, |r| r.validate(op))?;
    Ok(requests)
}

/// Validates every chunk before any is sent; with no chunk at all, validates an empty request
/// so the caller hears which member is missing.
fn validate_all<R>(
    requests: &[R],
    empty: impl FnOnce() -> R,
    validate: impl Fn(&R) -> Result<()>,
) -> Result<()> {
    if requests.is_empty() {
        return validate(&empty());
    }
    requests.iter().try_for_each(validate)
}

/// Follows the cursor from `start`, fetching each page with `fetch`.
fn pages<T, F, Fut>(
    op: Operation,
    start: Option<String>,
    fetch: F,
) -> impl Stream<Item = Result<Dated<Page<T>>>> + Send + 'static
where
    T: Send + 'static,
    F: Fn(Option<String>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Dated<Page<T>>>> + Send + 'static,
{
    struct State<F> {
        fetch: F,
        /// The cursor of the next request; `None` once paging has ended.
        next: Option<Option<String>>,
        seen: HashSet<String>,
        /// Items received so far, and the largest `count` (as sent) and page seen.
        received: u64,
        count: Option<i64>,
        page_len: u64,
        /// An error to yield after the page that revealed it.
        pending: Option<Error>,
    }
    let mut seen = HashSet::new();
    if let Some(c) = start.as_ref().filter(|c| !c.is_empty()) {
        seen.insert(c.clone());
    }
    let state = State {
        fetch,
        next: Some(start),
        seen,
        received: 0,
        count: None,
        page_len: 0,
        pending: None,
    };
    stream::unfold(state, move |mut state| async move {
        if let Some(e) = state.pending.take() {
            return Some((Err(e), state));
        }
        let cursor = state.next.take()?;
        let dated = match (state.fetch)(cursor).await {
            Ok(dated) => dated,
            Err(e) => return Some((Err(e), state)),
        };
        let page = &dated.value;
        let len = page.data.len() as u64;
        state.received += len;
        state.page_len = state.page_len.max(len);
        state.count = state.count.max(Some(page.count));
        if len > 0
            && let Some(c) = page.next_cursor()
        {
            if !state.seen.insert(c.to_owned()) {
                let error = Error::RepeatedCursor {
                    operation: op.name(),
                    cursor: c.to_owned(),
                };
                return Some((Err(error), state));
            }
            // A negative count announces nothing: the bound is then ten pages.
            let count = state.count.map_or(0, |c| u64::try_from(c).unwrap_or(0));
            if state.received > paging_bound(count, state.page_len) {
                state.pending = Some(Error::EndlessPaging {
                    operation: op.name(),
                    received: state.received,
                    count: state.count.unwrap_or(0),
                    pages_without_new: 0,
                });
            } else {
                state.next = Some(Some(c.to_owned()));
            }
        }
        Some((Ok(dated), state))
    })
}

/// The pages of a dated page stream, without their dates.
fn undated<T: Send + 'static>(
    pages: impl Stream<Item = Result<Dated<Page<T>>>> + Send + 'static,
) -> impl Stream<Item = Result<Page<T>>> + Send + 'static {
    pages.map(|page| page.map(|d| d.value))
}

/// How many items a paged answer may deliver before it is taken for endless: the largest
/// `count` it announced, plus half as many again for items that arrive while paging, plus ten
/// pages.
fn paging_bound(count: u64, page_len: u64) -> u64 {
    count
        .saturating_add(count / 2)
        .saturating_add(page_len.saturating_mul(10))
}

/// Flattens a page stream into its items; an error is passed on as one item.
fn items<T: Send + 'static>(
    pages: impl Stream<Item = Result<Page<T>>> + Send + 'static,
) -> impl Stream<Item = Result<T>> + Send + 'static {
    pages
        .map(|page| {
            let items: Vec<Result<T>> = match page {
                Ok(page) => page.data.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            stream::iter(items)
        })
        .flatten()
}

#[cfg(test)]
mod tests;
