//! Retries with backoff and the request permits.
//!
//! Two things live here, apart from the HTTP code so they can be tested on their own:
//!
//! - [`RetryConfig`]: how often and how long a failed request is tried again. Delays are
//!   exponential with full jitter (a uniform draw between zero and the exponential bound), and a
//!   `Retry-After` sent by the service replaces the drawn delay. Retries stop at whichever comes
//!   first: the retry count or the total elapsed time.
//! - [`Permits`]: the one place that grants permission to send an HTTP request. It combines a
//!   concurrency limit (a semaphore) with an optional rate limit (a token bucket), and it can be
//!   paused as a whole when the service asks the client to slow down. Every attempt, first or
//!   retry, takes a permit here.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rand::Rng;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::error::{Error, Result};

/// How failed requests are retried.
///
/// Only failures that may pass when repeated are retried: 429, 5xx, connection errors and
/// timeouts. 400, 401 and 403 never are.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    /// Retries after the first attempt; zero disables retrying.
    pub max_retries: u32,
    /// Upper bound of the first retry's delay.
    pub initial_backoff: Duration,
    /// Largest upper bound of any drawn delay (a `Retry-After` may ask for more and is honoured).
    pub max_backoff: Duration,
    /// No retry starts later than this after the first attempt.
    pub max_elapsed: Duration,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 5,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
            max_elapsed: Duration::from_secs(60),
        }
    }
}

impl RetryConfig {
    /// A configuration that never retries.
    pub fn disabled() -> Self {
        RetryConfig {
            max_retries: 0,
            ..RetryConfig::default()
        }
    }

    /// Sets [`Self::max_retries`].
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets [`Self::initial_backoff`].
    pub fn with_initial_backoff(mut self, initial_backoff: Duration) -> Self {
        self.initial_backoff = initial_backoff;
        self
    }

    /// Sets [`Self::max_backoff`].
    pub fn with_max_backoff(mut self, max_backoff: Duration) -> Self {
        self.max_backoff = max_backoff;
        self
    }

    /// Sets [`Self::max_elapsed`].
    pub fn with_max_elapsed(mut self, max_elapsed: Duration) -> Self {
        self.max_elapsed = max_elapsed;
        self
    }

    /// The upper bound of the delay before retry number `retry` (0 for the first retry):
    /// `initial_backoff * 2^retry`, capped at `max_backoff`.
    pub fn backoff_bound(&self, retry: u32) -> Duration {
        // Past 2^20 the cap is reached for any sensible initial value; clamping the exponent
        // keeps the multiplication from overflowing.
        let factor = 1u32 << retry.min(20);
        self.initial_backoff
            .checked_mul(factor)
            .unwrap_or(self.max_backoff)
            .min(self.max_backoff)
    }

    /// A delay for retry number `retry` with full jitter: uniform in `[0, backoff_bound(retry)]`.
    pub fn backoff_with<R: Rng + ?Sized>(&self, retry: u32, rng: &mut R) -> Duration {
        let bound = self.backoff_bound(retry);
        let nanos = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rng.random_range(0..=nanos))
    }

    /// Decides whether retry number `retry` (0 for the first retry) may happen, and after which
    /// delay. `elapsed` is the time since the first attempt; `retry_after` is the service's
    /// `Retry-After`, which replaces the drawn delay. Returns `None` when the retry count is used
    /// up or the retry would start after `max_elapsed`.
    pub fn next_delay<R: Rng + ?Sized>(
        &self,
        retry: u32,
        elapsed: Duration,
        retry_after: Option<Duration>,
        rng: &mut R,
    ) -> Option<Duration> {
        if retry >= self.max_retries {
            return None;
        }
        let delay = retry_after.unwrap_or_else(|| self.backoff_with(retry, rng));
        (elapsed.saturating_add(delay) <= self.max_elapsed).then_some(delay)
    }

    /// Checks that the configuration can work.
    pub fn validate(&self) -> Result<()> {
        if self.initial_backoff > self.max_backoff {
            return Err(Error::Config(format!(
                "retry: initial_backoff {:?} is larger than max_backoff {:?}",
                self.initial_backoff, self.max_backoff
            )));
        }
        Ok(())
    }
}

/// Parses a `Retry-After` header value: either a number of seconds or an HTTP date, which is
/// turned into the time left from `now` (zero when the date has passed). Returns `None` for a
/// value that is neither.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // A run of digits too long for u64 is still "very long"; cap it instead of ignoring it.
        return Some(Duration::from_secs(
            value.parse::<u64>().unwrap_or(u64::MAX),
        ));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Largest number of requests in flight at once that [`Permits`] accepts.
pub const MAX_CONCURRENCY: usize = 1024;

/// A request rate limit: a token bucket refilled at `requests_per_second`, holding at most
/// `burst` tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// Sustained rate.
    pub requests_per_second: f64,
    /// Requests that may go out at once after a quiet period.
    pub burst: u32,
}

impl RateLimit {
    /// Slowest rate accepted: one request in 1000 seconds.
    pub const MIN_REQUESTS_PER_SECOND: f64 = 0.001;
    /// Fastest rate accepted.
    pub const MAX_REQUESTS_PER_SECOND: f64 = 1_000_000.0;

    /// A limit of `requests_per_second` with a burst of `burst`.
    pub fn new(requests_per_second: f64, burst: u32) -> Self {
        RateLimit {
            requests_per_second,
            burst,
        }
    }

    /// A checked limit of `requests_per_second` whose burst is one second's worth of requests
    /// (at least 1).
    pub fn per_second(requests_per_second: f64) -> Result<Self> {
        let burst = if requests_per_second.is_finite() {
            // Saturating: the rate is checked below.
            requests_per_second.ceil().clamp(1.0, f64::from(u32::MAX)) as u32
        } else {
            1
        };
        let limit = RateLimit::new(requests_per_second, burst);
        limit.validate()?;
        Ok(limit)
    }

    /// Checks that the limit can work: a rate from [`Self::MIN_REQUESTS_PER_SECOND`] to
    /// [`Self::MAX_REQUESTS_PER_SECOND`] and a burst of at least 1.
    pub fn validate(&self) -> Result<()> {
        let rps = self.requests_per_second;
        if !(Self::MIN_REQUESTS_PER_SECOND..=Self::MAX_REQUESTS_PER_SECOND).contains(&rps) {
            return Err(Error::Config(format!(
                "rate limit: requests per second must be {} to {}, got {rps}",
                Self::MIN_REQUESTS_PER_SECOND,
                Self::MAX_REQUESTS_PER_SECOND
            )));
        }
        if self.burst == 0 {
            return Err(Error::Config("rate limit: burst must be at least 1".into()));
        }
        Ok(())
    }
}

/// The state of the token bucket and of a service-requested pause.
#[derive(Debug)]
struct Gate {
    /// `(rate, burst)` when a rate limit is configured.
    limit: Option<(f64, f64)>,
    /// Tokens available; negative when requests have reserved tokens not yet refilled.
    tokens: f64,
    /// When `tokens` was last refilled.
    refilled: Instant,
    /// No permit is granted before this instant.
    paused_until: Option<Instant>,
}

impl Gate {
    /// Takes one token and returns how long the caller must wait before sending.
    ///
    /// Tokens are reserved rather than waited for under the lock: a caller that finds the bucket
    /// empty takes a token "on credit" (the count goes negative) and sleeps until that token has
    /// been refilled. Callers therefore leave in the order they arrived, and the lock is never
    /// held across a sleep.
    fn reserve(&mut self, now: Instant) -> Duration {
        let mut wait = Duration::ZERO;
        if let Some((rate, burst)) = self.limit {
            let refill = now.saturating_duration_since(self.refilled).as_secs_f64() * rate;
            self.tokens = (self.tokens + refill).min(burst);
            self.refilled = now;
            self.tokens -= 1.0;
            if self.tokens < 0.0 {
                // `RateLimit::validate` keeps the rate sane; saturating here keeps any rate
                // from panicking.
                wait = Duration::try_from_secs_f64(-self.tokens / rate).unwrap_or(Duration::MAX);
            }
        }
        if let Some(until) = self.paused_until {
            wait = wait.max(until.saturating_duration_since(now));
        }
        wait
    }
}

/// Permission to send one HTTP request; the concurrency slot is released when it is dropped.
#[derive(Debug)]
pub struct Permit {
    _slot: OwnedSemaphorePermit,
}

/// The one place that grants request permits: a concurrency limit and an optional rate limit.
///
/// Cloning is cheap and clones share the same limits.
#[derive(Debug, Clone)]
pub struct Permits {
    slots: Arc<Semaphore>,
    gate: Arc<Mutex<Gate>>,
}

impl Permits {
    /// Permits for at most `max_concurrency` requests in flight and, when given, the rate limit.
    pub fn new(rate_limit: Option<&RateLimit>, max_concurrency: usize) -> Result<Self> {
        if max_concurrency == 0 {
            return Err(Error::Config("max_concurrency must be at least 1".into()));
        }
        if max_concurrency > MAX_CONCURRENCY {
            return Err(Error::Config(format!(
                "max_concurrency must be at most {MAX_CONCURRENCY}, got {max_concurrency}"
            )));
        }
        let limit = match rate_limit {
            Some(r) => {
                r.validate()?;
                Some((r.requests_per_second, f64::from(r.burst)))
            }
            None => None,
        };
        Ok(Permits {
            slots: Arc::new(Semaphore::new(max_concurrency)),
            gate: Arc::new(Mutex::new(Gate {
                limit,
                tokens: limit.map_or(0.0, |(_, burst)| burst),
                refilled: Instant::now(),
                paused_until: None,
            })),
        })
    }

    /// Waits for a concurrency slot, then for the rate limit and any pause, and returns the
    /// permit to send one request.
    pub async fn acquire(&self) -> Permit {
        let slot = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .expect("the permit semaphore is never closed");
        let wait = self.lock_gate().reserve(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        Permit { _slot: slot }
    }

    /// Holds back every permit until `delay` from now (used when the service sends
    /// `Retry-After`). An earlier pause that ends later is kept.
    pub fn pause_for(&self, delay: Duration) {
        // A delay too long to represent cannot be waited out anyway; ignoring it leaves the
        // caller's own retry bound in charge.
        let Some(until) = Instant::now().checked_add(delay) else {
            return;
        };
        let mut gate = self.lock_gate();
        gate.paused_until = Some(gate.paused_until.map_or(until, |u| u.max(until)));
    }

    /// Requests that may be in flight at once.
    pub fn available_slots(&self) -> usize {
        self.slots.available_permits()
    }

    fn lock_gate(&self) -> std::sync::MutexGuard<'_, Gate> {
        // The gate's state is a few numbers updated without any call that can panic, so a
        // poisoned lock still holds consistent data and can be used.
        self.gate
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn backoff_bound_doubles_and_is_capped() {
        let c = RetryConfig::default();
        assert_eq!(c.backoff_bound(0), Duration::from_millis(200));
        assert_eq!(c.backoff_bound(1), Duration::from_millis(400));
        assert_eq!(c.backoff_bound(3), Duration::from_millis(1600));
        assert_eq!(c.backoff_bound(6), Duration::from_secs(10));
        assert_eq!(c.backoff_bound(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn jittered_backoff_stays_within_bounds_and_spreads() {
        let c = RetryConfig::default();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for retry in 0..8 {
            let bound = c.backoff_bound(retry);
            let draws: Vec<Duration> = (0..200).map(|_| c.backoff_with(retry, &mut rng)).collect();
            assert!(draws.iter().all(|d| *d <= bound), "retry {retry}");
            // Full jitter covers the whole range: some draws fall in each half.
            assert!(draws.iter().any(|d| *d < bound / 2), "retry {retry}");
            assert!(draws.iter().any(|d| *d > bound / 2), "retry {retry}");
        }
    }

    #[test]
    fn next_delay_respects_count_and_elapsed() {
        let c = RetryConfig::default()
            .with_max_retries(2)
            .with_max_elapsed(Duration::from_secs(5));
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!(c.next_delay(0, Duration::ZERO, None, &mut rng).is_some());
        assert!(c.next_delay(1, Duration::ZERO, None, &mut rng).is_some());
        assert_eq!(c.next_delay(2, Duration::ZERO, None, &mut rng), None);
        // Retry-After replaces the drawn delay, even beyond max_backoff.
        assert_eq!(
            c.next_delay(0, Duration::ZERO, Some(Duration::from_secs(3)), &mut rng),
            Some(Duration::from_secs(3))
        );
        // A retry that would start after max_elapsed is not made.
        assert_eq!(
            c.next_delay(
                0,
                Duration::from_secs(3),
                Some(Duration::from_secs(3)),
                &mut rng
            ),
            None
        );
        assert_eq!(
            RetryConfig::disabled().next_delay(0, Duration::ZERO, None, &mut rng),
            None
        );
    }

    #[test]
    fn retry_after_parses_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(parse_retry_after("1", now), Some(Duration::from_secs(1)));
        assert_eq!(
            parse_retry_after(" 120 ", now),
            Some(Duration::from_secs(120))
        );
        // 1445412480 is Wed, 21 Oct 2015 07:28:00 GMT.
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("1.5", now), None);
        assert_eq!(parse_retry_after("", now), None);
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn bad_limits_are_config_errors() {
        assert!(matches!(Permits::new(None, 0), Err(Error::Config(_))));
        assert!(matches!(
            Permits::new(Some(&RateLimit::new(0.0, 1)), 1),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            Permits::new(Some(&RateLimit::new(f64::NAN, 1)), 1),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            Permits::new(Some(&RateLimit::new(1.0, 0)), 1),
            Err(Error::Config(_))
        ));
        for rps in [1e-20, -1.0, f64::INFINITY, 1e300, 5e-324] {
            let err = RateLimit::per_second(rps).expect_err("out of range");
            assert!(err.to_string().contains("requests per second"), "{err}");
            assert!(matches!(
                Permits::new(Some(&RateLimit::new(rps, 1)), 1),
                Err(Error::Config(_))
            ));
        }
        assert_eq!(
            RateLimit::per_second(2.5).expect("in range"),
            RateLimit::new(2.5, 3)
        );
        assert!(matches!(
            Permits::new(None, usize::MAX),
            Err(Error::Config(_))
        ));
    }

    #[test]
    fn any_rate_reserves_without_panicking() {
        let now = Instant::now();
        let mut gate = Gate {
            limit: Some((1e-20, 1.0)),
            tokens: 1.0,
            refilled: now,
            paused_until: None,
        };
        assert_eq!(gate.reserve(now), Duration::ZERO);
        assert_eq!(gate.reserve(now), Duration::MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn token_bucket_allows_the_burst_then_the_rate() {
        let permits = Permits::new(Some(&RateLimit::new(10.0, 3)), 100).expect("valid limits");
        let start = Instant::now();
        let mut times = Vec::new();
        for _ in 0..6 {
            let _p = permits.acquire().await;
            times.push(start.elapsed());
        }
        // Three go at once, then one every 100 ms.
        assert_eq!(&times[..3], &[Duration::ZERO; 3]);
        for (i, t) in times[3..].iter().enumerate() {
            let expected = Duration::from_millis(100 * (i as u64 + 1));
            let diff = t.abs_diff(expected);
            assert!(diff < Duration::from_millis(2), "{t:?} vs {expected:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrency_is_bounded_and_pause_holds_everyone() {
        let permits = Permits::new(None, 2).expect("valid limits");
        let a = permits.acquire().await;
        let _b = permits.acquire().await;
        assert_eq!(permits.available_slots(), 0);
        let waiting = tokio::time::timeout(Duration::from_secs(1), permits.acquire()).await;
        assert!(waiting.is_err(), "a third permit must wait for a slot");
        drop(a);
        let _c = tokio::time::timeout(Duration::from_secs(1), permits.acquire())
            .await
            .expect("a released slot is granted");

        let permits = Permits::new(None, 4).expect("valid limits");
        permits.pause_for(Duration::from_secs(2));
        let start = Instant::now();
        let _p = permits.acquire().await;
        assert!(start.elapsed() >= Duration::from_secs(2));
    }
}
