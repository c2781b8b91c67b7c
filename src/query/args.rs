//! The parsers of the arguments every door takes as text (the CLI's flags, `dexlake serve`'s
//! query parameters): one rule and one message for each. A parser returns the reason a text
//! is refused; the door names the argument with it (clap as `invalid value … for '--token'`,
//! the API as `invalid token: …`).

use chrono::{DateTime, Utc};

use crate::analytics::screener::ProfileSnapshot;

/// A token, pool or wallet address: any text but an empty (or blank) one, which would select
/// nothing.
pub fn address(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err(
            "an empty address selects nothing; give an address (a list takes \
                    addresses separated by single commas)"
                .into(),
        );
    }
    Ok(text.to_owned())
}

/// An instant as RFC 3339 or Unix seconds (`--from`, `--to`, price stats' `--now`).
pub fn time(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(secs) = text.parse::<i64>() {
        return DateTime::from_timestamp(secs, 0).ok_or_else(|| format!("{text}: out of range"));
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("{text}: not RFC 3339 or Unix seconds ({e})"))
}

/// A profile snapshot: `latest`, or the RFC 3339 time it was fetched at (search's
/// `--snapshot`).
pub fn snapshot(text: &str) -> Result<ProfileSnapshot, String> {
    match text {
        "latest" => Ok(ProfileSnapshot::Latest),
        time => time
            .parse()
            .map(ProfileSnapshot::At)
            .map_err(|e| format!("{time:?}: expected `latest` or an RFC 3339 time: {e}")),
    }
}
