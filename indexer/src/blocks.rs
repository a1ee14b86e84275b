//! The vectors of a [`VectorSet`](crate::VectorSet): row-major, in blocks
//! of [`BLOCK_ROWS`] rows that never move once allocated.
//!
//! One contiguous matrix doubles its allocation as a tenant grows and
//! copies every row into the new one, so a million 384-wide rows (1.5 GB)
//! had written about 3.5 GB of fresh memory by the end of an import. The
//! kernel zeroes each fresh page at its first touch, and on this VM that
//! took 6.3 CPU-s of a 1M-memory import, all of it in the write path's
//! serial apply (`perf`, `clear_page_erms` under `VectorSet::push_placed`).
//! In blocks, each row is written once, into memory touched once. Measured
//! with `recall-bench scale --sizes 1000000` against the contiguous matrix,
//! in alternating runs: peak RSS 7.6 GiB against 9.0–9.2 GiB in every run,
//! the apply step 13.3–13.5 s against 13.9–15.0 s. The import rate moved
//! within this VM's noise (24.1k and 22.6k against 24.4k and 25.6k
//! memories/s; a stand-in that reserved the contiguous matrix up front won
//! four of five pairs, 6 % on average).
//!
//! A set's first block grows by doubling, so a small tenant holds no more
//! than twice its rows; every later block is allocated whole. A full block
//! can be handed to a file and mapped back (`mapped.rs`), which leaves the
//! set's memory with its last, growing block.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::mapped::{BlockFile, MappedRows, ROW_KEY_BYTES, open_block};

/// Rows per rayon task of a scan.
pub(crate) const CHUNK_ROWS: usize = 2048;

/// Rows per block: 24 MiB of 384-wide vectors. A multiple of the scan's
/// [`CHUNK_ROWS`], so scan chunks never straddle two blocks.
pub(crate) const BLOCK_ROWS: usize = 8 * CHUNK_ROWS;

/// One block's rows: in memory, or (a full block) mapped from its derived
/// file ([`crate::mapped`]), or (while an open adopts files) the first
/// `matched` rows of a file whose rows have been pushed or adopted so far
/// (`keys` and `codes` are its rows' keys and sign codes).
#[derive(Debug, Clone)]
enum Block {
    Heap(Vec<f32>),
    Mapped(Arc<MappedRows>),
    Adopting {
        mapped: Arc<MappedRows>,
        keys: Vec<u8>,
        codes: Vec<u64>,
        matched: usize,
    },
}

impl Block {
    fn rows(&self) -> &[f32] {
        match self {
            Block::Heap(rows) => rows,
            Block::Mapped(mapped) => mapped.rows(),
            Block::Adopting {
                mapped, matched, ..
            } => {
                let rows = mapped.rows();
                let dim = rows.len() / BLOCK_ROWS;
                rows.get(..matched * dim).unwrap_or(rows)
            }
        }
    }

    /// Appends `vector` (`dim` wide) to a block that is not full. Returns
    /// whether that made an adopted file's block whole (now mapped).
    fn push(&mut self, vector: &[f32], dim: usize) {
        let block_len = BLOCK_ROWS * dim;
        match self {
            Block::Heap(rows) => {
                if rows.len() == rows.capacity() {
                    let wanted = (2 * rows.len()).clamp(dim, block_len);
                    rows.reserve_exact(wanted.saturating_sub(rows.len()));
                }
                rows.extend_from_slice(vector);
            }
            // A row pushed into a file's block being adopted (its file did
            // not name it): the block moves to memory, with the rows
            // adopted before it, and its file is written again when the
            // block is mapped. (A mapped block is full: never pushed to.)
            Block::Adopting { .. } | Block::Mapped(_) => {
                let mut heap = self.to_heap(dim);
                heap.extend_from_slice(vector);
                *self = Block::Heap(heap);
            }
        }
    }

    /// Takes the next row of an adopted file's block. Returns whether that
    /// made the block whole (now mapped); false for any other block.
    fn adopt_row(&mut self) -> bool {
        let Block::Adopting {
            mapped, matched, ..
        } = self
        else {
            return false;
        };
        *matched += 1;
        if *matched < BLOCK_ROWS {
            return false;
        }
        // None of its rows was read: the kernel reads them ahead.
        mapped.prefetch();
        *self = Block::Mapped(mapped.clone());
        true
    }

    /// The block's rows in memory, for rows that differ from its file's:
    /// the file held the ones before them.
    fn to_heap(&self, dim: usize) -> Vec<f32> {
        let mut heap = Vec::with_capacity(BLOCK_ROWS * dim);
        heap.extend_from_slice(self.rows());
        heap
    }
}

/// Tells one [`Blocks`] from another, so rows mapped for one set are
/// never swapped into another that happens to have a block at the same
/// index. Full blocks never change, so a set and a block index name a
/// block's rows for good; a clone shares them.
static NEXT_SET: AtomicU64 = AtomicU64::new(0);

/// Row-major `f32` rows of one width, in blocks of [`BLOCK_ROWS`]. Full
/// blocks may be mapped from files instead of held in memory
/// ([`Blocks::map_block`]); the rows read the same either way.
#[derive(Debug, Clone)]
pub(crate) struct Blocks {
    dim: usize,
    rows: usize,
    blocks: Vec<Block>,
    mapped: usize,
    set: u64,
    /// While an open adopts block files ([`Blocks::adopt_files_from`]):
    /// their directory, how many blocks were adopted, and the index of a
    /// block found to have no file (not looked for again).
    adopt_from: Option<PathBuf>,
    adopted: usize,
    no_file: Option<usize>,
}

impl Blocks {
    /// No rows, `dim` wide.
    pub(crate) fn new(dim: usize) -> Blocks {
        Blocks {
            dim,
            rows: 0,
            blocks: Vec::new(),
            mapped: 0,
            set: NEXT_SET.fetch_add(1, Ordering::Relaxed),
            adopt_from: None,
            adopted: 0,
            no_file: None,
        }
    }

    /// From now on, a block whose file in `dir` exists (as
    /// `VectorSet::map_to_files` wrote it) is not held in memory while its
    /// rows come again: [`Blocks::adopt_next`] takes the file's next row
    /// without reading it, and a block that got every row this way is
    /// adopted mapped. A row pushed instead moves the block to memory,
    /// with the rows adopted before it, and the file is written again when
    /// the block is mapped. An open thus reads no vector of a block whose
    /// file names every row.
    pub(crate) fn adopt_files_from(&mut self, dir: PathBuf) {
        self.adopt_from = Some(dir);
    }

    /// Ends [`Blocks::adopt_files_from`]: a block still being compared
    /// (its file holds more rows than were pushed) moves to memory.
    /// Returns how many blocks were adopted.
    pub(crate) fn stop_adopting(&mut self) -> usize {
        self.adopt_from = None;
        self.no_file = None;
        match self.blocks.last() {
            Some(last @ Block::Adopting { .. }) if last.rows().is_empty() => {
                self.blocks.pop();
            }
            Some(last @ Block::Adopting { .. }) => {
                let heap = Block::Heap(last.to_heap(self.dim));
                if let Some(last) = self.blocks.last_mut() {
                    *last = heap;
                }
            }
            _ => {}
        }
        std::mem::take(&mut self.adopted)
    }

    /// The file of the block about to start, if one is being adopted and
    /// it exists; an unreadable one is left to be written again.
    fn block_to_adopt(&mut self) -> Option<Block> {
        let index = self.blocks.len();
        let dir = self.adopt_from.as_deref()?;
        if self.no_file == Some(index) {
            return None;
        }
        let found = match open_block(dir, index, self.dim, BLOCK_ROWS) {
            Ok(found) => found,
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e, "vector block file not adopted");
                None
            }
        };
        match found {
            Some(BlockFile {
                mapped,
                keys,
                codes,
            }) => Some(Block::Adopting {
                mapped,
                keys,
                codes,
                matched: 0,
            }),
            None => {
                self.no_file = Some(index);
                None
            }
        }
    }

    /// The key of the file row [`Blocks::adopt_next`] would take, if the
    /// next row can come from an adopted file (at a block's start, this
    /// looks for the block's file).
    pub(crate) fn next_key(&mut self) -> Option<&[u8]> {
        let block_len = BLOCK_ROWS * self.dim;
        if self.adopt_from.is_some()
            && self
                .blocks
                .last()
                .is_none_or(|b| b.rows().len() >= block_len)
        {
            let block = self.block_to_adopt()?;
            self.blocks.push(block);
        }
        match self.blocks.last()? {
            Block::Adopting { keys, matched, .. } => {
                keys.get(matched * ROW_KEY_BYTES..(matched + 1) * ROW_KEY_BYTES)
            }
            _ => None,
        }
    }

    /// Appends the next row of the file being adopted, as it is there
    /// (the caller checked its key with [`Blocks::next_key`]), and its
    /// sign code, as the file holds it, to `codes`. Returns false, and
    /// appends nothing, when no file row is next.
    pub(crate) fn adopt_next(&mut self, codes: &mut Vec<u64>) -> bool {
        let words = self.dim.div_ceil(64);
        let Some(last) = self.blocks.last_mut() else {
            return false;
        };
        let Block::Adopting {
            codes: file_codes,
            matched,
            ..
        } = last
        else {
            return false;
        };
        let Some(code) = file_codes.get(*matched * words..(*matched + 1) * words) else {
            return false;
        };
        codes.extend_from_slice(code);
        if last.adopt_row() {
            self.mapped += 1;
            self.adopted += 1;
        }
        self.rows += 1;
        true
    }

    /// Appends `vector` (the caller checks that it is `dim` wide).
    pub(crate) fn push(&mut self, vector: &[f32]) {
        let block_len = BLOCK_ROWS * self.dim;
        match self.blocks.last_mut() {
            Some(last) if last.rows().len() < block_len => last.push(vector, self.dim),
            _ => {
                let mut block = match self.blocks.is_empty() {
                    true => Vec::with_capacity(self.dim),
                    false => Vec::with_capacity(block_len),
                };
                block.extend_from_slice(vector);
                self.blocks.push(Block::Heap(block));
            }
        }
        self.rows += 1;
    }

    /// The vector at `row`.
    pub(crate) fn row(&self, row: usize) -> Option<&[f32]> {
        if row >= self.rows {
            return None;
        }
        let at = (row % BLOCK_ROWS) * self.dim;
        self.blocks
            .get(row / BLOCK_ROWS)
            .and_then(|block| block.rows().get(at..at + self.dim))
    }

    /// The vector at `row` if it is held in memory (not mapped).
    pub(crate) fn heap_row(&self, row: usize) -> Option<&[f32]> {
        match self.blocks.get(row / BLOCK_ROWS)? {
            Block::Heap(_) => self.row(row),
            Block::Mapped(_) | Block::Adopting { .. } => None,
        }
    }

    /// The vector at `row`, read into `buf` (`dim` wide) if its block is
    /// mapped ([`MappedRows::read_into`]): for scans that read rows
    /// scattered over the set.
    pub(crate) fn read_row<'a>(&'a self, row: usize, buf: &'a mut [f32]) -> Option<&'a [f32]> {
        if row >= self.rows {
            return None;
        }
        let at = (row % BLOCK_ROWS) * self.dim;
        match self.blocks.get(row / BLOCK_ROWS)? {
            Block::Heap(rows) => rows.get(at..at + self.dim),
            Block::Mapped(mapped) => mapped.read_into(at, buf.get_mut(..self.dim)?),
            adopting @ Block::Adopting { .. } => adopting.rows().get(at..at + self.dim),
        }
    }

    /// Drops the mapped blocks' pages from the process's resident set
    /// ([`MappedRows::release_pages`]).
    pub(crate) fn release_mapped_pages(&self) {
        for block in &self.blocks {
            if let Block::Mapped(mapped) = block {
                mapped.release_pages();
            }
        }
    }

    /// Rows `from..to` as one row-major slice, if they lie in one block.
    pub(crate) fn contiguous(&self, from: usize, to: usize) -> Option<&[f32]> {
        if from >= to || to > self.rows || from / BLOCK_ROWS != (to - 1) / BLOCK_ROWS {
            return None;
        }
        let first = (from % BLOCK_ROWS) * self.dim;
        self.blocks
            .get(from / BLOCK_ROWS)
            .and_then(|block| block.rows().get(first..first + (to - from) * self.dim))
    }

    /// All rows in runs of [`CHUNK_ROWS`] (the last run of each block may
    /// be shorter), each with the number of its first row.
    pub(crate) fn chunks(&self) -> impl Iterator<Item = (usize, &[f32])> {
        let width = (CHUNK_ROWS * self.dim).max(1);
        self.blocks.iter().enumerate().flat_map(move |(b, block)| {
            block
                .rows()
                .chunks(width)
                .enumerate()
                .map(move |(c, rows)| (b * BLOCK_ROWS + c * CHUNK_ROWS, rows))
        })
    }

    /// Bytes the blocks hold allocated in memory (their capacity, not only
    /// their rows); mapped blocks are in [`Blocks::mapped_bytes`].
    pub(crate) fn heap_bytes(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| match b {
                Block::Heap(rows) => rows.capacity() * size_of::<f32>(),
                Block::Mapped(_) | Block::Adopting { .. } => 0,
            })
            .sum::<usize>()
            + self.blocks.capacity() * size_of::<Block>()
    }

    /// Bytes of rows mapped from files: resident only where a scan has
    /// read them, and then as page cache the kernel can take back.
    pub(crate) fn mapped_bytes(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| match b {
                Block::Heap(_) => 0,
                Block::Mapped(_) | Block::Adopting { .. } => std::mem::size_of_val(b.rows()),
            })
            .sum()
    }

    /// Full blocks still held in memory.
    pub(crate) fn unmapped_full_blocks(&self) -> usize {
        self.rows / BLOCK_ROWS - self.mapped
    }

    /// The full blocks still held in memory, each with its index and the
    /// token [`Blocks::map_block`] takes back.
    pub(crate) fn full_heap_blocks(&self) -> impl Iterator<Item = (BlockToken, &[f32])> {
        let full = BLOCK_ROWS * self.dim;
        self.blocks
            .iter()
            .enumerate()
            .filter_map(move |(index, block)| match block {
                Block::Heap(rows) if rows.len() == full => Some((
                    BlockToken {
                        set: self.set,
                        index,
                    },
                    rows.as_slice(),
                )),
                _ => None,
            })
    }

    /// Puts `mapped` in place of the in-memory block `token` names, if
    /// this is still the set it came from and that block is still in
    /// memory; the caller made `mapped` from that block's rows. Returns
    /// whether it did.
    pub(crate) fn map_block(&mut self, token: BlockToken, mapped: Arc<MappedRows>) -> bool {
        if token.set != self.set {
            return false;
        }
        match self.blocks.get_mut(token.index) {
            Some(block @ Block::Heap(_)) if block.rows().len() == mapped.rows().len() => {
                *block = Block::Mapped(mapped);
                self.mapped += 1;
                true
            }
            _ => false,
        }
    }

    /// Where row `from`'s block ends: the first row of the next block.
    pub(crate) fn block_end(from: usize) -> usize {
        (from / BLOCK_ROWS + 1) * BLOCK_ROWS
    }
}

/// Names one full block of one [`Blocks`] (see [`Blocks::map_block`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockToken {
    set: u64,
    /// The block's index: its first row is `index * BLOCK_ROWS`.
    pub(crate) index: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(rows: usize, dim: usize) -> Blocks {
        let mut blocks = Blocks::new(dim);
        for r in 0..rows {
            let v: Vec<f32> = (0..dim).map(|d| (r * dim + d) as f32).collect();
            blocks.push(&v);
        }
        blocks
    }

    #[test]
    fn rows_come_back_as_pushed_across_block_boundaries() {
        let dim = 3;
        let rows = 2 * BLOCK_ROWS + 5;
        let blocks = filled(rows, dim);
        assert_eq!(blocks.rows, rows);
        assert_eq!(blocks.blocks.len(), 3);
        for r in [0, 1, BLOCK_ROWS - 1, BLOCK_ROWS, 2 * BLOCK_ROWS + 4] {
            let expected: Vec<f32> = (0..dim).map(|d| (r * dim + d) as f32).collect();
            assert_eq!(blocks.row(r), Some(&expected[..]), "row {r}");
        }
        assert_eq!(blocks.row(rows), None);
        // Full blocks never held more than their rows.
        assert!(blocks.blocks[..2].iter().all(|b| match b {
            Block::Heap(rows) => rows.capacity() == BLOCK_ROWS * dim,
            Block::Mapped(_) | Block::Adopting { .. } => false,
        }));
        assert_eq!(blocks.unmapped_full_blocks(), 2);
        assert_eq!(blocks.full_heap_blocks().count(), 2);
    }

    /// `blocks`' full blocks written to files in `dir`, as an earlier
    /// open's `map_to_files` leaves them.
    fn write_files(blocks: &Blocks, dir: &std::path::Path) {
        for (token, rows) in blocks.full_heap_blocks() {
            let keys: Vec<u8> = (token.index * BLOCK_ROWS..(token.index + 1) * BLOCK_ROWS)
                .flat_map(key)
                .collect();
            let codes: Vec<u64> = rows
                .chunks(blocks.dim)
                .flat_map(|row| crate::codes::sign_code(row, blocks.dim.div_ceil(64)))
                .collect();
            crate::mapped::map_block(dir, token.index, blocks.dim, rows, &keys, &codes).unwrap();
        }
    }

    /// Row `r`'s key in [`write_files`]' files.
    fn key(r: usize) -> [u8; ROW_KEY_BYTES] {
        let mut key = [0; ROW_KEY_BYTES];
        key[..8].copy_from_slice(&(r as u64).to_le_bytes());
        key
    }

    #[test]
    fn rows_adopted_by_key_read_as_the_files_hold_them() {
        let dim = 4;
        let rows = 2 * BLOCK_ROWS + 10;
        let dir = tempfile::tempdir().unwrap();
        let written = filled(rows, dim);
        write_files(&written, dir.path());

        let mut again = Blocks::new(dim);
        assert_eq!(again.next_key(), None, "not adopting yet");
        again.adopt_files_from(dir.path().to_path_buf());
        let mut codes = Vec::new();
        for r in 0..2 * BLOCK_ROWS {
            assert_eq!(again.next_key(), Some(&key(r)[..]), "row {r}");
            assert!(again.adopt_next(&mut codes));
        }
        // The codes came from the files, as the rows' own.
        let expected: Vec<u64> = (0..2 * BLOCK_ROWS)
            .flat_map(|r| crate::codes::sign_code(written.row(r).unwrap(), 1))
            .collect();
        assert_eq!(codes, expected);
        // No file for the third block: its rows are pushed.
        assert_eq!(again.next_key(), None);
        assert!(!again.adopt_next(&mut codes));
        assert_eq!(codes.len(), 2 * BLOCK_ROWS);
        again.push(written.row(2 * BLOCK_ROWS).unwrap());
        assert_eq!(again.stop_adopting(), 2);
        assert!(matches!(
            again.blocks[..],
            [Block::Mapped(_), Block::Mapped(_), Block::Heap(_)]
        ));
        for r in 0..=2 * BLOCK_ROWS {
            assert_eq!(again.row(r), written.row(r), "row {r}");
        }

        // Stopped midway through a block, the adopted rows move to memory;
        // an adoption stopped at a block's start leaves no empty block.
        let mut part = Blocks::new(dim);
        part.adopt_files_from(dir.path().to_path_buf());
        for _ in 0..BLOCK_ROWS + 3 {
            assert!(part.next_key().is_some());
            assert!(part.adopt_next(&mut Vec::new()));
        }
        assert_eq!(part.stop_adopting(), 1);
        assert!(matches!(
            part.blocks[..],
            [Block::Mapped(_), Block::Heap(_)]
        ));
        assert_eq!(part.row(BLOCK_ROWS + 2), written.row(BLOCK_ROWS + 2));
        let mut at_start = Blocks::new(dim);
        at_start.adopt_files_from(dir.path().to_path_buf());
        assert!(at_start.next_key().is_some());
        assert_eq!(at_start.stop_adopting(), 0);
        assert!(at_start.blocks.is_empty());
    }

    #[test]
    fn a_row_pushed_into_a_block_being_adopted_moves_the_block_to_memory() {
        let dim = 4;
        let dir = tempfile::tempdir().unwrap();
        let written = filled(2 * BLOCK_ROWS + 10, dim);
        write_files(&written, dir.path());

        // The first block and 77 rows of the second are adopted by key;
        // then a row the file does not name is pushed, and the rest of the
        // block after it.
        let changed = BLOCK_ROWS + 77;
        let mut again = Blocks::new(dim);
        again.adopt_files_from(dir.path().to_path_buf());
        let mut codes = Vec::new();
        for r in 0..changed {
            assert_eq!(again.next_key(), Some(&key(r)[..]));
            assert!(again.adopt_next(&mut codes));
        }
        let other = [-1.0; 4];
        again.push(&other);
        assert!(matches!(
            again.blocks[..],
            [Block::Mapped(_), Block::Heap(_)]
        ));
        assert_eq!(again.next_key(), None, "no file row follows a pushed one");
        for r in changed + 1..2 * BLOCK_ROWS {
            again.push(written.row(r).unwrap());
        }
        assert_eq!(again.stop_adopting(), 1);
        assert_eq!(
            again.unmapped_full_blocks(),
            1,
            "the second block waits for its file"
        );
        for r in 0..2 * BLOCK_ROWS {
            let expected = if r == changed {
                &other[..]
            } else {
                written.row(r).unwrap()
            };
            assert_eq!(again.row(r), Some(expected), "row {r}");
        }
    }

    #[test]
    fn contiguous_runs_stay_within_one_block() {
        let dim = 2;
        let blocks = filled(BLOCK_ROWS + 10, dim);
        let run = blocks
            .contiguous(BLOCK_ROWS - 2, BLOCK_ROWS)
            .map(<[f32]>::to_vec);
        let expected: Vec<f32> = ((BLOCK_ROWS - 2) * dim..BLOCK_ROWS * dim)
            .map(|x| x as f32)
            .collect();
        assert_eq!(run, Some(expected));
        assert_eq!(blocks.contiguous(BLOCK_ROWS - 1, BLOCK_ROWS + 1), None);
        assert_eq!(blocks.contiguous(BLOCK_ROWS + 5, BLOCK_ROWS + 11), None);
        assert_eq!(Blocks::block_end(BLOCK_ROWS - 1), BLOCK_ROWS);
        assert_eq!(Blocks::block_end(BLOCK_ROWS), 2 * BLOCK_ROWS);
    }

    #[test]
    fn chunks_cover_every_row_once_and_number_them() {
        let dim = 2;
        let rows = BLOCK_ROWS + CHUNK_ROWS + 7;
        let blocks = filled(rows, dim);
        let mut next = 0;
        for (first, run) in blocks.chunks() {
            assert_eq!(first, next);
            assert_eq!(run[0], (first * dim) as f32);
            next += run.len() / dim;
        }
        assert_eq!(next, rows);
    }
}
