//! The exit status of a failed command, chosen by the kind of its error
//! ([`dexlake::ErrorKind`]), so a script can tell a bad argument, a lake without the data, a
//! damaged lake and a service that refused apart without reading stderr.

use dexlake::ErrorKind;

/// The exit statuses of `dexlake`, as `dexlake --help` shows them.
pub(crate) const TABLE: &str = "\
Exit statuses:
  0    success
  1    a failure of no kind below (`dexlake check`: findings)
  2    usage: a bad flag, argument, request or configuration (`dexlake check`: any failure
       of no kind below)
  3    no data: nothing in the lake matched what was asked
  4    incomplete: --strict, and the lake does not completely cover what was asked
  5    damaged lake: a committed file is missing, damaged or replaced, or the manifest or
       commit journal does not decode; run `dexlake verify`
  6    service: the service refused or failed a request, or could not be reached
  7    busy: another writer holds the lake's lock, or committed first
  130  interrupted (Ctrl-C); what was committed stays";

/// The exit status of a bad argument (clap's own usage errors exit with it too).
pub(crate) const USAGE: u8 = 2;

/// The exit status of an interrupted command.
pub(crate) const INTERRUPTED: u8 = 130;

/// The exit status of a failure of `kind` (`None`: an error that is not the library's):
///
/// | kind | status |
/// |---|---|
/// | (success) | 0 |
/// | [`ErrorKind::Other`], or no kind | 1 |
/// | [`ErrorKind::Usage`] | 2 |
/// | [`ErrorKind::NoData`] | 3 |
/// | [`ErrorKind::Incomplete`] | 4 |
/// | [`ErrorKind::DamagedLake`] | 5 |
/// | [`ErrorKind::Service`] | 6 |
/// | [`ErrorKind::Busy`] | 7 |
/// | [`ErrorKind::Interrupted`] | 130 |
///
/// `dexlake check` keeps 1 for its findings, so its failures of no listed kind exit with 2.
pub(crate) fn status_of(kind: Option<ErrorKind>) -> u8 {
    match kind {
        Some(ErrorKind::Usage) => USAGE,
        Some(ErrorKind::NoData) => 3,
        Some(ErrorKind::Incomplete) => 4,
        Some(ErrorKind::DamagedLake) => 5,
        Some(ErrorKind::Service) => 6,
        Some(ErrorKind::Busy) => 7,
        Some(ErrorKind::Interrupted) => INTERRUPTED,
        _ => 1,
    }
}

/// The kind of a command's error: that of the first [`dexlake::Error`] in its chain (under
/// the context the command added), [`ErrorKind::Usage`] for a [`UsageError`] of the command
/// line itself, else none.
pub(crate) fn kind_of(error: &anyhow::Error) -> Option<ErrorKind> {
    error.chain().find_map(|cause| {
        if let Some(e) = cause.downcast_ref::<dexlake::Error>() {
            Some(e.kind())
        } else if cause.is::<UsageError>() {
            Some(ErrorKind::Usage)
        } else {
            None
        }
    })
}

/// The exit status of a command that failed with `error` (see [`status_of`]).
pub(crate) fn status(error: &anyhow::Error) -> u8 {
    status_of(kind_of(error))
}

/// A bad combination of flags the command line refuses itself (clap cannot express it): the
/// text as it is, exit status 2.
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Returns a [`UsageError`] with the formatted text from the current function.
macro_rules! usage_bail {
    ($($arg:tt)*) => {
        return Err($crate::exit::UsageError(format!($($arg)*)).into())
    };
}
pub(crate) use usage_bail;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_status_and_context_does_not_hide_it() {
        let no_data = anyhow::Error::new(dexlake::Error::NoData {
            what: "no swaps".into(),
        })
        .context("reading the lake");
        assert_eq!(status(&no_data), 3);
        let usage = anyhow::Error::new(UsageError("give --wallet W".into()));
        assert_eq!(status(&usage), USAGE);
        assert_eq!(usage.to_string(), "give --wallet W");
        assert_eq!(status(&anyhow::anyhow!("plain")), 1);
        let statuses: Vec<u8> = [
            ErrorKind::Usage,
            ErrorKind::NoData,
            ErrorKind::Incomplete,
            ErrorKind::DamagedLake,
            ErrorKind::Service,
            ErrorKind::Busy,
            ErrorKind::Interrupted,
            ErrorKind::Other,
        ]
        .into_iter()
        .map(|k| status_of(Some(k)))
        .collect();
        assert_eq!(statuses, [2, 3, 4, 5, 6, 7, 130, 1]);
    }
}
