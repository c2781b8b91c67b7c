//! Typed request bodies of the eleven operations, their paths, and bound validation.
//!
//! Every request validates the interface's documented bounds (`validate`) before it is sent;
//! the simulator applies the same checks to what it receives. A violation is
//! [`Error::InvalidRequest`] naming the operation, the member and the bound.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::models::{SortDirection, TimeWindow};
use super::profile_query::{
    Filter, FilterError, SearchOptions, SearchRequest, Sort, TEXT_FIELDS, TextQuery, cursor_sort,
};
use crate::error::{Error, Result};

impl From<FilterError> for Error {
    /// A filter that is not of the search language is an invalid search-profiles request naming
    /// the filter's path.
    fn from(e: FilterError) -> Self {
        Error::InvalidRequest {
            operation: Operation::AltSearchProfiles.name(),
            member: e.path,
            reason: e.message,
        }
    }
}

/// The eleven operations of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// 4.1 EVM get-profile.
    EvmGetProfile,
    /// 4.2 EVM get-price-history.
    EvmGetPriceHistory,
    /// 4.3 EVM get-price-stats.
    EvmGetPriceStats,
    /// 4.4 EVM get-price.
    EvmGetPrice,
    /// 4.5 altchain search-profiles.
    AltSearchProfiles,
    /// 4.6 altchain get-price-candles.
    AltGetPriceCandles,
    /// 4.7 altchain get-swaps.
    AltGetSwaps,
    /// 4.8 altchain get-trades.
    AltGetTrades,
    /// 4.9 altchain get-price-stats.
    AltGetPriceStats,
    /// 4.10 altchain get-price.
    AltGetPrice,
    /// 4.11 altchain get-portfolio.
    AltGetPortfolio,
}

impl Operation {
    /// All operations, in the interface's order.
    pub const ALL: [Operation; 11] = [
        Operation::EvmGetProfile,
        Operation::EvmGetPriceHistory,
        Operation::EvmGetPriceStats,
        Operation::EvmGetPrice,
        Operation::AltSearchProfiles,
        Operation::AltGetPriceCandles,
        Operation::AltGetSwaps,
        Operation::AltGetTrades,
        Operation::AltGetPriceStats,
        Operation::AltGetPrice,
        Operation::AltGetPortfolio,
    ];

    /// A short stable name, used in errors and logs (`evm.get-profile`, `altchain.get-swaps`).
    pub fn name(self) -> &'static str {
        match self {
            Operation::EvmGetProfile => "evm.get-profile",
            Operation::EvmGetPriceHistory => "evm.get-price-history",
            Operation::EvmGetPriceStats => "evm.get-price-stats",
            Operation::EvmGetPrice => "evm.get-price",
            Operation::AltSearchProfiles => "altchain.search-profiles",
            Operation::AltGetPriceCandles => "altchain.get-price-candles",
            Operation::AltGetSwaps => "altchain.get-swaps",
            Operation::AltGetTrades => "altchain.get-trades",
            Operation::AltGetPriceStats => "altchain.get-price-stats",
            Operation::AltGetPrice => "altchain.get-price",
            Operation::AltGetPortfolio => "altchain.get-portfolio",
        }
    }

    /// Whether the operation is of the EVM family.
    pub fn is_evm(self) -> bool {
        matches!(
            self,
            Operation::EvmGetProfile
                | Operation::EvmGetPriceHistory
                | Operation::EvmGetPriceStats
                | Operation::EvmGetPrice
        )
    }

    /// The path relative to the base URL, with the given altchain path segment.
    pub fn path(self, altchain_segment: &str) -> String {
        let rest = match self {
            Operation::EvmGetProfile => return "/v1/evm/dex/profiles/tokens/get-profile".into(),
            Operation::EvmGetPriceHistory => return "/v1/evm/dex/prices/get-price-history".into(),
            Operation::EvmGetPriceStats => return "/v1/evm/dex/prices/get-price-stats".into(),
            Operation::EvmGetPrice => return "/v1/evm/dex/prices/get-price".into(),
            Operation::AltSearchProfiles => "dex/profiles/tokens/search-profiles",
            Operation::AltGetPriceCandles => "dex/prices/get-price-candles",
            Operation::AltGetSwaps => "dex/swaps/get-swaps",
            Operation::AltGetTrades => "dex/trades/get-trades",
            Operation::AltGetPriceStats => "dex/prices/get-price-stats",
            Operation::AltGetPrice => "dex/prices/get-price",
            Operation::AltGetPortfolio => "dex/portfolios/get-portfolio",
        };
        format!("/v1/{altchain_segment}/{rest}")
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Largest `tokens` array of get-price-history.
pub const MAX_HISTORY_TOKENS: usize = 100;
/// Largest `pools` array of get-price-history.
pub const MAX_HISTORY_POOLS: usize = 1000;
/// Largest `tokens` or `pools` array of the price and price-stats operations.
pub const MAX_PRICE_ADDRESSES: usize = 1000;
/// Largest `limit` of a paged operation.
pub const MAX_LIMIT: u32 = 100;
/// Page size of a paged operation whose request names no `limit`: the service's default for
/// search-profiles, and the simulator's decision for swaps and trades.
pub const DEFAULT_LIMIT: u32 = 20;

fn invalid(operation: Operation, member: &str, reason: impl Into<String>) -> Error {
    Error::InvalidRequest {
        operation: operation.name(),
        member: member.to_owned(),
        reason: reason.into(),
    }
}

fn check_len(op: Operation, member: &str, v: &Option<Vec<String>>, max: usize) -> Result<()> {
    if let Some(v) = v {
        if v.is_empty() || v.len() > max {
            return Err(invalid(
                op,
                member,
                format!("must have 1 to {max} elements, got {}", v.len()),
            ));
        }
        if let Some(i) = v.iter().position(|a| a.trim().is_empty()) {
            return Err(invalid(
                op,
                member,
                format!("element {i} is an empty address"),
            ));
        }
    }
    Ok(())
}

fn check_limit(op: Operation, limit: Option<u32>) -> Result<()> {
    match limit {
        Some(l) if !(1..=MAX_LIMIT).contains(&l) => Err(invalid(
            op,
            "limit",
            format!("must be 1 to {MAX_LIMIT}, got {l}"),
        )),
        _ => Ok(()),
    }
}

fn check_nonempty(op: Operation, member: &str, v: &str) -> Result<()> {
    if v.trim().is_empty() {
        Err(invalid(op, member, "must not be empty"))
    } else {
        Ok(())
    }
}

fn check_optional(op: Operation, member: &str, v: &Option<String>) -> Result<()> {
    match v {
        Some(v) => check_nonempty(op, member, v),
        None => Ok(()),
    }
}

fn check_range(
    op: Operation,
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
) -> Result<()> {
    match (from, to) {
        (Some(f), Some(t)) if f > t => Err(invalid(op, "from", format!("{f} is after `to` {t}"))),
        _ => Ok(()),
    }
}

fn check_interval(op: Operation, interval: i64) -> Result<()> {
    if interval <= 0 {
        Err(invalid(
            op,
            "interval",
            format!("must be a positive number of seconds, got {interval}"),
        ))
    } else {
        Ok(())
    }
}

/// `options` of EVM get-profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileOptions {
    /// When true the profile carries `metadata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_metadata: Option<bool>,
    /// Windows to include in `metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_metrics: Option<Vec<TimeWindow>>,
}

/// Body of EVM get-profile (4.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetProfileRequest {
    /// Numeric EVM chain id.
    pub chain_id: i64,
    /// Token address.
    pub token: String,
    /// Sections to include.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<ProfileOptions>,
}

impl GetProfileRequest {
    /// Checks the documented bounds.
    pub fn validate(&self) -> Result<()> {
        check_nonempty(Operation::EvmGetProfile, "token", &self.token)
    }
}

/// Body of EVM get-price-history (4.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceHistoryRequest {
    /// Numeric EVM chain id.
    pub chain_id: i64,
    /// Token addresses, 1 to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Vec<String>>,
    /// Pool addresses, 1 to 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<Vec<String>>,
    /// Start of the range.
    pub from: DateTime<Utc>,
    /// End of the range (service default: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<DateTime<Utc>>,
    /// Seconds between points.
    pub interval: i64,
}

impl PriceHistoryRequest {
    /// Checks the documented bounds.
    pub fn validate(&self) -> Result<()> {
        let op = Operation::EvmGetPriceHistory;
        if self.tokens.is_none() && self.pools.is_none() {
            return Err(invalid(
                op,
                "tokens",
                "one of `tokens` or `pools` is required",
            ));
        }
        check_len(op, "tokens", &self.tokens, MAX_HISTORY_TOKENS)?;
        check_len(op, "pools", &self.pools, MAX_HISTORY_POOLS)?;
        check_interval(op, self.interval)?;
        check_range(op, Some(self.from), self.to)
    }
}

/// Body of EVM get-price and get-price-stats (4.3, 4.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvmPricesRequest {
    /// Numeric EVM chain id.
    pub chain_id: i64,
    /// Token addresses, 1 to 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Vec<String>>,
    /// Pool addresses, 1 to 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<Vec<String>>,
}

impl EvmPricesRequest {
    /// Checks the documented bounds for `op` (get-price or get-price-stats).
    pub fn validate(&self, op: Operation) -> Result<()> {
        check_addresses(op, &self.tokens, &self.pools)
    }
}

fn check_addresses(
    op: Operation,
    tokens: &Option<Vec<String>>,
    pools: &Option<Vec<String>>,
) -> Result<()> {
    if tokens.is_none() && pools.is_none() {
        return Err(invalid(
            op,
            "tokens",
            "one of `tokens` or `pools` is required",
        ));
    }
    check_len(op, "tokens", tokens, MAX_PRICE_ADDRESSES)?;
    check_len(op, "pools", pools, MAX_PRICE_ADDRESSES)
}

/// Body of altchain get-price and get-price-stats (4.9, 4.10).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AltPricesRequest {
    /// Token addresses, 1 to 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Vec<String>>,
    /// Pool addresses, 1 to 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<Vec<String>>,
}

impl AltPricesRequest {
    /// Checks the documented bounds for `op` (get-price or get-price-stats).
    pub fn validate(&self, op: Operation) -> Result<()> {
        check_addresses(op, &self.tokens, &self.pools)
    }
}

/// Body of altchain get-price-candles (4.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandlesRequest {
    /// Seconds per candle.
    pub interval: i64,
    /// Token address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Pool address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Start of the range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<DateTime<Utc>>,
    /// End of the range (service default: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<DateTime<Utc>>,
    /// Number of candles; only with `from` or `to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
}

impl CandlesRequest {
    /// Checks the documented bounds.
    pub fn validate(&self) -> Result<()> {
        let op = Operation::AltGetPriceCandles;
        check_interval(op, self.interval)?;
        if self.token.is_none() && self.pool.is_none() {
            return Err(invalid(op, "token", "one of `token` or `pool` is required"));
        }
        if let Some(t) = &self.token {
            check_nonempty(op, "token", t)?;
        }
        if let Some(p) = &self.pool {
            check_nonempty(op, "pool", p)?;
        }
        if let Some(c) = self.count {
            if self.from.is_none() && self.to.is_none() {
                return Err(invalid(
                    op,
                    "count",
                    "only allowed together with `from` or `to`",
                ));
            }
            if c < 1 {
                return Err(invalid(op, "count", format!("must be at least 1, got {c}")));
            }
        }
        check_range(op, self.from, self.to)
    }
}

/// Body of altchain get-swaps (4.7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapsRequest {
    /// Wallet filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wallet: Option<String>,
    /// Token filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Pool filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Page size, 1 to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Cursor from the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl SwapsRequest {
    /// Checks the documented bounds.
    pub fn validate(&self) -> Result<()> {
        let op = Operation::AltGetSwaps;
        if self.wallet.is_none() && self.token.is_none() && self.pool.is_none() {
            return Err(invalid(
                op,
                "wallet",
                "one of `wallet`, `token` or `pool` is required",
            ));
        }
        check_optional(op, "wallet", &self.wallet)?;
        check_optional(op, "token", &self.token)?;
        check_optional(op, "pool", &self.pool)?;
        check_optional(op, "cursor", &self.cursor)?;
        check_limit(op, self.limit)
    }
}

/// Body of altchain get-trades (4.8).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TradesRequest {
    /// Wallet filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wallet: Option<String>,
    /// Token filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Page size, 1 to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Cursor from the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl TradesRequest {
    /// Checks the documented bounds.
    pub fn validate(&self) -> Result<()> {
        let op = Operation::AltGetTrades;
        if self.wallet.is_none() && self.token.is_none() {
            return Err(invalid(
                op,
                "wallet",
                "one of `wallet` or `token` is required",
            ));
        }
        check_optional(op, "wallet", &self.wallet)?;
        check_optional(op, "token", &self.token)?;
        check_optional(op, "cursor", &self.cursor)?;
        check_limit(op, self.limit)
    }
}

/// Body of altchain get-portfolio (4.11).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortfolioRequest {
    /// Wallet address.
    pub wallet: String,
}

impl PortfolioRequest {
    /// Checks the documented bounds.
    pub fn validate(&self) -> Result<()> {
        check_nonempty(Operation::AltGetPortfolio, "wallet", &self.wallet)
    }
}

impl SearchRequest {
    /// Checks the documented bounds (the filter language is checked when the filter is built).
    pub fn validate(&self) -> Result<()> {
        let op = Operation::AltSearchProfiles;
        check_limit(op, self.limit)?;
        if let Some(q) = &self.query {
            check_nonempty(op, "query.text", &q.text)?;
            match &q.fields {
                Some(fields) if fields.is_empty() => {
                    return Err(invalid(
                        op,
                        "query.fields",
                        format!(
                            "needs at least one field path of {}",
                            TEXT_FIELDS.join(", ")
                        ),
                    ));
                }
                Some(fields) => {
                    if let Some((i, f)) = fields
                        .iter()
                        .enumerate()
                        .find(|(_, f)| !TEXT_FIELDS.contains(&f.as_str()))
                    {
                        return Err(invalid(
                            op,
                            &format!("query.fields[{i}]"),
                            format!(
                                "names unknown text field `{f}` (expected one of {})",
                                TEXT_FIELDS.join(", ")
                            ),
                        ));
                    }
                }
                None => {}
            }
        }
        if let Some(s) = &self.sort {
            check_nonempty(op, "sort.field", &s.field)?;
            if s.field.split('.').any(str::is_empty) {
                return Err(invalid(
                    op,
                    "sort.field",
                    format!("must be a dotted field path, got `{}`", s.field),
                ));
            }
            if let SortDirection::Other(other) = &s.direction {
                return Err(invalid(
                    op,
                    "sort.direction",
                    format!("must be asc or desc, got `{other}`"),
                ));
            }
        }
        if let Some(labels) = &self.dynamic_labels
            && labels.keys().any(|name| name.trim().is_empty())
        {
            return Err(invalid(op, "dynamic_labels", "a label name is empty"));
        }
        check_optional(op, "cursor", &self.cursor)?;
        if let Some((field, direction)) = self.cursor.as_deref().and_then(cursor_sort) {
            let (want_field, want_direction) = self.sort_or_default();
            if field != want_field || direction != want_direction {
                return Err(invalid(
                    op,
                    "cursor",
                    format!(
                        "was issued for sort `{field}` {direction}, this request sorts by `{want_field}` {want_direction}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The sort field and direction the request runs with: its `sort`, or `token_address`
    /// ascending when it names none.
    pub fn sort_or_default(&self) -> (&str, SortDirection) {
        match &self.sort {
            Some(s) => (s.field.as_str(), s.direction.clone()),
            None => ("token_address", SortDirection::Asc),
        }
    }
}

// ----- Builders -----
//
// Every request has constructors named after the member that selects what is asked for
// (`for_token`, `for_wallet`, ...) and consuming setters named after the body members, so a
// request reads like its JSON body: `SwapsRequest::for_token("…").limit(100)`. Setters do not
// validate; the client validates the finished request before sending it.

fn strings<I, S>(values: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    values.into_iter().map(Into::into).collect()
}

impl GetProfileRequest {
    /// The profile of `token` on chain `chain_id`, with no optional section.
    pub fn new(chain_id: i64, token: impl Into<String>) -> Self {
        GetProfileRequest {
            chain_id,
            token: token.into(),
            options: None,
        }
    }

    /// Sets `options.include_metadata`.
    pub fn include_metadata(mut self, include: bool) -> Self {
        self.options
            .get_or_insert_with(ProfileOptions::default)
            .include_metadata = Some(include);
        self
    }

    /// Sets `options.include_metrics`.
    pub fn include_metrics(mut self, windows: impl IntoIterator<Item = TimeWindow>) -> Self {
        self.options
            .get_or_insert_with(ProfileOptions::default)
            .include_metrics = Some(windows.into_iter().collect());
        self
    }
}

impl PriceHistoryRequest {
    /// History of `tokens` on chain `chain_id` from `from`, one point every `interval` seconds.
    pub fn for_tokens<I, S>(chain_id: i64, tokens: I, from: DateTime<Utc>, interval: i64) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PriceHistoryRequest {
            chain_id,
            tokens: Some(strings(tokens)),
            pools: None,
            from,
            to: None,
            interval,
        }
    }

    /// History of `pools` on chain `chain_id` from `from`, one point every `interval` seconds.
    pub fn for_pools<I, S>(chain_id: i64, pools: I, from: DateTime<Utc>, interval: i64) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PriceHistoryRequest {
            chain_id,
            tokens: None,
            pools: Some(strings(pools)),
            from,
            to: None,
            interval,
        }
    }

    /// Sets `tokens`.
    pub fn tokens<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tokens: I) -> Self {
        self.tokens = Some(strings(tokens));
        self
    }

    /// Sets `pools`.
    pub fn pools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, pools: I) -> Self {
        self.pools = Some(strings(pools));
        self
    }

    /// Sets `to` (the service's default is now).
    pub fn to(mut self, to: DateTime<Utc>) -> Self {
        self.to = Some(to);
        self
    }
}

impl EvmPricesRequest {
    /// Prices of `tokens` on chain `chain_id`.
    pub fn for_tokens<I: IntoIterator<Item = S>, S: Into<String>>(
        chain_id: i64,
        tokens: I,
    ) -> Self {
        EvmPricesRequest {
            chain_id,
            tokens: Some(strings(tokens)),
            pools: None,
        }
    }

    /// Prices of `pools` on chain `chain_id`.
    pub fn for_pools<I: IntoIterator<Item = S>, S: Into<String>>(chain_id: i64, pools: I) -> Self {
        EvmPricesRequest {
            chain_id,
            tokens: None,
            pools: Some(strings(pools)),
        }
    }

    /// Sets `tokens`.
    pub fn tokens<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tokens: I) -> Self {
        self.tokens = Some(strings(tokens));
        self
    }

    /// Sets `pools`.
    pub fn pools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, pools: I) -> Self {
        self.pools = Some(strings(pools));
        self
    }
}

impl AltPricesRequest {
    /// Prices of `tokens`.
    pub fn for_tokens<I: IntoIterator<Item = S>, S: Into<String>>(tokens: I) -> Self {
        AltPricesRequest {
            tokens: Some(strings(tokens)),
            pools: None,
        }
    }

    /// Prices of `pools`.
    pub fn for_pools<I: IntoIterator<Item = S>, S: Into<String>>(pools: I) -> Self {
        AltPricesRequest {
            tokens: None,
            pools: Some(strings(pools)),
        }
    }

    /// Sets `tokens`.
    pub fn tokens<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tokens: I) -> Self {
        self.tokens = Some(strings(tokens));
        self
    }

    /// Sets `pools`.
    pub fn pools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, pools: I) -> Self {
        self.pools = Some(strings(pools));
        self
    }
}

impl CandlesRequest {
    /// Candles of `token`, `interval` seconds each, ending now.
    pub fn for_token(token: impl Into<String>, interval: i64) -> Self {
        CandlesRequest {
            interval,
            token: Some(token.into()),
            pool: None,
            from: None,
            to: None,
            count: None,
        }
    }

    /// Candles of `pool`, `interval` seconds each, ending now.
    pub fn for_pool(pool: impl Into<String>, interval: i64) -> Self {
        CandlesRequest {
            interval,
            token: None,
            pool: Some(pool.into()),
            from: None,
            to: None,
            count: None,
        }
    }

    /// Sets `token`.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Sets `pool`.
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = Some(pool.into());
        self
    }

    /// Sets `from`.
    pub fn from(mut self, from: DateTime<Utc>) -> Self {
        self.from = Some(from);
        self
    }

    /// Sets `to`.
    pub fn to(mut self, to: DateTime<Utc>) -> Self {
        self.to = Some(to);
        self
    }

    /// Sets `count`, the number of candles (only together with `from` or `to`).
    pub fn count(mut self, count: i64) -> Self {
        self.count = Some(count);
        self
    }
}

impl SwapsRequest {
    /// Swaps of `wallet`.
    pub fn for_wallet(wallet: impl Into<String>) -> Self {
        SwapsRequest::default().wallet(wallet)
    }

    /// Swaps of `token`.
    pub fn for_token(token: impl Into<String>) -> Self {
        SwapsRequest::default().token(token)
    }

    /// Swaps in `pool`.
    pub fn for_pool(pool: impl Into<String>) -> Self {
        SwapsRequest::default().pool(pool)
    }

    /// Sets the `wallet` filter.
    pub fn wallet(mut self, wallet: impl Into<String>) -> Self {
        self.wallet = Some(wallet.into());
        self
    }

    /// Sets the `token` filter.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Sets the `pool` filter.
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = Some(pool.into());
        self
    }

    /// Sets the page size `limit` (1 to 100).
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Sets the `cursor` to start from.
    pub fn cursor(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }
}

impl TradesRequest {
    /// Trades of `wallet`.
    pub fn for_wallet(wallet: impl Into<String>) -> Self {
        TradesRequest::default().wallet(wallet)
    }

    /// Trades of `token`.
    pub fn for_token(token: impl Into<String>) -> Self {
        TradesRequest::default().token(token)
    }

    /// Sets the `wallet` filter.
    pub fn wallet(mut self, wallet: impl Into<String>) -> Self {
        self.wallet = Some(wallet.into());
        self
    }

    /// Sets the `token` filter.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Sets the page size `limit` (1 to 100).
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Sets the `cursor` to start from.
    pub fn cursor(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }
}

impl PortfolioRequest {
    /// The portfolio of `wallet`.
    pub fn for_wallet(wallet: impl Into<String>) -> Self {
        PortfolioRequest {
            wallet: wallet.into(),
        }
    }
}

impl SearchRequest {
    /// A search with no member set: every profile, in the service's default order.
    pub fn new() -> Self {
        SearchRequest::default()
    }

    /// Sets `query` to match `text` (case-insensitive substring) against the default fields.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.query = Some(TextQuery {
            text: text.into(),
            fields: None,
            fuzzy: None,
            autocomplete: None,
        });
        self
    }

    /// Sets the whole `query`.
    pub fn query(mut self, query: TextQuery) -> Self {
        self.query = Some(query);
        self
    }

    /// Sets `filter`.
    pub fn filter(mut self, filter: Filter) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Sets `options`.
    pub fn options(mut self, options: SearchOptions) -> Self {
        self.options = Some(options);
        self
    }

    /// Sets `sort` to `field` in `direction`.
    pub fn sort(mut self, field: impl Into<String>, direction: SortDirection) -> Self {
        self.sort = Some(Sort {
            field: field.into(),
            direction,
        });
        self
    }

    /// Adds the dynamic label `name`, applied to profiles that satisfy `filter`.
    pub fn dynamic_label(mut self, name: impl Into<String>, filter: Filter) -> Self {
        self.dynamic_labels
            .get_or_insert_with(Default::default)
            .insert(name.into(), filter);
        self
    }

    /// Sets the page size `limit` (1 to 100).
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Sets the `cursor` to start from.
    pub fn cursor(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_interface_and_the_segment() {
        assert_eq!(
            Operation::EvmGetPrice.path("x"),
            "/v1/evm/dex/prices/get-price"
        );
        assert_eq!(
            Operation::AltGetSwaps.path("altchain"),
            "/v1/altchain/dex/swaps/get-swaps"
        );
        assert_eq!(
            Operation::AltGetPortfolio.path("sol"),
            "/v1/sol/dex/portfolios/get-portfolio"
        );
    }

    #[test]
    fn bounds_name_the_member() {
        let r = SwapsRequest {
            token: Some("t".into()),
            limit: Some(101),
            ..Default::default()
        };
        match r.validate() {
            Err(Error::InvalidRequest { member, .. }) => assert_eq!(member, "limit"),
            other => panic!("expected InvalidRequest, got {other:?}"),
        }
        let c = CandlesRequest {
            interval: 60,
            token: Some("t".into()),
            pool: None,
            from: None,
            to: None,
            count: Some(5),
        };
        assert!(
            matches!(c.validate(), Err(Error::InvalidRequest { member, .. }) if member == "count")
        );
        let p = AltPricesRequest {
            tokens: Some(vec!["a".into(); 1001]),
            pools: None,
        };
        assert!(p.validate(Operation::AltGetPrice).is_err());
        assert!(
            AltPricesRequest::default()
                .validate(Operation::AltGetPrice)
                .is_err()
        );
    }
}
