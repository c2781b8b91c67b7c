//! `dexlake._dexlake`: the native module of the `dexlake` Python package.
//!
//! Every answer is computed by the `dexlake` crate; this crate only converts arguments and
//! answers. The public Python API (`dexlake/__init__.py`) wraps these classes and functions:
//! it turns the [`frames::FrameStream`]s into polars frames, dates into microseconds, and
//! coverage notes into warnings.
//!
//! | file | what |
//! |---|---|
//! | `frames.rs` | polars frames handed to Python as Arrow C streams (no copy) |
//! | `errors.rs` | the crate's errors as `dexlake.errors` exceptions |
//! | `lake.rs` | `Lake`: scans, bars, price stats, PnL, metrics, search, verify, compact, status |
//! | `kernels.rs` | `dexlake.kernels`: bars, PnL, latest prices and token metrics over Arrow rows held in memory (Spark groups), the rows' selection and time parts on their way to the groups, and the bars' plan of a lake |
//! | `sync.rs` | `sync`: the CLI's jobs, with progress and Ctrl-C |
//! | `simulator.rs` | `Simulator`: the service simulator on loopback |
//!
//! Long work runs with the GIL released (`Python::detach`). May import the `dexlake` crate,
//! pyo3, polars and tokio.

use pyo3::prelude::*;

mod errors;
mod frames;
mod kernels;
mod lake;
mod simulator;
mod sync;

/// The native module.
#[pymodule]
fn _dexlake(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<frames::FrameStream>()?;
    m.add_class::<lake::NativeLake>()?;
    m.add_class::<simulator::NativeSimulator>()?;
    m.add_function(wrap_pyfunction!(sync::sync, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::bars, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::latest_event, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::bar_rows, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::bars_options, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::pnl, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::latest_prices, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::token_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::bars_plan, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
