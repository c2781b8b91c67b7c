//! Unit tests of the search engine: validation, filters, order, paging, text and projection.

use super::text::fewest_edits;
use super::*;
use crate::api::models::SortDirection;
use crate::api::models::TimeWindow;
use crate::api::profile_query::Sort;
use crate::api::profile_query::TextQuery;
use crate::api::profile_query::{Condition, Scalar};
use crate::api::profile_query::{Filter, base64url_decode, base64url_encode};
use proptest::prelude::*;
use serde_json::json;

/// The request member an error names.
fn member(e: &Error) -> &str {
    match e {
        Error::InvalidRequest { member, .. } => member,
        other => panic!("expected an invalid request, got {other}"),
    }
}

/// A full profile as the simulator stores it, with every section and two windows.
fn profile(address: &str, name: &str, symbol: &str) -> Value {
    json!({
        "updated_at": "2026-01-02T03:04:05Z",
        "synced_at": "2026-01-02T03:05:00Z",
        "token_address": address,
        "labels": ["hot"],
        "matched_labels": {"hot": ["volume_5m > 1000"]},
        "metadata": {"name": name, "symbol": symbol, "verified": true},
        "market": {"liquidity": 10, "fdv": 1000},
        "metrics": {
            "7d": {"volume": 700.5, "trade_count": 70},
            "5m": {"volume": 5.25, "trade_count": 5},
        },
    })
}

/// The six documents of semantics.md section 4, as `t1`..`t6`.
fn six() -> Vec<Value> {
    let markets = [
        Some(json!({"liquidity": 100})),
        Some(json!({"liquidity": null})),
        Some(json!({})),
        None,
        Some(json!({"liquidity": "100"})),
        Some(json!({"liquidity": 50})),
    ];
    markets
        .into_iter()
        .enumerate()
        .map(|(i, market)| {
            let mut doc = profile(&format!("t{}", i + 1), "Token", "TOK");
            let map = doc.as_object_mut().expect("profile() builds an object");
            match market {
                Some(m) => map.insert("market".into(), m),
                None => map.remove("market"),
            };
            doc
        })
        .collect()
}

fn filter(v: Value) -> Filter {
    Filter::from_json(&v).expect("test filters are valid")
}

fn addresses(data: &[Value]) -> Vec<&str> {
    data.iter()
        .map(|d| {
            d["token_address"]
                .as_str()
                .expect("projection keeps token_address")
        })
        .collect()
}

fn request(v: Value) -> SearchRequest {
    serde_json::from_value(v).expect("test requests are valid")
}

fn matching(f: &Filter, docs: &[Value]) -> Vec<usize> {
    docs.iter()
        .enumerate()
        .filter(|(_, d)| matches(f, d))
        .map(|(i, _)| i + 1)
        .collect()
}

#[test]
fn lookup_follows_object_keys_only() {
    let doc = profile("a", "n", "s");
    assert_eq!(lookup(&doc, "metrics.5m.volume"), Some(&json!(5.25)));
    assert_eq!(lookup(&doc, "metrics.7d"), doc["metrics"].get("7d"));
    assert_eq!(lookup(&doc, "metrics.1h.volume"), None);
    assert_eq!(lookup(&doc, "token_address.length"), None);
    assert_eq!(lookup(&doc, "labels.0"), None);
    let doc = json!({"market": null, "a": {"b": null}});
    assert_eq!(lookup(&doc, "market.liquidity"), None);
    assert_eq!(lookup(&doc, "a.b"), Some(&Value::Null));
}

#[test]
fn semantics_filter_vectors() {
    let docs = six();
    let cases: [(Value, &[usize]); 10] = [
        (json!({"$lt": 200}), &[1, 6]),
        (json!({"$gt": 60}), &[1]),
        (json!({"$gte": 50}), &[1, 6]),
        (json!({"$eq": 100}), &[1]),
        (json!({"$eq": "100"}), &[5]),
        (json!({"$ne": 100}), &[2, 3, 4, 5, 6]),
        (json!({"$in": [100, "100"]}), &[1, 5]),
        (json!({"$nin": [100]}), &[2, 3, 4, 5, 6]),
        (json!({"$gt": 40, "$lt": 60}), &[6]),
        (json!({"$lte": 100.0, "$eq": 100.0}), &[1]),
    ];
    for (ops, expected) in cases {
        let f = filter(json!({ "market.liquidity": ops }));
        assert_eq!(matching(&f, &docs), expected, "filter {ops}");
    }
    // The same vectors through the whole search, which also counts them.
    let page = search(
        &request(json!({"filter": {"market.liquidity": {"$ne": 100}}})),
        &docs,
    )
    .unwrap();
    assert_eq!(page.count, 5);
    assert_eq!(addresses(&page.data), ["t2", "t3", "t4", "t5", "t6"]);
}

#[test]
fn semantics_bad_operands_are_rejected_naming_the_path() {
    for ops in [
        json!({"$gt": null}),
        json!({"$gt": "0"}),
        json!({"$in": 5}),
        json!({}),
    ] {
        let body = json!({"filter": {"market.liquidity": ops}});
        let err = serde_json::from_value::<SearchRequest>(body).unwrap_err();
        assert!(err.to_string().contains("market.liquidity"), "{ops}: {err}");
        let err = Error::from(Filter::from_json(&json!({"market.liquidity": ops})).unwrap_err());
        assert_eq!(member(&err), "market.liquidity");
    }
}

#[test]
fn semantics_sort_vectors_both_directions() {
    let docs = six();
    let sorted = |direction: &str| {
        let req = request(json!({
            "sort": {"field": "market.liquidity", "direction": direction},
        }));
        addresses(&search(&req, &docs).unwrap().data)
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(sorted("asc"), ["t2", "t3", "t4", "t6", "t1", "t5"]);
    assert_eq!(sorted("desc"), ["t5", "t1", "t6", "t4", "t3", "t2"]);
}

#[test]
fn default_sort_is_token_address_ascending() {
    let docs: Vec<Value> = ["c", "a", "b"]
        .iter()
        .map(|a| profile(a, "n", "s"))
        .collect();
    let page = search(&SearchRequest::default(), &docs).unwrap();
    assert_eq!(addresses(&page.data), ["a", "b", "c"]);
    assert_eq!(page.cursor, None);
}

/// Pages through a request with the given limit and returns the addresses in visiting order,
/// checking `count` on every page.
fn page_through(base: &SearchRequest, limit: u32, docs: &[Value]) -> Vec<String> {
    let mut req = base.clone();
    req.limit = Some(limit);
    let total = search(
        &SearchRequest {
            limit: Some(100),
            ..base.clone()
        },
        docs,
    )
    .unwrap()
    .count;
    let mut seen = Vec::new();
    let mut cursors = Vec::new();
    loop {
        let page = search(&req, docs).unwrap();
        assert_eq!(page.count, total);
        assert!(page.data.len() <= limit as usize);
        seen.extend(
            page.data
                .iter()
                .map(|d| d["metadata"]["name"].as_str().unwrap().to_owned()),
        );
        match page.cursor {
            Some(c) => {
                assert!(!page.data.is_empty(), "a page with a cursor has data");
                assert!(!cursors.contains(&c), "cursor {c} repeats");
                cursors.push(c.clone());
                req.cursor = Some(c);
            }
            None => break,
        }
        assert!(seen.len() <= docs.len(), "paging does not end");
    }
    seen
}

/// The six documents plus ties in value and nulls, named by their `metadata.name`.
fn six_with_ties() -> Vec<Value> {
    let mut docs = six();
    for (address, liquidity) in [("t0", json!(50)), ("t9", json!(null)), ("t7", json!(100.0))] {
        let mut d = profile(address, "", "s");
        d["market"]["liquidity"] = liquidity;
        docs.push(d);
    }
    for d in &mut docs {
        d["metadata"]["name"] = d["token_address"].clone();
    }
    docs
}

#[test]
fn paging_visits_every_document_once_in_unpaged_order() {
    let docs = six_with_ties();
    for direction in ["asc", "desc"] {
        let base = request(json!({
            "sort": {"field": "market.liquidity", "direction": direction},
            "options": {"include_metadata": true},
        }));
        let unpaged = page_through(&base, 100, &docs);
        let expected_asc = ["t2", "t3", "t4", "t9", "t0", "t6", "t1", "t7", "t5"];
        let mut expected: Vec<&str> = expected_asc.to_vec();
        if direction == "desc" {
            expected.reverse();
        }
        assert_eq!(unpaged, expected);
        for limit in [1, 2, 3] {
            assert_eq!(
                page_through(&base, limit, &docs),
                unpaged,
                "{direction} {limit}"
            );
        }
    }
}

#[test]
fn last_page_has_no_cursor_even_when_it_is_full() {
    let docs = six();
    let first = search(&request(json!({"limit": 3})), &docs).unwrap();
    assert_eq!((first.count, first.data.len()), (6, 3));
    let second = search(
        &request(json!({"limit": 3, "cursor": first.cursor.unwrap()})),
        &docs,
    )
    .unwrap();
    assert_eq!(addresses(&second.data), ["t4", "t5", "t6"]);
    assert_eq!((second.count, second.cursor), (6, None));
    let page = search(&request(json!({"limit": 100})), &docs).unwrap();
    assert_eq!((page.count, page.data.len(), page.cursor), (6, 6, None));
}

#[test]
fn count_is_the_number_of_matches_not_the_page_size() {
    let docs = six();
    let page = search(
        &request(json!({"limit": 1, "filter": {"market.liquidity": {"$nin": [100]}}})),
        &docs,
    )
    .unwrap();
    assert_eq!(page.count, 5);
    assert_eq!(page.data.len(), 1);
    assert!(page.cursor.is_some());
    let none = search(
        &request(json!({"filter": {"market.liquidity": {"$gt": 1000}}})),
        &docs,
    )
    .unwrap();
    assert_eq!((none.count, none.data.len(), none.cursor), (0, 0, None));
    let twenty_five: Vec<Value> = (0..25)
        .map(|i| profile(&format!("a{i:02}"), "n", "s"))
        .collect();
    let default = search(&SearchRequest::default(), &twenty_five).unwrap();
    assert_eq!((default.count, default.data.len()), (25, 20));
}

#[test]
fn duplicate_token_addresses_still_page_completely() {
    let docs: Vec<Value> = (0..5)
        .map(|i| profile("same", &format!("d{i}"), "s"))
        .collect();
    let base = request(json!({"options": {"include_metadata": true}}));
    for limit in [1, 2] {
        assert_eq!(
            page_through(&base, limit, &docs),
            ["d0", "d1", "d2", "d3", "d4"]
        );
    }
}

#[test]
fn cursor_keeps_float_values_exactly() {
    // Neighbouring floats differ only in the last bit; a cursor that rounded its value
    // would skip or repeat one of them.
    let x = 0.1f64 + 0.2;
    let values = [
        x,
        f64::from_bits(x.to_bits() + 1),
        f64::from_bits(x.to_bits() - 1),
        1e-300,
    ];
    let docs: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut d = profile(&format!("t{i}"), &format!("t{i}"), "s");
            d["market"]["liquidity"] = json!(v);
            d
        })
        .collect();
    let base = request(json!({
        "sort": {"field": "market.liquidity", "direction": "asc"},
        "options": {"include_metadata": true},
    }));
    assert_eq!(page_through(&base, 1, &docs), ["t3", "t2", "t0", "t1"]);
}

#[test]
fn bad_requests_are_errors_naming_the_member() {
    let docs = six();
    let first = search(&request(json!({"limit": 2})), &docs).unwrap();
    let cursor = first.cursor.unwrap();
    let cases = [
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 101}), "limit"),
        (json!({"cursor": "not a cursor!"}), "cursor"),
        (json!({"cursor": ""}), "cursor"),
        (json!({"cursor": base64url_encode(b"[1,2]")}), "cursor"),
        (
            json!({"cursor": base64url_encode(b"{\"f\":\"token_address\"}")}),
            "cursor",
        ),
        (
            json!({"cursor": cursor, "sort": {"field": "market.fdv", "direction": "asc"}}),
            "cursor",
        ),
        (
            json!({"cursor": cursor, "sort": {"field": "token_address", "direction": "desc"}}),
            "cursor",
        ),
        (
            json!({"sort": {"field": "market.fdv", "direction": "up"}}),
            "sort.direction",
        ),
        (
            json!({"sort": {"field": "market..fdv", "direction": "asc"}}),
            "sort.field",
        ),
        (
            json!({"query": {"text": "x", "fields": ["metadata.name", "market"]}}),
            "query.fields[1]",
        ),
        (
            json!({"query": {"text": "x", "fields": []}}),
            "query.fields",
        ),
    ];
    for (body, path) in cases {
        let err = search(&request(body.clone()), &docs).unwrap_err();
        assert_eq!(member(&err), path, "{body}: {err}");
        assert!(err.to_string().contains(&format!("`{path}`")), "{err}");
    }
    // The same cursor with the sort spelled out is the same sort.
    let explicit = request(json!({
        "cursor": cursor, "sort": {"field": "token_address", "direction": "asc"}
    }));
    assert_eq!(
        addresses(&search(&explicit, &docs).unwrap().data),
        ["t3", "t4", "t5", "t6"]
    );
}

#[test]
fn and_or_nest() {
    let docs = six();
    let f = filter(json!({
        "$or": [
            {"market.liquidity": {"$lt": 60}},
            {"$and": [
                {"market.liquidity": {"$eq": "100"}},
                {"metadata.verified": {"$eq": true}},
            ]},
            {"market": {"$eq": "never"}, "token_address": {"$eq": "t1"}},
        ],
        "token_address": {"$ne": "t6"},
    }));
    assert_eq!(matching(&f, &docs), [5]);
    let f = filter(json!({
        "$and": [
            {"$or": [{"token_address": {"$eq": "t1"}}, {"token_address": {"$eq": "t4"}}]},
            {"$or": [{"market.liquidity": {"$gte": 0}}, {"market": {"$nin": ["x"]}}]},
        ],
    }));
    assert_eq!(matching(&f, &docs), [1, 4]);
    assert!(matches(&Filter::default(), &docs[3]));
}

#[test]
fn window_paths_filter_and_sort() {
    let docs: Vec<Value> = [("a", 3.0), ("b", 1.0), ("c", 2.0)]
        .into_iter()
        .map(|(address, volume)| {
            let mut d = profile(address, address, "s");
            d["metrics"]["5m"]["volume"] = json!(volume);
            d
        })
        .collect();
    let req = request(json!({
        "filter": {"metrics.5m.volume": {"$gte": 1.5}, "metrics.7d.trade_count": {"$eq": 70}},
        "sort": {"field": "metrics.5m.volume", "direction": "desc"},
    }));
    assert_eq!(addresses(&search(&req, &docs).unwrap().data), ["a", "c"]);
    let missing = filter(json!({"metrics.30d.winrate": {"$ne": 1}}));
    assert_eq!(matching(&missing, &docs), [1, 2, 3]);
}

#[test]
fn arrays_match_by_element() {
    let mut docs = vec![
        profile("a", "n", "s"),
        profile("b", "n", "s"),
        profile("c", "n", "s"),
    ];
    docs[1]["labels"] = json!(["cold", "new"]);
    docs[2]["labels"] = json!([1, 5]);
    let cases: [(Value, &[usize]); 6] = [
        (json!({"labels": {"$eq": "hot"}}), &[1]),
        (json!({"labels": {"$ne": "hot"}}), &[2, 3]),
        (json!({"labels": {"$in": ["new", "hot"]}}), &[1, 2]),
        (json!({"labels": {"$nin": ["new", 5]}}), &[1]),
        (json!({"labels": {"$gt": 4}}), &[3]),
        (json!({"labels": {"$gt": 2, "$lt": 2}}), &[3]),
    ];
    for (f, expected) in cases {
        assert_eq!(matching(&filter(f.clone()), &docs), expected, "{f}");
    }
}

#[test]
fn in_lists_follow_the_eq_rules() {
    let docs = [
        json!({"v": 0}),
        json!({"v": -0.0}),
        json!({"v": "0"}),
        json!({"v": true}),
        json!({"v": null}),
        json!({}),
        json!({"v": [2.5, "x"]}),
        json!({"v": {"a": 1}}),
    ];
    let field = |c: Condition| Filter::field("v", c);
    let cases: [(Filter, &[usize]); 6] = [
        (field(Condition::In(vec![Scalar::Num(-0.0)])), &[1, 2]),
        (field(Condition::In(vec![Scalar::Str("0".into())])), &[3]),
        (
            field(Condition::In(vec![
                Scalar::Bool(true),
                Scalar::Num(f64::NAN),
            ])),
            &[4],
        ),
        (field(Condition::In(vec![Scalar::Str("x".into())])), &[7]),
        (
            field(Condition::Nin(vec![Scalar::Num(0.0), Scalar::Num(2.5)])),
            &[3, 4, 5, 6, 8],
        ),
        (field(Condition::In(Vec::new())), &[]),
    ];
    for (f, expected) in cases {
        assert_eq!(matching(&f, &docs), expected, "{}", f.to_json());
    }
    // A list of 100,000 values is prepared once and tested per document by lookups.
    let long: Vec<Scalar> = (0..100_000)
        .map(|i| Scalar::Num(f64::from(i) + 0.5))
        .collect();
    let f = field(Condition::In(long));
    let prepared = FilterMatcher::new(&f);
    let docs: Vec<Value> = (0..100_000)
        .map(|i| json!({"v": f64::from(i) * 0.5}))
        .collect();
    assert_eq!(
        docs.iter().filter(|d| prepared.matches(d)).count(),
        100_000 / 2
    );
}

#[test]
fn compare_values_orders_types_then_values() {
    let ascending = [
        None,
        Some(json!(-1e300)),
        Some(json!(-1)),
        Some(json!(2)),
        Some(json!(2.5)),
        Some(json!("")),
        Some(json!("B")),
        Some(json!("a")),
        Some(json!("é")),
        Some(json!({})),
        Some(json!({"a": 1})),
        Some(json!({"a": 1, "b": 0})),
        Some(json!({"a": "x"})),
        Some(json!({"b": 0})),
        Some(json!([])),
        Some(json!([1, 2])),
        Some(json!([1, "a"])),
        Some(json!([2])),
        Some(json!(false)),
        Some(json!(true)),
    ];
    for (i, a) in ascending.iter().enumerate() {
        for (j, b) in ascending.iter().enumerate() {
            assert_eq!(
                compare_values(a.as_ref(), b.as_ref()),
                i.cmp(&j),
                "{a:?} {b:?}"
            );
        }
    }
    assert_eq!(compare_values(None, Some(&Value::Null)), Ordering::Equal);
    assert_eq!(
        compare_values(Some(&json!(3)), Some(&json!(3.0))),
        Ordering::Equal
    );
    assert_eq!(
        compare_values(Some(&json!(0.0)), Some(&json!(-0.0))),
        Ordering::Equal
    );
}

#[test]
fn text_query_modes() {
    let doc = profile(
        "So11111111111111111111111111111111111111112",
        "Wrapped Solana",
        "wSOL",
    );
    let q = |v: Value| -> TextQuery { serde_json::from_value(v).expect("test queries are valid") };
    let yes = |v: Value| assert!(text_matches(&q(v.clone()), &doc), "{v}");
    let no = |v: Value| assert!(!text_matches(&q(v.clone()), &doc), "{v}");
    // Default: case-insensitive substring of any default field.
    yes(json!({"text": "SOLANA"}));
    yes(json!({"text": "ped sol"}));
    yes(json!({"text": "wsol"}));
    yes(json!({"text": "1111112"}));
    yes(json!({"text": ""}));
    no(json!({"text": "solana wrapped"}));
    // Fields restrict where the text is looked for.
    no(json!({"text": "solana", "fields": ["metadata.symbol"]}));
    yes(json!({"text": "so", "fields": ["metadata.symbol"]}));
    // Autocomplete: prefix of a field.
    yes(json!({"text": "wrap", "autocomplete": true}));
    yes(json!({"text": "WS", "autocomplete": true}));
    no(json!({"text": "solana", "autocomplete": true}));
    // Fuzzy: floor(len / 4) edits against any substring.
    yes(json!({"text": "solama", "fuzzy": true}));
    no(json!({"text": "solama"}));
    yes(json!({"text": "wraped", "fuzzy": true}));
    yes(json!({"text": "wrapXXd sol", "fuzzy": true}));
    no(json!({"text": "wrapXXd", "fuzzy": true}));
    no(json!({"text": "sxl", "fuzzy": true}));
    yes(json!({"text": "sol", "fuzzy": true}));
    // Fuzzy autocomplete: the edits are counted against a prefix.
    yes(json!({"text": "wrapper", "fuzzy": true, "autocomplete": true}));
    no(json!({"text": "solama", "fuzzy": true, "autocomplete": true}));
    // Missing and non-string fields never match.
    let bare = json!({"token_address": 5, "metadata": {"name": null}});
    assert!(!text_matches(&q(json!({"text": ""})), &bare));
    // A text query narrows the search and still counts all its matches.
    let docs = vec![
        profile("a", "Alpha", "ALP"),
        profile("b", "Beta", "BET"),
        profile("c", "Alphabet", "ABC"),
    ];
    let page = search(
        &request(json!({"query": {"text": "alpha"}, "limit": 1})),
        &docs,
    )
    .unwrap();
    assert_eq!((page.count, addresses(&page.data)), (2, vec!["a"]));
}

#[test]
fn fewest_edits_counts_insertions_deletions_and_substitutions() {
    let chars = |s: &str| s.chars().collect::<Vec<_>>();
    let d = |n: &str, h: &str, prefix| fewest_edits(&chars(n), &chars(h), prefix);
    assert_eq!(d("abc", "xxabcxx", false), 0);
    assert_eq!(d("abc", "xxabcxx", true), 2);
    assert_eq!(d("abxc", "abc", false), 1);
    assert_eq!(d("ac", "abc", true), 1);
    // The end is free: "sittin" is the nearest prefix, two substitutions away.
    assert_eq!(d("kitten", "sitting", true), 2);
    assert_eq!(d("kitten", "sitting", false), 2);
    assert_eq!(d("abc", "", false), 3);
    assert_eq!(d("", "abc", true), 0);
    assert_eq!(d("ßx", "sßx", true), 1);
}

#[test]
fn dynamic_labels_in_name_order_on_the_full_document() {
    let docs = six();
    let req = request(json!({
        "dynamic_labels": {
            "zeta_liquid": {"market.liquidity": {"$gte": 50}},
            "alpha_any": {"token_address": {"$ne": ""}},
            "mid_hot": {"labels": {"$eq": "hot"}, "metrics.5m.volume": {"$gt": 5}},
            "none": {"market.liquidity": {"$lt": 0}},
        },
        "sort": {"field": "market.liquidity", "direction": "desc"},
        "limit": 3,
    }));
    let page = search(&req, &docs).unwrap();
    let labels: Vec<&Value> = page.data.iter().map(|d| &d["dynamic_labels"]).collect();
    assert_eq!(addresses(&page.data), ["t5", "t1", "t6"]);
    assert_eq!(labels[0], &json!(["alpha_any", "mid_hot"]));
    assert_eq!(labels[1], &json!(["alpha_any", "mid_hot", "zeta_liquid"]));
    assert_eq!(labels[2], &json!(["alpha_any", "mid_hot", "zeta_liquid"]));
    // Without dynamic labels the member is present and empty.
    let plain = search(&request(json!({"limit": 1})), &docs).unwrap();
    assert_eq!(plain.data[0]["dynamic_labels"], json!([]));
}

#[test]
fn options_project_sections() {
    let docs = six();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    let page = search(&request(json!({"limit": 1})), &docs).unwrap();
    let d = &page.data[0];
    assert_eq!(
        keys(d),
        [
            "updated_at",
            "synced_at",
            "token_address",
            "dynamic_labels",
            "metrics"
        ]
    );
    assert_eq!(d["metrics"], json!({}));

    let req = SearchRequest {
        options: Some(SearchOptions {
            include_metadata: Some(true),
            include_market: Some(true),
            include_labels: Some(true),
            include_metrics: Some(vec![TimeWindow::M5, TimeWindow::Other("30d".into())]),
        }),
        sort: Some(Sort {
            field: "token_address".into(),
            direction: SortDirection::Asc,
        }),
        ..SearchRequest::default()
    };
    let page = search(&req, &docs).unwrap();
    let full = &page.data[0];
    assert_eq!(
        keys(full),
        [
            "updated_at",
            "synced_at",
            "token_address",
            "labels",
            "matched_labels",
            "dynamic_labels",
            "metadata",
            "market",
            "metrics"
        ]
    );
    assert_eq!(full["metrics"], json!({"5m": docs[0]["metrics"]["5m"]}));
    assert_eq!(full["market"], docs[0]["market"]);
    assert_eq!(full["matched_labels"], docs[0]["matched_labels"]);
    // A section the document lacks stays absent; an empty one stays empty.
    assert_eq!(page.data[2]["market"], json!({}));
    assert!(page.data[3].get("market").is_none());

    // False options are the same as omitted ones, and filters still see every section.
    let req = request(json!({
        "options": {"include_market": false, "include_metrics": []},
        "filter": {"market.liquidity": {"$eq": 50}, "metrics.7d.volume": {"$gt": 0}},
    }));
    let page = search(&req, &docs).unwrap();
    assert_eq!(addresses(&page.data), ["t6"]);
    assert!(page.data[0].get("market").is_none());
    assert_eq!(page.data[0]["metrics"], json!({}));
}

#[test]
fn base64url_round_trips_and_rejects_foreign_text() {
    for len in 0..12u8 {
        let bytes: Vec<u8> = (0..len)
            .map(|i| i.wrapping_mul(97).wrapping_add(200))
            .collect();
        let text = base64url_encode(&bytes);
        assert!(!text.contains(['+', '/', '=']));
        assert_eq!(base64url_decode(&text), Some(bytes));
    }
    assert_eq!(base64url_encode(b"foobar"), "Zm9vYmFy");
    assert_eq!(base64url_encode(b"\xfb\xff"), "-_8");
    for bad in ["A", "Zm9vY", "Zm9=", "Zm9v YmFy", "Zh"] {
        assert_eq!(base64url_decode(bad), None, "{bad}");
    }
}

/// A liquidity value for the property test: every type, ties, nulls, missing sections and
/// floats one bit apart.
fn liquidity() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        (-3i64..3).prop_map(|n| Some(json!(n))),
        prop::sample::select(vec![0.1, 0.30000000000000004, 0.3, -0.0, 1e-300, 2.5])
            .prop_map(|x| Some(json!(x))),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |x| x.is_finite())
            .prop_map(|x| Some(json!(x))),
        prop::sample::select(vec!["", "a", "b", "100"]).prop_map(|s| Some(json!(s))),
        any::<bool>().prop_map(|b| Some(json!(b))),
        prop::collection::vec(0i64..2, 0..3).prop_map(|v| Some(json!(v))),
        (0i64..2).prop_map(|n| Some(json!({"k": n}))),
    ]
}

/// Textbook Levenshtein distance between whole strings.
fn levenshtein(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, y) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(x != y))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn fewest_edits_is_the_nearest_substring_or_prefix(
        needle in "[abc]{0,6}",
        haystack in "[abc]{0,8}",
    ) {
        let n: Vec<char> = needle.chars().collect();
        let h: Vec<char> = haystack.chars().collect();
        let nearest_prefix = (0..=h.len()).map(|end| levenshtein(&n, &h[..end])).min().unwrap();
        let nearest_substring = (0..=h.len())
            .flat_map(|start| (start..=h.len()).map(move |end| (start, end)))
            .map(|(start, end)| levenshtein(&n, &h[start..end]))
            .min()
            .unwrap();
        prop_assert_eq!(fewest_edits(&n, &h, true), nearest_prefix);
        prop_assert_eq!(fewest_edits(&n, &h, false), nearest_substring);
    }

    #[test]
    fn paging_matches_the_unpaged_order(
        rows in prop::collection::vec((liquidity(), "[ab]{0,2}", any::<bool>()), 0..40),
        limit in 1u32..6,
        descending in any::<bool>(),
        filtered in any::<bool>(),
    ) {
        let docs: Vec<Value> = rows
            .iter()
            .enumerate()
            .map(|(i, (liq, address, market_present))| {
                let mut d = profile(address, &format!("d{i}"), "s");
                match (liq, market_present) {
                    (Some(v), _) => d["market"]["liquidity"] = v.clone(),
                    (None, true) => d["market"] = json!({}),
                    (None, false) => {
                        d.as_object_mut().expect("profile() builds an object").remove("market");
                    }
                }
                d
            })
            .collect();
        let direction = if descending { "desc" } else { "asc" };
        let mut body = json!({
            "sort": {"field": "market.liquidity", "direction": direction},
            "options": {"include_metadata": true},
        });
        if filtered {
            body["filter"] = json!({"market.liquidity": {"$nin": [0, "a"]}});
        }
        let base = request(body);
        let unpaged = page_through(&base, 100, &docs);
        prop_assert_eq!(&page_through(&base, limit, &docs), &unpaged);

        // The unpaged order is the filter's matches sorted by value, then address, then
        // input position, all in the sort's direction.
        let f = base.filter.clone().unwrap_or_default();
        let mut expected: Vec<usize> = (0..docs.len()).filter(|&i| matches(&f, &docs[i])).collect();
        expected.sort_by(|&i, &j| {
            let a = &docs[i];
            let b = &docs[j];
            let asc = compare_values(lookup(a, "market.liquidity"), lookup(b, "market.liquidity"))
                .then(compare_values(a.get("token_address"), b.get("token_address")))
                .then(i.cmp(&j));
            if descending { asc.reverse() } else { asc }
        });
        let expected: Vec<String> = expected.iter().map(|i| format!("d{i}")).collect();
        prop_assert_eq!(unpaged, expected);
    }
}
