//! The one public error type of the library.

use std::fmt;
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
        /// The server's `error` text (or a short excerpt of the body when it had none), with
        /// control characters and escape sequences taken out (see [`printable`]).
        message: String,
        /// `Retry-After` as sent by the server, if any.
        retry_after: Option<Duration>,
    },

    /// A response body could not be decoded into the operation's model.
    #[error("{operation}: could not decode the response ({}); body starts: {excerpt}", printable(&.source.to_string()))]
    Decode {
        /// Operation name.
        operation: &'static str,
        /// The first few hundred characters of the body, made [`printable`].
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
        /// The URL requested, without its user name and password.
        url: String,
        /// The HTTP client's error.
        #[source]
        source: reqwest::Error,
    },

    /// Retries ran out; the last failure is the source.
    #[error("{operation}: gave up after {attempts} attempt{} in {elapsed:?}: {source}", if *.attempts == 1 { "" } else { "s" })]
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

    /// A response body was larger than the client accepts
    /// ([`ClientConfig::max_response_bytes`](crate::api::client::ClientConfig::max_response_bytes));
    /// reading stopped there, and the request is not retried.
    #[error(
        "{operation}: the response is larger than the limit of {limit} bytes (max_response_bytes)"
    )]
    ResponseTooLarge {
        /// Operation name.
        operation: &'static str,
        /// The limit in bytes.
        limit: u64,
    },

    /// A paged operation returned a cursor it had already returned.
    #[error("{operation}: the service repeated cursor {cursor:?}; stopping instead of looping")]
    RepeatedCursor {
        /// Operation name.
        operation: &'static str,
        /// The repeated cursor.
        cursor: String,
    },

    /// A paged operation kept sending new cursors: far past the items its `count` announced,
    /// or with pages that brought no record not already received, several in a row.
    #[error("{}", endless_paging(operation, *.received, *.count, *.pages_without_new))]
    EndlessPaging {
        /// Operation name.
        operation: &'static str,
        /// Items received before stopping.
        received: u64,
        /// The largest `count` the service announced, as it sent it.
        count: i64,
        /// Pages in a row that brought nothing new (0 when the count was exceeded).
        pages_without_new: u32,
    },

    /// The service answered without something its answers always carry (follow's clock, the
    /// `Date` header): a fault of the service, not of the request.
    #[error("the service at {url} {reason}")]
    ServiceAnswer {
        /// The service's base URL.
        url: String,
        /// What the answer lacked, and why it is needed.
        reason: String,
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
    #[error("arrow ({context}): {}", escaped(&.source.to_string()))]
    Arrow {
        /// Dataset or step.
        context: String,
        /// The Arrow error.
        #[source]
        source: arrow_schema::ArrowError,
    },

    /// A Parquet file could not be written or read.
    #[error("parquet {path}: {}", escaped(&.source.to_string()), path = path.display())]
    Parquet {
        /// The file: a data file of the lake by its path relative to the lake's root.
        path: PathBuf,
        /// The Parquet error.
        #[source]
        source: parquet::errors::ParquetError,
    },

    /// A polars query failed.
    #[error("polars ({context}): {}", escaped(&.source.to_string()))]
    Polars {
        /// Dataset or step.
        context: String,
        /// The polars error.
        #[source]
        source: polars::error::PolarsError,
    },

    /// An argument of an analytics call is out of its domain (an unknown method, a bad price
    /// or interval).
    #[error("invalid {argument}: {reason}")]
    InvalidArgument {
        /// The argument concerned.
        argument: String,
        /// What is wrong and what is expected.
        reason: String,
    },

    /// The lake's manifest or layout is not as expected.
    #[error("lake {path}: {message}", path = path.display())]
    Lake {
        /// The lake root or the file concerned.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },

    /// One of the lake's own files (manifest, commit journal) or a sync state in the manifest
    /// could not be decoded.
    #[error("lake {path}: {what}: {source}", path = path.display())]
    LakeDecode {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong and what to do, such as `the commit journal is not valid`.
        what: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },

    /// A task the library runs on tokio's blocking pool was cancelled before it finished (the
    /// runtime is shutting down).
    #[error("{context}: {source}")]
    Task {
        /// What the task was doing.
        context: String,
        /// The runtime's error.
        #[source]
        source: tokio::task::JoinError,
    },

    /// Another writer committed the same version first (a writer that did not take the lake's
    /// lock, or one on a store without locks): nothing of this commit became visible, and its
    /// files were removed. Start the write again from the new version.
    #[error("lake {path}: version {version} was committed by another writer first; nothing of this commit is visible, start it again", path = path.display())]
    CommitConflict {
        /// The lake's log folder.
        path: PathBuf,
        /// The version both writers tried to commit.
        version: u64,
    },

    /// Another process holds the lake's write lock.
    #[error("lake {path} is locked by another writer", path = path.display())]
    LakeLocked {
        /// The lock file.
        path: PathBuf,
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

    /// A chart of the report could not be drawn or encoded.
    #[error("report chart {chart}: {reason}")]
    Chart {
        /// The chart's file name.
        chart: String,
        /// What went wrong.
        reason: String,
    },

    /// Nothing in the lake matched what was asked: a token, pool, wallet or range without
    /// events, a lake without the dataset an answer reads. The text names what was asked.
    #[error("{what}")]
    NoData {
        /// What had no data, as one sentence (`no swaps for token T in the lake at L`).
        what: String,
    },

    /// Strict coverage (`--strict`, `strict=True`): the lake's syncs never fetched, or fetched
    /// only a partial view of, part of what the answer reads.
    #[error("--strict: the lake does not completely cover what was asked: {}", .missing.join("; "))]
    Incomplete {
        /// One line per incomplete target or caveat (the answer's coverage warnings).
        missing: Vec<String>,
    },

    /// A committed file of the lake is missing, unreadable, or not the file the manifest
    /// committed (another size or row count, not Parquet, a column of another type).
    #[error("lake {lake}: the committed file {file} is damaged or was replaced: {reason}; `dexlake verify` lists every such file", lake = lake.display())]
    DamagedLake {
        /// The lake's root.
        lake: PathBuf,
        /// The file's path in the lake (`swaps/chain=altchain/date=.../part-....parquet`).
        file: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The work was cancelled (Ctrl-C) before it finished; what it committed stays.
    #[error("interrupted: {what}")]
    Interrupted {
        /// What was interrupted and what it kept.
        what: String,
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

/// What kind of failure an [`Error`] is, for a caller that branches on it: the CLI's exit
/// status and the Python package's exception class are chosen by kind (see the README's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A bad argument, request member, plan or configuration: fix the call.
    Usage,
    /// Nothing in the lake matched what was asked.
    NoData,
    /// Strict coverage refused an answer the lake does not completely cover.
    Incomplete,
    /// A committed file is missing, damaged or replaced, or the lake's manifest or commit
    /// journal does not decode: `dexlake verify`.
    DamagedLake,
    /// The service answered an error, or could not be reached or understood.
    Service,
    /// Another writer holds the lake (its lock, or a commit that won the race).
    Busy,
    /// Cancelled (Ctrl-C) before the work finished.
    Interrupted,
    /// Any other failure: a file system error, a computation, a task.
    Other,
}

impl Error {
    /// The kind of this failure (a failed sync job's is its cause's).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Sync { source, .. } => source.kind(),
            Error::InvalidRequest { .. } | Error::InvalidArgument { .. } | Error::Config(_) => {
                ErrorKind::Usage
            }
            Error::Api { .. }
            | Error::Decode { .. }
            | Error::Transport { .. }
            | Error::RetriesExhausted { .. }
            | Error::ResponseTooLarge { .. }
            | Error::RepeatedCursor { .. }
            | Error::EndlessPaging { .. }
            | Error::ServiceAnswer { .. } => ErrorKind::Service,
            Error::NoData { .. } => ErrorKind::NoData,
            Error::Incomplete { .. } => ErrorKind::Incomplete,
            Error::DamagedLake { .. } | Error::LakeDecode { .. } => ErrorKind::DamagedLake,
            Error::LakeLocked { .. } | Error::CommitConflict { .. } => ErrorKind::Busy,
            Error::Interrupted { .. } => ErrorKind::Interrupted,
            Error::Io { .. }
            | Error::Arrow { .. }
            | Error::Parquet { .. }
            | Error::Polars { .. }
            | Error::Lake { .. }
            | Error::Task { .. }
            | Error::Oversell { .. }
            | Error::Chart { .. } => ErrorKind::Other,
        }
    }

    /// The one way a polars failure becomes an [`Error`]: `.map_err(Error::polars("step"))`
    /// keeps the step (a dataset, a column, what was being built) as the context. The context
    /// is formatted only when the call fails, so a hot loop pays nothing for it.
    pub fn polars<C: fmt::Display>(context: C) -> impl Fn(polars::error::PolarsError) -> Self {
        move |source| Error::Polars {
            context: context.to_string(),
            source,
        }
    }

    /// A [`Error::DamagedLake`] made where the lake's root (or the file) was not known, given
    /// them: an empty `lake` becomes `root`, an empty `file` becomes `file`. Any other error is
    /// returned as it is.
    pub(crate) fn in_file(self, root: &std::path::Path, file: &str) -> Self {
        match self {
            Error::DamagedLake {
                lake,
                file: named,
                reason,
            } => Error::DamagedLake {
                lake: if lake.as_os_str().is_empty() {
                    root.to_owned()
                } else {
                    lake
                },
                file: if named.is_empty() {
                    file.to_owned()
                } else {
                    named
                },
                reason,
            },
            other => other,
        }
    }

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

/// The message of [`Error::EndlessPaging`].
fn endless_paging(operation: &str, received: u64, count: i64, pages_without_new: u32) -> String {
    if pages_without_new == 0 {
        format!(
            "{operation}: the service sent {received} items with a next cursor although its count was {count}; stopping instead of paging without end"
        )
    } else {
        format!(
            "{operation}: the service sent {pages_without_new} pages in a row with a next cursor and no record not already received ({received} items in all, its count {count}); stopping instead of paging without end"
        )
    }
}

/// Text from outside (a server's error text, a body excerpt) made safe to show on a terminal:
/// ANSI escape sequences are removed, and every other control character (line breaks, C1
/// controls) and every bidirectional override becomes a space, so the text cannot move the
/// cursor, recolour or clear the screen, or forge lines of output.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte in `@`..=`~`.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC and the other string sequences: up to BEL or ST (`ESC \`).
                Some(']' | 'P' | '^' | '_' | 'X') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            chars.next_if_eq(&'\\');
                            break;
                        }
                    }
                }
                // Any other escape is two characters long.
                _ => {}
            },
            c if c.is_control() || is_bidi_control(c) => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// An error and its causes on one line, each cause once: a cause whose text its parent already
/// shows is not repeated. How the CLI's job reports and the Python package show an error.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        source = cause.source();
    }
    s
}

/// The longest text [`escaped`] keeps, in characters.
pub const ESCAPED_MAX_CHARS: usize = 500;

/// A decoder's message shown as text: control characters (such as the NULs of a damaged file's
/// bytes a reader quotes), escape sequences and bidirectional overrides are escaped as in Rust
/// (`\0`, `\u{1b}`), and text past [`ESCAPED_MAX_CHARS`] characters is cut, ending in `…`.
/// Unlike [`printable`], nothing is dropped, so the message still shows which bytes were read.
pub fn escaped(text: &str) -> String {
    match text.char_indices().nth(ESCAPED_MAX_CHARS) {
        Some((cut, _)) => escaped_in_full(&text[..cut]) + "…",
        None => escaped_in_full(text),
    }
}

/// An error and its causes as one line, each cause once (the crate's errors already show
/// their source, whole or cut as [`escaped`] cuts it), the control characters a decoder may
/// quote (a damaged file's bytes) escaped: the text of a failure in the CLI's `error:` line
/// and in `dexlake serve`'s JSON errors.
pub fn causes_text<'a>(
    causes: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    let mut text = String::new();
    for cause in causes {
        let cause = cause.to_string();
        // A cause the text already shows, whole or cut.
        if text.contains(&escaped(&cause)) {
            continue;
        }
        let part = escaped_in_full(&cause);
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// [`escaped`] without the cut: the whole text, its control characters escaped.
pub fn escaped_in_full(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || is_bidi_control(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// A number for a message, in the shortest form that reads back as the same `f64`: plain
/// from 1e-5 to 1e16 in magnitude (`1`, `0.25`, `86400`), in scientific notation outside
/// it (`1e308`, `-2.5e-300`), where the plain form would spell hundreds of digits; `NaN`,
/// `inf` and `-inf` as they are.
pub fn number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-5..1e16).contains(&x.abs()) {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}

/// Unicode characters that reorder the text around them when displayed.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_removes_escapes_and_controls() {
        assert_eq!(printable("plain text"), "plain text");
        assert_eq!(printable("a\u{1b}[31;1mred\u{1b}[0m b"), "ared b");
        assert_eq!(
            printable("x\u{1b}]0;title\u{7}y\u{1b}]8;;u\u{1b}\\z"),
            "xyz"
        );
        assert_eq!(printable("line\r\nforged\u{9b}\u{202e}"), "line  forged  ");
        assert_eq!(printable("cut\u{1b}"), "cut");
        assert_eq!(printable("é 東"), "é 東");
    }

    #[test]
    fn numbers_are_short_whatever_their_size() {
        let cases = [
            (1.0, "1"),
            (0.25, "0.25"),
            (86_400.0, "86400"),
            (1e308, "1e308"),
            (-1.5e300, "-1.5e300"),
            (1e-300, "1e-300"),
            (5e-324, "5e-324"),
            (0.0, "0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (x, shown) in cases {
            assert_eq!(number(x), shown);
            if x.is_finite() {
                assert_eq!(number(x).parse::<f64>().unwrap(), x);
            }
        }
    }

    #[test]
    fn escaped_shows_control_bytes_and_cuts_long_text() {
        assert_eq!(escaped("got \"PAR1\" in é"), "got \"PAR1\" in é");
        assert_eq!(
            escaped("got \"\0\u{7}\u{1b}[2J\u{202e}\"\n"),
            "got \"\\0\\u{7}\\u{1b}[2J\\u{202e}\"\\n"
        );
        let long = "x".repeat(ESCAPED_MAX_CHARS + 10);
        let cut = escaped(&long);
        assert_eq!(cut.chars().count(), ESCAPED_MAX_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
