//! A service answer's body: the client's decode of it (owned, or sharing the body's bytes),
//! and the excerpts and decode errors that quote it, with the API key taken out of whatever
//! they quote.

use bytes::Bytes;
use bytestring::ByteString;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::api::models::{Page, Swap, Trade};
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

/// A record that can hold its text (names, hashes) as views of the body it was decoded from:
/// one buffer per answer instead of one allocation per string. A sync decodes its swaps and
/// trades so.
pub trait SharesBody: Sized {
    /// The record with its text borrowed from the body.
    type Borrowed<'a>: Deserialize<'a>;
    /// The record with its text owned.
    type Owned: DeserializeOwned;
    /// The borrowed record, its text turned into views of `body`, which holds it.
    fn share(record: Self::Borrowed<'_>, body: &ByteString) -> Self;
    /// The owned record, its text moved into buffers of its own.
    fn own(record: Self::Owned) -> Self;
}

/// [`SharesBody`] for a model whose text is its type parameter (`map_strings`).
macro_rules! shares_body {
    ($($model:ident),+) => {$(
        impl SharesBody for $model<ByteString> {
            type Borrowed<'a> = $model<&'a str>;
            type Owned = $model;
            fn share(record: $model<&str>, body: &ByteString) -> Self {
                record.map_strings(|s| body.slice_ref(s))
            }
            fn own(record: $model) -> Self {
                record.map_strings(ByteString::from)
            }
        }
    )+};
}

shares_body!(Swap, Trade);

/// The decode of a page whose records share the body's bytes ([`SharesBody`]).
///
/// A string with an escape cannot be borrowed: such a page (and a body that is not UTF-8 or
/// not a page, for its error) is decoded again with owned text, so the result and every error
/// are those of [`decode_body`].
pub fn decode_page_shared<T: SharesBody>(body: &Bytes) -> serde_json::Result<Page<T>> {
    if let Ok(text) = ByteString::try_from(body.clone())
        && let Ok(page) = serde_json::from_str::<Page<T::Borrowed<'_>>>(&text)
    {
        return Ok(Page {
            count: page.count,
            cursor: page.cursor,
            data: page.data.into_iter().map(|r| T::share(r, &text)).collect(),
        });
    }
    let page: Page<T::Owned> = decode_body(body)?;
    Ok(Page {
        count: page.count,
        cursor: page.cursor,
        data: page.data.into_iter().map(T::own).collect(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::models::SwapType;

    fn swap(id: i64, wallet: &str, protocol: &str) -> Swap {
        Swap {
            id,
            swap_type: SwapType::TokenQuote,
            protocol: protocol.into(),
            wallet_address: wallet.into(),
            pool_address: "pool1".into(),
            token_address_in: "tokenA".into(),
            token_address_out: "So11111111111111111111111111111111111111112".into(),
            token_amount_in: 1.5,
            token_amount_out: 0.1 + 0.2,
            token_price_in: 3.0e-9,
            token_price_out: 151.25,
            pre_token_balance_in: 10.0,
            pre_token_balance_out: 0.0,
            post_token_balance_in: 8.5,
            post_token_balance_out: 0.3,
            usd_amount_in: 45.375,
            usd_amount_out: 45.375,
            block_slot: 330_000_000 + id,
            block_time: chrono::DateTime::from_timestamp(1_745_000_000 + id, 0).unwrap(),
            tx_hash: format!("tx{id}"),
        }
    }

    fn body_of(swaps: Vec<Swap>) -> Bytes {
        let page = Page {
            count: 7,
            cursor: Some("c2".into()),
            data: swaps,
        };
        Bytes::from(serde_json::to_vec(&page).unwrap())
    }

    fn owned(page: Page<Swap<ByteString>>) -> Page<Swap> {
        Page {
            count: page.count,
            cursor: page.cursor,
            data: page
                .data
                .into_iter()
                .map(|s| s.map_strings(|t| t.to_string()))
                .collect(),
        }
    }

    #[test]
    fn shared_pages_decode_as_owned_pages_do() {
        // Plain text, text beyond ASCII (not escaped on the wire), and text with escapes
        // (which cannot be borrowed: the page is read again with owned text).
        for wallet in ["W1", "Wället✓", "quote\"d\\ and\nnew line"] {
            let body = body_of(vec![swap(1, wallet, "raydium"), swap(2, "W2", "orca")]);
            let expected: Page<Swap> = decode_body(&body).unwrap();
            assert_eq!(expected.data[0].wallet_address, wallet);
            let shared = decode_page_shared::<Swap<ByteString>>(&body).unwrap();
            assert_eq!(owned(shared), expected, "{wallet:?}");
        }
    }

    #[test]
    fn shared_text_is_a_view_of_the_body() {
        let body = body_of(vec![swap(1, "W1", "raydium")]);
        let page = decode_page_shared::<Swap<ByteString>>(&body).unwrap();
        let wallet = page.data[0].wallet_address.as_bytes().as_ptr_range();
        assert!(body.as_ptr_range().contains(&wallet.start));
    }

    #[test]
    fn shared_decode_errors_are_the_owned_decode_errors() {
        let mut not_utf8 = body_of(vec![swap(1, "W1", "raydium")]).to_vec();
        let at = not_utf8.windows(2).position(|w| w == b"W1").unwrap();
        not_utf8[at] = 0xff;
        let wrong_type = br#"{"count":1,"data":[{"id":"one"}]}"#.to_vec();
        for body in [not_utf8, wrong_type, b"{\"count\":".to_vec()] {
            let body = Bytes::from(body);
            let owned = decode_body::<Page<Swap>>(&body).unwrap_err();
            let shared = decode_page_shared::<Swap<ByteString>>(&body).unwrap_err();
            assert_eq!(shared.to_string(), owned.to_string());
        }
    }
}
