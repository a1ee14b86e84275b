//! The full code pass of a whole batch, a tile of rows at a time, and of
//! one query over a large tenant ([`VectorSet::closest_in_pass`]): both keep,
//! per task, only the rows within a running cut-off.
//!
//! Query by query, the full pass reads every row's sign code from memory
//! (48 MB at a million 384-dimension rows) for a few bit counts per row: it
//! is bound by memory bandwidth, which the cores share. A batch spread over
//! 2 threads that way ran 1.51–2.07× as fast as on 1 at a million rows
//! (`recall-bench scale`, seven runs, 223–245 q/s on 1 thread). Here a tile
//! of codes is read once for a group of queries and compared with each
//! while it sits in cache, so the pass is bound by the bit counts, which
//! scale with the cores: 443–501 q/s on 1 thread and 1.85–2.08× that on 2,
//! in the same runs. At 100k rows the codes fit in the last-level cache and
//! the two ways are within run-to-run noise.
//!
//! A task compares a group of queries with a stretch of rows: a batch of a
//! few hundred has enough groups for each to pass over all the rows, a
//! small one cuts the rows into stretches. Every query keeps, per task, the
//! rows within its running cut-off. Its tasks' rows, joined in row order,
//! hold every row the query-by-query pass would re-score, and [`closest`]
//! over them picks exactly those (ties in row order), so a query's hits do
//! not depend on its batch.

use rayon::prelude::*;

use super::{Hits, ScanConfig, VectorSet, at_least, closest, closest_filtered};
use crate::blocks::CHUNK_ROWS;
use crate::codes::{sign_code, sign_distance_bound};
use crate::kernels;

/// Queries compared with a tile while it sits in cache (a tile's codes
/// come from memory once per group). Measured in one process, the sizes
/// taking turns pass by pass (`scale`'s batch of 100 queries, 4 rounds of
/// 10 passes, q/s on 1 / 2 threads): at 1M rows 16 gave 317–371 / 474–620
/// (×1.40–1.73), 8 gave 302–363 / 591–686 (×1.76–1.96) and 4 gave 281–336 /
/// 525–653 (×1.82–1.98); at 100k, ×1.30–1.53, ×1.65–1.97 and ×1.65–1.87.
/// With 16, a batch of 100 makes 7 groups, fewer than the tasks 2 threads
/// want, so only the 2-thread pass also cut the rows into stretches; we
/// think that is where its loss comes from.
const GROUP_QUERIES: usize = 8;
/// Tasks per thread: a few, so a thread that finishes early takes another.
const TASKS_PER_THREAD: usize = 4;
/// Queries per pass over the rows: 128 groups, a few dozen MB of kept rows
/// at the default pool.
const PASS_QUERIES: usize = 1_024;

/// One query's rows within its running cut-off, in one task, in row order.
struct Kept {
    rows: Vec<u32>,
    distances: Vec<u32>,
    /// How many kept rows lie at each distance.
    histogram: Vec<u32>,
    /// Later rows are kept only below this distance. Once `pool` kept rows
    /// lie within distance `t`, no later row at `t` or beyond can be among
    /// the query's `pool` closest: ties go to the earlier rows.
    admit: u32,
}

impl Kept {
    fn new(limit: u32, max_distance: usize) -> Kept {
        Kept {
            rows: Vec::new(),
            distances: Vec::new(),
            histogram: vec![0; max_distance + 1],
            admit: limit + 1,
        }
    }

    fn push(&mut self, row: u32, distance: u32) {
        self.rows.push(row);
        self.distances.push(distance);
        self.histogram[distance as usize] += 1;
    }

    /// Finds the smallest distance `t` within which `pool` kept rows lie,
    /// admits later rows only below it, and drops the kept rows beyond it
    /// (those at `t` stay: whether they are needed depends on the rows
    /// other tasks found before them).
    fn tighten(&mut self, pool: usize) {
        if let Some(cutoff) = self.cutoff(pool) {
            self.admit = self.admit.min(cutoff as u32);
            self.drop_beyond(cutoff);
        }
    }

    /// [`Kept::tighten`], but rows at the cut-off are still admitted: every
    /// row nearer than `admit` is then kept, whichever task it fell to.
    fn tighten_keeping_ties(&mut self, pool: usize) {
        if let Some(cutoff) = self.cutoff(pool) {
            self.admit = self.admit.min(cutoff as u32 + 1);
            self.drop_beyond(cutoff);
        }
    }

    /// The smallest distance within which `pool` kept rows lie.
    fn cutoff(&self, pool: usize) -> Option<usize> {
        let mut within = 0usize;
        self.histogram.iter().position(|n| {
            within += *n as usize;
            within >= pool
        })
    }

    fn drop_beyond(&mut self, cutoff: usize) {
        self.histogram[cutoff + 1..].fill(0);
        let mut kept = 0;
        for i in 0..self.rows.len() {
            if self.distances[i] as usize <= cutoff {
                self.rows[kept] = self.rows[i];
                self.distances[kept] = self.distances[i];
                kept += 1;
            }
        }
        self.rows.truncate(kept);
        self.distances.truncate(kept);
    }
}

impl Kept {
    /// `self`'s rows, then `later`'s (rows that come after them), admitting
    /// below the smaller of the two cut-offs.
    fn then(mut self, later: Kept) -> Kept {
        self.rows.extend(later.rows);
        self.distances.extend(later.distances);
        self.histogram
            .iter_mut()
            .zip(later.histogram)
            .for_each(|(n, m)| *n += m);
        self.admit = self.admit.min(later.admit);
        self
    }
}

/// Rows one query's pass keeps per task before it tightens, in pools, over
/// the share of rows the filter takes: the filter is asked only about kept
/// rows, nearest first, and when it turns away so many that these do not
/// fill the pool the pass is redone storing every row's distance.
const KEPT_POOLS: usize = 2;
/// Rows, spread evenly over the set, the filter is asked about before a
/// one-pass scan: the share it takes sizes the rows each task keeps.
const SHARE_SAMPLE: usize = 256;
/// Below this share taken in the sample, the scan stores every row's
/// distance at once (`closest_by_histogram`, which asks the filter about
/// rows in order of distance until the pool is full): a recall that reads
/// a small bank of a large tenant would otherwise pass over it twice.
const MIN_ONE_PASS_SHARE: f64 = 0.125;

impl VectorSet {
    /// The `pool` rows closest to `q_code` within `limit` whose owner
    /// `accept` takes (ties in row order), in row order, from one pass over
    /// every row's code that keeps, per task, only the rows within its
    /// running cut-off (nothing per row is stored). None when the filter
    /// takes less than [`MIN_ONE_PASS_SHARE`] of a sample of the rows, or
    /// turned away so many kept rows that they cannot say which rows fill
    /// the pool.
    ///
    /// Every row nearer than the smallest cut-off `c` any task reached is
    /// kept: a task's cut-off only falls, and it drops only rows at or
    /// beyond it. The task that reached `c` holds at least twice the pool
    /// below it.
    /// So the first `pool` accepted rows below `c`, nearest first, are the
    /// first `pool` accepted rows of all, and when the filter takes fewer
    /// than `pool` of them and some task did tighten, rows at `c` or beyond
    /// may be needed: None.
    pub(super) fn closest_in_pass<F>(
        &self,
        q_code: &[u64],
        limit: u32,
        pool: usize,
        accept: &F,
    ) -> Option<Vec<u32>>
    where
        F: Fn(usize) -> bool + Sync,
    {
        let words = self.words;
        let max_distance = words * 64;
        let limit = limit.min(max_distance as u32);
        let below = kernels::hamming_below_fn();
        let step = (self.len() / SHARE_SAMPLE).max(1);
        let (asked, took) = (0..self.len())
            .step_by(step)
            .take(SHARE_SAMPLE)
            .fold((0usize, 0usize), |(asked, took), row| {
                (asked + 1, took + usize::from(accept(self.owners[row])))
            });
        let share = took as f64 / asked.max(1) as f64;
        if share < MIN_ONE_PASS_SHARE {
            return None;
        }
        let keep = (pool.saturating_mul(KEPT_POOLS) as f64 / share).ceil() as usize;
        let mut kept = self
            .codes
            .par_chunks(words * CHUNK_ROWS)
            .enumerate()
            .fold(
                || Kept::new(limit, max_distance),
                |mut kept, (chunk, codes)| {
                    let first = chunk * CHUNK_ROWS;
                    let admit = kept.admit;
                    below(codes, q_code, admit, &mut |row, d| {
                        kept.push((first + row) as u32, d)
                    });
                    // Amortized: tighten once the task holds twice the rows.
                    if kept.rows.len() >= 2 * keep {
                        kept.tighten_keeping_ties(keep);
                    }
                    kept
                },
            )
            .reduce(|| Kept::new(limit, max_distance), Kept::then);
        // The tasks together hold many pools; ordering only the nearest
        // costs a pass instead of a sort of all.
        kept.tighten_keeping_ties(keep);
        let complete = kept.admit > limit;
        let mut near: Vec<(u32, u32)> = kept
            .rows
            .into_iter()
            .zip(kept.distances)
            .filter(|(_, d)| *d < kept.admit)
            .collect();
        near.sort_unstable_by_key(|&(row, d)| (d, row));
        let mut taken: Vec<u32> = Vec::with_capacity(pool.min(near.len()));
        for (row, _) in near {
            if taken.len() == pool {
                break;
            }
            if accept(self.owners[row as usize]) {
                taken.push(row);
            }
        }
        if taken.len() < pool && !complete {
            return None;
        }
        taken.sort_unstable();
        Some(taken)
    }

    /// The `pool` rows closest to `q_code` whose owner `accept` takes (ties
    /// in row order), from every row's distance: what
    /// [`VectorSet::closest_in_pass`] gives, for the filters that reject
    /// too many of the rows that pass keeps.
    pub(super) fn closest_by_histogram<F>(
        &self,
        q_code: &[u64],
        limit: u32,
        pool: usize,
        accept: &F,
    ) -> Vec<u32>
    where
        F: Fn(usize) -> bool + Sync,
    {
        let words = self.words;
        let hamming = kernels::hamming_fn();
        // Every row's distance (u32::MAX beyond the limit) and how
        // many rows lie at each distance, counted while the chunk
        // is in cache: no per-row tuples over the whole tenant, and
        // the filter is asked later, about the nearest rows only.
        let max_distance = words * 64;
        let mut distances = vec![0u32; self.len()];
        let histogram = distances
            .par_chunks_mut(CHUNK_ROWS)
            .zip(self.codes.par_chunks(words * CHUNK_ROWS))
            .fold(
                || vec![0usize; max_distance + 1],
                |mut histogram, (out, codes)| {
                    hamming(codes, q_code, out);
                    for d in out.iter_mut() {
                        if *d > limit {
                            *d = u32::MAX;
                        } else {
                            histogram[(*d as usize).min(max_distance)] += 1;
                        }
                    }
                    histogram
                },
            )
            .reduce(
                || vec![0usize; max_distance + 1],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                    a
                },
            );
        closest_filtered(&distances, &histogram, pool, |row| accept(self.owners[row]))
    }

    /// [`VectorSet::nearest_many`]'s full code pass (every row, no lists)
    /// for a batch: the same hits as [`VectorSet::nearest`] query by query.
    pub(super) fn full_pass_batch<F>(
        &self,
        queries: &[&[f32]],
        k: usize,
        scan: ScanConfig,
        accept: &F,
    ) -> Vec<Hits>
    where
        F: Fn(usize, usize) -> bool + Sync,
    {
        // Each query holds up to twice its pool of rows per task while the
        // pass runs (16 KB at the default pool): a large batch goes through
        // in parts, so that stays bounded.
        let mut hits = Vec::with_capacity(queries.len());
        for (part, queries) in queries.chunks(PASS_QUERIES).enumerate() {
            let first = part * PASS_QUERIES;
            hits.extend(self.pass(queries, k, scan, &|q, owner| accept(first + q, owner)));
        }
        hits
    }

    /// [`VectorSet::full_pass_batch`] for at most [`PASS_QUERIES`] queries.
    fn pass<F>(&self, queries: &[&[f32]], k: usize, scan: ScanConfig, accept: &F) -> Vec<Hits>
    where
        F: Fn(usize, usize) -> bool + Sync,
    {
        let pool = scan.rescore_pool.max(k);
        let words = self.words;
        let max_distance = words * 64;
        let limit = scan
            .min_cosine
            .map_or(max_distance as u32, |c| sign_distance_bound(c, self.dim))
            .min(max_distance as u32);
        let valid = |q: &[f32]| k > 0 && !self.is_empty() && q.len() == self.dim;
        let codes: Vec<Option<Vec<u64>>> = queries
            .iter()
            .map(|q| valid(q).then(|| sign_code(q, words)))
            .collect();
        let tiles = self.len().div_ceil(CHUNK_ROWS).max(1);
        let groups = queries.len().div_ceil(GROUP_QUERIES);
        // Enough tasks for every thread to take a few: a small batch cuts
        // the rows into stretches, a large one needs only its groups.
        let tasks_wanted = rayon::current_num_threads() * TASKS_PER_THREAD;
        let stretches = tasks_wanted.div_ceil(groups.max(1)).clamp(1, tiles);
        let per_stretch = tiles.div_ceil(stretches);
        let hamming = kernels::hamming_fn();
        // Task `g * stretches + s`: group g's queries over stretch s's rows.
        let by_task: Vec<Vec<Kept>> = (0..groups * stretches)
            .into_par_iter()
            .map(|task| {
                let (group, stretch) = (task / stretches, task % stretches);
                let first_query = group * GROUP_QUERIES;
                let codes = &codes[first_query..(first_query + GROUP_QUERIES).min(codes.len())];
                let mut kept: Vec<Kept> = codes
                    .iter()
                    .map(|_| Kept::new(limit, max_distance))
                    .collect();
                let mut out = vec![0u32; CHUNK_ROWS];
                let first_tile = stretch * per_stretch;
                for tile in first_tile..(first_tile + per_stretch).min(tiles) {
                    let first = tile * CHUNK_ROWS;
                    let rows = CHUNK_ROWS.min(self.len() - first);
                    let tile_codes = &self.codes[first * words..(first + rows) * words];
                    let out = &mut out[..rows];
                    for (j, (code, kept)) in codes.iter().zip(&mut kept).enumerate() {
                        let Some(code) = code else { continue };
                        hamming(tile_codes, code, out);
                        let admit = kept.admit;
                        for (at, d) in out.iter().enumerate() {
                            if *d < admit && accept(first_query + j, self.owners[first + at]) {
                                kept.push((first + at) as u32, *d);
                            }
                        }
                        // Amortized: tighten once the task holds twice the pool.
                        if kept.rows.len() >= 2 * pool {
                            kept.tighten(pool);
                        }
                    }
                }
                kept
            })
            .collect();
        (0..queries.len())
            .into_par_iter()
            .map(|i| {
                if codes[i].is_none() {
                    return Vec::new();
                }
                let (group, j) = (i / GROUP_QUERIES, i % GROUP_QUERIES);
                let tasks = &by_task[group * stretches..(group + 1) * stretches];
                let visited = tasks.iter().flat_map(|kept| {
                    let kept = &kept[j];
                    kept.rows
                        .iter()
                        .copied()
                        .zip(kept.distances.iter().copied())
                });
                let rows = closest(visited, pool, max_distance);
                at_least(self.rescore(queries[i], &rows, k), scan.min_cosine)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::tests::{clustered, every_row, filled, unit};

    /// Every query of the batch against the same query asked alone.
    fn assert_batch_matches_single<F>(
        set: &VectorSet,
        queries: &[&[f32]],
        k: usize,
        scan: ScanConfig,
        accept: F,
    ) where
        F: Fn(usize, usize) -> bool + Sync,
    {
        let batch = set.full_pass_batch(queries, k, scan, &accept);
        assert_eq!(batch.len(), queries.len());
        for (q, query) in queries.iter().enumerate() {
            let single = set.nearest(query, k, scan, |owner| accept(q, owner));
            assert_eq!(batch[q], single, "query {q}");
        }
    }

    #[test]
    fn a_batch_scanned_tile_by_tile_finds_what_each_query_finds_alone() {
        let dim = 48;
        // Beyond one tile per stretch, with a partial last tile.
        let vectors = clustered(3 * CHUNK_ROWS * TASKS_PER_THREAD + 777, 200, dim);
        let set = filled(&vectors, dim);
        let scan = every_row(100, 40);
        // Stored rows, new directions, and one of the wrong length.
        let fresh: Vec<Vec<f32>> = (0..8).map(|s| unit(90_000 + s, dim)).collect();
        let short = vec![0.5f32; dim - 1];
        let mut queries: Vec<&[f32]> = vectors.iter().step_by(997).map(Vec::as_slice).collect();
        queries.extend(fresh.iter().map(Vec::as_slice));
        queries.push(&short);
        let accept = |q: usize, owner: usize| !(owner + q).is_multiple_of(5);
        assert_batch_matches_single(&set, &queries, 7, scan, accept);
        // A cosine floor, and a pool smaller than k.
        let floor = ScanConfig {
            min_cosine: Some(0.6),
            rescore_pool: 3,
            ..scan
        };
        assert_batch_matches_single(&set, &queries, 5, floor, |_, _| true);
        let batch = set.full_pass_batch(&queries, 5, floor, &|_, _| true);
        assert!(
            batch[0].first().is_some_and(|h| h.0 == 0),
            "a stored row finds itself"
        );
        assert!(
            batch.last().is_some_and(Vec::is_empty),
            "a query of the wrong length finds nothing"
        );
    }

    #[test]
    fn a_batch_larger_than_one_pass_asks_the_filter_about_the_right_queries() {
        let dim = 32;
        let vectors = clustered(3_000, 50, dim);
        let set = filled(&vectors, dim);
        let scan = every_row(100, 20);
        let queries: Vec<&[f32]> = (0..PASS_QUERIES + 77)
            .map(|q| vectors[(q * 7) % vectors.len()].as_slice())
            .collect();
        // Query q may not see the row it was made from, nor owners q apart.
        let accept =
            |q: usize, owner: usize| owner != (q * 7) % 3_000 && !(owner + q).is_multiple_of(3);
        assert_batch_matches_single(&set, &queries, 4, scan, accept);
    }

    /// The one-pass selection against the histogram of every row's
    /// distance, over filters that take all, most, a few, one or no rows,
    /// and pools from a few rows to more than the filter takes.
    fn assert_pass_picks_what_every_distance_picks(set: &VectorSet, queries: &[Vec<f32>]) {
        let filters: [&(dyn Fn(usize) -> bool + Sync); 5] = [
            &|_| true,
            &|owner| !owner.is_multiple_of(5),
            &|owner| owner.is_multiple_of(97),
            &|owner| owner == 1_234,
            &|_| false,
        ];
        let bounds = [u32::MAX, sign_distance_bound(0.5, set.dim)];
        for query in queries {
            let code = sign_code(query, set.words);
            for (f, accept) in filters.iter().enumerate() {
                for pool in [3, 100, 1_000] {
                    for limit in bounds {
                        let every = set.closest_by_histogram(&code, limit, pool, accept);
                        let pass = set.closest_in_pass(&code, limit, pool, accept);
                        if f == 0 && limit == u32::MAX {
                            assert!(pass.is_some(), "a filter that takes all needs one pass");
                        }
                        let pass = pass.unwrap_or_else(|| every.clone());
                        assert_eq!(pass, every, "filter {f}, pool {pool}, limit {limit}");
                    }
                }
            }
        }
    }

    #[test]
    fn one_pass_keeps_the_rows_that_every_rows_distance_would_pick() {
        // 384 dimensions (6-word codes, the AVX-512 loop where the CPU has
        // it) and 48 (one word), over several tasks' rows.
        for dim in [384, 48] {
            let vectors = clustered(4 * CHUNK_ROWS + 777, 300, dim);
            let set = filled(&vectors, dim);
            let mut queries: Vec<Vec<f32>> = vectors.iter().step_by(2_999).cloned().collect();
            queries.push(unit(77_777, dim));
            assert_pass_picks_what_every_distance_picks(&set, &queries);
        }
        // Copies of a few directions: long runs of ties across tasks.
        let dim = 64;
        let directions: Vec<Vec<f32>> = (0..6).map(|s| unit(s, dim)).collect();
        let mut set = VectorSet::new(dim);
        for row in 0..3 * CHUNK_ROWS + 300 {
            set.push(row, &directions[(row * 7) % directions.len()]);
        }
        assert_pass_picks_what_every_distance_picks(&set, &directions);
    }

    #[test]
    fn ties_at_the_cut_off_go_to_the_earlier_rows_as_they_do_alone() {
        // Many copies of a few directions: distances tie across stretches,
        // and a small pool cuts through the ties.
        let dim = 64;
        let directions: Vec<Vec<f32>> = (0..6).map(|s| unit(s, dim)).collect();
        let mut set = VectorSet::new(dim);
        for row in 0..2 * CHUNK_ROWS * TASKS_PER_THREAD + 300 {
            set.push(row, &directions[(row * 7) % directions.len()]);
        }
        let scan = every_row(10, 25);
        let queries: Vec<&[f32]> = directions.iter().map(Vec::as_slice).collect();
        assert_batch_matches_single(&set, &queries, 10, scan, |_, _| true);
        let hits = set.full_pass_batch(&queries, 10, scan, &|_, _| true);
        // Ties in cosine rank by owner; the pool took the earliest copies.
        assert!(hits[0].windows(2).all(|w| w[0].0 < w[1].0), "{:?}", hits[0]);
        assert_eq!(hits[0][0].0, 0);
    }
}
