//! Opening the lake of a command that reads it: never created, never locked
//! ([`existing_lake`]), pinned to `--as-of VERSION|TIME` when given ([`reading_lake`]); and the
//! transfer statistics of the benchmarks.

use anyhow::Context;
use clap::Args;
use dexlake::lake::{AsOf, Lake};

use crate::Global;

/// The `--as-of` flag of a reading command.
#[derive(Args, Debug, Clone, Default)]
pub struct AsOfArg {
    /// Read the lake as of a version (a number `dexlake log` shows) or a time (RFC 3339, such
    /// as 2026-11-20T08:00:00Z: the last version committed at or before it): exactly the files
    /// and the sync state committed then.
    #[arg(long, value_name = "VERSION|TIME", value_parser = as_of)]
    pub as_of: Option<AsOf>,
}

/// The `--events-at-once` flag of a command that reads the events of every token.
#[derive(Args, Debug, Clone, Default)]
pub struct EventsAtOnceArg {
    /// Most events held in memory at once (about 49 bytes each): a lake with more is read in
    /// parts of whole tokens, the files once, through temporary spill files in the system's
    /// temporary folder, with the same answer [default: 16777216].
    #[arg(long, value_name = "N")]
    pub events_at_once: Option<usize>,
}

impl EventsAtOnceArg {
    /// `query` with the flag's bound, if given.
    pub fn apply<'a>(&self, query: dexlake::query::Query<'a>) -> dexlake::query::Query<'a> {
        match self.events_at_once {
            Some(n) => query.events_at_once(n),
            None => query,
        }
    }
}

/// Parses `--as-of`; clap's error names the flag.
fn as_of(text: &str) -> Result<AsOf, String> {
    text.parse::<AsOf>().map_err(|e| match e {
        dexlake::Error::InvalidArgument { reason, .. } => reason,
        e => e.to_string(),
    })
}

/// Opens the lake of `--lake` for reading (as [`existing_lake`] does), pinned to `--as-of`
/// when it is given.
pub fn reading_lake(global: &Global, pin: &AsOfArg) -> anyhow::Result<Lake> {
    let lake = existing_lake(global)?;
    Ok(match pin.as_of {
        Some(as_of) => lake.at(as_of)?,
        None => lake,
    })
}

/// Opens the lake of `--lake` for reading: creates nothing and takes no lock, so a read-only
/// lake reads, and refuses a folder that is not a lake (reading commands never create one).
pub fn existing_lake(global: &Global) -> anyhow::Result<Lake> {
    ensure_lake(global)?;
    let lake = Lake::open_existing(&global.lake)
        .with_context(|| format!("opening the lake {}", global.lake.display()))?;
    // Its clones share its store, and so what the store counts.
    let _ = OPENED.set(lake.clone());
    Ok(lake)
}

/// The lake a reading command opened, for [`print_transfer_stats`].
static OPENED: std::sync::OnceLock<Lake> = std::sync::OnceLock::new();

/// Set (to anything) to print what the command fetched from the lake's object store on
/// standard error when it ends: for the benchmarks, not documented.
pub const TRANSFER_STATS_ENV: &str = "DEXLAKE_TRANSFER_STATS";

/// Prints what the lake a reading command opened fetched from its object store (GET requests
/// and bytes), when [`TRANSFER_STATS_ENV`] is set.
pub fn print_transfer_stats() {
    if std::env::var_os(TRANSFER_STATS_ENV).is_none() {
        return;
    }
    let stats = OPENED.get().map(Lake::transfer_stats).unwrap_or_default();
    eprintln!(
        "transfer: {} GET requests, {} bytes",
        stats.get_requests, stats.get_bytes
    );
}

/// Refuses a `--lake` that is not a lake, for the commands that never create one.
pub fn ensure_lake(global: &Global) -> anyhow::Result<()> {
    if !Lake::exists(&global.lake)? {
        crate::exit::usage_bail!(
            "not a dexlake lake: {}; run `dexlake sync` to create one, or set --lake or DEXLAKE_LAKE to a lake",
            global.lake.display()
        );
    }
    Ok(())
}
