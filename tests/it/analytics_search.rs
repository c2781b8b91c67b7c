//! Local search over the lake's profile snapshots: the semantics.md section 4 vectors through
//! `filter_expr`, the compiled filter against the engine's `matches` on random profiles, and
//! parity with the simulator's search-profiles over HTTP, page by page. Every random request
//! is checked to take the path (columnar or engine) its sort and filter call for, and only the
//! columnar path's answers count as comparisons: the simulator and the local fallback run the
//! same engine.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use dexlake::Error;
use dexlake::analytics::screener::{self as local, ProfileSnapshot, SearchPath, filter_expr};
use dexlake::api::client::{Client, ClientConfig};
use dexlake::api::models::{AltTokenProfile, Market, TimeWindow, TokenMetadata, WindowMetrics};
use dexlake::api::profile_query::{Filter, SearchRequest};
use dexlake::lake::convert::alt_profiles_to_batch;
use dexlake::lake::{Dataset, Lake};
use dexlake::search as engine;
use dexlake::sim::{Scale, SimConfig, Simulator};
use dexlake::sync::{Job, SyncConfig, Syncer};
use polars::prelude::*;
use proptest::prelude::*;
use serde_json::{Value, json};

pub(crate) fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_748_736_000 + seconds, 0)
        .single()
        .expect("a valid time")
}

pub(crate) fn profile(address: &str) -> AltTokenProfile {
    AltTokenProfile {
        updated_at: at(0),
        synced_at: at(60),
        token_address: address.to_owned(),
        labels: Some(vec!["hot".into()]),
        matched_labels: Some(BTreeMap::from([(
            "hot".to_owned(),
            vec!["volume_5m > 1000".to_owned()],
        )])),
        dynamic_labels: Vec::new(),
        metadata: Some(TokenMetadata {
            name: Some(format!("Token {address}")),
            symbol: Some("TOK".into()),
            verified: Some(true),
            ..TokenMetadata::default()
        }),
        market: Some(Market::default()),
        metrics: BTreeMap::new(),
    }
}

/// Writes the profiles as one snapshot fetched at `fetched_at` into the lake.
pub(crate) fn write(lake: &Lake, profiles: &[AltTokenProfile], fetched_at: DateTime<Utc>) {
    let batch = alt_profiles_to_batch(profiles, fetched_at).expect("batch");
    let mut tx = lake.transaction().expect("transaction");
    tx.write(Dataset::TokenProfiles, batch).expect("stage");
    tx.commit().expect("commit");
}

fn filter(v: Value) -> Filter {
    Filter::from_json(&v).expect("test filters are valid")
}

/// The path a request body calls for, by the screener's rule: the engine when the sort is an
/// object or a list (`market`, `labels`) or the filter reads inside `matched_labels`, else the
/// columnar path.
pub(crate) fn expected_path(body: &Value) -> SearchPath {
    fn reads_inside_matched_labels(filter: &Value) -> bool {
        filter.as_object().is_some_and(|clauses| {
            clauses.iter().any(|(key, value)| match key.as_str() {
                "$and" | "$or" => value
                    .as_array()
                    .is_some_and(|filters| filters.iter().any(reads_inside_matched_labels)),
                path => path.starts_with("matched_labels."),
            })
        })
    }
    let sort = body["sort"]["field"].as_str();
    if matches!(sort, Some("market" | "labels")) || reads_inside_matched_labels(&body["filter"]) {
        SearchPath::Engine
    } else {
        SearchPath::Columnar
    }
}

/// The path the local search takes for the request over the lake's latest snapshot, checked
/// against the path the in-memory search takes over `memory` (the same profiles) when given.
pub(crate) fn local_path(
    lake: &Lake,
    memory: Option<&DataFrame>,
    req: &SearchRequest,
) -> SearchPath {
    let path = local::search_path(lake, req, ProfileSnapshot::Latest).expect("a path");
    if let Some(df) = memory {
        let in_memory = local::search_path_lazy(df.clone().lazy(), req).expect("a path");
        assert_eq!(
            in_memory, path,
            "the in-memory search takes the lake's path"
        );
    }
    path
}

/// Token addresses of the snapshot's rows that `expr` keeps, sorted.
pub(crate) fn kept(lake: &Lake, expr: Expr) -> Vec<String> {
    let df = local::snapshot_frame(lake, ProfileSnapshot::Latest)
        .expect("snapshot")
        .filter(expr)
        .select([col("token_address")])
        .sort(["token_address"], SortMultipleOptions::default())
        .collect()
        .expect("collect");
    let addresses = df
        .column("token_address")
        .expect("column")
        .str()
        .expect("strings")
        .clone();
    (0..addresses.len())
        .map(|i| addresses.get(i).expect("an address").to_owned())
        .collect()
}

/// The six documents of semantics.md section 4. In the lake a path has one type, so document 5
/// (`liquidity: "100"`) holds its string in `metadata.symbol` instead, and the vectors run on
/// `market.liquidity` for the numbers and on `metadata.symbol` for the string.
fn six(lake: &Lake) {
    let mut docs = Vec::new();
    for i in 1..=6 {
        let mut p = profile(&format!("t{i}"));
        match i {
            1 => p.market.as_mut().expect("market").liquidity = Some(100.0),
            2 | 3 | 5 => {}
            4 => p.market = None,
            6 => p.market.as_mut().expect("market").liquidity = Some(50.0),
            _ => unreachable!(),
        }
        if i == 5 {
            p.metadata.as_mut().expect("metadata").symbol = Some("100".into());
        }
        docs.push(p);
    }
    write(lake, &docs, at(3600));
}

#[test]
fn semantics_vectors_through_filter_expr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Lake::open(dir.path()).expect("lake");
    six(&lake);
    let numeric: [(Value, &[&str]); 9] = [
        (json!({"$lt": 200}), &["t1", "t6"]),
        (json!({"$gt": 60}), &["t1"]),
        (json!({"$gte": 50}), &["t1", "t6"]),
        (json!({"$eq": 100}), &["t1"]),
        (json!({"$eq": "100"}), &[]),
        (json!({"$ne": 100}), &["t2", "t3", "t4", "t5", "t6"]),
        (json!({"$in": [100, "100"]}), &["t1"]),
        (json!({"$nin": [100]}), &["t2", "t3", "t4", "t5", "t6"]),
        (json!({"$gt": 40, "$lt": 60}), &["t6"]),
    ];
    for (ops, expected) in numeric {
        let expr = filter_expr(&filter(json!({ "market.liquidity": ops }))).expect("compiles");
        assert_eq!(kept(&lake, expr), expected, "market.liquidity {ops}");
    }
    let string: [(Value, &[&str]); 4] = [
        (json!({"$eq": "100"}), &["t5"]),
        (json!({"$eq": 100}), &[]),
        (json!({"$in": [100, "100"]}), &["t5"]),
        (json!({"$lt": 200}), &[]),
    ];
    for (ops, expected) in string {
        let expr = filter_expr(&filter(json!({ "metadata.symbol": ops }))).expect("compiles");
        assert_eq!(kept(&lake, expr), expected, "metadata.symbol {ops}");
    }
    // Unknown paths are missing; a path through a non-object is missing.
    for path in [
        "market.nothing",
        "nothing",
        "token_address.length",
        "labels.0",
    ] {
        let eq = filter_expr(&filter(json!({ path: {"$eq": 1} }))).expect("compiles");
        assert!(kept(&lake, eq).is_empty(), "{path}");
        let ne = filter_expr(&filter(json!({ path: {"$ne": 1} }))).expect("compiles");
        assert_eq!(kept(&lake, ne).len(), 6, "{path}");
    }
    // Arrays match by element.
    let hot = filter_expr(&filter(json!({"labels": {"$eq": "hot"}}))).expect("compiles");
    assert_eq!(kept(&lake, hot).len(), 6);
    let not_hot = filter_expr(&filter(json!({"labels": {"$nin": ["hot"]}}))).expect("compiles");
    assert!(kept(&lake, not_hot).is_empty());
    // The sort vector, through the whole local search.
    let req: SearchRequest =
        serde_json::from_value(json!({"sort": {"field": "market.liquidity", "direction": "asc"}}))
            .expect("request");
    let page = local::search(&lake, &req, ProfileSnapshot::Latest).expect("search");
    let order: Vec<&str> = page
        .data
        .iter()
        .map(|d| d["token_address"].as_str().expect("address"))
        .collect();
    assert_eq!(order, ["t2", "t3", "t4", "t5", "t6", "t1"]);
}

#[test]
fn bad_requests_are_errors_naming_the_problem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Lake::open(dir.path()).expect("lake");
    six(&lake);
    for (body, member) in [
        (
            json!({"filter": {"market.liquidity": {"$gt": null}}}),
            "market.liquidity",
        ),
        (
            json!({"filter": {"market.liquidity": {"$gt": "0"}}}),
            "market.liquidity",
        ),
        (
            json!({"filter": {"market.liquidity": {"$in": 5}}}),
            "market.liquidity",
        ),
        (
            json!({"filter": {"market.liquidity": {}}}),
            "market.liquidity",
        ),
        (
            json!({"filter": {"market.liquidity": {"$regex": "a"}}}),
            "market.liquidity",
        ),
        (json!({"filter": {"a..b": {"$eq": 1}}}), "a..b"),
    ] {
        let err = serde_json::from_value::<SearchRequest>(body.clone()).expect_err("refused");
        assert!(err.to_string().contains(member), "{body}: {err}");
    }
    let check = |req: SearchRequest, member: &str| match local::search(
        &lake,
        &req,
        ProfileSnapshot::Latest,
    ) {
        Err(Error::InvalidRequest { member: m, .. }) => assert_eq!(m, member),
        other => panic!("expected an invalid {member}, got {other:?}"),
    };
    check(
        SearchRequest {
            limit: Some(0),
            ..SearchRequest::default()
        },
        "limit",
    );
    check(
        SearchRequest {
            limit: Some(101),
            ..SearchRequest::default()
        },
        "limit",
    );
    check(
        SearchRequest {
            cursor: Some("not a cursor!".into()),
            ..SearchRequest::default()
        },
        "cursor",
    );
    let first = local::search(
        &lake,
        &SearchRequest {
            limit: Some(2),
            ..SearchRequest::default()
        },
        ProfileSnapshot::Latest,
    )
    .expect("search");
    let other_sort: SearchRequest = serde_json::from_value(json!({
        "sort": {"field": "market.liquidity", "direction": "desc"},
        "cursor": first.cursor.expect("a second page"),
    }))
    .expect("request");
    check(other_sort, "cursor");
    // A snapshot the lake does not hold names those it holds.
    let err = local::search(&lake, &SearchRequest::default(), ProfileSnapshot::At(at(1)))
        .expect_err("no such snapshot");
    assert!(err.to_string().contains("2025-06-01T01:00:00Z"), "{err}");
    assert_eq!(err.kind(), dexlake::ErrorKind::NoData, "{err}");
    // An empty lake has no snapshot.
    let empty = tempfile::tempdir().expect("tempdir");
    let empty = Lake::open(empty.path()).expect("lake");
    let err = local::search(&empty, &SearchRequest::default(), ProfileSnapshot::Latest)
        .expect_err("no snapshot");
    assert_eq!(err.kind(), dexlake::ErrorKind::NoData, "{err}");
}

#[test]
fn snapshots_latest_by_default_or_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Lake::open(dir.path()).expect("lake");
    let mut old = profile("a");
    old.market.as_mut().expect("market").liquidity = Some(1.0);
    write(&lake, &[old], at(0));
    let mut new = profile("a");
    new.market.as_mut().expect("market").liquidity = Some(2.0);
    write(&lake, &[new, profile("b")], at(86_400 * 2));
    assert_eq!(
        local::snapshots(&lake).expect("snapshots"),
        [at(0), at(86_400 * 2)]
    );
    let req: SearchRequest =
        serde_json::from_value(json!({"options": {"include_market": true}})).expect("request");
    let latest = local::search(&lake, &req, ProfileSnapshot::Latest).expect("latest");
    assert_eq!(latest.count, 2);
    assert_eq!(latest.data[0]["market"]["liquidity"], json!(2.0));
    let first = local::search(&lake, &req, ProfileSnapshot::At(at(0))).expect("named");
    assert_eq!(first.count, 1);
    assert_eq!(first.data[0]["market"]["liquidity"], json!(1.0));
}

#[test]
fn search_path_names_the_engine_for_objects_lists_and_matched_labels() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Lake::open(dir.path()).expect("lake");
    six(&lake);
    let memory = local::snapshot_frame(&lake, ProfileSnapshot::Latest)
        .expect("snapshot")
        .collect()
        .expect("collect");
    let cases = [
        (json!({}), SearchPath::Columnar),
        (
            json!({"sort": {"field": "market.liquidity", "direction": "asc"}}),
            SearchPath::Columnar,
        ),
        (
            json!({"sort": {"field": "nothing.here", "direction": "asc"}}),
            SearchPath::Columnar,
        ),
        (
            json!({"filter": {"labels": {"$eq": "hot"}}}),
            SearchPath::Columnar,
        ),
        (
            json!({"filter": {"matched_labels": {"$eq": 1}}}),
            SearchPath::Columnar,
        ),
        (
            json!({"sort": {"field": "market", "direction": "asc"}}),
            SearchPath::Engine,
        ),
        (
            json!({"sort": {"field": "labels", "direction": "desc"}}),
            SearchPath::Engine,
        ),
        (
            json!({"filter": {"matched_labels.hot": {"$ne": 1}}}),
            SearchPath::Engine,
        ),
        (
            json!({"filter": {"$or": [{"market.liquidity": {"$gt": 1}},
                                      {"$and": [{"matched_labels.hot": {"$eq": 1}}]}]}}),
            SearchPath::Engine,
        ),
    ];
    for (body, path) in cases {
        assert_eq!(expected_path(&body), path, "{body}");
        let req: SearchRequest = serde_json::from_value(body.clone()).expect("request");
        assert_eq!(local_path(&lake, Some(&memory), &req), path, "{body}");
        // Both paths answer, alike in memory and from the lake.
        let here = pages_local(&Source::Lake(&lake), &req);
        assert_eq!(pages_local(&Source::Memory(&memory), &req), here, "{body}");
    }
    // What the search refuses, the path refuses too.
    let refused = SearchRequest {
        limit: Some(0),
        ..SearchRequest::default()
    };
    assert!(local::search_path(&lake, &refused, ProfileSnapshot::Latest).is_err());
    assert!(local::search_path_lazy(memory.clone().lazy(), &refused).is_err());
    let err = local::search_path(&lake, &SearchRequest::default(), ProfileSnapshot::At(at(1)))
        .expect_err("no such snapshot");
    assert_eq!(err.kind(), dexlake::ErrorKind::NoData, "{err}");
}

// ----- The compiled filter against the engine, on random profiles -----

fn window(volume: Option<f64>, trades: Option<i64>) -> WindowMetrics {
    WindowMetrics {
        volume,
        trade_count: trades,
        ..WindowMetrics::default()
    }
}

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(1.0),
        Just(5.0),
        Just(50.0),
        Just(100.0),
        Just(1000.5),
        -1.0e6..1.0e6f64,
    ]
}

fn word() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["hot", "new", "ABC", "100", "TOK", "t1", ""]).prop_map(str::to_owned)
}

fn random_profile() -> impl Strategy<Value = AltTokenProfile> {
    (
        prop::option::of((
            prop::option::of(number()),
            prop::option::of(0i64..200),
            prop::option::of(number()),
        )),
        prop::option::of((
            prop::option::of(word()),
            prop::option::of(word()),
            prop::option::of(any::<bool>()),
        )),
        prop::option::of(prop::sample::subsequence(
            vec!["trending", "hot", "new", "popular"],
            0..=3,
        )),
        prop::option::of((prop::option::of(number()), prop::option::of(0i64..20))),
        prop::option::of(prop::option::of(number())),
        (
            0i64..3,
            prop::sample::select(vec![0i64, 1, 500_000, 123_456, 120_000]),
        ),
    )
        .prop_map(|(market, metadata, labels, m5, h1, (seconds, micros))| {
            let mut p = profile("x");
            p.updated_at = at(seconds) + chrono::Duration::microseconds(micros);
            p.market = market.map(|(liquidity, holders, price)| Market {
                liquidity,
                holders,
                price,
                ..Market::default()
            });
            p.metadata = metadata.map(|(name, symbol, verified)| TokenMetadata {
                name,
                symbol,
                verified,
                ..TokenMetadata::default()
            });
            p.labels = labels.map(|l| l.into_iter().map(str::to_owned).collect());
            if let Some((volume, trades)) = m5 {
                p.metrics
                    .insert(TimeWindow::from_wire("5m"), window(volume, trades));
            }
            if let Some(volume) = h1 {
                p.metrics
                    .insert(TimeWindow::from_wire("1h"), window(volume, None));
            }
            p
        })
}

const PATHS: [&str; 14] = [
    "market.liquidity",
    "market.holders",
    "market.price",
    "market",
    "metadata.name",
    "metadata.symbol",
    "metadata.verified",
    "labels",
    "metrics.5m.volume",
    "metrics.5m.trade_count",
    "metrics.1h.volume",
    "updated_at",
    "token_address",
    "nothing.here",
];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        number().prop_map(|n| json!(n)),
        (0i64..200).prop_map(|n| json!(n)),
        word().prop_map(Value::String),
        any::<bool>().prop_map(Value::Bool),
        Just(json!("2025-06-01T00:00:01Z")),
        Just(json!("2025-06-01T00:00:00.500Z")),
        Just(json!("2025-06-01T00:00:02.123456Z")),
        Just(json!("trending")),
        Just(json!("volume_5m > 1000")),
    ]
}

fn list_item() -> impl Strategy<Value = Value> {
    prop_oneof![
        number().prop_map(|n| json!(n)),
        word().prop_map(Value::String),
        Just(json!("trending"))
    ]
}

fn operators() -> impl Strategy<Value = Value> {
    let op = prop_oneof![
        scalar().prop_map(|v| ("$eq", v)),
        scalar().prop_map(|v| ("$ne", v)),
        number().prop_map(|n| ("$gt", json!(n))),
        number().prop_map(|n| ("$gte", json!(n))),
        number().prop_map(|n| ("$lt", json!(n))),
        number().prop_map(|n| ("$lte", json!(n))),
        prop::collection::vec(list_item(), 0..3).prop_map(|v| ("$in", Value::Array(v))),
        prop::collection::vec(list_item(), 0..3).prop_map(|v| ("$nin", Value::Array(v))),
    ];
    prop::collection::vec(op, 1..3)
        .prop_map(|ops| Value::Object(ops.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

/// Paths of the simulator's profiles that some profiles lack, and one that the columnar
/// evaluation leaves to the engine.
const PARITY_PATHS: [&str; 5] = [
    "metadata.telegram",
    "metadata.discord",
    "metadata.twitter",
    "matched_labels.hot",
    "matched_labels",
];

fn filter_json() -> impl Strategy<Value = Value> {
    filter_over(PATHS.to_vec())
}

fn filter_over(paths: Vec<&'static str>) -> impl Strategy<Value = Value> {
    let leaf =
        (prop::sample::select(paths), operators()).prop_map(|(path, ops)| json!({ path: ops }));
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"$and": v})),
            prop::collection::vec(inner.clone(), 1..3).prop_map(|v| json!({"$or": v})),
            (inner.clone(), inner).prop_map(|(a, b)| {
                let mut m = a.as_object().cloned().unwrap_or_default();
                m.extend(b.as_object().cloned().unwrap_or_default());
                Value::Object(m)
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn compiled_filter_equals_the_engine_row_by_row(
        profiles in prop::collection::vec(random_profile(), 1..12),
        filters in prop::collection::vec(filter_json(), 4),
    ) {
        let profiles: Vec<AltTokenProfile> = profiles
            .into_iter()
            .enumerate()
            .map(|(i, mut p)| {
                p.token_address = format!("t{i:02}");
                p
            })
            .collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let lake = Lake::open(dir.path()).expect("lake");
        write(&lake, &profiles, at(3600));
        let docs: Vec<Value> = profiles
            .iter()
            .map(|p| serde_json::to_value(p).expect("JSON"))
            .collect();
        for f in filters {
            let f = filter(f);
            let expected: Vec<String> = docs
                .iter()
                .filter(|d| engine::matches(&f, d))
                .map(|d| d["token_address"].as_str().expect("address").to_owned())
                .collect();
            let got = kept(&lake, filter_expr(&f).expect("compiles"));
            prop_assert_eq!(got, expected, "filter {}", f.to_json());
        }
    }
}

/// Every page of a request answered by the engine over JSON documents.
fn pages_engine(docs: &[Value], req: &SearchRequest) -> Vec<(u64, Vec<Value>)> {
    let mut req = req.clone();
    let mut out = Vec::new();
    loop {
        let page = engine::search(&req, docs).expect("engine answer");
        out.push((page.count, page.data));
        match page.cursor {
            Some(c) => req.cursor = Some(c),
            None => break,
        }
        assert!(out.len() < 1000, "paging does not end");
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Order, ties, nulls, timestamps as strings and keyset paging of the columnar path equal
    /// the engine's on random profiles. A request the engine answers locally too (a sort on
    /// `market` or `labels`) is compared all the same, but not counted among the cases.
    #[test]
    fn local_pages_equal_the_engines_on_random_profiles(
        profiles in prop::collection::vec(random_profile(), 1..12),
        filter in prop::option::of(filter_json()),
        sort in (prop::sample::select(PATHS.to_vec()), any::<bool>()),
        limit in 1u32..4,
    ) {
        let profiles: Vec<AltTokenProfile> = profiles
            .into_iter()
            .enumerate()
            .map(|(i, mut p)| {
                p.token_address = format!("t{:02}", (i * 7) % 12);
                p
            })
            .collect();
        let mut body = json!({
            "limit": limit,
            "sort": {"field": sort.0, "direction": if sort.1 {"desc"} else {"asc"}},
            "options": {"include_metadata": true, "include_market": true, "include_labels": true,
                        "include_metrics": ["5m", "1h"]},
        });
        if let Some(f) = filter {
            body["filter"] = f;
        }
        let req: SearchRequest = serde_json::from_value(body.clone()).expect("valid request");
        let dir = tempfile::tempdir().expect("tempdir");
        let lake = Lake::open(dir.path()).expect("lake");
        write(&lake, &profiles, at(3600));
        let docs: Vec<Value> = profiles
            .iter()
            .map(|p| serde_json::to_value(p).expect("JSON"))
            .collect();
        let expected = pages_engine(&docs, &req);
        let got = pages_local(&Source::Lake(&lake), &req);
        prop_assert_eq!(got, expected, "request {}", body);
        let path = local_path(&lake, None, &req);
        prop_assert_eq!(path, expected_path(&body), "path of {}", body);
        // The engine on both sides compares nothing of the columnar path: the case is not
        // counted, and another is drawn.
        prop_assume!(path == SearchPath::Columnar);
    }
}

// ----- Parity with the simulator over HTTP -----

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

pub(crate) struct Fixture {
    _dir: tempfile::TempDir,
    pub(crate) lake: Arc<Lake>,
    pub(crate) client: Client,
    pub(crate) sim: Simulator,
}

pub(crate) async fn synced() -> Fixture {
    let sim = Simulator::start(SimConfig {
        seed: 11,
        scale: Scale::Tiny,
        ..SimConfig::default()
    })
    .await
    .expect("simulator");
    let client = Client::new(ClientConfig {
        base_url: sim.base_url().to_owned(),
        api_key: Some("demo-key".into()),
        ..ClientConfig::default()
    })
    .expect("client");
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Arc::new(Lake::open(dir.path()).expect("lake"));
    let request: SearchRequest = serde_json::from_value(json!({
        "options": {
            "include_metadata": true, "include_market": true, "include_labels": true,
            "include_metrics": ["7d", "1d", "6h", "1h", "5m", "1m"],
        },
        "limit": 3,
    }))
    .expect("request");
    let sync = Syncer::new(client.clone(), Arc::clone(&lake), SyncConfig::default());
    let report = sync.run(&[Job::AltProfiles { request }]).await;
    assert!(!report.any_failed(), "{report:?}");
    Fixture {
        _dir: dir,
        lake,
        client,
        sim,
    }
}

/// Every page of a request, following the given side's own cursors.
pub(crate) async fn pages_remote(client: &Client, req: &SearchRequest) -> Vec<(u64, Vec<Value>)> {
    let mut req = req.clone();
    let mut out = Vec::new();
    loop {
        let page = client
            .search_profiles(&req)
            .await
            .expect("simulator answers");
        let data = page
            .data
            .iter()
            .map(|p| serde_json::to_value(p).expect("JSON"))
            .collect();
        out.push((u64::try_from(page.count).expect("count"), data));
        match page.next_cursor() {
            Some(c) => req.cursor = Some(c.to_owned()),
            None => break,
        }
        assert!(out.len() < 1000, "paging does not end");
    }
    out
}

/// Where a local answer comes from: the lake, or a frame in memory.
pub(crate) enum Source<'a> {
    Lake(&'a Lake),
    Memory(&'a DataFrame),
}

pub(crate) fn pages_local(source: &Source<'_>, req: &SearchRequest) -> Vec<(u64, Vec<Value>)> {
    let mut req = req.clone();
    let mut out = Vec::new();
    loop {
        let page = match source {
            Source::Lake(lake) => local::search(lake, &req, ProfileSnapshot::Latest),
            Source::Memory(df) => local::search_lazy((*df).clone().lazy(), &req),
        }
        .expect("local answer");
        out.push((page.count, page.data));
        match page.cursor {
            Some(c) => req.cursor = Some(c),
            None => break,
        }
        assert!(out.len() < 1000, "paging does not end");
    }
    out
}

const SORTS: [&str; 15] = [
    "metadata.telegram",
    "metadata.discord",
    "metadata.twitter",
    "token_address",
    "market.liquidity",
    "market.holders",
    "market.fdv",
    "metadata.symbol",
    "metadata.verified",
    "metrics.5m.volume",
    "metrics.1h.trade_count",
    "metrics.1m.avg_sell_price",
    "updated_at",
    "nothing.here",
    "labels",
];

fn request_json() -> impl Strategy<Value = Value> {
    let paths: Vec<&'static str> = PATHS.iter().chain(&PARITY_PATHS).copied().collect();
    (
        prop::option::of(filter_over(paths)),
        prop::option::of((prop::sample::select(SORTS.to_vec()), any::<bool>())),
        1u32..5,
        any::<bool>(),
        prop::option::of(prop::sample::select(vec!["a", "o", "TOK"])),
    )
        .prop_map(|(filter, sort, limit, sections, text)| {
            let mut body = json!({"limit": limit});
            if let Some(f) = filter {
                body["filter"] = f;
            }
            if let Some((field, desc)) = sort {
                body["sort"] = json!({"field": field, "direction": if desc {"desc"} else {"asc"}});
            }
            if sections {
                body["options"] = json!({
                    "include_metadata": true, "include_market": true, "include_labels": true,
                    "include_metrics": ["5m", "1h"],
                });
                body["dynamic_labels"] = json!({
                    "liquid": {"market.liquidity": {"$gte": 1000}},
                    "busy": {"metrics.1h.trade_count": {"$gt": 0}},
                });
            }
            if let Some(text) = text {
                body["query"] = json!({"text": text});
            }
            body
        })
}

#[test]
fn local_answers_equal_the_simulators_page_by_page() {
    let rt = runtime();
    let fixture = rt.block_on(synced());
    let all = rt.block_on(pages_remote(
        &fixture.client,
        &SearchRequest {
            limit: Some(100),
            ..SearchRequest::default()
        },
    ));
    let profiles = usize::try_from(all[0].0).expect("count");
    assert!(profiles >= 5, "the tiny market has profiles to search");

    let in_memory = local::snapshot_frame(&fixture.lake, ProfileSnapshot::Latest)
        .expect("snapshot")
        .collect()
        .expect("collect");
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    });
    // Cases the columnar path answered with some match: comparisons of the columnar path
    // with the simulator's engine. Cases the engine answered locally too are counted apart.
    let compared = std::cell::Cell::new(0);
    let engine_both = std::cell::Cell::new(0);
    runner
        .run(&request_json(), |body| {
            let req: SearchRequest = serde_json::from_value(body.clone()).expect("valid request");
            let path = local_path(&fixture.lake, Some(&in_memory), &req);
            prop_assert_eq!(path, expected_path(&body), "path of {}", body);
            let remote = rt.block_on(pages_remote(&fixture.client, &req));
            let here = pages_local(&Source::Lake(&fixture.lake), &req);
            let memory = pages_local(&Source::Memory(&in_memory), &req);
            prop_assert_eq!(&memory, &here, "in memory, {}", body);
            prop_assert_eq!(here.len(), remote.len(), "pages of {}", body);
            for (k, (l, r)) in here.iter().zip(&remote).enumerate() {
                prop_assert_eq!(l.0, r.0, "count of page {} of {}", k, body);
                prop_assert_eq!(&l.1, &r.1, "data of page {} of {}", k, body);
            }
            // Paging visits each match once.
            let seen: Vec<&str> = here
                .iter()
                .flat_map(|(_, d)| d.iter())
                .map(|d| d["token_address"].as_str().expect("address"))
                .collect();
            let mut unique = seen.clone();
            unique.sort_unstable();
            unique.dedup();
            prop_assert_eq!(unique.len(), seen.len());
            prop_assert_eq!(u64::try_from(seen.len()).expect("len"), here[0].0);
            match path {
                SearchPath::Columnar if here[0].0 > 0 => compared.set(compared.get() + 1),
                SearchPath::Columnar => {}
                SearchPath::Engine => engine_both.set(engine_both.get() + 1),
            }
            Ok(())
        })
        .expect("local and simulator answers agree");
    assert!(
        compared.get() > 12,
        "too few requests answered by the columnar path matched anything: {} (and {} answered \
         by the engine on both sides)",
        compared.get(),
        engine_both.get()
    );
    rt.block_on(fixture.sim.shutdown());
}

// ----- The command line -----

pub(crate) fn dexlake(lake: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dexlake"))
        .arg("search")
        .arg("--lake")
        .arg(lake)
        .args(args)
        .output()
        .expect("dexlake runs")
}

#[test]
fn command_line_prints_the_library_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Lake::open(dir.path().join("lake")).expect("lake");
    six(&lake);
    let body = json!({
        "filter": {"market.liquidity": {"$gte": 50}},
        "sort": {"field": "market.liquidity", "direction": "desc"},
        "options": {"include_market": true},
        "limit": 1,
    });
    let file = dir.path().join("request.json");
    std::fs::write(&file, body.to_string()).expect("write request");
    let req: SearchRequest = serde_json::from_value(body).expect("request");
    let expected = local::search(&lake, &req, ProfileSnapshot::Latest).expect("search");

    let json_out = dexlake(lake.root(), &["--request", file.to_str().expect("utf-8")]);
    assert!(json_out.status.success(), "{json_out:?}");
    let printed: Value = serde_json::from_slice(&json_out.stdout).expect("JSON output");
    assert_eq!(printed, serde_json::to_value(&expected).expect("JSON"));
    assert_eq!(printed["count"], json!(2));

    let csv = dexlake(
        lake.root(),
        &[
            "--request",
            file.to_str().expect("utf-8"),
            "--format",
            "csv",
        ],
    );
    assert!(csv.status.success(), "{csv:?}");
    let text = String::from_utf8(csv.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("token_address,"), "{text}");
    assert!(lines[0].contains("market.liquidity"), "{text}");
    assert!(lines[1].starts_with("t1,"), "{text}");

    let named = dexlake(
        lake.root(),
        &[
            "--request",
            file.to_str().expect("utf-8"),
            "--snapshot",
            "2025-06-01T00:00:00Z",
        ],
    );
    assert!(!named.status.success());
    let err = String::from_utf8(named.stderr).expect("utf-8");
    assert!(err.contains("2025-06-01T01:00:00Z"), "{err}");
}
