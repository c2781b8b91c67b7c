//! [`Answer`]: what every question of a [`Query`](super::Query) returns, and the rules that
//! decide it once for every door: nothing found, the tokens of a list without events, strict
//! coverage.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use polars::prelude::*;

use crate::analytics::{EventSource, Selection, TimeRange};
use crate::coverage::Coverage;
use crate::lake::Lake;
use crate::lake::cols::token;
use crate::{Error, Result};

/// An answer of the lake: the value, the coverage of what it read, its warnings, and the lake
/// version it read. The CLI, the Python package, the report and follow print or hand over
/// exactly this; they decide nothing about it.
#[derive(Debug, Clone)]
pub struct Answer<T> {
    /// The answer itself: a frame, a search page, a performance, or the rows a sink took.
    pub value: T,
    /// What the lake's syncs fetched of what the answer read.
    pub coverage: Coverage,
    /// What a reader of the answer should know, in the order a door shows them.
    pub warnings: Vec<Warning>,
    /// The lake version (manifest commit) the answer read. The CLI prints it as `note: lake
    /// version N` and writes it, with the query, the coverage and the warnings, into the
    /// key-value metadata of a Parquet output (`dexlake.version`, docs/coverage.md).
    pub version: u64,
}

impl<T> Answer<T> {
    /// The same answer with another value (the warnings, coverage and version kept).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Answer<U> {
        Answer {
            value: f(self.value),
            coverage: self.coverage,
            warnings: self.warnings,
            version: self.version,
        }
    }

    /// [`Answer::map`] with a fallible `f`.
    pub fn try_map<U>(self, f: impl FnOnce(T) -> Result<U>) -> Result<Answer<U>> {
        Ok(Answer {
            value: f(self.value)?,
            coverage: self.coverage,
            warnings: self.warnings,
            version: self.version,
        })
    }
}

/// One warning of an [`Answer`], as data: its kind and its one-line text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// What the warning is about.
    pub kind: WarningKind,
    /// The text, one line (the CLI prints it after `warning: ` or `note: `).
    pub text: String,
}

/// What a [`Warning`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WarningKind {
    /// The lake's syncs never fetched (or fetched only a partial view of) part of what the
    /// answer read; strict coverage refuses the answer instead.
    Coverage,
    /// Some of the tokens asked for have no events: the answer holds the others.
    NoEvents,
    /// The answer is empty but valid (a wallet without trades, a token without trades in its
    /// windows).
    Empty,
}

impl WarningKind {
    /// The CLI's prefix of the kind: `warning` or `note`.
    pub fn prefix(self) -> &'static str {
        match self {
            WarningKind::Coverage | WarningKind::NoEvents => "warning",
            WarningKind::Empty => "note",
        }
    }

    /// The kind's name in machine-readable outputs (a Parquet output's `dexlake.warnings`):
    /// `coverage`, `no_events` or `empty`.
    pub fn name(self) -> &'static str {
        match self {
            WarningKind::Coverage => "coverage",
            WarningKind::NoEvents => "no_events",
            WarningKind::Empty => "empty",
        }
    }
}

impl Warning {
    pub(super) fn new(kind: WarningKind, text: impl Into<String>) -> Self {
        Warning {
            kind,
            text: text.into(),
        }
    }
}

/// The coverage's warnings, or with `strict` the refusal naming them.
pub(super) fn coverage_warnings(coverage: &Coverage, strict: bool) -> Result<Vec<Warning>> {
    let missing = coverage.warnings();
    if strict && !missing.is_empty() {
        return Err(Error::Incomplete { missing });
    }
    Ok(missing
        .into_iter()
        .map(|w| Warning::new(WarningKind::Coverage, w))
        .collect())
}

/// The dataset's events, as the refusals name them.
pub(super) fn events_name(source: EventSource) -> &'static str {
    match source {
        EventSource::Swaps => "swaps",
        EventSource::Trades => "trades",
    }
}

/// ` in [from, to)` for a range with an end, else nothing.
pub(super) fn range_text(range: TimeRange) -> String {
    match (range.from, range.to) {
        (None, None) => String::new(),
        (f, t) => format!(
            " in [{}, {})",
            f.map_or("-∞".into(), |t| t.to_rfc3339()),
            t.map_or("∞".into(), |t| t.to_rfc3339())
        ),
    }
}

/// An instant as RFC 3339 in UTC with `Z`, as the outputs write it.
pub(super) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// The rule of every event answer: no row is [`Error::NoData`] naming what was asked (`what`:
/// the events or the series read); with a list of tokens, those without events are a warning.
/// `present` gives the tokens with rows.
pub(super) fn found(
    lake: &Lake,
    rows: usize,
    present: impl FnOnce() -> Result<BTreeSet<String>>,
    selection: &Selection,
    what: &str,
    range: TimeRange,
) -> Result<Vec<Warning>> {
    let where_ = range_text(range);
    let at = lake.named_root().display();
    if rows == 0 {
        let subject = match selection {
            Selection::Token(t) => format!("token {t}"),
            Selection::Tokens(ts) => format!("tokens {}", ts.join(",")),
            Selection::Pool(p) => format!("pool {p}"),
            Selection::AllTokens => "any token".into(),
        };
        return Err(Error::NoData {
            what: format!("no {what} for {subject} in the lake at {at}{where_}"),
        });
    }
    let mut warnings = Vec::new();
    if let Selection::Tokens(ts) = selection {
        let present = present()?;
        let missing: Vec<&str> = ts
            .iter()
            .filter(|t| !present.contains(*t))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            warnings.push(Warning::new(
                WarningKind::NoEvents,
                format!(
                    "no {what} for {} in the lake at {at}{where_}",
                    missing.join(",")
                ),
            ));
        }
    }
    Ok(warnings)
}

/// The distinct tokens of a frame with `token_address` (a token's rows are consecutive).
pub(super) fn present_tokens(df: &DataFrame) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let Ok(column) = df.column(token::TOKEN) else {
        return Ok(out);
    };
    let column = column
        .str()
        .map_err(Error::polars("reading the tokens of an answer"))?;
    let mut last: Option<&str> = None;
    for t in column.iter().flatten() {
        if last != Some(t) {
            out.insert(t.to_owned());
            last = Some(t);
        }
    }
    Ok(out)
}
