//! Trading metrics of a return series and of closed positions (semantics §3).
//!
//! - Sharpe = mean(r − rf) / std(r − rf, ddof 1) × √P; NaN with fewer than two returns (and
//!   when the deviation is 0).
//! - Sortino = mean(r − rf) × √P / √mean(min(r − rf, 0)²), the downside mean taken over every
//!   observation; NaN with fewer than two returns, +∞ without a downside.
//! - `P` (periods per year) and `rf` (risk-free rate per period) are explicit: crypto trades
//!   every day, so daily returns take 365, never a hidden 252.
//! - Max drawdown: the largest fall of the equity curve from its running peak, in percent (≤ 0).
//!   The curve starts at the initial capital, which is the first peak, so a loss in the first
//!   period counts.
//! - [`RatioConfig::validate`] refuses the parameters that make the ratios meaningless.
//! - Win rate = wins / (wins + losses), NaN without either; profit factor = Σ wins / |Σ losses|,
//!   +∞ with wins and no losses, NaN with neither.

use crate::{Error, Result};

/// Mean of `v` (NaN when empty).
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Sample standard deviation (ddof 1); NaN with fewer than two values.
pub fn sample_std(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return f64::NAN;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// Annualised Sharpe ratio of per-period returns.
pub fn sharpe(returns: &[f64], risk_free: f64, periods_per_year: f64) -> f64 {
    if returns.len() < 2 {
        return f64::NAN;
    }
    let excess: Vec<f64> = returns.iter().map(|r| r - risk_free).collect();
    let sd = sample_std(&excess);
    if sd == 0.0 {
        return f64::NAN;
    }
    mean(&excess) / sd * periods_per_year.sqrt()
}

/// Annualised Sortino ratio of per-period returns.
pub fn sortino(returns: &[f64], risk_free: f64, periods_per_year: f64) -> f64 {
    if returns.len() < 2 {
        return f64::NAN;
    }
    let excess: Vec<f64> = returns.iter().map(|r| r - risk_free).collect();
    let downside: Vec<f64> = excess.iter().map(|x| x.min(0.0) * x.min(0.0)).collect();
    mean(&excess) * periods_per_year.sqrt() / mean(&downside).sqrt()
}

/// Max drawdown, percent (≤ 0), of an equity curve that starts at `initial` before `equity`.
pub fn max_drawdown_of_equity(initial: f64, equity: &[f64]) -> f64 {
    let (mut peak, mut worst) = (initial, 0.0f64);
    for &e in equity {
        peak = peak.max(e);
        if peak > 0.0 {
            worst = worst.min(100.0 * (e / peak - 1.0));
        }
    }
    worst
}

/// Max drawdown, percent (≤ 0), of the curve that compounds `returns` from a capital of 1.
pub fn max_drawdown(returns: &[f64]) -> f64 {
    let mut equity = 1.0;
    let curve: Vec<f64> = returns
        .iter()
        .map(|r| {
            equity *= 1.0 + r;
            equity
        })
        .collect();
    max_drawdown_of_equity(1.0, &curve)
}

/// Wins / (wins + losses); NaN without either.
pub fn win_rate(wins: u64, losses: u64) -> f64 {
    if wins + losses == 0 {
        f64::NAN
    } else {
        wins as f64 / (wins + losses) as f64
    }
}

/// Σ wins / |Σ losses|; +∞ with wins and no losses; NaN with neither.
pub fn profit_factor(win_sum: f64, loss_sum: f64) -> f64 {
    if loss_sum == 0.0 {
        if win_sum > 0.0 {
            f64::INFINITY
        } else {
            f64::NAN
        }
    } else {
        win_sum / loss_sum.abs()
    }
}

/// Share of the periods with a positive return among those with a non-zero return.
pub fn period_win_rate(returns: &[f64]) -> f64 {
    let wins = returns.iter().filter(|r| **r > 0.0).count() as u64;
    let losses = returns.iter().filter(|r| **r < 0.0).count() as u64;
    win_rate(wins, losses)
}

/// Profit factor of the periods: Σ positive returns / |Σ negative returns|.
pub fn period_profit_factor(returns: &[f64]) -> f64 {
    let win: f64 = returns.iter().filter(|r| **r > 0.0).sum();
    let loss: f64 = returns.iter().filter(|r| **r < 0.0).sum();
    profit_factor(win, loss)
}

/// The largest risk-free rate per period [`RatioConfig::validate`] accepts: 10⁶, that is
/// 100,000,000 % a period.
pub const MAX_RISK_FREE: f64 = 1e6;

/// The explicit parameters of the annualised ratios; [`RatioConfig::validate`] says which
/// values are accepted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioConfig {
    /// Periods per year (365 for daily returns of markets that trade every day): finite and
    /// > 0.
    pub periods_per_year: f64,
    /// Risk-free rate per period, as a fraction (0.0001 is 0.01 %): finite, above −1 and at
    /// most [`MAX_RISK_FREE`].
    pub risk_free: f64,
}

impl RatioConfig {
    /// Checks the parameters.
    ///
    /// - Periods per year must be finite and > 0: it is annualised by its square root, so 0
    ///   gives ratios of 0, a negative count NaN, and infinity infinite ratios.
    /// - The risk-free rate must be finite, above −1 (a rate of −100 % a period would be a
    ///   riskless asset that loses everything) and at most [`MAX_RISK_FREE`]: no real rate
    ///   comes near 10⁶ a period, and within it the excess returns' squares stay far from
    ///   overflowing, where 1e308 makes the deviation infinite and the ratios 0 or NaN.
    pub fn validate(&self) -> Result<()> {
        let p = self.periods_per_year;
        if !(p.is_finite() && p > 0.0) {
            return Err(Error::InvalidArgument {
                argument: "periods per year".into(),
                reason: format!("{p:?}: must be a finite number > 0 (365 for daily periods)"),
            });
        }
        let r = self.risk_free;
        if !(r.is_finite() && r > -1.0 && r <= MAX_RISK_FREE) {
            return Err(Error::InvalidArgument {
                argument: "risk-free rate".into(),
                reason: format!(
                    "{r:?}: must be a finite rate per period above -1 and at most {MAX_RISK_FREE:e}"
                ),
            });
        }
        Ok(())
    }
}

impl Default for RatioConfig {
    fn default() -> Self {
        RatioConfig {
            periods_per_year: 365.0,
            risk_free: 0.0,
        }
    }
}

/// The metrics of one return series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReturnMetrics {
    /// Annualised Sharpe ratio.
    pub sharpe: f64,
    /// Annualised Sortino ratio.
    pub sortino: f64,
    /// Max drawdown of the compounded returns, percent.
    pub max_drawdown: f64,
    /// Share of winning periods.
    pub period_win_rate: f64,
    /// Profit factor of the periods.
    pub period_profit_factor: f64,
}

impl ReturnMetrics {
    /// Every metric of `returns`.
    pub fn of(returns: &[f64], config: &RatioConfig) -> ReturnMetrics {
        ReturnMetrics {
            sharpe: sharpe(returns, config.risk_free, config.periods_per_year),
            sortino: sortino(returns, config.risk_free, config.periods_per_year),
            max_drawdown: max_drawdown(returns),
            period_win_rate: period_win_rate(returns),
            period_profit_factor: period_profit_factor(returns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn near(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn the_semantics_vector() {
        let r = [0.01, -0.02, 0.03, -0.01, 0.02];
        assert!(near(sharpe(&r, 0.0, 252.0), 4.593220484431883));
        assert!(near(sharpe(&r, 0.0, 365.0), 5.527941708708923));
        assert!(near(sortino(&r, 0.0, 252.0), 9.524704719832526));
        assert!(near(max_drawdown(&r), -2.0));
        assert!(near(period_win_rate(&r), 0.6));
        assert!(near(period_profit_factor(&r), 2.0));
        assert!(near(max_drawdown(&[-0.10, 0.05, 0.02]), -10.0));
    }

    #[test]
    fn edge_cases_are_documented_values() {
        assert!(sharpe(&[0.01], 0.0, 365.0).is_nan());
        assert!(sortino(&[], 0.0, 365.0).is_nan());
        assert_eq!(sortino(&[0.01, 0.02], 0.0, 365.0), f64::INFINITY);
        assert_eq!(profit_factor(3.0, 0.0), f64::INFINITY);
        assert!(profit_factor(0.0, 0.0).is_nan());
        assert!(win_rate(0, 0).is_nan());
        assert_eq!(win_rate(3, 1), 0.75);
        assert_eq!(max_drawdown(&[]), 0.0);
        // The risk-free rate shifts every return.
        let r = [0.02, -0.01, 0.03];
        let shifted: Vec<f64> = r.iter().map(|x| x - 0.001).collect();
        assert!(near(sharpe(&r, 0.001, 365.0), sharpe(&shifted, 0.0, 365.0)));
    }
}
