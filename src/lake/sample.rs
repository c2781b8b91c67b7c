//! Deterministic sample records of every dataset, for tests, benchmarks and the fixture lake
//! that the Python interop tests read. They cover the awkward cases: values an open enum does
//! not know, absent metadata and market sections, missing metrics windows, several days, two
//! EVM chains and the altchain family.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, TimeZone, Utc};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::convert;
use super::dataset::Dataset;
use crate::Result;
use crate::api::models::{
    AltPrice, AltPriceStats, AltTokenProfile, Candle, Direction, EvmPrice, EvmPriceStats,
    EvmTokenProfile, Market, MetricsByWindow, Portfolio, PortfolioToken, PositionState,
    PriceChanges, PriceHistorySeries, PricePoint, ROI_BUCKETS, Swap, SwapType, TimeWindow,
    TokenMetadata, Trade, WindowMetrics,
};
use arrow_array::RecordBatch;

/// A set of sample records of every dataset (serialised with the service's wire names, so
/// other readers can compare the lake against the records).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Samples {
    /// Swaps over several days.
    pub swaps: Vec<Swap>,
    /// Trades over several days.
    pub trades: Vec<Trade>,
    /// One-minute candles of one token.
    pub candles: Vec<Candle>,
    /// Price history of two tokens on chain 1, hourly.
    pub price_history: Vec<PriceHistorySeries>,
    /// EVM latest prices (chains 1 and 8453).
    pub evm_prices: Vec<EvmPrice>,
    /// Altchain latest prices.
    pub alt_prices: Vec<AltPrice>,
    /// EVM price stats of chain 1.
    pub evm_price_stats: Vec<EvmPriceStats>,
    /// Altchain price stats.
    pub alt_price_stats: Vec<AltPriceStats>,
    /// EVM token profiles.
    pub evm_profiles: Vec<EvmTokenProfile>,
    /// Altchain token profiles.
    pub alt_profiles: Vec<AltTokenProfile>,
    /// Wallet portfolios.
    pub portfolios: Vec<(String, Portfolio)>,
    /// When the snapshots were fetched.
    pub fetched_at: DateTime<Utc>,
}

/// The token whose candles the samples hold.
pub const CANDLE_TOKEN: &str = "TokA1111111111111111111111111111111111111111";
/// The candle interval of the samples, seconds.
pub const CANDLE_INTERVAL: i64 = 60;
/// The price-history interval of the samples, seconds.
pub const HISTORY_INTERVAL: i64 = 3_600;
/// The EVM chain of the sample price history and price stats.
pub const HISTORY_CHAIN: i64 = 1;

fn addr(prefix: &str, i: usize) -> String {
    format!("{prefix}{i:040}")
}

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 3, 1, 22, 0, 0)
        .single()
        .expect("2024-03-01 22:00 UTC is a valid unambiguous time")
}

fn metrics(rng: &mut ChaCha8Rng, windows: &[TimeWindow]) -> MetricsByWindow {
    windows
        .iter()
        .map(|w| {
            let mut m = WindowMetrics::default();
            for name in WindowMetrics::INTEGER_FIELDS {
                if let Some(v) = m.integer_mut(name) {
                    *v = Some(rng.random_range(0..10_000));
                }
            }
            for name in WindowMetrics::NUMBER_FIELDS {
                if let Some(v) = m.number_mut(name) {
                    // Leave a few fields absent: the service may omit or null any.
                    *v = (!rng.random_bool(0.05)).then(|| rng.random_range(-100.0..1e6));
                }
            }
            m.wallet_roi_distribution = Some(
                ROI_BUCKETS
                    .iter()
                    .map(|b| ((*b).to_owned(), rng.random_range(0..500)))
                    .collect(),
            );
            (w.clone(), m)
        })
        .collect()
}

fn metadata(i: usize, rng: &mut ChaCha8Rng) -> TokenMetadata {
    TokenMetadata {
        last_trade_at: Some(start() + Duration::seconds(rng.random_range(0..86_400))),
        created_at: Some(start() - Duration::days(rng.random_range(1..400))),
        symbol: Some(format!("TK{i}")),
        name: Some(if i.is_multiple_of(3) {
            format!("Tökén «{i}» 🚀")
        } else {
            format!("Token {i}")
        }),
        image: (i.is_multiple_of(2)).then(|| format!("https://img.example/{i}.png")),
        verified: Some(i.is_multiple_of(4)),
        creator_address: Some(addr("Crt", i)),
        twitter: (!i.is_multiple_of(5)).then(|| format!("@tok{i}")),
        discord: None,
        website: Some(format!("https://tok{i}.example")),
        telegram: (i % 2 == 1).then(|| format!("https://t.me/tok{i}")),
    }
}

impl Samples {
    /// Sample records built from `seed`; `n` scales the event datasets (swaps and trades get
    /// `n` records each, the others a fixed fraction).
    pub fn generate(seed: u64, n: usize) -> Samples {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let t0 = start();
        let span = 3 * 86_400;
        let swap_types = [
            SwapType::QuoteToken,
            SwapType::TokenQuote,
            SwapType::TokenToken,
            SwapType::QuoteQuote,
            SwapType::Other("future_kind".into()),
        ];
        let swaps: Vec<Swap> = (0..n)
            .map(|i| {
                let offset = rng.random_range(0..span);
                Swap {
                    id: 1_000_000 + i as i64,
                    swap_type: swap_types[i % swap_types.len()].clone(),
                    protocol: ["raydium", "orca", "meteora"][i % 3].into(),
                    wallet_address: addr("W", i % 17),
                    pool_address: addr("P", i % 5),
                    token_address_in: addr("T", i % 7),
                    token_address_out: addr("T", (i + 1) % 7),
                    token_amount_in: rng.random_range(0.0..1e6),
                    token_amount_out: rng.random_range(0.0..1e6),
                    token_price_in: rng.random_range(0.0..10.0),
                    token_price_out: rng.random_range(0.0..10.0),
                    pre_token_balance_in: rng.random_range(0.0..1e7),
                    pre_token_balance_out: rng.random_range(0.0..1e7),
                    post_token_balance_in: rng.random_range(0.0..1e7),
                    post_token_balance_out: rng.random_range(0.0..1e7),
                    usd_amount_in: rng.random_range(0.0..1e5),
                    usd_amount_out: rng.random_range(0.0..1e5),
                    block_slot: 250_000_000 + offset * 2,
                    block_time: t0 + Duration::seconds(offset),
                    tx_hash: format!("tx{i:060}"),
                }
            })
            .collect();
        let directions = [Direction::Buy, Direction::Sell];
        let states = [
            PositionState::Open,
            PositionState::Trade,
            PositionState::Close,
            PositionState::Other("liquidated".into()),
        ];
        let trades: Vec<Trade> = (0..n)
            .map(|i| {
                let offset = rng.random_range(0..span);
                Trade {
                    id: 5_000_000 + i as i64,
                    protocol: ["raydium", "orca"][i % 2].into(),
                    swap_type: swap_types[i % 4].clone(),
                    wallet_address: addr("W", i % 13),
                    token_address: addr("T", i % 7),
                    quote_address: addr("Q", 0),
                    position_address: addr("Pos", i % 29),
                    direction: directions[i % 2].clone(),
                    position_state: states[i % states.len()].clone(),
                    token_amount: rng.random_range(0.0..1e6),
                    quote_amount: rng.random_range(0.0..1e3),
                    native_amount: rng.random_range(0.0..1e3),
                    usd_amount: rng.random_range(0.0..1e5),
                    pre_token_balance: rng.random_range(0.0..1e7),
                    post_token_balance: rng.random_range(0.0..1e7),
                    token_price: rng.random_range(0.0..10.0),
                    quote_price: rng.random_range(100.0..200.0),
                    token_mcap: rng.random_range(1e5..1e9),
                    block_slot: 250_000_000 + offset * 2,
                    block_time: t0 + Duration::seconds(offset),
                    tx_hash: format!("tx{i:060}"),
                }
            })
            .collect();
        let candles: Vec<Candle> = (0..(n / 4).max(3))
            .map(|i| {
                let open = rng.random_range(1.0..2.0);
                let close = rng.random_range(1.0..2.0);
                Candle {
                    // Starts two hours before midnight so the candles span two days.
                    timestamp: t0 + Duration::seconds(i as i64 * CANDLE_INTERVAL),
                    open,
                    high: open.max(close) + 0.1,
                    low: open.min(close) - 0.1,
                    close,
                    volume: rng.random_range(0.0..1e5),
                    count: rng.random_range(1..500),
                }
            })
            .collect();
        let price_history: Vec<PriceHistorySeries> = (0..2)
            .map(|s| PriceHistorySeries {
                token_address: format!("0x{:040x}", s + 1),
                pool_address: format!("0x{:040x}", s + 100),
                prices: (0..(n / 8).max(3))
                    .map(|i| PricePoint {
                        timestamp: t0 + Duration::seconds(i as i64 * HISTORY_INTERVAL),
                        usd_price: rng.random_range(0.5..5.0),
                        usd_volume: rng.random_range(0.0..1e6),
                    })
                    .collect(),
            })
            .collect();
        let fetched_at = t0 + Duration::days(3) + Duration::microseconds(123_456);
        let evm_prices: Vec<EvmPrice> = (0..6)
            .map(|i| EvmPrice {
                chain_id: if i % 2 == 0 { 1 } else { 8453 },
                token_address: format!("0x{:040x}", i + 1),
                pool_address: format!("0x{:040x}", i + 100),
                usd_price: rng.random_range(0.5..5.0),
                block_number: 19_000_000 + i as i64,
                block_time: fetched_at - Duration::seconds(i as i64 * 7),
            })
            .collect();
        let alt_prices: Vec<AltPrice> = (0..5)
            .map(|i| AltPrice {
                token_address: addr("T", i),
                pool_address: addr("P", i),
                usd_price: rng.random_range(0.001..5.0),
                block_slot: 251_000_000 + i as i64,
                block_time: fetched_at - Duration::seconds(i as i64 * 3),
            })
            .collect();
        let changes = |rng: &mut ChaCha8Rng| {
            let mut v = [(0.0, 0.0, 0.0); 7];
            for p in &mut v {
                *p = (
                    rng.random_range(-50.0..50.0),
                    rng.random_range(0.0..1e7),
                    rng.random_range(-90.0..300.0),
                );
            }
            PriceChanges::from_periods(&v)
        };
        let evm_price_stats: Vec<EvmPriceStats> = (0..4)
            .map(|i| EvmPriceStats {
                token_address: format!("0x{:040x}", i + 1),
                pool_address: format!("0x{:040x}", i + 100),
                usd_price: rng.random_range(0.5..5.0),
                changes: changes(&mut rng),
                block_number: 19_000_100 + i as i64,
                block_time: fetched_at - Duration::seconds(30),
            })
            .collect();
        let alt_price_stats: Vec<AltPriceStats> = (0..4)
            .map(|i| AltPriceStats {
                token_address: addr("T", i),
                pool_address: addr("P", i),
                usd_price: rng.random_range(0.001..5.0),
                changes: changes(&mut rng),
                block_slot: 251_000_100 + i as i64,
                block_time: fetched_at - Duration::seconds(20),
            })
            .collect();
        let all_windows: Vec<TimeWindow> = TimeWindow::KNOWN.to_vec();
        let evm_profiles: Vec<EvmTokenProfile> = (0..3)
            .map(|i| EvmTokenProfile {
                updated_at: fetched_at - Duration::minutes(5),
                synced_at: fetched_at - Duration::minutes(1),
                chain_id: 1,
                token_address: format!("0x{:040x}", i + 1),
                metadata: (i != 2).then(|| metadata(i, &mut rng)),
                metrics: metrics(
                    &mut rng,
                    if i == 1 {
                        &all_windows[..2]
                    } else {
                        &all_windows
                    },
                ),
            })
            .collect();
        let alt_profiles: Vec<AltTokenProfile> = (0..5)
            .map(|i| {
                let mut matched = BTreeMap::new();
                matched.insert("trending".to_owned(), vec!["volume_1h_top".to_owned()]);
                if i % 2 == 0 {
                    matched.insert(
                        "hot".to_owned(),
                        vec!["buyers_5m".to_owned(), "price_up_1h".to_owned()],
                    );
                }
                AltTokenProfile {
                    updated_at: fetched_at - Duration::minutes(3),
                    synced_at: fetched_at - Duration::minutes(2),
                    token_address: addr("T", i),
                    labels: (i != 4).then(|| matched.keys().cloned().collect()),
                    matched_labels: (i != 4).then_some(matched),
                    dynamic_labels: if i % 2 == 0 {
                        vec!["whales".into()]
                    } else {
                        vec![]
                    },
                    metadata: (i != 3).then(|| metadata(i, &mut rng)),
                    market: (i != 3).then(|| Market {
                        fdv: Some(rng.random_range(1e5..1e9)),
                        market_cap: Some(rng.random_range(1e5..1e9)),
                        price: Some(rng.random_range(0.001..5.0)),
                        liquidity: Some(rng.random_range(1e3..1e7)),
                        holders: Some(rng.random_range(10..100_000)),
                        total_supply: Some(1e9),
                        circulating_supply: Some(rng.random_range(1e8..1e9)),
                        top_holdings: Some(rng.random_range(0.0..100.0)),
                        dev_holdings: (i != 1).then(|| rng.random_range(0.0..20.0)),
                    }),
                    metrics: metrics(&mut rng, &all_windows[(i % 3)..]),
                }
            })
            .collect();
        let portfolios: Vec<(String, Portfolio)> = (0..4)
            .map(|w| {
                let tokens: Vec<PortfolioToken> = (0..w)
                    .map(|j| {
                        let balance = rng.random_range(0.0..1e6);
                        let price = rng.random_range(0.0..5.0);
                        PortfolioToken {
                            token: addr("T", j),
                            balance,
                            price,
                            value: balance * price,
                        }
                    })
                    .collect();
                (
                    addr("W", w),
                    Portfolio {
                        value: tokens.iter().map(|t| t.value).sum(),
                        tokens,
                    },
                )
            })
            .collect();
        Samples {
            swaps,
            trades,
            candles,
            price_history,
            evm_prices,
            alt_prices,
            evm_price_stats,
            alt_price_stats,
            evm_profiles,
            alt_profiles,
            portfolios,
            fetched_at,
        }
    }

    /// The samples as record batches, one or more per dataset.
    pub fn batches(&self) -> Result<Vec<(Dataset, RecordBatch)>> {
        let f = self.fetched_at;
        Ok(vec![
            (Dataset::Swaps, convert::swaps_to_batch(&self.swaps)?),
            (Dataset::Trades, convert::trades_to_batch(&self.trades)?),
            (
                Dataset::Candles,
                convert::candles_to_batch(
                    Some(CANDLE_TOKEN),
                    None,
                    CANDLE_INTERVAL,
                    &self.candles,
                )?,
            ),
            (
                Dataset::PriceHistory,
                convert::price_history_to_batch(
                    HISTORY_CHAIN,
                    HISTORY_INTERVAL,
                    &self.price_history,
                )?,
            ),
            (
                Dataset::Prices,
                convert::evm_prices_to_batch(&self.evm_prices, f)?,
            ),
            (
                Dataset::Prices,
                convert::alt_prices_to_batch(&self.alt_prices, f)?,
            ),
            (
                Dataset::PriceStats,
                convert::evm_price_stats_to_batch(HISTORY_CHAIN, &self.evm_price_stats, f)?,
            ),
            (
                Dataset::PriceStats,
                convert::alt_price_stats_to_batch(&self.alt_price_stats, f)?,
            ),
            (
                Dataset::TokenProfiles,
                convert::evm_profiles_to_batch(&self.evm_profiles, f)?,
            ),
            (
                Dataset::TokenProfiles,
                convert::alt_profiles_to_batch(&self.alt_profiles, f)?,
            ),
            (
                Dataset::Portfolios,
                convert::portfolios_to_batch(&self.portfolios, f)?,
            ),
        ])
    }

    /// Number of records (rows) per dataset.
    pub fn row_counts(&self) -> BTreeMap<Dataset, u64> {
        let mut m = BTreeMap::new();
        m.insert(Dataset::Swaps, self.swaps.len() as u64);
        m.insert(Dataset::Trades, self.trades.len() as u64);
        m.insert(Dataset::Candles, self.candles.len() as u64);
        m.insert(
            Dataset::PriceHistory,
            self.price_history
                .iter()
                .map(|s| s.prices.len() as u64)
                .sum(),
        );
        m.insert(
            Dataset::Prices,
            (self.evm_prices.len() + self.alt_prices.len()) as u64,
        );
        m.insert(
            Dataset::PriceStats,
            (self.evm_price_stats.len() + self.alt_price_stats.len()) as u64,
        );
        m.insert(
            Dataset::TokenProfiles,
            (self.evm_profiles.len() + self.alt_profiles.len()) as u64,
        );
        m.insert(Dataset::Portfolios, self.portfolios.len() as u64);
        m
    }
}
