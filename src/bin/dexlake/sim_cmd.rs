//! `dexlake sim`.

use std::process::ExitCode;

use clap::Args;

use crate::Global;

/// Arguments of `dexlake sim`.
#[derive(Args, Debug)]
pub struct SimArgs {}

pub fn run(_global: &Global, _args: SimArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`dexlake sim` is not available yet")
}
