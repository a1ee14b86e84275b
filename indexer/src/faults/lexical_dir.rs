//! The BM25 index's writes under the fault layer: a tantivy `Directory`
//! around the index's `MmapDirectory`. Opening a file for writing, finishing
//! it (tantivy's writers flush and fsync when they terminate), the atomic
//! writes of `meta.json`, deletes and the directory fsync are counted and
//! can fail; reads and the lock pass through.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, TerminatingWrite,
    WatchCallback, WatchHandle, WritePtr,
};

use super::FileOp;
use super::inject::decide;

/// The index directory at `root`, its writes under the fault layer.
#[derive(Debug, Clone)]
pub(crate) struct FaultDir {
    inner: MmapDirectory,
    root: PathBuf,
}

impl FaultDir {
    pub(crate) fn new(inner: MmapDirectory, root: &Path) -> FaultDir {
        FaultDir {
            inner,
            root: root.to_path_buf(),
        }
    }

    fn check(&self, path: &Path, op: FileOp) -> io::Result<()> {
        match decide(&self.root.join(path), op) {
            None => Ok(()),
            Some(fault) => Err(fault.error()),
        }
    }
}

impl Directory for FaultDir {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.check(path, FileOp::Remove)
            .map_err(|e| DeleteError::IoError {
                io_error: Arc::new(e),
                filepath: path.to_path_buf(),
            })?;
        self.inner.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.check(path, FileOp::Create)
            .map_err(|e| OpenWriteError::wrap_io_error(e, path.to_path_buf()))?;
        let inner = self.inner.open_write(path)?;
        Ok(io::BufWriter::new(Box::new(FaultWriter {
            inner,
            file: self.root.join(path),
        })))
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.inner.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        self.check(path, FileOp::Write)?;
        self.inner.atomic_write(path, data)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.check(Path::new(""), FileOp::DirSync)?;
        self.inner.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.inner.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(watch_callback)
    }
}

/// A file being written: its bytes pass through; finishing it (flush and
/// fsync) is the counted operation.
struct FaultWriter {
    inner: WritePtr,
    file: PathBuf,
}

impl Write for FaultWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl TerminatingWrite for FaultWriter {
    fn terminate_ref(&mut self, token: AntiCallToken) -> io::Result<()> {
        if let Some(fault) = decide(&self.file, FileOp::Write) {
            return Err(fault.error());
        }
        self.inner.terminate_ref(token)
    }
}
