//! Wallet PnL: one ledger per (wallet, token), cost-basis methods, positions and the lots table.
//!
//! Definitions follow the semantics document (§2):
//! - Events are applied per (wallet, token) in event order `(block_time, block_slot, id)`,
//!   whatever the order of the rows or files they come from.
//! - A buy adds a lot (quantity, USD cost); a sell matches lots. Cost and proceeds are the
//!   trade's `usd_amount`, else `token_price × token_amount`.
//! - [`CostMethod`]: `Fifo` (default), `Lifo`, `Hifo` (highest unit cost first, ties to the
//!   earliest lot) and `AverageCost` (a running weighted average: a sell removes cost at the
//!   current average, so the average changes only at buys).
//! - realized = Σ over sells (proceeds − matched cost); unrealized = open quantity × mark − open
//!   cost. For every method: realized + unrealized = Σ counted proceeds + open quantity × mark −
//!   Σ buy cost.
//! - Selling more than is held follows [`OversellPolicy`] (default `ZeroCost`); the quantity
//!   concerned is reported per ledger (`oversold_quantity`, `ignored_quantity`), never silently.
//! - Fees are reported apart (`fees`); `realized_pnl_net` subtracts them.
//! - [`Ledger::drop_lots`] ends a position that a source marks as closed while lots remain:
//!   they leave the ledger without PnL, reported as `dropped_quantity` and `dropped_cost`.
//! - A position opens when the open quantity rises above the dust threshold and closes when it
//!   returns to it. A closed position with realized PnL > 0 is a win, < 0 a loss.
//! - ROI (percent) = 100 × (realized + unrealized) / Σ buy cost; realized ROI = 100 × realized /
//!   cost of the quantity sold; holding duration = Σ q·(t_sell − t_buy) / Σ q over matched lots,
//!   seconds.
//!
//! Float matching uses a relative tolerance of [`MATCH_TOLERANCE`]: a sell that leaves less
//! than that fraction of a lot consumes the lot, so a wallet selling its whole balance closes
//! its position even when the balance was summed with rounding.
//!
//! Ledgers are independent and run in parallel (rayon); each result depends only on its own
//! events, and results come back in (wallet, token) order, so the output does not depend on
//! the number of threads or on file order.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt;
use std::str::FromStr;

use polars::prelude::*;
use rayon::prelude::*;

use crate::lake::{Dataset, Lake};
use crate::{Error, Result};

use super::metrics;

/// Relative tolerance under which a remaining lot or sell quantity counts as zero.
pub const MATCH_TOLERANCE: f64 = 1e-9;

/// Microseconds per second (lake timestamps are microseconds).
const MICROS: f64 = 1e6;

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

/// Side of a ledger event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The wallet acquired the token.
    Buy,
    /// The wallet disposed of the token.
    Sell,
}

/// One trade of a ledger, as the ledger sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LedgerEvent {
    /// Block time, microseconds since the Unix epoch.
    pub time: i64,
    /// Block slot (or block number).
    pub slot: i64,
    /// Trade or swap id.
    pub id: i64,
    /// Buy or sell.
    pub side: Side,
    /// Token quantity (> 0).
    pub quantity: f64,
    /// USD cost (buy) or proceeds (sell).
    pub usd: f64,
    /// USD fee paid, kept apart from cost and proceeds.
    pub fee: f64,
}

impl LedgerEvent {
    /// The event-order key `(block_time, block_slot, id)`.
    pub fn order_key(&self) -> (i64, i64, i64) {
        (self.time, self.slot, self.id)
    }
}

/// A sell's match against one buy lot (a row of the lots table).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LotMatch {
    /// Id of the sell.
    pub sell_id: i64,
    /// Time of the sell, microseconds.
    pub sell_time: i64,
    /// Id of the buy that made the lot; `None` for the unmatched part of an oversell.
    pub buy_id: Option<i64>,
    /// Time of the buy, microseconds; `None` for the unmatched part.
    pub buy_time: Option<i64>,
    /// Quantity taken from the lot.
    pub quantity: f64,
    /// Cost basis of that quantity, USD.
    pub cost: f64,
    /// Proceeds of that quantity, USD.
    pub proceeds: f64,
}

/// One position: from the quantity rising above dust to its return to dust.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    /// Time of the opening trade, microseconds.
    pub opened_at: i64,
    /// Time of the closing trade; `None` while open.
    pub closed_at: Option<i64>,
    /// Realized PnL of the sells inside the position.
    pub realized: f64,
}

/// A sell of more than was held under [`OversellPolicy::Error`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Oversold {
    /// Id of the sell.
    pub id: i64,
    /// Quantity held before the sell.
    pub held: f64,
    /// Quantity sold.
    pub sold: f64,
}

#[derive(Debug, Clone, Copy)]
struct Lot {
    qty: f64,
    cost: f64,
    time: i64,
    id: i64,
}

/// A lot in the HIFO heap: the highest unit cost first, then the earliest.
#[derive(Debug, Clone, Copy)]
struct HeapLot {
    unit: f64,
    seq: u64,
    lot: Lot,
}

impl PartialEq for HeapLot {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for HeapLot {}
impl PartialOrd for HeapLot {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeapLot {
    fn cmp(&self, other: &Self) -> Ordering {
        self.unit
            .total_cmp(&other.unit)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

#[derive(Debug, Clone)]
enum Book {
    /// FIFO, and the quantity/time queue of the average-cost method.
    Queue(VecDeque<Lot>),
    /// LIFO.
    Stack(Vec<Lot>),
    /// HIFO.
    Heap(BinaryHeap<HeapLot>, u64),
}

impl Book {
    fn new(method: CostMethod) -> Book {
        match method {
            CostMethod::Fifo | CostMethod::AverageCost => Book::Queue(VecDeque::new()),
            CostMethod::Lifo => Book::Stack(Vec::new()),
            CostMethod::Hifo => Book::Heap(BinaryHeap::new(), 0),
        }
    }

    fn push(&mut self, lot: Lot) {
        match self {
            Book::Queue(q) => q.push_back(lot),
            Book::Stack(s) => s.push(lot),
            Book::Heap(h, seq) => {
                h.push(HeapLot {
                    unit: lot.cost / lot.qty,
                    seq: *seq,
                    lot,
                });
                *seq += 1;
            }
        }
    }

    /// Removes and returns the lot the method matches next.
    fn pop_next(&mut self) -> Option<Lot> {
        match self {
            Book::Queue(q) => q.pop_front(),
            Book::Stack(s) => s.pop(),
            Book::Heap(h, _) => h.pop().map(|h| h.lot),
        }
    }

    /// Puts a partly consumed lot back where it was (its unit cost and age are unchanged).
    fn put_back(&mut self, lot: Lot, unit: f64, seq: u64) {
        match self {
            Book::Queue(q) => q.push_front(lot),
            Book::Stack(s) => s.push(lot),
            Book::Heap(h, _) => h.push(HeapLot { unit, seq, lot }),
        }
    }

    /// The ordering fields of the lot [`Book::pop_next`] would return.
    fn next_key(&self) -> (f64, u64) {
        match self {
            Book::Heap(h, _) => h.peek().map_or((0.0, 0), |h| (h.unit, h.seq)),
            _ => (0.0, 0),
        }
    }

    fn clear(&mut self) {
        match self {
            Book::Queue(q) => q.clear(),
            Book::Stack(s) => s.clear(),
            Book::Heap(h, _) => h.clear(),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Book::Queue(q) => q.is_empty(),
            Book::Stack(s) => s.is_empty(),
            Book::Heap(h, _) => h.is_empty(),
        }
    }
}

/// The running state of one (wallet, token) ledger. Apply events in event order with
/// [`Ledger::apply`]; read the totals at any time.
#[derive(Debug, Clone)]
pub struct Ledger {
    method: CostMethod,
    oversell: OversellPolicy,
    dust: f64,
    book: Book,
    open_qty: f64,
    open_cost: f64,
    /// Realized PnL so far.
    pub realized: f64,
    /// Σ buy cost.
    pub buy_cost: f64,
    /// Σ buy quantity.
    pub buy_quantity: f64,
    /// Σ counted sell proceeds.
    pub proceeds: f64,
    /// Cost basis of the quantity sold.
    pub sold_cost: f64,
    /// Σ counted sell quantity.
    pub sold_quantity: f64,
    /// Σ fees.
    pub fees: f64,
    /// Sold beyond the holding and given a zero cost basis.
    pub oversold_quantity: f64,
    /// Sold beyond the holding and left out.
    pub ignored_quantity: f64,
    /// Quantity still held when [`Ledger::drop_lots`] ended the position, left out.
    pub dropped_quantity: f64,
    /// Cost basis of that quantity, left out of PnL.
    pub dropped_cost: f64,
    /// Buys applied.
    pub buys: u64,
    /// Sells applied.
    pub sells: u64,
    hold_qt: f64,
    hold_q: f64,
    /// Positions so far, the last one possibly open.
    pub positions: Vec<Position>,
    /// Matches of sells against lots, when asked for.
    pub lots: Option<Vec<LotMatch>>,
    /// Time of the last event applied, microseconds.
    pub last_time: Option<i64>,
}

impl Ledger {
    /// An empty ledger.
    pub fn new(config: &PnlConfig) -> Ledger {
        Ledger {
            method: config.method,
            oversell: config.oversell,
            dust: config.dust,
            book: Book::new(config.method),
            open_qty: 0.0,
            open_cost: 0.0,
            realized: 0.0,
            buy_cost: 0.0,
            buy_quantity: 0.0,
            proceeds: 0.0,
            sold_cost: 0.0,
            sold_quantity: 0.0,
            fees: 0.0,
            oversold_quantity: 0.0,
            ignored_quantity: 0.0,
            dropped_quantity: 0.0,
            dropped_cost: 0.0,
            buys: 0,
            sells: 0,
            hold_qt: 0.0,
            hold_q: 0.0,
            positions: Vec::new(),
            lots: config.lots.then(Vec::new),
            last_time: None,
        }
    }

    /// Quantity held.
    pub fn open_quantity(&self) -> f64 {
        self.open_qty
    }

    /// Cost basis of the quantity held.
    pub fn open_cost(&self) -> f64 {
        self.open_cost
    }

    /// Unrealized PnL at `mark`.
    pub fn unrealized(&self, mark: f64) -> f64 {
        if self.open_qty == 0.0 {
            -self.open_cost
        } else {
            self.open_qty * mark - self.open_cost
        }
    }

    /// Quantity-weighted holding time of the matched lots, seconds (`None` before any match).
    pub fn holding_seconds(&self) -> Option<f64> {
        (self.hold_q > 0.0).then(|| self.hold_qt / self.hold_q)
    }

    /// Applies one event (events must come in event order). Zero quantities change nothing
    /// but the fees.
    pub fn apply(&mut self, e: &LedgerEvent) -> std::result::Result<(), Oversold> {
        self.fees += e.fee;
        self.last_time = Some(e.time);
        if e.quantity <= 0.0 {
            return Ok(());
        }
        let was_open = self.open_qty > self.dust;
        match e.side {
            Side::Buy => self.buy(e),
            Side::Sell => self.sell(e)?,
        }
        let is_open = self.open_qty > self.dust;
        if !was_open && is_open {
            self.positions.push(Position {
                opened_at: e.time,
                closed_at: None,
                realized: 0.0,
            });
        } else if was_open
            && !is_open
            && let Some(p) = self.positions.last_mut()
        {
            p.closed_at = Some(e.time);
        }
        Ok(())
    }

    fn buy(&mut self, e: &LedgerEvent) {
        self.buys += 1;
        self.buy_cost += e.usd;
        self.buy_quantity += e.quantity;
        self.book.push(Lot {
            qty: e.quantity,
            cost: e.usd,
            time: e.time,
            id: e.id,
        });
        self.open_qty += e.quantity;
        self.open_cost += e.usd;
    }

    fn sell(&mut self, e: &LedgerEvent) -> std::result::Result<(), Oversold> {
        self.sells += 1;
        let q = e.quantity;
        if self.oversell == OversellPolicy::Error && q > self.open_qty * (1.0 + MATCH_TOLERANCE) {
            return Err(Oversold {
                id: e.id,
                held: self.open_qty,
                sold: q,
            });
        }
        let average = (self.method == CostMethod::AverageCost && self.open_qty > 0.0)
            .then(|| self.open_cost / self.open_qty);
        let mut remaining = q;
        let (mut matched_q, mut matched_cost) = (0.0, 0.0);
        while remaining > q * MATCH_TOLERANCE {
            let (unit, seq) = self.book.next_key();
            let Some(mut lot) = self.book.pop_next() else {
                break;
            };
            let whole = remaining >= lot.qty * (1.0 - MATCH_TOLERANCE);
            let take = if whole { lot.qty } else { remaining };
            let cost = match average {
                Some(a) => a * take,
                None if whole => lot.cost,
                None => lot.cost * take / lot.qty,
            };
            let (lot_time, lot_id) = (lot.time, lot.id);
            if !whole {
                lot.cost -= lot.cost * take / lot.qty;
                lot.qty -= take;
                self.book.put_back(lot, unit, seq);
            }
            matched_q += take;
            matched_cost += cost;
            self.hold_qt += take * (e.time - lot_time) as f64 / MICROS;
            self.hold_q += take;
            remaining -= take;
            if let Some(lots) = &mut self.lots {
                lots.push(LotMatch {
                    sell_id: e.id,
                    sell_time: e.time,
                    buy_id: Some(lot_id),
                    buy_time: Some(lot_time),
                    quantity: take,
                    cost,
                    proceeds: e.usd * take / q,
                });
            }
        }
        if self.book.is_empty() {
            self.open_qty = 0.0;
            self.open_cost = 0.0;
        } else {
            self.open_qty -= matched_q;
            self.open_cost -= matched_cost;
        }
        let unmatched = if remaining > q * MATCH_TOLERANCE {
            remaining
        } else {
            0.0
        };
        let counted = match self.oversell {
            OversellPolicy::Ignore => {
                self.ignored_quantity += unmatched;
                q - unmatched
            }
            OversellPolicy::ZeroCost | OversellPolicy::Error => {
                self.oversold_quantity += unmatched;
                if unmatched > 0.0
                    && let Some(lots) = &mut self.lots
                {
                    lots.push(LotMatch {
                        sell_id: e.id,
                        sell_time: e.time,
                        buy_id: None,
                        buy_time: None,
                        quantity: unmatched,
                        cost: 0.0,
                        proceeds: e.usd * unmatched / q,
                    });
                }
                q
            }
        };
        let proceeds = if counted == q {
            e.usd
        } else {
            e.usd * counted / q
        };
        let pnl = proceeds - matched_cost;
        self.proceeds += proceeds;
        self.sold_quantity += counted;
        self.sold_cost += matched_cost;
        self.realized += pnl;
        if let Some(p) = self.positions.last_mut()
            && p.closed_at.is_none()
        {
            p.realized += pnl;
        }
        Ok(())
    }

    /// Ends the position at `time` whatever the quantity still held: the remaining lots are
    /// dropped (their quantity and cost leave the ledger with no PnL and are reported as
    /// `dropped_quantity` and `dropped_cost`) and the open position, if any, closes. For
    /// sources that mark the end of a position explicitly (a trade's `position_state`
    /// `close`) while the ledger may hold lots the source no longer counts.
    pub fn drop_lots(&mut self, time: i64) {
        self.dropped_quantity += self.open_qty;
        self.dropped_cost += self.open_cost;
        self.book.clear();
        self.open_qty = 0.0;
        self.open_cost = 0.0;
        if let Some(p) = self.positions.last_mut()
            && p.closed_at.is_none()
        {
            p.closed_at = Some(time);
        }
    }

    /// Closed positions with realized PnL > 0 and < 0.
    pub fn wins_losses(&self) -> (u64, u64) {
        let closed = self.positions.iter().filter(|p| p.closed_at.is_some());
        closed.fold((0, 0), |(w, l), p| {
            (
                w + u64::from(p.realized > 0.0),
                l + u64::from(p.realized < 0.0),
            )
        })
    }
}

/// Runs a ledger over events already in event order.
pub fn run_ledger(
    events: &[LedgerEvent],
    config: &PnlConfig,
) -> std::result::Result<Ledger, Oversold> {
    let mut ledger = Ledger::new(config);
    for e in events {
        ledger.apply(e)?;
    }
    Ok(ledger)
}

/// Events of many ledgers, grouped: ledger `k` is `(wallets[k], tokens[k])` with events
/// `events[offsets[k]..offsets[k + 1]]` in event order.
#[derive(Debug, Clone, Default)]
pub struct LedgerSet {
    /// Wallet of each ledger.
    pub wallets: Vec<String>,
    /// Token of each ledger.
    pub tokens: Vec<String>,
    /// Start of each ledger's events, plus the end.
    pub offsets: Vec<usize>,
    /// Every event, ledger after ledger.
    pub events: Vec<LedgerEvent>,
    /// Latest trade price of each token (event order, every wallet of the input).
    pub latest_prices: HashMap<String, f64>,
}

impl LedgerSet {
    /// Number of ledgers.
    pub fn len(&self) -> usize {
        self.wallets.len()
    }

    /// Whether there is no ledger.
    pub fn is_empty(&self) -> bool {
        self.wallets.is_empty()
    }

    /// Events of ledger `k`.
    pub fn events_of(&self, k: usize) -> &[LedgerEvent] {
        &self.events[self.offsets[k]..self.offsets[k + 1]]
    }

    /// Runs every ledger in parallel; the results come in ledger order.
    pub fn run(&self, config: &PnlConfig) -> Result<Vec<Ledger>> {
        self.run_range(0..self.len(), config)
    }

    /// Runs the ledgers `range` in parallel; the results come in ledger order.
    fn run_range(&self, range: std::ops::Range<usize>, config: &PnlConfig) -> Result<Vec<Ledger>> {
        range
            .into_par_iter()
            .map(|k| {
                run_ledger(self.events_of(k), config).map_err(|o| Error::Oversell {
                    wallet: self.wallets[k].clone(),
                    token: self.tokens[k].clone(),
                    trade_id: o.id,
                    held: o.held,
                    sold: o.sold,
                })
            })
            .collect()
    }

    /// Frees the events once the ledgers have run: the names and latest prices stay.
    fn release_events(&mut self) {
        self.events = Vec::new();
        self.offsets = Vec::new();
    }

    /// The mark of `token` under `mark` (`None` when the latest price is unknown).
    pub fn mark_of(&self, token: &str, mark: Mark) -> Option<f64> {
        match mark {
            Mark::Price(p) => Some(p),
            Mark::Latest => self.latest_prices.get(token).copied(),
        }
    }
}

/// Which ledgers to compute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PnlQuery {
    /// Only these wallets (every wallet when `None`).
    pub wallets: Option<Vec<String>>,
    /// Only this token.
    pub token: Option<String>,
}

/// Columns read from the trades dataset.
pub const TRADE_COLUMNS: [&str; 9] = [
    "wallet_address",
    "token_address",
    "direction",
    "token_amount",
    "usd_amount",
    "token_price",
    "block_time",
    "block_slot",
    "id",
];

/// Columns read from the swaps dataset.
pub const SWAP_COLUMNS: [&str; 12] = [
    "wallet_address",
    "swap_type",
    "token_address_in",
    "token_address_out",
    "token_amount_in",
    "token_amount_out",
    "token_price_in",
    "token_price_out",
    "usd_amount_in",
    "usd_amount_out",
    "block_time",
    "block_slot",
];

/// A column as floats (cast when needed); nulls become NaN.
pub(crate) fn f64_col(df: &DataFrame, name: &str) -> Result<Vec<f64>> {
    let c = df
        .column(name)
        .and_then(|c| c.cast(&DataType::Float64))
        .map_err(Error::polars(name))?;
    let ca = c.f64().map_err(Error::polars(name))?;
    let mut out = Vec::with_capacity(ca.len());
    for arr in ca.downcast_iter() {
        if nulls(arr) == 0 {
            out.extend_from_slice(arr.values());
        } else {
            out.extend(arr.iter().map(|v| v.copied().unwrap_or(f64::NAN)));
        }
    }
    Ok(out)
}

/// A column as integers (cast when needed, timestamps as their count); nulls become 0.
pub(crate) fn i64_col(df: &DataFrame, name: &str) -> Result<Vec<i64>> {
    let c = df
        .column(name)
        .and_then(|c| c.cast(&DataType::Int64))
        .map_err(Error::polars(name))?;
    let ca = c.i64().map_err(Error::polars(name))?;
    let mut out = Vec::with_capacity(ca.len());
    for arr in ca.downcast_iter() {
        if nulls(arr) == 0 {
            out.extend_from_slice(arr.values());
        } else {
            out.extend(arr.iter().map(|v| v.copied().unwrap_or(0)));
        }
    }
    Ok(out)
}

/// A string column; nulls become empty strings.
pub(crate) fn str_col<'a>(df: &'a DataFrame, name: &str) -> Result<Vec<&'a str>> {
    let ca = df
        .column(name)
        .and_then(|c| c.str())
        .map_err(Error::polars(name))?;
    Ok(ca.iter().map(|v| v.unwrap_or("")).collect())
}

/// The array of a string column once it is one chunk.
type StrArray = <StringType as PolarsDataType>::Array;

/// A string column as one chunk (no copy when it already is one).
fn str_chunk<'a>(df: &'a DataFrame, name: &str) -> Result<Cow<'a, StringChunked>> {
    let ca = df
        .column(name)
        .and_then(|c| c.str())
        .map_err(Error::polars(name))?;
    Ok(ca.rechunk())
}

/// Row `i` of a string array; a null reads as the empty string.
#[inline]
fn str_at(arr: &StrArray, i: usize) -> &str {
    arr.get(i).unwrap_or("")
}

/// Null count of one array of a column.
fn nulls<A: StaticArray>(arr: &A) -> usize {
    arr.null_count()
}

/// Rows per range of the parallel passes over rows. Ranges depend on the row count only.
const RANGE: usize = 1 << 18;

/// The ranges of `n` rows.
fn ranges(n: usize) -> impl IndexedParallelIterator<Item = std::ops::Range<usize>> {
    (0..n.div_ceil(RANGE))
        .into_par_iter()
        .map(move |r| r * RANGE..((r + 1) * RANGE).min(n))
}

/// The local dictionary of one range of rows: its distinct keys in first-seen order, and each
/// row's index among them (`u32::MAX` for a row without a key).
type Part<K> = (Vec<K>, Vec<u32>);

/// Local dictionaries of the keys of `n` rows, one per range, built in parallel.
fn local_dicts<K>(n: usize, key: impl Fn(usize) -> Option<K> + Sync) -> Vec<Part<K>>
where
    K: Copy + Eq + std::hash::Hash + Send,
{
    ranges(n)
        .map(|range| {
            let mut map: PlHashMap<K, u32> = PlHashMap::default();
            let mut names: Vec<K> = Vec::new();
            let ids = range
                .map(|i| match key(i) {
                    None => u32::MAX,
                    Some(k) => *map.entry(k).or_insert_with(|| {
                        names.push(k);
                        (names.len() - 1) as u32
                    }),
                })
                .collect();
            (names, ids)
        })
        .collect()
}

/// Merges local dictionaries (of one or more columns): the distinct keys, sorted, and for each
/// column the rank of each row's key among them (`u32::MAX` kept for rows without a key). The
/// ranks do not depend on how the rows were split, so not on the number of threads.
fn merge_dicts<K>(columns: Vec<Vec<Part<K>>>) -> (Vec<K>, Vec<Vec<u32>>)
where
    K: Copy + Ord + std::hash::Hash + Send + Sync,
{
    let mut seen: PlHashSet<K> = PlHashSet::default();
    for (names, _) in columns.iter().flatten() {
        seen.extend(names.iter().copied());
    }
    let mut dict: Vec<K> = seen.into_iter().collect();
    dict.sort_unstable();
    let rank: PlHashMap<K, u32> = dict
        .iter()
        .enumerate()
        .map(|(k, s)| (*s, k as u32))
        .collect();
    let ids = columns
        .into_iter()
        .map(|parts| {
            let ranges: Vec<Vec<u32>> = parts
                .into_par_iter()
                .map(|(names, ids)| {
                    let to: Vec<u32> = names.iter().map(|s| rank[s]).collect();
                    relabel(ids, &to)
                })
                .collect();
            ranges.concat()
        })
        .collect();
    (dict, ids)
}

/// The distinct strings of some string arrays, sorted, and for each array the index of each
/// row's string among them (nulls read as the empty string). Each range of rows is interned
/// with a small dictionary of its own ([`StrDict`]), in parallel, and the dictionaries are
/// then merged ([`merge_strs`]).
fn intern<'a>(arrays: &[&'a StrArray]) -> (Vec<&'a str>, Vec<Vec<u32>>) {
    let parts = arrays
        .iter()
        .map(|&arr| {
            let no_nulls = nulls(arr) == 0;
            ranges(arr.len())
                .map(|range| {
                    let mut dict = StrDict::default();
                    let ids = if no_nulls {
                        dict.ids(range, |i| arr.value(i).as_bytes())
                    } else {
                        dict.ids(range, |i| str_at(arr, i).as_bytes())
                    };
                    let names = dict
                        .first
                        .iter()
                        .map(|&i| str_at(arr, i as usize))
                        .collect();
                    (names, ids)
                })
                .collect()
        })
        .collect();
    merge_strs(parts)
}

/// Local ids replaced by `to[id]`; `u32::MAX` (no key) kept.
fn relabel(mut ids: Vec<u32>, to: &[u32]) -> Vec<u32> {
    for id in &mut ids {
        if *id != u32::MAX {
            *id = to[*id as usize];
        }
    }
    ids
}

/// [`merge_dicts`] for strings: the local dictionaries' names are interned once more, into
/// one [`StrDict`], instead of hashed twice.
fn merge_strs(columns: Vec<Vec<Part<&str>>>) -> (Vec<&str>, Vec<Vec<u32>>) {
    let mut all = StrDict::default();
    let mut names: Vec<&str> = Vec::new();
    let globals: Vec<Vec<Vec<u32>>> = columns
        .iter()
        .map(|parts| {
            parts
                .iter()
                .map(|(local, _)| {
                    local
                        .iter()
                        .map(|s| {
                            let id = all.id(s.as_bytes());
                            if id as usize == names.len() {
                                names.push(s);
                            }
                            id
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut order: Vec<u32> = (0..names.len() as u32).collect();
    order.sort_unstable_by_key(|&k| names[k as usize]);
    let mut rank = vec![0u32; names.len()];
    for (r, &k) in order.iter().enumerate() {
        rank[k as usize] = r as u32;
    }
    let dict = order.iter().map(|&k| names[k as usize]).collect();
    let ids = columns
        .into_iter()
        .zip(globals)
        .map(|(parts, globals)| {
            let ranges: Vec<Vec<u32>> = parts
                .into_par_iter()
                .zip(globals)
                .map(|((_, ids), global)| {
                    let to: Vec<u32> = global.iter().map(|&g| rank[g as usize]).collect();
                    relabel(ids, &to)
                })
                .collect();
            ranges.concat()
        })
        .collect();
    (dict, ids)
}

/// Keys looked up together by [`StrDict::ids`]: their table slots are read before any is
/// compared, so that the memory reads of several keys overlap.
const BATCH: usize = 16;

/// The local dictionary of the strings of one range of rows: an open-addressing table whose
/// slots hold 24 bits of the key's hash and where the key's record starts (+ 1; 0 when
/// empty); a record is the key's length and id (4 bytes each) and its bytes, records one
/// after another. A lookup reads one slot and one record instead of the string where the
/// frame holds it. Ids are given in first-seen order.
#[derive(Default)]
struct StrDict {
    slots: Vec<u64>,
    records: Vec<u8>,
    /// Hash and record start of each key.
    keys: Vec<(u64, u64)>,
    /// Row of each key's first occurrence (for [`StrDict::ids`]).
    first: Vec<u32>,
}

/// Bits of a slot that hold the record's start (+ 1).
const RECORD_BITS: u32 = 40;

impl StrDict {
    /// The ids of the strings of the rows `range` (`key(i)` is the string of row `i`).
    fn ids<'k>(
        &mut self,
        range: std::ops::Range<usize>,
        key: impl Fn(usize) -> &'k [u8],
    ) -> Vec<u32> {
        let mut out = Vec::with_capacity(range.len());
        let (mut hashes, mut slots) = ([0u64; BATCH], [0u64; BATCH]);
        let mut start = range.start;
        while start < range.end {
            let m = BATCH.min(range.end - start);
            for (j, h) in hashes[..m].iter_mut().enumerate() {
                *h = hash_bytes(key(start + j));
            }
            if self.slots.is_empty() {
                self.grow();
            }
            let mask = self.slots.len() - 1;
            for (s, &h) in slots[..m].iter_mut().zip(&hashes[..m]) {
                *s = self.slots[h as usize & mask];
            }
            for j in 0..m {
                let k = key(start + j);
                // A slot read before an insertion of this batch still names the right
                // record when it matches: records never move and keep their id.
                let id = match self.matches(slots[j], hashes[j], k) {
                    Some(id) => id,
                    None => {
                        let (id, new) = self.find(k, hashes[j]);
                        if new {
                            self.first.push((start + j) as u32);
                        }
                        id
                    }
                };
                out.push(id);
            }
            start += m;
        }
        out
    }

    /// The id of `s`; a new id if `s` is new.
    fn id(&mut self, s: &[u8]) -> u32 {
        if self.slots.is_empty() {
            self.grow();
        }
        self.find(s, hash_bytes(s)).0
    }

    /// The id of the key of `slot` when it is `s` (of hash `h`).
    #[inline]
    fn matches(&self, slot: u64, h: u64, s: &[u8]) -> Option<u32> {
        if slot == 0 || slot >> RECORD_BITS != h >> RECORD_BITS {
            return None;
        }
        let at = (slot & ((1 << RECORD_BITS) - 1)) as usize - 1;
        let rec = &self.records[at..];
        let len = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]) as usize;
        (len == s.len() && same_bytes(&rec[8..8 + len], s))
            .then(|| u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]))
    }

    /// The id of `s` (of hash `h`), and whether it is new.
    fn find(&mut self, s: &[u8], h: u64) -> (u32, bool) {
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                break;
            }
            if let Some(id) = self.matches(slot, h, s) {
                return (id, false);
            }
            i = (i + 1) & mask;
        }
        let id = self.keys.len() as u32;
        let at = self.records.len() as u64;
        assert!(at + 1 < 1 << RECORD_BITS, "strings too long to intern");
        self.slots[i] = ((h >> RECORD_BITS) << RECORD_BITS) | (at + 1);
        self.records
            .extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.records.extend_from_slice(&id.to_le_bytes());
        self.records.extend_from_slice(s);
        self.keys.push((h, at));
        if 2 * self.keys.len() > self.slots.len() {
            self.grow();
        }
        (id, true)
    }

    /// Doubles the table (or makes the first one) and puts the keys back.
    fn grow(&mut self) {
        let size = (2 * self.slots.len()).max(1024);
        let mask = size - 1;
        self.slots = vec![0; size];
        for &(h, at) in &self.keys {
            let mut i = h as usize & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = ((h >> RECORD_BITS) << RECORD_BITS) | (at + 1);
        }
    }
}

/// Eight bytes of `b` from `i` as one word.
#[inline]
fn word(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(w)
}

/// Whether two byte strings are equal, a word at a time (keys are short: addresses).
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return a == b;
    }
    let mut i = 0;
    while i + 8 < n {
        if word(a, i) != word(b, i) {
            return false;
        }
        i += 8;
    }
    word(a, n - 8) == word(b, n - 8)
}

/// The product of two words folded into one (the high half xor the low half).
#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A fast hash of a short byte string for [`StrDict`] (its quality only affects speed: keys
/// are always compared).
#[inline]
fn hash_bytes(b: &[u8]) -> u64 {
    const K0: u64 = 0x243f_6a88_85a3_08d3;
    const K1: u64 = 0x1319_8a2e_0370_7344;
    const K2: u64 = 0xa409_3822_299f_31d0;
    let n = b.len();
    let mut h = K0 ^ n as u64;
    if n < 8 {
        let mut w = 0u64;
        for (k, &x) in b.iter().enumerate() {
            w |= u64::from(x) << (8 * k);
        }
        h = fold_mul(h ^ w, K1);
    } else {
        let mut i = 0;
        while i + 16 < n {
            h = fold_mul(word(b, i) ^ h, word(b, i + 8) ^ K1);
            i += 16;
        }
        let tail = if n >= 16 {
            (word(b, n - 16), word(b, n - 8))
        } else {
            (word(b, 0), word(b, n - 8))
        };
        h = fold_mul(tail.0 ^ h, tail.1 ^ K2);
    }
    fold_mul(h, K2 ^ K0)
}

/// A USD value: the given amount when it is a finite positive number, else price × quantity.
fn usd_value(usd: f64, price: f64, quantity: f64) -> f64 {
    if usd.is_finite() && usd > 0.0 {
        usd
    } else if price.is_finite() {
        price * quantity
    } else {
        0.0
    }
}

/// A token quantity as the ledger takes it: its size when finite, else 0.
fn quantity_of(amount: f64) -> f64 {
    if amount.is_finite() {
        amount.abs()
    } else {
        0.0
    }
}

/// Ledger events before grouping, one column each, in the input's row order (trades, then
/// the swaps' events). `wallet` and `token` index the sorted dictionaries; a row whose
/// `side` is `None` is no event (another direction, or another token than the query's).
/// Amounts, USD values and prices are as read (borrowed from the frame when its columns
/// allow it); [`RawRows::event`] applies the ledger's rules. An empty `fee` column means no
/// fees.
#[derive(Default)]
struct RawRows<'a> {
    wallet: Vec<u32>,
    token: Vec<u32>,
    side: Vec<Option<Side>>,
    amount: Cow<'a, [f64]>,
    usd: Cow<'a, [f64]>,
    price: Cow<'a, [f64]>,
    fee: Vec<f64>,
    time: Cow<'a, [i64]>,
    slot: Cow<'a, [i64]>,
    id: Cow<'a, [i64]>,
}

impl RawRows<'_> {
    fn len(&self) -> usize {
        self.side.len()
    }

    #[inline]
    fn order_key(&self, r: usize) -> (i64, i64, i64) {
        (self.time[r], self.slot[r], self.id[r])
    }

    #[inline]
    fn event(&self, r: usize) -> LedgerEvent {
        LedgerEvent {
            time: self.time[r],
            slot: self.slot[r],
            id: self.id[r],
            side: self.side[r].unwrap_or(Side::Buy),
            quantity: quantity_of(self.amount[r]),
            usd: usd_value(self.usd[r], self.price[r], self.amount[r]),
            fee: self.fee.get(r).copied().unwrap_or(0.0),
        }
    }

    /// Appends the rows of `other`.
    fn append(&mut self, other: RawRows<'_>) {
        if self.fee.len() < self.len() {
            self.fee.resize(self.len(), 0.0);
        }
        self.wallet.extend(other.wallet);
        self.token.extend(other.token);
        self.side.extend(other.side);
        self.amount.to_mut().extend_from_slice(&other.amount);
        self.usd.to_mut().extend_from_slice(&other.usd);
        self.price.to_mut().extend_from_slice(&other.price);
        self.fee.extend(other.fee);
        self.time.to_mut().extend_from_slice(&other.time);
        self.slot.to_mut().extend_from_slice(&other.slot);
        self.id.to_mut().extend_from_slice(&other.id);
    }
}

/// A float column, borrowed when it is one chunk of floats without nulls, else as
/// [`f64_col`] reads it.
fn f64_slice<'a>(df: &'a DataFrame, name: &str) -> Result<Cow<'a, [f64]>> {
    let c = df.column(name).map_err(Error::polars(name))?;
    if let Ok(slice) = c.f64().and_then(|ca| ca.cont_slice()) {
        return Ok(Cow::Borrowed(slice));
    }
    Ok(Cow::Owned(f64_col(df, name)?))
}

/// An integer column (or the counts of a timestamp column), borrowed when it is one chunk
/// without nulls, else as [`i64_col`] reads it.
fn i64_slice<'a>(df: &'a DataFrame, name: &str) -> Result<Cow<'a, [i64]>> {
    let c = df.column(name).map_err(Error::polars(name))?;
    let physical = match c.dtype() {
        DataType::Int64 => c.i64().ok(),
        DataType::Datetime(_, _) => c.datetime().ok().map(|d| d.physical()),
        _ => None,
    };
    if let Some(slice) = physical.and_then(|ca| ca.cont_slice().ok()) {
        return Ok(Cow::Borrowed(slice));
    }
    Ok(Cow::Owned(i64_col(df, name)?))
}

/// Which token a query keeps: every token, or the one of this index (`None` when the
/// dictionary does not hold it, so no row is kept).
type TokenFilter = Option<Option<u32>>;

fn keeps(filter: TokenFilter, token: u32) -> bool {
    filter.is_none_or(|t| t == Some(token))
}

/// The trade rows: `wallet` and `token` already interned.
fn trade_rows<'a>(
    trades: &'a DataFrame,
    wallet: Vec<u32>,
    token: Vec<u32>,
    filter: TokenFilter,
) -> Result<RawRows<'a>> {
    let direction = str_chunk(trades, "direction")?;
    let direction = direction.downcast_as_array();
    let side: Vec<Option<Side>> = (0..direction.len())
        .into_par_iter()
        .map(|i| {
            if !keeps(filter, token[i]) {
                return None;
            }
            match str_at(direction, i) {
                "buy" => Some(Side::Buy),
                "sell" => Some(Side::Sell),
                _ => None,
            }
        })
        .collect();
    Ok(RawRows {
        wallet,
        token,
        side,
        amount: f64_slice(trades, "token_amount")?,
        usd: f64_slice(trades, "usd_amount")?,
        price: f64_slice(trades, "token_price")?,
        fee: Vec::new(),
        time: i64_slice(trades, "block_time")?,
        slot: i64_slice(trades, "block_slot")?,
        id: i64_slice(trades, "id")?,
    })
}

/// The interned columns of a swaps frame, and the wallets whose swaps are left out.
struct SwapIds<'a> {
    wallet: &'a [u32],
    token_in: &'a [u32],
    token_out: &'a [u32],
    skip: &'a [bool],
}

/// Ledger events of swaps, appended to `rows`: a `quote_token` swap buys `token_address_out`,
/// a `token_quote` swap sells `token_address_in`, a `token_token` swap does both (the sell
/// first); other swap types are skipped, and so are the wallets of `skip`. A swap's fee is
/// what its input was worth above its output (`usd_amount_in − usd_amount_out`, when
/// positive), booked on the sell side, or on the buy side when there is no sell side. Swaps
/// have no id in the event key beyond their slot: the swap's `id` column is used when present.
fn swap_rows(swaps: &DataFrame, ids: SwapIds<'_>, filter: TokenFilter) -> Result<RawRows<'static>> {
    let mut rows = RawRows::default();
    let (mut amount, mut usd_col, mut price_col) = (Vec::new(), Vec::new(), Vec::new());
    let (mut times, mut slots, mut ids_) = (Vec::new(), Vec::new(), Vec::new());
    let swap_type = str_chunk(swaps, "swap_type")?;
    let swap_type = swap_type.downcast_as_array();
    let a_in = f64_col(swaps, "token_amount_in")?;
    let a_out = f64_col(swaps, "token_amount_out")?;
    let p_in = f64_col(swaps, "token_price_in")?;
    let p_out = f64_col(swaps, "token_price_out")?;
    let u_in = f64_col(swaps, "usd_amount_in")?;
    let u_out = f64_col(swaps, "usd_amount_out")?;
    let time = i64_col(swaps, "block_time")?;
    let slot = i64_col(swaps, "block_slot")?;
    let id = i64_col(swaps, "id")?;
    for i in 0..swap_type.len() {
        let w = ids.wallet[i];
        if ids.skip[w as usize] {
            continue;
        }
        let (sell, buy) = match str_at(swap_type, i) {
            "quote_token" => (false, true),
            "token_quote" => (true, false),
            "token_token" => (true, true),
            _ => continue,
        };
        let fee = (u_in[i] - u_out[i]).max(0.0);
        let fee = if fee.is_finite() { fee } else { 0.0 };
        let mut push = |token: u32, side, qty: f64, usd: f64, price: f64, fee: f64| {
            if !keeps(filter, token) {
                return;
            }
            rows.wallet.push(w);
            rows.token.push(token);
            rows.side.push(Some(side));
            amount.push(qty);
            usd_col.push(usd);
            price_col.push(price);
            rows.fee.push(fee);
            times.push(time[i]);
            slots.push(slot[i]);
            ids_.push(id[i]);
        };
        if sell {
            push(ids.token_in[i], Side::Sell, a_in[i], u_in[i], p_in[i], fee);
        }
        if buy {
            let buy_fee = if sell { 0.0 } else { fee };
            push(
                ids.token_out[i],
                Side::Buy,
                a_out[i],
                u_out[i],
                p_out[i],
                buy_fee,
            );
        }
    }
    rows.amount = Cow::Owned(amount);
    rows.usd = Cow::Owned(usd_col);
    rows.price = Cow::Owned(price_col);
    rows.time = Cow::Owned(times);
    rows.slot = Cow::Owned(slots);
    rows.id = Cow::Owned(ids_);
    Ok(rows)
}

/// The events of the rows, each written at the next position of its ledger: `ledger_of[r]`
/// is the ledger of row `r` (`u32::MAX` for no event), ledger `k` takes the positions
/// `offsets[k]..offsets[k + 1]`, which the rows of ledger `k` fill exactly, in row order.
/// Parts of the ledgers, with their own slices of the output, run in parallel, each over all
/// rows in order; the positions do not depend on the number of parts. The events are written
/// once, into memory not filled beforehand.
fn scatter(rows: &RawRows, ledger_of: &[u32], offsets: &[usize]) -> Vec<LedgerEvent> {
    let ledgers = offsets.len() - 1;
    let total = offsets[ledgers];
    let mut events: Vec<LedgerEvent> = Vec::with_capacity(total);
    huge_pages(&mut events);
    let mut cursor: Vec<usize> = offsets[..ledgers].to_vec();
    let parts = rayon::current_num_threads().clamp(1, 8);
    let mut bounds = vec![0usize];
    for p in 1..parts {
        let target = total * p / parts;
        let k = offsets[..ledgers].partition_point(|&c| c < target);
        bounds.push(k.max(*bounds.last().unwrap_or(&0)));
    }
    bounds.push(ledgers);
    type Job<'a> = (
        usize,
        usize,
        &'a mut [usize],
        &'a mut [std::mem::MaybeUninit<LedgerEvent>],
    );
    let mut jobs: Vec<Job> = Vec::new();
    let (mut cursor_rest, mut events_rest) = (
        cursor.as_mut_slice(),
        &mut events.spare_capacity_mut()[..total],
    );
    for w in bounds.windows(2) {
        let (k0, k1) = (w[0], w[1]);
        let (c, c_tail) = cursor_rest.split_at_mut(k1 - k0);
        let (e, e_tail) = events_rest.split_at_mut(offsets[k1] - offsets[k0]);
        jobs.push((k0, offsets[k0], c, e));
        (cursor_rest, events_rest) = (c_tail, e_tail);
    }
    jobs.into_par_iter().for_each(|(k0, e0, cursor, events)| {
        for (r, &k) in ledger_of.iter().enumerate() {
            let k = (k as usize).wrapping_sub(k0);
            if k < cursor.len() {
                let c = &mut cursor[k];
                events[*c - e0].write(rows.event(r));
                *c += 1;
            }
        }
    });
    // Every ledger's cursor went from its start to its end one position at a time, so each
    // position of 0..total was written exactly once.
    assert!(
        cursor.iter().zip(&offsets[1..]).all(|(c, end)| c == end),
        "events scattered beyond their ledgers"
    );
    // SAFETY: the first `total` elements are initialized (checked just above).
    unsafe { events.set_len(total) };
    events
}

/// Asks the kernel to back the memory of `v` (not yet written) with huge pages where it can:
/// a large buffer written at random places then takes fewer page faults and TLB misses.
fn huge_pages<T>(v: &mut Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = v.capacity() * std::mem::size_of::<T>();
        let start = v.as_mut_ptr() as usize;
        let (from, to) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
        if to > from {
            // SAFETY: the range lies inside the allocation of `v`; the advice only changes how
            // the kernel backs its pages, not their contents.
            unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// The number of rows of each of `cells` keys (`key` gives a row's key, `None` for no
/// event), counted in parallel: parts of the keys, each over all rows.
fn count_keys(n: usize, cells: usize, key: impl Fn(usize) -> Option<usize> + Sync) -> Vec<u32> {
    let mut count: Vec<u32> = Vec::with_capacity(cells);
    huge_pages(&mut count);
    count.resize(cells, 0);
    let parts = rayon::current_num_threads().clamp(1, 8);
    let size = cells.div_ceil(parts).max(1);
    count
        .par_chunks_mut(size)
        .enumerate()
        .for_each(|(p, part)| {
            let k0 = p * size;
            for r in 0..n {
                if let Some(k) = key(r) {
                    let k = k.wrapping_sub(k0);
                    if k < part.len() {
                        part[k] += 1;
                    }
                }
            }
        });
    count
}

/// Groups the events into ledgers sorted by (wallet, token), each in event order (ties in
/// the input's row order), keeping only the wallets of `query`. Latest prices come from every
/// event (all wallets).
///
/// Wallets and tokens are indexes into sorted dictionaries, so a ledger is one integer pair
/// and (wallet, token) order is the order of the pairs: the pairs are counted per cell of the
/// wallet × token grid when it is small enough, else interned like the strings; the events go
/// to their ledger by a counting sort (stable, so in row order), and a ledger whose rows are
/// not in event order already is sorted, ledgers in parallel.
fn group(
    rows: &RawRows,
    wallets: &[String],
    tokens: &[String],
    query: &PnlQuery,
) -> Result<LedgerSet> {
    let n = rows.len();
    if u32::try_from(n).is_err() {
        return Err(Error::InvalidArgument {
            argument: "trades".into(),
            reason: format!("{n} events are more than one computation takes (2^32)"),
        });
    }
    type Latest = Vec<Option<((i64, i64, i64), f64)>>;
    let latest: Vec<Latest> = ranges(n)
        .map(|range| {
            let mut best: Latest = vec![None; tokens.len()];
            for r in range {
                if rows.side[r].is_none() || !rows.price[r].is_finite() {
                    continue;
                }
                let key = rows.order_key(r);
                let b = &mut best[rows.token[r] as usize];
                match b {
                    Some(v) if v.0 >= key => {}
                    _ => *b = Some((key, rows.price[r])),
                }
            }
            best
        })
        .collect();
    // Earlier rows win ties, as in one pass over the rows.
    let mut best: Latest = vec![None; tokens.len()];
    for part in latest {
        for (b, p) in best.iter_mut().zip(part) {
            if let Some(p) = p
                && b.is_none_or(|b| p.0 > b.0)
            {
                *b = Some(p);
            }
        }
    }
    let wanted: Option<Vec<bool>> = query.wallets.as_ref().map(|ws| {
        let mut wanted = vec![false; wallets.len()];
        for w in ws {
            if let Some(k) = find(wallets, w) {
                wanted[k] = true;
            }
        }
        wanted
    });
    let kept = |r: usize| {
        rows.side[r].is_some() && wanted.as_ref().is_none_or(|k| k[rows.wallet[r] as usize])
    };
    // A ledger is the pair (wallet, token) as one integer. The events go straight to their
    // ledger by a counting sort, in one pass over the rows in order.
    let token_count = tokens.len();
    let dense = wallets
        .len()
        .checked_mul(token_count)
        .filter(|&cells| cells <= (4 * n).clamp(1 << 20, 1 << 26));
    let (pairs, ledger_of, offsets) = if let Some(cells) = dense {
        // Few enough (wallet, token) cells to count the rows of each directly; the non-empty
        // cells, in order, are the ledgers.
        let cell = |r: usize| {
            kept(r).then(|| rows.wallet[r] as usize * token_count + rows.token[r] as usize)
        };
        let mut count = count_keys(n, cells, cell);
        let (mut pairs, mut offsets) = (Vec::new(), vec![0usize]);
        let mut end = 0usize;
        for (c, slot) in count.iter_mut().enumerate() {
            if *slot > 0 {
                end += *slot as usize;
                offsets.push(end);
                *slot = pairs.len() as u32;
                pairs.push((((c / token_count) as u64) << 32) | (c % token_count) as u64);
            }
        }
        let ledger_of: Vec<u32> = (0..n)
            .into_par_iter()
            .map(|r| cell(r).map_or(u32::MAX, |c| count[c]))
            .collect();
        (pairs, ledger_of, offsets)
    } else {
        let pair = |r: usize| {
            kept(r).then(|| (u64::from(rows.wallet[r]) << 32) | u64::from(rows.token[r]))
        };
        let (pairs, mut ledger_of) = merge_dicts(vec![local_dicts(n, pair)]);
        let ledger_of = ledger_of.pop().unwrap_or_default();
        let mut offsets = vec![0usize; pairs.len() + 1];
        for &k in &ledger_of {
            if k != u32::MAX {
                offsets[k as usize + 1] += 1;
            }
        }
        for k in 0..pairs.len() {
            offsets[k + 1] += offsets[k];
        }
        (pairs, ledger_of, offsets)
    };
    let mut events = scatter(rows, &ledger_of, &offsets);
    drop(ledger_of);
    // Event order inside each ledger, whatever the row order (a stable sort: ties keep it).
    let mut chunks: Vec<&mut [LedgerEvent]> = Vec::with_capacity(pairs.len());
    let mut rest = events.as_mut_slice();
    for k in 0..pairs.len() {
        let (head, tail) = rest.split_at_mut(offsets[k + 1] - offsets[k]);
        chunks.push(head);
        rest = tail;
    }
    chunks.par_iter_mut().for_each(|c| {
        if !c.is_sorted_by_key(LedgerEvent::order_key) {
            c.sort_by_key(LedgerEvent::order_key);
        }
    });
    let mut set = LedgerSet {
        wallets: pairs
            .iter()
            .map(|&p| wallets[(p >> 32) as usize].clone())
            .collect(),
        tokens: pairs
            .iter()
            .map(|&p| tokens[(p & u64::from(u32::MAX)) as usize].clone())
            .collect(),
        offsets,
        events,
        latest_prices: HashMap::new(),
    };
    set.latest_prices = best
        .iter()
        .enumerate()
        .filter_map(|(t, b)| b.map(|(_, p)| (tokens[t].clone(), p)))
        .collect();
    Ok(set)
}

/// Builds the ledgers of a trades frame (columns [`TRADE_COLUMNS`]) and, for wallets with no
/// trade in it, of a swaps frame (columns [`SWAP_COLUMNS`] and `id`).
pub fn ledgers_from_frames(
    trades: &DataFrame,
    swaps: Option<&DataFrame>,
    query: &PnlQuery,
) -> Result<LedgerSet> {
    let (rows, wallets, tokens) = raw_rows(trades, swaps, query)?;
    group(&rows, &wallets, &tokens, query)
}

/// The events of a trades frame and, for wallets with no trade in it, of a swaps frame, with
/// the sorted dictionaries of their wallets and tokens.
fn raw_rows<'a>(
    trades: &'a DataFrame,
    swaps: Option<&DataFrame>,
    query: &PnlQuery,
) -> Result<(RawRows<'a>, Vec<String>, Vec<String>)> {
    let t_wallet = str_chunk(trades, "wallet_address")?;
    let t_token = str_chunk(trades, "token_address")?;
    let s_cols = swaps
        .map(|s| -> Result<_> {
            Ok((
                str_chunk(s, "wallet_address")?,
                str_chunk(s, "token_address_in")?,
                str_chunk(s, "token_address_out")?,
            ))
        })
        .transpose()?;
    let mut wallet_arrays = vec![t_wallet.downcast_as_array()];
    let mut token_arrays = vec![t_token.downcast_as_array()];
    if let Some((w, i, o)) = &s_cols {
        wallet_arrays.push(w.downcast_as_array());
        token_arrays.push(i.downcast_as_array());
        token_arrays.push(o.downcast_as_array());
    }
    let (wallets, mut wallet_ids) = intern(&wallet_arrays);
    let (tokens, mut token_ids) = intern(&token_arrays);
    let filter: TokenFilter = query
        .token
        .as_ref()
        .map(|t| tokens.binary_search(&t.as_str()).ok().map(|k| k as u32));
    let mut token_ids = token_ids.drain(..);
    let mut wallet_ids = wallet_ids.drain(..);
    let (tw, tt) = (
        wallet_ids.next().unwrap_or_default(),
        token_ids.next().unwrap_or_default(),
    );
    let mut skip = vec![false; wallets.len()];
    if swaps.is_some() {
        for &w in &tw {
            skip[w as usize] = true;
        }
    }
    let mut rows = trade_rows(trades, tw, tt, filter)?;
    if let Some(swaps) = swaps {
        let (sw, si, so) = (
            wallet_ids.next().unwrap_or_default(),
            token_ids.next().unwrap_or_default(),
            token_ids.next().unwrap_or_default(),
        );
        let ids = SwapIds {
            wallet: &sw,
            token_in: &si,
            token_out: &so,
            skip: &skip,
        };
        let extra = swap_rows(swaps, ids, filter)?;
        if extra.len() > 0 {
            rows.append(extra);
        }
    }
    let owned = |d: Vec<&str>| d.into_iter().map(str::to_owned).collect();
    Ok((rows, owned(wallets), owned(tokens)))
}

/// The index of `s` in a sorted dictionary.
fn find(dict: &[String], s: &str) -> Option<usize> {
    dict.binary_search_by(|d| d.as_str().cmp(s)).ok()
}

/// Reads the trades (and swaps) of the lake that `query` concerns.
pub fn lake_frames(lake: &Lake, query: &PnlQuery) -> Result<(DataFrame, DataFrame)> {
    let trade_cols: Vec<Expr> = TRADE_COLUMNS.iter().map(|c| col(*c)).collect();
    let mut swap_cols: Vec<Expr> = SWAP_COLUMNS.iter().map(|c| col(*c)).collect();
    swap_cols.push(col("id"));
    let mut trades = lake.scan(Dataset::Trades)?.select(trade_cols);
    let mut swaps = lake.scan(Dataset::Swaps)?.select(swap_cols);
    if let Some(t) = &query.token {
        trades = trades.filter(col("token_address").eq(lit(t.as_str())));
        swaps = swaps.filter(
            col("token_address_in")
                .eq(lit(t.as_str()))
                .or(col("token_address_out").eq(lit(t.as_str()))),
        );
    }
    let trades = trades.collect().map_err(Error::polars("reading trades"))?;
    let swaps = swaps.collect().map_err(Error::polars("reading swaps"))?;
    Ok((trades, swaps))
}

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

fn ts_col(name: &str, values: Vec<Option<i64>>) -> Result<Column> {
    Series::new(name.into(), values)
        .cast(&DataType::Datetime(
            TimeUnit::Microseconds,
            Some(TimeZone::UTC),
        ))
        .map(Column::from)
        .map_err(Error::polars(name))
}

fn pct(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| 100.0 * a / b)
}

/// Builds the report frames of computed ledgers (ledger `k` of `set` is `ledgers[k]`).
pub fn report(set: &LedgerSet, ledgers: &[Ledger], config: &PnlConfig) -> Result<PnlReport> {
    report_range(set, 0, ledgers, config)
}

/// Ledgers run and reported this many at a time by [`run_report`].
pub const REPORT_CHUNK: usize = 1 << 16;

/// Runs the ledgers of `set` and builds their report a chunk of [`REPORT_CHUNK`] ledgers at a
/// time: only one chunk's [`Ledger`]s (their lots, positions and matches) are held at once,
/// the report's rows of the others are. The frames are those of [`LedgerSet::run`] then
/// [`report`], in ledger order.
pub fn run_report(set: &LedgerSet, config: &PnlConfig) -> Result<PnlReport> {
    run_report_in(set, config, REPORT_CHUNK)
}

/// [`run_report`] `chunk` ledgers at a time.
fn run_report_in(set: &LedgerSet, config: &PnlConfig, chunk: usize) -> Result<PnlReport> {
    let mut out: Option<PnlReport> = None;
    report_chunks(set, config, chunk, |part| match out.as_mut() {
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
/// ledger order; `sink` is not called when there is no ledger.
fn report_chunks(
    set: &LedgerSet,
    config: &PnlConfig,
    chunk: usize,
    mut sink: impl FnMut(PnlReport) -> Result<()>,
) -> Result<()> {
    for start in (0..set.len()).step_by(chunk.max(1)) {
        let range = start..(start + chunk.max(1)).min(set.len());
        let ledgers = set.run_range(range, config)?;
        let part = report_range(set, start, &ledgers, config)?;
        drop_in_background(ledgers);
        sink(part)?;
    }
    Ok(())
}

impl PnlReport {
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

/// [`report`] of `ledgers`, the computed ledgers `start..start + ledgers.len()` of `set`.
fn report_range(
    set: &LedgerSet,
    start: usize,
    ledgers: &[Ledger],
    config: &PnlConfig,
) -> Result<PnlReport> {
    let n = ledgers.len();
    let (wallets, tokens) = (
        &set.wallets[start..start + n],
        &set.tokens[start..start + n],
    );
    // The ledgers' wallets and tokens once; the other tables take rows of them, which shares
    // the strings instead of copying them.
    let wallet_ca = StringChunked::new("wallet_address".into(), wallets);
    let token_ca = StringChunked::new("token_address".into(), tokens);
    let by_ledger = |idx: &[IdxSize]| -> Result<(Column, Column)> {
        let w = wallet_ca
            .take(idx)
            .map_err(Error::polars("wallet_address"))?;
        let t = token_ca.take(idx).map_err(Error::polars("token_address"))?;
        Ok((w.into_column(), t.into_column()))
    };
    // The three tables are built at the same time.
    let ledgers_table = || -> Result<DataFrame> {
        // The ledgers' columns in one pass over the ledgers.
        let f = || Vec::<f64>::with_capacity(n);
        let o = || Vec::<Option<f64>>::with_capacity(n);
        let c = || Vec::<u64>::with_capacity(n);
        let (mut buy_count, mut sell_count) = (c(), c());
        let (mut bought, mut sold, mut open, mut buy_cost, mut proceeds) =
            (f(), f(), f(), f(), f());
        let (mut cost_basis, mut realized, mut fees, mut net) = (f(), f(), f(), f());
        let (mut mark, mut unrealized, mut total, mut roi) = (o(), o(), o(), o());
        let (mut realized_roi, mut holding) = (o(), o());
        let (mut opened, mut closed, mut wins, mut losses) = (c(), c(), c(), c());
        let (mut oversold, mut ignored) = (f(), f());
        for (k, l) in ledgers.iter().enumerate() {
            let m = set.mark_of(&tokens[k], config.mark);
            let u = if l.open_quantity() == 0.0 {
                Some(l.unrealized(0.0))
            } else {
                m.map(|m| l.unrealized(m))
            };
            mark.push(m);
            unrealized.push(u);
            total.push(u.map(|u| l.realized + u));
            roi.push(u.and_then(|u| pct(l.realized + u, l.buy_cost)));
            buy_count.push(l.buys);
            sell_count.push(l.sells);
            bought.push(l.buy_quantity);
            sold.push(l.sold_quantity);
            open.push(l.open_quantity());
            buy_cost.push(l.buy_cost);
            proceeds.push(l.proceeds);
            cost_basis.push(l.open_cost());
            realized.push(l.realized);
            fees.push(l.fees);
            net.push(l.realized - l.fees);
            realized_roi.push(pct(l.realized, l.sold_cost));
            holding.push(l.holding_seconds());
            opened.push(l.positions.len() as u64);
            closed.push(l.positions.iter().filter(|p| p.closed_at.is_some()).count() as u64);
            let (w, lo) = l.wins_losses();
            wins.push(w);
            losses.push(lo);
            oversold.push(l.oversold_quantity);
            ignored.push(l.ignored_quantity);
        }
        let cols = vec![
            wallet_ca.clone().into_column(),
            token_ca.clone().into_column(),
            Column::new("method".into(), vec![config.method.as_str(); n]),
            Column::new("buy_count".into(), buy_count),
            Column::new("sell_count".into(), sell_count),
            Column::new("bought_quantity".into(), bought),
            Column::new("sold_quantity".into(), sold),
            Column::new("open_quantity".into(), open),
            Column::new("buy_cost".into(), buy_cost),
            Column::new("sell_proceeds".into(), proceeds),
            Column::new("cost_basis".into(), cost_basis),
            Column::new("mark_price".into(), mark),
            Column::new("realized_pnl".into(), realized),
            Column::new("unrealized_pnl".into(), unrealized),
            Column::new("total_pnl".into(), total),
            Column::new("fees".into(), fees),
            Column::new("realized_pnl_net".into(), net),
            Column::new("roi".into(), roi),
            Column::new("realized_roi".into(), realized_roi),
            Column::new("avg_holding_seconds".into(), holding),
            Column::new("positions_opened".into(), opened),
            Column::new("positions_closed".into(), closed),
            Column::new("wins".into(), wins),
            Column::new("losses".into(), losses),
            Column::new("oversold_quantity".into(), oversold),
            Column::new("ignored_quantity".into(), ignored),
        ];
        DataFrame::new(n, cols).map_err(Error::polars("building the ledgers table"))
    };
    let positions_table = || -> Result<DataFrame> {
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

/// PnL of in-memory frames (trades, and swaps for wallets without trades).
pub fn pnl_from_frames(
    trades: &DataFrame,
    swaps: Option<&DataFrame>,
    query: &PnlQuery,
    config: &PnlConfig,
) -> Result<PnlReport> {
    let set = ledgers_from_frames(trades, swaps, query)?;
    let report = run_report(&set, config);
    drop_in_background(set);
    report
}

/// Drops `value` on a thread of its own: freeing large buffers (unmapping their pages) then
/// does not delay the caller. Dropped in place when no thread can be started.
fn drop_in_background<T: Send + 'static>(value: T) {
    drop(std::thread::Builder::new().spawn(move || drop(value)));
}

/// PnL of the lake's trades (and swaps for wallets the lake has only swaps for).
///
/// A wallet with no trade in the lake gives empty tables, not an error.
pub fn wallet_pnl(lake: &Lake, query: &PnlQuery, config: &PnlConfig) -> Result<PnlReport> {
    let set = lake_ledgers(lake, query)?;
    let report = run_report(&set, config);
    drop_in_background(set);
    report
}

/// The grouped events of the lake's trades (and swaps for wallets without trades) that `query`
/// selects. The latest price of a token comes from every wallet's trades, so the scan is not
/// narrowed to the wallets asked for; the frames (about 100 bytes per trade) are freed once
/// the events are grouped.
fn lake_ledgers(lake: &Lake, query: &PnlQuery) -> Result<LedgerSet> {
    let (trades, swaps) = lake_frames(lake, query)?;
    ledgers_from_frames(&trades, Some(&swaps), query)
}

/// [`wallet_pnl`] handed to `sink` a chunk of [`REPORT_CHUNK`] ledgers at a time, in ledger
/// order, instead of as one report: each part holds the tables of its ledgers, so only the
/// grouped events and one part are in memory at once. For writing large results to a file.
/// Without any ledger `sink` is not called.
pub fn wallet_pnl_in_batches(
    lake: &Lake,
    query: &PnlQuery,
    config: &PnlConfig,
    sink: impl FnMut(PnlReport) -> Result<()>,
) -> Result<()> {
    report_chunks(&lake_ledgers(lake, query)?, config, REPORT_CHUNK, sink)
}

/// Ranks every wallet of the lake by total PnL (realized + unrealized, summed over its tokens),
/// largest first, ties by wallet address; keeps the first `top`.
///
/// Columns: `rank`, `wallet_address`, `tokens`, `realized_pnl`, `unrealized_pnl`,
/// `total_pnl`, `buy_cost`, `roi`, `wins`, `losses`, `win_rate` (percent of closed positions
/// won; null without any).
pub fn leaderboard(lake: &Lake, config: &PnlConfig, top: usize) -> Result<DataFrame> {
    leaderboard_of(lake_ledgers(lake, &PnlQuery::default())?, config, top)
}

/// [`leaderboard`] over in-memory frames.
pub fn leaderboard_from_frames(
    trades: &DataFrame,
    swaps: Option<&DataFrame>,
    config: &PnlConfig,
    top: usize,
) -> Result<DataFrame> {
    leaderboard_of(
        ledgers_from_frames(trades, swaps, &PnlQuery::default())?,
        config,
        top,
    )
}

/// The leaderboard of grouped events.
fn leaderboard_of(mut set: LedgerSet, config: &PnlConfig, top: usize) -> Result<DataFrame> {
    let ledgers = set.run(config)?;
    set.release_events();
    struct Row {
        wallet: String,
        tokens: u32,
        realized: f64,
        unrealized: f64,
        buy_cost: f64,
        wins: u64,
        losses: u64,
    }
    let mut rows: Vec<Row> = Vec::new();
    for (k, l) in ledgers.iter().enumerate() {
        let m = set.mark_of(&set.tokens[k], config.mark).unwrap_or(0.0);
        let (w, lo) = l.wins_losses();
        match rows.last_mut() {
            Some(r) if r.wallet == set.wallets[k] => {
                r.tokens += 1;
                r.realized += l.realized;
                r.unrealized += l.unrealized(m);
                r.buy_cost += l.buy_cost;
                r.wins += w;
                r.losses += lo;
            }
            _ => rows.push(Row {
                wallet: set.wallets[k].clone(),
                tokens: 1,
                realized: l.realized,
                unrealized: l.unrealized(m),
                buy_cost: l.buy_cost,
                wins: w,
                losses: lo,
            }),
        }
    }
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

/// A trade price on a token's price path: (period, event-order key, price).
type PathPoint = (i64, (i64, i64, i64), f64);

/// Options of a wallet's equity curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EquityConfig {
    /// Width of a period, seconds (epoch-aligned, so a day starts at midnight UTC).
    pub period_seconds: i64,
    /// Capital the curve starts from, USD; `None` takes the wallet's total buy cost.
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

/// A wallet's equity curve and the metrics of its returns.
#[derive(Debug, Clone)]
pub struct WalletPerformance {
    /// One row per period: `period_start`, `realized_pnl`, `unrealized_pnl`, `total_pnl`,
    /// `equity` (initial capital + total PnL at the period's close), `return` (equity over the
    /// previous period's, minus 1; the first period compares with the initial capital).
    pub curve: DataFrame,
    /// One row: `wallet_address`, `initial_capital`, `periods`, `sharpe_ratio`,
    /// `sortino_ratio`, `max_drawdown` (percent), `period_win_rate` (percent of the periods
    /// with a non-zero return that gained), `wins`, `losses`, `win_rate` (percent of the closed
    /// positions won), `profit_factor` (Σ realized of won positions /
    /// |Σ of lost ones|), `total_pnl`, `roi` (percent of the initial capital).
    pub metrics: DataFrame,
}

/// The equity curve of `wallet` marked to market at each period's close, and its metrics.
///
/// A token's close in a period is its last trade price in the period (event order, every
/// wallet's trades), carried forward; so the marks are the closes of the lake's bars of that
/// period width. Periods run from the one holding the wallet's first trade to the one holding
/// the lake's last trade.
pub fn wallet_performance(
    trades: &DataFrame,
    swaps: Option<&DataFrame>,
    wallet: &str,
    config: &PnlConfig,
    equity: &EquityConfig,
) -> Result<WalletPerformance> {
    if equity.period_seconds <= 0 {
        return Err(Error::InvalidArgument {
            argument: "period".into(),
            reason: format!("{} s is not a positive period", equity.period_seconds),
        });
    }
    let (all, wallets, tokens) = raw_rows(trades, swaps, &PnlQuery::default())?;
    let query = PnlQuery {
        wallets: Some(vec![wallet.to_owned()]),
        token: None,
    };
    let width = equity.period_seconds as i128 * 1_000_000;
    let period_of = |t: i64| (t as i128).div_euclid(width) as i64;
    let events = || (0..all.len()).filter(|&r| all.side[r].is_some());
    let last_period = events().map(|r| period_of(all.time[r])).max();
    let this = find(&wallets, wallet).map(|w| w as u32);
    let mut held = vec![false; tokens.len()];
    for r in events().filter(|&r| Some(all.wallet[r]) == this) {
        held[all.token[r] as usize] = true;
    }
    // Price paths of the wallet's tokens: (period, order key, price), sorted.
    let mut paths: HashMap<&str, Vec<PathPoint>> = HashMap::new();
    for r in events() {
        let t = all.token[r] as usize;
        if held[t] && all.price[r].is_finite() {
            paths.entry(tokens[t].as_str()).or_default().push((
                period_of(all.time[r]),
                all.order_key(r),
                all.price[r],
            ));
        }
    }
    for p in paths.values_mut() {
        p.sort_by_key(|a| a.1);
    }
    let set = group(&all, &wallets, &tokens, &query)?;
    let mut ledgers: Vec<Ledger> = Vec::new();
    let first_period = set.events.iter().map(|e| period_of(e.time)).min();
    let (Some(first), Some(last)) = (first_period, last_period) else {
        return performance_frames(wallet, 0.0, &[], &[], &[], 0, 0, 0.0, 0.0, equity);
    };
    let n = (last - first + 1).max(0) as usize;
    let (mut realized, mut unrealized) = (vec![0.0; n], vec![0.0; n]);
    let (mut wins, mut losses, mut won, mut lost) = (0u64, 0u64, 0.0, 0.0);
    for k in 0..set.len() {
        let events = set.events_of(k);
        let path = paths
            .get(set.tokens[k].as_str())
            .map_or(&[][..], Vec::as_slice);
        let mut ledger = Ledger::new(config);
        let (mut e, mut p) = (0usize, 0usize);
        let mut close = f64::NAN;
        for (i, period) in (first..=last).enumerate() {
            while e < events.len() && period_of(events[e].time) <= period {
                ledger.apply(&events[e]).map_err(|o| Error::Oversell {
                    wallet: wallet.to_owned(),
                    token: set.tokens[k].clone(),
                    trade_id: o.id,
                    held: o.held,
                    sold: o.sold,
                })?;
                e += 1;
            }
            while p < path.len() && path[p].0 <= period {
                close = path[p].2;
                p += 1;
            }
            realized[i] += ledger.realized;
            unrealized[i] += if ledger.open_quantity() == 0.0 {
                ledger.unrealized(0.0)
            } else {
                ledger.unrealized(close)
            };
        }
        for pos in ledger.positions.iter().filter(|p| p.closed_at.is_some()) {
            if pos.realized > 0.0 {
                wins += 1;
                won += pos.realized;
            } else if pos.realized < 0.0 {
                losses += 1;
                lost += pos.realized;
            }
        }
        ledgers.push(ledger);
    }
    let capital = equity
        .initial_capital
        .unwrap_or_else(|| ledgers.iter().map(|l| l.buy_cost).sum());
    let starts: Vec<i64> = (first..=last).map(|p| (p as i128 * width) as i64).collect();
    performance_frames(
        wallet,
        capital,
        &starts,
        &realized,
        &unrealized,
        wins,
        losses,
        won,
        lost,
        equity,
    )
}

#[expect(
    clippy::too_many_arguments,
    reason = "a private assembly step of one caller"
)]
fn performance_frames(
    wallet: &str,
    capital: f64,
    starts: &[i64],
    realized: &[f64],
    unrealized: &[f64],
    wins: u64,
    losses: u64,
    won: f64,
    lost: f64,
    config: &EquityConfig,
) -> Result<WalletPerformance> {
    let total: Vec<f64> = realized
        .iter()
        .zip(unrealized)
        .map(|(r, u)| r + u)
        .collect();
    let curve: Vec<f64> = total.iter().map(|t| capital + t).collect();
    let returns: Vec<f64> = curve
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let prev = if i == 0 { capital } else { curve[i - 1] };
            e / prev - 1.0
        })
        .collect();
    let n = starts.len();
    let curve_df = DataFrame::new(
        n,
        vec![
            ts_col("period_start", starts.iter().map(|s| Some(*s)).collect())?,
            Column::new("realized_pnl".into(), realized),
            Column::new("unrealized_pnl".into(), unrealized),
            Column::new("total_pnl".into(), &total),
            Column::new("equity".into(), &curve),
            Column::new("return".into(), &returns),
        ],
    )
    .map_err(Error::polars("building the equity curve"))?;
    let finite: Vec<f64> = returns.iter().copied().filter(|r| r.is_finite()).collect();
    let m = metrics::ReturnMetrics::of(&finite, &config.ratios);
    let nan_none = |x: f64| (!x.is_nan()).then_some(x);
    let last_total = total.last().copied().unwrap_or(0.0);
    let metrics_df = DataFrame::new(
        1,
        vec![
            Column::new("wallet_address".into(), [wallet]),
            Column::new("initial_capital".into(), [capital]),
            Column::new("periods".into(), [n as u64]),
            Column::new("sharpe_ratio".into(), [nan_none(m.sharpe)]),
            Column::new("sortino_ratio".into(), [nan_none(m.sortino)]),
            Column::new(
                "max_drawdown".into(),
                [metrics::max_drawdown_of_equity(capital, &curve)],
            ),
            Column::new(
                "period_win_rate".into(),
                [nan_none(100.0 * m.period_win_rate)],
            ),
            Column::new("wins".into(), [wins]),
            Column::new("losses".into(), [losses]),
            Column::new(
                "win_rate".into(),
                [nan_none(100.0 * metrics::win_rate(wins, losses))],
            ),
            Column::new(
                "profit_factor".into(),
                [nan_none(metrics::profit_factor(won, lost))],
            ),
            Column::new("total_pnl".into(), [last_total]),
            Column::new("roi".into(), [pct(last_total, capital)]),
        ],
    )
    .map_err(Error::polars("building the wallet metrics"))?;
    Ok(WalletPerformance {
        curve: curve_df,
        metrics: metrics_df,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(k: i64, side: Side, q: f64, price: f64) -> LedgerEvent {
        LedgerEvent {
            time: k * 1_000_000,
            slot: k,
            id: k,
            side,
            quantity: q,
            usd: q * price,
            fee: 0.0,
        }
    }

    fn buy(k: i64, q: f64, p: f64) -> LedgerEvent {
        ev(k, Side::Buy, q, p)
    }

    fn sell(k: i64, q: f64, p: f64) -> LedgerEvent {
        ev(k, Side::Sell, q, p)
    }

    /// Trades, mark, and the expected (method, realized, unrealized).
    type Vector = (Vec<LedgerEvent>, f64, [(CostMethod, f64, f64); 4]);

    fn near(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    fn run(events: &[LedgerEvent], method: CostMethod) -> Ledger {
        let config = PnlConfig {
            method,
            ..PnlConfig::default()
        };
        run_ledger(events, &config).expect("no oversell")
    }

    #[test]
    fn dropping_lots_ends_the_position_without_pnl() {
        for method in CostMethod::ALL {
            let config = PnlConfig {
                method,
                ..PnlConfig::default()
            };
            let mut l =
                run_ledger(&[buy(1, 10.0, 1.0), sell(2, 4.0, 2.0)], &config).expect("no oversell");
            l.drop_lots(3_000_000);
            assert_eq!(l.open_quantity(), 0.0, "{method}");
            assert_eq!(l.open_cost(), 0.0, "{method}");
            assert!((l.dropped_quantity - 6.0).abs() < 1e-12, "{method}");
            assert!((l.dropped_cost - 6.0).abs() < 1e-12, "{method}");
            assert!((l.realized - 4.0).abs() < 1e-12, "{method}");
            assert_eq!(l.unrealized(5.0), 0.0, "{method}");
            assert_eq!(l.positions.len(), 1);
            assert_eq!(l.positions[0].closed_at, Some(3_000_000));
            assert_eq!(l.wins_losses(), (1, 0));
            // A later buy starts afresh.
            l.apply(&buy(4, 2.0, 3.0)).expect("buy");
            assert_eq!(l.positions.len(), 2);
            assert_eq!(l.open_quantity(), 2.0);
        }
    }

    #[test]
    fn the_semantics_vectors_for_every_method() {
        use CostMethod::*;
        // (trades, mark, [(method, R, U)]) from semantics.md §2.
        let vectors: Vec<Vector> = vec![
            (
                vec![buy(1, 10.0, 1.0), buy(2, 10.0, 2.0), sell(3, 15.0, 3.0)],
                4.0,
                [
                    (Fifo, 25.0, 10.0),
                    (Lifo, 20.0, 15.0),
                    (Hifo, 20.0, 15.0),
                    (AverageCost, 22.5, 12.5),
                ],
            ),
            (
                vec![buy(1, 10.0, 150.0), buy(2, 5.0, 155.0), sell(3, 8.0, 160.0)],
                160.0,
                [
                    (Fifo, 80.0, 45.0),
                    (Lifo, 55.0, 70.0),
                    (Hifo, 55.0, 70.0),
                    (AverageCost, 200.0 / 3.0, 175.0 / 3.0),
                ],
            ),
            (
                vec![buy(1, 10.0, 1.0), sell(2, 5.0, 2.0), buy(3, 10.0, 4.0)],
                3.0,
                [
                    (Fifo, 5.0, 0.0),
                    (Lifo, 5.0, 0.0),
                    (Hifo, 5.0, 0.0),
                    (AverageCost, 5.0, 0.0),
                ],
            ),
            (
                vec![buy(1, 10.0, 2.0), buy(2, 10.0, 1.0), sell(3, 15.0, 3.0)],
                4.0,
                [
                    (Fifo, 20.0, 15.0),
                    (Lifo, 25.0, 10.0),
                    (Hifo, 20.0, 15.0),
                    (AverageCost, 22.5, 12.5),
                ],
            ),
            (
                vec![
                    buy(1, 10.0, 1.0),
                    buy(2, 10.0, 3.0),
                    buy(3, 10.0, 2.0),
                    sell(4, 15.0, 2.5),
                ],
                2.0,
                [
                    (Fifo, 12.5, -5.0),
                    (Lifo, 2.5, 5.0),
                    (Hifo, -2.5, 10.0),
                    (AverageCost, 7.5, 0.0),
                ],
            ),
        ];
        for (i, (events, mark, expected)) in vectors.iter().enumerate() {
            let totals: Vec<f64> = expected.iter().map(|(_, r, u)| r + u).collect();
            for (method, r, u) in expected {
                let l = run(events, *method);
                assert!(
                    near(l.realized, *r),
                    "V{} {method}: R {} ≠ {r}",
                    i + 1,
                    l.realized
                );
                assert!(
                    near(l.unrealized(*mark), *u),
                    "V{} {method}: U {} ≠ {u}",
                    i + 1,
                    l.unrealized(*mark)
                );
            }
            assert!(
                totals.iter().all(|t| near(*t, totals[0])),
                "V{}: totals differ",
                i + 1
            );
        }
    }

    #[test]
    fn hifo_ties_go_to_the_earliest_lot() {
        let events = [
            buy(1, 5.0, 2.0),
            buy(2, 5.0, 2.0),
            buy(3, 5.0, 1.0),
            sell(4, 5.0, 3.0),
        ];
        let config = PnlConfig {
            method: CostMethod::Hifo,
            lots: true,
            ..PnlConfig::default()
        };
        let l = run_ledger(&events, &config).expect("held");
        let lots = l.lots.expect("lots table");
        assert_eq!(lots.len(), 1);
        assert_eq!(lots[0].buy_id, Some(1));
        assert!(near(lots[0].cost, 10.0));
    }

    #[test]
    fn each_oversell_policy_is_reported() {
        let events = [buy(1, 10.0, 1.0), sell(2, 15.0, 2.0)];
        let zero = run(&events, CostMethod::Fifo);
        assert!(
            near(zero.realized, 30.0 - 10.0),
            "the 5 unmatched have zero cost"
        );
        assert!(near(zero.oversold_quantity, 5.0));
        assert_eq!(zero.ignored_quantity, 0.0);
        assert_eq!(zero.open_quantity(), 0.0);

        let ignore = run_ledger(
            &events,
            &PnlConfig {
                oversell: OversellPolicy::Ignore,
                ..PnlConfig::default()
            },
        )
        .expect("ignored");
        assert!(
            near(ignore.realized, 20.0 - 10.0),
            "only the matched 10 count"
        );
        assert!(near(ignore.ignored_quantity, 5.0));
        assert!(near(ignore.proceeds, 20.0));

        let err = run_ledger(
            &events,
            &PnlConfig {
                oversell: OversellPolicy::Error,
                ..PnlConfig::default()
            },
        )
        .expect_err("oversold");
        assert_eq!(err.id, 2);
        assert_eq!((err.held, err.sold), (10.0, 15.0));
    }

    #[test]
    fn positions_open_and_close_around_dust() {
        let events = [
            buy(1, 10.0, 1.0),
            sell(2, 10.0, 2.0),
            buy(3, 5.0, 2.0),
            sell(4, 5.0, 1.0),
            buy(5, 1.0, 1.0),
        ];
        let l = run(&events, CostMethod::Fifo);
        assert_eq!(l.positions.len(), 3);
        assert_eq!(l.wins_losses(), (1, 1));
        assert_eq!(l.positions[2].closed_at, None);
        // Holding: 10 units for 1 s and 5 units for 1 s.
        assert_eq!(l.holding_seconds(), Some(1.0));
        // With a dust of 2, the last buy of 1 opens nothing.
        let dusty = run_ledger(
            &events,
            &PnlConfig {
                dust: 2.0,
                ..PnlConfig::default()
            },
        )
        .expect("held");
        assert_eq!(dusty.positions.len(), 2);
    }

    #[test]
    fn a_sell_of_a_rounded_balance_closes_the_position() {
        let held = 0.1 + 0.2;
        let events = [buy(1, 0.1, 1.0), buy(2, 0.2, 1.0), sell(3, held, 2.0)];
        for method in CostMethod::ALL {
            let l = run(&events, method);
            assert_eq!(l.open_quantity(), 0.0, "{method}");
            assert_eq!(l.oversold_quantity, 0.0, "{method}");
            assert_eq!(l.positions.len(), 1);
            assert!(l.positions[0].closed_at.is_some(), "{method}");
        }
    }

    #[test]
    fn method_and_mark_parse_or_fail_clearly() {
        assert_eq!("LIFO".parse::<CostMethod>().ok(), Some(CostMethod::Lifo));
        assert_eq!(
            "avg".parse::<CostMethod>().ok(),
            Some(CostMethod::AverageCost)
        );
        let e = "median".parse::<CostMethod>().expect_err("unknown");
        assert!(e.to_string().contains("fifo, lifo, hifo or avg"), "{e}");
        assert_eq!("latest".parse::<Mark>().ok(), Some(Mark::Latest));
        assert_eq!("2.5".parse::<Mark>().ok(), Some(Mark::Price(2.5)));
        assert!("-1".parse::<Mark>().is_err());
        assert!("NaN".parse::<Mark>().is_err());
    }

    fn frame(rows: &[(&str, &str, &str, f64, f64, i64, i64)]) -> DataFrame {
        // (wallet, token, direction, amount, price, time seconds, id)
        let n = rows.len();
        DataFrame::new(
            n,
            vec![
                Column::new(
                    "wallet_address".into(),
                    rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                ),
                Column::new(
                    "token_address".into(),
                    rows.iter().map(|r| r.1).collect::<Vec<_>>(),
                ),
                Column::new(
                    "direction".into(),
                    rows.iter().map(|r| r.2).collect::<Vec<_>>(),
                ),
                Column::new(
                    "token_amount".into(),
                    rows.iter().map(|r| r.3).collect::<Vec<_>>(),
                ),
                Column::new(
                    "usd_amount".into(),
                    rows.iter().map(|r| r.3 * r.4).collect::<Vec<_>>(),
                ),
                Column::new(
                    "token_price".into(),
                    rows.iter().map(|r| r.4).collect::<Vec<_>>(),
                ),
                Column::new(
                    "block_time".into(),
                    rows.iter().map(|r| r.5 * 1_000_000).collect::<Vec<_>>(),
                ),
                Column::new(
                    "block_slot".into(),
                    rows.iter().map(|r| r.5).collect::<Vec<_>>(),
                ),
                Column::new("id".into(), rows.iter().map(|r| r.6).collect::<Vec<_>>()),
            ],
        )
        .expect("frame")
    }

    #[test]
    fn frames_give_the_same_ledgers_whatever_the_row_order() {
        let rows = [
            ("w1", "A", "buy", 10.0, 1.0, 10, 1),
            ("w1", "A", "buy", 10.0, 2.0, 20, 2),
            ("w2", "A", "buy", 1.0, 4.0, 40, 4),
            ("w1", "A", "sell", 15.0, 3.0, 30, 3),
            ("w1", "B", "buy", 2.0, 5.0, 10, 5),
        ];
        let mut reversed = rows;
        reversed.reverse();
        let config = PnlConfig::default();
        let a = pnl_from_frames(&frame(&rows), None, &PnlQuery::default(), &config).expect("pnl");
        let b =
            pnl_from_frames(&frame(&reversed), None, &PnlQuery::default(), &config).expect("pnl");
        assert!(a.ledgers.equals_missing(&b.ledgers));
        let w1a = a.ledgers.head(Some(1));
        let r = w1a
            .column("realized_pnl")
            .and_then(|c| c.f64().map(|c| c.get(0)))
            .expect("col");
        let u = w1a
            .column("unrealized_pnl")
            .and_then(|c| c.f64().map(|c| c.get(0)))
            .expect("col");
        // V1 at the latest price of A (w2's buy at 4).
        assert_eq!((r, u), (Some(25.0), Some(10.0)));
        let q = PnlQuery {
            wallets: Some(vec!["nobody".into()]),
            token: None,
        };
        let none = pnl_from_frames(&frame(&rows), None, &q, &config).expect("pnl");
        assert_eq!(none.ledgers.height(), 0);
    }

    #[test]
    fn a_report_built_chunk_by_chunk_equals_the_whole_report() {
        let wallets: Vec<String> = (0..23).map(|w| format!("w{w:02}")).collect();
        let tokens = ["A", "B", "C"];
        let mut rows = Vec::new();
        for (i, w) in wallets.iter().enumerate() {
            for (j, t) in tokens.iter().enumerate() {
                for e in 0..(1 + (i + j) % 5) {
                    let id = (i * 100 + j * 10 + e) as i64;
                    let sell = (i + j + e) % 3 == 2;
                    rows.push((
                        w.as_str(),
                        *t,
                        if sell { "sell" } else { "buy" },
                        1.0 + ((i * 7 + e * 3) % 11) as f64,
                        0.5 + ((j * 5 + e) % 7) as f64,
                        id,
                        id,
                    ));
                }
            }
        }
        let set = ledgers_from_frames(&frame(&rows), None, &PnlQuery::default()).expect("set");
        assert!(set.len() > 60);
        let config = PnlConfig {
            lots: true,
            ..PnlConfig::default()
        };
        let whole = report(&set, &set.run(&config).expect("run"), &config).expect("report");
        for chunk in [1, 7, 64, 1000] {
            let chunked = run_report_in(&set, &config, chunk).expect("chunked");
            assert!(
                chunked.ledgers.equals_missing(&whole.ledgers),
                "chunk {chunk}"
            );
            assert!(
                chunked.positions.equals_missing(&whole.positions),
                "chunk {chunk}"
            );
            let (a, b) = (
                chunked.lots.expect("lots"),
                whole.lots.as_ref().expect("lots"),
            );
            assert!(a.equals_missing(b), "chunk {chunk}");
        }
        let empty = ledgers_from_frames(&frame(&[]), None, &PnlQuery::default()).expect("set");
        let none = run_report_in(&empty, &config, 7).expect("empty");
        assert_eq!(none.ledgers.height(), 0);
        assert_eq!(none.ledgers.width(), PnlReport::LEDGER_COLUMNS.len());
    }

    /// A trade row of [`grouping_equals_a_plain_grouping`]: wallet, token (`None` for null),
    /// direction, amount, USD, price, time, slot, id.
    type TradeRow = (
        Option<String>,
        Option<String>,
        &'static str,
        f64,
        f64,
        f64,
        i64,
        i64,
        i64,
    );

    fn trade_frame(rows: &[TradeRow]) -> DataFrame {
        let f = |name: &str, g: fn(&TradeRow) -> f64| {
            Column::new(name.into(), rows.iter().map(g).collect::<Vec<_>>())
        };
        let i = |name: &str, g: fn(&TradeRow) -> i64| {
            Column::new(name.into(), rows.iter().map(g).collect::<Vec<_>>())
        };
        DataFrame::new(
            rows.len(),
            vec![
                Column::new(
                    "wallet_address".into(),
                    rows.iter().map(|r| r.0.as_deref()).collect::<Vec<_>>(),
                ),
                Column::new(
                    "token_address".into(),
                    rows.iter().map(|r| r.1.as_deref()).collect::<Vec<_>>(),
                ),
                Column::new(
                    "direction".into(),
                    rows.iter().map(|r| r.2).collect::<Vec<_>>(),
                ),
                f("token_amount", |r| r.3),
                f("usd_amount", |r| r.4),
                f("token_price", |r| r.5),
                i("block_time", |r| r.6),
                i("block_slot", |r| r.7),
                i("id", |r| r.8),
            ],
        )
        .expect("frame")
    }

    /// The ledgers of `rows` grouped the plain way: a sorted map from (wallet, token) to the
    /// events in row order, each ledger then sorted by event key (stably).
    fn plain_grouping(
        rows: &[TradeRow],
        query: &PnlQuery,
    ) -> (Vec<String>, Vec<String>, Vec<usize>, Vec<LedgerEvent>) {
        let mut map: std::collections::BTreeMap<(String, String), Vec<LedgerEvent>> =
            std::collections::BTreeMap::new();
        for r in rows {
            let side = match r.2 {
                "buy" => Side::Buy,
                "sell" => Side::Sell,
                _ => continue,
            };
            let (w, t) = (
                r.0.clone().unwrap_or_default(),
                r.1.clone().unwrap_or_default(),
            );
            if query.wallets.as_ref().is_some_and(|ws| !ws.contains(&w))
                || query.token.as_ref().is_some_and(|q| *q != t)
            {
                continue;
            }
            map.entry((w, t)).or_default().push(LedgerEvent {
                time: r.6,
                slot: r.7,
                id: r.8,
                side,
                quantity: quantity_of(r.3),
                usd: usd_value(r.4, r.5, r.3),
                fee: 0.0,
            });
        }
        let (mut wallets, mut tokens, mut offsets, mut events) =
            (Vec::new(), Vec::new(), vec![0], Vec::new());
        for ((w, t), mut e) in map {
            e.sort_by_key(LedgerEvent::order_key);
            wallets.push(w);
            tokens.push(t);
            events.extend(e);
            offsets.push(events.len());
        }
        (wallets, tokens, offsets, events)
    }

    #[test]
    fn grouping_equals_a_plain_grouping() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        // (rows, wallets, tokens, nulls): more rows than one range of the parallel passes and
        // enough wallets to grow the interning tables (the wallet x token grid counted
        // directly); then few rows over a grid too large for that (the pairs interned), with
        // null wallets and tokens, and names of every length up to 40 bytes.
        for (n, wallets, tokens, nulls) in [
            (RANGE + 5_000, 3_000usize, 40usize, false),
            (6_000, 20_000, 100, true),
        ] {
            let name = |p: char, k: usize| -> String {
                let mut s = format!("{p}{k}");
                s.extend(std::iter::repeat_n('x', k % 41));
                s
            };
            let mut rows: Vec<TradeRow> = (0..n)
                .map(|i| {
                    let w = rng.random_range(0..wallets);
                    let t = rng.random_range(0..tokens);
                    let null = nulls && rng.random_bool(0.02);
                    let time = rng.random_range(0..(n as i64 / 4));
                    (
                        (!null || rng.random_bool(0.5)).then(|| name('w', w)),
                        (!null || rng.random_bool(0.5)).then(|| name('t', t)),
                        ["buy", "sell", "buy", "transfer"][rng.random_range(0..4usize)],
                        rng.random_range(0.5..100.0),
                        if rng.random_bool(0.1) {
                            f64::NAN
                        } else {
                            rng.random_range(0.1..1_000.0)
                        },
                        rng.random_range(0.01..10.0),
                        time,
                        time / 2,
                        rng.random_range(0..(i as i64 / 2 + 1)),
                    )
                })
                .collect();
            // Wallets and tokens seen once.
            rows.push((
                Some("once".into()),
                Some("only".into()),
                "buy",
                1.0,
                1.0,
                1.0,
                5,
                5,
                5,
            ));
            let queries = [
                PnlQuery::default(),
                PnlQuery {
                    wallets: Some(vec![name('w', 7), name('w', 8), "once".into()]),
                    token: None,
                },
                PnlQuery {
                    wallets: None,
                    token: Some(name('t', 3)),
                },
            ];
            for query in &queries {
                let set = ledgers_from_frames(&trade_frame(&rows), None, query).expect("set");
                let (w, t, o, e) = plain_grouping(&rows, query);
                assert_eq!(set.wallets, w, "{n} rows");
                assert_eq!(set.tokens, t, "{n} rows");
                assert_eq!(set.offsets, o, "{n} rows");
                assert!(set.events == e, "{n} rows");
            }
        }
    }

    /// wallet, swap type, token in, token out, amount in, amount out, USD in, USD out, time.
    type SwapRow = (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        f64,
        f64,
        f64,
        f64,
        i64,
    );

    #[test]
    fn swaps_fill_in_for_wallets_without_trades() {
        // w9 has only swaps: buy 10 A for 10 USD, swap 4 A into 2 B (token_token, 1 USD of
        // fee), sell 2 B for 3 USD. w1 has a trade and its swaps are left out.
        let rows: [SwapRow; 4] = [
            ("w9", "quote_token", "USD", "A", 10.0, 10.0, 10.0, 10.0, 1),
            ("w9", "token_token", "A", "B", 4.0, 2.0, 5.0, 4.0, 2),
            ("w9", "token_quote", "B", "USD", 2.0, 3.0, 3.0, 3.0, 3),
            ("w1", "quote_token", "USD", "A", 1.0, 1.0, 1.0, 1.0, 4),
        ];
        let n = rows.len();
        let swaps = DataFrame::new(
            n,
            vec![
                Column::new(
                    "wallet_address".into(),
                    rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                ),
                Column::new(
                    "swap_type".into(),
                    rows.iter().map(|r| r.1).collect::<Vec<_>>(),
                ),
                Column::new(
                    "token_address_in".into(),
                    rows.iter().map(|r| r.2).collect::<Vec<_>>(),
                ),
                Column::new(
                    "token_address_out".into(),
                    rows.iter().map(|r| r.3).collect::<Vec<_>>(),
                ),
                Column::new(
                    "token_amount_in".into(),
                    rows.iter().map(|r| r.4).collect::<Vec<_>>(),
                ),
                Column::new(
                    "token_amount_out".into(),
                    rows.iter().map(|r| r.5).collect::<Vec<_>>(),
                ),
                Column::new(
                    "token_price_in".into(),
                    rows.iter().map(|r| r.6 / r.4).collect::<Vec<_>>(),
                ),
                Column::new(
                    "token_price_out".into(),
                    rows.iter().map(|r| r.7 / r.5).collect::<Vec<_>>(),
                ),
                Column::new(
                    "usd_amount_in".into(),
                    rows.iter().map(|r| r.6).collect::<Vec<_>>(),
                ),
                Column::new(
                    "usd_amount_out".into(),
                    rows.iter().map(|r| r.7).collect::<Vec<_>>(),
                ),
                Column::new(
                    "block_time".into(),
                    rows.iter().map(|r| r.8 * 1_000_000).collect::<Vec<_>>(),
                ),
                Column::new(
                    "block_slot".into(),
                    rows.iter().map(|r| r.8).collect::<Vec<_>>(),
                ),
                Column::new("id".into(), rows.iter().map(|r| r.8).collect::<Vec<_>>()),
            ],
        )
        .expect("swaps");
        let trades = frame(&[("w1", "A", "buy", 1.0, 1.0, 9, 9)]);
        let report = pnl_from_frames(
            &trades,
            Some(&swaps),
            &PnlQuery::default(),
            &PnlConfig::default(),
        )
        .expect("pnl");
        let df = &report.ledgers;
        let key = |k: usize| {
            let s = |c: &str| {
                df.column(c)
                    .and_then(|c| c.str().map(|c| c.get(k).map(str::to_owned)))
                    .expect(c)
            };
            (s("wallet_address"), s("token_address"))
        };
        let f = |c: &str, k: usize| {
            df.column(c)
                .and_then(|c| c.f64().map(|c| c.get(k)))
                .expect(c)
        };
        assert_eq!(
            df.height(),
            3,
            "w1/A from its trade, w9/A and w9/B from swaps"
        );
        assert_eq!(key(0), (Some("w1".into()), Some("A".into())));
        assert_eq!(
            f("buy_cost", 0),
            Some(1.0),
            "w1's swap is not counted twice"
        );
        // w9/A: bought 10 for 10, sold 4 for 5 (the input's value) with a fee of 1.
        assert_eq!(key(1), (Some("w9".into()), Some("A".into())));
        assert_eq!(f("realized_pnl", 1), Some(1.0));
        assert_eq!(f("fees", 1), Some(1.0));
        assert_eq!(f("realized_pnl_net", 1), Some(0.0));
        assert_eq!(f("open_quantity", 1), Some(6.0));
        // w9/B: bought 2 for 4, sold 2 for 3.
        assert_eq!(f("realized_pnl", 2), Some(-1.0));
        assert_eq!(f("open_quantity", 2), Some(0.0));
    }

    #[test]
    fn equity_curve_marks_open_quantity_at_each_close() {
        let day = 86_400;
        let rows = [
            ("w1", "A", "buy", 10.0, 1.0, 0, 1),
            ("w2", "A", "buy", 1.0, 2.0, day + 5, 2),
            ("w1", "A", "sell", 10.0, 1.5, 2 * day + 5, 3),
        ];
        let perf = wallet_performance(
            &frame(&rows),
            None,
            "w1",
            &PnlConfig::default(),
            &EquityConfig::default(),
        )
        .expect("curve");
        let eq: Vec<f64> = perf
            .curve
            .column("equity")
            .and_then(|c| c.f64().map(|c| c.into_no_null_iter().collect()))
            .expect("equity");
        // Capital 10; day 0 marked at 1, day 1 at 2 (w2's trade), day 2 sold at 1.5.
        assert_eq!(eq, vec![10.0, 20.0, 15.0]);
        let dd = perf
            .metrics
            .column("max_drawdown")
            .and_then(|c| c.f64().map(|c| c.get(0)))
            .expect("dd");
        assert_eq!(dd, Some(-25.0));
    }
}
