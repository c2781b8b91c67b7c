//! The EVM profiles' fields: a search of an EVM chain's profiles names only fields an EVM
//! profile has, else it is refused, naming the field (the altchain search, as the service,
//! finds a field it lacks missing instead).

use polars::prelude::*;

use super::documents::EVM_DOCUMENT_COLUMNS;
use super::filter::{Resolved, distinct_paths, filter_paths, profile_schema, resolve};
use crate::api::profile_query::SearchRequest;
use crate::api::requests::Operation;
use crate::search::TextMatcher;
use crate::{Error, Result};

/// The name a refused EVM search gives its request: no service operation answers it.
pub(super) const OPERATION: &str = "local EVM search";

/// The schema of an EVM profile document: the lake's `token_profiles` columns an EVM profile
/// has.
pub(super) fn schema() -> Result<Schema> {
    Ok(profile_schema()?
        .iter()
        .filter(|(name, _)| EVM_DOCUMENT_COLUMNS.contains(&name.as_str()))
        .map(|(name, dtype)| Field::new(name.clone(), dtype.clone()))
        .collect())
}

/// A refusal of the EVM search, naming the member.
fn refused(member: &str, reason: impl Into<String>) -> Error {
    Error::InvalidRequest {
        operation: OPERATION,
        member: member.to_owned(),
        reason: reason.into(),
    }
}

/// The screener's and the engine's refusals of the request, named as the EVM search's.
pub(super) fn renamed(e: Error) -> Error {
    match e {
        Error::InvalidRequest {
            operation,
            member,
            reason,
        } if operation == Operation::AltSearchProfiles.name() => Error::InvalidRequest {
            operation: OPERATION,
            member,
            reason,
        },
        other => other,
    }
}

/// Refuses a request that names a field an EVM profile (of `schema`) lacks: a path of its
/// filter, sort, text query or dynamic labels, or an option asking for `labels`, `market` or
/// a metrics window the lake does not store.
pub(super) fn check_fields(request: &SearchRequest, schema: &Schema) -> Result<()> {
    let mut paths = Vec::new();
    if let Some(sort) = &request.sort {
        paths.push(sort.field.clone());
    }
    if let Some(filter) = &request.filter {
        filter_paths(filter, &mut paths);
    }
    for filter in request.dynamic_labels.iter().flat_map(|d| d.values()) {
        filter_paths(filter, &mut paths);
    }
    if let Some(query) = &request.query {
        let text = TextMatcher::new(query);
        paths.extend(text.fields().iter().map(|f| (*f).to_owned()));
    }
    for path in distinct_paths(paths) {
        // A path with an empty segment is refused by the filter's compiler, as it is for the
        // altchain.
        if path.is_empty() || path.split('.').any(str::is_empty) {
            continue;
        }
        if let Resolved::Missing = resolve(&path, schema) {
            return Err(refused(&path, missing(&path, schema)));
        }
    }
    let Some(options) = &request.options else {
        return Ok(());
    };
    if options.include_labels == Some(true) {
        return Err(refused(
            "options.include_labels",
            "asks for labels, which an EVM profile does not have",
        ));
    }
    if options.include_market == Some(true) {
        return Err(refused(
            "options.include_market",
            "asks for market, which an EVM profile does not have",
        ));
    }
    let windows = fields_at(schema, &["metrics"]);
    for window in options.include_metrics.iter().flatten() {
        if !windows.iter().any(|w| w == window.as_str()) {
            return Err(refused(
                "options.include_metrics",
                format!(
                    "asks for window {:?}, which the lake's EVM profiles do not store; they \
                     store: {}",
                    window.as_str(),
                    windows.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Why `path` is not a field of an EVM profile, naming the fields where it leaves them.
fn missing(path: &str, schema: &Schema) -> String {
    let segments: Vec<&str> = path.split('.').collect();
    // The longest prefix that names a field, and what is there.
    let mut depth = 0;
    let mut dtype: Option<&DataType> = None;
    for (i, segment) in segments.iter().enumerate() {
        let next = match (i, dtype) {
            (0, _) => schema.get(segment),
            (_, Some(DataType::Struct(fields))) => fields
                .iter()
                .find(|f| f.name().as_str() == *segment)
                .map(Field::dtype),
            _ => None,
        };
        match next {
            Some(d) => {
                depth = i + 1;
                dtype = Some(d);
            }
            None => break,
        }
    }
    let prefix = segments[..depth].join(".");
    let fields = fields_at(schema, &segments[..depth]);
    if depth == 0 {
        format!(
            "is not a field of an EVM token profile; its fields are: {} (see `dexlake schema \
             token_profiles`)",
            fields.join(", ")
        )
    } else if fields.is_empty() {
        format!("is not a field of an EVM token profile: `{prefix}` is a value, not an object")
    } else {
        format!(
            "is not a field of an EVM token profile; the fields of `{prefix}` are: {}",
            fields.join(", ")
        )
    }
}

/// The names of the fields at `path` (the top-level columns for an empty path); none where
/// `path` names a value.
fn fields_at(schema: &Schema, path: &[&str]) -> Vec<String> {
    let Some((first, rest)) = path.split_first() else {
        // The profile's members in the service's order.
        return EVM_DOCUMENT_COLUMNS.map(str::to_owned).to_vec();
    };
    let mut dtype = schema.get(first);
    for segment in rest {
        dtype = match dtype {
            Some(DataType::Struct(fields)) => fields
                .iter()
                .find(|f| f.name().as_str() == *segment)
                .map(Field::dtype),
            _ => None,
        };
    }
    match dtype {
        Some(DataType::Struct(fields)) => fields.iter().map(|f| f.name().to_string()).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(v: serde_json::Value) -> SearchRequest {
        serde_json::from_value(v).expect("a request")
    }

    fn refusal(v: serde_json::Value) -> String {
        let schema = schema().expect("schema");
        match check_fields(&request(v), &schema) {
            Err(e @ Error::InvalidRequest { .. }) => e.to_string(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn fields_of_an_evm_profile_pass() {
        let schema = schema().expect("schema");
        let ok = request(json!({
            "filter": {"metrics.1h.volume": {"$gt": 0}, "metadata.verified": {"$eq": true},
                       "$or": [{"chain_id": {"$eq": 1}}, {"updated_at": {"$ne": "x"}}]},
            "sort": {"field": "metrics.1d.volume", "direction": "desc"},
            "query": {"text": "to"},
            "dynamic_labels": {"busy": {"metrics.5m.trade_count": {"$gte": 3}}},
            "options": {"include_metadata": true, "include_metrics": ["1h", "7d"],
                        "include_labels": false}
        }));
        check_fields(&ok, &schema).expect("every field is an EVM profile's");
    }

    #[test]
    fn a_field_an_evm_profile_lacks_is_refused_by_name() {
        let e = refusal(json!({"filter": {"market.liquidity": {"$gte": 1}}}));
        assert!(e.contains("`market.liquidity` is not a field"), "{e}");
        assert!(e.contains("metrics"), "{e}");
        let e = refusal(json!({"sort": {"field": "metrics.1h.liquidity", "direction": "asc"}}));
        assert!(e.contains("`metrics.1h.liquidity`"), "{e}");
        assert!(e.contains("the fields of `metrics.1h` are:"), "{e}");
        let e = refusal(json!({"filter": {"$and": [{"labels": {"$eq": "hot"}}]}}));
        assert!(e.contains("`labels`"), "{e}");
        let e = refusal(json!({"dynamic_labels": {"x": {"metadata.symbol.x": {"$eq": 1}}}}));
        assert!(e.contains("`metadata.symbol` is a value"), "{e}");
        let e = refusal(json!({"options": {"include_market": true}}));
        assert!(e.contains("`options.include_market`"), "{e}");
        let e = refusal(json!({"options": {"include_labels": true}}));
        assert!(e.contains("`options.include_labels`"), "{e}");
        let e = refusal(json!({"options": {"include_metrics": ["2h"]}}));
        assert!(e.contains("\"2h\""), "{e}");
        assert!(
            e.starts_with(&format!("invalid {OPERATION} request")),
            "{e}"
        );
    }
}
