//! The options of a PnL computation: cost method, oversell policy, mark, which ledgers, and
//! the equity curve's period and capital.

use std::fmt;
use std::str::FromStr;

use crate::analytics::metrics;
use crate::{Error, Result};

/// How the cost of a sold quantity is chosen among the buy lots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CostMethod {
    /// First in, first out.
    #[default]
    Fifo,
    /// Last in, first out.
    Lifo,
    /// Highest unit cost first; ties go to the earliest lot.
    Hifo,
    /// Running weighted average cost: a sell removes cost at the current average.
    AverageCost,
}

impl CostMethod {
    /// Every method.
    pub const ALL: [CostMethod; 4] = [
        CostMethod::Fifo,
        CostMethod::Lifo,
        CostMethod::Hifo,
        CostMethod::AverageCost,
    ];

    /// The name used on the command line and in outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            CostMethod::Fifo => "fifo",
            CostMethod::Lifo => "lifo",
            CostMethod::Hifo => "hifo",
            CostMethod::AverageCost => "avg",
        }
    }
}

impl fmt::Display for CostMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CostMethod {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "fifo" => Ok(CostMethod::Fifo),
            "lifo" => Ok(CostMethod::Lifo),
            "hifo" => Ok(CostMethod::Hifo),
            "avg" | "average" | "average-cost" => Ok(CostMethod::AverageCost),
            _ => Err(Error::InvalidArgument {
                argument: "method".into(),
                reason: format!("unknown cost method {s:?}; expected fifo, lifo, hifo or avg"),
            }),
        }
    }
}

/// Which table of a PnL answer a door shows ([`PnlReport`](super::PnlReport)'s tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PnlTable {
    /// One row per (wallet, token).
    #[default]
    Ledgers,
    /// One row per position (opened, closed, realized).
    Positions,
    /// Which buy lots each sell consumed.
    Lots,
}

impl PnlTable {
    /// `config` with [`PnlConfig::lots`] set as this table needs.
    pub fn config(self, config: &PnlConfig) -> PnlConfig {
        PnlConfig {
            lots: config.lots || self == PnlTable::Lots,
            ..*config
        }
    }

    /// This table of `report` (an empty frame for lots the report did not build).
    pub fn of(self, report: super::PnlReport) -> polars::prelude::DataFrame {
        match self {
            PnlTable::Ledgers => report.ledgers,
            PnlTable::Positions => report.positions,
            PnlTable::Lots => report.lots.unwrap_or_default(),
        }
    }
}

impl FromStr for PnlTable {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ledgers" => Ok(PnlTable::Ledgers),
            "positions" => Ok(PnlTable::Positions),
            "lots" => Ok(PnlTable::Lots),
            other => Err(Error::InvalidArgument {
                argument: "table".into(),
                reason: format!("{other:?}: expected \"ledgers\", \"positions\" or \"lots\""),
            }),
        }
    }
}

/// What to do with the part of a sell beyond the quantity held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OversellPolicy {
    /// Fail with [`Error::Oversell`].
    Error,
    /// The unmatched part has a zero cost basis: its proceeds are all gain. Reported as
    /// `oversold_quantity`.
    #[default]
    ZeroCost,
    /// The unmatched part and its proceeds are left out. Reported as `ignored_quantity`.
    Ignore,
}

impl FromStr for OversellPolicy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "error" => Ok(OversellPolicy::Error),
            "zero-cost" | "zero_cost" | "zerocost" => Ok(OversellPolicy::ZeroCost),
            "ignore" => Ok(OversellPolicy::Ignore),
            _ => Err(Error::InvalidArgument {
                argument: "oversell".into(),
                reason: format!(
                    "unknown oversell policy {s:?}; expected error, zero-cost or ignore"
                ),
            }),
        }
    }
}

/// The price open quantities are marked at.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Mark {
    /// The token's latest trade price in the lake (last in event order, over every wallet).
    #[default]
    Latest,
    /// A price given by the caller, USD per token, for every token.
    Price(f64),
}

impl FromStr for Mark {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        if s.eq_ignore_ascii_case("latest") {
            return Ok(Mark::Latest);
        }
        match s.parse::<f64>() {
            Ok(p) if p.is_finite() && p >= 0.0 => Ok(Mark::Price(p)),
            _ => Err(Error::InvalidArgument {
                argument: "mark".into(),
                reason: format!("{s:?} is neither `latest` nor a finite price ≥ 0"),
            }),
        }
    }
}

/// Options of a PnL computation. `Default` is FIFO, zero-cost oversells, the latest price,
/// dust 0, no lots table.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PnlConfig {
    /// Cost-basis method.
    pub method: CostMethod,
    /// Oversell policy.
    pub oversell: OversellPolicy,
    /// Price of the open quantity.
    pub mark: Mark,
    /// A position is open while its quantity is above this threshold.
    pub dust: f64,
    /// Also build the lots table (which buy lots each sell consumed).
    pub lots: bool,
}

impl PnlConfig {
    /// Checks the numbers: the dust a finite quantity ≥ 0, a given mark a finite price ≥ 0.
    /// Every entry point of the PnL calls it before reading anything.
    pub fn validate(&self) -> Result<()> {
        if !(self.dust.is_finite() && self.dust >= 0.0) {
            return Err(invalid(
                "dust",
                format!("{:?} is not a finite quantity ≥ 0", self.dust),
            ));
        }
        if let Mark::Price(p) = self.mark
            && !(p.is_finite() && p >= 0.0)
        {
            return Err(invalid(
                "mark",
                format!("{p:?} is neither `latest` nor a finite price ≥ 0"),
            ));
        }
        Ok(())
    }
}

fn invalid(argument: &str, reason: String) -> Error {
    Error::InvalidArgument {
        argument: argument.to_owned(),
        reason,
    }
}

/// The longest period of an equity curve, seconds: the longest span microseconds hold in 64
/// bits (106,751,991 days and a little).
pub const MAX_PERIOD_SECONDS: i64 = i64::MAX / 1_000_000;

/// The options every PnL entry takes: which ledgers (wallets, token), how they are computed
/// ([`PnlConfig`]), which tables are built, and the equity curve's options. An entry reads
/// the fields it needs: [`wallet_performance`](super::wallet_performance) alone reads
/// `equity`, [`pnl_report`](super::pnl_report) and
/// [`pnl_report_batches`](super::pnl_report_batches) alone read `positions`, and the latter
/// alone `events_at_once`.
///
/// `Default` selects every wallet and token, under [`PnlConfig::default`], with the positions
/// table and [`EquityConfig::default`].
#[derive(Debug, Clone, PartialEq)]
pub struct PnlOptions {
    /// Only these wallets (every wallet when `None`); exactly one for a performance.
    pub wallets: Option<Vec<String>>,
    /// Only this token.
    pub token: Option<String>,
    /// Cost-basis method, oversell policy, mark, dust and the lots table.
    pub config: PnlConfig,
    /// Build the positions table; without it a report's positions frame has the table's
    /// columns and no row (for every wallet's ledgers, where it is the largest table).
    pub positions: bool,
    /// The equity curve's period, initial capital and ratios.
    pub equity: EquityConfig,
    /// Most events the lake's reader holds at once for
    /// [`pnl_report_batches`](super::pnl_report_batches): a lake with more is read and
    /// reported in parts of whole wallets, with the same tables; its files are read twice
    /// (once for the keys, once to deal the events to a temporary spill file per part) and the
    /// parts are read back from the spill files one at a time. Default [`EVENTS_AT_ONCE`].
    pub events_at_once: usize,
}

/// The default of [`PnlOptions::events_at_once`]: 2^24 events, about 0.9 GiB of them; the
/// one default of every reader in parts.
pub use crate::analytics::events::EVENTS_AT_ONCE;

impl Default for PnlOptions {
    fn default() -> Self {
        PnlOptions {
            wallets: None,
            token: None,
            config: PnlConfig::default(),
            positions: true,
            equity: EquityConfig::default(),
            events_at_once: EVENTS_AT_ONCE,
        }
    }
}

impl PnlOptions {
    /// Every token of one wallet, under the default options.
    pub fn of_wallet(wallet: &str) -> PnlOptions {
        PnlOptions {
            wallets: Some(vec![wallet.to_owned()]),
            ..PnlOptions::default()
        }
    }

    /// Refuses what the ledgers cannot be computed with: the numbers [`PnlConfig::validate`]
    /// refuses, and an empty (or blank) wallet or token address, which selects nothing. Every
    /// entry of the PnL calls it before reading anything.
    pub fn validate(&self) -> Result<()> {
        self.config.validate()?;
        let blank = |a: &String| a.trim().is_empty();
        if let Some(w) = self.wallets.iter().flatten().find(|w| blank(w)) {
            return Err(invalid("wallet", format!("{w:?}: give a wallet address")));
        }
        if let Some(t) = self.token.as_ref().filter(|t| blank(t)) {
            return Err(invalid("token", format!("{t:?}: give a token address")));
        }
        Ok(())
    }
}

/// Options of a wallet's equity curve. [`EquityConfig::validate`] says which values are
/// accepted; every entry point calls it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EquityConfig {
    /// Width of a period, seconds (epoch-aligned, so a day starts at midnight UTC): 1 to
    /// [`MAX_PERIOD_SECONDS`].
    pub period_seconds: i64,
    /// Capital the curve starts from, USD, finite and > 0; `None` takes the wallet's total
    /// buy cost.
    pub initial_capital: Option<f64>,
    /// Periods per year and risk-free rate of the ratios.
    pub ratios: metrics::RatioConfig,
}

impl Default for EquityConfig {
    fn default() -> Self {
        EquityConfig {
            period_seconds: 86_400,
            initial_capital: None,
            ratios: metrics::RatioConfig::default(),
        }
    }
}

impl EquityConfig {
    /// Checks the curve's options: a period of 1 to [`MAX_PERIOD_SECONDS`] seconds, an initial
    /// capital (when given) finite and > 0 (returns and ROI divide by it: 0 gives infinities,
    /// a negative one flips their sign), and the ratios' parameters
    /// ([`metrics::RatioConfig::validate`]).
    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_PERIOD_SECONDS).contains(&self.period_seconds) {
            return Err(invalid(
                "period",
                format!(
                    "{} s: a period is 1 to {MAX_PERIOD_SECONDS} s",
                    self.period_seconds
                ),
            ));
        }
        if let Some(c) = self.initial_capital
            && !(c.is_finite() && c > 0.0)
        {
            return Err(invalid(
                "capital",
                format!("{c:?}: the initial capital must be a finite amount > 0 USD"),
            ));
        }
        self.ratios.validate()
    }
}
