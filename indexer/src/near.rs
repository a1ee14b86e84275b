//! Pairs of unit vectors within a cosine of each other, found without a
//! dot product per pair.
//!
//! Two unit vectors at angle θ disagree in the sign of about θ/π of their
//! coordinates, so a sign-code Hamming distance far above that rules a
//! pair out. [`sign_distance_bound`](crate::codes::sign_distance_bound) adds a wide margin: on 8,301 texts
//! embedded with all-MiniLM-L6-v2, pairs at cosine ≥ 0.82 differed in at
//! most 95 of 384 signs (the bound allows 133) and pairs at ≥ 0.94 in at
//! most 55 (the bound allows 101), while half of all pairs differ in 171 or
//! more. Only the pairs under the bound get an exact dot product. An
//! embedder whose vectors are all-positive or otherwise sign-degenerate
//! loses nothing: its codes differ little, so every pair is checked.

use rayon::prelude::*;

use crate::codes::{sign_code, sign_distance_bound};
use crate::kernels;

/// For each vector, the earlier vectors of `vectors` whose cosine to it is
/// at least `min_cosine`, as `(index, cosine)` in index order. The vectors
/// are unit length and of one width (any of another width than the first
/// pairs with nothing). Pairs whose sign codes differ beyond
/// `sign_distance_bound` (a margin over the cosine bound) are skipped
/// without a dot product, so a batch of a thousand costs about a
/// millisecond instead of a full cosine matrix.
///
/// ```
/// use recall_indexer::near_pairs;
/// let a = [1.0, 0.0];
/// let b = [0.8, 0.6];
/// let c = [0.0, -1.0];
/// let pairs = near_pairs(&[&a, &b, &c], 0.75);
/// assert_eq!(pairs[1], vec![(0, 0.8)]);
/// assert!(pairs[0].is_empty() && pairs[2].is_empty());
/// ```
pub fn near_pairs(vectors: &[&[f32]], min_cosine: f32) -> Vec<Vec<(usize, f32)>> {
    let Some(dim) = vectors.first().map(|v| v.len()) else {
        return Vec::new();
    };
    let words = dim.div_ceil(64);
    let codes: Vec<u64> = vectors.iter().flat_map(|v| sign_code(v, words)).collect();
    let limit = sign_distance_bound(min_cosine, dim);
    let (hamming, dot) = (kernels::hamming_fn(), kernels::dot_fn());
    (0..vectors.len())
        .into_par_iter()
        .map_init(Vec::new, |distances: &mut Vec<u32>, r| {
            if vectors[r].len() != dim {
                return Vec::new();
            }
            distances.clear();
            distances.resize(r, 0);
            hamming(
                &codes[..r * words],
                &codes[r * words..(r + 1) * words],
                distances,
            );
            distances
                .iter()
                .enumerate()
                .filter(|(c, d)| **d <= limit && vectors[*c].len() == dim)
                .map(|(c, _)| (c, dot(vectors[r], vectors[c])))
                .filter(|(_, cos)| *cos >= min_cosine)
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::tests::unit;

    /// `base` nudged towards `other` by `t`, renormalized.
    fn blend(base: &[f32], other: &[f32], t: f32) -> Vec<f32> {
        let v: Vec<f32> = base.iter().zip(other).map(|(a, b)| a + t * b).collect();
        let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.into_iter().map(|a| a / norm).collect()
    }

    #[test]
    fn finds_the_same_pairs_as_every_dot_product() {
        let dim = 384;
        // Forty topics; each item is its topic nudged by noise, at cosines
        // spread around the 0.82 cut-off.
        let topics: Vec<Vec<f32>> = (0..40).map(|t| unit(1000 + t, dim)).collect();
        let items: Vec<Vec<f32>> = (0..600)
            .map(|i| {
                blend(
                    &topics[i % 40],
                    &unit(i as u64 + 1, dim),
                    0.3 + (i % 7) as f32 * 0.12,
                )
            })
            .collect();
        let refs: Vec<&[f32]> = items.iter().map(|v| v.as_slice()).collect();
        let got = near_pairs(&refs, 0.82);
        let mut pairs = 0;
        for (r, row) in items.iter().enumerate() {
            let want: Vec<usize> = (0..r)
                .filter(|c| row.iter().zip(&items[*c]).map(|(a, b)| a * b).sum::<f32>() >= 0.82)
                .collect();
            let found: Vec<usize> = got[r].iter().map(|(c, _)| *c).collect();
            assert_eq!(found, want, "item {r}");
            pairs += want.len();
        }
        assert!(
            pairs > 500,
            "the fixture should hold near pairs, has {pairs}"
        );
    }
}
