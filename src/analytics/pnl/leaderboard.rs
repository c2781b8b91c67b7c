//! The leaderboard: every wallet's PnL summed over its tokens, ranked.

use polars::prelude::*;

use super::ledger::LedgerSet;
use super::options::PnlConfig;
use super::report::{REPORT_CHUNK, drop_in_background, pct};
use crate::analytics::metrics;
use crate::{Error, Result};

/// The leaderboard of grouped events.
pub(super) fn leaderboard_of(set: LedgerSet, config: &PnlConfig, top: usize) -> Result<DataFrame> {
    struct WalletRow {
        wallet: String,
        tokens: u32,
        realized: f64,
        unrealized: f64,
        buy_cost: f64,
        wins: u64,
        losses: u64,
    }
    let mut rows: Vec<WalletRow> = Vec::new();
    // The ledgers run a chunk at a time: only one chunk's books are held at once.
    for start in (0..set.len()).step_by(REPORT_CHUNK) {
        let ledgers = set.run_range(start..(start + REPORT_CHUNK).min(set.len()), config)?;
        for (i, l) in ledgers.iter().enumerate() {
            let k = start + i;
            let m = set.mark_of_ledger(k, config.mark).unwrap_or(0.0);
            let (w, lo) = l.wins_losses();
            match rows.last_mut() {
                Some(r) if r.wallet == set.wallet(k) => {
                    r.tokens += 1;
                    r.realized += l.realized;
                    r.unrealized += l.unrealized(m);
                    r.buy_cost += l.buy_cost;
                    r.wins += w;
                    r.losses += lo;
                }
                _ => rows.push(WalletRow {
                    wallet: set.wallet(k).to_owned(),
                    tokens: 1,
                    realized: l.realized,
                    unrealized: l.unrealized(m),
                    buy_cost: l.buy_cost,
                    wins: w,
                    losses: lo,
                }),
            }
        }
        drop_in_background(ledgers);
    }
    drop_in_background(set);
    rows.sort_by(|a, b| {
        (b.realized + b.unrealized)
            .total_cmp(&(a.realized + a.unrealized))
            .then_with(|| a.wallet.cmp(&b.wallet))
    });
    rows.truncate(top);
    let n = rows.len();
    DataFrame::new(
        n,
        vec![
            Column::new("rank".into(), (1..=n as u32).collect::<Vec<_>>()),
            Column::new(
                "wallet_address".into(),
                rows.iter().map(|r| r.wallet.as_str()).collect::<Vec<_>>(),
            ),
            Column::new(
                "tokens".into(),
                rows.iter().map(|r| r.tokens).collect::<Vec<_>>(),
            ),
            Column::new(
                "realized_pnl".into(),
                rows.iter().map(|r| r.realized).collect::<Vec<_>>(),
            ),
            Column::new(
                "unrealized_pnl".into(),
                rows.iter().map(|r| r.unrealized).collect::<Vec<_>>(),
            ),
            Column::new(
                "total_pnl".into(),
                rows.iter()
                    .map(|r| r.realized + r.unrealized)
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "buy_cost".into(),
                rows.iter().map(|r| r.buy_cost).collect::<Vec<_>>(),
            ),
            Column::new(
                "roi".into(),
                rows.iter()
                    .map(|r| pct(r.realized + r.unrealized, r.buy_cost))
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "wins".into(),
                rows.iter().map(|r| r.wins).collect::<Vec<_>>(),
            ),
            Column::new(
                "losses".into(),
                rows.iter().map(|r| r.losses).collect::<Vec<_>>(),
            ),
            Column::new(
                "win_rate".into(),
                rows.iter()
                    .map(|r| {
                        let w = metrics::win_rate(r.wins, r.losses);
                        w.is_finite().then_some(100.0 * w)
                    })
                    .collect::<Vec<_>>(),
            ),
        ],
    )
    .map_err(Error::polars("building the leaderboard"))
}
