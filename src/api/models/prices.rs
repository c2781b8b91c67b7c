//! Price records shared by both families: stats periods, history points and candles.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Declares [`PriceChanges`] from its period suffixes so the 21 members exist once.
macro_rules! price_changes {
    ($( $suffix:literal => $change:ident, $volume:ident, $volume_change:ident; )+) => {
        /// Price change, USD volume and volume change per period (`5m` … `30d`).
        /// Changes are percent.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        pub struct PriceChanges {
            $(
                #[doc = concat!("Price change over ", $suffix, ", percent.")]
                pub $change: f64,
                #[doc = concat!("USD volume over ", $suffix, ".")]
                pub $volume: f64,
                #[doc = concat!("Volume change over ", $suffix, " against the period before, percent.")]
                pub $volume_change: f64,
            )+
        }

        impl PriceChanges {
            /// Period suffixes, shortest first.
            pub const PERIODS: &'static [&'static str] = &[$($suffix),+];

            /// `(price change, volume, volume change)` per period, in [`Self::PERIODS`] order.
            pub fn by_period(&self) -> Vec<(f64, f64, f64)> {
                vec![$((self.$change, self.$volume, self.$volume_change)),+]
            }

            /// Builds the record from `(price change, volume, volume change)` per period, in
            /// [`Self::PERIODS`] order.
            pub fn from_periods(values: &[(f64, f64, f64); 7]) -> Self {
                let mut it = values.iter();
                $(
                    let (c, v, vc) = *it.next().expect("seven periods");
                    let ($change, $volume, $volume_change) = (c, v, vc);
                )+
                Self { $($change, $volume, $volume_change,)+ }
            }
        }
    };
}

price_changes! {
    "5m" => usd_price_change_5m, usd_volume_5m, usd_volume_change_5m;
    "1h" => usd_price_change_1h, usd_volume_1h, usd_volume_change_1h;
    "6h" => usd_price_change_6h, usd_volume_6h, usd_volume_change_6h;
    "12h" => usd_price_change_12h, usd_volume_12h, usd_volume_change_12h;
    "1d" => usd_price_change_1d, usd_volume_1d, usd_volume_change_1d;
    "7d" => usd_price_change_7d, usd_volume_7d, usd_volume_change_7d;
    "30d" => usd_price_change_30d, usd_volume_30d, usd_volume_change_30d;
}

/// Length in seconds of each period of [`PriceChanges::PERIODS`].
pub const PRICE_STATS_PERIOD_SECONDS: [i64; 7] = [
    300,
    3_600,
    6 * 3_600,
    12 * 3_600,
    86_400,
    7 * 86_400,
    30 * 86_400,
];

/// One point of a price history series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PricePoint {
    /// Start of the sampling interval.
    pub timestamp: DateTime<Utc>,
    /// Price in USD.
    pub usd_price: f64,
    /// USD volume in the interval.
    pub usd_volume: f64,
}

/// Price history of one token or pool (interface 2.7, operation 4.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceHistorySeries {
    /// Token address.
    pub token_address: String,
    /// Pool address.
    pub pool_address: String,
    /// Points in time order.
    pub prices: Vec<PricePoint>,
}

/// One OHLCV candle (interface 2.7, operation 4.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candle {
    /// Start of the candle.
    pub timestamp: DateTime<Utc>,
    /// First price in the candle, USD.
    pub open: f64,
    /// Highest price, USD.
    pub high: f64,
    /// Lowest price, USD.
    pub low: f64,
    /// Last price, USD.
    pub close: f64,
    /// USD volume.
    pub volume: f64,
    /// Number of trades (a JSON integer).
    pub count: i64,
}
