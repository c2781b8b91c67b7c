//! The in-memory reader: the token side of swaps or trades held in a frame of the lake's
//! schema (a Spark group handed over as Arrow, a frame built by the caller), by token, in
//! event order. It applies the rules of `layout.rs` as the row-group reader does, so the
//! events of a frame holding a lake's rows are the events the lake's reader gives; the
//! reference reader of the tests reads each file's frame through it too.

use polars::prelude::*;

use super::layout::{NO_SIDE, SwapRows, token_sides};
use super::{
    EventSource, Events, Selection, Tick, TimeRange, TokenEvents, TokenSet, wanted_tokens,
};
use crate::analytics::columns::{f64_col, i64_col, micros_col, str_col};
use crate::lake::cols::{event, swap, trade};
use crate::{Error, Result};

/// Events by token address.
pub(super) type TokenMap<V> = PlHashMap<String, V>;

/// The token side of the selected events in `range` of `frame`, a frame of `source`'s
/// dataset (the lake's columns; `block_time` a timestamp of any unit or integer
/// microseconds), by token in address order, each in event order: what
/// [`load_events`](super::load_events) gives of a lake holding the same rows. A token
/// without events is absent; a missing column or one of another type is an error naming it.
pub fn events_of_frame(
    frame: &DataFrame,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
) -> Result<Vec<TokenEvents>> {
    range.validate()?;
    let wanted = wanted_tokens(source, selection)?;
    // Two token sides a row, each numbered below `NO_SIDE`.
    if frame.height() >= (NO_SIDE / 2) as usize {
        return Err(Error::InvalidArgument {
            argument: "events".into(),
            reason: format!(
                "{} rows are more than one frame takes (2^31)",
                frame.height()
            ),
        });
    }
    // Rows outside the range or of another pool are left out first.
    let keep = range_and_pool(frame, selection, range)?;
    let kept;
    let frame = match keep {
        None => frame,
        Some(k) => {
            let mask = BooleanChunked::from_slice("keep".into(), &k);
            kept = frame
                .filter(&mask)
                .map_err(Error::polars("selecting events"))?;
            &kept
        }
    };
    let mut out: Vec<TokenEvents> = rows_to_events(frame, source, wanted.as_ref())?
        .into_iter()
        .map(|(token, mut events)| {
            events.sort();
            TokenEvents { token, events }
        })
        .collect();
    out.sort_by(|a, b| a.token.cmp(&b.token));
    Ok(out)
}

/// Which rows of `frame` lie in `range` and (a pool selected) are of the pool; `None` when
/// neither applies (every row).
fn range_and_pool(
    frame: &DataFrame,
    selection: &Selection,
    range: TimeRange,
) -> Result<Option<Vec<bool>>> {
    let (lo, hi) = (
        range.from.map(|t| t.timestamp_micros()),
        range.to.map(|t| t.timestamp_micros()),
    );
    let mut keep: Option<Vec<bool>> = None;
    if lo.is_some() || hi.is_some() {
        let time = micros_col(frame, event::BLOCK_TIME)?;
        keep = Some(
            time.iter()
                .map(|&t| lo.is_none_or(|lo| t >= lo) && hi.is_none_or(|hi| t < hi))
                .collect(),
        );
    }
    if let Selection::Pool(p) = selection {
        let pools = str_col(frame, swap::POOL)?;
        let k = keep.get_or_insert_with(|| vec![true; frame.height()]);
        for (k, pool) in k.iter_mut().zip(pools) {
            *k &= pool == p.as_str();
        }
    }
    Ok(keep)
}

/// Which rows of `frame` (of `source`'s dataset) can hold selected events in `range`: those
/// [`events_of_frame`] reads (in the range, of the pool) and, when tokens are selected, with
/// a token of theirs on a side. The rows left out give no selected event, so the events of
/// the rows kept are the events of the whole frame: a filter before rows are moved.
pub fn selected_rows(
    frame: &DataFrame,
    source: EventSource,
    selection: &Selection,
    range: TimeRange,
) -> Result<Vec<bool>> {
    range.validate()?;
    let wanted = wanted_tokens(source, selection)?;
    let mut keep =
        range_and_pool(frame, selection, range)?.unwrap_or_else(|| vec![true; frame.height()]);
    if let Some(wanted) = wanted {
        let sides: Vec<Vec<&str>> = match source {
            EventSource::Swaps => vec![
                str_col(frame, swap::TOKEN_IN)?,
                str_col(frame, swap::TOKEN_OUT)?,
            ],
            EventSource::Trades => vec![str_col(frame, trade::TOKEN)?],
        };
        for (i, k) in keep.iter_mut().enumerate() {
            *k &= sides.iter().any(|side| wanted.contains(side[i]));
        }
    }
    Ok(keep)
}

/// Token sides of the rows of one frame: each side's token as a small index into the frame's
/// distinct tokens, so a token's name is hashed once per row and allocated once per frame.
struct FileTokens<'a> {
    /// Distinct tokens of the file, by index.
    names: Vec<&'a str>,
    index: PlHashMap<&'a str, u32>,
    /// Events per token index.
    counts: Vec<usize>,
}

impl<'a> FileTokens<'a> {
    fn new() -> Self {
        FileTokens {
            names: Vec::new(),
            index: PlHashMap::default(),
            counts: Vec::new(),
        }
    }

    /// The index of `token`, counting one more event for it.
    fn count(&mut self, token: &'a str) -> u32 {
        let k = match self.index.get(token) {
            Some(&k) => k,
            None => {
                // At most two tokens a row, and a frame's rows are fewer than 2^31 (checked).
                let k = self.names.len() as u32;
                self.names.push(token);
                self.counts.push(0);
                self.index.insert(token, k);
                k
            }
        };
        self.counts[k as usize] += 1;
        k
    }

    /// Empty event columns sized for each token's events.
    fn columns(&self) -> Vec<Events> {
        self.counts
            .iter()
            .map(|&n| Events {
                time: Vec::with_capacity(n),
                slot: Vec::with_capacity(n),
                id: Vec::with_capacity(n),
                price: Vec::with_capacity(n),
                base: Vec::with_capacity(n),
                usd: Vec::with_capacity(n),
                buy: Vec::with_capacity(n),
            })
            .collect()
    }

    /// The filled columns by token name.
    fn into_map(self, columns: Vec<Events>) -> TokenMap<Events> {
        self.names
            .into_iter()
            .map(str::to_owned)
            .zip(columns)
            .collect()
    }
}

/// The token side of each row of a frame of swaps or trades, by token. A first pass finds each
/// row's token sides and counts the events per token, a second one fills columns allocated at
/// their final size.
pub(super) fn rows_to_events(
    df: &DataFrame,
    source: EventSource,
    wanted: Option<&TokenSet<'_>>,
) -> Result<TokenMap<Events>> {
    let time = micros_col(df, event::BLOCK_TIME)?;
    let slot = i64_col(df, event::BLOCK_SLOT)?;
    let id = i64_col(df, event::ID)?;
    let keep = |t: &str| wanted.is_none_or(|w| w.contains(t));
    let mut sides = FileTokens::new();
    let mut columns;
    match source {
        EventSource::Swaps => {
            let kind = str_col(df, event::SWAP_TYPE)?;
            let t_in = str_col(df, swap::TOKEN_IN)?;
            let t_out = str_col(df, swap::TOKEN_OUT)?;
            // The token of each row's bought (`out`) and sold (`in`) side, or NO_SIDE.
            let mut outs = Vec::with_capacity(df.height());
            let mut ins = Vec::with_capacity(df.height());
            for ((k, ti), to) in kind.iter().zip(t_in.iter()).zip(t_out.iter()) {
                let (k, ti, to) = (*k, *ti, *to);
                let (side_out, side_in) = match wanted {
                    Some(w) => (w.contains(to), w.contains(ti)),
                    None => token_sides(k),
                };
                outs.push(if side_out { sides.count(to) } else { NO_SIDE });
                ins.push(if side_in { sides.count(ti) } else { NO_SIDE });
            }
            columns = sides.columns();
            let (a_in, a_out) = (
                f64_col(df, swap::AMOUNT_IN)?,
                f64_col(df, swap::AMOUNT_OUT)?,
            );
            let (p_in, p_out) = (f64_col(df, swap::PRICE_IN)?, f64_col(df, swap::PRICE_OUT)?);
            let (u_in, u_out) = (f64_col(df, swap::USD_IN)?, f64_col(df, swap::USD_OUT)?);
            let rows = SwapRows {
                time: &time,
                slot: &slot,
                id: &id,
                amount_in: &a_in,
                amount_out: &a_out,
                price_in: &p_in,
                price_out: &p_out,
                usd_in: &u_in,
                usd_out: &u_out,
            };
            for (i, (&o, &n)) in outs.iter().zip(&ins).enumerate() {
                if o != NO_SIDE {
                    columns[o as usize].push(rows.tick(i, true));
                }
                if n != NO_SIDE {
                    columns[n as usize].push(rows.tick(i, false));
                }
            }
        }
        EventSource::Trades => {
            let token = str_col(df, trade::TOKEN)?;
            let dir = str_col(df, trade::DIRECTION)?;
            let tokens: Vec<u32> = token
                .iter()
                .map(|t| {
                    let t = *t;
                    if keep(t) { sides.count(t) } else { NO_SIDE }
                })
                .collect();
            columns = sides.columns();
            let (amount, price, usd) = (
                f64_col(df, trade::AMOUNT)?,
                f64_col(df, trade::PRICE)?,
                f64_col(df, trade::USD)?,
            );
            for (i, (&t, d)) in tokens.iter().zip(dir.iter()).enumerate() {
                if t == NO_SIDE {
                    continue;
                }
                columns[t as usize].push(Tick {
                    time: time[i],
                    slot: slot[i],
                    id: id[i],
                    price: price[i],
                    base: amount[i],
                    usd: usd[i],
                    buy: *d == "buy",
                });
            }
        }
    }
    Ok(sides.into_map(columns))
}
