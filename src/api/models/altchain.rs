//! Resources of the non-EVM family (`/v1/<altchain>/...`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::common::{Direction, MetricsByWindow, PositionState, SwapType, TokenMetadata};
use super::prices::PriceChanges;

/// Market section of an altchain profile (interface 2.6). Every member is optional on decode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Market {
    /// Fully diluted valuation, USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fdv: Option<f64>,
    /// Market capitalisation (circulating supply × price), USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub market_cap: Option<f64>,
    /// Latest price, USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<f64>,
    /// Liquidity of the token's pools, USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liquidity: Option<f64>,
    /// Number of holders (a JSON integer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holders: Option<i64>,
    /// Total supply, tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_supply: Option<f64>,
    /// Circulating supply, tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circulating_supply: Option<f64>,
    /// Share of supply held by the top holders, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_holdings: Option<f64>,
    /// Share of supply held by the creator, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev_holdings: Option<f64>,
}

/// Altchain search result profile (interface 2.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AltTokenProfile {
    /// Time the profile was last updated.
    pub updated_at: DateTime<Utc>,
    /// Time the profile was last synced.
    pub synced_at: DateTime<Utc>,
    /// Token address.
    pub token_address: String,
    /// Static labels; present when `options.include_labels` was true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// Label → the rules that made it apply; present with `labels`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_labels: Option<BTreeMap<String, Vec<String>>>,
    /// Names of the request's dynamic labels whose filter the profile satisfies.
    #[serde(default)]
    pub dynamic_labels: Vec<String>,
    /// Present when `options.include_metadata` was true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TokenMetadata>,
    /// Present when `options.include_market` was true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub market: Option<Market>,
    /// Metrics of the requested windows only.
    #[serde(default)]
    pub metrics: MetricsByWindow,
}

/// Altchain latest price (interface 2.7, operation 4.10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AltPrice {
    /// Token address.
    pub token_address: String,
    /// Pool the price was taken from.
    pub pool_address: String,
    /// Price in USD.
    pub usd_price: f64,
    /// Slot of the latest swap.
    pub block_slot: i64,
    /// Time of that slot.
    pub block_time: DateTime<Utc>,
}

/// Altchain price stats record (interface 2.7, operation 4.9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AltPriceStats {
    /// Token address.
    pub token_address: String,
    /// Pool address.
    pub pool_address: String,
    /// Latest price in USD.
    pub usd_price: f64,
    /// Changes and volumes per period.
    #[serde(flatten)]
    pub changes: PriceChanges,
    /// Slot of the latest swap.
    pub block_slot: i64,
    /// Time of that slot.
    pub block_time: DateTime<Utc>,
}

/// One swap (interface 2.8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Swap {
    /// Unique id.
    pub id: i64,
    /// Which side is the quote token.
    pub swap_type: SwapType,
    /// DEX protocol.
    pub protocol: String,
    /// Wallet that swapped.
    pub wallet_address: String,
    /// Pool swapped in.
    pub pool_address: String,
    /// Token paid in.
    pub token_address_in: String,
    /// Token received.
    pub token_address_out: String,
    /// Amount paid in, tokens.
    pub token_amount_in: f64,
    /// Amount received, tokens.
    pub token_amount_out: f64,
    /// USD price of the token paid in.
    pub token_price_in: f64,
    /// USD price of the token received.
    pub token_price_out: f64,
    /// Wallet balance of the token paid in, before.
    pub pre_token_balance_in: f64,
    /// Wallet balance of the token received, before.
    pub pre_token_balance_out: f64,
    /// Wallet balance of the token paid in, after.
    pub post_token_balance_in: f64,
    /// Wallet balance of the token received, after.
    pub post_token_balance_out: f64,
    /// USD value paid in.
    pub usd_amount_in: f64,
    /// USD value received.
    pub usd_amount_out: f64,
    /// Slot of the swap.
    pub block_slot: i64,
    /// Time of that slot.
    #[serde(deserialize_with = "super::common::wire_time::deserialize")]
    pub block_time: DateTime<Utc>,
    /// Transaction hash.
    pub tx_hash: String,
}

/// One trade, a swap seen from the wallet's side (interface 2.9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trade {
    /// Unique id.
    pub id: i64,
    /// DEX protocol.
    pub protocol: String,
    /// Which side is the quote token.
    pub swap_type: SwapType,
    /// Wallet that traded.
    pub wallet_address: String,
    /// Token traded.
    pub token_address: String,
    /// Quote token.
    pub quote_address: String,
    /// Address identifying the wallet's position in the token.
    pub position_address: String,
    /// Buy or sell, from the wallet's side.
    pub direction: Direction,
    /// Place of the trade in the position's lifecycle.
    pub position_state: PositionState,
    /// Amount of the token, tokens.
    pub token_amount: f64,
    /// Amount of the quote token.
    pub quote_amount: f64,
    /// Value in the chain's native coin.
    pub native_amount: f64,
    /// Value in USD.
    pub usd_amount: f64,
    /// Wallet's token balance before.
    pub pre_token_balance: f64,
    /// Wallet's token balance after.
    pub post_token_balance: f64,
    /// Token price, USD.
    pub token_price: f64,
    /// Quote price, USD.
    pub quote_price: f64,
    /// Token market cap, USD.
    pub token_mcap: f64,
    /// Slot of the trade.
    pub block_slot: i64,
    /// Time of that slot.
    #[serde(deserialize_with = "super::common::wire_time::deserialize")]
    pub block_time: DateTime<Utc>,
    /// Transaction hash.
    pub tx_hash: String,
}

/// One holding of a portfolio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortfolioToken {
    /// Token address.
    pub token: String,
    /// Balance, tokens.
    pub balance: f64,
    /// Latest price, USD.
    pub price: f64,
    /// balance × price, USD.
    pub value: f64,
}

/// A wallet's portfolio (interface 2.10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Portfolio {
    /// Total value, USD.
    pub value: f64,
    /// Holdings.
    pub tokens: Vec<PortfolioToken>,
}
