//! Full vector blocks in files of their own, mapped back into the set
//! (`blocks.rs`), so a large tenant's `f32` rows live in the page cache
//! instead of the heap: the kernel keeps the rows scans read resident and
//! can take the rest back, where heap rows were resident for good.
//!
//! The files are derived, like the saved partitions: one per full block,
//! `DIR/NNNNNN.f32`, a header of [`HEADER`] bytes (magic, width, rows,
//! zeros), then the rows as little-endian `f32`. A file is used only when
//! it holds exactly the rows of the block it stands for (compared byte for
//! byte, read without mapping them); otherwise it is written again
//! ([`crate::write_derived`]), never changed in place.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{Mmap, MmapOptions};

use crate::derived_file::write_derived;

const MAGIC: &[u8; 8] = b"RCVBLK01";

/// The header's size: a page, so the rows map page-aligned.
const HEADER: usize = 4096;

/// How much of a file a comparison reads at a time.
const COMPARE_CHUNK: usize = 1 << 20;

/// One block's rows, mapped from its file (and the file, for reads that
/// should not map).
#[derive(Debug)]
pub(crate) struct MappedRows {
    map: Mmap,
    file: File,
}

impl MappedRows {
    /// The rows, row-major.
    pub(crate) fn rows(&self) -> &[f32] {
        // The map starts on a page and holds whole f32s (checked when it
        // was made), so the cast cannot fail.
        bytemuck::try_cast_slice(&self.map[..]).unwrap_or(&[])
    }

    /// The `out.len()` values from value `at` on, read from the file into
    /// `out` rather than through the mapping. A scan that reads a thousand
    /// rows scattered over the block would fault each one's page in, and
    /// the kernel maps the pages around a faulting one too, so after a few
    /// hundred queries every page of the block is in the process's
    /// resident set; read, the rows stay in the page cache alone. Falls
    /// back to the mapping if the read fails.
    pub(crate) fn read_into<'a>(&'a self, at: usize, out: &'a mut [f32]) -> Option<&'a [f32]> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            let offset = (HEADER + at * size_of::<f32>()) as u64;
            if self
                .file
                .read_exact_at(bytemuck::cast_slice_mut(out), offset)
                .is_ok()
            {
                return Some(out);
            }
        }
        self.rows().get(at..at + out.len())
    }
}

impl MappedRows {
    /// Drops the block's pages from the process's resident set after a
    /// pass that read every row through the mapping (training the
    /// partitions): they stay in the page cache, and the scans' reads fault
    /// back only what they touch. A failure is logged and changes nothing
    /// but the resident set.
    pub(crate) fn release_pages(&self) {
        #[cfg(unix)]
        {
            // SAFETY: the mapping is read-only and backed by a file nothing
            // writes in place (see `map_block`). `MADV_DONTNEED` on such a
            // mapping only unmaps its pages from this process; the next read
            // of a row faults the same bytes back in from the file.
            let released = unsafe {
                self.map
                    .unchecked_advise(memmap2::UncheckedAdvice::DontNeed)
            };
            if let Err(e) = released {
                tracing::debug!(error = %e, "mapped vector pages stay resident");
            }
        }
    }
}

/// The file of block `index` in `dir`.
fn block_path(dir: &Path, index: usize) -> PathBuf {
    dir.join(format!("{index:06}.f32"))
}

fn header(dim: usize, rows: usize) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&(dim as u32).to_le_bytes());
    header.extend_from_slice(&(rows as u32).to_le_bytes());
    header.resize(HEADER, 0);
    header
}

/// `rows` (`dim` wide) as block `index`'s file in `dir`, mapped: the file
/// there when it holds exactly these rows, else a new one. Returns the
/// mapping and whether the file was written.
pub(crate) fn map_block(
    dir: &Path,
    index: usize,
    dim: usize,
    rows: &[f32],
) -> io::Result<(Arc<MappedRows>, bool)> {
    if cfg!(target_endian = "big") {
        // The files are little-endian; such a machine keeps rows in memory.
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "vector block files are little-endian",
        ));
    }
    let path = block_path(dir, index);
    let header = header(dim, rows.len() / dim.max(1));
    let bytes: &[u8] = bytemuck::cast_slice(rows);
    let written = match holds(&path, &header, bytes) {
        Ok(true) => false,
        Ok(false) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => return Err(e),
    };
    if written {
        write_derived(&path, &[&header, bytes])?;
    }
    let file = File::open(&path)?;
    // SAFETY: the mapped file is only ever written whole under a temporary
    // name and renamed into place, by the process holding the store's
    // lock; nothing writes or truncates it in place. A rewrite or an
    // erasure replaces or unlinks the name, which leaves a live mapping's
    // inode as it was. (Another program truncating it under us would end
    // the process, as it would for tantivy's mapped index files.)
    let map = unsafe {
        MmapOptions::new()
            .offset(HEADER as u64)
            .len(bytes.len())
            .map(&file)?
    };
    if bytemuck::try_cast_slice::<u8, f32>(&map[..]).map(<[f32]>::len) != Ok(rows.len()) {
        return Err(io::Error::other(
            "vector block mapping is misaligned or short",
        ));
    }
    // Scans read a few rows here and there: no read-ahead of neighbours
    // the query does not need, and no huge pages, which map 2 MiB of the
    // file into the process for one 1.5 KiB row.
    #[cfg(unix)]
    map.advise(memmap2::Advice::Random)?;
    #[cfg(target_os = "linux")]
    map.advise(memmap2::Advice::NoHugePage)?;
    Ok((Arc::new(MappedRows { map, file }), written))
}

/// Whether the file at `path` is exactly `header` then `bytes`.
fn holds(path: &Path, header: &[u8], bytes: &[u8]) -> io::Result<bool> {
    let mut file = File::open(path)?;
    if file.metadata()?.len() != (header.len() + bytes.len()) as u64 {
        return Ok(false);
    }
    let mut buffer = vec![0u8; COMPARE_CHUNK];
    for expected in std::iter::once(header).chain(bytes.chunks(COMPARE_CHUNK)) {
        let read = &mut buffer[..expected.len()];
        file.read_exact(read)?;
        if read != expected {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The resident bytes of this process's mappings of `path`, from
    /// `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    fn resident_kib(path: &Path) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let name = path.to_str().unwrap();
        let mut inside = false;
        let mut kib = 0;
        for line in smaps.lines() {
            // A mapping's header line holds its address range first.
            if line
                .split_whitespace()
                .next()
                .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
            {
                inside = line.ends_with(name);
            } else if inside && let Some(rest) = line.strip_prefix("Rss:") {
                kib += rest
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap();
            }
        }
        kib
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn released_pages_leave_the_resident_set_and_read_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<f32> = (0..256 * 1024).map(|x| x as f32).collect();
        let (mapped, _) = map_block(dir.path(), 0, 256, &rows).unwrap();
        let path = block_path(dir.path(), 0);
        let sum: f64 = mapped.rows().iter().map(|x| f64::from(*x)).sum();
        assert!(resident_kib(&path) >= 1024, "a full read maps the rows in");
        mapped.release_pages();
        assert_eq!(resident_kib(&path), 0);
        assert_eq!(
            mapped.rows().iter().map(|x| f64::from(*x)).sum::<f64>(),
            sum
        );
        assert_eq!(mapped.rows(), &rows[..]);
    }

    #[test]
    fn a_block_is_written_once_then_found_and_a_changed_file_is_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<f32> = (0..64).map(|x| x as f32 * 0.5).collect();
        let (mapped, written) = map_block(dir.path(), 3, 8, &rows).unwrap();
        assert!(written);
        assert_eq!(mapped.rows(), &rows[..]);
        let mut out = [0f32; 8];
        assert_eq!(mapped.read_into(16, &mut out), Some(&rows[16..24]));
        let path = block_path(dir.path(), 3);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            (HEADER + 4 * rows.len()) as u64
        );

        let (again, written) = map_block(dir.path(), 3, 8, &rows).unwrap();
        assert!(!written, "a file holding the rows is used as it is");
        assert_eq!(again.rows(), &rows[..]);

        // One flipped byte in the rows: the file no longer holds them.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER + 5] ^= 0x40;
        // Written aside and renamed, as the engine does: the live mapping
        // keeps the old file.
        let damaged = dir.path().join("damaged");
        std::fs::write(&damaged, &bytes).unwrap();
        std::fs::rename(&damaged, &path).unwrap();
        let (fixed, written) = map_block(dir.path(), 3, 8, &rows).unwrap();
        assert!(written);
        assert_eq!(fixed.rows(), &rows[..]);
        // The mapping made before the rewrite still reads its own rows.
        assert_eq!(mapped.rows(), &rows[..]);

        // Other rows at the same index replace the file.
        let other: Vec<f32> = rows.iter().map(|x| -x).collect();
        let (replaced, written) = map_block(dir.path(), 3, 8, &other).unwrap();
        assert!(written);
        assert_eq!(replaced.rows(), &other[..]);
        assert_eq!(fixed.rows(), &rows[..]);
    }
}
