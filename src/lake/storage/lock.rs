//! [`WriterLock`]: the one writer of a lake in a folder, a file lock on `_dexlake/lock`. A
//! store without a lock file (an object store) always grants it: there, commits serialise on
//! the log. Readers never need it: they read the log, which only grows.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::ErrorKind;
use std::time::{Duration, Instant};

use super::Store;
use crate::lake::layout::LOCK_PATH;
use crate::{Error, Result};

/// The writer lock of a lake, held until dropped (on a local folder, a lock on
/// `_dexlake/lock`; on an object store, nothing).
#[derive(Debug)]
pub(crate) struct WriterLock {
    _file: Option<File>,
}

impl WriterLock {
    /// Takes the writer lock of `store` if it is free right now. A store without a lock file
    /// (an object store) always grants it: there, commits serialise on the log.
    pub(crate) fn try_take(store: &dyn Store) -> Result<Option<WriterLock>> {
        WriterLock::try_take_or(store, false)
    }

    /// [`try_take`](Self::try_take) for a reader that may clean up on its way but never has to:
    /// a lake this process may not write (a read-only mount, a folder of another user) answers
    /// `None`, as a held lock does, instead of an error.
    pub(crate) fn try_take_if_writable(store: &dyn Store) -> Result<Option<WriterLock>> {
        WriterLock::try_take_or(store, true)
    }

    fn try_take_or(store: &dyn Store, none_if_read_only: bool) -> Result<Option<WriterLock>> {
        if !store.has_writer_lock() {
            return Ok(Some(WriterLock { _file: None }));
        }
        let path = store.location(LOCK_PATH);
        let opened = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path);
        let f = match opened {
            Ok(f) => f,
            Err(e)
                if none_if_read_only
                    && matches!(
                        e.kind(),
                        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
                    ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(Error::io("opening the lock file", path, e)),
        };
        match f.try_lock() {
            Ok(()) => Ok(Some(WriterLock { _file: Some(f) })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(Error::io("locking", path, e)),
        }
    }

    /// Takes the writer lock of `store`, waiting up to `timeout`, then
    /// [`Error::LakeLocked`].
    pub(crate) fn take(store: &dyn Store, timeout: Duration) -> Result<WriterLock> {
        let start = Instant::now();
        loop {
            if let Some(f) = WriterLock::try_take(store)? {
                return Ok(f);
            }
            if start.elapsed() >= timeout {
                return Err(Error::LakeLocked {
                    path: store.location(LOCK_PATH),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
