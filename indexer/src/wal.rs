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
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{IndexerError, Result};
use crate::faults;
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
    /// Frames were written since the last fsync ([`Wal::append`] with
    /// `sync` false): the next fsync of this file, a seal or a drop makes
    /// them durable.
    unsynced: bool,
    /// Why the log takes no more writes until the store is reopened: an
    /// fsync failed (the OS may have dropped the pages it could not write,
    /// so a later fsync that succeeds proves nothing about them: the
    /// PostgreSQL fsync lesson), or a failed write could not be cut back
    /// off, or a seal stopped half-way.
    broken: Option<String>,
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
                unsynced: false,
                broken: None,
            },
            batches,
        ))
    }

    /// Appends one batch as one frame and, when `sync`, fsyncs it (and every
    /// frame before it). When a synced append returns Ok the batch survives
    /// a crash; an unsynced one survives a killed process (it is in the
    /// OS's page cache) but not a power loss until the next fsync. `bare` is
    /// the batch with its vectors moved out into `vectors`
    /// ([`log_payload::take_vectors`]).
    pub(crate) fn append(
        &mut self,
        bare: &[Record],
        vectors: &[Option<Vec<f32>>],
        sync: bool,
    ) -> Result<()> {
        let (header, payload) = frame(bare, vectors)?;
        self.usable()?;
        let io = IndexerError::io(&self.path);
        let path = self.path.as_path();
        let written = faults::write_all(&mut self.file, path, &header)
            .and_then(|()| faults::write_all(&mut self.file, path, &payload));
        if let Err(e) = written {
            // Leave no half frame behind for the next append to follow;
            // if that fails too, the tail is unknown: stop here.
            let cut = faults::set_len(&self.file, path, self.bytes)
                .and_then(|()| self.file.seek(SeekFrom::Start(self.bytes)).map(|_| ()));
            if let Err(cut) = cut {
                break_off(
                    &mut self.broken,
                    path,
                    format!("a failed write ({e}) could not be cut off the log ({cut})"),
                );
            }
            return Err(io(e));
        }
        if sync && let Err(e) = faults::sync_data(&self.file, path) {
            // Never retried as if it had worked: the frame is cut off (it
            // was not acknowledged) and the log refuses writes until a reopen
            // reads back what is really on disk.
            let _ = faults::set_len(&self.file, path, self.bytes);
            let _ = self.file.seek(SeekFrom::Start(self.bytes));
            break_off(
                &mut self.broken,
                path,
                format!("an fsync of the log failed ({e})"),
            );
            return Err(io(e));
        }
        self.bytes += (header.len() + payload.len()) as u64;
        self.unsynced = !sync;
        Ok(())
    }

    /// Why the log refuses writes until the store is reopened, if it does.
    pub(crate) fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    fn usable(&self) -> Result<()> {
        match &self.broken {
            Some(reason) => Err(IndexerError::ReadOnly {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Moves the log's file to `sealed` and continues in a fresh, empty file
    /// at the old path. Everything appended so far is then in `sealed`.
    pub(crate) fn seal(&mut self, sealed: &Path) -> Result<()> {
        // Unsynced frames go with the file: make them durable first, or a
        // power loss could drop them from the sealed log while later,
        // synced frames in the new log survive.
        self.usable()?;
        if self.unsynced {
            if let Err(e) = faults::sync_data(&self.file, &self.path) {
                break_off(
                    &mut self.broken,
                    &self.path,
                    format!("an fsync of the log failed ({e})"),
                );
                return Err(IndexerError::io(&self.path)(e));
            }
            self.unsynced = false;
        }
        faults::rename(&self.path, sealed).map_err(IndexerError::io(sealed))?;
        // From here the old file is the sealed log: a failure before the
        // fresh log is durable leaves appends nowhere safe to go.
        let fresh = faults::create(&self.path)
            .map_err(IndexerError::io(&self.path))
            // The rename and the new file are durable before anything is
            // acknowledged into the new file.
            .and_then(|file| sync_dir(&self.path).map(|()| file));
        match fresh {
            Ok(file) => {
                self.file = file;
                self.bytes = 0;
                Ok(())
            }
            Err(e) => {
                break_off(
                    &mut self.broken,
                    &self.path,
                    format!("sealing the log for a flush stopped half-way ({e})"),
                );
                Err(e)
            }
        }
    }

    /// Empties the log once everything in it is in the tables.
    pub(crate) fn reset(&mut self) -> Result<()> {
        self.usable()?;
        let path = self.path.as_path();
        let emptied = faults::set_len(&self.file, path, 0)
            .and_then(|()| self.file.seek(SeekFrom::Start(0)).map(|_| ()))
            .and_then(|()| faults::sync_data(&self.file, path));
        if let Err(e) = emptied {
            // Its records are in the tables (a reopen skips them), but where
            // the next frame would land is unknown.
            break_off(
                &mut self.broken,
                path,
                format!("emptying the log after a flush failed ({e})"),
            );
            return Err(IndexerError::io(path)(e));
        }
        self.bytes = 0;
        self.unsynced = false;
        Ok(())
    }

    /// Bytes currently in the log.
    pub(crate) fn len(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Wal {
    /// A closing store makes its unsynced frames durable (best effort: a
    /// failure here is logged; those frames were never promised durable).
    fn drop(&mut self) {
        if self.unsynced
            && self.broken.is_none()
            && let Err(e) = faults::sync_data(&self.file, &self.path)
        {
            tracing::warn!(path = %self.path.display(), error = %e, "fsync of the log at close failed");
        }
    }
}

/// Marks a log broken (see [`Wal::broken`]).
fn break_off(broken: &mut Option<String>, path: &Path, reason: String) {
    tracing::error!(path = %path.display(), %reason, "the log refuses writes until the store is reopened");
    broken.get_or_insert(format!("{reason}; reopen the store"));
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
    match faults::remove_file(path) {
        Ok(()) => sync_dir(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(IndexerError::io(path)(e)),
    }
}

/// fsyncs the directory holding `path`, making a rename or removal in it durable.
fn sync_dir(path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    faults::sync_dir(dir).map_err(IndexerError::io(dir))
}

/// One batch as a frame: its header (length and checksum) and payload.
pub(crate) fn frame(bare: &[Record], vectors: &[Option<Vec<f32>>]) -> Result<([u8; 8], Vec<u8>)> {
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
    Ok((header, payload))
}

/// Decodes frames until the first damaged one; returns the batches and the
/// length of the valid prefix.
pub(crate) fn decode(raw: &[u8]) -> (Vec<Vec<Record>>, usize) {
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
    use std::io::Write;

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
            wal.append(&[event(1), event(2)], &[None, None], true)
                .unwrap();
            wal.append(&[event(3)], &[None], true).unwrap();
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
        wal.append(&[event(4)], &[None], true).unwrap();
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
        wal.append(&[event(1), event(2)], &[None, None], true)
            .unwrap();
        wal.seal(&sealed).unwrap();
        assert_eq!(wal.len(), 0);
        wal.append(&[event(3)], &[None], true).unwrap();
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

    /// Writes `frames` through the log and returns its bytes and the
    /// offset at which each frame ends.
    fn written(dir: &Path, frames: &[Vec<Record>]) -> (Vec<u8>, Vec<usize>) {
        let path = dir.join("whole.log");
        let (mut wal, _) = Wal::open(&path).unwrap();
        let mut ends = Vec::new();
        for frame in frames {
            let mut bare = frame.clone();
            let vectors = log_payload::take_vectors(&mut bare);
            wal.append(&bare, &vectors, true).unwrap();
            ends.push(wal.len() as usize);
        }
        (std::fs::read(&path).unwrap(), ends)
    }

    /// A crash can leave any prefix of the last frames on disk (a torn
    /// write), and a bad sector any byte changed. At every offset of the
    /// last two frames: a reopen replays exactly the frames that were
    /// whole before it, cuts the file at the last of them, and the next
    /// append follows on cleanly; a sealed log replays the same frames.
    #[test]
    fn every_cut_and_every_changed_byte_of_the_last_frames_keeps_exactly_the_whole_frames() {
        use crate::log_payload::tests::mixed;
        let dir = tempfile::tempdir().unwrap();
        let frames = vec![mixed(3), mixed(6), mixed(4), mixed(5)];
        let (raw, ends) = written(dir.path(), &frames);
        let whole_before = |at: usize| ends.iter().filter(|end| **end <= at).count();
        let path = dir.path().join("wal.log");
        let next = vec![event(99)];
        let first_checked = ends[1];
        for cut in first_checked..=raw.len() {
            std::fs::write(&path, &raw[..cut]).unwrap();
            let kept = whole_before(cut);
            assert_eq!(
                read_sealed(&path).unwrap(),
                frames[..kept],
                "sealed, cut at {cut}"
            );
            let (mut wal, batches) = Wal::open(&path).unwrap();
            assert_eq!(batches, frames[..kept], "cut at {cut}");
            assert_eq!(wal.len() as usize, ends[kept - 1], "cut at {cut}");
            assert_eq!(std::fs::metadata(&path).unwrap().len(), wal.len());
            wal.append(&next, &[None], true).unwrap();
            drop(wal);
            let (_, batches) = Wal::open(&path).unwrap();
            assert_eq!(batches.len(), kept + 1, "append after a cut at {cut}");
            assert_eq!(batches[kept], next);
        }
        for at in first_checked..raw.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut damaged = raw.clone();
                damaged[at] ^= mask;
                std::fs::write(&path, &damaged).unwrap();
                let kept = whole_before(at);
                let (_, batches) = Wal::open(&path).unwrap();
                assert_eq!(batches, frames[..kept], "byte {at} ^ {mask:#x}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 64,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]
        /// Any frame sizes, any cut and any garbage after it: replay keeps
        /// the frames that end at or before the cut.
        #[test]
        fn a_cut_log_with_garbage_after_it_keeps_the_whole_frames(
            sizes in proptest::collection::vec(0u64..12, 1..6),
            cut_share in 0.0f64..=1.0,
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        ) {
            use crate::log_payload::tests::mixed;
            let dir = tempfile::tempdir().unwrap();
            let frames: Vec<_> = sizes.iter().map(|n| mixed(*n)).collect();
            let (raw, ends) = written(dir.path(), &frames);
            let cut = (raw.len() as f64 * cut_share) as usize;
            let mut torn = raw[..cut].to_vec();
            torn.extend_from_slice(&garbage);
            let path = dir.path().join("wal.log");
            std::fs::write(&path, &torn).unwrap();
            let (_, batches) = Wal::open(&path).unwrap();
            let kept = ends.iter().filter(|end| **end <= cut).count();
            // Garbage can only ever add a frame if it happens to be a whole
            // valid frame with a matching CRC; none of these bytes are.
            proptest::prop_assert_eq!(&batches[..], &frames[..kept]);
        }
    }

    /// An unsynced frame is written (a killed process keeps it), replays
    /// in order with synced ones, and goes with the file when it is sealed.
    #[test]
    fn unsynced_frames_replay_in_order_and_travel_with_a_seal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let sealed = dir.path().join(SEALED);
        let (mut wal, _) = Wal::open(&path).unwrap();
        wal.append(&[event(1)], &[None], false).unwrap();
        assert!(wal.unsynced);
        wal.append(&[event(2)], &[None], true).unwrap();
        assert!(!wal.unsynced, "a synced frame syncs the ones before it");
        wal.append(&[event(3)], &[None], false).unwrap();
        wal.seal(&sealed).unwrap();
        assert!(!wal.unsynced);
        wal.append(&[event(4)], &[None], false).unwrap();
        let seqs = |batches: Vec<Vec<Record>>| {
            batches.concat().iter().map(Record::seq).collect::<Vec<_>>()
        };
        assert_eq!(seqs(read_sealed(&sealed).unwrap()), [1, 2, 3]);
        drop(wal);
        assert_eq!(seqs(Wal::open(&path).unwrap().1), [4]);
    }

    #[test]
    fn a_flipped_byte_ends_replay_at_that_frame() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        {
            let (mut wal, _) = Wal::open(&path).unwrap();
            wal.append(&[event(1)], &[None], true).unwrap();
            wal.append(&[event(2)], &[None], true).unwrap();
        }
        let mut raw = std::fs::read(&path).unwrap();
        let last = raw.len() - 2;
        raw[last] ^= 0xff;
        std::fs::write(&path, &raw).unwrap();
        let (_, batches) = Wal::open(&path).unwrap();
        assert_eq!(batches.len(), 1);
    }
}
