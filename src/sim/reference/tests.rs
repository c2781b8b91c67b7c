use super::*;
use crate::api::models::ChainFamily;
use crate::sim::generate::NOW;
use crate::sim::market::{Behaviour, PoolInfo, PosState, QuoteInfo, TokenInfo, WalletInfo};
use crate::sim::streams::SwapStreams;
use std::sync::Arc;

/// A chain of one token traded in one pool against a 1-USD quote, from
/// `(time, wallet, buy, amount, price)` in event order.
fn one_token_chain(trades: &[(i64, u32, bool, f64, f64)]) -> Chain {
    let wallets = 1 + trades.iter().map(|t| t.1).max().unwrap_or(0);
    let mut held: HashMap<u32, f64> = HashMap::new();
    let start = NOW - 10 * 86_400;
    let mut records = Vec::new();
    for (k, &(time, wallet, buy, amount, price)) in trades.iter().enumerate() {
        let pre = held.get(&wallet).copied().unwrap_or(0.0);
        let post = if buy { pre + amount } else { pre - amount };
        let state = if buy && pre == 0.0 {
            PosState::Open
        } else if !buy && post == 0.0 {
            PosState::Close
        } else {
            PosState::Trade
        };
        held.insert(wallet, post);
        records.push(SwapRecord {
            slot: 1_000 + k as i64,
            time,
            token: 0,
            pool: 0,
            wallet,
            quote: 0,
            buy,
            state,
            token_amount: amount,
            quote_amount: amount * price,
            token_price: price,
            quote_price: 1.0,
            pre_token: pre,
            post_token: post,
            pre_quote: 1e9,
            post_quote: 1e9,
        });
    }
    let n = records.len() as u32;
    Chain {
        kind: ChainFamily::Evm(1),
        tokens: vec![TokenInfo {
            address: "0xtoken".into(),
            symbol: "TOK".into(),
            name: "Token".into(),
            created_at: start,
            creator: "0xcreator".into(),
            image: None,
            verified: false,
            twitter: None,
            discord: None,
            website: None,
            telegram: None,
            total_supply: 1e6,
            circulating_supply: 1e6,
            dev_allocation: 0.0,
            pools: vec![0],
        }],
        pools: vec![PoolInfo {
            address: "0xpool".into(),
            token: 0,
            quote: 0,
            protocol: "amm",
            initial_reserve: 1e5,
        }],
        wallets: (0..wallets)
            .map(|w| WalletInfo {
                address: format!("0xwallet{w}"),
                behaviour: Behaviour::Bot,
            })
            .collect(),
        quotes: vec![QuoteInfo {
            address: "0xusd".into(),
            symbol: "USD",
            name: "USD",
            native: false,
        }],
        first_id: 1,
        start,
        now: NOW,
        slot0: 1_000,
        native_prices: vec![1.0].into(),
        offsets: vec![0, n].into(),
        slot_offsets: (0..n).collect::<Vec<u32>>().into(),
        pre_quote: vec![1e9; n as usize].into(),
        by_pool: vec![(0..n).collect()].into(),
        by_wallet: (0..wallets)
            .map(|w| {
                (0..n)
                    .filter(|&i| records[i as usize].wallet == w)
                    .collect()
            })
            .collect::<Vec<Vec<u32>>>()
            .into(),
        final_tokens: (0..wallets)
            .map(|w| match held.get(&w) {
                Some(&b) if b > 0.0 => vec![(0, b)],
                _ => Vec::new(),
            })
            .collect::<Vec<_>>()
            .into(),
        final_quotes: vec![[1e9, 0.0]; wallets as usize].into(),
        latest_by_token: vec![records.last().map(|r| (n - 1, *r))].into(),
        latest_by_pool: vec![records.last().map(|r| (n - 1, *r))].into(),
        streams: Arc::new(SwapStreams::Memory(vec![records.into()])),
        token_by_address: Arc::default(),
        pool_by_address: Arc::default(),
        wallet_by_address: Arc::default(),
        hash_seed: 0,
        live: None,
        visible: 0,
    }
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn bars_follow_the_semantics_vector() {
    // semantics.md §1: 00:00:10 11×1; 00:00:30 10×2; 00:00:30 12×3; 00:01:00 13×1;
    // 00:01:59 9×4; 00:03:10 14×5 (the two 00:00:30 ticks ordered by slot).
    let m = align(NOW - 3_600, 60);
    let chain = one_token_chain(&[
        (m + 10, 0, true, 1.0, 11.0),
        (m + 30, 0, true, 2.0, 10.0),
        (m + 30, 0, true, 3.0, 12.0),
        (m + 60, 0, true, 1.0, 13.0),
        (m + 119, 0, true, 4.0, 9.0),
        (m + 190, 0, true, 5.0, 14.0),
    ]);
    let stream = chain.stream(0);
    let bars = candles(&stream, chain.now, 60, Some(m), None, None);
    let got: Vec<(i64, f64, f64, f64, f64, f64, i64)> = bars
        .iter()
        .map(|c| {
            (
                c.timestamp.timestamp() - m,
                c.open,
                c.high,
                c.low,
                c.close,
                c.volume,
                c.count,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, 11.0, 12.0, 10.0, 12.0, 67.0, 3),
            (60, 13.0, 13.0, 9.0, 9.0, 49.0, 2),
            (180, 14.0, 14.0, 14.0, 14.0, 70.0, 1),
        ]
    );
    // `count` with `from`: the first N; with `to` only: the last N up to `to`.
    assert_eq!(
        candles(&stream, chain.now, 60, Some(m), None, Some(2)),
        bars[..2]
    );
    assert_eq!(
        candles(&stream, chain.now, 60, None, None, Some(2)),
        bars[1..]
    );
    assert_eq!(
        candles(&stream, chain.now, 60, None, Some(m + 61), Some(5)),
        bars[..2]
    );
    // A range starting inside a bucket returns the whole bucket.
    assert_eq!(
        candles(&stream, chain.now, 60, Some(m + 75), None, None),
        bars[1..]
    );
}

#[test]
fn window_metrics_follow_the_fifo_vector() {
    // semantics.md §2 V1: buy 10@1, buy 10@2, sell 15@3, mark 4 → FIFO R 25, U 10.
    // A second wallet's buy of 1@4 sets the mark.
    let t = NOW - 7_200;
    let chain = one_token_chain(&[
        (t, 0, true, 10.0, 1.0),
        (t + 100, 0, true, 10.0, 2.0),
        (t + 400, 0, false, 15.0, 3.0),
        (t + 500, 1, true, 1.0, 4.0),
    ]);
    let m = window_metrics(&chain, 0, 86_400);
    assert_eq!(m.trade_count, Some(4));
    assert_eq!((m.buy_count, m.sell_count), (Some(3), Some(1)));
    assert_eq!(
        (m.makers_count, m.buyers_count, m.sellers_count),
        (Some(2), Some(2), Some(1))
    );
    assert_eq!(m.position_count, Some(2));
    assert_eq!(
        (m.win_position_count, m.loss_position_count),
        (Some(0), Some(0))
    );
    assert_eq!(m.win_pnl, Some(25.0));
    assert_eq!(m.largest_trade_win, Some(25.0));
    assert_eq!(m.loss_pnl, Some(0.0));
    assert_eq!(m.profit_factor, Some(0.0), "no losses: emitted as 0");
    assert_eq!(
        m.pnl,
        Some(35.0),
        "realized 25 + unrealized 10 + the other wallet's 0"
    );
    assert_eq!(m.avg_trade_roi, Some(125.0));
    // Holding: 10 units for 400 s and 5 units for 300 s.
    assert_eq!(
        m.avg_holding_duration,
        Some(((10.0 * 400.0 + 5.0 * 300.0) / 15.0f64).round() as i64)
    );
    assert_eq!(m.buy_volume, Some(10.0 + 20.0 + 4.0));
    assert_eq!(m.sell_volume, Some(45.0));
    assert_eq!(m.avg_buy_price, Some(34.0 / 21.0));
    let dist = m.wallet_roi_distribution.expect("distribution");
    assert_eq!(dist["0_200"], 2);
    assert_eq!(dist.values().sum::<i64>(), 2);
    assert_eq!(m.wallet_hit_ratio, Some(50.0));
    // The window excludes what happened before it.
    let short = window_metrics(&chain, 0, 7_200 - 200);
    assert_eq!(short.trade_count, Some(2));
    assert_eq!(
        short.win_pnl,
        Some(0.0),
        "the sell's lots were bought before the window"
    );
}

#[test]
fn ratios_follow_the_trading_metrics_vector() {
    // semantics.md §3: r = [0.01, −0.02, 0.03, −0.01, 0.02], one closed position per wallet.
    let r = [0.01, -0.02, 0.03, -0.01, 0.02];
    let t = NOW - 3_600;
    let mut trades: Vec<(i64, u32, bool, f64, f64)> =
        (0..5).map(|w| (t + w as i64, w, true, 1.0, 1.0)).collect();
    for (w, x) in r.iter().enumerate() {
        trades.push((t + 100 + w as i64, w as u32, false, 1.0, 1.0 + x));
    }
    let chain = one_token_chain(&trades);
    let m = window_metrics(&chain, 0, 86_400);
    let p = 252f64.sqrt();
    assert!(near(m.sharpe_ratio.expect("sharpe") * p, 4.593220484431883));
    assert!(near(
        m.sortino_ratio.expect("sortino") * p,
        9.524704719832526
    ));
    assert!(near(m.profit_factor.expect("profit factor"), 2.0));
    assert_eq!(
        (m.win_position_count, m.loss_position_count),
        (Some(3), Some(2))
    );
    assert!(near(m.avg_wallet_winrate.expect("winrate"), 60.0));
    assert!(near(m.max_drawdown.expect("drawdown"), -2.0));
    // r = [−0.10, 0.05, 0.02] has a drawdown of −10 %: the first loss counts.
    let mut trades: Vec<(i64, u32, bool, f64, f64)> =
        (0..3).map(|w| (t + w as i64, w, true, 1.0, 1.0)).collect();
    for (w, x) in [-0.10, 0.05, 0.02].iter().enumerate() {
        trades.push((t + 100 + w as i64, w as u32, false, 1.0, 1.0 + x));
    }
    let m = window_metrics(&one_token_chain(&trades), 0, 86_400);
    assert!(near(m.max_drawdown.expect("drawdown"), -10.0));
}

#[test]
fn history_and_stats_carry_prices_forward() {
    let chain = one_token_chain(&[
        (NOW - 7_200, 0, true, 10.0, 1.0),
        (NOW - 1_800, 0, true, 10.0, 2.0),
        (NOW - 60, 0, true, 10.0, 4.0),
    ]);
    let s = chain.stream(0);
    let h = price_history(&s, NOW - 3 * 3_600, NOW, 3_600);
    let got: Vec<(i64, f64, f64)> = h
        .iter()
        .map(|p| (NOW - p.timestamp.timestamp(), p.usd_price, p.usd_volume))
        .collect();
    assert_eq!(
        got,
        vec![(7_200, 1.0, 10.0), (3_600, 4.0, 60.0), (0, 4.0, 0.0)]
    );
    let c = price_changes(&s, NOW);
    assert_eq!(c.usd_price_change_1h, 300.0);
    assert_eq!(c.usd_volume_1h, 60.0);
    assert_eq!(
        c.usd_volume_change_1h, 0.0,
        "the hour before had no volume in (now-2h, now-1h]"
    );
    assert_eq!(c.usd_price_change_5m, 100.0);
    assert_eq!(c.usd_volume_5m, 40.0);
    assert_eq!(c.usd_volume_change_6h, 0.0);
    assert_eq!(
        c.usd_price_change_30d, 300.0,
        "a younger token compares with its first price"
    );
    assert_eq!(c.usd_volume_30d, 70.0);
}

#[test]
fn every_profile_document_is_complete_and_finite() {
    fn walk(v: &serde_json::Value, path: &str) {
        match v {
            serde_json::Value::Null => panic!("{path} is null"),
            serde_json::Value::Number(n) => {
                assert!(n.as_f64().is_some_and(f64::is_finite), "{path}")
            }
            serde_json::Value::Object(m) => {
                m.iter().for_each(|(k, v)| walk(v, &format!("{path}.{k}")))
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, path)),
            _ => {}
        }
    }
    let market = crate::sim::SyntheticMarket::generate(2, crate::sim::Scale::Tiny);
    let docs = alt_profile_documents(&market.alt);
    assert_eq!(docs.len(), market.alt.tokens.len());
    for d in &docs {
        walk(d, "profile");
        assert_eq!(d["metrics"].as_object().map(|m| m.len()), Some(6));
    }
    // The most active tokens trade up to "now": their short windows are not empty.
    assert!(docs[0]["metrics"]["1h"]["trade_count"].as_i64() > Some(0));
    for chain in &market.evm {
        for t in 0..chain.tokens.len() as u32 {
            let p = evm_profile(chain, 1, t, true, &all_windows());
            walk(&serde_json::to_value(p).expect("JSON"), "evm profile");
        }
    }
}

#[test]
fn roi_buckets_have_the_documented_bounds() {
    assert_eq!(roi_bucket(500.1), "gt_500");
    assert_eq!(roi_bucket(500.0), "200_500");
    assert_eq!(roi_bucket(200.0), "200_500");
    assert_eq!(roi_bucket(0.0), "0_200");
    assert_eq!(roi_bucket(-0.1), "neg50_0");
    assert_eq!(roi_bucket(-50.0), "neg50_0");
    assert_eq!(roi_bucket(-50.1), "lt_neg50_0");
}
