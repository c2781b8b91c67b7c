//! serde models of every resource of the service, with the exact wire names and types.
//!
//! Timestamps are `DateTime<Utc>` (RFC 3339 on the wire), integers are `i64`, and every
//! enumeration is open: a value the service adds later decodes into `Other(String)`.

pub mod altchain;
pub mod chain;
pub mod common;
pub mod evm;
pub mod prices;

pub use altchain::{
    AltPrice, AltPriceStats, AltTokenProfile, Market, Portfolio, PortfolioToken, Swap, Trade,
};
pub use chain::ChainFamily;
pub use common::{
    Direction, MetricsByWindow, Page, PositionState, ROI_BUCKETS, SortDirection, SwapType,
    TimeWindow, TokenMetadata, WindowMetrics,
};
pub use evm::{EvmPrice, EvmPriceStats, EvmTokenProfile};
pub use prices::{
    Candle, PRICE_STATS_PERIOD_SECONDS, PriceChanges, PriceHistorySeries, PricePoint,
};
