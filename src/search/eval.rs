//! Filter evaluation: MongoDB semantics over JSON documents (paths, missing and null, types,
//! array fields).
//!
//! A filter is prepared once per request ([`FilterMatcher`]): each `$in` and `$nin` list
//! becomes a hash set of its strings and numbers, so a document is tested in time linear in
//! the filter's clauses whatever the lists' lengths.

use std::collections::HashSet;

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
///
/// To test many documents against one filter, prepare it once with [`FilterMatcher::new`].
pub fn matches(filter: &Filter, doc: &Value) -> bool {
    FilterMatcher::new(filter).matches(doc)
}

/// A filter prepared for testing many documents: the rules of [`matches()`], with the operand
/// lists of `$in` and `$nin` held as hash sets built once.
#[derive(Debug)]
pub struct FilterMatcher<'a> {
    clauses: Vec<Prepared<'a>>,
}

#[derive(Debug)]
enum Prepared<'a> {
    And(Vec<FilterMatcher<'a>>),
    Or(Vec<FilterMatcher<'a>>),
    Field { path: &'a str, tests: Vec<Test<'a>> },
}

#[derive(Debug)]
enum Test<'a> {
    /// A condition with one operand, tested as it is.
    Single(&'a Condition),
    /// `$in`: one element of the value is in the set.
    In(ScalarSet<'a>),
    /// `$nin`: `$in` does not hold.
    Nin(ScalarSet<'a>),
}

impl<'a> FilterMatcher<'a> {
    /// Prepares the filter: time and memory linear in its size.
    pub fn new(filter: &'a Filter) -> Self {
        let clauses = filter
            .clauses
            .iter()
            .map(|clause| match clause {
                Clause::And(filters) => Prepared::And(filters.iter().map(Self::new).collect()),
                Clause::Or(filters) => Prepared::Or(filters.iter().map(Self::new).collect()),
                Clause::Field { path, conditions } => Prepared::Field {
                    path,
                    tests: conditions
                        .iter()
                        .map(|c| match c {
                            Condition::In(list) => Test::In(ScalarSet::new(list)),
                            Condition::Nin(list) => Test::Nin(ScalarSet::new(list)),
                            other => Test::Single(other),
                        })
                        .collect(),
                },
            })
            .collect();
        FilterMatcher { clauses }
    }

    /// Whether the document satisfies the filter (see [`matches()`]).
    pub fn matches(&self, doc: &Value) -> bool {
        self.clauses.iter().all(|clause| match clause {
            Prepared::And(filters) => filters.iter().all(|f| f.matches(doc)),
            Prepared::Or(filters) => filters.iter().any(|f| f.matches(doc)),
            Prepared::Field { path, tests } => {
                let value = lookup(doc, path);
                tests.iter().all(|t| match t {
                    Test::Single(c) => condition_holds(c, value),
                    Test::In(set) => any_element(value, |v| set.contains(v)),
                    Test::Nin(set) => !any_element(value, |v| set.contains(v)),
                })
            }
        })
    }
}

/// The operands of `$in` or `$nin` as sets: a value is in it when it `$eq`s one of them.
#[derive(Debug, Default)]
struct ScalarSet<'a> {
    strings: HashSet<&'a str>,
    /// The bit patterns of the numbers, `-0` as `0`; NaN (which equals nothing) left out.
    numbers: HashSet<u64>,
    /// Whether `false` and `true` are in it.
    bools: [bool; 2],
}

impl<'a> ScalarSet<'a> {
    fn new(list: &'a [Scalar]) -> Self {
        let mut set = ScalarSet::default();
        for scalar in list {
            match scalar {
                Scalar::Str(s) => {
                    set.strings.insert(s);
                }
                Scalar::Num(n) => {
                    if let Some(bits) = number_bits(*n) {
                        set.numbers.insert(bits);
                    }
                }
                Scalar::Bool(b) => set.bools[usize::from(*b)] = true,
            }
        }
        set
    }

    /// Whether the value (not an element of it) equals one of the scalars, as [`scalar_equals`].
    fn contains(&self, value: &Value) -> bool {
        match value {
            Value::String(s) => self.strings.contains(s.as_str()),
            Value::Number(_) => number_of(value)
                .and_then(number_bits)
                .is_some_and(|bits| self.numbers.contains(&bits)),
            Value::Bool(b) => self.bools[usize::from(*b)],
            _ => false,
        }
    }
}

/// The key of a number in a [`ScalarSet`]: equal numbers (`0` and `-0` too) have equal keys;
/// NaN has none.
fn number_bits(n: f64) -> Option<u64> {
    if n.is_nan() {
        None
    } else {
        Some((n + 0.0).to_bits())
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
