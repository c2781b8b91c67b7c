//! A row group's key columns as the PnL's events: which rows give an event, of which wallet and
//! token (numbered in the reader's shared registries), on which side, selling or buying, and
//! where a swap's fee is booked. Both readers of the lake's ledgers (whole, `lake_reader`, and
//! in parts, `lake_parts`) take their events from here, so the rules of trades and swaps live
//! once, and both make their first pass with [`key_pass`]: the trades' keys, then the swaps' of
//! wallets without trades, the names numbered in shared registries and sorted at the end.

use std::sync::{Mutex, PoisonError, RwLock};

use arrow_array::RecordBatch;
use rayon::prelude::*;

use super::lake_files::{DataFiles, Filter, NONE, SWAPS, TRADES, per_row_group, swap_sides};
use super::swaps_count;
use crate::Result;
use crate::analytics::arrow_columns::dictionary;
use crate::analytics::intern::NameRegistry;
use crate::lake::Lake;
use crate::lake::cols::{event, swap, trade};

/// The registry number of each name (a shared lock for the lookups, the exclusive one only for
/// names not seen before).
/// Names `keep` leaves out (when given) get no number: [`NONE`].
pub(super) fn numbers_of(
    registry: &RwLock<NameRegistry>,
    names: &[&str],
    keep: Option<&[bool]>,
) -> Vec<u32> {
    let mut ids: Vec<u32> = {
        let reg = registry.read().unwrap_or_else(PoisonError::into_inner);
        match keep {
            None => reg
                .get_many(names)
                .into_iter()
                .map(|id| id.unwrap_or(UNSEEN))
                .collect(),
            Some(keep) => {
                let kept: Vec<&str> = (0..names.len())
                    .filter(|&i| keep[i])
                    .map(|i| names[i])
                    .collect();
                let mut found = reg.get_many(&kept).into_iter();
                (0..names.len())
                    .map(|i| match keep[i] {
                        true => found.next().flatten().unwrap_or(UNSEEN),
                        false => NONE,
                    })
                    .collect()
            }
        }
    };
    if ids.contains(&UNSEEN) {
        let mut reg = registry.write().unwrap_or_else(PoisonError::into_inner);
        for (id, name) in ids.iter_mut().zip(names).filter(|(id, _)| **id == UNSEEN) {
            *id = reg.id(name);
        }
    }
    ids
}

/// The wallets (by registry number) with a trade of a token kept, whose swaps do not count.
#[derive(Default)]
struct Traders(Vec<bool>);

impl Traders {
    /// Marks the wallets `ids` ([`GroupKeys::traders`]).
    fn mark(&mut self, ids: &[u32]) {
        for &w in ids {
            if let Some(t) = self.0.get_mut(w as usize) {
                *t = true;
            } else {
                self.0.resize(w as usize + 1, false);
                self.0[w as usize] = true;
            }
        }
    }
}

/// The names a [`key_pass`] numbered, sorted: `wallet_rank[n]` is the place of the wallet
/// numbered `n` in `wallet_names` (and the same for the tokens).
pub(super) struct SortedNames {
    pub(super) wallet_names: Vec<String>,
    pub(super) wallet_rank: Vec<u32>,
    pub(super) token_names: Vec<String>,
    pub(super) token_rank: Vec<u32>,
}

/// What a [`key_pass`] gives: `on_group`'s answer per row group (the trades' in the order of
/// their row groups, then the swaps'), and the names.
pub(super) struct KeyPass<T> {
    pub(super) trades: Vec<T>,
    pub(super) swaps: Vec<T>,
    pub(super) names: SortedNames,
}

/// One pass over the key columns of the row groups `groups` of the trades and swaps `files`:
/// the trades first, then, once every wallet with a trade of a kept token is known, the swaps
/// (whose events those wallets do not take, [`swaps_count`]). Each row group's names are
/// numbered in shared registries, and `on_group` sees its keys and its rank among the trades'
/// row groups then the swaps' (row groups in parallel, a window of files at a time).
pub(super) fn key_pass<T: Send>(
    lake: &Lake,
    [trades, swaps]: [&DataFiles; 2],
    [trade_groups, swap_groups]: [&[(usize, usize)]; 2],
    filter: &Filter<'_>,
    on_group: impl Fn(&GroupKeys, usize) -> Result<T> + Sync,
) -> Result<KeyPass<T>> {
    let wallets = RwLock::new(NameRegistry::default());
    let tokens = RwLock::new(NameRegistry::default());
    let traders = Mutex::new(Traders::default());
    let trade_answers = per_row_group(lake, trades, trade_groups, |file, k, g| {
        let batch = file.read_row_group(&trades.footers[k], g, TRADES.keys)?;
        let keys = GroupKeys::trades(&batch, &trades.paths[k], filter, &wallets, &tokens)?;
        let answer = on_group(&keys, trade_groups.partition_point(|&rg| rg < (k, g)))?;
        let ids = keys.traders();
        traders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .mark(&ids);
        Ok(answer)
    })?;
    let traders = traders.into_inner().unwrap_or_else(PoisonError::into_inner);
    let swap_answers = per_row_group(lake, swaps, swap_groups, |file, k, g| {
        let batch = file.read_row_group(&swaps.footers[k], g, SWAPS.keys)?;
        let keys = GroupKeys::swaps(
            &batch,
            &swaps.paths[k],
            filter,
            &wallets,
            &tokens,
            &traders.0,
        )?;
        on_group(
            &keys,
            trade_groups.len() + swap_groups.partition_point(|&rg| rg < (k, g)),
        )
    })?;
    drop(traders);
    let into_names =
        |r: RwLock<NameRegistry>| r.into_inner().unwrap_or_else(PoisonError::into_inner).names;
    let (wallet_names, wallet_rank) = sorted(into_names(wallets));
    let (token_names, token_rank) = sorted(into_names(tokens));
    Ok(KeyPass {
        trades: trade_answers,
        swaps: swap_answers,
        names: SortedNames {
            wallet_names,
            wallet_rank,
            token_names,
            token_rank,
        },
    })
}

/// `names` in byte order, and the rank of each name (by its old place) in that order.
fn sorted(names: Vec<String>) -> (Vec<String>, Vec<u32>) {
    let mut order: Vec<u32> = (0..names.len() as u32).collect();
    order.par_sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
    let mut rank = vec![0u32; names.len()];
    for (r, &k) in order.iter().enumerate() {
        rank[k as usize] = r as u32;
    }
    let mut slots: Vec<Option<String>> = names.into_iter().map(Some).collect();
    let sorted = order
        .iter()
        .map(|&k| slots[k as usize].take().unwrap_or_default())
        .collect();
    (sorted, rank)
}

/// A name kept but not numbered yet.
const UNSEEN: u32 = NONE - 1;

/// One event of a row.
#[derive(Debug, Clone, Copy)]
pub(super) struct KeyEvent {
    /// The row, in its row group.
    pub(super) row: usize,
    /// 0: a trade, or a swap's sold (`in`) side; 1: a swap's bought (`out`) side.
    pub(super) side: usize,
    /// The wallet's code in the row group's dictionary, and its registry number.
    pub(super) wallet_code: u32,
    pub(super) wallet: u32,
    /// The token's registry number.
    pub(super) token: u32,
    pub(super) sell: bool,
    /// Whether the swap's fee is booked on this event: on its sold side, on the bought side
    /// only when its type sells nothing; never on a trade.
    pub(super) fee: bool,
}

/// The trades' or the swaps' own columns.
enum Kinds {
    Trades {
        tokens: Vec<u32>,
        token_ids: Vec<u32>,
        token_ok: Vec<bool>,
        directions: Vec<u32>,
        /// Per direction: `Some(sell)` for `buy` and `sell`, else no event.
        side: Vec<Option<bool>>,
    },
    Swaps {
        kinds: Vec<u32>,
        /// Per swap type: whether it sells its `in` side and buys its `out` side.
        sides: Vec<(bool, bool)>,
        ins: Vec<u32>,
        in_ids: Vec<u32>,
        in_ok: Vec<bool>,
        outs: Vec<u32>,
        out_ids: Vec<u32>,
        out_ok: Vec<bool>,
    },
}

/// A row group's keys, decoded as dictionaries and their names numbered.
pub(super) struct GroupKeys {
    wallets: Vec<u32>,
    wallet_ids: Vec<u32>,
    /// Per wallet code: whether its rows give events.
    wallet_ok: Vec<bool>,
    kinds: Kinds,
}

impl GroupKeys {
    /// The keys of a row group of trades: only the wallets `filter` keeps are numbered.
    pub(super) fn trades(
        batch: &RecordBatch,
        path: &str,
        filter: &Filter<'_>,
        wallets: &RwLock<NameRegistry>,
        tokens: &RwLock<NameRegistry>,
    ) -> Result<GroupKeys> {
        let (w_codes, w_dict) = dictionary(batch, event::WALLET, path)?;
        let w_names = w_dict.names();
        let (t_codes, t_dict) = dictionary(batch, trade::TOKEN, path)?;
        let t_names = t_dict.names();
        let (d_codes, d_dict) = dictionary(batch, trade::DIRECTION, path)?;
        let wallet_ok: Vec<bool> = w_names.iter().map(|w| filter.wallet_ok(w)).collect();
        let wallet_ids = numbers_of(wallets, &w_names, Some(&wallet_ok));
        let side = d_dict
            .names()
            .iter()
            .map(|d| match *d {
                "buy" => Some(false),
                "sell" => Some(true),
                _ => None,
            })
            .collect();
        Ok(GroupKeys {
            wallets: w_codes,
            wallet_ids,
            wallet_ok,
            kinds: Kinds::Trades {
                tokens: t_codes,
                token_ids: numbers_of(tokens, &t_names, None),
                token_ok: t_names.iter().map(|t| filter.token_ok(t)).collect(),
                directions: d_codes,
                side,
            },
        })
    }

    /// The keys of a row group of swaps; `traders[w]` marks the wallets (by registry number)
    /// whose swaps are left out ([`swaps_count`]).
    pub(super) fn swaps(
        batch: &RecordBatch,
        path: &str,
        filter: &Filter<'_>,
        wallets: &RwLock<NameRegistry>,
        tokens: &RwLock<NameRegistry>,
        traders: &[bool],
    ) -> Result<GroupKeys> {
        let (w_codes, w_dict) = dictionary(batch, event::WALLET, path)?;
        let w_names = w_dict.names();
        let (k_codes, k_dict) = dictionary(batch, event::SWAP_TYPE, path)?;
        let (i_codes, i_dict) = dictionary(batch, swap::TOKEN_IN, path)?;
        let i_names = i_dict.names();
        let (o_codes, o_dict) = dictionary(batch, swap::TOKEN_OUT, path)?;
        let o_names = o_dict.names();
        let asked: Vec<bool> = w_names.iter().map(|w| filter.wallet_ok(w)).collect();
        let wallet_ids = numbers_of(wallets, &w_names, Some(&asked));
        let wallet_ok = asked
            .iter()
            .zip(&wallet_ids)
            .map(|(&a, &id)| a && swaps_count(traders.get(id as usize).copied().unwrap_or(false)))
            .collect();
        Ok(GroupKeys {
            wallets: w_codes,
            wallet_ids,
            wallet_ok,
            kinds: Kinds::Swaps {
                kinds: k_codes,
                sides: k_dict.names().iter().map(|k| swap_sides(k)).collect(),
                ins: i_codes,
                in_ids: numbers_of(tokens, &i_names, None),
                in_ok: i_names.iter().map(|t| filter.token_ok(t)).collect(),
                outs: o_codes,
                out_ids: numbers_of(tokens, &o_names, None),
                out_ok: o_names.iter().map(|t| filter.token_ok(t)).collect(),
            },
        })
    }

    /// The number of rows.
    pub(super) fn rows(&self) -> usize {
        self.wallets.len()
    }

    /// The number of distinct wallets (codes) of the row group.
    pub(super) fn wallet_codes(&self) -> usize {
        self.wallet_ids.len()
    }

    /// The registry number of wallet code `code` ([`NONE`] for a wallet not kept).
    pub(super) fn wallet_id(&self, code: u32) -> u32 {
        self.wallet_ids[code as usize]
    }

    /// Whether the row group is of swaps (else of trades).
    pub(super) fn is_swaps(&self) -> bool {
        matches!(self.kinds, Kinds::Swaps { .. })
    }

    /// The wallets kept (registry numbers) with a trade of a token kept: those whose swaps do
    /// not count. None for swaps.
    pub(super) fn traders(&self) -> Vec<u32> {
        let Kinds::Trades {
            tokens, token_ok, ..
        } = &self.kinds
        else {
            return Vec::new();
        };
        let mut trader = vec![false; self.wallet_ids.len()];
        for (&w, &t) in self.wallets.iter().zip(tokens) {
            if token_ok[t as usize] {
                trader[w as usize] = true;
            }
        }
        trader
            .iter()
            .zip(&self.wallet_ids)
            .filter(|(t, id)| **t && **id != NONE)
            .map(|(_, &id)| id)
            .collect()
    }

    /// Calls `f` on each event, in row order, a swap's sold side before its bought side.
    pub(super) fn for_each(&self, mut f: impl FnMut(KeyEvent)) {
        match &self.kinds {
            Kinds::Trades {
                tokens,
                token_ids,
                token_ok,
                directions,
                side,
            } => {
                for row in 0..self.wallets.len() {
                    let (w, t) = (self.wallets[row], tokens[row] as usize);
                    if !token_ok[t] || !self.wallet_ok[w as usize] {
                        continue;
                    }
                    if let Some(sell) = side[directions[row] as usize] {
                        f(KeyEvent {
                            row,
                            side: 0,
                            wallet_code: w,
                            wallet: self.wallet_ids[w as usize],
                            token: token_ids[t],
                            sell,
                            fee: false,
                        });
                    }
                }
            }
            Kinds::Swaps {
                kinds,
                sides,
                ins,
                in_ids,
                in_ok,
                outs,
                out_ids,
                out_ok,
            } => {
                for row in 0..self.wallets.len() {
                    let w = self.wallets[row];
                    if !self.wallet_ok[w as usize] {
                        continue;
                    }
                    let wallet = self.wallet_ids[w as usize];
                    let (sells, buys) = sides[kinds[row] as usize];
                    let (ti, to) = (ins[row] as usize, outs[row] as usize);
                    if sells && in_ok[ti] {
                        f(KeyEvent {
                            row,
                            side: 0,
                            wallet_code: w,
                            wallet,
                            token: in_ids[ti],
                            sell: true,
                            fee: true,
                        });
                    }
                    if buys && out_ok[to] {
                        f(KeyEvent {
                            row,
                            side: 1,
                            wallet_code: w,
                            wallet,
                            token: out_ids[to],
                            sell: false,
                            fee: !sells,
                        });
                    }
                }
            }
        }
    }
}
