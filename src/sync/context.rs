//! What a job in progress is given: the client, the run's configuration and cancellation, the
//! recorded states, its counters and where to report them, and the hand-off of its rows to the
//! run's commit buffer.

use arrow_array::RecordBatch;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

use super::cancel::CancelToken;
use super::commit::CommitBuffer;
use super::config::SyncConfig;
use super::events::{SyncEvent, SyncObserver};
use super::state::SyncStates;
use crate::api::client::Client;
use crate::error::Result;
use crate::lake::Dataset;
use crate::lake::convert::ToBatch;

/// One job in progress: what it fetches with, its counters and where to report them.
pub(crate) struct JobContext<'a> {
    /// Index of the job in the plan.
    pub(crate) index: usize,
    pub(crate) client: &'a Client,
    pub(crate) config: &'a SyncConfig,
    pub(crate) states: SyncStates<'a>,
    pub(crate) observer: &'a dyn SyncObserver,
    pub(crate) cancel: &'a CancelToken,
    /// The run's commit buffer.
    pub(crate) buffer: &'a CommitBuffer,
    pub(crate) rows_fetched: u64,
    pub(crate) requests: u64,
    pub(crate) total: Option<u64>,
    /// Records refused as dated far past the answer that carried them.
    pub(crate) rows_refused: u64,
}

impl JobContext<'_> {
    /// Reports that the job starts again from the top, and why.
    pub(crate) fn restarted(&self, reason: String) {
        self.observer.on_event(SyncEvent::Restarted {
            index: self.index,
            reason,
        });
    }

    /// Counts records of one answer refused because they are dated far past it (later than
    /// `horizon`; `date` is the answer's `Date`), and warns about them.
    pub(crate) fn refused(
        &mut self,
        times: &[DateTime<Utc>],
        date: Option<DateTime<Utc>>,
        horizon: DateTime<Utc>,
    ) {
        self.rows_refused += times.len() as u64;
        let at = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::AutoSi, true);
        let latest = times.iter().max().map_or_else(String::new, |&t| at(t));
        let reference = match date {
            Some(d) => format!("the service's time {} (its answer's Date)", at(d)),
            None => "this machine's clock (the answer had no Date)".to_owned(),
        };
        self.observer.on_event(SyncEvent::Warning {
            index: self.index,
            message: format!(
                "refused {} record{} dated after {} (far past {reference}), the latest {latest}: not stored, and not taken as the end of what the lake holds",
                times.len(),
                if times.len() == 1 { "" } else { "s" },
                at(horizon),
            ),
        });
    }

    /// Awaits one request, or `None` as soon as the run is cancelled: the request in flight is
    /// dropped, and since nothing of it was handed off, the job's recorded progress still
    /// points at it.
    pub(crate) async fn unless_cancelled<T>(&self, request: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => None,
            answer = request => Some(answer),
        }
    }

    /// Counts one answer of `rows` records and reports the progress.
    pub(crate) fn fetched(&mut self, rows: usize) {
        self.requests += 1;
        self.rows_fetched += rows as u64;
        self.observer.on_event(SyncEvent::Progress {
            index: self.index,
            rows_fetched: self.rows_fetched,
            requests: self.requests,
            total: self.total,
        });
    }

    /// Hands rows (built later by `build`, off the async workers) and the states that describe
    /// them to the run's commit buffer. `rows` is their number, as received. Returns at once
    /// unless the buffer is full; fails when a commit holding earlier rows of the job failed.
    pub(crate) async fn hand_off<F>(
        &self,
        rows: usize,
        build: F,
        states: Vec<(String, Value)>,
    ) -> Result<()>
    where
        F: FnOnce() -> Result<Vec<(Dataset, RecordBatch)>> + Send + 'static,
    {
        self.buffer
            .hand_off(self.index, Box::new(build), rows, states)
            .await
    }

    /// Hands records of one dataset with the job's states: [`hand_off`](Self::hand_off) with
    /// the records' own conversion.
    pub(crate) async fn hand_off_records<T>(
        &self,
        records: Vec<T>,
        context: T::Context,
        states: Vec<(String, Value)>,
    ) -> Result<()>
    where
        T: ToBatch + Send + 'static,
        T::Context: Send + 'static,
    {
        let rows = records.len();
        self.hand_off(
            rows,
            move || Ok(vec![(T::DATASET, T::to_batch(&records, &context)?)]),
            states,
        )
        .await
    }
}
