//! Types shared by the EVM and altchain families: open enums, metadata, metrics, pages.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Declares an open enum: the documented wire strings become variants, and any other string is
/// kept in `Other` so that a value the service adds later never fails a decode.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $( $(#[$vmeta:meta])* $variant:ident => $wire:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value not documented by the service, kept as it came.
            Other(String),
        }

        impl $name {
            /// Every documented value, in the service's order.
            pub const KNOWN: &'static [$name] = &[$($name::$variant),+];

            /// The exact wire string.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $wire, )+
                    $name::Other(s) => s.as_str(),
                }
            }

            /// Parses a wire string; unknown strings become `Other`.
            pub fn from_wire(s: &str) -> Self {
                match s {
                    $( $wire => $name::$variant, )+
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = std::convert::Infallible;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ok(Self::from_wire(s))
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                // Read from the decoder's own string: a documented value allocates nothing.
                struct Wire;
                impl serde::de::Visitor<'_> for Wire {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a string")
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$name, E> {
                        Ok($name::from_wire(s))
                    }
                }
                deserializer.deserialize_str(Wire)
            }
        }
    };
}

open_enum! {
    /// Time window of profile metrics (`EvmDexTokenProfileTimeWindowEnum`).
    TimeWindow {
        /// Seven days.
        D7 => "7d",
        /// One day.
        D1 => "1d",
        /// Six hours.
        H6 => "6h",
        /// One hour.
        H1 => "1h",
        /// Five minutes.
        M5 => "5m",
        /// One minute.
        M1 => "1m",
    }
}

impl TimeWindow {
    /// Length of the window in seconds, for the documented windows.
    pub fn seconds(&self) -> Option<i64> {
        Some(match self {
            TimeWindow::D7 => 7 * 86_400,
            TimeWindow::D1 => 86_400,
            TimeWindow::H6 => 6 * 3_600,
            TimeWindow::H1 => 3_600,
            TimeWindow::M5 => 300,
            TimeWindow::M1 => 60,
            TimeWindow::Other(_) => return None,
        })
    }
}

open_enum! {
    /// Which side of a swap is the quote token.
    SwapType {
        /// Quote sold, token bought.
        QuoteToken => "quote_token",
        /// Token sold, quote bought.
        TokenQuote => "token_quote",
        /// Token for token.
        TokenToken => "token_token",
        /// Quote for quote.
        QuoteQuote => "quote_quote",
    }
}

open_enum! {
    /// Direction of a trade from the wallet's side.
    Direction {
        /// The wallet acquired the token.
        Buy => "buy",
        /// The wallet disposed of the token.
        Sell => "sell",
    }
}

open_enum! {
    /// Where a trade sits in the lifecycle of the wallet's position in the token.
    PositionState {
        /// The trade opened the position.
        Open => "open",
        /// The trade changed an open position without closing it.
        Trade => "trade",
        /// The trade closed the position.
        Close => "close",
        /// EVM only: the state could not be determined.
        Unknown => "unknown",
    }
}

open_enum! {
    /// Sort direction of a search.
    SortDirection {
        /// Smallest first.
        Asc => "asc",
        /// Largest first.
        Desc => "desc",
    }
}

/// Token metadata (interface 2.3), the same shape for EVM and altchain profiles.
///
/// Every member is optional on decode: real tokens often lack socials or an image.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenMetadata {
    /// Time of the token's latest trade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_trade_at: Option<DateTime<Utc>>,
    /// Creation time of the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    /// Ticker symbol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Image URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Whether the token is verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// Address that created the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator_address: Option<String>,
    /// Twitter handle or URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twitter: Option<String>,
    /// Discord invite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discord: Option<String>,
    /// Website URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website: Option<String>,
    /// Telegram link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telegram: Option<String>,
}

/// Declares [`WindowMetrics`] from its integer and number field lists, so the list of the 46
/// fields exists once and is also available as data (for schemas and the simulator).
macro_rules! window_metrics {
    (ints: [$($int:ident),+ $(,)?], numbers: [$($num:ident),+ $(,)?]) => {
        /// Trading metrics of one time window (interface 2.4; altchain windows have the same
        /// 46 fields). Every member is optional on decode; the service may omit or null any.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        pub struct WindowMetrics {
            $(
                #[doc = concat!("`", stringify!($int), "` (integer).")]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $int: Option<i64>,
            )+
            /// Count of wallets per ROI bucket (`gt_500`, `200_500`, `0_200`, `neg50_0`,
            /// `lt_neg50_0`; ROI in percent).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub wallet_roi_distribution: Option<std::collections::BTreeMap<String, i64>>,
            $(
                #[doc = concat!("`", stringify!($num), "` (number).")]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $num: Option<f64>,
            )+
        }

        impl WindowMetrics {
            /// Names of the integer members, in wire order.
            pub const INTEGER_FIELDS: &'static [&'static str] = &[$(stringify!($int)),+];
            /// Names of the number members, in wire order.
            pub const NUMBER_FIELDS: &'static [&'static str] = &[$(stringify!($num)),+];

            /// The integer members, in the order of [`Self::INTEGER_FIELDS`].
            pub fn integers(&self) -> Vec<Option<i64>> {
                vec![$(self.$int),+]
            }

            /// The number members, in the order of [`Self::NUMBER_FIELDS`].
            pub fn numbers(&self) -> Vec<Option<f64>> {
                vec![$(self.$num),+]
            }

            /// Mutable access to an integer member by wire name.
            pub fn integer_mut(&mut self, name: &str) -> Option<&mut Option<i64>> {
                match name {
                    $(stringify!($int) => Some(&mut self.$int),)+
                    _ => None,
                }
            }

            /// Mutable access to a number member by wire name.
            pub fn number_mut(&mut self, name: &str) -> Option<&mut Option<f64>> {
                match name {
                    $(stringify!($num) => Some(&mut self.$num),)+
                    _ => None,
                }
            }
        }
    };
}

window_metrics! {
    ints: [
        avg_holding_duration, makers_count, buyers_count, sellers_count, buy_count, sell_count,
        win_position_count, loss_position_count, trade_count, position_count,
    ],
    numbers: [
        largest_trade_win, largest_trade_loss, avg_buy_size, avg_sell_size, avg_price,
        avg_buy_price, avg_sell_price, avg_buy_mcap, avg_sell_mcap, avg_trade_pnl, avg_trade_roi,
        avg_wallet_winrate, avg_wallet_pnl, avg_wallet_roi, win_pnl, loss_pnl, buy_volume,
        sell_volume, pnl, volume, volume_weighted_winrate, volume_weighted_roi, wallet_hit_ratio,
        profit_factor, win_loss_size_ratio, pnl_volume_ratio, price_stability, price_volatility,
        roi_stability, roi_volatility, pnl_volatility, pnl_stability, sharpe_ratio,
        sortino_ratio, max_drawdown,
    ]
}

/// The ROI buckets of `wallet_roi_distribution`, from highest to lowest.
pub const ROI_BUCKETS: [&str; 5] = ["gt_500", "200_500", "0_200", "neg50_0", "lt_neg50_0"];

/// Metrics keyed by window. A window key the service adds later is kept as
/// [`TimeWindow::Other`].
pub type MetricsByWindow = BTreeMap<TimeWindow, WindowMetrics>;

/// One page of a paged operation (interface 4, rule 3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// Total number of matching items (not the page size).
    pub count: i64,
    /// Opaque cursor for the next page; absent, null or empty on the last page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// The items of this page.
    pub data: Vec<T>,
}

impl<T> Page<T> {
    /// The cursor of the next page, if there is one (a missing, null or empty cursor ends
    /// paging).
    pub fn next_cursor(&self) -> Option<&str> {
        self.cursor.as_deref().filter(|c| !c.is_empty())
    }
}

/// The time of a swap or trade as the service writes it: RFC 3339, read without chrono's
/// general parser when it has the service's own form (`2025-04-18T05:24:36Z`), with it
/// otherwise. A sync reads one per record (see BENCHMARKS.md, "Sync at scale").
pub(crate) mod wire_time {
    use chrono::{DateTime, NaiveDate, Utc};
    use serde::de::{self, Deserializer, Visitor};

    /// `YYYY-MM-DDTHH:MM:SSZ`, or `None` for any other form (which chrono then reads).
    pub(crate) fn parse_plain(s: &str) -> Option<DateTime<Utc>> {
        let b = s.as_bytes();
        if b.len() != 20
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
            || b[19] != b'Z'
        {
            return None;
        }
        let num = |from: usize, to: usize| -> Option<u32> {
            b[from..to].iter().try_fold(0u32, |n, &c| {
                c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
            })
        };
        let year = i32::try_from(num(0, 4)?).ok()?;
        NaiveDate::from_ymd_opt(year, num(5, 7)?, num(8, 10)?)?
            .and_hms_opt(num(11, 13)?, num(14, 16)?, num(17, 19)?)
            .map(|t| t.and_utc())
    }

    struct WireTime;

    impl Visitor<'_> for WireTime {
        type Value = DateTime<Utc>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an RFC 3339 date and time")
        }

        fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
            match parse_plain(s) {
                Some(t) => Ok(t),
                None => s.parse().map_err(E::custom),
            }
        }
    }

    /// Reads the time (serde's `deserialize_with`).
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        d.deserialize_str(WireTime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_times_read_as_chrono_reads_them() {
        for s in [
            "2025-04-18T05:24:36Z",
            "2024-02-29T23:59:59Z",
            "1970-01-01T00:00:00Z",
            "2025-04-18T05:24:36.5Z",
            "2025-04-18T07:24:36+02:00",
        ] {
            let ours: DateTime<Utc> =
                wire_time::deserialize(serde_json::Value::String(s.into())).unwrap();
            assert_eq!(ours, s.parse::<DateTime<Utc>>().unwrap(), "{s}");
        }
        assert_eq!(wire_time::parse_plain("2025-04-18T05:24:36.5Z"), None);
        for bad in [
            "2025-02-30T00:00:00Z",
            "2025-04-18T25:00:00Z",
            "2025-04-18",
            "x",
        ] {
            assert!(
                wire_time::deserialize(serde_json::Value::String(bad.into())).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn open_enums_keep_unknown_values_and_pad_like_strings() {
        let t: SwapType = serde_json::from_str("\"token_token\"").unwrap();
        assert_eq!(t, SwapType::TokenToken);
        let other: PositionState = serde_json::from_str("\"liquidated\"").unwrap();
        assert_eq!(other, PositionState::Other("liquidated".into()));
        assert_eq!(serde_json::to_string(&other).unwrap(), "\"liquidated\"");
        assert_eq!(format!("[{:<6}]", Direction::Buy), "[buy   ]");
        let w: MetricsByWindow =
            serde_json::from_str(r#"{"5m": {"volume": 1.5}, "30d": {}}"#).unwrap();
        assert_eq!(w[&TimeWindow::M5].volume, Some(1.5));
        assert!(w.contains_key(&TimeWindow::Other("30d".into())));
    }
}
