//! `ClientConfig`: where the service is, the key, timeouts, retries, the rate limit and the
//! concurrency, from code or from the environment (`DEXLAKE_BASE_URL`, `DEXLAKE_API_KEY`,
//! `DEXLAKE_ALTCHAIN_SEGMENT`).

use std::time::Duration;

use super::super::retry::{RateLimit, RetryConfig};
use super::redact_url;
use crate::error::{Error, Result};

/// Base URL used when none is configured: the simulator's conventional loopback address.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080";
/// Path segment of the non-EVM family used when none is configured.
pub const DEFAULT_ALTCHAIN_SEGMENT: &str = "altchain";
/// Environment variable holding the API key.
pub const ENV_API_KEY: &str = "DEXLAKE_API_KEY";
/// Environment variable holding the base URL.
pub const ENV_BASE_URL: &str = "DEXLAKE_BASE_URL";
/// Environment variable holding the non-EVM path segment.
pub const ENV_ALTCHAIN_SEGMENT: &str = "DEXLAKE_ALTCHAIN_SEGMENT";
/// Name of the header that carries the API key.
pub const API_KEY_HEADER: &str = "x-api-key";

/// Default of [`ClientConfig::max_response_bytes`]: 64 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 << 20;

/// Everything a [`Client`](super::Client) needs: where, who, how long, how often.
///
/// `Debug` shows whether an API key is set, never the key itself, and the base URL without a
/// user name or password it may carry.
#[derive(Clone, PartialEq)]
pub struct ClientConfig {
    /// Base URL; every operation path is appended to it (a path prefix is kept).
    pub base_url: String,
    /// Value of the `x-api-key` header; without one the service answers 401.
    pub api_key: Option<String>,
    /// Path segment of the non-EVM family (`/v1/<segment>/...`).
    pub altchain_segment: String,
    /// Limit of one HTTP attempt, from connecting to the end of the body.
    pub timeout: Duration,
    /// Limit of establishing a connection.
    pub connect_timeout: Duration,
    /// `User-Agent` header.
    pub user_agent: String,
    /// How failed attempts are retried.
    pub retry: RetryConfig,
    /// Request rate limit; `None` sends as fast as the concurrency limit allows.
    pub rate_limit: Option<RateLimit>,
    /// Requests in flight at once.
    pub max_concurrency: usize,
    /// Largest response body read, in bytes. The body is read as a stream and a larger one
    /// fails with [`Error::ResponseTooLarge`] as soon as it passes the limit, without a retry.
    pub max_response_bytes: u64,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            altchain_segment: DEFAULT_ALTCHAIN_SEGMENT.to_owned(),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            user_agent: concat!("dexlake/", env!("CARGO_PKG_VERSION")).to_owned(),
            retry: RetryConfig::default(),
            rate_limit: None,
            max_concurrency: 8,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

impl ClientConfig {
    /// The default configuration with the given base URL.
    pub fn new(base_url: impl Into<String>) -> Self {
        ClientConfig {
            base_url: base_url.into(),
            ..ClientConfig::default()
        }
    }

    /// The default configuration, with `DEXLAKE_API_KEY` (required), `DEXLAKE_BASE_URL` and
    /// `DEXLAKE_ALTCHAIN_SEGMENT` (both optional) taken from the environment. An empty variable
    /// counts as unset.
    pub fn from_env() -> Result<Self> {
        ClientConfig::from_lookup(env_var)
    }

    /// [`Self::from_env`] over any source of variables, so it can be tested without touching
    /// the process environment.
    pub(super) fn from_lookup(get: impl Fn(&str) -> Result<Option<String>>) -> Result<Self> {
        let set = |name: &str| -> Result<Option<String>> {
            Ok(get(name)?
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty()))
        };
        let api_key = set(ENV_API_KEY)?.ok_or_else(|| {
            Error::Config(format!(
                "{ENV_API_KEY} is not set; the service needs an API key"
            ))
        })?;
        let mut config = ClientConfig {
            api_key: Some(api_key),
            ..ClientConfig::default()
        };
        if let Some(url) = set(ENV_BASE_URL)? {
            config.base_url = url;
        }
        if let Some(segment) = set(ENV_ALTCHAIN_SEGMENT)? {
            config.altchain_segment = segment;
        }
        Ok(config)
    }

    /// Sets [`Self::base_url`].
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Sets [`Self::api_key`].
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }

    /// Sets [`Self::altchain_segment`].
    pub fn with_altchain_segment(mut self, segment: impl Into<String>) -> Self {
        self.altchain_segment = segment.into();
        self
    }

    /// Sets [`Self::timeout`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets [`Self::connect_timeout`].
    pub fn with_connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self
    }

    /// Sets [`Self::user_agent`].
    pub fn with_user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// Sets [`Self::retry`].
    pub fn with_retry(mut self, retry: RetryConfig) -> Self {
        self.retry = retry;
        self
    }

    /// Sets [`Self::rate_limit`].
    pub fn with_rate_limit(mut self, rate_limit: Option<RateLimit>) -> Self {
        self.rate_limit = rate_limit;
        self
    }

    /// Sets [`Self::max_concurrency`].
    pub fn with_max_concurrency(mut self, max_concurrency: usize) -> Self {
        self.max_concurrency = max_concurrency;
        self
    }

    /// Sets [`Self::max_response_bytes`].
    pub fn with_max_response_bytes(mut self, max_response_bytes: u64) -> Self {
        self.max_response_bytes = max_response_bytes;
        self
    }

    /// The base URL checked and without a trailing slash.
    pub(super) fn checked_base_url(&self) -> Result<String> {
        let shown = redact_url(&self.base_url);
        let parsed = url::Url::parse(&self.base_url)
            .map_err(|e| Error::Config(format!("base_url {shown:?} is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Error::Config(format!(
                "base_url {shown:?} must use http or https"
            )));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(Error::Config(format!(
                "base_url {shown:?} must not carry a query or fragment"
            )));
        }
        Ok(self.base_url.trim_end_matches('/').to_owned())
    }

    pub(super) fn check_segment(&self) -> Result<()> {
        let s = &self.altchain_segment;
        if s.is_empty() || s.contains(['/', '?', '#']) || s.trim() != s {
            return Err(Error::Config(format!(
                "altchain_segment {s:?} must be one non-empty path segment"
            )));
        }
        Ok(())
    }
}

fn env_var(name: &str) -> Result<Option<String>> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(e @ std::env::VarError::NotUnicode(_)) => {
            Err(Error::Config(format!("environment variable {name}: {e}")))
        }
    }
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("base_url", &redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("altchain_segment", &self.altchain_segment)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("user_agent", &self.user_agent)
            .field("retry", &self.retry)
            .field("rate_limit", &self.rate_limit)
            .field("max_concurrency", &self.max_concurrency)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}
