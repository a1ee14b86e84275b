//! The store's file boundary: every write-path file operation (the log, the
//! audit log, the erase intent, the BM25 index's files, the LanceDB tables'
//! objects) goes through here, so a test can make any one of them fail.
//!
//! Without the cargo feature `faults` the functions below are the plain
//! `std::fs` calls. With it, a test [`arm`]s a data directory with a
//! [`Plan`] ("fail the 7th operation with ENOSPC", "fail every operation
//! from the 40th on", "fail 2 % of them, seeded") and every operation on a
//! file under that directory is counted, recorded and, when the plan says
//! so, fails with EIO or ENOSPC, or writes half its bytes and fails (a
//! short write). Directories are armed separately, so tests running side
//! by side in one process do not see each other's faults.
//!
//! The table files are reached through an object-store wrapper that LanceDB
//! opens its tables with, the BM25 index through a tantivy `Directory`
//! wrapper; both only exist with the feature.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

#[cfg(feature = "faults")]
mod inject;
#[cfg(feature = "faults")]
pub(crate) mod lexical_dir;
#[cfg(feature = "faults")]
pub(crate) mod object_store;

#[cfg(feature = "faults")]
pub use inject::{Armed, Fault, Plan, Seen, Trigger, arm};

/// A kind of file operation, as counted and failed by the fault layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileOp {
    /// Bytes written (a log frame, an audit line, an intent file, an index
    /// file finished, a table object put).
    Write,
    /// An fsync of a file.
    Sync,
    /// A file cut to a length.
    Truncate,
    /// A rename (a log sealed, an object copied or renamed into place).
    Rename,
    /// A file or object removed.
    Remove,
    /// An fsync of a directory (making a rename or removal durable).
    DirSync,
    /// A file created or opened for writing.
    Create,
}

/// Asks the armed plan (if any) whether the operation on `path` fails.
#[cfg(feature = "faults")]
fn check(path: &Path, op: FileOp) -> io::Result<()> {
    match inject::decide(path, op) {
        None => Ok(()),
        Some(fault) => Err(fault.error()),
    }
}

#[cfg(not(feature = "faults"))]
#[inline(always)]
fn check(_path: &Path, _op: FileOp) -> io::Result<()> {
    Ok(())
}

/// `file.write_all(buf)`; under a short-write fault, half of `buf` is
/// written before the error.
pub(crate) fn write_all(file: &mut File, path: &Path, buf: &[u8]) -> io::Result<()> {
    #[cfg(feature = "faults")]
    if let Some(fault) = inject::decide(path, FileOp::Write) {
        if fault == Fault::Short {
            file.write_all(&buf[..buf.len() / 2])?;
        }
        return Err(fault.error());
    }
    #[cfg(not(feature = "faults"))]
    check(path, FileOp::Write)?;
    file.write_all(buf)
}

/// `file.sync_data()`.
pub(crate) fn sync_data(file: &File, path: &Path) -> io::Result<()> {
    check(path, FileOp::Sync)?;
    file.sync_data()
}

/// `file.set_len(len)`.
pub(crate) fn set_len(file: &File, path: &Path, len: u64) -> io::Result<()> {
    check(path, FileOp::Truncate)?;
    file.set_len(len)
}

/// `std::fs::rename(from, to)`.
pub(crate) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    check(from, FileOp::Rename)?;
    std::fs::rename(from, to)
}

/// `std::fs::remove_file(path)`.
pub(crate) fn remove_file(path: &Path) -> io::Result<()> {
    check(path, FileOp::Remove)?;
    std::fs::remove_file(path)
}

/// `File::create(path)`.
pub(crate) fn create(path: &Path) -> io::Result<File> {
    check(path, FileOp::Create)?;
    File::create(path)
}

/// fsyncs the directory `dir` (a rename or removal in it becomes durable).
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    check(dir, FileOp::DirSync)?;
    File::open(dir).and_then(|d| d.sync_all())
}
