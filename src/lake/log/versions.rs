//! Which versions of the lake can still be read, and the manifest of one of them: [`AsOf`]
//! (a version, or a time that picks the last version committed at or before it), the oldest
//! readable version, and [`manifest_as_of`], which a pinned [`Lake`](crate::lake::Lake) reads
//! once and keeps.
//!
//! A version `V` is readable while the log holds a checkpoint at or before it with every entry
//! after that checkpoint up to `V`, and no vacuum deleted a file it lists. A vacuum records the
//! oldest version it kept under [`OLDEST_VERSION_KEY`] in the state; it deletes only files that
//! no version from that one on lists, and only the log older than the checkpoint that version is
//! read from.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use super::commit_log::{ManifestView, checkpoint_versions};
use super::history::read_history;
use super::manifest::Manifest;
use crate::lake::storage::Store;
use crate::{Error, Result};

/// The state key under which a vacuum records the oldest version it kept readable.
pub const OLDEST_VERSION_KEY: &str = "_lake/oldest_version";

/// A version to read the lake as of: a version number, or a time, which picks the last version
/// committed at or before it (version 0, the empty lake, for a time before the first commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOf {
    /// A version number (a commit of the log, as `dexlake log` shows it).
    Version(u64),
    /// A time: the last version committed at or before it.
    Time(DateTime<Utc>),
}

impl fmt::Display for AsOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AsOf::Version(v) => write!(f, "version {v}"),
            AsOf::Time(t) => write!(f, "{}", t.to_rfc3339()),
        }
    }
}

impl From<u64> for AsOf {
    fn from(version: u64) -> AsOf {
        AsOf::Version(version)
    }
}

impl From<DateTime<Utc>> for AsOf {
    fn from(time: DateTime<Utc>) -> AsOf {
        AsOf::Time(time)
    }
}

impl FromStr for AsOf {
    type Err = Error;

    /// `VERSION` (a whole number) or an RFC 3339 time (`2026-11-20T08:00:00Z`).
    fn from_str(text: &str) -> Result<AsOf> {
        let text = text.trim();
        if let Ok(v) = text.parse::<u64>() {
            return Ok(AsOf::Version(v));
        }
        DateTime::parse_from_rfc3339(text)
            .map(|t| AsOf::Time(t.with_timezone(&Utc)))
            .map_err(|_| Error::InvalidArgument {
                argument: "as-of".into(),
                reason: format!(
                    "{text:?} is neither a version number nor an RFC 3339 time (such as 2026-11-20T08:00:00Z)"
                ),
            })
    }
}

/// The oldest version of the lake that can still be read, given the newest state (`newest`,
/// with or without its files): the one the last vacuum kept, or the oldest checkpoint the
/// log holds when that is newer (a log cleaned up before versions were kept).
pub fn oldest_readable(store: &dyn Store, newest: &Manifest) -> Result<u64> {
    let kept = newest
        .state
        .get(OLDEST_VERSION_KEY)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    let checkpoints = checkpoint_versions(store)?.into_iter().min();
    // Without checkpoints (a lake from before the log), only the newest version is known.
    let logged = checkpoints.unwrap_or(newest.version);
    Ok(kept.max(logged).min(newest.version))
}

/// The version `as_of` names, given the newest state: a time picks the last version
/// committed at or before it, read from the history. A version newer than the lake's is
/// refused.
pub fn resolve(store: &dyn Store, newest: &Manifest, as_of: AsOf) -> Result<u64> {
    let version = match as_of {
        AsOf::Version(v) => v,
        AsOf::Time(t) => {
            let history = read_history(store, newest.version)?;
            match history
                .records
                .iter()
                // At the lake's time unit, microseconds: a time read back from `dexlake log
                // --format json` by a tool that keeps microseconds picks its commit.
                .find(|r| {
                    r.committed_at
                        .is_none_or(|c| c.timestamp_micros() <= t.timestamp_micros())
                }) {
                Some(r) => r.version,
                // Every recorded commit is later: the version before the oldest recorded one,
                // which is readable only when nothing before it is missing from the history.
                None => match history.unrecorded_before {
                    None => 0,
                    Some(first) => {
                        return Err(Error::InvalidArgument {
                            argument: "as-of".into(),
                            reason: format!(
                                "{} is before the oldest commit whose time the lake records (version {first}); ask for a version number",
                                t.to_rfc3339()
                            ),
                        });
                    }
                },
            }
        }
    };
    if version > newest.version {
        return Err(Error::InvalidArgument {
            argument: "as-of".into(),
            reason: format!(
                "version {version} does not exist yet: the lake's newest version is {}",
                newest.version
            ),
        });
    }
    Ok(version)
}

/// The manifest (with its files) as of `as_of`, given the newest state. A version older than
/// the oldest readable one, or one whose log is incomplete, is refused naming the oldest
/// readable version.
pub fn manifest_as_of(store: &dyn Store, newest: &Manifest, as_of: AsOf) -> Result<Manifest> {
    let version = resolve(store, newest, as_of)?;
    let oldest = oldest_readable(store, newest)?;
    let unreadable = || Error::InvalidArgument {
        argument: "as-of".into(),
        reason: format!(
            "version {version}{} is no longer readable: a vacuum deleted its files or its log; the oldest readable version is {oldest}",
            match as_of {
                AsOf::Time(t) => format!(" (the last committed at or before {})", t.to_rfc3339()),
                AsOf::Version(_) => String::new(),
            }
        ),
    };
    if version < oldest {
        return Err(unreadable());
    }
    ManifestView::read_at(store, version)?.ok_or_else(unreadable)
}
