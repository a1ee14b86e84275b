//! Coarse partitions of one tenant's vectors: spherical k-means centroids and
//! one list of rows per centroid (an inverted file, "IVF").
//!
//! A large tenant's scan visits only the lists whose centroids are closest
//! to the query, so its cost follows the share of rows probed, not the
//! tenant's size. Training runs once the tenant reaches
//! [`PARTITION_FROM`] rows, on a sample, and again each time the tenant has
//! grown eightfold (so centroids follow what the tenant now holds). A row
//! added between trainings joins its nearest centroid's list at once when
//! the write path's near-copy probe already ranked the centroids for it
//! (see `Placement` in `vectors.rs`); other rows are assigned in batches
//! of [`ASSIGN_BATCH`], and the few not yet assigned are scanned
//! exhaustively, so no row is ever out of reach.
//!
//! Each list keeps a copy of its rows' sign codes side by side, so a probe
//! computes the Hamming distances of a whole list in one pass over
//! contiguous memory instead of one random read per row (48 bytes per row
//! at 384 dimensions, 5 MB at 100k rows), eight rows at a time (see
//! [`List::codes`]).

use std::sync::atomic::{AtomicU64, Ordering};

use ndarray::{Array2, ArrayView2, Axis};
use rayon::prelude::*;

use crate::blocks::Blocks;
use crate::kernels::CODE_BLOCK_ROWS;

mod saved;

pub use saved::{SAVED_HEADER_BYTES, saved_partitions_rows};

/// Trainings so far in this process: each names its centroids, so a
/// list learned under one training is never used under another.
static TRAININGS: AtomicU64 = AtomicU64::new(0);

/// Rows at which a tenant gets partitions.
pub(crate) const PARTITION_FROM: usize = 16_384;
/// Rows assigned to lists at once (the unassigned tail is scanned in full).
pub(crate) const ASSIGN_BATCH: usize = 1024;
/// Centroids of a training: one per [`ROWS_PER_CENTROID`] rows the tenant
/// holds, between these bounds. The first training (at 16,384 rows) gets
/// 256; a tenant trained at 131,072 rows or more gets 512. Finer lists
/// rank a write's near copies better at a million rows: with 512 instead
/// of 256 the write probe found 100 % instead of 94 % of the near copies
/// in the dedup band and 93 % instead of 86 % in the similar band
/// (`recall-bench scale`, 200 copies), for a bulk import within the runs'
/// ±10 % noise (13.6–13.9k against 13.8–14.6k memories/s).
const CENTROIDS: std::ops::RangeInclusive<usize> = 256..=512;
/// See [`CENTROIDS`].
const ROWS_PER_CENTROID: usize = 256;
/// Rows the k-means sees.
const TRAIN_SAMPLE: usize = 16_384;
/// Lloyd iterations.
const ITERATIONS: usize = 5;
/// Rows assigned per matrix product (bounds the similarity matrix at 16 MiB).
const ASSIGN_CHUNK: usize = 16_384;
/// Fewest rows one task of an assignment takes (smaller batches run whole).
const ASSIGN_MIN_TASK: usize = 128;

/// One centroid's rows and their sign codes, in the same order.
#[derive(Debug, Clone, Default)]
pub(crate) struct List {
    pub(crate) rows: Vec<u32>,
    /// The codes in blocks of [`CODE_BLOCK_ROWS`] rows, word-major within a
    /// block: word 0 of the block's eight rows, then word 1, … (the last
    /// block padded with zeros). One 512-bit load holds one word of eight
    /// rows, so a probe counts the bits of eight rows at a time (see
    /// `kernels::scan_blocks_fn`).
    pub(crate) codes: Vec<u64>,
}

impl List {
    /// An empty list with room for `rows` rows of `words`-word codes.
    pub(crate) fn with_room(rows: usize, words: usize) -> List {
        List {
            rows: Vec::with_capacity(rows),
            codes: Vec::with_capacity(rows.div_ceil(CODE_BLOCK_ROWS) * CODE_BLOCK_ROWS * words),
        }
    }

    /// Appends `row` with its `code`.
    pub(crate) fn push(&mut self, row: u32, code: &[u64]) {
        let words = code.len();
        let at = self.rows.len();
        if at.is_multiple_of(CODE_BLOCK_ROWS) {
            self.codes
                .resize(self.codes.len() + CODE_BLOCK_ROWS * words, 0);
        }
        let block = at / CODE_BLOCK_ROWS * CODE_BLOCK_ROWS * words;
        for (k, word) in code.iter().enumerate() {
            self.codes[block + k * CODE_BLOCK_ROWS + at % CODE_BLOCK_ROWS] = *word;
        }
        self.rows.push(row);
    }
}

/// Centroids and their lists.
#[derive(Debug, Clone)]
pub(crate) struct Partitions {
    dim: usize,
    /// One unit vector per row.
    centroids: Array2<f32>,
    lists: Vec<List>,
    /// Rows `0..assigned` are in a list.
    assigned: usize,
    /// Rows the tenant held when these centroids were trained.
    trained_at: usize,
    /// Which training these centroids come from (unique in the process).
    training: u64,
}

impl Partitions {
    /// Bytes the centroids and lists hold allocated.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.centroids.len() * size_of::<f32>()
            + self
                .lists
                .iter()
                .map(|l| {
                    size_of::<List>()
                        + l.rows.capacity() * size_of::<u32>()
                        + l.codes.capacity() * size_of::<u64>()
                })
                .sum::<usize>()
    }

    /// Trains centroids on the first `rows` rows of `data` and assigns all
    /// of them (`codes` holds `words` sign-code words per row).
    pub(crate) fn train(
        data: &Blocks,
        codes: &[u64],
        words: usize,
        dim: usize,
        rows: usize,
    ) -> Partitions {
        let k = (rows / ROWS_PER_CENTROID)
            .clamp(*CENTROIDS.start(), *CENTROIDS.end())
            .min(rows.max(1));
        let stride = (rows / TRAIN_SAMPLE).max(1);
        let sample_rows: Vec<usize> = (0..rows).step_by(stride).take(TRAIN_SAMPLE).collect();
        let mut sample = Array2::<f32>::zeros((sample_rows.len(), dim));
        for (mut out, row) in sample.rows_mut().into_iter().zip(&sample_rows) {
            if let Some(vector) = data.row(*row) {
                out.iter_mut().zip(vector).for_each(|(o, x)| *o = *x);
            }
        }
        // Seeds spread evenly over the sample: deterministic, and a sample
        // taken with a stride is already spread over the tenant's history.
        let seed_stride = (sample_rows.len() / k).max(1);
        let mut centroids = Array2::<f32>::zeros((k, dim));
        for (c, mut out) in centroids.rows_mut().into_iter().enumerate() {
            out.assign(&sample.row((c * seed_stride).min(sample_rows.len() - 1)));
        }
        for _ in 0..ITERATIONS {
            let nearest = nearest_centroids(sample.view(), &centroids);
            let mut sums = Array2::<f32>::zeros((k, dim));
            for (row, c) in nearest.iter().enumerate() {
                let mut sum = sums.row_mut(*c as usize);
                sum += &sample.row(row);
            }
            for (mut sum, mut centroid) in sums.rows_mut().into_iter().zip(centroids.rows_mut()) {
                let norm = sum.dot(&sum).sqrt();
                // An empty cluster keeps its old centroid.
                if norm > 0.0 {
                    sum /= norm;
                    centroid.assign(&sum);
                }
            }
        }
        let mut partitions = Partitions {
            dim,
            centroids,
            lists: vec![List::default(); k],
            assigned: 0,
            trained_at: rows,
            training: TRAININGS.fetch_add(1, Ordering::Relaxed) + 1,
        };
        partitions.assign(data, codes, words, rows);
        partitions
    }

    /// Assigns rows `assigned..upto` of `data` to their nearest centroid.
    /// Runs while the tenant's state is locked for writing, so even a
    /// small batch is split over the pool (each task within one block).
    pub(crate) fn assign(&mut self, data: &Blocks, codes: &[u64], words: usize, upto: usize) {
        if upto <= self.assigned {
            return;
        }
        let dim = self.dim;
        let from = self.assigned;
        let task = (upto - from)
            .div_ceil(rayon::current_num_threads().max(1))
            .clamp(ASSIGN_MIN_TASK, ASSIGN_CHUNK);
        let mut ranges = Vec::new();
        let mut start = from;
        while start < upto {
            let end = (start + task).min(upto).min(Blocks::block_end(start));
            ranges.push((start, end));
            start = end;
        }
        let nearest: Vec<Vec<u32>> = ranges
            .into_par_iter()
            .map(|(start, end)| {
                let rows = data
                    .contiguous(start, end)
                    .and_then(|rows| ArrayView2::from_shape((end - start, dim), rows).ok());
                match rows {
                    Some(rows) => nearest_centroids(rows, &self.centroids),
                    // Cannot happen (the rows exist and are `dim` wide);
                    // the rows stay reachable in the first list rather
                    // than misaligned.
                    None => vec![0; end - start],
                }
            })
            .collect();
        for (row, c) in (from..upto).zip(nearest.into_iter().flatten()) {
            self.lists[c as usize].push(row as u32, &codes[row * words..(row + 1) * words]);
        }
        self.assigned = upto;
    }

    /// Adds `row`, whose nearest centroid the caller already knows, to
    /// that centroid's list. Only the next row in order can be placed (rows
    /// before it still waiting are assigned in a batch, and rows stay in
    /// order); returns whether it was placed.
    pub(crate) fn place(&mut self, row: usize, list: u32, code: &[u64]) -> bool {
        let Some(target) = self.lists.get_mut(list as usize) else {
            return false;
        };
        if row != self.assigned {
            return false;
        }
        target.push(row as u32, code);
        self.assigned += 1;
        true
    }

    /// The list holding `row`, if any.
    #[cfg(test)]
    pub(crate) fn list_of(&self, row: usize) -> Option<usize> {
        self.lists
            .iter()
            .position(|l| l.rows.contains(&(row as u32)))
    }

    /// Which training these centroids come from.
    pub(crate) fn training(&self) -> u64 {
        self.training
    }

    /// Rows in a list.
    pub(crate) fn assigned(&self) -> usize {
        self.assigned
    }

    /// Rows the tenant held at the last training.
    pub(crate) fn trained_at(&self) -> usize {
        self.trained_at
    }

    /// Similarity of each query (rows of `queries`) to each centroid: one
    /// matrix product for a whole batch of probes.
    pub(crate) fn similarities(&self, queries: ArrayView2<'_, f32>) -> Array2<f32> {
        queries.dot(&self.centroids.t())
    }

    /// Similarity of one query to each centroid.
    pub(crate) fn similarities_of(
        &self,
        query: &[f32],
        dot: fn(&[f32], &[f32]) -> f32,
    ) -> Vec<f32> {
        self.centroids
            .rows()
            .into_iter()
            .map(|centroid| centroid.as_slice().map_or(0.0, |s| dot(s, query)))
            .collect()
    }

    /// The list at `index` (see [`Partitions::probe`]).
    pub(crate) fn list(&self, index: usize) -> Option<&List> {
        self.lists.get(index)
    }

    /// How many lists there are.
    pub(crate) fn list_count(&self) -> usize {
        self.lists.len()
    }

    /// The lists whose centroids are most similar to the query (`sims`:
    /// its similarity to each centroid), best first, until they hold at
    /// least `rows` rows (or all lists), by index. Equal similarities rank
    /// the lower index first.
    pub(crate) fn probe(&self, sims: &[f32], rows: usize) -> Vec<usize> {
        // A probe takes a handful of lists: rank only the most similar
        // (twice the lists an average size suggests), and all of them only
        // if those do not hold enough rows.
        let average = (self.assigned / self.lists.len().max(1)).max(1);
        let head = (2 * rows.div_ceil(average) + 2).min(sims.len());
        let mut lists = Vec::new();
        let mut covered = 0;
        let mut take = |ranked: &[(usize, f32)], lists: &mut Vec<usize>| {
            for &(index, _) in ranked {
                if covered >= rows {
                    return true;
                }
                let Some(list) = self.lists.get(index) else {
                    continue;
                };
                covered += list.rows.len();
                lists.push(index);
            }
            covered >= rows
        };
        if take(&most_similar_n(sims, head), &mut lists) || head == sims.len() {
            return lists;
        }
        let ranked = most_similar_n(sims, sims.len());
        take(&ranked[head..], &mut lists);
        lists
    }
}

/// The `n` largest similarities as `(index, similarity)`, largest first,
/// the lower index first on ties. A probe wants a few dozen of 512: one
/// pass keeping the best so far in order costs a fraction of a selection
/// over all of them, and this runs once per query and per written memory.
fn most_similar_n(sims: &[f32], n: usize) -> Vec<(usize, f32)> {
    let by_similarity =
        |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if 4 * n >= sims.len() {
        let mut all: Vec<(usize, f32)> = sims.iter().copied().enumerate().collect();
        all.sort_unstable_by(by_similarity);
        all.truncate(n);
        return all;
    }
    let mut best: Vec<(usize, f32)> = Vec::with_capacity(n + 1);
    for (index, &sim) in sims.iter().enumerate() {
        if best.len() == n {
            // A later index ranks below an equal similarity already kept.
            match best.last() {
                Some(last) if sim.total_cmp(&last.1).is_gt() => {
                    best.pop();
                }
                _ => continue,
            }
        }
        let at = best.partition_point(|kept| kept.1.total_cmp(&sim).is_ge());
        best.insert(at, (index, sim));
    }
    best
}

/// For each row of `rows`, the index of its most similar centroid.
fn nearest_centroids(rows: ArrayView2<'_, f32>, centroids: &Array2<f32>) -> Vec<u32> {
    let sims = rows.dot(&centroids.t());
    sims.axis_iter(Axis(0))
        .map(|row| most_similar(row.iter()))
        .collect()
}

/// The index of the largest of a vector's similarities to the centroids
/// (the first on ties).
pub(crate) fn most_similar<'a>(sims: impl Iterator<Item = &'a f32>) -> u32 {
    sims.enumerate()
        .fold((0u32, f32::MIN), |best, (c, s)| {
            if *s > best.1 { (c as u32, *s) } else { best }
        })
        .0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `probe` as specified: every list ranked, taken in order until the rows are covered.
    fn probe_by_full_sort(p: &Partitions, sims: &[f32], rows: usize) -> Vec<usize> {
        let mut order: Vec<(usize, f32)> = sims.iter().copied().enumerate().collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut covered = 0;
        let mut lists = Vec::new();
        for (index, _) in order {
            if covered >= rows {
                break;
            }
            covered += p.lists[index].rows.len();
            lists.push(index);
        }
        lists
    }

    #[test]
    fn a_probe_ranks_the_lists_as_a_full_sort_does() {
        let k = 512;
        // Uneven lists (some empty), similarities with many exact ties.
        let lists: Vec<List> = (0..k)
            .map(|i| List {
                rows: (0..((i * 37) % 11) as u32).collect(),
                codes: Vec::new(),
            })
            .collect();
        let assigned = lists.iter().map(|l| l.rows.len()).sum();
        let p = Partitions {
            dim: 1,
            centroids: Array2::zeros((k, 1)),
            lists,
            assigned,
            trained_at: assigned,
            training: 0,
        };
        for seed in 0..40usize {
            let sims: Vec<f32> = (0..k)
                .map(|i| ((i * 7919 + seed * 104_729) % 61) as f32 / 61.0 - 0.5)
                .collect();
            for rows in [0, 1, 5, 40, 300, 1_000, assigned, assigned + 1] {
                assert_eq!(
                    p.probe(&sims, rows),
                    probe_by_full_sort(&p, &sims, rows),
                    "seed {seed}, {rows} rows"
                );
            }
        }
    }

    #[test]
    fn the_most_similar_come_first_and_ties_keep_index_order() {
        let sims = [0.1, 0.9, 0.5, 0.9, -0.2, 0.5, 0.7, 0.0, 0.9];
        let top: Vec<usize> = most_similar_n(&sims, 2).iter().map(|b| b.0).collect();
        assert_eq!(top, vec![1, 3]);
        let all: Vec<usize> = most_similar_n(&sims, sims.len())
            .iter()
            .map(|b| b.0)
            .collect();
        assert_eq!(all, vec![1, 3, 8, 6, 2, 5, 0, 7, 4]);
        assert!(most_similar_n(&sims, 0).is_empty());
    }
}
