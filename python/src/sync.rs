//! `sync`: the jobs of `dexlake sync` run from Python.
//!
//! The run happens on its own thread with the GIL released. The calling (main) thread wakes
//! every 100 ms to run Python's signal handlers and to hand the progress to the Python layer's
//! callback, so Ctrl-C works as in the CLI: the run is cancelled, what was fetched is
//! committed, and `KeyboardInterrupt` is raised once the run has ended, carrying the per-job
//! report as its `report` attribute.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dexlake::api::client::{Client, ClientConfig};
use dexlake::api::retry::{MAX_CONCURRENCY, RateLimit};
use dexlake::error::error_chain;
use dexlake::sync::{
    CancelToken, Job, Plan, SyncConfig, SyncEvent, SyncObserver, SyncReport, Syncer,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{IntoPy, to_py_after};
use crate::lake::NativeLake;

/// How often the waiting thread runs signal handlers and reports progress.
const TICK: Duration = Duration::from_millis(100);

/// What the run has done so far, as the observer hears it.
#[derive(Default, Clone)]
struct Progress {
    jobs_total: usize,
    jobs_done: usize,
    /// Records received so far, per job.
    fetched: Vec<u64>,
    requests: Vec<u64>,
    rows_added: u64,
    commits: u64,
}

struct Observer(Mutex<Progress>);

impl SyncObserver for Observer {
    fn on_event(&self, event: SyncEvent) {
        let mut p = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match event {
            SyncEvent::Progress {
                index,
                rows_fetched,
                requests,
                ..
            } => {
                if let Some(f) = p.fetched.get_mut(index) {
                    *f = rows_fetched;
                }
                if let Some(r) = p.requests.get_mut(index) {
                    *r = requests;
                }
            }
            SyncEvent::JobFinished { .. } => p.jobs_done += 1,
            SyncEvent::Committed { rows_added, .. } => {
                p.rows_added += rows_added;
                p.commits += 1;
            }
            _ => {}
        }
    }
}

fn invalid(argument: &str, reason: impl Into<String>) -> dexlake::Error {
    dexlake::Error::InvalidArgument {
        argument: argument.into(),
        reason: reason.into(),
    }
}

/// Runs sync jobs into `lake`: `jobs` (a JSON list of job objects, as a plan file's `[[job]]`
/// tables) or the jobs of the TOML plan file `plan`. Calls `progress(dict)` about every
/// 100 ms and once at the end; returns the per-job report as JSON. A failed job raises its
/// error, and Ctrl-C `KeyboardInterrupt`, once the run has committed what it fetched; either
/// carries the report (JSON) as its `report` attribute. Without `compact`, the partitions the
/// run wrote are not compacted at its end.
#[pyfunction]
#[pyo3(signature = (lake, jobs, plan, base_url, api_key, progress, rps, concurrency, compact))]
#[allow(clippy::too_many_arguments)]
pub fn sync(
    py: Python<'_>,
    lake: &NativeLake,
    jobs: Option<String>,
    plan: Option<String>,
    base_url: String,
    api_key: Option<String>,
    progress: Option<Py<PyAny>>,
    rps: Option<f64>,
    concurrency: Option<usize>,
    compact: bool,
) -> PyResult<String> {
    let (jobs, plan_rps, plan_concurrency) = match (jobs, plan) {
        (Some(json), None) => {
            let jobs: Vec<Job> = serde_json::from_str(&json)
                .map_err(|e| invalid("jobs", format!("not a list of sync jobs: {e}")))
                .py(py)?;
            if jobs.is_empty() {
                return Err(invalid("jobs", "no job given")).py(py);
            }
            for job in &jobs {
                job.validate().py(py)?;
            }
            (jobs, None, None)
        }
        (None, Some(path)) => {
            let plan = Plan::from_file(std::path::Path::new(&path)).py(py)?;
            (plan.jobs, plan.rps, plan.concurrency)
        }
        _ => return Err(invalid("jobs", "give jobs or plan (not both)")).py(py),
    };
    let mut config = ClientConfig {
        base_url,
        api_key,
        ..ClientConfig::default()
    };
    if let Some(rps) = rps.or(plan_rps) {
        config.rate_limit = Some(RateLimit::per_second(rps).py(py)?);
    }
    if let Some(c) = concurrency.or(plan_concurrency) {
        if !(1..=MAX_CONCURRENCY).contains(&c) {
            return Err(invalid(
                "concurrency",
                format!("must be 1 to {MAX_CONCURRENCY}, got {c}"),
            ))
            .py(py);
        }
        config.max_concurrency = c;
    }
    let client = Client::new(config).py(py)?;
    let config = SyncConfig {
        compact,
        ..SyncConfig::default()
    };
    let syncer = Syncer::new(client, Arc::clone(&lake.lake), config);

    let observer = Arc::new(Observer(Mutex::new(Progress {
        jobs_total: jobs.len(),
        fetched: vec![0; jobs.len()],
        requests: vec![0; jobs.len()],
        ..Progress::default()
    })));
    let cancel = CancelToken::new();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<std::io::Result<SyncReport>>();
    {
        let observer = Arc::clone(&observer);
        let cancel = cancel.clone();
        std::thread::Builder::new()
            .name("dexlake-sync".into())
            .spawn(move || {
                let run = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .map(|runtime| {
                        let report =
                            runtime.block_on(syncer.run_with(&jobs, observer.as_ref(), &cancel));
                        runtime.shutdown_background();
                        report
                    });
                let _ = done_tx.send(run);
            })
            .map_err(|e| invalid("sync", format!("could not start the run: {e}")))
            .py(py)?;
    }

    // Waited on with the GIL released, so shared with that closure.
    let done_rx = Mutex::new(done_rx);
    let mut interrupt: Option<PyErr> = None;
    let report = loop {
        let next = py.detach(|| {
            done_rx
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .recv_timeout(TICK)
        });
        match next {
            Ok(run) => {
                break run
                    .map_err(|e| invalid("sync", format!("could not start the run: {e}")))
                    .py(py)?;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(invalid("sync", "the run ended without a report")).py(py);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        // Ctrl-C (or any signal handler raising) cancels the run; the fetched rows are
        // committed before the exception is raised. A second Ctrl-C changes nothing.
        if let Err(e) = py.check_signals()
            && interrupt.is_none()
        {
            cancel.cancel();
            interrupt = Some(e);
        }
        if let Some(callback) = &progress {
            let snapshot = observer
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            if let Err(e) = callback.call1(py, (progress_dict(py, &snapshot, false)?,))
                && interrupt.is_none()
            {
                // A failing callback stops the run as Ctrl-C does, and is raised.
                cancel.cancel();
                interrupt = Some(e);
            }
        }
    };
    let json = report_json(&report);
    if let Some(callback) = &progress {
        let snapshot = observer
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let _ = callback.call1(py, (progress_dict(py, &snapshot, true)?,));
    }
    if let Some(e) = interrupt {
        let _ = e.value(py).setattr("report", json);
        return Err(e);
    }
    // A failed job raises its error (the other jobs' rows are committed all the same).
    let failed: Vec<&dexlake::Error> = report
        .jobs
        .iter()
        .filter_map(|j| j.outcome.error())
        .collect();
    if let Some(first) = failed.first() {
        let e = to_py_after(
            py,
            &format!(
                "sync: {} of {} jobs failed (the others' rows are committed); the first: ",
                failed.len(),
                report.jobs.len()
            ),
            first,
        );
        let _ = e.value(py).setattr("report", json);
        return Err(e);
    }
    Ok(json)
}

/// The progress as the callback gets it.
fn progress_dict<'py>(
    py: Python<'py>,
    p: &Progress,
    finished: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("jobs_total", p.jobs_total)?;
    d.set_item("jobs_done", p.jobs_done)?;
    d.set_item("rows_fetched", p.fetched.iter().sum::<u64>())?;
    d.set_item("requests", p.requests.iter().sum::<u64>())?;
    d.set_item("rows_added", p.rows_added)?;
    d.set_item("commits", p.commits)?;
    d.set_item("finished", finished)?;
    Ok(d)
}

/// The per-job report, with the columns of `dexlake sync --jobs-report FILE.json`.
fn report_json(report: &SyncReport) -> String {
    let jobs: Vec<serde_json::Value> = report
        .jobs
        .iter()
        .enumerate()
        .map(|(index, j)| {
            serde_json::json!({
                "index": index,
                "job": j.job,
                "dataset": j.dataset.name(),
                "outcome": j.outcome.name(),
                "rows_added": j.rows_added,
                "rows_fetched": j.rows_fetched,
                "rows_refused": j.rows_refused,
                "requests": j.requests,
                "error": j.outcome.error().map(|e| error_chain(e)).unwrap_or_default(),
                "status": j.outcome.error().and_then(|e| e.api_status()).map(|s| s.code()),
            })
        })
        .collect();
    serde_json::Value::Array(jobs).to_string()
}
