//! Spill files of the readers in parts (the events' by token, the PnL's by wallet): the work is
//! cut into parts of a bounded size, each row group's records of a part are appended to that
//! part's file as one segment, and a part's segments are then read back, in the order of the
//! row groups they came from, while the other parts wait on disk.
//!
//! The files live in a temporary folder of their own (in the system's temporary folder), removed
//! when the reader is done or fails; a part's file is removed as soon as it is read. Where each
//! segment starts is kept in memory, so a part's segments can be read back in parallel. What a
//! segment holds is the reader's own encoding.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use crate::{Error, Result};

/// Where a segment is: the row group it came from (its rank in the reader's order), where it
/// starts in its part's file, and its bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    pub(crate) order: usize,
    pub(crate) offset: u64,
    pub(crate) len: usize,
}

/// One part's file being written: where the next segment starts, and every segment's place.
struct PartFile {
    writer: BufWriter<File>,
    at: u64,
    segments: Vec<Segment>,
}

/// The spill files being written, one per part.
pub(crate) struct SpillFiles {
    dir: tempfile::TempDir,
    files: Vec<Mutex<PartFile>>,
}

fn path_of(dir: &tempfile::TempDir, part: usize) -> PathBuf {
    dir.path().join(format!("part-{part:05}.spill"))
}

impl SpillFiles {
    /// Creates a temporary folder named after `prefix` and an empty file per part.
    pub(crate) fn new(prefix: &str, parts: usize) -> Result<SpillFiles> {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(|e| Error::io("creating a spill folder in", std::env::temp_dir(), e))?;
        let files = (0..parts)
            .map(|p| {
                let path = path_of(&dir, p);
                let file = File::create(&path).map_err(|e| Error::io("creating", path, e))?;
                Ok(Mutex::new(PartFile {
                    writer: BufWriter::with_capacity(1 << 20, file),
                    at: 0,
                    segments: Vec::new(),
                }))
            })
            .collect::<Result<_>>()?;
        Ok(SpillFiles { dir, files })
    }

    /// Appends `bytes` to part `part`'s file as the segment of the row group ranked `order`.
    pub(crate) fn append(&self, part: usize, order: usize, bytes: &[u8]) -> Result<()> {
        let mut f = self.files[part]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f.writer
            .write_all(bytes)
            .map_err(|e| Error::io("writing", path_of(&self.dir, part), e))?;
        let offset = f.at;
        f.segments.push(Segment {
            order,
            offset,
            len: bytes.len(),
        });
        f.at += bytes.len() as u64;
        Ok(())
    }

    /// Flushes and closes every file; each part's segments come back in row-group order.
    pub(crate) fn finish(self) -> Result<SpilledParts> {
        let mut segments = Vec::with_capacity(self.files.len());
        for (p, f) in self.files.into_iter().enumerate() {
            let f = f.into_inner().unwrap_or_else(PoisonError::into_inner);
            f.writer
                .into_inner()
                .map_err(|e| Error::io("writing", path_of(&self.dir, p), e.into_error()))?;
            let mut s = f.segments;
            s.sort_by_key(|s| s.order);
            segments.push(s);
        }
        Ok(SpilledParts {
            dir: self.dir,
            segments,
        })
    }
}

/// The spill files, written, to read back a part at a time.
pub(crate) struct SpilledParts {
    dir: tempfile::TempDir,
    /// Each part's segments, in row-group order.
    segments: Vec<Vec<Segment>>,
}

impl SpilledParts {
    /// Part `part`'s segments, in row-group order.
    pub(crate) fn segments(&self, part: usize) -> &[Segment] {
        &self.segments[part]
    }

    /// Part `part`'s file, open for reading its segments.
    pub(crate) fn open(&self, part: usize) -> Result<PartReader> {
        let path = path_of(&self.dir, part);
        let file = File::open(&path).map_err(|e| Error::io("reading", path.clone(), e))?;
        Ok(PartReader { file, path })
    }

    /// Removes part `part`'s file once it is read, so that its disk is given back before the
    /// next part is read (the folder goes when `self` does).
    pub(crate) fn remove(&self, part: usize) {
        let _ = std::fs::remove_file(path_of(&self.dir, part));
    }
}

/// A part's file, open for reading.
pub(crate) struct PartReader {
    file: File,
    path: PathBuf,
}

impl PartReader {
    /// Appends the bytes of `segment` to `buf`.
    pub(crate) fn read_into(&self, segment: &Segment, buf: &mut Vec<u8>) -> Result<()> {
        let from = buf.len();
        buf.resize(from + segment.len, 0);
        self.file
            .read_exact_at(&mut buf[from..], segment.offset)
            .map_err(|e| Error::io("reading", self.path.clone(), e))
    }

    /// The error of a segment that does not hold what its reader wrote: `what` was found.
    pub(crate) fn damaged(&self, what: String) -> Error {
        Error::io(
            "reading",
            self.path.clone(),
            std::io::Error::new(std::io::ErrorKind::InvalidData, what),
        )
    }
}

/// Hands the allocator's free pages back to the system: glibc keeps freed heap memory
/// resident, so without it a first pass's buffers, freed by the time the parts are read, would
/// still count in the process's memory beside each part.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns free pages of glibc's heaps to the system; it takes
    // no pointer and leaves every allocation in place.
    unsafe {
        libc::malloc_trim(0);
    }
}
