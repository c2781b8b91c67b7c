//! The input frames read into ledger events before grouping: trades (and swaps for wallets
//! without trades) as one column per field, wallets and tokens interned into sorted
//! dictionaries, amounts and USD values as the ledger takes them.

use std::borrow::Cow;

use polars::prelude::*;
use rayon::prelude::*;

use super::ledger::{LedgerEvent, TradeSide};
use super::options::PnlOptions;
use super::swaps_count;
use crate::Result;
use crate::analytics::columns::{
    f64_col, f64_slice, i64_col, i64_slice, micros_col, micros_slice, str_at, str_chunk,
};
use crate::analytics::intern::intern;
use crate::lake::cols::{event, swap, trade};

/// Columns read from the trades dataset.
pub const TRADE_COLUMNS: [&str; 9] = [
    event::WALLET,
    trade::TOKEN,
    trade::DIRECTION,
    trade::AMOUNT,
    trade::USD,
    trade::PRICE,
    event::BLOCK_TIME,
    event::BLOCK_SLOT,
    event::ID,
];

/// Columns read from the swaps dataset.
pub const SWAP_COLUMNS: [&str; 12] = [
    event::WALLET,
    event::SWAP_TYPE,
    swap::TOKEN_IN,
    swap::TOKEN_OUT,
    swap::AMOUNT_IN,
    swap::AMOUNT_OUT,
    swap::PRICE_IN,
    swap::PRICE_OUT,
    swap::USD_IN,
    swap::USD_OUT,
    event::BLOCK_TIME,
    event::BLOCK_SLOT,
];

/// A USD value: the given amount when it is a finite positive number, else price × quantity.
pub(super) fn usd_value(usd: f64, price: f64, quantity: f64) -> f64 {
    if usd.is_finite() && usd > 0.0 {
        usd
    } else if price.is_finite() {
        price * quantity
    } else {
        0.0
    }
}

/// A token quantity as the ledger takes it: its size when finite, else 0.
pub(super) fn quantity_of(amount: f64) -> f64 {
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
/// allow it); [`EventRows::event`] applies the ledger's rules. An empty `fee` column means no
/// fees.
#[derive(Default)]
pub(super) struct EventRows<'a> {
    pub(super) wallet: Vec<u32>,
    pub(super) token: Vec<u32>,
    pub(super) side: Vec<Option<TradeSide>>,
    pub(super) amount: Cow<'a, [f64]>,
    pub(super) usd: Cow<'a, [f64]>,
    pub(super) price: Cow<'a, [f64]>,
    pub(super) fee: Vec<f64>,
    pub(super) time: Cow<'a, [i64]>,
    pub(super) slot: Cow<'a, [i64]>,
    pub(super) id: Cow<'a, [i64]>,
}

impl EventRows<'_> {
    pub(super) fn len(&self) -> usize {
        self.side.len()
    }

    #[inline]
    pub(super) fn order_key(&self, r: usize) -> (i64, i64, i64) {
        (self.time[r], self.slot[r], self.id[r])
    }

    #[inline]
    pub(super) fn event(&self, r: usize) -> LedgerEvent {
        LedgerEvent {
            time: self.time[r],
            slot: self.slot[r],
            id: self.id[r],
            side: self.side[r].unwrap_or(TradeSide::Buy),
            quantity: quantity_of(self.amount[r]),
            usd: usd_value(self.usd[r], self.price[r], self.amount[r]),
            fee: self.fee.get(r).copied().unwrap_or(0.0),
        }
    }

    /// Appends the rows of `other`.
    fn append(&mut self, other: EventRows<'_>) {
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

/// Which token a query keeps: every token, or the one of this index (`None` when the
/// dictionary does not hold it, so no row is kept).
pub(super) type TokenFilter = Option<Option<u32>>;

fn keeps(filter: TokenFilter, token: u32) -> bool {
    filter.is_none_or(|t| t == Some(token))
}

/// The trade rows: `wallet` and `token` already interned.
fn trade_rows<'a>(
    trades: &'a DataFrame,
    wallet: Vec<u32>,
    token: Vec<u32>,
    filter: TokenFilter,
) -> Result<EventRows<'a>> {
    let direction = str_chunk(trades, trade::DIRECTION)?;
    let direction = direction.downcast_as_array();
    let side: Vec<Option<TradeSide>> = (0..direction.len())
        .into_par_iter()
        .map(|i| {
            if !keeps(filter, token[i]) {
                return None;
            }
            match str_at(direction, i) {
                "buy" => Some(TradeSide::Buy),
                "sell" => Some(TradeSide::Sell),
                _ => None,
            }
        })
        .collect();
    Ok(EventRows {
        wallet,
        token,
        side,
        amount: f64_slice(trades, trade::AMOUNT)?,
        usd: f64_slice(trades, trade::USD)?,
        price: f64_slice(trades, trade::PRICE)?,
        fee: Vec::new(),
        time: micros_slice(trades, event::BLOCK_TIME)?,
        slot: i64_slice(trades, event::BLOCK_SLOT)?,
        id: i64_slice(trades, event::ID)?,
    })
}

/// The interned columns of a swaps frame, and the wallets with trades (whose swaps are left
/// out: [`swaps_count`]).
struct InternedSwaps<'a> {
    wallet: &'a [u32],
    token_in: &'a [u32],
    token_out: &'a [u32],
    has_trades: &'a [bool],
}

/// Ledger events of swaps, appended to `rows`: a `quote_token` swap buys `token_address_out`,
/// a `token_quote` swap sells `token_address_in`, a `token_token` swap does both (the sell
/// first); other swap types are skipped, and so are the swaps of wallets with trades. A swap's fee is
/// what its input was worth above its output (`usd_amount_in − usd_amount_out`, when
/// positive), booked on the sell side, or on the buy side when there is no sell side. Swaps
/// have no id in the event key beyond their slot: the swap's `id` column is used when present.
fn swap_rows(
    swaps: &DataFrame,
    ids: InternedSwaps<'_>,
    filter: TokenFilter,
) -> Result<EventRows<'static>> {
    let mut rows = EventRows::default();
    let (mut amount, mut usd_col, mut price_col) = (Vec::new(), Vec::new(), Vec::new());
    let (mut times, mut slots, mut ids_) = (Vec::new(), Vec::new(), Vec::new());
    let swap_type = str_chunk(swaps, event::SWAP_TYPE)?;
    let swap_type = swap_type.downcast_as_array();
    let a_in = f64_col(swaps, swap::AMOUNT_IN)?;
    let a_out = f64_col(swaps, swap::AMOUNT_OUT)?;
    let p_in = f64_col(swaps, swap::PRICE_IN)?;
    let p_out = f64_col(swaps, swap::PRICE_OUT)?;
    let u_in = f64_col(swaps, swap::USD_IN)?;
    let u_out = f64_col(swaps, swap::USD_OUT)?;
    let time = micros_col(swaps, event::BLOCK_TIME)?;
    let slot = i64_col(swaps, event::BLOCK_SLOT)?;
    let id = i64_col(swaps, event::ID)?;
    for i in 0..swap_type.len() {
        let w = ids.wallet[i];
        if !swaps_count(ids.has_trades[w as usize]) {
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
            push(
                ids.token_in[i],
                TradeSide::Sell,
                a_in[i],
                u_in[i],
                p_in[i],
                fee,
            );
        }
        if buy {
            let buy_fee = if sell { 0.0 } else { fee };
            push(
                ids.token_out[i],
                TradeSide::Buy,
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

/// The events of a trades frame and, for wallets with no trade in it, of a swaps frame, with
/// the sorted dictionaries of their wallets and tokens.
pub(super) fn read_rows<'a>(
    trades: &'a DataFrame,
    swaps: Option<&DataFrame>,
    query: &PnlOptions,
) -> Result<(EventRows<'a>, Vec<String>, Vec<String>)> {
    let t_wallet = str_chunk(trades, event::WALLET)?;
    let t_token = str_chunk(trades, trade::TOKEN)?;
    let s_cols = swaps
        .map(|s| -> Result<_> {
            Ok((
                str_chunk(s, event::WALLET)?,
                str_chunk(s, swap::TOKEN_IN)?,
                str_chunk(s, swap::TOKEN_OUT)?,
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
    let mut has_trades = vec![false; wallets.len()];
    if swaps.is_some() {
        for &w in &tw {
            has_trades[w as usize] = true;
        }
    }
    let mut rows = trade_rows(trades, tw, tt, filter)?;
    if let Some(swaps) = swaps {
        let (sw, si, so) = (
            wallet_ids.next().unwrap_or_default(),
            token_ids.next().unwrap_or_default(),
            token_ids.next().unwrap_or_default(),
        );
        let ids = InternedSwaps {
            wallet: &sw,
            token_in: &si,
            token_out: &so,
            has_trades: &has_trades,
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
pub(super) fn find(dict: &[String], s: &str) -> Option<usize> {
    dict.binary_search_by(|d| d.as_str().cmp(s)).ok()
}
