//! Operations on a whole lake: [`verify()`] (integrity checks beside a running writer; with
//! `pages.rs`, the deep check that decodes every page),
//! [`compact`](mod@compact) (merging small files in bounded memory), [`repair()`] (a new manifest from the
//! data files when it is missing, damaged or lost a log entry) and [`vacuum()`] (deleting the
//! files and log no version within a retention needs), with their reports.
//!
//! Imports: the writer (compaction commits its files as a commit does), the readers, the
//! handle's base (`base.rs`: the store, the options, the manifest read, the writer lock), the
//! log, the storage, the layout and the schemas. Nothing in the lake imports the operations but
//! the [`Lake`](crate::lake::Lake) handle, whose methods run them on its base.

pub(crate) mod compact;
mod pages;
mod problems;
mod repair;
mod vacuum;
mod verify;

pub use compact::{CompactReport, MERGE_FAN_IN};
pub use problems::{Problem, VerifyProgress};
pub use repair::RepairReport;
pub(crate) use repair::repair;
pub(crate) use vacuum::vacuum;
pub use vacuum::{DEFAULT_RETENTION, VACUUM, VacuumOptions, VacuumReport};
pub use verify::{VerifyOptions, VerifyReport};
pub(crate) use verify::{verify, verify_with};
