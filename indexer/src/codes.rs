//! Sign codes: one bit per coordinate of a unit vector, set where it is
//! positive, and how far apart two codes can plausibly be for a cosine.
//!
//! Two unit vectors at angle θ disagree in the sign of about θ/π of their
//! coordinates, so a Hamming distance between codes far above that rules a
//! pair out without a dot product. The scan ([`crate::vectors`]), the
//! partition lists ([`crate::partitions`]) and the near-pair search
//! ([`crate::near`]) all rank by these codes.

/// Share of the coordinates added to θ/π as the margin of
/// [`sign_distance_bound`].
const SIGN_MARGIN: f64 = 0.15;

/// The most sign-code bits (of `dim`) in which two unit vectors at cosine
/// `min_cosine` or more plausibly differ: `dim · (acos(min_cosine)/π + 0.15)`.
pub(crate) fn sign_distance_bound(min_cosine: f32, dim: usize) -> u32 {
    let theta = f64::from(min_cosine.clamp(-1.0, 1.0)).acos();
    let share = (theta / std::f64::consts::PI + SIGN_MARGIN).min(1.0);
    (share * dim as f64).ceil() as u32
}

/// One bit per coordinate, set where it is positive; `words` u64s.
pub(crate) fn sign_code(vector: &[f32], words: usize) -> Vec<u64> {
    let mut code = vec![0u64; words];
    // Word by word, without a branch per coordinate, so the compiler can
    // turn the comparisons into vector sign masks.
    for (word, chunk) in code.iter_mut().zip(vector.chunks(64)) {
        *word = chunk
            .iter()
            .enumerate()
            .fold(0u64, |bits, (j, x)| bits | (u64::from(*x > 0.0) << j));
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sign_code_sets_the_bits_of_positive_coordinates() {
        let v: Vec<f32> = (0..70)
            .map(|i| if i % 3 == 0 { 0.5 } else { -0.1 })
            .collect();
        let code = sign_code(&v, 2);
        for i in 0..128 {
            let set = code[i / 64] >> (i % 64) & 1 == 1;
            assert_eq!(set, i < 70 && i % 3 == 0, "bit {i}");
        }
    }

    #[test]
    fn the_bound_tightens_as_the_cosine_rises() {
        assert_eq!(sign_distance_bound(0.82, 384), 133);
        assert_eq!(sign_distance_bound(0.94, 384), 101);
        assert_eq!(sign_distance_bound(-1.0, 384), 384);
        assert!(sign_distance_bound(1.0, 384) < sign_distance_bound(0.5, 384));
    }
}
