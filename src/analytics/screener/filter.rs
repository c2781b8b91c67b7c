//! The filter compiler: the search-profiles filter language as polars expressions over typed
//! columns, with the service's rules (see the [screener's docs](super)).

use std::collections::HashMap;

use polars::prelude::*;

use super::invalid;
use super::kernels::{list_contains, nested_value};
use crate::api::profile_query::{Clause, Condition, Filter, Scalar};
use crate::lake::Dataset;
use crate::lake::read::empty_frame;
use crate::{Error, Result};

/// The chrono format of the service's timestamps (`2025-06-01T00:00:00Z`, with 3, 6 or 9
/// fractional digits only when they are not zero), as `DateTime<Utc>` serializes.
pub(super) const TIMESTAMP_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.fZ";

/// Every field path a filter names, in `$and` and `$or` too.
pub(super) fn filter_paths(filter: &Filter, out: &mut Vec<String>) {
    for clause in &filter.clauses {
        match clause {
            Clause::And(filters) | Clause::Or(filters) => {
                filters.iter().for_each(|f| filter_paths(f, out));
            }
            Clause::Field { path, .. } => out.push(path.clone()),
        }
    }
}

/// The paths without repeats, in the order first named (a filter of thousands of clauses may
/// name one path in each).
pub(super) fn distinct_paths(paths: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::with_capacity(paths.len());
    paths
        .into_iter()
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

/// What a path's value is, as the service's documents would hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Number,
    String,
    Bool,
    /// A timestamp column: the service's RFC 3339 string.
    Timestamp,
    /// A list of strings (`labels`).
    StringList,
    /// An object: a struct column, or `matched_labels` (entries in the lake, an object in the
    /// documents).
    Object,
}

impl Kind {
    fn of(dtype: &DataType) -> Option<Kind> {
        Some(match dtype {
            DataType::Boolean => Kind::Bool,
            DataType::String => Kind::String,
            DataType::Datetime(_, _) => Kind::Timestamp,
            DataType::List(inner) if **inner == DataType::String => Kind::StringList,
            DataType::Struct(_) => Kind::Object,
            d if d.is_primitive_numeric() => Kind::Number,
            _ => return None,
        })
    }

    /// The rank of [`SortKey::rank`](crate::search::SortKey::rank) of the column's values, when the columnar sort covers it.
    pub(super) fn sort_rank(self) -> Option<u8> {
        match self {
            Kind::Number => Some(1),
            Kind::String | Kind::Timestamp => Some(2),
            Kind::Bool => Some(5),
            Kind::StringList | Kind::Object => None,
        }
    }
}

#[derive(Clone)]
pub(super) enum Resolved {
    /// The path names a column value (null where the value or one of its parents is null).
    Value { expr: Expr, kind: Kind },
    /// The path is missing in every profile.
    Missing,
    /// The columnar evaluation does not cover this path.
    Unsupported,
}

pub(super) fn resolve(path: &str, schema: &Schema) -> Resolved {
    let mut segments = path.split('.');
    let first = segments.next().unwrap_or_default();
    let Some(mut dtype) = schema.get(first).cloned() else {
        return Resolved::Missing;
    };
    let mut inner: Vec<PlSmallStr> = Vec::new();
    for segment in segments {
        if first == "matched_labels" {
            return Resolved::Unsupported;
        }
        let DataType::Struct(fields) = &dtype else {
            return Resolved::Missing;
        };
        let Some(field) = fields.iter().find(|f| f.name().as_str() == segment) else {
            return Resolved::Missing;
        };
        inner.push(field.name().clone());
        dtype = field.dtype().clone();
    }
    let kind = if path == "matched_labels" {
        Some(Kind::Object)
    } else {
        Kind::of(&dtype)
    };
    let Some(kind) = kind else {
        return Resolved::Unsupported;
    };
    let expr = if inner.is_empty() {
        col(first)
    } else {
        nested_value(first, inner, dtype)
    };
    Resolved::Value { expr, kind }
}

/// The filter as a boolean polars expression over a frame of profiles with the lake's
/// `token_profiles` columns (struct columns `metadata`, `market`, `metrics`, list column
/// `labels`), with the service's rules (see the [screener's docs](super)). An empty filter is `true`.
///
/// Errors when the filter reads inside `matched_labels`, which [`search`](super::search) answers through the
/// engine instead.
pub fn filter_expr(filter: &Filter) -> Result<Expr> {
    let schema = profile_schema()?;
    filter_expr_for(filter, &schema)
}

/// [`filter_expr`] for a frame of the given schema.
pub fn filter_expr_for(filter: &Filter, schema: &Schema) -> Result<Expr> {
    compile(filter, schema)?.ok_or_else(|| {
        invalid(
            "filter",
            "reads inside matched_labels, which has no column expression; use analytics::screener::search",
        )
    })
}

/// The polars schema of the lake's `token_profiles` files.
pub(crate) fn profile_schema() -> Result<Schema> {
    let schema = empty_frame(Dataset::TokenProfiles)?
        .collect_schema()
        .map_err(Error::polars("the token_profiles schema"))?;
    Ok(schema.as_ref().clone())
}

/// `None` when some path is not covered by the columnar evaluation.
///
/// The expression's depth grows with the filter's nesting only, never with a list's length or
/// a clause count, so its cost is linear in the filter:
///
/// * a filter's clauses, and the sub-filters of `$and` and `$or` (flattened into their parent
///   when they are of the same kind), are combined n-ary (polars' `all_horizontal` and
///   `any_horizontal`);
/// * `$in` and `$nin` are one `is_in` against a Series of the operands of the column's type (or
///   one pass over each list of `labels` with a hash set of them);
/// * the conditions on one path that are terms of one `$and` or `$or` are merged into at most
///   three (see [`PathTerms`]), so a request of thousands of clauses on a few paths reads each
///   path a few times, not once per clause.
pub(super) fn compile(filter: &Filter, schema: &Schema) -> Result<Option<Expr>> {
    let mut terms = Terms::new(Combine::All);
    if !conjuncts(filter, schema, &mut terms)? {
        return Ok(None);
    }
    terms.combine().map(Some)
}

/// How the terms of one n-ary node combine.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Combine {
    /// Every term holds (`$and`, a filter's clauses, a path's conditions).
    All,
    /// One term holds (`$or`).
    Any,
}

/// The terms of one n-ary `$and` or `$or` being compiled.
struct Terms<'a> {
    how: Combine,
    /// The merged conditions per path, in the order first named.
    paths: Vec<PathTerms<'a>>,
    by_path: HashMap<&'a str, usize>,
    /// The other terms.
    exprs: Vec<Expr>,
}

/// The conditions on one path merged within one `$and` or `$or`, by rules that keep the
/// filter's meaning exactly (`$in` is any operand's `$eq`; a range holds only for numbers, and
/// never for NaN):
///
/// * in an `$or`, the `$eq` and `$in` operands become one `$in`; the `$gt` and `$gte` bounds
///   the loosest of them (the least; `$gte` on a tie), and so the `$lt` and `$lte` bounds (the
///   greatest);
/// * in an `$and`, the `$ne` and `$nin` operands become one `$nin`; the `$gt` and `$gte` bounds
///   the tightest (the greatest; `$gt` on a tie), and so the `$lt` and `$lte` bounds (the
///   least).
struct PathTerms<'a> {
    resolved: Resolved,
    /// The operands of the merged equality tests (`$eq`/`$in` in an `$or`, `$ne`/`$nin` in an
    /// `$and`).
    equal: Vec<&'a Scalar>,
    /// `$gt` (or `$gte`, when inclusive) of this number.
    above: Option<Bound>,
    /// `$lt` (or `$lte`, when inclusive) of this number.
    below: Option<Bound>,
    /// Some bound is NaN in an `$and`: no value satisfies it.
    never: bool,
}

#[derive(Clone, Copy)]
struct Bound {
    at: f64,
    inclusive: bool,
}

impl<'a> Terms<'a> {
    fn new(how: Combine) -> Self {
        Terms {
            how,
            paths: Vec::new(),
            by_path: HashMap::new(),
            exprs: Vec::new(),
        }
    }

    /// Adds one condition on the path as a term.
    fn add(&mut self, path: &'a str, resolved: &Resolved, condition: &'a Condition) {
        let how = self.how;
        let merged = matches!(
            (how, condition),
            (Combine::Any, Condition::Eq(_) | Condition::In(_))
                | (Combine::All, Condition::Ne(_) | Condition::Nin(_))
                | (
                    _,
                    Condition::Gt(_) | Condition::Gte(_) | Condition::Lt(_) | Condition::Lte(_)
                )
        );
        if !merged {
            self.exprs.push(self::condition(condition, resolved));
            return;
        }
        let index = *self.by_path.entry(path).or_insert_with(|| {
            self.paths.push(PathTerms {
                resolved: resolved.clone(),
                equal: Vec::new(),
                above: None,
                below: None,
                never: false,
            });
            self.paths.len() - 1
        });
        let terms = &mut self.paths[index];
        let bound = |at: f64, inclusive| Bound { at, inclusive };
        match condition {
            Condition::Eq(s) | Condition::Ne(s) => terms.equal.push(s),
            Condition::In(list) | Condition::Nin(list) => terms.equal.extend(list),
            Condition::Gt(n) => terms.bound(how, true, bound(*n, false)),
            Condition::Gte(n) => terms.bound(how, true, bound(*n, true)),
            Condition::Lt(n) => terms.bound(how, false, bound(*n, false)),
            Condition::Lte(n) => terms.bound(how, false, bound(*n, true)),
        }
    }

    /// The terms ANDed or ORed.
    fn combine(self) -> Result<Expr> {
        let how = self.how;
        let mut exprs = self.exprs;
        for path in self.paths {
            path.terms(how, &mut exprs);
        }
        let combined = match (exprs.len(), how) {
            (0, _) => return Ok(lit(how == Combine::All)),
            (1, _) => return Ok(exprs.pop().unwrap_or_else(|| lit(how == Combine::All))),
            (_, Combine::All) => all_horizontal(exprs),
            (_, Combine::Any) => any_horizontal(exprs),
        };
        combined.map_err(Error::polars("compiling the filter"))
    }
}

impl PathTerms<'_> {
    /// Merges a bound: `above` for `$gt`/`$gte`, else `$lt`/`$lte`.
    fn bound(&mut self, how: Combine, above: bool, new: Bound) {
        if new.at.is_nan() {
            // No number is greater or less than NaN: the term is false.
            self.never |= how == Combine::All;
            return;
        }
        let slot = if above {
            &mut self.above
        } else {
            &mut self.below
        };
        let Some(old) = *slot else {
            *slot = Some(new);
            return;
        };
        // Of two bounds `$gt`, the greater is the tighter; of two `$lt`, the lesser.
        let tighter = if above {
            new.at > old.at
        } else {
            new.at < old.at
        };
        *slot = Some(if new.at == old.at {
            Bound {
                at: old.at,
                inclusive: match how {
                    Combine::All => old.inclusive && new.inclusive,
                    Combine::Any => old.inclusive || new.inclusive,
                },
            }
        } else if tighter == (how == Combine::All) {
            new
        } else {
            old
        });
    }

    /// The path's terms, pushed onto `exprs`.
    fn terms(self, how: Combine, exprs: &mut Vec<Expr>) {
        if self.never {
            exprs.push(lit(false));
            return;
        }
        if !self.equal.is_empty() {
            let hit = any_equal(&self.resolved, self.equal);
            exprs.push(match how {
                Combine::All => hit.not(),
                Combine::Any => hit,
            });
        }
        if let Some(Bound { at, inclusive }) = self.above {
            exprs.push(range(&self.resolved, |v| {
                if inclusive {
                    v.gt_eq(lit(at))
                } else {
                    v.gt(lit(at))
                }
            }));
        }
        if let Some(Bound { at, inclusive }) = self.below {
            exprs.push(range(&self.resolved, |v| {
                if inclusive {
                    v.lt_eq(lit(at))
                } else {
                    v.lt(lit(at))
                }
            }));
        }
    }
}

/// The path resolved against the schema; an error when it is not a dotted path.
fn resolve_field(path: &str, schema: &Schema) -> Result<Resolved> {
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(invalid(path, "expected a dotted field path"));
    }
    Ok(resolve(path, schema))
}

/// Adds the filter's clauses to the terms of an `$and`; `false` when some path is not covered
/// by the columnar evaluation.
fn conjuncts<'a>(filter: &'a Filter, schema: &Schema, terms: &mut Terms<'a>) -> Result<bool> {
    for clause in &filter.clauses {
        match clause {
            Clause::And(filters) => {
                for f in filters {
                    if !conjuncts(f, schema, terms)? {
                        return Ok(false);
                    }
                }
            }
            Clause::Or(filters) => {
                let mut any = Terms::new(Combine::Any);
                if !disjuncts(filters, schema, &mut any)? {
                    return Ok(false);
                }
                terms.exprs.push(any.combine()?);
            }
            Clause::Field { path, conditions } => {
                let resolved = resolve_field(path, schema)?;
                if matches!(resolved, Resolved::Unsupported) {
                    return Ok(false);
                }
                for c in conditions {
                    terms.add(path, &resolved, c);
                }
            }
        }
    }
    Ok(true)
}

/// Adds the filters to the terms of an `$or`; `false` when some path is not covered by the
/// columnar evaluation.
fn disjuncts<'a>(filters: &'a [Filter], schema: &Schema, terms: &mut Terms<'a>) -> Result<bool> {
    for f in filters {
        match f.clauses.as_slice() {
            [Clause::Or(inner)] => {
                if !disjuncts(inner, schema, terms)? {
                    return Ok(false);
                }
            }
            // One condition on one path: a term of the `$or` itself.
            [Clause::Field { path, conditions }] if conditions.len() == 1 => {
                let resolved = resolve_field(path, schema)?;
                if matches!(resolved, Resolved::Unsupported) {
                    return Ok(false);
                }
                terms.add(path, &resolved, &conditions[0]);
            }
            _ => {
                let mut all = Terms::new(Combine::All);
                if !conjuncts(f, schema, &mut all)? {
                    return Ok(false);
                }
                terms.exprs.push(all.combine()?);
            }
        }
    }
    Ok(true)
}

fn condition(condition: &Condition, resolved: &Resolved) -> Expr {
    match condition {
        Condition::Eq(s) => any_equal(resolved, [s]),
        Condition::In(list) => any_equal(resolved, list),
        Condition::Ne(s) => any_equal(resolved, [s]).not(),
        Condition::Nin(list) => any_equal(resolved, list).not(),
        Condition::Gt(n) => range(resolved, |v| v.gt(lit(*n))),
        Condition::Gte(n) => range(resolved, |v| v.gt_eq(lit(*n))),
        Condition::Lt(n) => range(resolved, |v| v.lt(lit(*n))),
        Condition::Lte(n) => range(resolved, |v| v.lt_eq(lit(*n))),
    }
}

/// Whether the value (or one element of a list) `$eq`s one of the scalars; never null. The
/// scalars of another type than the column's are left out (they equal nothing in it); the rest
/// are tested in one `is_in` (or one `==` when there is one).
fn any_equal<'s>(resolved: &Resolved, scalars: impl IntoIterator<Item = &'s Scalar>) -> Expr {
    let Resolved::Value { expr, kind } = resolved else {
        return lit(false);
    };
    let scalars: Vec<&Scalar> = scalars.into_iter().collect();
    let strings = || -> Vec<&str> {
        scalars
            .iter()
            .filter_map(|s| match s {
                Scalar::Str(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    };
    let hit = match kind {
        Kind::Number => {
            // NaN equals nothing; `-0` is `0`, as polars' hashing of floats has it.
            let numbers: Vec<f64> = scalars
                .iter()
                .filter_map(|s| match s {
                    Scalar::Num(n) if !n.is_nan() => Some(n + 0.0),
                    _ => None,
                })
                .collect();
            one_of(expr.clone().cast(DataType::Float64), numbers)
        }
        Kind::String => one_of(expr.clone(), strings()),
        Kind::Timestamp => one_of(expr.clone().dt().to_string(TIMESTAMP_FORMAT), strings()),
        Kind::Bool => {
            let mut wanted = [false; 2];
            for s in &scalars {
                if let Scalar::Bool(b) = s {
                    wanted[usize::from(*b)] = true;
                }
            }
            match wanted {
                [true, true] => Some(expr.clone().is_not_null()),
                [false, true] => Some(expr.clone().eq(lit(true))),
                [true, false] => Some(expr.clone().eq(lit(false))),
                [false, false] => None,
            }
        }
        Kind::StringList => {
            let needles: Vec<String> = strings().into_iter().map(str::to_owned).collect();
            (!needles.is_empty()).then(|| list_contains(expr.clone(), needles))
        }
        Kind::Object => None,
    };
    hit.map_or(lit(false), |hit| hit.fill_null(lit(false)))
}

/// Whether the value equals one of `values` (null where the value is null); `None` when there
/// are none.
fn one_of<T>(value: Expr, mut values: Vec<T>) -> Option<Expr>
where
    T: Literal,
    Series: NamedFrom<Vec<T>, [T]>,
{
    match values.len() {
        0 => None,
        1 => values.pop().map(|v| value.eq(lit(v))),
        _ => {
            let set = Series::new(PlSmallStr::EMPTY, values);
            Some(value.is_in(lit(set).implode(false), false))
        }
    }
}

/// A range operator: numbers only; never null.
fn range(resolved: &Resolved, cmp: impl Fn(Expr) -> Expr) -> Expr {
    match resolved {
        Resolved::Value {
            expr,
            kind: Kind::Number,
        } => cmp(expr.clone().cast(DataType::Float64)).fill_null(lit(false)),
        _ => lit(false),
    }
}
