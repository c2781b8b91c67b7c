//! Where a chain's swap records live: kept in memory, or regenerated on demand with a cache
//! (the large scale), and the view of a token's stream as far as the clock has reached.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use super::market::SwapRecord;
use super::walk::StreamSource;

/// Where the swap records of a chain live.
pub(crate) enum SwapStreams {
    /// Every token's stream, generated once and kept (in a live market, the history followed
    /// by the swaps up to the end of the generated days).
    Memory(Vec<Arc<[SwapRecord]>>),
    /// Streams regenerated from the seed on demand, with a cache bounded in records.
    Lazy {
        /// Regenerates one token's stream.
        source: Box<StreamSource>,
        /// Recently used streams.
        cache: Mutex<StreamCache>,
    },
}

/// Recently used token streams, evicted least recently used first once they hold more than
/// `budget` records.
pub(crate) struct StreamCache {
    streams: HashMap<u32, (Arc<[SwapRecord]>, u64)>,
    records: usize,
    budget: usize,
    tick: u64,
}

impl StreamCache {
    pub(crate) fn new(budget: usize) -> Self {
        StreamCache {
            streams: HashMap::new(),
            records: 0,
            budget,
            tick: 0,
        }
    }

    pub(crate) fn get(&mut self, token: u32) -> Option<Arc<[SwapRecord]>> {
        self.tick += 1;
        let tick = self.tick;
        self.streams.get_mut(&token).map(|(s, used)| {
            *used = tick;
            s.clone()
        })
    }

    pub(crate) fn insert(&mut self, token: u32, stream: Arc<[SwapRecord]>) {
        self.tick += 1;
        if let Some((old, _)) = self.streams.insert(token, (stream.clone(), self.tick)) {
            self.records -= old.len();
        }
        self.records += stream.len();
        while self.records > self.budget && self.streams.len() > 1 {
            let oldest = self
                .streams
                .iter()
                .filter(|(t, _)| **t != token)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(t, _)| *t);
            match oldest {
                Some(t) => {
                    if let Some((s, _)) = self.streams.remove(&t) {
                        self.records -= s.len();
                    }
                }
                None => break,
            }
        }
    }
}

/// A token's swaps in event order, as far as the market's clock has reached: a view of the
/// token's stream, which it shares with the chain.
#[derive(Debug, Clone)]
pub struct StreamView {
    records: Arc<[SwapRecord]>,
    len: usize,
}

impl StreamView {
    /// The first `len` records of `records` (all of them when `len` is larger).
    pub(crate) fn new(records: Arc<[SwapRecord]>, len: usize) -> Self {
        let len = len.min(records.len());
        StreamView { records, len }
    }
}

impl Deref for StreamView {
    type Target = [SwapRecord];

    fn deref(&self) -> &[SwapRecord] {
        &self.records[..self.len]
    }
}
