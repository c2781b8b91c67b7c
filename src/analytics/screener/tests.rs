//! Unit tests of the kernels, each against the polars expression it replaces, and of the
//! compiled filters' shape.

use polars::prelude::*;

use serde_json::{Value, json};

use super::filter::{Kind, Resolved, compile, profile_schema, resolve};
use super::kernels::{list_contains, nested_value};
use crate::api::profile_query::Filter;

/// Two frames stacked (two chunks) and sliced, so the kernels see chunk offsets.
fn chunked_and_sliced(make: impl Fn(u64) -> DataFrame) -> DataFrame {
    let mut df = make(0);
    df.vstack_mut(&make(1)).expect("vstack");
    assert_eq!(df.first_col_n_chunks(), 2);
    let height = df.height();
    df.slice(1, height - 2)
}

fn collect_one(df: &DataFrame, expr: Expr) -> Series {
    df.clone()
        .lazy()
        .select([expr.alias("out")])
        .collect()
        .expect("collect")
        .column("out")
        .expect("out")
        .as_materialized_series()
        .clone()
}

/// polars pushes a struct's nulls into its fields when it builds the struct, so the parents'
/// validity that `nested_leaf` combines in is a guard for arrays built otherwise.
#[test]
fn nested_leaf_equals_struct_field_with_parent_nulls() {
    let df = chunked_and_sliced(|seed| {
        let n = 40;
        let values: Vec<Option<f64>> = (0..n)
            .map(|i| (i % 3 != 0).then_some((i + seed) as f64))
            .collect();
        let outer: Vec<bool> = (0..n).map(|i| (i + seed) % 4 != 1).collect();
        let inner: Vec<bool> = (0..n).map(|i| (i + seed) % 5 != 2).collect();
        let base = df![
            "v" => values,
            "w" => (0..n).map(|i| i as f64).collect::<Vec<_>>(),
            "outer" => outer,
            "inner" => inner,
        ]
        .expect("frame");
        base.lazy()
            .select([when(col("outer"))
                .then(as_struct(vec![
                    col("w"),
                    when(col("inner"))
                        .then(as_struct(vec![col("v"), col("w")]))
                        .otherwise(lit(NULL))
                        .alias("a"),
                ]))
                .otherwise(lit(NULL))
                .alias("s")])
            .collect()
            .expect("struct frame")
    });
    let schema = df.schema().as_ref().clone();
    let Resolved::Value { expr, kind } = resolve("s.a.v", &schema) else {
        panic!("s.a.v resolves to a value");
    };
    assert_eq!(kind, Kind::Number);
    let got = collect_one(&df, expr);
    let a = col("s").struct_().field_by_name("a");
    let generic = when(col("s").is_not_null().and(a.clone().is_not_null()))
        .then(a.struct_().field_by_name("v"))
        .otherwise(lit(NULL));
    let expected = collect_one(&df, generic);
    assert!(got.null_count() > 0 && got.null_count() < got.len());
    assert!(got.equals_missing(&expected), "{got:?}\nvs\n{expected:?}");
    // A frame whose leaf has another type than the schema the expression was made for
    // (`filter_expr` compiles against the lake's schema): the value is cast, not misread.
    let as_float = nested_value("s", vec!["a".into(), "w".into()], DataType::Float64);
    let w_int = col("s")
        .struct_()
        .field_by_name("a")
        .struct_()
        .field_by_name("w")
        .cast(DataType::Int64);
    let a_int = df
        .clone()
        .lazy()
        .select([as_struct(vec![w_int.clone().alias("w")]).alias("a")])
        .select([as_struct(vec![col("a")]).alias("s")])
        .collect()
        .expect("an integer leaf");
    let got = collect_one(&a_int, as_float);
    let expected = collect_one(&df, w_int.cast(DataType::Float64));
    assert_eq!(got.dtype(), &DataType::Float64);
    assert!(got.equals_missing(&expected), "{got:?}\nvs\n{expected:?}");
    assert!(matches!(resolve("s.a.x", &schema), Resolved::Missing));
    assert!(matches!(resolve("s.w.v", &schema), Resolved::Missing));
}

#[test]
fn list_contains_equals_polars_list_contains() {
    let df = chunked_and_sliced(|seed| {
        let rows: Vec<Option<Series>> = (0..30u64)
            .map(|i| match (i + seed) % 6 {
                0 => None,
                1 => Some(Series::new("".into(), Vec::<&str>::new())),
                2 => Some(Series::new("".into(), [Some("hot"), Some("new")])),
                3 => Some(Series::new("".into(), [None, Some("hot")])),
                4 => Some(Series::new("".into(), [Some("hop"), None, Some("ho")])),
                _ => Some(Series::new(
                    "".into(),
                    [Some("hotter"), Some("trending"), Some("hot")],
                )),
            })
            .collect();
        let labels: ListChunked = rows.into_iter().collect();
        DataFrame::new(
            30,
            vec![labels.into_series().with_name("labels".into()).into()],
        )
        .expect("frame")
    });
    let got = collect_one(&df, list_contains(col("labels"), vec!["hot".to_owned()]));
    let expected = collect_one(&df, col("labels").list().contains(lit("hot"), false));
    assert!(got.equals_missing(&expected), "{got:?}\nvs\n{expected:?}");
    assert!(got.bool().expect("bool").any());

    // Lists of categories are compared as strings.
    let categories = DataType::List(Box::new(DataType::from_categories(Categories::global())));
    let as_categories = collect_one(&df, col("labels").cast(categories.clone()));
    assert_eq!(as_categories.dtype(), &categories);
    let frame = DataFrame::new(
        as_categories.len(),
        vec![as_categories.with_name("labels".into()).into()],
    )
    .expect("frame");
    let got = collect_one(&frame, list_contains(col("labels"), vec!["hot".to_owned()]));
    assert!(got.equals_missing(&expected), "{got:?}\nvs\n{expected:?}");

    // Several needles: a list holds one of them.
    let needles = ["new", "trending", "absent"].map(str::to_owned).to_vec();
    let got = collect_one(&df, list_contains(col("labels"), needles));
    let expected = collect_one(
        &df,
        col("labels")
            .list()
            .contains(lit("new"), false)
            .or(col("labels").list().contains(lit("trending"), false)),
    );
    assert!(got.equals_missing(&expected), "{got:?}\nvs\n{expected:?}");
    assert!(got.bool().expect("bool").any());
    let none = collect_one(&df, list_contains(col("labels"), Vec::new()));
    let expected = collect_one(&df, col("labels").list().contains(lit("absent"), false));
    assert!(none.equals_missing(&expected), "{none:?}\nvs\n{expected:?}");
}

/// How deeply the expression's printed form nests brackets: the depth of its tree, give or
/// take a constant.
fn nesting(expr: &Expr) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0;
    for c in format!("{expr}").chars() {
        match c {
            '(' | '[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The compiled filter of `make(n)` is as deep for `n = 8` as for `n = wide`.
fn depth_does_not_grow(name: &str, wide: usize, make: impl Fn(usize) -> Value) {
    let schema = profile_schema().expect("schema");
    let depth = |n: usize| {
        let filter = Filter::from_json(&make(n)).expect("a valid filter");
        nesting(
            &compile(&filter, &schema)
                .expect("compiles")
                .expect("columnar"),
        )
    };
    let (narrow, wide) = (depth(8), depth(wide));
    assert_eq!(
        narrow, wide,
        "{name}: depth {narrow} for 8, {wide} for many"
    );
}

#[test]
fn compiled_filters_are_as_deep_for_long_lists_and_many_clauses() {
    let mixed = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    json!(i)
                } else {
                    json!(format!("v{i}"))
                }
            })
            .collect()
    };
    for path in [
        "token_address",
        "market.liquidity",
        "labels",
        "updated_at",
        "metrics.1h.trade_count",
    ] {
        depth_does_not_grow(path, 10_000, |n| json!({path: {"$in": mixed(n)}}));
        depth_does_not_grow(path, 10_000, |n| json!({path: {"$nin": mixed(n)}}));
    }
    // Clauses of every kind, on several paths.
    let clause = |i: usize| match i % 4 {
        0 => json!({"token_address": {"$eq": format!("a{i}")}}),
        1 => json!({"market.liquidity": {"$gt": i}}),
        2 => json!({"labels": {"$ne": format!("l{i}")}}),
        _ => json!({"metrics.1h.volume": {"$gte": i, "$lt": i + 1}}),
    };
    let clauses = |n: usize| (0..n).map(clause).collect::<Vec<_>>();
    depth_does_not_grow("$or", 3_000, |n| json!({"$or": clauses(n)}));
    depth_does_not_grow("$and", 3_000, |n| json!({"$and": clauses(n)}));
    depth_does_not_grow(
        "$or of $or",
        3_000,
        |n| json!({"$or": [{"$or": clauses(n)}, {"$or": clauses(n)}]}),
    );
}
