//! Full vector blocks in files of their own, mapped back into the set
//! (`blocks.rs`), so a large tenant's `f32` rows live in the page cache
//! instead of the heap: the kernel keeps the rows scans read resident and
//! can take the rest back, where heap rows were resident for good.
//!
//! The files are derived, like the saved partitions: one per full block,
//! `DIR/NNNNNN.f32`, a header of [`HEADER`] bytes (magic, width, rows,
//! key width, zeros), then the rows as little-endian `f32`, then each
//! row's [`RowKey`] (which memory's vector it is), then each row's sign
//! code (`crate::codes`) as little-endian `u64`s. An open reads the keys
//! and codes alone to adopt the rows, without reading the vectors from the
//! tables or from the file. A file is used only when it holds exactly the
//! rows, keys and codes of the block it stands for (compared byte for
//! byte, read without mapping them); otherwise it is written again
//! ([`crate::write_derived`]), never changed in place.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{Mmap, MmapOptions};

use crate::derived_file::write_derived;

const MAGIC: &[u8; 8] = b"RCVBLK02";

/// The bytes of a [`RowKey`].
pub const ROW_KEY_BYTES: usize = 24;

/// What a vector row is, as its set's owner names it (the engine: the
/// memory's sequence number and id), stored beside the row in its block
/// file. Rows are adopted from a file by key ([`crate::VectorSet::adopt_next`]).
pub type RowKey = [u8; ROW_KEY_BYTES];

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

    /// Asks the kernel to read the block into the page cache in the
    /// background (`MADV_WILLNEED`), without mapping it into the process:
    /// an open that adopted the block read none of its rows, and the scans
    /// after it would otherwise read them from disk one page at a time. A
    /// failure is logged and changes nothing but the page cache.
    pub(crate) fn prefetch(&self) {
        #[cfg(unix)]
        if let Err(e) = self.map.advise(memmap2::Advice::WillNeed) {
            tracing::debug!(error = %e, "mapped vector block not read ahead");
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
    header.extend_from_slice(&(ROW_KEY_BYTES as u32).to_le_bytes());
    header.resize(HEADER, 0);
    header
}

/// The sign-code words of a row `dim` wide.
fn code_words(dim: usize) -> usize {
    dim.div_ceil(64)
}

/// `rows` (`dim` wide), their `keys` (one [`RowKey`] per row, in order)
/// and their sign `codes` as block `index`'s file in `dir`, mapped: the
/// file there when it holds exactly these, else a new one. Returns the
/// mapping and whether the file was written.
pub(crate) fn map_block(
    dir: &Path,
    index: usize,
    dim: usize,
    rows: &[f32],
    keys: &[u8],
    codes: &[u64],
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
    let count = rows.len() / dim.max(1);
    if keys.len() != count * ROW_KEY_BYTES || codes.len() != count * code_words(dim) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a vector block needs one key and one code per row",
        ));
    }
    let codes: &[u8] = bytemuck::cast_slice(codes);
    let written = match holds(&path, &[&header, bytes, keys, codes]) {
        Ok(true) => false,
        Ok(false) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => return Err(e),
    };
    if written {
        write_derived(&path, &[&header, bytes, keys, codes])?;
    }
    let file = File::open(&path)?;
    let map = map_rows(&file, rows.len())?;
    Ok((Arc::new(MappedRows { map, file }), written))
}

/// A block's file as an open adopts it ([`open_block`]): its rows mapped
/// (and not read), its rows' keys and sign codes read.
#[derive(Debug)]
pub(crate) struct BlockFile {
    pub(crate) mapped: Arc<MappedRows>,
    pub(crate) keys: Vec<u8>,
    pub(crate) codes: Vec<u64>,
}

/// Maps the `values` `f32`s after the header of a block's `file`,
/// advised for scans that read a few rows here and there: no read-ahead of
/// neighbours the query does not need, and no huge pages, which map 2 MiB
/// of the file into the process for one 1.5 KiB row.
fn map_rows(file: &File, values: usize) -> io::Result<Mmap> {
    // SAFETY: the mapped file is only ever written whole under a temporary
    // name and renamed into place, by the process holding the store's
    // lock; nothing writes or truncates it in place. A rewrite or an
    // erasure replaces or unlinks the name, which leaves a live mapping's
    // inode as it was. (Another program truncating it under us would end
    // the process, as it would for tantivy's mapped index files.)
    let map = unsafe {
        MmapOptions::new()
            .offset(HEADER as u64)
            .len(values * size_of::<f32>())
            .map(file)?
    };
    if bytemuck::try_cast_slice::<u8, f32>(&map[..]).map(<[f32]>::len) != Ok(values) {
        return Err(io::Error::other(
            "vector block mapping is misaligned or short",
        ));
    }
    #[cfg(unix)]
    map.advise(memmap2::Advice::Random)?;
    #[cfg(target_os = "linux")]
    map.advise(memmap2::Advice::NoHugePage)?;
    Ok(map)
}

/// Block `index`'s file in `dir`, opened past its header, when its size
/// and header say it holds `rows` rows `dim` wide with their keys and
/// codes (`None` when there is no such file).
fn block_file(dir: &Path, index: usize, dim: usize, rows: usize) -> io::Result<Option<File>> {
    if cfg!(target_endian = "big") || rows * dim == 0 {
        return Ok(None);
    }
    let mut file = match File::open(block_path(dir, index)) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let size = HEADER
        + rows * (dim * size_of::<f32>() + ROW_KEY_BYTES + code_words(dim) * size_of::<u64>());
    if file.metadata()?.len() != size as u64 {
        return Ok(None);
    }
    let mut found = vec![0u8; HEADER];
    file.read_exact(&mut found)?;
    Ok((found == header(dim, rows)).then_some(file))
}

/// Whether block `index`'s file in `dir` holds `rows` rows `dim` wide in
/// this format (header and size only; nothing else is read).
pub(crate) fn is_block_file(dir: &Path, index: usize, dim: usize, rows: usize) -> bool {
    matches!(block_file(dir, index, dim, rows), Ok(Some(_)))
}

/// Block `index`'s file in `dir`, when its header says it holds `rows`
/// rows `dim` wide (`None` when there is no such file), for an open that
/// adopts the block's rows by key. Reads the keys and codes only.
pub(crate) fn open_block(
    dir: &Path,
    index: usize,
    dim: usize,
    rows: usize,
) -> io::Result<Option<BlockFile>> {
    let Some(mut file) = block_file(dir, index, dim, rows)? else {
        return Ok(None);
    };
    // Past the rows, which are mapped and not read.
    file.seek(SeekFrom::Current((rows * dim * size_of::<f32>()) as i64))?;
    let mut keys = vec![0u8; rows * ROW_KEY_BYTES];
    let mut codes = vec![0u64; rows * code_words(dim)];
    file.read_exact(&mut keys)?;
    file.read_exact(bytemuck::cast_slice_mut(&mut codes))?;
    let map = map_rows(&file, rows * dim)?;
    Ok(Some(BlockFile {
        mapped: Arc::new(MappedRows { map, file }),
        keys,
        codes,
    }))
}

/// Whether the file at `path` is exactly `parts`, one after the other.
fn holds(path: &Path, parts: &[&[u8]]) -> io::Result<bool> {
    let mut file = File::open(path)?;
    if file.metadata()?.len() != parts.iter().map(|p| p.len() as u64).sum::<u64>() {
        return Ok(false);
    }
    let mut buffer = vec![0u8; COMPARE_CHUNK];
    for expected in parts.iter().flat_map(|p| p.chunks(COMPARE_CHUNK)) {
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
        let keys = vec![7u8; 1024 * ROW_KEY_BYTES];
        let codes = vec![3u64; 1024 * 4];
        let (mapped, _) = map_block(dir.path(), 0, 256, &rows, &keys, &codes).unwrap();
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
        let keys: Vec<u8> = (0..8 * ROW_KEY_BYTES).map(|x| x as u8).collect();
        let codes: Vec<u64> = (0..8).collect();
        let (mapped, written) = map_block(dir.path(), 3, 8, &rows, &keys, &codes).unwrap();
        assert!(written);
        assert_eq!(mapped.rows(), &rows[..]);
        let mut out = [0f32; 8];
        assert_eq!(mapped.read_into(16, &mut out), Some(&rows[16..24]));
        let path = block_path(dir.path(), 3);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            (HEADER + 4 * rows.len() + keys.len() + 8 * codes.len()) as u64
        );

        let (again, written) = map_block(dir.path(), 3, 8, &rows, &keys, &codes).unwrap();
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
        let (fixed, written) = map_block(dir.path(), 3, 8, &rows, &keys, &codes).unwrap();
        assert!(written);
        assert_eq!(fixed.rows(), &rows[..]);
        // The mapping made before the rewrite still reads its own rows.
        assert_eq!(mapped.rows(), &rows[..]);

        // Other rows at the same index replace the file.
        let other: Vec<f32> = rows.iter().map(|x| -x).collect();
        let (replaced, written) = map_block(dir.path(), 3, 8, &other, &keys, &codes).unwrap();
        assert!(written);
        assert_eq!(replaced.rows(), &other[..]);
        assert_eq!(fixed.rows(), &rows[..]);

        // Other keys or codes for the same rows replace it too, and an open
        // reads the keys and codes back, from a file of the rows it asks
        // for only.
        let other_keys: Vec<u8> = keys.iter().map(|k| k ^ 1).collect();
        let (_, written) = map_block(dir.path(), 3, 8, &other, &other_keys, &codes).unwrap();
        assert!(written);
        let other_codes: Vec<u64> = codes.iter().map(|c| c + 1).collect();
        let (_, written) = map_block(dir.path(), 3, 8, &other, &other_keys, &other_codes).unwrap();
        assert!(written);
        let opened = open_block(dir.path(), 3, 8, 8).unwrap().unwrap();
        assert_eq!(opened.mapped.rows(), &other[..]);
        assert_eq!((opened.keys, opened.codes), (other_keys, other_codes));
        assert!(open_block(dir.path(), 3, 8, 9).unwrap().is_none());
        assert!(open_block(dir.path(), 3, 4, 8).unwrap().is_none());
        assert!(open_block(dir.path(), 4, 8, 8).unwrap().is_none());
        assert!(map_block(dir.path(), 3, 8, &rows, &keys[1..], &codes).is_err());
        assert!(map_block(dir.path(), 3, 8, &rows, &keys, &codes[1..]).is_err());
    }
}
