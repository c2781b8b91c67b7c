//! The query entry (`lake.query()...`) on a lake synced from the `tiny` simulator: each answer
//! equals the analytics call it stands for, selections narrow what they say, and a selection an
//! answer cannot honour is refused.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use dexlake::analytics::pnl::{self, PnlOptions, PnlSource};
use dexlake::analytics::screener::{self, ProfileSnapshot};
use dexlake::analytics::token_metrics::{self, Window};
use dexlake::analytics::{
    BarOptions, EventRule, EventSource, PriceStatsOptions, Selection, TimeRange,
};
use dexlake::prelude::*;
use dexlake::sim::Simulator;
use serde_json::json;

use crate::common;

/// A lake with the swaps and trades of the tiny market's first two tokens and one profile
/// snapshot; the two tokens.
async fn lake(dir: &std::path::Path) -> (Arc<Lake>, Vec<String>) {
    let sim: Simulator = common::tiny_sim(7).await;
    let tokens: Vec<String> = sim.market().catalog().altchain.tokens[..2]
        .iter()
        .map(|t| t.address.clone())
        .collect();
    let lake = Arc::new(Lake::open(dir).expect("lake"));
    let mut jobs = Vec::new();
    for t in &tokens {
        jobs.push(Job::Swaps {
            token: Some(t.clone()),
            wallet: None,
            pool: None,
        });
        jobs.push(Job::Trades {
            token: Some(t.clone()),
            wallet: None,
        });
    }
    let request: SearchRequest =
        serde_json::from_value(json!({"options": {"include_market": true}, "limit": 100}))
            .expect("request");
    jobs.push(Job::AltProfiles { request });
    let syncer = Syncer::new(
        common::sim_client(&sim),
        Arc::clone(&lake),
        SyncConfig::default(),
    );
    let report = syncer.run(&jobs).await;
    assert!(!report.any_failed(), "sync failed: {report:?}");
    sim.shutdown().await;
    (lake, tokens)
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().expect("time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_answer_is_the_analytics_call_it_stands_for() {
    let dir = tempfile::tempdir().expect("dir");
    let (lake, tokens) = lake(dir.path()).await;
    tokio::task::spawn_blocking(move || {
        let lake: &Lake = &lake;
        let (a, b) = (tokens[0].clone(), tokens[1].clone());
        let range = TimeRange {
            from: Some(at("2025-05-20T00:00:00Z")),
            to: None,
        };

        // Bars: time bars with options, and dollar bars.
        let options = BarOptions {
            fill: Fill::Null,
            ..BarOptions::with_width(3_600)
        };
        let expected = dexlake::analytics::bars(
            lake,
            EventSource::Trades,
            &Selection::Tokens(vec![a.clone(), b.clone()]),
            range,
            &options,
        )
        .expect("bars");
        let got = lake
            .query()
            .trades()
            .tokens([&a, &b])
            .since(range.from.expect("from"))
            .bars(Bars::every(3_600).fill(Fill::Null))
            .expect("query bars");
        assert!(got.height() > 0);
        assert!(got.equals_missing(&expected), "time bars differ");
        let dollars = dexlake::analytics::event_bars(
            lake,
            EventSource::Swaps,
            &Selection::Token(a.clone()),
            TimeRange::default(),
            EventRule::UsdVolume(5_000.0),
        )
        .expect("dollar bars");
        let got = lake
            .query()
            .token(&a)
            .bars(Bars::usd_volume(5_000.0))
            .expect("query");
        assert!(got.height() > 0);
        assert!(got.equals_missing(&dollars), "dollar bars differ");

        // Price stats.
        let expected = dexlake::analytics::price_stats(
            lake,
            &Selection::Token(b.clone()),
            PriceStatsOptions::default(),
        )
        .expect("stats");
        let got = lake
            .query()
            .token(&b)
            .price_stats(None)
            .expect("query stats");
        assert_eq!(got.height(), 1);
        assert!(got.equals_missing(&expected), "price stats differ");

        // PnL of one wallet, HIFO; the leaderboard.
        let top = lake.query().leaderboard(3).expect("leaderboard");
        assert_eq!(
            top,
            pnl::leaderboard(PnlSource::Lake(lake), &PnlOptions::default(), 3).expect("direct")
        );
        let wallet = top
            .column("wallet_address")
            .expect("col")
            .str()
            .expect("str")
            .get(0);
        let wallet = wallet.expect("a wallet").to_owned();
        let config = PnlConfig {
            method: CostMethod::Hifo,
            ..PnlConfig::default()
        };
        let query = PnlOptions {
            config,
            ..PnlOptions::of_wallet(&wallet)
        };
        let expected = pnl::pnl_report(PnlSource::Lake(lake), &query).expect("pnl");
        let got = lake
            .query()
            .wallet(&wallet)
            .pnl_report(&config)
            .expect("query pnl");
        assert!(got.ledgers.height() > 0);
        assert!(
            got.ledgers.equals_missing(&expected.ledgers),
            "ledgers differ"
        );
        assert!(
            got.positions.equals_missing(&expected.positions),
            "positions differ"
        );
        let fifo = lake.query().wallet(&wallet).pnl().expect("fifo");
        let query = PnlOptions::of_wallet(&wallet);
        let direct = pnl::pnl_report(PnlSource::Lake(lake), &query).expect("fifo");
        assert!(fifo.equals_missing(&direct.ledgers));
        // Two tokens of every wallet: the rows of those tokens, and only them.
        let both = lake.query().tokens([&a, &b]).pnl().expect("two tokens");
        let all = lake.query().pnl().expect("every token");
        assert_eq!(
            both.height(),
            all.height(),
            "the lake holds only these two tokens"
        );
        let only_a = lake.query().tokens([&a]).pnl().expect("one token");
        let a_rows = all
            .column("token_address")
            .expect("col")
            .str()
            .expect("str")
            .iter()
            .filter(|t| *t == Some(a.as_str()))
            .count();
        assert_eq!(only_a.height(), a_rows);

        // Token metrics.
        let windows = [
            Window::parse("1h").expect("1h"),
            Window::parse("1d").expect("1d"),
        ];
        let expected = token_metrics::token_metrics(lake, &a, &windows, None).expect("metrics");
        let got = lake
            .query()
            .token(&a)
            .token_metrics(&["1h", "1d"], None)
            .expect("query");
        assert_eq!(got.height(), 2);
        assert!(got.equals_missing(&expected), "token metrics differ");

        // The local search.
        let request: SearchRequest = serde_json::from_value(json!({
            "filter": {"market.liquidity": {"$gte": 1000}},
            "sort": {"field": "market.liquidity", "direction": "desc"},
            "limit": 3
        }))
        .expect("request");
        let expected = screener::search(lake, &request, ProfileSnapshot::Latest).expect("search");
        let got = lake.query().search(&request).expect("query search");
        assert!(got.count > 0);
        assert_eq!(got, expected);
    })
    .await
    .expect("no panic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_selects_rows_and_a_selection_an_answer_cannot_honour_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let (lake, tokens) = lake(dir.path()).await;
    tokio::task::spawn_blocking(move || {
        let lake: &Lake = &lake;
        let a = tokens[0].clone();
        // Trades of one token since a time: the polars filter of the same rows.
        let since = at("2025-05-25T00:00:00Z");
        let got = lake
            .query()
            .trades()
            .token(&a)
            .since(since)
            .scan()
            .expect("scan");
        let got = got.collect().expect("collect");
        let all = lake
            .scan(Dataset::Trades)
            .expect("scan")
            .collect()
            .expect("collect");
        let times = all
            .column("block_time")
            .expect("time")
            .cast(&polars::prelude::DataType::Int64);
        let times = times.expect("cast");
        let tokens_col = all
            .column("token_address")
            .expect("token")
            .str()
            .expect("str")
            .clone();
        let expected = times
            .i64()
            .expect("i64")
            .iter()
            .zip(tokens_col.iter())
            .filter(|(t, tok)| {
                *tok == Some(a.as_str()) && t.expect("time") >= since.timestamp_micros()
            })
            .count();
        assert!(expected > 0 && expected < all.height());
        assert_eq!(got.height(), expected);
        // A wallet's swaps: only that wallet's rows.
        let wallet = all
            .column("wallet_address")
            .expect("w")
            .str()
            .expect("str")
            .get(0);
        let wallet = wallet.expect("wallet").to_owned();
        let mine = lake
            .query()
            .wallet(&wallet)
            .scan()
            .expect("scan")
            .collect()
            .expect("rows");
        let wallets = mine
            .column("wallet_address")
            .expect("w")
            .str()
            .expect("str")
            .clone();
        assert!(wallets.iter().all(|w| w == Some(wallet.as_str())));

        let refused = |result: dexlake::Result<DataFrame>, argument: &str| match result {
            Err(Error::InvalidArgument { argument: got, .. }) => assert_eq!(got, argument),
            other => panic!("expected {argument} to be refused, got {other:?}"),
        };
        refused(lake.query().wallet(&wallet).bars(Bars::every(60)), "wallet");
        refused(lake.query().since(since).pnl(), "range");
        refused(lake.query().pool("p").pnl(), "pool");
        refused(lake.query().token(&a).leaderboard(3), "selection");
        refused(
            lake.query()
                .tokens([&a, &tokens[1]])
                .token_metrics(&["1h"], None),
            "token",
        );
        refused(
            lake.query()
                .trades()
                .pool("p")
                .scan()
                .map(|f| f.collect().expect("rows")),
            "pool",
        );
        // Time options on event bars are named, not ignored.
        refused(
            lake.query()
                .token(&a)
                .bars(Bars::ticks(10).fill(Fill::Null)),
            "fill",
        );
        refused(
            lake.query()
                .token(&a)
                .bars(Bars::ticks(10).time_zone("UTC")),
            "time zone",
        );
        refused(
            lake.query()
                .token(&a)
                .bars(Bars::usd_volume(1e6).time_zone("Europe/Paris")),
            "time zone",
        );
        refused(
            lake.query()
                .token(&a)
                .bars(Bars::base_volume(f64::INFINITY)),
            "base volume",
        );
        // Widths that do not fit.
        for width in [i64::MAX, 4_611_686_018_427_387_904, 9_223_372_036_854] {
            refused(lake.query().token(&a).bars(Bars::every(width)), "interval");
        }
        // Empty addresses select nothing: refused, naming the selector.
        refused(lake.query().token("").bars(Bars::every(60)), "token");
        refused(
            lake.query().tokens([a.as_str(), ""]).price_stats(None),
            "token",
        );
        refused(lake.query().pool(" ").bars(Bars::every(60)), "pool");
        refused(lake.query().wallet("").pnl(), "wallet");
        refused(
            lake.query()
                .wallet("")
                .scan()
                .map(|f| f.collect().expect("rows")),
            "wallet",
        );
        refused(lake.query().token("").token_metrics(&["1h"], None), "token");
        // The equity curve's numbers.
        let performance = |equity: EquityConfig| {
            lake.query()
                .wallet(&wallet)
                .performance(&PnlConfig::default(), &equity)
                .map(|p| p.metrics)
        };
        let ratios = |periods_per_year: f64, risk_free: f64| EquityConfig {
            ratios: dexlake::analytics::metrics::RatioConfig {
                periods_per_year,
                risk_free,
            },
            ..EquityConfig::default()
        };
        for p in [0.0, -365.0, f64::NAN, f64::INFINITY] {
            refused(performance(ratios(p, 0.0)), "periods per year");
        }
        for r in [f64::NAN, 1e308, -1.0, f64::NEG_INFINITY] {
            refused(performance(ratios(365.0, r)), "risk-free rate");
        }
        for c in [0.0, -100.0, f64::NAN, f64::INFINITY] {
            let equity = EquityConfig {
                initial_capital: Some(c),
                ..EquityConfig::default()
            };
            refused(performance(equity), "capital");
        }
        refused(
            lake.query()
                .wallet("")
                .performance(&PnlConfig::default(), &EquityConfig::default())
                .map(|p| p.metrics),
            "wallet",
        );
        assert!(performance(ratios(252.0, 0.0001)).is_ok());
        match lake.query().token(&a).search(&SearchRequest::default()) {
            Err(Error::InvalidArgument { argument, .. }) => assert_eq!(argument, "selection"),
            other => panic!("a search with a token selection: {other:?}"),
        }
    })
    .await
    .expect("no panic");
}

/// The rules every door gets from the query: nothing found is `NoData`, listed tokens without
/// events are a warning, strict coverage refuses what the lake does not cover, a wallet without
/// trades is a note, and each answer names the version it read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_carry_their_warnings_version_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let (lake, tokens) = lake(dir.path()).await;
    let version = lake.manifest().unwrap().version;
    assert!(version > 0);

    // One token (`token`) has no `token_address`; a list of one (`tokens`) does.
    let one = lake
        .query()
        .token(&tokens[0])
        .bars(Bars::every(3_600))
        .unwrap();
    assert!(one.column("token_address").is_err());
    let listed = lake
        .query()
        .tokens([&tokens[0]])
        .bars_covered(Bars::every(3_600))
        .unwrap();
    assert_eq!(
        listed.value.column("token_address").unwrap().len(),
        one.height()
    );
    assert!(listed.warnings.is_empty(), "{:?}", listed.warnings);
    assert_eq!(listed.version, version);

    // A list with a token without events: the others' bars, and a warning naming it.
    let mixed = lake
        .query()
        .tokens([tokens[0].as_str(), "NoSuchToken"])
        .bars_covered(Bars::every(3_600))
        .unwrap();
    assert_eq!(mixed.value.height(), one.height());
    let named: Vec<_> = mixed
        .warnings
        .iter()
        .filter(|w| w.kind == WarningKind::NoEvents)
        .collect();
    assert_eq!(named.len(), 1, "{:?}", mixed.warnings);
    assert!(
        named[0]
            .text
            .starts_with("no swaps for NoSuchToken in the lake at ")
    );

    // Nothing at all: NoData, whatever the form asked.
    let none = lake
        .query()
        .token("NoSuchToken")
        .bars(Bars::every(60))
        .unwrap_err();
    assert_eq!(none.kind(), ErrorKind::NoData, "{none}");
    assert!(
        none.to_string()
            .starts_with("no swaps for token NoSuchToken in the lake at ")
    );
    let none = lake
        .query()
        .token(&tokens[0])
        .between(at("2001-01-01T00:00:00Z"), at("2001-01-02T00:00:00Z"))
        .bars_covered(Bars::ticks(10))
        .unwrap_err();
    assert_eq!(none.kind(), ErrorKind::NoData);
    let stats = lake
        .query()
        .token(&tokens[0])
        .price_stats(Some(at("2001-01-01T00:00:00Z")))
        .unwrap_err();
    assert_eq!(stats.kind(), ErrorKind::NoData);
    assert!(stats.to_string().contains("their first is at"), "{stats}");

    // After the last sync the lake fetched nothing: a coverage warning, or with strict an
    // `Incomplete` refusal naming the same lines.
    let early = lake
        .query()
        .token(&tokens[0])
        .between(at("2001-01-01T00:00:00Z"), at("2099-01-01T00:00:00Z"));
    let warned = early.clone().bars_covered(Bars::every(86_400)).unwrap();
    let coverage: Vec<_> = warned
        .warnings
        .iter()
        .filter(|w| w.kind == WarningKind::Coverage)
        .map(|w| w.text.clone())
        .collect();
    assert!(!coverage.is_empty(), "{:?}", warned.warnings);
    assert_eq!(coverage, warned.coverage.warnings());
    match early.strict(true).bars_covered(Bars::every(86_400)) {
        Err(Error::Incomplete { missing }) => assert_eq!(missing, coverage),
        other => panic!("expected Incomplete, got {other:?}"),
    }

    // A wallet without trades: empty tables and a note, not an error.
    let empty = lake
        .query()
        .wallet("NoSuchWallet")
        .pnl_table(&PnlConfig::default(), PnlTable::Positions)
        .unwrap();
    assert_eq!(empty.value.height(), 0);
    assert!(
        empty.warnings.iter().any(|w| w.kind == WarningKind::Empty
            && w.text == "no trades of wallet NoSuchWallet in the lake"),
        "{:?}",
        empty.warnings
    );

    // The tables of one question agree with the report they come from.
    let report = lake
        .query()
        .pnl_report(&PnlConfig {
            lots: true,
            ..PnlConfig::default()
        })
        .unwrap();
    for (table, frame) in [
        (PnlTable::Ledgers, &report.ledgers),
        (PnlTable::Positions, &report.positions),
        (PnlTable::Lots, report.lots.as_ref().unwrap()),
    ] {
        let answer = lake
            .query()
            .pnl_table(&PnlConfig::default(), table)
            .unwrap();
        assert!(answer.value.equals_missing(frame), "{table:?}");
        let mut parts = Vec::new();
        let rows = lake
            .query()
            .pnl_table_to(&PnlConfig::default(), table, |df| {
                parts.push(df);
                Ok(())
            })
            .unwrap()
            .value;
        assert_eq!(rows as usize, frame.height(), "{table:?}");
        let mut stacked = parts.remove(0);
        for p in parts {
            stacked.vstack_mut(&p).unwrap();
        }
        assert!(stacked.equals_missing(frame), "{table:?}");
    }

    // The batched bars equal the whole answer, with the same warnings.
    let whole = lake
        .query()
        .tokens([tokens[1].as_str(), tokens[0].as_str(), "NoSuchToken"]);
    let all = whole.bars_covered(Bars::every(600)).unwrap();
    let mut parts = Vec::new();
    let batched = whole
        .bars_to(Bars::every(600), 1, |df| {
            parts.push(df);
            Ok(())
        })
        .unwrap();
    assert_eq!(batched.value as usize, all.value.height());
    let mut stacked = parts.remove(0);
    for p in parts {
        stacked.vstack_mut(&p).unwrap();
    }
    assert!(stacked.equals_missing(&all.value));
    let sorted = |mut w: Vec<Warning>| {
        w.sort_by(|a, b| a.text.cmp(&b.text));
        w
    };
    assert_eq!(sorted(batched.warnings), sorted(all.warnings));
}
