//! The filter compiler: the search-profiles filter language as polars expressions over typed
//! columns, with the service's rules (see the [screener's docs](super)).

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
pub(super) fn compile(filter: &Filter, schema: &Schema) -> Result<Option<Expr>> {
    let mut out = lit(true);
    for clause in &filter.clauses {
        let expr = match clause {
            Clause::And(filters) | Clause::Or(filters) => {
                let is_and = matches!(clause, Clause::And(_));
                let mut acc = lit(is_and);
                for f in filters {
                    let Some(e) = compile(f, schema)? else {
                        return Ok(None);
                    };
                    acc = if is_and { acc.and(e) } else { acc.or(e) };
                }
                acc
            }
            Clause::Field { path, conditions } => {
                if path.is_empty() || path.split('.').any(str::is_empty) {
                    return Err(invalid(path, "expected a dotted field path"));
                }
                let resolved = resolve(path, schema);
                if matches!(resolved, Resolved::Unsupported) {
                    return Ok(None);
                }
                let mut acc = lit(true);
                for c in conditions {
                    acc = acc.and(condition(c, &resolved));
                }
                acc
            }
        };
        out = out.and(expr);
    }
    Ok(Some(out))
}

fn condition(condition: &Condition, resolved: &Resolved) -> Expr {
    match condition {
        Condition::Eq(s) => any_equal(resolved, std::slice::from_ref(s)),
        Condition::In(list) => any_equal(resolved, list),
        Condition::Ne(s) => any_equal(resolved, std::slice::from_ref(s)).not(),
        Condition::Nin(list) => any_equal(resolved, list).not(),
        Condition::Gt(n) => range(resolved, |v| v.gt(lit(*n))),
        Condition::Gte(n) => range(resolved, |v| v.gt_eq(lit(*n))),
        Condition::Lt(n) => range(resolved, |v| v.lt(lit(*n))),
        Condition::Lte(n) => range(resolved, |v| v.lt_eq(lit(*n))),
    }
}

/// Whether the value (or one element of a list) `$eq`s one of the scalars; never null.
fn any_equal(resolved: &Resolved, scalars: &[Scalar]) -> Expr {
    let Resolved::Value { expr, kind } = resolved else {
        return lit(false);
    };
    let mut out = lit(false);
    for s in scalars {
        let hit = match (kind, s) {
            (Kind::Number, Scalar::Num(n)) => {
                Some(expr.clone().cast(DataType::Float64).eq(lit(*n)))
            }
            (Kind::String, Scalar::Str(t)) => Some(expr.clone().eq(lit(t.clone()))),
            (Kind::Timestamp, Scalar::Str(t)) => Some(
                expr.clone()
                    .dt()
                    .to_string(TIMESTAMP_FORMAT)
                    .eq(lit(t.clone())),
            ),
            (Kind::Bool, Scalar::Bool(b)) => Some(expr.clone().eq(lit(*b))),
            (Kind::StringList, Scalar::Str(t)) => Some(list_contains(expr.clone(), t.clone())),
            _ => None,
        };
        if let Some(hit) = hit {
            out = out.or(hit.fill_null(lit(false)));
        }
    }
    out
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
