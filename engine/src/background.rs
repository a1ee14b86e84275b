//! What an unrelated memory looks like to a query: the cosines of the
//! query to a fixed sample of the memories it may read.
//!
//! A raw cosine means different things in different stores: in a
//! conversation log where every turn names its speaker, a question's
//! closest turn is above .4 even when the conversation never answers it;
//! among chat messages an answering turn can sit at .2. Every recall
//! reports this background ([`crate::RecallResult::background`]) so a
//! caller can see how far its hits stand above the rest of the store, and
//! the abstention gate can be measured from it
//! ([`crate::ScoringConfig::min_evidence_margin`], off by default).
//!
//! The sample is every `n / SAMPLE`-th readable memory (the same rows for
//! every query, so a result is reproducible), each at the larger of its
//! whole vector's and its closest sentence's cosine, as candidates are.

use serde::Serialize;

/// Memories sampled at most. 256 cosines estimate a mean and spread to a
/// few hundredths and cost a few microseconds at any store size.
pub(crate) const SAMPLE: usize = 256;

/// The query's cosines to a sample of the memories it may read.
///
/// ```
/// # use recall::Background;
/// let b = Background { mean: 0.10, sd: 0.05, sampled: 200 };
/// assert!((b.z(0.30) - 4.0).abs() < 1e-5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Background {
    /// Mean cosine.
    pub mean: f32,
    /// Standard deviation of the cosines.
    pub sd: f32,
    /// Memories sampled.
    pub sampled: usize,
}

impl Background {
    /// The mean and spread of `cosines`; None for fewer than two.
    pub(crate) fn of(cosines: &[f32]) -> Option<Background> {
        let n = cosines.len();
        if n < 2 {
            return None;
        }
        let mean = cosines.iter().sum::<f32>() / n as f32;
        let var = cosines.iter().map(|c| (c - mean) * (c - mean)).sum::<f32>() / (n - 1) as f32;
        Some(Background {
            mean,
            sd: var.sqrt(),
            sampled: n,
        })
    }

    /// How many standard deviations `cosine` stands above the mean. The
    /// spread is taken as at least 0.02: in a store of near-identical
    /// memories a tiny spread would make any difference look large.
    pub fn z(&self, cosine: f32) -> f32 {
        (cosine - self.mean) / self.sd.max(MIN_SD)
    }
}

/// The least spread [`Background::z`] divides by.
const MIN_SD: f32 = 0.02;

/// Rows looked at per sample at most: a scope that keeps few of a large
/// store's rows readable gets a smaller sample rather than a full pass.
const MAX_VISITS: usize = 16 * SAMPLE;

/// Rows `0..n` to sample: every `n / SAMPLE`-th, among those `readable`
/// says the caller may see, with `cosine` of each; at most [`SAMPLE`].
/// When too few of those rows are readable, further passes start one row
/// later, up to [`MAX_VISITS`] rows looked at.
pub(crate) fn sample(
    n: usize,
    readable: impl Fn(usize) -> bool,
    cosine: impl Fn(usize) -> Option<f32>,
) -> Option<Background> {
    let stride = (n / SAMPLE).max(1);
    let mut cosines = Vec::with_capacity(SAMPLE.min(n));
    let rows = (0..stride).flat_map(|offset| (offset..n).step_by(stride));
    for i in rows.take(MAX_VISITS) {
        if cosines.len() == SAMPLE {
            break;
        }
        if readable(i)
            && let Some(c) = cosine(i)
        {
            cosines.push(c);
        }
    }
    Background::of(&cosines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_spread_of_a_known_sample() {
        let b = Background::of(&[0.1, 0.2, 0.3]).unwrap();
        assert!((b.mean - 0.2).abs() < 1e-6);
        assert!((b.sd - 0.1).abs() < 1e-6);
        assert_eq!(Background::of(&[0.5]), None);
    }

    #[test]
    fn a_large_store_is_sampled_at_a_stride_and_only_readable_rows_count() {
        let b = sample(10_000, |i| i % 2 == 0, |i| Some(i as f32)).unwrap();
        assert_eq!(b.sampled, SAMPLE);
        // Readable rows only: every sampled cosine is even.
        let odd = sample(10_000, |i| i % 2 == 1, |i| Some((i % 2) as f32)).unwrap();
        assert!((odd.mean - 1.0).abs() < 1e-6);
    }

    #[test]
    fn a_scope_with_few_readable_rows_is_sampled_on_further_passes() {
        // Every 100th row readable: the first pass (stride 390) finds 26;
        // later passes, one row on, find more, within the visit cap.
        let b = sample(100_000, |i| i % 100 == 0, |_| Some(0.3)).unwrap();
        assert!(b.sampled > 10 && b.sampled < SAMPLE, "{}", b.sampled);
        let none = sample(100_000, |i| i == 99_999, |_| Some(0.3));
        assert_eq!(none, None, "one readable row is no background");
    }

    #[test]
    fn a_tiny_spread_does_not_make_a_small_difference_large() {
        let b = Background {
            mean: 0.5,
            sd: 0.001,
            sampled: 50,
        };
        assert!((b.z(0.52) - 1.0).abs() < 1e-4);
    }
}
