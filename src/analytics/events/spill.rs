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
//! live in a temporary folder of their own, removed when the reader is done or fails.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use super::Events;
use super::row_groups::RowGroupEvents;
use crate::{Error, Result};

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
            tokens[part].push(t);
            part_of[t as usize] = part as u32;
        }
        Parts { part_of, tokens }
    }

    /// The number of parts.
    pub(super) fn len(&self) -> usize {
        self.tokens.len()
    }
}

/// The spill files being written, one per part.
pub(super) struct Spill {
    dir: tempfile::TempDir,
    writers: Vec<Mutex<BufWriter<File>>>,
}

fn path_of(dir: &tempfile::TempDir, part: usize) -> PathBuf {
    dir.path().join(format!("part-{part:05}.events"))
}

impl Spill {
    /// Creates a temporary folder and an empty file per part.
    pub(super) fn new(parts: &Parts) -> Result<Spill> {
        let dir = tempfile::Builder::new()
            .prefix("dexlake-events-")
            .tempdir()
            .map_err(|e| Error::io("creating a spill folder in", std::env::temp_dir(), e))?;
        let writers = (0..parts.len())
            .map(|p| {
                let path = path_of(&dir, p);
                File::create(&path)
                    .map(|f| Mutex::new(BufWriter::with_capacity(1 << 20, f)))
                    .map_err(|e| Error::io("creating", path, e))
            })
            .collect::<Result<_>>()?;
        Ok(Spill { dir, writers })
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
            let mut buf = Vec::with_capacity(4 + runs.len() * 20 + n * EVENT_BYTES);
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
            let mut w = self.writers[p as usize]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            w.write_all(&buf)
                .map_err(|e| Error::io("writing", path_of(&self.dir, p as usize), e))?;
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
        for (p, w) in self.writers.into_iter().enumerate() {
            w.into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .into_inner()
                .map_err(|e| Error::io("writing", path_of(&self.dir, p), e.into_error()))?;
        }
        Ok(SpillReader {
            dir: self.dir,
            parts,
            names,
            totals,
        })
    }
}

/// The spill files, written, to read back a part at a time.
pub(super) struct SpillReader {
    dir: tempfile::TempDir,
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

    /// Part `p`'s tokens (names and columns, in the part's order), read back from its file,
    /// which is then removed.
    pub(super) fn read_part(&self, p: usize) -> Result<Vec<(String, Events)>> {
        let (parts, names, totals) = (&self.parts, &self.names, &self.totals);
        let path = path_of(&self.dir, p);
        let io = |e| Error::io("reading", path.clone(), e);
        let tokens = &parts.tokens[p];
        let mut columns: Vec<Events> = tokens
            .iter()
            .map(|&t| Events::zeroed(totals[t as usize]))
            .collect();
        // Where each token of the part is in `columns`.
        let index =
            |t: u32| tokens.binary_search_by(|&u| names[u as usize].cmp(&names[t as usize]));
        let mut r = BufReader::with_capacity(1 << 20, File::open(&path).map_err(io)?);
        let mut word = [0u8; 4];
        let mut bytes = Vec::new();
        loop {
            match r.read_exact(&mut word) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(io(e)),
            }
            let n_runs = u32::from_le_bytes(word) as usize;
            bytes.resize(n_runs * 20, 0);
            r.read_exact(&mut bytes).map_err(io)?;
            let mut runs = Vec::with_capacity(n_runs);
            for h in bytes.chunks_exact(20) {
                let t = u32::from_le_bytes(array(&h[0..4]));
                let start = u64::from_le_bytes(array(&h[4..12])) as usize;
                let len = u64::from_le_bytes(array(&h[12..20])) as usize;
                let at = index(t).map_err(|_| {
                    io(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("a segment names token {t}, not of part {p}"),
                    ))
                })?;
                if start + len > columns[at].len() {
                    return Err(io(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "a run of token {t} ends past its {} events",
                            columns[at].len()
                        ),
                    )));
                }
                runs.push((at, start, len));
            }
            macro_rules! column {
                ($field:ident, $ty:ty) => {
                    for &(at, start, len) in &runs {
                        bytes.resize(len * 8, 0);
                        r.read_exact(&mut bytes).map_err(io)?;
                        let dest = &mut columns[at].$field[start..start + len];
                        for (d, b) in dest.iter_mut().zip(bytes.chunks_exact(8)) {
                            *d = <$ty>::from_le_bytes(array(b));
                        }
                    }
                };
            }
            column!(time, i64);
            column!(slot, i64);
            column!(id, i64);
            column!(price, f64);
            column!(base, f64);
            column!(usd, f64);
            for &(at, start, len) in &runs {
                bytes.resize(len, 0);
                r.read_exact(&mut bytes).map_err(io)?;
                for (d, &b) in columns[at].buy[start..start + len].iter_mut().zip(&bytes) {
                    *d = b != 0;
                }
            }
        }
        drop(r);
        // Freed as soon as it is read: a part's disk is given back before the next is read.
        let _ = std::fs::remove_file(&path);
        Ok(tokens
            .iter()
            .map(|&t| names[t as usize].clone())
            .zip(columns)
            .collect())
    }
}
