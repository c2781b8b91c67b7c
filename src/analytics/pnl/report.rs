//! The report tables of computed ledgers (ledgers, positions, lots), built chunk by chunk of
//! ledgers so that only one chunk's ledgers are held at once.

use polars::prelude::*;
use polars_arrow::bitmap::MutableBitmap;

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
/// The next chunks are run and reported while `sink` takes the one before (a writer encoding a
/// file, most often), so at most three chunks' reports are held at once. The first error, of
/// a chunk or of `sink`, stops the others.
pub(super) fn report_chunks(
    set: &LedgerSet,
    config: &PnlConfig,
    chunk: usize,
    positions: bool,
    mut sink: impl FnMut(PnlReport) -> Result<()>,
) -> Result<()> {
    let chunk = chunk.max(1);
    std::thread::scope(|scope| {
        // One chunk waits, built, until `sink` asks for it, while the next is built: the
        // chunks' thread does not stand still while `sink` ends a row group alone.
        let (parts, received) = std::sync::mpsc::sync_channel::<Result<PnlReport>>(1);
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
#[derive(Default)]
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
    // the strings instead of copying them. The names and the numbers are taken at the same
    // time: a chunk is reported while the one before is written, and a part done alone on
    // this thread would leave a core idle.
    let ((wallet_ca, token_ca), numbers) = rayon::join(
        || {
            rayon::join(
                || {
                    StringChunked::from_iter_values(
                        "wallet_address".into(),
                        (start..start + n).map(|k| set.wallet(k)),
                    )
                },
                || {
                    StringChunked::from_iter_values(
                        "token_address".into(),
                        (start..start + n).map(|k| set.token(k)),
                    )
                },
            )
        },
        || LedgerColumns::of(rows).into_columns(),
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
        let mut cols = vec![
            wallet_ca.clone().into_column(),
            token_ca.clone().into_column(),
            Column::new("method".into(), vec![config.method.as_str(); n]),
        ];
        cols.extend(numbers);
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

/// A column of numbers that may be missing: the values (0 where missing) and where they are
/// present.
struct MaybeColumn {
    values: Vec<f64>,
    present: MutableBitmap,
}

impl MaybeColumn {
    fn with_capacity(n: usize) -> MaybeColumn {
        MaybeColumn {
            values: Vec::with_capacity(n),
            present: MutableBitmap::with_capacity(n),
        }
    }

    fn push(&mut self, x: Option<f64>) {
        self.values.push(x.unwrap_or(0.0));
        self.present.push(x.is_some());
    }

    /// The column, unnamed.
    fn into_column(self) -> Column {
        // As polars' builder leaves it: no mask when nothing is missing.
        let present = (self.present.unset_bits() > 0).then(|| self.present.freeze());
        Float64Chunked::from_vec_validity(PlSmallStr::EMPTY, self.values, present).into_column()
    }
}

/// The ledgers table's columns after the names and the method, taken row by row: each row is
/// read once, in order, and its fields appended to their columns. (Taking a column at a time
/// read a chunk's rows, 15 MB at 65,536 ledgers, from memory once per column.)
struct LedgerColumns {
    buy_count: Vec<u64>,
    sell_count: Vec<u64>,
    bought: Vec<f64>,
    sold: Vec<f64>,
    open: Vec<f64>,
    buy_cost: Vec<f64>,
    proceeds: Vec<f64>,
    cost_basis: Vec<f64>,
    mark: MaybeColumn,
    realized: Vec<f64>,
    unrealized: MaybeColumn,
    total: MaybeColumn,
    fees: Vec<f64>,
    net: Vec<f64>,
    roi: MaybeColumn,
    realized_roi: MaybeColumn,
    holding: MaybeColumn,
    opened: Vec<u64>,
    closed: Vec<u64>,
    wins: Vec<u64>,
    losses: Vec<u64>,
    oversold: Vec<f64>,
    ignored: Vec<f64>,
}

impl LedgerColumns {
    /// The columns of `rows`.
    fn of(rows: &[LedgerRow]) -> LedgerColumns {
        let n = rows.len();
        let mut c = LedgerColumns {
            buy_count: Vec::with_capacity(n),
            sell_count: Vec::with_capacity(n),
            bought: Vec::with_capacity(n),
            sold: Vec::with_capacity(n),
            open: Vec::with_capacity(n),
            buy_cost: Vec::with_capacity(n),
            proceeds: Vec::with_capacity(n),
            cost_basis: Vec::with_capacity(n),
            mark: MaybeColumn::with_capacity(n),
            realized: Vec::with_capacity(n),
            unrealized: MaybeColumn::with_capacity(n),
            total: MaybeColumn::with_capacity(n),
            fees: Vec::with_capacity(n),
            net: Vec::with_capacity(n),
            roi: MaybeColumn::with_capacity(n),
            realized_roi: MaybeColumn::with_capacity(n),
            holding: MaybeColumn::with_capacity(n),
            opened: Vec::with_capacity(n),
            closed: Vec::with_capacity(n),
            wins: Vec::with_capacity(n),
            losses: Vec::with_capacity(n),
            oversold: Vec::with_capacity(n),
            ignored: Vec::with_capacity(n),
        };
        for r in rows {
            c.buy_count.push(r.buy_count);
            c.sell_count.push(r.sell_count);
            c.bought.push(r.bought);
            c.sold.push(r.sold);
            c.open.push(r.open);
            c.buy_cost.push(r.buy_cost);
            c.proceeds.push(r.proceeds);
            c.cost_basis.push(r.cost_basis);
            c.mark.push(r.mark);
            c.realized.push(r.realized);
            c.unrealized.push(r.unrealized);
            c.total.push(r.total);
            c.fees.push(r.fees);
            c.net.push(r.net);
            c.roi.push(r.roi);
            c.realized_roi.push(r.realized_roi);
            c.holding.push(r.holding);
            c.opened.push(r.opened);
            c.closed.push(r.closed);
            c.wins.push(r.wins);
            c.losses.push(r.losses);
            c.oversold.push(r.oversold);
            c.ignored.push(r.ignored);
        }
        c
    }

    /// The columns, named as [`PnlReport::LEDGER_COLUMNS`] from the fourth on.
    fn into_columns(self) -> Vec<Column> {
        let numbers = |v: Vec<f64>| Column::new(PlSmallStr::EMPTY, v);
        let counts = |v: Vec<u64>| Column::new(PlSmallStr::EMPTY, v);
        let columns: [Column; PnlReport::LEDGER_COLUMNS.len() - 3] = [
            counts(self.buy_count),
            counts(self.sell_count),
            numbers(self.bought),
            numbers(self.sold),
            numbers(self.open),
            numbers(self.buy_cost),
            numbers(self.proceeds),
            numbers(self.cost_basis),
            self.mark.into_column(),
            numbers(self.realized),
            self.unrealized.into_column(),
            self.total.into_column(),
            numbers(self.fees),
            numbers(self.net),
            self.roi.into_column(),
            self.realized_roi.into_column(),
            self.holding.into_column(),
            counts(self.opened),
            counts(self.closed),
            counts(self.wins),
            counts(self.losses),
            numbers(self.oversold),
            numbers(self.ignored),
        ];
        columns
            .into_iter()
            .zip(&PnlReport::LEDGER_COLUMNS[3..])
            .map(|(c, &name)| c.with_name(name.into()))
            .collect()
    }
}

/// Drops `value` on a thread of its own: freeing large buffers (unmapping their pages) then
/// does not delay the caller. Dropped in place when no thread can be started.
pub(super) fn drop_in_background<T: Send + 'static>(value: T) {
    drop(std::thread::Builder::new().spawn(move || drop(value)));
}
