//! Wide search filters: `$in` and `$nin` lists of 10,000 values and `$and`/`$or` of 3,000
//! clauses, answered alike by the local search (on its columnar path but for one request the
//! engine answers, from the lake's files, in memory and through the command line) and by the
//! simulator over HTTP. Their cost is linear in the request, so
//! they finish within the test run at all (one chain of 10,000 expressions took minutes); and a
//! request that is not a JSON object is refused.

use serde_json::{Value, json};

use super::analytics_search::{
    Source, at, dexlake, expected_path, kept, local_path, pages_local, pages_remote, profile,
    runtime, synced, write,
};
use dexlake::analytics::screener::{self as local, ProfileSnapshot, SearchPath, filter_expr};
use dexlake::api::profile_query::{Filter, SearchRequest};
use dexlake::lake::Lake;
use dexlake::search as engine;

/// The `$in` and `$nin` list length the requests use.
const VALUES: usize = 10_000;
/// The `$and` and `$or` clause count the requests use.
const CLAUSES: usize = 3_000;

/// The wide requests, named, over profiles with these addresses, creation times
/// (`metadata.created_at`) and `market.holders` counts: each matches some profiles and not all (the test checks it).
fn wide_requests(
    addresses: &[String],
    times: &[String],
    holders: &[u64],
) -> Vec<(&'static str, Value)> {
    let some_addresses = || addresses.iter().step_by(2).map(|a| json!(a));
    let options = json!({
        "include_metadata": true, "include_market": true, "include_labels": true,
        "include_metrics": ["5m", "1h"],
    });
    // Strings and numbers mixed, as `[100, "100"]` is: a number never equals a string.
    let fillers = |prefix: &str, n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| {
                if i % 3 == 0 {
                    json!(i)
                } else {
                    json!(format!("{prefix}{i}"))
                }
            })
            .collect()
    };

    let mut in_addresses: Vec<Value> = some_addresses().collect();
    in_addresses.extend(fillers("absent-address-", VALUES - in_addresses.len()));

    let mut nin_labels: Vec<Value> = fillers("absent-label-", VALUES - 1);
    nin_labels.push(json!("hot"));

    // Every other profile's holder count, the others' as strings (a number never equals a
    // string), and negative whole and half numbers.
    let mut in_numbers: Vec<Value> = holders
        .iter()
        .enumerate()
        .map(|(i, &h)| {
            if i % 2 == 0 {
                json!(h)
            } else {
                json!(h.to_string())
            }
        })
        .collect();
    in_numbers.extend((0..VALUES - in_numbers.len()).map(|i| match i % 2 {
        0 => json!(-1 - i as i64),
        _ => json!(-0.5 - i as f64),
    }));

    let mut in_times: Vec<Value> = times.iter().step_by(2).map(|t| json!(t)).collect();
    in_times.extend(
        (0..VALUES - in_times.len()).map(|i| json!(format!("2020-01-01T00:00:{:02}Z", i % 60))),
    );

    // An `$or` of every kind of clause, most matching nothing, and a few addresses.
    let mut or_clauses: Vec<Value> = (0..CLAUSES - 2)
        .map(|i| match i % 5 {
            0 => json!({"token_address": {"$eq": format!("absent-address-{i}")}}),
            1 => json!({"market.liquidity": {"$gt": 1e15 + i as f64}}),
            2 => json!({"labels": {"$eq": format!("absent-label-{i}")}}),
            3 => json!({"metadata.symbol": {"$in": [format!("S{i}"), i]}}),
            _ => json!({"$and": [{"metrics.1h.volume": {"$lt": -1.0 - i as f64}},
                                 {"market.holders": {"$ne": i}}]}),
        })
        .collect();
    or_clauses.push(json!({"token_address": {"$eq": addresses[0]}}));
    or_clauses.push(json!({"token_address": {"$in": [addresses[addresses.len() - 1]]}}));

    // An `$and` of every kind of clause, all holding but the last.
    let mut and_clauses: Vec<Value> = (0..CLAUSES - 1)
        .map(|i| match i % 5 {
            0 => json!({"token_address": {"$ne": format!("absent-address-{i}")}}),
            1 => json!({"market.liquidity": {"$nin": [-1.0 - i as f64, format!("{i}")]}}),
            2 => json!({"labels": {"$ne": format!("absent-label-{i}")}}),
            3 => json!({"metadata.symbol": {"$nin": [format!("S{i}"), i]}}),
            _ => json!({"$or": [{"metrics.1h.volume": {"$gte": -1.0 - i as f64}},
                                {"metrics.1h.volume": {"$nin": [i]}}]}),
        })
        .collect();
    and_clauses.push(json!({"token_address": {"$nin": some_addresses().collect::<Vec<_>>()}}));

    // An `$or` that reads inside `matched_labels`, which the engine answers over documents.
    let mut or_by_engine = or_clauses.clone();
    or_by_engine[0] = json!({"matched_labels.absent": {"$eq": "x"}});

    vec![
        (
            "in_addresses",
            json!({"filter": {"token_address": {"$in": in_addresses}}, "limit": 3,
                   "options": options,
                   "dynamic_labels": {"listed": {"token_address": {"$in": in_addresses}}}}),
        ),
        (
            "nin_labels",
            json!({"filter": {"labels": {"$nin": nin_labels}},
                   "sort": {"field": "market.liquidity", "direction": "desc"}, "limit": 4}),
        ),
        (
            "in_numbers",
            json!({"filter": {"$or": [{"market.holders": {"$in": in_numbers}},
                                      {"metrics.1h.trade_count": {"$in": [-1, -2]}}]},
                   "sort": {"field": "market.holders", "direction": "asc"}}),
        ),
        (
            "in_times",
            json!({"filter": {"metadata.created_at": {"$in": in_times}},
                   "sort": {"field": "metadata.created_at", "direction": "desc"}, "limit": 2}),
        ),
        (
            "or_clauses",
            json!({"filter": {"$or": or_clauses}, "limit": 1, "options": options}),
        ),
        (
            "and_clauses",
            json!({"filter": {"$and": and_clauses},
                   "sort": {"field": "metrics.1h.volume", "direction": "desc"}, "limit": 2}),
        ),
        (
            "or_by_engine",
            json!({"filter": {"$or": or_by_engine}, "limit": 1}),
        ),
    ]
}

#[test]
fn wide_filters_answer_alike_locally_and_in_the_simulator() {
    let rt = runtime();
    let fixture = rt.block_on(synced());
    let all = rt.block_on(pages_remote(
        &fixture.client,
        &serde_json::from_value(
            json!({"limit": 100, "options": {"include_market": true, "include_metadata": true}}),
        )
        .expect("request"),
    ));
    let profiles: Vec<&Value> = all.iter().flat_map(|(_, data)| data).collect();
    let addresses: Vec<String> = profiles
        .iter()
        .map(|p| p["token_address"].as_str().expect("an address").to_owned())
        .collect();
    let times: Vec<String> = profiles
        .iter()
        .filter_map(|p| Some(p["metadata"]["created_at"].as_str()?.to_owned()))
        .collect();
    let holders: Vec<u64> = profiles
        .iter()
        .map(|p| p["market"]["holders"].as_u64().expect("a holder count"))
        .collect();
    assert!(
        addresses.len() >= 5,
        "the tiny market has profiles to search"
    );
    let in_memory = local::snapshot_frame(&fixture.lake, ProfileSnapshot::Latest)
        .expect("snapshot")
        .collect()
        .expect("collect");

    let dir = tempfile::tempdir().expect("tempdir");
    for (name, body) in wide_requests(&addresses, &times, &holders) {
        let req: SearchRequest = serde_json::from_value(body.clone()).expect("a valid request");
        let remote = rt.block_on(pages_remote(&fixture.client, &req));
        let count = remote[0].0;
        assert!(
            count > 0 && count < u64::try_from(addresses.len()).expect("count"),
            "{name} matches some profiles, not all: {count} of {}",
            addresses.len()
        );
        // The columnar path answers every request but the one reading inside
        // `matched_labels`, from the lake and in memory: the simulator's engine is compared with
        // it, not with itself. That one checks the engine's own cost on a wide filter.
        let path = local_path(&fixture.lake, Some(&in_memory), &req);
        assert_eq!(path, expected_path(&body), "{name}");
        assert_eq!(
            path == SearchPath::Engine,
            name == "or_by_engine",
            "{name} takes the {path:?} path"
        );
        let here = pages_local(&Source::Lake(&fixture.lake), &req);
        assert!(here == remote, "{name}: the lake's answer differs");
        let memory = pages_local(&Source::Memory(&in_memory), &req);
        assert!(memory == remote, "{name}: the in-memory answer differs");

        // The command line prints the first page.
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, body.to_string()).expect("write request");
        let out = dexlake(
            fixture.lake.root(),
            &["--request", file.to_str().expect("utf-8")],
        );
        assert!(out.status.success(), "{name}: {out:?}");
        let printed: Value = serde_json::from_slice(&out.stdout).expect("JSON output");
        assert_eq!(printed["count"], json!(count), "{name}");
        assert!(
            printed["data"] == Value::Array(remote[0].1.clone()),
            "{name}: the command line's page differs"
        );
    }
    rt.block_on(fixture.sim.shutdown());
}

#[test]
fn a_request_that_is_not_a_json_object_is_refused() {
    let rt = runtime();
    let fixture = rt.block_on(synced());
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!(
        "{}/v1/altchain/dex/profiles/tokens/search-profiles",
        fixture.sim.base_url()
    );
    for body in [
        "[]",
        "[null, null, null, null, null, 5]",
        "[{\"limit\": 5}]",
    ] {
        // The library refuses it.
        let err = serde_json::from_str::<SearchRequest>(body).expect_err(body);
        assert!(err.to_string().contains("a JSON object"), "{body}: {err}");

        // The command line names the file and what a request is.
        let file = dir.path().join("array.json");
        std::fs::write(&file, body).expect("write request");
        let out = dexlake(
            fixture.lake.root(),
            &["--request", file.to_str().expect("utf-8")],
        );
        assert!(!out.status.success(), "{body}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("array.json") && stderr.contains("a JSON object"),
            "{body}: {stderr}"
        );

        // The simulator answers 400, as for any body that is not a request.
        let status = rt.block_on(async {
            reqwest::Client::new()
                .post(&url)
                .header("content-type", "application/json")
                .header("X-Api-Key", "demo-key")
                .body(body)
                .send()
                .await
                .expect("the simulator answers")
                .status()
                .as_u16()
        });
        assert_eq!(status, 400, "{body}");
    }
    rt.block_on(fixture.sim.shutdown());
}

/// The conditions on one path that are terms of one `$or` or `$and` are merged (equalities into
/// one set, bounds into the loosest or tightest): on ties, `-0`, NaN-free types and missing
/// values the merged filter is the engine's.
#[test]
fn merged_conditions_keep_their_meaning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Lake::open(dir.path()).expect("lake");
    let liquidity = [Some(4.0), Some(5.0), Some(6.0), Some(-0.0), Some(0.0), None];
    let mut profiles: Vec<_> = liquidity
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut p = profile(&format!("t{i}"));
            p.market.as_mut().expect("market").liquidity = *l;
            p
        })
        .collect();
    let mut bare = profile("t6");
    bare.market = None;
    profiles.push(bare);
    write(&lake, &profiles, at(3600));
    let docs: Vec<Value> = profiles
        .iter()
        .map(|p| serde_json::to_value(p).expect("JSON"))
        .collect();
    let conditions = [
        json!({"$gt": 5}),
        json!({"$gte": 5}),
        json!({"$lt": 5}),
        json!({"$lte": 5.0}),
        json!({"$gt": 0}),
        json!({"$lte": -0.0}),
        json!({"$gte": 4, "$lt": 6}),
        json!({"$eq": 5}),
        json!({"$in": [4, "5", 0]}),
        json!({"$ne": 6}),
        json!({"$nin": [-0.0, "6", 6]}),
    ];
    for a in &conditions {
        for b in &conditions {
            for f in [
                json!({"$or": [{"market.liquidity": a}, {"market.liquidity": b}]}),
                json!({"$and": [{"market.liquidity": a}, {"market.liquidity": b}]}),
                json!({"$or": [{"market.liquidity": a}, {"$or": [{"market.liquidity": b}]}]}),
            ] {
                let f = Filter::from_json(&f).expect("a valid filter");
                let expected: Vec<String> = docs
                    .iter()
                    .filter(|d| engine::matches(&f, d))
                    .map(|d| d["token_address"].as_str().expect("address").to_owned())
                    .collect();
                let got = kept(&lake, filter_expr(&f).expect("compiles"));
                assert_eq!(got, expected, "filter {}", f.to_json());
            }
        }
    }
}
