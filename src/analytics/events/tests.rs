use chrono::TimeZone;

use super::*;
use crate::api::models::{Direction, PositionState, Swap, SwapType, Trade};
use crate::lake::{LakeOptions, convert};

/// A swap of `kind` between `t_in` and `t_out`; its numbers derive from `id`.
fn swap(id: i64, kind: SwapType, t_in: &str, t_out: &str, time_s: i64, slot: i64) -> Swap {
    let x = id as f64;
    Swap {
        id,
        swap_type: kind,
        protocol: "amm".into(),
        wallet_address: "W".into(),
        pool_address: format!("POOL-{}", id % 3),
        token_address_in: t_in.into(),
        token_address_out: t_out.into(),
        token_amount_in: 1.0 + x,
        token_amount_out: 2.0 + x / 7.0,
        token_price_in: 3.0 + x / 11.0,
        token_price_out: 4.0 + x / 13.0,
        pre_token_balance_in: 0.0,
        pre_token_balance_out: 0.0,
        post_token_balance_in: 0.0,
        post_token_balance_out: 0.0,
        usd_amount_in: 5.0 + x,
        usd_amount_out: 6.0 + x,
        block_slot: slot,
        block_time: Utc.timestamp_opt(time_s, 0).unwrap(),
        tx_hash: format!("tx{id}"),
    }
}

/// Swaps of every type over a few tokens, with many events sharing `(block_time,
/// block_slot)` (ids decide), in files written newest first with row groups of 7 rows.
fn lake() -> (tempfile::TempDir, Lake) {
    let kinds = [
        (SwapType::QuoteToken, "Q", "A"),
        (SwapType::TokenQuote, "B", "Q"),
        (SwapType::TokenToken, "A", "C"),
        (SwapType::QuoteQuote, "Q", "R"),
        (SwapType::QuoteToken, "Q", "C"),
        (SwapType::TokenQuote, "A", "Q"),
        (SwapType::TokenToken, "C", "B"),
    ];
    let swaps: Vec<Swap> = (0..300i64)
        .map(|k| {
            // Ids in an order unrelated to time, so ties are broken by id, not by row.
            let id = (k * 37) % 301 + 1;
            let (kind, t_in, t_out) = &kinds[(k % 7) as usize];
            swap(id, kind.clone(), t_in, t_out, 1_000 + k / 4 * 10, k / 8)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let options = LakeOptions {
        row_group_rows: 7,
        ..LakeOptions::default()
    };
    let lake = Lake::open_with(dir.path(), options).unwrap();
    // Trades of the same tokens: buys, sells and an undocumented direction (a sell).
    let directions = [
        Direction::Buy,
        Direction::Sell,
        Direction::Buy,
        Direction::Other("transfer".into()),
    ];
    let trades: Vec<Trade> = swaps
        .iter()
        .enumerate()
        .map(|(k, s)| trade(s, ["A", "B", "C", "Q"][k % 4], directions[k % 4].clone()))
        .collect();
    for (swaps, trades) in swaps.chunks(45).rev().zip(trades.chunks(45).rev()) {
        let (mut swaps, mut trades) = (swaps.to_vec(), trades.to_vec());
        swaps.reverse();
        trades.reverse();
        let mut tx = lake.transaction().unwrap();
        tx.write(Dataset::Swaps, convert::swaps_to_batch(&swaps).unwrap())
            .unwrap();
        tx.write(Dataset::Trades, convert::trades_to_batch(&trades).unwrap())
            .unwrap();
        tx.commit().unwrap();
    }
    (dir, lake)
}

/// A trade of `token` at the time, slot and id of `s`, its numbers from the swap's.
fn trade(s: &Swap, token: &str, direction: Direction) -> Trade {
    Trade {
        id: s.id,
        protocol: s.protocol.clone(),
        swap_type: s.swap_type.clone(),
        wallet_address: "W".into(),
        token_address: token.into(),
        quote_address: "Q".into(),
        position_address: "P".into(),
        direction,
        position_state: PositionState::Trade,
        token_amount: s.token_amount_in,
        quote_amount: s.token_amount_out,
        native_amount: 0.0,
        usd_amount: s.usd_amount_in,
        pre_token_balance: 0.0,
        post_token_balance: 0.0,
        token_price: s.token_price_in,
        quote_price: 1.0,
        token_mcap: 0.0,
        block_slot: s.block_slot,
        block_time: s.block_time,
        tx_hash: s.tx_hash.clone(),
    }
}

#[test]
fn row_groups_read_as_dictionaries_give_the_frames_events() {
    let (_dir, lake) = lake();
    let files = lake.manifest().unwrap().files_of(Dataset::Swaps).count();
    assert!(files >= 6, "{files} files");
    let range = TimeRange {
        from: Some(Utc.timestamp_opt(1_200, 0).unwrap()),
        to: Some(Utc.timestamp_opt(1_555, 0).unwrap()),
    };
    let cases = [
        (Selection::AllTokens, TimeRange::default()),
        (Selection::AllTokens, range),
        (Selection::Token("C".into()), TimeRange::default()),
        (Selection::Tokens(vec!["Q".into(), "A".into()]), range),
        (Selection::Pool("POOL-1".into()), TimeRange::default()),
    ];
    for source in [EventSource::Swaps, EventSource::Trades] {
        for (selection, range) in &cases {
            // Trades carry no pool.
            if source == EventSource::Trades && matches!(selection, Selection::Pool(_)) {
                continue;
            }
            // A few files at a time, so that the reader goes through several windows.
            let columnar = load_events_in_windows(&lake, source, selection, *range, 4).unwrap();
            let frames = reference::load_events(&lake, source, selection, *range).unwrap();
            assert!(!columnar.is_empty(), "{source:?} {selection:?}");
            assert_eq!(columnar, frames, "{source:?} {selection:?} {range:?}");
            for t in &columnar {
                let e = &t.events;
                assert!((1..e.len()).all(|i| e.key(i - 1) < e.key(i)), "{}", t.token);
            }
        }
    }
    // A trade is one event, a buy only when its direction says so.
    let trades = load_events(
        &lake,
        EventSource::Trades,
        &Selection::AllTokens,
        TimeRange::default(),
    )
    .unwrap();
    let events: usize = trades.iter().map(|t| t.events.len()).sum();
    let buys: usize = trades
        .iter()
        .map(|t| t.events.buy.iter().filter(|&&b| b).count())
        .sum();
    assert_eq!((events, buys), (300, 150));
    // Ties on (block_time, block_slot) are frequent, and broken by id.
    let all = load_events(
        &lake,
        EventSource::Swaps,
        &Selection::AllTokens,
        TimeRange::default(),
    )
    .unwrap();
    let ties = all
        .iter()
        .flat_map(|t| {
            let e = &t.events;
            (1..e.len()).filter(move |&i| (e.time[i - 1], e.slot[i - 1]) == (e.time[i], e.slot[i]))
        })
        .count();
    assert!(ties > 20, "{ties} ties");
    let names: Vec<&str> = all.iter().map(|t| t.token.as_str()).collect();
    assert_eq!(names, ["A", "B", "C"]);
}

#[test]
fn blank_addresses_are_refused_naming_the_argument() {
    let (_dir, lake) = lake();
    for (selection, argument) in [
        (Selection::Token(String::new()), "token"),
        (Selection::Tokens(vec!["A".into(), String::new()]), "token"),
        (Selection::Tokens(vec![" ".into()]), "token"),
        (Selection::Pool(String::new()), "pool"),
    ] {
        let e = load_events(&lake, EventSource::Swaps, &selection, TimeRange::default())
            .expect_err("a blank address");
        assert!(
            e.to_string().starts_with(&format!("invalid {argument}: ")),
            "{selection:?}: {e}"
        );
    }
    // An empty list selects no events; it is not an error.
    let none = load_events(
        &lake,
        EventSource::Swaps,
        &Selection::Tokens(Vec::new()),
        TimeRange::default(),
    )
    .unwrap();
    assert!(none.is_empty());
}

#[test]
fn events_read_in_parts_are_the_whole_read_cut_between_tokens() {
    let (_dir, lake) = lake();
    let range = TimeRange {
        from: Some(Utc.timestamp_opt(1_200, 0).unwrap()),
        to: Some(Utc.timestamp_opt(1_555, 0).unwrap()),
    };
    let cases = [
        (Selection::AllTokens, TimeRange::default()),
        (Selection::AllTokens, range),
        (
            Selection::Tokens(vec!["Q".into(), "A".into(), "C".into()]),
            range,
        ),
        (Selection::Pool("POOL-1".into()), TimeRange::default()),
    ];
    for source in [EventSource::Swaps, EventSource::Trades] {
        for (selection, range) in &cases {
            if source == EventSource::Trades && matches!(selection, Selection::Pool(_)) {
                continue;
            }
            let whole = load_events(&lake, source, selection, *range).unwrap();
            let total: usize = whole.iter().map(|t| t.events.len()).sum();
            let latest = whole.iter().filter_map(|t| t.events.time.last()).max();
            // One event a part (each token alone), a part of about two tokens, and one part.
            for at_once in [0, 1, total / 2, total, usize::MAX] {
                let mut parts =
                    load_events_in_parts(&lake, source, selection, *range, at_once).unwrap();
                assert_eq!(
                    parts.latest_time(),
                    latest.copied(),
                    "{source:?} {selection:?}"
                );
                let count = parts.len();
                let mut sizes = Vec::new();
                let mut read = Vec::new();
                while let Some(part) = parts.next_part().unwrap() {
                    assert!(!part.is_empty());
                    let events: usize = part.iter().map(|t| t.events.len()).sum();
                    // Only a part of one token holds more than the bound.
                    assert!(
                        events <= at_once.max(1) || part.len() == 1,
                        "{events} {at_once}"
                    );
                    sizes.push(part.len());
                    read.extend(part);
                }
                assert_eq!(sizes.len(), count);
                assert_eq!(read, whole, "{source:?} {selection:?} {range:?} {at_once}");
                if at_once <= 1 {
                    assert_eq!(count, whole.len(), "a part per token");
                }
                if at_once >= total {
                    assert_eq!(count, 1);
                }
            }
        }
    }
    // No events: no part.
    let mut none = load_events_in_parts(
        &lake,
        EventSource::Swaps,
        &Selection::Token("NONE".into()),
        TimeRange::default(),
        1,
    )
    .unwrap();
    assert_eq!((none.len(), none.latest_time()), (0, None));
    assert!(none.next_part().unwrap().is_none());
}
