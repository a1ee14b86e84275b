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
//! than twice its rows; every later block is allocated whole.

/// Rows per rayon task of a scan.
pub(crate) const CHUNK_ROWS: usize = 2048;

/// Rows per block: 24 MiB of 384-wide vectors. A multiple of the scan's
/// [`CHUNK_ROWS`], so scan chunks never straddle two blocks.
pub(crate) const BLOCK_ROWS: usize = 8 * CHUNK_ROWS;

/// Row-major `f32` rows of one width, in blocks of [`BLOCK_ROWS`].
#[derive(Debug, Clone)]
pub(crate) struct Blocks {
    dim: usize,
    rows: usize,
    blocks: Vec<Vec<f32>>,
}

impl Blocks {
    /// No rows, `dim` wide.
    pub(crate) fn new(dim: usize) -> Blocks {
        Blocks {
            dim,
            rows: 0,
            blocks: Vec::new(),
        }
    }

    /// Appends `vector` (the caller checks that it is `dim` wide).
    pub(crate) fn push(&mut self, vector: &[f32]) {
        let block_len = BLOCK_ROWS * self.dim;
        match self.blocks.last_mut() {
            Some(block) if block.len() < block_len => {
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
                self.blocks.push(block);
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
            .and_then(|block| block.get(at..at + self.dim))
    }

    /// Rows `from..to` as one row-major slice, if they lie in one block.
    pub(crate) fn contiguous(&self, from: usize, to: usize) -> Option<&[f32]> {
        if from >= to || to > self.rows || from / BLOCK_ROWS != (to - 1) / BLOCK_ROWS {
            return None;
        }
        let first = (from % BLOCK_ROWS) * self.dim;
        self.blocks
            .get(from / BLOCK_ROWS)
            .and_then(|block| block.get(first..first + (to - from) * self.dim))
    }

    /// All rows in runs of [`CHUNK_ROWS`] (the last run of each block may
    /// be shorter), each with the number of its first row.
    pub(crate) fn chunks(&self) -> impl Iterator<Item = (usize, &[f32])> {
        let width = (CHUNK_ROWS * self.dim).max(1);
        self.blocks.iter().enumerate().flat_map(move |(b, block)| {
            block
                .chunks(width)
                .enumerate()
                .map(move |(c, rows)| (b * BLOCK_ROWS + c * CHUNK_ROWS, rows))
        })
    }

    /// Bytes the blocks hold allocated (their capacity, not only their rows).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| b.capacity() * size_of::<f32>())
            .sum::<usize>()
            + self.blocks.capacity() * size_of::<Vec<f32>>()
    }

    /// Where row `from`'s block ends: the first row of the next block.
    pub(crate) fn block_end(from: usize) -> usize {
        (from / BLOCK_ROWS + 1) * BLOCK_ROWS
    }
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
        assert!(
            blocks.blocks[..2]
                .iter()
                .all(|b| b.capacity() == BLOCK_ROWS * dim)
        );
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
