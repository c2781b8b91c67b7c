//! `dexlake sync`.

use std::process::ExitCode;

use clap::Args;

use crate::Global;

/// Arguments of `dexlake sync`.
#[derive(Args, Debug)]
pub struct SyncArgs {}

pub fn run(_global: &Global, _args: SyncArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`dexlake sync` is not available yet")
}
