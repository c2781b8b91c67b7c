//! The PnL questions of a [`Query`]: the report, one table, batches of a table, the
//! leaderboard and one wallet's performance, with what they share (the selection PnL accepts,
//! the coverage of the selected wallets, the note of a wallet without trades).

use polars::prelude::*;

use super::answer::{self, Answer, Warning, WarningKind};
use super::{Query, refused};
use crate::analytics::EventSource;
use crate::analytics::pnl::{
    self, EquityConfig, PnlConfig, PnlOptions, PnlReport, PnlSource, PnlTable, WalletPerformance,
};
use crate::coverage::{self, Coverage};
use crate::lake::cols::token;
use crate::{Error, Result};

impl Query<'_> {
    /// The PnL of the selected wallets (every wallet when none is) per (wallet, token), FIFO
    /// and marked at each token's latest price: the ledgers table of [`Query::pnl_report`].
    pub fn pnl(&self) -> Result<DataFrame> {
        Ok(self.pnl_report(&PnlConfig::default())?.ledgers)
    }

    /// [`Query::pnl`] under `config` (method, oversell policy, mark, dust).
    pub fn pnl_with(&self, config: &PnlConfig) -> Result<DataFrame> {
        Ok(self.pnl_report(config)?.ledgers)
    }

    /// [`Query::pnl`] with the ledgers, positions and (with `config.lots`) lots tables, under
    /// `config`'s cost-basis method, oversell policy and mark. PnL reads the lake's trades
    /// (and swaps for wallets with no trades) over their whole history: a time range, a pool
    /// or a source other than the default is refused. The value of
    /// [`Query::pnl_report_covered`].
    pub fn pnl_report(&self, config: &PnlConfig) -> Result<PnlReport> {
        Ok(self.pnl_report_covered(config)?.value)
    }

    /// [`Query::pnl_report`] as an [`Answer`], with the coverage of each selected wallet's
    /// trades: partial when the lake holds only the trades of the tokens synced by token, not
    /// the wallet's own (see [`crate::coverage::of_wallets`]). One selected wallet without
    /// trades is a [`WarningKind::Empty`] note, not an error.
    pub fn pnl_report_covered(&self, config: &PnlConfig) -> Result<Answer<PnlReport>> {
        self.pnl_report_of(config, true)
    }

    /// [`Query::pnl_report_covered`], with the positions table built only when `positions`.
    fn pnl_report_of(&self, config: &PnlConfig, positions: bool) -> Result<Answer<PnlReport>> {
        let (version, coverage, mut warnings) = self.pnl_start(config)?;
        let options = self.pnl_options(config, positions);
        let value = self.keep_tokens(pnl::pnl_report(PnlSource::Lake(self.lake), &options)?)?;
        warnings.extend(self.no_trades_note(value.ledgers.height()));
        Ok(Answer {
            value,
            coverage,
            warnings,
            version,
        })
    }

    /// One PnL table of the selected wallets (every wallet when none is), as an [`Answer`]:
    /// the ledgers (one row per wallet and token), the positions or the lots. Only the table
    /// asked for is built: the positions table only when it is the one asked for.
    pub fn pnl_table(&self, config: &PnlConfig, table: PnlTable) -> Result<Answer<DataFrame>> {
        let config = table.config(config);
        let positions = table == PnlTable::Positions;
        Ok(self.pnl_report_of(&config, positions)?.map(|r| table.of(r)))
    }

    /// [`Query::pnl_table`] handed to `sink` a chunk of ledgers at a time (in ledger order),
    /// so that every ledger of a large lake is never one frame in memory; the answer's value
    /// is the number of rows handed over. Without any row, `sink` gets the empty table once,
    /// so that a file written from it still has the table's columns.
    pub fn pnl_table_to(
        &self,
        config: &PnlConfig,
        table: PnlTable,
        mut sink: impl FnMut(DataFrame) -> Result<()>,
    ) -> Result<Answer<u64>> {
        let config = table.config(config);
        if self.tokens.as_ref().is_some_and(|t| t.len() > 1) {
            // The tokens asked for are kept from the whole tables.
            let answer = self.pnl_table(&config, table)?;
            let rows = answer.value.height() as u64;
            return answer.try_map(|frame| sink(frame).map(|()| rows));
        }
        let (version, coverage, mut warnings) = self.pnl_start(&config)?;
        // The positions table is built only when it is the one handed over.
        let options = self.pnl_options(&config, table == PnlTable::Positions);
        let mut rows = 0u64;
        let mut write = |part: PnlReport| {
            let frame = table.of(part);
            rows += frame.height() as u64;
            sink(frame)
        };
        let source = PnlSource::Lake(self.lake);
        pnl::pnl_report_batches(source, &options, pnl::REPORT_CHUNK, &mut write)?;
        if rows == 0 {
            sink(table.of(PnlReport::empty(&config)?))?;
        }
        warnings.extend(self.no_trades_note(rows as usize));
        Ok(Answer {
            value: rows,
            coverage,
            warnings,
            version,
        })
    }

    /// What every PnL answer does first: the version, the selection and options checked, the
    /// coverage of the selected wallets (strict refuses here, before the lake is read).
    fn pnl_start(&self, config: &PnlConfig) -> Result<(u64, Coverage, Vec<Warning>)> {
        let version = self.version()?;
        self.pnl_selection("PnL")?;
        config.validate()?;
        let token = match self.tokens.as_deref() {
            Some([token]) => Some(token.as_str()),
            _ => None,
        };
        let coverage = coverage::of_wallets(self.lake, self.wallets.as_deref(), token)?;
        let warnings = answer::coverage_warnings(&coverage, self.strict)?;
        Ok((version, coverage, warnings))
    }

    /// The note of one selected wallet without trades (in the one selected token).
    fn no_trades_note(&self, rows: usize) -> Option<Warning> {
        let (0, Some([wallet])) = (rows, self.wallets.as_deref()) else {
            return None;
        };
        let of = match self.tokens.as_deref() {
            Some([token]) => format!(" in token {token}"),
            _ => String::new(),
        };
        Some(Warning::new(
            WarningKind::Empty,
            format!("no trades of wallet {wallet}{of} in the lake"),
        ))
    }

    /// The `top` wallets of the lake by total PnL (FIFO, latest marks), largest first.
    pub fn leaderboard(&self, top: usize) -> Result<DataFrame> {
        self.leaderboard_with(top, &PnlConfig::default())
    }

    /// [`Query::leaderboard`] under `config`.
    pub fn leaderboard_with(&self, top: usize, config: &PnlConfig) -> Result<DataFrame> {
        Ok(self.leaderboard_covered(top, config)?.value)
    }

    /// [`Query::leaderboard_with`] as an [`Answer`], with the coverage of every wallet's
    /// trades. The leaderboard ranks every wallet: a selection of tokens or wallets is
    /// refused.
    pub fn leaderboard_covered(&self, top: usize, config: &PnlConfig) -> Result<Answer<DataFrame>> {
        if self.tokens.is_some() || self.wallets.is_some() {
            self.pnl_selection("the leaderboard")?;
            return Err(refused(
                "selection",
                "the leaderboard ranks every wallet of the lake: select no token or wallet",
            ));
        }
        let version = self.version()?;
        self.pnl_selection("the leaderboard")?;
        config.validate()?;
        let coverage = coverage::of_wallets(self.lake, None, None)?;
        let warnings = answer::coverage_warnings(&coverage, self.strict)?;
        let options = PnlOptions {
            config: *config,
            ..PnlOptions::default()
        };
        let value = pnl::leaderboard(PnlSource::Lake(self.lake), &options, top)?;
        Ok(Answer {
            value,
            coverage,
            warnings,
            version,
        })
    }

    /// The equity curve of the one selected wallet, marked at each period's close, and the
    /// metrics of its returns (Sharpe, Sortino, drawdown, win rate, profit factor).
    pub fn performance(
        &self,
        config: &PnlConfig,
        equity: &EquityConfig,
    ) -> Result<WalletPerformance> {
        Ok(self.performance_covered(config, equity)?.value)
    }

    /// [`Query::performance`] as an [`Answer`], with the coverage of the wallet's trades. A
    /// wallet without trades is a [`WarningKind::Empty`] note.
    pub fn performance_covered(
        &self,
        config: &PnlConfig,
        equity: &EquityConfig,
    ) -> Result<Answer<WalletPerformance>> {
        let version = self.version()?;
        self.pnl_selection("performance")?;
        let wallet = match self.wallets.as_deref() {
            Some([wallet]) => wallet,
            _ => return Err(refused("wallet", "performance is of exactly one wallet")),
        };
        if self.tokens.is_some() {
            return Err(refused(
                "token",
                "performance covers every token of the wallet",
            ));
        }
        // Refused before the lake is read.
        config.validate()?;
        equity.validate()?;
        let coverage = coverage::of_wallets(self.lake, self.wallets.as_deref(), None)?;
        let mut warnings = answer::coverage_warnings(&coverage, self.strict)?;
        let options = PnlOptions {
            config: *config,
            equity: *equity,
            ..PnlOptions::of_wallet(wallet)
        };
        let value = pnl::wallet_performance(PnlSource::Lake(self.lake), &options)?;
        if value.curve.height() == 0 {
            warnings.push(Warning::new(
                WarningKind::Empty,
                format!("no trades of wallet {wallet} in the lake"),
            ));
        }
        Ok(Answer {
            value,
            coverage,
            warnings,
            version,
        })
    }

    /// The PnL's options of this query: its wallets, its token when it selects one (with
    /// several, every token's PnL is computed and [`Query::keep_tokens`] keeps them), `config`,
    /// and the positions table when `positions`.
    fn pnl_options(&self, config: &PnlConfig, positions: bool) -> PnlOptions {
        PnlOptions {
            wallets: self.wallets.clone(),
            token: match self.tokens.as_deref() {
                Some([token]) => Some(token.clone()),
                _ => None,
            },
            config: *config,
            positions,
            events_at_once: self.events_at_once,
            ..PnlOptions::default()
        }
    }

    /// With several tokens selected, the PnL of every token is computed and these kept.
    fn keep_tokens(&self, mut report: PnlReport) -> Result<PnlReport> {
        let Some(tokens) = self.tokens.as_deref().filter(|t| t.len() > 1) else {
            return Ok(report);
        };
        let set = Series::new("tokens".into(), tokens);
        let keep = |df: DataFrame| -> Result<DataFrame> {
            df.lazy()
                .filter(col(token::TOKEN).is_in(lit(set.clone()).implode(false), false))
                .collect()
                .map_err(Error::polars("selecting the PnL of the tokens asked for"))
        };
        report.ledgers = keep(report.ledgers)?;
        report.positions = keep(report.positions)?;
        report.lots = report.lots.map(keep).transpose()?;
        Ok(report)
    }

    fn pnl_selection(&self, what: &str) -> Result<()> {
        self.no_range(what, "it is computed over each wallet's whole history")?;
        self.no_blank_address()?;
        if self.pool.is_some() {
            return Err(refused(
                "pool",
                format!("{what} is per wallet and token, not per pool"),
            ));
        }
        if self.source != EventSource::Swaps || self.series.is_some() {
            return Err(refused(
                "source",
                format!("{what} reads trades, and swaps for wallets with no trades, by itself"),
            ));
        }
        Ok(())
    }
}
