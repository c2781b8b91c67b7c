//! A service answer's body: the client's decode of it, and the excerpts and decode errors that
//! quote it, with the API key taken out of whatever they quote.

use serde::de::DeserializeOwned;

use crate::error::printable;

/// Characters of a response body kept in error messages.
pub(super) const EXCERPT_CHARS: usize = 200;

/// The client's decode of a successful answer's body into `T`.
///
/// The body is checked as UTF-8 once and parsed as a `str`: a parse of bytes checks every
/// string it reads again, 4 to 5 % of a sync's time on the large market's swaps (see
/// BENCHMARKS.md, "Sync at scale"). A body that is not UTF-8 goes to the parse of bytes, for
/// its error.
pub fn decode_body<T: DeserializeOwned>(body: &[u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(body) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(body),
    }
}

/// Text quoted from a service's answer with every occurrence of the API key replaced by
/// `***` (nothing to do without a key).
pub(super) fn redact_key(text: &str, key: Option<&str>) -> String {
    match key {
        Some(key) if !key.is_empty() && text.contains(key) => text.replace(key, "***"),
        _ => text.to_owned(),
    }
}

/// The decoder's error, whose message may quote a value of the body, with the API key taken
/// out of that message (the error is then a custom one carrying the redacted message).
pub(super) fn redact_decode_error(
    source: serde_json::Error,
    key: Option<&str>,
) -> serde_json::Error {
    let message = source.to_string();
    match key {
        Some(k) if !k.is_empty() && message.contains(k) => {
            <serde_json::Error as serde::de::Error>::custom(redact_key(&message, key))
        }
        _ => source,
    }
}

/// The start of a body, its API key redacted (see [`redact_key`]) and made [`printable`], for
/// error messages.
pub(super) fn excerpt(body: &[u8], key: Option<&str>) -> String {
    let text = redact_key(&String::from_utf8_lossy(body), key);
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", printable(&text[..cut])),
        None => printable(&text),
    }
}
