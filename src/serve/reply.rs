//! What the API writes: an answer as `{"version", "coverage", "warnings", "data"}`, an error as
//! `{"error", "status"}` with the HTTP status of its kind ([`status_of`], the one mapping).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::causes_text;
use crate::query::Answer;
use crate::{Error, ErrorKind};

/// The HTTP status of a failure of `kind`, as the CLI's exit status follows the same kind:
///
/// | kind | status |
/// |---|---|
/// | [`ErrorKind::Usage`] (a bad parameter, a bound) | 400 |
/// | [`ErrorKind::NoData`] | 404 |
/// | [`ErrorKind::Incomplete`] (`strict`) | 409 |
/// | [`ErrorKind::DamagedLake`] | 500 |
/// | [`ErrorKind::Service`] | 502 |
/// | [`ErrorKind::Busy`], [`ErrorKind::Interrupted`] | 503 |
/// | [`ErrorKind::Other`] | 500 |
pub(super) fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::Usage => StatusCode::BAD_REQUEST,
        ErrorKind::NoData => StatusCode::NOT_FOUND,
        ErrorKind::Incomplete => StatusCode::CONFLICT,
        ErrorKind::DamagedLake => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorKind::Service => StatusCode::BAD_GATEWAY,
        ErrorKind::Busy | ErrorKind::Interrupted => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// `value` as a JSON response with `status`.
pub(super) fn json(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// An error as `{"error": text, "status": code}`, `text` the CLI's `error:` line.
pub(super) fn error(e: &Error) -> Response {
    let causes = std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    });
    refusal(status_of(e.kind()), &causes_text(causes))
}

/// A refusal of the server's own (no route, no access) as `{"error", "status"}`.
pub(super) fn refusal(status: StatusCode, text: &str) -> Response {
    json(status, &json!({"error": text, "status": status.as_u16()}))
}

/// An answer with `data` (its rows, or its value as JSON): its lake version, its coverage and
/// its warnings as `{kind, text}` (kind `coverage`, `no_events` or `empty`).
pub(super) fn answer<T>(answer: &Answer<T>, data: Value) -> crate::Result<Value> {
    let coverage = serde_json::to_value(&answer.coverage).map_err(|e| Error::Lake {
        path: "coverage".into(),
        message: format!("the coverage of an answer is not writable as JSON: {e}"),
    })?;
    let warnings: Vec<Value> = answer
        .warnings
        .iter()
        .map(|w| json!({"kind": w.kind.name(), "text": w.text}))
        .collect();
    Ok(json!({
        "version": answer.version,
        "coverage": coverage,
        "warnings": warnings,
        "data": data,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_one_status() {
        let statuses: Vec<u16> = [
            ErrorKind::Usage,
            ErrorKind::NoData,
            ErrorKind::Incomplete,
            ErrorKind::DamagedLake,
            ErrorKind::Service,
            ErrorKind::Busy,
            ErrorKind::Interrupted,
            ErrorKind::Other,
        ]
        .into_iter()
        .map(|k| status_of(k).as_u16())
        .collect();
        assert_eq!(statuses, [400, 404, 409, 500, 502, 503, 503, 500]);
    }
}
