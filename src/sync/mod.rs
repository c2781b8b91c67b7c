//! Sync: incremental, resumable, rate-aware fetch of every dataset into the lake.
//!
//! A [`Syncer`] runs [`Job`]s over one [`Client`](crate::api::Client), so all jobs share its
//! rate limit and concurrency permits, and one [`Lake`](crate::lake::Lake). Jobs do not commit
//! on their own: each hands its fetched rows, with the progress state that describes them, to
//! one buffer shared by the run, and goes on fetching. The buffer is committed in one lake
//! transaction when it holds [`SyncConfig::commit_rows`] rows, when its oldest rows are
//! [`SyncConfig::commit_interval`] old, at the end of the run, and once after a cancellation,
//! so a run of many small jobs writes few, large files. A job's progress is committed only
//! with every row it handed off before, so an interrupted sync (Ctrl-C, SIGKILL, a failed
//! request) resumes where the last commit left it, with no duplicates and no gaps (a kill loses
//! at most the uncommitted buffer, which the next run fetches again):
//!
//! - swaps and trades come newest first: a job pages until a page whose newest record an
//!   earlier run committed (taking every record of each page, in whatever order), and an
//!   interrupted run resumes from its recorded cursor; records dated far past the answer that
//!   carried them are refused;
//! - candles and price history record the time ranges they cover (empty answers included) and
//!   ask only for what is missing, always re-fetching the most recent
//!   [`SyncConfig::recent_window`] because the newest bars may still change;
//! - snapshots (prices, price stats, profiles, portfolios) carry the time they were fetched; an
//!   interrupted snapshot resumes with the same fetch time and fetches only its missing chunks.
//!
//! A run's commits spread over every day their rows fall in, so each commit would add one small
//! file per day. Instead each commit merges a day's committed small files with its new rows
//! once together they are no longer small ([`SyncConfig::merge_small_files`]): the days grow
//! into large files as the run goes, with the buffer, its bounds and the crash rules as they
//! are. At the end of a run that was not cancelled, the files still small in the partitions
//! its commits wrote are compacted ([`SyncConfig::compact`]), so the lake reads as fast as a
//! compacted one. [`SyncReport`] splits the run's wall time into fetching, committing after
//! the fetching and that compaction.
//!
//! The library never prints on its own: progress goes to a [`SyncObserver`]. [`ProgressBars`] is
//! the observer that draws it on stderr, for the CLI and for programs that want the same bars.
//!
//! # What lives here
//!
//! - the public surface: `jobs.rs` ([`Job`], [`Plan`]), `config.rs` ([`SyncConfig`]),
//!   `report.rs` ([`SyncReport`], [`JobReport`], [`JobOutcome`], [`Compaction`],
//!   [`Estimate`]), `events.rs` ([`SyncEvent`], [`SyncObserver`]), `cancel.rs`
//!   ([`CancelToken`]), `progress.rs` ([`ProgressBars`]) and [`ranges`] (the covered ranges'
//!   arithmetic, in whole epoch seconds on a bar grid, as the states record them);
//! - `runner.rs`: [`Syncer`], which runs a plan's jobs beside the run's committer and compacts
//!   what the run wrote;
//! - `kinds/`: one type per kind of job (swaps and trades, candles, price history, snapshots,
//!   altchain profiles) and the enum that dispatches to them;
//! - `commit.rs`: the group commit, the run's one buffer, its committer (whose commits merge
//!   the small files of the days they write) and the per-job accounts that the kinds hand rows
//!   to;
//! - `context.rs`: what a job in progress is given (client, states, counters, the hand-off);
//! - `state.rs`: the progress jobs record in the manifest, read once per run: the one key type
//!   (`StateKey`, built from a [`Job`]) and one state type per kind, the only code that reads
//!   or writes their JSON; `recorded.rs`: what those states say was fetched, read by
//!   `dexlake status`, the coverage of the analytics (`crate::coverage`) and `dexlake follow`.
//!
//! # What it may import
//!
//! `sync` uses `api` (the client, models, requests), `lake` (transactions, conversion of
//! models to batches) and [`TimeRange`](crate::TimeRange), never `analytics`, `report`, `sim` or the CLI. Inside, imports run one
//! way: `runner` → `kinds` → `context` → `commit` and `state`; `recorded` → `state`; `commit`
//! knows no kind and `kinds` never import the runner.

mod cancel;
mod commit;
mod config;
mod context;
mod events;
mod jobs;
mod kinds;
mod progress;
#[doc(hidden)]
pub mod ranges;
pub(crate) mod recorded;
mod report;
mod runner;
mod state;

pub use cancel::CancelToken;
pub use config::SyncConfig;
pub use events::{SyncEvent, SyncObserver};
pub use jobs::{Job, MAX_BARS_PER_JOB, MAX_INTERVAL_SECONDS, Plan, read_search_request};
pub use progress::ProgressBars;
pub use report::{Compaction, Estimate, JobOutcome, JobReport, SyncReport};
pub use runner::Syncer;
