//! Progress of a sync on stderr: bars on a terminal, plain lines otherwise.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::events::{SyncEvent, SyncObserver};
use super::report::{Compaction, JobOutcome};

/// A [`SyncObserver`] that shows progress on stderr: on a terminal, one bar per running job and
/// one overall (jobs done, requests made, commits); otherwise a line per job started and
/// finished, one every ten requests of a job and one per commit. The compaction at the end of
/// a run gets a line either way.
pub struct ProgressBars {
    jobs: usize,
    state: Mutex<ObserverState>,
    multi: Option<MultiProgress>,
}

#[derive(Default)]
struct ObserverState {
    bars: Vec<Option<ProgressBar>>,
    overall: Option<ProgressBar>,
    /// Requests per job so far.
    requests: Vec<u64>,
    /// The description of each job started.
    names: Vec<String>,
    finished: usize,
    commits: u64,
}

/// Plans of more jobs than this clear each job's bar when it ends, so the terminal keeps only
/// the running ones.
const KEEP_FINISHED_BARS_UP_TO: usize = 20;

/// One line about the compaction at the end of a run.
fn compaction_line(c: &Compaction) -> String {
    match &c.result {
        Ok(r) => format!(
            "compacted {} of the {} partitions written: {} files into {} ({:.1?})",
            r.partitions, c.partitions, r.files_removed, r.files_added, c.elapsed
        ),
        Err(e) => format!("compaction failed (the synced rows are committed): {e}"),
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key(
            "rate",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0}/s", state.per_sec());
            },
        )
}

impl ProgressBars {
    /// Progress of a run of `jobs` jobs.
    pub fn new(jobs: usize) -> Self {
        let multi = std::io::stderr().is_terminal().then(MultiProgress::new);
        let mut state = ObserverState {
            bars: vec![None; jobs],
            requests: vec![0; jobs],
            names: vec![String::new(); jobs],
            ..ObserverState::default()
        };
        if let Some(multi) = &multi {
            let overall = multi.add(ProgressBar::new(jobs as u64));
            overall.set_style(style(
                "{elapsed_precise} [{bar:30}] {pos}/{len} jobs  {msg}",
            ));
            overall.enable_steady_tick(Duration::from_millis(200));
            state.overall = Some(overall);
        }
        ProgressBars {
            jobs,
            state: Mutex::new(state),
            multi,
        }
    }

    /// Clears every bar (call it before printing a summary).
    pub fn finish(&self) {
        let st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for bar in st.bars.iter().flatten().chain(&st.overall) {
            bar.finish_and_clear();
        }
        if let Some(multi) = &self.multi {
            let _ = multi.clear();
        }
    }
}

impl SyncObserver for ProgressBars {
    fn on_event(&self, event: SyncEvent) {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let SyncEvent::Progress {
            index, requests, ..
        } = &event
            && let Some(r) = st.requests.get_mut(*index)
        {
            *r = *requests;
        }
        if let SyncEvent::JobStarted { index, job, .. } = &event
            && let Some(name) = st.names.get_mut(*index)
        {
            name.clone_from(job);
        }
        let warning = |index: usize, message: &str| match st.names.get(index) {
            Some(job) if !job.is_empty() => format!("warning: {job}: {message}"),
            _ => format!("warning: job {index}: {message}"),
        };
        let all_requests: u64 = st.requests.iter().sum();
        let Some(multi) = &self.multi else {
            match event {
                SyncEvent::JobStarted {
                    job,
                    expected_requests,
                    ..
                } => match expected_requests {
                    Some(n) => eprintln!("start: {job} (about {n} requests)"),
                    None => eprintln!("start: {job}"),
                },
                SyncEvent::Progress {
                    index,
                    rows_fetched,
                    requests,
                    total,
                } => {
                    if requests % 10 == 1 {
                        let of = total.map(|t| format!(" of {t}")).unwrap_or_default();
                        eprintln!("job {index}: {rows_fetched}{of} records, {requests} requests");
                    }
                }
                SyncEvent::Restarted { index, reason } => {
                    eprintln!("job {index} starts again: {reason}");
                }
                SyncEvent::Warning { index, message } => eprintln!("{}", warning(index, &message)),
                SyncEvent::JobFinished { report, .. } => {
                    st.finished += 1;
                    if report.outcome == JobOutcome::NotStarted {
                        return;
                    }
                    // Only a job that fetched everything is done; an interrupted or failed one
                    // says so.
                    eprintln!(
                        "{} {}/{}: {} ({} rows added, {} fetched, {} requests; {all_requests} requests in all)",
                        report.outcome.name(),
                        st.finished,
                        self.jobs,
                        report.job,
                        report.rows_added,
                        report.rows_fetched,
                        report.requests
                    );
                }
                SyncEvent::Committed {
                    rows_added,
                    files_added,
                    elapsed,
                } => {
                    eprintln!(
                        "commit: {rows_added} rows added in {files_added} files ({elapsed:.1?})"
                    );
                }
                SyncEvent::Compacting { partitions } => {
                    eprintln!("compacting the {partitions} partitions written");
                }
                SyncEvent::Compacted(c) => eprintln!("{}", compaction_line(&c)),
            }
            return;
        };
        if let Some(overall) = &st.overall {
            overall.set_message(format!("{all_requests} requests"));
        }
        match event {
            SyncEvent::JobStarted { index, job, .. } => {
                let bar = multi.add(ProgressBar::no_length());
                bar.set_style(style(
                    "{spinner} {msg:40!} {pos:>9}/{len:9} records  {prefix:>9}  {rate:>9}  eta {eta}",
                ));
                bar.set_message(job);
                bar.set_prefix("0 req");
                bar.enable_steady_tick(Duration::from_millis(200));
                if let Some(slot) = st.bars.get_mut(index) {
                    *slot = Some(bar);
                }
            }
            SyncEvent::Progress {
                index,
                rows_fetched,
                requests,
                total,
            } => {
                if let Some(Some(bar)) = st.bars.get(index) {
                    if let Some(t) = total {
                        bar.set_length(t);
                    }
                    bar.set_position(rows_fetched);
                    bar.set_prefix(format!("{requests} req"));
                }
            }
            SyncEvent::Restarted { index, reason } => {
                let job = st.bars.get(index).and_then(Option::as_ref);
                match job {
                    Some(bar) => bar.println(format!("starts again: {reason}")),
                    None => multi.suspend(|| eprintln!("job {index} starts again: {reason}")),
                }
            }
            SyncEvent::Warning { index, message } => {
                let line = warning(index, &message);
                match st.bars.get(index).and_then(Option::as_ref) {
                    Some(bar) => bar.println(line),
                    None => multi.suspend(|| eprintln!("{line}")),
                }
            }
            SyncEvent::JobFinished { index, report } => {
                if let Some(Some(bar)) = st.bars.get(index) {
                    if self.jobs > KEEP_FINISHED_BARS_UP_TO {
                        bar.finish_and_clear();
                    } else {
                        let how = match report.outcome {
                            JobOutcome::Done => String::new(),
                            ref other => format!(" {}", other.name()),
                        };
                        bar.finish_with_message(format!(
                            "{} +{} rows ({} req){how}",
                            report.job, report.rows_added, report.requests
                        ));
                    }
                }
                if let Some(overall) = &st.overall {
                    overall.inc(1);
                }
            }
            SyncEvent::Committed { .. } => {
                st.commits += 1;
                if let Some(overall) = &st.overall {
                    overall.set_message(format!("{all_requests} requests, {} commits", st.commits));
                }
            }
            SyncEvent::Compacting { partitions } => {
                multi.suspend(|| eprintln!("compacting the {partitions} partitions written"));
            }
            SyncEvent::Compacted(c) => {
                multi.suspend(|| eprintln!("{}", compaction_line(&c)));
            }
        }
    }
}
