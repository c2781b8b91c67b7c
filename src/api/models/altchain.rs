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
///
/// Its names and hashes are `S`: `String` by default. A reader that only passes a record on
/// may hold them as borrowed or shared text instead (the simulator's pages borrow its
/// market's names, a sync's records share the bytes of the answer they came in), and
/// [`Swap::map_strings`] turns one form into another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound(serialize = "S: Serialize", deserialize = "S: Deserialize<'de>"))]
pub struct Swap<S = String> {
    /// Unique id.
    pub id: i64,
    /// Which side is the quote token.
    pub swap_type: SwapType,
    /// DEX protocol.
    pub protocol: S,
    /// Wallet that swapped.
    pub wallet_address: S,
    /// Pool swapped in.
    pub pool_address: S,
    /// Token paid in.
    pub token_address_in: S,
    /// Token received.
    pub token_address_out: S,
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
    pub tx_hash: S,
}

/// One trade, a swap seen from the wallet's side (interface 2.9).
///
/// Its names and hashes are `S`, as in [`Swap`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound(serialize = "S: Serialize", deserialize = "S: Deserialize<'de>"))]
pub struct Trade<S = String> {
    /// Unique id.
    pub id: i64,
    /// DEX protocol.
    pub protocol: S,
    /// Which side is the quote token.
    pub swap_type: SwapType,
    /// Wallet that traded.
    pub wallet_address: S,
    /// Token traded.
    pub token_address: S,
    /// Quote token.
    pub quote_address: S,
    /// Address identifying the wallet's position in the token.
    pub position_address: S,
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
    pub tx_hash: S,
}

impl<S> Swap<S> {
    /// The same swap with each of its names and hashes passed through `f`.
    pub fn map_strings<T>(self, mut f: impl FnMut(S) -> T) -> Swap<T> {
        Swap {
            id: self.id,
            swap_type: self.swap_type,
            protocol: f(self.protocol),
            wallet_address: f(self.wallet_address),
            pool_address: f(self.pool_address),
            token_address_in: f(self.token_address_in),
            token_address_out: f(self.token_address_out),
            token_amount_in: self.token_amount_in,
            token_amount_out: self.token_amount_out,
            token_price_in: self.token_price_in,
            token_price_out: self.token_price_out,
            pre_token_balance_in: self.pre_token_balance_in,
            pre_token_balance_out: self.pre_token_balance_out,
            post_token_balance_in: self.post_token_balance_in,
            post_token_balance_out: self.post_token_balance_out,
            usd_amount_in: self.usd_amount_in,
            usd_amount_out: self.usd_amount_out,
            block_slot: self.block_slot,
            block_time: self.block_time,
            tx_hash: f(self.tx_hash),
        }
    }
}

impl<S> Trade<S> {
    /// The same trade with each of its names and hashes passed through `f`.
    pub fn map_strings<T>(self, mut f: impl FnMut(S) -> T) -> Trade<T> {
        Trade {
            id: self.id,
            protocol: f(self.protocol),
            swap_type: self.swap_type,
            wallet_address: f(self.wallet_address),
            token_address: f(self.token_address),
            quote_address: f(self.quote_address),
            position_address: f(self.position_address),
            direction: self.direction,
            position_state: self.position_state,
            token_amount: self.token_amount,
            quote_amount: self.quote_amount,
            native_amount: self.native_amount,
            usd_amount: self.usd_amount,
            pre_token_balance: self.pre_token_balance,
            post_token_balance: self.post_token_balance,
            token_price: self.token_price,
            quote_price: self.quote_price,
            token_mcap: self.token_mcap,
            block_slot: self.block_slot,
            block_time: self.block_time,
            tx_hash: f(self.tx_hash),
        }
    }
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
