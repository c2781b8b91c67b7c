//! Keyset cursors: the sort a page was issued for and the last position it returned.

use serde_json::{Map, Value, json};

use super::invalid;
use super::order::{OrderKey, SortKey, SortSpec};
use crate::Result;
use crate::api::profile_query::{base64url_decode, base64url_encode};

/// A keyset cursor: the sort it was issued for and the last position returned.
pub struct Cursor;

impl Cursor {
    /// The cursor of the page that ended at `last` under `sort`.
    pub fn encode(sort: &SortSpec, last: &OrderKey<'_>) -> String {
        let body = json!({
            "f": sort.field,
            "d": sort.direction(),
            "v": last.value.to_cursor_json(),
            "a": last.token_address.to_cursor_json(),
            "i": last.ordinal,
        });
        base64url_encode(body.to_string().as_bytes())
    }

    /// The last position a cursor returned, checking that it was issued by this engine for
    /// `sort` ([`SearchRequest::validate`](crate::api::profile_query::SearchRequest::validate) refuses
    /// a mismatch before a request is sent; the engine keeps its own guarantee).
    pub fn decode(text: &str, sort: &SortSpec) -> Result<OrderKey<'static>> {
        let bad = |why: &str| {
            invalid(
                "cursor",
                format!(
                    "is not a cursor of this service ({why}); pass the cursor of a previous page"
                ),
            )
        };
        let bytes = base64url_decode(text).ok_or_else(|| bad("not base64url"))?;
        let body: Map<String, Value> =
            serde_json::from_slice(&bytes).map_err(|e| bad(&format!("not a JSON object: {e}")))?;
        let field = body.get("f").and_then(Value::as_str);
        let direction = body.get("d").and_then(Value::as_str);
        let value = body.get("v").and_then(SortKey::from_cursor_json);
        let token_address = body.get("a").and_then(SortKey::from_cursor_json);
        let ordinal = body.get("i").and_then(Value::as_u64);
        match (field, direction, value, token_address, ordinal) {
            (
                Some(field),
                Some(d @ ("asc" | "desc")),
                Some(value),
                Some(token_address),
                Some(i),
            ) if body.len() == 5 => {
                if field != sort.field || d != sort.direction() {
                    return Err(invalid(
                        "cursor",
                        format!(
                            "was issued for sort `{field}` {d}, this request sorts by `{}` {}",
                            sort.field,
                            sort.direction()
                        ),
                    ));
                }
                Ok(OrderKey {
                    value,
                    token_address,
                    ordinal: i,
                })
            }
            _ => Err(bad("missing or malformed members")),
        }
    }
}
