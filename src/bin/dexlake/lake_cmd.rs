//! `dexlake schema`, `verify` and `compact`.

use std::process::ExitCode;

use clap::Args;

use crate::Global;

/// Arguments of `dexlake schema`.
#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// Dataset name; all datasets when omitted.
    pub dataset: Option<String>,
}

/// Arguments of `dexlake verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {}

/// Arguments of `dexlake compact`.
#[derive(Args, Debug)]
pub struct CompactArgs {}

pub fn schema(_global: &Global, _args: SchemaArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`dexlake schema` is not available yet")
}

pub fn verify(_global: &Global, _args: VerifyArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`dexlake verify` is not available yet")
}

pub fn compact(_global: &Global, _args: CompactArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`dexlake compact` is not available yet")
}
