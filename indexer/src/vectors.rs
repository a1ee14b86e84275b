//! In-memory vectors of one tenant and the nearest-neighbour scan over them.
//!
//! The hot recall path never goes to LanceDB: each tenant's unit vectors sit in
//! a row-major `f32` matrix (in fixed blocks, `blocks.rs`), scored over rayon
//! chunks. Up to
//! [`ScanConfig::exact_limit`] candidate rows the scan is exhaustive and exact.
//! Beyond it, each row also keeps a 1-bit-per-dimension sign code; the scan
//! ranks rows by Hamming distance to the query's code, keeps the
//! [`ScanConfig::rescore_pool`] closest, and re-scores those with exact `f32`
//! cosine — 32× less memory traffic than the full matrix. From
//! 16,384 rows a tenant also has coarse partitions (k-means lists, see
//! `partitions.rs`): a scan with [`ScanConfig::probe_share`] below 1 visits
//! only the lists closest to the query. Recall visits every row by default;
//! the write path's near-copy search probes 2 %, which keeps a bulk import
//! from costing a pass over the tenant per item; a batch of such probes
//! reads each list once for all its queries (`batched.rs`). The bench
//! measures recall@10 against the exact scan.

use ndarray::Array2;
use rayon::prelude::*;

use crate::codes::{sign_code, sign_distance_bound};
use crate::kernels;
use crate::partitions::{ASSIGN_BATCH, List, PARTITION_FROM, Partitions, most_similar};

mod batched;
mod bytes;
mod full_pass;
mod mapping;
mod resume;

pub use bytes::VectorBytes;
pub use mapping::MappedBlocks;
pub use resume::PartitionsResumed;

use crate::blocks::{Blocks, CHUNK_ROWS};

/// Batches of at least this many probes get their centroid similarities
/// from one matrix product; below it, packing the centroids for the
/// product costs more than a dot product per centroid.
const BATCHED_CENTROIDS_FROM: usize = 32;
/// Re-scoring pools at least this large are spread over the pool.
const PARALLEL_RESCORE_FROM: usize = 256;
/// Rows per rayon task when a re-scoring pool is spread over the pool.
const RESCORE_RUN: usize = 128;
/// How many rows ahead of the one being re-scored a re-scoring run asks
/// the CPU to fetch. A scan keeps rows scattered over the whole set, so
/// each one's vector is a cache miss the dot product would otherwise wait
/// for. Measured stand-alone (1,000 sorted random rows of 300k × 384,
/// cold cache, one thread): 305 µs without, 224 / 177 / 190 µs at 2 / 4 / 8.
const PREFETCH_ROWS_AHEAD: usize = 4;
/// From this many rows a query's pass over every row keeps only the rows
/// within its running cut-off (`VectorSet::closest_in_pass`) instead of
/// storing every row's distance (`VectorSet::closest_by_histogram`). Each
/// task keeps a few pools of rows before its cut-off tightens: a small
/// share of a large tenant, most of a small one. Measured (MEASUREMENTS.md,
/// "One pass over every row's code"): slower at 100k rows, a little faster
/// at 1M, a quarter faster at 10M.
const ONE_PASS_FROM: usize = 1_000_000;
/// Batches of at least this many queries that pass over every row read
/// each tile of codes once for all of them (`full_pass.rs`).
const BATCHED_FULL_PASS_FROM: usize = 2;

/// How the nearest-neighbour scan trades exactness for speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScanConfig {
    /// Tenants with at most this many rows are scanned exactly. Default 10,000.
    pub exact_limit: usize,
    /// Rows re-scored exactly after the sign-code pass. Default 1,000.
    pub rescore_pool: usize,
    /// In a partitioned tenant, the share of its rows the code pass visits
    /// (the lists nearest the query; at least four times the re-scoring
    /// pool). Default 1.0: every row, so recall is not bounded by the
    /// partitioning (the full code pass at 100k rows takes 0.3 ms on 2
    /// cores in `vector_scan/coded`); the write path's near-copy search
    /// probes 2 %.
    pub probe_share: f64,
    /// Only rows at least this similar to the query are wanted (the write
    /// path's near-copy search): rows whose sign codes differ from the
    /// query's beyond what that cosine allows (see `near.rs`) are not
    /// re-scored, and hits below it are dropped. Default `None`: the `k`
    /// nearest, however far.
    pub min_cosine: Option<f32>,
}

impl Default for ScanConfig {
    fn default() -> Self {
        ScanConfig {
            exact_limit: 10_000,
            rescore_pool: 1_000,
            probe_share: 1.0,
            min_cosine: None,
        }
    }
}

/// The dot product of two vectors of equal width (the cosine of two unit
/// vectors), with the fastest kernel this CPU runs. The scans re-score
/// with the same kernel, so a cosine computed here for a memory equals the
/// one a scan reports for it, to the last bit.
///
/// ```
/// assert_eq!(recall_indexer::dot(&[1.0, 2.0], &[3.0, 4.0]), 11.0);
/// ```
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    kernels::dot_fn()(a, b)
}

/// One query's hits, best first, as `(owner, cosine)`.
pub type Hits = Vec<(usize, f32)>;

/// The list a vector belongs to in a partitioned set: what a probe learns
/// about its query when it ranks the centroids. A write path that probed
/// for a vector's near copies hands it to [`VectorSet::push_placed`] when it
/// stores that vector, so the row joins its list without a second pass over
/// the centroids. It names the training it came from and is ignored once
/// the set has retrained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    training: u64,
    list: u32,
}

/// The vectors of one tenant. Rows are appended, never moved; each row names
/// its owner (the caller's index of the memory it belongs to).
#[derive(Debug, Clone)]
pub struct VectorSet {
    dim: usize,
    words: usize,
    data: Blocks,
    codes: Vec<u64>,
    owners: Vec<usize>,
    partitions: Option<Partitions>,
    /// Pushes skip the partitions' upkeep until
    /// [`VectorSet::resume_partitions`] (a store being opened).
    deferred: bool,
}

impl VectorSet {
    /// An empty set of `dim`-wide vectors.
    ///
    /// ```
    /// use recall_indexer::{ScanConfig, VectorSet};
    /// let mut set = VectorSet::new(2);
    /// set.push(7, &[1.0, 0.0]);
    /// set.push(8, &[0.0, 1.0]);
    /// let hits = set.nearest(&[0.9, 0.1], 1, ScanConfig::default(), |_| true);
    /// assert_eq!(hits[0].0, 7);
    /// ```
    pub fn new(dim: usize) -> VectorSet {
        VectorSet {
            dim,
            words: dim.div_ceil(64),
            data: Blocks::new(dim),
            codes: Vec::new(),
            owners: Vec::new(),
            partitions: None,
            deferred: false,
        }
    }

    /// Room for `rows` rows in all, for an open that knows a set's size
    /// before its rows come (grown a push at a time, the sign codes ended
    /// up with capacity for up to twice their rows). The rows' vectors are
    /// not reserved: full blocks of them may come from files. Whether the
    /// room was had; a set without it grows as it fills.
    ///
    /// ```
    /// use recall_indexer::VectorSet;
    /// let mut set = VectorSet::new(384);
    /// assert!(set.reserve(1_000));
    /// set.push(0, &[0.1; 384]);
    /// assert_eq!(set.len(), 1);
    /// ```
    pub fn reserve(&mut self, rows: usize) -> bool {
        let more = rows.saturating_sub(self.len());
        self.codes.try_reserve_exact(more * self.words).is_ok()
            && self.owners.try_reserve_exact(more).is_ok()
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }

    /// Vector width.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The vector stored at `row`.
    pub fn row(&self, row: usize) -> Option<&[f32]> {
        self.data.row(row)
    }

    /// The cosine of two rows (unit vectors), with the scan's dot-product
    /// kernel; None if either row does not exist.
    ///
    /// ```
    /// use recall_indexer::VectorSet;
    /// let mut set = VectorSet::new(2);
    /// set.push(7, &[1.0, 0.0]);
    /// set.push(8, &[0.6, 0.8]);
    /// assert_eq!(set.cosine_of_rows(0, 1), Some(0.6));
    /// assert_eq!(set.cosine_of_rows(0, 2), None);
    /// ```
    pub fn cosine_of_rows(&self, a: usize, b: usize) -> Option<f32> {
        Some(kernels::dot_fn()(self.row(a)?, self.row(b)?))
    }

    /// Appends a row for `owner`. The caller guarantees `vector.len() == dim`
    /// (the engine validates vectors before they get here).
    ///
    /// Now and then a push also maintains the partitions: the one that
    /// brings the tenant to 16,384 rows (or to eight times the rows of the
    /// last training) trains them, taking a fraction of a second; once
    /// 1,024 rows wait, a push assigns them to their lists (a few ms).
    /// [`VectorSet::push_placed`] skips that for rows whose list is known.
    pub fn push(&mut self, owner: usize, vector: &[f32]) {
        self.push_placed(owner, vector, None);
    }

    /// [`VectorSet::push`] of a vector whose list a probe for that same
    /// vector found ([`VectorSet::nearest_many_placed`]): while no earlier
    /// row waits for assignment, the row goes straight into its list, so
    /// the set needs no batch assignment and probes no unassigned rows. A
    /// placement from another vector would file the row under the wrong
    /// list (full scans still see it; 2 % probes may not).
    ///
    /// ```
    /// use recall_indexer::{ScanConfig, VectorSet};
    /// let mut set = VectorSet::new(2);
    /// set.push(7, &[1.0, 0.0]);
    /// let v: &[f32] = &[0.6, 0.8];
    /// let (hits, placement) = set
    ///     .nearest_many_placed(&[v], 1, ScanConfig::default(), |_, _| true)
    ///     .remove(0);
    /// assert_eq!(hits[0].0, 7);
    /// set.push_placed(8, v, placement); // None here: the set is too small for lists
    /// assert_eq!(set.len(), 2);
    /// ```
    pub fn push_placed(&mut self, owner: usize, vector: &[f32], placement: Option<Placement>) {
        debug_assert_eq!(vector.len(), self.dim);
        self.data.push(vector);
        self.codes.extend(sign_code(vector, self.words));
        self.owners.push(owner);
        self.upkeep(placement);
    }

    /// The partitions' upkeep after a row was appended (see
    /// [`VectorSet::push_placed`]).
    fn upkeep(&mut self, placement: Option<Placement>) {
        if self.deferred {
            return;
        }
        let rows = self.len();
        let train = match &self.partitions {
            None => rows >= PARTITION_FROM,
            Some(p) => rows >= 8 * p.trained_at(),
        };
        if train {
            self.partitions = Some(self.train_partitions());
            return;
        }
        if let Some(p) = &mut self.partitions {
            let row = rows - 1;
            let placed = placement
                .filter(|placement| placement.training == p.training())
                .is_some_and(|placement| {
                    let code = &self.codes[row * self.words..rows * self.words];
                    p.place(row, placement.list, code)
                });
            if !placed && rows - p.assigned() >= ASSIGN_BATCH {
                p.assign(&self.data, &self.codes, self.words, rows);
            }
        }
    }

    /// The `k` rows most similar (cosine of unit vectors) to `query` among
    /// those whose owner `accept`s, best first, as `(owner, cosine)`.
    pub fn nearest<F>(
        &self,
        query: &[f32],
        k: usize,
        scan: ScanConfig,
        accept: F,
    ) -> Vec<(usize, f32)>
    where
        F: Fn(usize) -> bool + Sync,
    {
        if k == 0 || self.is_empty() || query.len() != self.dim {
            return Vec::new();
        }
        let hits = if self.len() <= scan.exact_limit {
            self.exact(query, k, &accept)
        } else {
            self.coded(query, None, k, scan, &accept).0
        };
        at_least(hits, scan.min_cosine)
    }

    /// [`VectorSet::nearest`] for a batch of queries: `accept` is asked
    /// about `(query index, owner)`. In a partitioned tenant probed below
    /// its full size, a batch of 32 or more queries gets its similarities
    /// to the centroids from one matrix product instead of a pass over the
    /// centroids per query, and each probed list is read once for all the
    /// queries that probe it. A batch that passes over every row reads each
    /// stretch of sign codes once for all its queries. Either way a query's
    /// hits are those it gets alone.
    ///
    /// ```
    /// use recall_indexer::{ScanConfig, VectorSet};
    /// let mut set = VectorSet::new(2);
    /// set.push(7, &[1.0, 0.0]);
    /// set.push(8, &[0.0, 1.0]);
    /// let queries: [&[f32]; 2] = [&[0.9, 0.1], &[0.9, 0.1]];
    /// let hits = set.nearest_many(&queries, 1, ScanConfig::default(), |q, owner| q == 0 || owner != 7);
    /// assert_eq!((hits[0][0].0, hits[1][0].0), (7, 8));
    /// ```
    pub fn nearest_many<F>(
        &self,
        queries: &[&[f32]],
        k: usize,
        scan: ScanConfig,
        accept: F,
    ) -> Vec<Vec<(usize, f32)>>
    where
        F: Fn(usize, usize) -> bool + Sync,
    {
        self.nearest_many_placed(queries, k, scan, accept)
            .into_iter()
            .map(|(hits, _)| hits)
            .collect()
    }

    /// [`VectorSet::nearest_many`], plus each query's [`Placement`] where
    /// the scan ranked the centroids for it (a partitioned set probed below
    /// its full size): the write path stores the vectors it probed with
    /// [`VectorSet::push_placed`].
    pub fn nearest_many_placed<F>(
        &self,
        queries: &[&[f32]],
        k: usize,
        scan: ScanConfig,
        accept: F,
    ) -> Vec<(Hits, Option<Placement>)>
    where
        F: Fn(usize, usize) -> bool + Sync,
    {
        let valid = |q: &[f32]| k > 0 && !self.is_empty() && q.len() == self.dim;
        if self.len() <= scan.exact_limit {
            return queries
                .par_iter()
                .enumerate()
                .map(|(i, q)| match valid(q) {
                    true => {
                        let hits = self.exact(q, k, &|owner| accept(i, owner));
                        (at_least(hits, scan.min_cosine), None)
                    }
                    false => (Vec::new(), None),
                })
                .collect();
        }
        let sims = match &self.partitions {
            Some(p) if scan.probe_share < 1.0 && queries.len() >= BATCHED_CENTROIDS_FROM => {
                let mut matrix = Array2::<f32>::zeros((queries.len(), self.dim));
                for (mut row, q) in matrix.rows_mut().into_iter().zip(queries) {
                    if q.len() == self.dim {
                        row.iter_mut().zip(*q).for_each(|(x, y)| *x = *y);
                    }
                }
                Some((p, p.similarities(matrix.view())))
            }
            _ => None,
        };
        if let Some((p, sims)) = &sims {
            return self.coded_batch(p, queries, sims, k, scan, &accept);
        }
        let lists_probed = self.partitions.is_some() && scan.probe_share < 1.0;
        if !lists_probed && queries.len() >= BATCHED_FULL_PASS_FROM {
            return self
                .full_pass_batch(queries, k, scan, &accept)
                .into_iter()
                .map(|hits| (hits, None))
                .collect();
        }
        queries
            .par_iter()
            .enumerate()
            .map(|(i, q)| {
                if !valid(q) {
                    return (Vec::new(), None);
                }
                let (hits, placement) = self.coded(q, None, k, scan, &|owner| accept(i, owner));
                (at_least(hits, scan.min_cosine), placement)
            })
            .collect()
    }

    /// The exhaustive scan (also the reference the bench measures the coded scan against).
    pub fn nearest_exact<F>(&self, query: &[f32], k: usize, accept: F) -> Vec<(usize, f32)>
    where
        F: Fn(usize) -> bool + Sync,
    {
        if k == 0 || self.is_empty() || query.len() != self.dim {
            return Vec::new();
        }
        self.exact(query, k, &accept)
    }

    fn exact<F>(&self, query: &[f32], k: usize, accept: &F) -> Vec<(usize, f32)>
    where
        F: Fn(usize) -> bool + Sync,
    {
        let dot = kernels::dot_fn();
        // Each chunk hands on only its own best k: the best k of those are
        // the best k of all rows, and a million-row scan then collects
        // 1M / CHUNK_ROWS · k pairs instead of a 16 MB list of every row.
        let chunks: Vec<(usize, &[f32])> = self.data.chunks().collect();
        let scored: Vec<(usize, f32)> = chunks
            .into_par_iter()
            .flat_map_iter(|(first, rows)| {
                let chunk_hits: Vec<(usize, f32)> = rows
                    .chunks_exact(self.dim)
                    .enumerate()
                    .filter(|(i, _)| accept(self.owners[first + i]))
                    .map(|(i, row)| (self.owners[first + i], dot(row, query)))
                    .collect();
                best_k(chunk_hits, k)
            })
            .collect();
        top_k(scored, k)
    }

    /// The sign-code scan, and the query's placement when it ranked the
    /// centroids. `centroid_sims` are the query's similarities to the
    /// centroids if already known (None computes them): the batched probe's
    /// test passes the batch's, so both paths rank the same lists.
    fn coded<F>(
        &self,
        query: &[f32],
        centroid_sims: Option<&[f32]>,
        k: usize,
        scan: ScanConfig,
        accept: &F,
    ) -> (Hits, Option<Placement>)
    where
        F: Fn(usize) -> bool + Sync,
    {
        let pool = scan.rescore_pool.max(k);
        let q_code = sign_code(query, self.words);
        let words = self.words;
        let hamming = kernels::hamming_fn();
        let dot = kernels::dot_fn();
        // Rows beyond this distance are not worth a dot product.
        let limit = scan
            .min_cosine
            .map_or(u32::MAX, |c| sign_distance_bound(c, self.dim));
        let mut placement = None;
        let rows = match &self.partitions {
            Some(p) if scan.probe_share < 1.0 => {
                let want = ((self.len() as f64 * scan.probe_share) as usize).max(4 * pool);
                let own;
                let sims = match centroid_sims {
                    Some(sims) => sims,
                    None => {
                        own = p.similarities_of(query, dot);
                        &own
                    }
                };
                placement = Some(Placement {
                    training: p.training(),
                    list: most_similar(sims.iter()),
                });
                let lists: Vec<&List> = p
                    .probe(sims, want)
                    .into_iter()
                    .filter_map(|l| p.list(l))
                    .collect();
                // Each probed list (and the rows not yet in a list) in one
                // contiguous pass of distances; only rows within the limit
                // go on, in visiting order, and the filter is asked about
                // them in distance order until the pool is full. A write's
                // probe at a million rows visits ~20k rows and keeps a few
                // dozen: copying and ordering all of them cost as much as
                // their distances. A probe is a few thousand to tens of
                // thousands of rows: splitting it over the pool costs more
                // than it saves, and callers run many probes in parallel.
                let tail = p.assigned()..self.len();
                let (mut rows, mut distances) = (Vec::new(), Vec::new());
                let scan_blocks = kernels::scan_blocks_fn();
                for list in &lists {
                    let mut keep = |_, at: usize, d| {
                        rows.push(list.rows[at]);
                        distances.push(d);
                    };
                    scan_blocks(&list.codes, list.rows.len(), &[&q_code], limit, &mut keep);
                }
                let out = &mut vec![0u32; tail.len()];
                hamming(&self.codes[tail.start * words..], &q_code, out);
                keep_within(
                    tail.map(|row| row as u32),
                    out,
                    limit,
                    &mut rows,
                    &mut distances,
                );
                closest_accepted(&rows, &distances, pool, words * 64, |row| {
                    accept(self.owners[row as usize])
                })
            }
            _ if self.len() >= ONE_PASS_FROM => self
                .closest_in_pass(&q_code, limit, pool, accept)
                .unwrap_or_else(|| self.closest_by_histogram(&q_code, limit, pool, accept)),
            _ => self.closest_by_histogram(&q_code, limit, pool, accept),
        };
        (self.rescore(query, &rows, k), placement)
    }

    /// The `k` of `rows` most similar to `query` by exact cosine, as `(owner, cosine)`.
    fn rescore(&self, query: &[f32], rows: &[u32], k: usize) -> Hits {
        let dot = kernels::dot_fn();
        let rescore_run = |run: &[u32]| -> Hits {
            // Rows of mapped blocks are read into it (`Blocks::read_row`).
            let mut buf = vec![0f32; self.dim];
            run.iter()
                .enumerate()
                .filter_map(|(i, &row)| {
                    if let Some(ahead) = run
                        .get(i + PREFETCH_ROWS_AHEAD)
                        .and_then(|&r| self.data.heap_row(r as usize))
                    {
                        kernels::prefetch(ahead);
                    }
                    let vector = self.data.read_row(row as usize, &mut buf)?;
                    Some((self.owners[row as usize], dot(vector, query)))
                })
                .collect()
        };
        let scored: Hits = if rows.len() >= PARALLEL_RESCORE_FROM {
            rows.par_chunks(RESCORE_RUN)
                .flat_map_iter(rescore_run)
                .collect()
        } else {
            rescore_run(rows)
        };
        top_k(scored, k)
    }
}

/// Appends the rows of `visited` whose distance (the same position in
/// `distances`) is at most `limit` to `rows`, and their distances to `kept`.
fn keep_within(
    visited: impl Iterator<Item = u32>,
    distances: &[u32],
    limit: u32,
    rows: &mut Vec<u32>,
    kept: &mut Vec<u32>,
) {
    for (row, d) in visited.zip(distances) {
        if *d <= limit {
            rows.push(row);
            kept.push(*d);
        }
    }
}

/// The `pool` rows of smallest distance among `visited` (row, distance)
/// pairs (ties at the cut-off in visiting order), found with a histogram
/// over the possible distances instead of a sort.
fn closest<I>(visited: I, pool: usize, max_distance: usize) -> Vec<u32>
where
    I: Iterator<Item = (u32, u32)> + Clone,
{
    let mut histogram = vec![0usize; max_distance + 1];
    for (_, d) in visited.clone() {
        histogram[(d as usize).min(max_distance)] += 1;
    }
    let (mut cutoff, mut below) = (0usize, 0usize);
    while cutoff < histogram.len() && below + histogram[cutoff] <= pool {
        below += histogram[cutoff];
        cutoff += 1;
    }
    let mut at_cutoff = pool - below;
    visited
        .filter(|(_, d)| {
            let d = (*d as usize).min(max_distance);
            if d < cutoff {
                true
            } else if d == cutoff && at_cutoff > 0 {
                at_cutoff -= 1;
                true
            } else {
                false
            }
        })
        .map(|(row, _)| row)
        .collect()
}

/// The `pool` rows of smallest distance that `accept` takes (ties at the
/// cut-off in row order), as [`closest`] over every accepted row would
/// give, asking the filter about the nearest rows first: `distances` holds
/// every row's (`u32::MAX`: beyond the limit), `histogram` how many rows
/// lie at each distance. The filter is asked about the rows within the
/// distance that holds a quarter more than the pool (each ask reads the
/// row's owner and the owner's state: two cache misses), then, if it took
/// fewer than the pool, about the rows out to a distance its share of
/// takers says will fill it, and so on. A recall's filter (bank, state,
/// expiry) takes most rows, so it is asked about a thousand-odd rows
/// instead of every one (in `recall-bench scale --sentence-vectors` at
/// 100k it had been 11 % of the CPU samples), and the rows are found on
/// the pool instead of in two passes on one thread:
/// `vector_scan/coded/100000` went from 548 to 271 µs, `coded_filtered`
/// from 616 to 300 µs. Asking a quarter more than the pool instead of
/// twice it, with [`rows_between`], took `coded_filtered` from 345–351 to
/// 226–307 µs (three interleaved runs each).
fn closest_filtered<F>(distances: &[u32], histogram: &[usize], pool: usize, accept: F) -> Vec<u32>
where
    F: Fn(usize) -> bool,
{
    let max_distance = histogram.len() - 1;
    let total: usize = histogram.iter().sum();
    // (row, distance) of the accepted rows within `asked`.
    let mut taken: Vec<(u32, u32)> = Vec::new();
    let mut asked = None::<u32>;
    let mut want = pool.saturating_add(pool / 4);
    loop {
        // The smallest distance with at least `want` rows at or below it.
        let (mut bound, mut count) = (0usize, histogram[0]);
        while count < want && bound < max_distance {
            bound += 1;
            count += histogram[bound];
        }
        let bound = bound as u32;
        // The rows in (asked, bound], found chunk by chunk on the pool
        // (rows beyond the limit are u32::MAX, beyond any bound).
        let from = asked.map_or(0, |a| a + 1);
        let fresh: Vec<(u32, u32)> = distances
            .par_chunks(CHUNK_ROWS)
            .enumerate()
            .flat_map_iter(|(chunk, ds)| rows_between(ds, chunk * CHUNK_ROWS, from, bound))
            .collect();
        taken.extend(fresh.into_iter().filter(|(row, _)| accept(*row as usize)));
        asked = Some(bound);
        let within = count;
        if taken.len() >= pool || within >= total {
            break;
        }
        // Ask far enough that the share taken so far would fill the pool,
        // and at least twice as far as before.
        let share = taken.len().max(1) as f64 / within.max(1) as f64;
        want = ((pool as f64 / share * 1.5) as usize).max(within.saturating_mul(2));
    }
    // Row order, as a pass over every row hands them on.
    taken.sort_unstable_by_key(|(row, _)| *row);
    closest(taken.into_iter(), pool, max_distance)
}

/// `(first + i, d)` for each `distances[i] = d` in `from..=to`, in row
/// order. Most rows lie beyond `to`: each block of 16 is first checked
/// without a branch (vector compares), and only blocks holding a row are
/// walked one by one. This pass over every row had been 8 % of recall's
/// CPU samples in `recall-bench scale --sentence-vectors` at 100k.
fn rows_between(distances: &[u32], first: usize, from: u32, to: u32) -> Vec<(u32, u32)> {
    const BLOCK: usize = 16;
    let mut rows = Vec::new();
    let Some(span) = to.checked_sub(from) else {
        return rows;
    };
    let within = |d: u32| d.wrapping_sub(from) <= span;
    for (b, block) in distances.chunks(BLOCK).enumerate() {
        // An `or` and not a count: a sum's overflow checks (on in the dev
        // profile the benches run in) kept the loop from vectorizing.
        if !block.iter().fold(false, |any, &d| any | within(d)) {
            continue;
        }
        let at = first + b * BLOCK;
        rows.extend(
            block
                .iter()
                .enumerate()
                .filter(|(_, d)| within(**d))
                .map(|(i, &d)| ((at + i) as u32, d)),
        );
    }
    rows
}

/// The first `pool` rows that `accept` takes, in order of distance (ties
/// in visiting order): a counting sort over the possible distances, so the
/// filter is asked about as few rows as the pool needs. The caller keeps
/// only rows within its limit ([`keep_within`]).
fn closest_accepted<F>(
    rows: &[u32],
    distances: &[u32],
    pool: usize,
    max_distance: usize,
    accept: F,
) -> Vec<u32>
where
    F: Fn(u32) -> bool,
{
    let bucket = |d: u32| (d as usize).min(max_distance);
    let mut starts = vec![0usize; max_distance + 2];
    for d in distances {
        starts[bucket(*d) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut ordered = vec![0u32; rows.len()];
    for (row, d) in rows.iter().zip(distances) {
        let slot = &mut starts[bucket(*d)];
        ordered[*slot] = *row;
        *slot += 1;
    }
    ordered
        .into_iter()
        .filter(|row| accept(*row))
        .take(pool)
        .collect()
}

/// `hits` without those below `min_cosine`, if one is set.
fn at_least(mut hits: Vec<(usize, f32)>, min_cosine: Option<f32>) -> Vec<(usize, f32)> {
    if let Some(min) = min_cosine {
        hits.retain(|h| h.1 >= min);
    }
    hits
}

/// Best first: higher cosine, then lower owner.
fn by_score(a: &(usize, f32), b: &(usize, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The best `k` of `scored`, in no particular order.
fn best_k(mut scored: Vec<(usize, f32)>, k: usize) -> Vec<(usize, f32)> {
    if scored.len() > k {
        scored.select_nth_unstable_by(k - 1, by_score);
        scored.truncate(k);
    }
    scored
}

/// The best `k` of `scored`, best first.
fn top_k(scored: Vec<(usize, f32)>, k: usize) -> Vec<(usize, f32)> {
    let mut best = best_k(scored, k);
    best.sort_by(by_score);
    best
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn unit(seed: u64, dim: usize) -> Vec<f32> {
        // xorshift: deterministic pseudo-random directions
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut v: Vec<f32> = (0..dim)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    #[test]
    fn exact_scan_respects_the_filter_and_orders_by_cosine() {
        let mut set = VectorSet::new(16);
        for i in 0..100 {
            set.push(i, &unit(i as u64, 16));
        }
        let q = unit(5, 16);
        let hits = set.nearest(&q, 3, ScanConfig::default(), |o| o != 5);
        assert_eq!(hits.len(), 3);
        assert!(hits.iter().all(|(o, _)| *o != 5));
        assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1));
        let all = set.nearest(&q, 1, ScanConfig::default(), |_| true);
        assert_eq!(all[0].0, 5);
        assert!((all[0].1 - 1.0).abs() < 1e-5);
    }

    #[test]
    fn the_exact_scan_is_the_best_k_of_every_accepted_row_across_chunks() {
        // Rows over three chunks, two rows per owner (a memory and its
        // sentence), and k larger than a chunk's share of the winners.
        let dim = 16;
        let n = 2 * CHUNK_ROWS + 300;
        let mut set = VectorSet::new(dim);
        for row in 0..n {
            set.push(row / 2, &unit(row as u64 + 7, dim));
        }
        let accept = |owner: usize| !owner.is_multiple_of(5);
        for (query_seed, k) in [(1u64, 1), (2, 50), (3, 700), (4, n)] {
            let query = unit(query_seed, dim);
            let dot = kernels::dot_fn();
            let mut every: Vec<(usize, f32)> = (0..n)
                .filter(|&row| accept(row / 2))
                .filter_map(|row| Some((row / 2, dot(set.row(row)?, &query))))
                .collect();
            every.sort_by(by_score);
            every.truncate(k);
            assert_eq!(set.nearest_exact(&query, k, accept), every, "k = {k}");
        }
    }

    /// `n` unit vectors around `topics` random centres (cosine ≈ 0.8 to their centre).
    pub(crate) fn clustered(n: usize, topics: usize, dim: usize) -> Vec<Vec<f32>> {
        let centres: Vec<Vec<f32>> = (0..topics).map(|t| unit(t as u64 + 1, dim)).collect();
        (0..n)
            .map(|i| {
                let c = &centres[i % topics];
                let noise = unit(1_000_003 + i as u64, dim);
                let v: Vec<f32> = c.iter().zip(&noise).map(|(a, b)| a + 0.7 * b).collect();
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.into_iter().map(|x| x / norm).collect()
            })
            .collect()
    }

    /// `n` random directions, row `i` owned by `i` and drawn from seed
    /// `first_seed + i`.
    fn random_set(n: usize, dim: usize, first_seed: u64) -> VectorSet {
        let vectors: Vec<Vec<f32>> = (0..n).map(|i| unit(first_seed + i as u64, dim)).collect();
        filled(&vectors, dim)
    }

    /// A scan over every row's sign code beyond `exact_limit` rows.
    pub(crate) fn every_row(exact_limit: usize, rescore_pool: usize) -> ScanConfig {
        ScanConfig {
            exact_limit,
            rescore_pool,
            probe_share: 1.0,
            min_cosine: None,
        }
    }

    /// A set holding `vectors`, each owned by its index.
    pub(crate) fn filled(vectors: &[Vec<f32>], dim: usize) -> VectorSet {
        let mut set = VectorSet::new(dim);
        for (i, v) in vectors.iter().enumerate() {
            set.push(i, v);
        }
        set
    }

    #[test]
    fn partitioned_scan_keeps_the_exact_neighbours_and_reaches_unassigned_rows() {
        let dim = 48;
        let vectors = clustered(20_000, 400, dim);
        let mut set = filled(&vectors, dim);
        let partitions = set
            .partitions
            .as_ref()
            .expect("partitioned past 16,384 rows");
        assert!(partitions.assigned() > 16_000 && partitions.assigned() <= set.len());
        let scan = ScanConfig {
            probe_share: 0.1,
            ..ScanConfig::default()
        };
        let mut overlap = 0;
        for q in 0..50 {
            let query = &vectors[q * 397];
            let exact = set.nearest_exact(query, 10, |_| true);
            let got = set.nearest(query, 10, scan, |_| true);
            overlap += got.iter().filter(|h| exact.contains(h)).count();
        }
        assert!(overlap >= 490, "recall@10 {}/500", overlap);
        // A row pushed after the last assignment is still found, and the filter holds.
        let odd = unit(77, dim);
        set.push(99_999, &odd);
        assert_eq!(set.nearest(&odd, 1, scan, |_| true)[0].0, 99_999);
        assert!(
            set.nearest(&odd, 5, scan, |o| o != 99_999)
                .iter()
                .all(|h| h.0 != 99_999)
        );
    }

    /// The shape of the write path's near-copy search (2 % probe, pool of 64).
    fn near_copy_scan(min_cosine: Option<f32>) -> ScanConfig {
        ScanConfig {
            exact_limit: 1024,
            rescore_pool: 64,
            probe_share: 0.02,
            min_cosine,
        }
    }

    #[test]
    fn a_batch_of_probes_finds_what_single_probes_find() {
        let dim = 48;
        let vectors = clustered(18_000, 300, dim);
        let set = filled(&vectors, dim);
        let scan = near_copy_scan(None);
        let queries: Vec<&[f32]> = (0..40).map(|q| vectors[q * 443].as_slice()).collect();
        // Odd queries may not see even owners: the filter is per query.
        let accept = |q: usize, owner: usize| q.is_multiple_of(2) || !owner.is_multiple_of(2);
        let batch = set.nearest_many(&queries, 6, scan, accept);
        for (q, query) in queries.iter().enumerate() {
            let single = set.nearest(query, 6, scan, |owner| accept(q, owner));
            assert_eq!(batch[q], single, "query {q}");
            assert!(batch[q].iter().all(|(owner, _)| accept(q, *owner)));
        }
        // Each even query is a stored row: it finds itself first.
        assert!((0..40).step_by(2).all(|q| batch[q][0].0 == q * 443));
    }

    #[test]
    fn placed_rows_join_the_lists_a_batch_assignment_picks() {
        let dim = 48;
        let vectors = clustered(20_000, 300, dim);
        let (first, rest) = vectors.split_at(18_000);
        let mut placed = filled(first, dim);
        for (b, batch) in rest.chunks(500).enumerate() {
            let queries: Vec<&[f32]> = batch.iter().map(|v| v.as_slice()).collect();
            let found = placed.nearest_many_placed(&queries, 6, near_copy_scan(None), |_, _| true);
            for (i, (v, (_, placement))) in batch.iter().zip(found).enumerate() {
                assert!(placement.is_some());
                placed.push_placed(18_000 + b * 500 + i, v, placement);
            }
        }
        let lists = placed.partitions.as_ref().expect("partitioned");
        assert_eq!(lists.assigned(), 20_000, "no row waits for assignment");
        // The same rows pushed plainly are assigned in batches of 1,024.
        let plain = filled(&vectors, dim);
        let batch_assigned = plain.partitions.as_ref().expect("partitioned");
        assert_eq!(batch_assigned.assigned(), 19_456);
        for row in 18_000..19_456 {
            assert_eq!(lists.list_of(row), batch_assigned.list_of(row), "row {row}");
        }
        // A placement from another training is not used: the row waits.
        let mut other = filled(first, dim);
        let v = rest[0].as_slice();
        let (_, stale) = placed
            .nearest_many_placed(&[v], 6, near_copy_scan(None), |_, _| true)
            .remove(0);
        other.push_placed(18_000, v, stale);
        let waiting = other.partitions.as_ref().expect("partitioned");
        assert_eq!(waiting.assigned(), 17_408);
        assert_eq!(waiting.list_of(18_000), None);
    }

    #[test]
    fn a_cosine_floor_keeps_every_near_copy_and_drops_the_rest() {
        let dim = 384;
        let vectors = clustered(17_000, 300, dim);
        let set = filled(&vectors, dim);
        let floor = near_copy_scan(Some(0.82));
        // Near copies of stored rows (cosine ≈ 0.96 to their row) and rows
        // of no cluster at all.
        let queries: Vec<Vec<f32>> = (0..60)
            .map(|q| match q % 3 {
                0 => unit(5_000_000 + q as u64, dim),
                _ => {
                    let row = &vectors[q * 271];
                    let noise = unit(7_000_000 + q as u64, dim);
                    let v: Vec<f32> = row.iter().zip(&noise).map(|(a, b)| a + 0.3 * b).collect();
                    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    v.into_iter().map(|x| x / norm).collect()
                }
            })
            .collect();
        let refs: Vec<&[f32]> = queries.iter().map(|q| q.as_slice()).collect();
        let found = set.nearest_many(&refs, 6, floor, |_, _| true);
        for (q, hits) in found.iter().enumerate() {
            let mut exact = set.nearest_exact(&queries[q], 6, |_| true);
            exact.retain(|h| h.1 >= 0.82);
            assert_eq!(hits, &exact, "query {q}");
            assert_eq!(hits.is_empty(), q % 3 == 0, "query {q}");
        }
    }

    #[test]
    fn closest_filtered_is_closest_over_every_accepted_row() {
        // Distances 0..=40 with many ties, some rows beyond the limit; the
        // filter takes every row, most, a few, one, or none.
        let max_distance = 40;
        let mut s = 7u64;
        let distances: Vec<u32> = (0..5_000)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                if s.is_multiple_of(50) {
                    u32::MAX
                } else {
                    (s % 41) as u32
                }
            })
            .collect();
        let mut histogram = vec![0usize; max_distance + 1];
        for &d in distances.iter().filter(|d| **d != u32::MAX) {
            histogram[d as usize] += 1;
        }
        let filters: [&dyn Fn(usize) -> bool; 5] = [
            &|_| true,
            &|row| row % 7 != 0,
            &|row| row % 97 == 3,
            &|row| row == 4_321,
            &|_| false,
        ];
        for (f, accept) in filters.iter().enumerate() {
            for pool in [1, 10, 100, 1_000, 4_999, 6_000] {
                let every = distances
                    .iter()
                    .enumerate()
                    .filter(|(row, d)| **d != u32::MAX && accept(*row))
                    .map(|(row, d)| (row as u32, *d));
                let expected = closest(every, pool, max_distance);
                let got = closest_filtered(&distances, &histogram, pool, accept);
                assert_eq!(got, expected, "filter {f}, pool {pool}");
            }
        }
    }

    #[test]
    fn rows_between_keeps_exactly_the_rows_in_range_numbered_from_first() {
        // 1,000 rows (not a whole number of blocks), distances 0..=30 and
        // some beyond the limit; ranges empty, narrow, whole and reversed.
        let distances: Vec<u32> = (0..1_000u32)
            .map(|i| {
                if i % 37 == 0 {
                    u32::MAX
                } else {
                    (i * 7919) % 31
                }
            })
            .collect();
        for (from, to) in [(0, 0), (0, 30), (3, 3), (5, 12), (30, 30), (31, 40), (9, 4)] {
            let expected: Vec<(u32, u32)> = distances
                .iter()
                .enumerate()
                .filter(|(_, d)| (from..=to).contains(*d))
                .map(|(i, d)| (500 + i as u32, *d))
                .collect();
            assert_eq!(
                rows_between(&distances, 500, from, to),
                expected,
                "{from}..={to}"
            );
        }
    }

    #[test]
    fn closest_accepted_orders_by_distance_and_skips_rejected_rows() {
        let rows = [10, 11, 12, 13, 14, 15];
        let distances = [5, 1, 9, 1, 0, 3];
        let got = closest_accepted(&rows, &distances, 3, 8, |row| row != 14);
        assert_eq!(got, vec![11, 13, 15]);
        // Distances past the maximum share its bucket, after the others.
        let got = closest_accepted(&rows, &distances, 6, 8, |_| true);
        assert_eq!(got, vec![14, 11, 13, 15, 10, 12]);
    }

    #[test]
    fn rows_beyond_the_limit_are_never_kept() {
        let distances = [5, 1, 9, 1, 0, 3];
        let (mut rows, mut kept) = (vec![1], vec![7]);
        keep_within(10..16, &distances, 3, &mut rows, &mut kept);
        assert_eq!(rows, vec![1, 11, 13, 14, 15]);
        assert_eq!(kept, vec![7, 1, 1, 0, 3]);
    }

    #[test]
    fn a_pool_covering_every_row_re_scores_exactly_what_the_exact_scan_reports() {
        let dim = 64;
        let set = random_set(3000, dim, 7);
        // Every row is re-scored, in runs spread over the pool: nothing may
        // be lost or changed at a run's end, where the look-ahead stops.
        let scan = every_row(100, 3000);
        let accept = |owner: usize| !owner.is_multiple_of(3);
        for seed in [11, 12, 13] {
            let q = unit(seed, dim);
            let coded = set.nearest(&q, 200, scan, accept);
            let exact = set.nearest_exact(&q, 200, accept);
            assert_eq!(coded.len(), 200);
            assert_eq!(coded, exact, "query {seed}");
        }
    }

    #[test]
    fn coded_scan_finds_the_exact_neighbours_of_a_near_copy() {
        let dim = 64;
        let set = random_set(3000, dim, 1);
        let scan = every_row(100, 300);
        let q = unit(1234, dim);
        let coded = set.nearest(&q, 5, scan, |_| true);
        let exact = set.nearest_exact(&q, 5, |_| true);
        assert_eq!(coded[0], exact[0]);
        assert_eq!(coded[0].0, 1233);
    }
}
