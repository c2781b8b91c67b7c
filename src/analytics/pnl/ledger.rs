//! The cost-basis books and ledgers: one [`Ledger`] per (wallet, token) applies its events in
//! event order; [`LedgerSet`] holds many ledgers' grouped events and runs them in parallel.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use rayon::prelude::*;

use super::options::{CostMethod, Mark, OversellPolicy, PnlConfig};
use crate::{Error, Result};

/// Relative tolerance under which a remaining lot or sell quantity counts as zero.
pub const MATCH_TOLERANCE: f64 = 1e-9;

/// Microseconds per second (lake timestamps are microseconds).
const MICROS: f64 = 1e6;

/// Whether a ledger event buys or sells the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TradeSide {
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
    pub side: TradeSide,
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

    /// The book as [`Book::new`] makes it, its room kept.
    fn reset(&mut self) {
        match self {
            Book::Queue(q) => q.clear(),
            Book::Stack(s) => s.clear(),
            Book::Heap(h, seq) => {
                h.clear();
                *seq = 0;
            }
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

    /// The ledger made empty under `config`, as [`Ledger::new`] makes it, keeping the room of
    /// its book, positions and lots: for running many ledgers one after another.
    fn reset(&mut self, config: &PnlConfig) {
        let mut book = std::mem::replace(&mut self.book, Book::Stack(Vec::new()));
        let mut positions = std::mem::take(&mut self.positions);
        let lots = self.lots.take();
        *self = Ledger::new(config);
        if std::mem::discriminant(&book) == std::mem::discriminant(&self.book) {
            book.reset();
            self.book = book;
        }
        positions.clear();
        self.positions = positions;
        if let (Some(mut lots), true) = (lots, config.lots) {
            lots.clear();
            self.lots = Some(lots);
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

    /// Unrealized PnL at `mark` (`0.0`, never `-0.0`, for a closed position).
    pub fn unrealized(&self, mark: f64) -> f64 {
        if self.open_qty == 0.0 {
            // A closed position may keep a rounding residue of cost; `0.0 - 0.0` is `+0.0`.
            0.0 - self.open_cost
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
            TradeSide::Buy => self.buy(e),
            TradeSide::Sell => self.sell(e)?,
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

/// Events of many ledgers, grouped: ledger `k` is the wallet `wallet_names[ledger_wallets[k]]`
/// and the token `token_names[ledger_tokens[k]]`, with events
/// `events[offsets[k]..offsets[k + 1]]` in event order. Ledgers come in (wallet, token) order.
/// A ledger holds two integers, not two strings: millions of ledgers share the names.
#[derive(Debug, Clone, Default)]
pub struct LedgerSet {
    /// Wallet addresses, sorted.
    pub wallet_names: Vec<String>,
    /// Token addresses, sorted.
    pub token_names: Vec<String>,
    /// Wallet of each ledger: an index into `wallet_names`.
    pub ledger_wallets: Vec<u32>,
    /// Token of each ledger: an index into `token_names`.
    pub ledger_tokens: Vec<u32>,
    /// Start of each ledger's events, plus the end.
    pub offsets: Vec<usize>,
    /// Every event, ledger after ledger.
    pub events: Vec<LedgerEvent>,
    /// Latest trade price of each token of `token_names` (event order, every wallet of the
    /// input; `None` without a finite price).
    pub latest_prices: Vec<Option<f64>>,
}

impl LedgerSet {
    /// Number of ledgers.
    pub fn len(&self) -> usize {
        self.ledger_wallets.len()
    }

    /// Whether there is no ledger.
    pub fn is_empty(&self) -> bool {
        self.ledger_wallets.is_empty()
    }

    /// Wallet address of ledger `k`.
    pub fn wallet(&self, k: usize) -> &str {
        &self.wallet_names[self.ledger_wallets[k] as usize]
    }

    /// Token address of ledger `k`.
    pub fn token(&self, k: usize) -> &str {
        &self.token_names[self.ledger_tokens[k] as usize]
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
    pub(super) fn run_range(
        &self,
        range: std::ops::Range<usize>,
        config: &PnlConfig,
    ) -> Result<Vec<Ledger>> {
        // Written in place, then the first oversell in ledger order is the error, as in
        // `run_rows` (a fallible parallel collect copies its pieces and returns any error).
        let mut ledgers = Vec::with_capacity(range.len());
        range
            .into_par_iter()
            .map(|k| run_ledger(self.events_of(k), config).map_err(|o| self.oversell(k, o)))
            .collect_into_vec(&mut ledgers);
        ledgers.into_iter().collect()
    }

    /// Runs the ledgers of `range` in parallel and hands each, once run, to `row` (with its
    /// number): the results come in ledger order. Each thread runs its ledgers in one
    /// [`Ledger`] reset between them, so no ledger allocates a book or positions of its own.
    ///
    /// The results are written in place, each where it goes (a fallible parallel collect
    /// would gather them in pieces and copy them into one vector on the calling thread). An
    /// oversold ledger's result is `R::default()` until the first oversell in ledger order is
    /// returned as the error.
    pub(super) fn run_rows<R: Send + Default>(
        &self,
        range: std::ops::Range<usize>,
        config: &PnlConfig,
        row: impl Fn(usize, &Ledger) -> R + Sync,
    ) -> Result<Vec<R>> {
        let first_oversell: std::sync::Mutex<Option<(usize, Oversold)>> = Default::default();
        let mut rows = Vec::with_capacity(range.len());
        range
            .into_par_iter()
            .map_init(
                || Ledger::new(config),
                |ledger, k| {
                    ledger.reset(config);
                    for e in self.events_of(k) {
                        if let Err(o) = ledger.apply(e) {
                            let mut first = first_oversell
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner);
                            if first.as_ref().is_none_or(|&(j, _)| k < j) {
                                *first = Some((k, o));
                            }
                            return R::default();
                        }
                    }
                    row(k, ledger)
                },
            )
            .collect_into_vec(&mut rows);
        let first = first_oversell
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match first {
            Some((k, o)) => Err(self.oversell(k, o)),
            None => Ok(rows),
        }
    }

    /// The error of ledger `k`'s oversell `o`.
    fn oversell(&self, k: usize, o: Oversold) -> Error {
        Error::Oversell {
            wallet: self.wallet(k).to_owned(),
            token: self.token(k).to_owned(),
            trade_id: o.id,
            held: o.held,
            sold: o.sold,
        }
    }

    /// The mark of `token` under `mark` (`None` when the latest price is unknown).
    pub fn mark_of(&self, token: &str, mark: Mark) -> Option<f64> {
        match mark {
            Mark::Price(p) => Some(p),
            Mark::Latest => self
                .token_names
                .binary_search_by(|t| t.as_str().cmp(token))
                .ok()
                .and_then(|t| self.latest_prices.get(t).copied().flatten()),
        }
    }

    /// The mark of ledger `k`'s token under `mark` (`None` when the latest price is unknown).
    pub fn mark_of_ledger(&self, k: usize, mark: Mark) -> Option<f64> {
        match mark {
            Mark::Price(p) => Some(p),
            Mark::Latest => self
                .latest_prices
                .get(self.ledger_tokens[k] as usize)
                .copied()
                .flatten(),
        }
    }
}
