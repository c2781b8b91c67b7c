//! The bounds of `dexlake serve`'s answers (docs/api.md, "Bounds"). A request for more is
//! refused with a 400 naming the bound, never cut short: an answer is whole or refused.

use chrono::{DateTime, Utc};

use crate::{Error, Result};

/// The most rows a frame answer holds (bars, PnL tables, price stats, token metrics).
pub const MAX_ROWS: usize = 100_000;

/// The largest `top` of the leaderboard.
pub const MAX_TOP: usize = 1_000;

/// The most tokens a list (`tokens`, check's `token`) names.
pub const MAX_TOKENS: usize = 1_000;

/// The most examples of each kind of finding a check shows.
pub const MAX_EXAMPLES: usize = 1_000;

/// The largest request body (a search request), bytes.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The most questions answered at once; more wait their turn.
pub const MAX_CONCURRENT: usize = 4;

fn refused(argument: &str, reason: String) -> Error {
    Error::InvalidArgument {
        argument: argument.into(),
        reason,
    }
}

/// Refuses an answer of more than [`MAX_ROWS`] rows.
pub(super) fn rows(rows: usize, narrow: &str) -> Result<()> {
    if rows > MAX_ROWS {
        return Err(refused(
            "request",
            format!(
                "the answer has {rows} rows, more than the {MAX_ROWS} an answer holds: {narrow}"
            ),
        ));
    }
    Ok(())
}

/// Refuses, before any is computed, time bars whose range `[from, to)` holds more than
/// [`MAX_ROWS`] buckets of `interval` seconds.
pub(super) fn buckets(interval: i64, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<()> {
    if interval <= 0 || to <= from {
        // The query refuses these itself.
        return Ok(());
    }
    let span = (to - from).num_seconds();
    let buckets = span / interval + i64::from(span % interval != 0);
    if buckets > MAX_ROWS as i64 {
        return Err(refused(
            "request",
            format!(
                "[from, to) holds {buckets} bars of {interval} s, more than the {MAX_ROWS} an \
                 answer holds: narrow the range or widen the interval"
            ),
        ));
    }
    Ok(())
}

/// Refuses a count above its bound: `top` above [`MAX_TOP`], a list above [`MAX_TOKENS`].
pub(super) fn at_most(argument: &str, given: usize, bound: usize) -> Result<()> {
    if given > bound {
        return Err(refused(
            argument,
            format!("{given} is more than the {bound} an answer allows"),
        ));
    }
    Ok(())
}
