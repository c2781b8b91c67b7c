//! The one public error type of the library.

use std::path::PathBuf;
use std::time::Duration;

/// The status classes the service documents (interface section 7), plus any other status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiStatus {
    /// 400 `Bad request: Invalid request parameters`.
    BadRequest,
    /// 401 `Unauthorized: Invalid or missing API key`.
    Unauthorized,
    /// 403 `Forbidden: Access denied for the current API plan`.
    Forbidden,
    /// 429 `Too many requests: Rate limit exceeded`.
    TooManyRequests,
    /// 500 `Internal server error`.
    InternalServerError,
    /// Any other non-success status.
    Other(u16),
}

impl ApiStatus {
    /// Classifies an HTTP status code.
    pub fn from_code(code: u16) -> Self {
        match code {
            400 => ApiStatus::BadRequest,
            401 => ApiStatus::Unauthorized,
            403 => ApiStatus::Forbidden,
            429 => ApiStatus::TooManyRequests,
            500 => ApiStatus::InternalServerError,
            other => ApiStatus::Other(other),
        }
    }

    /// The HTTP status code.
    pub fn code(self) -> u16 {
        match self {
            ApiStatus::BadRequest => 400,
            ApiStatus::Unauthorized => 401,
            ApiStatus::Forbidden => 403,
            ApiStatus::TooManyRequests => 429,
            ApiStatus::InternalServerError => 500,
            ApiStatus::Other(c) => c,
        }
    }

    /// The service's documented `error` text for this status, if it documents one.
    pub fn documented_text(self) -> Option<&'static str> {
        Some(match self {
            ApiStatus::BadRequest => "Bad request: Invalid request parameters",
            ApiStatus::Unauthorized => "Unauthorized: Invalid or missing API key",
            ApiStatus::Forbidden => "Forbidden: Access denied for the current API plan",
            ApiStatus::TooManyRequests => "Too many requests: Rate limit exceeded",
            ApiStatus::InternalServerError => "Internal server error",
            ApiStatus::Other(_) => return None,
        })
    }

    /// Whether a request that got this status may succeed if sent again (429 and 5xx).
    pub fn is_retryable(self) -> bool {
        let code = self.code();
        code == 429 || (500..600).contains(&code)
    }
}

impl std::fmt::Display for ApiStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// Every failure of the library. Causes are kept as `source`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request broke a documented bound; nothing was sent.
    #[error("invalid {operation} request: `{member}` {reason}")]
    InvalidRequest {
        /// Operation name such as `altchain.get-swaps`.
        operation: &'static str,
        /// The offending body member.
        member: String,
        /// The bound that was broken.
        reason: String,
    },

    /// The service answered with an error status.
    #[error("{operation} failed with HTTP {status}: {message}")]
    Api {
        /// Operation name.
        operation: &'static str,
        /// The status class.
        status: ApiStatus,
        /// The server's `error` text (or a short excerpt of the body when it had none).
        message: String,
        /// `Retry-After` as sent by the server, if any.
        retry_after: Option<Duration>,
    },

    /// A response body could not be decoded into the operation's model.
    #[error("{operation}: could not decode the response ({source}); body starts: {excerpt}")]
    Decode {
        /// Operation name.
        operation: &'static str,
        /// The first few hundred characters of the body.
        excerpt: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },

    /// The request did not complete: connection, TLS, timeout.
    #[error("{operation}: request to {url} failed: {source}")]
    Transport {
        /// Operation name.
        operation: &'static str,
        /// The URL requested.
        url: String,
        /// The HTTP client's error.
        #[source]
        source: reqwest::Error,
    },

    /// Retries ran out; the last failure is the source.
    #[error("{operation}: gave up after {attempts} attempts in {elapsed:?}: {source}")]
    RetriesExhausted {
        /// Operation name.
        operation: &'static str,
        /// Attempts made, the first included.
        attempts: u32,
        /// Time since the first attempt.
        elapsed: Duration,
        /// The last attempt's error.
        #[source]
        source: Box<Error>,
    },

    /// A paged operation returned a cursor it had already returned.
    #[error("{operation}: the service repeated cursor {cursor:?}; stopping instead of looping")]
    RepeatedCursor {
        /// Operation name.
        operation: &'static str,
        /// The repeated cursor.
        cursor: String,
    },

    /// Configuration that cannot work (bad URL, missing key, bad plan file).
    #[error("configuration: {0}")]
    Config(String),

    /// A file-system operation failed.
    #[error("{action} {path}: {source}", path = path.display())]
    Io {
        /// What was being done (`writing`, `reading`, `renaming`).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },

    /// Arrow could not build or convert a batch.
    #[error("arrow ({context}): {source}")]
    Arrow {
        /// Dataset or step.
        context: String,
        /// The Arrow error.
        #[source]
        source: arrow::error::ArrowError,
    },

    /// A Parquet file could not be written or read.
    #[error("parquet {path}: {source}", path = path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The Parquet error.
        #[source]
        source: parquet::errors::ParquetError,
    },

    /// A polars query failed.
    #[error("polars ({context}): {source}")]
    Polars {
        /// Dataset or step.
        context: String,
        /// The polars error.
        #[source]
        source: polars::error::PolarsError,
    },

    /// The lake's manifest or layout is not as expected.
    #[error("lake {path}: {message}", path = path.display())]
    Lake {
        /// The lake root or the file concerned.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },

    /// Another process holds the lake's write lock.
    #[error("lake {path} is locked by another writer", path = path.display())]
    LakeLocked {
        /// The lock file.
        path: PathBuf,
    },

    /// An argument of an analytics call is not usable (an unknown method, a bad price).
    #[error("invalid {name}: {reason}")]
    InvalidArgument {
        /// The argument.
        name: &'static str,
        /// What is wrong and what was expected.
        reason: String,
    },

    /// A sell of more than the wallet held, under the `Error` oversell policy.
    #[error("wallet {wallet} sold {sold} of token {token} in trade {trade_id} but held {held}")]
    Oversell {
        /// The wallet.
        wallet: String,
        /// The token.
        token: String,
        /// Id of the sell.
        trade_id: i64,
        /// Quantity held before the sell.
        held: f64,
        /// Quantity sold.
        sold: f64,
    },

    /// A sync job failed.
    #[error("sync job {job}: {source}")]
    Sync {
        /// The job's description.
        job: String,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },
}

/// `Result` with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with what was being done and to which path.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// The API status, if the error is (or wraps) an error answer of the service.
    pub fn api_status(&self) -> Option<ApiStatus> {
        match self {
            Error::Api { status, .. } => Some(*status),
            Error::RetriesExhausted { source, .. } | Error::Sync { source, .. } => {
                source.api_status()
            }
            _ => None,
        }
    }
}
