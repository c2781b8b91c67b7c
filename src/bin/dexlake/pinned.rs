//! `--as-of VERSION|TIME`, the flag of every reading command: the lake read as of a version.

use clap::Args;
use dexlake::lake::{AsOf, Lake};

use crate::Global;
use crate::output::existing_lake;

/// The `--as-of` flag of a reading command.
#[derive(Args, Debug, Clone, Default)]
pub struct AsOfArg {
    /// Read the lake as of a version (a number `dexlake log` shows) or a time (RFC 3339, such
    /// as 2026-11-20T08:00:00Z: the last version committed at or before it): exactly the files
    /// and the sync state committed then.
    #[arg(long, value_name = "VERSION|TIME", value_parser = as_of)]
    pub as_of: Option<AsOf>,
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
