//! Where a dataset's rows keep their token sides, and a row's side as an event: the rules
//! both readers share.

use super::{EventSource, Tick};
use crate::lake::cols::{event, swap, trade};

/// No token side on this row.
pub(super) const NO_SIDE: u32 = u32::MAX;

/// Whether a swap of this type has a token side when no token is named: its bought (`out`)
/// side and its sold (`in`) side (see the module docs).
pub(super) fn token_sides(swap_type: &str) -> (bool, bool) {
    (
        matches!(swap_type, "quote_token" | "token_token"),
        matches!(swap_type, "token_quote" | "token_token"),
    )
}

/// The numeric columns of some swaps, row by row: each row's bought or sold side as an event.
pub(super) struct SwapRows<'a> {
    pub(super) time: &'a [i64],
    pub(super) slot: &'a [i64],
    pub(super) id: &'a [i64],
    pub(super) amount_in: &'a [f64],
    pub(super) amount_out: &'a [f64],
    pub(super) price_in: &'a [f64],
    pub(super) price_out: &'a [f64],
    pub(super) usd_in: &'a [f64],
    pub(super) usd_out: &'a [f64],
}

impl SwapRows<'_> {
    /// Row `i`'s bought (`out`) side when `bought`, else its sold (`in`) side.
    pub(super) fn tick(&self, i: usize, bought: bool) -> Tick {
        let (price, base, usd) = if bought {
            (self.price_out[i], self.amount_out[i], self.usd_out[i])
        } else {
            (self.price_in[i], self.amount_in[i], self.usd_in[i])
        };
        Tick {
            time: self.time[i],
            slot: self.slot[i],
            id: self.id[i],
            price,
            base,
            usd,
            buy: bought,
        }
    }
}

/// Where a dataset's rows keep their token sides. A swap has a bought (`*_out`) and a sold
/// (`*_in`) side; a trade has one, bought when its direction is `buy`, and its columns serve
/// as both.
pub(super) struct Layout {
    /// The column whose value picks a row's sides (`swap_type`, `direction`).
    pub(super) kind: &'static str,
    /// Which sides a kind picks: (bought, sold).
    pub(super) sides: fn(&str) -> (bool, bool),
    /// Whether a wanted token's side counts whatever the kind (a swap of the token on either
    /// side), or only the side the kind picks.
    pub(super) wanted_any_side: bool,
    /// The sold and bought sides' token, amount, price and USD amount columns.
    pub(super) token: [&'static str; 2],
    pub(super) amount: [&'static str; 2],
    pub(super) price: [&'static str; 2],
    pub(super) usd: [&'static str; 2],
}

impl Layout {
    pub(super) fn of(source: EventSource) -> &'static Layout {
        match source {
            EventSource::Swaps => &SWAPS,
            EventSource::Trades => &TRADES,
        }
    }

    /// The columns of the first pass, each once (plus `block_time` with a bounded range and
    /// `pool_address` for a pool).
    pub(super) fn side_columns(&self) -> Vec<&'static str> {
        distinct([self.kind, self.token[0], self.token[1]])
    }

    /// The columns of the second pass, each once.
    pub(super) fn number_columns(&self) -> Vec<&'static str> {
        let [a, p, u] = [self.amount, self.price, self.usd];
        distinct([
            event::ID,
            event::BLOCK_SLOT,
            event::BLOCK_TIME,
            a[0],
            a[1],
            p[0],
            p[1],
            u[0],
            u[1],
        ])
    }
}

/// `names` without repeats, in order of first appearance.
fn distinct<const N: usize>(names: [&'static str; N]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::with_capacity(N);
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// A trade's one side: bought when its direction is `buy`, sold otherwise.
fn trade_sides(direction: &str) -> (bool, bool) {
    let buy = direction == "buy";
    (buy, !buy)
}

const SWAPS: Layout = Layout {
    kind: event::SWAP_TYPE,
    sides: token_sides,
    wanted_any_side: true,
    token: [swap::TOKEN_IN, swap::TOKEN_OUT],
    amount: [swap::AMOUNT_IN, swap::AMOUNT_OUT],
    price: [swap::PRICE_IN, swap::PRICE_OUT],
    usd: [swap::USD_IN, swap::USD_OUT],
};

const TRADES: Layout = Layout {
    kind: trade::DIRECTION,
    sides: trade_sides,
    wanted_any_side: false,
    token: [trade::TOKEN, trade::TOKEN],
    amount: [trade::AMOUNT, trade::AMOUNT],
    price: [trade::PRICE, trade::PRICE],
    usd: [trade::USD, trade::USD],
};
