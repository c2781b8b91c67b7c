//! Spill files of the readers in parts (the events' by token, the PnL's by wallet): the work is
//! cut into parts of a bounded size, each row group's records of a part are appended to that
//! part's file as one segment, and a part's segments are then read back, in the order of the
//! row groups they came from, while the other parts wait on disk.
//!
//! The files are unnamed temporary files in the system's temporary folder (`tempfile::tempfile`:
//! unlinked as they are made), so the system takes their disk back when the reader lets go of
//! them or the process ends in any way, killed included; a part's file is let go as soon as it
//! is read. Where each segment starts is kept in memory, so a part's segments can be read back
//! in parallel. What a segment holds is the reader's own encoding.

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
    files: Vec<Mutex<PartFile>>,
}

/// Where the spill files are, for errors.
fn spill_folder() -> PathBuf {
    std::env::temp_dir()
}

impl SpillFiles {
    /// An empty unnamed file per part.
    pub(crate) fn new(parts: usize) -> Result<SpillFiles> {
        let files = (0..parts)
            .map(|_| {
                let file = tempfile::tempfile()
                    .map_err(|e| Error::io("creating a spill file in", spill_folder(), e))?;
                Ok(Mutex::new(PartFile {
                    writer: BufWriter::with_capacity(1 << 20, file),
                    at: 0,
                    segments: Vec::new(),
                }))
            })
            .collect::<Result<_>>()?;
        Ok(SpillFiles { files })
    }

    /// Appends `bytes` to part `part`'s file as the segment of the row group ranked `order`.
    pub(crate) fn append(&self, part: usize, order: usize, bytes: &[u8]) -> Result<()> {
        let mut f = self.files[part]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f.writer
            .write_all(bytes)
            .map_err(|e| Error::io("writing a spill file in", spill_folder(), e))?;
        let offset = f.at;
        f.segments.push(Segment {
            order,
            offset,
            len: bytes.len(),
        });
        f.at += bytes.len() as u64;
        Ok(())
    }

    /// Flushes every file; each part's segments come back in row-group order.
    pub(crate) fn finish(self) -> Result<SpilledParts> {
        let mut files = Vec::with_capacity(self.files.len());
        let mut segments = Vec::with_capacity(self.files.len());
        for f in self.files {
            let f = f.into_inner().unwrap_or_else(PoisonError::into_inner);
            let file = f.writer.into_inner().map_err(|e| {
                Error::io("writing a spill file in", spill_folder(), e.into_error())
            })?;
            files.push(Mutex::new(Some(file)));
            let mut s = f.segments;
            s.sort_by_key(|s| s.order);
            segments.push(s);
        }
        Ok(SpilledParts { files, segments })
    }
}

/// The spill files, written, to read back a part at a time.
pub(crate) struct SpilledParts {
    /// Each part's file, until it is let go.
    files: Vec<Mutex<Option<File>>>,
    /// Each part's segments, in row-group order.
    segments: Vec<Vec<Segment>>,
}

impl SpilledParts {
    /// Part `part`'s segments, in row-group order.
    pub(crate) fn segments(&self, part: usize) -> &[Segment] {
        &self.segments[part]
    }

    /// Part `part`'s file, for reading its segments.
    pub(crate) fn open(&self, part: usize) -> Result<PartReader> {
        let held = self.files[part]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let io = |e| Error::io("reading a spill file in", spill_folder(), e);
        let file = match held.as_ref() {
            Some(f) => f.try_clone().map_err(io)?,
            None => {
                return Err(io(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("part {part} was read already"),
                )));
            }
        };
        Ok(PartReader { file })
    }

    /// Lets go of part `part`'s file once it is read, so that the system takes its disk back
    /// (when no [`PartReader`] of it is left) before the next part is read.
    pub(crate) fn remove(&self, part: usize) {
        self.files[part]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

/// A part's file, open for reading.
pub(crate) struct PartReader {
    file: File,
}

impl PartReader {
    /// Appends the bytes of `segment` to `buf`.
    pub(crate) fn read_into(&self, segment: &Segment, buf: &mut Vec<u8>) -> Result<()> {
        let from = buf.len();
        buf.resize(from + segment.len, 0);
        self.file
            .read_exact_at(&mut buf[from..], segment.offset)
            .map_err(|e| Error::io("reading a spill file in", spill_folder(), e))
    }

    /// The bytes of `segment`, read into `buf`, a buffer reused from segment to segment: grown
    /// when a segment needs more, never zeroed again.
    pub(crate) fn read_reusing<'b>(
        &self,
        segment: &Segment,
        buf: &'b mut Vec<u8>,
    ) -> Result<&'b [u8]> {
        if buf.len() < segment.len {
            buf.resize(segment.len, 0);
        }
        let bytes = &mut buf[..segment.len];
        self.file
            .read_exact_at(bytes, segment.offset)
            .map_err(|e| Error::io("reading a spill file in", spill_folder(), e))?;
        Ok(bytes)
    }

    /// The error of a segment that does not hold what its reader wrote: `what` was found.
    pub(crate) fn damaged(&self, what: String) -> Error {
        Error::io(
            "reading a spill file in",
            spill_folder(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_read_back_in_row_group_order_and_a_part_once() {
        let files = SpillFiles::new(2).expect("spill");
        files.append(1, 7, b"late").expect("append");
        files.append(0, 3, b"abc").expect("append");
        files.append(1, 2, b"early").expect("append");
        let parts = files.finish().expect("finish");
        let orders: Vec<usize> = parts.segments(1).iter().map(|s| s.order).collect();
        assert_eq!(orders, vec![2, 7]);
        let reader = parts.open(1).expect("open");
        let mut buf = b"x".to_vec();
        for s in parts.segments(1) {
            reader.read_into(s, &mut buf).expect("read");
        }
        assert_eq!(buf, b"xearlylate");
        drop(reader);
        parts.remove(1);
        assert!(parts.open(1).is_err(), "a part let go cannot be read again");
        let mut buf = Vec::new();
        let reader = parts.open(0).expect("open");
        reader
            .read_into(&parts.segments(0)[0], &mut buf)
            .expect("read");
        assert_eq!(buf, b"abc");
        let beyond = Segment {
            order: 0,
            offset: 100,
            len: 4,
        };
        assert!(reader.read_into(&beyond, &mut buf).is_err());
        // A reused buffer gives each segment's bytes alone, longer or shorter than the last.
        let mut reused = b"0123456789".to_vec();
        assert_eq!(
            reader
                .read_reusing(&parts.segments(0)[0], &mut reused)
                .expect("read"),
            b"abc"
        );
        assert!(reader.read_reusing(&beyond, &mut reused).is_err());
    }
}
