//! The spill files of the events reader in parts (`row_groups::read_in_parts`): the tokens are
//! dealt into parts of a bounded number of events, each row group's events of a part are
//! appended to that part's file as one segment, and a part is then read back into its tokens'
//! columns at the places the first pass gave them, so that the result is the events a whole
//! read gives, to the order.
//!
//! A segment, all little-endian: the number of runs `r` (u32); per run its token's number in
//! the reader's registry (u32), where the run starts in the token's columns (u64) and its
//! length (u64); then the runs' events column by column (time, slot and id as i64; price, base
//! and usd as f64; buy as one byte), each column holding the runs one after another. The files
//! themselves are `analytics::spill_files`'; a part's segments are read back in parallel, each
//! run at its place, so their order does not matter.

use std::sync::{Mutex, PoisonError};

use rayon::prelude::*;

use super::Events;
use super::row_groups::RowGroupEvents;
use crate::Result;
use crate::analytics::spill_files::{SpillFiles, SpilledParts};

/// Bytes an event takes in a spill file.
const EVENT_BYTES: usize = 6 * 8 + 1;

/// The bytes of `b` (of exactly `N` bytes, as every caller slices them) as an array.
fn array<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(b);
    a
}

/// The tokens dealt into parts, in address order.
pub(super) struct Parts {
    /// Part of each token, by registry number.
    part_of: Vec<u32>,
    /// Place of each token among its part's tokens, by registry number.
    place_in_part: Vec<u32>,
    /// Each part's tokens.
    tokens: Vec<Vec<u32>>,
}

impl Parts {
    /// Tokens (their `names` and event `totals`, by registry number) taken in address order
    /// into parts of at most `events_at_once` events; a token with more is a part alone, and
    /// tokens without events belong to no part.
    pub(super) fn of(names: &[String], totals: &[usize], events_at_once: usize) -> Parts {
        let mut order: Vec<u32> = (0..names.len() as u32)
            .filter(|&t| totals[t as usize] > 0)
            .collect();
        order.sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
        let mut part_of = vec![u32::MAX; names.len()];
        let mut place_in_part = vec![u32::MAX; names.len()];
        let mut tokens: Vec<Vec<u32>> = Vec::new();
        let mut held = 0usize;
        for t in order {
            let n = totals[t as usize];
            if tokens.is_empty() || (held > 0 && held + n > events_at_once.max(1)) {
                tokens.push(Vec::new());
                held = 0;
            }
            held += n;
            let part = tokens.len() - 1;
            place_in_part[t as usize] = tokens[part].len() as u32;
            tokens[part].push(t);
            part_of[t as usize] = part as u32;
        }
        Parts {
            part_of,
            place_in_part,
            tokens,
        }
    }

    /// The number of parts.
    pub(super) fn len(&self) -> usize {
        self.tokens.len()
    }
}

/// The spill files being written, one per part.
pub(super) struct Spill {
    files: SpillFiles,
}

impl Spill {
    /// An empty unnamed spill file per part.
    pub(super) fn new(parts: &Parts) -> Result<Spill> {
        Ok(Spill {
            files: SpillFiles::new(parts.len())?,
        })
    }

    /// Appends a row group's events to the files of their parts: one segment per part.
    pub(super) fn write(&self, parts: &Parts, rg: RowGroupEvents<'_>) -> Result<()> {
        let mut by_part: Vec<(u32, Vec<usize>)> = Vec::new();
        for (l, &t) in rg.sides.tokens.iter().enumerate() {
            let p = parts.part_of[t as usize];
            match by_part.iter_mut().find(|(q, _)| *q == p) {
                Some((_, runs)) => runs.push(l),
                None => by_part.push((p, vec![l])),
            }
        }
        for (p, runs) in by_part {
            let n: usize = runs.iter().map(|&l| rg.sides.counts[l]).sum();
            let mut buf = Vec::with_capacity(4 + runs.len() * RUN_BYTES + n * EVENT_BYTES);
            buf.extend_from_slice(&(runs.len() as u32).to_le_bytes());
            for &l in &runs {
                buf.extend_from_slice(&rg.sides.tokens[l].to_le_bytes());
                buf.extend_from_slice(&(rg.sides.starts[l] as u64).to_le_bytes());
                buf.extend_from_slice(&(rg.sides.counts[l] as u64).to_le_bytes());
            }
            let spans = || {
                runs.iter()
                    .map(|&l| rg.first[l]..rg.first[l] + rg.sides.counts[l])
            };
            let e = rg.events;
            for column in [&e.time, &e.slot, &e.id] {
                for span in spans() {
                    column[span]
                        .iter()
                        .for_each(|v| buf.extend_from_slice(&v.to_le_bytes()));
                }
            }
            for column in [&e.price, &e.base, &e.usd] {
                for span in spans() {
                    column[span]
                        .iter()
                        .for_each(|v| buf.extend_from_slice(&v.to_le_bytes()));
                }
            }
            for span in spans() {
                buf.extend(e.buy[span].iter().map(|&b| u8::from(b)));
            }
            // The runs say where their events go, so the segments' order does not matter.
            self.files.append(p as usize, 0, &buf)?;
        }
        Ok(())
    }

    /// Flushes and closes every file, for reading back the `parts` of the tokens of `names`
    /// with `totals` events each.
    pub(super) fn finish(
        self,
        parts: Parts,
        names: Vec<String>,
        totals: Vec<usize>,
    ) -> Result<SpillReader> {
        Ok(SpillReader {
            files: self.files.finish()?,
            parts,
            names,
            totals,
        })
    }
}

/// Bytes of a run's header in a segment.
const RUN_BYTES: usize = 4 + 8 + 8;

/// The spill files, written, to read back a part at a time.
pub(super) struct SpillReader {
    files: SpilledParts,
    parts: Parts,
    /// Token names, by registry number.
    names: Vec<String>,
    /// Events per token, by registry number.
    totals: Vec<usize>,
}

impl SpillReader {
    /// The number of parts.
    pub(super) fn len(&self) -> usize {
        self.parts.len()
    }

    /// Part `p`'s tokens (names and columns, in the part's order), read back from its file
    /// (its segments in parallel, each token's runs at their places), which is then removed.
    pub(super) fn read_part(&self, p: usize) -> Result<Vec<(String, Events)>> {
        let (names, totals) = (&self.names, &self.totals);
        let tokens = &self.parts.tokens[p];
        let columns: Vec<Mutex<Events>> = tokens
            .par_iter()
            .map(|&t| Mutex::new(Events::zeroed(totals[t as usize])))
            .collect();
        // Where each token of the part is in `columns` (by number: a run names its token by
        // its registry number, and a part holds thousands of tokens).
        let index = |t: u32| -> std::result::Result<usize, ()> {
            let (part, place) = (
                self.parts.part_of.get(t as usize),
                self.parts.place_in_part.get(t as usize),
            );
            match (part, place) {
                (Some(&q), Some(&at)) if q as usize == p => Ok(at as usize),
                _ => Err(()),
            }
        };
        let file = self.files.open(p)?;
        let damaged = |what: String| file.damaged(what);
        self.files.segments(p).par_iter().try_for_each_init(
            Vec::new,
            |buf, segment| -> Result<()> {
                let (offset, len) = (segment.offset, segment.len);
                let buf = file.read_reusing(segment, buf)?;
                let n_runs = u32::from_le_bytes(array(
                    buf.get(0..4)
                        .ok_or_else(|| damaged(format!("a segment of {len} bytes at {offset}")))?,
                )) as usize;
                let header = buf
                    .get(4..4 + n_runs * RUN_BYTES)
                    .ok_or_else(|| damaged(format!("a segment of {n_runs} runs in {len} bytes")))?;
                let mut runs = Vec::with_capacity(n_runs);
                let mut total = 0usize;
                for h in header.chunks_exact(RUN_BYTES) {
                    let t = u32::from_le_bytes(array(&h[0..4]));
                    let start = u64::from_le_bytes(array(&h[4..12])) as usize;
                    let n = u64::from_le_bytes(array(&h[12..20])) as usize;
                    let at =
                        index(t).map_err(|_| damaged(format!("token {t} is not of part {p}")))?;
                    runs.push((at, start, n, total));
                    total += n;
                }
                let body = &buf[4 + n_runs * RUN_BYTES..];
                if body.len() != total * EVENT_BYTES {
                    return Err(damaged(format!(
                        "{} bytes of events, not {}",
                        body.len(),
                        total * EVENT_BYTES
                    )));
                }
                let words = |c: usize, from: usize, n: usize| {
                    body[(c * total + from) * 8..(c * total + from + n) * 8].chunks_exact(8)
                };
                for &(at, start, n, from) in &runs {
                    let mut dest = columns[at].lock().unwrap_or_else(PoisonError::into_inner);
                    if start + n > dest.len() {
                        return Err(damaged(format!(
                            "a run of token {at} of part {p} ends past its {} events",
                            dest.len()
                        )));
                    }
                    let e = &mut *dest;
                    let ints = [&mut e.time, &mut e.slot, &mut e.id];
                    for (c, column) in ints.into_iter().enumerate() {
                        for (d, b) in column[start..start + n].iter_mut().zip(words(c, from, n)) {
                            *d = i64::from_le_bytes(array(b));
                        }
                    }
                    let floats = [&mut e.price, &mut e.base, &mut e.usd];
                    for (c, column) in floats.into_iter().enumerate() {
                        let c = c + 3;
                        for (d, b) in column[start..start + n].iter_mut().zip(words(c, from, n)) {
                            *d = f64::from_le_bytes(array(b));
                        }
                    }
                    let buys = &body[6 * total * 8 + from..6 * total * 8 + from + n];
                    for (d, &b) in e.buy[start..start + n].iter_mut().zip(buys) {
                        *d = b != 0;
                    }
                }
                Ok(())
            },
        )?;
        drop(file);
        self.files.remove(p);
        Ok(tokens
            .iter()
            .map(|&t| names[t as usize].clone())
            .zip(
                columns
                    .into_iter()
                    .map(|c| c.into_inner().unwrap_or_else(PoisonError::into_inner)),
            )
            .collect())
    }
}
