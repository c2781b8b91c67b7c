//! The local search over an EVM chain's profile snapshots (dexlake's extension): EVM profiles
//! of chain 1 synced from the simulator over HTTP, a filter and a sort paged with cursors
//! against a plain row-by-row ranking of the simulator's reference profiles, a text query, the
//! sort by an object through the engine, the refusal of a field an EVM profile lacks, the
//! snapshot rule, and the CLI against the query.

use std::cmp::Ordering;
use std::sync::Arc;

use dexlake::analytics::screener::{ProfileSnapshot, snapshots_of};
use dexlake::api::models::{ChainFamily, EvmTokenProfile, TimeWindow};
use dexlake::api::profile_query::SearchRequest;
use dexlake::lake::Lake;
use dexlake::query::LakeQuery as _;
use dexlake::sim::reference;
use dexlake::sync::{Job, SyncConfig, Syncer};
use dexlake::{Error, ErrorKind};
use serde_json::{Value, json};

use crate::common::{dexlake_cli, dexlake_cli_refused, sim_client, tiny_sim};

fn request(v: Value) -> SearchRequest {
    serde_json::from_value(v).expect("a search request")
}

/// The simulator's reference EVM profiles of chain 1, with the metadata and every window, as
/// the sync asks for them.
fn reference_profiles(sim: &dexlake::sim::Simulator) -> Vec<EvmTokenProfile> {
    let market = sim.market();
    let chain = market.evm_chain(1).expect("the simulator has chain 1");
    (0..chain.tokens.len())
        .map(|i| {
            let token = u32::try_from(i).expect("a small index");
            reference::evm_profile(chain, 1, token, true, TimeWindow::KNOWN)
        })
        .collect()
}

fn trade_count_1d(p: &EvmTokenProfile) -> Option<i64> {
    p.metrics.get(&TimeWindow::D1).and_then(|m| m.trade_count)
}

fn volume_1h(p: &EvmTokenProfile) -> Option<f64> {
    p.metrics.get(&TimeWindow::H1).and_then(|m| m.volume)
}

/// Every page of `request` over chain 1's newest snapshot, following the cursors.
fn all_pages(lake: &Lake, request: &SearchRequest) -> (Vec<u64>, Vec<Value>) {
    let mut counts = Vec::new();
    let mut docs = Vec::new();
    let mut next = request.clone();
    loop {
        let page = lake
            .query()
            .search_evm(1, &next)
            .expect("the EVM search answers");
        counts.push(page.count);
        docs.extend(page.data);
        match page.cursor {
            Some(cursor) => next.cursor = Some(cursor),
            None => return (counts, docs),
        }
        assert!(counts.len() < 100, "the pages end");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evm_profiles_ranked_locally_equal_a_row_by_row_ranking() {
    let sim = tiny_sim(23).await;
    let profiles = reference_profiles(&sim);
    assert!(profiles.len() >= 4, "the tiny chain 1 has a few tokens");
    let tokens: Vec<String> = profiles.iter().map(|p| p.token_address.clone()).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = Arc::new(Lake::open(dir.path()).expect("lake"));
    let sync = Syncer::new(sim_client(&sim), Arc::clone(&lake), SyncConfig::default());
    let report = sync
        .run(&[Job::EvmProfiles {
            chain_id: 1,
            tokens: tokens.clone(),
        }])
        .await;
    assert!(!report.any_failed(), "{report:?}");

    // A threshold that keeps some tokens and leaves others, taken from the data.
    let mut counts: Vec<i64> = profiles.iter().filter_map(trade_count_1d).collect();
    counts.sort_unstable();
    let threshold = counts[counts.len() / 2];
    let req = request(json!({
        "filter": {"metrics.1d.trade_count": {"$gte": threshold}},
        "sort": {"field": "metrics.1h.volume", "direction": "desc"},
        "options": {"include_metadata": true, "include_metrics": ["1h"]},
        "limit": 2,
    }));

    // The ranking, row by row: the kept profiles by 1h volume descending (nulls last), ties
    // by address descending.
    let mut expected: Vec<&EvmTokenProfile> = profiles
        .iter()
        .filter(|p| trade_count_1d(p).is_some_and(|n| n >= threshold))
        .collect();
    expected.sort_by(|a, b| {
        let by_value = match (volume_1h(a), volume_1h(b)) {
            (Some(x), Some(y)) => y.partial_cmp(&x).expect("no NaN volume"),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        by_value.then_with(|| b.token_address.cmp(&a.token_address))
    });
    assert!(
        !expected.is_empty() && expected.len() < profiles.len(),
        "the filter keeps some tokens and leaves others"
    );

    let (counts, docs) = all_pages(&lake, &req);
    assert!(counts.len() > 1, "the answer spans pages");
    assert!(
        counts.iter().all(|&c| c == expected.len() as u64),
        "{counts:?}"
    );
    let got: Vec<&str> = docs
        .iter()
        .map(|d| d["token_address"].as_str().expect("an address"))
        .collect();
    let want: Vec<&str> = expected.iter().map(|p| p.token_address.as_str()).collect();
    assert_eq!(got, want);
    for (doc, profile) in docs.iter().zip(&expected) {
        let symbol = profile.metadata.as_ref().and_then(|m| m.symbol.as_deref());
        assert_eq!(doc["metadata"]["symbol"].as_str(), symbol);
        let volume = doc["metrics"]["1h"]["volume"].as_f64();
        match (volume, volume_1h(profile)) {
            (Some(x), Some(y)) => assert!((x - y).abs() <= 1e-9 * y.abs().max(1.0), "{x} vs {y}"),
            (x, y) => assert_eq!(x, y),
        }
        let windows: Vec<&String> = doc["metrics"]
            .as_object()
            .expect("metrics")
            .keys()
            .collect();
        assert_eq!(windows, ["1h"], "only the requested window");
    }

    // A text query (the default order: token_address ascending).
    let symbol = profiles[0]
        .metadata
        .as_ref()
        .and_then(|m| m.symbol.clone())
        .expect("a symbol");
    let needle: String = symbol.to_lowercase().chars().take(2).collect();
    let req = request(json!({"query": {"text": needle}, "limit": 100}));
    let page = lake
        .query()
        .search_evm(1, &req)
        .expect("the text query answers");
    let mut want: Vec<&str> = profiles
        .iter()
        .filter(|p| {
            let meta = p.metadata.as_ref();
            [
                Some(p.token_address.as_str()),
                meta.and_then(|m| m.name.as_deref()),
                meta.and_then(|m| m.symbol.as_deref()),
            ]
            .into_iter()
            .flatten()
            .any(|t| t.to_lowercase().contains(&needle))
        })
        .map(|p| p.token_address.as_str())
        .collect();
    want.sort_unstable();
    let got: Vec<&str> = page
        .data
        .iter()
        .map(|d| d["token_address"].as_str().expect("an address"))
        .collect();
    assert_eq!(got, want);
    assert_eq!(page.count, want.len() as u64);

    // A sort by an object (`metadata`) is answered by the engine over the snapshot's
    // documents: they are the reference profiles, so the engine over those gives the same page.
    let by_object = request(json!({
        "sort": {"field": "metadata", "direction": "desc"},
        "options": {"include_metadata": true},
        "limit": 100,
    }));
    let page = lake
        .query()
        .search_evm(1, &by_object)
        .expect("the engine answers");
    let reference_docs: Vec<Value> = profiles
        .iter()
        .map(|p| serde_json::to_value(p).expect("JSON"))
        .collect();
    let want = dexlake::search::search(&by_object, &reference_docs).expect("the engine");
    assert_eq!(page, want);
    assert_eq!(page.count, profiles.len() as u64);

    // The CLI prints the query's answer.
    let root = dir.path().to_str().expect("a UTF-8 path");
    let file = dir.path().join("ranked.json");
    let first = request(json!({
        "filter": {"metrics.1d.trade_count": {"$gte": threshold}},
        "sort": {"field": "metrics.1h.volume", "direction": "desc"},
        "options": {"include_metrics": ["1d", "1h"]},
        "limit": 3,
    }));
    std::fs::write(&file, serde_json::to_string(&first).expect("JSON")).expect("write");
    let path = file.to_str().expect("a UTF-8 path");
    let printed: Value = serde_json::from_str(&dexlake_cli(&[
        "--lake",
        root,
        "search",
        "--chain-id",
        "1",
        "--request",
        path,
    ]))
    .expect("the CLI prints JSON");
    let asked = lake
        .query()
        .search_evm(1, &first)
        .expect("the query answers");
    assert_eq!(printed, serde_json::to_value(&asked).expect("JSON"));

    // A field an EVM profile lacks is refused, naming it, by the query and the CLI.
    let lacking = request(json!({
        "filter": {"market.liquidity": {"$gte": 10000}},
        "sort": {"field": "metrics.1h.volume", "direction": "desc"},
    }));
    let e = lake
        .query()
        .search_evm(1, &lacking)
        .expect_err("market is not a field of an EVM profile");
    assert_eq!(e.kind(), ErrorKind::Usage, "{e}");
    assert!(matches!(e, Error::InvalidRequest { ref member, .. } if member == "market.liquidity"));
    assert!(
        e.to_string()
            .contains("is not a field of an EVM token profile"),
        "{e}"
    );
    let sort_lacking =
        request(json!({"sort": {"field": "metrics.1h.liquidity", "direction": "asc"}}));
    let e = lake
        .query()
        .search_evm(1, &sort_lacking)
        .expect_err("a window has no liquidity");
    assert!(e.to_string().contains("`metrics.1h.liquidity`"), "{e}");
    std::fs::write(&file, serde_json::to_string(&lacking).expect("JSON")).expect("write");
    dexlake_cli_refused(
        &[
            "--lake",
            root,
            "search",
            "--chain-id",
            "1",
            "--request",
            path,
        ],
        "market.liquidity",
    );

    // The altchain search and another chain's find no snapshot; they answer nothing else.
    let any = request(json!({"limit": 5}));
    let e = lake.query().search(&any).expect_err("no altchain profiles");
    assert!(
        e.to_string()
            .contains("no altchain token_profiles snapshot"),
        "{e}"
    );
    let e = lake
        .query()
        .search_evm(2, &any)
        .expect_err("no chain 2 profiles");
    assert!(
        e.to_string().contains("no evm-2 token_profiles snapshot"),
        "{e}"
    );

    // The snapshot rule is the altchain's: the newest snapshot, or the one fetched at exactly
    // the time named. A second sync of three tokens is the newest snapshot.
    let report = sync
        .run(&[Job::EvmProfiles {
            chain_id: 1,
            tokens: tokens[..3].to_vec(),
        }])
        .await;
    assert!(!report.any_failed(), "{report:?}");
    let held = snapshots_of(&lake, ChainFamily::Evm(1)).expect("snapshots");
    assert_eq!(held.len(), 2, "{held:?}");
    assert_eq!(lake.query().search_evm(1, &any).expect("latest").count, 3);
    let older = lake
        .query()
        .search_evm_covered(1, &any, ProfileSnapshot::At(held[0]))
        .expect("the first snapshot");
    assert_eq!(older.value.count, tokens.len() as u64);
}
