//! A market that keeps trading: the swaps after the fixed "now" and the clock that reveals them.
//!
//! A live market is generated up to a horizon: the history exactly as a fixed market of the
//! same seed has it, then each token's walk goes on day by day after "now"
//! ([`Walk::day`](super::walk::Walk)). The swaps after "now" are numbered after the history in
//! event order, so ids keep growing with time. A [`Clock`] says which instant the service
//! answers at; the market taken at that instant shows the swaps with a block time at or before
//! it, and computes every derived answer there.
//!
//! Why a walk of cursors neither skips nor repeats: every swap after "now" has a later block
//! time, hence a later block slot, than every swap before it (a slot's block time grows with
//! the slot), and among the swaps after "now", ids follow the event order. So the swaps shown at
//! any instant are a prefix of the event order `(block_slot, id)`, and those that appear later
//! all sort above every swap shown before. A newest-first page below a cursor is the same
//! whatever the instant it is asked at.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use super::generate::NOW;
use super::market::{SwapRecord, fill_quote, mix};

/// Most days a live market trades after its fixed "now".
pub const MAX_HORIZON_DAYS: u32 = 3_650;

/// How a live simulator's market goes on after its fixed "now" (see [`SimConfig::live`]).
///
/// [`SimConfig::live`]: super::SimConfig::live
#[derive(Debug, Clone, PartialEq)]
pub struct LiveConfig {
    /// Simulated seconds per real second. Default 1.
    pub speed: f64,
    /// Whether the clock stands still but for [`Simulator::advance`](super::Simulator::advance),
    /// for tests that must not depend on the wall clock. Default false.
    pub manual: bool,
    /// Days of trading generated after the fixed "now"; the clock goes on after them, with no
    /// new swaps. Default 30.
    pub horizon_days: u32,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            speed: 1.0,
            manual: false,
            horizon_days: 30,
        }
    }
}

impl LiveConfig {
    /// Checks the speed and the horizon.
    pub fn validate(&self) -> crate::Result<()> {
        if !(self.speed > 0.0 && self.speed.is_finite()) {
            return Err(crate::Error::Config(format!(
                "live speed {} must be a positive number of simulated seconds per second",
                crate::error::number(self.speed)
            )));
        }
        if !(1..=MAX_HORIZON_DAYS).contains(&self.horizon_days) {
            return Err(crate::Error::Config(format!(
                "live horizon of {} days must lie in 1..={MAX_HORIZON_DAYS}",
                self.horizon_days
            )));
        }
        Ok(())
    }
}

/// Latest instant a clock reaches: a hundred years after the fixed "now".
const CLOCK_END: i64 = NOW + 100 * 365 * 86_400;

/// The simulated clock of a live simulator: starts at the fixed "now" and runs `speed`
/// simulated seconds per real second (or stands still when manual), plus every advance.
#[derive(Debug)]
pub(crate) struct Clock {
    origin: Instant,
    speed: f64,
    manual: bool,
    /// Seconds added by [`Clock::advance`].
    advanced: AtomicI64,
}

impl Clock {
    pub(crate) fn new(config: &LiveConfig) -> Clock {
        Clock {
            origin: Instant::now(),
            speed: config.speed,
            manual: config.manual,
            advanced: AtomicI64::new(0),
        }
    }

    /// The simulated instant, whole Unix seconds.
    pub(crate) fn now(&self) -> i64 {
        let running = if self.manual {
            0
        } else {
            (self.origin.elapsed().as_secs_f64() * self.speed).floor() as i64
        };
        NOW.saturating_add(self.advanced.load(Ordering::SeqCst))
            .saturating_add(running)
            .min(CLOCK_END)
    }

    /// Moves the clock `seconds` forward.
    pub(crate) fn advance(&self, seconds: u64) {
        let s = i64::try_from(seconds).unwrap_or(i64::MAX);
        let _ = self
            .advanced
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| {
                Some(a.saturating_add(s).min(CLOCK_END - NOW))
            });
    }

    /// Simulated seconds per real second (0 for a manual clock).
    pub(crate) fn speed(&self) -> f64 {
        if self.manual { 0.0 } else { self.speed }
    }
}

/// The swaps of a live chain after its fixed "now", numbered after the history in event order:
/// the `j`-th of them has index `history + j` and id `first_id + history + j`.
#[derive(Debug)]
pub(crate) struct Continuation {
    /// Per swap: its token and its position in the token's stream (history included).
    pub(crate) entries: Vec<(u32, u32)>,
    /// Per swap: its block slot.
    pub(crate) slots: Vec<i64>,
    /// Per swap: its block time, Unix seconds (never decreasing).
    pub(crate) times: Vec<i64>,
    /// Per token: indexes of its swaps after "now", in event order.
    pub(crate) by_token: Vec<Vec<u32>>,
    /// Per pool: indexes of its swaps after "now", in event order.
    pub(crate) by_pool: Vec<Vec<u32>>,
    /// Per wallet: indexes of its swaps after "now", in event order.
    pub(crate) by_wallet: Vec<Vec<u32>>,
    /// End of the generated days, Unix seconds.
    pub(crate) end: i64,
}

impl Continuation {
    /// How many of the swaps have a block time at or before `now`.
    pub(crate) fn visible_at(&self, now: i64) -> u32 {
        self.times.partition_point(|&t| t <= now) as u32
    }

    /// The part of `list` (indexes in event order) below `bound`.
    pub(crate) fn prefix(list: &[u32], bound: u32) -> &[u32] {
        &list[..list.partition_point(|&i| i < bound)]
    }
}

/// What [`continuation`] needs to know of a chain.
pub(crate) struct ChainShape<'a> {
    /// Seed of the chain's hashes.
    pub(crate) key: u64,
    /// Number of swaps of the history.
    pub(crate) history: u32,
    /// Per token: number of swaps of its history.
    pub(crate) history_lens: Vec<u32>,
    pub(crate) pools: usize,
    pub(crate) wallets: usize,
    /// Per wallet: its quote balances at the fixed "now".
    pub(crate) final_quotes: &'a [[f64; 2]],
    /// End of the generated days, Unix seconds.
    pub(crate) end: i64,
}

/// Numbers each token's swaps after "now" (`after[t]`, in the token's order) in the chain's
/// event order and fills their quote balances, going on from the balances at "now".
///
/// A wallet that buys with more of a quote token than it holds first receives some (a transfer
/// the service does not show as a swap): its balance before the swap is the swap's quote
/// amount plus a seeded margin. The history's balances cannot be raised instead, since they
/// are the fixed market's to the byte.
pub(crate) fn continuation(shape: &ChainShape<'_>, after: &mut [Vec<SwapRecord>]) -> Continuation {
    let mut order: Vec<(i64, u32, u32)> = after
        .iter()
        .enumerate()
        .flat_map(|(t, swaps)| {
            swaps
                .iter()
                .enumerate()
                .map(move |(k, r)| (r.slot, t as u32, k as u32))
        })
        .collect();
    order.sort_unstable();
    let mut out = Continuation {
        entries: Vec::with_capacity(order.len()),
        slots: Vec::with_capacity(order.len()),
        times: Vec::with_capacity(order.len()),
        by_token: vec![Vec::new(); after.len()],
        by_pool: vec![Vec::new(); shape.pools],
        by_wallet: vec![Vec::new(); shape.wallets],
        end: shape.end,
    };
    let mut balance: HashMap<(u32, u8), f64> = HashMap::new();
    for (j, &(slot, t, k)) in order.iter().enumerate() {
        let index =
            shape.history + u32::try_from(j).expect("a chain has fewer than 2^32 swaps after now");
        let r = &mut after[t as usize][k as usize];
        let held = balance
            .entry((r.wallet, r.quote))
            .or_insert(shape.final_quotes[r.wallet as usize][r.quote as usize]);
        if r.buy && *held < r.quote_amount {
            let margin = (mix(shape.key ^ 0x0074_6f70_7570, u64::from(index)) % 10_000) as f64
                / 1_000.0
                * if r.quote == 0 { 1.0 } else { 100.0 };
            *held = r.quote_amount + margin;
        }
        fill_quote(r, *held);
        *held = r.post_quote;
        out.entries.push((t, shape.history_lens[t as usize] + k));
        out.slots.push(slot);
        out.times.push(r.time);
        out.by_token[t as usize].push(index);
        out.by_pool[r.pool as usize].push(index);
        out.by_wallet[r.wallet as usize].push(index);
    }
    out
}
