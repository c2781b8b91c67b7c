//! `Simulator`: the crate's simulator of the service, served on loopback by a runtime the
//! object owns, for tests and notebooks.

use std::sync::Mutex;

use dexlake::sim::{LiveConfig, Scale, SimConfig, Simulator};
use pyo3::prelude::*;

use crate::errors::IntoPy;

/// A running simulator (`dexlake.Simulator` wraps it).
#[pyclass(module = "dexlake._dexlake", frozen)]
pub struct NativeSimulator {
    base_url: String,
    catalog: String,
    /// The runtime serving it and the server, until `close`.
    running: Mutex<Option<(tokio::runtime::Runtime, Simulator)>>,
}

#[pymethods]
impl NativeSimulator {
    /// Generates the market of `seed` at `scale` and serves it on 127.0.0.1 (a free port);
    /// `fail_rate` and `throttle_rate` answer that share of requests 500 and 429. With `live`,
    /// the market keeps trading on a clock running `speed` simulated seconds a second, or, with
    /// `manual`, moving only by `advance`.
    #[new]
    #[pyo3(signature = (seed, scale, fail_rate, throttle_rate, rate_limit, live, speed, manual))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        seed: u64,
        scale: &str,
        fail_rate: f64,
        throttle_rate: f64,
        rate_limit: Option<f64>,
        live: bool,
        speed: f64,
        manual: bool,
    ) -> PyResult<Self> {
        let scale: Scale = scale.parse().py(py)?;
        let live = live.then(|| LiveConfig {
            speed,
            manual,
            ..LiveConfig::default()
        });
        if let Some(live) = &live {
            live.validate().py(py)?;
        }
        let (runtime, sim) = py
            .detach(|| -> dexlake::Result<_> {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("dexlake-sim")
                    .enable_all()
                    .build()
                    .map_err(|e| dexlake::Error::Config(format!("starting the simulator: {e}")))?;
                let sim = runtime.block_on(Simulator::start(SimConfig {
                    seed,
                    scale,
                    fail_rate,
                    throttle_rate,
                    rate_limit,
                    live,
                    ..SimConfig::default()
                }))?;
                Ok((runtime, sim))
            })
            .py(py)?;
        let catalog = serde_json::to_string(&sim.market().catalog())
            .map_err(|e| dexlake::Error::Config(format!("the catalog: {e}")))
            .py(py)?;
        Ok(NativeSimulator {
            base_url: sim.base_url().to_owned(),
            catalog,
            running: Mutex::new(Some((runtime, sim))),
        })
    }

    /// The address of the service, such as `http://127.0.0.1:41234`.
    #[getter]
    fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The market's tokens, pools and wallets, as JSON: at the clock for a live simulator
    /// (while it serves), at the fixed now otherwise.
    fn catalog_json(&self, py: Python<'_>) -> PyResult<String> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match running.as_ref() {
            Some((_, sim)) if sim.is_live() => serde_json::to_string(&sim.market_now().catalog())
                .map_err(|e| dexlake::Error::Config(format!("the catalog: {e}")))
                .py(py),
            _ => Ok(self.catalog.clone()),
        }
    }

    /// The simulated instant the service answers at, Unix microseconds (the fixed now when
    /// not live, or once closed).
    fn now_micros(&self) -> Option<i64> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        running
            .as_ref()
            .map(|(_, sim)| sim.now().timestamp_micros())
    }

    /// Moves a live simulator's clock `seconds` forward (a manual clock moves only so).
    fn advance(&self, py: Python<'_>, seconds: u64) -> PyResult<()> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match running.as_ref() {
            Some((_, sim)) => sim.advance(seconds).py(py),
            None => Err(dexlake::Error::InvalidArgument {
                argument: "simulator".into(),
                reason: "it is closed".into(),
            })
            .py(py),
        }
    }

    /// The key the simulator accepts for every operation (`demo-key`), sent as `x-api-key`.
    #[getter]
    fn api_key(&self) -> &'static str {
        dexlake::sim::DEMO_KEY
    }

    /// Whether it still serves.
    #[getter]
    fn running(&self) -> bool {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    /// Stops serving (requests in flight finish). Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        let running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some((runtime, sim)) = running {
            py.detach(move || {
                runtime.block_on(sim.shutdown());
                runtime.shutdown_background();
            });
        }
    }
}

impl Drop for NativeSimulator {
    fn drop(&mut self) {
        if let Some((runtime, sim)) = self
            .running
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            runtime.block_on(sim.shutdown());
            runtime.shutdown_background();
        }
    }
}
