//! The write-ahead log: every acknowledged write is here, fsynced, before the
//! call that made it returns.
//!
//! Frame format: `[len: u32 LE][crc32 of payload: u32 LE][payload: a batch
//! of records, see `log_payload.rs`]`. One frame per acknowledged call, so a batch is applied
//! whole or not at all. Replay stops at the first short or damaged frame (a
//! write torn by a crash, never acknowledged) and cuts the file there.
//!
//! A flush to the tables runs in the background: the log being flushed is
//! *sealed* (renamed aside, [`SEALED`]) and writes go on into a fresh log.
//! The sealed log is deleted once its records are in the tables; if a crash
//! comes first, the next open replays it before the active log.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{IndexerError, Result};
use crate::log_payload;
use crate::rows::Record;

/// Largest frame accepted at replay; anything bigger is treated as damage.
const MAX_FRAME: u32 = 1 << 30;

/// File name of a log sealed for a background flush, beside the active log.
pub(crate) const SEALED: &str = "wal.sealed.log";

/// An append-only, fsynced log of record batches.
#[derive(Debug)]
pub(crate) struct Wal {
    path: PathBuf,
    file: File,
    bytes: u64,
}

impl Wal {
    /// Opens (creating if needed) the log at `path` and returns it with the
    /// batches it holds, in order. A torn tail is cut off.
    pub(crate) fn open(path: &Path) -> Result<(Wal, Vec<Vec<Record>>)> {
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(IndexerError::io(path))?;
        let mut raw = Vec::new();
        file.read_to_end(&mut raw).map_err(IndexerError::io(path))?;
        let (batches, valid_len) = decode(&raw);
        if valid_len < raw.len() {
            tracing::warn!(
                path = %path.display(),
                dropped_bytes = raw.len() - valid_len,
                "write-ahead log had a torn tail (an unacknowledged write); cutting it off"
            );
            file.set_len(valid_len as u64)
                .map_err(IndexerError::io(path))?;
            file.sync_data().map_err(IndexerError::io(path))?;
        }
        file.seek(SeekFrom::Start(valid_len as u64))
            .map_err(IndexerError::io(path))?;
        Ok((
            Wal {
                path: path.to_path_buf(),
                file,
                bytes: valid_len as u64,
            },
            batches,
        ))
    }

    /// Appends one batch as one frame and fsyncs it. When this returns Ok the
    /// batch survives a crash. `bare` is the batch with its vectors moved
    /// out into `vectors` ([`log_payload::take_vectors`]).
    pub(crate) fn append(&mut self, bare: &[Record], vectors: &[Option<Vec<f32>>]) -> Result<()> {
        let payload = log_payload::encode(bare, vectors)?;
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|len| *len <= MAX_FRAME)
            .ok_or(IndexerError::TooLarge {
                what: "write-ahead log frame",
                len: payload.len() as u64,
                max: u64::from(MAX_FRAME),
            })?;
        let mut header = [0u8; 8];
        header[..4].copy_from_slice(&len.to_le_bytes());
        header[4..].copy_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        let io = IndexerError::io(&self.path);
        let written = self
            .file
            .write_all(&header)
            .and_then(|()| self.file.write_all(&payload))
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            // Leave no half frame behind for the next append to follow.
            let _ = self.file.set_len(self.bytes);
            let _ = self.file.seek(SeekFrom::Start(self.bytes));
            return Err(io(e));
        }
        self.bytes += (header.len() + payload.len()) as u64;
        Ok(())
    }

    /// Moves the log's file to `sealed` and continues in a fresh, empty file
    /// at the old path. Everything appended so far is then in `sealed`.
    pub(crate) fn seal(&mut self, sealed: &Path) -> Result<()> {
        std::fs::rename(&self.path, sealed).map_err(IndexerError::io(sealed))?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(IndexerError::io(&self.path))?;
        // The rename and the new file are durable before anything is
        // acknowledged into the new file.
        sync_dir(&self.path)?;
        self.file = file;
        self.bytes = 0;
        Ok(())
    }

    /// Empties the log once everything in it is in the tables.
    pub(crate) fn reset(&mut self) -> Result<()> {
        let path = &self.path;
        self.file.set_len(0).map_err(IndexerError::io(path))?;
        self.file
            .seek(SeekFrom::Start(0))
            .map_err(IndexerError::io(path))?;
        self.file.sync_data().map_err(IndexerError::io(path))?;
        self.bytes = 0;
        Ok(())
    }

    /// Bytes currently in the log.
    pub(crate) fn len(&self) -> u64 {
        self.bytes
    }
}

/// The batches of a sealed log, if there is one (a torn tail is ignored: it
/// was never acknowledged).
pub(crate) fn read_sealed(path: &Path) -> Result<Vec<Vec<Record>>> {
    match std::fs::read(path) {
        Ok(raw) => Ok(decode(&raw).0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(IndexerError::io(path)(e)),
    }
}

/// Deletes a sealed log whose records are all in the tables.
pub(crate) fn remove_sealed(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => sync_dir(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(IndexerError::io(path)(e)),
    }
}

/// fsyncs the directory holding `path`, making a rename or removal in it durable.
fn sync_dir(path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(IndexerError::io(dir))
}

/// Decodes frames until the first damaged one; returns the batches and the
/// length of the valid prefix.
fn decode(raw: &[u8]) -> (Vec<Vec<Record>>, usize) {
    let mut batches = Vec::new();
    let mut at = 0usize;
    while raw.len() - at >= 8 {
        let len = u32::from_le_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]);
        let crc = u32::from_le_bytes([raw[at + 4], raw[at + 5], raw[at + 6], raw[at + 7]]);
        if len > MAX_FRAME || raw.len() - at - 8 < len as usize {
            break;
        }
        let payload = &raw[at + 8..at + 8 + len as usize];
        if crc32fast::hash(payload) != crc {
            break;
        }
        match log_payload::decode(payload) {
            Some(batch) => batches.push(batch),
            None => break,
        }
        at += 8 + len as usize;
    }
    (batches, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::EventRow;

    fn event(seq: u64) -> Record {
        Record::Event(EventRow {
            seq,
            tenant: "t".into(),
            memory_id: "m".into(),
            op: "confirm".into(),
            at_ms: 1,
            arg: None,
        })
    }

    #[test]
    fn replays_whole_batches_and_cuts_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        {
            let (mut wal, batches) = Wal::open(&path).unwrap();
            assert!(batches.is_empty());
            wal.append(&[event(1), event(2)], &[None, None]).unwrap();
            wal.append(&[event(3)], &[None]).unwrap();
        }
        // A crash in the middle of a third frame.
        let full = std::fs::metadata(&path).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[200, 0, 0, 0, 1, 2, 3, 4, b'[']).unwrap();
        drop(f);

        let (mut wal, batches) = Wal::open(&path).unwrap();
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0].len(), 2);
        assert_eq!(batches[1][0].seq(), 3);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), full);
        wal.append(&[event(4)], &[None]).unwrap();
        drop(wal);
        let (_, batches) = Wal::open(&path).unwrap();
        assert_eq!(batches.len(), 3);
    }

    #[test]
    fn a_sealed_log_keeps_what_was_appended_and_the_new_log_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let sealed = dir.path().join(SEALED);
        let (mut wal, _) = Wal::open(&path).unwrap();
        wal.append(&[event(1), event(2)], &[None, None]).unwrap();
        wal.seal(&sealed).unwrap();
        assert_eq!(wal.len(), 0);
        wal.append(&[event(3)], &[None]).unwrap();
        drop(wal);
        let old = read_sealed(&sealed).unwrap();
        assert_eq!(
            old.concat().iter().map(Record::seq).collect::<Vec<_>>(),
            [1, 2]
        );
        let (_, new) = Wal::open(&path).unwrap();
        assert_eq!(
            new.concat().iter().map(Record::seq).collect::<Vec<_>>(),
            [3]
        );
        remove_sealed(&sealed).unwrap();
        assert!(read_sealed(&sealed).unwrap().is_empty());
    }

    #[test]
    fn a_flipped_byte_ends_replay_at_that_frame() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        {
            let (mut wal, _) = Wal::open(&path).unwrap();
            wal.append(&[event(1)], &[None]).unwrap();
            wal.append(&[event(2)], &[None]).unwrap();
        }
        let mut raw = std::fs::read(&path).unwrap();
        let last = raw.len() - 2;
        raw[last] ^= 0xff;
        std::fs::write(&path, &raw).unwrap();
        let (_, batches) = Wal::open(&path).unwrap();
        assert_eq!(batches.len(), 1);
    }
}
