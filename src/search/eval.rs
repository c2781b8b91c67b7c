//! Filter evaluation: MongoDB semantics over JSON documents (paths, missing and null, types,
//! array fields).

use serde_json::Value;

use crate::api::profile_query::{Clause, Condition, Filter, Scalar};

/// Looks a dotted path up in a document (`metrics.5m.volume`: segments are object keys; a missing
/// step or a non-object step is missing).
pub fn lookup<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(doc, |current, segment| current.as_object()?.get(segment))
}

/// MongoDB-semantics filter evaluation (semantics.md §4: missing/null, type rules, `$ne`/`$nin`
/// match missing). An empty filter matches every document; an `$and` of no filters matches and
/// an `$or` of no filters does not (the parser rejects both, but a filter built in code may hold
/// them).
pub fn matches(filter: &Filter, doc: &Value) -> bool {
    filter
        .clauses
        .iter()
        .all(|clause| clause_matches(clause, doc))
}

fn clause_matches(clause: &Clause, doc: &Value) -> bool {
    match clause {
        Clause::And(filters) => filters.iter().all(|f| matches(f, doc)),
        Clause::Or(filters) => filters.iter().any(|f| matches(f, doc)),
        Clause::Field { path, conditions } => {
            let value = lookup(doc, path);
            conditions.iter().all(|c| condition_holds(c, value))
        }
    }
}

fn condition_holds(condition: &Condition, value: Option<&Value>) -> bool {
    match condition {
        Condition::Eq(s) => any_element(value, |v| scalar_equals(s, v)),
        Condition::Ne(s) => !any_element(value, |v| scalar_equals(s, v)),
        Condition::In(list) => any_element(value, |v| list.iter().any(|s| scalar_equals(s, v))),
        Condition::Nin(list) => !any_element(value, |v| list.iter().any(|s| scalar_equals(s, v))),
        Condition::Gt(n) => any_element(value, |v| number_of(v).is_some_and(|x| x > *n)),
        Condition::Gte(n) => any_element(value, |v| number_of(v).is_some_and(|x| x >= *n)),
        Condition::Lt(n) => any_element(value, |v| number_of(v).is_some_and(|x| x < *n)),
        Condition::Lte(n) => any_element(value, |v| number_of(v).is_some_and(|x| x <= *n)),
    }
}

/// Whether `predicate` holds for the value, or for one element when the value is an array.
/// A missing value satisfies nothing; null is passed on and fails every typed predicate.
fn any_element(value: Option<&Value>, predicate: impl Fn(&Value) -> bool) -> bool {
    match value {
        None => false,
        Some(Value::Array(items)) => items.iter().any(predicate),
        Some(v) => predicate(v),
    }
}

fn scalar_equals(scalar: &Scalar, value: &Value) -> bool {
    match (scalar, value) {
        (Scalar::Str(a), Value::String(b)) => a == b,
        (Scalar::Num(a), Value::Number(_)) => number_of(value) == Some(*a),
        (Scalar::Bool(a), Value::Bool(b)) => a == b,
        _ => false,
    }
}

fn number_of(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}
