//! A set's full blocks of rows handed to files and mapped back
//! (`mapped.rs`), in two steps so a live engine writes the files while
//! readers go on: [`VectorSet::map_to_files`] reads the set, and
//! [`VectorSet::take_mapped`] swaps the mappings in.

use std::path::Path;
use std::sync::Arc;

use crate::blocks::{BLOCK_ROWS, BlockToken};
use crate::error::{IndexerError, Result};
use crate::mapped::{MappedRows, RowKey, is_block_file, map_block};

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

    /// While a store opens and its rows come again: a block whose file in
    /// `dir` (written by [`VectorSet::map_to_files`] before) holds exactly
    /// the rows that come is adopted mapped, never held in memory. A row
    /// comes either pushed (compared with the file's) or, when the file's
    /// next row has the key the caller expects
    /// ([`VectorSet::next_key`]), without its vector
    /// ([`VectorSet::adopt_next`]). A block whose rows differ from its
    /// file's is held in memory and mapped as usual. Until
    /// [`VectorSet::stop_adopting`].
    ///
    /// ```
    /// use recall_indexer::{ROW_KEY_BYTES, VectorSet};
    /// let dir = tempfile::tempdir()?;
    /// let row = |i: usize| {
    ///     let a = i as f32 * 0.001;
    ///     [a.cos(), a.sin()]
    /// };
    /// let key = |owner: usize| [owner as u8; ROW_KEY_BYTES];
    /// let mut set = VectorSet::new(2);
    /// (0..20_000).for_each(|i| set.push(i, &row(i)));
    /// set.take_mapped(set.map_to_files(dir.path(), key)?);
    ///
    /// let mut reopened = VectorSet::new(2);
    /// reopened.adopt_files_from(dir.path());
    /// for i in 0..20_000 {
    ///     match reopened.next_key() {
    ///         Some(k) if k == key(i) => assert!(reopened.adopt_next(i)),
    ///         _ => reopened.push(i, &row(i)),
    ///     }
    /// }
    /// assert_eq!(reopened.stop_adopting(), 1);
    /// assert_eq!(reopened.blocks_to_map(), 0);
    /// assert_eq!(reopened.row(12_345), set.row(12_345));
    /// assert!(VectorSet::adoptable_files(dir.path(), 2));
    /// assert!(!VectorSet::adoptable_files(dir.path(), 3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn adopt_files_from(&mut self, dir: &Path) {
        self.data.adopt_files_from(dir.to_path_buf());
    }

    /// Whether `dir` holds a first block file of `dim`-wide rows that
    /// [`VectorSet::adopt_files_from`] can adopt rows from by key (one
    /// written by [`VectorSet::map_to_files`], of this format).
    pub fn adoptable_files(dir: &Path, dim: usize) -> bool {
        is_block_file(dir, 0, dim, BLOCK_ROWS)
    }

    /// The key of the file row [`VectorSet::adopt_next`] would take, if
    /// the next row can come from a file being adopted.
    pub fn next_key(&mut self) -> Option<RowKey> {
        self.data.next_key().and_then(|key| key.try_into().ok())
    }

    /// Appends the next row of the file being adopted for `owner`, as the
    /// file holds it: the caller checked its key ([`VectorSet::next_key`]).
    /// Returns false, and appends nothing, when no file row is next.
    pub fn adopt_next(&mut self, owner: usize) -> bool {
        if !self.data.adopt_next(&mut self.codes) {
            return false;
        }
        self.owners.push(owner);
        self.upkeep(None);
        true
    }

    /// Ends [`VectorSet::adopt_files_from`]; returns how many blocks were
    /// adopted.
    pub fn stop_adopting(&mut self) -> usize {
        self.data.stop_adopting()
    }

    /// Puts each full block the set holds in memory in a file of `dir`
    /// (one per block, with each row's key: `key_of` its owner; a file that
    /// already holds exactly the block's rows and keys is kept) and maps
    /// it. The set is unchanged until [`VectorSet::take_mapped`].
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
    /// let mapped = set.map_to_files(dir.path(), |owner| [owner as u8; 24])?;
    /// assert_eq!((mapped.written, mapped.found), (1, 0));
    /// assert_eq!(set.take_mapped(mapped), 1);
    /// assert_eq!(set.blocks_to_map(), 0);
    /// assert_eq!(set.row(12_345).map(<[f32]>::to_vec), before);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn map_to_files(
        &self,
        dir: &Path,
        key_of: impl Fn(usize) -> RowKey,
    ) -> Result<MappedBlocks> {
        let mut out = MappedBlocks::default();
        for (token, rows) in self.data.full_heap_blocks() {
            let first = token.index * BLOCK_ROWS;
            let owners = self
                .owners
                .get(first..first + BLOCK_ROWS)
                .unwrap_or_default();
            let keys: Vec<u8> = owners.iter().flat_map(|&owner| key_of(owner)).collect();
            let codes = self
                .codes
                .get(first * self.words..(first + BLOCK_ROWS) * self.words)
                .unwrap_or_default();
            let (mapped, written) = map_block(dir, token.index, self.dim, rows, &keys, codes)
                .map_err(|source| IndexerError::Io {
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

        let mapped = set.map_to_files(dir.path(), |o| [o as u8; 24]).unwrap();
        assert_eq!((mapped.written, mapped.found), (2, 0));
        // A set the mappings were not made for takes none of them.
        let mut other = filled(&vectors[..n], dim);
        let again = set.map_to_files(dir.path(), |o| [o as u8; 24]).unwrap();
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
