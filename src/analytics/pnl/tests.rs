use super::report::{report, run_report_in};
use super::rows::{quantity_of, usd_value};
use super::*;
use crate::analytics::intern::RANGE;

fn ev(k: i64, side: TradeSide, q: f64, price: f64) -> LedgerEvent {
    LedgerEvent {
        time: k * 1_000_000,
        slot: k,
        id: k,
        side,
        quantity: q,
        usd: q * price,
        fee: 0.0,
    }
}

fn buy(k: i64, q: f64, p: f64) -> LedgerEvent {
    ev(k, TradeSide::Buy, q, p)
}

fn sell(k: i64, q: f64, p: f64) -> LedgerEvent {
    ev(k, TradeSide::Sell, q, p)
}

/// Trades, mark, and the expected (method, realized, unrealized).
type Vector = (Vec<LedgerEvent>, f64, [(CostMethod, f64, f64); 4]);

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn run(events: &[LedgerEvent], method: CostMethod) -> Ledger {
    let config = PnlConfig {
        method,
        ..PnlConfig::default()
    };
    run_ledger(events, &config).expect("no oversell")
}

#[test]
fn dropping_lots_ends_the_position_without_pnl() {
    for method in CostMethod::ALL {
        let config = PnlConfig {
            method,
            ..PnlConfig::default()
        };
        let mut l =
            run_ledger(&[buy(1, 10.0, 1.0), sell(2, 4.0, 2.0)], &config).expect("no oversell");
        l.drop_lots(3_000_000);
        assert_eq!(l.open_quantity(), 0.0, "{method}");
        assert_eq!(l.open_cost(), 0.0, "{method}");
        assert!((l.dropped_quantity - 6.0).abs() < 1e-12, "{method}");
        assert!((l.dropped_cost - 6.0).abs() < 1e-12, "{method}");
        assert!((l.realized - 4.0).abs() < 1e-12, "{method}");
        assert_eq!(l.unrealized(5.0), 0.0, "{method}");
        assert_eq!(l.positions.len(), 1);
        assert_eq!(l.positions[0].closed_at, Some(3_000_000));
        assert_eq!(l.wins_losses(), (1, 0));
        // A later buy starts afresh.
        l.apply(&buy(4, 2.0, 3.0)).expect("buy");
        assert_eq!(l.positions.len(), 2);
        assert_eq!(l.open_quantity(), 2.0);
    }
}

#[test]
fn the_semantics_vectors_for_every_method() {
    use super::CostMethod::*;
    // (trades, mark, [(method, R, U)]) from semantics.md §2.
    let vectors: Vec<Vector> = vec![
        (
            vec![buy(1, 10.0, 1.0), buy(2, 10.0, 2.0), sell(3, 15.0, 3.0)],
            4.0,
            [
                (Fifo, 25.0, 10.0),
                (Lifo, 20.0, 15.0),
                (Hifo, 20.0, 15.0),
                (AverageCost, 22.5, 12.5),
            ],
        ),
        (
            vec![buy(1, 10.0, 150.0), buy(2, 5.0, 155.0), sell(3, 8.0, 160.0)],
            160.0,
            [
                (Fifo, 80.0, 45.0),
                (Lifo, 55.0, 70.0),
                (Hifo, 55.0, 70.0),
                (AverageCost, 200.0 / 3.0, 175.0 / 3.0),
            ],
        ),
        (
            vec![buy(1, 10.0, 1.0), sell(2, 5.0, 2.0), buy(3, 10.0, 4.0)],
            3.0,
            [
                (Fifo, 5.0, 0.0),
                (Lifo, 5.0, 0.0),
                (Hifo, 5.0, 0.0),
                (AverageCost, 5.0, 0.0),
            ],
        ),
        (
            vec![buy(1, 10.0, 2.0), buy(2, 10.0, 1.0), sell(3, 15.0, 3.0)],
            4.0,
            [
                (Fifo, 20.0, 15.0),
                (Lifo, 25.0, 10.0),
                (Hifo, 20.0, 15.0),
                (AverageCost, 22.5, 12.5),
            ],
        ),
        (
            vec![
                buy(1, 10.0, 1.0),
                buy(2, 10.0, 3.0),
                buy(3, 10.0, 2.0),
                sell(4, 15.0, 2.5),
            ],
            2.0,
            [
                (Fifo, 12.5, -5.0),
                (Lifo, 2.5, 5.0),
                (Hifo, -2.5, 10.0),
                (AverageCost, 7.5, 0.0),
            ],
        ),
    ];
    for (i, (events, mark, expected)) in vectors.iter().enumerate() {
        let totals: Vec<f64> = expected.iter().map(|(_, r, u)| r + u).collect();
        for (method, r, u) in expected {
            let l = run(events, *method);
            assert!(
                near(l.realized, *r),
                "V{} {method}: R {} ≠ {r}",
                i + 1,
                l.realized
            );
            assert!(
                near(l.unrealized(*mark), *u),
                "V{} {method}: U {} ≠ {u}",
                i + 1,
                l.unrealized(*mark)
            );
        }
        assert!(
            totals.iter().all(|t| near(*t, totals[0])),
            "V{}: totals differ",
            i + 1
        );
    }
}

#[test]
fn hifo_ties_go_to_the_earliest_lot() {
    let events = [
        buy(1, 5.0, 2.0),
        buy(2, 5.0, 2.0),
        buy(3, 5.0, 1.0),
        sell(4, 5.0, 3.0),
    ];
    let config = PnlConfig {
        method: CostMethod::Hifo,
        lots: true,
        ..PnlConfig::default()
    };
    let l = run_ledger(&events, &config).expect("held");
    let lots = l.lots.expect("lots table");
    assert_eq!(lots.len(), 1);
    assert_eq!(lots[0].buy_id, Some(1));
    assert!(near(lots[0].cost, 10.0));
}

#[test]
fn each_oversell_policy_is_reported() {
    let events = [buy(1, 10.0, 1.0), sell(2, 15.0, 2.0)];
    let zero = run(&events, CostMethod::Fifo);
    assert!(
        near(zero.realized, 30.0 - 10.0),
        "the 5 unmatched have zero cost"
    );
    assert!(near(zero.oversold_quantity, 5.0));
    assert_eq!(zero.ignored_quantity, 0.0);
    assert_eq!(zero.open_quantity(), 0.0);

    let ignore = run_ledger(
        &events,
        &PnlConfig {
            oversell: OversellPolicy::Ignore,
            ..PnlConfig::default()
        },
    )
    .expect("ignored");
    assert!(
        near(ignore.realized, 20.0 - 10.0),
        "only the matched 10 count"
    );
    assert!(near(ignore.ignored_quantity, 5.0));
    assert!(near(ignore.proceeds, 20.0));

    let err = run_ledger(
        &events,
        &PnlConfig {
            oversell: OversellPolicy::Error,
            ..PnlConfig::default()
        },
    )
    .expect_err("oversold");
    assert_eq!(err.id, 2);
    assert_eq!((err.held, err.sold), (10.0, 15.0));
}

#[test]
fn positions_open_and_close_around_dust() {
    let events = [
        buy(1, 10.0, 1.0),
        sell(2, 10.0, 2.0),
        buy(3, 5.0, 2.0),
        sell(4, 5.0, 1.0),
        buy(5, 1.0, 1.0),
    ];
    let l = run(&events, CostMethod::Fifo);
    assert_eq!(l.positions.len(), 3);
    assert_eq!(l.wins_losses(), (1, 1));
    assert_eq!(l.positions[2].closed_at, None);
    // Holding: 10 units for 1 s and 5 units for 1 s.
    assert_eq!(l.holding_seconds(), Some(1.0));
    // With a dust of 2, the last buy of 1 opens nothing.
    let dusty = run_ledger(
        &events,
        &PnlConfig {
            dust: 2.0,
            ..PnlConfig::default()
        },
    )
    .expect("held");
    assert_eq!(dusty.positions.len(), 2);
}

#[test]
fn a_sell_of_a_rounded_balance_closes_the_position() {
    let held = 0.1 + 0.2;
    let events = [buy(1, 0.1, 1.0), buy(2, 0.2, 1.0), sell(3, held, 2.0)];
    for method in CostMethod::ALL {
        let l = run(&events, method);
        assert_eq!(l.open_quantity(), 0.0, "{method}");
        assert_eq!(l.oversold_quantity, 0.0, "{method}");
        assert_eq!(l.positions.len(), 1);
        assert!(l.positions[0].closed_at.is_some(), "{method}");
        // Closed: its unrealized PnL is zero, and not the negative zero a table would print.
        assert!(
            l.unrealized(3.0) == 0.0 && l.unrealized(3.0).is_sign_positive(),
            "{method}: {}",
            l.unrealized(3.0)
        );
    }
}

#[test]
fn method_and_mark_parse_or_fail_clearly() {
    assert_eq!("LIFO".parse::<CostMethod>().ok(), Some(CostMethod::Lifo));
    assert_eq!(
        "avg".parse::<CostMethod>().ok(),
        Some(CostMethod::AverageCost)
    );
    let e = "median".parse::<CostMethod>().expect_err("unknown");
    assert!(e.to_string().contains("fifo, lifo, hifo or avg"), "{e}");
    assert_eq!("latest".parse::<Mark>().ok(), Some(Mark::Latest));
    assert_eq!("2.5".parse::<Mark>().ok(), Some(Mark::Price(2.5)));
    assert!("-1".parse::<Mark>().is_err());
    assert!("NaN".parse::<Mark>().is_err());
}

fn frame(rows: &[(&str, &str, &str, f64, f64, i64, i64)]) -> DataFrame {
    // (wallet, token, direction, amount, price, time seconds, id)
    let n = rows.len();
    DataFrame::new(
        n,
        vec![
            Column::new(
                "wallet_address".into(),
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            ),
            Column::new(
                "token_address".into(),
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            ),
            Column::new(
                "direction".into(),
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            ),
            Column::new(
                "token_amount".into(),
                rows.iter().map(|r| r.3).collect::<Vec<_>>(),
            ),
            Column::new(
                "usd_amount".into(),
                rows.iter().map(|r| r.3 * r.4).collect::<Vec<_>>(),
            ),
            Column::new(
                "token_price".into(),
                rows.iter().map(|r| r.4).collect::<Vec<_>>(),
            ),
            Column::new(
                "block_time".into(),
                rows.iter().map(|r| r.5 * 1_000_000).collect::<Vec<_>>(),
            ),
            Column::new(
                "block_slot".into(),
                rows.iter().map(|r| r.5).collect::<Vec<_>>(),
            ),
            Column::new("id".into(), rows.iter().map(|r| r.6).collect::<Vec<_>>()),
        ],
    )
    .expect("frame")
}

#[test]
fn frames_give_the_same_ledgers_whatever_the_row_order() {
    let rows = [
        ("w1", "A", "buy", 10.0, 1.0, 10, 1),
        ("w1", "A", "buy", 10.0, 2.0, 20, 2),
        ("w2", "A", "buy", 1.0, 4.0, 40, 4),
        ("w1", "A", "sell", 15.0, 3.0, 30, 3),
        ("w1", "B", "buy", 2.0, 5.0, 10, 5),
    ];
    let mut reversed = rows;
    reversed.reverse();
    let config = PnlConfig::default();
    let options = with(&config);
    let a = pnl_report(frames(&frame(&rows), None), &options).expect("pnl");
    let b = pnl_report(frames(&frame(&reversed), None), &options).expect("pnl");
    assert!(a.ledgers.equals_missing(&b.ledgers));
    let w1a = a.ledgers.head(Some(1));
    let r = w1a
        .column("realized_pnl")
        .and_then(|c| c.f64().map(|c| c.get(0)))
        .expect("col");
    let u = w1a
        .column("unrealized_pnl")
        .and_then(|c| c.f64().map(|c| c.get(0)))
        .expect("col");
    // V1 at the latest price of A (w2's buy at 4).
    assert_eq!((r, u), (Some(25.0), Some(10.0)));
    let q = PnlOptions::of_wallet("nobody");
    let none = pnl_report(frames(&frame(&rows), None), &q).expect("pnl");
    assert_eq!(none.ledgers.height(), 0);
}

#[test]
fn a_report_built_chunk_by_chunk_equals_the_whole_report() {
    let wallets: Vec<String> = (0..23).map(|w| format!("w{w:02}")).collect();
    let tokens = ["A", "B", "C"];
    let mut rows = Vec::new();
    for (i, w) in wallets.iter().enumerate() {
        for (j, t) in tokens.iter().enumerate() {
            for e in 0..(1 + (i + j) % 5) {
                let id = (i * 100 + j * 10 + e) as i64;
                let sell = (i + j + e) % 3 == 2;
                rows.push((
                    w.as_str(),
                    *t,
                    if sell { "sell" } else { "buy" },
                    1.0 + ((i * 7 + e * 3) % 11) as f64,
                    0.5 + ((j * 5 + e) % 7) as f64,
                    id,
                    id,
                ));
            }
        }
    }
    let set = ledger_set(frames(&frame(&rows), None), &PnlOptions::default()).expect("set");
    assert!(set.len() > 60);
    let config = PnlConfig {
        lots: true,
        ..PnlConfig::default()
    };
    let whole = report(&set, &set.run(&config).expect("run"), &config).expect("report");
    for chunk in [1, 7, 64, 1000] {
        let chunked = run_report_in(&set, &config, chunk, true).expect("chunked");
        assert!(
            chunked.ledgers.equals_missing(&whole.ledgers),
            "chunk {chunk}"
        );
        assert!(
            chunked.positions.equals_missing(&whole.positions),
            "chunk {chunk}"
        );
        let (a, b) = (
            chunked.lots.expect("lots"),
            whole.lots.as_ref().expect("lots"),
        );
        assert!(a.equals_missing(b), "chunk {chunk}");
    }
    let empty = ledger_set(frames(&frame(&[]), None), &PnlOptions::default()).expect("set");
    let none = run_report_in(&empty, &config, 7, true).expect("empty");
    assert_eq!(none.ledgers.height(), 0);
    assert_eq!(none.ledgers.width(), PnlReport::LEDGER_COLUMNS.len());
}

/// Chunk by chunk, without positions (each ledger's row taken as it runs) or with them (the
/// ledgers kept), an oversell under the error policy stops the report with the first oversold
/// ledger in ledger order, wherever the chunks fall; with the other policies every ledger has
/// its row.
#[test]
fn the_first_oversold_ledger_is_the_error_whatever_the_chunks() {
    let wallets: Vec<String> = (0..40).map(|w| format!("w{w:02}")).collect();
    let mut rows = Vec::new();
    for (i, w) in wallets.iter().enumerate() {
        let id = i as i64 * 10;
        rows.push((w.as_str(), "A", "buy", 2.0, 1.0, id, id));
        // w07 and w31 sell more than they bought.
        let sold = if i == 7 || i == 31 { 3.0 } else { 1.0 };
        rows.push((w.as_str(), "A", "sell", sold, 1.5, id + 1, id + 1));
    }
    let set = ledger_set(frames(&frame(&rows), None), &PnlOptions::default()).expect("set");
    assert_eq!(set.len(), 40);
    let strict = PnlConfig {
        oversell: OversellPolicy::Error,
        ..PnlConfig::default()
    };
    for (chunk, positions) in [1, 5, 8, 64]
        .into_iter()
        .flat_map(|c| [(c, false), (c, true)])
    {
        match run_report_in(&set, &strict, chunk, positions) {
            Err(Error::Oversell {
                wallet, trade_id, ..
            }) => assert_eq!(
                (wallet.as_str(), trade_id),
                ("w07", 71),
                "chunk {chunk}, positions {positions}"
            ),
            other => panic!("chunk {chunk}, positions {positions}: {other:?}"),
        }
    }
    let allowed = run_report_in(&set, &PnlConfig::default(), 8, false).expect("allowed");
    assert_eq!(allowed.ledgers.height(), 40);
}

/// A trade row of [`grouping_equals_a_plain_grouping`]: wallet, token (`None` for null),
/// direction, amount, USD, price, time, slot, id.
type TradeRow = (
    Option<String>,
    Option<String>,
    &'static str,
    f64,
    f64,
    f64,
    i64,
    i64,
    i64,
);

fn trade_frame(rows: &[TradeRow]) -> DataFrame {
    let f = |name: &str, g: fn(&TradeRow) -> f64| {
        Column::new(name.into(), rows.iter().map(g).collect::<Vec<_>>())
    };
    let i = |name: &str, g: fn(&TradeRow) -> i64| {
        Column::new(name.into(), rows.iter().map(g).collect::<Vec<_>>())
    };
    DataFrame::new(
        rows.len(),
        vec![
            Column::new(
                "wallet_address".into(),
                rows.iter().map(|r| r.0.as_deref()).collect::<Vec<_>>(),
            ),
            Column::new(
                "token_address".into(),
                rows.iter().map(|r| r.1.as_deref()).collect::<Vec<_>>(),
            ),
            Column::new(
                "direction".into(),
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            ),
            f("token_amount", |r| r.3),
            f("usd_amount", |r| r.4),
            f("token_price", |r| r.5),
            i("block_time", |r| r.6),
            i("block_slot", |r| r.7),
            i("id", |r| r.8),
        ],
    )
    .expect("frame")
}

/// The ledgers of `rows` grouped the plain way: a sorted map from (wallet, token) to the
/// events in row order, each ledger then sorted by event key (stably).
fn plain_grouping(
    rows: &[TradeRow],
    query: &PnlOptions,
) -> (Vec<String>, Vec<String>, Vec<usize>, Vec<LedgerEvent>) {
    let mut map: std::collections::BTreeMap<(String, String), Vec<LedgerEvent>> =
        std::collections::BTreeMap::new();
    for r in rows {
        let side = match r.2 {
            "buy" => TradeSide::Buy,
            "sell" => TradeSide::Sell,
            _ => continue,
        };
        let (w, t) = (
            r.0.clone().unwrap_or_default(),
            r.1.clone().unwrap_or_default(),
        );
        if query.wallets.as_ref().is_some_and(|ws| !ws.contains(&w))
            || query.token.as_ref().is_some_and(|q| *q != t)
        {
            continue;
        }
        map.entry((w, t)).or_default().push(LedgerEvent {
            time: r.6,
            slot: r.7,
            id: r.8,
            side,
            quantity: quantity_of(r.3),
            usd: usd_value(r.4, r.5, r.3),
            fee: 0.0,
        });
    }
    let (mut wallets, mut tokens, mut offsets, mut events) =
        (Vec::new(), Vec::new(), vec![0], Vec::new());
    for ((w, t), mut e) in map {
        e.sort_by_key(LedgerEvent::order_key);
        wallets.push(w);
        tokens.push(t);
        events.extend(e);
        offsets.push(events.len());
    }
    (wallets, tokens, offsets, events)
}

#[test]
fn grouping_equals_a_plain_grouping() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    // (rows, wallets, tokens, nulls): more rows than one range of the parallel passes and
    // enough wallets to grow the interning tables (the wallet x token grid counted
    // directly); then few rows over a grid too large for that (the pairs interned), with
    // null wallets and tokens, and names of every length up to 40 bytes.
    for (n, wallets, tokens, nulls) in [
        (RANGE + 5_000, 3_000usize, 40usize, false),
        (6_000, 20_000, 100, true),
    ] {
        let name = |p: char, k: usize| -> String {
            let mut s = format!("{p}{k}");
            s.extend(std::iter::repeat_n('x', k % 41));
            s
        };
        let mut rows: Vec<TradeRow> = (0..n)
            .map(|i| {
                let w = rng.random_range(0..wallets);
                let t = rng.random_range(0..tokens);
                let null = nulls && rng.random_bool(0.02);
                let time = rng.random_range(0..(n as i64 / 4));
                (
                    (!null || rng.random_bool(0.5)).then(|| name('w', w)),
                    (!null || rng.random_bool(0.5)).then(|| name('t', t)),
                    ["buy", "sell", "buy", "transfer"][rng.random_range(0..4usize)],
                    rng.random_range(0.5..100.0),
                    if rng.random_bool(0.1) {
                        f64::NAN
                    } else {
                        rng.random_range(0.1..1_000.0)
                    },
                    rng.random_range(0.01..10.0),
                    time,
                    time / 2,
                    rng.random_range(0..(i as i64 / 2 + 1)),
                )
            })
            .collect();
        // Wallets and tokens seen once.
        rows.push((
            Some("once".into()),
            Some("only".into()),
            "buy",
            1.0,
            1.0,
            1.0,
            5,
            5,
            5,
        ));
        let queries = [
            PnlOptions::default(),
            PnlOptions {
                wallets: Some(vec![name('w', 7), name('w', 8), "once".into()]),
                ..PnlOptions::default()
            },
            PnlOptions {
                token: Some(name('t', 3)),
                ..PnlOptions::default()
            },
        ];
        for query in &queries {
            let set = ledger_set(frames(&trade_frame(&rows), None), query).expect("set");
            let (w, t, o, e) = plain_grouping(&rows, query);
            let names = |f: fn(&LedgerSet, usize) -> &str| -> Vec<String> {
                (0..set.len()).map(|k| f(&set, k).to_owned()).collect()
            };
            assert_eq!(names(LedgerSet::wallet), w, "{n} rows");
            assert_eq!(names(LedgerSet::token), t, "{n} rows");
            assert_eq!(set.offsets, o, "{n} rows");
            assert!(set.events == e, "{n} rows");
        }
    }
}

/// wallet, swap type, token in, token out, amount in, amount out, USD in, USD out, time.
type SwapRow = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    f64,
    f64,
    f64,
    f64,
    i64,
);

#[test]
fn swaps_fill_in_for_wallets_without_trades() {
    // w9 has only swaps: buy 10 A for 10 USD, swap 4 A into 2 B (token_token, 1 USD of
    // fee), sell 2 B for 3 USD. w1 has a trade and its swaps are left out.
    let rows: [SwapRow; 4] = [
        ("w9", "quote_token", "USD", "A", 10.0, 10.0, 10.0, 10.0, 1),
        ("w9", "token_token", "A", "B", 4.0, 2.0, 5.0, 4.0, 2),
        ("w9", "token_quote", "B", "USD", 2.0, 3.0, 3.0, 3.0, 3),
        ("w1", "quote_token", "USD", "A", 1.0, 1.0, 1.0, 1.0, 4),
    ];
    let n = rows.len();
    let swaps = DataFrame::new(
        n,
        vec![
            Column::new(
                "wallet_address".into(),
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            ),
            Column::new(
                "swap_type".into(),
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            ),
            Column::new(
                "token_address_in".into(),
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            ),
            Column::new(
                "token_address_out".into(),
                rows.iter().map(|r| r.3).collect::<Vec<_>>(),
            ),
            Column::new(
                "token_amount_in".into(),
                rows.iter().map(|r| r.4).collect::<Vec<_>>(),
            ),
            Column::new(
                "token_amount_out".into(),
                rows.iter().map(|r| r.5).collect::<Vec<_>>(),
            ),
            Column::new(
                "token_price_in".into(),
                rows.iter().map(|r| r.6 / r.4).collect::<Vec<_>>(),
            ),
            Column::new(
                "token_price_out".into(),
                rows.iter().map(|r| r.7 / r.5).collect::<Vec<_>>(),
            ),
            Column::new(
                "usd_amount_in".into(),
                rows.iter().map(|r| r.6).collect::<Vec<_>>(),
            ),
            Column::new(
                "usd_amount_out".into(),
                rows.iter().map(|r| r.7).collect::<Vec<_>>(),
            ),
            Column::new(
                "block_time".into(),
                rows.iter().map(|r| r.8 * 1_000_000).collect::<Vec<_>>(),
            ),
            Column::new(
                "block_slot".into(),
                rows.iter().map(|r| r.8).collect::<Vec<_>>(),
            ),
            Column::new("id".into(), rows.iter().map(|r| r.8).collect::<Vec<_>>()),
        ],
    )
    .expect("swaps");
    let trades = frame(&[("w1", "A", "buy", 1.0, 1.0, 9, 9)]);
    let report = pnl_report(frames(&trades, Some(&swaps)), &PnlOptions::default()).expect("pnl");
    let df = &report.ledgers;
    let key = |k: usize| {
        let s = |c: &str| {
            df.column(c)
                .and_then(|c| c.str().map(|c| c.get(k).map(str::to_owned)))
                .expect(c)
        };
        (s("wallet_address"), s("token_address"))
    };
    let f = |c: &str, k: usize| {
        df.column(c)
            .and_then(|c| c.f64().map(|c| c.get(k)))
            .expect(c)
    };
    assert_eq!(
        df.height(),
        3,
        "w1/A from its trade, w9/A and w9/B from swaps"
    );
    assert_eq!(key(0), (Some("w1".into()), Some("A".into())));
    assert_eq!(
        f("buy_cost", 0),
        Some(1.0),
        "w1's swap is not counted twice"
    );
    // w9/A: bought 10 for 10, sold 4 for 5 (the input's value) with a fee of 1.
    assert_eq!(key(1), (Some("w9".into()), Some("A".into())));
    assert_eq!(f("realized_pnl", 1), Some(1.0));
    assert_eq!(f("fees", 1), Some(1.0));
    assert_eq!(f("realized_pnl_net", 1), Some(0.0));
    assert_eq!(f("open_quantity", 1), Some(6.0));
    // w9/B: bought 2 for 4, sold 2 for 3.
    assert_eq!(f("realized_pnl", 2), Some(-1.0));
    assert_eq!(f("open_quantity", 2), Some(0.0));
}

#[test]
fn equity_curve_marks_open_quantity_at_each_close() {
    let day = 86_400;
    let rows = [
        ("w1", "A", "buy", 10.0, 1.0, 0, 1),
        ("w2", "A", "buy", 1.0, 2.0, day + 5, 2),
        ("w1", "A", "sell", 10.0, 1.5, 2 * day + 5, 3),
    ];
    let perf = wallet_performance(frames(&frame(&rows), None), &PnlOptions::of_wallet("w1"))
        .expect("curve");
    let eq: Vec<f64> = perf
        .curve
        .column("equity")
        .and_then(|c| c.f64().map(|c| c.into_no_null_iter().collect()))
        .expect("equity");
    // Capital 10; day 0 marked at 1, day 1 at 2 (w2's trade), day 2 sold at 1.5.
    assert_eq!(eq, vec![10.0, 20.0, 15.0]);
    let dd = perf
        .metrics
        .column("max_drawdown")
        .and_then(|c| c.f64().map(|c| c.get(0)))
        .expect("dd");
    assert_eq!(dd, Some(-25.0));
}

/// `df` with its `block_time` (integer microseconds) as a timestamp column of `unit`.
fn with_time_unit(df: &DataFrame, unit: TimeUnit) -> DataFrame {
    let micros: Vec<i64> = df
        .column("block_time")
        .and_then(|c| c.i64().map(|c| c.into_no_null_iter().collect()))
        .expect("block_time");
    let counts: Vec<i64> = micros
        .iter()
        .map(|&t| match unit {
            TimeUnit::Nanoseconds => t * 1000,
            TimeUnit::Microseconds => t,
            TimeUnit::Milliseconds => t / 1000,
        })
        .collect();
    let time = Series::new("block_time".into(), counts)
        .cast(&DataType::Datetime(unit, Some(TimeZone::UTC)))
        .expect("cast");
    let mut out = df.clone();
    out.with_column(Column::from(time)).expect("block_time");
    out
}

#[test]
fn timestamps_are_read_in_their_unit() {
    let day = 86_400;
    let trades = frame(&[
        ("w1", "A", "buy", 10.0, 1.0, 5, 1),
        ("w2", "A", "buy", 1.0, 2.0, day + 5, 2),
        ("w1", "A", "sell", 4.0, 1.5, 2 * day + 5, 3),
        ("w1", "B", "buy", 3.0, 7.0, 2 * day + 9, 4),
        ("w1", "A", "sell", 6.0, 3.0, 3 * day, 5),
    ]);
    // w9 has only swaps: buys A, then sells it for B.
    let swaps = df!(
        "wallet_address" => ["w9", "w9"],
        "swap_type" => ["quote_token", "token_token"],
        "token_address_in" => ["USD", "A"],
        "token_address_out" => ["A", "B"],
        "token_amount_in" => [8.0, 8.0],
        "token_amount_out" => [8.0, 2.0],
        "token_price_in" => [1.0, 1.25],
        "token_price_out" => [1.0, 4.5],
        "usd_amount_in" => [8.0, 10.0],
        "usd_amount_out" => [8.0, 9.0],
        "block_time" => [7_000_000i64, (day + 7) * 1_000_000],
        "block_slot" => [7i64, 8],
        "id" => [7i64, 8],
    )
    .expect("swaps");
    let config = PnlConfig {
        lots: true,
        ..PnlConfig::default()
    };
    let run = |unit| {
        let (t, s) = (with_time_unit(&trades, unit), with_time_unit(&swaps, unit));
        let report = pnl_report(frames(&t, Some(&s)), &with(&config)).expect("pnl");
        let set = ledger_set(frames(&t, Some(&s)), &PnlOptions::default()).expect("ledgers");
        let wallet = PnlOptions {
            config,
            ..PnlOptions::of_wallet("w1")
        };
        let perf = wallet_performance(frames(&t, Some(&s)), &wallet).expect("curve");
        (report, set.events, perf)
    };
    let (report, events, perf) = run(TimeUnit::Microseconds);
    assert_eq!(events[0].time, 5_000_000);
    assert_eq!(perf.curve.height(), 4);
    for unit in [TimeUnit::Nanoseconds, TimeUnit::Milliseconds] {
        let (r, e, p) = run(unit);
        assert!(r.ledgers.equals_missing(&report.ledgers), "{unit:?}");
        assert!(r.positions.equals_missing(&report.positions), "{unit:?}");
        let (lots, expected) = (r.lots.expect("lots"), report.lots.as_ref().expect("lots"));
        assert!(lots.equals_missing(expected), "{unit:?}");
        assert_eq!(e, events, "{unit:?}");
        assert!(p.curve.equals_missing(&perf.curve), "{unit:?}");
        assert!(p.metrics.equals_missing(&perf.metrics), "{unit:?}");
    }
}

/// In-memory frames as the PnL's source.
fn frames<'a>(trades: &'a DataFrame, swaps: Option<&'a DataFrame>) -> PnlSource<'a> {
    PnlSource::Frames { trades, swaps }
}

/// The default options under `config`.
fn with(config: &PnlConfig) -> PnlOptions {
    PnlOptions {
        config: *config,
        ..PnlOptions::default()
    }
}

#[test]
fn every_entry_refuses_what_its_options_cannot_compute() {
    let rows = [
        ("w1", "A", "buy", 10.0, 1.0, 10, 1),
        ("w2", "A", "buy", 1.0, 4.0, 40, 2),
    ];
    let trades = frame(&rows);
    let source = frames(&trades, None);
    let argument = |e: Error| match e {
        Error::InvalidArgument { argument, .. } => argument,
        other => panic!("not an argument error: {other}"),
    };
    let blank = PnlOptions::of_wallet(" ");
    for e in [
        pnl_report(source, &blank).map(drop),
        pnl_report_batches(source, &blank, 1, |_| Ok(())),
        leaderboard(source, &blank, 3).map(drop),
        ledger_set(source, &blank).map(drop),
        wallet_performance(source, &blank).map(drop),
    ] {
        assert_eq!(argument(e.expect_err("a blank wallet")), "wallet");
    }
    let dust = PnlOptions {
        config: PnlConfig {
            dust: -1.0,
            ..PnlConfig::default()
        },
        ..PnlOptions::default()
    };
    assert_eq!(
        argument(pnl_report(source, &dust).expect_err("dust")),
        "dust"
    );
    // A performance is of exactly one wallet, over every token.
    for (options, what) in [
        (PnlOptions::default(), "wallet"),
        (
            PnlOptions {
                wallets: Some(vec!["w1".into(), "w2".into()]),
                ..PnlOptions::default()
            },
            "wallet",
        ),
        (
            PnlOptions {
                token: Some("A".into()),
                ..PnlOptions::of_wallet("w1")
            },
            "token",
        ),
    ] {
        let e = wallet_performance(source, &options).expect_err("refused");
        assert_eq!(argument(e), what);
    }
}

#[test]
fn without_the_positions_option_a_report_has_the_same_ledgers_and_no_position() {
    let rows = [
        ("w1", "A", "buy", 10.0, 1.0, 10, 1),
        ("w1", "A", "sell", 10.0, 2.0, 20, 2),
        ("w2", "B", "buy", 1.0, 4.0, 40, 3),
    ];
    let trades = frame(&rows);
    let source = frames(&trades, None);
    let whole = pnl_report(source, &PnlOptions::default()).expect("whole");
    let options = PnlOptions {
        positions: false,
        ..PnlOptions::default()
    };
    let ledgers_only = pnl_report(source, &options).expect("ledgers only");
    assert!(ledgers_only.ledgers.equals_missing(&whole.ledgers));
    assert_eq!(whole.positions.height(), 2);
    assert_eq!(ledgers_only.positions.height(), 0);
    assert_eq!(
        ledgers_only.positions.get_column_names(),
        whole.positions.get_column_names()
    );
    let empty = PnlReport::empty(&PnlConfig {
        lots: true,
        ..PnlConfig::default()
    })
    .expect("empty");
    assert_eq!(empty.ledgers.width(), PnlReport::LEDGER_COLUMNS.len());
    assert_eq!(empty.ledgers.height(), 0);
    assert_eq!(empty.lots.map(|l| l.height()), Some(0));
}
