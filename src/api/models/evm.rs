//! Resources of the EVM family (`/v1/evm/...`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::common::{MetricsByWindow, TokenMetadata};
use super::prices::PriceChanges;

/// EVM token profile (interface 2.2), the answer of get-profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvmTokenProfile {
    /// Time the profile was last updated.
    pub updated_at: DateTime<Utc>,
    /// Time the profile was last synced.
    pub synced_at: DateTime<Utc>,
    /// Numeric EVM chain id.
    pub chain_id: i64,
    /// Token address.
    pub token_address: String,
    /// Present only when `options.include_metadata` was true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TokenMetadata>,
    /// Metrics of the requested windows only.
    #[serde(default)]
    pub metrics: MetricsByWindow,
}

/// EVM latest price (interface 2.7, operation 4.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvmPrice {
    /// Numeric EVM chain id.
    pub chain_id: i64,
    /// Token address.
    pub token_address: String,
    /// Pool the price was taken from.
    pub pool_address: String,
    /// Price in USD.
    pub usd_price: f64,
    /// Block of the latest swap.
    pub block_number: i64,
    /// Time of that block.
    pub block_time: DateTime<Utc>,
}

/// EVM price stats record (interface 2.7, operation 4.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvmPriceStats {
    /// Token address.
    pub token_address: String,
    /// Pool address.
    pub pool_address: String,
    /// Latest price in USD.
    pub usd_price: f64,
    /// Changes and volumes per period.
    #[serde(flatten)]
    pub changes: PriceChanges,
    /// Block of the latest swap.
    pub block_number: i64,
    /// Time of that block.
    pub block_time: DateTime<Utc>,
}
