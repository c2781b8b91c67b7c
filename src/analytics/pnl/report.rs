//! The report tables of computed ledgers (ledgers, positions, lots), built chunk by chunk of
//! ledgers so that only one chunk's ledgers are held at once.

use polars::prelude::*;

use super::ledger::{Ledger, LedgerSet, LotMatch};
use super::options::PnlConfig;
use crate::{Error, Result};

/// The outputs of a PnL computation.
#[derive(Debug, Clone)]
pub struct PnlReport {
    /// One row per (wallet, token): see [`PnlReport::LEDGER_COLUMNS`].
    pub ledgers: DataFrame,
    /// One row per position: `wallet_address`, `token_address`, `position_index`,
    /// `opened_at`, `closed_at` (null while open), `status` (`open`/`closed`), `realized_pnl`,
    /// `outcome` (`win`, `loss`, `even`, or null while open).
    pub positions: DataFrame,
    /// The lots table when [`PnlConfig::lots`] is set: `wallet_address`, `token_address`,
    /// `sell_id`, `sell_time`, `buy_id` and `buy_time` (null for an oversold part),
    /// `quantity`, `cost_basis`, `proceeds`, `realized_pnl`.
    pub lots: Option<DataFrame>,
}

impl PnlReport {
    /// Columns of [`PnlReport::ledgers`], in order.
    pub const LEDGER_COLUMNS: [&'static str; 26] = [
        "wallet_address",
        "token_address",
        "method",
        "buy_count",
        "sell_count",
        "bought_quantity",
        "sold_quantity",
        "open_quantity",
        "buy_cost",
        "sell_proceeds",
        "cost_basis",
        "mark_price",
        "realized_pnl",
        "unrealized_pnl",
        "total_pnl",
        "fees",
        "realized_pnl_net",
        "roi",
        "realized_roi",
        "avg_holding_seconds",
        "positions_opened",
        "positions_closed",
        "wins",
        "losses",
        "oversold_quantity",
        "ignored_quantity",
    ];
}

pub(super) fn ts_col(name: &str, values: Vec<Option<i64>>) -> Result<Column> {
    Series::new(name.into(), values)
        .cast(&DataType::Datetime(
            TimeUnit::Microseconds,
            Some(TimeZone::UTC),
        ))
        .map(Column::from)
        .map_err(Error::polars(name))
}

pub(super) fn pct(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| 100.0 * a / b)
}

/// Builds the report frames of computed ledgers (ledger `k` of `set` is `ledgers[k]`).
pub(super) fn report(set: &LedgerSet, ledgers: &[Ledger], config: &PnlConfig) -> Result<PnlReport> {
    report_range(set, 0, ledgers, config, true)
}

/// Ledgers run and reported this many at a time by [`pnl_report`](super::pnl_report), and
/// handed over this many at a time by the query's batches.
pub const REPORT_CHUNK: usize = 1 << 16;

/// Runs the ledgers of `set` and builds their report `chunk` ledgers at a time: only one
/// chunk's [`Ledger`]s (their lots, positions and matches) are held at once, the report's rows
/// of the others are. The frames are those of [`LedgerSet::run`] then [`report`], in ledger
/// order; without `positions` the positions table has no row.
pub(super) fn run_report_in(
    set: &LedgerSet,
    config: &PnlConfig,
    chunk: usize,
    positions: bool,
) -> Result<PnlReport> {
    let mut out: Option<PnlReport> = None;
    report_chunks(set, config, chunk, positions, |part| match out.as_mut() {
        None => {
            out = Some(part);
            Ok(())
        }
        Some(all) => all.append(part),
    })?;
    match out {
        Some(all) => Ok(all),
        None => report(set, &[], config),
    }
}

/// Runs the ledgers of `set` `chunk` at a time and hands each chunk's report to `sink`, in
/// ledger order; `sink` is not called when there is no ledger. Without `positions`, the
/// positions tables are left empty (their columns, no row).
///
/// The next chunk is run and reported while `sink` takes the one before (a writer encoding a
/// file, most often), so at most two chunks' reports are held at once. The first error, of a
/// chunk or of `sink`, stops the others.
pub(super) fn report_chunks(
    set: &LedgerSet,
    config: &PnlConfig,
    chunk: usize,
    positions: bool,
    mut sink: impl FnMut(PnlReport) -> Result<()>,
) -> Result<()> {
    let chunk = chunk.max(1);
    std::thread::scope(|scope| {
        // A rendezvous: the next chunk waits, built, until `sink` asks for it.
        let (parts, received) = std::sync::mpsc::sync_channel::<Result<PnlReport>>(0);
        scope.spawn(move || {
            for start in (0..set.len()).step_by(chunk) {
                let range = start..(start + chunk).min(set.len());
                let part = if positions || config.lots {
                    set.run_range(range, config).and_then(|ledgers| {
                        let part = report_range(set, start, &ledgers, config, positions);
                        drop_in_background(ledgers);
                        part
                    })
                } else {
                    // Only the ledgers table: each ledger's row is taken as it is run.
                    set.run_rows(range, config, |k, l| LedgerRow::of(set, k, l, config))
                        .and_then(|rows| report_rows(set, start, &rows, &[], config, false))
                };
                let failed = part.is_err();
                // A closed channel: `sink` failed, and its error is the one returned.
                if parts.send(part).is_err() || failed {
                    break;
                }
            }
        });
        // On an error the receiver is dropped before the scope waits for the chunks' thread,
        // which then stops at its next hand-over.
        for part in received {
            sink(part?)?;
        }
        Ok(())
    })
}

impl PnlReport {
    /// The tables of no ledger: their columns, no row (the lots table when `config.lots` is
    /// set).
    pub fn empty(config: &PnlConfig) -> Result<PnlReport> {
        report(&LedgerSet::default(), &[], config)
    }

    /// Appends the rows of `other`, a report of the next ledgers.
    fn append(&mut self, other: PnlReport) -> Result<()> {
        let stack = |a: &mut DataFrame, b: &DataFrame, what: &str| {
            a.vstack_mut(b).map(drop).map_err(Error::polars(what))
        };
        stack(
            &mut self.ledgers,
            &other.ledgers,
            "stacking the ledgers table",
        )?;
        stack(
            &mut self.positions,
            &other.positions,
            "stacking the positions table",
        )?;
        if let (Some(a), Some(b)) = (self.lots.as_mut(), other.lots.as_ref()) {
            stack(a, b, "stacking the lots table")?;
        }
        Ok(())
    }
}

/// The row of one computed ledger in the ledgers table, but its names and method.
struct LedgerRow {
    mark: Option<f64>,
    unrealized: Option<f64>,
    total: Option<f64>,
    roi: Option<f64>,
    buy_count: u64,
    sell_count: u64,
    bought: f64,
    sold: f64,
    open: f64,
    buy_cost: f64,
    proceeds: f64,
    cost_basis: f64,
    realized: f64,
    fees: f64,
    net: f64,
    realized_roi: Option<f64>,
    holding: Option<f64>,
    opened: u64,
    closed: u64,
    wins: u64,
    losses: u64,
    oversold: f64,
    ignored: f64,
}

impl LedgerRow {
    /// The row of `l`, ledger `k` of `set`, computed under `config`.
    fn of(set: &LedgerSet, k: usize, l: &Ledger, config: &PnlConfig) -> LedgerRow {
        let m = set.mark_of_ledger(k, config.mark);
        let u = if l.open_quantity() == 0.0 {
            Some(l.unrealized(0.0))
        } else {
            m.map(|m| l.unrealized(m))
        };
        let (wins, losses) = l.wins_losses();
        LedgerRow {
            mark: m,
            unrealized: u,
            total: u.map(|u| l.realized + u),
            roi: u.and_then(|u| pct(l.realized + u, l.buy_cost)),
            buy_count: l.buys,
            sell_count: l.sells,
            bought: l.buy_quantity,
            sold: l.sold_quantity,
            open: l.open_quantity(),
            buy_cost: l.buy_cost,
            proceeds: l.proceeds,
            cost_basis: l.open_cost(),
            realized: l.realized,
            fees: l.fees,
            net: l.realized - l.fees,
            realized_roi: pct(l.realized, l.sold_cost),
            holding: l.holding_seconds(),
            opened: l.positions.len() as u64,
            closed: l.positions.iter().filter(|p| p.closed_at.is_some()).count() as u64,
            wins,
            losses,
            oversold: l.oversold_quantity,
            ignored: l.ignored_quantity,
        }
    }
}

/// [`report`] of `ledgers`, the computed ledgers `start..start + ledgers.len()` of `set`.
fn report_range(
    set: &LedgerSet,
    start: usize,
    ledgers: &[Ledger],
    config: &PnlConfig,
    positions: bool,
) -> Result<PnlReport> {
    let rows: Vec<LedgerRow> = ledgers
        .iter()
        .enumerate()
        .map(|(k, l)| LedgerRow::of(set, start + k, l, config))
        .collect();
    report_rows(set, start, &rows, ledgers, config, positions)
}

/// The report of the ledgers `start..start + rows.len()` of `set`, of their `rows`: the
/// positions and lots tables are those of `ledgers`, the computed ledgers (none when neither
/// table is asked for).
fn report_rows(
    set: &LedgerSet,
    start: usize,
    rows: &[LedgerRow],
    ledgers: &[Ledger],
    config: &PnlConfig,
    positions: bool,
) -> Result<PnlReport> {
    let n = rows.len();
    // The ledgers' wallets and tokens once; the other tables take rows of them, which shares
    // the strings instead of copying them.
    let wallet_ca = StringChunked::from_iter_values(
        "wallet_address".into(),
        (start..start + n).map(|k| set.wallet(k)),
    );
    let token_ca = StringChunked::from_iter_values(
        "token_address".into(),
        (start..start + n).map(|k| set.token(k)),
    );
    let by_ledger = |idx: &[IdxSize]| -> Result<(Column, Column)> {
        let w = wallet_ca
            .take(idx)
            .map_err(Error::polars("wallet_address"))?;
        let t = token_ca.take(idx).map_err(Error::polars("token_address"))?;
        Ok((w.into_column(), t.into_column()))
    };
    // The three tables are built at the same time.
    let ledgers_table = || -> Result<DataFrame> {
        let f = |v: fn(&LedgerRow) -> f64| rows.iter().map(v).collect::<Vec<f64>>();
        let o = |v: fn(&LedgerRow) -> Option<f64>| rows.iter().map(v).collect::<Vec<_>>();
        let c = |v: fn(&LedgerRow) -> u64| rows.iter().map(v).collect::<Vec<u64>>();
        let cols = vec![
            wallet_ca.clone().into_column(),
            token_ca.clone().into_column(),
            Column::new("method".into(), vec![config.method.as_str(); n]),
            Column::new("buy_count".into(), c(|r| r.buy_count)),
            Column::new("sell_count".into(), c(|r| r.sell_count)),
            Column::new("bought_quantity".into(), f(|r| r.bought)),
            Column::new("sold_quantity".into(), f(|r| r.sold)),
            Column::new("open_quantity".into(), f(|r| r.open)),
            Column::new("buy_cost".into(), f(|r| r.buy_cost)),
            Column::new("sell_proceeds".into(), f(|r| r.proceeds)),
            Column::new("cost_basis".into(), f(|r| r.cost_basis)),
            Column::new("mark_price".into(), o(|r| r.mark)),
            Column::new("realized_pnl".into(), f(|r| r.realized)),
            Column::new("unrealized_pnl".into(), o(|r| r.unrealized)),
            Column::new("total_pnl".into(), o(|r| r.total)),
            Column::new("fees".into(), f(|r| r.fees)),
            Column::new("realized_pnl_net".into(), f(|r| r.net)),
            Column::new("roi".into(), o(|r| r.roi)),
            Column::new("realized_roi".into(), o(|r| r.realized_roi)),
            Column::new("avg_holding_seconds".into(), o(|r| r.holding)),
            Column::new("positions_opened".into(), c(|r| r.opened)),
            Column::new("positions_closed".into(), c(|r| r.closed)),
            Column::new("wins".into(), c(|r| r.wins)),
            Column::new("losses".into(), c(|r| r.losses)),
            Column::new("oversold_quantity".into(), f(|r| r.oversold)),
            Column::new("ignored_quantity".into(), f(|r| r.ignored)),
        ];
        DataFrame::new(n, cols).map_err(Error::polars("building the ledgers table"))
    };
    let positions_table = || -> Result<DataFrame> {
        let ledgers = if positions { ledgers } else { &[] };
        let np: usize = ledgers.iter().map(|l| l.positions.len()).sum();
        let mut pk: Vec<IdxSize> = Vec::with_capacity(np);
        let (mut pi, mut po, mut pc) = (
            Vec::with_capacity(np),
            Vec::with_capacity(np),
            Vec::with_capacity(np),
        );
        let (mut ps, mut pr, mut pout) = (
            Vec::with_capacity(np),
            Vec::with_capacity(np),
            Vec::with_capacity(np),
        );
        for (k, l) in ledgers.iter().enumerate() {
            for (i, p) in l.positions.iter().enumerate() {
                pk.push(k as IdxSize);
                pi.push(i as u32);
                po.push(Some(p.opened_at));
                pc.push(p.closed_at);
                ps.push(if p.closed_at.is_some() {
                    "closed"
                } else {
                    "open"
                });
                pr.push(p.realized);
                pout.push(p.closed_at.map(|_| {
                    if p.realized > 0.0 {
                        "win"
                    } else if p.realized < 0.0 {
                        "loss"
                    } else {
                        "even"
                    }
                }));
            }
        }
        let (pw, pt) = by_ledger(&pk)?;
        DataFrame::new(
            np,
            vec![
                pw,
                pt,
                Column::new("position_index".into(), pi),
                ts_col("opened_at", po)?,
                ts_col("closed_at", pc)?,
                Column::new("status".into(), ps),
                Column::new("realized_pnl".into(), pr),
                Column::new("outcome".into(), pout),
            ],
        )
        .map_err(Error::polars("building the positions table"))
    };
    let lots_table = || -> Result<Option<DataFrame>> {
        if config.lots {
            let mut rows: Vec<(usize, LotMatch)> = Vec::new();
            for (k, l) in ledgers.iter().enumerate() {
                for m in l.lots.iter().flatten() {
                    rows.push((k, *m));
                }
            }
            let nl = rows.len();
            let idx: Vec<IdxSize> = rows.iter().map(|(k, _)| *k as IdxSize).collect();
            let (lw, lt) = by_ledger(&idx)?;
            Ok(Some(
                DataFrame::new(
                    nl,
                    vec![
                        lw,
                        lt,
                        Column::new(
                            "sell_id".into(),
                            rows.iter().map(|(_, m)| m.sell_id).collect::<Vec<_>>(),
                        ),
                        ts_col(
                            "sell_time",
                            rows.iter().map(|(_, m)| Some(m.sell_time)).collect(),
                        )?,
                        Column::new(
                            "buy_id".into(),
                            rows.iter().map(|(_, m)| m.buy_id).collect::<Vec<_>>(),
                        ),
                        ts_col("buy_time", rows.iter().map(|(_, m)| m.buy_time).collect())?,
                        Column::new(
                            "quantity".into(),
                            rows.iter().map(|(_, m)| m.quantity).collect::<Vec<_>>(),
                        ),
                        Column::new(
                            "cost_basis".into(),
                            rows.iter().map(|(_, m)| m.cost).collect::<Vec<_>>(),
                        ),
                        Column::new(
                            "proceeds".into(),
                            rows.iter().map(|(_, m)| m.proceeds).collect::<Vec<_>>(),
                        ),
                        Column::new(
                            "realized_pnl".into(),
                            rows.iter()
                                .map(|(_, m)| m.proceeds - m.cost)
                                .collect::<Vec<_>>(),
                        ),
                    ],
                )
                .map_err(Error::polars("building the lots table"))?,
            ))
        } else {
            Ok(None)
        }
    };
    let (ledgers_df, (positions, lots)) =
        rayon::join(ledgers_table, || rayon::join(positions_table, lots_table));
    let (ledgers_df, positions, lots) = (ledgers_df?, positions?, lots?);
    Ok(PnlReport {
        ledgers: ledgers_df,
        positions,
        lots,
    })
}

/// Drops `value` on a thread of its own: freeing large buffers (unmapping their pages) then
/// does not delay the caller. Dropped in place when no thread can be started.
pub(super) fn drop_in_background<T: Send + 'static>(value: T) {
    drop(std::thread::Builder::new().spawn(move || drop(value)));
}
