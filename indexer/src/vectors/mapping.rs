//! A set's full blocks of rows handed to files and mapped back
//! (`mapped.rs`), in two steps so a live engine writes the files while
//! readers go on: [`VectorSet::map_to_files`] reads the set, and
//! [`VectorSet::take_mapped`] swaps the mappings in.

use std::path::Path;
use std::sync::Arc;

use crate::blocks::BlockToken;
use crate::error::{IndexerError, Result};
use crate::mapped::{MappedRows, map_block};

use super::VectorSet;

/// Full blocks of a set in files and mapped, waiting for
/// [`VectorSet::take_mapped`].
#[derive(Debug, Default)]
pub struct MappedBlocks {
    blocks: Vec<(BlockToken, Arc<MappedRows>)>,
    /// Files written for them.
    pub written: usize,
    /// Files that already held their rows.
    pub found: usize,
}

impl VectorSet {
    /// Full blocks of rows (16,384 each) the set holds in memory.
    pub fn blocks_to_map(&self) -> usize {
        self.data.unmapped_full_blocks()
    }

    /// Bytes of rows mapped from files: resident only where scans read
    /// them, as page cache.
    pub fn mapped_bytes(&self) -> usize {
        self.data.mapped_bytes()
    }

    /// Puts each full block the set holds in memory in a file of `dir`
    /// (one per block; a file that already holds exactly the block's rows
    /// is kept) and maps it. The set is unchanged until
    /// [`VectorSet::take_mapped`].
    ///
    /// ```
    /// use recall_indexer::VectorSet;
    /// let dir = tempfile::tempdir()?;
    /// let mut set = VectorSet::new(2);
    /// for i in 0..20_000 {
    ///     let a = i as f32 * 0.001;
    ///     set.push(i, &[a.cos(), a.sin()]);
    /// }
    /// let before = set.row(12_345).map(<[f32]>::to_vec);
    /// assert_eq!(set.blocks_to_map(), 1);
    /// let mapped = set.map_to_files(dir.path())?;
    /// assert_eq!((mapped.written, mapped.found), (1, 0));
    /// assert_eq!(set.take_mapped(mapped), 1);
    /// assert_eq!(set.blocks_to_map(), 0);
    /// assert_eq!(set.row(12_345).map(<[f32]>::to_vec), before);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn map_to_files(&self, dir: &Path) -> Result<MappedBlocks> {
        let mut out = MappedBlocks::default();
        for (token, rows) in self.data.full_heap_blocks() {
            let (mapped, written) =
                map_block(dir, token.index, self.dim, rows).map_err(|source| IndexerError::Io {
                    path: dir.to_path_buf(),
                    source,
                })?;
            match written {
                true => out.written += 1,
                false => out.found += 1,
            }
            out.blocks.push((token, mapped));
        }
        Ok(out)
    }

    /// Puts the mappings of [`VectorSet::map_to_files`] in place of the
    /// blocks they were made from; skips any made for another set or a
    /// block no longer in memory. Returns how many it put in place.
    pub fn take_mapped(&mut self, mapped: MappedBlocks) -> usize {
        mapped
            .blocks
            .into_iter()
            .filter(|(token, rows)| self.data.map_block(*token, rows.clone()))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use crate::ScanConfig;
    use crate::blocks::BLOCK_ROWS;
    use crate::vectors::tests::{clustered, every_row, filled};

    #[test]
    fn a_mapped_set_scans_and_grows_as_it_did_in_memory() {
        let dim = 32;
        let n = 2 * BLOCK_ROWS + 300;
        let vectors = clustered(n + 50, 40, dim);
        let mut set = filled(&vectors[..n], dim);
        let in_memory = set.clone();
        let heap_before = set.heap_bytes().vectors;
        let dir = tempfile::tempdir().unwrap();

        let mapped = set.map_to_files(dir.path()).unwrap();
        assert_eq!((mapped.written, mapped.found), (2, 0));
        // A set the mappings were not made for takes none of them.
        let mut other = filled(&vectors[..n], dim);
        let again = set.map_to_files(dir.path()).unwrap();
        assert_eq!((again.written, again.found), (0, 2));
        assert_eq!(other.take_mapped(again), 0);
        assert_eq!(other.blocks_to_map(), 2);

        assert_eq!(set.take_mapped(mapped), 2);
        assert_eq!(set.blocks_to_map(), 0);
        assert_eq!(set.mapped_bytes(), 2 * BLOCK_ROWS * dim * 4);
        assert!(set.heap_bytes().vectors < heap_before - 2 * BLOCK_ROWS * dim * 4 + 4096);

        for row in [0, BLOCK_ROWS - 1, BLOCK_ROWS, 2 * BLOCK_ROWS + 299] {
            assert_eq!(set.row(row), in_memory.row(row), "row {row}");
        }
        let scans = [
            ScanConfig::default(),
            every_row(1_000, 200),
            ScanConfig {
                probe_share: 0.1,
                ..ScanConfig::default()
            },
        ];
        for (q, query) in vectors[n..].iter().enumerate() {
            for scan in scans {
                assert_eq!(
                    set.nearest(query, 10, scan, |owner| owner % 3 != q % 3),
                    in_memory.nearest(query, 10, scan, |owner| owner % 3 != q % 3),
                );
            }
            assert_eq!(
                set.nearest_exact(query, 10, |_| true),
                in_memory.nearest_exact(query, 10, |_| true)
            );
        }

        // Pushes after the mapping fill the next block in memory.
        let mut grown = in_memory.clone();
        for (i, v) in vectors[n..].iter().enumerate() {
            set.push(n + i, v);
            grown.push(n + i, v);
        }
        assert_eq!(set.row(n + 10), grown.row(n + 10));
        assert_eq!(
            set.nearest(&vectors[n], 5, ScanConfig::default(), |_| true),
            grown.nearest(&vectors[n], 5, ScanConfig::default(), |_| true)
        );
    }
}
