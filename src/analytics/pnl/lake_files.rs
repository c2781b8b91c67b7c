//! The lake's swaps and trades files as the PnL reads them: what each dataset keeps where
//! ([`Source`]), the files' footers ([`DataFiles`]), their row groups read a window of files at a
//! time and in parallel ([`per_row_group`]), the query's filter, and a row group's numbers as the
//! ledger takes them ([`GroupNumbers`]).

use arrow_array::RecordBatch;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_buffer::ScalarBuffer;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use polars::prelude::PlHashSet;
use rayon::prelude::*;

use super::ledger::{LedgerEvent, TradeSide};
use super::options::PnlOptions;
use super::rows::{quantity_of, usd_value};
use crate::Result;
use crate::analytics::arrow_columns::numbers;
use crate::lake::cols::{event, swap, trade};
use crate::lake::read::{SharedFile, committed_files, may_hold_strings};
use crate::lake::{Dataset, FileEntry, Lake};

/// The order of an event: `(block_time, block_slot, id)`.
pub(super) type OrderKey = (i64, i64, i64);

/// Files open at once in each pass.
pub(super) const FILES_AT_ONCE: usize = 64;

/// No event on this side of a row (and no ledger for a pair).
pub(super) const NONE: u32 = u32::MAX;

/// The string columns read as dictionaries.
pub(super) const DICTIONARY_COLUMNS: [&str; 6] = [
    event::WALLET,
    trade::TOKEN,
    trade::DIRECTION,
    event::SWAP_TYPE,
    swap::TOKEN_IN,
    swap::TOKEN_OUT,
];

/// Where a dataset keeps what the reader needs.
pub(super) struct Source {
    pub(super) dataset: Dataset,
    /// The columns of the first pass.
    pub(super) keys: &'static [&'static str],
    /// The columns of the second pass.
    pub(super) numbers: &'static [&'static str],
    /// The token columns a token's bloom filter is looked up in.
    pub(super) token_columns: &'static [&'static str],
}

pub(super) const TRADES: Source = Source {
    dataset: Dataset::Trades,
    keys: &[event::WALLET, trade::TOKEN, trade::DIRECTION],
    numbers: &[
        trade::AMOUNT,
        trade::USD,
        trade::PRICE,
        event::BLOCK_TIME,
        event::BLOCK_SLOT,
        event::ID,
    ],
    token_columns: &[trade::TOKEN],
};

pub(super) const SWAPS: Source = Source {
    dataset: Dataset::Swaps,
    keys: &[
        event::WALLET,
        event::SWAP_TYPE,
        swap::TOKEN_IN,
        swap::TOKEN_OUT,
    ],
    numbers: &[
        swap::AMOUNT_IN,
        swap::AMOUNT_OUT,
        swap::PRICE_IN,
        swap::PRICE_OUT,
        swap::USD_IN,
        swap::USD_OUT,
        event::BLOCK_TIME,
        event::BLOCK_SLOT,
        event::ID,
    ],
    token_columns: &[swap::TOKEN_IN, swap::TOKEN_OUT],
};

/// The committed files of a dataset (sorted by path) and their footers.
pub(super) struct DataFiles {
    pub(super) paths: Vec<String>,
    pub(super) entries: Vec<FileEntry>,
    pub(super) footers: Vec<ArrowReaderMetadata>,
}

impl DataFiles {
    /// The files of `dataset` with their footers (read a window of files at a time).
    pub(super) fn of(lake: &Lake, dataset: Dataset) -> Result<DataFiles> {
        let files = committed_files(&lake.manifest()?, dataset, None, None);
        let (paths, entries): (Vec<String>, Vec<FileEntry>) = files.into_iter().unzip();
        let mut footers = Vec::with_capacity(paths.len());
        for window in windows(paths.len()) {
            let part: Vec<ArrowReaderMetadata> = window
                .into_par_iter()
                .map(|k| {
                    SharedFile::open(lake.base(), &paths[k], &entries[k])?
                        .footer_with_dictionaries(&DICTIONARY_COLUMNS)
                })
                .collect::<Result<_>>()?;
            footers.extend(part);
        }
        Ok(DataFiles {
            paths,
            entries,
            footers,
        })
    }

    pub(super) fn open(&self, lake: &Lake, k: usize) -> Result<SharedFile> {
        SharedFile::open(lake.base(), &self.paths[k], &self.entries[k])
    }

    /// Every row group, as (file, row group), in file order.
    pub(super) fn row_groups(&self) -> Vec<(usize, usize)> {
        self.footers
            .iter()
            .enumerate()
            .flat_map(|(k, f)| (0..f.metadata().num_row_groups()).map(move |g| (k, g)))
            .collect()
    }
}

/// The files `0..n` a window of [`FILES_AT_ONCE`] at a time.
pub(super) fn windows(n: usize) -> Vec<std::ops::Range<usize>> {
    (0..n)
        .step_by(FILES_AT_ONCE)
        .map(|w| w..(w + FILES_AT_ONCE).min(n))
        .collect()
}

/// Runs `f` on each row group of `groups` (sorted by file) with its file open, a window of
/// files at a time, row groups in parallel; the results come in the order of `groups`.
pub(super) fn per_row_group<T: Send>(
    lake: &Lake,
    files: &DataFiles,
    groups: &[(usize, usize)],
    f: impl Fn(&SharedFile, usize, usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(groups.len());
    let mut at = 0;
    while at < groups.len() {
        let first = groups[at].0;
        let end = groups[at..].partition_point(|&(k, _)| k < first + FILES_AT_ONCE) + at;
        let window = &groups[at..end];
        let mut needed: Vec<usize> = window.iter().map(|&(k, _)| k).collect();
        needed.dedup();
        let opened: Vec<(usize, SharedFile)> = needed
            .into_par_iter()
            .map(|k| Ok((k, files.open(lake, k)?)))
            .collect::<Result<_>>()?;
        let part: Vec<T> = window
            .par_iter()
            .map(|&(k, g)| {
                let i = opened.partition_point(|(j, _)| *j < k);
                // A damaged row group's error names its file.
                f(&opened[i].1, k, g).map_err(|e| e.in_file(lake.root(), &files.paths[k]))
            })
            .collect::<Result<_>>()?;
        out.extend(part);
        at = end;
    }
    Ok(out)
}

/// What the reader keeps: the query's token and wallets.
pub(super) struct Filter<'a> {
    pub(super) token: Option<&'a str>,
    pub(super) wallets: Option<PlHashSet<&'a str>>,
}

impl<'a> Filter<'a> {
    /// The token and wallets `options` selects.
    pub(super) fn of(options: &'a PnlOptions) -> Filter<'a> {
        Filter {
            token: options.token.as_deref(),
            wallets: options
                .wallets
                .as_ref()
                .map(|w| w.iter().map(String::as_str).collect()),
        }
    }

    pub(super) fn token_ok(&self, token: &str) -> bool {
        self.token.is_none_or(|t| t == token)
    }

    pub(super) fn wallet_ok(&self, wallet: &str) -> bool {
        self.wallets.as_ref().is_none_or(|w| w.contains(wallet))
    }

    /// Whether a row group can hold rows of the named wallets, by its statistics and its bloom
    /// filter on `wallet_address` (always, without wallets named or without either).
    pub(super) fn may_hold_wallets(
        &self,
        file: &SharedFile,
        footer: &ArrowReaderMetadata,
        group: usize,
    ) -> Result<bool> {
        let Some(wallets) = &self.wallets else {
            return Ok(true);
        };
        may_hold_strings(file, footer, group, event::WALLET, wallets.iter().copied())
    }
}

/// Whether a swap of this type sells its `in` side and buys its `out` side (the PnL's rules:
/// `quote_token` buys, `token_quote` sells, `token_token` does both).
pub(super) fn swap_sides(swap_type: &str) -> (bool, bool) {
    match swap_type {
        "quote_token" => (false, true),
        "token_quote" => (true, false),
        "token_token" => (true, true),
        _ => (false, false),
    }
}

/// The numbers of one row group, as the ledger takes them.
pub(super) struct GroupNumbers {
    pub(super) time: ScalarBuffer<i64>,
    pub(super) slot: ScalarBuffer<i64>,
    pub(super) id: ScalarBuffer<i64>,
    /// Amount, USD value and price of the first side (a trade's, a swap's `in`) and of a swap's
    /// `out` side.
    pub(super) amount: [ScalarBuffer<f64>; 2],
    pub(super) usd: [ScalarBuffer<f64>; 2],
    pub(super) price: [ScalarBuffer<f64>; 2],
}

impl GroupNumbers {
    pub(super) fn read(batch: &RecordBatch, path: &str, swaps: bool) -> Result<GroupNumbers> {
        // The decoded buffers themselves (shared, not copied).
        let int = |name: &str| -> Result<ScalarBuffer<i64>> {
            Ok(numbers::<Int64Type>(batch, name, path, 0)?.values().clone())
        };
        let float = |name: &str| -> Result<ScalarBuffer<f64>> {
            Ok(numbers::<Float64Type>(batch, name, path, f64::NAN)?
                .values()
                .clone())
        };
        let pair = |a: &str, b: &str| -> Result<[ScalarBuffer<f64>; 2]> {
            Ok(if swaps {
                [float(a)?, float(b)?]
            } else {
                [float(a)?, ScalarBuffer::from(Vec::new())]
            })
        };
        let (amount, usd, price) = if swaps {
            (
                pair(swap::AMOUNT_IN, swap::AMOUNT_OUT)?,
                pair(swap::USD_IN, swap::USD_OUT)?,
                pair(swap::PRICE_IN, swap::PRICE_OUT)?,
            )
        } else {
            (
                pair(trade::AMOUNT, "")?,
                pair(trade::USD, "")?,
                pair(trade::PRICE, "")?,
            )
        };
        Ok(GroupNumbers {
            time: int(event::BLOCK_TIME)?,
            slot: int(event::BLOCK_SLOT)?,
            id: int(event::ID)?,
            amount,
            usd,
            price,
        })
    }

    pub(super) fn key(&self, i: usize) -> OrderKey {
        (self.time[i], self.slot[i], self.id[i])
    }

    /// Row `i`'s event on `side` (0: the first side, 1: a swap's bought side); `fee` is the
    /// swap's fee booked on it.
    pub(super) fn event(&self, i: usize, side: usize, sell: bool, fee: f64) -> LedgerEvent {
        let amount = self.amount[side][i];
        LedgerEvent {
            time: self.time[i],
            slot: self.slot[i],
            id: self.id[i],
            side: if sell {
                TradeSide::Sell
            } else {
                TradeSide::Buy
            },
            quantity: quantity_of(amount),
            usd: usd_value(self.usd[side][i], self.price[side][i], amount),
            fee,
        }
    }

    /// A swap's fee: what its input was worth above its output, when positive and finite.
    pub(super) fn swap_fee(&self, i: usize) -> f64 {
        let fee = (self.usd[0][i] - self.usd[1][i]).max(0.0);
        if fee.is_finite() { fee } else { 0.0 }
    }
}
