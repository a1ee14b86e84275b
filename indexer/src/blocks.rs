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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::mapped::MappedRows;

/// Rows per rayon task of a scan.
pub(crate) const CHUNK_ROWS: usize = 2048;

/// Rows per block: 24 MiB of 384-wide vectors. A multiple of the scan's
/// [`CHUNK_ROWS`], so scan chunks never straddle two blocks.
pub(crate) const BLOCK_ROWS: usize = 8 * CHUNK_ROWS;

/// One block's rows: in memory, or (a full block) mapped from its derived
/// file ([`crate::mapped`]).
#[derive(Debug, Clone)]
enum Block {
    Heap(Vec<f32>),
    Mapped(Arc<MappedRows>),
}

impl Block {
    fn rows(&self) -> &[f32] {
        match self {
            Block::Heap(rows) => rows,
            Block::Mapped(mapped) => mapped.rows(),
        }
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
        }
    }

    /// Appends `vector` (the caller checks that it is `dim` wide).
    pub(crate) fn push(&mut self, vector: &[f32]) {
        let block_len = BLOCK_ROWS * self.dim;
        match self.blocks.last_mut() {
            Some(Block::Heap(block)) if block.len() < block_len => {
                if block.len() == block.capacity() {
                    let wanted = (2 * block.len()).clamp(self.dim, block_len);
                    block.reserve_exact(wanted - block.len());
                }
                block.extend_from_slice(vector);
            }
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
            Block::Mapped(_) => None,
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
                Block::Mapped(_) => 0,
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
                Block::Mapped(mapped) => std::mem::size_of_val(mapped.rows()),
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
            Block::Mapped(_) => false,
        }));
        assert_eq!(blocks.unmapped_full_blocks(), 2);
        assert_eq!(blocks.full_heap_blocks().count(), 2);
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
